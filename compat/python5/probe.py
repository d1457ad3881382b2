"""Drives the official RocketMQ 5.x Python client (PyPI `rocketmq-python-client`) against a
gRPC endpoint; crates/cli/tests/sdk5_clients.rs runs it. Each scenario prints `OK <name>`;
the first failure raises (non-zero exit, traceback on stderr).

Usage: probe.py ENDPOINT PREFIX
Topics (created by the test): PREFIX-normal (NORMAL), PREFIX-fifo (FIFO), PREFIX-delay (DELAY),
PREFIX-tx (TRANSACTION). Plaintext: this client verifies TLS certificates against the system's
roots, so a self-signed proxy certificate is refused (its default is plaintext).
"""
import sys
import time

from rocketmq import (ClientConfiguration, Credentials, FilterExpression, Message, Producer,
                      SimpleConsumer, TransactionChecker, TransactionResolution)

endpoint, prefix = sys.argv[1], sys.argv[2]
conf = ClientConfiguration(endpoint, Credentials(), request_timeout=10)


def message(topic, body, **kw):
    m = Message()
    m.topic = topic
    m.body = body.encode()
    for k, v in kw.items():
        if k == "props":
            for pk, pv in v.items():
                m.add_property(pk, pv)
        else:
            setattr(m, k, v)
    return m


def receive_all(consumer, want, invisible=15, timeout=40, ack=True):
    got = {}
    deadline = time.time() + timeout
    while len(got) < want and time.time() < deadline:
        for m in consumer.receive(16, invisible):
            got[m.message_id] = m
            if ack:
                consumer.ack(m)
    return got


class Checker(TransactionChecker):
    def check(self, message):
        return TransactionResolution.COMMIT


topics = tuple(f"{prefix}-{t}" for t in ("normal", "fifo", "delay", "tx"))
producer = Producer(conf, topics, checker=Checker())
producer.startup()
normal, fifo, delay, tx = topics

# Normal: tag, keys, user properties, message ids all arrive; every message is acked.
sent = {}
for i in range(5):
    r = producer.send(message(normal, f"py-{i}", tag="TagA", keys=f"k{i}", props={"color": "red"}))
    sent[r.message_id] = f"py-{i}"
consumer = SimpleConsumer(conf, f"{prefix}-g-normal", {normal: FilterExpression("TagA")})
consumer.startup()
got = receive_all(consumer, 5)
assert {k: m.body.decode() for k, m in got.items()} == sent, (got, sent)
for m in got.values():
    assert m.tag == "TagA" and m.properties.get("color") == "red", (m.tag, m.properties)
    assert m.keys and next(iter(m.keys)).startswith("k"), m.keys
print("OK normal", flush=True)

# Change invisible duration: unacked, it comes back with delivery attempt 2.
r = producer.send(message(normal, "again", tag="TagA"))
first = receive_all(consumer, 1, invisible=30, ack=False)
m = first[r.message_id]
consumer.change_invisible_duration(m, 1)
back = receive_all(consumer, 1, invisible=30, ack=False, timeout=20)
assert r.message_id in back and back[r.message_id].delivery_attempt == 2, back
consumer.ack(back[r.message_id])
print("OK change-invisible-duration", flush=True)
consumer.shutdown()

# FIFO: a message group.
fifo_ids = set()
for i in range(4):
    fifo_ids.add(producer.send(message(fifo, f"f-{i}", message_group="g1")).message_id)
c = SimpleConsumer(conf, f"{prefix}-g-fifo", {fifo: FilterExpression("*")})
c.startup()
got = receive_all(c, 4)
assert set(got) == fifo_ids, (got, fifo_ids)
assert all(m.message_group == "g1" for m in got.values())
c.shutdown()
print("OK fifo", flush=True)

# Delay: not received before its delivery time (this client takes it in seconds).
at = int(time.time()) + 3
r = producer.send(message(delay, "later", delivery_timestamp=at))
c = SimpleConsumer(conf, f"{prefix}-g-delay", {delay: FilterExpression("*")})
c.startup()
got = receive_all(c, 1, timeout=30)
assert r.message_id in got, got
assert time.time() >= at - 0.5, "delivered early"
c.shutdown()
print("OK delay", flush=True)

# Transactions: committed is delivered, rolled back is not.
t = producer.begin_transaction()
committed = producer.send(message(tx, "commit-me"), t)
t.commit()
t = producer.begin_transaction()
producer.send(message(tx, "roll-me-back"), t)
t.rollback()
c = SimpleConsumer(conf, f"{prefix}-g-tx", {tx: FilterExpression("*")})
c.startup()
got = receive_all(c, 2, timeout=15)
assert [m.body.decode() for m in got.values()] == ["commit-me"] and committed.message_id in got, got
c.shutdown()
print("OK transaction", flush=True)

producer.shutdown()
print("OK all", flush=True)
