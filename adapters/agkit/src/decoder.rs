//! AG-Kit SSE frames -> core events.
//!
//! AG-Kit text is shorthand (`{"type":"text","content"}`, no message id, no
//! start or end): the decoder mints `agkit-text-<n>`, opens the message at the
//! first `text` and closes it at the first frame of another kind or at the
//! end of the run. Nothing on the wire starts a run, so no `RunStarted` is
//! emitted (encoders synthesize one with the ids of the request they serve).
//! The run ends at `[DONE]` or, for a run that waits for a human, with the
//! `interrupt` frames before it: consecutive `interrupt` frames become one
//! `RunFinished { outcome: Interrupt }`.
//!
//! Leniency follows the real client (`@cloudbase/agent-ui-web` 0.0.24), which
//! stops reading at `[DONE]` and skips frames it cannot parse: a frame that is
//! not JSON becomes `Unknown { raw: <the text> }` instead of an error (an
//! error would make the gateway end a stream the real client keeps reading),
//! and so do unknown types and malformed extension frames. A native frame
//! (`text`, `tool-call-*`, `tool-result`, `interrupt`, `error`) missing a
//! required field is a `DecodeError`: mapping it would lose what it was for.

use babelgate_core::event::SourceKind;
use babelgate_core::{
    DecodeError, Decoder, Dialect, Event, EventKind, Extra, Frame, Interrupt, Outcome,
};
use serde_json::{Map, Value};

use crate::request::message_from_wire;
use crate::wire::{self, Fields};

#[derive(Debug)]
pub struct AgKitDecoder {
    /// The text message being written, with its minted id.
    text: Option<String>,
    reasoning: Option<String>,
    text_count: u64,
    reasoning_count: u64,
    /// `interrupt` frames seen since the last other frame.
    interrupts: Vec<Interrupt>,
    /// A `RunFinished`/`RunError` went out.
    ended: bool,
    /// `[DONE]` was read: the client reads nothing after it, nor do we.
    done: bool,
    /// Whether the frequent frames are read without a JSON map (tests turn
    /// it off to hold that path to the general one).
    plain: bool,
}

impl Default for AgKitDecoder {
    fn default() -> Self {
        AgKitDecoder {
            text: None,
            reasoning: None,
            text_count: 0,
            reasoning_count: 0,
            interrupts: Vec::new(),
            ended: false,
            done: false,
            plain: true,
        }
    }
}

impl AgKitDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every frame the general way (tests hold the map-free path to it).
    #[doc(hidden)]
    pub fn general_only(mut self) -> Self {
        self.plain = false;
        self
    }

    fn emit(out: &mut Vec<Event>, kind: EventKind, extra: Extra) {
        out.push(
            Event::new(kind)
                .with_origin(Dialect::AgKit)
                .with_extra(extra),
        );
    }

    fn close_text(&mut self, out: &mut Vec<Event>) {
        if let Some(message_id) = self.text.take() {
            Self::emit(out, EventKind::text_end(message_id), Extra::new());
        }
    }

    fn close_reasoning(&mut self, out: &mut Vec<Event>) {
        if let Some(message_id) = self.reasoning.take() {
            Self::emit(out, EventKind::ReasoningEnd { message_id }, Extra::new());
        }
    }

    /// Ends the run: with the pending interrupts if any, else plainly (once).
    fn end_run(&mut self, out: &mut Vec<Event>) {
        let outcome = if !self.interrupts.is_empty() {
            Outcome::Interrupt {
                interrupts: std::mem::take(&mut self.interrupts),
            }
        } else if self.ended {
            return;
        } else {
            Outcome::Unspecified
        };
        self.ended = true;
        let kind = EventKind::run_finished(outcome);
        Self::emit(out, kind, Extra::new());
    }

    /// What a frame of type `ty` implies before its own events: shorthand
    /// text/reasoning end at any other frame, interrupts end the run.
    fn before(&mut self, ty: Option<&str>, out: &mut Vec<Event>) {
        if ty != Some(wire::TEXT) {
            self.close_text(out);
        }
        if ty != Some(wire::REASONING) {
            self.close_reasoning(out);
        }
        if ty != Some(wire::INTERRUPT) && !self.interrupts.is_empty() {
            self.end_run(out);
        }
    }

    fn native(&mut self, ty: &str, mut f: Fields, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        let need = |v: Option<String>, field: &str| v.ok_or_else(|| DecodeError::field(ty, field));
        match ty {
            wire::TEXT => {
                let delta = need(f.string("content"), "content")?;
                self.text_delta(delta, f.extra(), out);
            }
            wire::TOOL_CALL_START => {
                let tool_call_id = need(f.string("toolCallId"), "toolCallId")?;
                let tool_name = need(f.string("toolCallName"), "toolCallName")?;
                let kind = EventKind::ToolCallStart {
                    tool_call_id,
                    tool_name,
                    parent_message_id: None,
                };
                Self::emit(out, kind, f.extra());
            }
            wire::TOOL_CALL_ARGS => {
                let tool_call_id = need(f.string("toolCallId"), "toolCallId")?;
                let delta = need(f.string("delta"), "delta")?;
                Self::emit(
                    out,
                    EventKind::ToolCallArgs {
                        tool_call_id,
                        delta,
                    },
                    f.extra(),
                );
            }
            wire::TOOL_CALL_END => {
                let tool_call_id = need(f.string("toolCallId"), "toolCallId")?;
                Self::emit(out, EventKind::ToolCallEnd { tool_call_id }, f.extra());
            }
            wire::TOOL_RESULT => {
                let tool_call_id = need(f.string("toolCallId"), "toolCallId")?;
                let result = need(f.string("result"), "result")?;
                let kind = EventKind::ToolCallResult {
                    tool_call_id,
                    message_id: None,
                    content: Value::String(result),
                };
                Self::emit(out, kind, f.extra());
            }
            wire::INTERRUPT => {
                let id = need(f.string("id"), "id")?;
                let mut extra = Extra::new();
                // The server declares `reason: Optional[str]`: keep a null
                // so the same frame comes back out.
                let reason = match f.value("reason") {
                    None => String::new(),
                    Some(Value::String(s)) => s,
                    Some(Value::Null) => {
                        extra.insert("reason".into(), Value::Null);
                        String::new()
                    }
                    Some(_) => return Err(DecodeError::field(ty, "reason")),
                };
                let payload = f.value("payload").filter(|v| !v.is_null());
                let tool_call_id = f
                    .opt_string("toolCallId")
                    .map_err(|_| DecodeError::field(ty, "toolCallId"))?;
                let message = f
                    .opt_string("message")
                    .map_err(|_| DecodeError::field(ty, "message"))?;
                extra.extend(f.extra());
                self.interrupts.push(Interrupt {
                    id,
                    reason,
                    message,
                    tool_call_id,
                    payload,
                    extra,
                });
            }
            _ => {
                // `error`, or the type-less `{"error", "details"}` the 0.1.1
                // server writes when it cannot even start the agent.
                let message = need(f.string("error"), "error")?;
                let code = f
                    .opt_string("code")
                    .map_err(|_| DecodeError::field(ty, "code"))?;
                Self::emit(out, EventKind::RunError { message, code }, f.extra());
                self.ended = true;
            }
        }
        Ok(())
    }

    /// A shorthand `text` frame's events: the message opened at its first.
    fn text_delta(&mut self, delta: String, extra: Extra, out: &mut Vec<Event>) {
        let message_id = match &self.text {
            Some(id) => id.clone(),
            None => {
                self.text_count += 1;
                let id = format!("agkit-text-{}", self.text_count);
                self.text = Some(id.clone());
                let start = EventKind::TextStart {
                    message_id: id.clone(),
                    role: Default::default(),
                    name: None,
                };
                Self::emit(out, start, Extra::new());
                id
            }
        };
        Self::emit(out, EventKind::text_delta(message_id, delta), extra);
    }

    /// A `reasoning` frame's events, as `text_delta` does for text.
    fn reasoning_delta(&mut self, delta: String) -> Vec<EventKind> {
        let mut kinds = Vec::new();
        let message_id = match &self.reasoning {
            Some(id) => id.clone(),
            None => {
                self.reasoning_count += 1;
                let id = format!("agkit-reasoning-{}", self.reasoning_count);
                self.reasoning = Some(id.clone());
                kinds.push(EventKind::ReasoningStart {
                    message_id: id.clone(),
                });
                id
            }
        };
        kinds.push(EventKind::ReasoningDelta { message_id, delta });
        kinds
    }

    /// The frequent frames, read by the core's fast path from
    /// [`wire::FAST`] and run as the general path runs them. `None`
    /// (nothing read, nothing changed) sends the frame the general way.
    fn decode_plain(&mut self, data: &str, out: &mut Vec<Event>) -> Option<()> {
        let kind = wire::FAST.read_kind(data)?;
        // The rows' other types close what these two leave open, as none.
        let ty = match kind {
            EventKind::TextDelta { .. } => Some(wire::TEXT),
            EventKind::ReasoningDelta { .. } => Some(wire::REASONING),
            _ => None,
        };
        self.before(ty, out);
        match kind {
            EventKind::TextDelta { delta, .. } => self.text_delta(delta, Extra::new(), out),
            EventKind::ReasoningDelta { delta, .. } => {
                for kind in self.reasoning_delta(delta) {
                    Self::emit(out, kind, Extra::new());
                }
            }
            kind => Self::emit(out, kind, Extra::new()),
        }
        Some(())
    }

    /// Our extension frames; `None` when the frame does not have their shape
    /// (another server may use the same type name for something else).
    fn extension(&mut self, ty: &str, mut f: Fields) -> Option<(Vec<EventKind>, Extra, Dialect)> {
        let mut origin = Dialect::AgKit;
        let kind = match ty {
            wire::REASONING => {
                let delta = f.string("content")?;
                return Some((self.reasoning_delta(delta), f.extra(), origin));
            }
            wire::REASONING_PHASE_START => EventKind::ReasoningPhaseStart {
                message_id: f.string("messageId")?,
            },
            wire::REASONING_PHASE_END => EventKind::ReasoningPhaseEnd {
                message_id: f.string("messageId")?,
            },
            wire::REASONING_ENCRYPTED => EventKind::ReasoningEncrypted {
                subtype: f.string("subtype")?,
                entity_id: f.string("entityId")?,
                value: f.string("value")?,
            },
            wire::STEP_STARTED => EventKind::StepStarted {
                name: f.opt_string("name").ok()?,
            },
            wire::STEP_FINISHED => EventKind::StepFinished {
                name: f.opt_string("name").ok()?,
            },
            wire::STATE_SNAPSHOT => EventKind::StateSnapshot {
                snapshot: f.value("snapshot")?,
            },
            wire::STATE_DELTA => EventKind::StateDelta {
                patch: f.value("delta")?,
            },
            wire::MESSAGES_SNAPSHOT => {
                let Value::Array(items) = f.value("messages")? else {
                    return None;
                };
                let mut messages = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    let mut m = message_from_wire(item, &format!("messages[{i}]")).ok()?;
                    if let Some(Value::String(id)) = item.get("id") {
                        m.id = id.clone();
                    }
                    messages.push(m);
                }
                EventKind::MessagesSnapshot { messages }
            }
            wire::ACTIVITY_SNAPSHOT => EventKind::ActivitySnapshot {
                message_id: f.string("messageId")?,
                activity_type: f.string("activityType")?,
                content: f.value("content")?,
                replace: f.opt_bool("replace").ok()?,
            },
            wire::ACTIVITY_DELTA => EventKind::ActivityDelta {
                message_id: f.string("messageId")?,
                activity_type: f.string("activityType")?,
                patch: f.value("patch")?,
            },
            wire::SOURCE => EventKind::Source {
                source_kind: match f.string("sourceType")?.as_str() {
                    "url" => SourceKind::Url,
                    "document" => SourceKind::Document,
                    _ => return None,
                },
                source_id: f.string("sourceId")?,
                url: f.opt_string("url").ok()?,
                title: f.opt_string("title").ok()?,
                media_type: f.opt_string("mediaType").ok()?,
                filename: f.opt_string("filename").ok()?,
            },
            wire::FILE => EventKind::File {
                url: f.string("url")?,
                media_type: f.string("mediaType")?,
            },
            wire::DATA => EventKind::Data {
                name: f.string("name")?,
                id: f.opt_string("id").ok()?,
                message_id: f.opt_string("messageId").ok()?,
                data: f.value("data")?,
                transient: f.opt_bool("transient").ok()?.unwrap_or(false),
            },
            wire::CUSTOM => EventKind::Custom {
                name: f.string("name")?,
                value: f.value("value")?,
            },
            wire::MESSAGE_METADATA => EventKind::MessageMetadata {
                metadata: f.value("metadata")?,
            },
            wire::COLLAB_START => EventKind::CollabStart {
                message_id: f.string("messageId")?,
                from: f.opt_string("from").ok()?,
                to: f.opt_string("to").ok()?,
            },
            wire::COLLAB_CONTENT => EventKind::CollabContent {
                message_id: f.string("messageId")?,
                delta: f.value("delta")?,
            },
            wire::COLLAB_END => EventKind::CollabEnd {
                message_id: f.string("messageId")?,
            },
            wire::SUBAGENT_STARTED => EventKind::SubagentStarted {
                subagent_run_id: f.string("subagentRunId")?,
                name: f.string("name")?,
                description: f.opt_string("description").ok()?,
            },
            wire::SUBAGENT_FINISHED => EventKind::SubagentFinished {
                subagent_run_id: f.string("subagentRunId")?,
                result: f.value("result"),
                outcome: f.value("outcome"),
            },
            wire::SUBAGENT_ERROR => EventKind::SubagentError {
                subagent_run_id: f.string("subagentRunId")?,
                message: f.string("message")?,
                code: f.opt_string("code").ok()?,
            },
            wire::RAW => EventKind::Raw {
                event: f.value("event")?,
                source: f.opt_string("source").ok()?,
            },
            wire::UNKNOWN => {
                // Another dialect's unknown event, handed back to its dialect.
                origin = f.string("dialect")?.parse().ok()?;
                let raw = f.value("event")?;
                if !f.is_empty() {
                    return None;
                }
                EventKind::Unknown { raw }
            }
            _ => return None,
        };
        Some((vec![kind], f.extra(), origin))
    }
}

impl Decoder for AgKitDecoder {
    fn dialect(&self) -> Dialect {
        Dialect::AgKit
    }

    fn decode(&mut self, frame: &Frame, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        if self.done || frame.data.is_empty() {
            return Ok(());
        }
        // A frame that opens with `{` is not `[DONE]`: no need to trim it.
        if !frame.data.starts_with('{') && frame.is_done() {
            self.close_text(out);
            self.close_reasoning(out);
            self.end_run(out);
            self.done = true;
            return Ok(());
        }
        if self.plain && self.decode_plain(&frame.data, out).is_some() {
            return Ok(());
        }
        let unknown = |raw: Value| EventKind::Unknown { raw };
        let Ok(value) = serde_json::from_str::<Value>(&frame.data) else {
            // The client skips what it cannot parse; keep the text.
            self.before(None, out);
            Self::emit(
                out,
                unknown(Value::String(frame.data.clone())),
                Extra::new(),
            );
            return Ok(());
        };
        let Value::Object(obj) = value else {
            self.before(None, out);
            Self::emit(out, unknown(value), Extra::new());
            return Ok(());
        };
        let ty = match obj.get("type") {
            Some(Value::String(t)) => Some(t.clone()),
            _ => None,
        };
        self.before(ty.as_deref(), out);
        match ty.as_deref() {
            Some(
                t @ (wire::TEXT
                | wire::TOOL_CALL_START
                | wire::TOOL_CALL_ARGS
                | wire::TOOL_CALL_END
                | wire::TOOL_RESULT
                | wire::INTERRUPT
                | wire::ERROR),
            ) => self.native(t, Fields::new(obj), out),
            None if matches!(obj.get("error"), Some(Value::String(_)))
                && !obj.contains_key("type") =>
            {
                self.native(wire::ERROR, Fields::new(obj), out)
            }
            Some(t) => {
                match self.extension(t, Fields::new(obj.clone())) {
                    Some((kinds, extra, origin)) => {
                        let last = kinds.len().saturating_sub(1);
                        for (i, kind) in kinds.into_iter().enumerate() {
                            let extra = if i == last {
                                extra.clone()
                            } else {
                                Extra::new()
                            };
                            out.push(Event::new(kind).with_origin(origin).with_extra(extra));
                        }
                    }
                    None => Self::emit(out, unknown(Value::Object(obj)), Map::new()),
                }
                Ok(())
            }
            None => {
                Self::emit(out, unknown(Value::Object(obj)), Map::new());
                Ok(())
            }
        }
    }

    /// A stream cut before `[DONE]` emits nothing (the encoder's `finish`
    /// closes what is open), except that interrupts already read end the run.
    fn finish(&mut self, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        if !self.done && !self.interrupts.is_empty() {
            self.end_run(out);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use babelgate_core::request::Message;
    use babelgate_core::Role;
    use serde_json::json;

    fn frame(data: &str) -> Frame {
        Frame {
            data: data.into(),
            ..Default::default()
        }
    }

    fn decode_all(frames: &[&str]) -> Vec<Event> {
        let mut d = AgKitDecoder::new();
        let mut out = Vec::new();
        for f in frames {
            d.decode(&frame(f), &mut out).unwrap();
        }
        d.finish(&mut out).unwrap();
        out
    }

    fn kinds(frames: &[&str]) -> Vec<EventKind> {
        decode_all(frames).into_iter().map(|e| e.kind).collect()
    }

    fn decode_err(data: &str) -> DecodeError {
        let mut out = Vec::new();
        AgKitDecoder::new()
            .decode(&frame(data), &mut out)
            .unwrap_err()
    }

    #[test]
    fn text_is_shorthand_with_minted_ids() {
        let k = kinds(&[
            r#"{"type":"text","content":"Hel"}"#,
            r#"{"type":"text","content":"lo"}"#,
            r#"{"type":"tool-call-start","toolCallId":"c1","toolCallName":"f"}"#,
            r#"{"type":"tool-call-end","toolCallId":"c1"}"#,
            r#"{"type":"text","content":"again"}"#,
            "[DONE]",
        ]);
        assert_eq!(
            k,
            [
                EventKind::text_start("agkit-text-1"),
                EventKind::text_delta("agkit-text-1", "Hel"),
                EventKind::text_delta("agkit-text-1", "lo"),
                EventKind::text_end("agkit-text-1"),
                EventKind::ToolCallStart {
                    tool_call_id: "c1".into(),
                    tool_name: "f".into(),
                    parent_message_id: None
                },
                EventKind::ToolCallEnd {
                    tool_call_id: "c1".into()
                },
                EventKind::text_start("agkit-text-2"),
                EventKind::text_delta("agkit-text-2", "again"),
                EventKind::text_end("agkit-text-2"),
                EventKind::run_finished(Outcome::Unspecified),
            ]
        );
    }

    #[test]
    fn every_event_is_from_agkit() {
        let evs = decode_all(&[r#"{"type":"text","content":"x"}"#, "[DONE]"]);
        assert!(evs.iter().all(|e| e.origin == Some(Dialect::AgKit)));
        assert!(evs.iter().all(|e| e.timestamp.is_none()));
    }

    #[test]
    fn tool_frames() {
        let k = kinds(&[
            r#"{"type":"tool-call-start","toolCallId":"c","toolCallName":"get_weather"}"#,
            r#"{"type":"tool-call-args","toolCallId":"c","delta":"{\"city\":\"北京\"}"}"#,
            r#"{"type":"tool-call-end","toolCallId":"c"}"#,
            r#"{"type":"tool-result","toolCallId":"c","result":"sunny"}"#,
        ]);
        assert_eq!(
            k[1],
            EventKind::ToolCallArgs {
                tool_call_id: "c".into(),
                delta: "{\"city\":\"北京\"}".into()
            }
        );
        assert_eq!(
            k[3],
            EventKind::ToolCallResult {
                tool_call_id: "c".into(),
                message_id: None,
                content: json!("sunny")
            }
        );
        assert_eq!(k.len(), 4, "a cut stream emits no finish");
    }

    #[test]
    fn interrupts_end_the_run_together() {
        let k = kinds(&[
            r#"{"type":"text","content":"ok?"}"#,
            r#"{"type":"interrupt","id":"i1","reason":"agent requested interrupt","payload":{"q":1}}"#,
            r#"{"type":"interrupt","id":"i2","reason":null,"payload":null,"toolCallId":"c9","message":"m","x":1}"#,
            "[DONE]",
            r#"{"type":"text","content":"after done: the client stops reading"}"#,
        ]);
        let mut second_extra = Map::new();
        second_extra.insert("reason".into(), Value::Null);
        second_extra.insert("x".into(), json!(1));
        assert_eq!(
            k,
            [
                EventKind::text_start("agkit-text-1"),
                EventKind::text_delta("agkit-text-1", "ok?"),
                EventKind::text_end("agkit-text-1"),
                EventKind::run_finished(Outcome::Interrupt {
                    interrupts: vec![
                        Interrupt {
                            id: "i1".into(),
                            reason: "agent requested interrupt".into(),
                            message: None,
                            tool_call_id: None,
                            payload: Some(json!({"q":1})),
                            extra: Map::new()
                        },
                        Interrupt {
                            id: "i2".into(),
                            reason: String::new(),
                            message: Some("m".into()),
                            tool_call_id: Some("c9".into()),
                            payload: None,
                            extra: second_extra
                        }
                    ]
                }),
            ]
        );
    }

    #[test]
    fn interrupt_without_done_still_ends_the_run() {
        let k = kinds(&[r#"{"type":"interrupt","id":"i","reason":"r","payload":1}"#]);
        assert!(matches!(
            &k[..],
            [EventKind::RunFinished {
                outcome: Outcome::Interrupt { .. },
                ..
            }]
        ));
    }

    #[test]
    fn error_frames_end_the_run() {
        let evs = decode_all(&[
            r#"{"type":"text","content":"par"}"#,
            r#"{"type":"error","error":"boom","code":"E1","detail":"x"}"#,
            "[DONE]",
        ]);
        let k: Vec<_> = evs.iter().map(|e| e.kind.clone()).collect();
        assert_eq!(
            k[2..],
            [
                EventKind::text_end("agkit-text-1"),
                EventKind::RunError {
                    message: "boom".into(),
                    code: Some("E1".into())
                }
            ]
        );
        assert_eq!(evs[3].extra.get("detail"), Some(&json!("x")));
        // the 0.1.1 server's pre-stream failure has no type
        let k = kinds(&[r#"{"error":"Server error","details":"agent failed"}"#]);
        assert_eq!(
            k,
            [EventKind::RunError {
                message: "Server error".into(),
                code: None
            }]
        );
    }

    #[test]
    fn unknown_and_unparseable_frames_are_kept() {
        let evs = decode_all(&[
            r#"{"type":"text","content":"a"}"#,
            r#"{"type":"usage","tokens":3}"#,
            "keep-alive",
            "[1,2]",
            r#"{"no":"type"}"#,
            r#"{"type":"custom","not":"our shape"}"#,
        ]);
        let k: Vec<_> = evs.iter().map(|e| e.kind.clone()).collect();
        assert_eq!(
            k[2..],
            [
                EventKind::text_end("agkit-text-1"),
                EventKind::Unknown {
                    raw: json!({"type":"usage","tokens":3})
                },
                EventKind::Unknown {
                    raw: json!("keep-alive")
                },
                EventKind::Unknown { raw: json!([1, 2]) },
                EventKind::Unknown {
                    raw: json!({"no":"type"})
                },
                EventKind::Unknown {
                    raw: json!({"type":"custom","not":"our shape"})
                },
            ]
        );
        assert!(evs.iter().all(|e| e.origin == Some(Dialect::AgKit)));
    }

    #[test]
    fn unmodelled_fields_go_to_extra() {
        let evs = decode_all(&[r#"{"type":"text","content":"a","index":0,"meta":{"k":1}}"#]);
        assert_eq!(
            evs[1].extra,
            json!({"index":0,"meta":{"k":1}})
                .as_object()
                .cloned()
                .unwrap()
        );
        assert!(evs[0].extra.is_empty(), "the synthesized start has none");
    }

    #[test]
    fn malformed_native_frames_are_errors() {
        for (data, want) in [
            (
                r#"{"type":"text"}"#,
                "text: missing or invalid field `content`",
            ),
            (
                r#"{"type":"text","content":5}"#,
                "text: missing or invalid field `content`",
            ),
            (
                r#"{"type":"tool-call-start","toolCallId":"c"}"#,
                "tool-call-start: missing or invalid field `toolCallName`",
            ),
            (
                r#"{"type":"tool-call-args","toolCallId":"c"}"#,
                "tool-call-args: missing or invalid field `delta`",
            ),
            (
                r#"{"type":"tool-call-end"}"#,
                "tool-call-end: missing or invalid field `toolCallId`",
            ),
            (
                r#"{"type":"tool-result","toolCallId":"c","result":{"a":1}}"#,
                "tool-result: missing or invalid field `result`",
            ),
            (
                r#"{"type":"interrupt","reason":"r"}"#,
                "interrupt: missing or invalid field `id`",
            ),
            (
                r#"{"type":"interrupt","id":"i","reason":3}"#,
                "interrupt: missing or invalid field `reason`",
            ),
            (
                r#"{"type":"error","message":"x"}"#,
                "error: missing or invalid field `error`",
            ),
        ] {
            assert_eq!(decode_err(data).message, want, "{data}");
        }
    }

    #[test]
    fn extension_frames_decode_back() {
        let k = kinds(&[
            r#"{"type":"reasoning","content":"think"}"#,
            r#"{"type":"reasoning","content":"ing"}"#,
            r#"{"type":"state-snapshot","snapshot":{"a":1}}"#,
            r#"{"type":"state-delta","delta":[{"op":"add","path":"/b","value":2}]}"#,
            r#"{"type":"custom","name":"n","value":null}"#,
            r#"{"type":"step-started","name":"s"}"#,
            r#"{"type":"step-finished"}"#,
            r#"{"type":"source","sourceType":"url","sourceId":"s1","url":"https://x"}"#,
            r#"{"type":"data","name":"chart","data":[1],"transient":true}"#,
            r#"{"type":"raw","event":{"e":1}}"#,
            r#"{"type":"messages-snapshot","messages":[{"role":"user","content":"hi","id":"m1"}]}"#,
        ]);
        assert_eq!(
            k,
            [
                EventKind::ReasoningStart {
                    message_id: "agkit-reasoning-1".into()
                },
                EventKind::ReasoningDelta {
                    message_id: "agkit-reasoning-1".into(),
                    delta: "think".into()
                },
                EventKind::ReasoningDelta {
                    message_id: "agkit-reasoning-1".into(),
                    delta: "ing".into()
                },
                EventKind::ReasoningEnd {
                    message_id: "agkit-reasoning-1".into()
                },
                EventKind::StateSnapshot {
                    snapshot: json!({"a":1})
                },
                EventKind::StateDelta {
                    patch: json!([{"op":"add","path":"/b","value":2}])
                },
                EventKind::Custom {
                    name: "n".into(),
                    value: Value::Null
                },
                EventKind::StepStarted {
                    name: Some("s".into())
                },
                EventKind::StepFinished { name: None },
                EventKind::Source {
                    source_kind: SourceKind::Url,
                    source_id: "s1".into(),
                    url: Some("https://x".into()),
                    title: None,
                    media_type: None,
                    filename: None
                },
                EventKind::Data {
                    name: "chart".into(),
                    id: None,
                    message_id: None,
                    data: json!([1]),
                    transient: true
                },
                EventKind::Raw {
                    event: json!({"e":1}),
                    source: None
                },
                EventKind::MessagesSnapshot {
                    messages: vec![Message::text_message("m1", Role::User, "hi")]
                },
            ]
        );
    }

    #[test]
    fn another_dialects_unknown_goes_home() {
        let evs = decode_all(&[r#"{"type":"unknown","dialect":"ag-ui","event":{"type":"X"}}"#]);
        assert_eq!(
            evs[0].kind,
            EventKind::Unknown {
                raw: json!({"type":"X"})
            }
        );
        assert_eq!(evs[0].origin, Some(Dialect::AgUi));
        let evs = decode_all(&[r#"{"type":"unknown","dialect":"nope","event":1}"#]);
        assert_eq!(evs[0].origin, Some(Dialect::AgKit));
    }

    #[test]
    fn empty_frames_and_done_variants() {
        assert!(kinds(&[""]).is_empty());
        assert_eq!(
            kinds(&[" [DONE] "]),
            [EventKind::run_finished(Outcome::Unspecified)]
        );
        // after an error, [DONE] adds no second end
        assert_eq!(
            kinds(&[r#"{"type":"error","error":"e"}"#, "[DONE]"]).len(),
            1
        );
    }

    /// The table declares what the general path does (each row's frames,
    /// alone, after frames that open what they continue, and in a row).
    #[test]
    fn the_table_reads_as_the_general_path_reads() {
        let before = [
            r#"{"type":"text","content":"a"}"#,
            r#"{"type":"tool-call-start","toolCallId":"id-1","toolCallName":"f"}"#,
        ];
        let mut run = |frames: &[String], fast: bool| match fast {
            true => babelgate_core::testing::decode_all(&mut AgKitDecoder::new(), frames),
            false => {
                babelgate_core::testing::decode_all(&mut AgKitDecoder::new().general_only(), frames)
            }
        };
        babelgate_core::testing::check_table_decodes(&wire::FAST, &before, &mut run).unwrap();
    }
}
