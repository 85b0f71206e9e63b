//! The compiled configuration: what the gateway runs by, every value
//! checked and defaulted.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use babelgate_core::request::Tool;
use babelgate_core::Dialect;

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub tls: Option<Tls>,
    /// A request's head and body must arrive within this long (from the
    /// connection's accept for its first request): slow-loris protection.
    pub request_read_timeout: Duration,
    /// An idle keep-alive connection (no request or stream open) is closed
    /// after this long.
    pub keepalive_timeout: Duration,
    /// Connections over this many are answered 503 and closed.
    pub max_connections: usize,
    /// The memory budget for request bodies and upstream events in flight
    /// (see [`crate::inflight`]); past it new requests get 503.
    pub max_inflight_bytes: usize,
    /// On shutdown, streams get this long to finish before they are ended
    /// with their dialect's error.
    pub shutdown_grace: Duration,
    pub log_format: LogFormat,
    /// Peers whose `Forwarded` / `X-Forwarded-For` names the client (for
    /// per-address limits); empty: the peer is the client.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    pub store: Store,
    pub demo_agent: Option<DemoAgent>,
    /// `[inspector]`: off when absent.
    pub inspector: Option<Inspector>,
    /// `[telemetry]`: traces exported over OTLP; `None`, nothing exported.
    pub telemetry: Option<Telemetry>,
    pub routes: Vec<Route>,
}

/// The protocol inspector's settings (`[inspector]`).
#[derive(Debug, Clone)]
pub struct Inspector {
    /// Where the page is served on the main listener (no trailing slash).
    pub path: String,
    /// Without it only loopback clients are let in.
    pub auth: Option<Auth>,
    /// Runs kept (live and recent); the oldest ended one goes first.
    pub max_runs: usize,
    /// Bytes kept of one run (upstream and client together); past it the
    /// capture stops growing and is marked truncated.
    pub max_run_bytes: usize,
    /// The share of runs captured, 0 to 1.
    pub sample: f64,
    /// Names besides loopback addresses and `localhost` that a request's
    /// `Host` may give without auth (see `crate::host`).
    pub allowed_hosts: Vec<String>,
}

/// Where conversation histories and run logs live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Store {
    pub backend: Backend,
    /// A run whose gateway stops renewing this lease is lost.
    pub lease: Duration,
    /// Redis backends: bound on one store call; a running stream's log
    /// write is retried within it (a failover ridden through when it is
    /// above the store's failover time).
    pub op_timeout: Duration,
    /// Conversation histories expire after this long unused.
    pub history_ttl: Duration,
    /// A run log keeps at most this many bytes of events (oldest dropped).
    pub max_run_bytes: usize,
    /// Memory backend: run logs kept (ended ones evicted first).
    pub max_runs: usize,
    /// Memory backend: all run logs (and kept run inputs) together.
    pub max_total_bytes: usize,
    /// A conversation history keeps at most this many bytes (oldest dropped).
    pub max_history_bytes: usize,
    /// Memory backend: all conversation histories together.
    pub max_total_history_bytes: usize,
    /// A resume snapshot is built from at most this many bytes of the run
    /// log; past it the client gets the run replayed instead.
    pub max_snapshot_bytes: usize,
    /// Resumed streams one instance follows at once; past it a resume is
    /// answered 503 `too_many_followers`.
    pub max_followers: usize,
}

#[derive(Clone, PartialEq, Eq)]
pub enum Backend {
    Memory,
    /// Redacted in Debug output: the URL may hold a password.
    Redis {
        url: String,
    },
    /// Seed nodes of a Redis Cluster (7.0 or later); redacted as `Redis`.
    RedisCluster {
        urls: Vec<String>,
    },
}

impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::Memory => f.write_str("Memory"),
            Backend::Redis { .. } => f.write_str("Redis { url: <redacted> }"),
            Backend::RedisCluster { urls } => {
                write!(f, "RedisCluster {{ urls: <{} redacted> }}", urls.len())
            }
        }
    }
}

impl Default for Store {
    fn default() -> Self {
        let memory = babelgate_store::MemoryConfig::default();
        Store {
            backend: Backend::Memory,
            lease: Duration::from_secs(10),
            op_timeout: babelgate_store::RedisConfig::new("").op_timeout,
            history_ttl: Duration::from_secs(24 * 3600),
            max_run_bytes: memory.max_run_bytes,
            max_runs: memory.max_runs,
            max_total_bytes: memory.max_total_bytes,
            max_history_bytes: memory.max_history_bytes,
            max_total_history_bytes: memory.max_total_history_bytes,
            max_snapshot_bytes: 1 << 20,
            max_followers: 256,
        }
    }
}

/// What happens to the upstream run when its client goes away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDisconnect {
    /// The upstream request is cancelled.
    #[default]
    Cancel,
    /// The run goes on and stays resumable; `POST {path}/{id}/stop` ends it.
    Keep,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Certificate authorities a route's `https://` or `wss://` upstream may
/// chain to, besides the webpki roots (`upstream_ca`): read, and checked
/// as trust anchors, when the file is loaded.
#[derive(Debug, Clone)]
pub struct UpstreamCa {
    pub path: PathBuf,
    pub certs: Vec<rustls_pki_types::CertificateDer<'static>>,
}

/// PEM files for HTTPS on the listener.
#[derive(Debug, Clone)]
pub struct Tls {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// How clients of a route prove who they are: a static bearer key or a
/// JWT, either one accepted.
#[derive(Debug, Clone, Default)]
pub struct Auth {
    pub keys: Keys,
    pub jwt: Option<Jwt>,
}

/// Bearer JWTs: signature, `iss`, `aud`, `exp` and `nbf` checked; `sub` is
/// who the caller is.
#[derive(Debug, Clone)]
pub struct Jwt {
    pub issuer: String,
    pub audience: String,
    pub keys: JwtKeys,
    /// Clock skew allowed on `exp` and `nbf`.
    pub leeway: Duration,
    /// The `alg` values accepted; each fits `keys` (no HMAC with a JWKS).
    pub algorithms: Vec<jsonwebtoken::Algorithm>,
}

#[derive(Clone)]
pub enum JwtKeys {
    /// The shared secret (from the environment; Debug never prints it).
    Hs256(Redacted<Vec<u8>>),
    /// Public keys read from a file when the configuration is loaded.
    Jwks(Arc<jsonwebtoken::jwk::JwkSet>),
    /// Public keys fetched from a URL, cached, fetched again for an unknown
    /// `kid` (see `access.rs`).
    JwksUrl(Arc<crate::access::JwksCache>),
}

impl fmt::Debug for JwtKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JwtKeys::Hs256(_) => f.write_str("Hs256(<redacted>)"),
            JwtKeys::Jwks(set) => write!(f, "Jwks({} keys)", set.keys.len()),
            JwtKeys::JwksUrl(c) => write!(f, "JwksUrl({})", c.url()),
        }
    }
}

/// Accepted bearer keys. Debug never prints them.
#[derive(Clone, Default)]
pub struct Keys(pub Vec<String>);

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Keys(<{} redacted>)", self.0.len())
    }
}

#[derive(Debug, Clone)]
pub struct Cors {
    /// `*` allows any origin.
    pub allow_origins: Vec<String>,
    pub allow_headers: Vec<String>,
    pub max_age: Duration,
    /// Answers `access-control-allow-credentials: true`, so pages may send
    /// cookies; never with `*` (browsers refuse the pair, and it would let
    /// any page act with the user's cookies).
    pub allow_credentials: bool,
}

#[derive(Debug, Clone)]
pub struct DemoAgent {
    pub listen: SocketAddr,
    pub protocol: Dialect,
    pub delay: Duration,
}

#[derive(Debug, Clone)]
pub struct Route {
    pub path: String,
    pub client: Dialect,
    pub upstream: reqwest::Url,
    pub upstream_protocol: Dialect,
    /// Tools the client runs, forwarded to the upstream (Vercel clients send
    /// no tool definitions).
    pub client_tools: Vec<Tool>,
    /// Sent to the upstream, `${ENV}` already interpolated (secrets: never
    /// logged, see the Debug impl).
    pub upstream_headers: Redacted<Vec<(String, String)>>,
    /// Client request headers passed on to the upstream (lower case).
    pub forward_headers: Vec<String>,
    /// Bearer keys or JWTs a client must present; `None`: no authentication.
    pub auth: Option<Auth>,
    pub cors: Option<Cors>,
    pub max_body_bytes: usize,
    pub on_disconnect: OnDisconnect,
    /// Whether the route's streams are written to a run log, so that a
    /// client can resume them and `stop` can end them (`resume`, on by
    /// default). Off: no log, no lease, no `id:` lines, and
    /// `{path}/{id}/stream` and `/stop` answer 404 `resume_disabled`.
    pub resume: bool,
    /// A run's event log is kept this long after the run ends.
    pub retention: Duration,
    pub connect_timeout: Duration,
    /// No upstream bytes for this long ends the stream with an error.
    pub idle_timeout: Duration,
    /// An SSE comment is sent after this long without output, so that load
    /// balancers keep the stream open. `None` turns it off (`heartbeat_ms = 0`).
    pub heartbeat: Option<Duration>,
    /// A client that accepts no bytes for this long while output waits has
    /// left (`client_stall_timeout_ms`); `None`: waited for as long as its
    /// connection lives (`0`).
    pub client_stall_timeout: Option<Duration>,
    /// The upstream's response head must arrive within this long (504).
    pub response_timeout: Duration,
    /// Concurrent client streams on the route; 0: unlimited.
    pub max_streams: usize,
    /// Per-caller limits (`[routes.rate_limit]`).
    pub rate_limit: Option<RateLimit>,
    /// AG-Kit clients: also frames the AG-Kit server never sends, for what
    /// AG-Kit cannot say (off: those events are dropped and counted).
    pub extension_frames: bool,
    /// `drop_raw`: the upstream's RAW events are not passed on (see
    /// `EncodeContext::drop_raw`).
    pub drop_raw: bool,
    /// How the upstream's stream is asked for (`upstream_transport`).
    pub upstream_transport: UpstreamTransport,
    /// Extra roots for the upstream's certificate (`upstream_ca`).
    pub upstream_ca: Option<UpstreamCa>,
    /// What the route says of its agent to clients whose dialect reads a
    /// description (`agent_name`, `agent_description`, `agent_skills`);
    /// its URL and version are filled in per request.
    pub agent: babelgate_core::AgentAbout,
}

/// The transport asked of a route's upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UpstreamTransport {
    /// SSE only.
    #[default]
    Sse,
    /// AG-UI's binary transport only (`application/vnd.ag-ui.event+proto`).
    Proto,
    /// Both asked for, binary preferred; the response's content type decides.
    Auto,
}

/// Per-caller limits of a route: the caller is its verified credential's
/// owner, or on a route without auth its address (see `limits::caller_key`).
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimit {
    /// Requests per second, refilled continuously; `None`: not limited.
    pub requests_per_s: Option<f64>,
    /// Requests allowed at once before the rate applies.
    pub burst: u32,
    /// Streams open at once per caller; `None`: not limited.
    pub concurrent_streams: Option<u32>,
}

/// A value that Debug output never shows.
#[derive(Clone, Default)]
pub struct Redacted<T>(pub T);

impl<T> fmt::Debug for Redacted<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl<T> std::ops::Deref for Redacted<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Headers that describe one connection (RFC 9110 section 7.6.1) and those
/// the gateway sets itself: never forwarded.
pub const NEVER_FORWARDED: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "content-type",
    "accept",
    "accept-encoding",
];

#[derive(Debug, Clone, PartialEq)]
pub struct Telemetry {
    /// The collector's OTLP/HTTP traces endpoint (`.../v1/traces`).
    pub otlp_endpoint: String,
    pub service_name: String,
    /// Sent with every export (a collector's token): never shown.
    pub headers: Redacted<Vec<(String, String)>>,
    /// Share of new traces recorded; a client's sampled flag is honoured.
    pub sample_ratio: f64,
    /// Finished spans waiting for export; past it new ones are dropped.
    pub max_queue_spans: usize,
    pub export_timeout: Duration,
}

impl<T: PartialEq> PartialEq for Redacted<T> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
