//! Resumable streams on the in-memory store: every event has an id, a client
//! that comes back gets what it missed (or a snapshot) and then the live
//! tail; `keep` runs outlive their client and `stop` ends them. The same over
//! Redis with two gateway processes is in tests/node/e2e/resume.test.mjs.

use crate::common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use babelgate::config::Config;
use babelgate::server::Gateway;
use babelgate::{demo, registry};
use babelgate_core::Dialect;
use serde_json::Value;

use common::{listener, run_body};

/// A gateway in front of the demo agent (ag-ui, 10 ms between events).
async fn gateway(client: Dialect, extra: &str) -> SocketAddr {
    let (l, agent) = listener().await;
    tokio::spawn(demo::serve(l, Dialect::AgUi, Duration::from_millis(10)));
    let toml = format!(
        "[[routes]]\npath = \"/chat\"\nclient = \"{client}\"\nupstream = \"http://{agent}/agent\"\nupstream_protocol = \"ag-ui\"\n{extra}"
    );
    let (l, gw) = listener().await;
    tokio::spawn(Arc::new(Gateway::new(Config::parse(&toml).unwrap()).unwrap()).serve(l));
    gw
}

async fn start(gw: SocketAddr, dialect: Dialect, thread: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("http://{gw}/chat"))
        .header("content-type", "application/json")
        .body(run_body(dialect, thread, "a long answer please"))
        .send()
        .await
        .unwrap()
}

/// (id, data) of each SSE event.
fn events(bytes: &[u8]) -> Vec<(Option<String>, Value)> {
    common::sse_events(bytes)
}

/// Reads until at least `n` whole events have arrived.
async fn read_some(r: &mut reqwest::Response, n: usize) -> Vec<u8> {
    let mut got = Vec::new();
    while let Some(c) = r.chunk().await.unwrap() {
        got.extend_from_slice(&c);
        if got.windows(2).filter(|w| w == b"\n\n").count() >= n && got.ends_with(b"\n\n") {
            break;
        }
    }
    got
}

async fn get(gw: SocketAddr, path: &str, last_event_id: Option<&str>) -> reqwest::Response {
    let mut r = reqwest::Client::new().get(format!("http://{gw}{path}"));
    if let Some(id) = last_event_id {
        r = r.header("last-event-id", id);
    }
    r.send().await.unwrap()
}

/// The text of the AG-UI text message deltas in `events`.
fn agui_text(events: &[(Option<String>, Value)]) -> String {
    events
        .iter()
        .filter(|(_, v)| v["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|(_, v)| v["delta"].as_str().unwrap().to_string())
        .collect()
}

fn full_long_text() -> String {
    (0..200).map(|i| format!("{i} ")).collect()
}

#[tokio::test]
async fn every_event_carries_an_increasing_id() {
    let gw = gateway(Dialect::AgUi, "").await;
    let r = start(gw, Dialect::AgUi, "t-ids").await;
    let ev = events(&r.bytes().await.unwrap());
    let ids: Vec<String> = ev
        .iter()
        .map(|(id, _)| id.clone().expect("an id"))
        .collect();
    // `<run>-<n>`: the run's first log entry, then the event's number.
    let parsed: Vec<(&str, u64)> = ids
        .iter()
        .map(|s| {
            let (run, n) = s.rsplit_once('-').unwrap();
            (run, n.parse().unwrap())
        })
        .collect();
    assert!(parsed.iter().all(|(run, _)| *run == parsed[0].0), "{ids:?}");
    let numbers: Vec<u64> = parsed.iter().map(|(_, n)| *n).collect();
    assert_eq!(
        numbers,
        (1..=ids.len() as u64).collect::<Vec<_>>(),
        "{ids:?}"
    );
}

#[tokio::test]
async fn last_event_id_gets_exactly_the_missed_events_then_the_tail() {
    let gw = gateway(Dialect::AgUi, "on_disconnect = \"keep\"\n").await;
    let mut r = start(gw, Dialect::AgUi, "t-resume").await;
    let first = events(&read_some(&mut r, 20).await);
    drop(r);
    let last_id = first.last().unwrap().0.clone().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await; // events pile up meanwhile
    let rest = events(
        &get(gw, "/chat/t-resume/stream", Some(&last_id))
            .await
            .bytes()
            .await
            .unwrap(),
    );
    let mut all = first.clone();
    all.extend(rest.clone());
    let ids: Vec<_> = all.iter().map(|(id, _)| id.clone().unwrap()).collect();
    let unique: std::collections::BTreeSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "no duplicates");
    assert_eq!(agui_text(&all), full_long_text(), "nothing missing");
    assert_eq!(rest.last().unwrap().1["type"], "RUN_FINISHED");
    assert_ne!(
        rest[0].1["type"], "RUN_STARTED",
        "the replay starts after the id"
    );
}

#[tokio::test]
async fn without_last_event_id_ag_ui_gets_a_snapshot_and_the_open_message_reopened() {
    let gw = gateway(Dialect::AgUi, "on_disconnect = \"keep\"\n").await;
    let mut r = start(gw, Dialect::AgUi, "t-snap").await;
    let first = events(&read_some(&mut r, 30).await);
    drop(r);
    let back = events(
        &get(gw, "/chat/t-snap/stream", None)
            .await
            .bytes()
            .await
            .unwrap(),
    );
    let types: Vec<&str> = back
        .iter()
        .map(|(_, v)| v["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        &types[..3],
        ["RUN_STARTED", "MESSAGES_SNAPSHOT", "TEXT_MESSAGE_START"],
        "{types:?}"
    );
    let snapshot = &back[1].1["messages"];
    assert_eq!(snapshot[0]["role"], "user", "the run's input: {snapshot}");
    assert_eq!(
        agui_text(&back),
        full_long_text(),
        "the open message holds everything"
    );
    assert_eq!(*types.last().unwrap(), "RUN_FINISHED");
    assert!(first.len() > 5);
    // Only one start and one end of the text message.
    assert_eq!(
        types.iter().filter(|t| **t == "TEXT_MESSAGE_START").count(),
        1
    );
    assert_eq!(
        types.iter().filter(|t| **t == "TEXT_MESSAGE_END").count(),
        1
    );
}

#[tokio::test]
async fn vercel_resume_is_204_when_idle_and_replays_the_running_answer() {
    let gw = gateway(Dialect::Vercel, "").await;
    assert_eq!(get(gw, "/chat/nothing/stream", None).await.status(), 204);
    let r = start(gw, Dialect::Vercel, "chat-v").await;
    // A second tab opens while the answer streams.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let again = get(gw, "/chat/chat-v/stream", None).await;
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["x-vercel-ai-ui-message-stream"], "v1");
    let replay = events(&again.bytes().await.unwrap());
    let original = events(&r.bytes().await.unwrap());
    let strip =
        |v: &[(Option<String>, Value)]| v.iter().map(|(_, x)| x.clone()).collect::<Vec<_>>();
    assert_eq!(
        strip(&replay),
        strip(&original),
        "the whole answer from its start"
    );
    assert_eq!(replay[0].1["type"], "start");
    // Finished now: nothing to resume.
    assert_eq!(get(gw, "/chat/chat-v/stream", None).await.status(), 204);
}

#[tokio::test]
async fn cancel_policy_ends_the_run_with_its_client() {
    let gw = gateway(Dialect::AgUi, "").await;
    let mut r = start(gw, Dialect::AgUi, "t-cancel").await;
    read_some(&mut r, 5).await;
    drop(r);
    let mut status = 0;
    for _ in 0..100 {
        status = get(gw, "/chat/t-cancel/stream", None)
            .await
            .status()
            .as_u16();
        if status == 204 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, 204, "the run ended when its client left");
}

/// The text a client of `dialect` shows, read off its own wire fields (not
/// through our decoders): AG-UI `TEXT_MESSAGE_CONTENT`, HAI
/// `BUSINESS_DATA_CONTENT` (a string or `{output:{type:"text",content}}`),
/// Vercel `text-delta`, AG-Kit `text`.
fn native_text(dialect: Dialect, events: &[(Option<String>, Value)]) -> String {
    let piece = |v: &Value| -> Option<String> {
        let s = match dialect {
            Dialect::AgUi if v["type"] == "TEXT_MESSAGE_CONTENT" => &v["delta"],
            Dialect::Hai if v["type"] == "BUSINESS_DATA_CONTENT" => match &v["delta"] {
                d @ Value::String(_) => d,
                d if d["output"]["type"] == "text" => &d["output"]["content"],
                d => panic!("a non-text HAI delta in a text-only run: {d}"),
            },
            Dialect::Vercel if v["type"] == "text-delta" => &v["delta"],
            Dialect::AgKit if v["type"] == "text" => &v["content"],
            Dialect::A2a => &v["result"]["artifactUpdate"]["artifact"]["parts"][0]["text"],
            _ => return None,
        };
        if dialect == Dialect::A2a && !s.is_string() {
            return None; // not a text chunk
        }
        Some(s.as_str().expect("text is a string").to_string())
    };
    events.iter().filter_map(|(_, v)| piece(v)).collect()
}

/// The error event a client of `dialect` gets, if any.
fn error_event(dialect: Dialect, events: &[(Option<String>, Value)]) -> Option<Value> {
    let ty = match dialect {
        Dialect::AgUi | Dialect::Hai => "RUN_ERROR",
        Dialect::Vercel | Dialect::AgKit => "error",
        // A2A has no error codes: a stopped run is a canceled task, any
        // other failure a failed one (docs/mapping/a2a.md).
        Dialect::A2a => {
            let ends: Vec<Value> = events
                .iter()
                .filter_map(|(_, v)| {
                    let state = v["result"]["statusUpdate"]["status"]["state"].as_str()?;
                    let code = match state {
                        "TASK_STATE_CANCELED" => "stopped",
                        "TASK_STATE_FAILED" => "failed",
                        _ => return None,
                    };
                    Some(serde_json::json!({"code": code, "event": v}))
                })
                .collect();
            assert!(ends.len() <= 1, "more than one end: {ends:?}");
            return ends.first().cloned();
        }
    };
    let errors: Vec<&Value> = events
        .iter()
        .map(|(_, v)| v)
        .filter(|v| v["type"] == ty)
        .collect();
    assert!(errors.len() <= 1, "more than one error event: {errors:?}");
    errors.first().map(|v| (*v).clone())
}

/// A `keep` run outlives its client; `stop` ends it for whoever follows it,
/// in every client dialect, with that dialect's error event carrying the
/// `stopped` code (docs/errors.md), before the answer is complete.
#[tokio::test]
async fn a_kept_run_goes_on_and_stop_ends_it_with_the_dialects_error() {
    for dialect in Dialect::ALL {
        let gw = gateway(dialect, "on_disconnect = \"keep\"\n").await;
        let thread = format!("t-stop-{dialect}");
        let mut r = start(gw, dialect, &thread).await;
        assert_eq!(r.status(), 200, "{dialect}");
        let first = events(&read_some(&mut r, 5).await);
        drop(r);
        let follower = get(
            gw,
            &format!("/chat/{thread}/stream"),
            Some(first.last().unwrap().0.as_deref().unwrap()),
        )
        .await;
        assert_eq!(follower.status(), 200, "{dialect}");
        let stop = reqwest::Client::new()
            .post(format!("http://{gw}/chat/{thread}/stop"))
            .send()
            .await
            .unwrap();
        assert_eq!(stop.status(), 202, "{dialect}");
        let mut follower = follower;
        let mut body = Vec::new();
        let broke_off = loop {
            match follower.chunk().await {
                Ok(Some(c)) => body.extend_from_slice(&c),
                Ok(None) => break false,
                Err(_) => break true,
            }
        };
        // The legacy AG-Kit client sees a failure only as a body that breaks
        // off; every other dialect ends cleanly after its error event.
        assert_eq!(broke_off, dialect == Dialect::AgKit, "{dialect}");
        let rest = events(&body);

        let error = error_event(dialect, &rest)
            .unwrap_or_else(|| panic!("{dialect}: no error event after stop: {rest:?}"));
        assert_eq!(error["code"], "stopped", "{dialect}: {error}");
        let last = &rest.last().unwrap().1;
        match dialect {
            Dialect::AgUi | Dialect::Hai | Dialect::AgKit => {
                assert_eq!(last, &error, "{dialect}: ends with it")
            }
            Dialect::A2a => assert_eq!(last, &error["event"], "{dialect}: ends with it"),
            Dialect::Vercel => assert_eq!(last, &Value::String("[DONE]".into()), "{dialect}"),
        }
        // What the client saw before and after reconnecting is the start of
        // the answer, cut short by the stop. A Vercel resume replays the
        // answer from its `start` (docs/resume-and-stop.md), the others go on after the id.
        let seen = if dialect == Dialect::Vercel {
            assert_eq!(rest[0].1["type"], "start", "{dialect}: {rest:?}");
            rest.clone()
        } else {
            let mut seen = first.clone();
            seen.extend(rest.iter().cloned());
            seen
        };
        let text = native_text(dialect, &seen);
        let full = full_long_text();
        assert!(
            !text.is_empty() && full.starts_with(&text) && text.len() < full.len(),
            "{dialect}: not a cut prefix of the answer: {text:?}"
        );

        let again = reqwest::Client::new()
            .post(format!("http://{gw}/chat/{thread}/stop"))
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 404, "{dialect}: nothing runs any more");
    }
}

#[tokio::test]
async fn a_bad_last_event_id_is_a_400() {
    let gw = gateway(Dialect::AgUi, "").await;
    let r = get(gw, "/chat/x/stream", Some("not-an-id")).await;
    // No run for x: nothing to resume, whatever the header says.
    assert_eq!(r.status(), 204);
    let mut s = start(gw, Dialect::AgUi, "t-bad").await;
    read_some(&mut s, 2).await;
    let r = get(gw, "/chat/t-bad/stream", Some("not-an-id")).await;
    assert_eq!(r.status(), 400);
    let v: BTreeMap<String, Value> = r.json().await.unwrap();
    assert_eq!(v["error"]["field"], "last-event-id");
}

#[tokio::test]
async fn without_last_event_id_hai_gets_its_message_snapshot() {
    let gw = gateway(Dialect::Hai, "on_disconnect = \"keep\"\n").await;
    let mut r = start(gw, Dialect::Hai, "t-hai").await;
    read_some(&mut r, 20).await;
    drop(r);
    let back = events(
        &get(gw, "/chat/t-hai/stream", None)
            .await
            .bytes()
            .await
            .unwrap(),
    );
    let types: Vec<&str> = back
        .iter()
        .map(|(_, v)| v["type"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(types[0], "RUN_STARTED", "{types:?}");
    assert_eq!(types[1], "MESSAGE_SNAPSHOT", "{types:?}");
    assert_eq!(*types.last().unwrap(), "RUN_FINISHED", "{types:?}");
    // Decoded back, the reconnect holds the whole answer.
    let body: Vec<u8> = back
        .iter()
        .flat_map(|(_, v)| format!("data: {v}\n\n").into_bytes())
        .collect();
    let mut tr = registry::translator(Dialect::Hai, Dialect::AgUi, Default::default(), 1 << 20);
    let mut out = Vec::new();
    tr.push(&body, &mut out).unwrap();
    tr.finish(&mut out).unwrap();
    let text = agui_text(&events(&out));
    assert!(
        text.ends_with(&full_long_text()[full_long_text().len() - 20..]),
        "{text}"
    );
}

#[tokio::test]
async fn without_last_event_id_agkit_gets_the_run_from_its_start() {
    let gw = gateway(Dialect::AgKit, "on_disconnect = \"keep\"\n").await;
    let mut r = start(gw, Dialect::AgKit, "t-agkit").await;
    read_some(&mut r, 10).await;
    drop(r);
    let back = events(
        &get(gw, "/chat/t-agkit/stream", None)
            .await
            .bytes()
            .await
            .unwrap(),
    );
    let text: String = back
        .iter()
        .filter(|(_, v)| v["type"] == "text")
        .map(|(_, v)| v["content"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(text, full_long_text());
    assert_eq!(back.last().unwrap().1, Value::String("[DONE]".into()));
}

// ---- routes with `resume = false` --------------------------------------------

/// A gateway on a memory store the test keeps a handle on, to look inside.
async fn gateway_with_runs(toml: &str) -> (SocketAddr, Arc<dyn babelgate_store::RunLog>) {
    let config = Config::parse(toml).unwrap_or_else(|e| panic!("{e:?}"));
    let stores = babelgate::server::store_config(&config)
        .build()
        .await
        .unwrap();
    let runs = stores.runs.clone();
    let (l, gw) = listener().await;
    tokio::spawn(Arc::new(Gateway::with_stores(config, stores).unwrap()).serve(l));
    (gw, runs)
}

/// The body without the run log's `id:` lines.
fn without_ids(body: &[u8]) -> String {
    String::from_utf8_lossy(body)
        .split_inclusive('\n')
        .filter(|l| !l.starts_with("id:"))
        .collect()
}

/// Ids an encoder mints at random (`<prefix>_<32 hex digits>`, see
/// `core::ids`; the HAI run's message id) made equal, so that two streams
/// of the same upstream bytes compare.
fn minted_ids_masked(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('_') {
        let (before, after) = rest.split_at(i + 1);
        out.push_str(before);
        let hex = after
            .bytes()
            .take_while(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
            .count();
        rest = if hex >= 16 {
            out.push('*');
            &after[hex..]
        } else {
            after
        };
    }
    out.push_str(rest);
    run_log_ids_masked(&out)
}

/// Run ids minted as the run log's own (`<16 hex>.<32 hex>`, what a client
/// that sends none is given: an A2A task id) become `*`.
fn run_log_ids_masked(text: &str) -> String {
    let is_hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let head = b[i..].iter().take_while(|c| is_hex(c)).count();
        let tail = match b.get(i + head) {
            Some(b'.') if head == 16 => b[i + 17..].iter().take_while(|c| is_hex(c)).count(),
            _ => 0,
        };
        if tail == 32 {
            out.push('*');
            i += 49;
        } else {
            // hex digits, or one whole character
            let n = match head {
                0 => text[i..].chars().next().map_or(1, char::len_utf8),
                n => n,
            };
            out.push_str(&text[i..i + n]);
            i += n;
        }
    }
    out
}

/// Writes what a real client of `dialect` got into the directory tests/run.sh
/// feeds to that client's validator (`--dump`), when it is set.
fn dump_for_real_clients(dialect: Dialect, name: &str, body: &[u8]) {
    let var = match dialect {
        Dialect::AgUi => "AGUI_DUMP_DIR",
        Dialect::Vercel => "BABELGATE_VERCEL_CORPUS",
        Dialect::AgKit => "AGKIT_CLIENT_CHECK_DIR",
        // HAI has no client package (its spec rules run on the golden files);
        // the A2A SDK clients run in tests/node/e2e.
        Dialect::Hai | Dialect::A2a => return,
    };
    if let Some(dir) = std::env::var_os(var).map(std::path::PathBuf::from) {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.sse")), body).unwrap();
    }
}

/// Each client dialect on two routes to one upstream whose answer is fixed,
/// one logged (the default) and one with `resume = false`: the second gets
/// the same events in the same bytes, without `id:` lines, and the store
/// holds no run for it. The first proves the check can fail: its run is
/// there, and its events carry ids.
#[tokio::test]
async fn a_route_without_resume_streams_the_same_bytes_without_ids_and_logs_nothing() {
    let answer = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../tests/fixtures/ag-ui/server_tool.sse"
    ))
    .unwrap();
    let (l, up) = listener().await;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    tokio::spawn(common::serve_sse_recording(l, answer, seen.clone()));
    let mut toml = String::new();
    for d in Dialect::ALL {
        for (name, extra) in [("on", ""), ("off", "resume = false\n")] {
            toml.push_str(&format!(
                "[[routes]]\npath = \"/{name}-{d}\"\nclient = \"{d}\"\nupstream = \"http://{up}/agent\"\nupstream_protocol = \"ag-ui\"\n{extra}"
            ));
        }
    }
    let (gw, runs) = gateway_with_runs(&toml).await;
    for d in Dialect::ALL {
        let thread = format!("t-{d}");
        let mut got = BTreeMap::new();
        for name in ["on", "off"] {
            let r = reqwest::Client::new()
                .post(format!("http://{gw}/{name}-{d}"))
                .header("content-type", "application/json")
                .body(run_body(d, &thread, "hi"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200, "{name}-{d}");
            let bytes = r.bytes().await.unwrap();
            dump_for_real_clients(d, &format!("gateway-resume-{name}-{d}"), &bytes);
            got.insert(name, bytes);
        }
        let (on, off) = (&got["on"], &got["off"]);
        let on_events = events(on);
        assert!(on_events.len() > 5, "{d}: {on_events:?}");
        assert!(on_events.iter().all(|(id, _)| id.is_some()), "{d}");
        let off_events = events(off);
        assert!(off_events.iter().all(|(id, _)| id.is_none()), "{d}");
        assert_eq!(
            minted_ids_masked(&without_ids(on)),
            minted_ids_masked(&String::from_utf8_lossy(off)),
            "{d}: the logged stream less its ids"
        );
        let key = |name: &str| babelgate_store::run_key(&format!("/{name}-{d}"), &thread);
        assert!(runs.latest(&key("on")).await.unwrap().is_some(), "{d}");
        assert_eq!(
            runs.latest(&key("off")).await.unwrap(),
            None,
            "{d}: a run was logged for a route without resume"
        );
    }
    // An AG-Kit client's history is not the run log: still kept, so the
    // next turn on the route without resume takes the answer upstream.
    let next = reqwest::Client::new()
        .post(format!("http://{gw}/off-agkit"))
        .header("content-type", "application/json")
        .body(run_body(Dialect::AgKit, "t-agkit", "and tomorrow?"))
        .send()
        .await
        .unwrap();
    assert_eq!(next.status(), 200);
    next.bytes().await.unwrap();
    let last = seen.lock().unwrap().last().cloned().unwrap();
    assert!(
        last.contains("and tomorrow?") && last.contains("北京今天晴"),
        "{last}"
    );
}

/// `{path}/{id}/stream` and `/stop` on a route with `resume = false` say
/// that the route keeps no run log, also while a run streams there, rather
/// than answer as for an id with nothing running (204, 404 no_active_run).
#[tokio::test]
async fn resume_and_stop_on_a_route_without_resume_are_404_resume_disabled() {
    let gw = gateway(Dialect::AgUi, "resume = false\n").await;
    let mut r = start(gw, Dialect::AgUi, "t-off").await;
    let first = events(&read_some(&mut r, 3).await);
    assert!(first.iter().all(|(id, _)| id.is_none()), "{first:?}");
    let http = reqwest::Client::new();
    let answers = [
        get(gw, "/chat/t-off/stream", None).await,
        get(gw, "/chat/t-off/stream", Some("1732445127000-3")).await,
        get(gw, "/chat/never-ran/stream", None).await,
        http.post(format!("http://{gw}/chat/t-off/stop"))
            .send()
            .await
            .unwrap(),
    ];
    for a in answers {
        assert_eq!(a.status(), 404);
        assert!(a.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json"));
        let v: Value = a.json().await.unwrap();
        assert_eq!(v["error"]["code"], "resume_disabled", "{v}");
        assert_eq!(v["error"]["type"], "client", "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("resume = false"),
            "{v}"
        );
    }
    // The stream itself went on, whole.
    let rest = events(&r.bytes().await.unwrap());
    assert_eq!(rest.last().unwrap().1["type"], "RUN_FINISHED");
    let mut all = first;
    all.extend(rest);
    assert_eq!(agui_text(&all), full_long_text());
}

/// An AG-UI upstream for one stream: it writes the frames the test sends and
/// reports when the gateway closes the connection.
async fn held_upstream() -> (
    SocketAddr,
    tokio::sync::mpsc::UnboundedSender<String>,
    tokio::sync::oneshot::Receiver<()>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (l, a) = listener().await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let (closed_tx, closed) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let _ = s.read(&mut buf).await;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        s.write_all(head.as_bytes()).await.unwrap();
        loop {
            tokio::select! {
                frame = rx.recv() => {
                    let Some(frame) = frame else { break };
                    let chunk = format!("{:x}\r\n{frame}\r\n", frame.len());
                    if s.write_all(chunk.as_bytes()).await.is_err() {
                        break;
                    }
                }
                n = s.read(&mut buf) => {
                    if matches!(n, Ok(0) | Err(_)) {
                        break;
                    }
                }
            }
        }
        let _ = closed_tx.send(());
    });
    (a, tx, closed)
}

/// Reads until `want` is in what arrived.
async fn read_until(r: &mut reqwest::Response, got: &mut Vec<u8>, want: &str) {
    let found = tokio::time::timeout(Duration::from_secs(20), async {
        while !String::from_utf8_lossy(got).contains(want) {
            match r.chunk().await.unwrap() {
                Some(c) => got.extend_from_slice(&c),
                None => return false,
            }
        }
        true
    })
    .await;
    assert_eq!(
        found,
        Ok(true),
        "{want:?} never came: {}",
        String::from_utf8_lossy(got)
    );
}

/// What a route without resume still does: heartbeats, the inspector's
/// capture, the metrics, and a client that leaves cancelling the upstream.
/// (The pump's own tests, in server/pump.rs, run without a run log too.)
#[tokio::test]
async fn a_route_without_resume_keeps_heartbeats_captures_metrics_and_cancellation() {
    let (up, frames, closed) = held_upstream().await;
    let toml = format!(
        "[inspector]\n[[routes]]\npath = \"/off\"\nclient = \"ag-ui\"\nupstream = \"http://{up}/agent\"\nupstream_protocol = \"ag-ui\"\nresume = false\nheartbeat_ms = 100\n"
    );
    let (gw, runs) = gateway_with_runs(&toml).await;
    let mut r = reqwest::Client::new()
        .post(format!("http://{gw}/off"))
        .header("content-type", "application/json")
        .body(run_body(Dialect::AgUi, "t-beat", "hi"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut got = Vec::new();
    frames
        .send("data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n".into())
        .unwrap();
    read_until(&mut r, &mut got, "RUN_STARTED").await;
    read_until(&mut r, &mut got, ": ping\n\n").await;
    frames
        .send(
            "data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\n\n\
             data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"hello\"}\n\n"
                .into(),
        )
        .unwrap();
    read_until(&mut r, &mut got, "hello").await;
    assert!(!String::from_utf8_lossy(&got).contains("\nid:"));
    drop(r);
    tokio::time::timeout(Duration::from_secs(20), closed)
        .await
        .expect("the upstream request was cancelled when the client left")
        .unwrap();
    let key = babelgate_store::run_key("/off", "t-beat");
    assert_eq!(runs.latest(&key).await.unwrap(), None);

    // The inspector saw the stream: upstream events in, client events out.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let run = loop {
        let list: Value = reqwest::get(format!("http://{gw}/inspector/api/runs"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let ended = list["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["status"] != "streaming")
            .cloned();
        if let Some(run) = ended {
            break run;
        }
        assert!(tokio::time::Instant::now() < deadline, "{list}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(run["status"], "client_gone", "{run}");
    assert!(run["events_out"].as_u64().unwrap() >= 3, "{run}");
    let id = run["id"].as_str().unwrap();
    let client = common::get_text(format!("http://{gw}/inspector/api/runs/{id}/client")).await;
    assert!(
        client.contains("\"delta\":\"hello\"") && !client.contains("id:"),
        "{client}"
    );

    let metrics = common::get_text(format!("http://{gw}/metrics")).await;
    for line in [
        "babelgate_requests_total{route=\"/off\",status=\"499\"} 1",
        "babelgate_events_translated_total{from=\"ag-ui\",to=\"ag-ui\"} 3",
        "babelgate_active_streams 0",
        "babelgate_event_overhead_seconds_count{route=\"/off\"} 2",
    ] {
        assert!(metrics.contains(line), "{line} not in {metrics}");
    }
}

/// An upstream that goes quiet still ends the stream with the dialect's
/// error on a route without resume.
#[tokio::test]
async fn an_idle_upstream_on_a_route_without_resume_ends_with_the_dialects_error() {
    let (up, frames, _closed) = held_upstream().await;
    let toml = format!(
        "[[routes]]\npath = \"/off\"\nclient = \"vercel\"\nupstream = \"http://{up}/agent\"\nupstream_protocol = \"ag-ui\"\nresume = false\nidle_timeout_ms = 300\n"
    );
    let (gw, _) = gateway_with_runs(&toml).await;
    frames
        .send("data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n".into())
        .unwrap();
    let r = reqwest::Client::new()
        .post(format!("http://{gw}/off"))
        .header("content-type", "application/json")
        .body(run_body(Dialect::Vercel, "t-idle", "hi"))
        .send()
        .await
        .unwrap();
    let ev = events(&r.bytes().await.unwrap());
    let error = error_event(Dialect::Vercel, &ev).expect("an error chunk");
    assert!(
        error["errorText"]
            .as_str()
            .unwrap()
            .contains("sent nothing"),
        "{error}"
    );
    assert_eq!(ev.last().unwrap().1, Value::String("[DONE]".into()));
    assert!(ev.iter().all(|(id, _)| id.is_none()), "{ev:?}");
}
