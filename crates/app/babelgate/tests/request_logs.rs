//! What reaches the upstream and the logs: only the headers a route allows,
//! its secrets in neither the logs nor anywhere but the upstream request.
//!
//! Its own test binary, with one test, because it installs the process's
//! subscriber: a thread's scoped subscriber races tracing's per-callsite
//! interest cache against tests on other threads, and a callsite first hit
//! there could stay off here (CI saw a request span go missing that way).

mod common;

use std::sync::{Arc, Mutex};

use babelgate::config::Config;
use babelgate::server::Gateway;

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn only_allowed_headers_reach_the_upstream_and_secrets_are_not_logged() {
    let logs = Arc::new(Mutex::new(Vec::<u8>::new()));
    let writer = logs.clone();
    tracing::subscriber::set_global_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || LogWriter(writer.clone()))
            .finish(),
    )
    .unwrap();

    let (ul, up) = common::listener().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let stream = [
        r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#,
        r#"{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}"#,
        r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"hello"}"#,
        r#"{"type":"TEXT_MESSAGE_END","messageId":"m1"}"#,
        r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#,
    ]
    .map(|e| format!("data: {e}\n\n"))
    .concat();
    tokio::spawn(common::serve_sse_recording(ul, stream, seen.clone()));

    let toml = format!(
        "[[routes]]\npath = \"/r\"\nclient = \"ag-ui\"\nupstream = \"http://{up}/agent\"\nupstream_protocol = \"ag-ui\"\n\
         forward_headers = [\"x-user-id\", \"X-Tenant\"]\n\
         upstream_headers = {{ authorization = \"Bearer ${{BG_AGENT_TOKEN}}\", x-static = \"cost$$center\" }}\n"
    );
    let env = |k: &str| (k == "BG_AGENT_TOKEN").then(|| "s3cret-token-value".to_string());
    let config = Config::parse_with(&toml, std::path::Path::new("."), &env).unwrap();
    // The parsed config is what an operator would log: it must not carry the secret.
    tracing::debug!(?config, "loaded");
    let (l, gw) = common::listener().await;
    tokio::spawn(Arc::new(Gateway::new(config).unwrap()).serve(l));

    let r = reqwest::Client::new()
        .post(format!("http://{gw}/r"))
        .header("content-type", "application/json")
        .header("x-user-id", "u-42")
        .header("x-tenant", "acme")
        .header("cookie", "session=abc")
        .header("x-other", "nope")
        .header("x-request-id", "req-from-client")
        .body(common::agui_hi("thread-1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-request-id"], "req-from-client");
    let body = r.bytes().await.unwrap();
    let types: Vec<_> = common::sse_events(&body)
        .into_iter()
        .map(|(_, v)| v["type"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        types.last().map(String::as_str),
        Some("RUN_FINISHED"),
        "{types:?}"
    );

    let req = seen.lock().unwrap()[0].to_lowercase();
    assert!(
        req.contains("x-user-id: u-42") && req.contains("x-tenant: acme"),
        "{req}"
    );
    assert!(
        req.contains("authorization: bearer s3cret-token-value"),
        "{req}"
    );
    assert!(req.contains("x-static: cost$center"), "{req}");
    assert!(req.contains("x-request-id: req-from-client"), "{req}");
    for never in ["cookie", "x-other", "session=abc"] {
        assert!(!req.contains(never), "{never} was forwarded: {req}");
    }

    let logs = String::from_utf8(logs.lock().unwrap().clone()).unwrap();
    // The request's span names the id on the lines logged under it.
    assert!(
        logs.contains("request{id=req-from-client"),
        "logs carry the request id: {logs}"
    );
    assert!(logs.contains("upstream_headers: <redacted>"), "{logs}");
    assert!(
        !logs.contains("s3cret"),
        "a secret reached the logs: {logs}"
    );
}
