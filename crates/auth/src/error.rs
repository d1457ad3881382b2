//! Errors of loading and changing access-control data.

use std::path::PathBuf;

/// Why an ACL file or an ACL change was refused.
#[derive(Debug, thiserror::Error)]
pub enum AclError {
    /// The file could not be read.
    #[error("cannot read ACL file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file could not be written.
    #[error("cannot write ACL file {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: ferromq_config::FileError,
    },
    /// The file is not YAML, or not the shape of `plain_acl.yml`.
    #[error("ACL file {path} is invalid: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the YAML position when known.
        reason: String,
    },
    /// An address pattern that no strategy accepts (`whiteRemoteAddress`,
    /// `globalWhiteRemoteAddresses`).
    #[error("address pattern {pattern:?} is invalid: {reason}")]
    AddressPattern {
        /// The pattern as written.
        pattern: String,
        /// Why.
        reason: &'static str,
    },
    /// An account change that breaks a rule (key lengths, duplicates, unknown account).
    #[error("{0}")]
    Account(String),
}
