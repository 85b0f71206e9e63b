//! The upstream side: a `ws://` or `wss://` upstream sent the request body as
//! its first message, each message it sends read as one frame.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, Stream, StreamExt};
use http::{header, HeaderMap, HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::error::{ProtocolError, SubProtocolError};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;

use crate::config::{Route, UpstreamTransport};
use crate::error::GatewayError;
use crate::error::UpstreamFault;
use crate::transport::Read;

use super::*;

pub(super) type ClientWs =
    WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The subprotocols a route offers its WebSocket upstream: none on `sse`
/// (text only, as before subprotocols existed); on `proto` and `auto`,
/// binary first and JSON as the fallback AG-UI 1.1 asks for.
pub(super) fn upstream_offer(route: &Route) -> Option<&'static str> {
    match route.upstream_transport {
        UpstreamTransport::Sse => None,
        UpstreamTransport::Proto | UpstreamTransport::Auto => Some("ag-ui.proto, ag-ui.json"),
    }
}

/// Connects to a WebSocket upstream and sends `body` as the first message;
/// the messages that follow come out as they are, one event each: JSON
/// text, or protobuf events when the upstream accepted
/// [`SUBPROTOCOL_PROTO`] ([`UpstreamWs::is_binary`]).
pub(crate) async fn open_upstream(
    route: &Route,
    headers: HeaderMap,
    body: String,
) -> Result<UpstreamWs, GatewayError> {
    let request = |offer: Option<&'static str>| {
        let mut req =
            tungstenite::client::IntoClientRequest::into_client_request(route.upstream.as_str())
                .map_err(|e| GatewayError::internal(format!("WebSocket upstream: {e}")))?;
        for (k, v) in headers.iter() {
            // The handshake's own headers are tungstenite's.
            if !k.as_str().starts_with("sec-websocket-") && *k != header::HOST {
                req.headers_mut().insert(k.clone(), v.clone());
            }
        }
        if let Some(offer) = offer {
            req.headers_mut().insert(
                header::SEC_WEBSOCKET_PROTOCOL,
                HeaderValue::from_static(offer),
            );
        }
        Ok::<_, GatewayError>(req)
    };
    let connect = |req| {
        tokio_tungstenite::connect_async_tls_with_config(
            req,
            Some(
                WebSocketConfig::default()
                    .max_message_size(Some(
                        babelgate_core::sse::SseFramer::default().max_event_bytes(),
                    ))
                    .read_buffer_size(UPSTREAM_READ_BUFFER),
            ),
            true,
            tls_connector(route),
        )
    };
    let offer = upstream_offer(route);
    let first = request(offer)?;
    let retry = request(None)?;
    let handshake = async move {
        match connect(first).await {
            // tungstenite fails a handshake whose answer names no
            // subprotocol when some were offered; RFC 6455 allows that
            // answer (a server that does not negotiate). Such a server
            // speaks JSON: connected again offering none, it is read as
            // `ag-ui.json`. No request was sent on the first connection.
            Err(tungstenite::Error::Protocol(ProtocolError::SecWebSocketSubProtocolError(
                SubProtocolError::NoSubProtocol,
            ))) if offer.is_some() => {
                tracing::debug!(upstream = %crate::server::loggable_url(&route.upstream), "the upstream accepted no subprotocol: connecting again for JSON");
                connect(retry).await
            }
            r => r,
        }
    };
    let (mut ws, resp) = match tokio::time::timeout(
        route.connect_timeout + route.response_timeout,
        handshake,
    )
    .await
    {
        Err(_) => {
            return Err(GatewayError::upstream(
                StatusCode::GATEWAY_TIMEOUT,
                "upstream_timeout",
                "the upstream did not accept the WebSocket in time",
            ))
        }
        Ok(Err(tungstenite::Error::Http(resp))) => {
            tracing::warn!(upstream = %crate::server::loggable_url(&route.upstream), status = %resp.status(), "upstream refused the WebSocket");
            return Err(GatewayError::upstream(
                StatusCode::BAD_GATEWAY,
                "upstream_status",
                format!("the upstream answered {}", resp.status()),
            ));
        }
        Ok(Err(e)) => {
            tracing::warn!(upstream = %crate::server::loggable_url(&route.upstream), error = %e, "WebSocket upstream failed");
            return Err(GatewayError::upstream(
                StatusCode::BAD_GATEWAY,
                "upstream_unreachable",
                "cannot reach the upstream",
            ));
        }
        Ok(Ok(x)) => x,
    };
    // tungstenite has checked that the answer is one of those offered.
    let binary = resp
        .headers()
        .get(header::SEC_WEBSOCKET_PROTOCOL)
        .is_some_and(|p| p.as_bytes() == SUBPROTOCOL_PROTO.as_bytes());
    // An upstream that accepted the socket but reads nothing would hold a
    // request larger than the socket's buffers here forever.
    match tokio::time::timeout(route.response_timeout, ws.send(Message::text(body))).await {
        Ok(Ok(())) => {}
        Ok(Err(_)) => {
            return Err(GatewayError::upstream(
                StatusCode::BAD_GATEWAY,
                "upstream_unreachable",
                "the upstream closed the WebSocket before the request",
            ))
        }
        Err(_) => {
            return Err(GatewayError::upstream(
                StatusCode::GATEWAY_TIMEOUT,
                "upstream_timeout",
                "the upstream did not take the request in time",
            ))
        }
    }
    Ok(UpstreamWs {
        ws: Some(ws),
        done: false,
        binary,
        after: None,
    })
}

/// `wss://` with rustls on ring (the provider the listener uses), and the
/// webpki roots plus the route's `upstream_ca`: named here, so no
/// process-wide default is needed.
pub(super) fn tls_connector(route: &Route) -> Option<tokio_tungstenite::Connector> {
    use tokio_rustls::rustls;
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    // Checked as trust anchors when the config was loaded.
    let (_added, _unusable) =
        roots.add_parsable_certificates(route.upstream_ca.iter().flat_map(|ca| ca.certs.clone()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Some(tokio_tungstenite::Connector::Rustls(Arc::new(config)))
}

/// A WebSocket upstream read as messages, each one event. Dropped before
/// its end (the client left), it closes the socket with a close frame.
pub(crate) struct UpstreamWs {
    ws: Option<ClientWs>,
    done: bool,
    /// `ag-ui.proto` was accepted: binary messages only.
    binary: bool,
    /// How the stream ended, held back while the messages read before it
    /// are handed over.
    after: Option<Option<Result<Read, UpstreamFault>>>,
}

/// What one message of an upstream WebSocket was.
pub(super) enum Next {
    /// An event.
    Event(Bytes),
    /// A ping, pong or frame of no meaning here.
    Skip,
    /// The end: an error, or `None` for a clean close.
    End(Option<Result<Read, UpstreamFault>>),
}

/// Messages already read are handed to the pump together, up to this many
/// bytes: a read per event would pay the pump's per-read work (the run
/// log's append, wake-ups, timers) for each.
pub(super) const UPSTREAM_CHUNK: usize = 64 << 10;

impl UpstreamWs {
    /// Whether the messages are protobuf events rather than JSON text.
    pub(crate) fn is_binary(&self) -> bool {
        self.binary
    }
}

impl Stream for UpstreamWs {
    type Item = Result<Read, UpstreamFault>;

    /// The messages that are ready, together: never waits for more.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(end) = this.after.take() {
            return Poll::Ready(end);
        }
        let mut batch = Vec::new();
        let mut bytes = 0;
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            let Some(ws) = this.ws.as_mut() else {
                return Poll::Ready(None);
            };
            let item = match ws.poll_next_unpin(cx) {
                Poll::Pending if batch.is_empty() => return Poll::Pending,
                Poll::Pending => return Poll::Ready(Some(Ok(Read::Messages(batch)))),
                Poll::Ready(m) => m,
            };
            match this.read_one(item) {
                Next::Event(m) => {
                    bytes += m.len();
                    batch.push(m);
                    if bytes >= UPSTREAM_CHUNK {
                        return Poll::Ready(Some(Ok(Read::Messages(batch))));
                    }
                }
                Next::Skip => {}
                Next::End(end) => {
                    this.done = true;
                    if batch.is_empty() {
                        return Poll::Ready(end);
                    }
                    this.after = Some(end);
                    return Poll::Ready(Some(Ok(Read::Messages(batch))));
                }
            }
        }
    }
}

impl UpstreamWs {
    /// One message's event, or why the stream ends.
    fn read_one(&self, item: Option<Result<Message, tungstenite::Error>>) -> Next {
        match item {
            // The accepted subprotocol decides what the messages are; a
            // message of the other kind is malformed.
            Some(Ok(Message::Text(_))) if self.binary => {
                Next::End(Some(Err(UpstreamFault::Malformed(format!(
                "a text WebSocket message after accepting {SUBPROTOCOL_PROTO} (binary events only)"
            )))))
            }
            Some(Ok(Message::Text(t))) => Next::Event(Bytes::from(t)),
            Some(Ok(Message::Binary(b))) if self.binary => Next::Event(b),
            Some(Ok(Message::Binary(_))) => {
                Next::End(Some(Err(UpstreamFault::Malformed(format!(
                    "a binary WebSocket message without {SUBPROTOCOL_PROTO} (text events only)"
                )))))
            }
            Some(Ok(Message::Close(frame))) => match frame {
                None => Next::End(None),
                Some(f) if f.code == CloseCode::Normal => Next::End(None),
                Some(f) => Next::End(Some(Err(UpstreamFault::Connection(format!(
                    "the upstream closed the WebSocket with {} {}",
                    u16::from(f.code),
                    f.reason
                ))))),
            },
            Some(Ok(_)) => Next::Skip,
            Some(Err(e)) => Next::End(Some(Err(UpstreamFault::Connection(format!(
                "the upstream WebSocket failed: {e}"
            ))))),
            None => Next::End(Some(Err(UpstreamFault::Connection(
                "the upstream WebSocket ended without a close".to_string(),
            )))),
        }
    }
}

impl Drop for UpstreamWs {
    fn drop(&mut self) {
        let Some(mut ws) = self.ws.take() else {
            return;
        };
        if self.done {
            return;
        }
        // Cancelled: the upstream is told with a close frame (a going-away
        // code), then the socket is dropped.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(2), async {
                    let _ = ws
                        .send(close_frame(CloseCode::Away, "the client went away"))
                        .await;
                })
                .await;
            });
        }
    }
}
