//! Route: what a request's path names (a health check, the inspector, a
//! route's run, its description, a kept run's stream or stop), and each
//! sent on: a route's requests through the stacks built for it at load
//! (`stack.rs`), after the checks every routed request gets here (CORS
//! preflight, the method, a WebSocket upgrade).

use std::sync::Arc;

use babelgate_core::Dialect;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use serde_json::json;
use tower::ServiceExt;

use super::accept::CountedAtEnd;
use super::stack::{Handler, KeptId};
use super::{Gateway, ReqBody, Routes};
use crate::access;
use crate::config::{Config, Route};
use crate::conn;
use crate::error::{json_response, Body, GatewayError};
use crate::registry;
use crate::telemetry::Trace;
use crate::transport::{self, Transport};

/// What a request's path names.
enum Target<'a> {
    Health,
    Ready,
    Metrics,
    Inspector,
    /// `{path}`: a run (or a WebSocket session of runs).
    Run(&'a Route),
    /// `{path}{description_path}`: the agent as its clients' dialect
    /// describes it.
    Describe(&'a Route),
    /// `{path}/{id}/stream` (resume) or `{path}/{id}/stop`.
    Kept {
        route: &'a Route,
        id: &'a str,
        action: KeptAction,
    },
    Unrouted,
}

impl Target<'_> {
    fn route(&self) -> Option<&Route> {
        match self {
            Target::Run(r) | Target::Describe(r) | Target::Kept { route: r, .. } => Some(r),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeptAction {
    Stream,
    Stop,
}

impl Gateway {
    /// The response, and the route it was for (for metrics and CORS).
    pub(super) async fn route_request(
        self: &Arc<Self>,
        routes: &Arc<Routes>,
        req: Request<ReqBody>,
    ) -> Result<(Option<String>, Response<Body>), (Option<String>, GatewayError)> {
        let path = req.uri().path().to_string();
        let target = self.target(&routes.config, &path);
        let rp = target.route().map(|r| r.path.clone());
        self.dispatch(routes, target, req)
            .await
            .map(|r| (rp.clone(), r))
            .map_err(|e| (rp, e))
    }

    fn target<'a>(&self, config: &'a Config, path: &'a str) -> Target<'a> {
        match path {
            "/healthz" => return Target::Health,
            "/readyz" => return Target::Ready,
            "/metrics" => return Target::Metrics,
            _ => {}
        }
        if self.inspector.as_ref().is_some_and(|i| i.owns(path)) {
            return Target::Inspector;
        }
        if let Some(route) = config.route(path) {
            return Target::Run(route);
        }
        if let Some(route) = super::runs::described(config, path) {
            return Target::Describe(route);
        }
        kept(config, path).unwrap_or(Target::Unrouted)
    }

    async fn dispatch(
        self: &Arc<Self>,
        routes: &Arc<Routes>,
        target: Target<'_>,
        mut req: Request<ReqBody>,
    ) -> Result<Response<Body>, GatewayError> {
        if let Some(route) = target.route() {
            match &target {
                Target::Run(_) => trace_of(&req).route(
                    route,
                    &route.path,
                    client_transport(route.client, req.headers()),
                ),
                Target::Kept { action, .. } => trace_of(&req).route(
                    route,
                    &format!("{}/{{id}}/{}", route.path, action.as_str()),
                    client_transport(route.client, req.headers()),
                ),
                _ => {}
            }
            if access::is_preflight(req.method(), req.headers()) {
                return access::preflight(route, req.headers());
            }
        }
        let stacks = |route: &Route| {
            routes
                .stacks
                .get(&route.path)
                .ok_or_else(|| GatewayError::internal("no stack for the route"))
        };
        match target {
            Target::Health => Ok(json_response(StatusCode::OK, &json!({"status": "ok"}))),
            Target::Ready => Ok(self.readiness().await),
            Target::Metrics => Ok(self.metrics_page()),
            Target::Inspector => {
                let Some(ins) = self.inspector.as_ref() else {
                    return Err(GatewayError::internal("no inspector"));
                };
                let authority = crate::host::authority(&req);
                let peer = conn::peer_of(&req);
                let (method, uri, headers) = (req.method(), req.uri(), req.headers());
                ins.serve(
                    method,
                    uri.path(),
                    uri.query(),
                    headers,
                    authority.as_deref(),
                    peer,
                )
                .await
            }
            Target::Run(route) if crate::ws::is_upgrade(&req) => {
                // Refused before the upgrade when the caller is not let in;
                // the inner request is authorized again as any other.
                access::authorize(route, req.headers()).await?;
                let peer = conn::peer_of(&req);
                let read = routes.config.request_read_timeout;
                // The session's request comes back through `handle` and is
                // counted there (by its pump when it streams): the 101 is not
                // a request of its own.
                crate::ws::accept(self, route, read, &mut req, peer).map(|mut r| {
                    r.extensions_mut().insert(CountedAtEnd);
                    r
                })
            }
            Target::Run(route) => {
                allow(&req, route, Method::POST)?;
                call(stacks(route)?.run.clone(), req).await
            }
            Target::Describe(route) => {
                let peer = conn::peer_of(&req);
                let tls = routes.config.tls.is_some();
                let origin = crate::host::origin(&req, peer, &routes.config.trusted_proxies, tls);
                super::runs::describe(route, req.method(), origin)
            }
            Target::Kept { route, id, action } => {
                let (wanted, stack) = match action {
                    KeptAction::Stream => (Method::GET, stacks(route)?.resume.clone()),
                    KeptAction::Stop => (Method::POST, stacks(route)?.stop.clone()),
                };
                allow(&req, route, wanted)?;
                req.extensions_mut().insert(KeptId(id.into()));
                call(stack, req).await
            }
            Target::Unrouted => {
                if access::is_preflight(req.method(), req.headers()) {
                    if let Some(r) = access::preflight_unrouted(&routes.config, req.headers()) {
                        return Ok(r);
                    }
                }
                Err(GatewayError::client(
                    StatusCode::NOT_FOUND,
                    "no_route",
                    format!("no route for {}", req.uri().path()),
                ))
            }
        }
    }

    /// `/readyz`: whether this instance takes new runs (not shutting down,
    /// its store answering).
    async fn readiness(&self) -> Response<Body> {
        if self.shutdown.is_cancelled() || self.pumps.is_closed() {
            return json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                &json!({"status": "shutting down"}),
            );
        }
        match self.stores.ping().await {
            Ok(()) => json_response(StatusCode::OK, &json!({"status": "ready"})),
            // A store that cannot work as configured (`redis` on a cluster
            // node): said as such, naming no host.
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
    }

    fn metrics_page(&self) -> Response<Body> {
        let mut resp = Response::new(crate::error::full(self.metrics.render()));
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        );
        resp
    }
}

/// 405 unless `req` uses the one method this path takes.
fn allow<B>(req: &Request<B>, route: &Route, wanted: Method) -> Result<(), GatewayError> {
    if *req.method() == wanted {
        return Ok(());
    }
    let what = if req.uri().path() == route.path {
        "this route takes"
    } else {
        "this takes"
    };
    Err(GatewayError::client(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{} {}: {what} {wanted}", req.method(), req.uri().path()),
    ))
}

/// Runs a route's stack on `req`, boxed where the types are concrete (the
/// compiler cannot prove a deeply generic future `Send` from the caller).
fn call(
    stack: Handler,
    req: Request<ReqBody>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Response<Body>, GatewayError>> + Send>>
{
    Box::pin(stack.oneshot(req))
}

impl KeptAction {
    fn as_str(self) -> &'static str {
        match self {
            KeptAction::Stream => "stream",
            KeptAction::Stop => "stop",
        }
    }
}

/// The request's trace (`handle` puts it in every request).
pub(super) fn trace_of<B>(req: &Request<B>) -> Trace {
    req.extensions().get::<Trace>().cloned().unwrap_or_default()
}

/// `{route}/{id}/stream` or `{route}/{id}/stop`.
fn kept<'a>(config: &'a Config, path: &'a str) -> Option<Target<'a>> {
    let (rest, action) = if let Some(r) = path.strip_suffix("/stream") {
        (r, KeptAction::Stream)
    } else if let Some(r) = path.strip_suffix("/stop") {
        (r, KeptAction::Stop)
    } else {
        return None;
    };
    let (base, id) = rest.rsplit_once('/')?;
    if id.is_empty() {
        return None;
    }
    Some(Target::Kept {
        route: config.route(base)?,
        id,
        action,
    })
}

/// 404 `resume_disabled`: `{path}/{id}/stream` or `/stop` on a route with
/// `resume = false`, which keeps no run log to resume from or stop by.
pub(super) fn resume_disabled(route: &str, stop: bool) -> GatewayError {
    let what = if stop { "stopped" } else { "resumed" };
    GatewayError::client(
        StatusCode::NOT_FOUND,
        "resume_disabled",
        format!("the route {route} keeps no run log (resume = false): its runs cannot be {what}"),
    )
}

/// The transport a client of `dialect` asked for with its `Accept`.
pub(super) fn client_transport(dialect: Dialect, headers: &http::HeaderMap) -> Transport {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    transport::negotiate(accept, &registry::policy(dialect))
}
