//! The shape of a well-formed stream, owned once for every dialect pair.
//!
//! [`Shaper`] sits between a decoder and an encoder (see
//! [`Translator`](crate::Translator)) and hands the encoder a stream that
//! keeps these rules, whatever the upstream sent:
//! - the run comes first: anything inside a run before `RunStarted` (or after
//!   a finished run) gets a `RunStarted` first; a `RunStarted` while a run is
//!   open is dropped;
//! - starts come before deltas: an orphan text, reasoning or tool-argument
//!   delta gets its start (a tool's name from an earlier start, else
//!   `unknown`); text after its message ended opens it again (nothing said is
//!   lost), arguments after their call ended are dropped (they are complete;
//!   the last [`MAX_ENDED`] ended calls are remembered, so that a long stream
//!   of calls keeps bounded state);
//! - a tool call's result (or error, or denial) ends its arguments: an open
//!   call gets its `ToolCallEnd` first;
//! - ends of things never opened are dropped, and so are starts of what is
//!   already open;
//! - what is open is closed before `RunFinished` (messages, reasoning,
//!   collaboration messages; a cancelled run is left as it stopped) and text
//!   and reasoning before `RunError`. Tool calls whose arguments never ended
//!   are left to the encoder, whose dialect decides what an incomplete call
//!   becomes (AG-Kit leaves one with cut JSON open so the client runs
//!   nothing; Vercel fails it);
//! - nothing follows `RunError`; a second `RunFinished` for the same run is dropped;
//! - a text message starts with its first content: one that ends empty
//!   never reaches the encoder (an AG-UI upstream opens and closes an empty
//!   message as the parent of its tool calls);
//! - a `MessagesSnapshot` that holds the result of a call the stream left
//!   open gives it that result (or error) first;
//! - tool calls with no result by the end of the run are the client's to
//!   answer: a `RunFinished` that says nothing of its outcome gets
//!   `Outcome::Success { pending_tool_call_ids }`.
//!
//! A start the stage synthesizes carries the timestamp of the event that
//! needed it.
//!
//! Encoders then map kinds to their wire and keep only their own dialect's
//! rules. How a cut stream ends (`Encoder::finish`/`fail`) stays the encoder's.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::event::{Event, EventKind, Outcome, Role};
use crate::track::{OpenList, OpenTracker, RunState};

#[derive(Debug, Default)]
pub struct Shaper {
    open: OpenTracker,
    errored: bool,
    /// Tool names by call id, for a start synthesized before orphan
    /// arguments; forgotten with the call's result (later arguments are
    /// dropped as ended).
    tool_names: HashMap<String, String>,
    /// Text starts held until their first content, by message id (a list:
    /// every delta asks it, and it is nearly always empty).
    held: OpenList<Event>,
    /// Calls of the current run with no result yet, in start order.
    pending: OpenList<()>,
    /// Calls whose arguments ended (until started again), the last
    /// [`MAX_ENDED`] remembered: a stream of many calls must not grow it
    /// without bound.
    ended: HashSet<String>,
    /// `ended`'s insertion order, for forgetting the oldest.
    ended_order: VecDeque<String>,
}

/// How many ended calls the shaper remembers to drop their late arguments.
pub const MAX_ENDED: usize = 4096;

/// The tool name of a start synthesized for a call never announced.
pub const UNKNOWN_TOOL: &str = "unknown";

fn run_started() -> Event {
    Event::new(EventKind::run_started())
}

impl Shaper {
    pub fn new() -> Self {
        Shaper::default()
    }

    /// Shapes one event: appends to `out` the events the encoder should see
    /// before it, and says what becomes of the event itself (kept as it is,
    /// so the hot path copies nothing; replaced; or dropped).
    pub fn shape(&mut self, ev: &Event, out: &mut Vec<Event>) -> Keep {
        if self.errored {
            return Keep::Drop;
        }
        let from = out.len();
        let keep = self.rules(ev, out);
        for e in out.iter().skip(from) {
            self.observe(e);
        }
        match &keep {
            Keep::Event => self.observe(ev),
            Keep::Replaced(e) => self.observe(e),
            Keep::Drop => {}
        }
        keep
    }

    /// [`shape`](Self::shape), with the event itself (or its replacement)
    /// appended too: everything the encoder should see, in order. For
    /// callers that own their events anyway (tests, scripted streams).
    pub fn push(&mut self, ev: &Event, out: &mut Vec<Event>) {
        match self.shape(ev, out) {
            Keep::Event => out.push(ev.clone()),
            Keep::Replaced(e) => out.push(*e),
            Keep::Drop => {}
        }
    }

    /// A whole stream, shaped.
    pub fn shape_all<'a>(events: impl IntoIterator<Item = &'a Event>) -> Vec<Event> {
        let mut s = Shaper::new();
        let mut out = Vec::new();
        for ev in events {
            s.push(ev, &mut out);
        }
        out
    }

    fn ensure_run(&mut self, out: &mut Vec<Event>) {
        if self.open.run != RunState::Running {
            out.push(run_started());
            // observed by `shape`, but later rules here ask before that
            self.open.run = RunState::Running;
            self.pending.clear();
        }
    }

    /// Closes what is open: text and reasoning, and collaboration messages
    /// too when `all` (before `RunFinished`). Never tool calls (see above).
    fn close(&mut self, all: bool, out: &mut Vec<Event>) {
        self.held.clear();
        for e in self.open.closing_events() {
            let keep = match e.kind {
                EventKind::TextEnd { .. }
                | EventKind::ReasoningEnd { .. }
                | EventKind::ReasoningPhaseEnd { .. } => true,
                EventKind::CollabEnd { .. } => all,
                _ => false,
            };
            if keep {
                out.push(e);
            }
        }
    }

    fn rules(&mut self, ev: &Event, out: &mut Vec<Event>) -> Keep {
        match &ev.kind {
            EventKind::RunStarted { .. } => self.run_started(),
            EventKind::RunFinished { outcome, .. } => self.run_finished(ev, outcome, out),
            EventKind::RunError { .. } => {
                // After a finished run an error is still said (AG-UI takes one).
                if self.open.run == RunState::NotStarted {
                    self.ensure_run(out);
                }
                self.close(false, out);
                self.errored = true;
                Keep::Event
            }
            EventKind::TextStart { message_id, .. } => self.text_start(ev, message_id, out),
            EventKind::TextDelta { message_id, delta } => {
                self.text_delta(ev, message_id, delta, out)
            }
            EventKind::TextEnd { message_id } => {
                if self.held.remove(message_id) {
                    return Keep::Drop; // it never said anything
                }
                self.if_open(self.open.text_open(message_id))
            }
            EventKind::ReasoningStart { message_id } => {
                self.ensure_run(out);
                if self.open.reasoning_open(message_id) {
                    return Keep::Drop; // already open
                }
                Keep::Event
            }
            EventKind::ReasoningDelta { message_id, .. } => {
                self.ensure_run(out);
                if !self.open.reasoning_open(message_id) {
                    let start = EventKind::ReasoningStart {
                        message_id: message_id.clone(),
                    };
                    out.push(Event::new(start).with_timestamp(ev.timestamp));
                }
                Keep::Event
            }
            EventKind::ReasoningEnd { message_id } => {
                self.if_open(self.open.reasoning_open(message_id))
            }
            EventKind::ReasoningPhaseEnd { message_id } => {
                self.if_open(self.open.reasoning_phase_open(message_id))
            }
            EventKind::ToolCallStart {
                tool_call_id,
                tool_name,
                ..
            } => self.tool_start(tool_call_id, tool_name, out),
            EventKind::ToolCallArgs { tool_call_id, .. } => self.tool_args(ev, tool_call_id, out),
            EventKind::ToolCallEnd { tool_call_id } => {
                self.if_open(self.open.tool_call_open(tool_call_id))
            }
            EventKind::ToolCallResult { tool_call_id, .. }
            | EventKind::ToolCallError { tool_call_id, .. }
            | EventKind::ToolCallDenied { tool_call_id } => self.tool_outcome(tool_call_id, out),
            EventKind::MessagesSnapshot { messages } => {
                self.ensure_run(out);
                self.settle_from_snapshot(messages, ev.timestamp, out);
                Keep::Event
            }
            EventKind::CollabEnd { message_id } => {
                let open = self.open.collab_open(message_id);
                self.if_open(open)
            }
            // Opaque: written as the encoder sees fit, run or not.
            EventKind::Unknown { .. } => Keep::Event,
            _ => {
                self.ensure_run(out);
                Keep::Event
            }
        }
    }

    fn run_started(&mut self) -> Keep {
        if self.open.run == RunState::Running {
            return Keep::Drop; // a run inside the run: nothing new
        }
        self.pending.clear();
        self.held.clear();
        Keep::Event
    }

    /// One end per run, what is open closed first, and the calls left for
    /// the client named when the end says nothing of its outcome.
    fn run_finished(&mut self, ev: &Event, outcome: &Outcome, out: &mut Vec<Event>) -> Keep {
        if self.open.run == RunState::Ended {
            return Keep::Drop; // one end per run
        }
        self.ensure_run(out);
        if !matches!(outcome, Outcome::Cancelled { .. }) {
            self.close(true, out);
        }
        self.held.clear();
        if !matches!(outcome, Outcome::Unspecified) || self.pending.is_empty() {
            return Keep::Event;
        }
        let mut e = ev.clone();
        if let EventKind::RunFinished { outcome, .. } = &mut e.kind {
            *outcome = Outcome::Success {
                pending_tool_call_ids: std::mem::take(&mut self.pending)
                    .ids()
                    .map(str::to_string)
                    .collect(),
            };
        }
        Keep::Replaced(Box::new(e))
    }

    /// A text start waits for its first content (see the module's rules).
    fn text_start(&mut self, ev: &Event, message_id: &str, out: &mut Vec<Event>) -> Keep {
        self.ensure_run(out);
        if !self.open.text_open(message_id) && !self.held.contains(message_id) {
            self.held.push(message_id.to_string(), ev.clone());
        }
        Keep::Drop
    }

    fn text_delta(
        &mut self,
        ev: &Event,
        message_id: &str,
        delta: &str,
        out: &mut Vec<Event>,
    ) -> Keep {
        self.ensure_run(out);
        if self.held.contains(message_id) {
            if delta.is_empty() {
                return Keep::Drop;
            }
            out.extend(self.held.take(message_id));
        } else if !self.open.text_open(message_id) {
            let start = EventKind::text_start(message_id.to_string());
            out.push(Event::new(start).with_timestamp(ev.timestamp));
        }
        Keep::Event
    }

    fn tool_start(&mut self, tool_call_id: &str, tool_name: &str, out: &mut Vec<Event>) -> Keep {
        self.ensure_run(out);
        if self.open.tool_call_open(tool_call_id) {
            return Keep::Drop; // already open
        }
        self.tool_names
            .insert(tool_call_id.to_string(), tool_name.to_string());
        if !self.pending.contains(tool_call_id) {
            self.pending.push(tool_call_id.to_string(), ());
        }
        Keep::Event
    }

    /// Arguments of a call not open: dropped after its end, else its start
    /// first (its name if an earlier start said it).
    fn tool_args(&mut self, ev: &Event, tool_call_id: &str, out: &mut Vec<Event>) -> Keep {
        self.ensure_run(out);
        if self.open.tool_call_open(tool_call_id) {
            return Keep::Event;
        }
        if self.ended.contains(tool_call_id) {
            return Keep::Drop;
        }
        let name = self
            .tool_names
            .get(tool_call_id)
            .cloned()
            .unwrap_or_else(|| UNKNOWN_TOOL.to_string());
        self.tool_names
            .insert(tool_call_id.to_string(), name.clone());
        if !self.pending.contains(tool_call_id) {
            self.pending.push(tool_call_id.to_string(), ());
        }
        let start = EventKind::ToolCallStart {
            tool_call_id: tool_call_id.to_string(),
            tool_name: name,
            parent_message_id: None,
        };
        out.push(Event::new(start).with_timestamp(ev.timestamp));
        Keep::Event
    }

    /// A result, error or denial ends its call's arguments.
    fn tool_outcome(&mut self, tool_call_id: &str, out: &mut Vec<Event>) -> Keep {
        self.ensure_run(out);
        if self.open.tool_call_open(tool_call_id) {
            out.push(Event::new(EventKind::ToolCallEnd {
                tool_call_id: tool_call_id.to_string(),
            }));
        }
        self.pending.remove_all(tool_call_id);
        self.tool_names.remove(tool_call_id);
        Keep::Event
    }

    /// A snapshot holding the result of a call the stream left without one
    /// settles it: the result (or the error, where the snapshot says the tool
    /// failed) goes ahead of the snapshot, as if the stream had said it. Some
    /// upstreams say a failure only there (ag-ui-langgraph sends no
    /// `TOOL_CALL_RESULT` for a tool message with an error status), and a
    /// client that reads results from the stream would keep the call open.
    fn settle_from_snapshot(
        &mut self,
        messages: &[crate::request::Message],
        timestamp: Option<i64>,
        out: &mut Vec<Event>,
    ) {
        for m in messages.iter().filter(|m| m.role == Role::Tool) {
            let Some(id) = m.tool_call_id.as_deref() else {
                continue;
            };
            if !self.pending.contains(id) {
                continue;
            }
            if self.open.tool_call_open(id) {
                out.push(Event::new(EventKind::ToolCallEnd {
                    tool_call_id: id.to_string(),
                }));
            }
            let text = m.text();
            let kind = match &m.error {
                Some(error) => EventKind::ToolCallError {
                    tool_call_id: id.to_string(),
                    error: if text.is_empty() { error.clone() } else { text },
                    input_invalid: false,
                },
                None => EventKind::ToolCallResult {
                    tool_call_id: id.to_string(),
                    message_id: Some(m.id.clone()),
                    content: serde_json::Value::String(text),
                },
            };
            out.push(Event::new(kind).with_timestamp(timestamp));
            self.pending.remove_all(id);
            self.tool_names.remove(id);
        }
    }

    /// An end is kept only for something open (there is nothing to close
    /// otherwise), and only inside a run.
    fn if_open(&self, open: bool) -> Keep {
        if open && self.open.run_open() {
            Keep::Event
        } else {
            Keep::Drop
        }
    }

    fn observe(&mut self, ev: &Event) {
        match &ev.kind {
            EventKind::ToolCallStart { tool_call_id, .. } => {
                self.ended.remove(tool_call_id);
            }
            EventKind::ToolCallEnd { tool_call_id } if self.ended.insert(tool_call_id.clone()) => {
                self.ended_order.push_back(tool_call_id.clone());
                // Entries of calls started again stay in the order until
                // their turn: the order bounds both.
                if self.ended_order.len() > MAX_ENDED {
                    if let Some(old) = self.ended_order.pop_front() {
                        self.ended.remove(&old);
                    }
                }
            }
            _ => {}
        }
        self.open.observe(ev);
    }
}

/// What becomes of the event [`Shaper::shape`] was given (after the events
/// it appended).
#[derive(Debug, Clone, PartialEq)]
pub enum Keep {
    Event,
    Replaced(Box<Event>),
    Drop,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shaped(kinds: Vec<EventKind>) -> Vec<EventKind> {
        let mut s = Shaper::new();
        let mut all = Vec::new();
        for k in kinds {
            let ev = Event::new(k);
            let mut pre = Vec::new();
            let keep = s.shape(&ev, &mut pre);
            all.extend(pre.into_iter().map(|e| e.kind));
            match keep {
                Keep::Event => all.push(ev.kind),
                Keep::Replaced(e) => all.push(e.kind),
                Keep::Drop => {}
            }
        }
        all
    }

    fn names(kinds: &[EventKind]) -> Vec<&'static str> {
        kinds.iter().map(EventKind::name).collect()
    }

    fn tool_start(id: &str) -> EventKind {
        EventKind::ToolCallStart {
            tool_call_id: id.into(),
            tool_name: "f".into(),
            parent_message_id: Some("m0".into()),
        }
    }

    fn args(id: &str) -> EventKind {
        EventKind::ToolCallArgs {
            tool_call_id: id.into(),
            delta: "{}".into(),
        }
    }

    #[test]
    fn run_first_and_starts_before_deltas() {
        let out = shaped(vec![
            EventKind::text_delta("m", "a"),
            EventKind::ReasoningDelta {
                message_id: "r".into(),
                delta: "x".into(),
            },
            args("t"),
        ]);
        assert_eq!(
            names(&out),
            [
                "run_started",
                "text_start",
                "text_delta",
                "reasoning_start",
                "reasoning_delta",
                "tool_call_start",
                "tool_call_args"
            ]
        );
        assert!(
            matches!(&out[5], EventKind::ToolCallStart { tool_name, .. } if tool_name == UNKNOWN_TOOL)
        );
    }

    #[test]
    fn ends_of_what_was_never_opened_are_dropped() {
        let out = shaped(vec![
            EventKind::run_started(),
            EventKind::text_end("m"),
            EventKind::ToolCallEnd {
                tool_call_id: "t".into(),
            },
            EventKind::ReasoningEnd {
                message_id: "r".into(),
            },
            EventKind::CollabEnd {
                message_id: "c".into(),
            },
            EventKind::text_start("m"),
            EventKind::text_start("m"),
            EventKind::text_delta("m", "a"),
            EventKind::text_end("m"),
            EventKind::text_end("m"),
        ]);
        assert_eq!(
            names(&out),
            ["run_started", "text_start", "text_delta", "text_end"]
        );
    }

    #[test]
    fn everything_is_closed_before_the_end_and_nothing_follows_an_error() {
        let out = shaped(vec![
            EventKind::run_started(),
            EventKind::text_start("m"),
            EventKind::text_delta("m", "a"),
            tool_start("t"),
            args("t"),
            EventKind::ToolCallResult {
                tool_call_id: "t".into(),
                message_id: None,
                content: "ok".into(),
            },
            EventKind::run_finished(Outcome::Unspecified),
            EventKind::run_finished(Outcome::Unspecified),
            EventKind::text_start("n"),
            EventKind::text_delta("n", "b"),
            tool_start("u"),
            EventKind::RunError {
                message: "x".into(),
                code: None,
            },
            EventKind::text_delta("n", "c"),
            EventKind::run_finished(Outcome::Unspecified),
        ]);
        assert_eq!(
            names(&out),
            [
                "run_started",
                "text_start",
                "text_delta",
                "tool_call_start",
                "tool_call_args",
                // a result ends the arguments
                "tool_call_end",
                "tool_call_result",
                "text_end",
                "run_finished",
                // a new run for content after the end
                "run_started",
                "text_start",
                "text_delta",
                "tool_call_start",
                // text closed before the error; the call is the encoder's
                "text_end",
                "run_error"
            ]
        );
        // the first run's call had its result: nothing pending
        assert_eq!(out[8], EventKind::run_finished(Outcome::Unspecified));
    }

    #[test]
    fn a_result_ends_the_arguments_and_nothing_is_added_to_them_after() {
        let out = shaped(vec![
            EventKind::run_started(),
            tool_start("t"),
            EventKind::ToolCallError {
                tool_call_id: "t".into(),
                error: "e".into(),
                input_invalid: false,
            },
            args("t"),
            EventKind::text_start("m"),
            EventKind::text_delta("m", "a"),
            EventKind::text_end("m"),
            EventKind::text_delta("m", "late"),
        ]);
        assert_eq!(
            names(&out),
            [
                "run_started",
                "tool_call_start",
                "tool_call_end",
                "tool_call_error",
                "text_start",
                "text_delta",
                "text_end",
                // text after its end: the message again
                "text_start",
                "text_delta"
            ]
        );
    }

    #[test]
    fn a_cancelled_run_is_left_as_it_stopped() {
        let out = shaped(vec![
            EventKind::run_started(),
            EventKind::text_start("m"),
            EventKind::text_delta("m", "a"),
            EventKind::run_finished(Outcome::Cancelled { reason: None }),
        ]);
        assert_eq!(
            names(&out),
            ["run_started", "text_start", "text_delta", "run_finished"]
        );
    }

    #[test]
    fn an_empty_text_message_never_reaches_the_encoder() {
        // pydantic-ai's AGUIAdapter: an empty message as the parent of a call
        let out = shaped(vec![
            EventKind::run_started(),
            EventKind::text_start("m0"),
            EventKind::text_end("m0"),
            tool_start("t"),
            args("t"),
            EventKind::ToolCallEnd {
                tool_call_id: "t".into(),
            },
            EventKind::text_start("m1"),
            EventKind::text_delta("m1", ""),
            EventKind::text_delta("m1", "hi"),
            EventKind::text_end("m1"),
            EventKind::text_start("m2"),
            EventKind::run_finished(Outcome::Unspecified),
        ]);
        assert_eq!(
            names(&out),
            [
                "run_started",
                "tool_call_start",
                "tool_call_args",
                "tool_call_end",
                "text_start",
                "text_delta",
                "text_end",
                "run_finished"
            ]
        );
    }

    #[test]
    fn calls_left_without_a_result_are_pending_at_the_end() {
        let out = shaped(vec![
            EventKind::run_started(),
            tool_start("a"),
            EventKind::ToolCallEnd {
                tool_call_id: "a".into(),
            },
            tool_start("b"),
            EventKind::ToolCallResult {
                tool_call_id: "b".into(),
                message_id: None,
                content: "ok".into(),
            },
            args("c"),
            EventKind::run_finished(Outcome::Unspecified),
        ]);
        assert_eq!(
            out.last(),
            Some(&EventKind::run_finished(Outcome::Success {
                pending_tool_call_ids: vec!["a".into(), "c".into()]
            }))
        );
        // an outcome the source gave is kept
        let out = shaped(vec![
            EventKind::run_started(),
            tool_start("a"),
            EventKind::run_finished(Outcome::Cancelled { reason: None }),
        ]);
        assert_eq!(
            out.last(),
            Some(&EventKind::run_finished(Outcome::Cancelled {
                reason: None
            }))
        );
    }

    #[test]
    fn a_snapshot_settles_the_calls_the_stream_left_open() {
        // ag-ui-langgraph: a tool that failed has no TOOL_CALL_RESULT; its
        // tool message (with `error`) is only in the MESSAGES_SNAPSHOT.
        let tool = |id: &str, call: &str, text: &str, error: Option<&str>| {
            let mut m = crate::request::Message::text_message(id, Role::Tool, text);
            m.tool_call_id = Some(call.into());
            m.error = error.map(str::to_string);
            m
        };
        let snapshot = EventKind::MessagesSnapshot {
            messages: vec![
                tool("m-a", "a", "Error: it broke", Some("error")),
                tool("m-b", "b", "fine", None),
                // settled in the stream already: not again
                tool("m-c", "c", "done", None),
            ],
        };
        let out = shaped(vec![
            EventKind::run_started(),
            tool_start("a"),
            EventKind::ToolCallEnd {
                tool_call_id: "a".into(),
            },
            tool_start("b"),
            tool_start("c"),
            EventKind::ToolCallResult {
                tool_call_id: "c".into(),
                message_id: None,
                content: "done".into(),
            },
            snapshot.clone(),
            EventKind::run_finished(Outcome::Unspecified),
        ]);
        let settled: Vec<&EventKind> = out
            .iter()
            .skip_while(|k| !matches!(k, EventKind::ToolCallResult { tool_call_id, .. } if tool_call_id == "c"))
            .skip(1)
            .collect();
        assert_eq!(
            settled,
            [
                &EventKind::ToolCallError {
                    tool_call_id: "a".into(),
                    error: "Error: it broke".into(),
                    input_invalid: false,
                },
                // the call's arguments end before its result
                &EventKind::ToolCallEnd {
                    tool_call_id: "b".into(),
                },
                &EventKind::ToolCallResult {
                    tool_call_id: "b".into(),
                    message_id: Some("m-b".into()),
                    content: "fine".into(),
                },
                &snapshot,
                // nothing left for the client: no pending calls
                &EventKind::run_finished(Outcome::Unspecified),
            ]
        );
    }

    #[test]
    fn a_stream_of_many_calls_keeps_bounded_state_and_still_drops_late_args() {
        let mut s = Shaper::new();
        let mut out = Vec::new();
        s.push(&Event::new(EventKind::run_started()), &mut out);
        let calls = MAX_ENDED + 100;
        for i in 0..calls {
            let id = format!("t{i}");
            for k in [
                tool_start(&id),
                args(&id),
                EventKind::ToolCallEnd {
                    tool_call_id: id.clone(),
                },
                EventKind::ToolCallResult {
                    tool_call_id: id.clone(),
                    message_id: None,
                    content: "ok".into(),
                },
            ] {
                s.push(&Event::new(k), &mut out);
            }
        }
        assert!(s.tool_names.is_empty(), "names go with the results");
        assert_eq!(s.ended.len(), MAX_ENDED);
        assert_eq!(s.ended_order.len(), MAX_ENDED);
        // A recent call's late arguments are still dropped.
        let before = out.len();
        s.push(&Event::new(args(&format!("t{}", calls - 1))), &mut out);
        assert_eq!(out.len(), before);
    }
}
