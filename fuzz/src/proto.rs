//! The AG-UI binary transport: [`check_proto`] runs the length-prefix framer
//! and the event decoder on arbitrary bytes.
//!
//! Input: a byte picking the message size limit, a byte picking a cut point,
//! then a stream. Checks: the framer gives the same messages (or the same
//! error) whole, cut in two, in small pieces and byte by byte; no message is
//! over the limit; a failed framer stays failed; every message decodes or
//! fails without panicking, the same way each time; what decodes encodes
//! again, and its encoding is a fixed point; the writer's frames read back.

use babelgate_proto::{decode_event, encode_event, write_frame, FramingError, ProtoFramer};

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
        if let Ok(event) = decoded {
            assert!(event.get("type").is_some_and(|t| t.is_string()), "{event}");
            // What decodes encodes again (or is refused cleanly); our own bytes
            // decode, and encoding that gives the same bytes. (Not the same
            // event: like the reference, the mapping drops what the JSON form
            // cannot hold, such as pending calls beside an interrupt outcome.)
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
