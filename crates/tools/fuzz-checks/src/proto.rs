//! The AG-UI binary transport: [`check_proto`] runs the length-prefix framer
//! and the event decoder on arbitrary bytes.
//!
//! Input: a byte picking the message size limit, a byte picking a cut point,
//! then a stream. Checks: the framer gives the same messages (or the same
//! error) whole, cut in two, in small pieces and byte by byte; no message is
//! over the limit; a failed framer stays failed; every message decodes or
//! fails without panicking, the same way each time, and the same with the
//! fast paths for common events as without them (also as HAI's own events,
//! and through the AG-UI decoder); what decodes encodes again, with and
//! without the fast paths alike, and its encoding is a fixed point; the
//! writer's frames read back.

use babelgate_ag_ui::AgUiDecoder;
use babelgate_core::Decoder;
use babelgate_proto::{
    decode_event, decode_event_as, decode_event_general, encode_event, encode_event_as,
    encode_event_as_general, encode_event_general, restore, write_frame, FramingError, ProtoFramer,
};

fn frame_pieces<'a>(
    limit: usize,
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> (Vec<Vec<u8>>, Result<(), FramingError>) {
    let mut f = ProtoFramer::new(limit);
    let mut out = Vec::new();
    for p in pieces {
        if let Err(e) = f.push(p, &mut out) {
            assert_eq!(f.push(b"\0\0\0\0", &mut out), Err(FramingError::Failed));
            assert_eq!(f.finish(), Err(FramingError::Failed));
            return (out, Err(e));
        }
    }
    let end = f.finish();
    (out, end)
}

pub fn check_proto(data: &[u8]) {
    let [pick, cut, input @ ..] = data else {
        return;
    };
    let limit = match pick % 4 {
        0 => babelgate_proto::DEFAULT_MAX_MESSAGE_BYTES,
        1 => usize::from(pick >> 2),
        2 => 64 + 16 * usize::from(pick >> 2),
        _ => 4096,
    };
    let cut = usize::from(*cut) * input.len() / 255;

    let whole = frame_pieces(limit, [input]);
    assert_eq!(
        frame_pieces(limit, [&input[..cut], &input[cut..]]),
        whole,
        "cut at {cut}"
    );
    let size = 1 + cut % 7;
    assert_eq!(
        frame_pieces(limit, input.chunks(size)),
        whole,
        "pieces of {size}"
    );
    if input.len() <= 512 {
        assert_eq!(frame_pieces(limit, input.chunks(1)), whole, "byte by byte");
    }

    let (messages, _) = &whole;
    let mut written = Vec::new();
    for m in messages {
        assert!(m.len() <= limit, "a message over the {limit}-byte limit");
        write_frame(&mut written, m).expect("a framed message frames again");
        let decoded = decode_event(m);
        assert_eq!(decode_event(m), decoded, "decoding is deterministic");
        let general = decode_event_general(m);
        assert_eq!(
            decoded, general,
            "the fast paths read as the general decoder"
        );
        assert_eq!(
            decode_event_as(m, Some("hai")),
            general.clone().map(|v| restore(v, "hai")),
            "a dialect's own events read as the general decoder"
        );
        let (mut fast, mut slow) = (Vec::new(), Vec::new());
        assert_eq!(
            AgUiDecoder::new().decode_binary(m, &mut fast),
            AgUiDecoder::new().decode_binary_without_fast_paths(m, &mut slow)
        );
        assert_eq!(fast, slow, "the AG-UI decoder's fast path");
        if let Ok(event) = decoded {
            assert!(event.get("type").is_some_and(|t| t.is_string()), "{event}");
            // What decodes encodes again (or is refused cleanly); our own bytes
            // decode, and encoding that gives the same bytes. (Not the same
            // event: like the reference, the mapping drops what the JSON form
            // cannot hold, such as pending calls beside an interrupt outcome.)
            assert_eq!(encode_event(&event), encode_event_general(&event));
            assert_eq!(
                encode_event_as(&event, Some("hai")),
                encode_event_as_general(&event, Some("hai"))
            );
            if let Ok(bytes) = encode_event(&event) {
                let again = decode_event(&bytes).expect("our own encoding decodes");
                assert_eq!(
                    encode_event(&again).as_ref(),
                    Ok(&bytes),
                    "encoding is stable: {event}"
                );
            }
        }
    }
    let (again, end) = frame_pieces(
        babelgate_proto::DEFAULT_MAX_MESSAGE_BYTES,
        [written.as_slice()],
    );
    assert_eq!(end, Ok(()));
    assert_eq!(&again, messages);
}
