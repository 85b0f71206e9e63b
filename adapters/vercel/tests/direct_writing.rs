//! The Vercel encoder writes its most frequent chunks (text, reasoning and
//! tool-input deltas, the state part) straight into the output instead of
//! through a `serde_json::Value`. Differential test with serde_json as the
//! oracle: every frame it writes, whatever the strings, is the bytes
//! serde_json writes for the object it parses to, and carries the strings
//! it was given.

use babelgate_core::{EncodeContext, Encoder, Event, EventKind, Outcome};
use babelgate_vercel::encoder::VercelEncoder;
use proptest::prelude::*;
use serde_json::{json, Value};

/// Strings with what needs escaping: quotes, backslashes, every control
/// character, DEL, multi-byte characters, line and paragraph separators.
fn tricky() -> impl Strategy<Value = String> {
    let c = prop_oneof![
        3 => prop::char::range('a', 'e'),
        2 => prop::sample::select(vec!['"', '\\', '/', '\u{7f}', 'é', '北', '🎉', '\u{2028}', '\u{2029}', '\u{feff}']),
        2 => prop::char::range('\u{0}', '\u{1f}'),
        1 => any::<char>(),
    ];
    prop::collection::vec(c, 0..12).prop_map(|v| v.into_iter().collect())
}

fn events(ids: &[String], deltas: &[String]) -> Vec<EventKind> {
    let [text, reasoning, tool] = [0, 1, 2].map(|i| ids[i].clone());
    let mut v = vec![
        EventKind::RunStarted {
            thread_id: Some("t".into()),
            run_id: Some("r".into()),
            parent_run_id: None,
            message_id: None,
            input: None,
        },
        EventKind::ReasoningStart {
            message_id: reasoning.clone(),
        },
    ];
    v.extend(deltas.iter().map(|d| EventKind::ReasoningDelta {
        message_id: reasoning.clone(),
        delta: d.clone(),
    }));
    v.push(EventKind::ReasoningEnd {
        message_id: reasoning,
    });
    v.push(EventKind::text_start(text.clone()));
    v.extend(deltas.iter().map(|d| EventKind::TextDelta {
        message_id: text.clone(),
        delta: d.clone(),
    }));
    v.push(EventKind::text_end(text));
    v.push(EventKind::ToolCallStart {
        tool_call_id: tool.clone(),
        tool_name: "f".into(),
        parent_message_id: None,
    });
    v.extend(deltas.iter().map(|d| EventKind::ToolCallArgs {
        tool_call_id: tool.clone(),
        delta: d.clone(),
    }));
    v.push(EventKind::ToolCallEnd { tool_call_id: tool });
    v.push(EventKind::StateSnapshot {
        snapshot: json!({"s": ""}),
    });
    v.extend(deltas.iter().map(|d| EventKind::StateDelta {
        patch: json!([{"op": "replace", "path": "/s", "value": d}]),
    }));
    v.push(EventKind::RunFinished {
        thread_id: Some("t".into()),
        run_id: Some("r".into()),
        message_id: None,
        result: None,
        outcome: Outcome::Unspecified,
        finish_reason: None,
        usage: None,
    });
    v
}

/// Found by the `fast_json` fuzz target: tool input `555…5` (39 digits)
/// reached the client as 5.555555555555555e+38, and read back as
/// ...554e+38, where JSON.parse (and Rust) read 5.555555555555556e+38:
/// serde_json parsed numbers approximately until `float_roundtrip`.
#[test]
fn tool_input_numbers_reach_the_client_as_json_parse_reads_them() {
    let digits = "5".repeat(39);
    let mut enc = VercelEncoder::new(EncodeContext::deterministic());
    let mut out = Vec::new();
    for k in [
        EventKind::ToolCallStart {
            tool_call_id: "c".into(),
            tool_name: "f".into(),
            parent_message_id: None,
        },
        EventKind::ToolCallArgs {
            tool_call_id: "c".into(),
            delta: digits.clone(),
        },
        EventKind::ToolCallEnd {
            tool_call_id: "c".into(),
        },
    ] {
        enc.encode(&Event::new(k), &mut out);
    }
    enc.finish(&mut out);
    let out = String::from_utf8(out).unwrap();
    let exact: f64 = digits.parse().unwrap();
    let inputs: Vec<f64> = out
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| d.split_once("\"input\":"))
        .map(|(_, rest)| {
            // The number as written, read as Rust reads it: correctly rounded.
            let end = rest.find([',', '}']).unwrap();
            rest[..end].parse().unwrap()
        })
        .collect();
    assert_eq!(inputs, vec![exact], "{out}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn directly_written_chunks_are_what_serde_json_writes(
        ids in prop::collection::vec(tricky(), 3),
        deltas in prop::collection::vec(tricky(), 1..4),
    ) {
        // Three distinct ids (the encoder keys its state by them).
        let ids: Vec<String> = ids.iter().enumerate().map(|(i, s)| format!("{i}{s}")).collect();
        let mut enc = VercelEncoder::new(EncodeContext::deterministic());
        let mut out = Vec::new();
        for k in events(&ids, &deltas) {
            enc.encode(&Event::new(k), &mut out);
        }
        enc.finish(&mut out);
        let out = String::from_utf8(out).unwrap();

        let mut got: Vec<(String, Value)> = Vec::new();
        for event in out.trim_end_matches('\n').split("\n\n") {
            let data = event.strip_prefix("data: ").unwrap();
            prop_assert!(!data.contains('\n'), "{}", event);
            if data == "[DONE]" {
                continue;
            }
            let v: Value = serde_json::from_str(data).map_err(|e| {
                TestCaseError::fail(format!("{e}: {data:?}"))
            })?;
            prop_assert_eq!(serde_json::to_string(&v).unwrap(), data);
            got.push((v["type"].as_str().unwrap().to_string(), v));
        }
        let all = |ty: &str, key: &str, id_key: &str, id: &str| -> Vec<String> {
            got.iter()
                .filter(|(t, v)| t == ty && v[id_key] == id)
                .map(|(_, v)| v[key].as_str().unwrap().to_string())
                .collect()
        };
        prop_assert_eq!(all("text-delta", "delta", "id", &ids[0]), deltas.clone());
        prop_assert_eq!(all("reasoning-delta", "delta", "id", &ids[1]), deltas.clone());
        prop_assert_eq!(all("tool-input-delta", "inputTextDelta", "toolCallId", &ids[2]), deltas.clone());
        let states: Vec<&Value> = got
            .iter()
            .filter(|(t, _)| t == "data-state")
            .map(|(_, v)| &v["data"]["s"])
            .collect();
        prop_assert_eq!(states.last().copied(), Some(&json!(deltas.last().unwrap())));
    }
}
