//! Prometheus metrics, served at `/metrics` in the text exposition format.
//!
//! The gateway's own families carry the `babelgate_` prefix; the two from
//! the OpenTelemetry GenAI semantic conventions keep their names as the
//! OpenTelemetry-to-Prometheus conversion writes them (dots to underscores,
//! the unit `s` as `_seconds`), so dashboards built on the conventions work.

use std::time::Duration;

use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub route: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PairLabels {
    pub from: String,
    pub to: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteReasonLabels {
    pub route: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteModeLabels {
    pub route: String,
    pub mode: String,
}

type Histograms = Family<RouteLabels, Histogram, fn() -> Histogram>;

pub struct Metrics {
    registry: Registry,
    /// The GenAI conventions' families, without the `babelgate_` prefix.
    genai: Registry,
    pub active_streams: Gauge,
    pub requests: Family<RequestLabels, Counter>,
    pub events: Family<PairLabels, Counter>,
    pub dropped: Family<PairLabels, Counter>,
    pub binary_dropped: Family<PairLabels, Counter>,
    pub upstream_errors: Family<KindLabels, Counter>,
    /// Streams whose translation panicked (a bug; the client got `internal`).
    pub stream_panics: Counter,
    pub rejected: Family<ReasonLabels, Counter>,
    /// Clients that accepted no bytes for `client_stall_timeout_ms`, by
    /// reason (see [`Metrics::client_stalled`]).
    pub client_stalls: Family<ReasonLabels, Counter>,
    /// Streams a limit refused, by route and reason.
    pub streams_refused: Family<RouteReasonLabels, Counter>,
    /// Resumed streams, by route and mode.
    pub resumed: Family<RouteModeLabels, Counter>,
    /// Logged events sent again to resumed streams, by route and mode.
    pub resume_events: Family<RouteModeLabels, Counter>,
    /// `gen_ai.client.operation.time_to_first_chunk`.
    pub time_to_first_chunk: Histograms,
    /// `gen_ai.client.operation.time_per_output_chunk`.
    pub time_per_output_chunk: Histograms,
    /// The gateway's own time per event (see [`Metrics::overhead`]).
    pub event_overhead: Histograms,
    pub stream_duration: Histograms,
}

fn first_event_buckets() -> Histogram {
    // 1 ms .. ~33 s
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

fn chunk_gap_buckets() -> Histogram {
    // 100 µs .. ~100 s
    Histogram::new(exponential_buckets(0.0001, 2.0, 20))
}

fn overhead_buckets() -> Histogram {
    // 1 µs .. ~0.5 s: translation is micro-seconds; a slow store write shows.
    Histogram::new(exponential_buckets(0.000_001, 2.0, 20))
}

fn duration_buckets() -> Histogram {
    // 10 ms .. ~1.5 h
    Histogram::new(exponential_buckets(0.01, 2.0, 20))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut r = Registry::with_prefix("babelgate");
        let mut genai = Registry::default();
        Metrics {
            active_streams: add(
                &mut r,
                "active_streams",
                "Client streams open now",
                Gauge::default(),
            ),
            requests: add(
                &mut r,
                "requests",
                "Requests by route and status (499: the client went away mid-stream)",
                Family::<RequestLabels, Counter>::default(),
            ),
            events: add(
                &mut r,
                "events_translated",
                "Core events translated, by upstream and client dialect",
                Family::<PairLabels, Counter>::default(),
            ),
            dropped: add(
                &mut r,
                "events_dropped",
                "Core events the client's dialect has no frame for, dropped (AG-Kit without extension_frames)",
                Family::<PairLabels, Counter>::default(),
            ),
            binary_dropped: add(
                &mut r,
                "binary_events_dropped",
                "Events with no form in AG-UI's protobuf schema, dropped from binary client streams",
                Family::<PairLabels, Counter>::default(),
            ),
            upstream_errors: add(
                &mut r,
                "upstream_errors",
                "Upstream failures by kind",
                Family::<KindLabels, Counter>::default(),
            ),
            stream_panics: add(
                &mut r,
                "stream_panics",
                "Streams ended by a panic in their translation (a bug), answered with `internal`",
                Counter::default(),
            ),
            rejected: add(
                &mut r,
                "rejected",
                "Connections and requests refused by a limit, by reason (server_busy, route_busy, rate_limited, too_many_streams, request_timeout)",
                Family::<ReasonLabels, Counter>::default(),
            ),
            client_stalls: add(
                &mut r,
                "client_stalls",
                "Responses ended as a client that left because the client accepted no bytes for client_stall_timeout_ms, by reason (socket: its connection took no bytes; flow_control: an HTTP/2 stream's window stayed closed)",
                Family::<ReasonLabels, Counter>::default(),
            ),
            streams_refused: add(
                &mut r,
                "streams_refused",
                "Client streams a limit refused, by route and reason (route_busy, rate_limited, too_many_streams, too_many_followers)",
                Family::<RouteReasonLabels, Counter>::default(),
            ),
            resumed: add(
                &mut r,
                "resumed_streams",
                "Streams a client came back to, by route and mode (after_id, from_start, snapshot)",
                Family::<RouteModeLabels, Counter>::default(),
            ),
            resume_events: add(
                &mut r,
                "resume_events_replayed",
                "Logged events sent again to resumed streams (each re-sent event, or each summed up in a snapshot), by route and mode",
                Family::<RouteModeLabels, Counter>::default(),
            ),
            event_overhead: add(
                &mut r,
                "event_overhead_seconds",
                "The gateway's own time per event: from reading an upstream chunk to handing its translation to the response body, divided by the chunk's events; one observation per chunk",
                Family::new_with_constructor(overhead_buckets as fn() -> Histogram),
            ),
            time_to_first_chunk: add(
                &mut genai,
                "gen_ai_client_operation_time_to_first_chunk_seconds",
                "From the client's request to the first translated bytes handed to it",
                Family::new_with_constructor(first_event_buckets as fn() -> Histogram),
            ),
            time_per_output_chunk: add(
                &mut genai,
                "gen_ai_client_operation_time_per_output_chunk_seconds",
                "For each output chunk after the first, the time since the one before",
                Family::new_with_constructor(chunk_gap_buckets as fn() -> Histogram),
            ),
            stream_duration: add(
                &mut r,
                "stream_duration_seconds",
                "Lifetime of client streams",
                Family::new_with_constructor(duration_buckets as fn() -> Histogram),
            ),
            registry: r,
            genai,
        }
    }
}

/// Registers `metric` under `name` and gives it back (the registry keeps a
/// handle to the same series).
fn add<M: prometheus_client::registry::Metric + Clone>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    metric: M,
) -> M {
    registry.register(name, help, metric.clone());
    metric
}

impl Metrics {
    pub fn request(&self, route: &str, status: u16) {
        self.requests
            .get_or_create(&RequestLabels {
                route: route.to_string(),
                status,
            })
            .inc();
    }

    pub fn upstream_error(&self, kind: &str) {
        self.upstream_errors
            .get_or_create(&KindLabels {
                kind: kind.to_string(),
            })
            .inc();
    }

    /// A connection or request refused by a limit.
    pub fn rejected(&self, reason: &str) {
        self.rejected
            .get_or_create(&ReasonLabels {
                reason: reason.to_string(),
            })
            .inc();
    }

    /// A client that stopped reading was given up on: `socket` (its
    /// connection's writes made no progress) or `flow_control` (an HTTP/2
    /// stream's window stayed closed).
    pub fn client_stalled(&self, reason: &str) {
        self.client_stalls
            .get_or_create(&ReasonLabels {
                reason: reason.to_string(),
            })
            .inc();
    }

    pub fn dropped(&self, from: &str, to: &str, n: u64) {
        if n > 0 {
            self.dropped
                .get_or_create(&PairLabels {
                    from: from.to_string(),
                    to: to.to_string(),
                })
                .inc_by(n);
        }
    }

    /// The counter of events dropped from binary streams of `from` ->
    /// `to` (kept by the stream, which counts as it drops).
    pub fn binary_dropped(&self, from: &str, to: &str) -> Counter {
        self.binary_dropped
            .get_or_create(&PairLabels {
                from: from.to_string(),
                to: to.to_string(),
            })
            .clone()
    }

    pub fn events(&self, from: &str, to: &str, n: u64) {
        if n > 0 {
            self.events
                .get_or_create(&PairLabels {
                    from: from.to_string(),
                    to: to.to_string(),
                })
                .inc_by(n);
        }
    }

    /// A stream limit refused a stream of `route`.
    pub fn stream_refused(&self, route: &str, reason: &str) {
        self.streams_refused
            .get_or_create(&RouteReasonLabels {
                route: route.to_string(),
                reason: reason.to_string(),
            })
            .inc();
    }

    /// The counter of events replayed to one resumed stream (kept by it,
    /// which counts as it sends); the stream itself is counted here.
    pub fn resumed(&self, route: &str, mode: &str) -> Counter {
        let labels = RouteModeLabels {
            route: route.to_string(),
            mode: mode.to_string(),
        };
        self.resumed.get_or_create(&labels).inc();
        self.resume_events.get_or_create(&labels).clone()
    }

    /// The histograms one stream of `route` observes as it goes, looked up
    /// once per stream rather than once per chunk.
    pub fn stream_timing(&self, route: &str) -> StreamTiming {
        let labels = RouteLabels {
            route: route.to_string(),
        };
        StreamTiming {
            first_chunk: self.time_to_first_chunk.get_or_create(&labels).clone(),
            per_chunk: self.time_per_output_chunk.get_or_create(&labels).clone(),
            overhead: self.event_overhead.get_or_create(&labels).clone(),
        }
    }

    pub fn stream_ended(&self, route: &str, lasted: Duration) {
        self.stream_duration
            .get_or_create(&RouteLabels {
                route: route.to_string(),
            })
            .observe(lasted.as_secs_f64());
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut s = String::new();
        // Writing into a String cannot fail.
        let _ = encode_registry(&mut s, &self.registry);
        let _ = encode_registry(&mut s, &self.genai);
        let _ = encode_eof(&mut s);
        s
    }
}

/// A stream's one count in `requests_total`, made as it ends (its
/// response, sent as 200 before, is marked so that it is not counted then).
pub struct CountAtEnd {
    metrics: std::sync::Arc<Metrics>,
    route: String,
}

impl CountAtEnd {
    /// Counts the stream in `active_streams` until this is dropped.
    pub fn new(metrics: std::sync::Arc<Metrics>, route: &str) -> Self {
        metrics.active_streams.inc();
        CountAtEnd {
            metrics,
            route: route.to_string(),
        }
    }

    /// 499 when the client went away (as proxies log it), else 200.
    pub fn ended(self, client_gone: bool) {
        self.metrics
            .request(&self.route, if client_gone { 499 } else { 200 });
    }
}

impl Drop for CountAtEnd {
    fn drop(&mut self) {
        self.metrics.active_streams.dec();
    }
}

/// One stream's timing histograms (clones share the series).
#[derive(Clone)]
pub struct StreamTiming {
    first_chunk: Histogram,
    per_chunk: Histogram,
    overhead: Histogram,
}

impl StreamTiming {
    pub fn first_chunk(&self, after: Duration) {
        self.first_chunk.observe(after.as_secs_f64());
    }

    /// An output chunk after the first, `gap` after the one before.
    pub fn next_chunk(&self, gap: Duration) {
        self.per_chunk.observe(gap.as_secs_f64());
    }

    /// The gateway took `took` over an upstream chunk carrying `events`
    /// events. prometheus-client has no weighted observation, and observing
    /// the share once per event would lock the histogram that many times per
    /// chunk: so one observation per chunk, of its time per event. The
    /// count is thus of chunks, and the values are per event.
    pub fn overhead(&self, took: Duration, events: u64) {
        if events > 0 {
            #[allow(clippy::cast_precision_loss)] // counts of events per chunk are small
            self.overhead.observe(took.as_secs_f64() / events as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_family_with_labels() {
        let m = Metrics::default();
        m.request("/api/chat", 200);
        m.events("ag-ui", "vercel", 7);
        m.binary_dropped("ag-ui", "hai").inc_by(2);
        m.upstream_error("unreachable");
        m.rejected("rate_limited");
        let timing = m.stream_timing("/api/chat");
        timing.first_chunk(Duration::from_millis(3));
        timing.next_chunk(Duration::from_millis(1));
        timing.overhead(Duration::from_micros(10), 2);
        m.stream_refused("/api/chat", "route_busy");
        m.resumed("/api/chat", "snapshot").inc_by(4);
        m.stream_ended("/api/chat", Duration::from_millis(30));
        m.active_streams.inc();
        let text = m.render();
        for needle in [
            "babelgate_active_streams 1",
            "babelgate_requests_total{route=\"/api/chat\",status=\"200\"} 1",
            "babelgate_events_translated_total{from=\"ag-ui\",to=\"vercel\"} 7",
            "babelgate_binary_events_dropped_total{from=\"ag-ui\",to=\"hai\"} 2",
            "babelgate_upstream_errors_total{kind=\"unreachable\"} 1",
            "babelgate_rejected_total{reason=\"rate_limited\"} 1",
            "gen_ai_client_operation_time_to_first_chunk_seconds_count{route=\"/api/chat\"} 1",
            "gen_ai_client_operation_time_per_output_chunk_seconds_count{route=\"/api/chat\"} 1",
            "babelgate_event_overhead_seconds_count{route=\"/api/chat\"} 1",
            "babelgate_streams_refused_total{route=\"/api/chat\",reason=\"route_busy\"} 1",
            "babelgate_resumed_streams_total{route=\"/api/chat\",mode=\"snapshot\"} 1",
            "babelgate_resume_events_replayed_total{route=\"/api/chat\",mode=\"snapshot\"} 4",
            "babelgate_stream_duration_seconds_count{route=\"/api/chat\"} 1",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
        assert_eq!(text.matches("# EOF").count(), 1, "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
