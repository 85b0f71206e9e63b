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
        kept(json!({"type": "tool-approval-response", "approvalId": "ap-held", "approved": true})),
        kept(json!({"type": "tool-approval-response", "approvalId": "ap-other", "approved": true})),
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
