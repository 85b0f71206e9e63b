use std::path::PathBuf;

use babelgate_core::event::Interrupt;
use babelgate_core::testing::{self, sse_payloads as payloads};
use babelgate_core::{Decoder, EncodeContext, Encoder, Event, EventKind, Outcome, Role, SseFramer};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde_json::{json, Value};

use super::*;
use crate::verify::verify_stream;

fn frames_to_events(bytes: &[u8], piece: usize) -> Vec<Event> {
    let mut framer = SseFramer::default();
    let mut frames = Vec::new();
    for p in bytes.chunks(piece.max(1)) {
        framer.push(p, &mut frames).unwrap();
    }
    framer.finish(&mut frames).unwrap();
    let mut d = AgUiDecoder::new();
    let mut events = Vec::new();
    for f in &frames {
        d.decode(f, &mut events)
            .unwrap_or_else(|e| panic!("{e}: {}", f.data));
    }
    d.finish(&mut events).unwrap();
    events
}

fn encode_events(events: &[Event]) -> Vec<u8> {
    testing::encode_events(
        &mut AgUiEncoder::new(EncodeContext::deterministic()),
        events,
    )
}

/// Only `data: {json}\n\n` frames, as the client's parser needs.
fn assert_framing(bytes: &[u8]) {
    let s = std::str::from_utf8(bytes).unwrap();
    for frame in s.split_terminator("\n\n") {
        assert!(
            frame.starts_with("data: {") && !frame.contains('\n'),
            "{frame:?}"
        );
    }
    assert!(s.is_empty() || s.ends_with("\n\n"));
}

/// How many of `events` are of type `ty`.
fn count(events: &[Value], ty: &str) -> usize {
    events.iter().filter(|v| v["type"] == ty).count()
}

/// `lines` through a same-dialect route's translator (frames pass as
/// received; `finish_live` at the end): what the client gets, its run's
/// phase (the test fails if the client refuses the stream), the text.
fn through_same_dialect(lines: &[Value]) -> (Vec<Value>, crate::verify::RunPhase, String) {
    let input: String = lines.iter().map(|v| format!("data: {v}\n\n")).collect();
    let mut t = babelgate_core::Translator::same_dialect(
        SseFramer::default(),
        Box::new(AgUiDecoder::new()),
        Box::new(AgUiEncoder::new(EncodeContext::deterministic())),
    );
    let mut out = Vec::new();
    t.push(input.as_bytes(), &mut out).unwrap();
    t.finish_live(&mut out).unwrap();
    let got = payloads(&out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let phase = verify_stream(&got)
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
        .phase;
    (got, phase, text)
}

/// A start with no role is the assistant's (the schema's default): the
/// start, held by the shape stage for its first content, is written as
/// mapped, with the role said.
#[test]
fn a_start_without_a_role_comes_back_as_the_assistants() {
    use serde_json::json;
    let (got, _, text) = through_same_dialect(&[
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hi"}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"m"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}),
    ]);
    let start = got
        .iter()
        .find(|v| v["type"] == "TEXT_MESSAGE_START")
        .unwrap_or_else(|| panic!("no start: {text}"));
    assert_eq!(start["role"], "assistant", "{text}");
    assert_eq!(count(&got, "TEXT_MESSAGE_CONTENT"), 1, "{text}");
}

#[test]
fn fixtures_come_back_identical() {
    let mut n = 0;
    for (name, input) in testing::fixtures("ag-ui") {
        n += 1;
        let events = frames_to_events(&input, usize::MAX);
        assert_eq!(
            events,
            frames_to_events(&input, 3),
            "{name}: decoding depends on cuts"
        );
        let out = encode_events(&events);
        assert_framing(&out);
        // tests/run.sh feeds these to the real @ag-ui/client.
        if let Some(dir) = std::env::var_os("AGUI_DUMP_DIR").map(PathBuf::from) {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(format!("fixture-{name}.sse")), &out).unwrap();
        }
        let (want, got) = (payloads(&input), payloads(&out));
        if name == "cut_mid_message" {
            assert_eq!(got[..want.len()], want[..], "{name}");
            assert_eq!(
                got[want.len()..],
                [
                    json!({"type":"TEXT_MESSAGE_END","messageId":"msg-1"}),
                    json!({"type":"RUN_FINISHED","threadId":"thread-1","runId":"run-1"})
                ]
            );
        } else {
            assert_eq!(got, want, "{name}");
        }
        verify_stream(&got).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    eprintln!("{n} fixtures");
}

#[test]
fn chunk_streams_come_back_identical_even_when_interleaved() {
    let input = [
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","delta":"a","metadata":{"k":1}}),
        json!({"type":"TEXT_MESSAGE_CHUNK","delta":"b","rawEvent":{"p":1}}),
        json!({"type":"RAW","event":{}}),
        json!({"type":"TEXT_MESSAGE_CHUNK"}),
        json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m2","role":"assistant","name":"bot"}),
        json!({"type":"TOOL_CALL_CHUNK","toolCallId":"c","toolCallName":"f","delta":"{"}),
        json!({"type":"TOOL_CALL_CHUNK","delta":"}","future":1}),
        json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m3","delta":"x","subagentRunId":"s"}),
        json!({"type":"REASONING_MESSAGE_CHUNK","messageId":"r","delta":"hm"}),
        json!({"type":"STATE_SNAPSHOT","snapshot":{}}),
        json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m4","delta":"y"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}),
    ];
    let bytes: String = input.iter().map(|v| format!("data: {v}\n\n")).collect();
    let out = encode_events(&frames_to_events(bytes.as_bytes(), usize::MAX));
    let got = payloads(&out);
    assert_eq!(got, input);
    verify_stream(&got).unwrap();
}

/// A subagent's chunk, then an untagged end of what it opened (found by
/// the fuzzer). The client's untagged end closes the item but not the
/// subagent's lane, which ends the item again once the run ends, and
/// the client refuses that: the run's end went out as a rejected CUSTOM
/// event, and the run never ended. The lane's own end is the client's.
/// The same for an end in the lane's own producer's name, which closes
/// the lane (a first end) and then ends the item again: `@ag-ui/client`
/// refuses both even straight from an upstream, so a same-dialect route
/// does not pass them through either (`passes`).
#[test]
fn an_untagged_end_of_what_a_subagents_chunk_holds_is_left_to_the_lane() {
    let cases = [
        [
            json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"a","delta":"x"}),
            json!({"type":"TEXT_MESSAGE_END","messageId":"a"}),
        ],
        [
            json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"a","delta":"x","subagentRunId":"s"}),
            json!({"type":"TEXT_MESSAGE_END","messageId":"a"}),
        ],
        [
            json!({"type":"TOOL_CALL_CHUNK","toolCallId":"c","toolCallName":"f","delta":"{}","subagentRunId":"s"}),
            json!({"type":"TOOL_CALL_END","toolCallId":"c"}),
        ],
        [
            json!({"type":"REASONING_MESSAGE_CHUNK","messageId":"r","delta":"hm","subagentRunId":"s"}),
            json!({"type":"REASONING_MESSAGE_END","messageId":"r"}),
        ],
    ];
    for lines in cases {
        let bytes: String = lines.iter().map(|v| format!("data: {v}\n\n")).collect();
        let events = frames_to_events(bytes.as_bytes(), usize::MAX);
        // (through the shape stage, as on every route)
        let out = encode_events(&babelgate_core::shape::Shaper::shape_all(&events));
        let got = payloads(&out);
        let text = String::from_utf8_lossy(&out);
        let view = verify_stream(&got).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(view.phase, crate::verify::RunPhase::Finished, "{text}");
        assert!(!text.contains("babelgate.rejected_event"), "{text}");
        assert_eq!(got[1], lines[0], "the chunk as it came\n{text}");
        // A same-dialect route: frames pass as received but for these
        // ends, whether the upstream ends its run or is cut off.
        for upstream_ends in [false, true] {
            let mut input = vec![json!({"type":"RUN_STARTED","threadId":"t","runId":"r"})];
            input.extend(lines.iter().cloned());
            if upstream_ends {
                input.push(json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}));
            }
            let (got, phase, text) = through_same_dialect(&input);
            let end = match upstream_ends {
                true => crate::verify::RunPhase::Finished,
                false => crate::verify::RunPhase::Errored,
            };
            assert_eq!(phase, end, "{text}");
            assert_eq!(got[1], lines[0], "the chunk as it came\n{text}");
            assert_eq!(got.len(), 3, "no end of the chunk's item\n{text}");
        }
    }
}

/// A same-dialect route whose upstream speaks the deprecated THINKING_*
/// events: `@ag-ui/client` takes them only through its compatibility
/// boundary, which upgrades them to REASONING_* with ids of its own
/// minting. Passed as received, the reasoning the gateway closed for a
/// cut stream named ids the client never saw, and content or ends with
/// no THINKING opener before them were refused. So they are written as
/// mapped: REASONING_* events with the decoder's ids, whatever the rest
/// of the stream, and nothing for an end with nothing open.
#[test]
fn deprecated_thinking_events_reach_a_same_dialect_client_as_reasoning() {
    let start = json!({"type":"RUN_STARTED","threadId":"t","runId":"r"});
    let end = json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"});
    let text = [
        json!({"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hi","future":1}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"m"}),
    ];
    let thinking = [
        json!({"type":"THINKING_START","title":"plan"}),
        json!({"type":"THINKING_TEXT_MESSAGE_START"}),
        json!({"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":"x"}),
        json!({"type":"THINKING_TEXT_MESSAGE_END"}),
        json!({"type":"THINKING_END"}),
    ];
    let cases: Vec<(&str, Vec<Value>)> = vec![
        ("whole", {
            let mut v = vec![start.clone()];
            v.extend(thinking.iter().cloned());
            v.extend(text.iter().cloned());
            v.push(end.clone());
            v
        }),
        ("cut while reasoning", {
            let mut v = vec![start.clone()];
            v.extend(thinking[..3].iter().cloned());
            v
        }),
        (
            "content with no opener, then the run's end",
            vec![start.clone(), thinking[2].clone(), end.clone()],
        ),
        (
            "ends with nothing open",
            vec![
                start.clone(),
                thinking[3].clone(),
                thinking[4].clone(),
                end.clone(),
            ],
        ),
    ];
    for (case, input) in cases {
        let (got, phase, out) = through_same_dialect(&input);
        assert!(
            matches!(
                phase,
                crate::verify::RunPhase::Finished | crate::verify::RunPhase::Errored
            ),
            "{case}\n{out}"
        );
        assert!(
            !out.contains("THINKING"),
            "{case}: passed as received\n{out}"
        );
        if case == "whole" {
            let types: Vec<_> = got.iter().map(|v| v["type"].as_str().unwrap()).collect();
            assert_eq!(
                types,
                [
                    "RUN_STARTED",
                    "REASONING_START",
                    "REASONING_MESSAGE_START",
                    "REASONING_MESSAGE_CONTENT",
                    "REASONING_MESSAGE_END",
                    "REASONING_END",
                    "TEXT_MESSAGE_START",
                    "TEXT_MESSAGE_CONTENT",
                    "TEXT_MESSAGE_END",
                    "RUN_FINISHED"
                ],
                "{out}"
            );
            // The frames after them still pass as received.
            assert_eq!(got[7], text[1], "{out}");
        }
    }
}

/// A same-dialect upstream that starts what is open, or sends content or
/// an end of what is not: `@ag-ui/client` refuses each straight from
/// the upstream ("No active text message found with ID"), so each is
/// written as mapped: a repeated start or a stray end as nothing,
/// orphan content after a start of what it continues (a tool call as
/// `unknown`), as the shape stage does on a translated route. The frames
/// around it still pass as received.
#[test]
fn a_same_dialect_upstreams_events_out_of_order_are_mapped() {
    let start = json!({"type":"RUN_STARTED","threadId":"t","runId":"r"});
    let end = json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"});
    let m = json!({"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant","x":1});
    let m_text = json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hi"});
    let m_end = json!({"type":"TEXT_MESSAGE_END","messageId":"m"});
    let cases = [
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"o","delta":"orphan"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{}"}),
        json!({"type":"REASONING_MESSAGE_CONTENT","messageId":"r","delta":"hm"}),
        m_end.clone(),
        m.clone(),
        json!({"type":"STEP_FINISHED","stepName":"never"}),
        json!({"type":"REASONING_END","messageId":"never"}),
        json!({"type":"TOOL_CALL_END","toolCallId":"never"}),
    ];
    for bad in cases {
        let input = [
            start.clone(),
            m.clone(),
            m_text.clone(),
            m_end.clone(),
            bad.clone(),
            end.clone(),
        ];
        let (got, phase, out) = through_same_dialect(&input);
        assert_eq!(phase, crate::verify::RunPhase::Finished, "{bad}\n{out}");
        // (a text start waits for its content: JSON-equal, not as received)
        assert_eq!(got[1], m, "{out}");
        assert!(
            out.contains(&format!("data: {m_text}\n\n")),
            "a frame the client takes passes as it came\n{out}"
        );
        if let Some(delta) = bad.get("delta") {
            // Started, then the content as it came (no longer wrapped).
            let at = got.iter().position(|v| v == &bad);
            assert!(at.is_some_and(|i| i > 0), "{bad} lost\n{out}");
            let started = &got[at.unwrap() - 1];
            assert!(
                started["type"].as_str().unwrap().ends_with("_START"),
                "{out}"
            );
            assert!(!out.contains("babelgate.rejected_event"), "{delta}\n{out}");
        }
    }
    // A start of a message that is open: the second is not written.
    let input = [
        start.clone(),
        m.clone(),
        m.clone(),
        m_text.clone(),
        m_end.clone(),
        end.clone(),
    ];
    let (got, phase, out) = through_same_dialect(&input);
    assert_eq!(phase, crate::verify::RunPhase::Finished, "{out}");
    let starts = count(&got, "TEXT_MESSAGE_START");
    assert_eq!(starts, 1, "{out}");
    // Arguments after their call ended are complete: no second call of
    // that id is made up for them.
    let input = [
        start.clone(),
        json!({"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}),
        json!({"type":"TOOL_CALL_END","toolCallId":"c"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"late"}),
        end.clone(),
    ];
    let (got, phase, out) = through_same_dialect(&input);
    assert_eq!(phase, crate::verify::RunPhase::Finished, "{out}");
    let starts = count(&got, "TOOL_CALL_START");
    assert_eq!(starts, 1, "{out}");
    // Content tagged with a subagent other than the one that opened its
    // message: refused straight ("does not match the text message 'm'
    // opener's subagent"), written untagged here.
    let input = [
        start.clone(),
        json!({"type":"SUBAGENT_STARTED","subagentRunId":"s1","name":"helper"}),
        m.clone(),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"mine","subagentRunId":"s1"}),
        m_end.clone(),
        json!({"type":"SUBAGENT_FINISHED","subagentRunId":"s1"}),
        end.clone(),
    ];
    let (got, phase, out) = through_same_dialect(&input);
    assert_eq!(phase, crate::verify::RunPhase::Finished, "{out}");
    let content = got.iter().find(|v| v["type"] == "TEXT_MESSAGE_CONTENT");
    assert_eq!(content.map(|c| &c["delta"]), Some(&json!("mine")), "{out}");
}

/// A same-dialect upstream's TOOL_CALL_RESULT before its call's
/// TOOL_CALL_END: the client takes it and keeps the call open until the
/// end, but the encoder ends a call at its result (as every route does),
/// so written as received the two parted: the upstream's end went out as
/// nothing, and the client refused the run's end ("while tool calls are
/// still active"). Written as mapped, the call ends before its result.
#[test]
fn a_same_dialect_result_before_its_calls_end_ends_the_call_first() {
    let result =
        json!({"type":"TOOL_CALL_RESULT","messageId":"t1","toolCallId":"c","content":"ok"});
    let input = [
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        json!({"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}),
        json!({"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{}"}),
        result.clone(),
        json!({"type":"TOOL_CALL_END","toolCallId":"c"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}),
    ];
    // The client takes it straight.
    verify_stream(&input).unwrap();
    let (got, phase, out) = through_same_dialect(&input);
    assert_eq!(phase, crate::verify::RunPhase::Finished, "{out}");
    let types: Vec<&str> = got.iter().map(|v| v["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "RUN_STARTED",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
            "RUN_FINISHED"
        ],
        "{out}"
    );
    assert_eq!(got[4], result, "{out}");
}

/// A same-dialect upstream that ends its run with a message, step or
/// other item still open: the client refuses that RUN_FINISHED ("Cannot
/// send 'RUN_FINISHED' while steps are still active"), straight from
/// the upstream too. Written as mapped, it closes them first; its own
/// fields stay.
#[test]
fn a_same_dialect_run_finished_with_items_open_closes_them_first() {
    let input = [
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        json!({"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hi"}),
        json!({"type":"STEP_STARTED","stepName":"s"}),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","result":{"x":1}}),
    ];
    let (got, phase, out) = through_same_dialect(&input);
    assert_eq!(phase, crate::verify::RunPhase::Finished, "{out}");
    let types: Vec<_> = got.iter().map(|v| v["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "STEP_STARTED",
            "TEXT_MESSAGE_END",
            "STEP_FINISHED",
            "RUN_FINISHED"
        ],
        "{out}"
    );
    assert_eq!(got[6]["result"], json!({"x":1}), "{out}");
    // With nothing open it passes as received.
    let closed = [
        input[0].clone(),
        json!({"type":"RUN_FINISHED","threadId":"t","runId":"r","future":true}),
    ];
    let (got, _, out) = through_same_dialect(&closed);
    assert_eq!(got[1], closed[1], "{out}");
}

/// A same-dialect route whose upstream does not begin with RUN_STARTED:
/// `@ag-ui/client` refuses that straight from the upstream ("First event
/// must be 'RUN_STARTED'"), so the frames before a run are written as
/// mapped, which begins one, and the rest pass as received.
/// A RUN_STARTED of its own after a frame that began the run (a RAW
/// first, say) is a second start, which the client refuses too: dropped.
#[test]
fn a_same_dialect_stream_without_run_started_gets_one() {
    let lines = [
        json!({"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}),
        json!({"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hi","future":1}),
        json!({"type":"TEXT_MESSAGE_END","messageId":"m"}),
    ];
    let raw_first = [
        json!({"type":"RAW","event":{"a":1}}),
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
    ];
    let mut input = raw_first.to_vec();
    input.extend(lines.iter().cloned());
    let (got, _, text) = through_same_dialect(&input);
    let starts = count(&got, "RUN_STARTED");
    assert_eq!(starts, 1, "{text}");
    for upstream_ends in [false, true] {
        let mut input = lines.to_vec();
        if upstream_ends {
            input.push(json!({"type":"RUN_FINISHED","threadId":"t","runId":"r"}));
        }
        let (got, phase, text) = through_same_dialect(&input);
        assert!(
            matches!(
                phase,
                crate::verify::RunPhase::Finished | crate::verify::RunPhase::Errored
            ),
            "{text}"
        );
        assert_eq!(got[0]["type"], "RUN_STARTED", "{text}");
        assert_eq!(got[1], lines[0], "{text}");
        // Once the run is running, frames pass as they came.
        assert_eq!(got[2], lines[1], "{text}");
    }
}

#[test]
fn a_lone_chunk_continuation_in_another_dialects_stream_is_written_out_in_full() {
    // Core events carrying a chunk marker whose lane the encoder never
    // opened (the source's start came from elsewhere): explicit events.
    let lines = [
        json!({"type":"RUN_STARTED","threadId":"t","runId":"r"}),
        json!({"type":"TEXT_MESSAGE_CHUNK","messageId":"m1","delta":"a"}),
        json!({"type":"TEXT_MESSAGE_CHUNK","delta":"b"}),
    ];
    let bytes: String = lines.iter().map(|v| format!("data: {v}\n\n")).collect();
    let events = frames_to_events(bytes.as_bytes(), usize::MAX);
    // Drop the opening chunk's events: the continuation has no lane now.
    let rest: Vec<_> = events
        .into_iter()
        .filter(|e| !matches!(&e.kind, EventKind::TextStart { .. }))
        .collect();
    // (through the shape stage, as on a translated route)
    let got = payloads(&encode_events(&babelgate_core::shape::Shaper::shape_all(
        &rest,
    )));
    verify_stream(&got).unwrap();
    let types: Vec<_> = got
        .iter()
        .map(|v| v["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        types,
        [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED"
        ]
    );
}

#[test]
fn long_runs_with_many_entities_stay_fast() {
    let mut events = Vec::new();
    for i in 0..3000 {
        let id = format!("c{i}");
        events.push(Event::new(EventKind::ToolCallStart {
            tool_call_id: id.clone(),
            tool_name: "f".into(),
            parent_message_id: None,
        }));
        for _ in 0..5 {
            events.push(Event::new(EventKind::ToolCallArgs {
                tool_call_id: id.clone(),
                delta: "x".into(),
            }));
        }
        events.push(Event::new(EventKind::ToolCallEnd { tool_call_id: id }));
    }
    // (through the shape stage, as on every route)
    let events = babelgate_core::shape::Shaper::shape_all(&events);
    let t = std::time::Instant::now();
    let out = encode_events(&events);
    assert!(out.len() > 100_000);
    // Generous: linear work takes milliseconds; a copy per event would take seconds.
    assert!(
        t.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        t.elapsed()
    );
}

// ---- property tests ------------------------------------------------

fn id() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "c"]).prop_map(str::to_string)
}

fn text() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["", "x", "你好", "🎉\"\\\n", "\u{2028}"]).prop_map(str::to_string)
}

/// Any core event, ids from a tiny pool so that collisions, missing
/// starts and double ends are common.
fn any_event() -> impl Strategy<Value = Event> {
    let kind = prop_oneof![
        (prop::option::of(id()), prop::option::of(id())).prop_map(|(t, r)| {
            EventKind::RunStarted {
                thread_id: t,
                run_id: r,
                parent_run_id: None,
                message_id: None,
                input: None,
            }
        }),
        prop_oneof![
            Just(Outcome::Unspecified),
            Just(Outcome::Success {
                pending_tool_call_ids: vec!["a".into()]
            }),
            Just(Outcome::Interrupt { interrupts: vec![] }),
            Just(Outcome::Interrupt {
                interrupts: vec![Interrupt {
                    id: "i".into(),
                    reason: "r".into(),
                    message: None,
                    tool_call_id: None,
                    payload: Some(json!([1])),
                    extra: Default::default()
                }]
            }),
            Just(Outcome::Cancelled {
                reason: Some("x".into())
            }),
        ]
        .prop_map(|outcome| EventKind::RunFinished {
            thread_id: None,
            run_id: None,
            message_id: None,
            result: Some(Value::Null),
            outcome,
            finish_reason: None,
            usage: Some(json!({"inputTokens": 1}))
        }),
        text().prop_map(|m| EventKind::RunError {
            message: m,
            code: None
        }),
        prop::option::of(id()).prop_map(|name| EventKind::StepStarted { name }),
        prop::option::of(id()).prop_map(|name| EventKind::StepFinished { name }),
        (
            id(),
            prop::sample::select(vec![Role::Assistant, Role::User, Role::Tool])
        )
            .prop_map(|(i, role)| EventKind::TextStart {
                message_id: i,
                role,
                name: None
            }),
        (id(), text()).prop_map(|(i, d)| EventKind::TextDelta {
            message_id: i,
            delta: d
        }),
        id().prop_map(|i| EventKind::TextEnd { message_id: i }),
        id().prop_map(|i| EventKind::ReasoningPhaseStart { message_id: i }),
        id().prop_map(|i| EventKind::ReasoningPhaseEnd { message_id: i }),
        id().prop_map(|i| EventKind::ReasoningStart { message_id: i }),
        (id(), text()).prop_map(|(i, d)| EventKind::ReasoningDelta {
            message_id: i,
            delta: d
        }),
        id().prop_map(|i| EventKind::ReasoningEnd { message_id: i }),
        id().prop_map(|i| EventKind::ReasoningEncrypted {
            subtype: "other".into(),
            entity_id: i,
            value: "v".into()
        }),
        (id(), prop::option::of(id())).prop_map(|(i, p)| EventKind::ToolCallStart {
            tool_call_id: i,
            tool_name: "f".into(),
            parent_message_id: p
        }),
        (id(), text()).prop_map(|(i, d)| EventKind::ToolCallArgs {
            tool_call_id: i,
            delta: d
        }),
        id().prop_map(|i| EventKind::ToolCallEnd { tool_call_id: i }),
        (
            id(),
            prop::option::of(id()),
            prop_oneof![
                Just(json!("r")),
                Just(json!({"a": 1})),
                Just(json!([{"type": "text", "text": "t"}])),
                Just(Value::Null)
            ]
        )
            .prop_map(|(i, m, c)| EventKind::ToolCallResult {
                tool_call_id: i,
                message_id: m,
                content: c
            }),
        (id(), any::<bool>()).prop_map(|(i, b)| EventKind::ToolCallError {
            tool_call_id: i,
            error: "e".into(),
            input_invalid: b
        }),
        id().prop_map(|i| EventKind::ToolCallDenied { tool_call_id: i }),
        Just(EventKind::StateSnapshot {
            snapshot: json!({"n": 1})
        }),
        prop_oneof![
            Just(json!([{"op": "replace", "path": "/n", "value": 2}])),
            Just(json!({"not": "a patch"}))
        ]
        .prop_map(|patch| EventKind::StateDelta { patch }),
        Just(EventKind::MessagesSnapshot {
            messages: vec![babelgate_core::request::Message::text_message(
                "a",
                Role::Assistant,
                "x"
            )]
        }),
        (id(), prop_oneof![Just(json!({"k": 1})), Just(json!("s"))]).prop_map(|(i, c)| {
            EventKind::ActivitySnapshot {
                message_id: i,
                activity_type: "plan".into(),
                content: c,
                replace: None,
            }
        }),
        (id(), prop_oneof![Just(json!([])), Just(json!(3))]).prop_map(|(i, p)| {
            EventKind::ActivityDelta {
                message_id: i,
                activity_type: "plan".into(),
                patch: p,
            }
        }),
        Just(EventKind::Source {
            source_kind: babelgate_core::event::SourceKind::Document,
            source_id: "s".into(),
            url: None,
            title: Some("t".into()),
            media_type: None,
            filename: None
        }),
        Just(EventKind::File {
            url: "https://f".into(),
            media_type: "image/png".into()
        }),
        (prop::option::of(id()), any::<bool>()).prop_map(|(i, t)| EventKind::Data {
            name: "w".into(),
            id: i,
            message_id: None,
            data: json!(1),
            transient: t
        }),
        Just(EventKind::Custom {
            name: "c".into(),
            value: Value::Null
        }),
        Just(EventKind::MessageMetadata {
            metadata: json!({"m": 1})
        }),
        id().prop_map(|i| EventKind::CollabStart {
            message_id: i,
            from: Some("x".into()),
            to: None
        }),
        id().prop_map(|i| EventKind::CollabContent {
            message_id: i,
            delta: json!({"task": {}})
        }),
        id().prop_map(|i| EventKind::CollabEnd { message_id: i }),
        id().prop_map(|i| EventKind::SubagentStarted {
            subagent_run_id: i,
            name: "n".into(),
            description: None
        }),
        id().prop_map(|i| EventKind::SubagentFinished {
            subagent_run_id: i,
            result: None,
            outcome: Some(json!({"type": "suspended"}))
        }),
        id().prop_map(|i| EventKind::SubagentError {
            subagent_run_id: i,
            message: "m".into(),
            code: None
        }),
        Just(EventKind::Raw {
            event: Value::Null,
            source: None
        }),
        Just(EventKind::Unknown {
            raw: json!({"type": "hai-thing"})
        }),
    ];
    (kind, prop::option::of(0i64..10), any::<bool>()).prop_map(|(k, ts, foreign)| {
        let mut e = Event::new(k).with_timestamp(ts);
        if foreign {
            e = e.with_origin(babelgate_core::Dialect::Hai);
        }
        e
    })
}

fn well_formed_blocks() -> impl Strategy<Value = Vec<EventKind>> {
    let block = prop_oneof![
        prop::collection::vec(text(), 0..3).prop_map(|ds| {
            let mut v = vec![EventKind::text_start("M")];
            v.extend(ds.into_iter().map(|d| EventKind::TextDelta {
                message_id: "M".into(),
                delta: d,
            }));
            v.push(EventKind::text_end("M"));
            v
        }),
        (prop::collection::vec(text(), 0..3), any::<bool>()).prop_map(|(ds, result)| {
            let mut v = vec![EventKind::ToolCallStart {
                tool_call_id: "T".into(),
                tool_name: "f".into(),
                parent_message_id: None,
            }];
            v.extend(ds.into_iter().map(|d| EventKind::ToolCallArgs {
                tool_call_id: "T".into(),
                delta: d,
            }));
            v.push(EventKind::ToolCallEnd {
                tool_call_id: "T".into(),
            });
            if result {
                v.push(EventKind::ToolCallResult {
                    tool_call_id: "T".into(),
                    message_id: Some("R".into()),
                    content: json!("ok"),
                });
            }
            v
        }),
        (prop::collection::vec(text(), 1..3), any::<bool>()).prop_map(|(ds, phase)| {
            let mut v = vec![];
            if phase {
                v.push(EventKind::ReasoningPhaseStart {
                    message_id: "P".into(),
                });
            }
            v.push(EventKind::ReasoningStart {
                message_id: "Q".into(),
            });
            v.extend(ds.into_iter().map(|d| EventKind::ReasoningDelta {
                message_id: "Q".into(),
                delta: d,
            }));
            v.push(EventKind::ReasoningEnd {
                message_id: "Q".into(),
            });
            if phase {
                v.push(EventKind::ReasoningPhaseEnd {
                    message_id: "P".into(),
                });
            }
            v
        }),
        Just(vec![
            EventKind::StepStarted {
                name: Some("s".into())
            },
            EventKind::StepFinished {
                name: Some("s".into())
            }
        ]),
        Just(vec![
            EventKind::StateSnapshot {
                snapshot: json!({"a": [1]})
            },
            EventKind::StateDelta {
                patch: json!([{"op": "add", "path": "/a/-", "value": 2}])
            }
        ]),
        Just(vec![EventKind::Custom {
            name: "n".into(),
            value: json!({"v": 1})
        }]),
        Just(vec![EventKind::Raw {
            event: json!({"p": 1}),
            source: Some("acme".into())
        }]),
        Just(vec![EventKind::ActivitySnapshot {
            message_id: "A".into(),
            activity_type: "plan".into(),
            content: json!({}),
            replace: Some(true)
        }]),
    ];
    (
        prop::collection::vec(block, 0..6),
        prop_oneof![
            Just(Outcome::Unspecified),
            Just(Outcome::Success {
                pending_tool_call_ids: vec!["T1".into()]
            }),
            Just(Outcome::Cancelled { reason: None }),
        ],
    )
        .prop_map(|(blocks, outcome)| {
            let mut v = vec![EventKind::RunStarted {
                thread_id: Some("th".into()),
                run_id: Some("ru".into()),
                parent_run_id: None,
                message_id: None,
                input: None,
            }];
            for (n, b) in blocks.into_iter().enumerate() {
                // Unique ids per block.
                let s = serde_json::to_string(&b).unwrap();
                let s = s
                    .replace("\"M\"", &format!("\"m{n}\""))
                    .replace("\"T\"", &format!("\"t{n}\""))
                    .replace("\"R\"", &format!("\"r{n}\""))
                    .replace("\"P\"", &format!("\"p{n}\""))
                    .replace("\"Q\"", &format!("\"q{n}\""))
                    .replace("\"A\"", &format!("\"a{n}\""));
                v.extend(serde_json::from_str::<Vec<EventKind>>(&s).unwrap());
            }
            v.push(EventKind::RunFinished {
                thread_id: Some("th".into()),
                run_id: Some("ru".into()),
                message_id: None,
                result: None,
                outcome,
                finish_reason: None,
                usage: None,
            });
            v
        })
}

/// Writes random encoder outputs to `$AGUI_DUMP_DIR`, which tests/run.sh
/// sets and then feeds to the real `@ag-ui/client`
/// (`validate-agui.mjs --dump`); nothing happens without the variable.
#[test]
fn dump_random_streams_for_the_real_client() {
    let Some(dir) = std::env::var_os("AGUI_DUMP_DIR").map(PathBuf::from) else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = (prop::collection::vec(any_event(), 0..40), any::<bool>());
    for n in 0..500 {
        let (events, fail) = strategy.new_tree(&mut runner).unwrap().current();
        let mut e = AgUiEncoder::new(EncodeContext::deterministic());
        let mut out = Vec::new();
        // through the shape stage, as on every translated route
        for ev in &babelgate_core::shape::Shaper::shape_all(&events) {
            e.encode(ev, &mut out);
        }
        if fail {
            e.fail("boom", Some("x"), &mut out);
        }
        e.finish(&mut out);
        std::fs::write(dir.join(format!("r{n}.sse")), out).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Whatever comes in, the client accepts what goes out, and decoding
    /// our output and encoding it again changes nothing.
    #[test]
    fn any_input_gives_a_stream_the_client_accepts(events in prop::collection::vec(any_event(), 0..40), fail in any::<bool>()) {
        let mut e = AgUiEncoder::new(EncodeContext::deterministic());
        let mut out = Vec::new();
        // through the shape stage, as on every translated route
        for ev in &babelgate_core::shape::Shaper::shape_all(&events) {
            e.encode(ev, &mut out);
        }
        if fail {
            e.fail("boom", Some("x"), &mut out);
        }
        e.finish(&mut out);
        assert_framing(&out);
        let got = payloads(&out);
        verify_stream(&got).map_err(|err| TestCaseError::fail(format!("{err}\n{}", String::from_utf8_lossy(&out))))?;
        let last = got.last().map(|v| v["type"].as_str().unwrap_or("").to_string()).unwrap_or_default();
        prop_assert!(last == "RUN_FINISHED" || last == "RUN_ERROR", "ends with {last}");
        prop_assert!(!String::from_utf8_lossy(&out).contains("babelgate.rejected_event"));
        prop_assert!(!got.iter().any(|v| v.as_object().unwrap().values().any(Value::is_null)
            && v["type"] != "CUSTOM" && v["type"] != "RAW"), "a null field");
        let again = payloads(&encode_events(&frames_to_events(&out, 5)));
        prop_assert_eq!(again, got);
    }

    /// A well-formed stream survives encode -> frame -> decode unchanged.
    #[test]
    fn representable_streams_round_trip(kinds in well_formed_blocks()) {
        let events: Vec<Event> = kinds.iter().cloned().map(Event::new).collect();
        let out = encode_events(&events);
        let back: Vec<EventKind> = frames_to_events(&out, 7).into_iter().map(|e| e.kind).collect();
        prop_assert_eq!(back, kinds);
    }
}

/// Events the in-place path takes, and their near misses: hostile text,
/// timestamps past 2^53, AG-UI extras (a subagent tag, unknown keys,
/// notes), other origins.
fn plain_event() -> impl Strategy<Value = Event> {
    let hostile = prop::sample::select(vec![
        "",
        "x",
        "你好",
        "🎉\"\\\n",
        "\u{2028}\u{2029}",
        "\u{1}\u{1f}\u{7f}\t\r\u{8}\u{c}",
        "</script>",
        "\\u0041",
    ])
    .prop_map(str::to_string);
    let kind = prop_oneof![
        (
            id(),
            prop::sample::select(vec![
                Role::Assistant,
                Role::User,
                Role::Developer,
                Role::System,
                Role::Tool
            ]),
            prop::option::of(hostile.clone())
        )
            .prop_map(|(i, role, name)| EventKind::TextStart {
                message_id: i,
                role,
                name
            }),
        (id(), hostile.clone()).prop_map(|(i, d)| EventKind::TextDelta {
            message_id: i,
            delta: d
        }),
        id().prop_map(|i| EventKind::TextEnd { message_id: i }),
        id().prop_map(|i| EventKind::ReasoningStart { message_id: i }),
        (id(), hostile.clone()).prop_map(|(i, d)| EventKind::ReasoningDelta {
            message_id: i,
            delta: d
        }),
        id().prop_map(|i| EventKind::ReasoningEnd { message_id: i }),
        (id(), hostile.clone(), prop::option::of(id())).prop_map(|(i, n, p)| {
            EventKind::ToolCallStart {
                tool_call_id: i,
                tool_name: n,
                parent_message_id: p,
            }
        }),
        (id(), hostile.clone()).prop_map(|(i, d)| EventKind::ToolCallArgs {
            tool_call_id: i,
            delta: d
        }),
        id().prop_map(|i| EventKind::ToolCallEnd { tool_call_id: i }),
        (
            id(),
            prop::option::of(id()),
            prop_oneof![
                hostile.clone().prop_map(Value::String),
                Just(json!({"a": "\u{2028}"})),
                Just(json!([{"type": "text", "text": "t\""}])),
                Just(json!([1])),
                Just(json!(1.5)),
                Just(Value::Null)
            ]
        )
            .prop_map(|(i, m, c)| EventKind::ToolCallResult {
                tool_call_id: i,
                message_id: m,
                content: c
            }),
        prop_oneof![
            Just(json!([{"op": "add", "path": "/a\u{2028}", "value": "é\"\n"}])),
            Just(
                json!([{"op": "replace", "path": "/n", "value": 2}, {"op": "remove", "path": "/n"}])
            ),
            Just(json!([{"op": "replace", "path": "n", "value": 2}])),
            Just(json!([])),
            Just(json!({"not": "a patch"}))
        ]
        .prop_map(|patch| EventKind::StateDelta { patch }),
        prop_oneof![
            Just(json!({"a\u{2028}": "é\"\n", "n": [1, 2.5, null]})),
            Just(json!("not an object")),
            Just(Value::Null)
        ]
        .prop_map(|snapshot| EventKind::StateSnapshot { snapshot }),
        (id(), any::<bool>()).prop_map(|(i, b)| if b {
            EventKind::RunStarted {
                thread_id: Some(i),
                run_id: None,
                parent_run_id: None,
                message_id: None,
                input: None,
            }
        } else {
            EventKind::run_finished(Outcome::Unspecified)
        }),
        id().prop_map(|i| EventKind::StepStarted { name: Some(i) }),
    ];
    let ts = prop_oneof![
        Just(None),
        (0i64..10).prop_map(Some),
        Just(Some(-9_007_199_254_740_991)),
        Just(Some(9_007_199_254_740_992)),
        Just(Some(i64::MIN)),
    ];
    let extra = prop_oneof![
        4 => Just(None),
        1 => Just(Some(json!({"subagentRunId": "s"}))),
        1 => Just(Some(json!({"zzz": 1, "name": "n"}))),
        1 => Just(Some(json!({"role": "user"}))),
    ];
    let origin = prop::sample::select(vec![
        None,
        Some(babelgate_core::Dialect::AgUi),
        Some(babelgate_core::Dialect::Vercel),
    ]);
    (kind, ts, extra, origin)
        .prop_map(|(k, ts, extra, origin)| babelgate_core::testing::dressed(k, ts, extra, origin))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// The in-place path writes exactly what the general one writes
    /// (bytes, event spans, and what follows from the view it keeps),
    /// shaped or not.
    #[test]
    fn written_in_place_equals_the_general_path(events in prop::collection::vec(plain_event(), 0..30), shaped in any::<bool>()) {
        let events = if shaped { babelgate_core::shape::Shaper::shape_all(&events) } else { events };
        let fast = babelgate_core::testing::encode_all(&mut AgUiEncoder::new(EncodeContext::deterministic()), &events);
        let general = babelgate_core::testing::encode_all(&mut AgUiEncoder::new(EncodeContext::deterministic()).general_only(), &events);
        prop_assert_eq!(String::from_utf8_lossy(&fast.0), String::from_utf8_lossy(&general.0));
        prop_assert_eq!(fast.1, general.1);
    }
}
