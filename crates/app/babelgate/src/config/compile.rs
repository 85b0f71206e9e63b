//! The config compiler: the raw file turned into [`Config`], every error
//! collected with its line and column so that `babelgate check` prints them
//! all at once.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use babelgate_core::Dialect;
use toml::Spanned;

use super::error::*;
use super::raw::*;
use super::*;

pub(super) struct Collector<'a> {
    pub(super) src: &'a str,
    pub(super) errors: Vec<ConfigError>,
}

impl Collector<'_> {
    pub(super) fn at<T>(&mut self, spanned: &Spanned<T>, message: impl Into<String>) {
        let (line, column) = position(self.src, spanned.span().start);
        self.errors.push(ConfigError {
            line,
            column,
            message: clip_quoted(&message.into()),
        });
    }

    /// A positive count (bytes, streams), or `default` when absent.
    pub(super) fn count(&mut self, v: &Option<Spanned<u64>>, key: &str, default: usize) -> usize {
        match v {
            None => default,
            Some(n) if *n.get_ref() == 0 => {
                self.at(n, format!("{key}: must be at least 1"));
                default
            }
            Some(n) => usize::try_from(*n.get_ref()).unwrap_or(usize::MAX),
        }
    }

    pub(super) fn dialect(&mut self, v: &Spanned<String>, key: &str) -> Option<Dialect> {
        match v.get_ref().parse::<Dialect>() {
            Ok(d) => Some(d),
            Err(e) => {
                self.at(v, format!("{key}: {e}"));
                None
            }
        }
    }

    /// A path from the file, relative to the file's directory.
    pub(super) fn file(&mut self, v: &Spanned<String>, base: &Path, key: &str) -> PathBuf {
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
    pub(super) fn upstream_ca(&mut self, v: &Spanned<String>, base: &Path) -> Option<UpstreamCa> {
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
    pub(super) fn interpolate(
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

    pub(super) fn inspector(
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

    pub(super) fn addr(&mut self, v: &Spanned<String>, key: &str) -> Option<SocketAddr> {
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

    /// `[store] backend` with its `url` or `urls`.
    fn backend(&mut self, st: &RawStore, env: &dyn Fn(&str) -> Option<String>) -> Backend {
        let name = st.backend.get_ref().as_str();
        if let (Some(u), false) = (&st.urls, name == "redis-cluster") {
            self.at(u, "store.urls: only the redis-cluster backend takes urls");
        }
        match (name, &st.url) {
            ("redis-cluster", Some(u)) => {
                self.at(
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
                        let Some(url) = self.interpolate(u, env, &key) else {
                            continue;
                        };
                        // No unix socket: a cluster's nodes name each
                        // other by host and port.
                        if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
                            self.at(u, format!("{key}: expected redis://host:port"));
                        }
                        urls.push(url);
                    }
                    Backend::RedisCluster { urls }
                }
                Some(list) => {
                    self.at(list, "store.urls: give at least one seed node");
                    Backend::Memory
                }
                None => {
                    self.at(
                    &st.backend,
                    "store.urls: the redis-cluster backend needs urls = [\"redis://host:port\", ...]",
                );
                    Backend::Memory
                }
            },
            ("memory", None) => Backend::Memory,
            ("memory", Some(u)) => {
                self.at(u, "store.url: only the redis backend takes a url");
                Backend::Memory
            }
            ("redis", Some(u)) => {
                let url = self.interpolate(u, env, "store.url").unwrap_or_default();
                if !(url.starts_with("redis://")
                    || url.starts_with("rediss://")
                    || url.starts_with("redis+unix://"))
                {
                    self.at(u, "store.url: expected redis://host:port");
                }
                Backend::Redis { url }
            }
            ("redis", None) => {
                self.at(&st.backend, "store.url: the redis backend needs a url");
                Backend::Memory
            }
            (other, _) => {
                self.at(
                    &st.backend,
                    format!("store.backend: `{other}` is not memory, redis or redis-cluster"),
                );
                Backend::Memory
            }
        }
    }

    /// `[server] log_format`: text or json.
    fn log_format(&mut self, server: &RawServer) -> LogFormat {
        match server
            .log_format
            .as_ref()
            .map(|v| (v, v.get_ref().as_str()))
        {
            None | Some((_, "text")) => LogFormat::Text,
            Some((_, "json")) => LogFormat::Json,
            Some((v, other)) => {
                self.at(
                    v,
                    format!("server.log_format: `{other}` is not text or json"),
                );
                LogFormat::Text
            }
        }
    }

    /// `[server] trusted_proxies`: addresses or networks.
    fn trusted_proxies(&mut self, server: &RawServer) -> Vec<ipnet::IpNet> {
        server
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
                    self.at(
                        p,
                        format!("server.trusted_proxies: `{v}` is not an address or a network like 10.0.0.0/8"),
                    );
                }
                net
            })
            .collect()
    }

    /// `[store]` compiled (the in-memory defaults when it is absent).
    pub(super) fn store(
        &mut self,
        store: Option<&RawStore>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Store {
        match store {
            None => Store::default(),
            Some(st) => {
                let backend = self.backend(st, env);
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
                    max_run_bytes: self.count(
                        &st.max_run_bytes,
                        "store.max_run_bytes",
                        d.max_run_bytes,
                    ),
                    max_runs: self.count(&st.max_runs, "store.max_runs", d.max_runs),
                    max_total_bytes: self.count(
                        &st.max_total_bytes,
                        "store.max_total_bytes",
                        d.max_total_bytes,
                    ),
                    max_history_bytes: self.count(
                        &st.max_history_bytes,
                        "store.max_history_bytes",
                        d.max_history_bytes,
                    ),
                    max_total_history_bytes: self.count(
                        &st.max_total_history_bytes,
                        "store.max_total_history_bytes",
                        d.max_total_history_bytes,
                    ),
                    max_snapshot_bytes: self.count(
                        &st.max_snapshot_bytes,
                        "store.max_snapshot_bytes",
                        d.max_snapshot_bytes,
                    ),
                    max_followers: self.count(
                        &st.max_followers,
                        "store.max_followers",
                        d.max_followers,
                    ),
                }
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
        let store = c.store(raw.store.as_ref(), env);
        let tls = raw.server.tls.as_ref().map(|t| Tls {
            cert: c.file(&t.cert, base, "server.tls.cert"),
            key: c.file(&t.key, base, "server.tls.key"),
        });
        let log_format = c.log_format(&raw.server);
        let trusted_proxies = c.trusted_proxies(&raw.server);
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
            if let Some(route) = c.route(r, &mut seen_paths, base, env) {
                routes.push(route);
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

impl Collector<'_> {
    pub(super) fn telemetry(
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
