use super::*;
use crate::wire::marked;
use serde_json::json;

fn frame(v: Value) -> Frame {
    Frame {
        data: v.to_string(),
        ..Default::default()
    }
}

fn decode_all(chunks: &[Value]) -> Vec<Event> {
    let mut d = VercelDecoder::new();
    let mut out = Vec::new();
    for c in chunks {
        d.decode(&frame(c.clone()), &mut out).unwrap();
    }
    d.finish(&mut out).unwrap();
    out
}

fn kinds(chunks: &[Value]) -> Vec<EventKind> {
    decode_all(chunks).into_iter().map(|e| e.kind).collect()
}

fn one(chunk: Value) -> Event {
    let evs = decode_all(&[chunk]);
    assert_eq!(evs.len(), 1, "{evs:#?}");
    evs.into_iter().next().unwrap()
}

fn run_finished(outcome: Outcome, finish_reason: Option<&str>) -> EventKind {
    EventKind::RunFinished {
        thread_id: None,
        run_id: None,
        message_id: None,
        result: None,
        outcome,
        finish_reason: finish_reason.map(str::to_string),
        usage: None,
    }
}

#[test]
fn lifecycle_chunks() {
    let evs = decode_all(&[
        json!({"type": "start", "messageId": "m1", "messageMetadata": {"a": 1}}),
        json!({"type": "start-step"}),
        json!({"type": "message-metadata", "messageMetadata": {"b": 2}}),
        json!({"type": "finish-step"}),
        json!({"type": "finish", "finishReason": "stop", "messageMetadata": {"c": 3}}),
    ]);
    let k: Vec<_> = evs.iter().map(|e| e.kind.clone()).collect();
    assert_eq!(
        k,
        [
            EventKind::RunStarted {
                thread_id: None,
                run_id: None,
                parent_run_id: None,
                message_id: Some("m1".into()),
                input: None
            },
            EventKind::MessageMetadata {
                metadata: json!({"a": 1})
            },
            EventKind::StepStarted { name: None },
            EventKind::MessageMetadata {
                metadata: json!({"b": 2})
            },
            EventKind::StepFinished { name: None },
            EventKind::MessageMetadata {
                metadata: json!({"c": 3})
            },
            run_finished(Outcome::Unspecified, Some("stop")),
        ]
    );
    assert!(evs.iter().all(|e| e.origin == Some(Dialect::Vercel)));
    // start/finish keep their metadata for the Vercel encoder
    assert_eq!(evs[0].extra.get("messageMetadata"), Some(&json!({"a": 1})));
    assert!(evs[1].synthesized && evs[1].extra.is_empty());
    assert!(evs[3].extra.is_empty());
    assert!(evs[5].synthesized && !evs[6].synthesized);
    assert_eq!(evs[6].extra.get("messageMetadata"), Some(&json!({"c": 3})));
}

#[test]
fn abort_and_error() {
    assert_eq!(
        one(json!({"type": "abort", "reason": "user"})).kind,
        run_finished(
            Outcome::Cancelled {
                reason: Some("user".into())
            },
            None
        )
    );
    assert_eq!(
        one(json!({"type": "error", "errorText": "boom"})).kind,
        EventKind::RunError {
            message: "boom".into(),
            code: None
        }
    );
}

#[test]
fn text_and_reasoning_synthesize_missing_starts() {
    assert_eq!(
        kinds(&[
            json!({"type": "text-delta", "id": "t", "delta": "a"}),
            json!({"type": "text-end", "id": "t"}),
            json!({"type": "reasoning-start", "id": "r", "providerMetadata": {"x": {}}}),
            json!({"type": "reasoning-delta", "id": "r", "delta": "b"}),
            json!({"type": "reasoning-end", "id": "r"}),
        ]),
        [
            EventKind::text_start("t"),
            EventKind::text_delta("t", "a"),
            EventKind::text_end("t"),
            EventKind::ReasoningStart {
                message_id: "r".into()
            },
            EventKind::ReasoningDelta {
                message_id: "r".into(),
                delta: "b".into()
            },
            EventKind::ReasoningEnd {
                message_id: "r".into()
            },
        ]
    );
    let e = &decode_all(&[
        json!({"type": "reasoning-start", "id": "r", "providerMetadata": {"x": {}}}),
    ])[0];
    assert_eq!(e.extra.get("providerMetadata"), Some(&json!({"x": {}})));
}

#[test]
fn tool_input_streamed_then_available() {
    let evs = decode_all(&[
        json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "f", "dynamic": true}),
        json!({"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "{\"a\":"}),
        json!({"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "1}"}),
        json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "f", "input": {"a": 1}, "dynamic": true}),
    ]);
    let k: Vec<_> = evs.iter().map(|e| e.kind.clone()).collect();
    assert_eq!(
        k,
        [
            EventKind::ToolCallStart {
                tool_call_id: "c".into(),
                tool_name: "f".into(),
                parent_message_id: None
            },
            EventKind::ToolCallArgs {
                tool_call_id: "c".into(),
                delta: "{\"a\":".into()
            },
            EventKind::ToolCallArgs {
                tool_call_id: "c".into(),
                delta: "1}".into()
            },
            EventKind::ToolCallEnd {
                tool_call_id: "c".into()
            },
        ]
    );
    assert_eq!(evs[0].extra.get("dynamic"), Some(&json!(true)));
    assert_eq!(evs[3].extra, marked("dynamic", json!(true)));
}

#[test]
fn bare_tool_input_available_synthesizes_start_and_args() {
    let evs = decode_all(&[
        json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "f", "input": {"a": 1}}),
    ]);
    let k: Vec<_> = evs.iter().map(|e| e.kind.clone()).collect();
    assert_eq!(
        k,
        [
            EventKind::ToolCallStart {
                tool_call_id: "c".into(),
                tool_name: "f".into(),
                parent_message_id: None
            },
            EventKind::ToolCallArgs {
                tool_call_id: "c".into(),
                delta: "{\"a\":1}".into()
            },
            EventKind::ToolCallEnd {
                tool_call_id: "c".into()
            },
        ]
    );
    assert!(evs[0].synthesized && evs[1].synthesized);
    assert!(!evs[2].synthesized && evs[2].extra.is_empty());
}

#[test]
fn available_input_differing_from_deltas_is_kept() {
    let evs = decode_all(&[
        json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "f"}),
        json!({"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "{\"a\":1}"}),
        json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "f", "input": {"a": 2}}),
    ]);
    assert_eq!(evs[2].extra.get("input"), Some(&json!({"a": 2})));
}

/// A stray end is not balanced with a made-up start: the shape stage
/// drops it on every route, as any end of what is not open.
#[test]
fn a_stray_end_is_left_to_the_shape_stage() {
    let evs = decode_all(&[json!({"type": "reasoning-end", "id": "r"})]);
    assert_eq!(
        evs.iter()
            .map(|e| (&e.kind, e.synthesized))
            .collect::<Vec<_>>(),
        [(
            &EventKind::ReasoningEnd {
                message_id: "r".into()
            },
            false
        )]
    );
    let shaped = babelgate_core::shape::Shaper::shape_all(&evs);
    assert!(
        shaped
            .iter()
            .all(|e| !matches!(e.kind, EventKind::ReasoningEnd { .. })),
        "{shaped:?}"
    );
}

#[test]
fn tool_input_error_ends_the_call_then_reports() {
    let evs = decode_all(&[
        json!({"type": "tool-input-error", "toolCallId": "c", "toolName": "f", "input": "{bad", "errorText": "invalid"}),
    ]);
    let k: Vec<_> = evs.iter().map(|e| e.kind.clone()).collect();
    assert_eq!(
        k,
        [
            EventKind::ToolCallStart {
                tool_call_id: "c".into(),
                tool_name: "f".into(),
                parent_message_id: None
            },
            EventKind::ToolCallArgs {
                tool_call_id: "c".into(),
                delta: "{bad".into()
            },
            EventKind::ToolCallEnd {
                tool_call_id: "c".into()
            },
            EventKind::ToolCallError {
                tool_call_id: "c".into(),
                error: "invalid".into(),
                input_invalid: true
            },
        ]
    );
    assert!(evs[2].synthesized, "no chunk ended the input");
    assert!(evs[3].extra.is_empty(), "input is reproduced from the args");
}

#[test]
fn tool_outputs() {
    // progress of a generator tool: kept whole, no result
    let progress = json!({"type": "tool-output-available", "toolCallId": "c", "output": {"t": 0}, "preliminary": true});
    assert_eq!(
        one(progress.clone()).kind,
        EventKind::Unknown { raw: progress }
    );
    let e = one(
        json!({"type": "tool-output-available", "toolCallId": "c", "output": {"t": 1}, "preliminary": false}),
    );
    assert_eq!(
        e.kind,
        EventKind::ToolCallResult {
            tool_call_id: "c".into(),
            message_id: None,
            content: json!({"t": 1})
        }
    );
    assert_eq!(e.extra, marked("preliminary", json!(false)));
    assert_eq!(
        one(json!({"type": "tool-output-error", "toolCallId": "c", "errorText": "x"})).kind,
        EventKind::ToolCallError {
            tool_call_id: "c".into(),
            error: "x".into(),
            input_invalid: false
        }
    );
    assert_eq!(
        one(json!({"type": "tool-output-denied", "toolCallId": "c"})).kind,
        EventKind::ToolCallDenied {
            tool_call_id: "c".into()
        }
    );
}

#[test]
fn approval_requests_ride_on_the_finish() {
    let approval = Interrupt {
        id: "ap".into(),
        reason: APPROVAL_REASON.into(),
        message: Some("sure?".into()),
        tool_call_id: Some("c".into()),
        payload: None,
        extra: marked("isAutomatic", json!(false)),
    };
    let k = kinds(&[
        json!({"type": "tool-approval-request", "approvalId": "ap", "toolCallId": "c", "reason": "sure?", "isAutomatic": false}),
        json!({"type": "finish-step"}),
        json!({"type": "finish", "finishReason": "tool-calls"}),
    ]);
    assert_eq!(
        k,
        [
            EventKind::StepFinished { name: None },
            run_finished(
                Outcome::Interrupt {
                    interrupts: vec![approval.clone()]
                },
                Some("tool-calls")
            )
        ]
    );
    // no finish: the end of the input ends the run with the interrupt
    let k = kinds(&[
        json!({"type": "tool-approval-request", "approvalId": "ap", "toolCallId": "c", "reason": "sure?", "isAutomatic": false}),
    ]);
    assert_eq!(
        k,
        [run_finished(
            Outcome::Interrupt {
                interrupts: vec![approval]
            },
            None
        )]
    );
}

#[test]
fn an_approval_the_stream_answers_is_no_interrupt() {
    let request = json!({"type": "tool-approval-request", "approvalId": "ap", "toolCallId": "c", "isAutomatic": true});
    let answer = json!({"type": "tool-approval-response", "approvalId": "ap", "approved": true});
    let finish = json!({"type": "finish", "finishReason": "stop"});
    let unknown = |raw: &Value| EventKind::Unknown { raw: raw.clone() };
    // decided by the agent's policy: kept in place
    let k = kinds(&[request.clone(), answer.clone(), finish.clone()]);
    assert_eq!(
        k,
        [
            unknown(&request),
            unknown(&answer),
            run_finished(Outcome::Unspecified, Some("stop"))
        ]
    );
    // asked, then answered before the finish: the request goes out with
    // its answer, and only the unanswered one is an interrupt
    let asked = json!({"type": "tool-approval-request", "approvalId": "ap", "toolCallId": "c"});
    let other = json!({"type": "tool-approval-request", "approvalId": "ap2", "toolCallId": "d"});
    let k = kinds(&[asked.clone(), other, answer.clone(), finish]);
    assert_eq!(k[..2], [unknown(&asked), unknown(&answer)]);
    let EventKind::RunFinished {
        outcome: Outcome::Interrupt { interrupts },
        ..
    } = &k[2]
    else {
        panic!("{k:?}")
    };
    assert_eq!(interrupts.len(), 1);
    assert_eq!(interrupts[0].id, "ap2");
    // an answer to no request of this stream is kept as it came
    assert_eq!(kinds(std::slice::from_ref(&answer)), [unknown(&answer)]);
}

#[test]
fn sources_and_files() {
    assert_eq!(
        one(json!({"type": "source-url", "sourceId": "s", "url": "https://x", "title": "X"})).kind,
        EventKind::Source {
            source_kind: SourceKind::Url,
            source_id: "s".into(),
            url: Some("https://x".into()),
            title: Some("X".into()),
            media_type: None,
            filename: None
        }
    );
    assert_eq!(
            one(json!({"type": "source-document", "sourceId": "s", "mediaType": "application/pdf", "title": "T", "filename": "a.pdf"})).kind,
            EventKind::Source {
                source_kind: SourceKind::Document,
                source_id: "s".into(),
                url: None,
                title: Some("T".into()),
                media_type: Some("application/pdf".into()),
                filename: Some("a.pdf".into())
            }
        );
    let file = EventKind::File {
        url: "https://f".into(),
        media_type: "image/png".into(),
    };
    assert_eq!(
        one(json!({"type": "file", "url": "https://f", "mediaType": "image/png"})).kind,
        file
    );
    let rf = one(json!({"type": "reasoning-file", "url": "https://f", "mediaType": "image/png"}));
    assert_eq!(rf.kind, file);
    assert_eq!(rf.extra.get(marker::TYPE), Some(&json!("reasoning-file")));
}

#[test]
fn data_parts_and_reserved_names() {
    assert_eq!(
        one(json!({"type": "data-weather", "id": "w", "data": {"t": 1}, "transient": true})).kind,
        EventKind::Data {
            name: "weather".into(),
            id: Some("w".into()),
            message_id: None,
            data: json!({"t": 1}),
            transient: true
        }
    );
    let plain = one(json!({"type": "data-state", "id": "state", "data": {"n": 1}}));
    assert_eq!(
        plain.kind,
        EventKind::StateSnapshot {
            snapshot: json!({"n": 1})
        }
    );
    assert_eq!(plain.extra, marked("id", json!("state")));
    let env = one(json!({"type": "data-state", "data": {"type": "delta", "delta": []}}));
    assert_eq!(env.kind, EventKind::StateDelta { patch: json!([]) });
    assert_eq!(env.extra, marked(marker::FORM, json!("envelope")));
    assert_eq!(
        one(json!({"type": "data-state-delta", "data": [], "transient": true})).kind,
        EventKind::StateDelta { patch: json!([]) }
    );
    assert_eq!(
            one(json!({"type": "data-custom", "data": {"name": "progress", "value": 5}, "transient": true})).kind,
            EventKind::Custom {
                name: "progress".into(),
                value: json!(5)
            }
        );
    // a data-custom part of another shape is plain data
    assert!(matches!(
        one(json!({"type": "data-custom", "data": {"x": 1}})).kind,
        EventKind::Data { .. }
    ));
    assert_eq!(
        one(json!({"type": "data-unknown", "data": {"type": "x"}, "transient": true})).kind,
        EventKind::Unknown {
            raw: json!({"type": "x"})
        }
    );
    assert_eq!(
        one(json!({"type": "data-raw", "data": {"event": {"a": 1}, "source": "s"}})).kind,
        EventKind::Raw {
            event: json!({"a": 1}),
            source: Some("s".into())
        }
    );
    assert_eq!(
        one(json!({"type": "data-messages-snapshot", "data": {"messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}})).kind,
        EventKind::MessagesSnapshot {
            messages: vec![babelgate_core::request::Message::text_message("u", babelgate_core::Role::User, "hi")]
        }
    );
    let k = kinds(&[
        json!({"type": "data-interrupt", "id": "i", "data": {"id": "i", "reason": "form"}}),
        json!({"type": "finish"}),
    ]);
    assert!(
        matches!(&k[0], EventKind::RunFinished { outcome: Outcome::Interrupt { interrupts }, .. } if interrupts[0].reason == "form")
    );
}

#[test]
fn old_chunk_names_are_read() {
    assert_eq!(
        kinds(&[
            json!({"type": "step-start", "id": "step_001", "messageId": "m"}),
            json!({"type": "tool-call-start", "id": "tc", "toolName": "displayWeather"}),
            json!({"type": "tool-call-delta", "id": "tc", "argsText": "{\"city\":\"北京\"}"}),
            json!({"type": "tool-call-end", "id": "tc"}),
            json!({"type": "tool-result", "id": "tc", "toolName": "displayWeather", "result": {"temperature": 22}}),
            json!({"type": "step-end", "id": "step_001"}),
        ]),
        [
            EventKind::StepStarted {
                name: Some("step_001".into())
            },
            EventKind::ToolCallStart {
                tool_call_id: "tc".into(),
                tool_name: "displayWeather".into(),
                parent_message_id: None
            },
            EventKind::ToolCallArgs {
                tool_call_id: "tc".into(),
                delta: "{\"city\":\"北京\"}".into()
            },
            EventKind::ToolCallEnd {
                tool_call_id: "tc".into()
            },
            EventKind::ToolCallResult {
                tool_call_id: "tc".into(),
                message_id: None,
                content: json!({"temperature": 22})
            },
            EventKind::StepFinished {
                name: Some("step_001".into())
            },
        ]
    );
    // a tool-result for a call never announced gets its start and end
    let k = kinds(&[json!({"type": "tool-result", "id": "x", "toolName": "f", "result": 1})]);
    assert_eq!(k.len(), 3);
}

#[test]
fn unknown_and_v7_chunks_are_kept_whole() {
    for raw in [
        json!({"type": "future-chunk", "x": 1}),
        json!({"type": "reset-step"}),
        json!({"type": "custom", "kind": "openai.compaction"}),
        json!({"type": "tool-approval-response", "approvalId": "a", "approved": true}),
    ] {
        let e = one(raw.clone());
        assert_eq!(e.kind, EventKind::Unknown { raw });
        assert_eq!(e.origin, Some(Dialect::Vercel));
    }
}

#[test]
fn done_ends_the_input() {
    let mut d = VercelDecoder::new();
    let mut out = Vec::new();
    d.decode(
        &Frame {
            data: "[DONE]".into(),
            ..Default::default()
        },
        &mut out,
    )
    .unwrap();
    d.decode(&frame(json!({"type": "text-start", "id": "t"})), &mut out)
        .unwrap();
    assert!(out.is_empty());
}

#[test]
fn malformed_chunks_are_errors() {
    let cases: [(&str, &str); 8] = [
        ("{not json", "invalid JSON"),
        ("[1]", "not a JSON object"),
        (r#"{"id":"x"}"#, "`type`"),
        (
            r#"{"type":"text-delta","id":"t"}"#,
            "text-delta: missing or invalid field `delta`",
        ),
        (
            r#"{"type":"tool-input-start","toolCallId":"c"}"#,
            "`toolName`",
        ),
        (r#"{"type":"error"}"#, "`errorText`"),
        (
            r#"{"type":"data-x","id":"i"}"#,
            "data-x: missing or invalid field `data`",
        ),
        (r#"{"type":"start","messageId":5}"#, "`messageId`"),
    ];
    for (data, want) in cases {
        let mut d = VercelDecoder::new();
        let err = d
            .decode(
                &Frame {
                    data: data.into(),
                    ..Default::default()
                },
                &mut Vec::new(),
            )
            .unwrap_err();
        assert!(err.message.contains(want), "{data}: {err}");
    }
}

/// The table declares what the general path does (each row's frames,
/// alone, after frames that open what they continue, and in a row).
#[test]
fn the_table_reads_as_the_general_path_reads() {
    let before = [
        r#"{"type":"text-start","id":"id-1"}"#,
        r#"{"type":"reasoning-start","id":"id-1"}"#,
        r#"{"type":"tool-input-start","toolCallId":"id-1","toolName":"f"}"#,
        r#"{"type":"error","errorText":"x"}"#,
    ];
    let mut run = |frames: &[String], fast: bool| match fast {
        true => babelgate_core::testing::decode_all(&mut VercelDecoder::new(), frames),
        false => {
            babelgate_core::testing::decode_all(&mut VercelDecoder::new().general_only(), frames)
        }
    };
    babelgate_core::testing::check_table_decodes(&wire::FAST, &before, &mut run).unwrap();
}
