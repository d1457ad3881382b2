#!/usr/bin/env bash
# Side-by-side broker load runs on this machine: standalone FerroMQ (release build) with
# ASYNC_FLUSH and SYNC_FLUSH, 64 and 256 concurrent senders of 1 KiB messages, and the
# store-level group-commit baseline (the same store with SYNC_FLUSH, writers in process, no
# network), interleaved round by round so machine noise hits every case alike. Each broker
# run gets a fresh broker and store. Prints one JSON line per run (with the broker's RSS and
# the CPU time the broker and the load client spent per message), then the medians and the
# SYNC_FLUSH / baseline ratios.
# Usage: scripts/bench-broker.sh [seconds per run] [rounds]
# With WARM=1, every case (brokers and baseline) zero-fills segments before use
# (warmMapedFileEnable=true).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs="${1:-5}"
rounds="${2:-3}"
warm_conf=""
warm_arg=""
if [ "${WARM:-0}" = 1 ]; then
    warm_conf="warmMapedFileEnable=true"
    warm_arg="warm"
fi
cargo build --release -j2 -p ferromq-cli >&2
cargo build --release -j2 -p ferromq-broker --example send_load >&2
cargo build --release -j2 -p ferromq-store --example store_load >&2
tck=$(getconf CLK_TCK)
out="$(mktemp)"
for _ in $(seq "$rounds"); do
    for flush in ASYNC_FLUSH SYNC_FLUSH; do
        for senders in 64 256; do
            data="$(mktemp -d)"
            printf 'flushDiskType=%s\nmapedFileSizeCommitLog=268435456\n%s\n' "$flush" "$warm_conf" > "$data/broker.conf"
            ./target/release/ferromq standalone --bind 127.0.0.1 --no-dashboard --data-dir "$data/d" --namesrv-port 29876 --broker-port 30911 -c "$data/broker.conf" >/dev/null 2>&1 &
            pid=$!
            sleep 2
            # Warm-up: creates the topic and the first CommitLog segment.
            ./target/release/examples/send_load 127.0.0.1:30911 8 1 >/dev/null
            cpu0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
            line=$( { /usr/bin/time -f 'client_cpu_s %U %S' ./target/release/examples/send_load 127.0.0.1:30911 "$senders" "$secs"; } 2>&1 )
            cpu1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
            rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
            anon=$(awk '/RssAnon/ {print $2}' "/proc/$pid/status")
            run=$(grep '^{' <<<"$line")
            client=$(awk '/^client_cpu_s/ {print $2 + $3}' <<<"$line")
            acked=$(sed -E 's/.*"acked":([0-9]+).*/\1/' <<<"$run")
            broker_us=$(awk -v t=$((cpu1 - cpu0)) -v hz="$tck" -v n="$acked" 'BEGIN {printf "%.1f", t / hz * 1e6 / n}')
            client_us=$(awk -v c="$client" -v n="$acked" 'BEGIN {printf "%.1f", c * 1e6 / n}')
            echo "{\"case\":\"$flush\",\"senders\":$senders,\"broker_rss_kib\":$rss,\"broker_rss_anon_kib\":$anon,\"broker_cpu_us_per_msg\":$broker_us,\"client_cpu_us_per_msg\":$client_us,\"run\":$run}" | tee -a "$out"
            kill -TERM "$pid"
            wait "$pid" || true
            rm -rf "$data"
        done
    done
    for senders in 64 256; do
        base="$(mktemp -d)"
        echo "{\"case\":\"baseline\",\"senders\":$senders,\"run\":$(./target/release/examples/store_load "$senders" "$secs" sync "$base/s" $warm_arg)}" | tee -a "$out"
        rm -rf "$base"
    done
done
python3 - "$out" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
med = {}
print("\ncase          in flight  msgs/s per run               median   p50/p99/p999 ms (median run)")
for case in ["ASYNC_FLUSH", "SYNC_FLUSH", "baseline"]:
    for n in [64, 256]:
        rs = [r for r in runs if r["case"] == case and r["senders"] == n]
        if not rs:
            continue
        rates = [r["run"]["msgs_per_s"] for r in rs]
        m = statistics.median_low(rates)
        med[(case, n)] = m
        mr = next(r for r in rs if r["run"]["msgs_per_s"] == m)["run"]
        print("%-13s %9d  %-28s %6.1fk  %.1f / %.1f / %.1f" % (case, n, ", ".join("%.1fk" % (x / 1000) for x in rates), m / 1000, mr["p50_us"] / 1000, mr["p99_us"] / 1000, mr["p999_us"] / 1000))
for n in [64, 256]:
    if ("SYNC_FLUSH", n) in med and ("baseline", n) in med:
        print("SYNC_FLUSH / baseline at %d in flight: %.0f%%" % (n, 100 * med[("SYNC_FLUSH", n)] / med[("baseline", n)]))
EOF
rm -f "$out"
