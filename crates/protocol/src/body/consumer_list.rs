//! Body of the GET_CONSUMER_LIST_BY_GROUP (38) response: the client ids of a consumer group's
//! live members. Java: `GetConsumerListByGroupResponseBody`.

use serde::{Deserialize, Serialize};

use crate::body::{lenient, JsonBody};

/// Client ids (`ip@instance`) of the group's consumers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerListByGroupResponseBody {
    /// The client ids, in the broker's order.
    #[serde(deserialize_with = "lenient::or_default")]
    pub consumer_id_list: Vec<String>,
}

impl JsonBody for ConsumerListByGroupResponseBody {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let body =
            ConsumerListByGroupResponseBody { consumer_id_list: vec!["10.0.0.5@123#456".into(), "10.0.0.6@1".into()] };
        assert_eq!(body.encode(), br#"{"consumerIdList":["10.0.0.5@123#456","10.0.0.6@1"]}"#);
        assert_eq!(ConsumerListByGroupResponseBody::decode(&body.encode()).unwrap(), body);
        assert_eq!(
            ConsumerListByGroupResponseBody::decode(br#"{"consumerIdList":null}"#).unwrap(),
            ConsumerListByGroupResponseBody::default()
        );
    }
}
