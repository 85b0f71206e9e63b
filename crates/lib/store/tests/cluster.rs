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
            format!("{p}:run2:{{{tag}}}.{rest}:log"),
            format!("{p}:run2:{{{tag}}}.{rest}:meta"),
            format!("{p}:run2:{{{tag}}}.{rest}:lease"),
            format!("{p}:latest2:{{{tag}}}"),
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
    let name = format!("{}:run2:{{old-id}}:log", cfg.prefix);
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
    let log = format!("{}:run2:{{{tag}}}.{rest}:log", cfg.prefix);
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

/// A write retried after its answer was lost (a failover, a timeout) is
/// recognised: an append whose batch is already in the log after the
/// writer's last entry answers that batch's ids and adds nothing; one that
/// finds other entries there (or an end that does) makes the run lost
/// rather than mix them into what readers get. Another store appending
/// stands for the try whose answer was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_write_is_recognised() {
    let c = shared();
    let cfg = config(c);
    let s = stores(&cfg).await;
    let earlier_try = stores(&cfg).await;
    let batch = || vec![Bytes::from("x"), Bytes::from("y")];
    let key = "retried-append";
    let run = run_id(key);
    s.runs.begin(key, &run, "me", LEASE).await.unwrap();
    s.runs.append(&run, Bytes::from("a")).await.unwrap();
    let mut landed = Vec::new();
    earlier_try
        .runs
        .append_batch(&run, batch(), &mut landed)
        .await
        .unwrap();
    let mut retried = Vec::new();
    s.runs
        .append_batch(&run, batch(), &mut retried)
        .await
        .unwrap();
    assert_eq!(retried, landed);
    s.runs.append(&run, Bytes::from("b")).await.unwrap();
    s.runs
        .end(&run, RunOutcome::Completed, Duration::from_secs(60))
        .await
        .unwrap();
    let items = read_all(s.runs.read(&run, None), SOON).await;
    assert_eq!(datas(&items), ["a", "x", "y", "b"]);
    assert_eq!(items.last(), Some(&Ok(LogItem::End(RunOutcome::Completed))));

    // Something else after the writer's last entry: lost, for an append
    // and for an end.
    for end in [false, true] {
        let key = format!("foreign-entry-{end}");
        let run = run_id(&key);
        s.runs.begin(&key, &run, "me", LEASE).await.unwrap();
        s.runs.append(&run, Bytes::from("a")).await.unwrap();
        earlier_try
            .runs
            .append(&run, Bytes::from("q"))
            .await
            .unwrap();
        let r = if end {
            s.runs
                .end(&run, RunOutcome::Completed, Duration::from_secs(60))
                .await
        } else {
            s.runs.append(&run, Bytes::from("z")).await.map(|_| ())
        };
        assert_eq!(r, Err(StoreError::NotRunning(run.clone())));
        let items = read_all(s.runs.read(&run, None), SOON).await;
        assert_eq!(datas(&items), ["a", "q"]);
        assert_eq!(items.last(), Some(&Ok(LogItem::Lost)));
    }
}

/// The port of the primary that holds `run`'s log.
fn primary_of_run(c: &RedisCluster, cfg: &RedisConfig, run: &str) -> u16 {
    let (tag, rest) = run.split_once('.').unwrap();
    c.primary_of(&format!("{}:run2:{{{tag}}}.{rest}:log", cfg.prefix))
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
    until_a_new_run_of_works(s, None, bound).await
}

/// As [`until_a_new_run_works`], with runs of conversation `key` when given
/// (one slot), else of new conversations.
async fn until_a_new_run_of_works(s: &Stores, key: Option<&str>, bound: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let key = key.map_or_else(
            || format!("fresh-{}", babelgate_store::new_id()),
            str::to_string,
        );
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

/// A store that rides a failover of the test cluster: `op_timeout` above
/// its failover time (promotion 2.4 s after a kill with
/// `cluster-node-timeout` 1 s, more on loaded cores), so a write retried
/// within it reaches the promoted replica; the lease above it too, so the
/// run is not lost meanwhile.
const RIDE_OP_TIMEOUT: Duration = Duration::from_secs(8);
const RIDE_LEASE: Duration = Duration::from_secs(9);

fn riding_config(c: &RedisCluster) -> RedisConfig {
    let mut cfg = config(c);
    cfg.op_timeout = RIDE_OP_TIMEOUT;
    cfg
}

/// The primary of a running run's slot is killed while a reader follows
/// it. The writer's calls are retried until the promoted replica serves
/// the slot (within the op timeout): every append and the end succeed,
/// the lease renewals fail only meanwhile, and the reader gets the whole
/// answer, every event once and in order, then the end. New runs work
/// within 10 s of the promotion and the store is ready within 15 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_killed_mid_run_fails_over_and_the_run_goes_on() {
    let c = RedisCluster::start();
    let cfg = riding_config(&c);
    let s = Arc::new(stores(&cfg).await);
    let key = "killed-primary";
    let run = run_id(key);
    s.runs.begin(key, &run, "me", RIDE_LEASE).await.unwrap();
    let reader = tokio::spawn(read_all(s.runs.read(&run, None), Duration::from_secs(60)));
    let mut sent = Vec::new();
    for i in 0..10 {
        let d = format!("e{i}");
        s.runs.append(&run, Bytes::from(d.clone())).await.unwrap();
        sent.push(d);
    }
    let primary = primary_of_run(&c, &cfg, &run);
    let replica = c.replica_of(primary);
    // New conversations on the killed primary's slots, and readiness,
    // probed from the kill on.
    let other = (0..)
        .map(|i| format!("probe-{i}"))
        .find(|k| primary_of_run(&c, &cfg, &run_id(k)) == primary)
        .unwrap();
    // Let the replica have what was written (the loss case has its test).
    assert!(cli(primary, &["WAIT", "1", "2000"]).is_some_and(|n| n == "1"));
    c.kill(primary);
    let killed = Instant::now();
    let promotion = tokio::spawn(wait_role(replica, "master", Duration::from_secs(30)));
    let probes = {
        let s = s.clone();
        tokio::spawn(async move {
            let bound = Duration::from_secs(60);
            until_a_new_run_of_works(&s, Some(&other), bound).await;
            let fresh = Instant::now();
            until_ready(&s, bound).await;
            (fresh, Instant::now())
        })
    };
    let mut longest = Duration::ZERO;
    let mut renew_failures = 0;
    for i in 10..40 {
        let d = format!("e{i}");
        // As the gateway's lease task: a failed renewal is tried again.
        if s.runs.renew(&run, "me", RIDE_LEASE).await.is_err() {
            renew_failures += 1;
        }
        let t = Instant::now();
        let appended = s.runs.append(&run, Bytes::from(d.clone())).await;
        longest = longest.max(t.elapsed());
        appended
            .unwrap_or_else(|e| panic!("append {i}, {:?} after the kill: {e:?}", killed.elapsed()));
        sent.push(d);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.runs
        .end(&run, RunOutcome::Completed, Duration::from_secs(60))
        .await
        .unwrap();
    let promoted = promotion.await.unwrap();
    eprintln!(
        "promotion {:?} after the kill; the longest append took {longest:?}, \
         {renew_failures} renewals failed",
        promoted - killed,
    );
    let items = reader.await.unwrap();
    assert_eq!(datas(&items), sent, "{items:?}");
    assert_eq!(items.last(), Some(&Ok(LogItem::End(RunOutcome::Completed))));
    // A client resuming after the failover reads it whole as well.
    let again = read_all(s.runs.read(&run, None), SOON).await;
    assert_eq!(datas(&again), sent);
    let (fresh, ready) = probes.await.unwrap();
    let after = |t: Instant| t.saturating_duration_since(promoted);
    eprintln!(
        "after the promotion: a new run on its slots in {:?}, ready in {:?}",
        after(fresh),
        after(ready)
    );
    assert!(after(fresh) < Duration::from_secs(10), "{:?}", after(fresh));
    assert!(after(ready) < Duration::from_secs(15), "{:?}", after(ready));
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

    // The promoted replica lacks entries a reader already read from the old
    // primary (asynchronous replication; made here by deleting them before
    // the failover), and the writer, whose answer for them was lost, writes
    // that batch again (a store that does not know them: unchecked). The
    // reader must not take the batch a second time, nor carry on from
    // entries the log no longer holds: it ends with the run lost, having
    // had nothing after them.
    let key = "read-then-lost";
    let run = run_id(key);
    s.runs.begin(key, &run, "me", LEASE).await.unwrap();
    let mut reader = following(s.runs.read(&run, None));
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            s.runs
                .append(&run, Bytes::from(format!("e{i}")))
                .await
                .unwrap(),
        );
    }
    let mut got = Vec::new();
    while got.len() < 5 {
        let item = tokio::time::timeout(SOON, reader.recv())
            .await
            .unwrap()
            .unwrap();
        got.extend(datas(&[item]));
    }
    let primary = primary_of_run(&c, &cfg, &run);
    let replica = c.replica_of(primary);
    let (tag, rest) = run.split_once('.').unwrap();
    let log = format!("{}:run2:{{{tag}}}.{rest}:log", cfg.prefix);
    let (e3, e4) = (ids[3].to_string(), ids[4].to_string());
    assert_eq!(
        cli(primary, &["XDEL", &log, &e3, &e4]).as_deref(),
        Some("2")
    );
    assert_eq!(cli(primary, &["WAIT", "1", "2000"]).as_deref(), Some("1"));
    assert_eq!(
        cli(replica, &["CLUSTER", "FAILOVER"]).as_deref(),
        Some("OK")
    );
    wait_role(replica, "master", SOON).await;
    let other_writer = stores(&cfg).await;
    other_writer.runs.renew(&run, "me", LEASE).await.unwrap();
    other_writer
        .runs
        .append_batch(
            &run,
            vec![Bytes::from("e3"), Bytes::from("e4")],
            &mut Vec::new(),
        )
        .await
        .unwrap();
    let mut rest_items = Vec::new();
    loop {
        match tokio::time::timeout(SOON, reader.recv()).await {
            Ok(Some(item)) => rest_items.push(item),
            Ok(None) => break,
            Err(_) => panic!("the reader hung: {rest_items:?}"),
        }
    }
    assert_eq!(datas(&rest_items), Vec::<String>::new(), "{rest_items:?}");
    assert_eq!(rest_items.last(), Some(&Ok(LogItem::Lost)));
}

/// The items of `stream` as they come, on a channel.
fn following(
    mut stream: BoxStream<'static, Result<LogItem, StoreError>>,
) -> tokio::sync::mpsc::UnboundedReceiver<Result<LogItem, StoreError>> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(item) = stream.next().await {
            if tx.send(item).is_err() {
                return;
            }
        }
    });
    rx
}

/// The node id of the node on `port`.
fn node_id(port: u16) -> String {
    cli(port, &["CLUSTER", "MYID"]).expect("a node id")
}

/// A slot holding a running run's keys moves to another primary while the
/// run is written and followed (`CLUSTER SETSLOT ... MIGRATING/IMPORTING`,
/// `MIGRATE`, `SETSLOT ... NODE`, as `redis-cli --cluster reshard` does).
/// While the slot is half moved, the writer's scripts and the reader are
/// sent on by `ASK`: the reader gets what was written on the new node
/// before the move is final. The run completes, the reader gets every
/// event once, in order, and a resumed reader afterwards reads it whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_moved_under_a_running_run_loses_nothing() {
    let c = shared();
    let cfg = config(c);
    let s = stores(&cfg).await;
    // A short lease: the reader's blocking reads (a third of it) end soon
    // after the log left the node they wait on.
    let lease = Duration::from_millis(900);
    let key = "resharded";
    let run = run_id(key);
    let (tag, rest) = run.split_once('.').unwrap();
    let log = format!("{}:run2:{{{tag}}}.{rest}:log", cfg.prefix);
    let slot = slot(c, &log).to_string();
    let src = c.primary_of(&log);
    let dst = *c
        .ports()
        .iter()
        .find(|&&p| p != src && cli(p, &["ROLE"]).is_some_and(|r| r.starts_with("master")))
        .unwrap();
    let (src_id, dst_id) = (node_id(src), node_id(dst));
    s.runs.begin(key, &run, "me", lease).await.unwrap();
    let mut reader = following(s.runs.read(&run, None));
    let mut sent = Vec::new();
    let mut got = Vec::new();
    let write = |i: usize| {
        let (s, run) = (&s, &run);
        async move {
            let d = format!("e{i}");
            s.runs.renew(run, "me", lease).await.unwrap();
            s.runs.append(run, Bytes::from(d.clone())).await.unwrap();
            d
        }
    };
    for i in 0..10 {
        sent.push(write(i).await);
    }
    let ok = |port: u16, args: &[&str]| {
        assert_eq!(cli(port, args).as_deref(), Some("OK"), "{args:?} on {port}");
    };
    ok(dst, &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &src_id]);
    ok(src, &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &dst_id]);
    for i in 10..15 {
        sent.push(write(i).await);
    }
    let keys = cli(src, &["CLUSTER", "GETKEYSINSLOT", &slot, "100"]).unwrap();
    let keys: Vec<&str> = keys.lines().collect();
    assert!(keys.contains(&log.as_str()), "{keys:?}");
    let port = dst.to_string();
    let mut migrate = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
    migrate.extend(&keys);
    ok(src, &migrate);
    // Half moved: the keys are on the new node, which serves them only
    // after ASKING.
    for i in 15..25 {
        sent.push(write(i).await);
    }
    let deadline = Instant::now() + SOON;
    while got.len() < sent.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, reader.recv()).await {
            Ok(Some(item)) => got.extend(datas(&[item])),
            other => panic!("the reader did not follow the ASK: {other:?} after {got:?}"),
        }
    }
    assert_eq!(got, sent, "before the move is final");
    for p in c.ports() {
        if cli(*p, &["ROLE"]).is_some_and(|r| r.starts_with("master")) {
            ok(*p, &["CLUSTER", "SETSLOT", &slot, "NODE", &dst_id]);
        }
    }
    for i in 25..35 {
        sent.push(write(i).await);
    }
    s.runs
        .end(&run, RunOutcome::Completed, Duration::from_secs(60))
        .await
        .unwrap();
    let mut tail = Vec::new();
    loop {
        match tokio::time::timeout(SOON, reader.recv()).await {
            Ok(Some(item)) => tail.push(item),
            Ok(None) => break,
            Err(_) => panic!("the reader hung: {tail:?}"),
        }
    }
    got.extend(datas(&tail));
    assert_eq!(got, sent);
    assert_eq!(tail.last(), Some(&Ok(LogItem::End(RunOutcome::Completed))));
    assert_eq!(c.primary_of(&log), dst, "the slot moved");
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
