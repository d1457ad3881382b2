//! Business status codes: how the proxy answers a failure (Java: `ResponseBuilder`,
//! `GrpcProxyException`). Every RPC answers with a `Status{code, message}` in its response;
//! gRPC transport statuses are used only for the Telemetry stream and unimplemented RPCs.

use ferromq_protocol::response_code;
use ferromq_remoting::RemotingError;

use crate::pb::{Code, Status};

/// A failure with the code the client sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct ProxyError {
    /// The status code.
    pub code: Code,
    /// The message, for people.
    pub message: String,
}

/// The proxy's result type.
pub type ProxyResult<T> = Result<T, ProxyError>;

impl ProxyError {
    /// A failure with `code`.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        ProxyError { code, message: message.into() }
    }

    /// The status to put in a response.
    pub fn to_status(&self) -> Status {
        Status { code: self.code as i32, message: self.message.clone() }
    }

    /// A refusal of a broker's in-process service: its RocketMQ code mapped as a remote
    /// broker's answer would be, so both modes give one status.
    pub fn from_service(e: &ferromq_broker::service::ServiceError) -> Self {
        ProxyError::from_remoting(e.remoting_code(), Some(&e.to_string()))
    }

    /// A broker's answer that was not SUCCESS (Java: `ResponseBuilder#buildStatus` for
    /// `MQBrokerException`): the few codes clients react to keep their meaning, everything
    /// else is INTERNAL_SERVER_ERROR with the broker's remark.
    pub fn from_remoting(code: i32, remark: Option<&str>) -> Self {
        let remark = remark.unwrap_or_default().trim().to_owned();
        let mapped = match code {
            response_code::SYSTEM_BUSY => Code::TooManyRequests,
            response_code::REQUEST_CODE_NOT_SUPPORTED => Code::NotImplemented,
            response_code::SUBSCRIPTION_GROUP_NOT_EXIST => Code::ConsumerGroupNotFound,
            response_code::TOPIC_NOT_EXIST => Code::TopicNotFound,
            _ => Code::InternalServerError,
        };
        let message = if remark.is_empty() { format!("broker answered code {code}") } else { remark };
        ProxyError::new(mapped, message)
    }

    /// A transport failure reaching a broker: timeouts are PROXY_TIMEOUT, the rest
    /// INTERNAL_SERVER_ERROR naming the broker.
    pub fn from_transport(e: &RemotingError) -> Self {
        match e {
            RemotingError::Timeout { .. } | RemotingError::ConnectTimeout { .. } => {
                ProxyError::new(Code::ProxyTimeout, e.to_string())
            }
            _ => ProxyError::new(Code::InternalServerError, e.to_string()),
        }
    }
}

/// `Status{OK, "OK"}`.
pub fn ok() -> Status {
    Status { code: Code::Ok as i32, message: "OK".to_owned() }
}

/// A status with `code` and `message`.
pub fn status(code: Code, message: impl Into<String>) -> Status {
    Status { code: code as i32, message: message.into() }
}

/// Shorthand constructors for the validation failures.
macro_rules! bad {
    ($code:ident, $($arg:tt)*) => {
        $crate::status::ProxyError::new($crate::pb::Code::$code, format!($($arg)*))
    };
}
pub(crate) use bad;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remoting_codes_map_as_java() {
        let m = |c| ProxyError::from_remoting(c, Some("r")).code;
        assert_eq!(m(response_code::SYSTEM_BUSY), Code::TooManyRequests);
        assert_eq!(m(response_code::REQUEST_CODE_NOT_SUPPORTED), Code::NotImplemented);
        assert_eq!(m(response_code::SUBSCRIPTION_GROUP_NOT_EXIST), Code::ConsumerGroupNotFound);
        assert_eq!(m(response_code::NO_PERMISSION), Code::InternalServerError);
        assert_eq!(ProxyError::from_remoting(1, None).message, "broker answered code 1");
        assert_eq!(ok().code, 20000);
    }
}
