//! What a [`Translator`](crate::Translator)'s encoder was given, noted with
//! where its bytes went, for callers that keep the client's stream (the
//! gateway's run log): replaying the steps into a fresh encoder of the same
//! dialect gives it the state the live one had, so a follower knows what the
//! client has open without decoding the client's bytes.

use serde::{Deserialize, Serialize};

use crate::codec::{EncodeContext, Encoder};
use crate::event::Event;
use crate::ids::IdGen;
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
    #[serde(default)]
    pub extension_frames: bool,
    /// The client got the binary form: the logged events are messages.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub binary: bool,
}

impl Setup {
    pub fn of(ctx: &EncodeContext) -> Self {
        Setup {
            ids: ctx.ids.clone(),
            thread_id: ctx.thread_id.clone(),
            run_id: ctx.run_id.clone(),
            message_id: ctx.message_id.clone(),
            extension_frames: ctx.extension_frames,
            binary: ctx.binary,
        }
    }

    /// The context to build the replaying encoder with (the clock is now's).
    pub fn context(&self) -> EncodeContext {
        EncodeContext {
            ids: self.ids.clone(),
            thread_id: self.thread_id.clone(),
            run_id: self.run_id.clone(),
            message_id: self.message_id.clone(),
            extension_frames: self.extension_frames,
            binary: self.binary,
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

/// The steps as a JSON array, the bytes `serde_json::to_vec(steps)` gives:
/// the run log stores one per client event. The deltas that make most of a
/// stream (text, reasoning, tool arguments) are written directly; anything
/// else goes through serde.
pub fn write_steps(steps: &[Step], out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    write_steps_of(steps, out)
}

/// [`write_steps`] of the steps an iterator gives, in its order.
pub fn write_steps_of<'a>(
    steps: impl IntoIterator<Item = &'a Step>,
    out: &mut Vec<u8>,
) -> Result<(), serde_json::Error> {
    out.push(b'[');
    for (i, step) in steps.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if !write_delta_step(step, out) {
            serde_json::to_writer(&mut *out, step)?;
        }
    }
    out.push(b']');
    Ok(())
}

/// A delta without extras: the steps most of a stream is made of, which
/// the writers below write without serde.
struct Delta<'a> {
    /// 0 text, 1 reasoning, 2 tool-call arguments (the compact form's tag).
    tag: u8,
    id: &'a str,
    delta: &'a str,
    timestamp: Option<i64>,
    origin: Option<crate::Dialect>,
}

impl<'a> Delta<'a> {
    fn of(step: &'a Step) -> Option<Self> {
        use crate::event::EventKind as K;
        let Step::Event(ev) = step else { return None };
        if !ev.extra.is_empty() {
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

    /// `{"event":{"kind":..,"<id>":..,"delta":..[,"timestamp":..][,"origin":..]}}`
    /// (serde's order: the flattened kind's fields, then the event's own).
    fn write_json(&self, out: &mut Vec<u8>) {
        let (kind, id_key) = match self.tag {
            0 => ("text_delta", "message_id"),
            1 => ("reasoning_delta", "message_id"),
            _ => ("tool_call_args", "tool_call_id"),
        };
        out.extend_from_slice(b"{\"event\":{\"kind\":\"");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\",\"");
        out.extend_from_slice(id_key.as_bytes());
        out.extend_from_slice(b"\":");
        crate::json::write_str(out, self.id);
        out.extend_from_slice(b",\"delta\":");
        crate::json::write_str(out, self.delta);
        if let Some(t) = self.timestamp {
            out.extend_from_slice(b",\"timestamp\":");
            out.extend_from_slice(itoa::Buffer::new().format(t).as_bytes());
        }
        if let Some(d) = self.origin {
            out.extend_from_slice(b",\"origin\":");
            crate::json::write_str(out, d.as_str());
        }
        out.extend_from_slice(b"}}");
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

fn write_delta_step(step: &Step, out: &mut Vec<u8>) -> bool {
    match Delta::of(step) {
        Some(d) => {
            d.write_json(out);
            true
        }
        None => false,
    }
}

/// First byte of steps in the log's compact form; a JSON array's is `[`.
const COMPACT: u8 = 0;

/// The steps as the run log keeps them: deltas only (most of a stream) in
/// a compact binary form, a third the size of their JSON, which both the
/// log's memory and its writing cost follow; anything else as
/// [`write_steps`]'s JSON. [`read_log_steps`] reads either.
pub fn write_log_steps<'a, I>(steps: I, out: &mut Vec<u8>) -> Result<(), serde_json::Error>
where
    I: IntoIterator<Item = &'a Step>,
    I::IntoIter: Clone,
{
    let steps = steps.into_iter();
    let deltas = steps.clone().map(Delta::of);
    if steps.clone().next().is_some() && deltas.clone().all(|d| d.is_some()) {
        out.push(COMPACT);
        for d in deltas.flatten() {
            d.write_compact(out);
        }
        return Ok(());
    }
    write_steps_of(steps, out)
}

/// Why logged steps could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum LogStepsError {
    #[error("core events: {0}")]
    Json(#[from] serde_json::Error),
    #[error("compact core events: {0}")]
    Compact(&'static str),
}

/// Reads what [`write_log_steps`] (or [`write_steps`]) wrote.
pub fn read_log_steps(bytes: &[u8]) -> Result<Vec<Step>, LogStepsError> {
    let Some((&COMPACT, mut rest)) = bytes.split_first() else {
        return Ok(serde_json::from_slice(bytes)?);
    };
    let mut steps = Vec::new();
    while !rest.is_empty() {
        let (step, after) = read_compact(rest)?;
        steps.push(step);
        rest = after;
    }
    Ok(steps)
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

/// A string after its length (see [`write_len`]).
fn read_str(bytes: &[u8]) -> Result<(String, &[u8]), LogStepsError> {
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
    let rest = bytes.get(at..).unwrap_or_default();
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
    use crate::event::{EventKind, Role};

    #[test]
    fn steps_round_trip_through_json() {
        let steps = vec![
            Step::Begin(Setup::of(&EncodeContext {
                thread_id: Some("t".into()),
                extension_frames: true,
                ..EncodeContext::default()
            })),
            Step::Event(Box::new(Event::new(EventKind::TextStart {
                message_id: "m".into(),
                role: Role::Assistant,
                name: None,
            }))),
            Step::Event(Box::new(
                Event::new(EventKind::TextDelta {
                    message_id: "m".into(),
                    delta: "hé\u{2028}".into(),
                })
                .with_timestamp(Some(5)),
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
                    0 => EventKind::TextDelta {
                        message_id: id,
                        delta,
                    },
                    1 => EventKind::ReasoningDelta {
                        message_id: id,
                        delta,
                    },
                    2 => EventKind::ToolCallArgs {
                        tool_call_id: id,
                        delta,
                    },
                    3 => EventKind::TextEnd { message_id: id },
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
        /// The direct writer gives serde's bytes, for deltas of any text,
        /// with or without time, origin and extras, beside other steps.
        #[test]
        fn written_steps_are_serdes_bytes(steps in proptest::collection::vec(delta_step(), 0..6)) {
            let mut out = Vec::new();
            write_steps(&steps, &mut out).unwrap();
            proptest::prop_assert_eq!(
                String::from_utf8(out).unwrap(),
                String::from_utf8(serde_json::to_vec(&steps).unwrap()).unwrap()
            );
        }

        /// The log's form reads back as the steps written, compact (deltas
        /// only) or JSON (anything else among them).
        #[test]
        fn log_steps_read_back_as_written(steps in proptest::collection::vec(delta_step(), 0..6)) {
            let mut out = Vec::new();
            write_log_steps(&steps, &mut out).unwrap();
            let compact = !steps.is_empty() && steps.iter().all(|s| Delta::of(s).is_some());
            proptest::prop_assert_eq!(out.first() == Some(&COMPACT), compact);
            proptest::prop_assert_eq!(read_log_steps(&out).unwrap(), steps);
        }

        /// Bytes that are not what it wrote give an error, never a panic:
        /// every cut of a compact record, and any bytes after the mark.
        #[test]
        fn broken_compact_steps_are_an_error(
            steps in proptest::collection::vec(delta_step(), 1..4),
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
        ) {
            let mut out = Vec::new();
            write_log_steps(&steps, &mut out).unwrap();
            if out.first() == Some(&COMPACT) {
                for cut in 1..out.len() {
                    // A cut between two whole records reads as fewer steps.
                    if let Ok(fewer) = read_log_steps(&out[..cut]) {
                        proptest::prop_assert!(fewer.len() < steps.len());
                    }
                }
            }
            let mut bytes = vec![COMPACT];
            bytes.extend(junk);
            let _ = read_log_steps(&bytes);
        }
    }

    /// A text delta, as most of a stream is, takes a third of its JSON.
    #[test]
    fn a_logged_delta_is_a_third_of_its_json() {
        let steps = [Step::Event(Box::new(Event::new(EventKind::TextDelta {
            message_id: "m1".into(),
            delta: "@1764030000000000;xxxxxxxx".into(),
        })))];
        let (mut json, mut log) = (Vec::new(), Vec::new());
        write_steps(&steps, &mut json).unwrap();
        write_log_steps(&steps, &mut log).unwrap();
        assert_eq!((json.len(), log.len()), (88, 33));
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
