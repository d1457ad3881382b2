//! Headers of the 5.x controller's requests (controller-mode.md §2): brokers and mqadmin send
//! them to the controller's port; NOTIFY_BROKER_ROLE_CHANGED goes the other way. BROKER_HEARTBEAT
//! (904), which the controller serves too, is in `namesrv.rs` (the name server serves it).

use crate::header::command_header;

command_header! {
    /// CONTROLLER_ALTER_SYNC_STATE_SET (1001); the body is the SyncStateSet the master proposes,
    /// with the SyncStateSet epoch it knows.
    pub struct AlterSyncStateSetRequestHeader {
        pub broker_name: String => "brokerName",
        pub master_broker_id: i64 => "masterBrokerId",
        pub master_epoch: i32 => "masterEpoch",
        pub invoke_time: Option<i64> => "invokeTime",
    }
}

command_header! {
    /// Response to CONTROLLER_ALTER_SYNC_STATE_SET; the body is the new SyncStateSet.
    pub struct AlterSyncStateSetResponseHeader {
        pub new_sync_state_set_epoch: Option<i32> => "newSyncStateSetEpoch",
    }
}

command_header! {
    /// CONTROLLER_ELECT_MASTER (1002). `brokerId` -1: the controller (or an admin without a
    /// preference) asks.
    pub struct ElectMasterRequestHeader {
        pub cluster_name: Option<String> => "clusterName",
        pub broker_name: String => "brokerName",
        pub broker_id: Option<i64> => "brokerId",
        pub designate_elect: Option<bool> => "designateElect",
        pub invoke_time: Option<i64> => "invokeTime",
    }
}

command_header! {
    /// Response to CONTROLLER_ELECT_MASTER; the body is `ElectMasterResponseBody`.
    pub struct ElectMasterResponseHeader {
        pub master_broker_id: Option<i64> => "masterBrokerId",
        pub master_address: Option<String> => "masterAddress",
        pub master_epoch: Option<i32> => "masterEpoch",
        pub sync_state_set_epoch: Option<i32> => "syncStateSetEpoch",
    }
}

command_header! {
    /// CONTROLLER_REGISTER_BROKER (1003).
    pub struct RegisterBrokerToControllerRequestHeader {
        pub cluster_name: String => "clusterName",
        pub broker_name: String => "brokerName",
        pub broker_id: i64 => "brokerId",
        pub broker_address: String => "brokerAddress",
        pub invoke_time: Option<i64> => "invokeTime",
    }
}

command_header! {
    /// Response to CONTROLLER_REGISTER_BROKER; the body is the SyncStateSet.
    pub struct RegisterBrokerToControllerResponseHeader {
        pub cluster_name: Option<String> => "clusterName",
        pub broker_name: Option<String> => "brokerName",
        pub master_broker_id: Option<i64> => "masterBrokerId",
        pub master_address: Option<String> => "masterAddress",
        pub master_epoch: Option<i32> => "masterEpoch",
        pub sync_state_set_epoch: Option<i32> => "syncStateSetEpoch",
    }
}

command_header! {
    /// CONTROLLER_GET_REPLICA_INFO (1004).
    pub struct GetReplicaInfoRequestHeader {
        pub broker_name: String => "brokerName",
    }
}

command_header! {
    /// Response to CONTROLLER_GET_REPLICA_INFO; the body is the SyncStateSet.
    pub struct GetReplicaInfoResponseHeader {
        pub master_broker_id: Option<i64> => "masterBrokerId",
        pub master_address: Option<String> => "masterAddress",
        pub master_epoch: Option<i32> => "masterEpoch",
    }
}

command_header! {
    /// Response to CONTROLLER_GET_METADATA_INFO (1005), answered by any controller node.
    pub struct GetMetaDataResponseHeader {
        pub group: Option<String> => "group",
        pub controller_leader_id: Option<String> => "controllerLeaderId",
        pub controller_leader_address: Option<String> => "controllerLeaderAddress",
        pub is_leader: Option<bool> => "isLeader",
        /// `"id:addr;id:addr;"`.
        pub peers: Option<String> => "peers",
    }
}

command_header! {
    /// CLEAN_BROKER_DATA (1011).
    pub struct CleanControllerBrokerDataRequestHeader {
        pub cluster_name: Option<String> => "clusterName",
        pub broker_name: String => "brokerName",
        /// `"1;2;3"`; absent: the whole broker set.
        pub broker_controller_ids_to_clean: Option<String> => "brokerControllerIdsToClean",
        pub is_clean_living_broker: Option<bool> => "isCleanLivingBroker",
        pub invoke_time: Option<i64> => "invokeTime",
    }
}

command_header! {
    /// CONTROLLER_GET_NEXT_BROKER_ID (1012).
    pub struct GetNextBrokerIdRequestHeader {
        pub cluster_name: String => "clusterName",
        pub broker_name: String => "brokerName",
    }
}

command_header! {
    /// Response to CONTROLLER_GET_NEXT_BROKER_ID.
    pub struct GetNextBrokerIdResponseHeader {
        pub cluster_name: Option<String> => "clusterName",
        pub broker_name: Option<String> => "brokerName",
        pub next_broker_id: Option<i64> => "nextBrokerId",
    }
}

command_header! {
    /// CONTROLLER_APPLY_BROKER_ID (1013).
    pub struct ApplyBrokerIdRequestHeader {
        pub cluster_name: String => "clusterName",
        pub broker_name: String => "brokerName",
        pub applied_broker_id: i64 => "appliedBrokerId",
        /// `"<brokerAddr>;<timestampMs>"`.
        pub register_check_code: String => "registerCheckCode",
    }
}

command_header! {
    /// Response to CONTROLLER_APPLY_BROKER_ID.
    pub struct ApplyBrokerIdResponseHeader {
        pub cluster_name: Option<String> => "clusterName",
        pub broker_name: Option<String> => "brokerName",
    }
}

command_header! {
    /// NOTIFY_BROKER_ROLE_CHANGED (1008), controller to broker; the body is the SyncStateSet.
    pub struct NotifyBrokerRoleChangedRequestHeader {
        pub master_address: Option<String> => "masterAddress",
        pub master_epoch: Option<i32> => "masterEpoch",
        pub sync_state_set_epoch: Option<i32> => "syncStateSetEpoch",
        pub master_broker_id: Option<i64> => "masterBrokerId",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{BrokerHeartbeatRequestHeader, CommandHeader};

    fn keys(h: &impl CommandHeader) -> Vec<String> {
        h.to_ext_fields().iter().map(|(k, _)| k.to_string()).collect()
    }

    #[test]
    fn keys_are_java_names() {
        let elect = ElectMasterRequestHeader {
            cluster_name: Some("DefaultCluster".into()),
            broker_name: "broker-a".into(),
            broker_id: Some(-1),
            designate_elect: Some(false),
            invoke_time: Some(1),
        };
        assert_eq!(keys(&elect), ["brokerId", "brokerName", "clusterName", "designateElect", "invokeTime"]);
        assert_eq!(ElectMasterRequestHeader::read_ext_fields(&elect.to_ext_fields()).unwrap(), elect);
        let hb = BrokerHeartbeatRequestHeader {
            cluster_name: "c".into(),
            broker_addr: "127.0.0.1:10911".into(),
            broker_name: "b".into(),
            broker_id: Some(2),
            epoch: Some(3),
            max_offset: Some(4),
            confirm_offset: Some(5),
            heartbeat_timeout_mills: Some(10_000),
            election_priority: Some(7),
        };
        assert_eq!(
            keys(&hb),
            [
                "brokerAddr",
                "brokerId",
                "brokerName",
                "clusterName",
                "confirmOffset",
                "electionPriority",
                "epoch",
                "heartbeatTimeoutMills",
                "maxOffset"
            ]
        );
        let apply = ApplyBrokerIdRequestHeader {
            cluster_name: "c".into(),
            broker_name: "b".into(),
            applied_broker_id: 1,
            register_check_code: "127.0.0.1:10911;1700000000000".into(),
        };
        assert_eq!(keys(&apply), ["appliedBrokerId", "brokerName", "clusterName", "registerCheckCode"]);
        let meta = GetMetaDataResponseHeader {
            group: Some("g".into()),
            controller_leader_id: Some("n0".into()),
            controller_leader_address: Some("127.0.0.1:9878".into()),
            is_leader: Some(true),
            peers: Some("n0:127.0.0.1:9878;".into()),
        };
        assert_eq!(keys(&meta), ["controllerLeaderAddress", "controllerLeaderId", "group", "isLeader", "peers"]);
    }
}
