//! What the inspector keeps of one stream: the bytes each side saw, when,
//! the requests (redacted), and what a replay needs. Only bytes are kept
//! while the stream runs; the alignment by core event is worked out when
//! someone looks (see `align`), by replaying the capture.

use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use babelgate_core::journal::Setup;
use babelgate_core::{Dialect, Framing, Sink, SpanKind};
use serde::{Deserialize, Serialize};

use crate::transport::Transport;

/// A body kept of a request, at most this many bytes (the rest is cut).
const MAX_BODY_BYTES: usize = 64 * 1024;

/// What a header value becomes when it may be a secret.
pub const REDACTED: &str = "[redacted]";

/// One side of a stream: its dialect and how it was carried.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Side {
    pub dialect: String,
    /// `sse`, `proto`, `ws` or `ws-proto`.
    pub transport: String,
}

/// A request as it went by, secrets replaced by [`REDACTED`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Exchange {
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub headers: Vec<(String, String)>,
    pub body: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub body_truncated: bool,
}

impl Exchange {
    /// `headers` with every value that may be a secret redacted: credentials
    /// and cookies by name, and `secret_names` (the route's configured and
    /// forwarded headers).
    pub fn new(
        method: &str,
        headers: &http::HeaderMap,
        secret_names: &[&str],
        body: &[u8],
    ) -> Exchange {
        let headers = headers
            .iter()
            .map(|(name, value)| {
                let n = name.as_str();
                let shown =
                    if may_be_secret(n) || secret_names.iter().any(|s| s.eq_ignore_ascii_case(n)) {
                        REDACTED.to_string()
                    } else {
                        String::from_utf8_lossy(value.as_bytes()).into_owned()
                    };
                (n.to_string(), shown)
            })
            .collect();
        let cut = body.len() > MAX_BODY_BYTES;
        let kept = body
            .get(..MAX_BODY_BYTES.min(body.len()))
            .unwrap_or_default();
        Exchange {
            method: method.to_string(),
            path: None,
            url: None,
            headers,
            body: String::from_utf8_lossy(kept).into_owned(),
            body_truncated: cut,
        }
    }

    fn size(&self) -> usize {
        self.body.len()
            + self
                .headers
                .iter()
                .map(|(n, v)| n.len() + v.len())
                .sum::<usize>()
    }
}

/// Header names whose values are credentials wherever they appear.
fn may_be_secret(name: &str) -> bool {
    const WORDS: [&str; 8] = [
        "auth",
        "cookie",
        "token",
        "secret",
        "key",
        "password",
        "session",
        "credential",
    ];
    let n = name.to_ascii_lowercase();
    WORDS.iter().any(|w| n.contains(w))
}

/// The request as received and as sent upstream.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Requests {
    pub received: Exchange,
    pub upstream: Option<Exchange>,
}

/// How the stream's translation ended, for a replay to end it alike.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// Still running.
    #[default]
    Open,
    /// The upstream's bytes ended (the translator closed the stream,
    /// with `upstream_closed` when the run had not finished).
    Finish,
    /// The gateway ended it with the dialect's error (a timeout, a stop, a
    /// broken connection).
    Fail {
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    },
    /// The client went away: the stream just stops.
    Cut,
}

/// What `babelgate translate --setup` reads: with the upstream capture, it
/// gives the client capture again.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplaySetup {
    pub from: Dialect,
    pub to: Dialect,
    /// What the translator read and wrote: `sse` or `proto`.
    pub from_transport: String,
    pub to_transport: String,
    pub setup: Setup,
    #[serde(default)]
    pub ending: Ending,
    /// The times the client's encoder was given (`Encoder::set_now`), each
    /// with how many upstream bytes had been read before it: one before
    /// each read, one before the gateway ended the stream. A replay gives
    /// the encoder the same at the same places ([`Timed`]), so a dialect
    /// that stamps events with the time (HAI) gets the live stamps again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clock: Vec<(usize, i64)>,
}

/// Feeds upstream bytes to a translator, in order from the stream's
/// start, giving its encoder the recorded times where the live one got
/// them (a capture's `clock`).
pub struct Timed<'a> {
    marks: &'a [(usize, i64)],
    next: usize,
    /// Upstream bytes fed so far.
    at: usize,
}

impl<'a> Timed<'a> {
    pub fn new(marks: &'a [(usize, i64)]) -> Self {
        Timed {
            marks,
            next: 0,
            at: 0,
        }
    }

    /// Feeds `bytes` through `push`, cut where a time was given.
    pub fn push<E>(
        &mut self,
        t: &mut babelgate_core::Translator,
        mut bytes: &[u8],
        mut push: impl FnMut(&mut babelgate_core::Translator, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        loop {
            while let Some(&(offset, ms)) = self.marks.get(self.next) {
                if offset > self.at {
                    break;
                }
                t.set_now(ms);
                self.next += 1;
            }
            let room = match self.marks.get(self.next) {
                Some(&(offset, _)) => (offset - self.at).min(bytes.len()),
                None => bytes.len(),
            };
            let (now, later) = bytes.split_at(room);
            push(t, now)?;
            self.at += now.len();
            bytes = later;
            if bytes.is_empty() {
                return Ok(());
            }
        }
    }

    /// The input is over: the times given after it (the stream's end).
    pub fn end(&mut self, t: &mut babelgate_core::Translator) {
        for &(_, ms) in self.marks.get(self.next..).unwrap_or_default() {
            t.set_now(ms);
        }
        self.next = self.marks.len();
    }
}

impl ReplaySetup {
    pub fn transports(&self) -> (Transport, Transport) {
        let of = |t: &str, d: Dialect| match t {
            "proto" => Transport::proto_for(&crate::registry::policy(d)).unwrap_or(Transport::Sse),
            _ => Transport::Sse,
        };
        (
            of(&self.from_transport, self.from),
            of(&self.to_transport, self.to),
        )
    }
}

/// The name of a transport in captures.
pub fn transport_name(t: Transport) -> &'static str {
    match t {
        Transport::Sse => "sse",
        Transport::Proto(_) => "proto",
    }
}

/// An error where it happened.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorNote {
    pub at_ms: u64,
    pub code: String,
    pub message: String,
    /// Upstream bytes read when it happened.
    pub upstream_offset: usize,
}

/// The list's view of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub id: String,
    pub route: String,
    pub kind: String,
    pub upstream: Side,
    pub client: Side,
    pub status: String,
    pub events_in: u64,
    pub events_out: u64,
    pub started_at: String,
    pub started_ms: i64,
    pub duration_ms: u64,
    pub ttfe_ms: Option<u64>,
    pub error_code: Option<String>,
    pub instance: String,
    pub truncated: bool,
    /// The conversation as the client named it (AG-UI thread id, Vercel
    /// chat id), once its request is read. Defaults for captures published
    /// by an older instance.
    #[serde(default)]
    pub conversation: Option<String>,
    /// The client's run id (or the one the gateway gave a run without one).
    #[serde(default)]
    pub client_run: Option<String>,
}

/// Everything kept of one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Capture {
    pub summary: Summary,
    pub request: Requests,
    pub replay: Option<ReplaySetup>,
    #[serde(with = "b64")]
    pub upstream: Vec<u8>,
    /// `(end offset, at ms)` of each upstream read.
    pub upstream_reads: Vec<(usize, u64)>,
    #[serde(with = "b64")]
    pub client: Vec<u8>,
    /// `(start, end, at ms)` of each client event, heartbeats left out.
    pub client_events: Vec<(usize, usize, u64)>,
    pub heartbeats: u64,
    pub errors: Vec<ErrorNote>,
    /// Bytes this capture may still take.
    #[serde(skip)]
    budget: usize,
    #[serde(skip)]
    started: Option<Instant>,
}

impl Capture {
    pub(super) fn new(
        id: String,
        route: &str,
        instance: &str,
        request: Requests,
        max_bytes: usize,
        started: Instant,
    ) -> Capture {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
            - started.elapsed().as_millis() as i64;
        let budget = max_bytes.saturating_sub(request.received.size());
        let side = || Side {
            dialect: String::new(),
            transport: "sse".into(),
        };
        Capture {
            summary: Summary {
                id,
                route: route.to_string(),
                kind: "run".into(),
                upstream: side(),
                client: side(),
                status: "streaming".into(),
                events_in: 0,
                events_out: 0,
                started_at: rfc3339(now),
                started_ms: now,
                duration_ms: 0,
                ttfe_ms: None,
                error_code: None,
                instance: instance.to_string(),
                truncated: false,
                conversation: None,
                client_run: None,
            },
            request,
            replay: None,
            upstream: Vec::new(),
            upstream_reads: Vec::new(),
            client: Vec::new(),
            client_events: Vec::new(),
            heartbeats: 0,
            errors: Vec::new(),
            budget,
            started: Some(started),
        }
    }

    fn at_ms(&self) -> u64 {
        self.started
            .map(|s| s.elapsed().as_millis() as u64)
            .unwrap_or(self.summary.duration_ms)
    }

    /// Takes `n` bytes of the budget, or marks the capture truncated.
    fn take(&mut self, n: usize) -> bool {
        if self.summary.truncated || n > self.budget {
            self.summary.truncated = true;
            return false;
        }
        self.budget -= n;
        true
    }

    /// The summary as of now (the duration of a live run so far).
    pub fn summary_now(&self) -> Summary {
        let mut s = self.summary.clone();
        if s.status == "streaming" {
            s.duration_ms = self.at_ms();
        }
        s
    }
}

/// The pump's hold on a capture.
#[derive(Clone)]
pub struct CaptureHandle(pub(super) Arc<Mutex<Capture>>);

impl CaptureHandle {
    fn with<T>(&self, f: impl FnOnce(&mut Capture) -> T) -> T {
        // A poisoned lock only means a panic elsewhere mid-update: the
        // capture is still worth showing.
        let mut c = match self.0.lock() {
            Ok(c) => c,
            Err(p) => p.into_inner(),
        };
        f(&mut c)
    }

    /// The upstream request as sent, and how both sides are carried.
    pub fn upstream_request(&self, sent: Exchange) {
        self.with(|c| {
            if c.take(sent.size()) {
                c.request.upstream = Some(sent);
            }
        });
    }

    /// Which conversation and client run this is, once the request is read.
    pub fn run_ids(&self, conversation: &str, run: &str) {
        self.with(|c| {
            c.summary.conversation = Some(conversation.to_string());
            c.summary.client_run = Some(run.to_string());
        });
    }

    /// The sides and what a replay needs, once the translator is built.
    pub fn plan(&self, upstream: Side, client: Side, replay: ReplaySetup) {
        self.with(|c| {
            c.summary.upstream = upstream;
            c.summary.client = client;
            c.replay = Some(replay);
        });
    }

    /// The client's stream goes over a WebSocket session.
    pub fn client_over_websocket(&self) {
        self.with(|c| {
            let t = &mut c.summary.client.transport;
            *t = if t == "proto" { "ws-proto" } else { "ws" }.into();
        });
    }

    /// The client's encoder is given the time `ms` (see
    /// [`ReplaySetup::clock`]).
    pub fn clock(&self, ms: i64) {
        self.with(|c| {
            if c.take(16) {
                let read = c.upstream.len();
                if let Some(r) = &mut c.replay {
                    r.clock.push((read, ms));
                }
            }
        });
    }

    /// Bytes read from the upstream.
    pub fn upstream(&self, bytes: &[u8]) {
        self.with(|c| {
            if c.take(bytes.len() + 16) {
                c.upstream.extend_from_slice(bytes);
                let at = c.at_ms();
                let end = c.upstream.len();
                c.upstream_reads.push((end, at));
            }
        });
    }

    /// Upstream events read so far.
    pub fn events_in(&self, n: u64) {
        self.with(|c| c.summary.events_in = n);
    }

    /// What is about to go to the client (before the run log's ids).
    /// `binary`: the client's form, for a sink of messages, whose events
    /// are kept framed as a byte stream of that form would carry them (what
    /// a replay reads with the framers).
    pub fn client(&self, out: &Sink, binary: bool) {
        self.with(|c| {
            let at = c.at_ms();
            for span in out.spans() {
                match span.kind {
                    SpanKind::Comment => c.heartbeats += 1,
                    SpanKind::Event => {
                        c.summary.events_out += 1;
                        if c.summary.ttfe_ms.is_none() {
                            c.summary.ttfe_ms = Some(at);
                        }
                        let Some(bytes) = out.bytes().get(span.range.clone()) else {
                            continue;
                        };
                        if c.take(bytes.len() + 24) {
                            let start = c.client.len();
                            match out.framing() {
                                Framing::Message => {
                                    Framing::stream(binary).write(&mut c.client, bytes)
                                }
                                Framing::Sse | Framing::Length => c.client.extend_from_slice(bytes),
                            }
                            c.client_events.push((start, c.client.len(), at));
                        }
                    }
                }
            }
        });
    }

    /// The gateway ended the stream with the dialect's error.
    pub fn failed(&self, message: &str, code: &str) {
        self.with(|c| {
            let at = c.at_ms();
            let upstream_offset = c.upstream.len();
            c.errors.push(ErrorNote {
                at_ms: at,
                code: code.to_string(),
                message: message.to_string(),
                upstream_offset,
            });
            if let Some(r) = &mut c.replay {
                r.ending = Ending::Fail {
                    message: message.to_string(),
                    code: Some(code.to_string()),
                };
            }
        });
    }

    /// The stream is over: `status` as the list shows it.
    pub fn end(&self, status: &str, error_code: Option<&str>, cut: bool) {
        self.with(|c| {
            c.summary.duration_ms = c.at_ms();
            c.summary.status = status.to_string();
            c.summary.error_code = error_code.map(str::to_string);
            if let Some(r) = &mut c.replay {
                if r.ending == Ending::Open {
                    r.ending = if cut { Ending::Cut } else { Ending::Finish };
                }
            }
        });
    }

    pub fn snapshot(&self) -> Capture {
        self.with(|c| {
            let mut copy = c.clone();
            copy.summary = c.summary_now();
            copy
        })
    }
}

/// `2026-11-24T21:30:00.123Z` from Unix milliseconds.
fn rfc3339(ms: i64) -> String {
    use time::format_description::BorrowedFormatItem;
    // Always three digits of milliseconds (RFC 3339's well-known form drops
    // a zero fraction): the list's times line up.
    static FORMAT: std::sync::OnceLock<Vec<BorrowedFormatItem<'static>>> =
        std::sync::OnceLock::new();
    let format = FORMAT.get_or_init(|| {
        time::format_description::parse_borrowed::<1>(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z",
        )
        .unwrap_or_default()
    });
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(format).ok())
        .unwrap_or_default()
}

/// Bytes as base64 in the JSON form (the Redis copy of a capture).
mod b64 {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The upstream fed whole, or in pieces cut anywhere, through `Timed`
    /// gives what the live translator wrote read by read, each read's time
    /// on the events it completed (HAI stamps them), and the end's time on
    /// the end.
    #[test]
    fn timed_feeding_gives_the_live_times_wherever_the_input_is_cut() {
        use babelgate_core::{Dialect, EncodeContext, Framing, Sink, Translator};
        let reads: [&[u8]; 3] = [
            b"data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\ndata: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m\",\"role\":\"assistant\"}\n\ndata: {\"type\":\"TEXT_MESS",
            b"AGE_CONTENT\",\"messageId\":\"m\",\"delta\":\"hi\"}\n\n",
            b"data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m\"}\n\n",
        ];
        let translator = || {
            crate::registry::translator(
                Dialect::AgUi,
                Dialect::Hai,
                EncodeContext::deterministic(),
                1 << 20,
            )
        };
        let end = |t: &mut Translator, out: &mut Sink| t.fail_to("stop", Some("stopped"), out);
        // live: a time before each read, one before the end
        let (mut t, mut live) = (translator(), Sink::new(Framing::Sse));
        let mut clock = Vec::new();
        let mut read = 0;
        for (i, r) in reads.iter().enumerate() {
            let ms = 1_000 * (i as i64 + 1);
            clock.push((read, ms));
            t.set_now(ms);
            t.push_to(r, &mut live).unwrap();
            read += r.len();
        }
        clock.push((read, 9_000));
        t.set_now(9_000);
        end(&mut t, &mut live);
        let live = String::from_utf8(live.bytes().to_vec()).unwrap();
        for ms in [1_000, 2_000, 9_000] {
            assert!(
                live.contains(&format!("\"timestamp\":{ms}")),
                "{ms}: {live}"
            );
        }
        let all = reads.concat();
        for cut in [1, 7, 100, all.len()] {
            let (mut t, mut out) = (translator(), Sink::new(Framing::Sse));
            let mut timed = Timed::new(&clock);
            for piece in all.chunks(cut) {
                timed
                    .push(&mut t, piece, |t, b| t.push_to(b, &mut out))
                    .unwrap();
            }
            timed.end(&mut t);
            end(&mut t, &mut out);
            assert_eq!(
                String::from_utf8(out.bytes().to_vec()).unwrap(),
                live,
                "cut {cut}"
            );
        }
    }

    #[test]
    fn dates_are_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_795_987_800_123), "2026-11-29T21:30:00.123Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn credentials_and_configured_headers_are_redacted() {
        let mut h = http::HeaderMap::new();
        h.insert("authorization", "Bearer sk-live".parse().unwrap());
        h.insert("x-api-key", "k".parse().unwrap());
        h.insert("cookie", "s=1".parse().unwrap());
        h.insert("x-tenant", "acme".parse().unwrap());
        h.insert("content-type", "application/json".parse().unwrap());
        let e = Exchange::new("POST", &h, &["X-Tenant"], b"{}");
        let shown: std::collections::HashMap<_, _> = e.headers.into_iter().collect();
        assert_eq!(shown["authorization"], REDACTED);
        assert_eq!(shown["x-api-key"], REDACTED);
        assert_eq!(shown["cookie"], REDACTED);
        assert_eq!(shown["x-tenant"], REDACTED);
        assert_eq!(shown["content-type"], "application/json");
    }

    #[test]
    fn a_capture_stops_growing_at_its_cap() {
        let c = CaptureHandle(Arc::new(Mutex::new(Capture::new(
            "r".into(),
            "/x",
            "i",
            Requests::default(),
            100,
            Instant::now(),
        ))));
        for _ in 0..10 {
            c.upstream(&[b'x'; 30]);
        }
        let s = c.snapshot();
        assert!(s.summary.truncated);
        assert!(s.upstream.len() <= 100, "{}", s.upstream.len());
    }
}
