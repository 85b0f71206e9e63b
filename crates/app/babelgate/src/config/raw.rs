//! `gateway.toml` as written: every table and key, unknown keys refused,
//! each value with its place in the file (for errors with line:col); the
//! JSON schema of the file is derived from these.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    #[serde(default)]
    pub(super) server: RawServer,
    pub(super) store: Option<RawStore>,
    pub(super) demo_agent: Option<RawDemo>,
    pub(super) inspector: Option<RawInspector>,
    #[schemars(with = "Option<RawTelemetry>")]
    pub(super) telemetry: Option<Spanned<RawTelemetry>>,
    #[serde(default)]
    pub(super) routes: Vec<RawRoute>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawInspector {
    #[schemars(with = "Option<String>")]
    pub(super) path: Option<Spanned<String>>,
    pub(super) auth: Option<RawAuth>,
    #[schemars(with = "Option<u64>")]
    pub(super) max_runs: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    pub(super) max_run_bytes: Option<Spanned<u64>>,
    #[schemars(with = "Option<f64>")]
    pub(super) sample: Option<Spanned<f64>>,
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub(super) allowed_hosts: Vec<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    #[schemars(with = "Option<String>")]
    pub(super) listen: Option<Spanned<String>>,
    pub(super) tls: Option<RawTls>,
    /// The old name of `request_read_timeout_ms`, still accepted.
    #[schemars(extend("deprecated" = true))]
    pub(super) header_read_timeout_ms: Option<u64>,
    pub(super) request_read_timeout_ms: Option<u64>,
    pub(super) keepalive_timeout_ms: Option<u64>,
    pub(super) max_connections: Option<usize>,
    pub(super) max_inflight_bytes: Option<usize>,
    pub(super) shutdown_grace_ms: Option<u64>,
    #[schemars(with = "Option<String>")]
    pub(super) log_format: Option<Spanned<String>>,
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub(super) trusted_proxies: Vec<Spanned<String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStore {
    #[schemars(with = "String")]
    pub(super) backend: Spanned<String>,
    #[schemars(with = "Option<String>")]
    pub(super) url: Option<Spanned<String>>,
    #[schemars(with = "Option<Vec<String>>")]
    pub(super) urls: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) lease_ms: Option<u64>,
    pub(super) op_timeout_ms: Option<u64>,
    pub(super) history_ttl_s: Option<u64>,
    #[schemars(with = "Option<u64>")]
    pub(super) max_run_bytes: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    pub(super) max_runs: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    pub(super) max_total_bytes: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    pub(super) max_history_bytes: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    pub(super) max_total_history_bytes: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    pub(super) max_snapshot_bytes: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    pub(super) max_followers: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTls {
    #[schemars(with = "String")]
    pub(super) cert: Spanned<String>,
    #[schemars(with = "String")]
    pub(super) key: Spanned<String>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAuth {
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub(super) bearer_env: Vec<Spanned<String>>,
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub(super) bearer_files: Vec<Spanned<String>>,
    pub(super) jwt: Option<RawJwt>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawJwt {
    #[schemars(with = "Option<String>")]
    pub(super) issuer: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub(super) audience: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub(super) hs256_secret_env: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub(super) jwks_file: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub(super) jwks_url: Option<Spanned<String>>,
    pub(super) leeway_s: Option<u64>,
    #[schemars(with = "Option<Vec<String>>")]
    pub(super) algorithms: Option<Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCors {
    #[schemars(with = "Vec<String>")]
    pub(super) allow_origins: Vec<Spanned<String>>,
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub(super) allow_headers: Vec<Spanned<String>>,
    pub(super) max_age_s: Option<u64>,
    #[schemars(with = "Option<bool>")]
    pub(super) allow_credentials: Option<Spanned<bool>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDemo {
    #[schemars(with = "String")]
    pub(super) listen: Spanned<String>,
    #[schemars(with = "String")]
    pub(super) protocol: Spanned<String>,
    pub(super) delay_ms: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoute {
    #[schemars(with = "String")]
    pub(super) path: Spanned<String>,
    #[schemars(with = "String")]
    pub(super) client: Spanned<String>,
    #[schemars(with = "String")]
    pub(super) upstream: Spanned<String>,
    #[schemars(with = "String")]
    pub(super) upstream_protocol: Spanned<String>,
    #[serde(default)]
    pub(super) client_tools: Vec<RawTool>,
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    pub(super) upstream_headers: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub(super) forward_headers: Vec<Spanned<String>>,
    // Not `Spanned`: toml cannot span a table holding a sub-table
    // (`[routes.auth.jwt]`); its table-level errors point at the route's `path`.
    pub(super) auth: Option<RawAuth>,
    pub(super) cors: Option<RawCors>,
    pub(super) max_body_bytes: Option<usize>,
    #[schemars(with = "Option<String>")]
    pub(super) on_disconnect: Option<Spanned<String>>,
    #[schemars(with = "Option<u64>")]
    pub(super) retention_s: Option<Spanned<u64>>,
    #[schemars(with = "Option<bool>")]
    pub(super) resume: Option<Spanned<bool>>,
    pub(super) connect_timeout_ms: Option<u64>,
    pub(super) idle_timeout_ms: Option<u64>,
    pub(super) heartbeat_ms: Option<u64>,
    pub(super) client_stall_timeout_ms: Option<u64>,
    pub(super) response_timeout_ms: Option<u64>,
    pub(super) max_streams: Option<usize>,
    pub(super) rate_limit: Option<RawRateLimit>,
    #[schemars(with = "Option<bool>")]
    pub(super) extension_frames: Option<Spanned<bool>>,
    pub(super) drop_raw: Option<bool>,
    #[schemars(with = "Option<String>")]
    pub(super) upstream_transport: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub(super) upstream_ca: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub(super) agent_name: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub(super) agent_description: Option<Spanned<String>>,
    #[serde(default)]
    #[schemars(with = "Vec<RawSkill>")]
    pub(super) agent_skills: Vec<Spanned<RawSkill>>,
}

/// `[[routes.agent_skills]]`: one thing the agent does, for the clients
/// that read a description of it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSkill {
    pub(super) id: String,
    pub(super) name: String,
    #[serde(default)]
    pub(super) description: String,
    #[serde(default)]
    pub(super) tags: Vec<String>,
    #[serde(default)]
    pub(super) examples: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRateLimit {
    #[schemars(with = "Option<f64>")]
    pub(super) requests_per_s: Option<Spanned<f64>>,
    pub(super) burst: Option<u32>,
    pub(super) concurrent_streams: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTool {
    pub(super) name: String,
    #[serde(default)]
    pub(super) description: String,
    #[schemars(with = "Option<serde_json::Value>")]
    pub(super) parameters: Option<toml::Value>,
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

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTelemetry {
    #[schemars(with = "String")]
    pub(super) otlp_endpoint: Spanned<String>,
    #[schemars(with = "Option<String>")]
    pub(super) service_name: Option<Spanned<String>>,
    /// Header name -> the environment variable holding its value.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    pub(super) headers_env: BTreeMap<String, Spanned<String>>,
    #[schemars(with = "Option<f64>")]
    pub(super) sample_ratio: Option<Spanned<f64>>,
    #[schemars(with = "Option<u64>")]
    pub(super) max_queue_spans: Option<Spanned<u64>>,
    pub(super) export_timeout_ms: Option<u64>,
}
