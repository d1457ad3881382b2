//! Property tests: frames round-trip in both serializations, and no input makes the decoder
//! panic.

use bytes::BytesMut;
use ferromq_protocol::{
    decode_frame, encode_frame, ExtFields, LanguageCode, RemotingCommand, SerializeType, MAX_FRAME_BYTES,
};
use proptest::prelude::*;

fn command() -> impl Strategy<Value = RemotingCommand> {
    (
        any::<i16>(),
        0u8..14,
        any::<i16>(),
        any::<i32>(),
        0i32..4,
        proptest::option::of("\\PC{1,40}"),
        proptest::collection::btree_map("[a-zA-Z]{1,12}", "\\PC{0,30}", 0..8),
        proptest::collection::vec(any::<u8>(), 0..256),
    )
        .prop_map(|(code, lang, version, opaque, flag, remark, ext, body)| RemotingCommand {
            code: code.into(),
            language: LanguageCode::from_code(lang),
            version: version.into(),
            opaque,
            flag,
            remark,
            ext_fields: ext.into_iter().collect::<ExtFields>(),
            body: body.into(),
            body_tail: Vec::new(),
        })
}

proptest! {
    #[test]
    fn frames_round_trip_in_both_serializations(cmd in command(), binary in any::<bool>()) {
        let ty = if binary { SerializeType::RocketMq } else { SerializeType::Json };
        let mut cmd = cmd;
        if binary {
            // The binary layout cannot tell an empty string from a missing one.
            cmd.ext_fields.retain(|_, v| !v.is_empty());
        }
        let mut buf = BytesMut::new();
        encode_frame(&cmd, ty, &mut buf).unwrap();
        let decoded = decode_frame(&mut buf, MAX_FRAME_BYTES).unwrap().unwrap();
        prop_assert_eq!(decoded, cmd);
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut buf = BytesMut::from(&bytes[..]);
        let _ = decode_frame(&mut buf, MAX_FRAME_BYTES);
    }

    #[test]
    fn arbitrary_headers_inside_a_valid_frame_never_panic(header in proptest::collection::vec(any::<u8>(), 0..300), ty in 0u8..2) {
        let mut v = Vec::new();
        v.extend_from_slice(&((4 + header.len()) as i32).to_be_bytes());
        v.extend_from_slice(&((u32::from(ty) << 24) | header.len() as u32).to_be_bytes());
        v.extend_from_slice(&header);
        let mut buf = BytesMut::from(&v[..]);
        let _ = decode_frame(&mut buf, MAX_FRAME_BYTES);
    }
}
