//! A2A `SendStreamingMessage` bodies to and from the neutral request.
//!
//! Upstream, a run is one message: the client's latest user message (its
//! text as one text part, its files as file parts), in the context of the
//! conversation (`contextId` = thread). The answer to an interrupt
//! continues the interrupted task: its id is the interrupt's.

use babelgate_core::request::{MediaKind, MediaSource, Message, Part, ResumeEntry};
use babelgate_core::{
    AgentAbout, Dialect, Intent, Refusal, RequestError, RequestFault, RequestTranslator, Role,
    RunAsk, RunRequest,
};
use serde_json::{json, Map, Value};

use crate::card;
use crate::rpc::{self, Version};
use crate::wire::{self, PartRef};

pub struct A2aRequests;

/// The JSON-RPC methods that start a run, v1.0 names and v0.3 names
/// (`classify` reads the rest).
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

/// The run a `SendStreamingMessage` (or v0.3 `message/stream`) message
/// asks for; its errors are the params'.
fn run_request(
    m: &Map<String, Value>,
    reply_to: Option<Value>,
) -> Result<RunRequest, RequestError> {
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
        reply_to,
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

impl RequestTranslator for A2aRequests {
    fn dialect(&self) -> Dialect {
        Dialect::A2a
    }

    fn parse_request(&self, body: &[u8]) -> Result<RunRequest, RequestError> {
        match self.classify(body)? {
            Intent::Run(run) | Intent::Answer(run) => Ok(*run),
            Intent::About { .. } => Err(RequestError::field(
                "method",
                format!("does not start a run (one of {RUN_METHODS:?})"),
            )),
        }
    }

    fn classify(&self, body: &[u8]) -> Result<Intent, RequestError> {
        let v: Value = serde_json::from_slice(body).map_err(|e| {
            RequestError::new(format!("invalid JSON: {e}")).with_fault(RequestFault::Unreadable)
        })?;
        let env = rpc::envelope(&v)?;
        let (version, ask) = match env.method {
            "SendStreamingMessage" | "SendMessage" => (Version::V1, None),
            "message/stream" | "message/send" => (Version::V03, None),
            "GetTask" => (Version::V1, Some(RunAsk::Get)),
            "CancelTask" => (Version::V1, Some(RunAsk::Stop)),
            "SubscribeToTask" => (Version::V1, Some(RunAsk::Follow)),
            "tasks/get" => (Version::V03, Some(RunAsk::Get)),
            "tasks/cancel" => (Version::V03, Some(RunAsk::Stop)),
            "tasks/resubscribe" => (Version::V03, Some(RunAsk::Follow)),
            // A2A's methods the card declares no support for: the spec's
            // errors for them, not "method not found".
            push if push.contains("PushNotificationConfig")
                || push.starts_with("tasks/pushNotificationConfig/") =>
            {
                return Err(RequestError::field(
                    "method",
                    format!("`{push}`: this agent sends no push notifications"),
                )
                .with_fault(RequestFault::Unsupported(rpc::NO_PUSH))
                .replying_to(env.id.map(|id| rpc::reply_to(id, Version::V1))));
            }
            card @ ("GetExtendedAgentCard" | "agent/getAuthenticatedExtendedCard") => {
                return Err(RequestError::field(
                    "method",
                    format!("`{card}`: this agent has no extended card"),
                )
                .with_fault(RequestFault::Unsupported("extended_agent_card"))
                .replying_to(env.id.map(|id| rpc::reply_to(id, Version::V1))));
            }
            other => {
                return Err(RequestError::field(
                    "method",
                    format!("`{other}` is not a method this agent answers"),
                )
                .with_fault(RequestFault::UnknownOperation)
                .replying_to(env.id.map(|id| rpc::reply_to(id, Version::V1))))
            }
        };
        let mut reply_to = env.id.map(|id| rpc::reply_to(id, version));
        let params = |e: RequestError, reply_to: &Option<Value>| {
            e.with_fault(RequestFault::InvalidParams)
                .replying_to(reply_to.clone())
        };
        // GetTask's, and SendMessage's configuration's: how much of the
        // task's history its answers keep.
        let (history_length, at) = match ask {
            Some(_) => (
                env.params.and_then(|p| p.get("historyLength")),
                "params.historyLength",
            ),
            None => (
                env.params
                    .and_then(|p| p.get("configuration"))
                    .and_then(|c| c.get("historyLength")),
                "params.configuration.historyLength",
            ),
        };
        match rpc::read_history_length(history_length, at) {
            Ok(Some(n)) => reply_to = reply_to.map(|r| rpc::with(r, "historyLength", json!(n))),
            Ok(None) => {}
            Err(e) => return Err(params(e, &reply_to)),
        }
        let params = |e: RequestError| params(e, &reply_to);
        if let Some(ask) = ask {
            let run_id = env
                .params
                .and_then(|p| p.get("id"))
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty())
                .ok_or_else(|| params(RequestError::field("params.id", "must be a task id")))?;
            return Ok(Intent::About {
                run_id: run_id.to_string(),
                ask,
                reply_to,
            });
        }
        let m = env
            .params
            .and_then(|p| p.get("message"))
            .and_then(Value::as_object)
            .ok_or_else(|| params(RequestError::field("params.message", "must be an object")))?;
        // The non-streaming methods take the task as one answer once it
        // ends (or waits for input), as the SDK servers give it.
        let once = matches!(env.method, "SendMessage" | "message/send");
        let reply = match (once, reply_to.clone()) {
            (true, Some(r)) => Some(rpc::with(r, "send", json!(true))),
            (_, r) => r,
        };
        run_request(m, reply)
            .map(|r| match once {
                true => Intent::Answer(Box::new(r)),
                false => Intent::Run(Box::new(r)),
            })
            .map_err(params)
    }

    fn refusal(&self, refusal: &Refusal<'_>) -> Option<(u16, Value)> {
        Some(rpc::refusal(refusal))
    }

    fn describe(&self, about: &AgentAbout) -> Option<Value> {
        Some(card::agent_card(about))
    }

    fn description_path(&self) -> Option<&'static str> {
        Some(card::WELL_KNOWN_PATH)
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

    fn stop_request(&self) -> Option<fn(&str) -> Value> {
        // The SDK server goes on with a task whose stream was closed.
        Some(cancel_task)
    }

    fn upstream_headers(&self) -> &'static [(&'static str, &'static str)] {
        &[wire::VERSION_HEADER]
    }
}

/// `CancelTask` for the task the upstream's stream named.
fn cancel_task(task_id: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": format!("cancel-{task_id}"),
        "method": "CancelTask",
        "params": { "id": task_id },
    })
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
            rpc::reply_of(run.reply_to.as_ref()),
            (Some(json!(7)), Version::V03),
            "the id every response carries, and the v0.3 spelling asked"
        );
        assert_eq!(run.messages[0].text(), "hi");
        let bad = br#"{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"id":"t"}}"#;
        assert!(A2aRequests.parse_request(bad).is_err(), "not a run");
    }

    fn refused(body: &[u8]) -> (RequestFault, Option<Value>) {
        let e = A2aRequests.classify(body).unwrap_err();
        (e.fault, e.reply_to.map(|r| *r))
    }

    #[test]
    fn each_refusal_is_its_json_rpc_fault_with_the_request_id() {
        assert_eq!(refused(b"{not json"), (RequestFault::Unreadable, None));
        assert_eq!(refused(b"[1]"), (RequestFault::Malformed, None));
        assert_eq!(
            refused(br#"{"jsonrpc":"1.0","id":"a","method":"GetTask"}"#),
            (RequestFault::Malformed, Some(json!("a")))
        );
        assert_eq!(
            refused(br#"{"jsonrpc":"2.0","id":true,"method":"GetTask"}"#),
            (RequestFault::Malformed, None),
            "a boolean id cannot be answered with"
        );
        assert_eq!(
            refused(br#"{"jsonrpc":"2.0","id":3,"method":"Nope","params":{}}"#),
            (RequestFault::UnknownOperation, Some(json!(3)))
        );
        for (method, fault) in [
            (
                "CreateTaskPushNotificationConfig",
                RequestFault::Unsupported(rpc::NO_PUSH),
            ),
            (
                "tasks/pushNotificationConfig/get",
                RequestFault::Unsupported(rpc::NO_PUSH),
            ),
            (
                "GetExtendedAgentCard",
                RequestFault::Unsupported("extended_agent_card"),
            ),
        ] {
            let body = json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": {}});
            assert_eq!(
                refused(body.to_string().as_bytes()),
                (fault, Some(json!(3))),
                "{method}"
            );
        }
        assert_eq!(
            refused(br#"{"jsonrpc":"2.0","id":4,"method":"SendStreamingMessage","params":{}}"#),
            (RequestFault::InvalidParams, Some(json!(4)))
        );
        assert_eq!(
            refused(br#"{"jsonrpc":"2.0","id":5,"method":"GetTask","params":{"id":""}}"#),
            (RequestFault::InvalidParams, Some(json!(5)))
        );
        // v0.3 names: the reply says which spelling the answers take.
        let (fault, reply) = refused(
            br#"{"jsonrpc":"2.0","id":6,"method":"message/stream","params":{"message":{}}}"#,
        );
        assert_eq!(fault, RequestFault::InvalidParams);
        assert_eq!(
            rpc::reply_of(reply.as_ref()),
            (Some(json!(6)), Version::V03)
        );
    }

    #[test]
    fn the_refusals_are_json_rpc_errors_at_200_with_the_id() {
        let cases = [
            (Some(RequestFault::Unreadable), "invalid_request", -32700),
            (Some(RequestFault::Malformed), "invalid_request", -32600),
            (
                Some(RequestFault::UnknownOperation),
                "invalid_request",
                -32601,
            ),
            (Some(RequestFault::InvalidParams), "invalid_request", -32602),
            (
                Some(RequestFault::Unsupported(rpc::NO_PUSH)),
                "invalid_request",
                -32003,
            ),
            (
                Some(RequestFault::Unsupported("extended_agent_card")),
                "invalid_request",
                -32004,
            ),
            (None, "no_such_run", -32001),
            (None, "run_not_stoppable", -32002),
            (None, "run_ended", -32004),
        ];
        for (fault, code, want) in cases {
            let id = json!(9);
            let (status, body) = A2aRequests
                .refusal(&Refusal {
                    status: 400,
                    code,
                    message: "m",
                    reply_to: Some(&id),
                    fault,
                })
                .unwrap();
            assert_eq!(status, 200, "{code}");
            assert_eq!(body["error"]["code"], want, "{code}");
            assert_eq!(body["id"], 9);
        }
        // The gateway's own statuses stay for what JSON-RPC has no code for.
        let (status, body) = A2aRequests
            .refusal(&Refusal {
                status: 429,
                code: "rate_limited",
                message: "slow down",
                reply_to: None,
                fault: None,
            })
            .unwrap();
        assert_eq!(status, 429);
        assert_eq!(body["id"], Value::Null);
        assert_eq!(body["error"]["message"], "slow down");
        // A failure of the gateway or the upstream: an internal error at 200.
        let (status, body) = A2aRequests
            .refusal(&Refusal {
                status: 502,
                code: "upstream_connect",
                message: "the upstream is down",
                reply_to: Some(&json!(8)),
                fault: None,
            })
            .unwrap();
        assert_eq!(status, 200);
        assert_eq!(body["id"], 8);
        assert_eq!(body["error"]["code"], rpc::INTERNAL_ERROR);
    }

    #[test]
    fn history_length_is_kept_for_the_answers_or_refused() {
        for (method, version) in [("GetTask", Version::V1), ("tasks/get", Version::V03)] {
            let body = json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": {"id": "t1", "historyLength": 2}});
            let Intent::About { reply_to, .. } =
                A2aRequests.classify(body.to_string().as_bytes()).unwrap()
            else {
                panic!("{method}: not about a run");
            };
            assert_eq!(rpc::reply_of(reply_to.as_ref()), (Some(json!(3)), version));
            assert_eq!(rpc::history_length(reply_to.as_ref()), Some(2));
            for bad in [json!(-1), json!(1.5), json!("2")] {
                let body = json!({"jsonrpc": "2.0", "id": 4, "method": method, "params": {"id": "t1", "historyLength": bad}});
                assert_eq!(
                    refused(body.to_string().as_bytes()),
                    (
                        RequestFault::InvalidParams,
                        Some(rpc::reply_to(&json!(4), version))
                    ),
                    "{method} {bad}"
                );
            }
        }
        let send = json!({"jsonrpc": "2.0", "id": 5, "method": "SendStreamingMessage", "params": {
            "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
            "configuration": {"historyLength": -3}}});
        assert_eq!(
            refused(send.to_string().as_bytes()).0,
            RequestFault::InvalidParams
        );
    }

    #[test]
    fn task_methods_name_the_run_in_both_versions() {
        for (method, ask) in [
            ("GetTask", RunAsk::Get),
            ("tasks/get", RunAsk::Get),
            ("CancelTask", RunAsk::Stop),
            ("tasks/cancel", RunAsk::Stop),
            ("SubscribeToTask", RunAsk::Follow),
            ("tasks/resubscribe", RunAsk::Follow),
        ] {
            let body =
                json!({"jsonrpc": "2.0", "id": "r", "method": method, "params": {"id": "t1"}});
            let intent = A2aRequests.classify(body.to_string().as_bytes()).unwrap();
            let Intent::About {
                run_id,
                ask: got,
                reply_to,
            } = intent
            else {
                panic!("{method}: {intent:?}");
            };
            assert_eq!((run_id.as_str(), got), ("t1", ask), "{method}");
            let version = if method.contains('/') {
                Version::V03
            } else {
                Version::V1
            };
            assert_eq!(
                rpc::reply_of(reply_to.as_ref()),
                (Some(json!("r")), version)
            );
        }
    }
}
