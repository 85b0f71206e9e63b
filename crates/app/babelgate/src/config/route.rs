//! A `[[routes]]` table compiled into a [`Route`], part by part.

use std::path::Path;
use std::time::Duration;

use babelgate_core::request::Tool;
use babelgate_core::Dialect;
use toml::Spanned;

use super::compile::Collector;
use super::error::*;
use super::raw::*;
use super::*;

impl Collector<'_> {
    /// One `[[routes]]` table compiled; `None` with its errors recorded.
    pub(super) fn route<'r>(
        &mut self,
        r: &'r RawRoute,
        seen: &mut Vec<&'r str>,
        base: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<Route> {
        let path = r.path.get_ref();
        self.route_path(&r.path, seen);
        let client = self.dialect(&r.client, "routes.client");
        let upstream_protocol = self.dialect(&r.upstream_protocol, "routes.upstream_protocol");
        let upstream = self.upstream_url(&r.upstream);
        let upstream_headers = self.upstream_headers(r, env);
        let forward_headers = self.forward_headers(r);
        let auth = r.auth.as_ref().map(|a| self.auth(&r.path, a, base, env));
        let cors = r.cors.as_ref().map(|cors| self.cors(cors));
        let (on_disconnect, resume) = self.keeping(r);
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
        let rate_limit = r.rate_limit.as_ref().map(|rl| self.rate_limit(rl));
        let extension_frames = self.extension_frames(r, client);
        let agent = agent_about(self, r, path, client);
        let upstream_transport = self.upstream_transport(r, upstream_protocol);
        let upstream_ca = r.upstream_ca.as_ref().and_then(|v| {
            if upstream
                .as_ref()
                .is_some_and(|u| !matches!(u.scheme(), "https" | "wss"))
            {
                self.at(
                    v,
                    "routes.upstream_ca: only an https:// or wss:// upstream has a certificate to check",
                );
                return None;
            }
            self.upstream_ca(v, base)
        });
        if let (Some(client), Some(upstream), Some(upstream_protocol)) =
            (client, upstream, upstream_protocol)
        {
            return Some(Route {
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
        None
    }

    /// `path`: absolute, reachable, and one route's only.
    fn route_path<'r>(&mut self, v: &'r Spanned<String>, seen: &mut Vec<&'r str>) {
        let path = v.get_ref();
        if !path.starts_with('/') {
            self.at(v, format!("routes.path: `{path}` must start with `/`"));
        } else if let Some(why) = unreachable_path(path) {
            self.at(v, format!("routes.path: `{path}` {why}"));
        } else if seen.contains(&path.as_str()) {
            self.at(v, format!("routes.path: `{path}` is used by two routes"));
        }
        seen.push(path);
    }

    /// `on_disconnect` and `resume`: what only a run log gives cannot be
    /// promised without one.
    fn keeping(&mut self, r: &RawRoute) -> (OnDisconnect, bool) {
        let on_disconnect = match r.on_disconnect.as_ref().map(|v| (v, v.get_ref().as_str())) {
            None | Some((_, "cancel")) => OnDisconnect::Cancel,
            Some((_, "keep")) => OnDisconnect::Keep,
            Some((v, other)) => {
                self.at(
                    v,
                    format!("routes.on_disconnect: `{other}` is not cancel or keep"),
                );
                OnDisconnect::Cancel
            }
        };
        let resume = r.resume.as_ref().is_none_or(|v| *v.get_ref());
        if let Some(off) = r.resume.as_ref().filter(|_| !resume) {
            let (line, _) = position(self.src, off.span().start);
            if let (Some(v), OnDisconnect::Keep) = (&r.on_disconnect, on_disconnect) {
                self.at(
                    v,
                    format!("routes.on_disconnect: `keep` runs on for its client to resume, but this route has `resume = false` (line {line}) and keeps no run log"),
                );
            }
            if let Some(v) = &r.retention_s {
                self.at(
                    v,
                    format!("routes.retention_s: this route has `resume = false` (line {line}) and keeps no run log to retain"),
                );
            }
        }
        (on_disconnect, resume)
    }

    /// `upstream`: an http(s) or ws(s) URL.
    fn upstream_url(&mut self, v: &Spanned<String>) -> Option<reqwest::Url> {
        match reqwest::Url::parse(v.get_ref()) {
            Ok(u) if matches!(u.scheme(), "http" | "https" | "ws" | "wss") => Some(u),
            Ok(u) => {
                self.at(
                    v,
                    format!(
                        "routes.upstream: scheme `{}` is not http, https, ws or wss",
                        u.scheme()
                    ),
                );
                None
            }
            Err(e) => {
                self.at(v, format!("routes.upstream: {e}"));
                None
            }
        }
    }

    /// `upstream_headers`, their values read from the environment where
    /// they name it.
    fn upstream_headers(
        &mut self,
        r: &RawRoute,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Vec<(String, String)> {
        r.upstream_headers
            .iter()
            .filter_map(|(k, v)| {
                if http::HeaderName::from_bytes(k.as_bytes()).is_err() {
                    self.at(
                        v,
                        format!("routes.upstream_headers: `{k}` is not a header name"),
                    );
                    return None;
                }
                let value = self.interpolate(v, env, "routes.upstream_headers")?;
                if http::HeaderValue::from_str(&value).is_err() {
                    // The value may hold a secret: say where, not what.
                    self.at(
                        v,
                        format!("routes.upstream_headers.{k}: not a valid header value"),
                    );
                    return None;
                }
                Some((k.to_ascii_lowercase(), value))
            })
            .collect()
    }

    /// `forward_headers`: header names, none hop-by-hop or the gateway's own.
    fn forward_headers(&mut self, r: &RawRoute) -> Vec<String> {
        r
            .forward_headers
            .iter()
            .filter_map(|h| {
                let name = h.get_ref().to_ascii_lowercase();
                if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                    self.at(h, format!("routes.forward_headers: `{name}` is not a header name"));
                    None
                } else if NEVER_FORWARDED.contains(&name.as_str()) {
                    self.at(h, format!("routes.forward_headers: `{name}` is hop-by-hop or set by the gateway; it is never forwarded"));
                    None
                } else {
                    Some(name)
                }
            })
            .collect()
    }

    /// `[routes.cors]`.
    fn cors(&mut self, cors: &RawCors) -> Cors {
        Cors {
            allow_origins: cors
                .allow_origins
                .iter()
                .map(|o| {
                    let v = o.get_ref();
                    if v != "*" && http::HeaderValue::from_str(v).is_err() {
                        self.at(
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
                        self.at(v, "routes.cors.allow_credentials: not with `*` in allow_origins (list the origins)");
                    }
                    true
                }
                _ => false,
            },
        }
    }

    /// `[routes.rate_limit]`.
    fn rate_limit(&mut self, rl: &RawRateLimit) -> RateLimit {
        let rate = rl.requests_per_s.as_ref().and_then(|v| {
            let x = *v.get_ref();
            if x.is_finite() && x > 0.0 {
                Some(x)
            } else {
                self.at(
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
    }

    /// `extension_frames`: only for a client dialect that has them.
    fn extension_frames(&mut self, r: &RawRoute, client: Option<Dialect>) -> bool {
        match &r.extension_frames {
            Some(v)
                if *v.get_ref()
                    && client.is_some_and(|d| !crate::registry::policy(d).extension_frames) =>
            {
                self.at(
                    v,
                    "routes.extension_frames: only AG-Kit clients have extension frames (the client dialect has none)",
                );
                false
            }
            Some(v) => *v.get_ref(),
            None => false,
        }
    }

    /// `upstream_transport`: binary only for an upstream dialect that has it.
    fn upstream_transport(
        &mut self,
        r: &RawRoute,
        upstream_protocol: Option<Dialect>,
    ) -> UpstreamTransport {
        match r.upstream_transport.as_ref() {
            None => UpstreamTransport::Sse,
            Some(v) => {
                let t = match v.get_ref().as_str() {
                    "sse" => Some(UpstreamTransport::Sse),
                    "proto" => Some(UpstreamTransport::Proto),
                    "auto" => Some(UpstreamTransport::Auto),
                    other => {
                        self.at(
                            v,
                            format!(
                                "routes.upstream_transport: `{other}` is not sse, proto or auto"
                            ),
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
                        self.at(
                            v,
                            "routes.upstream_transport: the upstream dialect has no binary transport",
                        );
                        UpstreamTransport::Sse
                    }
                    t => t.unwrap_or_default(),
                }
            }
        }
    }
}

/// A route's `agent_*` keys: only for a client dialect that has a
/// description of the agent to serve (`RequestTranslator::describe`); the
/// name defaults to the route's path.
pub(super) fn agent_about(
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
