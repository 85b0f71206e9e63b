//! Requests: the body `DefaultChatTransport` (what `useChat` uses) POSTs,
//! `{id, messages: UIMessage[], trigger, messageId?, ...body}`, to and from
//! the neutral [`RunRequest`].
//!
//! An assistant `UIMessage` holds a whole multi-step answer: text, reasoning,
//! tool parts (call and result in one part) and `step-start` boundaries. The
//! neutral history follows AG-UI (and the `ai` package's own
//! `convertToModelMessages`): per step, an assistant message with its text and
//! tool calls, then one `tool` message per result. So `parse_request` splits
//! an assistant message at its step boundaries and `build_request` groups the
//! messages of one answer back into one `UIMessage`.

use babelgate_core::request::{
    is_piece_id, Context, Continued, MediaKind, MediaSource, Message, Part, ResumeEntry, Tool,
    ToolCall, Trigger,
};
use babelgate_core::{Dialect, RequestError, RequestTranslator, Role, RunRequest};

use crate::wire;
use serde_json::{json, Map, Value};

/// Body fields this translator models; the rest go to `forwarded_props`.
const MODELLED_BODY_FIELDS: [&str; 8] = [
    "id",
    "messages",
    "trigger",
    "messageId",
    "state",
    "tools",
    "context",
    "resume",
];

/// Tool part fields that have a slot in the neutral model; every other field
/// of a tool part is kept in `ToolCall::extra`.
const MODELLED_TOOL_FIELDS: [&str; 7] = [
    "type",
    "toolName",
    "toolCallId",
    "state",
    "input",
    "output",
    "errorText",
];

/// The text a denied tool call answers with (the `ai` package's own words).
const DENIED_TEXT: &str = "Tool call execution denied.";

#[derive(Debug, Default, Clone, Copy)]
pub struct VercelRequests;

impl RequestTranslator for VercelRequests {
    fn dialect(&self) -> Dialect {
        Dialect::Vercel
    }

    fn parse_request(&self, body: &[u8]) -> Result<RunRequest, RequestError> {
        let body: Value = serde_json::from_slice(body)
            .map_err(|e| RequestError::new(format!("request body is not valid JSON: {e}")))?;
        parse_body(&body)
    }

    fn build_request(&self, request: &RunRequest) -> Result<Value, RequestError> {
        Ok(build_body(request))
    }
}

fn parse_body(body: &Value) -> Result<RunRequest, RequestError> {
    let obj = body
        .as_object()
        .ok_or_else(|| RequestError::new("request body must be a JSON object"))?;
    let thread_id = match obj.get("id") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(RequestError::field("id", "must be a string (the chat id)")),
        None => return Err(RequestError::field("id", "missing (the chat id)")),
    };
    let ui_messages = match obj.get("messages") {
        Some(Value::Array(a)) => a.as_slice(),
        Some(_) => {
            return Err(RequestError::field(
                "messages",
                "must be an array of UI messages",
            ))
        }
        None => return Err(RequestError::field("messages", "missing")),
    };
    let trigger = match obj.get("trigger") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s == "submit-message" => Some(Trigger::SubmitMessage),
        Some(Value::String(s)) if s == "regenerate-message" => Some(Trigger::RegenerateMessage),
        Some(other) => {
            return Err(RequestError::field(
                "trigger",
                format!("expected \"submit-message\" or \"regenerate-message\", got {other}"),
            ))
        }
    };
    let message_id = match obj.get("messageId") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(RequestError::field("messageId", "must be a string")),
    };

    // The real client already cut the history before a regenerate; a client
    // that sends it whole still gets the answer being replaced dropped.
    let mut ui_messages = ui_messages;
    if trigger == Some(Trigger::RegenerateMessage) {
        if let Some((last, rest)) = ui_messages.split_last() {
            if last.get("role").and_then(Value::as_str) == Some("assistant") {
                ui_messages = rest;
            }
        }
    }
    let (messages, mut resume) = ui_to_core_messages(ui_messages, "messages")?;

    let mut request = RunRequest {
        thread_id,
        messages,
        trigger,
        ..Default::default()
    };

    // messageId names the assistant message a submit continues (after a
    // front-end tool or an approval). When it names anything else (a user
    // message being edited, a regenerated message) it is kept for a Vercel
    // upstream only: continuing a user message would overwrite it.
    if let Some(id) = message_id {
        let continued = (trigger != Some(Trigger::RegenerateMessage))
            .then(|| {
                ui_messages.iter().rfind(|m| {
                    m.get("id").and_then(Value::as_str) == Some(id.as_str())
                        && m.get("role").and_then(Value::as_str) == Some("assistant")
                })
            })
            .flatten();
        if let Some(m) = continued {
            request.continued = continued_parts(m);
            request.continue_message_id = Some(id);
        } else {
            request.extra.insert("messageId".into(), Value::String(id));
        }
    }

    // State: an explicit body field wins; otherwise the latest `data-state`
    // part the gateway wrote into the history.
    request.state = match obj.get("state") {
        Some(Value::Null) | None => state_from_history(ui_messages),
        Some(v) => Some(v.clone()),
    };

    let mut forwarded = Map::new();
    for (k, v) in obj {
        if !MODELLED_BODY_FIELDS.contains(&k.as_str()) {
            forwarded.insert(k.clone(), v.clone());
        }
    }
    // Tools, context and resume are no Vercel fields, but an app can pass them
    // in useChat's `body` for an AG-UI agent; a shape we cannot read is left
    // to the agent in forwarded_props.
    if let Some(v) = obj.get("tools") {
        match serde_json::from_value::<Vec<Tool>>(v.clone()) {
            Ok(tools) => request.tools = tools,
            Err(_) => {
                forwarded.insert("tools".into(), v.clone());
            }
        }
    }
    if let Some(v) = obj.get("context") {
        match serde_json::from_value::<Vec<Context>>(v.clone()) {
            Ok(context) => request.context = context,
            Err(_) => {
                forwarded.insert("context".into(), v.clone());
            }
        }
    }
    if let Some(v) = obj.get("resume") {
        match parse_resume(v) {
            Some(entries) => resume.extend(entries),
            None => {
                forwarded.insert("resume".into(), v.clone());
            }
        }
    }
    request.resume = resume;
    if !forwarded.is_empty() {
        request.forwarded_props = Some(Value::Object(forwarded));
    }
    Ok(request)
}

/// `resume: [{interruptId, status?, payload?}]` (AG-UI's shape).
fn parse_resume(v: &Value) -> Option<Vec<ResumeEntry>> {
    let mut out = Vec::new();
    for e in v.as_array()? {
        let o = e.as_object()?;
        let id = o
            .get("interruptId")
            .or_else(|| o.get("interrupt_id"))?
            .as_str()?;
        let status = match o.get("status") {
            None | Some(Value::Null) => "resolved".to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return None,
        };
        out.push(ResumeEntry {
            interrupt_id: id.to_string(),
            status,
            payload: o.get("payload").filter(|p| !p.is_null()).cloned(),
        });
    }
    Some(out)
}

/// Replays the `data-state` parts of the history: plain ones hold the whole
/// state, `{type:"snapshot"}`/`{type:"delta"}` envelopes set or patch it.
fn state_from_history(ui_messages: &[Value]) -> Option<Value> {
    let mut state: Option<Value> = None;
    for m in ui_messages {
        let Some(parts) = m.get("parts").and_then(Value::as_array) else {
            continue;
        };
        for p in parts {
            if p.get("type").and_then(Value::as_str) != Some("data-state") {
                continue;
            }
            let Some(data) = p.get("data") else { continue };
            match crate::decoder::state_envelope(data) {
                Some(crate::decoder::StateForm::Snapshot(s)) => state = Some(s.clone()),
                Some(crate::decoder::StateForm::Delta(patch)) => {
                    let mut next = state.clone().unwrap_or_else(|| json!({}));
                    if apply_patch(&mut next, patch) {
                        state = Some(next);
                    }
                }
                None => state = Some(data.clone()),
            }
        }
    }
    state
}

/// Applies an RFC 6902 patch; false (and `doc` unchanged) when it does not apply.
pub(crate) fn apply_patch(doc: &mut Value, patch: &Value) -> bool {
    // Read from the borrowed patch (no clone); json_patch::patch reverts
    // what it applied when an operation fails.
    match <Vec<json_patch::PatchOperation> as serde::Deserialize>::deserialize(patch) {
        Ok(ops) => json_patch::patch(doc, &ops).is_ok(),
        Err(_) => false,
    }
}

fn str_field<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<&'a str, RequestError> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(RequestError::field(
            format!("{path}.{key}"),
            "must be a string",
        )),
        None => Err(RequestError::field(format!("{path}.{key}"), "missing")),
    }
}

/// UI messages (as JSON) to neutral messages, plus the approval answers they
/// hold. `path` names the array in error messages.
pub(crate) fn ui_to_core_messages(
    ui_messages: &[Value],
    path: &str,
) -> Result<(Vec<Message>, Vec<ResumeEntry>), RequestError> {
    let mut out = Vec::new();
    let mut resume = Vec::new();
    for (i, m) in ui_messages.iter().enumerate() {
        let mpath = format!("{path}[{i}]");
        let obj = m
            .as_object()
            .ok_or_else(|| RequestError::field(mpath.clone(), "must be an object"))?;
        let id = str_field(obj, "id", &mpath)?.to_string();
        let role = match obj.get("role").and_then(Value::as_str) {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            Some("system") => Role::System,
            Some(other) => {
                return Err(RequestError::field(
                    format!("{mpath}.role"),
                    format!("expected \"system\", \"user\" or \"assistant\", got \"{other}\""),
                ))
            }
            None => return Err(RequestError::field(format!("{mpath}.role"), "missing")),
        };
        let parts: Vec<Value> = match (obj.get("parts"), obj.get("content")) {
            (Some(Value::Array(p)), _) => p.clone(),
            // Messages of older clients (ai 4) carried a content string.
            (None, Some(Value::String(s))) => vec![json!({"type": "text", "text": s})],
            (Some(_), _) => {
                return Err(RequestError::field(
                    format!("{mpath}.parts"),
                    "must be an array",
                ))
            }
            (None, _) => return Err(RequestError::field(format!("{mpath}.parts"), "missing")),
        };
        let metadata = obj.get("metadata").filter(|v| !v.is_null()).cloned();
        if role == Role::Assistant {
            assistant_to_core(&id, metadata, &parts, &mpath, &mut out, &mut resume)?;
        } else {
            let mut content = Vec::new();
            for (j, p) in parts.iter().enumerate() {
                let ppath = format!("{mpath}.parts[{j}]");
                match content_part(p, &ppath)? {
                    Some(part) => content.push(part),
                    None => content.push(Part::Other { value: p.clone() }),
                }
            }
            // More than one part is a list of parts (pydantic-ai's
            // VercelAIAdapter keeps a user message's text parts apart too);
            // one text part is plain text.
            let mut msg = Message {
                id,
                role,
                content_is_parts: content.len() > 1
                    || content.iter().any(|p| !matches!(p, Part::Text { .. })),
                content,
                ..Default::default()
            };
            if let Some(md) = metadata {
                msg.extra.insert("metadata".into(), md);
            }
            out.push(msg);
        }
    }
    Ok((out, resume))
}

/// The calls and approval requests a continued message holds: the client
/// finds a chunk's call or approval only among them (or the new ones).
fn continued_parts(message: &Value) -> Continued {
    let mut held = Continued::default();
    let parts = message.get("parts").and_then(Value::as_array);
    for p in parts.into_iter().flatten() {
        if let Some(id) = p.get("toolCallId").and_then(Value::as_str) {
            held.tool_calls.push(id.to_string());
        }
        if let Some(id) = p.pointer("/approval/id").and_then(Value::as_str) {
            held.approvals.push(id.to_string());
        }
    }
    held
}

/// Text, reasoning and file parts; `None` for any other part type.
fn content_part(p: &Value, ppath: &str) -> Result<Option<Part>, RequestError> {
    let obj = p
        .as_object()
        .ok_or_else(|| RequestError::field(ppath, "must be an object"))?;
    let ty = str_field(obj, "type", ppath)?;
    Ok(match ty {
        "text" => Some(Part::Text {
            text: str_field(obj, "text", ppath)?.to_string(),
        }),
        "reasoning" => Some(Part::Reasoning {
            text: str_field(obj, "text", ppath)?.to_string(),
        }),
        "file" => {
            let url = str_field(obj, "url", ppath)?;
            let media_type = str_field(obj, "mediaType", ppath)?;
            Some(Part::Media {
                media: MediaKind::from_media_type(media_type),
                source: MediaSource::from_url(url, Some(media_type)),
                filename: obj
                    .get("filename")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            })
        }
        _ => None,
    })
}

/// One step of an assistant answer being collected: its parts in order
/// (tool calls where they were made) and the results of its calls, which
/// follow it in the history.
#[derive(Default)]
struct Block {
    content: Vec<Part>,
    results: Vec<Message>,
    /// The upstream's id of the message this block was (see
    /// `wire::IDS_KEY`), when its parts name one.
    upstream_id: Option<String>,
}

impl Block {
    /// Whether the block says nothing an upstream could take: only data
    /// parts (a step that held a `data-state` part) or nothing at all.
    fn carries_nothing(&self) -> bool {
        self.results.is_empty()
            && self.content.iter().all(|p| {
                matches!(p, Part::Other { value }
                    if value.get("type").and_then(Value::as_str).is_some_and(|t| t.starts_with("data-")))
            })
    }
}

/// The upstream message id a part names in its metadata (text and reasoning
/// `providerMetadata`, a tool part's `callProviderMetadata`).
fn part_upstream_id(p: &Value) -> Option<&str> {
    wire::metadata_id(p.get("providerMetadata"))
        .or_else(|| wire::metadata_id(p.get("callProviderMetadata")))
}

/// The id of the `n`-th (0-based) step message of assistant message `id`.
fn step_message_id(id: &str, n: usize) -> String {
    if n == 0 {
        id.to_string()
    } else {
        format!("{id}:{}", n + 1)
    }
}

fn assistant_to_core(
    id: &str,
    metadata: Option<Value>,
    parts: &[Value],
    mpath: &str,
    out: &mut Vec<Message>,
    resume: &mut Vec<ResumeEntry>,
) -> Result<(), RequestError> {
    let mut metadata = metadata;
    let mut emitted = 0usize;
    let mut block = Block::default();
    let mut flush = |block: &mut Block, out: &mut Vec<Message>, metadata: &mut Option<Value>| {
        if block.carries_nothing() {
            // Not sent: an empty assistant message is no message to an
            // upstream (some refuse it; one that merges by id appends it).
            *block = Block::default();
            return;
        }
        let taken = std::mem::take(block);
        let mut msg = Message {
            id: taken
                .upstream_id
                .unwrap_or_else(|| step_message_id(id, emitted)),
            role: Role::Assistant,
            content_is_parts: true,
            content: taken.content,
            ..Default::default()
        };
        if let Some(md) = metadata.take() {
            msg.extra.insert("metadata".into(), md);
        }
        emitted += 1;
        out.push(msg);
        out.extend(taken.results);
    };
    // Without step-start parts (as pydantic-ai's dump_messages writes them,
    // one model response per message), text, reasoning or a file after a
    // call that has its result starts the next step, as pydantic-ai's
    // VercelAIAdapter.load_messages reads it.
    let has_steps = parts
        .iter()
        .any(|p| p.get("type").and_then(Value::as_str) == Some("step-start"));
    for (j, p) in parts.iter().enumerate() {
        let ppath = format!("{mpath}.parts[{j}]");
        // A part of another upstream message starts the next message: the
        // upstream gets its history back one message per message it wrote.
        if let Some(up) = part_upstream_id(p) {
            if block.upstream_id.as_deref().is_some_and(|b| b != up) {
                flush(&mut block, out, &mut metadata);
            }
            if block.upstream_id.is_none() {
                block.upstream_id = Some(up.to_string());
            }
        }
        if let Some(part) = content_part(p, &ppath)? {
            if !has_steps && !block.results.is_empty() {
                flush(&mut block, out, &mut metadata);
            }
            // An empty text part says nothing (the gateway writes one to end
            // an empty continuation; some models refuse empty text blocks).
            if !matches!(&part, Part::Text { text } if text.is_empty()) {
                block.content.push(part);
            }
            continue;
        }
        // content_part checked that p is an object with a string type
        let ty = p.get("type").and_then(Value::as_str).unwrap_or_default();
        if ty == "step-start" {
            flush(&mut block, out, &mut metadata);
        } else if ty == "dynamic-tool" || ty.starts_with("tool-") {
            tool_part(p, ty, &ppath, &mut block, resume)?;
        } else {
            block.content.push(Part::Other { value: p.clone() });
        }
    }
    flush(&mut block, out, &mut metadata);
    let only_data = parts.iter().any(|p| {
        p.get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t.starts_with("data-"))
    });
    if emitted == 0 && !only_data {
        // An answer with nothing in it (it failed before any part) still
        // holds the message's place.
        let mut msg = Message {
            id: id.to_string(),
            role: Role::Assistant,
            ..Default::default()
        };
        if let Some(md) = metadata {
            msg.extra.insert("metadata".into(), md);
        }
        out.push(msg);
    }
    Ok(())
}

fn tool_part(
    p: &Value,
    ty: &str,
    ppath: &str,
    block: &mut Block,
    resume: &mut Vec<ResumeEntry>,
) -> Result<(), RequestError> {
    let obj = p
        .as_object()
        .ok_or_else(|| RequestError::field(ppath, "must be an object"))?;
    let dynamic = ty == "dynamic-tool";
    let name = if dynamic {
        str_field(obj, "toolName", ppath)?.to_string()
    } else {
        ty.strip_prefix("tool-").unwrap_or(ty).to_string()
    };
    let call_id = str_field(obj, "toolCallId", ppath)?.to_string();
    let state = str_field(obj, "state", ppath)?;
    if state == "input-streaming" {
        // A call whose input never completed is no call yet (the ai package
        // leaves it out of the model messages too).
        return Ok(());
    }
    let arguments = match obj.get("input") {
        None => "{}".to_string(),
        Some(v) => v.to_string(),
    };
    let mut extra = Map::new();
    for (k, v) in obj {
        if !MODELLED_TOOL_FIELDS.contains(&k.as_str()) {
            extra.insert(k.clone(), v.clone());
        }
    }
    if dynamic {
        extra.insert("dynamic".into(), Value::Bool(true));
    }
    let approval = obj.get("approval").and_then(Value::as_object);
    // The upstream's id of the result's tool message, when it named one.
    let result_id = wire::metadata_id(obj.get("resultProviderMetadata"))
        .map(str::to_string)
        .unwrap_or_else(|| format!("{call_id}-result"));
    let result = |content: String, error: Option<String>| Message {
        id: result_id.clone(),
        role: Role::Tool,
        content: vec![Part::Text { text: content }],
        tool_call_id: Some(call_id.clone()),
        error,
        ..Default::default()
    };
    match state {
        "input-available" | "approval-requested" => {}
        "approval-responded" => {
            let approval = approval.ok_or_else(|| {
                RequestError::field(
                    format!("{ppath}.approval"),
                    "missing for state approval-responded",
                )
            })?;
            let approval_id = str_field(approval, "id", &format!("{ppath}.approval"))?;
            let approved = approval
                .get("approved")
                .and_then(Value::as_bool)
                .ok_or_else(|| {
                    RequestError::field(format!("{ppath}.approval.approved"), "must be a boolean")
                })?;
            let mut payload = Map::new();
            payload.insert("approved".into(), Value::Bool(approved));
            if let Some(r) = approval.get("reason").filter(|r| !r.is_null()) {
                payload.insert("reason".into(), r.clone());
            }
            resume.push(ResumeEntry {
                interrupt_id: approval_id.to_string(),
                status: "resolved".into(),
                payload: Some(Value::Object(payload)),
            });
        }
        "output-available" => {
            let output = obj.get("output").cloned().unwrap_or(Value::Null);
            let (text, keep) = match &output {
                // A string that reads as JSON would come back as that JSON:
                // keep the original next to the text.
                Value::String(s) => (s.clone(), serde_json::from_str::<Value>(s).is_ok()),
                other => (other.to_string(), false),
            };
            let mut msg = result(text, None);
            if keep {
                msg.extra.insert("output".into(), output);
            }
            block.results.push(msg);
        }
        "output-error" => {
            let error = str_field(obj, "errorText", ppath)?.to_string();
            block.results.push(result(error.clone(), Some(error)));
        }
        "output-denied" => {
            let text = approval
                .and_then(|a| a.get("reason"))
                .and_then(Value::as_str)
                .unwrap_or(DENIED_TEXT)
                .to_string();
            let mut msg = result(text.clone(), Some(text));
            msg.extra
                .insert("state".into(), Value::String("output-denied".into()));
            block.results.push(msg);
        }
        other => {
            return Err(RequestError::field(
                format!("{ppath}.state"),
                format!("unknown tool part state \"{other}\""),
            ))
        }
    }
    // The call keeps its place among the step's parts; its result waits in
    // `block.results` and follows the step in the history.
    block.content.push(Part::ToolCall(ToolCall {
        id: call_id,
        name,
        arguments,
        extra,
    }));
    Ok(())
}

fn build_body(request: &RunRequest) -> Value {
    let mut body = Map::new();
    // useChat's `body` extras are spread first, so the fields the transport
    // owns win over them, as in DefaultChatTransport.
    if let Some(Value::Object(fp)) = &request.forwarded_props {
        for (k, v) in fp {
            if !MODELLED_BODY_FIELDS.contains(&k.as_str()) {
                body.insert(k.clone(), v.clone());
            }
        }
    } else if let Some(fp) = &request.forwarded_props {
        body.insert("forwardedProps".into(), fp.clone());
    }
    body.insert("id".into(), Value::String(request.thread_id.clone()));
    let (messages, leftover_resume) = core_to_ui_messages_with(&request.messages, &request.resume);
    body.insert("messages".into(), Value::Array(messages));
    let trigger = match request.trigger {
        Some(Trigger::RegenerateMessage) => "regenerate-message",
        _ => "submit-message",
    };
    body.insert("trigger".into(), Value::String(trigger.into()));
    let message_id = request
        .continue_message_id
        .clone()
        .map(Value::String)
        .or_else(|| request.extra.get("messageId").cloned());
    if let Some(id) = message_id {
        body.insert("messageId".into(), id);
    }
    if let Some(state) = &request.state {
        body.insert("state".into(), state.clone());
    }
    if !request.tools.is_empty() {
        body.insert("tools".into(), json!(request.tools));
    }
    if !request.context.is_empty() {
        body.insert("context".into(), json!(request.context));
    }
    if !leftover_resume.is_empty() {
        let entries: Vec<Value> = leftover_resume
            .iter()
            .map(|e| {
                let mut o = Map::new();
                o.insert("interruptId".into(), Value::String(e.interrupt_id.clone()));
                o.insert("status".into(), Value::String(e.status.clone()));
                if let Some(p) = &e.payload {
                    o.insert("payload".into(), p.clone());
                }
                Value::Object(o)
            })
            .collect();
        body.insert("resume".into(), Value::Array(entries));
    }
    Value::Object(body)
}

/// Neutral messages to UI messages (JSON), as a client would hold them.
pub(crate) fn core_to_ui_messages(messages: &[Message]) -> Vec<Value> {
    core_to_ui_messages_with(messages, &[]).0
}

/// Like [`core_to_ui_messages`]; resume entries that answer a tool call's
/// approval become `approval-responded` parts, the others are returned.
fn core_to_ui_messages_with(
    messages: &[Message],
    resume: &[ResumeEntry],
) -> (Vec<Value>, Vec<ResumeEntry>) {
    let mut used = vec![false; resume.len()];
    let mut out: Vec<Value> = Vec::new();
    let mut i = 0;
    while let Some(m) = messages.get(i) {
        match m.role {
            Role::User | Role::System | Role::Developer => {
                let role = if m.role == Role::User {
                    "user"
                } else {
                    "system"
                };
                let parts: Vec<Value> = m.content.iter().map(|p| ui_part(p, false)).collect();
                out.push(ui_message(&m.id, role, m.extra.get("metadata"), parts));
                i += 1;
            }
            Role::Activity => {
                // No UI message part holds an activity; see docs/mapping/vercel.md.
                i += 1;
            }
            Role::Assistant | Role::Reasoning | Role::Tool => {
                i = assistant_group(messages, i, resume, &mut used, &mut out);
            }
        }
    }
    let leftover = resume
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|(e, _)| e.clone())
        .collect();
    (out, leftover)
}

fn ui_message(id: &str, role: &str, metadata: Option<&Value>, parts: Vec<Value>) -> Value {
    let mut o = Map::new();
    o.insert("id".into(), Value::String(id.to_string()));
    o.insert("role".into(), Value::String(role.to_string()));
    if let Some(md) = metadata {
        o.insert("metadata".into(), md.clone());
    }
    o.insert("parts".into(), Value::Array(parts));
    Value::Object(o)
}

/// A content part; assistant text and reasoning are complete in history.
fn ui_part(p: &Part, assistant: bool) -> Value {
    match p {
        Part::Text { text } if assistant => json!({"type": "text", "text": text, "state": "done"}),
        Part::Text { text } => json!({"type": "text", "text": text}),
        Part::Reasoning { text } => json!({"type": "reasoning", "text": text, "state": "done"}),
        Part::Media {
            media,
            source,
            filename,
        } => {
            let media_type = source
                .media_type()
                .map(str::to_string)
                .unwrap_or_else(|| default_media_type(*media).to_string());
            let mut o = Map::new();
            o.insert("type".into(), Value::String("file".into()));
            o.insert("mediaType".into(), Value::String(media_type));
            if let Some(f) = filename {
                o.insert("filename".into(), Value::String(f.clone()));
            }
            o.insert("url".into(), Value::String(source.to_url()));
            Value::Object(o)
        }
        Part::Other { value } => value.clone(),
        // Calls are written by `assistant_group`; one elsewhere is a call
        // waiting for its input to be used.
        Part::ToolCall(call) => tool_call_part(call, &[], &mut []),
    }
}

fn default_media_type(kind: MediaKind) -> &'static str {
    match kind {
        MediaKind::Image => "image/*",
        MediaKind::Audio => "audio/*",
        MediaKind::Video => "video/*",
        MediaKind::Document => "application/pdf",
        MediaKind::File => "application/octet-stream",
    }
}

/// Collects one assistant answer starting at `start`: its step messages and
/// the tool messages between them. A later assistant message belongs to the
/// same answer when tool results precede it (the agent went on after its
/// tools) or its id is a step id of the first one. Returns the next index.
fn assistant_group(
    messages: &[Message],
    start: usize,
    resume: &[ResumeEntry],
    used: &mut [bool],
    out: &mut Vec<Value>,
) -> usize {
    let Some(first) = messages.get(start) else {
        return start.saturating_add(1);
    };
    let group_id = first.id.clone();
    let step_prefix = format!("{group_id}:");
    let mut parts: Vec<Value> = Vec::new();
    let mut i = start;
    let mut prev_was_tool = false;
    // The previous message was reasoning, or made calls whose results are
    // still to come: the next assistant message is the same model response
    // (as pydantic-ai's AGUIAdapter.load_messages merges them), split only
    // because AG-UI says it in several messages.
    let mut same_response = false;
    while let Some(m) = messages.get(i) {
        match m.role {
            Role::Assistant | Role::Reasoning => {
                let step_member = m.id.starts_with(&step_prefix);
                if i > start && !prev_was_tool && !step_member && !same_response {
                    break;
                }
                // A new step: the first message, one after tool results, or
                // a step message of this answer (`{id}:2`); not a piece of a
                // split message (`{id}:p2`) nor the rest of a response.
                let new_step = i == start || prev_was_tool || (step_member && !is_piece_id(&m.id));
                if new_step && !m.content.is_empty() {
                    parts.push(json!({"type": "step-start"}));
                }
                if m.role == Role::Reasoning {
                    // AG-UI reasoning messages: their text is reasoning.
                    let text = m
                        .content
                        .iter()
                        .map(|p| match p {
                            Part::Text { text } | Part::Reasoning { text } => text.as_str(),
                            _ => "",
                        })
                        .collect::<String>();
                    parts.push(json!({"type": "reasoning", "text": text, "state": "done"}));
                } else {
                    for p in &m.content {
                        parts.push(match p {
                            Part::ToolCall(call) => tool_call_part(call, resume, used),
                            p => ui_part(p, true),
                        });
                    }
                }
                prev_was_tool = false;
                same_response = m.role == Role::Reasoning || m.has_tool_calls();
            }
            Role::Tool => {
                let id = m.tool_call_id.clone().unwrap_or_default();
                let target = parts
                    .iter_mut()
                    .rev()
                    .find(|p| part_call_id(p) == Some(&id));
                match target {
                    Some(part) => apply_result(part, m),
                    None => {
                        // A result for a call of an earlier answer updates
                        // that answer; one for a call never seen gets a part.
                        let earlier = out
                            .iter_mut()
                            .rev()
                            .filter_map(|msg| msg.get_mut("parts").and_then(Value::as_array_mut))
                            .flat_map(|ps| ps.iter_mut())
                            .find(|p| part_call_id(p) == Some(&id));
                        match earlier {
                            Some(part) => apply_result(part, m),
                            None => {
                                let mut part = json!({
                                    "type": "dynamic-tool",
                                    "toolName": crate::wire::UNKNOWN_TOOL_NAME,
                                    "toolCallId": id,
                                    "state": "input-available",
                                    "input": {},
                                });
                                apply_result(&mut part, m);
                                parts.push(part);
                            }
                        }
                    }
                }
                prev_was_tool = true;
                same_response = false;
            }
            _ => break,
        }
        i += 1;
    }
    out.push(ui_message(
        &group_id,
        "assistant",
        first.extra.get("metadata"),
        parts,
    ));
    i
}

fn part_call_id(p: &Value) -> Option<&String> {
    match p.get("toolCallId") {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

fn tool_call_part(call: &ToolCall, resume: &[ResumeEntry], used: &mut [bool]) -> Value {
    let dynamic = call.extra.get("dynamic") == Some(&Value::Bool(true));
    let mut o = Map::new();
    if dynamic {
        o.insert("type".into(), Value::String("dynamic-tool".into()));
        o.insert("toolName".into(), Value::String(call.name.clone()));
    } else {
        o.insert("type".into(), Value::String(format!("tool-{}", call.name)));
    }
    o.insert("toolCallId".into(), Value::String(call.id.clone()));
    let input = if call.arguments.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(&call.arguments)
            .unwrap_or_else(|_| Value::String(call.arguments.clone()))
    };
    // Without a result: waiting for its input to be used, or for a human.
    let mut state = "input-available";
    let mut approval = call.extra.get("approval").cloned();
    if let Some(Value::Object(a)) = &mut approval {
        state = if a.get("approved").is_some_and(Value::is_boolean) {
            "approval-responded"
        } else {
            "approval-requested"
        };
        let approval_id = a.get("id").and_then(Value::as_str).map(str::to_string);
        if let Some(aid) = approval_id {
            if let Some((k, entry)) = resume
                .iter()
                .enumerate()
                .find(|(_, e)| e.interrupt_id == aid)
            {
                if let Some(u) = used.get_mut(k) {
                    *u = true;
                }
                let approved = match entry.payload.as_ref().and_then(|p| p.get("approved")) {
                    Some(Value::Bool(b)) => *b,
                    _ => entry.status != "cancelled",
                };
                a.insert("approved".into(), Value::Bool(approved));
                if let Some(r) = entry.payload.as_ref().and_then(|p| p.get("reason")) {
                    a.insert("reason".into(), r.clone());
                }
                state = "approval-responded";
            }
        }
    }
    o.insert("state".into(), Value::String(state.into()));
    o.insert("input".into(), input);
    for (k, v) in &call.extra {
        if k == "dynamic" {
            continue;
        }
        if k == "approval" {
            if let Some(a) = &approval {
                o.insert(k.clone(), a.clone());
            }
            continue;
        }
        o.insert(k.clone(), v.clone());
    }
    Value::Object(o)
}

/// Writes a tool message's result into its tool part.
fn apply_result(part: &mut Value, m: &Message) {
    let Some(o) = part.as_object_mut() else {
        return;
    };
    let text = m.text();
    let denied = m.extra.get("state").and_then(Value::as_str) == Some("output-denied");
    if denied {
        o.insert("state".into(), Value::String("output-denied".into()));
    } else if let Some(err) = &m.error {
        o.insert("state".into(), Value::String("output-error".into()));
        o.insert("errorText".into(), Value::String(err.clone()));
    } else {
        let output = match m.extra.get("output") {
            Some(v) => v.clone(),
            None => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        };
        o.insert("state".into(), Value::String("output-available".into()));
        o.insert("output".into(), output);
    }
}

#[cfg(test)]
mod tests;
