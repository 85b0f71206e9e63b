//! The observer seam: what watches a stream go by without changing it.
//!
//! The pump calls every observer of its stream at the same points (an
//! upstream chunk read, its translation done, output about to go, a chunk
//! delivered, the dialect's error written, the end); the inspector's
//! capture, the stream's metrics, its trace and its log lines are the
//! observers, each an impl below over its concern's own API. A new concern
//! is one more impl and one more line in `Gateway::start_pump`, not a
//! branch in the pump.
//!
//! The run log is not an observer: a chunk goes out only once what made it
//! is logged, and the client's `id:` lines number its events from the
//! log's first entry, so it is a step of the pump's input
//! (`Pump::came_in`) and output (`Pump::prepare`), not a watcher.

use std::sync::Arc;
use std::time::Duration;

use babelgate_core::{Dialect, Sink};
use tokio::time::Instant;

use crate::inspector::CaptureHandle;
use crate::metrics::{Metrics, StreamTiming};
use crate::telemetry::Trace;
use crate::transport::Read;

/// How a stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// The run ended (finished, interrupted or with the agent's own error).
    Complete,
    /// The client went away; the upstream request was dropped.
    ClientGone,
    /// The upstream broke the stream: closed early, sent garbage or went quiet.
    Upstream(&'static str),
    Shutdown,
    /// `POST {path}/{id}/stop`.
    Stopped,
    /// The translation panicked (a bug): the client got `internal`.
    Internal,
}

impl End {
    /// The gateway's code for a stream that did not end well.
    pub(super) fn code(self) -> Option<&'static str> {
        match self {
            End::Complete | End::Stopped => None,
            End::ClientGone => Some("client_gone"),
            End::Upstream(kind) => Some(kind),
            End::Shutdown => Some("shutdown"),
            End::Internal => Some("internal"),
        }
    }

    /// The one status of this request: its head said 200, but a client
    /// that left is counted and logged as 499 (as proxies do).
    fn status(self) -> u16 {
        if self == End::ClientGone {
            499
        } else {
            200
        }
    }
}

/// A stream's totals at its end.
pub(super) struct Ended {
    pub(super) end: End,
    /// Events the translator wrote for the client.
    pub(super) events: u64,
    /// Events the client's dialect had no place for.
    pub(super) dropped: u64,
    /// Events a binary client transport could not frame.
    pub(super) unframed: u64,
}

/// One watcher of a stream. Every hook has an empty default: an observer
/// implements what it watches. Hooks are per chunk, never per event, and
/// must not wait (the stream waits for them).
pub(super) trait Observer: Send {
    /// Needs where each event starts and ends in the output (the sink's
    /// spans): the pump keeps them only when some observer reads them.
    fn reads_spans(&self) -> bool {
        false
    }
    /// A chunk as the upstream sent it, before translation (`binary`: the
    /// upstream's transport is length-delimited).
    fn upstream(&mut self, _read: &Read, _binary: bool) {}
    /// The client's encoder stamps what follows with the time `ms` (given
    /// before each read, and before the gateway ends the stream).
    fn now(&mut self, _ms: i64) {}
    /// A chunk translated and logged: the decoder's frames so far, the
    /// client events it made, and the gateway's own time on it.
    fn translated(&mut self, _frames_read: u64, _events: u64, _took: Duration) {}
    /// What is about to go to the client, before the run log's ids
    /// (`binary`: the client's encoder writes binary).
    fn output(&mut self, _out: &Sink, _binary: bool) {}
    /// A chunk was handed to the client at `now`.
    fn delivered(&mut self, _now: Instant) {}
    /// The gateway ends the stream with the client dialect's error.
    fn failed(&mut self, _message: &str, _code: &'static str) {}
    /// The stream is over.
    fn ended(&mut self, _ended: &Ended) {}
}

/// A stream's observers, called in order.
#[derive(Default)]
pub(super) struct Observers(Vec<Box<dyn Observer>>);

impl Observers {
    pub(super) fn with(mut self, o: impl Observer + 'static) -> Self {
        self.0.push(Box::new(o));
        self
    }

    pub(super) fn reads_spans(&self) -> bool {
        self.0.iter().any(|o| o.reads_spans())
    }

    pub(super) fn upstream(&mut self, read: &Read, binary: bool) {
        self.0.iter_mut().for_each(|o| o.upstream(read, binary));
    }

    pub(super) fn now(&mut self, ms: i64) {
        self.0.iter_mut().for_each(|o| o.now(ms));
    }

    pub(super) fn translated(&mut self, frames_read: u64, events: u64, took: Duration) {
        (self.0.iter_mut()).for_each(|o| o.translated(frames_read, events, took));
    }

    pub(super) fn output(&mut self, out: &Sink, binary: bool) {
        self.0.iter_mut().for_each(|o| o.output(out, binary));
    }

    pub(super) fn delivered(&mut self, now: Instant) {
        self.0.iter_mut().for_each(|o| o.delivered(now));
    }

    pub(super) fn failed(&mut self, message: &str, code: &'static str) {
        self.0.iter_mut().for_each(|o| o.failed(message, code));
    }

    pub(super) fn ended(&mut self, ended: &Ended) {
        self.0.iter_mut().for_each(|o| o.ended(ended));
    }
}

/// The inspector's capture of the stream: both sides' bytes, kept for a
/// replay.
impl Observer for CaptureHandle {
    fn reads_spans(&self) -> bool {
        true
    }

    fn upstream(&mut self, read: &Read, binary: bool) {
        CaptureHandle::upstream(self, &read.to_stream(binary));
    }

    fn now(&mut self, ms: i64) {
        self.clock(ms);
    }

    fn translated(&mut self, frames_read: u64, _events: u64, _took: Duration) {
        self.events_in(frames_read);
    }

    fn output(&mut self, out: &Sink, binary: bool) {
        self.client(out, binary);
    }

    fn failed(&mut self, message: &str, code: &'static str) {
        CaptureHandle::failed(self, message, code);
    }

    fn ended(&mut self, e: &Ended) {
        let (status, code) = match e.end {
            End::Complete => ("completed", None),
            End::ClientGone => ("client_gone", Some("client_gone")),
            End::Upstream(kind) => ("failed", Some(kind)),
            End::Shutdown => ("shutdown", Some("shutdown")),
            End::Stopped => ("stopped", Some("stopped")),
            End::Internal => ("failed", Some("internal")),
        };
        self.end(status, code, e.end == End::ClientGone);
    }
}

/// The stream's series in `/metrics`: counted open while it lives, its
/// timings per chunk, its totals at the end.
pub(super) struct StreamMetrics {
    metrics: Arc<Metrics>,
    route: String,
    pair: (Dialect, Dialect),
    started: Instant,
    /// Looked up once: per-chunk observations touch no map.
    timing: StreamTiming,
    /// When the last chunk went to the client.
    last_chunk: Option<Instant>,
    /// Counts the stream in `active_streams` while it lives.
    _active: ActiveGuard,
}

impl StreamMetrics {
    pub(super) fn new(
        metrics: Arc<Metrics>,
        route: &str,
        pair: (Dialect, Dialect),
        started: Instant,
    ) -> Self {
        StreamMetrics {
            timing: metrics.stream_timing(route),
            _active: ActiveGuard::new(&metrics),
            metrics,
            route: route.to_string(),
            pair,
            started,
            last_chunk: None,
        }
    }
}

impl Observer for StreamMetrics {
    fn translated(&mut self, _frames_read: u64, events: u64, took: Duration) {
        // From the chunk's read until its translation (logged, when the run
        // is) is handed over: waiting for a slow client is the client's
        // time, not the gateway's.
        self.timing.overhead(took, events);
    }

    fn delivered(&mut self, now: Instant) {
        match self.last_chunk {
            None => self.timing.first_chunk(now - self.started),
            Some(at) => self.timing.next_chunk(now - at),
        }
        self.last_chunk = Some(now);
    }

    fn ended(&mut self, e: &Ended) {
        let (m, (from, to)) = (&self.metrics, (self.pair.0.as_str(), self.pair.1.as_str()));
        m.events(from, to, e.events);
        m.dropped(from, to, e.dropped);
        // Only binary streams have this series (see `Metrics::binary_dropped`).
        if e.unframed > 0 {
            m.binary_dropped(from, to).inc_by(e.unframed);
        }
        m.request(&self.route, e.end.status());
        match e.end {
            End::Upstream(kind) => m.upstream_error(kind),
            End::Internal => {
                m.stream_panics.inc();
            }
            _ => {}
        }
        m.stream_ended(&self.route, self.started.elapsed());
    }
}

/// Counts a stream in `active_streams` while it lives.
struct ActiveGuard(prometheus_client::metrics::gauge::Gauge);

impl ActiveGuard {
    fn new(m: &Metrics) -> Self {
        m.active_streams.inc();
        ActiveGuard(m.active_streams.clone())
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The stream's spans (OpenTelemetry), ended with it.
pub(super) struct Traced {
    trace: Trace,
    started: Instant,
    /// The first chunk is noted (the trace takes a lock for it: once).
    first_noted: bool,
}

impl Traced {
    pub(super) fn new(trace: Trace, started: Instant) -> Self {
        Traced {
            trace,
            started,
            first_noted: false,
        }
    }
}

impl Observer for Traced {
    fn delivered(&mut self, now: Instant) {
        if !std::mem::replace(&mut self.first_noted, true) {
            self.trace.first_chunk(now - self.started);
        }
    }

    fn ended(&mut self, e: &Ended) {
        (self.trace).end_stream(e.end.code(), e.end.status(), e.events, e.dropped);
    }
}

/// The stream's line in the gateway's log when it ends.
pub(super) struct LogLine;

impl Observer for LogLine {
    fn ended(&mut self, e: &Ended) {
        let events = e.events;
        match e.end {
            End::ClientGone => tracing::info!(
                status = 499,
                events,
                "client went away; upstream request cancelled"
            ),
            End::Upstream(kind) => tracing::warn!(
                kind,
                events,
                "upstream stream failed; client got its dialect's error"
            ),
            End::Shutdown => tracing::info!(events, "stream ended by shutdown"),
            End::Stopped => tracing::info!(events, "run stopped on request"),
            End::Complete => tracing::debug!(events, "stream complete"),
            End::Internal => tracing::error!(
                events,
                "the translation panicked; client got its dialect's `internal` error"
            ),
        }
    }
}
