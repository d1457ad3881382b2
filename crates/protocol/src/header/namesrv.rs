//! Headers of the name-server requests (Java: `protocol/header/namesrv/*`).

use super::command_header;

command_header! {
    /// REGISTER_BROKER (103).
    pub struct RegisterBrokerRequestHeader {
        pub broker_name: String => "brokerName",
        pub broker_addr: String => "brokerAddr",
        pub cluster_name: String => "clusterName",
        pub ha_server_addr: String => "haServerAddr",
        /// 0 for the master, > 0 for slaves.
        pub broker_id: i64 => "brokerId",
        /// 5.x: how long the name server waits before expiring the broker.
        pub heartbeat_timeout_millis: Option<i64> => "heartbeatTimeoutMillis",
        pub enable_acting_master: Option<bool> => "enableActingMaster",
        /// Whether the body is the zlib-compressed form.
        pub compressed: Option<bool> => "compressed",
        /// Masked CRC32 of the body; 0 or absent means unchecked.
        pub body_crc32: Option<i32> => "bodyCrc32",
    }
}

command_header! {
    /// Response to REGISTER_BROKER.
    pub struct RegisterBrokerResponseHeader {
        pub ha_server_addr: Option<String> => "haServerAddr",
        pub master_addr: Option<String> => "masterAddr",
    }
}

command_header! {
    /// UNREGISTER_BROKER (104).
    pub struct UnRegisterBrokerRequestHeader {
        pub broker_name: String => "brokerName",
        pub broker_addr: String => "brokerAddr",
        pub cluster_name: String => "clusterName",
        pub broker_id: i64 => "brokerId",
    }
}

command_header! {
    /// GET_ROUTEINFO_BY_TOPIC (105).
    pub struct GetRouteInfoRequestHeader {
        pub topic: String => "topic",
        /// 5.x: ask for standard JSON whatever the client version.
        pub accept_standard_json_only: Option<bool> => "acceptStandardJsonOnly",
    }
}

command_header! {
    /// GET_BROKER_MEMBER_GROUP (901).
    pub struct GetBrokerMemberGroupRequestHeader {
        pub cluster_name: String => "clusterName",
        pub broker_name: String => "brokerName",
    }
}

command_header! {
    /// DELETE_TOPIC_IN_NAMESRV (216).
    pub struct DeleteTopicFromNamesrvRequestHeader {
        pub topic: String => "topic",
        /// Restricts the deletion to one cluster's brokers.
        pub cluster_name: Option<String> => "clusterName",
    }
}

command_header! {
    /// REGISTER_TOPIC_IN_NAMESRV (217); the body is a TopicRouteData.
    pub struct RegisterTopicRequestHeader {
        pub topic: String => "topic",
    }
}

command_header! {
    /// PUT_KV_CONFIG (100).
    pub struct PutKvConfigRequestHeader {
        pub namespace: String => "namespace",
        pub key: String => "key",
        pub value: String => "value",
    }
}

command_header! {
    /// GET_KV_CONFIG (101).
    pub struct GetKvConfigRequestHeader {
        pub namespace: String => "namespace",
        pub key: String => "key",
    }
}

command_header! {
    /// Response to GET_KV_CONFIG.
    pub struct GetKvConfigResponseHeader {
        pub value: Option<String> => "value",
    }
}

command_header! {
    /// DELETE_KV_CONFIG (102).
    pub struct DeleteKvConfigRequestHeader {
        pub namespace: String => "namespace",
        pub key: String => "key",
    }
}

command_header! {
    /// GET_KVLIST_BY_NAMESPACE (219).
    pub struct GetKvListByNamespaceRequestHeader {
        pub namespace: String => "namespace",
    }
}

command_header! {
    /// QUERY_DATA_VERSION (322); the body is the broker's DataVersion.
    pub struct QueryDataVersionRequestHeader {
        pub broker_name: String => "brokerName",
        pub broker_addr: String => "brokerAddr",
        pub cluster_name: String => "clusterName",
        pub broker_id: i64 => "brokerId",
    }
}

command_header! {
    /// Response to QUERY_DATA_VERSION; the body is the name server's DataVersion.
    pub struct QueryDataVersionResponseHeader {
        pub changed: bool => "changed",
    }
}

command_header! {
    /// BROKER_HEARTBEAT (904), the 5.x lightweight keep-alive.
    pub struct BrokerHeartbeatRequestHeader {
        pub cluster_name: String => "clusterName",
        pub broker_addr: String => "brokerAddr",
        pub broker_name: String => "brokerName",
        pub broker_id: Option<i64> => "brokerId",
        pub epoch: Option<i32> => "epoch",
        pub max_offset: Option<i64> => "maxOffset",
        pub confirm_offset: Option<i64> => "confirmOffset",
        pub heartbeat_timeout_mills: Option<i64> => "heartbeatTimeoutMills",
        pub election_priority: Option<i32> => "electionPriority",
    }
}

command_header! {
    /// WIPE_WRITE_PERM_OF_BROKER (205).
    pub struct WipeWritePermOfBrokerRequestHeader {
        pub broker_name: String => "brokerName",
    }
}

command_header! {
    /// Response to WIPE_WRITE_PERM_OF_BROKER.
    pub struct WipeWritePermOfBrokerResponseHeader {
        pub wipe_topic_count: i32 => "wipeTopicCount",
    }
}

command_header! {
    /// ADD_WRITE_PERM_OF_BROKER (327).
    pub struct AddWritePermOfBrokerRequestHeader {
        pub broker_name: String => "brokerName",
    }
}

command_header! {
    /// Response to ADD_WRITE_PERM_OF_BROKER.
    pub struct AddWritePermOfBrokerResponseHeader {
        pub add_topic_count: i32 => "addTopicCount",
    }
}

command_header! {
    /// GET_TOPICS_BY_CLUSTER (224).
    pub struct GetTopicsByClusterRequestHeader {
        pub cluster: String => "cluster",
    }
}

/// Ext field of any request naming the sender's zone (a broker's registration records it as
/// its group's zone). Java: `MixAll.ZONE_NAME`, added by `DynamicalExtFieldRPCHook`.
pub const ZONE_NAME: &str = "__ZONE_NAME";
/// Ext field of a client that wants routes of its own zone only. Java: `MixAll.ZONE_MODE`.
pub const ZONE_MODE: &str = "__ZONE_MODE";
