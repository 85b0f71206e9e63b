//! Criterion benches of the translation core on the mixed stream (see
//! `babelgate_bench::mixed_agui`): the SSE framer, each decoder, each encoder,
//! and the 16 translation pairs. Throughput is in input events, so criterion
//! prints events/s; the framer and translate groups also have a `bytes`
//! variant in bytes/s of input.
//!
//!     cargo bench -p babelgate-bench
//!     cargo bench -p babelgate-bench -- translate/ag-ui-vercel

use std::hint::black_box;
use std::time::Duration;

use babelgate_bench::{
    binary_encoder, both_transports, decoder, encoder, frame_all, frames, mixed_stream, translate,
    translator,
};
use babelgate_core::{Dialect, Framing, Sink};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

/// The allocator the `babelgate` binary ships with (as in core-bench).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Per iteration: big enough to be a realistic long stream, small enough for
/// criterion's sample count on two cores.
const EVENTS: usize = 20_000;

/// `cargo test --all-targets` runs this file once per benchmark as a smoke
/// test (without `--bench`): a short stream keeps that out of the tests' time.
fn events() -> usize {
    if std::env::args().any(|a| a == "--bench") {
        EVENTS
    } else {
        200
    }
}

fn benches(c: &mut Criterion) {
    let n = events();
    let streams: Vec<(Dialect, Vec<u8>)> = Dialect::ALL
        .iter()
        .map(|&d| (d, mixed_stream(d, n)))
        .collect();

    let mut g = c.benchmark_group("framer");
    for (d, s) in &streams {
        for (unit, tp) in [
            ("events", Throughput::Elements(frames(s).len() as u64)),
            ("bytes", Throughput::Bytes(s.len() as u64)),
        ] {
            g.throughput(tp);
            g.bench_with_input(BenchmarkId::new(d.as_str(), unit), s, |b, s| {
                b.iter(|| {
                    frame_all(s, |f| {
                        black_box(f);
                    })
                })
            });
        }
    }
    g.finish();

    let mut g = c.benchmark_group("decode");
    for (d, s) in &streams {
        let fr = frames(s);
        g.throughput(Throughput::Elements(fr.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(d.as_str()), &fr, |b, fr| {
            b.iter(|| {
                let mut dec = decoder(*d);
                let mut out = Vec::with_capacity(16);
                for f in fr {
                    dec.decode(f, &mut out).unwrap();
                    black_box(&out);
                    out.clear();
                }
            })
        });
    }
    g.finish();

    let core_events = babelgate_bench::events(Dialect::AgUi, &streams[0].1);
    let mut g = c.benchmark_group("encode");
    g.throughput(Throughput::Elements(core_events.len() as u64));
    for d in Dialect::ALL {
        g.bench_with_input(
            BenchmarkId::from_parameter(d.as_str()),
            &core_events,
            |b, evs| {
                b.iter(|| {
                    let mut enc = encoder(d);
                    let mut out = Vec::with_capacity(64 * 1024);
                    for ev in evs {
                        enc.encode(ev, &mut out);
                        if out.len() >= 60 * 1024 {
                            black_box(&out);
                            out.clear();
                        }
                    }
                    enc.finish(&mut out);
                    black_box(&out);
                })
            },
        );
    }
    g.finish();

    let mut g = c.benchmark_group("translate");
    for (from, s) in &streams {
        let n = frames(s).len() as u64;
        for to in Dialect::ALL {
            for (unit, tp) in [
                ("events", Throughput::Elements(n)),
                ("bytes", Throughput::Bytes(s.len() as u64)),
            ] {
                // bytes/s only for the pair the gateway benchmarks run.
                if unit == "bytes" && !(*from == Dialect::AgUi && to == Dialect::Vercel) {
                    continue;
                }
                g.throughput(tp);
                g.bench_with_input(BenchmarkId::new(format!("{from}-{to}"), unit), s, |b, s| {
                    b.iter(|| {
                        let mut tr = translator(*from, to);
                        let mut out = Vec::with_capacity(128 * 1024);
                        translate(&mut tr, s, &mut out, |b| {
                            black_box(b);
                        });
                    })
                });
            }
        }
    }
    g.finish();

    // What a resumable route adds per event (issue 11's run log): the sink's
    // spans, and beside each client event the core steps it came from, as
    // JSON. Side by side with the plain translation of the same pair.
    let mut g = c.benchmark_group("run-log");
    let agui = &streams
        .iter()
        .find(|(d, _)| *d == Dialect::AgUi)
        .expect("the AG-UI stream")
        .1;
    g.throughput(Throughput::Elements(frames(agui).len() as u64));
    for variant in ["plain", "spans", "spans+steps", "spans+steps+json"] {
        g.bench_with_input(BenchmarkId::new("ag-ui-vercel", variant), agui, |b, s| {
            b.iter(|| {
                let mut tr = translator(Dialect::AgUi, Dialect::Vercel);
                let journal = variant.starts_with("spans+steps");
                let ser = variant == "spans+steps+json";
                if journal {
                    tr.keep_journal();
                }
                let mut sink = if variant == "plain" {
                    Sink::untracked(Framing::Sse, Vec::with_capacity(128 * 1024))
                } else {
                    Sink::new(Framing::Sse)
                };
                let mut logged = 0usize;
                for chunk in s.chunks(64 * 1024) {
                    tr.push_to(chunk, &mut sink).expect("translates");
                    if journal {
                        // The journal holds the run log's core part as it
                        // is logged: `+json` takes its bytes.
                        let steps = tr.take_journal();
                        if ser {
                            logged += steps.records(0, steps.marks().len()).len();
                        }
                        black_box(&steps);
                        tr.give_back_journal(steps);
                    }
                    black_box((sink.bytes(), sink.spans().len()));
                    sink.clear();
                }
                tr.finish_to(&mut sink).expect("ends");
                black_box(logged)
            })
        });
    }
    g.finish();
}

/// SSE JSON against the binary transport (AG-UI protobuf), both directions,
/// for the two dialects that have it, side by side: reading an upstream
/// (framing and decoding to core events) and writing a client (encoding core
/// events), plus the conversion the gateway did before encoders wrote
/// protobuf themselves (`sse+convert`: JSON written, parsed and re-encoded).
/// Bytes per event are printed once.
fn transports(c: &mut Criterion) {
    let n = events();
    for d in [Dialect::AgUi, Dialect::Hai] {
        let prefix = babelgate_registry::policy(d).binary_custom_prefix;
        let (sse, binary) = both_transports(d, n);
        let count = frames(&sse).len() as u64;
        println!(
            "transport {d}: {count} events; bytes/event: sse {:.1}, proto {:.1}",
            sse.len() as f64 / count as f64,
            binary.len() as f64 / count as f64
        );

        let mut g = c.benchmark_group(format!("transport-read/{d}"));
        g.throughput(Throughput::Elements(count));
        g.bench_function("sse", |b| {
            b.iter(|| {
                let mut framer = babelgate_core::SseFramer::default();
                let mut dec = decoder(d);
                let (mut fr, mut out) = (Vec::new(), Vec::with_capacity(16));
                for chunk in sse.chunks(64 * 1024) {
                    framer.push(chunk, &mut fr).expect("frames");
                    for f in fr.drain(..) {
                        dec.decode(&f, &mut out).expect("decodes");
                        black_box(&out);
                        out.clear();
                        framer.recycle(f);
                    }
                }
            })
        });
        g.bench_function("proto", |b| {
            b.iter(|| {
                let mut framer = babelgate_core::LengthFramer::default();
                let mut dec = decoder(d);
                let (mut ms, mut out) = (Vec::new(), Vec::with_capacity(16));
                for chunk in binary.chunks(64 * 1024) {
                    framer.push(chunk, &mut ms).expect("frames");
                    for m in ms.drain(..) {
                        dec.decode_binary(&m, &mut out).expect("decodes");
                        black_box(&out);
                        out.clear();
                        framer.recycle(m);
                    }
                }
            })
        });
        g.finish();

        let core = babelgate_bench::events(d, &sse);
        let mut g = c.benchmark_group(format!("transport-write/{d}"));
        g.throughput(Throughput::Elements(core.len() as u64));
        for variant in ["sse", "proto", "sse+convert"] {
            g.bench_function(variant, |b| {
                b.iter(|| {
                    let mut enc = if variant == "proto" {
                        binary_encoder(d)
                    } else {
                        encoder(d)
                    };
                    let mut out = Vec::with_capacity(64 * 1024);
                    let mut converted = Vec::with_capacity(64 * 1024);
                    let mut flush = |out: &mut Vec<u8>| {
                        if variant == "sse+convert" {
                            for f in frames(out) {
                                let v: serde_json::Value =
                                    serde_json::from_str(&f.data).expect("JSON");
                                if let Ok(m) = babelgate_proto::encode_event_as(&v, prefix) {
                                    babelgate_proto::write_frame(&mut converted, &m)
                                        .expect("frames");
                                }
                            }
                            black_box(&converted);
                            converted.clear();
                        }
                        black_box(&*out);
                        out.clear();
                    };
                    for ev in &core {
                        enc.encode(ev, &mut out);
                        if out.len() >= 60 * 1024 {
                            flush(&mut out);
                        }
                    }
                    enc.finish(&mut out);
                    flush(&mut out);
                })
            });
        }
        g.finish();
    }
}

criterion_group! {
    name = core;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = benches, transports
}
criterion_main!(core);
