//! `RunAgentInput` <-> [`RunRequest`], and AG-UI messages <-> core
//! [`Message`]s (also used for MESSAGES_SNAPSHOT).
//!
//! Parsing accepts what `HttpAgent` sends (`threadId`, `runId`,
//! `protocolVersion`, `tools`, `context`, `forwardedProps`, `state`,
//! `messages`, `resume`) and the pre-1.0 `binary` content part, upgraded the
//! way the client's compatibility boundary does. Building writes what the
//! Python SDK's pydantic `RunAgentInput` (and older SDKs that required them)
//! accept: `messages`, `tools`, `context` always present, `state` and
//! `forwardedProps` defaulting to `{}` as `HttpAgent` sends them.

use babelgate_core::request::{
    extra_piece, piece_id, Context, MediaKind, MediaSource, Message, Part, Piece, ResumeEntry,
    Tool, ToolCall,
};
use babelgate_core::{Dialect, RequestError, RequestTranslator, Role, RunRequest};
use serde_json::{json, Map, Value};

use crate::wire::{content_part, extra_field_ok};

#[derive(Debug, Default, Clone, Copy)]
pub struct AgUiRequests;

type Obj = Map<String, Value>;

fn obj<'a>(v: &'a Value, path: &str) -> Result<&'a Obj, RequestError> {
    v.as_object()
        .ok_or_else(|| RequestError::field(path, "must be a JSON object"))
}

fn req_str(o: &Obj, key: &str, path: &str) -> Result<String, RequestError> {
    match o.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(RequestError::field(
            format!("{path}.{key}"),
            "must be a string",
        )),
        None => Err(RequestError::field(format!("{path}.{key}"), "is required")),
    }
}

/// A string the gateway can fill in when absent (ids).
fn lenient_str(o: &Obj, key: &str, path: &str) -> Result<String, RequestError> {
    Ok(opt_str(o, key, path)?.unwrap_or_default())
}

fn opt_str(o: &Obj, key: &str, path: &str) -> Result<Option<String>, RequestError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(RequestError::field(join(path, key), "must be a string")),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn opt_array<'a>(o: &'a Obj, key: &str, path: &str) -> Result<&'a [Value], RequestError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(RequestError::field(join(path, key), "must be an array")),
    }
}

/// Everything in `o` not listed in `known`, kept for a same-dialect peer.
fn rest(o: &Obj, known: &[&str]) -> Obj {
    o.iter()
        .filter(|(k, _)| !known.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Writes kept fields back where they are valid AG-UI (never over a field the
/// builder set). With `own_only`, only fields AG-UI messages describe: the
/// client strips (and warns about) any other.
fn put_extra(o: &mut Obj, extra: &Obj, own_only: bool) {
    const OWN: [&str; 3] = ["metadata", "encryptedValue", "subagentRunId"];
    for (k, v) in extra {
        if !o.contains_key(k)
            && k != "role"
            && (!own_only || OWN.contains(&k.as_str()))
            && extra_field_ok(k, v)
        {
            o.insert(k.clone(), v.clone());
        }
    }
}

// ---- content parts -------------------------------------------------------

fn media_kind(s: &str) -> Option<MediaKind> {
    Some(match s {
        "image" => MediaKind::Image,
        "audio" => MediaKind::Audio,
        "video" => MediaKind::Video,
        "document" => MediaKind::Document,
        _ => return None,
    })
}

/// The client's rule for the legacy binary part and for media with no kind.
fn kind_for_mime(mime: &str) -> MediaKind {
    if mime.starts_with("image/") {
        MediaKind::Image
    } else if mime.starts_with("audio/") {
        MediaKind::Audio
    } else if mime.starts_with("video/") {
        MediaKind::Video
    } else {
        MediaKind::Document
    }
}

fn kind_name(kind: MediaKind, source: &MediaSource) -> &'static str {
    let kind = match kind {
        MediaKind::File => kind_for_mime(source.media_type().unwrap_or("")),
        k => k,
    };
    match kind {
        MediaKind::Image => "image",
        MediaKind::Audio => "audio",
        MediaKind::Video => "video",
        _ => "document",
    }
}

fn parse_source(v: &Value, path: &str) -> Result<MediaSource, RequestError> {
    let o = obj(v, path)?;
    let value = req_str(o, "value", path)?;
    let mime = opt_str(o, "mimeType", path)?;
    match o.get("type").and_then(Value::as_str) {
        Some("data") => Ok(MediaSource::Data {
            value,
            media_type: mime.ok_or_else(|| {
                RequestError::field(join(path, "mimeType"), "is required for inline data")
            })?,
        }),
        Some("url") => Ok(MediaSource::Url {
            url: value,
            media_type: mime,
        }),
        Some("file") => Ok(MediaSource::Handle {
            value,
            provider: opt_str(o, "provider", path)?,
            media_type: mime,
        }),
        _ => Err(RequestError::field(
            join(path, "type"),
            "must be data, url or file",
        )),
    }
}

fn source_to_wire(s: &MediaSource) -> Value {
    let mut o = Obj::new();
    match s {
        MediaSource::Data { value, media_type } => {
            o.insert("type".into(), "data".into());
            o.insert("value".into(), value.clone().into());
            o.insert("mimeType".into(), media_type.clone().into());
        }
        MediaSource::Url { url, media_type } => {
            o.insert("type".into(), "url".into());
            o.insert("value".into(), url.clone().into());
            if let Some(m) = media_type {
                o.insert("mimeType".into(), m.clone().into());
            }
        }
        MediaSource::Handle {
            value,
            provider,
            media_type,
        } => {
            o.insert("type".into(), "file".into());
            o.insert("value".into(), value.clone().into());
            if let Some(p) = provider {
                o.insert("provider".into(), p.clone().into());
            }
            if let Some(m) = media_type {
                o.insert("mimeType".into(), m.clone().into());
            }
        }
    }
    Value::Object(o)
}

fn parse_part(v: &Value, path: &str) -> Result<Part, RequestError> {
    let o = obj(v, path)?;
    let ty = o.get("type").and_then(Value::as_str).unwrap_or("");
    if ty == "text" {
        return Ok(Part::Text {
            text: req_str(o, "text", path)?,
        });
    }
    let filename = o
        .get("metadata")
        .and_then(|m| m.get("filename"))
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(media) = media_kind(ty) {
        let source = o
            .get("source")
            .ok_or_else(|| RequestError::field(join(path, "source"), "is required"))?;
        return Ok(Part::Media {
            media,
            source: parse_source(source, &join(path, "source"))?,
            filename,
        });
    }
    if ty == "binary" {
        // Pre-1.0 shape, upgraded as the client's compatibility boundary does;
        // an id-only part becomes a provider handle.
        let mime = req_str(o, "mimeType", path)?;
        let filename = opt_str(o, "filename", path)?;
        let source = if let Some(data) = opt_str(o, "data", path)?.filter(|d| !d.is_empty()) {
            MediaSource::Data {
                value: data,
                media_type: mime.clone(),
            }
        } else if let Some(url) = opt_str(o, "url", path)?.filter(|u| !u.is_empty()) {
            MediaSource::Url {
                url,
                media_type: Some(mime.clone()),
            }
        } else if let Some(id) = opt_str(o, "id", path)? {
            MediaSource::Handle {
                value: id,
                provider: None,
                media_type: Some(mime.clone()),
            }
        } else {
            return Err(RequestError::field(
                path,
                "a binary part needs data, url or id",
            ));
        };
        return Ok(Part::Media {
            media: kind_for_mime(&mime),
            source,
            filename,
        });
    }
    Ok(Part::Other { value: v.clone() })
}

/// Parts as AG-UI content parts (reasoning parts have no place there).
fn parts_to_wire(parts: &[Part]) -> Vec<Value> {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(json!({"type": "text", "text": text})),
            Part::Media {
                media,
                source,
                filename,
            } => {
                let mut o = Obj::new();
                o.insert("type".into(), kind_name(*media, source).into());
                o.insert("source".into(), source_to_wire(source));
                if let Some(f) = filename {
                    o.insert("metadata".into(), json!({ "filename": f }));
                }
                Some(Value::Object(o))
            }
            Part::Reasoning { .. } | Part::ToolCall(_) => None,
            Part::Other { value } => content_part(value).then(|| value.clone()),
        })
        .collect()
}

fn parse_content_parts(v: &Value, path: &str) -> Result<(Vec<Part>, bool), RequestError> {
    match v {
        Value::String(s) => Ok((vec![Part::Text { text: s.clone() }], false)),
        Value::Array(items) => {
            let parts = items
                .iter()
                .enumerate()
                .map(|(i, p)| parse_part(p, &format!("{path}[{i}]")))
                .collect::<Result<_, _>>()?;
            Ok((parts, true))
        }
        _ => Err(RequestError::field(
            path,
            "must be a string or an array of content parts",
        )),
    }
}

fn text_and_reasoning(m: &Message) -> String {
    let mut out = String::new();
    for p in &m.content {
        if let Part::Text { text } | Part::Reasoning { text } = p {
            out.push_str(text);
        }
    }
    out
}

/// User and tool bodies: a string when the source had one, else parts.
fn body_to_wire(m: &Message) -> Value {
    let all_text = m.content.iter().all(|p| matches!(p, Part::Text { .. }));
    if !m.content_is_parts && all_text {
        Value::String(m.text())
    } else {
        Value::Array(parts_to_wire(&m.content))
    }
}

// ---- messages -------------------------------------------------------------

/// One AG-UI message into the core form; `path` names it in errors
/// (`messages[1]`).
pub fn message_from_wire(v: &Value, path: &str) -> Result<Message, RequestError> {
    let o = obj(v, path)?;
    let role_path = join(path, "role");
    let role_s = match o.get("role") {
        Some(Value::String(s)) => s.as_str(),
        Some(_) => return Err(RequestError::field(role_path, "must be a string")),
        None => return Err(RequestError::field(role_path, "is required")),
    };
    let role = Role::parse(role_s).ok_or_else(|| {
        RequestError::field(
            &role_path,
            format!("unknown role `{role_s}` (expected developer, system, user, assistant, tool, activity or reasoning)"),
        )
    })?;
    let mut m = Message {
        id: lenient_str(o, "id", path)?,
        role,
        ..Default::default()
    };
    let content_path = join(path, "content");
    let content = o.get("content").filter(|v| !v.is_null());
    let mut known: Vec<&str> = vec!["id", "role", "content"];
    match role {
        Role::Developer | Role::System => {
            let text = content
                .map(|c| c.as_str().map(str::to_string))
                .unwrap_or(Some(String::new()))
                .ok_or_else(|| RequestError::field(&content_path, "must be a string"))?;
            m.content = vec![Part::Text { text }];
            m.name = opt_str(o, "name", path)?;
            known.push("name");
        }
        Role::User | Role::Tool => {
            let c = content.ok_or_else(|| RequestError::field(&content_path, "is required"))?;
            let (parts, is_parts) = parse_content_parts(c, &content_path)?;
            m.content = parts;
            m.content_is_parts = is_parts;
            if role == Role::User {
                m.name = opt_str(o, "name", path)?;
                known.push("name");
            } else {
                m.tool_call_id = Some(req_str(o, "toolCallId", path)?);
                m.error = opt_str(o, "error", path)?;
                // A TOOL_CALL_RESULT has no error field, so the encoder marks
                // a failed call in its metadata, which @ag-ui/client merges
                // into the tool message: sent back, it is still a failure.
                let marked = o
                    .get("metadata")
                    .and_then(|md| md.get("error"))
                    .is_some_and(|e| e == &Value::Bool(true));
                if m.error.is_none() && marked {
                    m.error = Some(m.text());
                }
                known.extend(["toolCallId", "error"]);
            }
        }
        Role::Assistant => {
            if let Some(c) = content {
                let text = c
                    .as_str()
                    .ok_or_else(|| RequestError::field(&content_path, "must be a string"))?;
                m.content = vec![Part::Text { text: text.into() }];
            }
            m.name = opt_str(o, "name", path)?;
            for (i, tc) in opt_array(o, "toolCalls", path)?.iter().enumerate() {
                let tpath = format!("{}[{i}]", join(path, "toolCalls"));
                let t = obj(tc, &tpath)?;
                let fpath = join(&tpath, "function");
                let f = obj(
                    t.get("function")
                        .ok_or_else(|| RequestError::field(&fpath, "is required"))?,
                    &fpath,
                )?;
                let arguments = match f.get("arguments") {
                    Some(Value::String(s)) => s.clone(),
                    None | Some(Value::Null) => String::new(),
                    // Some clients send parsed arguments; keep them as JSON text.
                    Some(other) => other.to_string(),
                };
                // The calls follow the text: an AG-UI assistant message is
                // one model response's text, then its calls.
                m.content.push(Part::ToolCall(ToolCall {
                    id: lenient_str(t, "id", &tpath)?,
                    name: req_str(f, "name", &fpath)?,
                    arguments,
                    extra: rest(t, &["id", "type", "function"]),
                }));
            }
            known.extend(["name", "toolCalls"]);
        }
        Role::Reasoning => {
            let text = content
                .map(|c| c.as_str().map(str::to_string))
                .unwrap_or(Some(String::new()))
                .ok_or_else(|| RequestError::field(&content_path, "must be a string"))?;
            m.content = vec![Part::Reasoning { text }];
        }
        Role::Activity => {
            m.activity_type = Some(req_str(o, "activityType", path)?);
            let c = content.ok_or_else(|| RequestError::field(&content_path, "is required"))?;
            if !c.is_object() {
                return Err(RequestError::field(&content_path, "must be a JSON object"));
            }
            m.content = vec![Part::Other { value: c.clone() }];
            known.push("activityType");
        }
    }
    m.extra = rest(o, &known);
    Ok(m)
}

/// One core message as valid AG-UI 1.0 messages, with every kept field: one
/// message, except an assistant message whose parts AG-UI says in several
/// (see [`messages_to_wire_with`]).
pub fn message_to_wire(m: &Message) -> Vec<Value> {
    messages_to_wire_with(m, false)
}

fn tool_calls_to_wire(calls: &[&ToolCall], own_only: bool) -> Value {
    Value::Array(
        calls
            .iter()
            .map(|tc| {
                let mut c = Obj::new();
                c.insert("id".into(), tc.id.clone().into());
                c.insert("type".into(), "function".into());
                c.insert(
                    "function".into(),
                    json!({"name": tc.name, "arguments": tc.arguments}),
                );
                put_extra(&mut c, &tc.extra, own_only);
                Value::Object(c)
            })
            .collect(),
    )
}

/// `own_only`: write back only the kept fields AG-UI messages describe (for
/// messages that came from another dialect).
///
/// An assistant message is written as pydantic-ai's `AGUIAdapter` dumps a
/// model response ([`Message::assistant_pieces`]): a reasoning part becomes a
/// `reasoning` message; text after a tool call starts another assistant
/// message. The first message keeps the id and the kept fields, the others
/// get `{id}:p2`, `{id}:p3`... The tool messages answering the calls follow
/// in the history as they were (after the whole turn, as pydantic-ai writes
/// a response's returns after it).
pub fn messages_to_wire_with(m: &Message, own_only: bool) -> Vec<Value> {
    if m.role != Role::Assistant {
        return vec![message_to_wire_with(m, own_only)];
    }
    let pieces = m.assistant_pieces();
    if pieces.is_empty() {
        // Nothing said (a failed answer, or only parts AG-UI has no place
        // for): the message still holds its place.
        let mut o = Obj::new();
        o.insert("id".into(), m.id.clone().into());
        o.insert("role".into(), "assistant".into());
        if let Some(n) = &m.name {
            o.insert("name".into(), n.clone().into());
        }
        put_extra(&mut o, &m.extra, own_only);
        return vec![Value::Object(o)];
    }
    // The kept fields go on the first assistant message (or the first
    // message when there is none).
    let extra_at = extra_piece(&pieces);
    pieces
        .into_iter()
        .enumerate()
        .map(|(i, piece)| {
            let mut o = Obj::new();
            o.insert("id".into(), piece_id(&m.id, i).into());
            match piece {
                Piece::Reasoning { text } => {
                    o.insert("role".into(), "reasoning".into());
                    o.insert("content".into(), text.into());
                    if i == extra_at {
                        put_extra(&mut o, &m.extra, own_only);
                    }
                }
                Piece::Reply { text, tool_calls } => {
                    o.insert("role".into(), "assistant".into());
                    if let Some(t) = text {
                        o.insert("content".into(), t.into());
                    }
                    if let Some(n) = &m.name {
                        o.insert("name".into(), n.clone().into());
                    }
                    if !tool_calls.is_empty() {
                        o.insert(
                            "toolCalls".into(),
                            tool_calls_to_wire(&tool_calls, own_only),
                        );
                    }
                    if i == extra_at {
                        put_extra(&mut o, &m.extra, own_only);
                    }
                }
            }
            Value::Object(o)
        })
        .collect()
}

/// One core message as one AG-UI message (an assistant message's parts all
/// in one: its text joined, then its calls); see [`messages_to_wire_with`]
/// for the faithful form.
pub fn message_to_wire_with(m: &Message, own_only: bool) -> Value {
    let mut o = Obj::new();
    o.insert("id".into(), m.id.clone().into());
    o.insert("role".into(), m.role.as_str().into());
    let name = |o: &mut Obj| {
        if let Some(n) = &m.name {
            o.insert("name".into(), n.clone().into());
        }
    };
    match m.role {
        Role::Developer | Role::System => {
            // Several text parts (a Vercel system message) are kept apart by
            // a newline, as pydantic-ai joins a request's system prompts.
            o.insert("content".into(), m.text_joined("\n").into());
            name(&mut o);
        }
        Role::User => {
            o.insert("content".into(), body_to_wire(m));
            name(&mut o);
        }
        Role::Assistant => {
            if m.content.iter().any(|p| matches!(p, Part::Text { .. })) {
                o.insert("content".into(), m.text().into());
            }
            name(&mut o);
            let calls: Vec<&ToolCall> = m.tool_calls().collect();
            if !calls.is_empty() {
                o.insert("toolCalls".into(), tool_calls_to_wire(&calls, own_only));
            }
        }
        Role::Tool => {
            o.insert("content".into(), body_to_wire(m));
            o.insert(
                "toolCallId".into(),
                m.tool_call_id.clone().unwrap_or_default().into(),
            );
            if let Some(e) = &m.error {
                o.insert("error".into(), e.clone().into());
            }
        }
        Role::Reasoning => {
            o.insert("content".into(), text_and_reasoning(m).into());
        }
        Role::Activity => {
            o.insert(
                "activityType".into(),
                m.activity_type
                    .clone()
                    .unwrap_or_else(|| "activity".into())
                    .into(),
            );
            let content = m
                .content
                .iter()
                .find_map(|p| match p {
                    Part::Other { value } if value.is_object() => Some(value.clone()),
                    _ => None,
                })
                .unwrap_or_else(|| json!({}));
            o.insert("content".into(), content);
        }
    }
    put_extra(&mut o, &m.extra, own_only);
    Value::Object(o)
}

// ---- the request -----------------------------------------------------------

/// Modelled fields; anything else (`protocolVersion`...) is kept in `extra`.
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

impl RequestTranslator for AgUiRequests {
    fn dialect(&self) -> Dialect {
        Dialect::AgUi
    }

    fn parse_request(&self, body: &[u8]) -> Result<RunRequest, RequestError> {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| RequestError::new(format!("request body is not valid JSON: {e}")))?;
        let o = v.as_object().ok_or_else(|| {
            RequestError::new("request body must be a JSON object (RunAgentInput)")
        })?;
        let messages = match o.get("messages") {
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, m)| message_from_wire(m, &format!("messages[{i}]")))
                .collect::<Result<Vec<_>, _>>()?,
            None | Some(Value::Null) => Vec::new(),
            Some(_) => return Err(RequestError::field("messages", "must be an array")),
        };
        let mut tools = Vec::new();
        for (i, t) in opt_array(o, "tools", "")?.iter().enumerate() {
            let p = format!("tools[{i}]");
            let to = obj(t, &p)?;
            tools.push(Tool {
                name: req_str(to, "name", &p)?,
                description: opt_str(to, "description", &p)?.unwrap_or_default(),
                parameters: match to.get("parameters") {
                    None | Some(Value::Null) => None,
                    // Some clients send the schema as a JSON string.
                    Some(Value::String(s)) => {
                        Some(serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone())))
                    }
                    Some(other) => Some(other.clone()),
                },
            });
        }
        let mut context = Vec::new();
        for (i, c) in opt_array(o, "context", "")?.iter().enumerate() {
            let p = format!("context[{i}]");
            let co = obj(c, &p)?;
            context.push(Context {
                description: req_str(co, "description", &p)?,
                value: match co.get("value") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => {
                        return Err(RequestError::field(format!("{p}.value"), "is required"))
                    }
                    Some(other) => other.to_string(),
                },
            });
        }
        let mut resume = Vec::new();
        for (i, r) in opt_array(o, "resume", "")?.iter().enumerate() {
            let p = format!("resume[{i}]");
            let ro = obj(r, &p)?;
            let status = opt_str(ro, "status", &p)?.unwrap_or_else(|| "resolved".into());
            if status != "resolved" && status != "cancelled" {
                return Err(RequestError::field(
                    format!("{p}.status"),
                    "must be resolved or cancelled",
                ));
            }
            resume.push(ResumeEntry {
                interrupt_id: req_str(ro, "interruptId", &p)?,
                status,
                payload: ro.get("payload").filter(|v| !v.is_null()).cloned(),
            });
        }
        let extra = rest(o, &REQUEST_FIELDS);
        Ok(RunRequest {
            thread_id: lenient_str(o, "threadId", "")?,
            run_id: lenient_str(o, "runId", "")?,
            parent_run_id: opt_str(o, "parentRunId", "")?,
            messages,
            tools,
            context,
            state: o.get("state").filter(|v| !v.is_null()).cloned(),
            forwarded_props: o.get("forwardedProps").filter(|v| !v.is_null()).cloned(),
            resume,
            trigger: None,
            continue_message_id: None,
            continued: Default::default(),
            reply_to: None,
            extra,
        })
    }

    fn build_request(&self, r: &RunRequest) -> Result<Value, RequestError> {
        if r.run_id.is_empty() {
            return Err(RequestError::field(
                "runId",
                "AG-UI requires a run id; the gateway must assign one before building the request",
            ));
        }
        let mut o = Obj::new();
        o.insert("threadId".into(), r.thread_id.clone().into());
        o.insert("runId".into(), r.run_id.clone().into());
        if let Some(p) = &r.parent_run_id {
            o.insert("parentRunId".into(), p.clone().into());
        }
        o.insert("state".into(), r.state.clone().unwrap_or_else(|| json!({})));
        o.insert(
            "messages".into(),
            Value::Array(r.messages.iter().flat_map(message_to_wire).collect()),
        );
        let tools = r
            .tools
            .iter()
            .map(|t| {
                let mut to = Obj::new();
                to.insert("name".into(), t.name.clone().into());
                to.insert("description".into(), t.description.clone().into());
                if let Some(p) = t.parameters.as_ref().filter(|p| !p.is_null()) {
                    to.insert("parameters".into(), p.clone());
                }
                Value::Object(to)
            })
            .collect();
        o.insert("tools".into(), Value::Array(tools));
        let context = r
            .context
            .iter()
            .map(|c| json!({"description": c.description, "value": c.value}))
            .collect();
        o.insert("context".into(), Value::Array(context));
        o.insert(
            "forwardedProps".into(),
            r.forwarded_props
                .clone()
                .filter(|v| !v.is_null())
                .unwrap_or_else(|| json!({})),
        );
        if !r.resume.is_empty() {
            let resume = r
                .resume
                .iter()
                .map(|e| {
                    let mut ro = Obj::new();
                    ro.insert("interruptId".into(), e.interrupt_id.clone().into());
                    let status = if e.status == "cancelled" {
                        "cancelled"
                    } else {
                        "resolved"
                    };
                    ro.insert("status".into(), status.into());
                    if let Some(p) = e.payload.as_ref().filter(|p| !p.is_null()) {
                        ro.insert("payload".into(), p.clone());
                    }
                    Value::Object(ro)
                })
                .collect();
            o.insert("resume".into(), Value::Array(resume));
        }
        for (k, v) in &r.extra {
            if !o.contains_key(k) && extra_field_ok(k, v) {
                o.insert(k.clone(), v.clone());
            }
        }
        Ok(Value::Object(o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: Value) -> Result<RunRequest, RequestError> {
        AgUiRequests.parse_request(v.to_string().as_bytes())
    }

    /// What `HttpAgent.prepareRunAgentInput` sends, every message kind.
    fn http_agent_body() -> Value {
        json!({
            "threadId": "thread-1",
            "runId": "run-1",
            "protocolVersion": "1.0",
            "tools": [{"name": "change_background", "description": "Change the page background",
                       "parameters": {"type": "object", "properties": {"color": {"type": "string"}}}}],
            "context": [{"description": "user locale", "value": "zh-CN"}],
            "forwardedProps": {},
            "state": {"counter": 1},
            "messages": [
                {"id": "d1", "role": "developer", "content": "be brief"},
                {"id": "s1", "role": "system", "content": "you are helpful", "name": "sys"},
                {"id": "u1", "role": "user", "content": "你好"},
                {"id": "u2", "role": "user", "content": [
                    {"type": "text", "text": "what is this?"},
                    {"type": "image", "source": {"type": "data", "value": "AAAA", "mimeType": "image/png"}},
                    {"type": "document", "source": {"type": "url", "value": "https://x/a.pdf", "mimeType": "application/pdf"},
                     "metadata": {"filename": "a.pdf"}},
                    {"type": "audio", "source": {"type": "file", "value": "file-1", "provider": "openai"}}
                ]},
                {"id": "a1", "role": "assistant", "content": "Sure.", "toolCalls": [
                    {"id": "tc-1", "type": "function", "function": {"name": "change_background", "arguments": "{\"color\":\"red\"}"},
                     "encryptedValue": "enc"}
                ]},
                {"id": "t1", "role": "tool", "toolCallId": "tc-1", "content": "done", "error": "partial"},
                {"id": "r1", "role": "reasoning", "content": "thinking...", "encryptedValue": "e"},
                {"id": "act1", "role": "activity", "activityType": "progress", "content": {"pct": 50}},
                {"id": "a2", "role": "assistant", "metadata": {"k": "v"}, "subagentRunId": "s-1"}
            ],
            "resume": [{"interruptId": "int-1", "status": "resolved", "payload": {"ok": true}}]
        })
    }

    #[test]
    fn a_tool_message_marked_failed_by_the_encoder_is_a_failure() {
        let mut body = http_agent_body();
        body["messages"] = json!([
            {"id": "t1", "role": "tool", "toolCallId": "tc-1", "content": "n=1 is wrong",
             "metadata": {"error": true}},
            {"id": "t2", "role": "tool", "toolCallId": "tc-2", "content": "fine",
             "metadata": {"error": false}}
        ]);
        let r = parse(body).unwrap();
        assert_eq!(r.messages[0].error.as_deref(), Some("n=1 is wrong"));
        assert_eq!(r.messages[1].error, None);
    }

    #[test]
    fn parses_what_http_agent_sends() {
        let r = parse(http_agent_body()).unwrap();
        assert_eq!(
            (r.thread_id.as_str(), r.run_id.as_str()),
            ("thread-1", "run-1")
        );
        assert_eq!(r.extra["protocolVersion"], "1.0");
        assert_eq!(r.tools[0].name, "change_background");
        assert_eq!(r.context[0].value, "zh-CN");
        assert_eq!(r.state, Some(json!({"counter": 1})));
        assert_eq!(r.messages.len(), 9);
        let u2 = &r.messages[3];
        assert!(u2.content_is_parts);
        assert_eq!(
            u2.content[1],
            Part::Media {
                media: MediaKind::Image,
                source: MediaSource::Data {
                    value: "AAAA".into(),
                    media_type: "image/png".into()
                },
                filename: None
            }
        );
        assert!(matches!(&u2.content[2], Part::Media { filename: Some(f), .. } if f == "a.pdf"));
        assert!(
            matches!(&u2.content[3], Part::Media { source: MediaSource::Handle { provider: Some(p), .. }, .. } if p == "openai")
        );
        let a1 = &r.messages[4];
        let calls: Vec<_> = a1.tool_calls().collect();
        assert_eq!(calls[0].arguments, "{\"color\":\"red\"}");
        assert_eq!(calls[0].extra["encryptedValue"], "enc");
        assert_eq!(r.messages[5].error.as_deref(), Some("partial"));
        assert_eq!(
            r.messages[6].content,
            vec![Part::Reasoning {
                text: "thinking...".into()
            }]
        );
        assert_eq!(r.messages[7].activity_type.as_deref(), Some("progress"));
        assert_eq!(r.messages[8].extra["subagentRunId"], "s-1");
        assert_eq!(r.resume[0].payload, Some(json!({"ok": true})));
    }

    #[test]
    fn parse_build_parse_is_stable_and_build_is_exact() {
        let body = http_agent_body();
        let r = parse(body.clone()).unwrap();
        let built = AgUiRequests.build_request(&r).unwrap();
        assert_eq!(parse(built.clone()).unwrap(), r);
        // Everything HttpAgent sent comes back as sent (its messages carry no
        // defaults we add).
        assert_eq!(built, body);
    }

    #[test]
    fn build_from_a_bare_request_has_every_required_field() {
        let r = RunRequest {
            thread_id: "t".into(),
            run_id: "r".into(),
            messages: vec![Message::text_message("m1", Role::User, "hi")],
            ..Default::default()
        };
        let v = AgUiRequests.build_request(&r).unwrap();
        assert_eq!(
            v,
            json!({"threadId": "t", "runId": "r", "state": {}, "messages": [{"id": "m1", "role": "user", "content": "hi"}],
                   "tools": [], "context": [], "forwardedProps": {}})
        );
        let err = AgUiRequests
            .build_request(&RunRequest::default())
            .unwrap_err();
        assert_eq!(err.field.as_deref(), Some("runId"));
    }

    #[test]
    fn legacy_binary_parts_are_upgraded() {
        let r = parse(json!({"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": [
            {"type": "binary", "mimeType": "image/png", "data": "AAAA", "filename": "a.png"},
            {"type": "binary", "mimeType": "application/pdf", "url": "https://x/a.pdf"},
            {"type": "binary", "mimeType": "audio/wav", "id": "file-9"}
        ]}]}))
        .unwrap();
        let built = AgUiRequests.build_request(&r).unwrap();
        assert_eq!(
            built["messages"][0]["content"],
            json!([
                {"type": "image", "source": {"type": "data", "value": "AAAA", "mimeType": "image/png"}, "metadata": {"filename": "a.png"}},
                {"type": "document", "source": {"type": "url", "value": "https://x/a.pdf", "mimeType": "application/pdf"}},
                {"type": "audio", "source": {"type": "file", "value": "file-9", "mimeType": "audio/wav"}}
            ])
        );
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (json!([1]), "request body must be a JSON object"),
            (json!({"messages": {}}), "`messages`"),
            (
                json!({"messages": [{"id": "a", "role": "user", "content": "x"}, {"id": "b", "role": "robot"}]}),
                "`messages[1].role`",
            ),
            (json!({"messages": [{"id": "a"}]}), "`messages[0].role`"),
            (
                json!({"messages": [{"id": "a", "role": "tool", "content": "x"}]}),
                "`messages[0].toolCallId`",
            ),
            (
                json!({"messages": [{"id": "a", "role": "user", "content": [{"type": "image", "source": {"type": "ftp", "value": "x"}}]}]}),
                "`messages[0].content[0].source.type`",
            ),
            (
                json!({"messages": [{"id": "a", "role": "assistant", "toolCalls": [{"id": "c", "function": {}}]}]}),
                "`messages[0].toolCalls[0].function.name`",
            ),
            (
                json!({"messages": [], "tools": [{"description": "x"}]}),
                "`tools[0].name`",
            ),
            (
                json!({"messages": [], "resume": [{"interruptId": "i", "status": "maybe"}]}),
                "`resume[0].status`",
            ),
            (json!({"messages": [], "threadId": 5}), "`threadId`"),
        ];
        for (body, want) in cases {
            let err = parse(body.clone()).unwrap_err();
            assert!(err.message.contains(want), "{body}: {}", err.message);
        }
        assert!(AgUiRequests
            .parse_request(b"{")
            .unwrap_err()
            .message
            .contains("not valid JSON"));
    }

    #[test]
    fn foreign_parts_and_unknown_fields() {
        let m = Message {
            id: "u".into(),
            role: Role::User,
            content: vec![
                Part::Text { text: "a".into() },
                Part::Reasoning { text: "r".into() },
                Part::Other {
                    value: json!({"type": "data-x", "data": 1}),
                },
                Part::Media {
                    media: MediaKind::File,
                    source: MediaSource::Url {
                        url: "https://x/v.mp4".into(),
                        media_type: Some("video/mp4".into()),
                    },
                    filename: None,
                },
            ],
            extra: [("metadata".to_string(), json!("not an object"))]
                .into_iter()
                .collect(),
            ..Default::default()
        };
        assert_eq!(
            message_to_wire(&m),
            vec![json!({"id": "u", "role": "user", "content": [
                {"type": "text", "text": "a"},
                {"type": "video", "source": {"type": "url", "value": "https://x/v.mp4", "mimeType": "video/mp4"}}
            ]})]
        );
    }

    /// The built request validates against the Python SDK's pydantic model
    /// when the test venv (tests/run.sh makes target/py-venv) is there.
    #[test]
    fn built_request_validates_against_the_python_sdk() {
        let py = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/py-venv/bin/python");
        if !py.exists() {
            eprintln!("skipped: no {}", py.display());
            return;
        }
        let r = parse(http_agent_body()).unwrap();
        let mut bare = r.clone();
        bare.state = None;
        bare.forwarded_props = None;
        bare.tools.clear();
        bare.context.clear();
        bare.extra.clear();
        let bodies = json!([
            AgUiRequests.build_request(&r).unwrap(),
            AgUiRequests.build_request(&bare).unwrap()
        ]);
        let script = "import sys, json\n\
            try:\n    from ag_ui.core import RunAgentInput\nexcept ImportError:\n    print('skip'); sys.exit(0)\n\
            for b in json.load(sys.stdin):\n    RunAgentInput.model_validate(b)\nprint('ok')\n";
        let mut child = std::process::Command::new(&py)
            .args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("python runs");
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(bodies.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "pydantic rejected the built request: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.trim() == "ok" || stdout.trim() == "skip", "{stdout}");
    }
}
