//! Who may see what, and what never leaves the gateway: runs and histories
//! belong to the credential that started them (static keys and JWT
//! subjects), JWT checks, no upstream internals or secrets in responses or
//! logs, one `x-request-id` upstream, one `requests_total` count per stream,
//! no colour codes in piped logs.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use babelgate::config::Config;
use babelgate::server::Gateway;
use babelgate::{demo, registry};
use babelgate_core::request::{Message, RunRequest};
use babelgate_core::{Dialect, Role};
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::watch;

// ---- helpers ----------------------------------------------------------------

/// Every log line of this test binary, captured (all tests share it; each
/// test greps for its own secrets).
fn logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let b = buf.clone();
        let _ = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(move || LogWriter(b.clone()))
            .try_init();
        buf
    })
    .clone()
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn log_text() -> String {
    String::from_utf8_lossy(&logs().lock().unwrap()).into_owned()
}

/// None of `secrets` in any of `texts` (response bodies, headers, logs).
fn assert_clean(texts: &[&str], secrets: &[&str]) {
    for t in texts {
        for s in secrets {
            assert!(!t.contains(s), "`{s}` leaked in:\n{t}");
        }
    }
}

async fn listener() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

async fn start_gateway(toml: &str, env: &[(&str, &str)]) -> SocketAddr {
    logs();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let lookup = move |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let config = Config::parse_with(toml, Path::new("."), &lookup)
        .unwrap_or_else(|e| panic!("{e:?}\n{toml}"));
    let (l, a) = listener().await;
    tokio::spawn(Arc::new(Gateway::new(config).unwrap()).serve(l));
    a
}

/// An AG-UI upstream that records each request (head and body), starts a
/// text message at once and finishes it when `release` turns true.
struct Upstream {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<(String, String)>>>,
    release: watch::Sender<bool>,
}

async fn upstream(released: bool) -> Upstream {
    let (l, addr) = listener().await;
    let requests = Arc::new(Mutex::new(Vec::new()));
    let (release, rx) = watch::channel(released);
    let reqs = requests.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = l.accept().await {
            let reqs = reqs.clone();
            let mut rx = rx.clone();
            tokio::spawn(async move {
                let mut sock = BufReader::new(sock);
                let mut head = String::new();
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if sock.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    head.push_str(&line);
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; len];
                if sock.read_exact(&mut body).await.is_err() {
                    return;
                }
                reqs.lock()
                    .unwrap()
                    .push((head, String::from_utf8_lossy(&body).into_owned()));
                let sock = sock.get_mut();
                let start = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
                    data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n\
                    data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m1\",\"role\":\"assistant\"}\n\n\
                    data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m1\",\"delta\":\"answer\"}\n\n";
                if sock.write_all(start.as_bytes()).await.is_err() {
                    return;
                }
                let _ = rx.wait_for(|r| *r).await;
                let end = "data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m1\"}\n\n\
                    data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n";
                let _ = sock.write_all(end.as_bytes()).await;
            });
        }
    });
    Upstream {
        addr,
        requests,
        release,
    }
}

fn route(client: Dialect, upstream: SocketAddr, extra: &str) -> String {
    format!(
        "[[routes]]\npath = \"/chat\"\nclient = \"{client}\"\nupstream = \"http://{upstream}/agent\"\nupstream_protocol = \"ag-ui\"\n{extra}"
    )
}

fn body(dialect: Dialect, thread: &str, text: &str) -> Vec<u8> {
    let run = RunRequest {
        thread_id: thread.into(),
        run_id: "run-1".into(),
        messages: vec![Message::text_message(format!("u-{text}"), Role::User, text)],
        ..Default::default()
    };
    serde_json::to_vec(&registry::requests(dialect).build_request(&run).unwrap()).unwrap()
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

async fn start(
    gw: SocketAddr,
    dialect: Dialect,
    auth: &str,
    thread: &str,
    text: &str,
) -> reqwest::Response {
    client()
        .post(format!("http://{gw}/chat"))
        .bearer_auth(auth)
        .header("content-type", "application/json")
        .body(body(dialect, thread, text))
        .send()
        .await
        .unwrap()
}

async fn resume(gw: SocketAddr, auth: &str, id: &str) -> reqwest::Response {
    client()
        .get(format!("http://{gw}/chat/{id}/stream"))
        .bearer_auth(auth)
        .send()
        .await
        .unwrap()
}

async fn stop(gw: SocketAddr, auth: &str, id: &str) -> (u16, Value) {
    let r = client()
        .post(format!("http://{gw}/chat/{id}/stop"))
        .bearer_auth(auth)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

const KEYS_AUTH: &str = "[routes.auth]\nbearer_env = [\"KEY_A\", \"KEY_B\"]\n";
const KEY_A: &str = "alice-static-key-0123456789";
const KEY_B: &str = "bob-static-key-9876543210";
const HS_SECRET: &str = "hs256-test-secret-that-is-long-enough";
const JWT_AUTH: &str = "[routes.auth.jwt]\nissuer = \"https://issuer.test\"\naudience = \"babelgate\"\nhs256_secret_env = \"JWT_SECRET\"\n";

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn claims(sub: &str) -> Value {
    json!({"iss": "https://issuer.test", "aud": "babelgate", "sub": sub, "exp": now() + 600, "nbf": now() - 5})
}

fn hs256(claims: &Value, secret: &[u8]) -> String {
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(secret),
    )
    .unwrap()
}

/// Alice's run, resumed and stopped by Bob: Bob gets exactly what an unknown
/// id gets; Alice gets her run.
async fn runs_belong_to_their_caller(
    dialect: Dialect,
    auth: &str,
    env: &[(&str, &str)],
    a: &str,
    b: &str,
) {
    let up = upstream(false).await;
    let gw = start_gateway(
        &route(
            dialect,
            up.addr,
            &format!("on_disconnect = \"keep\"\n{auth}"),
        ),
        env,
    )
    .await;
    let thread = format!("thread-{}", babelgate_store::new_id());
    let mut alice = start(gw, dialect, a, &thread, "alice's secret question").await;
    assert_eq!(alice.status(), 200);
    alice.chunk().await.unwrap().expect("the run started");

    let unknown = resume(gw, b, "no-such-thread").await;
    let foreign = resume(gw, b, &thread).await;
    assert_eq!(unknown.status(), 204, "{dialect}: unknown id");
    assert_eq!(
        foreign.status(),
        204,
        "{dialect}: another caller's id answers as an unknown one"
    );
    assert!(foreign.bytes().await.unwrap().is_empty());

    let (s_unknown, v_unknown) = stop(gw, b, "no-such-thread").await;
    let (s_foreign, v_foreign) = stop(gw, b, &thread).await;
    assert_eq!((s_unknown, s_foreign), (404, 404), "{dialect}: {v_foreign}");
    assert_eq!(v_unknown["error"]["code"], v_foreign["error"]["code"]);

    // The owner's own resume and stop work on the same run.
    let mut mine = resume(gw, a, &thread).await;
    assert_eq!(mine.status(), 200, "{dialect}: the owner resumes");
    let first = mine.chunk().await.unwrap().expect("replayed events");
    assert!(!first.is_empty());
    drop(mine);
    let (s, v) = stop(gw, a, &thread).await;
    assert_eq!(s, 202, "{dialect}: the owner stops: {v}");
    let rest = tokio::time::timeout(Duration::from_secs(30), async {
        let mut all = Vec::new();
        while let Some(c) = alice.chunk().await.unwrap() {
            all.extend_from_slice(&c);
        }
        all
    })
    .await
    .expect("the stopped stream ends");
    assert!(String::from_utf8_lossy(&rest).contains("stopped"));
    let _ = up.release.send(true);
}

/// Bob posting into Alice's AG-Kit conversation id starts his own, empty
/// history: the upstream never sees Alice's words in Bob's request.
async fn histories_belong_to_their_caller(auth: &str, env: &[(&str, &str)], a: &str, b: &str) {
    let up = upstream(true).await;
    let gw = start_gateway(&route(Dialect::AgKit, up.addr, auth), env).await;
    let conv = format!("conv-{}", babelgate_store::new_id());
    for (who, text) in [
        (a, "alice-private-words"),
        (b, "bob-words"),
        (a, "alice-again"),
    ] {
        let r = start(gw, Dialect::AgKit, who, &conv, text).await;
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
    }
    let reqs = up.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 3);
    assert!(
        !reqs[1].1.contains("alice-private-words"),
        "Bob's turn carried Alice's history: {}",
        reqs[1].1
    );
    assert!(
        reqs[2].1.contains("alice-private-words") && !reqs[2].1.contains("bob-words"),
        "Alice keeps her own history only: {}",
        reqs[2].1
    );
}

// ---- ownership ----------------------------------------------------------------

#[tokio::test]
async fn runs_belong_to_their_static_key() {
    let env = [("KEY_A", KEY_A), ("KEY_B", KEY_B)];
    for d in [Dialect::Vercel, Dialect::AgUi] {
        runs_belong_to_their_caller(d, KEYS_AUTH, &env, KEY_A, KEY_B).await;
    }
}

#[tokio::test]
async fn runs_belong_to_their_jwt_subject() {
    let env = [("JWT_SECRET", HS_SECRET)];
    let a = hs256(&claims("alice"), HS_SECRET.as_bytes());
    let b = hs256(&claims("bob"), HS_SECRET.as_bytes());
    for d in [Dialect::Vercel, Dialect::Hai] {
        runs_belong_to_their_caller(d, JWT_AUTH, &env, &a, &b).await;
    }
}

#[tokio::test]
async fn agkit_histories_belong_to_their_static_key() {
    histories_belong_to_their_caller(
        KEYS_AUTH,
        &[("KEY_A", KEY_A), ("KEY_B", KEY_B)],
        KEY_A,
        KEY_B,
    )
    .await;
}

#[tokio::test]
async fn agkit_histories_belong_to_their_jwt_subject() {
    let a = hs256(&claims("alice"), HS_SECRET.as_bytes());
    let b = hs256(&claims("bob"), HS_SECRET.as_bytes());
    histories_belong_to_their_caller(JWT_AUTH, &[("JWT_SECRET", HS_SECRET)], &a, &b).await;
}

// ---- JWT ------------------------------------------------------------------------

/// Posts with `token`; the status, the `www-authenticate` header and the body.
async fn try_token(gw: SocketAddr, token: &str) -> (u16, Option<String>, String) {
    let r = start(
        gw,
        Dialect::AgUi,
        token,
        &format!("t-{}", babelgate_store::new_id()),
        "hi",
    )
    .await;
    let status = r.status().as_u16();
    let www = r
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string());
    (status, www, r.text().await.unwrap())
}

async fn refused(gw: SocketAddr, token: &str, what: &str) {
    let (status, www, body) = try_token(gw, token).await;
    assert_eq!(status, 401, "{what}: {body}");
    assert_eq!(www.as_deref(), Some("Bearer"), "{what}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], "unauthorized", "{what}");
    assert_clean(&[&body, &log_text()], &[token]);
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[tokio::test]
async fn hs256_tokens_are_checked() {
    let up = upstream(true).await;
    let gw = start_gateway(
        &route(Dialect::AgUi, up.addr, JWT_AUTH),
        &[("JWT_SECRET", HS_SECRET)],
    )
    .await;
    let key = HS_SECRET.as_bytes();
    let (s, _, body) = try_token(gw, &hs256(&claims("alice"), key)).await;
    assert_eq!(s, 200, "{body}");

    let mut expired = claims("alice");
    expired["exp"] = json!(now() - 3600);
    refused(gw, &hs256(&expired, key), "expired").await;
    let mut early = claims("alice");
    early["nbf"] = json!(now() + 3600);
    refused(gw, &hs256(&early, key), "not yet valid").await;
    let mut iss = claims("alice");
    iss["iss"] = json!("https://evil.test");
    refused(gw, &hs256(&iss, key), "wrong issuer").await;
    let mut aud = claims("alice");
    aud["aud"] = json!("another-service");
    refused(gw, &hs256(&aud, key), "wrong audience").await;
    let mut nosub = claims("alice");
    nosub.as_object_mut().unwrap().remove("sub");
    refused(gw, &hs256(&nosub, key), "no sub").await;
    refused(
        gw,
        &hs256(&claims("alice"), b"another-secret-entirely"),
        "wrong key",
    )
    .await;
    let none = format!(
        "{}.{}.",
        b64(br#"{"alg":"none","typ":"JWT"}"#),
        b64(claims("alice").to_string().as_bytes())
    );
    refused(gw, &none, "alg none").await;
    refused(gw, "not-a-token", "garbage").await;
}

/// An ES256 key pair: the signing key and its public JWK.
fn es256_key(kid: &str) -> (EncodingKey, Value) {
    let kp = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let raw = kp.public_key_raw();
    assert_eq!(raw.len(), 65, "uncompressed P-256 point");
    let jwk = json!({
        "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid,
        "x": b64(&raw[1..33]), "y": b64(&raw[33..]),
    });
    (EncodingKey::from_ec_der(&kp.serialize_der()), jwk)
}

fn es256(claims: &Value, key: &EncodingKey, kid: &str) -> String {
    let mut h = Header::new(Algorithm::ES256);
    h.kid = Some(kid.into());
    jsonwebtoken::encode(&h, claims, key).unwrap()
}

fn jwks_auth(source: &str) -> String {
    format!(
        "[routes.auth.jwt]\nissuer = \"https://issuer.test\"\naudience = \"babelgate\"\n{source}\n"
    )
}

#[tokio::test]
async fn jwks_file_tokens_are_checked_and_alg_confusion_fails() {
    let (key, jwk) = es256_key("k1");
    let (other, _) = es256_key("k1");
    let jwks = json!({ "keys": [jwk] }).to_string();
    let dir = std::env::temp_dir().join(format!("babelgate-jwks-{}", babelgate_store::new_id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("jwks.json");
    std::fs::write(&file, &jwks).unwrap();
    let up = upstream(true).await;
    let gw = start_gateway(
        &route(
            Dialect::AgUi,
            up.addr,
            &jwks_auth(&format!("jwks_file = {:?}", file.display().to_string())),
        ),
        &[],
    )
    .await;
    let (s, _, body) = try_token(gw, &es256(&claims("alice"), &key, "k1")).await;
    assert_eq!(s, 200, "{body}");
    refused(
        gw,
        &es256(&claims("alice"), &other, "k1"),
        "signed by another key",
    )
    .await;
    let mut expired = claims("alice");
    expired["exp"] = json!(now() - 3600);
    refused(gw, &es256(&expired, &key, "k1"), "expired").await;
    // The classic confusion: HMAC "signed" with the public key's text.
    for secret in [jwks.as_bytes(), jwk["x"].as_str().unwrap().as_bytes()] {
        let mut h = Header::new(Algorithm::HS256);
        h.kid = Some("k1".into());
        let t =
            jsonwebtoken::encode(&h, &claims("alice"), &EncodingKey::from_secret(secret)).unwrap();
        refused(gw, &t, "HS256 against a JWKS").await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn rs256_jwks_tokens_are_checked_and_hs256_against_it_fails() {
    let fixture: Value =
        serde_json::from_str(include_str!("data/jwt-rs256-test-key.json")).unwrap();
    let der = base64::engine::general_purpose::STANDARD
        .decode(fixture["private_key_pkcs1_der_b64"].as_str().unwrap())
        .unwrap();
    let key = EncodingKey::from_rsa_der(&der);
    let jwks = fixture["jwks"].to_string();
    let dir = std::env::temp_dir().join(format!("babelgate-jwks-{}", babelgate_store::new_id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("jwks.json");
    std::fs::write(&file, &jwks).unwrap();
    let up = upstream(true).await;
    let source = format!("jwks_file = {:?}", file.display().to_string());
    let gw = start_gateway(&route(Dialect::AgUi, up.addr, &jwks_auth(&source)), &[]).await;
    let rs256 = |claims: &Value| {
        let mut h = Header::new(Algorithm::RS256);
        h.kid = Some("rsa1".into());
        jsonwebtoken::encode(&h, claims, &key).unwrap()
    };
    let (s, _, body) = try_token(gw, &rs256(&claims("alice"))).await;
    assert_eq!(s, 200, "{body}");
    let mut aud = claims("alice");
    aud["aud"] = json!("someone-else");
    refused(gw, &rs256(&aud), "wrong audience").await;
    let n = fixture["jwks"]["keys"][0]["n"].as_str().unwrap();
    for secret in [jwks.as_bytes(), n.as_bytes()] {
        let mut h = Header::new(Algorithm::HS256);
        h.kid = Some("rsa1".into());
        let t =
            jsonwebtoken::encode(&h, &claims("alice"), &EncodingKey::from_secret(secret)).unwrap();
        refused(gw, &t, "HS256 against an RS256 JWKS").await;
    }
    // A route that lists only ES256 refuses RS256 tokens.
    let only_es = jwks_auth(&format!("{source}\nalgorithms = [\"ES256\"]"));
    let gw = start_gateway(&route(Dialect::AgUi, up.addr, &only_es), &[]).await;
    refused(gw, &rs256(&claims("alice")), "alg not listed").await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A JWKS served over HTTP on a local port, counting its fetches.
async fn jwks_server(jwks: String) -> (SocketAddr, Arc<AtomicUsize>) {
    let (l, addr) = listener().await;
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = l.accept().await {
            h.fetch_add(1, Ordering::SeqCst);
            let jwks = jwks.clone();
            tokio::spawn(async move {
                let mut buf = vec![0; 4096];
                let _ = sock.read(&mut buf).await;
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{jwks}",
                    jwks.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    (addr, hits)
}

#[tokio::test]
async fn jwks_url_tokens_are_checked_and_refetches_are_rate_limited() {
    let (key, jwk) = es256_key("k1");
    let (rotated, _) = es256_key("k2");
    let (addr, hits) = jwks_server(json!({ "keys": [jwk] }).to_string()).await;
    let up = upstream(true).await;
    let gw = start_gateway(
        &route(
            Dialect::AgUi,
            up.addr,
            &jwks_auth(&format!("jwks_url = \"http://{addr}/jwks.json\"")),
        ),
        &[],
    )
    .await;
    let (s, _, body) = try_token(gw, &es256(&claims("alice"), &key, "k1")).await;
    assert_eq!(s, 200, "{body}");
    let (s, _, _) = try_token(gw, &es256(&claims("bob"), &key, "k1")).await;
    assert_eq!(s, 200);
    assert_eq!(hits.load(Ordering::SeqCst), 1, "the JWKS is cached");
    // Unknown kids may ask for a fresh JWKS, but not in a flood.
    for _ in 0..5 {
        refused(gw, &es256(&claims("alice"), &rotated, "k2"), "unknown kid").await;
    }
    assert!(
        hits.load(Ordering::SeqCst) <= 2,
        "{} fetches",
        hits.load(Ordering::SeqCst)
    );
}

#[tokio::test]
async fn a_jwks_url_that_never_answers_does_not_hang_the_request() {
    let (key, _) = es256_key("k1");
    // Accepts and never answers.
    let (l, addr) = listener().await;
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = l.accept().await {
            held.push(s);
        }
    });
    let up = upstream(true).await;
    let gw = start_gateway(
        &route(
            Dialect::AgUi,
            up.addr,
            &jwks_auth(&format!("jwks_url = \"http://{addr}/jwks.json\"")),
        ),
        &[],
    )
    .await;
    // The fetch gives up after its own 5 s; this bound only matters on failure.
    tokio::time::timeout(
        Duration::from_secs(60),
        refused(gw, &es256(&claims("a"), &key, "k1"), "no JWKS"),
    )
    .await
    .expect("answered");
}

#[test]
fn jwt_settings_are_checked_with_their_line_and_never_print_the_secret() {
    let base = "[[routes]]\npath = \"/c\"\nclient = \"ag-ui\"\nupstream = \"http://127.0.0.1:1/\"\nupstream_protocol = \"ag-ui\"\n";
    let with = |jwt: &str| format!("{base}[routes.auth.jwt]\n{jwt}");
    let no_env = |_: &str| None;
    let errs = Config::parse_with(
        &with("issuer = \"i\"\naudience = \"a\"\nhs256_secret_env = \"MISSING_SECRET\"\n"),
        Path::new("."),
        &no_env,
    )
    .unwrap_err();
    assert_eq!((errs.len(), errs[0].line), (1, 9), "{errs:?}");
    assert!(errs[0].message.contains("MISSING_SECRET"));

    let errs = Config::parse_with(
        &with("issuer = \"i\"\naudience = \"a\"\n"),
        Path::new("."),
        &no_env,
    )
    .unwrap_err();
    assert!(errs[0].message.contains("exactly one"), "{errs:?}");
    let errs = Config::parse_with(
        &with("audience = \"a\"\njwks_url = \"http://127.0.0.1:1/k\"\nalgorithms = [\"ES256\", \"HS256\"]\n"),
        Path::new("."),
        &no_env,
    )
    .unwrap_err();
    let lines: Vec<_> = errs.iter().map(|e| e.line).collect();
    assert!(
        errs.iter()
            .any(|e| e.message.contains("`issuer` is required")),
        "{errs:?}"
    );
    assert!(
        lines.contains(&9),
        "HS256 with a JWKS, at its line: {errs:?}"
    );
    let errs = Config::parse_with(
        &with("issuer = \"i\"\naudience = \"a\"\njwks_file = \"/nonexistent/jwks.json\"\n"),
        Path::new("."),
        &no_env,
    )
    .unwrap_err();
    assert_eq!(errs[0].line, 9, "{errs:?}");

    let env = |k: &str| (k == "S").then(|| "the-very-secret-value".to_string());
    let c = Config::parse_with(
        &with("issuer = \"i\"\naudience = \"a\"\nhs256_secret_env = \"S\"\nleeway_s = 5\n"),
        Path::new("."),
        &env,
    )
    .unwrap();
    let debug = format!("{c:?}");
    assert!(!debug.contains("the-very-secret-value"), "{debug}");
    assert!(debug.contains("Hs256(<redacted>)"));
}

// ---- secrets and internals --------------------------------------------------------

#[tokio::test]
async fn an_unreachable_upstream_is_not_named_to_the_client_nor_its_password_logged() {
    let (l, dead) = listener().await;
    drop(l);
    let toml = format!(
        "[[routes]]\npath = \"/chat\"\nclient = \"ag-ui\"\nupstream = \"http://svc-user:pw-UNREACH-7f3@{dead}/internal-agent-path?token=QTOKEN-UNREACH\"\nupstream_protocol = \"ag-ui\"\n"
    );
    let gw = start_gateway(&toml, &[]).await;
    let r = start(gw, Dialect::AgUi, "x", "t-unreach", "hi").await;
    assert_eq!(r.status(), 502);
    let body = r.text().await.unwrap();
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], "upstream_unreachable");
    assert_clean(
        &[&body],
        &[
            &dead.to_string(),
            "internal-agent-path",
            "svc-user",
            "pw-UNREACH-7f3",
            "QTOKEN-UNREACH",
            "127.0.0.1",
        ],
    );
    // The operator still learns where it failed, without the secrets.
    let logs = log_text();
    assert!(
        logs.contains("internal-agent-path"),
        "the log names the upstream"
    );
    assert_clean(&[&logs], &["pw-UNREACH-7f3", "QTOKEN-UNREACH"]);
}

#[tokio::test]
async fn an_upstream_error_body_goes_to_the_log_not_the_client() {
    let (l, addr) = listener().await;
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0; 65536];
                let _ = s.read(&mut buf).await;
                let b = "Traceback: db.internal.corp:5432 refused INTERNAL-TRACE-91";
                let _ = s
                    .write_all(format!("HTTP/1.1 500 Internal Server Error\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{b}", b.len()).as_bytes())
                    .await;
            });
        }
    });
    let gw = start_gateway(&route(Dialect::Vercel, addr, ""), &[]).await;
    let r = start(gw, Dialect::Vercel, "x", "t-500", "hi").await;
    assert_eq!(r.status(), 502);
    let body = r.text().await.unwrap();
    assert!(body.contains("500"), "{body}");
    assert_clean(&[&body], &["INTERNAL-TRACE-91", "db.internal.corp"]);
    assert!(
        log_text().contains("INTERNAL-TRACE-91"),
        "kept for the operator"
    );
}

#[tokio::test]
async fn readyz_tells_only_a_status() {
    let toml = "[store]\nbackend = \"redis\"\nurl = \"redis://:pw-READYZ-55@127.0.0.1:1/0\"\n\n[[routes]]\npath = \"/c\"\nclient = \"ag-ui\"\nupstream = \"http://127.0.0.1:1/\"\nupstream_protocol = \"ag-ui\"\n";
    logs();
    let config = Config::parse(toml).unwrap();
    let mut store = babelgate::server::store_config(&config);
    if let babelgate_store::StoreConfig::Redis(r) = &mut store {
        r.connect_timeout = Duration::from_millis(500);
    }
    let stores = store.build().await.unwrap();
    let (l, gw) = listener().await;
    tokio::spawn(Arc::new(Gateway::with_stores(config, stores).unwrap()).serve(l));
    let r = reqwest::get(format!("http://{gw}/readyz")).await.unwrap();
    assert_eq!(r.status(), 503);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v, json!({"status": "store unavailable"}));
    assert_clean(&[&log_text()], &["pw-READYZ-55"]);
}

#[tokio::test]
async fn the_request_id_goes_upstream_once() {
    let up = upstream(true).await;
    let gw = start_gateway(
        &route(Dialect::AgUi, up.addr, "forward_headers = [\"x-request-id\"]\nupstream_headers = { x-request-id = \"configured\" }\n"),
        &[],
    )
    .await;
    let r = client()
        .post(format!("http://{gw}/chat"))
        .header("content-type", "application/json")
        .header("x-request-id", "client-id-42")
        .body(body(Dialect::AgUi, "t-rid", "hi"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-request-id"], "client-id-42");
    r.bytes().await.unwrap();
    let (head, _) = up.requests.lock().unwrap()[0].clone();
    let ids: Vec<&str> = head
        .lines()
        .filter(|l| l.to_ascii_lowercase().starts_with("x-request-id:"))
        .collect();
    assert_eq!(ids, ["x-request-id: client-id-42"], "{head}");
}

// ---- metrics and logs ---------------------------------------------------------------

#[tokio::test]
async fn a_stream_whose_client_left_is_counted_once_as_499() {
    let up = upstream(false).await;
    let gw = start_gateway(&route(Dialect::AgUi, up.addr, ""), &[]).await;
    let mut r = start(gw, Dialect::AgUi, "x", "t-gone", "hi").await;
    assert_eq!(r.status(), 200);
    r.chunk().await.unwrap().expect("the stream started");
    drop(r);
    let mut text = String::new();
    for _ in 0..500 {
        text = reqwest::get(format!("http://{gw}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if text.contains("babelgate_stream_duration_seconds_count") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        text.contains(r#"babelgate_requests_total{route="/chat",status="499"} 1"#),
        "{text}"
    );
    assert!(
        !text.contains(r#"babelgate_requests_total{route="/chat",status="200"}"#),
        "counted twice:\n{text}"
    );
    let _ = up.release.send(true);
}

/// Runs `babelgate serve` on `toml` with standard error on a pipe until it
/// logs `until` or exits; its standard error.
async fn serve_stderr(toml: &str, until: &str) -> String {
    let dir = std::env::temp_dir().join(format!("babelgate-sec-{}", babelgate_store::new_id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("gateway.toml");
    std::fs::write(&file, toml).unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_babelgate"))
        .args(["serve", "--config"])
        .arg(&file)
        .env("BABELGATE_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut all = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(60), async {
        let mut line = String::new();
        while err.read_line(&mut line).await.unwrap_or(0) > 0 {
            all.push_str(&line);
            if line.contains(until) {
                break;
            }
            line.clear();
        }
    })
    .await;
    let _ = child.kill().await;
    let _ = std::fs::remove_dir_all(&dir);
    all
}

#[tokio::test]
async fn start_up_logs_hold_no_passwords_and_no_colour_codes_on_a_pipe() {
    let toml = "[server]\nlisten = \"127.0.0.1:0\"\n\n[[routes]]\npath = \"/c\"\nclient = \"ag-ui\"\nupstream = \"http://agent-user:pw-STARTUP-31@127.0.0.1:9/agent?key=QKEY-STARTUP\"\nupstream_protocol = \"ag-ui\"\n";
    let err = serve_stderr(toml, "babelgate listening").await;
    assert!(err.contains("babelgate listening"), "{err}");
    assert!(
        err.contains("127.0.0.1:9/agent"),
        "the route is logged: {err}"
    );
    assert_clean(
        &[&err],
        &["pw-STARTUP-31", "QKEY-STARTUP", "agent-user", "\x1b"],
    );
}

#[tokio::test]
async fn a_bad_redis_url_is_refused_without_printing_its_password() {
    let toml = "[server]\nlisten = \"127.0.0.1:0\"\n\n[store]\nbackend = \"redis\"\nurl = \"redis://:pw-REDIS-77@127.0.0.1:notaport/0\"\n\n[[routes]]\npath = \"/c\"\nclient = \"ag-ui\"\nupstream = \"http://127.0.0.1:9/agent\"\nupstream_protocol = \"ag-ui\"\n";
    let err = serve_stderr(toml, "babelgate listening").await;
    assert!(err.contains("store"), "it says what is wrong: {err}");
    assert_clean(&[&err], &["pw-REDIS-77"]);
}

#[tokio::test]
async fn the_demo_agent_still_serves_without_auth() {
    // A route without auth takes any caller (the id is the capability).
    let (l, agent) = listener().await;
    tokio::spawn(demo::serve(l, Dialect::AgUi, Duration::from_millis(1)));
    let gw = start_gateway(&route(Dialect::AgUi, agent, ""), &[]).await;
    let r = start(gw, Dialect::AgUi, "anything", "t-open", "hi").await;
    assert_eq!(r.status(), 200);
    assert!(String::from_utf8_lossy(&r.bytes().await.unwrap()).contains("RUN_FINISHED"));
}
