//! How the servers write an error into a log line: the error and each of its causes.

/// An error and its causes, `: `-separated (tracing fields show only the outer error).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn causes_follow_the_error() {
        let io = std::io::Error::other("disk gone");
        #[derive(Debug, thiserror::Error)]
        #[error("cannot write the users file")]
        struct Outer(#[source] std::io::Error);
        assert_eq!(super::error_chain(&Outer(io)), "cannot write the users file: disk gone");
    }
}
