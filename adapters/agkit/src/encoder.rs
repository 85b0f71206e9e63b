//! Core events -> AG-Kit frames for `@cloudbase/agent-ui-web` 0.0.24.
//!
//! What the real client does decides what is safe to write (its `useChat`):
//! - it reads `data:` only, stops at `data: [DONE]`, skips frames that are not
//!   JSON or fail its schema, and acts only on `text`, `tool-call-start`,
//!   `tool-call-args`, `tool-call-end`, `tool-result` and `interrupt`; every
//!   other `type` (including the server-declared `error`) changes nothing. So
//!   what AG-Kit cannot say goes out as frames of clearly named extension
//!   types (see `wire.rs`) instead of being dropped.
//! - `tool-call-args` throws (and ends the client's stream handling) unless
//!   the client's last message is the assistant message holding that call;
//!   `tool-result` appends a tool message. So a call's args always follow its
//!   start (the shape stage, `babelgate_core::shape`, synthesizes a missing
//!   one and drops ends of calls not open), and results are held back while
//!   any call is still open and written once all open calls have ended.
//! - `text` appends to the last assistant message: starts and ends of text
//!   messages write nothing.
//! - `tool-call-end` means "arguments complete": the client then runs a
//!   handler tool and posts its result by itself. Closing a call the source
//!   never ended (at a finish, an error or a cut) is done only when its
//!   arguments are whole JSON; a call cut mid-arguments stays open.
//! - `error` (declared by the server) changes nothing in the client, whose
//!   `error` state only reflects non-2xx answers and broken bodies: it is
//!   written for clients and gateways that know it, then `[DONE]`.

// foldhash: ids are hashed per event; SipHash showed in the profile.
use foldhash::{HashMap, HashMapExt};

use babelgate_core::event::SourceKind;
use babelgate_core::{
    Dialect, EncodeContext, Encoder, Event, EventKind, Interrupt, OpenTracker, Sink,
};
use serde_json::{Map, Value};

use crate::request::message_to_wire;
use crate::wire::{self, frame, put_opt};

pub struct AgKitEncoder {
    ctx: EncodeContext,
    open: OpenTracker,
    /// Argument text of the open calls, to tell a complete call from a cut one.
    args: HashMap<String, String>,
    /// `tool-result` frames waiting for the open calls to end.
    held: Vec<Map<String, Value>>,
    /// `[DONE]` is out: the client reads nothing more.
    done: bool,
    /// Write what AG-Kit cannot say as extension frames (`wire.rs`) instead
    /// of dropping it.
    extensions: bool,
    /// Events dropped for want of a declared frame type.
    dropped: u64,
    /// The run failed: the error frame is written and no `[DONE]` follows,
    /// the body must break off (see [`Encoder::aborts`]).
    failed: bool,
    /// Whether the frequent frames are written in place (tests turn it off
    /// to hold that path to the general one).
    plain: bool,
}

impl AgKitEncoder {
    pub fn new(ctx: EncodeContext) -> Self {
        AgKitEncoder {
            extensions: ctx.extension_frames,
            ctx,
            open: OpenTracker::default(),
            args: HashMap::new(),
            held: Vec::new(),
            done: false,
            dropped: 0,
            failed: false,
            plain: true,
        }
    }

    /// Opt in to extension frames: what AG-Kit has no frame for (reasoning,
    /// steps, state, data...) goes out as frames of the types in `wire.rs`,
    /// which the real client ignores and babelgate's decoder reads back.
    /// Off by default: a client gets only the types the AG-Kit server declares.
    pub fn with_extensions(mut self, on: bool) -> Self {
        self.extensions = on;
        self
    }
}

/// Whether the event maps to frame types the AG-Kit server declares (or to
/// nothing at all), as opposed to an extension frame.
fn declared(event: &Event) -> bool {
    use EventKind as K;
    match &event.kind {
        K::RunStarted { .. }
        | K::RunFinished { .. }
        | K::RunError { .. }
        | K::TextStart { .. }
        | K::TextDelta { .. }
        | K::TextEnd { .. }
        | K::ReasoningStart { .. }
        | K::ReasoningEnd { .. }
        | K::ToolCallStart { .. }
        | K::ToolCallArgs { .. }
        | K::ToolCallEnd { .. }
        | K::ToolCallResult { .. }
        | K::ToolCallError { .. }
        | K::ToolCallDenied { .. } => true,
        // An AG-Kit upstream's own frame, written back as it came.
        K::Unknown { .. } => event.origin == Some(Dialect::AgKit),
        _ => false,
    }
}

impl AgKitEncoder {
    /// Writes one frame, with the event's extras when they are AG-Kit's own.
    fn write(out: &mut Sink, event: &Event, mut obj: Map<String, Value>) {
        if let Some(extra) = event.extra_from(Dialect::AgKit) {
            for (k, v) in extra {
                if k != "type" {
                    obj.insert(k.clone(), v.clone());
                }
            }
        }
        out.json(&Value::Object(obj));
    }

    fn any_call_open(&self) -> bool {
        self.open.open_tool_calls().next().is_some()
    }

    /// Results wait while a call is open: the tool message they append would
    /// make the client throw on that call's next args.
    fn result(&mut self, event: &Event, tool_call_id: &str, result: String, out: &mut Sink) {
        let mut obj = frame(wire::TOOL_RESULT);
        obj.insert("toolCallId".into(), Value::String(tool_call_id.into()));
        obj.insert("result".into(), Value::String(result));
        if let Some(extra) = event.extra_from(Dialect::AgKit) {
            for (k, v) in extra {
                if k != "type" {
                    obj.insert(k.clone(), v.clone());
                }
            }
        }
        self.held.push(obj);
        self.flush_held(out);
    }

    fn flush_held(&mut self, out: &mut Sink) {
        if !self.any_call_open() {
            for obj in self.held.drain(..) {
                out.json(&Value::Object(obj));
            }
        }
    }

    /// Writes a start (`source` is the event it came from, `None` when
    /// synthesized) and records the call as open.
    fn start_call(
        &mut self,
        tool_call_id: &str,
        tool_name: &str,
        source: Option<&Event>,
        out: &mut Sink,
    ) {
        let mut obj = frame(wire::TOOL_CALL_START);
        obj.insert("toolCallId".into(), Value::String(tool_call_id.into()));
        obj.insert("toolCallName".into(), Value::String(tool_name.into()));
        match source {
            Some(event) => Self::write(out, event, obj),
            None => out.json(&Value::Object(obj)),
        }
        self.args.insert(tool_call_id.into(), String::new());
        self.open.observe(&Event::new(EventKind::ToolCallStart {
            tool_call_id: tool_call_id.into(),
            tool_name: tool_name.into(),
            parent_message_id: None,
        }));
    }

    /// Closes what is open (steps, collaborations... and tool calls), then
    /// writes the results held for them. `tool-call-end` tells the client the
    /// arguments are complete: it then runs a handler tool (and posts the
    /// result on its own) or offers the call to the user. A call cut before
    /// its arguments were whole JSON is therefore left open (the client shows
    /// it as still streaming and runs nothing) instead of being ended.
    fn close_open(&mut self, out: &mut Sink) {
        for ev in self.open.closing_events() {
            if let EventKind::ToolCallEnd { tool_call_id } = &ev.kind {
                let whole = self
                    .args
                    .get(tool_call_id)
                    .is_some_and(|a| serde_json::from_str::<serde::de::IgnoredAny>(a).is_ok());
                if !whole {
                    self.args.remove(tool_call_id);
                    self.open.observe(&ev);
                    continue;
                }
            }
            self.encode_one(&ev, out);
        }
        self.flush_held(out);
    }

    fn interrupt_frame(&mut self, event: &Event, i: &Interrupt) -> Map<String, Value> {
        let id = if i.id.is_empty() {
            self.ctx.ids.next("interrupt")
        } else {
            i.id.clone()
        };
        // The client keeps only id, reason and payload (and its schema may
        // refuse other keys): what the human must know goes in the payload
        // when the source gave none.
        let payload = match &i.payload {
            Some(p) => p.clone(),
            None if i.tool_call_id.is_some() || i.message.is_some() => {
                let mut p = Map::new();
                put_opt(&mut p, "toolCallId", i.tool_call_id.clone());
                put_opt(&mut p, "message", i.message.clone());
                Value::Object(p)
            }
            None => Value::Null,
        };
        let mut obj = frame(wire::INTERRUPT);
        obj.insert("id".into(), Value::String(id));
        obj.insert("reason".into(), Value::String(i.reason.clone()));
        obj.insert("payload".into(), payload);
        if event.origin == Some(Dialect::AgKit) {
            for (k, v) in &i.extra {
                if k != "type" {
                    obj.insert(k.clone(), v.clone());
                }
            }
        }
        obj
    }

    /// Maps one shaped event (the shape stage keeps starts before their
    /// arguments, no second start of an open call, ends of open calls only);
    /// what AG-Kit holds is its own: results while a call is open, and the
    /// frame types its server declares.
    fn encode_one(&mut self, event: &Event, out: &mut Sink) {
        use EventKind as K;
        // What an AG-Kit upstream itself sent is its client's to hear,
        // whatever the server this dialect was taken from sends.
        if !self.extensions && !declared(event) && event.origin != Some(Dialect::AgKit) {
            self.dropped += 1;
            return;
        }
        if self.plain && self.encode_plain(event, out) {
            return;
        }
        match &event.kind {
            K::RunFinished { outcome, .. } => self.run_finished(event, outcome, out),
            K::RunError { message, code } => self.run_error(event, message, code, out),
            K::ToolCallStart {
                tool_call_id,
                tool_name,
                ..
            } => return self.start_call(tool_call_id, tool_name, Some(event), out),
            K::ToolCallArgs {
                tool_call_id,
                delta,
            } => self.tool_call_args(event, tool_call_id, delta, out),
            K::ToolCallEnd { tool_call_id } => return self.tool_call_end(event, tool_call_id, out),
            K::ToolCallResult {
                tool_call_id,
                content,
                ..
            } => {
                let result = match content {
                    Value::String(t) => t.clone(),
                    other => other.to_string(),
                };
                self.result(event, tool_call_id, result, out);
            }
            K::ToolCallError {
                tool_call_id,
                error,
                ..
            } => {
                let result = format!("{}{error}", wire::TOOL_FAILED_PREFIX);
                self.result(event, tool_call_id, result, out);
            }
            K::ToolCallDenied { tool_call_id } => {
                self.result(event, tool_call_id, wire::TOOL_DENIED_RESULT.into(), out);
            }
            K::Unknown { raw } => unknown(event, raw, out),
            kind => {
                if let Some(obj) = content_frame(kind).or_else(|| extension_frame(kind)) {
                    Self::write(out, event, obj);
                }
            }
        }
        self.open.observe(event);
    }

    /// Closes what is open, then the interrupts and `[DONE]`: the response
    /// is the run.
    fn run_finished(&mut self, event: &Event, outcome: &babelgate_core::Outcome, out: &mut Sink) {
        self.close_open(out);
        if let babelgate_core::Outcome::Interrupt { interrupts } = outcome {
            for i in interrupts {
                let obj = self.interrupt_frame(event, i);
                out.json(&Value::Object(obj));
            }
        }
        out.done();
        self.done = true;
    }

    fn run_error(&mut self, event: &Event, message: &str, code: &Option<String>, out: &mut Sink) {
        self.close_open(out);
        let mut obj = frame(wire::ERROR);
        put(&mut obj, "error", s(message));
        put_opt(&mut obj, "code", code.clone());
        Self::write(out, event, obj);
        // No `[DONE]`: the legacy client ignores the error frame and
        // takes `[DONE]` for success; only a body that breaks off
        // shows it a failure (docs/cut-streams.md).
        self.done = true;
        self.failed = true;
    }

    fn tool_call_args(&mut self, event: &Event, tool_call_id: &str, delta: &str, out: &mut Sink) {
        if let Some(text) = self.args.get_mut(tool_call_id) {
            text.push_str(delta);
        }
        let mut obj = frame(wire::TOOL_CALL_ARGS);
        put(&mut obj, "toolCallId", s(tool_call_id));
        put(&mut obj, "delta", s(delta));
        Self::write(out, event, obj);
    }

    /// The call's arguments are complete: the results held for it follow
    /// once no call is open.
    fn tool_call_end(&mut self, event: &Event, tool_call_id: &str, out: &mut Sink) {
        let mut obj = frame(wire::TOOL_CALL_END);
        put(&mut obj, "toolCallId", s(tool_call_id));
        Self::write(out, event, obj);
        self.args.remove(tool_call_id);
        self.open.observe(event);
        self.flush_held(out);
    }
}

fn put(obj: &mut Map<String, Value>, key: &str, value: Value) {
    obj.insert(key.into(), value);
}

fn s(v: &str) -> Value {
    Value::String(v.into())
}

/// Our own (an AG-Kit upstream's frame): back verbatim, text the decoder
/// could not parse included; another dialect's: wrapped.
fn unknown(event: &Event, raw: &Value, out: &mut Sink) {
    match (event.origin, raw) {
        (Some(Dialect::AgKit), Value::String(text)) => out.data(text),
        (Some(Dialect::AgKit), other) => out.json(other),
        (origin, other) => {
            let mut obj = frame(wire::UNKNOWN);
            put_opt(&mut obj, "dialect", origin.map(|d| d.as_str()));
            put(&mut obj, "event", other.clone());
            out.json(&Value::Object(obj));
        }
    }
}

/// The frame of a content event that holds no state: text, reasoning,
/// steps, state and messages. `None`: no frame (starts and ends of text
/// and reasoning write nothing; AG-Kit has no run start: the response is
/// the run), or not a content event.
fn content_frame(kind: &EventKind) -> Option<Map<String, Value>> {
    use EventKind as K;
    let obj = match kind {
        K::StepStarted { name } | K::StepFinished { name } => {
            let ty = if matches!(kind, K::StepStarted { .. }) {
                wire::STEP_STARTED
            } else {
                wire::STEP_FINISHED
            };
            let mut obj = frame(ty);
            put_opt(&mut obj, "name", name.clone());
            obj
        }
        K::TextDelta { delta, .. } => {
            let mut obj = frame(wire::TEXT);
            put(&mut obj, "content", s(delta));
            obj
        }
        K::ReasoningDelta { delta, .. } => {
            let mut obj = frame(wire::REASONING);
            put(&mut obj, "content", s(delta));
            obj
        }
        K::ReasoningPhaseStart { message_id } | K::ReasoningPhaseEnd { message_id } => {
            let ty = if matches!(kind, K::ReasoningPhaseStart { .. }) {
                wire::REASONING_PHASE_START
            } else {
                wire::REASONING_PHASE_END
            };
            let mut obj = frame(ty);
            put(&mut obj, "messageId", s(message_id));
            obj
        }
        K::ReasoningEncrypted {
            subtype,
            entity_id,
            value,
        } => {
            let mut obj = frame(wire::REASONING_ENCRYPTED);
            put(&mut obj, "subtype", s(subtype));
            put(&mut obj, "entityId", s(entity_id));
            put(&mut obj, "value", s(value));
            obj
        }
        K::StateSnapshot { snapshot } => {
            let mut obj = frame(wire::STATE_SNAPSHOT);
            put(&mut obj, "snapshot", snapshot.clone());
            obj
        }
        K::StateDelta { patch } => {
            let mut obj = frame(wire::STATE_DELTA);
            put(&mut obj, "delta", patch.clone());
            obj
        }
        K::MessagesSnapshot { messages } => messages_frame(messages),
        _ => return None,
    };
    Some(obj)
}

fn messages_frame(messages: &[babelgate_core::request::Message]) -> Map<String, Value> {
    let mut list = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        // Only a tool message without its call id fails; it has no AG-Kit
        // shape, like reasoning and activity messages.
        if let Ok(ws) = message_to_wire(m, &format!("messages[{i}]")) {
            for mut w in ws {
                w.entry("id").or_insert_with(|| s(&m.id));
                list.push(Value::Object(w));
            }
        }
    }
    let mut obj = frame(wire::MESSAGES_SNAPSHOT);
    put(&mut obj, "messages", Value::Array(list));
    obj
}

/// The frame of an event only extension frames carry: activities,
/// sources, files, data, collaboration and subagents, raw events.
fn extension_frame(kind: &EventKind) -> Option<Map<String, Value>> {
    use EventKind as K;
    let obj = match kind {
        K::ActivitySnapshot {
            message_id,
            activity_type,
            content,
            replace,
        } => {
            let mut obj = frame(wire::ACTIVITY_SNAPSHOT);
            put(&mut obj, "messageId", s(message_id));
            put(&mut obj, "activityType", s(activity_type));
            put(&mut obj, "content", content.clone());
            put_opt(&mut obj, "replace", *replace);
            obj
        }
        K::ActivityDelta {
            message_id,
            activity_type,
            patch,
        } => {
            let mut obj = frame(wire::ACTIVITY_DELTA);
            put(&mut obj, "messageId", s(message_id));
            put(&mut obj, "activityType", s(activity_type));
            put(&mut obj, "patch", patch.clone());
            obj
        }
        K::Source { .. } => source_frame(kind),
        K::File { url, media_type } => {
            let mut obj = frame(wire::FILE);
            put(&mut obj, "url", s(url));
            put(&mut obj, "mediaType", s(media_type));
            obj
        }
        K::Data {
            name,
            id,
            message_id,
            data,
            transient,
        } => {
            let mut obj = frame(wire::DATA);
            put(&mut obj, "name", s(name));
            put_opt(&mut obj, "id", id.clone());
            put_opt(&mut obj, "messageId", message_id.clone());
            put(&mut obj, "data", data.clone());
            if *transient {
                put(&mut obj, "transient", Value::Bool(true));
            }
            obj
        }
        K::Custom { name, value } => {
            let mut obj = frame(wire::CUSTOM);
            put(&mut obj, "name", s(name));
            put(&mut obj, "value", value.clone());
            obj
        }
        K::MessageMetadata { metadata } => {
            let mut obj = frame(wire::MESSAGE_METADATA);
            put(&mut obj, "metadata", metadata.clone());
            obj
        }
        _ => return collab_frame(kind),
    };
    Some(obj)
}

fn source_frame(kind: &EventKind) -> Map<String, Value> {
    let mut obj = frame(wire::SOURCE);
    if let EventKind::Source {
        source_kind,
        source_id,
        url,
        title,
        media_type,
        filename,
    } = kind
    {
        let kind = match source_kind {
            SourceKind::Url => "url",
            SourceKind::Document => "document",
        };
        put(&mut obj, "sourceType", s(kind));
        put(&mut obj, "sourceId", s(source_id));
        put_opt(&mut obj, "url", url.clone());
        put_opt(&mut obj, "title", title.clone());
        put_opt(&mut obj, "mediaType", media_type.clone());
        put_opt(&mut obj, "filename", filename.clone());
    }
    obj
}

/// Collaboration messages, subagents and raw events, as extension frames.
fn collab_frame(kind: &EventKind) -> Option<Map<String, Value>> {
    use EventKind as K;
    let obj = match kind {
        K::CollabStart {
            message_id,
            from,
            to,
        } => {
            let mut obj = frame(wire::COLLAB_START);
            put(&mut obj, "messageId", s(message_id));
            put_opt(&mut obj, "from", from.clone());
            put_opt(&mut obj, "to", to.clone());
            obj
        }
        K::CollabContent { message_id, delta } => {
            let mut obj = frame(wire::COLLAB_CONTENT);
            put(&mut obj, "messageId", s(message_id));
            put(&mut obj, "delta", delta.clone());
            obj
        }
        K::CollabEnd { message_id } => {
            let mut obj = frame(wire::COLLAB_END);
            put(&mut obj, "messageId", s(message_id));
            obj
        }
        K::SubagentStarted {
            subagent_run_id,
            name,
            description,
        } => {
            let mut obj = frame(wire::SUBAGENT_STARTED);
            put(&mut obj, "subagentRunId", s(subagent_run_id));
            put(&mut obj, "name", s(name));
            put_opt(&mut obj, "description", description.clone());
            obj
        }
        K::SubagentFinished {
            subagent_run_id,
            result,
            outcome,
        } => {
            let mut obj = frame(wire::SUBAGENT_FINISHED);
            put(&mut obj, "subagentRunId", s(subagent_run_id));
            put_opt(&mut obj, "result", result.clone());
            put_opt(&mut obj, "outcome", outcome.clone());
            obj
        }
        K::SubagentError {
            subagent_run_id,
            message,
            code,
        } => {
            let mut obj = frame(wire::SUBAGENT_ERROR);
            put(&mut obj, "subagentRunId", s(subagent_run_id));
            put(&mut obj, "message", s(message));
            put_opt(&mut obj, "code", code.clone());
            obj
        }
        K::Raw { event: raw, source } => {
            let mut obj = frame(wire::RAW);
            put(&mut obj, "event", raw.clone());
            put_opt(&mut obj, "source", source.clone());
            obj
        }
        _ => return None,
    };
    Some(obj)
}

impl AgKitEncoder {
    /// The frequent frames written by the core's fast path from
    /// [`wire::FAST`]: the bytes `encode_one` writes for them, without an
    /// object map. Only for events without AG-Kit extras; `false` (nothing
    /// written, nothing changed) sends the event the general way.
    fn encode_plain(&mut self, event: &Event, out: &mut Sink) -> bool {
        use EventKind as K;
        if event.extra_from(Dialect::AgKit).is_some() {
            return false;
        }
        match &event.kind {
            K::TextDelta { .. } | K::ReasoningDelta { .. } => out.event(|b| {
                wire::FAST.write(event, b);
            }),
            K::ToolCallArgs {
                tool_call_id,
                delta,
            } => {
                if let Some(text) = self.args.get_mut(tool_call_id) {
                    text.push_str(delta);
                }
                out.event(|b| {
                    wire::FAST.write(event, b);
                });
            }
            K::StateDelta { patch } => out.event(|b| {
                b.extend_from_slice(b"{\"type\":\"");
                b.extend_from_slice(wire::STATE_DELTA.as_bytes());
                b.extend_from_slice(b"\",\"delta\":");
                // Writing a `Value` into a Vec cannot fail.
                let _ = serde_json::to_writer(&mut *b, patch);
                b.push(b'}');
            }),
            _ => return false,
        }
        self.open.observe(event);
        true
    }

    /// Every event the general way (tests hold the in-place path to it).
    #[cfg(test)]
    pub(crate) fn general_only(mut self) -> Self {
        self.plain = false;
        self
    }
}

impl Encoder for AgKitEncoder {
    fn dialect(&self) -> Dialect {
        Dialect::AgKit
    }

    fn encode_to(&mut self, event: &Event, out: &mut Sink) {
        if !self.done {
            self.encode_one(event, out);
        }
    }

    fn dropped(&self) -> u64 {
        self.dropped
    }

    fn aborts(&self) -> bool {
        self.failed
    }

    /// Closes open tool calls, writes held results and `[DONE]`, once.
    fn finish_to(&mut self, out: &mut Sink) {
        if !self.done {
            self.close_open(out);
            out.done();
            self.done = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use babelgate_core::request::Message;
    use babelgate_core::Role;
    use babelgate_core::{Extra, Outcome};
    use serde_json::json;

    fn enc() -> AgKitEncoder {
        AgKitEncoder::new(EncodeContext::deterministic()).with_extensions(true)
    }

    /// Through the shape stage, as on every translated route.
    fn run(kinds: Vec<EventKind>) -> String {
        let mut e = enc();
        let mut out = Vec::new();
        let events: Vec<Event> = kinds.into_iter().map(Event::new).collect();
        for ev in &babelgate_core::shape::Shaper::shape_all(&events) {
            e.encode(ev, &mut out);
        }
        e.finish(&mut out);
        String::from_utf8(out).unwrap()
    }

    fn start(id: &str, name: &str) -> EventKind {
        EventKind::ToolCallStart {
            tool_call_id: id.into(),
            tool_name: name.into(),
            parent_message_id: None,
        }
    }

    fn args(id: &str, d: &str) -> EventKind {
        EventKind::ToolCallArgs {
            tool_call_id: id.into(),
            delta: d.into(),
        }
    }

    fn end(id: &str) -> EventKind {
        EventKind::ToolCallEnd {
            tool_call_id: id.into(),
        }
    }

    fn result(id: &str, content: Value) -> EventKind {
        EventKind::ToolCallResult {
            tool_call_id: id.into(),
            message_id: None,
            content,
        }
    }

    fn finished(outcome: Outcome) -> EventKind {
        EventKind::RunFinished {
            thread_id: None,
            run_id: None,
            message_id: None,
            result: None,
            outcome,
            finish_reason: Some("stop".into()),
            usage: None,
        }
    }

    fn text(kinds: &mut Vec<EventKind>, id: &str, deltas: &[&str]) {
        kinds.push(EventKind::text_start(id));
        for d in deltas {
            kinds.push(EventKind::text_delta(id, *d));
        }
        kinds.push(EventKind::text_end(id));
    }

    #[test]
    fn text_and_a_plain_finish() {
        let mut k = vec![EventKind::RunStarted {
            thread_id: Some("t".into()),
            run_id: Some("r".into()),
            parent_run_id: None,
            message_id: None,
            input: None,
        }];
        text(&mut k, "m1", &["你好", "\"q\"\n\u{2028}"]);
        k.push(finished(Outcome::Success {
            pending_tool_call_ids: vec![],
        }));
        k.push(EventKind::text_delta("late", "after the end"));
        assert_eq!(
            run(k),
            "data: {\"type\":\"text\",\"content\":\"你好\"}\n\n\
             data: {\"type\":\"text\",\"content\":\"\\\"q\\\"\\n\u{2028}\"}\n\n\
             data: [DONE]\n\n"
        );
    }

    #[test]
    fn finish_on_a_cut_stream_ends_complete_calls_once() {
        let mut e = enc();
        let mut out = Vec::new();
        for k in [
            start("c1", "f"),
            args("c1", "{\"a\":1}"),
            start("c2", "g"),
            args("c2", "{\"a\":"),
            start("c3", "h"),
        ] {
            e.encode(&Event::new(k), &mut out);
        }
        e.finish(&mut out);
        e.finish(&mut out);
        e.encode(&Event::new(args("c2", "1}")), &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "data: {\"type\":\"tool-call-start\",\"toolCallId\":\"c1\",\"toolCallName\":\"f\"}\n\n\
             data: {\"type\":\"tool-call-args\",\"toolCallId\":\"c1\",\"delta\":\"{\\\"a\\\":1}\"}\n\n\
             data: {\"type\":\"tool-call-start\",\"toolCallId\":\"c2\",\"toolCallName\":\"g\"}\n\n\
             data: {\"type\":\"tool-call-args\",\"toolCallId\":\"c2\",\"delta\":\"{\\\"a\\\":\"}\n\n\
             data: {\"type\":\"tool-call-start\",\"toolCallId\":\"c3\",\"toolCallName\":\"h\"}\n\n\
             data: {\"type\":\"tool-call-end\",\"toolCallId\":\"c1\"}\n\n\
             data: [DONE]\n\n"
        );
    }

    #[test]
    fn errors_close_calls_then_error_and_no_done() {
        let mut e = enc();
        let mut out = Vec::new();
        e.encode(&Event::new(start("c1", "f")), &mut out);
        e.encode(&Event::new(args("c1", "{}")), &mut out);
        e.encode(&Event::new(start("c2", "f")), &mut out);
        e.encode(&Event::new(result("c0", json!("held"))), &mut out);
        e.fail("upstream went away", Some("upstream_timeout"), &mut out);
        e.finish(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "data: {\"type\":\"tool-call-start\",\"toolCallId\":\"c1\",\"toolCallName\":\"f\"}\n\n\
             data: {\"type\":\"tool-call-args\",\"toolCallId\":\"c1\",\"delta\":\"{}\"}\n\n\
             data: {\"type\":\"tool-call-start\",\"toolCallId\":\"c2\",\"toolCallName\":\"f\"}\n\n\
             data: {\"type\":\"tool-call-end\",\"toolCallId\":\"c1\"}\n\n\
             data: {\"type\":\"tool-result\",\"toolCallId\":\"c0\",\"result\":\"held\"}\n\n\
             data: {\"type\":\"error\",\"error\":\"upstream went away\",\"code\":\"upstream_timeout\"}\n\n"
        );
        assert!(
            e.aborts(),
            "only a broken-off body shows the client a failure"
        );
    }

    #[test]
    fn orphan_args_get_a_start_and_orphan_ends_and_late_args_nothing() {
        let out = run(vec![
            end("never"),
            start("c1", "get_weather"),
            end("c1"),
            args("c2", "{}"),
            args("c1", "late"),
        ]);
        assert_eq!(
            out,
            "data: {\"type\":\"tool-call-start\",\"toolCallId\":\"c1\",\"toolCallName\":\"get_weather\"}\n\n\
             data: {\"type\":\"tool-call-end\",\"toolCallId\":\"c1\"}\n\n\
             data: {\"type\":\"tool-call-start\",\"toolCallId\":\"c2\",\"toolCallName\":\"unknown\"}\n\n\
             data: {\"type\":\"tool-call-args\",\"toolCallId\":\"c2\",\"delta\":\"{}\"}\n\n\
             data: {\"type\":\"tool-call-end\",\"toolCallId\":\"c2\"}\n\n\
             data: [DONE]\n\n"
        );
    }

    #[test]
    fn results_wait_for_open_calls() {
        let out = run(vec![
            start("a", "fa"),
            start("b", "fb"),
            end("a"),
            result("a", json!({"temp": 18})),
            args("b", "{}"),
            EventKind::ToolCallError {
                tool_call_id: "x".into(),
                error: "boom".into(),
                input_invalid: false,
            },
            end("b"),
            EventKind::ToolCallDenied {
                tool_call_id: "d".into(),
            },
        ]);
        assert_eq!(
            out,
            "data: {\"type\":\"tool-call-start\",\"toolCallId\":\"a\",\"toolCallName\":\"fa\"}\n\n\
             data: {\"type\":\"tool-call-start\",\"toolCallId\":\"b\",\"toolCallName\":\"fb\"}\n\n\
             data: {\"type\":\"tool-call-end\",\"toolCallId\":\"a\"}\n\n\
             data: {\"type\":\"tool-call-args\",\"toolCallId\":\"b\",\"delta\":\"{}\"}\n\n\
             data: {\"type\":\"tool-call-end\",\"toolCallId\":\"b\"}\n\n\
             data: {\"type\":\"tool-result\",\"toolCallId\":\"a\",\"result\":\"{\\\"temp\\\":18}\"}\n\n\
             data: {\"type\":\"tool-result\",\"toolCallId\":\"x\",\"result\":\"Tool call failed with info: boom\"}\n\n\
             data: {\"type\":\"tool-result\",\"toolCallId\":\"d\",\"result\":\"Tool call was denied by the user.\"}\n\n\
             data: [DONE]\n\n"
        );
    }

    #[test]
    fn interrupts_then_done() {
        let out = run(vec![
            start("c", "confirm_action"),
            args("c", "{}"),
            finished(Outcome::Interrupt {
                interrupts: vec![
                    Interrupt {
                        id: "i1".into(),
                        reason: "approval".into(),
                        message: Some("ok?".into()),
                        tool_call_id: Some("c".into()),
                        payload: None,
                        extra: Extra::new(),
                    },
                    Interrupt {
                        id: String::new(),
                        reason: "input".into(),
                        message: None,
                        tool_call_id: None,
                        payload: Some(json!({"schema": {}})),
                        extra: json!({"ignored": "not agkit"})
                            .as_object()
                            .cloned()
                            .unwrap(),
                    },
                ],
            }),
        ]);
        assert_eq!(
            out,
            "data: {\"type\":\"tool-call-start\",\"toolCallId\":\"c\",\"toolCallName\":\"confirm_action\"}\n\n\
             data: {\"type\":\"tool-call-args\",\"toolCallId\":\"c\",\"delta\":\"{}\"}\n\n\
             data: {\"type\":\"tool-call-end\",\"toolCallId\":\"c\"}\n\n\
             data: {\"type\":\"interrupt\",\"id\":\"i1\",\"reason\":\"approval\",\"payload\":{\"toolCallId\":\"c\",\"message\":\"ok?\"}}\n\n\
             data: {\"type\":\"interrupt\",\"id\":\"interrupt-1\",\"reason\":\"input\",\"payload\":{\"schema\":{}}}\n\n\
             data: [DONE]\n\n"
        );
    }

    #[test]
    fn what_agkit_cannot_say_goes_out_as_named_frames() {
        let mut k = Vec::new();
        k.push(EventKind::ReasoningPhaseStart {
            message_id: "p".into(),
        });
        k.push(EventKind::ReasoningStart {
            message_id: "r".into(),
        });
        k.push(EventKind::ReasoningDelta {
            message_id: "r".into(),
            delta: "hmm".into(),
        });
        k.push(EventKind::StateSnapshot {
            snapshot: json!({"a": 1}),
        });
        k.push(EventKind::StateDelta {
            patch: json!([{"op": "remove", "path": "/a"}]),
        });
        k.push(EventKind::Custom {
            name: "n".into(),
            value: json!(1),
        });
        k.push(EventKind::MessagesSnapshot {
            messages: vec![Message::text_message("m1", Role::User, "hi")],
        });
        k.push(EventKind::StepStarted { name: None });
        let out = run(k);
        assert_eq!(
            out,
            "data: {\"type\":\"reasoning-phase-start\",\"messageId\":\"p\"}\n\n\
             data: {\"type\":\"reasoning\",\"content\":\"hmm\"}\n\n\
             data: {\"type\":\"state-snapshot\",\"snapshot\":{\"a\":1}}\n\n\
             data: {\"type\":\"state-delta\",\"delta\":[{\"op\":\"remove\",\"path\":\"/a\"}]}\n\n\
             data: {\"type\":\"custom\",\"name\":\"n\",\"value\":1}\n\n\
             data: {\"type\":\"messages-snapshot\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"id\":\"m1\"}]}\n\n\
             data: {\"type\":\"step-started\"}\n\n\
             data: {\"type\":\"reasoning-phase-end\",\"messageId\":\"p\"}\n\n\
             data: {\"type\":\"step-finished\"}\n\n\
             data: [DONE]\n\n"
        );
    }

    #[test]
    fn unknown_events_by_origin() {
        let mut e = enc();
        let mut out = Vec::new();
        let own = |raw: Value| Event::new(EventKind::Unknown { raw }).with_origin(Dialect::AgKit);
        e.encode(&own(json!({"type": "usage", "n": 1})), &mut out);
        e.encode(&own(json!("keep-alive")), &mut out);
        e.encode(
            &Event::new(EventKind::Unknown {
                raw: json!({"type": "X_EVENT"}),
            })
            .with_origin(Dialect::AgUi),
            &mut out,
        );
        e.encode(&Event::new(EventKind::Unknown { raw: json!(2) }), &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "data: {\"type\":\"usage\",\"n\":1}\n\n\
             data: keep-alive\n\n\
             data: {\"type\":\"unknown\",\"dialect\":\"ag-ui\",\"event\":{\"type\":\"X_EVENT\"}}\n\n\
             data: {\"type\":\"unknown\",\"event\":2}\n\n"
        );
    }

    #[test]
    fn extras_only_from_agkit() {
        let extra: Extra = json!({"index": 0, "type": "evil"})
            .as_object()
            .cloned()
            .unwrap();
        let delta = EventKind::text_delta("m", "x");
        let mut out = Vec::new();
        let mut e = enc();
        e.encode(
            &Event::new(delta.clone())
                .with_origin(Dialect::AgKit)
                .with_extra(extra.clone()),
            &mut out,
        );
        e.encode(
            &Event::new(delta)
                .with_origin(Dialect::Hai)
                .with_extra(extra),
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "data: {\"type\":\"text\",\"content\":\"x\",\"index\":0}\n\n\
             data: {\"type\":\"text\",\"content\":\"x\"}\n\n"
        );
    }

    /// By default a client gets only the frame types the AG-Kit server
    /// declares: the rest is dropped and counted.
    #[test]
    fn only_declared_frame_types_by_default() {
        let mut e = AgKitEncoder::new(EncodeContext::deterministic());
        let mut out = Vec::new();
        let mut k = vec![EventKind::run_started()];
        k.push(EventKind::StepStarted { name: None });
        k.push(EventKind::ReasoningStart {
            message_id: "r".into(),
        });
        k.push(EventKind::ReasoningDelta {
            message_id: "r".into(),
            delta: "hmm".into(),
        });
        k.push(EventKind::ReasoningEnd {
            message_id: "r".into(),
        });
        text(&mut k, "m", &["hi"]);
        k.push(EventKind::StateSnapshot {
            snapshot: json!({"a": 1}),
        });
        k.push(EventKind::Custom {
            name: "n".into(),
            value: json!(1),
        });
        k.push(
            Event::new(EventKind::Unknown {
                raw: json!({"type": "X_EVENT"}),
            })
            .with_origin(Dialect::AgUi)
            .kind,
        );
        k.push(EventKind::StepFinished { name: None });
        k.push(finished(Outcome::Unspecified));
        for kind in k {
            e.encode(&Event::new(kind), &mut out);
        }
        e.encode(
            &Event::new(EventKind::Unknown {
                raw: json!({"type": "X_EVENT"}),
            })
            .with_origin(Dialect::AgUi),
            &mut out,
        );
        e.finish(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "data: {\"type\":\"text\",\"content\":\"hi\"}\n\ndata: [DONE]\n\n"
        );
        // steps x2, the reasoning delta, state, custom, the foreign unknown
        // event (nothing is encoded after `[DONE]`)
        assert_eq!(e.dropped(), 6);
    }

    /// The table's writer writes what the general path writes (bytes and
    /// spans), with and without extension frames.
    #[test]
    fn the_table_writes_as_the_general_path_writes() {
        let start = Event::new(EventKind::ToolCallStart {
            tool_call_id: "x".into(),
            tool_name: "f".into(),
            parent_message_id: None,
        });
        for extensions in [false, true] {
            let make =
                || AgKitEncoder::new(EncodeContext::deterministic()).with_extensions(extensions);
            let mut run = |events: &[Event], fast: bool| match fast {
                true => babelgate_core::testing::encode_all(&mut make(), events),
                false => babelgate_core::testing::encode_all(&mut make().general_only(), events),
            };
            babelgate_core::testing::check_table_encodes(
                &wire::FAST,
                std::slice::from_ref(&start),
                &mut run,
            )
            .unwrap();
        }
    }
}
