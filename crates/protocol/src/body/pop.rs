//! POP consumption's JSON: the checkpoint (CK) and ack (AK, batch AK) records the broker
//! keeps in its revive topic, and BATCH_ACK_MESSAGE's request body. Java: `PopCheckPoint`,
//! `AckMsg`, `BatchAckMsg`, `BatchAckMessageRequestBody`, `BatchAck`.
//!
//! Keys are fastjson's short names (alphabetical, as fastjson writes them); the long
//! alternate names Java accepts on input are accepted too.

use serde::{Deserialize, Serialize};

use crate::body::{lenient, JsonBody};

/// A checkpoint: which queue offsets one pop took from one queue, when, for how long, and
/// which of them are acknowledged. Body of a `ck` record in the revive topic.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PopCheckPoint {
    /// Bitmap of acknowledged indexes into `d`.
    #[serde(rename = "bm", deserialize_with = "lenient::int")]
    pub bit_map: i32,
    /// The broker that served the pop.
    #[serde(rename = "bn", deserialize_with = "lenient::or_default")]
    pub broker_name: Option<String>,
    /// Consumer group.
    #[serde(rename = "c", deserialize_with = "lenient::or_default")]
    pub cid: Option<String>,
    /// Each popped message's queue offset minus `so`, ascending.
    #[serde(rename = "d", deserialize_with = "lenient::or_default")]
    pub queue_offset_diff: Vec<i32>,
    /// Invisible time, ms.
    #[serde(rename = "it", deserialize_with = "lenient::int")]
    pub invisible_time: i64,
    /// Number of messages.
    #[serde(rename = "n", deserialize_with = "lenient::int")]
    pub num: i32,
    /// Pop time, ms.
    #[serde(rename = "pt", deserialize_with = "lenient::int")]
    pub pop_time: i64,
    /// Queue id in `t`.
    #[serde(rename = "q", deserialize_with = "lenient::int")]
    pub queue_id: i32,
    /// `pt + it`: written (Java's computed getter), ignored when read.
    #[serde(rename = "reviveTime", skip_deserializing)]
    pub revive_time: i64,
    /// The checkpoint's own offset in its revive queue (set when read back).
    #[serde(rename = "ro", deserialize_with = "lenient::int")]
    pub revive_offset: i64,
    /// How many times revive wrote this checkpoint again (text; absent = 0).
    #[serde(rename = "rp", skip_serializing_if = "Option::is_none", deserialize_with = "lenient::or_default")]
    pub re_put_times: Option<String>,
    /// The first popped queue offset.
    #[serde(rename = "so", deserialize_with = "lenient::int")]
    pub start_offset: i64,
    /// The topic read (a pop retry topic when popped from one).
    #[serde(rename = "t", deserialize_with = "lenient::or_default")]
    pub topic: Option<String>,
}

impl JsonBody for PopCheckPoint {}

impl PopCheckPoint {
    /// The JSON as Java writes it (with `reviveTime` = pop time + invisible time).
    pub fn to_json(&self) -> Vec<u8> {
        let mut ck = self.clone();
        ck.revive_time = ck.pop_time.saturating_add(ck.invisible_time);
        ck.encode()
    }

    /// When the checkpoint's unacknowledged messages come back, ms.
    pub fn revive_time(&self) -> i64 {
        self.pop_time.saturating_add(self.invisible_time)
    }

    /// Queue offset of message `index`.
    pub fn queue_offset_of(&self, index: usize) -> i64 {
        match self.queue_offset_diff.get(index) {
            Some(d) => self.start_offset + i64::from(*d),
            // Checkpoints of old brokers carry no diffs: the offsets are consecutive.
            None => self.start_offset + index as i64,
        }
    }

    /// Index of `offset` among the popped messages (Java: `indexOfAck`).
    pub fn index_of(&self, offset: i64) -> Option<usize> {
        if offset < self.start_offset {
            return None;
        }
        let diff = offset - self.start_offset;
        if self.queue_offset_diff.is_empty() {
            return (diff < i64::from(self.num)).then_some(diff as usize);
        }
        let diff = i32::try_from(diff).ok()?;
        self.queue_offset_diff.binary_search(&diff).ok()
    }

    /// `rp` as a number.
    pub fn re_put_times(&self) -> u32 {
        self.re_put_times.as_deref().and_then(|t| t.trim().parse().ok()).unwrap_or(0)
    }
}

/// An acknowledgement (`ack` record), or with `aol` a batch of them (`bAck`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AckMsg {
    /// The acknowledged queue offset (-1 in a batch).
    #[serde(rename = "ao", alias = "ackOffset", deserialize_with = "lenient::int")]
    pub ack_offset: i64,
    /// Batch acks only: the acknowledged queue offsets.
    #[serde(
        rename = "aol",
        alias = "ackOffsetList",
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::or_default"
    )]
    pub ack_offset_list: Option<Vec<i64>>,
    /// The broker that served the pop.
    #[serde(rename = "bn", alias = "brokerName", deserialize_with = "lenient::or_default")]
    pub broker_name: Option<String>,
    /// Consumer group.
    #[serde(rename = "c", alias = "consumerGroup", deserialize_with = "lenient::or_default")]
    pub consumer_group: Option<String>,
    /// The pop's time, ms.
    #[serde(rename = "pt", alias = "popTime", deserialize_with = "lenient::int")]
    pub pop_time: i64,
    /// Queue id.
    #[serde(rename = "q", alias = "queueId", deserialize_with = "lenient::int")]
    pub queue_id: i32,
    /// The checkpoint's start offset.
    #[serde(rename = "so", alias = "startOffset", deserialize_with = "lenient::int")]
    pub start_offset: i64,
    /// The real topic (the pop retry topic for a retried message).
    #[serde(rename = "t", alias = "topic", deserialize_with = "lenient::or_default")]
    pub topic: Option<String>,
}

impl JsonBody for AckMsg {}

/// One entry of a BATCH_ACK_MESSAGE: the acknowledged messages of one checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BatchAck {
    /// Java `BitSet.toByteArray()` in base64: bit i set = offset `so + i` acknowledged.
    #[serde(rename = "b", alias = "bitSet", deserialize_with = "lenient::or_default")]
    pub bit_set: String,
    #[serde(rename = "c", alias = "consumerGroup", deserialize_with = "lenient::or_default")]
    pub consumer_group: String,
    #[serde(rename = "it", alias = "invisibleTime", deserialize_with = "lenient::int")]
    pub invisible_time: i64,
    #[serde(rename = "pt", alias = "popTime", deserialize_with = "lenient::int")]
    pub pop_time: i64,
    #[serde(rename = "q", alias = "queueId", deserialize_with = "lenient::int")]
    pub queue_id: i32,
    /// Retry flag "0" / "1" / "2".
    #[serde(rename = "r", alias = "retry", deserialize_with = "lenient::or_default")]
    pub retry: String,
    #[serde(rename = "rq", alias = "reviveQueueId", deserialize_with = "lenient::int")]
    pub revive_queue_id: i32,
    #[serde(rename = "so", alias = "startOffset", deserialize_with = "lenient::int")]
    pub start_offset: i64,
    /// The original topic (not the retry topic).
    #[serde(rename = "t", alias = "topic", deserialize_with = "lenient::or_default")]
    pub topic: String,
}

impl BatchAck {
    /// The set bits, ascending, or `None` when `b` is not base64.
    pub fn acked_indexes(&self) -> Option<Vec<u32>> {
        let bytes = base64_decode(&self.bit_set)?;
        let mut out = Vec::new();
        for (i, byte) in bytes.iter().enumerate() {
            for bit in 0..8 {
                if byte & (1 << bit) != 0 {
                    out.push(i as u32 * 8 + bit);
                }
            }
        }
        Some(out)
    }

    /// Sets `b` from the acknowledged indexes.
    pub fn set_acked_indexes(&mut self, indexes: &[u32]) {
        let len = indexes.iter().max().map_or(0, |m| *m as usize / 8 + 1);
        let mut bytes = vec![0u8; len];
        for i in indexes {
            bytes[*i as usize / 8] |= 1 << (i % 8);
        }
        self.bit_set = base64_encode(&bytes);
    }
}

/// BATCH_ACK_MESSAGE request body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BatchAckMessageRequestBody {
    #[serde(deserialize_with = "lenient::or_default")]
    pub acks: Vec<BatchAck>,
    #[serde(deserialize_with = "lenient::or_default")]
    pub broker_name: Option<String>,
}

impl JsonBody for BatchAckMessageRequestBody {}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (how fastjson writes a `byte[]`).
pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(BASE64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes standard base64 (padding optional); `None` for any other character.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in text.bytes() {
        let v = BASE64.iter().position(|b| *b == c)? as u32;
        acc = acc << 6 | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_json_is_the_fact_sheet_example() {
        let ck = PopCheckPoint {
            broker_name: Some("broker-a".into()),
            cid: Some("G".into()),
            queue_offset_diff: vec![0, 1, 2],
            invisible_time: 60_000,
            num: 3,
            pop_time: 1_700_000_000_000,
            queue_id: 1,
            start_offset: 100,
            topic: Some("T".into()),
            ..PopCheckPoint::default()
        };
        let json = String::from_utf8(ck.to_json()).unwrap();
        assert_eq!(
            json,
            r#"{"bm":0,"bn":"broker-a","c":"G","d":[0,1,2],"it":60000,"n":3,"pt":1700000000000,"q":1,"reviveTime":1700000060000,"ro":0,"so":100,"t":"T"}"#
        );
        let back = PopCheckPoint::decode(json.as_bytes()).unwrap();
        assert_eq!(back, ck, "reviveTime is ignored on input");
        assert_eq!(back.index_of(102), Some(2));
        assert_eq!(back.index_of(103), None);
        assert_eq!(back.queue_offset_of(1), 101);
        let with_rp = PopCheckPoint::decode(br#"{"rp":"2","so":5,"n":2,"t":"T","c":"G"}"#).unwrap();
        assert_eq!(with_rp.re_put_times(), 2);
        assert_eq!(with_rp.index_of(6), Some(1), "no diffs: consecutive offsets");
    }

    #[test]
    fn ack_json_and_long_names() {
        let ack = AckMsg {
            ack_offset: 101,
            broker_name: Some("b".into()),
            consumer_group: Some("G".into()),
            pop_time: 5,
            queue_id: 1,
            start_offset: 100,
            topic: Some("T".into()),
            ..AckMsg::default()
        };
        assert_eq!(
            String::from_utf8(ack.encode()).unwrap(),
            r#"{"ao":101,"bn":"b","c":"G","pt":5,"q":1,"so":100,"t":"T"}"#
        );
        let long = AckMsg::decode(br#"{"ackOffset":101,"brokerName":"b","consumerGroup":"G","popTime":5,"queueId":1,"startOffset":100,"topic":"T"}"#).unwrap();
        assert_eq!(long, ack);
        let batch = AckMsg { ack_offset: -1, ack_offset_list: Some(vec![1, 2]), ..ack };
        assert_eq!(
            String::from_utf8(batch.encode()).unwrap(),
            r#"{"ao":-1,"aol":[1,2],"bn":"b","c":"G","pt":5,"q":1,"so":100,"t":"T"}"#
        );
    }

    #[test]
    fn batch_ack_bitset_is_java_bitset_bytes() {
        let mut ack = BatchAck::default();
        ack.set_acked_indexes(&[0, 3, 9]);
        // bytes [0b0000_1001, 0b0000_0010] = [9, 2]
        assert_eq!(ack.bit_set, "CQI=");
        assert_eq!(ack.acked_indexes(), Some(vec![0, 3, 9]));
        ack.bit_set = "not base64!".into();
        assert_eq!(ack.acked_indexes(), None);
        let body = BatchAckMessageRequestBody::decode(
            br#"{"acks":[{"b":"AQ==","c":"G","it":60000,"pt":7,"q":0,"r":"0","rq":2,"so":10,"t":"T"}],"brokerName":"b"}"#,
        )
        .unwrap();
        assert_eq!(body.acks[0].acked_indexes(), Some(vec![0]));
        assert_eq!(body.acks[0].revive_queue_id, 2);
    }

    #[test]
    fn base64_matches_the_standard_alphabet() {
        for (bytes, text) in [(&b""[..], ""), (b"f", "Zg=="), (b"fo", "Zm8="), (b"foo", "Zm9v"), (b"\xff\xfe", "//4=")]
        {
            assert_eq!(base64_encode(bytes), text);
            assert_eq!(base64_decode(text).unwrap(), bytes);
        }
    }
}
