//! Memory bounds of resumed streams, through a real gateway in front of the
//! demo agent: a snapshot is built from a bounded amount of log (past it the
//! run is replayed instead), and one instance follows a bounded number of
//! resumed streams (past it: 503 `too_many_followers` with `retry-after`).

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use babelgate::config::Config;
use babelgate::demo;
use babelgate::server::Gateway;
use babelgate_core::Dialect;
use serde_json::Value;

use common::listener;

/// Generous bound on what should happen soon (2 loaded cores).
const SOON: Duration = Duration::from_secs(10);

/// A gateway for AG-UI clients of the demo agent (10 ms between events);
/// `route` is added to the route, `store` to `[store]`.
async fn gateway(route: &str, store: &str) -> (SocketAddr, Arc<Gateway>) {
    let (l, agent) = listener().await;
    tokio::spawn(demo::serve(l, Dialect::AgUi, Duration::from_millis(10)));
    let toml = format!(
        "[[routes]]\npath = \"/chat\"\nclient = \"ag-ui\"\nupstream = \"http://{agent}/agent\"\nupstream_protocol = \"ag-ui\"\n{route}\n[store]\nbackend = \"memory\"\n{store}"
    );
    let (l, addr) = listener().await;
    let gw = Arc::new(Gateway::new(Config::parse(&toml).unwrap()).unwrap());
    tokio::spawn(gw.clone().serve(l));
    (addr, gw)
}

async fn start(gw: SocketAddr, thread: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("http://{gw}/chat"))
        .header("content-type", "application/json")
        .body(common::run_body(
            Dialect::AgUi,
            thread,
            "a long answer please",
        ))
        .send()
        .await
        .unwrap()
}

async fn resume(gw: SocketAddr, thread: &str) -> reqwest::Response {
    reqwest::Client::new()
        .get(format!("http://{gw}/chat/{thread}/stream"))
        .send()
        .await
        .unwrap()
}

/// Reads until at least `n` whole events have arrived.
async fn read_some(r: &mut reqwest::Response, n: usize) -> Vec<u8> {
    let mut got = Vec::new();
    while let Some(c) = tokio::time::timeout(SOON, r.chunk())
        .await
        .unwrap()
        .unwrap()
    {
        got.extend_from_slice(&c);
        if got.windows(2).filter(|w| w == b"\n\n").count() >= n && got.ends_with(b"\n\n") {
            break;
        }
    }
    got
}

/// (id, data) of each SSE event.
fn events(bytes: &[u8]) -> Vec<(Option<String>, Value)> {
    common::sse_events(bytes)
}

fn types(events: &[(Option<String>, Value)]) -> Vec<&str> {
    events
        .iter()
        .map(|(_, v)| v["type"].as_str().unwrap())
        .collect()
}

fn text(events: &[(Option<String>, Value)]) -> String {
    events
        .iter()
        .filter(|(_, v)| v["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|(_, v)| v["delta"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_run_larger_than_the_snapshot_cap_is_replayed_instead() {
    let (gw, _) = gateway("on_disconnect = \"keep\"", "max_snapshot_bytes = 300\n").await;
    let mut r = start(gw, "t-big").await;
    let first = events(&read_some(&mut r, 30).await);
    drop(r);
    let back = resume(gw, "t-big").await;
    assert_eq!(back.status(), 200);
    let back = events(
        &tokio::time::timeout(SOON * 3, back.bytes())
            .await
            .unwrap()
            .unwrap(),
    );
    let types = types(&back);
    // Far more than 300 bytes were logged: no snapshot, the run from its
    // start as it was sent, every event with its id, then the tail.
    assert!(!types.contains(&"MESSAGES_SNAPSHOT"), "{types:?}");
    assert_eq!(
        types[..2],
        ["RUN_STARTED", "TEXT_MESSAGE_START"],
        "{types:?}"
    );
    assert!(
        back.iter().all(|(id, _)| id.is_some()),
        "every event has its id"
    );
    assert_eq!(
        back[..first.len()],
        first[..],
        "the same events, ids included"
    );
    let want: String = (0..200).map(|i| format!("{i} ")).collect();
    assert_eq!(text(&back), want);
    assert_eq!(*types.last().unwrap(), "RUN_FINISHED");
}

#[tokio::test]
async fn a_small_run_still_gets_its_snapshot_under_the_cap() {
    let (gw, _) = gateway("on_disconnect = \"keep\"", "max_snapshot_bytes = 1000000\n").await;
    let mut r = start(gw, "t-small").await;
    read_some(&mut r, 10).await;
    drop(r);
    let back = resume(gw, "t-small").await;
    let back = events(
        &tokio::time::timeout(SOON * 3, back.bytes())
            .await
            .unwrap()
            .unwrap(),
    );
    assert_eq!(types(&back)[..2], ["RUN_STARTED", "MESSAGES_SNAPSHOT"]);
}

#[tokio::test]
async fn followers_past_the_cap_get_503_too_many_followers_with_retry_after() {
    let (gw, gateway) = gateway("on_disconnect = \"keep\"", "max_followers = 1\n").await;
    let mut r = start(gw, "t-f").await;
    read_some(&mut r, 3).await;
    let mut follower = resume(gw, "t-f").await;
    assert_eq!(follower.status(), 200);
    read_some(&mut follower, 2).await;

    let refused = resume(gw, "t-f").await;
    assert_eq!(refused.status(), 503);
    assert_eq!(
        refused
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap()),
        Some("1")
    );
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_followers", "{body}");

    // The cap follows a reload.
    let mut config = gateway.config();
    config.store.max_followers = 2;
    gateway.reload(config).unwrap();
    let mut second = resume(gw, "t-f").await;
    assert_eq!(second.status(), 200);
    read_some(&mut second, 2).await;
    assert_eq!(resume(gw, "t-f").await.status(), 503);

    // A place is given back once a follower leaves.
    drop(follower);
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let again = resume(gw, "t-f").await;
        if again.status() == 200 {
            break;
        }
        assert_eq!(again.status(), 503);
        assert!(
            tokio::time::Instant::now() < deadline,
            "the place was never given back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop((r, second));
}

#[test]
fn store_bounds_reach_both_backends() {
    use babelgate::server::store_config;
    use babelgate_store::StoreConfig;
    let route = "[[routes]]\npath = \"/a\"\nclient = \"ag-ui\"\nupstream = \"http://x\"\nupstream_protocol = \"ag-ui\"\n";
    let keys = "max_run_bytes = 1000\nmax_total_bytes = 5000\nmax_history_bytes = 300\nmax_total_history_bytes = 900\n";
    let memory = Config::parse(&format!("{route}[store]\nbackend = \"memory\"\n{keys}")).unwrap();
    let StoreConfig::Memory(m) = store_config(&memory) else {
        panic!("memory backend expected")
    };
    assert_eq!(
        (
            m.max_run_bytes,
            m.max_total_bytes,
            m.max_history_bytes,
            m.max_total_history_bytes
        ),
        (1000, 5000, 300, 900)
    );
    let redis = Config::parse(&format!(
        "{route}[store]\nbackend = \"redis\"\nurl = \"redis://127.0.0.1:1\"\n{keys}"
    ))
    .unwrap();
    let StoreConfig::Redis(r) = store_config(&redis) else {
        panic!("redis backend expected")
    };
    assert_eq!((r.max_run_bytes, r.max_history_bytes), (1000, 300));
}
