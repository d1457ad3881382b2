//! ACL 1.0 permission bits and which requests need an admin account (Java: `Permission`).

use ferromq_protocol::request_code;

/// No access; wins over every other bit.
pub const DENY: u8 = 1;
/// Needed by requests satisfied by either PUB or SUB.
pub const ANY: u8 = 2;
/// May send to the topic.
pub const PUB: u8 = 4;
/// May consume from the topic or as the group.
pub const SUB: u8 = 8;

/// Parses `PUB`, `SUB`, `PUB|SUB`, `SUB|PUB`, `DENY`; anything else (or nothing) is DENY, as
/// Java's `parsePermFromString`.
pub fn parse(text: Option<&str>) -> u8 {
    match text.map(str::trim) {
        Some("PUB") => PUB,
        Some("SUB") => SUB,
        Some("PUB|SUB" | "SUB|PUB") => PUB | SUB,
        _ => DENY,
    }
}

/// The text `parse` reads back.
pub fn name(perm: u8) -> &'static str {
    if perm & DENY != 0 {
        return "DENY";
    }
    match (perm & PUB != 0, perm & SUB != 0) {
        (true, true) => "PUB|SUB",
        (true, false) => "PUB",
        (false, true) => "SUB",
        (false, false) => "DENY",
    }
}

/// Whether `owned` grants `needed` (Java: `Permission.checkPermission`).
pub fn grants(needed: u8, owned: u8) -> bool {
    if owned & DENY != 0 {
        return false;
    }
    if needed & ANY != 0 {
        return owned & (PUB | SUB) != 0;
    }
    needed & owned != 0
}

/// Whether `code` needs an account with `admin: true`.
///
/// Java 4.9 lists five codes (topic and group create/delete, broker config). Every other
/// request that changes the broker's state or reads secrets is open there to any account,
/// so one producer key can rewind any group's offsets or rewrite the ACL file itself. The
/// list here adds those; see docs/decisions/0017-acl-1-admin-requests.md.
pub fn needs_admin(code: i32) -> bool {
    use request_code::*;
    matches!(
        code,
        // Java's five.
        UPDATE_AND_CREATE_TOPIC
            | UPDATE_BROKER_CONFIG
            | DELETE_TOPIC_IN_BROKER
            | UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
            | DELETE_SUBSCRIPTIONGROUP
            // The ACL itself.
            | UPDATE_AND_CREATE_ACL_CONFIG
            | DELETE_ACL_CONFIG
            | UPDATE_GLOBAL_WHITE_ADDRS_CONFIG
            | GET_BROKER_CLUSTER_ACL_CONFIG
            // State changes an operator makes, never an application.
            | INVOKE_BROKER_TO_RESET_OFFSET
            | UPDATE_AND_CREATE_TOPIC_LIST
            | CLEAN_EXPIRED_CONSUMEQUEUE
            | CLEAN_UNUSED_TOPIC
            | DELETE_EXPIRED_COMMITLOG
            | RESET_MASTER_FLUSH_OFFSET
            | UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST
            | UPDATE_AND_GET_GROUP_FORBIDDEN
            | UPDATE_COLD_DATA_FLOW_CTR_CONFIG
            | REMOVE_COLD_DATA_FLOW_CTR_CONFIG
            | UPDATE_AND_CREATE_STATIC_TOPIC
            | AUTH_CREATE_USER
            | AUTH_UPDATE_USER
            | AUTH_DELETE_USER
            | AUTH_GET_USER
            | AUTH_LIST_USER
            | AUTH_CREATE_ACL
            | AUTH_UPDATE_ACL
            | AUTH_DELETE_ACL
            | AUTH_GET_ACL
            | AUTH_LIST_ACL
            // The name server's tables: who serves which topic, and its settings.
            | REGISTER_BROKER
            | UNREGISTER_BROKER
            | BROKER_HEARTBEAT
            | REGISTER_TOPIC_IN_NAMESRV
            | WIPE_WRITE_PERM_OF_BROKER
            | ADD_WRITE_PERM_OF_BROKER
            | DELETE_TOPIC_IN_NAMESRV
            | PUT_KV_CONFIG
            | DELETE_KV_CONFIG
            | UPDATE_NAMESRV_CONFIG
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_reads_java_spellings_and_denies_the_rest() {
        assert_eq!(parse(Some("PUB")), PUB);
        assert_eq!(parse(Some(" SUB ")), SUB);
        assert_eq!(parse(Some("PUB|SUB")), PUB | SUB);
        assert_eq!(parse(Some("SUB|PUB")), PUB | SUB);
        assert_eq!(parse(Some("DENY")), DENY);
        assert_eq!(parse(Some("pub")), DENY);
        assert_eq!(parse(None), DENY);
    }

    #[test]
    fn grants_follows_check_permission() {
        assert!(grants(PUB, PUB | SUB));
        assert!(!grants(PUB, SUB));
        assert!(!grants(SUB, DENY | SUB));
        assert!(grants(ANY, SUB));
        assert!(grants(ANY, PUB));
        assert!(!grants(ANY, DENY));
        assert!(!grants(ANY, 0));
    }
}
