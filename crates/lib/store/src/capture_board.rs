//! A shared board of inspector captures, so that every gateway instance on
//! one Redis lists the runs of all of them. Captures are opaque JSON here:
//! the gateway owns their shape.
//!
//! Layout under the prefix: `{inspector}:index` (sorted set of ids by start
//! time), `{inspector}:summary` (hash of id to the list's view) and
//! `{inspector}:capture:<id>` (the capture, expiring after `retention`). The
//! index is trimmed to `keep` on every write, the oldest first. The braces
//! are a Redis hash tag: the script that writes and trims touches all three,
//! which Redis Cluster allows only within one slot.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use redis::Script;

use crate::redis_store::Conn;
use crate::{RedisConfig, StoreError};

#[async_trait]
pub trait CaptureBoard: Send + Sync {
    /// Publishes (or updates) one capture, then trims the board to `keep`.
    async fn put(
        &self,
        id: &str,
        started_ms: i64,
        summary: &[u8],
        capture: &[u8],
        keep: usize,
    ) -> Result<(), StoreError>;

    /// The summaries of the newest `limit` captures, newest first.
    async fn list(&self, limit: usize) -> Result<Vec<Bytes>, StoreError>;

    /// One capture.
    async fn get(&self, id: &str) -> Result<Option<Bytes>, StoreError>;
}

/// KEYS index summary capture; ARGV id started_ms summary capture keep
/// retention_ms. Returns the ids trimmed, whose captures the caller deletes:
/// a key named in Lua is refused on Redis Cluster (and a crash between the
/// two steps leaves captures that expire on their own).
const PUT: &str = r#"
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('SET', KEYS[3], ARGV[4], 'PX', ARGV[6])
local n = redis.call('ZCARD', KEYS[1])
local keep = tonumber(ARGV[5])
local old = {}
if n > keep then
  old = redis.call('ZRANGE', KEYS[1], 0, n - keep - 1)
  for _, id in ipairs(old) do
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', KEYS[2], id)
  end
end
return old
"#;

pub struct RedisBoard {
    conn: Conn,
    prefix: String,
    op_timeout: Duration,
    retention: Duration,
    put: Script,
}

impl RedisBoard {
    /// Does not connect (the first call does).
    pub fn open(cfg: &RedisConfig, retention: Duration) -> Result<Self, StoreError> {
        let (_, conn) = crate::redis_store::lazy_connection(cfg)?;
        Ok(RedisBoard {
            conn,
            prefix: format!("{}:{{inspector}}", cfg.prefix),
            op_timeout: cfg.op_timeout,
            retention,
            put: Script::new(PUT),
        })
    }

    async fn bounded<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T, redis::RedisError>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.op_timeout, fut).await {
            Ok(r) => r.map_err(|e| StoreError::Unavailable(e.to_string())),
            Err(_) => Err(StoreError::Unavailable(format!(
                "redis did not answer within {:?}",
                self.op_timeout
            ))),
        }
    }
}

#[async_trait]
impl CaptureBoard for RedisBoard {
    async fn put(
        &self,
        id: &str,
        started_ms: i64,
        summary: &[u8],
        capture: &[u8],
        keep: usize,
    ) -> Result<(), StoreError> {
        let p = &self.prefix;
        let capture_prefix = format!("{p}:capture:");
        let mut con = self.conn.clone();
        let mut inv = self.put.prepare_invoke();
        inv.key(format!("{p}:index"))
            .key(format!("{p}:summary"))
            .key(format!("{capture_prefix}{id}"))
            .arg(id)
            .arg(started_ms)
            .arg(summary)
            .arg(capture)
            .arg(keep.max(1))
            .arg(self.retention.as_millis().max(1) as u64);
        let trimmed: Vec<String> = self.bounded(inv.invoke_async(&mut con)).await?;
        if !trimmed.is_empty() {
            // All in the board's slot: one command.
            let keys: Vec<String> = trimmed
                .iter()
                .map(|id| format!("{capture_prefix}{id}"))
                .collect();
            let _: i64 = self
                .bounded(redis::cmd("DEL").arg(keys).query_async(&mut con))
                .await?;
        }
        Ok(())
    }

    async fn list(&self, limit: usize) -> Result<Vec<Bytes>, StoreError> {
        let p = &self.prefix;
        let mut con = self.conn.clone();
        let ids: Vec<String> = self
            .bounded(
                redis::cmd("ZREVRANGE")
                    .arg(format!("{p}:index"))
                    .arg(0)
                    .arg(limit.max(1) as i64 - 1)
                    .query_async(&mut con),
            )
            .await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let summaries: Vec<Option<Vec<u8>>> = self
            .bounded(
                redis::cmd("HMGET")
                    .arg(format!("{p}:summary"))
                    .arg(&ids)
                    .query_async(&mut con),
            )
            .await?;
        Ok(summaries.into_iter().flatten().map(Bytes::from).collect())
    }

    async fn get(&self, id: &str) -> Result<Option<Bytes>, StoreError> {
        let mut con = self.conn.clone();
        let v: Option<Vec<u8>> = self
            .bounded(
                redis::cmd("GET")
                    .arg(format!("{}:capture:{id}", self.prefix))
                    .query_async(&mut con),
            )
            .await?;
        Ok(v.map(Bytes::from))
    }
}
