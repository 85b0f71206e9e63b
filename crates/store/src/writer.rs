//! The owner's side of one run: appends, with the lease renewed and stop
//! requests watched in the background.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::flag::Flag;
use crate::{Entry, EventId, RunInfo, RunLog, RunOutcome, StoreError};

/// The pump's handle on a run it proxies.
///
/// [`RunWriter::begin`] begins the run and starts a background task that
/// renews the lease every `lease / 3` and waits for a stop request
/// ([`RunLog::wait_stop`]: no polling). [`RunWriter::end`] ends the run;
/// dropping the writer without ending it stops the renewals, so the run is
/// reported lost once the lease runs out. Renewal failures while the backend
/// is unreachable are retried on the next tick; if the lease runs out in the
/// meantime the run is lost and `append` fails with
/// [`StoreError::NotRunning`].
pub struct RunWriter {
    log: Arc<dyn RunLog>,
    run_id: String,
    /// Set by the keeper once a stop is requested.
    stop: Arc<Flag>,
    keeper: JoinHandle<()>,
}

impl RunWriter {
    /// Begins `run_id` for conversation `key` (see [`RunLog::begin`]);
    /// returns the writer and the run that was running for `key` before, if
    /// any. Must be called within a Tokio runtime.
    pub async fn begin(
        log: Arc<dyn RunLog>,
        key: &str,
        run_id: &str,
        owner: &str,
        lease: Duration,
    ) -> Result<(RunWriter, Option<RunInfo>), StoreError> {
        let previous = log.begin(key, run_id, owner, lease).await?;
        let stop = Arc::new(Flag::default());
        let keeper = tokio::spawn(keep(
            log.clone(),
            run_id.to_string(),
            owner.to_string(),
            lease,
            stop.clone(),
        ));
        let writer = RunWriter {
            log,
            run_id: run_id.to_string(),
            stop,
            keeper,
        };
        Ok((writer, previous))
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Appends one SSE event; returns its id (see [`RunLog::append`]).
    pub async fn append(&self, data: Bytes) -> Result<EventId, StoreError> {
        self.log.append(&self.run_id, data).await
    }

    /// Appends several SSE events (see [`RunLog::append_batch`]).
    pub async fn append_batch(
        &self,
        data: Vec<Bytes>,
        ids: &mut Vec<EventId>,
    ) -> Result<(), StoreError> {
        self.log.append_batch(&self.run_id, data, ids).await
    }

    /// Appends entries, client bytes with their core part (see
    /// [`RunLog::append_entries`]).
    pub async fn append_entries(
        &self,
        entries: Vec<Entry>,
        ids: &mut Vec<EventId>,
    ) -> Result<(), StoreError> {
        self.log.append_entries(&self.run_id, entries, ids).await
    }

    /// Whether a stop was requested (as learnt so far).
    pub fn is_stop_requested(&self) -> bool {
        self.stop.is_set()
    }

    /// Resolves once a stop is requested; pending forever otherwise.
    /// Cancel-safe: use it in `select!` beside the upstream read.
    pub async fn stop_requested(&self) {
        self.stop_signal().await
    }

    /// [`stop_requested`](Self::stop_requested) as a future of its own,
    /// made once for a stream's whole life rather than once per read.
    pub fn stop_signal(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        // A keeper that gave up (run no longer running) never sets it:
        // then this never resolves.
        let stop = self.stop.clone();
        async move { stop.wait().await }
    }

    /// Ends the run (see [`RunLog::end`]) and stops the background task.
    pub async fn end(self, outcome: RunOutcome, retention: Duration) -> Result<(), StoreError> {
        self.keeper.abort();
        self.log.end(&self.run_id, outcome, retention).await
    }
}

impl Drop for RunWriter {
    fn drop(&mut self) {
        self.keeper.abort();
    }
}

async fn keep(
    log: Arc<dyn RunLog>,
    run_id: String,
    owner: String,
    lease: Duration,
    stop: Arc<Flag>,
) {
    let renew_every = (lease / 3).max(Duration::from_millis(10));
    // After a failed renewal (backend unreachable), try again sooner.
    let retry = (renew_every / 4).max(Duration::from_millis(10));
    let mut next_renew = Instant::now() + renew_every;
    let stop_wait = log.wait_stop(&run_id);
    tokio::pin!(stop_wait);
    let mut stopped = false;
    loop {
        tokio::select! {
            () = &mut stop_wait, if !stopped => {
                stopped = true;
                stop.set();
            }
            () = tokio::time::sleep_until(next_renew) => {
                match log.renew(&run_id, &owner, lease).await {
                    Ok(()) => next_renew = Instant::now() + renew_every,
                    Err(StoreError::NotRunning(_) | StoreError::UnknownRun(_)) => return,
                    Err(_) => next_renew = Instant::now() + retry,
                }
            }
        }
    }
}
