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

use std::sync::Arc;

use http::{header, HeaderMap, Method, Request};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;

mod session;
mod upstream;

pub(crate) use session::accept;
pub(crate) use upstream::{open_upstream, UpstreamWs};

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

/// Whether an upstream URL is a WebSocket one.
pub fn is_ws_url(url: &reqwest::Url) -> bool {
    matches!(url.scheme(), "ws" | "wss")
}

/// Incoming messages are bounded by the request size: nothing a client
/// sends is ever larger (the first message is the request; later ones are
/// refused).
pub(super) fn codec_config(max_message: usize) -> WebSocketConfig {
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
pub(super) const UPSTREAM_READ_BUFFER: usize = 16 << 10;

/// Why a session ended early, told to the client in the close frame.
pub(super) fn close_frame(code: CloseCode, reason: &str) -> Message {
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

#[cfg(test)]
mod tests;
