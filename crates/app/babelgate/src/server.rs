//! The HTTP side: accept client requests on the configured routes, translate
//! them for the upstream, and re-stream the upstream's answer live in the
//! client's dialect.
//!
//! This file holds the [`Gateway`] itself: its state, its constructors and
//! reload, and its routes, each with the stacks built for it at load. The
//! rest is a request's life, phase by phase, a file each:
//! - accept: `listener.rs` (the accept loop, TLS, `max_connections`, each
//!   connection's watchdog, drain and shutdown; `first_request.rs` for a
//!   first request that came whole), `edge.rs` (request id, CORS) and
//!   `accept.rs` (trace, client address; the error and count on the way
//!   out);
//! - route: `route.rs`; authenticate and limit: `stack.rs`;
//! - a run: `proxy.rs` (its phases over one `RunCtx`), `upstream_request.rs`,
//!   `send.rs`, `stream.rs`, then `pump.rs`, where a stream runs and ends,
//!   told to what watches it through `observe.rs`;
//! - a kept run followed or stopped: `follow.rs`; about a run: `runs.rs`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{Backend, Config};
use crate::error::GatewayError;
use crate::limits::Limits;
use crate::metrics::Metrics;
use crate::resume;
use crate::upstream;
use babelgate_store::{MemoryConfig, MemoryConversationStore, MemoryRunLog, StoreConfig, Stores};

mod accept;
mod edge;
mod first_request;
mod follow;
mod listener;
mod observe;
mod proxy;
mod pump;
mod route;
mod runs;
mod send;
mod stack;
mod stream;
mod upstream_request;

pub use send::loggable_url;
pub(crate) use stream::sse_response;

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
    /// Shared with the edge's `CorsLayer`, which reads the same routes.
    config: Arc<Config>,
    /// Each route's stacks (its HTTP client inside: timeouts are per route),
    /// by path.
    stacks: HashMap<String, stack::RouteStacks>,
    /// What every request goes through (`edge.rs`), around the route phase.
    edge: Edge,
}

/// The gateway's outermost stack: a request in, its response out (every
/// failure is a response by then).
type Edge = tower::util::BoxCloneSyncService<
    http::Request<ReqBody>,
    http::Response<crate::error::Body>,
    std::convert::Infallible,
>;

impl Routes {
    fn build(config: Config, shared: &stack::Shared) -> Result<Routes, GatewayError> {
        let config = Arc::new(config);
        let mut stacks = HashMap::new();
        for r in &config.routes {
            let reqwest = || {
                let mut builder = reqwest::Client::builder()
                    .connect_timeout(r.connect_timeout)
                    .tcp_nodelay(true)
                    // Never ask for compression: SSE must arrive event by event.
                    .no_gzip()
                    // Only the configured upstream is ever contacted: a redirect
                    // must not send the request (and its headers) elsewhere.
                    .redirect(reqwest::redirect::Policy::none());
                // `upstream_ca`: trusted besides the webpki roots (the
                // config compiler has read them as certificates).
                for der in r.upstream_ca.iter().flat_map(|ca| &ca.certs) {
                    builder = builder.add_root_certificate(reqwest::Certificate::from_der(der)?);
                }
                builder.build()
            };
            let client = upstream::Client::for_route(&r.upstream, r.connect_timeout, reqwest)
                .map_err(|e| GatewayError::internal(format!("HTTP client: {e}")))?;
            stacks.insert(
                r.path.clone(),
                stack::RouteStacks::build(r, &client, shared),
            );
        }
        let respond = tower::service_fn(|req: http::Request<ReqBody>| async move {
            let served = req.extensions().get::<stack::Served>().cloned();
            Ok(match served {
                Some(s) => s.gateway.respond(&s.routes, s.peer, req).await,
                None => GatewayError::internal("a request reached the edge unaccepted")
                    .into_response_for(None),
            })
        });
        let edge = tower::ServiceBuilder::new()
            .layer(edge::RequestIdLayer)
            .layer(edge::CorsLayer(config.clone()))
            .service(respond);
        Ok(Routes {
            config,
            stacks,
            edge: Edge::new(edge),
        })
    }
}

/// Shared state of a running gateway.
pub struct Gateway {
    routes: ArcSwap<Routes>,
    stores: Stores,
    /// The leases of the runs this instance writes, renewed by one task.
    leases: babelgate_store::Leases,
    /// This instance, as the owner of the runs it proxies.
    owner: String,
    metrics: Arc<Metrics>,
    /// Cancelled when the shutdown grace period is over: open streams end
    /// with their dialect's error.
    shutdown: crate::shutdown::Shutdown,
    /// Every stream pump, so that shutdown can wait for them.
    pumps: TaskTracker,
    /// Resumed streams being followed (`[store] max_followers`).
    followers: Arc<resume::Followers>,
    limits: Limits,
    /// `[server] max_inflight_bytes`, as the gateway started (a reload does
    /// not change it).
    inflight: Arc<crate::inflight::Inflight>,
    /// `[inspector]`, as the gateway started (a reload does not change it).
    inspector: Option<Arc<crate::inspector::Inspector>>,
    /// `[telemetry]`, read at start (changes apply after a restart).
    telemetry: Option<Arc<crate::telemetry::Telemetry>>,
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
        let owner = babelgate_store::new_id();
        let shutdown = crate::shutdown::Shutdown::default();
        let inspector = match &config.inspector {
            None => None,
            Some(cfg) => Some(inspector(cfg, &config, &owner, &shutdown.token())?),
        };
        let telemetry = match &config.telemetry {
            Some(t) => Some(Arc::new(
                crate::telemetry::Telemetry::start(t).map_err(GatewayError::internal)?,
            )),
            None => None,
        };
        let shared = stack::Shared {
            limits: Limits::new(limiter, metrics.clone()),
            metrics: metrics.clone(),
            inflight: crate::inflight::Inflight::new(config.max_inflight_bytes),
            read_timeout: config.request_read_timeout,
        };
        Ok(Gateway {
            telemetry,
            routes: ArcSwap::from_pointee(Routes::build(config, &shared)?),
            limits: shared.limits,
            inflight: shared.inflight,
            leases: babelgate_store::Leases::new(stores.runs.clone()),
            stores,
            owner,
            metrics,
            shutdown,
            pumps: TaskTracker::new(),
            followers: Arc::default(),
            inspector,
        })
    }

    /// The configuration new requests use.
    pub fn config(&self) -> Config {
        Config::clone(&self.routes.load().config)
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
        if old.config.inspector.is_some() != config.inspector.is_some() {
            tracing::warn!("`[inspector]` changes apply after a restart");
        }
        if old.config.telemetry != config.telemetry {
            tracing::warn!("`[telemetry]` changes apply after a restart");
        }
        let shared = stack::Shared {
            limits: self.limits.clone(),
            metrics: self.metrics.clone(),
            inflight: self.inflight.clone(),
            read_timeout: config.request_read_timeout,
        };
        self.routes.store(Arc::new(Routes::build(config, &shared)?));
        Ok(())
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Client streams open now.
    pub fn active_streams(&self) -> usize {
        self.pumps.len()
    }
}

/// The inspector of `[inspector]`; with the Redis store, on a board every
/// instance shares, published to once a second until shutdown.
fn inspector(
    cfg: &crate::config::Inspector,
    config: &Config,
    owner: &str,
    shutdown: &CancellationToken,
) -> Result<Arc<crate::inspector::Inspector>, GatewayError> {
    use crate::inspector::{board::Shared, Board, Inspector, PUBLISH_EVERY};
    // Captures outlive their run on the board this long (the ring trims
    // them sooner on a busy gateway).
    const RETENTION: Duration = Duration::from_secs(3600);
    let board: Option<Arc<dyn Board>> = match store_config(config) {
        StoreConfig::Memory(_) => None,
        StoreConfig::Redis(r) => {
            let b = babelgate_store::RedisBoard::open(&r, RETENTION)
                .map_err(|e| GatewayError::internal(format!("inspector: {e}")))?;
            Some(Arc::new(Shared(Arc::new(b))))
        }
    };
    let shared = board.is_some();
    // The instance is named by its host-free owner id: short, and no
    // internal host name reaches the page.
    let name = format!("gw-{}", owner.get(..8).unwrap_or(owner));
    let ins = Arc::new(Inspector::new(cfg.clone(), &name, board));
    if shared {
        let (weak, stop) = (Arc::downgrade(&ins), shutdown.clone());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let mut published = std::collections::HashMap::new();
                loop {
                    tokio::select! {
                        () = tokio::time::sleep(PUBLISH_EVERY) => {}
                        () = stop.cancelled() => {}
                    }
                    let Some(ins) = weak.upgrade() else { break };
                    ins.publish(&mut published).await;
                    if stop.is_cancelled() {
                        break;
                    }
                }
            });
        }
    }
    Ok(ins)
}

/// The store settings of `[store]`, for [`Gateway::with_stores`].
pub fn store_config(config: &Config) -> StoreConfig {
    match &config.store.backend {
        Backend::Memory => StoreConfig::Memory(MemoryConfig {
            history_ttl: config.store.history_ttl,
            max_run_bytes: config.store.max_run_bytes,
            max_runs: config.store.max_runs,
            max_total_bytes: config.store.max_total_bytes,
            max_history_bytes: config.store.max_history_bytes,
            max_total_history_bytes: config.store.max_total_history_bytes,
            ..MemoryConfig::default()
        }),
        Backend::Redis { url } => {
            redis_config(babelgate_store::RedisConfig::new(url.clone()), config)
        }
        Backend::RedisCluster { urls } => {
            redis_config(babelgate_store::RedisConfig::cluster(urls.clone()), config)
        }
    }
}

/// `[store]`'s settings that one Redis and a Redis Cluster share.
fn redis_config(mut c: babelgate_store::RedisConfig, config: &Config) -> StoreConfig {
    c.history_ttl = config.store.history_ttl;
    c.max_run_bytes = config.store.max_run_bytes;
    c.max_history_bytes = config.store.max_history_bytes;
    c.op_timeout = config.store.op_timeout;
    StoreConfig::Redis(c)
}
