//! `loadgen`: the load harness of crates/tools/bench/run.sh.
//!
//!     loadgen upstream --listen 127.0.0.1:9100
//!     loadgen run --url http://127.0.0.1:8080/api/chat --body vercel \
//!         --streams 1000 --events 200 --rate 20 [--pad 8] [--ramp-ms 2000] \
//!         [--pids 123,456] [--label NAME] [--timeout-s 120] \
//!         [--transport sse|proto|ws|ws-proto] [--unique-ids 1] \
//!         [--others 789]
//!
//! `upstream` is a synthetic AG-UI agent: every POST gets `RUN_STARTED`,
//! `TEXT_MESSAGE_START`, then `events` `TEXT_MESSAGE_CONTENT` events at `rate`
//! per second (0: as fast as the connection takes them), `TEXT_MESSAGE_END`
//! and `RUN_FINISHED`. The workload comes in the request's `x-bench` header
//! (`events=N;rate=R;pad=P`), which every system under test passes on. Each
//! delta starts with `@<send time in µs since the epoch>;`, taken right
//! before the write, and survives any translation to the client's dialect.
//!
//! `run` opens `streams` client streams (spread over `ramp-ms`), reads each
//! to its end, and finds every `@<µs>;` mark in the body as it arrives:
//! receive time minus send time is the latency one event picked up between
//! the upstream's write and the client's read (both processes read the same
//! system clock). It prints one JSON line: events delivered and per second,
//! latency p50/p99/p99.9, time to the first response byte, and the CPU
//! seconds and peak resident memory of the processes given by `--pids`
//! (sampled from /proc every 100 ms; threads included, children not).
//! The CPU per event of the steady part (issue 43): every 50 ms the sampler
//! reads each process's user+system clock ticks from `/proc/<pid>/stat`,
//! with the events delivered so far and the streams open; the steady window
//! runs from the first to the last sample with the most streams open at
//! once (the ramp and the stragglers' tail left out), and its CPU per event
//! is the ticks between those two samples over the events delivered
//! between them. The same window gives loadgen's own CPU (`/proc/self`) and
//! that of `--others` (the upstream), reported apart: neither is in the
//! system's figure.
//! `run` also takes `--recover-s S` (see below). Time to first event is request written to the first mark read. The
//! memory of an open-streams run: idle RSS (before the first stream),
//! steady RSS (median of the samples taken while the most streams were open
//! at once, all of them when they overlap) and, with `--recover-s S`, RSS
//! sampled for S seconds after the last stream closed (the last value, and
//! when it first came back within issue 43's bound: idle plus 2 MiB or 15%,
//! whichever is larger).
//!
//! HTTP/1.1 by hand on purpose: one small task per stream, no pooling, no
//! buffering between the socket and the clock.
//!
//! Both sides also speak the binary transport and WebSocket (`wire.rs`):
//! `--transport` on the client, and the upstream answers a binary `Accept`
//! or a WebSocket upgrade in kind.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

mod wire;

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Grows the descriptor table to the soft limit (at most 65,536) before any
/// thread starts. Linux grows it as descriptors are opened, and in a process
/// of several threads each growth waits for an RCU grace period, up to 32 ms
/// here: a client or upstream doing that while it measures would put its own
/// stalls into every system's latency (docs/benchmarks.md).
#[cfg(target_os = "linux")]
fn reserve_descriptors() {
    use rustix::process::{getrlimit, Resource};
    let top = getrlimit(Resource::Nofile)
        .current
        .unwrap_or(u64::MAX)
        .min(1 << 16);
    if let Ok(min) = i32::try_from(top.saturating_sub(1)) {
        let _ = rustix::io::fcntl_dupfd_cloexec(std::io::stderr(), min);
    }
}

#[cfg(not(target_os = "linux"))]
fn reserve_descriptors() {}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        return usage();
    };
    let mut opts = HashMap::new();
    let mut it = args[1..].iter();
    while let Some(k) = it.next() {
        let Some(k) = k.strip_prefix("--") else {
            return usage();
        };
        let Some(v) = it.next() else {
            return usage();
        };
        opts.insert(k.to_string(), v.clone());
    }
    reserve_descriptors();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match cmd.as_str() {
        "upstream" => {
            let listen = opts
                .get("listen")
                .cloned()
                .unwrap_or_else(|| "127.0.0.1:9100".into());
            match rt.block_on(upstream(&listen)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("loadgen upstream: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        "run" => match RunOpts::parse(&opts) {
            Some(o) => {
                let report = rt.block_on(run(o));
                println!("{report}");
                ExitCode::SUCCESS
            }
            None => usage(),
        },
        _ => usage(),
    }
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: loadgen upstream --listen ADDR\n       loadgen run --url http://HOST:PORT/PATH --body agui|vercel --streams N --events N --rate R [--pad N] [--ramp-ms MS] [--pids P,P] [--label L] [--timeout-s S] [--transport sse|proto|ws|ws-proto] [--others P,P] [--recover-s S]"
    );
    ExitCode::from(2)
}

// ---- the synthetic upstream ------------------------------------------------

#[derive(Debug, Clone, Copy)]
struct Workload {
    events: u64,
    /// Events per second per stream; 0 is as fast as possible.
    rate: f64,
    /// Filler characters after each mark (a realistic token is a few bytes).
    pad: usize,
}

impl Workload {
    fn from_header(v: &str) -> Workload {
        let mut w = Workload {
            events: 100,
            rate: 0.0,
            pad: 8,
        };
        for part in v.split(';') {
            let (k, val) = part.split_once('=').unwrap_or((part, ""));
            match k.trim() {
                "events" => w.events = val.trim().parse().unwrap_or(w.events),
                "rate" => w.rate = val.trim().parse().unwrap_or(w.rate),
                "pad" => w.pad = val.trim().parse().unwrap_or(w.pad),
                _ => {}
            }
        }
        w
    }
}

async fn upstream(listen: &str) -> std::io::Result<()> {
    let l = TcpListener::bind(listen).await?;
    eprintln!("loadgen upstream on {listen}");
    loop {
        let (s, _) = l.accept().await?;
        let _ = s.set_nodelay(true);
        tokio::spawn(async move {
            let _ = serve(s).await;
        });
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads a request head (and its body), returns the head.
async fn read_request(s: &mut TcpStream) -> std::io::Result<String> {
    let mut buf = Vec::with_capacity(2048);
    let mut chunk = [0u8; 4096];
    let end = loop {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(p) = find(&buf, b"\r\n\r\n") {
            break p + 4;
        }
        if buf.len() > 64 * 1024 {
            return Err(std::io::ErrorKind::InvalidData.into());
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let lower = head.to_ascii_lowercase();
    let len: usize = lower
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut have = buf.len() - end;
    while have < len {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        have += n;
    }
    Ok(head)
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then_some(v.trim())
    })
}

/// A tick every 1/`rate` s, its first (immediate) one taken: each later
/// tick is one event's turn; a late tick delays the rest rather than bursting.
async fn pacer(rate: f64) -> tokio::time::Interval {
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    tick
}

fn push_delta(out: &mut Vec<u8>, pad: &str) {
    use std::io::Write;
    let _ = write!(
        out,
        "data: {{\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m1\",\"delta\":\"@{};{pad}\"}}\n\n",
        now_us()
    );
}

async fn serve(mut s: TcpStream) -> std::io::Result<()> {
    let head = read_request(&mut s).await?;
    let w = Workload::from_header(header(&head, "x-bench").unwrap_or(""));
    if wire::is_upgrade(&head) {
        return wire::serve_ws(s, &head, w).await;
    }
    if wire::wants_proto(&head) {
        return wire::serve_proto(s, w).await;
    }
    let pad = "x".repeat(w.pad);
    let mut out = Vec::with_capacity(16 * 1024);
    out.extend_from_slice(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
    );
    out.extend_from_slice(b"data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\ndata: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m1\",\"role\":\"assistant\"}\n\n");
    s.write_all(&out).await?;
    out.clear();
    if w.rate > 0.0 {
        let mut tick = pacer(w.rate).await;
        for _ in 0..w.events {
            tick.tick().await;
            out.clear();
            push_delta(&mut out, &pad);
            s.write_all(&out).await?;
        }
    } else {
        let mut left = w.events;
        while left > 0 {
            out.clear();
            for _ in 0..left.min(32) {
                push_delta(&mut out, &pad);
            }
            left -= left.min(32);
            s.write_all(&out).await?;
        }
    }
    s.write_all(b"data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m1\"}\n\ndata: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n").await?;
    s.shutdown().await?;
    Ok(())
}

// ---- the client ------------------------------------------------------------

struct RunOpts {
    host: String,
    path: String,
    body: &'static str,
    streams: u64,
    workload: Workload,
    ramp: Duration,
    /// How long to sample the processes' memory after the last stream closed.
    recover: Duration,
    /// Streams whose response head has arrived and whose body has not ended.
    open: AtomicU64,
    pids: Vec<u32>,
    /// Processes whose CPU is reported apart (the upstream), never counted
    /// as the system's.
    others: Vec<u32>,
    /// Marks read so far, all streams (for the steady window).
    delivered: AtomicU64,
    label: String,
    timeout: Duration,
    transport: wire::ClientTransport,
    /// `--unique-ids 1`: each stream its own conversation (chat or thread
    /// id `<id>-<n>`), as real clients; else all share one. A store's runs
    /// of one conversation share a Redis Cluster slot: one node's load.
    unique: bool,
    seq: AtomicU64,
}

const BODY_AGUI: &str = r#"{"threadId":"t","runId":"r","messages":[{"id":"u1","role":"user","content":"hi"}],"tools":[],"context":[],"state":{},"forwardedProps":{}}"#;
const BODY_VERCEL: &str = r#"{"id":"bench","trigger":"submit-message","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"hi"}]}]}"#;

impl RunOpts {
    fn parse(o: &HashMap<String, String>) -> Option<RunOpts> {
        let url = o.get("url")?;
        let rest = url.strip_prefix("http://")?;
        let (host, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let num = |k: &str, d: f64| -> Option<f64> {
            match o.get(k) {
                Some(v) => v.parse().ok(),
                None => Some(d),
            }
        };
        Some(RunOpts {
            host: host.to_string(),
            path: path.to_string(),
            body: match o.get("body").map(String::as_str) {
                Some("vercel") => BODY_VERCEL,
                Some("agui") | None => BODY_AGUI,
                Some(_) => return None,
            },
            streams: num("streams", 10.0)? as u64,
            workload: Workload {
                events: num("events", 100.0)? as u64,
                rate: num("rate", 0.0)?,
                pad: num("pad", 8.0)? as usize,
            },
            ramp: Duration::from_millis(num("ramp-ms", 0.0)? as u64),
            recover: Duration::from_secs_f64(num("recover-s", 0.0)?),
            open: AtomicU64::new(0),
            pids: pid_list(o.get("pids")),
            others: pid_list(o.get("others")),
            delivered: AtomicU64::new(0),
            label: o.get("label").cloned().unwrap_or_default(),
            timeout: Duration::from_secs_f64(num("timeout-s", 300.0)?),
            transport: wire::ClientTransport::parse(o.get("transport").map(String::as_str))?,
            unique: num("unique-ids", 0.0)? != 0.0,
            seq: AtomicU64::new(0),
        })
    }
}

fn pid_list(v: Option<&String>) -> Vec<u32> {
    v.map(|p| p.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_default()
}

#[derive(Default)]
struct StreamResult {
    events: u64,
    ttfb_us: Option<u64>,
    /// Request written to the first mark read.
    ttfe_us: Option<u64>,
    error: Option<String>,
    latencies_us: Vec<u32>,
    start: Option<Instant>,
    end: Option<Instant>,
}

/// Finds `@<digits>;` marks in a byte stream cut anywhere.
#[derive(Default)]
struct Marks {
    in_mark: bool,
    digits: u64,
    n: u32,
}

impl Marks {
    fn feed(&mut self, bytes: &[u8], mut found: impl FnMut(u64)) {
        for &b in bytes {
            if b == b'@' {
                self.in_mark = true;
                self.digits = 0;
                self.n = 0;
            } else if self.in_mark {
                if b.is_ascii_digit() && self.n < 20 {
                    self.digits = self.digits * 10 + u64::from(b - b'0');
                    self.n += 1;
                } else {
                    if b == b';' && self.n > 0 {
                        found(self.digits);
                    }
                    self.in_mark = false;
                }
            }
        }
    }
}

/// Undoes `transfer-encoding: chunked` on bytes cut anywhere.
#[derive(Default)]
struct Dechunk {
    state: ChunkState,
    size: usize,
}

#[derive(Default, PartialEq)]
enum ChunkState {
    #[default]
    Size,
    SizeLine,
    Data,
    AfterData,
    Done,
}

impl Dechunk {
    fn feed(&mut self, mut input: &[u8], mut out: impl FnMut(&[u8])) {
        while !input.is_empty() {
            match self.state {
                ChunkState::Size => {
                    let b = input[0];
                    input = &input[1..];
                    match (b as char).to_digit(16) {
                        Some(d) => self.size = self.size * 16 + d as usize,
                        None if b == b'\n' => self.end_size_line(),
                        None => self.state = ChunkState::SizeLine,
                    }
                }
                ChunkState::SizeLine => {
                    let b = input[0];
                    input = &input[1..];
                    if b == b'\n' {
                        self.end_size_line();
                    }
                }
                ChunkState::Data => {
                    let n = self.size.min(input.len());
                    out(&input[..n]);
                    input = &input[n..];
                    self.size -= n;
                    if self.size == 0 {
                        self.state = ChunkState::AfterData;
                    }
                }
                ChunkState::AfterData => {
                    let b = input[0];
                    input = &input[1..];
                    if b == b'\n' {
                        self.state = ChunkState::Size;
                    }
                }
                ChunkState::Done => return,
            }
        }
    }

    fn end_size_line(&mut self) {
        self.state = if self.size == 0 {
            ChunkState::Done
        } else {
            ChunkState::Data
        };
    }
}

async fn one_stream(o: Arc<RunOpts>, deadline: Instant) -> StreamResult {
    let mut r = StreamResult::default();
    let start = Instant::now();
    r.start = Some(start);
    let result = tokio::time::timeout_at(deadline.into(), stream_body(&o, start, &mut r)).await;
    match result {
        Ok(Ok(())) => {}
        Ok(Err(e)) => r.error = Some(e.to_string()),
        Err(_) => r.error = Some("timed out".into()),
    }
    r.end = Some(Instant::now());
    r
}

async fn stream_body(o: &RunOpts, start: Instant, r: &mut StreamResult) -> std::io::Result<()> {
    if o.transport.is_ws() {
        return wire::ws_stream(o, start, r).await;
    }
    let mut s = TcpStream::connect(&o.host).await?;
    let _ = s.set_nodelay(true);
    let w = o.workload;
    let unique;
    let body = if o.unique {
        let n = o.seq.fetch_add(1, Ordering::Relaxed);
        unique = o
            .body
            .replacen(r#""id":"bench""#, &format!(r#""id":"bench-{n}""#), 1)
            .replacen(r#""threadId":"t""#, &format!(r#""threadId":"t-{n}""#), 1);
        unique.as_str()
    } else {
        o.body
    };
    let req = format!(
        "POST {} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\naccept: {}\r\nx-bench: events={};rate={};pad={}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
        o.path,
        o.host,
        o.transport.accept(),
        w.events,
        w.rate,
        w.pad,
        body.len(),
        body
    );
    s.write_all(req.as_bytes()).await?;
    let written = now_us();
    // Held from the response head to the end of the body.
    let mut _open: Option<OpenGuard<'_>> = None;
    let mut buf = vec![0u8; 64 * 1024];
    let mut head = Vec::new();
    let mut chunked = None;
    let mut de = Dechunk::default();
    let mut marks = wire::BodyMarks::new(o.transport);
    loop {
        let n = s.read(&mut buf).await?;
        let t = now_us();
        if n == 0 {
            break;
        }
        if r.ttfb_us.is_none() {
            r.ttfb_us = Some(start.elapsed().as_micros() as u64);
        }
        let mut body = &buf[..n];
        if chunked.is_none() {
            head.extend_from_slice(body);
            let Some(end) = find(&head, b"\r\n\r\n") else {
                continue;
            };
            let h = String::from_utf8_lossy(&head[..end]).to_ascii_lowercase();
            if !h.starts_with("http/1.1 200") && !h.starts_with("http/1.0 200") {
                let line = h.lines().next().unwrap_or("").to_string();
                return Err(std::io::Error::other(format!("status: {line}")));
            }
            o.transport.check_head(&h)?;
            chunked = Some(h.contains("transfer-encoding: chunked"));
            let skip = end + 4 - (head.len() - n);
            body = &buf[skip..n];
            _open = Some(OpenGuard::new(&o.open));
        }
        let before = r.events;
        let events = &mut r.events;
        let lat = &mut r.latencies_us;
        let ttfe = &mut r.ttfe_us;
        let mut found = |sent: u64| {
            if ttfe.is_none() {
                *ttfe = Some(t.saturating_sub(written));
            }
            *events += 1;
            lat.push(t.saturating_sub(sent).min(u64::from(u32::MAX)) as u32);
        };
        if chunked == Some(true) {
            de.feed(body, |b| marks.feed(b, &mut found));
        } else {
            marks.feed(body, &mut found);
        }
        // One shared add per read, not per event: the sampler's count.
        o.delivered.fetch_add(r.events - before, Ordering::Relaxed);
        if chunked == Some(true) && de.state == ChunkState::Done {
            break;
        }
        marks.check(false)?;
    }
    marks.check(true)
}

/// Counts a stream as open while it lives.
struct OpenGuard<'a>(&'a AtomicU64);

impl<'a> OpenGuard<'a> {
    fn new(n: &'a AtomicU64) -> Self {
        n.fetch_add(1, Ordering::Relaxed);
        OpenGuard(n)
    }
}

impl Drop for OpenGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// User+system clock ticks of a process, all its threads (`/proc/<pid>/stat`
/// fields 14 and 15); `pid` may be `self`.
fn cpu_ticks(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// Clock ticks per second of `/proc/<pid>/stat` (USER_HZ).
#[cfg(target_os = "linux")]
fn ticks_per_s() -> f64 {
    rustix::param::clock_ticks_per_second() as f64
}

#[cfg(not(target_os = "linux"))]
fn ticks_per_s() -> f64 {
    100.0
}

/// CPU seconds (user + system, all threads) and resident bytes of a process.
fn proc_usage(pid: u32) -> Option<(f64, u64)> {
    let ticks = cpu_ticks(&pid.to_string())?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    Some((ticks as f64 / ticks_per_s(), rss_kb * 1024))
}

/// Anonymous resident bytes of the processes (`RssAnon`): RSS without the
/// pages of files, the executable's code among them, which the kernel reads
/// in as code first runs and may drop again at will.
fn anon_of(pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok())
        .filter_map(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("RssAnon:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .sum::<u64>()
        * 1024
}

fn usage_of(pids: &[u32]) -> (f64, u64) {
    pids.iter()
        .filter_map(|&p| proc_usage(p))
        .fold((0.0, 0), |(c, r), (c2, r2)| (c + c2, r + r2))
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    f64::from(sorted[i.min(sorted.len() - 1)])
}

/// The 1-, 5- and 15-minute load averages: what else the machine ran.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

async fn run(o: RunOpts) -> serde_json::Value {
    let o = Arc::new(o);
    let load_start = loadavg();
    let (cpu0, rss0) = usage_of(&o.pids);
    let anon0 = anon_of(&o.pids);
    let cpu0_by_pid: Vec<f64> = o.pids.iter().map(|&p| usage_of(&[p]).0).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let o = o.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut peak = 0u64;
            // (streams open, RSS) every 100 ms, for the steady RSS
            let mut samples = Vec::new();
            // every 50 ms, for the steady window's CPU per event
            let mut cpu = Vec::new();
            let t0 = Instant::now();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                cpu.push(CpuSample::take(&o, t0));
                if n.is_multiple_of(2) {
                    let rss = usage_of(&o.pids).1;
                    peak = peak.max(rss);
                    samples.push((o.open.load(Ordering::Relaxed), rss));
                }
                n += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (peak.max(usage_of(&o.pids).1), samples, cpu)
        })
    };
    let t0 = Instant::now();
    let deadline = t0 + o.ramp + o.timeout;
    let mut tasks = Vec::with_capacity(o.streams as usize);
    for i in 0..o.streams {
        let o = o.clone();
        let delay = o.ramp.mul_f64(i as f64 / o.streams.max(1) as f64);
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            one_stream(o, deadline).await
        }));
    }
    let mut results = Vec::with_capacity(tasks.len());
    for t in tasks {
        if let Ok(r) = t.await {
            results.push(r);
        }
    }
    let (cpu1, _) = usage_of(&o.pids);
    let cpu_by_pid: Vec<f64> = o
        .pids
        .iter()
        .zip(&cpu0_by_pid)
        .map(|(&p, c0)| usage_of(&[p]).0 - c0)
        .collect();
    stop.store(true, Ordering::Relaxed);
    let (peak_rss, samples, cpu_samples) = sampler.await.unwrap_or_default();
    let steady = steady_cpu(&o, &cpu_samples);
    let memory = memory_report(&o, (rss0, anon0), &samples).await;

    let first = results.iter().filter_map(|r| r.start).min().unwrap_or(t0);
    let last = results.iter().filter_map(|r| r.end).max().unwrap_or(t0);
    let wall = last.duration_since(first).as_secs_f64().max(1e-9);
    let delivered: u64 = results.iter().map(|r| r.events).sum();
    let errors: Vec<&String> = results.iter().filter_map(|r| r.error.as_ref()).collect();
    let mut lat: Vec<u32> = results
        .iter()
        .flat_map(|r| r.latencies_us.iter().copied())
        .collect();
    lat.sort_unstable();
    let mut ttfb: Vec<u32> = results
        .iter()
        .filter_map(|r| r.ttfb_us.map(|t| t.min(u64::from(u32::MAX)) as u32))
        .collect();
    ttfb.sort_unstable();
    let mut ttfe: Vec<u32> = results
        .iter()
        .filter_map(|r| r.ttfe_us.map(|t| t.min(u64::from(u32::MAX)) as u32))
        .collect();
    ttfe.sort_unstable();
    let cpu = cpu1 - cpu0;
    serde_json::json!({
        "label": o.label,
        "loadavg": [load_start, loadavg()],
        "streams": o.streams,
        "events_per_stream": o.workload.events,
        "rate_per_stream": o.workload.rate,
        "expected_events": o.streams * o.workload.events,
        "delivered_events": delivered,
        "failed_streams": errors.len(),
        "first_error": errors.first(),
        "wall_s": wall,
        "events_per_s": delivered as f64 / wall,
        "latency_us": {
            "p50": percentile(&lat, 50.0),
            "p99": percentile(&lat, 99.0),
            "p999": percentile(&lat, 99.9),
            "max": lat.last().copied(),
        },
        "ttfb_us": {"p50": percentile(&ttfb, 50.0), "p99": percentile(&ttfb, 99.0)},
        "ttfe_us": {
            "p50": percentile(&ttfe, 50.0),
            "p99": percentile(&ttfe, 99.0),
            "p999": percentile(&ttfe, 99.9),
        },
        "sut_cpu_by_pid": o.pids.iter().zip(&cpu_by_pid).map(|(p, c)| serde_json::json!({"pid": p, "cpu_s": c})).collect::<Vec<_>>(),
        "memory": memory,
        "steady": steady,
        "sut_cpu_s": if o.pids.is_empty() { serde_json::Value::Null } else { cpu.into() },
        "sut_cpu_pct": if o.pids.is_empty() { serde_json::Value::Null } else { (100.0 * cpu / wall).into() },
        "sut_rss_start_mib": if o.pids.is_empty() { serde_json::Value::Null } else { (rss0 as f64 / 1048576.0).into() },
        "sut_rss_peak_mib": if o.pids.is_empty() { serde_json::Value::Null } else { (peak_rss as f64 / 1048576.0).into() },
    })
}

/// One sample of the steady window: time, streams open, marks read, and
/// the clock ticks of the system's processes, of loadgen, of `--others`.
#[derive(Clone, Default)]
struct CpuSample {
    t: f64,
    open: u64,
    delivered: u64,
    pids: Vec<u64>,
    own: u64,
    others: u64,
}

impl CpuSample {
    fn take(o: &RunOpts, t0: Instant) -> CpuSample {
        let ticks = |p: &u32| cpu_ticks(&p.to_string()).unwrap_or(0);
        CpuSample {
            t: t0.elapsed().as_secs_f64(),
            open: o.open.load(Ordering::Relaxed),
            delivered: o.delivered.load(Ordering::Relaxed),
            pids: o.pids.iter().map(ticks).collect(),
            own: cpu_ticks("self").unwrap_or(0),
            others: o.others.iter().map(ticks).sum(),
        }
    }
}

/// CPU per event over the steady window: from the first to the last sample
/// with the most streams open at once. Null without `--pids`, or when the
/// window holds fewer than two samples or no event.
fn steady_cpu(o: &RunOpts, samples: &[CpuSample]) -> serde_json::Value {
    let max_open = samples.iter().map(|s| s.open).max().unwrap_or(0);
    let first = samples.iter().find(|s| s.open == max_open && max_open > 0);
    let last = samples
        .iter()
        .rev()
        .find(|s| s.open == max_open && max_open > 0);
    let (Some(a), Some(b)) = (first, last) else {
        return serde_json::Value::Null;
    };
    let events = b.delivered.saturating_sub(a.delivered);
    if o.pids.is_empty() || events == 0 || b.t <= a.t {
        return serde_json::Value::Null;
    }
    let hz = ticks_per_s();
    let by_pid: Vec<u64> = b
        .pids
        .iter()
        .zip(&a.pids)
        .map(|(y, x)| y.saturating_sub(*x))
        .collect();
    let ticks: u64 = by_pid.iter().sum();
    let us = |t: u64| 1e6 * t as f64 / hz / events as f64;
    serde_json::json!({
        "from_s": a.t,
        "to_s": b.t,
        "s": b.t - a.t,
        "open": max_open,
        "events": events,
        "events_per_s": events as f64 / (b.t - a.t),
        "ticks_per_s": hz,
        "ticks": ticks,
        "cpu_s": ticks as f64 / hz,
        "cpu_us_per_event": us(ticks),
        "cpu_us_per_event_by_pid": by_pid.iter().map(|&t| us(t)).collect::<Vec<_>>(),
        "loadgen_cpu_us_per_event": us(b.own.saturating_sub(a.own)),
        "others_cpu_us_per_event": (!o.others.is_empty()).then(|| us(b.others.saturating_sub(a.others))),
    })
}

/// Idle, steady and recovered RSS of the processes under test (MiB), as
/// JSON; null without `--pids`. Samples RSS for `--recover-s` after the
/// last stream closed (every 250 ms). `idle` is RSS and anonymous RSS
/// before the first stream.
async fn memory_report(
    o: &RunOpts,
    (idle, idle_anon): (u64, u64),
    samples: &[(u64, u64)],
) -> serde_json::Value {
    if o.pids.is_empty() {
        return serde_json::Value::Null;
    }
    let mib = |b: u64| b as f64 / 1048576.0;
    let max_open = samples.iter().map(|s| s.0).max().unwrap_or(0);
    let mut steady: Vec<u64> = samples
        .iter()
        .filter(|s| s.0 == max_open && max_open > 0)
        .map(|s| s.1)
        .collect();
    steady.sort_unstable();
    let steady_rss = steady.get(steady.len() / 2).copied();
    let t0 = Instant::now();
    // Issue 43's bound: idle plus 2 MiB or 15% of idle, whichever is larger
    // (what the allocator keeps for the peak's metadata is allowed).
    let bound = idle + (2u64 << 20).max(idle * 15 / 100);
    let mut within_s = None;
    let mut recovered = None;
    let mut series = Vec::new();
    let mut next_point = Duration::ZERO;
    while !o.recover.is_zero() {
        let now = t0.elapsed();
        let rss = usage_of(&o.pids).1;
        recovered = Some(rss);
        if within_s.is_none() && rss <= bound {
            within_s = Some(now.as_secs_f64());
        }
        if now >= next_point {
            series.push(serde_json::json!([now.as_secs_f64(), mib(rss)]));
            next_point += Duration::from_secs(1);
        }
        if now >= o.recover {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    serde_json::json!({
        "idle_mib": mib(idle),
        "max_open_at_once": max_open,
        "steady_samples": steady.len(),
        "steady_mib": steady_rss.map(mib),
        "kib_per_open_stream": steady_rss
            .filter(|_| max_open > 0)
            .map(|s| s.saturating_sub(idle) as f64 / 1024.0 / max_open as f64),
        "recover_s": o.recover.as_secs_f64(),
        "recovered_mib": recovered.map(mib),
        "idle_anon_mib": mib(idle_anon),
        "recovered_anon_mib": (!o.recover.is_zero()).then(|| mib(anon_of(&o.pids))),
        "bound_mib": mib(bound),
        "within_bound_after_s": within_s,
        "recovery_series_mib": series,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_found_across_any_cut() {
        let text = b"data: {\"delta\":\"@123;xx\"}\n\n@x; @45;@;@6";
        for cut in 0..text.len() {
            let mut m = Marks::default();
            let mut got = Vec::new();
            m.feed(&text[..cut], |v| got.push(v));
            m.feed(&text[cut..], |v| got.push(v));
            assert_eq!(got, vec![123, 45], "cut {cut}");
        }
    }

    #[test]
    fn dechunks_across_any_cut() {
        let wire = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n";
        for cut in 0..wire.len() {
            let mut d = Dechunk::default();
            let mut out = Vec::new();
            d.feed(&wire[..cut], |b| out.extend_from_slice(b));
            d.feed(&wire[cut..], |b| out.extend_from_slice(b));
            assert_eq!(out, b"hello, world", "cut {cut}");
            assert!(d.state == ChunkState::Done);
        }
    }

    #[test]
    fn the_steady_window_runs_from_the_first_to_the_last_sample_with_every_stream_open() {
        let opts: HashMap<String, String> = [("url", "http://127.0.0.1:1/x"), ("pids", "7,8")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let o = RunOpts::parse(&opts).unwrap();
        // (t, open, delivered, ticks of pid 7, of pid 8, own): the ramp and
        // the tail have fewer streams open, and their ticks must not count.
        let rows = [
            (0.0, 0, 0, 0, 0, 0),
            (0.05, 2, 10, 50, 50, 1),
            (0.10, 4, 1_000, 60, 52, 2),
            (0.15, 4, 3_000, 70, 54, 3),
            (0.20, 4, 5_000, 80, 56, 4),
            (0.25, 1, 5_900, 200, 200, 9),
        ];
        let samples: Vec<CpuSample> = rows
            .iter()
            .map(|&(t, open, delivered, a, b, own)| CpuSample {
                t,
                open,
                delivered,
                pids: vec![a, b],
                own,
                others: 0,
            })
            .collect();
        let st = steady_cpu(&o, &samples);
        assert_eq!(st["events"], 4_000);
        assert_eq!(st["ticks"], 24);
        assert_eq!(st["open"], 4);
        let hz = ticks_per_s();
        let us = |t: f64| 1e6 * t / hz / 4_000.0;
        assert!((st["cpu_us_per_event"].as_f64().unwrap() - us(24.0)).abs() < 1e-9);
        assert!((st["loadgen_cpu_us_per_event"].as_f64().unwrap() - us(2.0)).abs() < 1e-9);
        // No window without streams, and none without the system's pids.
        assert!(steady_cpu(&o, &samples[..1]).is_null());
        let none =
            RunOpts::parse(&[("url".to_string(), "http://127.0.0.1:1/x".to_string())].into())
                .unwrap();
        assert!(steady_cpu(&none, &samples).is_null());
    }

    #[test]
    fn workload_header() {
        let w = Workload::from_header("events=20; rate=2.5;pad=3");
        assert_eq!((w.events, w.rate, w.pad), (20, 2.5, 3));
    }
}
