# What scripts/bench-acl.sh and scripts/bench-metrics.sh share: the release build, the measured
# runs against a standalone broker in two settings, and their summary. Sourced from the
# repository's root; while runs are measured the broker runs as $pid, its name server on
# 127.0.0.1:29876 and its remoting port on 127.0.0.1:30911.

cargo build --release -j2 -p ferromq-cli >&2
cargo build --release -j2 -p ferromq-broker --example send_load >&2
tck=$(getconf CLK_TCK)

# The CPU ticks (user and system) the broker has used.
broker_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }

# us_per_msg TICKS MESSAGES: the broker's CPU microseconds per message.
us_per_msg() { awk -v t="$1" -v hz="$tck" -v n="$2" 'BEGIN {printf "%.2f", t / hz * 1e6 / n}'; }

# produce SECS: ASYNC_FLUSH, 1 KiB SEND_MESSAGE_V2, 4 connections x 64 in flight
# (examples/send_load; FERROMQ_LOAD_CREDENTIALS signs them) for SECS seconds. Sets rate,
# acked, failed and us.
produce() {
    local cpu0 cpu1 line
    cpu0=$(broker_ticks)
    line=$(./target/release/examples/send_load 127.0.0.1:30911 256 "$1" 2>&1 | grep '^{')
    cpu1=$(broker_ticks)
    acked=$(sed -E 's/.*"acked":([0-9]+).*/\1/' <<<"$line")
    failed=$(sed -E 's/.*"failures":([0-9]+).*/\1/' <<<"$line")
    rate=$(sed -E 's/.*"msgs_per_s":([0-9.]+).*/\1/' <<<"$line")
    us=$(us_per_msg $((cpu1 - cpu0)) "$acked")
}

# pull SECS REPORT [ARGS...]: `ferromq bench consume` of LoadTopic's backlog from the start as
# g_load for SECS seconds, its JSON report written to REPORT, ARGS added. Sets crate,
# consumed, errors and us.
pull() {
    local secs="$1" report="$2" cpu0 cpu1
    shift 2
    cpu0=$(broker_ticks)
    ./target/release/ferromq bench consume -n 127.0.0.1:29876 -t LoadTopic -g g_load --from-start --duration "$secs" --quiet --json "$report" "$@" >/dev/null
    cpu1=$(broker_ticks)
    read -r crate consumed errors < <(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["consume"]; print(c["msgs_per_s"], c["consumed"], c["pull_errors"])' "$report")
    us=$(us_per_msg $((cpu1 - cpu0)) "$consumed")
}

# summary RUNS KEY OFF ON LABEL: of the JSON lines in RUNS (one a run: side, the setting under
# KEY, msgs_per_s, broker_cpu_us_per_msg), per side and setting the msgs/s of each run and the
# medians, then the ON/OFF ratios. LABEL is the printf format of a setting's name.
summary() {
    python3 - "$@" <<'PY'
import json, statistics, sys
path, key, off, on, label = sys.argv[1:]
runs = [json.loads(l) for l in open(path)]
for side in ["produce", "pull"]:
    med = {}
    for setting in [off, on]:
        rs = [r for r in runs if r[key] == setting and r["side"] == side]
        med[setting] = (statistics.median(r["msgs_per_s"] for r in rs), statistics.median(r["broker_cpu_us_per_msg"] for r in rs))
        print(("%-7s " + label + " msgs/s %s  median %.1fk  broker CPU us/msg median %.2f") % (side, setting, ", ".join("%.1fk" % (r["msgs_per_s"] / 1000) for r in rs), med[setting][0] / 1000, med[setting][1]))
    print("%-7s %s/%s throughput %.0f%%, CPU per message %.0f%%" % (side, on, off, 100 * med[on][0] / med[off][0], 100 * med[on][1] / med[off][1]))
PY
}
