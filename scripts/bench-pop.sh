#!/usr/bin/env bash
# POP against pull on the same backlog, with broker CPU per message, then revive lateness.
# Usage: bash scripts/bench-pop.sh [RUNS] [extra `bench pop` flags, e.g. --batch-ack]
# BROKER_CONF="key=value ..." adds broker.conf lines (e.g. enablePopBufferMerge=true).
# Starts its own standalone (release build) on ports 19876/19911 in a temporary directory.
# Each run: 200k 1 KiB messages into a new 4-queue topic, `bench consume --from-start`
# (pull, 32 per request), then `bench pop` (32 per pop, queue id -1, every message acked) of
# the same backlog by a new group. CPU is the broker process's utime+stime over each phase.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RUNS=${1:-3}
shift || true
cargo build --release -j2 -p ferromq-cli >&2
BIN=target/release/ferromq
D=$(mktemp -d)
printf '%s\n' ${BROKER_CONF:-} > "$D/broker.conf"
$BIN standalone --no-dashboard --data-dir "$D/data" --namesrv-port 19876 --broker-port 19911 -c "$D/broker.conf" > "$D/broker.log" 2>&1 &
PID=$!
trap 'kill $PID; rm -rf "$D"' EXIT
sleep 3
NS=127.0.0.1:19876
cpu() { awk '{print $14+$15}' /proc/$PID/stat; }
TICK=$(getconf CLK_TCK)
rate() { python3 -c "import json,sys;print(round(json.load(open(sys.argv[1]))['consume']['msgs_per_s']))" "$1"; }
count() { python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['consume']['consumed'])" "$1"; }
for r in $(seq 1 "$RUNS"); do
  T=PopBench$r
  $BIN bench produce -n $NS -t $T --queues 4 -s 1024 -q 200000 --duration 120 --quiet > /dev/null
  c0=$(cpu)
  $BIN bench consume -n $NS -t $T --queues 4 --from-start -g pull$r -q 200000 --duration 60 --quiet --json "$D/pull.json" > /dev/null
  c1=$(cpu)
  $BIN bench pop -n $NS -t $T --queues 4 -g pop$r -q 200000 --duration 60 --quiet --json "$D/pop.json" "$@" > /dev/null
  c2=$(cpu)
  pull=$(rate "$D/pull.json"); pop=$(rate "$D/pop.json"); n=$(count "$D/pop.json")
  python3 -c "import sys; pull,pop,c0,c1,c2,n,t=map(float,sys.argv[1:]); print(f'run $r pull {pull:.0f}/s pop+ack {pop:.0f}/s ratio {pop/pull:.2f} broker CPU us/msg pull {(c1-c0)/t*1e6/200000:.2f} pop+ack {(c2-c1)/t*1e6/max(n,1):.2f}')" \
    "$pull" "$pop" "$c0" "$c1" "$c2" "$n" "$TICK"
done
$BIN bench produce -n $NS -t ReviveBench --queues 4 -s 1024 -q 100000 --duration 120 --quiet > /dev/null
$BIN bench revive -n $NS -t ReviveBench -g revive -q 100000 --invisible-ms 10000 --duration 60
