//! Prometheus metrics, served at `/metrics` in the text exposition format.

use std::time::Duration;

use prometheus_client::encoding::text::encode;
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

type Histograms = Family<RouteLabels, Histogram, fn() -> Histogram>;

pub struct Metrics {
    registry: Registry,
    pub active_streams: Gauge,
    pub requests: Family<RequestLabels, Counter>,
    pub events: Family<PairLabels, Counter>,
    pub dropped: Family<PairLabels, Counter>,
    pub binary_dropped: Family<PairLabels, Counter>,
    pub upstream_errors: Family<KindLabels, Counter>,
    /// Streams whose translation panicked (a bug; the client got `internal`).
    pub stream_panics: Counter,
    pub rejected: Family<ReasonLabels, Counter>,
    pub time_to_first_event: Histograms,
    pub stream_duration: Histograms,
}

fn first_event_buckets() -> Histogram {
    // 1 ms .. ~33 s
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

fn duration_buckets() -> Histogram {
    // 10 ms .. ~1.5 h
    Histogram::new(exponential_buckets(0.01, 2.0, 20))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("babelgate");
        let active_streams = Gauge::default();
        registry.register(
            "active_streams",
            "Client streams open now",
            active_streams.clone(),
        );
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Requests by route and status (499: the client went away mid-stream)",
            requests.clone(),
        );
        let events = Family::<PairLabels, Counter>::default();
        registry.register(
            "events_translated",
            "Core events translated, by upstream and client dialect",
            events.clone(),
        );
        let dropped = Family::<PairLabels, Counter>::default();
        registry.register(
            "events_dropped",
            "Core events the client's dialect has no frame for, dropped (AG-Kit without extension_frames)",
            dropped.clone(),
        );
        let binary_dropped = Family::<PairLabels, Counter>::default();
        registry.register(
            "binary_events_dropped",
            "Events with no form in AG-UI's protobuf schema, dropped from binary client streams",
            binary_dropped.clone(),
        );
        let upstream_errors = Family::<KindLabels, Counter>::default();
        registry.register(
            "upstream_errors",
            "Upstream failures by kind",
            upstream_errors.clone(),
        );
        let stream_panics = Counter::default();
        registry.register(
            "stream_panics",
            "Streams ended by a panic in their translation (a bug), answered with `internal`",
            stream_panics.clone(),
        );
        let rejected = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "rejected",
            "Connections and requests refused by a limit, by reason (server_busy, route_busy, rate_limited, too_many_streams, request_timeout)",
            rejected.clone(),
        );
        let time_to_first_event: Histograms =
            Family::new_with_constructor(first_event_buckets as fn() -> Histogram);
        registry.register(
            "time_to_first_event_seconds",
            "From the client's request to the first translated bytes",
            time_to_first_event.clone(),
        );
        let stream_duration: Histograms =
            Family::new_with_constructor(duration_buckets as fn() -> Histogram);
        registry.register(
            "stream_duration_seconds",
            "Lifetime of client streams",
            stream_duration.clone(),
        );
        Metrics {
            registry,
            active_streams,
            requests,
            events,
            dropped,
            binary_dropped,
            upstream_errors,
            stream_panics,
            rejected,
            time_to_first_event,
            stream_duration,
        }
    }
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

    pub fn first_event(&self, route: &str, after: Duration) {
        self.time_to_first_event
            .get_or_create(&RouteLabels {
                route: route.to_string(),
            })
            .observe(after.as_secs_f64());
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
        let _ = encode(&mut s, &self.registry);
        s
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
        m.first_event("/api/chat", Duration::from_millis(3));
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
            "babelgate_time_to_first_event_seconds_count{route=\"/api/chat\"} 1",
            "babelgate_stream_duration_seconds_count{route=\"/api/chat\"} 1",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }
}
