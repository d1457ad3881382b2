//! ACL 2.0 (5.3's users and ACLs, acl-and-tls.md section 3): the model, the durable store,
//! which request needs what, and the decision.

pub mod config_json;
pub mod context;
pub mod evaluator;
pub mod metadata;
pub mod migrate;
pub mod model;

pub use evaluator::{parse_whitelist, AuthService, AuthSettings, GrpcCredentials};
pub use metadata::{AuthMetadata, Snapshot};

/// A refused admin change or a failed store operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// Java's `AuthenticationException`: answered NO_PERMISSION with the text.
    #[error("{0}")]
    Authentication(String),
    /// Java's `AuthorizationException`: answered NO_PERMISSION with the text.
    #[error("{0}")]
    Authorization(String),
    /// Anything else (a write failed): answered SYSTEM_ERROR.
    #[error("{0}")]
    System(String),
}
