//! What the run log costs per event, apart from the network: the stream of
//! `bench/loadgen`'s upstream (AG-UI, 32 deltas a read) translated to Vercel
//! as the pump does it, each read's output handed over as the pump hands a
//! chunk to the body, with the run log (the memory store) or without.
//! Run it under callgrind, side by side, and compare instructions per event
//! (wall time on a shared machine says little):
//!
//! ```sh
//! cargo build --profile profiling -p babelgate --example runlog_cost
//! for mode in nolog log input core; do
//!   valgrind --tool=callgrind --toggle-collect='*relay*' \
//!     target/profiling/examples/runlog_cost $mode 20 10000
//! done
//! ```
//!
//! Arguments: `log` (the run log), `nolog` (none: a route with `resume =
//! false`), `input` (a prototype of the live half of logging what came
//! in: each upstream read one entry) or `core` (a prototype of today's
//! design made compact: an entry per event holds its core steps only, the
//! client's bytes left for a follower to encode again), streams, events per
//! stream.
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::time::Duration;

use babelgate::resume::Recorder;
use babelgate::transport::{self, Transport};
use babelgate_core::{Dialect, EncodeContext, Framing, Sink};
use babelgate_store::{Leases, MemoryConfig, MemoryRunLog, RunLog, RunOutcome, RunWriter};
use bytes::Bytes;

#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The upstream's reads, as `loadgen upstream` writes them at saturation.
fn upstream_reads(events: usize) -> Vec<Bytes> {
    let mut reads = vec![Bytes::from_static(
        b"data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\ndata: {\"type\":\"TEXT_MESSAGE_START\",\"messageId\":\"m1\",\"role\":\"assistant\"}\n\n",
    )];
    let mut left = events;
    let mut n = 0u64;
    while left > 0 {
        let mut read = Vec::new();
        for _ in 0..left.min(32) {
            n += 1;
            // A mark like loadgen's (a time in microseconds) and 8 of pad.
            read.extend_from_slice(
                format!("data: {{\"type\":\"TEXT_MESSAGE_CONTENT\",\"messageId\":\"m1\",\"delta\":\"@{};xxxxxxxx\"}}\n\n", 1_764_030_000_000_000 + n).as_bytes(),
            );
        }
        left -= left.min(32);
        reads.push(Bytes::from(read));
    }
    reads.push(Bytes::from_static(
        b"data: {\"type\":\"TEXT_MESSAGE_END\",\"messageId\":\"m1\"}\n\ndata: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n",
    ));
    reads
}

/// One stream relayed: what the pump does per read (translate, then the
/// chunk for the client, logged when `recorder` is there); the chunks are
/// dropped where the pump would hand them to the body. Returns the bytes
/// handed over.
#[inline(never)]
async fn relay(
    reads: &[Bytes],
    mut recorder: Option<Recorder>,
    input: Option<&RunWriter>,
    compact: bool,
) -> usize {
    let mut t = transport::translator(
        Dialect::AgUi,
        Dialect::Vercel,
        EncodeContext {
            thread_id: Some("t".into()),
            run_id: Some("r".into()),
            ..EncodeContext::default()
        },
        babelgate_core::sse::DEFAULT_MAX_EVENT_BYTES,
        Transport::Sse,
        (Transport::Sse, false),
    );
    if compact {
        t.keep_journal();
    }
    let mut out = match (&recorder, input) {
        (Some(_), _) => {
            t.keep_journal();
            Sink::new(Framing::Sse)
        }
        (None, Some(_)) => Sink::new(Framing::Sse),
        (None, None) => Sink::untracked(Framing::Sse, Vec::with_capacity(512)),
    };
    let mut sent = 0;
    let last = reads.len().saturating_sub(1);
    for (i, read) in reads.iter().enumerate() {
        t.push_to(read, &mut out).expect("the stream translates");
        if i == last {
            t.finish_live_to(&mut out).expect("the stream ends well");
        }
        if out.is_empty() {
            continue;
        }
        let chunk = match (&mut recorder, input) {
            // Design (a) made compact, a prototype: one entry per event
            // with the core steps its encoding ended in (one copy of the
            // journal's bytes a read), no client bytes.
            (None, Some(writer)) if compact => {
                let steps = t.take_journal();
                let (marks, spans) = (steps.marks(), out.spans());
                // The records `from..to` of the journal as an entry with no
                // client bytes.
                let part = |from: usize, to: usize| {
                    let at = |n: usize| steps.records(0, n).len() as u32;
                    babelgate_store::Part {
                        start: at(from),
                        split: at(from),
                        end: at(to),
                        has_core: to > from,
                    }
                };
                let mut parts = Vec::with_capacity(spans.len() + 1);
                let mut from = 0;
                for i in 0..spans.len() {
                    let to = from + marks[from..].iter().take_while(|m| m.span <= i).count();
                    parts.push(part(from, to));
                    from = to;
                }
                if from < marks.len() {
                    parts.push(part(from, marks.len()));
                }
                let core = Bytes::copy_from_slice(steps.records(0, marks.len()));
                let mut ids = Vec::with_capacity(parts.len());
                writer
                    .append_chunk(core, &parts, &mut ids)
                    .await
                    .expect("logged");
                let mut steps = steps;
                steps.clear();
                t.give_back_journal(steps);
                let mut with_ids = Vec::with_capacity(out.bytes().len() + 26 * ids.len());
                for (span, id) in out.spans().iter().zip(ids) {
                    let event = out.bytes().get(span.range.clone()).unwrap_or_default();
                    babelgate::resume::with_id(id, event, &mut with_ids);
                }
                out.clear();
                Bytes::from(with_ids)
            }
            // Design (b)'s live cost, a prototype: the upstream's read
            // logged as it came (a shared slice, one entry), each client
            // event sent with an id made from the read's and its place.
            (None, Some(writer)) => {
                let id = writer.append(read.clone()).await.expect("logged");
                let mut with_ids = Vec::with_capacity(out.bytes().len() + 26 * out.spans().len());
                for (k, span) in out.spans().iter().enumerate() {
                    let event = out.bytes().get(span.range.clone()).unwrap_or_default();
                    let id = babelgate_store::EventId::new(id.ms, id.seq * 1024 + k as u64);
                    babelgate::resume::with_id(id, event, &mut with_ids);
                }
                out.clear();
                Bytes::from(with_ids)
            }
            (Some(rec), _) => {
                let mut with_ids = Vec::new();
                let mut steps = t.take_journal();
                rec.record(&out, &mut steps, &mut with_ids).await;
                t.give_back_journal(steps);
                out.clear();
                Bytes::from(with_ids)
            }
            (None, None) => Bytes::from(out.take().0),
        };
        sent += chunk.len();
        std::hint::black_box(chunk);
    }
    if let Some(mut rec) = recorder {
        rec.end(RunOutcome::Completed).await;
    }
    sent
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or_default();
    if !["log", "nolog", "input", "core"].contains(&mode) {
        {
            eprintln!("usage: runlog_cost log|nolog|input|core [streams] [events]");
            std::process::exit(2);
        }
    }
    let num = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (streams, events) = (num(2, 20), num(3, 10_000));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let reads = upstream_reads(events);
    let store: Arc<dyn RunLog> = Arc::new(MemoryRunLog::new(&MemoryConfig::default()));
    let leases = Leases::new(store.clone());
    let mut sent = 0;
    rt.block_on(async {
        for s in 0..streams {
            let writer = match mode {
                "nolog" => None,
                _ => {
                    let (writer, _) = RunWriter::begin(
                        &leases,
                        &format!("k{s}"),
                        &format!("r{s}"),
                        "me",
                        Duration::from_secs(60),
                    )
                    .await
                    .expect("the run begins");
                    Some(writer)
                }
            };
            sent += match (mode, writer) {
                ("log", Some(w)) => {
                    let rec = Recorder::new(w, Duration::from_secs(300));
                    relay(&reads, Some(rec), None, false).await
                }
                (_, Some(w)) => {
                    let sent = relay(&reads, None, Some(&w), mode == "core").await;
                    w.end(RunOutcome::Completed, Duration::from_secs(300))
                        .await
                        .expect("the run ends");
                    sent
                }
                (_, None) => relay(&reads, None, None, false).await,
            };
        }
    });
    println!("{streams} streams x {events} events, {mode}: {sent} bytes to the clients");
}
