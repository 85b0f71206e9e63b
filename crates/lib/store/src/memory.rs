//! The in-memory backend: one process, bounded, with expiry.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::{self, BoxStream, StreamExt};
use tokio::sync::watch;

use crate::entries::{Entries, MAX_CHUNK, SEQ_LIMIT};
use crate::flag::Flag;
use crate::{
    ConversationStore, Entry, EventId, LogItem, MemoryConfig, Message, Part, RunInfo, RunLog,
    RunOutcome, RunStatus, StoreError, MIN_RETENTION,
};

/// Entries a reader takes per lock.
const READ_BATCH: usize = 256;

/// Conversation histories in memory, bounded every way: entries expire
/// after `ttl` idle; past `max_threads`, or past `max_total_bytes` for all
/// threads together, the least recently used thread is evicted; a thread
/// keeps at most `max_messages` and `max_bytes` (as JSON; the oldest
/// messages are dropped).
pub struct MemoryConversationStore {
    ttl: Duration,
    max_threads: usize,
    max_messages: usize,
    max_bytes: usize,
    max_total_bytes: usize,
    inner: Mutex<Threads>,
    /// Messages copied out while the lock was held (tests).
    #[cfg(test)]
    copies_locked: std::sync::atomic::AtomicUsize,
}

#[derive(Default)]
struct Threads {
    map: HashMap<String, Thread>,
    /// Every thread by the stamp of its last use, oldest first: expiry and
    /// eviction take from the front. Looking for them among all threads
    /// was a pass over every thread per append, under the lock.
    order: BTreeMap<u64, String>,
    /// The stamp of the next use.
    next: u64,
    /// Sum of every thread's `bytes`.
    bytes: usize,
    /// Threads looked at to find what expires or goes (tests).
    #[cfg(test)]
    visits: std::cell::Cell<usize>,
}

struct Thread {
    /// Each message with its size as JSON. Shared, so that a read takes
    /// handles under the lock and copies the messages (up to
    /// `max_history_bytes` of them) after it.
    messages: VecDeque<(Arc<Message>, usize)>,
    bytes: usize,
    touched: Instant,
    /// Its key in [`Threads::order`].
    stamp: u64,
}

impl Threads {
    fn visit(&self) {
        #[cfg(test)]
        self.visits.set(self.visits.get() + 1);
    }

    /// Forgets `thread`; what it held is returned, to be freed after the
    /// lock.
    fn remove(&mut self, thread: &str) -> Option<Thread> {
        let t = self.map.remove(thread)?;
        self.bytes -= t.bytes;
        self.order.remove(&t.stamp);
        Some(t)
    }

    /// Marks `thread` used at `now` (made, empty, if new): it goes last.
    /// `now` never goes back (taken under the lock from a monotonic
    /// clock), so the order by use is the order by time too.
    fn touch(&mut self, thread: &str, now: Instant) -> &mut Thread {
        let stamp = self.next;
        self.next += 1;
        // The order's entry keeps its string from use to use (the map's
        // entry API takes an owned key: one short copy per turn).
        let key = match self.map.get(thread) {
            Some(t) => self.order.remove(&t.stamp),
            None => None,
        };
        let key = key.unwrap_or_else(|| thread.to_string());
        let t = self.map.entry(key.clone()).or_insert_with(|| Thread {
            messages: VecDeque::new(),
            bytes: 0,
            touched: now,
            stamp,
        });
        t.stamp = stamp;
        t.touched = now;
        self.order.insert(stamp, key);
        t
    }

    /// Forgets the threads unused for longer than `ttl`: the oldest first,
    /// up to the first one still fresh.
    fn expire(&mut self, now: Instant, ttl: Duration, freed: &mut Vec<Thread>) {
        while let Some((&stamp, oldest)) = self.order.first_key_value() {
            self.visit();
            match self.map.get(oldest) {
                Some(t) if now.duration_since(t.touched) <= ttl => break,
                Some(_) => {
                    let oldest = oldest.clone();
                    freed.extend(self.remove(&oldest));
                }
                // An entry without its thread (never so) goes on its own.
                None => {
                    self.order.remove(&stamp);
                }
            }
        }
    }

    fn least_recent(&self, except: &str) -> Option<String> {
        self.order
            .values()
            .inspect(|_| self.visit())
            .find(|k| k.as_str() != except)
            .cloned()
    }
}

impl MemoryConversationStore {
    /// With the default byte caps of [`MemoryConfig`].
    pub fn new(ttl: Duration, max_threads: usize, max_messages: usize) -> Self {
        MemoryConversationStore::from_config(&MemoryConfig {
            history_ttl: ttl,
            max_threads,
            max_messages,
            ..MemoryConfig::default()
        })
    }

    pub fn from_config(cfg: &MemoryConfig) -> Self {
        MemoryConversationStore {
            ttl: cfg.history_ttl,
            max_threads: cfg.max_threads.max(1),
            max_messages: cfg.max_messages.max(1),
            max_bytes: cfg.max_history_bytes,
            max_total_bytes: cfg.max_total_history_bytes,
            inner: Mutex::new(Threads::default()),
            #[cfg(test)]
            copies_locked: Default::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Threads> {
        lock(&self.inner)
    }

    /// Bytes held by all threads (for tests and metrics).
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// The messages behind a read's handles, copied: never under the lock
    /// (tests count the copies made while it is held).
    fn copy_out(&self, shared: Vec<Arc<Message>>) -> Vec<Message> {
        #[cfg(test)]
        if self.inner.try_lock().is_err() {
            self.copies_locked
                .fetch_add(shared.len(), std::sync::atomic::Ordering::Relaxed);
        }
        shared
            .into_iter()
            .map(|m| Arc::try_unwrap(m).unwrap_or_else(|m| Message::clone(&m)))
            .collect()
    }
}

impl Default for MemoryConversationStore {
    fn default() -> Self {
        MemoryConversationStore::from_config(&MemoryConfig::default())
    }
}

#[async_trait]
impl ConversationStore for MemoryConversationStore {
    async fn history(&self, thread: &str) -> Result<Vec<Message>, StoreError> {
        let mut freed = Vec::new();
        let shared: Vec<Arc<Message>> = {
            let mut threads = self.lock();
            let now = Instant::now();
            match threads.map.get(thread) {
                Some(t) if now.duration_since(t.touched) <= self.ttl => {
                    let t = threads.touch(thread, now);
                    t.messages.iter().map(|(m, _)| Arc::clone(m)).collect()
                }
                Some(_) => {
                    freed.extend(threads.remove(thread));
                    Vec::new()
                }
                None => Vec::new(),
            }
        };
        // Copied (and an expired thread freed) with the lock let go: every
        // turn of every conversation takes it.
        drop(freed);
        Ok(self.copy_out(shared))
    }

    async fn append(&self, thread: &str, messages: Vec<Message>) -> Result<(), StoreError> {
        let sizes: Vec<usize> = crate::encode_messages(&messages)?
            .iter()
            .map(Vec::len)
            .collect();
        let messages: Vec<Arc<Message>> = messages.into_iter().map(Arc::new).collect();
        // What the caps let go, freed after the lock.
        let mut freed = Vec::new();
        let mut dropped = Vec::new();
        {
            let mut threads = self.lock();
            let now = Instant::now();
            threads.expire(now, self.ttl, &mut freed);
            if !threads.map.contains_key(thread) && threads.map.len() >= self.max_threads {
                if let Some(oldest) = threads.least_recent(thread) {
                    freed.extend(threads.remove(&oldest));
                }
            }
            let t = threads.touch(thread, now);
            let before = t.bytes;
            for (m, size) in messages.into_iter().zip(sizes) {
                t.bytes += size;
                t.messages.push_back((m, size));
            }
            while !t.messages.is_empty()
                && (t.messages.len() > self.max_messages || t.bytes > self.max_bytes)
            {
                if let Some((m, size)) = t.messages.pop_front() {
                    t.bytes -= size;
                    dropped.push(m);
                }
            }
            let after = t.bytes;
            threads.bytes = threads.bytes + after - before;
            // All threads together: the least recently used go first.
            while threads.bytes > self.max_total_bytes {
                match threads.least_recent(thread) {
                    Some(victim) => freed.extend(threads.remove(&victim)),
                    None => break,
                }
            }
        }
        drop((freed, dropped));
        Ok(())
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Run logs in memory (see the crate documentation for the semantics, which
/// are the Redis backend's).
#[derive(Clone)]
pub struct MemoryRunLog {
    shared: Arc<Shared>,
}

struct Shared {
    max_runs: usize,
    max_entries: usize,
    max_bytes: usize,
    max_total_bytes: usize,
    max_input_bytes: usize,
    lost_retention: Duration,
    state: Mutex<Runs>,
}

#[derive(Default)]
struct Runs {
    /// Keyed by ids the gateway mints (never a client's string), so the
    /// fast hash: a lookup per append of every stream.
    runs: HashMap<String, Run, foldhash::fast::RandomState>,
    /// Conversation key -> id of the latest run begun for it.
    latest: HashMap<String, String>,
    last_id: EventId,
    /// When `make_room` next sweeps out expired runs.
    next_sweep: Option<Instant>,
    /// Event bytes held by all runs together.
    total_bytes: usize,
    /// Passes of [`Runs::fit_total`] over the runs, for tests.
    #[cfg(test)]
    passes: usize,
}

struct Run {
    key: String,
    owner: String,
    started: Instant,
    entries: Entries,
    bytes: usize,
    /// The run's input for snapshots (JSON array), counted in the total.
    input: Bytes,
    /// The last entry dropped by the caps.
    trimmed: Option<EventId>,
    state: State,
    lease_until: Instant,
    /// When the whole run is forgotten.
    expires: Instant,
    /// Set by a stop request; the owner waits on it (no polling).
    stop: Arc<Flag>,
    /// Bumped on every change readers care about; dropped with the run.
    /// Made for the first reader: most runs never have one, and a channel
    /// is about 400 bytes an open stream would hold for nothing.
    changed: Option<watch::Sender<u64>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Running,
    Ended(RunOutcome),
    Lost,
}

impl Run {
    fn status(&self) -> RunStatus {
        match self.state {
            State::Running => RunStatus::Running,
            State::Ended(o) => RunStatus::Ended(o),
            State::Lost => RunStatus::Lost,
        }
    }

    fn info(&self, run_id: &str) -> RunInfo {
        RunInfo {
            run_id: run_id.to_string(),
            key: self.key.clone(),
            owner: self.owner.clone(),
            status: self.status(),
        }
    }

    /// A running run past its lease becomes lost.
    fn apply_lease(&mut self, now: Instant, lost_retention: Duration) {
        if self.state == State::Running && self.lease_until <= now {
            self.state = State::Lost;
            self.expires = now + lost_retention;
            self.bump();
        }
    }

    /// Wakes the run's readers. With none (most runs: nobody resumes
    /// them) there is nobody to tell: a reader subscribes under the same
    /// lock as this, and reads the entries before it waits.
    fn bump(&self) {
        if let Some(changed) = self.changed.as_ref().filter(|c| c.receiver_count() > 0) {
            changed.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

/// The id after `last` (then `last`), at `now_ms` or just after it.
fn next_id(last: &mut EventId, now_ms: u64) -> EventId {
    // A millisecond holds at most `SEQ_LIMIT` ids (a run log packs `seq`
    // in 24 bits); past that the next millisecond is taken early.
    let id = if now_ms > last.ms {
        EventId::new(now_ms, 0)
    } else if last.seq + 1 < SEQ_LIMIT {
        EventId::new(last.ms, last.seq + 1)
    } else {
        EventId::new(last.ms + 1, 0)
    };
    *last = id;
    id
}

impl Runs {
    /// The run, after applying its expiry and lease: `None` once it expired
    /// (then forgotten); a running run past its lease becomes lost.
    fn get(&mut self, run_id: &str, now: Instant, lost_retention: Duration) -> Option<&mut Run> {
        if self.runs.get(run_id).is_some_and(|r| r.expires <= now) {
            self.remove(run_id);
        }
        let run = self.runs.get_mut(run_id)?;
        run.apply_lease(now, lost_retention);
        Some(run)
    }

    fn remove(&mut self, run_id: &str) {
        if let Some(run) = self.runs.remove(run_id) {
            self.total_bytes -= run.bytes + run.input.len();
            if self.latest.get(&run.key).is_some_and(|id| id == run_id) {
                self.latest.remove(&run.key);
            }
        }
    }

    /// Forgets expired runs and dangling pointers.
    fn sweep(&mut self, now: Instant) {
        self.next_sweep = Some(now + SWEEP_EVERY);
        let expired: Vec<String> = self
            .runs
            .iter()
            .filter(|(_, r)| r.expires <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.remove(&id);
        }
        let runs = &self.runs;
        self.latest.retain(|_, id| runs.contains_key(id));
        // A map keeps the room of its largest size: after a burst of
        // thousands of runs, megabytes a quiet gateway would never give back.
        crate::shrink_when_mostly_empty(&mut self.runs);
        crate::shrink_when_mostly_empty(&mut self.latest);
    }

    /// Brings all runs together under `max_total` bytes, and [`TOTAL_SLACK`]
    /// below it: finished runs first (not `keep`), the soonest to expire
    /// first; then, with `trim_running`, the oldest entries of the largest
    /// logs, the largest first (each keeps its last entry). One pass over
    /// the runs picks each kind of victim.
    fn fit_total(&mut self, max_total: usize, keep: &str, trim_running: bool) {
        if self.total_bytes <= max_total {
            return;
        }
        #[cfg(test)]
        {
            self.passes += 1;
        }
        let target = max_total - max_total / TOTAL_SLACK;
        let mut ended: std::collections::BinaryHeap<_> = self
            .runs
            .iter()
            .filter(|(id, r)| r.state != State::Running && id.as_str() != keep)
            .map(|(id, r)| std::cmp::Reverse((r.expires, r.bytes + r.input.len(), id)))
            .collect();
        let mut over = self.total_bytes - target;
        let mut victims = Vec::new();
        while over > 0 {
            let Some(std::cmp::Reverse((_, size, id))) = ended.pop() else {
                break;
            };
            over = over.saturating_sub(size);
            victims.push(id.clone());
        }
        drop(ended);
        for id in victims {
            self.remove(&id);
        }
        // Cut logs that reach their last entry leave the rest to the others:
        // a pass each time, each with fewer logs.
        while trim_running && self.total_bytes > max_total {
            let over = self.total_bytes - target;
            let mut logs: Vec<&mut Run> = self
                .runs
                .values_mut()
                .filter(|r| r.entries.len() > 1)
                .collect();
            if logs.is_empty() {
                break;
            }
            logs.sort_unstable_by_key(|r| std::cmp::Reverse(r.bytes));
            let sizes: Vec<usize> = logs.iter().map(|r| r.bytes).collect();
            let level = water_level(&sizes, over);
            let mut freed = 0;
            // Entries go whole: cutting every log at the level could free
            // an entry of each where one was asked, so it stops at `over`.
            for run in logs {
                if run.bytes <= level || freed >= over {
                    break;
                }
                while run.bytes > level && run.entries.len() > 1 && freed < over {
                    if let Some((old, dropped)) = run.entries.pop_front() {
                        run.bytes -= dropped;
                        run.trimmed = Some(old);
                        freed += dropped;
                    }
                }
                run.bump();
            }
            self.total_bytes -= freed;
            if freed == 0 {
                break; // what is over the cap is inputs and empty entries
            }
        }
    }

    /// Sweeps (at most once a second:
    /// a read drops an expired run anyway, and a sweep looks at every run),
    /// then evicts until there is room for one more run.
    fn make_room(&mut self, now: Instant, max_runs: usize) {
        if self.next_sweep.is_none_or(|at| at <= now) {
            self.sweep(now);
        }
        if self.runs.len() < max_runs {
            return;
        }
        // One scan picks the victims. Ended runs go first, the soonest to
        // expire first, and a sixteenth of the cap at once, so that a store
        // that stays full does not look at every run on every begin.
        let need = self.runs.len() + 1 - max_runs;
        let mut ended: Vec<(Instant, &String)> = self
            .runs
            .iter()
            .filter(|(_, r)| r.state != State::Running)
            .map(|(id, r)| (r.expires, id))
            .collect();
        let take = need.max(max_runs / 16).min(ended.len());
        if take < ended.len() {
            ended.select_nth_unstable(take);
        }
        let mut victims: Vec<String> = ended
            .iter()
            .take(take)
            .map(|(_, id)| (*id).clone())
            .collect();
        // Then, only as many as still needed, the oldest running ones.
        if take < need {
            let mut running: Vec<(Instant, &String)> = self
                .runs
                .iter()
                .filter(|(_, r)| r.state == State::Running)
                .map(|(id, r)| (r.started, id))
                .collect();
            let more = (need - take).min(running.len());
            if more < running.len() {
                running.select_nth_unstable(more);
            }
            victims.extend(running.iter().take(more).map(|(_, id)| (*id).clone()));
        }
        for id in victims {
            self.remove(&id);
        }
    }
}

/// Over its total cap, the store frees this fraction of the cap beyond what
/// the cap asks: a store that stays full then looks at its runs once per
/// that much appended, not on every append (each look is a pass over every
/// run, under the lock every stream appends through).
const TOTAL_SLACK: usize = 64;

/// The level to which logs of `sizes` bytes (largest first) are cut, the
/// largest first, so that `over` bytes go: the highest level `l` with
/// `sum(size - l)` over the sizes above it at least `over` (0 when even
/// that falls short).
fn water_level(sizes: &[usize], over: usize) -> usize {
    let mut sum = 0;
    for (k, &size) in sizes.iter().enumerate() {
        sum += size;
        let next = sizes.get(k + 1).copied().unwrap_or(0);
        // Cutting the first k+1 down to `next` frees `sum - (k+1)*next`.
        if sum - (k + 1) * next >= over {
            return (sum - over) / (k + 1);
        }
    }
    0
}

/// How often [`Runs::make_room`] sweeps out expired runs.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

impl MemoryRunLog {
    /// Within a Tokio runtime, also starts the sweeper that forgets expired
    /// runs every second while the log is in use (see [`sweeper`]).
    pub fn new(cfg: &MemoryConfig) -> Self {
        let shared = Arc::new(Shared {
            max_runs: cfg.max_runs.max(1),
            max_entries: cfg.max_run_entries.max(1),
            max_bytes: cfg.max_run_bytes.max(1),
            max_total_bytes: cfg.max_total_bytes.max(1),
            max_input_bytes: cfg.max_input_bytes,
            lost_retention: cfg.lost_retention,
            state: Mutex::new(Runs::default()),
        });
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(sweeper(Arc::downgrade(&shared)));
        }
        MemoryRunLog { shared }
    }

    /// Appends `n` entries to a running run with `push` (given the run's
    /// entries and their ids, it returns the bytes it added), then applies
    /// the caps: one lock, one clock read and one wake-up of the readers per
    /// batch, as a chunk from the upstream often holds many events.
    fn append_with(
        &self,
        run_id: &str,
        n: usize,
        ids: &mut Vec<EventId>,
        push: impl FnOnce(&mut Entries, std::iter::Copied<std::slice::Iter<'_, EventId>>) -> usize,
    ) -> Result<(), StoreError> {
        if n == 0 {
            return Ok(()); // as Redis: nothing to check, nobody to wake
        }
        let sh = &self.shared;
        let now = Instant::now();
        let mut guard = sh.lock();
        let runs = &mut *guard;
        // One lookup of the run for the whole batch (what `Runs::get` does,
        // with the ids drawn beside the borrowed run).
        let Some(run) = runs.runs.get_mut(run_id) else {
            return Err(StoreError::UnknownRun(run_id.to_string()));
        };
        if run.expires <= now {
            runs.remove(run_id);
            return Err(StoreError::UnknownRun(run_id.to_string()));
        }
        run.apply_lease(now, sh.lost_retention);
        if run.state != State::Running {
            return Err(StoreError::NotRunning(run_id.to_string()));
        }
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let first = ids.len();
        ids.extend((0..n).map(|_| next_id(&mut runs.last_id, now_ms)));
        let added = push(
            &mut run.entries,
            ids.get(first..).unwrap_or_default().iter().copied(),
        );
        run.bytes += added;
        let before = run.bytes;
        while run.entries.len() > 1
            && (run.entries.len() > sh.max_entries || run.bytes > sh.max_bytes)
        {
            if let Some((old, dropped)) = run.entries.pop_front() {
                run.bytes -= dropped;
                run.trimmed = Some(old);
            }
        }
        let trimmed = before - run.bytes;
        run.bump();
        runs.total_bytes = runs.total_bytes + added - trimmed;
        runs.fit_total(sh.max_total_bytes, run_id, true);
        Ok(())
    }
}

/// Forgets expired runs every second, until the log is dropped. Without
/// it an ended run's log would stay until the next run begins: a gateway
/// that goes quiet after a burst would keep the burst's logs.
async fn sweeper(shared: std::sync::Weak<Shared>) {
    let mut tick = tokio::time::interval(SWEEP_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(sh) = shared.upgrade() else { return };
        sh.lock().sweep(Instant::now());
    }
}

impl Default for MemoryRunLog {
    fn default() -> Self {
        MemoryRunLog::new(&MemoryConfig::default())
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Runs> {
        lock(&self.state)
    }
}

#[async_trait]
impl RunLog for MemoryRunLog {
    async fn begin(
        &self,
        key: &str,
        run_id: &str,
        owner: &str,
        lease: Duration,
    ) -> Result<Option<RunInfo>, StoreError> {
        let sh = &self.shared;
        let now = Instant::now();
        let mut runs = sh.lock();
        let previous = match runs.latest.get(key).cloned() {
            Some(prev) if prev != run_id => runs
                .get(&prev, now, sh.lost_retention)
                .filter(|r| r.state == State::Running)
                .map(|r| r.info(&prev)),
            _ => None,
        };
        runs.remove(run_id);
        runs.make_room(now, sh.max_runs);
        runs.runs.insert(
            run_id.to_string(),
            Run {
                key: key.to_string(),
                owner: owner.to_string(),
                started: now,
                entries: Entries::default(),
                bytes: 0,
                input: Bytes::new(),
                trimmed: None,
                state: State::Running,
                lease_until: now + lease,
                expires: now + lease + sh.lost_retention,
                stop: Arc::default(),
                changed: None,
            },
        );
        runs.latest.insert(key.to_string(), run_id.to_string());
        Ok(previous)
    }

    async fn append_entries(
        &self,
        run_id: &str,
        data: Vec<Entry>,
        ids: &mut Vec<EventId>,
    ) -> Result<(), StoreError> {
        let n = data.len();
        self.append_with(run_id, n, ids, |entries, ids| {
            ids.zip(data).map(|(id, d)| entries.push_entry(id, d)).sum()
        })
    }

    async fn append_chunk(
        &self,
        run_id: &str,
        chunk: Bytes,
        parts: &[Part],
        ids: &mut Vec<EventId>,
    ) -> Result<(), StoreError> {
        if chunk.len() > MAX_CHUNK {
            return self
                .append_entries(run_id, Part::entries_of(parts, &chunk), ids)
                .await;
        }
        self.append_with(run_id, parts.len(), ids, |entries, ids| {
            entries.push_chunk(chunk, parts, ids)
        })
    }

    async fn keep_input(&self, run_id: &str, messages: &[Message]) -> Result<(), StoreError> {
        let sh = &self.shared;
        let input = Bytes::from(crate::encode_input(messages, sh.max_input_bytes)?);
        let now = Instant::now();
        let mut runs = sh.lock();
        let Some(run) = runs.get(run_id, now, sh.lost_retention) else {
            return Err(StoreError::UnknownRun(run_id.to_string()));
        };
        let (old, new) = (run.input.len(), input.len());
        run.input = input;
        runs.total_bytes = runs.total_bytes + new - old;
        // Over the total: finished runs make room, as for appends.
        runs.fit_total(sh.max_total_bytes, run_id, false);
        Ok(())
    }

    async fn input(&self, run_id: &str) -> Result<Vec<Message>, StoreError> {
        let sh = &self.shared;
        let input = {
            let mut runs = sh.lock();
            match runs.get(run_id, Instant::now(), sh.lost_retention) {
                Some(run) if !run.input.is_empty() => run.input.clone(),
                _ => return Ok(Vec::new()),
            }
        };
        crate::decode_input(run_id, &input)
    }

    async fn renew(&self, run_id: &str, owner: &str, lease: Duration) -> Result<(), StoreError> {
        let sh = &self.shared;
        let now = Instant::now();
        let mut runs = sh.lock();
        let Some(run) = runs.get(run_id, now, sh.lost_retention) else {
            return Err(StoreError::UnknownRun(run_id.to_string()));
        };
        if run.state != State::Running || run.owner != owner {
            return Err(StoreError::NotRunning(run_id.to_string()));
        }
        run.lease_until = now + lease;
        run.expires = now + lease + sh.lost_retention;
        Ok(())
    }

    async fn end(
        &self,
        run_id: &str,
        outcome: RunOutcome,
        retention: Duration,
    ) -> Result<(), StoreError> {
        let sh = &self.shared;
        let now = Instant::now();
        let mut runs = sh.lock();
        let Some(run) = runs.get(run_id, now, sh.lost_retention) else {
            return Err(StoreError::UnknownRun(run_id.to_string()));
        };
        if run.state != State::Running {
            return Err(StoreError::NotRunning(run_id.to_string()));
        }
        run.state = State::Ended(outcome);
        run.expires = now + retention.max(MIN_RETENTION);
        run.bump();
        Ok(())
    }

    async fn latest(&self, key: &str) -> Result<Option<RunInfo>, StoreError> {
        let sh = &self.shared;
        let now = Instant::now();
        let mut runs = sh.lock();
        let Some(run_id) = runs.latest.get(key).cloned() else {
            return Ok(None);
        };
        match runs.get(&run_id, now, sh.lost_retention) {
            Some(run) => Ok(Some(run.info(&run_id))),
            None => {
                runs.latest.remove(key);
                Ok(None)
            }
        }
    }

    async fn info(&self, run_id: &str) -> Result<Option<RunInfo>, StoreError> {
        let sh = &self.shared;
        let mut runs = sh.lock();
        Ok(runs
            .get(run_id, Instant::now(), sh.lost_retention)
            .map(|r| r.info(run_id)))
    }

    async fn last_id(&self, run_id: &str) -> Result<Option<EventId>, StoreError> {
        let sh = &self.shared;
        let mut runs = sh.lock();
        Ok(runs
            .get(run_id, Instant::now(), sh.lost_retention)
            .and_then(|r| r.entries.back_id()))
    }

    fn read(
        &self,
        run_id: &str,
        after: Option<EventId>,
    ) -> BoxStream<'static, Result<LogItem, StoreError>> {
        let reader = Reader {
            shared: self.shared.clone(),
            run_id: run_id.to_string(),
            cursor: after,
            started: false,
            changes: None,
            pending: VecDeque::new(),
            done: false,
        };
        stream::unfold(reader, |mut r| async move {
            loop {
                if let Some(item) = r.pending.pop_front() {
                    return Some((item, r));
                }
                if r.done {
                    return None;
                }
                r.fill().await;
            }
        })
        .boxed()
    }

    async fn request_stop(&self, run_id: &str) -> Result<bool, StoreError> {
        let sh = &self.shared;
        let mut runs = sh.lock();
        match runs.get(run_id, Instant::now(), sh.lost_retention) {
            Some(run) if run.state == State::Running => {
                run.stop.set();
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn stop_requested(&self, run_id: &str) -> Result<bool, StoreError> {
        let sh = &self.shared;
        let mut runs = sh.lock();
        Ok(runs
            .get(run_id, Instant::now(), sh.lost_retention)
            .is_some_and(|r| r.stop.is_set()))
    }

    async fn wait_stop(&self, run_id: &str) {
        let stop = {
            let sh = &self.shared;
            let mut runs = sh.lock();
            runs.get(run_id, Instant::now(), sh.lost_retention)
                .map(|r| r.stop.clone())
        };
        match stop {
            Some(stop) => stop.wait().await,
            // The run is forgotten: no stop will come.
            None => std::future::pending::<()>().await,
        }
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

struct Reader {
    shared: Arc<Shared>,
    run_id: String,
    /// The last id yielded (or asked to start after).
    cursor: Option<EventId>,
    started: bool,
    changes: Option<watch::Receiver<u64>>,
    pending: VecDeque<Result<LogItem, StoreError>>,
    done: bool,
}

impl Reader {
    /// Queues what is there to yield, or waits for a change (at most until
    /// the lease runs out) and queues nothing.
    async fn fill(&mut self) {
        let deadline = {
            let sh = &self.shared;
            let mut runs = sh.lock();
            let Some(run) = runs.get(&self.run_id, Instant::now(), sh.lost_retention) else {
                self.pending
                    .push_back(Err(StoreError::UnknownRun(self.run_id.clone())));
                self.done = true;
                return;
            };
            let changes = self.changes.get_or_insert_with(|| {
                run.changed
                    .get_or_insert_with(|| watch::channel(0).0)
                    .subscribe()
            });
            changes.borrow_and_update();
            if !self.started {
                self.started = true;
                let asked_for_dropped = match (run.trimmed, self.cursor) {
                    (Some(t), Some(c)) => t > c,
                    (Some(_), None) => true,
                    (None, _) => false,
                };
                if asked_for_dropped {
                    self.pending.push_back(Ok(LogItem::Truncated));
                }
            }
            let from = match self.cursor {
                Some(c) => run.entries.after(c),
                None => 0,
            };
            for (id, data, core) in run.entries.iter_from(from).take(READ_BATCH) {
                self.pending
                    .push_back(Ok(LogItem::Event { id, data, core }));
                self.cursor = Some(id);
            }
            if !self.pending.is_empty() {
                return;
            }
            match run.state {
                State::Ended(outcome) => {
                    self.pending.push_back(Ok(LogItem::End(outcome)));
                    self.done = true;
                    return;
                }
                State::Lost => {
                    self.pending.push_back(Ok(LogItem::Lost));
                    self.done = true;
                    return;
                }
                State::Running => run.lease_until,
            }
        };
        if let Some(changes) = self.changes.as_mut() {
            // A dropped sender (run forgotten) returns at once; the next fill
            // then reports the run unknown.
            let wait = changes.changed();
            let _ =
                tokio::time::timeout_at((deadline + Duration::from_millis(1)).into(), wait).await;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere while holding the lock leaves plain data behind; keep
    // serving rather than poison every later request.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_grow_and_a_full_millisecond_takes_the_next() {
        let mut last = EventId::new(5, 0);
        assert_eq!(next_id(&mut last, 5), EventId::new(5, 1));
        assert_eq!(next_id(&mut last, 9), EventId::new(9, 0));
        assert_eq!(
            next_id(&mut last, 3),
            EventId::new(9, 1),
            "the clock went back"
        );
        last = EventId::new(9, SEQ_LIMIT - 2);
        assert_eq!(next_id(&mut last, 9), EventId::new(9, SEQ_LIMIT - 1));
        assert_eq!(next_id(&mut last, 9), EventId::new(10, 0));
        assert_eq!(next_id(&mut last, 9), EventId::new(10, 1));
    }
    use babelgate_core::Role;

    fn msg(id: &str) -> Message {
        Message::text_message(id, Role::User, id)
    }

    async fn ids(s: &MemoryConversationStore, thread: &str) -> Vec<String> {
        s.history(thread)
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.id)
            .collect()
    }

    #[tokio::test]
    async fn evicts_least_recently_used_thread_past_the_cap() {
        let s = MemoryConversationStore::new(Duration::from_secs(60), 2, 10);
        s.append("a", vec![msg("1")]).await.unwrap();
        s.append("b", vec![msg("2")]).await.unwrap();
        let _ = s.history("a").await; // a is now fresher than b
        s.append("c", vec![msg("3")]).await.unwrap();
        assert!(ids(&s, "b").await.is_empty());
        assert_eq!(ids(&s, "a").await, ["1"]);
        assert_eq!(ids(&s, "c").await, ["3"]);
    }

    /// Each append looked at every thread (for expiry, and again for the
    /// least recently used once full) under the store's lock: with the
    /// default 10,000 threads, every turn of every conversation paid for
    /// all of them. Now they are kept in the order they were used.
    #[tokio::test]
    async fn an_append_does_not_look_at_every_thread() {
        let s = MemoryConversationStore::new(Duration::from_secs(60), 1_000, 10);
        for i in 0..1_000 {
            s.append(&format!("t{i}"), vec![msg("m")]).await.unwrap();
        }
        s.lock().visits.set(0);
        // Turns of old threads, new threads that evict, and reads.
        for i in 0..1_000 {
            s.append(&format!("t{}", i * 7 % 1_000), vec![msg("m")])
                .await
                .unwrap();
            s.append(&format!("new{i}"), vec![msg("m")]).await.unwrap();
            let _ = s.history(&format!("t{}", i * 3 % 1_000)).await;
        }
        let visits = s.lock().visits.get();
        assert!(
            visits <= 10 * 2_000,
            "{visits} threads looked at for 2,000 appends"
        );
        assert_eq!(s.lock().map.len(), 1_000);
    }

    /// A read copied the whole history (up to `max_history_bytes`) while
    /// holding the lock that every turn of every conversation takes. It
    /// takes handles under the lock now, and copies after.
    #[tokio::test]
    async fn a_history_is_copied_after_the_lock_is_let_go() {
        let s = MemoryConversationStore::new(Duration::from_secs(60), 10, 100);
        let turn: Vec<Message> = (0..50).map(|i| msg(&format!("m{i}"))).collect();
        s.append("a", turn.clone()).await.unwrap();
        assert_eq!(s.history("a").await.unwrap(), turn);
        // Messages trimmed by the cap (shared with no read) are still let go.
        s.append("a", (0..100).map(|i| msg(&format!("n{i}"))).collect())
            .await
            .unwrap();
        assert_eq!(ids(&s, "a").await.first().map(String::as_str), Some("n0"));
        assert_eq!(
            s.copies_locked.load(std::sync::atomic::Ordering::Relaxed),
            0,
            "messages copied under the lock"
        );
    }

    /// An append forgets the threads idle past the ttl, and only those.
    #[tokio::test]
    async fn an_append_forgets_the_threads_that_expired() {
        // Only the sleep is timed (a is at least 600 ms idle); b stays
        // fresh unless appending c took half a second.
        let s = MemoryConversationStore::new(Duration::from_millis(500), 100, 10);
        s.append("a", vec![msg("1")]).await.unwrap();
        std::thread::sleep(Duration::from_millis(600));
        s.append("b", vec![msg("2")]).await.unwrap();
        s.append("c", vec![msg("3")]).await.unwrap();
        let threads = s.lock();
        let mut left: Vec<&str> = threads.map.keys().map(String::as_str).collect();
        left.sort_unstable();
        assert_eq!(left, ["b", "c"]);
        let order: Vec<&str> = threads.order.values().map(String::as_str).collect();
        assert_eq!(order, ["b", "c"], "oldest use first");
        assert_eq!(
            threads.bytes,
            threads.map.values().map(|t| t.bytes).sum::<usize>()
        );
    }

    #[tokio::test]
    async fn all_histories_together_stay_under_the_total_cap() {
        let s = MemoryConversationStore::from_config(&MemoryConfig {
            max_total_history_bytes: 3_000,
            ..MemoryConfig::default()
        });
        let big = |id: &str| Message::text_message(id, Role::User, "x".repeat(900));
        s.append("a", vec![big("1")]).await.unwrap();
        s.append("b", vec![big("2")]).await.unwrap();
        s.append("c", vec![big("3")]).await.unwrap();
        let _ = s.history("a").await; // b is now the least recently used
        s.append("d", vec![big("4")]).await.unwrap();
        assert!(s.bytes() <= 3_000, "{}", s.bytes());
        assert!(ids(&s, "b").await.is_empty(), "least recently used goes");
        assert_eq!(ids(&s, "a").await, ["1"]);
        assert_eq!(ids(&s, "d").await, ["4"]);
        let sum: usize = s.lock().map.values().map(|t| t.bytes).sum();
        assert_eq!(s.bytes(), sum);
    }

    #[tokio::test]
    async fn ids_increase_within_one_millisecond() {
        let mut runs = Runs::default();
        let ids: Vec<_> = (0..1000).map(|_| next_id(&mut runs.last_id, 5)).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        // a clock that steps back never makes an id go back
        let later = next_id(&mut runs.last_id, 4);
        assert!(later > ids[999], "{later} after {}", ids[999]);
    }

    #[tokio::test]
    async fn all_logs_together_stay_under_the_total_cap() {
        let cfg = MemoryConfig {
            max_total_bytes: 1000,
            ..MemoryConfig::default()
        };
        let log = MemoryRunLog::new(&cfg);
        let lease = Duration::from_secs(60);
        let chunk = Bytes::from(vec![b'x'; 100]);
        log.begin("k1", "done", "me", lease).await.unwrap();
        for _ in 0..5 {
            log.append("done", chunk.clone()).await.unwrap();
        }
        log.end("done", RunOutcome::Completed, Duration::from_secs(60))
            .await
            .unwrap();
        log.begin("k2", "big", "me", lease).await.unwrap();
        log.begin("k3", "small", "me", lease).await.unwrap();
        log.append("small", chunk.clone()).await.unwrap();
        for _ in 0..8 {
            log.append("big", chunk.clone()).await.unwrap();
        }
        // 500 + 100 + 800 > 1000: the finished run goes first.
        assert_eq!(log.info("done").await.unwrap(), None);
        for _ in 0..5 {
            log.append("big", chunk.clone()).await.unwrap();
        }
        // Then the largest running log loses its oldest entries.
        let shared = log.shared.lock();
        assert!(shared.total_bytes <= 1000, "{}", shared.total_bytes);
        assert_eq!(shared.runs["small"].entries.len(), 1);
        assert_eq!(shared.runs["big"].entries.len(), 9);
        assert_eq!(
            shared.total_bytes,
            shared.runs.values().map(|r| r.bytes).sum::<usize>()
        );
    }

    #[tokio::test]
    async fn evicts_finished_runs_first_then_the_oldest_running() {
        let cfg = MemoryConfig {
            max_runs: 2,
            ..MemoryConfig::default()
        };
        let log = MemoryRunLog::new(&cfg);
        let lease = Duration::from_secs(60);
        log.begin("k1", "r1", "me", lease).await.unwrap();
        log.begin("k2", "r2", "me", lease).await.unwrap();
        log.end("r1", RunOutcome::Completed, Duration::from_secs(60))
            .await
            .unwrap();
        log.begin("k3", "r3", "me", lease).await.unwrap();
        assert_eq!(log.info("r1").await.unwrap(), None, "ended run evicted");
        assert!(log.info("r2").await.unwrap().is_some());
        log.begin("k4", "r4", "me", lease).await.unwrap();
        assert_eq!(
            log.info("r2").await.unwrap(),
            None,
            "oldest running evicted"
        );
        assert_eq!(log.latest("k2").await.unwrap(), None);
        assert!(log.info("r3").await.unwrap().is_some());
        assert!(log.info("r4").await.unwrap().is_some());
        assert_eq!(
            log.append("r2", Bytes::from_static(b"x")).await,
            Err(StoreError::UnknownRun("r2".into()))
        );
    }

    #[tokio::test]
    async fn an_expired_run_is_forgotten_without_another_begin() {
        let log = MemoryRunLog::default();
        log.begin("k", "r1", "me", Duration::from_secs(60))
            .await
            .unwrap();
        log.append("r1", Bytes::from_static(b"x")).await.unwrap();
        log.end("r1", RunOutcome::Completed, Duration::from_millis(10))
            .await
            .unwrap();
        // Polled (not read: a read drops an expired run itself), well past
        // the sweeper's second.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !log.shared.lock().runs.is_empty() {
            assert!(Instant::now() < deadline, "the expired run is still held");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(log.shared.lock().total_bytes, 0);
    }

    #[tokio::test]
    async fn a_sweep_gives_back_the_room_of_a_burst_of_runs() {
        let log = MemoryRunLog::default();
        let lease = Duration::from_secs(60);
        for i in 0..5_000 {
            let run = format!("r{i}");
            log.begin(&format!("k{i}"), &run, "me", lease)
                .await
                .unwrap();
            log.end(&run, RunOutcome::Completed, Duration::ZERO)
                .await
                .unwrap();
        }
        let before = log.shared.lock().runs.capacity();
        assert!(before >= 5_000);
        // As the sweeper would, once their retention is over.
        log.shared.lock().sweep(Instant::now() + MIN_RETENTION);
        let runs = log.shared.lock();
        assert!(runs.runs.is_empty() && runs.latest.is_empty());
        assert!(
            runs.runs.capacity() < before / 4,
            "{} of {before}",
            runs.runs.capacity()
        );
        assert!(runs.latest.capacity() < 1_000, "{}", runs.latest.capacity());
    }

    #[tokio::test]
    async fn a_full_store_evicts_ended_runs_a_sixteenth_of_the_cap_at_a_time() {
        let cfg = MemoryConfig {
            max_runs: 32,
            ..MemoryConfig::default()
        };
        let log = MemoryRunLog::new(&cfg);
        let lease = Duration::from_secs(60);
        for i in 0..32u64 {
            let (k, r) = (format!("k{i}"), format!("r{i}"));
            log.begin(&k, &r, "me", lease).await.unwrap();
            // Later runs expire later.
            log.end(&r, RunOutcome::Completed, Duration::from_secs(60 + i))
                .await
                .unwrap();
        }
        log.begin("k", "new", "me", lease).await.unwrap();
        let kept = |id: &'static str| {
            let log = log.clone();
            async move { log.info(id).await.unwrap().is_some() }
        };
        assert!(!kept("r0").await && !kept("r1").await, "two evicted");
        assert!(kept("r2").await && kept("r31").await && kept("new").await);
        // The next begins find room without evicting again.
        log.begin("k2", "new2", "me", lease).await.unwrap();
        assert!(kept("r2").await && kept("new").await && kept("new2").await);
    }

    #[test]
    fn the_water_level_cuts_the_largest_first() {
        assert_eq!(water_level(&[50, 30, 10], 10), 40);
        // 50 and 30 both down to 25: 25 + 5
        assert_eq!(water_level(&[50, 30, 10], 30), 25);
        assert_eq!(water_level(&[50, 30, 10], 90), 0);
        assert_eq!(water_level(&[50, 30, 10], 200), 0);
        assert_eq!(water_level(&[], 5), 0);
    }

    #[tokio::test]
    async fn a_store_that_stays_full_looks_at_its_runs_once_per_slack() {
        // 200 running streams keep appending past the total cap: each pass
        // over the runs must free the slack, not just the one append's room.
        let cfg = MemoryConfig {
            max_total_bytes: 64 << 10,
            ..MemoryConfig::default()
        };
        let slack = cfg.max_total_bytes / TOTAL_SLACK;
        let log = MemoryRunLog::new(&cfg);
        let lease = Duration::from_secs(60);
        let runs: Vec<String> = (0..200).map(|i| format!("r{i}")).collect();
        for (i, r) in runs.iter().enumerate() {
            log.begin(&format!("k{i}"), r, "me", lease).await.unwrap();
        }
        let entry = Bytes::from(vec![b'x'; 100]);
        let appends = 20_000;
        for i in 0..appends {
            log.append(&runs[i % runs.len()], entry.clone())
                .await
                .unwrap();
        }
        let state = log.shared.lock();
        let appended = appends * entry.len();
        assert!(state.total_bytes <= cfg.max_total_bytes);
        assert!(
            state.passes <= appended / slack + 1,
            "{} passes for {appended} bytes, {slack} of slack",
            state.passes
        );
        // The logs were cut evenly: none lost its last entry, none kept more
        // than its share and a slack's worth.
        let sizes: Vec<usize> = state.runs.values().map(|r| r.bytes).collect();
        let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
        assert!(
            *min >= entry.len() && max - min <= 2 * entry.len(),
            "{min}..{max}"
        );
    }

    #[tokio::test]
    async fn a_store_over_its_cap_by_what_it_cannot_trim_still_answers() {
        // Over the total by inputs alone, with logs of empty entries: the
        // trimming finds nothing to free, and must stop.
        let cfg = MemoryConfig {
            max_total_bytes: 1000,
            ..MemoryConfig::default()
        };
        let log = MemoryRunLog::new(&cfg);
        let lease = Duration::from_secs(60);
        log.begin("k", "r", "me", lease).await.unwrap();
        log.keep_input(
            "r",
            &[Message::text_message("m", Role::User, "x".repeat(2000))],
        )
        .await
        .unwrap();
        // On a thread of its own: a loop under the lock never yields, so
        // only a wait from outside can tell.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let empty = vec![Entry::data(Bytes::new()), Entry::data(Bytes::new())];
            let _ = tx.send(rt.block_on(log.append_entries("r", empty, &mut Vec::new())));
        });
        let appended = rx.recv_timeout(Duration::from_secs(10));
        assert!(matches!(appended, Ok(Ok(()))), "{appended:?}");
    }

    #[tokio::test]
    async fn a_reader_of_an_evicted_run_is_told() {
        let cfg = MemoryConfig {
            max_runs: 1,
            ..MemoryConfig::default()
        };
        let log = MemoryRunLog::new(&cfg);
        log.begin("k1", "r1", "me", Duration::from_secs(60))
            .await
            .unwrap();
        let mut reader = log.read("r1", None);
        let waiting = tokio::spawn(async move { reader.next().await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        log.begin("k2", "r2", "me", Duration::from_secs(60))
            .await
            .unwrap();
        let got = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, Some(Err(StoreError::UnknownRun("r1".into()))));
    }
}
