//! The WebSocket transport, on both sides, as an adapter onto the HTTP path
//! (so every dialect pair works over it with no per-dialect code; the
//! binding is in docs/transports.md).
//!
//! A message is a transport of its own beside SSE and the length-delimited
//! binary one: each message is one event whole, so no framer cuts it.
//!
//! Client side: a `GET` with `Upgrade: websocket` at a route's path is
//! answered 101; the first text message becomes the body of the `POST` the
//! route takes, run through the gateway's own [`Gateway::handle`], whose
//! pump hands over each event of its answer as a body frame of its own
//! (its sink frames nothing: each span is one event's body,
//! `Pump::prepare_messages`); each goes out as one message. Upstream side: a route whose `upstream` is
//! `ws://` or `wss://` sends the request body as the first text message and
//! hands each message to the translator as one frame
//! ([`Read::Messages`](crate::transport::Read)): text for JSON, binary
//! (one protobuf event) when the upstream accepted `ag-ui.proto`.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{FutureExt, SinkExt, Stream, StreamExt};
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::error::{ProtocolError, SubProtocolError};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self, Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;

use crate::config::{Route, UpstreamTransport};
use crate::error::UpstreamFault;
use crate::error::{Body, GatewayError};
use crate::server::Gateway;
use crate::transport::Read;

/// The subprotocol for JSON text messages (also what no subprotocol means).
pub const SUBPROTOCOL_JSON: &str = "ag-ui.json";
/// The subprotocol for binary messages, each one AG-UI protobuf event.
pub const SUBPROTOCOL_PROTO: &str = "ag-ui.proto";
/// The media type a client asks for with [`SUBPROTOCOL_PROTO`].
pub const PROTO_MEDIA_TYPE: &str = "application/vnd.ag-ui.event+proto";

/// Keeps a connection counted (`max_connections`) while a WebSocket uses
/// it: the accept loop puts it in each request's extensions.
#[derive(Clone)]
pub struct ConnHold {
    pub slot: Arc<dyn std::any::Any + Send + Sync>,
    /// Where the session runs: the accept loop's connections.
    pub tasks: tokio_util::task::TaskTracker,
}

/// Whether `req` asks to become a WebSocket (HTTP/1.1 `GET` + `Upgrade`).
pub fn is_upgrade<B>(req: &Request<B>) -> bool {
    req.method() == Method::GET
        && has_token(req.headers(), header::UPGRADE, "websocket")
        && has_token(req.headers(), header::CONNECTION, "upgrade")
}

fn has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// The subprotocol to answer with: the first one offered that is known.
fn pick_subprotocol(headers: &HeaderMap) -> Result<Option<&'static str>, GatewayError> {
    let offered: Vec<&str> = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if offered.is_empty() {
        return Ok(None);
    }
    for o in offered {
        for known in [SUBPROTOCOL_JSON, SUBPROTOCOL_PROTO] {
            if o.eq_ignore_ascii_case(known) {
                return Ok(Some(known));
            }
        }
    }
    Err(GatewayError::client(
        StatusCode::BAD_REQUEST,
        "unsupported_subprotocol",
        format!("no known WebSocket subprotocol offered (known: {SUBPROTOCOL_JSON}, {SUBPROTOCOL_PROTO})"),
    ))
}

/// Browsers apply no CORS to WebSockets: a page of another origin could
/// run a route that its `fetch` could not. So a browser's upgrade (it sends
/// `Origin`) must come from the gateway's own origin or from one the
/// route's `[routes.cors]` allows. Non-browser clients send no `Origin`.
///
/// "Own origin" must be believable: see [`crate::access::Origin::Rebound`].
fn origin_allowed<B>(route: &Route, req: &Request<B>) -> bool {
    use crate::access::Origin;
    matches!(
        crate::access::origin(route, req),
        Origin::Absent | Origin::Own | Origin::Allowed
    )
}

/// Limits of one client session, from its route.
#[derive(Clone, Copy, Debug)]
struct SessionLimits {
    max_request_bytes: usize,
    first_message_within: Duration,
    /// The route's `heartbeat`: a ping instead of a comment.
    ping_every: Option<Duration>,
}

/// Answers a WebSocket upgrade at `route`'s path: 101 and a task that runs
/// the session once hyper hands the connection over.
pub(crate) fn accept<B>(
    gw: &Arc<Gateway>,
    route: &Route,
    read_timeout: Duration,
    req: &mut Request<B>,
    peer: SocketAddr,
) -> Result<Response<Body>, GatewayError> {
    let h = req.headers();
    if h.get(header::SEC_WEBSOCKET_VERSION).map(|v| v.as_bytes()) != Some(b"13") {
        return Err(GatewayError::client(
            StatusCode::UPGRADE_REQUIRED,
            "websocket_version",
            "only WebSocket version 13 is spoken",
        ));
    }
    let Some(key) = h.get(header::SEC_WEBSOCKET_KEY) else {
        return Err(GatewayError::client(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "a WebSocket upgrade needs Sec-WebSocket-Key",
        ));
    };
    if !origin_allowed(route, req) {
        return Err(GatewayError::client(
            StatusCode::FORBIDDEN,
            "origin_not_allowed",
            "this origin is not allowed on this route",
        ));
    }
    let accept_key = derive_accept_key(key.as_bytes());
    let subprotocol = pick_subprotocol(h)?;
    let Some(on_upgrade) = req.extensions_mut().remove::<hyper::upgrade::OnUpgrade>() else {
        // Mounted somewhere that cannot hand the connection over.
        return Err(GatewayError::client(
            StatusCode::BAD_REQUEST,
            "upgrade_unavailable",
            "this connection cannot be upgraded to a WebSocket",
        ));
    };
    let template = inner_headers(req.headers(), subprotocol == Some(SUBPROTOCOL_PROTO));
    let uri = req.uri().clone();
    let hold = req.extensions().get::<ConnHold>().cloned();
    let limits = SessionLimits {
        max_request_bytes: route.max_body_bytes,
        first_message_within: read_timeout,
        ping_every: route.heartbeat,
    };
    let gw = gw.clone();
    let tasks = hold.as_ref().map(|h| h.tasks.clone());
    let task = async move {
        let _hold = hold;
        let upgraded = match on_upgrade.await {
            Ok(u) => u,
            Err(e) => {
                tracing::debug!(error = %e, "WebSocket upgrade failed");
                return;
            }
        };
        let ws = WebSocketStream::from_raw_socket(
            TokioIo::new(upgraded),
            Role::Server,
            Some(codec_config(limits.max_request_bytes)),
        )
        .await;
        session(gw, ws, uri, template, limits, peer).await;
    };
    match tasks {
        Some(t) => drop(t.spawn(task)),
        None => drop(tokio::spawn(task)),
    }
    let mut resp = Response::new(crate::error::full(Bytes::new()));
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let rh = resp.headers_mut();
    rh.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    rh.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Ok(v) = HeaderValue::from_str(&accept_key) {
        rh.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    if let Some(p) = subprotocol {
        rh.insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(p));
    }
    Ok(resp)
}

/// Incoming messages are bounded by the request size: nothing a client
/// sends is ever larger (the first message is the request; later ones are
/// refused).
fn codec_config(max_message: usize) -> WebSocketConfig {
    let max = max_message.max(1024);
    WebSocketConfig::default()
        .max_message_size(Some(max))
        .max_frame_size(Some(max))
        // tungstenite allocates its read buffer up front, 128 KiB unless
        // told: a client sends one request, so 4 KiB is plenty (it grows
        // for a larger message).
        .read_buffer_size(4 << 10)
}

/// An upstream WebSocket streams many messages: a read buffer of 16 KiB
/// takes a burst in few reads, at an eighth of the default's memory per
/// stream.
const UPSTREAM_READ_BUFFER: usize = 16 << 10;

/// The headers of the inner `POST`: the upgrade's own (auth included),
/// without what belongs to the upgrade.
fn inner_headers(upgrade: &HeaderMap, proto: bool) -> HeaderMap {
    let mut h = upgrade.clone();
    for name in [
        header::UPGRADE,
        header::CONNECTION,
        header::SEC_WEBSOCKET_KEY,
        header::SEC_WEBSOCKET_VERSION,
        header::SEC_WEBSOCKET_PROTOCOL,
        header::SEC_WEBSOCKET_EXTENSIONS,
        header::CONTENT_LENGTH,
        header::TRANSFER_ENCODING,
        header::ORIGIN,
    ] {
        h.remove(name);
    }
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(
        header::ACCEPT,
        HeaderValue::from_static(if proto {
            // SSE stays acceptable: a gateway that cannot answer proto
            // falls back to it, and the session sends text messages then.
            "application/vnd.ag-ui.event+proto, text/event-stream;q=0.5"
        } else {
            "text/event-stream"
        }),
    );
    h
}

type ServerWs = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// Why a session ended early, told to the client in the close frame.
fn close_frame(code: CloseCode, reason: &str) -> Message {
    // A close reason is at most 123 bytes.
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let reason = reason.get(..end).unwrap_or_default();
    Message::Close(Some(CloseFrame {
        code,
        reason: reason.to_string().into(),
    }))
}

/// Sends a close and waits (briefly) for the client's, so that the close
/// frame is not lost to a reset.
async fn close_with(ws: &mut ServerWs, code: CloseCode, reason: &str) {
    if ws.send(close_frame(code, reason)).await.is_err() {
        return;
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(Ok(_)) = ws.next().await {}
    })
    .await;
}

/// The client closed: the codec has queued the close reply; it is sent
/// before the socket goes (briefly: the client may be gone already).
async fn closed_by_client(ws: &mut ServerWs) {
    let _ = tokio::time::timeout(Duration::from_secs(1), ws.flush()).await;
}

/// The first message, as the request body; or why there is none.
enum First {
    Request(Bytes),
    /// Closed with this code and reason.
    Refused(CloseCode, String),
    /// The client went away.
    Gone,
}

async fn first_message(ws: &mut ServerWs, limits: &SessionLimits) -> First {
    let read = async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(t))) => {
                    return First::Request(Bytes::copy_from_slice(t.as_bytes()))
                }
                Some(Ok(Message::Binary(_))) => {
                    return First::Refused(
                        CloseCode::Unsupported,
                        "the first message must be the request as text".into(),
                    )
                }
                Some(Ok(Message::Close(_))) | None => return First::Gone,
                Some(Ok(_)) => continue,
                Some(Err(tungstenite::Error::Capacity(_))) => {
                    return First::Refused(
                        CloseCode::Size,
                        format!(
                            "request_too_large: the request is over {} bytes",
                            limits.max_request_bytes
                        ),
                    )
                }
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "WebSocket read failed");
                    return First::Gone;
                }
            }
        }
    };
    match tokio::time::timeout(limits.first_message_within, read).await {
        Ok(f) => f,
        Err(_) => First::Refused(
            CloseCode::Policy,
            format!(
                "request_timeout: no request within {} ms",
                limits.first_message_within.as_millis()
            ),
        ),
    }
}

/// One client session: the request, then the stream, then the close.
async fn session(
    gw: Arc<Gateway>,
    mut ws: ServerWs,
    uri: http::Uri,
    headers: HeaderMap,
    limits: SessionLimits,
    peer: SocketAddr,
) {
    let body = match first_message(&mut ws, &limits).await {
        First::Request(b) => b,
        First::Refused(code, reason) => {
            tracing::debug!(%peer, %reason, "WebSocket request refused");
            return close_with(&mut ws, code, &reason).await;
        }
        First::Gone => return closed_by_client(&mut ws).await,
    };
    let mut req = Request::new(Full::new(body));
    *req.method_mut() = Method::POST;
    *req.uri_mut() = uri;
    *req.headers_mut() = headers;
    req.extensions_mut().insert(crate::telemetry::ViaWebSocket);
    let resp = gw.handle(req, peer).await;
    let status = resp.status();
    let ctype = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let body = resp.into_body();
    if !status.is_success() {
        return refuse(&mut ws, status, body).await;
    }
    let binary = ctype.starts_with(PROTO_MEDIA_TYPE);
    stream(&mut ws, body, binary, limits).await;
}

/// An error answer before the stream: its JSON as one message, then a
/// close whose reason is the error's code.
async fn refuse(ws: &mut ServerWs, status: StatusCode, body: Body) {
    // Error bodies are the gateway's own small JSON: bounded anyway.
    let bytes = match http_body_util::Limited::new(body, 64 * 1024)
        .collect()
        .await
    {
        Ok(c) => c.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let code = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.pointer("/error/code")?.as_str().map(str::to_string))
        .unwrap_or_else(|| status.as_u16().to_string());
    if ws.send(Message::text(text)).await.is_err() {
        return;
    }
    let close = if status.is_server_error() {
        CloseCode::Error
    } else {
        CloseCode::Policy
    };
    close_with(ws, close, &code).await;
}

/// The message of one body frame of the answer: one event (the pump hands
/// each over as a frame of its own), binary when the client took
/// `ag-ui.proto`, else text.
fn message_of(frame: Bytes, binary: bool) -> Option<Message> {
    if binary {
        return Some(Message::Binary(frame));
    }
    Utf8Bytes::try_from(frame).ok().map(Message::Text)
}

/// Moves the answer to the client, one event a message, until it ends or
/// the client leaves (then the body is dropped: the run is cancelled as on
/// a disconnect).
async fn stream(ws: &mut ServerWs, mut body: Body, binary: bool, limits: SessionLimits) {
    // Without a heartbeat, no pings (the interval never fires).
    let ping_every = limits
        .ping_every
        .unwrap_or(Duration::from_secs(3600 * 24 * 365))
        .max(Duration::from_millis(100));
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + ping_every, ping_every);
    loop {
        tokio::select! {
            frame = body.frame() => {
                // The events ready together go out in one write.
                let mut next = Some(frame);
                while let Some(frame) = next.take() {
                    let data = match frame {
                        Some(Ok(f)) => match f.into_data() {
                            Ok(d) => d,
                            Err(_) => continue,
                        },
                        Some(Err(e)) => {
                            tracing::debug!(error = %e, "the stream failed");
                            let _ = ws.flush().await;
                            return close_with(ws, CloseCode::Error, "the stream failed").await;
                        }
                        None => {
                            if ws.flush().await.is_err() {
                                return;
                            }
                            return close_with(ws, CloseCode::Normal, "").await;
                        }
                    };
                    let Some(m) = message_of(data, binary) else {
                        // The encoders write JSON, which is UTF-8: a bug.
                        tracing::error!("an event of the answer is not UTF-8 text");
                        let _ = ws.flush().await;
                        return close_with(ws, CloseCode::Error, "an event is not UTF-8 text").await;
                    };
                    if ws.feed(m).await.is_err() {
                        return;
                    }
                    next = body.frame().now_or_never();
                }
                if ws.flush().await.is_err() {
                    return;
                }
            }
            msg = ws.next() => match msg {
                Some(Ok(Message::Text(_) | Message::Binary(_))) => {
                    return close_with(
                        ws,
                        CloseCode::Policy,
                        "one request per connection: a message came before the stream ended",
                    )
                    .await;
                }
                Some(Ok(Message::Close(_))) => return closed_by_client(ws).await,
                None | Some(Err(_)) => return,
                // Pongs are answered by the codec itself.
                Some(Ok(_)) => {}
            },
            _ = ping.tick() => {
                if ws.send(Message::Ping(Bytes::new())).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Whether an upstream URL is a WebSocket one.
pub fn is_ws_url(url: &reqwest::Url) -> bool {
    matches!(url.scheme(), "ws" | "wss")
}

type ClientWs = WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The subprotocols a route offers its WebSocket upstream: none on `sse`
/// (text only, as before subprotocols existed); on `proto` and `auto`,
/// binary first and JSON as the fallback AG-UI 1.1 asks for.
fn upstream_offer(route: &Route) -> Option<&'static str> {
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
fn tls_connector(route: &Route) -> Option<tokio_tungstenite::Connector> {
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
enum Next {
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
const UPSTREAM_CHUNK: usize = 64 << 10;

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

#[cfg(test)]
mod tests {
    use super::*;

    fn get(headers: &[(&str, &str)]) -> Request<()> {
        let mut b = Request::builder().method(Method::GET).uri("/r");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn upgrade_needs_get_upgrade_and_connection_tokens() {
        let up = [
            ("upgrade", "WebSocket"),
            ("connection", "keep-alive, Upgrade"),
        ];
        assert!(is_upgrade(&get(&up)));
        assert!(!is_upgrade(&get(&up[..1])), "no Connection: upgrade");
        assert!(!is_upgrade(&get(&[
            ("upgrade", "h2c"),
            ("connection", "upgrade")
        ])));
        let mut post = get(&up);
        *post.method_mut() = Method::POST;
        assert!(!is_upgrade(&post));
    }

    #[test]
    fn subprotocol_is_the_first_known_offer() {
        let h = |v: &str| get(&[("sec-websocket-protocol", v)]).headers().clone();
        assert_eq!(pick_subprotocol(&HeaderMap::new()).unwrap(), None);
        assert_eq!(
            pick_subprotocol(&h("x-other, AG-UI.PROTO, ag-ui.json")).unwrap(),
            Some(SUBPROTOCOL_PROTO)
        );
        assert_eq!(
            pick_subprotocol(&h("ag-ui.json")).unwrap(),
            Some(SUBPROTOCOL_JSON)
        );
        let e = pick_subprotocol(&h("x-other")).unwrap_err();
        assert_eq!(
            (e.status, e.code),
            (StatusCode::BAD_REQUEST, "unsupported_subprotocol")
        );
    }

    #[test]
    fn inner_request_keeps_auth_and_drops_the_upgrade() {
        let up = get(&[
            ("upgrade", "websocket"),
            ("connection", "upgrade"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("sec-websocket-version", "13"),
            ("sec-websocket-protocol", "ag-ui.proto"),
            ("authorization", "Bearer k"),
        ]);
        let h = inner_headers(up.headers(), false);
        assert_eq!(h.get("authorization").unwrap(), "Bearer k");
        assert_eq!(h.get("accept").unwrap(), "text/event-stream");
        assert_eq!(h.get("content-type").unwrap(), "application/json");
        for gone in [
            "upgrade",
            "connection",
            "sec-websocket-key",
            "sec-websocket-protocol",
        ] {
            assert!(h.get(gone).is_none(), "{gone}");
        }
        let proto = inner_headers(up.headers(), true);
        assert!(proto
            .get("accept")
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(PROTO_MEDIA_TYPE));
    }

    #[test]
    fn close_reason_is_cut_to_123_bytes_on_a_char_boundary() {
        let long = "é".repeat(100);
        let Message::Close(Some(f)) = close_frame(CloseCode::Policy, &long) else {
            panic!("a close");
        };
        assert_eq!(f.reason.len(), 122);
        assert!(f.reason.as_str().chars().all(|c| c == 'é'));
    }

    #[test]
    fn each_body_frame_is_one_message_of_the_session_s_kind() {
        assert_eq!(
            message_of(Bytes::from_static(b"{\"a\":1}"), false),
            Some(Message::text("{\"a\":1}"))
        );
        assert_eq!(
            message_of(Bytes::from_static(&[8, 1]), true),
            Some(Message::binary(vec![8u8, 1]))
        );
        assert_eq!(message_of(Bytes::from_static(&[0xff]), false), None);
    }

    /// A WebSocket server on a free port that runs `script` on its first
    /// connection and reports what it saw.
    async fn upstream<F, Fut>(script: F) -> (String, tokio::task::JoinHandle<Vec<Message>>)
    where
        F: FnOnce(WebSocketStream<tokio::net::TcpStream>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Vec<Message>> + Send,
    {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}/up", l.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            script(tokio_tungstenite::accept_async(s).await.unwrap()).await
        });
        (url, task)
    }

    fn route(url: &str) -> Route {
        let toml = format!(
            "[[routes]]\npath = \"/r\"\nclient = \"ag-ui\"\nupstream = \"{url}\"\nupstream_protocol = \"ag-ui\"\n"
        );
        crate::config::Config::parse(&toml)
            .unwrap()
            .routes
            .remove(0)
    }

    /// The messages read, each as it came, and how the stream ended (the
    /// reads they came in are timing, not meaning).
    async fn drain(mut s: UpstreamWs) -> (Vec<Bytes>, Option<UpstreamFault>) {
        let mut got = Vec::new();
        while let Some(i) = s.next().await {
            match i {
                Ok(Read::Messages(m)) => got.extend(m),
                Ok(Read::Bytes(b)) => panic!("bytes from a message transport: {b:?}"),
                Err(e) => {
                    assert!(s.next().await.is_none(), "nothing after the error");
                    return (got, Some(e));
                }
            }
        }
        (got, None)
    }

    #[tokio::test]
    async fn upstream_text_messages_are_events_as_sent_until_a_normal_close() {
        let (url, seen) = upstream(|mut ws| async move {
            let first = ws.next().await.unwrap().unwrap();
            ws.send(Message::text("{\"a\":1}")).await.unwrap();
            ws.send(Message::text("two\nlines")).await.unwrap();
            ws.close(None).await.unwrap();
            vec![first]
        })
        .await;
        let s = open_upstream(&route(&url), HeaderMap::new(), "{\"req\":1}".into())
            .await
            .unwrap();
        assert_eq!(
            drain(s).await,
            (
                vec![Bytes::from("{\"a\":1}"), Bytes::from("two\nlines")],
                None
            )
        );
        assert_eq!(seen.await.unwrap(), vec![Message::text("{\"req\":1}")]);
    }

    #[tokio::test]
    async fn messages_ready_together_reach_the_pump_as_one_chunk() {
        let (url, sent) = upstream(|mut ws| async move {
            let first = ws.next().await.unwrap().unwrap();
            for n in 0..3 {
                ws.send(Message::text(format!("{{\"n\":{n}}}")))
                    .await
                    .unwrap();
            }
            ws.close(None).await.unwrap();
            vec![first]
        })
        .await;
        let mut s = open_upstream(&route(&url), HeaderMap::new(), "{}".into())
            .await
            .unwrap();
        // All sent (loopback: all received) before the first read.
        sent.await.unwrap();
        let Read::Messages(read) = s.next().await.unwrap().unwrap() else {
            panic!("messages");
        };
        assert_eq!(read, ["{\"n\":0}", "{\"n\":1}", "{\"n\":2}"]);
        assert!(s.next().await.is_none(), "then the normal close");
    }

    #[tokio::test]
    async fn upstream_binary_is_malformed_and_an_odd_close_an_error() {
        let (url, _seen) = upstream(|mut ws| async move {
            ws.next().await;
            ws.send(Message::binary(vec![0u8, 1])).await.unwrap();
            vec![]
        })
        .await;
        let s = open_upstream(&route(&url), HeaderMap::new(), "{}".into())
            .await
            .unwrap();
        let (got, end) = drain(s).await;
        assert!(got.is_empty());
        assert!(
            matches!(&end, Some(UpstreamFault::Malformed(why)) if why.contains("binary")),
            "{end:?}"
        );

        let (url, _seen) = upstream(|mut ws| async move {
            ws.next().await;
            ws.close(Some(CloseFrame {
                code: CloseCode::Library(4000),
                reason: "no".into(),
            }))
            .await
            .unwrap();
            vec![]
        })
        .await;
        let s = open_upstream(&route(&url), HeaderMap::new(), "{}".into())
            .await
            .unwrap();
        let (_, end) = drain(s).await;
        assert!(
            matches!(&end, Some(UpstreamFault::Connection(why)) if why.contains("4000")),
            "{end:?}"
        );
    }

    /// A WebSocket server that answers each handshake with `answer` (the
    /// subprotocol it accepts, if any), notes what each offered, and runs
    /// `script` on the `nth` connection (earlier ones are dropped).
    async fn negotiating_upstream<F, Fut>(
        answer: Option<&'static str>,
        nth: usize,
        script: F,
    ) -> (
        String,
        tokio::task::JoinHandle<(Vec<Option<String>>, Vec<Message>)>,
    )
    where
        F: FnOnce(WebSocketStream<tokio::net::TcpStream>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Vec<Message>> + Send,
    {
        use tokio_tungstenite::tungstenite::handshake::server::{
            Request as Hs, Response as HsResp,
        };
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}/up", l.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let offered = Arc::new(std::sync::Mutex::new(Vec::new()));
            for i in 1..=nth {
                let (s, _) = l.accept().await.unwrap();
                let seen = offered.clone();
                // The callback's type is tungstenite's.
                #[allow(clippy::result_large_err)]
                let cb = move |req: &Hs, mut resp: HsResp| {
                    let o = req
                        .headers()
                        .get(header::SEC_WEBSOCKET_PROTOCOL)
                        .map(|v| v.to_str().unwrap().to_string());
                    seen.lock().unwrap().push(o);
                    if let Some(a) = answer {
                        resp.headers_mut()
                            .insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(a));
                    }
                    Ok(resp)
                };
                let ws = tokio_tungstenite::accept_hdr_async(s, cb).await.unwrap();
                if i == nth {
                    let got = script(ws).await;
                    let offered = offered.lock().unwrap().clone();
                    return (offered, got);
                }
            }
            unreachable!()
        });
        (url, task)
    }

    fn route_on(url: &str, transport: &str) -> Route {
        let toml = format!(
            "[[routes]]\npath = \"/r\"\nclient = \"ag-ui\"\nupstream = \"{url}\"\nupstream_protocol = \"ag-ui\"\nupstream_transport = \"{transport}\"\n"
        );
        crate::config::Config::parse(&toml)
            .unwrap()
            .routes
            .remove(0)
    }

    fn run_started() -> Vec<u8> {
        babelgate_proto::encode_event_as(
            &serde_json::json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
            None,
        )
        .unwrap()
    }

    #[tokio::test]
    async fn proto_routes_offer_binary_then_json_and_read_binary_messages_as_frames() {
        for transport in ["proto", "auto"] {
            let (url, seen) =
                negotiating_upstream(Some(SUBPROTOCOL_PROTO), 1, |mut ws| async move {
                    let first = ws.next().await.unwrap().unwrap();
                    ws.send(Message::binary(vec![1u8, 2, 3])).await.unwrap();
                    ws.send(Message::binary(Vec::<u8>::new())).await.unwrap();
                    ws.close(None).await.unwrap();
                    vec![first]
                })
                .await;
            let s = open_upstream(&route_on(&url, transport), HeaderMap::new(), "{}".into())
                .await
                .unwrap();
            assert!(s.is_binary());
            // Each message as it came, an empty one too: no length prefix.
            assert_eq!(
                drain(s).await,
                (vec![Bytes::from(vec![1u8, 2, 3]), Bytes::new()], None)
            );
            let (offered, first) = seen.await.unwrap();
            assert_eq!(offered, vec![Some("ag-ui.proto, ag-ui.json".to_string())]);
            // The request still goes up as text.
            assert_eq!(first, vec![Message::text("{}")]);
        }
    }

    #[tokio::test]
    async fn a_text_message_on_a_binary_session_is_malformed() {
        let (url, _seen) = negotiating_upstream(Some(SUBPROTOCOL_PROTO), 1, |mut ws| async move {
            ws.next().await;
            ws.send(Message::binary(run_started())).await.unwrap();
            ws.send(Message::text("{\"type\":\"RUN_FINISHED\"}"))
                .await
                .unwrap();
            ws.send(Message::binary(run_started())).await.unwrap();
            vec![]
        })
        .await;
        let s = open_upstream(&route_on(&url, "auto"), HeaderMap::new(), "{}".into())
            .await
            .unwrap();
        let (got, end) = drain(s).await;
        assert_eq!(got, [Bytes::from(run_started())]);
        assert!(
            matches!(&end, Some(UpstreamFault::Malformed(why)) if why.contains("text")),
            "{end:?}"
        );
    }

    #[tokio::test]
    async fn json_accepted_reads_text_and_refuses_binary() {
        let (url, seen) = negotiating_upstream(Some(SUBPROTOCOL_JSON), 1, |mut ws| async move {
            ws.next().await;
            ws.send(Message::text("{\"a\":1}")).await.unwrap();
            ws.send(Message::binary(run_started())).await.unwrap();
            vec![]
        })
        .await;
        let s = open_upstream(&route_on(&url, "proto"), HeaderMap::new(), "{}".into())
            .await
            .unwrap();
        assert!(!s.is_binary());
        let (got, end) = drain(s).await;
        assert_eq!(got, ["{\"a\":1}"]);
        assert!(matches!(end, Some(UpstreamFault::Malformed(_))), "{end:?}");
        assert_eq!(seen.await.unwrap().0.len(), 1);
    }

    #[tokio::test]
    async fn no_subprotocol_accepted_connects_again_for_json() {
        // A server that does not negotiate: it answers no subprotocol.
        let (url, seen) = negotiating_upstream(None, 2, |mut ws| async move {
            let first = ws.next().await.unwrap().unwrap();
            ws.send(Message::text("{\"a\":1}")).await.unwrap();
            ws.close(None).await.unwrap();
            vec![first]
        })
        .await;
        let s = open_upstream(
            &route_on(&url, "proto"),
            HeaderMap::new(),
            "{\"q\":1}".into(),
        )
        .await
        .unwrap();
        assert!(!s.is_binary());
        assert_eq!(drain(s).await, (vec![Bytes::from("{\"a\":1}")], None));
        let (offered, first) = seen.await.unwrap();
        assert_eq!(
            offered,
            vec![Some("ag-ui.proto, ag-ui.json".to_string()), None],
            "offered both, then none"
        );
        assert_eq!(first, vec![Message::text("{\"q\":1}")]);
    }

    #[tokio::test]
    async fn an_sse_route_offers_no_subprotocol() {
        let (url, seen) = negotiating_upstream(None, 1, |mut ws| async move {
            ws.next().await;
            ws.close(None).await.unwrap();
            vec![]
        })
        .await;
        let s = open_upstream(&route(&url), HeaderMap::new(), "{}".into())
            .await
            .unwrap();
        assert!(!s.is_binary());
        drain(s).await;
        assert_eq!(seen.await.unwrap().0, vec![None]);
    }

    #[tokio::test]
    async fn a_dropped_upstream_is_closed_with_going_away() {
        let (url, seen) = upstream(|mut ws| async move {
            ws.next().await;
            let mut got = Vec::new();
            while let Some(Ok(m)) = ws.next().await {
                got.push(m);
            }
            got
        })
        .await;
        let s = open_upstream(&route(&url), HeaderMap::new(), "{}".into())
            .await
            .unwrap();
        drop(s);
        let got = tokio::time::timeout(Duration::from_secs(30), seen)
            .await
            .unwrap()
            .unwrap();
        let Some(Message::Close(Some(f))) = got.last() else {
            panic!("no close: {got:?}");
        };
        assert_eq!(f.code, CloseCode::Away);
    }

    #[tokio::test]
    async fn wss_checks_the_certificate() {
        // A TLS server with a certificate no root vouches for.
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.cert.der().clone()],
                rustls_pki_types::PrivateKeyDer::try_from(cert.key_pair.serialize_der()).unwrap(),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("wss://localhost:{}/up", l.local_addr().unwrap().port());
        let server = tokio::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            acceptor.accept(s).await.is_ok()
        });
        let Err(e) = open_upstream(&route(&url), HeaderMap::new(), "{}".into()).await else {
            panic!("connected to an untrusted server");
        };
        assert_eq!(e.code, "upstream_unreachable");
        assert!(!server.await.unwrap(), "the client refused the handshake");
    }

    #[tokio::test]
    async fn nothing_listening_is_unreachable() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}/", l.local_addr().unwrap());
        drop(l);
        let Err(e) = open_upstream(&route(&url), HeaderMap::new(), "{}".into()).await else {
            panic!("connected");
        };
        assert_eq!(e.code, "upstream_unreachable");
    }
}
