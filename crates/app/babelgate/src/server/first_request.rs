//! The first request of an HTTP/1.1 connection, answered without hyper when
//! it is the request a streaming gateway mostly gets: one `POST` whose head
//! and body came whole in the connection's first read, with a
//! `content-length` and nothing after it.
//!
//! Why: hyper's HTTP/1 server keeps an 8 KiB read buffer and an 8 KiB header
//! buffer for the connection's whole life, neither of which can be sized;
//! for a connection that carries one long response (an SSE stream) that was
//! most of what an open stream held. Here the request is parsed from the
//! bytes already read, the head is written from a buffer sized to it and let
//! go, and each chunk of the body is written as it comes (chunked framing
//! from a stack buffer). While the body streams, the socket is watched for
//! the client's end as hyper watches it.
//!
//! Anything else (another method, a chunked or partial body, `Expect`, an
//! upgrade, HTTP/1.0, pipelined bytes, a head hyper would refuse) is left to
//! hyper, with every byte read so far; so is every request after the first
//! on a kept-alive connection (see `listener.rs`).

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::Poll;

use babelgate_http1::{BodyEncoder, BodyLength};
use bytes::{Bytes, BytesMut};
use http::{Method, Request, Response};
use http_body::Body as _;
use http_body_util::Full;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::error::Body;

/// What is kept of bytes the client sends while its response streams (a
/// next request, sent early): past this the socket is no longer read until
/// the response ends, as hyper stops reading when its buffer is full.
const MAX_EARLY_BYTES: usize = 8 * 1024;

/// A request taken by this path.
#[derive(Debug)]
pub(super) struct FirstRequest {
    pub request: Request<Full<Bytes>>,
    /// The client asked for the connection to close after the response.
    pub close: bool,
}

/// `first` as one whole `POST` this path takes (see
/// [`babelgate_http1::whole_request`]), or `None`: hyper serves the
/// connection, from `first` on.
pub(super) fn parse(first: &[u8]) -> Option<FirstRequest> {
    let whole = babelgate_http1::whole_request(first)?;
    if whole.head.method != Method::POST {
        return None;
    }
    let body = Bytes::copy_from_slice(first.get(whole.body)?);
    let head = whole.head;
    let mut request = Request::new(Full::new(body));
    *request.method_mut() = head.method;
    *request.uri_mut() = head.uri;
    *request.version_mut() = head.version;
    *request.headers_mut() = head.headers;
    Some(FirstRequest {
        request,
        close: whole.close,
    })
}

/// How a response written here ended.
#[derive(Debug)]
pub(super) enum Ended {
    /// Written whole; the connection may serve more requests, starting with
    /// the bytes the client sent meanwhile.
    KeepAlive(Bytes),
    /// The connection is done: the client asked, or left, or the body
    /// failed or did not match its length (then the connection is cut
    /// without the last chunk, as hyper does, so the client sees the
    /// failure).
    Close,
}

/// Writes `response` to `io`; `close`: the client asked for the connection
/// to close after it.
pub(super) async fn respond<I>(io: &mut I, response: Response<Body>, close: bool) -> Ended
where
    I: AsyncRead + AsyncWrite + Unpin,
{
    let (parts, mut body) = response.into_parts();
    let close = close || babelgate_http1::connection_has(&parts.headers, "close");
    let length = BodyLength::for_response(parts.status, &parts.headers, body.size_hint().exact());
    let head = babelgate_http1::response_head(parts.status, &parts.headers, length, close);
    // Let go before the first wait: a local lives in this future until the
    // response ends, and the response's header map and extensions were
    // about 1 KiB of every open stream (15.2 -> 14.2 KiB measured).
    drop(parts);
    if write_all(io, [&head]).await.is_err() {
        return Ended::Close;
    }
    drop(head);
    let mut encoder = BodyEncoder::new(length);
    if !encoder.has_body() {
        return end(io, close, BytesMut::new()).await;
    }
    let mut early = BytesMut::new();
    // Small: it lives as long as the response, and what it mostly reads is
    // nothing (the client's end).
    let mut probe = [0u8; 128];
    loop {
        // The next frame, or the client's end while it is awaited.
        let watching = early.len() < MAX_EARLY_BYTES;
        let next = std::future::poll_fn(|cx| {
            if let Poll::Ready(frame) = Pin::new(&mut body).poll_frame(cx) {
                return Poll::Ready(Next::Frame(frame));
            }
            if watching {
                let mut buf = tokio::io::ReadBuf::new(&mut probe);
                if let Poll::Ready(r) = Pin::new(&mut *io).poll_read(cx, &mut buf) {
                    return Poll::Ready(match r {
                        Ok(()) if !buf.filled().is_empty() => Next::Early(buf.filled().len()),
                        _ => Next::Gone,
                    });
                }
            }
            Poll::Pending
        })
        .await;
        match next {
            Next::Frame(None) => break,
            Next::Frame(Some(Err(e))) => {
                tracing::debug!(error = %e, "response body failed: connection cut");
                return Ended::Close;
            }
            Next::Frame(Some(Ok(frame))) => {
                // Trailers have no place in these responses: dropped.
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                if data.is_empty() {
                    continue;
                }
                let mut line = [0u8; 18];
                // More than the length said is not sent: cut.
                let Ok((before, after)) = encoder.frame(data.len(), &mut line) else {
                    return Ended::Close;
                };
                if write_all(io, [before, &data, after]).await.is_err() {
                    return Ended::Close;
                }
            }
            Next::Early(n) => early.extend_from_slice(probe.get(..n).unwrap_or_default()),
            Next::Gone => return Ended::Close,
        }
    }
    match encoder.finish() {
        Ok(last) if write_all(io, [last]).await.is_ok() => end(io, close, early).await,
        // A body shorter than its length: the client must not wait for
        // the rest on a connection that goes on.
        _ => Ended::Close,
    }
}

async fn end<I: AsyncWrite + Unpin>(io: &mut I, close: bool, early: BytesMut) -> Ended {
    if close {
        let _ = io.shutdown().await;
        return Ended::Close;
    }
    Ended::KeepAlive(early.freeze())
}

enum Next {
    Frame(Option<Result<http_body::Frame<Bytes>, io::Error>>),
    /// The client sent this many bytes (into the probe) before the end.
    Early(usize),
    /// The client closed its side, or the socket failed.
    Gone,
}

/// Writes every byte of `parts`, in as few writes as the socket allows, then
/// flushes (a TLS stream holds what it was given until then).
async fn write_all<I: AsyncWrite + Unpin, const N: usize>(
    io: &mut I,
    parts: [&[u8]; N],
) -> io::Result<()> {
    let mut slices = parts.map(IoSlice::new);
    let mut bufs = &mut slices[..];
    while bufs.iter().any(|b| !b.is_empty()) {
        let n = io.write_vectored(bufs).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut bufs, n);
    }
    io.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderValue, StatusCode, Version};
    use std::sync::Arc;
    use tokio::io::AsyncReadExt;

    const POST: &[u8] = b"POST /api/chat HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";

    #[test]
    fn a_whole_post_is_taken() {
        let taken = parse(POST).expect("taken");
        assert_eq!(taken.request.method(), Method::POST);
        assert_eq!(taken.request.uri(), "/api/chat");
        assert_eq!(taken.request.version(), Version::HTTP_11);
        assert_eq!(taken.request.headers()["content-type"], "application/json");
        assert!(!taken.close);
        assert!(parse(
            b"POST /a?b=c HTTP/1.1\r\nConnection: keep-alive, close\r\ncontent-length: 0\r\n\r\n"
        )
        .is_some_and(|l| l.close && l.request.uri() == "/a?b=c"));
    }

    #[test]
    fn everything_else_is_left_to_hyper() {
        let refused: &[&[u8]] = &[
            // not whole yet
            b"POST /api/chat HTTP/1.1\r\ncontent-length: 2\r\n",
            b"POST /api/chat HTTP/1.1\r\ncontent-length: 2\r\n\r\n{",
            // pipelined: a second request after the first
            b"POST /a HTTP/1.1\r\ncontent-length: 0\r\n\r\nGET / HTTP/1.1\r\n\r\n",
            // not a POST, not HTTP/1.1
            b"GET /a HTTP/1.1\r\ncontent-length: 0\r\n\r\n",
            b"POST /a HTTP/1.0\r\ncontent-length: 0\r\n\r\n",
            // no length, a chunked body, two lengths, a length that is not one
            b"POST /a HTTP/1.1\r\n\r\n",
            b"POST /a HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
            b"POST /a HTTP/1.1\r\ncontent-length: 0\r\ncontent-length: 0\r\n\r\n",
            b"POST /a HTTP/1.1\r\ncontent-length: +0\r\n\r\n",
            b"POST /a HTTP/1.1\r\ncontent-length: 99999999999999999999999\r\n\r\n",
            // asks to be told to go on, or for another protocol
            b"POST /a HTTP/1.1\r\nexpect: 100-continue\r\ncontent-length: 0\r\n\r\n",
            b"POST /a HTTP/1.1\r\nconnection: upgrade\r\nupgrade: websocket\r\ncontent-length: 0\r\n\r\n",
            // what hyper refuses, it refuses itself
            b"POST /a HTTP/1.1\r\nbad header: x\r\ncontent-length: 0\r\n\r\n",
            b"POST a b HTTP/1.1\r\ncontent-length: 0\r\n\r\n",
            b"",
        ];
        for r in refused {
            assert!(parse(r).is_none(), "{:?}", String::from_utf8_lossy(r));
        }
        let many: String = (0..babelgate_http1::MAX_HEADERS + 1)
            .map(|i| format!("x-{i}: y\r\n"))
            .collect();
        let req = format!("POST /a HTTP/1.1\r\n{many}content-length: 0\r\n\r\n");
        assert!(parse(req.as_bytes()).is_none());
    }

    fn response(body: Body, status: StatusCode) -> Response<Body> {
        let mut r = Response::new(body);
        *r.status_mut() = status;
        r.headers_mut().insert(
            "content-type",
            HeaderValue::from_static("text/event-stream"),
        );
        r
    }

    fn streamed(chunks: Vec<Result<&'static str, io::Error>>) -> Body {
        use http_body_util::BodyExt;
        let frames = futures_util::stream::iter(
            chunks
                .into_iter()
                .map(|c| c.map(|s| http_body::Frame::data(Bytes::from(s)))),
        );
        http_body_util::StreamBody::new(frames).boxed()
    }

    /// What the client read, the client's end of the pair closed after.
    async fn exchange(resp: Response<Body>, close: bool, client_sends: &[u8]) -> (String, Ended) {
        let (mut client, mut server) = tokio::io::duplex(64 * 1024);
        client.write_all(client_sends).await.unwrap();
        let ended = respond(&mut server, resp, close).await;
        drop(server);
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.unwrap();
        (String::from_utf8(got).unwrap(), ended)
    }

    #[tokio::test]
    async fn a_stream_is_written_chunked_and_ended() {
        let body = streamed(vec![Ok("data: a\n\n"), Ok(""), Ok("data: bc\n\n")]);
        let (got, ended) = exchange(response(body, StatusCode::OK), false, b"").await;
        let (head, rest) = got.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(
            head.contains("\r\ncontent-type: text/event-stream"),
            "{head}"
        );
        assert!(head.contains("\r\ntransfer-encoding: chunked"), "{head}");
        assert!(head.contains("\r\ndate: "), "{head}");
        assert!(!head.contains("connection"), "{head}");
        assert_eq!(rest, "9\r\ndata: a\n\n\r\na\r\ndata: bc\n\n\r\n0\r\n\r\n");
        assert!(matches!(ended, Ended::KeepAlive(b) if b.is_empty()));
    }

    #[tokio::test]
    async fn a_body_of_known_length_is_sent_with_it() {
        use http_body_util::BodyExt;
        let body = Full::new(Bytes::from_static(b"{\"error\":{}}"))
            .map_err(|e| match e {})
            .boxed();
        let (got, ended) = exchange(response(body, StatusCode::BAD_REQUEST), true, b"").await;
        assert!(got.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{got}");
        assert!(got.contains("\r\ncontent-length: 12\r\n"), "{got}");
        assert!(got.contains("\r\nconnection: close\r\n"), "{got}");
        assert!(got.ends_with("\r\n\r\n{\"error\":{}}"), "{got}");
        assert!(matches!(ended, Ended::Close));
    }

    #[tokio::test]
    async fn a_failed_body_cuts_the_connection_without_the_last_chunk() {
        let body = streamed(vec![Ok("data: a\n\n"), Err(io::Error::other("run failed"))]);
        let (got, ended) = exchange(response(body, StatusCode::OK), false, b"").await;
        assert!(got.ends_with("9\r\ndata: a\n\n\r\n"), "{got}");
        assert!(matches!(ended, Ended::Close));
    }

    /// A body that has nothing yet, then `data`, once `go` is sent.
    fn later(data: &'static str) -> (tokio::sync::oneshot::Sender<()>, Body) {
        use http_body_util::BodyExt;
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let frames = futures_util::stream::once(async move {
            let _ = wait.await;
            Ok::<_, io::Error>(http_body::Frame::data(Bytes::from(data)))
        });
        (go, http_body_util::StreamBody::new(frames).boxed())
    }

    #[tokio::test]
    async fn bytes_sent_while_the_body_streams_are_kept_for_the_next_request() {
        let (mut client, mut server) = tokio::io::duplex(64 * 1024);
        let (go, body) = later("data: a\n\n");
        let respond = tokio::spawn(async move {
            let ended = respond(&mut server, response(body, StatusCode::OK), false).await;
            (ended, server)
        });
        // The head is out; the client sends its next request before the end.
        let mut head = [0u8; 16];
        client.read_exact(&mut head).await.unwrap();
        client
            .write_all(b"GET /next HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        go.send(()).unwrap();
        let (ended, mut server) = respond.await.unwrap();
        let Ended::KeepAlive(early) = ended else {
            panic!("not kept alive");
        };
        // Read while the body waited (the pause above makes that likely),
        // or still in the socket: either way, all of it, once.
        let mut all = early.to_vec();
        let mut rest = [0u8; 64];
        if let Some(n) = futures_util::FutureExt::now_or_never(server.read(&mut rest)) {
            all.extend_from_slice(&rest[..n.unwrap()]);
        }
        assert_eq!(all, b"GET /next HTTP/1.1\r\n\r\n");
    }

    #[tokio::test]
    async fn the_response_head_is_let_go_while_the_body_streams() {
        // What the head holds (headers, extensions) is not kept for the
        // stream's life: it was about 1 KiB of every open stream.
        let (mut client, mut server) = tokio::io::duplex(64 * 1024);
        let (go, body) = later("data: a\n\n");
        let held = Arc::new(());
        let mut resp = response(body, StatusCode::OK);
        resp.extensions_mut().insert(held.clone());
        let respond = tokio::spawn(async move { respond(&mut server, resp, true).await });
        let mut head = [0u8; 12];
        client.read_exact(&mut head).await.unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
        assert_eq!(Arc::strong_count(&held), 1, "the head is still held");
        go.send(()).unwrap();
        assert!(matches!(respond.await.unwrap(), Ended::Close));
    }

    #[tokio::test]
    async fn a_client_that_leaves_ends_the_response() {
        let (mut client, mut server) = tokio::io::duplex(64 * 1024);
        // A body that never ends: only the client's end can end this.
        let (_go, body) = later("never");
        client.shutdown().await.unwrap();
        let ended = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            respond(&mut server, response(body, StatusCode::OK), false),
        )
        .await
        .expect("ended");
        assert!(matches!(ended, Ended::Close));
    }
}
