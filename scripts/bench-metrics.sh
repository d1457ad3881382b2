#!/usr/bin/env bash
# Broker cost of the Prometheus metrics: standalone FerroMQ (release build) with
# metricsExporterType=DISABLE and with PROM (its default), interleaved round by round, while
# Prometheus-like scrapes run every second on the PROM side. Produce: ASYNC_FLUSH, 1 KiB
# SEND_MESSAGE_V2, 4 connections x 64 in flight (examples/send_load); pull: that backlog from
# the start (`ferromq bench consume`). Prints msgs/s and broker CPU per message of each run,
# the medians and the PROM/DISABLE ratios. Then the scrape itself: 1,000 topics and 1,000
# groups (one committed offset each) made on a PROM standalone, and the median time and size
# of /metrics over 20 scrapes.
# Usage: scripts/bench-metrics.sh [seconds per run] [rounds]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs="${1:-5}"
rounds="${2:-3}"
# Builds the release binaries and defines produce, pull and summary.
. scripts/lib/bench-common.sh
out="$(mktemp)"
metrics=29557
pid=""
# A run that stops early (a failed step) does not leave its standalone behind.
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null || true' EXIT
start() { # data dir, exporter type
    printf 'mapedFileSizeCommitLog=268435456\nmetricsExporterType=%s\n' "$2" > "$1/broker.conf"
    ./target/release/ferromq standalone --bind 127.0.0.1 --no-dashboard --data-dir "$1/d" --namesrv-port 29876 --broker-port 30911 \
        --grpc-port 28081 --metrics-port "$metrics" -c "$1/broker.conf" >/dev/null 2>&1 &
    pid=$!
    sleep 2
}
for _ in $(seq "$rounds"); do
    for exporter in DISABLE PROM; do
        data="$(mktemp -d)"
        start "$data" "$exporter"
        scraper=""
        if [ "$exporter" = PROM ]; then
            (while sleep 1; do curl -s -o /dev/null "http://127.0.0.1:$metrics/metrics" || true; done) &
            scraper=$!
        fi
        ./target/release/examples/send_load 127.0.0.1:30911 8 1 >/dev/null
        produce "$secs"
        echo "{\"side\":\"produce\",\"exporter\":\"$exporter\",\"msgs_per_s\":$rate,\"acked\":$acked,\"broker_cpu_us_per_msg\":$us}" | tee -a "$out"
        pull "$secs" "$data/c.json"
        echo "{\"side\":\"pull\",\"exporter\":\"$exporter\",\"msgs_per_s\":$crate,\"consumed\":$consumed,\"broker_cpu_us_per_msg\":$us}" | tee -a "$out"
        [ -n "$scraper" ] && kill "$scraper" && wait "$scraper" 2>/dev/null || true
        kill -TERM "$pid"
        wait "$pid" || true
        rm -rf "$data"
    done
done
summary "$out" exporter DISABLE PROM "%-7s"
rm -f "$out"

# Scrape time and size with 1,000 topics and 1,000 groups.
data="$(mktemp -d)"
start "$data" PROM
python3 - <<'PY'
import socket, struct, json
# One remoting connection: UPDATE_AND_CREATE_TOPIC (17) for 1,000 topics, then
# UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) of g<i> and its UPDATE_CONSUMER_OFFSET (15) on t<i>, queue 0.
def frame(code, ext, opaque, body):
    header = json.dumps({"code": code, "language": "JAVA", "version": 479, "opaque": opaque, "flag": 0,
                         "serializeTypeCurrentRPC": "JSON", "extFields": ext}).encode()
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body
def call(sock, code, ext, opaque, body=b""):
    sock.sendall(frame(code, ext, opaque, body))
    length = struct.unpack(">i", recv(sock, 4))[0]
    body = recv(sock, length)
    hlen = struct.unpack(">i", body[:4])[0] & 0xFFFFFF
    h = json.loads(body[4:4 + hlen])
    if h["code"] != 0:
        print(code, ext, h)
    return h["code"]
def recv(sock, n):
    b = b""
    while len(b) < n:
        chunk = sock.recv(n - len(b))
        if not chunk:
            raise SystemExit("connection closed")
        b += chunk
    return b
s = socket.create_connection(("127.0.0.1", 30911))
for i in range(1000):
    assert call(s, 17, {"topic": f"t{i}", "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4",
                        "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}, 2 * i) == 0
    assert call(s, 200, {}, 3000 + i, json.dumps({"groupName": f"g{i}", "consumeEnable": True}).encode()) == 0
    assert call(s, 15, {"consumerGroup": f"g{i}", "topic": f"t{i}", "queueId": "0", "commitOffset": "0"}, 2 * i + 1) == 0
PY
python3 - "$metrics" <<'PY'
import statistics, sys, time, urllib.request
url = "http://127.0.0.1:%s/metrics" % sys.argv[1]
times, size, series = [], 0, 0
for _ in range(20):
    t = time.perf_counter()
    body = urllib.request.urlopen(url).read()
    times.append((time.perf_counter() - t) * 1000)
    size = len(body)
    series = sum(1 for l in body.decode().splitlines() if l and not l.startswith("#"))
print("scrape with 1,000 topics and 1,000 groups: median %.1f ms (min %.1f, max %.1f), %d bytes, %d series" % (statistics.median(times), min(times), max(times), size, series))
PY
kill -TERM "$pid"
wait "$pid" || true
rm -rf "$data"
