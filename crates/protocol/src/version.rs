//! RocketMQ version ordinals as they travel in the `version` header field.
//!
//! The field carries the ordinal of Java's `MQVersion.Version` enum, not a semantic version.
//! Only the ordinals that change server behaviour are named here.

/// `V3_4_9`: from here on the client's max-reconsume header is honoured.
pub const V3_4_9: i32 = 121;
/// `V4_0_0`.
pub const V4_0_0: i32 = 213;
/// `V4_9_3`: the last clients that added QUERY_MESSAGE's `_UNIQUE_KEY_QUERY` after signing.
pub const V4_9_3: i32 = 400;
/// `V4_9_4`: from here on the name server answers routes in standard JSON.
pub const V4_9_4: i32 = 401;
/// `V5_0_0`: compressed broker registrations carry queue mappings from here on.
pub const V5_0_0: i32 = 413;
/// `V5_3_1`: clients above this understand `GO_AWAY`.
pub const V5_3_1: i32 = 475;
/// `V5_3_3`: the version FerroMQ reports as its own.
pub const V5_3_3: i32 = 479;

/// The version FerroMQ puts in the commands it sends.
pub const CURRENT: i32 = V5_3_3;
