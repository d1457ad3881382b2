#!/usr/bin/env bash
# Remoting produce and pull throughput with TLS on and off against one standalone (permissive,
# the default: both on the same port), alternating in the same run, and the server's CPU per
# message. Each pull reads the topic's backlog from the start with a new group (4 connections).
# Usage: bash scripts/bench-tls.sh [RUNS] [SECONDS]
# Starts its own standalone (release build) on ports 19876/19911/18081 in a temporary directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RUNS=${1:-3}
SECS=${2:-5}
cargo build --release -j1 -p ferromq-cli >&2
BIN=target/release/ferromq
D=$(mktemp -d)
$BIN standalone --no-dashboard --data-dir "$D/data" --namesrv-port 19876 --broker-port 19911 --grpc-port 18081 > "$D/server.log" 2>&1 &
PID=$!
trap 'kill $PID; rm -rf "$D"' EXIT
NS=127.0.0.1:19876
for _ in $(seq 1 50); do $BIN admin clusterList -n $NS 2>/dev/null | grep -q broker && break; sleep 0.2; done
$BIN admin updateTopic -n $NS -c DefaultCluster -t TlsBench -r 8 -w 8 > /dev/null
cpu() { awk '{print $14+$15}' /proc/$PID/stat; }
TICK=$(getconf CLK_TCK)
field() { python3 -c "import json,sys;d=json.load(open(sys.argv[1]))['produce'];print(eval(sys.argv[2]))" "$1" "$2"; }
cfield() { python3 -c "import json,sys;d=json.load(open(sys.argv[1]))['consume'];print(eval(sys.argv[2]))" "$1" "$2"; }
for r in $(seq 1 "$RUNS"); do
  for tls in off on; do
    flag=(); [ "$tls" = on ] && flag=(--tls)
    c0=$(cpu)
    $BIN bench produce -n $NS -t TlsBench -w 64 -s 1024 --duration "$SECS" --quiet "${flag[@]}" --json "$D/r.json" > /dev/null
    c1=$(cpu)
    rate=$(field "$D/r.json" "round(d['msgs_per_s'])")
    n=$(field "$D/r.json" "d['acked']")
    lat=$(field "$D/r.json" "f\"{d['latency_us']['p50']}/{d['latency_us']['p99']}\"")
    failed=$(field "$D/r.json" "d['failed']")
    cpu_us=$(python3 -c "import sys;a,b,n,t=map(float,sys.argv[1:]);print(f'{(b-a)/t*1e6/max(n,1):.1f}')" "$c0" "$c1" "$n" "$TICK")
    echo "run $r tls=$tls produce: $rate msgs/s, p50/p99 $lat us, server CPU $cpu_us us/msg, failed $failed"
    c0=$(cpu)
    $BIN bench consume -n $NS -t TlsBench -g "g_tls_${r}_$tls" --from-start --duration "$SECS" --quiet "${flag[@]}" --json "$D/c.json" > /dev/null
    c1=$(cpu)
    rate=$(cfield "$D/c.json" "round(d['msgs_per_s'])")
    n=$(cfield "$D/c.json" "d['consumed']")
    errors=$(cfield "$D/c.json" "d['pull_errors']")
    cpu_us=$(python3 -c "import sys;a,b,n,t=map(float,sys.argv[1:]);print(f'{(b-a)/t*1e6/max(n,1):.2f}')" "$c0" "$c1" "$n" "$TICK")
    echo "run $r tls=$tls pull: $rate msgs/s, server CPU $cpu_us us/msg, pull errors $errors"
  done
done
