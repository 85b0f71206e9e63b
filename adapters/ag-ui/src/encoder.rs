//! Core events -> AG-UI SSE (`data: {json}\n\n`, nothing else: the client
//! splits on a blank line and reads only `data:` lines).
//!
//! A mapper from shaped events: every event it is given came out of
//! `babelgate_core::shape` (live, or replayed from a journal), which already
//! keeps the run first, starts before content, ends only of what is open,
//! text and reasoning closed before the run's end and nothing after an
//! error. Each kind (or family of kinds) has its function below, and none
//! re-checks those rules. What stays here is AG-UI's own:
//! - RUN_STARTED with the request's thread/run ids (and a run of its own
//!   for an opaque event the shape stage lets through run or not);
//! - chunk lanes, which the client opens and closes itself: a start or an
//!   end of what a lane holds is the lane's (`ours_to_end`);
//! - steps by name and subagent, subagents, reasoning spans apart from
//!   reasoning messages, subagent tags that must agree with their item;
//! - tool calls, steps and subagents still open at the run's end, which
//!   the shape stage leaves to the dialect;
//! - a cut stream's end: `finish` and `fail` start or close what they need
//!   themselves (a cut stream never reaches a terminal event);
//! - a last resort for anything the client would still refuse (carried in a
//!   CUSTOM event), checked by a [`ClientView`], the encoder's copy of what
//!   `@ag-ui/client` has open after its chunk expansion and verification.
//!
//! Core kinds AG-UI has no event for become CUSTOM events named after the
//! kind (see docs/mapping/ag-ui.md).

use babelgate_core::event::Interrupt;

use babelgate_core::{Dialect, EncodeContext, Encoder, Event, EventKind, Outcome, Role, Sink};
use serde_json::{json, Map, Value};

use crate::chunks::{Chunk, ChunkKind};
use crate::request::messages_to_wire_with;
use crate::verify::{ClientView, Plain, RunPhase};
use crate::wire::*;

type Obj = Map<String, Value>;

pub struct AgUiEncoder {
    ctx: EncodeContext,
    view: ClientView,
    stream: Stream,
    /// Core events made from a chunk that was written back verbatim.
    skip: usize,
    /// The assistant message that tool calls from other dialects (which have
    /// no `parentMessageId`) belong to: without one the client makes a
    /// message per call, and parallel calls no longer share their message.
    turn_message: Option<String>,
    /// Events the binary form could not carry (dropped, for metrics).
    unframed: u64,
    /// Whether the frequent events are written in place (tests turn it off
    /// to hold that path to the general one).
    fast: bool,
}

/// Where the stream this encoder writes stands, beside what the client has
/// open (`ClientView::phase`, which says whether a run is running).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stream {
    /// No RUN_STARTED written yet.
    Fresh,
    /// The ids of the last run started (its end says them; a later run
    /// keeps the thread).
    Started { thread_id: String, run_id: String },
    /// `finish` or `fail` ended the stream: nothing more is written.
    Ended,
}

impl AgUiEncoder {
    pub fn new(ctx: EncodeContext) -> Self {
        AgUiEncoder {
            ctx,
            view: ClientView::default(),
            stream: Stream::Fresh,
            skip: 0,
            turn_message: None,
            unframed: 0,
            fast: true,
        }
    }
}

/// A new event object: `type`, then the source's timestamp when it fits.
fn base(ty: &str, ev: Option<&Event>) -> Obj {
    let mut o = Obj::new();
    o.insert("type".into(), ty.into());
    if let Some(ts) = ev.and_then(|e| e.timestamp) {
        if (-MAX_SAFE..=MAX_SAFE).contains(&ts) {
            o.insert("timestamp".into(), ts.into());
        }
    }
    o
}

/// Writes back the fields an AG-UI source had and the model has no slot for.
fn put_extras(o: &mut Obj, ev: &Event) {
    if let Some(extra) = ev.extra_from(Dialect::AgUi) {
        for (k, v) in extra {
            if !o.contains_key(k) && extra_field_ok(k, v) {
                o.insert(k.clone(), v.clone());
            }
        }
    }
}

fn tag(ev: &Event) -> Option<String> {
    ev.extra_from(Dialect::AgUi)
        .and_then(|x| x.get("subagentRunId"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn note<'a>(ev: &'a Event, key: &str) -> Option<&'a Value> {
    ev.note(Dialect::AgUi, key)
}

fn put_tag(o: &mut Obj, tag: &Option<String>) {
    if let Some(t) = tag {
        o.insert("subagentRunId".into(), t.clone().into());
    }
}

fn text_role(role: Role) -> &'static str {
    match role {
        Role::Developer => "developer",
        Role::System => "system",
        Role::User => "user",
        // TEXT_MESSAGE_START takes only the four roles that stream text.
        _ => "assistant",
    }
}

/// A CUSTOM event for a core kind AG-UI has no event for.
fn custom(name: &str, value: Value, ev: &Event) -> Obj {
    let mut o = base(CUSTOM, Some(ev));
    o.insert("name".into(), name.into());
    o.insert("value".into(), value);
    o
}

/// An event about one item: `type`, the timestamp, the item's id.
fn item(ty: &str, key: &str, id: &str, ev: &Event) -> Obj {
    let mut o = base(ty, Some(ev));
    o.insert(key.into(), id.into());
    o
}

/// Content of one item: [`item`] and its `delta`.
fn content(ty: &str, key: &str, id: &str, delta: &str, ev: &Event) -> Obj {
    let mut o = item(ty, key, id, ev);
    o.insert("delta".into(), delta.into());
    o
}

fn opt(o: &mut Obj, key: &str, v: &Option<String>) {
    if let Some(v) = v {
        o.insert(key.into(), v.clone().into());
    }
}

/// `usage` as `TokenUsage[]`, or nothing when the source's shape is another.
fn usage(v: &Option<Value>) -> Option<Value> {
    let v = v.as_ref()?;
    if token_usage(v) {
        return Some(v.clone());
    }
    let wrapped = Value::Array(vec![v.clone()]);
    token_usage(&wrapped).then_some(wrapped)
}

impl AgUiEncoder {
    fn write(&mut self, o: Obj, out: &mut Sink) {
        if !self.ctx.binary {
            return out.json(&Value::Object(o));
        }
        // Straight from the object to protobuf: no JSON text between.
        if !out.try_event(|body| babelgate_proto::write_object(body, o, None).is_ok()) {
            // A type the schema lacks: the encoder's own choice, never the
            // client's input, so dropped and counted.
            self.unframed += 1;
        }
    }

    /// Writes one event the client must accept. What it would refuse is
    /// repaired (a disagreeing subagent tag dropped) or, as a last resort,
    /// carried inside a CUSTOM event rather than lost.
    fn emit(&mut self, mut o: Obj, out: &mut Sink) {
        let reason = match self.view.accept(&o) {
            Ok(()) => return self.write(o, out),
            Err(reason) => reason,
        };
        if o.remove("subagentRunId").is_some() && self.view.accept(&o).is_ok() {
            return self.write(o, out);
        }
        let mut c = base(CUSTOM, None);
        c.insert("name".into(), "babelgate.rejected_event".into());
        c.insert("value".into(), json!({"event": o, "reason": reason}));
        if self.view.accept(&c).is_ok() {
            self.write(c, out);
        }
    }

    /// The thread and run ids of the last run started.
    fn ids(&self) -> (Option<String>, Option<String>) {
        match &self.stream {
            Stream::Started { thread_id, run_id } => {
                (Some(thread_id.clone()), Some(run_id.clone()))
            }
            Stream::Fresh | Stream::Ended => (None, None),
        }
    }

    fn running(&self) -> bool {
        self.view.phase == RunPhase::Running
    }

    /// RUN_STARTED, for the run the core says or the request's, else minted.
    fn start_run(&mut self, ev: Option<&Event>, out: &mut Sink) {
        let (thread, run, parent, input) = match ev.map(|e| &e.kind) {
            Some(EventKind::RunStarted {
                thread_id,
                run_id,
                parent_run_id,
                input,
                ..
            }) => (
                thread_id.clone(),
                run_id.clone(),
                parent_run_id.clone(),
                input.clone(),
            ),
            _ => (None, None, None, None),
        };
        let (last_thread, _) = self.ids();
        let first = self.stream == Stream::Fresh;
        let thread = thread
            .or(last_thread)
            .or_else(|| self.ctx.thread_id.clone())
            .unwrap_or_else(|| self.ctx.ids.next("thread"));
        let run = run
            .or_else(|| if first { self.ctx.run_id.clone() } else { None })
            .unwrap_or_else(|| self.ctx.ids.next("run"));
        let mut o = base(RUN_STARTED, ev);
        o.insert("threadId".into(), thread.clone().into());
        o.insert("runId".into(), run.clone().into());
        opt(&mut o, "parentRunId", &parent);
        if let Some(input) = input.filter(run_agent_input_like) {
            o.insert("input".into(), input);
        }
        if let Some(ev) = ev {
            put_extras(&mut o, ev);
        }
        let mut bare = base(RUN_STARTED, ev);
        bare.insert("threadId".into(), thread.clone().into());
        bare.insert("runId".into(), run.clone().into());
        self.stream = Stream::Started {
            thread_id: thread,
            run_id: run,
        };
        self.emit(o, out);
        if !self.running() {
            // An input or extras the client refuses: the run still starts,
            // for what the shape stage put in it.
            self.emit(bare, out);
        }
    }

    /// The run an opaque event (one the shape stage lets through, run or
    /// not) is written in.
    fn ensure_run(&mut self, out: &mut Sink) {
        if !self.running() {
            self.start_run(None, out);
        }
    }

    /// Ends for open text, reasoning and tool calls (RUN_ERROR and
    /// RUN_FINISHED both want them closed). Items a chunk lane holds are left
    /// to the client, which closes them itself before a run-level event.
    fn close_streams(&mut self, out: &mut Sink) {
        for id in self.view.open_texts() {
            if self.view.text_open(&id) && !self.view.lanes.holds(ChunkKind::Text, &id) {
                let mut o = base(TEXT_MESSAGE_END, None);
                o.insert("messageId".into(), id.into());
                self.emit(o, out);
            }
        }
        for id in self.view.open_reasoning() {
            if self.view.reasoning_open(&id) && !self.view.lanes.holds(ChunkKind::Reasoning, &id) {
                let mut o = base(REASONING_MESSAGE_END, None);
                o.insert("messageId".into(), id.into());
                self.emit(o, out);
            }
        }
        for id in self.view.open_spans() {
            let mut o = base(REASONING_END, None);
            o.insert("messageId".into(), id.into());
            self.emit(o, out);
        }
        for id in self.view.open_tools() {
            if self.view.tool_open(&id) && !self.view.lanes.holds(ChunkKind::Tool, &id) {
                let mut o = base(TOOL_CALL_END, None);
                o.insert("toolCallId".into(), id.into());
                self.emit(o, out);
            }
        }
    }

    /// Everything RUN_FINISHED requires closed.
    fn close_for_finish(&mut self, out: &mut Sink) {
        self.close_streams(out);
        for (owner, name) in self.view.open_steps().into_iter().rev() {
            let mut o = base(STEP_FINISHED, None);
            o.insert("stepName".into(), name.into());
            put_tag(&mut o, &owner);
            self.emit(o, out);
        }
        for id in self.view.open_subagents().into_iter().rev() {
            let mut o = base(SUBAGENT_FINISHED, None);
            o.insert("subagentRunId".into(), id.into());
            self.emit(o, out);
        }
    }

    /// RUN_FINISHED, after what the client wants closed that is still open
    /// (tool calls, steps and subagents the shape stage leaves open, and
    /// everything on a cut stream's `finish`).
    fn run_finished(&mut self, ev: Option<&Event>, out: &mut Sink) {
        self.close_for_finish(out);
        let mut o = base(RUN_FINISHED, ev);
        let (mut thread, mut run) = self.ids();
        if let Some(EventKind::RunFinished {
            thread_id,
            run_id,
            result,
            outcome,
            usage: u,
            ..
        }) = ev.map(|e| &e.kind)
        {
            thread = thread_id.clone().or(thread);
            run = run_id.clone().or(run);
            o.insert("threadId".into(), thread.clone().unwrap_or_default().into());
            o.insert("runId".into(), run.clone().unwrap_or_default().into());
            if let Some(r) = result.as_ref().filter(|r| !r.is_null()) {
                o.insert("result".into(), r.clone());
            }
            if let Some(oc) = self.outcome(outcome, ev) {
                o.insert("outcome".into(), oc);
            }
            if let Some(u) = usage(u) {
                o.insert("usage".into(), u);
            }
        }
        o.entry("threadId")
            .or_insert_with(|| thread.unwrap_or_default().into());
        o.entry("runId")
            .or_insert_with(|| run.unwrap_or_default().into());
        if let Some(ev) = ev {
            put_extras(&mut o, ev);
        }
        self.emit(o, out);
    }

    fn outcome(&mut self, outcome: &Outcome, ev: Option<&Event>) -> Option<Value> {
        match outcome {
            Outcome::Unspecified => None,
            Outcome::Success {
                pending_tool_call_ids,
            } => {
                let mut o = Obj::new();
                o.insert("type".into(), "success".into());
                if !pending_tool_call_ids.is_empty() {
                    o.insert("pendingToolCallIds".into(), json!(pending_tool_call_ids));
                }
                Some(Value::Object(o))
            }
            Outcome::Interrupt { interrupts } => {
                let same = ev.is_some_and(|e| e.origin == Some(Dialect::AgUi));
                let mut list: Vec<Value> = interrupts
                    .iter()
                    .map(|i| interrupt_to_wire(i, same))
                    .collect();
                if list.is_empty() {
                    // The schema wants at least one: the run still waits.
                    let id = self.ctx.ids.next("interrupt");
                    list.push(json!({"id": id, "reason": "interrupt"}));
                }
                Some(json!({"type": "interrupt", "interrupts": list}))
            }
            Outcome::Cancelled { .. } => Some(json!({"type": "cancelled"})),
        }
    }

    fn run_error(&mut self, message: &str, code: Option<&str>, ev: Option<&Event>, out: &mut Sink) {
        if self.running() {
            // Tool calls the shape stage leaves open; everything on `fail`.
            self.close_streams(out);
        }
        let mut o = base(RUN_ERROR, ev);
        o.insert("message".into(), message.into());
        if let Some(c) = code {
            o.insert("code".into(), c.into());
        }
        if let Some(ev) = ev {
            put_extras(&mut o, ev);
        }
        self.emit(o, out);
    }

    /// Writes a chunk back verbatim when the client would expand it into
    /// exactly this event's stream (same-dialect fidelity).
    fn try_chunk(&mut self, ev: &Event, raw: &Value, out: &mut Sink) -> bool {
        let Some(o) = raw.as_object() else {
            return false;
        };
        let Some(kind) = o
            .get("type")
            .and_then(Value::as_str)
            .and_then(ChunkKind::of_chunk_type)
        else {
            return false;
        };
        let id = match (&ev.kind, kind) {
            (
                EventKind::TextStart { message_id, .. } | EventKind::TextDelta { message_id, .. },
                ChunkKind::Text,
            )
            | (
                EventKind::ReasoningStart { message_id }
                | EventKind::ReasoningDelta { message_id, .. },
                ChunkKind::Reasoning,
            )
            | (
                EventKind::ToolCallStart {
                    tool_call_id: message_id,
                    ..
                }
                | EventKind::ToolCallArgs {
                    tool_call_id: message_id,
                    ..
                },
                ChunkKind::Tool,
            ) => message_id,
            _ => return false,
        };
        let Ok(chunk) = Chunk::read(kind, o) else {
            return false;
        };
        let mut lanes = self.view.lanes.clone();
        // The content of a chunk that opens its item came as a second event.
        let follow = match lanes.expand(kind, &chunk) {
            Ok(e) if &e.id == id => usize::from(e.opened.is_some() && e.content.is_some()),
            _ => return false,
        };
        if self.view.accept(o).is_err() {
            return false;
        }
        self.write(o.clone(), out);
        self.skip = follow;
        true
    }

    fn encode_kind(&mut self, ev: &Event, out: &mut Sink) {
        if self.fast && self.encode_plain(ev, out) {
            return;
        }
        use EventKind as K;
        match &ev.kind {
            K::RunStarted { .. } | K::RunFinished { .. } | K::RunError { .. } => {
                self.run_event(ev, out)
            }
            K::StepStarted { name } => self.step_started(ev, name, out),
            K::StepFinished { name } => self.step_finished(ev, name, out),
            K::TextStart { .. } | K::TextDelta { .. } | K::TextEnd { .. } => self.text(ev, out),
            K::ReasoningPhaseStart { .. }
            | K::ReasoningPhaseEnd { .. }
            | K::ReasoningStart { .. }
            | K::ReasoningDelta { .. }
            | K::ReasoningEnd { .. } => self.reasoning(ev, out),
            K::ReasoningEncrypted { .. } => self.reasoning_encrypted(ev, out),
            K::ToolCallStart { .. } | K::ToolCallArgs { .. } | K::ToolCallEnd { .. } => {
                self.tool_call(ev, out)
            }
            K::ToolCallResult { .. } | K::ToolCallError { .. } | K::ToolCallDenied { .. } => {
                self.tool_outcome(ev, out)
            }
            K::StateSnapshot { .. } | K::StateDelta { .. } | K::MessagesSnapshot { .. } => {
                self.state(ev, out)
            }
            K::ActivitySnapshot { .. } | K::ActivityDelta { .. } => self.activity(ev, out),
            K::Source { .. }
            | K::File { .. }
            | K::Data { .. }
            | K::Custom { .. }
            | K::MessageMetadata { .. }
            | K::CollabStart { .. }
            | K::CollabContent { .. }
            | K::CollabEnd { .. } => self.as_custom(ev, out),
            K::SubagentStarted { .. } => self.subagent_started(ev, out),
            K::SubagentFinished { .. } | K::SubagentError { .. } => self.subagent_end(ev, out),
            K::Raw { event, source } => {
                let mut o = base(RAW, Some(ev));
                o.insert("event".into(), event.clone());
                opt(&mut o, "source", source);
                put_extras(&mut o, ev);
                self.emit(o, out);
            }
            K::Unknown { raw } => self.unknown(ev, raw, out),
        }
    }

    fn run_event(&mut self, ev: &Event, out: &mut Sink) {
        match &ev.kind {
            // Already running only in a run this encoder started for an
            // opaque event (`ensure_run`): a second start adds nothing.
            EventKind::RunStarted { .. } if !self.running() => self.start_run(Some(ev), out),
            EventKind::RunFinished { .. } => self.run_finished(Some(ev), out),
            EventKind::RunError { message, code } => {
                self.run_error(message, code.as_deref(), Some(ev), out)
            }
            _ => {}
        }
    }

    fn step_started(&mut self, ev: &Event, name: &Option<String>, out: &mut Sink) {
        let t = tag(ev);
        self.view.close_lane(&t);
        let name = name.clone().unwrap_or_else(|| self.ctx.ids.next("step"));
        if self.view.step_open(&t, &name) {
            // The same step again: the client wants the first one finished.
            let mut o = base(STEP_FINISHED, None);
            o.insert("stepName".into(), name.clone().into());
            put_tag(&mut o, &t);
            self.emit(o, out);
        }
        let mut o = base(STEP_STARTED, Some(ev));
        o.insert("stepName".into(), name.into());
        put_extras(&mut o, ev);
        self.emit(o, out);
    }

    fn step_finished(&mut self, ev: &Event, name: &Option<String>, out: &mut Sink) {
        let t = tag(ev);
        self.view.close_lane(&t);
        let name = name
            .clone()
            .or_else(|| self.view.last_step(&t).map(str::to_string));
        if let Some(name) = name.filter(|n| self.view.step_open(&t, n)) {
            let mut o = base(STEP_FINISHED, Some(ev));
            o.insert("stepName".into(), name.into());
            put_extras(&mut o, ev);
            self.emit(o, out);
        }
    }

    /// TEXT_MESSAGE_START, _CONTENT and _END.
    fn text(&mut self, ev: &Event, out: &mut Sink) {
        self.view.close_lane(&tag(ev));
        let mut o = match &ev.kind {
            EventKind::TextStart {
                message_id,
                role,
                name,
            } => {
                if self.view.lanes.holds(ChunkKind::Text, message_id) {
                    return; // opened by a lane, which goes on
                }
                let mut o = item(TEXT_MESSAGE_START, "messageId", message_id, ev);
                o.insert("role".into(), text_role(*role).into());
                opt(&mut o, "name", name);
                o
            }
            EventKind::TextDelta { message_id, delta } => {
                content(TEXT_MESSAGE_CONTENT, "messageId", message_id, delta, ev)
            }
            EventKind::TextEnd { message_id } => {
                // Still held by a lane (another producer's): the client ends
                // it when that lane closes, and refuses a second end then.
                if !self.ours_to_end(ChunkKind::Text, message_id) {
                    return;
                }
                item(TEXT_MESSAGE_END, "messageId", message_id, ev)
            }
            _ => return,
        };
        put_extras(&mut o, ev);
        self.emit(o, out);
    }

    /// REASONING_START and _END (a span), REASONING_MESSAGE_START, _CONTENT
    /// and _END (a reasoning message).
    fn reasoning(&mut self, ev: &Event, out: &mut Sink) {
        use EventKind as K;
        self.view.close_lane(&tag(ev));
        let mut o = match &ev.kind {
            K::ReasoningPhaseStart { message_id } => {
                if self.view.span_open(message_id) {
                    return;
                }
                item(REASONING_START, "messageId", message_id, ev)
            }
            K::ReasoningPhaseEnd { message_id } => {
                if !self.view.span_open(message_id) {
                    return;
                }
                item(REASONING_END, "messageId", message_id, ev)
            }
            K::ReasoningStart { message_id } => {
                if self.view.lanes.holds(ChunkKind::Reasoning, message_id) {
                    return; // as for text
                }
                let mut o = item(REASONING_MESSAGE_START, "messageId", message_id, ev);
                o.insert("role".into(), "reasoning".into());
                o
            }
            K::ReasoningDelta { message_id, delta } => content(
                REASONING_MESSAGE_CONTENT,
                "messageId",
                message_id,
                delta,
                ev,
            ),
            K::ReasoningEnd { message_id } => {
                // As for text: a lane's item is the lane's to end.
                if !self.ours_to_end(ChunkKind::Reasoning, message_id) {
                    return;
                }
                item(REASONING_MESSAGE_END, "messageId", message_id, ev)
            }
            _ => return,
        };
        put_extras(&mut o, ev);
        self.emit(o, out);
    }

    fn reasoning_encrypted(&mut self, ev: &Event, out: &mut Sink) {
        let EventKind::ReasoningEncrypted {
            subtype,
            entity_id,
            value,
        } = &ev.kind
        else {
            return;
        };
        let mut o = base(REASONING_ENCRYPTED_VALUE, Some(ev));
        let subtype = if subtype == "tool-call" {
            "tool-call"
        } else {
            "message"
        };
        o.insert("subtype".into(), subtype.into());
        o.insert("entityId".into(), entity_id.clone().into());
        o.insert("encryptedValue".into(), value.clone().into());
        put_extras(&mut o, ev);
        self.emit(o, out);
    }

    /// TOOL_CALL_START, _ARGS and _END.
    fn tool_call(&mut self, ev: &Event, out: &mut Sink) {
        self.view.close_lane(&tag(ev));
        let mut o = match &ev.kind {
            EventKind::ToolCallStart {
                tool_call_id,
                tool_name,
                parent_message_id,
            } => {
                if self.view.lanes.holds(ChunkKind::Tool, tool_call_id) {
                    return; // as for text
                }
                let parent = self.parent_message(ev, parent_message_id);
                let mut o = item(TOOL_CALL_START, "toolCallId", tool_call_id, ev);
                o.insert("toolCallName".into(), tool_name.clone().into());
                opt(&mut o, "parentMessageId", &parent);
                o
            }
            EventKind::ToolCallArgs {
                tool_call_id,
                delta,
            } => content(TOOL_CALL_ARGS, "toolCallId", tool_call_id, delta, ev),
            EventKind::ToolCallEnd { tool_call_id } => {
                // As for text: a lane's item is the lane's to end.
                if !self.ours_to_end(ChunkKind::Tool, tool_call_id) {
                    return;
                }
                item(TOOL_CALL_END, "toolCallId", tool_call_id, ev)
            }
            _ => return,
        };
        put_extras(&mut o, ev);
        self.emit(o, out);
    }

    /// The message a call belongs to: its own, or for another dialect's call
    /// (which has none) the turn's, minted by the first.
    fn parent_message(&mut self, ev: &Event, parent: &Option<String>) -> Option<String> {
        if parent.is_none() && ev.origin.is_some_and(|d| d != Dialect::AgUi) {
            let ids = &mut self.ctx.ids;
            Some(
                self.turn_message
                    .get_or_insert_with(|| ids.next("msg"))
                    .clone(),
            )
        } else {
            parent.clone()
        }
    }

    /// Whether an end of `id` is the encoder's to write: the client has it
    /// open, and no chunk lane holds it (the lane ends it itself).
    fn ours_to_end(&self, kind: ChunkKind, id: &str) -> bool {
        let open = match kind {
            ChunkKind::Text => self.view.text_open(id),
            ChunkKind::Reasoning => self.view.reasoning_open(id),
            ChunkKind::Tool => self.view.tool_open(id),
        };
        open && !self.view.lanes.holds(kind, id)
    }

    /// TOOL_CALL_RESULT, for a result, an error or a denial.
    fn tool_outcome(&mut self, ev: &Event, out: &mut Sink) {
        match &ev.kind {
            EventKind::ToolCallResult {
                tool_call_id,
                message_id,
                content,
            } => {
                let content = if tool_content(content) {
                    content.clone()
                } else {
                    Value::String(content.to_string())
                };
                self.tool_result(ev, tool_call_id, message_id.clone(), content, None, out);
            }
            EventKind::ToolCallError {
                tool_call_id,
                error,
                input_invalid,
            } => {
                let mut meta = Map::new();
                meta.insert("error".into(), true.into());
                if *input_invalid {
                    meta.insert("inputInvalid".into(), true.into());
                }
                let (content, meta) = (error.clone().into(), Some(Value::Object(meta)));
                self.tool_result(ev, tool_call_id, None, content, meta, out);
            }
            EventKind::ToolCallDenied { tool_call_id } => {
                let content = "Tool execution denied.".into();
                let meta = Some(json!({"denied": true}));
                self.tool_result(ev, tool_call_id, None, content, meta, out);
            }
            _ => {}
        }
    }

    /// STATE_SNAPSHOT, STATE_DELTA (a CUSTOM event when not a patch the
    /// client can apply: still delivered, as data) and MESSAGES_SNAPSHOT.
    fn state(&mut self, ev: &Event, out: &mut Sink) {
        let mut o = match &ev.kind {
            EventKind::StateSnapshot { snapshot } => {
                self.view.close_lane(&tag(ev));
                let mut o = base(STATE_SNAPSHOT, Some(ev));
                o.insert("snapshot".into(), snapshot.clone());
                o
            }
            EventKind::StateDelta { patch } => {
                self.view.close_lane(&tag(ev));
                if !json_patch(patch) {
                    return self.emit(custom("state_delta", patch.clone(), ev), out);
                }
                let mut o = base(STATE_DELTA, Some(ev));
                o.insert("delta".into(), patch.clone());
                o
            }
            EventKind::MessagesSnapshot { messages } => {
                self.view.close_all_lanes();
                let own_only = ev.origin != Some(Dialect::AgUi);
                let mut o = base(MESSAGES_SNAPSHOT, Some(ev));
                let list = messages
                    .iter()
                    .flat_map(|m| messages_to_wire_with(m, own_only))
                    .collect();
                o.insert("messages".into(), Value::Array(list));
                o
            }
            _ => return,
        };
        put_extras(&mut o, ev);
        self.emit(o, out);
    }

    /// ACTIVITY_SNAPSHOT and ACTIVITY_DELTA (a CUSTOM event when not a
    /// patch the client can apply).
    fn activity(&mut self, ev: &Event, out: &mut Sink) {
        let mut o = match &ev.kind {
            EventKind::ActivitySnapshot {
                message_id,
                activity_type,
                content,
                replace,
            } => {
                let mut o = base(ACTIVITY_SNAPSHOT, Some(ev));
                o.insert("messageId".into(), message_id.clone().into());
                o.insert("activityType".into(), activity_type.clone().into());
                o.insert("content".into(), object_or_wrapped(content));
                if let Some(r) = replace {
                    o.insert("replace".into(), (*r).into());
                }
                o
            }
            EventKind::ActivityDelta {
                message_id,
                activity_type,
                patch,
            } => {
                if !json_patch(patch) {
                    self.view.close_lane(&None);
                    let v = json!({"messageId": message_id, "activityType": activity_type, "patch": patch});
                    return self.emit(custom("activity_delta", v, ev), out);
                }
                let mut o = base(ACTIVITY_DELTA, Some(ev));
                o.insert("messageId".into(), message_id.clone().into());
                o.insert("activityType".into(), activity_type.clone().into());
                o.insert("patch".into(), patch.clone());
                o
            }
            _ => return,
        };
        put_extras(&mut o, ev);
        self.emit(o, out);
    }

    /// Core kinds AG-UI has no event for: CUSTOM events named after the kind
    /// (a lasting data part is an activity message instead).
    fn as_custom(&mut self, ev: &Event, out: &mut Sink) {
        let (name, value) = match &ev.kind {
            EventKind::Source {
                source_kind,
                source_id,
                url,
                title,
                media_type,
                filename,
            } => {
                let mut v = Obj::new();
                v.insert("sourceKind".into(), json!(source_kind));
                v.insert("sourceId".into(), source_id.clone().into());
                opt(&mut v, "url", url);
                opt(&mut v, "title", title);
                opt(&mut v, "mediaType", media_type);
                opt(&mut v, "filename", filename);
                ("source".to_string(), Value::Object(v))
            }
            EventKind::File { url, media_type } => {
                ("file".into(), json!({"url": url, "mediaType": media_type}))
            }
            EventKind::Data {
                name,
                id,
                data,
                transient,
                ..
            } => {
                if !*transient {
                    return self.data_activity(ev, name, id, data, out);
                }
                (format!("data-{name}"), data.clone())
            }
            EventKind::Custom { name, value } => {
                self.view.close_lane(&tag(ev));
                let mut o = custom(name, value.clone(), ev);
                put_extras(&mut o, ev);
                return self.emit(o, out);
            }
            EventKind::MessageMetadata { metadata } => {
                ("message_metadata".into(), metadata.clone())
            }
            EventKind::CollabStart {
                message_id,
                from,
                to,
            } => {
                let mut v = Obj::new();
                v.insert("messageId".into(), message_id.clone().into());
                opt(&mut v, "from", from);
                opt(&mut v, "to", to);
                ("collab_start".into(), Value::Object(v))
            }
            EventKind::CollabContent { message_id, delta } => (
                "collab_content".into(),
                json!({"messageId": message_id, "delta": delta}),
            ),
            EventKind::CollabEnd { message_id } => {
                ("collab_end".into(), json!({"messageId": message_id}))
            }
            _ => return,
        };
        self.custom_event(&name, value, ev, out);
    }

    /// Structured content that stays in the conversation: an activity
    /// message the UI renders by its type (same id, same message: later
    /// parts replace earlier ones).
    fn data_activity(
        &mut self,
        ev: &Event,
        name: &str,
        id: &Option<String>,
        data: &Value,
        out: &mut Sink,
    ) {
        let id = id.clone().unwrap_or_else(|| self.ctx.ids.next("data"));
        let mut o = base(ACTIVITY_SNAPSHOT, Some(ev));
        o.insert("messageId".into(), id.into());
        o.insert("activityType".into(), name.into());
        o.insert("content".into(), object_or_wrapped(data));
        self.emit(o, out);
    }

    fn subagent_started(&mut self, ev: &Event, out: &mut Sink) {
        let EventKind::SubagentStarted {
            subagent_run_id,
            name,
            description,
        } = &ev.kind
        else {
            return;
        };
        let mut o = base(SUBAGENT_STARTED, Some(ev));
        o.insert("subagentRunId".into(), subagent_run_id.clone().into());
        o.insert("name".into(), name.clone().into());
        opt(&mut o, "description", description);
        put_extras(&mut o, ev);
        let parent_unknown = o
            .get("parentSubagentRunId")
            .and_then(Value::as_str)
            .is_some_and(|p| !self.view.subagent_known(p));
        if parent_unknown {
            o.remove("parentSubagentRunId");
        }
        if self.view.subagent_known(subagent_run_id) {
            // An id the client already saw in this run cannot start again.
            o.remove("type");
            o.remove("timestamp");
            self.custom_event("subagent_started", Value::Object(o), ev, out);
        } else {
            self.emit(o, out);
        }
    }

    /// SUBAGENT_FINISHED and SUBAGENT_ERROR; a CUSTOM event for a subagent
    /// the client does not have active.
    fn subagent_end(&mut self, ev: &Event, out: &mut Sink) {
        let (id, mut o, fallback) = match &ev.kind {
            EventKind::SubagentFinished {
                subagent_run_id,
                result,
                outcome,
            } => {
                let mut o = base(SUBAGENT_FINISHED, Some(ev));
                o.insert("subagentRunId".into(), subagent_run_id.clone().into());
                if let Some(r) = result.as_ref().filter(|r| !r.is_null()) {
                    o.insert("result".into(), r.clone());
                }
                if let Some(oc) = outcome.as_ref().filter(|oc| subagent_outcome(oc)) {
                    o.insert("outcome".into(), oc.clone());
                }
                (subagent_run_id, o, "subagent_finished")
            }
            EventKind::SubagentError {
                subagent_run_id,
                message,
                code,
            } => {
                let mut o = base(SUBAGENT_ERROR, Some(ev));
                o.insert("subagentRunId".into(), subagent_run_id.clone().into());
                o.insert("message".into(), message.clone().into());
                opt(&mut o, "code", code);
                (subagent_run_id, o, "subagent_error")
            }
            _ => return,
        };
        self.view.close_lane(&Some(id.clone()));
        put_extras(&mut o, ev);
        if self.view.subagent_active(id) {
            self.emit(o, out);
        } else {
            o.remove("type");
            o.remove("timestamp");
            self.custom_event(fallback, Value::Object(o), ev, out);
        }
    }

    /// Our own dialect's event of a type AG-UI does not define, written
    /// back as it came (the client drops types it does not know, with a
    /// warning). One of a defined type came without that type's fields
    /// (another dialect's envelope can say anything): written as it came, it
    /// would break the client's schema, so it goes out as RAW like any
    /// foreign event.
    fn unknown(&mut self, ev: &Event, raw: &Value, out: &mut Sink) {
        match (ev.origin, raw) {
            (Some(Dialect::AgUi), Value::Object(o))
                if o.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| !is_known_type(t)) =>
            {
                self.emit(o.clone(), out);
            }
            _ => {
                self.ensure_run(out);
                let mut o = base(RAW, Some(ev));
                o.insert("event".into(), raw.clone());
                if let Some(d) = ev.origin {
                    o.insert("source".into(), d.as_str().into());
                }
                self.emit(o, out);
            }
        }
    }

    fn custom_event(&mut self, name: &str, value: Value, ev: &Event, out: &mut Sink) {
        self.view.close_lane(&None);
        let o = custom(name, value, ev);
        self.emit(o, out);
    }

    fn tool_result(
        &mut self,
        ev: &Event,
        tool_call_id: &str,
        message_id: Option<String>,
        content: Value,
        metadata: Option<Value>,
        out: &mut Sink,
    ) {
        self.view.close_lane(&tag(ev));
        let message_id = message_id.unwrap_or_else(|| self.ctx.ids.next("msg"));
        let mut o = base(TOOL_CALL_RESULT, Some(ev));
        o.insert("messageId".into(), message_id.into());
        o.insert("toolCallId".into(), tool_call_id.into());
        o.insert("content".into(), content);
        if ev.origin != Some(Dialect::AgUi) {
            // What the Python SDK always writes.
            o.insert("role".into(), "tool".into());
        }
        if let Some(m) = metadata {
            o.insert("metadata".into(), m);
        }
        put_extras(&mut o, ev);
        if o.get("role").is_some_and(|r| r != "tool") {
            o.remove("role");
        }
        self.emit(o, out);
    }
}

/// `{"type":"TY"` and the timestamp `base` would add.
fn open_event(out: &mut Vec<u8>, ty: &str, timestamp: Option<i64>) {
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(ty.as_bytes());
    out.push(b'"');
    if let Some(ts) = timestamp.filter(|ts| (-MAX_SAFE..=MAX_SAFE).contains(ts)) {
        out.extend_from_slice(b",\"timestamp\":");
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, &ts);
    }
}

/// `,"key":"value"` (`key` is the encoder's own and needs no escaping).
fn str_field(out: &mut Vec<u8>, key: &str, value: &str) {
    str_key(out, key);
    babelgate_core::json::write_str(out, value);
}

/// [`item`] in place (left open for more fields); always `true`.
fn plain_item(out: &mut Vec<u8>, ty: &str, ts: Option<i64>, key: &str, id: &str) -> bool {
    open_event(out, ty, ts);
    str_field(out, key, id);
    true
}

/// `,"key":` (`key` is the encoder's own and needs no escaping).
fn str_key(out: &mut Vec<u8>, key: &str) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
}

impl AgUiEncoder {
    /// The frequent events of a running run written straight into `out`:
    /// the bytes `encode_kind` writes for them (same keys, order, escaping
    /// and view changes), without an object map. Only for events with no
    /// AG-UI extras (so no subagent tag, no notes), no chunk lane open and
    /// nothing the client would refuse; `false` (nothing written, nothing
    /// changed) sends the event the general way.
    fn encode_plain(&mut self, ev: &Event, out: &mut Sink) -> bool {
        use EventKind as K;
        if self.ctx.binary || ev.extra_from(Dialect::AgUi).is_some() {
            return false;
        }
        out.try_event(|body| {
            // Rows of the table come closed; the two written here, open.
            let (written, open) = match &ev.kind {
                K::ToolCallStart { .. } => (self.plain_tool_start(ev, body), false),
                K::ToolCallResult { .. } => (self.plain_tool_result(ev, body), true),
                K::StateDelta { .. } | K::StateSnapshot { .. } => {
                    (self.plain_state(ev, body), true)
                }
                _ => (self.plain_item_event(ev, body), false),
            };
            if written && open {
                body.push(b'}');
            }
            written
        })
    }

    /// A start, content or end of a text message, reasoning message or
    /// tool call's arguments, written by the core's fast path from
    /// [`FAST`] (closed).
    fn plain_item_event(&mut self, ev: &Event, out: &mut Vec<u8>) -> bool {
        use EventKind as K;
        use Plain as P;
        let plain = match &ev.kind {
            // TEXT_MESSAGE_START takes four roles; `text_role` maps the rest.
            K::TextStart {
                message_id, role, ..
            } if text_role(*role) == role.as_str() => P::TextStart(message_id),
            K::TextDelta { message_id, .. } => P::TextContent(message_id),
            K::TextEnd { message_id } => P::TextEnd(message_id),
            K::ReasoningStart { message_id } => P::ReasoningStart(message_id),
            K::ReasoningDelta { message_id, .. } => P::ReasoningContent(message_id),
            K::ReasoningEnd { message_id } => P::ReasoningEnd(message_id),
            K::ToolCallArgs { tool_call_id, .. } => P::ToolArgs(tool_call_id),
            K::ToolCallEnd { tool_call_id } => P::ToolEnd(tool_call_id),
            _ => return false,
        };
        self.plain_row(plain, ev, out)
    }

    /// `ev` by its row of [`FAST`], when it has one and the client takes
    /// it as `plain` says.
    fn plain_row(&mut self, plain: Plain<'_>, ev: &Event, out: &mut Vec<u8>) -> bool {
        let Some(writer) = FAST.writer(ev) else {
            return false;
        };
        if !self.view.accept_plain(plain) {
            return false;
        }
        writer.write(out);
        true
    }

    /// STATE_DELTA (a patch the client can apply) and STATE_SNAPSHOT in
    /// place (left open).
    fn plain_state(&mut self, ev: &Event, out: &mut Vec<u8>) -> bool {
        let (ty, key, value) = match &ev.kind {
            EventKind::StateDelta { patch } if json_patch(patch) => (STATE_DELTA, "delta", patch),
            EventKind::StateSnapshot { snapshot } => (STATE_SNAPSHOT, "snapshot", snapshot),
            _ => return false,
        };
        if !self.view.accept_plain(Plain::State) {
            return false;
        }
        open_event(out, ty, ev.timestamp);
        str_key(out, key);
        // Writing a `Value` into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, value);
        true
    }

    /// TOOL_CALL_START by its row of [`FAST`] (closed). Another dialect's
    /// call belongs to the turn's message; the first one mints it, which
    /// the general path does.
    fn plain_tool_start(&mut self, ev: &Event, out: &mut Vec<u8>) -> bool {
        let EventKind::ToolCallStart {
            parent_message_id: None,
            ..
        } = &ev.kind
        else {
            return self.plain_started_call(ev, out);
        };
        if ev.origin.is_none_or(|d| d == Dialect::AgUi) {
            return self.plain_started_call(ev, out);
        }
        let Some(turn) = self.turn_message.clone() else {
            return false;
        };
        let mut adopted = ev.clone();
        if let EventKind::ToolCallStart {
            parent_message_id, ..
        } = &mut adopted.kind
        {
            *parent_message_id = Some(turn);
        }
        self.plain_started_call(&adopted, out)
    }

    /// A TOOL_CALL_START with the parent it is written with.
    fn plain_started_call(&mut self, ev: &Event, out: &mut Vec<u8>) -> bool {
        let EventKind::ToolCallStart {
            tool_call_id,
            parent_message_id,
            ..
        } = &ev.kind
        else {
            return false;
        };
        let plain = Plain::ToolStart {
            id: tool_call_id,
            parent: parent_message_id.as_deref(),
        };
        self.plain_row(plain, ev, out)
    }

    /// TOOL_CALL_RESULT in place (left open).
    fn plain_tool_result(&mut self, ev: &Event, out: &mut Vec<u8>) -> bool {
        let EventKind::ToolCallResult {
            tool_call_id,
            message_id,
            content,
        } = &ev.kind
        else {
            return false;
        };
        // Checked first, so that a refusal leaves nothing changed.
        if !self.running() || !self.view.lanes.is_empty() {
            return false;
        }
        let minted;
        let message_id = match message_id {
            Some(m) => m.as_str(),
            None => {
                minted = self.ctx.ids.next("msg");
                minted.as_str()
            }
        };
        self.view.accept_plain(Plain::ToolResult { message_id });
        plain_item(out, TOOL_CALL_RESULT, ev.timestamp, "messageId", message_id);
        str_field(out, "toolCallId", tool_call_id);
        str_key(out, "content");
        match content {
            Value::String(s) => babelgate_core::json::write_str(out, s),
            c if tool_content(c) => {
                let _ = serde_json::to_writer(&mut *out, c);
            }
            c => babelgate_core::json::write_str(out, &c.to_string()),
        }
        if ev.origin != Some(Dialect::AgUi) {
            str_field(out, "role", "tool");
        }
        true
    }

    /// Every event the general way (tests hold the in-place path to it).
    #[cfg(test)]
    pub(crate) fn general_only(mut self) -> Self {
        self.fast = false;
        self
    }
}

/// ACTIVITY content must be an object.
fn object_or_wrapped(v: &Value) -> Value {
    if v.is_object() {
        v.clone()
    } else {
        json!({ "value": v })
    }
}

fn subagent_outcome(v: &Value) -> bool {
    match v.get("type").and_then(Value::as_str) {
        Some("success") => true,
        Some("suspended") => v.get("interruptIds").is_none_or(|ids| {
            ids.as_array()
                .is_some_and(|a| a.iter().all(Value::is_string))
        }),
        _ => false,
    }
}

/// Enough of a `RunAgentInput` that the client's schema takes it.
fn run_agent_input_like(v: &Value) -> bool {
    v.get("threadId").is_some_and(Value::is_string)
        && v.get("runId").is_some_and(Value::is_string)
        && v.get("messages").is_some_and(Value::is_array)
}

fn interrupt_to_wire(i: &Interrupt, same_dialect: bool) -> Value {
    let mut o = Obj::new();
    o.insert("id".into(), i.id.clone().into());
    o.insert("reason".into(), i.reason.clone().into());
    opt(&mut o, "message", &i.message);
    opt(&mut o, "toolCallId", &i.tool_call_id);
    let mut meta = Obj::new();
    match &i.payload {
        Some(p) if p.is_object() => {
            o.insert("responseSchema".into(), p.clone());
        }
        Some(p) if !p.is_null() => {
            meta.insert("payload".into(), p.clone());
        }
        _ => {}
    }
    if same_dialect {
        for (k, v) in &i.extra {
            if !o.contains_key(k) && extra_field_ok(k, v) {
                o.insert(k.clone(), v.clone());
            }
        }
    } else {
        // Another dialect's interrupt fields: kept where AG-UI keeps extra information.
        meta.extend(i.extra.clone());
    }
    if !meta.is_empty() {
        match o.get_mut("metadata") {
            Some(Value::Object(m)) => {
                for (k, v) in meta {
                    m.entry(k).or_insert(v);
                }
            }
            _ => {
                o.insert("metadata".into(), Value::Object(meta));
            }
        }
    }
    Value::Object(o)
}

impl Encoder for AgUiEncoder {
    fn dialect(&self) -> Dialect {
        Dialect::AgUi
    }

    fn unframed(&self) -> u64 {
        self.unframed
    }

    fn writes_binary(&self) -> bool {
        self.ctx.binary
    }

    /// An explicit end of what a chunk lane holds is refused by
    /// `@ag-ui/client` even from its own upstream: the lane ends the item
    /// itself, when this end closes it or later, and the end comes twice.
    /// On a same-dialect route such a frame is written as mapped, which is
    /// not at all (see `ours_to_end`).
    ///
    /// So is a stream that does not begin with RUN_STARTED ("First event must
    /// be 'RUN_STARTED'"): until a run is running, events are written as
    /// mapped, which begins one; a RUN_STARTED inside a running run
    /// ("Cannot send 'RUN_STARTED' while a run is still active"), mapped to
    /// nothing; a RUN_FINISHED while a message, tool call, reasoning span,
    /// step or subagent that no chunk lane holds is open ("Cannot send
    /// 'RUN_FINISHED' while ... are still active"), mapped after what is
    /// open is closed; and a start of what is open, or content or an end of
    /// what is not ("No active text message found"; a STEP_FINISHED for a
    /// step not started), mapped to nothing for a start or an end, and for
    /// content to a start of what it continues, then the content (`emit`);
    /// content or an end tagged with another subagent than the one that
    /// opened its item, written untagged.
    /// What a chunk lane expands is the client's own doing: it passes.
    fn verbatim(&self, event: &Event) -> bool {
        use EventKind as K;
        let v = &self.view;
        let held = |kind, id: &str| v.lanes.holds(kind, id);
        // What continues an item must say the subagent that opened it, or
        // none ("subagentRunId ... does not match the ... opener's").
        let fits = |kind, id: &str| v.tag_fits(kind, id, &tag(event));
        let chunked = || note(event, NOTE_CHUNK).is_some() || event.synthesized_by(Dialect::AgUi);
        match (&event.kind, self.running()) {
            (K::RunStarted { .. }, running) => !running,
            (_, false) => false,
            (K::TextEnd { message_id: id }, _) => {
                !held(ChunkKind::Text, id) && v.text_open(id) && fits(ChunkKind::Text, id)
            }
            (K::ReasoningEnd { message_id: id }, _) => {
                !held(ChunkKind::Reasoning, id)
                    && v.reasoning_open(id)
                    && fits(ChunkKind::Reasoning, id)
            }
            (K::ToolCallEnd { tool_call_id: id }, _) => {
                !held(ChunkKind::Tool, id) && v.tool_open(id) && fits(ChunkKind::Tool, id)
            }
            (K::RunFinished { .. }, _) => {
                // Once a run, so the view's copy costs nothing per event.
                let mut view = v.clone();
                view.accept(&base(RUN_FINISHED, None)).is_ok()
            }
            _ if chunked() => true,
            (K::TextStart { message_id: id, .. }, _) => !v.text_open(id),
            (K::TextDelta { message_id: id, .. }, _) => {
                v.text_open(id) && !held(ChunkKind::Text, id) && fits(ChunkKind::Text, id)
            }
            (K::ReasoningStart { message_id: id }, _) => !v.reasoning_open(id),
            (K::ReasoningDelta { message_id: id, .. }, _) => {
                v.reasoning_open(id)
                    && !held(ChunkKind::Reasoning, id)
                    && fits(ChunkKind::Reasoning, id)
            }
            (K::ReasoningPhaseStart { message_id: id }, _) => !v.span_open(id),
            (K::ReasoningPhaseEnd { message_id: id }, _) => v.span_open(id),
            (
                K::ToolCallStart {
                    tool_call_id: id, ..
                },
                _,
            ) => !v.tool_open(id),
            (
                K::ToolCallArgs {
                    tool_call_id: id, ..
                },
                _,
            ) => v.tool_open(id) && !held(ChunkKind::Tool, id) && fits(ChunkKind::Tool, id),
            // A result of a call the client still has open: the encoder
            // ends the call first, as its view does (the client keeps the
            // call open until its TOOL_CALL_END, and refused the run's end).
            (
                K::ToolCallResult {
                    tool_call_id: id, ..
                },
                _,
            ) => !v.tool_open(id),
            (K::StepFinished { name: Some(name) }, _) => v.step_open(&tag(event), name),
            (K::StepFinished { name: None }, _) => false,
            _ => true,
        }
    }

    fn encode_to(&mut self, ev: &Event, out: &mut Sink) {
        if self.stream == Stream::Ended {
            return;
        }
        if self.skip > 0 {
            if ev.synthesized_by(Dialect::AgUi) {
                self.skip -= 1;
                return;
            }
            self.skip = 0;
        }
        if let Some(raw) = note(ev, NOTE_CHUNK) {
            if self.try_chunk(ev, raw, out) {
                return;
            }
        }
        match &ev.kind {
            EventKind::RunStarted { message_id, .. } => self.turn_message = message_id.clone(),
            EventKind::TextStart {
                message_id,
                role: Role::Assistant,
                ..
            } => self.turn_message = Some(message_id.clone()),
            // Calls after a result belong to the next assistant message.
            EventKind::ToolCallResult { .. } => self.turn_message = None,
            _ => {}
        }
        self.encode_kind(ev, out);
    }

    /// Closes what is open and ends the run with RUN_FINISHED; a stream that
    /// said nothing still gets a well-formed (empty) run. Idempotent.
    fn finish_to(&mut self, out: &mut Sink) {
        if self.stream == Stream::Ended {
            return;
        }
        match self.view.phase {
            RunPhase::NotStarted => {
                self.start_run(None, out);
                self.run_finished(None, out);
            }
            RunPhase::Running => self.run_finished(None, out),
            // The stream ended its run itself.
            RunPhase::Finished | RunPhase::Errored => {}
        }
        self.stream = Stream::Ended;
    }

    /// RUN_ERROR after closing open messages and tool calls (the client
    /// takes nothing after it, so this also ends the stream).
    fn fail_to(&mut self, message: &str, code: Option<&str>, out: &mut Sink) {
        if self.stream == Stream::Ended {
            return;
        }
        match self.view.phase {
            // Nothing may follow RUN_ERROR: the first error is the one the client hears.
            RunPhase::Errored => {}
            RunPhase::NotStarted => {
                self.start_run(None, out);
                self.run_error(message, code, None, out);
            }
            RunPhase::Running | RunPhase::Finished => self.run_error(message, code, None, out),
        }
        self.stream = Stream::Ended;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::verify_stream;
    use babelgate_core::event::SourceKind;
    use babelgate_core::request::Message;
    use babelgate_core::Framing;

    fn ev(kind: EventKind) -> Event {
        Event::new(kind)
    }

    /// Through the shape stage, as on every translated route.
    fn encode(events: &[Event], finish: bool) -> String {
        let mut e = AgUiEncoder::new(EncodeContext::deterministic());
        let mut out = Vec::new();
        for x in &babelgate_core::shape::Shaper::shape_all(events) {
            e.encode(x, &mut out);
        }
        if finish {
            e.finish(&mut out);
            let len = out.len();
            e.finish(&mut out);
            assert_eq!(out.len(), len, "finish is idempotent");
        }
        String::from_utf8(out).unwrap()
    }

    fn values(s: &str) -> Vec<Value> {
        s.split("\n\n")
            .filter(|f| !f.is_empty())
            .map(|f| serde_json::from_str(f.strip_prefix("data: ").unwrap()).unwrap())
            .collect()
    }

    fn assert_valid(s: &str) {
        let v = values(s);
        verify_stream(&v).unwrap_or_else(|e| panic!("{e}\n{s}"));
        let last = v.last().unwrap()["type"].as_str().unwrap();
        assert!(last == RUN_FINISHED || last == RUN_ERROR, "{s}");
    }

    fn delta(id: &str, d: &str) -> Event {
        ev(EventKind::text_delta(id, d))
    }

    #[test]
    fn synthesizes_run_and_text_start_then_closes_on_finish() {
        let mut d = delta("m1", "hi");
        d.timestamp = Some(7);
        let s = encode(&[d], true);
        assert_eq!(
            s,
            "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"thread-1\",\"runId\":\"run-2\"}\n\n\
             data: {\"type\":\"TEXT_MESSAGE_START\",\"timestamp\":7,\"messageId\":\"m1\",\"role\":\"assistant\"}\n\n\
             data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"timestamp\":7,\"messageId\":\"m1\",\"delta\":\"hi\"}\n\n\
             data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m1\"}\n\n\
             data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"thread-1\",\"runId\":\"run-2\"}\n\n"
        );
        assert_valid(&s);
    }

    #[test]
    fn request_ids_are_used_and_nothing_at_all_is_still_a_run() {
        let mut ctx = EncodeContext::deterministic();
        ctx.thread_id = Some("T".into());
        ctx.run_id = Some("R".into());
        let mut e = AgUiEncoder::new(ctx);
        let mut out = Vec::new();
        e.finish(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"T\",\"runId\":\"R\"}\n\n\
             data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"T\",\"runId\":\"R\"}\n\n"
        );
    }

    #[test]
    fn args_after_their_end_are_dropped_and_finish_closes_everything() {
        let s = encode(
            &[
                ev(EventKind::StepStarted { name: None }),
                ev(EventKind::ToolCallStart {
                    tool_call_id: "c".into(),
                    tool_name: "f".into(),
                    parent_message_id: None,
                }),
                ev(EventKind::ToolCallEnd {
                    tool_call_id: "c".into(),
                }),
                ev(EventKind::ToolCallArgs {
                    tool_call_id: "c".into(),
                    delta: "{}".into(),
                }),
                ev(EventKind::ReasoningPhaseStart {
                    message_id: "p".into(),
                }),
                ev(EventKind::ReasoningDelta {
                    message_id: "r".into(),
                    delta: "x".into(),
                }),
                ev(EventKind::SubagentStarted {
                    subagent_run_id: "s".into(),
                    name: "n".into(),
                    description: None,
                }),
                ev(EventKind::text_end("never")),
            ],
            true,
        );
        let types: Vec<_> = values(&s)
            .iter()
            .map(|v| v["type"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            types,
            [
                "RUN_STARTED",
                "STEP_STARTED",
                "TOOL_CALL_START",
                "TOOL_CALL_END",
                "REASONING_START",
                "REASONING_MESSAGE_START",
                "REASONING_MESSAGE_CONTENT",
                "SUBAGENT_STARTED",
                "REASONING_MESSAGE_END",
                "REASONING_END",
                "STEP_FINISHED",
                "SUBAGENT_FINISHED",
                "RUN_FINISHED"
            ]
        );
        assert_valid(&s);
    }

    #[test]
    fn run_error_closes_messages_and_ends_the_stream() {
        let mut e = AgUiEncoder::new(EncodeContext::deterministic());
        let mut out = Vec::new();
        for x in babelgate_core::shape::Shaper::shape_all(&[delta("m", "partial")]) {
            e.encode(&x, &mut out);
        }
        e.fail("upstream timed out", Some("timeout"), &mut out);
        e.encode(&delta("m", "late"), &mut out);
        e.finish(&mut out);
        let s = String::from_utf8(out).unwrap();
        assert!(s.ends_with(
            "data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}\n\n\
             data: {\"type\":\"RUN_ERROR\",\"message\":\"upstream timed out\",\"code\":\"timeout\"}\n\n"
        ), "{s}");
        assert_valid(&s);
    }

    #[test]
    fn after_run_finished_only_a_new_run_or_an_error_and_nothing_after_that() {
        let fin = ev(EventKind::RunFinished {
            thread_id: None,
            run_id: None,
            message_id: None,
            result: None,
            outcome: Outcome::Unspecified,
            finish_reason: Some("stop".into()),
            usage: None,
        });
        let s = encode(
            &[
                delta("m", "a"),
                fin.clone(),
                fin.clone(),
                ev(EventKind::text_end("m")),
                ev(EventKind::RunError {
                    message: "late".into(),
                    code: None,
                }),
                ev(EventKind::RunError {
                    message: "later".into(),
                    code: None,
                }),
                delta("m2", "b"),
            ],
            true,
        );
        let types: Vec<_> = values(&s)
            .iter()
            .map(|v| v["type"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            types,
            [
                "RUN_STARTED",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "RUN_FINISHED",
                "RUN_ERROR"
            ]
        );
        verify_stream(&values(&s)).unwrap();
    }

    #[test]
    fn interrupts_results_and_kinds_without_an_event() {
        let s = encode(
            &[
                ev(EventKind::ToolCallStart {
                    tool_call_id: "c".into(),
                    tool_name: "confirm".into(),
                    parent_message_id: None,
                }),
                ev(EventKind::ToolCallResult {
                    tool_call_id: "c".into(),
                    message_id: None,
                    content: json!({"ok": true}),
                }),
                ev(EventKind::ToolCallError {
                    tool_call_id: "d".into(),
                    error: "bad".into(),
                    input_invalid: true,
                }),
                ev(EventKind::Source {
                    source_kind: SourceKind::Url,
                    source_id: "s1".into(),
                    url: Some("https://x".into()),
                    title: None,
                    media_type: None,
                    filename: None,
                }),
                ev(EventKind::Data {
                    name: "weather".into(),
                    id: Some("w1".into()),
                    message_id: None,
                    data: json!({"t": 1}),
                    transient: false,
                }),
                ev(EventKind::Data {
                    name: "tick".into(),
                    id: None,
                    message_id: None,
                    data: json!(3),
                    transient: true,
                }),
                ev(EventKind::StateDelta {
                    patch: json!([{"op": "add", "path": "nope"}]),
                }),
                Event::new(EventKind::Unknown {
                    raw: json!({"type": "x-thing"}),
                })
                .with_origin(Dialect::Vercel),
                ev(EventKind::RunFinished {
                    thread_id: None,
                    run_id: None,
                    message_id: None,
                    result: None,
                    finish_reason: None,
                    usage: None,
                    outcome: Outcome::Interrupt {
                        interrupts: vec![Interrupt {
                            id: "i1".into(),
                            reason: "tool_approval".into(),
                            message: None,
                            tool_call_id: Some("c".into()),
                            payload: Some(json!("yes?")),
                            extra: Default::default(),
                        }],
                    },
                }),
            ],
            true,
        );
        let v = values(&s);
        assert_eq!(v[2], json!({"type": "TOOL_CALL_END", "toolCallId": "c"}));
        assert_eq!(
            v[3],
            json!({"type": "TOOL_CALL_RESULT", "messageId": "msg-3", "toolCallId": "c", "content": "{\"ok\":true}", "role": "tool"})
        );
        assert_eq!(v[4]["content"], "bad");
        assert_eq!(
            v[4]["metadata"],
            json!({"error": true, "inputInvalid": true})
        );
        assert_eq!(
            v[5],
            json!({"type": "CUSTOM", "name": "source", "value": {"sourceKind": "url", "sourceId": "s1", "url": "https://x"}})
        );
        assert_eq!(
            v[6],
            json!({"type": "ACTIVITY_SNAPSHOT", "messageId": "w1", "activityType": "weather", "content": {"t": 1}})
        );
        assert_eq!(
            v[7],
            json!({"type": "CUSTOM", "name": "data-tick", "value": 3})
        );
        assert_eq!(v[8]["name"], "state_delta");
        assert_eq!(
            v[9],
            json!({"type": "RAW", "event": {"type": "x-thing"}, "source": "vercel"})
        );
        assert_eq!(
            v[10]["outcome"],
            json!({"type": "interrupt", "interrupts": [{"id": "i1", "reason": "tool_approval", "toolCallId": "c", "metadata": {"payload": "yes?"}}]})
        );
        assert_valid(&s);
    }

    #[test]
    fn messages_snapshot_and_subagent_misuse_stay_valid() {
        let s = encode(
            &[
                ev(EventKind::MessagesSnapshot {
                    messages: vec![
                        Message::text_message("u", Role::User, "hi"),
                        Message {
                            id: "t".into(),
                            role: Role::Tool,
                            ..Default::default()
                        },
                    ],
                }),
                ev(EventKind::SubagentFinished {
                    subagent_run_id: "ghost".into(),
                    result: None,
                    outcome: Some(json!({"type": "weird"})),
                }),
                ev(EventKind::StepFinished {
                    name: Some("never".into()),
                }),
                ev(EventKind::StepStarted {
                    name: Some("a".into()),
                }),
                ev(EventKind::StepStarted {
                    name: Some("a".into()),
                }),
            ],
            true,
        );
        let v = values(&s);
        assert_eq!(
            v[1]["messages"][1],
            json!({"id": "t", "role": "tool", "content": "", "toolCallId": ""})
        );
        assert_eq!(
            v[2],
            json!({"type": "CUSTOM", "name": "subagent_finished", "value": {"subagentRunId": "ghost"}})
        );
        assert_valid(&s);
    }

    #[test]
    fn the_sink_gets_one_span_per_event_without_a_scan() {
        let mut enc = AgUiEncoder::new(EncodeContext::deterministic());
        let mut sink = Sink::new(Framing::Sse);
        let mut plain = AgUiEncoder::new(EncodeContext::deterministic());
        let mut out = Vec::new();
        let events = [
            Event::new(EventKind::text_delta("m", "hi")),
            Event::new(EventKind::ToolCallStart {
                tool_call_id: "c".into(),
                tool_name: "f".into(),
                parent_message_id: None,
            }),
        ];
        for ev in &babelgate_core::shape::Shaper::shape_all(&events) {
            enc.encode_to(ev, &mut sink);
            plain.encode(ev, &mut out);
        }
        enc.fail_to("boom", Some("x"), &mut sink);
        plain.fail("boom", Some("x"), &mut out);
        enc.finish_to(&mut sink);
        assert_eq!(sink.bytes(), &out[..]);
        let mut at = 0;
        for span in sink.spans() {
            assert_eq!(span.range.start, at);
            at = span.range.end;
            let e = &out[span.range.clone()];
            assert!(e.ends_with(b"\n\n") && !e[..e.len() - 2].windows(2).any(|w| w == b"\n\n"));
        }
        assert_eq!(at, out.len());
        assert!(sink.spans().len() >= 5, "{}", String::from_utf8_lossy(&out));
    }

    /// An AG-UI event of a type AG-UI defines but without its fields (as an
    /// AG-Kit `unknown` envelope may carry) goes out as RAW: written as it
    /// came, it broke the client's schema (found by the `decode_agkit`
    /// fuzz target). A type AG-UI does not define is still written back.
    #[test]
    fn an_own_unknown_event_of_a_defined_type_goes_out_as_raw() {
        let own = |raw: Value| Event::new(EventKind::Unknown { raw }).with_origin(Dialect::AgUi);
        let s = encode(
            &[
                own(json!({"type": "STEP_STARTED", "x": 1})),
                own(json!({"type": "FUTURE_EVENT", "y": 2})),
            ],
            true,
        );
        let v = values(&s);
        let raw = v
            .iter()
            .find(|e| e["type"] == RAW)
            .unwrap_or_else(|| panic!("{s}"));
        assert_eq!(raw["event"], json!({"type": "STEP_STARTED", "x": 1}));
        assert_eq!(raw["source"], "ag-ui");
        assert!(!v.iter().any(|e| e["type"] == STEP_STARTED), "{s}");
        assert!(v.contains(&json!({"type": "FUTURE_EVENT", "y": 2})), "{s}");
    }
}
