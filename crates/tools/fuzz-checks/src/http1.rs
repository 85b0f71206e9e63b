//! The HTTP/1.1 codec (`babelgate-http1`) on arbitrary bytes: see
//! [`check_http1`].

use babelgate_http1::{
    is_own, parse_request, request_bytes, whole_request, BodyDecoder, Incomplete, ResponseReader,
};
use bytes::BytesMut;

/// What reading a response gave: status, fields, body and how the body
/// ended at the connection's end; or the error, as text.
type Read = Result<(u16, Vec<(String, Vec<u8>)>, Vec<u8>, Result<(), Incomplete>), String>;

/// Reads `pieces` as a response arriving read by read.
fn read_response<'a>(pieces: impl IntoIterator<Item = &'a [u8]>, total: usize) -> Read {
    let mut buf = BytesMut::new();
    let mut reader = ResponseReader::default();
    let mut head = None;
    let mut body = Vec::new();
    for p in pieces {
        buf.extend_from_slice(p);
        if head.is_none() {
            head = reader
                .read(&mut buf)
                .map_err(|e| e.to_string())?
                .map(|(h, length)| (h, BodyDecoder::new(length)));
        }
        if let Some((_, decoder)) = &mut head {
            while let Some(data) = decoder.decode(&mut buf).map_err(|e| e.to_string())? {
                assert!(!data.is_empty(), "no empty data");
                body.extend_from_slice(&data);
            }
        }
    }
    assert!(body.len() <= total, "more body than input");
    let Some((head, decoder)) = head else {
        return Err(reader
            .at_close(&buf)
            .map_or("closed before the head".into(), |e| e.to_string()));
    };
    let fields = head
        .headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect();
    Ok((head.status.as_u16(), fields, body, decoder.at_close()))
}

/// Input: one byte picking a cut point, then bytes read both as a request
/// (the server's fast path) and as a response (the client).
///
/// - A response reads the same whole, cut in two, in small pieces and byte
///   by byte, and never gives more body than it was given.
/// - A request taken whole has its body where the head says, is not taken
///   from any shorter prefix, and its head written again (as the client
///   writes one) reads back to the same fields and body.
pub fn check_http1(data: &[u8]) {
    let [cut, input @ ..] = data else {
        return;
    };
    let cut = usize::from(*cut) * input.len() / 255;
    let total = input.len();
    let whole = read_response([input], total);
    let (a, b) = input.split_at(cut);
    assert_eq!(read_response([a, b], total), whole, "cut at {cut}");
    let size = 1 + cut % 7;
    assert_eq!(
        read_response(input.chunks(size), total),
        whole,
        "pieces of {size}"
    );
    if input.len() <= 1024 {
        assert_eq!(read_response(input.chunks(1), total), whole, "byte by byte");
    }

    let Some(taken) = whole_request(input) else {
        return;
    };
    assert_eq!(taken.body.end, input.len());
    let shorter = cut.min(input.len() - 1);
    assert!(
        whole_request(&input[..shorter]).is_none(),
        "taken at {shorter}"
    );
    let body = &input[taken.body.clone()];
    let Some(target) = taken.head.uri.path_and_query() else {
        return;
    };
    let again = request_bytes(target.as_str(), "h", &taken.head.headers, body);
    let (head, len) = parse_request(&again)
        .expect("a written request reads back")
        .expect("whole");
    assert_eq!(&again[len..], body);
    for (name, value) in &taken.head.headers {
        // What the writer writes itself or never sends on (`is_own`) aside.
        if !is_own(name, true) {
            assert!(
                head.headers.get_all(name).iter().any(|v| v == value),
                "{name} lost in writing"
            );
        }
    }
}
