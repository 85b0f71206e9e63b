//! The per-caller limiter against every backend (memory, Redis on a
//! private `redis-server`, Redis Cluster): two limiters are two gateway
//! instances, which share limits only through Redis.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use babelgate_store::{limiter, Limiter, MemoryConfig, RedisConfig, StoreConfig};
use support::RedisServer;

/// Generous bound on anything that should happen "soon" (2 loaded cores).
const SOON: Duration = Duration::from_secs(10);
const LONG: Duration = Duration::from_secs(60);

#[derive(Clone, Copy)]
enum Kind {
    Memory,
    Redis,
    Cluster,
}

/// Two instances: with Redis, two clients of one server; in memory, one.
struct Pair {
    a: Arc<dyn Limiter>,
    b: Arc<dyn Limiter>,
    _server: Option<RedisServer>,
}

fn pair(kind: Kind) -> Pair {
    match kind {
        Kind::Memory => {
            let a = limiter(&StoreConfig::Memory(MemoryConfig::default())).unwrap();
            Pair {
                b: a.clone(),
                a,
                _server: None,
            }
        }
        Kind::Redis => {
            let server = RedisServer::start();
            let cfg = StoreConfig::Redis(RedisConfig::new(server.url()));
            Pair {
                a: limiter(&cfg).unwrap(),
                b: limiter(&cfg).unwrap(),
                _server: Some(server),
            }
        }
        Kind::Cluster => {
            let mut cfg = RedisConfig::cluster(support::cluster::shared().urls());
            cfg.prefix = format!("t{}", babelgate_store::new_id());
            let cfg = StoreConfig::Redis(cfg);
            Pair {
                a: limiter(&cfg).unwrap(),
                b: limiter(&cfg).unwrap(),
                _server: None,
            }
        }
    }
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
    a_burst_is_allowed_then_refused_with_a_wait,
    instances_share_one_bucket_per_key,
    the_bucket_refills_at_the_rate,
    streams_are_counted_across_instances_and_closed,
    a_lease_not_renewed_is_released,
);

async fn a_burst_is_allowed_then_refused_with_a_wait(kind: Kind) {
    let p = pair(kind);
    for _ in 0..3 {
        assert_eq!(p.a.take("k", 0.01, 3).await.unwrap(), None);
    }
    let wait = p.a.take("k", 0.01, 3).await.unwrap().expect("refused");
    // One request per 100 s: the next one is about that far away.
    assert!(
        wait > Duration::from_secs(50) && wait <= Duration::from_secs(100),
        "{wait:?}"
    );
    assert_eq!(p.a.take("other", 0.01, 3).await.unwrap(), None, "per key");
}

async fn instances_share_one_bucket_per_key(kind: Kind) {
    let p = pair(kind);
    assert_eq!(p.a.take("k", 0.01, 2).await.unwrap(), None);
    assert_eq!(p.b.take("k", 0.01, 2).await.unwrap(), None);
    assert!(p.a.take("k", 0.01, 2).await.unwrap().is_some());
    assert!(p.b.take("k", 0.01, 2).await.unwrap().is_some());
}

async fn the_bucket_refills_at_the_rate(kind: Kind) {
    let p = pair(kind);
    assert_eq!(p.a.take("k", 5.0, 1).await.unwrap(), None);
    let deadline = Instant::now() + SOON;
    // 200 ms per token: allowed again once it has refilled.
    loop {
        match p.a.take("k", 5.0, 1).await.unwrap() {
            None => break,
            Some(wait) => {
                assert!(wait <= Duration::from_millis(200), "{wait:?}");
                assert!(Instant::now() < deadline, "never refilled");
                tokio::time::sleep(wait).await;
            }
        }
    }
}

async fn streams_are_counted_across_instances_and_closed(kind: Kind) {
    let p = pair(kind);
    assert!(p.a.open("k", "s1", 2, LONG).await.unwrap());
    assert!(p.b.open("k", "s2", 2, LONG).await.unwrap());
    assert!(!p.a.open("k", "s3", 2, LONG).await.unwrap());
    assert!(!p.b.open("k", "s3", 2, LONG).await.unwrap());
    assert!(p.a.open("other", "s3", 2, LONG).await.unwrap(), "per key");
    p.b.close("k", "s1").await.unwrap();
    assert!(p.a.open("k", "s3", 2, LONG).await.unwrap());
    p.a.renew("k", "s3", LONG).await.unwrap();
    assert!(!p.b.open("k", "s4", 2, LONG).await.unwrap());
}

async fn a_lease_not_renewed_is_released(kind: Kind) {
    let p = pair(kind);
    // The instance holding s1 dies: nobody renews or closes it.
    assert!(p
        .a
        .open("k", "s1", 1, Duration::from_millis(300))
        .await
        .unwrap());
    assert!(!p.b.open("k", "s2", 1, LONG).await.unwrap());
    let deadline = Instant::now() + SOON;
    while !p.b.open("k", "s2", 1, LONG).await.unwrap() {
        assert!(
            Instant::now() < deadline,
            "the dead lease is never released"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
