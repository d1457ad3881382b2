#!/usr/bin/env bash
# A fresh `ferromq standalone` (release build, no config) as a new user meets it: its memory
# and disk right after start and after the first 1,000 messages, and how soon after SEND_OK
# the first message of the store (and of each new topic) can be pulled. Each round starts a
# fresh data directory. Prints one line per round, then the medians.
# Usage: scripts/first-impressions.sh [rounds]
# SERVER_BIN=path runs that binary's standalone instead (say an older build, for a baseline);
# the measuring tools are always this tree's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds="${1:-3}"
cargo build --release -j2 -p ferromq-cli >&2
bin=target/release/ferromq
server="${SERVER_BIN:-$bin}"
kb() { awk -v k="$1" '$1 == k":" { print $2 }' "/proc/$2/status"; }
out="$(mktemp)"
for round in $(seq "$rounds"); do
    data="$(mktemp -d)"
    ns=$((19000 + RANDOM % 500)); broker=$((21000 + RANDOM % 500 * 4))
    "$server" standalone --bind 127.0.0.1 --data-dir "$data/d" --namesrv-port "$ns" --broker-port "$broker" \
        >/dev/null 2>"$data/log" &
    pid=$!
    for _ in $(seq 200); do
        if "$bin" admin topicRoute -n "127.0.0.1:$ns" -t TBW102 >/dev/null 2>&1; then break; fi
        sleep 0.05
    done
    rss_start=$(kb VmRSS "$pid")
    # The first message of the store, then nine more new topics.
    vis="$("$bin" bench visibility -n "127.0.0.1:$ns" --samples 10 | tail -1)"
    first_us=$(sed -E 's/first message visible ([0-9]+) us.*/\1/' <<<"$vis")
    median_us=$(sed -E 's/.* us; median of [0-9]+ new topics ([0-9]+) us.*/\1/' <<<"$vis")
    "$bin" bench produce -n "127.0.0.1:$ns" -t FirstThousand -q 1000 -w 8 -s 1024 --quiet >/dev/null
    sleep 4
    rss=$(kb VmRSS "$pid"); anon=$(kb RssAnon "$pid"); file=$(kb RssFile "$pid"); shmem=$(kb RssShmem "$pid")
    disk=$(du -sk "$data/d" | cut -f1)
    kill "$pid"; wait "$pid" || true
    rm -rf "$data"
    echo "{\"round\":$round,\"rss_start_kb\":$rss_start,\"rss_kb\":$rss,\"anon_kb\":$anon,\"file_kb\":$file,\"shmem_kb\":$shmem,\"disk_kb\":$disk,\"first_visible_us\":$first_us,\"new_topic_visible_median_us\":$median_us}" | tee -a "$out"
done
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
for key in rss_start_kb rss_kb anon_kb file_kb disk_kb first_visible_us new_topic_visible_median_us; do
    printf '%s median %s\n' "$key" "$(grep -o "\"$key\":[0-9]*" "$out" | cut -d: -f2 | median)"
done
rm -f "$out"
