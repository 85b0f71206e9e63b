//! Every cut of an input gives the same result: a response head and body
//! read as they arrive, and a request taken whole only when it is whole.
//! And the writers' bytes.

use babelgate_http1::{
    chunk_size_line, request_bytes, response_head, whole_request, BodyDecoder, BodyEncoder,
    BodyLength, HeadError, Incomplete, ResponseReader,
};
use bytes::BytesMut;
use http::{HeaderMap, HeaderValue, StatusCode};

/// What reading a response gave: status, the headers as text, the body and
/// whether it ended cleanly at the connection's end; or the error.
type Read = Result<(u16, Vec<(String, String)>, Vec<u8>, Result<(), Incomplete>), String>;

/// Reads `pieces` as a response arriving read by read, the connection
/// closing after the last.
fn read(pieces: &[&[u8]]) -> Read {
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
            while let Some(data) = decode(decoder, &mut buf)? {
                body.extend_from_slice(&data);
            }
        }
    }
    let Some((head, decoder)) = head else {
        return Err("closed before the head".into());
    };
    let headers = head
        .headers
        .iter()
        .map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v.as_bytes()).into()))
        .collect();
    Ok((head.status.as_u16(), headers, body, decoder.at_close()))
}

fn decode(d: &mut BodyDecoder, buf: &mut BytesMut) -> Result<Option<bytes::Bytes>, String> {
    d.decode(buf).map_err(|e| e.to_string())
}

/// Every cut in two, and byte by byte, reads as the whole does.
fn same_at_every_cut(wire: &[u8]) -> Read {
    let whole = read(&[wire]);
    for at in 0..=wire.len() {
        let (a, b) = wire.split_at(at);
        assert_eq!(read(&[a, b]), whole, "{wire:?} cut at {at}");
    }
    let bytes: Vec<&[u8]> = wire.chunks(1).collect();
    assert_eq!(read(&bytes), whole, "{wire:?} byte by byte");
    whole
}

#[test]
fn responses_read_the_same_whatever_the_reads() {
    // The wire, the body read, how it ended at the connection's end.
    type Case = (&'static [u8], &'static [u8], Result<(), Incomplete>);
    let cases: &[Case] = &[
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello",
            b"hello",
            Ok(()),
        ),
        (
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: x\r\n\r\nHTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nt: 1\r\n\r\n",
            b"hello",
            Ok(()),
        ),
        (b"HTTP/1.0 200 OK\n\nuntil the end", b"until the end", Ok(())),
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nhello",
            b"hello",
            Err(Incomplete::Length(4)),
        ),
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n",
            b"hello",
            Err(Incomplete::Chunked),
        ),
        (b"HTTP/1.1 204 No Content\r\ncontent-length: 3\r\n\r\nabc", b"", Ok(())),
    ];
    for (wire, body, end) in cases {
        let (_, _, got, ended) = same_at_every_cut(wire).unwrap();
        assert_eq!(&got, body, "{wire:?}");
        assert_eq!(&ended, end, "{wire:?}");
    }
}

#[test]
fn bad_responses_fail_the_same_whatever_the_reads() {
    let cases: &[(&[u8], &str)] = &[
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 1, 2\r\n\r\n",
            "content-lengths that differ",
        ),
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: +1\r\n\r\nx",
            "an invalid content-length",
        ),
        (
            b"HTTP/1.0 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
            "a transfer-encoding in an HTTP/1.0 message",
        ),
        (
            b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
            "101 to a request that asked no upgrade",
        ),
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
            "invalid chunked body: a size line without a size",
        ),
        (b"HTTP/1.1 200 OK\r\nx : y\r\n\r\n", "invalid header name"),
    ];
    for (wire, why) in cases {
        assert_eq!(same_at_every_cut(wire), Err(why.to_string()), "{wire:?}");
    }
}

#[test]
fn a_head_is_bounded() {
    let big = format!(
        "HTTP/1.1 200 OK\r\nx-big: {}\r\n\r\n",
        "v".repeat(babelgate_http1::MAX_HEAD)
    );
    assert_eq!(
        read(&[big.as_bytes()]),
        Err(HeadError::TooLarge.to_string())
    );
    // Without its end yet, too.
    assert_eq!(
        read(&[&big.as_bytes()[..babelgate_http1::MAX_HEAD]]),
        Err(HeadError::TooLarge.to_string())
    );
}

#[test]
fn a_request_is_taken_only_whole() {
    let wire: &[u8] = b"POST /api/chat?x=1 HTTP/1.1\r\nhost: x\r\nconnection: keep-alive, Close\r\ncontent-length: 7\r\n\r\n{\"a\":1}";
    let taken = whole_request(wire).expect("taken");
    assert_eq!(taken.head.uri, "/api/chat?x=1");
    assert_eq!(&wire[taken.body], b"{\"a\":1}");
    assert!(taken.close);
    for at in 0..wire.len() {
        assert!(
            whole_request(&wire[..at]).is_none(),
            "a prefix of {at} bytes"
        );
    }
}

#[test]
fn chunk_size_lines_are_hex() {
    let mut buf = [0u8; 18];
    for (n, want) in [
        (0usize, "0\r\n"),
        (1, "1\r\n"),
        (15, "f\r\n"),
        (16, "10\r\n"),
        (4096, "1000\r\n"),
        (usize::MAX, "ffffffffffffffff\r\n"),
    ] {
        assert_eq!(chunk_size_line(n, &mut buf), want.as_bytes());
    }
}

#[test]
fn a_body_is_written_as_its_length_says() {
    let mut line = [0u8; 18];
    let mut chunked = BodyEncoder::new(BodyLength::Chunked);
    assert_eq!(
        chunked.frame(26, &mut line),
        Ok((&b"1a\r\n"[..], &b"\r\n"[..]))
    );
    assert_eq!(chunked.finish(), Ok(&b"0\r\n\r\n"[..]));
    let mut sized = BodyEncoder::new(BodyLength::Length(5));
    assert!(sized.frame(3, &mut line).is_ok());
    assert_eq!(sized.finish(), Err(Incomplete::Length(2)));
    assert!(sized.frame(3, &mut line).is_err(), "past the length");
    assert!(!BodyEncoder::new(BodyLength::Empty).has_body());
}

#[test]
fn heads_are_written_with_their_own_framing() {
    let mut h = HeaderMap::new();
    h.insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert("content-length", HeaderValue::from_static("999"));
    h.insert("transfer-encoding", HeaderValue::from_static("gzip"));
    h.insert("connection", HeaderValue::from_static("upgrade"));
    h.insert("date", HeaderValue::from_static("today"));
    let head = response_head(StatusCode::OK, &h, BodyLength::Chunked, true);
    assert_eq!(
        String::from_utf8(head).unwrap(),
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: upgrade\r\ndate: today\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    let head = response_head(
        StatusCode::NO_CONTENT,
        &HeaderMap::new(),
        BodyLength::Empty,
        true,
    );
    let head = String::from_utf8(head).unwrap();
    assert!(
        head.starts_with("HTTP/1.1 204 No Content\r\nconnection: close\r\ndate: "),
        "{head}"
    );
    // A request drops what concerns one connection only.
    h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
    h.insert("te", HeaderValue::from_static("trailers"));
    let req = request_bytes("/a?b", "example.com:8080", &h, b"{}");
    assert_eq!(
        String::from_utf8(req).unwrap(),
        "POST /a?b HTTP/1.1\r\nhost: example.com:8080\r\ncontent-type: text/event-stream\r\ndate: today\r\ncontent-length: 2\r\n\r\n{}"
    );
}
