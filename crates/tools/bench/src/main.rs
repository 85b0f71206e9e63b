//! `core-bench`: events/s and bytes/s of the translation core on the mixed
//! stream, without criterion's statistics (criterion: `cargo bench -p
//! babelgate-bench`). crates/tools/bench/run.sh puts its JSON in the report; it is also the
//! program to profile (`--only ag-ui-vercel --iters 1` under callgrind).
//!
//!     core-bench [--events N] [--min-secs S] [--iters N] [--only NAME] [--json]

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
}

struct Row {
    name: String,
    events: usize,
    bytes_in: usize,
    bytes_out: usize,
    secs_per_iter: f64,
}

fn parse() -> Opts {
    let mut o = Opts {
        events: 200_000,
        min: Duration::from_millis(1500),
        iters: None,
        only: None,
        json: false,
    };
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
            _ => usage(&a),
        }
    }
    o
}

fn usage(bad: &str) -> ! {
    eprintln!("core-bench: bad argument {bad}\nusage: core-bench [--events N] [--min-secs S] [--iters N] [--only NAME] [--json]");
    std::process::exit(2)
}

/// Runs `f` until `min` has passed (at least twice, after one warm-up), or
/// exactly `iters` times; returns seconds per run.
fn time(o: &Opts, mut f: impl FnMut()) -> f64 {
    if let Some(n) = o.iters {
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        return t.elapsed().as_secs_f64() / f64::from(n.max(1));
    }
    f();
    let t = Instant::now();
    let mut n = 0u32;
    while n < 2 || t.elapsed() < o.min {
        f();
        n += 1;
    }
    t.elapsed().as_secs_f64() / f64::from(n)
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
            (
                d,
                if needed {
                    mixed_stream(d, o.events)
                } else {
                    Vec::new()
                },
            )
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
            secs_per_iter: secs,
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
            secs_per_iter: secs,
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
            secs_per_iter: secs,
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
                secs_per_iter: secs,
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
