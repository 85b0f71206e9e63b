//! Nothing trusted by address alone (issue 37, part A), tried over sockets
//! as an attacker would: a page reaching the gateway through DNS rebinding
//! (its browser connects from loopback and names the attacker's host), a
//! client inventing a bearer token per request to dodge a rate limit, a
//! forged `X-Forwarded-For`, HTTP/1 requests without one `Host`, and the
//! inspector while Redis is frozen.

#[path = "../../../lib/store/tests/support/mod.rs"]
mod support;

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use babelgate::demo;
use babelgate_core::Dialect;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use common::{gateway, listener};

/// Only matters when a test fails.
const BOUND: Duration = Duration::from_secs(20);

async fn demo_agent() -> SocketAddr {
    let (l, a) = listener().await;
    tokio::spawn(demo::serve(l, Dialect::AgUi, Duration::ZERO));
    a
}

fn route(path: &str, agent: SocketAddr, extra: &str) -> String {
    format!(
        "[[routes]]\npath = \"{path}\"\nclient = \"ag-ui\"\nupstream = \"http://{agent}/agent\"\nupstream_protocol = \"ag-ui\"\n{extra}"
    )
}

/// Writes `request` as is and reads until the gateway closes: the whole
/// answer as text.
async fn raw(gw: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(gw).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut out = Vec::new();
    let read = tokio::time::timeout(BOUND, s.read_to_end(&mut out)).await;
    assert!(
        read.is_ok(),
        "no end within {BOUND:?}: {}",
        String::from_utf8_lossy(&out)
    );
    String::from_utf8_lossy(&out).into_owned()
}

fn status(answer: &str) -> u16 {
    answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {answer:?}"))
}

/// The JSON body's `error.code` of an answer read by [`raw`].
fn code(answer: &str) -> String {
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {answer}"));
    v["error"]["code"].as_str().unwrap_or_default().to_string()
}

fn get(path: &str, host: &str, extra: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nhost: {host}\r\n{extra}connection: close\r\n\r\n").into_bytes()
}

// ---- DNS rebinding ------------------------------------------------------------

/// A browser on `http://rebind.attacker.example:PORT` whose name now
/// resolves to 127.0.0.1: reqwest resolves it so, over HTTP/1 and HTTP/2.
fn rebound_client(gw: SocketAddr, h2: bool) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .timeout(BOUND)
        .resolve("rebind.attacker.example", gw)
        .resolve("gw.internal", gw);
    if h2 {
        b = b.http2_prior_knowledge();
    }
    b.build().unwrap()
}

#[tokio::test]
async fn the_inspector_does_not_answer_a_rebound_name() {
    let agent = demo_agent().await;
    let (gw, _g) = gateway(&format!("[inspector]\n{}", route("/chat", agent, ""))).await;
    let port = gw.port();
    for h2 in [false, true] {
        let client = rebound_client(gw, h2);
        for path in [
            "/inspector/api/runs",
            "/inspector/",
            "/inspector/api/runs/r-1",
        ] {
            let r = client
                .get(format!("http://rebind.attacker.example:{port}{path}"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 403, "h2 {h2} {path}");
            let v: Value = r.json().await.unwrap();
            assert_eq!(v["error"]["code"], "host_not_allowed", "{v}");
        }
        // Its own names still open it.
        for host in ["127.0.0.1", "localhost"] {
            let r = client
                .get(format!("http://{host}:{port}/inspector/api/runs"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200, "h2 {h2} {host}");
        }
    }
    // Over a raw socket, the same: the Host decides, and IPv6 loopback is
    // loopback.
    let a = raw(
        gw,
        &get("/inspector/api/runs", "rebind.attacker.example:8080", ""),
    )
    .await;
    assert_eq!(status(&a), 403, "{a}");
    assert!(!a.contains("\"runs\""), "{a}");
    let a = raw(gw, &get("/inspector/api/runs", "[::1]:8080", "")).await;
    assert_eq!(status(&a), 200, "{a}");
    // A proxy on this machine is loopback too: a request it forwarded is
    // not local.
    let a = raw(
        gw,
        &get(
            "/inspector/api/runs",
            "127.0.0.1",
            "x-forwarded-for: 203.0.113.9\r\n",
        ),
    )
    .await;
    assert_eq!(status(&a), 403, "{a}");
    assert_eq!(code(&a), "loopback_only");
}

#[tokio::test]
async fn inspector_allowed_hosts_names_more_of_this_machine() {
    let agent = demo_agent().await;
    let (gw, _g) = gateway(&format!(
        "[inspector]\nallowed_hosts = [\"gw.internal\"]\n{}",
        route("/chat", agent, "")
    ))
    .await;
    let client = rebound_client(gw, false);
    let port = gw.port();
    let ok = client
        .get(format!("http://gw.internal:{port}/inspector/api/runs"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let no = client
        .get(format!(
            "http://rebind.attacker.example:{port}/inspector/api/runs"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(no.status(), 403);
}

fn upgrade(path: &str, host: &str, origin: &str) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nhost: {host}\r\norigin: {origin}\r\nupgrade: websocket\r\nconnection: upgrade\r\n\
         sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
    .into_bytes()
}

/// The status line of an upgrade's answer (the 101's connection stays open).
async fn upgrade_status(gw: SocketAddr, request: &[u8]) -> u16 {
    let mut s = TcpStream::connect(gw).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n") {
        let n = tokio::time::timeout(BOUND, s.read(&mut b))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&head));
        head.push(b[0]);
    }
    status(&String::from_utf8_lossy(&head))
}

#[tokio::test]
async fn a_rebound_page_cannot_open_a_websocket_on_a_route_without_auth() {
    let agent = demo_agent().await;
    std::env::set_var("TRUST_WS_KEY", "trust-ws-key");
    let (gw, _g) = gateway(&format!(
        "{}{}",
        route("/open", agent, ""),
        route(
            "/keyed",
            agent,
            "[routes.auth]\nbearer_env = [\"TRUST_WS_KEY\"]\n"
        )
    ))
    .await;
    let port = gw.port();
    let evil = format!("rebind.attacker.example:{port}");
    // The rebound page: Origin and Host both name the attacker.
    assert_eq!(
        upgrade_status(gw, &upgrade("/open", &evil, &format!("http://{evil}"))).await,
        403
    );
    // The gateway's own origin, by a loopback name.
    for own in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        assert_eq!(
            upgrade_status(gw, &upgrade("/open", &own, &format!("http://{own}"))).await,
            101,
            "{own}"
        );
    }
    // With auth the credential is the gate (a rebound page has none): the
    // same-origin upgrade goes on to be asked for it.
    let keyed = format!(
        "GET /keyed HTTP/1.1\r\nhost: {evil}\r\norigin: http://{evil}\r\nauthorization: Bearer trust-ws-key\r\n\
         upgrade: websocket\r\nconnection: upgrade\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    );
    assert_eq!(upgrade_status(gw, keyed.as_bytes()).await, 101);
}

#[tokio::test]
async fn a_rebound_page_cannot_post_to_a_route_without_auth() {
    let agent = demo_agent().await;
    let (gw, _g) = gateway(&format!(
        "{}{}",
        route("/chat", agent, ""),
        route(
            "/listed",
            agent,
            "[routes.cors]\nallow_origins = [\"http://gw.internal\"]\n"
        )
    ))
    .await;
    let port = gw.port();
    for h2 in [false, true] {
        let client = rebound_client(gw, h2);
        // What a browser's same-origin fetch sends after the rebinding.
        let send = |host: &str, path: &str| {
            let origin = format!("http://{host}:{port}");
            client
                .post(format!("{origin}{path}"))
                .header("origin", origin.as_str())
                .header("content-type", "application/json")
                .body(common::agui_hi(&babelgate_store::new_id()))
                .send()
        };
        let r = send("rebind.attacker.example", "/chat").await.unwrap();
        assert_eq!(r.status(), 403, "h2 {h2}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "origin_not_allowed", "{v}");
        let r = send("rebind.attacker.example", "/chat/t-1/stop")
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "h2 {h2}: stop");
        // The same page by a loopback name, and no Origin at all (a server).
        let r = send("127.0.0.1", "/chat").await.unwrap();
        assert_eq!(r.status(), 200, "h2 {h2}");
        r.bytes().await.unwrap();
        let r = client
            .post(format!("http://rebind.attacker.example:{port}/chat"))
            .header("content-type", "application/json")
            .body(common::agui_hi(&babelgate_store::new_id()))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "h2 {h2}: no Origin");
        r.bytes().await.unwrap();
    }
    // An origin the route lists is the operator's word (here on port 80).
    let listed = format!(
        "POST /listed HTTP/1.1\r\nhost: gw.internal\r\norigin: http://gw.internal\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{}",
        common::agui_hi("t-l").len(),
        String::from_utf8(common::agui_hi("t-l")).unwrap()
    );
    assert_eq!(status(&raw(gw, listed.as_bytes()).await), 200);
}

// ---- rate limits: a caller is what was verified, else its address -----------

fn post(gw: SocketAddr, headers: &[(&str, &str)]) -> reqwest::RequestBuilder {
    let mut r = reqwest::Client::builder()
        .timeout(BOUND)
        .build()
        .unwrap()
        .post(format!("http://{gw}/chat"))
        .header("content-type", "application/json")
        .body(common::agui_hi(&babelgate_store::new_id()));
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r
}

const RATE: &str = "[routes.rate_limit]\nrequests_per_s = 0.01\nburst = 2\n";

#[tokio::test]
async fn an_invented_bearer_per_request_does_not_escape_the_rate_limit() {
    let (gw, _g) = gateway(&route("/chat", demo_agent().await, RATE)).await;
    for i in 0..2 {
        let token = format!("Bearer invented-{i}");
        let r = post(gw, &[("authorization", &token)]).send().await.unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
    }
    let r = post(gw, &[("authorization", "Bearer invented-3")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429, "a token nobody verified is not a caller");
    // Nor is an address the client claims for itself.
    let r = post(gw, &[("x-forwarded-for", "198.51.100.77")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429, "X-Forwarded-For from an untrusted peer");
}

#[tokio::test]
async fn behind_a_trusted_proxy_the_caller_is_the_address_it_reports() {
    let toml = format!(
        "[server]\ntrusted_proxies = [\"127.0.0.1/32\"]\n{}",
        route("/chat", demo_agent().await, RATE)
    );
    let (gw, _g) = gateway(&toml).await;
    for _ in 0..2 {
        let r = post(gw, &[("x-forwarded-for", "198.51.100.1")])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
    }
    // What the client wrote left of the proxy's entry is not believed.
    let r = post(gw, &[("x-forwarded-for", "203.0.113.5, 198.51.100.1")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    let r = post(gw, &[("forwarded", "for=198.51.100.1;proto=http")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429, "Forwarded names the same client");
    let r = post(gw, &[("x-forwarded-for", "198.51.100.2")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "another client behind the proxy");
}

// ---- HTTP/1: one Host ----------------------------------------------------------

#[tokio::test]
async fn an_http1_request_without_one_host_gets_400() {
    let (gw, _g) = gateway(&route("/chat", demo_agent().await, "")).await;
    let body = String::from_utf8(common::agui_hi("t-host")).unwrap();
    let post = |hosts: &str| {
        format!(
            "POST /chat HTTP/1.1\r\n{hosts}content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    };
    // The whole POST in one write is the first-request path's; a GET is hyper's.
    for (what, req) in [
        ("POST, none", post("")),
        ("POST, two", post("host: a.example\r\nhost: b.example\r\n")),
        ("POST, not an authority", post("host: a b\r\n")),
        (
            "GET, none",
            b"GET /healthz HTTP/1.1\r\nconnection: close\r\n\r\n".to_vec(),
        ),
        (
            "GET, two",
            b"GET /healthz HTTP/1.1\r\nhost: a\r\nhost: a\r\n\r\n".to_vec(),
        ),
        (
            "HTTP/1.0, two",
            b"GET /healthz HTTP/1.0\r\nhost: a\r\nhost: b\r\n\r\n".to_vec(),
        ),
    ] {
        let a = raw(gw, &req).await;
        assert_eq!(status(&a), 400, "{what}: {a}");
        assert_eq!(code(&a), "invalid_host", "{what}");
    }
    // One Host is served; HTTP/1.0 may have none.
    let a = raw(gw, &post("host: a.example\r\nconnection: close\r\n")).await;
    assert_eq!(status(&a), 200, "{a}");
    let a = raw(gw, b"GET /healthz HTTP/1.0\r\n\r\n").await;
    assert_eq!(status(&a), 200, "{a}");
}

// ---- the inspector while Redis is frozen ---------------------------------------

/// A TCP relay to `to` that stops relaying (holds every byte, answers
/// nothing) while `frozen`: Redis as it is when its process is stopped.
async fn freezable_relay(to: SocketAddr, frozen: Arc<AtomicBool>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = l.accept().await {
            let Ok(server) = TcpStream::connect(to).await else {
                continue;
            };
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            let f1 = frozen.clone();
            let f2 = frozen.clone();
            tokio::spawn(async move {
                let mut b = vec![0u8; 16 * 1024];
                while let Ok(n) = cr.read(&mut b).await {
                    while n > 0 && f1.load(Ordering::Relaxed) {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    if n == 0 || sw.write_all(&b[..n]).await.is_err() {
                        break;
                    }
                }
            });
            tokio::spawn(async move {
                let mut b = vec![0u8; 16 * 1024];
                while let Ok(n) = sr.read(&mut b).await {
                    while n > 0 && f2.load(Ordering::Relaxed) {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    if n == 0 || cw.write_all(&b[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_lookup_while_redis_is_frozen_is_503_store_unavailable() {
    let redis = support::RedisServer::start();
    let real: SocketAddr = redis.url().trim_start_matches("redis://").parse().unwrap();
    let frozen = Arc::new(AtomicBool::new(false));
    let relay = freezable_relay(real, frozen.clone()).await;
    let agent = demo_agent().await;
    let (gw, _g) = gateway(&format!(
        "[store]\nbackend = \"redis\"\nurl = \"redis://{relay}\"\n[inspector]\n{}",
        route("/chat", agent, "")
    ))
    .await;
    let client = reqwest::Client::builder().timeout(BOUND).build().unwrap();
    let url = format!("http://{gw}/inspector/api/runs/r-not-here");
    // Unfrozen, an unknown run is a plain 404.
    assert_eq!(client.get(&url).send().await.unwrap().status(), 404);
    frozen.store(true, Ordering::Relaxed);
    let r = client.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 503);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "store_unavailable", "{v}");
    frozen.store(false, Ordering::Relaxed);
}

// ---- the new keys, checked with their place -------------------------------------

#[test]
fn trusted_proxies_and_allowed_hosts_are_checked_with_their_place() {
    use babelgate::config::Config;
    let ok = Config::parse(
        "[server]\ntrusted_proxies = [\"10.0.0.0/8\", \"::1\", \"192.0.2.7\"]\n[inspector]\nallowed_hosts = [\"gw.internal\"]\n",
    )
    .unwrap();
    assert_eq!(ok.trusted_proxies.len(), 3);
    assert_eq!(ok.inspector.unwrap().allowed_hosts, vec!["gw.internal"]);
    let errors = Config::parse(
        "[server]\ntrusted_proxies = [\"10.0.0.0/8\", \"proxy.example\"]\n[inspector]\nallowed_hosts = [\"gw.internal:8080\", \"*.example\"]\n",
    )
    .unwrap_err();
    let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(text.len(), 3, "{text:?}");
    assert!(
        text[0].starts_with("2:34: server.trusted_proxies"),
        "{text:?}"
    );
    assert!(
        text[1].starts_with("4:18: inspector.allowed_hosts"),
        "{text:?}"
    );
    assert!(
        text[2].starts_with("4:38: inspector.allowed_hosts"),
        "{text:?}"
    );
}
