//! Bytes that are not an AG-UI event: an error, never a panic.

use babelgate_proto::{decode_event, encode_event, Error};
use serde_json::json;

#[test]
fn malformed_messages_are_errors() {
    let cases: &[(&str, &[u8])] = &[
        ("empty", b""),
        ("truncated varint", &[0x0a, 0x80]),
        ("length past the end", &[0x0a, 0x05, 0x01]),
        ("field number 0", &[0x00, 0x01]),
        ("group wire type", &[0x0b]),
        ("no base event", &[0x0a, 0x00]),
        // TEXT_MESSAGE_START's arm whose base event says TEXT_MESSAGE_CONTENT.
        ("type disagrees", &[0x0a, 0x04, 0x0a, 0x02, 0x08, 0x01]),
        // Two different arms.
        (
            "two arms",
            &[0x0a, 0x02, 0x0a, 0x00, 0x12, 0x02, 0x0a, 0x00],
        ),
        // An arm this schema does not have (field 99).
        ("future arm", &[0x9a, 0x06, 0x00]),
    ];
    for (name, bytes) in cases {
        assert!(decode_event(bytes).is_err(), "{name}");
    }
}

#[test]
fn a_timestamp_beyond_a_javascript_number_is_refused() {
    // RUN_STARTED, base event type 11, timestamp 2^60.
    let mut base = vec![0x08, 0x0b, 0x10];
    prost::encoding::encode_varint(1 << 60, &mut base);
    let mut arm = vec![0x0a, base.len() as u8];
    arm.extend(base);
    let mut msg = vec![0x62, arm.len() as u8];
    msg.extend(arm);
    assert!(matches!(decode_event(&msg), Err(Error::Malformed(_))));
}

#[test]
fn nesting_is_bounded_both_ways() {
    let mut v = json!(1);
    for _ in 0..200 {
        v = json!([v]);
    }
    let event = json!({"type": "STATE_SNAPSHOT", "snapshot": v});
    assert_eq!(encode_event(&event), Err(Error::TooDeep));
    // A ListValue nested 10,000 deep in a STATE_SNAPSHOT's snapshot (field 2).
    let mut value: Vec<u8> = Vec::new();
    for _ in 0..10_000 {
        let mut list = vec![0x0a];
        prost::encoding::encode_varint(value.len() as u64, &mut list);
        list.extend(&value);
        let mut next = vec![0x32];
        prost::encoding::encode_varint(list.len() as u64, &mut next);
        next.extend(list);
        value = next;
    }
    let mut snap = vec![0x0a, 0x02, 0x08, 0x06, 0x12];
    prost::encoding::encode_varint(value.len() as u64, &mut snap);
    snap.extend(value);
    let mut msg = vec![0x3a];
    prost::encoding::encode_varint(snap.len() as u64, &mut msg);
    msg.extend(snap);
    assert_eq!(decode_event(&msg), Err(Error::TooDeep));
}

#[test]
fn events_the_schema_cannot_carry_are_errors() {
    assert_eq!(encode_event(&json!([1])), Err(Error::NotAnObject));
    assert_eq!(encode_event(&json!({"delta": "x"})), Err(Error::NoType));
    assert!(matches!(
        encode_event(&json!({"type": "BUSINESS_DATA_START"})),
        Err(Error::UnknownEventType(_))
    ));
    assert!(matches!(
        encode_event(&json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": 7, "delta": "x"})),
        Err(Error::Field { .. })
    ));
    assert!(matches!(
        encode_event(
            &json!({"type": "STATE_DELTA", "delta": [{"op": "frobnicate", "path": "/a"}]})
        ),
        Err(Error::Field { .. })
    ));
}

#[test]
fn a_role_carrying_another_roles_content_form_does_not_decode() {
    // Encodes (array content becomes content parts whatever the role, as the
    // reference does), but an assistant message has no parts: decoding refuses.
    let event = json!({"type": "MESSAGES_SNAPSHOT", "messages": [
        {"id": "a", "role": "assistant", "content": [{"type": "text", "text": "x"}]}]});
    let bytes = encode_event(&event).unwrap();
    assert!(matches!(decode_event(&bytes), Err(Error::Malformed(_))));
}

#[test]
fn metadata_travels_only_as_an_object() {
    let plain = json!({"type": "STEP_STARTED", "stepName": "s"});
    for bad in [json!([1]), json!("m"), json!(3)] {
        let mut e = plain.clone();
        e["metadata"] = bad;
        assert_eq!(encode_event(&e), encode_event(&plain));
    }
}

#[test]
fn small_elements_cannot_blow_up_into_large_json() {
    // A MESSAGES_SNAPSHOT (arm 9) holding 200,000 empty messages: two bytes
    // each on the wire, a map of defaults each once decoded.
    let mut snap = vec![0x0a, 0x02, 0x08, 0x08];
    for _ in 0..200_000 {
        snap.extend([0x12, 0x00]);
    }
    let mut msg = vec![0x4a];
    prost::encoding::encode_varint(snap.len() as u64, &mut msg);
    msg.extend(snap);
    let got = decode_event(&msg);
    assert!(
        matches!(got, Err(Error::TooLarge)),
        "{:?}",
        got.map(|_| "decoded")
    );
}
