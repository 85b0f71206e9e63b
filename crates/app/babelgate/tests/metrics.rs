//! The metrics of issue 13, read from `/metrics` of a running gateway: the
//! gateway's own time per event, time to first chunk and per output chunk,
//! streams refused by limits, resume replays, one request count for a
//! WebSocket client that leaves, and docs/operations.md's list of metrics held to
//! what `/metrics` exposes.
//!
//! Waits are event-driven (the next client event, or a series appearing),
//! with generous bounds that only matter on failure; no duration is
//! asserted, only counts.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use babelgate::config::Config;
use babelgate::server::{store_config, Gateway};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Mutex};
use tokio_tungstenite::tungstenite::Message as WsMessage;

const BOUND: Duration = Duration::from_secs(20);

async fn gateway(toml: &str) -> SocketAddr {
    let config = Config::parse(toml).unwrap_or_else(|e| panic!("{e:?}"));
    let stores = store_config(&config).build().await.unwrap();
    let gw = Arc::new(Gateway::with_stores(config, stores).unwrap());
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(gw.serve(l));
    a
}

fn route(upstream: SocketAddr, extra: &str) -> String {
    format!(
        "[[routes]]\npath = \"/chat\"\nclient = \"ag-ui\"\nupstream = \"http://{upstream}/agent\"\nupstream_protocol = \"ag-ui\"\n{extra}"
    )
}

fn body(thread: &str) -> Vec<u8> {
    common::agui_hi(thread)
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(BOUND).build().unwrap()
}

fn post(gw: SocketAddr, thread: &str) -> reqwest::RequestBuilder {
    client()
        .post(format!("http://{gw}/chat"))
        .header("content-type", "application/json")
        .body(body(thread))
}

fn sse(data: &str) -> String {
    format!("data: {data}\n\n")
}

const STARTED: &str = r#"{"type":"RUN_STARTED","threadId":"t","runId":"r"}"#;
const FINISHED: &str = r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r"}"#;

fn custom(i: u32) -> String {
    format!(r#"{{"type":"CUSTOM","name":"tick","value":{i}}}"#)
}

/// An AG-UI upstream that answers each request with an SSE head and then
/// writes, as one HTTP chunk each, what the test sends on the channel of
/// that request (taken in order); the channel's end ends the response.
struct Upstream {
    addr: SocketAddr,
    add: mpsc::UnboundedSender<mpsc::UnboundedReceiver<String>>,
}

impl Upstream {
    async fn start() -> Upstream {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (add, feeds) = mpsc::unbounded_channel::<mpsc::UnboundedReceiver<String>>();
        let shared = Arc::new(Mutex::new(feeds));
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let feeds = shared.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    let _ = s.read(&mut buf).await;
                    let Some(mut feed) = feeds.lock().await.recv().await else {
                        return;
                    };
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                    if s.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    while let Some(chunk) = feed.recv().await {
                        let framed = format!("{:x}\r\n{chunk}\r\n", chunk.len());
                        if s.write_all(framed.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                    let _ = s.write_all(b"0\r\n\r\n").await;
                });
            }
        });
        Upstream { addr, add }
    }

    /// The channel that feeds the next request's response.
    fn next(&self) -> mpsc::UnboundedSender<String> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.add.send(rx).unwrap();
        tx
    }
}

/// Reads a streaming response until it holds `n` SSE events in all.
async fn read_events(r: &mut reqwest::Response, got: &mut String, n: usize) {
    tokio::time::timeout(BOUND, async {
        while got.matches("\n\n").count() < n {
            let c = r.chunk().await.unwrap().expect("the stream ended early");
            got.push_str(std::str::from_utf8(&c).unwrap());
        }
    })
    .await
    .expect("the events never came");
}

async fn metrics(gw: SocketAddr) -> String {
    client()
        .get(format!("http://{gw}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// `/metrics` once a line starting with `needle` is in it.
async fn metrics_once(gw: SocketAddr, needle: &str) -> String {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let text = metrics(gw).await;
        if text.lines().any(|l| l.starts_with(needle)) {
            return text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{needle} never appeared in\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The value of the sample `series` (its name and labels, exactly).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

// ---- timing -------------------------------------------------------------------

#[tokio::test]
async fn a_stream_observes_first_chunk_each_later_chunk_and_the_gateways_time_per_chunk() {
    let up = Upstream::start().await;
    let gw = gateway(&route(up.addr, "")).await;
    let feed = up.next();
    feed.send(sse(STARTED)).unwrap();
    let mut r = post(gw, "t-timing").send().await.unwrap();
    assert_eq!(r.status(), 200);
    let mut got = String::new();
    read_events(&mut r, &mut got, 1).await;
    // Each event in a chunk of its own, sent only once the last one is out.
    feed.send(sse(&custom(1))).unwrap();
    read_events(&mut r, &mut got, 2).await;
    // Two events in one chunk: one observation of the gateway's time.
    feed.send(sse(&custom(2)) + &sse(FINISHED)).unwrap();
    read_events(&mut r, &mut got, 4).await;
    drop(feed);
    assert!(r.chunk().await.unwrap().is_none(), "{got}");
    let text = metrics_once(gw, "babelgate_stream_duration_seconds_count").await;
    let count = |name: &str| value(&text, &format!("{name}_count{{route=\"/chat\"}}"));
    assert_eq!(
        count("gen_ai_client_operation_time_to_first_chunk_seconds"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        count("gen_ai_client_operation_time_per_output_chunk_seconds"),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        count("babelgate_event_overhead_seconds"),
        Some(3.0),
        "{text}"
    );
    assert!(
        !text.contains("time_to_first_event"),
        "renamed to the GenAI name:\n{text}"
    );
}

// ---- refusals -----------------------------------------------------------------

#[tokio::test]
async fn streams_refused_by_max_streams_are_counted_by_route_and_reason() {
    let up = Upstream::start().await;
    let gw = gateway(&route(up.addr, "max_streams = 1\n")).await;
    let feed = up.next();
    feed.send(sse(STARTED)).unwrap();
    let mut first = post(gw, "t-a").send().await.unwrap();
    let mut got = String::new();
    read_events(&mut first, &mut got, 1).await;
    let second = post(gw, "t-b").send().await.unwrap();
    assert_eq!(second.status(), 503);
    let resume = client()
        .get(format!("http://{gw}/chat/t-a/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(resume.status(), 503);
    let text = metrics(gw).await;
    assert_eq!(
        value(
            &text,
            r#"babelgate_streams_refused_total{route="/chat",reason="route_busy"}"#
        ),
        Some(2.0),
        "{text}"
    );
    drop(feed);
}

#[tokio::test]
async fn streams_refused_by_the_callers_rate_are_counted_by_route_and_reason() {
    let up = Upstream::start().await;
    let gw = gateway(&route(
        up.addr,
        "[routes.rate_limit]\nrequests_per_s = 0.01\nburst = 1\n",
    ))
    .await;
    let feed = up.next();
    feed.send(sse(STARTED) + &sse(FINISHED)).unwrap();
    drop(feed);
    let first = post(gw, "t-a").send().await.unwrap();
    assert_eq!(first.status(), 200);
    first.bytes().await.unwrap();
    let second = post(gw, "t-b").send().await.unwrap();
    assert_eq!(second.status(), 429);
    let text = metrics(gw).await;
    assert_eq!(
        value(
            &text,
            r#"babelgate_streams_refused_total{route="/chat",reason="rate_limited"}"#
        ),
        Some(1.0),
        "{text}"
    );
}

#[tokio::test]
async fn resumes_over_max_followers_are_counted_as_refused() {
    let up = Upstream::start().await;
    let gw =
        gateway(&(route(up.addr, "") + "[store]\nbackend = \"memory\"\nmax_followers = 1\n")).await;
    let feed = up.next();
    feed.send(sse(STARTED)).unwrap();
    let mut live = post(gw, "t-f").send().await.unwrap();
    let mut got = String::new();
    read_events(&mut live, &mut got, 1).await;
    // The run goes on: the first follower stays, the second is refused.
    let mut one = client()
        .get(format!("http://{gw}/chat/t-f/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(one.status(), 200);
    let mut seen = String::new();
    read_events(&mut one, &mut seen, 1).await;
    let two = client()
        .get(format!("http://{gw}/chat/t-f/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(two.status(), 503);
    let text = metrics(gw).await;
    assert_eq!(
        value(
            &text,
            r#"babelgate_streams_refused_total{route="/chat",reason="too_many_followers"}"#
        ),
        Some(1.0),
        "{text}"
    );
    drop(feed);
}

// ---- resume -------------------------------------------------------------------

/// The `id:` of each event of an SSE body.
fn ids(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("id: ").map(str::to_string))
        .collect()
}

#[tokio::test]
async fn resumes_are_counted_by_mode_with_the_events_they_replay() {
    let up = Upstream::start().await;
    let gw = gateway(&route(up.addr, "")).await;
    let feed = up.next();
    feed.send(sse(STARTED)).unwrap();
    let mut live = post(gw, "t-r").send().await.unwrap();
    let mut got = String::new();
    read_events(&mut live, &mut got, 1).await;
    feed.send(sse(&custom(1))).unwrap();
    read_events(&mut live, &mut got, 2).await;

    // While it runs, without Last-Event-ID: a snapshot, then the tail.
    let mut snap = client()
        .get(format!("http://{gw}/chat/t-r/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(snap.status(), 200);
    let mut snapped = String::new();
    read_events(&mut snap, &mut snapped, 1).await;
    feed.send(sse(FINISHED)).unwrap();
    drop(feed);
    live.bytes().await.unwrap();
    snap.bytes().await.unwrap();

    // After it ended, from the first event's id: the other two again.
    let first = ids(&got)
        .into_iter()
        .next()
        .expect("ids on the live stream");
    let after = client()
        .get(format!("http://{gw}/chat/t-r/stream"))
        .header("last-event-id", first)
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), 200);
    let replay = after.text().await.unwrap();
    assert_eq!(replay.matches("\n\n").count(), 2, "{replay}");

    let text = metrics(gw).await;
    let series = |name: &str, mode: &str| {
        value(
            &text,
            &format!("babelgate_{name}_total{{route=\"/chat\",mode=\"{mode}\"}}"),
        )
    };
    assert_eq!(series("resumed_streams", "snapshot"), Some(1.0), "{text}");
    assert_eq!(series("resumed_streams", "after_id"), Some(1.0), "{text}");
    assert_eq!(series("resumed_streams", "from_start"), None, "{text}");
    // The snapshot summed up the two events logged when it came, and the
    // tail sent the third.
    assert_eq!(
        series("resume_events_replayed", "snapshot"),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        series("resume_events_replayed", "after_id"),
        Some(2.0),
        "{text}"
    );
}

// ---- request counts -----------------------------------------------------------

#[tokio::test]
async fn a_websocket_client_that_leaves_mid_stream_is_counted_once_as_499() {
    let up = Upstream::start().await;
    let gw = gateway(&route(up.addr, "")).await;
    let feed = up.next();
    feed.send(sse(STARTED)).unwrap();
    let (mut ws, resp) = tokio_tungstenite::connect_async(format!("ws://{gw}/chat"))
        .await
        .unwrap();
    assert_eq!(resp.status(), 101);
    ws.send(WsMessage::text(String::from_utf8(body("t-ws")).unwrap()))
        .await
        .unwrap();
    let first = tokio::time::timeout(BOUND, ws.next())
        .await
        .expect("no first event")
        .unwrap()
        .unwrap();
    assert!(first.to_text().unwrap().contains("RUN_STARTED"), "{first}");
    // Gone without a close.
    drop(ws);
    let text = metrics_once(gw, "babelgate_stream_duration_seconds_count").await;
    let counted: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("babelgate_requests_total{route=\"/chat\""))
        .collect();
    assert_eq!(
        counted,
        [r#"babelgate_requests_total{route="/chat",status="499"} 1"#],
        "{text}"
    );
    drop(feed);
}

/// A live stream on `thread` that has read its first event, and a client
/// that came back to it and has read that event too; the upstream's feed.
async fn live_and_follower(
    thread: &str,
) -> (
    SocketAddr,
    mpsc::UnboundedSender<String>,
    reqwest::Response,
    reqwest::Response,
) {
    let up = Upstream::start().await;
    let gw = gateway(&route(up.addr, "")).await;
    let feed = up.next();
    feed.send(sse(STARTED)).unwrap();
    let mut live = post(gw, thread).send().await.unwrap();
    let mut got = String::new();
    read_events(&mut live, &mut got, 1).await;
    let mut back = client()
        .get(format!("http://{gw}/chat/{thread}/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(back.status(), 200);
    let mut seen = String::new();
    read_events(&mut back, &mut seen, 1).await;
    (gw, feed, live, back)
}

#[tokio::test]
async fn a_resumed_client_that_leaves_mid_stream_is_counted_once_as_499() {
    let (gw, feed, live, back) = live_and_follower("t-back").await;
    drop(back);
    // The follower finds its client gone with the next event.
    feed.send(sse(&custom(1))).unwrap();
    metrics_once(
        gw,
        r#"babelgate_requests_total{route="/chat",status="499"}"#,
    )
    .await;
    feed.send(sse(FINISHED)).unwrap();
    drop(feed);
    live.bytes().await.unwrap();
    let text = metrics_once(gw, "babelgate_stream_duration_seconds_count").await;
    let mut counted: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("babelgate_requests_total{route=\"/chat\""))
        .collect();
    counted.sort_unstable();
    assert_eq!(
        counted,
        [
            r#"babelgate_requests_total{route="/chat",status="200"} 1"#,
            r#"babelgate_requests_total{route="/chat",status="499"} 1"#,
        ],
        "the live stream 200, its follower 499:\n{text}"
    );
}

#[tokio::test]
async fn a_resumed_stream_is_an_active_stream_while_it_lives() {
    let (gw, feed, live, back) = live_and_follower("t-active").await;
    metrics_once(gw, "babelgate_active_streams 2").await;
    feed.send(sse(FINISHED)).unwrap();
    drop(feed);
    live.bytes().await.unwrap();
    back.bytes().await.unwrap();
    metrics_once(gw, "babelgate_active_streams 0").await;
}

// ---- docs/operations.md's list ------------------------------------------------

/// The metrics of docs/operations.md's list, each with its labels: the
/// bullets of the "Metrics" section's one list, each starting with a name in
/// backticks, its labels in braces.
fn documented_metrics() -> Vec<(String, Vec<String>)> {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../docs/operations.md"
    ))
    .unwrap();
    let mut lines = doc.lines().skip_while(|l| *l != "## Metrics");
    lines
        .next()
        .expect("docs/operations.md has a Metrics section");
    lines
        .skip_while(|l| !l.starts_with("- "))
        .take_while(|l| !l.is_empty())
        .filter_map(|l| {
            let rest = l.strip_prefix("- `")?;
            let quoted = rest.split('`').next()?;
            let (name, labels) = match quoted.split_once('{') {
                Some((name, labels)) => (name, labels.trim_end_matches('}')),
                None => (quoted, ""),
            };
            let mut labels: Vec<String> = labels
                .split(',')
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect();
            labels.sort();
            Some((name.to_string(), labels))
        })
        .collect()
}

/// Each family `/metrics` declares, with the name its samples go by (a
/// counter's samples end in `_total`).
fn exposed_families(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| {
            let (name, kind) = l.split_once(' ')?;
            Some(if kind == "counter" {
                format!("{name}_total")
            } else {
                name.to_string()
            })
        })
        .collect()
}

/// Each sample's family (as docs/operations.md names it) and label names (a
/// histogram's `le` left out).
fn sample_labels<'a>(text: &'a str, families: &'a [String]) -> Vec<(&'a str, Vec<String>)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let series = l.split(' ').next()?;
            let (name, labels) = match series.split_once('{') {
                Some((name, labels)) => (name, labels.trim_end_matches('}')),
                None => (series, ""),
            };
            let family = families.iter().find(|f| {
                name == f.as_str()
                    || ["_bucket", "_sum", "_count"]
                        .iter()
                        .any(|suffix| name.strip_suffix(suffix) == Some(f.as_str()))
            })?;
            let mut keys: Vec<String> = labels
                .split(',')
                .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.to_string()))
                .filter(|k| k != "le")
                .collect();
            keys.sort();
            Some((family.as_str(), keys))
        })
        .collect()
}

#[tokio::test]
async fn the_operations_page_lists_exactly_the_metric_families_of_metrics_with_their_labels() {
    let up = Upstream::start().await;
    let gw = gateway(&route(up.addr, "max_streams = 1\n")).await;
    // Traffic that gives most families a series: a stream, one refused
    // beside it, a resume of it, and a request to an upstream that is down.
    let feed = up.next();
    feed.send(sse(STARTED)).unwrap();
    let mut live = post(gw, "t-readme").send().await.unwrap();
    let mut got = String::new();
    read_events(&mut live, &mut got, 1).await;
    assert_eq!(post(gw, "t-other").send().await.unwrap().status(), 503);
    feed.send(sse(FINISHED)).unwrap();
    drop(feed);
    live.bytes().await.unwrap();
    metrics_once(gw, "babelgate_stream_duration_seconds_count").await;
    let first = ids(&got).into_iter().next().expect("an id");
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        // The stream's slot is let go as its body is dropped.
        let r = client()
            .get(format!("http://{gw}/chat/t-readme/stream"))
            .header("last-event-id", first.clone())
            .send()
            .await
            .unwrap();
        if r.status() == 200 {
            r.bytes().await.unwrap();
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never resumed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let down = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap()
    };
    let gw_down = gateway(&route(down, "")).await;
    assert_eq!(post(gw_down, "t-down").send().await.unwrap().status(), 502);

    let listed = documented_metrics();
    let mut names: Vec<String> = listed.iter().map(|(n, _)| n.clone()).collect();
    let own = metrics(gw).await;
    let text = own.clone() + &metrics(gw_down).await;
    let mut exposed = exposed_families(&own);
    assert!(exposed.len() > 10, "{exposed:?}");
    names.sort();
    exposed.sort();
    assert_eq!(
        names, exposed,
        "docs/operations.md (left) against /metrics (right)"
    );

    let samples = sample_labels(&text, &names);
    let mut checked: Vec<&str> = Vec::new();
    for (family, keys) in &samples {
        let (_, documented) = listed.iter().find(|(n, _)| n == family).unwrap();
        assert_eq!(keys, documented, "labels of {family}");
        checked.push(family);
    }
    checked.sort_unstable();
    checked.dedup();
    // All but the three with no series here (AG-Kit's and binary streams'
    // drops; client stalls, whose label tests/client_stall.rs reads).
    assert_eq!(
        checked.len(),
        names.len() - 3,
        "only {checked:?} had series in\n{text}"
    );
}
