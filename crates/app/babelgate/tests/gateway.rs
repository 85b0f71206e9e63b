//! The gateway over real sockets: every client dialect against the demo agent
//! speaking every upstream dialect (16 pairs), errors before the stream,
//! conversation history for AG-Kit clients, and live (unbuffered) streaming.
//! The real client packages check the same paths in tests/node/e2e.

use crate::common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use babelgate::config::Config;
use babelgate::server::Gateway;
use babelgate::{demo, registry};
use babelgate_core::request::{Message, RunRequest};
use babelgate_core::sse::SseFramer;
use babelgate_core::{Dialect, Event, EventKind, Role};
use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::Value;
use tokio::sync::mpsc;

use babelgate_core::testing::text_of;
use common::listener;

async fn start_demo(protocol: Dialect) -> SocketAddr {
    let (l, a) = listener().await;
    tokio::spawn(demo::serve(l, protocol, Duration::ZERO));
    a
}

/// Starts a gateway with `routes` (TOML `[[routes]]` tables) and returns its address.
async fn start_gateway(routes: &str) -> SocketAddr {
    let config = Config::parse(routes).unwrap_or_else(|e| panic!("{e:?}"));
    let (l, a) = listener().await;
    let gw = Arc::new(Gateway::new(config).unwrap());
    tokio::spawn(gw.serve(l));
    a
}

fn route(path: &str, client: Dialect, upstream: SocketAddr, upstream_protocol: Dialect) -> String {
    format!(
        "[[routes]]\npath = \"{path}\"\nclient = \"{client}\"\nupstream = \"http://{upstream}/agent\"\nupstream_protocol = \"{upstream_protocol}\"\n"
    )
}

/// A client request in `dialect`, built by that dialect's own translator.
fn client_body(dialect: Dialect, thread: &str, messages: Vec<Message>) -> Vec<u8> {
    let run = RunRequest {
        thread_id: thread.into(),
        run_id: "run-client".into(),
        messages,
        ..Default::default()
    };
    let body = registry::requests(dialect).build_request(&run).unwrap();
    serde_json::to_vec(&body).unwrap()
}

fn user(id: &str, text: &str) -> Message {
    Message::text_message(id, Role::User, text)
}

/// Reads a whole SSE response back into core events with the client
/// dialect's decoder.
fn decode(dialect: Dialect, body: &[u8]) -> Vec<Event> {
    let mut framer = SseFramer::default();
    let mut frames = Vec::new();
    framer.push(body, &mut frames).unwrap();
    framer.finish(&mut frames).unwrap();
    let mut dec = registry::decoder(dialect);
    let mut events = Vec::new();
    for f in &frames {
        dec.decode(f, &mut events)
            .unwrap_or_else(|e| panic!("{dialect}: {e}\n{}", String::from_utf8_lossy(body)));
    }
    dec.finish(&mut events).unwrap();
    events
}

async fn post(addr: SocketAddr, path: &str, body: Vec<u8>) -> reqwest::Response {
    common::post_json(addr, path, body).send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_dialect_reaches_every_upstream_dialect() {
    for upstream in Dialect::ALL {
        let agent = start_demo(upstream).await;
        let routes: String = Dialect::ALL
            .iter()
            .map(|c| route(&format!("/{c}"), *c, agent, upstream))
            .collect();
        let gw = start_gateway(&routes).await;
        for client in Dialect::ALL {
            let pair = format!("{upstream}->{client}");
            let body = client_body(
                client,
                &format!("thread-{pair}"),
                vec![user("u1", "weather?")],
            );
            let resp = post(gw, &format!("/{client}"), body).await;
            assert_eq!(resp.status(), 200, "{pair}");
            let ctype = resp.headers()["content-type"].to_str().unwrap().to_string();
            assert_eq!(ctype, "text/event-stream", "{pair}");
            if client == Dialect::Vercel {
                assert_eq!(
                    resp.headers()["x-vercel-ai-ui-message-stream"],
                    "v1",
                    "{pair}"
                );
            }
            assert_eq!(resp.headers()["x-accel-buffering"], "no");
            let bytes = resp.bytes().await.unwrap();
            let events = decode(client, &bytes);
            let text = text_of(&events);
            assert!(
                text.contains("Let me look that up.") && text.contains("sunny and 22 °C in 北京"),
                "{pair}: text {text:?}\n{}",
                String::from_utf8_lossy(&bytes)
            );
            let tool = events.iter().find_map(|e| match &e.kind {
                EventKind::ToolCallStart { tool_name, .. } => Some(tool_name.as_str()),
                _ => None,
            });
            assert_eq!(tool, Some("get_weather"), "{pair}");
            let result = events.iter().any(|e| {
                matches!(&e.kind, EventKind::ToolCallResult { content, .. }
                    if content.to_string().contains("sunny"))
            });
            assert!(
                result,
                "{pair}: the server tool's result reaches the client"
            );
            assert!(
                !events
                    .iter()
                    .any(|e| matches!(e.kind, EventKind::RunError { .. })),
                "{pair}: no error"
            );
        }
    }
}

#[tokio::test]
async fn errors_before_the_stream_are_json_with_a_status() {
    let agent = start_demo(Dialect::AgUi).await;
    let (closed, closed_addr) = listener().await;
    drop(closed); // nothing listens there now
    let routes = route("/chat", Dialect::Vercel, agent, Dialect::AgUi)
        + &route("/down", Dialect::AgUi, closed_addr, Dialect::AgUi)
        + &route("/small", Dialect::AgUi, agent, Dialect::AgUi)
        + "max_body_bytes = 100\n";
    let gw = start_gateway(&routes).await;
    let client = reqwest::Client::new();

    let r = client
        .get(format!("http://{gw}/nowhere"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "no_route");

    let r = client
        .get(format!("http://{gw}/chat"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);

    let r = post(gw, "/chat", b"{not json".to_vec()).await;
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "client");
    assert!(!v["error"]["message"].as_str().unwrap().is_empty());

    let r = post(gw, "/small", vec![b' '; 101]).await;
    assert_eq!(r.status(), 413, "the limit applies while reading");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "client");
    assert_eq!(v["error"]["code"], "body_too_large", "{v}");

    let body = client_body(Dialect::AgUi, "t", vec![user("u", "hi")]);
    let r = post(gw, "/down", body).await;
    assert_eq!(r.status(), 502);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "upstream");
    assert_eq!(v["error"]["code"], "upstream_unreachable");

    // the gateway still serves good requests
    let body = client_body(Dialect::Vercel, "t2", vec![user("u", "hello")]);
    let r = post(gw, "/chat", body).await;
    assert_eq!(r.status(), 200);
    assert!(text_of(&decode(Dialect::Vercel, &r.bytes().await.unwrap())).contains("hello"));
}

/// An upstream that records each request body and answers with a fixed
/// AG-UI stream.
async fn recording_agui_upstream() -> (SocketAddr, Arc<Mutex<Vec<Value>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (l, addr) = listener().await;
    let seen2 = seen.clone();
    tokio::spawn(async move {
        loop {
            let (s, _) = l.accept().await.unwrap();
            let seen = seen2.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(
                    move |req: http::Request<hyper::body::Incoming>| {
                        let seen = seen.clone();
                        async move {
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            let v: Value = serde_json::from_slice(&body).unwrap();
                            let n = {
                                let mut s = seen.lock().unwrap();
                                s.push(v);
                                s.len()
                            };
                            let sse = format!(
                            "data: {{\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r{n}\"}}\n\n\
                             data: {{\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"a{n}\",\"role\":\"assistant\"}}\n\n\
                             data: {{\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"a{n}\",\"delta\":\"answer {n}\"}}\n\n\
                             data: {{\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"a{n}\"}}\n\n\
                             data: {{\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r{n}\"}}\n\n"
                        );
                            let mut resp =
                                http::Response::new(http_body_util::Full::new(Bytes::from(sse)));
                            resp.headers_mut()
                                .insert("content-type", "text/event-stream".parse().unwrap());
                            Ok::<_, std::convert::Infallible>(resp)
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    (addr, seen)
}

#[tokio::test]
async fn agkit_clients_get_their_history_kept_for_full_history_agents() {
    let (up, seen) = recording_agui_upstream().await;
    let gw = start_gateway(&route("/send-message", Dialect::AgKit, up, Dialect::AgUi)).await;
    for (i, said) in ["first question", "second question"].iter().enumerate() {
        let body = serde_json::json!({
            "conversationId": "conv-1",
            "messages": [{"role": "user", "content": said}],
        });
        let r = post(gw, "/send-message", body.to_string().into_bytes()).await;
        assert_eq!(r.status(), 200);
        let events = decode(Dialect::AgKit, &r.bytes().await.unwrap());
        assert_eq!(text_of(&events), format!("answer {}", i + 1));
    }
    let seen = seen.lock().unwrap();
    let second = &seen[1]["messages"];
    let roles: Vec<_> = second
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].clone())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"], "{second:#}");
    assert_eq!(second[0]["content"], "first question");
    assert_eq!(second[1]["content"], "answer 1");
    assert_eq!(second[2]["content"], "second question");
    assert_eq!(
        seen[0]["threadId"], seen[1]["threadId"],
        "the same chat maps to the same thread"
    );
}

/// A Vercel chat's history reaches an AG-UI agent as pydantic-ai's own
/// adapters write it (adapters/vercel/tests/history_to_ag_ui.rs has every
/// case): user text parts kept apart, text after a call after it, reasoning
/// as reasoning messages.
#[tokio::test]
async fn vercel_histories_reach_ag_ui_agents_whole_and_in_order() {
    let (up, seen) = recording_agui_upstream().await;
    let gw = start_gateway(&route("/api/chat", Dialect::Vercel, up, Dialect::AgUi)).await;
    let body = serde_json::json!({
        "id": "chat-1",
        "trigger": "submit-message",
        "messages": [
            {"id": "u1", "role": "user", "parts": [
                {"type": "text", "text": "first"}, {"type": "text", "text": "second"}]},
            {"id": "a1", "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "reasoning", "text": "thinking", "state": "done"},
                {"type": "text", "text": "Let me look.", "state": "done"},
                {"type": "tool-get_weather", "toolCallId": "tc-1", "state": "output-available",
                 "input": {"city": "Paris"}, "output": "sunny"},
                {"type": "text", "text": "It is sunny.", "state": "done"}]},
            {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "thanks"}]}
        ]
    });
    let r = post(gw, "/api/chat", body.to_string().into_bytes()).await;
    assert_eq!(r.status(), 200);
    let _ = r.bytes().await.unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen[0]["messages"],
        serde_json::json!([
            {"id": "u1", "role": "user", "content": [
                {"type": "text", "text": "first"}, {"type": "text", "text": "second"}]},
            {"id": "a1", "role": "reasoning", "content": "thinking"},
            {"id": "a1:p2", "role": "assistant", "content": "Let me look.", "toolCalls": [
                {"id": "tc-1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"id": "a1:p3", "role": "assistant", "content": "It is sunny."},
            {"id": "tc-1-result", "role": "tool", "content": "sunny", "toolCallId": "tc-1"},
            {"id": "u2", "role": "user", "content": "thanks"}
        ])
    );
}

#[tokio::test]
async fn events_reach_the_client_while_the_upstream_is_still_talking() {
    // An upstream that sends one event, then waits until the test has seen
    // it through the gateway before it ends the run: buffering would hang
    // here (guarded by an overall timeout, no timing assertion).
    let (up, go) = held_agui_upstream().await;
    let gw = start_gateway(&route("/chat", Dialect::Vercel, up, Dialect::AgUi)).await;
    let body = client_body(Dialect::Vercel, "t", vec![user("u", "hi")]);
    let resp = post(gw, "/chat", body).await;
    let mut stream = resp.bytes_stream();
    let mut seen = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), async {
        while !String::from_utf8_lossy(&seen).contains("early") {
            seen.extend_from_slice(&stream.next().await.expect("stream open").unwrap());
        }
    })
    .await
    .expect("the first delta arrives before the upstream finishes");
    go.send_replace(true);
    while let Some(chunk) = stream.next().await {
        seen.extend_from_slice(&chunk.unwrap());
    }
    assert!(String::from_utf8_lossy(&seen).ends_with("data: [DONE]\n\n"));
}

/// Reads one HTTP/1.1 response from `s`: its head, and its body de-chunked
/// (or of its `content-length`).
async fn read_response(s: &mut tokio::net::TcpStream, buf: &mut Vec<u8>) -> (String, Vec<u8>) {
    use tokio::io::AsyncReadExt;
    async fn more(s: &mut tokio::net::TcpStream, buf: &mut Vec<u8>) {
        let mut b = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut b))
            .await
            .expect("the response went on")
            .unwrap();
        assert!(
            n > 0,
            "closed mid-response: {}",
            String::from_utf8_lossy(buf)
        );
        buf.extend_from_slice(&b[..n]);
    }
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        more(s, buf).await;
    };
    let head = String::from_utf8(buf.drain(..head_end).collect()).unwrap();
    let lower = head.to_ascii_lowercase();
    let mut body = Vec::new();
    if lower.contains("\r\ntransfer-encoding: chunked\r\n") {
        loop {
            let line_end = loop {
                if let Some(i) = buf.windows(2).position(|w| w == b"\r\n") {
                    break i;
                }
                more(s, buf).await;
            };
            let size =
                usize::from_str_radix(std::str::from_utf8(&buf[..line_end]).unwrap(), 16).unwrap();
            while buf.len() < line_end + 2 + size + 2 {
                more(s, buf).await;
            }
            body.extend_from_slice(&buf[line_end + 2..line_end + 2 + size]);
            buf.drain(..line_end + 2 + size + 2);
            if size == 0 {
                break;
            }
        }
    } else {
        let len: usize = lower
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .expect("a length")
            .trim()
            .parse()
            .unwrap();
        while buf.len() < len {
            more(s, buf).await;
        }
        body = buf.drain(..len).collect();
    }
    (head, body)
}

/// An AG-UI upstream that says "early", then holds every run until `go`
/// is set.
async fn held_agui_upstream() -> (SocketAddr, tokio::sync::watch::Sender<bool>) {
    let (go, held) = tokio::sync::watch::channel(false);
    let (l, up) = listener().await;
    tokio::spawn(async move {
        loop {
            let (s, _) = l.accept().await.unwrap();
            let held = held.clone();
            let svc = hyper::service::service_fn(
                move |_req: http::Request<hyper::body::Incoming>| {
                    let mut held = held.clone();
                    async move {
                        let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(4);
                        tokio::spawn(async move {
                            let first = "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\ndata: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\n\ndata: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"early\"}\n\n";
                            tx.send(Ok(Frame::data(Bytes::from(first)))).await.unwrap();
                            let _ = held.wait_for(|go| *go).await;
                            let rest = "data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}\n\ndata: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n";
                            let _ = tx.send(Ok(Frame::data(Bytes::from(rest)))).await;
                        });
                        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
                            rx.recv().await.map(|x| (x, rx))
                        });
                        let mut resp = http::Response::new(StreamBody::new(stream));
                        resp.headers_mut()
                            .insert("content-type", "text/event-stream".parse().unwrap());
                        Ok::<_, std::convert::Infallible>(resp)
                    }
                },
            );
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(s), svc),
            );
        }
    });
    (up, go)
}

/// The first request of a connection is answered by the gateway's own
/// writer (see server/first_request.rs) when it came whole; the connection then goes
/// on with hyper, whether the next request came while the first response
/// streamed or after it, and `connection: close` closes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_alive_connection_goes_on_after_a_streamed_first_response() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (up, go) = held_agui_upstream().await;
    let gw = start_gateway(&route("/api/chat", Dialect::Vercel, up, Dialect::AgUi)).await;
    let body = client_body(Dialect::Vercel, "t-keep", vec![user("u1", "hi")]);
    let request = |extra: &str| {
        let mut r = format!(
            "POST /api/chat HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(&body);
        r
    };
    for early in [true, false] {
        go.send_replace(false);
        let mut s = tokio::net::TcpStream::connect(gw).await.unwrap();
        s.write_all(&request("")).await.unwrap();
        let mut buf = Vec::new();
        // The first response streams and waits on the upstream.
        while !String::from_utf8_lossy(&buf).contains("early") {
            let mut b = [0u8; 4096];
            let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut b))
                .await
                .expect("the first event arrives")
                .unwrap();
            assert!(n > 0);
            buf.extend_from_slice(&b[..n]);
        }
        if early {
            // The next request, sent while the first response streams.
            s.write_all(&request("")).await.unwrap();
            // Time for the gateway to read it before the first response
            // ends (if it does not, the bytes wait in the socket for hyper:
            // the test passes either way, and fails only if they are lost).
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        go.send_replace(true);
        let (head, first) = read_response(&mut s, &mut buf).await;
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        let lower = head.to_ascii_lowercase();
        assert!(
            lower.contains("\r\ntransfer-encoding: chunked\r\n"),
            "{head}"
        );
        assert!(lower.contains("\r\ndate: "), "{head}");
        assert!(
            lower.contains("\r\ncontent-type: text/event-stream"),
            "{head}"
        );
        assert_eq!(text_of(&decode(Dialect::Vercel, &first)), "early");
        assert!(String::from_utf8_lossy(&first).ends_with("data: [DONE]\n\n"));
        if !early {
            s.write_all(&request("")).await.unwrap();
        }
        let (head, second) = read_response(&mut s, &mut buf).await;
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert_eq!(text_of(&decode(Dialect::Vercel, &second)), "early");
        // Asked to close: the answer says so, and the connection ends.
        s.write_all(&request("connection: close\r\n"))
            .await
            .unwrap();
        let (head, _) = read_response(&mut s, &mut buf).await;
        assert!(
            head.to_ascii_lowercase()
                .contains("\r\nconnection: close\r\n"),
            "{head}"
        );
        let mut rest = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut rest))
            .await
            .expect("closed")
            .unwrap();
        assert!(buf.is_empty() && rest.is_empty());
    }
    // The first request asking to close: answered, then closed.
    let mut s = tokio::net::TcpStream::connect(gw).await.unwrap();
    s.write_all(&request("connection: close\r\n"))
        .await
        .unwrap();
    let mut buf = Vec::new();
    let (head, body) = read_response(&mut s, &mut buf).await;
    assert!(
        head.to_ascii_lowercase()
            .contains("\r\nconnection: close\r\n"),
        "{head}"
    );
    assert!(String::from_utf8_lossy(&body).ends_with("data: [DONE]\n\n"));
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut rest))
        .await
        .expect("closed")
        .unwrap();
    assert!(rest.is_empty());
}
