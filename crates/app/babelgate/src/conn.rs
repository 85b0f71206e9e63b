//! Deadlines of one client connection, whatever its protocol.
//!
//! hyper's own header timer starts only once HTTP/1 has been detected and
//! runs while a keep-alive connection idles; HTTP/2 has none. So the
//! connection task watches the connection itself: from accept, a request
//! must arrive within `request_read_timeout` (a silent client, a partial
//! HTTP/2 preface or a partial head is dropped); with no request in flight
//! the connection is closed after `keepalive_timeout`, or after
//! `request_read_timeout` from the first byte of a next HTTP/1 request that
//! never completes. A request's body must arrive by its [`ReadDeadline`].
//!
//! A plain HTTP/1 client caught mid-head is told why before the close: the
//! watchdog asks [`Watched`] to write a 408 `request_timeout` on the socket
//! and then end the read side, so hyper (which owns the socket and answers
//! an incomplete head with nothing) sees the end of its input.
//!
//! A client that stops reading is given up on here too, as one that left:
//! every write to the connection goes through [`Watched`], and a write that
//! makes no progress for the route's `client_stall_timeout_ms` fails, which
//! ends the connection (hyper's, the first-request path's or a WebSocket's) and drops
//! the response body: the stream then ends as on a disconnect. An HTTP/2
//! stream whose flow-control window stays closed blocks no socket write, so
//! each such response is watched on its own ([`respond`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::task::AtomicWaker;
use http_body_util::BodyExt;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::Body;
use crate::metrics::Metrics;

/// A response's client stall deadline (a response extension, set for the
/// responses of a route: its `client_stall_timeout_ms`, `None` when off).
/// Responses without one get [`crate::config::DEFAULT_CLIENT_STALL_TIMEOUT_MS`].
#[derive(Debug, Clone, Copy)]
pub struct ClientStall(pub Option<Duration>);

/// The stall deadline kept as milliseconds; this value means none.
const STALL_OFF: u64 = u64::MAX;

fn stall_ms(limit: Option<Duration>) -> u64 {
    limit.map_or(STALL_OFF, |d| {
        u64::try_from(d.as_millis()).unwrap_or(STALL_OFF).max(1)
    })
}

/// When the body of a request must have arrived whole (a request extension).
#[derive(Debug, Clone, Copy)]
pub struct ReadDeadline(pub Instant);

/// The client's address (a request extension; set by the accept loop, or by
/// whoever mounts [`crate::server::Gateway::into_service`]).
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr(pub std::net::SocketAddr);

/// The client's address, as the accept loop or the embedding server set it
/// (unspecified without it: every caller of a route without auth then
/// shares one per-address limit).
pub fn peer_of<B>(req: &http::Request<B>) -> std::net::SocketAddr {
    req.extensions()
        .get::<PeerAddr>()
        .map_or(std::net::SocketAddr::from(([0, 0, 0, 0], 0)), |p| p.0)
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    pub read: Duration,
    pub keepalive: Duration,
}

#[derive(Debug)]
struct Inner {
    opened: Instant,
    http2: bool,
    requests: u64,
    active: usize,
    idle_since: Instant,
    /// First byte read since the connection went idle (the start of a next
    /// HTTP/1 request head).
    byte_since_idle: Option<Instant>,
    /// Bytes of a request head have arrived and its head is not complete
    /// (the first request's bytes count too).
    mid_head: bool,
    /// The connection's first bytes were the start of the HTTP/2 preface.
    h2_preface: bool,
}

/// Why the watchdog closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expired {
    /// A request did not arrive in time.
    Read,
    /// Idle keep-alive.
    Idle,
}

#[derive(Debug)]
pub(crate) struct ConnState {
    inner: Mutex<Inner>,
    changed: Notify,
    timeouts: Timeouts,
    /// Set by the watchdog: [`Watched`] writes the 408 and ends the reads.
    answer_timeout: AtomicBool,
    /// The task reading the socket, woken to write that answer.
    reader: AtomicWaker,
    /// How long a write may make no progress (ms; [`STALL_OFF`]: forever):
    /// the deadline of the response being written (see [`respond`]).
    stall_ms: AtomicU64,
    /// An HTTP/2 response has set `stall_ms` (later ones only lengthen it).
    h2_stall_set: AtomicBool,
    metrics: MetricsRef,
}

/// The gateway's metrics, as a connection keeps them (shown as nothing).
struct MetricsRef(Arc<Metrics>);

impl std::fmt::Debug for MetricsRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl ConnState {
    pub fn new(timeouts: Timeouts, metrics: Arc<Metrics>) -> Arc<ConnState> {
        let now = Instant::now();
        Arc::new(ConnState {
            inner: Mutex::new(Inner {
                opened: now,
                http2: false,
                requests: 0,
                active: 0,
                idle_since: now,
                byte_since_idle: None,
                mid_head: false,
                h2_preface: false,
            }),
            changed: Notify::new(),
            timeouts,
            answer_timeout: AtomicBool::new(false),
            reader: AtomicWaker::new(),
            stall_ms: AtomicU64::new(crate::config::DEFAULT_CLIENT_STALL_TIMEOUT_MS),
            h2_stall_set: AtomicBool::new(false),
            metrics: MetricsRef(metrics),
        })
    }

    /// How long a write may make no progress, if there is a limit.
    fn stall_limit(&self) -> Option<Duration> {
        match self.stall_ms.load(Ordering::Relaxed) {
            STALL_OFF => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding this lock cannot leave it inconsistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// When the connection must be closed, and why; `None` while requests
    /// are in flight.
    pub fn deadline(&self) -> Option<(Instant, Expired)> {
        let i = self.lock();
        let t = self.timeouts;
        if i.active > 0 {
            return None;
        }
        if i.requests == 0 {
            return Some((i.opened + t.read, Expired::Read));
        }
        let idle = (i.idle_since + t.keepalive, Expired::Idle);
        match i.byte_since_idle {
            Some(b) if !i.http2 && b + t.read < idle.0 => Some((b + t.read, Expired::Read)),
            _ => Some(idle),
        }
    }

    /// Wakes the watchdog when the deadline may have moved.
    pub async fn changed(&self) {
        self.changed.notified().await
    }

    /// A request's head has arrived: the connection is busy until the
    /// returned guard is dropped (with the response body).
    pub fn begin(self: &Arc<Self>, http2: bool) -> (ActiveRequest, ReadDeadline) {
        let now = Instant::now();
        let mut i = self.lock();
        let start = if i.requests == 0 {
            i.opened
        } else if http2 {
            now
        } else {
            i.byte_since_idle.unwrap_or(now)
        };
        i.http2 |= http2;
        i.requests += 1;
        i.active += 1;
        i.byte_since_idle = None;
        i.mid_head = false;
        drop(i);
        self.changed.notify_one();
        (
            ActiveRequest(self.clone()),
            ReadDeadline(start + self.timeouts.read),
        )
    }

    fn read_some(&self, first: &[u8]) {
        let mut i = self.lock();
        if i.active == 0 && !i.mid_head {
            i.mid_head = true;
            let n = first.len().min(H2_PREFACE.len());
            if i.requests == 0 && first.get(..n) == H2_PREFACE.get(..n) {
                i.h2_preface = true;
            }
        }
        if i.active == 0 && i.byte_since_idle.is_none() && i.requests > 0 {
            i.byte_since_idle = Some(Instant::now());
            drop(i);
            self.changed.notify_one();
        }
    }

    /// Whether an HTTP/1 request head is half in: the client can be told 408.
    pub fn mid_http1_head(&self) -> bool {
        let i = self.lock();
        i.active == 0 && i.mid_head && !i.http2 && !i.h2_preface
    }

    /// Has [`Watched`] write a 408 `request_timeout` and then end the reads.
    pub fn answer_timeout(&self) {
        self.answer_timeout.store(true, Ordering::Release);
        self.reader.wake();
    }
}

/// One request in flight on a connection.
#[derive(Debug)]
pub struct ActiveRequest(Arc<ConnState>);

impl Drop for ActiveRequest {
    fn drop(&mut self) {
        let mut i = self.0.lock();
        i.active = i.active.saturating_sub(1);
        if i.active == 0 {
            i.idle_since = Instant::now();
            i.byte_since_idle = None;
        }
        drop(i);
        self.0.changed.notify_one();
    }
}

/// The connection's socket, telling [`ConnState`] when bytes arrive.
pub(crate) struct Watched<T> {
    io: T,
    state: Arc<ConnState>,
    /// How much of [`TIMEOUT_ANSWER`] is written.
    answered: usize,
    /// Armed when a write finds the socket full, until one makes progress;
    /// made at the first such write and kept (most connections never have
    /// one, and a timer per write would cost every write).
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
    blocked: bool,
    /// The client was given up on: every later write fails too.
    stalled: bool,
}

impl<T> Watched<T> {
    pub fn new(io: T, state: Arc<ConnState>) -> Self {
        Watched {
            io,
            state,
            answered: 0,
            stall: None,
            blocked: false,
            stalled: false,
        }
    }

    /// A write's result, under the stall deadline: the first write that
    /// finds the socket full arms it, any progress disarms it, and a write
    /// still blocked when it passes fails (the writer, woken by the timer
    /// with the same waker, tries again and sees it).
    fn watch_write(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<std::io::Result<usize>>,
    ) -> Poll<std::io::Result<usize>> {
        match r {
            Poll::Pending => {}
            Poll::Ready(Ok(n)) if n > 0 => {
                self.blocked = false;
                return r;
            }
            r => return r,
        }
        let Some(limit) = self.state.stall_limit() else {
            self.blocked = false;
            return Poll::Pending;
        };
        let now = Instant::now();
        let sleep = self
            .stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(now + limit)));
        if !self.blocked {
            self.blocked = true;
            sleep.as_mut().reset(now + limit);
        }
        if sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.stalled = true;
        self.state.metrics.0.client_stalled("socket");
        tracing::info!(
            timeout_ms = limit.as_millis() as u64,
            "the client accepted no bytes in time: its connection is closed as a client that left"
        );
        Poll::Ready(Err(stalled_error()))
    }
}

fn stalled_error() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "the client accepted no bytes within client_stall_timeout_ms",
    )
}

/// How an HTTP/2 (prior knowledge) connection starts.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What a client whose request head did not arrive in time is told.
const TIMEOUT_ANSWER: &[u8] = b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: 99\r\nconnection: close\r\n\r\n{\"error\":{\"type\":\"client\",\"code\":\"request_timeout\",\"message\":\"the request did not arrive in time\"}}";

impl<T: AsyncRead + AsyncWrite + Unpin> Watched<T> {
    /// Writes the 408, then reports the end of input (whatever happens to
    /// the write: the connection is being dropped either way).
    fn poll_answer_timeout(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while let Some(rest) = TIMEOUT_ANSWER
            .get(self.answered..)
            .filter(|r| !r.is_empty())
        {
            match Pin::new(&mut self.io).poll_write(cx, rest) {
                Poll::Ready(Ok(n)) if n > 0 => self.answered += n,
                Poll::Ready(_) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
        match Pin::new(&mut self.io).poll_flush(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(_) => Poll::Ready(Ok(())),
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.state.answer_timeout.load(Ordering::Acquire) {
            return self.poll_answer_timeout(cx);
        }
        self.state.reader.register(cx.waker());
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if let Some(new) = buf.filled().get(before..).filter(|b| !b.is_empty()) {
            self.state.read_some(new);
        }
        r
    }
}

/// Writes go straight to the wrapped `io`: [`Prepend`] only replays reads.
macro_rules! write_through {
    ($wrapper:ident) => {
        impl<T: AsyncWrite + Unpin> AsyncWrite for $wrapper<T> {
            fn poll_write(
                mut self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &[u8],
            ) -> Poll<std::io::Result<usize>> {
                Pin::new(&mut self.io).poll_write(cx, buf)
            }

            fn poll_flush(
                mut self: Pin<&mut Self>,
                cx: &mut Context<'_>,
            ) -> Poll<std::io::Result<()>> {
                Pin::new(&mut self.io).poll_flush(cx)
            }

            fn poll_shutdown(
                mut self: Pin<&mut Self>,
                cx: &mut Context<'_>,
            ) -> Poll<std::io::Result<()>> {
                Pin::new(&mut self.io).poll_shutdown(cx)
            }

            fn poll_write_vectored(
                mut self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> Poll<std::io::Result<usize>> {
                Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                self.io.is_write_vectored()
            }
        }
    };
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.stalled {
            return Poll::Ready(Err(stalled_error()));
        }
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        self.watch_write(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        if self.stalled {
            return Poll::Ready(Err(stalled_error()));
        }
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.watch_write(cx, r)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// What [`sniff`] reads at most: hyper's own first read.
const SNIFF_READ: usize = 8 * 1024;

/// Reads a connection's first bytes, enough to tell an HTTP/2 preface
/// (prior knowledge, or after ALPN) from an HTTP/1 request: the bytes, and
/// whether they are the preface.
///
/// Why not hyper-util's `auto` builder, which does the same: it reads the
/// first 24 bytes alone and hands them to hyper as one read, after which
/// hyper's read buffer, wanting 8 KiB of room, doubles to 16 KiB for the
/// connection's life. Here the first bytes are followed by whatever else
/// has arrived, so hyper's first read gets the whole request head, as a
/// direct read would. A connection that sends nothing holds no buffer: the
/// wait for its first bytes reads into the stack.
pub(crate) async fn sniff<T: AsyncRead + Unpin>(io: &mut T) -> std::io::Result<(Bytes, bool)> {
    use tokio::io::AsyncReadExt;
    let mut first = [0u8; H2_PREFACE.len()];
    let n = io.read(&mut first).await?;
    let mut buf = BytesMut::new();
    let Some(first) = first.get(..n).filter(|f| !f.is_empty()) else {
        return Ok((buf.freeze(), false));
    };
    buf.reserve(SNIFF_READ);
    buf.extend_from_slice(first);
    loop {
        let k = buf.len().min(H2_PREFACE.len());
        let preface = buf.get(..k) == H2_PREFACE.get(..k);
        if !preface || k == H2_PREFACE.len() {
            // The rest of what has arrived, without waiting for more.
            let read = std::pin::pin!(io.read_buf(&mut buf));
            let mut read = read;
            if let Poll::Ready(r) =
                std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await
            {
                r?;
            }
            return Ok((buf.freeze(), preface));
        }
        if io.read_buf(&mut buf).await? == 0 {
            return Ok((buf.freeze(), false));
        }
    }
}

/// A connection whose first bytes were read by [`sniff`]: they are read
/// again first, then the socket.
pub(crate) struct Prepend<T> {
    first: Bytes,
    io: T,
}

impl<T> Prepend<T> {
    pub fn new(first: Bytes, io: T) -> Self {
        Prepend { first, io }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Prepend<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.first.is_empty() {
            return Pin::new(&mut self.io).poll_read(cx, buf);
        }
        let n = self.first.len().min(buf.remaining());
        buf.put_slice(&self.first.split_to(n));
        if self.first.is_empty() {
            // Its memory goes now, not with the connection.
            self.first = Bytes::new();
        }
        Poll::Ready(Ok(()))
    }
}

write_through!(Prepend);

/// The answer to a connection over `max_connections`: a minimal HTTP/1.1
/// 503 written on the socket, then close (after reading what the client
/// sent, so that the close does not reset the answer away).
pub(crate) async fn refuse_busy(mut stream: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = r#"{"error":{"type":"internal","code":"server_busy","message":"too many connections; retry later"}}"#;
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let write = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await
    };
    if tokio::time::timeout(Duration::from_secs(1), write)
        .await
        .is_err()
    {
        return;
    }
    let mut sink = [0u8; 4096];
    let mut left = 64 * 1024usize;
    let drain = async {
        while left > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
}

/// `resp` as the connection sends it: its body holds `active` until it is
/// dropped, and its route's client stall deadline ([`ClientStall`]) is in
/// force. On HTTP/1 (and the WebSocket an upgrade makes of it) that is the
/// deadline of the connection's writes; HTTP/2 streams share the socket, so
/// its writes get the longest of their deadlines, and each stream's window
/// is watched on its own ([`StreamWatch`]).
pub(crate) fn respond(
    resp: http::Response<Body>,
    active: ActiveRequest,
    h2: bool,
) -> http::Response<Body> {
    let limit = resp.extensions().get::<ClientStall>().map_or(
        Some(Duration::from_millis(
            crate::config::DEFAULT_CLIENT_STALL_TIMEOUT_MS,
        )),
        |c| c.0,
    );
    let state = active.0.clone();
    let ms = stall_ms(limit);
    if h2 && state.h2_stall_set.swap(true, Ordering::Relaxed) {
        state.stall_ms.fetch_max(ms, Ordering::Relaxed);
    } else {
        state.stall_ms.store(ms, Ordering::Relaxed);
    }
    let resp = resp.map(|b| guarded(b, active));
    match limit.filter(|_| h2) {
        Some(limit) => resp.map(|b| StreamWatch::new(b, limit, state.metrics.0.clone()).boxed()),
        None => resp,
    }
}

/// An HTTP/2 response body under its stream's stall deadline. hyper polls a
/// body only when the stream may send, so a body handed a frame and not
/// polled again is waiting on the client's window; a watchdog task (made
/// at the first frame) gives up on it once that has lasted the deadline:
/// the body is dropped, as when the client resets the stream (a stream ends
/// as a client that left), and hyper, if it ever polls again, gets an error
/// and resets the stream.
struct StreamWatch {
    shared: Arc<StreamShared>,
    watched: bool,
}

struct StreamShared {
    /// `None` once given up on.
    body: Mutex<Option<Body>>,
    /// A frame was handed over and the body has not been polled since.
    waiting: AtomicBool,
    /// Frames handed over (progress, as the watchdog sees it).
    handed: AtomicU64,
    limit: Duration,
    metrics: Arc<Metrics>,
}

impl StreamWatch {
    fn new(body: Body, limit: Duration, metrics: Arc<Metrics>) -> Self {
        StreamWatch {
            shared: Arc::new(StreamShared {
                body: Mutex::new(Some(body)),
                waiting: AtomicBool::new(false),
                handed: AtomicU64::new(0),
                limit,
                metrics,
            }),
            watched: false,
        }
    }
}

impl StreamShared {
    fn body(&self) -> std::sync::MutexGuard<'_, Option<Body>> {
        self.body.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Checks every quarter of the deadline: given up on between one and
    /// one and a quarter deadlines after the window closed.
    async fn watchdog(shared: std::sync::Weak<StreamShared>, limit: Duration) {
        let tick = (limit / 4).max(Duration::from_millis(1));
        let mut last = u64::MAX;
        let mut quiet = Duration::ZERO;
        loop {
            tokio::time::sleep(tick).await;
            let Some(s) = shared.upgrade() else { return };
            let handed = s.handed.load(Ordering::Relaxed);
            if !s.waiting.load(Ordering::Relaxed) || handed != last {
                last = handed;
                quiet = Duration::ZERO;
                continue;
            }
            quiet += tick;
            if quiet >= limit {
                let mut held = s.body();
                // Polled meanwhile (the lock waited for it): not stalled.
                if !s.waiting.load(Ordering::Relaxed) || s.handed.load(Ordering::Relaxed) != last {
                    continue;
                }
                let body = held.take();
                drop(held);
                if body.is_some() {
                    s.metrics.client_stalled("flow_control");
                    tracing::info!(
                        timeout_ms = s.limit.as_millis() as u64,
                        "the client's HTTP/2 window stayed closed: the stream ends as a client that left"
                    );
                }
                // Dropped outside the lock: a stream's body hands its run
                // on as on a disconnect.
                drop(body);
                return;
            }
        }
    }
}

impl http_body::Body for StreamWatch {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        let s = &self.shared;
        s.waiting.store(false, Ordering::Relaxed);
        let mut body = s.body();
        let Some(b) = body.as_mut() else {
            return Poll::Ready(Some(Err(stalled_error())));
        };
        let r = Pin::new(&mut *b).poll_frame(cx);
        // A body whose last frame this is (an answer in one piece) needs
        // no watchdog: there is nothing more to hold for the client.
        let more = !b.is_end_stream();
        drop(body);
        if let Poll::Ready(Some(Ok(_))) = &r {
            s.handed.fetch_add(1, Ordering::Relaxed);
            s.waiting.store(true, Ordering::Relaxed);
            if !self.watched && more {
                self.watched = true;
                let (weak, limit) = (Arc::downgrade(&self.shared), self.shared.limit);
                tokio::spawn(StreamShared::watchdog(weak, limit));
            }
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.shared
            .body()
            .as_ref()
            .is_some_and(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.shared
            .body()
            .as_ref()
            .map_or_else(http_body::SizeHint::default, |b| b.size_hint())
    }
}

/// `body`, holding `guard` until the body is dropped (hyper drops it once
/// sent, or when the client goes away): ties a permit to a response's life.
pub(crate) fn guarded<G: Send + Sync + Unpin + 'static>(body: Body, guard: G) -> Body {
    Guarded {
        body,
        _guard: guard,
    }
    .boxed()
}

struct Guarded<G> {
    body: Body,
    _guard: G,
}

impl<G: Unpin> http_body::Body for Guarded<G> {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests;
