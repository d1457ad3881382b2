#!/usr/bin/env bash
# Light message queues (enableLmq) on a standalone broker (release build), same run:
#   sends: plain against 1, 10 and 100 light queues per message (interleaved, RUNS rounds),
#          throughput and the process's CPU per message;
#   scale: LMQ_TOTAL light queues created by sends (100 per message), the process's RSS
#          before and after, the consume queue disk use, then restart times (clean stop and
#          SIGKILL) and the RSS after each.
# Usage: bash scripts/bench-lmq.sh [RUNS] [LMQ_TOTAL]
# Ports 29876/29911; a temporary directory (deleted at exit).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RUNS=${1:-3}
TOTAL=${2:-1000000}
cargo build --release -j2 -p ferromq-cli >&2
BIN=target/release/ferromq
D=$(mktemp -d)
NS=127.0.0.1:29876
printf 'enableLmq=true\nenableMultiDispatch=true\nmaxLmqConsumeQueueNum=%s\n' $((TOTAL + 10000)) > "$D/broker.conf"
PID=
start() {
  $BIN standalone --no-dashboard --no-proxy -c "$D/broker.conf" --data-dir "$D/data" \
    --namesrv-port 29876 --broker-port 29911 >> "$D/server.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 3000); do $BIN admin clusterList -n $NS 2>/dev/null | grep -q broker && return; sleep 0.1; done
  echo "broker did not start" >&2; tail -20 "$D/server.log" >&2; exit 1
}
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; rm -rf "$D"' EXIT
cpu() { awk '{print $14+$15}' /proc/$PID/stat; }
rss_mib() { awk '/VmRSS/ {printf "%.1f", $2/1024}' /proc/$PID/status; }
TICK=$(getconf CLK_TCK)
jq_() { python3 -c "import json,sys;d=json.load(open(sys.argv[1]));print(eval(sys.argv[2]))" "$1" "$2"; }
per_msg() { python3 -c "import sys;a,b,n,t=map(float,sys.argv[1:]);print(f'{(b-a)/t*1e6/max(n,1):.1f}')" "$@"; }

start
$BIN admin updateTopic -n $NS -c DefaultCluster -t LmqBench -r 4 -w 4 > /dev/null
echo "sends (w=64, 128-byte bodies, 8 s each; light queues drawn from a pool of 1000):"
for r in $(seq 1 "$RUNS"); do
  line="run $r:"
  for f in 0 1 10 100; do
    c0=$(cpu)
    $BIN bench produce -n $NS -t LmqBench -w 64 -s 128 --duration 8 --lmqFanout $f --lmqQueues 1000 \
      --quiet --json "$D/p.json" > /dev/null
    c1=$(cpu)
    n=$(jq_ "$D/p.json" "d['produce']['acked']"); rate=$(jq_ "$D/p.json" "round(d['produce']['msgs_per_s'])")
    [ "$f" = 0 ] && base=$rate
    ratio=$(python3 -c "print(f'{$rate/$base:.2f}')")
    line="$line | fanout $f: $rate/s (x$ratio) $(per_msg "$c0" "$c1" "$n" "$TICK") us CPU/msg"
    # Let dispatch catch up before the next measurement.
    sleep 3
  done
  echo "$line"
done

echo "scale: $TOTAL light queues, 100 per message"
kill $PID; wait $PID || true
rm -rf "$D/data"
start
rss0=$(rss_mib)
t0=$(date +%s.%N)
$BIN bench produce -n $NS -t LmqBench -w 8 -s 128 -q $((TOTAL / 100)) --duration 3600 --lmqFanout 100 \
  --lmqQueues "$TOTAL" --quiet --json "$D/p.json" > /dev/null
t1=$(date +%s.%N)
# Dispatch creates the consume queues behind the sends: wait until the count settles.
prev=-1
while :; do
  n=$(find "$D/data/store/consumequeue" -maxdepth 1 -name '%LMQ%*' | wc -l)
  [ "$n" = "$prev" ] && break
  prev=$n; sleep 5
done
t2=$(date +%s.%N)
rss1=$(rss_mib)
du_cq=$(du -sm "$D/data/store/consumequeue" | cut -f1)
python3 - "$rss0" "$rss1" "$n" "$t0" "$t1" "$t2" "$du_cq" <<'PY'
import sys
rss0, rss1, n, t0, t1, t2, du = map(float, sys.argv[1:])
print(f"created {n:.0f} light queues: sends {t1-t0:.1f} s, consume queues settled {t2-t0:.1f} s; "
      f"RSS {rss0:.1f} -> {rss1:.1f} MiB ({(rss1-rss0)*1048576/max(n,1):.0f} B per light queue); "
      f"consumequeue on disk {du:.0f} MiB")
PY
for how in TERM KILL; do
  kill -$how $PID; wait $PID 2>/dev/null || true
  s0=$(date +%s.%N)
  start
  s1=$(date +%s.%N)
  # The first send to one of the old light queues opens and reads it.
  $BIN bench produce -n $NS -t LmqBench -w 1 -s 128 -q 1 --lmqFanout 1 --lmqQueues 1 --quiet --json "$D/q.json" > /dev/null
  recovered=$(grep -o 'store recovered.*' "$D/server.log" | tail -1 | grep -o 'commit_log_check_ms=[0-9]*' || true)
  checked=$(grep -o 'light queues checked.*' "$D/server.log" | tail -1 | grep -o 'elapsed_ms=[0-9]*' || true)
  python3 -c "print(f'restart after SIG$how: serving in {$s1-$s0:.1f} s ($recovered ${checked:+light queues checked $checked}), RSS $(rss_mib) MiB')"
done
