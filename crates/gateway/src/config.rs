//! gateway.toml: parsed raw (unknown keys rejected), then compiled into the
//! runtime [`Config`], collecting every error with its line and column so that
//! `babelgate check` can print them all at once.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use babelgate_core::request::Tool;
use babelgate_core::Dialect;
use serde::Deserialize;
use toml::Spanned;

pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

// ---- raw, as written ------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    server: RawServer,
    demo_agent: Option<RawDemo>,
    #[serde(default)]
    routes: Vec<RawRoute>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    listen: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDemo {
    listen: Spanned<String>,
    protocol: Spanned<String>,
    #[serde(default)]
    delay_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    path: Spanned<String>,
    client: Spanned<String>,
    upstream: Spanned<String>,
    upstream_protocol: Spanned<String>,
    #[serde(default)]
    client_tools: Vec<RawTool>,
    #[serde(default)]
    upstream_headers: BTreeMap<String, String>,
    max_body_bytes: Option<usize>,
    connect_timeout_ms: Option<u64>,
    idle_timeout_ms: Option<u64>,
    heartbeat_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    name: String,
    #[serde(default)]
    description: String,
    parameters: Option<toml::Value>,
}

// ---- compiled --------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub demo_agent: Option<DemoAgent>,
    pub routes: Vec<Route>,
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
    pub upstream_headers: Vec<(String, String)>,
    pub max_body_bytes: usize,
    pub connect_timeout: Duration,
    /// No upstream bytes for this long ends the stream with an error.
    pub idle_timeout: Duration,
    /// An SSE comment is sent after this long without output, so that load
    /// balancers keep the stream open. `None` turns it off (`heartbeat_ms = 0`).
    pub heartbeat: Option<Duration>,
}

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

fn position(src: &str, offset: usize) -> (usize, usize) {
    let before = &src[..offset.min(src.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map_or(before.len(), |i| before.len() - i - 1)
        + 1;
    (line, column)
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
            message: message.into(),
        });
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
        Config::parse(&src).map_err(|errors| ConfigErrors { file, errors })
    }

    pub fn parse(src: &str) -> Result<Config, Vec<ConfigError>> {
        let raw: RawConfig = toml::from_str(src).map_err(|e| {
            let (line, column) = e.span().map_or((0, 0), |s| position(src, s.start));
            vec![ConfigError {
                line,
                column,
                message: e.message().to_string(),
            }]
        })?;
        let mut c = Collector {
            src,
            errors: Vec::new(),
        };
        let listen = match &raw.server.listen {
            Some(l) => c.addr(l, "server.listen"),
            None => Some(SocketAddr::from(([127, 0, 0, 1], 8080))),
        };
        let demo_agent = raw.demo_agent.as_ref().and_then(|d| {
            let listen = c.addr(&d.listen, "demo_agent.listen");
            let protocol = c.dialect(&d.protocol, "demo_agent.protocol");
            Some(DemoAgent {
                listen: listen?,
                protocol: protocol?,
                delay: Duration::from_millis(d.delay_ms.unwrap_or(15)),
            })
        });
        let mut routes = Vec::new();
        let mut seen_paths: Vec<&str> = Vec::new();
        for r in &raw.routes {
            let path = r.path.get_ref();
            if !path.starts_with('/') {
                c.at(
                    &r.path,
                    format!("routes.path: `{path}` must start with `/`"),
                );
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
                Ok(u) if u.scheme() == "http" || u.scheme() == "https" => Some(u),
                Ok(u) => {
                    c.at(
                        &r.upstream,
                        format!(
                            "routes.upstream: scheme `{}` is not http or https",
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
            if let (Some(client), Some(upstream), Some(upstream_protocol)) =
                (client, upstream, upstream_protocol)
            {
                routes.push(Route {
                    path: path.clone(),
                    client,
                    upstream,
                    upstream_protocol,
                    client_tools,
                    upstream_headers: r
                        .upstream_headers
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                    max_body_bytes: r.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES),
                    connect_timeout: Duration::from_millis(r.connect_timeout_ms.unwrap_or(5_000)),
                    idle_timeout: Duration::from_millis(r.idle_timeout_ms.unwrap_or(300_000)),
                    heartbeat: match r.heartbeat_ms.unwrap_or(15_000) {
                        0 => None,
                        ms => Some(Duration::from_millis(ms)),
                    },
                });
            }
        }
        if !c.errors.is_empty() {
            return Err(c.errors);
        }
        Ok(Config {
            listen: listen.expect("checked"),
            demo_agent,
            routes,
        })
    }

    pub fn route(&self, path: &str) -> Option<&Route> {
        self.routes.iter().find(|r| r.path == path)
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
