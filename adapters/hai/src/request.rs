//! HAI requests: the AG-UI `RunAgentInput` body a HAI `HttpAgent` POSTs to
//! `/awp` (seed 004, "基础对话场景"): `{threadId, runId, messages, context,
//! tools, forwardedProps}`, plus the AG-UI 1.0 fields `parentRunId`, `state`
//! and `resume`. HAI messages are `BaseMessage {id, role, content?, name?,
//! timestamp?, extra?}`; `timestamp` and `extra` are HAI's own and travel in
//! [`Message::extra`]. The message mapping here is shared with the decoder and
//! encoder (`MESSAGE_SNAPSHOT` carries the same messages).

use babelgate_core::request::{
    extra_piece, piece_id, Context, MediaKind, MediaSource, Message, Part, Piece, ResumeEntry,
    Tool, ToolCall,
};
use babelgate_core::{Dialect, RequestError, RequestTranslator, Role, RunRequest};
use serde_json::{json, Map, Value};

#[derive(Debug, Default, Clone, Copy)]
pub struct HaiRequests;

/// Request fields this translator models; anything else goes to
/// `RunRequest::extra` and back.
const REQUEST_FIELDS: [&str; 9] = [
    "threadId",
    "runId",
    "parentRunId",
    "state",
    "messages",
    "tools",
    "context",
    "forwardedProps",
    "resume",
];

/// Message fields modelled by [`Message`]; the rest (HAI `timestamp`, `extra`,
/// AG-UI `metadata`, `encryptedValue`...) go to `Message::extra`.
const MESSAGE_FIELDS: [&str; 8] = [
    "id",
    "role",
    "content",
    "name",
    "toolCalls",
    "toolCallId",
    "error",
    "activityType",
];

impl RequestTranslator for HaiRequests {
    fn dialect(&self) -> Dialect {
        Dialect::Hai
    }

    fn parse_request(&self, body: &[u8]) -> Result<RunRequest, RequestError> {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| RequestError::new(format!("request body is not JSON: {e}")))?;
        let Value::Object(obj) = v else {
            return Err(RequestError::new("request body must be a JSON object"));
        };
        let mut req = RunRequest {
            thread_id: req_str(&obj, "threadId")?,
            run_id: req_str(&obj, "runId")?,
            parent_run_id: opt_str(&obj, "parentRunId")?,
            ..Default::default()
        };
        req.state = obj.get("state").filter(|v| !v.is_null()).cloned();
        // An empty `{}` forwards nothing: read as none, so that what
        // `build_request` writes (always an object, as the spec's example
        // does) parses back to the same request.
        req.forwarded_props = obj
            .get("forwardedProps")
            .filter(|v| !v.is_null() && !matches!(v, Value::Object(m) if m.is_empty()))
            .cloned();
        for (i, m) in array(&obj, "messages")?.iter().enumerate() {
            req.messages
                .push(message_from_json(m, &format!("messages[{i}]"))?);
        }
        for (i, t) in array(&obj, "tools")?.iter().enumerate() {
            req.tools.push(tool_from_json(t, &format!("tools[{i}]"))?);
        }
        for (i, c) in array(&obj, "context")?.iter().enumerate() {
            req.context
                .push(context_from_json(c, &format!("context[{i}]"))?);
        }
        for (i, r) in array(&obj, "resume")?.iter().enumerate() {
            req.resume
                .push(resume_from_json(r, &format!("resume[{i}]"))?);
        }
        for (k, v) in obj {
            if !REQUEST_FIELDS.contains(&k.as_str()) {
                req.extra.insert(k, v);
            }
        }
        Ok(req)
    }

    fn build_request(&self, request: &RunRequest) -> Result<Value, RequestError> {
        let mut o = Map::new();
        o.insert("threadId".into(), json!(request.thread_id));
        o.insert("runId".into(), json!(request.run_id));
        if let Some(p) = &request.parent_run_id {
            o.insert("parentRunId".into(), json!(p));
        }
        if let Some(s) = &request.state {
            o.insert("state".into(), s.clone());
        }
        o.insert(
            "messages".into(),
            Value::Array(request.messages.iter().flat_map(messages_to_json).collect()),
        );
        // The spec's request example always carries context, tools and
        // forwardedProps; HAI back ends built on older AG-UI models require them.
        o.insert(
            "context".into(),
            Value::Array(
                request
                    .context
                    .iter()
                    .map(|c| json!({"description": c.description, "value": c.value}))
                    .collect(),
            ),
        );
        o.insert(
            "tools".into(),
            Value::Array(request.tools.iter().map(tool_to_json).collect()),
        );
        o.insert(
            "forwardedProps".into(),
            request.forwarded_props.clone().unwrap_or_else(|| json!({})),
        );
        if !request.resume.is_empty() {
            o.insert(
                "resume".into(),
                Value::Array(
                    request
                        .resume
                        .iter()
                        .map(|r| {
                            let mut e = Map::new();
                            e.insert("interruptId".into(), json!(r.interrupt_id));
                            e.insert("status".into(), json!(r.status));
                            if let Some(p) = &r.payload {
                                e.insert("payload".into(), p.clone());
                            }
                            Value::Object(e)
                        })
                        .collect(),
                ),
            );
        }
        for (k, v) in &request.extra {
            o.entry(k.clone()).or_insert_with(|| v.clone());
        }
        Ok(Value::Object(o))
    }
}

// ---- field helpers ----------------------------------------------------------

fn path_of(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

fn req_str(obj: &Map<String, Value>, key: &str) -> Result<String, RequestError> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(RequestError::field(key, "must be a string")),
        None => Err(RequestError::field(key, "is required")),
    }
}

fn opt_str(obj: &Map<String, Value>, key: &str) -> Result<Option<String>, RequestError> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(Some(s.clone())),
        None | Some(Value::Null) => Ok(None),
        Some(_) => Err(RequestError::field(key, "must be a string")),
    }
}

/// An optional array field (absent or null means empty).
fn array<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<&'a [Value], RequestError> {
    match obj.get(key) {
        Some(Value::Array(a)) => Ok(a),
        None | Some(Value::Null) => Ok(&[]),
        Some(_) => Err(RequestError::field(key, "must be an array")),
    }
}

fn field_str(
    obj: &Map<String, Value>,
    parent: &str,
    key: &str,
) -> Result<Option<String>, RequestError> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(Some(s.clone())),
        None | Some(Value::Null) => Ok(None),
        Some(_) => Err(RequestError::field(
            path_of(parent, key),
            "must be a string",
        )),
    }
}

fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, RequestError> {
    v.as_object()
        .ok_or_else(|| RequestError::field(path, "must be an object"))
}

// ---- messages -----------------------------------------------------------------

/// One HAI/AG-UI message to the neutral form. `path` names it in errors
/// (`messages[2]`).
pub(crate) fn message_from_json(v: &Value, path: &str) -> Result<Message, RequestError> {
    let obj = object(v, path)?;
    let id = field_str(obj, path, "id")?
        .ok_or_else(|| RequestError::field(path_of(path, "id"), "is required"))?;
    let role_s = field_str(obj, path, "role")?
        .ok_or_else(|| RequestError::field(path_of(path, "role"), "is required"))?;
    let role = Role::parse(&role_s).ok_or_else(|| {
        RequestError::field(
            path_of(path, "role"),
            format!("unknown role `{role_s}` (expected user, assistant, system, developer, tool, reasoning or activity)"),
        )
    })?;
    let mut m = Message {
        id,
        role,
        name: field_str(obj, path, "name")?,
        tool_call_id: field_str(obj, path, "toolCallId")?,
        error: field_str(obj, path, "error")?,
        activity_type: field_str(obj, path, "activityType")?,
        ..Default::default()
    };
    match obj.get("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => m.content.push(Part::Text { text: s.clone() }),
        Some(Value::Array(parts)) => {
            m.content_is_parts = true;
            m.content = parts.iter().map(part_from_json).collect();
        }
        // Activity messages carry an object.
        Some(other) if role == Role::Activity => m.content.push(Part::Other {
            value: other.clone(),
        }),
        Some(_) => {
            return Err(RequestError::field(
                path_of(path, "content"),
                "must be a string or an array of content parts",
            ))
        }
    }
    match obj.get("toolCalls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            // The calls follow the text, as in AG-UI.
            for (i, c) in calls.iter().enumerate() {
                m.content.push(Part::ToolCall(tool_call_from_json(
                    c,
                    &format!("{path}.toolCalls[{i}]"),
                )?));
            }
        }
        Some(_) => {
            return Err(RequestError::field(
                path_of(path, "toolCalls"),
                "must be an array",
            ))
        }
    }
    for (k, v) in obj {
        if !MESSAGE_FIELDS.contains(&k.as_str()) {
            m.extra.insert(k.clone(), v.clone());
        }
    }
    Ok(m)
}

fn tool_call_from_json(v: &Value, path: &str) -> Result<ToolCall, RequestError> {
    let obj = object(v, path)?;
    let id = field_str(obj, path, "id")?
        .ok_or_else(|| RequestError::field(path_of(path, "id"), "is required"))?;
    let fpath = path_of(path, "function");
    let f = object(
        obj.get("function")
            .ok_or_else(|| RequestError::field(&fpath, "is required"))?,
        &fpath,
    )?;
    let name = field_str(f, &fpath, "name")?
        .ok_or_else(|| RequestError::field(path_of(&fpath, "name"), "is required"))?;
    let arguments = match f.get("arguments") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        // Some agents send parsed arguments; keep their JSON text.
        Some(other) => other.to_string(),
    };
    let mut extra = Map::new();
    for (k, v) in obj {
        let modelled = k == "id" || k == "function" || (k == "type" && v == "function");
        if !modelled {
            extra.insert(k.clone(), v.clone());
        }
    }
    Ok(ToolCall {
        id,
        name,
        arguments,
        extra,
    })
}

fn media_kind(ty: &str) -> Option<MediaKind> {
    Some(match ty {
        "image" => MediaKind::Image,
        "audio" => MediaKind::Audio,
        "video" => MediaKind::Video,
        "document" => MediaKind::Document,
        _ => return None,
    })
}

/// AG-UI content parts; anything this mapping cannot model exactly stays
/// verbatim as [`Part::Other`].
fn part_from_json(v: &Value) -> Part {
    let other = || Part::Other { value: v.clone() };
    let Some(obj) = v.as_object() else {
        return other();
    };
    let ty = obj.get("type").and_then(Value::as_str).unwrap_or("");
    if ty == "text" && obj.len() == 2 {
        if let Some(t) = obj.get("text").and_then(Value::as_str) {
            return Part::Text { text: t.into() };
        }
    }
    let (Some(kind), Some(src), 2) = (media_kind(ty), obj.get("source"), obj.len()) else {
        return other();
    };
    let Some(src) = src.as_object() else {
        return other();
    };
    let s = |k: &str| src.get(k).and_then(Value::as_str).map(str::to_string);
    let known = |keys: &[&str]| src.keys().all(|k| keys.contains(&k.as_str()));
    let source = match (src.get("type").and_then(Value::as_str), s("value")) {
        (Some("data"), Some(value)) if known(&["type", "value", "mimeType"]) => {
            match s("mimeType") {
                Some(media_type) => MediaSource::Data { value, media_type },
                None => return other(),
            }
        }
        (Some("url"), Some(url)) if known(&["type", "value", "mimeType"]) => MediaSource::Url {
            url,
            media_type: s("mimeType"),
        },
        (Some("file"), Some(value)) if known(&["type", "value", "mimeType", "provider"]) => {
            MediaSource::Handle {
                value,
                provider: s("provider"),
                media_type: s("mimeType"),
            }
        }
        _ => return other(),
    };
    Part::Media {
        media: kind,
        source,
        filename: None,
    }
}

fn part_to_json(p: &Part) -> Option<Value> {
    Some(match p {
        Part::Text { text } => json!({"type": "text", "text": text}),
        Part::Media { media, source, .. } => {
            let ty = match media {
                MediaKind::Image => "image",
                MediaKind::Audio => "audio",
                MediaKind::Video => "video",
                // AG-UI has no generic file part; a document is the nearest.
                MediaKind::Document | MediaKind::File => "document",
            };
            let mut s = Map::new();
            match source {
                MediaSource::Data { value, media_type } => {
                    s.insert("type".into(), json!("data"));
                    s.insert("value".into(), json!(value));
                    s.insert("mimeType".into(), json!(media_type));
                }
                MediaSource::Url { url, media_type } => {
                    s.insert("type".into(), json!("url"));
                    s.insert("value".into(), json!(url));
                    if let Some(mt) = media_type {
                        s.insert("mimeType".into(), json!(mt));
                    }
                }
                MediaSource::Handle {
                    value,
                    provider,
                    media_type,
                } => {
                    s.insert("type".into(), json!("file"));
                    s.insert("value".into(), json!(value));
                    if let Some(p) = provider {
                        s.insert("provider".into(), json!(p));
                    }
                    if let Some(mt) = media_type {
                        s.insert("mimeType".into(), json!(mt));
                    }
                }
            }
            json!({"type": ty, "source": s})
        }
        // AG-UI/HAI content parts have no reasoning part; calls are
        // `toolCalls`.
        Part::Reasoning { .. } | Part::ToolCall(_) => return None,
        Part::Other { value } => value.clone(),
    })
}

/// The neutral message as the HAI messages that say it: one, except an
/// assistant message with string content, which is split as AG-UI splits it
/// (pydantic-ai's `AGUIAdapter`: a reasoning part is a `reasoning` message,
/// text after a tool call starts another assistant message; the first
/// message keeps the id and the kept fields, the others get `{id}:p2`...).
pub(crate) fn messages_to_json(m: &Message) -> Vec<Value> {
    if m.role != Role::Assistant || m.content_is_parts {
        return vec![message_to_json(m)];
    }
    let pieces = m.assistant_pieces();
    if pieces.is_empty() {
        return vec![message_to_json(m)];
    }
    let extra_at = extra_piece(&pieces);
    pieces
        .into_iter()
        .enumerate()
        .map(|(i, piece)| {
            let mut o = Map::new();
            o.insert("id".into(), json!(piece_id(&m.id, i)));
            match piece {
                Piece::Reasoning { text } => {
                    o.insert("role".into(), json!("reasoning"));
                    o.insert("content".into(), json!(text));
                }
                Piece::Reply { text, tool_calls } => {
                    o.insert("role".into(), json!("assistant"));
                    if let Some(t) = text {
                        o.insert("content".into(), json!(t));
                    }
                    if let Some(n) = &m.name {
                        o.insert("name".into(), json!(n));
                    }
                    if !tool_calls.is_empty() {
                        o.insert("toolCalls".into(), tool_calls_to_json(&tool_calls));
                    }
                }
            }
            if i == extra_at {
                for (k, v) in &m.extra {
                    o.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
            Value::Object(o)
        })
        .collect()
}

fn tool_calls_to_json(calls: &[&ToolCall]) -> Value {
    Value::Array(
        calls
            .iter()
            .map(|c| {
                let mut t = Map::new();
                t.insert("id".into(), json!(c.id));
                t.insert("type".into(), json!("function"));
                t.insert(
                    "function".into(),
                    json!({"name": c.name, "arguments": c.arguments}),
                );
                for (k, v) in &c.extra {
                    t.insert(k.clone(), v.clone());
                }
                Value::Object(t)
            })
            .collect(),
    )
}

/// The neutral message as one HAI message (string content unless the
/// source had parts).
pub(crate) fn message_to_json(m: &Message) -> Value {
    let mut o = Map::new();
    o.insert("id".into(), json!(m.id));
    o.insert("role".into(), json!(m.role.as_str()));
    if m.role == Role::Activity {
        let content = m
            .content
            .iter()
            .find_map(|p| match p {
                Part::Other { value } => Some(value.clone()),
                _ => None,
            })
            .unwrap_or_else(|| json!({}));
        o.insert("content".into(), content);
    } else if m.content_is_parts && !matches!(m.role, Role::System | Role::Developer) {
        // (System and developer content is a string: several text parts, as
        // a Vercel system message has, are joined below.)
        o.insert(
            "content".into(),
            Value::Array(m.content.iter().filter_map(part_to_json).collect()),
        );
    } else if m.has_body() || m.role != Role::Assistant {
        // Assistant messages may have only tool calls; every other role's
        // content is required (a string). Several text parts of a user or
        // system message (from Vercel) are kept apart by a newline.
        let mut texts = Vec::new();
        for p in &m.content {
            match p {
                Part::Text { text: t } => texts.push(t.as_str()),
                Part::Reasoning { text: t } if m.role == Role::Reasoning => texts.push(t),
                _ => {}
            }
        }
        let sep = if m.role == Role::Assistant { "" } else { "\n" };
        o.insert("content".into(), json!(texts.join(sep)));
    }
    if let Some(n) = &m.name {
        o.insert("name".into(), json!(n));
    }
    let calls: Vec<&ToolCall> = m.tool_calls().collect();
    if !calls.is_empty() {
        o.insert("toolCalls".into(), tool_calls_to_json(&calls));
    }
    if let Some(id) = &m.tool_call_id {
        o.insert("toolCallId".into(), json!(id));
    }
    if let Some(e) = &m.error {
        o.insert("error".into(), json!(e));
    }
    if let Some(a) = &m.activity_type {
        o.insert("activityType".into(), json!(a));
    }
    for (k, v) in &m.extra {
        o.entry(k.clone()).or_insert_with(|| v.clone());
    }
    Value::Object(o)
}

// ---- tools, context, resume ---------------------------------------------------

fn tool_from_json(v: &Value, path: &str) -> Result<Tool, RequestError> {
    let obj = object(v, path)?;
    let name = field_str(obj, path, "name")?
        .ok_or_else(|| RequestError::field(path_of(path, "name"), "is required"))?;
    let description = field_str(obj, path, "description")?.unwrap_or_default();
    let parameters = match obj.get("parameters") {
        None | Some(Value::Null) => None,
        // Schemas sent as JSON text (AG-Kit style) are parsed, as the core wants.
        Some(Value::String(s)) => Some(serde_json::from_str(s).map_err(|e| {
            RequestError::field(
                path_of(path, "parameters"),
                format!("is a string but not JSON: {e}"),
            )
        })?),
        Some(other) => Some(other.clone()),
    };
    Ok(Tool {
        name,
        description,
        parameters,
    })
}

fn tool_to_json(t: &Tool) -> Value {
    let mut o = Map::new();
    o.insert("name".into(), json!(t.name));
    o.insert("description".into(), json!(t.description));
    if let Some(p) = &t.parameters {
        o.insert("parameters".into(), p.clone());
    }
    Value::Object(o)
}

fn context_from_json(v: &Value, path: &str) -> Result<Context, RequestError> {
    let obj = object(v, path)?;
    let description = field_str(obj, path, "description")?.unwrap_or_default();
    let value = match obj.get("value") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => {
            return Err(RequestError::field(path_of(path, "value"), "is required"))
        }
        // Structured context is kept as its JSON text.
        Some(other) => other.to_string(),
    };
    Ok(Context { description, value })
}

fn resume_from_json(v: &Value, path: &str) -> Result<ResumeEntry, RequestError> {
    let obj = object(v, path)?;
    let interrupt_id = field_str(obj, path, "interruptId")?
        .ok_or_else(|| RequestError::field(path_of(path, "interruptId"), "is required"))?;
    let status = field_str(obj, path, "status")?.unwrap_or_else(|| "resolved".into());
    if status != "resolved" && status != "cancelled" {
        return Err(RequestError::field(
            path_of(path, "status"),
            "must be `resolved` or `cancelled`",
        ));
    }
    Ok(ResumeEntry {
        interrupt_id,
        status,
        payload: obj.get("payload").cloned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: Value) -> Result<RunRequest, RequestError> {
        HaiRequests.parse_request(v.to_string().as_bytes())
    }

    /// The request of the spec's "基础对话场景", as HttpAgent sends it.
    fn spec_request() -> Value {
        json!({
            "threadId": "thread_12345",
            "runId": "run_67890",
            "messages": [
                {"id": "msg_1", "role": "user", "content": "介绍下HAI", "timestamp": 1620000000000_i64,
                 "extra": {"channel": "web"}},
                {"id": "msg_2", "role": "assistant", "content": "",
                 "toolCalls": [{"id": "tool-123", "type": "function",
                                "function": {"name": "confirmAction", "arguments": "{\"action\":\"deploy\"}"}}]},
                {"id": "result-789", "role": "tool", "content": "true", "toolCallId": "tool-123"},
                {"id": "msg_3", "role": "user", "content": [
                    {"type": "text", "text": "看图"},
                    {"type": "image", "source": {"type": "url", "value": "https://x/y.png", "mimeType": "image/png"}},
                    {"type": "binary", "mimeType": "image/png", "data": "AAAA"}
                ]}
            ],
            "context": [{"description": "user locale", "value": "zh-CN"}],
            "tools": [{"name": "confirmAction", "description": "Ask the user to confirm",
                       "parameters": {"type": "object", "properties": {"action": {"type": "string"}}}}],
            "forwardedProps": {},
            "state": {"workflowItems": []},
            "resume": [{"interruptId": "int-1", "status": "resolved", "payload": {"ok": true}}],
            "protocolVersion": "1.0"
        })
    }

    #[test]
    fn parses_the_spec_request() {
        let r = parse(spec_request()).unwrap();
        assert_eq!(r.thread_id, "thread_12345");
        assert_eq!(r.run_id, "run_67890");
        assert_eq!(r.messages.len(), 4);
        assert_eq!(r.messages[0].text(), "介绍下HAI");
        // HAI's own message fields are kept by wire name
        assert_eq!(r.messages[0].extra["timestamp"], 1620000000000_i64);
        assert_eq!(r.messages[0].extra["extra"], json!({"channel": "web"}));
        assert_eq!(
            r.messages[1].tool_calls().next().unwrap().name,
            "confirmAction"
        );
        assert_eq!(r.messages[2].tool_call_id.as_deref(), Some("tool-123"));
        assert!(r.messages[3].content_is_parts);
        assert!(matches!(
            r.messages[3].content[1],
            Part::Media {
                media: MediaKind::Image,
                ..
            }
        ));
        assert!(matches!(r.messages[3].content[2], Part::Other { .. }));
        assert_eq!(r.tools[0].parameters.as_ref().unwrap()["type"], "object");
        assert_eq!(r.context[0].value, "zh-CN");
        assert_eq!(r.forwarded_props, None, "an empty object forwards nothing");
        assert_eq!(r.resume[0].interrupt_id, "int-1");
        assert_eq!(r.extra["protocolVersion"], "1.0");
    }

    #[test]
    fn parse_build_parse_is_stable() {
        let r1 = parse(spec_request()).unwrap();
        let built = HaiRequests.build_request(&r1).unwrap();
        let r2 = parse(built.clone()).unwrap();
        assert_eq!(r1, r2);
        // and the body is what the spec shows
        assert_eq!(built["forwardedProps"], json!({}));
        assert_eq!(built["context"][0]["value"], "zh-CN");
        assert_eq!(built["messages"][0]["timestamp"], 1620000000000_i64);
        assert_eq!(built["messages"][1]["toolCalls"][0]["type"], "function");
        assert_eq!(built["protocolVersion"], "1.0");
        // a minimal body gains the always-present fields and stays stable
        let min = parse(json!({"threadId": "t", "runId": "r", "messages": []})).unwrap();
        let b = HaiRequests.build_request(&min).unwrap();
        assert_eq!(
            b,
            json!({"threadId": "t", "runId": "r", "messages": [], "context": [], "tools": [], "forwardedProps": {}})
        );
        assert_eq!(parse(b).unwrap(), min);
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (json!({"runId": "r"}), "threadId"),
            (json!({"threadId": "t", "runId": 5}), "runId"),
            (
                json!({"threadId": "t", "runId": "r", "messages": {}}),
                "messages",
            ),
            (
                json!({"threadId": "t", "runId": "r", "messages": [{"id": "1", "role": "user", "content": "a"},
                                                                   {"id": "2", "role": "robot", "content": "b"}]}),
                "messages[1].role",
            ),
            (
                json!({"threadId": "t", "runId": "r", "messages": [{"role": "user"}]}),
                "messages[0].id",
            ),
            (
                json!({"threadId": "t", "runId": "r", "messages": [{"id": "1", "role": "user", "content": 5}]}),
                "messages[0].content",
            ),
            (
                json!({"threadId": "t", "runId": "r", "messages": [{"id": "1", "role": "assistant",
                        "toolCalls": [{"id": "c", "function": {}}]}]}),
                "messages[0].toolCalls[0].function.name",
            ),
            (
                json!({"threadId": "t", "runId": "r", "tools": [{"description": "x"}]}),
                "tools[0].name",
            ),
            (
                json!({"threadId": "t", "runId": "r", "context": [{"description": "x"}]}),
                "context[0].value",
            ),
            (
                json!({"threadId": "t", "runId": "r", "resume": [{"interruptId": "i", "status": "maybe"}]}),
                "resume[0].status",
            ),
        ];
        for (body, field) in cases {
            let err = parse(body.clone()).unwrap_err();
            assert_eq!(err.field.as_deref(), Some(field), "{body}: {err}");
            assert!(err.message.contains(field), "{err}");
        }
        assert!(HaiRequests.parse_request(b"not json").is_err());
        assert!(HaiRequests.parse_request(b"[1]").is_err());
    }

    #[test]
    fn a_vercel_step_is_split_as_ag_ui_splits_it() {
        let call = Part::ToolCall(ToolCall {
            id: "c1".into(),
            name: "f".into(),
            arguments: "{}".into(),
            extra: Map::new(),
        });
        let mut system = Message::text_message("s1", Role::System, "a");
        system.content.push(Part::Text { text: "b".into() });
        system.content_is_parts = true;
        let req = RunRequest {
            thread_id: "t".into(),
            run_id: "r".into(),
            messages: vec![
                system,
                Message {
                    id: "a1".into(),
                    role: Role::Assistant,
                    content: vec![
                        Part::Text { text: "x".into() },
                        call,
                        Part::Text { text: "y".into() },
                    ],
                    extra: [("timestamp".to_string(), json!(1))].into_iter().collect(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let b = HaiRequests.build_request(&req).unwrap();
        assert_eq!(
            b["messages"],
            json!([
                {"id": "s1", "role": "system", "content": "a\nb"},
                {"id": "a1", "role": "assistant", "content": "x", "timestamp": 1, "toolCalls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"id": "a1:p2", "role": "assistant", "content": "y"}
            ])
        );
    }

    #[test]
    fn neutral_requests_from_other_dialects_build() {
        let req = RunRequest {
            thread_id: "t".into(),
            run_id: "r".into(),
            messages: vec![
                Message::text_message("u1", Role::User, "hi"),
                Message {
                    id: "a1".into(),
                    role: Role::Assistant,
                    content: vec![
                        Part::Reasoning { text: "hmm".into() },
                        Part::Text {
                            text: "hello".into(),
                        },
                    ],
                    ..Default::default()
                },
                Message {
                    id: "t1".into(),
                    role: Role::Tool,
                    tool_call_id: Some("c1".into()),
                    error: Some("boom".into()),
                    ..Default::default()
                },
            ],
            tools: vec![Tool {
                name: "x".into(),
                description: String::new(),
                parameters: None,
            }],
            forwarded_props: Some(json!({"a": 1})),
            ..Default::default()
        };
        let b = HaiRequests.build_request(&req).unwrap();
        // reasoning is no HAI content but a reasoning message of its own
        assert_eq!(
            b["messages"][1],
            json!({"id": "a1", "role": "reasoning", "content": "hmm"})
        );
        assert_eq!(
            b["messages"][2],
            json!({"id": "a1:p2", "role": "assistant", "content": "hello"})
        );
        assert_eq!(b["messages"][3]["content"], "", "tool content is required");
        assert_eq!(b["messages"][3]["error"], "boom");
        assert_eq!(b["tools"][0], json!({"name": "x", "description": ""}));
        assert_eq!(b["forwardedProps"], json!({"a": 1}));
        let back = parse(b).unwrap();
        assert_eq!(back.messages[0], req.messages[0]);
        assert_eq!(back.forwarded_props, req.forwarded_props);
    }
}
