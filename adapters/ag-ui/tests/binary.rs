//! The binary transport in the AG-UI adapter: the encoder writes protobuf
//! straight from its event objects and the decoder reads messages in place.
//! Both are held to the JSON path converted by the general codec (which the
//! reference corpus holds to @ag-ui/proto): the same bytes, the same events.

use babelgate_ag_ui::{AgUiDecoder, AgUiEncoder};
use babelgate_core::sse::SseFramer;
use babelgate_core::{testing, Decoder, EncodeContext, Encoder, Translator};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

fn fixtures() -> Vec<(String, Vec<u8>)> {
    testing::fixtures("ag-ui")
}

fn translate(input: &[u8], binary_out: bool) -> Vec<u8> {
    let ctx = EncodeContext {
        binary: binary_out,
        ..EncodeContext::deterministic()
    };
    testing::translate_sse(
        Box::new(AgUiDecoder::new()),
        Box::new(AgUiEncoder::new(ctx)),
        input,
    )
}

/// The `data:` JSON of an SSE stream, each as the general codec frames it;
/// one the schema has no message for is left out, as the encoder leaves it.
fn sse_to_frames(sse: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in testing::sse_frames(sse) {
        let v: Value = serde_json::from_str(&f.data).unwrap();
        match babelgate_proto::encode_event_general(&v) {
            Ok(m) => babelgate_proto::write_frame(&mut out, &m).unwrap(),
            Err(babelgate_proto::Error::UnknownEventType(_)) => {}
            Err(e) => panic!("{e}: {v}"),
        }
    }
    out
}

#[test]
fn the_encoder_writes_what_the_json_path_converts_to() {
    let cases = fixtures();
    assert!(cases.len() >= 8, "{} fixtures", cases.len());
    for (name, input) in cases {
        let json = translate(&input, false);
        let binary = translate(&input, true);
        assert!(!binary.is_empty(), "{name}");
        assert_eq!(binary, sse_to_frames(&json), "{name}");
    }
}

#[test]
fn binary_in_gives_the_events_json_in_gives() {
    for (name, input) in fixtures() {
        // The fixture as an AG-UI producer would send it in binary.
        let json = translate(&input, false);
        let binary = sse_to_frames(&json);
        let mut framer = SseFramer::default();
        let mut frames = Vec::new();
        framer.push(&json, &mut frames).unwrap();
        let mut from_json = Vec::new();
        let mut d = AgUiDecoder::new();
        for f in &frames {
            // As read back from protobuf: the reference's key order.
            let v: Value = serde_json::from_str(&f.data).unwrap();
            let Ok(m) = babelgate_proto::encode_event_general(&v) else {
                continue;
            };
            let back = babelgate_proto::decode_event_general(&m).unwrap();
            let frame = babelgate_core::Frame {
                data: back.to_string(),
                ..f.clone()
            };
            d.decode(&frame, &mut from_json).unwrap();
        }
        let mut from_binary = Vec::new();
        let mut d = AgUiDecoder::new();
        for m in testing::length_messages(&binary) {
            d.decode_binary(&m, &mut from_binary).unwrap();
        }
        assert_eq!(from_binary, from_json, "{name}");
    }
}

#[test]
fn a_translator_reads_binary_input_and_passes_it_through() {
    for (name, input) in fixtures() {
        let binary = translate(&input, true);
        // Same dialect, binary on both sides: every message as received.
        let ctx = EncodeContext {
            binary: true,
            ..EncodeContext::deterministic()
        };
        let mut t = Translator::same_dialect(
            SseFramer::default(),
            Box::new(AgUiDecoder::new()),
            Box::new(AgUiEncoder::new(ctx)),
        )
        .with_binary_input(1 << 20);
        let mut out = Vec::new();
        t.push(&binary, &mut out).unwrap();
        t.finish(&mut out).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(out, binary, "{name}");
    }
}

#[test]
fn bad_binary_input_ends_with_run_error() {
    for (input, what) in [
        (vec![0, 0, 0, 2, 0xff, 0xff], "does not decode"),
        (vec![0xff, 0xff, 0xff, 0xff], "limit"),
        (vec![0, 0, 0, 9, 1], "ended"),
    ] {
        let mut t = Translator::new(
            SseFramer::default(),
            Box::new(AgUiDecoder::new()),
            Box::new(AgUiEncoder::new(EncodeContext::deterministic())),
        )
        .with_binary_input(1 << 20);
        let mut out = Vec::new();
        let r = t.push(&input, &mut out).and_then(|_| t.finish(&mut out));
        let e = r.unwrap_err().to_string();
        assert!(e.contains(what), "{e}");
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("\"RUN_ERROR\"") && text.contains("upstream_malformed"),
            "{text}"
        );
    }
}

/// Flat events as producers write them, and some that are not quite.
fn event() -> impl Strategy<Value = Value> {
    let types = [
        (
            "TEXT_MESSAGE_START",
            &["messageId", "role", "name", "subagentRunId"][..],
        ),
        (
            "TEXT_MESSAGE_CONTENT",
            &["messageId", "delta", "subagentRunId"][..],
        ),
        ("TEXT_MESSAGE_END", &["messageId", "subagentRunId"][..]),
        (
            "TOOL_CALL_START",
            &[
                "toolCallId",
                "toolCallName",
                "parentMessageId",
                "subagentRunId",
            ][..],
        ),
        (
            "TOOL_CALL_ARGS",
            &["toolCallId", "delta", "subagentRunId"][..],
        ),
        ("TOOL_CALL_END", &["toolCallId", "subagentRunId"][..]),
        (
            "TOOL_CALL_RESULT",
            &[
                "messageId",
                "toolCallId",
                "content",
                "role",
                "subagentRunId",
            ][..],
        ),
        ("STATE_DELTA", &[][..]),
    ];
    let value = prop_oneof![
        Just(String::new()),
        Just("assistant".to_string()),
        Just("user".to_string()),
        "[a-z]{1,4}",
        any::<String>()
    ];
    (
        0..types.len(),
        proptest::collection::vec((any::<bool>(), value), 5),
        prop_oneof![Just(None), (0i64..1 << 53).prop_map(Some)],
    )
        .prop_map(move |(i, fields, ts)| {
            let (ty, names) = types[i];
            let mut o = Map::new();
            o.insert("type".into(), ty.into());
            for (name, (present, v)) in names.iter().zip(fields) {
                if present {
                    o.insert((*name).into(), v.into());
                }
            }
            if let Some(t) = ts {
                o.insert("timestamp".into(), t.into());
            }
            if ty == "STATE_DELTA" {
                o.insert(
                    "delta".into(),
                    json!([{"op": "add", "path": "/a", "value": {"b": [1, "x", null]}}, {"op": "remove", "path": "/c"}]),
                );
            }
            Value::Object(o)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn the_fast_binary_path_agrees_with_the_general_one(events in proptest::collection::vec(event(), 1..6)) {
        let mut fast = AgUiDecoder::new();
        let mut general = AgUiDecoder::new();
        for ev in &events {
            let m = babelgate_proto::encode_event_general(ev).unwrap();
            let mut a = Vec::new();
            let mut b = Vec::new();
            let ra = fast.decode_binary(&m, &mut a);
            let rb = general.decode_binary_without_fast_paths(&m, &mut b);
            prop_assert_eq!(ra, rb);
            prop_assert_eq!(a, b);
        }
    }
}

#[test]
fn an_event_the_schema_lacks_is_dropped_and_counted() {
    let mut e = AgUiEncoder::new(EncodeContext {
        binary: true,
        ..EncodeContext::deterministic()
    });
    let mut d = AgUiDecoder::new();
    let mut events = Vec::new();
    for line in [
        json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
        // An event type from a newer AG-UI, which an AG-UI client gets as
        // it came over SSE; the schema has no message for it.
        json!({"type": "FUTURE_EVENT", "x": 1}),
        json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}),
    ] {
        let frame = babelgate_core::Frame {
            data: line.to_string(),
            ..Default::default()
        };
        d.decode(&frame, &mut events).unwrap();
    }
    let mut out = Vec::new();
    for ev in &events {
        e.encode(ev, &mut out);
    }
    e.finish(&mut out);
    let types: Vec<String> = testing::length_messages(&out)
        .iter()
        .map(|m| {
            babelgate_proto::decode_event(m).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(types, ["RUN_STARTED", "RUN_FINISHED"]);
    assert_eq!(e.unframed(), 1);
    assert_eq!(e.dropped(), 0);
}
