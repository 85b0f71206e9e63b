//! AG-Kit legacy send-message request bodies <-> the neutral [`RunRequest`].
//!
//! The body, as `@cloudbase/agent-ui-web` 0.0.24 `useChat` sends it:
//! `{messages?, tools?, resume?, conversationId}` where `messages` holds only
//! the messages new since the last request (the server keeps the history by
//! `conversationId`), `tools[].parameters` is a JSON Schema serialized to a
//! string, and `resume` is `{interruptId, payload: JSON.stringify(answer)}`.
//! `cloudbase-agent-server` 0.1.1 validates it with pydantic (`SendMessageInput`):
//! snake-case aliases (`tool_call_id`, `tool_calls`) are accepted there too,
//! an assistant message needs an `id`, and every tool needs `parameters`.

use babelgate_core::request::{piece_id, Message, Part, Piece, ResumeEntry, Tool, ToolCall};
use babelgate_core::{Dialect, RequestError, RequestTranslator, Role, RunRequest};
use serde_json::{Map, Value};

use crate::wire::TOOL_FAILED_PREFIX;

/// Request fields this translator models; anything else is kept in
/// `RunRequest::extra` and written back by `build_request`.
const KNOWN: [&str; 4] = ["conversationId", "messages", "tools", "resume"];

/// What `build_request` writes for a tool without a schema: the 0.1.1 server
/// requires `parameters`.
const EMPTY_SCHEMA: &str = r#"{"type":"object","properties":{}}"#;

#[derive(Debug, Default, Clone, Copy)]
pub struct AgKitRequests;

impl RequestTranslator for AgKitRequests {
    fn dialect(&self) -> Dialect {
        Dialect::AgKit
    }

    fn parse_request(&self, body: &[u8]) -> Result<RunRequest, RequestError> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| RequestError::new(format!("request body is not valid JSON: {e}")))?;
        let Value::Object(mut obj) = value else {
            return Err(RequestError::new("request body must be a JSON object"));
        };
        let thread_id = match obj.remove("conversationId") {
            Some(Value::String(s)) if !s.is_empty() => s,
            Some(_) => {
                return Err(RequestError::field(
                    "conversationId",
                    "must be a non-empty string",
                ))
            }
            None if obj.contains_key("threadId") || obj.contains_key("runId") => {
                return Err(RequestError::field(
                    "conversationId",
                    "missing; this body has `threadId`/`runId`, so it is an AG-UI RunAgentInput, \
                     not an AG-Kit legacy send-message request (route it to the ag-ui dialect)",
                ))
            }
            None => return Err(RequestError::field("conversationId", "missing")),
        };

        let messages = match obj.remove("messages") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, m)| message_from_wire(m, &format!("messages[{i}]")))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(RequestError::field("messages", "must be an array")),
        };

        let tools = match obj.remove("tools") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, t)| tool_from_wire(t, &format!("tools[{i}]")))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(RequestError::field("tools", "must be an array")),
        };

        let resume = match obj.remove("resume") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(r)) => vec![resume_from_wire(r)?],
            Some(_) => {
                return Err(RequestError::field(
                    "resume",
                    "must be an object {interruptId, payload}",
                ))
            }
        };

        // Whatever is left was not modelled: keep it for an AG-Kit upstream.
        let extra: Map<String, Value> = obj
            .into_iter()
            .filter(|(k, _)| !KNOWN.contains(&k.as_str()))
            .collect();

        Ok(RunRequest {
            thread_id,
            // The gateway mints the run id: AG-Kit has none.
            run_id: String::new(),
            messages,
            tools,
            resume,
            extra,
            ..Default::default()
        })
    }

    fn build_request(&self, request: &RunRequest) -> Result<Value, RequestError> {
        if request.thread_id.is_empty() {
            return Err(RequestError::field(
                "conversationId",
                "the request has no thread id to send as conversationId",
            ));
        }
        let mut body = Map::new();
        let resume = match request.resume.as_slice() {
            [] => None,
            [entry] => Some(entry),
            more => {
                return Err(RequestError::field(
                    "resume",
                    format!(
                        "an AG-Kit request resumes one interrupt, this one answers {}",
                        more.len()
                    ),
                ))
            }
        };
        // The client sends no `messages` with a resume; new messages that came
        // with one from another dialect are still sent (the server takes both).
        if resume.is_none() || !request.messages.is_empty() {
            let mut messages = Vec::new();
            for (i, m) in request.messages.iter().enumerate() {
                let path = format!("messages[{i}]");
                for (n, mut wire) in message_to_wire(m, &path)?.into_iter().enumerate() {
                    if m.role == Role::Assistant && !wire.contains_key("id") {
                        // The 0.1.1 server rejects an assistant message without an id.
                        let id = piece_id(&format!("assistant-{i}"), n);
                        wire.insert("id".into(), Value::String(id));
                    }
                    messages.push(Value::Object(wire));
                }
            }
            body.insert("messages".into(), Value::Array(messages));
        }
        if let Some(entry) = resume {
            let payload = match &entry.payload {
                Some(v) => serde_json::to_string(v),
                None => serde_json::to_string(&Value::Null),
            }
            .map_err(|e| RequestError::field("resume.payload", e.to_string()))?;
            let mut r = Map::new();
            r.insert(
                "interruptId".into(),
                Value::String(entry.interrupt_id.clone()),
            );
            r.insert("payload".into(), Value::String(payload));
            body.insert("resume".into(), Value::Object(r));
        }
        if !request.tools.is_empty() {
            let mut tools = Vec::new();
            for (i, t) in request.tools.iter().enumerate() {
                let parameters = match &t.parameters {
                    Some(schema) => serde_json::to_string(schema).map_err(|e| {
                        RequestError::field(format!("tools[{i}].parameters"), e.to_string())
                    })?,
                    None => EMPTY_SCHEMA.to_string(),
                };
                let mut w = Map::new();
                w.insert("name".into(), Value::String(t.name.clone()));
                w.insert("description".into(), Value::String(t.description.clone()));
                w.insert("parameters".into(), Value::String(parameters));
                tools.push(Value::Object(w));
            }
            body.insert("tools".into(), Value::Array(tools));
        }
        body.insert(
            "conversationId".into(),
            Value::String(request.thread_id.clone()),
        );
        for (k, v) in &request.extra {
            if !body.contains_key(k) {
                body.insert(k.clone(), v.clone());
            }
        }
        Ok(Value::Object(body))
    }
}

/// One AG-Kit message as a core message with an empty id (the gateway's
/// store assigns ids). Fields the message shapes do not have are ignored.
pub(crate) fn message_from_wire(v: &Value, path: &str) -> Result<Message, RequestError> {
    let Value::Object(obj) = v else {
        return Err(RequestError::field(path, "must be an object"));
    };
    let role_name = match obj.get("role") {
        Some(Value::String(s)) => s.as_str(),
        _ => {
            return Err(RequestError::field(
                format!("{path}.role"),
                "must be one of system, user, assistant, tool",
            ))
        }
    };
    let string_content = |required: bool| -> Result<Option<String>, RequestError> {
        match obj.get("content") {
            Some(Value::String(s)) => Ok(Some(s.clone())),
            None | Some(Value::Null) if !required => Ok(None),
            _ => Err(RequestError::field(
                format!("{path}.content"),
                "must be a string",
            )),
        }
    };
    let text = |s: Option<String>| -> Vec<Part> {
        s.map(|text| vec![Part::Text { text }]).unwrap_or_default()
    };
    let mut m = Message::default();
    match role_name {
        "system" | "user" => {
            m.role = if role_name == "system" {
                Role::System
            } else {
                Role::User
            };
            m.content = text(string_content(true)?);
        }
        "tool" => {
            m.role = Role::Tool;
            m.content = text(string_content(true)?);
            let id = obj.get("toolCallId").or_else(|| obj.get("tool_call_id"));
            match id {
                Some(Value::String(s)) => m.tool_call_id = Some(s.clone()),
                _ => {
                    return Err(RequestError::field(
                        format!("{path}.toolCallId"),
                        "a tool message needs the id of the call it answers",
                    ))
                }
            }
        }
        "assistant" => {
            m.role = Role::Assistant;
            m.content = text(string_content(false)?);
            let calls = obj.get("toolCalls").or_else(|| obj.get("tool_calls"));
            match calls {
                None | Some(Value::Null) => {}
                Some(Value::Array(items)) => {
                    // The calls follow the text.
                    for (i, c) in items.iter().enumerate() {
                        m.content.push(Part::ToolCall(tool_call_from_wire(
                            c,
                            &format!("{path}.toolCalls[{i}]"),
                        )?));
                    }
                }
                Some(_) => {
                    return Err(RequestError::field(
                        format!("{path}.toolCalls"),
                        "must be an array",
                    ))
                }
            }
        }
        _ => {
            return Err(RequestError::field(
                format!("{path}.role"),
                format!("`{role_name}` is not one of system, user, assistant, tool"),
            ))
        }
    }
    Ok(m)
}

/// `{id, type: "function", function: {name, arguments}}`, the OpenAI shape
/// both the client and the server use.
fn tool_call_from_wire(v: &Value, path: &str) -> Result<ToolCall, RequestError> {
    let id = match v.get("id") {
        Some(Value::String(s)) => s.clone(),
        _ => {
            return Err(RequestError::field(
                format!("{path}.id"),
                "must be a string",
            ))
        }
    };
    let Some(Value::Object(function)) = v.get("function") else {
        return Err(RequestError::field(
            format!("{path}.function"),
            "must be an object {name, arguments}",
        ));
    };
    let name = match function.get("name") {
        Some(Value::String(s)) => s.clone(),
        _ => {
            return Err(RequestError::field(
                format!("{path}.function.name"),
                "must be a string",
            ))
        }
    };
    let arguments = match function.get("arguments") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        // Liberal: some callers send the arguments already parsed.
        Some(other) => other.to_string(),
    };
    Ok(ToolCall {
        id,
        name,
        arguments,
        extra: Map::new(),
    })
}

fn tool_from_wire(v: &Value, path: &str) -> Result<Tool, RequestError> {
    let Value::Object(obj) = v else {
        return Err(RequestError::field(path, "must be an object"));
    };
    let name = match obj.get("name") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => {
            return Err(RequestError::field(
                format!("{path}.name"),
                "must be a non-empty string",
            ))
        }
    };
    let description = match obj.get("description") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        _ => {
            return Err(RequestError::field(
                format!("{path}.description"),
                "must be a string",
            ))
        }
    };
    let parameters = match obj.get("parameters") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(serde_json::from_str(s).map_err(|e| {
            RequestError::field(
                format!("{path}.parameters"),
                format!("is not a JSON Schema serialized as a string: {e}"),
            )
        })?),
        // The server accepts any JSON here; so do we.
        Some(other) => Some(other.clone()),
    };
    Ok(Tool {
        name,
        description,
        parameters,
    })
}

fn resume_from_wire(r: Map<String, Value>) -> Result<ResumeEntry, RequestError> {
    let interrupt_id = match r.get("interruptId") {
        Some(Value::String(s)) => s.clone(),
        _ => {
            return Err(RequestError::field(
                "resume.interruptId",
                "must be a string",
            ))
        }
    };
    let payload = match r.get("payload") {
        // `JSON.stringify(answer)`; a string that is not JSON is kept as text.
        Some(Value::String(s)) => {
            serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone()))
        }
        // `JSON.stringify(undefined)` drops the key: the answer is "nothing".
        None | Some(Value::Null) => Value::Null,
        Some(other) => other.clone(),
    };
    Ok(ResumeEntry {
        interrupt_id,
        status: "resolved".into(),
        payload: Some(payload),
    })
}

fn tool_calls_to_wire(calls: &[&ToolCall]) -> Value {
    Value::Array(
        calls
            .iter()
            .map(|c| {
                serde_json::json!({
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                })
            })
            .collect(),
    )
}

/// A core message as the AG-Kit messages that say it: none for roles AG-Kit
/// has no message for (reasoning, activity), one for the others, except an
/// assistant message whose text follows a tool call: it is split as AG-UI
/// splits it (pydantic-ai's `AGUIAdapter`), reasoning left out. Content is
/// text only. Split assistant messages carry their ids (`{id}`, `{id}:p2`...).
pub(crate) fn message_to_wire(
    m: &Message,
    path: &str,
) -> Result<Vec<Map<String, Value>>, RequestError> {
    let mut w = Map::new();
    match m.role {
        Role::System | Role::Developer | Role::User => {
            let role = if m.role == Role::User {
                "user"
            } else {
                "system"
            };
            w.insert("role".into(), Value::String(role.into()));
            // Several text parts (a Vercel message) are kept apart.
            w.insert("content".into(), Value::String(m.text_joined("\n")));
        }
        Role::Tool => {
            let Some(call_id) = &m.tool_call_id else {
                return Err(RequestError::field(
                    format!("{path}.toolCallId"),
                    "a tool message needs the id of the call it answers",
                ));
            };
            let text = m.text();
            let content = match &m.error {
                Some(err) if text.is_empty() => format!("{TOOL_FAILED_PREFIX}{err}"),
                _ => text,
            };
            w.insert("role".into(), Value::String("tool".into()));
            w.insert("content".into(), Value::String(content));
            w.insert("toolCallId".into(), Value::String(call_id.clone()));
        }
        Role::Assistant => {
            let replies: Vec<_> = m
                .assistant_pieces()
                .into_iter()
                .filter_map(|p| match p {
                    Piece::Reply { text, tool_calls } => Some((text, tool_calls)),
                    Piece::Reasoning { .. } => None,
                })
                .collect();
            if replies.len() > 1 {
                return Ok(replies
                    .into_iter()
                    .enumerate()
                    .map(|(n, (text, calls))| {
                        let mut w = Map::new();
                        w.insert("role".into(), Value::String("assistant".into()));
                        if let Some(t) = text {
                            w.insert("content".into(), Value::String(t));
                        }
                        if !calls.is_empty() {
                            w.insert("toolCalls".into(), tool_calls_to_wire(&calls));
                        }
                        if !m.id.is_empty() {
                            w.insert("id".into(), Value::String(piece_id(&m.id, n)));
                        }
                        w
                    })
                    .collect());
            }
            w.insert("role".into(), Value::String("assistant".into()));
            if let Some((Some(text), _)) = replies.first() {
                w.insert("content".into(), Value::String(text.clone()));
            }
            let calls: Vec<&ToolCall> = m.tool_calls().collect();
            if !calls.is_empty() {
                w.insert("toolCalls".into(), tool_calls_to_wire(&calls));
            }
        }
        Role::Reasoning | Role::Activity => return Ok(Vec::new()),
    }
    Ok(vec![w])
}

#[cfg(test)]
mod tests {
    use super::*;
    use babelgate_core::request::{MediaKind, MediaSource};
    use serde_json::json;

    fn parse(v: Value) -> Result<RunRequest, RequestError> {
        AgKitRequests.parse_request(v.to_string().as_bytes())
    }

    fn build(r: &RunRequest) -> Value {
        AgKitRequests.build_request(r).unwrap()
    }

    /// A body exactly as useChat 0.0.24 sends it after a front-end tool ran.
    fn client_body() -> Value {
        json!({
            "messages": [
                {"role": "user", "content": "把背景换成红色"},
                {"role": "tool", "content": "done", "toolCallId": "call_1"}
            ],
            "tools": [{
                "name": "change_background",
                "description": "Change the background color.",
                "parameters": "{\"type\":\"object\",\"properties\":{\"color\":{\"type\":\"string\"}},\"required\":[\"color\"]}"
            }],
            "conversationId": "c7d334f7"
        })
    }

    #[test]
    fn parses_a_client_body() {
        let r = parse(client_body()).unwrap();
        assert_eq!(r.thread_id, "c7d334f7");
        assert_eq!(r.run_id, "", "the gateway mints run ids");
        assert_eq!(r.messages.len(), 2);
        assert_eq!(
            r.messages[0],
            Message::text_message("", Role::User, "把背景换成红色")
        );
        assert_eq!(r.messages[1].role, Role::Tool);
        assert_eq!(r.messages[1].tool_call_id.as_deref(), Some("call_1"));
        assert!(r.messages.iter().all(|m| m.id.is_empty()));
        assert_eq!(
            r.tools[0].parameters.as_ref().unwrap()["required"],
            json!(["color"])
        );
        assert!(r.resume.is_empty() && r.extra.is_empty());
    }

    #[test]
    fn builds_what_the_client_sends() {
        let r = parse(client_body()).unwrap();
        let body = build(&r);
        assert_eq!(body["conversationId"], "c7d334f7");
        assert_eq!(body["messages"], client_body()["messages"]);
        let params = body["tools"][0]["parameters"].as_str().unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(params).unwrap(),
            r.tools[0].parameters.clone().unwrap()
        );
        assert!(body.get("resume").is_none());
    }

    #[test]
    fn parse_build_parse_is_stable() {
        let bodies = [
            client_body(),
            json!({
                "resume": {"interruptId": "int_1", "payload": "{\"approved\":true}"},
                "tools": [{"name": "t", "description": "d", "parameters": "{}"}],
                "conversationId": "c1"
            }),
            json!({
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "assistant", "content": "calling", "toolCalls": [
                        {"id": "call_9", "type": "function",
                         "function": {"name": "get_weather", "arguments": "{\"city\":\"北京\"}"}}
                    ]},
                    {"role": "assistant", "toolCalls": [
                        {"id": "call_10", "type": "function", "function": {"name": "x", "arguments": ""}}
                    ]},
                    {"role": "assistant", "content": ""}
                ],
                "conversationId": "c2",
                "appContext": {"page": "home"}
            }),
            json!({"resume": {"interruptId": "i"}, "conversationId": "c3"}),
            json!({"resume": {"interruptId": "i", "payload": "not json"}, "conversationId": "c4"}),
            json!({"messages": [], "conversationId": "c5"}),
        ];
        for b in bodies {
            let first = parse(b.clone()).unwrap();
            let built = build(&first);
            let second = AgKitRequests
                .parse_request(serde_json::to_vec(&built).unwrap().as_slice())
                .unwrap();
            assert_eq!(first, second, "body {b}");
            assert_eq!(build(&second), built);
        }
    }

    #[test]
    fn resume_payload_is_json_text_both_ways() {
        let r = parse(json!({
            "resume": {"interruptId": "int_1", "payload": "{\"approved\":true}"},
            "conversationId": "c"
        }))
        .unwrap();
        assert_eq!(
            r.resume,
            [ResumeEntry {
                interrupt_id: "int_1".into(),
                status: "resolved".into(),
                payload: Some(json!({"approved": true})),
            }]
        );
        assert!(r.messages.is_empty());
        let body = build(&r);
        assert_eq!(
            body,
            json!({"resume": {"interruptId": "int_1", "payload": "{\"approved\":true}"},
                   "conversationId": "c"})
        );
        // not JSON: kept as the raw string
        let r =
            parse(json!({"resume": {"interruptId": "i", "payload": "yes"}, "conversationId": "c"}))
                .unwrap();
        assert_eq!(r.resume[0].payload, Some(json!("yes")));
        // none: the server still needs a payload string
        let mut r = r;
        r.resume[0].payload = None;
        assert_eq!(build(&r)["resume"]["payload"], "null");
    }

    #[test]
    fn build_maps_core_messages_to_agkit_shapes() {
        let mut user = Message::text_message("u1", Role::User, "look: ");
        user.content.push(Part::Media {
            media: MediaKind::Image,
            source: MediaSource::Url {
                url: "https://x/y.png".into(),
                media_type: None,
            },
            filename: None,
        });
        let dev = Message::text_message("d1", Role::Developer, "rules");
        let assistant = Message {
            id: String::new(),
            role: Role::Assistant,
            content: vec![Part::ToolCall(ToolCall {
                id: "call_1".into(),
                name: "f".into(),
                arguments: "{}".into(),
                extra: Map::new(),
            })],
            ..Default::default()
        };
        let failed = Message {
            id: "t1".into(),
            role: Role::Tool,
            tool_call_id: Some("call_1".into()),
            error: Some("boom".into()),
            ..Default::default()
        };
        let reasoning = Message::text_message("r1", Role::Reasoning, "hmm");
        let req = RunRequest {
            thread_id: "t".into(),
            run_id: "r".into(),
            messages: vec![user, dev, assistant, failed, reasoning],
            tools: vec![Tool {
                name: "f".into(),
                description: String::new(),
                parameters: None,
            }],
            ..Default::default()
        };
        assert_eq!(
            build(&req),
            json!({
                "messages": [
                    {"role": "user", "content": "look: "},
                    {"role": "system", "content": "rules"},
                    {"role": "assistant", "toolCalls": [
                        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    ], "id": "assistant-2"},
                    {"role": "tool", "content": "Tool call failed with info: boom", "toolCallId": "call_1"}
                ],
                "tools": [{"name": "f", "description": "", "parameters": EMPTY_SCHEMA}],
                "conversationId": "t"
            })
        );
    }

    #[test]
    fn a_vercel_step_is_split_and_user_text_parts_kept_apart() {
        let call = Part::ToolCall(ToolCall {
            id: "c1".into(),
            name: "f".into(),
            arguments: "{}".into(),
            extra: Map::new(),
        });
        let mut user = Message::text_message("u1", Role::User, "first");
        user.content.push(Part::Text {
            text: "second".into(),
        });
        let assistant = Message {
            id: "a1".into(),
            role: Role::Assistant,
            content: vec![
                Part::Reasoning { text: "r".into() },
                Part::Text { text: "x".into() },
                call,
                Part::Text { text: "y".into() },
            ],
            ..Default::default()
        };
        let req = RunRequest {
            thread_id: "t".into(),
            messages: vec![user, assistant],
            ..Default::default()
        };
        assert_eq!(
            build(&req)["messages"],
            json!([
                {"role": "user", "content": "first\nsecond"},
                {"id": "a1", "role": "assistant", "content": "x", "toolCalls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"id": "a1:p2", "role": "assistant", "content": "y"}
            ])
        );
    }

    #[test]
    fn build_refuses_what_agkit_cannot_carry() {
        let mut req = RunRequest {
            thread_id: "t".into(),
            ..Default::default()
        };
        req.messages.push(Message {
            role: Role::Tool,
            ..Default::default()
        });
        let e = AgKitRequests.build_request(&req).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("messages[0].toolCallId"));
        req.messages.clear();
        req.resume = vec![
            ResumeEntry {
                interrupt_id: "a".into(),
                status: "resolved".into(),
                payload: None,
            };
            2
        ];
        let e = AgKitRequests.build_request(&req).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("resume"));
        req.thread_id.clear();
        let e = AgKitRequests.build_request(&req).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("conversationId"));
    }

    #[test]
    fn resume_with_new_messages_keeps_both() {
        let req = RunRequest {
            thread_id: "t".into(),
            messages: vec![Message::text_message("", Role::User, "and also")],
            resume: vec![ResumeEntry {
                interrupt_id: "i".into(),
                status: "resolved".into(),
                payload: Some(json!(1)),
            }],
            ..Default::default()
        };
        let body = build(&req);
        assert_eq!(body["messages"][0]["content"], "and also");
        assert_eq!(body["resume"]["payload"], "1");
    }

    #[test]
    fn errors_name_their_field() {
        let cases = [
            (json!({"messages": []}), "conversationId"),
            (json!({"conversationId": 5}), "conversationId"),
            (json!({"conversationId": ""}), "conversationId"),
            (json!({"conversationId": "c", "messages": {}}), "messages"),
            (
                json!({"conversationId": "c", "messages": [5]}),
                "messages[0]",
            ),
            (
                json!({"conversationId": "c", "messages": [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}]}),
                "messages[1].role",
            ),
            (
                json!({"conversationId": "c", "messages": [{"role": "user"}]}),
                "messages[0].content",
            ),
            (
                json!({"conversationId": "c", "messages": [{"role": "tool", "content": "x"}]}),
                "messages[0].toolCallId",
            ),
            (
                json!({"conversationId": "c", "messages": [{"role": "assistant", "toolCalls": [{"id": "1"}]}]}),
                "messages[0].toolCalls[0].function",
            ),
            (
                json!({"conversationId": "c", "messages": [{"role": "assistant", "toolCalls": [{"id": "1", "function": {"arguments": "{}"}}]}]}),
                "messages[0].toolCalls[0].function.name",
            ),
            (
                json!({"conversationId": "c", "tools": [{"name": "t", "parameters": "{not json"}]}),
                "tools[0].parameters",
            ),
            (
                json!({"conversationId": "c", "tools": [{"description": "d"}]}),
                "tools[0].name",
            ),
            (
                json!({"conversationId": "c", "resume": {"payload": "1"}}),
                "resume.interruptId",
            ),
            (json!({"conversationId": "c", "resume": "x"}), "resume"),
        ];
        for (body, field) in cases {
            let e = parse(body.clone()).unwrap_err();
            assert_eq!(e.field.as_deref(), Some(field), "body {body}: {e}");
            assert!(e.message.contains(field), "{e}");
        }
        assert!(AgKitRequests.parse_request(b"{nope").is_err());
        assert!(AgKitRequests.parse_request(b"[1]").is_err());
    }

    #[test]
    fn an_ag_ui_body_is_named_as_such() {
        let e = parse(json!({"threadId": "t", "runId": "r", "messages": []})).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("conversationId"));
        assert!(e.message.contains("AG-UI"), "{e}");
        assert!(e.message.contains("ag-ui dialect"), "{e}");
    }

    #[test]
    fn liberal_in_what_it_accepts() {
        let r = parse(json!({
            "conversationId": "c",
            "messages": [
                {"role": "tool", "content": "x", "tool_call_id": "call_1"},
                {"role": "assistant", "content": null, "id": "a1", "tool_calls": [
                    {"id": "call_2", "function": {"name": "f", "arguments": {"a": 1}}}
                ]}
            ],
            "tools": [{"name": "t", "parameters": {"type": "object"}}],
            "messages_extra_is_kept": true
        }))
        .unwrap();
        assert_eq!(r.messages[0].tool_call_id.as_deref(), Some("call_1"));
        assert_eq!(r.messages[1].id, "", "ids are the store's to assign");
        assert!(!r.messages[1].has_body(), "no text, only the call");
        assert_eq!(
            r.messages[1].tool_calls().next().unwrap().arguments,
            r#"{"a":1}"#
        );
        assert_eq!(r.tools[0].description, "");
        assert_eq!(r.tools[0].parameters, Some(json!({"type": "object"})));
        assert_eq!(r.extra.get("messages_extra_is_kept"), Some(&json!(true)));
        assert_eq!(build(&r)["messages_extra_is_kept"], json!(true));
    }
}
