//! Resumable streams: every event a client is sent is first written to the
//! run's log (babelgate-store), with the log's id as the SSE `id:`; a client
//! that reconnects reads the log back from where it was, then follows the
//! live tail, on any instance that shares the store. A route with
//! `resume = false` has no log: none of this runs for its streams.
//!
//! Each entry holds the client's event as sent and, beside it, the core
//! steps its encoder was given (`core`, [`Step`]s: the shaped events
//! whose encoding ended in that event, the stream's end or failure); steps
//! that wrote nothing (dropped by the dialect) go with the next event, or in
//! an entry of their own that is never sent. A follower replays the steps
//! into an encoder of the client's dialect to know what the client has open,
//! and builds a snapshot from them: it never decodes the gateway's own
//! output. The steps are JSON, but for deltas, the most of a stream, which
//! are kept in a compact form about half their event's size
//! ([`babelgate_core::journal::write_log_steps`]). Both parts count towards
//! the log's caps.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use babelgate_core::assemble::MessageAssembler;
use babelgate_core::journal::{Journal, Setup, Step};
use babelgate_core::request::Message;
use babelgate_core::track::OpenTracker;
use babelgate_core::{
    Dialect, EncodeContext, Encoder, Event, EventKind, Framing, Shaper, Sink, SpanKind,
};
use babelgate_store::{EventId, LogItem, Part, RunLog, RunOutcome, RunWriter};
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::mpsc;

use crate::registry;
use crate::transport::Transport;

/// Writes `id: <id>` and the event.
pub fn with_id(id: EventId, event: &[u8], out: &mut Vec<u8>) {
    IdLines::default().write(id, event, out);
}

/// Writes events after their `id:` lines, `id: <ms>-` formatted once per
/// millisecond: the ids of one chunk mostly share it, and formatting its 13
/// digits for each event was most of what an id cost.
#[derive(Default)]
pub(crate) struct IdLines {
    /// `id: <ms>-` of the last id written (`len` 0 before the first): at
    /// most 4 + 20 digits + 1 bytes.
    prefix: [u8; 25],
    len: usize,
    ms: u64,
}

impl IdLines {
    pub(crate) fn write(&mut self, id: EventId, event: &[u8], out: &mut Vec<u8>) {
        let mut num = itoa::Buffer::new();
        if self.len == 0 || self.ms != id.ms {
            let digits = num.format(id.ms).as_bytes();
            let line = [&b"id: "[..], digits, b"-"];
            self.len = 0;
            for part in line {
                let end = self.len + part.len();
                if let Some(room) = self.prefix.get_mut(self.len..end) {
                    room.copy_from_slice(part);
                    self.len = end;
                }
            }
            self.ms = id.ms;
        }
        out.extend_from_slice(self.prefix.get(..self.len).unwrap_or_default());
        out.extend_from_slice(num.format(id.seq).as_bytes());
        out.push(b'\n');
        out.extend_from_slice(event);
    }
}

/// The writing side of one run's log, owned by the stream's pump.
pub struct Recorder {
    /// `None` once the store failed mid-run: the stream goes on without ids
    /// (it can no longer be resumed) rather than failing the client.
    writer: Option<RunWriter>,
    retention: Duration,
    /// The client gets the binary transport, which has no place for ids.
    binary: bool,
}

impl Recorder {
    pub fn new(writer: RunWriter, retention: Duration) -> Self {
        Recorder {
            writer: Some(writer),
            retention,
            binary: false,
        }
    }

    /// The events recorded are binary messages: logged and sent without ids.
    pub fn binary(&mut self) {
        self.binary = true;
    }

    /// Logs each event the sink holds, with the core steps of the
    /// translator's journal that belong to it, and writes it, with its id,
    /// to `client`: the sink's spans say where each starts and ends (nothing
    /// is scanned). Comments (heartbeats) are not logged; bytes outside any
    /// span go out as they are; steps that belong to no event of the sink
    /// are logged in an entry of their own, never sent.
    ///
    /// `steps` is left empty, its room kept for the caller to reuse.
    pub async fn record(&mut self, out: &Sink, steps: &mut Journal, client: &mut Vec<u8>) {
        self.record_into(out, steps, Some(client)).await;
    }

    /// [`record`](Self::record) for a client that takes each event as a
    /// message of its own (a WebSocket session): logged alike, and no
    /// stream with ids to write (a message has no place for one).
    pub async fn log(&mut self, out: &Sink, steps: &mut Journal) {
        self.record_into(out, steps, None).await;
    }

    async fn record_into(&mut self, out: &Sink, steps: &mut Journal, client: Option<&mut Vec<u8>>) {
        let ids = match self.writer.as_ref() {
            Some(writer) => {
                if steps.failed > 0 {
                    tracing::warn!(
                        steps = steps.failed,
                        "could not log the core events of a client event"
                    );
                }
                let (both, parts) = entries_of(out, steps);
                let mut ids = Vec::with_capacity(parts.len());
                if !parts.is_empty() {
                    if let Err(e) = writer.append_chunk(both, &parts, &mut ids).await {
                        tracing::warn!(run = %writer.run_id(), error = %e, "run log unavailable: this stream can no longer be resumed");
                        self.writer = None;
                    }
                }
                ids
            }
            None => Vec::new(),
        };
        steps.clear();
        if let Some(client) = client {
            // The binary transport has no place for ids.
            let ids = if self.binary { Vec::new() } else { ids };
            write_with_ids(out, ids, client);
        }
    }

    /// Resolves when someone asked to stop the run (`POST .../stop`, any
    /// instance); pending forever otherwise. Owned, so that a stream makes
    /// it once (one made per read registered and dropped a waiter each
    /// time).
    pub fn stop_signal(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let signal = self.writer.as_ref().map(RunWriter::stop_signal);
        async move {
            match signal {
                Some(s) => s.await,
                None => std::future::pending().await,
            }
        }
    }

    pub async fn end(&mut self, outcome: RunOutcome) {
        if let Some(w) = self.writer.take() {
            let run = w.run_id().to_string();
            if let Err(e) = w.end(outcome, self.retention).await {
                tracing::warn!(%run, error = %e, "could not end the run log");
            }
        }
    }
}

/// The log's entries for what `out` holds: one buffer (one allocation a
/// chunk and one store call for them all: an upstream read often holds many
/// events, and an allocation or a handle per event was a cost of its own)
/// holding each event followed by its core steps, and where each entry lies
/// in it. A step goes with the first event at or after its span; the steps
/// after the last event make an entry of their own, never sent. Sized
/// exactly: the log keeps the buffer as long as the run.
fn entries_of(out: &Sink, steps: &Journal) -> (Bytes, Vec<Part>) {
    let (bytes, spans) = (out.bytes(), out.spans());
    let is_event = |i: usize| spans.get(i).is_some_and(|s| s.kind == SpanKind::Event);
    // The groups are numbered by event (`n`, the number of events: after
    // every event of the sink). The journal notes steps in the order of the
    // output, so the groups come in order, each group's records one run of
    // the journal's bytes; one that did not is put in order (stably: a
    // group's steps keep theirs). In order by span is in order by group,
    // and checked without a search per step (a chunk can hold hundreds of
    // events).
    let sorted;
    let journal: &Journal = if steps.marks().is_sorted_by_key(|m| m.span) {
        steps
    } else {
        let events: Vec<usize> = (0..spans.len()).filter(|&i| is_event(i)).collect();
        sorted = steps.sorted_by_span_key(|span| events.partition_point(|&i| i < span));
        &sorted
    };
    let marks = journal.marks();
    let (events, event_bytes) = spans
        .iter()
        .filter(|s| s.kind == SpanKind::Event)
        .fold((0, 0), |(n, len), s| (n + 1, len + s.range.len()));
    let size = event_bytes + journal.records(0, marks.len()).len();
    if size == 0 {
        return (Bytes::new(), Vec::new());
    }
    let mut parts = Vec::with_capacity(events + 1);
    let mut both = Vec::with_capacity(size);
    let mut from = 0;
    // One entry: `event` is its span and bytes, `None` for what follows the
    // last event.
    let mut group = |event: Option<(usize, &[u8])>, both: &mut Vec<u8>| {
        let to = match event {
            Some((at, _)) => {
                from + marks
                    .get(from..)
                    .unwrap_or_default()
                    .iter()
                    .take_while(|m| m.span <= at)
                    .count()
            }
            None => marks.len(),
        };
        let has_core = to > from;
        let core = journal.records(from, to);
        from = to;
        if event.is_none() && !has_core {
            return;
        }
        let start = both.len();
        both.extend_from_slice(event.map_or(&[][..], |(_, bytes)| bytes));
        let split = both.len();
        both.extend_from_slice(core);
        // A chunk of events is far under 4 GiB; the store cuts a part that
        // says otherwise to the buffer.
        let at = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        parts.push(Part {
            start: at(start),
            split: at(split),
            end: at(both.len()),
            has_core,
        });
    };
    for (i, span) in spans.iter().enumerate() {
        if span.kind == SpanKind::Event {
            group(
                Some((i, bytes.get(span.range.clone()).unwrap_or_default())),
                &mut both,
            );
        }
    }
    group(None, &mut both);
    (Bytes::from(both), parts)
}

/// The client's bytes: what `out` holds, each event the log took after its
/// `id:` line. The rest (comments, what came after a store failure, what no
/// span holds: an encoder that wrote between events) goes out as it is.
fn write_with_ids(out: &Sink, ids: Vec<EventId>, client: &mut Vec<u8>) {
    let (bytes, spans) = (out.bytes(), out.spans());
    // An `id:` line is at most 26 bytes (13 digits of ms until 2286).
    client.reserve(bytes.len() + 26 * ids.len());
    let mut ids = ids.into_iter();
    let mut lines = IdLines::default();
    let mut at = 0;
    for span in spans {
        client.extend_from_slice(bytes.get(at..span.range.start).unwrap_or_default());
        let event = bytes.get(span.range.clone()).unwrap_or_default();
        match span.kind {
            SpanKind::Event => match ids.next() {
                Some(id) => lines.write(id, event, client),
                None => client.extend_from_slice(event),
            },
            SpanKind::Comment => client.extend_from_slice(event),
        }
        at = span.range.end;
    }
    client.extend_from_slice(bytes.get(at..).unwrap_or_default());
}

/// The resumed streams one instance follows, counted against
/// `[store] max_followers`: each holds a reader of the store (with Redis, a
/// connection of its own) and, while it builds a snapshot, up to
/// `max_snapshot_bytes` of log.
#[derive(Debug, Default)]
pub struct Followers(AtomicUsize);

impl Followers {
    /// A place among at most `max` followers; `None` when all are taken.
    pub fn enter(self: &Arc<Self>, max: usize) -> Option<FollowerSlot> {
        let taken = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok();
        taken.then(|| FollowerSlot(self.clone()))
    }

    pub fn count(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

/// A follower's place; given back when dropped.
#[derive(Debug)]
pub struct FollowerSlot(Arc<Followers>);

impl Drop for FollowerSlot {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A log entry's core part, read back (none from a log written without).
fn read_steps(core: Option<&Bytes>) -> Vec<Step> {
    let Some(core) = core else {
        return Vec::new();
    };
    babelgate_core::journal::read_log_steps(core).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "unreadable core events in the run log");
        Vec::new()
    })
}

/// An encoder of the client's dialect in the state of the one that wrote
/// what the client got: it is given the logged steps, so that an error at
/// any point closes exactly what the client has open. It writes in the
/// resuming client's transport; when the log is in another one (the live
/// client asked for the other, or took each event as a WebSocket message),
/// the client's events are its re-encoding of the logged steps rather than
/// the logged bytes.
struct Replica {
    dialect: Dialect,
    encoder: Box<dyn Encoder>,
    /// What the steps of one entry wrote.
    written: Sink,
    /// The client's stream has its end (finish or failure) already.
    ended: bool,
    /// The resuming client takes the binary transport.
    binary: bool,
    /// The log is in the other transport than the client's, or the
    /// client's answers carry its own reply: re-encoded.
    reencode: bool,
    /// What this client's answers carry back, when its request was not the
    /// one that began the run (see `RunRequest::reply_to`).
    reply_to: Option<serde_json::Value>,
}

impl Replica {
    fn new(dialect: Dialect, binary: bool, reply_to: Option<serde_json::Value>) -> Self {
        Replica {
            dialect,
            encoder: registry::encoder(dialect, EncodeContext::default()),
            written: Sink::new(Framing::stream(binary)),
            ended: false,
            binary,
            reencode: false,
            reply_to,
        }
    }

    /// The encoder as the live one was built (its ids, thread and run), in
    /// the client's transport, answering the client's request.
    fn begin(&mut self, setup: &Setup) {
        let mut ctx = setup.context();
        ctx.binary = self.binary;
        if self.reply_to.is_some() {
            ctx.reply_to.clone_from(&self.reply_to);
        }
        self.encoder = registry::encoder(self.dialect, ctx);
        // A WebSocket session's log holds bodies, which no HTTP client
        // takes as they are.
        self.reencode = setup.binary != self.binary || setup.messages || self.reply_to.is_some();
    }

    /// The client got the bytes these steps wrote.
    fn observe(&mut self, steps: &[Step]) {
        for step in steps {
            if self.ended {
                break;
            }
            if let Step::Begin(setup) = step {
                self.begin(setup);
            }
            step.replay(self.encoder.as_mut(), &mut self.written);
            self.ended = step.ends();
        }
    }

    /// One log entry to the client: its logged event (with its id in SSE;
    /// binary has no place for one), or the steps' re-encoding in the
    /// client's transport. Whether the entry held an event.
    fn send(&mut self, id: EventId, data: &[u8], steps: &[Step], out: &mut Vec<u8>) -> bool {
        self.observe(steps);
        if self.reencode {
            let tag = (!data.is_empty() && !self.binary).then_some(id);
            tagged(self.written.bytes(), self.written.spans(), tag, out);
        } else if !data.is_empty() {
            if self.binary {
                out.extend_from_slice(data);
            } else {
                with_id(id, data, out);
            }
        }
        // Cleared, not taken: its room serves the next entry.
        self.written.clear();
        !data.is_empty()
    }

    /// Ends the client's stream with the dialect's error, after closing what
    /// it has open; nothing when its stream has ended already.
    fn fail(&mut self, message: &str, code: &str, out: &mut Vec<u8>) {
        if !self.ended {
            self.ended = true;
            let framing = Framing::stream(self.binary);
            Sink::appending(out, framing, |sink| {
                self.encoder.fail_to(message, Some(code), sink)
            });
        }
    }
}

/// How a reconnecting client is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every event after this id, as sent (`Last-Event-ID`); `None`: from
    /// the start (Vercel's resume, AG-Kit).
    After(Option<EventId>),
    /// A snapshot of the messages so far, open items re-opened, then the
    /// tail (AG-UI and HAI without `Last-Event-ID`).
    Snapshot,
}

/// A reconnecting client's view of a run.
pub struct Follow {
    pub runs: Arc<dyn RunLog>,
    pub run_id: String,
    /// The client's dialect (the log holds its bytes).
    pub dialect: Dialect,
    pub mode: Mode,
    /// Snapshot mode: the log's last id when the client came back.
    pub last: Option<EventId>,
    /// Snapshot mode: the run's input, first in the snapshot.
    pub input: Vec<Message>,
    /// Snapshot mode: at most this many bytes of log (client bytes and core
    /// parts) are held to build the snapshot; past it the run is replayed as
    /// it was sent instead.
    pub max_snapshot_bytes: usize,
    /// Held for as long as the client is followed.
    pub slot: FollowerSlot,
    /// Set before the end when the run failed and the dialect shows that
    /// only as a body that breaks off (`Encoder::aborts`), as live.
    pub abort: Arc<std::sync::atomic::AtomicBool>,
    /// The resuming client's transport, which may differ from the live
    /// client's (the log's).
    pub transport: Transport,
    /// Counts the logged events sent to this client (re-sent, or summed
    /// up in its snapshot).
    pub replayed: prometheus_client::metrics::counter::Counter,
    /// This stream's count in `requests_total`, made as it ends.
    pub counted: crate::metrics::CountAtEnd,
    /// What the resuming request asked its answers to carry, when it has
    /// its own (`None`: the run's events as they were sent).
    pub reply_to: Option<serde_json::Value>,
}

/// Snapshot mode: the log read so far, until it reaches `last`.
struct Held {
    entries: Vec<Logged>,
    bytes: usize,
    last: EventId,
}

/// One log entry as read.
struct Logged {
    id: EventId,
    data: Bytes,
    core: Option<Bytes>,
}

impl Follow {
    /// Streams the log to the client: the replay, then the live tail, each
    /// event with its id; a lost run, a broken store or shutdown ends with the
    /// dialect's error, after closing what the client has open.
    pub async fn run(self, tx: mpsc::Sender<Bytes>, shutdown: crate::shutdown::Shutdown) {
        let Follow {
            runs,
            run_id,
            dialect,
            mode,
            last,
            input,
            max_snapshot_bytes,
            slot: _slot,
            abort,
            transport,
            replayed,
            counted,
            reply_to,
        } = self;
        let mut tail = Tail {
            // With `Last-Event-ID` the log is still read from its start:
            // what the client got before the id is not sent again, but its
            // steps tell what the client has open.
            skip: match mode {
                Mode::After(after) => after,
                Mode::Snapshot => None,
            },
            replica: Replica::new(dialect, matches!(transport, Transport::Proto(_)), reply_to),
            // Snapshot mode: the log up to `last` is held (as the store gave
            // it: no copy in memory), then summarised; past the cap,
            // replayed.
            held: match (mode, last) {
                (Mode::Snapshot, Some(last)) => Some(Held {
                    entries: Vec::new(),
                    bytes: 0,
                    last,
                }),
                _ => None,
            },
            out: Vec::new(),
            input,
            max_snapshot_bytes,
            replayed,
        };
        let mut log = runs.read(&run_id, None);
        let mut first = true;
        // Made once: polled at every entry.
        let shutdown = shutdown.cancelled();
        tokio::pin!(shutdown);
        let failure = loop {
            let item = tokio::select! {
                item = log.next() => match item {
                    Some(item) => item,
                    None => break None,
                },
                () = &mut shutdown => break Some(("the gateway is shutting down", "shutdown")),
            };
            let at_start = std::mem::take(&mut first);
            match item {
                Ok(LogItem::Truncated) if at_start && tail.skip.is_some() => {
                    // The log lost its start: read from the client's id as
                    // asked (the store says whether any of that is gone);
                    // what was open before it is unknown, as the log is.
                    log = runs.read(&run_id, tail.skip.take());
                    continue;
                }
                Ok(LogItem::Event { id, data, core }) => tail.event(Logged { id, data, core }),
                Ok(LogItem::End(_)) => break None,
                Ok(LogItem::Lost) => {
                    break Some((
                        "the gateway instance serving this run went away",
                        "run_lost",
                    ))
                }
                Ok(LogItem::Truncated) => {
                    break Some((
                        "the events since the last one received are no longer kept",
                        "resume_truncated",
                    ))
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reading the run failed");
                    break Some(("reading the run failed", "store_unavailable"));
                }
            }
            if !tail.out.is_empty()
                && tx
                    .send(Bytes::from(std::mem::take(&mut tail.out)))
                    .await
                    .is_err()
            {
                // The client went away again; the run is not affected.
                counted.ended(true);
                return;
            }
        };
        let out = tail.finish(failure);
        let gone = !out.is_empty() && tx.send(Bytes::from(out)).await.is_err();
        if tail.replica.encoder.aborts() {
            abort.store(true, Ordering::Release);
        }
        counted.ended(gone);
    }
}

/// What a follower keeps while it reads the log: the client's view, what it
/// holds for a snapshot, and the bytes to send next.
struct Tail {
    /// Entries up to this id were sent to the client before.
    skip: Option<EventId>,
    replica: Replica,
    held: Option<Held>,
    out: Vec<u8>,
    input: Vec<Message>,
    max_snapshot_bytes: usize,
    replayed: prometheus_client::metrics::counter::Counter,
}

impl Tail {
    /// One logged event: observed only (the client has it), sent, or held
    /// for the snapshot.
    fn event(&mut self, e: Logged) {
        if self.skip.is_some_and(|after| e.id <= after) {
            self.replica.observe(&read_steps(e.core.as_ref()));
            self.replica.written.clear();
            return;
        }
        let Some(h) = self.held.as_mut() else {
            self.send(&e);
            return;
        };
        h.bytes += e.data.len() + e.core.as_ref().map_or(0, Bytes::len);
        let (id, at_last) = (e.id, e.id >= h.last);
        h.entries.push(e);
        if h.bytes > self.max_snapshot_bytes {
            // Too much to summarise within the bound: the run as it was
            // sent (a valid stream from its start), then the tail.
            for e in self.held.take().map(|h| h.entries).unwrap_or_default() {
                self.send(&e);
            }
        } else if at_last {
            // The summary's last event carries the id it covers.
            self.summarise(Some(id));
        }
    }

    fn send(&mut self, e: &Logged) {
        let steps = read_steps(e.core.as_ref());
        if self.replica.send(e.id, &e.data, &steps, &mut self.out) {
            self.replayed.inc();
        }
    }

    fn summarise(&mut self, tag: Option<EventId>) {
        let entries = self.held.take().map(|h| h.entries).unwrap_or_default();
        // Entries that carry an event for the client (not core-only ones).
        let events = entries.iter().filter(|e| !e.data.is_empty()).count();
        self.replayed.inc_by(events as u64);
        snapshot(&mut self.replica, &self.input, &entries, tag, &mut self.out);
    }

    /// The last bytes: the snapshot of what is held, when the log ended (or
    /// failed) before reaching `last`, then the failure, if any.
    fn finish(&mut self, failure: Option<(&str, &str)>) -> Vec<u8> {
        if self.held.is_some() {
            self.summarise(None);
        }
        if let Some((message, code)) = failure {
            self.replica.fail(message, code, &mut self.out);
        }
        std::mem::take(&mut self.out)
    }
}

/// How far [`state_answer`] reads a run's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upto {
    /// Up to this entry (the last one when asked), or the run's end.
    Entry(Option<EventId>),
    /// To the run's end.
    End,
}

/// The run as its client was told it, as the client dialect's encoder
/// answers a request about it (`Encoder::state_answer`), built from the
/// logged steps (the client's bytes are never decoded) with `reply_to`
/// (the asking request's). Reads for at most `within`; the answer is then
/// the run as far as it was read. `Ok(None)`: the dialect has no such
/// answer.
pub async fn state_answer(
    runs: &Arc<dyn RunLog>,
    run_id: &str,
    dialect: Dialect,
    reply_to: Option<serde_json::Value>,
    upto: Upto,
    within: Duration,
) -> Result<Option<serde_json::Value>, babelgate_store::StoreError> {
    let mut replica = Replica::new(dialect, false, reply_to);
    // The run's id even when it logged nothing yet (its first step, the
    // live encoder's context, replaces this).
    replica.begin(&Setup::of(&EncodeContext {
        run_id: Some(run_id.to_string()),
        ..EncodeContext::default()
    }));
    let last = match upto {
        // A running run with no entry yet: nothing to read (the read would
        // wait for its first).
        Upto::Entry(None) => return Ok(replica.encoder.state_answer()),
        Upto::Entry(Some(last)) => Some(last),
        Upto::End => None,
    };
    let mut log = runs.read(run_id, None);
    let read = async {
        while let Some(item) = log.next().await {
            match item? {
                LogItem::Event { id, core, .. } => {
                    replica.observe(&read_steps(core.as_ref()));
                    replica.written.clear();
                    if last.is_some_and(|l| id >= l) {
                        break;
                    }
                }
                LogItem::Truncated => {}
                LogItem::End(_) | LogItem::Lost => break,
            }
        }
        Ok::<(), babelgate_store::StoreError>(())
    };
    if let Ok(r) = tokio::time::timeout(within, read).await {
        r?;
    }
    Ok(replica.encoder.state_answer())
}

/// What a client without `Last-Event-ID` gets first: the run's start, a
/// messages snapshot (the run's input and what is complete so far), then the
/// items still open, re-opened with what they hold, all built from the
/// logged core events and shaped by the same stage as a live stream, then
/// written by `replica`'s encoder (which goes on observing the tail). A run
/// that already ended gets its end as it got it live. `tag`: the id the
/// summary covers, put on its last event (the sink says where that starts),
/// so that a later reconnect with `Last-Event-ID` continues after it.
fn snapshot(
    replica: &mut Replica,
    input: &[Message],
    entries: &[Logged],
    tag: Option<EventId>,
    out: &mut Vec<u8>,
) {
    let steps: Vec<Step> = entries
        .iter()
        .flat_map(|e| read_steps(e.core.as_ref()))
        .collect();
    if let Some(Step::Begin(setup)) = steps.first() {
        replica.begin(setup);
    }
    let end = steps.iter().find(|s| s.ends()).cloned();
    let events: Vec<&Event> = steps
        .iter()
        .take_while(|s| !s.ends())
        .filter_map(|s| match s {
            Step::Event(ev) => Some(ev.as_ref()),
            _ => None,
        })
        .collect();
    let mut tracker = OpenTracker::default();
    let mut split = events.len();
    let mut open_since: Vec<(usize, String)> = Vec::new();
    for (i, ev) in events.iter().enumerate() {
        tracker.observe(ev);
        if let Some(id) = item_start(&ev.kind) {
            open_since.push((i, id));
        }
        open_since.retain(|(_, id)| {
            tracker.text_open(id) || tracker.tool_call_open(id) || tracker.reasoning_open(id)
        });
    }
    if let Some((i, _)) = open_since.first() {
        split = *i;
    }
    let (done, open) = events.split_at(split);
    let mut assembler = MessageAssembler::new(None);
    for ev in done {
        assembler.observe(ev);
    }
    let mut messages = input.to_vec();
    messages.extend(assembler.finish());

    let mut summary: Vec<Event> = Vec::new();
    if let Some(start) = done
        .iter()
        .find(|e| matches!(e.kind, EventKind::RunStarted { .. }))
    {
        summary.push((*start).clone());
    }
    summary.push(Event::new(EventKind::MessagesSnapshot { messages }));
    summary.extend(
        open.iter()
            .filter(|e| !matches!(e.kind, EventKind::RunStarted { .. }))
            .map(|e| (*e).clone()),
    );
    // A run that ended says so (only events before its end are open).
    if let Some(end) = done.iter().rev().find(|e| e.kind.is_terminal()) {
        summary.push((*end).clone());
    }
    let mut shaper = Shaper::new();
    let mut shaped = Vec::new();
    for ev in &summary {
        shaper.push(ev, &mut shaped);
    }
    // The tail goes on as it was sent: a message it continues must be open
    // even when nothing was said in it yet (the stage holds a start until
    // its first content).
    let (mut wanted, mut given) = (OpenTracker::default(), OpenTracker::default());
    summary.iter().for_each(|e| wanted.observe(e));
    shaped.iter().for_each(|e| given.observe(e));
    for ev in &summary {
        if let EventKind::TextStart { message_id, .. } = &ev.kind {
            if wanted.text_open(message_id) && !given.text_open(message_id) {
                given.observe(ev);
                shaped.push(ev.clone());
            }
        }
    }
    let mut sink = Sink::new(Framing::stream(replica.binary));
    for ev in &shaped {
        replica.encoder.encode_to(ev, &mut sink);
    }
    // No `finish` otherwise: the live tail continues the run.
    if let Some(step) = end {
        step.replay(replica.encoder.as_mut(), &mut sink);
        replica.ended = true;
    }
    let (bytes, spans) = sink.take();
    tagged(&bytes, &spans, tag.filter(|_| !replica.binary), out);
}

/// `bytes` to `out`, the last event of `spans` with the id `tag` (SSE).
fn tagged(bytes: &[u8], spans: &[babelgate_core::Span], tag: Option<EventId>, out: &mut Vec<u8>) {
    let last = spans
        .iter()
        .rev()
        .find(|s| s.kind == SpanKind::Event)
        .map(|s| s.range.clone());
    match (tag, last) {
        (Some(id), Some(last)) => {
            out.extend_from_slice(bytes.get(..last.start).unwrap_or_default());
            with_id(id, bytes.get(last.start..).unwrap_or_default(), out);
        }
        _ => out.extend_from_slice(bytes),
    }
}

fn item_start(kind: &EventKind) -> Option<String> {
    match kind {
        EventKind::TextStart { message_id, .. } => Some(message_id.clone()),
        EventKind::ToolCallStart { tool_call_id, .. } => Some(tool_call_id.clone()),
        EventKind::ReasoningStart { message_id, .. } => Some(message_id.clone()),
        _ => None,
    }
}

/// A writer of run `r1` on `log`, its lease a minute (the tests' recorders).
#[cfg(test)]
pub(crate) async fn test_writer(log: &Arc<dyn RunLog>) -> RunWriter {
    let leases = babelgate_store::Leases::new(log.clone());
    let (writer, _) = RunWriter::begin(&leases, "k", "r1", "me", Duration::from_secs(60))
        .await
        .expect("the run begins");
    writer
}

#[cfg(test)]
mod tests {
    use super::*;
    use babelgate_core::journal::Noted;

    fn step(delta: &str) -> Step {
        Step::Event(Box::new(Event::new(EventKind::TextDelta {
            message_id: "m".into(),
            delta: delta.into(),
        })))
    }

    #[test]
    fn id_lines_follow_each_id_across_milliseconds() {
        let mut lines = IdLines::default();
        let mut out = Vec::new();
        let ids = [
            (1_764_000_000_123, 0),
            (1_764_000_000_123, 17),
            (1_764_000_000_124, 5),
            (7, 123_456),
        ];
        for (ms, seq) in ids {
            lines.write(EventId::new(ms, seq), b"data: x\n\n", &mut out);
        }
        let want: String = ids
            .iter()
            .map(|(ms, seq)| format!("id: {ms}-{seq}\ndata: x\n\n"))
            .collect();
        assert_eq!(String::from_utf8(out).unwrap(), want);
        let (mut one, max) = (Vec::new(), EventId::new(u64::MAX, u64::MAX));
        with_id(max, b"", &mut one);
        assert_eq!(one, format!("id: {max}\n").into_bytes());
    }

    #[tokio::test]
    async fn recorded_events_get_the_ids_of_their_log_entries() {
        use babelgate_store::{MemoryConfig, MemoryRunLog};
        let log: Arc<dyn RunLog> = Arc::new(MemoryRunLog::new(&MemoryConfig::default()));
        let mut rec = Recorder::new(test_writer(&log).await, Duration::from_secs(1));
        let mut client = Vec::new();
        let mut sink = Sink::new(Framing::Sse);
        sink.data("1");
        sink.comment("ping");
        sink.data("2");
        // a step of the first event, one noted at the comment (it goes with
        // the next event), one after every event (an entry of its own)
        let mut noted = Journal::of(&[
            Noted {
                step: step("a"),
                span: 0,
            },
            Noted {
                step: step("b"),
                span: 1,
            },
            Noted {
                step: step("c"),
                span: 3,
            },
        ]);
        rec.record(&sink, &mut noted, &mut client).await;
        assert!(noted.is_empty());
        sink.clear();
        sink.comment("ping");
        rec.record(&sink, &mut Journal::default(), &mut client)
            .await;
        sink.clear();
        sink.data("3");
        rec.record(&sink, &mut Journal::default(), &mut client)
            .await;
        let mut logged = Vec::new();
        let mut read = log.read("r1", None);
        while logged.len() < 4 {
            match read.next().await {
                Some(Ok(LogItem::Event { id, data, core })) => {
                    logged.push((id, data, read_steps(core.as_ref())))
                }
                Some(Ok(_)) => {}
                other => panic!("read: {other:?}"),
            }
        }
        // the comments are not logged and carry no id; each event carries
        // the id of its own entry; the core-only entry is not sent
        let [(a, d1, c1), (b, d2, c2), (_, d3, c3), (c, d4, c4)] = &logged[..] else {
            unreachable!()
        };
        assert_eq!(
            [&d1[..], &d2[..], &d3[..], &d4[..]],
            [&b"data: 1\n\n"[..], b"data: 2\n\n", b"", b"data: 3\n\n"]
        );
        assert_eq!(
            [c1, c2, c3, c4],
            [
                &vec![step("a")],
                &vec![step("b")],
                &vec![step("c")],
                &vec![]
            ]
        );
        let want = format!(
            "id: {a}\ndata: 1\n\n: ping\n\nid: {b}\ndata: 2\n\n: ping\n\nid: {c}\ndata: 3\n\n"
        );
        assert_eq!(String::from_utf8(client).unwrap(), want);
        // once the log fails (here: the run ended), events go out without ids
        log.end("r1", RunOutcome::Completed, Duration::from_secs(1))
            .await
            .unwrap();
        let mut client = Vec::new();
        sink.clear();
        sink.data("4");
        sink.data("5");
        rec.record(&sink, &mut Journal::default(), &mut client)
            .await;
        assert_eq!(client, b"data: 4\n\ndata: 5\n\n");
    }

    /// Steps handed over out of the output's order still go with their
    /// events, in the order they were noted within each.
    #[tokio::test]
    async fn steps_out_of_order_go_with_their_events() {
        use babelgate_store::{MemoryConfig, MemoryRunLog};
        let log: Arc<dyn RunLog> = Arc::new(MemoryRunLog::new(&MemoryConfig::default()));
        let mut rec = Recorder::new(test_writer(&log).await, Duration::from_secs(1));
        let mut sink = Sink::new(Framing::Sse);
        sink.data("1");
        sink.data("2");
        let noted = |d: &str, span| Noted {
            step: step(d),
            span,
        };
        let mut steps = Journal::of(&[
            noted("after", 2),
            noted("b1", 1),
            noted("a1", 0),
            noted("b2", 1),
            noted("a2", 0),
        ]);
        rec.record(&sink, &mut steps, &mut Vec::new()).await;
        let mut read = log.read("r1", None);
        let mut cores = Vec::new();
        while cores.len() < 3 {
            match read.next().await {
                Some(Ok(LogItem::Event { core, .. })) => cores.push(read_steps(core.as_ref())),
                other => panic!("read: {other:?}"),
            }
        }
        assert_eq!(
            cores,
            [
                vec![step("a1"), step("a2")],
                vec![step("b1"), step("b2")],
                vec![step("after")]
            ]
        );
    }

    #[test]
    fn the_snapshot_s_last_event_gets_the_id() {
        let open = [Logged {
            id: EventId::new(5, 1),
            data: Bytes::from_static(b"data: x\n\n"),
            core: {
                let mut core = Vec::new();
                babelgate_core::journal::write_log_steps(&[step("hi")], &mut core).unwrap();
                Some(Bytes::from(core))
            },
        }];
        for dialect in [Dialect::AgUi, Dialect::Hai] {
            let mut out = Vec::new();
            let mut replica = Replica::new(dialect, false, None);
            snapshot(&mut replica, &[], &open, Some(EventId::new(5, 1)), &mut out);
            let text = String::from_utf8(out).unwrap();
            let evs: Vec<&str> = text.trim_end().split("\n\n").collect();
            assert!(evs.len() >= 2, "{text}");
            assert!(evs.last().unwrap().starts_with("id: 5-1\n"), "{text}");
            assert_eq!(text.matches("id: ").count(), 1, "{text}");
            assert!(text.contains("hi"), "{text}");
            let mut untagged = Vec::new();
            snapshot(
                &mut Replica::new(dialect, false, None),
                &[],
                &open,
                None,
                &mut untagged,
            );
            assert!(!String::from_utf8(untagged).unwrap().contains("id: "));
        }
    }
}
