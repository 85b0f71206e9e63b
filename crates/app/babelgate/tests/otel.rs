//! `[telemetry]` against a real OTLP receiver: tests/python/otlp_receiver.py
//! decodes each export with the official `opentelemetry-proto` package (in
//! the venv ./tests/run.sh makes at target/py-venv). The gateway's spans,
//! their parent/child links and attributes, and the W3C trace context the
//! upstream got are checked; so is the pass-through without `[telemetry]`.

use crate::common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use axum::routing::post as axum_post;
use babelgate::config::Config;
use babelgate::server::Gateway;
use babelgate_core::Dialect;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpListener;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";
const BROKEN_TRACE: &str = "11111111111111111111111111111111";
const RESUME_TRACE: &str = "22222222222222222222222222222222";
const RESUME_PARENT: &str = "3333333333333333";
const WS_TRACE: &str = "44444444444444444444444444444444";

/// What the upstream got: (traceparent, tracestate) per request.
type Seen = Arc<Mutex<Vec<(Option<String>, Option<String>)>>>;

const AGUI_STREAM: &str = concat!(
    "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n",
    "data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\n\n",
    "data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"hello\"}\n\n",
    "data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}\n\n",
    "data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n",
);

/// An AG-UI agent at `/agent` and one that answers 500 at `/broken`, both
/// noting the trace context they were sent.
async fn upstream() -> (SocketAddr, Seen) {
    let seen: Seen = Arc::default();
    let note = |seen: Seen| {
        move |h: HeaderMap| {
            let get = |k: &str| h.get(k).map(|v| v.to_str().unwrap().to_string());
            seen.lock()
                .unwrap()
                .push((get("traceparent"), get("tracestate")));
        }
    };
    let (ok, broken) = (note(seen.clone()), note(seen.clone()));
    let app = axum::Router::new()
        .route(
            "/agent",
            axum_post(move |h: HeaderMap| async move {
                ok(h);
                ([("content-type", "text/event-stream")], AGUI_STREAM)
            }),
        )
        .route(
            "/broken",
            axum_post(move |h: HeaderMap| async move {
                broken(h);
                (StatusCode::INTERNAL_SERVER_ERROR, "boom")
            }),
        );
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (addr, seen)
}

/// The venv's python, where ./tests/run.sh makes it: its absence is a
/// failure (the test command always makes it), not a skip.
fn venv_python() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let py = root.join("target/py-venv/bin/python");
    assert!(
        py.exists(),
        "{} is missing: ./tests/run.sh makes it (pip install -r tests/python/requirements.txt)",
        py.display()
    );
    py
}

/// The OTLP receiver and its port.
async fn receiver() -> (tokio::process::Child, u16) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let mut child = tokio::process::Command::new(venv_python())
        .arg(root.join("tests/python/otlp_receiver.py"))
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let port = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("the receiver never said its port")
        .unwrap()
        .expect("the receiver exited (is opentelemetry-proto installed?)");
    (child, port.trim().parse().unwrap())
}

fn body(dialect: Dialect, thread: &str) -> Vec<u8> {
    common::run_body(dialect, thread, "hi")
}

fn routes(agent: SocketAddr) -> String {
    format!(
        "[[routes]]\npath = \"/chat\"\nclient = \"ag-ui\"\nupstream = \"http://{agent}/agent\"\nupstream_protocol = \"ag-ui\"\n\
         [[routes]]\npath = \"/broken\"\nclient = \"vercel\"\nupstream = \"http://{agent}/broken\"\nupstream_protocol = \"ag-ui\"\n"
    )
}

async fn post(
    gw: SocketAddr,
    path: &str,
    dialect: Dialect,
    traceparent: &str,
) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("http://{gw}{path}"))
        .header("content-type", "application/json")
        .header("traceparent", traceparent)
        .header("tracestate", "vendor=abc")
        .header("authorization", "Bearer sekrit-key")
        .body(body(dialect, "thread-otel"))
        .send()
        .await
        .unwrap()
}

fn attr<'a>(span: &'a Value, k: &str) -> &'a Value {
    &span["attributes"][k]
}

/// The one span of `trace` of this kind.
fn span<'a>(spans: &'a [Value], trace: &str, kind: &str) -> &'a Value {
    let found: Vec<&Value> = spans
        .iter()
        .filter(|s| s["trace_id"] == trace && s["kind"] == kind)
        .collect();
    assert_eq!(found.len(), 1, "{kind} spans of {trace}: {spans:#?}");
    found[0]
}

fn traceparent_parts(tp: &str) -> (String, String, String) {
    let p: Vec<&str> = tp.split('-').collect();
    assert_eq!(p.len(), 4, "{tp}");
    assert_eq!(p[0], "00");
    (p[1].into(), p[2].into(), p[3].into())
}

/// Serves `gateway` on a free port until the returned sender fires.
async fn serve_stoppable(
    gateway: Arc<Gateway>,
) -> (
    SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gw = l.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(gateway.serve_until(l, None, async {
        let _ = stopped.await;
    }));
    (gw, stop, serving)
}

/// An AG-UI stream through `path` under `traceparent`, read to its end.
async fn finished_stream(
    gw: SocketAddr,
    path: &str,
    traceparent: &str,
) -> Vec<(Option<String>, Value)> {
    let r = post(gw, path, Dialect::AgUi, traceparent).await;
    assert_eq!(r.status(), 200);
    let events = common::sse_events(&r.bytes().await.unwrap());
    assert!(
        events.iter().any(|(_, v)| v["type"] == "RUN_FINISHED"),
        "{events:?}"
    );
    events
}

/// Stops the gateway (its shutdown flushes what is queued: no waiting on
/// the export schedule) and returns what the receiver decoded.
async fn stop_and_collect(
    stop: tokio::sync::oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<()>,
    port: u16,
) -> Value {
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(120), serving)
        .await
        .expect("the gateway did not stop")
        .unwrap();
    let doc: Value = reqwest::get(format!("http://127.0.0.1:{port}/spans"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(doc["errors"], serde_json::json!([]), "{doc:#}");
    doc
}

#[tokio::test]
async fn spans_reach_a_real_otlp_receiver_with_the_clients_trace() {
    let (_receiver, port) = receiver().await;
    let (agent, seen) = upstream().await;
    let toml = format!(
        "[telemetry]\notlp_endpoint = \"http://127.0.0.1:{port}/v1/traces\"\nservice_name = \"bg-test\"\nheaders_env = {{ x-collector-token = \"BG_TOKEN\" }}\n{}",
        routes(agent)
    );
    let env = |k: &str| (k == "BG_TOKEN").then(|| "collector-s3cret".to_string());
    let config = Config::parse_with(&toml, std::path::Path::new("."), &env).unwrap();
    let gateway = Arc::new(Gateway::new(config).unwrap());
    let (gw, stop, serving) = serve_stoppable(gateway).await;

    // 1. A stream, under the client's trace.
    let events = finished_stream(gw, "/chat", &format!("00-{TRACE}-{PARENT}-01")).await;
    let first_id = events[0].0.clone().expect("an event id");

    // 2. An upstream that answers 500.
    let r = post(
        gw,
        "/broken",
        Dialect::Vercel,
        &format!("00-{BROKEN_TRACE}-{PARENT}-01"),
    )
    .await;
    assert_eq!(r.status(), 502);

    // 3. The stream resumed after its first event, under another trace.
    let r = reqwest::Client::new()
        .get(format!("http://{gw}/chat/thread-otel/stream"))
        .header("last-event-id", &first_id)
        .header(
            "traceparent",
            format!("00-{RESUME_TRACE}-{RESUME_PARENT}-01"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let resumed = common::sse_events(&r.bytes().await.unwrap());
    assert_eq!(resumed.len(), events.len() - 1, "{resumed:?}");

    // 4. A WebSocket session's request, the context on its upgrade.
    let mut upgrade =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(format!(
            "ws://{gw}/chat"
        ))
        .unwrap();
    upgrade.headers_mut().insert(
        "traceparent",
        format!("00-{WS_TRACE}-{PARENT}-01").parse().unwrap(),
    );
    let (mut ws, resp) = tokio_tungstenite::connect_async(upgrade).await.unwrap();
    assert_eq!(resp.status(), 101);
    let request = String::from_utf8(body(Dialect::AgUi, "thread-ws")).unwrap();
    ws.send(tokio_tungstenite::tungstenite::Message::text(request))
        .await
        .unwrap();
    let mut texts = String::new();
    while let Some(Ok(m)) = tokio::time::timeout(Duration::from_secs(60), ws.next())
        .await
        .expect("the session never ended")
    {
        if m.is_close() {
            break;
        }
        texts.push_str(m.to_text().unwrap());
    }
    assert!(texts.contains("RUN_FINISHED"), "{texts}");
    drop(ws);

    // Shutdown flushes what is queued: no waiting on the export schedule.
    let doc = stop_and_collect(stop, serving, port).await;
    let spans = doc["spans"].as_array().unwrap().clone();
    let text = serde_json::to_string(&spans).unwrap();
    assert!(
        !text.contains("sekrit") && !text.contains("collector-s3cret"),
        "{text}"
    );
    assert!(
        doc["token"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t == "collector-s3cret"),
        "{doc:#}"
    );

    // The stream's request span: the client's span its parent.
    let server = span(&spans, TRACE, "SPAN_KIND_SERVER");
    assert_eq!(server["parent_span_id"], PARENT);
    assert_eq!(server["name"], "POST /chat");
    assert_eq!(server["resource"]["service.name"], "bg-test");
    assert_eq!(attr(server, "http.request.method"), "POST");
    assert_eq!(attr(server, "http.route"), "/chat");
    assert_eq!(attr(server, "http.response.status_code"), 200);
    assert_eq!(attr(server, "babelgate.route"), "/chat");
    assert_eq!(attr(server, "babelgate.dialect.client"), "ag-ui");
    assert_eq!(attr(server, "babelgate.dialect.upstream"), "ag-ui");
    assert_eq!(attr(server, "babelgate.transport.client"), "sse");
    assert_eq!(attr(server, "gen_ai.conversation.id"), "thread-otel");
    assert_eq!(attr(server, "babelgate.events.in"), 5);
    let ttfc = attr(server, "babelgate.time_to_first_chunk")
        .as_f64()
        .unwrap();
    assert!(ttfc > 0.0, "{server:#}");
    assert!(attr(server, "error.type").is_null(), "{server:#}");
    assert_eq!(server["status"]["code"], "STATUS_CODE_UNSET");

    // The upstream call: a child of the request span, whose id went upstream.
    let client = span(&spans, TRACE, "SPAN_KIND_CLIENT");
    assert_eq!(client["parent_span_id"], server["span_id"]);
    assert_eq!(client["name"], "invoke_agent");
    assert_eq!(attr(client, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(attr(client, "server.address"), "127.0.0.1");
    assert_eq!(attr(client, "server.port"), agent.port());
    assert_eq!(attr(client, "url.full"), &format!("http://{agent}/agent"));
    assert_eq!(attr(client, "http.response.status_code"), 200);
    assert_eq!(attr(client, "babelgate.transport.upstream"), "sse");
    // The span ends with the stream, not with the response head.
    assert!(client["end"].as_u64() <= server["end"].as_u64());

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "{seen:?}");
    let (tp, state) = &seen[0];
    let (trace, parent, flags) = traceparent_parts(tp.as_deref().unwrap());
    assert_eq!(trace, TRACE);
    assert_eq!(parent, client["span_id"].as_str().unwrap());
    assert_eq!(flags, "01");
    assert_eq!(state.as_deref(), Some("vendor=abc"));

    // The failed call: its code on both spans, the upstream's status on its own.
    let server = span(&spans, BROKEN_TRACE, "SPAN_KIND_SERVER");
    assert_eq!(attr(server, "http.response.status_code"), 502);
    assert_eq!(attr(server, "error.type"), "upstream_status");
    assert_eq!(server["status"]["code"], "STATUS_CODE_ERROR");
    assert_eq!(attr(server, "babelgate.dialect.client"), "vercel");
    assert_eq!(attr(server, "babelgate.dialect.upstream"), "ag-ui");
    let client = span(&spans, BROKEN_TRACE, "SPAN_KIND_CLIENT");
    assert_eq!(client["parent_span_id"], server["span_id"]);
    assert_eq!(attr(client, "http.response.status_code"), 500);
    assert_eq!(attr(client, "error.type"), "upstream_status");
    assert_eq!(client["status"]["code"], "STATUS_CODE_ERROR");
    let (trace, parent, _) = traceparent_parts(seen[1].0.as_deref().unwrap());
    assert_eq!(
        (trace.as_str(), parent.as_str()),
        (BROKEN_TRACE, client["span_id"].as_str().unwrap())
    );

    // The resume: a span of the resuming client's trace, ended with its stream.
    let resume = span(&spans, RESUME_TRACE, "SPAN_KIND_SERVER");
    assert_eq!(resume["parent_span_id"], RESUME_PARENT);
    assert_eq!(resume["name"], "GET /chat/{id}/stream");
    assert_eq!(attr(resume, "http.route"), "/chat/{id}/stream");
    assert_eq!(attr(resume, "babelgate.resume.mode"), "after_id");
    assert_eq!(attr(resume, "http.response.status_code"), 200);

    // The session's request: its own span, under the upgrade's context.
    let in_session: Vec<&Value> = spans
        .iter()
        .filter(|s| s["trace_id"] == WS_TRACE && s["name"] == "POST /chat")
        .collect();
    assert_eq!(in_session.len(), 1, "{spans:#?}");
    assert_eq!(in_session[0]["parent_span_id"], PARENT);
    assert_eq!(
        attr(in_session[0], "babelgate.transport.client"),
        "websocket"
    );
    assert_eq!(attr(in_session[0], "gen_ai.conversation.id"), "thread-ws");
    assert_eq!(attr(in_session[0], "http.response.status_code"), 200);
    let upstream_call = span(&spans, WS_TRACE, "SPAN_KIND_CLIENT");
    assert_eq!(upstream_call["parent_span_id"], in_session[0]["span_id"]);
    let (trace, parent, _) = traceparent_parts(seen[2].0.as_deref().unwrap());
    assert_eq!(
        (trace.as_str(), parent.as_str()),
        (WS_TRACE, upstream_call["span_id"].as_str().unwrap())
    );
}

#[tokio::test]
async fn without_telemetry_the_clients_trace_context_passes_upstream_as_it_came() {
    let (agent, seen) = upstream().await;
    let config = Config::parse(&routes(agent)).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gw = l.local_addr().unwrap();
    tokio::spawn(Arc::new(Gateway::new(config).unwrap()).serve(l));
    let tp = format!("00-{TRACE}-{PARENT}-01");
    let r = post(gw, "/chat", Dialect::AgUi, &tp).await;
    assert_eq!(r.status(), 200);
    r.bytes().await.unwrap();
    // An invalid traceparent (uppercase) is not passed on, nor is its state.
    let r = post(gw, "/chat", Dialect::AgUi, &tp.to_uppercase()).await;
    assert_eq!(r.status(), 200);
    r.bytes().await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![(Some(tp), Some("vendor=abc".to_string())), (None, None)]
    );
}

/// A WebSocket agent: notes the handshake's traceparent, reads the request,
/// sends the run as text messages and closes.
async fn ws_upstream() -> (SocketAddr, Arc<Mutex<Option<String>>>) {
    use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
    let seen = Arc::new(Mutex::new(None));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let noted = seen.clone();
    tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        #[allow(clippy::result_large_err)] // tungstenite's callback type
        let note = |req: &Request, resp: Response| {
            *noted.lock().unwrap() = req
                .headers()
                .get("traceparent")
                .map(|v| v.to_str().unwrap().to_string());
            Ok(resp)
        };
        let mut ws = tokio_tungstenite::accept_hdr_async(s, note).await.unwrap();
        ws.next().await.unwrap().unwrap();
        for line in AGUI_STREAM.split("\n\n").filter(|l| !l.is_empty()) {
            let json = line.strip_prefix("data: ").unwrap().to_string();
            ws.send(tokio_tungstenite::tungstenite::Message::text(json))
                .await
                .unwrap();
        }
        ws.close(None).await.unwrap();
        while ws.next().await.is_some() {}
    });
    (addr, seen)
}

/// An AG-UI agent that starts a run and then says nothing more.
async fn stalling_upstream() -> SocketAddr {
    let app = axum::Router::new().route(
        "/agent",
        axum_post(|| async {
            let first = futures_util::stream::once(async {
                Ok::<_, std::io::Error>(bytes::Bytes::from_static(
                    b"data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n",
                ))
            });
            let body = axum::body::Body::from_stream(first.chain(futures_util::stream::pending()));
            ([("content-type", "text/event-stream")], body)
        }),
    );
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    addr
}

#[tokio::test]
async fn websocket_upstreams_a_client_that_leaves_and_a_bad_request_are_traced() {
    let (_receiver, port) = receiver().await;
    let (ws_agent, ws_seen) = ws_upstream().await;
    let stalling = stalling_upstream().await;
    let toml = format!(
        "[telemetry]\notlp_endpoint = \"http://127.0.0.1:{port}/v1/traces\"\n\
         [[routes]]\npath = \"/ws\"\nclient = \"ag-ui\"\nupstream = \"ws://{ws_agent}/agent\"\nupstream_protocol = \"ag-ui\"\n\
         [[routes]]\npath = \"/slow\"\nclient = \"ag-ui\"\nupstream = \"http://{stalling}/agent\"\nupstream_protocol = \"ag-ui\"\n"
    );
    let gateway = Arc::new(Gateway::new(Config::parse(&toml).unwrap()).unwrap());
    let (gw, stop, serving) = serve_stoppable(gateway).await;

    // A WebSocket upstream.
    let ws_trace = "55555555555555555555555555555555";
    finished_stream(gw, "/ws", &format!("00-{ws_trace}-{PARENT}-01")).await;

    // A client that leaves mid-stream.
    let gone_trace = "66666666666666666666666666666666";
    let mut r = post(
        gw,
        "/slow",
        Dialect::AgUi,
        &format!("00-{gone_trace}-{PARENT}-01"),
    )
    .await;
    assert_eq!(r.status(), 200);
    r.chunk().await.unwrap().expect("the first event");
    drop(r);

    // A request that does not parse: a 4xx, the client's doing.
    let bad_trace = "77777777777777777777777777777777";
    let r = reqwest::Client::new()
        .post(format!("http://{gw}/slow"))
        .header("content-type", "application/json")
        .header("traceparent", format!("00-{bad_trace}-{PARENT}-01"))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);

    let doc = stop_and_collect(stop, serving, port).await;
    let spans = doc["spans"].as_array().unwrap().clone();

    let server = span(&spans, ws_trace, "SPAN_KIND_SERVER");
    let client = span(&spans, ws_trace, "SPAN_KIND_CLIENT");
    assert_eq!(client["parent_span_id"], server["span_id"]);
    assert_eq!(attr(client, "http.request.method"), "GET");
    assert_eq!(attr(client, "babelgate.transport.upstream"), "websocket");
    assert_eq!(attr(client, "babelgate.upstream.encoding"), "json");
    assert_eq!(attr(client, "url.full"), &format!("ws://{ws_agent}/agent"));
    assert_eq!(attr(server, "babelgate.events.in"), 5);
    let tp = ws_seen
        .lock()
        .unwrap()
        .clone()
        .expect("no traceparent on the handshake");
    let (trace, parent, _) = traceparent_parts(&tp);
    assert_eq!(
        (trace.as_str(), parent.as_str()),
        (ws_trace, client["span_id"].as_str().unwrap())
    );

    let server = span(&spans, gone_trace, "SPAN_KIND_SERVER");
    assert_eq!(attr(server, "error.type"), "client_gone");
    assert_eq!(attr(server, "http.response.status_code"), 499);
    assert_eq!(server["status"]["code"], "STATUS_CODE_ERROR");
    assert!(
        attr(server, "babelgate.time_to_first_chunk")
            .as_f64()
            .unwrap()
            > 0.0
    );
    let client = span(&spans, gone_trace, "SPAN_KIND_CLIENT");
    assert!(attr(client, "error.type").is_null(), "{client:#}");

    let server = span(&spans, bad_trace, "SPAN_KIND_SERVER");
    assert_eq!(attr(server, "error.type"), "invalid_request");
    assert_eq!(attr(server, "http.response.status_code"), 400);
    assert_eq!(server["status"]["code"], "STATUS_CODE_UNSET");
    assert!(
        !spans
            .iter()
            .any(|s| s["trace_id"] == bad_trace && s["kind"] == "SPAN_KIND_CLIENT"),
        "no upstream call was made"
    );
}
