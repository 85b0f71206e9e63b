//! Answering one request: the route matched, the request translated and
//! sent upstream, its answer handed to a stream pump and returned as SSE;
//! resume and stop of a kept run; the upstream's errors, told to the client
//! without its internals.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use babelgate_core::request::RunRequest;
use babelgate_core::{Dialect, EncodeContext, IdGen, Intent, Resume, Role};
use bytes::Bytes;
use futures_util::StreamExt;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::json;
use tokio::sync::mpsc;
use tower::{Layer, ServiceBuilder, ServiceExt};
use tracing::Instrument;

use super::pump::{stream_translator, Pump, PumpBody, Report, Slot, UpstreamStop};
use super::{BoxError, Gateway, ReqBody, Routes, STREAM_BUFFER_CHUNKS};
use crate::access;
use crate::body::ReadBodyLayer;
use crate::config::{Config, OnDisconnect, Route, UpstreamTransport};
use crate::conn;
use crate::error::UpstreamFault;
use crate::error::{json_response, Body, GatewayError};
use crate::inspector::capture::transport_name;
use crate::inspector::{CaptureHandle, Exchange, ReplaySetup, Requests, Side};
use crate::limits::{self, StreamLimitLayer};
use crate::metrics::CountAtEnd;
use crate::registry;
use crate::resume::{self, Mode, Recorder};
use crate::telemetry::{Trace, ViaWebSocket};
use crate::transport::{self, Read, Transport};
use crate::upstream;
use babelgate_store::{run_key, EventId, RunWriter, StoreError};

impl Gateway {
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
        // Who the request counts as, decided once (limits read it).
        let client = crate::host::client_addr(peer, &req_headers, &routes.config.trusted_proxies);
        req.extensions_mut().insert(crate::host::ClientAddr(client));
        let span = tracing::info_span!("request", id = %request_id, %method, %path, %peer);
        let http1 = req.version() < http::Version::HTTP_2;
        // A session's upgrade, or a request that came in one.
        let via_ws =
            req.extensions().get::<ViaWebSocket>().is_some() || crate::ws::is_upgrade(&req);
        let trace = Trace::begin(self.telemetry.as_deref(), &req_headers, &method, via_ws);
        req.extensions_mut().insert(trace.clone());
        let mut failed = None;
        let result = self
            .route_request(&routes, req, &request_id, started)
            .instrument(span.clone())
            .await;
        let (route_path, mut resp) = match result {
            Ok(x) => x,
            Err((route_path, e)) => {
                let _g = span.enter();
                tracing::info!(status = e.status.as_u16(), fault = e.fault.as_str(), code = e.code, error = %e.message, "request refused");
                failed = Some((e.code, e.fault == crate::error::Fault::Upstream));
                let timed_out = e.code == "request_timeout";
                // On a route, in its client dialect's words where it has them.
                let dialect = route_path
                    .as_deref()
                    .and_then(|p| routes.config.route(p))
                    .map(|r| registry::requests(r.client));
                let mut resp = e.into_response_for(dialect);
                if timed_out && http1 {
                    // The rest of the body may still be on its way: this
                    // connection cannot carry another request.
                    resp.headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                (route_path, resp)
            }
        };
        // A stream's spans end with it (in its pump), the rest's here.
        trace.end_response(resp.status(), failed);
        // A proxied stream is counted by its pump when it ends (200, or 499
        // when its client left), so it is counted once.
        if let Some(rp) = route_path
            .as_ref()
            .filter(|_| resp.extensions().get::<CountedAtEnd>().is_none())
        {
            self.metrics.request(rp, resp.status().as_u16());
        }
        let route = route_path.as_deref().and_then(|p| routes.config.route(p));
        if let Some(r) = route {
            // How long its client may take no bytes (see `conn::respond`).
            resp.extensions_mut()
                .insert(conn::ClientStall(r.client_stall_timeout));
        }
        access::decorate(&routes.config, route, &req_headers, &mut resp);
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
                let resp = if self.shutdown.is_cancelled() || self.pumps.is_closed() {
                    json_response(
                        StatusCode::SERVICE_UNAVAILABLE,
                        &json!({"status": "shutting down"}),
                    )
                } else {
                    match self.stores.ping().await {
                        Ok(()) => json_response(StatusCode::OK, &json!({"status": "ready"})),
                        // A store that cannot work as configured (`redis` on
                        // a cluster node): said as such, naming no host.
                        Err(e @ babelgate_store::StoreError::Config(_)) => {
                            tracing::error!(error = %e, "readiness: the store is misconfigured");
                            json_response(
                                StatusCode::SERVICE_UNAVAILABLE,
                                &json!({"status": "store misconfigured", "detail": e.to_string()}),
                            )
                        }
                        Err(e) => {
                            // The detail may name hosts: for the log, not for anyone asking.
                            tracing::warn!(error = %e, "readiness: the store does not answer");
                            json_response(
                                StatusCode::SERVICE_UNAVAILABLE,
                                &json!({"status": "store unavailable"}),
                            )
                        }
                    }
                };
                return Ok((None, resp));
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
        if let Some(ins) = self.inspector.as_ref().filter(|i| i.owns(&path)) {
            let peer = conn::peer_of(&req);
            let authority = crate::host::authority(&req);
            return ins
                .serve(
                    req.method(),
                    &path,
                    req.uri().query(),
                    req.headers(),
                    authority.as_deref(),
                    peer,
                )
                .await
                .map(|r| (None, r))
                .map_err(|e| (None, e));
        }
        if let Some(route) = routes.config.route(&path) {
            let rp = Some(route.path.clone());
            trace_of(&req).route(
                route,
                &route.path,
                client_transport(route.client, req.headers()),
            );
            if access::is_preflight(req.method(), req.headers()) {
                return access::preflight(route, req.headers())
                    .map(|r| (rp.clone(), r))
                    .map_err(|e| (rp, e));
            }
            if crate::ws::is_upgrade(&req) {
                // Refused before the upgrade when the caller is not let in;
                // the inner request is authorized again as any other.
                if let Err(e) = access::authorize(route, req.headers()).await {
                    return Err((rp, e));
                }
                let peer = conn::peer_of(&req);
                let read = routes.config.request_read_timeout;
                // The session's request comes back through `handle` and is
                // counted there (by its pump when it streams): the 101 is not
                // a request of its own.
                return crate::ws::accept(self, route, read, &mut req, peer)
                    .map(|mut r| {
                        r.extensions_mut().insert(CountedAtEnd);
                        (rp.clone(), r)
                    })
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
            if let Err(e) = access::refuse_rebound(route, &req) {
                return Err((rp, e));
            }
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
                .layer(
                    ReadBodyLayer::new(
                        route.max_body_bytes,
                        routes.config.request_read_timeout,
                        self.metrics.clone(),
                    )
                    .with_inflight(self.inflight.clone()),
                )
                .service(proxy);
            return boxed(stack.oneshot(req))
                .await
                .map(|r| (rp.clone(), r))
                .map_err(|e| (rp, e));
        }
        // `{path}{description_path}`: the agent as its clients' dialect
        // describes it.
        if let Some(route) = super::runs::described(&routes.config, &path) {
            let rp = Some(route.path.clone());
            if access::is_preflight(req.method(), req.headers()) {
                return access::preflight(route, req.headers())
                    .map(|r| (rp.clone(), r))
                    .map_err(|e| (rp, e));
            }
            let peer = conn::peer_of(&req);
            let tls = routes.config.tls.is_some();
            let origin = crate::host::origin(&req, peer, &routes.config.trusted_proxies, tls);
            return super::runs::describe(route, req.method(), origin)
                .map(|r| (rp.clone(), r))
                .map_err(|e| (rp, e));
        }
        // `{path}/{id}/stream` (resume) and `{path}/{id}/stop`.
        if let Some((route, id, action)) = sub_route(&routes.config, &path) {
            let rp = Some(route.path.clone());
            let template = format!("{}/{{id}}/{}", route.path, action.as_str());
            trace_of(&req).route(
                route,
                &template,
                client_transport(route.client, req.headers()),
            );
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
            if let Err(e) = access::refuse_rebound(route, &req) {
                return Err((rp, e));
            }
            if !route.resume {
                // Nothing of this route's runs is kept: say so rather than
                // answer as if no run were there (204, 404 no_active_run).
                return Err((rp, resume_disabled(&route.path, action)));
            }
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
                                gw.resume(route, &conversation, req.headers(), trace_of(&req))
                                    .await
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
        if access::is_preflight(req.method(), req.headers()) {
            if let Some(r) = access::preflight_unrouted(&routes.config, req.headers()) {
                return Ok((None, r));
            }
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
        client: &upstream::Client,
        req: Request<Bytes>,
        request_id: &str,
        started: tokio::time::Instant,
        caller: &access::Caller,
    ) -> Result<Response<Body>, GatewayError> {
        let session = req
            .extensions()
            .get::<crate::telemetry::ViaWebSocket>()
            .is_some();
        let capture = self.inspector.as_ref().and_then(|ins| {
            let mut received = Exchange::new(
                req.method().as_str(),
                req.headers(),
                &secret_headers(route),
                req.body(),
            );
            received.path = Some(req.uri().path().to_string());
            ins.begin(
                &route.path,
                Requests {
                    received,
                    upstream: None,
                },
                started.into_std(),
            )
        });
        let capture_ref = capture.clone();
        // What a run's request asked its answers to carry back: a refusal
        // after the request was read carries it too (a JSON-RPC error names
        // the request it answers).
        let reply_to = std::sync::OnceLock::new();
        let reply_slot = &reply_to;
        let mut r: Result<Response<Body>, GatewayError> = async move {
            let capture = capture_ref;
            let forwarded = access::forwarded(route, req.headers());
            let transport = client_transport(route.client, req.headers());
            let trace = trace_of(&req);
            let body = req.into_body();
            // Before any parse: a body whose parsed form would cost more
            // than its size allows is refused whole (the core's rule).
            babelgate_core::cost::check(&body).map_err(|e| {
                GatewayError::client(StatusCode::PAYLOAD_TOO_LARGE, "body_too_costly", e.to_string())
            })?;
            let mut ids = IdGen::default();
            let (mut run, answer_once) = match registry::requests(route.client)
                .classify(&body)
                .map_err(GatewayError::request)?
            {
                Intent::Run(run) => (*run, false),
                Intent::Answer(run) => (*run, true),
                Intent::About {
                    run_id,
                    ask,
                    reply_to,
                } => {
                    let about = super::runs::About {
                        route,
                        caller,
                        run_id: &run_id,
                        ask,
                        reply_to: reply_to.clone(),
                    };
                    let answer = self
                        .about_run(about, transport, trace)
                        .await
                        .map_err(|e| e.replying_to(reply_to));
                    if let (Ok(_), Some(c)) = (&answer, &capture) {
                        // No run of its own: the capture ends with the answer.
                        c.end("completed", None, false);
                    }
                    return answer;
                }
            };
            if let Some(r) = &run.reply_to {
                let _ = reply_slot.set(r.clone());
            }
            if run.thread_id.is_empty() {
                run.thread_id = ids.next("thread");
            }
            // A run id the gateway mints is the run log's own, so that a
            // client can name the run later (get, follow, stop by id).
            let minted = run.run_id.is_empty();
            if minted {
                run.run_id = babelgate_store::run_id(&run_key(&route.path, &caller.scoped(&run.thread_id)));
            }
            for m in &mut run.messages {
                if m.id.is_empty() {
                    m.id = ids.next("msg");
                }
            }
            trace.run(&run.thread_id, &run.run_id);
            if let Some(c) = &capture {
                c.run_ids(&run.thread_id, &run.run_id);
            }
            // What the client said this turn, kept for dialects that send only that.
            let new_from_client = run.messages.clone();
            // Where this caller's run and history of this thread are kept.
            let conversation = caller.scoped(&run.thread_id);
            let keeps_history = registry::policy(route.client).gateway_keeps_history;
            if keeps_history {
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

            // Later entries replace what earlier ones set for their names:
            // the request id goes upstream once, whatever was forwarded or
            // configured.
            let ws_upstream = crate::ws::is_ws_url(&route.upstream);
            let mut headers = forwarded;
            headers.extend(upstream_headers(route));
            for (k, v) in registry::requests(route.upstream_protocol).upstream_headers() {
                headers.insert(*k, HeaderValue::from_static(v));
            }
            if let Ok(v) = HeaderValue::from_str(request_id) {
                headers.insert("x-request-id", v);
            }
            if !ws_upstream {
                headers.insert(
                    header::ACCEPT,
                    HeaderValue::from_static(transport::upstream_accept(route.upstream_transport)),
                );
                headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
            }
            if let Some(c) = &capture {
                let mut sent = Exchange::new(
                    "POST",
                    &headers,
                    &secret_headers(route),
                    upstream_body.to_string().as_bytes(),
                );
                sent.url = Some(loggable_url(&route.upstream));
                c.upstream_request(sent);
            }
            // After what was forwarded or configured: the trace is ours to carry.
            headers.extend(trace.upstream(route));
            let mut stream = Stream {
                route,
                run: &run,
                minted,
                conversation,
                keeps_history,
                new_from_client,
                started,
                transport,
                messages: session,
                capture,
                trace,
                stop_upstream: None,
                answer_once,
            };
            if ws_upstream {
                let ws = crate::ws::open_upstream(route, headers, upstream_body.to_string())
                    .await
                    .inspect_err(|g| self.metrics.upstream_error(g.code))?;
                // `ag-ui.proto` accepted: each message is a protobuf event, read
                // as a binary HTTP body is (the route's transport allows it:
                // only `proto` and `auto` offer it).
                let upstream_binary = if ws.is_binary() {
                    Transport::proto_for(&registry::policy(route.upstream_protocol))
                } else {
                    None
                };
                return self.start_pump(stream, ws, upstream_binary).await;
            }
            // What a stop of the upstream's run needs, for a dialect that has
            // one: the run's own request headers, asking for a JSON answer.
            stream.stop_upstream = registry::requests(route.upstream_protocol)
                .stop_request()
                .map(|build| {
                    let mut headers = headers.clone();
                    headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
                    Box::new(UpstreamStop {
                        build,
                        client: client.clone(),
                        url: route.upstream.clone(),
                        headers,
                    })
                });
            let send = client.post(&route.upstream, headers, upstream_body.to_string());
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
            let status = resp.status;
            stream.trace.upstream_status(status.as_u16());
            if !status.is_success() {
                self.metrics.upstream_error("upstream_status");
                // The body may tell internals: a bounded excerpt, read within
                // the rest of the response time (at most 5 s), goes to the log;
                // only the status to the client. The rest is never read.
                let left = route
                    .response_timeout
                    .saturating_sub(asked.elapsed())
                    .min(ERROR_BODY_TIME);
                let excerpt = error_excerpt(resp.body, left).await;
                tracing::warn!(upstream = %loggable_url(&route.upstream), %status, body = %excerpt, "upstream refused the request");
                return Err(GatewayError::upstream(
                    StatusCode::BAD_GATEWAY,
                    "upstream_status",
                    format!("the upstream answered {status}"),
                ));
            }
            let ctype = resp
                .headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            // An upstream that cannot speak the binary transport answers SSE
            // (AG-UI 1.1's rule), whatever was asked.
            let upstream_binary =
                if route.upstream_transport != UpstreamTransport::Sse && transport::is_proto(&ctype) {
                    Transport::proto_for(&registry::policy(route.upstream_protocol))
                } else {
                    None
                };
            if upstream_binary.is_none() && !ctype.starts_with("text/event-stream") {
                self.metrics.upstream_error("upstream_content_type");
                return Err(GatewayError::upstream(
                    StatusCode::BAD_GATEWAY,
                    "upstream_content_type",
                    format!(
                        "upstream answered with content-type `{ctype}`, not {}",
                        transport::upstream_accept(route.upstream_transport)
                    ),
                ));
            }

            let upstream = resp
                .body
                .map(|r| r.map(Read::Bytes).map_err(UpstreamFault::Connection));
            self.start_pump(stream, upstream, upstream_binary).await
        }
        .await;
        if let (Err(e), Some(reply)) = (&mut r, reply_to.get()) {
            if e.reply_to.is_none() {
                e.reply_to = Some(Box::new(reply.clone()));
            }
        }
        if let (true, Some(c)) = (session, &capture) {
            c.client_over_websocket();
        }
        if let (Err(e), Some(c)) = (&r, &capture) {
            // Refused before any stream: the list shows why.
            c.failed(&e.message, e.code);
            c.end("failed", Some(e.code), false);
        }
        r
    }

    /// Starts the pump that moves `upstream` (SSE bytes) to the client.
    async fn start_pump<S>(
        &self,
        stream: Stream<'_>,
        upstream: S,
        upstream_binary: Option<Transport>,
    ) -> Result<Response<Body>, GatewayError>
    where
        S: futures_util::Stream<Item = Result<Read, UpstreamFault>> + Unpin + Send + 'static,
    {
        let (route, run, transport) = (stream.route, stream.run, stream.transport);
        // A route without resume has no run log: no writer, no lease kept
        // for the run, no journal, no `id:` lines (see `Pump::prepare`).
        let mut recorder = if route.resume {
            let own_id = stream.minted.then_some(run.run_id.as_str());
            self.begin_log(route, run, &stream.conversation, own_id)
                .await?
        } else {
            None
        };

        let ctx = EncodeContext {
            ids: IdGen::default(),
            thread_id: Some(run.thread_id.clone()),
            run_id: Some(run.run_id.clone()),
            message_id: run.continue_message_id.clone(),
            continued: run.continued.clone(),
            extension_frames: route.extension_frames,
            drop_raw: route.drop_raw,
            reply_to: run.reply_to.clone(),
            ..Default::default()
        };
        let setup = babelgate_core::journal::Setup::of(&ctx);
        let translator = stream_translator(
            route.upstream_protocol,
            route.client,
            ctx,
            run.continue_message_id.clone(),
            (
                upstream_binary.unwrap_or(Transport::Sse),
                (transport, stream.messages),
            ),
        );
        if let Some(c) = &stream.capture {
            let read = upstream_binary.unwrap_or(Transport::Sse);
            let written = transport;
            let ws = crate::ws::is_ws_url(&route.upstream);
            let up_name = match (ws, upstream_binary.is_some()) {
                (true, true) => "ws-proto",
                (true, false) => "ws",
                (false, true) => "proto",
                (false, false) => "sse",
            };
            c.plan(
                Side {
                    dialect: route.upstream_protocol.to_string(),
                    transport: up_name.into(),
                },
                Side {
                    dialect: route.client.to_string(),
                    transport: transport_name(transport).into(),
                },
                ReplaySetup {
                    from: route.upstream_protocol,
                    to: route.client,
                    from_transport: transport_name(read).into(),
                    to_transport: transport_name(written).into(),
                    setup,
                    ending: Default::default(),
                },
            );
        }
        let headers = translator.encoder().headers();
        if matches!(transport, Transport::Proto(_)) {
            // The encoder writes binary messages, logged as such.
            if let Some(r) = recorder.as_mut() {
                r.binary();
            }
        }
        // A binary stream or messages have no comment to send: no
        // heartbeats (a WebSocket session pings instead).
        let heartbeat = match transport {
            Transport::Sse if !stream.messages && !stream.answer_once => route.heartbeat,
            Transport::Sse | Transport::Proto(_) => None,
        };

        // The body runs the pump (no task of its own), tracked so that a
        // shutdown waits for it as for any stream.
        let slot = Arc::new(Slot::default());
        let abort = Arc::new(AtomicBool::new(false));
        let pump = Pump {
            translator,
            tx: Some(slot.clone()),
            idle: route.idle_timeout,
            heartbeat,
            recorder,
            on_disconnect: route.on_disconnect,
            store: stream
                .keeps_history
                .then(|| self.stores.conversations.clone()),
            thread_id: stream.conversation,
            new_from_client: stream.new_from_client,
            shutdown: self.shutdown.clone(),
            report: Some(Report {
                metrics: self.metrics.clone(),
                route: route.path.clone(),
                pair: (route.upstream_protocol, route.client),
                started: stream.started,
                trace: {
                    stream.trace.streaming(upstream_binary.is_some());
                    stream.trace
                },
                inflight: self.inflight.clone(),
            }),
            abort: abort.clone(),
            capture: stream.capture,
            messages: stream.messages,
            stop_upstream: stream.stop_upstream,
            answer_once: stream.answer_once,
        };
        let span = tracing::Span::current();
        let run = Box::new(pump).run(upstream).instrument(span);
        let body = PumpBody::new(self.pumps.track_future(run), slot, abort);
        let mut resp = stream_response(BodyExt::boxed(body), headers, transport);
        if stream.answer_once {
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        }
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
        own_id: Option<&str>,
    ) -> Result<Option<Recorder>, GatewayError> {
        let lease = self.routes.load().config.store.lease;
        let key = run_key(&route.path, conversation);
        // Tagged by the conversation: one Redis Cluster slot for its runs
        // (a minted id is made so too).
        let run_id = own_id.map_or_else(|| babelgate_store::run_id(&key), str::to_string);
        match RunWriter::begin(&self.leases, &key, &run_id, &self.owner, lease).await {
            Ok((writer, _previous)) => {
                if registry::policy(route.client).keeps_input() {
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
        headers_in: &http::HeaderMap,
        trace: Trace,
    ) -> Result<Response<Body>, GatewayError> {
        let headers = headers_in;
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
        let mode = match (registry::policy(route.client).resume, last_event_id) {
            // useChat asks on every page load: only a running answer is resumed.
            (Resume::RunningFromStart, _) if !running => return Ok(no_content()),
            (Resume::RunningFromStart, _) => Mode::After(None),
            (_, Some(after)) => Mode::After(Some(after)),
            (_, None) if !running => return Ok(no_content()),
            (Resume::AfterOrFromStart, None) => Mode::After(None),
            (Resume::AfterOrSnapshot, None) => Mode::Snapshot,
        };
        let transport = client_transport(route.client, headers_in);
        self.follow_run(route, info, mode, None, transport, trace)
            .await
    }

    /// Streams a kept run to a client that came back to it: `mode` says
    /// from where; a `reply_to` of the resuming request's own has the run
    /// re-encoded for it (its answers carry that, not the first request's).
    pub(super) async fn follow_run(
        &self,
        route: &Route,
        info: babelgate_store::RunInfo,
        mode: Mode,
        reply_to: Option<serde_json::Value>,
        transport: Transport,
        trace: Trace,
    ) -> Result<Response<Body>, GatewayError> {
        let runs = self.stores.runs.clone();
        let store = &self.routes.load().config.store;
        let (max_followers, max_snapshot_bytes) = (store.max_followers, store.max_snapshot_bytes);
        let Some(slot) = self.followers.enter(max_followers) else {
            self.metrics.rejected("too_many_followers");
            self.metrics
                .stream_refused(&route.path, "too_many_followers");
            return Ok(too_many_followers(max_followers));
        };
        let (last, input) = if mode == Mode::Snapshot {
            let last = runs.last_id(&info.run_id).await.map_err(store_error)?;
            let input = runs.input(&info.run_id).await.map_err(store_error)?;
            (last, input)
        } else {
            (None, Vec::new())
        };
        let mode_name = match mode {
            Mode::After(Some(_)) => "after_id",
            Mode::After(None) => "from_start",
            Mode::Snapshot => "snapshot",
        };
        let replayed = self.metrics.resumed(&route.path, mode_name);
        tracing::info!(run = %info.run_id, ?mode, "resuming");
        trace.resumed(mode_name);
        let (tx, rx) = mpsc::channel::<Bytes>(STREAM_BUFFER_CHUNKS);
        let abort = Arc::new(AtomicBool::new(false));
        let follow = resume::Follow {
            runs,
            run_id: info.run_id,
            dialect: route.client,
            mode,
            last,
            input,
            max_snapshot_bytes,
            slot,
            abort: abort.clone(),
            transport,
            replayed,
            counted: CountAtEnd::new(self.metrics.clone(), &route.path),
            reply_to,
        }
        .run(tx, self.shutdown.clone());
        self.pumps.spawn(
            async move {
                follow.await;
                trace.end_stream(None, 200, 0, 0);
            }
            .instrument(tracing::Span::current()),
        );
        let headers = registry::encoder(route.client, EncodeContext::default()).headers();
        // The follower writes the client's transport itself.
        let mut resp = sse_body(rx, Some(abort), headers, transport);
        resp.extensions_mut().insert(CountedAtEnd);
        Ok(resp)
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
/// A proxied request on its way to a stream, as the pump is started with
/// it (the upstream's bytes aside).
struct Stream<'a> {
    route: &'a Route,
    run: &'a RunRequest,
    /// The gateway minted the run's id: the run log takes it as its own.
    minted: bool,
    /// Where this caller's run and history of this thread are kept.
    conversation: String,
    keeps_history: bool,
    /// What the client said this turn, for dialects that send only that.
    new_from_client: Vec<babelgate_core::request::Message>,
    started: tokio::time::Instant,
    /// The client's transport.
    transport: Transport,
    /// The client takes each event as a message (a WebSocket session).
    messages: bool,
    capture: Option<CaptureHandle>,
    trace: Trace,
    /// How to stop the upstream's run (see `Pump::stop_upstream`).
    stop_upstream: Option<Box<UpstreamStop>>,
    /// The client takes the run's outcome as one answer (`Intent::Answer`).
    answer_once: bool,
}

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

impl SubAction {
    fn as_str(self) -> &'static str {
        match self {
            SubAction::Stream => "stream",
            SubAction::Stop => "stop",
        }
    }
}

/// The request's trace (`handle` puts it in every request).
fn trace_of<B>(req: &Request<B>) -> Trace {
    req.extensions().get::<Trace>().cloned().unwrap_or_default()
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
pub(super) fn store_error(e: StoreError) -> GatewayError {
    // The detail may name the store's host: for the log only.
    tracing::warn!(error = %e, "store request failed");
    GatewayError::store(&e)
}

/// 404 `resume_disabled`: `{path}/{id}/stream` or `/stop` on a route with
/// `resume = false`, which keeps no run log to resume from or stop by.
fn resume_disabled(route: &str, action: SubAction) -> GatewayError {
    let what = match action {
        SubAction::Stream => "resumed",
        SubAction::Stop => "stopped",
    };
    GatewayError::client(
        StatusCode::NOT_FOUND,
        "resume_disabled",
        format!("the route {route} keeps no run log (resume = false): its runs cannot be {what}"),
    )
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

/// A streaming response fed by `rx` (already in `transport`'s form), one
/// body frame per chunk so that each event is flushed as it comes.
pub(crate) fn sse_response(
    rx: mpsc::Receiver<Bytes>,
    dialect_headers: &'static [(&'static str, &'static str)],
    transport: Transport,
) -> Response<Body> {
    sse_body(rx, None, dialect_headers, transport)
}

/// The transport a client of `dialect` asked for with its `Accept`.
fn client_transport(dialect: Dialect, headers: &http::HeaderMap) -> Transport {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    transport::negotiate(accept, &registry::policy(dialect))
}

/// A response of `transport` with what arrives on `rx` (already in that
/// form: the demo agent's and a resumed stream's follower's); once `rx`
/// ends, a set `abort` ends the body with an error instead of cleanly
/// (hyper then breaks off the connection, or resets the HTTP/2 stream).
fn sse_body(
    rx: mpsc::Receiver<Bytes>,
    abort: Option<Arc<AtomicBool>>,
    dialect_headers: &'static [(&'static str, &'static str)],
    transport: Transport,
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
    stream_response(
        BodyExt::boxed(StreamBody::new(stream)),
        dialect_headers,
        transport,
    )
}

/// A streaming response of `transport` with `body`: its content type and
/// the headers that keep proxies from buffering or caching it.
fn stream_response(
    body: Body,
    dialect_headers: &'static [(&'static str, &'static str)],
    transport: Transport,
) -> Response<Body> {
    let mut response = Response::new(body);
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(transport.content_type()),
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

/// The request an upstream of `dialect` gets: one that keeps its own history
/// (AG-Kit servers) receives only what is new since its last turn, i.e. the
/// messages after the last one it wrote.
fn upstream_request(dialect: Dialect, run: &RunRequest) -> RunRequest {
    let mut up = run.clone();
    if registry::policy(dialect).upstream_keeps_history {
        let start = run
            .messages
            .iter()
            .rposition(|m| m.role == Role::Assistant)
            .map_or(0, |i| i + 1);
        up.messages = run.messages.get(start..).unwrap_or_default().to_vec();
    }
    up
}

/// Headers whose values the inspector never shows: the route's configured
/// upstream headers and the ones it forwards.
fn secret_headers(route: &Route) -> Vec<&str> {
    route
        .upstream_headers
        .0
        .iter()
        .map(|(k, _)| k.as_str())
        .chain(route.forward_headers.iter().map(String::as_str))
        .collect()
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
fn upstream_send_error(route: &Route, e: upstream::SendError) -> GatewayError {
    let timeout = e.is_timeout();
    tracing::warn!(upstream = %loggable_url(&route.upstream), error = %upstream::error_chain(&e), "upstream request failed");
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

/// How much of a non-2xx upstream body is read (for the log), and for how
/// long at most.
const ERROR_BODY_BYTES: usize = 512;
const ERROR_BODY_TIME: Duration = Duration::from_secs(5);

/// The start of an upstream's error body for the log: at most
/// [`ERROR_BODY_BYTES`], whatever arrived within `within`, control
/// characters replaced; the rest is never read.
async fn error_excerpt(mut body: upstream::ResponseBody, within: Duration) -> String {
    let mut got = Vec::new();
    let read = async {
        while got.len() < ERROR_BODY_BYTES {
            match body.next().await {
                Some(Ok(c)) => {
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

/// Marks a response whose `requests_total` is counted elsewhere: by its
/// pump or its follower as it ends, or (a WebSocket's 101) by its session's
/// inner request.
#[derive(Clone, Copy)]
struct CountedAtEnd;
