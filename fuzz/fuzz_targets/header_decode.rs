//! Header bytes wrapped in a valid frame, then every typed header read from the extFields.
//!
//! Input: byte 0 is a mode, the rest is the payload.
//! - mode % 3 == 0: the payload is a JSON header;
//! - mode % 3 == 1: the payload is a ROCKETMQ binary header;
//! - mode % 3 == 2: the payload is extFields written as `key=value` lines (lossy UTF-8), put into
//!   a request whose code byte 1 picks; the request is encoded in both serializations, which
//!   must decode to the same extFields. This mode lets the fuzzer reach the typed-header
//!   parsers without first producing a valid header.
//!
//! Checks: nothing panics; every typed header that reads also survives
//! `to_ext_fields` -> `read_ext_fields` (compared as extFields, so NaN compares equal to
//! itself); `SendMessageRequestHeader::decode_for` agrees with reading the long-key or
//! one-letter header directly.
#![no_main]

use bytes::{BufMut, BytesMut};
use ferromq_protocol::header::*;
use ferromq_protocol::{
    decode_frame, encode_frame, request_code, CommandHeader, ExtFields, RemotingCommand, SerializeType, MAX_FRAME_BYTES,
};
use libfuzzer_sys::fuzz_target;

const CODES: [i32; 8] = [
    request_code::SEND_MESSAGE,
    request_code::SEND_MESSAGE_V2,
    request_code::SEND_BATCH_MESSAGE,
    request_code::SEND_REPLY_MESSAGE_V2,
    request_code::PULL_MESSAGE,
    request_code::GET_ROUTEINFO_BY_TOPIC,
    request_code::REGISTER_BROKER,
    request_code::HEART_BEAT,
];

fn frame(serialize_type: SerializeType, header: &[u8]) -> Option<BytesMut> {
    let header_len = u32::try_from(header.len()).ok().filter(|&n| n <= 0x00FF_FFFF)?;
    let mut buf = BytesMut::with_capacity(8 + header.len());
    buf.put_u32(4 + header_len);
    buf.put_u32((u32::from(serialize_type.code()) << 24) | header_len);
    buf.put_slice(header);
    Some(buf)
}

fn decode(mut buf: BytesMut) -> Option<RemotingCommand> {
    let cmd = decode_frame(&mut buf, MAX_FRAME_BYTES).ok()?;
    let cmd = cmd.expect("a whole frame was supplied");
    assert!(buf.is_empty());
    Some(cmd)
}

fn lines_to_ext_fields(payload: &[u8]) -> ExtFields {
    String::from_utf8_lossy(payload)
        .split('\n')
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Reads `H`; if it reads, its own extFields must read back to the same extFields.
fn try_header<H: CommandHeader + std::fmt::Debug>(cmd: &RemotingCommand) -> Option<H> {
    let header = cmd.decode_header::<H>().ok()?;
    let written = header.to_ext_fields();
    let again = H::read_ext_fields(&written)
        .unwrap_or_else(|e| panic!("{}: own extFields do not read: {e}", std::any::type_name::<H>()));
    assert_eq!(again.to_ext_fields(), written, "{}: extFields round trip changed", std::any::type_name::<H>());
    Some(header)
}

fn all_headers(cmd: &RemotingCommand) {
    // namesrv
    try_header::<RegisterBrokerRequestHeader>(cmd);
    try_header::<RegisterBrokerResponseHeader>(cmd);
    try_header::<UnRegisterBrokerRequestHeader>(cmd);
    try_header::<GetRouteInfoRequestHeader>(cmd);
    try_header::<DeleteTopicFromNamesrvRequestHeader>(cmd);
    try_header::<RegisterTopicRequestHeader>(cmd);
    try_header::<PutKvConfigRequestHeader>(cmd);
    try_header::<GetKvConfigRequestHeader>(cmd);
    try_header::<GetKvConfigResponseHeader>(cmd);
    try_header::<DeleteKvConfigRequestHeader>(cmd);
    try_header::<GetKvListByNamespaceRequestHeader>(cmd);
    try_header::<QueryDataVersionRequestHeader>(cmd);
    try_header::<QueryDataVersionResponseHeader>(cmd);
    try_header::<BrokerHeartbeatRequestHeader>(cmd);
    try_header::<WipeWritePermOfBrokerRequestHeader>(cmd);
    try_header::<WipeWritePermOfBrokerResponseHeader>(cmd);
    try_header::<AddWritePermOfBrokerRequestHeader>(cmd);
    try_header::<AddWritePermOfBrokerResponseHeader>(cmd);
    try_header::<GetTopicsByClusterRequestHeader>(cmd);
    // admin
    try_header::<CreateTopicRequestHeader>(cmd);
    try_header::<DeleteTopicRequestHeader>(cmd);
    try_header::<DeleteSubscriptionGroupRequestHeader>(cmd);
    // client
    try_header::<UnregisterClientRequestHeader>(cmd);
    try_header::<GetConsumerListByGroupRequestHeader>(cmd);
    try_header::<NotifyConsumerIdsChangedRequestHeader>(cmd);
    try_header::<ConsumerSendMsgBackRequestHeader>(cmd);
    // offsets
    try_header::<QueryConsumerOffsetRequestHeader>(cmd);
    try_header::<OffsetResponseHeader>(cmd);
    try_header::<UpdateConsumerOffsetRequestHeader>(cmd);
    try_header::<GetMaxOffsetRequestHeader>(cmd);
    try_header::<QueueRequestHeader>(cmd);
    try_header::<SearchOffsetRequestHeader>(cmd);
    try_header::<GetEarliestMsgStoretimeResponseHeader>(cmd);
    // pull, query, transactions
    try_header::<PullMessageRequestHeader>(cmd);
    try_header::<PullMessageResponseHeader>(cmd);
    try_header::<QueryMessageRequestHeader>(cmd);
    try_header::<QueryMessageResponseHeader>(cmd);
    try_header::<ViewMessageRequestHeader>(cmd);
    try_header::<EndTransactionRequestHeader>(cmd);
    try_header::<CheckTransactionStateRequestHeader>(cmd);
    // send
    try_header::<SendMessageResponseHeader>(cmd);
    let long = try_header::<SendMessageRequestHeader>(cmd);
    let short = try_header::<SendMessageRequestHeaderV2>(cmd).map(SendMessageRequestHeader::from);
    for code in [cmd.code, request_code::SEND_MESSAGE, request_code::SEND_MESSAGE_V2, request_code::SEND_BATCH_MESSAGE]
    {
        let via_code = SendMessageRequestHeader::decode_for(code, &cmd.ext_fields).ok();
        let v2 = matches!(
            code,
            request_code::SEND_MESSAGE_V2 | request_code::SEND_BATCH_MESSAGE | request_code::SEND_REPLY_MESSAGE_V2
        );
        let expected = if v2 { &short } else { &long };
        // Compare through extFields: headers hold no floats, but this keeps the check uniform.
        assert_eq!(
            via_code.as_ref().map(CommandHeader::to_ext_fields),
            expected.as_ref().map(CommandHeader::to_ext_fields),
            "decode_for({code}) disagrees with reading the header directly"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, payload)) = data.split_first() else {
        return;
    };
    match mode % 3 {
        0 | 1 => {
            let serialize_type = if mode % 3 == 0 { SerializeType::Json } else { SerializeType::RocketMq };
            let Some(cmd) = frame(serialize_type, payload).and_then(decode) else {
                return;
            };
            all_headers(&cmd);
        }
        _ => {
            let (code_byte, lines) = payload.split_first().map_or((0, &[][..]), |(&b, rest)| (b, rest));
            let mut cmd = RemotingCommand::request(CODES[usize::from(code_byte) % CODES.len()]);
            cmd.ext_fields = lines_to_ext_fields(lines);
            for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
                let mut buf = BytesMut::new();
                if encode_frame(&cmd, serialize_type, &mut buf).is_err() {
                    continue;
                }
                let again = decode(buf).expect("an encoded request decodes");
                assert_eq!(again.ext_fields, cmd.ext_fields, "{serialize_type:?} changed the extFields");
            }
            all_headers(&cmd);
        }
    }
});
