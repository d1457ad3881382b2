#!/usr/bin/env python3
"""Regenerates the committed seed corpus in fuzz/corpus/<target>/.

Deterministic and stdlib-only. Sources: the real C++ client frames in compat/captured/*.hex,
frames, headers, records and batches laid out here byte for byte (fact sheet 1.1-1.3, 3.1,
3.6), the JSON examples of fact sheet 2.6/2.8/4.7, and properties text. Each target's input
format (a leading mode/selector byte for some) is described at the top of its source file.

Run from anywhere: python3 fuzz/gen_corpus.py  (rewrites only the files it names)
"""

import json
import pathlib
import struct
import zlib

FUZZ = pathlib.Path(__file__).resolve().parent
CAPTURED = FUZZ.parent / "compat" / "captured"
CORPUS = FUZZ / "corpus"


def write(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


# --- remoting frames -------------------------------------------------------------------------

LANG = {"JAVA": 0, "CPP": 1, "RUST": 12}


def json_header(code, ext, opaque=1, flag=0, remark=None):
    h = {"code": code, "flag": flag, "language": "RUST", "opaque": opaque, "version": 479}
    if ext:
        h["extFields"] = ext
    if remark is not None:
        h["remark"] = remark
    return json.dumps(h, sort_keys=True, separators=(",", ":")).encode()


def binary_header(code, ext, opaque=1, flag=0, remark=""):
    out = struct.pack(">hbhii", code, LANG["RUST"], 479, opaque, flag)
    r = remark.encode()
    out += struct.pack(">i", len(r)) + r
    fields = b""
    for k, v in sorted(ext.items()):
        kb, vb = k.encode(), v.encode()
        fields += struct.pack(">h", len(kb)) + kb + struct.pack(">i", len(vb)) + vb
    return out + struct.pack(">i", len(fields)) + fields


def frame(serialize_type, header, body=b""):
    return struct.pack(">iI", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


def captured():
    for path in sorted(CAPTURED.glob("*.hex")):
        yield path.stem, bytes.fromhex(path.read_text().strip())


def split_frame(raw):
    """(serialize type, header, body) of one whole frame."""
    length, word = struct.unpack(">iI", raw[:8])
    header_len = word & 0xFFFFFF
    return word >> 24, raw[8 : 8 + header_len], raw[8 + header_len : 4 + length]


SEND_V2 = {"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1700000000000", "h": "0",
           "i": "TAGS\x01TagA\x02KEYS\x01k1\x02", "j": "0", "k": "false", "l": "16", "m": "false"}
PULL = {"consumerGroup": "CG", "topic": "T", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
        "sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "15000", "subscription": "TagA || TagB",
        "subVersion": "1700000000000", "expressionType": "TAG"}
REGISTER = {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": "DefaultCluster",
            "haServerAddr": "127.0.0.1:10912", "brokerId": "0", "compressed": "false", "bodyCrc32": "0"}


def frames():
    caps = dict(captured())
    for name, raw in caps.items():
        # frame_decode: selector 0 = 16 MiB limit, whole stream at once.
        write("frame_decode", name + ".bin", b"\x00" + raw)
    binary_send = frame(1, binary_header(310, SEND_V2), b"hello-ferromq")
    binary_response = frame(1, binary_header(0, {"msgId": "7F00000100002A9F0000000000000000", "queueId": "0",
                                                "queueOffset": "0"}, opaque=7, flag=1, remark="OK"))
    write("frame_decode", "binary-send-v2.bin", b"\x00" + binary_send)
    write("frame_decode", "binary-response.bin", b"\x00" + binary_response)
    # Two frames in one stream, split in the middle (selector 0x80: split at 32/63), 4 KiB limit.
    write("frame_decode", "two-frames-split.bin", b"\x81" + caps["cpp-get-route-request"] + binary_response)
    write("frame_decode", "json-oneway-remark.bin",
          b"\x00" + frame(0, json_header(15, {"consumerGroup": "CG", "topic": "T", "queueId": 0, "commitOffset": 5},
                                          flag=2, remark="r\u00e9mark")))

    # header_decode: mode 0 JSON header, 1 binary header, 2 code byte + key=value lines.
    for name in ("cpp-send-message-request", "cpp-pull-message-request", "cpp-query-consumer-offset-request"):
        _, header, _ = split_frame(caps[name])
        write("header_decode", name + ".json.bin", b"\x00" + header)
    write("header_decode", "send-v2.binary.bin", b"\x01" + binary_header(310, SEND_V2))
    write("header_decode", "register-broker.binary.bin", b"\x01" + binary_header(103, REGISTER))
    lines = lambda ext: "\n".join(f"{k}={v}" for k, v in ext.items()).encode()
    write("header_decode", "send-v2.lines.bin", b"\x02\x01" + lines(SEND_V2))
    write("header_decode", "pull.lines.bin", b"\x02\x04" + lines(PULL))
    write("header_decode", "register-broker.lines.bin", b"\x02\x06" + lines(REGISTER))
    return caps


# --- stored records and batches --------------------------------------------------------------

MAGIC_V1, MAGIC_V2, BLANK = 0xDAA320A7, 0xDAA320AB, 0xCBD43194


def host(ip, port):
    return bytes(ip) + struct.pack(">i", port)


def record(topic, body, props, v2=False, born_v6=False, store_v6=False, sys_flag=0, queue_offset=0, phys=0):
    sys_flag |= (0x10 if born_v6 else 0) | (0x20 if store_v6 else 0)
    born = host([0] * 15 + [1] if born_v6 else [127, 0, 0, 1], 50000)
    store = host([0] * 15 + [1] if store_v6 else [10, 0, 0, 1], 10911)
    t, p = topic.encode(), props.encode()
    rest = struct.pack(">Iiiqqiq", zlib.crc32(body) & 0x7FFFFFFF, 0, 0, queue_offset, phys, sys_flag, 1700000000000)
    rest += born + struct.pack(">q", 1700000000123) + store + struct.pack(">iqi", 0, 0, len(body)) + body
    rest += (struct.pack(">h", len(t)) if v2 else struct.pack(">b", len(t))) + t
    rest += struct.pack(">h", len(p)) + p
    magic = MAGIC_V2 if v2 else MAGIC_V1
    return struct.pack(">iI", 8 + len(rest), magic) + rest


def batch_entry(body, props, flag=0):
    p = props.encode()
    rest = struct.pack(">iiii", 0, 0, flag, len(body)) + body + struct.pack(">h", len(p)) + p
    return struct.pack(">i", 4 + len(rest)) + rest


def records():
    props = "TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x017F0000010C6C18B4AAC2\x02"
    v1 = record("CompatTopic", b"hello-ferromq", props)
    v2 = record("CompatTopic", b"hello", props, v2=True, born_v6=True, store_v6=True, queue_offset=3, phys=4096)
    txn = record("RMQ_SYS_TRANS_HALF_TOPIC", b"", "TRAN_MSG\x01true\x02PGROUP\x01PG\x02", sys_flag=0x4)
    blank = struct.pack(">iI", 4096, BLANK)
    # record_decode: mode 0 raw, mode 1 TOTALSIZE overwritten with the buffer length.
    write("record_decode", "v1-ipv4.bin", b"\x00" + v1)
    write("record_decode", "v2-ipv6.bin", b"\x00" + v2)
    write("record_decode", "txn-half-empty-body.bin", b"\x01" + txn)
    write("record_decode", "blank-marker.bin", b"\x00" + blank)
    write("record_decode", "two-records.bin", b"\x00" + v1 + v2)
    write("record_decode", "torn-tail.bin", b"\x00" + v1 + v2[:40])

    write("batch_decode", "two-entries.bin",
          batch_entry(b"m1", "KEYS\x01a\x02WAIT\x01true\x02") + batch_entry(b"message-2", "TAGS\x01TagB\x02", flag=1))
    write("batch_decode", "one-empty-entry.bin", batch_entry(b"", ""))
    write("batch_decode", "java-unique-keys.bin",
          batch_entry(b"x" * 20, "UNIQ_KEY\x01AC1100020001000000000000\x02") * 3)


# --- properties and config text --------------------------------------------------------------

def texts():
    write("properties_decode", "message-properties.txt",
          "TAGS\x01TagA\x02KEYS\x01k1 k2\x02WAIT\x01true\x02UNIQ_KEY\x017F0000010C6C18B4AAC2\x02")
    write("properties_decode", "message-properties-malformed.txt", "\x02\x01\x02a\x01\x02\x01b\x02ab\x01c\x01d\x02ab\x01z")
    write("properties_decode", "namesrv-conf.txt",
          "# comment\n! other comment\nlistenPort=9876\nrocketmqHome = /opt/rocketmq\n"
          "kvConfigPath:/tmp/kv.json\norderMessageEnable true\n")
    write("properties_decode", "escapes-and-continuations.txt",
          "key\\ with\\ spaces=v\\u00e9\\tx\nlong = a,\\\n    b,\\\n    c\r\nempty=\n\\#notcomment=1\ntrailing\\\\\n")

    write("namesrv_config", "defaults.conf",
          "rocketmqHome=/opt/rocketmq\nlistenPort=9876\nscanNotActiveBrokerInterval=5000\n"
          "serverChannelMaxIdleTimeSeconds=120\nconfigBlackList=configBlackList;configStorePath;kvConfigPath\n")
    write("namesrv_config", "bools-and-unknown.conf",
          "orderMessageEnable = TRUE\nclusterTest:false\nsupportActingMaster true\nunknownKey=kept\n"
          "bindAddress=127.0.0.1\n")
    write("namesrv_config", "bad-values.conf", "listenPort=99999\nclusterTest=maybe\nbindAddress=0.0.0.0\n")
    write("namesrv_config", "bad-escape.conf", "kvConfigPath=/tmp/\\u00zz\n")


# --- JSON bodies -----------------------------------------------------------------------------

def compact(value):
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def bodies(caps):
    route = {"brokerDatas": [{"brokerAddrs": {"0": "10.0.0.1:10911", "1": "10.0.0.2:10911"}, "brokerName": "broker-a",
                              "cluster": "DefaultCluster", "enableActingMaster": False, "zoneName": None}],
             "filterServerTable": {}, "orderTopicConf": None,
             "queueDatas": [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 4, "topicSysFlag": 0,
                             "writeQueueNums": 4}],
             "topicQueueMappingByBroker": None}
    text = compact(route)
    write("json_body_decode", "route-standard.json", text)
    write("json_body_decode", "route-fastjson.json", text.replace('"0":', "0:").replace('"1":', "1:"))

    heartbeat = {"clientID": "10.0.0.5@12345#987654321",
                 "consumerDataSet": [{"consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                                      "consumeType": "CONSUME_PASSIVELY", "groupName": "g1",
                                      "messageModel": "CLUSTERING", "unitMode": False,
                                      "subscriptionDataSet": [{"classFilterMode": False, "codeSet": [110, 111],
                                                               "expressionType": "TAG", "subString": "tagA || tagB",
                                                               "subVersion": 1700000000000,
                                                               "tagsSet": ["tagA", "tagB"], "topic": "T1"}]}],
                 "heartbeatFingerprint": 0,
                 "producerDataSet": [{"groupName": "CLIENT_INNER_PRODUCER"}, {"groupName": "p1"}],
                 "withoutSub": False}
    write("json_body_decode", "heartbeat-java.json", compact(heartbeat))
    _, _, cpp_body = split_frame(caps["cpp-heartbeat-request"])
    write("json_body_decode", "heartbeat-cpp.json", cpp_body)

    broker = route["brokerDatas"][0]
    write("json_body_decode", "cluster-info.json",
          compact({"brokerAddrTable": {"broker-a": broker}, "clusterAddrTable": {"DefaultCluster": ["broker-a"]}}))
    topic = {"attributes": {"message.type": "FIFO"}, "order": False, "perm": 6, "readQueueNums": 8,
             "topicFilterType": "SINGLE_TAG", "topicName": "TopicTest", "topicSysFlag": 0, "writeQueueNums": 8}
    version = {"counter": 3, "stateVersion": 0, "timestamp": 1700000000000}
    write("json_body_decode", "topics-json.json",
          json.dumps({"dataVersion": version, "topicConfigTable": {"TopicTest": topic}}, indent=2, sort_keys=True))
    write("json_body_decode", "register-broker.json",
          compact({"filterServerList": [],
                   "topicConfigSerializeWrapper": {"dataVersion": version, "topicConfigTable": {"TopicTest": topic}}}))

    def chunk(b):
        return struct.pack(">i", len(b)) + b
    topics = [b"TopicTest 8 8 6 SINGLE_TAG {\"message.type\":\"FIFO\"}", b"%RETRY%CG 1 1 6 SINGLE_TAG"]
    stream = chunk(compact(version).encode()) + struct.pack(">i", len(topics)) + b"".join(chunk(t) for t in topics)
    stream += chunk(b"[]")
    stream += struct.pack(">i", 1) + chunk(compact({"topic": "TopicTest", "bname": "broker-a", "epoch": 0,
                                                     "totalQueues": 8, "dirty": False}).encode())
    write("json_body_decode", "register-broker-compressed.zlib", zlib.compress(stream, 9))
    write("json_body_decode", "topic-config-text.txt", topics[0])


def main():
    caps = frames()
    records()
    texts()
    bodies(caps)


if __name__ == "__main__":
    main()
