//! Heads read, for both roles: the request line or status line and the
//! header fields, through httparse, into `http`'s types.

use bytes::{Buf, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, Version};

use crate::body::{BodyLength, FramingError, RequestFraming};
use crate::{MAX_HEAD, MAX_HEADERS};

/// Why a head is not one this codec takes.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HeadError {
    /// httparse's reason (an invalid token, version, too many headers...).
    #[error("{0}")]
    Syntax(#[from] httparse::Error),
    #[error("over {} KiB", MAX_HEAD / 1024)]
    TooLarge,
    #[error("header name `{0}`")]
    Name(String),
    #[error("the value of `{0}`")]
    Value(String),
    #[error("the request target")]
    Target,
    #[error("the method")]
    Method,
    #[error("no status code")]
    Status,
    #[error("101 to a request that asked no upgrade")]
    Upgrade,
    #[error(transparent)]
    Framing(#[from] FramingError),
}

/// A request head.
#[derive(Debug)]
pub struct RequestHead {
    pub method: Method,
    pub uri: Uri,
    pub version: Version,
    pub headers: HeaderMap,
    /// How its body is delimited (hyper's server rules), or why that is
    /// not clear.
    pub body: Result<BodyLength, FramingError>,
    /// Whether the body's length came from one `content-length` field
    /// alone: no repeat, no `transfer-encoding` beside it.
    pub(crate) one_length: bool,
}

/// A response head.
#[derive(Debug)]
pub struct ResponseHead {
    pub version: Version,
    pub status: StatusCode,
    pub headers: HeaderMap,
}

fn version(v: Option<u8>) -> Version {
    if v == Some(1) {
        Version::HTTP_11
    } else {
        Version::HTTP_10
    }
}

/// httparse's fields as a [`HeaderMap`], each field seen by `see` in wire
/// order.
fn fields(
    parsed: &[httparse::Header<'_>],
    mut see: impl FnMut(&HeaderName, &HeaderValue),
) -> Result<HeaderMap, HeadError> {
    let mut headers = HeaderMap::with_capacity(parsed.len());
    for h in parsed {
        let name = HeaderName::from_bytes(h.name.as_bytes())
            .map_err(|_| HeadError::Name(h.name.into()))?;
        let value =
            HeaderValue::from_bytes(h.value).map_err(|_| HeadError::Value(h.name.into()))?;
        see(&name, &value);
        headers.append(name, value);
    }
    Ok(headers)
}

/// Trailer fields (a chunked body's), as a head's fields are read.
pub(crate) fn trailer_fields(block: &[u8]) -> Result<HeaderMap, HeadError> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    match httparse::parse_headers(block, &mut slots)? {
        httparse::Status::Complete((_, parsed)) => fields(parsed, |_, _| {}),
        httparse::Status::Partial => Err(HeadError::Syntax(httparse::Error::NewLine)),
    }
}

/// A head's length once it has all arrived, if within [`MAX_HEAD`]; an
/// error once `read` bytes without its end pass it.
fn within_limit(parsed: httparse::Status<usize>, read: usize) -> Result<Option<usize>, HeadError> {
    match parsed {
        httparse::Status::Complete(len) if len <= MAX_HEAD => Ok(Some(len)),
        httparse::Status::Partial if read < MAX_HEAD => Ok(None),
        _ => Err(HeadError::TooLarge),
    }
}

/// A request head off the front of `buf` and its length, `None` while it has
/// not all arrived.
pub fn parse_request(buf: &[u8]) -> Result<Option<(RequestHead, usize)>, HeadError> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut slots);
    let Some(len) = within_limit(req.parse(buf)?, buf.len())? else {
        return Ok(None);
    };
    let version = version(req.version);
    let method = Method::from_bytes(req.method.unwrap_or_default().as_bytes())
        .map_err(|_| HeadError::Method)?;
    let uri = Uri::try_from(req.path.unwrap_or_default()).map_err(|_| HeadError::Target)?;
    let mut framing = RequestFraming::new(version);
    let headers = fields(req.headers, |n, v| framing.see(n, v))?;
    let one_length = framing.one_length();
    Ok(Some((
        RequestHead {
            method,
            uri,
            version,
            headers,
            body: framing.finish(),
            one_length,
        },
        len,
    )))
}

/// A response head off the front of `buf` and its length, `None` while it
/// has not all arrived.
pub fn parse_response(buf: &[u8]) -> Result<Option<(ResponseHead, usize)>, HeadError> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut res = httparse::Response::new(&mut slots);
    let Some(len) = within_limit(res.parse(buf)?, buf.len())? else {
        return Ok(None);
    };
    let status = res
        .code
        .and_then(|c| StatusCode::from_u16(c).ok())
        .ok_or(HeadError::Status)?;
    let headers = fields(res.headers, |_, _| {})?;
    Ok(Some((
        ResponseHead {
            version: version(res.version),
            status,
            headers,
        },
        len,
    )))
}

/// Reads the final response head to a request that asked no upgrade, from
/// a buffer that fills read by read: interim (1xx) responses are read and
/// dropped, a head is parsed once its end has arrived (not once per read).
#[derive(Debug, Default)]
pub struct ResponseReader {
    /// What of the buffer has been looked at for a head's end.
    scanned: usize,
}

impl ResponseReader {
    /// The final head off the front of `buf`, with its body's length, once
    /// it has all arrived; what follows it stays in `buf`.
    pub fn read(
        &mut self,
        buf: &mut BytesMut,
    ) -> Result<Option<(ResponseHead, BodyLength)>, HeadError> {
        loop {
            let whole = has_blank_line(buf, self.scanned);
            self.scanned = buf.len();
            let parsed = if whole { parse_response(buf)? } else { None };
            let Some((head, len)) = parsed else {
                if buf.len() >= MAX_HEAD {
                    return Err(HeadError::TooLarge);
                }
                return Ok(None);
            };
            buf.advance(len);
            // What follows is looked at afresh.
            self.scanned = 0;
            if head.status == StatusCode::SWITCHING_PROTOCOLS {
                return Err(HeadError::Upgrade);
            }
            if head.status.is_informational() {
                continue;
            }
            let length = BodyLength::of_response(&head)?;
            return Ok(Some((head, length)));
        }
    }

    /// Why the connection closed with no final head: what is wrong with the
    /// bytes it left in `buf`, if anything, else `None` (the head never came
    /// whole). Read whole, a bad head fails at once; read in pieces, the
    /// head is parsed only once a blank line came, so a bad one without any
    /// waits for the close: parsed here, it fails the same way, whatever
    /// the reads were.
    pub fn at_close(&mut self, buf: &[u8]) -> Option<HeadError> {
        self.scanned = 0;
        parse_response(buf).err()
    }
}

/// Whether `buf` from `from` on (with the 3 bytes before, where an end may
/// have started) holds an empty line, without which no head is whole.
fn has_blank_line(buf: &[u8], from: usize) -> bool {
    buf.get(from.saturating_sub(3)..)
        .is_some_and(|b| b.windows(2).any(|w| w == b"\n\n") || b.windows(3).any(|w| w == b"\n\r\n"))
}
