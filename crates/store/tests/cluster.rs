//! What only Redis Cluster does, on real clusters started here (three
//! primaries, three replicas): where a run's keys land, a `redis` backend
//! pointed at a cluster node, a primary killed mid-run, a forced failover
//! and the whole cluster down and back. The spec every backend meets is
//! `suite.rs`.

#[allow(dead_code)] // the single-server half of support is for the other suites
mod support;

use std::sync::Arc;
use std::time::Duration;

use babelgate_store::{
    run_id, BoxStream, Bytes, LogItem, RedisConfig, RunOutcome, StoreConfig, StoreError, Stores,
};
use futures_util::StreamExt;
use support::cluster::{cli, shared, RedisCluster};
use tokio::time::Instant;

/// Generous bound on anything that should happen "soon" (2 loaded cores).
const SOON: Duration = Duration::from_secs(10);
const LEASE: Duration = Duration::from_secs(3);

fn config(cluster: &RedisCluster) -> RedisConfig {
    let mut cfg = RedisConfig::cluster(cluster.urls());
    cfg.prefix = format!("t{}", babelgate_store::new_id());
    cfg.op_timeout = Duration::from_secs(2);
    cfg.connect_timeout = Duration::from_millis(500);
    cfg
}

async fn stores(cfg: &RedisConfig) -> Stores {
    StoreConfig::Redis(cfg.clone()).build().await.unwrap()
}

fn slot(cluster: &RedisCluster, key: &str) -> u16 {
    cli(cluster.ports()[0], &["CLUSTER", "KEYSLOT", key])
        .and_then(|s| s.parse().ok())
        .expect("a slot")
}

/// Reads `stream` to its end within `bound`; a hang fails the test.
async fn read_all(
    mut stream: BoxStream<'static, Result<LogItem, StoreError>>,
    bound: Duration,
) -> Vec<Result<LogItem, StoreError>> {
    let mut items = Vec::new();
    let deadline = Instant::now() + bound;
    loop {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(item)) => items.push(item),
            Ok(None) => return items,
            Err(_) => panic!("the reader hung: {items:?}"),
        }
    }
}

fn datas(items: &[Result<LogItem, StoreError>]) -> Vec<String> {
    items
        .iter()
        .filter_map(|i| match i {
            Ok(LogItem::Event { data, .. }) => Some(String::from_utf8_lossy(data).into_owned()),
            _ => None,
        })
        .collect()
}

/// One conversation's keys (log, meta, lease, latest pointer) share one
/// slot, and the conversations of a gateway spread over every primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_keys_share_one_slot_and_runs_spread_over_the_primaries() {
    let c = shared();
    let cfg = config(c);
    let s = stores(&cfg).await;
    let p = &cfg.prefix;
    let mut primaries = std::collections::HashSet::new();
    for i in 0..24 {
        let key = format!("/api/chat:conversation-{i}");
        let run = run_id(&key);
        s.runs.begin(&key, &run, "me", LEASE).await.unwrap();
        s.runs
            .append(&run, Bytes::from("data: x\n\n"))
            .await
            .unwrap();
        let (tag, rest) = run.split_once('.').unwrap();
        let names = [
            format!("{p}:run:{{{tag}}}.{rest}:log"),
            format!("{p}:run:{{{tag}}}.{rest}:meta"),
            format!("{p}:run:{{{tag}}}.{rest}:lease"),
            format!("{p}:latest:{{{tag}}}"),
        ];
        let owner = c.primary_of(&names[0]);
        for name in &names {
            assert_eq!(slot(c, name), slot(c, &names[0]), "{name}");
            // The key is there, on the slot's owner (not only named).
            let exists = cli(owner, &["EXISTS", name]).unwrap();
            assert_eq!(exists, "1", "{name} on {owner}");
        }
        // Operators find a run by its conversation: the pointer's field and
        // the meta hash name it.
        assert_eq!(
            cli(owner, &["HGET", &names[3], &key]).as_deref(),
            Some(run.as_str())
        );
        assert_eq!(
            cli(owner, &["HGET", &names[1], "key"]).as_deref(),
            Some(key.as_str())
        );
        primaries.insert(owner);
        assert_eq!(
            s.runs.latest(&key).await.unwrap().unwrap().run_id,
            run,
            "found by its conversation"
        );
    }
    assert_eq!(primaries.len(), 3, "24 conversations on every primary");
}

/// A run id not minted for its conversation (the ids of runs begun before
/// tags) still works: its keys are the old names, its pointer follows in
/// its own slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untagged_run_id_still_resolves() {
    let c = shared();
    let cfg = config(c);
    let s = stores(&cfg).await;
    s.runs.begin("k", "old-id", "me", LEASE).await.unwrap();
    s.runs.append("old-id", Bytes::from("a")).await.unwrap();
    let name = format!("{}:run:{{old-id}}:log", cfg.prefix);
    assert_eq!(cli(c.primary_of(&name), &["EXISTS", &name]).unwrap(), "1");
    assert_eq!(s.runs.latest("k").await.unwrap().unwrap().run_id, "old-id");
    s.runs
        .end("old-id", RunOutcome::Completed, Duration::from_secs(60))
        .await
        .unwrap();
    let items = read_all(s.runs.read("old-id", None), SOON).await;
    assert_eq!(datas(&items), ["a"]);
}

/// `backend = "redis"` on a cluster node: readiness says it is a cluster
/// node (not a plain outage), and calls that land on another slot name it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_backend_on_a_cluster_node_says_so() {
    let c = shared();
    let mut cfg = RedisConfig::new(c.urls()[0].clone());
    cfg.prefix = format!("t{}", babelgate_store::new_id());
    let s = stores(&cfg).await;
    match s.ping().await {
        Err(StoreError::Config(m)) => assert!(m.contains("redis-cluster"), "{m}"),
        other => panic!("ping on a cluster node: {other:?}"),
    }
    // Some of these conversations' slots are on other nodes: MOVED.
    let mut moved = None;
    for i in 0..16 {
        let key = format!("k{i}");
        if let Err(e) = s.runs.begin(&key, &run_id(&key), "me", LEASE).await {
            moved = Some(e);
            break;
        }
    }
    match moved {
        Some(StoreError::Unavailable(m)) => {
            assert!(m.contains("Redis Cluster node"), "{m}");
            assert!(m.contains("MOVED"), "{m}");
        }
        other => panic!("no call said MOVED: {other:?}"),
    }
}

/// An entry the log lost (a failover promoted a replica that had not got
/// it) makes the run lost at the writer's next append, rather than a hole
/// that a reader resuming before it would skip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_lost_in_a_failover_makes_the_run_lost() {
    let c = shared();
    let cfg = config(c);
    let s = stores(&cfg).await;
    let key = "lost-entry";
    let run = run_id(key);
    s.runs.begin(key, &run, "me", LEASE).await.unwrap();
    s.runs.append(&run, Bytes::from("a")).await.unwrap();
    let last = s.runs.append(&run, Bytes::from("b")).await.unwrap();
    let (tag, rest) = run.split_once('.').unwrap();
    let log = format!("{}:run:{{{tag}}}.{rest}:log", cfg.prefix);
    let owner = c.primary_of(&log);
    assert_eq!(
        cli(owner, &["XDEL", &log, &last.to_string()]).as_deref(),
        Some("1")
    );
    assert_eq!(
        s.runs.append(&run, Bytes::from("c")).await,
        Err(StoreError::NotRunning(run.clone()))
    );
    let items = read_all(s.runs.read(&run, None), SOON).await;
    assert_eq!(datas(&items), ["a"]);
    assert_eq!(items.last(), Some(&Ok(LogItem::Lost)));
}

/// The port of the primary that holds `run`'s log.
fn primary_of_run(c: &RedisCluster, cfg: &RedisConfig, run: &str) -> u16 {
    let (tag, rest) = run.split_once('.').unwrap();
    c.primary_of(&format!("{}:run:{{{tag}}}.{rest}:log", cfg.prefix))
}

async fn wait_role(port: u16, role: &str, bound: Duration) -> Instant {
    let deadline = Instant::now() + bound;
    loop {
        if cli(port, &["ROLE"]).is_some_and(|r| r.starts_with(role)) {
            return Instant::now();
        }
        assert!(Instant::now() < deadline, "{port} never became {role}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Until a new conversation's run begins, takes an event and is read back;
/// how long that took.
async fn until_a_new_run_works(s: &Stores, bound: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let key = format!("fresh-{}", babelgate_store::new_id());
        let run = run_id(&key);
        let ok = async {
            s.runs.begin(&key, &run, "me", LEASE).await?;
            s.runs.append(&run, Bytes::from("x")).await?;
            s.runs
                .end(&run, RunOutcome::Completed, Duration::from_secs(60))
                .await
        }
        .await;
        if ok.is_ok() {
            let items = read_all(s.runs.read(&run, None), SOON).await;
            assert_eq!(datas(&items), ["x"]);
            return start.elapsed();
        }
        assert!(
            start.elapsed() < bound,
            "no new run within {bound:?}: {ok:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn until_ready(s: &Stores, bound: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if s.ping().await.is_ok() {
            return start.elapsed();
        }
        assert!(start.elapsed() < bound, "not ready within {bound:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The primary of a running run's slot is killed while a reader follows
/// it: the writer goes on (the client retries on the promoted replica) or
/// stops at its first failure as the gateway does, and the reader either
/// gets the whole answer or ends with an error or the run lost, within
/// about four leases; never a hang, a duplicate or a hole. New runs work
/// and the store is ready again soon after the promotion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_killed_mid_run_fails_over() {
    let c = RedisCluster::start();
    let cfg = config(&c);
    let s = stores(&cfg).await;
    let key = "killed-primary";
    let run = run_id(key);
    s.runs.begin(key, &run, "me", LEASE).await.unwrap();
    let reader = tokio::spawn(read_all(s.runs.read(&run, None), Duration::from_secs(60)));
    let mut sent = Vec::new();
    let mut acked = Vec::new();
    for i in 0..10 {
        let d = format!("e{i}");
        s.runs.append(&run, Bytes::from(d.clone())).await.unwrap();
        sent.push(d.clone());
        acked.push(d);
    }
    let primary = primary_of_run(&c, &cfg, &run);
    let replica = c.replica_of(primary);
    // Let the replica have what was written (the loss case has its test).
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.kill(primary);
    let killed = Instant::now();
    let mut failed = None;
    for i in 10..40 {
        let d = format!("e{i}");
        sent.push(d.clone());
        let r = async {
            s.runs.renew(&run, "me", LEASE).await?;
            s.runs.append(&run, Bytes::from(d.clone())).await
        }
        .await;
        match r {
            Ok(_) => acked.push(d),
            Err(e) => {
                // As the gateway: no more writes; the lease lapses.
                failed = Some(e);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if failed.is_none() {
        s.runs
            .end(&run, RunOutcome::Completed, Duration::from_secs(60))
            .await
            .unwrap();
    }
    let promoted = wait_role(replica, "master", Duration::from_secs(30)).await;
    eprintln!(
        "promotion {:?} after the kill; writer: {} acked, failure {failed:?}",
        promoted - killed,
        acked.len()
    );
    let items = reader.await.unwrap();
    let got = datas(&items);
    // No hole, no duplicate: what the reader got is a prefix of what was
    // sent, in order.
    assert_eq!(got[..], sent[..got.len()], "{items:?}");
    match items.last() {
        Some(Ok(LogItem::End(RunOutcome::Completed))) => assert_eq!(got, acked),
        Some(Ok(LogItem::Lost)) | Some(Err(StoreError::Unavailable(_))) => {
            assert!(
                failed.is_some(),
                "ended early though every write went: {items:?}"
            )
        }
        other => panic!("the reader ended with {other:?}"),
    }
    let fresh = until_a_new_run_works(&s, Duration::from_secs(30)).await;
    let ready = until_ready(&s, Duration::from_secs(30)).await;
    eprintln!(
        "after the promotion: a new run in {fresh:?}, ready in {:?}",
        ready + fresh
    );
    // Within 10 s of the promotion, with a generous margin for 2 cores.
    assert!(promoted.elapsed() < Duration::from_secs(40));
}

/// `CLUSTER FAILOVER` on the replica (no data lost): a reader following a
/// run is moved to the new primary and gets every event once, in order,
/// then the end; the writer's calls follow the slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_failover_loses_nothing() {
    let c = RedisCluster::start();
    let cfg = config(&c);
    let s = stores(&cfg).await;
    let key = "forced-failover";
    let run = run_id(key);
    s.runs.begin(key, &run, "me", LEASE).await.unwrap();
    let reader = tokio::spawn(read_all(s.runs.read(&run, None), Duration::from_secs(60)));
    let primary = primary_of_run(&c, &cfg, &run);
    let replica = c.replica_of(primary);
    let mut sent = Vec::new();
    for i in 0..30 {
        if i == 10 {
            assert_eq!(
                cli(replica, &["CLUSTER", "FAILOVER"]).as_deref(),
                Some("OK")
            );
        }
        let d = format!("e{i}");
        s.runs.renew(&run, "me", LEASE).await.unwrap();
        s.runs.append(&run, Bytes::from(d.clone())).await.unwrap();
        sent.push(d);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_role(replica, "master", SOON).await;
    s.runs
        .end(&run, RunOutcome::Completed, Duration::from_secs(60))
        .await
        .unwrap();
    let items = reader.await.unwrap();
    assert_eq!(datas(&items), sent);
    assert_eq!(items.last(), Some(&Ok(LogItem::End(RunOutcome::Completed))));
    // A resumed reader after the failover reads it whole too.
    let again = read_all(s.runs.read(&run, None), SOON).await;
    assert_eq!(datas(&again), sent);
}

/// Slots without an owner: not ready. The whole cluster down: calls fail
/// with `Unavailable` within a bound;
/// the nodes restart from their `nodes.conf` with no data, and the same
/// store serves again without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_cluster_down_and_back() {
    let c = RedisCluster::start();
    let cfg = config(&c);
    let s = Arc::new(stores(&cfg).await);
    until_a_new_run_works(&s, SOON).await;
    // A primary and its replica gone: a third of the slots has no owner.
    // Not ready once the others see it (cluster_state:fail), and no ping
    // waits on the dead nodes.
    let primary = c.owner_of_slot(0);
    let replica = c.replica_of(primary);
    c.kill(primary);
    c.kill(replica);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let t = Instant::now();
        let ping = s.ping().await;
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "a ping took {:?}",
            t.elapsed()
        );
        if let Err(e) = ping {
            assert!(e.is_unavailable(), "{e:?}");
            break;
        }
        assert!(Instant::now() < deadline, "still ready with slots unowned");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    c.kill_all();
    let down = Instant::now();
    let key = "while-down";
    let err = s.runs.begin(key, &run_id(key), "me", LEASE).await;
    let took = down.elapsed();
    assert!(matches!(err, Err(StoreError::Unavailable(_))), "{err:?}");
    assert!(s.ping().await.is_err());
    let history = s.conversations.history("t").await;
    assert!(
        matches!(history, Err(StoreError::Unavailable(_))),
        "{history:?}"
    );
    eprintln!("a call with the cluster down failed in {took:?}");
    // Bounded retries: well under the 5 s asked (2 loaded cores).
    assert!(took < Duration::from_secs(10), "{took:?}");
    c.restart_all();
    let back = Instant::now();
    let fresh = until_a_new_run_works(&s, Duration::from_secs(60)).await;
    let ready = until_ready(&s, Duration::from_secs(60)).await;
    eprintln!(
        "after the restart: a new run in {fresh:?}, ready in {:?}",
        back.elapsed()
    );
    let _ = ready;
}
