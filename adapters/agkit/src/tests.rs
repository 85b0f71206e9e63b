//! Whole-stream tests: identity on the fixtures, and a property round trip.
use super::*;
use babelgate_core::event::SourceKind;
use babelgate_core::testing::{decode_sse, encode_events, sse_payloads as data_values};
use babelgate_core::{
    Dialect, EncodeContext, Event, EventKind, Extra, Interrupt, Outcome, SseFramer,
};
use proptest::prelude::*;
use serde_json::{json, Value};

fn decode(bytes: &[u8]) -> Vec<Event> {
    decode_sse(&mut AgKitDecoder::new(), bytes)
}

fn encode(events: &[Event]) -> Vec<u8> {
    // Extension frames on: babelgate to babelgate keeps what AG-Kit cannot say.
    let mut e = AgKitEncoder::new(EncodeContext::deterministic()).with_extensions(true);
    encode_events(&mut e, events)
}

fn fixtures() -> Vec<(String, Vec<u8>)> {
    babelgate_core::testing::fixtures("agkit")
}

#[test]
fn fixtures_translate_to_themselves() {
    for (name, bytes) in fixtures() {
        let events = decode(&bytes);
        let output = encode(&events);
        let mut want = data_values(&bytes);
        let mut want_bytes = bytes.clone();
        let failed = want.iter().any(|v| v["type"] == "error");
        if failed {
            // A failed run: the error frame and no `[DONE]` (the legacy
            // client would take `[DONE]` for success), where the server
            // sends both.
            if want.last() == Some(&json!("[DONE]")) {
                want.pop();
                want_bytes.truncate(want_bytes.len() - b"data: [DONE]\n\n".len());
            }
        } else if want.last() != Some(&json!("[DONE]")) {
            // A cut stream comes back finished: `finish` writes the end marker.
            want.push(json!("[DONE]"));
            want_bytes.extend_from_slice(b"data: [DONE]\n\n");
        }
        assert_eq!(data_values(&output), want, "fixture {name}");
        // the same bytes, even: the server writes compact JSON in our order
        assert_eq!(
            String::from_utf8_lossy(&output),
            String::from_utf8_lossy(&want_bytes),
            "fixture {name}"
        );
        // and the output reads back as the same events (plus the end)
        // (a cut one also ends what was open and the run)
        let again = decode(&output);
        assert_eq!(again[..events.len()], events[..], "fixture {name}");
        for e in &again[events.len()..] {
            assert!(
                matches!(
                    e.kind,
                    EventKind::TextEnd { .. } | EventKind::RunFinished { .. }
                ),
                "fixture {name}: {e:?}"
            );
        }
    }
}

fn kinds_of(name: &str) -> Vec<EventKind> {
    let (_, bytes) = fixtures()
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("fixture {name}"));
    decode(&bytes).into_iter().map(|e| e.kind).collect()
}

#[test]
fn fixtures_decode_to_what_they_mean() {
    let chat = kinds_of("chat");
    let text: String = chat
        .iter()
        .filter_map(|k| match k {
            EventKind::TextDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert!(text.contains("你好，世界") && text.contains("🎉👍🏽"));
    assert!(text.contains("\"double quotes\"") && text.contains('\\'));
    assert!(text.contains('\n') && text.contains('\u{2028}'));
    assert!(matches!(
        chat.last(),
        Some(EventKind::RunFinished {
            outcome: Outcome::Unspecified,
            ..
        })
    ));

    let hitl = kinds_of("hitl_confirm");
    let Some(EventKind::RunFinished {
        outcome: Outcome::Interrupt { interrupts },
        ..
    }) = hitl.last()
    else {
        panic!("{hitl:?}")
    };
    assert_eq!(interrupts[0].id, "interrupt_confirm_1");
    assert_eq!(
        interrupts[0].payload.as_ref().unwrap()["toolCallId"],
        "call_confirm_1"
    );

    let cut = kinds_of("cut_mid_message");
    assert!(
        matches!(cut.last(), Some(EventKind::TextDelta { .. })),
        "{cut:?}"
    );

    let err = kinds_of("run_error");
    assert!(matches!(
        &err[err.len() - 2..],
        [EventKind::TextEnd { .. }, EventKind::RunError { .. }]
    ));

    let unknown = kinds_of("unknown_events");
    assert!(unknown.contains(&EventKind::Unknown {
        raw: json!("keep-alive")
    }));
    assert!(unknown
        .iter()
        .any(|k| matches!(k, EventKind::Custom { name, .. } if name == "progress")));
    assert!(unknown.iter().any(|k| matches!(k, EventKind::Raw { .. })));
}

fn translator() -> babelgate_core::Translator {
    babelgate_core::Translator::new(
        SseFramer::default(),
        Box::new(AgKitDecoder::new()),
        Box::new(AgKitEncoder::new(EncodeContext::deterministic()).with_extensions(true)),
    )
}

/// The translator of a same-dialect route, as the gateway builds it.
fn same_dialect() -> babelgate_core::Translator {
    babelgate_core::Translator::same_dialect(
        SseFramer::default(),
        Box::new(AgKitDecoder::new()),
        Box::new(AgKitEncoder::new(EncodeContext::deterministic())),
    )
}

/// A same-dialect route (frames as received): a frame after interrupts
/// ends their run first, so the stream ends there with `[DONE]`, as on
/// every route; that frame and what follows are not passed on. Written
/// as received, the run's end went out as nothing, the upstream's own
/// `[DONE]` then found the run over, and the client got no `[DONE]`.
#[test]
fn a_same_dialect_frame_after_interrupts_ends_the_stream_there() {
    let through = |input: &str| {
        let mut t = same_dialect();
        let mut out = Vec::new();
        t.push(input.as_bytes(), &mut out).unwrap();
        t.finish(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    };
    let head = "data: {\"type\":\"tool-call-start\",\"toolCallId\":\"c\",\"toolCallName\":\"n\"}\n\n\
                    data: {\"type\":\"tool-call-end\",\"toolCallId\":\"c\"}\n\n\
                    data: {\"type\":\"interrupt\",\"id\":\"a\",\"reason\":\"r\",\"payload\":{}}\n\n";
    // As the server sends it: unchanged.
    let own = format!("{head}data: [DONE]\n\n");
    assert_eq!(through(&own), own);
    let late = format!(
        "{head}data: {{\"type\":\"tool-call-end\",\"toolCallId\":\"c\"}}\n\n\
             data: {{\"type\":\"text\",\"content\":\"late\"}}\n\n\
             data: [DONE]\n\n"
    );
    assert_eq!(through(&late), own);
    // A malformed frame there: the run ended before its fault.
    let mut t = same_dialect();
    let mut out = Vec::new();
    let bad = format!("{head}data: {{\"type\":\"tool-call-end\"}}\n\ndata: [DONE]\n\n");
    assert!(t.push(bad.as_bytes(), &mut out).is_err());
    t.finish(&mut out).ok();
    assert_eq!(String::from_utf8(out).unwrap(), own);
}

/// A same-dialect route: an upstream `error` frame ends the run (no
/// `[DONE]`, the body breaks off), so a frame the upstream sends after
/// it is dropped, as on every route. Passed as received, it reached a
/// client whose stream had ended in an error, and the stream ended on
/// it (fuzz decode_agkit).
#[test]
fn a_same_dialect_frame_after_an_error_is_not_passed() {
    let error = "data: {\"type\":\"error\",\"error\":\"boom\"}\n\n";
    let input = format!(
        "data: {{\"type\":\"text\",\"content\":\"a\"}}\n\n{error}\
             data: {{\"type\":\"text\",\"content\":\"late\"}}\n\n"
    );
    let mut t = same_dialect();
    let mut out = Vec::new();
    t.push(input.as_bytes(), &mut out).unwrap();
    t.finish(&mut out).unwrap();
    let want = format!("data: {{\"type\":\"text\",\"content\":\"a\"}}\n\n{error}");
    assert_eq!(String::from_utf8(out).unwrap(), want);
    assert!(t.encoder().aborts(), "the body must break off");
}

#[test]
fn chunking_does_not_change_the_output() {
    let (_, bytes) = fixtures().into_iter().find(|(n, _)| n == "chat").unwrap();
    let whole = encode(&decode(&bytes));
    for cut in 0..=bytes.len() {
        let mut t = translator();
        let mut out = Vec::new();
        t.push(&bytes[..cut], &mut out).unwrap();
        t.push(&bytes[cut..], &mut out).unwrap();
        t.finish(&mut out).unwrap();
        assert_eq!(out, whole, "cut at {cut}");
    }
}

#[test]
fn a_malformed_upstream_ends_with_an_error_frame() {
    let mut t = translator();
    let mut out = Vec::new();
    let input =
        b"data: {\"type\":\"tool-call-start\",\"toolCallId\":\"c\",\"toolCallName\":\"f\"}\n\n\
                      data: {\"type\":\"tool-call-args\"}\n\n\
                      data: {\"type\":\"text\",\"content\":\"never\"}\n\n";
    let err = t.push(input, &mut out).unwrap_err();
    assert_eq!(err.line(), 3);
    t.finish(&mut out).unwrap();
    let got = data_values(&out);
    // the call never got whole arguments: it is left open, not ended
    assert_eq!(got[1]["type"], "error");
    assert_eq!(got[1]["code"], "upstream_malformed");
    assert!(got[1]["error"]
        .as_str()
        .unwrap()
        .contains("tool-call-args: missing or invalid field `toolCallId`"));
    assert_eq!(got.len(), 2, "no [DONE] after the error: {got:?}");
    assert!(t.encoder().aborts(), "the body must break off");
}

/// Streams other dialects could hand the encoder, written to
/// `$AGKIT_CLIENT_CHECK_DIR`, which tests/run.sh sets and then feeds to
/// the real `useChat` loop (`tests/node/validate-agkit.mjs --dump`);
/// nothing happens without the variable.
#[test]
fn dump_streams_for_the_client_check() {
    let Some(dir) = std::env::var_os("AGKIT_CLIENT_CHECK_DIR") else {
        return;
    };
    let k = |kind: EventKind| Event::new(kind);
    let start = |id: &str, name: &str| {
        k(EventKind::ToolCallStart {
            tool_call_id: id.into(),
            tool_name: name.into(),
            parent_message_id: None,
        })
    };
    let args = |id: &str, d: &str| {
        k(EventKind::ToolCallArgs {
            tool_call_id: id.into(),
            delta: d.into(),
        })
    };
    let end = |id: &str| {
        k(EventKind::ToolCallEnd {
            tool_call_id: id.into(),
        })
    };
    let result = |id: &str, v: Value| {
        k(EventKind::ToolCallResult {
            tool_call_id: id.into(),
            message_id: None,
            content: v,
        })
    };
    let delta = |d: &str| k(EventKind::text_delta("m", d));
    let done = k(EventKind::run_finished(Outcome::Unspecified));
    let streams: Vec<(&str, Vec<Event>)> = vec![
        (
            "result_while_another_call_streams",
            vec![
                delta("Looking up."),
                start("a", "get_weather"),
                start("b", "change_background"),
                args("a", "{\"city\":\"Paris\"}"),
                end("a"),
                result("a", json!({"temperature": 18})),
                args("b", "{\"color\":"),
                args("b", "\"#ff0000\"}"),
                end("b"),
                delta("Done."),
                done.clone(),
            ],
        ),
        (
            "orphans",
            vec![
                args("lost", "{}"),
                end("never-started"),
                result("from-an-earlier-response", json!("ok")),
                delta("text after"),
                done.clone(),
            ],
        ),
        (
            "error_mid_call",
            vec![
                start("c", "change_background"),
                args("c", "{\"color\":\"#ff"),
                k(EventKind::RunError {
                    message: "upstream timed out".into(),
                    code: Some("timeout".into()),
                }),
            ],
        ),
        (
            "text_tool_text_tool",
            vec![
                delta("one"),
                start("x", "get_weather"),
                end("x"),
                result("x", json!("sunny")),
                delta("two"),
                start("y", "get_time"),
                args("y", "{}"),
                end("y"),
                k(EventKind::ToolCallError {
                    tool_call_id: "y".into(),
                    error: "no clock".into(),
                    input_invalid: false,
                }),
                done.clone(),
            ],
        ),
        (
            "everything_else",
            vec![
                k(EventKind::ReasoningDelta {
                    message_id: "r".into(),
                    delta: "thinking".into(),
                }),
                k(EventKind::StateSnapshot {
                    snapshot: json!({"a": 1}),
                }),
                k(EventKind::StateDelta {
                    patch: json!([{"op": "add", "path": "/b", "value": 2}]),
                }),
                k(EventKind::Custom {
                    name: "n".into(),
                    value: json!(1),
                }),
                k(EventKind::Data {
                    name: "chart".into(),
                    id: None,
                    message_id: None,
                    data: json!([1, 2]),
                    transient: false,
                }),
                k(EventKind::Unknown {
                    raw: json!({"type": "X"}),
                })
                .with_origin(Dialect::AgUi),
                delta("visible"),
                start("ap", "delete_file"),
                args("ap", "{}"),
                end("ap"),
                k(EventKind::run_finished(Outcome::Interrupt {
                    interrupts: vec![Interrupt {
                        id: "approval-1".into(),
                        reason: "tool_approval".into(),
                        message: Some("Delete it?".into()),
                        tool_call_id: Some("ap".into()),
                        payload: None,
                        extra: Extra::new(),
                    }],
                })),
            ],
        ),
    ];
    std::fs::create_dir_all(&dir).unwrap();
    for (name, events) in streams {
        let path = std::path::Path::new(&dir).join(format!("{name}.sse"));
        // through the shape stage, as another dialect's stream comes
        let shaped = babelgate_core::shape::Shaper::shape_all(&events);
        std::fs::write(path, encode(&shaped)).unwrap();
    }
}

// ---- property: core events AG-Kit can carry survive a round trip -------

/// One thing a stream says, in the canonical form the decoder produces.
#[derive(Debug, Clone)]
enum Step {
    Text(Vec<String>),
    Reasoning(Vec<String>),
    /// Two calls whose argument deltas interleave; the second may be absent.
    Calls(String, Vec<String>, Option<(String, Vec<String>)>),
    Result(String),
    Custom(String, Value),
    State(Value),
    Delta(Value),
    Steps(Option<String>),
    Data(String, Option<String>, Value, bool),
    Source(String, Option<String>),
    OwnUnknown(String, Value),
    ForeignUnknown(Value),
}

/// id, reason, payload (a tool call id or message would be folded into
/// an absent payload: not a round trip)
type InterruptSpec = (String, String, Option<Value>);

#[derive(Debug, Clone)]
enum End {
    Finished,
    Interrupts(Vec<InterruptSpec>),
    Error(String, Option<String>),
    Cut,
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn deltas() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(any::<String>(), 1..4)
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        deltas().prop_map(Step::Text),
        deltas().prop_map(Step::Reasoning),
        (
            any::<String>(),
            prop::collection::vec(any::<String>(), 0..4),
            prop::option::of((
                any::<String>(),
                prop::collection::vec(any::<String>(), 0..4)
            ))
        )
            .prop_map(|(n, a, b)| Step::Calls(n, a, b)),
        any::<String>().prop_map(Step::Result),
        (any::<String>(), json_value()).prop_map(|(n, v)| Step::Custom(n, v)),
        json_value().prop_map(Step::State),
        json_value().prop_map(Step::Delta),
        prop::option::of(any::<String>()).prop_map(Step::Steps),
        (
            any::<String>(),
            prop::option::of(any::<String>()),
            json_value(),
            any::<bool>()
        )
            .prop_map(|(n, i, d, t)| Step::Data(n, i, d, t)),
        (any::<String>(), prop::option::of(any::<String>())).prop_map(|(i, u)| Step::Source(i, u)),
        ("[a-z]{1,8}", json_value()).prop_map(|(t, v)| Step::OwnUnknown(t, v)),
        json_value().prop_map(Step::ForeignUnknown),
    ]
}

fn end() -> impl Strategy<Value = End> {
    let interrupt = (
        "[a-z0-9_]{1,12}",
        any::<String>(),
        prop::option::of(json_value().prop_filter("null reads back as none", |v| !v.is_null())),
    );
    prop_oneof![
        Just(End::Finished),
        prop::collection::vec(interrupt, 1..3).prop_map(End::Interrupts),
        (any::<String>(), prop::option::of(any::<String>())).prop_map(|(m, c)| End::Error(m, c)),
        Just(End::Cut),
    ]
}

fn ev(kind: EventKind) -> Event {
    Event::new(kind).with_origin(Dialect::AgKit)
}

/// The events a stream of `steps` decodes to, ids minted the decoder's way.
fn expected(steps: &[Step], end: &End) -> Vec<Event> {
    let mut out = Vec::new();
    let (mut texts, mut reasonings, mut calls) = (0, 0, 0);
    let mut last_call = String::from("none");
    let mut prev_kind: Option<u8> = None;
    for s in steps {
        match s {
            Step::Text(ds) => {
                // adjacent text runs are one message on the wire
                if prev_kind == Some(0) {
                    out.pop();
                } else {
                    texts += 1;
                    out.push(ev(EventKind::TextStart {
                        message_id: format!("agkit-text-{texts}"),
                        role: Default::default(),
                        name: None,
                    }));
                }
                let id = format!("agkit-text-{texts}");
                for d in ds {
                    out.push(ev(EventKind::text_delta(id.clone(), d.clone())));
                }
                out.push(ev(EventKind::text_end(id)));
            }
            Step::Reasoning(ds) => {
                if prev_kind == Some(1) {
                    out.pop();
                } else {
                    reasonings += 1;
                    out.push(ev(EventKind::ReasoningStart {
                        message_id: format!("agkit-reasoning-{reasonings}"),
                    }));
                }
                let id = format!("agkit-reasoning-{reasonings}");
                for d in ds {
                    out.push(ev(EventKind::ReasoningDelta {
                        message_id: id.clone(),
                        delta: d.clone(),
                    }));
                }
                out.push(ev(EventKind::ReasoningEnd { message_id: id }));
            }
            Step::Calls(name_a, args_a, b) => {
                calls += 1;
                let a = format!("call-{calls}");
                let b = b.as_ref().map(|(n, args)| {
                    calls += 1;
                    (format!("call-{calls}"), n.clone(), args.clone())
                });
                out.push(ev(EventKind::ToolCallStart {
                    tool_call_id: a.clone(),
                    tool_name: name_a.clone(),
                    parent_message_id: None,
                }));
                if let Some((id, name, _)) = &b {
                    out.push(ev(EventKind::ToolCallStart {
                        tool_call_id: id.clone(),
                        tool_name: name.clone(),
                        parent_message_id: None,
                    }));
                }
                let empty = Vec::new();
                let args_b = b.as_ref().map(|(_, _, a)| a).unwrap_or(&empty);
                for i in 0..args_a.len().max(args_b.len()) {
                    if let Some(d) = args_a.get(i) {
                        out.push(ev(EventKind::ToolCallArgs {
                            tool_call_id: a.clone(),
                            delta: d.clone(),
                        }));
                    }
                    if let (Some(d), Some((id, _, _))) = (args_b.get(i), &b) {
                        out.push(ev(EventKind::ToolCallArgs {
                            tool_call_id: id.clone(),
                            delta: d.clone(),
                        }));
                    }
                }
                out.push(ev(EventKind::ToolCallEnd {
                    tool_call_id: a.clone(),
                }));
                last_call = a;
                if let Some((id, _, _)) = b {
                    out.push(ev(EventKind::ToolCallEnd {
                        tool_call_id: id.clone(),
                    }));
                    last_call = id;
                }
            }
            Step::Result(r) => out.push(ev(EventKind::ToolCallResult {
                tool_call_id: last_call.clone(),
                message_id: None,
                content: Value::String(r.clone()),
            })),
            Step::Custom(name, value) => out.push(ev(EventKind::Custom {
                name: name.clone(),
                value: value.clone(),
            })),
            Step::State(v) => out.push(ev(EventKind::StateSnapshot {
                snapshot: v.clone(),
            })),
            Step::Delta(v) => out.push(ev(EventKind::StateDelta { patch: v.clone() })),
            Step::Steps(name) => {
                out.push(ev(EventKind::StepStarted { name: name.clone() }));
                out.push(ev(EventKind::StepFinished { name: name.clone() }));
            }
            Step::Data(name, id, data, transient) => out.push(ev(EventKind::Data {
                name: name.clone(),
                id: id.clone(),
                message_id: None,
                data: data.clone(),
                transient: *transient,
            })),
            Step::Source(id, url) => out.push(ev(EventKind::Source {
                source_kind: SourceKind::Url,
                source_id: id.clone(),
                url: url.clone(),
                title: None,
                media_type: None,
                filename: None,
            })),
            Step::OwnUnknown(ty, v) => out.push(ev(EventKind::Unknown {
                raw: json!({"type": format!("x-{ty}"), "v": v}),
            })),
            Step::ForeignUnknown(v) => out
                .push(Event::new(EventKind::Unknown { raw: v.clone() }).with_origin(Dialect::AgUi)),
        }
        prev_kind = match s {
            Step::Text(_) => Some(0),
            Step::Reasoning(_) => Some(1),
            _ => None,
        };
    }
    out.push(ev(match end {
        End::Finished | End::Cut => EventKind::run_finished(Outcome::Unspecified),
        End::Interrupts(list) => EventKind::run_finished(Outcome::Interrupt {
            interrupts: list
                .iter()
                .map(|(id, reason, payload)| Interrupt {
                    id: id.clone(),
                    reason: reason.clone(),
                    message: None,
                    tool_call_id: None,
                    payload: payload.clone(),
                    extra: Extra::new(),
                })
                .collect(),
        }),
        End::Error(message, code) => EventKind::RunError {
            message: message.clone(),
            code: code.clone(),
        },
    }));
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn what_agkit_can_carry_round_trips(
        steps in prop::collection::vec(step(), 0..10),
        end in end(),
    ) {
        let want = expected(&steps, &end);
        // A cut stream has no terminal event: the encoder's finish ends it.
        let input: Vec<Event> = match end {
            End::Cut => want[..want.len() - 1].to_vec(),
            _ => want.clone(),
        };
        let bytes = encode(&input);
        let got = decode(&bytes);
        prop_assert_eq!(got, want);
    }
}
