//! The gateway as a tower service inside an axum app, built as
//! `examples/axum_mount.rs` builds it: a real request through axum reaches
//! the demo agent and streams back; the app's own route still answers.

#[allow(dead_code)]
#[path = "../examples/axum_mount.rs"]
mod example;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use babelgate::config::Config;
use babelgate::server::Gateway;
use babelgate_core::Dialect;
use tokio::net::TcpListener;

#[tokio::test]
async fn a_request_through_axum_reaches_the_agent_and_streams_back() {
    let agent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let agent_addr = agent.local_addr().unwrap();
    tokio::spawn(babelgate::demo::serve(agent, Dialect::AgUi, Duration::ZERO));
    let config = Config::parse(&format!(
        "[[routes]]\npath = \"/chat\"\nclient = \"vercel\"\n\
         upstream = \"http://{agent_addr}/agent\"\nupstream_protocol = \"ag-ui\"\n\
         [routes.rate_limit]\nrequests_per_s = 0.01\nburst = 1\n"
    ))
    .unwrap();
    let gateway = Arc::new(Gateway::new(config).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let app_addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            example::app(gateway).into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
    });
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();

    let hello = client
        .get(format!("http://{app_addr}/hello"))
        .send()
        .await
        .unwrap();
    assert_eq!(hello.text().await.unwrap(), "hello from the app");

    let body = r#"{"id":"chat-1","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"hi"}]}]}"#;
    let post = || {
        client
            .post(format!("http://{app_addr}/agents/chat"))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let r = post().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let text = r.text().await.unwrap();
    assert!(
        text.contains("\"type\":\"text-delta\"") && text.contains("\"type\":\"finish\""),
        "{text}"
    );
    // The limits come with the service: the address axum saw is the caller.
    let again = post().await.unwrap();
    assert_eq!(again.status(), 429);
    assert!(again.headers().contains_key("retry-after"));

    let missing = client
        .post(format!("http://{app_addr}/agents/nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let v: serde_json::Value = missing.json().await.unwrap();
    assert_eq!(v["error"]["code"], "no_route");
}
