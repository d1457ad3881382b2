//! Headers of ACL 2.0's admin requests (5.3 codes 3001-3010, acl-and-tls.md 3.6). The bodies
//! are `UserInfo` / `AclInfo` (`body::auth`).

use crate::header::command_header;

command_header! {
    /// AUTH_CREATE_USER (3001), AUTH_UPDATE_USER (3002), AUTH_DELETE_USER (3003) and
    /// AUTH_GET_USER (3004): the user named. Java has one class per code, all alike.
    pub struct UserRequestHeader {
        pub username: Option<String> => "username",
    }
}

command_header! {
    /// AUTH_LIST_USER (3005): users whose name contains `filter` (all when absent).
    pub struct ListUsersRequestHeader {
        pub filter: Option<String> => "filter",
    }
}

command_header! {
    /// AUTH_CREATE_ACL (3006), AUTH_UPDATE_ACL (3007), AUTH_GET_ACL (3009): the subject, e.g.
    /// `User:alice`.
    pub struct AclRequestHeader {
        pub subject: Option<String> => "subject",
    }
}

command_header! {
    /// AUTH_DELETE_ACL (3008): the subject's whole ACL, or (with `resource`) one entry of the
    /// `policyType` policy (default Custom).
    pub struct DeleteAclRequestHeader {
        pub subject: Option<String> => "subject",
        pub policy_type: Option<String> => "policyType",
        pub resource: Option<String> => "resource",
    }
}

command_header! {
    /// AUTH_LIST_ACL (3010): ACLs whose subject contains `subjectFilter`, with only the entries
    /// whose resource contains `resourceFilter`.
    pub struct ListAclsRequestHeader {
        pub subject_filter: Option<String> => "subjectFilter",
        pub resource_filter: Option<String> => "resourceFilter",
    }
}
