//! What is open in a stream: the run, text and reasoning messages, tool calls,
//! collaboration messages. Every encoder keeps one so that `finish` and error
//! paths can close exactly what is open, in one shared way.

use crate::event::{Event, EventKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunState {
    #[default]
    NotStarted,
    Running,
    Ended,
}

/// Tracks open items in the order they were opened.
#[derive(Debug, Clone, Default)]
pub struct OpenTracker {
    pub run: RunState,
    texts: Vec<String>,
    reasoning: Vec<String>,
    reasoning_phases: Vec<String>,
    /// (id, tool name)
    tool_calls: Vec<(String, String)>,
    collabs: Vec<String>,
    steps: Vec<Option<String>>,
}

fn remove(list: &mut Vec<String>, id: &str) -> bool {
    match list.iter().position(|x| x == id) {
        Some(i) => {
            list.remove(i);
            true
        }
        None => false,
    }
}

impl OpenTracker {
    /// Records the effect of `event` (call after encoding it).
    pub fn observe(&mut self, event: &Event) {
        match &event.kind {
            EventKind::RunStarted { .. } => self.run = RunState::Running,
            EventKind::RunFinished { .. } | EventKind::RunError { .. } => {
                self.run = RunState::Ended;
                *self = OpenTracker {
                    run: RunState::Ended,
                    ..Default::default()
                };
            }
            EventKind::StepStarted { name } => self.steps.push(name.clone()),
            EventKind::StepFinished { .. } => {
                self.steps.pop();
            }
            EventKind::TextStart { message_id, .. } => self.texts.push(message_id.clone()),
            EventKind::TextEnd { message_id } => {
                remove(&mut self.texts, message_id);
            }
            EventKind::ReasoningPhaseStart { message_id } => {
                self.reasoning_phases.push(message_id.clone())
            }
            EventKind::ReasoningPhaseEnd { message_id } => {
                remove(&mut self.reasoning_phases, message_id);
            }
            EventKind::ReasoningStart { message_id } => self.reasoning.push(message_id.clone()),
            EventKind::ReasoningEnd { message_id } => {
                remove(&mut self.reasoning, message_id);
            }
            EventKind::ToolCallStart {
                tool_call_id,
                tool_name,
                ..
            } => self
                .tool_calls
                .push((tool_call_id.clone(), tool_name.clone())),
            EventKind::ToolCallEnd { tool_call_id } => {
                self.tool_calls.retain(|(id, _)| id != tool_call_id);
            }
            EventKind::CollabStart { message_id, .. } => self.collabs.push(message_id.clone()),
            EventKind::CollabEnd { message_id } => {
                remove(&mut self.collabs, message_id);
            }
            _ => {}
        }
    }

    pub fn run_started(&self) -> bool {
        self.run != RunState::NotStarted
    }

    pub fn run_open(&self) -> bool {
        self.run == RunState::Running
    }

    pub fn text_open(&self, id: &str) -> bool {
        self.texts.iter().any(|x| x == id)
    }

    pub fn open_texts(&self) -> &[String] {
        &self.texts
    }

    pub fn reasoning_open(&self, id: &str) -> bool {
        self.reasoning.iter().any(|x| x == id)
    }

    pub fn reasoning_phase_open(&self, id: &str) -> bool {
        self.reasoning_phases.iter().any(|x| x == id)
    }

    pub fn collab_open(&self, id: &str) -> bool {
        self.collabs.iter().any(|x| x == id)
    }

    pub fn tool_call_open(&self, id: &str) -> bool {
        self.tool_calls.iter().any(|(x, _)| x == id)
    }

    pub fn tool_name(&self, id: &str) -> Option<&str> {
        self.tool_calls
            .iter()
            .find(|(x, _)| x == id)
            .map(|(_, n)| n.as_str())
    }

    pub fn open_tool_calls(&self) -> impl Iterator<Item = &str> {
        self.tool_calls.iter().map(|(id, _)| id.as_str())
    }

    /// Whether anything inside the run is still open.
    pub fn anything_open(&self) -> bool {
        !(self.texts.is_empty()
            && self.reasoning.is_empty()
            && self.reasoning_phases.is_empty()
            && self.tool_calls.is_empty()
            && self.collabs.is_empty()
            && self.steps.is_empty())
    }

    /// The events that close everything open inside the run, innermost kinds
    /// first (messages and calls before reasoning phases and steps). The run
    /// itself is left to the caller, which knows how its dialect ends one.
    pub fn closing_events(&self) -> Vec<Event> {
        let mut out = Vec::new();
        for id in self.texts.iter().rev() {
            out.push(Event::new(EventKind::TextEnd {
                message_id: id.clone(),
            }));
        }
        for id in self.reasoning.iter().rev() {
            out.push(Event::new(EventKind::ReasoningEnd {
                message_id: id.clone(),
            }));
        }
        for id in self.reasoning_phases.iter().rev() {
            out.push(Event::new(EventKind::ReasoningPhaseEnd {
                message_id: id.clone(),
            }));
        }
        for (id, _) in self.tool_calls.iter().rev() {
            out.push(Event::new(EventKind::ToolCallEnd {
                tool_call_id: id.clone(),
            }));
        }
        for id in self.collabs.iter().rev() {
            out.push(Event::new(EventKind::CollabEnd {
                message_id: id.clone(),
            }));
        }
        for name in self.steps.iter().rev() {
            out.push(Event::new(EventKind::StepFinished { name: name.clone() }));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: EventKind) -> Event {
        Event::new(kind)
    }

    #[test]
    fn closes_what_is_open_and_nothing_else() {
        let mut t = OpenTracker::default();
        for e in [
            ev(EventKind::RunStarted {
                thread_id: None,
                run_id: None,
                parent_run_id: None,
                message_id: None,
                input: None,
            }),
            ev(EventKind::TextStart {
                message_id: "a".into(),
                role: Default::default(),
                name: None,
            }),
            ev(EventKind::TextEnd {
                message_id: "a".into(),
            }),
            ev(EventKind::TextStart {
                message_id: "b".into(),
                role: Default::default(),
                name: None,
            }),
            ev(EventKind::ToolCallStart {
                tool_call_id: "t".into(),
                tool_name: "x".into(),
                parent_message_id: None,
            }),
        ] {
            t.observe(&e);
        }
        assert!(t.run_open());
        assert_eq!(t.tool_name("t"), Some("x"));
        let kinds: Vec<_> = t.closing_events().into_iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [
                EventKind::TextEnd {
                    message_id: "b".into()
                },
                EventKind::ToolCallEnd {
                    tool_call_id: "t".into()
                }
            ]
        );
        t.observe(&ev(EventKind::RunError {
            message: "x".into(),
            code: None,
        }));
        assert!(!t.anything_open());
        assert!(t.run_started() && !t.run_open());
    }
}
