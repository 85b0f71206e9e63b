//! What a [`Translator`](crate::Translator)'s encoder was given, noted with
//! where its bytes went, for callers that keep the client's stream (the
//! gateway's run log): replaying the steps into a fresh encoder of the same
//! dialect gives it the state the live one had, so a follower knows what the
//! client has open without decoding the client's bytes.

use serde::{Deserialize, Serialize};

use crate::codec::{EncodeContext, Encoder};
use crate::event::Event;
use crate::ids::IdGen;
use crate::request::Continued;
use crate::sink::Sink;

/// What an encoder's output depends on besides the events: its context as
/// the stream began (ids included, so that a replay mints the same ones).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    pub ids: IdGen,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    #[serde(default, skip_serializing_if = "Continued::is_empty")]
    pub continued: Continued,
    #[serde(default)]
    pub extension_frames: bool,
    /// `Raw` events were left out (`EncodeContext::drop_raw`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drop_raw: bool,
    /// The client got the binary form: the logged events are messages.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub binary: bool,
    /// The client took each event as a message of its own (a WebSocket
    /// session): the logged events are bodies, with no framing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub messages: bool,
    /// Boxed: the gateway's per-stream pump holds a setup, and is kept
    /// within its size class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<Box<serde_json::Value>>,
}

impl Setup {
    pub fn of(ctx: &EncodeContext) -> Self {
        Setup {
            ids: ctx.ids.clone(),
            thread_id: ctx.thread_id.clone(),
            run_id: ctx.run_id.clone(),
            message_id: ctx.message_id.clone(),
            continued: ctx.continued.clone(),
            extension_frames: ctx.extension_frames,
            drop_raw: ctx.drop_raw,
            binary: ctx.binary,
            messages: false,
            reply_to: ctx.reply_to.clone().map(Box::new),
        }
    }

    /// The context to build the replaying encoder with (the clock is now's).
    pub fn context(&self) -> EncodeContext {
        EncodeContext {
            ids: self.ids.clone(),
            thread_id: self.thread_id.clone(),
            run_id: self.run_id.clone(),
            message_id: self.message_id.clone(),
            continued: self.continued.clone(),
            extension_frames: self.extension_frames,
            drop_raw: self.drop_raw,
            binary: self.binary,
            reply_to: self.reply_to.as_deref().cloned(),
            ..EncodeContext::default()
        }
    }
}

/// One call the encoder got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// The encoder was built with this context (first, when known): a
    /// replay builds its encoder with the same.
    Begin(Setup),
    /// `encode` of this (shaped) event.
    Event(Box<Event>),
    /// `finish`: the stream's end.
    Finish,
    /// `fail`: the dialect's error, then the end.
    Fail {
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    },
}

impl Step {
    /// Makes the same call on `encoder` (`Begin` is the caller's: it says
    /// how to build the encoder).
    pub fn replay(&self, encoder: &mut dyn Encoder, sink: &mut Sink) {
        match self {
            Step::Begin(_) => {}
            Step::Event(ev) => encoder.encode_to(ev, sink),
            Step::Finish => encoder.finish_to(sink),
            Step::Fail { message, code } => encoder.fail_to(message, code.as_deref(), sink),
        }
    }

    /// Whether the client's stream is over after this step.
    pub fn ends(&self) -> bool {
        matches!(self, Step::Finish | Step::Fail { .. })
    }
}

/// A step and the span of the output sink it belongs to: the last span its
/// call wrote, or, when it wrote none (dropped by its dialect, or only
/// observed on a same-dialect route whose frames pass as received), the
/// next span written after it. An index past the sink's spans: no span
/// followed (yet).
#[derive(Debug, Clone, PartialEq)]
pub struct Noted {
    pub step: Step,
    pub span: usize,
}

/// A delta without extras: the steps most of a stream is made of, which
/// the log writes in a compact record, without serde.
struct Delta<'a> {
    /// 0 text, 1 reasoning, 2 tool-call arguments (the compact form's tag).
    tag: u8,
    id: &'a str,
    delta: &'a str,
    timestamp: Option<i64>,
    origin: Option<crate::Dialect>,
}

impl<'a> Delta<'a> {
    fn of_event(ev: &'a Event) -> Option<Self> {
        use crate::event::EventKind as K;
        if !ev.extra.is_empty() || ev.synthesized {
            return None;
        }
        let (tag, id, delta) = match &ev.kind {
            K::TextDelta { message_id, delta } => (0, message_id, delta),
            K::ReasoningDelta { message_id, delta } => (1, message_id, delta),
            K::ToolCallArgs {
                tool_call_id,
                delta,
            } => (2, tool_call_id, delta),
            _ => return None,
        };
        Some(Delta {
            tag,
            id,
            delta,
            timestamp: ev.timestamp,
            origin: ev.origin,
        })
    }

    /// The compact record: tag, flags (1 time, 2 origin), the id and the
    /// delta each after its length, then the time (8 bytes, little end)
    /// and the origin's index, when there.
    fn write_compact(&self, out: &mut Vec<u8>) {
        let flags = u8::from(self.timestamp.is_some()) | (u8::from(self.origin.is_some()) << 1);
        out.extend_from_slice(&[self.tag, flags]);
        write_len(self.id.len(), out);
        out.extend_from_slice(self.id.as_bytes());
        write_len(self.delta.len(), out);
        out.extend_from_slice(self.delta.as_bytes());
        if let Some(t) = self.timestamp {
            out.extend_from_slice(&t.to_le_bytes());
        }
        if let Some(d) = self.origin {
            let i = crate::Dialect::ALL
                .iter()
                .position(|x| *x == d)
                .unwrap_or(0);
            out.push(i as u8);
        }
    }
}

/// `n` in 7-bit groups, low first, the high bit saying more follow.
fn write_len(mut n: usize, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Tag of a step record that holds one step as JSON (after its length);
/// 0, 1 and 2 are the compact deltas' tags.
const JSON_STEP: u8 = 3;

/// One step as the run log keeps it: a record that a log's core part is a
/// run of. A delta without extras (most of a stream) is a compact binary
/// record, a third the size of its JSON, which both the log's memory and
/// its writing cost follow; anything else is its JSON after a tag and its
/// length. Records are whole on their own, so the steps of one event are
/// the records noted for it, one after another.
pub fn write_log_step(step: &Step, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    match step {
        Step::Event(ev) => write_log_event(ev, out),
        _ => write_json_record(out, |out| serde_json::to_writer(out, step)),
    }
}

/// [`write_log_step`] of `Step::Event(ev)`, from the event borrowed.
pub fn write_log_event(ev: &Event, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    if let Some(d) = Delta::of_event(ev) {
        d.write_compact(out);
        return Ok(());
    }
    // `{"event":..}`: serde's form of `Step::Event`, without building one.
    write_json_record(out, |out| {
        out.extend_from_slice(b"{\"event\":");
        serde_json::to_writer(&mut *out, ev)?;
        out.push(b'}');
        Ok(())
    })
}

/// The tag, the JSON's length, the JSON: written in place, its length put
/// before it once known (nothing written on an error).
fn write_json_record(
    out: &mut Vec<u8>,
    write: impl FnOnce(&mut Vec<u8>) -> Result<(), serde_json::Error>,
) -> Result<(), serde_json::Error> {
    let start = out.len();
    if let Err(e) = write(out) {
        out.truncate(start);
        return Err(e);
    }
    let mut head = Vec::with_capacity(6);
    head.push(JSON_STEP);
    write_len(out.len() - start, &mut head);
    out.splice(start..start, head);
    Ok(())
}

/// The steps as the run log keeps them: their records, one after another
/// (see [`write_log_step`]). [`read_log_steps`] reads them back.
pub fn write_log_steps<'a>(
    steps: impl IntoIterator<Item = &'a Step>,
    out: &mut Vec<u8>,
) -> Result<(), serde_json::Error> {
    for step in steps {
        write_log_step(step, out)?;
    }
    Ok(())
}

/// Why logged steps could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum LogStepsError {
    #[error("core events: {0}")]
    Json(#[from] serde_json::Error),
    #[error("core events: {0}")]
    Compact(&'static str),
}

/// Reads what [`write_log_steps`] wrote, or a JSON array of steps (what a
/// gateway of an earlier version wrote into a shared Redis log).
pub fn read_log_steps(bytes: &[u8]) -> Result<Vec<Step>, LogStepsError> {
    let mut steps = Vec::new();
    if bytes.first() == Some(&b'[') {
        steps = serde_json::from_slice(bytes)?;
    } else {
        let mut rest = bytes;
        while !rest.is_empty() {
            let (step, after) = read_record(rest)?;
            steps.push(step);
            rest = after;
        }
    }
    for step in &mut steps {
        if let Step::Event(ev) = step {
            read_old_notes(ev);
        }
    }
    Ok(steps)
}

/// Notes in `extra` that an earlier version's decoders left and its
/// journals kept: the ones that said the event was made up are
/// [`Event::synthesized`] now; the others the encoders no longer read (the
/// form a frame came in, which its dialect's plain form means as well).
const OLD_NOTES: [(&str, bool); 8] = [
    ("$synthesized", true),
    ("$carriedBy", true),
    ("$inputError", true),
    ("$derived", true),
    ("$follow", false),
    ("$noRole", false),
    ("$argsJson", false),
    ("$rawDelta", false),
];

fn read_old_notes(ev: &mut Event) {
    if ev.extra.is_empty() {
        return;
    }
    for (key, made_up) in OLD_NOTES {
        if ev.extra.shift_remove(key).is_some() && made_up {
            ev.synthesized = true;
        }
    }
}

fn read_record(bytes: &[u8]) -> Result<(Step, &[u8]), LogStepsError> {
    let Some((&JSON_STEP, rest)) = bytes.split_first() else {
        return read_compact(bytes);
    };
    let (len, rest) = read_len(rest)?;
    if rest.len() < len {
        return Err(LogStepsError::Compact("cut short"));
    }
    let (json, rest) = rest.split_at(len);
    Ok((serde_json::from_slice(json)?, rest))
}

/// The steps a translator noted since its journal was last taken, each as
/// a log record ([`write_log_step`]) in one buffer, with the span of the
/// output it belongs to (see [`Noted`]). Written as the encoder is called:
/// no step is built or kept as a value (a boxed copy of every event was
/// most of what keeping a journal cost).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Journal {
    bytes: Vec<u8>,
    marks: Vec<Mark>,
    /// Steps that could not be written (left out).
    pub failed: usize,
}

/// Where one step's record ends in [`Journal::bytes`], and its span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    pub end: usize,
    pub span: usize,
}

impl Journal {
    /// A journal of these steps (tests, and a journal put in order).
    pub fn of(steps: &[Noted]) -> Self {
        let mut j = Journal::default();
        for n in steps {
            j.push(&n.step, n.span);
        }
        j
    }

    pub fn push(&mut self, step: &Step, span: usize) {
        self.note(span, |out| write_log_step(step, out));
    }

    pub fn push_event(&mut self, ev: &Event, span: usize) {
        self.note(span, |out| write_log_event(ev, out));
    }

    fn note(
        &mut self,
        span: usize,
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), serde_json::Error>,
    ) {
        match write(&mut self.bytes) {
            Ok(()) => self.marks.push(Mark {
                end: self.bytes.len(),
                span,
            }),
            Err(_) => self.failed += 1,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.marks.is_empty()
    }

    pub fn marks(&self) -> &[Mark] {
        &self.marks
    }

    /// The records of steps `from..to`, one after another.
    pub fn records(&self, from: usize, to: usize) -> &[u8] {
        let start = match from {
            0 => 0,
            i => self.marks.get(i - 1).map_or(0, |m| m.end),
        };
        let end = match to {
            0 => 0,
            i => self.marks.get(i - 1).map_or(start, |m| m.end),
        };
        self.bytes.get(start..end.max(start)).unwrap_or_default()
    }

    /// The steps read back (the inspector's view; tests).
    pub fn steps(&self) -> Result<Vec<Noted>, LogStepsError> {
        (0..self.marks.len())
            .map(|i| {
                let steps = read_log_steps(self.records(i, i + 1))?;
                let step = steps
                    .into_iter()
                    .next()
                    .ok_or(LogStepsError::Compact("empty record"))?;
                Ok(Noted {
                    step,
                    span: self.marks.get(i).map_or(0, |m| m.span),
                })
            })
            .collect()
    }

    /// The same steps in a stable order by `key` of their spans (the
    /// journal notes in output order; this is for one that did not).
    pub fn sorted_by_span_key(&self, key: impl Fn(usize) -> usize) -> Journal {
        let mut order: Vec<usize> = (0..self.marks.len()).collect();
        order.sort_by_key(|&i| self.marks.get(i).map_or(0, |m| key(m.span)));
        let mut j = Journal {
            bytes: Vec::with_capacity(self.bytes.len()),
            marks: Vec::with_capacity(self.marks.len()),
            failed: self.failed,
        };
        for i in order {
            j.bytes.extend_from_slice(self.records(i, i + 1));
            j.marks.push(Mark {
                end: j.bytes.len(),
                span: self.marks.get(i).map_or(0, |m| m.span),
            });
        }
        j
    }

    /// Emptied, its room kept.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.marks.clear();
        self.failed = 0;
    }

    /// Emptied and its room let go, when empty (a stream that waits).
    pub fn release_if_empty(&mut self) {
        if self.is_empty() {
            *self = Journal::default();
        }
    }

    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }
}

fn read_compact(bytes: &[u8]) -> Result<(Step, &[u8]), LogStepsError> {
    use crate::event::EventKind as K;
    let bad = LogStepsError::Compact;
    let [tag, flags, rest @ ..] = bytes else {
        return Err(bad("cut short"));
    };
    let (id, rest) = read_str(rest)?;
    let (delta, mut rest) = read_str(rest)?;
    let mut timestamp = None;
    if flags & 1 != 0 {
        let (t, after) = rest.split_first_chunk::<8>().ok_or(bad("cut short"))?;
        timestamp = Some(i64::from_le_bytes(*t));
        rest = after;
    }
    let mut origin = None;
    if flags & 2 != 0 {
        let (i, after) = rest.split_first().ok_or(bad("cut short"))?;
        origin = Some(
            *crate::Dialect::ALL
                .get(usize::from(*i))
                .ok_or(bad("origin"))?,
        );
        rest = after;
    }
    if flags & !3 != 0 {
        return Err(bad("flags"));
    }
    let kind = match tag {
        0 => K::TextDelta {
            message_id: id,
            delta,
        },
        1 => K::ReasoningDelta {
            message_id: id,
            delta,
        },
        2 => K::ToolCallArgs {
            tool_call_id: id,
            delta,
        },
        _ => return Err(bad("tag")),
    };
    let mut ev = Event::new(kind).with_timestamp(timestamp);
    ev.origin = origin;
    Ok((Step::Event(Box::new(ev)), rest))
}

/// A length written by [`write_len`], and what follows it.
fn read_len(bytes: &[u8]) -> Result<(usize, &[u8]), LogStepsError> {
    let bad = LogStepsError::Compact;
    let mut len = 0usize;
    let mut at = 0;
    loop {
        let b = *bytes.get(at).ok_or(bad("cut short"))?;
        // Nine groups are 63 bits, more than any length in memory: more is
        // not a length this wrote.
        if at >= 9 {
            return Err(bad("length"));
        }
        len |= usize::from(b & 0x7f) << (7 * at);
        at += 1;
        if b & 0x80 == 0 {
            break;
        }
    }
    Ok((len, bytes.get(at..).unwrap_or_default()))
}

/// A string after its length (see [`write_len`]).
fn read_str(bytes: &[u8]) -> Result<(String, &[u8]), LogStepsError> {
    let bad = LogStepsError::Compact;
    let (len, rest) = read_len(bytes)?;
    if rest.len() < len {
        return Err(bad("cut short"));
    }
    let (s, rest) = rest.split_at(len);
    let s = std::str::from_utf8(s).map_err(|_| bad("not UTF-8"))?;
    Ok((s.to_string(), rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventKind;

    #[test]
    fn a_made_up_event_stays_made_up_through_the_log() {
        // A delta with no extras is a compact record, which has no room
        // for the flag: a made-up one goes as JSON.
        let ev = Event::new(EventKind::ToolCallArgs {
            tool_call_id: "c".into(),
            delta: "{}".into(),
        })
        .with_origin(crate::Dialect::Vercel)
        .mark_synthesized();
        let mut out = Vec::new();
        write_log_event(&ev, &mut out).unwrap();
        assert_eq!(out[0], JSON_STEP);
        assert_eq!(read_log_steps(&out).unwrap(), [Step::Event(Box::new(ev))]);
    }

    #[test]
    fn an_earlier_versions_notes_are_read_as_what_they_meant() {
        let old = br#"[{"event":{"kind":"message_metadata","metadata":{},"origin":"vercel","extra":{"$carriedBy":"start"}}},{"event":{"kind":"text_start","message_id":"m","origin":"ag-ui","extra":{"$noRole":true,"k":1}}}]"#;
        let steps = read_log_steps(old).unwrap();
        let [Step::Event(a), Step::Event(b)] = &steps[..] else {
            panic!("{steps:?}")
        };
        assert!(a.synthesized && a.extra.is_empty());
        assert!(!b.synthesized);
        assert_eq!(b.extra.keys().collect::<Vec<_>>(), ["k"]);
    }

    #[test]
    fn steps_round_trip_through_json() {
        let steps = vec![
            Step::Begin(Setup::of(&EncodeContext {
                thread_id: Some("t".into()),
                message_id: Some("a1".into()),
                // A follower's encoder announces what the client lacks.
                continued: Continued {
                    tool_calls: vec!["tc-1".into()],
                    approvals: vec!["ap-1".into()],
                },
                extension_frames: true,
                ..EncodeContext::default()
            })),
            Step::Event(Box::new(Event::new(EventKind::text_start("m")))),
            Step::Event(Box::new(
                Event::new(EventKind::text_delta("m", "hé\u{2028}")).with_timestamp(Some(5)),
            )),
            Step::Fail {
                message: "x".into(),
                code: Some("run_lost".into()),
            },
            Step::Finish,
        ];
        let json = serde_json::to_vec(&steps).unwrap();
        let back: Vec<Step> = serde_json::from_slice(&json).unwrap();
        assert_eq!(back, steps);
        let Step::Begin(setup) = &back[0] else {
            unreachable!()
        };
        assert_eq!(&Setup::of(&setup.context()), setup);
    }

    fn delta_step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        let text = "(?s).{0,12}|[\"\\\\\u{0}-\u{1f}\u{2028}é🙂a]{0,8}";
        (
            0..5u8,
            text,
            text,
            proptest::option::of(any::<i64>()),
            proptest::option::of(0..4usize),
            any::<bool>(),
        )
            .prop_map(|(k, id, delta, ts, origin, extra)| {
                let kind = match k {
                    0 => EventKind::text_delta(id, delta),
                    1 => EventKind::ReasoningDelta {
                        message_id: id,
                        delta,
                    },
                    2 => EventKind::ToolCallArgs {
                        tool_call_id: id,
                        delta,
                    },
                    3 => EventKind::text_end(id),
                    _ => {
                        return Step::Fail {
                            message: delta,
                            code: Some(id),
                        }
                    }
                };
                let mut ev = Event::new(kind).with_timestamp(ts);
                ev.origin = origin.and_then(|i| crate::Dialect::ALL.get(i).copied());
                if extra {
                    ev.extra
                        .insert("x".into(), serde_json::json!({"y": [1, "z"]}));
                }
                Step::Event(Box::new(ev))
            })
    }

    proptest::proptest! {
        /// A JSON array of steps (an earlier version's log) reads back too.
        #[test]
        fn a_json_array_of_steps_reads_back(steps in proptest::collection::vec(delta_step(), 0..6)) {
            let json = serde_json::to_vec(&steps).unwrap();
            proptest::prop_assert_eq!(read_log_steps(&json).unwrap(), steps);
        }

        /// The log's form reads back as the steps written, deltas compact
        /// and anything else as JSON, in any mix; a journal of them gives
        /// each step's record on its own and reads back the same.
        #[test]
        fn log_steps_read_back_as_written(steps in proptest::collection::vec(delta_step(), 0..6)) {
            let mut out = Vec::new();
            write_log_steps(&steps, &mut out).unwrap();
            proptest::prop_assert_eq!(read_log_steps(&out).unwrap(), steps.clone());
            let noted: Vec<Noted> = steps
                .iter()
                .enumerate()
                .map(|(i, s)| Noted { step: s.clone(), span: i / 2 })
                .collect();
            let j = Journal::of(&noted);
            proptest::prop_assert_eq!(j.records(0, steps.len()), &out[..]);
            proptest::prop_assert_eq!(j.steps().unwrap(), noted);
        }

        /// Bytes that are not what it wrote give an error, never a panic:
        /// every cut of a run of records, and any bytes at all.
        #[test]
        fn broken_log_steps_are_an_error(
            steps in proptest::collection::vec(delta_step(), 1..4),
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
        ) {
            let mut out = Vec::new();
            write_log_steps(&steps, &mut out).unwrap();
            for cut in 1..out.len() {
                // A cut between two whole records reads as fewer steps.
                if let Ok(fewer) = read_log_steps(&out[..cut]) {
                    proptest::prop_assert!(fewer.len() < steps.len());
                }
            }
            let _ = read_log_steps(&junk);
        }
    }

    /// Steps noted out of order are put in order by their group, stably;
    /// each keeps its record and span.
    #[test]
    fn a_journal_sorted_keeps_each_step_whole() {
        let delta = |d: &str| Step::Event(Box::new(Event::new(EventKind::text_delta("m", d))));
        let noted = [
            Noted {
                step: delta("a"),
                span: 3,
            },
            Noted {
                step: Step::Finish,
                span: 1,
            },
            Noted {
                step: delta("b"),
                span: 3,
            },
            Noted {
                step: delta("c"),
                span: 0,
            },
        ];
        let sorted = Journal::of(&noted).sorted_by_span_key(|s| s / 2);
        let spans: Vec<usize> = sorted.marks().iter().map(|m| m.span).collect();
        assert_eq!(spans, [1, 0, 3, 3]);
        let steps: Vec<Step> = sorted
            .steps()
            .unwrap()
            .into_iter()
            .map(|n| n.step)
            .collect();
        assert_eq!(steps, [Step::Finish, delta("c"), delta("a"), delta("b")]);
        assert_eq!(sorted.records(4, 9), b"");
        assert_eq!(Journal::default().records(0, 3), b"");
    }

    /// A text delta, as most of a stream is, takes a third of its JSON.
    #[test]
    fn a_logged_delta_is_a_third_of_its_json() {
        let steps = [Step::Event(Box::new(Event::new(EventKind::text_delta(
            "m1",
            "@1764030000000000;xxxxxxxx",
        ))))];
        let json = serde_json::to_vec(&steps).unwrap();
        let mut log = Vec::new();
        write_log_steps(&steps, &mut log).unwrap();
        assert_eq!((json.len(), log.len()), (88, 32));
        let lengths = [0, 1, 127, 128, 300, 20_000];
        for n in lengths {
            let steps = [Step::Event(Box::new(Event::new(EventKind::ToolCallArgs {
                tool_call_id: "x".repeat(n),
                delta: "é".repeat(n),
            })))];
            let mut log = Vec::new();
            write_log_steps(&steps, &mut log).unwrap();
            assert_eq!(read_log_steps(&log).unwrap(), steps, "length {n}");
        }
    }
}
