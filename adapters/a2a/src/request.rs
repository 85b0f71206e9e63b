//! A2A `SendStreamingMessage` bodies to and from the neutral request.
//!
//! Upstream, a run is one message: the client's latest user message (its
//! text as one text part, its files as file parts), in the context of the
//! conversation (`contextId` = thread). The answer to an interrupt
//! continues the interrupted task: its id is the interrupt's.

use babelgate_core::request::{MediaKind, MediaSource, Message, Part, ResumeEntry};
use babelgate_core::{Dialect, RequestError, RequestTranslator, Role, RunRequest};
use serde_json::{json, Map, Value};

use crate::wire::{self, PartRef};

pub struct A2aRequests;

/// The JSON-RPC methods that start a run, v1.0 names and v0.3 names.
const RUN_METHODS: [&str; 4] = [
    "SendStreamingMessage",
    "SendMessage",
    "message/stream",
    "message/send",
];

fn media_part(source: &MediaSource, filename: Option<&str>) -> Value {
    let mut p = Map::new();
    match source {
        MediaSource::Data { value, media_type } => {
            p.insert("raw".into(), json!(value));
            p.insert("mediaType".into(), json!(media_type));
        }
        MediaSource::Url { url, media_type } => {
            p.insert("url".into(), json!(url));
            if let Some(m) = media_type {
                p.insert("mediaType".into(), json!(m));
            }
        }
        MediaSource::Handle {
            value, media_type, ..
        } => {
            p.insert("url".into(), json!(value));
            if let Some(m) = media_type {
                p.insert("mediaType".into(), json!(m));
            }
        }
    }
    if let Some(f) = filename {
        p.insert("filename".into(), json!(f));
    }
    Value::Object(p)
}

impl RequestTranslator for A2aRequests {
    fn dialect(&self) -> Dialect {
        Dialect::A2a
    }

    fn parse_request(&self, body: &[u8]) -> Result<RunRequest, RequestError> {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| RequestError::new(format!("invalid JSON: {e}")))?;
        let obj = v
            .as_object()
            .ok_or_else(|| RequestError::new("a JSON-RPC request must be an object"))?;
        if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(RequestError::field("jsonrpc", "must be \"2.0\""));
        }
        let method = obj
            .get("method")
            .and_then(Value::as_str)
            .ok_or_else(|| RequestError::field("method", "missing"))?;
        if !RUN_METHODS.contains(&method) {
            return Err(RequestError::field(
                "method",
                format!("`{method}` does not start a run here (one of {RUN_METHODS:?})"),
            ));
        }
        let m = obj
            .get("params")
            .and_then(|p| p.get("message"))
            .and_then(Value::as_object)
            .ok_or_else(|| RequestError::field("params.message", "must be an object"))?;
        let parts = m
            .get("parts")
            .and_then(Value::as_array)
            .ok_or_else(|| RequestError::field("params.message.parts", "must be a list"))?;
        let mut content = Vec::new();
        let mut data = None;
        for (i, p) in parts.iter().enumerate() {
            match wire::part(p) {
                PartRef::Text(t) => content.push(Part::Text {
                    text: t.to_string(),
                }),
                PartRef::Data(d) => {
                    data.get_or_insert_with(|| d.clone());
                    content.push(Part::Other { value: p.clone() });
                }
                PartRef::File {
                    url,
                    media_type,
                    filename,
                } => content.push(Part::Media {
                    media: MediaKind::from_media_type(&media_type),
                    source: MediaSource::from_url(&url, Some(&media_type)),
                    filename: filename.map(str::to_string),
                }),
                PartRef::Other => {
                    return Err(RequestError::field(
                        format!("params.message.parts[{i}]"),
                        "is no text, data or file part",
                    ))
                }
            }
        }
        let id = m
            .get("messageId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let text = content
            .iter()
            .filter_map(|p| match p {
                Part::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n");
        let mut run = RunRequest {
            // Every response of the stream carries the request's id (the
            // SDK clients check it).
            reply_to: obj
                .get("id")
                .filter(|id| id.is_string() || id.is_number())
                .cloned(),
            thread_id: m
                .get("contextId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            ..Default::default()
        };
        // An answer to an interrupted task names it: the answer resumes it.
        if let Some(task) = m
            .get("taskId")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            run.resume.push(ResumeEntry {
                interrupt_id: task.to_string(),
                status: "resolved".into(),
                payload: Some(data.unwrap_or(Value::String(text))),
            });
        }
        run.messages.push(Message {
            id,
            role: Role::User,
            content,
            content_is_parts: true,
            ..Default::default()
        });
        Ok(run)
    }

    fn build_request(&self, request: &RunRequest) -> Result<Value, RequestError> {
        let mut parts: Vec<Value> = Vec::new();
        let mut message_id = None;
        // The latest user message, if it is the newest message (an answer
        // to an interrupt may come with none).
        // When the run answers an interrupt, the answer is the resume
        // payload: the newest user message is then the one that started the
        // interrupted task (clients that send their history send it again).
        let answer = request.resume.first().filter(|r| r.payload.is_some());
        let last_user = request
            .messages
            .last()
            .filter(|m| m.role == Role::User && answer.is_none());
        if let Some(m) = last_user {
            message_id = Some(m.id.clone()).filter(|id| !id.is_empty());
            let text = m.text();
            if !text.is_empty() {
                parts.push(json!({ "text": text }));
            }
            for p in &m.content {
                match p {
                    Part::Media {
                        source, filename, ..
                    } => {
                        parts.push(media_part(source, filename.as_deref()));
                    }
                    Part::Other { value } => {
                        // A data part read from an A2A client, or another
                        // dialect's part, carried as data.
                        match wire::part(value) {
                            PartRef::Data(_) => parts.push(value.clone()),
                            _ => parts.push(json!({ "data": value })),
                        }
                    }
                    _ => {}
                }
            }
        }
        let mut message = Map::new();
        message.insert("role".into(), json!("ROLE_USER"));
        if let Some(r) = request.resume.first() {
            message.insert("taskId".into(), json!(r.interrupt_id));
            if parts.is_empty() {
                message_id = Some(format!("{}-answer", request.run_id));
                match &r.payload {
                    Some(Value::String(s)) => parts.push(json!({ "text": s })),
                    Some(v) => parts.push(json!({ "data": v })),
                    None => parts.push(json!({ "data": { "status": r.status } })),
                }
            }
        }
        message.insert(
            "messageId".into(),
            json!(message_id.unwrap_or_else(|| format!("{}-user", request.run_id))),
        );
        if !request.thread_id.is_empty() {
            message.insert("contextId".into(), json!(request.thread_id));
        }
        message.insert("parts".into(), Value::Array(parts));
        Ok(json!({
            "jsonrpc": "2.0",
            "id": request.run_id,
            "method": "SendStreamingMessage",
            "params": { "message": message },
        }))
    }

    fn upstream_headers(&self) -> &'static [(&'static str, &'static str)] {
        &[wire::VERSION_HEADER]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_user_text_goes_as_one_part_in_its_context() {
        let mut run = RunRequest {
            thread_id: "chat-1".into(),
            run_id: "r1".into(),
            ..Default::default()
        };
        run.messages
            .push(Message::text_message("u0", Role::User, "old"));
        run.messages
            .push(Message::text_message("a0", Role::Assistant, "reply"));
        let mut m = Message::text_message("u1", Role::User, "hello ");
        m.content.push(Part::Text {
            text: "there".into(),
        });
        run.messages.push(m);
        let body = A2aRequests.build_request(&run).unwrap();
        assert_eq!(body["method"], "SendStreamingMessage");
        let msg = &body["params"]["message"];
        assert_eq!(msg["contextId"], "chat-1");
        assert_eq!(msg["messageId"], "u1");
        assert_eq!(msg["parts"], json!([{"text": "hello there"}]));
        assert!(msg.get("taskId").is_none());
    }

    #[test]
    fn an_answer_to_an_interrupt_continues_its_task() {
        let run = RunRequest {
            thread_id: "t".into(),
            run_id: "r2".into(),
            // The message that started the task, sent again by the client.
            messages: vec![Message::text_message("u1", Role::User, "approve the plan")],
            resume: vec![ResumeEntry {
                interrupt_id: "task-9".into(),
                status: "resolved".into(),
                payload: Some(json!({"approved": true})),
            }],
            ..Default::default()
        };
        let body = A2aRequests.build_request(&run).unwrap();
        let msg = &body["params"]["message"];
        assert_eq!(msg["taskId"], "task-9");
        assert_eq!(msg["parts"], json!([{"data": {"approved": true}}]));
        assert_eq!(msg["messageId"], "r2-answer");
    }

    #[test]
    fn a_client_request_reads_back() {
        let body = br#"{"jsonrpc":"2.0","id":7,"method":"message/stream","params":{"message":{"kind":"message","messageId":"m1","role":"user","contextId":"c1","parts":[{"kind":"text","text":"hi"}]}}}"#;
        let run = A2aRequests.parse_request(body).unwrap();
        assert_eq!(run.thread_id, "c1");
        assert_eq!(
            run.reply_to,
            Some(json!(7)),
            "the id every response carries"
        );
        assert_eq!(run.messages[0].text(), "hi");
        let bad = br#"{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{}}"#;
        assert!(A2aRequests.parse_request(bad).is_err());
    }
}
