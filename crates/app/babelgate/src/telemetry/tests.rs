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
