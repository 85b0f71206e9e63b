//! The byte corpus written by @ag-ui/proto 1.0.0 itself
//! (tests/node/proto-corpus.mjs): every AG-UI event of the fixtures, the bytes
//! the reference `encode` makes of it, and what the reference `decode` reads
//! back. Our codec must make the same bytes and read the same JSON.

use babelgate_proto::{decode_event, encode_event, Error, ProtoFramer};
use serde_json::Value;

const CORPUS: &str = include_str!("../testdata/corpus.jsonl");

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

struct Case {
    source: String,
    json: String,
    bytes: Option<Vec<u8>>,
    decoded: Option<Value>,
}

fn corpus() -> Vec<Case> {
    CORPUS
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            assert!(
                v.get("encodeError").is_none(),
                "the reference failed to encode: {l}"
            );
            Case {
                source: v["source"].as_str().unwrap().to_string(),
                json: v["json"].as_str().unwrap().to_string(),
                bytes: v["bytes"].as_str().map(unhex),
                decoded: v.get("decoded").cloned(),
            }
        })
        .collect()
}

/// Serialized with keys in order: the decoded object's key order is part of
/// what the reference gives back (serde_json's map equality ignores order).
fn text(v: &Value) -> String {
    serde_json::to_string(v).unwrap()
}

#[test]
fn corpus_covers_the_fixtures() {
    let cases = corpus();
    assert!(cases.len() > 200, "{} cases", cases.len());
    let types: std::collections::BTreeSet<String> = cases
        .iter()
        .map(|c| {
            serde_json::from_str::<Value>(&c.json).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    for t in [
        "RUN_STARTED",
        "RUN_FINISHED",
        "RUN_ERROR",
        "STATE_DELTA",
        "TOOL_CALL_RESULT",
        "REASONING_START",
        "CUSTOM",
        "RAW",
    ] {
        assert!(types.contains(t), "no {t} in the corpus");
    }
}

#[test]
fn encodes_every_event_to_the_reference_bytes() {
    let mut failures = Vec::new();
    for c in corpus() {
        let event: Value = serde_json::from_str(&c.json).unwrap();
        let want = c.bytes.unwrap();
        let got = encode_event(&event);
        if want.is_empty() {
            // The reference writes nothing for a type the schema lacks.
            assert!(
                matches!(got, Err(Error::UnknownEventType(_))),
                "{}: {got:?}",
                c.json
            );
            continue;
        }
        match got {
            Ok(got) if got == want => {}
            other => failures.push(format!(
                "{}: {}\n  want {}\n  got  {}",
                c.source,
                c.json,
                hex(&want),
                other.map(|b| hex(&b)).unwrap_or_else(|e| e.to_string())
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn decodes_every_message_to_the_reference_json() {
    let mut failures = Vec::new();
    for c in corpus() {
        let bytes = c.bytes.unwrap();
        let got = decode_event(&bytes);
        match (&c.decoded, got) {
            (Some(want), Ok(got)) if text(want) == text(&got) => {}
            (None, Err(_)) => {}
            (want, got) => failures.push(format!(
                "{}: {}\n  want {want:?}\n  got  {got:?}",
                c.source, c.json
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// EventEncoder's proto mode (@ag-ui/encoder 1.0.0, asked with
/// `Accept: application/vnd.ag-ui.event+proto`) made this stream; the framer
/// and the decoder read it back to what the reference decodes, at every split
/// of the stream into two pushes.
#[test]
fn reads_the_reference_encoders_stream() {
    let stream = include_bytes!("../testdata/stream.bin");
    let want: Vec<Value> = include_str!("../testdata/stream.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(want.len() > 10);
    for cut in 0..=stream.len() {
        let mut framer = ProtoFramer::default();
        let mut messages = Vec::new();
        framer.push(&stream[..cut], &mut messages).unwrap();
        framer.push(&stream[cut..], &mut messages).unwrap();
        framer.finish().unwrap();
        let got: Vec<Value> = messages.iter().map(|m| decode_event(m).unwrap()).collect();
        assert_eq!(
            got.iter().map(text).collect::<Vec<_>>(),
            want.iter().map(text).collect::<Vec<_>>(),
            "cut at {cut}"
        );
    }
    // And our writer makes the same stream from the same events.
    let mut ours = Vec::new();
    for event in &want {
        babelgate_proto::write_event(&mut ours, event).unwrap();
    }
    assert_eq!(ours, stream);
}
