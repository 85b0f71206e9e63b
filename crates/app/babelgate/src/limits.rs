//! Per-route and per-caller limits on client streams: `max_streams` (this
//! instance), and `[routes.rate_limit]` (requests per second and concurrent
//! streams per caller, shared by instances through the Redis store).
//!
//! [`StreamLimitLayer`] puts them in front of any service answering a
//! stream: an admitted stream holds an [`Admitted`] until its response body
//! is dropped; a refused one gets 503/429 with `retry-after` and never
//! reaches the service (its body is not even read).

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use babelgate_store::Limiter;
use http::{header, HeaderValue, Request, Response, StatusCode};

use crate::access::Caller;
use crate::config::{RateLimit, Route};
use crate::conn::peer_of;
use crate::error::{Body, GatewayError};
use crate::host::ClientAddr;
use crate::metrics::Metrics;

/// How long a concurrent-stream lease lasts without renewal: a dead
/// instance's streams stop counting after this.
const LEASE: Duration = Duration::from_secs(30);
const RENEW_EVERY: Duration = Duration::from_secs(10);

/// Who a request counts against: the owner of its verified credential, or
/// on a route without auth its client address ([`crate::host::client_addr`]).
/// A bearer token nobody verified is not a caller: one invented per request
/// would otherwise never be limited.
pub fn caller_key(caller: &Caller, client: IpAddr) -> String {
    if caller.is_anonymous() {
        format!("ip:{client}")
    } else {
        caller.owner.clone()
    }
}

#[derive(Clone)]
pub struct Limits {
    limiter: Arc<dyn Limiter>,
    /// Streams open per route path in this instance.
    open: Arc<Mutex<HashMap<String, usize>>>,
    metrics: Arc<Metrics>,
}

/// A refusal: the response to send as is.
pub struct Refused(pub Box<Response<Body>>);

impl Limits {
    pub fn new(limiter: Arc<dyn Limiter>, metrics: Arc<Metrics>) -> Self {
        Limits {
            limiter,
            open: Arc::default(),
            metrics,
        }
    }

    /// Lets a new stream under `policy` in, or says why not.
    pub async fn admit(
        &self,
        policy: &Policy,
        caller: &Caller,
        client: IpAddr,
    ) -> Result<Admitted, Refused> {
        let slot = self.route_slot(policy)?;
        let Some(rl) = &policy.rate_limit else {
            return Ok(Admitted { slot, lease: None });
        };
        // All tokens of one JWT subject share its limits.
        let caller = caller_key(caller, client);
        let key = format!("{}|{caller}", policy.path);
        if let Some(per_s) = rl.requests_per_s {
            match self.limiter.take(&key, per_s, rl.burst).await {
                Ok(None) => {}
                Ok(Some(wait)) => {
                    return Err(self.refuse(
                        &policy.path,
                        StatusCode::TOO_MANY_REQUESTS,
                        "rate_limited",
                        format!("more than {per_s} requests per second on this route"),
                        wait,
                    ))
                }
                // Limits are protection, not the service: without the
                // store they are not enforced rather than refusing all.
                Err(e) => tracing::warn!(error = %e, "rate limit not checked"),
            }
        }
        let lease = match rl.concurrent_streams {
            None => None,
            Some(max) => {
                let id = babelgate_store::new_id();
                match self.limiter.open(&key, &id, max, LEASE).await {
                    Ok(true) => Some(Lease::new(self.limiter.clone(), key, id)),
                    Ok(false) => {
                        return Err(self.refuse(
                            &policy.path,
                            StatusCode::TOO_MANY_REQUESTS,
                            "too_many_streams",
                            format!("more than {max} open streams on this route"),
                            Duration::from_secs(1),
                        ))
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "concurrent streams not checked");
                        None
                    }
                }
            }
        };
        Ok(Admitted { slot, lease })
    }

    fn route_slot(&self, route: &Policy) -> Result<Option<RouteSlot>, Refused> {
        if route.max_streams == 0 {
            return Ok(None);
        }
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(route.path.clone()).or_insert(0);
        if *n >= route.max_streams {
            drop(open);
            return Err(self.refuse(
                &route.path,
                StatusCode::SERVICE_UNAVAILABLE,
                "route_busy",
                format!("this route has its {} streams open", route.max_streams),
                Duration::from_secs(1),
            ));
        }
        *n += 1;
        Ok(Some(RouteSlot {
            open: self.open.clone(),
            path: route.path.clone(),
        }))
    }

    fn refuse(
        &self,
        route: &str,
        status: StatusCode,
        code: &'static str,
        message: String,
        retry_after: Duration,
    ) -> Refused {
        self.metrics.rejected(code);
        self.metrics.stream_refused(route, code);
        tracing::info!(status = status.as_u16(), code, "request refused by a limit");
        let mut e = GatewayError::client(status, code, message);
        if status == StatusCode::SERVICE_UNAVAILABLE {
            e.fault = crate::error::Fault::Internal;
        }
        let mut resp = e.into_response();
        // Whole seconds, at least one.
        let secs = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
        Refused(Box::new(resp))
    }
}

/// The limits one route's streams are held to.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The route's path: `max_streams` and callers are counted per route.
    pub path: String,
    /// Streams open at once in this instance; 0: not limited.
    pub max_streams: usize,
    pub rate_limit: Option<RateLimit>,
}

impl Policy {
    pub fn of(route: &Route) -> Policy {
        Policy {
            path: route.path.clone(),
            max_streams: route.max_streams,
            rate_limit: route.rate_limit.clone(),
        }
    }
}

/// A route's stream limits as a tower layer: `max_streams` (503
/// `route_busy`) and the caller's rate and concurrent streams (429
/// `rate_limited` / `too_many_streams`), all with `retry-after`.
///
/// The caller is the request's [`Caller`] extension (set by auth), else its
/// [`ClientAddr`] (or [`crate::conn::PeerAddr`]). The inner service's response carries
/// the stream's slots until its body is dropped.
#[derive(Clone)]
pub struct StreamLimitLayer {
    limits: Limits,
    policy: Arc<Policy>,
}

impl StreamLimitLayer {
    pub fn new(limits: Limits, policy: Policy) -> Self {
        StreamLimitLayer {
            limits,
            policy: Arc::new(policy),
        }
    }
}

impl<S> tower::Layer<S> for StreamLimitLayer {
    type Service = StreamLimit<S>;

    fn layer(&self, inner: S) -> StreamLimit<S> {
        StreamLimit {
            inner,
            limits: self.limits.clone(),
            policy: self.policy.clone(),
        }
    }
}

/// The service [`StreamLimitLayer`] makes.
#[derive(Clone)]
pub struct StreamLimit<S> {
    inner: S,
    limits: Limits,
    policy: Arc<Policy>,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B> tower::Service<Request<B>> for StreamLimit<S>
where
    S: tower::Service<Request<B>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    B: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Response<Body>, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        // The service polled ready is the one to call; a clone takes its place.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let (limits, policy) = (self.limits.clone(), self.policy.clone());
        Box::pin(async move {
            let caller = req
                .extensions()
                .get::<Caller>()
                .cloned()
                .unwrap_or_default();
            let client = req
                .extensions()
                .get::<ClientAddr>()
                .map_or_else(|| peer_of(&req).ip(), |c| c.0);
            match limits.admit(&policy, &caller, client).await {
                Err(Refused(resp)) => Ok(*resp),
                Ok(admitted) => inner.call(req).await.map(|r| admitted.attach(r)),
            }
        })
    }
}

/// What an admitted stream holds until it ends.
pub struct Admitted {
    slot: Option<RouteSlot>,
    lease: Option<Lease>,
}

impl Admitted {
    /// The stream's slots, held as long as its response body.
    pub fn attach(self, resp: Response<Body>) -> Response<Body> {
        if self.slot.is_none() && self.lease.is_none() {
            return resp;
        }
        resp.map(|b| crate::conn::guarded(b, self))
    }
}

struct RouteSlot {
    open: Arc<Mutex<HashMap<String, usize>>>,
    path: String,
}

impl Drop for RouteSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.path) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.path);
            }
        }
    }
}

/// A concurrent-stream lease, renewed while held, closed when dropped.
struct Lease {
    limiter: Arc<dyn Limiter>,
    key: String,
    id: String,
    renew: tokio::task::JoinHandle<()>,
}

impl Lease {
    fn new(limiter: Arc<dyn Limiter>, key: String, id: String) -> Self {
        let renew = tokio::spawn({
            let (limiter, key, id) = (limiter.clone(), key.clone(), id.clone());
            async move {
                loop {
                    tokio::time::sleep(RENEW_EVERY).await;
                    if let Err(e) = limiter.renew(&key, &id, LEASE).await {
                        tracing::debug!(error = %e, "stream lease not renewed");
                    }
                }
            }
        });
        Lease {
            limiter,
            key,
            id,
            renew,
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.renew.abort();
        let (limiter, key, id) = (
            self.limiter.clone(),
            std::mem::take(&mut self.key),
            std::mem::take(&mut self.id),
        );
        // Without a runtime (shutting down) the lease simply expires.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Err(e) = limiter.close(&key, &id).await {
                    tracing::debug!(error = %e, "stream lease not closed; it expires");
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caller_is_its_verified_owner_else_its_address() {
        let ip: IpAddr = "10.1.2.3".parse().unwrap();
        assert_eq!(caller_key(&Caller::anonymous(), ip), "ip:10.1.2.3");
        let owner = Caller {
            owner: "key:abc".into(),
        };
        assert_eq!(caller_key(&owner, ip), "key:abc");
        assert_eq!(caller_key(&owner, "10.9.9.9".parse().unwrap()), "key:abc");
    }

    fn layer(policy: Policy) -> StreamLimitLayer {
        let limiter: Arc<dyn Limiter> = Arc::new(babelgate_store::MemoryLimiter::default());
        StreamLimitLayer::new(Limits::new(limiter, Arc::default()), policy)
    }

    type Answer = std::future::Ready<Result<Response<Body>, std::convert::Infallible>>;

    /// Any service answering a stream, here one whose body is empty.
    fn streams() -> tower::util::ServiceFn<fn(Request<()>) -> Answer> {
        tower::service_fn(|_| std::future::ready(Ok(Response::new(crate::error::full("")))))
    }

    #[tokio::test]
    async fn the_layer_holds_max_streams_until_the_body_is_dropped() {
        use tower::{Layer, ServiceExt};
        let svc = layer(Policy {
            path: "/chat".into(),
            max_streams: 1,
            rate_limit: None,
        })
        .layer(streams());
        let first = svc.clone().oneshot(Request::new(())).await.unwrap();
        assert_eq!(first.status(), StatusCode::OK);
        let refused = svc.clone().oneshot(Request::new(())).await.unwrap();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
        drop(first);
        let again = svc.oneshot(Request::new(())).await.unwrap();
        assert_eq!(again.status(), StatusCode::OK, "the slot came back");
    }

    #[tokio::test]
    async fn the_layer_counts_an_authenticated_caller_by_its_owner() {
        use tower::{Layer, ServiceExt};
        let svc = layer(Policy {
            path: "/chat".into(),
            max_streams: 0,
            rate_limit: Some(RateLimit {
                requests_per_s: None,
                burst: 1,
                concurrent_streams: Some(1),
            }),
        })
        .layer(streams());
        let as_owner = |owner: &str, token: &'static str| {
            let mut r = Request::new(());
            r.extensions_mut().insert(Caller {
                owner: owner.into(),
            });
            r.headers_mut()
                .insert(header::AUTHORIZATION, HeaderValue::from_static(token));
            r
        };
        let held = svc
            .clone()
            .oneshot(as_owner("jwt:a", "Bearer one"))
            .await
            .unwrap();
        assert_eq!(held.status(), StatusCode::OK);
        // Another token of the same subject is the same caller.
        let r = svc
            .clone()
            .oneshot(as_owner("jwt:a", "Bearer two"))
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        let r = svc.oneshot(as_owner("jwt:b", "Bearer one")).await.unwrap();
        assert_eq!(
            r.status(),
            StatusCode::OK,
            "another owner has its own slots"
        );
        drop(held);
    }
}
