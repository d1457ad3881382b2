//! `RegisterBrokerBody`: what a broker sends the name server every 30 s (REGISTER_BROKER,
//! 103), as JSON or as the zlib-compressed binary stream chosen by the request header's
//! `compressed` flag. Java: `org.apache.rocketmq.remoting.protocol.body.RegisterBrokerBody`.
//!
//! Compressed layout (all integers big-endian `i32`, inside one zlib stream):
//!
//! | field | content |
//! |---|---|
//! | len + bytes | DataVersion JSON |
//! | count | number of topics |
//! | per topic: len + bytes | TopicConfig text form (`TopicConfig::encode_text`) |
//! | len + bytes | filterServerList JSON array |
//! | count (broker >= V5_0_0) | number of queue mappings |
//! | per mapping: len + bytes | TopicQueueMappingInfo JSON |
//!
//! Owns the codec only; checking `bodyCrc32` and applying the registration is the name
//! server's job.

use std::io::{Read, Write};

use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use flate2::Compression;
use serde::{Deserialize, Serialize};

use crate::body::{lenient, BodyError, TopicConfig, TopicConfigAndMappingSerializeWrapper};
use crate::json::parse_lenient;
use crate::version::V5_0_0;

/// Largest inflated size accepted for a compressed body. A broker with 100k topics inflates
/// to a few MiB, so this is generous while stopping zip bombs.
pub const MAX_INFLATED_REGISTER_BODY_BYTES: usize = 64 * 1024 * 1024;

/// Broker version ordinal from which the compressed stream carries queue mappings.
pub const MAPPING_IN_COMPRESSED_BODY_SINCE: i32 = V5_0_0;

/// The registration payload: the broker's topics (and 5.x queue mappings) and its filter
/// servers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RegisterBrokerBody {
    /// Addresses of the broker's filter servers (an obsolete 4.x feature; usually empty).
    #[serde(deserialize_with = "lenient::or_default")]
    pub filter_server_list: Vec<String>,
    /// Topics, versions and queue mappings.
    #[serde(deserialize_with = "lenient::or_default")]
    pub topic_config_serialize_wrapper: TopicConfigAndMappingSerializeWrapper,
}

impl RegisterBrokerBody {
    /// Encodes as JSON, or as the compressed stream when `compressed` is set.
    /// Java: `RegisterBrokerBody#encode(boolean)`.
    ///
    /// `broker_version` is the sending broker's version ordinal (`crate::version`); from
    /// [`MAPPING_IN_COMPRESSED_BODY_SINCE`] on the compressed stream ends with the queue
    /// mappings, as Java 5.x brokers write it. A 4.x name server stops reading before them.
    /// Topics are written in name order.
    ///
    /// # Panics
    ///
    /// If a section is longer than `i32::MAX` bytes or has more than `i32::MAX` entries,
    /// which the format cannot express.
    pub fn encode(&self, compressed: bool, broker_version: i32) -> Vec<u8> {
        if !compressed {
            return serde_json::to_vec(self)
                .expect("body holds only string-keyed maps and JSON values, which serialize");
        }
        let wrapper = &self.topic_config_serialize_wrapper;
        let mut stream = ZlibEncoder::new(Vec::new(), Compression::best());
        put_chunk(&mut stream, &json_bytes(&wrapper.data_version));
        put(&mut stream, &count_bytes(wrapper.topic_config_table.len()));
        for config in wrapper.topic_config_table.values() {
            put_chunk(&mut stream, config.encode_text().as_bytes());
        }
        put_chunk(&mut stream, &json_bytes(&self.filter_server_list));
        if broker_version >= MAPPING_IN_COMPRESSED_BODY_SINCE {
            put(&mut stream, &count_bytes(wrapper.topic_queue_mapping_info_map.len()));
            for mapping in wrapper.topic_queue_mapping_info_map.values() {
                put_chunk(&mut stream, &json_bytes(mapping));
            }
        }
        stream.finish().expect("finishing a Vec-backed encoder cannot fail")
    }

    /// Decodes JSON, or the compressed stream when `compressed` is set.
    /// Java: `RegisterBrokerBody#decode`.
    ///
    /// `broker_version` is the version ordinal from the request; queue mappings are read
    /// only from [`MAPPING_IN_COMPRESSED_BODY_SINCE`] on. The stream is inflated up to
    /// [`MAX_INFLATED_REGISTER_BODY_BYTES`]. Bytes after the last expected field are ignored,
    /// and an unparseable filter-server list reads as empty, both as in Java.
    ///
    /// # Errors
    ///
    /// [`BodyError::Json`] for bad JSON, [`BodyError::Inflate`] or
    /// [`BodyError::InflatedTooLarge`] for a bad or oversized zlib stream,
    /// [`BodyError::Truncated`] / [`BodyError::NegativeLength`] for a malformed stream, and
    /// the TopicConfig text errors of [`TopicConfig::decode_text`].
    pub fn decode(bytes: &[u8], compressed: bool, broker_version: i32) -> Result<Self, BodyError> {
        Self::decode_with_limit(bytes, compressed, broker_version, MAX_INFLATED_REGISTER_BODY_BYTES)
    }

    /// [`RegisterBrokerBody::decode`] with an explicit bound on the inflated size.
    ///
    /// # Errors
    ///
    /// As [`RegisterBrokerBody::decode`].
    pub fn decode_with_limit(
        bytes: &[u8],
        compressed: bool,
        broker_version: i32,
        max_inflated_bytes: usize,
    ) -> Result<Self, BodyError> {
        if !compressed {
            return parse_lenient(bytes);
        }
        let inflated = inflate_bounded(bytes, max_inflated_bytes)?;
        let mut reader = ChunkReader::new(&inflated);
        let mut body = Self::default();
        let wrapper = &mut body.topic_config_serialize_wrapper;

        wrapper.data_version = parse_lenient(reader.chunk("data version")?)?;
        let topic_count = reader.count("topic count")?;
        for _ in 0..topic_count {
            let text = reader.chunk("topic config")?;
            let text =
                std::str::from_utf8(text).map_err(|source| BodyError::Utf8 { section: "topic config text", source })?;
            let config = TopicConfig::decode_text(text)?;
            wrapper.topic_config_table.insert(config.topic_name.clone(), config);
        }
        let filter_servers = reader.chunk("filter server list")?;
        body.filter_server_list =
            parse_lenient::<Option<Vec<String>>>(filter_servers).ok().flatten().unwrap_or_default();

        if broker_version >= MAPPING_IN_COMPRESSED_BODY_SINCE {
            let wrapper = &mut body.topic_config_serialize_wrapper;
            let mapping_count = reader.count("queue mapping count")?;
            for index in 0..mapping_count {
                let mapping: serde_json::Value = parse_lenient(reader.chunk("queue mapping")?)?;
                let topic = mapping
                    .get("topic")
                    .and_then(serde_json::Value::as_str)
                    .ok_or(BodyError::MappingWithoutTopic { index })?
                    .to_owned();
                wrapper.topic_queue_mapping_info_map.insert(topic, mapping);
            }
        }
        Ok(body)
    }
}

fn json_bytes<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("register-body parts hold only string-keyed maps, which serialize")
}

fn put(stream: &mut ZlibEncoder<Vec<u8>>, bytes: &[u8]) {
    stream.write_all(bytes).expect("writing into a Vec-backed encoder cannot fail");
}

fn put_chunk(stream: &mut ZlibEncoder<Vec<u8>>, bytes: &[u8]) {
    put(stream, &count_bytes(bytes.len()));
    put(stream, bytes);
}

fn count_bytes(count: usize) -> [u8; 4] {
    // A single registration is bounded far below 2 GiB by the frame limit, so a count or
    // length that does not fit an i32 is a programming error.
    i32::try_from(count).expect("register-body section exceeds i32::MAX").to_be_bytes()
}

/// Inflates a zlib stream, refusing output larger than `limit_bytes`.
fn inflate_bounded(bytes: &[u8], limit_bytes: usize) -> Result<Vec<u8>, BodyError> {
    let mut inflated = Vec::new();
    let cap = u64::try_from(limit_bytes).unwrap_or(u64::MAX).saturating_add(1);
    ZlibDecoder::new(bytes).take(cap).read_to_end(&mut inflated).map_err(|source| BodyError::Inflate { source })?;
    if inflated.len() > limit_bytes {
        return Err(BodyError::InflatedTooLarge { limit_bytes });
    }
    Ok(inflated)
}

/// Reads big-endian `i32` lengths and counts and length-prefixed chunks from the inflated
/// stream.
#[derive(Debug)]
struct ChunkReader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> ChunkReader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, offset: 0 }
    }

    fn take(&mut self, section: &'static str, needed: usize) -> Result<&'a [u8], BodyError> {
        let available = self.bytes.len() - self.offset;
        if needed > available {
            return Err(BodyError::Truncated { section, offset: self.offset, needed, available });
        }
        let slice = &self.bytes[self.offset..self.offset + needed];
        self.offset += needed;
        Ok(slice)
    }

    /// A non-negative `i32`.
    fn count(&mut self, section: &'static str) -> Result<usize, BodyError> {
        let raw = self.take(section, 4)?;
        let value = i32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]);
        usize::try_from(value).map_err(|_| BodyError::NegativeLength { section, value })
    }

    fn chunk(&mut self, section: &'static str) -> Result<&'a [u8], BodyError> {
        let length = self.count(section)?;
        self.take(section, length)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::body::DataVersion;
    use crate::version::V4_9_4;

    fn sample() -> RegisterBrokerBody {
        let mut body = RegisterBrokerBody::default();
        let wrapper = &mut body.topic_config_serialize_wrapper;
        wrapper.data_version = DataVersion { counter: 7, state_version: 0, timestamp: 1_700_000_000_000 };
        for (name, queues) in [("TopicA", 4), ("TopicB", 8)] {
            wrapper.topic_config_table.insert(name.to_owned(), TopicConfig::new(name, queues, queues));
        }
        wrapper.topic_queue_mapping_info_map = BTreeMap::from([(
            "TopicA".to_owned(),
            json!({"bname":"broker-a","currIdMap":{"0":0},"epoch":1,"topic":"TopicA","totalQueues":4}),
        )]);
        body.filter_server_list = vec!["10.0.0.9:30000".to_owned()];
        body
    }

    #[test]
    fn compressed_round_trip_5x_keeps_mappings() {
        let body = sample();
        let bytes = body.encode(true, V5_0_0);
        assert_eq!(RegisterBrokerBody::decode(&bytes, true, V5_0_0).unwrap(), body);
    }

    #[test]
    fn compressed_round_trip_4x_drops_mappings() {
        let body = sample();
        let bytes = body.encode(true, V4_9_4);
        let decoded = RegisterBrokerBody::decode(&bytes, true, V4_9_4).unwrap();
        let mut expected = body;
        expected.topic_config_serialize_wrapper.topic_queue_mapping_info_map.clear();
        assert_eq!(decoded, expected);
    }

    #[test]
    fn uncompressed_round_trip() {
        let body = sample();
        let bytes = body.encode(false, V5_0_0);
        assert!(bytes
            .starts_with(br#"{"filterServerList":["10.0.0.9:30000"],"topicConfigSerializeWrapper":{"dataVersion""#));
        assert_eq!(RegisterBrokerBody::decode(&bytes, false, V5_0_0).unwrap(), body);
    }

    #[test]
    fn truncated_stream_is_an_error() {
        let bytes = sample().encode(true, V5_0_0);
        let inflated = inflate_bounded(&bytes, usize::MAX).unwrap();
        let mut short = ZlibEncoder::new(Vec::new(), Compression::fast());
        short.write_all(&inflated[..inflated.len() - 3]).unwrap();
        let short = short.finish().unwrap();
        assert!(matches!(
            RegisterBrokerBody::decode(&short, true, V5_0_0),
            Err(BodyError::Truncated { section: "queue mapping", .. })
        ));
    }

    #[test]
    fn negative_count_is_an_error() {
        let mut stream = ZlibEncoder::new(Vec::new(), Compression::fast());
        stream.write_all(&[0, 0, 0, 2]).unwrap();
        stream.write_all(b"{}").unwrap();
        stream.write_all(&(-1_i32).to_be_bytes()).unwrap();
        let bytes = stream.finish().unwrap();
        assert!(matches!(
            RegisterBrokerBody::decode(&bytes, true, V5_0_0),
            Err(BodyError::NegativeLength { section: "topic count", value: -1 })
        ));
    }

    #[test]
    fn inflate_limit_is_enforced() {
        let mut stream = ZlibEncoder::new(Vec::new(), Compression::fast());
        stream.write_all(&[0_u8; 4096]).unwrap();
        let bytes = stream.finish().unwrap();
        assert!(matches!(
            RegisterBrokerBody::decode_with_limit(&bytes, true, V5_0_0, 4095),
            Err(BodyError::InflatedTooLarge { limit_bytes: 4095 })
        ));
        assert!(inflate_bounded(&bytes, 4096).is_ok());
    }

    #[test]
    fn garbage_is_not_zlib() {
        assert!(matches!(RegisterBrokerBody::decode(b"not zlib at all", true, V5_0_0), Err(BodyError::Inflate { .. })));
    }
}
