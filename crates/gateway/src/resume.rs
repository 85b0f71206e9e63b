//! Resumable streams: every event a client is sent is first written to the
//! run's log (babelgate-store), with the log's id as the SSE `id:`; a client
//! that reconnects reads the log back from where it was, then follows the
//! live tail, on any instance that shares the store.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use babelgate_core::assemble::MessageAssembler;
use babelgate_core::request::Message;
use babelgate_core::sse::{SseFramer, DEFAULT_MAX_EVENT_BYTES};
use babelgate_core::track::OpenTracker;
use babelgate_core::{Decoder, Dialect, EncodeContext, Encoder, Event, EventKind, Sink, SpanKind};
use babelgate_store::{EventId, LogItem, RunLog, RunOutcome, RunWriter};
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::registry;

/// Writes `id: <id>` and the event.
pub fn with_id(id: EventId, event: &[u8], out: &mut Vec<u8>) {
    // Once per event: itoa rather than the formatter and a String.
    let mut num = itoa::Buffer::new();
    out.extend_from_slice(b"id: ");
    out.extend_from_slice(num.format(id.ms).as_bytes());
    out.push(b'-');
    out.extend_from_slice(num.format(id.seq).as_bytes());
    out.push(b'\n');
    out.extend_from_slice(event);
}

/// The writing side of one run's log, owned by the stream's pump.
pub struct Recorder {
    /// `None` once the store failed mid-run: the stream goes on without ids
    /// (it can no longer be resumed) rather than failing the client.
    writer: Option<RunWriter>,
    retention: Duration,
}

impl Recorder {
    pub fn new(writer: RunWriter, retention: Duration) -> Self {
        Recorder {
            writer: Some(writer),
            retention,
        }
    }

    /// Logs each event the sink holds and writes it, with its id, to
    /// `client`: the sink's spans say where each starts and ends (nothing is
    /// scanned). Comments (heartbeats) are not logged; bytes outside any span
    /// go out as they are.
    pub async fn record(&mut self, out: &Sink, client: &mut Vec<u8>) {
        let bytes = out.bytes();
        let Some(writer) = self.writer.as_ref() else {
            client.extend_from_slice(bytes);
            return;
        };
        let spans = out.spans();
        // One copy of the chunk, each logged event a slice of it, and one
        // store call for them all: an upstream read often holds many events.
        let mut ids = Vec::new();
        if spans.iter().any(|s| s.kind == SpanKind::Event) {
            let chunk = Bytes::copy_from_slice(bytes);
            let logged: Vec<Bytes> = spans
                .iter()
                .filter(|s| s.kind == SpanKind::Event)
                .map(|s| chunk.slice(s.range.clone()))
                .collect();
            ids.reserve(logged.len());
            if let Err(e) = writer.append_batch(logged, &mut ids).await {
                tracing::warn!(run = %writer.run_id(), error = %e, "run log unavailable: this stream can no longer be resumed");
                self.writer = None;
            }
        }
        // Events the log took carry their id; the rest (comments, and what
        // came after a store failure) go out without one.
        let mut ids = ids.into_iter();
        let mut at = 0;
        for span in spans {
            // What no span holds (an encoder that wrote between events) is
            // sent as it is.
            client.extend_from_slice(bytes.get(at..span.range.start).unwrap_or_default());
            let id = match span.kind {
                SpanKind::Event => ids.next(),
                SpanKind::Comment => None,
            };
            let event = bytes.get(span.range.clone()).unwrap_or_default();
            match id {
                Some(id) => with_id(id, event, client),
                None => client.extend_from_slice(event),
            }
            at = span.range.end;
        }
        client.extend_from_slice(bytes.get(at..).unwrap_or_default());
    }

    /// Resolves when someone asked to stop the run (`POST .../stop`, any
    /// instance); pending forever otherwise.
    pub async fn stop_requested(&self) {
        match &self.writer {
            Some(w) => w.stop_requested().await,
            None => std::future::pending().await,
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

/// Decodes the client-dialect bytes a log holds back into core events.
struct Reader {
    framer: SseFramer,
    decoder: Box<dyn Decoder>,
}

impl Reader {
    fn new(dialect: Dialect) -> Self {
        Reader {
            framer: SseFramer::new(DEFAULT_MAX_EVENT_BYTES),
            decoder: registry::decoder(dialect),
        }
    }

    fn read(&mut self, bytes: &[u8], out: &mut Vec<Event>) {
        let mut frames = Vec::new();
        // The log holds what our own encoder wrote: it decodes.
        let _ = self.framer.push(bytes, &mut frames);
        for f in &frames {
            let _ = self.decoder.decode(f, out);
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
    /// Snapshot mode: at most this many bytes of log are held to build the
    /// snapshot; past it the run is replayed as it was sent instead.
    pub max_snapshot_bytes: usize,
    /// Held for as long as the client is followed.
    pub slot: FollowerSlot,
    /// Set before the end when the run failed and the dialect shows that
    /// only as a body that breaks off (`Encoder::aborts`), as live.
    pub abort: Arc<std::sync::atomic::AtomicBool>,
}

/// Snapshot mode: the log read so far, until it reaches `last`.
struct Held {
    entries: Vec<(EventId, Bytes)>,
    bytes: usize,
    last: EventId,
}

impl Follow {
    /// Streams the log to the client: the replay, then the live tail, each
    /// event with its id; a lost run, a broken store or shutdown ends with the
    /// dialect's error, after closing what the replay left open.
    pub async fn run(self, tx: mpsc::Sender<Bytes>, shutdown: CancellationToken) {
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
        } = self;
        let after = match mode {
            Mode::After(a) => a,
            Mode::Snapshot => None,
        };
        let mut log = runs.read(&run_id, after);
        // A client-to-client translator fed with everything sent, so that an
        // error at any point closes exactly what the client has open.
        let mut shadow = registry::translator(
            dialect,
            dialect,
            EncodeContext::default(),
            DEFAULT_MAX_EVENT_BYTES,
        );
        let mut sink = Vec::new();
        let mut out = Vec::new();
        // Snapshot mode: the log up to `last` is held (as the store gave
        // it: no copy in memory), then summarised; past the cap, replayed.
        let mut held: Option<Held> = match (mode, last) {
            (Mode::Snapshot, Some(last)) => Some(Held {
                entries: Vec::new(),
                bytes: 0,
                last,
            }),
            _ => None,
        };
        loop {
            let item = tokio::select! {
                item = log.next() => match item {
                    Some(item) => item,
                    None => break,
                },
                () = shutdown.cancelled() => {
                    shadow.fail("the gateway is shutting down", Some("shutdown"), &mut out);
                    break;
                }
            };
            match item {
                Ok(LogItem::Event { id, data }) => {
                    let _ = shadow.push(&data, &mut sink);
                    sink.clear();
                    match held.as_mut() {
                        None => with_id(id, &data, &mut out),
                        Some(h) => {
                            h.bytes += data.len();
                            let at_last = id >= h.last;
                            h.entries.push((id, data));
                            if h.bytes > max_snapshot_bytes {
                                // Too much to summarise within the bound:
                                // the run as it was sent (a valid stream
                                // from its start), then the tail.
                                for (id, data) in held.take().map(|h| h.entries).unwrap_or_default()
                                {
                                    with_id(id, &data, &mut out);
                                }
                            } else if at_last {
                                let entries = held.take().map(|h| h.entries).unwrap_or_default();
                                // The summary's last event carries the id it covers.
                                snapshot(
                                    dialect,
                                    &input,
                                    &decode(dialect, &entries),
                                    Some(id),
                                    &mut out,
                                );
                            }
                        }
                    }
                }
                Ok(LogItem::End(_)) => break,
                Ok(LogItem::Lost) => {
                    shadow.fail(
                        "the gateway instance serving this run went away",
                        Some("run_lost"),
                        &mut out,
                    );
                    break;
                }
                Ok(LogItem::Truncated) => {
                    shadow.fail(
                        "the events since the last one received are no longer kept",
                        Some("resume_truncated"),
                        &mut out,
                    );
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reading the run failed");
                    shadow.fail(
                        "reading the run failed",
                        Some("store_unavailable"),
                        &mut out,
                    );
                    break;
                }
            }
            if !out.is_empty()
                && tx
                    .send(Bytes::from(std::mem::take(&mut out)))
                    .await
                    .is_err()
            {
                return; // the client went away again; the run is not affected
            }
        }
        if let Some(h) = held.take() {
            // The log ended before reaching `last` (it was trimmed): summarise
            // what there is.
            snapshot(
                dialect,
                &input,
                &decode(dialect, &h.entries),
                None,
                &mut out,
            );
        }
        if !out.is_empty() {
            let _ = tx.send(Bytes::from(out)).await;
        }
        if shadow.encoder().aborts() {
            abort.store(true, Ordering::Release);
        }
    }
}

/// The core events of logged client-dialect events.
fn decode(dialect: Dialect, entries: &[(EventId, Bytes)]) -> Vec<Event> {
    let mut reader = Reader::new(dialect);
    let mut events = Vec::new();
    for (_, data) in entries {
        reader.read(data, &mut events);
    }
    events
}

/// What a client without `Last-Event-ID` gets first: the run's start, a
/// messages snapshot (the run's input and what is complete so far), then the
/// items still open, re-opened with what they hold. `tag`: the id the
/// summary covers, put on its last event (the sink says where that starts),
/// so that a later reconnect with `Last-Event-ID` continues after it.
fn snapshot(
    dialect: Dialect,
    input: &[Message],
    events: &[Event],
    tag: Option<EventId>,
    out: &mut Vec<u8>,
) {
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

    let mut encoder: Box<dyn Encoder> = registry::encoder(dialect, EncodeContext::default());
    let mut sink = Sink::new();
    if let Some(start) = done
        .iter()
        .find(|e| matches!(e.kind, EventKind::RunStarted { .. }))
    {
        encoder.encode_to(start, &mut sink);
    }
    encoder.encode_to(
        &Event::new(EventKind::MessagesSnapshot { messages }),
        &mut sink,
    );
    for ev in open {
        if !matches!(ev.kind, EventKind::RunStarted { .. }) {
            encoder.encode_to(ev, &mut sink);
        }
    }
    // No `finish`: the live tail continues the run.
    let (bytes, spans) = sink.take();
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
        _ => out.extend_from_slice(&bytes),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn recorded_events_get_the_ids_of_their_log_entries() {
        use babelgate_store::{MemoryConfig, MemoryRunLog};
        let log: Arc<dyn RunLog> = Arc::new(MemoryRunLog::new(&MemoryConfig::default()));
        let lease = Duration::from_secs(60);
        let (writer, _) = RunWriter::begin(log.clone(), "k", "r1", "me", lease)
            .await
            .unwrap();
        let mut rec = Recorder::new(writer, Duration::from_secs(1));
        let mut client = Vec::new();
        let mut sink = Sink::new();
        sink.data("1");
        sink.comment("ping");
        sink.data("2");
        rec.record(&sink, &mut client).await;
        sink.clear();
        sink.comment("ping");
        rec.record(&sink, &mut client).await;
        sink.clear();
        sink.data("3");
        rec.record(&sink, &mut client).await;
        let mut logged = Vec::new();
        let mut read = log.read("r1", None);
        while logged.len() < 3 {
            match read.next().await {
                Some(Ok(LogItem::Event { id, data })) => logged.push((id, data)),
                Some(Ok(_)) => {}
                other => panic!("read: {other:?}"),
            }
        }
        // the comments are not logged and carry no id; each event carries
        // the id of its own entry
        let [(a, d1), (b, d2), (c, d3)] = &logged[..] else {
            unreachable!()
        };
        assert_eq!(
            [&d1[..], &d2[..], &d3[..]],
            [b"data: 1\n\n", b"data: 2\n\n", b"data: 3\n\n"]
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
        rec.record(&sink, &mut client).await;
        assert_eq!(client, b"data: 4\n\ndata: 5\n\n");
    }

    #[test]
    fn the_snapshot_s_last_event_gets_the_id() {
        let open = [Event::new(EventKind::TextDelta {
            message_id: "m".into(),
            delta: "hi".into(),
        })];
        for dialect in [Dialect::AgUi, Dialect::Hai] {
            let mut out = Vec::new();
            snapshot(dialect, &[], &open, Some(EventId::new(5, 1)), &mut out);
            let text = String::from_utf8(out).unwrap();
            let evs: Vec<&str> = text.trim_end().split("\n\n").collect();
            assert!(evs.len() >= 2, "{text}");
            assert!(evs.last().unwrap().starts_with("id: 5-1\n"), "{text}");
            assert_eq!(text.matches("id: ").count(), 1, "{text}");
            let mut untagged = Vec::new();
            snapshot(dialect, &[], &open, None, &mut untagged);
            assert!(!String::from_utf8(untagged).unwrap().contains("id: "));
        }
    }
}
