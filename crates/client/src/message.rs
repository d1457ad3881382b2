//! `Message`: what a producer sends. Java: `org.apache.rocketmq.common.message.Message`.

use bytes::Bytes;
use ferromq_protocol::message::{keys, MessageProperties};

/// A message to send: topic, body, user flag and properties (tags, keys and user properties
/// all live in the properties, as in Java).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Message {
    /// Destination topic.
    pub topic: String,
    /// Payload.
    pub body: Bytes,
    /// User flag, stored as FLAG.
    pub flag: i32,
    /// Properties, system and user.
    pub properties: MessageProperties,
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Message")
            .field("topic", &self.topic)
            .field("body_len", &self.body.len())
            .field("flag", &self.flag)
            .field("properties", &self.properties)
            .finish()
    }
}

impl Message {
    /// A message with a topic and a body.
    pub fn new(topic: impl Into<String>, body: impl Into<Bytes>) -> Self {
        Message { topic: topic.into(), body: body.into(), ..Self::default() }
    }

    /// Sets the tag (`TAGS`).
    pub fn with_tags(mut self, tags: impl Into<String>) -> Self {
        self.properties.insert(keys::TAGS, tags.into());
        self
    }

    /// Sets the business keys (`KEYS`, space separated).
    pub fn with_keys<I, S>(mut self, list: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let joined: Vec<String> = list.into_iter().map(|k| k.as_ref().to_owned()).collect();
        self.properties.insert(keys::KEYS, joined.join(keys::KEY_SEPARATOR));
        self
    }

    /// Sets the user flag.
    pub fn with_flag(mut self, flag: i32) -> Self {
        self.flag = flag;
        self
    }

    /// Adds a user property. Java refuses reserved names; so does validation here.
    pub fn with_property(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.properties.insert(name.into(), value.into());
        self
    }

    /// The tag, if set.
    pub fn tags(&self) -> Option<&str> {
        self.properties.get(keys::TAGS)
    }

    /// The business keys, if set.
    pub fn keys(&self) -> Option<&str> {
        self.properties.get(keys::KEYS)
    }

    /// One property.
    pub fn property(&self, name: &str) -> Option<&str> {
        self.properties.get(name)
    }

    /// Delays delivery by a broker delay level (1..=18). Java: `setDelayTimeLevel`.
    pub fn set_delay_time_level(&mut self, level: i32) {
        self.properties.insert(keys::DELAY, level.to_string());
    }

    /// Delivers at an absolute time (epoch ms) through the 5.x timer. Java: `setDeliverTimeMs`.
    pub fn set_deliver_time_ms(&mut self, epoch_ms: i64) {
        self.properties.insert(keys::TIMER_DELIVER_MS, epoch_ms.to_string());
    }

    /// Whether the broker should wait for the store before answering (`WAIT`, default true).
    pub fn set_wait_store_msg_ok(&mut self, wait: bool) {
        self.properties.insert(keys::WAIT, wait.to_string());
    }

    /// The client unique id (`UNIQ_KEY`), set when the message is sent.
    pub fn uniq_id(&self) -> Option<&str> {
        self.properties.get(keys::UNIQ_KEY)
    }
}
