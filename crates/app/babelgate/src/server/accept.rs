//! Accept: a request as it comes in, before any route is known: its id,
//! its trace and the address it counts as; and on its way out, the error
//! told in the route's client dialect, CORS, the request id and the count.

use std::net::SocketAddr;
use std::sync::Arc;

use babelgate_core::IdGen;
use bytes::Bytes;
use http::{header, HeaderValue, Request, Response};
use http_body_util::BodyExt;
use tracing::Instrument;

use super::stack::Served;
use super::{BoxError, Gateway, ReqBody};
use crate::access;
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
        req.extensions_mut().insert(Served {
            gateway: self.clone(),
            request_id: request_id.as_str().into(),
            started,
        });
        let mut failed = None;
        let result = self
            .route_request(&routes, req)
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
}

/// Marks a response whose `requests_total` is counted elsewhere: by its
/// pump or its follower as it ends, or (a WebSocket's 101) by its session's
/// inner request.
#[derive(Clone, Copy)]
pub(super) struct CountedAtEnd;
