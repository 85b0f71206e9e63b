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
}
