//! AG-UI's binary transport through the gateway: negotiated by clients of
//! the binary dialects, asked of upstreams by `upstream_transport`, resumed,
//! and bad binary input from an upstream. The same with the real
//! `@ag-ui/client` and `@ag-ui/encoder` is in tests/node/e2e/proto.test.mjs.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use babelgate::config::Config;
use babelgate::server::Gateway;
use babelgate::{demo, registry};
use babelgate_core::Dialect;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use common::{listener, proto_events, run_body, sse_values as sse_events, types};

const PROTO: &str = "application/vnd.ag-ui.event+proto";

async fn demo_agent(protocol: Dialect, delay: Duration) -> SocketAddr {
    let (l, a) = listener().await;
    tokio::spawn(demo::serve(l, protocol, delay));
    a
}

async fn gateway(toml: &str) -> SocketAddr {
    let config = Config::parse(toml).unwrap_or_else(|e| panic!("{e:?}"));
    let (l, a) = listener().await;
    tokio::spawn(Arc::new(Gateway::new(config).unwrap()).serve(l));
    a
}

fn route(client: Dialect, upstream: SocketAddr, protocol: Dialect, extra: &str) -> String {
    format!(
        "[[routes]]\npath = \"/chat\"\nclient = \"{client}\"\nupstream = \"http://{upstream}/agent\"\nupstream_protocol = \"{protocol}\"\n{extra}"
    )
}

async fn post(gw: SocketAddr, dialect: Dialect, accept: &str, text: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("http://{gw}/chat"))
        .header("content-type", "application/json")
        .header("accept", accept)
        .body(run_body(dialect, "t-1", text))
        .send()
        .await
        .unwrap()
}

fn content_type(r: &reqwest::Response) -> String {
    r.headers()["content-type"].to_str().unwrap().to_string()
}

/// The text a client of `dialect` was streamed.
fn text(dialect: Dialect, events: &[Value]) -> String {
    events
        .iter()
        .filter_map(|v| match dialect {
            Dialect::Vercel if v["type"] == "text-delta" => v["delta"].as_str().map(String::from),
            Dialect::AgKit if v["type"] == "text" => v["content"].as_str().map(String::from),
            Dialect::Hai if v["type"] == "BUSINESS_DATA_CONTENT" => {
                v["delta"]["output"]["content"].as_str().map(String::from)
            }
            Dialect::A2a => v["result"]["artifactUpdate"]["artifact"]["parts"][0]["text"]
                .as_str()
                .map(String::from),
            _ if v["type"] == "TEXT_MESSAGE_CONTENT" => v["delta"].as_str().map(String::from),
            _ => None,
        })
        .collect()
}

/// A raw upstream that answers every request with `head` and then `body`.
async fn raw_upstream(content_type: &'static str, body: Vec<u8>) -> SocketAddr {
    let (l, a) = listener().await;
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            let body = body.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                let mut got = Vec::new();
                // The request head and its (small) body.
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    got.extend_from_slice(&buf[..n]);
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
    a
}

fn frame(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    babelgate_proto::write_frame(&mut out, message).unwrap();
    out
}

fn event(json: &str) -> Vec<u8> {
    frame(&babelgate_proto::encode_event_json(json).unwrap())
}

#[tokio::test]
async fn binary_clients_get_the_same_stream_as_sse_clients_from_every_upstream() {
    for client in [Dialect::AgUi, Dialect::Hai] {
        let prefix = registry::policy(client).binary_custom_prefix;
        for upstream in Dialect::ALL {
            let agent = demo_agent(upstream, Duration::ZERO).await;
            let gw = gateway(&route(client, agent, upstream, "")).await;
            let sse = post(gw, client, "text/event-stream", "hello there").await;
            assert_eq!(content_type(&sse), "text/event-stream");
            let sse = sse_events(&sse.bytes().await.unwrap());
            let bin = post(gw, client, PROTO, "hello there").await;
            assert_eq!(content_type(&bin), PROTO, "{client} <- {upstream}");
            let bin = proto_events(&bin.bytes().await.unwrap(), prefix);
            assert_eq!(types(&bin), types(&sse), "{client} <- {upstream}");
            assert_eq!(text(client, &bin), text(client, &sse));
            assert!(!text(client, &bin).is_empty());
        }
    }
}

#[tokio::test]
async fn accept_negotiation_and_dialects_without_a_binary_form() {
    let agent = demo_agent(Dialect::AgUi, Duration::ZERO).await;
    let gw = gateway(&route(Dialect::AgUi, agent, Dialect::AgUi, "")).await;
    for (accept, want) in [
        (format!("text/event-stream, {PROTO}"), "text/event-stream"),
        (format!("{PROTO}, text/event-stream"), PROTO),
        (format!("text/event-stream;q=0.9, {PROTO}"), PROTO),
        ("*/*".to_string(), "text/event-stream"),
    ] {
        let r = post(gw, Dialect::AgUi, &accept, "hi").await;
        assert_eq!(content_type(&r), want, "{accept}");
    }
    // A Vercel client asking for the binary form gets SSE.
    let gw = gateway(&route(Dialect::Vercel, agent, Dialect::AgUi, "")).await;
    let r = post(gw, Dialect::Vercel, PROTO, "hi").await;
    assert_eq!(content_type(&r), "text/event-stream");
    // Errors before the stream stay JSON.
    let gw = gateway(&route(Dialect::AgUi, agent, Dialect::AgUi, "")).await;
    let r = reqwest::Client::new()
        .post(format!("http://{gw}/chat"))
        .header("accept", PROTO)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(content_type(&r).starts_with("application/json"));
}

#[tokio::test]
async fn binary_upstreams_behind_every_client_dialect() {
    for upstream in [Dialect::AgUi, Dialect::Hai] {
        for transport in ["proto", "auto", "sse"] {
            for client in Dialect::ALL {
                let agent = demo_agent(upstream, Duration::ZERO).await;
                let extra = format!("upstream_transport = \"{transport}\"\n");
                let gw = gateway(&route(client, agent, upstream, &extra)).await;
                let r = post(gw, client, "text/event-stream", "hello there").await;
                assert_eq!(r.status(), 200);
                let events = sse_events(&r.bytes().await.unwrap());
                let got = text(client, &events);
                assert!(
                    got.contains("hello there"),
                    "{client} <- {upstream} over {transport}: {got:?} {events:?}"
                );
            }
        }
    }
}

#[tokio::test]
async fn a_proto_route_takes_sse_from_an_upstream_that_only_speaks_sse() {
    let sse = b"data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n\
        data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\n\n\
        data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"fallback\"}\n\n\
        data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}\n\n\
        data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n";
    let up = raw_upstream("text/event-stream", sse.to_vec()).await;
    let gw = gateway(&route(
        Dialect::AgUi,
        up,
        Dialect::AgUi,
        "upstream_transport = \"proto\"\n",
    ))
    .await;
    let r = post(gw, Dialect::AgUi, "text/event-stream", "hi").await;
    let events = sse_events(&r.bytes().await.unwrap());
    assert_eq!(text(Dialect::AgUi, &events), "fallback");
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
}

#[tokio::test]
async fn bad_binary_upstreams_end_with_upstream_malformed() {
    let started = event(r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#);
    let mut over_limit = started.clone();
    over_limit.extend_from_slice(&u32::MAX.to_be_bytes());
    over_limit.extend_from_slice(&[0; 64]);
    let mut truncated = started.clone();
    truncated.extend_from_slice(&[0, 0, 0, 40, 1, 2, 3]);
    let mut garbage = started.clone();
    garbage.extend_from_slice(&frame(&[0xff, 0xff, 0xff]));
    let mut unknown_arm = started.clone();
    unknown_arm.extend_from_slice(&frame(&[0xfa, 0x3f, 0x00]));
    for (what, body) in [
        ("over the limit", over_limit),
        ("truncated", truncated),
        ("not protobuf", garbage),
        ("no known event", unknown_arm),
    ] {
        let up = raw_upstream(PROTO, body).await;
        let gw = gateway(&route(
            Dialect::AgUi,
            up,
            Dialect::AgUi,
            "upstream_transport = \"proto\"\n",
        ))
        .await;
        // An SSE client gets its dialect's error event.
        let r = post(gw, Dialect::AgUi, "text/event-stream", "hi").await;
        let events = sse_events(&r.bytes().await.unwrap());
        let last = events.last().unwrap();
        assert_eq!(last["type"], "RUN_ERROR", "{what}: {events:?}");
        assert_eq!(last["code"], "upstream_malformed", "{what}");
        // A binary client the same, as a binary frame.
        let r = post(gw, Dialect::AgUi, PROTO, "hi").await;
        let events = proto_events(&r.bytes().await.unwrap(), None);
        assert_eq!(events.first().unwrap()["type"], "RUN_STARTED", "{what}");
        let last = events.last().unwrap();
        assert_eq!(last["type"], "RUN_ERROR", "{what}: {events:?}");
        assert_eq!(last["code"], "upstream_malformed", "{what}");
        // A Vercel client gets its own error.
        let gw = gateway(&route(
            Dialect::Vercel,
            up,
            Dialect::AgUi,
            "upstream_transport = \"auto\"\n",
        ))
        .await;
        let r = post(gw, Dialect::Vercel, "text/event-stream", "hi").await;
        let events = sse_events(&r.bytes().await.unwrap());
        assert!(
            events.iter().any(|e| e["type"] == "error"),
            "{what}: {events:?}"
        );
    }
}

#[tokio::test]
async fn an_sse_route_refuses_a_binary_answer() {
    let up = raw_upstream(
        PROTO,
        event(r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#),
    )
    .await;
    let gw = gateway(&route(Dialect::AgUi, up, Dialect::AgUi, "")).await;
    let r = post(gw, Dialect::AgUi, "text/event-stream", "hi").await;
    assert_eq!(r.status(), 502);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "upstream_content_type");
}

/// Reads the first couple of hundred bytes of a live stream.
async fn read_some(live: &mut reqwest::Response) {
    let mut got = 0;
    while got < 200 {
        got += live.chunk().await.unwrap().unwrap().len();
    }
}

/// Comes back to thread `t-1`'s run, without `Last-Event-ID`.
async fn resume(gw: SocketAddr, accept: &str) -> reqwest::Response {
    reqwest::Client::new()
        .get(format!("http://{gw}/chat/t-1/stream"))
        .header("accept", accept)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_binary_client_resumes_a_running_run_in_binary() {
    let agent = demo_agent(Dialect::AgUi, Duration::from_millis(10)).await;
    let gw = gateway(&route(Dialect::AgUi, agent, Dialect::AgUi, "")).await;
    let mut first = post(gw, Dialect::AgUi, PROTO, "a long answer please").await;
    assert_eq!(content_type(&first), PROTO);
    // A few frames, then the client comes back (no Last-Event-ID: a
    // snapshot of the run so far, then the tail).
    read_some(&mut first).await;
    let r = resume(gw, PROTO).await;
    assert_eq!(r.status(), 200);
    assert_eq!(content_type(&r), PROTO);
    let events = proto_events(&r.bytes().await.unwrap(), None);
    let kinds = types(&events);
    assert_eq!(kinds.first().unwrap(), "RUN_STARTED", "{kinds:?}");
    assert!(
        kinds.contains(&"MESSAGES_SNAPSHOT".to_string()),
        "{kinds:?}"
    );
    assert_eq!(kinds.last().unwrap(), "RUN_FINISHED", "{kinds:?}");
    drop(first);
}

#[tokio::test]
async fn last_event_id_resumes_in_binary_after_that_event() {
    let agent = demo_agent(Dialect::AgUi, Duration::from_millis(10)).await;
    let gw = gateway(&route(Dialect::AgUi, agent, Dialect::AgUi, "")).await;
    let mut first = post(
        gw,
        Dialect::AgUi,
        "text/event-stream",
        "a long answer please",
    )
    .await;
    // The id of the third event, as an SSE client saw it.
    let mut got = Vec::new();
    let id = loop {
        got.extend_from_slice(&first.chunk().await.unwrap().unwrap());
        let ids: Vec<String> = String::from_utf8_lossy(&got)
            .lines()
            .filter_map(|l| l.strip_prefix("id: ").map(String::from))
            .collect();
        if ids.len() >= 3 {
            break ids[2].clone();
        }
    };
    let r = reqwest::Client::new()
        .get(format!("http://{gw}/chat/t-1/stream"))
        .header("accept", PROTO)
        .header("last-event-id", &id)
        .send()
        .await
        .unwrap();
    assert_eq!(content_type(&r), PROTO);
    let events = proto_events(&r.bytes().await.unwrap(), None);
    let kinds = types(&events);
    // After the third event (RUN_STARTED, TEXT_MESSAGE_START, a delta): no
    // snapshot, no new start, the rest of the text, the end.
    assert_eq!(kinds.first().unwrap(), "TEXT_MESSAGE_CONTENT", "{kinds:?}");
    assert!(!kinds
        .iter()
        .any(|k| k == "RUN_STARTED" || k == "MESSAGES_SNAPSHOT"));
    assert_eq!(kinds.last().unwrap(), "RUN_FINISHED", "{kinds:?}");
    drop(first);
}

/// A run logged in one transport, resumed in the other: the log holds what
/// the live client got (binary messages for a binary client), and the
/// follower converts it, HAI's own events included (a `hai:` CUSTOM in the
/// log is the HAI event again over SSE).
#[tokio::test]
async fn resume_across_transports() {
    for client in [Dialect::AgUi, Dialect::Hai] {
        let prefix = registry::policy(client).binary_custom_prefix;
        for (live, resumed) in [(PROTO, "text/event-stream"), ("text/event-stream", PROTO)] {
            let agent = demo_agent(Dialect::AgUi, Duration::from_millis(10)).await;
            let gw = gateway(&route(client, agent, Dialect::AgUi, "")).await;
            let mut first = post(gw, client, live, "a long answer please").await;
            assert_eq!(content_type(&first), live);
            read_some(&mut first).await;
            let r = resume(gw, resumed).await;
            assert_eq!(r.status(), 200);
            assert_eq!(content_type(&r), resumed, "{client} {live} -> {resumed}");
            let bytes = r.bytes().await.unwrap();
            let events = if resumed == PROTO {
                proto_events(&bytes, prefix)
            } else {
                sse_events(&bytes)
            };
            let kinds = types(&events);
            let what = format!("{client} {live} -> {resumed}: {kinds:?}");
            assert_eq!(
                kinds.first().map(String::as_str),
                Some("RUN_STARTED"),
                "{what}"
            );
            // HAI names it in the singular.
            let snapshot = match client {
                Dialect::Hai => "MESSAGE_SNAPSHOT",
                _ => "MESSAGES_SNAPSHOT",
            };
            assert!(kinds.iter().any(|k| k == snapshot), "{what}");
            assert_eq!(
                kinds.last().map(String::as_str),
                Some("RUN_FINISHED"),
                "{what}"
            );
            assert!(!kinds.iter().any(|k| k == "CUSTOM"), "{what}");
            // The tail after the snapshot carries text in the dialect's form.
            assert!(!text(client, &events).is_empty(), "{what}");
            drop(first);
        }
    }
}

/// Heartbeats are SSE comments, which the binary form has none of: a binary
/// client of a slow upstream gets only whole messages, while an SSE client
/// of the same route gets its pings.
#[tokio::test]
async fn a_binary_stream_has_no_heartbeats() {
    let agent = demo_agent(Dialect::AgUi, Duration::from_millis(40)).await;
    let gw = gateway(&route(
        Dialect::AgUi,
        agent,
        Dialect::AgUi,
        "heartbeat_ms = 5\n",
    ))
    .await;
    let sse = post(gw, Dialect::AgUi, "text/event-stream", "hello there").await;
    let sse = sse.bytes().await.unwrap();
    assert!(
        sse.windows(6).any(|w| w == b": ping"),
        "the SSE client gets pings"
    );
    for client in [Dialect::AgUi, Dialect::Hai] {
        let gw = gateway(&route(client, agent, Dialect::AgUi, "heartbeat_ms = 5\n")).await;
        let bin = post(gw, client, PROTO, "hello there").await;
        assert_eq!(content_type(&bin), PROTO);
        // Whole messages only: the framer ends on a boundary, every one decodes.
        let events = proto_events(
            &bin.bytes().await.unwrap(),
            registry::policy(client).binary_custom_prefix,
        );
        assert_eq!(
            types(&events).last().map(String::as_str),
            Some("RUN_FINISHED"),
            "{client}"
        );
    }
}

#[test]
fn upstream_transport_is_checked() {
    let base = "[[routes]]\npath = \"/a\"\nclient = \"ag-ui\"\nupstream = \"http://x\"\n";
    for (dialect, value, ok) in [
        ("ag-ui", "proto", true),
        ("hai", "auto", true),
        ("vercel", "sse", true),
        ("vercel", "proto", false),
        ("agkit", "auto", false),
        ("ag-ui", "grpc", false),
    ] {
        let toml =
            format!("{base}upstream_protocol = \"{dialect}\"\nupstream_transport = \"{value}\"\n");
        let r = Config::parse(&toml);
        assert_eq!(r.is_ok(), ok, "{dialect} {value}: {r:?}");
        if let Err(errors) = r {
            let text = format!("{errors:?}");
            assert!(text.contains("upstream_transport"), "{text}");
        }
    }
}
