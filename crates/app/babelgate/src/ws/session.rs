//! The client side: a route's `GET` upgraded, its first message run as the
//! route's `POST`, each event of the answer sent as one message.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{FutureExt, SinkExt, StreamExt};
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::{self, Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;

use crate::config::Route;
use crate::error::{Body, GatewayError};
use crate::server::Gateway;

use super::*;

/// The subprotocol to answer with: the first one offered that is known.
pub(super) fn pick_subprotocol(headers: &HeaderMap) -> Result<Option<&'static str>, GatewayError> {
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
pub(super) fn origin_allowed<B>(route: &Route, req: &Request<B>) -> bool {
    use crate::access::Origin;
    matches!(
        crate::access::origin(route, req),
        Origin::Absent | Origin::Own | Origin::Allowed
    )
}

/// Limits of one client session, from its route.
#[derive(Clone, Copy, Debug)]
pub(super) struct SessionLimits {
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

/// The headers of the inner `POST`: the upgrade's own (auth included),
/// without what belongs to the upgrade.
pub(super) fn inner_headers(upgrade: &HeaderMap, proto: bool) -> HeaderMap {
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

pub(super) type ServerWs = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// Sends a close and waits (briefly) for the client's, so that the close
/// frame is not lost to a reset.
pub(super) async fn close_with(ws: &mut ServerWs, code: CloseCode, reason: &str) {
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
pub(super) async fn closed_by_client(ws: &mut ServerWs) {
    let _ = tokio::time::timeout(Duration::from_secs(1), ws.flush()).await;
}

/// The first message, as the request body; or why there is none.
pub(super) enum First {
    Request(Bytes),
    /// Closed with this code and reason.
    Refused(CloseCode, String),
    /// The client went away.
    Gone,
}

pub(super) async fn first_message(ws: &mut ServerWs, limits: &SessionLimits) -> First {
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
pub(super) async fn session(
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
pub(super) async fn refuse(ws: &mut ServerWs, status: StatusCode, body: Body) {
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
pub(super) fn message_of(frame: Bytes, binary: bool) -> Option<Message> {
    if binary {
        return Some(Message::Binary(frame));
    }
    Utf8Bytes::try_from(frame).ok().map(Message::Text)
}

/// Moves the answer to the client, one event a message, until it ends or
/// the client leaves (then the body is dropped: the run is cancelled as on
/// a disconnect).
pub(super) async fn stream(ws: &mut ServerWs, mut body: Body, binary: bool, limits: SessionLimits) {
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
