//! OpenTelemetry traces (`[telemetry]`): a SERVER span per proxied request
//! (ended when its stream ends), a CLIENT span per upstream call, exported
//! over OTLP/HTTP (protobuf) by a batch processor whose queue is bounded: a
//! dead collector costs dropped spans, never a blocked request or memory.
//!
//! W3C trace context: a valid `traceparent` (and `tracestate`) from the
//! client parents the request span; the upstream gets the same trace id with
//! the CLIENT span's id. Without `[telemetry]` the gateway takes no part in
//! the trace: a valid `traceparent`/`tracestate` is passed upstream as it
//! came (what a proxy that records nothing may do), an invalid one dropped.
//!
//! Attributes never hold a header value, a key or a body: only the route,
//! dialects, transports, ids the client chose (thread, run), counts, codes.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{HeaderMap, HeaderValue};
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId,
    TraceState, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracer, SdkTracerProvider, SpanData,
    SpanExporter,
};
use opentelemetry_sdk::Resource;

use crate::config::{self, Route};
use crate::transport::Transport;

/// The exporting side: built once from `[telemetry]`.
pub struct Telemetry {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Telemetry")
    }
}

impl Telemetry {
    /// The OTLP/HTTP exporter and its batch processor (a thread of its own,
    /// so a slow collector never holds a request's task).
    pub fn start(cfg: &config::Telemetry) -> Result<Telemetry, String> {
        let headers: HashMap<String, String> = cfg.headers.0.iter().cloned().collect();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(cfg.otlp_endpoint.clone())
            .with_timeout(cfg.export_timeout)
            .with_headers(headers)
            .build()
            .map_err(|e| format!("telemetry: the OTLP exporter: {e}"))?;
        let exporter = Logged::new(exporter, &cfg.otlp_endpoint);
        Ok(Telemetry::with_processor(
            processor(exporter, cfg.max_queue_spans),
            &cfg.service_name,
            cfg.sample_ratio,
        ))
    }

    fn with_processor(bsp: BatchSpanProcessor, service: &str, ratio: f64) -> Telemetry {
        let provider = SdkTracerProvider::builder()
            .with_span_processor(bsp)
            // A client's sampled flag is honoured; new traces by ratio.
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                ratio,
            ))))
            .with_resource(
                Resource::builder()
                    .with_service_name(service.to_string())
                    .build(),
            )
            .build();
        let tracer = provider.tracer("babelgate");
        Telemetry { provider, tracer }
    }

    /// Exports what is queued and stops (blocking: run it off the runtime).
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown_with_timeout(Duration::from_secs(5)) {
            tracing::warn!(error = %e, "telemetry: spans not exported at shutdown");
        }
    }
}

/// The batch processor: at most `queue` finished spans wait; past that new
/// ones are dropped (`on_end` never waits).
fn processor<E: SpanExporter + 'static>(exporter: E, queue: usize) -> BatchSpanProcessor {
    BatchSpanProcessor::builder(exporter)
        .with_batch_config(
            BatchConfigBuilder::default()
                .with_max_queue_size(queue)
                .build(),
        )
        .build()
}

/// The exporter, telling the log when exports start failing and when they
/// work again (once each, not per batch), never a client.
#[derive(Debug)]
struct Logged<E> {
    inner: E,
    /// The collector's URL without credentials or query, for the log.
    endpoint: String,
    failing: Arc<AtomicBool>,
}

impl<E> Logged<E> {
    fn new(inner: E, endpoint: &str) -> Self {
        let endpoint = reqwest::Url::parse(endpoint)
            .map(|u| crate::server::loggable_url(&u))
            .unwrap_or_default();
        Logged {
            inner,
            endpoint,
            failing: Arc::default(),
        }
    }
}

impl<E: SpanExporter> SpanExporter for Logged<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        let r = self.inner.export(batch).await;
        match &r {
            Err(e) if !self.failing.swap(true, Ordering::Relaxed) => tracing::warn!(
                collector = %self.endpoint, error = %e, spans = n,
                "telemetry: exporting spans failed (not logged again until an export succeeds)"
            ),
            Ok(()) if self.failing.swap(false, Ordering::Relaxed) => {
                tracing::info!(collector = %self.endpoint, "telemetry: exporting spans works again")
            }
            _ => {}
        }
        r
    }

    fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&mut self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource)
    }
}

// ---- W3C trace context ----------------------------------------------------

/// A `traceparent` as W3C Trace Context level 1 reads it: `00` with exactly
/// four fields, a later version with at least those (more after a `-`),
/// lowercase hex of the exact lengths, neither id all zeros, version `ff`
/// refused. `None` for anything else (the request then starts a new trace).
pub fn parse_traceparent(v: &str) -> Option<(TraceId, SpanId, TraceFlags)> {
    let b = v.as_bytes();
    let hex = |s: &[u8]| s.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
    let field = |from: usize, len: usize| {
        let f = b.get(from..from + len)?;
        hex(f).then_some(f)
    };
    let version = field(0, 2)?;
    if version == b"ff" || b.len() < 55 {
        return None;
    }
    match (version == b"00", b.len()) {
        (true, 55) => {}
        (false, 55) => {}
        (false, _) if b.get(55) == Some(&b'-') => {}
        _ => return None,
    }
    if [2, 35, 52].iter().any(|&i| b.get(i) != Some(&b'-')) {
        return None;
    }
    let text = |f: &[u8]| std::str::from_utf8(f).ok().map(str::to_string);
    let trace = TraceId::from_hex(&text(field(3, 32)?)?).ok()?;
    let span = SpanId::from_hex(&text(field(36, 16)?)?).ok()?;
    let flags = u8::from_str_radix(&text(field(53, 2)?)?, 16).ok()?;
    if trace == TraceId::INVALID || span == SpanId::INVALID {
        return None;
    }
    Some((trace, span, TraceFlags::new(flags) & TraceFlags::SAMPLED))
}

/// The client's trace context, when its `traceparent` is valid; its
/// `tracestate` is kept when it parses and is within W3C's 512 bytes.
pub fn incoming(headers: &HeaderMap) -> Option<SpanContext> {
    // Two `traceparent` headers: W3C says ignore both.
    let mut all = headers.get_all("traceparent").iter();
    let (tp, None) = (all.next()?, all.next()) else {
        return None;
    };
    let (trace, span, flags) = parse_traceparent(tp.to_str().ok()?.trim())?;
    let state = headers
        .get_all("tracestate")
        .iter()
        .map(|v| v.to_str().ok())
        .collect::<Option<Vec<_>>>()
        .map(|parts| parts.join(","))
        .filter(|s| !s.is_empty() && s.len() <= 512)
        .and_then(|s| TraceState::from_str(&s).ok())
        .unwrap_or_default();
    Some(SpanContext::new(trace, span, flags, true, state))
}

/// `traceparent` and `tracestate` for `sc`, as sent upstream.
fn outgoing(sc: &SpanContext) -> HeaderMap {
    let mut h = HeaderMap::new();
    if !sc.is_valid() {
        return h;
    }
    let tp = format!(
        "00-{}-{}-{:02x}",
        sc.trace_id(),
        sc.span_id(),
        (sc.trace_flags() & TraceFlags::SAMPLED).to_u8()
    );
    if let Ok(v) = HeaderValue::from_str(&tp) {
        h.insert("traceparent", v);
    }
    let state = sc.trace_state().header();
    if let (false, Ok(v)) = (state.is_empty(), HeaderValue::from_str(&state)) {
        h.insert("tracestate", v);
    }
    h
}

// ---- one request's spans ----------------------------------------------------

/// Marks the inner request of a WebSocket session (its client transport).
#[derive(Debug, Clone, Copy)]
pub struct ViaWebSocket;

/// One request's trace: put in the request's extensions by `handle`, given
/// to its pump when it streams. Does nothing when empty (no `[telemetry]`
/// and no `traceparent`).
#[derive(Clone, Default)]
pub struct Trace(Option<Arc<Mutex<State>>>);

struct State {
    /// `None`: nothing is recorded, the client's context only passed on.
    tracer: Option<SdkTracer>,
    incoming: Option<SpanContext>,
    method: String,
    /// The SERVER span, until it ends.
    server: Option<Context>,
    /// The CLIENT span of the upstream call, until it ends.
    client: Option<Context>,
    /// A pump or follower ends the spans, not the response's head.
    claimed: bool,
    first_chunk: bool,
    /// The client came over a WebSocket session; the upstream is one.
    websocket: bool,
    upstream_ws: bool,
    conversation: Option<(String, String)>,
}

fn kv(k: &'static str, v: impl Into<opentelemetry::Value>) -> KeyValue {
    KeyValue::new(k, v.into())
}

fn transport_name(t: Transport) -> &'static str {
    match t {
        Transport::Sse => "sse",
        Transport::Proto(_) => "proto",
    }
}

impl Trace {
    /// The trace of a request that just arrived.
    pub fn begin(
        telemetry: Option<&Telemetry>,
        headers: &HeaderMap,
        method: &http::Method,
        websocket: bool,
    ) -> Trace {
        let incoming = incoming(headers);
        if telemetry.is_none() && incoming.is_none() {
            return Trace(None);
        }
        Trace(Some(Arc::new(Mutex::new(State {
            tracer: telemetry.map(|t| t.tracer.clone()),
            incoming,
            method: method.as_str().to_string(),
            server: None,
            client: None,
            claimed: false,
            first_chunk: false,
            websocket,
            upstream_ws: false,
            conversation: None,
        }))))
    }

    fn with(&self, f: impl FnOnce(&mut State)) {
        if let Some(s) = &self.0 {
            if let Ok(mut s) = s.lock() {
                f(&mut s);
            }
        }
    }

    /// The route the request is for (`http_route`: its template): the
    /// SERVER span starts here, so that a request no route takes (a probe,
    /// `/metrics`, a 404) makes none.
    pub fn route(&self, route: &Route, http_route: &str, client_transport: Transport) {
        self.with(|s| {
            let Some(tracer) = &s.tracer else { return };
            if s.server.is_some() {
                return;
            }
            let parent = match &s.incoming {
                Some(sc) => Context::new().with_remote_span_context(sc.clone()),
                None => Context::new(),
            };
            let client_transport = if s.websocket {
                "websocket"
            } else {
                transport_name(client_transport)
            };
            let span = tracer
                .span_builder(format!("{} {http_route}", s.method))
                .with_kind(SpanKind::Server)
                .with_attributes([
                    kv("http.request.method", s.method.clone()),
                    kv("http.route", http_route.to_string()),
                    kv("babelgate.route", route.path.clone()),
                    kv("babelgate.dialect.client", route.client.as_str()),
                    kv(
                        "babelgate.dialect.upstream",
                        route.upstream_protocol.as_str(),
                    ),
                    kv("babelgate.transport.client", client_transport),
                ])
                .start_with_context(tracer, &parent);
            s.server = Some(Context::new().with_span(span));
        });
    }

    /// The run the request asks for: the thread (the GenAI conversation)
    /// and the run id, as the client named them.
    pub fn run(&self, thread_id: &str, run_id: &str) {
        self.with(|s| {
            s.conversation = Some((thread_id.to_string(), run_id.to_string()));
            if let Some(cx) = &s.server {
                cx.span().set_attributes([
                    kv("gen_ai.conversation.id", thread_id.to_string()),
                    kv("babelgate.run.id", run_id.to_string()),
                ]);
            }
        });
    }

    /// Starts the upstream call's CLIENT span: the headers that carry it
    /// upstream (the client's own, as they came, when nothing is recorded).
    pub fn upstream(&self, route: &Route) -> HeaderMap {
        let mut out = HeaderMap::new();
        self.with(|s| {
            let (Some(tracer), Some(server)) = (&s.tracer, &s.server) else {
                if let Some(sc) = &s.incoming {
                    out = outgoing(sc);
                }
                return;
            };
            let u = &route.upstream;
            let ws = crate::ws::is_ws_url(u);
            let mut attrs = vec![
                kv("http.request.method", if ws { "GET" } else { "POST" }),
                kv("url.full", crate::server::loggable_url(u)),
                kv("gen_ai.operation.name", "invoke_agent"),
                kv("babelgate.route", route.path.clone()),
                kv(
                    "babelgate.dialect.upstream",
                    route.upstream_protocol.as_str(),
                ),
            ];
            if let Some(host) = u.host_str() {
                attrs.push(kv("server.address", host.to_string()));
            }
            if let Some(port) = u.port_or_known_default() {
                attrs.push(kv("server.port", i64::from(port)));
            }
            if ws {
                attrs.push(kv("babelgate.transport.upstream", "websocket"));
            }
            s.upstream_ws = ws;
            if let Some((thread, run)) = &s.conversation {
                attrs.push(kv("gen_ai.conversation.id", thread.clone()));
                attrs.push(kv("babelgate.run.id", run.clone()));
            }
            let span = tracer
                .span_builder("invoke_agent")
                .with_kind(SpanKind::Client)
                .with_attributes(attrs)
                .start_with_context(tracer, server);
            out = outgoing(span.span_context());
            s.client = Some(Context::new().with_span(span));
        });
        out
    }

    /// The upstream's answer head.
    pub fn upstream_status(&self, status: u16) {
        self.with(|s| {
            if let Some(cx) = &s.client {
                cx.span()
                    .set_attribute(kv("http.response.status_code", i64::from(status)));
            }
        });
    }

    /// The answer streams: a pump ends the spans as the stream ends.
    /// `upstream_binary`: the upstream's events came as protobuf.
    pub fn streaming(&self, upstream_binary: bool) {
        self.with(|s| {
            s.claimed = true;
            if let Some(cx) = &s.client {
                let encoding = match (upstream_binary, s.upstream_ws) {
                    (true, _) => "proto",
                    (false, true) => "json",
                    (false, false) => "sse",
                };
                let span = cx.span();
                if s.upstream_ws {
                    span.set_attribute(kv("babelgate.upstream.encoding", encoding));
                } else {
                    span.set_attribute(kv("babelgate.transport.upstream", encoding));
                }
            }
        });
    }

    /// A resumed stream: its follower ends the span.
    pub fn resumed(&self, mode: &'static str) {
        self.with(|s| {
            s.claimed = true;
            if let Some(cx) = &s.server {
                cx.span().set_attribute(kv("babelgate.resume.mode", mode));
            }
        });
    }

    /// The first chunk went to the client, `after` the request arrived.
    pub fn first_chunk(&self, after: Duration) {
        self.with(|s| {
            if std::mem::replace(&mut s.first_chunk, true) {
                return;
            }
            if let Some(cx) = &s.server {
                cx.span()
                    .set_attribute(kv("babelgate.time_to_first_chunk", after.as_secs_f64()));
            }
        });
    }

    /// A stream ended: `error` is the gateway's code when it failed.
    pub fn end_stream(&self, error: Option<&'static str>, status: u16, events: u64, dropped: u64) {
        self.with(|s| {
            let counts = [
                kv("babelgate.events.in", events as i64),
                kv("babelgate.events.dropped", dropped as i64),
            ];
            if let Some(cx) = s.client.take() {
                let span = cx.span();
                span.set_attributes(counts.clone());
                if let Some(code) = error.filter(|c| c.starts_with("upstream_")) {
                    span.set_attribute(kv("error.type", code));
                    span.set_status(Status::error(code));
                }
                span.end();
            }
            if let Some(cx) = s.server.take() {
                let span = cx.span();
                span.set_attributes(counts);
                span.set_attribute(kv("http.response.status_code", i64::from(status)));
                if let Some(code) = error {
                    span.set_attribute(kv("error.type", code));
                    span.set_status(Status::error(code));
                }
                span.end();
            }
        });
    }

    /// The response went out whole (not a stream): ends what is open.
    /// `error`: the gateway's code and whether the upstream was to blame.
    pub fn end_response(&self, status: http::StatusCode, error: Option<(&'static str, bool)>) {
        self.with(|s| {
            if s.claimed {
                return;
            }
            if let Some(cx) = s.client.take() {
                let span = cx.span();
                if let Some((code, true)) = error {
                    span.set_attribute(kv("error.type", code));
                    span.set_status(Status::error(code));
                }
                span.end();
            }
            if let Some(cx) = s.server.take() {
                let span = cx.span();
                span.set_attribute(kv("http.response.status_code", i64::from(status.as_u16())));
                if let Some((code, _)) = error {
                    span.set_attribute(kv("error.type", code));
                    // A server span's 4xx is the client's doing (HTTP semconv):
                    // its status stays unset.
                    if status.is_server_error() {
                        span.set_status(Status::error(code));
                    }
                }
                span.end();
            }
        });
    }
}

#[cfg(test)]
mod tests;
