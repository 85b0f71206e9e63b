//! Accept: a request as it comes in, before any route is known: through
//! the edge (`edge.rs`: its id, and CORS on the way out) to `respond`: its
//! trace and the address it counts as; and on its way out, the error told
//! in the route's client dialect and the count.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response};
use http_body_util::BodyExt;
use tracing::Instrument;

use tower::ServiceExt;

use super::edge::{AnsweredFor, RequestId};
use super::stack::Served;
use super::{BoxError, Gateway, ReqBody, Routes};
use crate::conn;
use crate::error::Body;
use crate::registry;
use crate::telemetry::{Trace, ViaWebSocket};

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
        let routes = self.routes.load_full();
        req.extensions_mut().insert(Served {
            gateway: self.clone(),
            routes: routes.clone(),
            peer,
            started: tokio::time::Instant::now(),
        });
        // The edge (request id, CORS) around `respond`, built with the routes.
        match through_edge(routes.edge.clone(), req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        }
    }

    /// The route phase's answer to a request the edge let in: a refusal
    /// told in the route's client dialect where it has one; the request
    /// counted (unless its stream counts itself at its end).
    pub(super) async fn respond(
        self: &Arc<Self>,
        routes: &Arc<Routes>,
        peer: SocketAddr,
        mut req: Request<ReqBody>,
    ) -> Response<Body> {
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        let id = req.extensions().get::<RequestId>().map(|r| r.0.clone());
        let id = id.as_deref().unwrap_or_default();
        // Who the request counts as, decided once (limits read it).
        let trusted = &routes.config.trusted_proxies;
        let client = crate::host::client_addr(peer, req.headers(), trusted);
        req.extensions_mut().insert(crate::host::ClientAddr(client));
        let span = tracing::info_span!("request", %id, %method, %path, %peer);
        let http1 = req.version() < http::Version::HTTP_2;
        // A session's upgrade, or a request that came in one.
        let via_ws =
            req.extensions().get::<ViaWebSocket>().is_some() || crate::ws::is_upgrade(&req);
        let trace = Trace::begin(self.telemetry.as_deref(), req.headers(), &method, via_ws);
        req.extensions_mut().insert(trace.clone());
        let mut failed = None;
        let result = self
            .route_request(routes, req)
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
        if let Some(r) = route_path.as_deref().and_then(|p| routes.config.route(p)) {
            // How long its client may take no bytes (see `conn::respond`).
            resp.extensions_mut()
                .insert(conn::ClientStall(r.client_stall_timeout));
        }
        if let Some(rp) = route_path {
            resp.extensions_mut().insert(AnsweredFor(rp));
        }
        resp
    }
}

/// Runs the edge on `req`, boxed where the types are concrete (as
/// `route::call`: the compiler cannot prove the generic future `Send`).
fn through_edge(
    edge: super::Edge,
    req: Request<ReqBody>,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Response<Body>, std::convert::Infallible>> + Send>,
> {
    Box::pin(edge.oneshot(req))
}

/// Marks a response whose `requests_total` is counted elsewhere: by its
/// pump or its follower as it ends, or (a WebSocket's 101) by its session's
/// inner request.
#[derive(Clone, Copy)]
pub(super) struct CountedAtEnd;
