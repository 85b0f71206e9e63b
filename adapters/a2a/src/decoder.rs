//! A2A JSON-RPC SSE results to core events.
//!
//! A run is one task: its first event starts the run (thread = `contextId`,
//! run = task `id`), artifact text chunks and agent messages become
//! assistant text, data parts `Data` events, `input-required` and
//! `auth-required` an interrupt (whose id is the task's, so that the
//! client's answer continues the same task), `completed` the run's end,
//! `failed`/`rejected` its error with the status message, `canceled` its
//! stopped end.

use babelgate_core::{DecodeError, Decoder, Dialect, Event, EventKind, Frame, Interrupt, Outcome};
use serde_json::{Map, Value};

use crate::wire::{self, Kind, PartRef, State};

#[derive(Debug, Default)]
pub struct A2aDecoder {
    started: bool,
    /// A task (not a bare message) answers this request.
    task_seen: bool,
    task_id: Option<String>,
    context_id: Option<String>,
    /// Text messages open, by id (one per artifact being streamed).
    open: Vec<String>,
    /// A terminal or interrupted state went out: the run is over.
    ended: bool,
    /// Agent messages without an id get `msg-{n}`.
    messages: u64,
}

impl A2aDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    fn start(&mut self, task_id: Option<&str>, context_id: Option<&str>, out: &mut Vec<Event>) {
        if self.task_id.is_none() {
            self.task_id = task_id.filter(|s| !s.is_empty()).map(str::to_string);
        }
        if self.context_id.is_none() {
            self.context_id = context_id.filter(|s| !s.is_empty()).map(str::to_string);
        }
        if !self.started {
            self.started = true;
            out.push(Event::new(EventKind::RunStarted {
                thread_id: self.context_id.clone(),
                run_id: self.task_id.clone(),
                parent_run_id: None,
                message_id: None,
                input: None,
            }));
        }
    }

    fn close_texts(&mut self, out: &mut Vec<Event>) {
        for message_id in self.open.drain(..) {
            out.push(Event::new(EventKind::text_end(message_id)));
        }
    }

    /// An artifact's or message's parts. Text goes into the text message
    /// `message_id` (opened here, left open for more chunks).
    fn parts(
        &mut self,
        parts: &[Value],
        message_id: &str,
        name: Option<&str>,
        out: &mut Vec<Event>,
    ) {
        for p in parts {
            match wire::part(p) {
                PartRef::Text(t) => {
                    if !self.open.iter().any(|m| m == message_id) {
                        self.open.push(message_id.to_string());
                        out.push(Event::new(EventKind::text_start(message_id.to_string())));
                    }
                    if !t.is_empty() {
                        out.push(Event::new(EventKind::text_delta(
                            message_id.to_string(),
                            t.to_string(),
                        )));
                    }
                }
                PartRef::Data(d) if tool_part(d, out) => {}
                PartRef::Data(d) => out.push(Event::new(EventKind::Data {
                    name: name.unwrap_or("a2a").to_string(),
                    id: Some(message_id.to_string()),
                    message_id: None,
                    data: d.clone(),
                    transient: false,
                })),
                PartRef::File {
                    url, media_type, ..
                } => out.push(Event::new(EventKind::File { url, media_type })),
                PartRef::Other => out.push(
                    Event::new(EventKind::Unknown { raw: p.clone() }).with_origin(Dialect::A2a),
                ),
            }
        }
    }

    /// An agent message, whole: its text is one text message.
    fn message(&mut self, m: &Map<String, Value>, out: &mut Vec<Event>) {
        if m.get("role").and_then(Value::as_str).is_some_and(is_user) {
            return;
        }
        let id = match m.get("messageId").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => id.to_string(),
            _ => {
                self.messages += 1;
                format!("msg-{}", self.messages)
            }
        };
        let parts = m
            .get("parts")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        self.parts(parts, &id, None, out);
        if let Some(at) = self.open.iter().position(|o| *o == id) {
            self.open.remove(at);
            out.push(Event::new(EventKind::text_end(id)));
        }
    }

    fn artifact(
        &mut self,
        a: &Map<String, Value>,
        last_chunk: bool,
        out: &mut Vec<Event>,
    ) -> Result<(), DecodeError> {
        let artifact_id = a
            .get("artifactId")
            .and_then(Value::as_str)
            .ok_or_else(|| DecodeError::field("artifactUpdate", "artifact.artifactId"))?;
        // Artifact ids are the agent's and may repeat from task to task
        // (`result`, `a1`): the task's id keeps the messages apart.
        let message_id = match &self.task_id {
            Some(t) => format!("{t}:{artifact_id}"),
            None => artifact_id.to_string(),
        };
        let parts = a
            .get("parts")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let name = a.get("name").and_then(Value::as_str);
        self.parts(parts, &message_id, name, out);
        if last_chunk {
            if let Some(at) = self.open.iter().position(|o| *o == message_id) {
                self.open.remove(at);
                out.push(Event::new(EventKind::text_end(message_id)));
            }
        }
        Ok(())
    }

    fn status(&mut self, status: &Map<String, Value>, out: &mut Vec<Event>) {
        let state = status
            .get("state")
            .and_then(Value::as_str)
            .map_or(State::Unknown, State::parse);
        let message = status.get("message").and_then(Value::as_object);
        let text = message.map(wire::message_text).filter(|t| !t.is_empty());
        match state {
            State::Submitted | State::Working | State::Unknown => {
                if let Some(m) = message {
                    self.message(m, out);
                }
            }
            State::Completed => {
                if let Some(m) = message {
                    self.message(m, out);
                }
                self.finish_run(
                    Outcome::Success {
                        pending_tool_call_ids: Vec::new(),
                    },
                    out,
                );
            }
            State::InputRequired | State::AuthRequired => {
                self.close_texts(out);
                let payload = message.and_then(|m| {
                    m.get("parts")?
                        .as_array()?
                        .iter()
                        .find_map(|p| match wire::part(p) {
                            PartRef::Data(d) => Some(d.clone()),
                            _ => None,
                        })
                });
                let reason = if state == State::InputRequired {
                    "input_required"
                } else {
                    "auth_required"
                };
                let interrupt = Interrupt {
                    id: self.task_id.clone().unwrap_or_default(),
                    reason: reason.to_string(),
                    message: text,
                    tool_call_id: None,
                    payload,
                    extra: Map::new(),
                };
                self.finish_run(
                    Outcome::Interrupt {
                        interrupts: vec![interrupt],
                    },
                    out,
                );
            }
            State::Failed | State::Rejected => {
                self.close_texts(out);
                let (default, code) = if state == State::Failed {
                    ("the task failed", "failed")
                } else {
                    ("the agent rejected the task", "rejected")
                };
                out.push(Event::new(EventKind::RunError {
                    message: text.unwrap_or_else(|| default.to_string()),
                    code: Some(code.to_string()),
                }));
                self.ended = true;
            }
            State::Canceled => {
                self.close_texts(out);
                self.finish_run(Outcome::Cancelled { reason: text }, out);
            }
        }
    }

    fn finish_run(&mut self, outcome: Outcome, out: &mut Vec<Event>) {
        self.close_texts(out);
        out.push(Event::new(EventKind::RunFinished {
            thread_id: self.context_id.clone(),
            run_id: self.task_id.clone(),
            message_id: None,
            result: None,
            outcome,
            finish_reason: None,
            usage: None,
        }));
        self.ended = true;
    }
}

/// The tool calls and results our encoder writes as data parts
/// (`{"toolCall": {id, name, input}}`, `{"toolResult": {id, output | error}}`),
/// read back as such. Anything else is plain data.
fn tool_part(d: &Value, out: &mut Vec<Event>) -> bool {
    let Some(o) = d.as_object().filter(|o| o.len() == 1) else {
        return false;
    };
    if let Some(c) = o.get("toolCall").and_then(Value::as_object) {
        let (Some(id), Some(name)) = (str_of(c, "id"), str_of(c, "name")) else {
            return false;
        };
        let args = match c.get("input") {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => "{}".to_string(),
        };
        out.push(Event::new(EventKind::ToolCallStart {
            tool_call_id: id.to_string(),
            tool_name: name.to_string(),
            parent_message_id: None,
        }));
        out.push(Event::new(EventKind::ToolCallArgs {
            tool_call_id: id.to_string(),
            delta: args,
        }));
        out.push(Event::new(EventKind::ToolCallEnd {
            tool_call_id: id.to_string(),
        }));
        return true;
    }
    if let Some(r) = o.get("toolResult").and_then(Value::as_object) {
        let Some(id) = str_of(r, "id") else {
            return false;
        };
        let kind = match (r.get("error").and_then(Value::as_str), r.get("output")) {
            (Some(e), _) => EventKind::ToolCallError {
                tool_call_id: id.to_string(),
                error: e.to_string(),
                input_invalid: false,
            },
            (None, Some(content)) => EventKind::ToolCallResult {
                tool_call_id: id.to_string(),
                message_id: None,
                content: content.clone(),
            },
            (None, None) => return false,
        };
        out.push(Event::new(kind));
        return true;
    }
    false
}

fn is_user(role: &str) -> bool {
    role.eq_ignore_ascii_case("ROLE_USER") || role == "user"
}

fn str_of<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    o.get(key).and_then(Value::as_str)
}

impl Decoder for A2aDecoder {
    fn dialect(&self) -> Dialect {
        Dialect::A2a
    }

    fn decode(&mut self, frame: &Frame, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        if frame.data.trim().is_empty() {
            return Ok(());
        }
        let v: Value = serde_json::from_str(&frame.data).map_err(|e| DecodeError::json(&e))?;
        let Value::Object(obj) = v else {
            return Err(DecodeError::new("a JSON-RPC response must be an object"));
        };
        if self.ended {
            // The task's stream is over; the SDKs read nothing after it.
            return Ok(());
        }
        if let Some(err) = obj.get("error") {
            self.close_texts(out);
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("the agent answered a JSON-RPC error");
            let code = err.get("code").map(|c| match c {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
            out.push(Event::new(EventKind::RunError {
                message: message.to_string(),
                code,
            }));
            self.ended = true;
            return Ok(());
        }
        let result = obj
            .get("result")
            .and_then(Value::as_object)
            .ok_or_else(|| DecodeError::field("JSON-RPC response", "result"))?;
        let Some((kind, body)) = wire::result_kind(result) else {
            out.push(
                Event::new(EventKind::Unknown {
                    raw: Value::Object(result.clone()),
                })
                .with_origin(Dialect::A2a),
            );
            return Ok(());
        };
        match kind {
            Kind::Task => {
                self.task_seen = true;
                self.start(str_of(body, "id"), str_of(body, "contextId"), out);
                let status = body.get("status").and_then(Value::as_object);
                let state = status
                    .and_then(|s| s.get("state"))
                    .and_then(Value::as_str)
                    .map_or(State::Unknown, State::parse);
                // A task that is already over is a whole answer (a
                // non-streaming reply): its artifacts are the text. A task
                // still running is a snapshot of what came before this
                // request (a continued task), which the client has.
                if state.is_terminal() {
                    for a in body
                        .get("artifacts")
                        .and_then(Value::as_array)
                        .map(Vec::as_slice)
                        .unwrap_or_default()
                    {
                        if let Some(a) = a.as_object() {
                            self.artifact(a, true, out)?;
                        }
                    }
                }
                if let Some(s) = status {
                    if state != State::Submitted && state != State::Working {
                        self.status(s, out);
                    }
                }
            }
            Kind::Message => {
                self.start(str_of(body, "taskId"), str_of(body, "contextId"), out);
                self.message(body, out);
                if !self.task_seen {
                    // A bare message is the whole answer.
                    self.finish_run(
                        Outcome::Success {
                            pending_tool_call_ids: Vec::new(),
                        },
                        out,
                    );
                }
            }
            Kind::StatusUpdate => {
                self.task_seen = true;
                self.start(str_of(body, "taskId"), str_of(body, "contextId"), out);
                if let Some(s) = body.get("status").and_then(Value::as_object) {
                    self.status(s, out);
                }
            }
            Kind::ArtifactUpdate => {
                self.task_seen = true;
                self.start(str_of(body, "taskId"), str_of(body, "contextId"), out);
                let a = body
                    .get("artifact")
                    .and_then(Value::as_object)
                    .ok_or_else(|| DecodeError::field("artifactUpdate", "artifact"))?;
                let last = body
                    .get("lastChunk")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                self.artifact(a, last, out)?;
            }
        }
        Ok(())
    }
}
