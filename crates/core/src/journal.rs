//! What a [`Translator`](crate::Translator)'s encoder was given, noted with
//! where its bytes went, for callers that keep the client's stream (the
//! gateway's run log): replaying the steps into a fresh encoder of the same
//! dialect gives it the state the live one had, so a follower knows what the
//! client has open without decoding the client's bytes.

use serde::{Deserialize, Serialize};

use crate::codec::Encoder;
use crate::event::{Event, EventKind};
use crate::sink::Sink;

/// One call the encoder got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// `encode` of this (shaped) event.
    Event(Event),
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
    /// Makes the same call on `encoder`.
    pub fn replay(&self, encoder: &mut dyn Encoder, sink: &mut Sink) {
        match self {
            Step::Event(ev) => encoder.encode_to(ev, sink),
            Step::Finish => encoder.finish_to(sink),
            Step::Fail { message, code } => encoder.fail_to(message, code.as_deref(), sink),
        }
    }

    /// The event the step stands for in a summary of the stream: a failure
    /// is its `RunError`; the end marker is none.
    pub fn event(&self) -> Option<Event> {
        match self {
            Step::Event(ev) => Some(ev.clone()),
            Step::Finish => None,
            Step::Fail { message, code } => Some(Event::new(EventKind::RunError {
                message: message.clone(),
                code: code.clone(),
            })),
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
    use crate::event::Role;

    #[test]
    fn steps_round_trip_through_json() {
        let steps = vec![
            Step::Event(Event::new(EventKind::TextStart {
                message_id: "m".into(),
                role: Role::Assistant,
                name: None,
            })),
            Step::Event(
                Event::new(EventKind::TextDelta {
                    message_id: "m".into(),
                    delta: "hé\u{2028}".into(),
                })
                .with_timestamp(Some(5)),
            ),
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
