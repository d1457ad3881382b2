//! ACL 1.0: the accounts of `plain_acl.yml` (acl-and-tls.md section 2).

pub mod acl_file;
pub mod address;
pub mod permission;
pub mod resource;
mod validator;

pub use acl_file::{PlainAccessConfig, PlainAclFile};
pub use address::AddressPattern;
pub use validator::{AccountUpdate, Denial, PlainAccessValidator, KEY_MIN_CHARS, TRACE_TOPIC};

/// The default file under the RocketMQ home directory (Java: `rocketmq.acl.plain.file`).
pub const DEFAULT_PLAIN_FILE: &str = "conf/plain_acl.yml";
/// The directory of further ACL files under the home directory (4.9's multi-file ACL).
pub const DEFAULT_ACL_DIR: &str = "conf/acl";
