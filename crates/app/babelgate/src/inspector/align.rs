//! The side-by-side view of a capture: its upstream bytes replayed one
//! upstream event at a time through a translator built as the live one was,
//! so that each upstream event lines up with the core events it became and
//! the client events written for them. The live stream kept only bytes; the
//! replay is what says which went where, and whether it gives the client's
//! bytes again.

use std::ops::Range;

use babelgate_core::journal::Step;
use babelgate_core::sse::DEFAULT_MAX_EVENT_BYTES;
use babelgate_core::{Framing, LengthFramer, Sink, SpanKind, SseFramer, Translator};
use serde::Serialize;
use serde_json::Value;

use super::capture::{Capture, Ending, ErrorNote, ReplaySetup, Requests, Summary, Timed};
use crate::transport::{self, Transport};

/// One event as a side saw it.
#[derive(Debug, Serialize)]
pub struct Item {
    pub seq: usize,
    pub at_ms: Option<u64>,
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
}

/// A neutral event (or the encoder's end or failure) between the sides.
#[derive(Debug, Serialize)]
pub struct CoreItem {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
}

/// One upstream event and what became of it.
#[derive(Debug, Serialize)]
pub struct Row {
    pub upstream: Option<Item>,
    pub core: Vec<CoreItem>,
    pub client: Vec<Item>,
    pub marks: Vec<&'static str>,
}

#[derive(Debug, Serialize)]
pub struct RowError {
    #[serde(flatten)]
    pub note: ErrorNote,
    pub row: usize,
}

#[derive(Debug, Serialize)]
pub struct ReplayInfo {
    pub command: String,
    /// Whether the replay wrote the client's bytes again; `None` when it
    /// cannot tell (a truncated or still running capture).
    pub matches: Option<bool>,
}

/// `GET {path}/api/runs/{id}`.
#[derive(Debug, Serialize)]
pub struct Detail {
    pub run: Summary,
    pub request: Requests,
    pub rows: Vec<Row>,
    pub errors: Vec<RowError>,
    pub heartbeats: u64,
    pub replay: ReplayInfo,
}

/// The file names of a capture's downloads.
pub fn file_names(c: &Capture) -> (String, String, String) {
    let id = &c.summary.id;
    let ext = |proto: bool| if proto { "bin" } else { "sse" };
    let (fp, tp) = c
        .replay
        .as_ref()
        .map(|r| (r.from_transport == "proto", r.to_transport == "proto"))
        .unwrap_or((false, false));
    (
        format!("{id}.upstream.{}", ext(fp)),
        format!("{id}.client.{}", ext(tp)),
        format!("{id}.setup.json"),
    )
}

/// The command that replays a capture's downloads.
pub fn command(c: &Capture) -> String {
    let (up, _, setup) = file_names(c);
    match &c.replay {
        Some(r) => {
            let mut cmd = format!("babelgate translate --from {} --to {}", r.from, r.to);
            if r.from_transport == "proto" {
                cmd.push_str(" --from-transport proto");
            }
            if r.to_transport == "proto" {
                cmd.push_str(" --to-transport proto");
            }
            format!("{cmd} --setup {setup} {up}")
        }
        None => String::new(),
    }
}

/// Where each upstream event ends in `bytes`, as the translator's own framer
/// cuts them (fed one byte at a time: a boundary is where a frame appears).
/// Bytes after the last whole event make a last, incomplete piece.
fn cut(bytes: &[u8], binary: bool) -> Vec<Range<usize>> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut frames = Vec::new();
    let mut messages = Vec::new();
    let mut sse = SseFramer::new(DEFAULT_MAX_EVENT_BYTES);
    let mut len = LengthFramer::new(DEFAULT_MAX_EVENT_BYTES);
    for (i, b) in bytes.iter().enumerate() {
        let one = std::slice::from_ref(b);
        let ended = if binary {
            if len.push(one, &mut messages).is_err() {
                break;
            }
            !std::mem::take(&mut messages).is_empty()
        } else {
            if sse.push(one, &mut frames).is_err() {
                break;
            }
            !std::mem::take(&mut frames).is_empty()
        };
        if ended {
            pieces.push(start..i + 1);
            start = i + 1;
        }
    }
    if start < bytes.len() {
        pieces.push(start..bytes.len());
    }
    pieces
}

/// The type and text of one event as a side carries it.
fn describe(bytes: &[u8], binary: bool) -> (String, String) {
    if binary {
        let mut framer = LengthFramer::new(DEFAULT_MAX_EVENT_BYTES);
        let mut messages = Vec::new();
        let _ = framer.push(bytes, &mut messages);
        return match messages.first().map(|m| babelgate_proto::decode_event(m)) {
            Some(Ok(v)) => (type_of(&v), v.to_string()),
            _ => ("(binary)".into(), format!("{} bytes", bytes.len())),
        };
    }
    let text = String::from_utf8_lossy(bytes).into_owned();
    let mut framer = SseFramer::new(DEFAULT_MAX_EVENT_BYTES);
    let mut frames = Vec::new();
    let _ = framer.push(bytes, &mut frames);
    let _ = framer.finish(&mut frames);
    let kind = match frames.first() {
        Some(f) if f.is_done() => "[DONE]".to_string(),
        Some(f) => match &f.event {
            Some(e) => e.clone(),
            None => serde_json::from_str::<Value>(&f.data)
                .map(|v| type_of(&v))
                .unwrap_or_else(|_| "(data)".into()),
        },
        None => "(comment)".into(),
    };
    (kind, text)
}

fn type_of(v: &Value) -> String {
    v.get("type")
        .and_then(Value::as_str)
        .unwrap_or("(event)")
        .to_string()
}

fn core_item(step: &Step) -> Option<CoreItem> {
    Some(match step {
        Step::Begin(_) => return None,
        Step::Event(ev) => {
            let v = serde_json::to_value(ev).unwrap_or(Value::Null);
            CoreItem {
                kind: v
                    .get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or("event")
                    .to_string(),
                text: v.to_string(),
            }
        }
        Step::Finish => CoreItem {
            kind: "finish".into(),
            text: String::new(),
        },
        Step::Fail { message, code } => CoreItem {
            kind: "fail".into(),
            text: serde_json::json!({"message": message, "code": code}).to_string(),
        },
    })
}

fn is_error(step: &Step) -> bool {
    match step {
        Step::Fail { .. } => true,
        Step::Event(ev) => matches!(ev.kind, babelgate_core::EventKind::RunError { .. }),
        _ => false,
    }
}

/// The translator a capture's stream had, and its transports.
fn translator(setup: &ReplaySetup) -> (Translator, Transport, Transport) {
    let (from_t, to_t) = setup.transports();
    let mut t = transport::translator(
        setup.from,
        setup.to,
        setup.setup.context(),
        DEFAULT_MAX_EVENT_BYTES,
        from_t,
        (to_t, false),
    );
    t.keep_journal();
    (t, from_t, to_t)
}

/// Ends a replay as the live stream ended.
pub fn end(t: &mut Translator, ending: &Ending, out: &mut Sink) {
    match ending {
        Ending::Open | Ending::Cut => {}
        Ending::Finish => {
            let _ = t.finish_to(out);
        }
        Ending::Fail { message, code } => t.fail_to(message, code.as_deref(), out),
    }
}

/// The side-by-side view of `c`.
pub fn detail(c: &Capture) -> Detail {
    let (mut rows, matches) = match &c.replay {
        Some(setup) => replay_rows(c, setup),
        None => (Vec::new(), None),
    };
    // An error the gateway raised shows at the row it ended the stream in;
    // one the translation raised is already marked there.
    let errors = c
        .errors
        .iter()
        .map(|e| RowError {
            note: e.clone(),
            row: rows.len().saturating_sub(1),
        })
        .collect::<Vec<_>>();
    if let (false, Some(last)) = (errors.is_empty(), rows.last_mut()) {
        if !last.marks.contains(&"error") {
            last.marks.push("error");
        }
    }
    Detail {
        run: c.summary_now(),
        request: c.request.clone(),
        rows,
        errors,
        heartbeats: c.heartbeats,
        replay: ReplayInfo {
            command: command(c),
            matches,
        },
    }
}

/// Replays a capture through the translator its run had, a row per
/// upstream piece (and one for the ending), and whether the replay wrote
/// the client's bytes again (`None` while the run is live or truncated).
fn replay_rows(c: &Capture, setup: &ReplaySetup) -> (Vec<Row>, Option<bool>) {
    let (mut t, from_t, to_t) = translator(setup);
    let (bin_in, bin_out) = (
        matches!(from_t, Transport::Proto(_)),
        matches!(to_t, Transport::Proto(_)),
    );
    // Decodes each upstream event again on its own, to tell what the
    // decoder made of it from what the shape stage added.
    let mut decoder = crate::registry::decoder(setup.from);
    let mut decoded = Vec::new();
    let mut sse = SseFramer::new(DEFAULT_MAX_EVENT_BYTES);
    let mut frames = Vec::new();
    let mut out = Sink::new(Framing::stream(bin_out));
    let at_of_upstream = |end: usize| {
        c.upstream_reads
            .iter()
            .find(|(e, _)| *e >= end)
            .map(|(_, at)| *at)
    };
    // The live encoder's times, where it got them.
    let mut timed = Timed::new(&setup.clock);
    let mut rows = Vec::new();
    let mut maker = RowMaker {
        capture: c,
        bin_out,
        client_seq: 0,
        carried: 0,
    };
    for (i, piece) in cut(&c.upstream, bin_in).into_iter().enumerate() {
        let bytes = c.upstream.get(piece.clone()).unwrap_or_default();
        decoded.clear();
        if bin_in {
            let mut framer = LengthFramer::new(DEFAULT_MAX_EVENT_BYTES);
            let mut messages = Vec::new();
            let _ = framer.push(bytes, &mut messages);
            for m in &messages {
                let _ = decoder.decode_binary(m, &mut decoded);
            }
        } else {
            let _ = sse.push(bytes, &mut frames);
            for f in frames.drain(..) {
                let _ = decoder.decode(&f, &mut decoded);
            }
        }
        let (kind, text) = describe(bytes, bin_in);
        let item = Item {
            seq: i + 1,
            at_ms: at_of_upstream(piece.end),
            kind,
            text,
        };
        let before = out.spans().len();
        let _ = timed.push(&mut t, bytes, |t, b| t.push_to(b, &mut out));
        rows.push(maker.row(Some(item), decoded.len(), &mut t, &out, before));
    }
    let ending = match &setup.ending {
        // A live stream: what it has so far.
        Ending::Open => Ending::Open,
        e => e.clone(),
    };
    let before = out.spans().len();
    timed.end(&mut t);
    end(&mut t, &ending, &mut out);
    let last = maker.row(None, 0, &mut t, &out, before);
    if !last.client.is_empty() || !last.core.is_empty() {
        rows.push(last);
    }
    if c.summary.truncated || ending == Ending::Open {
        return (rows, None);
    }
    let written: Vec<u8> = out
        .spans()
        .iter()
        .filter(|s| s.kind == SpanKind::Event)
        .flat_map(|s| out.bytes().get(s.range.clone()).unwrap_or_default())
        .copied()
        .collect();
    // A capture published by an instance that kept no times cannot be
    // checked where the client's dialect stamps events with the time.
    if setup.clock.is_empty() && crate::registry::policy(setup.to).clock_timestamps {
        return (rows, None);
    }
    (rows, Some(written == c.client))
}

/// Makes the rows of a replay, keeping count of the client's events and of
/// core events held back across rows.
struct RowMaker<'a> {
    capture: &'a Capture,
    bin_out: bool,
    client_seq: usize,
    /// Core events the decoder made that no row has written yet.
    carried: usize,
}

impl RowMaker<'_> {
    /// The row of what the translator wrote since span `before`, for the
    /// upstream piece `upstream` (none: the ending) of which the decoder
    /// made `made` core events.
    fn row(
        &mut self,
        upstream: Option<Item>,
        made: usize,
        t: &mut Translator,
        out: &Sink,
        before: usize,
    ) -> Row {
        // Read back from the log's form the translator wrote them in.
        let steps = t.take_journal().steps().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "inspector: unreadable core events");
            Vec::new()
        });
        let core: Vec<CoreItem> = steps.iter().filter_map(|n| core_item(&n.step)).collect();
        let mut client = Vec::new();
        for span in out.spans().get(before..).unwrap_or_default() {
            if span.kind != SpanKind::Event {
                continue;
            }
            let bytes = out.bytes().get(span.range.clone()).unwrap_or_default();
            let (kind, text) = describe(bytes, self.bin_out);
            self.client_seq += 1;
            client.push(Item {
                seq: self.client_seq,
                at_ms: (self.capture.client_events.get(self.client_seq - 1)).map(|e| e.2),
                kind,
                text,
            });
        }
        let events = steps
            .iter()
            .filter(|n| matches!(n.step, Step::Event(_)))
            .count();
        // Core events the decoder made but the shape stage held back (an
        // empty text start waits for its first delta) are carried to the
        // row that writes them: both rows are "merged". Events beyond what
        // was decoded are the shape stage's own.
        let avail = self.carried + made;
        let decoded_here = events.min(avail);
        let added = events - decoded_here;
        self.carried = avail - decoded_here;
        let mut marks = Vec::new();
        match (&upstream, client.is_empty()) {
            (Some(_), true) if made > 0 && self.carried > 0 => marks.push("merged"),
            (Some(_), true) => marks.push("dropped"),
            (None, false) => marks.push("synthesized"),
            (Some(_), false) => {
                if decoded_here > made {
                    marks.push("merged");
                }
                // More client events than core steps: the encoder wrote
                // some of its own (Vercel's step markers).
                if added > 0 || client.len() > core.len() {
                    marks.push("synthesized");
                }
            }
            (None, true) => {}
        }
        if !client.is_empty() {
            // Held events are written by now; what is left was dropped.
            self.carried = 0;
        }
        if steps.iter().any(|n| is_error(&n.step)) {
            marks.push("error");
        }
        Row {
            upstream,
            core,
            client,
            marks,
        }
    }
}
