//! The protocol inspector (`[inspector]`): a page on the main listener that
//! lists live and recent runs and shows, for one, the upstream's events and
//! the client's side by side, aligned by the core events between them.
//!
//! Memory is bounded twice: a ring of `max_runs` captures (the oldest ended
//! one leaves first) and `max_run_bytes` per capture (past it the capture
//! stops growing and says so). `sample` captures a share of runs. With a
//! shared board (the Redis store), every instance publishes its captures
//! and lists everyone's.

pub mod align;
pub mod board;
pub mod capture;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use babelgate_core::IdGen;
use bytes::Bytes;
use http::{header, HeaderValue, Method, Response, StatusCode};
use serde_json::json;

pub use board::Board;
pub use capture::{Capture, CaptureHandle, Exchange, ReplaySetup, Requests, Side, Timed};

use crate::access;
use crate::config;
use crate::error::{full, json_response, Body, GatewayError};

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// What the page may load: only its own files.
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'none'";

/// How often live captures are published to a shared board.
pub const PUBLISH_EVERY: Duration = Duration::from_secs(1);

/// The inspector of one gateway.
pub struct Inspector {
    cfg: config::Inspector,
    instance: String,
    runs: Mutex<VecDeque<CaptureHandle>>,
    /// Runs offered so far, for sampling.
    offered: AtomicU64,
    ids: Mutex<IdGen>,
    board: Option<Arc<dyn Board>>,
}

impl Inspector {
    pub fn new(cfg: config::Inspector, instance: &str, board: Option<Arc<dyn Board>>) -> Self {
        Inspector {
            cfg,
            instance: instance.to_string(),
            runs: Mutex::new(VecDeque::new()),
            offered: AtomicU64::new(0),
            ids: Mutex::new(IdGen::default()),
            board,
        }
    }

    pub fn path(&self) -> &str {
        &self.cfg.path
    }

    /// Whether `path` is the inspector's.
    pub fn owns(&self, path: &str) -> bool {
        path == self.cfg.path
            || path
                .strip_prefix(self.cfg.path.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
    }

    /// Starts capturing a run, if sampling picks it.
    pub fn begin(&self, route: &str, request: Requests, started: Instant) -> Option<CaptureHandle> {
        if !self.sampled() {
            return None;
        }
        let id = {
            let mut ids = lock(&self.ids);
            ids.next("r")
        };
        let handle = CaptureHandle(Arc::new(Mutex::new(Capture::new(
            id,
            route,
            &self.instance,
            request,
            self.cfg.max_run_bytes,
            started,
        ))));
        let mut runs = lock(&self.runs);
        runs.push_back(handle.clone());
        while runs.len() > self.cfg.max_runs {
            // The oldest ended run goes; if every run is live, the oldest.
            let ended = runs
                .iter()
                .position(|h| lock(&h.0).summary.status != "streaming")
                .unwrap_or(0);
            runs.remove(ended);
        }
        Some(handle)
    }

    /// Deterministic sampling: of every `n` runs offered, `n * sample` are
    /// captured, spread evenly.
    fn sampled(&self) -> bool {
        let s = self.cfg.sample;
        if s >= 1.0 {
            return true;
        }
        if s <= 0.0 {
            return false;
        }
        let n = self.offered.fetch_add(1, Ordering::Relaxed) as f64;
        ((n + 1.0) * s).floor() > (n * s).floor()
    }

    fn local(&self) -> Vec<CaptureHandle> {
        lock(&self.runs).iter().cloned().collect()
    }

    fn find_local(&self, id: &str) -> Option<Capture> {
        self.local()
            .into_iter()
            .map(|h| h.snapshot())
            .find(|c| c.summary.id == id)
    }

    /// Publishes this instance's captures to the shared board: the live ones
    /// and those that ended since the last call.
    pub async fn publish(&self, published: &mut std::collections::HashMap<String, u64>) {
        let Some(board) = &self.board else { return };
        let mut seen = std::collections::HashSet::new();
        for h in self.local() {
            let c = h.snapshot();
            seen.insert(c.summary.id.clone());
            // A version that moves whenever the capture does.
            let version = c.upstream.len() as u64
                + c.client.len() as u64
                + c.summary.events_out
                + u64::from(c.summary.status != "streaming") * (1 << 40);
            if published.get(&c.summary.id) == Some(&version) {
                continue;
            }
            match board.put(&c, self.cfg.max_runs).await {
                Ok(()) => {
                    published.insert(c.summary.id.clone(), version);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "inspector: could not publish a capture");
                    break;
                }
            }
        }
        published.retain(|id, _| seen.contains(id));
    }

    async fn list(&self, query: Option<&str>) -> serde_json::Value {
        let filter = RunFilter::of(query);
        let mut runs: Vec<capture::Summary> =
            self.local().iter().map(|h| h.snapshot().summary).collect();
        if let Some(board) = &self.board {
            match board.list(self.cfg.max_runs).await {
                Ok(theirs) => {
                    for s in theirs {
                        if !runs.iter().any(|r| r.id == s.id) {
                            runs.push(s);
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "inspector: the shared board does not answer"),
            }
        }
        runs.retain(|r| filter.keeps(r));
        runs.sort_by(|a, b| b.started_ms.cmp(&a.started_ms).then(b.id.cmp(&a.id)));
        runs.truncate(self.cfg.max_runs);
        json!({
            "runs": runs,
            "instance": self.instance,
            "capturing": {"sample": self.cfg.sample, "max_runs": self.cfg.max_runs, "max_run_bytes": self.cfg.max_run_bytes},
        })
    }

    async fn find(&self, id: &str) -> Result<Capture, GatewayError> {
        if let Some(c) = self.find_local(id) {
            return Ok(c);
        }
        if let Some(board) = &self.board {
            match board.get(id).await {
                Ok(Some(c)) => return Ok(c),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "inspector: the shared board does not answer");
                    return Err(GatewayError::store(&e));
                }
            }
        }
        Err(GatewayError::client(
            StatusCode::NOT_FOUND,
            "no_capture",
            format!("no captured run `{id}` (it may have left the ring)"),
        ))
    }

    /// Answers a request under the inspector's path.
    pub async fn serve(
        &self,
        method: &Method,
        path: &str,
        query: Option<&str>,
        headers: &http::HeaderMap,
        authority: Option<&str>,
        peer: SocketAddr,
    ) -> Result<Response<Body>, GatewayError> {
        match &self.cfg.auth {
            Some(auth) => {
                access::authorize_with(Some(auth), headers).await?;
            }
            // Trusted for being on this machine: the peer and the name it
            // asked for (a rebound page asks for its own).
            None => crate::host::loopback_only(
                peer,
                headers,
                authority,
                &self.cfg.allowed_hosts,
                "without `[inspector.auth]` the inspector",
            )?,
        }
        if method != Method::GET && method != Method::HEAD {
            return Err(GatewayError::client(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "the inspector takes GET",
            ));
        }
        let rest = path.get(self.cfg.path.len()..).unwrap_or("");
        match rest {
            "" => {
                let mut resp = Response::new(full(Bytes::new()));
                *resp.status_mut() = StatusCode::PERMANENT_REDIRECT;
                if let Ok(v) = HeaderValue::from_str(&format!("{}/", self.cfg.path)) {
                    resp.headers_mut().insert(header::LOCATION, v);
                }
                Ok(resp)
            }
            "/" | "/index.html" => Ok(asset(INDEX_HTML, "text/html; charset=utf-8")),
            "/assets/app.js" => Ok(asset(APP_JS, "text/javascript; charset=utf-8")),
            "/assets/app.css" => Ok(asset(APP_CSS, "text/css; charset=utf-8")),
            "/api/runs" => Ok(no_store(json_response(
                StatusCode::OK,
                &self.list(query).await,
            ))),
            _ => {
                let Some(api) = rest.strip_prefix("/api/runs/") else {
                    return Err(not_found(path));
                };
                let (id, what) = match api.split_once('/') {
                    Some((id, what)) => (id, Some(what)),
                    None => (api, None),
                };
                let c = self.find(id).await?;
                match what {
                    None => {
                        // A replay: CPU work, off the runtime's threads.
                        let detail = tokio::task::spawn_blocking(move || {
                            std::panic::catch_unwind(|| {
                                serde_json::to_value(align::detail(&c)).unwrap_or_default()
                            })
                        })
                        .await;
                        match detail {
                            Ok(Ok(v)) => Ok(no_store(json_response(StatusCode::OK, &v))),
                            _ => Err(GatewayError::internal("the capture could not be replayed")),
                        }
                    }
                    Some(what) => download(&c, what).ok_or_else(|| not_found(path)),
                }
            }
        }
    }
}

/// `?conversation=` and `?run=` of the run list: each keeps the runs whose
/// conversation (or client run id) contains it; both must hold.
#[derive(Default)]
struct RunFilter {
    conversation: Option<String>,
    run: Option<String>,
}

impl RunFilter {
    fn of(query: Option<&str>) -> RunFilter {
        let mut f = RunFilter::default();
        for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            let v = (!v.is_empty()).then(|| v.into_owned());
            match k.as_ref() {
                "conversation" => f.conversation = v,
                "run" => f.run = v,
                _ => {}
            }
        }
        f
    }

    fn keeps(&self, s: &capture::Summary) -> bool {
        let has = |want: &Option<String>, got: &Option<String>| match want {
            None => true,
            Some(w) => got.as_deref().is_some_and(|g| g.contains(w.as_str())),
        };
        has(&self.conversation, &s.conversation) && has(&self.run, &s.client_run)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

fn not_found(path: &str) -> GatewayError {
    GatewayError::client(
        StatusCode::NOT_FOUND,
        "no_route",
        format!("nothing at {path}"),
    )
}

fn asset(body: &'static str, ctype: &'static str) -> Response<Body> {
    let mut resp = Response::new(full(body));
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    no_store(resp)
}

/// Captures change and may hold what nobody should find in a cache.
fn no_store(mut resp: Response<Body>) -> Response<Body> {
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// `upstream`, `client` or `setup` of a capture, as a file.
fn download(c: &Capture, what: &str) -> Option<Response<Body>> {
    let (up, client, setup) = align::file_names(c);
    let (name, body, ctype) = match what {
        "upstream" => (up, c.upstream.clone(), "application/octet-stream"),
        "client" => (client, c.client.clone(), "application/octet-stream"),
        "setup" => (
            setup,
            serde_json::to_vec_pretty(c.replay.as_ref()?).ok()?,
            "application/json",
        ),
        _ => return None,
    };
    let mut resp = Response::new(full(body));
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    // Ids are made by the gateway (`r-` and hex): nothing to quote.
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Some(no_store(resp))
}
