//! The edge: what every response gets on its way out, whoever answered it
//! (a route's stack, a health check, a refusal before any route): its
//! request id (`RequestIdLayer`) and the CORS headers its origin may read
//! it with (`CorsLayer`). Tower layers of one stack built once per load of
//! the routes (`Routes::build`), around the route phase (`accept.rs`).

use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use http::{HeaderMap, HeaderValue, Request, Response};
use tower::{Layer, Service};

use crate::access;
use crate::config::Config;
use crate::error::Body;

/// The request's id: the client's `x-request-id` when it is sane, else
/// one of the gateway's; in the request's extensions, the upstream
/// request's headers, the log's request span and the response.
#[derive(Clone)]
pub(super) struct RequestId(pub Arc<str>);

/// The id a request goes by: the client's `x-request-id` when it is
/// printable ASCII of at most 128 bytes (it is logged and sent upstream),
/// else a new one.
pub fn request_id(headers: &HeaderMap, ids: &mut babelgate_core::IdGen) -> String {
    headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map(String::from)
        .unwrap_or_else(|| ids.next("req"))
}

/// Gives each request its [`RequestId`], and its response the
/// `x-request-id` header.
#[derive(Clone, Copy)]
pub(super) struct RequestIdLayer;

impl<S> Layer<S> for RequestIdLayer {
    type Service = WithRequestId<S>;
    fn layer(&self, inner: S) -> Self::Service {
        WithRequestId(inner)
    }
}

#[derive(Clone)]
pub(super) struct WithRequestId<S>(S);

impl<S, B> Service<Request<B>> for WithRequestId<S>
where
    S: Service<Request<B>, Response = Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response<Body>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let id = request_id(req.headers(), &mut babelgate_core::IdGen::default());
        let header = HeaderValue::from_str(&id).ok();
        req.extensions_mut().insert(RequestId(id.into()));
        let answer = self.0.call(req);
        Box::pin(async move {
            let mut resp = answer.await?;
            if let Some(v) = header {
                resp.headers_mut().insert("x-request-id", v);
            }
            Ok(resp)
        })
    }
}

/// The route a response answered for, when it was one's: put in the
/// response's extensions by the route phase, read by [`CorsLayer`].
#[derive(Clone)]
pub(super) struct AnsweredFor(pub String);

/// Lets the request's origin read the response when a route's `[cors]`
/// allows it: the route's own policy, or (for an error, which a browser
/// must be able to read to show) any route's that allows the origin. A
/// preflight is answered by the route phase; this only decorates.
#[derive(Clone)]
pub(super) struct CorsLayer(pub Arc<Config>);

impl<S> Layer<S> for CorsLayer {
    type Service = WithCors<S>;
    fn layer(&self, inner: S) -> Self::Service {
        WithCors {
            config: self.0.clone(),
            inner,
        }
    }
}

#[derive(Clone)]
pub(super) struct WithCors<S> {
    config: Arc<Config>,
    inner: S,
}

impl<S, B> Service<Request<B>> for WithCors<S>
where
    S: Service<Request<B>, Response = Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response<Body>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        // Only what CORS reads of the request is kept for the way out.
        let mut asked = HeaderMap::new();
        if let Some(origin) = req.headers().get(http::header::ORIGIN) {
            asked.insert(http::header::ORIGIN, origin.clone());
        }
        let config = self.config.clone();
        let answer = self.inner.call(req);
        Box::pin(async move {
            let mut resp = answer.await?;
            if !asked.is_empty() {
                let route =
                    (resp.extensions().get::<AnsweredFor>()).and_then(|a| config.route(&a.0));
                access::decorate(&config, route, &asked, &mut resp);
            }
            Ok(resp)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_kept_when_sane() {
        let mut ids = babelgate_core::IdGen::sequential();
        let mut h = HeaderMap::new();
        h.insert("x-request-id", HeaderValue::from_static("abc-123"));
        assert_eq!(request_id(&h, &mut ids), "abc-123");
        h.insert("x-request-id", HeaderValue::from_static("has space"));
        assert_eq!(request_id(&h, &mut ids), "req-1");
    }
}
