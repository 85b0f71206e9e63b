//! Storage layer of babelgate: conversation histories and resumable run logs,
//! behind two `dyn`-compatible async traits with two backends, memory (one
//! process) and Redis (shared by every gateway instance).
//!
//! # What is stored
//!
//! - [`ConversationStore`]: the message history of a thread, for dialects
//!   whose clients send only what is new (AG-Kit). Expires after a TTL of
//!   inactivity (reads and appends both refresh it) and keeps at most
//!   `max_messages` and `max_history_bytes` per thread, dropping the oldest
//!   (the memory backend also keeps all threads under
//!   `max_total_history_bytes`, forgetting the least recently used).
//! - [`RunLog`]: for every run the gateway proxies, the client-facing SSE
//!   events it sent (opaque bytes, one entry per SSE event, already encoded in
//!   the client's dialect), each with an [`EventId`] to send as the SSE `id:`.
//!   A second index maps a conversation key ([`run_key`]: route path + chat or
//!   thread id) to the latest run begun for it, so a reconnecting client can
//!   find it. [`RunLog::read`] replays a log from any point and then follows it
//!   live until the run ends ([`LogItem::End`]) or is lost ([`LogItem::Lost`]).
//!   Beside its bytes an entry may hold a second opaque part, `core` (the
//!   gateway puts there the neutral events the bytes were encoded from, so
//!   a follower never decodes its own output); an entry with empty bytes and
//!   a `core` part is never sent to a client (events that encoded to
//!   nothing). Both parts count towards the byte caps.
//!
//! # Life of a run
//!
//! 1. [`RunLog::begin`] records the run as running for its key, owned by an
//!    instance (`owner`, e.g. [`new_id`] minted once at start-up) under a lease.
//!    A run already running for the key is not stopped: it stays readable by its
//!    own id, the key now points to the new run, and `begin` returns the old
//!    one's [`RunInfo`] so the caller can [`request_stop`](RunLog::request_stop)
//!    it if it wants one run per conversation.
//! 2. [`RunLog::append`] for every SSE event, in order, awaited one by one;
//!    it returns the id to write on the event. [`RunLog::append_batch`] does
//!    the same for several events at once (memory: one lock; Redis: one
//!    pipelined round trip).
//! 3. [`RunLog::renew`] at least every lease / 3 (the lease keep-alive), and
//!    [`RunLog::wait_stop`] to learn of `POST .../stop` requests made on any
//!    instance (no polling). [`RunWriter`] does both: the renewals of every
//!    run an instance writes from one task ([`Leases`]), the wait in a
//!    future its stream polls ([`RunWriter::stop_signal`]).
//! 4. [`RunLog::end`] with the outcome and the route's retention: readers get
//!    [`LogItem::End`], the log and the key's pointer stay readable for the
//!    retention (at least [`MIN_RETENTION`]) and then expire.
//!
//! # Leases and lost runs
//!
//! The owner proves it is alive by renewing the lease. When the lease runs out
//! without [`RunLog::end`] (the instance died, or its task was dropped without
//! ending the run), the run is *lost*: the first reader or lookup that notices
//! records it as lost for good (a later `renew`, `append` or `end` fails with
//! [`StoreError::NotRunning`]), every reader gets [`LogItem::Lost`] within about
//! the lease time plus a third of it (never waiting forever), and the log stays
//! readable for `lost_retention`. While a run is running, its data lives until
//! `lease + lost_retention` after the last renewal, so nothing leaks when no one
//! is left to end it. Both backends implement the same semantics; the memory one
//! just cannot outlive its process.
//!
//! # Event ids
//!
//! An [`EventId`] is `<ms>-<seq>` (a Redis stream id; the memory backend mints
//! ids of the same form from its clock, strictly increasing), so ids of a later
//! run of the same conversation are greater than those of an earlier one: a
//! `Last-Event-ID` left over from a previous run replays the current run whole.
//! Parse a `Last-Event-ID` header with [`EventId::from_str`](std::str::FromStr).
//!
//! # Caps
//!
//! A run log keeps at most `max_run_entries` entries and `max_run_bytes` bytes
//! of event data; past that the oldest entries are dropped, and a reader that
//! asked for dropped entries gets [`LogItem::Truncated`] before the rest (the
//! gateway should then answer with an error rather than a gap in the stream).
//! The memory backend also keeps at most `max_runs` runs (ended and lost ones
//! are evicted first, then the oldest running one), `max_total_bytes` of all
//! logs and kept inputs together (past it, finished runs go first, then the
//! oldest entries of the largest running logs, down to a sixty-fourth of the
//! cap below it, so that a store that stays full does not look at every run
//! on every append), and `max_threads` conversations and
//! `max_total_history_bytes` of them (least recently used evicted). A run's
//! input ([`RunLog::keep_input`]) is kept with the run, at most
//! `max_input_bytes`; a history at most `max_history_bytes`. Redis has no
//! totals (that is its `maxmemory`), but every key is capped and expires.
//!
//! # Data layout in Redis
//!
//! Every key starts with the configured prefix `<p>` (`babelgate` by
//! default); `<id>`, `<thread>` and `<key>` stand for a run id, a thread id
//! and a conversation key. The braces are literal: Redis hash tags, keeping
//! one run's keys together. On Redis Cluster ([`RedisConfig::cluster`]) a
//! run's keys are `<p>:run2:{<tag>}.<rest>:...` for an id `<tag>.<rest>` from
//! [`run_id`] (its conversation's tag) and the latest pointer is the hash
//! `<p>:latest2:{<tag>}` (conversation key -> run id), so every script
//! touches one slot, named in `KEYS`; the rest is as below
//! (`docs/redis-cluster.md`).
//!
//! | key | type | content | expiry |
//! | --- | --- | --- | --- |
//! | `<p>:conv:{<thread>}` | list | one JSON [`Message`] per element, oldest first, trimmed to `max_messages` and `max_history_bytes` | `history_ttl`, refreshed by reads and appends |
//! | `<p>:run2:{<id>}:log` | stream | a begin marker (field `b`), one entry per [`RunLog::append`] (field `d` = the bytes, empty for a core-only entry; field `c` = its `core` part, when there is one; what they hold is the gateway's: `run2` names its form, see `redis_store::run_keys`), then an end marker (`e` = outcome) or a lost marker (`l`) | running: lease + `lost_retention` after the last renewal; ended: the retention; lost: `lost_retention` |
//! | `<p>:run2:{<id>}:meta` | hash | `key`, `owner`, `state` (`running`, `ended`, `lost`), `outcome`, `lease_ms`, `stop`, `entries`, `bytes`, `trimmed` (last dropped id), `input` (the run's input, a JSON array of at most `max_input_bytes`) | as the log |
//! | `<p>:run2:{<id>}:lease` | string | the owner, `SET ... PX <lease>` on begin and renew | the lease |
//! | `<p>:latest2:<key>` | string | id of the latest run begun for the conversation key | as that run's log |
//! | `<p>:{inspector}:index` | sorted set | ids of the inspector's captures (`CaptureBoard`) by start time, trimmed to the inspector's `max_runs` | none (trimmed) |
//! | `<p>:{inspector}:summary` | hash | id → the list's JSON view of the capture | none (trimmed with the index) |
//! | `<p>:{inspector}:capture:<id>` | string | the capture, JSON | the board's retention (1 h in the gateway), refreshed by each update |
//!
//! State changes (begin, append with trimming, renew, end, marking lost,
//! stop requests) are Lua scripts, atomic on the server. Readers block with
//! `XREAD BLOCK` for a third of the lease (at most 2 s) on a connection of their
//! own, so a blocked reader never holds up other commands; after each empty
//! block they check the lease key and, if it has expired while the run is still
//! `running`, mark the run lost (which appends the lost marker every other
//! reader then sees). Stop requests set `stop` in the meta hash and publish
//! the run id on the channel `<p>:stop`; each store holds one subscription to
//! it (not one per run), and on every (re)subscription re-reads the `stop`
//! flag of the runs it waits for. Every other command goes through one multiplexed connection that
//! reconnects by itself; every call is bounded by `op_timeout` and a Redis that
//! cannot be reached gives [`StoreError::Unavailable`] (answer 503), never a
//! panic, and calls work again once Redis is back. [`RedisStore::open`] does not
//! connect, so the gateway starts while Redis is down and `ping` (readiness)
//! fails until it is up. Redis without persistence loses everything on a
//! restart: logs then answer [`StoreError::UnknownRun`], owners get
//! [`StoreError::UnknownRun`] on their next append or renew.
// Nothing reachable from input may panic: no indexing, slicing, unwrap or
// expect outside tests.
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::string_slice,
        clippy::unwrap_used,
        clippy::expect_used
    )
)]
#![forbid(unsafe_code)]

mod blocks;
pub mod capture_board;
mod entries;
mod flag;
pub mod limits;
mod memory;
mod redis_store;
#[cfg(feature = "testing")]
pub mod testing;
mod writer;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
pub use babelgate_core::request::Message;
pub use bytes::Bytes;
pub use futures_util::stream::BoxStream;

pub use capture_board::{CaptureBoard, RedisBoard};
pub use limits::{limiter, Limiter, MemoryLimiter, RedisLimiter};
pub use memory::{MemoryConversationStore, MemoryRunLog};
pub use redis_store::RedisStore;
pub use writer::{Leases, RunWriter};

/// Retentions shorter than this are raised to it, so readers following a run
/// still see its end.
pub const MIN_RETENTION: Duration = Duration::from_secs(1);

/// What can go wrong with a store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The backend cannot be reached or did not answer in time (the gateway
    /// answers 503). Transient: the same call may succeed later.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The backend holds data this crate cannot read.
    #[error("store data corrupt: {0}")]
    Corrupt(String),
    /// No such run: never begun, expired, evicted or lost with its data.
    #[error("unknown run {0}")]
    UnknownRun(String),
    /// The run exists but is no longer running (ended or lost), or another
    /// instance holds its lease: nothing more can be written to it.
    #[error("run {0} is not running")]
    NotRunning(String),
    /// The configuration cannot work (bad URL, ...).
    #[error("invalid store configuration: {0}")]
    Config(String),
}

impl StoreError {
    /// Whether the backend was unreachable (the 503 case).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

/// Identifies an entry of a run log; sent to clients as the SSE `id:`.
///
/// Written and parsed as `<ms>-<seq>`; ordered by `ms`, then `seq`. A bare
/// `<ms>` parses as `<ms>-0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EventId {
    pub ms: u64,
    pub seq: u64,
}

impl EventId {
    pub const ZERO: EventId = EventId { ms: 0, seq: 0 };

    pub fn new(ms: u64, seq: u64) -> Self {
        EventId { ms, seq }
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// A string that is not an [`EventId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an event id: {0:?}")]
pub struct InvalidEventId(pub String);

impl FromStr for EventId {
    type Err = InvalidEventId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || InvalidEventId(s.to_string());
        let digits = |part: &str| {
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            part.parse::<u64>().map_err(|_| bad())
        };
        let s = s.trim();
        match s.split_once('-') {
            Some((ms, seq)) => Ok(EventId::new(digits(ms)?, digits(seq)?)),
            None => Ok(EventId::new(digits(s)?, 0)),
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunOutcome {
    /// The upstream finished the run (interrupts included).
    Completed,
    /// The run ended with an error.
    Failed,
    /// The run was stopped (stop request or client disconnect with the cancel
    /// policy).
    Cancelled,
}

impl RunOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Completed => "completed",
            RunOutcome::Failed => "failed",
            RunOutcome::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "completed" => Some(RunOutcome::Completed),
            "failed" => Some(RunOutcome::Failed),
            "cancelled" => Some(RunOutcome::Cancelled),
            _ => None,
        }
    }
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// Its owner holds the lease.
    Running,
    /// Ended by its owner; the log is kept for the retention.
    Ended(RunOutcome),
    /// Its lease ran out without an end.
    Lost,
}

/// A run as [`RunLog::latest`] and [`RunLog::info`] see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunInfo {
    pub run_id: String,
    /// The conversation key it was begun for.
    pub key: String,
    /// The instance that proxies it.
    pub owner: String,
    pub status: RunStatus,
}

impl RunInfo {
    pub fn is_running(&self) -> bool {
        self.status == RunStatus::Running
    }
}

/// Halves a map's room while it holds less than a quarter of it (not below
/// a small floor): amortised, a rebuild now and then (at the memory store's
/// sweep, as a lease is released).
pub(crate) fn shrink_when_mostly_empty<V, S: std::hash::BuildHasher>(
    map: &mut std::collections::HashMap<String, V, S>,
) {
    const FLOOR: usize = 64;
    if map.capacity() > FLOOR && map.len() < map.capacity() / 4 {
        map.shrink_to((map.len() * 2).max(FLOOR));
    }
}

/// One entry of a run log as appended: the client's SSE event as sent, and
/// an optional second part the store keeps beside it without reading it.
///
/// Both parts live in one buffer, the event first: the memory store keeps
/// an entry per event of every open stream, and one shared buffer (one
/// count, one handle) instead of two is about a third less room an event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Entry {
    /// The event's bytes, then the core part's.
    bytes: Bytes,
    /// Where the event ends and the core part begins.
    split: u32,
    /// A core part was given (an empty one is kept as given).
    has_core: bool,
}

impl Entry {
    /// An entry of client bytes only.
    pub fn data(data: Bytes) -> Self {
        Entry::joined(data, usize::MAX, false)
    }

    /// The event's bytes and an optional core part. Copies both into one
    /// buffer when both are there; [`Entry::joined`] takes one made so.
    pub fn new(data: Bytes, core: Option<Bytes>) -> Self {
        match core {
            None => Entry::data(data),
            Some(core) if data.is_empty() => Entry::joined(core, 0, true),
            Some(core) if core.is_empty() => Entry::joined(data, usize::MAX, true),
            Some(core) => {
                let mut both = Vec::with_capacity(data.len() + core.len());
                both.extend_from_slice(&data);
                both.extend_from_slice(&core);
                Entry::joined(Bytes::from(both), data.len(), true)
            }
        }
    }

    /// An entry whose event is `bytes[..split]` and whose core part, when
    /// `has_core`, is the rest (a split past the end: all is the event).
    pub fn joined(bytes: Bytes, split: usize, has_core: bool) -> Self {
        // An entry is an event of a stream, far under 4 GiB; a larger one
        // keeps its whole as the event rather than cutting it wrong.
        let split = u32::try_from(split.min(bytes.len())).unwrap_or(u32::MAX);
        Entry {
            bytes,
            split,
            has_core,
        }
    }

    fn split(&self) -> usize {
        (self.split as usize).min(self.bytes.len())
    }

    /// The SSE event as the client gets it (empty: nothing is sent).
    pub fn event(&self) -> Bytes {
        self.bytes.slice(..self.split())
    }

    /// The event's bytes, borrowed.
    pub fn event_bytes(&self) -> &[u8] {
        self.bytes.get(..self.split()).unwrap_or_default()
    }

    /// Opaque to the store: the gateway keeps the neutral events that the
    /// event was encoded from here.
    pub fn core(&self) -> Option<Bytes> {
        self.has_core.then(|| self.bytes.slice(self.split()..))
    }

    /// The core part, borrowed.
    pub fn core_bytes(&self) -> Option<&[u8]> {
        self.has_core
            .then(|| self.bytes.get(self.split()..).unwrap_or_default())
    }

    /// What the entry counts against the byte caps: both parts.
    pub fn size(&self) -> usize {
        self.bytes.len()
    }
}

/// One entry of a buffer appended whole ([`RunLog::append_chunk`]): its
/// bytes are `start..end` of the buffer, the event's up to `split` and the
/// rest its core part, when `has_core`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    pub start: u32,
    pub split: u32,
    pub end: u32,
    pub has_core: bool,
}

impl Part {
    /// The entry this part of `chunk` is (a shared slice of it).
    pub fn entry_of(&self, chunk: &Bytes) -> Entry {
        let end = (self.end as usize).min(chunk.len());
        let start = (self.start as usize).min(end);
        let split = (self.split as usize).clamp(start, end);
        Entry::joined(chunk.slice(start..end), split - start, self.has_core)
    }

    /// The entries `parts` say lie in `chunk`, each a slice of it.
    pub fn entries_of(parts: &[Part], chunk: &Bytes) -> Vec<Entry> {
        parts.iter().map(|p| p.entry_of(chunk)).collect()
    }
}

/// What [`RunLog::read`] yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogItem {
    /// One entry as it was appended, with its id: `data` as it was sent
    /// (empty for an entry that holds only `core`), `core` as it was given.
    Event {
        id: EventId,
        data: Bytes,
        core: Option<Bytes>,
    },
    /// Entries the reader asked for were dropped by the per-run caps; comes
    /// first, then what is left.
    Truncated,
    /// The run ended; nothing follows.
    End(RunOutcome),
    /// The run's lease ran out without an end; nothing follows.
    Lost,
}

/// Conversation histories by thread id.
///
/// AG-Kit clients send only the messages new since their last request, so the
/// gateway keeps what it received plus what the agent said.
#[async_trait]
pub trait ConversationStore: Send + Sync {
    /// The history of `thread`, oldest first (empty when unknown or expired).
    /// Refreshes its expiry.
    async fn history(&self, thread: &str) -> Result<Vec<Message>, StoreError>;
    /// Appends messages to `thread`'s history and refreshes its expiry.
    async fn append(&self, thread: &str, messages: Vec<Message>) -> Result<(), StoreError>;
    /// Whether the backend answers (readiness).
    async fn ping(&self) -> Result<(), StoreError>;
}

/// Logs of the runs the gateway proxies, for resuming streams (see the crate
/// documentation for the life of a run and the lease).
#[async_trait]
pub trait RunLog: Send + Sync {
    /// Records `run_id` as the running run of conversation `key`, owned by
    /// `owner` for `lease`. Run ids must be unique (mint them, e.g. with
    /// [`new_id`]; never reuse a client-supplied run id): an existing log with
    /// the same id is replaced. Returns the run that was running for `key`
    /// before, if any; it is left running (see the crate documentation).
    async fn begin(
        &self,
        key: &str,
        run_id: &str,
        owner: &str,
        lease: Duration,
    ) -> Result<Option<RunInfo>, StoreError>;

    /// Appends one SSE event to a running run's log; returns its id. Call in
    /// order and await each call: ids increase in call order.
    /// [`StoreError::NotRunning`] once the run has ended or was lost,
    /// [`StoreError::UnknownRun`] when its data is gone.
    async fn append(&self, run_id: &str, data: Bytes) -> Result<EventId, StoreError> {
        let mut ids = Vec::with_capacity(1);
        self.append_entries(run_id, vec![Entry::data(data)], &mut ids)
            .await?;
        ids.pop()
            .ok_or_else(|| StoreError::Corrupt("append gave no id".into()))
    }

    /// Appends several SSE events in order, as [`append`](RunLog::append)
    /// one by one would (see [`append_entries`](RunLog::append_entries)).
    async fn append_batch(
        &self,
        run_id: &str,
        data: Vec<Bytes>,
        ids: &mut Vec<EventId>,
    ) -> Result<(), StoreError> {
        let entries = data.into_iter().map(Entry::data).collect();
        self.append_entries(run_id, entries, ids).await
    }

    /// Appends entries in order, pushing each one's id to `ids`; on an
    /// error, `ids` holds the ids of the entries appended before it. The
    /// memory backend takes its lock once per batch, Redis answers it in one
    /// round trip.
    async fn append_entries(
        &self,
        run_id: &str,
        entries: Vec<Entry>,
        ids: &mut Vec<EventId>,
    ) -> Result<(), StoreError>;

    /// [`append_entries`](Self::append_entries) of the entries that `parts`
    /// say lie in `chunk`, one buffer holding them all (an upstream read's
    /// events). By default each part is sliced out as an entry; the memory
    /// backend keeps the buffer once, and per entry only where it lies.
    async fn append_chunk(
        &self,
        run_id: &str,
        chunk: Bytes,
        parts: &[Part],
        ids: &mut Vec<EventId>,
    ) -> Result<(), StoreError> {
        self.append_entries(run_id, Part::entries_of(parts, &chunk), ids)
            .await
    }

    /// Extends the lease of a running run to `lease` from now. Call at least
    /// every `lease / 3`. [`StoreError::NotRunning`] when the run ended, was
    /// lost, or another owner holds the lease.
    async fn renew(&self, run_id: &str, owner: &str, lease: Duration) -> Result<(), StoreError>;

    /// Ends a running run: readers get [`LogItem::End`], the log and the key's
    /// pointer to it expire after `retention` (at least [`MIN_RETENTION`]).
    async fn end(
        &self,
        run_id: &str,
        outcome: RunOutcome,
        retention: Duration,
    ) -> Result<(), StoreError>;

    /// The latest run begun for `key` while its data lasts: running, ended
    /// (within its retention) or lost. `None` when there is none. A run whose
    /// lease has run out is reported (and recorded) as lost.
    async fn latest(&self, key: &str) -> Result<Option<RunInfo>, StoreError>;

    /// The run `run_id`, as [`latest`](RunLog::latest) reports it.
    async fn info(&self, run_id: &str) -> Result<Option<RunInfo>, StoreError>;

    /// The id of the last entry appended so far (`None`: none yet, or no
    /// such run). A reconnecting client is summarised up to it, then follows.
    async fn last_id(&self, run_id: &str) -> Result<Option<EventId>, StoreError>;

    /// Every entry after `after` (all when `None`), then the live ones as they
    /// are appended, then [`LogItem::End`] or [`LogItem::Lost`], and the stream
    /// ends. `Err(UnknownRun)` when the run does not exist (or its data expires
    /// while reading); on any error the stream yields it and ends. A backend
    /// failure never makes the stream wait forever.
    fn read(
        &self,
        run_id: &str,
        after: Option<EventId>,
    ) -> BoxStream<'static, Result<LogItem, StoreError>>;

    /// Asks the owner of a running run to stop it (the owner may be another
    /// instance). `false` when the run is not running (ended, lost, unknown).
    async fn request_stop(&self, run_id: &str) -> Result<bool, StoreError>;

    /// Keeps the input messages of a running run beside its log, for the
    /// snapshot a reconnecting client gets. They live and expire with the
    /// run (its life, then its retention or `lost_retention`), count towards
    /// the memory backend's total, and at most `max_input_bytes` of them (as
    /// JSON) are kept, the oldest messages dropped first. Replaces what was
    /// kept before; [`StoreError::UnknownRun`] when the run is gone.
    async fn keep_input(&self, run_id: &str, messages: &[Message]) -> Result<(), StoreError>;

    /// The input kept for `run_id`; empty when none was, or the run is gone.
    async fn input(&self, run_id: &str) -> Result<Vec<Message>, StoreError>;

    /// Whether a stop was requested for `run_id` (a one-off check; owners
    /// wait with [`wait_stop`](RunLog::wait_stop) instead of polling this).
    async fn stop_requested(&self, run_id: &str) -> Result<bool, StoreError>;

    /// Resolves once a stop is requested for `run_id`, on any instance;
    /// pending forever when none is (or the run is gone). Nothing is polled
    /// per run: the memory backend wakes the waiter directly; Redis keeps one
    /// pub/sub subscription per store that `request_stop` publishes to and
    /// that fans out to the waiting runs, re-checking their `stop` flags
    /// whenever it (re)subscribes, so a stop made while it was disconnected
    /// is not lost. Cancel-safe.
    async fn wait_stop(&self, run_id: &str);

    /// Whether the backend answers (readiness).
    async fn ping(&self) -> Result<(), StoreError>;
}

/// Each message as JSON, newest last.
pub(crate) fn encode_messages(messages: &[Message]) -> Result<Vec<Vec<u8>>, StoreError> {
    messages
        .iter()
        .map(|m| {
            serde_json::to_vec(m)
                .map_err(|e| StoreError::Corrupt(format!("message {:?}: {e}", m.id)))
        })
        .collect()
}

/// How many of the oldest of these encoded items to drop so that the rest
/// hold at most `max_bytes`.
pub(crate) fn excess<T: AsRef<[u8]>>(items: &[T], max_bytes: usize) -> usize {
    let mut total: usize = items.iter().map(|i| i.as_ref().len()).sum();
    let mut drop = 0;
    for item in items {
        if total <= max_bytes {
            break;
        }
        total -= item.as_ref().len();
        drop += 1;
    }
    drop
}

/// A run's input as kept: a JSON array of the newest messages that fit in
/// `max_bytes`.
pub(crate) fn encode_input(messages: &[Message], max_bytes: usize) -> Result<Vec<u8>, StoreError> {
    let items = encode_messages(messages)?;
    // Brackets and commas: one byte per item, at most, beside the items.
    let budget = max_bytes.saturating_sub(1 + items.len());
    let kept = items.get(excess(&items, budget)..).unwrap_or_default();
    let mut out = Vec::with_capacity(kept.iter().map(Vec::len).sum::<usize>() + kept.len() + 1);
    out.push(b'[');
    for (i, item) in kept.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    out.push(b']');
    Ok(out)
}

pub(crate) fn decode_input(run_id: &str, bytes: &[u8]) -> Result<Vec<Message>, StoreError> {
    serde_json::from_slice(bytes)
        .map_err(|e| StoreError::Corrupt(format!("input of run {run_id}: {e}")))
}

/// The conversation key of a run: route path and chat/thread id, joined so
/// that no two different pairs give the same key.
pub fn run_key(route_path: &str, conversation_id: &str) -> String {
    format!("{}:{}{}", route_path.len(), route_path, conversation_id)
}

/// A fresh run id for the conversation key `key`: `<tag>.<random>`, where
/// the tag (16 hex digits) is a hash of the key. On Redis Cluster the store
/// names a run's keys by the part before the dot (their hash tag), so one
/// conversation's runs and its latest pointer share a slot and the run's
/// scripts touch one slot only. Any other id still works (its keys are
/// tagged by the whole id, as before).
pub fn run_id(key: &str) -> String {
    format!("{}.{}", key_tag(key), new_id())
}

/// The hash tag of a conversation key (FNV-1a, 64 bits, hex): stable across
/// processes and versions, and free of braces whatever the key holds.
pub fn key_tag(key: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// A fresh random id (32 hex digits) for instance ids and run ids.
pub fn new_id() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{SystemTime, UNIX_EPOCH};

    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    // RandomState is seeded from the OS once per thread and varied per
    // instance: two hashes of the same input under fresh states differ.
    let word = |salt: u64| {
        let mut h = RandomState::new().build_hasher();
        h.write_u128(nanos);
        h.write_u64(count);
        h.write_u32(std::process::id());
        h.write_u64(salt);
        h.finish()
    };
    format!("{:016x}{:016x}", word(1), word(2))
}

/// The two stores a gateway needs, built from one [`StoreConfig`].
#[derive(Clone)]
pub struct Stores {
    pub conversations: Arc<dyn ConversationStore>,
    pub runs: Arc<dyn RunLog>,
}

impl Stores {
    /// Whether both stores answer (readiness).
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.conversations.ping().await?;
        self.runs.ping().await
    }
}

impl fmt::Debug for Stores {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stores").finish_non_exhaustive()
    }
}

/// Which backend to use, with its settings (`[store]` in gateway.toml).
#[derive(Debug, Clone, PartialEq)]
pub enum StoreConfig {
    Memory(MemoryConfig),
    Redis(RedisConfig),
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig::Memory(MemoryConfig::default())
    }
}

impl StoreConfig {
    /// Builds the stores. Never connects: with Redis down this succeeds and
    /// [`Stores::ping`] fails until Redis is up. Must be called within a Tokio
    /// runtime. Fails only on a configuration that cannot work (bad URL).
    pub async fn build(&self) -> Result<Stores, StoreError> {
        match self {
            StoreConfig::Memory(cfg) => Ok(Stores {
                conversations: Arc::new(MemoryConversationStore::from_config(cfg)),
                runs: Arc::new(MemoryRunLog::new(cfg)),
            }),
            StoreConfig::Redis(cfg) => {
                let store = Arc::new(RedisStore::open(cfg.clone()).await?);
                Ok(Stores {
                    conversations: store.clone(),
                    runs: store,
                })
            }
        }
    }
}

/// Settings of the in-memory backend.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryConfig {
    /// A conversation untouched this long is forgotten.
    pub history_ttl: Duration,
    /// Past this many conversations the least recently used is forgotten.
    pub max_threads: usize,
    /// A conversation keeps at most this many messages (oldest dropped).
    pub max_messages: usize,
    /// A conversation keeps at most this many bytes of messages, as JSON
    /// (oldest dropped).
    pub max_history_bytes: usize,
    /// All conversations together keep at most this many bytes: the least
    /// recently used are forgotten first.
    pub max_total_history_bytes: usize,
    /// A run's input kept for snapshots holds at most this many bytes
    /// (oldest messages dropped); it counts towards `max_total_bytes`.
    pub max_input_bytes: usize,
    /// Past this many run logs, ended and lost ones are evicted first, then the
    /// oldest running one. More than the streams one instance holds open:
    /// a running stream whose log is evicted can no longer be resumed.
    pub max_runs: usize,
    /// A run log keeps at most this many entries (oldest dropped).
    pub max_run_entries: usize,
    /// A run log keeps at most this many bytes of event data (oldest dropped).
    pub max_run_bytes: usize,
    /// All run logs together keep at most this many bytes: finished runs are
    /// evicted first, then the oldest entries of the largest logs.
    pub max_total_bytes: usize,
    /// How long the log of a lost run stays readable.
    pub lost_retention: Duration,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            history_ttl: Duration::from_secs(24 * 3600),
            max_threads: 10_000,
            max_messages: 1_000,
            max_history_bytes: 4 << 20,
            max_total_history_bytes: 256 << 20,
            max_input_bytes: 1 << 20,
            max_runs: 20_000,
            max_run_entries: 100_000,
            max_run_bytes: 16 << 20,
            max_total_bytes: 256 << 20,
            lost_retention: Duration::from_secs(600),
        }
    }
}

/// Settings of the Redis backend.
#[derive(Debug, Clone, PartialEq)]
pub struct RedisConfig {
    /// `redis://[user:password@]host:port[/db]`.
    pub url: String,
    /// Seed nodes of a Redis Cluster (7.0 or later), any subset of them:
    /// when not empty the store runs on the cluster and `url` is unused.
    pub cluster: Vec<String>,
    /// Prefix of every key (instances sharing data must use the same).
    pub prefix: String,
    /// A conversation untouched this long expires.
    pub history_ttl: Duration,
    /// A conversation keeps at most this many messages (oldest dropped).
    pub max_messages: usize,
    /// A conversation keeps at most this many bytes of messages, as JSON
    /// (oldest dropped).
    pub max_history_bytes: usize,
    /// A run's input kept for snapshots holds at most this many bytes
    /// (oldest messages dropped).
    pub max_input_bytes: usize,
    /// A run log keeps at most this many entries (oldest dropped).
    pub max_run_entries: usize,
    /// A run log keeps at most this many bytes of event data (oldest dropped).
    pub max_run_bytes: usize,
    /// How long the log of a lost run stays readable.
    pub lost_retention: Duration,
    /// Bound on every call (connecting included); past it the call fails with
    /// [`StoreError::Unavailable`].
    pub op_timeout: Duration,
    /// Bound on establishing a connection.
    pub connect_timeout: Duration,
}

impl RedisConfig {
    /// Defaults for everything but the URL.
    pub fn new(url: impl Into<String>) -> Self {
        RedisConfig {
            url: url.into(),
            cluster: Vec::new(),
            prefix: "babelgate".to_string(),
            history_ttl: Duration::from_secs(24 * 3600),
            max_messages: 1_000,
            max_history_bytes: 4 << 20,
            max_input_bytes: 1 << 20,
            max_run_entries: 100_000,
            max_run_bytes: 16 << 20,
            lost_retention: Duration::from_secs(600),
            op_timeout: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(1),
        }
    }

    /// Defaults for everything but the seed nodes of a Redis Cluster.
    pub fn cluster(urls: Vec<String>) -> Self {
        RedisConfig {
            url: urls.first().cloned().unwrap_or_default(),
            cluster: urls,
            ..RedisConfig::new("")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both parts come back as given from one buffer, whichever is empty
    /// or missing, and a split past the end keeps the whole as the event.
    #[test]
    fn an_entry_keeps_its_event_and_core_part_in_one_buffer() {
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        let cases = [
            ("data: a\n\n", Some("core")),
            ("data: a\n\n", None),
            ("", Some("core")),
            ("data: a\n\n", Some("")),
            ("", None),
        ];
        for (data, core) in cases {
            let e = Entry::new(b(data), core.map(b));
            assert_eq!(e.event(), b(data));
            assert_eq!(e.event_bytes(), data.as_bytes());
            assert_eq!(e.core(), core.map(b));
            assert_eq!(e.core_bytes(), core.map(str::as_bytes));
            assert_eq!(e.size(), data.len() + core.map_or(0, str::len));
        }
        let e = Entry::joined(b("data: a\n\ncore"), 9, true);
        assert_eq!((e.event(), e.core()), (b("data: a\n\n"), Some(b("core"))));
        let e = Entry::joined(b("abc"), 99, true);
        assert_eq!((e.event(), e.core()), (b("abc"), Some(Bytes::new())));
        assert_eq!(Entry::data(b("abc")).core(), None);
    }

    #[test]
    fn event_ids_print_parse_and_order() {
        let a = EventId::new(1_700_000_000_000, 0);
        let b = EventId::new(1_700_000_000_000, 7);
        let c = EventId::new(1_700_000_000_001, 0);
        assert!(a < b && b < c);
        assert_eq!(b.to_string(), "1700000000000-7");
        assert_eq!("1700000000000-7".parse::<EventId>(), Ok(b));
        assert_eq!(" 1700000000000 ".parse::<EventId>(), Ok(a));
        for bad in [
            "",
            "-",
            "1-",
            "-1",
            "a-1",
            "1-2-3",
            "+1-0",
            "99999999999999999999-0",
        ] {
            assert!(bad.parse::<EventId>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn run_keys_do_not_collide() {
        assert_ne!(run_key("/a", "b:c"), run_key("/a:b", "c"));
        assert_ne!(run_key("/a", "1"), run_key("/a1", ""));
        assert_eq!(run_key("/api/chat", "x"), run_key("/api/chat", "x"));
    }

    #[test]
    fn new_ids_are_distinct() {
        let ids: std::collections::HashSet<_> = (0..1000).map(|_| new_id()).collect();
        assert_eq!(ids.len(), 1000);
        assert!(ids.iter().all(|id| id.len() == 32));
    }

    #[test]
    fn outcomes_round_trip() {
        for o in [
            RunOutcome::Completed,
            RunOutcome::Failed,
            RunOutcome::Cancelled,
        ] {
            assert_eq!(RunOutcome::parse(o.as_str()), Some(o));
        }
        assert_eq!(RunOutcome::parse("other"), None);
    }
}
