//! The gateway as a [`tower::Service`], to mount in any tower-based server
//! (axum, tonic, hyper-util): see `examples/axum_mount.rs`.
//!
//! Connection-level limits (`max_connections`, the read and keep-alive
//! deadlines) belong to whoever owns the connections; everything per
//! request (routes, auth, rate limits, `max_streams`, body size and time,
//! upstream timeouts) comes with the service.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};

use crate::conn::peer_of;
use crate::error::Body;
use crate::server::{BoxError, Gateway};

/// A handle on a [`Gateway`] answering requests; cheap to clone.
#[derive(Clone)]
pub struct GatewayService(Arc<Gateway>);

impl Gateway {
    /// This gateway as a `tower::Service`. The client address used for
    /// per-address rate limits is the request's [`crate::conn::PeerAddr`] extension
    /// (unspecified without it: every caller of a route without auth then shares
    /// one limit).
    pub fn into_service(self: Arc<Self>) -> GatewayService {
        GatewayService(self)
    }
}

impl<B> tower::Service<Request<B>> for GatewayService
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let gw = self.0.clone();
        let peer = peer_of(&req);
        Box::pin(async move { Ok(gw.handle(req, peer).await) })
    }
}
