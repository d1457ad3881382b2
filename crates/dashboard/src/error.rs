//! `ApiError`: why an API call failed. Answered as rocketmq-dashboard answers a failure:
//! HTTP 200 with `{"status":-1,"data":null,"errMsg":"..."}`.

use ferromq_client::admin::AdminError;

/// Why an API call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// A parameter is missing or malformed.
    #[error("{0}")]
    BadRequest(String),
    /// The thing asked for does not exist.
    #[error("{0}")]
    NotFound(String),
    /// A name server or broker refused or could not be reached.
    #[error(transparent)]
    Admin(#[from] AdminError),
}

impl ApiError {
    /// A missing or malformed parameter.
    pub(crate) fn bad(message: impl Into<String>) -> Self {
        ApiError::BadRequest(message.into())
    }

    /// The message with its causes, as one line for `errMsg`.
    pub(crate) fn chain(&self) -> String {
        let mut text = self.to_string();
        // `transparent`: the admin error's own causes, not the admin error again.
        let mut source = std::error::Error::source(self);
        while let Some(e) = source {
            text.push_str(": ");
            text.push_str(&e.to_string());
            source = e.source();
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_request_reads_as_given() {
        assert_eq!(ApiError::bad("topic is required").chain(), "topic is required");
    }
}
