//! One behaviour suite run against every backend (memory, Redis on a
//! private `redis-server`, and Redis Cluster: three primaries and three
//! replicas started once for this binary, each test under a prefix of its
//! own), then what only Redis does: sharing between instances and
//! surviving an outage.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use babelgate_core::Role;
use babelgate_store::{
    BoxStream, Bytes, Entry, EventId, Leases, LogItem, MemoryConfig, Message, Part, RedisConfig,
    RunInfo, RunLog, RunOutcome, RunStatus, RunWriter, StoreConfig, StoreError, Stores,
};
use futures_util::StreamExt;
use support::RedisServer;

/// Generous bound on anything that should happen "soon" (2 loaded cores).
const SOON: Duration = Duration::from_secs(10);
const LONG_LEASE: Duration = Duration::from_secs(60);
const SHORT_LEASE: Duration = Duration::from_millis(300);
const RETENTION: Duration = Duration::from_secs(60);

#[derive(Clone, Copy)]
enum Kind {
    Memory,
    Redis,
    Cluster,
}

struct Limits {
    history_ttl: Duration,
    max_messages: usize,
    max_run_entries: usize,
    max_run_bytes: usize,
    max_history_bytes: usize,
    max_input_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            history_ttl: Duration::from_secs(3600),
            max_messages: 100,
            max_run_entries: 10_000,
            max_run_bytes: 1 << 20,
            max_history_bytes: 1 << 20,
            max_input_bytes: 1 << 20,
        }
    }
}

/// A backend under test. `stores` and `other()` are two instances: with
/// Redis, two independent clients of one server (two gateway instances); in
/// memory, the same stores.
struct Backend {
    stores: Stores,
    config: StoreConfig,
    server: Option<RedisServer>,
}

impl Backend {
    async fn new(kind: Kind, limits: Limits) -> Self {
        let (config, server) = match kind {
            Kind::Memory => (
                StoreConfig::Memory(MemoryConfig {
                    history_ttl: limits.history_ttl,
                    max_messages: limits.max_messages,
                    max_run_entries: limits.max_run_entries,
                    max_run_bytes: limits.max_run_bytes,
                    max_history_bytes: limits.max_history_bytes,
                    max_input_bytes: limits.max_input_bytes,
                    ..MemoryConfig::default()
                }),
                None,
            ),
            Kind::Redis => {
                let server = RedisServer::start();
                let mut cfg = RedisConfig::new(server.url());
                cfg.history_ttl = limits.history_ttl;
                cfg.max_messages = limits.max_messages;
                cfg.max_run_entries = limits.max_run_entries;
                cfg.max_run_bytes = limits.max_run_bytes;
                cfg.max_history_bytes = limits.max_history_bytes;
                cfg.max_input_bytes = limits.max_input_bytes;
                cfg.op_timeout = Duration::from_secs(1);
                cfg.connect_timeout = Duration::from_millis(500);
                (StoreConfig::Redis(cfg), Some(server))
            }
            Kind::Cluster => {
                let mut cfg = RedisConfig::cluster(support::cluster::shared().urls());
                // Tests share the cluster: each its own keys.
                cfg.prefix = format!("t{}", babelgate_store::new_id());
                cfg.history_ttl = limits.history_ttl;
                cfg.max_messages = limits.max_messages;
                cfg.max_run_entries = limits.max_run_entries;
                cfg.max_run_bytes = limits.max_run_bytes;
                cfg.max_history_bytes = limits.max_history_bytes;
                cfg.max_input_bytes = limits.max_input_bytes;
                cfg.op_timeout = Duration::from_secs(2);
                cfg.connect_timeout = Duration::from_millis(500);
                (StoreConfig::Redis(cfg), None)
            }
        };
        let stores = config.build().await.expect("stores build");
        Backend {
            stores,
            config,
            server,
        }
    }

    async fn default(kind: Kind) -> Self {
        Backend::new(kind, Limits::default()).await
    }

    /// Another instance on the same data.
    async fn other(&self) -> Stores {
        match self.config {
            StoreConfig::Memory(_) => self.stores.clone(),
            StoreConfig::Redis(_) => self.config.build().await.expect("stores build"),
        }
    }

    fn runs(&self) -> Arc<dyn RunLog> {
        self.stores.runs.clone()
    }
}

fn msg(id: &str) -> Message {
    Message::text_message(id, Role::User, format!("text of {id}"))
}

async fn history_ids(stores: &Stores, thread: &str) -> Vec<String> {
    stores
        .conversations
        .history(thread)
        .await
        .expect("history")
        .into_iter()
        .map(|m| m.id)
        .collect()
}

fn ev(data: &str) -> Bytes {
    Bytes::from(data.to_string())
}

/// Reads until the stream ends, within `SOON`.
async fn collect(mut stream: BoxStream<'static, Result<LogItem, StoreError>>) -> Vec<LogItem> {
    let mut items = Vec::new();
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(item))) => items.push(item),
            Ok(Some(Err(e))) => panic!("read failed after {items:?}: {e}"),
            Ok(None) => return items,
            Err(_) => panic!("read did not end within {SOON:?}; got {items:?}"),
        }
    }
}

async fn next_item(stream: &mut BoxStream<'static, Result<LogItem, StoreError>>) -> LogItem {
    match tokio::time::timeout(SOON, stream.next()).await {
        Ok(Some(Ok(item))) => item,
        other => panic!("expected an item within {SOON:?}, got {other:?}"),
    }
}

fn events(items: &[LogItem]) -> Vec<(EventId, String)> {
    items
        .iter()
        .filter_map(|i| match i {
            LogItem::Event { id, data, .. } => {
                Some((*id, String::from_utf8_lossy(data).into_owned()))
            }
            _ => None,
        })
        .collect()
}

fn datas(items: &[LogItem]) -> Vec<String> {
    events(items).into_iter().map(|(_, d)| d).collect()
}

fn strictly_increasing(ids: &[EventId]) -> bool {
    ids.windows(2).all(|w| w[0] < w[1])
}

async fn append_all(log: &dyn RunLog, run: &str, datas: &[&str]) -> Vec<EventId> {
    let mut ids = Vec::new();
    for d in datas {
        ids.push(log.append(run, ev(d)).await.expect("append"));
    }
    ids
}

macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn memory() {
                    super::$name(super::Kind::Memory).await
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn redis() {
                    super::$name(super::Kind::Redis).await
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn cluster() {
                    super::$name(super::Kind::Cluster).await
                }
            }
        )*
    };
}

on_every_backend!(
    history_appends_in_order_and_keeps_the_newest,
    history_expires_when_idle_and_reads_refresh_it,
    history_round_trips_messages_whole,
    log_replays_everything_then_the_end,
    log_reads_after_an_id_without_duplicates_or_gaps,
    log_follows_live_appends,
    batches_append_in_order_with_single_appends,
    log_resumes_mid_run_from_the_last_id,
    log_ids_grow_across_runs,
    lapsed_lease_makes_the_run_lost,
    renewed_lease_keeps_the_run,
    dropped_writer_makes_the_run_lost,
    stop_request_reaches_the_owner,
    begin_displaces_the_running_run,
    ended_log_expires_after_retention,
    unknown_runs_are_reported,
    caps_drop_the_oldest_entries_and_readers_are_told,
    entries_keep_their_core_part_beside_the_bytes,
    core_parts_count_towards_the_byte_cap,
    a_chunk_appends_as_its_entries,
    ping_answers,
    waiting_for_a_stop_polls_nothing,
    history_is_capped_by_bytes,
    run_input_lives_and_expires_with_the_run,
    run_input_is_capped_by_bytes,
);

async fn history_appends_in_order_and_keeps_the_newest(kind: Kind) {
    let b = Backend::new(
        kind,
        Limits {
            max_messages: 3,
            ..Limits::default()
        },
    )
    .await;
    let c = &b.stores.conversations;
    c.append("t", vec![msg("a"), msg("b")]).await.unwrap();
    c.append("t", vec![msg("c"), msg("d")]).await.unwrap();
    c.append("t", vec![]).await.unwrap();
    assert_eq!(history_ids(&b.stores, "t").await, ["b", "c", "d"]);
    assert!(history_ids(&b.stores, "other").await.is_empty());
    c.append("u", vec![msg("x")]).await.unwrap();
    assert_eq!(history_ids(&b.other().await, "u").await, ["x"]);
}

/// A message of about `size` bytes as JSON.
fn sized(id: &str, size: usize) -> Message {
    Message::text_message(id, Role::User, "x".repeat(size))
}

fn json_len(messages: &[Message]) -> usize {
    messages
        .iter()
        .map(|m| serde_json::to_vec(m).unwrap().len())
        .sum()
}

async fn history_is_capped_by_bytes(kind: Kind) {
    let b = Backend::new(
        kind,
        Limits {
            max_history_bytes: 2_000,
            ..Limits::default()
        },
    )
    .await;
    let c = &b.stores.conversations;
    for i in 0..10 {
        c.append("t", vec![sized(&i.to_string(), 450)])
            .await
            .unwrap();
    }
    let kept = c.history("t").await.unwrap();
    let ids: Vec<&str> = kept.iter().map(|m| m.id.as_str()).collect();
    // About 500 bytes each: the newest that fit in 2000, oldest dropped.
    assert!(json_len(&kept) <= 2_000, "{}", json_len(&kept));
    assert_eq!(ids, ["7", "8", "9"]);
    // One message larger than the cap is not kept at all.
    c.append("t", vec![sized("huge", 5_000)]).await.unwrap();
    assert!(history_ids(&b.stores, "t").await.is_empty());
}

async fn run_input_lives_and_expires_with_the_run(kind: Kind) {
    let b = Backend::default(kind).await;
    let log = b.runs();
    let input = vec![msg("a"), msg("b")];
    assert_eq!(
        log.keep_input("nope", &input).await,
        Err(StoreError::UnknownRun("nope".into()))
    );
    log.begin("k", "r1", "me", LONG_LEASE).await.unwrap();
    assert!(log.input("r1").await.unwrap().is_empty());
    log.keep_input("r1", &input).await.unwrap();
    assert_eq!(b.other().await.runs.input("r1").await.unwrap(), input);
    // Not a conversation: no history holds it.
    assert!(history_ids(&b.stores, "r1").await.is_empty());
    log.end("r1", RunOutcome::Completed, Duration::from_millis(1))
        .await
        .unwrap();
    assert_eq!(
        log.input("r1").await.unwrap(),
        input,
        "kept for the retention"
    );
    // Retentions are at least a second: gone with the run after it.
    let deadline = Instant::now() + SOON;
    while log.info("r1").await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "the run never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(log.input("r1").await.unwrap().is_empty());
}

async fn run_input_is_capped_by_bytes(kind: Kind) {
    let b = Backend::new(
        kind,
        Limits {
            max_input_bytes: 2_000,
            ..Limits::default()
        },
    )
    .await;
    let log = b.runs();
    log.begin("k", "r1", "me", LONG_LEASE).await.unwrap();
    let input: Vec<Message> = (0..10).map(|i| sized(&i.to_string(), 450)).collect();
    log.keep_input("r1", &input).await.unwrap();
    let kept = log.input("r1").await.unwrap();
    assert!(
        json_len(&kept) + kept.len() < 2_000,
        "brackets and commas included"
    );
    assert_eq!(kept, input[7..], "the newest that fit");
}

async fn history_expires_when_idle_and_reads_refresh_it(kind: Kind) {
    let b = Backend::new(
        kind,
        Limits {
            history_ttl: Duration::from_secs(2),
            ..Limits::default()
        },
    )
    .await;
    let c = &b.stores.conversations;
    c.append("t", vec![msg("a")]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(history_ids(&b.stores, "t").await, ["a"], "read refreshes");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    // 2.4 s after the append, 1.2 s after the read.
    assert_eq!(history_ids(&b.stores, "t").await, ["a"]);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(history_ids(&b.stores, "t").await.is_empty(), "expired");
}

async fn history_round_trips_messages_whole(kind: Kind) {
    let b = Backend::default(kind).await;
    let mut m = Message::text_message("m1", Role::Assistant, "héllo\nworld");
    m.tool_call_id = Some("call-1".into());
    m.extra
        .insert("custom".into(), serde_json::json!({"nested": [1, 2, 3]}));
    let other = msg("m2");
    b.stores
        .conversations
        .append(
            "thread with spaces/and:colons{}",
            vec![m.clone(), other.clone()],
        )
        .await
        .unwrap();
    let got = b
        .other()
        .await
        .conversations
        .history("thread with spaces/and:colons{}")
        .await
        .unwrap();
    assert_eq!(got, vec![m, other]);
}

async fn log_replays_everything_then_the_end(kind: Kind) {
    let b = Backend::default(kind).await;
    let log = b.runs();
    assert_eq!(log.begin("k", "r1", "me", LONG_LEASE).await.unwrap(), None);
    let info = log.latest("k").await.unwrap().expect("latest");
    assert_eq!(
        info,
        RunInfo {
            run_id: "r1".into(),
            key: "k".into(),
            owner: "me".into(),
            status: RunStatus::Running,
        }
    );
    let payloads = [
        "data: one\n\n",
        "id: x\ndata: two\n\n",
        "",
        "data: four\n\n",
    ];
    let ids = append_all(&*log, "r1", &payloads).await;
    let binary = Bytes::from_static(&[0, 255, 10, 13, 128]);
    let last = log.append("r1", binary.clone()).await.unwrap();
    assert!(strictly_increasing(&ids) && ids[3] < last);
    log.end("r1", RunOutcome::Completed, RETENTION)
        .await
        .unwrap();

    let items = collect(log.read("r1", None)).await;
    assert_eq!(items.len(), 6, "{items:?}");
    assert_eq!(datas(&items[..4]), payloads);
    assert_eq!(
        items[4],
        LogItem::Event {
            id: last,
            data: binary,
            core: None,
        }
    );
    assert_eq!(items[5], LogItem::End(RunOutcome::Completed));
    let got: Vec<_> = events(&items).into_iter().map(|(id, _)| id).collect();
    assert_eq!(got[..4], ids[..]);
    // Ids survive the trip through their text form (the SSE `id:`).
    assert_eq!(ids[1].to_string().parse::<EventId>(), Ok(ids[1]));

    let info = b.other().await.runs.latest("k").await.unwrap().unwrap();
    assert_eq!(info.status, RunStatus::Ended(RunOutcome::Completed));
    assert_eq!(
        log.append("r1", ev("late")).await,
        Err(StoreError::NotRunning("r1".into()))
    );
    assert_eq!(
        log.end("r1", RunOutcome::Failed, RETENTION).await,
        Err(StoreError::NotRunning("r1".into()))
    );
    assert!(!log.request_stop("r1").await.unwrap());
}

async fn log_reads_after_an_id_without_duplicates_or_gaps(kind: Kind) {
    let b = Backend::default(kind).await;
    let log = b.runs();
    log.begin("k", "r1", "me", LONG_LEASE).await.unwrap();
    let payloads: Vec<String> = (0..10).map(|i| format!("e{i}")).collect();
    let refs: Vec<&str> = payloads.iter().map(String::as_str).collect();
    let ids = append_all(&*log, "r1", &refs).await;
    log.end("r1", RunOutcome::Failed, RETENTION).await.unwrap();
    for cut in [0, 3, 8, 9] {
        let items = collect(log.read("r1", Some(ids[cut]))).await;
        let got = events(&items);
        let want: Vec<_> = ids[cut + 1..]
            .iter()
            .copied()
            .zip(payloads[cut + 1..].iter().cloned())
            .collect();
        assert_eq!(got, want, "after #{cut}");
        assert_eq!(items.last(), Some(&LogItem::End(RunOutcome::Failed)));
    }
    // An id from before the run (an earlier run's) replays it whole.
    let items = collect(log.read("r1", Some(EventId::new(1, 0)))).await;
    assert_eq!(events(&items).len(), 10);
}

async fn batches_append_in_order_with_single_appends(kind: Kind) {
    let b = Backend::default(kind).await;
    let log = b.runs();
    log.begin("k", "r1", "me", LONG_LEASE).await.unwrap();
    let mut ids = append_all(&*log, "r1", &["a"]).await;
    log.append_batch("r1", vec![ev("b"), ev("c"), ev("d")], &mut ids)
        .await
        .unwrap();
    ids.extend(append_all(&*log, "r1", &["e"]).await);
    log.append_batch("r1", Vec::new(), &mut ids).await.unwrap();
    assert_eq!(ids.len(), 5);
    assert!(strictly_increasing(&ids), "{ids:?}");
    log.end("r1", RunOutcome::Completed, RETENTION)
        .await
        .unwrap();
    // Readers see each event of a batch with its own id, resumable from any.
    let after_b = collect(log.read("r1", Some(ids[1]))).await;
    assert_eq!(datas(&after_b), ["c", "d", "e"]);
    let all = collect(log.read("r1", None)).await;
    let want: Vec<_> = ids
        .iter()
        .copied()
        .zip(["a", "b", "c", "d", "e"].map(String::from))
        .collect();
    assert_eq!(events(&all), want);
    // An ended run takes no batch, and reports no id for it.
    let mut more = Vec::new();
    assert_eq!(
        log.append_batch("r1", vec![ev("f")], &mut more).await,
        Err(StoreError::NotRunning("r1".into()))
    );
    assert!(more.is_empty());
    // An empty batch is nothing to do, on any backend, whatever the run.
    log.append_batch("r1", Vec::new(), &mut more).await.unwrap();
}

async fn log_follows_live_appends(kind: Kind) {
    let b = Backend::default(kind).await;
    let writer = b.runs();
    let reader_side = b.other().await.runs;
    writer.begin("k", "r1", "me", LONG_LEASE).await.unwrap();
    let reading = tokio::spawn(collect(reader_side.read("r1", None)));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(writer.append("r1", ev(&format!("live {i}"))).await.unwrap());
        if i % 5 == 0 {
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }
    writer
        .end("r1", RunOutcome::Cancelled, RETENTION)
        .await
        .unwrap();
    let items = reading.await.unwrap();
    let got = events(&items);
    assert_eq!(
        got.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        ids,
        "every event once, in order"
    );
    assert_eq!(got[7].1, "live 7");
    assert_eq!(items.last(), Some(&LogItem::End(RunOutcome::Cancelled)));
}

async fn log_resumes_mid_run_from_the_last_id(kind: Kind) {
    let b = Backend::default(kind).await;
    let log = b.runs();
    log.begin("k", "r1", "me", LONG_LEASE).await.unwrap();
    append_all(&*log, "r1", &["a", "b", "c"]).await;
    let mut first = b.other().await.runs.read("r1", None);
    let mut seen = Vec::new();
    for _ in 0..2 {
        match next_item(&mut first).await {
            LogItem::Event { id, data, .. } => seen.push((id, data)),
            other => panic!("{other:?}"),
        }
    }
    drop(first); // the client disconnects after "b"
    append_all(&*log, "r1", &["d", "e"]).await;
    let resumed = tokio::spawn(collect(log.read("r1", Some(seen[1].0))));
    tokio::time::sleep(Duration::from_millis(50)).await;
    append_all(&*log, "r1", &["f"]).await;
    log.end("r1", RunOutcome::Completed, RETENTION)
        .await
        .unwrap();
    let items = resumed.await.unwrap();
    assert_eq!(datas(&items), ["c", "d", "e", "f"]);
    assert_eq!(items.last(), Some(&LogItem::End(RunOutcome::Completed)));
}

async fn log_ids_grow_across_runs(kind: Kind) {
    let b = Backend::default(kind).await;
    let log = b.runs();
    log.begin("k", "r1", "me", LONG_LEASE).await.unwrap();
    let first = append_all(&*log, "r1", &["a", "b"]).await;
    log.end("r1", RunOutcome::Completed, RETENTION)
        .await
        .unwrap();
    log.begin("k", "r2", "me", LONG_LEASE).await.unwrap();
    let second = append_all(&*log, "r2", &["c"]).await;
    assert!(first[1] < second[0]);
    log.end("r2", RunOutcome::Completed, RETENTION)
        .await
        .unwrap();
    // A Last-Event-ID of the first run replays the second whole.
    let items = collect(log.read("r2", Some(first[1]))).await;
    assert_eq!(datas(&items), ["c"]);
}

async fn lapsed_lease_makes_the_run_lost(kind: Kind) {
    let b = Backend::default(kind).await;
    let log = b.runs();
    log.begin("k", "r1", "me", SHORT_LEASE).await.unwrap();
    append_all(&*log, "r1", &["a", "b"]).await;
    let started = Instant::now();
    // Another instance follows the run; its owner never renews.
    let items = collect(b.other().await.runs.read("r1", None)).await;
    assert_eq!(datas(&items), ["a", "b"]);
    assert_eq!(items.last(), Some(&LogItem::Lost));
    assert!(started.elapsed() < SOON);
    let info = log.latest("k").await.unwrap().unwrap();
    assert_eq!(info.status, RunStatus::Lost);
    let not_running = Err(StoreError::NotRunning("r1".into()));
    assert_eq!(log.append("r1", ev("c")).await.map(|_| ()), not_running);
    assert_eq!(log.renew("r1", "me", SHORT_LEASE).await, not_running);
    assert_eq!(
        log.end("r1", RunOutcome::Completed, RETENTION).await,
        not_running
    );
    // Lost stays lost for every later reader.
    let again = collect(log.read("r1", None)).await;
    assert_eq!(again.last(), Some(&LogItem::Lost));

    // Without a reader, a lookup notices the lapse too.
    log.begin("k2", "r2", "me", SHORT_LEASE).await.unwrap();
    let deadline = Instant::now() + SOON;
    loop {
        let status = log.info("r2").await.unwrap().unwrap().status;
        if status == RunStatus::Lost {
            break;
        }
        assert_eq!(status, RunStatus::Running);
        assert!(Instant::now() < deadline, "r2 never reported lost");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn renewed_lease_keeps_the_run(kind: Kind) {
    let b = Backend::default(kind).await;
    let (writer, previous) = RunWriter::begin(&Leases::new(b.runs()), "k", "r1", "me", SHORT_LEASE)
        .await
        .unwrap();
    assert_eq!(previous, None);
    assert_eq!(writer.run_id(), "r1");
    let reading = tokio::spawn(collect(b.other().await.runs.read("r1", None)));
    // Several leases long, with quiet spells longer than a lease.
    for i in 0..4 {
        writer.append(ev(&format!("tick {i}"))).await.unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    assert!(b.runs().info("r1").await.unwrap().unwrap().is_running());
    // Renewing as another owner fails.
    assert_eq!(
        b.runs().renew("r1", "someone else", SHORT_LEASE).await,
        Err(StoreError::NotRunning("r1".into()))
    );
    writer.end(RunOutcome::Completed, RETENTION).await.unwrap();
    let items = reading.await.unwrap();
    assert_eq!(datas(&items), ["tick 0", "tick 1", "tick 2", "tick 3"]);
    assert_eq!(items.last(), Some(&LogItem::End(RunOutcome::Completed)));
}

async fn dropped_writer_makes_the_run_lost(kind: Kind) {
    let b = Backend::default(kind).await;
    let (writer, _) = RunWriter::begin(&Leases::new(b.runs()), "k", "r1", "me", SHORT_LEASE)
        .await
        .unwrap();
    writer.append(ev("a")).await.unwrap();
    let reading = tokio::spawn(collect(b.other().await.runs.read("r1", None)));
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(writer); // the pump died without ending the run
    let items = reading.await.unwrap();
    assert_eq!(datas(&items), ["a"]);
    assert_eq!(items.last(), Some(&LogItem::Lost));
}

async fn stop_request_reaches_the_owner(kind: Kind) {
    let b = Backend::default(kind).await;
    let (writer, _) = RunWriter::begin(&Leases::new(b.runs()), "k", "r1", "me", LONG_LEASE)
        .await
        .unwrap();
    assert!(!writer.is_stop_requested());
    // Made before the request, as a stream makes it once for its life.
    let signal = tokio::spawn(writer.stop_signal());
    // The stop endpoint runs on another instance: it finds the run by key.
    let other = b.other().await.runs;
    let run = other.latest("k").await.unwrap().unwrap();
    assert!(run.is_running());
    assert!(!signal.is_finished());
    assert!(other.request_stop(&run.run_id).await.unwrap());
    tokio::time::timeout(SOON, writer.stop_requested())
        .await
        .expect("the owner learns of the stop");
    tokio::time::timeout(SOON, signal)
        .await
        .expect("so does the signal made before")
        .unwrap();
    assert!(writer.is_stop_requested());
    assert!(b.runs().stop_requested("r1").await.unwrap());
    writer.end(RunOutcome::Cancelled, RETENTION).await.unwrap();
    assert!(!other.request_stop("r1").await.unwrap(), "not running");
    // Without the writer: the flag alone.
    let log = b.runs();
    log.begin("k2", "r2", "me", LONG_LEASE).await.unwrap();
    assert!(!log.stop_requested("r2").await.unwrap());
    assert!(log.request_stop("r2").await.unwrap());
    assert!(log.stop_requested("r2").await.unwrap());
}

/// Calls of `command` the server has answered (`INFO commandstats`).
async fn redis_calls(url: &str, command: &str) -> u64 {
    let client = redis::Client::open(url).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut con)
        .await
        .unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

async fn waiting_for_a_stop_polls_nothing(kind: Kind) {
    use std::sync::atomic::Ordering::Relaxed;
    let b = Backend::default(kind).await;
    let url = b.server.as_ref().map(|s| s.url());
    let counting = Arc::new(babelgate_store::testing::Counting::new(b.runs()));
    let log: Arc<dyn RunLog> = counting.clone();
    const RUNS: usize = 5;
    let leases = Leases::new(log.clone());
    let mut writers = Vec::new();
    for i in 0..RUNS {
        let (w, _) = RunWriter::begin(
            &leases,
            &format!("k{i}"),
            &format!("r{i}"),
            "me",
            LONG_LEASE,
        )
        .await
        .unwrap();
        // Made at the start, as a stream's pump makes it.
        tokio::spawn(w.stop_signal());
        writers.push(w);
    }
    // Every writer is waiting once its stream has asked.
    let deadline = Instant::now() + SOON;
    while counting.stop_waits.load(Relaxed) < RUNS {
        assert!(Instant::now() < deadline, "writers never waited for a stop");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let hgets_before = match &url {
        Some(url) => redis_calls(url, "hget").await,
        None => 0,
    };
    // Open streams, idle: the old writer polled every 250 ms.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        counting.stop_checks.load(Relaxed),
        0,
        "polled stop_requested"
    );
    assert_eq!(counting.stop_waits.load(Relaxed), RUNS, "one wait per run");
    if let Some(url) = &url {
        let hgets = redis_calls(url, "hget").await - hgets_before;
        // At most the first check of each run and one re-check by the
        // subscription; nothing per interval.
        assert!(hgets <= 2 * RUNS as u64, "{hgets} HGETs while idle");
    }
    // And a stop still arrives, to the right run only.
    assert!(b.other().await.runs.request_stop("r3").await.unwrap());
    tokio::time::timeout(SOON, writers[3].stop_requested())
        .await
        .expect("stop seen");
    assert!(writers
        .iter()
        .enumerate()
        .all(|(i, w)| w.is_stop_requested() == (i == 3)));
}

/// A stop published while the store's subscription is down (killed by the
/// server here) reaches the owner once it subscribes again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stop_during_a_resubscription_is_not_lost() {
    let b = Backend::default(Kind::Redis).await;
    let StoreConfig::Redis(cfg) = &b.config else {
        unreachable!()
    };
    let store = Arc::new(
        babelgate_store::RedisStore::open(cfg.clone())
            .await
            .unwrap(),
    );
    let (writer, _) = RunWriter::begin(&Leases::new(store.clone()), "k", "r1", "me", LONG_LEASE)
        .await
        .unwrap();
    let signal = tokio::spawn(writer.stop_signal());
    let deadline = Instant::now() + SOON;
    while store.stop_subscriptions() < 1 {
        assert!(Instant::now() < deadline, "never subscribed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let client = redis::Client::open(b.server.as_ref().unwrap().url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(killed, 1);
    // Published to no one: the subscription is gone and waits before it
    // subscribes again.
    assert!(b.other().await.runs.request_stop("r1").await.unwrap());
    tokio::time::timeout(SOON, signal)
        .await
        .expect("the stop is not lost")
        .unwrap();
    assert!(writer.is_stop_requested());
    assert!(store.stop_subscriptions() >= 2, "it subscribed again");
}

async fn begin_displaces_the_running_run(kind: Kind) {
    let b = Backend::default(kind).await;
    let log = b.runs();
    log.begin("k", "r1", "a", LONG_LEASE).await.unwrap();
    append_all(&*log, "r1", &["one"]).await;
    let previous = log.begin("k", "r2", "b", LONG_LEASE).await.unwrap();
    assert_eq!(
        previous,
        Some(RunInfo {
            run_id: "r1".into(),
            key: "k".into(),
            owner: "a".into(),
            status: RunStatus::Running,
        })
    );
    assert_eq!(log.latest("k").await.unwrap().unwrap().run_id, "r2");
    // The displaced run goes on under its own id; its end leaves the key alone.
    append_all(&*log, "r1", &["two"]).await;
    log.end("r1", RunOutcome::Completed, RETENTION)
        .await
        .unwrap();
    let latest = log.latest("k").await.unwrap().unwrap();
    assert_eq!(
        (latest.run_id.as_str(), latest.status),
        ("r2", RunStatus::Running)
    );
    assert_eq!(datas(&collect(log.read("r1", None)).await), ["one", "two"]);
    // An ended run is not reported as displaced.
    log.end("r2", RunOutcome::Completed, RETENTION)
        .await
        .unwrap();
    assert_eq!(log.begin("k", "r3", "b", LONG_LEASE).await.unwrap(), None);
}

async fn ended_log_expires_after_retention(kind: Kind) {
    let b = Backend::default(kind).await;
    let log = b.runs();
    log.begin("k", "r1", "me", LONG_LEASE).await.unwrap();
    append_all(&*log, "r1", &["a"]).await;
    log.end("r1", RunOutcome::Completed, Duration::ZERO)
        .await
        .unwrap();
    // Retention is at least MIN_RETENTION (1 s): readable right after.
    assert_eq!(datas(&collect(log.read("r1", None)).await), ["a"]);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(log.info("r1").await.unwrap(), None);
    assert_eq!(log.latest("k").await.unwrap(), None);
    let first = log.read("r1", None).next().await;
    assert_eq!(first, Some(Err(StoreError::UnknownRun("r1".into()))));
}

async fn unknown_runs_are_reported(kind: Kind) {
    let b = Backend::default(kind).await;
    let log = b.runs();
    let unknown = StoreError::UnknownRun("nope".into());
    let mut read = log.read("nope", None);
    assert_eq!(read.next().await, Some(Err(unknown.clone())));
    assert_eq!(read.next().await, None);
    assert_eq!(log.info("nope").await.unwrap(), None);
    assert_eq!(log.latest("nope").await.unwrap(), None);
    assert!(!log.request_stop("nope").await.unwrap());
    assert!(!log.stop_requested("nope").await.unwrap());
    assert_eq!(
        log.append("nope", ev("x")).await.map(|_| ()),
        Err(unknown.clone())
    );
    assert_eq!(
        log.renew("nope", "me", LONG_LEASE).await,
        Err(unknown.clone())
    );
    assert_eq!(
        log.end("nope", RunOutcome::Completed, RETENTION).await,
        Err(unknown)
    );
}

async fn caps_drop_the_oldest_entries_and_readers_are_told(kind: Kind) {
    let b = Backend::new(
        kind,
        Limits {
            max_run_entries: 3,
            max_run_bytes: 10,
            ..Limits::default()
        },
    )
    .await;
    let log = b.runs();
    log.begin("k", "r1", "me", LONG_LEASE).await.unwrap();
    let ids = append_all(&*log, "r1", &["a", "b", "c", "d", "e"]).await;
    log.end("r1", RunOutcome::Completed, RETENTION)
        .await
        .unwrap();
    let all = collect(log.read("r1", None)).await;
    assert_eq!(all.first(), Some(&LogItem::Truncated));
    assert_eq!(datas(&all), ["c", "d", "e"], "entry cap");
    let cut = collect(log.read("r1", Some(ids[0]))).await;
    assert_eq!(cut.first(), Some(&LogItem::Truncated), "b was dropped");
    let whole = collect(log.read("r1", Some(ids[1]))).await;
    assert_eq!(datas(&whole), ["c", "d", "e"]);
    assert!(
        !whole.contains(&LogItem::Truncated),
        "nothing asked for was dropped"
    );

    log.begin("k", "r2", "me", LONG_LEASE).await.unwrap();
    append_all(&*log, "r2", &["1234", "5678", "9abc"]).await;
    log.end("r2", RunOutcome::Completed, RETENTION)
        .await
        .unwrap();
    let items = collect(log.read("r2", None)).await;
    assert_eq!(items.first(), Some(&LogItem::Truncated));
    assert_eq!(datas(&items), ["5678", "9abc"], "byte cap");

    // A batch that crosses the caps keeps what appending one by one keeps.
    log.begin("k", "r3", "me", LONG_LEASE).await.unwrap();
    let batch = ["a", "b", "c", "d", "e"].map(|d| entry(d, None)).to_vec();
    let mut ids = Vec::new();
    log.append_entries("r3", batch, &mut ids).await.unwrap();
    assert_eq!(ids.len(), 5);
    log.end("r3", RunOutcome::Completed, RETENTION)
        .await
        .unwrap();
    let items = collect(log.read("r3", None)).await;
    assert_eq!(items.first(), Some(&LogItem::Truncated));
    assert_eq!(datas(&items), ["c", "d", "e"], "entry cap, one batch");
    let whole = collect(log.read("r3", Some(ids[1]))).await;
    assert_eq!(datas(&whole), ["c", "d", "e"]);
}

fn entry(data: &str, core: Option<&str>) -> Entry {
    Entry::new(ev(data), core.map(ev))
}

/// Each entry comes back with its bytes exactly and its core part as
/// given (none, empty, binary; core-only entries with empty bytes), in
/// order with plain appends, from the start, after an id and live.
async fn entries_keep_their_core_part_beside_the_bytes(kind: Kind) {
    let b = Backend::default(kind).await;
    let log = b.runs();
    log.begin("k", "r1", "me", LONG_LEASE).await.unwrap();
    let binary = Bytes::from_static(&[0, 255, 10, 13, 128]);
    let batch = vec![
        entry("data: a\n\n", Some("[{\"kind\":\"a\"}]")),
        entry("data: b\n\n", None),
        entry("", Some("[{\"kind\":\"dropped\"}]")),
        Entry::new(ev("data: c\n\n"), Some(binary.clone())),
        entry("data: d\n\n", Some("")),
    ];
    let mut ids = Vec::new();
    log.append_entries("r1", batch.clone(), &mut ids)
        .await
        .unwrap();
    assert_eq!(ids.len(), 5);
    let plain = log.append("r1", ev("data: e\n\n")).await.unwrap();
    assert!(strictly_increasing(&ids) && ids[4] < plain);
    assert_eq!(log.last_id("r1").await.unwrap(), Some(plain));

    let mut live = b.other().await.runs.read("r1", Some(plain));
    let mut more = Vec::new();
    log.append_entries("r1", vec![entry("", Some("late"))], &mut more)
        .await
        .unwrap();
    assert_eq!(
        next_item(&mut live).await,
        LogItem::Event {
            id: more[0],
            data: Bytes::new(),
            core: Some(ev("late")),
        },
        "a core-only entry reaches a live reader too"
    );
    assert_eq!(log.last_id("r1").await.unwrap(), Some(more[0]));
    log.end("r1", RunOutcome::Completed, RETENTION)
        .await
        .unwrap();

    let want = |from: usize| -> Vec<LogItem> {
        batch
            .iter()
            .zip(&ids)
            .skip(from)
            .map(|(e, id)| LogItem::Event {
                id: *id,
                data: e.event(),
                core: e.core(),
            })
            .chain([
                LogItem::Event {
                    id: plain,
                    data: ev("data: e\n\n"),
                    core: None,
                },
                LogItem::Event {
                    id: more[0],
                    data: Bytes::new(),
                    core: Some(ev("late")),
                },
                LogItem::End(RunOutcome::Completed),
            ])
            .collect()
    };
    let reader = b.other().await.runs;
    assert_eq!(collect(reader.read("r1", None)).await, want(0));
    assert_eq!(collect(reader.read("r1", Some(ids[1]))).await, want(2));
}

/// A buffer appended whole reads back as its parts appended one by one:
/// the same events and core parts, in order, across buffers, with the
/// entry cap cutting through a buffer.
async fn a_chunk_appends_as_its_entries(kind: Kind) {
    let b = Backend::new(
        kind,
        Limits {
            max_run_entries: 5,
            ..Limits::default()
        },
    )
    .await;
    let log = b.runs();
    let part = |start, split, end, has_core| Part {
        start,
        split,
        end,
        has_core,
    };
    // Two events with core parts, one without, one core-only entry.
    let first = Bytes::from_static(b"data: a\n\nAAdata: b\n\ndata: c\n\nCCC!");
    let first_parts = [
        part(0, 9, 11, true),
        part(11, 20, 20, false),
        part(20, 29, 32, true),
        part(32, 32, 33, true),
    ];
    let second = Bytes::from_static(b"data: d\n\nDdata: e\n\n");
    let second_parts = [part(0, 9, 10, true), part(10, 19, 19, true)];
    let mut chunk_ids = Vec::new();
    let mut entry_ids = Vec::new();
    log.begin("k", "chunks", "me", LONG_LEASE).await.unwrap();
    log.begin("k2", "entries", "me", LONG_LEASE).await.unwrap();
    for (chunk, parts) in [(&first, &first_parts[..]), (&second, &second_parts[..])] {
        log.append_chunk("chunks", chunk.clone(), parts, &mut chunk_ids)
            .await
            .unwrap();
        log.append_entries("entries", Part::entries_of(parts, chunk), &mut entry_ids)
            .await
            .unwrap();
    }
    assert_eq!(chunk_ids.len(), 6);
    assert!(strictly_increasing(&chunk_ids));
    for run in ["chunks", "entries"] {
        log.end(run, RunOutcome::Completed, RETENTION)
            .await
            .unwrap();
    }
    // The events and core parts of a read, without their ids.
    let plain = |items: Vec<LogItem>| -> Vec<(Bytes, Option<Bytes>)> {
        items
            .into_iter()
            .filter_map(|i| match i {
                LogItem::Event { data, core, .. } => Some((data, core)),
                _ => None,
            })
            .collect()
    };
    let want = vec![
        (ev("data: b\n\n"), None),
        (ev("data: c\n\n"), Some(ev("CCC"))),
        (Bytes::new(), Some(ev("!"))),
        (ev("data: d\n\n"), Some(ev("D"))),
        (ev("data: e\n\n"), Some(Bytes::new())),
    ];
    let reader = b.other().await.runs;
    let chunks = collect(reader.read("chunks", None)).await;
    assert_eq!(chunks.first(), Some(&LogItem::Truncated), "a was dropped");
    assert_eq!(chunks.last(), Some(&LogItem::End(RunOutcome::Completed)));
    assert_eq!(plain(chunks), want);
    assert_eq!(plain(collect(reader.read("entries", None)).await), want);
    let after = collect(reader.read("chunks", Some(chunk_ids[3]))).await;
    assert_eq!(plain(after), want[3..]);
}

/// The byte cap counts both parts of an entry.
async fn core_parts_count_towards_the_byte_cap(kind: Kind) {
    let b = Backend::new(
        kind,
        Limits {
            max_run_bytes: 20,
            ..Limits::default()
        },
    )
    .await;
    let log = b.runs();
    log.begin("k", "r1", "me", LONG_LEASE).await.unwrap();
    let mut ids = Vec::new();
    // 4 + 6, then 2 + 8: 20 bytes, all kept; one byte more drops the first.
    log.append_entries(
        "r1",
        vec![entry("aaaa", Some("AAAAAA")), entry("bb", Some("BBBBBBBB"))],
        &mut ids,
    )
    .await
    .unwrap();
    let kept = collect_until_quiet(&*log, "r1").await;
    assert_eq!(kept, ["aaaa", "bb"]);
    log.append_entries("r1", vec![entry("", Some("c"))], &mut ids)
        .await
        .unwrap();
    // 10 + 1 held: a 9-byte entry fits only if dropping the first took both
    // of its parts off the count.
    log.append_entries("r1", vec![entry("", Some("123456789"))], &mut ids)
        .await
        .unwrap();
    log.end("r1", RunOutcome::Completed, RETENTION)
        .await
        .unwrap();
    let items = collect(log.read("r1", None)).await;
    assert_eq!(items.first(), Some(&LogItem::Truncated), "{items:?}");
    assert_eq!(datas(&items), ["bb", "", ""]);
    let after_first = collect(log.read("r1", Some(ids[0]))).await;
    assert!(
        !after_first.contains(&LogItem::Truncated),
        "only the first entry was dropped: {after_first:?}"
    );
}

/// The data of the entries a running run holds now.
async fn collect_until_quiet(log: &dyn RunLog, run: &str) -> Vec<String> {
    let last = log.last_id(run).await.unwrap().expect("entries");
    let mut read = log.read(run, None);
    let mut out = Vec::new();
    loop {
        match next_item(&mut read).await {
            LogItem::Event { id, data, .. } => {
                out.push(String::from_utf8_lossy(&data).into_owned());
                if id == last {
                    return out;
                }
            }
            other => panic!("{other:?} after {out:?}"),
        }
    }
}

async fn ping_answers(kind: Kind) {
    let b = Backend::default(kind).await;
    b.stores.ping().await.unwrap();
    b.stores.conversations.ping().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_batches_survive_a_flushed_script_cache() {
    let b = Backend::default(Kind::Redis).await;
    let log = b.runs();
    log.begin("k", "r1", "me", LONG_LEASE).await.unwrap();
    let mut ids = Vec::new();
    log.append_batch("r1", vec![ev("a"), ev("b")], &mut ids)
        .await
        .unwrap();
    // What a Redis restarted without persistence, or SCRIPT FLUSH, leaves.
    let url = b.server.as_ref().expect("redis").url();
    let mut raw = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async::<()>(&mut raw)
        .await
        .unwrap();
    log.append_batch("r1", vec![ev("c"), ev("d")], &mut ids)
        .await
        .unwrap();
    log.end("r1", RunOutcome::Completed, RETENTION)
        .await
        .unwrap();
    let all = collect(log.read("r1", None)).await;
    assert_eq!(
        datas(&all),
        ["a", "b", "c", "d"],
        "each event once, in order"
    );
    assert_eq!(ids.len(), 4);
    assert!(strictly_increasing(&ids), "{ids:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_instances_share_histories_and_logs() {
    let b = Backend::default(Kind::Redis).await;
    let a = &b.stores;
    let other = b.other().await;
    a.conversations
        .append("t", vec![msg("1"), msg("2")])
        .await
        .unwrap();
    other
        .conversations
        .append("t", vec![msg("3")])
        .await
        .unwrap();
    assert_eq!(history_ids(a, "t").await, ["1", "2", "3"]);

    a.runs
        .begin("k", "r1", "instance-a", LONG_LEASE)
        .await
        .unwrap();
    let found = other.runs.latest("k").await.unwrap().unwrap();
    assert_eq!(
        (found.run_id.as_str(), found.owner.as_str()),
        ("r1", "instance-a")
    );
    let reading = tokio::spawn(collect(other.runs.read("r1", None)));
    append_all(&*a.runs, "r1", &["x", "y"]).await;
    a.runs
        .end("r1", RunOutcome::Completed, RETENTION)
        .await
        .unwrap();
    let items = reading.await.unwrap();
    assert_eq!(datas(&items), ["x", "y"]);
    assert_eq!(items.last(), Some(&LogItem::End(RunOutcome::Completed)));

    // Different prefixes do not see each other.
    let StoreConfig::Redis(mut cfg) = b.config.clone() else {
        unreachable!()
    };
    cfg.prefix = "elsewhere".into();
    let apart = StoreConfig::Redis(cfg).build().await.unwrap();
    assert!(history_ids(&apart, "t").await.is_empty());
    assert_eq!(apart.runs.latest("k").await.unwrap(), None);
}

/// Runs `op` and checks it fails with `Unavailable`, quickly.
async fn unavailable<T: std::fmt::Debug>(
    what: &str,
    op: impl std::future::Future<Output = Result<T, StoreError>>,
) {
    let started = Instant::now();
    let got = tokio::time::timeout(SOON, op)
        .await
        .unwrap_or_else(|_| panic!("{what} hung with Redis down"));
    assert!(
        matches!(got, Err(StoreError::Unavailable(_))),
        "{what}: {got:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{what} took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_outage_gives_unavailable_and_service_resumes() {
    let mut b = Backend::default(Kind::Redis).await;
    let s = b.stores.clone();
    s.conversations.append("t", vec![msg("1")]).await.unwrap();
    s.runs.begin("k", "r1", "me", LONG_LEASE).await.unwrap();
    s.runs.append("r1", ev("a")).await.unwrap();
    let mut follower = s.runs.read("r1", None);
    assert!(matches!(
        next_item(&mut follower).await,
        LogItem::Event { .. }
    ));

    b.server.as_mut().unwrap().stop();
    // A follower is told, rather than left waiting.
    match tokio::time::timeout(SOON, follower.next()).await {
        Ok(Some(Err(StoreError::Unavailable(_)))) => {}
        other => panic!("follower during the outage: {other:?}"),
    }
    assert_eq!(tokio::time::timeout(SOON, follower.next()).await, Ok(None));

    unavailable("ping", s.ping()).await;
    unavailable("history", s.conversations.history("t")).await;
    unavailable(
        "append history",
        s.conversations.append("t", vec![msg("2")]),
    )
    .await;
    unavailable("begin", s.runs.begin("k", "r2", "me", LONG_LEASE)).await;
    unavailable("append", s.runs.append("r1", ev("b"))).await;
    unavailable("renew", s.runs.renew("r1", "me", LONG_LEASE)).await;
    unavailable("end", s.runs.end("r1", RunOutcome::Completed, RETENTION)).await;
    unavailable("latest", s.runs.latest("k")).await;
    unavailable("request_stop", s.runs.request_stop("r1")).await;
    unavailable("stop_requested", s.runs.stop_requested("r1")).await;
    unavailable("read", async {
        match s.runs.read("r1", None).next().await {
            Some(Err(e)) => Err(e),
            other => Ok(other),
        }
    })
    .await;
    // A store built while Redis is down builds, and is not ready.
    let late = b.config.build().await.expect("builds without Redis");
    unavailable("ping of a store built during the outage", late.ping()).await;

    b.server.as_mut().unwrap().restart();
    for stores in [&s, &late] {
        let deadline = Instant::now() + SOON;
        while let Err(e) = stores.ping().await {
            assert!(Instant::now() < deadline, "no recovery: {e}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // The server kept nothing (no persistence), and works again.
    assert!(history_ids(&s, "t").await.is_empty());
    s.conversations.append("t", vec![msg("3")]).await.unwrap();
    assert_eq!(history_ids(&late, "t").await, ["3"]);
    assert_eq!(
        s.runs.append("r1", ev("b")).await,
        Err(StoreError::UnknownRun("r1".into()))
    );
    s.runs.begin("k", "r3", "me", LONG_LEASE).await.unwrap();
    s.runs.append("r3", ev("c")).await.unwrap();
    s.runs
        .end("r3", RunOutcome::Completed, RETENTION)
        .await
        .unwrap();
    assert_eq!(datas(&collect(late.runs.read("r3", None)).await), ["c"]);
}

#[tokio::test]
async fn a_malformed_redis_url_is_a_config_error() {
    let cfg = StoreConfig::Redis(RedisConfig::new("not a url"));
    assert!(matches!(cfg.build().await, Err(StoreError::Config(_))));
}

#[tokio::test]
async fn the_capture_board_keeps_the_newest_and_forgets_the_rest() {
    use babelgate_store::{CaptureBoard, RedisBoard};
    let server = RedisServer::start();
    let cfg = RedisConfig::new(server.url());
    let a = RedisBoard::open(&cfg, Duration::from_secs(60)).unwrap();
    let b = RedisBoard::open(&cfg, Duration::from_secs(60)).unwrap();
    for i in 0..5i64 {
        let id = format!("r{i}");
        a.put(
            &id,
            1000 + i,
            format!("s{i}").as_bytes(),
            format!("c{i}").as_bytes(),
            3,
        )
        .await
        .unwrap();
    }
    // An update keeps its place and replaces its summary.
    a.put("r4", 1004, b"s4'", b"c4'", 3).await.unwrap();
    let listed = b.list(10).await.unwrap();
    assert_eq!(
        listed,
        vec![Bytes::from("s4'"), Bytes::from("s3"), Bytes::from("s2")]
    );
    assert_eq!(b.list(1).await.unwrap(), vec![Bytes::from("s4'")]);
    assert_eq!(b.get("r4").await.unwrap(), Some(Bytes::from("c4'")));
    assert_eq!(b.get("r1").await.unwrap(), None, "trimmed with the index");
    assert_eq!(b.get("nope").await.unwrap(), None);
}
