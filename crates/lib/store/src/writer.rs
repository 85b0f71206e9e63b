//! The owner's side of runs: appends, with every lease this process holds
//! renewed from one task, and stop requests waited on by the writer's own
//! stream.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::flag::Flag;
use crate::{Entry, EventId, Part, RunInfo, RunLog, RunOutcome, StoreError};

/// Renewals of one backend at once (Redis: that many round trips in
/// flight).
const RENEW_AT_ONCE: usize = 32;

/// The leases this process holds on one backend, renewed by one background
/// task (started with the first run): each run's lease every `lease / 3`,
/// sooner after a failed renewal (backend unreachable), until the run ends,
/// its writer is dropped or the backend says the run no longer runs.
///
/// Why one task and not one per run: an open stream with a log held a
/// task, a timer and their futures, about 700 bytes, to wake every few
/// seconds; here it holds an entry of a map. Renewals due about together
/// are made together.
#[derive(Clone)]
pub struct Leases {
    inner: Arc<Inner>,
}

struct Inner {
    log: Arc<dyn RunLog>,
    held: Mutex<Table>,
    /// A run due before the task wakes was added (or the last handle
    /// went): the task looks again.
    added: Arc<Notify>,
    /// The task was started (on the first run, within a runtime).
    started: std::sync::Once,
    /// Times the task looked at the runs (tests).
    wakes: std::sync::atomic::AtomicUsize,
}

#[derive(Default)]
struct Table {
    runs: HashMap<String, Held>,
    /// When the task wakes next; `None` while it is awake or waits for a
    /// run: then every run added tells it. A run added that is due later
    /// does not (a wake-up and a look at every run, per stream begun).
    wake_at: Option<Instant>,
}

struct Held {
    owner: String,
    lease: Duration,
    /// When the lease is next renewed.
    due: Instant,
}

impl Held {
    fn every(&self) -> Duration {
        (self.lease / 3).max(Duration::from_millis(10))
    }
}

impl Leases {
    pub fn new(log: Arc<dyn RunLog>) -> Self {
        Leases {
            inner: Arc::new(Inner {
                log,
                held: Mutex::default(),
                added: Arc::new(Notify::new()),
                started: std::sync::Once::new(),
                wakes: Default::default(),
            }),
        }
    }

    pub fn log(&self) -> &Arc<dyn RunLog> {
        &self.inner.log
    }

    /// Runs whose leases are held (for tests and metrics).
    pub fn held(&self) -> usize {
        self.inner.lock().runs.len()
    }

    fn hold(&self, run_id: &str, owner: &str, lease: Duration) {
        let mut held = Held {
            owner: owner.to_string(),
            lease,
            due: Instant::now(),
        };
        held.due += held.every();
        let due = held.due;
        let tell = {
            let mut table = self.inner.lock();
            table.runs.insert(run_id.to_string(), held);
            let tell = table.wake_at.is_none_or(|at| due < at);
            if tell {
                // Told once: the runs added until it wakes go unsaid.
                table.wake_at = Some(due);
            }
            tell
        };
        let (weak, added) = (Arc::downgrade(&self.inner), self.inner.added.clone());
        self.inner
            .started
            .call_once(|| drop(tokio::spawn(keep(weak, added))));
        if tell {
            self.inner.added.notify_one();
        }
    }

    fn release(&self, run_id: &str) {
        let mut table = self.inner.lock();
        table.runs.remove(run_id);
        // The room of a burst of runs goes back once they are gone.
        crate::shrink_when_mostly_empty(&mut table.runs);
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The task may wait for a run that will never come: it ends now.
        self.added.notify_one();
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The renewing task: wakes when the first lease is due, renews every lease
/// due within a quarter of its period (early rather than one wake each),
/// and ends with the last [`Leases`] handle.
async fn keep(inner: Weak<Inner>, added: Arc<Notify>) {
    loop {
        // Registered before the map is read: a run added meanwhile wakes it.
        let added = added.notified();
        tokio::pin!(added);
        added.as_mut().enable();
        let Some(this) = inner.upgrade() else { return };
        this.wakes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let now = Instant::now();
        let (due, next) = {
            let mut table = this.lock();
            // Awake: a run added from now on tells it again.
            table.wake_at = None;
            let mut due = Vec::new();
            let mut next: Option<Instant> = None;
            for (id, h) in table.runs.iter() {
                if h.due <= now + h.every() / 4 {
                    due.push((id.clone(), h.owner.clone(), h.lease));
                } else {
                    next = Some(next.map_or(h.due, |n| n.min(h.due)));
                }
            }
            (due, next)
        };
        let renewed: Vec<_> = futures_util::stream::iter(due)
            .map(|(id, owner, lease)| {
                let log = this.log.clone();
                async move {
                    let r = log.renew(&id, &owner, lease).await;
                    (id, r)
                }
            })
            .buffer_unordered(RENEW_AT_ONCE)
            .collect()
            .await;
        let mut next = next;
        {
            let now = Instant::now();
            let mut table = this.lock();
            for (id, r) in renewed {
                let Some(h) = table.runs.get_mut(&id) else {
                    continue;
                };
                match r {
                    Ok(()) => h.due = now + h.every(),
                    // The run ended or was lost: nothing to keep.
                    Err(StoreError::NotRunning(_) | StoreError::UnknownRun(_)) => {
                        table.runs.remove(&id);
                        continue;
                    }
                    // The backend is unreachable: again sooner.
                    Err(_) => h.due = now + (h.every() / 4).max(Duration::from_millis(10)),
                }
                next = Some(next.map_or(h.due, |n| n.min(h.due)));
            }
            // A run added while it was awake has told it (a wake-up waits).
            table.wake_at = next;
        }
        drop(this);
        match next {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = added => {}
                }
            }
            None => added.await,
        }
    }
}

/// The pump's handle on a run it proxies.
///
/// [`RunWriter::begin`] begins the run and hands its lease to [`Leases`].
/// [`RunWriter::end`] ends the run; dropping the writer without ending it
/// stops the renewals, so the run is reported lost once the lease runs out.
/// Renewal failures while the backend is unreachable are retried; if the
/// lease runs out in the meantime the run is lost and `append` fails with
/// [`StoreError::NotRunning`].
pub struct RunWriter {
    leases: Leases,
    run_id: String,
    /// Set once [`RunWriter::stop_signal`]'s future saw a stop request.
    stop: Arc<Flag>,
}

impl RunWriter {
    /// Begins `run_id` for conversation `key` (see [`RunLog::begin`]);
    /// returns the writer and the run that was running for `key` before, if
    /// any. Must be called within a Tokio runtime.
    pub async fn begin(
        leases: &Leases,
        key: &str,
        run_id: &str,
        owner: &str,
        lease: Duration,
    ) -> Result<(RunWriter, Option<RunInfo>), StoreError> {
        let previous = leases.log().begin(key, run_id, owner, lease).await?;
        leases.hold(run_id, owner, lease);
        let writer = RunWriter {
            leases: leases.clone(),
            run_id: run_id.to_string(),
            stop: Arc::default(),
        };
        Ok((writer, previous))
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    fn log(&self) -> &Arc<dyn RunLog> {
        self.leases.log()
    }

    /// Appends one SSE event; returns its id (see [`RunLog::append`]).
    pub async fn append(&self, data: Bytes) -> Result<EventId, StoreError> {
        self.log().append(&self.run_id, data).await
    }

    /// Appends several SSE events (see [`RunLog::append_batch`]).
    pub async fn append_batch(
        &self,
        data: Vec<Bytes>,
        ids: &mut Vec<EventId>,
    ) -> Result<(), StoreError> {
        self.log().append_batch(&self.run_id, data, ids).await
    }

    /// Appends entries, client bytes with their core part (see
    /// [`RunLog::append_entries`]).
    pub async fn append_entries(
        &self,
        entries: Vec<Entry>,
        ids: &mut Vec<EventId>,
    ) -> Result<(), StoreError> {
        self.log().append_entries(&self.run_id, entries, ids).await
    }

    /// Appends the entries that `parts` say lie in `chunk` (see
    /// [`RunLog::append_chunk`]).
    pub async fn append_chunk(
        &self,
        chunk: Bytes,
        parts: &[Part],
        ids: &mut Vec<EventId>,
    ) -> Result<(), StoreError> {
        self.log()
            .append_chunk(&self.run_id, chunk, parts, ids)
            .await
    }

    /// Whether a stop was requested, as a [`stop_signal`](Self::stop_signal)
    /// future of this writer learnt it.
    pub fn is_stop_requested(&self) -> bool {
        self.stop.is_set()
    }

    /// Resolves once a stop is requested; pending forever otherwise.
    /// Cancel-safe: use it in `select!` beside the upstream read.
    pub async fn stop_requested(&self) {
        self.stop_signal().await
    }

    /// [`stop_requested`](Self::stop_requested) as a future of its own,
    /// made once for a stream's whole life rather than once per read
    /// ([`RunLog::wait_stop`]: no polling).
    pub fn stop_signal(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let log = self.log().clone();
        let run_id = self.run_id.clone();
        let stop = self.stop.clone();
        async move {
            if !stop.is_set() {
                log.wait_stop(&run_id).await;
                stop.set();
            }
        }
    }

    /// Ends the run (see [`RunLog::end`]) and stops its renewals.
    pub async fn end(self, outcome: RunOutcome, retention: Duration) -> Result<(), StoreError> {
        self.leases.release(&self.run_id);
        self.log().end(&self.run_id, outcome, retention).await
    }
}

impl Drop for RunWriter {
    fn drop(&mut self) {
        self.leases.release(&self.run_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MemoryConfig, MemoryRunLog, RunStatus};

    /// One task keeps many runs' leases: every run is still running after
    /// several leases; an ended and a dropped writer leave the map (the
    /// dropped one's run is lost once its lease runs out); the task ends
    /// with the last handle, and no task is made per run.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_task_renews_every_run_and_ends_with_the_last_handle() {
        const LEASE: Duration = Duration::from_millis(300);
        let log: Arc<dyn RunLog> = Arc::new(MemoryRunLog::new(&MemoryConfig::default()));
        let tasks = || {
            tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks()
        };
        let before = tasks();
        let leases = Leases::new(log.clone());
        let mut writers = Vec::new();
        for i in 0..20 {
            let run = format!("r{i}");
            let (w, _) = RunWriter::begin(&leases, &format!("k{i}"), &run, "me", LEASE)
                .await
                .unwrap();
            writers.push(w);
        }
        assert_eq!(tasks(), before + 1, "one task for all the runs");
        assert_eq!(leases.held(), 20);
        tokio::time::sleep(LEASE * 4).await;
        for i in 0..20 {
            let info = log.info(&format!("r{i}")).await.unwrap().unwrap();
            assert!(info.is_running(), "r{i} kept");
        }
        let dropped = writers.pop().unwrap();
        drop(dropped);
        let ended = writers.pop().unwrap();
        ended.end(RunOutcome::Completed, LEASE).await.unwrap();
        assert_eq!(leases.held(), 18);
        tokio::time::sleep(LEASE * 2).await;
        let status = |id: &str| {
            let log = log.clone();
            let id = id.to_string();
            async move { log.info(&id).await.unwrap().map(|i| i.status) }
        };
        assert_eq!(status("r19").await, Some(RunStatus::Lost));
        assert_eq!(status("r17").await, Some(RunStatus::Running));
        drop(writers);
        drop(leases);
        let deadline = Instant::now() + Duration::from_secs(5);
        while tasks() > before {
            assert!(Instant::now() < deadline, "the renewing task never ended");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The map gives its room back after a burst of runs.
    #[tokio::test]
    async fn the_room_of_a_burst_of_leases_goes_back() {
        let leases = Leases::new(Arc::new(MemoryRunLog::new(&MemoryConfig::default())));
        for i in 0..5_000 {
            leases.hold(&format!("r{i}"), "me", Duration::from_secs(60));
        }
        let burst = leases.inner.lock().runs.capacity();
        for i in 0..5_000 {
            leases.release(&format!("r{i}"));
        }
        let after = leases.inner.lock().runs.capacity();
        assert!(burst >= 5_000 && after <= 128, "{burst} -> {after}");
    }

    /// Streams begun while the task sleeps do not wake it when their
    /// leases are due after its wake-up: it does not look at every run
    /// for every stream begun.
    #[tokio::test(flavor = "current_thread")]
    async fn runs_due_later_do_not_wake_the_task() {
        let leases = Leases::new(Arc::new(MemoryRunLog::new(&MemoryConfig::default())));
        for i in 0..200 {
            leases.hold(&format!("r{i}"), "me", Duration::from_secs(60));
            tokio::task::yield_now().await;
        }
        let wakes = leases
            .inner
            .wakes
            .load(std::sync::atomic::Ordering::Relaxed);
        assert!(wakes <= 2, "{wakes} wake-ups for 200 runs");
        // One due sooner than its wake-up does.
        leases.hold("soon", "me", Duration::from_millis(30));
        tokio::task::yield_now().await;
        let after = leases
            .inner
            .wakes
            .load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(after, wakes + 1);
    }
}
