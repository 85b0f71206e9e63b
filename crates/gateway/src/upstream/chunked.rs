//! An incremental decoder of HTTP/1.1 chunked transfer coding (RFC 9112
//! §7.1), for response bodies read by the gateway's own client.
//!
//! It works in place on the connection's read buffer: chunk data is split
//! off the front of the buffer (no copy), size lines and trailers are
//! consumed. What a chunk is split into depends only on what has arrived,
//! so a body gives the same bytes whatever the reads were.
//!
//! Limits, each an error when passed: a size line (with its extensions) or
//! a trailer line of [`MAX_LINE`] bytes without its end, all trailers
//! together over [`MAX_TRAILERS`], a size over 16 hex digits. Lines end in
//! CRLF, as the RFC asks and as hyper reads them.

use bytes::{Buf, Bytes, BytesMut};

/// The longest size or trailer line read (its extensions included).
pub const MAX_LINE: usize = 4096;
/// The most trailer bytes read after the last chunk.
pub const MAX_TRAILERS: usize = 16 * 1024;

/// Where the decoder is in the body.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Before a size line.
    Size,
    /// Inside a chunk's data: this many bytes to come.
    Data(u64),
    /// After a chunk's data: its CRLF.
    DataEnd,
    /// After the last chunk: trailer lines until an empty one (this many
    /// trailer bytes read so far).
    Trailers(usize),
    Done,
}

/// What one step of decoding gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// The next bytes of the body.
    Data(Bytes),
    /// More must be read before anything can be said.
    NeedMore,
    /// The body is complete (the last chunk and its trailers read).
    Done,
}

/// Why a body is not valid chunked coding.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid chunked body: {0}")]
pub struct ChunkedError(&'static str);

/// The decoder's state between reads.
#[derive(Debug)]
pub struct Chunked {
    state: State,
}

impl Default for Chunked {
    fn default() -> Self {
        Chunked { state: State::Size }
    }
}

impl Chunked {
    /// Whether the last chunk and the trailers have been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes from the front of `buf`, consuming what it uses: the next
    /// data, or that more must be read, or the end.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Decoded, ChunkedError> {
        loop {
            match self.state {
                State::Done => return Ok(Decoded::Done),
                State::Data(left) => {
                    if buf.is_empty() {
                        return Ok(Decoded::NeedMore);
                    }
                    let n = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
                    let left = left - n as u64;
                    self.state = if left == 0 {
                        State::DataEnd
                    } else {
                        State::Data(left)
                    };
                    return Ok(Decoded::Data(buf.split_to(n).freeze()));
                }
                State::DataEnd => {
                    if buf.len() < 2 {
                        // A lone byte that is already wrong need not wait.
                        if buf.first().is_some_and(|b| *b != b'\r') {
                            return Err(ChunkedError("chunk data not followed by CRLF"));
                        }
                        return Ok(Decoded::NeedMore);
                    }
                    if !buf.starts_with(b"\r\n") {
                        return Err(ChunkedError("chunk data not followed by CRLF"));
                    }
                    buf.advance(2);
                    self.state = State::Size;
                }
                State::Size => {
                    let Some(line) = take_line(buf)? else {
                        return Ok(Decoded::NeedMore);
                    };
                    let size = chunk_size(&line)?;
                    self.state = if size == 0 {
                        State::Trailers(0)
                    } else {
                        State::Data(size)
                    };
                }
                State::Trailers(read) => {
                    let Some(line) = take_line(buf)? else {
                        return Ok(Decoded::NeedMore);
                    };
                    if line.is_empty() {
                        self.state = State::Done;
                        continue;
                    }
                    let read = read + line.len() + 2;
                    if read > MAX_TRAILERS {
                        return Err(ChunkedError("trailers over 16 KiB"));
                    }
                    self.state = State::Trailers(read);
                }
            }
        }
    }
}

/// The next CRLF-ended line off the front of `buf` (without its CRLF), or
/// `None` if it has not all arrived.
fn take_line(buf: &mut BytesMut) -> Result<Option<BytesMut>, ChunkedError> {
    let within = buf.len().min(MAX_LINE);
    let Some(lf) = buf
        .get(..within)
        .and_then(|b| b.iter().position(|c| *c == b'\n'))
    else {
        if buf.len() >= MAX_LINE {
            return Err(ChunkedError("a line over 4 KiB"));
        }
        return Ok(None);
    };
    if lf == 0 || buf.get(lf - 1) != Some(&b'\r') {
        return Err(ChunkedError("a line not ended by CRLF"));
    }
    let mut line = buf.split_to(lf + 1);
    line.truncate(lf - 1);
    Ok(Some(line))
}

/// A size line's size: hex digits, then optional whitespace and extensions
/// (`;name[=value]`, ignored).
fn chunk_size(line: &[u8]) -> Result<u64, ChunkedError> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return Err(ChunkedError("a size line without a size"));
    }
    if digits > 16 {
        return Err(ChunkedError("a chunk size over 64 bits"));
    }
    let (hex, rest) = line.split_at(digits);
    let rest = rest.trim_ascii_start();
    if !(rest.is_empty() || rest.starts_with(b";")) {
        return Err(ChunkedError("a size line with bytes after its size"));
    }
    let hex = std::str::from_utf8(hex).map_err(|_| ChunkedError("a size that is not hex"))?;
    u64::from_str_radix(hex, 16).map_err(|_| ChunkedError("a size that is not hex"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `wire` in the given pieces; the data read and how it ended.
    fn feed(pieces: &[&[u8]]) -> (Vec<u8>, Result<bool, ChunkedError>) {
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
                    Err(e) => return (out, Err(e)),
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
            (b"11112222333344445\r\n", "a chunk size over 64 bits"),
            (b"0\r\nx: y\n", "a line not ended by CRLF"),
        ];
        for (wire, why) in cases {
            for at in 0..=wire.len() {
                let (a, b) = wire.split_at(at);
                let (_, end) = feed(&[a, b]);
                assert_eq!(end, Err(ChunkedError(why)), "{wire:?} split at {at}");
            }
        }
    }

    #[test]
    fn a_size_of_16_hex_digits_is_read() {
        let mut dec = Chunked::default();
        let mut buf = BytesMut::from(&b"ffffffffffffffff\r\nab"[..]);
        assert_eq!(
            dec.decode(&mut buf),
            Ok(Decoded::Data(Bytes::from_static(b"ab")))
        );
        assert_eq!(dec.state, State::Data(u64::MAX - 2));
    }

    #[test]
    fn a_line_without_its_end_stops_at_the_limit() {
        let mut long = b"1;".to_vec();
        long.resize(MAX_LINE - 1, b'x');
        let (_, end) = feed(&[&long]);
        assert_eq!(end, Ok(false), "just under the limit: wait for more");
        long.push(b'x');
        let (_, end) = feed(&[&long]);
        assert_eq!(end, Err(ChunkedError("a line over 4 KiB")));
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
        assert_eq!(end, Err(ChunkedError("trailers over 16 KiB")));
    }
}
