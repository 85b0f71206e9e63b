//! An incremental decoder of HTTP/1.1 chunked transfer coding (RFC 9112
//! §7.1).
//!
//! It works in place on the connection's read buffer: chunk data is split
//! off the front of the buffer (no copy), size lines and trailers are
//! consumed. What a chunk is split into depends only on what has arrived,
//! so a body gives the same bytes whatever the reads were.
//!
//! Limits, each an error when passed: a size line (with its extensions) or
//! a trailer line of [`MAX_LINE`] bytes without its end, all trailers
//! together over [`MAX_TRAILERS`], a size over 64 bits. Lines end in CRLF,
//! as the RFC asks; a size line is hex digits, optional spaces or tabs, and
//! extensions after `;` with no CR in them; trailers must read as header
//! fields, as hyper has them.

use bytes::{Buf, Bytes, BytesMut};

use crate::{MAX_LINE, MAX_TRAILERS};

/// Where the decoder is in the body.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Before a size line.
    Size,
    /// Inside a chunk's data: this many bytes to come.
    Data(u64),
    /// After a chunk's data: its CRLF.
    DataEnd,
    /// After the last chunk: trailer lines until an empty one (the lines
    /// read so far, each with its CRLF).
    Trailers(Vec<u8>),
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

impl ChunkedError {
    /// What was wrong, in a few words.
    pub fn reason(&self) -> &'static str {
        self.0
    }
}

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
            match &mut self.state {
                State::Done => return Ok(Decoded::Done),
                State::Data(left) => {
                    let left = *left;
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
                        State::Trailers(Vec::new())
                    } else {
                        State::Data(size)
                    };
                }
                State::Trailers(block) => {
                    let Some(line) = take_line(buf)? else {
                        return Ok(Decoded::NeedMore);
                    };
                    block.extend_from_slice(&line);
                    block.extend_from_slice(b"\r\n");
                    if line.is_empty() {
                        // Read as a head's fields are (hyper hands them on
                        // as trailers; this decoder only checks them).
                        if block.len() > 2 && crate::head::trailer_fields(block).is_err() {
                            return Err(ChunkedError("trailers that are not header fields"));
                        }
                        self.state = State::Done;
                        continue;
                    }
                    if block.len() > MAX_TRAILERS {
                        return Err(ChunkedError("trailers over 16 KiB"));
                    }
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

/// A size line's size: hex digits, then optional spaces or tabs and
/// extensions (`;` and anything but CR, ignored).
fn chunk_size(line: &[u8]) -> Result<u64, ChunkedError> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return Err(ChunkedError("a size line without a size"));
    }
    let (hex, rest) = line.split_at(digits);
    let size = hex.iter().try_fold(0u64, |n, b| {
        // A hex digit's value: its place in the alphabet, either case.
        let d = match b {
            b'0'..=b'9' => b - b'0',
            _ => (b | 0x20) - b'a' + 10,
        };
        n.checked_mul(16)?.checked_add(u64::from(d))
    });
    let size = size.ok_or(ChunkedError("a chunk size over 64 bits"))?;
    let rest = rest
        .get(
            rest.iter()
                .take_while(|b| matches!(b, b' ' | b'\t'))
                .count()..,
        )
        .unwrap_or_default();
    match rest.split_first() {
        None => Ok(size),
        Some((b';', ext)) if !ext.contains(&b'\r') => Ok(size),
        _ => Err(ChunkedError("a size line with bytes after its size")),
    }
}
