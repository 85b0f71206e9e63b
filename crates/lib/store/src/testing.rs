//! For tests of the store and of its callers (feature `testing`): a run log
//! that counts what is asked of it about stops.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::BoxStream;

use crate::{Entry, EventId, LogItem, Message, Part, RunInfo, RunLog, RunOutcome, StoreError};

/// `log`, with its stop checks, its stop waits and the polls of those
/// waits counted.
pub struct Counting {
    pub log: Arc<dyn RunLog>,
    /// Calls of [`RunLog::stop_requested`].
    pub stop_checks: AtomicUsize,
    /// Calls of [`RunLog::wait_stop`].
    pub stop_waits: AtomicUsize,
    /// Polls of the futures [`RunLog::wait_stop`] gave.
    pub stop_polls: AtomicUsize,
}

impl Counting {
    pub fn new(log: Arc<dyn RunLog>) -> Self {
        Counting {
            log,
            stop_checks: AtomicUsize::new(0),
            stop_waits: AtomicUsize::new(0),
            stop_polls: AtomicUsize::new(0),
        }
    }
}

#[async_trait]
impl RunLog for Counting {
    async fn begin(
        &self,
        key: &str,
        run_id: &str,
        owner: &str,
        lease: Duration,
    ) -> Result<Option<RunInfo>, StoreError> {
        self.log.begin(key, run_id, owner, lease).await
    }
    async fn append_entries(
        &self,
        run_id: &str,
        entries: Vec<Entry>,
        ids: &mut Vec<EventId>,
    ) -> Result<(), StoreError> {
        self.log.append_entries(run_id, entries, ids).await
    }
    async fn append_chunk(
        &self,
        run_id: &str,
        chunk: Bytes,
        parts: &[Part],
        ids: &mut Vec<EventId>,
    ) -> Result<(), StoreError> {
        self.log.append_chunk(run_id, chunk, parts, ids).await
    }
    async fn renew(&self, run_id: &str, owner: &str, lease: Duration) -> Result<(), StoreError> {
        self.log.renew(run_id, owner, lease).await
    }
    async fn end(&self, run_id: &str, o: RunOutcome, r: Duration) -> Result<(), StoreError> {
        self.log.end(run_id, o, r).await
    }
    async fn latest(&self, key: &str) -> Result<Option<RunInfo>, StoreError> {
        self.log.latest(key).await
    }
    async fn info(&self, run_id: &str) -> Result<Option<RunInfo>, StoreError> {
        self.log.info(run_id).await
    }
    async fn last_id(&self, run_id: &str) -> Result<Option<EventId>, StoreError> {
        self.log.last_id(run_id).await
    }
    fn read(
        &self,
        run_id: &str,
        after: Option<EventId>,
    ) -> BoxStream<'static, Result<LogItem, StoreError>> {
        self.log.read(run_id, after)
    }
    async fn request_stop(&self, run_id: &str) -> Result<bool, StoreError> {
        self.log.request_stop(run_id).await
    }
    async fn stop_requested(&self, run_id: &str) -> Result<bool, StoreError> {
        self.stop_checks.fetch_add(1, Ordering::Relaxed);
        self.log.stop_requested(run_id).await
    }
    async fn keep_input(&self, run_id: &str, messages: &[Message]) -> Result<(), StoreError> {
        self.log.keep_input(run_id, messages).await
    }
    async fn input(&self, run_id: &str) -> Result<Vec<Message>, StoreError> {
        self.log.input(run_id).await
    }
    async fn wait_stop(&self, run_id: &str) {
        self.stop_waits.fetch_add(1, Ordering::Relaxed);
        let mut wait = self.log.wait_stop(run_id);
        std::future::poll_fn(|cx| {
            self.stop_polls.fetch_add(1, Ordering::Relaxed);
            wait.as_mut().poll(cx)
        })
        .await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.log.ping().await
    }
}
