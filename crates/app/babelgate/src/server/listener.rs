//! The accept loop: connections accepted (over TLS when configured) up to
//! `max_connections`, each served under its watchdog, and the drain on
//! shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{first_request, Gateway};
use crate::conn::{self, ConnState, Expired, Timeouts};
use crate::error::Body;

impl Gateway {
    /// Serves on `listener` until the task is dropped.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        self.serve_until(listener, None, std::future::pending())
            .await
    }

    /// Serves until `stop` completes, then stops accepting, lets streams
    /// finish for `[server] shutdown_grace`, ends the rest with their
    /// dialect's error, and returns when every connection is closed.
    pub async fn serve_until(
        self: Arc<Self>,
        listener: TcpListener,
        tls: Option<TlsAcceptor>,
        stop: impl std::future::Future<Output = ()>,
    ) {
        let connections = TaskTracker::new();
        // Cancelled once the streams are done: connections close gracefully.
        let closing = CancellationToken::new();
        let open = Arc::new(AtomicUsize::new(0));
        let refusing = Arc::new(AtomicUsize::new(0));
        tokio::pin!(stop);
        loop {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(x) => x,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = &mut stop => break,
            };
            let _ = stream.set_nodelay(true);
            let (timeouts, max_connections) = {
                let routes = self.routes.load();
                let c = &routes.config;
                (
                    Timeouts {
                        read: c.request_read_timeout,
                        keepalive: c.keepalive_timeout,
                    },
                    c.max_connections,
                )
            };
            if open.load(Ordering::Relaxed) >= max_connections {
                self.metrics.rejected("server_busy");
                tracing::debug!(%peer, max_connections, "too many connections: 503");
                // A TLS client would not read a plain answer: just closed.
                // So is everyone past a bounded number of answers in flight.
                if tls.is_none() && refusing.load(Ordering::Relaxed) < MAX_REFUSING {
                    let slot = ConnSlot::new(&refusing);
                    connections.spawn(async move {
                        conn::refuse_busy(stream).await;
                        drop(slot);
                    });
                }
                continue;
            }
            let slot = ConnSlot::new(&open);
            let gw = self.clone();
            let closing = closing.clone();
            let tls = tls.clone();
            let tasks = connections.clone();
            connections.spawn(async move {
                // Held by a WebSocket too, after hyper has let go of the
                // connection: it still counts against `max_connections`,
                // and shutdown waits for it as for a connection.
                let slot = crate::ws::ConnHold {
                    slot: Arc::new(slot),
                    tasks,
                };
                let state = ConnState::new(timeouts, gw.metrics.clone());
                let io = conn::Watched::new(stream, state.clone());
                // Each kind boxed on its own: the task would otherwise be as
                // large as the largest (a TLS connection and its handshake,
                // about 9 KiB) for every plain connection too.
                match tls {
                    None => {
                        Box::pin(gw.serve_connection(io, state, peer, closing, true, slot)).await
                    }
                    Some(acceptor) => {
                        // The handshake counts against the first request's time.
                        let handshake = (acceptor, tokio::time::Instant::now() + timeouts.read);
                        Box::pin(gw.serve_tls(handshake, io, state, peer, closing, slot)).await
                    }
                }
            });
        }
        drop(listener);
        self.drain().await;
        // The streams have ended; idle keep-alive connections are closed.
        closing.cancel();
        connections.close();
        let _ = tokio::time::timeout(Duration::from_secs(5), connections.wait()).await;
    }

    /// A TLS connection: the handshake, due by `deadline`, then the
    /// connection.
    async fn serve_tls(
        self: Arc<Self>,
        (acceptor, deadline): (TlsAcceptor, tokio::time::Instant),
        io: conn::Watched<tokio::net::TcpStream>,
        state: Arc<ConnState>,
        peer: SocketAddr,
        closing: CancellationToken,
        slot: crate::ws::ConnHold,
    ) {
        let tls = tokio::select! {
            r = tokio::time::timeout_at(deadline, acceptor.accept(io)) => r,
            () = closing.cancelled() => return,
        };
        match tls {
            Ok(Ok(s)) => {
                Box::pin(self.serve_connection(s, state, peer, closing, false, slot)).await;
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, %peer, "TLS handshake failed");
            }
            Err(_) => {
                self.metrics.rejected("request_timeout");
                tracing::debug!(%peer, "TLS handshake timed out");
            }
        }
    }

    /// Serves one connection under its deadlines (see [`crate::conn`]).
    async fn serve_connection<I>(
        self: Arc<Self>,
        mut io: I,
        state: Arc<ConnState>,
        peer: SocketAddr,
        closing: CancellationToken,
        // The socket is the connection (no TLS above it): a 408 can be
        // written on it.
        plain: bool,
        slot: crate::ws::ConnHold,
    ) where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        // HTTP/1 or HTTP/2 (prior knowledge or ALPN), from the first bytes,
        // read here rather than by hyper-util's `auto` builder: see
        // [`conn::sniff`].
        let first_request = state.deadline().map(|(at, _)| at);
        let sniffed = tokio::select! {
            r = conn::sniff(&mut io) => r,
            () = sleep_until(first_request) => {
                self.late_request(peer);
                if plain && state.mid_http1_head() {
                    // Told why, then closed (the read writes the 408).
                    state.answer_timeout();
                    let mut end = [0u8; 1];
                    let _ = tokio::time::timeout(Duration::from_secs(1), io.read(&mut end)).await;
                }
                return;
            }
            () = closing.cancelled() => return,
        };
        let (mut first, h2) = match sniffed {
            Ok(x) => x,
            Err(e) => {
                tracing::debug!(error = %e, %peer, "connection ended before a request");
                return;
            }
        };
        if !h2 {
            if let Some(taken) = first_request::parse(&first) {
                // The common request, answered without hyper's buffers;
                // hyper serves what follows on the connection, if anything.
                drop(first);
                let served = self.serve_first(&mut io, taken, &state, peer, &slot);
                match Box::pin(served).await {
                    first_request::Ended::KeepAlive(early) if !closing.is_cancelled() => {
                        first = early
                    }
                    _ => return,
                }
            }
        }
        let io = TokioIo::new(conn::Prepend::new(first, io));
        let gw = self.clone();
        let st = state.clone();
        let svc = service_fn(move |mut req: Request<Incoming>| {
            let gw = gw.clone();
            let h2 = req.version() == http::Version::HTTP_2;
            let (active, deadline) = st.begin(h2);
            req.extensions_mut().insert(deadline);
            req.extensions_mut().insert(slot.clone());
            // Boxed: hyper keeps room for the largest in-flight future
            // for the connection's whole life; a box is freed once the
            // response head is out (about 4 KiB per open stream).
            let fut: std::pin::Pin<
                Box<dyn std::future::Future<Output = Result<Response<Body>, Infallible>> + Send>,
            > = Box::pin(async move {
                let resp = gw.answer(req, peer).await;
                Ok::<_, Infallible>(conn::respond(resp, active, h2))
            });
            fut
        });
        // Each kind boxed on its own (as TLS is above): the connection
        // future would otherwise keep room for an HTTP/2 connection on
        // every HTTP/1 one.
        let watch = Watch {
            state: &state,
            peer,
            closing,
            plain,
        };
        if h2 {
            let keepalive = self.routes.load().config.keepalive_timeout;
            let mut builder = http2::Builder::new(TokioExecutor::new());
            // Pings find dead HTTP/2 peers whose streams would otherwise stay open.
            builder
                .timer(TokioTimer::new())
                .keep_alive_interval(Some(
                    (keepalive / 2).clamp(Duration::from_secs(1), Duration::from_secs(30)),
                ))
                .keep_alive_timeout(Duration::from_secs(20));
            let conn = builder.serve_connection(io, svc);
            Box::pin(self.drive(conn, |c| c.graceful_shutdown(), watch)).await
        } else {
            let mut builder = http1::Builder::new();
            // The connection's own watchdog below times heads, idle included.
            builder.timer(TokioTimer::new()).header_read_timeout(None);
            // Upgrades: a route also answers a WebSocket (see crate::ws).
            let conn = builder.serve_connection(io, svc).with_upgrades();
            Box::pin(self.drive(conn, |c| c.graceful_shutdown(), watch)).await
        }
    }

    /// Answers a request read off the wire, by hyper or by [`first_request`]: the
    /// HTTP/1 `Host` rules hyper does not apply (RFC 9112 section 3.2: 400
    /// and the connection closed), then the gateway.
    async fn answer<B>(self: &Arc<Self>, req: Request<B>, peer: SocketAddr) -> Response<Body>
    where
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<super::BoxError>,
    {
        if let Err(e) = crate::host::check_http1(&req) {
            tracing::debug!(%peer, error = %e.message, "request refused before routing");
            let mut resp = e.into_response();
            resp.headers_mut().insert(
                http::header::CONNECTION,
                http::HeaderValue::from_static("close"),
            );
            return resp;
        }
        self.handle(req, peer).await
    }

    /// Answers a request taken by [`first_request`], as the service given to hyper
    /// below answers one.
    async fn serve_first<I>(
        self: &Arc<Self>,
        io: &mut I,
        taken: first_request::FirstRequest,
        state: &Arc<ConnState>,
        peer: SocketAddr,
        slot: &crate::ws::ConnHold,
    ) -> first_request::Ended
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        let first_request::FirstRequest { mut request, close } = taken;
        let (active, deadline) = state.begin(false);
        request.extensions_mut().insert(deadline);
        request.extensions_mut().insert(slot.clone());
        // Boxed, as for hyper below: the request's future is large and
        // done once the head is out, the response streams for long.
        let response = Box::pin(self.answer(request, peer)).await;
        let response = conn::respond(response, active, false);
        first_request::respond(io, response, close).await
    }

    /// Drives a served connection under its watchdog: closed when a
    /// request is late or the connection idle too long, drained on
    /// shutdown.
    async fn drive<C>(&self, conn: C, graceful_shutdown: fn(Pin<&mut C>), watch: Watch<'_>)
    where
        C: Future<Output = hyper::Result<()>>,
    {
        let Watch {
            state,
            peer,
            closing,
            plain,
        } = watch;
        tokio::pin!(conn);
        let mut draining = false;
        loop {
            let expired = sleep_until(state.deadline().map(|(at, _)| at));
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, %peer, "connection ended with an error");
                    }
                    break;
                }
                () = expired => {
                    match state.deadline() {
                        Some((at, why)) if at <= tokio::time::Instant::now() => {
                            if why == Expired::Read {
                                self.late_request(peer);
                                if plain && state.mid_http1_head() {
                                    // Told why, then closed: hyper ends
                                    // once the 408 is out (1 s at most).
                                    state.answer_timeout();
                                    let _ = tokio::time::timeout(Duration::from_secs(1), conn.as_mut()).await;
                                }
                            }
                            break;
                        }
                        _ => {}
                    }
                }
                () = state.changed() => {}
                () = closing.cancelled(), if !draining => {
                    graceful_shutdown(conn.as_mut());
                    draining = true;
                }
            }
        }
    }

    fn late_request(&self, peer: SocketAddr) {
        self.metrics.rejected("request_timeout");
        tracing::debug!(%peer, "no whole request in time: connection closed");
    }

    /// Waits for open streams for the grace period, then ends the rest.
    async fn drain(&self) {
        let grace = self.routes.load().config.shutdown_grace;
        self.pumps.close();
        let open = self.pumps.len();
        if open > 0 {
            tracing::info!(open, ?grace, "waiting for open streams to finish");
        }
        if tokio::time::timeout(grace, self.pumps.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                open = self.pumps.len(),
                "grace period over: ending open streams with an error"
            );
        }
        self.shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.pumps.wait()).await;
        // The spans of the streams just ended go out before the process does.
        if let Some(t) = self.telemetry.clone() {
            let _ = tokio::task::spawn_blocking(move || t.shutdown()).await;
        }
    }
}

/// What a served connection is watched with (see [`Gateway::drive`]).
struct Watch<'a> {
    state: &'a ConnState,
    peer: SocketAddr,
    closing: CancellationToken,
    /// The socket is the connection (no TLS above it): a 408 can be
    /// written on it.
    plain: bool,
}

/// Sleeps until `at`; forever without one.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Connections over `max_connections` being answered 503 at once; more are
/// closed unanswered.
const MAX_REFUSING: usize = 256;

/// One open client connection, counted against `max_connections`.
struct ConnSlot(Arc<AtomicUsize>);

impl ConnSlot {
    fn new(open: &Arc<AtomicUsize>) -> Self {
        open.fetch_add(1, Ordering::Relaxed);
        ConnSlot(open.clone())
    }
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
