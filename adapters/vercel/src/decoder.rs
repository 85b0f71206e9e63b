//! UI message stream chunks to core events.
//!
//! Every chunk of the `ai` package's `uiMessageChunkSchema` is read, plus the
//! older names an early draft of the protocol used (`tool-call-start`,
//! `tool-call-delta`, `tool-call-end`, `tool-result`, `step-start`,
//! `step-end`). Fields without a slot in the core go to `Event::extra` under
//! their wire names; the two forms the encoder needs to write a chunk back
//! as it came are `$`-prefixed notes (see [`crate::wire::marker`]). Events
//! no chunk stood for are `Event::synthesized`.
//!
//! Interrupts: a `tool-approval-request` arrives before the `finish` that ends
//! the run, but the core carries interrupts in `RunFinished`. The decoder holds
//! the request and attaches it to the next `finish` (or, when the stream ends
//! without one, to a `RunFinished` it emits at the end). The encoder writes the
//! requests back before its deferred `finish-step`, so the order survives.
//! A request the stream answers itself (`isAutomatic`, or a
//! `tool-approval-response` with its id before the finish: `streamText`'s
//! `toolApproval` policies) is no interrupt: it and its answer are kept whole
//! as `Unknown`, in place, and the run goes on.

// foldhash: ids are hashed per event; SipHash showed in the profile.
use foldhash::{HashMap, HashSet};

use babelgate_core::event::SourceKind;
use babelgate_core::{
    DecodeError, Decoder, Dialect, Event, EventKind, Extra, Frame, Interrupt, Outcome,
};
use serde_json::{Map, Value};

use crate::wire::{self, marker, UNKNOWN_TOOL_NAME};

/// Interrupt reason given to tool approvals (Vercel has no category field).
pub const APPROVAL_REASON: &str = "tool_approval";

#[derive(Debug, Default)]
struct CallSeen {
    /// Argument text received as deltas.
    args: String,
    deltas: bool,
    ended: bool,
}

#[derive(Debug)]
pub struct VercelDecoder {
    /// `data: [DONE]` was read: the stream is over.
    done: bool,
    texts: HashSet<String>,
    reasoning: HashSet<String>,
    calls: HashMap<String, CallSeen>,
    /// Approval requests (and `data-interrupt` parts) waiting for the finish.
    pending_interrupts: Vec<Interrupt>,
    /// The chunks of the approval requests among them, by approval id: a
    /// `tool-approval-response` in the same stream answers one, which then
    /// is no interrupt but both chunks, kept whole.
    approval_chunks: HashMap<String, Value>,
    /// Ids of the requests answered so: left out of the interrupts when the
    /// run ends (a set, so that many answers cost one pass, not one each).
    answered: HashSet<String>,
    /// An `error` was read: the `ai` package still closes the step and the
    /// message (`finish{finishReason:"error"}`), which says nothing new.
    errored: bool,
    /// Whether the frequent chunks are read without a JSON map (tests turn
    /// it off to hold that path to the general one).
    plain: bool,
}

impl Default for VercelDecoder {
    fn default() -> Self {
        VercelDecoder {
            done: false,
            texts: HashSet::default(),
            reasoning: HashSet::default(),
            calls: HashMap::default(),
            pending_interrupts: Vec::new(),
            approval_chunks: HashMap::default(),
            answered: HashSet::default(),
            errored: false,
            plain: true,
        }
    }
}

impl VercelDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// A tool call begins (`tool-input-start`, or the older `tool-call-start`),
    /// with the chunk's extras.
    fn tool_start(&mut self, id: String, name: String, extra: Extra, out: &mut Vec<Event>) {
        self.calls.insert(id.clone(), CallSeen::default());
        out.push(ev(
            EventKind::ToolCallStart {
                tool_call_id: id,
                tool_name: name,
                parent_message_id: None,
            },
            extra,
        ));
    }

    /// The interrupts waiting for the finish, which the run ends with.
    fn take_interrupts(&mut self) -> Vec<Interrupt> {
        self.approval_chunks.clear();
        let mut interrupts = std::mem::take(&mut self.pending_interrupts);
        if !self.answered.is_empty() {
            interrupts.retain(|it| !self.answered.contains(&it.id));
            self.answered.clear();
        }
        interrupts
    }

    /// Every chunk the general way (tests hold the map-free path to it).
    #[doc(hidden)]
    pub fn general_only(mut self) -> Self {
        self.plain = false;
        self
    }
}

/// Where a text or reasoning chunk is in its part.
enum Phase {
    Start,
    Delta(String),
    End,
}

/// The shapes a `data-state` part's `data` may take.
pub(crate) enum StateForm<'a> {
    Snapshot(&'a Value),
    Delta(&'a Value),
}

/// Reads the `{type:"snapshot",snapshot}` / `{type:"delta",delta:[...]}`
/// envelope; `None` when `data` is the state itself.
pub(crate) fn state_envelope(data: &Value) -> Option<StateForm<'_>> {
    let o = data.as_object()?;
    if o.len() != 2 {
        return None;
    }
    match o.get("type")?.as_str()? {
        "snapshot" => o.get("snapshot").map(StateForm::Snapshot),
        "delta" => o
            .get("delta")
            .filter(|d| d.is_array())
            .map(StateForm::Delta),
        _ => None,
    }
}

fn ev(kind: EventKind, extra: Extra) -> Event {
    Event::new(kind)
        .with_origin(Dialect::Vercel)
        .with_extra(extra)
}

/// An event no chunk stood for (see `Event::synthesized`).
fn made_up(kind: EventKind) -> Event {
    ev(kind, Extra::new()).mark_synthesized()
}

/// One chunk being read: its fields and the names of those already used.
struct Chunk<'a> {
    ty: &'a str,
    obj: &'a Map<String, Value>,
}

impl<'a> Chunk<'a> {
    fn req_str(&self, key: &str) -> Result<String, DecodeError> {
        match self.obj.get(key) {
            Some(Value::String(s)) => Ok(s.clone()),
            _ => Err(DecodeError::field(self.ty, key)),
        }
    }

    /// An optional string: absent or null is `None`, another type an error.
    fn opt_str(&self, key: &str) -> Result<Option<String>, DecodeError> {
        match self.obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            _ => Err(DecodeError::field(self.ty, key)),
        }
    }

    /// The first of `keys` that is a string (old chunk names vary).
    fn req_str_any(&self, keys: &[&str]) -> Result<String, DecodeError> {
        keys.iter()
            .find_map(|k| self.obj.get(*k).and_then(Value::as_str))
            .map(str::to_string)
            .ok_or_else(|| DecodeError::field(self.ty, keys.first().copied().unwrap_or_default()))
    }

    /// Every field but `type` and the modelled ones.
    fn extra(&self, modelled: &[&str]) -> Extra {
        self.obj
            .iter()
            .filter(|(k, _)| k.as_str() != "type" && !modelled.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

impl Decoder for VercelDecoder {
    fn dialect(&self) -> Dialect {
        Dialect::Vercel
    }

    fn decode(&mut self, frame: &Frame, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        self.decode_frame(frame, out)
    }

    fn finish(&mut self, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        // An approval request means the run waits for a human even if the
        // stream ended before its `finish`.
        if !self.pending_interrupts.is_empty() {
            out.push(ev(
                EventKind::RunFinished {
                    thread_id: None,
                    run_id: None,
                    message_id: None,
                    result: None,
                    outcome: Outcome::Interrupt {
                        interrupts: self.take_interrupts(),
                    },
                    finish_reason: None,
                    usage: None,
                },
                Extra::new(),
            ));
        }
        Ok(())
    }
}

impl VercelDecoder {
    /// One frame, as [`Decoder::decode`] reads it.
    fn decode_frame(&mut self, frame: &Frame, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        if self.done {
            return Ok(());
        }
        // A chunk opens with `{`: neither blank nor `[DONE]`, no need to trim.
        if !frame.data.starts_with('{') {
            if frame.data.trim().is_empty() {
                return Ok(());
            }
            if frame.is_done() {
                self.done = true;
                return Ok(());
            }
        }
        if self.plain && self.decode_plain(&frame.data, out).is_some() {
            return Ok(());
        }
        let value: Value = serde_json::from_str(&frame.data).map_err(|e| DecodeError::json(&e))?;
        let Some(obj) = value.as_object() else {
            return Err(DecodeError::new("chunk is not a JSON object"));
        };
        let Some(ty) = obj.get("type").and_then(Value::as_str) else {
            return Err(DecodeError::field("chunk", "type"));
        };
        let c = Chunk { ty, obj };
        self.chunk(&c, &value, out)
    }

    fn chunk(
        &mut self,
        c: &Chunk<'_>,
        raw: &Value,
        out: &mut Vec<Event>,
    ) -> Result<(), DecodeError> {
        // A 7.x chunk the core has no event for is kept whole, and goes back
        // to a Vercel client as it came (on a same-dialect route, verbatim):
        // one the client's schema refuses is refused here, as any malformed
        // chunk, so that the client is told rather than broken.
        if wire::is_kept_whole(c.ty, raw) && !wire::client_accepts(raw) {
            return Err(DecodeError::new(format!(
                "{}: a field is missing or not what the ai client's chunk schema asks",
                c.ty
            )));
        }
        // The closing chunks of a failed run repeat its error: the run has
        // already ended with `RunError`, and a `RunFinished` after it would be
        // a second end (which AG-UI clients refuse).
        if self.errored {
            let bare = c.obj.keys().all(|k| k == "type" || k == "finishReason");
            match c.ty {
                "finish-step" if bare => return Ok(()),
                "finish"
                    if bare
                        && matches!(
                            c.opt_str("finishReason")?.as_deref(),
                            None | Some("error")
                        ) =>
                {
                    return Ok(())
                }
                "start" => self.errored = false,
                _ => {}
            }
        }
        match c.ty {
            "start" | "finish" | "abort" | "error" => self.run(c, raw, out)?,
            "message-metadata" | "start-step" | "finish-step" | "step-start" | "step-end" => {
                self.step(c, raw, out)?
            }
            "text-start" | "text-delta" | "text-end" => self.text(c, out, false)?,
            "reasoning-start" | "reasoning-delta" | "reasoning-end" => self.text(c, out, true)?,

            "tool-input-start"
            | "tool-call-start"
            | "tool-input-delta"
            | "tool-call-delta"
            | "tool-input-available"
            | "tool-call-end" => self.input(c, raw, out)?,
            "tool-input-error" => self.tool_input_error(c, out)?,
            "tool-output-available"
            | "tool-result"
            | "tool-output-error"
            | "tool-output-denied" => self.output(c, raw, out)?,
            "tool-approval-request" | "tool-approval-response" => self.approval(c, raw, out)?,
            "source-url" | "source-document" | "file" | "reasoning-file" => {
                self.source(c, raw, out)?
            }
            ty if ty.starts_with("data-") => {
                let name = ty.strip_prefix("data-").unwrap_or_default();
                self.data(c, name, out)?
            }
            _ => out.push(ev(EventKind::Unknown { raw: raw.clone() }, Extra::new())),
        }
        Ok(())
    }

    /// start, finish, abort and error: the run opens or ends.
    fn run(&mut self, c: &Chunk, raw: &Value, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        match c.ty {
            "start" => {
                let message_id = c.opt_str("messageId")?;
                let metadata = c
                    .obj
                    .get("messageMetadata")
                    .filter(|m| !m.is_null())
                    .cloned();
                out.push(ev(
                    EventKind::RunStarted {
                        thread_id: None,
                        run_id: None,
                        parent_run_id: None,
                        message_id,
                        input: None,
                    },
                    c.extra(&["messageId"]),
                ));
                if let Some(metadata) = metadata {
                    // `start` carries it (in its extras): lifted out for
                    // the other dialects, written by none of its own.
                    out.push(made_up(EventKind::MessageMetadata { metadata }));
                }
            }
            "finish" => {
                let finish_reason = c.opt_str("finishReason")?;
                if let Some(metadata) = c.obj.get("messageMetadata").filter(|m| !m.is_null()) {
                    out.push(made_up(EventKind::MessageMetadata {
                        metadata: metadata.clone(),
                    }));
                }
                let outcome = if self.pending_interrupts.is_empty() {
                    Outcome::Unspecified
                } else {
                    let interrupts = self.take_interrupts();
                    Outcome::Interrupt { interrupts }
                };
                out.push(ev(
                    EventKind::RunFinished {
                        thread_id: None,
                        run_id: None,
                        message_id: None,
                        result: None,
                        outcome,
                        finish_reason,
                        usage: None,
                    },
                    c.extra(&["finishReason"]),
                ));
            }
            "abort" => {
                // An aborted run answers no approval.
                self.take_interrupts();
                let reason = c.opt_str("reason")?;
                out.push(ev(
                    EventKind::run_finished(Outcome::Cancelled { reason }),
                    c.extra(&["reason"]),
                ));
            }
            "error" => {
                self.take_interrupts();
                self.errored = true;
                out.push(ev(
                    EventKind::RunError {
                        message: c.req_str("errorText")?,
                        code: c.opt_str("code")?,
                    },
                    c.extra(&["errorText", "code"]),
                ));
            }
            _ => out.push(ev(EventKind::Unknown { raw: raw.clone() }, Extra::new())),
        }
        Ok(())
    }

    /// message-metadata and the step chunks (both spellings).
    fn step(&mut self, c: &Chunk, raw: &Value, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        match c.ty {
            "message-metadata" => out.push(ev(
                EventKind::MessageMetadata {
                    metadata: c.obj.get("messageMetadata").cloned().unwrap_or(Value::Null),
                },
                c.extra(&["messageMetadata"]),
            )),
            "start-step" => out.push(ev(EventKind::StepStarted { name: None }, c.extra(&[]))),
            "finish-step" => out.push(ev(EventKind::StepFinished { name: None }, c.extra(&[]))),
            // The draft names carry a step id, kept as the step's name.
            "step-start" => out.push(ev(
                EventKind::StepStarted {
                    name: c.opt_str("id")?,
                },
                Extra::new(),
            )),
            "step-end" => out.push(ev(
                EventKind::StepFinished {
                    name: c.opt_str("id")?,
                },
                Extra::new(),
            )),
            _ => out.push(ev(EventKind::Unknown { raw: raw.clone() }, Extra::new())),
        }
        Ok(())
    }

    /// A call's input: its start, deltas and end (both spellings).
    fn input(&mut self, c: &Chunk, raw: &Value, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        match c.ty {
            "tool-input-start" => {
                let id = c.req_str("toolCallId")?;
                let name = c.req_str("toolName")?;
                self.tool_start(id, name, c.extra(&["toolCallId", "toolName"]), out);
            }
            "tool-call-start" => {
                let id = c.req_str_any(&["id", "toolCallId"])?;
                let name = c.req_str_any(&["toolName", "toolCallName"])?;
                self.tool_start(id, name, Extra::new(), out);
            }
            "tool-input-delta" => {
                let id = c.req_str("toolCallId")?;
                let delta = c.req_str("inputTextDelta")?;
                self.args(id, delta, c.extra(&["toolCallId", "inputTextDelta"]), out);
            }
            "tool-call-delta" => {
                let id = c.req_str_any(&["id", "toolCallId"])?;
                let delta = c.req_str_any(&["argsText", "inputTextDelta", "delta"])?;
                self.args(id, delta, Extra::new(), out);
            }
            "tool-input-available" => {
                let id = c.req_str("toolCallId")?;
                let name = c.req_str("toolName")?;
                let input = c.obj.get("input");
                let mut extra = c.extra(&["toolCallId", "toolName", "input"]);
                let seen = self.open_call(&id, &name, out);
                if !seen.deltas {
                    if let Some(input) = input {
                        seen.args = input.to_string();
                        out.push(made_up(EventKind::ToolCallArgs {
                            tool_call_id: id.clone(),
                            delta: seen.args.clone(),
                        }));
                    }
                } else if let Some(input) = input {
                    // The encoder writes the parsed deltas as `input`; keep
                    // the chunk's own when it says something else.
                    if serde_json::from_str::<Value>(&seen.args).ok().as_ref() != Some(input) {
                        extra.insert("input".into(), input.clone());
                    }
                }
                seen.ended = true;
                out.push(ev(EventKind::ToolCallEnd { tool_call_id: id }, extra));
            }
            "tool-call-end" => {
                let id = c.req_str_any(&["id", "toolCallId"])?;
                let seen = self.open_call(&id, UNKNOWN_TOOL_NAME, out);
                seen.ended = true;
                out.push(ev(
                    EventKind::ToolCallEnd { tool_call_id: id },
                    Extra::new(),
                ));
            }
            _ => out.push(ev(EventKind::Unknown { raw: raw.clone() }, Extra::new())),
        }
        Ok(())
    }

    /// A call's outcome: output, result, error or denial.
    fn output(&mut self, c: &Chunk, raw: &Value, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        match c.ty {
            // A generator tool's progress (`preliminary`), which the final
            // output replaces: no result of the call (a client would keep
            // each as a tool message), so kept whole.
            "tool-output-available" if wire::is_kept_whole(c.ty, raw) => {
                out.push(ev(EventKind::Unknown { raw: raw.clone() }, Extra::new()))
            }
            "tool-output-available" => out.push(ev(
                EventKind::ToolCallResult {
                    tool_call_id: c.req_str("toolCallId")?,
                    message_id: None,
                    content: c.obj.get("output").cloned().unwrap_or(Value::Null),
                },
                c.extra(&["toolCallId", "output"]),
            )),
            "tool-result" => {
                // Draft name: the call may never have been announced.
                let id = c.req_str_any(&["id", "toolCallId"])?;
                let name = c
                    .opt_str("toolName")?
                    .unwrap_or_else(|| UNKNOWN_TOOL_NAME.to_string());
                if !self.calls.contains_key(&id) {
                    self.open_call(&id, &name, out);
                }
                if let Some(seen) = self.calls.get_mut(&id) {
                    if !seen.ended {
                        seen.ended = true;
                        out.push(ev(
                            EventKind::ToolCallEnd {
                                tool_call_id: id.clone(),
                            },
                            Extra::new(),
                        ));
                    }
                }
                out.push(ev(
                    EventKind::ToolCallResult {
                        tool_call_id: id,
                        message_id: None,
                        content: c
                            .obj
                            .get("result")
                            .or_else(|| c.obj.get("output"))
                            .cloned()
                            .unwrap_or(Value::Null),
                    },
                    Extra::new(),
                ));
            }
            "tool-output-error" => out.push(ev(
                EventKind::ToolCallError {
                    tool_call_id: c.req_str("toolCallId")?,
                    error: c.req_str("errorText")?,
                    input_invalid: false,
                },
                c.extra(&["toolCallId", "errorText"]),
            )),
            "tool-output-denied" => out.push(ev(
                EventKind::ToolCallDenied {
                    tool_call_id: c.req_str("toolCallId")?,
                },
                c.extra(&["toolCallId"]),
            )),
            _ => out.push(ev(EventKind::Unknown { raw: raw.clone() }, Extra::new())),
        }
        Ok(())
    }

    /// An approval asked for, or one answered in this stream.
    fn approval(
        &mut self,
        c: &Chunk,
        raw: &Value,
        out: &mut Vec<Event>,
    ) -> Result<(), DecodeError> {
        match c.ty {
            "tool-approval-request" => {
                let id = c.req_str("approvalId")?;
                let tool_call_id = c.req_str("toolCallId")?;
                if c.obj.get("isAutomatic") == Some(&Value::Bool(true)) {
                    // Decided by the agent's own policy (`toolApproval` in
                    // `streamText`): its answer follows in this stream, and
                    // the run waits for no one.
                    out.push(ev(EventKind::Unknown { raw: raw.clone() }, Extra::new()));
                    return Ok(());
                }
                self.approval_chunks.insert(id.clone(), raw.clone());
                self.pending_interrupts.push(Interrupt {
                    id,
                    reason: APPROVAL_REASON.to_string(),
                    message: c.opt_str("reason")?,
                    tool_call_id: Some(tool_call_id),
                    payload: c.obj.get("approvalDescriptor").cloned(),
                    extra: c.extra(&["approvalId", "toolCallId", "reason", "approvalDescriptor"]),
                });
            }

            "tool-approval-response" => {
                // Answering a request of this stream: that request asks no
                // one, and goes out just before its answer.
                let answered = c.obj.get("approvalId").and_then(Value::as_str);
                if let Some((id, request)) =
                    answered.and_then(|id| self.approval_chunks.remove_entry(id))
                {
                    self.answered.insert(id);
                    out.push(ev(EventKind::Unknown { raw: request }, Extra::new()));
                }
                out.push(ev(EventKind::Unknown { raw: raw.clone() }, Extra::new()));
            }
            _ => out.push(ev(EventKind::Unknown { raw: raw.clone() }, Extra::new())),
        }
        Ok(())
    }

    /// Sources and files.
    fn source(&mut self, c: &Chunk, raw: &Value, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        match c.ty {
            "source-url" => out.push(ev(
                EventKind::Source {
                    source_kind: SourceKind::Url,
                    source_id: c.req_str("sourceId")?,
                    url: Some(c.req_str("url")?),
                    title: c.opt_str("title")?,
                    media_type: None,
                    filename: None,
                },
                c.extra(&["sourceId", "url", "title"]),
            )),
            "source-document" => out.push(ev(
                EventKind::Source {
                    source_kind: SourceKind::Document,
                    source_id: c.req_str("sourceId")?,
                    url: None,
                    title: Some(c.req_str("title")?),
                    media_type: Some(c.req_str("mediaType")?),
                    filename: c.opt_str("filename")?,
                },
                c.extra(&["sourceId", "mediaType", "title", "filename"]),
            )),
            "file" | "reasoning-file" => {
                let mut extra = c.extra(&["url", "mediaType"]);
                if c.ty == "reasoning-file" {
                    extra.insert(marker::TYPE.into(), Value::String(c.ty.into()));
                }
                out.push(ev(
                    EventKind::File {
                        url: c.req_str("url")?,
                        media_type: c.req_str("mediaType")?,
                    },
                    extra,
                ));
            }
            _ => out.push(ev(EventKind::Unknown { raw: raw.clone() }, Extra::new())),
        }
        Ok(())
    }

    /// A call whose input the tool refused: its args, its end, its error.
    fn tool_input_error(&mut self, c: &Chunk<'_>, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        let id = c.req_str("toolCallId")?;
        let name = c.req_str("toolName")?;
        let error = c.req_str("errorText")?;
        let input = c.obj.get("input");
        let mut extra = c.extra(&["toolCallId", "toolName", "input", "errorText"]);
        let already_ended = self.calls.get(&id).is_some_and(|s| s.ended);
        let seen = self.open_call(&id, &name, out);
        if !seen.deltas && !already_ended {
            if let Some(input) = input {
                seen.args = match input {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                out.push(made_up(EventKind::ToolCallArgs {
                    tool_call_id: id.clone(),
                    delta: seen.args.clone(),
                }));
            }
        }
        if let Some(input) = input {
            if &input_from_args(&seen.args) != input {
                extra.insert("input".into(), input.clone());
            }
        }
        if !already_ended {
            seen.ended = true;
            out.push(made_up(EventKind::ToolCallEnd {
                tool_call_id: id.clone(),
            }));
        }
        out.push(ev(
            EventKind::ToolCallError {
                tool_call_id: id,
                error,
                input_invalid: true,
            },
            extra,
        ));
        Ok(())
    }

    /// text-* and reasoning-* chunks; a delta or end without its start gets
    /// one, so the core invariants hold.
    fn text(
        &mut self,
        c: &Chunk<'_>,
        out: &mut Vec<Event>,
        reasoning: bool,
    ) -> Result<(), DecodeError> {
        let id = c.req_str("id")?;
        let (phase, extra) = match c.ty.rsplit('-').next().unwrap_or_default() {
            "start" => (Phase::Start, c.extra(&["id"])),
            "delta" => (Phase::Delta(c.req_str("delta")?), c.extra(&["id", "delta"])),
            _ => (Phase::End, c.extra(&["id"])),
        };
        self.text_parts(reasoning, id, phase, extra, out);
        Ok(())
    }

    /// What a text-* or reasoning-* chunk gives, from its read fields.
    fn text_parts(
        &mut self,
        reasoning: bool,
        id: String,
        phase: Phase,
        extra: Extra,
        out: &mut Vec<Event>,
    ) {
        let open = if reasoning {
            &mut self.reasoning
        } else {
            &mut self.texts
        };
        let start = |id: String| {
            if reasoning {
                EventKind::ReasoningStart { message_id: id }
            } else {
                EventKind::text_start(id)
            }
        };
        match phase {
            Phase::Start => {
                open.insert(id.clone());
                out.push(ev(start(id), extra));
            }
            Phase::Delta(delta) => {
                // Looked up first: inserting a clone per delta cost an
                // allocation each time.
                if !open.contains(&id) {
                    open.insert(id.clone());
                    out.push(ev(start(id.clone()), Extra::new()));
                }
                let kind = if reasoning {
                    EventKind::ReasoningDelta {
                        message_id: id,
                        delta,
                    }
                } else {
                    EventKind::text_delta(id, delta)
                };
                out.push(ev(kind, extra));
            }
            Phase::End => {
                // A stray end (none open) goes on as it is: the shape stage
                // drops ends of what is not open, on every route.
                open.remove(&id);
                let kind = if reasoning {
                    EventKind::ReasoningEnd { message_id: id }
                } else {
                    EventKind::text_end(id)
                };
                out.push(ev(kind, extra));
            }
        }
    }

    /// The frequent chunks, read by the core's fast path from
    /// [`wire::FAST`] and run as the general path runs them. `None`
    /// (nothing read, nothing changed) sends the frame the general way.
    fn decode_plain(&mut self, data: &str, out: &mut Vec<Event>) -> Option<()> {
        use EventKind as K;
        let kind = wire::FAST.read_kind(data)?;
        let x = Extra::new();
        match kind {
            K::TextStart { message_id, .. } => {
                self.text_parts(false, message_id, Phase::Start, x, out)
            }
            K::TextDelta { message_id, delta } => {
                self.text_parts(false, message_id, Phase::Delta(delta), x, out)
            }
            K::TextEnd { message_id } => self.text_parts(false, message_id, Phase::End, x, out),
            K::ReasoningStart { message_id } => {
                self.text_parts(true, message_id, Phase::Start, x, out)
            }
            K::ReasoningDelta { message_id, delta } => {
                self.text_parts(true, message_id, Phase::Delta(delta), x, out)
            }
            K::ReasoningEnd { message_id } => self.text_parts(true, message_id, Phase::End, x, out),
            K::ToolCallArgs {
                tool_call_id,
                delta,
            } => self.args(tool_call_id, delta, x, out),
            K::ToolCallStart {
                tool_call_id,
                tool_name,
                ..
            } => self.tool_start(tool_call_id, tool_name, x, out),
            // After an error a bare finish-step is dropped: the general path's.
            kind @ (K::StepStarted { .. } | K::StepFinished { .. }) if !self.errored => {
                out.push(Event::new(kind).with_origin(Dialect::Vercel))
            }
            _ => return None,
        }
        Some(())
    }

    fn args(&mut self, id: String, delta: String, extra: Extra, out: &mut Vec<Event>) {
        // A call already open is looked up without `open_call`'s entry,
        // which allocates a key per delta.
        if !self.calls.contains_key(&id) {
            self.open_call(&id, UNKNOWN_TOOL_NAME, out);
        }
        if let Some(seen) = self.calls.get_mut(&id) {
            seen.deltas = true;
            seen.args.push_str(&delta);
        }
        out.push(ev(
            EventKind::ToolCallArgs {
                tool_call_id: id,
                delta,
            },
            extra,
        ));
    }

    /// The call's record, announcing the call first if no start was read.
    /// A start made up for a bare `tool-input-available`/`-error` is marked so
    /// the Vercel encoder does not write it.
    fn open_call(&mut self, id: &str, name: &str, out: &mut Vec<Event>) -> &mut CallSeen {
        if !self.calls.contains_key(id) {
            out.push(made_up(EventKind::ToolCallStart {
                tool_call_id: id.to_string(),
                tool_name: name.to_string(),
                parent_message_id: None,
            }));
        }
        self.calls.entry(id.to_string()).or_default()
    }

    fn data(&mut self, c: &Chunk<'_>, name: &str, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        let Some(data) = c.obj.get("data") else {
            return Err(DecodeError::field(c.ty, "data"));
        };
        // Reserved names carry core events this dialect has no chunk for
        // (docs/mapping/vercel.md); their `id`/`transient` stay in extra.
        let wire_extra = || c.extra(&["data"]);
        match name {
            "state" => {
                let (kind, form) = match state_envelope(data) {
                    Some(StateForm::Snapshot(s)) => (
                        EventKind::StateSnapshot {
                            snapshot: s.clone(),
                        },
                        true,
                    ),
                    Some(StateForm::Delta(d)) => (EventKind::StateDelta { patch: d.clone() }, true),
                    None => (
                        EventKind::StateSnapshot {
                            snapshot: data.clone(),
                        },
                        false,
                    ),
                };
                let mut extra = wire_extra();
                if form {
                    extra.insert(marker::FORM.into(), Value::String("envelope".into()));
                }
                out.push(ev(kind, extra));
                return Ok(());
            }
            "state-delta" if data.is_array() => {
                out.push(ev(
                    EventKind::StateDelta {
                        patch: data.clone(),
                    },
                    wire_extra(),
                ));
                return Ok(());
            }
            "custom" => {
                if let Some(o) = data.as_object() {
                    if let (2, Some(Value::String(n)), Some(v)) =
                        (o.len(), o.get("name"), o.get("value"))
                    {
                        out.push(ev(
                            EventKind::Custom {
                                name: n.clone(),
                                value: v.clone(),
                            },
                            wire_extra(),
                        ));
                        return Ok(());
                    }
                }
            }
            "interrupt" => {
                if let Ok(interrupt) = serde_json::from_value::<Interrupt>(data.clone()) {
                    self.pending_interrupts.push(interrupt);
                    return Ok(());
                }
            }
            "unknown" => {
                // Kept unknown by an earlier hop, from a dialect no one
                // said: no origin, so the encoder wraps it again as it came.
                out.push(Event::new(EventKind::Unknown { raw: data.clone() }));
                return Ok(());
            }
            "messages-snapshot" => {
                if let Some(list) = data.get("messages").and_then(Value::as_array) {
                    if let Ok((messages, _)) = crate::request::ui_to_core_messages(list, "messages")
                    {
                        out.push(ev(EventKind::MessagesSnapshot { messages }, wire_extra()));
                        return Ok(());
                    }
                }
            }
            _ => {
                if let Some(kind) = wire::kind_from_part(name, data) {
                    out.push(ev(kind, wire_extra()));
                    return Ok(());
                }
            }
        }
        let id = match c.obj.get("id") {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        let transient = c.obj.get("transient") == Some(&Value::Bool(true));
        let mut modelled = vec!["data"];
        if id.is_some() {
            modelled.push("id");
        }
        if transient {
            modelled.push("transient");
        }
        out.push(ev(
            EventKind::Data {
                name: name.to_string(),
                id,
                message_id: None,
                data: data.clone(),
                transient,
            },
            c.extra(&modelled),
        ));
        Ok(())
    }
}

/// The `input` the encoder writes for a call's argument text when it reports
/// invalid input: the JSON it holds, else the text itself.
pub(crate) fn input_from_args(args: &str) -> Value {
    if args.trim().is_empty() {
        return Value::Object(Map::new());
    }
    serde_json::from_str(args).unwrap_or_else(|_| Value::String(args.to_string()))
}

#[cfg(test)]
mod tests;
