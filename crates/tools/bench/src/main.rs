//! `core-bench`: events/s and bytes/s of the translation core on the mixed
//! stream, without criterion's statistics (criterion: `cargo bench -p
//! babelgate-bench`). crates/tools/bench/run.sh puts its JSON in the report; it is also the
//! program to profile (`--only ag-ui-vercel --iters 1` under callgrind).
//!
//!     core-bench [--events N] [--min-secs S] [--iters N] [--only NAME] [--json]
//!                [--input FILE --from DIALECT]
//!
//! `--input FILE --from D` puts the file's stream in place of the mixed
//! stream of dialect D: crates/tools/bench/run.sh gives it the load generator's own
//! stream, so that the translation alone is measured on what the gateway
//! relays. Every row also gives the process's CPU time per run (user+system
//! ticks of `/proc/self/stat`, as loadgen reads the gateway's), and so CPU
//! per event.

use std::hint::black_box;
use std::time::{Duration, Instant};

use babelgate_bench::{
    decoder, encoder, events, frame_all, frames, mixed_stream, translate, translator,
};
use babelgate_core::Dialect;

/// The allocator the `babelgate` binary ships with, so the core is measured
/// as it runs there.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

struct Opts {
    events: usize,
    min: Duration,
    iters: Option<u32>,
    only: Option<String>,
    json: bool,
    input: Option<(Dialect, Vec<u8>)>,
}

struct Row {
    name: String,
    events: usize,
    bytes_in: usize,
    bytes_out: usize,
    secs_per_iter: f64,
    cpu_secs_per_iter: Option<f64>,
}

fn parse() -> Opts {
    let mut o = Opts {
        events: 200_000,
        min: Duration::from_millis(1500),
        iters: None,
        only: None,
        json: false,
        input: None,
    };
    let mut file = None;
    let mut from = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| usage(&a));
        match a.as_str() {
            "--events" => o.events = val().parse().unwrap_or_else(|_| usage("--events")),
            "--min-secs" => {
                o.min =
                    Duration::from_secs_f64(val().parse().unwrap_or_else(|_| usage("--min-secs")))
            }
            "--iters" => o.iters = Some(val().parse().unwrap_or_else(|_| usage("--iters"))),
            "--only" => o.only = Some(val()),
            "--json" => o.json = true,
            "--input" => file = Some(val()),
            "--from" => from = Some(val().parse().unwrap_or_else(|_| usage("--from"))),
            _ => usage(&a),
        }
    }
    match (file, from) {
        (Some(f), Some(d)) => {
            let bytes = std::fs::read(&f).unwrap_or_else(|e| {
                eprintln!("core-bench: {f}: {e}");
                std::process::exit(2)
            });
            o.input = Some((d, bytes));
        }
        (None, None) => {}
        _ => usage("--input and --from go together"),
    }
    o
}

fn usage(bad: &str) -> ! {
    eprintln!("core-bench: bad argument {bad}\nusage: core-bench [--events N] [--min-secs S] [--iters N] [--only NAME] [--json] [--input FILE --from DIALECT]");
    std::process::exit(2)
}

/// User+system CPU seconds of this process so far (`/proc/self/stat`).
#[cfg(target_os = "linux")]
fn cpu_now() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / rustix::param::clock_ticks_per_second() as f64)
}

#[cfg(not(target_os = "linux"))]
fn cpu_now() -> Option<f64> {
    None
}

/// Runs `f` until `min` has passed (at least twice, after one warm-up), or
/// exactly `iters` times; returns wall and CPU seconds per run.
fn time(o: &Opts, mut f: impl FnMut()) -> (f64, Option<f64>) {
    let per = |n: u32, t: Instant, c: Option<f64>| {
        let n = f64::from(n.max(1));
        let cpu = c.zip(cpu_now()).map(|(a, b)| (b - a) / n);
        (t.elapsed().as_secs_f64() / n, cpu)
    };
    if let Some(n) = o.iters {
        let (c, t) = (cpu_now(), Instant::now());
        for _ in 0..n {
            f();
        }
        return per(n, t, c);
    }
    f();
    let (c, t) = (cpu_now(), Instant::now());
    let mut n = 0u32;
    while n < 2 || t.elapsed() < o.min {
        f();
        n += 1;
    }
    per(n, t, c)
}

fn main() {
    let o = parse();
    let wanted = |name: &str| o.only.as_deref().is_none_or(|w| name.contains(w));
    let mut rows = Vec::new();
    // Only the streams some wanted benchmark reads (quicker under callgrind).
    let streams: Vec<(Dialect, Vec<u8>)> = Dialect::ALL
        .iter()
        .map(|&d| {
            let reads = |name: String| wanted(&name);
            let needed = d == Dialect::AgUi
                || reads(format!("framer/{d}"))
                || reads(format!("decode/{d}"))
                || Dialect::ALL
                    .iter()
                    .any(|to| reads(format!("translate/{d}-{to}")));
            let stream = match &o.input {
                Some((from, bytes)) if *from == d => bytes.clone(),
                _ if needed => mixed_stream(d, o.events),
                _ => Vec::new(),
            };
            (d, stream)
        })
        .collect();
    let agui = &streams[0].1;

    for (d, s) in &streams {
        let name = format!("framer/{d}");
        if !wanted(&name) {
            continue;
        }
        let n = frames(s).len();
        let secs = time(&o, || {
            frame_all(s, |f| {
                black_box(f);
            })
        });
        rows.push(Row {
            name,
            events: n,
            bytes_in: s.len(),
            bytes_out: 0,
            secs_per_iter: secs.0,
            cpu_secs_per_iter: secs.1,
        });
    }
    for (d, s) in &streams {
        let name = format!("decode/{d}");
        if !wanted(&name) {
            continue;
        }
        let fr = frames(s);
        let secs = time(&o, || {
            let mut dec = decoder(*d);
            let mut out = Vec::with_capacity(16);
            for f in &fr {
                dec.decode(f, &mut out).unwrap();
                black_box(&out);
                out.clear();
            }
        });
        rows.push(Row {
            name,
            events: fr.len(),
            bytes_in: s.len(),
            bytes_out: 0,
            secs_per_iter: secs.0,
            cpu_secs_per_iter: secs.1,
        });
    }
    let core_events = events(Dialect::AgUi, agui);
    for d in Dialect::ALL {
        let name = format!("encode/{d}");
        if !wanted(&name) {
            continue;
        }
        let mut bytes_out = 0;
        let secs = time(&o, || {
            let mut enc = encoder(d);
            let mut out = Vec::with_capacity(64 * 1024);
            let mut total = 0;
            for ev in &core_events {
                enc.encode(ev, &mut out);
                if out.len() >= 60 * 1024 {
                    total += out.len();
                    black_box(&out);
                    out.clear();
                }
            }
            enc.finish(&mut out);
            bytes_out = total + out.len();
        });
        rows.push(Row {
            name,
            events: core_events.len(),
            bytes_in: 0,
            bytes_out,
            secs_per_iter: secs.0,
            cpu_secs_per_iter: secs.1,
        });
    }
    for (from, s) in &streams {
        let n = frames(s).len();
        for to in Dialect::ALL {
            let name = format!("translate/{from}-{to}");
            if !wanted(&name) {
                continue;
            }
            let mut bytes_out = 0;
            let secs = time(&o, || {
                let mut tr = translator(*from, to);
                let mut out = Vec::with_capacity(128 * 1024);
                let mut total = 0;
                translate(&mut tr, s, &mut out, |b| {
                    total += b.len();
                    black_box(b);
                });
                black_box(&tr);
                bytes_out = total;
            });
            rows.push(Row {
                name,
                events: n,
                bytes_in: s.len(),
                bytes_out,
                secs_per_iter: secs.0,
                cpu_secs_per_iter: secs.1,
            });
        }
    }

    if o.json {
        let list: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "name": r.name,
                    "events": r.events,
                    "bytes_in": r.bytes_in,
                    "bytes_out": r.bytes_out,
                    "secs": r.secs_per_iter,
                    "events_per_sec": r.events as f64 / r.secs_per_iter,
                    "bytes_in_per_sec": r.bytes_in as f64 / r.secs_per_iter,
                    "bytes_out_per_sec": r.bytes_out as f64 / r.secs_per_iter,
                    "cpu_secs": r.cpu_secs_per_iter,
                    "cpu_us_per_event": r.cpu_secs_per_iter.map(|c| 1e6 * c / r.events.max(1) as f64),
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(list));
    } else {
        println!(
            "{:<28} {:>9} {:>12} {:>10} {:>10}",
            "benchmark", "events", "events/s", "in MB/s", "out MB/s"
        );
        for r in &rows {
            println!(
                "{:<28} {:>9} {:>12.0} {:>10.1} {:>10.1}",
                r.name,
                r.events,
                r.events as f64 / r.secs_per_iter,
                r.bytes_in as f64 / r.secs_per_iter / 1e6,
                r.bytes_out as f64 / r.secs_per_iter / 1e6
            );
        }
    }
}
