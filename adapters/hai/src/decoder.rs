//! HAI SSE frames to core events.
//!
//! The one structural difference from AG-UI is business data: a HAI message
//! (`BUSINESS_DATA_START` .. `BUSINESS_DATA_END`) may mix text, thinking and
//! widgets, while the core has separate text, reasoning and data events. The
//! mapping (see docs/mapping/hai.md):
//! - `BUSINESS_DATA_START` is held back until the message's first content, so
//!   that a message that thinks first becomes reasoning *then* text in every
//!   dialect. Any other frame in between releases it as a `TextStart`.
//! - text (a plain string delta or `{output:{type:"text"}}`) -> `TextStart`
//!   (once, id = the HAI message id) + `TextDelta`;
//! - `{output:{type:"thinking"}}` -> `ReasoningStart` (id `<id>:thinking`,
//!   `<id>:thinking-2`...) + `ReasoningDelta`, closed when text resumes or the
//!   message ends;
//! - any other output -> `Data { name: <output type> }`;
//! - `BUSINESS_DATA_END` -> the `TextEnd` (or `ReasoningEnd`) that closes it.
//!
//! Whatever the core has no slot for is kept in `extra` (wire names, plus the
//! `$` notes of [`crate::wire`]) so that the HAI encoder writes the same frames
//! back. Ends the HAI stream never sent but the core needs (a restarted
//! business message, thinking that gives way to text...) are
//! `Event::synthesized`. What the shape stage (`core::shape`) closes for every
//! dialect is not closed here: what a run leaves open at its end, a call
//! whose result arrives before its end.

use babelgate_core::event::{Extra, Interrupt, Outcome};
use babelgate_core::fast::{Read, Slot};
use babelgate_core::{
    DecodeError, Decoder, Dialect, Event, EventKind, Frame, OpenList, OpenTracker, Role,
};
use serde_json::{Map, Value};

use crate::request::message_from_json;
use crate::wire::{self, agui};

/// One HAI business-data message being decoded.
#[derive(Debug, Clone)]
struct Biz {
    id: String,
    /// The `BUSINESS_DATA_START` frame (without `type`), until an event
    /// carries it.
    start: Option<Map<String, Value>>,
    /// A core event has opened this message.
    opened: bool,
    text_open: bool,
    /// The open reasoning message.
    reasoning: Option<String>,
    thinking_count: u32,
}

/// What one `BUSINESS_DATA_CONTENT` delta holds.
enum Piece {
    Text {
        text: String,
        /// `None`: the extra handed over holds it already.
        template: Option<Value>,
    },
    Thinking {
        text: String,
        template: Value,
    },
    Widget {
        name: String,
        data: Value,
        /// `None` for a raw delta (written back verbatim).
        template: Option<Value>,
        inline: bool,
    },
}

#[derive(Debug, Default)]
pub struct HaiDecoder {
    /// Open business messages by id, in the order they opened (indexed, so
    /// that many left open cost no more per event than a few).
    bizs: OpenList<Biz>,
    /// Ids of the messages in `bizs` whose START is still held, oldest
    /// first: every other event releases them, so it is rarely longer than
    /// one.
    held_starts: Vec<String>,
    /// What the emitted events left open (tool calls, AG-UI-spelled
    /// messages), so that shorthand and orphan frames are read right.
    tracker: OpenTracker,
    collabs: OpenList<()>,
    /// AG-UI `TEXT_MESSAGE_CHUNK` / `TOOL_CALL_CHUNK` shorthand in progress.
    chunk_text: Option<String>,
    chunk_tool: Option<String>,
    minted: u64,
    /// The extra of a plain-string text delta, for the fast path.
    plain_extra: Option<Extra>,
}

impl HaiDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    fn mint(&mut self, prefix: &str) -> String {
        self.minted += 1;
        format!("{prefix}-{}", self.minted)
    }

    #[inline]
    fn emit(&mut self, out: &mut Vec<Event>, ev: Event) {
        self.tracker.observe(&ev);
        match &ev.kind {
            EventKind::CollabStart { message_id, .. } => {
                self.collabs.push(message_id.clone(), ());
            }
            EventKind::CollabEnd { message_id } => self.collabs.remove_all(message_id),
            EventKind::RunFinished { .. } | EventKind::RunError { .. } => self.collabs.clear(),
            _ => {}
        }
        out.push(ev);
    }

    /// Releases held-back `BUSINESS_DATA_START`s (all but `keep`) as
    /// `TextStart`s, so frames keep their order.
    fn flush_starts(&mut self, keep: Option<&str>, out: &mut Vec<Event>) {
        if self.held_starts.is_empty() {
            return;
        }
        let mut kept = Vec::new();
        for id in std::mem::take(&mut self.held_starts) {
            let Some(b) = self.bizs.get_mut(&id) else {
                continue; // ended or restarted since
            };
            if keep == Some(id.as_str()) {
                if b.start.is_some() && !kept.contains(&id) {
                    kept.push(id);
                }
                continue;
            }
            if let Some(start) = b.start.take() {
                b.opened = true;
                b.text_open = true;
                let ev = text_start_from(&id, start);
                self.emit(out, ev);
            }
        }
        self.held_starts = kept;
    }

    /// Ends the AG-UI chunk shorthand: a chunked message or call lasts until
    /// another event arrives.
    fn close_chunks(&mut self, ty: &str, out: &mut Vec<Event>) {
        if ty != agui::TEXT_MESSAGE_CHUNK {
            if let Some(id) = self.chunk_text.take() {
                if self.tracker.text_open(&id) {
                    self.emit(out, hai(EventKind::text_end(id)));
                }
            }
        }
        if ty != agui::TOOL_CALL_CHUNK {
            if let Some(id) = self.chunk_tool.take() {
                if self.tracker.tool_call_open(&id) {
                    self.emit(out, hai(EventKind::ToolCallEnd { tool_call_id: id }));
                }
            }
        }
    }

    /// Closes, without HAI frames, the business messages still open: before
    /// a `BUSINESS_DATA_START` that restarts one, where the HAI encoder would
    /// otherwise write the `BUSINESS_DATA_END` the source never sent.
    fn close_bizs(&mut self, out: &mut Vec<Event>) {
        for (_, b) in self.bizs.take_all() {
            if let Some(start) = b.start {
                // Never opened: its START frame still has to go out.
                self.emit(out, text_start_from(&b.id, start));
                self.emit(out, synth(EventKind::text_end(b.id)));
                continue;
            }
            if let Some(r) = b.reasoning {
                self.emit(out, synth(EventKind::ReasoningEnd { message_id: r }));
            }
            if !b.text_open {
                // Only widgets or thinking: a silent text pair closes it.
                self.emit(out, synth(EventKind::text_start(b.id.clone())));
            }
            self.emit(out, synth(EventKind::text_end(b.id)));
        }
    }

    /// The open business message `id`; a CONTENT without START
    /// (shorthand) opens it here.
    fn biz(&mut self, id: &str) -> Option<&mut Biz> {
        if !self.bizs.contains(id) {
            self.bizs.push(
                id.to_string(),
                Biz {
                    id: id.to_string(),
                    start: None,
                    opened: false,
                    text_open: false,
                    reasoning: None,
                    thinking_count: 0,
                },
            );
        }
        self.bizs.get_mut(id)
    }

    /// A `BUSINESS_DATA_CONTENT` whose delta [`classify`] has split.
    fn business_content(
        &mut self,
        id: String,
        piece: Piece,
        ts: Option<i64>,
        mut rest: Extra,
        out: &mut Vec<Event>,
    ) {
        // `biz` opens what is not open: this never returns.
        let Some(b) = self.biz(&id) else {
            return;
        };
        match piece {
            Piece::Text { text, template } => {
                let mut pre = Vec::new();
                if let Some(r) = b.reasoning.take() {
                    pre.push(synth(EventKind::ReasoningEnd { message_id: r }));
                }
                if !b.text_open {
                    b.text_open = true;
                    b.opened = true;
                    pre.push(match b.start.take() {
                        Some(start) => text_start_from(&id, start),
                        // Opened already (by thinking or a widget) or never
                        // started: the HAI message needs no new frame.
                        None => synth(EventKind::text_start(id.clone())),
                    });
                }
                for ev in pre {
                    self.emit(out, ev);
                }
                // The standard form is what the encoder writes without a
                // template: the event carries none (one map fewer per delta).
                if let Some(template) = template.filter(|t| !is_text_form(t)) {
                    rest.insert(wire::X_DELTA.into(), template);
                }
                // Built in place: an event is large and moves cost.
                let ev = Event {
                    kind: EventKind::text_delta(id, text),
                    timestamp: ts,
                    origin: Some(Dialect::Hai),
                    extra: rest,
                    restated: false,
                    synthesized: false,
                };
                self.emit(out, ev);
            }
            Piece::Thinking { text, template } => {
                let rid = match b.reasoning.clone() {
                    Some(r) => r,
                    None => {
                        b.thinking_count += 1;
                        let rid = match b.thinking_count {
                            1 => format!("{id}:thinking"),
                            n => format!("{id}:thinking-{n}"),
                        };
                        b.reasoning = Some(rid.clone());
                        let mut x = Extra::new();
                        let start_ts = opener_marks(b, &mut x);
                        let mut ev = hai(EventKind::ReasoningStart {
                            message_id: rid.clone(),
                        });
                        if x.is_empty() {
                            ev = ev.mark_synthesized();
                        } else {
                            ev = ev.with_timestamp(start_ts).with_extra(x);
                        }
                        self.emit(out, ev);
                        rid
                    }
                };
                rest.insert(wire::X_DELTA.into(), template);
                let ev = hai(EventKind::ReasoningDelta {
                    message_id: rid,
                    delta: text,
                })
                .with_timestamp(ts)
                .with_extra(rest);
                self.emit(out, ev);
            }
            Piece::Widget {
                name,
                data,
                template,
                inline,
            } => {
                opener_marks(b, &mut rest);
                // A block id names the widget (Vercel data-part ids play the
                // same part).
                let block = match rest.get("blockId") {
                    Some(Value::String(s)) => {
                        let s = s.clone();
                        rest.shift_remove("blockId");
                        Some(s)
                    }
                    _ => None,
                };
                // No template (a raw delta): the encoder writes `data` as
                // the delta.
                if let Some(t) = template {
                    rest.insert(wire::X_DELTA.into(), t);
                    if inline {
                        rest.insert(wire::X_INLINE.into(), Value::Bool(true));
                    }
                }
                let ev = hai(EventKind::Data {
                    name,
                    id: block,
                    message_id: Some(id),
                    data,
                    transient: false,
                })
                .with_timestamp(ts)
                .with_extra(rest);
                self.emit(out, ev);
            }
        }
    }

    /// A `BUSINESS_DATA_START` (`start`: the frame without `type`, id
    /// first), held back until the message's first content.
    fn business_start(&mut self, id: String, start: Map<String, Value>, out: &mut Vec<Event>) {
        if let Some(old) = self.bizs.take(&id) {
            // Restarted: the old one ends here.
            self.held_starts.retain(|x| *x != id);
            let others = std::mem::take(&mut self.bizs);
            self.bizs.push(id.clone(), old);
            self.close_bizs(out);
            self.bizs = others;
        }
        self.held_starts.push(id.clone());
        self.bizs.push(
            id.clone(),
            Biz {
                id,
                start: Some(start),
                opened: false,
                text_open: false,
                reasoning: None,
                thinking_count: 0,
            },
        );
    }

    fn business_end(&mut self, id: String, mut end: Map<String, Value>, out: &mut Vec<Event>) {
        let Some(b) = self.bizs.take(&id) else {
            // An END for no open message: keep it (a silent start makes the
            // core sequence valid).
            let start = synth(EventKind::text_start(id.clone()));
            self.emit(out, start);
            let ev = text_end_from(&id, end);
            self.emit(out, ev);
            return;
        };
        if let Some(start) = b.start {
            // An empty message.
            self.emit(out, text_start_from(&id, start));
            let ev = text_end_from(&id, end);
            self.emit(out, ev);
        } else if b.text_open {
            if let Some(r) = b.reasoning {
                self.emit(out, synth(EventKind::ReasoningEnd { message_id: r }));
            }
            let ev = text_end_from(&id, end);
            self.emit(out, ev);
        } else if let Some(r) = b.reasoning {
            // Ended while thinking: the reasoning end carries the END frame.
            let ts = take_ts(&mut end);
            let mut frame = end;
            if let Some(t) = ts {
                frame.insert("timestamp".into(), Value::from(t));
            }
            let mut x = Extra::new();
            x.insert(wire::X_END.into(), Value::Object(frame));
            let ev = hai(EventKind::ReasoningEnd { message_id: r })
                .with_timestamp(ts)
                .with_extra(x);
            self.emit(out, ev);
        } else {
            // Only widgets: a silent start, then the real end.
            let start = synth(EventKind::text_start(id.clone()));
            self.emit(out, start);
            let ev = text_end_from(&id, end);
            self.emit(out, ev);
        }
    }

    /// One event's object, without its `type` (`ty`).
    fn decode_object(
        &mut self,
        ty: &str,
        o: Map<String, Value>,
        out: &mut Vec<Event>,
    ) -> Result<(), DecodeError> {
        // Business content and ends of the message itself keep its START
        // held back; anything else releases it first.
        match ty {
            wire::BUSINESS_DATA_CONTENT | wire::BUSINESS_DATA_END => {
                let id = o
                    .get("messageId")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                self.flush_starts(id.as_deref(), out);
            }
            _ => self.flush_starts(None, out),
        }
        self.close_chunks(ty, out);
        match ty {
            wire::RUN_STARTED | wire::RUN_FINISHED | wire::RUN_ERROR => self.run(ty, o, out),
            wire::STEP_STARTED | wire::STEP_FINISHED => self.run(ty, o, out),
            wire::BUSINESS_DATA_START | wire::BUSINESS_DATA_CONTENT | wire::BUSINESS_DATA_END => {
                self.data(ty, o, out)
            }
            wire::COLLAB_START | wire::COLLAB_CONTENT | wire::COLLAB_END => self.collab(ty, o, out),
            wire::TOOL_CALL_START | wire::TOOL_CALL_ARGS => self.tools(ty, o, out),
            wire::TOOL_CALL_END | wire::TOOL_CALL_RESULT => self.tools(ty, o, out),
            wire::STATE_SNAPSHOT | wire::STATE_DELTA => self.state(ty, o, out),
            wire::MESSAGE_SNAPSHOT | agui::MESSAGES_SNAPSHOT => self.state(ty, o, out),
            wire::RAW | wire::CUSTOM => self.state(ty, o, out),
            // ---- AG-UI spellings a HAI agent may send (read, not written) ----
            agui::TEXT_MESSAGE_START | agui::TEXT_MESSAGE_CONTENT | agui::TEXT_MESSAGE_END => {
                self.ag_text(ty, o, out)
            }
            agui::TEXT_MESSAGE_CHUNK | agui::TOOL_CALL_CHUNK => self.chunks(ty, o, out),
            agui::REASONING_START | agui::REASONING_END => self.reason(ty, o, out),
            agui::REASONING_MESSAGE_START | agui::REASONING_MESSAGE_END => self.reason(ty, o, out),
            agui::REASONING_MESSAGE_CONTENT => self.reason(ty, o, out),
            _ => {
                self.keep_unknown(ty, o, out);
                Ok(())
            }
        }
    }

    /// RUN_STARTED, RUN_FINISHED, RUN_ERROR and the STEP pair.
    fn run(&mut self, ty: &str, mut o: Extra, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        use EventKind as K;
        match ty {
            wire::RUN_STARTED => {
                let ts = take_ts(&mut o);
                let kind = K::RunStarted {
                    thread_id: take_opt_str(&mut o, "threadId"),
                    run_id: take_opt_str(&mut o, "runId"),
                    parent_run_id: take_opt_str(&mut o, "parentRunId"),
                    message_id: take_opt_str(&mut o, "messageId"),
                    input: o.shift_remove("input"),
                };
                self.bizs.clear();
                self.held_starts.clear();
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            wire::RUN_FINISHED => {
                // What the run left open is closed by the shape stage
                // (`core::shape`), once for every dialect.
                self.bizs.clear();
                self.held_starts.clear();
                let ts = take_ts(&mut o);
                let outcome = match o.get("outcome").and_then(parse_outcome) {
                    Some(oc) => {
                        o.shift_remove("outcome");
                        oc
                    }
                    // Absent, or a shape this mapping cannot keep exactly:
                    // then it stays in extra, verbatim.
                    None => Outcome::Unspecified,
                };
                let kind = K::RunFinished {
                    thread_id: take_opt_str(&mut o, "threadId"),
                    run_id: take_opt_str(&mut o, "runId"),
                    message_id: take_opt_str(&mut o, "messageId"),
                    result: o.shift_remove("result"),
                    outcome,
                    finish_reason: None,
                    usage: o.shift_remove("usage"),
                };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            wire::RUN_ERROR => {
                let message = need_str(&mut o, ty, "message")?;
                self.bizs.clear();
                self.held_starts.clear();
                let ts = take_ts(&mut o);
                let kind = K::RunError {
                    message,
                    code: take_opt_str(&mut o, "code"),
                };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            wire::STEP_STARTED | wire::STEP_FINISHED => {
                let ts = take_ts(&mut o);
                let name = take_opt_str(&mut o, "stepName");
                let kind = if ty == wire::STEP_STARTED {
                    K::StepStarted { name }
                } else {
                    K::StepFinished { name }
                };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            _ => self.keep_unknown(ty, o, out),
        }
        Ok(())
    }

    /// The BUSINESS_DATA frames: one message, widgets and all.
    fn data(&mut self, ty: &str, mut o: Extra, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        match ty {
            wire::BUSINESS_DATA_START => {
                let id = need_str(&mut o, ty, "messageId")?;
                // messageId first, as the spec writes it
                let mut start = Map::new();
                start.insert("messageId".into(), Value::String(id.clone()));
                for (k, v) in o {
                    start.entry(k).or_insert(v);
                }
                self.business_start(id, start, out);
            }
            wire::BUSINESS_DATA_CONTENT => {
                let id = need_str(&mut o, ty, "messageId")?;
                let delta = o
                    .shift_remove("delta")
                    .ok_or_else(|| DecodeError::field(ty, "delta"))?;
                let ts = take_ts(&mut o);
                o.shift_remove("type");
                self.business_content(id, classify(delta), ts, o, out);
            }
            wire::BUSINESS_DATA_END => {
                let id = need_str(&mut o, ty, "messageId")?;
                o.shift_remove("type");
                let mut end = Map::new();
                end.insert("messageId".into(), Value::String(id.clone()));
                for (k, v) in o {
                    end.entry(k).or_insert(v);
                }
                self.business_end(id, end, out);
            }
            _ => self.keep_unknown(ty, o, out),
        }
        Ok(())
    }

    /// The COLLAB frames; content or an end without a start gets one.
    fn collab(&mut self, ty: &str, mut o: Extra, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        use EventKind as K;
        match ty {
            wire::COLLAB_START => {
                let id = need_str(&mut o, ty, "messageId")?;
                let ts = take_ts(&mut o);
                let kind = K::CollabStart {
                    message_id: id,
                    from: take_opt_str(&mut o, "from"),
                    to: take_opt_str(&mut o, "to"),
                };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            wire::COLLAB_CONTENT | wire::COLLAB_END => {
                let id = need_str(&mut o, ty, "messageId")?;
                if !self.collabs.contains(&id) {
                    let start = synth(K::CollabStart {
                        message_id: id.clone(),
                        from: None,
                        to: None,
                    });
                    self.emit(out, start);
                }
                let ts = take_ts(&mut o);
                let kind = if ty == wire::COLLAB_CONTENT {
                    let delta = o
                        .shift_remove("delta")
                        .ok_or_else(|| DecodeError::field(ty, "delta"))?;
                    K::CollabContent {
                        message_id: id,
                        delta,
                    }
                } else {
                    K::CollabEnd { message_id: id }
                };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            _ => self.keep_unknown(ty, o, out),
        }
        Ok(())
    }

    /// The TOOL_CALL frames.
    fn tools(&mut self, ty: &str, mut o: Extra, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        use EventKind as K;
        match ty {
            wire::TOOL_CALL_START => {
                let id = need_str(&mut o, ty, "toolCallId")?;
                let name = need_str(&mut o, ty, "toolCallName")?;
                let ts = take_ts(&mut o);
                let kind = K::ToolCallStart {
                    tool_call_id: id,
                    tool_name: name,
                    parent_message_id: take_opt_str(&mut o, "parentMessageId"),
                };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            wire::TOOL_CALL_ARGS => {
                let id = need_str(&mut o, ty, "toolCallId")?;
                let delta = match o.shift_remove("delta") {
                    Some(Value::String(s)) => s,
                    // The spec's builder types it `dict`: take the JSON text.
                    Some(other) => other.to_string(),
                    None => return Err(DecodeError::field(ty, "delta")),
                };
                self.ensure_tool_call(&id, out);
                let ts = take_ts(&mut o);
                let kind = K::ToolCallArgs {
                    tool_call_id: id,
                    delta,
                };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            wire::TOOL_CALL_END => {
                let id = need_str(&mut o, ty, "toolCallId")?;
                let ts = take_ts(&mut o);
                let kind = K::ToolCallEnd { tool_call_id: id };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            wire::TOOL_CALL_RESULT => {
                let id = need_str(&mut o, ty, "toolCallId")?;
                let content = o
                    .shift_remove("content")
                    .ok_or_else(|| DecodeError::field(ty, "content"))?;
                let ts = take_ts(&mut o);
                let kind = K::ToolCallResult {
                    tool_call_id: id,
                    message_id: take_opt_str(&mut o, "messageId"),
                    content,
                };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            _ => self.keep_unknown(ty, o, out),
        }
        Ok(())
    }

    /// State, messages snapshots, RAW and CUSTOM.
    fn state(&mut self, ty: &str, mut o: Extra, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        use EventKind as K;
        match ty {
            wire::STATE_SNAPSHOT => {
                let snapshot = o
                    .shift_remove("snapshot")
                    .ok_or_else(|| DecodeError::field(ty, "snapshot"))?;
                let ts = take_ts(&mut o);
                let kind = K::StateSnapshot { snapshot };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            wire::STATE_DELTA => {
                // An array of ops in HAI; anything else is kept as it came.
                let patch = o
                    .shift_remove("delta")
                    .ok_or_else(|| DecodeError::field(ty, "delta"))?;
                let ts = take_ts(&mut o);
                // Ops keep their `from` (HAI writes "" on every op); JSON
                // Patch appliers ignore it where the op does not use it.
                let kind = K::StateDelta { patch };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            wire::MESSAGE_SNAPSHOT | agui::MESSAGES_SNAPSHOT => {
                let Some(Value::Array(list)) = o.shift_remove("messages") else {
                    return Err(DecodeError::field(ty, "messages"));
                };
                let mut messages = Vec::with_capacity(list.len());
                for (i, m) in list.iter().enumerate() {
                    messages.push(
                        message_from_json(m, &format!("messages[{i}]"))
                            .map_err(|e| DecodeError::new(format!("{ty}: {}", e.message)))?,
                    );
                }
                let ts = take_ts(&mut o);
                let kind = K::MessagesSnapshot { messages };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            wire::RAW => {
                let event = o
                    .shift_remove("event")
                    .ok_or_else(|| DecodeError::field(ty, "event"))?;
                let ts = take_ts(&mut o);
                let kind = K::Raw {
                    event,
                    source: take_opt_str(&mut o, "source"),
                };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            wire::CUSTOM => {
                let name = need_str(&mut o, ty, "name")?;
                let ts = take_ts(&mut o);
                let value = o.shift_remove("value").unwrap_or(Value::Null);
                let kind = K::Custom { name, value };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            _ => self.keep_unknown(ty, o, out),
        }
        Ok(())
    }

    /// AG-UI's TEXT_MESSAGE START, CONTENT and END.
    fn ag_text(&mut self, ty: &str, mut o: Extra, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        use EventKind as K;
        match ty {
            agui::TEXT_MESSAGE_START => {
                let id = need_str(&mut o, ty, "messageId")?;
                let ts = take_ts(&mut o);
                let role = o
                    .get("role")
                    .and_then(Value::as_str)
                    .and_then(Role::parse)
                    .unwrap_or_default();
                let kind = K::TextStart {
                    message_id: id,
                    role,
                    name: take_opt_str(&mut o, "name"),
                };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            agui::TEXT_MESSAGE_CONTENT => {
                let id = need_str(&mut o, ty, "messageId")?;
                let delta = need_str(&mut o, ty, "delta")?;
                self.ensure_text(&id, out);
                let ts = take_ts(&mut o);
                let kind = K::TextDelta {
                    message_id: id,
                    delta,
                };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            agui::TEXT_MESSAGE_END => {
                let id = need_str(&mut o, ty, "messageId")?;
                let ts = take_ts(&mut o);
                let kind = K::TextEnd { message_id: id };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            _ => self.keep_unknown(ty, o, out),
        }
        Ok(())
    }

    /// AG-UI's CHUNK frames: each continues or opens its message or call.
    fn chunks(&mut self, ty: &str, mut o: Extra, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        use EventKind as K;
        match ty {
            agui::TEXT_MESSAGE_CHUNK => {
                let ts = take_ts(&mut o);
                let id = match take_opt_str(&mut o, "messageId") {
                    Some(id) => id,
                    None => match &self.chunk_text {
                        Some(id) => id.clone(),
                        None => self.mint("msg"),
                    },
                };
                if self.chunk_text.as_deref() != Some(id.as_str()) {
                    if let Some(prev) = self.chunk_text.take() {
                        self.emit(out, hai(K::TextEnd { message_id: prev }));
                    }
                    let role = o
                        .get("role")
                        .and_then(Value::as_str)
                        .and_then(Role::parse)
                        .unwrap_or_default();
                    let start = hai(K::TextStart {
                        message_id: id.clone(),
                        role,
                        name: take_opt_str(&mut o, "name"),
                    })
                    .with_timestamp(ts);
                    self.emit(out, start);
                    self.chunk_text = Some(id.clone());
                }
                if let Some(delta) = take_opt_str(&mut o, "delta") {
                    let ev = hai(K::TextDelta {
                        message_id: id,
                        delta,
                    })
                    .with_timestamp(ts);
                    self.emit(out, ev);
                }
            }
            agui::TOOL_CALL_CHUNK => {
                let ts = take_ts(&mut o);
                let id = match take_opt_str(&mut o, "toolCallId") {
                    Some(id) => id,
                    None => match &self.chunk_tool {
                        Some(id) => id.clone(),
                        None => self.mint("call"),
                    },
                };
                if self.chunk_tool.as_deref() != Some(id.as_str()) {
                    if let Some(prev) = self.chunk_tool.take() {
                        self.emit(out, hai(K::ToolCallEnd { tool_call_id: prev }));
                    }
                    let start = hai(K::ToolCallStart {
                        tool_call_id: id.clone(),
                        tool_name: take_opt_str(&mut o, "toolCallName")
                            .unwrap_or_else(|| "unknown".into()),
                        parent_message_id: take_opt_str(&mut o, "parentMessageId"),
                    })
                    .with_timestamp(ts);
                    self.emit(out, start);
                    self.chunk_tool = Some(id.clone());
                }
                if let Some(delta) = take_opt_str(&mut o, "delta") {
                    let ev = hai(K::ToolCallArgs {
                        tool_call_id: id,
                        delta,
                    })
                    .with_timestamp(ts);
                    self.emit(out, ev);
                }
            }
            _ => self.keep_unknown(ty, o, out),
        }
        Ok(())
    }

    /// AG-UI's REASONING frames.
    fn reason(&mut self, ty: &str, mut o: Extra, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        use EventKind as K;
        match ty {
            agui::REASONING_START | agui::REASONING_END => {
                let id = need_str(&mut o, ty, "messageId")?;
                let ts = take_ts(&mut o);
                let kind = if ty == agui::REASONING_START {
                    K::ReasoningPhaseStart { message_id: id }
                } else {
                    K::ReasoningPhaseEnd { message_id: id }
                };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            agui::REASONING_MESSAGE_START => {
                let id = need_str(&mut o, ty, "messageId")?;
                let ts = take_ts(&mut o);
                let kind = K::ReasoningStart { message_id: id };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            agui::REASONING_MESSAGE_CONTENT => {
                let id = need_str(&mut o, ty, "messageId")?;
                let delta = need_str(&mut o, ty, "delta")?;
                if !self.tracker.reasoning_open(&id) {
                    let start = hai(K::ReasoningStart {
                        message_id: id.clone(),
                    });
                    self.emit(out, start);
                }
                let ts = take_ts(&mut o);
                let kind = K::ReasoningDelta {
                    message_id: id,
                    delta,
                };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            agui::REASONING_MESSAGE_END => {
                let id = need_str(&mut o, ty, "messageId")?;
                let ts = take_ts(&mut o);
                let kind = K::ReasoningEnd { message_id: id };
                self.emit(out, hai(kind).with_timestamp(ts).with_extra(o));
            }
            _ => self.keep_unknown(ty, o, out),
        }
        Ok(())
    }

    /// A frame with no mapping, kept whole with `type` first. Not reached
    /// from `decode_raw` (it keeps unknown frames whole); kept for any other
    /// caller.
    fn keep_unknown(&mut self, ty: &str, o: Map<String, Value>, out: &mut Vec<Event>) {
        let mut raw = wire::frame(ty);
        for (k, v) in o {
            raw.entry(k).or_insert(v);
        }
        let ev = hai(EventKind::Unknown {
            raw: Value::Object(raw),
        });
        self.emit(out, ev);
    }

    /// An ARGS for a call never started: a silent start keeps the core valid.
    fn ensure_tool_call(&mut self, id: &str, out: &mut Vec<Event>) {
        if !self.tracker.tool_call_open(id) {
            let ev = synth(EventKind::ToolCallStart {
                tool_call_id: id.to_string(),
                tool_name: "unknown".into(),
                parent_message_id: None,
            });
            self.emit(out, ev);
        }
    }

    fn ensure_text(&mut self, id: &str, out: &mut Vec<Event>) {
        if !self.tracker.text_open(id) {
            let ev = hai(EventKind::text_start(id.to_string()));
            self.emit(out, ev);
        }
    }
}

// ---- the fast path ------------------------------------------------------------
//
// The frames of `wire::FAST` are read by the core's fast path and handed to
// the same state machine as the general path.

/// The extra the general path gives a text delta that was a plain string:
/// its template, `""`.
fn plain_extra() -> Extra {
    let mut plain = Extra::new();
    plain.insert(wire::X_DELTA.into(), Value::String(String::new()));
    plain
}

/// `{"output":{"type":"text"}}`: the template of HAI's standard text
/// delta, which the encoder writes when an event has none.
fn is_text_form(t: &Value) -> bool {
    let Value::Object(t) = t else { return false };
    t.len() == 1
        && matches!(t.get("output"), Some(Value::Object(o))
            if o.len() == 1 && o.get("type").and_then(Value::as_str) == Some(wire::OUTPUT_TEXT))
}

/// `{"type":"STATE_DELTA","delta":...}` with at most an integer
/// `timestamp` beside it: the patch read straight into its value, without
/// the frame's map. Anything else (another key, a repeated one, a
/// timestamp of another type, an escaped type) is `None`.
fn fast_state_delta(data: &str) -> Option<(Value, Option<i64>)> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct StateDelta<'a> {
        #[serde(rename = "type")]
        ty: &'a str,
        delta: Value,
        #[serde(default, deserialize_with = "int_timestamp")]
        timestamp: Option<i64>,
    }
    /// Present: an `i64` or an error (`null` included: the general path
    /// keeps a timestamp it cannot read in extra).
    fn int_timestamp<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        use serde::Deserialize;
        match Value::deserialize(d)?.as_i64() {
            Some(t) => Ok(Some(t)),
            None => Err(serde::de::Error::custom("not an integer timestamp")),
        }
    }
    // Producers write the type first; anything else is not worth a try.
    if !data.starts_with(r#"{"type":"STATE_DELTA""#) {
        return None;
    }
    let d: StateDelta = serde_json::from_str(data).ok()?;
    (d.ty == wire::STATE_DELTA).then_some((d.delta, d.timestamp))
}

impl HaiDecoder {
    /// Runs a frame the fast path read: what `decode_object` does for the
    /// same frame.
    fn decode_fast(&mut self, read: Read, out: &mut Vec<Event>) {
        use EventKind as K;
        let ty = wire::FAST.rows.get(read.row).map_or("", |r| r.wire);
        // START and END keep their fields as they came, `type` aside.
        let fields = |id: &str| {
            let mut m = Map::new();
            m.insert("messageId".into(), Value::String(id.to_string()));
            for &k in read.order() {
                match wire::FAST.keys.get(usize::from(k)).map(|k| k.1) {
                    Some(Slot::Role) => {
                        if let K::TextStart { role, .. } = &read.event.kind {
                            m.insert("role".into(), Value::String(role.as_str().into()));
                        }
                    }
                    Some(Slot::Timestamp) => {
                        m.insert("timestamp".into(), read.event.timestamp.into());
                    }
                    _ => {}
                }
            }
            m
        };
        match &read.event.kind {
            K::TextStart { message_id, .. } => {
                let start = fields(message_id);
                let id = message_id.clone();
                self.flush_starts(None, out);
                self.close_chunks(ty, out);
                self.business_start(id, start, out);
                return;
            }
            K::TextEnd { message_id } => {
                let end = fields(message_id);
                let id = message_id.clone();
                self.flush_starts(Some(&id), out);
                self.close_chunks(ty, out);
                self.business_end(id, end, out);
                return;
            }
            _ => {}
        }
        // Fields moved out one by one: moving the event out first costs a
        // copy per event.
        match read.event.kind {
            K::TextDelta { message_id, delta } => {
                self.flush_starts(Some(&message_id), out);
                self.close_chunks(ty, out);
                // The extra the general path makes: none for the standard
                // form; for a plain string copied from a ready one (a copy
                // does not hash its key again).
                let extra = if read.wrapped {
                    Map::new()
                } else {
                    self.plain_extra.get_or_insert_with(plain_extra).clone()
                };
                let piece = Piece::Text {
                    text: delta,
                    template: None,
                };
                self.business_content(message_id, piece, read.event.timestamp, extra, out);
            }
            kind => self.decode_plain(ty, Event { kind, ..read.event }, out),
        }
    }

    /// Any other event of the fast paths, ready.
    fn decode_plain(&mut self, ty: &str, ev: Event, out: &mut Vec<Event>) {
        self.flush_starts(None, out);
        self.close_chunks(ty, out);
        if let EventKind::ToolCallArgs { tool_call_id, .. } = &ev.kind {
            let id = tool_call_id.clone();
            self.ensure_tool_call(&id, out);
        }
        self.emit(out, ev);
    }
}

impl Decoder for HaiDecoder {
    fn dialect(&self) -> Dialect {
        Dialect::Hai
    }

    fn decode(&mut self, frame: &Frame, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        let data = frame.data.trim();
        // Comments-only or id-only frames carry nothing; HAI has no `[DONE]`
        // but a sloppy agent ending with one loses nothing by it.
        if data.is_empty() || frame.is_done() {
            return Ok(());
        }
        if let Some(read) = wire::FAST.read(data) {
            self.decode_fast(read, out);
            return Ok(());
        }
        if let Some((patch, ts)) = fast_state_delta(data) {
            let ev = hai(EventKind::StateDelta { patch }).with_timestamp(ts);
            self.decode_plain(wire::STATE_DELTA, ev, out);
            return Ok(());
        }
        let raw: Value = serde_json::from_str(data).map_err(|e| DecodeError::json(&e))?;
        self.decode_raw(raw, out)
    }

    /// One message of the binary transport: AG-UI's protobuf event, HAI's
    /// own events as `hai:` CUSTOM events (docs/transports.md), read to the
    /// HAI event's JSON and taken as a frame's JSON is.
    fn decode_binary(&mut self, message: &[u8], out: &mut Vec<Event>) -> Result<(), DecodeError> {
        let raw = babelgate_proto::decode_event_as(message, crate::POLICY.binary_custom_prefix)
            .map_err(|e| {
                DecodeError::new(format!("a protobuf message that does not decode: {e}"))
            })?;
        self.decode_raw(raw, out)
    }

    fn finish(&mut self, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        // A START held back when the input stopped still has to go out; the
        // encoder's finish closes what is open.
        self.flush_starts(None, out);
        Ok(())
    }
}

impl HaiDecoder {
    /// [`Decoder::decode`] without its fast path: the reference it must
    /// agree with, for the differential tests.
    #[doc(hidden)]
    pub fn decode_without_fast_paths(
        &mut self,
        frame: &Frame,
        out: &mut Vec<Event>,
    ) -> Result<(), DecodeError> {
        let data = frame.data.trim();
        if data.is_empty() || frame.is_done() {
            return Ok(());
        }
        let raw: Value = serde_json::from_str(data).map_err(|e| DecodeError::json(&e))?;
        self.decode_raw(raw, out)
    }

    /// One event's JSON value.
    fn decode_raw(&mut self, raw: Value, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        let Value::Object(mut o) = raw else {
            return Err(DecodeError::new("event is not a JSON object"));
        };
        let Some(Value::String(ty)) = o.get("type") else {
            return Err(DecodeError::new("event has no string `type`"));
        };
        if !wire::is_known_type(ty) {
            // Kept whole, as it came (no copy of it: it is moved).
            let ty = ty.clone();
            self.flush_starts(None, out);
            self.close_chunks(&ty, out);
            let ev = hai(EventKind::Unknown {
                raw: Value::Object(o),
            });
            self.emit(out, ev);
            return Ok(());
        }
        // Taken out of the map, not copied.
        let Some(Value::String(ty)) = o.shift_remove("type") else {
            return Err(DecodeError::new("event has no string `type`"));
        };
        self.decode_object(&ty, o, out)
    }
}

// ---- helpers ------------------------------------------------------------------

fn hai(kind: EventKind) -> Event {
    Event::new(kind).with_origin(Dialect::Hai)
}

fn synth(kind: EventKind) -> Event {
    hai(kind).mark_synthesized()
}

/// Removes an integer `timestamp`; any other value stays (in extra).
fn take_ts(o: &mut Map<String, Value>) -> Option<i64> {
    let t = o.get("timestamp").and_then(Value::as_i64)?;
    o.shift_remove("timestamp");
    Some(t)
}

/// Removes a string field; a non-string value stays (in extra).
fn take_opt_str(o: &mut Map<String, Value>, key: &str) -> Option<String> {
    match o.get(key) {
        Some(Value::String(s)) => {
            let s = s.clone();
            o.shift_remove(key);
            Some(s)
        }
        _ => None,
    }
}

fn need_str(o: &mut Map<String, Value>, ty: &str, key: &str) -> Result<String, DecodeError> {
    match o.shift_remove(key) {
        Some(Value::String(s)) => Ok(s),
        _ => Err(DecodeError::field(ty, key)),
    }
}

/// The `TextStart` a `BUSINESS_DATA_START` frame (without `type`) becomes.
fn text_start_from(id: &str, mut start: Map<String, Value>) -> Event {
    start.shift_remove("messageId");
    let ts = take_ts(&mut start);
    // `role` stays in extra as written (absent stays absent on the way back).
    let role = start
        .get("role")
        .and_then(Value::as_str)
        .and_then(Role::parse)
        .unwrap_or_default();
    hai(EventKind::TextStart {
        message_id: id.to_string(),
        role,
        name: None,
    })
    .with_timestamp(ts)
    .with_extra(start)
}

/// The `TextEnd` a `BUSINESS_DATA_END` frame (without `type`) becomes.
fn text_end_from(id: &str, mut end: Map<String, Value>) -> Event {
    end.shift_remove("messageId");
    let ts = take_ts(&mut end);
    hai(EventKind::text_end(id.to_string()))
        .with_timestamp(ts)
        .with_extra(end)
}

/// Marks the event that opens a business message: the held START frame, or
/// the id of a message that had none. Returns the START's timestamp.
fn opener_marks(b: &mut Biz, x: &mut Extra) -> Option<i64> {
    if b.opened {
        return None;
    }
    b.opened = true;
    match b.start.take() {
        Some(start) => {
            let ts = start.get("timestamp").and_then(Value::as_i64);
            x.insert(wire::X_START.into(), Value::Object(start));
            ts
        }
        None => {
            x.insert(wire::X_IMPLICIT.into(), Value::String(b.id.clone()));
            None
        }
    }
}

/// Splits a business-data delta into its payload and the rest (the template
/// the encoder fills the payload back into). The payload is taken out of the
/// delta in place (keys keep their order), nothing is copied.
fn classify(delta: Value) -> Piece {
    let raw = |delta: Value| Piece::Widget {
        name: wire::RAW_DELTA_NAME.into(),
        data: delta,
        template: None,
        inline: false,
    };
    let mut d = match delta {
        Value::String(text) => {
            return Piece::Text {
                text,
                template: Some(Value::String(String::new())),
            }
        }
        Value::Object(d) => d,
        other => return raw(other),
    };
    let ty = match d.get("output") {
        Some(Value::Object(output)) => match output.get("type") {
            Some(Value::String(ty)) => ty.clone(),
            _ => return raw(Value::Object(d)),
        },
        _ => return raw(Value::Object(d)),
    };
    let Some(Value::Object(output)) = d.get_mut("output") else {
        return raw(Value::Object(d));
    };
    if ty == wire::OUTPUT_TEXT && matches!(output.get("content"), Some(Value::String(_))) {
        if let Some(Value::String(text)) = output.shift_remove("content") {
            return Piece::Text {
                text,
                template: Some(Value::Object(d)),
            };
        }
    }
    if ty == wire::OUTPUT_THINKING {
        if let Some(Value::Object(data)) = output.get_mut("data") {
            if matches!(data.get("content"), Some(Value::String(_))) {
                if let Some(Value::String(text)) = data.shift_remove("content") {
                    return Piece::Thinking {
                        text,
                        template: Value::Object(d),
                    };
                }
            }
        }
    }
    // A widget: `{type, data}`, or its fields inline beside `type`.
    let (data, inline) = match output.shift_remove("data") {
        Some(data) => (data, false),
        None => {
            let mut fields = output.clone();
            fields.shift_remove("type");
            output.retain(|k, _| k == "type");
            (Value::Object(fields), true)
        }
    };
    Piece::Widget {
        name: ty,
        data,
        template: Some(Value::Object(d)),
        inline,
    }
}

/// An AG-UI 1.0 `RUN_FINISHED.outcome`, when it maps exactly.
fn parse_outcome(v: &Value) -> Option<Outcome> {
    let o = v.as_object()?;
    let only = |keys: &[&str]| o.keys().all(|k| keys.contains(&k.as_str()));
    match o.get("type")?.as_str()? {
        "success" if only(&["type", "pendingToolCallIds"]) => {
            let ids = match o.get("pendingToolCallIds") {
                None => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|x| x.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()?,
                Some(_) => return None,
            };
            Some(Outcome::Success {
                pending_tool_call_ids: ids,
            })
        }
        "cancelled" if only(&["type"]) => Some(Outcome::Cancelled { reason: None }),
        "interrupt" if only(&["type", "interrupts"]) => {
            let list = o.get("interrupts")?.as_array()?;
            let mut interrupts = Vec::with_capacity(list.len());
            for i in list {
                let mut i = i.as_object()?.clone();
                let id = i.shift_remove("id")?.as_str()?.to_string();
                let reason = i.shift_remove("reason")?.as_str()?.to_string();
                let message = take_opt_str(&mut i, "message");
                let tool_call_id = take_opt_str(&mut i, "toolCallId");
                let payload = match i.shift_remove("responseSchema") {
                    Some(p) => Some(p),
                    None => i.shift_remove("payload"),
                };
                interrupts.push(Interrupt {
                    id,
                    reason,
                    message,
                    tool_call_id,
                    payload,
                    extra: i,
                });
            }
            Some(Outcome::Interrupt { interrupts })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
