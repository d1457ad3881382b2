//! `AdminClient`: one remoting client, the name-server list and a timeout; the shared request
//! plumbing (send, check the response code, decode the body).

use std::time::Duration;

use ferromq_protocol::body::JsonBody;
use ferromq_protocol::signature::SessionCredentials;
use ferromq_protocol::{properties_text, request_code, response_code, CommandHeader, RemotingCommand};
use ferromq_remoting::{ClientConfig, RemotingClient};

use crate::admin::error::AdminError;

/// Per-request timeout unless set otherwise (Java admin tools use 3-5 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Admin calls to name servers and brokers. Java: `DefaultMQAdminExt`.
#[derive(Debug)]
pub struct AdminClient {
    pub(crate) remoting: RemotingClient,
    namesrv_addrs: Vec<String>,
    pub(crate) timeout: Duration,
}

impl AdminClient {
    /// A client for the `;`-separated name server list `namesrv_addr`.
    pub fn new(namesrv_addr: &str) -> Self {
        Self::with_credentials(namesrv_addr, None)
    }

    /// A client that signs every request with `credentials` (brokers with ACL on; Java's
    /// mqadmin reads them from `conf/tools.yml`).
    pub fn with_credentials(namesrv_addr: &str, credentials: Option<SessionCredentials>) -> Self {
        Self::with_config(namesrv_addr, ClientConfig::default().with_zone_from_env().with_credentials(credentials))
    }

    /// A client whose connections follow `config` (credentials, TLS, zone fields).
    pub fn with_config(namesrv_addr: &str, config: ClientConfig) -> Self {
        let namesrv_addrs =
            namesrv_addr.split(';').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect();
        AdminClient { remoting: RemotingClient::new(config), namesrv_addrs, timeout: DEFAULT_TIMEOUT }
    }

    /// Sets the per-request timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The name servers, in the order they are tried.
    pub fn namesrv_addrs(&self) -> &[String] {
        &self.namesrv_addrs
    }

    /// Closes every connection.
    pub async fn shutdown(&self) {
        self.remoting.shutdown().await;
    }

    /// Sends `request` to `addr` and returns the response whatever its code.
    ///
    /// # Errors
    /// [`AdminError::Remoting`] when the request cannot be sent or times out.
    pub(crate) async fn call(&self, addr: &str, request: RemotingCommand) -> Result<RemotingCommand, AdminError> {
        let name = code_name(request.code);
        self.remoting.invoke(addr, request, self.timeout).await.map_err(|source| AdminError::Remoting {
            addr: addr.to_owned(),
            request: name,
            source,
        })
    }

    /// Sends `request` and fails unless the response code is SUCCESS.
    pub(crate) async fn call_ok(&self, addr: &str, request: RemotingCommand) -> Result<RemotingCommand, AdminError> {
        let name = code_name(request.code);
        let response = self.call(addr, request).await?;
        check(addr, name, response, &[response_code::SUCCESS])
    }

    /// Sends `request` and decodes a successful response's JSON body.
    pub(crate) async fn call_body<B: JsonBody>(&self, addr: &str, request: RemotingCommand) -> Result<B, AdminError> {
        let name = code_name(request.code);
        let response = self.call_ok(addr, request).await?;
        B::decode(&response.body).map_err(|source| AdminError::Body { addr: addr.to_owned(), request: name, source })
    }

    /// Sends `request` to `addr` and reads the answer's body as `key=value` lines (the broker's
    /// and the name server's settings).
    pub(crate) async fn call_properties(
        &self,
        addr: &str,
        request: RemotingCommand,
    ) -> Result<Vec<(String, String)>, AdminError> {
        let name = code_name(request.code);
        let response = self.call_ok(addr, request).await?;
        let text = String::from_utf8_lossy(&response.body);
        properties_text::parse(&text).map_err(|source| AdminError::Body {
            addr: addr.to_owned(),
            request: name,
            source,
        })
    }

    /// Sends a name-server request to each name server in turn until one answers; a failure
    /// response is returned at once, a transport error moves on to the next address.
    pub(crate) async fn call_namesrv(&self, request: RemotingCommand) -> Result<(String, RemotingCommand), AdminError> {
        let mut last = AdminError::NoNamesrv;
        for addr in &self.namesrv_addrs {
            match self.call_ok(addr, request.clone()).await {
                Ok(response) => return Ok((addr.clone(), response)),
                Err(e @ AdminError::Remoting { .. }) => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// [`call_namesrv`](Self::call_namesrv) and decode the JSON body.
    pub(crate) async fn call_namesrv_body<B: JsonBody>(&self, request: RemotingCommand) -> Result<B, AdminError> {
        let name = code_name(request.code);
        let (addr, response) = self.call_namesrv(request).await?;
        B::decode(&response.body).map_err(|source| AdminError::Body { addr, request: name, source })
    }
}

/// RocketMQ's name of a request code.
pub(crate) fn code_name(code: i32) -> &'static str {
    request_code::name(code).unwrap_or("UNKNOWN_REQUEST")
}

/// `response` if its code is one of `accepted`, else [`AdminError::Response`].
pub(crate) fn check(
    addr: &str,
    request: &'static str,
    response: RemotingCommand,
    accepted: &[i32],
) -> Result<RemotingCommand, AdminError> {
    if accepted.contains(&response.code) {
        return Ok(response);
    }
    Err(AdminError::Response {
        addr: addr.to_owned(),
        request,
        code: response.code,
        code_name: response_code::name(response.code).unwrap_or("UNKNOWN"),
        remark: response.remark.unwrap_or_default(),
    })
}

/// Decodes a response header, naming the peer on failure.
pub(crate) fn decode_header<H: CommandHeader>(
    addr: &str,
    request: &'static str,
    response: &RemotingCommand,
) -> Result<H, AdminError> {
    response.decode_header().map_err(|source| AdminError::Header { addr: addr.to_owned(), request, source })
}
