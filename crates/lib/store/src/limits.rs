//! Per-caller limits: a token bucket of requests and a count of open
//! streams per key. In memory they hold for one instance; in Redis for every
//! instance sharing the server. Open streams are leases that expire unless
//! renewed, so an instance that dies does not hold its callers' slots.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use redis::Script;
use tokio::time::Instant;

use crate::{RedisConfig, StoreConfig, StoreError};

/// Keys the memory limiter tracks before it forgets idle ones.
const MAX_MEMORY_KEYS: usize = 100_000;

#[async_trait]
pub trait Limiter: Send + Sync {
    /// Takes one request from `key`'s bucket, which holds at most `burst`
    /// and refills at `per_s`. `None`: allowed; `Some(wait)`: refused, and a
    /// request will be allowed after `wait`.
    async fn take(&self, key: &str, per_s: f64, burst: u32)
        -> Result<Option<Duration>, StoreError>;

    /// Opens stream `lease` under `key` if fewer than `max` are open there.
    /// The lease lasts `ttl` unless renewed.
    async fn open(
        &self,
        key: &str,
        lease: &str,
        max: u32,
        ttl: Duration,
    ) -> Result<bool, StoreError>;

    /// Extends an open lease by `ttl` from now.
    async fn renew(&self, key: &str, lease: &str, ttl: Duration) -> Result<(), StoreError>;

    /// Ends a lease.
    async fn close(&self, key: &str, lease: &str) -> Result<(), StoreError>;
}

/// The limiter of a store configuration: Redis-backed with Redis. Never
/// connects here (as [`StoreConfig::build`]).
pub fn limiter(config: &StoreConfig) -> Result<Arc<dyn Limiter>, StoreError> {
    Ok(match config {
        StoreConfig::Memory(_) => Arc::new(MemoryLimiter::default()),
        StoreConfig::Redis(cfg) => Arc::new(RedisLimiter::new(cfg)?),
    })
}

// ---- memory ---------------------------------------------------------------

#[derive(Default)]
pub struct MemoryLimiter {
    state: Mutex<MemoryState>,
}

#[derive(Default)]
struct MemoryState {
    buckets: HashMap<String, Bucket>,
    streams: HashMap<String, HashMap<String, Instant>>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
    per_s: f64,
    burst: f64,
}

impl Bucket {
    fn refill(&mut self, now: Instant) {
        let gained = now.saturating_duration_since(self.at).as_secs_f64() * self.per_s;
        self.tokens = (self.tokens + gained).min(self.burst);
        self.at = now;
    }
}

impl MemoryLimiter {
    fn lock(&self) -> std::sync::MutexGuard<'_, MemoryState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl MemoryState {
    /// Keeps memory bounded: full buckets and expired leases carry nothing
    /// worth keeping; past that, the longest idle buckets go.
    fn prune(&mut self, now: Instant) {
        if self.buckets.len() >= MAX_MEMORY_KEYS {
            self.buckets.retain(|_, b| {
                b.refill(now);
                b.tokens < b.burst
            });
            if self.buckets.len() >= MAX_MEMORY_KEYS {
                // The longest idle tenth goes at once, so that a flood of
                // new callers costs one scan per many requests, not each.
                let mut ages: Vec<Instant> = self.buckets.values().map(|b| b.at).collect();
                let cut = ages.len() / 10;
                ages.select_nth_unstable(cut);
                let before = ages.get(cut).copied();
                if let Some(before) = before {
                    self.buckets.retain(|_, b| b.at > before);
                }
            }
        }
        if self.streams.len() >= MAX_MEMORY_KEYS {
            self.streams.retain(|_, leases| {
                leases.retain(|_, until| *until > now);
                !leases.is_empty()
            });
        }
    }
}

#[async_trait]
impl Limiter for MemoryLimiter {
    async fn take(
        &self,
        key: &str,
        per_s: f64,
        burst: u32,
    ) -> Result<Option<Duration>, StoreError> {
        let now = Instant::now();
        let mut s = self.lock();
        if !s.buckets.contains_key(key) {
            s.prune(now);
        }
        let b = s.buckets.entry(key.to_string()).or_insert(Bucket {
            tokens: f64::from(burst),
            at: now,
            per_s,
            burst: f64::from(burst),
        });
        b.per_s = per_s;
        b.burst = f64::from(burst);
        b.refill(now);
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(None)
        } else {
            Ok(Some(Duration::from_secs_f64((1.0 - b.tokens) / per_s)))
        }
    }

    async fn open(
        &self,
        key: &str,
        lease: &str,
        max: u32,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let now = Instant::now();
        let mut s = self.lock();
        if !s.streams.contains_key(key) {
            s.prune(now);
        }
        let leases = s.streams.entry(key.to_string()).or_default();
        leases.retain(|_, until| *until > now);
        if !leases.contains_key(lease) && leases.len() >= max as usize {
            return Ok(false);
        }
        leases.insert(lease.to_string(), now + ttl);
        Ok(true)
    }

    async fn renew(&self, key: &str, lease: &str, ttl: Duration) -> Result<(), StoreError> {
        let now = Instant::now();
        let mut s = self.lock();
        if let Some(leases) = s.streams.get_mut(key) {
            leases.insert(lease.to_string(), now + ttl);
        }
        Ok(())
    }

    async fn close(&self, key: &str, lease: &str) -> Result<(), StoreError> {
        let mut s = self.lock();
        if let Some(leases) = s.streams.get_mut(key) {
            leases.remove(lease);
            if leases.is_empty() {
                s.streams.remove(key);
            }
        }
        Ok(())
    }
}

// ---- Redis ----------------------------------------------------------------

/// Redis's clock, in ms: one clock for every instance.
const NOW: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"#;

/// KEYS bucket; ARGV per_ms burst. Returns 0 (allowed) or the ms to wait.
const TAKE: &str = r#"
local per_ms = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(b[1]) or burst
local at = tonumber(b[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * per_ms)
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = math.max(1, math.ceil((1 - tokens) / per_ms))
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / per_ms) + 1000)
return wait
"#;

/// KEYS leases (a sorted set: lease -> expiry ms); ARGV lease max ttl_ms.
/// Returns 1 when opened.
const OPEN: &str = r#"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1])
   and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"#;

/// KEYS leases; ARGV lease ttl_ms.
const RENEW: &str = r#"
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"#;

pub struct RedisLimiter {
    conn: crate::redis_store::Conn,
    prefix: String,
    op_timeout: Duration,
    take: Script,
    open: Script,
    renew: Script,
}

impl RedisLimiter {
    pub fn new(cfg: &RedisConfig) -> Result<Self, StoreError> {
        let (_, conn) = crate::redis_store::lazy_connection(cfg)?;
        Ok(RedisLimiter {
            conn,
            prefix: cfg.prefix.clone(),
            op_timeout: cfg.op_timeout,
            take: Script::new(&format!("{NOW}{TAKE}")),
            open: Script::new(&format!("{NOW}{OPEN}")),
            renew: Script::new(&format!("{NOW}{RENEW}")),
        })
    }

    async fn run(&self, script: &Script, key: String, args: &[String]) -> Result<u64, StoreError> {
        let mut inv = script.key(key);
        for a in args {
            inv.arg(a);
        }
        let mut conn = self.conn.clone();
        match tokio::time::timeout(self.op_timeout, inv.invoke_async::<u64>(&mut conn)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(StoreError::Unavailable(e.to_string())),
            Err(_) => Err(StoreError::Unavailable(format!(
                "redis did not answer within {:?}",
                self.op_timeout
            ))),
        }
    }

    fn bucket_key(&self, key: &str) -> String {
        format!("{}:limit:rate:{key}", self.prefix)
    }

    fn streams_key(&self, key: &str) -> String {
        format!("{}:limit:streams:{key}", self.prefix)
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[async_trait]
impl Limiter for RedisLimiter {
    async fn take(
        &self,
        key: &str,
        per_s: f64,
        burst: u32,
    ) -> Result<Option<Duration>, StoreError> {
        let wait = self
            .run(
                &self.take,
                self.bucket_key(key),
                &[(per_s / 1000.0).to_string(), burst.to_string()],
            )
            .await?;
        Ok((wait > 0).then(|| Duration::from_millis(wait)))
    }

    async fn open(
        &self,
        key: &str,
        lease: &str,
        max: u32,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let args = [lease.to_string(), max.to_string(), ms(ttl).to_string()];
        Ok(self.run(&self.open, self.streams_key(key), &args).await? == 1)
    }

    async fn renew(&self, key: &str, lease: &str, ttl: Duration) -> Result<(), StoreError> {
        let args = [lease.to_string(), ms(ttl).to_string()];
        self.run(&self.renew, self.streams_key(key), &args).await?;
        Ok(())
    }

    async fn close(&self, key: &str, lease: &str) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        let cmd = redis::cmd("ZREM")
            .arg(self.streams_key(key))
            .arg(lease)
            .to_owned();
        match tokio::time::timeout(self.op_timeout, cmd.query_async::<u64>(&mut conn)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(StoreError::Unavailable(e.to_string())),
            Err(_) => Err(StoreError::Unavailable("redis did not answer".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_bucket_allows_a_burst_then_the_rate() {
        let l = MemoryLimiter::default();
        assert_eq!(l.take("k", 2.0, 3).await.unwrap(), None);
        assert_eq!(l.take("k", 2.0, 3).await.unwrap(), None);
        assert_eq!(l.take("k", 2.0, 3).await.unwrap(), None);
        assert_eq!(
            l.take("k", 2.0, 3).await.unwrap(),
            Some(Duration::from_millis(500))
        );
        assert_eq!(l.take("other", 2.0, 3).await.unwrap(), None, "per key");
        tokio::time::advance(Duration::from_millis(500)).await;
        assert_eq!(l.take("k", 2.0, 3).await.unwrap(), None);
        assert!(l.take("k", 2.0, 3).await.unwrap().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_not_renewed_expires() {
        let l = MemoryLimiter::default();
        let ttl = Duration::from_secs(30);
        assert!(l.open("k", "a", 1, ttl).await.unwrap());
        assert!(!l.open("k", "b", 1, ttl).await.unwrap());
        tokio::time::advance(Duration::from_secs(20)).await;
        l.renew("k", "a", ttl).await.unwrap();
        tokio::time::advance(Duration::from_secs(20)).await;
        assert!(!l.open("k", "b", 1, ttl).await.unwrap(), "renewed");
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(l.open("k", "b", 1, ttl).await.unwrap(), "expired");
        l.close("k", "b").await.unwrap();
        assert!(l.open("k", "c", 1, ttl).await.unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn memory_stays_bounded_with_many_callers() {
        let l = MemoryLimiter::default();
        for i in 0..MAX_MEMORY_KEYS + 10 {
            l.take(&format!("k{i}"), 1.0, 1).await.unwrap();
        }
        assert!(l.lock().buckets.len() <= MAX_MEMORY_KEYS);
    }
}
