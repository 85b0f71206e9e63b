//! How a body is delimited (RFC 9112 §6.3), for both roles, and bodies read
//! and written by that rule.

use bytes::{Bytes, BytesMut};
use http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Version};

use crate::chunked::{Chunked, ChunkedError, Decoded};
use crate::head::ResponseHead;

/// How a message's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyLength {
    /// No body at all (a 1xx, 204 or 304 response; a request with neither
    /// field).
    Empty,
    /// `content-length`: this many bytes.
    Length(u64),
    /// Chunked transfer coding, ended by its last chunk.
    Chunked,
    /// Neither: the body ends with the connection (responses only).
    UntilClose,
}

/// Why a head does not say clearly where its body ends: each a shape of
/// request smuggling or response splitting, refused as hyper refuses it.
#[derive(Debug, Clone, Copy, thiserror::Error, PartialEq, Eq)]
pub enum FramingError {
    #[error("an invalid content-length")]
    InvalidLength,
    #[error("content-lengths that differ")]
    DifferingLengths,
    #[error("a transfer-encoding whose last coding is not chunked")]
    NotChunked,
    #[error("a transfer-encoding in an HTTP/1.0 message")]
    TransferEncodingInHttp10,
}

/// The largest length hyper takes (it keeps two values above for itself).
const MAX_LENGTH: u64 = u64::MAX - 2;

/// A length field's value: decimal digits only (no sign, no space).
fn digits(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() {
        return None;
    }
    bytes
        .iter()
        .try_fold(0u64, |n, b| {
            b.is_ascii_digit().then_some(())?;
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        })
        .filter(|n| *n <= MAX_LENGTH)
}

/// Whether a `transfer-encoding` value ends with `chunked` (the last
/// coding is the one that delimits the body).
fn ends_chunked(value: &HeaderValue) -> bool {
    value
        .to_str()
        .ok()
        .and_then(|s| s.rsplit(',').next())
        .is_some_and(|c| c.trim().eq_ignore_ascii_case("chunked"))
}

/// A request's framing, seen field by field in wire order (the order
/// decides, as in hyper: a length before `transfer-encoding` is checked,
/// one after it ignored).
#[derive(Debug)]
pub(crate) struct RequestFraming {
    http11: bool,
    length: Option<u64>,
    lengths: usize,
    te: Option<bool>,
    error: Option<FramingError>,
}

impl RequestFraming {
    pub(crate) fn new(version: Version) -> RequestFraming {
        RequestFraming {
            http11: version == Version::HTTP_11,
            length: None,
            lengths: 0,
            te: None,
            error: None,
        }
    }

    pub(crate) fn see(&mut self, name: &HeaderName, value: &HeaderValue) {
        if self.error.is_some() {
            return;
        }
        if name == TRANSFER_ENCODING {
            if !self.http11 {
                self.error = Some(FramingError::TransferEncodingInHttp10);
            }
            self.te = Some(ends_chunked(value));
            self.length = None;
        } else if name == CONTENT_LENGTH {
            self.lengths += 1;
            if self.te.is_some() {
                return;
            }
            match (digits(value.as_bytes()), self.length) {
                (None, _) => self.error = Some(FramingError::InvalidLength),
                (Some(n), Some(prev)) if n != prev => {
                    self.error = Some(FramingError::DifferingLengths)
                }
                (Some(n), _) => self.length = Some(n),
            }
        }
    }

    pub(crate) fn one_length(&self) -> bool {
        self.lengths == 1 && self.te.is_none()
    }

    pub(crate) fn finish(self) -> Result<BodyLength, FramingError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        Ok(match (self.te, self.length) {
            (Some(true), _) => BodyLength::Chunked,
            (Some(false), _) => return Err(FramingError::NotChunked),
            (None, Some(n)) => BodyLength::Length(n),
            (None, None) => BodyLength::Empty,
        })
    }
}

impl BodyLength {
    /// A final response's body, to a request that was not `HEAD` or
    /// `CONNECT` (hyper's client rules).
    pub fn of_response(head: &ResponseHead) -> Result<BodyLength, FramingError> {
        let status = head.status;
        if status.is_informational()
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED
        {
            return Ok(BodyLength::Empty);
        }
        let headers = &head.headers;
        if let Some(last) = headers.get_all(TRANSFER_ENCODING).iter().next_back() {
            if head.version == Version::HTTP_10 {
                return Err(FramingError::TransferEncodingInHttp10);
            }
            // Chunked last: its end is the last chunk. Anything else: the
            // connection's end (a content-length beside it does not count).
            return Ok(if ends_chunked(last) {
                BodyLength::Chunked
            } else {
                BodyLength::UntilClose
            });
        }
        // Every length given, in lists or repeated, must be the same.
        let mut length = None;
        for value in headers.get_all(CONTENT_LENGTH) {
            let list = value.to_str().map_err(|_| FramingError::InvalidLength)?;
            for item in list.split(',') {
                let n = digits(item.trim().as_bytes()).ok_or(FramingError::InvalidLength)?;
                if length.is_some_and(|l| l != n) {
                    return Err(FramingError::DifferingLengths);
                }
                length = Some(n);
            }
        }
        Ok(length.map_or(BodyLength::UntilClose, BodyLength::Length))
    }

    /// How the server writes a response's body: none for a 1xx, 204 or
    /// 304; the length its `content-length` or `exact` size gives; chunked
    /// otherwise.
    pub fn for_response(status: StatusCode, headers: &HeaderMap, exact: Option<u64>) -> BodyLength {
        if status.is_informational()
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED
        {
            return BodyLength::Empty;
        }
        headers
            .get(CONTENT_LENGTH)
            .and_then(|v| digits(v.as_bytes()))
            .or(exact)
            .map_or(BodyLength::Chunked, BodyLength::Length)
    }
}

/// Why a body ended before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incomplete {
    /// This many bytes of its length were still to come.
    Length(u64),
    /// The last chunk had not come.
    Chunked,
}

/// A body being read, from a buffer that fills read by read.
#[derive(Debug)]
pub enum BodyDecoder {
    /// This many bytes still to come.
    Length(u64),
    Chunked(Chunked),
    UntilClose,
}

impl BodyDecoder {
    pub fn new(length: BodyLength) -> BodyDecoder {
        match length {
            BodyLength::Empty => BodyDecoder::Length(0),
            BodyLength::Length(n) => BodyDecoder::Length(n),
            BodyLength::Chunked => BodyDecoder::Chunked(Chunked::default()),
            BodyLength::UntilClose => BodyDecoder::UntilClose,
        }
    }

    /// The next bytes of the body off the front of `buf`, if any have
    /// arrived; what follows the body stays in `buf`.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, ChunkedError> {
        match self {
            BodyDecoder::Length(left) => {
                if *left == 0 || buf.is_empty() {
                    return Ok(None);
                }
                let n = usize::try_from(*left).unwrap_or(usize::MAX).min(buf.len());
                *left -= n as u64;
                Ok(Some(buf.split_to(n).freeze()))
            }
            BodyDecoder::UntilClose => Ok((!buf.is_empty()).then(|| buf.split().freeze())),
            BodyDecoder::Chunked(dec) => match dec.decode(buf)? {
                Decoded::Data(d) => Ok(Some(d)),
                Decoded::NeedMore | Decoded::Done => Ok(None),
            },
        }
    }

    /// Whether the whole body has been read (nothing more to read for it).
    pub fn is_done(&self) -> bool {
        match self {
            BodyDecoder::Length(left) => *left == 0,
            BodyDecoder::Chunked(dec) => dec.is_done(),
            BodyDecoder::UntilClose => false,
        }
    }

    /// The connection ended (all that was read decoded): whether the body
    /// was whole.
    pub fn at_close(&self) -> Result<(), Incomplete> {
        match self {
            BodyDecoder::UntilClose => Ok(()),
            BodyDecoder::Length(0) => Ok(()),
            BodyDecoder::Length(left) => Err(Incomplete::Length(*left)),
            BodyDecoder::Chunked(dec) if dec.is_done() => Ok(()),
            BodyDecoder::Chunked(_) => Err(Incomplete::Chunked),
        }
    }
}

/// More body than its length said.
#[derive(Debug, Clone, Copy, thiserror::Error, PartialEq, Eq)]
#[error("a body longer than its content-length")]
pub struct TooLong;

/// A body being written.
#[derive(Debug, Clone, Copy)]
pub struct BodyEncoder {
    length: BodyLength,
    /// Of a length, what is still to be written.
    left: u64,
}

impl BodyEncoder {
    pub fn new(length: BodyLength) -> BodyEncoder {
        let left = match length {
            BodyLength::Length(n) => n,
            _ => 0,
        };
        BodyEncoder { length, left }
    }

    /// Whether the message has a body to write.
    pub fn has_body(&self) -> bool {
        self.length != BodyLength::Empty
    }

    /// What to write before and after `len` bytes of data (a chunk's size
    /// line and CRLF), in `line`; an error if they go past the length.
    pub fn frame<'a>(
        &mut self,
        len: usize,
        line: &'a mut [u8; 18],
    ) -> Result<(&'a [u8], &'static [u8]), TooLong> {
        match self.length {
            BodyLength::Chunked => Ok((crate::write::chunk_size_line(len, line), b"\r\n")),
            BodyLength::Length(_) => {
                self.left = self.left.checked_sub(len as u64).ok_or(TooLong)?;
                Ok((&[], &[]))
            }
            BodyLength::Empty if len > 0 => Err(TooLong),
            _ => Ok((&[], &[])),
        }
    }

    /// What ends the body (the last chunk), or how much of its length was
    /// not written (then the connection must close: the peer cannot tell).
    pub fn finish(&self) -> Result<&'static [u8], Incomplete> {
        match self.length {
            BodyLength::Chunked => Ok(crate::write::LAST_CHUNK),
            BodyLength::Length(_) if self.left > 0 => Err(Incomplete::Length(self.left)),
            _ => Ok(&[]),
        }
    }
}
