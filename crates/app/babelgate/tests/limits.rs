//! Hostile clients and broken upstreams: connection deadlines, upstream
//! timeouts, and the limits on connections, streams and callers (with the
//! Redis store, shared by two gateways).
//!
//! Deadlines are configured short (300 ms); waits are bounded generously
//! (10 s and more) and the bounds only matter when a test fails.

#[path = "../../../lib/store/tests/support/mod.rs"]
mod support;

mod common;

use common::{gateway, listener};

use std::net::SocketAddr;
use std::time::Duration;

use babelgate::demo;
use babelgate_core::Dialect;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Only matters when a test fails.
const BOUND: Duration = Duration::from_secs(15);

fn route(upstream: SocketAddr, extra: &str) -> String {
    format!(
        "[[routes]]\npath = \"/chat\"\nclient = \"ag-ui\"\nupstream = \"http://{upstream}/agent\"\nupstream_protocol = \"ag-ui\"\n{extra}"
    )
}

async fn demo_agent() -> SocketAddr {
    let (l, a) = listener().await;
    tokio::spawn(demo::serve(l, Dialect::AgUi, Duration::ZERO));
    a
}

fn body() -> Vec<u8> {
    common::agui_hi(&babelgate_store::new_id())
}

fn post(gw: SocketAddr, bearer: Option<&str>) -> reqwest::RequestBuilder {
    let mut r = reqwest::Client::builder()
        .timeout(BOUND)
        .build()
        .unwrap()
        .post(format!("http://{gw}/chat"))
        .header("content-type", "application/json")
        .body(body());
    if let Some(b) = bearer {
        r = r.bearer_auth(b);
    }
    r
}

/// The JSON error code of a refused request.
async fn error_code(r: reqwest::Response) -> String {
    let v: Value = r.json().await.unwrap();
    v["error"]["code"].as_str().unwrap_or_default().to_string()
}

fn retry_after(r: &reqwest::Response) -> u64 {
    r.headers()
        .get("retry-after")
        .expect("retry-after")
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Reads until the peer closes; panics if it never does.
async fn until_closed(s: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let r = tokio::time::timeout(BOUND, s.read_to_end(&mut got)).await;
    assert!(r.is_ok(), "the gateway kept the connection open");
    String::from_utf8_lossy(&got).into_owned()
}

/// An upstream that accepts connections and never answers.
async fn silent_upstream() -> SocketAddr {
    let (l, a) = listener().await;
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = l.accept().await {
            held.push(s);
        }
    });
    a
}

/// An upstream that answers with `head` and then writes `chunk` forever
/// (or, when `chunk` is empty, just holds the connection).
async fn scripted_upstream(head: &'static str, chunk: &'static str) -> SocketAddr {
    let (l, a) = listener().await;
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                let _ = s.read(&mut buf).await;
                if s.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                if chunk.is_empty() {
                    // Hold until the gateway lets go.
                    while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
                    return;
                }
                loop {
                    let framed = format!("{:x}\r\n{chunk}\r\n", chunk.len());
                    if s.write_all(framed.as_bytes()).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            });
        }
    });
    a
}

/// A stream that starts and then stays open.
const OPEN_STREAM: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n\
    39\r\ndata: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n\r\n";

async fn metrics(gw: SocketAddr) -> String {
    reqwest::get(format!("http://{gw}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

const SHORT_READ: &str = "[server]\nrequest_read_timeout_ms = 300\n";

// ---- connection deadlines ---------------------------------------------------

#[tokio::test]
async fn a_client_that_sends_nothing_is_dropped() {
    let (gw, _) = gateway(&format!("{SHORT_READ}{}", route(demo_agent().await, ""))).await;
    let mut s = TcpStream::connect(gw).await.unwrap();
    until_closed(&mut s).await;
    assert!(metrics(gw)
        .await
        .contains("babelgate_rejected_total{reason=\"request_timeout\"} 1"));
}

#[tokio::test]
async fn part_of_the_http2_preface_is_dropped() {
    let (gw, _) = gateway(&format!("{SHORT_READ}{}", route(demo_agent().await, ""))).await;
    let mut s = TcpStream::connect(gw).await.unwrap();
    s.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    let answer = until_closed(&mut s).await;
    assert_eq!(answer, "", "no HTTP/1 answer to an HTTP/2 client");
}

#[tokio::test]
async fn an_http2_connection_that_opens_no_stream_is_dropped() {
    let (gw, _) = gateway(&format!("{SHORT_READ}{}", route(demo_agent().await, ""))).await;
    let mut s = TcpStream::connect(gw).await.unwrap();
    // The whole preface and an empty SETTINGS frame, then nothing.
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    until_closed(&mut s).await;
}

#[tokio::test]
async fn a_partial_head_gets_408_and_the_connection_closes() {
    let (gw, _) = gateway(&format!("{SHORT_READ}{}", route(demo_agent().await, ""))).await;
    let mut s = TcpStream::connect(gw).await.unwrap();
    s.write_all(b"POST /chat HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    let answer = until_closed(&mut s).await;
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    let body = answer.split_once("\r\n\r\n").unwrap().1;
    let v: Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["error"]["code"], "request_timeout");
}

#[tokio::test]
async fn a_partial_second_head_on_a_keep_alive_connection_gets_408() {
    let (gw, _) = gateway(&format!("{SHORT_READ}{}", route(demo_agent().await, ""))).await;
    let mut s = TcpStream::connect(gw).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut first = [0u8; 12];
    s.read_exact(&mut first).await.unwrap();
    assert_eq!(&first, b"HTTP/1.1 200");
    // Read the rest of the first answer only as the second head stalls.
    s.write_all(b"GET /hea").await.unwrap();
    let answer = until_closed(&mut s).await;
    let second = answer.split("HTTP/1.1 ").nth(1).unwrap_or_default();
    assert!(second.starts_with("408 "), "{answer}");
    assert!(second.contains("request_timeout"), "{answer}");
}

#[tokio::test]
async fn a_trickled_body_gets_408_and_the_connection_closes() {
    let (gw, _) = gateway(&format!("{SHORT_READ}{}", route(demo_agent().await, ""))).await;
    let mut s = TcpStream::connect(gw).await.unwrap();
    s.write_all(
        b"POST /chat HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"threadId\"",
    )
    .await
    .unwrap();
    // A byte now and then: never the whole body.
    let (mut rd, mut wr) = s.into_split();
    let trickle = tokio::spawn(async move {
        while wr.write_all(b" ").await.is_ok() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let mut got = Vec::new();
    let r = tokio::time::timeout(BOUND, rd.read_to_end(&mut got)).await;
    trickle.abort();
    assert!(r.is_ok(), "the gateway kept waiting for the body");
    let answer = String::from_utf8_lossy(&got);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"code\":\"request_timeout\""), "{answer}");
}

#[tokio::test]
async fn an_http2_stream_whose_body_never_ends_gets_408() {
    let (gw, _) = gateway(&format!("{SHORT_READ}{}", route(demo_agent().await, ""))).await;
    let first = futures_util::stream::once(async {
        Ok::<_, std::io::Error>(bytes::Bytes::from_static(b"{\"threadId\""))
    });
    let body = futures_util::StreamExt::chain(first, futures_util::stream::pending());
    let r = reqwest::Client::builder()
        .http2_prior_knowledge()
        .timeout(BOUND)
        .build()
        .unwrap()
        .post(format!("http://{gw}/chat"))
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(body))
        .send()
        .await
        .unwrap();
    assert_eq!(r.version(), reqwest::Version::HTTP_2);
    assert_eq!(r.status(), 408);
    assert_eq!(error_code(r).await, "request_timeout");
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    let (gw, _) = gateway(&format!(
        "[server]\nrequest_read_timeout_ms = 60000\nkeepalive_timeout_ms = 300\n{}",
        route(demo_agent().await, "")
    ))
    .await;
    let mut s = TcpStream::connect(gw).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let answer = until_closed(&mut s).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

// ---- upstream timeouts ------------------------------------------------------

#[tokio::test]
async fn an_upstream_that_never_answers_gives_504() {
    let (gw, _) = gateway(&route(
        silent_upstream().await,
        "response_timeout_ms = 300\n",
    ))
    .await;
    let r = post(gw, None).send().await.unwrap();
    assert_eq!(r.status(), 504);
    assert_eq!(error_code(r).await, "upstream_timeout");
}

#[tokio::test]
async fn an_endless_error_body_gives_a_bounded_502() {
    let up = scripted_upstream(
        "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n",
        "no no no no no no no no no no no no no no no no no no no no no no no no no no no no no",
    )
    .await;
    let (gw, _) = gateway(&route(up, "response_timeout_ms = 300\n")).await;
    let r = post(gw, None).send().await.unwrap();
    assert_eq!(r.status(), 502);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "upstream_status");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.len() < 4096, "{} bytes", msg.len());
}

// ---- limits -----------------------------------------------------------------

#[tokio::test]
async fn connections_over_max_connections_get_503() {
    let (gw, _) = gateway(&format!(
        "[server]\nmax_connections = 1\n{}",
        route(demo_agent().await, "")
    ))
    .await;
    let first = TcpStream::connect(gw).await.unwrap();
    let mut second = TcpStream::connect(gw).await.unwrap();
    second
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let answer = until_closed(&mut second).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("retry-after: 1"), "{answer}");
    assert!(answer.contains("server_busy"), "{answer}");
    drop(first);
    let deadline = tokio::time::Instant::now() + BOUND;
    let text = loop {
        if let Ok(r) = reqwest::get(format!("http://{gw}/metrics")).await {
            if r.status() == 200 {
                break r.text().await.unwrap();
            }
        }
        assert!(tokio::time::Instant::now() < deadline, "never served again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        text.contains("babelgate_rejected_total{reason=\"server_busy\"}"),
        "{text}"
    );
}

#[tokio::test]
async fn streams_over_max_streams_get_503_route_busy() {
    let up = scripted_upstream(OPEN_STREAM, "").await;
    let (gw, _) = gateway(&route(up, "max_streams = 1\n")).await;
    let mut first = post(gw, None).send().await.unwrap();
    assert_eq!(first.status(), 200);
    assert!(first.chunk().await.unwrap().is_some());
    let second = post(gw, Some("someone-else")).send().await.unwrap();
    assert_eq!(second.status(), 503);
    assert_eq!(retry_after(&second), 1);
    assert_eq!(error_code(second).await, "route_busy");
    // Resuming is opening a stream too.
    let resume = reqwest::get(format!("http://{gw}/chat/some-thread/stream"))
        .await
        .unwrap();
    assert_eq!(resume.status(), 503);
    assert_eq!(error_code(resume).await, "route_busy");
    drop(first);
    let deadline = tokio::time::Instant::now() + BOUND;
    while post(gw, None).send().await.unwrap().status() != 200 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slot was never freed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(metrics(gw)
        .await
        .contains("babelgate_rejected_total{reason=\"route_busy\"} 2"));
}

const RATE: &str = "[routes.rate_limit]\nrequests_per_s = 0.01\nburst = 2\n";

/// Keys `alice` and `bob`: a token counts as a caller only where it is
/// verified (without auth the caller is the address, see trust.rs).
fn keyed(limits: &str) -> String {
    std::env::set_var("LIMITS_ALICE", "alice");
    std::env::set_var("LIMITS_BOB", "bob");
    format!("[routes.auth]\nbearer_env = [\"LIMITS_ALICE\", \"LIMITS_BOB\"]\n{limits}")
}

#[tokio::test]
async fn a_caller_over_its_rate_gets_429_with_retry_after() {
    let (gw, _) = gateway(&route(demo_agent().await, &keyed(RATE))).await;
    for _ in 0..2 {
        let r = post(gw, Some("alice")).send().await.unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
    }
    let r = post(gw, Some("alice")).send().await.unwrap();
    assert_eq!(r.status(), 429);
    // One request per 100 s.
    let wait = retry_after(&r);
    assert!((50..=100).contains(&wait), "{wait}");
    assert_eq!(error_code(r).await, "rate_limited");
    // Another credential is another caller.
    assert_eq!(post(gw, Some("bob")).send().await.unwrap().status(), 200);
    assert!(metrics(gw)
        .await
        .contains("babelgate_rejected_total{reason=\"rate_limited\"} 1"));
}

#[tokio::test]
async fn a_caller_over_its_concurrent_streams_gets_429() {
    let up = scripted_upstream(OPEN_STREAM, "").await;
    let (gw, _) = gateway(&route(
        up,
        &keyed("[routes.rate_limit]\nconcurrent_streams = 1\n"),
    ))
    .await;
    let mut first = post(gw, Some("alice")).send().await.unwrap();
    assert_eq!(first.status(), 200);
    assert!(first.chunk().await.unwrap().is_some());
    let again = post(gw, Some("alice")).send().await.unwrap();
    assert_eq!(again.status(), 429);
    assert!(retry_after(&again) >= 1);
    assert_eq!(error_code(again).await, "too_many_streams");
    let bob = post(gw, Some("bob")).send().await.unwrap();
    assert_eq!(bob.status(), 200);
    drop(first);
    let deadline = tokio::time::Instant::now() + BOUND;
    while post(gw, Some("alice")).send().await.unwrap().status() != 200 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stream was never released"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn rate_limits_hold_across_two_gateways_on_one_redis() {
    let redis = support::RedisServer::start();
    let toml = format!("[store]\nbackend = \"redis\"\nurl = \"{}\"\n", redis.url(),);
    rate_limits_hold_across_two_gateways(&toml).await;
}

/// The same on Redis Cluster (three primaries, three replicas), the
/// gateways given a subset of the nodes as seeds.
#[tokio::test]
async fn rate_limits_hold_across_two_gateways_on_a_redis_cluster() {
    let urls = support::cluster::shared().urls();
    let toml = format!(
        "[store]\nbackend = \"redis-cluster\"\nurls = [\"{}\", \"{}\"]\n",
        urls[0], urls[4]
    );
    rate_limits_hold_across_two_gateways(&toml).await;
}

async fn rate_limits_hold_across_two_gateways(store: &str) {
    let agent = demo_agent().await;
    let toml = format!("{store}{}", route(agent, RATE));
    let (a, _) = gateway(&toml).await;
    let (b, _) = gateway(&toml).await;
    for gw in [a, b] {
        let r = post(gw, Some("alice")).send().await.unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
    }
    for gw in [a, b] {
        let r = post(gw, Some("alice")).send().await.unwrap();
        assert_eq!(r.status(), 429, "the other gateway's requests count");
        assert_eq!(error_code(r).await, "rate_limited");
    }
}
