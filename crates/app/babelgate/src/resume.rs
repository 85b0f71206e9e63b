//! The run log: what a resumable stream's upstream sent, recorded as it
//! came in, and the client's stream made again from that record, on any
//! instance that shares the store. A route with `resume = false` has no
//! log: none of this runs for its streams.
//!
//! The record of a run is, in order: how its translator was built
//! ([`Begin`]: both dialects, the upstream's transport, the encoder's
//! context with its id generator), each upstream read with the time it
//! came (a read that gave the encoder nothing joined with the next, see
//! [`Recorder::made`]), and how the gateway ended the stream when it did (the upstream's
//! end, an error it raised, a translation that panicked): one entry each
//! ([`Came`]). A follower builds the same translator and feeds it the same
//! entries, so the decoder, the shape stage and the client's encoder run
//! again with the live stream's ids (the setup's generator) and times (each
//! read's, `Encoder::set_now`), and write the live stream's events again,
//! in the follower's transport. The live stream pays one copy of each read
//! and one store call; the per-event work of logging what went out (its
//! bytes, an entry and an id per event, the core steps' JSON) is gone, and
//! a follower pays the translation instead (`docs/benchmarks.md`, issue 43).
//!
//! Ids: the client's events are numbered through the run, from 1; the SSE
//! `id:` of the n-th is `<first>-<n>`, `<first>` the id of the record's
//! first entry, so that a later run's ids are greater and an id left over
//! from an earlier run replays this one whole. A follower translates the
//! record from its start and sends the events numbered after the client's.
//!
//! Versions: the record names the gateway version that wrote it. A
//! follower of another version might number or write the events otherwise,
//! so it sends nothing after an id of this run: it answers
//! `resume_version` (the client comes back without an id, for a snapshot or
//! the run from its start, both made whole by one version). The store keys
//! name the record's form (`run2`), so an instance of the form before (which
//! logged the client's events) never reads a record, nor this one its logs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use babelgate_core::assemble::MessageAssembler;
use babelgate_core::journal::{Setup, Step};
use babelgate_core::request::Message;
use babelgate_core::sse::DEFAULT_MAX_EVENT_BYTES;
use babelgate_core::track::OpenTracker;
use babelgate_core::{
    Dialect, EncodeContext, Encoder, Event, EventKind, Framing, Shaper, Sink, Span, SpanKind,
    Translator,
};
use babelgate_store::{EventId, LogItem, Part, RunLog, RunOutcome, RunWriter};
use bytes::Bytes;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::registry;
use crate::transport::{self, Read, Transport};

/// The gateway version a record names: the package's, the record's form,
/// and a fingerprint of the sources of the translation (`build.rs`). A
/// follower of another one does not continue after an id of it (see the
/// module's documentation).
pub const RECORD_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "/record-1/",
    env!("BABELGATE_TRANSLATION")
);

/// How a run's translator was built: the record's first entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Begin {
    /// The gateway version that wrote the record ([`RECORD_VERSION`]).
    pub version: String,
    pub from: Dialect,
    pub to: Dialect,
    /// The upstream answered in its dialect's binary transport.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub upstream_binary: bool,
    /// The encoder's context as the stream began (its ids included).
    pub setup: Setup,
}

impl Begin {
    pub fn new(from: Dialect, to: Dialect, upstream_binary: bool, setup: Setup) -> Self {
        Begin {
            version: RECORD_VERSION.to_string(),
            from,
            to,
            upstream_binary,
            setup,
        }
    }

    /// The encoder's context for a client of `transport`, answering
    /// `reply_to` (a resuming request's own) or the run's.
    fn context(&self, transport: Transport, reply_to: Option<&serde_json::Value>) -> EncodeContext {
        let mut ctx = self.setup.context();
        ctx.binary = is_binary(transport);
        if let Some(r) = reply_to {
            ctx.reply_to = Some(r.clone());
        }
        ctx
    }

    /// The translator the live stream had, writing `transport`.
    fn translator(&self, transport: Transport, reply_to: Option<&serde_json::Value>) -> Translator {
        let upstream = match self.upstream_binary {
            true => Transport::proto_for(&registry::policy(self.from)).unwrap_or(Transport::Sse),
            false => Transport::Sse,
        };
        transport::translator(
            self.from,
            self.to,
            self.context(transport, reply_to),
            DEFAULT_MAX_EVENT_BYTES,
            upstream,
            (transport, false),
        )
    }
}

fn is_binary(transport: Transport) -> bool {
    matches!(transport, Transport::Proto(_))
}

/// What one entry of a record says came in. Its core part is the kind's
/// letter, then (but for `Begin`) the time in ms, then for `Fail` a space
/// and JSON; the entry's data is what was read.
#[derive(Debug, Clone, PartialEq)]
enum Came {
    /// `S` and the JSON [`Begin`]: the first entry.
    Begin(Box<Begin>),
    /// `B<ms>`: an upstream read, the data its bytes.
    Read(i64),
    /// `M<ms>`: the messages of a message transport (a WebSocket's) read
    /// at once, each after its length (4 bytes, little-endian).
    Messages(i64),
    /// `E<ms>`: the upstream's stream ended.
    Finish(i64),
    /// `F<ms> {"message":...,"code":...}`: the gateway ended the stream
    /// with the client dialect's error.
    Fail(i64, Box<Failure>),
    /// `X<ms>`: the translation panicked (the stream ends with `internal`).
    Internal(i64),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Failure {
    message: String,
    code: String,
}

impl Came {
    fn parse(core: &[u8]) -> Option<Came> {
        let (&kind, rest) = core.split_first()?;
        if kind == b'S' {
            return serde_json::from_slice(rest).ok().map(Came::Begin);
        }
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        let (ms, rest) = rest.split_at(digits);
        let ms: i64 = std::str::from_utf8(ms).ok()?.parse().ok()?;
        Some(match (kind, rest) {
            (b'B', []) => Came::Read(ms),
            (b'M', []) => Came::Messages(ms),
            (b'E', []) => Came::Finish(ms),
            (b'X', []) => Came::Internal(ms),
            (b'F', [b' ', json @ ..]) => Came::Fail(ms, serde_json::from_slice(json).ok()?),
            _ => return None,
        })
    }
}

/// The messages of a `Messages` entry's data (a cut one ends them).
fn messages(mut data: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        let (len, rest) = data.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len) as usize;
        let message = rest.get(..len)?;
        data = rest.get(len..).unwrap_or_default();
        Some(message)
    })
}

/// A read whose entry is open: its data is `pending[start..]`.
#[derive(Debug, Clone, Copy)]
struct Open {
    start: usize,
    kind: u8,
    ms: i64,
}

/// At most this many bytes of reads that gave the encoder nothing are
/// joined in one entry.
pub const MAX_OPEN_BYTES: usize = 64 << 10;

/// The writing side of one run's record, owned by the stream's pump: it
/// notes what came in (`read`, then whether it `made` anything; `finish`,
/// `fail`, `internal`), appends it before the client gets what it made
/// (`flush`, one store call for what is noted), and writes the client's
/// events with their ids (`write`).
pub struct Recorder {
    /// `None` once the store failed mid-run: the stream goes on without ids
    /// (it can no longer be resumed) rather than failing the client.
    writer: Option<RunWriter>,
    retention: Duration,
    /// The client gets the binary transport, which has no place for ids.
    binary: bool,
    /// The entries noted and not yet appended, in one buffer, and where
    /// each lies in it: handed to the store whole (no copy), so empty
    /// between reads.
    pending: Vec<u8>,
    parts: Vec<Part>,
    /// The last read, while its entry is open (at the end of `pending`).
    open: Option<Open>,
    /// `id: <first entry's id>-`, once that entry is in the store.
    id_prefix: Vec<u8>,
    /// The client's events written so far (the last one's number).
    written: u64,
}

impl Recorder {
    /// Begins the record with how the translator was built (appended with
    /// the first read).
    pub fn new(writer: RunWriter, retention: Duration, begin: &Begin) -> Self {
        let mut rec = Recorder {
            writer: Some(writer),
            retention,
            binary: false,
            pending: Vec::new(),
            parts: Vec::new(),
            open: None,
            id_prefix: Vec::new(),
            written: 0,
        };
        match serde_json::to_vec(begin) {
            Ok(json) => rec.note(b'S', None, &json),
            // A setup is plain data; should it not serialize, no record
            // at all rather than one no follower can read.
            Err(e) => {
                tracing::warn!(error = %e, "could not record the run's setup: this stream cannot be resumed");
                rec.writer = None;
            }
        }
        rec
    }

    /// The client gets the binary transport: its events go without ids.
    pub fn binary(&mut self) {
        self.binary = true;
    }

    /// Notes an entry of no data: its core part (`kind`, the time,
    /// `tail`), sized exactly, after the open read's entry.
    fn note(&mut self, kind: u8, ms: Option<i64>, tail: &[u8]) {
        if self.writer.is_none() {
            return;
        }
        self.close();
        let mut num = itoa::Buffer::new();
        let ms = ms.map_or(&b""[..], |ms| num.format(ms).as_bytes());
        self.pending.reserve_exact(1 + ms.len() + tail.len());
        let start = self.pending.len();
        self.pending.push(kind);
        self.pending.extend_from_slice(ms);
        self.pending.extend_from_slice(tail);
        self.part(start, start);
    }

    /// The entry `start..` of `pending`, its core part from `split`.
    fn part(&mut self, start: usize, split: usize) {
        let at = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        self.parts.push(Part {
            start: at(start),
            split: at(split),
            end: at(self.pending.len()),
            has_core: true,
        });
    }

    /// An upstream read, at `ms`: it joins the open read's entry, if any
    /// (see [`made`](Self::made)).
    pub fn read(&mut self, read: &Read, ms: i64) {
        if self.writer.is_none() {
            return;
        }
        let kind = match read {
            Read::Bytes(_) => b'B',
            Read::Messages(_) => b'M',
        };
        match &mut self.open {
            Some(open) if open.kind == kind => open.ms = ms,
            _ => {
                self.close();
                self.open = Some(Open {
                    start: self.pending.len(),
                    kind,
                    ms,
                });
            }
        }
        // Exact for the usual entry, one read and its header (the letter
        // and the time's digits), so that handing it over copies nothing;
        // a joined one grows as a vector does, and is made exact once, as
        // it is handed over.
        let messages = match read {
            Read::Bytes(_) => 0,
            Read::Messages(m) => m.len(),
        };
        let header = 1 + itoa::Buffer::new().format(ms).len();
        self.pending.reserve(read.len() + 4 * messages + header);
        match read {
            Read::Bytes(b) => self.pending.extend_from_slice(b),
            Read::Messages(m) => {
                for m in m {
                    let len = u32::try_from(m.len()).unwrap_or(u32::MAX);
                    self.pending.extend_from_slice(&len.to_le_bytes());
                    self.pending.extend_from_slice(m);
                }
            }
        }
    }

    /// Whether the read just noted gave the encoder anything (an event, or
    /// the error of one it could not read): then its entry is closed.
    /// Otherwise (a part of an event, a comment) the next read joins it,
    /// and the entry takes the later time: only an encoder reads the time,
    /// and none ran on what it holds, so a replay makes the same bytes, and
    /// an upstream that sends an event in many small reads makes one entry
    /// of them, not one each (at most [`MAX_OPEN_BYTES`] are joined).
    pub fn made(&mut self, made: bool) {
        let held = self.open.map_or(0, |o| self.pending.len() - o.start);
        if made || held >= MAX_OPEN_BYTES {
            self.close();
        }
    }

    /// Closes the open read's entry: its header after its data.
    fn close(&mut self) {
        if let Some(open) = self.open.take() {
            let split = self.pending.len();
            let mut num = itoa::Buffer::new();
            self.pending.push(open.kind);
            self.pending
                .extend_from_slice(num.format(open.ms).as_bytes());
            self.part(open.start, split);
        }
    }

    /// The upstream's stream ended.
    pub fn finish(&mut self, ms: i64) {
        self.note(b'E', Some(ms), b"");
    }

    /// The gateway ends the stream with the client dialect's error.
    pub fn fail(&mut self, message: &str, code: &str, ms: i64) {
        let failure = Failure {
            message: message.to_string(),
            code: code.to_string(),
        };
        let mut tail = vec![b' '];
        if serde_json::to_writer(&mut tail, &failure).is_ok() {
            self.note(b'F', Some(ms), &tail);
        }
    }

    /// The translation panicked.
    pub fn internal(&mut self, ms: i64) {
        self.note(b'X', Some(ms), b"");
    }

    /// Appends the closed entries: called before the client gets what they
    /// made. An open read stays for the next.
    pub async fn flush(&mut self) {
        if self.parts.is_empty() {
            return;
        }
        let Some(writer) = self.writer.as_ref() else {
            self.parts.clear();
            self.pending = Vec::new();
            self.open = None;
            return;
        };
        let rest = match &mut self.open {
            Some(open) => {
                let rest = self.pending.split_off(open.start);
                open.start = 0;
                rest
            }
            None => Vec::new(),
        };
        let mut chunk = std::mem::replace(&mut self.pending, rest);
        // The store keeps it as long as the run: no spare room.
        chunk.shrink_to_fit();
        let both = Bytes::from(chunk);
        // Made per append: a vector kept for it would take the pump past
        // its size class (`the_pump_fits_its_size_class`).
        let mut ids = Vec::with_capacity(self.parts.len());
        let appended = writer.append_chunk(both, &self.parts, &mut ids).await;
        self.parts.clear();
        match appended {
            Ok(()) if self.id_prefix.is_empty() => {
                if let Some(first) = ids.first() {
                    self.id_prefix = format!("id: {first}-").into_bytes();
                }
            }
            Ok(()) => {}
            Err(e) => {
                tracing::warn!(run = %writer.run_id(), error = %e, "run log unavailable: this stream can no longer be resumed");
                self.writer = None;
            }
        }
    }

    /// `out`'s bytes to `client`, each event after its `id:` line (none in
    /// the binary transport, nor once the log failed); comments as they are.
    pub fn write(&mut self, out: &Sink, client: &mut Vec<u8>) {
        let ids = (self.writer.is_some() && !self.binary).then_some(&self.id_prefix[..]);
        (self.written, _) =
            write_numbered(out.bytes(), out.spans(), (self.written, 0), ids, client);
    }

    /// Counts `out`'s events as written, for a client whose events carry
    /// no ids (messages, or an answer sent at the end).
    pub fn count(&mut self, out: &Sink) {
        self.written += event_count(out.spans());
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

    /// Appends what is noted and ends the record.
    pub async fn end(&mut self, outcome: RunOutcome) {
        self.close();
        self.flush().await;
        if let Some(w) = self.writer.take() {
            let run = w.run_id().to_string();
            if let Err(e) = w.end(outcome, self.retention).await {
                tracing::warn!(%run, error = %e, "could not end the run log");
            }
        }
    }
}

fn event_count(spans: &[Span]) -> u64 {
    spans.iter().filter(|s| s.kind == SpanKind::Event).count() as u64
}

/// `bytes` to `out`, each event of `spans` numbered on from `written` and,
/// with `ids` (`id: <first>-`), after its `id:` line; events numbered up to
/// `skip` left out (the client has them); the rest as it is. The number of
/// the last event, and how many were written.
fn write_numbered(
    bytes: &[u8],
    spans: &[Span],
    (mut written, skip): (u64, u64),
    ids: Option<&[u8]>,
    out: &mut Vec<u8>,
) -> (u64, u64) {
    let ids = ids.filter(|p| !p.is_empty());
    // An `id:` line is at most 4 + 2 * 20 + 2 + 20 + 1 bytes.
    out.reserve(bytes.len() + ids.map_or(0, |_| 64 * spans.len()));
    let mut num = itoa::Buffer::new();
    let (mut at, mut sent) = (0, 0);
    for span in spans {
        out.extend_from_slice(bytes.get(at..span.range.start).unwrap_or_default());
        at = span.range.end;
        if span.kind == SpanKind::Event {
            written += 1;
            if written <= skip {
                continue;
            }
            sent += 1;
            if let Some(prefix) = ids {
                out.extend_from_slice(prefix);
                out.extend_from_slice(num.format(written).as_bytes());
                out.push(b'\n');
            }
        }
        out.extend_from_slice(bytes.get(span.range.clone()).unwrap_or_default());
    }
    out.extend_from_slice(bytes.get(at..).unwrap_or_default());
    (written, sent)
}

/// A client's `Last-Event-ID`: `<first>-<n>`, the n-th event of the run
/// whose record began with entry `<first>`. A two-part id (`<ms>-<seq>`, of
/// the log's form before) stands for all of the run it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientId {
    pub run: EventId,
    pub n: u64,
}

impl std::str::FromStr for ClientId {
    type Err = babelgate_store::InvalidEventId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let bad = || babelgate_store::InvalidEventId(s.to_string());
        match s.splitn(3, '-').collect::<Vec<_>>()[..] {
            [ms, seq, n] if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                Ok(ClientId {
                    run: format!("{ms}-{seq}").parse()?,
                    n: n.parse().map_err(|_| bad())?,
                })
            }
            [_, _, _] => Err(bad()),
            _ => Ok(ClientId {
                run: s.parse()?,
                n: u64::MAX,
            }),
        }
    }
}

impl std::fmt::Display for ClientId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.run, self.n)
    }
}

/// The resumed streams one instance follows, counted against
/// `[store] max_followers`: each holds a reader of the store (with Redis, a
/// connection of its own), a translator, and, while it builds a snapshot,
/// up to `max_snapshot_bytes` of the run's core events.
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

/// Why a follower cannot go on with a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    /// An entry it cannot read, or a record without its `Begin`.
    Unreadable,
    /// Written by another gateway version, and the client has part of it.
    Version,
}

impl Refused {
    fn error(self) -> (&'static str, &'static str) {
        match self {
            Refused::Unreadable => ("the run's log cannot be read", "resume_unreadable"),
            Refused::Version => (
                "the run was recorded by another gateway version: reconnect without Last-Event-ID",
                "resume_version",
            ),
        }
    }
}

/// The client's stream made again from a record, entry by entry.
struct Replay {
    dialect: Dialect,
    transport: Transport,
    reply_to: Option<serde_json::Value>,
    /// Built from the record's `Begin`; before it, one of the client's
    /// dialect on both sides, for an error only.
    translator: Translator,
    begin: Option<Box<Begin>>,
    /// What the last entry made for the client.
    out: Sink,
    /// The client's stream has its end (finish or failure).
    ended: bool,
    /// The client's events made before `out`'s (the live numbering).
    written: u64,
    /// The id of the record's first entry.
    first: Option<EventId>,
    /// `id: <first>-`, for an SSE client, once the first entry is read.
    id_prefix: Vec<u8>,
    /// The translator notes the core events it encodes (for a snapshot).
    keep_steps: bool,
}

impl Replay {
    fn new(
        dialect: Dialect,
        transport: Transport,
        reply_to: Option<serde_json::Value>,
        ctx: EncodeContext,
    ) -> Self {
        // (`transport::translator` makes it write the client's transport.)
        let mut ctx = ctx;
        ctx.reply_to.clone_from(&reply_to);
        let translator = transport::translator(
            dialect,
            dialect,
            ctx,
            DEFAULT_MAX_EVENT_BYTES,
            Transport::Sse,
            (transport, false),
        );
        Replay {
            dialect,
            transport,
            reply_to,
            translator,
            begin: None,
            out: Sink::new(Framing::stream(is_binary(transport))),
            ended: false,
            written: 0,
            first: None,
            id_prefix: Vec::new(),
            keep_steps: false,
        }
    }

    /// Feeds one entry; what it made for the client is in `out` (the
    /// caller takes it, then calls [`next`](Self::next)).
    fn entry(&mut self, id: EventId, data: &[u8], core: Option<&[u8]>) -> Result<(), Refused> {
        let came = core.and_then(Came::parse).ok_or(Refused::Unreadable)?;
        let (t, out) = (&mut self.translator, &mut self.out);
        let stepped = match came {
            Came::Begin(begin) if self.first.is_none() => {
                self.first = Some(id);
                if !is_binary(self.transport) {
                    self.id_prefix = format!("id: {id}-").into_bytes();
                }
                *t = begin.translator(self.transport, self.reply_to.as_ref());
                if self.keep_steps {
                    t.keep_journal();
                }
                self.begin = Some(begin);
                return Ok(());
            }
            _ if self.first.is_none() => return Err(Refused::Unreadable),
            Came::Begin(_) => return Err(Refused::Unreadable),
            Came::Read(ms) => {
                t.set_now(ms);
                transport::guarded(t, out, |t, out| t.push_to(data, out).is_ok())
            }
            Came::Messages(ms) => {
                t.set_now(ms);
                transport::guarded(t, out, |t, out| {
                    messages(data)
                        .try_for_each(|m| t.push_message_to(m, out))
                        .is_ok()
                })
            }
            Came::Finish(ms) => {
                t.set_now(ms);
                transport::guarded(t, out, |t, out| t.finish_live_to(out)).map(|_| false)
            }
            Came::Fail(ms, f) => {
                t.set_now(ms);
                if !self.ended {
                    t.fail_to(&f.message, Some(&f.code), out);
                }
                Some(false)
            }
            Came::Internal(_) => {
                if !self.ended {
                    t.fail_to(transport::INTERNAL.0, Some(transport::INTERNAL.1), out);
                }
                Some(false)
            }
        };
        // `Some(true)`: the stream goes on; a translation error, an end or
        // a panic (`None`) ended it, as live.
        if stepped != Some(true) {
            self.ended = true;
        }
        Ok(())
    }

    /// After `out` was taken: its events are counted as made.
    fn next(&mut self) {
        self.written += event_count(self.out.spans());
        self.out.clear();
    }

    /// Ends the client's stream with the dialect's error, after closing
    /// what it has open; nothing when it has ended already.
    fn fail(&mut self, message: &str, code: &str, out: &mut Vec<u8>) {
        if !self.ended {
            self.ended = true;
            let framing = Framing::stream(self.binary());
            let t = &mut self.translator;
            Sink::appending(out, framing, |sink| t.fail_to(message, Some(code), sink));
        }
    }

    /// A fresh encoder of the client's, as the live one began (for a
    /// snapshot, written before the tail the translator goes on with).
    fn summary_encoder(&self) -> Box<dyn Encoder> {
        let ctx = match &self.begin {
            Some(b) => b.context(self.transport, self.reply_to.as_ref()),
            None => EncodeContext {
                binary: self.binary(),
                reply_to: self.reply_to.clone(),
                ..EncodeContext::default()
            },
        };
        registry::encoder(self.dialect, ctx)
    }

    fn binary(&self) -> bool {
        is_binary(self.transport)
    }
}

/// How a reconnecting client is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every event after this id (`Last-Event-ID`); `None`: from the start
    /// (Vercel's resume, AG-Kit).
    After(Option<ClientId>),
    /// A snapshot of the messages so far, open items re-opened, then the
    /// tail (AG-UI and HAI without `Last-Event-ID`).
    Snapshot,
}

/// A reconnecting client's view of a run.
pub struct Follow {
    pub runs: Arc<dyn RunLog>,
    pub run_id: String,
    /// The client's dialect.
    pub dialect: Dialect,
    pub mode: Mode,
    /// Snapshot mode: the log's last id when the client came back.
    pub last: Option<EventId>,
    /// Snapshot mode: the run's input, first in the snapshot.
    pub input: Vec<Message>,
    /// Snapshot mode: at most this many bytes of the run's core events are
    /// held to build the snapshot; past it the run is sent whole instead.
    pub max_snapshot_bytes: usize,
    /// Held for as long as the client is followed.
    pub slot: FollowerSlot,
    /// Set before the end when the run failed and the dialect shows that
    /// only as a body that breaks off (`Encoder::aborts`), as live.
    pub abort: Arc<std::sync::atomic::AtomicBool>,
    /// The resuming client's transport (the live client's may differ).
    pub transport: Transport,
    /// Counts the run's events sent to this client (re-sent, or summed up
    /// in its snapshot).
    pub replayed: prometheus_client::metrics::counter::Counter,
    /// This stream's count in `requests_total`, made as it ends.
    pub counted: crate::metrics::CountAtEnd,
    /// What the resuming request asked its answers to carry, when it has
    /// its own (`None`: the run's).
    pub reply_to: Option<serde_json::Value>,
}

/// How one pass over the log ended.
enum Pass {
    /// The stream is over: its failure, if any.
    Done(Option<(&'static str, &'static str)>),
    /// The client went away.
    Gone,
    /// The snapshot would hold more than its bound: read again, sending
    /// the run whole.
    Whole,
}

impl Follow {
    /// Streams the run to the client: what it missed, then the live tail;
    /// a lost run, a broken store or shutdown ends with the dialect's
    /// error, after closing what the client has open.
    pub async fn run(self, tx: mpsc::Sender<Bytes>, shutdown: crate::shutdown::Shutdown) {
        let shutdown = shutdown.cancelled();
        tokio::pin!(shutdown);
        let mut mode = self.mode;
        let (mut tail, pass) = loop {
            let mut tail = Tail::new(&self, mode);
            match tail.pass(&self, &tx, &mut shutdown).await {
                Pass::Whole => mode = Mode::After(None),
                pass => break (tail, pass),
            }
        };
        let failure = match pass {
            Pass::Done(failure) => failure,
            Pass::Gone | Pass::Whole => {
                // The client went away again; the run is not affected.
                self.counted.ended(true);
                return;
            }
        };
        let out = tail.finish(failure);
        let gone = !out.is_empty() && tx.send(Bytes::from(out)).await.is_err();
        if tail.replay.translator.encoder().aborts() {
            self.abort.store(true, Ordering::Release);
        }
        self.counted.ended(gone);
    }
}

/// Snapshot mode: the core events made so far, until the log reaches
/// `last`, in the journal's records (what the bound counts: held as
/// written, read back once for the snapshot).
struct Held {
    records: Vec<u8>,
    last: EventId,
}

/// What a follower keeps while it reads the log: the replay, what it holds
/// for a snapshot, and the bytes to send next.
struct Tail {
    replay: Replay,
    /// `Last-Event-ID`, until the record's first entry says what it means.
    after: Option<ClientId>,
    /// The client has the run's events up to this number.
    skip: u64,
    held: Option<Held>,
    out: Vec<u8>,
    input: Vec<Message>,
    max_snapshot_bytes: usize,
    replayed: prometheus_client::metrics::counter::Counter,
}

impl Tail {
    fn new(f: &Follow, mode: Mode) -> Self {
        let mut replay = Replay::new(
            f.dialect,
            f.transport,
            f.reply_to.clone(),
            EncodeContext::default(),
        );
        let held = match (mode, f.last) {
            (Mode::Snapshot, Some(last)) => Some(Held {
                records: Vec::new(),
                last,
            }),
            _ => None,
        };
        replay.keep_steps = held.is_some();
        Tail {
            replay,
            after: match mode {
                Mode::After(after) => after,
                Mode::Snapshot => None,
            },
            skip: 0,
            held,
            out: Vec::new(),
            input: f.input.clone(),
            max_snapshot_bytes: f.max_snapshot_bytes,
            replayed: f.replayed.clone(),
        }
    }

    /// Reads the log from its start and sends what the client is to get.
    async fn pass(
        &mut self,
        f: &Follow,
        tx: &mpsc::Sender<Bytes>,
        shutdown: &mut std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
    ) -> Pass {
        let mut log = f.runs.read(&f.run_id, None);
        loop {
            let item = tokio::select! {
                item = log.next() => match item {
                    Some(item) => item,
                    None => return Pass::Done(None),
                },
                () = shutdown.as_mut() => return Pass::Done(Some(("the gateway is shutting down", "shutdown"))),
            };
            let step = match item {
                Ok(LogItem::Event { id, data, core }) => self.event(id, &data, core.as_deref()),
                Ok(LogItem::End(_)) => return Pass::Done(None),
                Ok(LogItem::Lost) => {
                    return Pass::Done(Some((
                        "the gateway instance serving this run went away",
                        "run_lost",
                    )))
                }
                // The log lost its start (its caps): the run cannot be
                // made again from it.
                Ok(LogItem::Truncated) => {
                    return Pass::Done(Some((
                        "the run's start is no longer kept",
                        "resume_truncated",
                    )))
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reading the run failed");
                    return Pass::Done(Some(("reading the run failed", "store_unavailable")));
                }
            };
            match step {
                Ok(true) => {}
                Ok(false) => return Pass::Whole,
                Err(refused) => return Pass::Done(Some(refused.error())),
            }
            if !self.out.is_empty()
                && tx
                    .send(Bytes::from(std::mem::take(&mut self.out)))
                    .await
                    .is_err()
            {
                return Pass::Gone;
            }
        }
    }

    /// One entry of the record: translated, then its events skipped (the
    /// client has them), sent, or summed up for the snapshot. `Ok(false)`:
    /// the snapshot would be over its bound.
    fn event(&mut self, id: EventId, data: &[u8], core: Option<&[u8]>) -> Result<bool, Refused> {
        let first = self.replay.first.is_none();
        self.replay.entry(id, data, core)?;
        if first {
            self.begin()?;
        }
        if let Some(h) = self.held.as_mut() {
            let mut journal = self.replay.translator.take_journal();
            h.records
                .extend_from_slice(journal.records(0, journal.marks().len()));
            journal.clear();
            self.replay.translator.give_back_journal(journal);
            self.replay.next();
            if h.records.len() > self.max_snapshot_bytes {
                return Ok(false);
            }
            if id >= h.last {
                self.summarise(true);
            }
            return Ok(true);
        }
        self.send();
        Ok(true)
    }

    /// The record's first entry is read: what the client's id means.
    fn begin(&mut self) -> Result<(), Refused> {
        let (Some(first), Some(after)) = (self.replay.first, self.after) else {
            return Ok(());
        };
        self.skip = match after.run.cmp(&first) {
            // An earlier run's id: this one whole.
            std::cmp::Ordering::Less => 0,
            std::cmp::Ordering::Equal => after.n,
            std::cmp::Ordering::Greater => u64::MAX,
        };
        let version = self.replay.begin.as_ref().map(|b| b.version.as_str());
        if self.skip > 0 && version != Some(RECORD_VERSION) {
            return Err(Refused::Version);
        }
        Ok(())
    }

    /// The events the last entry made that the client does not have, with
    /// their ids.
    fn send(&mut self) {
        let r = &mut self.replay;
        let (_, sent) = write_numbered(
            r.out.bytes(),
            r.out.spans(),
            (r.written, self.skip),
            Some(&r.id_prefix),
            &mut self.out,
        );
        self.replayed.inc_by(sent);
        r.next();
    }

    /// The snapshot of what is held, its last event with the id of the
    /// last event summed up (when `tag`).
    fn summarise(&mut self, tag: bool) {
        let Some(held) = self.held.take() else {
            return;
        };
        // The tail is sent as it is made: no more steps to note.
        self.replay.translator.stop_journal();
        let r = &mut self.replay;
        self.replayed.inc_by(r.written);
        let steps = babelgate_core::journal::read_log_steps(&held.records).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "unreadable core events in a replay");
            Vec::new()
        });
        let (events, end) = summary(&self.input, &steps);
        let mut encoder = r.summary_encoder();
        let mut sink = Sink::new(Framing::stream(r.binary()));
        for ev in &events {
            encoder.encode_to(ev, &mut sink);
        }
        // No end otherwise: the live tail continues the run.
        if let Some(step) = end {
            step.replay(encoder.as_mut(), &mut sink);
            r.ended = true;
        }
        let tag = match (tag, r.first, r.binary()) {
            (true, Some(first), false) => Some(ClientId {
                run: first,
                n: r.written,
            }),
            _ => None,
        };
        let (bytes, spans) = sink.take();
        tagged(&bytes, &spans, tag, &mut self.out);
        // The client has every event made so far.
        self.skip = r.written;
    }

    /// The last bytes: the snapshot of what is held, when the log ended (or
    /// failed) before reaching `last`, then the failure, if any.
    fn finish(&mut self, failure: Option<(&str, &str)>) -> Vec<u8> {
        if self.held.is_some() {
            self.summarise(false);
        }
        if let Some((message, code)) = failure {
            self.replay.fail(message, code, &mut self.out);
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
/// answers a request about it (`Encoder::state_answer`), made again from
/// the record with `reply_to` (the asking request's). Reads for at most
/// `within`; the answer is then the run as far as it was read. `Ok(None)`:
/// the dialect has no such answer.
pub async fn state_answer(
    runs: &Arc<dyn RunLog>,
    run_id: &str,
    dialect: Dialect,
    reply_to: Option<serde_json::Value>,
    upto: Upto,
    within: Duration,
) -> Result<Option<serde_json::Value>, babelgate_store::StoreError> {
    // The run's id even when it logged nothing yet (the record's `Begin`
    // replaces this).
    let ctx = EncodeContext {
        run_id: Some(run_id.to_string()),
        ..EncodeContext::default()
    };
    let mut replay = Replay::new(dialect, Transport::Sse, reply_to, ctx);
    let last = match upto {
        // A running run with no entry yet: nothing to read (the read would
        // wait for its first).
        Upto::Entry(None) => return Ok(replay.translator.encoder().state_answer()),
        Upto::Entry(Some(last)) => Some(last),
        Upto::End => None,
    };
    let mut log = runs.read(run_id, None);
    let read = async {
        while let Some(item) = log.next().await {
            match item? {
                LogItem::Event { id, data, core } => {
                    if let Err(refused) = replay.entry(id, &data, core.as_deref()) {
                        tracing::warn!(?refused, "a run's log cannot be read");
                        break;
                    }
                    replay.next();
                    if last.is_some_and(|l| id >= l) {
                        break;
                    }
                }
                LogItem::Truncated | LogItem::End(_) | LogItem::Lost => break,
            }
        }
        Ok::<(), babelgate_store::StoreError>(())
    };
    if let Ok(r) = tokio::time::timeout(within, read).await {
        r?;
    }
    Ok(replay.translator.encoder().state_answer())
}

/// What a client without `Last-Event-ID` gets first, from the core events
/// the replay's encoder was given (`steps`): the run's start, a messages
/// snapshot (the run's input and what is complete so far), then the items
/// still open, re-opened with what they hold, shaped by the same stage as a
/// live stream; and the end step, when the run ended (as it got it live).
fn summary(input: &[Message], steps: &[Step]) -> (Vec<Event>, Option<Step>) {
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
    (shaped, end)
}

/// `bytes` to `out`, the last event of `spans` with the id `tag` (SSE).
fn tagged(bytes: &[u8], spans: &[Span], tag: Option<ClientId>, out: &mut Vec<u8>) {
    let last = spans
        .iter()
        .rev()
        .find(|s| s.kind == SpanKind::Event)
        .map(|s| s.range.clone());
    match (tag, last) {
        (Some(id), Some(last)) => {
            out.extend_from_slice(bytes.get(..last.start).unwrap_or_default());
            out.extend_from_slice(format!("id: {id}\n").as_bytes());
            out.extend_from_slice(bytes.get(last.start..).unwrap_or_default());
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

/// What a client of `to` (SSE) that comes back to run `r1` on `log` with
/// `mode` gets (`last`: the log's last id then, for a snapshot; at most
/// 1,000 bytes of core events held for one). The tests' follower.
#[cfg(test)]
pub(crate) async fn followed(
    log: &Arc<dyn RunLog>,
    to: Dialect,
    mode: Mode,
    last: Option<EventId>,
) -> Vec<u8> {
    let metrics = Arc::new(crate::metrics::Metrics::default());
    let (tx, mut rx) = mpsc::channel(4);
    let follow = Follow {
        runs: log.clone(),
        run_id: "r1".into(),
        dialect: to,
        mode,
        last,
        input: Vec::new(),
        max_snapshot_bytes: 1000,
        slot: Arc::new(Followers::default()).enter(1).expect("a place"),
        abort: Arc::default(),
        transport: Transport::Sse,
        replayed: Default::default(),
        counted: crate::metrics::CountAtEnd::new(metrics, "/r"),
        reply_to: None,
    };
    let task = tokio::spawn(follow.run(tx, crate::shutdown::Shutdown::default()));
    let mut body = Vec::new();
    while let Some(c) = rx.recv().await {
        body.extend_from_slice(&c);
    }
    task.await.expect("the follower ends");
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use babelgate_store::{MemoryConfig, MemoryRunLog};

    const STARTED: &str = "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n";
    const TEXT: &str = "data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\n\n\
                        data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"hi\"}\n\n";
    const DONE: &str = "data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}\n\n\
                        data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n";

    /// Run `r1` of AG-UI to `to` on `log`, as the pump records it: each
    /// read noted at its time (`ms`), appended, then translated and written
    /// with ids; then the upstream's end. What the live client got.
    async fn record(log: &Arc<dyn RunLog>, to: Dialect, reads: &[(Read, i64)]) -> Vec<u8> {
        let setup = Setup::of(&EncodeContext::deterministic());
        let begin = Begin::new(Dialect::AgUi, to, false, setup.clone());
        let mut rec = Recorder::new(test_writer(log).await, Duration::from_secs(60), &begin);
        let mut t = begin.translator(Transport::Sse, None);
        let (mut out, mut client) = (Sink::new(Framing::Sse), Vec::new());
        for (read, ms) in reads {
            rec.read(read, *ms);
            t.set_now(*ms);
            let before = t.events_translated;
            read.push_to(&mut t, &mut out).unwrap();
            rec.made(t.events_translated != before);
            rec.flush().await;
            rec.write(&out, &mut client);
            out.clear();
        }
        rec.finish(9);
        t.set_now(9);
        t.finish_live_to(&mut out).unwrap();
        rec.flush().await;
        rec.write(&out, &mut client);
        rec.end(RunOutcome::Completed).await;
        client
    }

    fn bytes(s: &str) -> Read {
        Read::Bytes(Bytes::copy_from_slice(s.as_bytes()))
    }

    async fn follow(
        log: &Arc<dyn RunLog>,
        to: Dialect,
        mode: Mode,
        last: Option<EventId>,
    ) -> String {
        String::from_utf8(followed(log, to, mode, last).await).unwrap()
    }

    fn memory() -> Arc<dyn RunLog> {
        Arc::new(MemoryRunLog::new(&MemoryConfig::default()))
    }

    /// In this workspace the version names the translation's sources.
    #[test]
    fn the_record_version_names_the_translation_s_sources() {
        let fingerprint = RECORD_VERSION.rsplit('/').next().unwrap();
        assert_eq!(fingerprint.len(), 16, "{RECORD_VERSION}");
        assert!(
            fingerprint.bytes().all(|b| b.is_ascii_hexdigit()),
            "{RECORD_VERSION}"
        );
        assert!(RECORD_VERSION.starts_with(env!("CARGO_PKG_VERSION")));
    }

    #[test]
    fn client_ids_parse_in_both_forms() {
        let id: ClientId = "1764000000123-4-17".parse().unwrap();
        assert_eq!((id.run, id.n), (EventId::new(1_764_000_000_123, 4), 17));
        assert_eq!(id.to_string(), "1764000000123-4-17");
        // the log's form before: all of the run it names
        let old: ClientId = " 5-1 ".parse().unwrap();
        assert_eq!((old.run, old.n), (EventId::new(5, 1), u64::MAX));
        for bad in ["", "x", "1-2-x", "1-2-", "1--3", "a-b-3", "1-2-3-4"] {
            assert!(bad.parse::<ClientId>().is_err(), "{bad:?}");
        }
    }

    /// Each kind of entry, noted, reads back as what it says (the data
    /// and core parts as the store gets them), and what is not an entry
    /// reads as nothing.
    #[tokio::test]
    async fn each_kind_of_entry_reads_back_as_noted() {
        let log = memory();
        let begin = Begin::new(
            Dialect::Hai,
            Dialect::Vercel,
            true,
            Setup::of(&EncodeContext::deterministic()),
        );
        let mut rec = Recorder::new(test_writer(&log).await, Duration::ZERO, &begin);
        let messages = Read::Messages(vec![Bytes::from("ab"), Bytes::new(), Bytes::from("c")]);
        let fail = Failure {
            message: "the \"upstream\" sent nothing".into(),
            code: "upstream_idle".into(),
        };
        rec.read(&bytes("data: x\n\n"), 7);
        rec.read(&messages, 8);
        rec.finish(9);
        rec.internal(10);
        rec.fail(&fail.message, &fail.code, 11);
        let entries: Vec<(&[u8], Option<Came>)> = rec
            .parts
            .iter()
            .map(|p| {
                let (start, split, end) = (p.start as usize, p.split as usize, p.end as usize);
                (
                    &rec.pending[start..split],
                    Came::parse(&rec.pending[split..end]),
                )
            })
            .collect();
        let want = [
            Came::Begin(Box::new(begin)),
            Came::Read(7),
            Came::Messages(8),
            Came::Finish(9),
            Came::Internal(10),
            Came::Fail(11, Box::new(fail)),
        ];
        assert_eq!(entries.len(), want.len());
        for ((_, came), want) in entries.iter().zip(want) {
            assert_eq!(came.as_ref(), Some(&want));
        }
        assert_eq!(entries[1].0, b"data: x\n\n");
        assert_eq!(messages_of(entries[2].0), [&b"ab"[..], b"", b"c"]);
        assert!(entries.iter().skip(3).all(|(data, _)| data.is_empty()));
        for bad in [
            &b""[..],
            b"B",
            b"Bx",
            b"B12 ",
            b"Q12",
            b"F12",
            b"F12 {",
            b"S{",
        ] {
            assert_eq!(Came::parse(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        // a cut messages entry ends its messages
        assert_eq!(messages_of(&[2, 0, 0, 0, b'a']), Vec::<&[u8]>::new());
    }

    /// Reads that gave the encoder nothing join the next read's entry, at
    /// its time; one that did closes it; past `MAX_OPEN_BYTES` an entry
    /// closes all the same; a store call leaves an open read for the next.
    #[tokio::test]
    async fn reads_that_made_nothing_join_the_next_one_s_entry() {
        let log = memory();
        let setup = Setup::of(&EncodeContext::deterministic());
        let begin = Begin::new(Dialect::AgUi, Dialect::AgUi, false, setup);
        let mut rec = Recorder::new(test_writer(&log).await, Duration::from_secs(60), &begin);
        rec.read(&bytes("data: {\"ty"), 1);
        rec.made(false);
        // a heartbeat's store call: the setup goes, the open read stays
        rec.flush().await;
        rec.read(&bytes("pe\":\"RUN_STARTED\"}\n\n"), 2);
        rec.made(true);
        rec.read(&bytes(":\n\n"), 3);
        rec.made(false);
        let big = "x".repeat(MAX_OPEN_BYTES);
        rec.read(&bytes(&big), 4);
        rec.made(false);
        rec.read(&bytes(": y\n\n"), 5);
        rec.made(false);
        rec.end(RunOutcome::Completed).await;
        let mut read = log.read("r1", None);
        let mut entries = Vec::new();
        while let Some(Ok(LogItem::Event { data, core, .. })) = read.next().await {
            entries.push((data, Came::parse(&core.unwrap())));
        }
        let reads: Vec<(&[u8], Option<Came>)> = entries
            .iter()
            .skip(1)
            .map(|(d, c)| (&d[..], c.clone()))
            .collect();
        assert_eq!(reads.len(), 3, "{reads:?}");
        assert_eq!(
            reads[0],
            (
                &b"data: {\"type\":\"RUN_STARTED\"}\n\n"[..],
                Some(Came::Read(2))
            )
        );
        assert_eq!(reads[1].0, format!(":\n\n{big}").as_bytes());
        assert_eq!(reads[1].1, Some(Came::Read(4)));
        assert_eq!(reads[2], (&b": y\n\n"[..], Some(Came::Read(5))));
    }

    /// The events a follower makes are the live ones: from the start, and
    /// after an id, where `<run>-<n>` counts the run's events.
    #[tokio::test]
    async fn a_follower_sends_the_live_events_after_the_client_s_number() {
        let log = memory();
        let live = record(
            &log,
            Dialect::AgUi,
            &[(bytes(STARTED), 1), (bytes(TEXT), 2), (bytes(DONE), 3)],
        )
        .await;
        let live = String::from_utf8(live).unwrap();
        let events: Vec<&str> = live.split_inclusive("\n\n").collect();
        assert!(events.len() >= 5, "{live}");
        assert_eq!(
            follow(&log, Dialect::AgUi, Mode::After(None), None).await,
            live
        );
        let id = |e: &str| {
            e.lines()
                .next()
                .unwrap()
                .strip_prefix("id: ")
                .unwrap()
                .to_string()
        };
        let second: ClientId = id(events[1]).parse().unwrap();
        assert_eq!(second.n, 2);
        let rest = follow(&log, Dialect::AgUi, Mode::After(Some(second)), None).await;
        assert_eq!(rest, events[2..].concat());
        // an earlier run's id: this one whole; a later one's: nothing more
        let earlier = ClientId {
            run: EventId::new(second.run.ms - 1, 0),
            n: 99,
        };
        assert_eq!(
            follow(&log, Dialect::AgUi, Mode::After(Some(earlier)), None).await,
            live
        );
        let later = ClientId {
            run: EventId::new(second.run.ms + 1, 0),
            n: 0,
        };
        assert_eq!(
            follow(&log, Dialect::AgUi, Mode::After(Some(later)), None).await,
            ""
        );
    }

    /// HAI stamps events the upstream left unstamped: with the time their
    /// read came, from the record, so a follower stamps them alike.
    #[tokio::test]
    async fn times_come_from_the_record() {
        let log = memory();
        // The run's start comes in two reads: the first made nothing, so
        // the start carries the second's time, live and replayed.
        let (a, b) = STARTED.split_at(20);
        let reads = [
            (bytes(a), 1_700_000_000_000),
            (bytes(b), 1_700_000_000_001),
            (bytes(TEXT), 1_700_000_000_002),
            (bytes(DONE), 1_700_000_000_003),
        ];
        let live = String::from_utf8(record(&log, Dialect::Hai, &reads).await).unwrap();
        for ms in [1_700_000_000_001u64, 1_700_000_000_002, 1_700_000_000_003] {
            assert!(
                live.contains(&format!("\"timestamp\":{ms}")),
                "{ms}: {live}"
            );
        }
        assert!(!live.contains("1700000000000"), "{live}");
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(
            follow(&log, Dialect::Hai, Mode::After(None), None).await,
            live
        );
    }

    /// A record of another gateway version: a client with an id of it is
    /// refused (its bytes could differ from the ones it counted); without
    /// one it gets the run, made whole by this version.
    #[tokio::test]
    async fn another_version_s_record_is_not_continued_after_an_id() {
        let log = memory();
        let setup = Setup::of(&EncodeContext::deterministic());
        let mut begin = Begin::new(Dialect::AgUi, Dialect::AgUi, false, setup);
        begin.version = "0.0.0/record-0".into();
        let mut rec = Recorder::new(test_writer(&log).await, Duration::from_secs(60), &begin);
        rec.read(&bytes(&format!("{STARTED}{TEXT}{DONE}")), 1);
        rec.finish(2);
        rec.end(RunOutcome::Completed).await;
        let whole = follow(&log, Dialect::AgUi, Mode::After(None), None).await;
        assert!(
            whole.contains("RUN_FINISHED") && !whole.contains("RUN_ERROR"),
            "{whole}"
        );
        let first: ClientId = whole.lines().next().unwrap()[4..].parse().unwrap();
        let refused = follow(&log, Dialect::AgUi, Mode::After(Some(first)), None).await;
        assert!(refused.contains("\"code\":\"resume_version\""), "{refused}");
        assert!(!refused.contains("TEXT_MESSAGE"), "{refused}");
    }

    /// A log whose start the caps dropped cannot be made again: the
    /// dialect's error, code `resume_truncated`.
    #[tokio::test]
    async fn a_log_without_its_start_is_refused() {
        let log: Arc<dyn RunLog> = Arc::new(MemoryRunLog::new(&MemoryConfig {
            max_run_entries: 2,
            ..MemoryConfig::default()
        }));
        record(
            &log,
            Dialect::AgUi,
            &[(bytes(STARTED), 1), (bytes(TEXT), 2), (bytes(DONE), 3)],
        )
        .await;
        let got = follow(&log, Dialect::AgUi, Mode::After(None), None).await;
        assert!(got.contains("\"code\":\"resume_truncated\""), "{got}");
    }

    /// A snapshot holds at most `max_snapshot_bytes` of core events (1000
    /// here): over it, the run is read again and sent whole, as live.
    #[tokio::test]
    async fn a_snapshot_over_its_bound_sends_the_run_whole() {
        let long: String = (0..200)
            .map(|i| format!("data: {{\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"{i} \"}}\n\n"))
            .collect();
        for (text, snapshot) in [(String::new(), true), (long, false)] {
            let log = memory();
            let reads = [(bytes(STARTED), 1), (bytes(TEXT), 2), (bytes(&text), 3)];
            // no end: the run goes on
            let setup = Setup::of(&EncodeContext::deterministic());
            let begin = Begin::new(Dialect::AgUi, Dialect::AgUi, false, setup);
            let mut rec = Recorder::new(test_writer(&log).await, Duration::from_secs(60), &begin);
            for (read, ms) in &reads {
                rec.read(read, *ms);
                rec.made(true);
            }
            rec.flush().await;
            let last = log.last_id("r1").await.unwrap();
            rec.end(RunOutcome::Completed).await;
            let got = follow(&log, Dialect::AgUi, Mode::Snapshot, last).await;
            assert_eq!(got.contains("MESSAGES_SNAPSHOT"), snapshot, "{got}");
            assert!(
                got.contains("RUN_STARTED") && got.contains("\"hi\""),
                "{got}"
            );
        }
    }

    fn messages_of(data: &[u8]) -> Vec<&[u8]> {
        messages(data).collect()
    }
}
