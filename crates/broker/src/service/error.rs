//! Why the service refused a request. The remoting adapter turns each into a response code
//! (`ServiceError::remoting_code`) and the text into the remark; the proxy maps the same code
//! to its gRPC status (grpc-proxy.md section 7), so both protocols give one answer per refusal.

use ferromq_protocol::response_code;

/// A refused request. `Display` is Java's remark text, which clients print.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// Too many requests of the kind already waiting (SYSTEM_BUSY).
    #[error("{0}")]
    Busy(String),
    /// The broker cannot serve it now: a slave asked to store, the store shut down
    /// (SERVICE_NOT_AVAILABLE).
    #[error("{0}")]
    NotAvailable(String),
    /// The broker's or the topic's permission forbids it (NO_PERMISSION).
    #[error("{0}")]
    Forbidden(String),
    /// The topic does not exist and was not created (TOPIC_NOT_EXIST).
    #[error("{0}")]
    TopicNotExist(String),
    /// The subscription group does not exist (SUBSCRIPTION_GROUP_NOT_EXIST).
    #[error("{0}")]
    GroupNotExist(String),
    /// A bad field: topic name, queue id (INVALID_PARAMETER).
    #[error("{0}")]
    InvalidParameter(String),
    /// The message itself is refused: size, batch rules (MESSAGE_ILLEGAL).
    #[error("{0}")]
    MessageIllegal(String),
    /// The broker failed: a file could not be created, metadata not written (SYSTEM_ERROR).
    #[error("{0}")]
    System(String),
    /// A refusal with another of RocketMQ's codes, kept as the component that refused said it.
    #[error("{remark}")]
    Other {
        /// The RocketMQ response code.
        code: i32,
        /// Its remark.
        remark: String,
    },
}

impl ServiceError {
    /// The refusal that RocketMQ's response `code` stands for.
    pub fn from_code(code: i32, remark: impl Into<String>) -> ServiceError {
        let remark = remark.into();
        match code {
            response_code::SYSTEM_BUSY => ServiceError::Busy(remark),
            response_code::SERVICE_NOT_AVAILABLE => ServiceError::NotAvailable(remark),
            response_code::NO_PERMISSION => ServiceError::Forbidden(remark),
            response_code::TOPIC_NOT_EXIST => ServiceError::TopicNotExist(remark),
            response_code::SUBSCRIPTION_GROUP_NOT_EXIST => ServiceError::GroupNotExist(remark),
            response_code::INVALID_PARAMETER => ServiceError::InvalidParameter(remark),
            response_code::MESSAGE_ILLEGAL => ServiceError::MessageIllegal(remark),
            response_code::SYSTEM_ERROR => ServiceError::System(remark),
            code => ServiceError::Other { code, remark },
        }
    }

    /// RocketMQ's response code for the refusal.
    pub fn remoting_code(&self) -> i32 {
        match self {
            ServiceError::Busy(_) => response_code::SYSTEM_BUSY,
            ServiceError::NotAvailable(_) => response_code::SERVICE_NOT_AVAILABLE,
            ServiceError::Forbidden(_) => response_code::NO_PERMISSION,
            ServiceError::TopicNotExist(_) => response_code::TOPIC_NOT_EXIST,
            ServiceError::GroupNotExist(_) => response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
            ServiceError::InvalidParameter(_) => response_code::INVALID_PARAMETER,
            ServiceError::MessageIllegal(_) => response_code::MESSAGE_ILLEGAL,
            ServiceError::System(_) => response_code::SYSTEM_ERROR,
            ServiceError::Other { code, .. } => *code,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_variant() {
        for code in [
            response_code::SYSTEM_BUSY,
            response_code::SERVICE_NOT_AVAILABLE,
            response_code::NO_PERMISSION,
            response_code::TOPIC_NOT_EXIST,
            response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
            response_code::INVALID_PARAMETER,
            response_code::MESSAGE_ILLEGAL,
            response_code::SYSTEM_ERROR,
            response_code::FLUSH_DISK_TIMEOUT,
        ] {
            let e = ServiceError::from_code(code, "why");
            assert_eq!(e.remoting_code(), code);
            assert_eq!(e.to_string(), "why");
        }
        assert!(matches!(ServiceError::from_code(response_code::NO_PERMISSION, "x"), ServiceError::Forbidden(_)));
    }
}
