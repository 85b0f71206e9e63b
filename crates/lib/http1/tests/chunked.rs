//! The chunked decoder (moved here with the decoder from the gateway's
//! client): whole, cut at every offset, byte by byte, and its limits.

use babelgate_http1::{Chunked, Decoded, MAX_LINE};
use bytes::{Bytes, BytesMut};

/// Feeds `pieces` one after the other; the data read and how it ended:
/// `Ok(true)` done with nothing left over, `Ok(false)` not done (or done
/// with bytes after), `Err` the decoder's reason.
fn feed(pieces: &[&[u8]]) -> (Vec<u8>, Result<bool, &'static str>) {
    let mut dec = Chunked::default();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for p in pieces {
        buf.extend_from_slice(p);
        loop {
            match dec.decode(&mut buf) {
                Ok(Decoded::Data(d)) => {
                    assert!(!d.is_empty(), "no empty data");
                    out.extend_from_slice(&d);
                }
                Ok(Decoded::NeedMore) => break,
                Ok(Decoded::Done) => return (out, Ok(buf.is_empty())),
                Err(e) => return (out, Err(e.reason())),
            }
        }
    }
    (out, Ok(false))
}

const BODY: &[u8] = b"5\r\nhello\r\n1a;name=value;x\r\nabcdefghijklmnopqrstuvwxyz\r\nA \r\n0123456789\r\n0\r\nx-trailer: 1\r\n\r\n";
const DATA: &[u8] = b"helloabcdefghijklmnopqrstuvwxyz0123456789";

#[test]
fn a_body_read_whole() {
    assert_eq!(feed(&[BODY]), (DATA.to_vec(), Ok(true)));
}

#[test]
fn a_body_split_at_every_offset_gives_the_same_data() {
    for at in 0..=BODY.len() {
        let (a, b) = BODY.split_at(at);
        assert_eq!(feed(&[a, b]), (DATA.to_vec(), Ok(true)), "split at {at}");
    }
    let bytes: Vec<&[u8]> = BODY.chunks(1).collect();
    assert_eq!(feed(&bytes), (DATA.to_vec(), Ok(true)), "byte by byte");
}

#[test]
fn what_follows_the_body_is_left_in_the_buffer() {
    let mut wire = BODY.to_vec();
    wire.extend_from_slice(b"HTTP/1.1");
    assert_eq!(feed(&[&wire]), (DATA.to_vec(), Ok(false)));
}

#[test]
fn a_body_without_its_last_chunk_is_not_done() {
    let cut = &BODY[..BODY.len() - 20];
    for at in 0..=cut.len() {
        let (a, b) = cut.split_at(at);
        let (_, end) = feed(&[a, b]);
        assert_eq!(end, Ok(false), "split at {at}");
    }
}

#[test]
fn bad_framing_is_refused_at_every_split() {
    let cases: &[(&[u8], &str)] = &[
        (b"zz\r\nab\r\n", "a size line without a size"),
        (b"\r\n", "a size line without a size"),
        (b"2\r\nabXY", "chunk data not followed by CRLF"),
        (b"2\nab\r\n", "a line not ended by CRLF"),
        (b"2 x\r\nab\r\n", "a size line with bytes after its size"),
        // Only spaces and tabs may follow the size (hyper's rule).
        (b"2\x0c\r\nab\r\n", "a size line with bytes after its size"),
        (b"2\r\r\nab\r\n", "a size line with bytes after its size"),
        (b"2;a\rb\r\nab\r\n", "a size line with bytes after its size"),
        (b"10000000000000000\r\n", "a chunk size over 64 bits"),
        (b"0\r\nx: y\n", "a line not ended by CRLF"),
        (
            b"0\r\nnot a field\r\n\r\n",
            "trailers that are not header fields",
        ),
    ];
    for (wire, why) in cases {
        for at in 0..=wire.len() {
            let (a, b) = wire.split_at(at);
            let (_, end) = feed(&[a, b]);
            assert_eq!(end, Err(*why), "{wire:?} split at {at}");
        }
    }
}

#[test]
fn a_size_is_its_value_not_its_digits() {
    // 16 hex digits (the most a size can have), and leading zeros past 16.
    let mut dec = Chunked::default();
    let mut buf = BytesMut::from(&b"ffffffffffffffff\t ;x\r\nab"[..]);
    assert_eq!(
        dec.decode(&mut buf),
        Ok(Decoded::Data(Bytes::from_static(b"ab")))
    );
    assert_eq!(
        feed(&[b"000000000000000000002\r\nab\r\n0\r\n\r\n"]),
        (b"ab".to_vec(), Ok(true))
    );
}

#[test]
fn a_line_without_its_end_stops_at_the_limit() {
    let mut long = b"1;".to_vec();
    long.resize(MAX_LINE - 1, b'x');
    let (_, end) = feed(&[&long]);
    assert_eq!(end, Ok(false), "just under the limit: wait for more");
    long.push(b'x');
    let (_, end) = feed(&[&long]);
    assert_eq!(end, Err("a line over 4 KiB"));
}

#[test]
fn trailers_are_bounded() {
    let mut wire = b"0\r\n".to_vec();
    let line = format!("x-t: {}\r\n", "v".repeat(1000));
    for _ in 0..16 {
        wire.extend_from_slice(line.as_bytes());
    }
    let (_, end) = feed(&[&wire]);
    assert_eq!(end, Ok(false), "16 lines of 1 KiB: under the limit");
    wire.extend_from_slice(line.as_bytes());
    let (_, end) = feed(&[&wire]);
    assert_eq!(end, Err("trailers over 16 KiB"));
    // Fields, as many as a head may have.
    let many: String = (0..=babelgate_http1::MAX_HEADERS)
        .map(|i| format!("x-{i}: 1\r\n"))
        .collect();
    let (_, end) = feed(&[format!("0\r\n{many}\r\n").as_bytes()]);
    assert_eq!(end, Err("trailers that are not header fields"));
}
