//! Helpers shared by the gateway's integration tests (`tests/all.rs` and
//! each test binary of its own that needs them say `mod common;`, the files
//! of `all` `use crate::common`; not every file uses every helper).
#![allow(dead_code)]

use std::io::Write;
use std::process::{Command, Stdio};

use babelgate_core::sse::SseFramer;
use serde_json::Value;

/// (id, data) of each SSE event in a body: data as JSON when it is JSON,
/// else as a string (`[DONE]`); comments and empty events left out.
pub fn sse_events(bytes: &[u8]) -> Vec<(Option<String>, Value)> {
    let mut framer = SseFramer::new(1 << 20);
    let mut frames = Vec::new();
    framer.push(bytes, &mut frames).unwrap();
    framer.finish(&mut frames).unwrap();
    frames
        .into_iter()
        .filter(|f| !f.data.is_empty())
        .map(|f| {
            let v = serde_json::from_str(&f.data).unwrap_or(Value::String(f.data.clone()));
            (f.id.clone(), v)
        })
        .collect()
}

/// The data of each SSE event in a body, as [`sse_events`] reads it.
pub fn sse_values(bytes: &[u8]) -> Vec<Value> {
    sse_events(bytes).into_iter().map(|(_, v)| v).collect()
}

/// Each event's `type` (a string event, `[DONE]`, as itself).
pub fn types(values: &[Value]) -> Vec<String> {
    values
        .iter()
        .map(|v| match v {
            Value::String(s) => s.clone(),
            v => v["type"].as_str().unwrap_or("?").to_string(),
        })
        .collect()
}

/// A JSON POST of `body` to `path` on the gateway at `gw`.
pub fn post_json(gw: std::net::SocketAddr, path: &str, body: Vec<u8>) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(format!("http://{gw}{path}"))
        .header("content-type", "application/json")
        .body(body)
}

/// A loopback port free when asked (for a process that binds it itself).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs the `babelgate` binary with `args` and `stdin`: (exit code, stdout,
/// stderr).
pub fn run_cli(args: &[&str], stdin: &[u8]) -> (i32, Vec<u8>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_babelgate"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Answers every connection on `l` with `body` as an SSE stream, then
/// closes it (an upstream whose stream is fixed by the test).
pub async fn serve_sse(l: tokio::net::TcpListener, body: String) {
    serve_sse_recording(l, body, Default::default()).await
}

/// [`serve_sse`], keeping each request (head and body) as it arrived.
pub async fn serve_sse_recording(
    l: tokio::net::TcpListener,
    body: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let Ok((mut s, _)) = l.accept().await else {
            return;
        };
        let body = body.clone();
        let seen = seen.clone();
        tokio::spawn(async move {
            // The request head and body: enough to read it all for a test.
            let mut buf = vec![0u8; 65536];
            let mut got = Vec::new();
            loop {
                let Ok(n) = s.read(&mut buf).await else {
                    return;
                };
                if n == 0 {
                    return;
                }
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got);
                if let Some(end) = text.find("\r\n\r\n") {
                    let len = text[..end]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if got.len() >= end + 4 + len {
                        break;
                    }
                }
            }
            seen.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&got).into_owned());
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            let _ = s.write_all(head.as_bytes()).await;
            let _ = s.write_all(body.as_bytes()).await;
            let _ = s.shutdown().await;
        });
    }
}

/// The body of a GET to `url`, as text.
pub async fn get_text(url: String) -> String {
    reqwest::get(url).await.unwrap().text().await.unwrap()
}

/// A listener on a free loopback port, and its address.
pub async fn listener() -> (tokio::net::TcpListener, std::net::SocketAddr) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

/// A gateway serving `toml` (its `[store]` built) on a free port.
pub async fn gateway(
    toml: &str,
) -> (
    std::net::SocketAddr,
    std::sync::Arc<babelgate::server::Gateway>,
) {
    let config = babelgate::config::Config::parse(toml).unwrap_or_else(|e| panic!("{e:?}"));
    let stores = babelgate::server::store_config(&config)
        .build()
        .await
        .unwrap();
    let gw = std::sync::Arc::new(babelgate::server::Gateway::with_stores(config, stores).unwrap());
    let (l, a) = listener().await;
    tokio::spawn(gw.clone().serve(l));
    (a, gw)
}

/// A run request in `dialect`'s words: `text` from the user on `thread`.
pub fn run_body(dialect: babelgate_core::Dialect, thread: &str, text: &str) -> Vec<u8> {
    use babelgate_core::request::{Message, RunRequest};
    let run = RunRequest {
        thread_id: thread.into(),
        run_id: "run-1".into(),
        messages: vec![Message::text_message(
            "u1",
            babelgate_core::Role::User,
            text,
        )],
        ..Default::default()
    };
    let body = babelgate::registry::requests(dialect)
        .build_request(&run)
        .unwrap();
    serde_json::to_vec(&body).unwrap()
}

/// An AG-UI run request saying "hi" on `thread`.
pub fn agui_hi(thread: &str) -> Vec<u8> {
    run_body(babelgate_core::Dialect::AgUi, thread, "hi")
}

/// The events of a binary body, read as a client of `prefix`'s dialect.
pub fn proto_events(bytes: &[u8], prefix: Option<&str>) -> Vec<Value> {
    let mut framer = babelgate_proto::ProtoFramer::default();
    let mut messages = Vec::new();
    framer.push(bytes, &mut messages).unwrap();
    framer.finish().unwrap();
    messages
        .iter()
        .map(|m| babelgate_proto::decode_event_as(m, prefix).unwrap())
        .collect()
}
