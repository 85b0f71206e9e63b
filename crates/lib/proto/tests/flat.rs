//! The fast path for flat events (`babelgate_proto::flat`) against the
//! general codec, which the reference corpus holds to @ag-ui/proto: the same
//! bytes out, the same JSON back, and nothing read in place that the general
//! decoder would read otherwise (or refuse).

use babelgate_proto::{
    decode_event, decode_event_general, encode_event, encode_event_general, flat,
};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

/// Every flat type with the fields its message has (read from the general
/// decoder's output for an empty message, which lays out the plain ones).
const FLAT: &[(&str, &[&str])] = &[
    (
        "TEXT_MESSAGE_START",
        &["messageId", "role", "name", "subagentRunId"],
    ),
    (
        "TEXT_MESSAGE_CONTENT",
        &["messageId", "delta", "subagentRunId"],
    ),
    ("TEXT_MESSAGE_END", &["messageId", "subagentRunId"]),
    (
        "TOOL_CALL_START",
        &[
            "toolCallId",
            "toolCallName",
            "parentMessageId",
            "subagentRunId",
        ],
    ),
    ("TOOL_CALL_ARGS", &["toolCallId", "delta", "subagentRunId"]),
    ("TOOL_CALL_END", &["toolCallId", "subagentRunId"]),
    (
        "REASONING_MESSAGE_CONTENT",
        &["messageId", "delta", "subagentRunId"],
    ),
];

#[test]
fn the_hot_events_are_flat_and_the_others_not() {
    for (t, _) in FLAT {
        assert!(flat::is_flat(t), "{t}");
    }
    for t in [
        "RUN_STARTED",
        "RUN_FINISHED",
        "STATE_DELTA",
        "CUSTOM",
        "MESSAGES_SNAPSHOT",
        "NOPE",
    ] {
        assert!(!flat::is_flat(t), "{t}");
    }
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z]{1,6}",
        any::<String>(),
        Just("h\u{e9}llo \u{2028} \u{1f600} \"q\" \\".to_string()),
    ]
}

/// A JSON event of a flat type: some of its fields, maybe a timestamp, and
/// now and then something that makes it not flat (a number, a null, an
/// unknown key, rawEvent, metadata).
fn event() -> impl Strategy<Value = Value> {
    (
        0..FLAT.len(),
        proptest::collection::vec((any::<bool>(), text()), 5),
        prop_oneof![
            Just(None),
            any::<i64>().prop_map(Some),
            (0i64..1 << 53).prop_map(Some)
        ],
        0..12u8,
    )
        .prop_map(|(i, fields, timestamp, spoil)| {
            let (ty, names) = FLAT[i];
            let mut o = Map::new();
            o.insert("type".into(), ty.into());
            for (name, (present, v)) in names.iter().zip(fields) {
                if present {
                    o.insert((*name).into(), v.into());
                }
            }
            if let Some(t) = timestamp {
                o.insert("timestamp".into(), t.into());
            }
            match spoil {
                0 => drop(o.insert("rawEvent".into(), json!({"a": 1}))),
                1 => drop(o.insert("metadata".into(), json!({"k": "v"}))),
                2 => drop(o.insert("unknownField".into(), "x".into())),
                3 => drop(o.insert(names[0].into(), Value::Null)),
                4 => drop(o.insert(names[0].into(), 7.into())),
                5 => drop(o.insert("timestamp".into(), 1.5.into())),
                _ => {}
            }
            Value::Object(o)
        })
}

/// A JSON value for a patch, now and then one the codec refuses (too deep).
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec(("[a-z0-9]{0,3}", inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// STATE_DELTA events, with some that leave the plain form (an unknown op,
/// a key the operation lacks, a subagent tag).
fn state_delta() -> impl Strategy<Value = Value> {
    let op = (
        prop_oneof![
            Just("add"),
            Just("remove"),
            Just("replace"),
            Just("move"),
            Just("copy"),
            Just("test"),
            Just("frob")
        ],
        prop::option::of(text()),
        prop::option::of(text()),
        prop::option::of(json_value()),
        0..10u8,
    )
        .prop_map(|(op, path, from, value, spoil)| {
            let mut o = Map::new();
            o.insert("op".into(), op.into());
            if let Some(p) = path {
                o.insert("path".into(), p.into());
            }
            if let Some(f) = from {
                o.insert("from".into(), f.into());
            }
            if let Some(v) = value {
                o.insert("value".into(), v);
            }
            if spoil == 0 {
                o.insert("extra".into(), 1.into());
            }
            Value::Object(o)
        });
    (
        proptest::collection::vec(op, 0..4),
        prop::option::of(0i64..1 << 53),
        0..12u8,
    )
        .prop_map(|(ops, ts, spoil)| {
            let mut o = Map::new();
            o.insert("type".into(), "STATE_DELTA".into());
            o.insert("delta".into(), Value::Array(ops));
            if let Some(t) = ts {
                o.insert("timestamp".into(), t.into());
            }
            if spoil == 0 {
                o.insert("subagentRunId".into(), "s".into());
            }
            Value::Object(o)
        })
}

/// A dialect's own event (HAI's), carried as a `hai:` CUSTOM event.
fn own_event() -> impl Strategy<Value = Value> {
    (
        prop_oneof![
            Just("BUSINESS_DATA_CONTENT"),
            Just("AGENT_COLLABORATIVE_MESSAGE_START"),
            Just("X")
        ],
        proptest::collection::vec(
            (
                prop_oneof![
                    "[a-z]{1,8}",
                    Just("0".to_string()),
                    Just("12".to_string()),
                    Just(String::new())
                ],
                json_value(),
            ),
            0..5,
        ),
        prop_oneof![
            Just(None),
            (0i64..1 << 53).prop_map(|t| Some(Value::from(t))),
            Just(Some(json!(1.5)))
        ],
    )
        .prop_map(|(ty, fields, ts)| {
            let mut o = Map::new();
            o.insert("type".into(), ty.into());
            for (k, v) in fields {
                o.insert(k, v);
            }
            if let Some(t) = ts {
                o.insert("timestamp".into(), t);
            }
            Value::Object(o)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn own_events_as_the_general_codec_does(ev in own_event()) {
        let general = babelgate_proto::encode_event_as_general(&ev, Some("hai"));
        prop_assert_eq!(babelgate_proto::encode_event_as(&ev, Some("hai")), general.clone());
        let Ok(bytes) = general else { return Ok(()) };
        let back = babelgate_proto::restore(decode_event_general(&bytes).unwrap(), "hai");
        if let Some(fast) = flat::custom::read(&bytes, "hai") {
            prop_assert_eq!(serde_json::to_string(&fast).unwrap(), serde_json::to_string(&back).unwrap());
        }
        prop_assert_eq!(babelgate_proto::decode_event_as(&bytes, Some("hai")).unwrap(), back);
    }

    /// CUSTOM events as any AG-UI producer may write them: a name that is
    /// or is not the dialect's, a value that may hold `type` and
    /// `timestamp` keys or be no object; read as the dialect's events (or
    /// left as CUSTOM) the same way with the fast path as without.
    #[test]
    fn custom_events_read_as_the_general_decoder(
        name in prop_oneof![Just("hai:BUSINESS_DATA_CONTENT"), Just("hai:"), Just("other:X"), Just("hai"), Just("")],
        keys in proptest::collection::vec((prop_oneof![Just("type"), Just("timestamp"), Just("a"), Just("")], json_value()), 0..4),
        object in any::<bool>(),
        ts in prop::option::of(0i64..1 << 53),
    ) {
        let value = if object {
            Value::Object(keys.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
        } else {
            json!("text")
        };
        let mut ev = json!({"type": "CUSTOM", "name": name, "value": value});
        if let Some(t) = ts {
            ev["timestamp"] = t.into();
        }
        let bytes = encode_event_general(&ev).unwrap();
        let want = decode_event_general(&bytes).map(|v| babelgate_proto::restore(v, "hai"));
        let got = babelgate_proto::decode_event_as(&bytes, Some("hai"));
        prop_assert_eq!(got.as_ref().map(|v| v.to_string()), want.as_ref().map(|v| v.to_string()));
    }

    #[test]
    fn damaged_own_events(ev in own_event(), at in any::<prop::sample::Index>(), b in any::<u8>()) {
        let Ok(mut bytes) = babelgate_proto::encode_event_as_general(&ev, Some("hai")) else { return Ok(()) };
        let i = at.index(bytes.len());
        bytes[i] = b;
        if let Some(fast) = flat::custom::read(&bytes, "hai") {
            prop_assert_eq!(Ok(fast), decode_event_general(&bytes).map(|v| babelgate_proto::restore(v, "hai")));
        }
    }

    #[test]
    fn state_delta_as_the_general_codec_does(ev in state_delta()) {
        prop_assert_eq!(encode_event(&ev), encode_event_general(&ev));
        let Ok(bytes) = encode_event_general(&ev) else { return Ok(()) };
        let general = decode_event_general(&bytes);
        if let Some((ops, ts)) = flat::state_delta::read(&bytes) {
            let fast = flat::state_delta::to_json(ops, ts);
            prop_assert_eq!(serde_json::to_string(&fast).unwrap(), serde_json::to_string(&general.clone().unwrap()).unwrap());
        }
        prop_assert_eq!(decode_event(&bytes), general);
    }

    #[test]
    fn damaged_state_deltas(ev in state_delta(), at in any::<prop::sample::Index>(), b in any::<u8>()) {
        let Ok(mut bytes) = encode_event_general(&ev) else { return Ok(()) };
        let i = at.index(bytes.len());
        bytes[i] = b;
        if let Some((ops, ts)) = flat::state_delta::read(&bytes) {
            prop_assert_eq!(Ok(flat::state_delta::to_json(ops, ts)), decode_event_general(&bytes));
        }
    }

    /// From the JSON text, as a binary client's stream is written: the
    /// framed bytes of the general codec, with and without a dialect's
    /// prefix, whenever it takes the text; nothing written when it does not;
    /// and taken for every flat event (a repeated key and text that is not
    /// one object aside).
    #[test]
    fn flat_json_text_as_the_general_codec_does(ev in event(), shape in 0..6u8) {
        let compact = serde_json::to_string(&ev).unwrap();
        let obj = ev.as_object().unwrap();
        let first = obj.iter().next().map(|(k, v)| (k.clone(), v.clone())).unwrap();
        let text = match shape {
            // Spaces and escapes the encoders never write, but JSON allows.
            0 => serde_json::to_string_pretty(&ev).unwrap(),
            1 => compact.replace("e", "\\u0065"),
            // The first key again, with another value, and with the same.
            2 => format!("{},\"{}\":\"x\"}}", compact.trim_end_matches('}'), first.0),
            3 => format!("{},\"{}\":{}}}", compact.trim_end_matches('}'), first.0, first.1),
            4 => format!("{compact} x"),
            _ => compact,
        };
        let parsed: Option<Value> = serde_json::from_str(&text).ok();
        let mut out = vec![9u8];
        let took = babelgate_proto::write_flat_event_json(&mut out, &text);
        for prefix in [None, Some("hai")] {
            let general = parsed.as_ref().map(|v| babelgate_proto::encode_event_as(v, prefix));
            if took {
                let bytes = general.clone().unwrap().unwrap();
                prop_assert_eq!(&out[1..], &bytes[..], "{}", text);
            } else {
                prop_assert_eq!(&out, &vec![9u8], "{}", text);
            }
        }
        let names = FLAT.iter().find(|(t, _)| obj["type"] == *t).unwrap().1;
        let flat_object = obj.iter().all(|(k, v)| match k.as_str() {
            "type" => true,
            "timestamp" => v.as_i64().is_some_and(|t| t.unsigned_abs() < 1 << 53),
            k => names.contains(&k) && v.is_string(),
        });
        if flat_object && matches!(shape, 0 | 1 | 5) {
            prop_assert!(took, "a flat event went the general way: {}", text);
        }
    }

    #[test]
    fn encodes_as_the_general_codec_does(ev in event()) {
        prop_assert_eq!(encode_event(&ev), encode_event_general(&ev));
        let mut written = Vec::new();
        let r = babelgate_proto::write_object(&mut written, ev.as_object().unwrap().clone(), None);
        match encode_event_general(&ev) {
            Ok(bytes) => {
                prop_assert!(r.is_ok());
                prop_assert_eq!(&written[..], &bytes[..]);
            }
            Err(_) => prop_assert!(r.is_err()),
        }
    }

    #[test]
    fn reads_as_the_general_codec_does(ev in event()) {
        let Ok(bytes) = encode_event_general(&ev) else { return Ok(()) };
        let general = decode_event_general(&bytes);
        let fast = flat::read(&bytes);
        if let Some(f) = &fast {
            let g = general.clone().unwrap();
            // Key order too: it is part of what the reference gives back.
            prop_assert_eq!(serde_json::to_string(&f.to_json()).unwrap(), serde_json::to_string(&g).unwrap());
        }
        prop_assert_eq!(decode_event(&bytes), general);
    }

    /// Arbitrary bytes: the fast reader never reads what the general
    /// decoder refuses, nor reads it differently.
    #[test]
    fn garbage_is_left_to_the_general_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        if let Some(f) = flat::read(&bytes) {
            prop_assert_eq!(Ok(f.to_json()), decode_event_general(&bytes));
        }
    }

    /// Flat messages with a byte changed: the same.
    #[test]
    fn damaged_flat_messages(ev in event(), at in any::<prop::sample::Index>(), b in any::<u8>()) {
        let Ok(mut bytes) = encode_event_general(&ev) else { return Ok(()) };
        let i = at.index(bytes.len());
        bytes[i] = b;
        if let Some(f) = flat::read(&bytes) {
            prop_assert_eq!(Ok(f.to_json()), decode_event_general(&bytes));
        }
    }
}

#[test]
fn most_of_a_stream_takes_the_fast_path() {
    // Plain deltas, starts and ends, as producers write them, are read in
    // place (the property tests above would pass with a reader that reads
    // nothing).
    for ev in [
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi"}),
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}),
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{\"a\":", "timestamp": 1_700_000_000_000i64}),
        json!({"type": "TOOL_CALL_END", "toolCallId": "c"}),
        json!({"type": "TOOL_CALL_RESULT", "messageId": "r", "toolCallId": "c", "content": "18C"}),
    ] {
        let bytes = encode_event(&ev).unwrap();
        let f = flat::read(&bytes).unwrap_or_else(|| panic!("{ev}"));
        assert_eq!(f.to_json(), decode_event_general(&bytes).unwrap());
    }
    let delta =
        json!({"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/turn", "value": 2}]});
    let bytes = encode_event(&delta).unwrap();
    let (ops, ts) = flat::state_delta::read(&bytes).expect("read in place");
    assert_eq!(
        flat::state_delta::to_json(ops, ts),
        decode_event_general(&bytes).unwrap()
    );
    let own = json!({"type": "BUSINESS_DATA_CONTENT", "messageId": "m", "delta": {"output": {"type": "text", "content": "hi"}}, "timestamp": 5});
    let bytes = babelgate_proto::encode_event_as(&own, Some("hai")).unwrap();
    assert_eq!(
        bytes,
        babelgate_proto::encode_event_as_general(&own, Some("hai")).unwrap()
    );
    assert_eq!(
        flat::custom::read(&bytes, "hai").expect("read in place"),
        own
    );
}

/// Nesting near the codec's depth limit: the fast readers stop where the
/// general decoder does (same result, or left to it).
#[test]
fn depth_limits_agree() {
    for n in 50..70 {
        for array in [false, true] {
            let mut v = json!("leaf");
            for _ in 0..n {
                v = if array { json!([v]) } else { json!({ "k": v }) };
            }
            let own = json!({"type": "BUSINESS_DATA_CONTENT", "delta": v.clone()});
            let delta =
                json!({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/a", "value": v}]});
            for (ev, prefix) in [(own, Some("hai")), (delta, None)] {
                let general = babelgate_proto::encode_event_as_general(&ev, prefix);
                assert_eq!(
                    babelgate_proto::encode_event_as(&ev, prefix),
                    general,
                    "{n} {array}"
                );
                let Ok(bytes) = general else { continue };
                let want = decode_event_general(&bytes).map(|v| match prefix {
                    Some(p) => babelgate_proto::restore(v, p),
                    None => v,
                });
                assert_eq!(
                    babelgate_proto::decode_event_as(&bytes, prefix),
                    want,
                    "{n} {array}"
                );
            }
        }
    }
}
