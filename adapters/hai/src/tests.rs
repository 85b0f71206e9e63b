//! Round trips through the whole adapter: HAI fixtures back to themselves,
//! and arbitrary core sequences through HAI and back.

use std::collections::HashMap;

use babelgate_core::event::{Interrupt, Outcome};
use babelgate_core::request::Message;
use babelgate_core::sse::SseFramer;
use babelgate_core::testing::{self, sse_payloads as payloads};
use babelgate_core::{Decoder, EncodeContext, Encoder, Event, EventKind, Role};
use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;

/// Decodes `bytes` (fed in `chunk`-byte pieces) and encodes the events.
fn hai_to_hai(bytes: &[u8], chunk: usize) -> Vec<u8> {
    let mut framer = SseFramer::default();
    let mut dec = HaiDecoder::new();
    let mut enc = HaiEncoder::new(EncodeContext::deterministic());
    let (mut frames, mut events, mut out) = (Vec::new(), Vec::new(), Vec::new());
    for piece in bytes.chunks(chunk) {
        framer.push(piece, &mut frames).unwrap();
    }
    framer.finish(&mut frames).unwrap();
    for fr in &frames {
        dec.decode(fr, &mut events).unwrap();
    }
    dec.finish(&mut events).unwrap();
    for ev in &events {
        enc.encode(ev, &mut out);
    }
    enc.finish(&mut out);
    out
}

#[test]
fn every_fixture_comes_back_as_it_went_in() {
    let mut seen = 0;
    for (name, input) in testing::fixtures("hai") {
        seen += 1;
        let want = payloads(&input);
        for chunk in [usize::MAX, 7, 1] {
            let got = payloads(&hai_to_hai(&input, chunk.min(input.len().max(1))));
            if name == "cut_mid_message" {
                // the input, then what closes it
                assert!(got.len() > want.len(), "{name}");
                assert_eq!(got[..want.len()], want[..], "{name}");
                let tail: Vec<_> = got[want.len()..]
                    .iter()
                    .map(|v| v["type"].clone())
                    .collect();
                assert_eq!(tail, [json!("BUSINESS_DATA_END"), json!("RUN_FINISHED")]);
            } else {
                assert_eq!(got, want, "{name} (chunks of {chunk})");
            }
        }
    }
    assert!(seen >= 10, "expected the ten scenarios, found {seen}");
}

/// A same-dialect route is a translated one: a `BUSINESS_DATA_START`
/// waits for its first content, as on every route, so a frame that
/// fails to decode after it leaves nothing open for the client. Here the
/// run had finished: the client has its whole run, and nothing follows
/// its end (before, the start went out as received after the finished
/// run, and the stream ended on it: fuzz decode_hai).
#[test]
fn a_same_dialect_failure_after_a_held_start_leaves_nothing_open() {
    let frames = [
        json!({"type":"RUN_STARTED","messageId":"m1","role":"assistant"}),
        json!({"type":"RUN_FINISHED"}),
        json!({"type":"BUSINESS_DATA_START","messageId":"m2","role":"assistant"}),
        json!({"type":"BUSINESS_DATA_CONTENT","messageId":"m2"}),
    ];
    let run = |frames: &[Value]| {
        let input: String = frames.iter().map(|v| format!("data: {v}\n\n")).collect();
        let mut t = babelgate_core::Translator::same_dialect(
            SseFramer::default(),
            Box::new(HaiDecoder::new()),
            Box::new(HaiEncoder::new(EncodeContext::deterministic())),
        );
        let mut out = Vec::new();
        assert!(t.push(input.as_bytes(), &mut out).is_err());
        t.finish(&mut out).unwrap();
        (payloads(&out), String::from_utf8_lossy(&out).into_owned())
    };
    let (got, out) = run(&frames);
    assert_eq!(got, frames[..2], "{out}");
    // In a run still going, the failure is the client's RUN_ERROR.
    let (got, out) = run(&[frames[0].clone(), frames[2].clone(), frames[3].clone()]);
    let types: Vec<_> = got.iter().map(|v| v["type"].clone()).collect();
    assert_eq!(types, ["RUN_STARTED", "RUN_ERROR"], "{out}");
    assert_eq!(got[1]["code"], "upstream_malformed");
}

// ---- proptest: core -> HAI -> core ---------------------------------------

/// A piece of a run HAI can carry without changing its core shape.
#[derive(Debug, Clone)]
enum Block {
    /// Text, with an optional widget after the first delta.
    Text(Vec<String>, Option<(String, Option<String>, Value)>),
    /// Reasoning (possibly followed by text, which then joins its message).
    Reasoning(Vec<String>),
    Tool(String, Vec<String>, Option<String>),
    State(Value, Vec<Value>),
    Custom(String, Value),
    Raw(Value, Option<String>),
    Step(String),
    Collab(Option<String>, Option<String>, Vec<Value>),
    Snapshot(Vec<(Role, String)>),
}

#[derive(Debug, Clone)]
enum End {
    Finished(
        Option<Value>,
        Option<(String, Option<String>, Option<Value>)>,
    ),
    Error(String, Option<String>),
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "(?s).{0,12}",
        Just("你好，世界 🎉👍🏽 \"q\" \\ \n\u{2028}".to_string()),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "(?s).{0,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,5}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn json_object() -> impl Strategy<Value = Value> {
    prop::collection::btree_map("[a-z]{1,5}", json_value(), 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

fn block() -> impl Strategy<Value = Block> {
    let widget = (
        "w-[a-z]{1,6}",
        prop::option::of("blk-[0-9]{1,3}"),
        json_value(),
    );
    prop_oneof![
        (
            prop::collection::vec(text(), 1..4),
            prop::option::of(widget)
        )
            .prop_map(|(d, w)| Block::Text(d, w)),
        prop::collection::vec(text(), 1..4).prop_map(Block::Reasoning),
        (
            "[a-z_]{1,10}",
            prop::collection::vec(text(), 0..3),
            prop::option::of(text())
        )
            .prop_map(|(n, a, r)| Block::Tool(n, a, r)),
        (json_value(), prop::collection::vec(json_value(), 0..3)).prop_map(|(s, vals)| {
            let ops = vals
                .into_iter()
                .enumerate()
                .map(
                    |(i, v)| json!({"op": "add", "path": format!("/k{i}"), "value": v, "from": ""}),
                )
                .collect();
            Block::State(s, ops)
        }),
        ("[a-z]{1,8}", json_value()).prop_map(|(n, v)| Block::Custom(n, v)),
        (json_value(), prop::option::of("[a-z]{1,6}")).prop_map(|(e, s)| Block::Raw(e, s)),
        "[a-z ]{1,8}".prop_map(Block::Step),
        (
            prop::option::of("[A-Za-z]{1,6}"),
            prop::option::of("[A-Za-z]{1,6}"),
            prop::collection::vec(json_value(), 0..3)
        )
            .prop_map(|(f, t, d)| Block::Collab(f, t, d)),
        prop::collection::vec(
            (
                prop_oneof![
                    Just(Role::User),
                    Just(Role::Assistant),
                    Just(Role::System),
                    Just(Role::Developer)
                ],
                text()
            ),
            0..3
        )
        .prop_map(Block::Snapshot),
    ]
}

fn end() -> impl Strategy<Value = End> {
    prop_oneof![
        (
            prop::option::of(json_value()),
            prop::option::of((
                text(),
                prop::option::of(text()),
                prop::option::of(json_object())
            ))
        )
            .prop_map(|(r, i)| End::Finished(r, i)),
        (text(), prop::option::of("[A-Z_]{1,8}")).prop_map(|(m, c)| End::Error(m, c)),
    ]
}

fn events(blocks: &[Block], end: &End) -> Vec<EventKind> {
    use EventKind as K;
    let mut v = vec![K::RunStarted {
        thread_id: None,
        run_id: None,
        parent_run_id: None,
        message_id: Some("run-msg".into()),
        input: None,
    }];
    for (n, b) in blocks.iter().enumerate() {
        match b {
            Block::Text(deltas, widget) => {
                let id = format!("t{n}");
                v.push(K::TextStart {
                    message_id: id.clone(),
                    role: Role::Assistant,
                    name: None,
                });
                for (i, d) in deltas.iter().enumerate() {
                    v.push(K::TextDelta {
                        message_id: id.clone(),
                        delta: d.clone(),
                    });
                    if let (0, Some((name, blk, data))) = (i, widget) {
                        v.push(K::Data {
                            name: name.clone(),
                            id: blk.clone(),
                            message_id: Some(id.clone()),
                            data: data.clone(),
                            transient: false,
                        });
                    }
                }
                v.push(K::TextEnd { message_id: id });
            }
            Block::Reasoning(deltas) => {
                let id = format!("r{n}");
                v.push(K::ReasoningStart {
                    message_id: id.clone(),
                });
                for d in deltas {
                    v.push(K::ReasoningDelta {
                        message_id: id.clone(),
                        delta: d.clone(),
                    });
                }
                v.push(K::ReasoningEnd { message_id: id });
            }
            Block::Tool(name, args, result) => {
                let id = format!("tc{n}");
                v.push(K::ToolCallStart {
                    tool_call_id: id.clone(),
                    tool_name: name.clone(),
                    parent_message_id: Some("run-msg".into()),
                });
                for a in args {
                    v.push(K::ToolCallArgs {
                        tool_call_id: id.clone(),
                        delta: a.clone(),
                    });
                }
                v.push(K::ToolCallEnd {
                    tool_call_id: id.clone(),
                });
                if let Some(r) = result {
                    v.push(K::ToolCallResult {
                        tool_call_id: id,
                        message_id: Some(format!("res{n}")),
                        content: json!(r),
                    });
                }
            }
            Block::State(s, ops) => {
                v.push(K::StateSnapshot {
                    snapshot: s.clone(),
                });
                v.push(K::StateDelta {
                    patch: Value::Array(ops.clone()),
                });
            }
            Block::Custom(name, value) => v.push(K::Custom {
                name: name.clone(),
                value: value.clone(),
            }),
            Block::Raw(event, source) => v.push(K::Raw {
                event: event.clone(),
                source: source.clone(),
            }),
            Block::Step(name) => {
                v.push(K::StepStarted {
                    name: Some(name.clone()),
                });
                v.push(K::StepFinished {
                    name: Some(name.clone()),
                });
            }
            Block::Collab(from, to, deltas) => {
                let id = format!("c{n}");
                v.push(K::CollabStart {
                    message_id: id.clone(),
                    from: from.clone(),
                    to: to.clone(),
                });
                for d in deltas {
                    v.push(K::CollabContent {
                        message_id: id.clone(),
                        delta: d.clone(),
                    });
                }
                v.push(K::CollabEnd { message_id: id });
            }
            Block::Snapshot(msgs) => v.push(K::MessagesSnapshot {
                messages: msgs
                    .iter()
                    .enumerate()
                    .map(|(i, (role, t))| {
                        Message::text_message(format!("m{n}-{i}"), *role, t.clone())
                    })
                    .collect(),
            }),
        }
    }
    v.push(match end {
        End::Finished(result, interrupt) => K::RunFinished {
            thread_id: None,
            run_id: None,
            message_id: Some("run-msg".into()),
            result: result.clone(),
            outcome: match interrupt {
                None => Outcome::Unspecified,
                Some((reason, message, payload)) => Outcome::Interrupt {
                    interrupts: vec![Interrupt {
                        id: "int-1".into(),
                        reason: reason.clone(),
                        message: message.clone(),
                        tool_call_id: None,
                        payload: payload.clone(),
                        extra: Default::default(),
                    }],
                },
            },
            finish_reason: None,
            usage: None,
        },
        End::Error(message, code) => K::RunError {
            message: message.clone(),
            code: code.clone(),
        },
    });
    v
}

/// Message ids HAI renames (reasoning `<id>:thinking`, text joining the
/// business message of the reasoning before it) become their order of
/// first appearance, per kind of message.
fn normalize(kinds: Vec<EventKind>) -> Vec<EventKind> {
    let mut texts: HashMap<String, String> = HashMap::new();
    let mut reasoning: HashMap<String, String> = HashMap::new();
    let rename = |map: &mut HashMap<String, String>, prefix: &str, id: &mut String| {
        let n = map.len();
        *id = map
            .entry(id.clone())
            .or_insert_with(|| format!("{prefix}{n}"))
            .clone();
    };
    kinds
        .into_iter()
        .map(|mut k| {
            match &mut k {
                EventKind::TextStart { message_id, .. }
                | EventKind::TextDelta { message_id, .. }
                | EventKind::TextEnd { message_id } => rename(&mut texts, "T", message_id),
                EventKind::Data {
                    message_id: Some(message_id),
                    ..
                } => rename(&mut texts, "T", message_id),
                EventKind::ReasoningStart { message_id }
                | EventKind::ReasoningDelta { message_id, .. }
                | EventKind::ReasoningEnd { message_id } => rename(&mut reasoning, "R", message_id),
                _ => {}
            }
            k
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn core_through_hai_and_back(blocks in prop::collection::vec(block(), 0..8), end in end()) {
        let input = events(&blocks, &end);
        let mut enc = HaiEncoder::new(EncodeContext::deterministic());
        let mut bytes = Vec::new();
        for k in &input {
            enc.encode(&Event::new(k.clone()), &mut bytes);
        }
        enc.finish(&mut bytes);
        let mut framer = SseFramer::default();
        let mut frames = Vec::new();
        framer.push(&bytes, &mut frames).unwrap();
        framer.finish(&mut frames).unwrap();
        let mut dec = HaiDecoder::new();
        let mut out = Vec::new();
        for f in &frames {
            dec.decode(f, &mut out).unwrap();
        }
        dec.finish(&mut out).unwrap();
        let got: Vec<EventKind> = out.into_iter().map(|e| e.kind).collect();
        prop_assert_eq!(normalize(got), normalize(input));
    }
}

// ---- proptest: HAI -> core -> HAI ------------------------------------------

fn hai_delta() -> impl Strategy<Value = (Value, Vec<(&'static str, Value)>)> {
    let delta = prop_oneof![
        text().prop_map(Value::String),
        (text(), prop::option::of(json_object())).prop_map(|(t, layout)| {
            let mut d = json!({"output": {"type": "text", "content": t}});
            if let Some(l) = layout {
                d["layout"] = l;
            }
            d
        }),
        (text(), 0..60i64).prop_map(|(t, e)| json!({"output": {"type": "thinking",
                "data": {"content": t, "elapsed": e, "thinking": true, "collapse": true}}})),
        ("[a-z]{1,6}", any::<bool>()).prop_map(|(t, f)| json!({"output": {"type": "fold",
                "data": {"title": t, "fold": f, "position": "start"}}})),
        json_value().prop_map(|d| json!({"output": {"type": "card", "data": d}})),
        json_value().prop_map(|d| json!({"output": {"type": "inline", "v": d}})),
        json_value().prop_filter("not an output", |d| d.get("output").is_none()),
    ];
    let extras =
        (prop::option::of("b-[0-9]"), prop::option::of(json_object())).prop_map(|(b, st)| {
            let mut x = vec![];
            if let Some(b) = b {
                x.push(("blockId", json!(b)));
            }
            if let Some(st) = st {
                x.push(("style", st));
            }
            x
        });
    (delta, extras)
}

/// Frames that may sit inside or between business messages.
fn hai_other(n: usize) -> impl Strategy<Value = Vec<Value>> {
    let tc = format!("tc{n}");
    let c = format!("c{n}");
    prop_oneof![
            (prop::collection::vec(text(), 0..3), any::<bool>(), any::<bool>()).prop_map(move |(args, end, result)| {
                let mut v = vec![json!({"type": "TOOL_CALL_START", "toolCallId": tc, "toolCallName": "f"})];
                v.extend(args.into_iter().map(|a| json!({"type": "TOOL_CALL_ARGS", "toolCallId": tc, "delta": a})));
                if end {
                    v.push(json!({"type": "TOOL_CALL_END", "toolCallId": tc}));
                }
                if result {
                    v.push(json!({"type": "TOOL_CALL_RESULT", "messageId": format!("r-{tc}"),
                                  "toolCallId": tc, "content": "ok", "role": "tool", "timestamp": 5}));
                }
                v
            }),
            (json_value(), any::<bool>()).prop_map(move |(d, start)| {
                let mut v = vec![];
                if start {
                    v.push(json!({"type": "AGENT_COLLABORATIVE_MESSAGE_START", "from": "USER", "to": "Agent",
                                  "messageId": c, "timestamp": 1}));
                }
                v.push(json!({"type": "AGENT_COLLABORATIVE_MESSAGE_CONTENT", "delta": d, "messageId": c}));
                v.push(json!({"type": "AGENT_COLLABORATIVE_MESSAGE_END", "messageId": c}));
                v
            }),
            json_value().prop_map(|v| vec![json!({"type": "STATE_DELTA",
                "delta": [{"op": "add", "path": "/a", "value": v, "from": ""}], "timestamp": 2})]),
            json_value().prop_map(|v| vec![json!({"type": "CUSTOM", "name": "n", "value": v})]),
            Just(vec![json!({"type": "STEP_STARTED", "stepName": "s"}),
                      json!({"type": "STEP_FINISHED", "stepName": "s"})]),
            json_value().prop_map(|x| vec![json!({"type": "FUTURE_EVENT", "x": x})]),
        ]
}

/// One business message: maybe a START, contents with other frames in
/// between, maybe an END (only the last message may lack one: a second
/// message while one is open is outside this adapter's identity).
fn hai_message(n: usize, last: bool) -> impl Strategy<Value = Vec<Value>> {
    let id = format!("m{n}");
    (
            any::<bool>(),
            prop::option::of(Just(1767225600000i64)),
            prop::collection::vec((hai_delta(), prop::option::of(hai_other(n))), 0..5),
            prop::bool::weighted(if last { 0.5 } else { 1.0 }),
        )
            .prop_map(move |(start, ts, contents, end)| {
                let mut v = vec![];
                if start {
                    let mut s = json!({"type": "BUSINESS_DATA_START", "messageId": id, "role": "assistant"});
                    if let Some(t) = ts {
                        s["timestamp"] = json!(t);
                    }
                    v.push(s);
                }
                for ((delta, extras), other) in contents {
                    let mut c = json!({"type": "BUSINESS_DATA_CONTENT", "messageId": id, "delta": delta});
                    for (k, x) in extras {
                        c[k] = x;
                    }
                    v.push(c);
                    v.extend(other.unwrap_or_default());
                }
                if end {
                    v.push(json!({"type": "BUSINESS_DATA_END", "messageId": id, "role": "assistant", "timestamp": 9}));
                }
                v
            })
}

fn hai_run() -> impl Strategy<Value = Vec<Value>> {
    (1..4usize)
            .prop_flat_map(|k| {
                let items: Vec<_> = (0..k)
                    .map(|n| {
                        prop_oneof![hai_message(n, n + 1 == k), hai_other(n)].boxed()
                    })
                    .collect();
                (items, 0..3u8)
            })
            .prop_map(|(items, end)| {
                let mut v = vec![json!({"type": "RUN_STARTED", "messageId": "run", "role": "assistant", "timestamp": 0})];
                v.extend(items.into_iter().flatten());
                unique_ids(&mut v);
                match end {
                    0 => v.push(json!({"type": "RUN_FINISHED", "messageId": "run", "role": "assistant", "timestamp": 10})),
                    1 => v.push(json!({"type": "RUN_ERROR", "message": "boom", "code": "E"})),
                    _ => {} // cut
                }
                v
            })
}

/// Each tool call and collaboration message gets its own id (a HAI agent
/// never starts an id that is still open).
fn unique_ids(frames: &mut [Value]) {
    let mut n = 0;
    let mut calls: HashMap<String, String> = HashMap::new();
    let mut collabs: HashMap<String, String> = HashMap::new();
    for f in frames.iter_mut() {
        let ty = f["type"].as_str().unwrap_or_default().to_string();
        if let Some(old) = f["toolCallId"].as_str().map(str::to_string) {
            if ty == "TOOL_CALL_START" {
                n += 1;
                calls.insert(old.clone(), format!("tc-{n}"));
            }
            if let Some(new) = calls.get(&old) {
                f["toolCallId"] = json!(new);
            }
        }
        if ty.starts_with("AGENT_COLLABORATIVE") {
            let old = f["messageId"].as_str().unwrap_or_default().to_string();
            if ty.ends_with("_START") || !collabs.contains_key(&old) {
                n += 1;
                collabs.insert(old.clone(), format!("c-{n}"));
            }
            f["messageId"] = json!(collabs[&old]);
            if ty.ends_with("_END") {
                collabs.remove(&old);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn hai_streams_come_back_unchanged(frames in hai_run()) {
        let mut input = Vec::new();
        for f in &frames {
            babelgate_core::Sink::appending(&mut input, babelgate_core::Framing::Sse, |s| s.json(f));
        }
        let got = payloads(&hai_to_hai(&input, usize::MAX));
        let cut = !matches!(frames.last().and_then(|f| f["type"].as_str()), Some("RUN_FINISHED" | "RUN_ERROR"));
        if cut {
            prop_assert!(got.len() > frames.len());
            prop_assert_eq!(&got[..frames.len()], &frames[..]);
            prop_assert_eq!(got.last().unwrap()["type"].as_str(), Some("RUN_FINISHED"));
        } else {
            prop_assert_eq!(got, frames);
        }
    }
}
