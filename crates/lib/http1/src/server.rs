//! The server role's fast path: a request that can be answered from the
//! bytes already read, without a general server.

use std::ops::Range;

use http::header::{EXPECT, UPGRADE};
use http::{Method, Version};

use crate::body::BodyLength;
use crate::head::{parse_request, RequestHead};
use crate::write::connection_has;

/// A request taken whole.
#[derive(Debug)]
pub struct WholeRequest {
    pub head: RequestHead,
    /// Where its body is in the bytes given.
    pub body: Range<usize>,
    /// The client asked for the connection to close after the response.
    pub close: bool,
}

/// `buf` as one whole HTTP/1.1 request, or `None`: then a general server
/// must read it (every byte of `buf` is still to be read).
///
/// Taken: a head this codec reads (see [`parse_request`]) with one
/// `content-length` and no `transfer-encoding`, and exactly that many bytes
/// after it. Left: HTTP/1.0 (other keep-alive rules), `CONNECT`, `Expect`
/// (the client waits for an interim answer), an upgrade, a length given
/// twice or as a list (legal when equal, but a reader that disagrees is how
/// requests are smuggled), a chunked body, a partial body, bytes after the
/// body (a pipelined request).
pub fn whole_request(buf: &[u8]) -> Option<WholeRequest> {
    let (head, head_len) = parse_request(buf).ok()??;
    if head.version != Version::HTTP_11
        || head.method == Method::CONNECT
        || !head.one_length
        || head.headers.contains_key(EXPECT)
        || head.headers.contains_key(UPGRADE)
        || connection_has(&head.headers, "upgrade")
    {
        return None;
    }
    let Ok(BodyLength::Length(n)) = head.body else {
        return None;
    };
    let end = head_len.checked_add(usize::try_from(n).ok()?)?;
    if end != buf.len() {
        return None;
    }
    let close = connection_has(&head.headers, "close");
    Some(WholeRequest {
        head,
        body: head_len..end,
        close,
    })
}
