#!/usr/bin/env bash
# The broker's consume path on this machine, with a fresh release `ferromq standalone` per run:
#   drain: a backlog of 1 KiB messages (produced by `send_load`, ASYNC_FLUSH, 4 connections x
#          64 in flight, for BACKLOG_SECS) read from the start by `ferromq bench consume`
#          (4 connections, 32 messages a pull) until all are consumed: messages/s, MiB/s of
#          bodies, the broker's CPU per message (request path = tokio workers, and the rest)
#          and the consumer's;
#   tail:  one producer slot (one message in flight) for SECS with a consumer long-polling at
#          the queue ends, against the same load with no consumer: the broker CPU the
#          consumer adds per message is what a long-polling wake-up (park, wake, read, answer)
#          costs.
# Usage: scripts/bench-pull.sh [seconds per tail run] [rounds]
#   BASELINE_BIN=/path/to/older/ferromq  runs that build too, interleaved, and prints
#                                        new/baseline ratios (the client is always the new one)
#   BACKLOG_SECS=8                       how long the backlog is produced for
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs="${1:-5}"
rounds="${2:-3}"
cargo build --release -j2 -p ferromq-cli >&2
cargo build --release -j2 -p ferromq-broker --example send_load >&2
exec python3 - "$secs" "$rounds" <<'PY'
import json, os, resource, statistics, subprocess, sys, tempfile, time

secs, rounds = int(sys.argv[1]), int(sys.argv[2])
backlog_secs = int(os.environ.get("BACKLOG_SECS", "8"))
tck = os.sysconf("SC_CLK_TCK")
client = "./target/release/ferromq"
load = "./target/release/examples/send_load"
bins = [("new", client)]
if os.environ.get("BASELINE_BIN"):
    bins.insert(0, ("baseline", os.path.realpath(os.environ["BASELINE_BIN"])))
NS, BROKER, GRPC, METRICS = 29876, 30911, 28081, 29100


def thread_ticks(pid):
    """CPU ticks of the broker's threads: (tokio workers, all others)."""
    workers = other = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except FileNotFoundError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        ticks = int(fields[11]) + int(fields[12])
        if name.startswith("tokio-rt-worker") or name.startswith("tokio-runtime-w"):
            workers += ticks
        else:
            other += ticks
    return workers, other


def children_ticks():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def start(binary, data):
    with open(f"{data}/broker.conf", "w") as f:
        f.write("flushDiskType=ASYNC_FLUSH\n")
    log = open(f"{data}/standalone.log", "w")
    p = subprocess.Popen([binary, "standalone", "--bind", "127.0.0.1", "--no-dashboard", "--data-dir", f"{data}/d",
                          "--namesrv-port", str(NS), "--broker-port", str(BROKER), "--grpc-port", str(GRPC),
                          "--metrics-port", str(METRICS), "-c", f"{data}/broker.conf"], stdout=log, stderr=log)
    time.sleep(2)
    if p.poll() is not None:
        sys.exit(f"standalone exited: see {data}/standalone.log")
    return p


def send_load(senders, seconds, topic):
    out = subprocess.run([load, f"127.0.0.1:{BROKER}", str(senders), str(seconds), topic, "4", "1024"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads([l for l in out.splitlines() if l.startswith("{")][-1])


def consume(group, topic, extra, report):
    return subprocess.Popen([client, "bench", "consume", "-n", f"127.0.0.1:{NS}", "-t", topic, "-g", group, "--quiet",
                             "--json", report] + extra, stdout=subprocess.DEVNULL)


def drain(pid, data, topic):
    produced = send_load(256, backlog_secs, topic)["acked"]
    time.sleep(1)  # dispatched to the consume queues
    w0, o0 = thread_ticks(pid)
    c0 = children_ticks()
    t0 = time.monotonic()
    consume("g_drain", topic, ["--from-start", "-q", str(produced), "--duration", "120"], f"{data}/drain.json").wait()
    wall = time.monotonic() - t0
    w1, o1 = thread_ticks(pid)
    client_s = children_ticks() - c0
    c = json.load(open(f"{data}/drain.json"))["consume"]
    n = c["consumed"]
    return {"produced": produced, "consumed": n, "errors": c["pull_errors"], "msgs_per_s": c["msgs_per_s"],
            "mib_per_s": c["msgs_per_s"] * 1024 / 2**20, "wall_s": wall,
            "broker_us": ((w1 - w0) + (o1 - o0)) / tck * 1e6 / n, "request_path_us": (w1 - w0) / tck * 1e6 / n,
            "client_us": client_s * 1e6 / n}


def tail(pid, data, topic, with_consumer):
    consumer = None
    if with_consumer:
        consumer = consume("g_tail", topic, ["--duration", str(secs + 4)], f"{data}/tail.json")
        time.sleep(2)  # rebalanced and parked at the queue ends
    w0, o0 = thread_ticks(pid)
    r = send_load(1, secs, topic)
    w1, o1 = thread_ticks(pid)
    got = None
    if consumer:
        consumer.wait()
        got = json.load(open(f"{data}/tail.json"))["consume"]["consumed"]
    return {"acked": r["acked"], "consumed": got, "broker_us": ((w1 - w0) + (o1 - o0)) / tck * 1e6 / r["acked"]}


runs = []
for rnd in range(rounds):
    for label, binary in bins:
        data = tempfile.mkdtemp(prefix="bench-pull-")
        p = start(binary, data)
        try:
            send_load(8, 1, "WarmTopic")  # the first segment and the routes
            d = drain(p.pid, data, "DrainTopic")
            quiet = tail(p.pid, data, "TailQuiet", False)
            busy = tail(p.pid, data, "TailPolled", True)
        finally:
            p.terminate()
            p.wait()
            subprocess.run(["rm", "-rf", data])
        run = {"bin": label, "round": rnd, "drain": d, "tail_no_consumer": quiet, "tail_consumer": busy,
               "wake_us": busy["broker_us"] - quiet["broker_us"]}
        runs.append(run)
        print(json.dumps(run), flush=True)

print()
med = {}
for label, _ in bins:
    rs = [r for r in runs if r["bin"] == label]
    m = lambda f: statistics.median(f(r) for r in rs)
    med[label] = {"msgs": m(lambda r: r["drain"]["msgs_per_s"]), "mib": m(lambda r: r["drain"]["mib_per_s"]),
                  "broker": m(lambda r: r["drain"]["broker_us"]), "path": m(lambda r: r["drain"]["request_path_us"]),
                  "client": m(lambda r: r["drain"]["client_us"]), "wake": m(lambda r: r["wake_us"])}
    x = med[label]
    print(f"{label:8} drain {x['msgs'] / 1000:.1f}k msgs/s = {x['mib']:.0f} MiB/s of bodies "
          f"(runs {', '.join('%.0f' % r['drain']['mib_per_s'] for r in rs)}); broker {x['broker']:.2f} us/msg "
          f"(request path {x['path']:.2f}), consumer {x['client']:.2f} us/msg; "
          f"long-poll wake-up +{x['wake']:.1f} us/msg broker CPU")
if len(bins) == 2:
    b, n = med["baseline"], med["new"]
    print(f"new/baseline: drain throughput {100 * n['msgs'] / b['msgs']:.0f}%, broker CPU per message "
          f"{100 * n['broker'] / b['broker']:.0f}%, request path {100 * n['path'] / max(b['path'], 1e-9):.0f}%, "
          f"consumer CPU per message {100 * n['client'] / b['client']:.0f}%")
PY
