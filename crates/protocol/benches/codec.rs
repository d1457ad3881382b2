//! Codec throughput: frame encode+decode in both header serializations, and stored-record
//! encode+decode. Run with `cargo bench -p ferromq-protocol --bench codec`; figures go to
//! docs/benchmarks.md.

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ferromq_protocol::header::{SendMessageRequestHeader, SendMessageRequestHeaderV2};
use ferromq_protocol::message::{MessageProperties, StoredMessage};
use ferromq_protocol::{decode_frame, encode_frame, request_code, RemotingCommand, SerializeType, MAX_FRAME_BYTES};

/// A SEND_MESSAGE_V2 request as a Java producer sends it, with a 1 KiB body.
fn send_request() -> RemotingCommand {
    let mut props = MessageProperties::new();
    props.insert("UNIQ_KEY", "7F0000011A2B18B4AAC25C3F1F0A0000");
    props.insert("TAGS", "TagA");
    props.insert("WAIT", "true");
    let header: SendMessageRequestHeaderV2 = SendMessageRequestHeader {
        producer_group: "bench_producer_group".into(),
        topic: "BenchTopic".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 3,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: Some(props.encode()),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        batch: Some(false),
        max_reconsume_times: None,
        broker_name: Some("broker-a".into()),
    }
    .into();
    RemotingCommand::request(request_code::SEND_MESSAGE_V2)
        .with_opaque(42)
        .with_header(&header)
        .with_body(vec![7u8; 1024])
}

fn frames(c: &mut Criterion) {
    let cmd = send_request();
    let mut group = c.benchmark_group("frame_encode_decode");
    group.throughput(Throughput::Elements(1));
    for (name, ty) in [("json", SerializeType::Json), ("rocketmq", SerializeType::RocketMq)] {
        group.bench_function(name, |b| {
            let mut buf = BytesMut::with_capacity(4096);
            b.iter(|| {
                encode_frame(&cmd, ty, &mut buf).expect("encodes");
                let decoded = decode_frame(&mut buf, MAX_FRAME_BYTES).expect("decodes").expect("whole frame");
                std::hint::black_box(decoded);
            });
        });
    }
    group.finish();
}

fn records(c: &mut Criterion) {
    let msg = StoredMessage {
        queue_id: 3,
        queue_offset: 123_456,
        physical_offset: 987_654_321,
        born_timestamp_ms: 1_700_000_000_000,
        store_timestamp_ms: 1_700_000_000_001,
        born_host: "10.0.0.5:53412".parse().expect("addr"),
        store_host: "10.0.0.1:10911".parse().expect("addr"),
        body: Bytes::from(vec![7u8; 1024]),
        topic: "BenchTopic".into(),
        properties: "UNIQ_KEY\u{1}7F0000011A2B18B4AAC25C3F1F0A0000\u{2}TAGS\u{1}TagA\u{2}WAIT\u{1}true\u{2}".into(),
        ..StoredMessage::default()
    };
    let mut group = c.benchmark_group("record_encode_decode");
    group.throughput(Throughput::Elements(1));
    group.bench_function("v1_ipv4_1KiB", |b| {
        let mut buf = BytesMut::with_capacity(4096);
        b.iter(|| {
            buf.clear();
            msg.encode_into(&mut buf).expect("encodes");
            let bytes = buf.split().freeze();
            let (decoded, _) = StoredMessage::decode_shared(&bytes).expect("decodes");
            std::hint::black_box(decoded);
        });
    });
    group.finish();
}

criterion_group!(benches, frames, records);
criterion_main!(benches);
