#!/usr/bin/env bash
# Side-by-side broker load runs on this machine: standalone FerroMQ (release build) with
# ASYNC_FLUSH and SYNC_FLUSH, 64 and 256 concurrent senders of 1 KiB messages, plus the
# store-level group-commit baseline in the same run. Prints one JSON line per run and the
# broker's RSS. Usage: scripts/bench-broker.sh [seconds per run] [runs]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs="${1:-5}"
runs="${2:-3}"
cargo build --release -j2 -p ferromq-cli >&2
cargo build --release -j2 -p ferromq-broker --example send_load >&2
cargo build --release -j2 -p ferromq-store --example store_load >&2
for flush in ASYNC_FLUSH SYNC_FLUSH; do
    data="$(mktemp -d)"
    printf 'flushDiskType=%s\nmapedFileSizeCommitLog=268435456\n' "$flush" > "$data/broker.conf"
    ./target/release/ferromq standalone --bind 127.0.0.1 --data-dir "$data/d" --namesrv-port 29876 --broker-port 30911 -c "$data/broker.conf" >/dev/null 2>&1 &
    pid=$!
    sleep 2
    for senders in 64 256; do
        for _ in $(seq "$runs"); do
            line=$(./target/release/examples/send_load 127.0.0.1:30911 "$senders" "$secs")
            rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
            anon=$(awk '/RssAnon/ {print $2}' "/proc/$pid/status")
            echo "{\"flush\":\"$flush\",\"broker_rss_kib\":$rss,\"broker_rss_anon_kib\":$anon,\"run\":$line}"
        done
    done
    kill -TERM "$pid"; wait "$pid" || true
    rm -rf "$data"
    if [ "$flush" = SYNC_FLUSH ]; then
        for senders in 64 256; do
            for _ in $(seq "$runs"); do
                base="$(mktemp -d)"
                echo "{\"baseline\":\"store-level group commit\",\"run\":$(./target/release/examples/store_load "$senders" "$secs" sync "$base/s")}"
                rm -rf "$base"
            done
        done
    fi
done
