//! gateway.toml: parsed raw (unknown keys rejected), then compiled into the
//! runtime [`Config`], collecting every error with its line and column so that
//! `babelgate check` can print them all at once.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use babelgate_core::request::Tool;
use babelgate_core::Dialect;
use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

/// `client_stall_timeout_ms` of a route that does not set it; also the
/// deadline of answers that are not a route's (health, errors, inspector).
pub const DEFAULT_CLIENT_STALL_TIMEOUT_MS: u64 = 30_000;

// ---- raw, as written ------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    server: RawServer,
    store: Option<RawStore>,
    demo_agent: Option<RawDemo>,
    inspector: Option<RawInspector>,
    #[schemars(with = "Option<RawTelemetry>")]
    telemetry: Option<Spanned<RawTelemetry>>,
    #[serde(default)]
    routes: Vec<RawRoute>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawInspector {
    #[schemars(with = "Option<String>")]
    path: Option<Spanned<String>>,
    auth: Option<RawAuth>,
    #[schemars(with = "Option<u64>")]
    max_runs: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    max_run_bytes: Option<Spanned<u64>>,
    #[schemars(with = "Option<f64>")]
    sample: Option<Spanned<f64>>,
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    allowed_hosts: Vec<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawServer {
    #[schemars(with = "Option<String>")]
    listen: Option<Spanned<String>>,
    tls: Option<RawTls>,
    /// The old name of `request_read_timeout_ms`, still accepted.
    #[schemars(extend("deprecated" = true))]
    header_read_timeout_ms: Option<u64>,
    request_read_timeout_ms: Option<u64>,
    keepalive_timeout_ms: Option<u64>,
    max_connections: Option<usize>,
    max_inflight_bytes: Option<usize>,
    shutdown_grace_ms: Option<u64>,
    #[schemars(with = "Option<String>")]
    log_format: Option<Spanned<String>>,
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    trusted_proxies: Vec<Spanned<String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawStore {
    #[schemars(with = "String")]
    backend: Spanned<String>,
    #[schemars(with = "Option<String>")]
    url: Option<Spanned<String>>,
    #[schemars(with = "Option<Vec<String>>")]
    urls: Option<Spanned<Vec<Spanned<String>>>>,
    lease_ms: Option<u64>,
    op_timeout_ms: Option<u64>,
    history_ttl_s: Option<u64>,
    #[schemars(with = "Option<u64>")]
    max_run_bytes: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    max_runs: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    max_total_bytes: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    max_history_bytes: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    max_total_history_bytes: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    max_snapshot_bytes: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    max_followers: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawTls {
    #[schemars(with = "String")]
    cert: Spanned<String>,
    #[schemars(with = "String")]
    key: Spanned<String>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawAuth {
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    bearer_env: Vec<Spanned<String>>,
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    bearer_files: Vec<Spanned<String>>,
    jwt: Option<RawJwt>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawJwt {
    #[schemars(with = "Option<String>")]
    issuer: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    audience: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    hs256_secret_env: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    jwks_file: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    jwks_url: Option<Spanned<String>>,
    leeway_s: Option<u64>,
    #[schemars(with = "Option<Vec<String>>")]
    algorithms: Option<Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawCors {
    #[schemars(with = "Vec<String>")]
    allow_origins: Vec<Spanned<String>>,
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    allow_headers: Vec<Spanned<String>>,
    max_age_s: Option<u64>,
    #[schemars(with = "Option<bool>")]
    allow_credentials: Option<Spanned<bool>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawDemo {
    #[schemars(with = "String")]
    listen: Spanned<String>,
    #[schemars(with = "String")]
    protocol: Spanned<String>,
    delay_ms: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    #[schemars(with = "String")]
    path: Spanned<String>,
    #[schemars(with = "String")]
    client: Spanned<String>,
    #[schemars(with = "String")]
    upstream: Spanned<String>,
    #[schemars(with = "String")]
    upstream_protocol: Spanned<String>,
    #[serde(default)]
    client_tools: Vec<RawTool>,
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    upstream_headers: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    forward_headers: Vec<Spanned<String>>,
    // Not `Spanned`: toml cannot span a table holding a sub-table
    // (`[routes.auth.jwt]`); its table-level errors point at the route's `path`.
    auth: Option<RawAuth>,
    cors: Option<RawCors>,
    max_body_bytes: Option<usize>,
    #[schemars(with = "Option<String>")]
    on_disconnect: Option<Spanned<String>>,
    #[schemars(with = "Option<u64>")]
    retention_s: Option<Spanned<u64>>,
    #[schemars(with = "Option<bool>")]
    resume: Option<Spanned<bool>>,
    connect_timeout_ms: Option<u64>,
    idle_timeout_ms: Option<u64>,
    heartbeat_ms: Option<u64>,
    client_stall_timeout_ms: Option<u64>,
    response_timeout_ms: Option<u64>,
    max_streams: Option<usize>,
    rate_limit: Option<RawRateLimit>,
    #[schemars(with = "Option<bool>")]
    extension_frames: Option<Spanned<bool>>,
    drop_raw: Option<bool>,
    #[schemars(with = "Option<String>")]
    upstream_transport: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    upstream_ca: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    agent_name: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    agent_description: Option<Spanned<String>>,
    #[serde(default)]
    #[schemars(with = "Vec<RawSkill>")]
    agent_skills: Vec<Spanned<RawSkill>>,
}

/// `[[routes.agent_skills]]`: one thing the agent does, for the clients
/// that read a description of it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawSkill {
    id: String,
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    examples: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawRateLimit {
    #[schemars(with = "Option<f64>")]
    requests_per_s: Option<Spanned<f64>>,
    burst: Option<u32>,
    concurrent_streams: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawTool {
    name: String,
    #[serde(default)]
    description: String,
    #[schemars(with = "Option<serde_json::Value>")]
    parameters: Option<toml::Value>,
}

/// The JSON Schema of gateway.toml (draft 2020-12), made from the raw types
/// the file is read into, so that it names exactly the keys `check` accepts;
/// `babelgate schema` prints it and the repository ships it as
/// `gateway.schema.json` for editors.
pub fn schema() -> serde_json::Value {
    use schemars::transform::{RecursiveTransform, RestrictFormats, Transform};
    let generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let mut schema = generator.into_root_schema_for::<RawConfig>();
    // TOML has no null: an absent key is how an optional one is left out.
    RecursiveTransform(drop_null).transform(&mut schema);
    // Rust's integer formats (`uint64`...) mean nothing to a JSON Schema
    // validator; the bounds (`minimum`) stay.
    RestrictFormats::default().transform(&mut schema);
    schema.insert("title".into(), "gateway.toml".into());
    schema.insert(
        "description".into(),
        "babelgate's configuration: see docs/configuration.md".into(),
    );
    schema.to_value()
}

/// `Option<T>`'s schema without its `null` alternative.
fn drop_null(schema: &mut schemars::Schema) {
    use serde_json::Value;
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    if let Some(Value::Array(types)) = obj.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            obj.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(any)) = obj.get_mut("anyOf") {
        any.retain(|s| s.get("type").is_none_or(|t| t != "null"));
        if let [Value::Object(only)] = any.as_slice() {
            let only = only.clone();
            obj.remove("anyOf");
            obj.extend(only);
        }
    }
}

// ---- compiled --------------------------------------------------------------

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

/// One problem in the file, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

/// All problems found in one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors {
    pub file: String,
    pub errors: Vec<ConfigError>,
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}:{e}", self.file)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Why a route or page at `path` could never be asked for, if so: clients
/// resolve `.` and `..` segments before they send a path, and the query and
/// fragment are not part of it.
fn unreachable_path(path: &str) -> Option<&'static str> {
    if path.split('/').any(|seg| seg == "." || seg == "..") {
        Some("has a `.` or `..` segment, which clients resolve away: no request can name it")
    } else if path.contains(['?', '#']) || path.chars().any(char::is_whitespace) {
        Some("is not a plain path (no `?`, `#` or spaces)")
    } else {
        None
    }
}

/// The most of one quoted value a message repeats.
const MAX_QUOTED: usize = 200;

/// `message` with every quoted value (between backticks or double quotes)
/// longer than [`MAX_QUOTED`] bytes cut, saying how long it was, and the
/// whole at most a few times that: a 10 MB value in the file is not echoed
/// by `check` or into the log on reload. Every config error goes through it.
fn clip_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(4 * MAX_QUOTED));
    let mut rest = message;
    while let Some(open) = rest.find(['`', '"']) {
        let (before, from) = rest.split_at(open);
        out.push_str(before);
        let mut chars = from.chars();
        let q = chars.next().unwrap_or('`');
        let inner = chars.as_str();
        let Some((value, after)) = inner.split_once(q) else {
            rest = from;
            break;
        };
        out.push(q);
        out.push_str(cut(value, MAX_QUOTED));
        if value.len() > MAX_QUOTED {
            out.push_str(&format!("... ({} bytes)", value.len()));
        }
        out.push(q);
        rest = after;
    }
    // What is left: unquoted, or an unclosed quote.
    let room = (4 * MAX_QUOTED).saturating_sub(out.len()).max(MAX_QUOTED);
    out.push_str(cut(rest, room));
    if rest.len() > room {
        out.push_str(&format!("... ({} bytes)", rest.len()));
    }
    out
}

/// At most `max` bytes of `s`, cut at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or_default()
}

fn position(src: &str, offset: usize) -> (usize, usize) {
    let before = src.get(..offset).unwrap_or(src);
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map_or(before.len(), |i| before.len() - i - 1)
        + 1;
    (line, column)
}

/// A route's `agent_*` keys: only for a client dialect that has a
/// description of the agent to serve (`RequestTranslator::describe`); the
/// name defaults to the route's path.
fn agent_about(
    c: &mut Collector<'_>,
    r: &RawRoute,
    path: &str,
    client: Option<Dialect>,
) -> babelgate_core::AgentAbout {
    let describes =
        client.is_none_or(|d| crate::registry::requests(d).description_path().is_some());
    let refuse = |c: &mut Collector<'_>, span: &std::ops::Range<usize>, key: &str| {
        let (line, column) = position(c.src, span.start);
        c.errors.push(ConfigError {
            line,
            column,
            message: format!("routes.{key}: the client dialect serves no description of the agent"),
        });
    };
    if !describes {
        if let Some(v) = &r.agent_name {
            refuse(c, &v.span(), "agent_name");
        }
        if let Some(v) = &r.agent_description {
            refuse(c, &v.span(), "agent_description");
        }
        if let Some(v) = r.agent_skills.first() {
            refuse(c, &v.span(), "agent_skills");
        }
    }
    let name = match &r.agent_name {
        Some(v) if v.get_ref().trim().is_empty() => {
            c.at(v, "routes.agent_name: must not be empty");
            path.to_string()
        }
        Some(v) => v.get_ref().clone(),
        None => path.to_string(),
    };
    let mut skills: Vec<babelgate_core::Skill> = Vec::new();
    for raw in &r.agent_skills {
        let s = raw.get_ref();
        if s.id.trim().is_empty() || s.name.trim().is_empty() {
            c.at(
                raw,
                "routes.agent_skills: `id` and `name` must not be empty",
            );
        } else if skills.iter().any(|k| k.id == s.id) {
            c.at(
                raw,
                format!("routes.agent_skills: `{}` is listed twice", s.id),
            );
        }
        skills.push(babelgate_core::Skill {
            id: s.id.clone(),
            name: s.name.clone(),
            description: s.description.clone(),
            tags: s.tags.clone(),
            examples: s.examples.clone(),
        });
    }
    babelgate_core::AgentAbout {
        name,
        description: r
            .agent_description
            .as_ref()
            .map(|v| v.get_ref().clone())
            .unwrap_or_default(),
        skills,
        ..Default::default()
    }
}

struct Collector<'a> {
    src: &'a str,
    errors: Vec<ConfigError>,
}

impl Collector<'_> {
    fn at<T>(&mut self, spanned: &Spanned<T>, message: impl Into<String>) {
        let (line, column) = position(self.src, spanned.span().start);
        self.errors.push(ConfigError {
            line,
            column,
            message: clip_quoted(&message.into()),
        });
    }

    /// A positive count (bytes, streams), or `default` when absent.
    fn count(&mut self, v: &Option<Spanned<u64>>, key: &str, default: usize) -> usize {
        match v {
            None => default,
            Some(n) if *n.get_ref() == 0 => {
                self.at(n, format!("{key}: must be at least 1"));
                default
            }
            Some(n) => usize::try_from(*n.get_ref()).unwrap_or(usize::MAX),
        }
    }

    fn dialect(&mut self, v: &Spanned<String>, key: &str) -> Option<Dialect> {
        match v.get_ref().parse::<Dialect>() {
            Ok(d) => Some(d),
            Err(e) => {
                self.at(v, format!("{key}: {e}"));
                None
            }
        }
    }

    /// A path from the file, relative to the file's directory.
    fn file(&mut self, v: &Spanned<String>, base: &Path, key: &str) -> PathBuf {
        let p = base.join(v.get_ref());
        if !p.is_file() {
            self.at(
                v,
                format!("{key}: `{}` is not a readable file", p.display()),
            );
        }
        p
    }

    /// `upstream_ca`: a PEM file of one or more certificates, each usable
    /// as a trust anchor.
    fn upstream_ca(&mut self, v: &Spanned<String>, base: &Path) -> Option<UpstreamCa> {
        use rustls_pki_types::pem::PemObject;
        use rustls_pki_types::CertificateDer;
        let path = base.join(v.get_ref());
        let certs = match CertificateDer::pem_file_iter(&path)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        {
            Ok(c) => c,
            Err(e) => {
                self.at(v, format!("routes.upstream_ca: `{}`: {e}", path.display()));
                return None;
            }
        };
        if certs.is_empty() {
            self.at(
                v,
                format!(
                    "routes.upstream_ca: `{}` holds no PEM certificate",
                    path.display()
                ),
            );
            return None;
        }
        let mut roots = tokio_rustls::rustls::RootCertStore::empty();
        for cert in &certs {
            if let Err(e) = roots.add(cert.clone()) {
                self.at(
                    v,
                    format!(
                        "routes.upstream_ca: `{}`: not a usable CA certificate: {e}",
                        path.display()
                    ),
                );
                return None;
            }
        }
        Some(UpstreamCa { path, certs })
    }

    /// `${NAME}` replaced by the environment variable NAME; `$$` is a `$`.
    fn interpolate(
        &mut self,
        v: &Spanned<String>,
        env: &dyn Fn(&str) -> Option<String>,
        key: &str,
    ) -> Option<String> {
        let src = v.get_ref();
        let mut out = String::with_capacity(src.len());
        let mut rest = src.as_str();
        while let Some((before, after)) = rest.split_once('$') {
            out.push_str(before);
            rest = after;
            if let Some(r) = rest.strip_prefix('$') {
                out.push('$');
                rest = r;
            } else if let Some(r) = rest.strip_prefix('{') {
                let Some((name, after)) = r.split_once('}') else {
                    self.at(v, format!("{key}: `${{` without a closing `}}`"));
                    return None;
                };
                match env(name) {
                    Some(val) => out.push_str(&val),
                    None => {
                        self.at(
                            v,
                            format!("{key}: environment variable `{name}` is not set"),
                        );
                        return None;
                    }
                }
                rest = after;
            } else {
                out.push('$');
            }
        }
        out.push_str(rest);
        Some(out)
    }

    fn inspector(
        &mut self,
        raw: &RawInspector,
        src: &str,
        base: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Inspector {
        let _ = src;
        let path = match &raw.path {
            None => "/inspector".to_string(),
            Some(p) => {
                let v = p.get_ref().trim_end_matches('/').to_string();
                if !v.starts_with('/') || v.len() < 2 {
                    self.at(
                        p,
                        format!(
                            "inspector.path: `{}` must start with `/` and name a path",
                            p.get_ref()
                        ),
                    );
                } else if let Some(why) = unreachable_path(&v) {
                    self.at(p, format!("inspector.path: `{}` {why}", p.get_ref()));
                }
                v
            }
        };
        let auth = raw.auth.as_ref().map(|a| {
            let at = raw
                .path
                .clone()
                .unwrap_or_else(|| Spanned::new(0..0, path.clone()));
            self.auth(&at, a, base, env)
        });
        let max_runs = match &raw.max_runs {
            None => 200,
            Some(v) if *v.get_ref() == 0 || *v.get_ref() > 100_000 => {
                self.at(v, "inspector.max_runs: must be 1 to 100000");
                200
            }
            Some(v) => *v.get_ref() as usize,
        };
        let max_run_bytes = match &raw.max_run_bytes {
            None => 1 << 20,
            Some(v) if *v.get_ref() < 1024 || *v.get_ref() > (64 << 20) => {
                self.at(v, "inspector.max_run_bytes: must be 1024 to 67108864");
                1 << 20
            }
            Some(v) => *v.get_ref() as usize,
        };
        let sample = match &raw.sample {
            None => 1.0,
            Some(v) if !(0.0..=1.0).contains(v.get_ref()) => {
                self.at(v, "inspector.sample: must be between 0 and 1");
                1.0
            }
            Some(v) => *v.get_ref(),
        };
        let allowed_hosts = raw
            .allowed_hosts
            .iter()
            .filter_map(|h| {
                let name = h.get_ref().trim();
                // A name as `Host` gives it, without a port: `gw.internal`.
                let ok = !name.is_empty()
                    && !name.contains([':', '@', '/', '*'])
                    && name.parse::<http::uri::Authority>().is_ok();
                if !ok {
                    self.at(
                        h,
                        format!("inspector.allowed_hosts: `{name}` is not a host name (no port, no wildcard)"),
                    );
                }
                ok.then(|| name.to_ascii_lowercase())
            })
            .collect();
        Inspector {
            path,
            auth,
            max_runs,
            max_run_bytes,
            sample,
            allowed_hosts,
        }
    }

    /// `a`: where table-level problems are reported.
    fn auth(
        &mut self,
        a: &Spanned<String>,
        raw: &RawAuth,
        base: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Auth {
        let errors_before = self.errors.len();
        let mut keys = Vec::new();
        for name in &raw.bearer_env {
            match env(name.get_ref()).map(|k| k.trim().to_string()) {
                Some(k) if !k.is_empty() => keys.push(k),
                _ => self.at(
                    name,
                    format!(
                        "routes.auth.bearer_env: environment variable `{}` is not set or empty",
                        name.get_ref()
                    ),
                ),
            }
        }
        for f in &raw.bearer_files {
            let p = base.join(f.get_ref());
            match std::fs::read_to_string(&p) {
                // One key per line; blank lines and `#` comments ignored.
                Ok(text) => keys.extend(
                    text.lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty() && !l.starts_with('#'))
                        .map(String::from),
                ),
                Err(e) => self.at(
                    f,
                    format!("routes.auth.bearer_files: `{}`: {e}", p.display()),
                ),
            }
        }
        let jwt = raw.jwt.as_ref().and_then(|j| self.jwt(a, j, base, env));
        if keys.is_empty() && raw.jwt.is_none() && self.errors.len() == errors_before {
            self.at(
                a,
                "routes.auth: no keys (name `bearer_env` variables or `bearer_files`, or add `[routes.auth.jwt]`)",
            );
        }
        Auth {
            keys: Keys(keys),
            jwt,
        }
    }

    fn jwt(
        &mut self,
        j: &Spanned<String>,
        raw: &RawJwt,
        base: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<Jwt> {
        use jsonwebtoken::Algorithm;
        let required = |c: &mut Self, v: &Option<Spanned<String>>, key: &str| match v {
            Some(v) if !v.get_ref().trim().is_empty() => Some(v.get_ref().clone()),
            Some(v) => {
                c.at(v, format!("routes.auth.jwt.{key}: must not be empty"));
                None
            }
            None => {
                c.at(j, format!("routes.auth.jwt: `{key}` is required"));
                None
            }
        };
        let issuer = required(self, &raw.issuer, "issuer");
        let audience = required(self, &raw.audience, "audience");
        let sources = [&raw.hs256_secret_env, &raw.jwks_file, &raw.jwks_url]
            .iter()
            .filter(|s| s.is_some())
            .count();
        if sources != 1 {
            self.at(
                j,
                "routes.auth.jwt: give exactly one of `hs256_secret_env`, `jwks_file`, `jwks_url`",
            );
            return None;
        }
        let keys = if let Some(name) = &raw.hs256_secret_env {
            match env(name.get_ref()) {
                Some(secret) if !secret.is_empty() => {
                    Some(JwtKeys::Hs256(Redacted(secret.into_bytes())))
                }
                // The name is printed, never the value.
                _ => {
                    self.at(
                        name,
                        format!(
                            "routes.auth.jwt.hs256_secret_env: environment variable `{}` is not set or empty",
                            name.get_ref()
                        ),
                    );
                    None
                }
            }
        } else if let Some(f) = &raw.jwks_file {
            let p = base.join(f.get_ref());
            let parsed = std::fs::read_to_string(&p)
                .map_err(|e| e.to_string())
                .and_then(|text| {
                    serde_json::from_str::<jsonwebtoken::jwk::JwkSet>(&text)
                        .map_err(|e| format!("not a JWKS: {e}"))
                });
            match parsed {
                Ok(set) if set.keys.is_empty() => {
                    self.at(
                        f,
                        format!("routes.auth.jwt.jwks_file: `{}` holds no keys", p.display()),
                    );
                    None
                }
                Ok(set) => Some(JwtKeys::Jwks(Arc::new(set))),
                Err(e) => {
                    self.at(
                        f,
                        format!("routes.auth.jwt.jwks_file: `{}`: {e}", p.display()),
                    );
                    None
                }
            }
        } else if let Some(u) = &raw.jwks_url {
            match reqwest::Url::parse(u.get_ref()) {
                Ok(url) if url.scheme() == "https" || url.scheme() == "http" => {
                    if !url.username().is_empty() || url.password().is_some() {
                        self.at(
                            u,
                            "routes.auth.jwt.jwks_url: credentials in the URL are not supported",
                        );
                        None
                    } else {
                        Some(JwtKeys::JwksUrl(Arc::new(crate::access::JwksCache::new(
                            url,
                        ))))
                    }
                }
                Ok(url) => {
                    self.at(
                        u,
                        format!(
                            "routes.auth.jwt.jwks_url: scheme `{}` is not http or https",
                            url.scheme()
                        ),
                    );
                    None
                }
                Err(e) => {
                    self.at(u, format!("routes.auth.jwt.jwks_url: {e}"));
                    None
                }
            }
        } else {
            None
        };
        let hmac = raw.hs256_secret_env.is_some();
        let algorithms: Vec<Algorithm> = match &raw.algorithms {
            None if hmac => vec![Algorithm::HS256],
            None => vec![Algorithm::RS256, Algorithm::ES256],
            Some(list) => {
                let mut out = Vec::new();
                for a in list {
                    let name = a.get_ref();
                    let parsed = name.parse::<Algorithm>().ok().filter(|alg| {
                        // An HMAC secret takes only HS256, a JWKS only public-key
                        // algorithms: a token never picks how it is checked.
                        if hmac {
                            *alg == Algorithm::HS256
                        } else {
                            !matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512)
                        }
                    });
                    match parsed {
                        Some(alg) => out.push(alg),
                        None => self.at(
                            a,
                            if hmac {
                                format!("routes.auth.jwt.algorithms: `{name}`: with `hs256_secret_env` only HS256")
                            } else {
                                format!("routes.auth.jwt.algorithms: `{name}` is not a public-key algorithm (RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA)")
                            },
                        ),
                    }
                }
                if list.is_empty() {
                    self.at(j, "routes.auth.jwt.algorithms: empty");
                }
                out
            }
        };
        Some(Jwt {
            issuer: issuer?,
            audience: audience?,
            keys: keys?,
            leeway: Duration::from_secs(raw.leeway_s.unwrap_or(30)),
            algorithms,
        })
    }

    fn addr(&mut self, v: &Spanned<String>, key: &str) -> Option<SocketAddr> {
        match v.get_ref().parse() {
            Ok(a) => Some(a),
            Err(_) => {
                self.at(
                    v,
                    format!(
                        "{key}: `{}` is not an address like 127.0.0.1:8080",
                        v.get_ref()
                    ),
                );
                None
            }
        }
    }
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
        let file = path.display().to_string();
        let src = std::fs::read_to_string(path).map_err(|e| ConfigErrors {
            file: file.clone(),
            errors: vec![ConfigError {
                line: 0,
                column: 0,
                message: format!("cannot read: {e}"),
            }],
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Config::parse_with(&src, base, &|k| std::env::var(k).ok())
            .map_err(|errors| ConfigErrors { file, errors })
    }

    /// Parses a file's text; relative paths are taken from the working
    /// directory and `${NAME}` from the process environment.
    pub fn parse(src: &str) -> Result<Config, Vec<ConfigError>> {
        Config::parse_with(src, Path::new("."), &|k| std::env::var(k).ok())
    }

    pub fn parse_with(
        src: &str,
        base: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, Vec<ConfigError>> {
        let raw: RawConfig = toml::from_str(src).map_err(|e| {
            let (line, column) = e.span().map_or((0, 0), |s| position(src, s.start));
            vec![ConfigError {
                line,
                column,
                message: clip_quoted(e.message()),
            }]
        })?;
        let mut c = Collector {
            src,
            errors: Vec::new(),
        };
        let default_listen = SocketAddr::from(([127, 0, 0, 1], 8080));
        let listen = match &raw.server.listen {
            Some(l) => c.addr(l, "server.listen"),
            None => Some(default_listen),
        };
        let store = match &raw.store {
            None => Store::default(),
            Some(st) => {
                let name = st.backend.get_ref().as_str();
                if let (Some(u), false) = (&st.urls, name == "redis-cluster") {
                    c.at(u, "store.urls: only the redis-cluster backend takes urls");
                }
                let backend = match (name, &st.url) {
                    ("redis-cluster", Some(u)) => {
                        c.at(
                            u,
                            "store.url: the redis-cluster backend takes `urls`, a list of seed nodes",
                        );
                        Backend::Memory
                    }
                    ("redis-cluster", None) => match &st.urls {
                        Some(list) if !list.get_ref().is_empty() => {
                            let mut urls = Vec::new();
                            for (i, u) in list.get_ref().iter().enumerate() {
                                let key = format!("store.urls[{i}]");
                                let Some(url) = c.interpolate(u, env, &key) else {
                                    continue;
                                };
                                // No unix socket: a cluster's nodes name each
                                // other by host and port.
                                if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
                                    c.at(u, format!("{key}: expected redis://host:port"));
                                }
                                urls.push(url);
                            }
                            Backend::RedisCluster { urls }
                        }
                        Some(list) => {
                            c.at(list, "store.urls: give at least one seed node");
                            Backend::Memory
                        }
                        None => {
                            c.at(
                                &st.backend,
                                "store.urls: the redis-cluster backend needs urls = [\"redis://host:port\", ...]",
                            );
                            Backend::Memory
                        }
                    },
                    ("memory", None) => Backend::Memory,
                    ("memory", Some(u)) => {
                        c.at(u, "store.url: only the redis backend takes a url");
                        Backend::Memory
                    }
                    ("redis", Some(u)) => {
                        let url = c.interpolate(u, env, "store.url").unwrap_or_default();
                        if !(url.starts_with("redis://")
                            || url.starts_with("rediss://")
                            || url.starts_with("redis+unix://"))
                        {
                            c.at(u, "store.url: expected redis://host:port");
                        }
                        Backend::Redis { url }
                    }
                    ("redis", None) => {
                        c.at(&st.backend, "store.url: the redis backend needs a url");
                        Backend::Memory
                    }
                    (other, _) => {
                        c.at(
                            &st.backend,
                            format!(
                                "store.backend: `{other}` is not memory, redis or redis-cluster"
                            ),
                        );
                        Backend::Memory
                    }
                };
                let d = Store::default();
                Store {
                    backend,
                    lease: st
                        .lease_ms
                        .map_or(d.lease, |ms| Duration::from_millis(ms.max(100))),
                    op_timeout: st
                        .op_timeout_ms
                        .map_or(d.op_timeout, |ms| Duration::from_millis(ms.max(10))),
                    history_ttl: st.history_ttl_s.map_or(d.history_ttl, Duration::from_secs),
                    max_run_bytes: c.count(
                        &st.max_run_bytes,
                        "store.max_run_bytes",
                        d.max_run_bytes,
                    ),
                    max_runs: c.count(&st.max_runs, "store.max_runs", d.max_runs),
                    max_total_bytes: c.count(
                        &st.max_total_bytes,
                        "store.max_total_bytes",
                        d.max_total_bytes,
                    ),
                    max_history_bytes: c.count(
                        &st.max_history_bytes,
                        "store.max_history_bytes",
                        d.max_history_bytes,
                    ),
                    max_total_history_bytes: c.count(
                        &st.max_total_history_bytes,
                        "store.max_total_history_bytes",
                        d.max_total_history_bytes,
                    ),
                    max_snapshot_bytes: c.count(
                        &st.max_snapshot_bytes,
                        "store.max_snapshot_bytes",
                        d.max_snapshot_bytes,
                    ),
                    max_followers: c.count(
                        &st.max_followers,
                        "store.max_followers",
                        d.max_followers,
                    ),
                }
            }
        };
        let tls = raw.server.tls.as_ref().map(|t| Tls {
            cert: c.file(&t.cert, base, "server.tls.cert"),
            key: c.file(&t.key, base, "server.tls.key"),
        });
        let log_format = match raw
            .server
            .log_format
            .as_ref()
            .map(|v| (v, v.get_ref().as_str()))
        {
            None | Some((_, "text")) => LogFormat::Text,
            Some((_, "json")) => LogFormat::Json,
            Some((v, other)) => {
                c.at(
                    v,
                    format!("server.log_format: `{other}` is not text or json"),
                );
                LogFormat::Text
            }
        };
        let trusted_proxies = raw
            .server
            .trusted_proxies
            .iter()
            .filter_map(|p| {
                let v = p.get_ref().trim();
                // A bare address is a network of one.
                let net = v
                    .parse::<ipnet::IpNet>()
                    .ok()
                    .or_else(|| v.parse::<std::net::IpAddr>().ok().map(ipnet::IpNet::from));
                if net.is_none() {
                    c.at(
                        p,
                        format!("server.trusted_proxies: `{v}` is not an address or a network like 10.0.0.0/8"),
                    );
                }
                net
            })
            .collect();
        let demo_agent = raw.demo_agent.as_ref().and_then(|d| {
            let listen = c.addr(&d.listen, "demo_agent.listen");
            let protocol = c.dialect(&d.protocol, "demo_agent.protocol");
            Some(DemoAgent {
                listen: listen?,
                protocol: protocol?,
                delay: Duration::from_millis(d.delay_ms.unwrap_or(15)),
            })
        });
        let inspector = raw
            .inspector
            .as_ref()
            .map(|i| c.inspector(i, src, base, env));
        let telemetry = raw.telemetry.as_ref().map(|t| c.telemetry(t, env));
        let mut routes = Vec::new();
        let mut seen_paths: Vec<&str> = Vec::new();
        for r in &raw.routes {
            let path = r.path.get_ref();
            if !path.starts_with('/') {
                c.at(
                    &r.path,
                    format!("routes.path: `{path}` must start with `/`"),
                );
            } else if let Some(why) = unreachable_path(path) {
                c.at(&r.path, format!("routes.path: `{path}` {why}"));
            } else if seen_paths.contains(&path.as_str()) {
                c.at(
                    &r.path,
                    format!("routes.path: `{path}` is used by two routes"),
                );
            }
            seen_paths.push(path);
            let client = c.dialect(&r.client, "routes.client");
            let upstream_protocol = c.dialect(&r.upstream_protocol, "routes.upstream_protocol");
            let upstream = match reqwest::Url::parse(r.upstream.get_ref()) {
                Ok(u) if matches!(u.scheme(), "http" | "https" | "ws" | "wss") => Some(u),
                Ok(u) => {
                    c.at(
                        &r.upstream,
                        format!(
                            "routes.upstream: scheme `{}` is not http, https, ws or wss",
                            u.scheme()
                        ),
                    );
                    None
                }
                Err(e) => {
                    c.at(&r.upstream, format!("routes.upstream: {e}"));
                    None
                }
            };
            let upstream_headers = r
                .upstream_headers
                .iter()
                .filter_map(|(k, v)| {
                    if http::HeaderName::from_bytes(k.as_bytes()).is_err() {
                        c.at(
                            v,
                            format!("routes.upstream_headers: `{k}` is not a header name"),
                        );
                        return None;
                    }
                    let value = c.interpolate(v, env, "routes.upstream_headers")?;
                    if http::HeaderValue::from_str(&value).is_err() {
                        // The value may hold a secret: say where, not what.
                        c.at(
                            v,
                            format!("routes.upstream_headers.{k}: not a valid header value"),
                        );
                        return None;
                    }
                    Some((k.to_ascii_lowercase(), value))
                })
                .collect();
            let forward_headers = r
                .forward_headers
                .iter()
                .filter_map(|h| {
                    let name = h.get_ref().to_ascii_lowercase();
                    if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                        c.at(h, format!("routes.forward_headers: `{name}` is not a header name"));
                        None
                    } else if NEVER_FORWARDED.contains(&name.as_str()) {
                        c.at(h, format!("routes.forward_headers: `{name}` is hop-by-hop or set by the gateway; it is never forwarded"));
                        None
                    } else {
                        Some(name)
                    }
                })
                .collect();
            let auth = r.auth.as_ref().map(|a| c.auth(&r.path, a, base, env));
            let cors = r.cors.as_ref().map(|cors| Cors {
                allow_origins: cors
                    .allow_origins
                    .iter()
                    .map(|o| {
                        let v = o.get_ref();
                        if v != "*" && http::HeaderValue::from_str(v).is_err() {
                            c.at(
                                o,
                                format!("routes.cors.allow_origins: `{v}` is not an origin"),
                            );
                        }
                        v.clone()
                    })
                    .collect(),
                allow_headers: if cors.allow_headers.is_empty() {
                    [
                        "content-type",
                        "authorization",
                        "accept",
                        "x-request-id",
                        "last-event-id",
                    ]
                    .map(String::from)
                    .to_vec()
                } else {
                    cors.allow_headers
                        .iter()
                        .map(|h| h.get_ref().to_ascii_lowercase())
                        .collect()
                },
                max_age: Duration::from_secs(cors.max_age_s.unwrap_or(600)),
                allow_credentials: match &cors.allow_credentials {
                    Some(v) if *v.get_ref() => {
                        if cors.allow_origins.iter().any(|o| o.get_ref() == "*") {
                            c.at(v, "routes.cors.allow_credentials: not with `*` in allow_origins (list the origins)");
                        }
                        true
                    }
                    _ => false,
                },
            });
            let on_disconnect = match r.on_disconnect.as_ref().map(|v| (v, v.get_ref().as_str())) {
                None | Some((_, "cancel")) => OnDisconnect::Cancel,
                Some((_, "keep")) => OnDisconnect::Keep,
                Some((v, other)) => {
                    c.at(
                        v,
                        format!("routes.on_disconnect: `{other}` is not cancel or keep"),
                    );
                    OnDisconnect::Cancel
                }
            };
            let resume = r.resume.as_ref().is_none_or(|v| *v.get_ref());
            if let Some(off) = r.resume.as_ref().filter(|_| !resume) {
                // What only a run log gives cannot be promised without one.
                let (line, _) = position(c.src, off.span().start);
                if let (Some(v), OnDisconnect::Keep) = (&r.on_disconnect, on_disconnect) {
                    c.at(
                        v,
                        format!("routes.on_disconnect: `keep` runs on for its client to resume, but this route has `resume = false` (line {line}) and keeps no run log"),
                    );
                }
                if let Some(v) = &r.retention_s {
                    c.at(
                        v,
                        format!("routes.retention_s: this route has `resume = false` (line {line}) and keeps no run log to retain"),
                    );
                }
            }
            let client_tools = r
                .client_tools
                .iter()
                .map(|t| Tool {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    parameters: t
                        .parameters
                        .as_ref()
                        .and_then(|p| serde_json::to_value(p).ok()),
                })
                .collect();
            let rate_limit = r.rate_limit.as_ref().map(|rl| {
                let rate = rl.requests_per_s.as_ref().and_then(|v| {
                    let x = *v.get_ref();
                    if x.is_finite() && x > 0.0 {
                        Some(x)
                    } else {
                        c.at(
                            v,
                            "routes.rate_limit.requests_per_s: must be a positive number",
                        );
                        None
                    }
                });
                RateLimit {
                    requests_per_s: rate,
                    burst: rl
                        .burst
                        .unwrap_or_else(|| rate.map_or(1, |x| x.ceil().min(u32::MAX as f64) as u32))
                        .max(1),
                    concurrent_streams: rl.concurrent_streams,
                }
            });
            let extension_frames = match &r.extension_frames {
                Some(v)
                    if *v.get_ref()
                        && client.is_some_and(|d| !crate::registry::policy(d).extension_frames) =>
                {
                    c.at(
                        v,
                        "routes.extension_frames: only AG-Kit clients have extension frames (the client dialect has none)",
                    );
                    false
                }
                Some(v) => *v.get_ref(),
                None => false,
            };
            let agent = agent_about(&mut c, r, path, client);
            let upstream_transport = match r.upstream_transport.as_ref() {
                None => UpstreamTransport::Sse,
                Some(v) => {
                    let t = match v.get_ref().as_str() {
                        "sse" => Some(UpstreamTransport::Sse),
                        "proto" => Some(UpstreamTransport::Proto),
                        "auto" => Some(UpstreamTransport::Auto),
                        other => {
                            c.at(
                                v,
                                format!("routes.upstream_transport: `{other}` is not sse, proto or auto"),
                            );
                            None
                        }
                    };
                    match t {
                        Some(t)
                            if t != UpstreamTransport::Sse
                                && upstream_protocol
                                    .is_some_and(|d| !crate::registry::policy(d).binary) =>
                        {
                            c.at(
                                v,
                                "routes.upstream_transport: the upstream dialect has no binary transport",
                            );
                            UpstreamTransport::Sse
                        }
                        t => t.unwrap_or_default(),
                    }
                }
            };
            let upstream_ca = r.upstream_ca.as_ref().and_then(|v| {
                if upstream
                    .as_ref()
                    .is_some_and(|u| !matches!(u.scheme(), "https" | "wss"))
                {
                    c.at(
                        v,
                        "routes.upstream_ca: only an https:// or wss:// upstream has a certificate to check",
                    );
                    return None;
                }
                c.upstream_ca(v, base)
            });
            if let (Some(client), Some(upstream), Some(upstream_protocol)) =
                (client, upstream, upstream_protocol)
            {
                routes.push(Route {
                    path: path.clone(),
                    client,
                    upstream,
                    upstream_protocol,
                    client_tools,
                    upstream_headers: Redacted(upstream_headers),
                    forward_headers,
                    auth,
                    cors,
                    max_body_bytes: r.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES),
                    on_disconnect,
                    resume,
                    retention: Duration::from_secs(
                        r.retention_s.as_ref().map_or(300, |v| *v.get_ref()),
                    ),
                    connect_timeout: Duration::from_millis(r.connect_timeout_ms.unwrap_or(5_000)),
                    idle_timeout: Duration::from_millis(r.idle_timeout_ms.unwrap_or(300_000)),
                    heartbeat: match r.heartbeat_ms.unwrap_or(15_000) {
                        0 => None,
                        ms => Some(Duration::from_millis(ms)),
                    },
                    client_stall_timeout: match r
                        .client_stall_timeout_ms
                        .unwrap_or(DEFAULT_CLIENT_STALL_TIMEOUT_MS)
                    {
                        0 => None,
                        ms => Some(Duration::from_millis(ms)),
                    },
                    response_timeout: Duration::from_millis(
                        r.response_timeout_ms.unwrap_or(60_000).max(1),
                    ),
                    max_streams: r.max_streams.unwrap_or(0),
                    rate_limit,
                    extension_frames,
                    drop_raw: r.drop_raw.unwrap_or(false),
                    upstream_transport,
                    upstream_ca,
                    agent,
                });
            }
        }
        if let (Some(i), Some(raw_i)) = (&inspector, &raw.inspector) {
            let clash = routes
                .iter()
                .find(|r: &&Route| r.path == i.path || r.path.starts_with(&format!("{}/", i.path)));
            if let Some(r) = clash {
                let msg = format!(
                    "inspector.path: `{}` is taken by the route at `{}`",
                    i.path, r.path
                );
                match &raw_i.path {
                    Some(p) => c.at(p, msg),
                    None => c.errors.push(ConfigError {
                        line: 0,
                        column: 0,
                        message: msg,
                    }),
                }
            }
        }
        if !c.errors.is_empty() {
            return Err(c.errors);
        }
        Ok(Config {
            // `None` only with an error recorded above.
            listen: listen.unwrap_or(default_listen),
            tls,
            request_read_timeout: Duration::from_millis(
                raw.server
                    .request_read_timeout_ms
                    .or(raw.server.header_read_timeout_ms)
                    .unwrap_or(10_000)
                    .max(1),
            ),
            keepalive_timeout: Duration::from_millis(
                raw.server.keepalive_timeout_ms.unwrap_or(60_000).max(1),
            ),
            max_connections: raw.server.max_connections.unwrap_or(10_000).max(1),
            max_inflight_bytes: raw
                .server
                .max_inflight_bytes
                .unwrap_or_else(crate::inflight::default_budget)
                .max(1),
            shutdown_grace: Duration::from_millis(raw.server.shutdown_grace_ms.unwrap_or(30_000)),
            log_format,
            trusted_proxies,
            store,
            demo_agent,
            inspector,
            telemetry,
            routes,
        })
    }

    pub fn route(&self, path: &str) -> Option<&Route> {
        self.routes.iter().find(|r| r.path == path)
    }
}

// ---- [telemetry] -------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawTelemetry {
    #[schemars(with = "String")]
    otlp_endpoint: Spanned<String>,
    #[schemars(with = "Option<String>")]
    service_name: Option<Spanned<String>>,
    /// Header name -> the environment variable holding its value.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    headers_env: BTreeMap<String, Spanned<String>>,
    #[schemars(with = "Option<f64>")]
    sample_ratio: Option<Spanned<f64>>,
    #[schemars(with = "Option<u64>")]
    max_queue_spans: Option<Spanned<u64>>,
    export_timeout_ms: Option<u64>,
}

/// `[telemetry]`: where and how traces are exported (see `crate::telemetry`).
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

impl Collector<'_> {
    fn telemetry(
        &mut self,
        t: &Spanned<RawTelemetry>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Telemetry {
        let raw = t.get_ref();
        let ep = &raw.otlp_endpoint;
        match reqwest::Url::parse(ep.get_ref()) {
            Ok(u) if !matches!(u.scheme(), "http" | "https") => self.at(
                ep,
                format!(
                    "telemetry.otlp_endpoint: scheme `{}` is not http or https",
                    u.scheme()
                ),
            ),
            // Credentials in the URL would end up in logs: `headers_env` is the place.
            Ok(u) if !u.username().is_empty() || u.password().is_some() => self.at(
                ep,
                "telemetry.otlp_endpoint: no credentials in the URL (use `headers_env`)",
            ),
            Ok(u) if u.host_str().is_none_or(str::is_empty) => {
                self.at(ep, "telemetry.otlp_endpoint: the URL has no host")
            }
            Ok(_) => {}
            Err(e) => self.at(ep, format!("telemetry.otlp_endpoint: {e}")),
        }
        let service_name = match &raw.service_name {
            Some(s) if s.get_ref().trim().is_empty() => {
                self.at(s, "telemetry.service_name: must not be empty");
                String::new()
            }
            Some(s) => s.get_ref().clone(),
            None => "babelgate".to_string(),
        };
        let mut headers = Vec::new();
        for (name, var) in &raw.headers_env {
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                self.at(
                    var,
                    format!("telemetry.headers_env: `{name}` is not a header name"),
                );
                continue;
            }
            match env(var.get_ref()) {
                Some(v) if !v.is_empty() && http::HeaderValue::from_str(&v).is_ok() => {
                    headers.push((name.to_ascii_lowercase(), v))
                }
                // The value is a secret: its variable is named, never it.
                _ => self.at(
                    var,
                    format!(
                        "telemetry.headers_env.{name}: environment variable `{}` is not set, empty or not a header value",
                        var.get_ref()
                    ),
                ),
            }
        }
        let sample_ratio = match &raw.sample_ratio {
            None => 1.0,
            Some(r) if (0.0..=1.0).contains(r.get_ref()) => *r.get_ref(),
            Some(r) => {
                self.at(r, "telemetry.sample_ratio: must be between 0 and 1");
                1.0
            }
        };
        Telemetry {
            otlp_endpoint: ep.get_ref().clone(),
            service_name,
            headers: Redacted(headers),
            sample_ratio,
            max_queue_spans: self.count(&raw.max_queue_spans, "telemetry.max_queue_spans", 2048),
            export_timeout: Duration::from_millis(raw.export_timeout_ms.unwrap_or(10_000).max(1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUE_EXAMPLE: &str = r#"
[server]
listen = "127.0.0.1:8080"

[[routes]]
path = "/api/chat"                      # where clients POST
client = "vercel"                       # ag-ui | hai | vercel | agkit
upstream = "http://127.0.0.1:9000/agent"
upstream_protocol = "ag-ui"             # ag-ui | hai | vercel | agkit
"#;

    #[test]
    fn the_documented_route_shape_works_as_written() {
        let c = Config::parse(ISSUE_EXAMPLE).unwrap();
        assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
        let r = c.route("/api/chat").unwrap();
        assert_eq!(
            (r.client, r.upstream_protocol),
            (Dialect::Vercel, Dialect::AgUi)
        );
        assert_eq!(r.max_body_bytes, DEFAULT_MAX_BODY_BYTES);
    }

    #[test]
    fn timeout_and_limit_keys_have_defaults_and_the_old_name_still_works() {
        let c = Config::parse(ISSUE_EXAMPLE).unwrap();
        assert_eq!(c.request_read_timeout, Duration::from_secs(10));
        assert_eq!(c.keepalive_timeout, Duration::from_secs(60));
        assert_eq!(c.max_connections, 10_000);
        let r = c.route("/api/chat").unwrap();
        assert_eq!(r.response_timeout, Duration::from_secs(60));
        assert_eq!((r.max_streams, &r.rate_limit), (0, &None));

        let src = "[server]\nheader_read_timeout_ms = 250\nkeepalive_timeout_ms = 40\nmax_connections = 3\n\
            [[routes]]\npath = \"/c\"\nclient = \"ag-ui\"\nupstream = \"http://127.0.0.1:1/\"\n\
            upstream_protocol = \"ag-ui\"\nresponse_timeout_ms = 70\nmax_streams = 2\n\
            [routes.rate_limit]\nrequests_per_s = 1.5\nconcurrent_streams = 4\n";
        let c = Config::parse(src).unwrap();
        assert_eq!(c.request_read_timeout, Duration::from_millis(250));
        assert_eq!(c.keepalive_timeout, Duration::from_millis(40));
        assert_eq!(c.max_connections, 3);
        let r = c.route("/c").unwrap();
        assert_eq!(r.response_timeout, Duration::from_millis(70));
        assert_eq!(r.max_streams, 2);
        assert_eq!(
            r.rate_limit,
            Some(RateLimit {
                requests_per_s: Some(1.5),
                burst: 2,
                concurrent_streams: Some(4)
            })
        );
        let both = src.replace("max_connections = 3", "request_read_timeout_ms = 90");
        assert_eq!(
            Config::parse(&both).unwrap().request_read_timeout,
            Duration::from_millis(90),
            "the new name wins over the old"
        );
        let bad = src.replace("requests_per_s = 1.5", "requests_per_s = -1.0");
        assert!(Config::parse(&bad).is_err());
    }

    #[test]
    fn client_stall_timeout_is_30_s_unless_set_and_0_turns_it_off() {
        let c = Config::parse(ISSUE_EXAMPLE).unwrap();
        let r = c.route("/api/chat").unwrap();
        assert_eq!(r.client_stall_timeout, Some(Duration::from_secs(30)));
        let with = |v: &str| {
            let src = format!("{ISSUE_EXAMPLE}client_stall_timeout_ms = {v}\n");
            Config::parse(&src)
                .unwrap()
                .route("/api/chat")
                .unwrap()
                .client_stall_timeout
        };
        assert_eq!(with("300"), Some(Duration::from_millis(300)));
        assert_eq!(with("0"), None);
        assert!(Config::parse(&format!("{ISSUE_EXAMPLE}client_stall_timeout_ms = -1\n")).is_err());
    }

    /// `agent_name`, `agent_description` and `[[routes.agent_skills]]`:
    /// read on a route whose client dialect describes the agent, refused
    /// (at their line and column) on one whose dialect does not.
    #[test]
    fn agent_keys_describe_the_route_where_the_client_dialect_reads_them() {
        let a2a = ISSUE_EXAMPLE.replace("client = \"vercel\"", "client = \"a2a\"");
        let src = format!(
            "{a2a}agent_name = \"Weather\"\nagent_description = \"Says it\"\n\
             [[routes.agent_skills]]\nid = \"w\"\nname = \"Weather\"\ntags = [\"t\"]\n"
        );
        let c = Config::parse(&src).unwrap();
        let agent = &c.route("/api/chat").unwrap().agent;
        assert_eq!(agent.name, "Weather");
        assert_eq!(agent.description, "Says it");
        assert_eq!(agent.skills.len(), 1);
        assert_eq!(agent.skills[0].tags, vec!["t".to_string()]);
        // The name defaults to the path.
        let plain = Config::parse(&a2a).unwrap();
        assert_eq!(plain.route("/api/chat").unwrap().agent.name, "/api/chat");

        let errs =
            Config::parse(&format!("{ISSUE_EXAMPLE}agent_name = \"Weather\"\n")).unwrap_err();
        assert_eq!((errs[0].line, errs[0].column), (10, 14), "{errs:?}");
        assert!(
            errs[0].message.contains("routes.agent_name"),
            "{}",
            errs[0].message
        );

        let twice = format!(
            "{a2a}[[routes.agent_skills]]\nid = \"w\"\nname = \"A\"\n[[routes.agent_skills]]\nid = \"w\"\nname = \"B\"\n"
        );
        let errs = Config::parse(&twice).unwrap_err();
        assert_eq!(errs[0].line, 13, "{errs:?}");
        assert!(
            errs[0].message.contains("listed twice"),
            "{}",
            errs[0].message
        );
        let unnamed = format!("{a2a}[[routes.agent_skills]]\nid = \"w\"\nname = \" \"\n");
        assert!(Config::parse(&unnamed).is_err());
        let unknown = format!("{a2a}[[routes.agent_skills]]\nid = \"w\"\nname = \"A\"\nicon = 1\n");
        let errs = Config::parse(&unknown).unwrap_err();
        assert!(errs[0].message.contains("icon"), "{}", errs[0].message);
    }

    #[test]
    fn drop_raw_is_off_unless_the_route_sets_it() {
        let c = Config::parse(ISSUE_EXAMPLE).unwrap();
        assert!(!c.route("/api/chat").unwrap().drop_raw);
        let src = format!("{ISSUE_EXAMPLE}drop_raw = true\n");
        assert!(
            Config::parse(&src)
                .unwrap()
                .route("/api/chat")
                .unwrap()
                .drop_raw
        );
    }

    #[test]
    fn unknown_keys_are_rejected_with_their_position() {
        let errs = Config::parse("[server]\nlisten = \"127.0.0.1:1\"\nlistn = 3\n").unwrap_err();
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].line, 3);
        assert!(errs[0].message.contains("listn"), "{}", errs[0].message);
    }

    #[test]
    fn every_bad_value_is_reported_with_its_line() {
        let src = r#"
[[routes]]
path = "api"
client = "grpc"
upstream = "ftp://x"
upstream_protocol = "ag-ui"
"#;
        let errs = Config::parse(src).unwrap_err();
        let lines: Vec<_> = errs.iter().map(|e| e.line).collect();
        assert_eq!(lines, [3, 4, 5], "{errs:?}");
        assert!(errs[1].message.contains("unknown dialect `grpc`"));
    }

    #[test]
    fn store_bounds_are_read_and_zero_is_refused_where_it_stands() {
        let route = "[[routes]]\npath = \"/a\"\nclient = \"ag-ui\"\nupstream = \"http://x\"\nupstream_protocol = \"ag-ui\"\n";
        let c = Config::parse(&format!(
            "{route}[store]\nbackend = \"memory\"\nmax_run_bytes = 1000\nmax_runs = 7\nmax_total_bytes = 5000\nmax_history_bytes = 300\nmax_total_history_bytes = 900\nmax_snapshot_bytes = 200\nmax_followers = 3\n"
        ))
        .unwrap();
        let s = &c.store;
        assert_eq!(
            (
                s.max_run_bytes,
                s.max_runs,
                s.max_total_bytes,
                s.max_history_bytes,
                s.max_total_history_bytes,
                s.max_snapshot_bytes,
                s.max_followers
            ),
            (1000, 7, 5000, 300, 900, 200, 3)
        );
        let errs = Config::parse(&format!(
            "{route}[store]\nbackend = \"memory\"\nmax_followers = 0\nmax_run_bytes = 0\n"
        ))
        .unwrap_err();
        let got: Vec<_> = errs.iter().map(|e| (e.line, e.message.as_str())).collect();
        assert_eq!(
            got,
            [
                (9, "store.max_run_bytes: must be at least 1"),
                (8, "store.max_followers: must be at least 1")
            ],
            "{errs:?}"
        );
    }

    #[test]
    fn redis_cluster_takes_a_list_of_seed_nodes_each_interpolated_and_checked_where_it_stands() {
        let route = "[[routes]]\npath = \"/a\"\nclient = \"ag-ui\"\nupstream = \"http://x\"\nupstream_protocol = \"ag-ui\"\n";
        let env = |k: &str| (k == "PW").then(|| "s3cret-77".to_string());
        let parse = |store: &str| {
            Config::parse_with(&format!("{route}[store]\n{store}"), Path::new("."), &env)
        };
        let c = parse(
            "backend = \"redis-cluster\"\nurls = [\"redis://:${PW}@10.0.0.1:7000\", \"rediss://10.0.0.2:7000\"]\n",
        )
        .unwrap();
        assert_eq!(
            c.store.backend,
            Backend::RedisCluster {
                urls: vec![
                    "redis://:s3cret-77@10.0.0.1:7000".into(),
                    "rediss://10.0.0.2:7000".into()
                ]
            }
        );
        // Debug output (logged config) names no URL, so no password.
        assert!(!format!("{:?}", c.store).contains("s3cret-77"));
        let errs = parse(
            "backend = \"redis-cluster\"\nurls = [\n  \"redis://a:1\",\n  \"http://b:2\",\n  \"redis://${NOPE}:3\",\n]\n",
        )
        .unwrap_err();
        let got: Vec<_> = errs.iter().map(|e| (e.line, e.message.as_str())).collect();
        assert_eq!(
            got,
            [
                (10, "store.urls[1]: expected redis://host:port"),
                (11, "store.urls[2]: environment variable `NOPE` is not set"),
            ],
            "{errs:?}"
        );
        let errs = parse("backend = \"redis-cluster\"\nurls = []\n").unwrap_err();
        assert_eq!(errs[0].message, "store.urls: give at least one seed node");
        let errs = parse("backend = \"redis-cluster\"\nurl = \"redis://a:1\"\n").unwrap_err();
        assert!(errs[0]
            .message
            .starts_with("store.url: the redis-cluster backend takes `urls`"));
        let errs = parse("backend = \"redis\"\nurl = \"redis://a:1\"\nurls = [\"redis://a:1\"]\n")
            .unwrap_err();
        assert_eq!(
            (errs[0].line, errs[0].message.as_str()),
            (9, "store.urls: only the redis-cluster backend takes urls")
        );
    }

    #[test]
    fn resume_is_on_by_default_and_can_be_turned_off_per_route() {
        let route = |path: &str, extra: &str| {
            format!("[[routes]]\npath = \"{path}\"\nclient = \"vercel\"\nupstream = \"http://x\"\nupstream_protocol = \"ag-ui\"\n{extra}")
        };
        let c = Config::parse(&format!(
            "{}{}{}",
            route("/default", ""),
            route(
                "/on",
                "resume = true\non_disconnect = \"keep\"\nretention_s = 9\n"
            ),
            route("/off", "resume = false\non_disconnect = \"cancel\"\n")
        ))
        .unwrap();
        let r = |p| c.route(p).unwrap();
        assert!(r("/default").resume && r("/on").resume && !r("/off").resume);
        assert_eq!(r("/on").retention, Duration::from_secs(9));
        assert_eq!(r("/off").on_disconnect, OnDisconnect::Cancel);
    }

    #[test]
    fn a_route_without_resume_refuses_what_needs_its_run_log_where_it_stands() {
        let base = "[[routes]]\npath = \"/a\"\nclient = \"ag-ui\"\nupstream = \"http://x\"\nupstream_protocol = \"ag-ui\"\n";
        let errs = Config::parse(&format!(
            "{base}resume = false\non_disconnect = \"keep\"\nretention_s = 60\n"
        ))
        .unwrap_err();
        let got: Vec<_> = errs
            .iter()
            .map(|e| (e.line, e.column, e.message.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (7, 17, "routes.on_disconnect: `keep` runs on for its client to resume, but this route has `resume = false` (line 6) and keeps no run log"),
                (8, 15, "routes.retention_s: this route has `resume = false` (line 6) and keeps no run log to retain"),
            ],
            "{errs:?}"
        );
        let errs = Config::parse(&format!("{base}resume = \"no\"\n")).unwrap_err();
        assert_eq!((errs.len(), errs[0].line), (1, 6), "{errs:?}");
        assert!(errs[0].message.contains("bool"), "{errs:?}");
    }

    #[test]
    fn the_shipped_gateway_toml_is_valid() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../gateway.toml");
        let c = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            c.demo_agent.is_some(),
            "the shipped file runs the demo agent"
        );
        for d in Dialect::ALL {
            assert!(
                c.routes.iter().any(|r| r.client == d),
                "a route for {d} clients"
            );
        }
    }
}
