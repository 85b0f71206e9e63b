use super::*;
use babelgate_core::event::Role;

fn enc() -> HaiEncoder {
    HaiEncoder::new(EncodeContext::deterministic())
}

/// Through the shape stage, as on every translated route.
fn run(events: Vec<EventKind>) -> String {
    let mut e = enc();
    let mut out = Vec::new();
    let events: Vec<Event> = events.into_iter().map(Event::new).collect();
    for ev in &babelgate_core::shape::Shaper::shape_all(&events) {
        e.encode(ev, &mut out);
    }
    e.finish(&mut out);
    String::from_utf8(out).unwrap()
}

const T: &str = "\"timestamp\":1700000000000";

#[test]
fn synthesizes_run_start_and_message_start_and_finish() {
    // A delta with no run, no start, cut short.
    let got = run(vec![EventKind::text_delta("m1", "hi \"x\"\n")]);
    let want = format!(
            "data: {{\"type\":\"RUN_STARTED\",\"messageId\":\"msg-1\",\"role\":\"assistant\",{T}}}\n\n\
             data: {{\"type\":\"BUSINESS_DATA_START\",\"messageId\":\"m1\",\"role\":\"assistant\",{T}}}\n\n\
             data: {{\"type\":\"BUSINESS_DATA_CONTENT\",\"messageId\":\"m1\",\"delta\":{{\"output\":{{\"type\":\"text\",\"content\":\"hi \\\"x\\\"\\n\"}}}},{T}}}\n\n\
             data: {{\"type\":\"BUSINESS_DATA_END\",\"messageId\":\"m1\",{T}}}\n\n\
             data: {{\"type\":\"RUN_FINISHED\",\"messageId\":\"msg-1\",\"role\":\"assistant\",{T}}}\n\n"
        );
    assert_eq!(got, want);
}

#[test]
fn empty_input_is_still_a_run_and_finish_is_idempotent() {
    let mut e = enc();
    let mut out = Vec::new();
    e.finish(&mut out);
    let once = out.clone();
    e.finish(&mut out);
    e.encode(&Event::new(EventKind::text_delta("m", "late")), &mut out);
    assert_eq!(out, once);
    let s = String::from_utf8(out).unwrap();
    assert_eq!(s.matches("RUN_STARTED").count(), 1);
    assert_eq!(s.matches("RUN_FINISHED").count(), 1);
}

#[test]
fn finish_on_a_cut_stream_closes_message_tool_call_collab_and_step() {
    let got = run(vec![
        EventKind::StepStarted { name: None },
        EventKind::ToolCallStart {
            tool_call_id: "t1".into(),
            tool_name: "f".into(),
            parent_message_id: None,
        },
        EventKind::CollabContent {
            message_id: "c1".into(),
            delta: json!({"task": {"id": "1", "name": "n"}}),
        },
        EventKind::text_start("m1"),
        EventKind::text_delta("m1", "par"),
    ]);
    let types: Vec<String> = got
        .split("\n\n")
        .filter(|f| !f.is_empty())
        .map(|f| {
            let v: Value = serde_json::from_str(f.trim_start_matches("data: ")).unwrap();
            v["type"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(
        types,
        [
            "RUN_STARTED",
            "STEP_STARTED",
            "TOOL_CALL_START",
            "AGENT_COLLABORATIVE_MESSAGE_START",
            "AGENT_COLLABORATIVE_MESSAGE_CONTENT",
            "BUSINESS_DATA_START",
            "BUSINESS_DATA_CONTENT",
            "BUSINESS_DATA_END",
            "TOOL_CALL_END",
            "AGENT_COLLABORATIVE_MESSAGE_END",
            "STEP_FINISHED",
            "RUN_FINISHED"
        ]
    );
    assert!(
        got.contains("\"stepName\":\"step-2\""),
        "minted step name reused: {got}"
    );
}

#[test]
fn run_error_ends_business_data_but_not_tool_calls() {
    let mut e = enc();
    let mut out = Vec::new();
    // through the shape stage, as on a translated route
    let mut shaper = babelgate_core::shape::Shaper::new();
    let mut shaped = Vec::new();
    for ev in [
        Event::new(EventKind::RunStarted {
            thread_id: Some("th".into()),
            run_id: Some("r".into()),
            parent_run_id: None,
            message_id: None,
            input: None,
        })
        .with_timestamp(Some(5)),
        Event::new(EventKind::text_delta("m", "a")).with_timestamp(Some(6)),
        // an orphan delta: the shape stage gives it its start
        Event::new(EventKind::ToolCallArgs {
            tool_call_id: "t".into(),
            delta: "{".into(),
        }),
    ] {
        shaper.push(&ev, &mut shaped);
    }
    for ev in &shaped {
        e.encode(ev, &mut out);
    }
    e.fail("upstream timed out", Some("TIMEOUT"), &mut out);
    e.encode(&Event::new(EventKind::text_delta("m", "after")), &mut out);
    e.finish(&mut out);
    let got = String::from_utf8(out).unwrap();
    let want = format!(
            "data: {{\"type\":\"RUN_STARTED\",\"messageId\":\"msg-1\",\"role\":\"assistant\",\"timestamp\":5}}\n\n\
             data: {{\"type\":\"BUSINESS_DATA_START\",\"messageId\":\"m\",\"role\":\"assistant\",\"timestamp\":6}}\n\n\
             data: {{\"type\":\"BUSINESS_DATA_CONTENT\",\"messageId\":\"m\",\"delta\":{{\"output\":{{\"type\":\"text\",\"content\":\"a\"}}}},\"timestamp\":6}}\n\n\
             data: {{\"type\":\"TOOL_CALL_START\",\"toolCallId\":\"t\",\"toolCallName\":\"unknown\",{T}}}\n\n\
             data: {{\"type\":\"TOOL_CALL_ARGS\",\"toolCallId\":\"t\",\"delta\":\"{{\",{T}}}\n\n\
             data: {{\"type\":\"BUSINESS_DATA_END\",\"messageId\":\"m\",{T}}}\n\n\
             data: {{\"type\":\"RUN_ERROR\",\"message\":\"upstream timed out\",\"code\":\"TIMEOUT\",{T}}}\n\n"
        );
    assert_eq!(got, want, "nothing follows RUN_ERROR");
}

#[test]
fn foreign_reasoning_then_text_share_one_business_message() {
    let got = run(vec![
        EventKind::ReasoningPhaseStart {
            message_id: "span".into(),
        },
        EventKind::ReasoningStart {
            message_id: "r1".into(),
        },
        EventKind::ReasoningDelta {
            message_id: "r1".into(),
            delta: "think".into(),
        },
        EventKind::ReasoningEnd {
            message_id: "r1".into(),
        },
        EventKind::ReasoningPhaseEnd {
            message_id: "span".into(),
        },
        EventKind::text_start("m1"),
        EventKind::text_delta("m1", "answer"),
        EventKind::text_end("m1"),
    ]);
    let want = format!(
            "data: {{\"type\":\"RUN_STARTED\",\"messageId\":\"msg-1\",\"role\":\"assistant\",{T}}}\n\n\
             data: {{\"type\":\"BUSINESS_DATA_START\",\"messageId\":\"r1\",\"role\":\"assistant\",{T}}}\n\n\
             data: {{\"type\":\"BUSINESS_DATA_CONTENT\",\"messageId\":\"r1\",\"delta\":{{\"output\":{{\"type\":\"thinking\",\"data\":{{\"content\":\"think\",\"elapsed\":0,\"thinking\":true,\"collapse\":true}}}}}},{T}}}\n\n\
             data: {{\"type\":\"BUSINESS_DATA_CONTENT\",\"messageId\":\"r1\",\"delta\":{{\"output\":{{\"type\":\"text\",\"content\":\"answer\"}}}},{T}}}\n\n\
             data: {{\"type\":\"BUSINESS_DATA_END\",\"messageId\":\"r1\",{T}}}\n\n\
             data: {{\"type\":\"RUN_FINISHED\",\"messageId\":\"msg-1\",\"role\":\"assistant\",{T}}}\n\n"
        );
    assert_eq!(got, want);
}

#[test]
fn reasoning_alone_is_closed_before_a_tool_call() {
    let got = run(vec![
        EventKind::ReasoningStart {
            message_id: "r".into(),
        },
        EventKind::ReasoningDelta {
            message_id: "r".into(),
            delta: "x".into(),
        },
        EventKind::ReasoningEnd {
            message_id: "r".into(),
        },
        EventKind::ToolCallStart {
            tool_call_id: "t".into(),
            tool_name: "f".into(),
            parent_message_id: None,
        },
    ]);
    let end = got.find("BUSINESS_DATA_END").unwrap();
    assert!(end < got.find("TOOL_CALL_START").unwrap(), "{got}");
}

#[test]
fn widgets_tool_outputs_and_interrupts() {
    let got = run(vec![
        EventKind::Data {
            name: "weather".into(),
            id: Some("w1".into()),
            message_id: None,
            data: json!({"c": 22}),
            transient: true,
        },
        EventKind::ToolCallStart {
            tool_call_id: "t".into(),
            tool_name: "f".into(),
            parent_message_id: None,
        },
        EventKind::ToolCallResult {
            tool_call_id: "t".into(),
            message_id: None,
            content: json!({"temp": 22}),
        },
        EventKind::StateDelta {
            patch: json!([{"op": "add", "path": "/a", "value": 1}, {"op": "move", "path": "/b", "from": "/a"}]),
        },
        EventKind::RunFinished {
            thread_id: None,
            run_id: None,
            message_id: None,
            result: None,
            outcome: Outcome::Interrupt {
                interrupts: vec![Interrupt {
                    id: "i1".into(),
                    reason: "confirmation".into(),
                    message: Some("ok?".into()),
                    tool_call_id: Some("t".into()),
                    payload: Some(json!(true)),
                    extra: Map::new(),
                }],
            },
            finish_reason: Some("stop".into()),
            usage: None,
        },
    ]);
    let frames: Vec<Value> = got
        .split("\n\n")
        .filter(|f| !f.is_empty())
        .map(|f| serde_json::from_str(f.trim_start_matches("data: ")).unwrap())
        .collect();
    assert_eq!(frames[1]["type"], "BUSINESS_DATA_START");
    assert_eq!(frames[1]["messageId"], "msg-2");
    assert_eq!(
        frames[2]["delta"],
        json!({"output": {"type": "weather", "data": {"c": 22}}})
    );
    assert_eq!(frames[2]["blockId"], "w1");
    assert_eq!(
        frames[3]["type"], "BUSINESS_DATA_END",
        "idle widget message closed"
    );
    assert_eq!(frames[5]["type"], "TOOL_CALL_END", "result implies the end");
    assert_eq!(frames[6]["content"], "{\"temp\":22}");
    assert_eq!(frames[6]["role"], "tool");
    assert_eq!(
        frames[7]["delta"],
        json!([{"op": "add", "path": "/a", "value": 1, "from": ""}, {"op": "move", "path": "/b", "from": "/a"}])
    );
    assert_eq!(
        frames[8],
        json!({"type": "RUN_FINISHED", "messageId": "msg-1", "role": "assistant",
                   "outcome": {"type": "interrupt", "interrupts": [
                       {"id": "i1", "reason": "confirmation", "message": "ok?", "toolCallId": "t", "payload": true}]},
                   "timestamp": 1700000000000_i64})
    );
}

#[test]
fn every_kind_encodes_to_json_frames() {
    use babelgate_core::event::SourceKind;
    let all = vec![
        EventKind::ReasoningEncrypted {
            subtype: "message".into(),
            entity_id: "m".into(),
            value: "xx".into(),
        },
        EventKind::ToolCallError {
            tool_call_id: "t".into(),
            error: "bad".into(),
            input_invalid: false,
        },
        EventKind::ToolCallDenied {
            tool_call_id: "t".into(),
        },
        EventKind::StateSnapshot {
            snapshot: json!({}),
        },
        EventKind::MessagesSnapshot { messages: vec![] },
        EventKind::ActivitySnapshot {
            message_id: "a".into(),
            activity_type: "plan".into(),
            content: json!({}),
            replace: Some(false),
        },
        EventKind::ActivityDelta {
            message_id: "a".into(),
            activity_type: "plan".into(),
            patch: json!([]),
        },
        EventKind::Source {
            source_kind: SourceKind::Url,
            source_id: "s".into(),
            url: Some("https://x".into()),
            title: None,
            media_type: None,
            filename: None,
        },
        EventKind::File {
            url: "https://x/f.png".into(),
            media_type: "image/png".into(),
        },
        EventKind::Custom {
            name: "c".into(),
            value: json!(1),
        },
        EventKind::MessageMetadata {
            metadata: json!({"k": 1}),
        },
        EventKind::SubagentStarted {
            subagent_run_id: "s1".into(),
            name: "researcher".into(),
            description: Some("finds things".into()),
        },
        EventKind::SubagentFinished {
            subagent_run_id: "s1".into(),
            result: Some(json!("done")),
            outcome: None,
        },
        EventKind::SubagentError {
            subagent_run_id: "s2".into(),
            message: "oops".into(),
            code: None,
        },
        EventKind::Raw {
            event: json!({"a": 1}),
            source: None,
        },
        EventKind::Unknown {
            raw: json!({"type": "X"}),
        },
    ];
    let got = run(all);
    let types: Vec<String> = got
        .split("\n\n")
        .filter(|f| !f.is_empty())
        .map(|f| {
            let v: Value = serde_json::from_str(f.trim_start_matches("data: ")).unwrap();
            assert!(v["timestamp"].is_i64(), "{v}");
            v["type"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(
        types,
        [
            "RUN_STARTED",
            "RAW",
            "TOOL_CALL_RESULT",
            "TOOL_CALL_RESULT",
            "STATE_SNAPSHOT",
            "MESSAGE_SNAPSHOT",
            "CUSTOM",
            "CUSTOM",
            "BUSINESS_DATA_START",
            "BUSINESS_DATA_CONTENT",
            "BUSINESS_DATA_CONTENT",
            "BUSINESS_DATA_END",
            "CUSTOM",
            "CUSTOM",
            "AGENT_COLLABORATIVE_MESSAGE_START",
            "AGENT_COLLABORATIVE_MESSAGE_CONTENT",
            "AGENT_COLLABORATIVE_MESSAGE_CONTENT",
            "AGENT_COLLABORATIVE_MESSAGE_END",
            "AGENT_COLLABORATIVE_MESSAGE_START",
            "AGENT_COLLABORATIVE_MESSAGE_CONTENT",
            "AGENT_COLLABORATIVE_MESSAGE_END",
            "RAW",
            "RAW",
            "RUN_FINISHED"
        ]
    );
}

// ---- any sequence in, a well-formed HAI stream out ------------------------

use babelgate_core::event::SourceKind;
use babelgate_core::request::Message;
use babelgate_core::sse::SseFramer;
use babelgate_core::Decoder;
use proptest::prelude::*;

fn id() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "c"]).prop_map(str::to_string)
}

fn opt_id() -> impl Strategy<Value = Option<String>> {
    prop::option::of(id())
}

fn small() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(null)),
        Just(json!("s")),
        Just(json!({"k": [1, "二"]})),
        Just(json!([{"op": "add", "path": "/x", "value": 1}])),
        Just(json!([{"type": "text", "text": "part"}])),
    ]
}

fn any_kind() -> impl Strategy<Value = EventKind> {
    use EventKind as K;
    let outcome = prop_oneof![
        Just(Outcome::Unspecified),
        Just(Outcome::Success {
            pending_tool_call_ids: vec!["a".into()]
        }),
        Just(Outcome::Cancelled {
            reason: Some("user".into())
        }),
        Just(Outcome::Interrupt {
            interrupts: vec![Interrupt {
                id: "i".into(),
                reason: "r".into(),
                message: None,
                tool_call_id: Some("a".into()),
                payload: Some(json!({"type": "object"})),
                extra: Map::new(),
            }]
        }),
    ];
    let group1 = prop_oneof![
        (opt_id(), opt_id()).prop_map(|(t, m)| K::RunStarted {
            thread_id: t,
            run_id: None,
            parent_run_id: None,
            message_id: m,
            input: None
        }),
        (opt_id(), outcome, prop::option::of(small())).prop_map(|(m, o, r)| K::RunFinished {
            thread_id: None,
            run_id: None,
            message_id: m,
            result: r,
            outcome: o,
            finish_reason: None,
            usage: None
        }),
        (id(), opt_id()).prop_map(|(m, c)| K::RunError {
            message: m,
            code: c
        }),
        opt_id().prop_map(|name| K::StepStarted { name }),
        opt_id().prop_map(|name| K::StepFinished { name }),
        id().prop_map(|m| K::TextStart {
            message_id: m,
            role: Role::Assistant,
            name: None
        }),
        (id(), "(?s).{0,4}").prop_map(|(m, d)| K::TextDelta {
            message_id: m,
            delta: d
        }),
        id().prop_map(|m| K::TextEnd { message_id: m }),
        id().prop_map(|m| K::ReasoningPhaseStart { message_id: m }),
        id().prop_map(|m| K::ReasoningPhaseEnd { message_id: m }),
        id().prop_map(|m| K::ReasoningStart { message_id: m }),
        (id(), "(?s).{0,4}").prop_map(|(m, d)| K::ReasoningDelta {
            message_id: m,
            delta: d
        }),
        id().prop_map(|m| K::ReasoningEnd { message_id: m }),
    ];
    let group2 = prop_oneof![
        id().prop_map(|e| K::ReasoningEncrypted {
            subtype: "message".into(),
            entity_id: e,
            value: "v".into()
        }),
        (id(), id(), opt_id()).prop_map(|(t, n, p)| K::ToolCallStart {
            tool_call_id: t,
            tool_name: n,
            parent_message_id: p
        }),
        (id(), "(?s).{0,4}").prop_map(|(t, d)| K::ToolCallArgs {
            tool_call_id: t,
            delta: d
        }),
        id().prop_map(|t| K::ToolCallEnd { tool_call_id: t }),
        (id(), opt_id(), small()).prop_map(|(t, m, c)| K::ToolCallResult {
            tool_call_id: t,
            message_id: m,
            content: c
        }),
        (id(), any::<bool>()).prop_map(|(t, i)| K::ToolCallError {
            tool_call_id: t,
            error: "e".into(),
            input_invalid: i
        }),
        id().prop_map(|t| K::ToolCallDenied { tool_call_id: t }),
        small().prop_map(|s| K::StateSnapshot { snapshot: s }),
        small().prop_map(|p| K::StateDelta { patch: p }),
        id().prop_map(|m| K::MessagesSnapshot {
            messages: vec![Message::text_message(m, Role::User, "hi")]
        }),
        (id(), small()).prop_map(|(m, c)| K::ActivitySnapshot {
            message_id: m,
            activity_type: "plan".into(),
            content: c,
            replace: None
        }),
        (id(), small()).prop_map(|(m, p)| K::ActivityDelta {
            message_id: m,
            activity_type: "plan".into(),
            patch: p
        }),
    ];
    let group3 = prop_oneof![
        id().prop_map(|s| K::Source {
            source_kind: SourceKind::Url,
            source_id: s,
            url: Some("https://x".into()),
            title: None,
            media_type: None,
            filename: None
        }),
        Just(K::File {
            url: "data:image/png;base64,AA".into(),
            media_type: "image/png".into()
        }),
        (id(), opt_id(), opt_id(), small(), any::<bool>()).prop_map(|(n, i, m, d, t)| {
            K::Data {
                name: n,
                id: i,
                message_id: m,
                data: d,
                transient: t,
            }
        }),
        (id(), small()).prop_map(|(n, v)| K::Custom { name: n, value: v }),
        small().prop_map(|m| K::MessageMetadata { metadata: m }),
        (id(), opt_id(), opt_id()).prop_map(|(m, f, t)| K::CollabStart {
            message_id: m,
            from: f,
            to: t
        }),
        (id(), small()).prop_map(|(m, d)| K::CollabContent {
            message_id: m,
            delta: d
        }),
        id().prop_map(|m| K::CollabEnd { message_id: m }),
        (id(), id(), opt_id()).prop_map(|(s, n, d)| K::SubagentStarted {
            subagent_run_id: s,
            name: n,
            description: d
        }),
        (id(), prop::option::of(small())).prop_map(|(s, r)| K::SubagentFinished {
            subagent_run_id: s,
            result: r,
            outcome: None
        }),
        (id(), opt_id()).prop_map(|(s, c)| K::SubagentError {
            subagent_run_id: s,
            message: "m".into(),
            code: c
        }),
        (small(), opt_id()).prop_map(|(e, s)| K::Raw {
            event: e,
            source: s
        }),
        small().prop_map(|r| K::Unknown { raw: r }),
    ];
    prop_oneof![group1, group2, group3]
}

/// What a HAI client (AG-UI's verifier, with BUSINESS_DATA_* for text)
/// enforces, plus this dialect's own rules.
fn check_stream(bytes: &[u8]) -> Result<(), String> {
    let mut framer = SseFramer::default();
    let mut frames = Vec::new();
    framer.push(bytes, &mut frames).map_err(|e| e.to_string())?;
    framer.finish(&mut frames).map_err(|e| e.to_string())?;
    let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
    if text.split("\n\n").filter(|f| !f.is_empty()).count() != frames.len() {
        return Err("frames must be split by blank lines only".into());
    }
    let (mut running, mut ended) = (false, false);
    let mut biz: Option<String> = None;
    let (mut calls, mut collabs, mut steps) = (
        Vec::<String>::new(),
        Vec::<String>::new(),
        Vec::<String>::new(),
    );
    // every frame also decodes with the HAI decoder
    let mut dec = crate::HaiDecoder::new();
    for (n, f) in frames.iter().enumerate() {
        let v: Value = serde_json::from_str(&f.data).map_err(|e| format!("frame {n}: {e}"))?;
        dec.decode(f, &mut Vec::new())
            .map_err(|e| format!("frame {n}: {e}"))?;
        let ty = v["type"]
            .as_str()
            .ok_or(format!("frame {n}: no type"))?
            .to_string();
        let e = |m: &str| Err(format!("frame {n} {ty}: {m}\n{text}"));
        if !v["timestamp"].is_i64() {
            return e("timestamp must be an integer");
        }
        if ty != "RUN_STARTED" && !running {
            return e("outside a run");
        }
        let mid = v["messageId"].as_str().map(str::to_string);
        let tid = v["toolCallId"].as_str().map(str::to_string);
        match ty.as_str() {
            "RUN_STARTED" => {
                if running {
                    return e("run already running");
                }
                if mid.is_none() {
                    return e("messageId");
                }
                running = true;
                ended = false;
            }
            "RUN_FINISHED" | "RUN_ERROR" => {
                if ty == "RUN_FINISHED"
                    && (biz.is_some()
                        || !calls.is_empty()
                        || !collabs.is_empty()
                        || !steps.is_empty())
                {
                    return e("something still open");
                }
                if ty == "RUN_FINISHED" && (mid.is_none() || v["role"] != "assistant") {
                    return e("messageId/role");
                }
                if ty == "RUN_ERROR" && !v["message"].is_string() {
                    return e("message");
                }
                running = false;
                ended = true;
                biz = None;
                calls.clear();
                collabs.clear();
                steps.clear();
            }
            "BUSINESS_DATA_START" => {
                if biz.is_some() {
                    return e("a business message is already open");
                }
                biz = mid;
            }
            "BUSINESS_DATA_CONTENT" | "BUSINESS_DATA_END" => {
                if biz != mid || biz.is_none() {
                    return e("no open business message with this id");
                }
                if ty == "BUSINESS_DATA_CONTENT" {
                    let d = &v["delta"];
                    let one_output = d["output"]["type"].is_string();
                    if !one_output {
                        return e("delta must be one {output} object");
                    }
                } else {
                    biz = None;
                }
            }
            "TOOL_CALL_START" => {
                let t = tid.ok_or("toolCallId")?;
                if calls.contains(&t) || !v["toolCallName"].is_string() {
                    return e("duplicate or nameless call");
                }
                calls.push(t);
            }
            "TOOL_CALL_ARGS" | "TOOL_CALL_END" => {
                let t = tid.ok_or("toolCallId")?;
                if !calls.contains(&t) {
                    return e("no open call");
                }
                if ty == "TOOL_CALL_ARGS" && !v["delta"].is_string() {
                    return e("delta must be a string");
                }
                if ty == "TOOL_CALL_END" {
                    calls.retain(|c| c != &t);
                }
            }
            "TOOL_CALL_RESULT" => {
                let c = &v["content"];
                let parts = c
                    .as_array()
                    .is_some_and(|a| a.iter().all(|p| p["type"].is_string()));
                if !(c.is_string() || parts) || mid.is_none() {
                    return e("content must be a string or parts, with a messageId");
                }
            }
            // Active steps are a set by name, as in AG-UI's verifier.
            "STEP_STARTED" => {
                let s = v["stepName"].as_str().ok_or("stepName")?.to_string();
                if steps.contains(&s) {
                    return e("step already active");
                }
                steps.push(s);
            }
            "STEP_FINISHED" => {
                let s = v["stepName"].as_str().ok_or("stepName")?;
                if !steps.iter().any(|x| x == s) {
                    return e("step not open");
                }
                steps.retain(|x| x != s);
            }
            "AGENT_COLLABORATIVE_MESSAGE_START" => collabs.push(mid.ok_or("messageId")?),
            "AGENT_COLLABORATIVE_MESSAGE_CONTENT" | "AGENT_COLLABORATIVE_MESSAGE_END" => {
                let m = mid.ok_or("messageId")?;
                if !collabs.contains(&m) {
                    return e("collab not open");
                }
                if ty.ends_with("_END") {
                    collabs.retain(|c| c != &m);
                }
            }
            "STATE_DELTA" => {
                let ops = v["delta"].as_array().ok_or("delta")?;
                if ops.iter().any(|o| o.is_object() && !o["from"].is_string()) {
                    return e("ops carry from");
                }
            }
            "STATE_SNAPSHOT" | "MESSAGE_SNAPSHOT" | "CUSTOM" | "RAW" => {}
            _ => return e("not a HAI event type"),
        }
    }
    if running || !ended {
        return Err(format!(
            "the stream must end with RUN_FINISHED or RUN_ERROR\n{text}"
        ));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_core_sequence_gives_a_stream_a_hai_client_accepts(
        kinds in prop::collection::vec(any_kind(), 0..24),
        fail in any::<bool>(),
    ) {
        let mut e = enc();
        let mut out = Vec::new();
        let events: Vec<Event> = kinds.into_iter().map(Event::new).collect();
        // through the shape stage, as on every translated route
        for ev in &babelgate_core::shape::Shaper::shape_all(&events) {
            e.encode(ev, &mut out);
        }
        if fail {
            e.fail("gone", Some("upstream_closed"), &mut out);
        }
        e.finish(&mut out);
        if let Err(msg) = check_stream(&out) {
            prop_assert!(false, "{}", msg);
        }
    }
}

/// Found by the `decode_agkit` fuzz target: an AG-Kit `unknown` envelope
/// naming HAI can carry any JSON, and the encoder wrote it back verbatim
/// as a HAI event, which no HAI client (nor the HAI decoder) reads. Only a
/// typed object of a type HAI's decoder does not read goes back as it
/// came (a known one without its fields, as the decoder never keeps it,
/// is no HAI event); anything else travels in a RAW.
#[test]
fn own_unknown_events_that_are_not_typed_objects_travel_in_raw() {
    let own = |raw: Value| Event::new(EventKind::Unknown { raw }).with_origin(Dialect::Hai);
    for raw in [
        json!({"typg": "FUTURE_EVENT", "x": 1}),
        json!({"type": 5}),
        json!("keep-alive"),
        json!([1, 2]),
        json!({"type": "TEXT_MESSAGE_CONTENT", "x": 1}),
        json!({"type": "BUSINESS_DATA_CONTENT"}),
    ] {
        let mut e = enc();
        let mut out = Vec::new();
        e.encode(&own(raw.clone()), &mut out);
        e.finish(&mut out);
        check_stream(&out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let raw_frame = text
            .split("\n\n")
            .map(|f| serde_json::from_str::<Value>(f.trim_start_matches("data: ")))
            .find_map(|v| v.ok().filter(|v| v["type"] == "RAW"))
            .unwrap_or_else(|| panic!("no RAW frame in {text}"));
        assert_eq!(raw_frame["event"], raw);
        assert_eq!(raw_frame["source"], "hai");
    }
    // a typed HAI event this adapter does not know still goes back as it came
    let mut e = enc();
    let mut out = Vec::new();
    e.encode(&own(json!({"type": "FUTURE_EVENT", "x": 1})), &mut out);
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("data: {\"type\":\"FUTURE_EVENT\",\"x\":1}\n\n"),
        "{text}"
    );
}

// ---- the fast paths against the general one ------------------------------

/// Strings that escape every way.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        Just("a\"b\\c\n\u{1}\u{2028}北🎉".to_string()),
        Just(String::new()),
    ]
}

/// What a HAI source's decoder may have kept, and what others carry.
fn extra() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::vec(
        prop_oneof![
            Just((wire::X_DELTA, json!(""))),
            Just((wire::X_DELTA, json!({"output": {"type": "text"}}))),
            Just((wire::X_DELTA, json!({"output": {"type": "text", "x": 1}}))),
            Just((
                wire::X_DELTA,
                json!({"output": {"type": "thinking", "data": {}}})
            )),
            Just((wire::X_DELTA, json!({"output": {}}))),
            Just((wire::X_DELTA, json!({"a": 1, "output": {"type": "text"}}))),
            Just((wire::X_DELTA, json!(5))),
            Just(("blockId", json!("b"))),
            Just(("role", json!("tool"))),
            Just(("timestamp", json!("x"))),
            Just(("timestamp", json!(7))),
            Just(("messageId", json!("kept"))),
            Just(("toolCallId", json!(1))),
            Just(("type", json!("T"))),
            Just(("content", json!({"k": "北"}))),
            Just(("a\"b\u{2028}", json!(null))),
        ],
        0..3,
    )
    .prop_map(|kv| kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

fn patch() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!([])),
        Just(json!({})),
        Just(json!({"op": "add", "path": "/a", "value": "北"})),
        Just(
            json!([{"op": "replace", "path": "/t", "value": 1}, {"op": "move", "path": "/b", "from": "/a"}])
        ),
        Just(json!([{}, 1, "s", null, [{"op": "add"}]])),
        Just(json!("not a patch")),
        Just(json!(null)),
    ]
}

/// The kinds the fast paths write, with hostile strings, and all others.
fn hot_kind() -> impl Strategy<Value = EventKind> {
    use EventKind as K;
    prop_oneof![
        4 => (id(), text()).prop_map(|(m, d)| K::TextDelta { message_id: m, delta: d }),
        2 => (id(), text()).prop_map(|(t, d)| K::ToolCallArgs { tool_call_id: t, delta: d }),
        1 => (id(), text(), prop::option::of(text())).prop_map(|(t, n, p)| K::ToolCallStart {
            tool_call_id: t,
            tool_name: n,
            parent_message_id: p,
        }),
        1 => id().prop_map(|t| K::ToolCallEnd { tool_call_id: t }),
        1 => id().prop_map(|m| K::TextStart { message_id: m, role: Role::Assistant, name: None }),
        1 => id().prop_map(|m| K::TextEnd { message_id: m }),
        1 => patch().prop_map(|patch| K::StateDelta { patch }),
        1 => (id(), prop::option::of(text()), prop_oneof![text().prop_map(Value::String), small()])
            .prop_map(|(t, m, content)| K::ToolCallResult {
                tool_call_id: t,
                message_id: m,
                content,
            }),
        2 => any_kind(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    /// The frames written in place are, byte for byte, the ones `write`
    /// makes, whatever the events, their origin, timestamp and extras.
    #[test]
    fn fast_paths_write_what_the_general_path_writes(
        events in prop::collection::vec(
            (
                hot_kind(),
                prop::sample::select(vec![None, Some(Dialect::Hai), Some(Dialect::AgUi)]),
                prop::option::of(0i64..2_000_000_000_000),
                extra(),
                any::<bool>(),
            ),
            0..24,
        ),
        shaped in any::<bool>(),
    ) {
        let events: Vec<Event> = events
            .into_iter()
            .map(|(kind, origin, timestamp, extra, synthesized)| Event {
                kind,
                timestamp,
                origin,
                extra,
                restated: false,
                synthesized,
            })
            .collect();
        let events = if shaped {
            babelgate_core::shape::Shaper::shape_all(&events)
        } else {
            events
        };
        let (mut fast, mut general) = (enc(), enc().without_fast_paths());
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for ev in &events {
            fast.encode(ev, &mut a);
            general.encode(ev, &mut b);
            prop_assert_eq!(String::from_utf8_lossy(&a), String::from_utf8_lossy(&b));
        }
        fast.finish(&mut a);
        general.finish(&mut b);
        prop_assert_eq!(a, b);
    }
}
