use super::*;

fn parse(v: Value) -> Result<RunRequest, RequestError> {
    VercelRequests.parse_request(v.to_string().as_bytes())
}

fn build(r: &RunRequest) -> Value {
    VercelRequests.build_request(r).unwrap()
}

/// What useChat sends after a front-end tool ran: the whole history with
/// the answer being continued last.
fn continuation_body() -> Value {
    json!({
        "id": "chat-1",
        "messages": [
            {"id": "u1", "role": "user", "parts": [
                {"type": "text", "text": "make it red"},
                {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AAAA", "filename": "a.png"}
            ]},
            {"id": "a1", "role": "assistant", "metadata": {"model": "m"}, "parts": [
                {"type": "step-start"},
                {"type": "reasoning", "text": "think", "state": "done"},
                {"type": "text", "text": "Sure.", "state": "done"},
                {"type": "tool-change_background", "toolCallId": "tc-1", "state": "output-available",
                 "input": {"color": "#ff0000"}, "output": {"ok": true}},
                {"type": "dynamic-tool", "toolName": "lookup", "toolCallId": "tc-2", "state": "output-error",
                 "input": {"q": 1}, "errorText": "boom"},
                {"type": "step-start"},
                {"type": "text", "text": "Done.", "state": "done"},
                {"type": "data-state", "id": "state", "data": {"counter": 2}},
                {"type": "source-url", "sourceId": "s1", "url": "https://x"}
            ]}
        ],
        "trigger": "submit-message",
        "messageId": "a1",
        "sessionId": "abc"
    })
}

#[test]
fn parse_splits_assistant_messages_at_steps() {
    let r = parse(continuation_body()).unwrap();
    assert_eq!(r.thread_id, "chat-1");
    assert_eq!(r.run_id, "");
    assert_eq!(r.trigger, Some(Trigger::SubmitMessage));
    assert_eq!(r.continue_message_id.as_deref(), Some("a1"));
    // What the client will look results up in.
    assert_eq!(r.continued.tool_calls, ["tc-1", "tc-2"]);
    assert_eq!(r.forwarded_props, Some(json!({"sessionId": "abc"})));
    assert_eq!(r.state, Some(json!({"counter": 2})));
    let roles: Vec<_> = r.messages.iter().map(|m| (m.id.as_str(), m.role)).collect();
    assert_eq!(
        roles,
        [
            ("u1", Role::User),
            ("a1", Role::Assistant),
            ("tc-1-result", Role::Tool),
            ("tc-2-result", Role::Tool),
            ("a1:2", Role::Assistant),
        ]
    );
    let user = &r.messages[0];
    assert!(user.content_is_parts);
    assert_eq!(
        user.content[1],
        Part::Media {
            media: MediaKind::Image,
            source: MediaSource::Data {
                value: "AAAA".into(),
                media_type: "image/png".into()
            },
            filename: Some("a.png".into())
        }
    );
    let a1 = &r.messages[1];
    assert_eq!(a1.extra.get("metadata"), Some(&json!({"model": "m"})));
    assert_eq!(
        a1.content[..2],
        [
            Part::Reasoning {
                text: "think".into()
            },
            Part::Text {
                text: "Sure.".into()
            }
        ]
    );
    let calls: Vec<_> = a1.tool_calls().collect();
    assert_eq!(calls[0].name, "change_background");
    assert_eq!(calls[0].arguments, r##"{"color":"#ff0000"}"##);
    assert_eq!(calls[1].name, "lookup");
    assert_eq!(calls[1].extra.get("dynamic"), Some(&json!(true)));
    assert_eq!(r.messages[2].tool_call_id.as_deref(), Some("tc-1"));
    assert_eq!(r.messages[2].text(), r#"{"ok":true}"#);
    assert_eq!(r.messages[3].error.as_deref(), Some("boom"));
    let a2 = &r.messages[4];
    assert_eq!(a2.text(), "Done.");
    assert!(matches!(a2.content[1], Part::Other { .. }));
}

/// What `ai`'s client sends back after a LangGraph answer through the
/// gateway: each part names the upstream message it came from
/// (`providerMetadata`, `callProviderMetadata`, `resultProviderMetadata`),
/// so the history goes upstream under the upstream's ids, one message per
/// upstream message; a step that held only the state carries nothing and
/// is not sent.
#[test]
fn parts_naming_upstream_messages_go_back_under_those_ids() {
    let ids = |id: &str| json!({"babelgate": {"messageId": id}});
    let body = json!({
        "id": "chat-1",
        "trigger": "submit-message",
        "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "weather?"}]},
            {"id": "ui-a", "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "data-state", "id": "state", "data": {"n": 1}},
                {"type": "text", "text": "Let me look.", "state": "done", "providerMetadata": ids("lc-1")},
                {"type": "tool-get_weather", "toolCallId": "c1", "state": "output-available",
                 "input": {"city": "Paris"}, "output": "Sunny",
                 "callProviderMetadata": ids("lc-1"), "resultProviderMetadata": ids("tm-1")},
                {"type": "step-start"},
                {"type": "text", "text": "Sunny in Paris.", "state": "done", "providerMetadata": ids("lc-2")},
            ]},
            {"id": "ui-b", "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "data-state", "id": "state", "data": {"n": 2}},
            ]},
            {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "thanks"}]},
        ],
    });
    let r = parse(body).unwrap();
    let got: Vec<_> = r
        .messages
        .iter()
        .map(|m| (m.id.as_str(), m.role, m.text()))
        .collect();
    assert_eq!(
        got,
        [
            ("u1", Role::User, "weather?".to_string()),
            ("lc-1", Role::Assistant, "Let me look.".to_string()),
            ("tm-1", Role::Tool, "Sunny".to_string()),
            ("lc-2", Role::Assistant, "Sunny in Paris.".to_string()),
            ("u2", Role::User, "thanks".to_string()),
        ]
    );
    assert_eq!(
        r.messages[1].tool_calls().next().map(|c| c.id.as_str()),
        Some("c1")
    );
    // the latest state is still the request's
    assert_eq!(r.state, Some(json!({"n": 2})));
}

#[test]
fn parse_build_parse_is_stable() {
    let first = parse(continuation_body()).unwrap();
    let built = build(&first);
    assert_eq!(built["id"], "chat-1");
    assert_eq!(built["trigger"], "submit-message");
    assert_eq!(built["messageId"], "a1");
    assert_eq!(built["sessionId"], "abc");
    let again = parse(built.clone()).unwrap();
    assert_eq!(again, first);
    // and the assistant answer is one UI message again, with its steps
    let a = &built["messages"][1];
    assert_eq!(a["id"], "a1");
    let types: Vec<_> = a["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        types,
        [
            "step-start",
            "reasoning",
            "text",
            "tool-change_background",
            "dynamic-tool",
            "step-start",
            "text",
            "data-state",
            "source-url"
        ]
    );
    assert_eq!(a["parts"][3]["state"], "output-available");
    assert_eq!(a["parts"][3]["output"], json!({"ok": true}));
    assert_eq!(a["parts"][4]["state"], "output-error");
    assert_eq!(a["parts"][4]["toolName"], "lookup");
}

#[test]
fn approvals_become_resume_entries_and_back() {
    let body = json!({
        "id": "c",
        "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete it"}]},
            {"id": "a1", "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "tool-confirm_action", "toolCallId": "tc-1", "state": "approval-responded",
                 "input": {"path": "/tmp/x"}, "approval": {"id": "int-1", "approved": false, "reason": "no"}},
                {"type": "tool-other", "toolCallId": "tc-2", "state": "output-denied",
                 "input": {}, "approval": {"id": "int-2", "approved": false}}
            ]}
        ],
        "trigger": "submit-message",
        "messageId": "a1",
        "resume": [{"interruptId": "int-9", "status": "cancelled"}]
    });
    let r = parse(body).unwrap();
    assert_eq!(
        r.resume,
        [
            ResumeEntry {
                interrupt_id: "int-1".into(),
                status: "resolved".into(),
                payload: Some(json!({"approved": false, "reason": "no"}))
            },
            ResumeEntry {
                interrupt_id: "int-9".into(),
                status: "cancelled".into(),
                payload: None
            }
        ]
    );
    // the denied call answers with the ai package's words
    assert_eq!(r.messages[2].error.as_deref(), Some(DENIED_TEXT));
    // what the client will look a chunk's call or approval up in
    assert_eq!(r.continued.tool_calls, ["tc-1", "tc-2"]);
    assert_eq!(r.continued.approvals, ["int-1", "int-2"]);
    let built = build(&r);
    assert_eq!(
        built["messages"][1]["parts"][1]["state"],
        "approval-responded"
    );
    assert_eq!(built["messages"][1]["parts"][2]["state"], "output-denied");
    assert_eq!(
        built["resume"],
        json!([{"interruptId": "int-9", "status": "cancelled"}])
    );
    assert_eq!(parse(built).unwrap(), r);
}

#[test]
fn build_groups_ag_ui_style_history() {
    // AG-UI history: assistant with a call, its tool message, then text.
    let r = RunRequest {
        thread_id: "t".into(),
        messages: vec![
            Message::text_message("u", Role::User, "weather?"),
            Message {
                id: "m1".into(),
                role: Role::Assistant,
                content: vec![Part::ToolCall(ToolCall {
                    id: "tc".into(),
                    name: "get_weather".into(),
                    arguments: r#"{"city":"北京"}"#.into(),
                    extra: Map::new(),
                })],
                ..Default::default()
            },
            Message {
                id: "r1".into(),
                role: Role::Tool,
                content: vec![Part::Text {
                    text: "sunny".into(),
                }],
                tool_call_id: Some("tc".into()),
                ..Default::default()
            },
            Message::text_message("m2", Role::Assistant, "It is sunny."),
            Message::text_message("m3", Role::Assistant, "Anything else?"),
        ],
        ..Default::default()
    };
    let built = build(&r);
    let msgs = built["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3, "{built:#}");
    assert_eq!(
        msgs[1]["parts"],
        json!([
            {"type": "step-start"},
            {"type": "tool-get_weather", "toolCallId": "tc", "state": "output-available",
             "input": {"city": "北京"}, "output": "sunny"},
            {"type": "step-start"},
            {"type": "text", "text": "It is sunny.", "state": "done"}
        ])
    );
    assert_eq!(msgs[2]["id"], "m3");
    assert_eq!(built["trigger"], "submit-message");
    assert!(built.get("messageId").is_none());
}

#[test]
fn regenerate_drops_the_answer_being_replaced() {
    let body = json!({
        "id": "c",
        "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]},
            {"id": "a1", "role": "assistant", "parts": [
                {"type": "text", "text": "old"},
                {"type": "tool-delete", "toolCallId": "tc-1", "state": "approval-responded",
                 "input": {}, "approval": {"id": "ap-1", "approved": true}}
            ]}
        ],
        "trigger": "regenerate-message",
        "messageId": "a1"
    });
    let r = parse(body).unwrap();
    assert_eq!(r.messages.len(), 1);
    assert_eq!(r.trigger, Some(Trigger::RegenerateMessage));
    assert_eq!(r.continue_message_id, None);
    // The answer replaced holds calls and approvals; a regenerate
    // continues none of them.
    assert!(r.continued.is_empty());
    assert_eq!(r.extra.get("messageId"), Some(&json!("a1")));
    let built = build(&r);
    assert_eq!(built["trigger"], "regenerate-message");
    assert_eq!(built["messageId"], "a1");
    assert_eq!(parse(built).unwrap(), r);
}

#[test]
fn message_id_of_a_user_message_is_not_a_continuation() {
    let body = json!({
        "id": "c",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "edited"}]}],
        "trigger": "submit-message",
        "messageId": "u1"
    });
    let r = parse(body).unwrap();
    assert_eq!(r.continue_message_id, None);
    assert_eq!(r.extra.get("messageId"), Some(&json!("u1")));
}

#[test]
fn tools_context_and_state_from_body() {
    let body = json!({
        "id": "c",
        "messages": [],
        "tools": [{"name": "change_background", "description": "d", "parameters": {"type": "object"}}],
        "context": [{"description": "user", "value": "Ada"}],
        "state": {"a": 1},
        "threadHint": 3,
        "trigger": "submit-message"
    });
    let r = parse(body).unwrap();
    assert_eq!(r.tools[0].name, "change_background");
    assert_eq!(r.context[0].value, "Ada");
    assert_eq!(r.state, Some(json!({"a": 1})));
    assert_eq!(r.forwarded_props, Some(json!({"threadHint": 3})));
    assert_eq!(parse(build(&r)).unwrap(), r);
    // a tools field of another shape is the app's own: forwarded
    let r = parse(json!({"id": "c", "messages": [], "tools": {"x": 1}})).unwrap();
    assert!(r.tools.is_empty());
    assert_eq!(r.forwarded_props, Some(json!({"tools": {"x": 1}})));
}

#[test]
fn state_replays_envelope_parts() {
    let body = json!({
        "id": "c",
        "messages": [{"id": "a", "role": "assistant", "parts": [
            {"type": "data-state", "data": {"type": "snapshot", "snapshot": {"items": ["a"]}}},
            {"type": "data-state", "data": {"type": "delta", "delta": [{"op": "add", "path": "/items/-", "value": "b"}]}}
        ]}]
    });
    assert_eq!(
        parse(body).unwrap().state,
        Some(json!({"items": ["a", "b"]}))
    );
}

#[test]
fn string_outputs_that_look_like_json_stay_strings() {
    let body = json!({
        "id": "c",
        "messages": [{"id": "a", "role": "assistant", "parts": [
            {"type": "tool-t", "toolCallId": "x", "state": "output-available", "input": {}, "output": "42"},
            {"type": "tool-t", "toolCallId": "y", "state": "output-available", "input": {}, "output": "plain"}
        ]}],
        "trigger": "submit-message"
    });
    let r = parse(body).unwrap();
    let built = build(&r);
    assert_eq!(built["messages"][0]["parts"][1]["output"], json!("42"));
    assert_eq!(built["messages"][0]["parts"][2]["output"], json!("plain"));
    assert_eq!(parse(built).unwrap(), r);
}

#[test]
fn errors_name_the_field() {
    let cases = [
        (json!([]), None),
        (json!({"messages": []}), Some("id")),
        (json!({"id": 1, "messages": []}), Some("id")),
        (json!({"id": "c"}), Some("messages")),
        (json!({"id": "c", "messages": {}}), Some("messages")),
        (
            json!({"id": "c", "messages": [], "trigger": "resume"}),
            Some("trigger"),
        ),
        (
            json!({"id": "c", "messages": [], "messageId": 3}),
            Some("messageId"),
        ),
        (json!({"id": "c", "messages": [7]}), Some("messages[0]")),
        (
            json!({"id": "c", "messages": [{"role": "user", "parts": []}]}),
            Some("messages[0].id"),
        ),
        (
            json!({"id": "c", "messages": [{"id": "x", "role": "tool", "parts": []}]}),
            Some("messages[0].role"),
        ),
        (
            json!({"id": "c", "messages": [{"id": "x", "role": "user"}]}),
            Some("messages[0].parts"),
        ),
        (
            json!({"id": "c", "messages": [{"id": "x", "role": "user", "parts": [{"type": "text"}]}]}),
            Some("messages[0].parts[0].text"),
        ),
        (
            json!({"id": "c", "messages": [{"id": "x", "role": "user", "parts": [{"text": "a"}]}]}),
            Some("messages[0].parts[0].type"),
        ),
        (
            json!({"id": "c", "messages": [{"id": "x", "role": "assistant", "parts": [
                    {"type": "tool-a", "toolCallId": "t", "state": "weird"}]}]}),
            Some("messages[0].parts[0].state"),
        ),
        (
            json!({"id": "c", "messages": [{"id": "x", "role": "assistant", "parts": [
                    {"type": "dynamic-tool", "toolCallId": "t", "state": "input-available"}]}]}),
            Some("messages[0].parts[0].toolName"),
        ),
        (
            json!({"id": "c", "messages": [{"id": "x", "role": "user", "parts": [
                    {"type": "file", "url": "https://x"}]}]}),
            Some("messages[0].parts[0].mediaType"),
        ),
    ];
    for (body, field) in cases {
        let err = parse(body.clone()).unwrap_err();
        assert_eq!(err.field.as_deref(), field, "{body}: {err}");
    }
    let err = VercelRequests.parse_request(b"{oops").unwrap_err();
    assert!(err.message.contains("not valid JSON"), "{err}");
}

/// Bodies the `ai` package's chat client sent (testdata/make-client-requests.mjs).
fn client_request(name: &str) -> Value {
    let text = include_str!("../../testdata/client_requests.json");
    let all: Value = serde_json::from_str(text).unwrap();
    all[name].clone()
}

#[test]
fn real_client_resubmit_after_a_front_end_tool() {
    let body = client_request("frontend");
    let r = parse(body.clone()).unwrap();
    assert_eq!(r.thread_id, "chat-1");
    assert_eq!(r.continue_message_id.as_deref(), Some("msg-1"));
    assert_eq!(r.forwarded_props, Some(json!({"sessionId": "s-1"})));
    // user, assistant(text + call), tool result: what an AG-UI agent expects
    let shape: Vec<_> = r
        .messages
        .iter()
        .map(|m| {
            (
                m.role,
                m.text(),
                m.tool_calls().count(),
                m.tool_call_id.clone(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            (Role::User, "hello".to_string(), 0, None),
            (
                Role::Assistant,
                "Sure, changing the background to red.".to_string(),
                1,
                None
            ),
            (
                Role::Tool,
                r#"{"ok":true}"#.to_string(),
                0,
                Some("tc-1".to_string())
            ),
        ]
    );
    assert_eq!(
        r.messages[1].tool_calls().next().unwrap().arguments,
        r##"{"color":"#ff0000"}"##
    );
    // building it back gives the client's messages again
    let built = build(&r);
    assert_eq!(built["messages"], body["messages"]);
    assert_eq!(parse(built).unwrap(), r);
}

#[test]
fn real_client_resubmit_after_an_approval() {
    let body = client_request("approval");
    let r = parse(body.clone()).unwrap();
    assert_eq!(
        r.resume,
        [ResumeEntry {
            interrupt_id: "appr-1".into(),
            status: "resolved".into(),
            payload: Some(json!({"approved": false, "reason": "not that file"}))
        }]
    );
    // the call is in the history, unanswered: the agent answers it
    assert_eq!(r.messages.len(), 2);
    assert_eq!(
        r.messages[1].tool_calls().next().unwrap().name,
        "confirm_action"
    );
    let built = build(&r);
    assert_eq!(built["messages"], body["messages"]);
    assert_eq!(parse(built).unwrap(), r);
}

#[test]
fn real_client_regenerate() {
    let r = parse(client_request("regenerate")).unwrap();
    assert_eq!(r.trigger, Some(Trigger::RegenerateMessage));
    assert_eq!(r.messages.len(), 1);
    assert_eq!(r.continue_message_id, None);
    assert_eq!(parse(build(&r)).unwrap(), r);
}

#[test]
fn input_streaming_parts_are_no_calls_yet() {
    let body = json!({"id": "c", "messages": [{"id": "a", "role": "assistant", "parts": [
        {"type": "text", "text": "x", "state": "done"},
        {"type": "tool-t", "toolCallId": "t", "state": "input-streaming", "input": {"a": "par"}}
    ]}]});
    let r = parse(body).unwrap();
    assert!(!r.messages[0].has_tool_calls());
}
