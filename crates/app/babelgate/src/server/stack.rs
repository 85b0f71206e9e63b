//! Each route's request stacks, built once when the routes are loaded (and
//! again on reload), never per request, as linkerd builds a stack per
//! target: authenticate (`access::AuthLayer`), limit (`limits`), read the
//! body (`body`), then the route's own phase: a run (`proxy.rs`), a kept
//! run followed again or stopped (`follow.rs`).
//!
//! A stack is built before the gateway it serves exists, so what a request
//! needs of the gateway comes with the request: [`Served`], put in its
//! extensions by the accept phase.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use tower::util::BoxCloneSyncService;
use tower::ServiceBuilder;

use super::edge::RequestId;
use super::{Gateway, ReqBody};
use crate::access::{AuthLayer, Caller};
use crate::body::ReadBodyLayer;
use crate::config::Route;
use crate::error::{Body, GatewayError};
use crate::inflight::Inflight;
use crate::limits::{self, Limits, StreamLimitLayer};
use crate::metrics::Metrics;
use crate::upstream;

/// A route's stack: a request in, its response out.
pub(super) type Handler = BoxCloneSyncService<Request<ReqBody>, Response<Body>, GatewayError>;

/// What a request carries of the gateway that accepted it.
#[derive(Clone)]
pub(super) struct Served {
    pub gateway: Arc<Gateway>,
    /// The routes as they were when the request came in (a reload after
    /// does not change them under it).
    pub routes: Arc<super::Routes>,
    pub peer: std::net::SocketAddr,
    pub started: tokio::time::Instant,
}

/// The id a kept run's request names (`{path}/{id}/stream`, `/stop`).
#[derive(Clone)]
pub(super) struct KeptId(pub Arc<str>);

/// What the stacks share across routes.
pub(super) struct Shared {
    pub limits: Limits,
    pub metrics: Arc<Metrics>,
    pub inflight: Arc<Inflight>,
    pub read_timeout: Duration,
}

/// One route's stacks.
#[derive(Clone)]
pub(super) struct RouteStacks {
    /// `POST {path}`: a run.
    pub run: Handler,
    /// `GET {path}/{id}/stream`: a kept run followed again.
    pub resume: Handler,
    /// `POST {path}/{id}/stop`.
    pub stop: Handler,
}

impl RouteStacks {
    pub(super) fn build(route: &Route, client: &upstream::Client, shared: &Shared) -> RouteStacks {
        let route = Arc::new(route.clone());
        let limit = StreamLimitLayer::new(shared.limits.clone(), limits::Policy::of(&route));
        let run = {
            let (route, client) = (route.clone(), client.clone());
            tower::service_fn(move |req: Request<Bytes>| {
                let (route, client) = (route.clone(), client.clone());
                async move {
                    let served = served(&req)?;
                    let caller = caller(&req);
                    let id = req.extensions().get::<RequestId>().map(|r| r.0.clone());
                    let id = id.as_deref().unwrap_or_default();
                    (served.gateway)
                        .proxy(&route, &client, req, id, served.started, &caller)
                        .await
                }
            })
        };
        let run = ServiceBuilder::new()
            .layer(AuthLayer::new(route.clone()))
            .layer(limit.clone())
            .layer(
                ReadBodyLayer::new(
                    route.max_body_bytes,
                    shared.read_timeout,
                    shared.metrics.clone(),
                )
                .with_inflight(shared.inflight.clone()),
            )
            .service(run);
        let resume = {
            let route = route.clone();
            tower::service_fn(move |req: Request<ReqBody>| {
                let route = route.clone();
                async move {
                    let (served, _, conversation) = kept(&req)?;
                    let trace = super::route::trace_of(&req);
                    served
                        .gateway
                        .resume(&route, &conversation, req.headers(), trace)
                        .await
                }
            })
        };
        let resume = ServiceBuilder::new()
            .layer(AuthLayer::new(route.clone()))
            .layer(KeptLayer {
                route: route.clone(),
                stop: false,
            })
            .layer(limit)
            .service(resume);
        let stop = {
            let route = route.clone();
            tower::service_fn(move |req: Request<ReqBody>| {
                let route = route.clone();
                async move {
                    let (served, id, conversation) = kept(&req)?;
                    served.gateway.stop(&route, &conversation, &id).await
                }
            })
        };
        let stop = ServiceBuilder::new()
            .layer(AuthLayer::new(route.clone()))
            .layer(KeptLayer { route, stop: true })
            .service(stop);
        RouteStacks {
            run: BoxCloneSyncService::new(run),
            resume: BoxCloneSyncService::new(resume),
            stop: BoxCloneSyncService::new(stop),
        }
    }
}

fn served<B>(req: &Request<B>) -> Result<Served, GatewayError> {
    req.extensions()
        .get::<Served>()
        .cloned()
        .ok_or_else(|| GatewayError::internal("a request reached a route stack unaccepted"))
}

/// A kept run's request: its gateway, the id it names, and that id under
/// the caller's name (another caller's id answers as an unknown one).
fn kept<B>(req: &Request<B>) -> Result<(Served, Arc<str>, String), GatewayError> {
    let id = req
        .extensions()
        .get::<KeptId>()
        .map(|k| k.0.clone())
        .ok_or_else(|| GatewayError::internal("a kept run's request names no run"))?;
    let conversation = caller(req).scoped(&id);
    Ok((served(req)?, id, conversation))
}

/// The caller the auth layer named (anonymous on a route without auth).
fn caller<B>(req: &Request<B>) -> Caller {
    req.extensions()
        .get::<Caller>()
        .cloned()
        .unwrap_or_default()
}

/// Refuses a kept run's request on a route that keeps no run log, after
/// the caller is known and before any limit counts it: nothing of its runs
/// is kept, said so rather than answered as if no run were there (204,
/// 404 `no_active_run`).
#[derive(Clone)]
struct KeptLayer {
    route: Arc<Route>,
    /// The stop's stack (else the resume's): what the refusal says.
    stop: bool,
}

impl<S> tower::Layer<S> for KeptLayer {
    type Service = Kept<S>;

    fn layer(&self, inner: S) -> Kept<S> {
        Kept {
            inner,
            layer: self.clone(),
        }
    }
}

#[derive(Clone)]
struct Kept<S> {
    inner: S,
    layer: KeptLayer,
}

impl<S, B> tower::Service<Request<B>> for Kept<S>
where
    S: tower::Service<Request<B>, Error = GatewayError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = GatewayError;
    type Future = futures_util::future::Either<
        S::Future,
        futures_util::future::Ready<Result<S::Response, GatewayError>>,
    >;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), GatewayError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        use futures_util::future::{ready, Either};
        let KeptLayer { route, stop } = &self.layer;
        if route.resume {
            return Either::Left(self.inner.call(req));
        }
        Either::Right(ready(Err(super::route::resume_disabled(
            &route.path,
            *stop,
        ))))
    }
}
