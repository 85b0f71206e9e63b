//! The binary transport in the HAI adapter ("HTTP binary"): the encoder
//! writes protobuf from its frames' objects, HAI's own events as `hai:`
//! CUSTOM events, and the decoder reads them back. Held to the JSON path
//! converted by the general codec, over every HAI fixture and over what
//! every other dialect's fixtures become in HAI.

use babelgate_core::sse::SseFramer;
use babelgate_core::{testing, Decoder, EncodeContext, Frame, Translator};
use babelgate_hai::{HaiDecoder, HaiEncoder};
use serde_json::Value;

const PREFIX: Option<&str> = babelgate_hai::POLICY.binary_custom_prefix;

fn fixtures() -> Vec<(String, Vec<u8>)> {
    testing::fixtures("hai")
}

fn translate(input: &[u8], binary_out: bool) -> Vec<u8> {
    let ctx = EncodeContext {
        binary: binary_out,
        ..EncodeContext::deterministic()
    };
    testing::translate_sse(
        Box::new(HaiDecoder::new()),
        Box::new(HaiEncoder::new(ctx)),
        input,
    )
}

#[test]
fn the_encoder_writes_what_the_json_path_converts_to() {
    let cases = fixtures();
    assert!(cases.len() >= 5, "{} fixtures", cases.len());
    let mut custom = 0;
    for (name, input) in cases {
        let json = translate(&input, false);
        let mut want = Vec::new();
        for f in testing::sse_frames(&json) {
            let v: Value = serde_json::from_str(&f.data).unwrap();
            let m = babelgate_proto::encode_event_as(&v, PREFIX).unwrap();
            babelgate_proto::write_frame(&mut want, &m).unwrap();
        }
        let binary = translate(&input, true);
        assert_eq!(binary, want, "{name}");
        // And back: the decoder reads what the JSON decoder reads.
        let mut from_json = Vec::new();
        let mut d = HaiDecoder::new();
        for f in testing::sse_frames(&json) {
            let v: Value = serde_json::from_str(&f.data).unwrap();
            let m = babelgate_proto::encode_event_as(&v, PREFIX).unwrap();
            let back = babelgate_proto::decode_event_as(&m, PREFIX).unwrap();
            if back["type"] == "CUSTOM"
                || v["type"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("BUSINESS"))
            {
                custom += 1;
            }
            let frame = Frame {
                data: back.to_string(),
                ..f
            };
            d.decode(&frame, &mut from_json).unwrap();
        }
        let mut from_binary = Vec::new();
        let mut d = HaiDecoder::new();
        for m in testing::length_messages(&binary) {
            d.decode_binary(&m, &mut from_binary).unwrap();
        }
        assert_eq!(from_binary, from_json, "{name}");
    }
    assert!(custom > 0, "no HAI event of its own in the fixtures");
}

#[test]
fn a_binary_hai_stream_passes_through_as_received() {
    for (name, input) in fixtures() {
        let binary = translate(&input, true);
        let ctx = EncodeContext {
            binary: true,
            ..EncodeContext::deterministic()
        };
        let mut t = Translator::same_dialect(
            SseFramer::default(),
            Box::new(HaiDecoder::new()),
            Box::new(HaiEncoder::new(ctx)),
        )
        .with_binary_input(1 << 20);
        let mut out = Vec::new();
        t.push(&binary, &mut out).unwrap();
        t.finish(&mut out).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(out, binary, "{name}");
    }
}
