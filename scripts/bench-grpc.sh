#!/usr/bin/env bash
# gRPC (5.x proxy, local mode in standalone) against remoting on the same broker, same run:
# SendMessage vs SEND_MESSAGE_V2 throughput at one concurrency, send latency at one in flight,
# ReceiveMessage+Ack vs POP+ACK over the same backlog, and the process's CPU per message.
# Usage: bash scripts/bench-grpc.sh [RUNS] [CONCURRENCY]
# Starts its own standalone (release build) on ports 19876/19911/18081 in a temporary directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RUNS=${1:-3}
W=${2:-64}
cargo build --release -j2 -p ferromq-cli >&2
BIN=target/release/ferromq
D=$(mktemp -d)
$BIN standalone --no-dashboard --data-dir "$D/data" --namesrv-port 19876 --broker-port 19911 --grpc-port 18081 > "$D/server.log" 2>&1 &
PID=$!
trap 'kill $PID; rm -rf "$D"' EXIT
NS=127.0.0.1:19876
EP=127.0.0.1:18081
for _ in $(seq 1 50); do $BIN admin clusterList -n $NS 2>/dev/null | grep -q broker && break; sleep 0.2; done
cpu() { awk '{print $14+$15}' /proc/$PID/stat; }
TICK=$(getconf CLK_TCK)
jq_() { python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print(eval(sys.argv[2]))" "$1" "$2"; }
per_msg() { python3 -c "import sys;a,b,n,t=map(float,sys.argv[1:]);print(f'{(b-a)/t*1e6/max(n,1):.1f}')" "$@"; }
for r in $(seq 1 "$RUNS"); do
  T=GrpcBench$r
  $BIN admin updateTopic -n $NS -c DefaultCluster -t $T -r 4 -w 4 -a +message.type=NORMAL > /dev/null
  c0=$(cpu)
  $BIN bench produce -n $NS -t $T -w "$W" -s 1024 --duration 10 --quiet --json "$D/rp.json" > /dev/null
  c1=$(cpu)
  $BIN bench grpc-produce --endpoint $EP -t $T -w "$W" -s 1024 --duration 10 --json "$D/gp.json" > /dev/null
  c2=$(cpu)
  rp=$(jq_ "$D/rp.json" "d['produce']['msgs_per_s']"); rn=$(jq_ "$D/rp.json" "d['produce']['acked']")
  gp=$(jq_ "$D/gp.json" "d['msgs_per_s']"); gn=$(jq_ "$D/gp.json" "d['ok']")
  $BIN bench produce -n $NS -t $T -w 1 -s 1024 --duration 5 --quiet --json "$D/rl.json" > /dev/null
  $BIN bench grpc-produce --endpoint $EP -t $T -w 1 -s 1024 --duration 5 --json "$D/gl.json" > /dev/null
  rl=$(jq_ "$D/rl.json" "str(d['produce']['latency_us']['p50'])+'/'+str(d['produce']['latency_us']['p99'])")
  gl=$(jq_ "$D/gl.json" "str(d['latency_us']['p50'])+'/'+str(d['latency_us']['p99'])")
  # Receive: the same backlog (what the sends above stored) by two new groups.
  c3=$(cpu)
  $BIN bench pop -n $NS -t $T -w 4 -g pop$r -q 50000 --duration 30 --quiet --json "$D/pop.json" > /dev/null
  c4=$(cpu)
  $BIN bench grpc-receive --endpoint $EP -t $T -w 4 -g grpc$r -q 50000 --duration 30 --json "$D/gr.json" > /dev/null
  c5=$(cpu)
  pp=$(jq_ "$D/pop.json" "d['consume']['msgs_per_s']"); pn=$(jq_ "$D/pop.json" "d['consume']['consumed']")
  gr=$(jq_ "$D/gr.json" "d['msgs_per_s']"); grn=$(jq_ "$D/gr.json" "d['ok']")
  python3 - "$r" "$rp" "$gp" "$pp" "$gr" <<PY
import sys
r, rp, gp, pp, gr = sys.argv[1], *map(float, sys.argv[2:])
print(f"run {r} send w=$W: remoting {rp:.0f}/s grpc {gp:.0f}/s ratio {gp/rp:.2f} | "
      f"CPU us/msg remoting $(per_msg $c0 $c1 $rn $TICK) grpc $(per_msg $c1 $c2 $gn $TICK) | "
      f"p50/p99 us at 1 in flight remoting $rl grpc $gl | "
      f"receive+ack: pop {pp:.0f}/s grpc {gr:.0f}/s ratio {gr/max(pp,1):.2f} "
      f"CPU us/msg pop $(per_msg $c3 $c4 $pn $TICK) grpc $(per_msg $c4 $c5 $grn $TICK)")
PY
done
