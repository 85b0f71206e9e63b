//! The inspector's gateway side, over sockets: captures of every pair replay
//! to the bytes the client got, the list and the ring bounds, the per-run
//! cap, sampling, who is let in, what is redacted, the downloads and
//! `translate --setup`, and a run of one instance seen from another on a
//! shared Redis. The page itself is driven in Chromium by
//! tests/node/e2e/inspector.test.mjs.

#[path = "../../../lib/store/tests/support/mod.rs"]
mod support;

mod common;

use common::{gateway, listener};

use std::net::SocketAddr;
use std::time::Duration;

use babelgate::config::Config;
use babelgate::{demo, registry};
use babelgate_core::request::{Message, RunRequest};
use babelgate_core::{Dialect, Role};
use bytes::Bytes;
use serde_json::Value;

const BOUND: Duration = Duration::from_secs(20);
const ALL: [Dialect; 4] = [Dialect::AgUi, Dialect::Hai, Dialect::Vercel, Dialect::AgKit];

async fn demo_agent(dialect: Dialect) -> SocketAddr {
    let (l, a) = listener().await;
    tokio::spawn(demo::serve(l, dialect, Duration::ZERO));
    a
}

fn route(path: &str, client: Dialect, upstream: SocketAddr, from: Dialect, extra: &str) -> String {
    format!(
        "[[routes]]\npath = \"{path}\"\nclient = \"{client}\"\nupstream = \"http://{upstream}/agent\"\nupstream_protocol = \"{from}\"\n{extra}\n"
    )
}

fn body(client: Dialect, text: &str) -> Vec<u8> {
    let run = RunRequest {
        thread_id: babelgate_store::new_id(),
        run_id: babelgate_store::new_id(),
        messages: vec![Message::text_message("u1", Role::User, text)],
        ..Default::default()
    };
    serde_json::to_vec(&registry::requests(client).build_request(&run).unwrap()).unwrap()
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().timeout(BOUND).build().unwrap()
}

async fn run(gw: SocketAddr, path: &str, client: Dialect, text: &str) -> Bytes {
    let r = http()
        .post(format!("http://{gw}{path}"))
        .header("content-type", "application/json")
        .header("authorization", "Bearer sk-do-not-show")
        .body(body(client, text))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{path}");
    r.bytes().await.unwrap()
}

async fn get(url: String) -> reqwest::Response {
    http().get(url).send().await.unwrap()
}

async fn get_bytes(url: String) -> Bytes {
    get(url).await.bytes().await.unwrap()
}

async fn get_json(url: String) -> Value {
    let r = get(url).await;
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

async fn runs(gw: SocketAddr) -> Vec<Value> {
    get_json(format!("http://{gw}/inspector/api/runs")).await["runs"]
        .as_array()
        .unwrap()
        .clone()
}

/// The runs once every one of them has ended.
async fn ended_runs(gw: SocketAddr, n: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let r = runs(gw).await;
        if r.len() >= n && r.iter().all(|r| r["status"] != "streaming") {
            return r;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "runs did not end: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The SSE body without the run log's `id:` lines (the capture is the
/// translation's output; ids are the run log's).
fn without_ids(body: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(body);
    text.split_inclusive('\n')
        .filter(|l| !l.starts_with("id: "))
        .collect::<String>()
        .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pair_is_captured_and_its_capture_replays_to_what_the_client_got() {
    let mut toml = String::from("[inspector]\nmax_runs = 64\n");
    for from in ALL {
        let agent = demo_agent(from).await;
        for to in ALL {
            toml.push_str(&route(&format!("/{from}-{to}"), to, agent, from, ""));
        }
    }
    let (gw, _g) = gateway(&toml).await;
    let mut got = std::collections::HashMap::new();
    for from in ALL {
        for to in ALL {
            let path = format!("/{from}-{to}");
            got.insert(path.clone(), run(gw, &path, to, "weather").await);
        }
    }
    let list = ended_runs(gw, 16).await;
    assert_eq!(list.len(), 16);
    for s in &list {
        let path = s["route"].as_str().unwrap().to_string();
        assert_eq!(s["status"], "completed", "{s}");
        assert!(s["events_in"].as_u64().unwrap() > 3, "{s}");
        assert!(s["events_out"].as_u64().unwrap() > 3, "{s}");
        assert!(s["ttfe_ms"].is_u64(), "{s}");
        let id = s["id"].as_str().unwrap();
        let d = get_json(format!("http://{gw}/inspector/api/runs/{id}")).await;
        assert_eq!(d["replay"]["matches"], true, "{path}: the replay differs");
        let rows = d["rows"].as_array().unwrap();
        assert!(rows.len() > 3, "{path}");
        // Every client event the replay wrote is in some row, in order.
        let client_events: usize = rows
            .iter()
            .map(|r| r["client"].as_array().unwrap().len())
            .sum();
        assert_eq!(
            client_events as u64,
            s["events_out"].as_u64().unwrap(),
            "{path}"
        );
        let client = get_bytes(format!("http://{gw}/inspector/api/runs/{id}/client")).await;
        assert_eq!(
            String::from_utf8_lossy(&client),
            String::from_utf8_lossy(&without_ids(&got[&path])),
            "{path}: the client capture is not what the client got"
        );
    }
}

#[tokio::test]
async fn the_view_marks_what_the_translation_dropped_and_synthesized() {
    // An AG-UI upstream whose reasoning phase (REASONING_START/END) a
    // Vercel client has no part for, and whose end the Vercel encoder
    // follows with its own `[DONE]`.
    let (l, up) = listener().await;
    let stream = [
        r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#,
        r#"{"type":"REASONING_START","messageId":"p1"}"#,
        r#"{"type":"REASONING_END","messageId":"p1"}"#,
        r#"{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"hi"}"#,
        r#"{"type":"TEXT_MESSAGE_END","messageId":"m1"}"#,
        r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#,
    ]
    .iter()
    .map(|e| format!("data: {e}\n\n"))
    .collect::<String>();
    tokio::spawn(common::serve_sse(l, stream));
    let toml = format!(
        "[inspector]\n{}",
        route("/chat", Dialect::Vercel, up, Dialect::AgUi, "")
    );
    let (gw, _g) = gateway(&toml).await;
    run(gw, "/chat", Dialect::Vercel, "hi").await;
    let id = ended_runs(gw, 1).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let d = get_json(format!("http://{gw}/inspector/api/runs/{id}")).await;
    let rows = d["rows"].as_array().unwrap();
    let marks_of = |ty: &str| -> Vec<String> {
        rows.iter()
            .find(|r| r["upstream"]["type"] == ty)
            .unwrap_or_else(|| panic!("no row for {ty}: {rows:?}"))["marks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(marks_of("REASONING_START"), ["dropped"]);
    assert_eq!(marks_of("REASONING_END"), ["dropped"]);
    // The text's start waits for its first delta (the shape stage holds
    // an empty start back): both rows say so.
    assert_eq!(marks_of("TEXT_MESSAGE_START"), ["merged"]);
    let last = rows.last().unwrap();
    assert!(last["upstream"].is_null());
    assert_eq!(last["client"][0]["type"], "[DONE]");
    assert_eq!(last["marks"], serde_json::json!(["synthesized"]));
}

#[tokio::test]
async fn a_live_run_can_be_opened_while_it_streams() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // An upstream that sends a start and a delta, then holds the stream
    // until the test lets it finish.
    let (l, up) = listener().await;
    let (release, held) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut buf = vec![0u8; 65536];
        let _ = s.read(&mut buf).await.unwrap();
        let ev = |e: &str| format!("data: {e}\n\n");
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
        let first = [
            r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#,
            r#"{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}"#,
            r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"half"}"#,
        ];
        s.write_all(head.as_bytes()).await.unwrap();
        for e in first {
            s.write_all(ev(e).as_bytes()).await.unwrap();
        }
        let _ = held.await;
        for e in [
            r#"{"type":"TEXT_MESSAGE_END","messageId":"m"}"#,
            r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#,
        ] {
            s.write_all(ev(e).as_bytes()).await.unwrap();
        }
    });
    let toml = format!(
        "[inspector]\n{}",
        route("/chat", Dialect::Vercel, up, Dialect::AgUi, "")
    );
    let (gw, _g) = gateway(&toml).await;
    let mut r = http()
        .post(format!("http://{gw}/chat"))
        .header("content-type", "application/json")
        .body(body(Dialect::Vercel, "hi"))
        .send()
        .await
        .unwrap();
    // Read until the delta is out: the capture has it by then.
    let mut got = Vec::new();
    while !String::from_utf8_lossy(&got).contains("half") {
        got.extend_from_slice(&r.chunk().await.unwrap().expect("more"));
    }
    let s = &runs(gw).await[0];
    assert_eq!(s["status"], "streaming");
    assert_eq!(s["events_in"], 3);
    let id = s["id"].as_str().unwrap().to_string();
    let d = get_json(format!("http://{gw}/inspector/api/runs/{id}")).await;
    assert!(
        d["replay"]["matches"].is_null(),
        "not checked while it runs"
    );
    let rows = d["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "one row per upstream event so far: {rows:?}");
    assert!(rows.iter().all(|r| !r["upstream"].is_null()));
    assert!(rows[2]["client"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["text"].as_str().unwrap().contains("half")));
    release.send(()).unwrap();
    r.bytes().await.unwrap();
    let s = &ended_runs(gw, 1).await[0];
    assert_eq!(s["status"], "completed");
    let d = get_json(format!("http://{gw}/inspector/api/runs/{id}")).await;
    assert_eq!(d["replay"]["matches"], true);
}

#[tokio::test]
async fn only_loopback_clients_unless_auth_is_set() {
    let agent = demo_agent(Dialect::AgUi).await;
    let routes = route("/chat", Dialect::AgUi, agent, Dialect::AgUi, "");
    let get = |path: &str| {
        http::Request::get(path)
            .header("host", "127.0.0.1:8080")
            .body(http_body_util::Full::new(Bytes::new()))
            .unwrap()
    };
    let (_, open) = gateway(&format!("[inspector]\n{routes}")).await;
    let far: SocketAddr = "203.0.113.7:40000".parse().unwrap();
    let near: SocketAddr = "127.0.0.1:40000".parse().unwrap();
    let r = open.handle(get("/inspector/api/runs"), far).await;
    assert_eq!(r.status(), 403);
    let r = open.handle(get("/inspector/"), far).await;
    assert_eq!(r.status(), 403);
    let r = open.handle(get("/inspector/api/runs"), near).await;
    assert_eq!(r.status(), 200);
    let mapped: SocketAddr = "[::ffff:127.0.0.1]:40000".parse().unwrap();
    assert_eq!(
        open.handle(get("/inspector/api/runs"), mapped)
            .await
            .status(),
        200
    );

    std::env::set_var("INSPECTOR_TEST_KEY", "inspector-key-1");
    let (_, guarded) = gateway(&format!(
        "[inspector]\n[inspector.auth]\nbearer_env = [\"INSPECTOR_TEST_KEY\"]\n{routes}"
    ))
    .await;
    let r = guarded.handle(get("/inspector/api/runs"), far).await;
    assert_eq!(r.status(), 401);
    let mut req = get("/inspector/api/runs");
    req.headers_mut()
        .insert("authorization", "Bearer inspector-key-1".parse().unwrap());
    assert_eq!(guarded.handle(req, far).await.status(), 200);
    // With auth set, a loopback client needs the key too.
    assert_eq!(
        guarded
            .handle(get("/inspector/api/runs"), near)
            .await
            .status(),
        401
    );
}

#[tokio::test]
async fn the_page_its_files_and_downloads_are_served_safely() {
    let agent = demo_agent(Dialect::AgUi).await;
    let toml = format!(
        "[inspector]\npath = \"/debug/inspect\"\n{}",
        route("/chat", Dialect::Vercel, agent, Dialect::AgUi, "")
    );
    let (gw, _g) = gateway(&toml).await;
    let no_redirect = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = no_redirect
        .get(format!("http://{gw}/debug/inspect"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 308);
    assert_eq!(r.headers()["location"], "/debug/inspect/");
    for (path, ctype) in [
        ("/", "text/html"),
        ("/assets/app.js", "text/javascript"),
        ("/assets/app.css", "text/css"),
    ] {
        let r = get(format!("http://{gw}/debug/inspect{path}")).await;
        assert_eq!(r.status(), 200, "{path}");
        assert!(r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with(ctype));
        assert!(r.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("default-src 'self'"));
        assert_eq!(r.headers()["x-frame-options"], "DENY");
    }
    let r = http()
        .post(format!("http://{gw}/debug/inspect/api/runs"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    let r = get(format!("http://{gw}/debug/inspect/api/runs/nope")).await;
    assert_eq!(r.status(), 404);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "no_capture");

    run(gw, "/chat", Dialect::Vercel, "weather").await;
    let runs = get_json(format!("http://{gw}/debug/inspect/api/runs")).await;
    let id = runs["runs"][0]["id"].as_str().unwrap().to_string();
    for (what, name) in [
        ("upstream", format!("{id}.upstream.sse")),
        ("client", format!("{id}.client.sse")),
        ("setup", format!("{id}.setup.json")),
    ] {
        let r = get(format!("http://{gw}/debug/inspect/api/runs/{id}/{what}")).await;
        assert_eq!(r.status(), 200);
        assert_eq!(
            r.headers()["content-disposition"],
            format!("attachment; filename=\"{name}\"").as_str()
        );
    }
}

#[tokio::test]
async fn secrets_never_reach_the_view() {
    let agent = demo_agent(Dialect::AgUi).await;
    std::env::set_var("INSPECTOR_UPSTREAM_SECRET", "upstream-secret-42");
    let toml = format!(
        "[inspector]\n{}",
        route(
            "/chat",
            Dialect::Vercel,
            agent,
            Dialect::AgUi,
            "forward_headers = [\"x-tenant\"]\n[routes.upstream_headers]\nx-upstream-token = \"${INSPECTOR_UPSTREAM_SECRET}\"\nx-plain = \"visible\""
        )
    );
    let (gw, _g) = gateway(&toml).await;
    let r = http()
        .post(format!("http://{gw}/chat"))
        .header("content-type", "application/json")
        .header("authorization", "Bearer sk-do-not-show")
        .header("cookie", "session=do-not-show")
        .header("x-tenant", "tenant-do-not-show")
        .body(body(Dialect::Vercel, "hi"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.bytes().await.unwrap();
    let id = ended_runs(gw, 1).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let detail = get(format!("http://{gw}/inspector/api/runs/{id}"))
        .await
        .text()
        .await
        .unwrap();
    for secret in ["sk-do-not-show", "do-not-show", "upstream-secret-42"] {
        assert!(!detail.contains(secret), "`{secret}` reached the view");
    }
    let d: Value = serde_json::from_str(&detail).unwrap();
    let sent = d["request"]["upstream"]["headers"].as_array().unwrap();
    let header = |name: &str| {
        sent.iter()
            .find(|h| h[0] == name)
            .unwrap_or_else(|| panic!("{name} not shown: {sent:?}"))[1]
            .clone()
    };
    assert_eq!(header("x-upstream-token"), "[redacted]");
    assert_eq!(header("x-tenant"), "[redacted]");
    // Every configured header is hidden, secret or not; the rest shows.
    assert_eq!(header("x-plain"), "[redacted]");
    assert_eq!(header("accept"), "text/event-stream");
    assert!(d["request"]["received"]["body"]
        .as_str()
        .unwrap()
        .contains("hi"));
}

#[tokio::test]
async fn the_ring_the_per_run_cap_and_sampling_bound_memory() {
    let agent = demo_agent(Dialect::AgUi).await;
    let routes = route("/chat", Dialect::Vercel, agent, Dialect::AgUi, "");
    let (gw, _g) = gateway(&format!("[inspector]\nmax_runs = 3\n{routes}")).await;
    for _ in 0..5 {
        run(gw, "/chat", Dialect::Vercel, "weather").await;
    }
    assert_eq!(ended_runs(gw, 3).await.len(), 3, "the ring keeps max_runs");

    let (gw, _g) = gateway(&format!("[inspector]\nmax_run_bytes = 2048\n{routes}")).await;
    let got = run(gw, "/chat", Dialect::Vercel, "weather").await;
    let s = &ended_runs(gw, 1).await[0];
    assert_eq!(s["truncated"], true);
    let id = s["id"].as_str().unwrap();
    let d = get_json(format!("http://{gw}/inspector/api/runs/{id}")).await;
    assert!(
        d["replay"]["matches"].is_null(),
        "a cut capture cannot be checked"
    );
    let client = get_bytes(format!("http://{gw}/inspector/api/runs/{id}/upstream")).await;
    assert!(
        client.len() <= 2048 && got.len() > 2048,
        "{} {}",
        client.len(),
        got.len()
    );
    // The counts go on past the cap.
    assert!(s["events_out"].as_u64().unwrap() > 20, "{s}");

    let (gw, _g) = gateway(&format!("[inspector]\nsample = 0.5\n{routes}")).await;
    for _ in 0..6 {
        run(gw, "/chat", Dialect::Vercel, "hi").await;
    }
    assert_eq!(ended_runs(gw, 3).await.len(), 3, "half of six runs");

    // A request refused before its stream is listed with its error.
    let (gw, _g) = gateway(&format!("[inspector]\n{routes}")).await;
    let r = http()
        .post(format!("http://{gw}/chat"))
        .header("content-type", "application/json")
        .body("{\"messages\": 7}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let s = &ended_runs(gw, 1).await[0];
    assert_eq!(s["status"], "failed");
    assert_eq!(s["error_code"], "invalid_request");

    let (gw, _g) = gateway(&format!("[inspector]\nsample = 0.0\n{routes}")).await;
    run(gw, "/chat", Dialect::Vercel, "hi").await;
    assert!(runs(gw).await.is_empty());
}

#[tokio::test]
async fn a_failed_stream_shows_its_error_and_replays_to_the_same_end() {
    // An upstream that starts a run and then closes the connection.
    let (l, up) = listener().await;
    tokio::spawn(common::serve_sse(
        l,
        "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\ndata: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\n\n".into(),
    ));
    let toml = format!(
        "[inspector]\n{}",
        route("/chat", Dialect::Vercel, up, Dialect::AgUi, "")
    );
    let (gw, _g) = gateway(&toml).await;
    run(gw, "/chat", Dialect::Vercel, "hi").await;
    let s = &ended_runs(gw, 1).await[0];
    assert_eq!(s["status"], "failed");
    assert_eq!(s["error_code"], "upstream_disconnected");
    let id = s["id"].as_str().unwrap();
    let d = get_json(format!("http://{gw}/inspector/api/runs/{id}")).await;
    assert_eq!(d["replay"]["matches"], true);
    let last = d["rows"].as_array().unwrap().last().unwrap().clone();
    assert!(
        last["marks"].as_array().unwrap().contains(&"error".into()),
        "{last}"
    );
}

/// The three downloads of a run: `translate --setup` writes the client's
/// bytes again, for AG-Kit and for HAI, whose events carry the times the
/// live encoder was given (the setup keeps them).
#[tokio::test]
async fn translate_replays_the_downloads_and_refuses_a_setup_for_other_dialects() {
    let agent = demo_agent(Dialect::AgUi).await;
    let toml = format!(
        "[inspector]\n{}{}",
        route("/chat", Dialect::AgKit, agent, Dialect::AgUi, ""),
        route("/hai", Dialect::Hai, agent, Dialect::AgUi, "")
    );
    let (gw, _g) = gateway(&toml).await;
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (path, client, to) in [
        ("/hai", Dialect::Hai, "hai"),
        ("/chat", Dialect::AgKit, "agkit"),
    ] {
        run(gw, path, client, "weather").await;
        let runs = ended_runs(gw, if to == "hai" { 1 } else { 2 }).await;
        let id = runs.iter().find(|s| s["route"] == path).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string();
        files.clear();
        for what in ["upstream", "client", "setup"] {
            let b = get_bytes(format!("http://{gw}/inspector/api/runs/{id}/{what}")).await;
            let p = dir.path().join(format!("{to}.{what}"));
            std::fs::write(&p, &b).unwrap();
            files.push(p.display().to_string());
        }
        // a replay later than the live run: its clock is another
        tokio::time::sleep(Duration::from_millis(5)).await;
        let (code, out, err) = common::run_cli(
            &[
                "translate",
                "--from",
                "ag-ui",
                "--to",
                to,
                "--setup",
                &files[2],
                &files[0],
            ],
            b"",
        );
        assert_eq!(code, 0, "{err}");
        let client = std::fs::read(&files[1]).unwrap();
        if to == "hai" {
            assert!(String::from_utf8_lossy(&client).contains("\"timestamp\":"));
        }
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&client),
            "{to}"
        );
    }
    let (code, _, err) = common::run_cli(
        &[
            "translate",
            "--from",
            "ag-ui",
            "--to",
            "vercel",
            "--setup",
            &files[2],
            &files[0],
        ],
        b"",
    );
    assert_eq!(code, 2);
    assert!(err.contains("ag-ui to agkit"), "{err}");
}

#[tokio::test]
async fn binary_and_websocket_clients_are_captured_as_they_were_served() {
    use futures_util::{SinkExt, StreamExt};
    let agent = demo_agent(Dialect::AgUi).await;
    let toml = format!(
        "[inspector]\n{}",
        route("/chat", Dialect::AgUi, agent, Dialect::Hai, "")
    )
    .replace(
        "upstream_protocol = \"hai\"",
        "upstream_protocol = \"ag-ui\"",
    )
    .replace("client = \"ag-ui\"", "client = \"hai\"");
    let (gw, _g) = gateway(&toml).await;
    // A HAI client asking for AG-UI's binary transport.
    let r = http()
        .post(format!("http://{gw}/chat"))
        .header("content-type", "application/json")
        .header("accept", "application/vnd.ag-ui.event+proto")
        .body(body(Dialect::Hai, "weather"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let got = r.bytes().await.unwrap();
    // And one over a WebSocket session.
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{gw}/chat"))
        .await
        .unwrap();
    ws.send(tokio_tungstenite::tungstenite::Message::text(
        String::from_utf8(body(Dialect::Hai, "weather")).unwrap(),
    ))
    .await
    .unwrap();
    while let Some(Ok(m)) = ws.next().await {
        if m.is_close() {
            break;
        }
    }
    let list = ended_runs(gw, 2).await;
    let by = |t: &str| {
        list.iter()
            .find(|s| s["client"]["transport"] == t)
            .unwrap_or_else(|| panic!("no {t} run: {list:?}"))
            .clone()
    };
    let proto = by("proto");
    let ws = by("ws");
    for s in [&proto, &ws] {
        let id = s["id"].as_str().unwrap();
        let d = get_json(format!("http://{gw}/inspector/api/runs/{id}")).await;
        assert_eq!(d["replay"]["matches"], true, "{s}");
    }
    let id = proto["id"].as_str().unwrap();
    let d = get_json(format!("http://{gw}/inspector/api/runs/{id}")).await;
    assert!(d["replay"]["command"]
        .as_str()
        .unwrap()
        .contains("--to-transport proto"));
    // Binary client events are shown as their JSON form.
    let first = &d["rows"][0]["client"][0];
    assert_eq!(first["type"], "RUN_STARTED", "{first}");
    let r = get(format!("http://{gw}/inspector/api/runs/{id}/client")).await;
    assert!(r.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .contains(".client.bin"));
    // HAI timestamps aside (the clock's), the capture is what the client got.
    assert_eq!(r.bytes().await.unwrap().len(), got.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_every_instance_sees_the_runs_of_the_others() {
    let redis = support::RedisServer::start();
    let agent = demo_agent(Dialect::AgUi).await;
    let toml = format!(
        "[store]\nbackend = \"redis\"\nurl = \"{}\"\n[inspector]\n{}",
        redis.url(),
        route("/chat", Dialect::Vercel, agent, Dialect::AgUi, "")
    );
    let (a, _ga) = gateway(&toml).await;
    let (b, _gb) = gateway(&toml).await;
    run(a, "/chat", Dialect::Vercel, "weather").await;
    let mine = ended_runs(a, 1).await;
    let id = mine[0]["id"].as_str().unwrap().to_string();
    // B lists A's run once A has published it (once a second).
    let deadline = tokio::time::Instant::now() + BOUND;
    let theirs = loop {
        let r = runs(b).await;
        if let Some(s) = r
            .iter()
            .find(|s| s["id"] == id.as_str() && s["status"] == "completed")
        {
            break s.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "B never saw A's run: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(theirs["instance"], mine[0]["instance"]);
    assert_ne!(
        get_json(format!("http://{b}/inspector/api/runs")).await["instance"],
        theirs["instance"]
    );
    let d = get_json(format!("http://{b}/inspector/api/runs/{id}")).await;
    assert_eq!(d["replay"]["matches"], true);
    let client = get_bytes(format!("http://{b}/inspector/api/runs/{id}/client")).await;
    assert!(!client.is_empty());
}

#[test]
fn inspector_settings_are_checked_with_their_place() {
    let bad = "[inspector]\npath = \"inspect\"\nmax_runs = 0\nmax_run_bytes = 10\nsample = 2.0\nsurprise = 1\n";
    let errors = Config::parse(bad).unwrap_err();
    assert_eq!(
        errors.len(),
        1,
        "unknown keys are refused first: {errors:?}"
    );
    assert!(errors[0].message.contains("surprise"));
    let bad = "[inspector]\npath = \"inspect\"\nmax_runs = 0\nmax_run_bytes = 10\nsample = 2.0\n";
    let errors = Config::parse(bad).unwrap_err();
    let text: Vec<String> = errors
        .iter()
        .map(|e| format!("{}: {}", e.line, e.message))
        .collect();
    assert_eq!(errors.len(), 4, "{text:?}");
    for (line, key) in [
        (2, "inspector.path"),
        (3, "inspector.max_runs"),
        (4, "inspector.max_run_bytes"),
        (5, "inspector.sample"),
    ] {
        assert!(
            errors
                .iter()
                .any(|e| e.line == line && e.message.starts_with(key)),
            "{key} at line {line}: {text:?}"
        );
    }
    let clash = "[inspector]\npath = \"/chat\"\n[[routes]]\npath = \"/chat/x\"\nclient = \"ag-ui\"\nupstream = \"http://127.0.0.1:1/agent\"\nupstream_protocol = \"ag-ui\"\n";
    let errors = Config::parse(clash).unwrap_err();
    assert!(
        errors[0].message.contains("taken by the route"),
        "{errors:?}"
    );
}

fn body_with_ids(client: Dialect, thread: &str, run_id: &str) -> Vec<u8> {
    let run = RunRequest {
        thread_id: thread.into(),
        run_id: run_id.into(),
        messages: vec![Message::text_message("u1", Role::User, "hi")],
        ..Default::default()
    };
    serde_json::to_vec(&registry::requests(client).build_request(&run).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_shows_and_filters_by_conversation_and_client_run() {
    let agent = demo_agent(Dialect::AgUi).await;
    let toml = String::from("[inspector]\n")
        + &route("/ag", Dialect::AgUi, agent, Dialect::AgUi, "")
        + &route("/v", Dialect::Vercel, agent, Dialect::AgUi, "");
    let (gw, _g) = gateway(&toml).await;
    for (path, client, thread, run_id) in [
        ("/ag", Dialect::AgUi, "chat-alpha", "run-a1"),
        ("/ag", Dialect::AgUi, "chat-alpha", "run-a2"),
        ("/v", Dialect::Vercel, "chat-beta", "run-b1"),
    ] {
        let r = http()
            .post(format!("http://{gw}{path}"))
            .header("content-type", "application/json")
            .body(body_with_ids(client, thread, run_id))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
    }
    let all = ended_runs(gw, 3).await;
    let of = |list: &[Value]| {
        let mut v: Vec<String> = list
            .iter()
            .map(|r| format!("{} {}", r["conversation"], r["client_run"]))
            .collect();
        v.sort();
        v
    };
    let all = of(&all);
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(
        all.contains(&r#""chat-alpha" "run-a1""#.to_string()),
        "{all:?}"
    );
    assert!(
        all.contains(&r#""chat-alpha" "run-a2""#.to_string()),
        "{all:?}"
    );
    // A Vercel chat id is the conversation (its run id is the one the
    // request carries, or one the gateway gave it).
    assert!(
        all.iter().any(|r| r.starts_with(r#""chat-beta" ""#)),
        "{all:?}"
    );
    let filtered = |q: &'static str| async move {
        of(
            get_json(format!("http://{gw}/inspector/api/runs?{q}")).await["runs"]
                .as_array()
                .unwrap(),
        )
    };
    assert_eq!(
        filtered("conversation=chat-alpha").await,
        [r#""chat-alpha" "run-a1""#, r#""chat-alpha" "run-a2""#]
    );
    assert_eq!(
        filtered("conversation=chat-alpha&run=run-a2").await,
        [r#""chat-alpha" "run-a2""#]
    );
    assert_eq!(filtered("run=run-a1").await, [r#""chat-alpha" "run-a1""#]);
    // A part of an id finds it too; percent-encoding is decoded.
    assert_eq!(filtered("conversation=%62eta").await.len(), 1);
    assert!(filtered("conversation=nobody").await.is_empty());
    // No filter, or an empty one, lists every run.
    assert_eq!(filtered("conversation=&run=").await.len(), 3);
}
