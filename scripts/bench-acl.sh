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
# Builds the release binaries and defines produce, pull and summary.
. scripts/lib/bench-common.sh
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
        FERROMQ_LOAD_CREDENTIALS="$creds" produce "$secs"
        echo "{\"side\":\"produce\",\"acl\":\"$acl\",\"msgs_per_s\":$rate,\"acked\":$acked,\"failed\":$failed,\"broker_cpu_us_per_msg\":$us}" | tee -a "$out"
        keys=""
        [ "$acl" = on ] && keys="--accessKey ${creds%%:*} --secretKey ${creds#*:}"
        # shellcheck disable=SC2086
        pull "$secs" "$data/c.json" $keys
        echo "{\"side\":\"pull\",\"acl\":\"$acl\",\"msgs_per_s\":$crate,\"consumed\":$consumed,\"failed\":$errors,\"broker_cpu_us_per_msg\":$us}" | tee -a "$out"
        kill -TERM "$pid"
        wait "$pid" || true
        rm -rf "$data"
    done
done
summary "$out" acl off on "ACL %-3s"
rm -f "$out"
