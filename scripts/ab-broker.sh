#!/usr/bin/env bash
# A/B of two broker builds: standalone from OLD_BIN (first argument) and from this tree, the
# same send_load client, interleaved round by round; SYNC_FLUSH with 64 senders and ASYNC_FLUSH
# with 256, 5 s each. Prints msgs/s and the broker CPU per message of every run.
# Usage: scripts/ab-broker.sh /path/to/old/ferromq [rounds]
set -euo pipefail
old_bin="$(realpath "$1")"
rounds="${2:-3}"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --release -j2 -p ferromq-cli >&2
cargo build --release -j2 -p ferromq-broker --example send_load >&2
tck=$(getconf CLK_TCK)
for _ in $(seq "$rounds"); do
  for which in old new; do
    bin=./target/release/ferromq; [ "$which" = old ] && bin="$old_bin"
    for flush in SYNC_FLUSH ASYNC_FLUSH; do
      senders=64; [ $flush = ASYNC_FLUSH ] && senders=256
      data="$(mktemp -d)"
      printf 'flushDiskType=%s\nmapedFileSizeCommitLog=268435456\n' "$flush" > "$data/broker.conf"
      $bin standalone --bind 127.0.0.1 --data-dir "$data/d" --namesrv-port 29876 --broker-port 30911 -c "$data/broker.conf" >/dev/null 2>&1 &
      pid=$!
      sleep 2
      ./target/release/examples/send_load 127.0.0.1:30911 8 1 >/dev/null
      cpu0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
      line=$(./target/release/examples/send_load 127.0.0.1:30911 "$senders" 5 2>&1 | grep '^{')
      cpu1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
      acked=$(sed -E 's/.*"acked":([0-9]+).*/\1/' <<<"$line")
      rate=$(sed -E 's/.*"msgs_per_s":([0-9]+).*/\1/' <<<"$line")
      us=$(awk -v t=$((cpu1 - cpu0)) -v hz="$tck" -v n="$acked" 'BEGIN {printf "%.1f", t / hz * 1e6 / n}')
      echo "$which $flush $senders msgs_per_s=$rate broker_cpu_us=$us"
      kill -TERM "$pid"; wait "$pid" || true; rm -rf "$data"
    done
  done
done
