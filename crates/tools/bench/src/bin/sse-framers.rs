//! `sse-framers`: the core's SSE framer against `eventsource-stream`, side by
//! side in one run: frames per second and heap allocations per frame, on the
//! mixed AG-UI benchmark stream read 4 KiB at a time (a socket read's size).
//!
//!     cargo run --release -p babelgate-bench --bin sse-framers [-- --events N --rounds R]
//!
//! The two take turns, `rounds` times each; the median of each is printed
//! with their ratio. Allocations are counted by this binary's allocator
//! (the system one, counted by `stats_alloc`), the same for both. The differential test that
//! holds the two to the same frames is crates/lib/core/tests/sse_differential.rs.

use std::alloc::System;
use std::time::Instant;

use babelgate_core::sse::{Frame, SseFramer};
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

/// The system allocator, counted (no unsafe code of ours: the crate's).
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const READ: usize = 4 * 1024;

/// Frames and data bytes seen, so that neither side's work is optimised out.
fn core(input: &[u8]) -> (usize, usize) {
    let mut framer = SseFramer::default();
    let mut out: Vec<Frame> = Vec::with_capacity(64);
    let (mut frames, mut bytes) = (0, 0);
    for chunk in input.chunks(READ) {
        framer.push(chunk, &mut out).expect("the stream frames");
        for f in out.drain(..) {
            frames += 1;
            bytes += f.data.len();
            framer.recycle(f);
        }
    }
    framer.finish(&mut out).expect("the stream ends well");
    (
        frames + out.len(),
        bytes + out.iter().map(|f| f.data.len()).sum::<usize>(),
    )
}

fn crate_(input: &[u8]) -> (usize, usize) {
    let chunks = input
        .chunks(READ)
        .map(|c| Ok::<_, std::convert::Infallible>(bytes::Bytes::copy_from_slice(c)));
    futures_executor::block_on(
        futures_util::stream::iter(chunks)
            .eventsource()
            .fold((0, 0), |(n, b), e| async move {
                (n + 1, b + e.expect("the stream frames").data.len())
            }),
    )
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let events = arg("--events", 200_000);
    let rounds = arg("--rounds", 5);
    let input = babelgate_bench::mixed_agui(events);
    assert_eq!(
        core(&input),
        crate_(&input),
        "the two frame the stream alike"
    );
    let (frames, _) = core(&input);
    let mut rates = [Vec::new(), Vec::new()];
    let mut allocs = [0u64; 2];
    for _ in 0..rounds {
        for (i, run) in [core as fn(&[u8]) -> (usize, usize), crate_]
            .iter()
            .enumerate()
        {
            let region = Region::new(GLOBAL);
            let t = Instant::now();
            std::hint::black_box(run(std::hint::black_box(&input)));
            rates[i].push(frames as f64 / t.elapsed().as_secs_f64());
            let c = region.change();
            allocs[i] = (c.allocations + c.reallocations) as u64;
        }
    }
    let [ours, theirs] = rates.map(median);
    println!(
        "{frames} frames, {} bytes, {READ}-byte reads, median of {rounds} rounds each, taking turns",
        input.len()
    );
    println!(
        "core SseFramer      {:>7.2} M frames/s  {:>6.2} allocations/frame",
        ours / 1e6,
        allocs[0] as f64 / frames as f64
    );
    println!(
        "eventsource-stream  {:>7.2} M frames/s  {:>6.2} allocations/frame",
        theirs / 1e6,
        allocs[1] as f64 / frames as f64
    );
    println!("core / eventsource-stream: {:.2}x", ours / theirs);
}
