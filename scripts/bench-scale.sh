#!/usr/bin/env bash
# scripts/bench-scale.sh -- FerroMQ standalone scale measurements (restart time vs store size, memory).
#
# What it measures
#   Part "restart":
#     Builds a store with TOPICS topics x 8 queues (each topic gets MSGS_PER_TOPIC 1 KiB messages
#     spread round-robin over its queues, via `bench produce -q`), plus a small check topic
#     SmallT and a probe topic ReadyProbe, then adds bulk 1 KiB messages to topic Bulk (send_load)
#     until the CommitLog max offset reaches each size in SIZES_GIB. At each size:
#       (a) clean restart: SIGTERM, wait for exit, start again;
#       (b) crash restart: SIGKILL while send_load (Bulk) + bench produce (SmallT) are running,
#           start again, then check that every acknowledged message is still there
#           (sum of max offsets from `admin topicStatus` >= before + acked).
#     "ready" = from process start until BOTH a 1-message `bench produce` to the existing topic
#     ReadyProbe (through the name server) is acked AND `admin topicStatus -t SmallT` answers with
#     8 queues and the expected max offsets. Polled back-to-back (each poll spawns 2 client
#     processes, ~10-30 ms). Also reported: log timestamps (relative to process start) of
#     "store recovered" (end of store recovery), "broker listening" and the name server's
#     "new broker registered"; VmRSS / VmHWM / RssAnon / RssFile right after ready.
#   Part "memory":
#     Fresh standalone: RSS idle; after MEM_TOPICS topics x 8 queues created (`bench topics`,
#     checked with `admin topicList` on the name server); after 100 msgs into each of 100 topics;
#     with CONNS idle plain TCP connections (python3 asyncio, connect only, no request sent, from
#     source addresses 127.0.0.2.. with 500 each because of the broker's 1000-per-address limit) to
#     the broker port -> RSS per connection, and broker CPU (utime+stime) over IDLE_SECS idle.
#
# Usage
#   ./bench-scale.sh [all|restart|memory]
#   Sizes via environment variables (defaults = full run):
#     TOPICS=1250 MSGS_PER_TOPIC=240 SIZES_GIB="2 5 10" MEM_TOPICS=10000 CONNS=10000 IDLE_SECS=30
#   Smoke run:
#     TOPICS=20 MSGS_PER_TOPIC=16 SIZES_GIB="0.3 0.6" MEM_TOPICS=200 CONNS=300 IDLE_SECS=5 ./bench-scale.sh
#   SKIP_SEED=1 ./bench-scale.sh restart : continue on the existing $WORK/data-restart (no seeding),
#     appending rows to restart.tsv (e.g. after an interrupted run; only the remaining sizes in SIZES_GIB).
#   Output: $OUT (default $WORK/out) : restart.tsv, memory.tsv, broker logs, client outputs.
#   Data dirs are under $WORK/data-* and deleted at the end unless KEEP_DATA=1.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -z "${BIN:-}" ]; then
  cargo build --release -j2 -p ferromq-cli >&2
  cargo build --release -j2 -p ferromq-broker --example send_load >&2
fi
BIN=${BIN:-$PWD/target/release/ferromq}
SEND=${SEND:-$PWD/target/release/examples/send_load}
WORK=${WORK:-$(mktemp -d /tmp/bench-scale.XXXXXX)}
OUT=${OUT:-$WORK/out}
TOPICS=${TOPICS:-1250}
MSGS_PER_TOPIC=${MSGS_PER_TOPIC:-240}
SIZES_GIB=${SIZES_GIB:-"2 5 10"}
MEM_TOPICS=${MEM_TOPICS:-10000}
CONNS=${CONNS:-10000}
IDLE_SECS=${IDLE_SECS:-30}
CRASH_LOAD_SECS=${CRASH_LOAD_SECS:-3}    # seconds of load before kill -9
NS_PORT=41876; BR_PORT=41911; GRPC_PORT=41081; MET_PORT=41100
NS=127.0.0.1:$NS_PORT; BR=127.0.0.1:$BR_PORT
MODE=${1:-all}
mkdir -p "$OUT"
ulimit -n "$(ulimit -Hn)"   # broker (child) and python client need > CONNS fds
printf 'flushDiskType=ASYNC_FLUSH\nmappedFileSizeCommitLog=1073741824\n' > "$WORK/broker.conf"

PID=""; T0=""; LOG=""
now() { date +%s.%N; }
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/progress.log" >&2; }

start_broker() { # $1 data dir, $2 log file
  LOG=$2
  T0=$(now)
  "$BIN" standalone --bind 127.0.0.1 --no-dashboard --data-dir "$1" --namesrv-port $NS_PORT \
     --broker-port $BR_PORT --grpc-port $GRPC_PORT --metrics-port $MET_PORT -c "$WORK/broker.conf" >>"$LOG" 2>&1 &
  PID=$!
}
stop_broker() { # $1 = TERM|KILL ; sets SD = seconds until the process exited (not in a subshell: uses wait)
  local t=$(now)
  kill -"$1" "$PID"
  wait "$PID" 2>/dev/null
  SD=$(python3 -c "print(round($(now)-$t,3))")
}
mem() { # VmRSS VmHWM RssAnon RssFile (MiB) Threads fds
  awk '/^VmRSS|^VmHWM|^RssAnon|^RssFile/{printf "%.1f ", $2/1024} /^Threads/{t=$2} END{printf "%s ", t}' /proc/$PID/status
  ls /proc/$PID/fd | wc -l
}
cpu_ticks() { awk '{print $14+$15}' /proc/$PID/stat; }
# prints "<queues> <sum of max offsets>" (queues=0 when it fails)
topic_sum() { timeout 10 "$BIN" admin topicStatus -n $NS -t "$1" 2>/dev/null | awk '$1=="broker-a"{n++; s+=$4} END{print n+0, s+0}'; }
cl_offset() { timeout 10 "$BIN" admin brokerStatus -n $NS -b $BR 2>/dev/null | awk '$1=="commitLogMaxOffset"{print $3}'; }
probe_send() {
  rm -f "$OUT/rp.json"
  timeout 5 "$BIN" bench produce -n $NS -t ReadyProbe -q 1 -w 1 --duration 4 --timeout-ms 1000 -s 16 --quiet --json "$OUT/rp.json" >/dev/null 2>&1
  python3 -c "import json,sys; sys.exit(0 if json.load(open('$OUT/rp.json'))['produce']['acked']==1 else 1)" 2>/dev/null
}
wait_ready() { # $1 expected minimum SmallT sum ("-": only the probe send) ; prints ready seconds
  local exp=$1 sent=0 st
  while :; do
    if [ $sent = 0 ] && probe_send; then sent=1; fi
    if [ $sent = 1 ] && [ "$exp" = - ]; then break; fi
    if [ $sent = 1 ]; then
      st=$(topic_sum SmallT)
      if [ "${st% *}" = 8 ] && [ "${st#* }" -ge "$exp" ]; then break; fi
    fi
    kill -0 "$PID" 2>/dev/null || { echo "BROKER DIED" >&2; return 1; }
    sleep 0.02
  done
  python3 -c "print(round($(now)-$T0,3))"
}
# log timestamps (s after T0) of recovery / listening / registration, plus the recovery line
log_times() { # $1 log file, $2 T0, $3 first line of this run
  python3 - "$1" "$2" "$3" <<'EOF'
import sys, datetime, re
f, t0, first = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
lines = open(f, errors='replace').read().splitlines()[first:]
def ts(l):
    m = re.match(r'(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z', l)
    return datetime.datetime.strptime(m.group(1)[:26], '%Y-%m-%dT%H:%M:%S.%f').replace(tzinfo=datetime.timezone.utc).timestamp() if m else None
out = {}
for l in lines:
    for key, pat in (('cq_loaded', 'consume queues loaded'), ('store_recovered', 'store recovered'),
                     ('listening', 'broker listening'), ('registered', 'new broker registered')):
        if pat in l and key not in out and ts(l):
            out[key] = round(ts(l) - t0, 3)
            if key == 'store_recovered':
                out['recov_line'] = l.split('message_store: ')[-1]
print('\t'.join(str(out.get(k, '-')) for k in ('cq_loaded', 'store_recovered', 'listening', 'registered', 'recov_line')))
EOF
}

restart_part() {
  local D=$WORK/data-restart BL=$OUT/broker-restart.log
  if [ "${SKIP_SEED:-0}" = 1 ]; then  # continue on an existing store (data dir kept from an earlier run)
    start_broker "$D" "$BL"; wait_ready - >/dev/null
  else
  rm -rf "$D"; : > "$BL"
  printf 'size_target_gib\tcommitlog_bytes\tkind\tshutdown_s\tready_s\tcq_loaded_s\tstore_recovered_s\tlistening_s\tregistered_s\tVmRSS_MiB\tVmHWM_MiB\tRssAnon_MiB\tRssFile_MiB\tthreads\tfds\tcheck\trecovery_log\n' > "$OUT/restart.tsv"
  start_broker "$D" "$BL"; sleep 1
  log "seeding: $TOPICS topics x 8 queues, $MSGS_PER_TOPIC msgs each"
  local t=$(now)
  "$BIN" bench topics -n $NS -b $BR --topics "$TOPICS" --chunk 1000 --creation-only --prefix S_ > "$OUT/seed-topics.txt" 2>&1
  "$BIN" bench produce -n $NS -t SmallT -q 200 -s 1024 --quiet >/dev/null 2>&1
  "$BIN" bench produce -n $NS -t ReadyProbe -q 1 -s 16 --quiet >/dev/null 2>&1
  seq 0 $((TOPICS-1)) | xargs -P 4 -I{} sh -c "'$BIN' bench produce -n $NS -t S_{} -q $MSGS_PER_TOPIC -w 16 -s 1024 --duration 30 --quiet >/dev/null 2>&1 || echo FAIL S_{}" > "$OUT/seed-fail.txt"
  log "seeded in $(python3 -c "print(round($(now)-$t,1))") s; failures: $(wc -l < "$OUT/seed-fail.txt"); S_0: $(topic_sum S_0); S_$((TOPICS-1)): $(topic_sum S_$((TOPICS-1)))"
  fi
  log "cq dirs: $(find "$D/store/consumequeue" -mindepth 2 -maxdepth 2 -type d | wc -l)"
  for G in $SIZES_GIB; do
    local target; target=$(python3 -c "print(int($G*2**30))")
    local off; off=$(cl_offset)
    while [ "$off" -lt "$target" ]; do
      local secs; secs=$(python3 -c "print(max(1,min(60,int(($target-$off)/125e6))))")
      "$SEND" $BR 64 "$secs" Bulk 4 1024 >> "$OUT/bulk-fill.jsonl" 2>&1
      off=$(cl_offset)
    done
    sleep 2; off=$(cl_offset)
    log "size ${G} GiB: commitLogMaxOffset=$off ; du store: $(du -sh "$D" | cut -f1)"
    local small; small=$(topic_sum SmallT); small=${small#* }
    # (a) clean restart
    stop_broker TERM; local sd=$SD
    local first; first=$(wc -l < "$BL")
    start_broker "$D" "$BL"
    local r; r=$(wait_ready "$small")
    local m; m=$(mem)
    sleep 1
    local lt; lt=$(log_times "$BL" "$T0" "$first")
    printf '%s\t%s\tclean(SIGTERM)\t%s\t%s\t%s\t%s\t%s\n' "$G" "$off" "$sd" "$r" "$(cut -f1-4 <<<"$lt")" "$(tr ' ' '\t' <<<"$m")" "-	$(cut -f5 <<<"$lt")" >> "$OUT/restart.tsv"
    log "clean restart ${G}: ready ${r}s mem $m"
    # (b) crash restart during load
    local pre_s pre_b; pre_s=$(topic_sum SmallT); pre_s=${pre_s#* }; pre_b=$(topic_sum Bulk); pre_b=${pre_b#* }
    rm -f "$OUT/crash-small.json"
    timeout 60 "$SEND" $BR 64 $((CRASH_LOAD_SECS+4)) Bulk 4 1024 > "$OUT/crash-bulk-$G.json" 2>"$OUT/crash-bulk-$G.err" &
    local sp=$!
    timeout 60 "$BIN" bench produce -n $NS -t SmallT -w 4 -s 1024 --duration $((CRASH_LOAD_SECS+4)) --timeout-ms 1000 --quiet --json "$OUT/crash-small-$G.json" > "$OUT/crash-small-$G.out" 2>&1 &
    local bp=$!
    sleep "$CRASH_LOAD_SECS"
    off=$(cl_offset)
    stop_broker KILL; sd=$SD
    wait $sp; wait $bp
    local ack_b ack_s
    ack_b=$(python3 -c "import json;print(json.loads(open('$OUT/crash-bulk-$G.json').read().strip().splitlines()[-1])['acked'])" 2>/dev/null || echo NA)
    ack_s=$(python3 -c "import json;print(json.load(open('$OUT/crash-small-$G.json'))['produce']['acked'])" 2>/dev/null || echo NA)
    first=$(wc -l < "$BL")
    start_broker "$D" "$BL"
    r=$(wait_ready "$pre_s")
    m=$(mem)
    sleep 1
    lt=$(log_times "$BL" "$T0" "$first")
    local post_s post_b; post_s=$(topic_sum SmallT); post_s=${post_s#* }; post_b=$(topic_sum Bulk); post_b=${post_b#* }
    local chk
    chk=$(python3 -c "
ps,qs,as_,pb,qb,ab='$pre_s','$post_s','$ack_s','$pre_b','$post_b','$ack_b'
def c(p,q,a):
    if a=='NA': return 'acked=NA got=%d'%(int(q)-int(p))
    return ('OK' if int(q)-int(p)>=int(a) else 'LOST') + ' acked=%s got=%d'%(a,int(q)-int(p))
print('SmallT:'+c(ps,qs,as_)+' Bulk(send_load, acks not countable): +%d'%(int(qb)-int(pb)))")
    printf '%s\t%s\tcrash(SIGKILL under load)\t%s\t%s\t%s\t%s\t%s\t%s\n' "$G" "$off" "$sd" "$r" "$(cut -f1-4 <<<"$lt")" "$(tr ' ' '\t' <<<"$m")" "$chk" "$(cut -f5 <<<"$lt")" >> "$OUT/restart.tsv"
    log "crash restart ${G}: ready ${r}s mem $m check $chk"
  done
  stop_broker TERM
  du -sh "$D" > "$OUT/restart-du.txt"
  du -sh "$D"/store/* >> "$OUT/restart-du.txt"
  [ "${KEEP_DATA:-0}" = 1 ] || rm -rf "$D"
}

memory_part() {
  local D=$WORK/data-memory BL=$OUT/broker-memory.log
  rm -rf "$D"; : > "$BL"
  printf 'state\tVmRSS_MiB\tVmHWM_MiB\tRssAnon_MiB\tRssFile_MiB\tthreads\tfds\tnote\n' > "$OUT/memory.tsv"
  row() { printf '%s\t%s\t%s\n' "$1" "$(mem | tr ' ' '\t')" "${2:-}" >> "$OUT/memory.tsv"; }
  start_broker "$D" "$BL"; wait_ready - >/dev/null
  sleep 5; row "idle (after 1 probe message)"
  local t=$(now)
  "$BIN" bench topics -n $NS -b $BR --topics "$MEM_TOPICS" --chunk 1000 --creation-only --prefix M_ > "$OUT/mem-topics.txt" 2>&1
  local ct; ct=$(python3 -c "print(round($(now)-$t,2))")
  local nt=0
  for i in $(seq 1 60); do
    nt=$(timeout 20 "$BIN" admin topicList -n $NS 2>/dev/null | grep -c '^M_')
    [ "$nt" -ge "$MEM_TOPICS" ] && break; sleep 1
  done
  sleep 5; row "$MEM_TOPICS topics x 8 queues, no messages" "created in ${ct}s; name server lists $nt M_ topics"
  seq 0 99 | xargs -P 4 -I{} sh -c "'$BIN' bench produce -n $NS -t M_{} -q 100 -w 16 -s 1024 --duration 30 --quiet >/dev/null 2>&1 || echo FAIL M_{}" > "$OUT/mem-fail.txt"
  sleep 5; row "+ 100 msgs x 1 KiB into each of 100 topics" "failures: $(wc -l < "$OUT/mem-fail.txt")"
  local before; before=$(awk '/^VmRSS/{print $2}' /proc/$PID/status)
  local beforeAnon; beforeAnon=$(awk '/^RssAnon/{print $2}' /proc/$PID/status)
  rm -f "$OUT/conns.out"
  python3 - "$CONNS" "$BR_PORT" $((IDLE_SECS+20)) > "$OUT/conns.out" 2>&1 <<'EOF' &
import asyncio, sys, resource, time
n, port, hold = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
async def main():
    sem = asyncio.Semaphore(200); conns = []; fails = 0
    # the broker refuses more than 1000 connections per client address (log: "connection limit of
    # this client address reached; refusing ... max=1000"), so spread them over source addresses
    # 127.0.0.2.. (500 each); the broker still listens on 127.0.0.1 only.
    async def one(i):
        nonlocal fails
        async with sem:
            try:
                conns.append(await asyncio.open_connection('127.0.0.1', port, local_addr=(f'127.0.0.{2 + i // 500}', 0)))
            except Exception as e:
                fails += 1
    t = time.time()
    await asyncio.gather(*(one(i) for i in range(n)))
    print(f"OPEN {len(conns)} fails={fails} in {time.time()-t:.2f}s", flush=True)
    await asyncio.sleep(hold)
    closed_by_peer = sum(1 for r, w in conns if r.at_eof())
    print(f"closed_by_peer_during_hold={closed_by_peer}", flush=True)
    for r, w in conns: w.close()
    print("CLOSED", flush=True)
asyncio.run(main())
EOF
  local pyp=$!
  until grep -q OPEN "$OUT/conns.out" 2>/dev/null; do sleep 0.2; done
  sleep 3
  local est; est=$(ss -tn state established "( sport = :$BR_PORT )" | tail -n +2 | wc -l)
  local after; after=$(awk '/^VmRSS/{print $2}' /proc/$PID/status)
  local afterAnon; afterAnon=$(awk '/^RssAnon/{print $2}' /proc/$PID/status)
  local per; per=$(python3 -c "print(round(($after-$before)/$CONNS,2), 'KiB/conn VmRSS;', round(($afterAnon-$beforeAnon)/$CONNS,2), 'KiB/conn RssAnon')")
  row "+ $CONNS idle TCP connections (connect only)" "$(head -1 "$OUT/conns.out"); established on broker port: $est; $per"
  local c0 c1 tk; c0=$(cpu_ticks); tk=$(getconf CLK_TCK)
  sleep "$IDLE_SECS"
  c1=$(cpu_ticks)
  row "  after $IDLE_SECS s idle with $CONNS connections" "broker CPU over ${IDLE_SECS}s: $(python3 -c "print(round(($c1-$c0)/$tk,2), 's =', round(100*($c1-$c0)/$tk/$IDLE_SECS,2), '% of one core')")"
  wait $pyp
  sleep 5; row "connections closed again" "$(tail -2 "$OUT/conns.out" | tr '\n' ' ')"
  stop_broker TERM
  [ "${KEEP_DATA:-0}" = 1 ] || rm -rf "$D"
}

log "start mode=$MODE TOPICS=$TOPICS MSGS_PER_TOPIC=$MSGS_PER_TOPIC SIZES_GIB='$SIZES_GIB' MEM_TOPICS=$MEM_TOPICS CONNS=$CONNS IDLE_SECS=$IDLE_SECS ulimit-n=$(ulimit -n)"
case $MODE in
  restart) restart_part ;;
  memory) memory_part ;;
  all) restart_part; memory_part ;;
esac
log "done"
# Only the parts that ran wrote their table (the script used to end with 1 when one had not).
for table in restart memory; do
  if [ -f "$OUT/$table.tsv" ]; then column -t -s $'\t' "$OUT/$table.tsv"; fi
done
