//! The codec held to hyper, which serves and sends everything the gateway
//! does not: the same bytes go through this codec and through hyper's
//! HTTP/1 server or client (over an in-memory pipe), generated with the
//! shapes requests are smuggled and responses split with.
//!
//! - Server role: whenever [`whole_request`] takes a request (the gateway's
//!   fast path answers it), hyper's server takes it too and sees the same
//!   method, target, fields and body. What the fast path leaves, hyper reads
//!   on its own, so nothing is asked of it.
//! - Client role: this codec's head reader, framing and body decoder give
//!   what hyper's client gives (status, fields, body bytes), or both fail;
//!   but for the differences in [`ALLOWED`], each named with its reason and
//!   each shown to matter below.

use std::time::Duration;

use babelgate_http1::{whole_request, BodyDecoder, ResponseReader};
use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::rt::TokioIo;
use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What a message read gave: status (0 for a request), method, target,
/// fields in order, body.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    status: u16,
    method: String,
    target: String,
    fields: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

fn fields(h: &http::HeaderMap) -> Vec<(String, Vec<u8>)> {
    h.iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect()
}

/// A guard against a hang (never an assertion on time).
const GUARD: Duration = Duration::from_secs(10);

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

// ---- server role --------------------------------------------------------------

/// The request hyper's HTTP/1 server hands its service for `wire` (sent
/// whole, then the client's end), if any.
async fn hyper_server(wire: &[u8]) -> Option<Seen> {
    let (mut client, server) = tokio::io::duplex(1 << 20);
    let (tx, rx) = std::sync::mpsc::channel();
    let svc = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
        let tx = tx.clone();
        async move {
            let (parts, body) = req.into_parts();
            let body = body.collect().await.map(|c| c.to_bytes().to_vec());
            if let Ok(body) = body {
                let _ = tx.send(Seen {
                    status: 0,
                    method: parts.method.to_string(),
                    target: parts.uri.to_string(),
                    fields: fields(&parts.headers),
                    body,
                });
            }
            Ok::<_, std::convert::Infallible>(http::Response::new(Empty::<Bytes>::new()))
        }
    });
    // Half-closed: the client's end after its request does not cancel it.
    let conn = hyper::server::conn::http1::Builder::new()
        .half_close(true)
        .serve_connection(TokioIo::new(server), svc);
    let serving = tokio::spawn(conn);
    client.write_all(wire).await.unwrap();
    client.shutdown().await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(GUARD, client.read_to_end(&mut out)).await;
    let _ = tokio::time::timeout(GUARD, serving).await;
    rx.try_iter().next()
}

fn ours_server(wire: &[u8]) -> Option<Seen> {
    let w = whole_request(wire)?;
    Some(Seen {
        status: 0,
        method: w.head.method.to_string(),
        target: w.head.uri.to_string(),
        fields: fields(&w.head.headers),
        body: wire[w.body].to_vec(),
    })
}

/// Taken here: hyper takes it the same. Returns whether it was taken.
fn check_server(rt: &tokio::runtime::Runtime, wire: &[u8]) -> bool {
    let Some(ours) = ours_server(wire) else {
        return false;
    };
    let theirs = rt.block_on(hyper_server(wire));
    assert_eq!(
        Some(&ours),
        theirs.as_ref(),
        "taken here, not so by hyper: {:?}",
        String::from_utf8_lossy(wire)
    );
    true
}

/// A header line of a request or response: `{n}` stands for the body's
/// length, `{m}` for another.
const FIELDS: &[&str] = &[
    "content-length: {n}",
    "content-length: {n}",
    "content-length: {n}",
    "Content-Length:{n}",
    "content-length: {m}",
    "content-length: {n}, {n}",
    "content-length: {n},{m}",
    "content-length: +{n}",
    "content-length: 0{n}",
    "content-length : {n}",
    "content-length: {n}x",
    "content-length:",
    "transfer-encoding: chunked",
    "Transfer-Encoding: CHUNKED",
    "transfer-encoding: gzip, chunked",
    "transfer-encoding: chunked, gzip",
    "transfer-encoding: chunked, ",
    "transfer-encoding: identity",
    "transfer-encoding: \u{ff}chunked",
    " folded continuation",
    "\tfolded continuation",
    "expect: 100-continue",
    "expect: nothing",
    "upgrade: websocket",
    "connection: upgrade",
    "connection: close",
    "connection: keep-alive, close",
    "connection: keep-alive",
    "host: example.com",
    "host: a b",
    "x-a: b",
    "x-a: c",
    "x-empty:",
    "x-tab:\tv\t ",
    "x-obs: caf\u{e9}",
    "x-ctl: a\x01b",
    "x-del: a\x7fb",
    "bad header: x",
    "x-a\t: b",
    ": no name",
    "no colon",
];

fn field_line(pick: usize, n: usize) -> Vec<u8> {
    let t = FIELDS[pick % FIELDS.len()]
        .replace("{n}", &n.to_string())
        .replace("{m}", &(n + 1).to_string());
    // `\u{e9}` as the single obs-text byte 0xe9, `\xff` as 0xff.
    t.chars()
        .map(|c| match c {
            '\u{e9}' => 0xe9,
            '\u{ff}' => 0xff,
            c => c as u8,
        })
        .collect()
}

/// A chunked body of `data`, its size lines and trailers shaped by `style`.
fn chunked(data: &[u8], style: u8) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, piece) in data.chunks(7).enumerate() {
        let size = match (style >> 1) & 3 {
            0 => format!("{:x}", piece.len()),
            1 => format!("{:X}", piece.len()),
            2 => format!("00{:x}", piece.len()),
            _ => format!("{:x} ", piece.len()),
        };
        out.extend_from_slice(size.as_bytes());
        if style & 8 != 0 && i == 0 {
            out.extend_from_slice(b";ext=\"v\";x");
        }
        out.extend_from_slice(if style & 16 != 0 && i == 1 {
            b"\n"
        } else {
            b"\r\n"
        });
        out.extend_from_slice(piece);
        out.extend_from_slice(if style & 32 != 0 && i == 0 {
            b"\n"
        } else {
            b"\r\n"
        });
    }
    if style & 1 == 0 {
        out.extend_from_slice(b"0\r\n");
        match style >> 6 {
            0 => {}
            1 => out.extend_from_slice(b"x-trailer: 1\r\n"),
            2 => out.extend_from_slice(b"bad trailer\r\n"),
            _ => out.extend_from_slice(b"x-t: 1\nx-u: 2\r\n"),
        }
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// The generator's parts of a message.
#[derive(Debug, Clone)]
struct Parts {
    start: usize,
    fields: Vec<(usize, bool)>,
    body: Vec<u8>,
    /// 0: raw; 1: chunked (see [`chunked`]).
    encode: Option<u8>,
    many: bool,
    after: usize,
    /// A plain, right `content-length` first (most messages have one).
    length: bool,
}

fn parts() -> impl Strategy<Value = Parts> {
    (
        any::<usize>(),
        prop::collection::vec((any::<usize>(), prop::bool::weighted(0.93)), 0..4),
        prop::collection::vec(
            prop::sample::select(b"ab\r\n0;: \x00\xff{}".to_vec()),
            0..24,
        ),
        prop::option::weighted(0.3, any::<u8>()),
        prop::bool::weighted(0.03),
        any::<usize>(),
        prop::bool::weighted(0.6),
    )
        .prop_map(|(start, fields, body, encode, many, after, length)| Parts {
            start,
            fields,
            body,
            encode,
            many,
            after,
            length,
        })
}

/// `start` (a request or status line), the fields, the body.
fn message(start: &[u8], p: &Parts, after: &[&[u8]]) -> Vec<u8> {
    let body = match p.encode {
        Some(style) => chunked(&p.body, style),
        None => p.body.clone(),
    };
    let mut wire = start.to_vec();
    wire.extend_from_slice(b"\r\n");
    if p.length {
        wire.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
    }
    for (pick, crlf) in &p.fields {
        wire.extend_from_slice(&field_line(*pick, body.len()));
        wire.extend_from_slice(if *crlf { b"\r\n" } else { b"\n" });
    }
    if p.many {
        for i in 0..=babelgate_http1::MAX_HEADERS {
            wire.extend_from_slice(format!("x-{i}: 1\r\n").as_bytes());
        }
    }
    wire.extend_from_slice(b"\r\n");
    wire.extend_from_slice(&body);
    wire.extend_from_slice(after[p.after % after.len()]);
    wire
}

const REQUEST_LINES: &[&str] = &[
    "POST /api/chat HTTP/1.1",
    "POST /a?b=c&d HTTP/1.1",
    "POST http://example.com/x HTTP/1.1",
    "POST * HTTP/1.1",
    "POST /a%zz HTTP/1.1",
    "POST /a b HTTP/1.1",
    "POST  /a HTTP/1.1",
    "GET /a HTTP/1.1",
    "PUT /a HTTP/1.1",
    "CONNECT example.com:443 HTTP/1.1",
    "POST /a HTTP/1.0",
    "POST /a HTTP/2.0",
    "POST /a http/1.1",
    "P\x01ST /a HTTP/1.1",
];

fn request(p: &Parts) -> Vec<u8> {
    let line = REQUEST_LINES[p.start % REQUEST_LINES.len()];
    message(
        line.as_bytes(),
        p,
        &[b"", b"", b"", b"GET / HTTP/1.1\r\n\r\n", b"\r\n"],
    )
}

/// The smuggling shapes, each written out: none may be taken here unless
/// hyper reads it the same.
const SHAPES: &[&str] = &[
    "POST /a HTTP/1.1\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
    "POST /a HTTP/1.1\r\ntransfer-encoding: chunked\r\ncontent-length: 5\r\n\r\n0\r\n\r\n",
    "POST /a HTTP/1.1\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\nab",
    "POST /a HTTP/1.1\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nab",
    "POST /a HTTP/1.1\r\ncontent-length: 1, 1\r\n\r\na",
    "POST /a HTTP/1.1\r\ncontent-length: +1\r\n\r\na",
    "POST /a HTTP/1.1\r\ncontent-length: 1\r\ntransfer-encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    "POST /a HTTP/1.1\r\ntransfer-encoding: chunked, gzip\r\ncontent-length: 1\r\n\r\na",
    "POST /a HTTP/1.1\r\ncontent-length: 1\r\n folded: 2\r\n\r\na",
    "POST /a HTTP/1.1\ncontent-length: 1\n\na",
    "POST /a HTTP/1.1\r\ncontent-length : 1\r\n\r\na",
    "POST /a HTTP/1.0\r\ncontent-length: 1\r\ntransfer-encoding: chunked\r\n\r\na",
    "POST /a HTTP/1.1\r\nexpect: 100-continue\r\ncontent-length: 1\r\n\r\na",
    "POST /a HTTP/1.1\r\nupgrade: h2c\r\nconnection: upgrade\r\ncontent-length: 1\r\n\r\na",
    "POST /a HTTP/1.1\r\ncontent-length: 1\r\n\r\naGET / HTTP/1.1\r\n\r\n",
];

#[test]
fn smuggling_shapes_are_taken_only_as_hyper_reads_them() {
    let rt = rt();
    let taken: Vec<&str> = SHAPES
        .iter()
        .filter(|s| check_server(&rt, s.as_bytes()))
        .copied()
        .collect();
    // Of these, the bare-LF head is the one this fast path takes (httparse
    // reads it for both).
    assert_eq!(taken, ["POST /a HTTP/1.1\ncontent-length: 1\n\na"]);
}

/// Runs `check` on `cases` generated parts; how many it counted.
fn generated(cases: u32, check: impl Fn(&Parts) -> bool) -> u32 {
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let counted = std::cell::Cell::new(0);
    runner
        .run(&parts(), |p| {
            counted.set(counted.get() + u32::from(check(&p)));
            Ok(())
        })
        .unwrap();
    counted.get()
}

#[test]
fn requests_taken_here_are_read_the_same_by_hyper() {
    let rt = rt();
    let taken = generated(2000, |p| check_server(&rt, &request(p)));
    // Not vacuous: many are taken (and the rest left).
    assert!(taken > 100, "{taken} taken");
}

// ---- client role --------------------------------------------------------------

/// What hyper's HTTP/1 client makes of `wire` as the answer to a POST.
async fn hyper_client(wire: &[u8]) -> Result<Seen, String> {
    let (client, mut server) = tokio::io::duplex(1 << 20);
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(client))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    // The answer once the request is in (an answer before it is one to no
    // request), then the connection's end.
    let wire = wire.to_vec();
    tokio::spawn(async move {
        let mut got = Vec::new();
        let mut b = [0u8; 1024];
        while !got.ends_with(b"\r\n\r\n{}") {
            match server.read(&mut b).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&b[..n]),
            }
        }
        let _ = server.write_all(&wire).await;
        let _ = server.shutdown().await;
        // Held until the client is done with it.
        let _ = server.read_to_end(&mut got).await;
    });
    let req = http::Request::post("/")
        .body(Full::new(Bytes::from_static(b"{}")))
        .unwrap();
    let res = tokio::time::timeout(GUARD, send.send_request(req))
        .await
        .map_err(|_| "hung".to_string())?
        .map_err(|e| e.to_string())?;
    let status = res.status().as_u16();
    let fields = fields(res.headers());
    let body = tokio::time::timeout(GUARD, res.into_body().collect())
        .await
        .map_err(|_| "hung".to_string())?
        .map_err(|e| e.to_string())?
        .to_bytes()
        .to_vec();
    Ok(Seen {
        status,
        method: String::new(),
        target: String::new(),
        fields,
        body,
    })
}

/// What this codec makes of `wire`, read whole then the connection closed.
fn ours_client(wire: &[u8]) -> Result<Seen, String> {
    let mut buf = BytesMut::from(wire);
    let (head, length) = ResponseReader::default()
        .read(&mut buf)
        .map_err(|e| e.to_string())?
        .ok_or("closed before the head")?;
    let mut dec = BodyDecoder::new(length);
    let mut body = Vec::new();
    while let Some(data) = dec.decode(&mut buf).map_err(|e| e.to_string())? {
        body.extend_from_slice(&data);
    }
    if !dec.is_done() {
        dec.at_close().map_err(|e| format!("{e:?}"))?;
    }
    Ok(Seen {
        status: head.status.as_u16(),
        method: String::new(),
        target: String::new(),
        fields: fields(&head.headers),
        body,
    })
}

/// Where this codec and hyper's client differ on purpose.
/// A difference's name, why it is kept, and whether it applies to a
/// message.
type Allowed = (&'static str, &'static str, fn(&[u8]) -> bool);

const ALLOWED: &[Allowed] = &[
    (
        "101",
        "hyper hands a 101 back for the caller to take the connection over; the gateway asked for no upgrade, so here it is an error",
        |w| w.windows(12).any(|x| x == b"HTTP/1.1 101" || x == b"HTTP/1.0 101"),
    ),
    (
        "head over 64 KiB",
        "a head is bounded at MAX_HEAD to keep a stream's memory small; hyper's buffer lets it grow to about 400 KiB",
        |w| w.len() > babelgate_http1::MAX_HEAD,
    ),
    (
        "size line over 4 KiB",
        "a chunk size line is bounded at MAX_LINE; hyper bounds a body's extensions at 16 KiB in all",
        |w| w.windows(10).any(|x| x == b";xxxxxxxxx") && w.len() > babelgate_http1::MAX_LINE,
    ),
];

/// Both fail, or both read the same; else an allowed difference, named.
fn check_client(rt: &tokio::runtime::Runtime, wire: &[u8]) -> Option<&'static str> {
    let ours = ours_client(wire);
    let theirs = rt.block_on(hyper_client(wire));
    let same = match (&ours, &theirs) {
        (Err(_), Err(_)) => true,
        (a, b) => a == b,
    };
    if same {
        return None;
    }
    let allowed = ALLOWED.iter().find(|(_, _, applies)| applies(wire));
    match allowed {
        Some((name, _, _)) => Some(name),
        None => panic!(
            "{:?}\nhere:  {ours:?}\nhyper: {theirs:?}",
            String::from_utf8_lossy(wire)
        ),
    }
}

const STATUS_LINES: &[&str] = &[
    "HTTP/1.1 200 OK",
    "HTTP/1.1 200 OK",
    "HTTP/1.1 404 Not Found",
    "HTTP/1.1 204 No Content",
    "HTTP/1.1 304 Not Modified",
    "HTTP/1.0 200 OK",
    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK",
    "HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 500 Oops",
    "HTTP/1.1 101 Switching Protocols",
    "HTTP/1.1 999 Odd",
    "HTTP/1.1 99 Low",
    "HTTP/1.1 200",
    "HTTP/1.2 200 OK",
    "SSH-2.0-OpenSSH",
];

fn response(p: &Parts) -> Vec<u8> {
    let line = STATUS_LINES[p.start % STATUS_LINES.len()];
    message(line.as_bytes(), p, &[b"", b"", b"tail"])
}

#[test]
fn each_allowed_difference_matters() {
    let rt = rt();
    let long_ext = format!(
        "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1;{}\r\na\r\n0\r\n\r\n",
        "x".repeat(babelgate_http1::MAX_LINE)
    );
    let big = format!(
        "HTTP/1.1 200 OK\r\nx-big: {}\r\ncontent-length: 0\r\n\r\n",
        "v".repeat(babelgate_http1::MAX_HEAD)
    );
    let cases: [(&str, &[u8]); 3] = [
        (
            "101",
            b"HTTP/1.1 101 Switching Protocols\r\nupgrade: x\r\n\r\n",
        ),
        ("head over 64 KiB", big.as_bytes()),
        ("size line over 4 KiB", long_ext.as_bytes()),
    ];
    for (name, wire) in cases {
        assert_eq!(check_client(&rt, wire), Some(name));
    }
    assert_eq!(cases.len(), ALLOWED.len());
}

#[test]
fn response_shapes_read_as_hyper_reads_them() {
    let rt = rt();
    let shapes: &[&[u8]] = &[
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n1\r\na\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, gzip\r\n\r\nuntil close",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntransfer-encoding: identity\r\n\r\nraw",
        b"HTTP/1.1 200 OK\r\ncontent-length: 2, 2\r\ncontent-length: 2\r\n\r\nab",
        b"HTTP/1.1 200 OK\r\ncontent-length: 2, 3\r\n\r\nab",
        b"HTTP/1.1 200 OK\r\ncontent-length: 18446744073709551613\r\n\r\nab",
        b"HTTP/1.1 200 OK\r\ncontent-length: 18446744073709551614\r\n\r\nab",
        b"HTTP/1.0 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nx: a\r\n b\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\na\r\n0\r\nbad trailer\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5 ; a=b\r\nhello\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n000000000000000000005\r\nhello\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\nab\r\n0\r\n\r\n",
    ];
    for wire in shapes {
        assert_eq!(
            check_client(&rt, wire),
            None,
            "{:?}",
            String::from_utf8_lossy(wire)
        );
    }
}

#[test]
fn responses_read_as_hyper_reads_them() {
    let rt = rt();
    let read = generated(2000, |p| {
        let wire = response(p);
        check_client(&rt, &wire).is_none() && ours_client(&wire).is_ok()
    });
    // Not vacuous: many are read (the same) by both.
    assert!(read > 100, "{read} read");
}
