//! The gateway on Redis Cluster, what the store's tests cannot see: what
//! `/readyz` says with `backend = "redis"` pointed at a cluster node, and
//! with `backend = "redis-cluster"`; a stream whose primary is killed under
//! it. Two instances over a cluster with the real clients:
//! tests/node/e2e/resume-cluster.test.mjs.

#[path = "../../../lib/store/tests/support/mod.rs"]
#[allow(dead_code)] // the single-server half of support is for the other suites
mod support;

use crate::common;

use std::time::{Duration, Instant};

use common::gateway;
use serde_json::{json, Value};

async fn readyz(toml: &str) -> (u16, Value) {
    let (gw, _) = gateway(toml).await;
    let r = reqwest::get(format!("http://{gw}/readyz")).await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test]
async fn readyz_says_when_the_redis_backend_is_a_cluster_node() {
    let url = support::cluster::shared().urls()[0].clone();
    let (status, body) = readyz(&format!("[store]\nbackend = \"redis\"\nurl = \"{url}\"\n")).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "store misconfigured", "{body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.contains("backend = \"redis-cluster\""), "{detail}");
    // No host or port of the store in what anyone asking sees.
    assert!(!detail.contains("127.0.0.1"), "{detail}");
}

#[tokio::test]
async fn readyz_on_a_whole_cluster_is_ready() {
    let urls = support::cluster::shared().urls();
    let toml = format!(
        "[store]\nbackend = \"redis-cluster\"\nurls = [\"{}\"]\n",
        urls[3]
    );
    assert_eq!(readyz(&toml).await, (200, json!({"status": "ready"})));
}

/// A request for a long AG-UI answer (the demo agent: 200 deltas) on
/// `thread`.
async fn long_answer(gw: std::net::SocketAddr, thread: &str) -> reqwest::Response {
    let body = common::run_body(
        babelgate_core::Dialect::AgUi,
        thread,
        "a long answer please",
    );
    reqwest::Client::new()
        .post(format!("http://{gw}/chat"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
}

/// The primary that holds a running stream's log is killed under it: the
/// gateway's log writes wait for the promoted replica (within
/// `op_timeout_ms`, set above the test cluster's failover time), so the
/// client gets the whole answer with an id on every event, and a client
/// resuming on another instance afterwards from an event before the kill
/// gets the same events after it, ids and all: nothing cut, nothing
/// without its id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_goes_on_whole_when_its_primary_is_killed() {
    use babelgate_core::Dialect;
    let c = support::cluster::RedisCluster::start();
    let (l, agent) = common::listener().await;
    tokio::spawn(babelgate::demo::serve(
        l,
        Dialect::AgUi,
        Duration::from_millis(10),
    ));
    let urls = c.urls();
    let toml = format!(
        "[store]\nbackend = \"redis-cluster\"\nurls = [\"{}\", \"{}\"]\n\
         lease_ms = 9000\nop_timeout_ms = 8000\n\n\
         [[routes]]\npath = \"/chat\"\nclient = \"ag-ui\"\n\
         upstream = \"http://{agent}/agent\"\nupstream_protocol = \"ag-ui\"\n",
        urls[0], urls[1]
    );
    let (a, _) = gateway(&toml).await;
    let (b, _) = gateway(&toml).await;
    let thread = "failover-thread";
    let tag = babelgate_store::key_tag(&babelgate_store::run_key("/chat", thread));
    let primary = c.primary_of(&format!("{{{tag}}}"));
    let mut r = long_answer(a, thread).await;
    assert_eq!(r.status(), 200);
    let mut live = Vec::new();
    while common::sse_events(&live).len() < 20 {
        live.extend_from_slice(&r.chunk().await.unwrap().expect("more of the stream"));
    }
    c.kill(primary);
    let killed = Instant::now();
    let rest = tokio::time::timeout(Duration::from_secs(60), r.bytes())
        .await
        .expect("the stream hung")
        .unwrap();
    live.extend_from_slice(&rest);
    eprintln!("the stream ended {:?} after the kill", killed.elapsed());
    let live = common::sse_events(&live);
    assert!(
        live.iter().all(|(id, _)| id.is_some()),
        "an event without its id: the log was given up"
    );
    let text: String = live
        .iter()
        .filter(|(_, v)| v["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|(_, v)| v["delta"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(text, (0..200).map(|i| format!("{i} ")).collect::<String>());
    assert_eq!(live.last().unwrap().1["type"], "RUN_FINISHED");
    // From an event before the kill: what follows it, across the failover.
    let from = live[9].0.clone().unwrap();
    let resumed = reqwest::Client::new()
        .get(format!("http://{b}/chat/{thread}/stream"))
        .header("last-event-id", from)
        .send()
        .await
        .unwrap();
    let status = resumed.status();
    let resumed = resumed.bytes().await.unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&resumed));
    assert_eq!(common::sse_events(&resumed), live[10..]);
}
