//! `upstream_ca`: an `https://` and a `wss://` upstream whose certificate
//! chains to a CA of the route's own stream through; without it both are
//! refused (`upstream_unreachable`). The upstream is a second gateway with
//! TLS on its listener (it takes POSTs and WebSocket upgrades at a route),
//! in front of the demo agent. And the key's checks in the config compiler.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use babelgate::config::Config;
use babelgate::demo;
use babelgate::server::Gateway;
use babelgate_core::Dialect;
use serde_json::Value;
use tokio::net::TcpListener;

async fn listener() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

/// A CA, and a `localhost` certificate it signed, written as `ca.pem`,
/// `cert.pem` and `key.pem` in `dir`.
fn test_pki(dir: &Path) {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "babelgate test CA");
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &ca, &ca_key)
        .unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("cert.pem"), leaf.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), leaf_key.serialize_pem()).unwrap();
}

fn route(path: &str, upstream: &str, extra: &str) -> String {
    format!(
        "[[routes]]\npath = \"{path}\"\nclient = \"ag-ui\"\nupstream = \"{upstream}\"\nupstream_protocol = \"ag-ui\"\n{extra}\n"
    )
}

/// The TLS gateway: `/chat` (POST or WebSocket) in front of the demo agent.
async fn tls_upstream(dir: &Path) -> u16 {
    let (l, agent) = listener().await;
    tokio::spawn(demo::serve(l, Dialect::AgUi, Duration::ZERO));
    let toml = format!(
        "[server]\ntls = {{ cert = \"cert.pem\", key = \"key.pem\" }}\n{}",
        route("/chat", &format!("http://{agent}/agent"), "")
    );
    let config = Config::parse_with(&toml, dir, &|_| None).unwrap();
    let acceptor = babelgate::tls::acceptor(config.tls.as_ref().unwrap()).unwrap();
    let (l, addr) = listener().await;
    let gateway = Arc::new(Gateway::new(config).unwrap());
    tokio::spawn(gateway.serve_until(l, Some(acceptor), std::future::pending()));
    addr.port()
}

async fn post(gw: SocketAddr, path: &str) -> (u16, String) {
    let body = serde_json::json!({
        "threadId": format!("t{path}"), "runId": "r1",
        "messages": [{"id": "u1", "role": "user", "content": "over tls"}],
        "tools": [], "context": [], "state": {}, "forwardedProps": {}
    });
    let resp = reqwest::Client::new()
        .post(format!("http://{gw}{path}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

fn events(sse: &str) -> Vec<Value> {
    sse.split("\n\n")
        .filter_map(|b| b.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[tokio::test]
async fn https_and_wss_upstreams_stream_with_upstream_ca_and_are_refused_without() {
    let dir = tempfile::tempdir().unwrap();
    test_pki(dir.path());
    let port = tls_upstream(dir.path()).await;
    let https = format!("https://localhost:{port}/chat");
    let wss = format!("wss://localhost:{port}/chat");
    let ca = "upstream_ca = \"ca.pem\"";
    let toml = [
        route("/https", &https, ca),
        route("/wss", &wss, ca),
        route("/https-no-ca", &https, ""),
        route("/wss-no-ca", &wss, ""),
    ]
    .concat();
    let config =
        Config::parse_with(&toml, dir.path(), &|_| None).unwrap_or_else(|e| panic!("{e:?}"));
    let (l, gw) = listener().await;
    tokio::spawn(Arc::new(Gateway::new(config).unwrap()).serve(l));

    for path in ["/https", "/wss"] {
        let (status, body) = post(gw, path).await;
        assert_eq!(status, 200, "{path}: {body}");
        let evs = events(&body);
        let types: Vec<_> = evs.iter().filter_map(|e| e["type"].as_str()).collect();
        assert_eq!(types.first(), Some(&"RUN_STARTED"), "{path}: {body}");
        assert_eq!(types.last(), Some(&"RUN_FINISHED"), "{path}: {body}");
        assert!(types.contains(&"TEXT_MESSAGE_CONTENT"), "{path}: {body}");
    }
    for path in ["/https-no-ca", "/wss-no-ca"] {
        let (status, body) = post(gw, path).await;
        assert_eq!(status, 502, "{path}: {body}");
        let err: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(err["error"]["code"], "upstream_unreachable", "{path}");
    }
}

#[test]
fn upstream_ca_is_checked_where_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    test_pki(dir.path());
    std::fs::write(dir.path().join("empty.pem"), "no certificate here\n").unwrap();
    std::fs::write(
        dir.path().join("bad.pem"),
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let ok = route("/a", "https://localhost/x", "upstream_ca = \"ca.pem\"");
    let c = Config::parse_with(&ok, dir.path(), &|_| None).unwrap();
    let ca = c.routes[0].upstream_ca.as_ref().unwrap();
    assert_eq!(ca.path, dir.path().join("ca.pem"));
    assert_eq!(ca.certs.len(), 1);
    assert!(c.routes[0].upstream_ca.is_some());
    let wss = route("/a", "wss://localhost/x", "upstream_ca = \"ca.pem\"");
    assert!(Config::parse_with(&wss, dir.path(), &|_| None).is_ok());

    for (upstream, file, want) in [
        ("https://localhost/x", "missing.pem", "missing.pem"),
        (
            "https://localhost/x",
            "empty.pem",
            "holds no PEM certificate",
        ),
        (
            "wss://localhost/x",
            "bad.pem",
            "not a usable CA certificate",
        ),
        (
            "http://localhost/x",
            "ca.pem",
            "only an https:// or wss:// upstream",
        ),
        (
            "ws://localhost/x",
            "ca.pem",
            "only an https:// or wss:// upstream",
        ),
    ] {
        let toml = route("/a", upstream, &format!("upstream_ca = \"{file}\""));
        let errs = Config::parse_with(&toml, dir.path(), &|_| None).unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        // Line 6: where `upstream_ca` is written.
        assert_eq!(errs[0].line, 6, "{errs:?}");
        assert!(
            errs[0].message.starts_with("routes.upstream_ca: "),
            "{errs:?}"
        );
        assert!(errs[0].message.contains(want), "{want}: {errs:?}");
    }
}
