#!/usr/bin/env bash
# Producer load matrix with `ferromq bench`: 1 KiB messages, 64 and 256 in flight, single
# sends and batches of 32, N runs of S seconds each, each configuration against a fresh release
# `ferromq standalone` (ASYNC_FLUSH, 256 MiB segments) on 127.0.0.1. Prints a markdown table of
# medians. Usage: crates/bench/scripts/produce-matrix.sh [seconds per run] [runs] [ferromq binary]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
secs="${1:-5}"
runs="${2:-3}"
bin="${3:-./target/release/ferromq}"
out="$(mktemp -d)"
for w in 64 256; do
    for b in 1 32; do
        data="$(mktemp -d)"
        printf 'mapedFileSizeCommitLog=268435456\n' > "$data/broker.conf"
        "$bin" standalone --bind 127.0.0.1 --data-dir "$data/d" --namesrv-port 29876 --broker-port 30911 \
            -c "$data/broker.conf" >/dev/null 2>&1 &
        pid=$!
        sleep 2
        for r in $(seq "$runs"); do
            "$bin" bench produce -n 127.0.0.1:29876 -s 1024 -w "$w" -b "$b" --duration "$secs" --quiet \
                --json "$out/w$w-b$b-r$r.json" >&2
        done
        kill -TERM "$pid"; wait "$pid" || true
        rm -rf "$data"
    done
done
python3 - "$out" "$runs" <<'PY'
import json, sys
out, runs = sys.argv[1], int(sys.argv[2])
print("| in flight | batch | msgs/s (runs; median) | MB/s (median run) | p50 / p99 / p999 / max per request (median run) | failed |")
print("|---|---|---|---|---|---|")
for w in (64, 256):
    for b in (1, 32):
        rs = [json.load(open(f"{out}/w{w}-b{b}-r{r}.json"))["produce"] for r in range(1, runs + 1)]
        med = sorted(rs, key=lambda p: p["msgs_per_s"])[len(rs) // 2]
        l = med["latency_us"]
        rates = ", ".join(f"{p['msgs_per_s'] / 1000:.1f}k" for p in rs)
        print(f"| {w} | {b} | {rates}; **{med['msgs_per_s'] / 1000:.1f}k** | {med['mb_per_s']:.1f} | "
              f"{l['p50'] / 1000:.1f} / {l['p99'] / 1000:.1f} / {l['p999'] / 1000:.1f} / {l['max'] / 1000:.1f} ms | "
              f"{sum(p['failed'] for p in rs)} |")
PY
rm -rf "$out"
