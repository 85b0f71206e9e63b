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

/// `{"event":{"kind":..,"<id>":..,"delta":..[,"timestamp":..][,"origin":..]}}`
/// for a delta without extras (serde's order: the flattened kind's fields,
/// then the event's own); false, writing nothing, for anything else.
fn write_delta_step(step: &Step, out: &mut Vec<u8>) -> bool {
    use crate::event::EventKind as K;
    let Step::Event(ev) = step else { return false };
    if !ev.extra.is_empty() {
        return false;
    }
    let (kind, id_key, id, delta) = match &ev.kind {
        K::TextDelta { message_id, delta } => ("text_delta", "message_id", message_id, delta),
        K::ReasoningDelta { message_id, delta } => {
            ("reasoning_delta", "message_id", message_id, delta)
        }
        K::ToolCallArgs {
            tool_call_id,
            delta,
        } => ("tool_call_args", "tool_call_id", tool_call_id, delta),
        _ => return false,
    };
    out.extend_from_slice(b"{\"event\":{\"kind\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"");
    out.extend_from_slice(id_key.as_bytes());
    out.extend_from_slice(b"\":");
    crate::json::write_str(out, id);
    out.extend_from_slice(b",\"delta\":");
    crate::json::write_str(out, delta);
    if let Some(t) = ev.timestamp {
        out.extend_from_slice(b",\"timestamp\":");
        out.extend_from_slice(itoa::Buffer::new().format(t).as_bytes());
    }
    if let Some(d) = ev.origin {
        out.extend_from_slice(b",\"origin\":");
        crate::json::write_str(out, d.as_str());
    }
    out.extend_from_slice(b"}}");
    true
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
    }
}
