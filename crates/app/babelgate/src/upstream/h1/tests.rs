use super::*;
use futures_util::StreamExt;
use http::{header, HeaderValue};
use tokio::net::TcpListener;

/// An upstream that reads one request and answers `pieces`, written
/// one by one (each its own write), then closes; the request read.
async fn upstream(pieces: Vec<Vec<u8>>) -> (url::Url, tokio::task::JoinHandle<Vec<u8>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/agent?x=1", l.local_addr().unwrap())
        .parse()
        .unwrap();
    let task = tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut req = Vec::new();
        let mut b = [0u8; 4096];
        // The head, then the body its content-length gives.
        loop {
            let n = s.read(&mut b).await.unwrap();
            req.extend_from_slice(&b[..n]);
            if let Some(end) = req.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&req[..end]).to_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .unwrap()
                    .parse()
                    .unwrap();
                if req.len() >= end + 4 + len {
                    break;
                }
            }
        }
        for p in pieces {
            if s.write_all(&p).await.is_err() {
                break;
            }
            s.flush().await.unwrap();
            tokio::task::yield_now().await;
        }
        req
    });
    (url, task)
}

async fn post(pieces: &[&[u8]]) -> (Result<Response, Error>, Vec<u8>) {
    let (url, task) = upstream(pieces.iter().map(|p| p.to_vec()).collect()).await;
    let mut headers = HeaderMap::new();
    headers.insert("x-one", HeaderValue::from_static("1"));
    let r = Client::new(Duration::from_secs(5))
        .post(&url, &headers, b"{\"a\":1}")
        .await;
    let req = task.await.unwrap();
    (r, req)
}

/// The body's bytes, and its error if it ended in one.
async fn read_all(body: Body) -> (Vec<u8>, Option<String>) {
    let mut body = std::pin::pin!(body);
    let mut got = Vec::new();
    while let Some(r) = body.next().await {
        match r {
            Ok(b) => got.extend_from_slice(&b),
            Err(e) => return (got, Some(e.to_string())),
        }
    }
    (got, None)
}

const SSE: &[u8] = b"data: {\"type\":\"RUN_STARTED\"}\n\ndata: {\"type\":\"RUN_FINISHED\"}\n\n";

#[tokio::test]
async fn the_request_is_one_post_with_its_own_framing() {
    let (url, task) = upstream(vec![b"HTTP/1.1 204 No Content\r\n\r\n".to_vec()]).await;
    let mut headers = HeaderMap::new();
    headers.insert("x-one", HeaderValue::from_static("1"));
    headers.append("x-one", HeaderValue::from_static("2"));
    // Framing and connection headers are the client's own.
    headers.insert("content-length", HeaderValue::from_static("999"));
    headers.insert("transfer-encoding", HeaderValue::from_static("chunked"));
    headers.insert("connection", HeaderValue::from_static("upgrade"));
    let r = Client::new(Duration::from_secs(5))
        .post(&url, &headers, b"{}")
        .await
        .unwrap();
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let req = String::from_utf8(task.await.unwrap()).unwrap();
    let port = url.port().unwrap();
    assert_eq!(
            req,
            format!(
                "POST /agent?x=1 HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nx-one: 1\r\nx-one: 2\r\ncontent-length: 2\r\n\r\n{{}}"
            )
        );
}

#[test]
fn a_host_given_is_kept_and_a_default_port_is_not_written() {
    let url: url::Url = "http://example.com:80/a%20b".parse().unwrap();
    let req = request(&url, &HeaderMap::new(), b"");
    assert!(req.starts_with(b"POST /a%20b HTTP/1.1\r\nhost: example.com\r\n"));
    let mut h = HeaderMap::new();
    h.insert(header::HOST, HeaderValue::from_static("other"));
    let req = String::from_utf8(request(&url, &h, b"")).unwrap();
    assert_eq!(
        req,
        "POST /a%20b HTTP/1.1\r\nhost: other\r\ncontent-length: 0\r\n\r\n"
    );
}

#[tokio::test]
async fn bodies_end_as_their_framing_says() {
    let chunked =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
    let head_by_bytes: Vec<Vec<u8>> = b"HTTP/1.1 200 OK\r\ncontent-length: 61\n\r\n"
        .chunks(1)
        .map(<[u8]>::to_vec)
        .chain([SSE.to_vec()])
        .collect();
    let cases: Vec<Vec<Vec<u8>>> = vec![
        // Chunked, its chunks cut across writes.
        vec![
            chunked.to_vec(),
            [
                &format!("{:x}\r\n", SSE.len() - 10).into_bytes()[..],
                &SSE[..SSE.len() - 10],
                b"\r\n0",
            ]
            .concat(),
            [&b"a\r\n"[..], &SSE[SSE.len() - 10..], b"\r\n0\r\n\r\n"].concat(),
        ],
        // The head and the body in one write, after an interim 100.
        vec![[
            &b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 61\r\n\r\n"[..],
            SSE,
        ]
        .concat()],
        // The head a byte a write (its end a bare LF, then CRLF).
        head_by_bytes,
        // Neither: up to the connection's end (an HTTP/1.0 answer).
        vec![b"HTTP/1.0 200 OK\r\n\r\n".to_vec(), SSE.to_vec()],
        // A coding other than chunked last: the connection's end too.
        vec![
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: identity\r\ncontent-length: 3\r\n\r\n".to_vec(),
            SSE.to_vec(),
        ],
    ];
    for pieces in cases {
        let refs: Vec<&[u8]> = pieces.iter().map(|p| p.as_slice()).collect();
        let (r, req) = post(&refs).await;
        assert!(req.ends_with(b"\r\n\r\n{\"a\":1}"));
        let r = r.unwrap();
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(read_all(r.body).await, (SSE.to_vec(), None), "{pieces:?}");
    }
}

#[tokio::test]
async fn a_body_cut_short_is_an_error_not_an_end() {
    let cases: [(&[u8], &str); 3] = [
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\ndata: x\n\n",
            "the upstream closed the connection 91 bytes before the end its content-length gave",
        ),
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n9\r\ndata: x\n\n\r\n",
            "the upstream closed the connection before the body's last chunk",
        ),
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n9\r\ndata: x\n\nXX",
            "invalid chunked body: chunk data not followed by CRLF",
        ),
    ];
    for (wire, why) in cases {
        let (r, _) = post(&[wire]).await;
        let (got, err) = read_all(r.unwrap().body).await;
        assert_eq!(got, b"data: x\n\n");
        assert_eq!(err.as_deref(), Some(why));
    }
}

#[tokio::test]
async fn bad_heads_are_refused() {
    let big = format!(
        "HTTP/1.1 200 OK\r\nx-big: {}\r\n\r\n",
        "v".repeat(babelgate_http1::MAX_HEAD)
    );
    let many: String = (0..=babelgate_http1::MAX_HEADERS)
        .map(|i| format!("x-{i}: 1\r\n"))
        .collect();
    let many = format!("HTTP/1.1 200 OK\r\n{many}\r\n");
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 5x\r\n\r\n".to_vec(),
            "invalid response head: an invalid content-length",
        ),
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\n".to_vec(),
            "invalid response head: content-lengths that differ",
        ),
        (
            b"HTTP/1.1 101 Switching Protocols\r\n\r\n".to_vec(),
            "invalid response head: 101 to a request that asked no upgrade",
        ),
        (
            b"SSH-2.0-OpenSSH\r\n\r\n".to_vec(),
            "invalid response head: invalid HTTP version",
        ),
        (big.into_bytes(), "invalid response head: over 64 KiB"),
        (many.into_bytes(), "invalid response head: too many headers"),
        (
            b"HTTP/1.1 200 OK\r\ncontent-".to_vec(),
            "the upstream closed the connection before its response head",
        ),
    ];
    for (wire, why) in cases {
        let (r, _) = post(&[&wire]).await;
        assert_eq!(r.err().map(|e| e.to_string()).as_deref(), Some(why));
    }
}

#[tokio::test]
async fn equal_content_lengths_are_one() {
    let (r, _) = post(&[b"HTTP/1.1 200 OK\r\ncontent-length: 2, 2\r\n\r\nok"]).await;
    assert_eq!(read_all(r.unwrap().body).await, (b"ok".to_vec(), None));
}

#[tokio::test]
async fn a_refused_connection_is_unreachable_not_a_timeout() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url: url::Url = format!("http://{}/", l.local_addr().unwrap())
        .parse()
        .unwrap();
    drop(l);
    let e = Client::new(Duration::from_secs(5))
        .post(&url, &HeaderMap::new(), b"")
        .await
        .err()
        .unwrap();
    assert!(matches!(e, Error::Connect { .. }), "{e}");
    assert!(!e.is_timeout());
}

/// The body of a response from an upstream that reads the request,
/// writes `parts[0]`, then each next part once the test says go: a
/// stream paced by the test.
async fn paced(parts: Vec<&'static [u8]>) -> (Body, tokio::sync::mpsc::Sender<()>) {
    let (go, mut wait) = tokio::sync::mpsc::channel::<()>(1);
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url: url::Url = format!("http://{}/", l.local_addr().unwrap())
        .parse()
        .unwrap();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut b = [0u8; 1024];
        let _ = s.read(&mut b).await.unwrap();
        for (i, part) in parts.into_iter().enumerate() {
            if i > 0 && wait.recv().await.is_none() {
                return;
            }
            s.write_all(part).await.unwrap();
        }
    });
    let r = Client::new(Duration::from_secs(5))
        .post(&url, &HeaderMap::new(), b"")
        .await
        .unwrap();
    (r.body, go)
}

#[tokio::test]
async fn a_stream_waiting_for_its_next_event_holds_no_read_buffer() {
    let (mut body, go) = paced(vec![
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n9\r\ndata: x\n\n\r\n",
        b"9\r\ndata: y\n\n\r\n0\r\n\r\n",
    ])
    .await;
    let first = body.next().await.unwrap().unwrap();
    assert_eq!(&first[..], b"data: x\n\n");
    // Nothing more has come: the next read waits with no buffer.
    let waiting = futures_util::poll!(body.next());
    assert!(waiting.is_pending());
    assert_eq!(body.buffered_capacity(), 0);
    go.send(()).await.unwrap();
    assert_eq!(read_all(body).await, (b"data: y\n\n".to_vec(), None));
}

#[tokio::test]
async fn a_read_that_drained_the_socket_is_not_followed_by_an_empty_one() {
    // Each event is read on its own, as a stream paced by its upstream
    // is: after a read shorter than its room, the next poll must wait
    // for the socket, not ask the kernel and hear EAGAIN.
    let event: &[u8] = b"9\r\ndata: x\n\n\r\n";
    let (mut body, go) = paced(vec![
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
        event,
        event,
        event,
        b"0\r\n\r\n",
    ])
    .await;
    for _ in 0..3 {
        go.send(()).await.unwrap();
        let event = body.next().await.unwrap().unwrap();
        assert_eq!(&event[..], b"data: x\n\n");
        assert!(futures_util::poll!(body.next()).is_pending());
    }
    go.send(()).await.unwrap();
    assert!(body.next().await.is_none());
    assert_eq!(body.empty_reads(), 0);
}
