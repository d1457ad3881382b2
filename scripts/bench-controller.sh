#!/usr/bin/env bash
# Produce throughput of controller mode on this machine (issue 18), in one run: (a) a single
# ASYNC_MASTER broker (the baseline), (b) classic SYNC_MASTER (inSyncReplicas=2) + one slave,
# (c) a broker set of three in controller mode with allAckInSyncStateSet=true (three
# controllers), each loaded with `ferromq bench produce` (1 KiB, [in flight] in flight) for
# [secs] seconds, [runs] times, rotating a, b, c so noise hits all three alike.
# Usage: scripts/bench-controller.sh [seconds per run] [runs] [in flight]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs="${1:-5}"
runs="${2:-3}"
inflight="${3:-256}"
cargo build --release -j2 -p ferromq-cli >&2
F=./target/release/ferromq
work="$(mktemp -d)"
pids=()
trap 'kill ${pids[*]:-} $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
ns_port=29986
ns="127.0.0.1:$ns_port"
printf 'listenPort=%s\n' "$ns_port" > "$work/ns.conf"
$F namesrv -c "$work/ns.conf" >/dev/null 2>&1 &
sleep 1

# start <conf name> <lines...>: writes the conf, starts the process (`ferromq <kind>`), records its pid.
start() {
    local kind=$1 name=$2
    shift 2
    printf '%s\n' "$@" > "$work/$name.conf"
    $F "$kind" -c "$work/$name.conf" >"$work/$name.log" 2>&1 &
    pids+=($!)
}

stop_all() {
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for pid in "${pids[@]}"; do
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done
    pids=()
}

broker_lines() { # name port store
    printf 'brokerClusterName=CtlBench\nbrokerName=%s\nlistenPort=%s\nbrokerIP1=127.0.0.1\nbrokerIP2=127.0.0.1\nnamesrvAddr=%s\nstorePathRootDir=%s\nmapedFileSizeCommitLog=268435456\nflushDiskType=ASYNC_FLUSH\n' "$1" "$2" "$ns" "$work/$3"
}

load() { # label topic
    local line
    line=$($F bench produce -n "$ns" -t "$2" -s 1024 -w "$inflight" --duration "$secs" --quiet 2>&1 | tail -1)
    echo "$1 | $line"
}

for r in $(seq "$runs"); do
    # (a) one broker.
    mapfile -t lines < <(broker_lines "single$r" 31911 "single$r"; echo "brokerId=0"; echo "brokerRole=ASYNC_MASTER")
    start broker "single$r" "${lines[@]}"
    sleep 2
    load "run $r single broker" "BenchSingle$r"
    stop_all

    # (b) classic SYNC_MASTER + slave.
    mapfile -t lines < <(broker_lines "sync$r" 31911 "sync$r-m"; printf 'brokerId=0\nbrokerRole=SYNC_MASTER\ninSyncReplicas=2\nhaListenPort=31912\n')
    start broker "sync$r-m" "${lines[@]}"
    mapfile -t lines < <(broker_lines "sync$r" 32911 "sync$r-s"; printf 'brokerId=1\nbrokerRole=SLAVE\nhaMasterAddress=127.0.0.1:31912\n')
    start broker "sync$r-s" "${lines[@]}"
    for _ in $(seq 60); do
        if $F admin haStatus -n "$ns" -b 127.0.0.1:31911 --json 2>/dev/null | grep -q '"inSyncSlaveNums": *1'; then break; fi
        sleep 0.5
    done
    load "run $r SYNC_MASTER + slave" "BenchSync$r"
    stop_all

    # (c) controller mode: three controllers, three brokers, allAckInSyncStateSet.
    peers="n0-127.0.0.1:33878;n1-127.0.0.1:33879;n2-127.0.0.1:33880"
    for n in 0 1 2; do
        start controller "ctl$r-n$n" "controllerDLegerGroup=g$r" "controllerDLegerPeers=$peers" \
            "controllerDLegerSelfId=n$n" "controllerStorePath=$work/ctl$r-n$n" "configStorePath=$work/ctl$r-n$n.properties"
    done
    for b in 0 1 2; do
        port=$((34911 + 10 * b))
        mapfile -t lines < <(broker_lines "ctl$r" "$port" "ctl$r-b$b"; printf 'enableControllerMode=true\ncontrollerAddr=127.0.0.1:33878;127.0.0.1:33879;127.0.0.1:33880\nallAckInSyncStateSet=true\n')
        start broker "ctl$r-b$b" "${lines[@]}"
    done
    # Load once all three are in the SyncStateSet.
    for _ in $(seq 120); do
        if $F admin getSyncStateSet -a 127.0.0.1:33878 -b "ctl$r" 2>/dev/null | grep -q "SyncStateSetNums.*3"; then break; fi
        sleep 0.5
    done
    load "run $r controller mode, 3 replicas, allAck" "BenchCtl$r"
    stop_all
done
