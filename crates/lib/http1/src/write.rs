//! Heads written, for both roles, and chunked framing.

use http::header::{self, HeaderMap, HeaderName};
use http::StatusCode;

use crate::body::BodyLength;

/// The last chunk of a chunked body, with no trailers.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// `{size:x}\r\n` in `buf`: a chunk's size line.
pub fn chunk_size_line(size: usize, buf: &mut [u8; 18]) -> &[u8] {
    // 16 hex digits and CRLF at most.
    let digits = (usize::BITS - size.leading_zeros()).div_ceil(4).max(1) as usize;
    for (i, slot) in buf.iter_mut().take(digits).enumerate() {
        let nibble = (size >> (4 * (digits - 1 - i))) & 0xf;
        *slot = b"0123456789abcdef"[nibble];
    }
    buf[digits] = b'\r';
    buf[digits + 1] = b'\n';
    &buf[..digits + 2]
}

/// Whether a `connection` field lists `token`.
pub fn connection_has(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// Fields a writer never copies from the headers it is given: the body's
/// framing is the writer's to say, for both roles; a request sent on to
/// another hop drops the fields that concern one connection only (RFC 9110
/// §7.6.1), where a response's headers are the server's own.
pub fn is_own(name: &HeaderName, request: bool) -> bool {
    name == header::CONTENT_LENGTH
        || name == header::TRANSFER_ENCODING
        || request
            && (name == header::CONNECTION
                || name == header::TE
                || name == header::UPGRADE
                || name == "keep-alive"
                || name == "proxy-connection")
}

fn line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// The given fields, but the writer's own, then the body's framing field.
fn fields(out: &mut Vec<u8>, headers: &HeaderMap, length: BodyLength, request: bool) {
    for (name, value) in headers {
        if !is_own(name, request) {
            line(out, name.as_str().as_bytes(), value.as_bytes());
        }
    }
    match length {
        BodyLength::Length(n) => line(
            out,
            b"content-length",
            itoa::Buffer::new().format(n).as_bytes(),
        ),
        BodyLength::Chunked => line(out, b"transfer-encoding", b"chunked"),
        BodyLength::Empty | BodyLength::UntilClose => {}
    }
}

fn size(headers: &HeaderMap) -> usize {
    64 + headers
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum::<usize>()
}

/// A response's status line and fields, in one buffer of their size; the
/// framing field, `connection: close` when `close` and the headers do not
/// say it, and `date` are added as hyper adds them.
pub fn response_head(
    status: StatusCode,
    headers: &HeaderMap,
    length: BodyLength,
    close: bool,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(size(headers));
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    fields(&mut out, headers, length, false);
    if close && !headers.contains_key(header::CONNECTION) {
        line(&mut out, b"connection", b"close");
    }
    if !headers.contains_key(header::DATE) {
        let date = httpdate::fmt_http_date(std::time::SystemTime::now());
        line(&mut out, b"date", date.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// A `POST` of `body` to `target` (a path and query): head and body in one
/// buffer, `host` written first when the headers have none.
pub fn request_bytes(target: &str, host: &str, headers: &HeaderMap, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(size(headers) + target.len() + body.len());
    out.extend_from_slice(b"POST ");
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if !headers.contains_key(header::HOST) {
        line(&mut out, b"host", host.as_bytes());
    }
    fields(
        &mut out,
        headers,
        BodyLength::Length(body.len() as u64),
        true,
    );
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}
