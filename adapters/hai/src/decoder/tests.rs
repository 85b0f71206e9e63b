use super::*;
use serde_json::json;

fn frame(v: Value) -> Frame {
    Frame {
        data: v.to_string(),
        ..Default::default()
    }
}

fn decode_all(frames: &[Value]) -> Vec<Event> {
    let mut d = HaiDecoder::new();
    let mut out = Vec::new();
    for f in frames {
        d.decode(&frame(f.clone()), &mut out).unwrap();
    }
    d.finish(&mut out).unwrap();
    out
}

fn kinds(evs: &[Event]) -> Vec<EventKind> {
    evs.iter().map(|e| e.kind.clone()).collect()
}

fn is_synth(e: &Event) -> bool {
    e.synthesized
}

fn err(v: Value) -> String {
    let mut d = HaiDecoder::new();
    d.decode(&frame(v), &mut Vec::new()).unwrap_err().message
}

#[test]
fn run_lifecycle_keeps_hai_fields() {
    let evs = decode_all(&[
        json!({"type":"RUN_STARTED","messageId":"m1","role":"assistant","timestamp":5}),
        json!({"type":"RUN_FINISHED","messageId":"m1","role":"assistant","timestamp":6}),
    ]);
    assert_eq!(
        evs[0].kind,
        EventKind::RunStarted {
            thread_id: None,
            run_id: None,
            parent_run_id: None,
            message_id: Some("m1".into()),
            input: None
        }
    );
    assert_eq!(evs[0].timestamp, Some(5));
    assert_eq!(evs[0].origin, Some(Dialect::Hai));
    assert_eq!(evs[0].extra["role"], "assistant");
    assert!(matches!(
        evs[1].kind,
        EventKind::RunFinished {
            outcome: Outcome::Unspecified,
            ..
        }
    ));
}

#[test]
fn business_text_object_and_string_deltas() {
    let evs = decode_all(&[
        json!({"type":"BUSINESS_DATA_START","messageId":"m","role":"assistant","timestamp":1}),
        json!({"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":"HAI是","timestamp":2}),
        json!({"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":{"output":{"type":"text","content":"协议"},"layout":{"x":1}},
                   "blockId":"b1","style":{"color":"red"},"timestamp":3}),
        json!({"type":"BUSINESS_DATA_END","messageId":"m","role":"assistant","timestamp":4}),
    ]);
    assert_eq!(
        kinds(&evs),
        [
            EventKind::text_start("m"),
            EventKind::text_delta("m", "HAI是"),
            EventKind::text_delta("m", "协议"),
            EventKind::text_end("m"),
        ]
    );
    assert_eq!(evs[0].timestamp, Some(1), "the START's time");
    assert_eq!(evs[1].extra[wire::X_DELTA], "", "plain string form");
    assert_eq!(
        evs[2].extra[wire::X_DELTA],
        json!({"output":{"type":"text"},"layout":{"x":1}})
    );
    assert_eq!(evs[2].extra["blockId"], "b1");
    assert_eq!(evs[2].extra["style"], json!({"color":"red"}));
    assert_eq!(evs[3].extra["role"], "assistant");
    assert!(!evs.iter().any(is_synth));
}

#[test]
fn thinking_then_text_becomes_reasoning_then_text() {
    let think = |c: &str| {
        json!({"type":"BUSINESS_DATA_CONTENT","messageId":"m","timestamp":2,
            "delta":{"output":{"type":"thinking","data":{"content":c,"elapsed":3,"thinking":true,"collapse":true}}}})
    };
    let evs = decode_all(&[
        json!({"type":"BUSINESS_DATA_START","messageId":"m","role":"assistant","timestamp":1}),
        json!({"type":"BUSINESS_DATA_CONTENT","messageId":"m","timestamp":2,
                   "delta":{"output":{"type":"fold","data":{"title":"思考","fold":false,"position":"start"}}}}),
        think("先想"),
        think("一下"),
        json!({"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":{"output":{"type":"text","content":"答"}}}),
        think("再想"),
        json!({"type":"BUSINESS_DATA_END","messageId":"m","timestamp":9}),
    ]);
    let k = kinds(&evs);
    assert!(
        matches!(&k[0], EventKind::Data { name, message_id: Some(m), data, .. }
            if name == "fold" && m == "m" && data["position"] == "start")
    );
    assert_eq!(
        evs[0].extra[wire::X_START]["messageId"],
        "m",
        "the widget carries the START"
    );
    assert_eq!(
        k[1],
        EventKind::ReasoningStart {
            message_id: "m:thinking".into()
        }
    );
    assert!(is_synth(&evs[1]), "the message was already open");
    assert_eq!(
        k[2],
        EventKind::ReasoningDelta {
            message_id: "m:thinking".into(),
            delta: "先想".into()
        }
    );
    assert_eq!(
        evs[2].extra[wire::X_DELTA],
        json!({"output":{"type":"thinking","data":{"elapsed":3,"thinking":true,"collapse":true}}})
    );
    assert_eq!(
        k[4],
        EventKind::ReasoningEnd {
            message_id: "m:thinking".into()
        }
    );
    assert!(is_synth(&evs[4]));
    assert!(matches!(&k[5], EventKind::TextStart { message_id, .. } if message_id == "m"));
    assert!(is_synth(&evs[5]));
    assert!(matches!(&k[6], EventKind::TextDelta { delta, .. } if delta == "答"));
    assert_eq!(
        k[7],
        EventKind::ReasoningStart {
            message_id: "m:thinking-2".into()
        }
    );
    assert_eq!(
        k[9],
        EventKind::ReasoningEnd {
            message_id: "m:thinking-2".into()
        }
    );
    assert_eq!(k[10], EventKind::text_end("m"));
    assert_eq!(evs[10].timestamp, Some(9));
}

#[test]
fn message_that_only_thinks_ends_with_its_reasoning() {
    let evs = decode_all(&[
        json!({"type":"BUSINESS_DATA_START","messageId":"m","role":"assistant","timestamp":1}),
        json!({"type":"BUSINESS_DATA_CONTENT","messageId":"m",
                   "delta":{"output":{"type":"thinking","data":{"content":"x"}}}}),
        json!({"type":"BUSINESS_DATA_END","messageId":"m","timestamp":3}),
    ]);
    assert_eq!(
        evs[0].kind,
        EventKind::ReasoningStart {
            message_id: "m:thinking".into()
        }
    );
    assert_eq!(evs[0].timestamp, Some(1));
    assert_eq!(evs[0].extra[wire::X_START]["timestamp"], 1);
    assert_eq!(
        evs[2].kind,
        EventKind::ReasoningEnd {
            message_id: "m:thinking".into()
        }
    );
    assert_eq!(
        evs[2].extra[wire::X_END],
        json!({"messageId":"m","timestamp":3})
    );
}

#[test]
fn empty_and_widget_only_messages() {
    let evs = decode_all(&[
        json!({"type":"BUSINESS_DATA_START","messageId":"e","role":"assistant"}),
        json!({"type":"BUSINESS_DATA_END","messageId":"e"}),
        json!({"type":"BUSINESS_DATA_START","messageId":"w","role":"assistant"}),
        json!({"type":"BUSINESS_DATA_CONTENT","messageId":"w","blockId":"card-1",
                   "delta":{"output":{"type":"card","title":"inline"}}}),
        json!({"type":"BUSINESS_DATA_END","messageId":"w"}),
    ]);
    let k = kinds(&evs);
    assert!(matches!(&k[0], EventKind::TextStart { message_id, .. } if message_id == "e"));
    assert!(!is_synth(&evs[0]));
    assert_eq!(k[1], EventKind::text_end("e"));
    assert!(
        matches!(&k[2], EventKind::Data { name, id: Some(b), data, .. }
            if name == "card" && b == "card-1" && data == &json!({"title":"inline"}))
    );
    assert_eq!(evs[2].extra[wire::X_INLINE], true);
    assert!(matches!(&k[3], EventKind::TextStart { .. }) && is_synth(&evs[3]));
    assert_eq!(k[4], EventKind::text_end("w"));
    assert!(!is_synth(&evs[4]));
}

#[test]
fn shorthand_content_without_start_and_raw_deltas() {
    let evs = decode_all(&[
        json!({"type":"BUSINESS_DATA_CONTENT","messageId":"s","delta":"hi"}),
        json!({"type":"BUSINESS_DATA_CONTENT","messageId":"s","delta":[1,2]}),
        json!({"type":"BUSINESS_DATA_CONTENT","messageId":"t","delta":{"output":{"type":"chart","data":{"v":1}}}}),
    ]);
    assert!(matches!(&evs[0].kind, EventKind::TextStart { message_id, .. } if message_id == "s"));
    assert!(is_synth(&evs[0]));
    assert!(matches!(&evs[2].kind, EventKind::Data { name, data, .. }
            if name == wire::RAW_DELTA_NAME && data == &json!([1,2])));
    assert!(!evs[2].extra.contains_key(wire::X_DELTA), "no template");
    assert!(matches!(&evs[3].kind, EventKind::Data { name, .. } if name == "chart"));
    assert_eq!(evs[3].extra[wire::X_IMPLICIT], "t");
}

#[test]
fn held_start_is_released_by_other_frames_and_at_the_end() {
    let evs = decode_all(&[
        json!({"type":"BUSINESS_DATA_START","messageId":"m","role":"assistant"}),
        json!({"type":"STEP_STARTED","stepName":"s"}),
        json!({"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":"x"}),
        json!({"type":"BUSINESS_DATA_START","messageId":"n","role":"assistant"}),
    ]);
    assert!(matches!(&evs[0].kind, EventKind::TextStart { message_id, .. } if message_id == "m"));
    assert!(matches!(evs[1].kind, EventKind::StepStarted { .. }));
    assert!(matches!(evs[2].kind, EventKind::TextDelta { .. }));
    assert!(matches!(&evs[3].kind, EventKind::TextStart { message_id, .. } if message_id == "n"));
    assert_eq!(evs.len(), 4, "finish released n's START; nothing is closed");
}

/// What a run leaves open is the shape stage's to close: the decoder
/// passes the end on as it came, the shape stage closes messages and
/// collaborations before `RunFinished` (tool calls and steps are the
/// encoder's), and text and reasoning only before `RunError`.
#[test]
fn the_run_end_leaves_closing_to_the_shape_stage() {
    let evs = decode_all(&[
        json!({"type":"RUN_STARTED","messageId":"r"}),
        json!({"type":"STEP_STARTED","stepName":"s"}),
        json!({"type":"BUSINESS_DATA_START","messageId":"m","role":"assistant"}),
        json!({"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":"x"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"t","toolCallName":"f"}),
        json!({"type":"AGENT_COLLABORATIVE_MESSAGE_START","messageId":"c","from":"a","to":"b"}),
        json!({"type":"RUN_FINISHED","messageId":"r"}),
    ]);
    let names = |evs: &[Event]| evs.iter().map(|e| e.kind.name()).collect::<Vec<_>>();
    assert_eq!(
        names(&evs[4..]),
        ["tool_call_start", "collab_start", "run_finished"]
    );
    let shaped = babelgate_core::Shaper::shape_all(&evs);
    assert_eq!(
        names(&shaped[6..]),
        ["text_end", "collab_end", "run_finished"]
    );

    let evs = decode_all(&[
        json!({"type":"BUSINESS_DATA_START","messageId":"m","role":"assistant"}),
        json!({"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":"x"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"t","toolCallName":"f"}),
        json!({"type":"RUN_ERROR","message":"boom","code":"E1","timestamp":7}),
    ]);
    assert_eq!(
        names(&evs),
        ["text_start", "text_delta", "tool_call_start", "run_error"]
    );
    assert_eq!(
        evs[3].kind,
        EventKind::RunError {
            message: "boom".into(),
            code: Some("E1".into())
        }
    );
    let shaped = babelgate_core::Shaper::shape_all(&evs);
    assert_eq!(
        names(&shaped),
        [
            "run_started",
            "text_start",
            "text_delta",
            "tool_call_start",
            "text_end",
            "run_error"
        ]
    );
}

#[test]
fn tool_calls_results_and_object_args() {
    let evs = decode_all(&[
        json!({"type":"TOOL_CALL_START","toolCallId":"t","toolCallName":"f","parentMessageId":"m"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"t","delta":"{\"a\":"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"u","delta":{"b":1}}),
        json!({"type":"TOOL_CALL_END","toolCallId":"t"}),
        json!({"type":"TOOL_CALL_RESULT","messageId":"r","toolCallId":"t","content":"ok","role":"tool"}),
        json!({"type":"TOOL_CALL_RESULT","toolCallId":"u","content":[{"type":"text","text":"x"}]}),
    ]);
    let k = kinds(&evs);
    assert_eq!(
        k[0],
        EventKind::ToolCallStart {
            tool_call_id: "t".into(),
            tool_name: "f".into(),
            parent_message_id: Some("m".into())
        }
    );
    assert!(matches!(&k[2], EventKind::ToolCallStart { tool_call_id, .. } if tool_call_id == "u"));
    assert!(is_synth(&evs[2]));
    assert_eq!(
        k[3],
        EventKind::ToolCallArgs {
            tool_call_id: "u".into(),
            delta: "{\"b\":1}".into()
        }
    );
    assert!(evs[3].extra.is_empty());
    assert_eq!(
        k[5],
        EventKind::ToolCallResult {
            tool_call_id: "t".into(),
            message_id: Some("r".into()),
            content: json!("ok")
        }
    );
    assert_eq!(evs[5].extra["role"], "tool");
    // u is still open: the end its result implies is the shape stage's
    assert!(matches!(&k[6], EventKind::ToolCallResult { content, .. } if content.is_array()));
    let shaped = babelgate_core::Shaper::shape_all(&evs);
    let at = shaped
            .iter()
            .position(|e| matches!(&e.kind, EventKind::ToolCallResult { tool_call_id, .. } if tool_call_id == "u"))
            .unwrap();
    assert_eq!(
        shaped[at - 1].kind,
        EventKind::ToolCallEnd {
            tool_call_id: "u".into()
        }
    );
}

#[test]
fn state_snapshot_delta_and_message_snapshot() {
    let evs = decode_all(&[
        json!({"type":"STATE_SNAPSHOT","snapshot":{"a":1}}),
        json!({"type":"STATE_DELTA","delta":[{"op":"add","path":"/b","value":2,"from":""}],"timestamp":3}),
        json!({"type":"MESSAGE_SNAPSHOT","messages":[
                {"id":"msg-1","role":"user","content":"Hello"},
                {"id":"msg-2","role":"assistant","content":"Hi there!","timestamp":9}],"timestamp":4}),
    ]);
    assert_eq!(
        evs[0].kind,
        EventKind::StateSnapshot {
            snapshot: json!({"a":1})
        }
    );
    assert_eq!(
        evs[1].kind,
        EventKind::StateDelta {
            patch: json!([{"op":"add","path":"/b","value":2,"from":""}])
        }
    );
    let EventKind::MessagesSnapshot { messages } = &evs[2].kind else {
        panic!()
    };
    assert_eq!(messages[1].text(), "Hi there!");
    assert_eq!(messages[1].extra["timestamp"], 9);
}

#[test]
fn collab_custom_raw_steps_and_unknown() {
    let evs = decode_all(&[
        json!({"type":"AGENT_COLLABORATIVE_MESSAGE_START","from":"USER","to":"Agent","messageId":"c","timestamp":1}),
        json!({"type":"AGENT_COLLABORATIVE_MESSAGE_CONTENT","delta":{"task":{"id":"1","name":"查询"}},"messageId":"c"}),
        json!({"type":"AGENT_COLLABORATIVE_MESSAGE_END","messageId":"c"}),
        json!({"type":"AGENT_COLLABORATIVE_MESSAGE_END","messageId":"d"}),
        json!({"type":"CUSTOM","name":"progress","value":{"p":1}}),
        json!({"type":"RAW","event":{"x":1},"source":"llm"}),
        json!({"type":"STEP_STARTED","stepName":"智能处理"}),
        json!({"type":"STEP_FINISHED","stepName":"智能处理"}),
        json!({"type":"FUTURE_EVENT","x":1}),
    ]);
    let k = kinds(&evs);
    assert_eq!(
        k[0],
        EventKind::CollabStart {
            message_id: "c".into(),
            from: Some("USER".into()),
            to: Some("Agent".into())
        }
    );
    assert_eq!(
        k[1],
        EventKind::CollabContent {
            message_id: "c".into(),
            delta: json!({"task":{"id":"1","name":"查询"}})
        }
    );
    assert_eq!(
        k[2],
        EventKind::CollabEnd {
            message_id: "c".into()
        }
    );
    assert!(matches!(k[3], EventKind::CollabStart { .. }) && is_synth(&evs[3]));
    assert_eq!(
        k[4],
        EventKind::CollabEnd {
            message_id: "d".into()
        }
    );
    assert_eq!(
        k[5],
        EventKind::Custom {
            name: "progress".into(),
            value: json!({"p":1})
        }
    );
    assert_eq!(
        k[6],
        EventKind::Raw {
            event: json!({"x":1}),
            source: Some("llm".into())
        }
    );
    assert_eq!(
        k[7],
        EventKind::StepStarted {
            name: Some("智能处理".into())
        }
    );
    assert_eq!(
        k[8],
        EventKind::StepFinished {
            name: Some("智能处理".into())
        }
    );
    assert_eq!(
        k[9],
        EventKind::Unknown {
            raw: json!({"type":"FUTURE_EVENT","x":1})
        }
    );
    assert_eq!(evs[9].origin, Some(Dialect::Hai));
}

#[test]
fn interrupt_outcome_and_unmappable_outcome() {
    let evs = decode_all(&[
        json!({"type":"RUN_FINISHED","messageId":"m","outcome":{"type":"interrupt","interrupts":[
                {"id":"i1","reason":"confirmation","message":"ok?","toolCallId":"t","responseSchema":{"type":"boolean"},"expiresAt":"x"}]}}),
        json!({"type":"RUN_FINISHED","outcome":{"type":"success","pendingToolCallIds":["t"]}}),
        json!({"type":"RUN_FINISHED","outcome":{"type":"weird"}}),
    ]);
    let EventKind::RunFinished {
        outcome: Outcome::Interrupt { interrupts },
        ..
    } = &evs[0].kind
    else {
        panic!("{:?}", evs[0])
    };
    assert_eq!(interrupts[0].tool_call_id.as_deref(), Some("t"));
    assert_eq!(interrupts[0].payload, Some(json!({"type":"boolean"})));
    assert_eq!(interrupts[0].extra["expiresAt"], "x");
    assert!(
        matches!(&evs[1].kind, EventKind::RunFinished { outcome: Outcome::Success { pending_tool_call_ids }, .. }
            if pending_tool_call_ids == &["t".to_string()])
    );
    assert!(matches!(
        evs[2].kind,
        EventKind::RunFinished {
            outcome: Outcome::Unspecified,
            ..
        }
    ));
    assert_eq!(evs[2].extra["outcome"], json!({"type":"weird"}));
}

#[test]
fn agui_spellings_are_read() {
    let evs = decode_all(&[
        json!({"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"m"}),
        json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"c","delta":"b"}),
        json!({"type":"TEXT_MESSAGE_CHUNK","delta":"c"}),
        json!({"type":"TOOL_CALL_CHUNK","toolCallId":"t","toolCallName":"f","delta":"{}"}),
        json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"r","delta":"think"}),
        json!({"type":"REASONING_MESSAGE_END","messageId":"r"}),
        json!({"type":"MESSAGES_SNAPSHOT","messages":[]}),
    ]);
    let names: Vec<_> = evs.iter().map(|e| e.kind.name()).collect();
    assert_eq!(
        names,
        [
            "text_start",
            "text_delta",
            "text_end",
            "text_start",
            "text_delta",
            "text_delta",
            "text_end",
            "tool_call_start",
            "tool_call_args",
            "tool_call_end",
            "reasoning_start",
            "reasoning_delta",
            "reasoning_end",
            "messages_snapshot"
        ]
    );
}

#[test]
fn malformed_input_is_a_clear_error() {
    let mut d = HaiDecoder::new();
    let e = d
        .decode(
            &Frame {
                data: "{not json".into(),
                ..Default::default()
            },
            &mut Vec::new(),
        )
        .unwrap_err();
    assert!(e.message.starts_with("invalid JSON"), "{e}");
    assert!(err(json!([1])).contains("not a JSON object"));
    assert!(err(json!({"messageId":"m"})).contains("`type`"));
    for (v, want) in [
        (
            json!({"type":"BUSINESS_DATA_START"}),
            "BUSINESS_DATA_START: missing or invalid field `messageId`",
        ),
        (
            json!({"type":"BUSINESS_DATA_CONTENT","messageId":"m"}),
            "`delta`",
        ),
        (
            json!({"type":"BUSINESS_DATA_END","messageId":5}),
            "`messageId`",
        ),
        (
            json!({"type":"TOOL_CALL_START","toolCallId":"t"}),
            "`toolCallName`",
        ),
        (json!({"type":"TOOL_CALL_ARGS","toolCallId":"t"}), "`delta`"),
        (
            json!({"type":"TOOL_CALL_RESULT","toolCallId":"t"}),
            "`content`",
        ),
        (
            json!({"type":"RUN_ERROR"}),
            "RUN_ERROR: missing or invalid field `message`",
        ),
        (json!({"type":"STATE_DELTA"}), "`delta`"),
        (json!({"type":"STATE_SNAPSHOT"}), "`snapshot`"),
        (json!({"type":"MESSAGE_SNAPSHOT"}), "`messages`"),
        (
            json!({"type":"MESSAGE_SNAPSHOT","messages":[{"id":"1","role":"robot"}]}),
            "messages[0].role",
        ),
        (json!({"type":"RAW"}), "`event`"),
        (json!({"type":"CUSTOM"}), "`name`"),
        (
            json!({"type":"AGENT_COLLABORATIVE_MESSAGE_CONTENT","messageId":"c"}),
            "`delta`",
        ),
    ] {
        let e = err(v.clone());
        assert!(e.contains(want), "{v}: {e}");
    }
    // empty frames and a stray [DONE] are not errors
    let mut out = Vec::new();
    d.decode(&Frame::default(), &mut out).unwrap();
    d.decode(
        &Frame {
            data: "[DONE]".into(),
            ..Default::default()
        },
        &mut out,
    )
    .unwrap();
    assert!(out.is_empty());
}

use proptest::prelude::*;

fn field_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(null)),
        Just(json!("m")),
        Just(json!(7)),
        Just(json!([])),
        Just(json!({})),
        Just(json!({"output": {"type": "thinking", "data": {"content": "x"}}})),
        Just(json!({"output": {"type": "text", "content": 3}})),
        Just(json!({"output": {"type": 5}})),
        Just(json!({"type": "interrupt", "interrupts": [{"id": "i"}]})),
        Just(json!([{"id": "1", "role": "user", "content": "c"}])),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Whatever the frames hold, decoding never panics.
    #[test]
    fn arbitrary_frames_never_panic(frames in prop::collection::vec(
        (
            prop::sample::select(vec![
                "RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "STEP_STARTED", "STEP_FINISHED",
                "BUSINESS_DATA_START", "BUSINESS_DATA_CONTENT", "BUSINESS_DATA_END",
                "AGENT_COLLABORATIVE_MESSAGE_START", "AGENT_COLLABORATIVE_MESSAGE_CONTENT",
                "AGENT_COLLABORATIVE_MESSAGE_END", "TOOL_CALL_START", "TOOL_CALL_ARGS",
                "TOOL_CALL_END", "TOOL_CALL_RESULT", "STATE_SNAPSHOT", "STATE_DELTA",
                "MESSAGE_SNAPSHOT", "RAW", "CUSTOM", "TEXT_MESSAGE_CHUNK", "TOOL_CALL_CHUNK",
                "REASONING_MESSAGE_CONTENT", "X",
            ]),
            prop::collection::btree_map(
                prop::sample::select(vec![
                    "messageId", "delta", "role", "timestamp", "toolCallId", "toolCallName",
                    "content", "message", "outcome", "messages", "snapshot", "event", "name",
                    "blockId", "stepName",
                ]),
                field_value(),
                0..6,
            ),
        ),
        0..16,
    )) {
        let mut d = HaiDecoder::new();
        let mut out = Vec::new();
        for (ty, fields) in frames {
            let mut o: Map<String, Value> = fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            o.insert("type".into(), json!(ty));
            let _ = d.decode(&frame(Value::Object(o)), &mut out);
        }
        d.finish(&mut out).unwrap();
    }
}

// ---- the fast path against the general one --------------------------------

/// Whether `f` is one the fast path takes (for the test's coverage).
fn is_fast(data: &str) -> bool {
    wire::FAST.read(data.trim()).is_some() || fast_state_delta(data.trim()).is_some()
}

/// The table declares what the general path does (each row's frames,
/// alone, inside an open message and call, and in a row).
#[test]
fn the_table_reads_as_the_general_path_reads() {
    let before = [
        r#"{"type":"BUSINESS_DATA_START","messageId":"id-1"}"#,
        r#"{"type":"TOOL_CALL_START","toolCallId":"id-1","toolCallName":"f"}"#,
    ];
    let mut run = |frames: &[String], fast: bool| {
        let mut d = HaiDecoder::new();
        let mut all: Vec<_> = frames
            .iter()
            .map(|data| {
                let f = Frame {
                    data: data.clone(),
                    ..Default::default()
                };
                let mut out = Vec::new();
                match fast {
                    true => d.decode(&f, &mut out),
                    false => d.decode_without_fast_paths(&f, &mut out),
                }
                .map(|()| out)
            })
            .collect();
        let mut out = Vec::new();
        all.push(d.finish(&mut out).map(|()| out));
        all
    };
    babelgate_core::testing::check_table_decodes(&wire::FAST, &before, &mut run).unwrap();
}

/// A START is kept whole for the encoder to write back: its fields in
/// the order they came, whichever path read it.
#[test]
fn the_fast_path_keeps_a_start_s_fields_in_their_order() {
    for start in [
        r#"{"type":"BUSINESS_DATA_START","messageId":"m","role":"assistant","timestamp":1}"#,
        r#"{"type":"BUSINESS_DATA_START","timestamp":1,"role":"user","messageId":"m"}"#,
        r#"{"type":"BUSINESS_DATA_START","role":"assistant","timestamp":1,"messageId":"m"}"#,
    ] {
        // Reasoning first: its start carries the START frame whole.
        let content = r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":{"output":{"type":"thinking","content":"x"}}}"#;
        let end = r#"{"type":"BUSINESS_DATA_END","timestamp":2,"messageId":"m"}"#;
        assert!(is_fast(start), "{start}");
        let (mut fast, mut general) = (HaiDecoder::new(), HaiDecoder::new());
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for data in [start, content, end] {
            let f = Frame {
                data: data.into(),
                ..Default::default()
            };
            fast.decode(&f, &mut a).unwrap();
            general.decode_without_fast_paths(&f, &mut b).unwrap();
        }
        assert_eq!(json!(a).to_string(), json!(b).to_string(), "{start}");
    }
}

#[test]
fn the_fast_path_takes_the_frequent_frames_and_leaves_the_rest() {
    for data in [
        r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":{"output":{"type":"text","content":"a\"b"}},"timestamp":1700000000000}"#,
        r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":"x"}"#,
        r#"{"type":"BUSINESS_DATA_START","messageId":"m","role":"assistant","timestamp":1}"#,
        r#"{"type":"BUSINESS_DATA_END","messageId":"m","timestamp":1}"#,
        r#"{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","parentMessageId":"m","timestamp":1}"#,
        r#"{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{\"a\":","timestamp":1}"#,
        r#"{"type":"TOOL_CALL_END","toolCallId":"c","timestamp":1}"#,
        r#"{"type":"TOOL_CALL_RESULT","messageId":"t","toolCallId":"c","content":"r","role":"tool","timestamp":1}"#,
        r#"{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a","value":1,"from":""}],"timestamp":1}"#,
        r#"{"type":"STATE_DELTA","delta":{}}"#,
    ] {
        assert!(is_fast(data), "{data}");
    }
    for data in [
        // extras the general path keeps, other shapes, numbers it reads otherwise
        r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":"x","blockId":"b"}"#,
        r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":{"output":{"type":"thinking","content":"x"}}}"#,
        r#"{"type":"BUSINESS_DATA_CONTENT","messageId":"m","delta":{"output":{"type":"text","content":"x"},"layout":1}}"#,
        r#"{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"x","timestamp":1.5}"#,
        r#"{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"x","timestamp":-0}"#,
        r#"{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"x","timestamp":9223372036854775808}"#,
        r#"{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"x","delta":"y"}"#,
        r#"{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"\ud800"}"#,
        r#"{"type":"TOOL_CALL_ARGS","tool\u0043allId":"c","delta":"x"}"#,
        r#"{"type":"TOOL_CALL_RESULT","toolCallId":"c","content":{"a":1}}"#,
        r#"{"type":"STATE_DELTA","delta":[],"timestamp":null}"#,
        r#"{"type":"STATE_DELTA","delta":[],"delta":[]}"#,
        r#"{"type":"STATE_DELTA","delta":[],"x":1}"#,
        r#"{"type":"STATE_DELTA","delta":[],"timestamp":1.5}"#,
    ] {
        assert!(!is_fast(data), "{data}");
    }
}
