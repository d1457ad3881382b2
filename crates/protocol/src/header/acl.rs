//! Headers of ACL 1.0's admin requests (4.x codes 50-54, acl-and-tls.md 2.6).

use crate::header::command_header;

command_header! {
    /// UPDATE_AND_CREATE_ACL_CONFIG (50). `topicPerms` / `groupPerms` are comma-joined
    /// `name=PERM` entries; absent fields keep the account's stored values.
    pub struct CreateAccessConfigRequestHeader {
        pub access_key: String => "accessKey",
        pub secret_key: Option<String> => "secretKey",
        pub white_remote_address: Option<String> => "whiteRemoteAddress",
        pub admin: Option<bool> => "admin",
        pub default_topic_perm: Option<String> => "defaultTopicPerm",
        pub default_group_perm: Option<String> => "defaultGroupPerm",
        pub topic_perms: Option<String> => "topicPerms",
        pub group_perms: Option<String> => "groupPerms",
    }
}

command_header! {
    /// DELETE_ACL_CONFIG (51).
    pub struct DeleteAccessConfigRequestHeader {
        pub access_key: String => "accessKey",
    }
}

command_header! {
    /// Response to GET_BROKER_CLUSTER_ACL_INFO (52). `version` is the default file's
    /// DataVersion JSON; `allAclFileVersion` a JSON map of file path to DataVersion.
    pub struct GetBrokerAclConfigResponseHeader {
        pub version: Option<String> => "version",
        pub all_acl_file_version: Option<String> => "allAclFileVersion",
        pub broker_name: Option<String> => "brokerName",
        pub broker_addr: Option<String> => "brokerAddr",
        pub cluster_name: Option<String> => "clusterName",
    }
}

command_header! {
    /// UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): `globalWhiteAddrs` comma-joined.
    pub struct UpdateGlobalWhiteAddrsConfigRequestHeader {
        pub global_white_addrs: String => "globalWhiteAddrs",
        pub acl_file_full_path: Option<String> => "aclFileFullPath",
    }
}
