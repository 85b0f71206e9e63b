//! Core events to a UI message stream the `ai` package's client accepts.
//!
//! What the client (`processUIMessageStream` behind `useChat`) insists on, and
//! what this encoder does about it:
//! - every chunk must be of a known type: core events without a chunk of their
//!   own become `data-<name>` parts (transient when they should not stay in
//!   the message);
//! - `text-delta`/`-end` need an open `text-start` (likewise reasoning, and
//!   `tool-input-delta` needs `tool-input-start`): the shape stage ahead of
//!   this encoder (`babelgate_core::shape`) synthesizes starts and drops ends
//!   of nothing;
//! - tool outputs, denials and approval requests need a tool part the client
//!   has seen: a call it has not seen is announced first;
//! - `finishReason` must be one of seven values.
//!
//! What the chat needs beyond validity: one `start` first, carrying the id of
//! the message being continued; a `start-step` before the first content (a
//! continuation that writes into the previous step makes `useChat` resubmit
//! forever); a new step once tool results are in, as `streamText` does; and a
//! terminal chunk (`finish`, `abort` or `error`) followed by `data: [DONE]`.
//!
//! The steps are one state ([`Step`]). `finish-step` is written lazily, right before whatever comes next: the
//! client ignores it, and the delay lets the approval requests that a
//! `RunFinished` carries land inside the step, where a Vercel upstream put
//! them.

// foldhash: ids are hashed per event; SipHash showed in the profile.
use foldhash::{HashMap, HashMapExt, HashSet};

use babelgate_core::event::{Role, SourceKind};
use babelgate_core::request::Message;
use babelgate_core::Interrupt;
use babelgate_core::{
    Dialect, EncodeContext, Encoder, Event, EventKind, Extra, OpenList, OpenTracker, Outcome, Sink,
};
use serde_json::{json, Map, Value};

use crate::decoder::input_from_args;
use crate::request::{apply_patch, core_to_ui_messages};
use crate::wire::{self, is_marker, marker, HEADERS, STATE_PART_ID, UNKNOWN_TOOL_NAME};
/// Where the response is: the encoder's one state.
#[derive(Debug, Clone, PartialEq)]
enum State {
    /// Nothing written yet.
    Fresh,
    /// `start` is written.
    Live(Response),
    /// An `error` chunk ended the response (its step and message closed):
    /// the chat stops reading there, so nothing more is written but `[DONE]`.
    Errored,
    /// `[DONE]` is written.
    Done,
}

/// A response whose `start` is written.
#[derive(Debug, Clone, PartialEq)]
struct Response {
    /// A run is open: started, and neither finished (`finish`, `abort`) nor
    /// failed.
    running: bool,
    step: Step,
    /// A chunk the client stores was written after the first step opened.
    committed: bool,
}

/// Where the response is in its steps (`start-step` ... `finish-step`).
#[derive(Debug, Clone, PartialEq)]
enum Step {
    /// No step opened yet in this response.
    NoneYet,
    /// A step is open. `output`: a tool result came in it, so content from
    /// another dialect opens a new step. `calls_of`: the upstream message
    /// the step's calls belong to: text of another message is the next
    /// model call, so the next step.
    Open {
        output: bool,
        calls_of: Option<String>,
    },
    /// A Vercel upstream's `finish-step` (its extras), written before the
    /// next chunk unless the run's finish comes first (trailing content
    /// stays in the step that is closing).
    Closing(Extra),
    /// The last step is closed.
    Closed,
}

impl Step {
    fn open() -> Self {
        Step::Open {
            output: false,
            calls_of: None,
        }
    }
}

#[derive(Debug)]
struct Call {
    name: String,
    args: String,
    /// `tool-input-start` is on the wire.
    start_written: bool,
    /// `tool-input-available`/`-error` is on the wire (or due).
    input_done: bool,
    /// An output, error or denial is on the wire.
    resolved: bool,
    /// The run it belongs to (finish reasons look at the current run only).
    run: u64,
    /// The upstream's id of the tool message holding the result, as written
    /// (a snapshot naming another one writes the result again).
    result_id: Option<String>,
}

impl Call {
    fn new(name: &str, run: u64) -> Self {
        Call {
            name: name.to_string(),
            args: String::new(),
            start_written: false,
            input_done: false,
            resolved: false,
            run,
            result_id: None,
        }
    }
}

/// Maps shaped events (`babelgate_core::shape`) to UI message stream chunks.
/// How a cut stream ends (`finish_to`, `fail_to`) is its own: it closes what
/// it wrote open.
pub struct VercelEncoder {
    ctx: EncodeContext,
    state: State,
    /// Open text and reasoning parts (what is written, for a cut stream to
    /// close them and for `verbatim`).
    tracker: OpenTracker,
    /// Runs started in this response.
    run_seq: u64,
    calls: HashMap<String, Call>,
    /// Calls whose input is still streaming, in the order they started.
    open_inputs: OpenList<()>,
    /// The state as StateSnapshot/StateDelta left it.
    state_value: Value,
    /// Activity contents by message id, for applying deltas.
    activities: HashMap<String, Value>,
    /// Ids of the approval requests the client's message holds (written
    /// here, or in the continued message): the client throws on a
    /// `tool-approval-response` whose request its message lacks.
    approvals: HashSet<String>,
    /// The calls the continued message holds (a set: a request may name
    /// many, and each result looks its call up).
    held_calls: HashSet<String>,
}

impl VercelEncoder {
    pub fn new(ctx: EncodeContext) -> Self {
        VercelEncoder {
            state: State::Fresh,
            tracker: OpenTracker::default(),
            run_seq: 0,
            calls: HashMap::new(),
            open_inputs: OpenList::default(),
            state_value: json!({}),
            activities: HashMap::new(),
            approvals: ctx.continued.approvals.iter().cloned().collect(),
            held_calls: ctx.continued.tool_calls.iter().cloned().collect(),
            ctx,
        }
    }
}

/// `finish-step` with a Vercel upstream's extras (not a committing chunk).
fn write_finish_step(out: &mut Sink, extra: Extra) {
    let mut c = chunk("finish-step");
    c.extend(extra);
    out.json(&Value::Object(c));
}

/// A chunk object with its type first.
fn chunk(ty: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("type".into(), Value::String(ty.to_string()));
    m
}

/// A chunk object with its type and a string field.
fn chunk_with(ty: &str, key: &str, value: &str) -> Map<String, Value> {
    let mut m = chunk(ty);
    m.insert(key.into(), s(value));
    m
}

fn s(v: &str) -> Value {
    Value::String(v.to_string())
}

fn is_vercel(event: &Event) -> bool {
    event.origin == Some(Dialect::Vercel)
}

/// A field (or `wire::marker` note) a Vercel source had that the model has
/// no slot for.
fn note<'a>(event: &'a Event, key: &str) -> Option<&'a Value> {
    if is_vercel(event) {
        event.extra.get(key)
    } else {
        None
    }
}

/// Whether a Vercel-origin data part was transient on the wire.
fn wire_transient(event: &Event) -> bool {
    note(event, "transient") == Some(&Value::Bool(true))
}

/// Whether the client commits a chunk to the chat's messages (calls its
/// `write()`): everything that adds or changes a part, but not the lifecycle
/// chunks, `error`, or transient data.
fn commits(obj: &Map<String, Value>) -> bool {
    let ty = obj.get("type").and_then(Value::as_str).unwrap_or_default();
    match ty {
        "start" | "start-step" | "finish-step" | "finish" | "abort" | "error" | "reset-step" => {
            false
        }
        _ if ty.starts_with("data-") => obj.get("transient") != Some(&Value::Bool(true)),
        _ => true,
    }
}

/// Appends the chunk, with the event's Vercel wire fields written back.
fn write_chunk(out: &mut Sink, mut obj: Map<String, Value>, event: Option<&Event>) {
    if let Some(extra) = event.and_then(|e| e.extra_from(Dialect::Vercel)) {
        for (k, v) in extra {
            if !is_marker(k) {
                obj.insert(k.clone(), v.clone());
            }
        }
    }
    out.json(&Value::Object(obj));
}

/// A tool result for the client: AG-UI and HAI carry JSON results as JSON
/// text; a UI shows them better as the objects they are.
fn output_value(content: &Value, from_vercel: bool) -> Value {
    if !from_vercel {
        if let Value::String(text) = content {
            if let Ok(v @ (Value::Object(_) | Value::Array(_))) =
                serde_json::from_str::<Value>(text)
            {
                return v;
            }
        }
    }
    content.clone()
}

/// The `source-url`/`source-document` chunk of a `Source` event.
fn source_chunk(
    source_kind: &SourceKind,
    source_id: &str,
    url: Option<&str>,
    title: Option<&str>,
    media_type: Option<&str>,
    filename: Option<&str>,
) -> Map<String, Value> {
    match source_kind {
        SourceKind::Url => {
            let mut c = chunk_with("source-url", "sourceId", source_id);
            c.insert("url".into(), s(url.unwrap_or_default()));
            if let Some(t) = title {
                c.insert("title".into(), s(t));
            }
            c
        }
        SourceKind::Document => {
            let mut c = chunk_with("source-document", "sourceId", source_id);
            let media_type = media_type.unwrap_or("application/octet-stream");
            c.insert("mediaType".into(), s(media_type));
            // title is required: fall back to the file name
            let t = title.or(filename).unwrap_or_default();
            c.insert("title".into(), s(t));
            if let Some(f) = filename {
                c.insert("filename".into(), s(f));
            }
            c
        }
    }
}

// ---- state: the response and its steps -----------------------------------

impl VercelEncoder {
    fn response(&mut self) -> Option<&mut Response> {
        match &mut self.state {
            State::Live(r) => Some(r),
            _ => None,
        }
    }

    fn step(&self) -> Option<&Step> {
        match &self.state {
            State::Live(r) => Some(&r.step),
            _ => None,
        }
    }

    fn set_step(&mut self, step: Step) {
        if let Some(r) = self.response() {
            r.step = step;
        }
    }

    /// A step is open (a `finish-step` due still counts).
    fn step_open(&self) -> bool {
        matches!(self.step(), Some(Step::Open { .. } | Step::Closing(_)))
    }

    fn any_step(&self) -> bool {
        matches!(self.step(), Some(s) if *s != Step::NoneYet)
    }

    /// A chunk the client stores is written: after the first step, the
    /// response has content.
    fn note_commit(&mut self) {
        if let Some(r) = self.response() {
            if r.step != Step::NoneYet {
                r.committed = true;
            }
        }
    }

    fn emit(&mut self, out: &mut Sink, obj: Map<String, Value>, event: Option<&Event>) {
        if commits(&obj) {
            self.note_commit();
        }
        write_chunk(out, obj, event);
    }

    /// `start`, before anything else the response says.
    fn ensure_start(&mut self, out: &mut Sink) {
        if self.state == State::Fresh {
            self.write_start(out, None, None);
        }
    }

    fn write_start(&mut self, out: &mut Sink, message_id: Option<&str>, event: Option<&Event>) {
        let mut c = chunk("start");
        if let Some(id) = self.ctx.message_id.as_deref().or(message_id) {
            c.insert("messageId".into(), s(id));
        }
        self.emit(out, c, event);
        self.state = State::Live(Response {
            running: false,
            step: Step::NoneYet,
            committed: false,
        });
    }

    fn set_running(&mut self, running: bool) {
        if let Some(r) = self.response() {
            r.running = running;
        }
    }

    /// A continuation must show the client its new step: a stream that only
    /// opens and closes one never makes the chat store the step (the client
    /// stores the message on content, and React's chat state keeps a copy),
    /// so the chat would still see the front-end tool's step as the last one,
    /// complete, and send the same request again, forever. An empty text part
    /// makes it store the step.
    fn commit_continuation(&mut self, out: &mut Sink) {
        let committed = matches!(&self.state, State::Live(r) if r.committed);
        if self.ctx.message_id.is_none() || committed {
            return;
        }
        if !self.step_open() {
            self.open_step(out);
        }
        let id = self.ctx.ids.next("txt");
        for ty in ["text-start", "text-end"] {
            self.emit(out, chunk_with(ty, "id", &id), None);
        }
    }

    /// A tool result came: content after it belongs to a new step.
    fn step_output(&mut self) {
        if let Some(r) = self.response() {
            if let Step::Open { output, .. } = &mut r.step {
                *output = true;
            }
        }
    }

    fn open_step(&mut self, out: &mut Sink) {
        self.emit(out, chunk("start-step"), None);
        self.set_step(Step::open());
    }

    fn flush_finish_step(&mut self, out: &mut Sink) {
        if let Some(r) = self.response() {
            if matches!(r.step, Step::Closing(_)) {
                if let Step::Closing(extra) = std::mem::replace(&mut r.step, Step::Closed) {
                    write_finish_step(out, extra);
                }
            }
        }
    }

    fn close_step(&mut self, out: &mut Sink) {
        self.flush_finish_step(out);
        if self.step_open() {
            self.emit(out, chunk("finish-step"), None);
            self.set_step(Step::Closed);
        }
    }

    /// Closes the last step of a response that ends; every answer opens
    /// one, or a continuation after a front-end tool would look unanswered
    /// and be re-sent.
    fn end_steps(&mut self, out: &mut Sink) {
        self.commit_continuation(out);
        self.close_step(out);
        if !self.any_step() {
            self.open_step(out);
            self.close_step(out);
        }
    }

    /// Before content that adds a part to the message. Content after tool
    /// results opens a new step (unless a Vercel upstream chose otherwise or
    /// a call's input is still streaming: its part must stay in this step).
    /// `trailer`: content a `RunFinished` carries, which stays in the step
    /// that is closing.
    fn ensure_step(&mut self, out: &mut Sink, from_vercel: bool, trailer: bool) {
        if !trailer {
            self.flush_finish_step(out);
            let output = matches!(self.step(), Some(Step::Open { output: true, .. }));
            if output && !from_vercel && self.open_inputs.is_empty() {
                self.emit(out, chunk("finish-step"), None);
                self.set_step(Step::Closed);
            }
        }
        if !self.step_open() {
            self.open_step(out);
        }
    }

    /// Closes the text and reasoning parts left open (a cut stream).
    fn close_parts(&mut self, out: &mut Sink) {
        for e in self.tracker.closing_events() {
            let c = match &e.kind {
                EventKind::TextEnd { message_id } => chunk_with("text-end", "id", message_id),
                EventKind::ReasoningEnd { message_id } => {
                    chunk_with("reasoning-end", "id", message_id)
                }
                _ => continue,
            };
            self.emit(out, c, None);
            self.tracker.observe(&e);
        }
    }
}

// ---- the run ---------------------------------------------------------------

impl VercelEncoder {
    /// One `start` per response: a later run's metadata still counts.
    fn run_started(&mut self, event: &Event, message_id: Option<&str>, out: &mut Sink) {
        if self.state == State::Fresh {
            self.write_start(out, message_id, Some(event));
        } else if let Some(md) = note(event, "messageMetadata") {
            let mut c = chunk("message-metadata");
            c.insert("messageMetadata".into(), md.clone());
            self.emit(out, c, None);
        }
        self.set_running(true);
        self.run_seq += 1;
        self.tracker.observe(event);
    }

    fn finish_reason(
        &self,
        event: &Event,
        given: Option<&str>,
        outcome: &Outcome,
    ) -> Option<String> {
        if let Some(r) = given {
            return Some(wire::finish_reason(r).to_string());
        }
        if is_vercel(event) {
            return None; // the upstream sent none: write none
        }
        let asks_tools = match outcome {
            Outcome::Interrupt { interrupts } => {
                interrupts.iter().any(|i| i.tool_call_id.is_some())
            }
            Outcome::Success {
                pending_tool_call_ids,
            } => !pending_tool_call_ids.is_empty(),
            _ => false,
        };
        let open_calls = self
            .calls
            .values()
            .any(|c| c.run == self.run_seq && c.input_done && !c.resolved);
        let reason = if asks_tools || open_calls {
            "tool-calls"
        } else if matches!(outcome, Outcome::Interrupt { .. }) {
            "other"
        } else {
            "stop"
        };
        Some(reason.to_string())
    }

    fn run_finished(
        &mut self,
        event: &Event,
        outcome: &Outcome,
        finish_reason: Option<&str>,
        out: &mut Sink,
    ) {
        if let Outcome::Cancelled { reason } = outcome {
            // As the ai package does on abort: nothing is closed.
            self.commit_continuation(out);
            self.flush_finish_step(out);
            let mut c = chunk("abort");
            if let Some(r) = reason {
                c.insert("reason".into(), s(r));
            }
            self.emit(out, c, Some(event));
        } else {
            // The calls whose input is still streaming are complete now.
            for id in self.open_input_ids() {
                self.end_call(out, &id, None);
            }
            if let Outcome::Interrupt { interrupts } = outcome {
                for it in interrupts {
                    self.interrupt(event, it, out);
                }
            }
            self.end_steps(out);
            let mut c = chunk("finish");
            if let Some(r) = self.finish_reason(event, finish_reason, outcome) {
                c.insert("finishReason".into(), Value::String(r));
            }
            self.emit(out, c, Some(event));
        }
        self.set_running(false);
        self.tracker.observe(event);
    }

    /// An interrupt a `RunFinished` carries, inside the step that closes.
    fn interrupt(&mut self, event: &Event, it: &Interrupt, out: &mut Sink) {
        let Some(call_id) = &it.tool_call_id else {
            // No chunk asks a human anything but a tool approval: the
            // question stays in the message.
            self.ensure_step(out, true, true);
            let mut c = chunk_with("data-interrupt", "id", &it.id);
            c.insert(
                "data".into(),
                serde_json::to_value(it).unwrap_or(Value::Null),
            );
            self.emit(out, c, None);
            return;
        };
        self.ensure_known(out, call_id, true);
        let mut c = chunk_with("tool-approval-request", "approvalId", &it.id);
        c.insert("toolCallId".into(), s(call_id));
        if let Some(m) = &it.message {
            c.insert("reason".into(), s(m));
        }
        if let Some(p) = &it.payload {
            c.insert("approvalDescriptor".into(), p.clone());
        }
        if is_vercel(event) {
            for (k, v) in &it.extra {
                c.insert(k.clone(), v.clone());
            }
        }
        self.emit(out, c, None);
    }

    /// The calls whose input is still streaming fail with the run; the
    /// `error` chunk follows, and the step and the message are closed with
    /// reason "error", as the `ai` package's own streams end a failed run.
    fn run_error(&mut self, event: &Event, message: &str, code: Option<&str>, out: &mut Sink) {
        for id in self.open_input_ids() {
            let why = format!("the run failed before the call's input was complete: {message}");
            self.abandon_call(out, &id, &why);
        }
        let mut c = chunk_with("error", "errorText", message);
        if let Some(code) = code {
            c.insert("code".into(), s(code));
        }
        self.emit(out, c, Some(event));
        self.close_step(out);
        self.emit(out, chunk_with("finish", "finishReason", "error"), None);
        self.state = State::Errored;
        self.tracker.observe(event);
    }

    /// The upstream stopped without finishing: close what is open and say
    /// the answer may be incomplete.
    fn finish_cut(&mut self, out: &mut Sink) {
        self.ensure_start(out);
        self.close_parts(out);
        for id in self.open_input_ids() {
            let why = "the stream ended before the call's input was complete";
            self.abandon_call(out, &id, why);
        }
        self.end_steps(out);
        self.emit(
            out,
            chunk_with("finish", "finishReason", "interrupted"),
            None,
        );
        self.set_running(false);
    }

    /// A Vercel step is one model call. Another dialect's steps are not
    /// (LangGraph's are graph nodes): its steps are opened by content and
    /// after tool results (`ensure_step`), so the client's step checks
    /// (`lastAssistantMessageIsComplete...`) see the calls in the last step.
    fn step_started(&mut self, event: &Event, out: &mut Sink) {
        if is_vercel(event) {
            self.emit(out, chunk("start-step"), Some(event));
            self.set_step(Step::open());
        }
    }

    fn step_finished(&mut self, event: &Event, out: &mut Sink) {
        if !is_vercel(event) {
            return;
        }
        let extra: Extra = event
            .extra
            .iter()
            .filter(|(k, _)| !is_marker(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if self.step_open() {
            self.set_step(Step::Closing(extra));
        } else {
            // No step to close: written at once, the state kept.
            write_finish_step(out, extra);
        }
    }
}

// ---- text and reasoning parts ----------------------------------------------

impl VercelEncoder {
    /// Whether the client has the text (or reasoning) part `id` open.
    fn part_open(&self, reasoning: bool, id: &str) -> bool {
        if reasoning {
            self.tracker.reasoning_open(id)
        } else {
            self.tracker.text_open(id)
        }
    }

    /// `text-start`/`reasoning-start`.
    fn part_start(&mut self, event: &Event, reasoning: bool, id: &str, out: &mut Sink) {
        let from_vercel = is_vercel(event);
        let calls_of_another = matches!(
            self.step(),
            Some(Step::Open { calls_of: Some(p), .. }) if p != id
        );
        if !from_vercel && calls_of_another {
            // The calls' results may come late (or only in a snapshot):
            // this is the next model call all the same.
            self.step_output();
        }
        self.ensure_step(out, from_vercel, false);
        let ty = if reasoning {
            "reasoning-start"
        } else {
            "text-start"
        };
        let mut c = chunk_with(ty, "id", id);
        if !from_vercel {
            c.insert("providerMetadata".into(), wire::id_metadata(id));
        }
        self.emit(out, c, Some(event));
        self.tracker.observe(event);
    }

    fn part_delta(
        &mut self,
        event: &Event,
        reasoning: bool,
        id: &str,
        delta: &str,
        out: &mut Sink,
    ) {
        if event.extra_from(Dialect::Vercel).is_some() {
            let ty = if reasoning {
                "reasoning-delta"
            } else {
                "text-delta"
            };
            let mut c = chunk_with(ty, "id", id);
            c.insert("delta".into(), s(delta));
            self.emit(out, c, Some(event));
            return;
        }
        // The hot path: the same bytes as the map above, written straight out.
        self.note_commit();
        out.event(|out| {
            out.extend_from_slice(if reasoning {
                b"{\"type\":\"reasoning-delta\",\"id\":"
            } else {
                b"{\"type\":\"text-delta\",\"id\":"
            });
            babelgate_core::json::write_str(out, id);
            out.extend_from_slice(b",\"delta\":");
            babelgate_core::json::write_str(out, delta);
            out.push(b'}');
        });
    }

    /// `text-end`/`reasoning-end`.
    fn part_end(&mut self, event: &Event, reasoning: bool, id: &str, out: &mut Sink) {
        let ty = if reasoning {
            "reasoning-end"
        } else {
            "text-end"
        };
        self.emit(out, chunk_with(ty, "id", id), Some(event));
        self.tracker.observe(event);
    }
}

// ---- tool calls ------------------------------------------------------------

impl VercelEncoder {
    fn open_input_ids(&self) -> Vec<String> {
        self.open_inputs.ids().map(str::to_string).collect()
    }

    /// `parent`: the upstream message holding the call, kept on the part.
    #[allow(clippy::too_many_arguments)]
    fn start_call(
        &mut self,
        out: &mut Sink,
        id: &str,
        name: &str,
        write: bool,
        event: Option<&Event>,
        trailer: bool,
        parent: Option<&str>,
    ) {
        self.ensure_step(out, event.is_some_and(is_vercel), trailer);
        if write {
            let mut c = chunk_with("tool-input-start", "toolCallId", id);
            c.insert("toolName".into(), s(name));
            if let Some(p) = parent {
                c.insert("providerMetadata".into(), wire::id_metadata(p));
                if let Some(r) = self.response() {
                    if let Step::Open { calls_of, .. } = &mut r.step {
                        *calls_of = Some(p.to_string());
                    }
                }
            }
            self.emit(out, c, event);
        }
        let mut call = Call::new(name, self.run_seq);
        call.start_written = write;
        self.calls.insert(id.to_string(), call);
        self.open_inputs.push(id.to_string(), ());
    }

    /// The call's input is complete: `tool-input-available` with the parsed
    /// arguments (none at all means `{}`), or `tool-input-error` when they
    /// are not JSON. Nothing for a call whose input is complete already (one
    /// the continued message holds, or started again).
    fn end_call(&mut self, out: &mut Sink, id: &str, event: Option<&Event>) {
        let Some(call) = self.calls.get_mut(id) else {
            return;
        };
        if call.input_done {
            return;
        }
        call.input_done = true;
        self.open_inputs.remove_all(id);
        let text = call.args.trim();
        let parsed = if text.is_empty() {
            Ok(json!({}))
        } else {
            serde_json::from_str::<Value>(text)
        };
        let c = match parsed {
            Ok(input) => {
                let mut c = chunk_with("tool-input-available", "toolCallId", id);
                c.insert("toolName".into(), s(&call.name));
                c.insert("input".into(), input);
                c
            }
            Err(e) => {
                call.resolved = true;
                let mut c = chunk_with("tool-input-error", "toolCallId", id);
                c.insert("toolName".into(), s(&call.name));
                c.insert("input".into(), Value::String(call.args.clone()));
                let why = format!("the tool call's arguments are not valid JSON: {e}");
                c.insert("errorText".into(), Value::String(why));
                c
            }
        };
        self.emit(out, c, event);
    }

    /// A call whose input never completed, closed as failed (the run ended or
    /// failed first): it must not reach the client's `onToolCall`.
    fn abandon_call(&mut self, out: &mut Sink, id: &str, why: &str) {
        let Some(call) = self.calls.get_mut(id) else {
            return;
        };
        if call.input_done {
            return;
        }
        call.input_done = true;
        call.resolved = true;
        self.open_inputs.remove_all(id);
        let mut c = chunk_with("tool-input-error", "toolCallId", id);
        c.insert("toolName".into(), s(&call.name));
        c.insert("input".into(), input_from_args(&call.args));
        c.insert("errorText".into(), s(why));
        self.emit(out, c, None);
    }

    /// Before a chunk that refers to a call (output, error, denial, approval):
    /// the client must have its tool part with its input. A call never seen
    /// is announced under the name `unknown`, unless the continued answer
    /// holds it (the client looks calls up in its whole message).
    fn ensure_known(&mut self, out: &mut Sink, id: &str, trailer: bool) {
        match self.calls.get(id) {
            None => {
                if !self.held_calls.contains(id) {
                    self.start_call(out, id, UNKNOWN_TOOL_NAME, true, None, trailer, None);
                    self.end_call(out, id, None);
                }
            }
            Some(c) if !c.input_done => self.end_call(out, id, None),
            Some(_) => {}
        }
    }

    fn resolve(&mut self, id: &str) {
        if let Some(c) = self.calls.get_mut(id) {
            c.resolved = true;
        }
        self.step_output();
    }

    /// One tool part per call: a start of a call the response has a part
    /// for already writes nothing (one started again after its input ended,
    /// or one the continued message holds).
    fn tool_call_start(
        &mut self,
        event: &Event,
        id: &str,
        name: &str,
        parent: Option<&str>,
        out: &mut Sink,
    ) {
        if self.calls.contains_key(id) {
            return;
        }
        if self.held_calls.contains(id) {
            // A call the continued message holds already (an upstream
            // resuming after an interrupt starts it again): a second part
            // would show it twice, once without its result. Its input is
            // complete; its result may follow.
            let mut call = Call::new(name, self.run_seq);
            call.start_written = true;
            call.input_done = true;
            self.calls.insert(id.to_string(), call);
            return;
        }
        let write = !event.synthesized_by(Dialect::Vercel);
        let parent = parent.filter(|_| !is_vercel(event));
        self.start_call(out, id, name, write, Some(event), false, parent);
    }

    /// Arguments after the input was complete cannot be shown; arguments
    /// the Vercel decoder made up (from a bare `tool-input-available`) are
    /// only kept.
    fn tool_call_args(&mut self, event: &Event, id: &str, delta: &str, out: &mut Sink) {
        let Some(call) = self.calls.get_mut(id) else {
            return;
        };
        if call.input_done {
            return;
        }
        call.args.push_str(delta);
        if event.synthesized_by(Dialect::Vercel) {
            return;
        }
        if !call.start_written {
            call.start_written = true;
            let mut c = chunk_with("tool-input-start", "toolCallId", id);
            c.insert("toolName".into(), s(&call.name));
            self.emit(out, c, None);
        }
        if event.extra_from(Dialect::Vercel).is_none() {
            self.note_commit();
            out.event(|b| {
                wire::FAST.write(event, b);
            });
            return;
        }
        let mut c = chunk_with("tool-input-delta", "toolCallId", id);
        c.insert("inputTextDelta".into(), s(delta));
        self.emit(out, c, Some(event));
    }

    fn tool_call_end(&mut self, event: &Event, id: &str, out: &mut Sink) {
        if event.synthesized_by(Dialect::Vercel) {
            // Made up for a `tool-input-error` (the one end of a Vercel
            // call that is not `tool-input-available`): the ToolCallError
            // that follows writes it.
            if let Some(call) = self.calls.get_mut(id) {
                call.input_done = true;
            }
            self.open_inputs.remove_all(id);
        } else {
            self.end_call(out, id, Some(event));
        }
    }

    fn tool_result(
        &mut self,
        event: &Event,
        id: &str,
        content: &Value,
        message_id: Option<&str>,
        out: &mut Sink,
    ) {
        let from_vercel = is_vercel(event);
        self.ensure_known(out, id, false);
        let mut c = chunk_with("tool-output-available", "toolCallId", id);
        c.insert("output".into(), output_value(content, from_vercel));
        if let Some(mid) = message_id.filter(|_| !from_vercel) {
            c.insert("providerMetadata".into(), wire::id_metadata(mid));
            if let Some(call) = self.calls.get_mut(id) {
                call.result_id = Some(mid.to_string());
            }
        }
        self.emit(out, c, Some(event));
        // (A preliminary output is no result: kept whole, it comes as
        // `Unknown`.)
        self.resolve(id);
    }

    fn tool_error(
        &mut self,
        event: &Event,
        id: &str,
        error: &str,
        input_invalid: bool,
        out: &mut Sink,
    ) {
        if input_invalid {
            return self.input_error(event, id, error, out);
        }
        self.ensure_known(out, id, false);
        let mut c = chunk_with("tool-output-error", "toolCallId", id);
        c.insert("errorText".into(), s(error));
        self.emit(out, c, Some(event));
        self.resolve(id);
    }

    /// `tool-input-error`, which makes the part itself if need be.
    fn input_error(&mut self, event: &Event, id: &str, error: &str, out: &mut Sink) {
        if !self.calls.contains_key(id) {
            self.start_call(out, id, UNKNOWN_TOOL_NAME, false, None, false, None);
        }
        if let Some(call) = self.calls.get_mut(id) {
            call.input_done = true;
            call.resolved = true;
            let mut c = chunk_with("tool-input-error", "toolCallId", id);
            c.insert("toolName".into(), s(&call.name));
            c.insert("input".into(), input_from_args(&call.args));
            c.insert("errorText".into(), s(error));
            self.emit(out, c, Some(event));
        }
        self.open_inputs.remove_all(id);
        self.step_output();
    }

    fn tool_denied(&mut self, event: &Event, id: &str, out: &mut Sink) {
        self.ensure_known(out, id, false);
        let c = chunk_with("tool-output-denied", "toolCallId", id);
        self.emit(out, c, Some(event));
        self.resolve(id);
    }

    /// A snapshot of the conversation settles the calls of this response it
    /// holds results for: a call the stream left open gets its result (an
    /// upstream may say a tool failed only there: ag-ui-langgraph), and a
    /// result written under another message id is written again with the
    /// snapshot's id, the one the upstream keeps.
    fn settle_from_snapshot(&mut self, out: &mut Sink, messages: &[Message]) {
        for m in messages.iter().filter(|m| m.role == Role::Tool) {
            let Some(call_id) = m.tool_call_id.as_deref() else {
                continue;
            };
            let Some(call) = self.calls.get(call_id) else {
                continue;
            };
            if !call.input_done || (call.resolved && call.result_id.as_deref() == Some(&m.id)) {
                continue;
            }
            let fresh = !call.resolved;
            let text = m.text();
            let mut c = match &m.error {
                Some(error) => {
                    let shown = if text.is_empty() { error } else { &text };
                    chunk_with("tool-output-error", "errorText", shown)
                }
                None => {
                    let mut c = chunk("tool-output-available");
                    c.insert("output".into(), output_value(&Value::String(text), false));
                    c
                }
            };
            c.insert("toolCallId".into(), s(call_id));
            c.insert("providerMetadata".into(), wire::id_metadata(&m.id));
            self.emit(out, c, None);
            if let Some(call) = self.calls.get_mut(call_id) {
                call.result_id = Some(m.id.clone());
            }
            if fresh {
                self.resolve(call_id);
            }
        }
    }
}

// ---- parts carried as data-<name>, sources, files ---------------------------

impl VercelEncoder {
    /// A `data-<name>` part. From a Vercel upstream its `id`/`transient` come
    /// back from the extras; otherwise `id` and `transient` are as given.
    fn data_part(
        &mut self,
        out: &mut Sink,
        event: &Event,
        name: &str,
        data: Value,
        id: Option<&str>,
        transient: bool,
    ) {
        let from_vercel = is_vercel(event);
        let transient_now = if from_vercel {
            wire_transient(event)
        } else {
            transient
        };
        if !transient_now {
            self.ensure_step(out, from_vercel, false);
        }
        let mut c = chunk(&format!("data-{name}"));
        if !from_vercel {
            if let Some(id) = id {
                c.insert("id".into(), s(id));
            }
        }
        c.insert("data".into(), data);
        if !from_vercel && transient {
            c.insert("transient".into(), Value::Bool(true));
        }
        self.emit(out, c, Some(event));
    }

    /// A core event with no chunk of its own, as a transient data part
    /// holding its fields.
    fn kind_part(&mut self, event: &Event, out: &mut Sink) {
        let name = wire::kind_part_name(&event.kind).unwrap_or("unknown");
        self.data_part(out, event, name, wire::kind_fields(&event.kind), None, true);
    }

    fn state_part(
        &mut self,
        out: &mut Sink,
        event: &Event,
        data: Value,
        envelope_delta: Option<&Value>,
    ) {
        if is_vercel(event) {
            // Written back in the form it came in.
            let envelope = note(event, marker::FORM).is_some();
            let (name, data) = match (envelope, envelope_delta) {
                (true, Some(patch)) => ("state", json!({"type": "delta", "delta": patch})),
                (true, None) => ("state", json!({"type": "snapshot", "snapshot": data})),
                (false, Some(patch)) => ("state-delta", patch.clone()),
                (false, None) => ("state", data),
            };
            self.data_part(out, event, name, data, None, false);
        } else {
            self.data_part(out, event, "state", data, Some(STATE_PART_ID), false);
        }
    }

    fn state_snapshot(&mut self, event: &Event, snapshot: &Value, out: &mut Sink) {
        self.state_value = snapshot.clone();
        self.state_part(out, event, snapshot.clone(), None);
    }

    /// The state keeps one live part: a delta that applies writes the whole
    /// state again.
    fn state_delta(&mut self, event: &Event, patch: &Value, out: &mut Sink) {
        // Unchanged when the patch does not apply.
        let applied = apply_patch(&mut self.state_value, patch);
        if is_vercel(event) {
            self.state_part(out, event, Value::Null, Some(patch));
        } else if applied && event.extra_from(Dialect::Vercel).is_none() {
            // What state_part writes for this, without copying the state
            // into a chunk map first.
            self.ensure_step(out, false, false);
            self.note_commit();
            let state = &self.state_value;
            out.try_event(|out| {
                out.extend_from_slice(b"{\"type\":\"data-state\",\"id\":");
                babelgate_core::json::write_str(out, STATE_PART_ID);
                out.extend_from_slice(b",\"data\":");
                let written = serde_json::to_writer(&mut *out, state).is_ok();
                out.push(b'}');
                written
            });
        } else if applied {
            let full = self.state_value.clone();
            self.state_part(out, event, full, None);
        } else {
            // The patch does not fit the state this stream built: the
            // client gets the patch itself, shown but not kept.
            self.data_part(out, event, "state-delta", patch.clone(), None, true);
        }
    }

    fn messages_snapshot(&mut self, event: &Event, messages: &[Message], out: &mut Sink) {
        if !is_vercel(event) {
            self.settle_from_snapshot(out, messages);
        }
        let data = json!({"messages": core_to_ui_messages(messages)});
        self.data_part(out, event, "messages-snapshot", data, None, true);
    }

    fn activity_snapshot(
        &mut self,
        event: &Event,
        message_id: &str,
        content: &Value,
        out: &mut Sink,
    ) {
        self.activities
            .insert(message_id.to_string(), content.clone());
        let data = wire::kind_fields(&event.kind);
        let id = Some(message_id);
        self.data_part(out, event, "activity-snapshot", data, id, false);
    }

    /// A delta that applies to the activity replaces its part (same id) in
    /// place; otherwise the delta itself is shown, not kept.
    fn activity_delta(
        &mut self,
        event: &Event,
        message_id: &str,
        activity_type: &str,
        patch: &Value,
        out: &mut Sink,
    ) {
        let applied = match (is_vercel(event), self.activities.get(message_id)) {
            (false, Some(content)) => {
                let mut next = content.clone();
                apply_patch(&mut next, patch).then_some(next)
            }
            _ => None,
        };
        let Some(content) = applied else {
            let data = wire::kind_fields(&event.kind);
            return self.data_part(out, event, "activity-delta", data, None, true);
        };
        self.activities
            .insert(message_id.to_string(), content.clone());
        let snapshot = EventKind::ActivitySnapshot {
            message_id: message_id.to_string(),
            activity_type: activity_type.to_string(),
            content,
            replace: None,
        };
        let data = wire::kind_fields(&snapshot);
        let id = Some(message_id);
        self.data_part(out, event, "activity-snapshot", data, id, false);
    }

    fn source(&mut self, event: &Event, out: &mut Sink) {
        let EventKind::Source {
            source_kind,
            source_id,
            url,
            title,
            media_type,
            filename,
        } = &event.kind
        else {
            return;
        };
        self.ensure_step(out, is_vercel(event), false);
        let c = source_chunk(
            source_kind,
            source_id,
            url.as_deref(),
            title.as_deref(),
            media_type.as_deref(),
            filename.as_deref(),
        );
        self.emit(out, c, Some(event));
    }

    fn file(&mut self, event: &Event, url: &str, media_type: &str, out: &mut Sink) {
        self.ensure_step(out, is_vercel(event), false);
        let ty = match note(event, marker::TYPE).and_then(Value::as_str) {
            Some("reasoning-file") => "reasoning-file",
            _ => "file",
        };
        let mut c = chunk_with(ty, "url", url);
        c.insert("mediaType".into(), s(media_type));
        self.emit(out, c, Some(event));
    }

    fn data(&mut self, event: &Event, out: &mut Sink) {
        let EventKind::Data {
            name,
            id,
            data,
            transient,
            ..
        } = &event.kind
        else {
            return;
        };
        if !*transient {
            self.ensure_step(out, is_vercel(event), false);
        }
        let mut c = chunk(&format!("data-{name}"));
        if let Some(id) = id {
            c.insert("id".into(), s(id));
        }
        c.insert("data".into(), data.clone());
        if *transient {
            c.insert("transient".into(), Value::Bool(true));
        }
        self.emit(out, c, Some(event));
    }

    /// Metadata that came inside `start`/`finish` (lifted out, so made up)
    /// is written there.
    fn message_metadata(&mut self, event: &Event, metadata: &Value, out: &mut Sink) {
        if event.synthesized_by(Dialect::Vercel) {
            return;
        }
        let mut c = chunk("message-metadata");
        c.insert("messageMetadata".into(), metadata.clone());
        self.emit(out, c, Some(event));
    }

    /// Whether the client takes `raw`, a Vercel chunk kept unknown, as it
    /// came: a type it knows, the fields its schema asks, and for an answer
    /// to an approval, a request in the message it is assembling (one
    /// written here, or one the continued answer holds).
    fn client_accepts(&self, raw: &Value) -> bool {
        let ty = raw.get("type").and_then(Value::as_str).unwrap_or_default();
        wire::is_kept_whole(ty, raw)
            && wire::client_accepts(raw)
            && (ty != "tool-approval-response"
                || raw
                    .get("approvalId")
                    .and_then(Value::as_str)
                    .is_some_and(|id| self.approvals.contains(id)))
    }

    /// Opaque to the shape stage, run or not: written after `start`, as it
    /// came when the client takes it, else wrapped (the client rejects
    /// unknown chunk types).
    fn unknown(&mut self, event: &Event, raw: &Value, out: &mut Sink) {
        self.ensure_start(out);
        if is_vercel(event) && self.client_accepts(raw) {
            // A chunk a 7.x client knows, from a 7.x upstream.
            self.before_kept_chunk(raw, out);
            out.json(raw);
        } else {
            let mut c = chunk("data-unknown");
            c.insert("data".into(), raw.clone());
            c.insert("transient".into(), Value::Bool(true));
            self.emit(out, c, None);
        }
    }

    /// What a chunk kept whole needs written before it.
    fn before_kept_chunk(&mut self, raw: &Value, out: &mut Sink) {
        let call = raw.get("toolCallId").and_then(Value::as_str);
        match raw.get("type").and_then(Value::as_str).unwrap_or_default() {
            "custom" | "steering-message" => self.ensure_step(out, true, false),
            // Progress of a call: its part first.
            "tool-output-available" => self.ensure_known(out, call.unwrap_or_default(), false),
            "tool-approval-request" => {
                // One the stream answers itself: its call first.
                self.ensure_known(out, call.unwrap_or_default(), false);
                let id = raw.get("approvalId").and_then(Value::as_str);
                self.approvals.insert(id.unwrap_or_default().to_string());
            }
            _ => {}
        }
    }
}

// ---- events to chunks --------------------------------------------------------

impl VercelEncoder {
    fn run_event(&mut self, event: &Event, out: &mut Sink) {
        match &event.kind {
            EventKind::RunStarted { message_id, .. } => {
                self.run_started(event, message_id.as_deref(), out)
            }
            EventKind::RunFinished {
                outcome,
                finish_reason,
                ..
            } => self.run_finished(event, outcome, finish_reason.as_deref(), out),
            EventKind::RunError { message, code } => {
                self.run_error(event, message, code.as_deref(), out)
            }
            EventKind::StepStarted { .. } => self.step_started(event, out),
            EventKind::StepFinished { .. } => self.step_finished(event, out),
            _ => {}
        }
    }

    fn part_event(&mut self, event: &Event, out: &mut Sink) {
        use EventKind as K;
        match &event.kind {
            K::TextStart { message_id, .. } => self.part_start(event, false, message_id, out),
            K::ReasoningStart { message_id } => self.part_start(event, true, message_id, out),
            K::TextDelta { message_id, delta } => {
                self.part_delta(event, false, message_id, delta, out)
            }
            K::ReasoningDelta { message_id, delta } => {
                self.part_delta(event, true, message_id, delta, out)
            }
            K::TextEnd { message_id } => self.part_end(event, false, message_id, out),
            K::ReasoningEnd { message_id } => self.part_end(event, true, message_id, out),
            // Vercel has no reasoning phases; the reasoning parts inside are written.
            K::ReasoningPhaseStart { .. } | K::ReasoningPhaseEnd { .. } => {}
            K::ReasoningEncrypted { .. } => {
                let data = wire::kind_fields(&event.kind);
                self.data_part(out, event, "reasoning-encrypted", data, None, true);
            }
            _ => {}
        }
    }

    fn tool_event(&mut self, event: &Event, out: &mut Sink) {
        use EventKind as K;
        match &event.kind {
            K::ToolCallStart {
                tool_call_id,
                tool_name,
                parent_message_id,
            } => {
                let parent = parent_message_id.as_deref();
                self.tool_call_start(event, tool_call_id, tool_name, parent, out)
            }
            K::ToolCallArgs {
                tool_call_id,
                delta,
            } => self.tool_call_args(event, tool_call_id, delta, out),
            K::ToolCallEnd { tool_call_id } => self.tool_call_end(event, tool_call_id, out),
            K::ToolCallResult {
                tool_call_id,
                content,
                message_id,
            } => self.tool_result(event, tool_call_id, content, message_id.as_deref(), out),
            K::ToolCallError {
                tool_call_id,
                error,
                input_invalid,
            } => self.tool_error(event, tool_call_id, error, *input_invalid, out),
            K::ToolCallDenied { tool_call_id } => self.tool_denied(event, tool_call_id, out),
            _ => {}
        }
    }

    fn other_event(&mut self, event: &Event, out: &mut Sink) {
        use EventKind as K;
        match &event.kind {
            K::StateSnapshot { snapshot } => self.state_snapshot(event, snapshot, out),
            K::StateDelta { patch } => self.state_delta(event, patch, out),
            K::MessagesSnapshot { messages } => self.messages_snapshot(event, messages, out),
            K::ActivitySnapshot {
                message_id,
                content,
                ..
            } => self.activity_snapshot(event, message_id, content, out),
            K::ActivityDelta {
                message_id,
                activity_type,
                patch,
            } => self.activity_delta(event, message_id, activity_type, patch, out),
            K::Source { .. } => self.source(event, out),
            K::File { url, media_type } => self.file(event, url, media_type, out),
            K::Data { .. } => self.data(event, out),
            K::Custom { name, value } => {
                let data = json!({"name": name, "value": value});
                self.data_part(out, event, "custom", data, None, true);
            }
            K::MessageMetadata { metadata } => self.message_metadata(event, metadata, out),
            K::CollabStart { .. }
            | K::CollabContent { .. }
            | K::CollabEnd { .. }
            | K::SubagentStarted { .. }
            | K::SubagentFinished { .. }
            | K::SubagentError { .. }
            | K::Raw { .. } => self.kind_part(event, out),
            K::Unknown { raw } => self.unknown(event, raw, out),
            _ => {}
        }
    }
}

impl Encoder for VercelEncoder {
    fn dialect(&self) -> Dialect {
        Dialect::Vercel
    }

    /// Maps one shaped event (the shape stage keeps the run first, starts
    /// before deltas, ends of open things only, nothing after an error).
    fn encode_to(&mut self, event: &Event, out: &mut Sink) {
        use EventKind as K;
        if !matches!(event.kind, K::RunFinished { .. }) {
            // Written lazily, right before whatever comes next.
            self.flush_finish_step(out);
        }
        match &event.kind {
            K::RunStarted { .. }
            | K::RunFinished { .. }
            | K::RunError { .. }
            | K::StepStarted { .. }
            | K::StepFinished { .. } => self.run_event(event, out),
            K::TextStart { .. }
            | K::TextDelta { .. }
            | K::TextEnd { .. }
            | K::ReasoningStart { .. }
            | K::ReasoningDelta { .. }
            | K::ReasoningEnd { .. }
            | K::ReasoningPhaseStart { .. }
            | K::ReasoningPhaseEnd { .. }
            | K::ReasoningEncrypted { .. } => self.part_event(event, out),
            K::ToolCallStart { .. }
            | K::ToolCallArgs { .. }
            | K::ToolCallEnd { .. }
            | K::ToolCallResult { .. }
            | K::ToolCallError { .. }
            | K::ToolCallDenied { .. } => self.tool_event(event, out),
            _ => self.other_event(event, out),
        }
    }

    /// A cut stream (the upstream stopped without finishing its run) is
    /// closed here: parts and inputs left open, then `finish` with reason
    /// "interrupted".
    fn finish_to(&mut self, out: &mut Sink) {
        match &self.state {
            State::Done => return,
            State::Fresh | State::Live(Response { running: true, .. }) => self.finish_cut(out),
            State::Live(_) | State::Errored => {}
        }
        out.done();
        self.state = State::Done;
    }

    /// After partial output, unshaped: what is open is closed first, as the
    /// shape stage would before an error. Nothing but `[DONE]` after the
    /// response ended with an error already.
    fn fail_to(&mut self, message: &str, code: Option<&str>, out: &mut Sink) {
        if matches!(self.state, State::Fresh | State::Live(_)) {
            let event = Event::new(EventKind::RunError {
                message: message.to_string(),
                code: code.map(str::to_string),
            });
            self.flush_finish_step(out);
            self.ensure_start(out);
            self.close_parts(out);
            self.run_error(&event, message, code, out);
        }
        self.finish_to(out);
    }
    /// The `ai` client fails on a chunk type it does not know, even from a
    /// Vercel upstream: such a frame is wrapped (see `EventKind::Unknown`
    /// above) rather than passed through. It also throws on a text or
    /// reasoning delta or end whose part it has no start for ("Received
    /// text-delta for missing text part"), on tool input of a call it was
    /// never told of, and on an output, error or denial of a call its
    /// message does not hold. Such a frame is written as mapped: the
    /// decoder starts what a delta needs, the encoder announces a call
    /// before its output (as on any route, as `unknown`); a stray end
    /// never reaches it (the shape stage drops ends of what is not open).
    fn verbatim(&self, event: &Event) -> bool {
        if matches!(self.state, State::Errored | State::Done) {
            // The run failed (an `error` chunk ended it): as on every route,
            // nothing of it follows. Frames the decoder reads as nothing
            // (the closing `finish-step` and `finish` of a failed run) still
            // pass as received.
            return false;
        }
        match &event.kind {
            EventKind::Unknown { .. } => false,
            EventKind::TextDelta { message_id, .. } | EventKind::TextEnd { message_id } => {
                self.part_open(false, message_id)
            }
            EventKind::ReasoningDelta { message_id, .. }
            | EventKind::ReasoningEnd { message_id } => self.part_open(true, message_id),
            EventKind::ToolCallArgs { tool_call_id, .. } => self.calls.contains_key(tool_call_id),
            // An output, error or denial of a call the client's message
            // lacks ("No tool invocation found"): announced first.
            EventKind::ToolCallResult { tool_call_id, .. }
            | EventKind::ToolCallError { tool_call_id, .. }
            | EventKind::ToolCallDenied { tool_call_id } => {
                self.calls.contains_key(tool_call_id) || self.held_calls.contains(tool_call_id)
            }
            _ => true,
        }
    }

    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        HEADERS
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use babelgate_core::Interrupt;
    use babelgate_core::Role;

    pub(crate) fn run_started() -> EventKind {
        EventKind::RunStarted {
            thread_id: Some("thread-1".into()),
            run_id: Some("run-1".into()),
            parent_run_id: None,
            message_id: None,
            input: None,
        }
    }

    pub(crate) fn run_finished(outcome: Outcome) -> EventKind {
        EventKind::RunFinished {
            thread_id: Some("thread-1".into()),
            run_id: Some("run-1".into()),
            message_id: None,
            result: None,
            outcome,
            finish_reason: None,
            usage: None,
        }
    }

    pub(crate) fn text(id: &str, deltas: &[&str]) -> Vec<EventKind> {
        let mut v = vec![EventKind::text_start(id)];
        v.extend(deltas.iter().map(|d| EventKind::TextDelta {
            message_id: id.into(),
            delta: (*d).into(),
        }));
        v.push(EventKind::text_end(id));
        v
    }

    pub(crate) fn tool(id: &str, name: &str, deltas: &[&str]) -> Vec<EventKind> {
        let mut v = vec![EventKind::ToolCallStart {
            tool_call_id: id.into(),
            tool_name: name.into(),
            parent_message_id: Some("msg-1".into()),
        }];
        v.extend(deltas.iter().map(|d| EventKind::ToolCallArgs {
            tool_call_id: id.into(),
            delta: (*d).into(),
        }));
        v.push(EventKind::ToolCallEnd {
            tool_call_id: id.into(),
        });
        v
    }

    pub(crate) fn result(id: &str, content: Value) -> EventKind {
        EventKind::ToolCallResult {
            tool_call_id: id.into(),
            message_id: Some("msg-tool".into()),
            content,
        }
    }

    /// Through the shape stage, as on every translated route.
    fn encode_with(ctx: EncodeContext, events: &[EventKind]) -> String {
        let mut e = VercelEncoder::new(ctx);
        let mut out = Vec::new();
        let events: Vec<Event> = events.iter().cloned().map(Event::new).collect();
        for ev in &babelgate_core::shape::Shaper::shape_all(&events) {
            e.encode(ev, &mut out);
        }
        e.finish(&mut out);
        e.finish(&mut out); // idempotent
        String::from_utf8(out).unwrap()
    }

    fn encode(events: &[EventKind]) -> String {
        encode_with(EncodeContext::deterministic(), events)
    }

    /// The expected stream from one JSON chunk per line, plus [DONE].
    fn stream(chunks: &[&str]) -> String {
        let mut s: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        s.push_str("data: [DONE]\n\n");
        s
    }

    /// Scenarios in the shapes the other dialects' decoders produce; the exact
    /// tests below pin their output and `dump_client_corpus` hands them to
    /// the real client.
    pub(crate) fn corpus() -> Vec<(&'static str, EncodeContext, Vec<EventKind>)> {
        let det = EncodeContext::deterministic;
        let mut v = Vec::new();
        let mut server_tool = vec![run_started()];
        server_tool.extend(tool("tc-1", "get_weather", &["{\"city\":", "\"北京\"}"]));
        server_tool.push(result(
            "tc-1",
            json!("{\"city\":\"北京\",\"temperature\":22}"),
        ));
        server_tool.extend(text("msg-2", &["北京今天晴"]));
        server_tool.push(run_finished(Outcome::Unspecified));
        v.push(("server_tool", det(), server_tool));

        let mut frontend = vec![run_started()];
        frontend.extend(text("msg-1", &["Sure."]));
        frontend.extend(tool(
            "tc-1",
            "change_background",
            &["{\"col", "or\":\"#ff", "0000\"}"],
        ));
        frontend.push(run_finished(Outcome::Unspecified));
        v.push(("frontend_tool", det(), frontend));

        // the request after the browser ran the tool continues message a1
        let mut cont_ctx = det();
        cont_ctx.message_id = Some("msg-1".into());
        let mut cont = vec![run_started()];
        cont.extend(text("msg-3", &["Done, it is red now."]));
        cont.push(run_finished(Outcome::Unspecified));
        v.push(("continuation", cont_ctx.clone(), cont));
        // the agent says nothing more after the tool
        v.push((
            "continuation_empty",
            cont_ctx,
            vec![run_started(), run_finished(Outcome::Unspecified)],
        ));

        let mut hitl = vec![run_started()];
        hitl.extend(tool("tc-1", "confirm_action", &["{\"path\":\"/tmp/x\"}"]));
        hitl.push(run_finished(Outcome::Interrupt {
            interrupts: vec![Interrupt {
                id: "int-1".into(),
                reason: "confirmation".into(),
                message: Some("Delete /tmp/x?".into()),
                tool_call_id: Some("tc-1".into()),
                payload: None,
                extra: Extra::new(),
            }],
        }));
        v.push(("hitl_confirm", det(), hitl));

        let form = vec![
            run_started(),
            run_finished(Outcome::Interrupt {
                interrupts: vec![Interrupt {
                    id: "int-2".into(),
                    reason: "input_required".into(),
                    message: Some("Which city?".into()),
                    tool_call_id: None,
                    payload: Some(json!({"type": "string"})),
                    extra: Extra::new(),
                }],
            }),
        ];
        v.push(("interrupt_form", det(), form));

        let mut parallel = vec![run_started()];
        parallel.extend([
            EventKind::ToolCallStart {
                tool_call_id: "a".into(),
                tool_name: "get_weather".into(),
                parent_message_id: None,
            },
            EventKind::ToolCallStart {
                tool_call_id: "b".into(),
                tool_name: "get_time".into(),
                parent_message_id: None,
            },
            EventKind::ToolCallArgs {
                tool_call_id: "a".into(),
                delta: "{\"city\":".into(),
            },
            EventKind::ToolCallArgs {
                tool_call_id: "b".into(),
                delta: "{}".into(),
            },
            EventKind::ToolCallArgs {
                tool_call_id: "a".into(),
                delta: "\"Paris\"}".into(),
            },
            EventKind::ToolCallEnd {
                tool_call_id: "a".into(),
            },
            result("a", json!({"t": 18})),
            EventKind::ToolCallEnd {
                tool_call_id: "b".into(),
            },
            result("b", json!("14:05")),
            run_finished(Outcome::Unspecified),
        ]);
        v.push(("parallel_tools", det(), parallel));

        let state = vec![
            run_started(),
            EventKind::StateSnapshot {
                snapshot: json!({"counter": 0, "items": ["a"]}),
            },
            EventKind::StateDelta {
                patch: json!([{"op": "add", "path": "/items/-", "value": "b"}, {"op": "replace", "path": "/counter", "value": 1}]),
            },
            EventKind::StateDelta {
                patch: json!([{"op": "remove", "path": "/nope"}]),
            },
            run_finished(Outcome::Unspecified),
        ];
        v.push(("state", det(), state));

        let mut cut = vec![run_started()];
        let mut t = text("msg-1", &["This answer is cut ", "off"]);
        t.pop();
        cut.extend(t);
        cut.extend(tool("tc-9", "half", &["{\"a\":"]).into_iter().take(2));
        v.push(("cut_mid_message", det(), cut));

        let mut err = vec![run_started()];
        let mut t = text("msg-1", &["Let me look"]);
        t.pop();
        err.extend(t);
        err.push(EventKind::RunError {
            message: "upstream model timed out".into(),
            code: Some("UPSTREAM_TIMEOUT".into()),
        });
        err.push(EventKind::text_delta("msg-1", "lost"));
        v.push(("run_error", det(), err));

        let reasoning = vec![
            run_started(),
            EventKind::ReasoningPhaseStart {
                message_id: "span".into(),
            },
            EventKind::ReasoningDelta {
                message_id: "r1".into(),
                delta: "thinking".into(),
            },
            EventKind::ReasoningEnd {
                message_id: "r1".into(),
            },
            EventKind::ReasoningPhaseEnd {
                message_id: "span".into(),
            },
            EventKind::ReasoningEncrypted {
                subtype: "message".into(),
                entity_id: "r1".into(),
                value: "enc".into(),
            },
            EventKind::text_delta("m", "Hello"),
            EventKind::text_end("m"),
            EventKind::text_end("m"),
            EventKind::text_delta("m", " again"),
            run_finished(Outcome::Unspecified),
        ];
        v.push(("reasoning_and_shorthand", det(), reasoning));

        let misc = vec![
            run_started(),
            EventKind::Custom {
                name: "progress".into(),
                value: json!({"percent": 50}),
            },
            EventKind::Raw {
                event: json!({"provider": "acme"}),
                source: Some("acme-llm".into()),
            },
            EventKind::StepStarted {
                name: Some("outer".into()),
            },
            EventKind::StepStarted {
                name: Some("inner".into()),
            },
            EventKind::Source {
                source_kind: SourceKind::Url,
                source_id: "s1".into(),
                url: Some("https://example.com".into()),
                title: None,
                media_type: None,
                filename: None,
            },
            EventKind::Source {
                source_kind: SourceKind::Document,
                source_id: "s2".into(),
                url: None,
                title: None,
                media_type: None,
                filename: Some("a.pdf".into()),
            },
            EventKind::File {
                url: "https://example.com/a.png".into(),
                media_type: "image/png".into(),
            },
            EventKind::Data {
                name: "weather".into(),
                id: Some("w1".into()),
                message_id: None,
                data: json!({"t": 22}),
                transient: false,
            },
            EventKind::MessageMetadata {
                metadata: json!({"model": "acme-1"}),
            },
            EventKind::StepFinished {
                name: Some("inner".into()),
            },
            EventKind::StepFinished {
                name: Some("outer".into()),
            },
            EventKind::ActivitySnapshot {
                message_id: "act-1".into(),
                activity_type: "plan".into(),
                content: json!({"steps": ["a"]}),
                replace: None,
            },
            EventKind::ActivityDelta {
                message_id: "act-1".into(),
                activity_type: "plan".into(),
                patch: json!([{"op": "add", "path": "/steps/-", "value": "b"}]),
            },
            EventKind::CollabStart {
                message_id: "c1".into(),
                from: Some("planner".into()),
                to: Some("coder".into()),
            },
            EventKind::CollabContent {
                message_id: "c1".into(),
                delta: json!({"task": {"id": "t1", "name": "write"}}),
            },
            EventKind::CollabEnd {
                message_id: "c1".into(),
            },
            EventKind::SubagentStarted {
                subagent_run_id: "sa".into(),
                name: "coder".into(),
                description: None,
            },
            EventKind::SubagentFinished {
                subagent_run_id: "sa".into(),
                result: Some(json!("ok")),
                outcome: None,
            },
            EventKind::SubagentError {
                subagent_run_id: "sb".into(),
                message: "x".into(),
                code: None,
            },
            EventKind::MessagesSnapshot {
                messages: vec![babelgate_core::request::Message::text_message(
                    "u1",
                    Role::User,
                    "hi",
                )],
            },
            EventKind::Unknown {
                raw: json!({"type": "FUTURE_EVENT", "x": 1}),
            },
            result("never-seen", json!({"ok": true})),
            EventKind::ToolCallError {
                tool_call_id: "never-seen-2".into(),
                error: "failed".into(),
                input_invalid: false,
            },
            EventKind::ToolCallDenied {
                tool_call_id: "never-seen-3".into(),
            },
            EventKind::ToolCallArgs {
                tool_call_id: "no-start".into(),
                delta: "{not json".into(),
            },
            EventKind::ToolCallEnd {
                tool_call_id: "no-start".into(),
            },
            run_finished(Outcome::Success {
                pending_tool_call_ids: vec![],
            }),
        ];
        v.push(("everything_else", det(), misc));

        let two_runs = {
            let mut r = vec![run_started()];
            r.extend(text("m1", &["one"]));
            r.push(run_finished(Outcome::Unspecified));
            r.push(run_started());
            r.extend(text("m2", &["two"]));
            r.push(run_finished(Outcome::Cancelled {
                reason: Some("user stop".into()),
            }));
            r
        };
        v.push(("two_runs", det(), two_runs));
        v.push(("empty", det(), vec![]));
        v.push((
            "started_and_finished",
            det(),
            vec![run_started(), run_finished(Outcome::Unspecified)],
        ));
        v
    }

    fn corpus_output(name: &str) -> String {
        let (_, ctx, events) = corpus().into_iter().find(|(n, _, _)| *n == name).unwrap();
        encode_with(ctx, &events)
    }

    #[test]
    fn server_tool_result_then_text_opens_a_new_step() {
        assert_eq!(
            corpus_output("server_tool"),
            stream(&[
                r#"{"type":"start"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"tool-input-start","toolCallId":"tc-1","toolName":"get_weather","providerMetadata":{"babelgate":{"messageId":"msg-1"}}}"#,
                r#"{"type":"tool-input-delta","toolCallId":"tc-1","inputTextDelta":"{\"city\":"}"#,
                r#"{"type":"tool-input-delta","toolCallId":"tc-1","inputTextDelta":"\"北京\"}"}"#,
                r#"{"type":"tool-input-available","toolCallId":"tc-1","toolName":"get_weather","input":{"city":"北京"}}"#,
                r#"{"type":"tool-output-available","toolCallId":"tc-1","output":{"city":"北京","temperature":22},"providerMetadata":{"babelgate":{"messageId":"msg-tool"}}}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"text-start","id":"msg-2","providerMetadata":{"babelgate":{"messageId":"msg-2"}}}"#,
                r#"{"type":"text-delta","id":"msg-2","delta":"北京今天晴"}"#,
                r#"{"type":"text-end","id":"msg-2"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish","finishReason":"stop"}"#,
            ])
        );
    }

    #[test]
    fn open_front_end_call_finishes_with_tool_calls() {
        let out = corpus_output("frontend_tool");
        assert!(out.ends_with(
            "data: {\"type\":\"tool-input-available\",\"toolCallId\":\"tc-1\",\"toolName\":\"change_background\",\"input\":{\"color\":\"#ff0000\"}}\n\n\
             data: {\"type\":\"finish-step\"}\n\n\
             data: {\"type\":\"finish\",\"finishReason\":\"tool-calls\"}\n\n\
             data: [DONE]\n\n"
        ), "{out}");
    }

    #[test]
    fn continuation_reuses_the_message_id_and_opens_a_step() {
        assert_eq!(
            corpus_output("continuation"),
            stream(&[
                r#"{"type":"start","messageId":"msg-1"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"text-start","id":"msg-3","providerMetadata":{"babelgate":{"messageId":"msg-3"}}}"#,
                r#"{"type":"text-delta","id":"msg-3","delta":"Done, it is red now."}"#,
                r#"{"type":"text-end","id":"msg-3"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish","finishReason":"stop"}"#,
            ])
        );
    }

    #[test]
    fn an_empty_continuation_still_shows_its_step() {
        assert_eq!(
            corpus_output("continuation_empty"),
            stream(&[
                r#"{"type":"start","messageId":"msg-1"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"text-start","id":"txt-1"}"#,
                r#"{"type":"text-end","id":"txt-1"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish","finishReason":"stop"}"#,
            ])
        );
    }

    #[test]
    fn tool_interrupt_becomes_an_approval_request_inside_the_step() {
        let out = corpus_output("hitl_confirm");
        assert!(out.ends_with(
            "data: {\"type\":\"tool-input-available\",\"toolCallId\":\"tc-1\",\"toolName\":\"confirm_action\",\"input\":{\"path\":\"/tmp/x\"}}\n\n\
             data: {\"type\":\"tool-approval-request\",\"approvalId\":\"int-1\",\"toolCallId\":\"tc-1\",\"reason\":\"Delete /tmp/x?\"}\n\n\
             data: {\"type\":\"finish-step\"}\n\n\
             data: {\"type\":\"finish\",\"finishReason\":\"tool-calls\"}\n\n\
             data: [DONE]\n\n"
        ), "{out}");
    }

    #[test]
    fn other_interrupts_stay_in_the_message_as_data() {
        assert_eq!(
            corpus_output("interrupt_form"),
            stream(&[
                r#"{"type":"start"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"data-interrupt","id":"int-2","data":{"id":"int-2","reason":"input_required","message":"Which city?","payload":{"type":"string"}}}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish","finishReason":"other"}"#,
            ])
        );
    }

    #[test]
    fn state_keeps_one_live_part() {
        assert_eq!(
            corpus_output("state"),
            stream(&[
                r#"{"type":"start"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"data-state","id":"state","data":{"counter":0,"items":["a"]}}"#,
                r#"{"type":"data-state","id":"state","data":{"counter":1,"items":["a","b"]}}"#,
                r#"{"type":"data-state-delta","data":[{"op":"remove","path":"/nope"}],"transient":true}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish","finishReason":"stop"}"#,
            ])
        );
    }

    #[test]
    fn cut_stream_is_closed_as_interrupted() {
        assert_eq!(
            corpus_output("cut_mid_message"),
            stream(&[
                r#"{"type":"start"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"text-start","id":"msg-1","providerMetadata":{"babelgate":{"messageId":"msg-1"}}}"#,
                r#"{"type":"text-delta","id":"msg-1","delta":"This answer is cut "}"#,
                r#"{"type":"text-delta","id":"msg-1","delta":"off"}"#,
                r#"{"type":"tool-input-start","toolCallId":"tc-9","toolName":"half","providerMetadata":{"babelgate":{"messageId":"msg-1"}}}"#,
                r#"{"type":"tool-input-delta","toolCallId":"tc-9","inputTextDelta":"{\"a\":"}"#,
                r#"{"type":"text-end","id":"msg-1"}"#,
                r#"{"type":"tool-input-error","toolCallId":"tc-9","toolName":"half","input":"{\"a\":","errorText":"the stream ended before the call's input was complete"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish","finishReason":"interrupted"}"#,
            ])
        );
    }

    #[test]
    fn run_error_closes_text_then_reports_and_ignores_the_rest() {
        assert_eq!(
            corpus_output("run_error"),
            stream(&[
                r#"{"type":"start"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"text-start","id":"msg-1","providerMetadata":{"babelgate":{"messageId":"msg-1"}}}"#,
                r#"{"type":"text-delta","id":"msg-1","delta":"Let me look"}"#,
                r#"{"type":"text-end","id":"msg-1"}"#,
                r#"{"type":"error","errorText":"upstream model timed out","code":"UPSTREAM_TIMEOUT"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish","finishReason":"error"}"#,
            ])
        );
    }

    #[test]
    fn fail_reports_an_error_chunk() {
        let mut e = VercelEncoder::new(EncodeContext::deterministic());
        let mut out = Vec::new();
        e.encode(&Event::new(run_started()), &mut out);
        e.fail("upstream went away", None, &mut out);
        e.encode(&Event::new(run_started()), &mut out);
        e.finish(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            stream(&[
                r#"{"type":"start"}"#,
                r#"{"type":"error","errorText":"upstream went away"}"#,
                r#"{"type":"finish","finishReason":"error"}"#,
            ])
        );
    }

    #[test]
    fn shorthand_text_gets_starts_and_never_a_delta_after_its_end() {
        assert_eq!(
            corpus_output("reasoning_and_shorthand"),
            stream(&[
                r#"{"type":"start"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"reasoning-start","id":"r1","providerMetadata":{"babelgate":{"messageId":"r1"}}}"#,
                r#"{"type":"reasoning-delta","id":"r1","delta":"thinking"}"#,
                r#"{"type":"reasoning-end","id":"r1"}"#,
                r#"{"type":"data-reasoning-encrypted","data":{"subtype":"message","entity_id":"r1","value":"enc"},"transient":true}"#,
                r#"{"type":"text-start","id":"m","providerMetadata":{"babelgate":{"messageId":"m"}}}"#,
                r#"{"type":"text-delta","id":"m","delta":"Hello"}"#,
                r#"{"type":"text-end","id":"m"}"#,
                r#"{"type":"text-start","id":"m","providerMetadata":{"babelgate":{"messageId":"m"}}}"#,
                r#"{"type":"text-delta","id":"m","delta":" again"}"#,
                r#"{"type":"text-end","id":"m"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish","finishReason":"stop"}"#,
            ])
        );
    }

    #[test]
    fn events_without_a_chunk_become_data_parts() {
        assert_eq!(
            corpus_output("everything_else"),
            stream(&[
                r#"{"type":"start"}"#,
                r#"{"type":"data-custom","data":{"name":"progress","value":{"percent":50}},"transient":true}"#,
                r#"{"type":"data-raw","data":{"event":{"provider":"acme"},"source":"acme-llm"},"transient":true}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"source-url","sourceId":"s1","url":"https://example.com"}"#,
                r#"{"type":"source-document","sourceId":"s2","mediaType":"application/octet-stream","title":"a.pdf","filename":"a.pdf"}"#,
                r#"{"type":"file","url":"https://example.com/a.png","mediaType":"image/png"}"#,
                r#"{"type":"data-weather","id":"w1","data":{"t":22}}"#,
                r#"{"type":"message-metadata","messageMetadata":{"model":"acme-1"}}"#,
                r#"{"type":"data-activity-snapshot","id":"act-1","data":{"message_id":"act-1","activity_type":"plan","content":{"steps":["a"]}}}"#,
                r#"{"type":"data-activity-snapshot","id":"act-1","data":{"message_id":"act-1","activity_type":"plan","content":{"steps":["a","b"]}}}"#,
                r#"{"type":"data-collab-start","data":{"message_id":"c1","from":"planner","to":"coder"},"transient":true}"#,
                r#"{"type":"data-collab-content","data":{"message_id":"c1","delta":{"task":{"id":"t1","name":"write"}}},"transient":true}"#,
                r#"{"type":"data-collab-end","data":{"message_id":"c1"},"transient":true}"#,
                r#"{"type":"data-subagent-started","data":{"subagent_run_id":"sa","name":"coder"},"transient":true}"#,
                r#"{"type":"data-subagent-finished","data":{"subagent_run_id":"sa","result":"ok"},"transient":true}"#,
                r#"{"type":"data-subagent-error","data":{"subagent_run_id":"sb","message":"x"},"transient":true}"#,
                r#"{"type":"data-messages-snapshot","data":{"messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"hi"}]}]},"transient":true}"#,
                r#"{"type":"data-unknown","data":{"type":"FUTURE_EVENT","x":1},"transient":true}"#,
                r#"{"type":"tool-input-start","toolCallId":"never-seen","toolName":"unknown"}"#,
                r#"{"type":"tool-input-available","toolCallId":"never-seen","toolName":"unknown","input":{}}"#,
                r#"{"type":"tool-output-available","toolCallId":"never-seen","output":{"ok":true},"providerMetadata":{"babelgate":{"messageId":"msg-tool"}}}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"tool-input-start","toolCallId":"never-seen-2","toolName":"unknown"}"#,
                r#"{"type":"tool-input-available","toolCallId":"never-seen-2","toolName":"unknown","input":{}}"#,
                r#"{"type":"tool-output-error","toolCallId":"never-seen-2","errorText":"failed"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"tool-input-start","toolCallId":"never-seen-3","toolName":"unknown"}"#,
                r#"{"type":"tool-input-available","toolCallId":"never-seen-3","toolName":"unknown","input":{}}"#,
                r#"{"type":"tool-output-denied","toolCallId":"never-seen-3"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"tool-input-start","toolCallId":"no-start","toolName":"unknown"}"#,
                r#"{"type":"tool-input-delta","toolCallId":"no-start","inputTextDelta":"{not json"}"#,
                r#"{"type":"tool-input-error","toolCallId":"no-start","toolName":"unknown","input":"{not json","errorText":"the tool call's arguments are not valid JSON: key must be a string at line 1 column 2"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish","finishReason":"stop"}"#,
            ])
        );
    }

    #[test]
    fn a_second_run_continues_the_same_message() {
        assert_eq!(
            corpus_output("two_runs"),
            stream(&[
                r#"{"type":"start"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"text-start","id":"m1","providerMetadata":{"babelgate":{"messageId":"m1"}}}"#,
                r#"{"type":"text-delta","id":"m1","delta":"one"}"#,
                r#"{"type":"text-end","id":"m1"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish","finishReason":"stop"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"text-start","id":"m2","providerMetadata":{"babelgate":{"messageId":"m2"}}}"#,
                r#"{"type":"text-delta","id":"m2","delta":"two"}"#,
                r#"{"type":"text-end","id":"m2"}"#,
                r#"{"type":"abort","reason":"user stop"}"#,
            ])
        );
    }

    #[test]
    fn empty_and_minimal_runs_still_open_a_step() {
        assert_eq!(
            corpus_output("empty"),
            stream(&[
                r#"{"type":"start"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish","finishReason":"interrupted"}"#,
            ])
        );
        assert_eq!(
            corpus_output("started_and_finished"),
            stream(&[
                r#"{"type":"start"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish","finishReason":"stop"}"#,
            ])
        );
    }

    /// A run continuing message `a1`, which holds call `tc-old`, that
    /// gives a result for `call`.
    fn continued_result(call: &str) -> String {
        let mut ctx = EncodeContext::deterministic();
        ctx.message_id = Some("a1".into());
        ctx.continued.tool_calls = vec!["tc-old".into()];
        encode_with(
            ctx,
            &[
                run_started(),
                result(call, json!("done")),
                run_finished(Outcome::Unspecified),
            ],
        )
    }

    #[test]
    fn continuation_writes_results_for_calls_the_continued_answer_holds() {
        let out = continued_result("tc-old");
        assert_eq!(
            out,
            stream(&[
                r#"{"type":"start","messageId":"a1"}"#,
                r#"{"type":"tool-output-available","toolCallId":"tc-old","output":"done","providerMetadata":{"babelgate":{"messageId":"msg-tool"}}}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"text-start","id":"txt-1"}"#,
                r#"{"type":"text-end","id":"txt-1"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish","finishReason":"stop"}"#,
            ])
        );
    }

    /// Resuming after an interrupt, ag-ui-langgraph starts the call the
    /// continued message holds again: no second part (which would show the
    /// call twice, once without its result), only its result.
    #[test]
    fn a_call_the_continued_message_holds_is_not_started_again() {
        let mut ctx = EncodeContext::deterministic();
        ctx.message_id = Some("a1".into());
        ctx.continued.tool_calls = vec!["tc-old".into()];
        let mut events = vec![run_started()];
        events.extend(tool("tc-old", "delete_file", &[r#"{"path":"/x"}"#]));
        events.push(result("tc-old", json!("deleted")));
        events.extend(text("msg-2", &["Deleted."]));
        events.push(run_finished(Outcome::Unspecified));
        let out = encode_with(ctx, &events);
        assert!(
            !out.contains("tool-input"),
            "the call was started again: {out}"
        );
        assert_eq!(
            out,
            stream(&[
                r#"{"type":"start","messageId":"a1"}"#,
                r#"{"type":"tool-output-available","toolCallId":"tc-old","output":"deleted","providerMetadata":{"babelgate":{"messageId":"msg-tool"}}}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"text-start","id":"msg-2","providerMetadata":{"babelgate":{"messageId":"msg-2"}}}"#,
                r#"{"type":"text-delta","id":"msg-2","delta":"Deleted."}"#,
                r#"{"type":"text-end","id":"msg-2"}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish","finishReason":"stop"}"#,
            ])
        );
    }

    /// LangGraph's node steps (`__start__`, `model`, `tools`) are not model
    /// calls: a step holding only the state written after a node would be
    /// the message's last step, and `ai`'s
    /// `lastAssistantMessageIsCompleteWithToolCalls` would never see the
    /// front-end call in it. A Vercel step is one model call: the text of
    /// another upstream message after calls is the next one, even when the
    /// calls' results come only with the closing snapshot.
    #[test]
    fn another_dialects_steps_are_not_model_steps() {
        let step = |started: bool, name: &str| {
            let name = Some(name.to_string());
            if started {
                EventKind::StepStarted { name }
            } else {
                EventKind::StepFinished { name }
            }
        };
        let mut tool_msg = Message::text_message("msg-tool", Role::Tool, "it broke");
        tool_msg.tool_call_id = Some("tc-1".into());
        tool_msg.error = Some("error".into());
        let mut events = vec![run_started(), step(true, "model")];
        events.extend(tool("tc-1", "flaky", &["{}"]));
        events.push(EventKind::StateSnapshot {
            snapshot: json!({"n": 1}),
        });
        events.extend([
            step(false, "model"),
            step(true, "tools"),
            step(false, "tools"),
            step(true, "model"),
        ]);
        events.extend(text("msg-2", &["Sorry."]));
        events.extend([
            step(false, "model"),
            EventKind::MessagesSnapshot {
                messages: vec![tool_msg],
            },
        ]);
        events.push(run_finished(Outcome::Unspecified));
        let out = encode_with(EncodeContext::deterministic(), &events);
        let chunks: Vec<&str> = out
            .split("\n\n")
            .filter(|c| !c.contains("data-messages-snapshot"))
            .collect();
        assert_eq!(
            chunks.join("\n\n"),
            stream(&[
                r#"{"type":"start"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"tool-input-start","toolCallId":"tc-1","toolName":"flaky","providerMetadata":{"babelgate":{"messageId":"msg-1"}}}"#,
                r#"{"type":"tool-input-delta","toolCallId":"tc-1","inputTextDelta":"{}"}"#,
                r#"{"type":"tool-input-available","toolCallId":"tc-1","toolName":"flaky","input":{}}"#,
                r#"{"type":"data-state","id":"state","data":{"n":1}}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"start-step"}"#,
                r#"{"type":"text-start","id":"msg-2","providerMetadata":{"babelgate":{"messageId":"msg-2"}}}"#,
                r#"{"type":"text-delta","id":"msg-2","delta":"Sorry."}"#,
                r#"{"type":"text-end","id":"msg-2"}"#,
                // the snapshot settles the call (the shape stage), then the
                // encoder writes it again with the id the upstream keeps
                r#"{"type":"tool-output-error","toolCallId":"tc-1","errorText":"it broke"}"#,
                r#"{"type":"tool-output-error","errorText":"it broke","toolCallId":"tc-1","providerMetadata":{"babelgate":{"messageId":"msg-tool"}}}"#,
                r#"{"type":"finish-step"}"#,
                r#"{"type":"finish","finishReason":"stop"}"#,
            ])
        );
    }

    /// The client looks a result's call up in the message it continues and
    /// throws when it is not there: a call that message lacks is announced
    /// first, as in a new answer.
    #[test]
    fn continuation_announces_a_call_the_continued_answer_lacks() {
        let out = continued_result("tc-stray");
        let announced = out
            .find(r#"{"type":"tool-input-start","toolCallId":"tc-stray","toolName":"unknown""#)
            .unwrap_or_else(|| panic!("no tool part for the stray call: {out}"));
        let available = out
            .find(r#""type":"tool-input-available","toolCallId":"tc-stray""#)
            .unwrap_or_else(|| panic!("no input for the stray call: {out}"));
        let result = out
            .find(r#"{"type":"tool-output-available","toolCallId":"tc-stray""#)
            .unwrap_or_else(|| panic!("no result: {out}"));
        assert!(announced < available && available < result, "{out}");
    }

    /// A kept approval request or answer from a Vercel upstream, while
    /// continuing: a request's call is announced unless the continued
    /// answer holds it; an answer goes out as it came only for a request the
    /// client holds.
    #[test]
    fn continued_approvals_go_out_only_against_what_the_client_holds() {
        let kept = |raw: Value| Event::new(EventKind::Unknown { raw }).with_origin(Dialect::Vercel);
        let mut ctx = EncodeContext::deterministic();
        ctx.message_id = Some("a1".into());
        ctx.continued.tool_calls = vec!["tc-held".into()];
        ctx.continued.approvals = vec!["ap-held".into()];
        let events = [
            Event::new(run_started()),
            kept(
                json!({"type": "tool-approval-request", "approvalId": "ap-1", "toolCallId": "tc-stray"}),
            ),
            kept(
                json!({"type": "tool-approval-request", "approvalId": "ap-2", "toolCallId": "tc-held"}),
            ),
            kept(
                json!({"type": "tool-approval-response", "approvalId": "ap-held", "approved": true}),
            ),
            kept(
                json!({"type": "tool-approval-response", "approvalId": "ap-other", "approved": true}),
            ),
            Event::new(run_finished(Outcome::Unspecified)),
        ];
        let mut e = VercelEncoder::new(ctx);
        let mut out = Vec::new();
        for ev in &babelgate_core::shape::Shaper::shape_all(&events) {
            e.encode(ev, &mut out);
        }
        e.finish(&mut out);
        let out = String::from_utf8(out).unwrap();
        let starts: Vec<&str> = out
            .split("\n\n")
            .filter(|f| f.contains(r#""type":"tool-input-start""#))
            .collect();
        assert_eq!(starts.len(), 1, "only the stray call is announced: {out}");
        assert!(starts[0].contains("tc-stray"), "{out}");
        assert!(
            out.contains(
                r#"data: {"type":"tool-approval-response","approvalId":"ap-held","approved":true}"#
            ),
            "{out}"
        );
        assert!(
            !out.contains(r#"data: {"type":"tool-approval-response","approvalId":"ap-other""#),
            "an answer to a request the client lacks went out as it came: {out}"
        );
    }

    #[test]
    fn empty_arguments_are_an_empty_object_and_finish_reasons_are_checked() {
        let mut events = vec![run_started()];
        events.extend(tool("t", "ping", &[]));
        events.push(EventKind::RunFinished {
            thread_id: None,
            run_id: None,
            message_id: None,
            result: None,
            outcome: Outcome::Unspecified,
            finish_reason: Some("end_turn".into()),
            usage: None,
        });
        let out = encode(&events);
        assert!(out.contains(r#""input":{}"#), "{out}");
        assert!(
            out.contains(r#"{"type":"finish","finishReason":"other"}"#),
            "{out}"
        );
    }

    #[test]
    fn headers_are_the_ui_message_stream_ones() {
        let e = VercelEncoder::new(EncodeContext::deterministic());
        assert!(e
            .headers()
            .contains(&("x-vercel-ai-ui-message-stream", "v1")));
        assert!(e.headers().contains(&("x-accel-buffering", "no")));
    }

    /// Vercel chunks kept unknown, as a Vercel decoder or an AG-Kit
    /// `unknown` envelope saying `dialect: "vercel"` hands them on: sound
    /// ones and ones the client's schema would refuse.
    fn kept_chunks() -> Vec<Event> {
        let kept = |raw: Value| Event::new(EventKind::Unknown { raw }).with_origin(Dialect::Vercel);
        let mut events: Vec<Event> = vec![Event::new(run_started())];
        events.extend(
            tool("tc-1", "get_weather", &["{\"city\":\"x\"}"])
                .into_iter()
                .map(Event::new),
        );
        events.extend([
            kept(json!({"type": "tool-approval-request", "approvalId": "ap-1", "toolCallId": "tc-1", "isAutomatic": true})),
            kept(json!({"type": "tool-approval-response", "approvalId": "ap-1", "approved": true})),
            // no request of that id in the message
            kept(json!({"type": "tool-approval-response", "approvalId": "ap-9", "approved": true})),
            // `approved` must be a boolean
            kept(json!({"type": "tool-approval-response", "approvalId": "ap-1", "approved": "yes"})),
            kept(json!({"type": "custom", "kind": "openai.compaction", "providerMetadata": {"openai": {"id": 1}}})),
            kept(json!({"type": "custom"})),
            kept(json!({"type": "custom", "kind": "k", "providerMetadata": {"openai": 1}})),
            kept(json!({"type": "steering-message", "id": "s-1", "parts": [{"type": "text", "text": "hold on"}]})),
            kept(json!({"type": "steering-message", "id": "s-2", "parts": [{"type": "text"}]})),
            kept(json!({"type": "steering-message", "id": "s-3", "parts": [{"type": "file", "mediaType": "image/png", "url": "u", "filename": null}]})),
            kept(json!({"type": "tool-approval-request", "approvalId": "ap-2"})),
            kept(json!({"type": "reset-step"})),
            Event::new(run_finished(Outcome::Unspecified)),
        ]);
        events
    }

    #[test]
    fn kept_chunks_go_out_as_they_came_only_when_the_client_takes_them() {
        let mut e = VercelEncoder::new(EncodeContext::deterministic());
        let mut out = Vec::new();
        for ev in &babelgate_core::shape::Shaper::shape_all(&kept_chunks()) {
            e.encode(ev, &mut out);
        }
        e.finish(&mut out);
        let chunks: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .split("\n\n")
            .filter_map(|f| f.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str(d).ok())
            .collect();
        let as_came: Vec<&str> = chunks
            .iter()
            .filter(|c| c["type"] != "data-unknown")
            .filter_map(|c| {
                c["approvalId"]
                    .as_str()
                    .or(c["kind"].as_str())
                    .or(c["id"].as_str())
            })
            .collect();
        let wrapped: Vec<&Value> = chunks
            .iter()
            .filter(|c| c["type"] == "data-unknown")
            .map(|c| &c["data"])
            .collect();
        assert!(
            ["ap-1", "openai.compaction", "s-1"]
                .iter()
                .all(|id| as_came.contains(id)),
            "{chunks:?}"
        );
        assert_eq!(wrapped.len(), 7, "{wrapped:?}");
        assert!(chunks.iter().any(|c| c["type"] == "reset-step"));
        // The answer comes after its request, each once.
        let at = |ty: &str| {
            chunks
                .iter()
                .position(|c| c["type"] == ty && c["approvalId"] == "ap-1")
        };
        assert!(at("tool-approval-request") < at("tool-approval-response"));
    }

    /// With BABELGATE_VERCEL_CORPUS=<dir> (tests/run.sh sets it), writes
    /// every corpus stream there for a run through the real `ai` client
    /// (`tests/node/validate-vercel.mjs --dump`).
    #[test]
    fn dump_client_corpus() {
        let Some(dir) = std::env::var_os("BABELGATE_VERCEL_CORPUS") else {
            return;
        };
        std::fs::create_dir_all(&dir).unwrap();
        for (name, ctx, events) in corpus() {
            let out = encode_with(ctx, &events);
            std::fs::write(std::path::Path::new(&dir).join(format!("{name}.sse")), out).unwrap();
        }
        let mut e = VercelEncoder::new(EncodeContext::deterministic());
        let mut out = Vec::new();
        for ev in &babelgate_core::shape::Shaper::shape_all(&kept_chunks()) {
            e.encode(ev, &mut out);
        }
        e.finish(&mut out);
        std::fs::write(std::path::Path::new(&dir).join("kept_chunks.sse"), out).unwrap();
    }
}
