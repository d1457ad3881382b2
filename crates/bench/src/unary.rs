//! Unary gRPC calls over one HTTP/2 connection, with the requests that callers queue while
//! the connection is busy written together, as grpc-java's client writes them (one flush per
//! event-loop turn). tonic's client adds a buffer task and a tower stack per call, which on a
//! two-core machine makes the load tool, not the proxy, much of the cost being measured. (`h2`
//! still writes each DATA frame over 256 bytes with a write of its own; gathering those
//! writes in user space was tried and lowered throughput at 64 in flight: the added latency
//! costs more than the saved system calls.)

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use crate::BenchError;

/// Calls queued for the connection's writer.
const QUEUE: usize = 1024;

struct Call {
    path: &'static str,
    body: Bytes,
    reply: oneshot::Sender<Result<h2::client::ResponseFuture, String>>,
}

/// A connection's unary-call handle; cheap to clone.
#[derive(Clone)]
pub struct UnaryClient {
    calls: mpsc::Sender<Call>,
}

impl std::fmt::Debug for UnaryClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnaryClient").finish_non_exhaustive()
    }
}

impl UnaryClient {
    /// Connects to `endpoint` (`host:port`, plaintext HTTP/2) as client `client_id`.
    ///
    /// # Errors
    /// [`BenchError::Setup`] when the proxy cannot be reached.
    pub async fn connect(endpoint: &str, client_id: &str) -> Result<UnaryClient, BenchError> {
        let tcp = TcpStream::connect(endpoint)
            .await
            .map_err(|e| BenchError::Setup(format!("cannot reach the gRPC proxy at {endpoint}: {e}")))?;
        let _ = tcp.set_nodelay(true);
        let (send, connection) = h2::client::Builder::new()
            .initial_window_size(1 << 20)
            .initial_connection_window_size(1 << 24)
            .handshake::<_, Bytes>(tcp)
            .await
            .map_err(|e| BenchError::Setup(format!("HTTP/2 handshake with {endpoint}: {e}")))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let (calls, rx) = mpsc::channel(QUEUE);
        tokio::spawn(writer(send, rx, endpoint.to_owned(), client_id.to_owned()));
        Ok(UnaryClient { calls })
    }

    /// Calls `path` (`/apache.rocketmq.v2.MessagingService/SendMessage`) with `request` and
    /// decodes the answer.
    ///
    /// # Errors
    /// The transport failure, a non-OK `grpc-status`, or an undecodable answer, as text.
    pub async fn call<Req: prost::Message, Resp: prost::Message + Default>(
        &self,
        path: &'static str,
        request: &Req,
    ) -> Result<Resp, String> {
        let mut body = BytesMut::with_capacity(5 + request.encoded_len());
        body.put_u8(0);
        body.put_u32(request.encoded_len() as u32);
        request.encode(&mut body).map_err(|e| e.to_string())?;
        let (reply, answer) = oneshot::channel();
        self.calls.send(Call { path, body: body.freeze(), reply }).await.map_err(|_| "connection closed".to_owned())?;
        let response = answer.await.map_err(|_| "connection closed".to_owned())??;
        let response = tokio::time::timeout(Duration::from_secs(30), response)
            .await
            .map_err(|_| "no answer within 30 s".to_owned())?
            .map_err(|e| e.to_string())?;
        let (head, mut stream) = response.into_parts();
        // Trailers-only answers carry the status in the headers.
        if let Some(status) = head.headers.get("grpc-status") {
            if status != "0" {
                return Err(format!("grpc-status {status:?}"));
            }
        }
        let mut data = BytesMut::new();
        while let Some(chunk) = stream.data().await {
            let chunk = chunk.map_err(|e| e.to_string())?;
            let _ = stream.flow_control().release_capacity(chunk.len());
            data.extend_from_slice(&chunk);
        }
        if let Ok(Some(trailers)) = stream.trailers().await {
            if let Some(status) = trailers.get("grpc-status").filter(|s| *s != "0") {
                return Err(format!("grpc-status {status:?}"));
            }
        }
        if data.len() < 5 {
            return Err("answer without a message".to_owned());
        }
        Resp::decode(&data[5..]).map_err(|e| e.to_string())
    }
}

/// Writes the queued calls: all that are waiting go out before the connection task runs again,
/// so they share its next write.
async fn writer(
    mut send: h2::client::SendRequest<Bytes>,
    mut rx: mpsc::Receiver<Call>,
    endpoint: String,
    client_id: String,
) {
    let mut batch = Vec::new();
    while rx.recv_many(&mut batch, QUEUE).await > 0 {
        for call in batch.drain(..) {
            let sent = async {
                send = send.clone().ready().await.map_err(|e| e.to_string())?;
                let request = http::Request::post(format!("http://{endpoint}{}", call.path))
                    .header("content-type", "application/grpc")
                    .header("te", "trailers")
                    .header("x-mq-client-id", client_id.as_str())
                    .body(())
                    .map_err(|e| e.to_string())?;
                let (response, mut stream) = send.send_request(request, false).map_err(|e| e.to_string())?;
                stream.send_data(call.body, true).map_err(|e| e.to_string())?;
                Ok::<_, String>(response)
            }
            .await;
            let _ = call.reply.send(sent);
        }
    }
}
