#!/usr/bin/env bash
# Broker cost of ACL: standalone FerroMQ (release build) with ACL off, and with ACL 2.0
# (authentication and authorization on, a NORMAL user whose ACL allows the load topic and
# group) or ACL 1.0 (`aclEnable`, a non-admin plain_acl.yml account with PUB|SUB on the topic
# and SUB on the group) on, every request signed and checked, interleaved round by round. Produce: ASYNC_FLUSH,
# 1 KiB SEND_MESSAGE_V2, 4 connections x 64 in flight (examples/send_load). Pull: the backlog
# just produced, read from the start by `ferromq bench consume` (4 connections). Prints
# msgs/s and the broker's CPU per message of each run, then the medians and on/off ratios.
# Usage: scripts/bench-acl.sh [seconds per run] [rounds] [v2|v1]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs="${1:-5}"
rounds="${2:-3}"
version="${3:-v2}"
cargo build --release -j2 -p ferromq-cli >&2
cargo build --release -j2 -p ferromq-broker --example send_load >&2
tck=$(getconf CLK_TCK)
out="$(mktemp)"
for _ in $(seq "$rounds"); do
    for acl in off on; do
        data="$(mktemp -d)"
        printf 'mapedFileSizeCommitLog=268435456\n' > "$data/broker.conf"
        creds=""
        if [ "$acl" = on ] && [ "$version" = v2 ]; then
            printf 'authenticationEnabled=true\nauthorizationEnabled=true\ninitAuthenticationUser={"username":"rocketmq","password":"12345678"}\n' >> "$data/broker.conf"
            creds="loader:loader-secret"
        elif [ "$acl" = on ]; then
            mkdir -p "$data/conf"
            printf 'aclEnable=true\nrocketmqHome=%s\n' "$data" >> "$data/broker.conf"
            printf 'accounts:\n  - accessKey: loadapp1\n    secretKey: loader-secret\n    admin: false\n    defaultTopicPerm: DENY\n    defaultGroupPerm: DENY\n    topicPerms: [LoadTopic=PUB|SUB]\n    groupPerms: [g_load=SUB]\n' > "$data/conf/plain_acl.yml"
            creds="loadapp1:loader-secret"
        fi
        ./target/release/ferromq standalone --bind 127.0.0.1 --no-dashboard --data-dir "$data/d" --namesrv-port 29876 --broker-port 30911 --grpc-port 28081 -c "$data/broker.conf" >/dev/null 2>&1 &
        pid=$!
        sleep 2
        if [ "$acl" = on ] && [ "$version" = v2 ]; then
            A="./target/release/ferromq admin --accessKey rocketmq --secretKey 12345678"
            $A createUser -n 127.0.0.1:29876 -b 127.0.0.1:30911 -u loader -p loader-secret >/dev/null
            $A createAcl -n 127.0.0.1:29876 -b 127.0.0.1:30911 -s User:loader -r Topic:LoadTopic -a Pub,Sub,Get -d Allow >/dev/null
            $A createAcl -n 127.0.0.1:29876 -b 127.0.0.1:30911 -s User:loader -r Group:g_load -a Sub,Get,Update -d Allow >/dev/null
        fi
        # Warm-up: creates the topic and the first CommitLog segment.
        FERROMQ_LOAD_CREDENTIALS="$creds" ./target/release/examples/send_load 127.0.0.1:30911 8 1 >/dev/null
        cpu0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
        line=$(FERROMQ_LOAD_CREDENTIALS="$creds" ./target/release/examples/send_load 127.0.0.1:30911 256 "$secs" 2>&1 | grep '^{')
        cpu1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
        acked=$(sed -E 's/.*"acked":([0-9]+).*/\1/' <<<"$line")
        failed=$(sed -E 's/.*"failures":([0-9]+).*/\1/' <<<"$line")
        rate=$(sed -E 's/.*"msgs_per_s":([0-9.]+).*/\1/' <<<"$line")
        us=$(awk -v t=$((cpu1 - cpu0)) -v hz="$tck" -v n="$acked" 'BEGIN {printf "%.2f", t / hz * 1e6 / n}')
        echo "{\"side\":\"produce\",\"acl\":\"$acl\",\"msgs_per_s\":$rate,\"acked\":$acked,\"failed\":$failed,\"broker_cpu_us_per_msg\":$us}" | tee -a "$out"
        keys=""
        [ "$acl" = on ] && keys="--accessKey ${creds%%:*} --secretKey ${creds#*:}"
        cpu0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
        # shellcheck disable=SC2086
        ./target/release/ferromq bench consume -n 127.0.0.1:29876 -t LoadTopic -g g_load --from-start --duration "$secs" --quiet --json "$data/c.json" $keys >/dev/null
        cpu1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
        read -r crate consumed errors < <(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["consume"]; print(c["msgs_per_s"], c["consumed"], c["pull_errors"])' "$data/c.json")
        us=$(awk -v t=$((cpu1 - cpu0)) -v hz="$tck" -v n="$consumed" 'BEGIN {printf "%.2f", t / hz * 1e6 / n}')
        echo "{\"side\":\"pull\",\"acl\":\"$acl\",\"msgs_per_s\":$crate,\"consumed\":$consumed,\"failed\":$errors,\"broker_cpu_us_per_msg\":$us}" | tee -a "$out"
        kill -TERM "$pid"
        wait "$pid" || true
        rm -rf "$data"
    done
done
python3 - "$out" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
for side in ["produce", "pull"]:
    med = {}
    for acl in ["off", "on"]:
        rs = [r for r in runs if r["acl"] == acl and r["side"] == side]
        med[acl] = (statistics.median(r["msgs_per_s"] for r in rs), statistics.median(r["broker_cpu_us_per_msg"] for r in rs))
        print("%-7s ACL %-3s msgs/s %s  median %.1fk  broker CPU us/msg median %.2f" % (side, acl, ", ".join("%.1fk" % (r["msgs_per_s"] / 1000) for r in rs), med[acl][0] / 1000, med[acl][1]))
    print("%-7s on/off throughput %.0f%%, CPU per message %.0f%%" % (side, 100 * med["on"][0] / med["off"][0], 100 * med["on"][1] / med["off"][1]))
PY
rm -f "$out"
