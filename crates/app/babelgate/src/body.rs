//! Request bodies read whole, within a size and a time limit, as a tower
//! layer: the service behind [`ReadBodyLayer`] gets `Request<Bytes>`.
//!
//! Too large is 413 `body_too_large` as soon as the limit is passed (a
//! declared length, a chunked body or one that trickles); not whole by the
//! request's [`ReadDeadline`] (from its connection, see [`crate::conn`]) is
//! 408 `request_timeout`; a body that breaks off is 400 `body_read_failed`.
//! With a budget ([`ReadBodyLayer::with_inflight`]), a body holds what it may
//! cost parsed from its first byte until the inner service has answered, and
//! is refused with 503 `memory_budget` when that would pass the budget (see
//! [`crate::inflight`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{Request, StatusCode};
use http_body_util::BodyExt;

use crate::conn::ReadDeadline;
use crate::error::GatewayError;
use crate::inflight::{Held, Inflight};
use crate::metrics::Metrics;
use crate::server::BoxError;

/// Reads the body of each request before the inner service sees it.
#[derive(Clone)]
pub struct ReadBodyLayer {
    max_bytes: usize,
    /// The time a request without a [`ReadDeadline`] extension gets
    /// (mounted in another server): from when the layer sees it.
    fallback: Duration,
    metrics: Arc<Metrics>,
    inflight: Option<Arc<Inflight>>,
}

impl ReadBodyLayer {
    pub fn new(max_bytes: usize, fallback: Duration, metrics: Arc<Metrics>) -> Self {
        ReadBodyLayer {
            max_bytes,
            fallback,
            metrics,
            inflight: None,
        }
    }

    /// Bodies are held against `inflight` (see the module doc).
    pub fn with_inflight(mut self, inflight: Arc<Inflight>) -> Self {
        self.inflight = Some(inflight);
        self
    }
}

impl<S> tower::Layer<S> for ReadBodyLayer {
    type Service = ReadBody<S>;

    fn layer(&self, inner: S) -> ReadBody<S> {
        ReadBody {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`ReadBodyLayer`] makes.
#[derive(Clone)]
pub struct ReadBody<S> {
    inner: S,
    layer: ReadBodyLayer,
}

impl<S, B> tower::Service<Request<B>> for ReadBody<S>
where
    S: tower::Service<Request<Bytes>, Error = GatewayError> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send,
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = GatewayError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, GatewayError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), GatewayError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let layer = self.layer.clone();
        Box::pin(async move {
            let deadline = req
                .extensions()
                .get::<ReadDeadline>()
                .map_or(tokio::time::Instant::now() + layer.fallback, |d| d.0);
            // Held until the inner service answers: by then the body is
            // parsed and translated (a stream's events hold their own).
            let mut held = match layer.inflight.as_ref().map(|b| b.admit()).transpose() {
                Ok(h) => h,
                Err(e) => {
                    layer.metrics.rejected(e.code);
                    return Err(e);
                }
            };
            let (parts, body) = req.into_parts();
            let reading = read(body, layer.max_bytes, held.as_mut());
            let body = match tokio::time::timeout_at(deadline, reading).await {
                Ok(Err(e)) if e.code == "memory_budget" => {
                    layer.metrics.rejected(e.code);
                    return Err(e);
                }
                Ok(body) => body?,
                Err(_) => {
                    layer.metrics.rejected("request_timeout");
                    return Err(GatewayError::client(
                        StatusCode::REQUEST_TIMEOUT,
                        "request_timeout",
                        "the request body did not arrive in time",
                    ));
                }
            };
            let answer = inner.call(Request::from_parts(parts, body)).await;
            drop(held);
            answer
        })
    }
}

/// Reads a body, refusing it as soon as it passes `limit` (or its cost
/// passes the budget `held` is held against).
async fn read<B>(
    mut body: B,
    limit: usize,
    mut held: Option<&mut Held>,
) -> Result<Bytes, GatewayError>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let mut got = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            GatewayError::client(
                StatusCode::BAD_REQUEST,
                "body_read_failed",
                format!("reading the request body failed: {}", e.into()),
            )
        })?;
        if let Ok(data) = frame.into_data() {
            if got.len().saturating_add(data.len()) > limit {
                return Err(GatewayError::client(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "body_too_large",
                    format!("request body is larger than {limit} bytes"),
                ));
            }
            if let Some(h) = held.as_deref_mut() {
                h.grow(data.len().saturating_mul(babelgate_core::cost::FACTOR))?;
            }
            got.extend_from_slice(&data);
        }
    }
    Ok(got.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{Full, StreamBody};
    use tower::{Layer, ServiceExt};

    fn echo_len() -> impl tower::Service<
        Request<Bytes>,
        Response = usize,
        Error = GatewayError,
        Future = impl Send,
    > + Clone
           + Send
           + 'static {
        tower::service_fn(|r: Request<Bytes>| async move { Ok(r.body().len()) })
    }

    fn layer(max: usize) -> ReadBodyLayer {
        ReadBodyLayer::new(max, Duration::from_secs(10), Arc::default())
    }

    #[tokio::test]
    async fn a_body_within_the_limit_reaches_the_service() {
        let svc = layer(5).layer(echo_len());
        let n = svc
            .oneshot(Request::new(Full::new(Bytes::from_static(b"hello"))))
            .await
            .unwrap();
        assert_eq!(n, 5);
    }

    #[tokio::test]
    async fn one_byte_over_is_413() {
        let svc = layer(4).layer(echo_len());
        let e = svc
            .oneshot(Request::new(Full::new(Bytes::from_static(b"hello"))))
            .await
            .unwrap_err();
        assert_eq!(e.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(e.code, "body_too_large");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_never_ends_is_408_at_the_deadline() {
        let endless = StreamBody::new(futures_util::stream::pending::<
            Result<http_body::Frame<Bytes>, std::io::Error>,
        >());
        let mut req = Request::new(endless);
        req.extensions_mut().insert(ReadDeadline(
            tokio::time::Instant::now() + Duration::from_secs(3),
        ));
        let metrics = Arc::new(Metrics::default());
        let svc =
            ReadBodyLayer::new(100, Duration::from_secs(10), metrics.clone()).layer(echo_len());
        let e = svc.oneshot(req).await.unwrap_err();
        assert_eq!(e.status, StatusCode::REQUEST_TIMEOUT);
        assert!(metrics
            .render()
            .contains("babelgate_rejected_total{reason=\"request_timeout\"} 1"));
    }
}
