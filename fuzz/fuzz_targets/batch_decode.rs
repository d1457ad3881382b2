//! `decode_batch` (the SEND_BATCH_MESSAGE body) on arbitrary bytes.
//!
//! Checks:
//! - nothing panics;
//! - entry bodies are slices of the input;
//! - `encode_batch` of the decoded entries gives the input back, except MAGICCODE and BODYCRC,
//!   which the decoder ignores and the encoder writes as 0 (as the Java client does);
//! - decoding that encoding gives the same entries.
#![no_main]

use bytes::Bytes;
use ferromq_protocol::message::{decode_batch, encode_batch};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let input = Bytes::copy_from_slice(data);
    let Ok(entries) = decode_batch(&input) else {
        return;
    };
    let range = input.as_ptr_range();
    for entry in &entries {
        if !entry.body.is_empty() {
            assert!(range.contains(&entry.body.as_ptr()), "entry body does not share the input");
        }
    }

    let encoded = encode_batch(&entries).expect("decoded entries re-encode");
    let mut expected = data.to_vec();
    let mut pos = 0;
    for entry in &entries {
        expected[pos + 4..pos + 12].fill(0);
        pos += entry.encoded_len();
    }
    assert_eq!(pos, data.len(), "entry lengths do not add up to the input");
    assert_eq!(&encoded[..], &expected[..], "re-encoding changed the batch beyond MAGICCODE/BODYCRC");

    let again = decode_batch(&encoded.freeze()).expect("an encoded batch decodes");
    assert_eq!(again, entries, "batch round trip changed the entries");
});
