//! The gateway on Redis Cluster, what the store's tests cannot see: what
//! `/readyz` says with `backend = "redis"` pointed at a cluster node, and
//! with `backend = "redis-cluster"`. Two instances over a cluster with the
//! real clients: tests/node/e2e/resume-cluster.test.mjs.

#[path = "../../store/tests/support/mod.rs"]
#[allow(dead_code)] // the single-server half of support is for the other suites
mod support;

mod common;

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
