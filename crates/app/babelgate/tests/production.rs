//! Production proxying over real sockets: upstream failures, bad client
//! input, disconnects and backpressure, security, TLS and observability.
//! Reload, shutdown and JSON logs of the binary are in tests/lifecycle.rs.

use crate::common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use babelgate::config::Config;
use babelgate::demo;
use babelgate::server::Gateway;
use babelgate_core::Dialect;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use common::listener;

async fn start_gateway(toml: &str) -> (SocketAddr, Arc<Gateway>) {
    let config = Config::parse(toml).unwrap_or_else(|e| panic!("{e:?}"));
    let (l, a) = listener().await;
    let gw = Arc::new(Gateway::new(config).unwrap());
    tokio::spawn(gw.clone().serve(l));
    (a, gw)
}

fn route(path: &str, client: Dialect, upstream: SocketAddr, protocol: Dialect) -> String {
    format!(
        "[[routes]]\npath = \"{path}\"\nclient = \"{client}\"\nupstream = \"http://{upstream}/agent\"\nupstream_protocol = \"{protocol}\"\n"
    )
}

fn body(dialect: Dialect, text: &str) -> Vec<u8> {
    common::run_body(dialect, "thread-1", text)
}

use common::{post_json as post, sse_values as data_lines, types};

// ---- a scripted upstream ---------------------------------------------------

#[derive(Clone)]
enum Step {
    Write(String),
    /// As `Write`, for big payloads written many times.
    Shared(Arc<str>),
    Sleep(u64),
    /// Keep the connection open and say nothing.
    Hang,
}

/// What the scripted upstream saw.
#[derive(Default)]
struct Seen {
    requests: Mutex<Vec<String>>,
    /// Bytes of the response body written so far.
    written: AtomicU64,
    /// A write failed or the peer closed: the gateway let go.
    closed: AtomicBool,
}

/// An upstream on a raw socket: reads one request, answers `head` then the
/// steps. Nothing here is an HTTP library, so it can misbehave on purpose.
async fn scripted(head: &str, steps: Vec<Step>) -> (SocketAddr, Arc<Seen>) {
    let (l, addr) = listener().await;
    scripted_on(l, addr, head, steps)
}

fn scripted_on(
    l: TcpListener,
    addr: SocketAddr,
    head: &str,
    steps: Vec<Step>,
) -> (SocketAddr, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let head = head.to_string();
    let s = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = l.accept().await else {
                return;
            };
            let head = head.clone();
            let steps = steps.clone();
            let seen = s.clone();
            tokio::spawn(async move {
                let req = read_request(&mut sock).await;
                seen.requests.lock().unwrap().push(req);
                if sock.write_all(head.as_bytes()).await.is_err() {
                    seen.closed.store(true, Ordering::SeqCst);
                    return;
                }
                for step in steps {
                    let step = match step {
                        Step::Shared(chunk) => Step::Write(chunk.to_string()),
                        step => step,
                    };
                    match step {
                        Step::Shared(_) => unreachable!(),
                        Step::Write(chunk) => {
                            // Chunked framing, so that a cut is visible as one.
                            let framed = format!("{:x}\r\n{chunk}\r\n", chunk.len());
                            if sock.write_all(framed.as_bytes()).await.is_err() {
                                seen.closed.store(true, Ordering::SeqCst);
                                return;
                            }
                            seen.written.fetch_add(chunk.len() as u64, Ordering::SeqCst);
                        }
                        Step::Sleep(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                        Step::Hang => {
                            let mut buf = [0u8; 64];
                            // Returns when the gateway closes its side.
                            let _ = sock.read(&mut buf).await;
                            seen.closed.store(true, Ordering::SeqCst);
                            return;
                        }
                    }
                }
                // Dropping the socket without the last chunk: an abrupt close.
            });
        }
    });
    (addr, seen)
}

async fn read_request(sock: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = sock.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                break;
            }
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

fn agui(json: &str) -> Step {
    Step::Write(format!("data: {json}\n\n"))
}

fn started_and_text() -> Vec<Step> {
    vec![
        agui(r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#),
        agui(r#"{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}"#),
        agui(r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"partial answer"}"#),
    ]
}

/// Posts to a gateway route in front of `upstream` and returns the status
/// and the whole body, which must end cleanly.
async fn through(client: Dialect, upstream: SocketAddr, extra: &str) -> (u16, Vec<u8>) {
    let (status, body, broke_off) = through_raw(client, upstream, extra).await;
    assert!(!broke_off, "the body broke off");
    (status, body)
}

/// Like [`through`]; also whether the body broke off (a transport error at
/// its end) rather than ending cleanly.
async fn through_raw(client: Dialect, upstream: SocketAddr, extra: &str) -> (u16, Vec<u8>, bool) {
    let (gw, _) = start_gateway(&(route("/r", client, upstream, Dialect::AgUi) + extra)).await;
    tokio::time::timeout(Duration::from_secs(20), async {
        let mut r = post(gw, "/r", body(client, "hi")).send().await.unwrap();
        let status = r.status().as_u16();
        let mut body = Vec::new();
        loop {
            match r.chunk().await {
                Ok(Some(c)) => body.extend_from_slice(&c),
                Ok(None) => return (status, body, false),
                Err(_) => return (status, body, true),
            }
        }
    })
    .await
    .expect("the gateway answers and ends the stream")
}

// ---- 1. upstream failures ---------------------------------------------------

#[tokio::test]
async fn connection_refused_is_502_json() {
    let (l, dead) = listener().await;
    drop(l);
    let (status, body) = through(Dialect::Vercel, dead, "").await;
    assert_eq!(status, 502);
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["error"]["type"], "upstream");
    assert_eq!(v["error"]["code"], "upstream_unreachable");
}

#[tokio::test]
async fn connect_timeout_is_504_json() {
    // A listener with a backlog of one that never accepts: once its queue is
    // full the kernel ignores new SYNs, so connecting hangs.
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let full = sock.listen(1).unwrap();
    let addr = full.local_addr().unwrap();
    let mut fillers = Vec::new();
    for _ in 0..8 {
        if let Ok(Ok(s)) =
            tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr)).await
        {
            fillers.push(s);
        }
    }
    let (status, body) = through(Dialect::AgUi, addr, "connect_timeout_ms = 300\n").await;
    assert_eq!(status, 504, "{}", String::from_utf8_lossy(&body));
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["error"]["code"], "upstream_timeout");
    drop(full);
}

#[tokio::test]
async fn a_non_2xx_status_becomes_502_without_the_upstream_body() {
    let (up, _) = scripted(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: 19\r\n\r\nmodel is overloaded",
        vec![],
    )
    .await;
    let (status, body) = through(Dialect::Hai, up, "").await;
    assert_eq!(status, 502);
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["error"]["code"], "upstream_status");
    let msg = v["error"]["message"].as_str().unwrap();
    // The body may tell internals: it goes to the log, not to the client.
    assert!(msg.contains("503") && !msg.contains("overloaded"), "{msg}");
}

#[tokio::test]
async fn a_wrong_content_type_is_502() {
    let (up, _) = scripted(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}",
        vec![],
    )
    .await;
    let (status, body) = through(Dialect::AgKit, up, "").await;
    assert_eq!(status, 502);
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["error"]["code"], "upstream_content_type");
}

/// After the stream started: the client dialect's own error, with the open
/// message closed first, then the end of the stream.
async fn fails_mid_stream(steps: Vec<Step>, extra: &str, code: &str) {
    let (up, _) = scripted(SSE_HEAD, steps).await;
    // Vercel: text-end, error, finish, [DONE].
    let (status, bytes) = through(Dialect::Vercel, up, extra).await;
    assert_eq!(status, 200);
    let v = data_lines(&bytes);
    let t = types(&v);
    let err = t
        .iter()
        .position(|x| x == "error")
        .unwrap_or_else(|| panic!("{t:?}"));
    assert!(t[..err].contains(&"text-end".to_string()), "{t:?}");
    assert_eq!(
        &t[err..],
        ["error", "finish-step", "finish", "[DONE]"],
        "{t:?}"
    );
    assert_eq!(v[err + 2]["finishReason"], "error");
    assert!(
        v[err]["errorText"].as_str().unwrap().len() > 10,
        "{:?}",
        v[err]
    );
    // AG-UI: TEXT_MESSAGE_END then RUN_ERROR, the last event.
    let (_, bytes) = through(Dialect::AgUi, up, extra).await;
    let v = data_lines(&bytes);
    let t = types(&v);
    assert_eq!(
        &t[t.len() - 2..],
        ["TEXT_MESSAGE_END", "RUN_ERROR"],
        "{t:?}"
    );
    assert_eq!(v.last().unwrap()["code"], code);
    // HAI: RUN_ERROR last.
    let (_, bytes) = through(Dialect::Hai, up, extra).await;
    let t = types(&data_lines(&bytes));
    assert_eq!(t.last().unwrap(), "RUN_ERROR", "{t:?}");
    // AG-Kit: the error frame last, no [DONE], and the body breaks off:
    // the legacy client shows nothing else as a failure.
    let (_, bytes, broke_off) = through_raw(Dialect::AgKit, up, extra).await;
    let t = types(&data_lines(&bytes));
    assert_eq!(t.last().map(String::as_str), Some("error"), "{t:?}");
    assert!(!t.contains(&"[DONE]".to_string()), "{t:?}");
    assert!(broke_off, "the AG-Kit body must break off after a failure");
}

#[tokio::test]
async fn a_malformed_json_line_ends_the_stream_with_the_dialects_error() {
    let mut steps = started_and_text();
    steps.push(Step::Write(
        "data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"mess\n\n".into(),
    ));
    steps.push(Step::Hang);
    fails_mid_stream(steps, "", "upstream_malformed").await;
}

#[tokio::test]
async fn an_abrupt_close_mid_message_ends_the_stream_with_the_dialects_error() {
    // The socket closes without the chunked terminator.
    fails_mid_stream(started_and_text(), "", "upstream_disconnected").await;
}

#[tokio::test]
async fn an_idle_upstream_ends_the_stream_with_the_dialects_error() {
    let mut steps = started_and_text();
    steps.push(Step::Hang);
    fails_mid_stream(steps, "idle_timeout_ms = 300\n", "upstream_idle").await;
}

#[tokio::test]
async fn an_unknown_event_passes_without_error() {
    let mut steps = started_and_text();
    steps.push(agui(r#"{"type":"SOMETHING_NEW","detail":{"x":1}}"#));
    steps.push(agui(r#"{"type":"TEXT_MESSAGE_END","messageId":"m1"}"#));
    steps.push(agui(
        r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#,
    ));
    steps.push(Step::Write(String::new())); // the chunked terminator
    let (up, _) = scripted(SSE_HEAD, steps).await;
    let (_, bytes) = through(Dialect::AgUi, up, "").await;
    let v = data_lines(&bytes);
    assert!(v.iter().any(|e| e["type"] == "SOMETHING_NEW"), "{v:?}");
    assert_eq!(types(&v).last().unwrap(), "RUN_FINISHED");
    let (_, bytes) = through(Dialect::Vercel, up, "").await;
    let t = types(&data_lines(&bytes));
    assert!(!t.contains(&"error".to_string()), "{t:?}");
    assert_eq!(&t[t.len() - 2..], ["finish", "[DONE]"]);
}

/// An AG-Kit client gets only the frame types the AG-Kit server declares:
/// what AG-Kit cannot say (a step here) is dropped and counted; a route's
/// `extension_frames = true` sends it as an extension frame instead.
#[tokio::test]
async fn agkit_clients_get_declared_frames_unless_the_route_opts_in() {
    let mut steps = vec![
        agui(r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#),
        agui(r#"{"type":"STEP_STARTED","stepName":"plan"}"#),
        agui(r#"{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}"#),
        agui(r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"hi"}"#),
        agui(r#"{"type":"TEXT_MESSAGE_END","messageId":"m1"}"#),
        agui(r#"{"type":"STEP_FINISHED","stepName":"plan"}"#),
        agui(r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#),
    ];
    steps.push(Step::Write(String::new()));
    let (up, _) = scripted(SSE_HEAD, steps).await;
    for (extra, want_steps) in [("", false), ("extension_frames = true\n", true)] {
        let (gw, _) =
            start_gateway(&(route("/r", Dialect::AgKit, up, Dialect::AgUi) + extra)).await;
        let r = post(gw, "/r", body(Dialect::AgKit, "hi"))
            .send()
            .await
            .unwrap();
        let t = types(&data_lines(&r.bytes().await.unwrap()));
        assert_eq!(
            t.contains(&"step-started".to_string()),
            want_steps,
            "{extra:?}: {t:?}"
        );
        assert_eq!(t.last().map(String::as_str), Some("[DONE]"), "{t:?}");
        let metrics = reqwest::get(format!("http://{gw}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let counted =
            metrics.contains("babelgate_events_dropped_total{from=\"ag-ui\",to=\"agkit\"} 2");
        assert_eq!(counted, !want_steps, "{extra:?}: {metrics}");
    }
    // Only AG-Kit clients have extension frames: anywhere else it is an error.
    let e = Config::parse(
        &(route("/r", Dialect::Vercel, up, Dialect::AgUi) + "extension_frames = true\n"),
    )
    .unwrap_err();
    assert!(format!("{e:?}").contains("only AG-Kit clients"), "{e:?}");
}

// ---- 2. bad client input ------------------------------------------------------

#[tokio::test]
async fn bad_client_input_gets_4xx_json_and_the_next_request_is_served() {
    let (l, agent) = listener().await;
    tokio::spawn(demo::serve(l, Dialect::AgUi, Duration::ZERO));
    let (gw, _) = start_gateway(
        &(route("/chat", Dialect::Vercel, agent, Dialect::AgUi) + "max_body_bytes = 1000\n"),
    )
    .await;
    let client = reqwest::Client::new();
    let check = |status: u16, code: &'static str| {
        move |r: (u16, Value)| {
            assert_eq!(r.0, status, "{}", r.1);
            assert_eq!(r.1["error"]["code"], code, "{}", r.1);
            assert_eq!(r.1["error"]["type"], "client");
            r.1
        }
    };
    async fn ask(r: reqwest::RequestBuilder) -> (u16, Value) {
        let r = r.send().await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap())
    }
    check(400, "invalid_request")(ask(post(gw, "/chat", b"{\"id\": ".to_vec())).await);
    let v = check(400, "invalid_request")(
        ask(post(
            gw,
            "/chat",
            br#"{"id":"c","messages":"hello"}"#.to_vec(),
        ))
        .await,
    );
    assert_eq!(
        v["error"]["field"], "messages",
        "the message names the field: {v}"
    );
    check(405, "method_not_allowed")(ask(client.put(format!("http://{gw}/chat"))).await);
    check(404, "no_route")(ask(client.post(format!("http://{gw}/elsewhere"))).await);
    check(413, "body_too_large")(ask(post(gw, "/chat", vec![b' '; 5000])).await);
    // Each way past the 1000-byte limit gets the 413 and its JSON body, not a
    // reset connection: a declared length, a chunked body with no length,
    // and a chunked body that trickles in and never ends (the answer must
    // come once the limit is passed, not when the body ends).
    let head = |framing: &str| {
        format!("POST /chat HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n{framing}\r\n")
    };
    let chunk = |n: usize| format!("{n:x}\r\n{}\r\n", " ".repeat(n)).into_bytes();
    let declared = raw_exchange(gw, head("content-length: 1500\r\n"), vec![vec![b' '; 1500]]);
    check(413, "body_too_large")(json_answer(declared.await));
    let whole_chunked = vec![[chunk(1500), b"0\r\n\r\n".to_vec()].concat()];
    let chunked = raw_exchange(gw, head("transfer-encoding: chunked\r\n"), whole_chunked);
    check(413, "body_too_large")(json_answer(chunked.await));
    let trickle = raw_exchange(
        gw,
        head("transfer-encoding: chunked\r\n"),
        vec![chunk(100); 11],
    );
    check(413, "body_too_large")(json_answer(trickle.await));
    let r = post(gw, "/chat", body(Dialect::Vercel, "hello"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = String::from_utf8_lossy(&r.bytes().await.unwrap()).into_owned();
    assert!(
        text.contains(": hell") && text.contains("\"finish\""),
        "{text}"
    );
}

/// Writes `head` and then each body piece (a short pause between them, so
/// they arrive apart) on a raw socket, never more, and reads the answer: the
/// status line's code and the body. Write errors are ignored: the answer is
/// what matters, and it must still be readable.
async fn raw_exchange(gw: SocketAddr, head: String, pieces: Vec<Vec<u8>>) -> (u16, Vec<u8>) {
    let exchange = async {
        let mut s = TcpStream::connect(gw).await.unwrap();
        let _ = s.write_all(head.as_bytes()).await;
        for piece in pieces {
            tokio::time::sleep(Duration::from_millis(5)).await;
            if s.write_all(&piece).await.is_err() {
                break;
            }
        }
        read_answer(&mut s).await
    };
    tokio::time::timeout(Duration::from_secs(20), exchange)
        .await
        .expect("the gateway answers once the body passes the limit")
}

/// One HTTP/1.1 response off `s`: (status, body), the body by content-length,
/// chunked framing or the end of the connection.
async fn read_answer(s: &mut TcpStream) -> (u16, Vec<u8>) {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let end = loop {
        if let Some(end) = find(&buf, b"\r\n\r\n") {
            break end;
        }
        let n = s.read(&mut tmp).await.expect("an answer, not a reset");
        assert!(
            n > 0,
            "closed before a response head: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {head}"));
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse::<usize>().unwrap());
    let mut body = buf[end + 4..].to_vec();
    let complete = |b: &[u8]| match length {
        Some(n) => b.len() >= n,
        None if head.contains("transfer-encoding: chunked") => b.ends_with(b"0\r\n\r\n"),
        None => false,
    };
    while !complete(&body) {
        match s.read(&mut tmp).await {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&tmp[..n]),
        }
    }
    if length.is_none() && head.contains("transfer-encoding: chunked") {
        body = unchunk(&body);
    }
    (status, body)
}

fn unchunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(i) = find(b, b"\r\n") {
        let n = usize::from_str_radix(std::str::from_utf8(&b[..i]).unwrap().trim(), 16).unwrap();
        if n == 0 || b.len() < i + 2 + n {
            break;
        }
        out.extend_from_slice(&b[i + 2..i + 2 + n]);
        b = &b[(i + 4 + n).min(b.len())..];
    }
    out
}

/// (status, JSON body) of a raw answer; a body that is not JSON fails.
fn json_answer((status, body): (u16, Vec<u8>)) -> (u16, Value) {
    let v = serde_json::from_slice(&body).unwrap_or_else(|e| {
        panic!(
            "{status}: body is not JSON ({e}): {:?}",
            String::from_utf8_lossy(&body)
        )
    });
    (status, v)
}

#[tokio::test]
async fn headers_that_arrive_too_slowly_are_cut_off() {
    let (l, agent) = listener().await;
    tokio::spawn(demo::serve(l, Dialect::AgUi, Duration::ZERO));
    let (gw, _) = start_gateway(&format!(
        "[server]\nheader_read_timeout_ms = 200\n{}",
        route("/chat", Dialect::AgUi, agent, Dialect::AgUi)
    ))
    .await;
    let mut slow = TcpStream::connect(gw).await.unwrap();
    slow.write_all(b"POST /chat HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    // The gateway closes the connection (possibly after a 408) instead of
    // waiting forever for the rest of the head.
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(10), slow.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "connection still open");
    let r = post(gw, "/chat", body(Dialect::AgUi, "hello"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

// ---- 3. disconnects and backpressure ------------------------------------------

#[tokio::test]
async fn a_client_that_goes_away_cancels_the_upstream_and_counts_as_499() {
    let mut steps = vec![agui(r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#)];
    for i in 0..600 {
        steps.push(Step::Sleep(50));
        steps.push(agui(&format!(
            r#"{{"type":"CUSTOM","name":"tick","value":{i}}}"#
        )));
    }
    let (up, seen) = scripted(SSE_HEAD, steps).await;
    let (gw, _) = start_gateway(&route("/r", Dialect::AgUi, up, Dialect::AgUi)).await;
    let mut r = post(gw, "/r", body(Dialect::AgUi, "hi"))
        .send()
        .await
        .unwrap();
    assert!(r.chunk().await.unwrap().is_some());
    drop(r);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !seen.closed.load(Ordering::SeqCst) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the upstream connection was never closed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let metrics = reqwest::get(format!("http://{gw}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(r#"babelgate_requests_total{route="/r",status="499"} 1"#),
        "{metrics}"
    );
}

/// The largest a kernel lets a TCP buffer grow to by itself (`tcp_rmem` or
/// `tcp_wmem`, third field), or `fallback` where that cannot be read.
fn tcp_buffer_max(which: &str, fallback: usize) -> usize {
    std::fs::read_to_string(format!("/proc/sys/net/ipv4/{which}"))
        .ok()
        .and_then(|s| s.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or(fallback)
}

#[tokio::test]
async fn a_slow_client_pauses_the_upstream_instead_of_growing_memory() {
    // The response body runs the stream's pump, which hands it one output
    // chunk at a time (one per upstream read that completes an event), and
    // hyper polls the body only while it can write. With 1 MiB events each
    // chunk is 1 MiB, so what the gateway holds dominates what a stalled
    // stream holds: the kernel buffers the test does not fix (the gateway's
    // own sockets) are bounded by the sysctls read below, the two it does
    // (upstream send, client receive) are pinned small. A queue of 256
    // chunks lets the upstream write all of it and fails here.
    const EVENT: usize = 1 << 20;
    const EVENTS: usize = 96;
    const QUEUE: usize = 1;
    let event: Arc<str> = format!(
        "data: {{\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m1\",\"delta\":\"{}\"}}\n\n",
        "x".repeat(EVENT - 80)
    )
    .into();
    let mut steps = started_and_text();
    steps.extend((0..EVENTS).map(|_| Step::Shared(event.clone())));
    let small = 64 * 1024;
    let up_socket = tokio::net::TcpSocket::new_v4().unwrap();
    up_socket.set_send_buffer_size(small).unwrap();
    up_socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let up_addr = up_socket.local_addr().unwrap();
    let (up, seen) = scripted_on(up_socket.listen(8).unwrap(), up_addr, SSE_HEAD, steps);
    let (gw, _) = start_gateway(&route("/r", Dialect::AgUi, up, Dialect::AgUi)).await;

    let client = tokio::net::TcpSocket::new_v4().unwrap();
    client.set_recv_buffer_size(small).unwrap();
    let mut c = client.connect(gw).await.unwrap();
    let req = body(Dialect::AgUi, "hi");
    c.write_all(
        format!(
            "POST /r HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            req.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    c.write_all(&req).await.unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = c.read(&mut buf).await.unwrap();
    assert!(got > 0);

    // The client now reads nothing. Wait until the upstream's writes stall
    // (unchanged over three polls; the bound below only matters on failure).
    let (mut last, mut still) = (0, 0);
    for _ in 0..150 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = seen.written.load(Ordering::SeqCst);
        still = if now == last && now > 0 { still + 1 } else { 0 };
        if still == 3 {
            break;
        }
        last = now;
    }
    let written = seen.written.load(Ordering::SeqCst) as usize;
    let kernel = tcp_buffer_max("tcp_rmem", 6 << 20) + tcp_buffer_max("tcp_wmem", 4 << 20);
    // The chunk handed over, plus one being translated, one waiting to be
    // handed over, one in the HTTP writer, and the small pinned buffers.
    let bound = (QUEUE + 3) * EVENT + kernel + 4 * small as usize;
    assert!(
        written <= bound,
        "the upstream wrote {written} bytes to a client that reads nothing (bound {bound})"
    );
    assert!(
        bound < EVENTS * EVENT,
        "the test must send more than the bound to mean anything"
    );
    // And the whole stream arrives when the client reads again.
    let all = tokio::time::timeout(Duration::from_secs(120), async {
        while got < EVENTS * EVENT {
            match c.read(&mut buf).await.unwrap() {
                0 => break,
                n => got += n,
            }
        }
        got
    })
    .await
    .expect("the stream goes on when the client reads again");
    assert!(all >= EVENTS * EVENT, "only {all} bytes after resuming");
}

// ---- 5. security ----------------------------------------------------------------

#[tokio::test]
async fn routes_with_keys_refuse_requests_without_them() {
    let (l, agent) = listener().await;
    tokio::spawn(demo::serve(l, Dialect::AgUi, Duration::ZERO));
    let dir = tempdir();
    std::fs::write(dir.join("keys"), "# team keys\nfile-key-1\n\nfile-key-2\n").unwrap();
    let toml = format!(
        "{}[routes.auth]\nbearer_env = [\"BG_TEST_KEY\"]\nbearer_files = [\"{}\"]\n",
        route("/chat", Dialect::AgUi, agent, Dialect::AgUi),
        dir.join("keys").display()
    );
    let env = |k: &str| (k == "BG_TEST_KEY").then(|| "env-key".to_string());
    let config = Config::parse_with(&toml, &dir, &env).unwrap();
    let (l, gw) = listener().await;
    tokio::spawn(Arc::new(Gateway::new(config).unwrap()).serve(l));
    let ask = |key: Option<&'static str>| {
        let mut r = post(gw, "/chat", body(Dialect::AgUi, "hi"));
        if let Some(k) = key {
            r = r.header("authorization", format!("Bearer {k}"));
        }
        async move { r.send().await.unwrap() }
    };
    for bad in [None, Some("wrong"), Some("env-ke"), Some("file-key-3")] {
        let r = ask(bad).await;
        assert_eq!(r.status(), 401, "{bad:?}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "unauthorized");
    }
    for good in ["env-key", "file-key-1", "file-key-2"] {
        assert_eq!(ask(Some(good)).await.status(), 200, "{good}");
    }
}

#[test]
fn a_missing_environment_variable_is_a_located_config_error() {
    let toml = "[[routes]]\npath = \"/r\"\nclient = \"ag-ui\"\nupstream = \"http://127.0.0.1:1/\"\nupstream_protocol = \"ag-ui\"\nupstream_headers = { authorization = \"Bearer ${NOT_SET_ANYWHERE}\" }\nforward_headers = [\"connection\"]\n";
    let errs = Config::parse_with(toml, std::path::Path::new("."), &|_| None).unwrap_err();
    let text: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
    assert!(
        text.iter()
            .any(|e| e.starts_with("6:") && e.contains("NOT_SET_ANYWHERE")),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|e| e.starts_with("7:") && e.contains("never forwarded")),
        "{text:?}"
    );
}

#[tokio::test]
async fn cors_answers_preflights_for_allowed_origins_only() {
    let (l, agent) = listener().await;
    tokio::spawn(demo::serve(l, Dialect::AgUi, Duration::ZERO));
    let (gw, _) = start_gateway(
        &(route("/chat", Dialect::Vercel, agent, Dialect::AgUi)
            + "[routes.cors]\nallow_origins = [\"https://app.example\"]\n"),
    )
    .await;
    let client = reqwest::Client::new();
    let preflight = |origin: &'static str| {
        client
            .request(reqwest::Method::OPTIONS, format!("http://{gw}/chat"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .send()
    };
    let r = preflight("https://app.example").await.unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://app.example"
    );
    assert!(r.headers()["access-control-allow-methods"]
        .to_str()
        .unwrap()
        .contains("POST"));
    assert!(r.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .contains("content-type"));
    let r = preflight("https://evil.example").await.unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.headers().get("access-control-allow-origin").is_none());
    let r = post(gw, "/chat", body(Dialect::Vercel, "hi"))
        .header("origin", "https://app.example")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://app.example"
    );
    let r = post(gw, "/chat", body(Dialect::Vercel, "hi"))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn the_gateway_is_not_an_open_proxy() {
    let (l, agent) = listener().await;
    tokio::spawn(demo::serve(l, Dialect::AgUi, Duration::ZERO));
    // An upstream that redirects elsewhere is not followed.
    let (redirecting, seen) = scripted(
        &format!("HTTP/1.1 307 Temporary Redirect\r\nlocation: http://{agent}/agent\r\ncontent-length: 0\r\n\r\n"),
        vec![],
    )
    .await;
    let (gw, _) = start_gateway(&route("/r", Dialect::AgUi, redirecting, Dialect::AgUi)).await;
    let r = post(gw, "/r", body(Dialect::AgUi, "hi"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 502);
    assert_eq!(seen.requests.lock().unwrap().len(), 1);
    // An absolute-form request naming another host is routed by its path only.
    let mut s = TcpStream::connect(gw).await.unwrap();
    let b = body(Dialect::AgUi, "hi");
    s.write_all(
        format!(
            "POST http://{agent}/agent HTTP/1.1\r\nhost: {agent}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            b.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    s.write_all(&b).await.unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).await.unwrap();
    assert!(resp.starts_with("HTTP/1.1 404"), "{resp}");
}

#[tokio::test]
async fn tls_on_the_listener() {
    use tokio_rustls::rustls;
    let (l, agent) = listener().await;
    tokio::spawn(demo::serve(l, Dialect::AgUi, Duration::ZERO));
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let dir = tempdir();
    std::fs::write(dir.join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), cert.key_pair.serialize_pem()).unwrap();
    let toml = format!(
        "[server]\nrequest_read_timeout_ms = 3000\ntls = {{ cert = \"cert.pem\", key = \"key.pem\" }}\n{}",
        route("/chat", Dialect::AgUi, agent, Dialect::AgUi)
    );
    let config = Config::parse_with(&toml, &dir, &|_| None).unwrap();
    let acceptor = babelgate::tls::acceptor(config.tls.as_ref().unwrap()).unwrap();
    let (l, gw) = listener().await;
    let gateway = Arc::new(Gateway::new(config).unwrap());
    tokio::spawn(gateway.serve_until(l, Some(acceptor), std::future::pending()));

    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
    let tcp = TcpStream::connect(gw).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    let b = body(Dialect::AgUi, "hello over tls");
    tls.write_all(
        format!(
            "POST /chat HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            b.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    tls.write_all(&b).await.unwrap();
    let mut resp = Vec::new();
    let _ = tls.read_to_end(&mut resp).await;
    let resp = String::from_utf8_lossy(&resp);
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.contains("RUN_FINISHED"), "{resp}");

    // A half head over TLS is closed at the deadline, unanswered: no
    // plain-text 408 inside the TLS stream (the client would read garbage).
    let tcp = TcpStream::connect(gw).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    tls.write_all(b"POST /chat HTTP/1.1\r\nhost: localhost\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), tls.read_to_end(&mut got))
        .await
        .expect("closed at the read deadline");
    match read {
        Ok(_) => assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got)),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "{e}"),
    }
}

// ---- 8. observability -------------------------------------------------------------

#[tokio::test]
async fn metrics_health_and_request_ids() {
    let (l, agent) = listener().await;
    tokio::spawn(demo::serve(l, Dialect::AgUi, Duration::ZERO));
    let (gw, _) = start_gateway(&route("/chat", Dialect::Vercel, agent, Dialect::AgUi)).await;
    let r = post(gw, "/chat", body(Dialect::Vercel, "hello"))
        .send()
        .await
        .unwrap();
    let id = r.headers()["x-request-id"].to_str().unwrap().to_string();
    assert!(id.starts_with("req_"), "a request id is minted: {id}");
    r.bytes().await.unwrap();
    let _ = post(gw, "/chat", b"nope".to_vec()).send().await.unwrap();
    for p in ["/healthz", "/readyz"] {
        assert_eq!(
            reqwest::get(format!("http://{gw}{p}"))
                .await
                .unwrap()
                .status(),
            200
        );
    }
    // The pump records its numbers as the stream ends, just after the body.
    let mut text = String::new();
    for _ in 0..100 {
        text = reqwest::get(format!("http://{gw}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if text.contains("babelgate_stream_duration_seconds_count") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for needle in [
        r#"babelgate_requests_total{route="/chat",status="200"} 1"#,
        r#"babelgate_requests_total{route="/chat",status="400"} 1"#,
        r#"babelgate_events_translated_total{from="ag-ui",to="vercel"}"#,
        r#"gen_ai_client_operation_time_to_first_chunk_seconds_count{route="/chat"} 1"#,
        r#"babelgate_stream_duration_seconds_count{route="/chat"} 1"#,
        "babelgate_active_streams 0",
    ] {
        assert!(text.contains(needle), "missing {needle}:\n{text}");
    }
    let (l, dead) = listener().await;
    drop(l);
    let (gw, _) = start_gateway(&route("/down", Dialect::AgUi, dead, Dialect::AgUi)).await;
    let _ = post(gw, "/down", body(Dialect::AgUi, "hi"))
        .send()
        .await
        .unwrap();
    let text = reqwest::get(format!("http://{gw}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains(r#"babelgate_upstream_errors_total{kind="upstream_unreachable"} 1"#),
        "{text}"
    );
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "babelgate-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

static NEXT: AtomicU64 = AtomicU64::new(0);

#[tokio::test]
async fn h2c_clients_are_served() {
    let (l, agent) = listener().await;
    tokio::spawn(demo::serve(l, Dialect::AgUi, Duration::ZERO));
    let (gw, _) = start_gateway(&route("/chat", Dialect::AgUi, agent, Dialect::AgUi)).await;
    let client = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let r = client
        .post(format!("http://{gw}/chat"))
        .header("content-type", "application/json")
        .body(body(Dialect::AgUi, "hi"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.version(), reqwest::Version::HTTP_2);
    assert_eq!(r.status(), 200);
    let t = types(&data_lines(&r.bytes().await.unwrap()));
    assert_eq!(t.last().unwrap(), "RUN_FINISHED");
}
