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
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const SPAN: &str = "00f067aa0ba902b7";

    fn tp(version: &str, trace: &str, span: &str, flags: &str) -> String {
        format!("{version}-{trace}-{span}-{flags}")
    }

    #[test]
    fn a_valid_traceparent_parses_with_its_sampled_flag() {
        let (t, s, f) = parse_traceparent(&tp("00", TRACE, SPAN, "01")).unwrap();
        assert_eq!(t.to_string(), TRACE);
        assert_eq!(s.to_string(), SPAN);
        assert!(f.is_sampled());
        let (_, _, f) = parse_traceparent(&tp("00", TRACE, SPAN, "00")).unwrap();
        assert!(!f.is_sampled());
        // Unknown flags are ignored, not refused.
        let (_, _, f) = parse_traceparent(&tp("00", TRACE, SPAN, "ff")).unwrap();
        assert_eq!(f, TraceFlags::SAMPLED);
    }

    #[test]
    fn versions_other_than_00_are_read_as_far_as_known_and_ff_is_refused() {
        // A later version may add fields after a `-`.
        let later = format!("{}-what-comes-next", tp("01", TRACE, SPAN, "01"));
        assert!(parse_traceparent(&later).is_some());
        assert!(parse_traceparent(&tp("01", TRACE, SPAN, "01")).is_some());
        assert!(parse_traceparent(&tp("ff", TRACE, SPAN, "01")).is_none());
        // Version 00 has exactly four fields.
        assert!(parse_traceparent(&format!("{}-x", tp("00", TRACE, SPAN, "01"))).is_none());
        // A later version's extra text must start with `-`.
        assert!(parse_traceparent(&format!("{}x", tp("01", TRACE, SPAN, "01"))).is_none());
        assert!(parse_traceparent(&tp("0g", TRACE, SPAN, "01")).is_none());
    }

    #[test]
    fn all_zero_ids_are_invalid() {
        let zeros32 = "0".repeat(32);
        let zeros16 = "0".repeat(16);
        assert!(parse_traceparent(&tp("00", &zeros32, SPAN, "01")).is_none());
        assert!(parse_traceparent(&tp("00", TRACE, &zeros16, "01")).is_none());
    }

    #[test]
    fn wrong_lengths_and_separators_are_invalid() {
        let short_trace = &TRACE[1..];
        let long_span = format!("{SPAN}0");
        for bad in [
            tp("00", short_trace, SPAN, "01"),
            tp("00", TRACE, &SPAN[1..], "01"),
            tp("00", TRACE, &long_span, "01"),
            tp("00", TRACE, SPAN, "1"),
            tp("0", TRACE, SPAN, "01"),
            tp("00", TRACE, SPAN, "001"),
            format!("00_{TRACE}-{SPAN}-01"),
            format!("00-{TRACE}-{SPAN}01"),
            // What `from_str_radix` would accept but the spec does not.
            tp("00", &format!("+{}", &TRACE[1..]), SPAN, "01"),
            tp("00", TRACE, SPAN, "+1"),
            String::new(),
            "00".to_string(),
        ] {
            assert!(parse_traceparent(&bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn uppercase_hex_is_invalid() {
        let up = TRACE.to_uppercase();
        assert!(parse_traceparent(&tp("00", &up, SPAN, "01")).is_none());
        assert!(parse_traceparent(&tp("00", TRACE, &SPAN.to_uppercase(), "01")).is_none());
        assert!(parse_traceparent(&tp("00", TRACE, SPAN, "0A")).is_none());
        assert!(parse_traceparent(&tp("0A", TRACE, SPAN, "01")).is_none());
    }

    #[test]
    fn incoming_keeps_a_valid_tracestate_and_ignores_a_doubled_traceparent() {
        let mut h = HeaderMap::new();
        h.insert("traceparent", tp("00", TRACE, SPAN, "01").parse().unwrap());
        h.insert("tracestate", "vendor=abc,other=1".parse().unwrap());
        let sc = incoming(&h).unwrap();
        assert!(sc.is_remote());
        assert_eq!(sc.trace_state().header(), "vendor=abc,other=1");
        let out = outgoing(&sc);
        assert_eq!(out["traceparent"], tp("00", TRACE, SPAN, "01").as_str());
        assert_eq!(out["tracestate"], "vendor=abc,other=1");
        // A tracestate that does not parse is dropped, not the context.
        h.insert("tracestate", "no equals sign".parse().unwrap());
        let sc = incoming(&h).unwrap();
        assert!(!outgoing(&sc).contains_key("tracestate"));
        h.append("traceparent", tp("00", TRACE, SPAN, "00").parse().unwrap());
        assert!(incoming(&h).is_none());
    }

    /// An exporter stuck until the test lets it go, counting what it got.
    #[derive(Debug)]
    struct Stuck {
        gate: Mutex<std::sync::mpsc::Receiver<()>>,
        exported: Arc<AtomicUsize>,
    }

    impl SpanExporter for Stuck {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            // Blocks the processor's own thread (as a hung collector would);
            // a closed gate lets every later export through.
            if let Ok(gate) = self.gate.lock() {
                let _ = gate.recv();
            }
            self.exported.fetch_add(batch.len(), Ordering::SeqCst);
            Ok(())
        }
    }

    #[test]
    fn a_stuck_collector_drops_spans_instead_of_blocking_or_queueing_them_all() {
        let (open, gate) = std::sync::mpsc::channel();
        let exported = Arc::new(AtomicUsize::new(0));
        let exporter = Stuck {
            gate: Mutex::new(gate),
            exported: exported.clone(),
        };
        let t = Telemetry::with_processor(processor(exporter, 8), "test", 1.0);
        // Ending a span never waits for the exporter: with the export stuck,
        // this loop still ends (an unbounded or blocking processor would
        // hold all of them, or hang here).
        for _ in 0..5_000 {
            t.tracer.start("request").end();
        }
        drop(open);
        t.shutdown();
        let n = exported.load(Ordering::SeqCst);
        // One batch stuck in export, at most a queue's worth waiting, plus
        // what the processor's thread had taken when it got stuck.
        assert!(n > 0 && n <= 3 * 8, "exported {n} of 5000");
    }

    #[tokio::test]
    async fn a_dead_collector_costs_nothing_to_requests_and_shutdown_returns() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let cfg = config::Config::parse(&format!(
            "[telemetry]\notlp_endpoint = \"http://127.0.0.1:{port}/v1/traces\"\nmax_queue_spans = 16\n"
        ))
        .unwrap()
        .telemetry
        .unwrap();
        let t = Telemetry::start(&cfg).unwrap();
        for _ in 0..5_000 {
            t.tracer.start("request").end();
        }
        tokio::task::spawn_blocking(move || t.shutdown())
            .await
            .unwrap();
    }

    /// An exporter that counts the spans it got, by name.
    #[derive(Debug, Default)]
    struct Counting(Arc<Mutex<Vec<String>>>);

    impl SpanExporter for Counting {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            if let Ok(mut got) = self.0.lock() {
                got.extend(batch.into_iter().map(|s| s.name.to_string()));
            }
            Ok(())
        }
    }

    #[test]
    fn sampling_honours_the_clients_flag_and_the_upstream_hears_the_decision() {
        let got = Arc::new(Mutex::new(Vec::new()));
        // Ratio 0: no new trace is recorded, a sampled parent's still is.
        let t = Telemetry::with_processor(processor(Counting(got.clone()), 64), "t", 0.0);
        let config = config::Config::parse(
            "[[routes]]\npath = \"/chat\"\nclient = \"ag-ui\"\nupstream = \"http://127.0.0.1:9/a\"\nupstream_protocol = \"ag-ui\"\n",
        )
        .unwrap();
        let route = &config.routes[0];
        let request = |traceparent: Option<&str>| {
            let mut h = HeaderMap::new();
            if let Some(tp) = traceparent {
                h.insert("traceparent", tp.parse().unwrap());
            }
            let trace = Trace::begin(Some(&t), &h, &http::Method::POST, false);
            trace.route(route, "/chat", Transport::Sse);
            let up = trace.upstream(route);
            trace.end_response(http::StatusCode::OK, None);
            up["traceparent"].to_str().unwrap().to_string()
        };
        let sampled = request(Some(&tp("00", TRACE, SPAN, "01")));
        let (trace, span, flags) = parse_traceparent(&sampled).unwrap();
        assert_eq!(trace.to_string(), TRACE);
        assert_ne!(
            span.to_string(),
            SPAN,
            "the upstream gets the gateway's span id"
        );
        assert!(flags.is_sampled());
        // Not recorded, still propagated: a new span id, the flag unset.
        let unsampled = request(Some(&tp("00", TRACE, SPAN, "00")));
        let (trace, span, flags) = parse_traceparent(&unsampled).unwrap();
        assert_eq!(trace.to_string(), TRACE);
        assert_ne!(span.to_string(), SPAN);
        assert!(!flags.is_sampled());
        let fresh = request(None);
        let (trace, _, flags) = parse_traceparent(&fresh).unwrap();
        assert_ne!(trace.to_string(), TRACE);
        assert!(!flags.is_sampled());
        t.shutdown();
        let mut names = got.lock().unwrap().clone();
        names.sort();
        assert_eq!(names, ["POST /chat", "invoke_agent"]);
    }

    /// Fails or succeeds in the order given.
    #[derive(Debug)]
    struct Flaky(Mutex<Vec<bool>>);

    impl SpanExporter for Flaky {
        async fn export(&self, _: Vec<SpanData>) -> OTelSdkResult {
            match self.0.lock().unwrap().remove(0) {
                true => Ok(()),
                false => Err(opentelemetry_sdk::error::OTelSdkError::InternalFailure(
                    "connection refused".into(),
                )),
            }
        }
    }

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn export_failures_are_logged_once_until_exports_work_again() {
        let log = Captured::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        let results = [false, false, false, true, true, false, false];
        let exporter = Logged::new(
            Flaky(Mutex::new(results.to_vec())),
            "https://user:pw@collector.example/v1/traces?key=k3y",
        );
        for _ in results {
            let _ = exporter.export(Vec::new()).await;
        }
        let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.matches("exporting spans failed").count(), 2, "{text}");
        assert_eq!(text.matches("works again").count(), 1, "{text}");
        assert!(
            text.contains("https://collector.example/v1/traces"),
            "{text}"
        );
        assert!(!text.contains("pw") && !text.contains("k3y"), "{text}");
    }

    fn telemetry_config(table: &str) -> Result<Option<config::Telemetry>, Vec<String>> {
        let env = |k: &str| (k == "OTLP_TOKEN").then(|| "s3cret".to_string());
        config::Config::parse_with(table, std::path::Path::new("."), &env)
            .map(|c| c.telemetry)
            .map_err(|e| e.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn telemetry_config_defaults_and_errors_with_their_place() {
        assert_eq!(telemetry_config("").unwrap(), None);
        let t = telemetry_config(
            "[telemetry]\notlp_endpoint = \"https://otel.example:4318/v1/traces\"\nheaders_env = { authorization = \"OTLP_TOKEN\" }\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(t.service_name, "babelgate");
        assert_eq!(t.sample_ratio, 1.0);
        assert_eq!(t.max_queue_spans, 2048);
        assert_eq!(t.headers.0, vec![("authorization".into(), "s3cret".into())]);
        // The token is never shown.
        assert!(!format!("{t:?}").contains("s3cret"));
        for (table, want) in [
            (
                "otlp_endpoint = \"grpc://h:4317\"",
                "2:17: telemetry.otlp_endpoint: scheme `grpc`",
            ),
            (
                "otlp_endpoint = \"http://u:p@h/v1/traces\"",
                "2:17: telemetry.otlp_endpoint: no credentials",
            ),
            (
                "otlp_endpoint = \"not a url\"",
                "2:17: telemetry.otlp_endpoint:",
            ),
            (
                "otlp_endpoint = \"http://h/v1/traces\"\nsample_ratio = 1.5",
                "3:16: telemetry.sample_ratio",
            ),
            (
                "otlp_endpoint = \"http://h/v1/traces\"\nheaders_env = { x = \"UNSET\" }",
                "3:21: telemetry.headers_env.x: environment variable `UNSET`",
            ),
            (
                "otlp_endpoint = \"http://h/v1/traces\"\nservice_name = \" \"",
                "3:16: telemetry.service_name",
            ),
            (
                "otlp_endpoint = \"http://h/v1/traces\"\nendpoint = 1",
                "unknown field `endpoint`",
            ),
        ] {
            let errs = telemetry_config(&format!("[telemetry]\n{table}\n")).unwrap_err();
            assert!(
                errs.iter().any(|e| e.starts_with(want) || e.contains(want)),
                "{table}: {errs:?}"
            );
        }
    }
}
