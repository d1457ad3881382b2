//! Access control of FerroMQ's servers.
//!
//! [`plain`] is ACL 1.0: the accounts of 4.x's `plain_acl.yml` (access key, secret key, admin
//! flag, white remote addresses, default and per-resource topic and group permissions), the
//! mapping of a request to the resources it touches, and the validation order of
//! `PlainPermissionManager` (acl-and-tls.md section 2). Request signatures themselves are
//! computed by `ferromq_protocol::signature`, which clients share.
//!
//! The crate decides; it does not transport. A server asks [`plain::PlainAccessValidator`]
//! about each request with the caller's address and answers a refusal itself.

mod denial_log;
mod error;
pub mod plain;
pub mod tools;
pub mod v2;

pub use denial_log::DenialLog;
pub use error::AclError;
