//! `store-bench`: what the run log costs per appended event, in memory and in
//! one Redis. crates/tools/bench/run.sh runs it; its JSON line goes into the report.
//!
//!     store-bench --backend memory|redis [--url redis://127.0.0.1:6379]
//!         [--runs 20] [--events 10000] [--batch 16] [--redis-pid PID]
//!         [--label NAME]
//!
//! `runs` runs at once, each one as the gateway's pump drives it: a
//! `RunWriter` (begin, with the lease kept in the background), then
//! `events / batch` calls of `append_entries` of `batch` entries each, every
//! call awaited before the next (ids increase in call order), then `end`.
//! As fast as the store answers. The Redis backend sends a batch as one
//! pipelined round trip (the append script once per entry). Each entry is the
//! size the gateway logs for a text delta: the client's SSE event (`data`)
//! and the core events it was encoded from (`core`).
//!
//! Prints one JSON line: events/s over the wall time from the first begin
//! to the last end, this process's CPU and redis-server's (`--redis-pid`,
//! from /proc) per event, and the time of one `append_entries` call.

use std::time::{Duration, Instant};

use babelgate_store::{Bytes, Entry, EventId, RedisConfig, RunOutcome, RunWriter, StoreConfig};

/// The allocator the `babelgate` binary ships with.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// A Vercel text delta as the gateway sends it (loadgen's workload).
const DATA: &[u8] =
    b"data: {\"type\":\"text-delta\",\"id\":\"m1\",\"delta\":\"@1764030000000000;xxxxxxxx\"}\n\n";

/// The core part the gateway logs beside [`DATA`], written as it writes it.
fn core_part() -> Vec<u8> {
    use babelgate_core::journal::{write_log_steps, Step};
    use babelgate_core::{Dialect, Event, EventKind};
    let mut ev = Event::new(EventKind::TextDelta {
        message_id: "m1".into(),
        delta: "@1764030000000000;xxxxxxxx".into(),
    });
    ev.origin = Some(Dialect::AgUi);
    let mut out = Vec::new();
    // A delta without extras: always written.
    let _ = write_log_steps(&[Step::Event(Box::new(ev))], &mut out);
    out
}

struct Opts {
    backend: String,
    url: String,
    runs: usize,
    events: usize,
    batch: usize,
    redis_pid: Option<u32>,
    label: String,
}

fn usage(what: &str) -> ! {
    eprintln!(
        "store-bench: bad argument {what}\nusage: store-bench --backend memory|redis [--url redis://HOST:PORT] [--runs N] [--events N] [--batch N] [--redis-pid PID] [--label NAME]"
    );
    std::process::exit(2)
}

fn parse() -> Opts {
    let mut o = Opts {
        backend: "memory".into(),
        url: "redis://127.0.0.1:6379".into(),
        runs: 20,
        events: 10_000,
        batch: 16,
        redis_pid: None,
        label: String::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| usage(&a));
        let num = |v: String| v.parse::<usize>().unwrap_or_else(|_| usage(&v));
        match a.as_str() {
            "--backend" => o.backend = val(),
            "--url" => o.url = val(),
            "--runs" => o.runs = num(val()).max(1),
            "--events" => o.events = num(val()).max(1),
            "--batch" => o.batch = num(val()).max(1),
            "--redis-pid" => o.redis_pid = Some(num(val()) as u32),
            "--label" => o.label = val(),
            _ => usage(&a),
        }
    }
    o
}

/// CPU seconds of a process: the sum of its threads' run time from
/// /proc/PID/task/*/schedstat (nanoseconds; /proc/PID/stat counts in 10 ms
/// ticks, too coarse for the memory store's short runs). Threads that have
/// exited are not counted: both processes keep theirs for the whole run.
fn cpu_s(pid: &str) -> f64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return cpu_ticks_s(pid);
    };
    let mut ns = 0u64;
    for t in tasks.flatten() {
        let stat = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
        ns += stat
            .split(' ')
            .next()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    if ns == 0 {
        return cpu_ticks_s(pid);
    }
    ns as f64 / 1e9
}

/// CPU seconds (user + system, all threads) of a process from /proc/PID/stat.
fn cpu_ticks_s(pid: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return f64::NAN;
    };
    let Some(rest) = stat.rfind(')').and_then(|i| stat.get(i + 2..)) else {
        return f64::NAN;
    };
    let f: Vec<&str> = rest.split(' ').collect();
    let tick = |i: usize| {
        f.get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (tick(11) + tick(12)) / 100.0
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    let i = ((p / 100.0) * sorted.len().saturating_sub(1) as f64).round() as usize;
    sorted.get(i).map_or(f64::NAN, |&v| f64::from(v))
}

fn main() {
    let o = parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let report = rt.block_on(run(o));
    match report {
        Ok(line) => println!("{line}"),
        Err(e) => {
            eprintln!("store-bench: {e}");
            std::process::exit(1)
        }
    }
}

async fn run(o: Opts) -> Result<String, String> {
    let cfg = match o.backend.as_str() {
        "memory" => StoreConfig::default(),
        "redis" => {
            let mut c = RedisConfig::new(o.url.clone());
            c.prefix = format!("bench{}", std::process::id());
            c.op_timeout = Duration::from_secs(10);
            StoreConfig::Redis(c)
        }
        other => return Err(format!("unknown backend {other}")),
    };
    let log = cfg.build().await.map_err(|e| e.to_string())?.runs;
    log.ping().await.map_err(|e| e.to_string())?;
    let per_run = o.events;
    let batch = o.batch;
    let redis_pid = o.redis_pid.map(|p| p.to_string());
    let redis0 = redis_pid.as_deref().map(cpu_s);
    let self0 = cpu_s("self");
    let t0 = Instant::now();
    let mut tasks = Vec::with_capacity(o.runs);
    let leases = babelgate_store::Leases::new(log.clone());
    for r in 0..o.runs {
        let leases = leases.clone();
        tasks.push(tokio::spawn(async move {
            let run_id = babelgate_store::new_id();
            let key = format!("bench:{r}");
            let (writer, _) = RunWriter::begin(
                &leases,
                &key,
                &run_id,
                "store-bench",
                Duration::from_secs(30),
            )
            .await
            .map_err(|e| e.to_string())?;
            let mut calls: Vec<u32> = Vec::with_capacity(per_run / batch + 1);
            let mut ids: Vec<EventId> = Vec::with_capacity(batch);
            // One buffer, the event then its core part, as the gateway
            // logs them.
            let both = Bytes::from([DATA, &core_part()].concat());
            let mut left = per_run;
            while left > 0 {
                let n = left.min(batch);
                left -= n;
                let entries: Vec<Entry> = (0..n)
                    .map(|_| Entry::joined(both.clone(), DATA.len(), true))
                    .collect();
                ids.clear();
                let t = Instant::now();
                writer
                    .append_entries(entries, &mut ids)
                    .await
                    .map_err(|e| e.to_string())?;
                calls.push(t.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
                if ids.len() != n {
                    return Err(format!("{} ids for {n} entries", ids.len()));
                }
            }
            writer
                .end(RunOutcome::Completed, Duration::from_secs(1))
                .await
                .map_err(|e| e.to_string())?;
            Ok::<Vec<u32>, String>(calls)
        }));
    }
    let mut calls = Vec::new();
    for t in tasks {
        calls.extend(t.await.map_err(|e| e.to_string())??);
    }
    let wall = t0.elapsed().as_secs_f64();
    let self_cpu = cpu_s("self") - self0;
    let redis_cpu = match (redis_pid.as_deref(), redis0) {
        (Some(p), Some(c0)) => Some(cpu_s(p) - c0),
        _ => None,
    };
    calls.sort_unstable();
    let events = (o.runs * per_run) as f64;
    let per_event_us = |cpu: f64| cpu * 1e6 / events;
    Ok(serde_json::json!({
        "label": o.label,
        "backend": o.backend,
        "runs": o.runs,
        "events_per_run": per_run,
        "batch": batch,
        "events": o.runs * per_run,
        "entry_bytes": DATA.len() + core_part().len(),
        "wall_s": wall,
        "events_per_s": events / wall,
        "client_cpu_s": self_cpu,
        "client_cpu_us_per_event": per_event_us(self_cpu),
        "redis_cpu_s": redis_cpu,
        "redis_cpu_us_per_event": redis_cpu.map(per_event_us),
        "append_call_us": {
            "p50": percentile(&calls, 50.0),
            "p99": percentile(&calls, 99.0),
        },
    })
    .to_string())
}
