//! What stands between a replica's TCP connection and the replication protocols: TLS and
//! FerroMQ's HA authentication.
//!
//! * **TLS**: the master's HA port takes the broker's `tls.server.mode` (plaintext and TLS told
//!   apart by the first byte, as on every remoting port: a classic report or an AutoSwitchHA
//!   handshake starts with `0x00`, a TLS ClientHello with `0x16`); a replica connects with TLS
//!   when its broker's own clients do (`useTLS`, `tls.enable`).
//! * **Authentication** (a FerroMQ extension; Java's HA port checks nothing): a replica with
//!   credentials opens with [`AUTH_MAGIC`]; the master answers the magic and a fresh random
//!   challenge; the replica proves it holds the secret of an account allowed to replicate
//!   (HMAC-SHA1 over challenge and access key, so nothing replayable crosses the wire); the
//!   master answers one status byte. A master that requires it closes any connection that
//!   does not open so. A master that does not require it still answers the exchange (any
//!   FerroMQ slave with credentials can attach), and hands every other first eight bytes back
//!   to the protocol: Java slaves attach unchanged. See docs/decisions/0020.
//!
//! ```text
//! replica → master   "FMQHAUTH"
//! master  → replica  "FMQHAUTH" challenge[20]
//! replica → master   u16 BE access-key length, access key (UTF-8), HMAC-SHA1(secret, challenge ‖ access key)[20]
//! master  → replica  0 (accepted) | 1 (refused; the master then closes)
//! ```

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ferromq_protocol::signature::{constant_time_eq, hmac_sha1, SessionCredentials};
use ferromq_remoting::tls::{crypto_provider, Accepted, ClientTls, ServerTls};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, info, warn};

/// The reading half of a replication connection.
pub(crate) type LinkReader = Box<dyn AsyncRead + Send + Unpin>;
/// The writing half of a replication connection.
pub(crate) type LinkWriter = Box<dyn AsyncWrite + Send + Unpin>;

/// The first eight bytes of an authenticating replica, echoed by the master. As a classic
/// offset report it would be an offset of about 5 EiB, which no CommitLog reaches.
pub const AUTH_MAGIC: [u8; 8] = *b"FMQHAUTH";
/// Bytes of the master's challenge.
const CHALLENGE_LEN: usize = 20;
/// Bytes of an HMAC-SHA1.
const MAC_LEN: usize = 20;
/// Longest access key a replica may send.
const ACCESS_KEY_MAX: usize = 255;
/// The status byte of an accepted replica.
const ACCEPTED: u8 = 0;
/// The status byte of a refused replica.
const REFUSED: u8 = 1;
/// How long each step of the exchange may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// Who may replicate from this master.
pub trait ReplicaAuthenticator: Send + Sync + fmt::Debug {
    /// The secret of `access_key` if that account may replicate this broker's data.
    fn secret(&self, access_key: &str) -> Option<String>;
}

/// A connection, split.
pub(crate) struct Link {
    pub(crate) reader: LinkReader,
    pub(crate) writer: LinkWriter,
}

impl Link {
    fn plain(stream: TcpStream) -> Link {
        let (reader, writer) = stream.into_split();
        Link { reader: Box::new(reader), writer: Box::new(writer) }
    }

    fn split<S: AsyncRead + AsyncWrite + Send + 'static>(stream: S) -> Link {
        let (reader, writer) = tokio::io::split(stream);
        Link { reader: Box::new(reader), writer: Box::new(writer) }
    }
}

/// Why a replica could not set up its link to the master.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LinkError {
    #[error("TLS handshake with the master failed")]
    Tls(#[source] std::io::Error),
    #[error("HA authentication: socket error")]
    Io(#[from] std::io::Error),
    #[error("HA authentication: the master did not answer within {0:?}")]
    Timeout(Duration),
    #[error("HA authentication: the master does not speak it (a Java master, or a FerroMQ release without it); remove innerClientAuthenticationCredentials or set haAuthenticationEnabled=false on this slave")]
    NotSpoken,
    #[error("HA authentication: the master refused access key {0} (it must be a SUPER user, or an ACL 1.0 admin account, on the master)")]
    Refused(String),
}

/// The master's HA port: its listener, its TLS mode and who may replicate.
pub struct HaListener {
    listener: TcpListener,
    admission: Admission,
}

impl fmt::Debug for HaListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HaListener")
            .field("local_addr", &self.listener.local_addr().ok())
            .field("tls", &self.admission.tls)
            .field("authenticator", &self.admission.authenticator)
            .finish()
    }
}

impl From<TcpListener> for HaListener {
    /// Plaintext, no authentication.
    fn from(listener: TcpListener) -> Self {
        HaListener { listener, admission: Admission { tls: ServerTls::disabled(), authenticator: None } }
    }
}

impl HaListener {
    /// Serves TLS as `tls` says.
    pub fn with_tls(mut self, tls: ServerTls) -> Self {
        self.admission.tls = tls;
        self
    }

    /// Admits only replicas that authenticate as an account `authenticator` knows.
    pub fn with_authenticator(mut self, authenticator: Arc<dyn ReplicaAuthenticator>) -> Self {
        self.admission.authenticator = Some(authenticator);
        self
    }

    /// The address it listens on.
    ///
    /// # Errors
    /// The socket's address cannot be read.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub(crate) fn into_parts(self) -> (TcpListener, Admission) {
        (self.listener, self.admission)
    }
}

/// What a master checks of each new connection.
#[derive(Clone)]
pub(crate) struct Admission {
    tls: ServerTls,
    authenticator: Option<Arc<dyn ReplicaAuthenticator>>,
}

impl Admission {
    /// TLS as the mode says, then the authentication. `None` (logged) when the connection
    /// is refused or fails; it is then closed.
    pub(crate) async fn admit(
        &self,
        stream: TcpStream,
        addr: SocketAddr,
        first_byte_timeout: Duration,
    ) -> Option<Link> {
        if let Err(e) = stream.set_nodelay(true) {
            debug!(remote_addr = %addr, error = %e, "cannot set TCP_NODELAY");
        }
        let mut link = match self.tls.accept(stream, addr, first_byte_timeout).await? {
            Accepted::Plain(s) => Link::plain(s),
            Accepted::Tls(s) => Link::split(*s),
        };
        let mut head = [0u8; AUTH_MAGIC.len()];
        match tokio::time::timeout(first_byte_timeout, link.reader.read_exact(&mut head)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                debug!(remote_addr = %addr, error = %e, "replica connection closed before its first report");
                return None;
            }
            Err(_) => {
                debug!(remote_addr = %addr, "replica sent nothing in time; closing");
                return None;
            }
        }
        if head == AUTH_MAGIC {
            return match tokio::time::timeout(STEP_TIMEOUT * 2, self.challenge(&mut link)).await {
                Ok(Ok(Some(access_key))) => {
                    info!(remote_addr = %addr, access_key = %access_key, "replica authenticated");
                    Some(link)
                }
                Ok(Ok(None)) => None,
                Ok(Err(e)) => {
                    warn!(remote_addr = %addr, error = %e, "HA authentication failed; connection closed");
                    None
                }
                Err(_) => {
                    warn!(remote_addr = %addr, "HA authentication did not complete in time; connection closed");
                    None
                }
            };
        }
        if self.authenticator.is_some() {
            warn!(remote_addr = %addr,
                "HA connection refused: the replica did not authenticate (ACL is on: a FerroMQ slave needs innerClientAuthenticationCredentials; a Java slave cannot attach unless haAuthenticationEnabled=false here)");
            return None;
        }
        // Not the exchange: the eight bytes belong to the replication protocol.
        let reader = std::mem::replace(&mut link.reader, Box::new(tokio::io::empty()));
        link.reader = Box::new(std::io::Cursor::new(head.to_vec()).chain(reader));
        Some(link)
    }

    /// The master's half of the exchange: `Some(access key)` when accepted.
    async fn challenge(&self, link: &mut Link) -> std::io::Result<Option<String>> {
        let mut challenge = [0u8; CHALLENGE_LEN];
        crypto_provider()
            .secure_random
            .fill(&mut challenge)
            .map_err(|_| std::io::Error::other("no secure random source for the HA challenge"))?;
        let mut hello = AUTH_MAGIC.to_vec();
        hello.extend_from_slice(&challenge);
        link.writer.write_all(&hello).await?;
        link.writer.flush().await?;
        let len = usize::from(link.reader.read_u16().await?);
        if len == 0 || len > ACCESS_KEY_MAX {
            return Err(std::io::Error::other(format!("access key of {len} bytes")));
        }
        let mut access_key = vec![0u8; len];
        link.reader.read_exact(&mut access_key).await?;
        let mut mac = [0u8; MAC_LEN];
        link.reader.read_exact(&mut mac).await?;
        let access_key = String::from_utf8(access_key).map_err(|_| std::io::Error::other("access key is not UTF-8"))?;
        let accepted = match &self.authenticator {
            // Not required here: a replica that authenticates anyway is let in.
            None => true,
            Some(a) => a.secret(&access_key).is_some_and(|secret| {
                constant_time_eq(&mac, &hmac_sha1(secret.as_bytes(), &signed(&challenge, &access_key)))
            }),
        };
        link.writer.write_all(&[if accepted { ACCEPTED } else { REFUSED }]).await?;
        link.writer.flush().await?;
        if !accepted {
            warn!(access_key = %access_key, "HA connection refused: unknown account, not allowed to replicate, or a wrong secret");
            return Ok(None);
        }
        Ok(Some(access_key))
    }
}

fn signed(challenge: &[u8], access_key: &str) -> Vec<u8> {
    let mut data = challenge.to_vec();
    data.extend_from_slice(access_key.as_bytes());
    data
}

/// The replica's side: TLS if `tls`, then the exchange if `credentials`.
pub(crate) async fn connect(
    stream: TcpStream,
    master: &str,
    tls: Option<&ClientTls>,
    credentials: Option<&SessionCredentials>,
) -> Result<Link, LinkError> {
    let _ = stream.set_nodelay(true);
    let mut link = match tls {
        Some(tls) => Link::split(tls.connect(master, stream).await.map_err(LinkError::Tls)?),
        None => Link::plain(stream),
    };
    if let Some(credentials) = credentials {
        match tokio::time::timeout(STEP_TIMEOUT * 2, authenticate(&mut link, credentials)).await {
            Ok(result) => result?,
            Err(_) => return Err(LinkError::Timeout(STEP_TIMEOUT * 2)),
        }
    }
    Ok(link)
}

async fn authenticate(link: &mut Link, credentials: &SessionCredentials) -> Result<(), LinkError> {
    link.writer.write_all(&AUTH_MAGIC).await?;
    link.writer.flush().await?;
    let mut hello = [0u8; AUTH_MAGIC.len() + CHALLENGE_LEN];
    link.reader.read_exact(&mut hello).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => LinkError::NotSpoken,
        _ => LinkError::Io(e),
    })?;
    if hello[..AUTH_MAGIC.len()] != AUTH_MAGIC {
        return Err(LinkError::NotSpoken);
    }
    let challenge = &hello[AUTH_MAGIC.len()..];
    let key = credentials.access_key.as_bytes();
    let len = u16::try_from(key.len()).ok().filter(|l| *l as usize <= ACCESS_KEY_MAX);
    let Some(len) = len.filter(|l| *l > 0) else {
        return Err(LinkError::Refused(credentials.access_key.clone()));
    };
    let mut answer = len.to_be_bytes().to_vec();
    answer.extend_from_slice(key);
    answer
        .extend_from_slice(&hmac_sha1(credentials.secret_key.as_bytes(), &signed(challenge, &credentials.access_key)));
    link.writer.write_all(&answer).await?;
    link.writer.flush().await?;
    let status = link.reader.read_u8().await?;
    if status != ACCEPTED {
        return Err(LinkError::Refused(credentials.access_key.clone()));
    }
    Ok(())
}
