//! The binary transport (AG-UI protobuf, `application/vnd.ag-ui.event+proto`)
//! and WebSocket, on both sides of the harness, so that their rows are
//! measured as the SSE ones are: the same workload, the same `@<µs>;` marks.
//!
//! - Client (`loadgen run --transport`): `sse` (the default), `proto` (the
//!   same HTTP request with the binary `Accept`; the length-prefixed messages
//!   are framed and decoded), `ws` (a WebSocket on the route's path, no
//!   subprotocol: one JSON event per text message) and `ws-proto` (subprotocol
//!   `ag-ui.proto`: one protobuf event per binary message). For WebSocket,
//!   TTFB is the time to the first data message (the upgrade comes before the
//!   request is even sent), and each message is stamped when it is read.
//! - Upstream: a request whose `Accept` names the binary media type gets the
//!   same events as length-prefixed protobuf; a WebSocket upgrade gets them as
//!   JSON text messages, or binary ones when `ag-ui.proto` is offered.
//!
//! In a protobuf event, marks are looked for in `TEXT_MESSAGE_CONTENT`'s
//! delta, read in place by the gateway's own flat reader (no allocation).
//! Any other message (HAI's text travels as a `hai:BUSINESS_DATA_CONTENT`
//! CUSTOM event, its strings inside a `google.protobuf.Struct`) is scanned
//! as bytes: protobuf keeps a string's bytes as they are, and decoding each
//! Struct would make the client the bottleneck. A stray match would show as
//! more events delivered than sent.

use std::io;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use babelgate_proto::{pb, ProtoFramer};
use futures_util::{SinkExt, StreamExt};
use prost::Message as _;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use crate::{header, now_us, Marks, RunOpts, StreamResult, Workload};

const WS_PROTO: &str = "ag-ui.proto";

/// How the client reads the system under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientTransport {
    Sse,
    Proto,
    Ws,
    WsProto,
}

impl ClientTransport {
    pub fn parse(s: Option<&str>) -> Option<Self> {
        Some(match s {
            None | Some("sse") => ClientTransport::Sse,
            Some("proto") => ClientTransport::Proto,
            Some("ws") => ClientTransport::Ws,
            Some("ws-proto") => ClientTransport::WsProto,
            Some(_) => return None,
        })
    }

    pub fn is_ws(self) -> bool {
        matches!(self, ClientTransport::Ws | ClientTransport::WsProto)
    }

    /// The `Accept` of the HTTP request.
    pub fn accept(self) -> &'static str {
        match self {
            ClientTransport::Proto => babelgate_proto::MEDIA_TYPE,
            _ => "text/event-stream",
        }
    }

    /// Refuses a response of the wrong media type (`head` in lower case): a
    /// row must measure the transport it is named after.
    pub fn check_head(self, head: &str) -> io::Result<()> {
        if self == ClientTransport::Proto && !head.contains(babelgate_proto::MEDIA_TYPE) {
            return Err(io::Error::other("the response is not the binary transport"));
        }
        Ok(())
    }
}

fn marks_in(bytes: &[u8], found: &mut impl FnMut(u64)) {
    Marks::default().feed(bytes, found);
}

/// The marks of one protobuf event (no length prefix).
fn message_marks(message: &[u8], found: &mut impl FnMut(u64)) {
    match babelgate_proto::flat::read(message) {
        Some(flat) if flat.event_type() == "TEXT_MESSAGE_CONTENT" => {
            if let Some(delta) = flat.get("delta") {
                marks_in(delta.as_bytes(), found);
            }
        }
        Some(_) => {}
        None => marks_in(message, found),
    }
}

/// Finds the marks in an HTTP body (dechunked) of either transport.
pub enum BodyMarks {
    Sse(Marks),
    Proto {
        framer: ProtoFramer,
        messages: Vec<Vec<u8>>,
        error: Option<String>,
    },
}

impl BodyMarks {
    pub fn new(t: ClientTransport) -> Self {
        match t {
            ClientTransport::Proto => BodyMarks::Proto {
                framer: ProtoFramer::default(),
                messages: Vec::new(),
                error: None,
            },
            _ => BodyMarks::Sse(Marks::default()),
        }
    }

    pub fn feed(&mut self, bytes: &[u8], mut found: impl FnMut(u64)) {
        match self {
            BodyMarks::Sse(m) => m.feed(bytes, found),
            BodyMarks::Proto {
                framer,
                messages,
                error,
            } => {
                if error.is_some() {
                    return;
                }
                if let Err(e) = framer.push(bytes, messages) {
                    *error = Some(e.to_string());
                }
                for m in messages.drain(..) {
                    message_marks(&m, &mut found);
                    framer.recycle(m);
                }
            }
        }
    }

    /// A framing error so far, or (`end`) a body cut inside a message.
    pub fn check(&mut self, end: bool) -> io::Result<()> {
        if let BodyMarks::Proto { framer, error, .. } = self {
            if let Some(e) = error {
                return Err(io::Error::other(e.clone()));
            }
            if end {
                framer.finish().map_err(io::Error::other)?;
            }
        }
        Ok(())
    }
}

/// One client stream over WebSocket.
pub async fn ws_stream(o: &RunOpts, start: Instant, r: &mut StreamResult) -> io::Result<()> {
    let s = TcpStream::connect(&o.host).await?;
    let _ = s.set_nodelay(true);
    let proto = o.transport == ClientTransport::WsProto;
    let w = o.workload;
    let mut req = format!("ws://{}{}", o.host, o.path)
        .into_client_request()
        .map_err(io::Error::other)?;
    let bench = format!("events={};rate={};pad={}", w.events, w.rate, w.pad);
    req.headers_mut().insert(
        "x-bench",
        HeaderValue::from_str(&bench).map_err(io::Error::other)?,
    );
    if proto {
        req.headers_mut()
            .insert("sec-websocket-protocol", HeaderValue::from_static(WS_PROTO));
    }
    // The SSE client reads into 64 KiB too.
    let config = WebSocketConfig::default().read_buffer_size(64 * 1024);
    let (mut ws, resp) = tokio_tungstenite::client_async_with_config(req, s, Some(config))
        .await
        .map_err(io::Error::other)?;
    let chosen = resp
        .headers()
        .get("sec-websocket-protocol")
        .and_then(|v| v.to_str().ok());
    if proto && chosen != Some(WS_PROTO) {
        return Err(io::Error::other("ag-ui.proto was not accepted"));
    }
    ws.send(Message::text(o.body))
        .await
        .map_err(io::Error::other)?;
    let events = &mut r.events;
    let lat = &mut r.latencies_us;
    while let Some(msg) = ws.next().await {
        let msg = msg.map_err(io::Error::other)?;
        let t = now_us();
        let before = *events;
        let mut found = |sent: u64| {
            *events += 1;
            lat.push(t.saturating_sub(sent).min(u64::from(u32::MAX)) as u32);
        };
        if r.ttfb_us.is_none() && (msg.is_text() || msg.is_binary()) {
            r.ttfb_us = Some(start.elapsed().as_micros() as u64);
        }
        match msg {
            Message::Text(text) if !proto => marks_in(text.as_bytes(), &mut found),
            Message::Binary(bytes) if proto => message_marks(&bytes, &mut found),
            Message::Text(_) | Message::Binary(_) => {
                return Err(io::Error::other("a message of the other kind"));
            }
            Message::Close(frame) => {
                return match frame {
                    Some(f) if f.code != CloseCode::Normal => Err(io::Error::other(format!(
                        "closed with {}: {}",
                        f.code, f.reason
                    ))),
                    _ => Ok(()),
                };
            }
            _ => {}
        }
        o.delivered.fetch_add(*events - before, Ordering::Relaxed);
    }
    Err(io::Error::other("the connection ended without a close"))
}

// ---- the upstream's side ---------------------------------------------------

const RUN_STARTED: &str = r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#;
const MESSAGE_START: &str = r#"{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}"#;
const MESSAGE_END: &str = r#"{"type":"TEXT_MESSAGE_END","messageId":"m1"}"#;
const RUN_FINISHED: &str = r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#;

fn proto_message(json: &str) -> io::Result<Vec<u8>> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(io::Error::other)?;
    babelgate_proto::encode_event(&v).map_err(io::Error::other)
}

/// Where the upstream's events go, and how each is written.
enum Up {
    /// HTTP, the binary transport: `out` is written at each flush.
    Proto {
        s: TcpStream,
        out: Vec<u8>,
        delta: pb::Event,
    },
    Ws {
        // Boxed: the stream is the largest part of an upstream session.
        ws: Box<WebSocketStream<TcpStream>>,
        delta: Option<pb::Event>,
    },
}

/// A delta event with its mark, written by prost into the message the
/// gateway's codec wrote for a sample delta (the same fields).
struct Delta;

impl Delta {
    fn template() -> io::Result<pb::Event> {
        let sample =
            proto_message(r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"x"}"#)?;
        pb::Event::decode(sample.as_slice()).map_err(io::Error::other)
    }

    fn stamp(ev: &mut pb::Event, pad: &str) {
        use std::fmt::Write;
        if let Some(pb::event::Event::TextMessageContent(c)) = &mut ev.event {
            c.delta.clear();
            let _ = write!(c.delta, "@{};{pad}", now_us());
        }
    }
}

fn json_delta(pad: &str) -> String {
    format!(
        r#"{{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"@{};{pad}"}}"#,
        now_us()
    )
}

impl Up {
    async fn event(&mut self, json: &str) -> io::Result<()> {
        match self {
            Up::Proto { out, .. } => {
                let m = proto_message(json)?;
                babelgate_proto::write_frame(out, &m).map_err(io::Error::other)
            }
            Up::Ws { ws, delta } => {
                let msg = match delta {
                    Some(_) => Message::binary(proto_message(json)?),
                    None => Message::text(json),
                };
                ws.feed(msg).await.map_err(io::Error::other)
            }
        }
    }

    async fn delta(&mut self, pad: &str) -> io::Result<()> {
        match self {
            Up::Proto { out, delta, .. } => {
                Delta::stamp(delta, pad);
                let len = delta.encoded_len() as u32;
                out.extend_from_slice(&len.to_be_bytes());
                delta.encode(out).map_err(io::Error::other)
            }
            Up::Ws { ws, delta } => {
                let msg = match delta {
                    Some(d) => {
                        Delta::stamp(d, pad);
                        Message::binary(d.encode_to_vec())
                    }
                    None => Message::text(json_delta(pad)),
                };
                ws.feed(msg).await.map_err(io::Error::other)
            }
        }
    }

    async fn flush(&mut self) -> io::Result<()> {
        match self {
            Up::Proto { s, out, .. } => {
                s.write_all(out).await?;
                out.clear();
                Ok(())
            }
            Up::Ws { ws, .. } => ws.flush().await.map_err(io::Error::other),
        }
    }

    /// The whole run, paced as the SSE upstream paces it: one event per tick,
    /// or (rate 0) 32 events per write.
    async fn run(&mut self, w: Workload) -> io::Result<()> {
        let pad = "x".repeat(w.pad);
        self.event(RUN_STARTED).await?;
        self.event(MESSAGE_START).await?;
        self.flush().await?;
        if w.rate > 0.0 {
            let mut tick = crate::pacer(w.rate).await;
            for _ in 0..w.events {
                tick.tick().await;
                self.delta(&pad).await?;
                self.flush().await?;
            }
        } else {
            let mut left = w.events;
            while left > 0 {
                let n = left.min(32);
                for _ in 0..n {
                    self.delta(&pad).await?;
                }
                left -= n;
                self.flush().await?;
            }
        }
        self.event(MESSAGE_END).await?;
        self.event(RUN_FINISHED).await?;
        self.flush().await
    }
}

/// Answers a request whose `Accept` asks for the binary transport.
pub fn wants_proto(head: &str) -> bool {
    header(head, "accept").is_some_and(|a| a.contains(babelgate_proto::MEDIA_TYPE))
}

/// Whether the request is a WebSocket upgrade.
pub fn is_upgrade(head: &str) -> bool {
    header(head, "upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket"))
}

pub async fn serve_proto(mut s: TcpStream, w: Workload) -> io::Result<()> {
    s.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/vnd.ag-ui.event+proto\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
    )
    .await?;
    let mut up = Up::Proto {
        s,
        out: Vec::with_capacity(16 * 1024),
        delta: Delta::template()?,
    };
    up.run(w).await?;
    if let Up::Proto { mut s, .. } = up {
        s.shutdown().await?;
    }
    Ok(())
}

/// A WebSocket session: the handshake (by hand: the head is already read),
/// the request as the first text message, the events, a normal close.
pub async fn serve_ws(mut s: TcpStream, head: &str, w: Workload) -> io::Result<()> {
    let key = header(head, "sec-websocket-key")
        .ok_or_else(|| io::Error::other("no sec-websocket-key"))?;
    let proto = header(head, "sec-websocket-protocol").is_some_and(|p| {
        p.split(',')
            .any(|p| p.trim().eq_ignore_ascii_case(WS_PROTO))
    });
    let mut resp = format!(
        "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: {}\r\n",
        derive_accept_key(key.as_bytes())
    );
    if proto {
        resp.push_str("sec-websocket-protocol: ag-ui.proto\r\n");
    }
    resp.push_str("\r\n");
    s.write_all(resp.as_bytes()).await?;
    let mut ws = WebSocketStream::from_raw_socket(s, Role::Server, None).await;
    match ws.next().await {
        Some(Ok(Message::Text(_))) => {}
        _ => return Err(io::Error::other("no request message")),
    }
    let mut up = Up::Ws {
        ws: Box::new(ws),
        delta: if proto {
            Some(Delta::template()?)
        } else {
            None
        },
    };
    up.run(w).await?;
    if let Up::Ws { mut ws, .. } = up {
        // The stream's own close (with a code), not the Sink's.
        WebSocketStream::close(
            &mut ws,
            Some(CloseFrame {
                code: CloseCode::Normal,
                reason: "".into(),
            }),
        )
        .await
        .map_err(io::Error::other)?;
        // The peer's close, briefly, so the socket is not reset under it.
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            while let Some(Ok(_)) = ws.next().await {}
        })
        .await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamped_delta_is_read_back_with_its_mark() {
        let mut d = Delta::template().unwrap();
        Delta::stamp(&mut d, "xx");
        let bytes = d.encode_to_vec();
        let mut got = Vec::new();
        message_marks(&bytes, &mut |v| got.push(v));
        assert_eq!(got.len(), 1);
        // What the gateway's codec reads from it is the event it would write.
        let v = babelgate_proto::decode_event(&bytes).unwrap();
        assert_eq!(v["type"], "TEXT_MESSAGE_CONTENT");
        assert_eq!(v["messageId"], "m1");
    }

    #[test]
    fn proto_bodies_are_framed_across_any_cut() {
        let mut body = Vec::new();
        for json in [RUN_STARTED, MESSAGE_START] {
            babelgate_proto::write_frame(&mut body, &proto_message(json).unwrap()).unwrap();
        }
        for mark in [12u64, 345] {
            let json = format!(
                r#"{{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"@{mark};x@9"}}"#
            );
            babelgate_proto::write_frame(&mut body, &proto_message(&json).unwrap()).unwrap();
        }
        babelgate_proto::write_frame(&mut body, &proto_message(RUN_FINISHED).unwrap()).unwrap();
        for cut in 0..body.len() {
            let mut m = BodyMarks::new(ClientTransport::Proto);
            let mut got = Vec::new();
            m.feed(&body[..cut], |v| got.push(v));
            m.feed(&body[cut..], |v| got.push(v));
            m.check(true).unwrap();
            assert_eq!(got, vec![12, 345], "cut {cut}");
        }
        let mut m = BodyMarks::new(ClientTransport::Proto);
        m.feed(&body[..body.len() - 1], |_| {});
        assert!(m.check(true).is_err(), "a cut message is an error");
        let mut m = BodyMarks::new(ClientTransport::Proto);
        m.feed(&[0xff, 0xff, 0xff, 0xff], |_| {});
        assert!(
            m.check(false).is_err(),
            "a length over the limit is an error"
        );
    }

    #[test]
    fn hai_text_in_a_custom_event_is_found() {
        let json = r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m1","delta":{"output":{"type":"text","content":"@1764000000000000;xxxxxxxx"}},"timestamp":1}"#;
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        let bytes = babelgate_proto::encode_event_as(&v, Some("hai")).unwrap();
        let mut got = Vec::new();
        message_marks(&bytes, &mut |v| got.push(v));
        assert_eq!(got, vec![1_764_000_000_000_000]);
    }
}
