//! Builds the conversation messages a run produced from its events, so the
//! gateway can keep history for dialects whose clients send only new messages
//! (AG-Kit) and agents that need all of it (AG-UI, HAI, Vercel).
//!
//! The shape follows AG-UI's history convention, which every request
//! translator reads: an assistant message with its text and tool calls, then
//! one `tool` message per result, then the next assistant message.

use serde_json::Value;

use crate::event::{Event, EventKind, Role};
use crate::request::{Message, Part, ToolCall};

#[derive(Debug, Default)]
pub struct MessageAssembler {
    done: Vec<Message>,
    /// The assistant message being written, if any.
    current: Option<Message>,
    /// Tool results seen while `current` is open: they follow it in history.
    results: Vec<Message>,
    message_id: Option<String>,
    counter: u64,
    /// A reasoning message started: its text is a part of its own.
    reasoning_started: bool,
}

impl MessageAssembler {
    /// `message_id` names the first assistant message (the gateway keeps it
    /// equal to the id the client sees).
    pub fn new(message_id: Option<String>) -> Self {
        MessageAssembler {
            message_id,
            ..Default::default()
        }
    }

    fn current(&mut self) -> &mut Message {
        let (message_id, counter) = (&mut self.message_id, &mut self.counter);
        self.current.get_or_insert_with(|| {
            let id = message_id.take().unwrap_or_else(|| {
                *counter += 1;
                format!("asm-{}", counter)
            });
            Message {
                id,
                role: Role::Assistant,
                ..Default::default()
            }
        })
    }

    /// Closes the assistant message: later text starts a new one, after the
    /// tool results.
    fn seal(&mut self) {
        if let Some(m) = self.current.take() {
            self.done.push(m);
        }
        self.done.append(&mut self.results);
    }

    pub fn observe(&mut self, event: &Event) {
        match &event.kind {
            EventKind::TextStart { role, .. } if *role != Role::Assistant => {}
            EventKind::TextDelta { delta, .. } => {
                if !self.results.is_empty() {
                    self.seal();
                }
                let m = self.current();
                match m.content.last_mut() {
                    Some(Part::Text { text }) => text.push_str(delta),
                    _ => m.content.push(Part::Text {
                        text: delta.clone(),
                    }),
                }
            }
            EventKind::ReasoningStart { .. } => self.reasoning_started = true,
            // Reasoning is kept in its place among the text and calls (an
            // AG-UI agent reads it back as a reasoning message).
            EventKind::ReasoningDelta { delta, .. } => {
                if !self.results.is_empty() {
                    self.seal();
                }
                let fresh = std::mem::take(&mut self.reasoning_started);
                let m = self.current();
                match m.content.last_mut() {
                    Some(Part::Reasoning { text }) if !fresh => text.push_str(delta),
                    _ => m.content.push(Part::Reasoning {
                        text: delta.clone(),
                    }),
                }
            }
            EventKind::ToolCallStart {
                tool_call_id,
                tool_name,
                ..
            } => {
                if !self.results.is_empty() {
                    self.seal();
                }
                self.current().content.push(Part::ToolCall(ToolCall {
                    id: tool_call_id.clone(),
                    name: tool_name.clone(),
                    arguments: String::new(),
                    extra: Default::default(),
                }));
            }
            EventKind::ToolCallArgs {
                tool_call_id,
                delta,
            } => {
                if let Some(tc) = self
                    .current
                    .as_mut()
                    .and_then(|m| m.tool_calls_mut().find(|t| &t.id == tool_call_id))
                {
                    tc.arguments.push_str(delta);
                }
            }
            EventKind::ToolCallResult {
                tool_call_id,
                message_id,
                content,
            } => {
                let text = match content {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                self.counter += 1;
                self.results.push(Message {
                    id: message_id
                        .clone()
                        .unwrap_or_else(|| format!("asm-{}", self.counter)),
                    role: Role::Tool,
                    content: vec![Part::Text { text }],
                    tool_call_id: Some(tool_call_id.clone()),
                    ..Default::default()
                });
            }
            EventKind::ToolCallError {
                tool_call_id,
                error,
                input_invalid: false,
            } => {
                self.counter += 1;
                self.results.push(Message {
                    id: format!("asm-{}", self.counter),
                    role: Role::Tool,
                    tool_call_id: Some(tool_call_id.clone()),
                    error: Some(error.clone()),
                    ..Default::default()
                });
            }
            _ => {}
        }
    }

    /// The messages of the run, in history order.
    pub fn finish(mut self) -> Vec<Message> {
        self.seal();
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: EventKind) -> Event {
        Event::new(kind)
    }

    #[test]
    fn text_tool_result_text_gives_history_order() {
        let mut a = MessageAssembler::new(Some("m1".into()));
        for k in [
            EventKind::text_delta("t", "Let me "),
            EventKind::text_delta("t", "check."),
            EventKind::ToolCallStart {
                tool_call_id: "c1".into(),
                tool_name: "get_weather".into(),
                parent_message_id: None,
            },
            EventKind::ToolCallArgs {
                tool_call_id: "c1".into(),
                delta: "{\"city\":".into(),
            },
            EventKind::ToolCallArgs {
                tool_call_id: "c1".into(),
                delta: "\"x\"}".into(),
            },
            EventKind::ToolCallResult {
                tool_call_id: "c1".into(),
                message_id: Some("r1".into()),
                content: Value::String("sunny".into()),
            },
            EventKind::text_delta("t2", "Sunny."),
        ] {
            a.observe(&ev(k));
        }
        let msgs = a.finish();
        assert_eq!(msgs.len(), 3);
        assert_eq!(msgs[0].id, "m1");
        assert_eq!(msgs[0].text(), "Let me check.");
        assert_eq!(
            msgs[0].tool_calls().next().unwrap().arguments,
            "{\"city\":\"x\"}"
        );
        assert_eq!(msgs[1].role, Role::Tool);
        assert_eq!(msgs[1].tool_call_id.as_deref(), Some("c1"));
        assert_eq!(msgs[1].text(), "sunny");
        assert_eq!(msgs[2].role, Role::Assistant);
        assert_eq!(msgs[2].text(), "Sunny.");
    }

    #[test]
    fn reasoning_and_text_after_a_call_keep_their_place() {
        let mut a = MessageAssembler::new(Some("m1".into()));
        let start = |id: &str| EventKind::ReasoningStart {
            message_id: id.into(),
        };
        let think = |id: &str, d: &str| EventKind::ReasoningDelta {
            message_id: id.into(),
            delta: d.into(),
        };
        let say = |d: &str| EventKind::TextDelta {
            message_id: "t".into(),
            delta: d.into(),
        };
        for k in [
            start("r1"),
            think("r1", "a"),
            think("r1", "b"),
            say("x"),
            EventKind::ToolCallStart {
                tool_call_id: "c1".into(),
                tool_name: "f".into(),
                parent_message_id: None,
            },
            say("y"),
            start("r2"),
            think("r2", "c"),
        ] {
            a.observe(&ev(k));
        }
        let msgs = a.finish();
        assert_eq!(msgs.len(), 1);
        assert_eq!(
            msgs[0].content,
            vec![
                Part::Reasoning { text: "ab".into() },
                Part::Text { text: "x".into() },
                Part::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "f".into(),
                    arguments: String::new(),
                    extra: Default::default()
                }),
                Part::Text { text: "y".into() },
                Part::Reasoning { text: "c".into() },
            ]
        );
    }

    #[test]
    fn nothing_said_gives_no_messages() {
        assert!(MessageAssembler::new(None).finish().is_empty());
    }
}
