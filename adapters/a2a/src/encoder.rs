//! Core events to an A2A task stream: JSON-RPC responses on SSE, each
//! `result` one v1.0 stream response. The run is a task (`id` = the run,
//! `contextId` = the thread); each text message is an artifact streamed in
//! chunks (each piece of text sent once, never again in a status), data as
//! data artifacts, tool calls and results as data parts of `working`
//! status messages, an interrupt as `input-required`, an error as `failed`
//! with its message, a stop as `canceled`.

use babelgate_core::{Dialect, EncodeContext, Encoder, Event, EventKind, Outcome, Sink};
use serde_json::{json, Map, Value};

use crate::rpc::{self, Version};
use crate::task::{self, TaskView};
use crate::wire::{self, State};

pub struct A2aEncoder {
    ctx: EncodeContext,
    task_id: Option<String>,
    context_id: Option<String>,
    started: bool,
    ended: bool,
    /// Text messages whose artifact has had a chunk (the next appends).
    chunked: Vec<String>,
    /// Tool calls being written: id, name, argument text.
    calls: Vec<(String, String, String)>,
    /// The task as written so far, for answers about it (`GetTask`).
    view: TaskView,
    dropped: u64,
}

impl A2aEncoder {
    pub fn new(ctx: EncodeContext) -> Self {
        A2aEncoder {
            ctx,
            task_id: None,
            context_id: None,
            started: false,
            ended: false,
            chunked: Vec::new(),
            calls: Vec::new(),
            view: TaskView::default(),
            dropped: 0,
        }
    }

    fn ids(&mut self) -> (String, String) {
        if self.task_id.is_none() {
            self.task_id = Some(
                self.ctx
                    .run_id
                    .clone()
                    .unwrap_or_else(|| self.ctx.ids.next("task")),
            );
        }
        if self.context_id.is_none() {
            self.context_id = Some(
                self.ctx
                    .thread_id
                    .clone()
                    .unwrap_or_else(|| self.ctx.ids.next("ctx")),
            );
        }
        (
            self.task_id.clone().unwrap_or_default(),
            self.context_id.clone().unwrap_or_default(),
        )
    }

    /// The request's id (without one, as in `translate`, the task's) and
    /// the version its answers are spelt in.
    fn reply(&mut self) -> (Value, Version) {
        let (task, _) = self.ids();
        let (id, version) = rpc::reply_of(self.ctx.reply_to.as_ref());
        (id.unwrap_or(Value::String(task)), version)
    }

    fn write(&mut self, result: Value, out: &mut Sink) {
        self.view.apply(&result);
        let (id, version) = self.reply();
        let result = match version {
            Version::V1 => result,
            Version::V03 => task::to_v03(&result),
        };
        let response = json!({"jsonrpc": "2.0", "id": id, "result": result});
        let data = wire::to_sse_json(&response);
        // JSON: one line, which the sink frames as it is.
        out.event(|body| body.extend_from_slice(data.as_bytes()));
    }

    fn begin(&mut self, out: &mut Sink) {
        if self.started {
            return;
        }
        self.started = true;
        let (task, context) = self.ids();
        self.write(
            json!({"task": {
                "id": task,
                "contextId": context,
                "status": {"state": State::Submitted.v1()},
            }}),
            out,
        );
        self.status(State::Working, None, out);
    }

    fn status(&mut self, state: State, message: Option<Vec<Value>>, out: &mut Sink) {
        let (task, context) = self.ids();
        let mut status = Map::new();
        status.insert("state".into(), json!(state.v1()));
        if let Some(parts) = message {
            let id = self.ctx.ids.next("msg");
            status.insert(
                "message".into(),
                json!({
                    "messageId": id,
                    "contextId": context,
                    "taskId": task,
                    "role": "ROLE_AGENT",
                    "parts": parts,
                }),
            );
        }
        self.write(
            json!({"statusUpdate": {"taskId": task, "contextId": context, "status": status}}),
            out,
        );
    }

    fn artifact(
        &mut self,
        artifact_id: &str,
        name: Option<&str>,
        parts: Vec<Value>,
        append: bool,
        last: bool,
        out: &mut Sink,
    ) {
        let (task, context) = self.ids();
        let mut artifact = Map::new();
        artifact.insert("artifactId".into(), json!(artifact_id));
        if let Some(n) = name {
            artifact.insert("name".into(), json!(n));
        }
        artifact.insert("parts".into(), Value::Array(parts));
        let mut update = Map::new();
        update.insert("taskId".into(), json!(task));
        update.insert("contextId".into(), json!(context));
        update.insert("artifact".into(), Value::Object(artifact));
        if append {
            update.insert("append".into(), json!(true));
        }
        if last {
            update.insert("lastChunk".into(), json!(true));
        }
        self.write(json!({ "artifactUpdate": update }), out);
    }

    fn tool_call(&mut self, id: String, name: String, args: String, out: &mut Sink) {
        let input = serde_json::from_str::<Value>(&args).unwrap_or(Value::String(args));
        self.status(
            State::Working,
            Some(vec![
                json!({"data": {"toolCall": {"id": id, "name": name, "input": input}}}),
            ]),
            out,
        );
    }

    fn close_texts(&mut self, out: &mut Sink) {
        for id in std::mem::take(&mut self.chunked) {
            self.artifact(&id, None, vec![json!({"text": ""})], true, true, out);
        }
    }

    fn end(&mut self, state: State, text: Option<String>, data: Option<Value>, out: &mut Sink) {
        if self.ended {
            return;
        }
        self.begin(out);
        self.close_texts(out);
        // Calls whose input never ended (left for the client) are still said.
        for (id, name, args) in std::mem::take(&mut self.calls) {
            self.tool_call(id, name, args, out);
        }
        let mut parts = Vec::new();
        if let Some(t) = text {
            parts.push(json!({ "text": t }));
        }
        if let Some(d) = data {
            parts.push(json!({ "data": d }));
        }
        self.status(state, (!parts.is_empty()).then_some(parts), out);
        self.ended = true;
    }

    /// A message's text, as chunks of one artifact per message.
    fn text_delta(&mut self, message_id: &str, delta: &str, out: &mut Sink) {
        self.begin(out);
        if delta.is_empty() {
            return;
        }
        let append = self.chunked.iter().any(|m| m == message_id);
        if !append {
            self.chunked.push(message_id.to_string());
        }
        self.artifact(
            message_id,
            None,
            vec![json!({ "text": delta })],
            append,
            false,
            out,
        );
    }

    /// The task's final state, from how the run finished.
    fn end_run(&mut self, outcome: &Outcome, out: &mut Sink) {
        match outcome {
            Outcome::Interrupt { interrupts } => {
                let text: Vec<&str> = interrupts
                    .iter()
                    .filter_map(|i| i.message.as_deref())
                    .collect();
                let text = (!text.is_empty()).then(|| text.join("\n"));
                let data = serde_json::to_value(interrupts)
                    .ok()
                    .map(|i| json!({"interrupts": i}));
                self.end(State::InputRequired, text, data, out);
            }
            Outcome::Cancelled { reason } => self.end(State::Canceled, reason.clone(), None, out),
            _ => self.end(State::Completed, None, None, out),
        }
    }
}

impl Encoder for A2aEncoder {
    fn dialect(&self) -> Dialect {
        Dialect::A2a
    }

    /// An upstream A2A frame never stands as received: it names the
    /// upstream's task and request ids, where the client knows the
    /// gateway's (the run's id, its own request's id), and the a2a-sdk
    /// server writes U+2028 unescaped, on which its own client splits lines.
    fn verbatim(&self, _event: &Event) -> bool {
        false
    }

    fn encode_to(&mut self, event: &Event, out: &mut Sink) {
        if self.ended {
            return;
        }
        match &event.kind {
            EventKind::RunStarted {
                thread_id, run_id, ..
            } => {
                if !self.started {
                    if self.ctx.run_id.is_none() {
                        self.task_id = run_id.clone();
                    }
                    if self.ctx.thread_id.is_none() {
                        self.context_id = thread_id.clone();
                    }
                }
                self.begin(out);
            }
            EventKind::TextStart { .. } => self.begin(out),
            EventKind::TextDelta { message_id, delta } => self.text_delta(message_id, delta, out),
            EventKind::TextEnd { message_id } => {
                if let Some(at) = self.chunked.iter().position(|m| m == message_id) {
                    self.chunked.remove(at);
                    self.artifact(message_id, None, vec![json!({"text": ""})], true, true, out);
                }
            }
            EventKind::ToolCallStart {
                tool_call_id,
                tool_name,
                ..
            } => {
                self.begin(out);
                self.calls
                    .push((tool_call_id.clone(), tool_name.clone(), String::new()));
            }
            EventKind::ToolCallArgs {
                tool_call_id,
                delta,
            } => {
                if let Some(c) = self.calls.iter_mut().find(|c| c.0 == *tool_call_id) {
                    c.2.push_str(delta);
                }
            }
            EventKind::ToolCallEnd { tool_call_id } => {
                if let Some(at) = self.calls.iter().position(|c| c.0 == *tool_call_id) {
                    let (id, name, args) = self.calls.remove(at);
                    self.tool_call(id, name, args, out);
                }
            }
            EventKind::ToolCallResult {
                tool_call_id,
                content,
                ..
            } => {
                self.begin(out);
                self.status(
                    State::Working,
                    Some(vec![
                        json!({"data": {"toolResult": {"id": tool_call_id, "output": content}}}),
                    ]),
                    out,
                );
            }
            EventKind::ToolCallError {
                tool_call_id,
                error,
                ..
            } => {
                self.begin(out);
                self.status(
                    State::Working,
                    Some(vec![
                        json!({"data": {"toolResult": {"id": tool_call_id, "error": error}}}),
                    ]),
                    out,
                );
            }
            EventKind::Data { name, id, data, .. } => {
                self.begin(out);
                let artifact_id = id.clone().unwrap_or_else(|| self.ctx.ids.next("data"));
                self.artifact(
                    &artifact_id,
                    Some(name),
                    vec![json!({ "data": data })],
                    false,
                    true,
                    out,
                );
            }
            EventKind::Custom { name, value } => {
                self.begin(out);
                let artifact_id = self.ctx.ids.next("data");
                self.artifact(
                    &artifact_id,
                    Some(name),
                    vec![json!({ "data": value })],
                    false,
                    true,
                    out,
                );
            }
            EventKind::File { url, media_type } => {
                self.begin(out);
                let artifact_id = self.ctx.ids.next("file");
                self.artifact(
                    &artifact_id,
                    None,
                    vec![json!({"url": url, "mediaType": media_type})],
                    false,
                    true,
                    out,
                );
            }
            EventKind::RunFinished { outcome, .. } => self.end_run(outcome, out),
            EventKind::RunError { message, .. } => {
                self.end(State::Failed, Some(message.clone()), None, out)
            }
            _ => self.dropped += 1,
        }
    }

    /// A run stopped on purpose (the gateway's `stopped` code: stop, or a
    /// client that left a cancel route) is a canceled task; any other
    /// failure a failed one, with the message.
    fn fail_to(&mut self, message: &str, code: Option<&str>, out: &mut Sink) {
        let state = if code == Some("stopped") {
            State::Canceled
        } else {
            State::Failed
        };
        self.end(state, Some(message.to_string()), None, out);
    }

    fn finish_to(&mut self, out: &mut Sink) {
        // A stream that ended without saying how: the task is done with
        // what it has.
        self.end(State::Completed, None, None, out);
    }

    fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The task as written so far: `GetTask`'s and `CancelTask`'s answer.
    fn state_answer(&self) -> Option<Value> {
        let (id, version) = rpc::reply_of(self.ctx.reply_to.as_ref());
        let task = self
            .view
            .task(rpc::history_length(self.ctx.reply_to.as_ref()));
        let result = match version {
            // SendMessage's result is a SendMessageResponse: the task under `task`.
            Version::V1 if rpc::is_send(self.ctx.reply_to.as_ref()) => json!({ "task": task }),
            Version::V1 => task,
            Version::V03 => task::to_v03(&task),
        };
        Some(json!({"jsonrpc": "2.0", "id": id.unwrap_or(Value::Null), "result": result}))
    }
}
