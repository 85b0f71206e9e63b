//! Instructions per event of the two transports, SSE JSON and AG-UI
//! protobuf, both directions, counted by callgrind (steady where wall time on
//! a shared 2-core machine is not). One stream of 20,000 events of the mixed
//! benchmark stream, in both transports (`both_transports`):
//!
//!     cargo build --release -p babelgate-bench --example icount
//!     valgrind --tool=callgrind --toggle-collect='*icount::read_proto*' \
//!         target/release/examples/icount ag-ui read_proto
//!
//! `<dialect>` is `ag-ui` or `hai`; the mode `read_sse`, `read_proto`,
//! `write_sse` or `write_proto`. Divide the count by 20,000 (docs/benchmarks.md).
//!
//! The run log's cost (`--toggle-collect='*icount::run_log*'`): mode
//! `log_plain` translates `<dialect>` to Vercel into an untracked sink,
//! `log_steps` keeps the journal as a resumable route does, `log_json` also
//! writes its steps as JSON as the run log stores them (`log_serde`: with
//! serde_json, as it did before its direct writer).

use babelgate_core::Dialect;

/// The allocator the `babelgate` binary ships with (as in core-bench).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[inline(never)]
fn read_sse(d: Dialect, sse: &[u8]) {
    let mut framer = babelgate_core::SseFramer::default();
    let mut dec = babelgate_bench::decoder(d);
    let (mut fr, mut out) = (Vec::new(), Vec::with_capacity(16));
    for chunk in sse.chunks(64 * 1024) {
        framer.push(chunk, &mut fr).unwrap();
        for f in fr.drain(..) {
            dec.decode(&f, &mut out).unwrap();
            std::hint::black_box(&out);
            out.clear();
            framer.recycle(f);
        }
    }
}

#[inline(never)]
fn read_proto(d: Dialect, bin: &[u8]) {
    let mut framer = babelgate_core::LengthFramer::default();
    let mut dec = babelgate_bench::decoder(d);
    let (mut ms, mut out) = (Vec::new(), Vec::with_capacity(16));
    for chunk in bin.chunks(64 * 1024) {
        framer.push(chunk, &mut ms).unwrap();
        for m in ms.drain(..) {
            dec.decode_binary(&m, &mut out).unwrap();
            std::hint::black_box(&out);
            out.clear();
            framer.recycle(m);
        }
    }
}

#[inline(never)]
fn write_sse(d: Dialect, core: &[babelgate_core::Event]) {
    write(babelgate_bench::encoder(d), core)
}
#[inline(never)]
fn write_proto(d: Dialect, core: &[babelgate_core::Event]) {
    write(babelgate_bench::binary_encoder(d), core)
}

fn write(mut enc: Box<dyn babelgate_core::Encoder>, core: &[babelgate_core::Event]) {
    let mut out = Vec::with_capacity(64 * 1024);
    for ev in core {
        enc.encode(ev, &mut out);
        if out.len() >= 60 * 1024 {
            std::hint::black_box(&out);
            out.clear();
        }
    }
    enc.finish(&mut out);
    std::hint::black_box(&out);
}

#[inline(never)]
fn run_log(d: Dialect, sse: &[u8], steps: bool, json: u8) -> usize {
    let mut tr = babelgate_bench::translator(d, Dialect::Vercel);
    if steps {
        tr.keep_journal();
    }
    let mut sink = if steps {
        babelgate_core::Sink::new(babelgate_core::Framing::Sse)
    } else {
        babelgate_core::Sink::untracked(
            babelgate_core::Framing::Sse,
            Vec::with_capacity(128 * 1024),
        )
    };
    let mut logged = 0;
    for chunk in sse.chunks(64 * 1024) {
        tr.push_to(chunk, &mut sink).unwrap();
        if steps {
            let kept = tr.take_journal();
            // 1: the steps read back and written by serde, as the run log
            // wrote them once; 2: the journal's own records, as it logs them.
            if json == 1 {
                let steps: Vec<_> = kept.steps().unwrap().into_iter().map(|n| n.step).collect();
                logged += serde_json::to_vec(&steps).map_or(0, |v| v.len());
            } else if json == 2 {
                logged += kept.records(0, kept.marks().len()).len();
            }
            std::hint::black_box(&kept);
            tr.give_back_journal(kept);
        }
        std::hint::black_box(sink.bytes());
        sink.clear();
    }
    tr.finish_to(&mut sink).unwrap();
    logged
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let d = if a[1] == "hai" {
        Dialect::Hai
    } else {
        Dialect::AgUi
    };
    let (sse, bin) = babelgate_bench::both_transports(d, 20000);
    let core = babelgate_bench::events(d, &sse);
    // A repeat count (third argument) for sampling profilers.
    let times: usize = a.get(3).and_then(|n| n.parse().ok()).unwrap_or(1);
    for _ in 0..times {
        match a[2].as_str() {
            "read_sse" => read_sse(d, &sse),
            "read_proto" => read_proto(d, &bin),
            "write_sse" => write_sse(d, &core),
            "log_plain" => drop(run_log(d, &sse, false, 0)),
            "log_steps" => drop(run_log(d, &sse, true, 0)),
            "log_serde" => drop(std::hint::black_box(run_log(d, &sse, true, 1))),
            "log_json" => drop(std::hint::black_box(run_log(d, &sse, true, 2))),
            _ => write_proto(d, &core),
        }
    }
    eprintln!("events {}", core.len());
}
