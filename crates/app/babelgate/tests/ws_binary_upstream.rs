//! A `ws://` upstream that accepts `ag-ui.proto` and sends one protobuf
//! event a binary message, through the gateway: a HAI upstream (its own
//! events as `hai:` CUSTOM events) gives an AG-UI client what the same
//! events give over SSE. The same with the real `@ag-ui/proto` and
//! `@ag-ui/encoder`, behind every client dialect, is in
//! tests/node/e2e/websocket-proto.test.mjs.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::response::IntoResponse;
use babelgate::config::Config;
use babelgate::server::Gateway;
use futures_util::{SinkExt, StreamExt};
use http::HeaderValue;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::Message;

fn fixture() -> String {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../tests/fixtures/hai/chat.sse"
    );
    std::fs::read_to_string(p).unwrap()
}

fn fixture_events() -> Vec<Value> {
    fixture()
        .split("\n\n")
        .filter_map(|b| b.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

async fn sse_upstream() -> SocketAddr {
    let app = axum::Router::new().route(
        "/agent",
        axum::routing::post(|| async {
            ([("content-type", "text/event-stream")], fixture()).into_response()
        }),
    );
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await });
    a
}

/// Accepts `ag-ui.proto` on every connection and sends the fixture's
/// events in binary, HAI's own as `hai:` CUSTOM events.
async fn ws_binary_upstream() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (s, _) = l.accept().await.unwrap();
            tokio::spawn(async move {
                #[allow(clippy::result_large_err)]
                let pick = |req: &Request, mut resp: Response| {
                    let offered = req
                        .headers()
                        .get("sec-websocket-protocol")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("");
                    if offered.split(',').any(|p| p.trim() == "ag-ui.proto") {
                        resp.headers_mut().insert(
                            "sec-websocket-protocol",
                            HeaderValue::from_static("ag-ui.proto"),
                        );
                    }
                    Ok(resp)
                };
                let mut ws = tokio_tungstenite::accept_hdr_async(s, pick).await.unwrap();
                ws.next().await;
                for e in fixture_events() {
                    let m = babelgate_proto::encode_event_as(&e, Some("hai")).unwrap();
                    ws.send(Message::binary(m)).await.unwrap();
                }
                let _ = ws.close(None).await;
            });
        }
    });
    a
}

async fn post(gw: SocketAddr, path: &str) -> Vec<Value> {
    let body = serde_json::json!({
        "threadId": format!("t{path}"), "runId": "r",
        "messages": [{"id": "u1", "role": "user", "content": "hi"}],
        "tools": [], "context": [], "state": {}, "forwardedProps": {}
    });
    let resp = reqwest::Client::new()
        .post(format!("http://{gw}{path}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.text()
        .await
        .unwrap()
        .split("\n\n")
        .filter_map(|b| b.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[tokio::test]
async fn a_hai_ws_upstream_in_binary_gives_what_it_gives_over_sse() {
    let (sse, ws) = (sse_upstream().await, ws_binary_upstream().await);
    let toml = format!(
        "[[routes]]\npath = \"/sse\"\nclient = \"ag-ui\"\nupstream = \"http://{sse}/agent\"\nupstream_protocol = \"hai\"\n\
         [[routes]]\npath = \"/ws\"\nclient = \"ag-ui\"\nupstream = \"ws://{ws}/\"\nupstream_protocol = \"hai\"\nupstream_transport = \"proto\"\n"
    );
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gw = l.local_addr().unwrap();
    tokio::spawn(Arc::new(Gateway::new(Config::parse(&toml).unwrap()).unwrap()).serve(l));

    // Ids and timestamps are the gateway's: compare types and text.
    let shape = |evs: Vec<Value>| -> Vec<(String, Value)> {
        evs.into_iter()
            .map(|e| (e["type"].as_str().unwrap().to_string(), e["delta"].clone()))
            .collect()
    };
    let over_sse = shape(post(gw, "/sse").await);
    let over_ws = shape(post(gw, "/ws").await);
    assert!(over_sse.len() > 3, "{over_sse:?}");
    assert_eq!(over_ws, over_sse);
    assert!(over_ws.iter().any(|(t, _)| t == "TEXT_MESSAGE_CONTENT"));
    assert_eq!(over_ws.last().unwrap().0, "RUN_FINISHED");
}
