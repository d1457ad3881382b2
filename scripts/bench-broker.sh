#!/usr/bin/env bash
# The broker's send path on this machine: a fresh release `ferromq standalone` per run and the
# `send_load` client (SEND_MESSAGE_V2, JSON headers, a Java producer's properties, 4
# connections), for the matrix ASYNC_FLUSH / SYNC_FLUSH x 64 / 256 in flight x 128 B / 1 KiB
# bodies, plus one in flight (latency) for both flush types. Each run reports throughput,
# p50/p99/p999 latency, and the broker's CPU per acknowledged message (utime + stime from
# /proc over the measured window / messages), split by thread: the request path (tokio
# workers), the store's threads (reput, flush, consume queues), and the segment
# pre-allocator (the kernel zeroing fresh CommitLog pages), plus the load client's CPU.
#
# Usage: scripts/bench-broker.sh [seconds per run] [rounds]
#   BASELINE_BIN=/path/to/older/ferromq  runs that build too, interleaved case by case, and
#                                        prints new/baseline ratios (A/B in the same run)
#   NEW_BIN=/path/to/ferromq             measures that build instead of building this tree's
#   CASES="ASYNC_FLUSH:64:1024 SYNC_FLUSH:1:1024"  a subset (flush:in-flight:body bytes)
#   STORE_BASELINE=1                     adds the store-level group-commit baseline (no network)
#   WARM=1                               zero-filled segments (warmMapedFileEnable=true)
# Runs are interleaved round by round so machine noise hits every case alike; the summary
# gives medians over the rounds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs="${1:-5}"
rounds="${2:-3}"
if [ -z "${NEW_BIN:-}" ]; then
    cargo build --release -j2 -p ferromq-cli >&2
fi
cargo build --release -j2 -p ferromq-broker --example send_load >&2
if [ "${STORE_BASELINE:-0}" = 1 ]; then
    cargo build --release -j2 -p ferromq-store --example store_load >&2
fi
exec python3 - "$secs" "$rounds" <<'PY'
import json, os, statistics, subprocess, sys, tempfile, time

secs, rounds = int(sys.argv[1]), int(sys.argv[2])
tck = os.sysconf("SC_CLK_TCK")
bins = [("new", os.path.realpath(os.environ.get("NEW_BIN") or "./target/release/ferromq"))]
if os.environ.get("BASELINE_BIN"):
    bins.insert(0, ("baseline", os.path.realpath(os.environ["BASELINE_BIN"])))
default = [f"{f}:{n}:{b}" for f in ("ASYNC_FLUSH", "SYNC_FLUSH") for n in (64, 256) for b in (128, 1024)]
default += ["ASYNC_FLUSH:1:1024", "SYNC_FLUSH:1:1024"]
cases = [c.split(":") for c in os.environ.get("CASES", " ".join(default)).split()]
warm = "warmMapedFileEnable=true\n" if os.environ.get("WARM") == "1" else ""

def threads(pid):
    """CPU ticks per thread group: request path, store, segment pre-allocation, other."""
    out = {"request": 0, "store": 0, "segment": 0, "other": 0}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            comm = open(f"/proc/{pid}/task/{t}/comm").read().strip()
            f = open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks = int(f[11]) + int(f[12])
        if comm.startswith("tokio-rt-worker"):
            out["request"] += ticks
        elif comm.startswith("segment-prealloc"[:15]):
            out["segment"] += ticks
        elif comm.startswith(("store-", "commitlog-")):
            out["store"] += ticks
        else:
            out["other"] += ticks
    return out

def run(label, binary, flush, inflight, body):
    with tempfile.TemporaryDirectory() as data:
        with open(f"{data}/broker.conf", "w") as f:
            f.write(f"flushDiskType={flush}\nmapedFileSizeCommitLog=268435456\n{warm}")
        broker = subprocess.Popen([binary, "standalone", "--bind", "127.0.0.1", "--no-dashboard", "--data-dir", f"{data}/d",
                                   "--namesrv-port", "29876", "--broker-port", "30911", "-c", f"{data}/broker.conf"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(2)
            # Warm-up: creates the topic and the first CommitLog segment.
            subprocess.run(["./target/release/examples/send_load", "127.0.0.1:30911", "8", "1", "LoadTopic", "4", body],
                           stdout=subprocess.DEVNULL, check=True)
            t0 = threads(broker.pid)
            conns = "1" if inflight == "1" else "4"
            client = subprocess.run(["/usr/bin/time", "-f", "client_cpu_s %U %S", "./target/release/examples/send_load",
                                     "127.0.0.1:30911", inflight, str(secs), "LoadTopic", conns, body],
                                    capture_output=True, text=True, check=True)
            t1 = threads(broker.pid)
            anon = next(int(l.split()[1]) for l in open(f"/proc/{broker.pid}/status") if l.startswith("RssAnon"))
        finally:
            broker.terminate()
            broker.wait()
    r = json.loads(next(l for l in client.stdout.splitlines() if l.startswith("{")))
    u, s = next(l for l in client.stderr.splitlines() if l.startswith("client_cpu_s")).split()[1:]
    n = max(r["acked"], 1)
    per = {k: (t1[k] - t0[k]) / tck * 1e6 / n for k in t0}
    line = {"bin": label, "flush": flush, "in_flight": int(inflight), "body": int(body), "msgs_per_s": r["msgs_per_s"],
            "failures": r["failures"], "p50_us": r["p50_us"], "p99_us": r["p99_us"], "p999_us": r["p999_us"],
            "broker_cpu_us_per_msg": round(sum(per.values()), 2),
            "request_path_us": round(per["request"], 2), "store_threads_us": round(per["store"], 2),
            "segment_prealloc_us": round(per["segment"], 2), "other_us": round(per["other"], 2),
            "client_cpu_us_per_msg": round((float(u) + float(s)) * 1e6 / n, 2), "broker_rss_anon_kib": anon}
    print(json.dumps(line), flush=True)
    return line

def store_baseline(inflight):
    with tempfile.TemporaryDirectory() as base:
        out = subprocess.run(["./target/release/examples/store_load", inflight, str(secs), "sync", f"{base}/s"],
                             capture_output=True, text=True, check=True).stdout
    r = json.loads(next(l for l in out.splitlines() if l.startswith("{")))
    print(json.dumps({"bin": "store_load", "in_flight": int(inflight), "run": r}), flush=True)
    return {"bin": "store_load", "flush": "SYNC_FLUSH", "in_flight": int(inflight), "body": 1024,
            "msgs_per_s": r["msgs_per_s"], "p50_us": r["p50_us"], "p99_us": r["p99_us"], "p999_us": r["p999_us"]}

runs = []
for _ in range(rounds):
    for flush, inflight, body in cases:
        for label, binary in bins:
            runs.append(run(label, binary, flush, inflight, body))
    if os.environ.get("STORE_BASELINE") == "1":
        for inflight in ("64", "256"):
            runs.append(store_baseline(inflight))

def med(rs, key):
    return statistics.median(r[key] for r in rs)

print("\n%-8s %-11s %4s %5s  %-24s %8s  %-16s %6s %6s %6s %6s %6s" % (
    "build", "flush", "n", "body", "msgs/s per run", "median", "p50/p99/p999 us", "cpu", "req", "store", "seg", "client"))
medians = {}
for flush, inflight, body in cases:
    for label, _ in bins:
        rs = [r for r in runs if r["bin"] == label and r["flush"] == flush and r["in_flight"] == int(inflight) and r["body"] == int(body)]
        m = statistics.median_low([r["msgs_per_s"] for r in rs])
        mr = next(r for r in rs if r["msgs_per_s"] == m)
        medians[(label, flush, inflight, body)] = (m, med(rs, "broker_cpu_us_per_msg"), med(rs, "request_path_us"))
        print("%-8s %-11s %4s %5s  %-24s %7.1fk  %-16s %6.2f %6.2f %6.2f %6.2f %6.2f" % (
            label, flush, inflight, body, ",".join("%.0fk" % (r["msgs_per_s"] / 1000) for r in rs), m / 1000,
            "%d/%d/%d" % (mr["p50_us"], mr["p99_us"], mr["p999_us"]), med(rs, "broker_cpu_us_per_msg"),
            med(rs, "request_path_us"), med(rs, "store_threads_us"), med(rs, "segment_prealloc_us"), med(rs, "client_cpu_us_per_msg")))
if len(bins) == 2:
    print("\nnew / baseline (medians): throughput, broker CPU per message, request-path CPU per message")
    for flush, inflight, body in cases:
        a, b = medians[("baseline", flush, inflight, body)], medians[("new", flush, inflight, body)]
        print("%-11s %4s %5s  %4.0f%%  %4.0f%%  %4.0f%%" % (flush, inflight, body, 100 * b[0] / a[0], 100 * b[1] / a[1], 100 * b[2] / a[2]))
for inflight in ("64", "256"):
    base = [r for r in runs if r["bin"] == "store_load" and r["in_flight"] == int(inflight)]
    if base and ("new", "SYNC_FLUSH", inflight, "1024") in medians:
        print("SYNC_FLUSH 1 KiB / store-level baseline at %s in flight: %.0f%%" % (
            inflight, 100 * medians[("new", "SYNC_FLUSH", inflight, "1024")][0] / statistics.median_low([r["msgs_per_s"] for r in base])))
PY
