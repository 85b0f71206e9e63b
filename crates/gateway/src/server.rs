//! The HTTP side: accept client requests on the configured routes, translate
//! them for the upstream, and re-stream the upstream's answer live in the
//! client's dialect.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use babelgate_core::assemble::MessageAssembler;
use babelgate_core::request::{Message, RunRequest};
use babelgate_core::sse::DEFAULT_MAX_EVENT_BYTES;
use babelgate_core::{Dialect, EncodeContext, IdGen, Role, Translator};
use bytes::Bytes;
use futures_util::StreamExt;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use arc_swap::ArcSwap;
use hyper_util::rt::TokioTimer;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::access;
use crate::body::ReadBodyLayer;
use crate::config::{Backend, Config, OnDisconnect, Route};
use crate::conn::{self, ConnState, Expired, Timeouts};
use crate::error::{json_response, Body, GatewayError};
use crate::limits::{self, Limits, StreamLimitLayer};
use crate::metrics::Metrics;
use crate::registry;
use crate::resume::{self, Mode, Recorder};
use babelgate_store::{
    run_key, EventId, MemoryConfig, MemoryConversationStore, MemoryRunLog, RunOutcome, RunWriter,
    StoreConfig, StoreError, Stores,
};
use tower::{Layer, ServiceBuilder, ServiceExt};

/// A request body, boxed: hyper's from the accept loop, anyone's through
/// [`Gateway::into_service`].
pub type ReqBody = http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>;
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Client bytes buffered per stream before the upstream is paused: a slow
/// client applies backpressure instead of growing memory.
const STREAM_BUFFER_CHUNKS: usize = 16;

/// Routes and their HTTP clients: swapped whole on reload, so a stream keeps
/// the route it started with.
struct Routes {
    config: Config,
    /// One client per route: timeouts are per route.
    clients: HashMap<String, reqwest::Client>,
}

impl Routes {
    fn build(config: Config) -> Result<Routes, GatewayError> {
        let mut clients = HashMap::new();
        for r in &config.routes {
            let client = reqwest::Client::builder()
                .connect_timeout(r.connect_timeout)
                .tcp_nodelay(true)
                // Never ask for compression: SSE must arrive event by event.
                .no_gzip()
                // Only the configured upstream is ever contacted: a redirect
                // must not send the request (and its headers) elsewhere.
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| GatewayError::internal(format!("HTTP client: {e}")))?;
            clients.insert(r.path.clone(), client);
        }
        Ok(Routes { config, clients })
    }

    fn route_and_client(&self, path: &str) -> Option<(&Route, &reqwest::Client)> {
        Some((self.config.route(path)?, self.clients.get(path)?))
    }
}

/// Shared state of a running gateway.
pub struct Gateway {
    routes: ArcSwap<Routes>,
    stores: Stores,
    /// This instance, as the owner of the runs it proxies.
    owner: String,
    metrics: Arc<Metrics>,
    /// Cancelled when the shutdown grace period is over: open streams end
    /// with their dialect's error.
    shutdown: CancellationToken,
    /// Every stream pump, so that shutdown can wait for them.
    pumps: TaskTracker,
    /// Resumed streams being followed (`[store] max_followers`).
    followers: Arc<resume::Followers>,
    limits: Limits,
}

impl Gateway {
    /// A gateway with the in-memory store (whatever `[store]` says: use
    /// [`store_config`] and [`Gateway::with_stores`] for that).
    pub fn new(config: Config) -> Result<Gateway, GatewayError> {
        let memory = match store_config(&config) {
            StoreConfig::Memory(m) => m,
            StoreConfig::Redis(_) => MemoryConfig {
                history_ttl: config.store.history_ttl,
                ..MemoryConfig::default()
            },
        };
        let stores = Stores {
            conversations: Arc::new(MemoryConversationStore::from_config(&memory)),
            runs: Arc::new(MemoryRunLog::new(&memory)),
        };
        Gateway::with_stores(config, stores)
    }

    pub fn with_stores(config: Config, stores: Stores) -> Result<Gateway, GatewayError> {
        // Rate limits live where the store does: shared with Redis.
        let limiter = babelgate_store::limiter(&store_config(&config))
            .map_err(|e| GatewayError::internal(format!("rate limits: {e}")))?;
        let metrics = Arc::new(Metrics::default());
        Ok(Gateway {
            limits: Limits::new(limiter, metrics.clone()),
            routes: ArcSwap::from_pointee(Routes::build(config)?),
            stores,
            owner: babelgate_store::new_id(),
            metrics,
            shutdown: CancellationToken::new(),
            pumps: TaskTracker::new(),
            followers: Arc::default(),
        })
    }

    /// The configuration new requests use.
    pub fn config(&self) -> Config {
        self.routes.load().config.clone()
    }

    /// Replaces the routes: streams already running keep the old ones.
    pub fn reload(&self, config: Config) -> Result<(), GatewayError> {
        let old = self.routes.load();
        if old.config.listen != config.listen || old.config.tls.is_some() != config.tls.is_some() {
            tracing::warn!("`[server] listen` and `tls` changes apply after a restart");
        }
        if old.config.store != config.store {
            tracing::warn!("`[store]` changes apply after a restart");
        }
        self.routes.store(Arc::new(Routes::build(config)?));
        Ok(())
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Client streams open now.
    pub fn active_streams(&self) -> usize {
        self.pumps.len()
    }

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
            connections.spawn(async move {
                let _slot = slot;
                let state = ConnState::new(timeouts);
                let io = conn::Watched::new(stream, state.clone());
                match tls {
                    None => gw.serve_connection(io, state, peer, closing, true).await,
                    Some(acceptor) => {
                        // The handshake counts against the first request's time.
                        let deadline = tokio::time::Instant::now() + timeouts.read;
                        let tls = tokio::select! {
                            r = tokio::time::timeout_at(deadline, acceptor.accept(io)) => r,
                            () = closing.cancelled() => return,
                        };
                        match tls {
                            Ok(Ok(s)) => gw.serve_connection(s, state, peer, closing, false).await,
                            Ok(Err(e)) => {
                                tracing::debug!(error = %e, %peer, "TLS handshake failed");
                            }
                            Err(_) => {
                                gw.metrics.rejected("request_timeout");
                                tracing::debug!(%peer, "TLS handshake timed out");
                            }
                        }
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

    /// Serves one connection under its deadlines (see [`crate::conn`]).
    async fn serve_connection<I>(
        self: Arc<Self>,
        io: I,
        state: Arc<ConnState>,
        peer: SocketAddr,
        closing: CancellationToken,
        // The socket is the connection (no TLS above it): a 408 can be
        // written on it.
        plain: bool,
    ) where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let gw = self.clone();
        let st = state.clone();
        let svc = service_fn(move |mut req: Request<Incoming>| {
            let gw = gw.clone();
            let (active, deadline) = st.begin(req.version() == http::Version::HTTP_2);
            req.extensions_mut().insert(deadline);
            // Boxed: hyper keeps room for the largest in-flight future
            // for the connection's whole life; a box is freed once the
            // response head is out (about 4 KiB per open stream).
            let fut: std::pin::Pin<
                Box<dyn std::future::Future<Output = Result<Response<Body>, Infallible>> + Send>,
            > = Box::pin(async move {
                let resp = gw.handle(req, peer).await;
                Ok::<_, Infallible>(resp.map(|b| conn::guarded(b, active)))
            });
            fut
        });
        let keepalive = self.routes.load().config.keepalive_timeout;
        let mut builder = auto::Builder::new(TokioExecutor::new());
        // The connection's own watchdog below times heads, idle included.
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(None);
        // Pings find dead HTTP/2 peers whose streams would otherwise stay open.
        builder
            .http2()
            .timer(TokioTimer::new())
            .keep_alive_interval(Some(
                (keepalive / 2).clamp(Duration::from_secs(1), Duration::from_secs(30)),
            ))
            .keep_alive_timeout(Duration::from_secs(20));
        let conn = builder.serve_connection(TokioIo::new(io), svc);
        tokio::pin!(conn);
        let mut draining = false;
        loop {
            let deadline = state.deadline();
            let expired = async {
                match deadline {
                    Some((at, _)) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
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
                                self.metrics.rejected("request_timeout");
                                tracing::debug!(%peer, "no whole request in time: connection closed");
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
                    conn.as_mut().graceful_shutdown();
                    draining = true;
                }
            }
        }
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
    }

    /// Answers one request, whatever body type it comes with (hyper's, or
    /// axum's when mounted with [`Gateway::into_service`]).
    pub async fn handle<B>(self: &Arc<Self>, req: Request<B>, peer: SocketAddr) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        self.handle_boxed(req.map(|b| b.map_err(Into::into).boxed_unsync()), peer)
            .await
    }

    async fn handle_boxed(
        self: &Arc<Self>,
        mut req: Request<ReqBody>,
        peer: SocketAddr,
    ) -> Response<Body> {
        req.extensions_mut().insert(conn::PeerAddr(peer));
        let started = tokio::time::Instant::now();
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        let req_headers = req.headers().clone();
        let request_id = access::request_id(&req_headers, &mut IdGen::default());
        let routes = self.routes.load_full();
        let span = tracing::info_span!("request", id = %request_id, %method, %path, %peer);
        let http1 = req.version() < http::Version::HTTP_2;
        let result = self
            .route_request(&routes, req, &request_id, started)
            .instrument(span.clone())
            .await;
        let (route_path, mut resp) = match result {
            Ok(x) => x,
            Err((route_path, e)) => {
                let _g = span.enter();
                tracing::info!(status = e.status.as_u16(), fault = e.fault.as_str(), code = e.code, error = %e.message, "request refused");
                let timed_out = e.code == "request_timeout";
                let mut resp = e.into_response();
                if timed_out && http1 {
                    // The rest of the body may still be on its way: this
                    // connection cannot carry another request.
                    resp.headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                (route_path, resp)
            }
        };
        // A proxied stream is counted by its pump when it ends (200, or 499
        // when its client left), so it is counted once.
        if let Some(rp) = route_path
            .as_ref()
            .filter(|_| resp.extensions().get::<CountedAtEnd>().is_none())
        {
            self.metrics.request(rp, resp.status().as_u16());
        }
        access::decorate(
            route_path.as_deref().and_then(|p| routes.config.route(p)),
            &req_headers,
            &mut resp,
        );
        if let Ok(v) = HeaderValue::from_str(&request_id) {
            resp.headers_mut().insert("x-request-id", v);
        }
        resp
    }

    /// The response, and the route it was for (for metrics and CORS).
    async fn route_request(
        self: &Arc<Self>,
        routes: &Arc<Routes>,
        mut req: Request<ReqBody>,
        request_id: &str,
        started: tokio::time::Instant,
    ) -> Result<(Option<String>, Response<Body>), (Option<String>, GatewayError)> {
        let path = req.uri().path().to_string();
        match path.as_str() {
            "/healthz" => {
                return Ok((
                    None,
                    json_response(StatusCode::OK, &json!({"status": "ok"})),
                ))
            }
            "/readyz" => {
                return Ok((
                    None,
                    if self.shutdown.is_cancelled() || self.pumps.is_closed() {
                        json_response(
                            StatusCode::SERVICE_UNAVAILABLE,
                            &json!({"status": "shutting down"}),
                        )
                    } else if let Err(e) = self.stores.ping().await {
                        // The detail may name hosts: for the log, not for anyone asking.
                        tracing::warn!(error = %e, "readiness: the store does not answer");
                        json_response(
                            StatusCode::SERVICE_UNAVAILABLE,
                            &json!({"status": "store unavailable"}),
                        )
                    } else {
                        json_response(StatusCode::OK, &json!({"status": "ready"}))
                    },
                ));
            }
            "/metrics" => {
                let mut resp = Response::new(crate::error::full(self.metrics.render()));
                resp.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
                );
                return Ok((None, resp));
            }
            _ => {}
        }
        if let Some(route) = routes.config.route(&path) {
            let rp = Some(route.path.clone());
            if access::is_preflight(req.method(), req.headers()) {
                return access::preflight(route, req.headers())
                    .map(|r| (rp.clone(), r))
                    .map_err(|e| (rp, e));
            }
            if req.method() != Method::POST {
                return Err((
                    rp,
                    GatewayError::client(
                        StatusCode::METHOD_NOT_ALLOWED,
                        "method_not_allowed",
                        format!("{} {path}: this route takes POST", req.method()),
                    ),
                ));
            }
            let caller = match access::authorize(route, req.headers()).await {
                Ok(c) => c,
                Err(e) => return Err((rp, e)),
            };
            req.extensions_mut().insert(caller.clone());
            // The limits, then the body, then the upstream: each a layer.
            let proxy = {
                let (gw, routes) = (self.clone(), routes.clone());
                let (path, request_id) = (route.path.clone(), request_id.to_string());
                tower::service_fn(move |req: Request<Bytes>| {
                    let (gw, routes, path) = (gw.clone(), routes.clone(), path.clone());
                    let (request_id, caller) = (request_id.clone(), caller.clone());
                    async move {
                        let Some((route, client)) = routes.route_and_client(&path) else {
                            // Routes::build makes one client per route.
                            return Err(GatewayError::internal("no upstream client for the route"));
                        };
                        gw.proxy(route, client, req, &request_id, started, &caller)
                            .await
                    }
                })
            };
            let stack = ServiceBuilder::new()
                .layer(StreamLimitLayer::new(
                    self.limits.clone(),
                    limits::Policy::of(route),
                ))
                .layer(ReadBodyLayer::new(
                    route.max_body_bytes,
                    routes.config.request_read_timeout,
                    self.metrics.clone(),
                ))
                .service(proxy);
            return boxed(stack.oneshot(req))
                .await
                .map(|r| (rp.clone(), r))
                .map_err(|e| (rp, e));
        }
        // `{path}/{id}/stream` (resume) and `{path}/{id}/stop`.
        if let Some((route, id, action)) = sub_route(&routes.config, &path) {
            let rp = Some(route.path.clone());
            if access::is_preflight(req.method(), req.headers()) {
                return access::preflight(route, req.headers())
                    .map(|r| (rp.clone(), r))
                    .map_err(|e| (rp, e));
            }
            let wanted = match action {
                SubAction::Stream => Method::GET,
                SubAction::Stop => Method::POST,
            };
            if req.method() != wanted {
                return Err((
                    rp,
                    GatewayError::client(
                        StatusCode::METHOD_NOT_ALLOWED,
                        "method_not_allowed",
                        format!("{} {path}: this takes {wanted}", req.method()),
                    ),
                ));
            }
            let caller = match access::authorize(route, req.headers()).await {
                Ok(c) => c,
                Err(e) => return Err((rp, e)),
            };
            // Another caller's id is looked up under this caller's name,
            // so it answers exactly as an unknown id does.
            let r = match action {
                SubAction::Stream => {
                    // A resumed stream is a client stream like the first.
                    req.extensions_mut().insert(caller.clone());
                    let resume = {
                        let (gw, routes) = (self.clone(), routes.clone());
                        let (path, conversation) = (route.path.clone(), caller.scoped(id));
                        tower::service_fn(move |req: Request<ReqBody>| {
                            let (gw, routes) = (gw.clone(), routes.clone());
                            let (path, conversation) = (path.clone(), conversation.clone());
                            async move {
                                let Some(route) = routes.config.route(&path) else {
                                    return Err(GatewayError::internal("the route went away"));
                                };
                                gw.resume(route, &conversation, req.headers()).await
                            }
                        })
                    };
                    let svc = StreamLimitLayer::new(self.limits.clone(), limits::Policy::of(route))
                        .layer(resume);
                    boxed(svc.oneshot(req)).await
                }
                SubAction::Stop => self.stop(route, &caller.scoped(id), id).await,
            };
            return r.map(|r| (rp.clone(), r)).map_err(|e| (rp, e));
        }
        Err((
            None,
            GatewayError::client(
                StatusCode::NOT_FOUND,
                "no_route",
                format!("no route for {path}"),
            ),
        ))
    }

    async fn proxy(
        &self,
        route: &Route,
        client: &reqwest::Client,
        req: Request<Bytes>,
        request_id: &str,
        started: tokio::time::Instant,
        caller: &access::Caller,
    ) -> Result<Response<Body>, GatewayError> {
        let forwarded = access::forwarded(route, req.headers());
        let body = req.into_body();
        let mut ids = IdGen::default();
        let mut run = registry::requests(route.client)
            .parse_request(&body)
            .map_err(|e| {
                let mut g =
                    GatewayError::client(StatusCode::BAD_REQUEST, "invalid_request", e.message);
                g.field = e.field;
                g
            })?;
        if run.run_id.is_empty() {
            run.run_id = ids.next("run");
        }
        if run.thread_id.is_empty() {
            run.thread_id = ids.next("thread");
        }
        for m in &mut run.messages {
            if m.id.is_empty() {
                m.id = ids.next("msg");
            }
        }
        // What the client said this turn, kept for dialects that send only that.
        let new_from_client = run.messages.clone();
        // Where this caller's run and history of this thread are kept.
        let conversation = caller.scoped(&run.thread_id);
        if route.client == Dialect::AgKit {
            let mut history = self
                .stores
                .conversations
                .history(&conversation)
                .await
                .map_err(store_error)?;
            history.append(&mut run.messages);
            run.messages = history;
        }
        for tool in &route.client_tools {
            if !run.tools.iter().any(|t| t.name == tool.name) {
                run.tools.push(tool.clone());
            }
        }
        let upstream_view = upstream_request(route.upstream_protocol, &run);
        let upstream_body = registry::requests(route.upstream_protocol)
            .build_request(&upstream_view)
            .map_err(|e| GatewayError::internal(format!("building the upstream request: {e}")))?;

        // `headers` replaces what the earlier maps set for its names: the
        // request id goes upstream once, whatever was forwarded or configured.
        let mut request_id_header = http::HeaderMap::new();
        if let Ok(v) = HeaderValue::from_str(request_id) {
            request_id_header.insert("x-request-id", v);
        }
        let send = client
            .post(route.upstream.clone())
            .headers(forwarded)
            .headers(upstream_headers(route))
            .headers(request_id_header)
            .header(header::ACCEPT, "text/event-stream")
            .header(header::CONTENT_TYPE, "application/json")
            .body(upstream_body.to_string())
            .send();
        let asked = tokio::time::Instant::now();
        let resp = match tokio::time::timeout(route.response_timeout, send).await {
            Ok(r) => r.map_err(|e| {
                let g = upstream_send_error(route, e);
                self.metrics.upstream_error(g.code);
                g
            })?,
            Err(_) => {
                self.metrics.upstream_error("upstream_timeout");
                return Err(GatewayError::upstream(
                    StatusCode::GATEWAY_TIMEOUT,
                    "upstream_timeout",
                    format!(
                        "the upstream sent no response head within {} ms",
                        route.response_timeout.as_millis()
                    ),
                ));
            }
        };
        let status = resp.status();
        if !status.is_success() {
            self.metrics.upstream_error("upstream_status");
            // The body may tell internals: a bounded excerpt, read within
            // the rest of the response time (at most 5 s), goes to the log;
            // only the status to the client. The rest is never read.
            let left = route
                .response_timeout
                .saturating_sub(asked.elapsed())
                .min(ERROR_BODY_TIME);
            let excerpt = error_excerpt(resp, left).await;
            tracing::warn!(upstream = %loggable_url(&route.upstream), %status, body = %excerpt, "upstream refused the request");
            return Err(GatewayError::upstream(
                StatusCode::BAD_GATEWAY,
                "upstream_status",
                format!("the upstream answered {status}"),
            ));
        }
        let ctype = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        if !ctype.starts_with("text/event-stream") {
            self.metrics.upstream_error("upstream_content_type");
            return Err(GatewayError::upstream(
                StatusCode::BAD_GATEWAY,
                "upstream_content_type",
                format!("upstream answered with content-type `{ctype}`, not text/event-stream"),
            ));
        }

        let recorder = self.begin_log(route, &run, &conversation).await?;

        let ctx = EncodeContext {
            ids: IdGen::default(),
            thread_id: Some(run.thread_id.clone()),
            run_id: Some(run.run_id.clone()),
            message_id: run.continue_message_id.clone(),
            ..Default::default()
        };
        let translator = stream_translator(
            route.upstream_protocol,
            route.client,
            ctx,
            run.continue_message_id.clone(),
        );
        let headers = translator.encoder().headers();

        let (tx, rx) = mpsc::channel::<Bytes>(STREAM_BUFFER_CHUNKS);
        let abort = Arc::new(AtomicBool::new(false));
        let pump = Pump {
            translator,
            tx: Some(tx),
            idle: route.idle_timeout,
            heartbeat: route.heartbeat,
            recorder,
            on_disconnect: route.on_disconnect,
            store: (route.client == Dialect::AgKit).then(|| self.stores.conversations.clone()),
            thread_id: conversation,
            new_from_client,
            shutdown: self.shutdown.clone(),
            report: Some(Report {
                metrics: self.metrics.clone(),
                route: route.path.clone(),
                pair: (route.upstream_protocol, route.client),
                started,
            }),
            abort: abort.clone(),
        };
        let upstream = resp
            .bytes_stream()
            .map(|r| r.map_err(|e| error_chain(&e.without_url())));
        self.pumps
            .spawn(pump.run(upstream).instrument(tracing::Span::current()));

        let mut resp = sse_body(rx, Some(abort), headers);
        resp.extensions_mut().insert(CountedAtEnd);
        Ok(resp)
    }

    /// Starts the log of a run about to be proxied. Without a store the
    /// stream still goes (it just cannot be resumed), unless the route
    /// promises that (`on_disconnect = "keep"`): then 503.
    async fn begin_log(
        &self,
        route: &Route,
        run: &RunRequest,
        conversation: &str,
    ) -> Result<Option<Recorder>, GatewayError> {
        let lease = self.routes.load().config.store.lease;
        let run_id = babelgate_store::new_id();
        let key = run_key(&route.path, conversation);
        match RunWriter::begin(self.stores.runs.clone(), &key, &run_id, &self.owner, lease).await {
            Ok((writer, _previous)) => {
                if matches!(route.client, Dialect::AgUi | Dialect::Hai) {
                    // What a snapshot on reconnect starts with; kept with
                    // the run (its life and retention), capped in bytes.
                    if let Err(e) = self.stores.runs.keep_input(&run_id, &run.messages).await {
                        tracing::warn!(error = %e, "could not keep the run's input for snapshots");
                    }
                }
                Ok(Some(Recorder::new(writer, route.retention)))
            }
            Err(e) if route.on_disconnect == OnDisconnect::Keep => Err(store_error(e)),
            Err(e) => {
                tracing::warn!(error = %e, "run log unavailable: this stream cannot be resumed");
                Ok(None)
            }
        }
    }

    /// `GET {path}/{id}/stream`: the client comes back to a run.
    async fn resume(
        &self,
        route: &Route,
        id: &str,
        headers: &http::HeaderMap,
    ) -> Result<Response<Body>, GatewayError> {
        let runs = self.stores.runs.clone();
        let key = run_key(&route.path, id);
        let Some(info) = runs.latest(&key).await.map_err(store_error)? else {
            return Ok(no_content());
        };
        let last_event_id = match headers.get("last-event-id").map(|v| v.to_str()) {
            None => None,
            Some(Ok(v)) => Some(v.parse::<EventId>().map_err(|e| {
                let mut g =
                    GatewayError::client(StatusCode::BAD_REQUEST, "invalid_request", e.to_string());
                g.field = Some("last-event-id".into());
                g
            })?),
            Some(Err(_)) => None,
        };
        let running = info.is_running();
        let mode = match (route.client, last_event_id) {
            // useChat asks on every page load: only a running answer is resumed.
            (Dialect::Vercel, _) if !running => return Ok(no_content()),
            (Dialect::Vercel, _) => Mode::After(None),
            (_, Some(after)) => Mode::After(Some(after)),
            (_, None) if !running => return Ok(no_content()),
            (Dialect::AgKit, None) => Mode::After(None),
            (_, None) => Mode::Snapshot,
        };
        let store = &self.routes.load().config.store;
        let (max_followers, max_snapshot_bytes) = (store.max_followers, store.max_snapshot_bytes);
        let Some(slot) = self.followers.enter(max_followers) else {
            return Ok(too_many_followers(max_followers));
        };
        let (last, input) = if mode == Mode::Snapshot {
            let last = runs.last_id(&info.run_id).await.map_err(store_error)?;
            let input = runs.input(&info.run_id).await.map_err(store_error)?;
            (last, input)
        } else {
            (None, Vec::new())
        };
        tracing::info!(run = %info.run_id, ?mode, "resuming");
        let (tx, rx) = mpsc::channel::<Bytes>(STREAM_BUFFER_CHUNKS);
        let abort = Arc::new(AtomicBool::new(false));
        self.pumps.spawn(
            resume::Follow {
                runs,
                run_id: info.run_id,
                dialect: route.client,
                mode,
                last,
                input,
                max_snapshot_bytes,
                slot,
                abort: abort.clone(),
            }
            .run(tx, self.shutdown.clone())
            .instrument(tracing::Span::current()),
        );
        let headers = registry::encoder(route.client, EncodeContext::default()).headers();
        Ok(sse_body(rx, Some(abort), headers))
    }

    /// `POST {path}/{id}/stop`: ends a kept run, wherever it runs.
    /// `conversation` is the caller's scoped id, `id` the one it named.
    async fn stop(
        &self,
        route: &Route,
        conversation: &str,
        id: &str,
    ) -> Result<Response<Body>, GatewayError> {
        let runs = &self.stores.runs;
        let info = runs
            .latest(&run_key(&route.path, conversation))
            .await
            .map_err(store_error)?;
        let stopped = match &info {
            Some(i) if i.is_running() => runs.request_stop(&i.run_id).await.map_err(store_error)?,
            _ => false,
        };
        if !stopped {
            return Err(GatewayError::client(
                StatusCode::NOT_FOUND,
                "no_active_run",
                format!("nothing is running for {id}"),
            ));
        }
        Ok(json_response(
            StatusCode::ACCEPTED,
            &json!({"status": "stopping"}),
        ))
    }
}

/// A layered service's future, boxed where its types are concrete (the
/// compiler cannot prove a deeply generic one `Send` from the caller).
fn boxed<'a, T>(
    f: impl std::future::Future<Output = T> + Send + 'a,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>> {
    Box::pin(f)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SubAction {
    Stream,
    Stop,
}

/// `{route}/{id}/stream` or `{route}/{id}/stop`.
fn sub_route<'a, 'p>(config: &'a Config, path: &'p str) -> Option<(&'a Route, &'p str, SubAction)> {
    let (rest, action) = if let Some(r) = path.strip_suffix("/stream") {
        (r, SubAction::Stream)
    } else if let Some(r) = path.strip_suffix("/stop") {
        (r, SubAction::Stop)
    } else {
        return None;
    };
    let (base, id) = rest.rsplit_once('/')?;
    if id.is_empty() {
        return None;
    }
    Some((config.route(base)?, id, action))
}

/// The store could not be reached: our side, and worth a retry.
fn store_error(e: StoreError) -> GatewayError {
    // The detail may name the store's host: for the log only.
    tracing::warn!(error = %e, "store request failed");
    let mut g = GatewayError::internal("the store failed");
    if e.is_unavailable() {
        g.status = StatusCode::SERVICE_UNAVAILABLE;
        g.code = "store_unavailable";
    }
    g
}

/// The store settings of `[store]`, for [`Gateway::with_stores`].
pub fn store_config(config: &Config) -> StoreConfig {
    match &config.store.backend {
        Backend::Memory => StoreConfig::Memory(MemoryConfig {
            history_ttl: config.store.history_ttl,
            max_run_bytes: config.store.max_run_bytes,
            max_total_bytes: config.store.max_total_bytes,
            max_history_bytes: config.store.max_history_bytes,
            max_total_history_bytes: config.store.max_total_history_bytes,
            ..MemoryConfig::default()
        }),
        Backend::Redis { url } => {
            let mut c = babelgate_store::RedisConfig::new(url.clone());
            c.history_ttl = config.store.history_ttl;
            c.max_run_bytes = config.store.max_run_bytes;
            c.max_history_bytes = config.store.max_history_bytes;
            StoreConfig::Redis(c)
        }
    }
}

/// 503 `too_many_followers`: this instance follows as many resumed streams
/// as it may; the client should come back shortly.
fn too_many_followers(max: usize) -> Response<Body> {
    let mut g = GatewayError::internal(format!(
        "this instance already follows {max} resumed streams; retry shortly"
    ));
    g.status = StatusCode::SERVICE_UNAVAILABLE;
    g.code = "too_many_followers";
    let mut resp = g.into_response();
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    resp
}

fn no_content() -> Response<Body> {
    let mut resp = Response::new(crate::error::full(Bytes::new()));
    *resp.status_mut() = StatusCode::NO_CONTENT;
    resp
}

/// A streaming `text/event-stream` response fed by `rx`, one body frame per
/// chunk so that each event is flushed as it comes.
pub(crate) fn sse_response(
    rx: mpsc::Receiver<Bytes>,
    dialect_headers: &'static [(&'static str, &'static str)],
) -> Response<Body> {
    sse_body(rx, None, dialect_headers)
}

/// An SSE response of what arrives on `rx`; once `rx` ends, a set `abort`
/// ends the body with an error instead of cleanly (hyper then breaks off the
/// connection, or resets the HTTP/2 stream).
fn sse_body(
    rx: mpsc::Receiver<Bytes>,
    abort: Option<Arc<AtomicBool>>,
    dialect_headers: &'static [(&'static str, &'static str)],
) -> Response<Body> {
    let stream = futures_util::stream::unfold(Some((rx, abort)), |state| async move {
        let (mut rx, abort) = state?;
        match rx.recv().await {
            Some(b) => Some((Ok(Frame::data(b)), Some((rx, abort)))),
            None if abort.is_some_and(|a| a.load(Ordering::Acquire)) => {
                // Pending once first: hyper flushes what it holds (the error
                // frame) before the error closes the connection.
                tokio::task::yield_now().await;
                Some((Err(std::io::Error::other("the run failed")), None))
            }
            None => None,
        }
    });
    let mut response = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-transform"),
    );
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    for (k, v) in dialect_headers {
        // `connection` is hop-by-hop (and illegal in HTTP/2); cache-control is set above.
        if !k.eq_ignore_ascii_case("connection") && !k.eq_ignore_ascii_case("cache-control") {
            h.insert(*k, HeaderValue::from_static(v));
        }
    }
    response
}

/// The request an upstream of `dialect` gets: AG-Kit servers keep their own
/// history, so they receive only what is new since their last turn, i.e. the
/// messages after the last one they wrote.
fn upstream_request(dialect: Dialect, run: &RunRequest) -> RunRequest {
    let mut up = run.clone();
    if dialect == Dialect::AgKit {
        let start = run
            .messages
            .iter()
            .rposition(|m| m.role == Role::Assistant)
            .map_or(0, |i| i + 1);
        up.messages = run.messages.get(start..).unwrap_or_default().to_vec();
    }
    up
}

fn upstream_headers(route: &Route) -> http::HeaderMap {
    let mut map = http::HeaderMap::new();
    for (k, v) in route.upstream_headers.iter() {
        if let (Ok(k), Ok(v)) = (
            http::HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            map.insert(k, v);
        }
    }
    map
}

/// The client learns only what went wrong; the upstream's address and the
/// error's detail go to the log.
fn upstream_send_error(route: &Route, e: reqwest::Error) -> GatewayError {
    let timeout = e.is_timeout();
    tracing::warn!(upstream = %loggable_url(&route.upstream), error = %error_chain(&e.without_url()), "upstream request failed");
    if timeout {
        GatewayError::upstream(
            StatusCode::GATEWAY_TIMEOUT,
            "upstream_timeout",
            "the upstream did not answer in time",
        )
    } else {
        GatewayError::upstream(
            StatusCode::BAD_GATEWAY,
            "upstream_unreachable",
            "cannot reach the upstream",
        )
    }
}

/// An upstream URL fit for a log line: no userinfo, no query, no fragment.
pub fn loggable_url(url: &reqwest::Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.set_query(None);
    u.set_fragment(None);
    u.to_string()
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

/// How much of a non-2xx upstream body is read (for the log), and for how
/// long at most.
const ERROR_BODY_BYTES: usize = 512;
const ERROR_BODY_TIME: Duration = Duration::from_secs(5);

/// The start of an upstream's error body for the log: at most
/// [`ERROR_BODY_BYTES`], whatever arrived within `within`, control
/// characters replaced; the rest is never read.
async fn error_excerpt(mut resp: reqwest::Response, within: Duration) -> String {
    let mut got = Vec::new();
    let read = async {
        while got.len() < ERROR_BODY_BYTES {
            match resp.chunk().await {
                Ok(Some(c)) => {
                    let room = ERROR_BODY_BYTES - got.len();
                    got.extend_from_slice(c.get(..room.min(c.len())).unwrap_or(&c));
                }
                _ => break,
            }
        }
    };
    let _ = tokio::time::timeout(within, read).await;
    String::from_utf8_lossy(&got)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// The translator of a proxied stream. Only a client dialect whose history
/// the gateway keeps (AG-Kit) gets a message assembler: elsewhere it would
/// hold the whole answer in memory for nothing.
fn stream_translator(
    upstream: Dialect,
    client: Dialect,
    ctx: EncodeContext,
    continue_message_id: Option<String>,
) -> Translator {
    let translator = registry::translator(upstream, client, ctx, DEFAULT_MAX_EVENT_BYTES);
    if client == Dialect::AgKit {
        translator.with_assembler(MessageAssembler::new(continue_message_id))
    } else {
        translator
    }
}

/// Moves one upstream response to one client, translating as it goes.
struct Pump {
    translator: Translator,
    /// `None` once a client of a `keep` route has gone away.
    tx: Option<mpsc::Sender<Bytes>>,
    idle: Duration,
    heartbeat: Option<Duration>,
    /// The run's log, when the store works.
    recorder: Option<Recorder>,
    on_disconnect: OnDisconnect,
    /// Set when the client dialect needs the gateway to keep history.
    store: Option<Arc<dyn babelgate_store::ConversationStore>>,
    thread_id: String,
    new_from_client: Vec<Message>,
    /// The gateway is shutting down and the grace period is over.
    shutdown: CancellationToken,
    report: Option<Report>,
    /// Set before the pump lets go of `tx` when the client's dialect shows
    /// a failure only as a body that breaks off (`Encoder::aborts`).
    abort: Arc<AtomicBool>,
}

/// Marks a response whose `requests_total` is counted by its pump.
#[derive(Clone, Copy)]
struct CountedAtEnd;

/// Where a stream's numbers go.
struct Report {
    metrics: Arc<Metrics>,
    route: String,
    pair: (Dialect, Dialect),
    started: tokio::time::Instant,
}

/// How a stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The run ended (finished, interrupted or with the agent's own error).
    Complete,
    /// The client went away; the upstream request was dropped.
    ClientGone,
    /// The upstream broke the stream: closed early, sent garbage or went quiet.
    Upstream(&'static str),
    Shutdown,
    /// `POST {path}/{id}/stop`.
    Stopped,
    /// The translation panicked (a bug): the client got `internal`.
    Internal,
}

impl Pump {
    async fn run<S>(mut self, mut upstream: S)
    where
        S: futures_util::Stream<Item = Result<Bytes, String>> + Unpin,
    {
        let _active = self.report.as_ref().map(|r| ActiveGuard::new(&r.metrics));
        let mut first_sent = false;
        // Small to start: most streams are mostly idle, and it grows to fit.
        let mut out = Vec::with_capacity(512);
        let idle = tokio::time::sleep(self.idle);
        tokio::pin!(idle);
        // Far in the future when heartbeats are off: one code path either way.
        let beat_every = self
            .heartbeat
            .unwrap_or(Duration::from_secs(365 * 24 * 3600));
        let beat = tokio::time::sleep(beat_every);
        tokio::pin!(beat);
        let shutdown = self.shutdown.clone();
        let end = loop {
            let client_gone = {
                let tx = self.tx.clone();
                async move {
                    match tx {
                        Some(tx) => tx.closed().await,
                        None => std::future::pending().await,
                    }
                }
            };
            let stop = async {
                match &self.recorder {
                    Some(r) => r.stop_requested().await,
                    None => std::future::pending().await,
                }
            };
            let next = tokio::select! {
                next = upstream.next() => next,
                () = &mut idle => {
                    let msg = format!("the upstream sent nothing for {:?}", self.idle);
                    self.translator.fail(&msg, Some("upstream_idle"), &mut out);
                    self.remember().await;
                    self.deliver(&mut out).await;
                    break End::Upstream("upstream_idle");
                }
                () = &mut beat => {
                    beat.as_mut().reset(tokio::time::Instant::now() + beat_every);
                    if self.tx.is_some() {
                        babelgate_core::sse::write_comment(&mut out, "ping");
                        if !self.deliver(&mut out).await {
                            break End::ClientGone;
                        }
                    }
                    continue;
                }
                () = shutdown.cancelled() => {
                    self.translator.fail("the gateway is shutting down", Some("shutdown"), &mut out);
                    self.remember().await;
                    self.deliver(&mut out).await;
                    break End::Shutdown;
                }
                () = stop => {
                    self.translator.fail("the run was stopped", Some("stopped"), &mut out);
                    self.remember().await;
                    self.deliver(&mut out).await;
                    break End::Stopped;
                }
                // The client went away: dropping `upstream` cancels the
                // request, unless the route keeps the run going.
                () = client_gone => {
                    if self.detach() {
                        continue;
                    }
                    break End::ClientGone;
                }
            };
            let end = match next {
                None => match self.guarded(&mut out, |t, out| t.finish_live(out)) {
                    Some(Ok(true)) => End::Complete,
                    Some(_) => End::Upstream("upstream_disconnected"),
                    None => End::Internal,
                },
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "the upstream connection failed");
                    self.translator.fail(
                        "the upstream connection failed",
                        Some("upstream_disconnected"),
                        &mut out,
                    );
                    End::Upstream("upstream_disconnected")
                }
                Some(Ok(bytes)) => {
                    idle.as_mut().reset(tokio::time::Instant::now() + self.idle);
                    let Some(r) = self.guarded(&mut out, |t, out| t.push(&bytes, out)) else {
                        break self.end_internal(&mut out).await;
                    };
                    if r.is_ok() {
                        if !out.is_empty() {
                            beat.as_mut()
                                .reset(tokio::time::Instant::now() + beat_every);
                            if !first_sent {
                                first_sent = true;
                                if let Some(r) = &self.report {
                                    r.metrics.first_event(&r.route, r.started.elapsed());
                                }
                            }
                        }
                        if !self.deliver(&mut out).await {
                            break End::ClientGone;
                        }
                        continue;
                    }
                    End::Upstream("upstream_malformed")
                }
            };
            if end == End::Internal {
                break self.end_internal(&mut out).await;
            }
            // History first: the client may post its next turn the moment it
            // reads the end of this one.
            self.remember().await;
            self.deliver(&mut out).await;
            break end;
        };
        if self.translator.encoder().aborts() {
            self.abort.store(true, Ordering::Release);
        }
        if let Some(mut rec) = self.recorder.take() {
            rec.end(match end {
                End::Complete => RunOutcome::Completed,
                End::ClientGone | End::Stopped => RunOutcome::Cancelled,
                End::Upstream(_) | End::Shutdown | End::Internal => RunOutcome::Failed,
            })
            .await;
        }
        let events = self.translator.events_translated;
        if let Some(r) = &self.report {
            let lasted = r.started.elapsed();
            r.metrics
                .events(r.pair.0.as_str(), r.pair.1.as_str(), events);
            // The one count of this request: its head said 200, but a client
            // that left is counted as 499 (as proxies log it).
            let status = if end == End::ClientGone { 499 } else { 200 };
            r.metrics.request(&r.route, status);
            if let End::Upstream(kind) = end {
                r.metrics.upstream_error(kind);
            }
            r.metrics.stream_ended(&r.route, lasted);
        }
        match end {
            // Logged as 499, as proxies do, though the response began as 200.
            End::ClientGone => tracing::info!(
                status = 499,
                events,
                "client went away; upstream request cancelled"
            ),
            End::Upstream(kind) => tracing::warn!(
                kind,
                events,
                "upstream stream failed; client got its dialect's error"
            ),
            End::Shutdown => tracing::info!(events, "stream ended by shutdown"),
            End::Stopped => tracing::info!(events, "run stopped on request"),
            End::Complete => tracing::debug!(events, "stream complete"),
            End::Internal => tracing::error!(
                events,
                "the translation panicked; client got its dialect's `internal` error"
            ),
        }
    }

    /// Runs one translator step. A panic in it (a decoder or encoder bug)
    /// must not kill the task, which would cut the client's stream without
    /// an error and leave the run log open: it is caught, what the step half
    /// wrote is dropped, and the stream is closed with the dialect's error,
    /// code `internal`. `None` after a panic; the translator is then not used
    /// again but for that error.
    fn guarded<T>(
        &mut self,
        out: &mut Vec<u8>,
        step: impl FnOnce(&mut Translator, &mut Vec<u8>) -> T,
    ) -> Option<T> {
        let before = out.len();
        let translator = &mut self.translator;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| step(translator, out))) {
            Ok(r) => Some(r),
            Err(payload) => {
                let what = payload
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("(no message)");
                // Bounded: the message may quote a whole upstream frame.
                let what: String = what.chars().take(256).collect();
                tracing::error!(panic = %what, "the stream's translation panicked");
                out.truncate(before);
                let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    translator.fail(
                        "the gateway failed to translate the stream",
                        Some("internal"),
                        out,
                    )
                }));
                if failed.is_err() {
                    // The encoder itself is broken: end without an event
                    // rather than with half of one.
                    out.truncate(before);
                }
                None
            }
        }
    }

    /// Ends a stream whose translation panicked (see [`guarded`](Self::guarded)).
    async fn end_internal(&mut self, out: &mut Vec<u8>) -> End {
        if let Some(r) = &self.report {
            r.metrics.stream_panics.inc();
        }
        self.deliver(out).await;
        End::Internal
    }

    /// The client went away: true when the run goes on without it.
    fn detach(&mut self) -> bool {
        self.tx = None;
        let keep = self.on_disconnect == OnDisconnect::Keep && self.recorder.is_some();
        if keep {
            tracing::info!("client went away; the run goes on (on_disconnect = keep)");
        }
        keep
    }

    /// Logs what is buffered and sends it to the client, if one is there;
    /// false when the client is gone and the run should stop.
    async fn deliver(&mut self, out: &mut Vec<u8>) -> bool {
        if out.is_empty() {
            return true;
        }
        let chunk = match &mut self.recorder {
            Some(rec) => {
                let mut with_ids = Vec::with_capacity(out.len() + 64);
                rec.record(out, &mut with_ids).await;
                out.clear();
                Bytes::from(with_ids)
            }
            None => Bytes::from(std::mem::take(out)),
        };
        match &self.tx {
            None => true,
            Some(tx) => {
                if tx.send(chunk).await.is_ok() {
                    true
                } else {
                    self.detach()
                }
            }
        }
    }

    async fn remember(&mut self) {
        if let Some(store) = &self.store {
            let mut turn = std::mem::take(&mut self.new_from_client);
            turn.extend(self.translator.take_messages());
            if let Err(e) = store.append(&self.thread_id, turn).await {
                tracing::warn!(thread = %self.thread_id, error = %e, "could not keep the conversation history");
            }
        }
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

/// Counts a stream in `active_streams` while it lives.
struct ActiveGuard(prometheus_client::metrics::gauge::Gauge);

impl ActiveGuard {
    fn new(m: &Metrics) -> Self {
        m.active_streams.inc();
        ActiveGuard(m.active_streams.clone())
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STARTED: &str = "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n";

    fn pump(idle: Duration, heartbeat: Option<Duration>) -> (Pump, mpsc::Receiver<Bytes>) {
        let (tx, rx) = mpsc::channel(STREAM_BUFFER_CHUNKS);
        let translator = registry::translator(
            Dialect::AgUi,
            Dialect::AgUi,
            EncodeContext::deterministic(),
            DEFAULT_MAX_EVENT_BYTES,
        );
        let p = Pump {
            translator,
            tx: Some(tx),
            idle,
            heartbeat,
            recorder: None,
            on_disconnect: OnDisconnect::Cancel,
            store: None,
            thread_id: "t".into(),
            new_from_client: Vec::new(),
            shutdown: CancellationToken::new(),
            report: None,
            abort: Arc::default(),
        };
        (p, rx)
    }

    type Upstream =
        std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<Bytes, String>> + Send>>;

    fn upstream() -> (mpsc::Sender<Result<Bytes, String>>, Upstream) {
        let (tx, rx) = mpsc::channel(4);
        let s =
            futures_util::stream::unfold(
                rx,
                |mut rx| async move { rx.recv().await.map(|x| (x, rx)) },
            );
        (tx, Box::pin(s))
    }

    #[tokio::test(start_paused = true)]
    async fn heartbeats_keep_an_idle_stream_alive_until_the_idle_timeout() {
        let (p, mut rx) = pump(Duration::from_secs(50), Some(Duration::from_secs(15)));
        let (up, s) = upstream();
        tokio::spawn(p.run(s));
        up.send(Ok(Bytes::from(STARTED))).await.unwrap();
        let started = tokio::time::Instant::now();
        let mut chunks = Vec::new();
        while let Some(c) = rx.recv().await {
            chunks.push((
                started.elapsed().as_secs(),
                String::from_utf8(c.to_vec()).unwrap(),
            ));
        }
        assert!(chunks[0].1.contains("RUN_STARTED"));
        let pings: Vec<u64> = chunks
            .iter()
            .filter(|(_, c)| c == ": ping\n\n")
            .map(|(t, _)| *t)
            .collect();
        assert_eq!(pings, [15, 30, 45], "{chunks:?}");
        let (t, last) = chunks.last().unwrap();
        assert_eq!(*t, 50);
        assert!(
            last.contains("RUN_ERROR") && last.contains("upstream_idle"),
            "{last}"
        );
        drop(up);
    }

    #[tokio::test(start_paused = true)]
    async fn output_postpones_the_heartbeat() {
        let (p, mut rx) = pump(Duration::from_secs(100), Some(Duration::from_secs(15)));
        let (up, s) = upstream();
        tokio::spawn(p.run(s));
        up.send(Ok(Bytes::from(STARTED))).await.unwrap();
        rx.recv().await.unwrap();
        tokio::time::sleep(Duration::from_secs(10)).await;
        up.send(Ok(Bytes::from(
            "data: {\"type\":\"STEP_STARTED\",\"stepName\":\"s\"}\n\n",
        )))
        .await
        .unwrap();
        let t0 = tokio::time::Instant::now();
        assert!(String::from_utf8(rx.recv().await.unwrap().to_vec())
            .unwrap()
            .contains("STEP_STARTED"));
        assert_eq!(rx.recv().await.unwrap(), Bytes::from(": ping\n\n"));
        assert_eq!(
            t0.elapsed().as_secs(),
            15,
            "15 s after the last output, not after the first"
        );
    }

    #[tokio::test]
    async fn a_client_that_goes_away_cancels_the_upstream() {
        let (p, rx) = pump(Duration::from_secs(100), None);
        let (up, s) = upstream();
        let task = tokio::spawn(p.run(s));
        up.send(Ok(Bytes::from(STARTED))).await.unwrap();
        drop(rx);
        // The pump drops the upstream stream, which closes our sender's side.
        tokio::time::timeout(Duration::from_secs(20), up.closed())
            .await
            .expect("upstream released");
        task.await.unwrap();
    }
    /// A decoder with a bug: AG-UI's, but it panics on a frame `boom`.
    struct Buggy(Box<dyn babelgate_core::Decoder>);

    impl babelgate_core::Decoder for Buggy {
        fn dialect(&self) -> Dialect {
            Dialect::AgUi
        }
        fn decode(
            &mut self,
            frame: &babelgate_core::Frame,
            out: &mut Vec<babelgate_core::Event>,
        ) -> Result<(), babelgate_core::DecodeError> {
            assert!(frame.data != "boom", "injected decoder bug");
            self.0.decode(frame, out)
        }
    }

    #[tokio::test]
    async fn a_panic_in_translation_ends_the_stream_with_internal_and_fails_the_run() {
        use babelgate_store::{MemoryRunLog, RunLog, RunStatus};
        let (mut p, mut rx) = pump(Duration::from_secs(100), None);
        p.translator = Translator::new(
            babelgate_core::SseFramer::new(DEFAULT_MAX_EVENT_BYTES),
            Box::new(Buggy(registry::decoder(Dialect::AgUi))),
            registry::encoder(Dialect::AgUi, EncodeContext::deterministic()),
        );
        let log: Arc<dyn RunLog> = Arc::new(MemoryRunLog::default());
        let (writer, _) = RunWriter::begin(log.clone(), "k", "r1", "me", Duration::from_secs(60))
            .await
            .unwrap();
        p.recorder = Some(Recorder::new(writer, Duration::from_secs(60)));
        let metrics = Arc::new(Metrics::default());
        p.report = Some(Report {
            metrics: metrics.clone(),
            route: "/r".into(),
            pair: (Dialect::AgUi, Dialect::AgUi),
            started: tokio::time::Instant::now(),
        });
        let (up, s) = upstream();
        let task = tokio::spawn(p.run(s));
        up.send(Ok(Bytes::from(STARTED))).await.unwrap();
        up.send(Ok(Bytes::from("data: boom\n\n"))).await.unwrap();
        let mut body = String::new();
        while let Some(c) = rx.recv().await {
            body.push_str(std::str::from_utf8(&c).unwrap());
        }
        task.await.expect("the pump survives the panic");
        assert!(body.contains("RUN_STARTED"), "{body}");
        let last = body.trim_end().rsplit("\n\n").next().unwrap();
        assert!(
            last.contains("RUN_ERROR") && last.contains("\"code\":\"internal\""),
            "{body}"
        );
        let info = log.info("r1").await.unwrap().unwrap();
        assert_eq!(info.status, RunStatus::Ended(RunOutcome::Failed));
        assert_eq!(metrics.stream_panics.get(), 1);
    }

    #[test]
    fn only_streams_whose_history_is_kept_assemble_messages() {
        let text = "data: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\n\n\
                    data: {\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"hi\"}\n\n\
                    data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}\n\n";
        for client in [Dialect::AgUi, Dialect::Hai, Dialect::Vercel, Dialect::AgKit] {
            let mut t =
                stream_translator(Dialect::AgUi, client, EncodeContext::deterministic(), None);
            let mut out = Vec::new();
            t.push(STARTED.as_bytes(), &mut out).unwrap();
            t.push(text.as_bytes(), &mut out).unwrap();
            let kept = t.take_messages();
            assert_eq!(
                !kept.is_empty(),
                client == Dialect::AgKit,
                "{client:?}: {kept:?}"
            );
        }
    }
}
