//! An event that reaches a binary client but has no form in AG-UI's
//! protobuf schema is dropped from the stream and counted in
//! `babelgate_binary_events_dropped_total{from,to}`. Such values come from
//! an AG-UI upstream: a patch op JSON Patch lacks (`STATE_DELTA`,
//! `ACTIVITY_DELTA`), an `ACTIVITY_SNAPSHOT` content that is no object, a
//! `TOOL_CALL_RESULT` content that is neither text nor parts. An AG-UI
//! client gets them as its encoder writes them over SSE too.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::response::IntoResponse;
use babelgate::config::Config;
use babelgate::server::Gateway;
use babelgate_proto::ProtoFramer;
use tokio::net::TcpListener;

const PROTO: &str = "application/vnd.ag-ui.event+proto";

const UPSTREAM_SSE: &str = concat!(
    "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n",
    "data: {\"type\":\"STATE_DELTA\",\"delta\":[{\"op\":\"frob\",\"path\":\"/a\"}]}\n\n",
    "data: {\"type\":\"STATE_DELTA\",\"delta\":[{\"op\":\"add\",\"path\":\"/a\",\"value\":1}]}\n\n",
    "data: {\"type\":\"ACTIVITY_DELTA\",\"messageId\":\"a\",\"activityType\":\"x\",\"patch\":[{\"op\":\"zzz\",\"path\":\"/\"}]}\n\n",
    "data: {\"type\":\"ACTIVITY_SNAPSHOT\",\"messageId\":\"a\",\"activityType\":\"x\",\"content\":5}\n\n",
    "data: {\"type\":\"TOOL_CALL_RESULT\",\"messageId\":\"m\",\"toolCallId\":\"c\",\"content\":5}\n\n",
    "data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n",
);

async fn upstream() -> SocketAddr {
    let app = axum::Router::new().route(
        "/agent",
        axum::routing::post(|| async {
            ([("content-type", "text/event-stream")], UPSTREAM_SSE).into_response()
        }),
    );
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await });
    a
}

async fn post(gw: SocketAddr, accept: &str) -> (String, Vec<u8>) {
    post_to(gw, "/chat", accept).await
}

async fn post_to(gw: SocketAddr, path: &str, accept: &str) -> (String, Vec<u8>) {
    let body = serde_json::json!({
        "threadId": "t", "runId": "r",
        "messages": [{"id": "u1", "role": "user", "content": "hi"}],
        "tools": [], "context": [], "state": {}, "forwardedProps": {}
    });
    let resp = reqwest::Client::new()
        .post(format!("http://{gw}{path}"))
        .header("accept", accept)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let ctype = resp.headers()["content-type"].to_str().unwrap().to_string();
    (ctype, resp.bytes().await.unwrap().to_vec())
}

async fn dropped_metric(gw: SocketAddr) -> Option<String> {
    dropped_metric_to(gw, "ag-ui").await
}

async fn dropped_metric_to(gw: SocketAddr, to: &str) -> Option<String> {
    let text = reqwest::get(format!("http://{gw}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find(|l| {
            l.starts_with("babelgate_binary_events_dropped_total{")
                && l.contains(&format!("to=\"{to}\""))
        })
        .map(str::to_string)
}

#[tokio::test]
async fn an_event_with_no_binary_form_is_dropped_and_counted() {
    let up = upstream().await;
    let toml = format!(
        "[[routes]]\npath = \"/chat\"\nclient = \"ag-ui\"\nupstream = \"http://{up}/agent\"\nupstream_protocol = \"ag-ui\"\n\
         [[routes]]\npath = \"/hai\"\nclient = \"hai\"\nupstream = \"http://{up}/agent\"\nupstream_protocol = \"ag-ui\"\n"
    );
    let config = Config::parse(&toml).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gw = l.local_addr().unwrap();
    tokio::spawn(Arc::new(Gateway::new(config).unwrap()).serve(l));

    // Over SSE the event goes through, and nothing is counted.
    let (ctype, sse) = post(gw, "text/event-stream").await;
    assert!(ctype.starts_with("text/event-stream"));
    let sse = String::from_utf8(sse).unwrap();
    for kept in [
        "\"frob\"",
        "\"zzz\"",
        "ACTIVITY_SNAPSHOT",
        "TOOL_CALL_RESULT",
    ] {
        assert!(sse.contains(kept), "{kept} in {sse}");
    }
    assert_eq!(dropped_metric(gw).await, None);

    // In binary, a same-dialect route maps every event into the client's
    // transport, as any route does: what the schema cannot carry (an op
    // JSON Patch lacks) goes as a CUSTOM event holding it; nothing is
    // dropped.
    let (ctype, bin) = post(gw, PROTO).await;
    assert_eq!(ctype, PROTO);
    let mut messages = Vec::new();
    let mut framer = ProtoFramer::default();
    framer.push(&bin, &mut messages).unwrap();
    framer.finish().unwrap();
    let events: Vec<serde_json::Value> = messages
        .iter()
        .map(|m| babelgate_proto::decode_event(m).unwrap())
        .collect();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "RUN_STARTED",
            "CUSTOM",
            "STATE_DELTA",
            "CUSTOM",
            "ACTIVITY_SNAPSHOT",
            "TOOL_CALL_RESULT",
            "RUN_FINISHED"
        ]
    );
    let customs = serde_json::to_string(&[&events[1], &events[3]]).unwrap();
    assert!(
        customs.contains("frob") && customs.contains("zzz"),
        "{customs}"
    );
    assert_eq!(dropped_metric(gw).await, None);

    // Another dialect's client: its encoder writes protobuf itself (no
    // conversion of SSE), drops what the schema cannot carry, and counts it.
    assert_eq!(dropped_metric_to(gw, "hai").await, None);
    let (ctype, bin) = post_to(gw, "/hai", PROTO).await;
    assert_eq!(ctype, PROTO);
    assert!(!bin.is_empty());
    let line = dropped_metric_to(gw, "hai").await.unwrap();
    let n: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(n >= 1, "{line}");
}
