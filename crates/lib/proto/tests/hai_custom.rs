//! Every HAI event of the fixtures through the binary form and back, with
//! the `hai` prefix: the same event, but for fields AG-UI's schema always
//! carries (they come back at their default when HAI had none).

use std::path::Path;

use babelgate_proto::{decode_event, decode_event_as, encode_event_as};
use serde_json::Value;

fn is_default(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Bool(b) => !b,
        Value::Array(a) => a.is_empty(),
        Value::Null => true,
        Value::Object(_) => false,
    }
}

#[test]
fn hai_fixture_events_round_trip() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures/hai");
    let mut seen = 0;
    let mut own = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in text.lines() {
            let Some(json) = line.strip_prefix("data: ") else {
                continue;
            };
            let ev: Value = serde_json::from_str(json).unwrap();
            let bytes = match encode_event_as(&ev, Some("hai")) {
                Ok(b) => b,
                Err(e) => panic!("{json}: {e}"),
            };
            let plain = decode_event(&bytes).unwrap();
            if plain["type"] == "CUSTOM" && ev["type"] != "CUSTOM" {
                own += 1;
                assert_eq!(
                    plain["name"],
                    format!("hai:{}", ev["type"].as_str().unwrap())
                );
            }
            let back = decode_event_as(&bytes, Some("hai")).unwrap();
            let (ev, back) = (ev.as_object().unwrap(), back.as_object().unwrap());
            for (k, v) in ev {
                assert_eq!(back.get(k), Some(v), "{json}: key {k}");
            }
            for (k, v) in back {
                assert!(
                    ev.contains_key(k) || is_default(v),
                    "{json}: added {k}: {v}"
                );
            }
            seen += 1;
        }
    }
    assert!(seen > 80, "{seen}");
    // BUSINESS_DATA_*, AGENT_COLLABORATIVE_*, MESSAGE_SNAPSHOT, FUTURE_EVENT.
    assert!(own > 35, "{own}");
}
