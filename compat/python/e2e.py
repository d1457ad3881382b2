#!/usr/bin/env python3
"""End-to-end driver for the official Apache RocketMQ C++ client: produce and consume messages
against a name server and broker, reporting every step as one JSON line on stdout.

The client is librocketmq.so as bundled in the PyPI package `rocketmq` 0.4.4 (see
compat/setup.sh; run this script with that venv's python).

Usage:
    e2e.py MODE --namesrv 127.0.0.1:PORT --topic T --group G [options]

Modes:
    produce          send --count messages with send_sync. Message i (i from --start) has body
                     "m-<i>", key "k-<i>", tag TagA for even i and TagB for odd i (--tags), and
                     the user property color=<red|green|blue>[i % 3].
                     With --delay-level N > 0 every message carries that delay level (the
                     broker holds it in SCHEDULE_TOPIC_XXXX until due).
    produce-orderly  for each key of --order-keys (comma separated), send --count messages with
                     send_orderly. The selector argument is the key's index in --order-keys; the
                     selector picks queue (index % queue count), so every message of one key goes
                     to one queue. Message j of key K has body "o-<K>-<j>", key K, tag --tag and
                     the properties order_key=K and seq=<j>.
    push-consume     a PushConsumer (clustering) subscribes to --topic with --expression; it
                     collects messages until --expect distinct messages arrived, then keeps
                     listening for --settle-s more seconds (to see unexpected extra ones).
    pull-consume     a PullConsumer reads every message queue of --topic from offset 0 until no
                     new message, repeating the pass until --expect messages were read.
    produce-messages send the messages of --messages-json with send_sync, in order: a file holding
                     a JSON list of {"body": str, "tag": str, "keys": [str], "props": {str: str}}
                     (all but body optional; keys are joined with spaces, as KEYS holds them).
                     Message i is the list's entry i; its "sent" line carries the entry's fields.

Output (JSON lines, keys sorted; every line has "event"):
    {"event": "started", ...}                          the client started
    {"event": "sent", "i": .., "status": "OK", "msg_id": .., "queue_offset": .., ...}
    {"event": "send_failed", "i": .., "error_type": .., "error": ..}
    {"event": "queues", "queues": [{"broker_name": .., "queue_id": ..}, ..]}   (pull-consume)
    {"event": "pull", "broker_name": .., "queue_id": .., "status": "FOUND", "offset": ..,
     "next_begin_offset": ..,
     "min_offset": .., "max_offset": .., "count": ..}                          (pull-consume)
    {"event": "message", "topic": .., "tags": .., "keys": .., "body": .., "props": {..},
     "uniq_key": .., "msg_id": .., "queue_id": .., "queue_offset": .., "reconsume_times": ..,
     "commit_log_offset": .., "store_size": .., "born_timestamp": .., "store_timestamp": ..}
    {"event": "result", "ok": .., "outcome": .., ...}  the child's verdict
    {"event": "done", "ok": .., "outcome": .., "elapsed_ms": .., "child_exit": .., ...}
                                                       always the last line, from the parent
For produce, the send result of the C API carries no queue id (only status, msg id and queue
offset), so "sent" lines have no queue_id; produce-orderly reports the queue its selector chose
(queue_id) and the queue count it was offered (mq_size). msg_id is the client-made UNIQ_KEY.
A consumed message's "props" holds the properties named by --props (default color, order_key,
seq and CLUSTER, which a Java broker adds; missing ones are left out) and "uniq_key" the
UNIQ_KEY property; push-consume adds "recv_seq" (1, 2, ... in the order the listener got the
messages) and "received_at_ms", the wall-clock time (ms since the epoch)
the listener got the message, to compare with store_timestamp.
outcome is one of: ok, incomplete, start_failed, send_failed, error, import_failed, timeout,
crashed.

Exit codes: 0 success (all sends succeeded; consumers got at least --expect distinct
messages); 3 failure (a send failed, too few messages, timeout, or the C library crashed);
2 usage or environment error (bad arguments, the rocketmq package cannot be imported).

As in route_probe.py, the C library runs in a child process (this script re-executed with
--child) because it can hang or crash. The parent relays the child's lines as they come, kills
the child at --timeout-s (hard deadline for the whole run), and after the child's result line
gives it --shutdown-grace-s to shut down before killing it, keeping the result. Consumers stop
waiting for messages --shutdown-grace-s + 1 s before the deadline so they can still report.

The C++ client logs to $HOME/logs/rocketmq-cpp/. The child runs with HOME=--client-home
(default: a fresh temporary directory, removed on success and kept, with its path in the "done"
line as client_log_dir, on failure or with --keep-client-home).
"""

import argparse
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

EXIT_OK = 0
EXIT_ENV = 2
EXIT_FAILED = 3

CLIENT = "rocketmq-client-cpp (PyPI rocketmq 0.4.4)"
MODES = ("produce", "produce-orderly", "push-consume", "pull-consume", "produce-messages")
COLORS = ("red", "green", "blue")
PULL_STATUS = {0: "FOUND", 1: "NO_NEW_MSG", 2: "NO_MATCHED_MSG", 3: "OFFSET_ILLEGAL", 4: "BROKER_TIMEOUT"}
LOG_LEVELS = ("fatal", "error", "warn", "info", "debug", "trace")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=MODES)
    ap.add_argument("--namesrv", required=True, help="name server address host:port (';' separated list allowed)")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True, help="producer or consumer group")
    ap.add_argument("--timeout-s", type=float, default=30.0,
                    help="hard deadline for the whole run (default 30)")
    ap.add_argument("--shutdown-grace-s", type=float, default=3.0,
                    help="time the client gets to shut down after reporting its result (default 3)")
    ap.add_argument("--client-home", default=None,
                    help="HOME for the C++ client (its log goes to HOME/logs/rocketmq-cpp/)")
    ap.add_argument("--keep-client-home", action="store_true",
                    help="keep the temporary client home (and report it) even on success")
    ap.add_argument("--client-log-level", choices=LOG_LEVELS, default=None,
                    help="log level of the C++ client (its default: info)")
    # produce / produce-orderly
    ap.add_argument("--count", type=int, default=10,
                    help="produce: messages to send; produce-orderly: messages per key (default 10)")
    ap.add_argument("--start", type=int, default=0, help="produce: index of the first message (default 0)")
    ap.add_argument("--delay-level", type=int, default=0,
                    help="produce: delay level of every message (default 0: not delayed)")
    ap.add_argument("--tags", default="TagA,TagB",
                    help="produce: comma separated tags, used in turn (default TagA,TagB)")
    ap.add_argument("--order-keys", default="A,B,C", help="produce-orderly: comma separated keys (default A,B,C)")
    ap.add_argument("--tag", default="TagOrder", help="produce-orderly: the tag of every message")
    ap.add_argument("--messages-json", default=None,
                    help="produce-messages: file with the JSON list of messages to send")
    ap.add_argument("--send-timeout-ms", type=int, default=None,
                    help="per-attempt send timeout (client default 3000; it makes 3 attempts)")
    ap.add_argument("--pause-after-failure-ms", type=int, default=0,
                    help="produce modes: wait this long after a failed send before the next one, as an "
                         "application that backs off would (default 0)")
    # consumers
    ap.add_argument("--expression", default="*", help="consumers: subscription expression (default *)")
    ap.add_argument("--expect", type=int, default=None,
                    help="consumers: distinct messages that make the run a success (required)")
    ap.add_argument("--orderly", action="store_true",
                    help="push-consume: an orderly consumer (broker queue locks, one queue at a time)")
    ap.add_argument("--settle-s", type=float, default=0.0,
                    help="push-consume: keep listening this long after --expect arrived (default 0)")
    ap.add_argument("--props", default="color,order_key,seq,CLUSTER",
                    help="consumers: comma separated user properties to report")
    ap.add_argument("--max-num", type=int, default=32, help="pull-consume: messages per pull (default 32)")
    # ACL
    ap.add_argument("--access-key", default=None, help="sign requests with this access key (ACL)")
    ap.add_argument("--secret-key", default=None, help="the secret key of --access-key")
    ap.add_argument("--ons-channel", default="LOCAL",
                    help="the OnsChannel field the C++ client signs with its credentials (default LOCAL)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.timeout_s <= 0:
        ap.error("--timeout-s must be positive")
    if args.count < 0 or args.start < 0:
        ap.error("--count and --start must not be negative")
    if args.mode in ("push-consume", "pull-consume") and (args.expect is None or args.expect < 0):
        ap.error("%s needs --expect N (N >= 0)" % args.mode)
    if args.mode == "produce" and not split_list(args.tags):
        ap.error("--tags must name at least one tag")
    if args.mode == "produce-orderly" and not split_list(args.order_keys):
        ap.error("--order-keys must name at least one key")
    if args.mode == "produce-messages" and not args.messages_json:
        ap.error("produce-messages needs --messages-json FILE")
    return args


def split_list(text):
    return [x.strip() for x in text.split(",") if x.strip()]


_emit_lock = threading.Lock()


def emit(record):
    line = json.dumps(record, sort_keys=True) + "\n"
    with _emit_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


# ---------------------------------------------------------------- child: drives the C library


def text(value):
    """A C string from the library (bytes or None) as str."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def set_log_level(dll, kind, handle, level):
    if level is None:
        return
    from rocketmq.ffi import _CLogLevel
    fn = {"producer": dll.SetProducerLogLevel, "push": dll.SetPushConsumerLogLevel,
          "pull": dll.SetPullConsumerLogLevel}[kind]
    fn(handle, _CLogLevel[level.upper()])


def describe_message(dll, handle, props):
    """Everything the C API exposes about a received message, as a JSON-ready dict."""
    get = lambda name: text(dll.GetMessageProperty(handle, name.encode("utf-8")))  # noqa: E731
    found = {}
    for name in props:
        value = get(name)
        if value:  # the C API answers "" for a missing property
            found[name] = value
    body = dll.GetMessageBody(handle)
    return dict(
        event="message",
        topic=text(dll.GetMessageTopic(handle)),
        tags=text(dll.GetMessageTags(handle)),
        keys=text(dll.GetMessageKeys(handle)),
        body=text(body),
        props=found,
        uniq_key=get("UNIQ_KEY"),
        msg_id=text(dll.GetMessageId(handle)),
        queue_id=dll.GetMessageQueueId(handle),
        queue_offset=dll.GetMessageQueueOffset(handle),
        reconsume_times=dll.GetMessageReconsumeTimes(handle),
        commit_log_offset=dll.GetMessageCommitLogOffset(handle),
        store_size=dll.GetMessageStoreSize(handle),
        born_timestamp=dll.GetMessageBornTimestamp(handle),
        store_timestamp=dll.GetMessageStoreTimestamp(handle),
    )


def message_identity(rec):
    """What makes a received message distinct: its unique key, else where it is stored."""
    return rec.get("uniq_key") or (rec.get("queue_id"), rec.get("queue_offset"), rec.get("body"))


def pause_after_failure(args):
    if args.pause_after_failure_ms > 0:
        time.sleep(args.pause_after_failure_ms / 1000.0)


def set_credentials(args, client):
    """Signs the client's requests (the C++ client's ClientRPCHook) when --access-key is given."""
    if args.access_key:
        client.set_session_credentials(args.access_key, args.secret_key or "", args.ons_channel)


def produce(args, dll, client):
    from rocketmq.client import Message, Producer, SendStatus
    producer = Producer(args.group)
    producer.set_namesrv_addr(args.namesrv)
    set_credentials(args, producer)
    set_log_level(dll, "producer", producer._handle, args.client_log_level)
    if args.send_timeout_ms is not None:
        producer.set_timeout(args.send_timeout_ms)
    try:
        producer.start()
    except Exception as e:
        emit(dict(event="result", ok=False, outcome="start_failed", error_type=type(e).__name__, error=str(e)))
        return EXIT_FAILED
    emit(dict(event="started", mode=args.mode, group=args.group, topic=args.topic))
    client["producer"] = producer

    sent = failed = 0
    if args.mode == "produce":
        tags = split_list(args.tags)
        for i in range(args.start, args.start + args.count):
            fields = dict(i=i, body="m-%d" % i, key="k-%d" % i, tag=tags[i % len(tags)], color=COLORS[i % len(COLORS)])
            msg = Message(args.topic)
            msg.set_keys(fields["key"])
            msg.set_tags(fields["tag"])
            msg.set_body(fields["body"])
            msg.set_property("color", fields["color"])
            if args.delay_level > 0:
                msg.set_delay_time_level(args.delay_level)
                fields["delay_level"] = args.delay_level
            fields["sent_at_ms"] = int(time.time() * 1000)
            try:
                res = producer.send_sync(msg)
            except Exception as e:
                failed += 1
                emit(dict(event="send_failed", error_type=type(e).__name__, error=str(e), **fields))
                pause_after_failure(args)
                continue
            ok = res.status == SendStatus.OK
            sent += ok
            failed += not ok
            emit(dict(event="sent", ok=ok, status=res.status.name, msg_id=res.msg_id, queue_offset=res.offset,
                      **fields))
    else:
        keys = split_list(args.order_keys)
        for seq in range(args.count):
            for index, key in enumerate(keys):
                chosen = {}

                def selector(mq_size, _msg, user_arg, chosen=chosen):
                    arg = ctypes.cast(user_arg, ctypes.POINTER(ctypes.c_int))[0]
                    chosen.update(mq_size=mq_size, queue_id=arg % mq_size)
                    return chosen["queue_id"]

                fields = dict(order_key=key, arg=index, seq=seq, body="o-%s-%d" % (key, seq), key=key, tag=args.tag)
                msg = Message(args.topic)
                msg.set_keys(key)
                msg.set_tags(args.tag)
                msg.set_body(fields["body"])
                msg.set_property("order_key", key)
                msg.set_property("seq", str(seq))
                try:
                    res = producer.send_orderly(msg, index, queue_selector=selector)
                except Exception as e:
                    failed += 1
                    emit(dict(event="send_failed", error_type=type(e).__name__, error=str(e), **fields, **chosen))
                    pause_after_failure(args)
                    continue
                ok = res.status == SendStatus.OK
                sent += ok
                failed += not ok
                emit(dict(event="sent", ok=ok, status=res.status.name, msg_id=res.msg_id, queue_offset=res.offset,
                          **fields, **chosen))
    ok = failed == 0
    emit(dict(event="result", ok=ok, outcome="ok" if ok else "send_failed", sent=sent, failed=failed))
    return EXIT_OK if ok else EXIT_FAILED


def produce_messages(args, dll, client):
    """Mode produce-messages: the messages of --messages-json, as given."""
    from rocketmq.client import Message, Producer, SendStatus
    try:
        with open(args.messages_json, encoding="utf-8") as f:
            specs = json.load(f)
        if not isinstance(specs, list) or not all(isinstance(m, dict) and "body" in m for m in specs):
            raise ValueError("expected a JSON list of objects with a body")
    except (OSError, ValueError) as e:
        emit(dict(event="result", ok=False, outcome="error", error_type=type(e).__name__, error=str(e)))
        return EXIT_FAILED
    producer = Producer(args.group)
    producer.set_namesrv_addr(args.namesrv)
    set_credentials(args, producer)
    set_log_level(dll, "producer", producer._handle, args.client_log_level)
    if args.send_timeout_ms is not None:
        producer.set_timeout(args.send_timeout_ms)
    try:
        producer.start()
    except Exception as e:
        emit(dict(event="result", ok=False, outcome="start_failed", error_type=type(e).__name__, error=str(e)))
        return EXIT_FAILED
    emit(dict(event="started", mode=args.mode, group=args.group, topic=args.topic))
    client["producer"] = producer

    sent = failed = 0
    for i, spec in enumerate(specs):
        fields = dict(i=i, body=spec["body"], tag=spec.get("tag"), keys=spec.get("keys") or [],
                      props=spec.get("props") or {})
        msg = Message(args.topic)
        msg.set_body(fields["body"])
        if fields["tag"]:
            msg.set_tags(fields["tag"])
        if fields["keys"]:
            msg.set_keys(" ".join(fields["keys"]))
        for name, value in sorted(fields["props"].items()):
            msg.set_property(name, value)
        fields["sent_at_ms"] = int(time.time() * 1000)
        try:
            res = producer.send_sync(msg)
        except Exception as e:
            failed += 1
            emit(dict(event="send_failed", error_type=type(e).__name__, error=str(e), **fields))
            continue
        ok = res.status == SendStatus.OK
        sent += ok
        failed += not ok
        emit(dict(event="sent", ok=ok, status=res.status.name, msg_id=res.msg_id, queue_offset=res.offset, **fields))
    ok = failed == 0
    emit(dict(event="result", ok=ok, outcome="ok" if ok else "send_failed", sent=sent, failed=failed))
    return EXIT_OK if ok else EXIT_FAILED


def push_consume(args, dll, client, wait_until):
    from rocketmq.client import PushConsumer
    props = split_list(args.props)
    seen = set()
    total = [0]
    lock = threading.Lock()
    enough = threading.Event()
    if args.expect == 0:
        enough.set()

    consumer = PushConsumer(args.group, orderly=args.orderly)
    consumer.set_namesrv_addr(args.namesrv)
    set_credentials(args, consumer)
    set_log_level(dll, "push", consumer._handle, args.client_log_level)

    def on_message(msg):
        rec = describe_message(dll, msg._handle, props)
        rec["received_at_ms"] = int(time.time() * 1000)
        with lock:
            total[0] += 1
            rec["recv_seq"] = total[0]
            seen.add(message_identity(rec))
            if len(seen) >= args.expect:
                enough.set()
        emit(rec)

    consumer.subscribe(args.topic, on_message, args.expression)
    try:
        consumer.start()
    except Exception as e:
        emit(dict(event="result", ok=False, outcome="start_failed", error_type=type(e).__name__, error=str(e)))
        return EXIT_FAILED
    client["consumer"] = consumer
    emit(dict(event="started", mode=args.mode, group=args.group, topic=args.topic, expression=args.expression))

    enough.wait(max(0.0, wait_until - time.monotonic()))
    if enough.is_set() and args.settle_s > 0:
        time.sleep(max(0.0, min(args.settle_s, wait_until - time.monotonic())))
    with lock:
        distinct, received = len(seen), total[0]
    ok = distinct >= args.expect
    emit(dict(event="result", ok=ok, outcome="ok" if ok else "incomplete", expected=args.expect,
              distinct=distinct, received=received))
    return EXIT_OK if ok else EXIT_FAILED


def pull_consume(args, dll, client, wait_until):
    from rocketmq.client import PullConsumer
    from rocketmq.ffi import _CMessageQueue
    props = split_list(args.props)
    consumer = PullConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    set_credentials(args, consumer)
    set_log_level(dll, "pull", consumer._handle, args.client_log_level)
    try:
        consumer.start()
    except Exception as e:
        emit(dict(event="result", ok=False, outcome="start_failed", error_type=type(e).__name__, error=str(e)))
        return EXIT_FAILED
    client["consumer"] = consumer
    emit(dict(event="started", mode=args.mode, group=args.group, topic=args.topic, expression=args.expression))

    mq_array = ctypes.POINTER(_CMessageQueue)()
    size = ctypes.c_int()
    status = dll.FetchSubscriptionMessageQueues(consumer._handle, args.topic.encode("utf-8"),
                                                ctypes.pointer(mq_array), ctypes.pointer(size))
    if status != 0:
        emit(dict(event="result", ok=False, outcome="error", error_type="FetchSubscriptionMessageQueues",
                  error=text(dll.GetLatestErrorMessage()), status=int(status)))
        return EXIT_FAILED
    queues = [mq_array[i] for i in range(size.value)]
    emit(dict(event="queues", queues=[dict(broker_name=text(q.brokerName), queue_id=q.queueId) for q in queues]))

    # One offset per queue of each broker: queue ids repeat across brokers.
    offsets = {(text(q.brokerName), q.queueId): 0 for q in queues}
    seen = set()
    received = 0
    passes = 0
    expression = args.expression.encode("utf-8")
    while True:
        passes += 1
        for q in queues:
            stale = 0  # pulls in a row that did not move the offset forward
            while time.monotonic() < wait_until:
                key = (text(q.brokerName), q.queueId)
                offset = offsets[key]
                res = dll.Pull(consumer._handle, ctypes.pointer(q), expression, offset, args.max_num)
                name = PULL_STATUS.get(res.pullStatus, str(res.pullStatus))
                line = dict(event="pull", broker_name=key[0], queue_id=q.queueId, status=name, offset=offset,
                            next_begin_offset=res.nextBeginOffset, min_offset=res.minOffset,
                            max_offset=res.maxOffset, count=res.size if res.pullStatus == 0 else 0)
                if res.pullStatus == 4:
                    line["error"] = text(dll.GetLatestErrorMessage())
                emit(line)
                if res.pullStatus == 0:
                    for i in range(res.size):
                        rec = describe_message(dll, res.msgFoundList[i], props)
                        received += 1
                        seen.add(message_identity(rec))
                        emit(rec)
                dll.ReleasePullResult(res)
                if res.pullStatus == 1:  # NO_NEW_MSG: this queue is read to its end
                    break
                if res.pullStatus != 4 and res.nextBeginOffset > offset:
                    offsets[key] = res.nextBeginOffset
                    stale = 0
                    continue
                stale += 1
                if stale >= 3:  # an offset that never advances: give up on this queue for this pass
                    break
                time.sleep(0.2)
        if len(seen) >= args.expect or time.monotonic() >= wait_until:
            break
        time.sleep(0.2)
    dll.ReleaseSubscriptionMessageQueue(mq_array)
    ok = len(seen) >= args.expect
    emit(dict(event="result", ok=ok, outcome="ok" if ok else "incomplete", expected=args.expect,
              distinct=len(seen), received=received, passes=passes,
              next_offsets={f"{b}/{q}": v for (b, q), v in sorted(offsets.items())}))
    return EXIT_OK if ok else EXIT_FAILED


def child_main(args):
    """Runs in the child process: prints event lines and one result line, then shuts down."""
    started = time.monotonic()
    # Leave time to report and shut down before the parent's hard deadline.
    wait_until = started + max(0.5, args.timeout_s - args.shutdown_grace_s - 1.0)
    try:
        from rocketmq.ffi import dll
        import rocketmq.client  # noqa: F401  (loads the wrapper and its exceptions)
    except Exception as e:  # ImportError, or OSError from loading librocketmq.so
        emit(dict(event="result", ok=False, outcome="import_failed", error_type=type(e).__name__, error=str(e)))
        return EXIT_ENV

    client = {}  # the started producer or consumer, shut down at the end
    try:
        if args.mode == "produce-messages":
            return produce_messages(args, dll, client)
        if args.mode in ("produce", "produce-orderly"):
            return produce(args, dll, client)
        if args.mode == "push-consume":
            return push_consume(args, dll, client, wait_until)
        return pull_consume(args, dll, client, wait_until)
    except Exception as e:
        emit(dict(event="result", ok=False, outcome="error", error_type=type(e).__name__, error=str(e)))
        return EXIT_FAILED
    finally:
        for obj in client.values():
            try:
                obj.shutdown()
            except Exception:
                pass


# ---------------------------------------------------------------- parent: supervises the child


def child_argv(argv):
    return [sys.executable, os.path.abspath(__file__), "--child"] + list(argv)


def describe_exit(rc):
    if rc is None:
        return "killed"
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return "signal %d" % -rc
    return "exit %d" % rc


def parent_main(args, argv):
    started = time.monotonic()
    deadline = started + args.timeout_s

    if args.client_home:
        client_home, own_home = args.client_home, False
        os.makedirs(client_home, exist_ok=True)
    else:
        client_home, own_home = tempfile.mkdtemp(prefix="ferromq-cpp-e2e-"), True
    env = dict(os.environ, HOME=client_home)

    proc = subprocess.Popen(child_argv(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=None, env=env)
    result = {}
    got_result = threading.Event()
    counts = dict(lines=0)

    def relay_child_stdout():
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").strip()
            try:
                rec = json.loads(line)
            except ValueError:
                if line:
                    sys.stderr.write("e2e child stdout: %s\n" % line)
                continue
            if not isinstance(rec, dict) or "event" not in rec:
                sys.stderr.write("e2e child stdout: %s\n" % line)
                continue
            counts["lines"] += 1
            if rec["event"] == "result":
                if not result:
                    result.update(rec)
                    got_result.set()
                continue  # folded into the final "done" line
            emit(rec)
        got_result.set()  # EOF: the child exited (or closed stdout), with or without a result

    relay = threading.Thread(target=relay_child_stdout, daemon=True)
    relay.start()

    got_result.wait(max(0.0, deadline - time.monotonic()))
    killed = False
    if result:
        wait_s = min(args.shutdown_grace_s, deadline - time.monotonic())
    else:
        wait_s = deadline - time.monotonic()
    try:
        proc.wait(timeout=max(0.0, wait_s))
    except subprocess.TimeoutExpired:
        proc.kill()
        killed = True
        proc.wait()
    relay.join(timeout=2.0)

    record = dict(mode=args.mode, namesrv=args.namesrv, topic=args.topic, group=args.group, client=CLIENT)
    if result:
        record.update(result)
        if killed:
            record["child_exit"] = "killed after %.1f s shutdown grace" % args.shutdown_grace_s
        else:
            record["child_exit"] = describe_exit(proc.returncode)
    elif killed:
        record.update(ok=False, outcome="timeout",
                      error="no result within %.1f s; client process killed" % args.timeout_s)
    else:
        record.update(ok=False, outcome="crashed",
                      error="client process ended (%s) without a result" % describe_exit(proc.returncode),
                      child_exit=describe_exit(proc.returncode))
    record["event"] = "done"

    if record.get("outcome") == "import_failed":
        code = EXIT_ENV
    elif record.get("ok") is True:
        code = EXIT_OK
    else:
        code = EXIT_FAILED

    if own_home and not args.keep_client_home and (code == EXIT_OK or code == EXIT_ENV):
        shutil.rmtree(client_home, ignore_errors=True)
    else:
        record["client_log_dir"] = os.path.join(client_home, "logs", "rocketmq-cpp")
    record["elapsed_ms"] = int((time.monotonic() - started) * 1000)
    emit(record)
    return code


def main(argv):
    args = parse_args(argv)
    if args.child:
        code = child_main(args)
        # os._exit skips the wrapper's __del__ (a second shutdown + Destroy* at interpreter exit).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(parent_main(args, argv))


if __name__ == "__main__":
    main(sys.argv[1:])
