//! Memory amplification (issue 37, part B): what one request body or one
//! upstream event costs the gateway, measured as the peak of heap bytes
//! this process allocates while the request runs (a counting global
//! allocator: exact and unaffected by other processes on a loaded box).
//! Gateway, upstream and client all run here, so the peak also holds the
//! client's and the stub upstream's share; both are kept small (bodies and
//! streams are built before the measurement starts, the stub reads and
//! drops). One test function: the cases run one after another, so no other
//! test's allocations fall into a peak.
//!
//! The bound: a body or event may cost at most 8x its bytes plus a constant
//! (`babelgate_core::cost`); past it, 413 `body_too_costly` before the
//! stream, or the client dialect's error (`upstream_event_too_large`) once
//! streaming. Run with `--nocapture` for the table docs/memory.md holds.

mod common;

use std::alloc::System;
use std::time::Duration;

use babelgate_core::request::{Message, RunRequest};
use babelgate_core::{Dialect, Role};
use peakmem_alloc::{PeakMemAlloc, PeakMemAllocTrait, INSTRUMENTED_SYSTEM};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[global_allocator]
static GLOBAL: &PeakMemAlloc<System> = &INSTRUMENTED_SYSTEM;

/// What every case may take besides 8x its input: the runtime, the
/// connections' buffers, the client's copy of what it sends.
const CONSTANT: usize = 6 << 20;

const PROTO: &str = "application/vnd.ag-ui.event+proto";

/// The worst shapes, each about `size` bytes of JSON text.
fn shapes(size: usize) -> Vec<(&'static str, String)> {
    let tiny = format!("[{}0]", "0,".repeat(size / 2));
    let keys = format!(
        "{{{}\"z\":0}}",
        (0..size / 11)
            .map(|i| format!("\"{i:06}\":0,"))
            .collect::<String>()
    );
    // Deep and wide: 12 levels of objects, each level a few tiny values,
    // then empty containers at the bottom (deeper than the protobuf codec's
    // 64 levels of messages cannot be sent as protobuf).
    let level = "{\"a\":[0,0,0,{},[],";
    let mut deep = level.repeat(12);
    deep.push_str(&"{},".repeat((size - deep.len()) / 3));
    deep.push('0');
    deep.push_str(&"]}".repeat(12));
    let long = format!(
        "[{}\"\"]",
        format!("\"{}\",", "x".repeat(64 * 1024)).repeat(size / (64 * 1024 + 3))
    );
    vec![
        ("tiny values", tiny),
        ("many keys", keys),
        ("deep and wide", deep),
        ("long strings", long),
    ]
}

/// A stub upstream: reads each request (dropping it as it comes) and answers
/// `body` with `content_type`. `Bytes`: every answer shares one buffer.
async fn upstream(content_type: &'static str, body: bytes::Bytes) -> std::net::SocketAddr {
    let (l, addr) = common::listener().await;
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            let body = body.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                let mut head = Vec::new();
                let mut left = None;
                while left.is_none_or(|n: usize| n > 0) {
                    let Ok(n) = s.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    match &mut left {
                        Some(l) => *l = l.saturating_sub(n),
                        None => {
                            head.extend_from_slice(&buf[..n]);
                            if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                                let text =
                                    String::from_utf8_lossy(&head[..end]).to_ascii_lowercase();
                                let len = text
                                    .lines()
                                    .find_map(|l| l.strip_prefix("content-length:"))
                                    .map_or(0, |v| v.trim().parse().unwrap_or(0));
                                left = Some(len - (head.len() - end - 4).min(len));
                                head = Vec::new();
                            }
                        }
                    }
                }
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\nconnection: close\r\n\r\n"
                );
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(&body).await;
                let _ = s.shutdown().await;
            });
        }
    });
    addr
}

/// A short AG-UI run, as SSE.
fn short_run() -> bytes::Bytes {
    bytes::Bytes::from_static(
        b"data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n\
          data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n",
    )
}

/// An AG-UI run whose one event is a `STATE_SNAPSHOT` of `shape`, as SSE or
/// as protobuf messages.
fn run_with_snapshot(shape: &str, proto: bool) -> bytes::Bytes {
    let events = [
        serde_json::json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        serde_json::json!({"type":"STATE_SNAPSHOT","snapshot": serde_json::from_str::<Value>(shape).unwrap()}),
        serde_json::json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}),
    ];
    let mut out = Vec::new();
    for e in &events {
        if proto {
            let m = babelgate_proto::encode_event_json(&e.to_string()).unwrap();
            babelgate_proto::write_frame(&mut out, &m).unwrap();
        } else {
            out.extend_from_slice(b"data: ");
            out.extend_from_slice(e.to_string().as_bytes());
            out.extend_from_slice(b"\n\n");
        }
    }
    out.into()
}

/// A valid request of `dialect` with `shape` under an extra top-level key
/// (`state` for AG-UI, where the run keeps it).
fn request(dialect: Dialect, shape: &str) -> Vec<u8> {
    let run = RunRequest {
        thread_id: "t".into(),
        run_id: "r".into(),
        messages: vec![Message::text_message("u1", Role::User, "hi")],
        ..Default::default()
    };
    let body = babelgate::registry::requests(dialect)
        .build_request(&run)
        .unwrap();
    let Value::Object(mut o) = body else { panic!() };
    o.remove("state");
    let mut text = serde_json::to_string(&o).unwrap();
    text.pop();
    let key = if dialect == Dialect::AgUi {
        "state"
    } else {
        "extra"
    };
    format!("{text},\"{key}\":{shape}}}").into_bytes()
}

/// The peak of heap bytes while `f` runs, over what was allocated before.
async fn peak<T>(f: impl std::future::Future<Output = T>) -> (usize, T) {
    // Let what ran before settle (connections closing, tasks ending).
    tokio::time::sleep(Duration::from_millis(100)).await;
    GLOBAL.reset_peak_memory();
    let out = f.await;
    (GLOBAL.get_peak_memory(), out)
}

fn mib(n: usize) -> String {
    format!("{:.1} MiB", n as f64 / f64::from(1 << 20))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_or_an_event_costs_in_proportion_to_its_size() {
    let _one = SERIAL.lock().await;
    let client = reqwest::Client::new();
    let mut failures = Vec::new();
    let mut table = Vec::new();

    // ---- request bodies, on every client dialect (HTTP) ----
    let stub = upstream("text/event-stream", short_run()).await;
    let mut toml = String::from("[store]\nbackend = \"memory\"\n");
    for d in ["ag-ui", "vercel", "hai", "agkit"] {
        toml.push_str(&format!(
            "[[routes]]\npath = \"/{d}\"\nclient = \"{d}\"\nupstream = \"http://{stub}/\"\nupstream_protocol = \"ag-ui\"\nresume = false\n"
        ));
    }
    let (gw, _g) = common::gateway(&toml).await;
    for (shape, text) in shapes(1_000_000) {
        for (name, dialect) in [
            ("ag-ui", Dialect::AgUi),
            ("vercel", Dialect::Vercel),
            ("hai", Dialect::Hai),
            ("agkit", Dialect::AgKit),
        ] {
            let body = request(dialect, &text);
            let len = body.len();
            let (bytes, (status, answer)) = peak(async {
                let r = client
                    .post(format!("http://{gw}/{name}"))
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                let status = r.status().as_u16();
                (status, r.text().await.unwrap())
            })
            .await;
            let outcome = if status == 413 {
                assert!(answer.contains("\"body_too_costly\""), "{answer}");
                "413 body_too_costly"
            } else {
                assert_eq!(status, 200, "{name} {shape}: {answer}");
                "streamed"
            };
            table.push(format!(
                "| request, {name} (HTTP) | {shape} | {} | {} | {outcome} |",
                mib(len),
                mib(bytes)
            ));
            eprintln!("{}", table.last().unwrap());
            if bytes > 8 * len + CONSTANT {
                failures.push(format!(
                    "request {name} {shape}: {} for {}",
                    mib(bytes),
                    mib(len)
                ));
            }
        }
    }

    // ---- request bodies over WebSocket (the session's request takes the
    // same path as an HTTP body) ----
    for (shape, text) in shapes(1_000_000) {
        use futures_util::{SinkExt, StreamExt};
        let body = String::from_utf8(request(Dialect::AgUi, &text)).unwrap();
        let len = body.len();
        let (bytes, answer) = peak(async {
            let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{gw}/ag-ui"))
                .await
                .unwrap();
            ws.send(tokio_tungstenite::tungstenite::Message::text(body))
                .await
                .unwrap();
            let mut answer = String::new();
            while let Some(Ok(m)) = ws.next().await {
                match m {
                    tokio_tungstenite::tungstenite::Message::Text(t) => answer.push_str(&t),
                    tokio_tungstenite::tungstenite::Message::Close(c) => {
                        answer.push_str(&format!(" [close {c:?}]"));
                        break;
                    }
                    _ => {}
                }
            }
            answer
        })
        .await;
        let outcome = if answer.contains("\"body_too_costly\"") {
            "refused: error message, close body_too_costly"
        } else {
            assert!(answer.contains("RUN_FINISHED"), "{shape}: {answer}");
            "streamed"
        };
        table.push(format!(
            "| request, ag-ui (WebSocket) | {shape} | {} | {} | {outcome} |",
            mib(len),
            mib(bytes)
        ));
        eprintln!("{}", table.last().unwrap());
        if bytes > 8 * len + CONSTANT {
            failures.push(format!(
                "request ag-ui WebSocket {shape}: {} for {}",
                mib(bytes),
                mib(len)
            ));
        }
    }

    // ---- one upstream event, to every client dialect, SSE and protobuf ----
    // Protobuf spends about 5 bytes on a tiny value, JSON 2: the same
    // shapes smaller, so that their messages stay within the 8 MiB limit.
    for proto in [false, true] {
        for (shape, text) in shapes(if proto { 1_200_000 } else { 2_000_000 }) {
            let stream = run_with_snapshot(&text, proto);
            let len = stream.len();
            let stub = upstream(if proto { PROTO } else { "text/event-stream" }, stream).await;
            let transport = if proto { "proto" } else { "sse" };
            let mut toml = String::from("[store]\nbackend = \"memory\"\n");
            for d in ["ag-ui", "vercel", "hai", "agkit"] {
                toml.push_str(&format!(
                    "[[routes]]\npath = \"/{d}\"\nclient = \"{d}\"\nupstream = \"http://{stub}/\"\nupstream_protocol = \"ag-ui\"\nupstream_transport = \"{transport}\"\nresume = false\n"
                ));
            }
            let (gw, _g) = common::gateway(&toml).await;
            for (name, dialect) in [
                ("ag-ui", Dialect::AgUi),
                ("vercel", Dialect::Vercel),
                ("hai", Dialect::Hai),
                ("agkit", Dialect::AgKit),
            ] {
                let body = request(dialect, "null");
                let (bytes, (status, answer)) = peak(async {
                    let r = client
                        .post(format!("http://{gw}/{name}"))
                        .header("content-type", "application/json")
                        .body(body)
                        .send()
                        .await
                        .unwrap();
                    let status = r.status().as_u16();
                    // Read and dropped as it comes: the client keeps no copy.
                    let mut r = r;
                    let mut tail = Vec::new();
                    loop {
                        match r.chunk().await {
                            Ok(Some(c)) => {
                                tail.extend_from_slice(&c[c.len().saturating_sub(2048)..]);
                                let keep = tail.len().saturating_sub(2048);
                                tail.drain(..keep);
                            }
                            Ok(None) => break,
                            // A dialect whose client sees a failure only as a
                            // body that breaks off (the error is in the tail).
                            Err(_) => {
                                tail.extend_from_slice(b" [body aborted]");
                                break;
                            }
                        }
                    }
                    (status, String::from_utf8_lossy(&tail).into_owned())
                })
                .await;
                assert_eq!(status, 200, "{name} {shape} {transport}");
                let outcome = if answer.contains("upstream_event_too_large") {
                    "error event upstream_event_too_large"
                } else if answer.contains("[body aborted]") {
                    "body aborted"
                } else if answer.contains("error") || answer.contains("ERROR") {
                    "error event (other)"
                } else {
                    "streamed"
                };
                table.push(format!(
                    "| event, ag-ui {transport} to {name} | {shape} | {} | {} | {outcome} |",
                    mib(len),
                    mib(bytes)
                ));
                eprintln!(
                    "{} {}",
                    table.last().unwrap(),
                    &answer[answer.len().saturating_sub(200)..].replace('\n', " ")
                );
                if bytes > 8 * len + CONSTANT {
                    failures.push(format!(
                        "event {transport} to {name} {shape}: {} for {}",
                        mib(bytes),
                        mib(len)
                    ));
                }
                if shape != "long strings" && outcome == "streamed" {
                    failures.push(format!("event {transport} to {name} {shape}: passed whole"));
                }
            }
        }
    }
    println!("| input | shape | bytes | peak heap | outcome |\n|---|---|---|---|---|");
    for row in &table {
        println!("{row}");
    }
    assert!(
        failures.is_empty(),
        "over 8x + {}:\n{}",
        mib(CONSTANT),
        failures.join("\n")
    );
}

/// One test at a time in this binary: a peak measured while another test
/// runs would count its allocations.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Opens a raw connection and sends the head of a POST to `path` declaring
/// `declared` bytes of body, then `sent` bytes of it.
async fn partial_post(
    gw: std::net::SocketAddr,
    path: &str,
    declared: usize,
    sent: usize,
) -> tokio::net::TcpStream {
    let mut s = tokio::net::TcpStream::connect(gw).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {declared}\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&vec![b' '; sent]).await.unwrap();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_inflight_budget_new_requests_get_503_with_retry_after() {
    let _one = SERIAL.lock().await;
    let stub = upstream("text/event-stream", short_run()).await;
    let toml = format!(
        "[server]\nmax_inflight_bytes = 1000000\nrequest_read_timeout_ms = 60000\n[store]\nbackend = \"memory\"\n\
         [[routes]]\npath = \"/chat\"\nclient = \"ag-ui\"\nupstream = \"http://{stub}/\"\nupstream_protocol = \"ag-ui\"\nresume = false\n"
    );
    let (gw, _g) = common::gateway(&toml).await;
    let client = reqwest::Client::new();
    let post = |body: Vec<u8>| {
        client
            .post(format!("http://{gw}/chat"))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    // A body that arrives slowly holds 8x what came of it: 800,000 of the
    // 1,000,000-byte budget.
    let slow = partial_post(gw, "/chat", 200_000, 100_000).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A 100 KB body would pass the budget: 503 as it arrives.
    let big = request(Dialect::AgUi, &format!("\"{}\"", "x".repeat(100_000)));
    let r = post(big.clone()).await.unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "1");
    assert_eq!(r.headers()["content-type"], "application/json");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "memory_budget", "{v}");
    // A small one still fits.
    let r = post(request(Dialect::AgUi, "null")).await.unwrap();
    assert_eq!(r.status(), 200);
    // The slow body's hold goes with its connection: the big one passes.
    drop(slow);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = post(big).await.unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
}
