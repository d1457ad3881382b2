#!/usr/bin/env bash
# Replication load on this machine (issue 7): a name server, then (a) a single ASYNC_MASTER
# broker (the baseline), (b) ASYNC_MASTER + slave, (c) SYNC_MASTER (inSyncReplicas=2) + slave,
# each loaded with `ferromq bench produce` (1 KiB, 256 in flight by default) for [secs] seconds,
# [runs] times, rotating a, b, c so noise hits all three alike. Prints the bench's result
# line and the slave's lag (GET_BROKER_HA_STATUS diff) sampled at the end of each run.
# Usage: scripts/bench-ha.sh [seconds per run] [runs] [in flight]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs="${1:-5}"
runs="${2:-3}"
inflight="${3:-256}"
cargo build --release -j2 -p ferromq-cli >&2
F=./target/release/ferromq
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
ns_port=29976
printf 'listenPort=%s\n' "$ns_port" > "$work/ns.conf"
$F namesrv -c "$work/ns.conf" >/dev/null 2>&1 &
sleep 1

# broker <name> <port> <id> <role> [extra lines...]: writes its conf, starts it, prints its pid.
broker() {
    local name=$1 port=$2 id=$3 role=$4
    shift 4
    {
        printf 'brokerClusterName=HaBench\nbrokerName=%s\nbrokerId=%s\nbrokerRole=%s\n' "$name" "$id" "$role"
        printf 'listenPort=%s\nbrokerIP1=127.0.0.1\nbrokerIP2=127.0.0.1\nnamesrvAddr=127.0.0.1:%s\n' "$port" "$ns_port"
        printf 'storePathRootDir=%s\nmapedFileSizeCommitLog=268435456\nflushDiskType=ASYNC_FLUSH\n' "$work/$name-$id"
        for line in "$@"; do printf '%s\n' "$line"; done
    } > "$work/$name-$id.conf"
    $F broker -c "$work/$name-$id.conf" >/dev/null 2>&1 &
    echo $!
}

run_case() {
    local label=$1 name=$2 with_slave=$3 role=$4
    shift 4
    local m s=""
    m=$(broker "$name" 31911 0 "$role" "haListenPort=31912" "$@")
    if [ "$with_slave" = yes ]; then
        s=$(broker "$name" 32911 1 SLAVE "haMasterAddress=127.0.0.1:31912")
    fi
    sleep 2
    if [ -n "$s" ]; then
        # Load only once the slave is connected and in sync (its client retries every 5 s).
        for _ in $(seq 60); do
            if $F admin haStatus -n "127.0.0.1:$ns_port" -b 127.0.0.1:31911 --json 2>/dev/null | grep -q '"inSyncSlaveNums": *1'; then
                break
            fi
            sleep 0.5
        done
    fi
    local line mid="" sampler=""
    if [ -n "$s" ]; then
        # The slave's lag in the middle of the load.
        ( sleep "$(awk "BEGIN {print $secs / 2}")"
          $F admin haStatus -n "127.0.0.1:$ns_port" -b 127.0.0.1:31911 --json 2>/dev/null | grep -o '"diff": *[0-9-]*' | head -1 > "$work/mid" || true ) &
        sampler=$!
    fi
    line=$($F bench produce -n "127.0.0.1:$ns_port" -t "Bench$name" -s 1024 -w "$inflight" --duration "$secs" --quiet 2>&1 | tail -1)
    if [ -n "$s" ]; then wait "$sampler" 2>/dev/null || true; mid=$(cat "$work/mid" 2>/dev/null || true); fi
    local lag=""
    if [ -n "$s" ]; then
        # Bytes the slave is behind right after the load stops.
        lag=$($F admin haStatus -n "127.0.0.1:$ns_port" -b 127.0.0.1:31911 --json 2>/dev/null | grep -o '"diff": *[0-9-]*' | head -1 || true)
    fi
    echo "$label | $line | slave behind mid-run: ${mid:-n/a}, after: ${lag:-n/a}"
    # The brokers were started in command substitutions (not this shell's children): poll
    # until they are gone, so the next case's master never meets this case's slave.
    kill -TERM "$m" ${s:+"$s"} 2>/dev/null || true
    for pid in "$m" $s; do
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done
}

for r in $(seq "$runs"); do
    run_case "run $r single ASYNC_MASTER" "single$r" no ASYNC_MASTER
    run_case "run $r ASYNC_MASTER + slave" "async$r" yes ASYNC_MASTER
    run_case "run $r SYNC_MASTER + slave" "sync$r" yes SYNC_MASTER "inSyncReplicas=2"
done
