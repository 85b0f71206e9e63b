//! AG-UI SSE frames -> core events.
//!
//! One frame holds one JSON event (`data: {json}`); an `event:` line is
//! optional and only used when the JSON has no `type`. `data: [DONE]` is not
//! AG-UI, but some servers send it: it ends the input. Fields with a slot in
//! the core model are taken out; everything else (`rawEvent`, `metadata`,
//! `subagentRunId`, unknown fields) stays in `Event::extra` under its wire
//! name. CHUNK events are expanded with the client's own lane rules
//! ([`crate::chunks`]), so every delta follows its start; the chunk itself
//! rides along privately so the AG-UI encoder can write it back unchanged.

use babelgate_core::event::Interrupt;
use babelgate_core::{DecodeError, Decoder, Dialect, Event, EventKind, Frame, Outcome, Role};
use serde_json::{Map, Value};

use crate::chunks::{lane_effect, Chunk, ChunkKind, LaneEffect, Lanes, Pending};
use crate::request::message_from_wire;
use crate::wire::*;

#[derive(Debug, Default)]
pub struct AgUiDecoder {
    lanes: Lanes,
    /// A `[DONE]` frame ended the input.
    done: bool,
    /// Counter for the ids deprecated THINKING_* events lack.
    minted: u64,
    thinking_span: Option<String>,
    thinking_message: Option<String>,
    /// The frame being decoded is a deprecated THINKING_* event: its events
    /// are `restated`, so that a same-dialect route writes them as mapped,
    /// not as received. The client's compatibility boundary upgrades those
    /// with ids of its own minting, so that the ends the gateway writes for
    /// a cut stream would name reasoning the client never saw.
    deprecated: bool,
}

impl AgUiDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    fn mint(&mut self) -> String {
        self.minted += 1;
        format!("thinking-{}", self.minted)
    }
}

/// The fields of one event, taken out one by one; what is left is `extra`.
struct Fields {
    ty: String,
    o: Map<String, Value>,
    ts: Option<i64>,
}

impl Fields {
    fn new(ty: &str, mut o: Map<String, Value>) -> Fields {
        o.remove("type");
        let ts = match o.get("timestamp") {
            Some(v) if safe_int(v) => v.as_i64(),
            _ => None,
        };
        if ts.is_some() || matches!(o.get("timestamp"), Some(Value::Null)) {
            o.remove("timestamp");
        }
        // Pre-1.0 producers wrote null for an absent rawEvent; the client drops it.
        if matches!(o.get("rawEvent"), Some(Value::Null)) {
            o.remove("rawEvent");
        }
        Fields {
            ty: ty.to_string(),
            o,
            ts,
        }
    }

    fn err(&self, field: &str) -> DecodeError {
        DecodeError::field(&self.ty, field)
    }

    fn req_str(&mut self, key: &str) -> Result<String, DecodeError> {
        match self.o.remove(key) {
            Some(Value::String(s)) => Ok(s),
            _ => Err(self.err(key)),
        }
    }

    fn opt_str(&mut self, key: &str) -> Result<Option<String>, DecodeError> {
        match self.o.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(self.err(key)),
        }
    }

    /// A required field that may hold any JSON, null included.
    fn req_val(&mut self, key: &str) -> Result<Value, DecodeError> {
        self.o.remove(key).ok_or_else(|| self.err(key))
    }

    fn opt_val(&mut self, key: &str) -> Option<Value> {
        self.o.remove(key).filter(|v| !v.is_null())
    }

    fn event(self, kind: EventKind) -> Event {
        Event::new(kind)
            .with_timestamp(self.ts)
            .with_origin(Dialect::AgUi)
            .with_extra(self.o)
    }
}

fn tag_extra(tag: &Option<String>) -> Map<String, Value> {
    let mut m = Map::new();
    if let Some(t) = tag {
        m.insert("subagentRunId".into(), t.clone().into());
    }
    m
}

/// The end the client synthesizes when a chunk lane closes.
fn derived_end(p: Pending) -> Event {
    let kind = match p.kind {
        ChunkKind::Text => EventKind::text_end(p.id),
        ChunkKind::Tool => EventKind::ToolCallEnd { tool_call_id: p.id },
        ChunkKind::Reasoning => EventKind::ReasoningEnd { message_id: p.id },
    };
    Event::new(kind)
        .with_origin(Dialect::AgUi)
        .with_extra(tag_extra(&p.subagent_run_id))
}

fn parse_role(ty: &str, s: Option<String>) -> Result<Option<Role>, DecodeError> {
    match s {
        None => Ok(None),
        Some(r) => Role::parse(&r)
            .map(Some)
            .ok_or_else(|| DecodeError::new(format!("{ty}: unknown role `{r}`"))),
    }
}

fn parse_interrupt(v: Value, path: &str) -> Result<Interrupt, DecodeError> {
    let field = |f: &str| DecodeError::field(RUN_FINISHED, &format!("{path}.{f}"));
    let Value::Object(mut o) = v else {
        return Err(DecodeError::field(RUN_FINISHED, path));
    };
    let take_str = |o: &mut Map<String, Value>, k: &str, required: bool| match o.remove(k) {
        Some(Value::String(s)) => Ok(Some(s)),
        None | Some(Value::Null) if !required => Ok(None),
        _ => Err(field(k)),
    };
    let id = take_str(&mut o, "id", true)?.unwrap_or_default();
    let reason = take_str(&mut o, "reason", true)?.unwrap_or_default();
    let message = take_str(&mut o, "message", false)?;
    let tool_call_id = take_str(&mut o, "toolCallId", false)?;
    let payload = o.remove("responseSchema").filter(|v| !v.is_null());
    Ok(Interrupt {
        id,
        reason,
        message,
        tool_call_id,
        payload,
        extra: o,
    })
}

/// RUN_FINISHED.outcome; one the core cannot model is kept verbatim in extra.
fn parse_outcome(f: &mut Fields) -> Result<Outcome, DecodeError> {
    let Some(v) = f.opt_val("outcome") else {
        return Ok(Outcome::Unspecified);
    };
    let ty = v
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    match (ty.as_str(), v) {
        ("success", Value::Object(mut o)) => {
            let ids = match o.remove("pendingToolCallIds") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a
                    .into_iter()
                    .map(|x| match x {
                        Value::String(s) => Ok(s),
                        _ => Err(f.err("outcome.pendingToolCallIds")),
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(f.err("outcome.pendingToolCallIds")),
            };
            Ok(Outcome::Success {
                pending_tool_call_ids: ids,
            })
        }
        ("interrupt", Value::Object(mut o)) => {
            let Some(Value::Array(list)) = o.remove("interrupts") else {
                return Err(f.err("outcome.interrupts"));
            };
            let interrupts = list
                .into_iter()
                .enumerate()
                .map(|(i, v)| parse_interrupt(v, &format!("outcome.interrupts[{i}]")))
                .collect::<Result<_, _>>()?;
            Ok(Outcome::Interrupt { interrupts })
        }
        ("cancelled", _) => Ok(Outcome::Cancelled { reason: None }),
        (_, other) => {
            f.o.insert("outcome".into(), other);
            Ok(Outcome::Unspecified)
        }
    }
}

impl AgUiDecoder {
    fn decode_chunk(
        &mut self,
        kind: ChunkKind,
        obj: Map<String, Value>,
        out: &mut Vec<Event>,
    ) -> Result<(), DecodeError> {
        let ty = obj
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let raw = Value::Object(obj.clone());
        let chunk = Chunk::read(kind, &obj).map_err(DecodeError::new)?;
        let exp = self
            .lanes
            .expand(kind, &chunk)
            .map_err(|e| DecodeError::new(format!("{ty}: {e}")))?;
        let ts = Fields::new(&ty, obj).ts;
        out.extend(exp.closed.into_iter().map(derived_end));

        let mut made: Vec<Event> = Vec::new();
        let with = |kind: EventKind, extra: Map<String, Value>| {
            Event::new(kind)
                .with_timestamp(ts)
                .with_origin(Dialect::AgUi)
                .with_extra(extra)
        };
        if let Some(p) = &exp.opened {
            let mut extra = tag_extra(&p.subagent_run_id);
            if let Some(m) = &chunk.metadata {
                extra.insert("metadata".into(), m.clone());
            }
            let k = match kind {
                ChunkKind::Text => EventKind::TextStart {
                    message_id: p.id.clone(),
                    role: parse_role(&ty, p.role.clone())?.unwrap_or_default(),
                    name: p.name.clone(),
                },
                ChunkKind::Tool => EventKind::ToolCallStart {
                    tool_call_id: p.id.clone(),
                    tool_name: p.tool_name.clone().unwrap_or_default(),
                    parent_message_id: p.parent_message_id.clone(),
                },
                ChunkKind::Reasoning => EventKind::ReasoningStart {
                    message_id: p.id.clone(),
                },
            };
            made.push(with(k, extra));
        }
        // The client makes no content event for a bare continuation chunk;
        // an empty delta keeps the frame for a same-dialect round trip.
        if exp.content.is_some() || exp.opened.is_none() {
            let (id, delta, owner) = exp.content.clone().unwrap_or_else(|| {
                let owner = chunk.tag.clone();
                (exp.id.clone(), String::new(), owner)
            });
            let mut extra = chunk.remainder.clone();
            extra.extend(tag_extra(&owner));
            if let Some(m) = &chunk.metadata {
                extra.insert("metadata".into(), m.clone());
            }
            if let Some(r) = &chunk.raw_event {
                extra.insert("rawEvent".into(), r.clone());
            }
            let k = match kind {
                ChunkKind::Text => EventKind::text_delta(id, delta),
                ChunkKind::Tool => EventKind::ToolCallArgs {
                    tool_call_id: id,
                    delta,
                },
                ChunkKind::Reasoning => EventKind::ReasoningDelta {
                    message_id: id,
                    delta,
                },
            };
            made.push(with(k, extra));
        } else if let Some(first) = made.first_mut() {
            first.extra.extend(chunk.remainder.clone());
        }
        // The chunk stands for the first event; the content after a start
        // is made from the same frame (the encoder counts it from the
        // chunk's expansion).
        for (i, ev) in made.iter_mut().enumerate() {
            if i == 0 {
                ev.extra.insert(NOTE_CHUNK.into(), raw.clone());
            } else {
                ev.synthesized = true;
            }
        }
        out.extend(made);
        Ok(())
    }

    /// Maps one non-chunk event; returns the core events it makes.
    fn decode_event(
        &mut self,
        ty: &str,
        obj: Map<String, Value>,
    ) -> Result<Vec<Event>, DecodeError> {
        let mut f = Fields::new(ty, obj);
        let kind = match ty {
            RUN_STARTED | RUN_FINISHED | RUN_ERROR | STEP_STARTED | STEP_FINISHED => {
                Self::run_kind(ty, &mut f)?
            }
            TEXT_MESSAGE_START | TEXT_MESSAGE_CONTENT | TEXT_MESSAGE_END | TOOL_CALL_START
            | TOOL_CALL_ARGS | TOOL_CALL_END | TOOL_CALL_RESULT => Self::message_kind(ty, &mut f)?,
            STATE_SNAPSHOT | STATE_DELTA | MESSAGES_SNAPSHOT | ACTIVITY_SNAPSHOT
            | ACTIVITY_DELTA | RAW | CUSTOM => Self::state_kind(ty, &mut f)?,
            REASONING_START
            | REASONING_MESSAGE_START
            | REASONING_MESSAGE_CONTENT
            | REASONING_MESSAGE_END
            | REASONING_END
            | REASONING_ENCRYPTED_VALUE
            | SUBAGENT_STARTED
            | SUBAGENT_FINISHED
            | SUBAGENT_ERROR => Self::reasoning_kind(ty, &mut f)?,
            THINKING_START
            | THINKING_TEXT_MESSAGE_START
            | THINKING_TEXT_MESSAGE_CONTENT
            | THINKING_TEXT_MESSAGE_END
            | THINKING_END => return self.thinking_event(ty, f),
            other => return Err(Self::not_mapped(other)),
        };
        Ok(vec![f.event(kind)])
    }

    /// RUN_* and STEP_*.
    fn run_kind(ty: &str, f: &mut Fields) -> Result<EventKind, DecodeError> {
        let kind = match ty {
            RUN_STARTED => EventKind::RunStarted {
                thread_id: Some(f.req_str("threadId")?),
                run_id: Some(f.req_str("runId")?),
                parent_run_id: f.opt_str("parentRunId")?,
                message_id: None,
                input: f.opt_val("input"),
            },
            RUN_FINISHED => {
                let thread_id = Some(f.req_str("threadId")?);
                let run_id = Some(f.req_str("runId")?);
                let result = f.opt_val("result");
                let outcome = parse_outcome(f)?;
                EventKind::RunFinished {
                    thread_id,
                    run_id,
                    message_id: None,
                    result,
                    outcome,
                    finish_reason: None,
                    usage: f.opt_val("usage"),
                }
            }
            RUN_ERROR => EventKind::RunError {
                message: f.req_str("message")?,
                code: f.opt_str("code")?,
            },
            STEP_STARTED => EventKind::StepStarted {
                name: Some(f.req_str("stepName")?),
            },
            STEP_FINISHED => EventKind::StepFinished {
                name: Some(f.req_str("stepName")?),
            },
            other => return Err(Self::not_mapped(other)),
        };
        Ok(kind)
    }

    /// TEXT_MESSAGE_* and TOOL_CALL_*.
    fn message_kind(ty: &str, f: &mut Fields) -> Result<EventKind, DecodeError> {
        let kind = match ty {
            TEXT_MESSAGE_START => {
                let message_id = f.req_str("messageId")?;
                // No role is the assistant's (the schema's default), which
                // the encoder writes.
                let role = parse_role(ty, f.opt_str("role")?)?;
                EventKind::TextStart {
                    message_id,
                    role: role.unwrap_or_default(),
                    name: f.opt_str("name")?,
                }
            }
            TEXT_MESSAGE_CONTENT => {
                EventKind::text_delta(f.req_str("messageId")?, f.req_str("delta")?)
            }
            TEXT_MESSAGE_END => EventKind::text_end(f.req_str("messageId")?),
            TOOL_CALL_START => EventKind::ToolCallStart {
                tool_call_id: f.req_str("toolCallId")?,
                tool_name: f.req_str("toolCallName")?,
                parent_message_id: f.opt_str("parentMessageId")?,
            },
            TOOL_CALL_ARGS => EventKind::ToolCallArgs {
                tool_call_id: f.req_str("toolCallId")?,
                delta: f.req_str("delta")?,
            },
            TOOL_CALL_END => EventKind::ToolCallEnd {
                tool_call_id: f.req_str("toolCallId")?,
            },
            TOOL_CALL_RESULT => EventKind::ToolCallResult {
                tool_call_id: f.req_str("toolCallId")?,
                message_id: f.opt_str("messageId")?,
                content: f.req_val("content")?,
            },
            other => return Err(Self::not_mapped(other)),
        };
        Ok(kind)
    }

    /// State, messages and activity snapshots and deltas, RAW and CUSTOM.
    fn state_kind(ty: &str, f: &mut Fields) -> Result<EventKind, DecodeError> {
        let kind = match ty {
            STATE_SNAPSHOT => EventKind::StateSnapshot {
                snapshot: f.req_val("snapshot")?,
            },
            STATE_DELTA => EventKind::StateDelta {
                patch: f.req_val("delta")?,
            },
            MESSAGES_SNAPSHOT => {
                let Some(Value::Array(list)) = f.o.remove("messages") else {
                    return Err(f.err("messages"));
                };
                let messages = list
                    .iter()
                    .enumerate()
                    .map(|(i, m)| message_from_wire(m, &format!("messages[{i}]")))
                    .collect::<Result<_, _>>()
                    .map_err(|e| DecodeError::new(format!("{ty}: {}", e.message)))?;
                EventKind::MessagesSnapshot { messages }
            }
            ACTIVITY_SNAPSHOT => EventKind::ActivitySnapshot {
                message_id: f.req_str("messageId")?,
                activity_type: f.req_str("activityType")?,
                content: f.req_val("content")?,
                replace: match f.o.remove("replace") {
                    None | Some(Value::Null) => None,
                    Some(Value::Bool(b)) => Some(b),
                    Some(_) => return Err(f.err("replace")),
                },
            },
            ACTIVITY_DELTA => EventKind::ActivityDelta {
                message_id: f.req_str("messageId")?,
                activity_type: f.req_str("activityType")?,
                patch: f.req_val("patch")?,
            },
            RAW => EventKind::Raw {
                event: f.req_val("event")?,
                source: f.opt_str("source")?,
            },
            CUSTOM => EventKind::Custom {
                name: f.req_str("name")?,
                value: f.req_val("value")?,
            },
            other => return Err(Self::not_mapped(other)),
        };
        Ok(kind)
    }

    /// REASONING_* and SUBAGENT_*.
    fn reasoning_kind(ty: &str, f: &mut Fields) -> Result<EventKind, DecodeError> {
        let kind = match ty {
            REASONING_START => EventKind::ReasoningPhaseStart {
                message_id: f.req_str("messageId")?,
            },
            REASONING_MESSAGE_START => {
                // Always "reasoning"; the encoder writes it back.
                f.o.remove("role");
                EventKind::ReasoningStart {
                    message_id: f.req_str("messageId")?,
                }
            }
            REASONING_MESSAGE_CONTENT => EventKind::ReasoningDelta {
                message_id: f.req_str("messageId")?,
                delta: f.req_str("delta")?,
            },
            REASONING_MESSAGE_END => EventKind::ReasoningEnd {
                message_id: f.req_str("messageId")?,
            },
            REASONING_END => EventKind::ReasoningPhaseEnd {
                message_id: f.req_str("messageId")?,
            },
            REASONING_ENCRYPTED_VALUE => EventKind::ReasoningEncrypted {
                subtype: f.req_str("subtype")?,
                entity_id: f.req_str("entityId")?,
                value: f.req_str("encryptedValue")?,
            },
            SUBAGENT_STARTED => EventKind::SubagentStarted {
                subagent_run_id: f.req_str("subagentRunId")?,
                name: f.req_str("name")?,
                description: f.opt_str("description")?,
            },
            SUBAGENT_FINISHED => EventKind::SubagentFinished {
                subagent_run_id: f.req_str("subagentRunId")?,
                result: f.opt_val("result"),
                outcome: f.opt_val("outcome"),
            },
            SUBAGENT_ERROR => EventKind::SubagentError {
                subagent_run_id: f.req_str("subagentRunId")?,
                message: f.req_str("message")?,
                code: f.opt_str("code")?,
            },
            other => return Err(Self::not_mapped(other)),
        };
        Ok(kind)
    }

    /// Deprecated names, upgraded the way the client's compatibility
    /// boundary does (their ids are minted; THINKING_START.title has no
    /// place in 1.0 and is dropped there too).
    fn thinking_event(&mut self, ty: &str, mut f: Fields) -> Result<Vec<Event>, DecodeError> {
        let kind = match ty {
            THINKING_START => {
                self.deprecated = true;
                f.o.remove("title");
                let id = self.mint();
                self.thinking_span = Some(id.clone());
                EventKind::ReasoningPhaseStart { message_id: id }
            }
            THINKING_TEXT_MESSAGE_START => {
                self.deprecated = true;
                let id = self.mint();
                self.thinking_message = Some(id.clone());
                EventKind::ReasoningStart { message_id: id }
            }
            THINKING_TEXT_MESSAGE_CONTENT => {
                self.deprecated = true;
                let delta = f.req_str("delta")?;
                let mut made = Vec::new();
                let id = match &self.thinking_message {
                    Some(id) => id.clone(),
                    None => {
                        let id = self.mint();
                        self.thinking_message = Some(id.clone());
                        made.push(
                            Event::new(EventKind::ReasoningStart {
                                message_id: id.clone(),
                            })
                            .with_origin(Dialect::AgUi),
                        );
                        id
                    }
                };
                made.push(f.event(EventKind::ReasoningDelta {
                    message_id: id,
                    delta,
                }));
                return Ok(made);
            }
            THINKING_TEXT_MESSAGE_END => {
                self.deprecated = true;
                match self.thinking_message.take() {
                    Some(id) => EventKind::ReasoningEnd { message_id: id },
                    None => return Ok(Vec::new()),
                }
            }
            THINKING_END => {
                self.deprecated = true;
                match self.thinking_span.take() {
                    Some(id) => EventKind::ReasoningPhaseEnd { message_id: id },
                    None => return Ok(Vec::new()),
                }
            }
            other => return Err(Self::not_mapped(other)),
        };
        Ok(vec![f.event(kind)])
    }

    /// A type no arm maps: the one message, whichever match meets it.
    fn not_mapped(ty: &str) -> DecodeError {
        DecodeError::new(format!("{ty}: not an event this decoder maps"))
    }
}

/// An event of the fast paths (no tag, AG-UI's origin).
fn plain(kind: EventKind, timestamp: Option<i64>, extra: Map<String, Value>) -> Event {
    Event {
        kind,
        timestamp,
        origin: Some(Dialect::AgUi),
        extra,
        restated: false,
        synthesized: false,
    }
}

impl Decoder for AgUiDecoder {
    fn dialect(&self) -> Dialect {
        Dialect::AgUi
    }

    fn decode(&mut self, frame: &Frame, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        let from = out.len();
        let r = self.decode_frame(frame, out);
        self.restate(from, out);
        r
    }

    /// One `ag_ui.Event` message of the binary transport: the hot events
    /// read in place (their strings borrowed from the message), the rest
    /// decoded to their JSON form and taken as a frame's JSON is.
    fn decode_binary(&mut self, message: &[u8], out: &mut Vec<Event>) -> Result<(), DecodeError> {
        let from = out.len();
        let r = self.decode_message(message, out);
        self.restate(from, out);
        r
    }
}

impl AgUiDecoder {
    /// Marks what a deprecated frame became (see `deprecated`).
    fn restate(&mut self, from: usize, out: &mut [Event]) {
        if std::mem::take(&mut self.deprecated) {
            for e in out.iter_mut().skip(from) {
                e.restated = true;
            }
        }
    }

    fn decode_frame(&mut self, frame: &Frame, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        if self.skip(frame) {
            return Ok(());
        }
        let at = out.len();
        if FAST.read_into(&frame.data, out) {
            self.close_lanes_before(at, out);
            return Ok(());
        }
        if let Some(patch) = fast_state_delta(&frame.data) {
            if !self.lanes.is_empty() {
                let closed = self.lanes.apply(&LaneEffect::Lane(None));
                out.extend(closed.into_iter().map(derived_end));
            }
            out.push(Event {
                kind: EventKind::StateDelta { patch },
                timestamp: None,
                origin: Some(Dialect::AgUi),
                extra: Map::new(),
                restated: false,
                synthesized: false,
            });
            return Ok(());
        }
        self.decode_general(frame, out)
    }

    fn decode_message(&mut self, message: &[u8], out: &mut Vec<Event>) -> Result<(), DecodeError> {
        if self.done {
            return Ok(());
        }
        if let Some(ev) = babelgate_proto::flat::read(message).and_then(|f| flat_event(&f)) {
            self.push_plain(ev, out);
            return Ok(());
        }
        if let Some((ops, timestamp)) = babelgate_proto::flat::state_delta::read(message) {
            let patch = Value::Array(ops);
            self.push_plain(
                plain(EventKind::StateDelta { patch }, timestamp, Map::new()),
                out,
            );
            return Ok(());
        }
        let v = babelgate_proto::decode_event(message).map_err(proto_error)?;
        self.decode_value(v, None, out)
    }
}

fn proto_error(e: babelgate_proto::Error) -> DecodeError {
    DecodeError::new(format!("a protobuf message that does not decode: {e}"))
}

/// The fast path's events from a flat protobuf message: the same table
/// (`wire::FAST`), the timestamp carried apart.
fn flat_event(f: &babelgate_proto::flat::Flat<'_>) -> Option<Event> {
    FAST.event_of(f.event_type(), f.timestamp, |k| f.has_only(k), |k| f.get(k))
}

/// `{"type":"STATE_DELTA","delta":...}` and nothing else: the patch read
/// straight into its value, without the map of the general path.
fn fast_state_delta(data: &str) -> Option<Value> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct StateDelta<'a> {
        #[serde(rename = "type")]
        ty: &'a str,
        delta: Value,
    }
    // Producers write the type first; anything else is not worth a try.
    if !data.trim_start().starts_with(r#"{"type":"STATE_DELTA""#) {
        return None;
    }
    let d: StateDelta = serde_json::from_str(data).ok()?;
    (d.ty == STATE_DELTA).then_some(d.delta)
}

impl AgUiDecoder {
    /// An event of the fast paths: no tag, so it closes the chunk lanes as
    /// `lane_effect` says for untagged events.
    fn push_plain(&mut self, ev: Event, out: &mut Vec<Event>) {
        let at = out.len();
        out.push(ev);
        self.close_lanes_before(at, out);
    }

    /// What an event of the fast paths, pushed at `at`, closes goes before
    /// it (the event is read where it stays: moving it costs a copy).
    fn close_lanes_before(&mut self, at: usize, out: &mut Vec<Event>) {
        if !self.lanes.is_empty() {
            let closed = self.lanes.apply(&LaneEffect::Lane(None));
            out.splice(at..at, closed.into_iter().map(derived_end));
        }
    }

    /// Frames that make no event: blank ones, `[DONE]` and all after it.
    fn skip(&mut self, frame: &Frame) -> bool {
        if self.done {
            return true;
        }
        // An event opens with `{`: neither blank nor `[DONE]`, no need to trim.
        if frame.data.starts_with('{') {
            return false;
        }
        if frame.data.trim().is_empty() {
            return true;
        }
        if frame.is_done() {
            self.done = true;
            return true;
        }
        false
    }

    /// [`Decoder::decode`] without its fast paths: the reference they must
    /// agree with, for the differential tests here and in crates/tools/fuzz/.
    #[doc(hidden)]
    pub fn decode_without_fast_paths(
        &mut self,
        frame: &Frame,
        out: &mut Vec<Event>,
    ) -> Result<(), DecodeError> {
        if self.skip(frame) {
            return Ok(());
        }
        let from = out.len();
        let r = self.decode_general(frame, out);
        self.restate(from, out);
        r
    }

    /// Any frame, through a JSON map (see `wire::FAST` for the hot path).
    fn decode_general(&mut self, frame: &Frame, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        let v: Value = serde_json::from_str(&frame.data).map_err(|e| DecodeError::json(&e))?;
        self.decode_value(v, frame.event.as_deref(), out)
    }

    /// [`Decoder::decode_binary`] without its fast path, for the
    /// differential tests.
    #[doc(hidden)]
    pub fn decode_binary_without_fast_paths(
        &mut self,
        message: &[u8],
        out: &mut Vec<Event>,
    ) -> Result<(), DecodeError> {
        let v = babelgate_proto::decode_event_general(message).map_err(proto_error)?;
        self.decode_value(v, None, out)
    }

    /// One event's JSON value (`event_line`: the SSE `event:` field, the
    /// type when the JSON has none).
    fn decode_value(
        &mut self,
        v: Value,
        event_line: Option<&str>,
        out: &mut Vec<Event>,
    ) -> Result<(), DecodeError> {
        let Value::Object(mut obj) = v else {
            return Err(DecodeError::new("an AG-UI event must be a JSON object"));
        };
        let ty = match obj.get("type") {
            Some(Value::String(t)) if !t.is_empty() => t.clone(),
            None => match event_line.filter(|e| !e.is_empty()) {
                // The type only in the SSE `event:` line.
                Some(e) => {
                    obj.insert("type".into(), e.into());
                    e.to_string()
                }
                None => return Err(DecodeError::field("event", "type")),
            },
            Some(_) => return Err(DecodeError::field("event", "type")),
        };
        if let Some(kind) = ChunkKind::of_chunk_type(&ty) {
            return self.decode_chunk(kind, obj, out);
        }
        if !is_known_type(&ty) {
            // Kept whole; the client drops it (with a warning), so it does not
            // touch the chunk lanes either.
            out.push(
                Event::new(EventKind::Unknown {
                    raw: Value::Object(obj),
                })
                .with_origin(Dialect::AgUi),
            );
            return Ok(());
        }
        let effect = lane_effect(&ty, &obj);
        let made = self.decode_event(&ty, obj)?;
        out.extend(self.lanes.apply(&effect).into_iter().map(derived_end));
        out.extend(made);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fast_state_delta_agrees_with_the_general_path() {
        for data in [
            r#"{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/a","value":{"b":[1,2]}}]}"#,
            r#"{"type":"STATE_DELTA","delta":null}"#,
            r#"{"type":"STATE_DELTA","delta":[]}"#,
        ] {
            let mut fast = Vec::new();
            AgUiDecoder::new().decode(&frame(data), &mut fast).unwrap();
            let mut general = Vec::new();
            AgUiDecoder::new()
                .decode_general(&frame(data), &mut general)
                .unwrap();
            assert_eq!(fast, general, "{data}");
            assert!(fast_state_delta(data).is_some(), "{data}");
        }
        for data in [
            r#"{"type":"STATE_DELTA","delta":[],"timestamp":1}"#,
            r#"{"type":"STATE_DELTA","delta":[],"delta":[]}"#,
            r#"{"type":"STATE_DELTA"}"#,
            r#"{"type":"STATE_DELTA","delta":[],"type":"RAW"}"#,
        ] {
            assert!(fast_state_delta(data).is_none(), "{data}");
        }
    }

    /// The table declares what the general path does (each row's frames,
    /// alone, after a chunk lane they close, and in a row).
    #[test]
    fn the_table_reads_as_the_general_path_reads() {
        let lane = r#"{"type":"TEXT_MESSAGE_CHUNK","messageId":"x","delta":"a"}"#;
        let mut run = |frames: &[String], fast: bool| {
            let mut d = AgUiDecoder::new();
            let mut all: Vec<_> = frames
                .iter()
                .map(|data| {
                    let mut out = Vec::new();
                    match fast {
                        true => d.decode(&frame(data), &mut out),
                        false => d.decode_without_fast_paths(&frame(data), &mut out),
                    }
                    .map(|()| out)
                })
                .collect();
            let mut out = Vec::new();
            all.push(d.finish(&mut out).map(|()| out));
            all
        };
        babelgate_core::testing::check_table_decodes(&FAST, &[lane], &mut run).unwrap();
    }

    fn frame(data: &str) -> Frame {
        Frame {
            data: data.to_string(),
            ..Default::default()
        }
    }

    fn decode_all(lines: &[Value]) -> Result<Vec<Event>, DecodeError> {
        let mut d = AgUiDecoder::new();
        let mut out = Vec::new();
        for l in lines {
            d.decode(&frame(&l.to_string()), &mut out)?;
        }
        d.finish(&mut out)?;
        Ok(out)
    }

    fn kinds(lines: &[Value]) -> Vec<EventKind> {
        decode_all(lines)
            .unwrap()
            .into_iter()
            .map(|e| e.kind)
            .collect()
    }

    fn one(line: Value) -> Event {
        let mut v = decode_all(&[line]).unwrap();
        assert_eq!(v.len(), 1, "{v:?}");
        v.remove(0)
    }

    #[test]
    fn run_lifecycle_and_base_fields() {
        let e = one(
            json!({"type":"RUN_STARTED","timestamp":5,"threadId":"t","runId":"r","parentRunId":"p",
            "input":{"threadId":"t","runId":"r","messages":[]},"protocolVersion":"1.0","rawEvent":{"x":1},
            "metadata":{"k":1},"future":true}),
        );
        assert_eq!(e.timestamp, Some(5));
        assert_eq!(e.origin, Some(Dialect::AgUi));
        assert!(
            matches!(&e.kind, EventKind::RunStarted { thread_id: Some(t), parent_run_id: Some(p), input: Some(_), .. } if t == "t" && p == "p")
        );
        assert_eq!(
            Value::Object(e.extra),
            json!({"protocolVersion":"1.0","rawEvent":{"x":1},"metadata":{"k":1},"future":true})
        );
        let e = one(
            json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","result":{"a":1},
            "outcome":{"type":"success","pendingToolCallIds":["c1"]},"usage":[{"inputTokens":3}]}),
        );
        assert_eq!(
            e.kind,
            EventKind::RunFinished {
                thread_id: Some("t".into()),
                run_id: Some("r".into()),
                message_id: None,
                result: Some(json!({"a":1})),
                outcome: Outcome::Success {
                    pending_tool_call_ids: vec!["c1".into()]
                },
                finish_reason: None,
                usage: Some(json!([{"inputTokens":3}])),
            }
        );
        let e = one(
            json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt",
            "interrupts":[{"id":"i","reason":"confirm","message":"ok?","toolCallId":"c","responseSchema":{"type":"object"},"expiresAt":"2030"}]}}),
        );
        let EventKind::RunFinished {
            outcome: Outcome::Interrupt { interrupts },
            ..
        } = e.kind
        else {
            panic!()
        };
        assert_eq!(interrupts[0].payload, Some(json!({"type":"object"})));
        assert_eq!(interrupts[0].extra["expiresAt"], "2030");
        let e = one(
            json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"cancelled"}}),
        );
        assert!(matches!(
            e.kind,
            EventKind::RunFinished {
                outcome: Outcome::Cancelled { reason: None },
                ..
            }
        ));
        // legacy null outcome and result: absent
        let e = one(
            json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":null,"result":null}),
        );
        assert!(matches!(
            e.kind,
            EventKind::RunFinished {
                outcome: Outcome::Unspecified,
                result: None,
                ..
            }
        ));
        assert!(e.extra.is_empty());
        let e = one(json!({"type":"RUN_ERROR","message":"boom","code":"X","usage":[]}));
        assert_eq!(
            e.kind,
            EventKind::RunError {
                message: "boom".into(),
                code: Some("X".into())
            }
        );
        assert_eq!(e.extra["usage"], json!([]));
    }

    #[test]
    fn every_event_type_decodes() {
        let k = kinds(&[
            json!({"type":"STEP_STARTED","stepName":"s"}),
            json!({"type":"STEP_FINISHED","stepName":"s"}),
            json!({"type":"TEXT_MESSAGE_START","messageId":"m","role":"user","name":"ann"}),
            json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hi"}),
            json!({"type":"TEXT_MESSAGE_END","messageId":"m"}),
            json!({"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","parentMessageId":null}),
            json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{}"}),
            json!({"type":"TOOL_CALL_END","toolCallId":"c"}),
            json!({"type":"TOOL_CALL_RESULT","messageId":"r","toolCallId":"c","content":[{"type":"text","text":"x"}]}),
            json!({"type":"STATE_SNAPSHOT","snapshot":null}),
            json!({"type":"STATE_DELTA","delta":[]}),
            json!({"type":"MESSAGES_SNAPSHOT","messages":[{"id":"u","role":"user","content":"q"}]}),
            json!({"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"plan","content":{},"replace":false}),
            json!({"type":"ACTIVITY_DELTA","messageId":"a","activityType":"plan","patch":[]}),
            json!({"type":"RAW","event":{"x":1},"source":"p"}),
            json!({"type":"CUSTOM","name":"n","value":null}),
            json!({"type":"REASONING_START","messageId":"rs"}),
            json!({"type":"REASONING_MESSAGE_START","messageId":"r1","role":"reasoning"}),
            json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"r1","delta":"d"}),
            json!({"type":"REASONING_MESSAGE_END","messageId":"r1"}),
            json!({"type":"REASONING_END","messageId":"rs"}),
            json!({"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"r1","encryptedValue":"e"}),
            json!({"type":"SUBAGENT_STARTED","subagentRunId":"s","name":"n","description":"d","parentToolCallId":"c"}),
            json!({"type":"SUBAGENT_FINISHED","subagentRunId":"s","outcome":{"type":"success"}}),
            json!({"type":"SUBAGENT_ERROR","subagentRunId":"s","message":"m"}),
        ]);
        let names: Vec<_> = k.iter().map(EventKind::name).collect();
        assert_eq!(
            names,
            [
                "step_started",
                "step_finished",
                "text_start",
                "text_delta",
                "text_end",
                "tool_call_start",
                "tool_call_args",
                "tool_call_end",
                "tool_call_result",
                "state_snapshot",
                "state_delta",
                "messages_snapshot",
                "activity_snapshot",
                "activity_delta",
                "raw",
                "custom",
                "reasoning_phase_start",
                "reasoning_start",
                "reasoning_delta",
                "reasoning_end",
                "reasoning_phase_end",
                "reasoning_encrypted",
                "subagent_started",
                "subagent_finished",
                "subagent_error"
            ]
        );
        assert!(
            matches!(&k[2], EventKind::TextStart { role: Role::User, name: Some(n), .. } if n == "ann")
        );
        assert!(matches!(
            &k[5],
            EventKind::ToolCallStart {
                parent_message_id: None,
                ..
            }
        ));
        assert!(matches!(
            &k[12],
            EventKind::ActivitySnapshot {
                replace: Some(false),
                ..
            }
        ));
    }

    #[test]
    fn text_chunks_expand_like_the_client() {
        let evs = decode_all(&[
            json!({"type":"TEXT_MESSAGE_CHUNK","timestamp":1,"messageId":"m1","role":"assistant","delta":"a"}),
            json!({"type":"TEXT_MESSAGE_CHUNK","delta":"b"}),
            json!({"type":"RAW","event":1}),
            json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m2"}),
            json!({"type":"CUSTOM","name":"x","value":1}),
        ])
        .unwrap();
        let k: Vec<_> = evs.iter().map(|e| e.kind.clone()).collect();
        assert_eq!(
            k,
            [
                EventKind::text_start("m1"),
                EventKind::text_delta("m1", "a"),
                EventKind::text_delta("m1", "b"),
                EventKind::Raw {
                    event: json!(1),
                    source: None
                },
                EventKind::text_end("m1"),
                EventKind::text_start("m2"),
                EventKind::text_end("m2"),
                EventKind::Custom {
                    name: "x".into(),
                    value: json!(1)
                },
            ]
        );
        assert_eq!(evs[0].timestamp, Some(1));
        assert_eq!(evs[0].extra[NOTE_CHUNK]["delta"], "a");
        assert!(!evs[0].synthesized && evs[1].synthesized);
        assert!(evs[2].extra.contains_key(NOTE_CHUNK) && !evs[2].synthesized);
    }

    #[test]
    fn tool_and_reasoning_chunks() {
        let k = kinds(&[
            json!({"type":"TOOL_CALL_CHUNK","toolCallId":"c","toolCallName":"f","parentMessageId":"m","delta":"{\"a\""}),
            json!({"type":"TOOL_CALL_CHUNK","delta":":1}"}),
            json!({"type":"REASONING_MESSAGE_CHUNK","messageId":"r","delta":"hm"}),
            json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}),
        ]);
        assert_eq!(
            k[..5],
            [
                EventKind::ToolCallStart {
                    tool_call_id: "c".into(),
                    tool_name: "f".into(),
                    parent_message_id: Some("m".into())
                },
                EventKind::ToolCallArgs {
                    tool_call_id: "c".into(),
                    delta: "{\"a\"".into()
                },
                EventKind::ToolCallArgs {
                    tool_call_id: "c".into(),
                    delta: ":1}".into()
                },
                EventKind::ToolCallEnd {
                    tool_call_id: "c".into()
                },
                EventKind::ReasoningStart {
                    message_id: "r".into()
                },
            ]
        );
        assert_eq!(
            k[6],
            EventKind::ReasoningEnd {
                message_id: "r".into()
            }
        );
        assert!(matches!(k[7], EventKind::RunFinished { .. }));
    }

    #[test]
    fn deprecated_thinking_events_become_reasoning() {
        let k = kinds(&[
            json!({"type":"THINKING_START","title":"plan"}),
            json!({"type":"THINKING_TEXT_MESSAGE_START"}),
            json!({"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":"x"}),
            json!({"type":"THINKING_TEXT_MESSAGE_END"}),
            json!({"type":"THINKING_END"}),
        ]);
        assert_eq!(
            k,
            [
                EventKind::ReasoningPhaseStart {
                    message_id: "thinking-1".into()
                },
                EventKind::ReasoningStart {
                    message_id: "thinking-2".into()
                },
                EventKind::ReasoningDelta {
                    message_id: "thinking-2".into(),
                    delta: "x".into()
                },
                EventKind::ReasoningEnd {
                    message_id: "thinking-2".into()
                },
                EventKind::ReasoningPhaseEnd {
                    message_id: "thinking-1".into()
                },
            ]
        );
    }

    #[test]
    fn unknown_done_event_line_and_empty_frames() {
        let e = one(json!({"type":"FUTURE_EVENT","x":1}));
        assert_eq!(
            e.kind,
            EventKind::Unknown {
                raw: json!({"type":"FUTURE_EVENT","x":1})
            }
        );
        assert_eq!(e.origin, Some(Dialect::AgUi));

        let mut d = AgUiDecoder::new();
        let mut out = Vec::new();
        let f = Frame {
            event: Some("TEXT_MESSAGE_END".into()),
            data: r#"{"messageId":"m"}"#.into(),
            ..Default::default()
        };
        d.decode(&f, &mut out).unwrap();
        let f = Frame {
            event: Some("ignored".into()),
            data: r#"{"type":"TEXT_MESSAGE_END","messageId":"n"}"#.into(),
            ..Default::default()
        };
        d.decode(&f, &mut out).unwrap();
        d.decode(&frame(""), &mut out).unwrap();
        d.decode(&frame("[DONE]"), &mut out).unwrap();
        d.decode(&frame("not json, but after [DONE]"), &mut out)
            .unwrap();
        let k: Vec<_> = out.into_iter().map(|e| e.kind).collect();
        assert_eq!(k, [EventKind::text_end("m"), EventKind::text_end("n")]);
    }

    #[test]
    fn malformed_input_is_a_clear_error() {
        let cases: [(&str, &str); 9] = [
            ("{", "invalid JSON"),
            ("[1]", "must be a JSON object"),
            (r#"{"x":1}"#, "missing or invalid field `type`"),
            (
                r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"m"}"#,
                "TEXT_MESSAGE_CONTENT: missing or invalid field `delta`",
            ),
            (
                r#"{"type":"RUN_STARTED","threadId":"t","runId":7}"#,
                "RUN_STARTED: missing or invalid field `runId`",
            ),
            (
                r#"{"type":"TEXT_MESSAGE_CHUNK","delta":"x"}"#,
                "First TEXT_MESSAGE_CHUNK must have a messageId",
            ),
            (
                r#"{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[{"reason":"x"}]}}"#,
                "`outcome.interrupts[0].id`",
            ),
            (
                r#"{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"robot"}]}"#,
                "`messages[0].role`",
            ),
            (
                r#"{"type":"TEXT_MESSAGE_START","messageId":"m","role":"wizard"}"#,
                "unknown role `wizard`",
            ),
        ];
        for (data, want) in cases {
            let err = AgUiDecoder::new()
                .decode(&frame(data), &mut Vec::new())
                .unwrap_err();
            assert!(err.message.contains(want), "{data}: {}", err.message);
        }
    }

    /// A backslash before a multi-byte character is invalid JSON; the fast
    /// path once sliced the string inside that character and panicked
    /// (`babelgate translate` exited 101 with no output). Now it leaves the
    /// frame to the general path, which reports serde_json's error.
    #[test]
    fn a_backslash_before_a_multibyte_character_is_an_error() {
        for bad in [r"\é", r"ok \北", r"\🎉", r"\\\é", r"\u00e9\é", r"\"] {
            for data in [
                format!(r#"{{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"{bad}"}}"#),
                format!(r#"{{"type":"TEXT_MESSAGE_CONTENT","messageId":"{bad}","delta":"a"}}"#),
                format!(r#"{{"type":"TOOL_CALL_RESULT","toolCallId":"c","content":"{bad}"}}"#),
            ] {
                assert!(FAST.read(&data).map(|r| r.event).is_none(), "{data}");
                let err = AgUiDecoder::new()
                    .decode(&frame(&data), &mut Vec::new())
                    .unwrap_err();
                let want = serde_json::from_str::<Value>(&data).unwrap_err();
                assert_eq!(err, DecodeError::json(&want), "{data}");
            }
        }
    }
}
