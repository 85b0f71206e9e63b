//! A follower knows what its client has open from the run log's core events,
//! not by decoding the client's bytes: two gateway instances on one store,
//! the run on A, the reconnecting client on B, and B shut down while the run
//! goes on. What the client has open is closed before the dialect's error,
//! even what its own bytes cannot say (a HAI business message opened for
//! reasoning that has said nothing yet) or what was opened before its
//! `Last-Event-ID`.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use babelgate::config::Config;
use babelgate::registry;
use babelgate::server::Gateway;
use babelgate_core::request::{Message, RunRequest};
use babelgate_core::{Dialect, Role};
use babelgate_store::{MemoryConfig, StoreConfig};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

/// Bounds only reached when something is wrong (2 loaded cores).
const BOUND: Duration = Duration::from_secs(20);

async fn listener() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

/// An AG-UI upstream for one run: it answers, writes each frame the test
/// sends, and holds the stream open until the gateway lets go.
async fn upstream() -> (SocketAddr, mpsc::UnboundedSender<String>) {
    let (l, a) = listener().await;
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        let Ok((mut s, _)) = l.accept().await else {
            return;
        };
        let mut buf = vec![0u8; 64 * 1024];
        let _ = s.read(&mut buf).await;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        if s.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        while let Some(frame) = rx.recv().await {
            let chunk = format!("{:x}\r\n{frame}\r\n", frame.len());
            if s.write_all(chunk.as_bytes()).await.is_err() {
                return;
            }
        }
        while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
    });
    (a, tx)
}

fn frame(json: Value) -> String {
    format!("data: {json}\n\n")
}

/// A (serving the run) and B (following it, stopped by the test), one
/// memory store between them.
struct Pair {
    a: SocketAddr,
    b: SocketAddr,
    stop_b: Option<oneshot::Sender<()>>,
}

async fn pair(client: Dialect, agent: SocketAddr) -> Pair {
    let toml = format!(
        "[server]\nshutdown_grace_ms = 50\n\n[[routes]]\npath = \"/chat\"\nclient = \"{client}\"\nupstream = \"http://{agent}/agent\"\nupstream_protocol = \"ag-ui\"\non_disconnect = \"keep\"\n"
    );
    let stores = StoreConfig::Memory(MemoryConfig::default())
        .build()
        .await
        .unwrap();
    let (la, a) = listener().await;
    let gw_a = Gateway::with_stores(Config::parse(&toml).unwrap(), stores.clone()).unwrap();
    tokio::spawn(Arc::new(gw_a).serve(la));
    let (lb, b) = listener().await;
    let gw_b = Gateway::with_stores(Config::parse(&toml).unwrap(), stores).unwrap();
    let (stop_b, stopped) = oneshot::channel::<()>();
    tokio::spawn(Arc::new(gw_b).serve_until(lb, None, async {
        let _ = stopped.await;
    }));
    Pair {
        a,
        b,
        stop_b: Some(stop_b),
    }
}

async fn start(gw: SocketAddr, dialect: Dialect, thread: &str) -> reqwest::Response {
    let run = RunRequest {
        thread_id: thread.into(),
        run_id: "run-1".into(),
        messages: vec![Message::text_message("u1", Role::User, "think first")],
        ..Default::default()
    };
    let body =
        serde_json::to_vec(&registry::requests(dialect).build_request(&run).unwrap()).unwrap();
    reqwest::Client::new()
        .post(format!("http://{gw}/chat"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
}

/// (id, data) of each SSE event.
fn events(bytes: &[u8]) -> Vec<(Option<String>, Value)> {
    common::sse_events(bytes)
}

/// Reads until the events so far satisfy `done`.
async fn read_until(
    r: &mut reqwest::Response,
    done: impl Fn(&[(Option<String>, Value)]) -> bool,
) -> Vec<u8> {
    let mut got = Vec::new();
    let read = async {
        while let Some(c) = r.chunk().await.unwrap() {
            got.extend_from_slice(&c);
            if got.ends_with(b"\n\n") && done(&events(&got)) {
                return;
            }
        }
        panic!("the stream ended early: {}", String::from_utf8_lossy(&got));
    };
    tokio::time::timeout(BOUND, read).await.expect("in time");
    got
}

async fn rest(r: reqwest::Response) -> Vec<(Option<String>, Value)> {
    let bytes = tokio::time::timeout(BOUND, r.bytes())
        .await
        .expect("in time");
    events(&bytes.unwrap())
}

fn types(evs: &[(Option<String>, Value)]) -> Vec<String> {
    evs.iter()
        .map(|(_, v)| v["type"].as_str().unwrap_or("?").to_string())
        .collect()
}

fn has_type(t: &'static str) -> impl Fn(&[(Option<String>, Value)]) -> bool {
    move |evs| evs.iter().any(|(_, v)| v["type"] == t)
}

#[tokio::test]
async fn a_hai_snapshot_reopens_reasoning_that_said_nothing_yet_and_closes_it_on_shutdown() {
    let (agent, up) = upstream().await;
    let mut p = pair(Dialect::Hai, agent).await;
    let mut live = start(p.a, Dialect::Hai, "t-hai").await;
    for ev in [
        serde_json::json!({"type": "RUN_STARTED", "threadId": "t-hai", "runId": "run-1"}),
        serde_json::json!({"type": "REASONING_START", "messageId": "rsn-span-1"}),
        serde_json::json!({"type": "REASONING_MESSAGE_START", "messageId": "rsn-1", "role": "reasoning"}),
    ] {
        up.send(frame(ev)).unwrap();
    }
    // The business message the reasoning opened, nothing in it yet.
    let got = events(&read_until(&mut live, has_type("BUSINESS_DATA_START")).await);
    let opened = got
        .iter()
        .find(|(_, v)| v["type"] == "BUSINESS_DATA_START")
        .map(|(_, v)| v["messageId"].clone())
        .unwrap();
    drop(live);

    let mut back = reqwest::get(format!("http://{}/chat/t-hai/stream", p.b))
        .await
        .unwrap();
    assert_eq!(back.status(), 200);
    let snap = events(&read_until(&mut back, has_type("BUSINESS_DATA_START")).await);
    assert_eq!(
        types(&snap)[..2],
        ["RUN_STARTED", "MESSAGE_SNAPSHOT"],
        "{snap:?}"
    );
    // The run as the client first saw it: the id the gateway minted for
    // it then is minted again (the encoder is built as the live one was).
    assert_eq!(snap[0].1["messageId"], got[0].1["messageId"], "{snap:?}");
    assert!(
        snap.iter()
            .any(|(_, v)| v["type"] == "BUSINESS_DATA_START" && v["messageId"] == opened),
        "the open message is re-opened: {snap:?}"
    );
    // B shuts down while the run goes on at A.
    p.stop_b.take().unwrap().send(()).unwrap();
    let tail = rest(back).await;
    let t = types(&tail);
    assert_eq!(t.last().map(String::as_str), Some("RUN_ERROR"), "{tail:?}");
    assert_eq!(tail.last().unwrap().1["code"], "shutdown");
    let end = tail
        .iter()
        .position(|(_, v)| v["type"] == "BUSINESS_DATA_END" && v["messageId"] == opened);
    assert_eq!(
        end,
        Some(tail.len() - 2),
        "the open message is closed before the error: {tail:?}"
    );
    drop(up);
}

#[tokio::test]
async fn with_last_event_id_what_was_opened_before_the_id_is_closed_on_shutdown() {
    let (agent, up) = upstream().await;
    let mut p = pair(Dialect::AgUi, agent).await;
    let mut live = start(p.a, Dialect::AgUi, "t-agui").await;
    for ev in [
        serde_json::json!({"type": "RUN_STARTED", "threadId": "t-agui", "runId": "run-1"}),
        serde_json::json!({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}),
        serde_json::json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hello"}),
    ] {
        up.send(frame(ev)).unwrap();
    }
    let got = events(&read_until(&mut live, has_type("TEXT_MESSAGE_CONTENT")).await);
    let last_id = got.last().unwrap().0.clone().expect("an id");
    drop(live);

    let mut back = reqwest::Client::new()
        .get(format!("http://{}/chat/t-agui/stream", p.b))
        .header("last-event-id", &last_id)
        .send()
        .await
        .unwrap();
    assert_eq!(back.status(), 200);
    // More of the message, after the id: the follower has read the log.
    up.send(frame(serde_json::json!(
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": ", world"}
    )))
    .unwrap();
    let seen = events(&read_until(&mut back, has_type("TEXT_MESSAGE_CONTENT")).await);
    assert_eq!(
        types(&seen),
        ["TEXT_MESSAGE_CONTENT"],
        "only what came after the id"
    );
    p.stop_b.take().unwrap().send(()).unwrap();
    let tail = rest(back).await;
    assert_eq!(
        types(&tail),
        ["TEXT_MESSAGE_END", "RUN_ERROR"],
        "the message opened before the id is closed first: {tail:?}"
    );
    assert_eq!(tail[0].1["messageId"], "m1");
    assert_eq!(tail[1].1["code"], "shutdown");
    drop(up);
}
