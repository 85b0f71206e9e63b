//! Clients that stop reading (issue 37, part C): a client that accepts no
//! bytes for the route's `client_stall_timeout_ms` while output waits is a
//! client that left, on every transport: its stream ends, its upstream is
//! cancelled (or kept, with `on_disconnect = "keep"`), and
//! `babelgate_client_stalls_total` counts it. Raw sockets with a small
//! receive buffer stop reading; an HTTP/2 client keeps its stream's window
//! closed.

use crate::common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use common::{agui_hi, gateway, listener};

/// What the upstream saw.
#[derive(Default)]
struct Seen {
    /// Bytes of events written.
    written: AtomicU64,
    /// The gateway let go of the upstream request (a write failed, or the
    /// connection was closed).
    closed: AtomicBool,
}

/// An AG-UI upstream on a raw socket: one long text message, 8 KiB deltas
/// as fast as the gateway takes them; after `limit` bytes (when given) it
/// holds the connection open and says nothing.
async fn upstream(limit: Option<u64>) -> (SocketAddr, Arc<Seen>) {
    let (l, addr) = listener().await;
    let seen = Arc::new(Seen::default());
    let s = seen.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = l.accept().await {
            tokio::spawn(serve_one(sock, limit, s.clone()));
        }
    });
    (addr, seen)
}

async fn serve_one(mut sock: TcpStream, limit: Option<u64>, seen: Arc<Seen>) {
    // The request: its head and `content-length` bytes of body.
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let Ok(n) = sock.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
        if let Some(end) = text.find("\r\n\r\n") {
            let len = text[..end]
                .lines()
                .find_map(|l| l.strip_prefix("content-length:")?.trim().parse().ok())
                .unwrap_or(0usize);
            if got.len() >= end + 4 + len {
                break;
            }
        }
    }
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
        data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n\
        data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m1\",\"role\":\"assistant\"}\n\n";
    let delta = format!(
        "data: {{\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m1\",\"delta\":\"{}\"}}\n\n",
        "x".repeat(8 * 1024)
    );
    if sock.write_all(head.as_bytes()).await.is_err() {
        seen.closed.store(true, Ordering::SeqCst);
        return;
    }
    loop {
        if limit.is_some_and(|l| seen.written.load(Ordering::SeqCst) >= l) {
            // Returns when the gateway closes its side.
            let _ = sock.read(&mut buf).await;
            seen.closed.store(true, Ordering::SeqCst);
            return;
        }
        if sock.write_all(delta.as_bytes()).await.is_err() {
            seen.closed.store(true, Ordering::SeqCst);
            return;
        }
        seen.written.fetch_add(delta.len() as u64, Ordering::SeqCst);
    }
}

/// A gateway with one AG-UI route `/r` to `up`, whose clients may take no
/// bytes for 300 ms.
async fn stall_gateway(
    up: SocketAddr,
    extra: &str,
) -> (SocketAddr, Arc<babelgate::server::Gateway>) {
    gateway(&format!(
        "[[routes]]\npath = \"/r\"\nclient = \"ag-ui\"\nupstream = \"http://{up}/agent\"\nupstream_protocol = \"ag-ui\"\nclient_stall_timeout_ms = 300\n{extra}"
    ))
    .await
}

/// A client socket whose receive buffer is small, so that a client that
/// stops reading blocks the gateway's writes soon.
async fn small_client(gw: SocketAddr) -> TcpStream {
    let s = TcpSocket::new_v4().unwrap();
    s.set_recv_buffer_size(4096).unwrap();
    s.connect(gw).await.unwrap()
}

/// Waits (generously: the machine is loaded) until `cond` holds.
async fn eventually(what: &str, secs: u64, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {secs} s: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn stalls(gw: &babelgate::server::Gateway, reason: &str) -> bool {
    gw.metrics().render().contains(&format!(
        "babelgate_client_stalls_total{{reason=\"{reason}\"}} 1"
    ))
}

/// The largest a kernel lets a TCP buffer grow to by itself (`tcp_wmem`'s
/// third field), or `fallback` where that cannot be read.
fn tcp_buffer_max(which: &str, fallback: u64) -> u64 {
    std::fs::read_to_string(format!("/proc/sys/net/ipv4/{which}"))
        .ok()
        .and_then(|s| s.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or(fallback)
}

/// Sends the AG-UI request for thread `t` on a raw HTTP/1.1 connection:
/// whole in one write (the first-request path takes it) or with a chunked body
/// (hyper's HTTP/1 server does).
async fn post_raw(c: &mut TcpStream, thread: &str, chunked: bool) {
    let body = agui_hi(thread);
    let req = if chunked {
        let mut r = b"POST /r HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        r.extend_from_slice(format!("{:x}\r\n", body.len()).as_bytes());
        r.extend_from_slice(&body);
        r.extend_from_slice(b"\r\n0\r\n\r\n");
        r
    } else {
        let mut r = format!(
            "POST /r HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(&body);
        r
    };
    c.write_all(&req).await.unwrap();
    // The stream has begun.
    let mut first = vec![0u8; 1024];
    let n = c.read(&mut first).await.unwrap();
    assert!(
        first[..n].starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&first[..n])
    );
}

/// Reads what is left: the stream must come to an end (the gateway closed
/// the connection), not hang.
async fn ends(c: &mut TcpStream) {
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), c.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the connection is still open");
}

async fn sse_client_that_stops_reading(chunked: bool) {
    let (up, seen) = upstream(None).await;
    let (addr, gw) = stall_gateway(up, "").await;
    let mut c = small_client(addr).await;
    post_raw(&mut c, "t-stall", chunked).await;
    // The client reads nothing more; the upstream goes on writing until
    // the buffers are full, then the deadline runs.
    eventually("the upstream is cancelled", 30, || {
        seen.closed.load(Ordering::SeqCst)
    })
    .await;
    assert!(stalls(&gw, "socket"), "{}", gw.metrics().render());
    let m = gw.metrics().render();
    assert!(
        m.contains("babelgate_requests_total{route=\"/r\",status=\"499\"} 1"),
        "counted as a client that left: {m}"
    );
    ends(&mut c).await;
}

#[tokio::test]
async fn an_sse_client_that_stops_reading_is_given_up_on_and_its_upstream_cancelled() {
    sse_client_that_stops_reading(false).await;
}

#[tokio::test]
async fn the_same_on_a_connection_served_by_hyper() {
    sse_client_that_stops_reading(true).await;
}

#[tokio::test]
async fn the_same_over_tls() {
    use tokio_rustls::rustls;
    let (up, seen) = upstream(None).await;
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.path().join("key.pem"), cert.key_pair.serialize_pem()).unwrap();
    let toml = format!(
        "[server]\ntls = {{ cert = \"cert.pem\", key = \"key.pem\" }}\n[[routes]]\npath = \"/r\"\nclient = \"ag-ui\"\nupstream = \"http://{up}/agent\"\nupstream_protocol = \"ag-ui\"\nclient_stall_timeout_ms = 300\n"
    );
    let config = babelgate::config::Config::parse_with(&toml, dir.path(), &|_| None).unwrap();
    let acceptor = babelgate::tls::acceptor(config.tls.as_ref().unwrap()).unwrap();
    let (l, addr) = listener().await;
    let gw = Arc::new(babelgate::server::Gateway::new(config).unwrap());
    tokio::spawn(
        gw.clone()
            .serve_until(l, Some(acceptor), std::future::pending()),
    );
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(client))
        .connect(name, small_client(addr).await)
        .await
        .unwrap();
    let body = agui_hi("t-tls");
    let mut req = format!(
        "POST /r HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(&body);
    tls.write_all(&req).await.unwrap();
    let mut first = vec![0u8; 1024];
    let n = tls.read(&mut first).await.unwrap();
    assert!(first[..n].starts_with(b"HTTP/1.1 200"));
    eventually("the upstream is cancelled", 30, || {
        seen.closed.load(Ordering::SeqCst)
    })
    .await;
    assert!(stalls(&gw, "socket"), "{}", gw.metrics().render());
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), tls.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the connection is still open");
}

#[tokio::test]
async fn a_kept_run_goes_on_without_a_client_that_stopped_reading() {
    // Enough to fill what lies between the gateway and the client (the
    // gateway's send buffer may grow to the sysctl's maximum; the client's
    // receive buffer is pinned small), then the run goes on (silently)
    // until the gateway lets go.
    let send_max = tcp_buffer_max("tcp_wmem", 4 << 20);
    let (up, seen) = upstream(Some((4 * send_max).max(16 << 20))).await;
    let (addr, gw) = stall_gateway(up, "on_disconnect = \"keep\"\n").await;
    let mut c = small_client(addr).await;
    post_raw(&mut c, "t-keep", false).await;
    eventually("the stalled client is given up on", 30, || {
        stalls(&gw, "socket")
    })
    .await;
    ends(&mut c).await;
    // The run is still going, and can be resumed.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !seen.closed.load(Ordering::SeqCst),
        "the upstream was cancelled on a keep route"
    );
    let mut resumed = reqwest::get(format!("http://{addr}/r/t-keep/stream"))
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200, "the run can be resumed");
    let chunk = tokio::time::timeout(Duration::from_secs(30), resumed.chunk())
        .await
        .expect("the resumed stream sends")
        .unwrap()
        .unwrap();
    assert!(!chunk.is_empty());
}

#[tokio::test]
async fn with_the_deadline_off_a_client_that_stops_reading_is_waited_for() {
    let (up, seen) = upstream(None).await;
    let (addr, gw) = gateway(&format!(
        "[[routes]]\npath = \"/r\"\nclient = \"ag-ui\"\nupstream = \"http://{up}/agent\"\nupstream_protocol = \"ag-ui\"\nclient_stall_timeout_ms = 0\n"
    ))
    .await;
    let mut c = small_client(addr).await;
    post_raw(&mut c, "t-off", false).await;
    // The writes stall (nothing written for a while), then it is still open
    // well past the deadline the other tests use.
    let mut last = u64::MAX;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = seen.written.load(Ordering::SeqCst);
        if now == last {
            break;
        }
        last = now;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!seen.closed.load(Ordering::SeqCst));
    assert!(!gw.metrics().render().contains("client_stalls_total{"));
    // And it goes on when the client reads again.
    let mut buf = vec![0u8; 64 * 1024];
    while seen.written.load(Ordering::SeqCst) == last {
        let n = tokio::time::timeout(Duration::from_secs(30), c.read(&mut buf))
            .await
            .expect("the stream goes on")
            .unwrap();
        assert!(n > 0, "the stream ended");
    }
}

#[tokio::test]
async fn a_websocket_client_that_stops_reading_is_given_up_on() {
    let (up, seen) = upstream(None).await;
    let (addr, gw) = stall_gateway(up, "").await;
    let sock = small_client(addr).await;
    let (mut ws, resp) = tokio_tungstenite::client_async(format!("ws://{addr}/r"), sock)
        .await
        .unwrap();
    assert_eq!(resp.status(), 101);
    ws.send(WsMessage::text(String::from_utf8(agui_hi("t-ws")).unwrap()))
        .await
        .unwrap();
    let first = ws.next().await.unwrap().unwrap();
    assert!(first.is_text(), "{first:?}");
    eventually("the upstream is cancelled", 30, || {
        seen.closed.load(Ordering::SeqCst)
    })
    .await;
    assert!(stalls(&gw, "socket"), "{}", gw.metrics().render());
    // What the kernel held comes, then the end.
    let end = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(Ok(m)) = ws.next().await {
            if m.is_close() {
                break;
            }
        }
    })
    .await;
    assert!(end.is_ok(), "the WebSocket is still open");
}

#[tokio::test]
async fn an_http2_stream_whose_window_stays_closed_is_given_up_on() {
    let (up, seen) = upstream(None).await;
    let (addr, gw) = stall_gateway(up, "").await;
    let io = hyper_util::rt::TokioIo::new(TcpStream::connect(addr).await.unwrap());
    // A small window that the client never opens again: it does not read
    // the body (hyper gives capacity back only as the body is read).
    let (mut send, conn) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .initial_stream_window_size(16 * 1024)
            .handshake::<_, http_body_util::Full<bytes::Bytes>>(io)
            .await
            .unwrap();
    tokio::spawn(conn);
    let req = http::Request::post(format!("http://{addr}/r"))
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from(agui_hi(
            "t-h2",
        ))))
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    eventually("the upstream is cancelled", 30, || {
        seen.closed.load(Ordering::SeqCst)
    })
    .await;
    assert!(stalls(&gw, "flow_control"), "{}", gw.metrics().render());
    // Read now: what was sent, then a reset, not a clean end.
    let read = tokio::time::timeout(Duration::from_secs(30), resp.into_body().collect()).await;
    let read = read.expect("the stream is still open");
    assert!(read.is_err(), "the stream ended as if complete");
    // The connection still serves other streams.
    let health = http::Request::get(format!("http://{addr}/healthz"))
        .body(http_body_util::Full::default())
        .unwrap();
    let r = tokio::time::timeout(Duration::from_secs(30), send.send_request(health))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.status(), 200);
}

// ---- other waits on a peer ------------------------------------------------

#[tokio::test]
async fn a_websocket_upstream_that_reads_no_request_is_a_504_in_time() {
    // It accepts the WebSocket, then reads nothing: a request larger than
    // the sockets' buffers cannot be sent.
    let s = TcpSocket::new_v4().unwrap();
    s.set_recv_buffer_size(4096).unwrap();
    s.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let up = s.local_addr().unwrap();
    let l = s.listen(8).unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = l.accept().await {
            if let Ok(ws) = tokio_tungstenite::accept_async(sock).await {
                held.push(ws);
            }
        }
    });
    let (addr, _gw) = gateway(&format!(
        "[[routes]]\npath = \"/r\"\nclient = \"ag-ui\"\nupstream = \"ws://{up}/agent\"\nupstream_protocol = \"ag-ui\"\nmax_body_bytes = 67108864\nresponse_timeout_ms = 1000\n"
    ))
    .await;
    let run = babelgate_core::request::RunRequest {
        thread_id: "t-big".into(),
        run_id: "run-1".into(),
        messages: vec![babelgate_core::request::Message::text_message(
            "u1",
            babelgate_core::Role::User,
            "x".repeat(24 << 20),
        )],
        ..Default::default()
    };
    let body = babelgate::registry::requests(babelgate_core::Dialect::AgUi)
        .build_request(&run)
        .unwrap();
    let send = reqwest::Client::new()
        .post(format!("http://{addr}/r"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).unwrap())
        .send();
    let r = tokio::time::timeout(Duration::from_secs(60), send)
        .await
        .expect("the gateway still waits on the upstream")
        .unwrap();
    assert_eq!(r.status(), 504);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "upstream_timeout");
}
