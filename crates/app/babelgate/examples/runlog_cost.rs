//! What the run log costs per event, apart from the network: the stream of
//! `bench/loadgen`'s upstream (AG-UI, 32 deltas a read) translated to Vercel
//! as the pump does it, each read's output handed over as the pump hands a
//! chunk to the body, with the run log (the memory store) or without; and
//! what a follower pays to make the stream again from the log.
//! Run it under callgrind, side by side, and compare instructions per event
//! (wall time on a shared machine says little):
//!
//! ```sh
//! cargo build --profile profiling -p babelgate --example runlog_cost
//! for mode in nolog log; do
//!   valgrind --tool=callgrind --toggle-collect='*relay*' \
//!     target/profiling/examples/runlog_cost $mode 20 10000
//! done
//! valgrind --tool=callgrind --toggle-collect='*follow_once*' \
//!   target/profiling/examples/runlog_cost replay 20 10000
//! ```
//!
//! Arguments: `log` (the run log: each read recorded as it came, the
//! client's events numbered), `nolog` (none: a route with `resume =
//! false`) or `replay` (logged, then followed from the start once per
//! stream, as a client that comes back is), streams, events per stream.
#![forbid(unsafe_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use babelgate::resume::{Begin, Follow, Followers, Mode, Recorder};
use babelgate::transport::{self, Read, Transport};
use babelgate_core::journal::Setup;
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

/// One stream relayed: what the pump does per read (what came in noted,
/// translate, the chunk for the client, logged first when `recorder` is
/// there); the chunks are dropped where the pump would hand them to the
/// body. Returns the bytes handed over.
#[inline(never)]
async fn relay(
    reads: &[Bytes],
    mut t: babelgate_core::Translator,
    mut recorder: Option<Recorder>,
) -> usize {
    let mut out = match &mut recorder {
        Some(_) => Sink::new(Framing::Sse),
        None => Sink::untracked(Framing::Sse, Vec::with_capacity(512)),
    };
    let mut sent = 0;
    let last = reads.len().saturating_sub(1);
    for (i, read) in reads.iter().enumerate() {
        if let Some(rec) = &mut recorder {
            let ms = babelgate_core::Clock::System.now_ms();
            rec.read(&Read::Bytes(read.clone()), ms);
            t.set_now(ms);
        }
        let before = t.events_translated;
        t.push_to(read, &mut out).expect("the stream translates");
        if let Some(rec) = &mut recorder {
            rec.made(t.events_translated != before);
        }
        if i == last {
            if let Some(rec) = &mut recorder {
                rec.finish(babelgate_core::Clock::System.now_ms());
            }
            t.finish_live_to(&mut out).expect("the stream ends well");
        }
        if let Some(rec) = &mut recorder {
            rec.flush().await;
        }
        if out.is_empty() {
            continue;
        }
        let chunk = match &mut recorder {
            Some(rec) => {
                let mut with_ids = Vec::new();
                rec.write(&out, &mut with_ids);
                out.clear();
                Bytes::from(with_ids)
            }
            None => Bytes::from(out.take().0),
        };
        sent += chunk.len();
        std::hint::black_box(chunk);
    }
    if let Some(mut rec) = recorder {
        rec.end(RunOutcome::Completed).await;
    }
    sent
}

/// The pump's translator for the stream, and its setup.
fn translator() -> (babelgate_core::Translator, Setup) {
    let ctx = EncodeContext {
        thread_id: Some("t".into()),
        run_id: Some("r".into()),
        ..EncodeContext::default()
    };
    let setup = Setup::of(&ctx);
    let t = transport::translator(
        Dialect::AgUi,
        Dialect::Vercel,
        ctx,
        babelgate_core::sse::DEFAULT_MAX_EVENT_BYTES,
        Transport::Sse,
        (Transport::Sse, false),
    );
    (t, setup)
}

/// A client that comes back to `run` from its start: the bytes it gets.
#[inline(never)]
async fn follow_once(store: &Arc<dyn RunLog>, run: &str) -> usize {
    let metrics = Arc::new(babelgate::metrics::Metrics::default());
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let follow = Follow {
        runs: store.clone(),
        run_id: run.to_string(),
        dialect: Dialect::Vercel,
        mode: Mode::After(None),
        last: None,
        input: Vec::new(),
        max_snapshot_bytes: 1 << 20,
        slot: Arc::new(Followers::default()).enter(1).expect("a place"),
        abort: Arc::default(),
        transport: Transport::Sse,
        replayed: Default::default(),
        counted: babelgate::metrics::CountAtEnd::new(metrics, "/r"),
        reply_to: None,
    };
    let run = follow.run(tx, babelgate::shutdown::Shutdown::default());
    let read = async {
        let mut got = 0;
        while let Some(c) = rx.recv().await {
            got += c.len();
        }
        got
    };
    let ((), got) = tokio::join!(run, read);
    got
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or_default();
    if !["log", "nolog", "replay"].contains(&mode) {
        eprintln!("usage: runlog_cost log|nolog|replay [streams] [events]");
        std::process::exit(2);
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
            let (t, setup) = translator();
            let recorder = writer.map(|w| {
                let begin = Begin::new(Dialect::AgUi, Dialect::Vercel, false, setup);
                Recorder::new(w, Duration::from_secs(300), &begin)
            });
            // Through a `dyn Future`: its poll is a function of its own,
            // which callgrind's toggle finds (an inlined one it does not).
            let relay: Pin<Box<dyn Future<Output = usize> + '_>> =
                Box::pin(relay(&reads, t, recorder));
            let relayed = relay.await;
            sent += match mode {
                "replay" => {
                    let run = format!("r{s}");
                    let follow: Pin<Box<dyn Future<Output = usize> + '_>> =
                        Box::pin(follow_once(&store, &run));
                    let got = follow.await;
                    // A replay writes the ids and bytes the client got,
                    // but for the ids' times: the same length.
                    assert_eq!(got, relayed, "the follower's stream");
                    got
                }
                _ => relayed,
            };
        }
    });
    println!("{streams} streams x {events} events, {mode}: {sent} bytes to the clients");
}
