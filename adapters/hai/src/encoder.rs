//! Core events to the stream a HAI client expects.
//!
//! What the client needs (seed 004 and its AG-UI parent): `RUN_STARTED` first;
//! text, thinking and widgets inside `BUSINESS_DATA_START`..`_END` messages,
//! exactly one JSON object per `BUSINESS_DATA_CONTENT` (clients concatenate
//! deltas as JSON text and split them again at `}{`); tool calls, results,
//! state and custom events in their AG-UI shapes; `STATE_DELTA` ops with
//! `from`; the end of a run said by `RUN_FINISHED{messageId, role, timestamp}`
//! or `RUN_ERROR`. Every frame carries an epoch-ms `timestamp` (the source's,
//! or the clock's), except that HAI-origin events without one stay without
//! one, so HAI -> HAI is an identity.
//!
//! Business messages: at most one is open at a time. Text opens one (id = the
//! text message id); reasoning and widgets join the open one or open their
//! own. A message opened by reasoning from another dialect stays open after
//! the reasoning ends so that the answer that follows lands in the same HAI
//! message (thinking above the answer, as HAI front ends show it); it is
//! closed before anything that is not message content.
//!
//! Events come through the shape stage (`babelgate_core::shape`): the run
//! first, starts before deltas and never twice, ends only of what is open, a
//! result after its call's end, nothing after an error. The encoder maps
//! them and keeps only HAI's own rules: business messages, widgets and
//! templates, steps and collaboration messages (no part of the stage), an
//! unknown event inside a run, and how a stream ends in `finish` and `fail`
//! (which the stage does not see: they close what is open).

use babelgate_core::event::{Interrupt, Outcome};
use babelgate_core::{Dialect, EncodeContext, Encoder, Event, EventKind, OpenList, Sink};
use serde_json::{json, Map, Value};

use crate::request::messages_to_json;
use crate::wire;

/// The business message being written.
/// The business message being written.
#[derive(Debug)]
struct Biz {
    id: String,
    /// The core text message writing into it.
    text: Option<String>,
    /// The core reasoning message writing into it, and when it started (ms).
    reasoning: Option<(String, i64)>,
    /// Opened on behalf of another dialect's reasoning or data: closed as soon
    /// as non-content arrives while nothing writes into it.
    auto_close: bool,
}

/// Where the client's run stands.
#[derive(Debug)]
enum Run {
    /// Nothing written yet.
    NotStarted,
    /// `RUN_STARTED` written, with this `messageId` (`RUN_FINISHED` repeats it).
    Open { message_id: String },
    /// `RUN_FINISHED` or `RUN_ERROR` written; a `RunStarted` begins another.
    Ended,
    /// `finish` was called: nothing more is written.
    Done,
}

pub struct HaiEncoder {
    ctx: EncodeContext,
    run: Run,
    biz: Option<Biz>,
    /// Tool calls whose arguments have not ended: closed with the run (the
    /// client refuses `RUN_FINISHED` while one is open).
    calls: OpenList<()>,
    /// Collaboration messages open, those opened for content or subagents
    /// included.
    collabs: Vec<String>,
    /// Active steps by name (a set, as AG-UI's verifier keeps them).
    steps: OpenList<()>,
    /// Events the binary form could not carry (dropped, for metrics); a
    /// cell because frames are written through `&self`.
    unframed: std::cell::Cell<u64>,
    /// Off: every frame goes through `write` (the reference of the
    /// differential tests).
    fast: bool,
}

impl HaiEncoder {
    pub fn new(ctx: EncodeContext) -> Self {
        HaiEncoder {
            ctx,
            run: Run::NotStarted,
            biz: None,
            calls: OpenList::default(),
            collabs: Vec::new(),
            steps: OpenList::default(),
            unframed: std::cell::Cell::new(0),
            fast: true,
        }
    }

    /// This encoder without its fast paths: the reference they must agree
    /// with, for the differential tests.
    #[doc(hidden)]
    pub fn without_fast_paths(mut self) -> Self {
        self.fast = false;
        self
    }

    /// The frame's timestamp: HAI-origin events keep theirs (or none), other
    /// events get theirs or the clock's.
    fn ts(&self, ev: Option<&Event>) -> Option<i64> {
        match ev {
            Some(e) if e.origin == Some(Dialect::Hai) => e.timestamp,
            Some(e) => Some(e.timestamp.unwrap_or_else(|| self.ctx.clock.now_ms())),
            None => Some(self.ctx.clock.now_ms()),
        }
    }

    /// Writes `fields` as a `ty` frame, with the timestamp and, for HAI-origin
    /// events, the extras the decoder kept (wire names; `$` notes never).
    fn write(
        &self,
        out: &mut Sink,
        ty: &str,
        fields: Vec<(&str, Value)>,
        ev: Option<&Event>,
        content: bool,
    ) {
        if self.ctx.binary && self.write_own(out, ty, &fields, ev, content) {
            return;
        }
        // The same bytes without the frame's map.
        if self.write_fast(out, ty, &fields, ev, content) {
            return;
        }
        let mut m = wire::frame(ty);
        for (k, v) in fields {
            m.insert(k.into(), v);
        }
        if let Some(x) = ev.and_then(|e| e.extra_from(Dialect::Hai)) {
            for (k, v) in x {
                // On content events `delta` is the template, already used.
                if wire::is_private(k) || (content && k == wire::X_DELTA) {
                    continue;
                }
                m.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        if let Some(t) = self.ts(ev) {
            m.entry("timestamp").or_insert(Value::from(t));
        }
        self.put(out, m);
    }

    /// The JSON body `write` makes of `fields`, written straight into the
    /// sink: `type`, the fields, the extras kept from a HAI source that
    /// `write` merges (wire names not already written; `$` notes never, nor
    /// a content event's `delta` template), the timestamp unless an extra
    /// gave one. The `fields` keys are the encoder's own and need no
    /// escaping. Whether it was written (not in the binary transport, nor
    /// with the fast paths off); if not, the caller takes `write`.
    fn write_fast<F: Field>(
        &self,
        out: &mut Sink,
        ty: &str,
        fields: &[(&str, F)],
        ev: Option<&Event>,
        content: bool,
    ) -> bool {
        if !self.fast || self.ctx.binary {
            return false;
        }
        // No key twice (the callers' keys are distinct constants).
        debug_assert!(!fields
            .iter()
            .enumerate()
            .any(|(i, (k, _))| fields.iter().skip(i + 1).any(|(l, _)| l == k)));
        let extra = ev.and_then(|e| e.extra_from(Dialect::Hai));
        let ts = self.ts(ev);
        out.event(|buf| {
            // `ty` and the keys are the encoder's constants: written as they
            // are (none needs an escape).
            debug_assert!(!std::iter::once(ty)
                .chain(fields.iter().map(|(k, _)| *k))
                .any(|k| k.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\')));
            buf.extend_from_slice(b"{\"type\":\"");
            buf.extend_from_slice(ty.as_bytes());
            buf.push(b'"');
            for (k, v) in fields {
                buf.extend_from_slice(b",\"");
                buf.extend_from_slice(k.as_bytes());
                buf.extend_from_slice(b"\":");
                v.write_to(buf);
            }
            let mut kept_ts = false;
            for (k, v) in extra.into_iter().flatten() {
                if wire::is_private(k)
                    || (content && k == wire::X_DELTA)
                    || k == "type"
                    || fields.iter().any(|(f, _)| f == k)
                {
                    continue;
                }
                kept_ts |= k == "timestamp";
                buf.push(b',');
                babelgate_core::json::write_str(buf, k);
                buf.push(b':');
                json_to(buf, v);
            }
            if let (Some(t), false) = (ts, kept_ts) {
                buf.extend_from_slice(b",\"timestamp\":");
                Fv::Int(t).write(buf);
            }
            buf.push(b'}');
        });
        true
    }

    /// In the binary transport, one of HAI's own events (most of a HAI
    /// stream) written straight from its fields, without the frame's object:
    /// when nothing would be added to them (no extras kept from a HAI source,
    /// no field named as the frame's own keys). Whether it was written.
    fn write_own(
        &self,
        out: &mut Sink,
        ty: &str,
        fields: &[(&str, Value)],
        ev: Option<&Event>,
        content: bool,
    ) -> bool {
        let extras = has_extras(ev, content);
        let Some(prefix) = crate::POLICY.binary_custom_prefix else {
            return false;
        };
        if extras {
            return false;
        }
        let ts = self.ts(ev);
        out.try_event(|buf| babelgate_proto::write_own_event(buf, prefix, ty, fields, ts).is_some())
    }

    /// One frame: JSON, or in the binary form straight to protobuf (HAI's
    /// own events as `hai:` CUSTOM events, see docs/transports.md).
    fn put(&self, out: &mut Sink, m: Map<String, Value>) {
        if !self.ctx.binary {
            return out.json(&Value::Object(m));
        }
        let prefix = crate::POLICY.binary_custom_prefix;
        if !out.try_event(|buf| babelgate_proto::write_object(buf, m, prefix).is_ok()) {
            self.unframed.set(self.unframed.get() + 1);
        }
    }

    /// Writes a frame kept whole in an extra (`$start`, `$end`).
    fn write_kept(&self, out: &mut Sink, ty: &str, kept: &Map<String, Value>) {
        let mut m = wire::frame(ty);
        for (k, v) in kept {
            m.entry(k.clone()).or_insert_with(|| v.clone());
        }
        self.put(out, m);
    }

    // ---- run ------------------------------------------------------------

    /// One shaped event (or `fail`'s error) to its frames, by kind.
    fn encode_kind(&mut self, ev: &Event, out: &mut Sink) {
        use EventKind as K;
        match &ev.kind {
            K::RunStarted { .. } => self.run_started(ev, out),
            K::RunFinished { .. } => self.finish_run(Some(ev), out),
            K::RunError { .. } => self.run_error(ev, out),
            K::StepStarted { .. } => self.step_started(ev, out),
            K::StepFinished { .. } => self.step_finished(ev, out),
            K::TextStart { .. } => self.text_start(ev, out),
            K::TextDelta { .. } => self.text_delta(ev, out),
            K::TextEnd { .. } => self.text_end(ev, out),
            // HAI has no reasoning phases; the messages inside carry the content.
            K::ReasoningPhaseStart { .. } | K::ReasoningPhaseEnd { .. } => {}
            K::ReasoningStart { .. } => self.reasoning_start(ev, out),
            K::ReasoningDelta { .. } => self.reasoning_delta(ev, out),
            K::ReasoningEnd { .. } => self.reasoning_end(ev, out),
            K::ReasoningEncrypted { .. } => self.reasoning_encrypted(ev, out),
            K::ToolCallStart { .. } => self.tool_start(ev, out),
            K::ToolCallArgs { .. } => self.tool_args(ev, out),
            K::ToolCallEnd { .. } => self.tool_end(ev, out),
            K::ToolCallResult { .. } => self.tool_result(ev, out),
            K::ToolCallError { .. } | K::ToolCallDenied { .. } => self.tool_failed(ev, out),
            K::StateSnapshot { snapshot } => {
                let f = vec![("snapshot", snapshot.clone())];
                self.write(out, wire::STATE_SNAPSHOT, f, Some(ev), false);
            }
            K::StateDelta { patch } => self.state_delta(ev, patch, out),
            K::MessagesSnapshot { messages } => {
                let list = messages.iter().flat_map(messages_to_json).collect();
                let f = vec![("messages", Value::Array(list))];
                self.write(out, wire::MESSAGE_SNAPSHOT, f, Some(ev), false);
            }
            K::ActivitySnapshot { .. } | K::ActivityDelta { .. } => self.activity(ev, out),
            K::Source { .. } | K::File { .. } | K::Data { .. } => self.widget(ev, out),
            K::Custom { name, value } => self.custom(ev, name, value.clone(), out),
            K::MessageMetadata { metadata } => {
                self.custom(ev, "message_metadata", metadata.clone(), out)
            }
            K::CollabStart { .. } => self.collab_start(ev, out),
            K::CollabContent { message_id, delta } => {
                self.ensure_collab(message_id, out);
                self.collab_content(ev, message_id, delta.clone(), out);
            }
            K::CollabEnd { .. } => self.collab_end(ev, out),
            K::SubagentStarted { .. } => self.subagent_started(ev, out),
            K::SubagentFinished { .. } | K::SubagentError { .. } => self.subagent_ended(ev, out),
            K::Raw { event, source } => {
                let mut f = vec![("event", event.clone())];
                push_opt(&mut f, "source", source);
                self.write(out, wire::RAW, f, Some(ev), false);
            }
            K::Unknown { raw } => self.unknown(ev, raw, out),
        }
    }

    /// A `RUN_STARTED` of this encoder's making: before an event that the
    /// shape stage leaves outside a run, or at the end of an empty stream.
    fn start_run(&mut self, out: &mut Sink) {
        let id = self
            .ctx
            .message_id
            .clone()
            .unwrap_or_else(|| self.ctx.ids.next("msg"));
        self.write(
            out,
            wire::RUN_STARTED,
            vec![("messageId", json!(id)), ("role", json!("assistant"))],
            None,
            false,
        );
        self.run = Run::Open { message_id: id };
    }

    fn run_started(&mut self, ev: &Event, out: &mut Sink) {
        let EventKind::RunStarted {
            thread_id,
            run_id,
            parent_run_id,
            message_id,
            input,
        } = &ev.kind
        else {
            return;
        };
        if let Run::Open { .. } = self.run {
            // The shape stage starts no run inside one, but it leaves unknown
            // events outside runs, and this encoder writes one inside a run
            // of its own making (see `encode_to`): that run ends here.
            self.finish_run(None, out);
        }
        let id = message_id
            .clone()
            .or_else(|| self.ctx.message_id.clone())
            .unwrap_or_else(|| self.ctx.ids.next("msg"));
        let mut f = vec![];
        if is_hai(Some(ev)) {
            push_opt(&mut f, "messageId", message_id);
            push_opt(&mut f, "threadId", thread_id);
            push_opt(&mut f, "runId", run_id);
            push_opt(&mut f, "parentRunId", parent_run_id);
            if let Some(i) = input {
                f.push(("input", i.clone()));
            }
        } else {
            f.push(("messageId", json!(id)));
            f.push(("role", json!("assistant")));
        }
        self.write(out, wire::RUN_STARTED, f, Some(ev), false);
        self.run = Run::Open { message_id: id };
    }

    /// `RUN_FINISHED` for `ev`, or of this encoder's making (`None`: a cut
    /// stream's end, or a run of its own making ending).
    fn finish_run(&mut self, ev: Option<&Event>, out: &mut Sink) {
        // A HAI source's own end comes back as it was sent: what it left
        // open stays so (`end_run` forgets it). From another dialect the
        // shape stage has closed messages; the rest is closed here.
        if !is_hai(ev) {
            self.close_all(out);
        }
        let f = match ev {
            Some(ev) => self.finished_fields(ev),
            None => self.own_finished_fields(),
        };
        self.write(out, wire::RUN_FINISHED, f, ev, false);
        self.end_run();
    }

    /// `messageId` and `role` of a `RUN_FINISHED` (the run's `messageId`).
    fn own_finished_fields(&self) -> Vec<(&'static str, Value)> {
        let mut f = Vec::new();
        push_opt(&mut f, "messageId", &self.run_message_id());
        f.push(("role", json!("assistant")));
        f
    }

    fn run_message_id(&self) -> Option<String> {
        match &self.run {
            Run::Open { message_id } => Some(message_id.clone()),
            _ => None,
        }
    }

    fn finished_fields(&self, ev: &Event) -> Vec<(&'static str, Value)> {
        let EventKind::RunFinished {
            thread_id,
            run_id,
            message_id,
            result,
            outcome,
            usage,
            ..
        } = &ev.kind
        else {
            return self.own_finished_fields();
        };
        let mut f = Vec::new();
        if is_hai(Some(ev)) {
            push_opt(&mut f, "messageId", message_id);
            push_opt(&mut f, "threadId", thread_id);
            push_opt(&mut f, "runId", run_id);
        } else {
            let id = message_id.clone().or_else(|| self.run_message_id());
            push_opt(&mut f, "messageId", &id);
            f.push(("role", json!("assistant")));
        }
        if let Some(r) = result {
            f.push(("result", r.clone()));
        }
        if let Some(o) = outcome_json(outcome) {
            f.push(("outcome", o));
        }
        if let Some(u) = usage {
            f.push(("usage", u.clone()));
        }
        f
    }

    fn run_error(&mut self, ev: &Event, out: &mut Sink) {
        let EventKind::RunError { message, code } = &ev.kind else {
            return;
        };
        // Business data ends first so the front end gets its complete message
        // (the shape stage has closed text and reasoning, but not `fail`'s
        // error, nor a message this encoder keeps open for the answer); tool
        // calls are left open (ending one tells the front end to run it). A
        // HAI source's error comes back as it was sent, inside its message if
        // it was.
        if !is_hai(Some(ev)) {
            self.close_biz(out);
        }
        let mut f = vec![("message", json!(message))];
        push_opt(&mut f, "code", code);
        self.write(out, wire::RUN_ERROR, f, Some(ev), false);
        self.end_run();
    }

    /// The run ended: nothing inside it is open any more.
    fn end_run(&mut self) {
        self.run = Run::Ended;
        self.biz = None;
        self.calls.clear();
        self.collabs.clear();
        self.steps.clear();
    }

    /// Closes everything inside the run: the business message, tool calls,
    /// collaboration messages, steps (the client refuses `RUN_FINISHED`
    /// while any is open, as AG-UI's does).
    fn close_all(&mut self, out: &mut Sink) {
        self.close_biz(out);
        for (id, ()) in self.calls.take_all() {
            let f = vec![("toolCallId", json!(id))];
            self.write(out, wire::TOOL_CALL_END, f, None, false);
        }
        for id in std::mem::take(&mut self.collabs) {
            let f = vec![("messageId", json!(id))];
            self.write(out, wire::COLLAB_END, f, None, false);
        }
        for (name, ()) in self.steps.take_all().into_iter().rev() {
            let f = vec![("stepName", json!(name))];
            self.write(out, wire::STEP_FINISHED, f, None, false);
        }
    }

    // ---- steps (no part of the shape stage: their rules are kept here) ----

    fn step_started(&mut self, ev: &Event, out: &mut Sink) {
        let EventKind::StepStarted { name } = &ev.kind else {
            return;
        };
        let n = match name {
            Some(n) => n.clone(),
            None => self.ctx.ids.next("step"),
        };
        // Already active: a second start of it would be refused.
        if self.steps.contains(&n) {
            return;
        }
        self.steps.push(n.clone(), ());
        if is_synth(ev) {
            return;
        }
        // A HAI step without a name stays without one.
        let f = if is_hai(Some(ev)) && name.is_none() {
            vec![]
        } else {
            vec![("stepName", json!(n))]
        };
        self.write(out, wire::STEP_STARTED, f, Some(ev), false);
    }

    fn step_finished(&mut self, ev: &Event, out: &mut Sink) {
        let EventKind::StepFinished { name } = &ev.kind else {
            return;
        };
        let open = match name {
            Some(n) => Some(n.clone()),
            None => self.steps.ids().next_back().map(str::to_string),
        };
        let n = open.filter(|n| self.steps.remove(n));
        if is_synth(ev) {
            return;
        }
        if is_hai(Some(ev)) {
            let mut f = vec![];
            push_opt(&mut f, "stepName", name);
            self.write(out, wire::STEP_FINISHED, f, Some(ev), false);
        } else if let Some(n) = n {
            let f = vec![("stepName", json!(n))];
            self.write(out, wire::STEP_FINISHED, f, Some(ev), false);
        }
    }

    // ---- business messages ------------------------------------------------

    fn close_biz(&mut self, out: &mut Sink) {
        if let Some(b) = self.biz.take() {
            self.write(
                out,
                wire::BUSINESS_DATA_END,
                vec![("messageId", json!(b.id))],
                None,
                false,
            );
        }
    }

    /// Opens a business message, writing its START unless the HAI source had
    /// none (`frame` = the kept START, or `None` to synthesize one).
    fn open_biz(
        &mut self,
        id: String,
        start: Start<'_>,
        ev: &Event,
        auto_close: bool,
        out: &mut Sink,
    ) -> &mut Biz {
        self.close_biz(out);
        match start {
            Start::Kept(frame) => self.write_kept(out, wire::BUSINESS_DATA_START, frame),
            Start::Silent => {}
            Start::Write(role) => self.write(
                out,
                wire::BUSINESS_DATA_START,
                vec![("messageId", json!(id)), ("role", json!(role))],
                Some(ev).filter(|e| !is_hai(Some(e))),
                false,
            ),
        }
        self.biz.insert(Biz {
            id,
            text: None,
            reasoning: None,
            auto_close,
        })
    }

    /// Before anything but message content: a business message opened for
    /// another dialect's reasoning or data, with nothing writing into it,
    /// ends here.
    fn close_idle_biz(&mut self, out: &mut Sink) {
        if matches!(&self.biz, Some(b) if b.auto_close && b.text.is_none() && b.reasoning.is_none())
        {
            self.close_biz(out);
        }
    }

    /// A `BUSINESS_DATA_CONTENT` into the open business message.
    fn write_content(
        &mut self,
        delta: Value,
        extra: Vec<(&str, Value)>,
        ev: &Event,
        out: &mut Sink,
    ) {
        let id = self.biz.as_ref().map(|b| b.id.clone()).unwrap_or_default();
        let mut f = vec![("messageId", json!(id)), ("delta", delta)];
        f.extend(extra);
        self.write(out, wire::BUSINESS_DATA_CONTENT, f, Some(ev), true);
    }

    /// A `BUSINESS_DATA_END`.
    fn write_biz_end(&self, ev: &Event, id: &str, out: &mut Sink) {
        let f = [("messageId", Fv::Str(id))];
        if !self.write_fast(out, wire::BUSINESS_DATA_END, &f, Some(ev), false) {
            let f = vec![("messageId", json!(id))];
            self.write(out, wire::BUSINESS_DATA_END, f, Some(ev), false);
        }
    }

    /// Where a widget goes: the open business message, or the one its HAI
    /// source opened, or a new one.
    fn ensure_biz_for_widget(&mut self, ev: &Event, message_id: Option<&str>, out: &mut Sink) {
        if let Some(start) = kept(ev, wire::X_START) {
            self.open_biz(kept_id(start), Start::Kept(start), ev, false, out);
        } else if let Some(id) = implicit(ev) {
            if self.biz.as_ref().map(|b| b.id.as_str()) != Some(id) {
                self.open_biz(id.to_string(), Start::Silent, ev, false, out);
            }
        } else if self.biz.is_none() {
            let id = message_id
                .map(str::to_string)
                .unwrap_or_else(|| self.ctx.ids.next("msg"));
            self.open_biz(id, Start::Write("assistant"), ev, true, out);
        }
    }

    /// A source, a file or data: a widget in a business message.
    fn widget(&mut self, ev: &Event, out: &mut Sink) {
        match &ev.kind {
            EventKind::Source { .. } => {
                self.write_widget(ev, "source", None, None, &source_data(&ev.kind), out)
            }
            EventKind::File { url, media_type } => {
                let d = json!({"url": url, "mediaType": media_type});
                self.write_widget(ev, "file", None, None, &d, out);
            }
            EventKind::Data {
                name,
                id,
                message_id,
                data,
                ..
            } => self.write_widget(ev, name, id.as_deref(), message_id.as_deref(), data, out),
            _ => {}
        }
    }

    fn write_widget(
        &mut self,
        ev: &Event,
        name: &str,
        block_id: Option<&str>,
        message_id: Option<&str>,
        data: &Value,
        out: &mut Sink,
    ) {
        self.ensure_biz_for_widget(ev, message_id, out);
        let delta = widget_delta(ev, name, data);
        let mut extra = Vec::new();
        if let Some(b) = block_id {
            extra.push(("blockId", json!(b)));
        }
        self.write_content(delta, extra, ev, out);
    }

    // ---- text ---------------------------------------------------------------

    fn text_start(&mut self, ev: &Event, out: &mut Sink) {
        let EventKind::TextStart {
            message_id, role, ..
        } = &ev.kind
        else {
            return;
        };
        let hai = is_hai(Some(ev));
        if is_synth(ev) {
            // A HAI message whose START the source never sent.
            let text = Some(message_id.clone());
            match &mut self.biz {
                Some(b) if b.id == *message_id || b.text.is_none() => b.text = text,
                _ => {
                    self.open_biz(message_id.clone(), Start::Silent, ev, false, out)
                        .text = text
                }
            }
            return;
        }
        // Another dialect's answer joins the message of the reasoning before it.
        let joinable = |b: &Biz| b.id == *message_id || (b.text.is_none() && !hai);
        if let Some(b) = self.biz.as_mut().filter(|b| joinable(b)) {
            b.text = Some(message_id.clone());
            return;
        }
        self.close_biz(out);
        // HAI-origin: the role as written (in extra), if any.
        let fast = [
            ("messageId", Fv::Str(message_id)),
            ("role", Fv::Str(role.as_str())),
        ];
        let fast = if hai { &fast[..1] } else { &fast[..] };
        if !self.write_fast(out, wire::BUSINESS_DATA_START, fast, Some(ev), false) {
            let mut f = vec![("messageId", json!(message_id))];
            if !hai {
                f.push(("role", json!(role.as_str())));
            }
            self.write(out, wire::BUSINESS_DATA_START, f, Some(ev), false);
        }
        self.biz = Some(Biz {
            id: message_id.clone(),
            text: Some(message_id.clone()),
            reasoning: None,
            auto_close: false,
        });
    }

    fn text_delta(&mut self, ev: &Event, out: &mut Sink) {
        let EventKind::TextDelta { message_id, delta } = &ev.kind else {
            return;
        };
        self.text_biz(ev, message_id, out);
        // The delta `text_delta` makes, written in place where it can.
        let d = match template(ev) {
            Some(Value::String(_)) => Some(Fv::Str(delta)),
            Some(Value::Object(t)) => is_text_template(t).then_some(Fv::Text(delta)),
            _ => Some(Fv::Text(delta)),
        };
        let id = self.biz.as_ref().map_or("", |b| b.id.as_str());
        let written = d.is_some_and(|d| {
            let f = [("messageId", Fv::Str(id)), ("delta", d)];
            self.write_fast(out, wire::BUSINESS_DATA_CONTENT, &f, Some(ev), true)
        });
        if !written {
            let d = text_delta(ev, delta);
            self.write_content(d, vec![], ev, out);
        }
    }

    /// The business message a text delta writes into: its own, or one it
    /// may join, or a new one when its own was closed for another (at most
    /// one is open at a time).
    fn text_biz(&mut self, ev: &Event, message_id: &str, out: &mut Sink) {
        let hai = is_hai(Some(ev));
        let fits = |b: &Biz| {
            b.text.as_deref() == Some(message_id)
                || (b.text.is_none() && (b.id == message_id || !hai))
        };
        match &mut self.biz {
            Some(b) if fits(b) => {
                if b.text.as_deref() != Some(message_id) {
                    b.text = Some(message_id.to_string());
                }
            }
            _ => {
                let id = message_id.to_string();
                let b = self.open_biz(id.clone(), Start::Write("assistant"), ev, false, out);
                b.text = Some(id);
            }
        }
    }

    fn text_end(&mut self, ev: &Event, out: &mut Sink) {
        let EventKind::TextEnd { message_id } = &ev.kind else {
            return;
        };
        let silent = is_synth(ev);
        let ours = matches!(&self.biz, Some(b)
            if b.text.as_deref() == Some(message_id.as_str()) || b.id == *message_id);
        if ours {
            let id = self.biz.take().map(|b| b.id).unwrap_or_default();
            if !silent {
                self.write_biz_end(ev, &id, out);
            }
        } else if is_hai(Some(ev)) && !silent {
            // The END a HAI source sent, for a message closed already (for
            // another: at most one is open at a time).
            self.write_biz_end(ev, message_id, out);
        }
    }

    // ---- reasoning ----------------------------------------------------------

    fn reasoning_start(&mut self, ev: &Event, out: &mut Sink) {
        let EventKind::ReasoningStart { message_id } = &ev.kind else {
            return;
        };
        let now = ev.timestamp.unwrap_or_else(|| self.ctx.clock.now_ms());
        let started = Some((message_id.clone(), now));
        if let Some(start) = kept(ev, wire::X_START) {
            self.open_biz(kept_id(start), Start::Kept(start), ev, false, out)
                .reasoning = started;
        } else if let Some(id) = implicit(ev) {
            self.open_biz(id.to_string(), Start::Silent, ev, false, out)
                .reasoning = started;
        } else {
            let join = is_synth(ev)
                || matches!(&self.biz, Some(b)
                    if b.text.is_some() || b.reasoning.is_some() || !b.auto_close);
            match &mut self.biz {
                Some(b) if join => b.reasoning = started,
                _ => {
                    let id = message_id.clone();
                    self.open_biz(id, Start::Write("assistant"), ev, true, out)
                        .reasoning = started;
                }
            }
        }
    }

    fn reasoning_delta(&mut self, ev: &Event, out: &mut Sink) {
        let EventKind::ReasoningDelta { message_id, delta } = &ev.kind else {
            return;
        };
        let now = ev.timestamp.unwrap_or_else(|| self.ctx.clock.now_ms());
        // When it started: its business message may have been closed for
        // another (at most one is open at a time), and is opened again.
        let since = match &mut self.biz {
            Some(b) => match &b.reasoning {
                Some((id, t)) if id == message_id => *t,
                _ => {
                    b.reasoning = Some((message_id.clone(), now));
                    now
                }
            },
            None => {
                let id = message_id.clone();
                self.open_biz(id, Start::Write("assistant"), ev, true, out)
                    .reasoning = Some((message_id.clone(), now));
                now
            }
        };
        let elapsed = (now - since).max(0) / 1000;
        let d = thinking_delta(ev, delta, elapsed);
        self.write_content(d, vec![], ev, out);
    }

    fn reasoning_end(&mut self, ev: &Event, out: &mut Sink) {
        let EventKind::ReasoningEnd { message_id } = &ev.kind else {
            return;
        };
        if let Some(end) = kept(ev, wire::X_END) {
            self.write_kept(out, wire::BUSINESS_DATA_END, end);
            self.biz = None;
        } else if let Some(b) = &mut self.biz {
            if b.reasoning.as_ref().is_some_and(|(id, _)| id == message_id) {
                b.reasoning = None;
            }
        }
    }

    /// An opaque provider artefact: passed through untranslated.
    fn reasoning_encrypted(&mut self, ev: &Event, out: &mut Sink) {
        let EventKind::ReasoningEncrypted {
            subtype,
            entity_id,
            value,
        } = &ev.kind
        else {
            return;
        };
        let event = json!({"type": "REASONING_ENCRYPTED_VALUE", "subtype": subtype,
                           "entityId": entity_id, "encryptedValue": value});
        let mut f = vec![("event", event)];
        if let Some(o) = ev.origin {
            f.push(("source", json!(o.as_str())));
        }
        self.write(out, wire::RAW, f, Some(ev), false);
    }

    // ---- tool calls -------------------------------------------------------

    fn tool_start(&mut self, ev: &Event, out: &mut Sink) {
        let EventKind::ToolCallStart {
            tool_call_id,
            tool_name,
            parent_message_id,
        } = &ev.kind
        else {
            return;
        };
        self.calls.push(tool_call_id.clone(), ());
        if is_synth(ev) {
            return;
        }
        let fast = [
            ("toolCallId", Fv::Str(tool_call_id)),
            ("toolCallName", Fv::Str(tool_name)),
            (
                "parentMessageId",
                Fv::Str(parent_message_id.as_deref().unwrap_or("")),
            ),
        ];
        let fast = if parent_message_id.is_some() {
            &fast[..]
        } else {
            &fast[..2]
        };
        if self.write_fast(out, wire::TOOL_CALL_START, fast, Some(ev), false) {
            return;
        }
        let mut f = vec![
            ("toolCallId", json!(tool_call_id)),
            ("toolCallName", json!(tool_name)),
        ];
        push_opt(&mut f, "parentMessageId", parent_message_id);
        self.write(out, wire::TOOL_CALL_START, f, Some(ev), false);
    }

    fn tool_args(&mut self, ev: &Event, out: &mut Sink) {
        let EventKind::ToolCallArgs {
            tool_call_id,
            delta,
        } = &ev.kind
        else {
            return;
        };
        // The spec's string form (a frame that sent JSON stands as received
        // on a same-dialect route).
        let f = [
            ("toolCallId", Fv::Str(tool_call_id)),
            ("delta", Fv::Str(delta)),
        ];
        if self.write_fast(out, wire::TOOL_CALL_ARGS, &f, Some(ev), false) {
            return;
        }
        let f = vec![("toolCallId", json!(tool_call_id)), ("delta", json!(delta))];
        self.write(out, wire::TOOL_CALL_ARGS, f, Some(ev), false);
    }

    fn tool_end(&mut self, ev: &Event, out: &mut Sink) {
        let EventKind::ToolCallEnd { tool_call_id } = &ev.kind else {
            return;
        };
        self.calls.remove_all(tool_call_id);
        if is_synth(ev) {
            return;
        }
        let f = [("toolCallId", Fv::Str(tool_call_id))];
        if !self.write_fast(out, wire::TOOL_CALL_END, &f, Some(ev), false) {
            let f = vec![("toolCallId", json!(tool_call_id))];
            self.write(out, wire::TOOL_CALL_END, f, Some(ev), false);
        }
    }

    fn tool_result(&mut self, ev: &Event, out: &mut Sink) {
        let EventKind::ToolCallResult {
            tool_call_id,
            message_id,
            content,
        } = &ev.kind
        else {
            return;
        };
        if is_hai(Some(ev)) {
            return self.own_tool_result(ev, tool_call_id, message_id, content, out);
        }
        let mid = message_id
            .clone()
            .unwrap_or_else(|| self.ctx.ids.next("msg"));
        // `agui_content` keeps a string as it is.
        if content.is_string() {
            let fast = [
                ("messageId", Fv::Str(&mid)),
                ("toolCallId", Fv::Str(tool_call_id)),
                ("content", Fv::Json(content)),
                ("role", Fv::Str("tool")),
            ];
            if self.write_fast(out, wire::TOOL_CALL_RESULT, &fast, Some(ev), false) {
                return;
            }
        }
        let f = vec![
            ("messageId", json!(mid)),
            ("toolCallId", json!(tool_call_id)),
            ("content", agui_content(content)),
            ("role", json!("tool")),
        ];
        self.write(out, wire::TOOL_CALL_RESULT, f, Some(ev), false);
    }

    /// A HAI source's result, as it was sent.
    fn own_tool_result(
        &self,
        ev: &Event,
        tool_call_id: &str,
        message_id: &Option<String>,
        content: &Value,
        out: &mut Sink,
    ) {
        let fast = [
            ("messageId", Fv::Str(message_id.as_deref().unwrap_or(""))),
            ("toolCallId", Fv::Str(tool_call_id)),
            ("content", Fv::Json(content)),
        ];
        let fast = if message_id.is_some() {
            &fast[..]
        } else {
            &fast[1..]
        };
        if self.write_fast(out, wire::TOOL_CALL_RESULT, fast, Some(ev), false) {
            return;
        }
        let mut f = vec![];
        push_opt(&mut f, "messageId", message_id);
        f.push(("toolCallId", json!(tool_call_id)));
        f.push(("content", content.clone()));
        self.write(out, wire::TOOL_CALL_RESULT, f, Some(ev), false);
    }

    /// An error or a denial: a result that says so.
    fn tool_failed(&mut self, ev: &Event, out: &mut Sink) {
        let (tool_call_id, content, error) = match &ev.kind {
            EventKind::ToolCallError {
                tool_call_id,
                error,
                ..
            } => (tool_call_id, error.as_str(), error.as_str()),
            EventKind::ToolCallDenied { tool_call_id } => {
                (tool_call_id, "The user denied this tool call.", "denied")
            }
            _ => return,
        };
        let mid = self.ctx.ids.next("msg");
        let f = vec![
            ("messageId", json!(mid)),
            ("toolCallId", json!(tool_call_id)),
            ("content", json!(content)),
            ("role", json!("tool")),
            ("error", json!(error)),
        ];
        self.write(out, wire::TOOL_CALL_RESULT, f, Some(ev), false);
    }

    // ---- state, activity, custom ------------------------------------------

    fn state_delta(&mut self, ev: &Event, patch: &Value, out: &mut Sink) {
        if matches!(patch, Value::Array(_) | Value::Object(_)) {
            let f = [("delta", Fv::Ops(patch))];
            if self.write_fast(out, wire::STATE_DELTA, &f, Some(ev), false) {
                return;
            }
        }
        match with_from(patch) {
            Some(ops) => {
                let f = vec![("delta", ops)];
                self.write(out, wire::STATE_DELTA, f, Some(ev), false);
            }
            // Not a JSON Patch: a client applying it would fail.
            None => self.custom(ev, "state_delta", patch.clone(), out),
        }
    }

    /// Activities travel as `CUSTOM` events.
    fn activity(&mut self, ev: &Event, out: &mut Sink) {
        match &ev.kind {
            EventKind::ActivitySnapshot {
                message_id,
                activity_type,
                content,
                replace,
            } => {
                let mut v = json!({"messageId": message_id, "activityType": activity_type, "content": content});
                if let (Some(r), Some(o)) = (replace, v.as_object_mut()) {
                    o.insert("replace".into(), json!(r));
                }
                self.custom(ev, "activity_snapshot", v, out);
            }
            EventKind::ActivityDelta {
                message_id,
                activity_type,
                patch,
            } => {
                let v =
                    json!({"messageId": message_id, "activityType": activity_type, "patch": patch});
                self.custom(ev, "activity_delta", v, out);
            }
            _ => {}
        }
    }

    fn custom(&mut self, ev: &Event, name: &str, value: Value, out: &mut Sink) {
        self.write(
            out,
            wire::CUSTOM,
            vec![("name", json!(name)), ("value", value)],
            Some(ev),
            false,
        );
    }

    fn unknown(&mut self, ev: &Event, raw: &Value, out: &mut Sink) {
        let hai = is_hai(Some(ev));
        let unknown_type = raw
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|ty| !wire::is_known_type(ty));
        if hai && unknown_type {
            // A HAI frame this adapter does not know: back as it came.
            return match raw {
                Value::Object(o) => self.put(out, o.clone()),
                _ => out.json(raw),
            };
        }
        // Another dialect's, or something no HAI client could read (an
        // AG-Kit `unknown` envelope may claim any JSON, a known type without
        // its fields included, is HAI's): passed through untranslated. The
        // latter in a RAW of our own making, timestamp included.
        let mut f = vec![("event", raw.clone())];
        if let Some(o) = ev.origin {
            f.push(("source", json!(o.as_str())));
        }
        self.write(out, wire::RAW, f, (!hai).then_some(ev), false);
    }

    // ---- collaboration (HAI's own: subagents and content open one too) ------

    fn ensure_collab(&mut self, id: &str, out: &mut Sink) {
        if !self.collabs.iter().any(|c| c == id) {
            self.write(
                out,
                wire::COLLAB_START,
                vec![("messageId", json!(id))],
                None,
                false,
            );
            self.collabs.push(id.to_string());
        }
    }

    fn end_collab(&mut self, id: &str, ev: Option<&Event>, out: &mut Sink) {
        self.collabs.retain(|c| c != id);
        self.write(
            out,
            wire::COLLAB_END,
            vec![("messageId", json!(id))],
            ev,
            false,
        );
    }

    fn collab_content(&mut self, ev: &Event, id: &str, delta: Value, out: &mut Sink) {
        let f = vec![("delta", delta), ("messageId", json!(id))];
        self.write(out, wire::COLLAB_CONTENT, f, Some(ev), false);
    }

    fn collab_start(&mut self, ev: &Event, out: &mut Sink) {
        let EventKind::CollabStart {
            message_id,
            from,
            to,
        } = &ev.kind
        else {
            return;
        };
        // Already open (content or a subagent may have opened it): a second
        // start would be a second message.
        if self.collabs.contains(message_id) {
            return;
        }
        self.collabs.push(message_id.clone());
        if !is_synth(ev) {
            let mut f = vec![];
            push_opt(&mut f, "from", from);
            push_opt(&mut f, "to", to);
            f.push(("messageId", json!(message_id)));
            self.write(out, wire::COLLAB_START, f, Some(ev), false);
        }
    }

    fn collab_end(&mut self, ev: &Event, out: &mut Sink) {
        let EventKind::CollabEnd { message_id } = &ev.kind else {
            return;
        };
        // Open as the shape stage sees it, but maybe ended already here (by
        // a subagent's end, or a start said twice).
        let open = self.collabs.iter().any(|c| c == message_id);
        if is_synth(ev) {
            self.collabs.retain(|c| c != message_id);
        } else if open || is_hai(Some(ev)) {
            self.end_collab(message_id, Some(ev), out);
        }
    }

    /// A subagent is HAI's agent collaboration: a task handed to another
    /// agent.
    fn subagent_started(&mut self, ev: &Event, out: &mut Sink) {
        let EventKind::SubagentStarted {
            subagent_run_id,
            name,
            description,
        } = &ev.kind
        else {
            return;
        };
        if !self.collabs.contains(subagent_run_id) {
            let f = vec![("to", json!(name)), ("messageId", json!(subagent_run_id))];
            self.write(out, wire::COLLAB_START, f, Some(ev), false);
            self.collabs.push(subagent_run_id.clone());
        }
        let mut task = json!({"id": subagent_run_id, "name": name});
        if let (Some(d), Some(o)) = (description, task.as_object_mut()) {
            o.insert("description".into(), json!(d));
        }
        self.collab_content(ev, subagent_run_id, json!({"task": task}), out);
    }

    /// A subagent's result or error, then the end of its collaboration.
    fn subagent_ended(&mut self, ev: &Event, out: &mut Sink) {
        let (id, delta) = match &ev.kind {
            EventKind::SubagentFinished {
                subagent_run_id,
                result,
                outcome,
            } => {
                let mut d = Map::new();
                if let Some(r) = result {
                    d.insert("result".into(), r.clone());
                }
                if let Some(o) = outcome {
                    d.insert("outcome".into(), o.clone());
                }
                (subagent_run_id, (!d.is_empty()).then_some(Value::Object(d)))
            }
            EventKind::SubagentError {
                subagent_run_id,
                message,
                code,
            } => {
                let mut e = json!({"message": message});
                if let (Some(c), Some(o)) = (code, e.as_object_mut()) {
                    o.insert("code".into(), json!(c));
                }
                (subagent_run_id, Some(json!({"error": e})))
            }
            _ => return,
        };
        self.ensure_collab(id, out);
        if let Some(d) = delta {
            self.collab_content(ev, id, d, out);
        }
        self.end_collab(id, Some(ev), out);
    }
}

/// How [`HaiEncoder::open_biz`] starts a business message.
enum Start<'a> {
    /// The HAI source's own START frame.
    Kept(&'a Map<String, Value>),
    /// The HAI source had none.
    Silent,
    /// Synthesize one with this role.
    Write(&'static str),
}

impl Encoder for HaiEncoder {
    fn set_now(&mut self, ms: i64) {
        self.ctx.clock = babelgate_core::Clock::Fixed(ms);
    }

    fn unframed(&self) -> u64 {
        self.unframed.get()
    }

    fn writes_binary(&self) -> bool {
        self.ctx.binary
    }

    fn dialect(&self) -> Dialect {
        Dialect::Hai
    }

    /// Events come shaped (see `babelgate_core::shape`), but for the
    /// `RunError` of `fail`; the run's rules left here are HAI's own.
    fn encode_to(&mut self, ev: &Event, out: &mut Sink) {
        match (&self.run, &ev.kind) {
            // Nothing after `finish`; and one end per run: an error after
            // the run ended (the shape stage passes one, `fail` may come
            // after the end) is not said.
            (Run::Done, _) | (Run::Ended, EventKind::RunError { .. }) => return,
            // `RUN_STARTED` first, for the two the shape stage does not
            // start a run for: `fail`'s error, and an unknown event (which
            // the stage leaves outside runs).
            (
                Run::NotStarted | Run::Ended,
                EventKind::RunError { .. } | EventKind::Unknown { .. },
            ) => self.start_run(out),
            _ => {}
        }
        if !is_content(&ev.kind) {
            self.close_idle_biz(out);
        }
        self.encode_kind(ev, out);
    }

    /// The end of the stream, cut or not (the shape stage does not see it):
    /// a run, if none was written, and its end, closing what is open.
    fn finish_to(&mut self, out: &mut Sink) {
        match self.run {
            Run::Done => return,
            Run::NotStarted => {
                self.start_run(out);
                self.finish_run(None, out);
            }
            Run::Open { .. } => self.finish_run(None, out),
            Run::Ended => {}
        }
        self.run = Run::Done;
    }
}

// ---- helpers ------------------------------------------------------------------

/// The `messageId` of a START frame a HAI source sent.
fn kept_id(start: &Map<String, Value>) -> String {
    start
        .get("messageId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A source's widget data.
fn source_data(kind: &EventKind) -> Value {
    let EventKind::Source {
        source_kind,
        source_id,
        url,
        title,
        media_type,
        filename,
    } = kind
    else {
        return Value::Null;
    };
    let mut d = Map::new();
    d.insert("sourceType".into(), json!(source_kind));
    d.insert("id".into(), json!(source_id));
    for (k, v) in [
        ("url", url),
        ("title", title),
        ("mediaType", media_type),
        ("filename", filename),
    ] {
        if let Some(v) = v {
            d.insert(k.into(), json!(v));
        }
    }
    Value::Object(d)
}

/// A field's value for [`HaiEncoder::write_fast`], borrowed from the event.
#[derive(Clone, Copy)]
enum Fv<'a> {
    Str(&'a str),
    /// `{"output":{"type":"text","content":<text>}}`
    Text(&'a str),
    Int(i64),
    Json(&'a Value),
    /// A JSON Patch as [`with_from`] makes it (`from` added to each op).
    Ops(&'a Value),
}

impl Fv<'_> {
    /// The bytes serde_json writes for the value `write` would build.
    fn write(self, buf: &mut Vec<u8>) {
        use babelgate_core::json::write_str;
        match self {
            Fv::Str(s) => write_str(buf, s),
            Fv::Text(s) => {
                buf.extend_from_slice(br#"{"output":{"type":"text","content":"#);
                write_str(buf, s);
                buf.extend_from_slice(b"}}");
            }
            Fv::Int(n) => json_to(buf, &n),
            Fv::Json(v) => json_to(buf, v),
            Fv::Ops(patch) => match patch {
                Value::Array(ops) => {
                    buf.push(b'[');
                    for (i, op) in ops.iter().enumerate() {
                        if i > 0 {
                            buf.push(b',');
                        }
                        write_op(buf, op);
                    }
                    buf.push(b']');
                }
                op => {
                    buf.push(b'[');
                    write_op(buf, op);
                    buf.push(b']');
                }
            },
        }
    }
}

/// A field's value as [`HaiEncoder::write_fast`] writes it.
trait Field {
    fn write_to(&self, buf: &mut Vec<u8>);
}

impl Field for Fv<'_> {
    fn write_to(&self, buf: &mut Vec<u8>) {
        self.write(buf)
    }
}

impl Field for Value {
    fn write_to(&self, buf: &mut Vec<u8>) {
        json_to(buf, self)
    }
}

/// One op of a patch: an object without `from` gets `"from":""` last (where
/// an insert into its map puts it), anything else as it is.
fn write_op(buf: &mut Vec<u8>, op: &Value) {
    match op {
        Value::Object(m) if !m.contains_key("from") => {
            json_to(buf, op);
            // The object's closing brace, replaced.
            buf.pop();
            if !m.is_empty() {
                buf.push(b',');
            }
            buf.extend_from_slice(br#""from":""}"#);
        }
        other => json_to(buf, other),
    }
}

/// serde_json's bytes for `v`.
fn json_to<T: serde::Serialize + ?Sized>(buf: &mut Vec<u8>, v: &T) {
    // Writing a number or a `Value` into memory cannot fail.
    let _ = serde_json::to_writer(&mut *buf, v);
}

/// Whether `write` would merge extras kept from a HAI source into the frame
/// (wire names; `$` notes never, nor a content event's `delta` template).
fn has_extras(ev: Option<&Event>, content: bool) -> bool {
    ev.and_then(|e| e.extra_from(Dialect::Hai))
        .is_some_and(|x| {
            x.keys()
                .any(|k| !(wire::is_private(k) || (content && k == wire::X_DELTA)))
        })
}

/// `{"output":{"type":"text"}}`: the template that `text_delta` fills into
/// what it writes without one.
fn is_text_template(t: &Map<String, Value>) -> bool {
    t.len() == 1
        && matches!(t.get("output"), Some(Value::Object(o))
            if o.len() == 1 && o.get("type").and_then(Value::as_str) == Some(wire::OUTPUT_TEXT))
}

fn is_hai(ev: Option<&Event>) -> bool {
    ev.is_some_and(|e| e.origin == Some(Dialect::Hai))
}

fn is_synth(ev: &Event) -> bool {
    ev.synthesized_by(Dialect::Hai)
}

/// A frame the HAI decoder kept in an extra (`$start`, `$end`).
fn kept<'a>(ev: &'a Event, key: &str) -> Option<&'a Map<String, Value>> {
    ev.extra_from(Dialect::Hai)?.get(key)?.as_object()
}

fn implicit(ev: &Event) -> Option<&str> {
    ev.extra_from(Dialect::Hai)?.get(wire::X_IMPLICIT)?.as_str()
}

fn template(ev: &Event) -> Option<&Value> {
    ev.extra_from(Dialect::Hai)?.get(wire::X_DELTA)
}

fn flag(ev: &Event, key: &str) -> bool {
    ev.extra_from(Dialect::Hai)
        .is_some_and(|x| x.get(key) == Some(&Value::Bool(true)))
}

/// Events that write into a business message (they do not end an idle one).
fn is_content(k: &EventKind) -> bool {
    matches!(
        k,
        EventKind::TextStart { .. }
            | EventKind::TextDelta { .. }
            | EventKind::TextEnd { .. }
            | EventKind::ReasoningPhaseStart { .. }
            | EventKind::ReasoningPhaseEnd { .. }
            | EventKind::ReasoningStart { .. }
            | EventKind::ReasoningDelta { .. }
            | EventKind::ReasoningEnd { .. }
            | EventKind::Data { .. }
            | EventKind::Source { .. }
            | EventKind::File { .. }
    )
}

fn push_opt<'a>(f: &mut Vec<(&'a str, Value)>, key: &'a str, v: &Option<String>) {
    if let Some(v) = v {
        f.push((key, json!(v)));
    }
}

/// `output` of a template (created if the template lacks it).
fn output_of(d: &mut Map<String, Value>) -> &mut Map<String, Value> {
    let o = d
        .entry("output")
        .or_insert_with(|| Value::Object(Map::new()));
    if !o.is_object() {
        *o = Value::Object(Map::new());
    }
    match o {
        Value::Object(m) => m,
        _ => unreachable!("made an object above"),
    }
}

/// Text as HAI writes it: the source's form when it was HAI, otherwise
/// `{output:{type:"text",content}}` (the back-end guide's form, which the
/// front-end guide's `}{` splitting needs; a plain string would break it as
/// soon as a message also holds thinking or widgets).
fn text_delta(ev: &Event, text: &str) -> Value {
    match template(ev) {
        Some(Value::String(_)) => json!(text),
        Some(Value::Object(t)) => {
            let mut d = t.clone();
            let o = output_of(&mut d);
            o.entry("type").or_insert_with(|| json!(wire::OUTPUT_TEXT));
            o.insert("content".into(), json!(text));
            Value::Object(d)
        }
        _ => json!({"output": {"type": wire::OUTPUT_TEXT, "content": text}}),
    }
}

/// Thinking: `{output:{type:"thinking",data:{content,elapsed,thinking,collapse}}}`
/// (elapsed in seconds since the reasoning started; `thinking`/`collapse` as
/// the spec's builder defaults them).
fn thinking_delta(ev: &Event, text: &str, elapsed: i64) -> Value {
    match template(ev) {
        Some(Value::Object(t)) => {
            let mut d = t.clone();
            let o = output_of(&mut d);
            o.entry("type")
                .or_insert_with(|| json!(wire::OUTPUT_THINKING));
            let data = o.entry("data").or_insert_with(|| json!({}));
            if !data.is_object() {
                *data = json!({});
            }
            data["content"] = json!(text);
            Value::Object(d)
        }
        _ => json!({"output": {"type": wire::OUTPUT_THINKING, "data": {
            "content": text, "elapsed": elapsed, "thinking": true, "collapse": true}}}),
    }
}

/// A widget: `{output:{type:<name>, data}}`, or the HAI source's own form.
fn widget_delta(ev: &Event, name: &str, data: &Value) -> Value {
    if is_hai(Some(ev)) && name == wire::RAW_DELTA_NAME && template(ev).is_none() {
        return data.clone();
    }
    match template(ev) {
        Some(Value::Object(t)) => {
            let mut d = t.clone();
            let o = output_of(&mut d);
            o.entry("type").or_insert_with(|| json!(name));
            match (flag(ev, wire::X_INLINE), data) {
                (true, Value::Object(fields)) => {
                    for (k, v) in fields {
                        o.insert(k.clone(), v.clone());
                    }
                }
                _ => {
                    o.insert("data".into(), data.clone());
                }
            }
            Value::Object(d)
        }
        _ => json!({"output": {"type": name, "data": data}}),
    }
}

/// `TOOL_CALL_RESULT.content` must be a string or AG-UI content parts; other
/// JSON (Vercel tool outputs) travels as its JSON text.
fn agui_content(content: &Value) -> Value {
    match content {
        Value::String(_) => content.clone(),
        Value::Array(items)
            if items
                .iter()
                .all(|i| i.get("type").and_then(Value::as_str).is_some()) =>
        {
            content.clone()
        }
        Value::Null => json!(""),
        other => json!(other.to_string()),
    }
}

/// HAI's STATE_DELTA ops always carry `from` ("" when the op has none); a
/// lone op becomes a one-op patch; `None` when the value is no patch at all.
fn with_from(patch: &Value) -> Option<Value> {
    match patch {
        Value::Object(_) => with_from(&Value::Array(vec![patch.clone()])),
        Value::Array(ops) => Some(Value::Array(
            ops.iter()
                .map(|op| match op {
                    Value::Object(m) if !m.contains_key("from") => {
                        let mut m = m.clone();
                        m.insert("from".into(), json!(""));
                        Value::Object(m)
                    }
                    other => other.clone(),
                })
                .collect(),
        )),
        _ => None,
    }
}

/// AG-UI 1.0 `RUN_FINISHED.outcome`.
fn outcome_json(o: &Outcome) -> Option<Value> {
    Some(match o {
        Outcome::Unspecified => return None,
        Outcome::Success {
            pending_tool_call_ids,
        } => {
            let mut m = json!({"type": "success"});
            if let (false, Some(o)) = (pending_tool_call_ids.is_empty(), m.as_object_mut()) {
                o.insert("pendingToolCallIds".into(), json!(pending_tool_call_ids));
            }
            m
        }
        Outcome::Interrupt { interrupts } => json!({
            "type": "interrupt",
            "interrupts": interrupts.iter().map(interrupt_json).collect::<Vec<_>>(),
        }),
        // AG-UI's cancelled outcome is closed: no reason.
        Outcome::Cancelled { .. } => json!({"type": "cancelled"}),
    })
}

fn interrupt_json(i: &Interrupt) -> Value {
    let mut m = Map::new();
    m.insert("id".into(), json!(i.id));
    m.insert("reason".into(), json!(i.reason));
    if let Some(msg) = &i.message {
        m.insert("message".into(), json!(msg));
    }
    if let Some(t) = &i.tool_call_id {
        m.insert("toolCallId".into(), json!(t));
    }
    match &i.payload {
        // AG-UI's responseSchema is an object; anything else keeps its name.
        Some(p @ Value::Object(_)) => {
            m.insert("responseSchema".into(), p.clone());
        }
        Some(p) => {
            m.insert("payload".into(), p.clone());
        }
        None => {}
    }
    for (k, v) in &i.extra {
        m.entry(k.clone()).or_insert_with(|| v.clone());
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests;
