#!/usr/bin/env python3
"""Send one message with the official Apache RocketMQ C++ client and report what happened.

The client is librocketmq.so as bundled in the PyPI package `rocketmq` 0.4.4 (see
compat/setup.sh; run this script with that venv's python). The C++ client asks the name
server for the topic route (GET_ROUTEINFO_BY_TOPIC, 105), connects to the master broker
address (brokerId 0) in the route and sends SEND_MESSAGE (10) with a JSON header.

Usage:
    route_probe.py --namesrv 127.0.0.1:PORT --topic T --group G [--timeout-s N]
                   [--send-timeout-ms MS] [--shutdown-grace-s S] [--key K] [--tag TAG]
                   [--client-home DIR]

Prints exactly one JSON line on stdout, e.g.
    {"ok": true, "outcome": "sent", "status": "OK", "msg_id": "...", "offset": 42, ...}
    {"ok": false, "outcome": "send_failed", "error_type": "ProducerSendSyncFailed", "error": "...", ...}
outcome is one of: sent, start_failed, send_failed, error, import_failed, timeout, crashed.

Exit codes: 0 the send succeeded; 3 it failed (start/send error, timeout, or the C library
crashed); 2 usage or environment error (bad arguments, the rocketmq package cannot be imported).

The C library runs in a child process (this script re-executed with --child), because it can
hang (it retries internally, waits 5 s per name-server RPC, and shutdown waits up to 3 s for a
broker that does not answer UNREGISTER_CLIENT) and it can crash (it segfaults on a SUCCESS
send response without extFields). The parent kills the child at --timeout-s, so the probe
always ends by itself; once the child has reported the send result the parent gives it
--shutdown-grace-s to shut down and then kills it, keeping the reported result.

The C++ client writes its log to $HOME/logs/rocketmq-cpp/. The child runs with HOME set to
--client-home (default: a fresh temporary directory, removed on success and kept, with its
path in the JSON line as client_log_dir, on failure), so runs do not litter the real home.
"""

import argparse
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

BODY = b"hello-ferromq"
CLIENT = "rocketmq-client-cpp (PyPI rocketmq 0.4.4)"


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--namesrv", required=True, help="name server address host:port (';' separated list allowed)")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True, help="producer group")
    ap.add_argument("--timeout-s", type=float, default=20.0,
                    help="hard deadline for the whole probe (default 20)")
    ap.add_argument("--send-timeout-ms", type=int, default=None,
                    help="per-attempt send timeout of the C++ producer (client default 3000; it makes 3 attempts)")
    ap.add_argument("--shutdown-grace-s", type=float, default=5.0,
                    help="time the client gets to shut down after reporting the result (default 5)")
    ap.add_argument("--key", default="ferromq-probe-key", help="message key (KEYS property)")
    ap.add_argument("--tag", default="ferromq-probe-tag", help="message tag (TAGS property)")
    ap.add_argument("--client-home", default=None,
                    help="HOME for the C++ client (its log goes to HOME/logs/rocketmq-cpp/)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.timeout_s <= 0:
        ap.error("--timeout-s must be positive")
    return args


def emit(record):
    sys.stdout.write(json.dumps(record, sort_keys=True) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------- child: drives the C library


def child_main(args):
    """Runs in the child process. Prints one JSON result line, then shuts the producer down."""
    try:
        from rocketmq.client import Message, Producer, SendStatus
    except Exception as e:  # ImportError, or OSError from loading librocketmq.so
        emit(dict(ok=False, outcome="import_failed", error_type=type(e).__name__, error=str(e)))
        return EXIT_ENV

    producer = None
    code = EXIT_FAILED
    try:
        producer = Producer(args.group)
        producer.set_namesrv_addr(args.namesrv)
        if args.send_timeout_ms is not None:
            producer.set_timeout(args.send_timeout_ms)
        try:
            producer.start()
        except Exception as e:
            emit(dict(ok=False, outcome="start_failed", error_type=type(e).__name__, error=str(e)))
            producer = None  # nothing to shut down
            return EXIT_FAILED
        msg = Message(args.topic)
        msg.set_keys(args.key)
        msg.set_tags(args.tag)
        msg.set_body(BODY)
        try:
            res = producer.send_sync(msg)
        except Exception as e:
            emit(dict(ok=False, outcome="send_failed", error_type=type(e).__name__, error=str(e)))
            return EXIT_FAILED
        # msg_id is the client-generated unique id (UNIQ_KEY property), not the broker's msgId.
        ok = res.status == SendStatus.OK
        code = EXIT_OK if ok else EXIT_FAILED
        emit(dict(ok=ok, outcome="sent", status=res.status.name, status_code=int(res.status),
                  msg_id=res.msg_id, offset=res.offset))
        return code
    except Exception as e:
        emit(dict(ok=False, outcome="error", error_type=type(e).__name__, error=str(e)))
        return EXIT_FAILED
    finally:
        if producer is not None:
            try:
                producer.shutdown()
            except Exception:
                pass


# ---------------------------------------------------------------- parent: supervises the child


def child_argv(args):
    argv = [sys.executable, os.path.abspath(__file__), "--child",
            "--namesrv", args.namesrv, "--topic", args.topic, "--group", args.group,
            "--key", args.key, "--tag", args.tag]
    if args.send_timeout_ms is not None:
        argv += ["--send-timeout-ms", str(args.send_timeout_ms)]
    return argv


def describe_exit(rc):
    if rc is None:
        return "killed"
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return "signal %d" % -rc
    return "exit %d" % rc


def parent_main(args):
    started = time.monotonic()
    deadline = started + args.timeout_s
    base = dict(namesrv=args.namesrv, topic=args.topic, group=args.group, client=CLIENT,
                key=args.key, tag=args.tag)

    if args.client_home:
        client_home, own_home = args.client_home, False
        os.makedirs(client_home, exist_ok=True)
    else:
        client_home, own_home = tempfile.mkdtemp(prefix="ferromq-cpp-client-"), True
    env = dict(os.environ, HOME=client_home)

    proc = subprocess.Popen(child_argv(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=None, env=env)
    result = {}
    got_line = threading.Event()

    def read_child_stdout():
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").strip()
            try:
                rec = json.loads(line)
            except ValueError:
                sys.stderr.write("route_probe child stdout: %s\n" % line)
                continue
            if isinstance(rec, dict) and "outcome" in rec and not result:
                result.update(rec)
                got_line.set()
        got_line.set()  # EOF: the child exited (or closed stdout) without or after a result

    reader = threading.Thread(target=read_child_stdout, daemon=True)
    reader.start()

    got_line.wait(max(0.0, deadline - time.monotonic()))
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
    reader.join(timeout=1.0)

    record = dict(base)
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

    if record.get("outcome") == "import_failed":
        code = EXIT_ENV
    elif record.get("ok") is True:
        code = EXIT_OK
    else:
        code = EXIT_FAILED

    if own_home and code == EXIT_OK:
        shutil.rmtree(client_home, ignore_errors=True)
    elif own_home and record.get("outcome") == "import_failed":
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
    sys.exit(parent_main(args))


if __name__ == "__main__":
    main(sys.argv[1:])
