//! The process the gateway runs in: its tokio runtime, and how memory and
//! descriptors are handled around it (jemalloc's caches flushed when the
//! gateway goes quiet, freed pages purged in the background, the descriptor
//! table grown once at start). Called by the binary at start only.

/// The unit tests of this module measure jemalloc: their binary allocates
/// with it, as the gateway's does (`main.rs`).
#[cfg(all(test, not(target_env = "msvc")))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

// Argued exception: at startup, before any input; a process that cannot
// build its runtime has nothing better to do than stop with the reason.
#[allow(clippy::expect_used)]
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_unpark(when_quiet::worked)
        .on_thread_park(when_quiet::parked)
        .build()
        .expect("tokio runtime")
}

/// What jemalloc holds for later, handed back when the gateway goes quiet.
///
/// Each worker thread keeps freed objects in a cache of its own for its next
/// allocations, and a cached object keeps its whole slab (a few pages) in
/// use. A busy thread reuses them; an idle one never looks at its cache
/// again, so after a burst of streams about 5 MiB stayed resident for good
/// (measured: 3,000 streams closed, 2.6 MiB anonymous memory before them and
/// 7.9 MiB 30 s after; 2.7 MiB with the caches off). And the pages freed
/// go back to the system only over jemalloc's decay time (10 s, counted
/// from when each was freed): a run log freed at the end of its retention
/// was still resident half a minute after the last stream (9,900 streams
/// of 15 events, retention 10 s: 16.5 MiB 30 s after against 12.7 idle).
///
/// A worker about to park with no proxied stream open flushes its cache and
/// has the arenas purge their freed pages, once until it runs again; while
/// streams are proxied it only reads their count, so the hot path pays next
/// to nothing. (A resumed stream that follows another instance's run is not
/// a proxied one: alone, it lets a worker do this each time it parks.)
///
/// The first worker to find the gateway quiet also wakes the others: one
/// that parked while streams were open sleeps on until the next stream
/// (timers wake only the worker that waits on them), and a cache is flushed
/// by its own thread only. A full bench run kept 3.2 MiB that way.
#[cfg(not(target_env = "msvc"))]
pub mod when_quiet {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Condvar, Mutex, OnceLock, Weak};
    use std::time::Duration;

    use crate::server::Gateway;
    use tikv_jemalloc_ctl::{Access, AsName};

    /// The gateway whose streams say whether the process is quiet.
    pub static GATEWAY: OnceLock<Weak<Gateway>> = OnceLock::new();

    /// The workers were woken since the gateway last went quiet.
    static NUDGED: AtomicBool = AtomicBool::new(false);

    thread_local! {
        /// This worker ran since its cache was last flushed.
        static WORKED: Cell<bool> = const { Cell::new(false) };
    }

    pub fn worked() {
        WORKED.with(|w| w.set(true));
    }

    pub fn parked() {
        park_with(|| {
            GATEWAY
                .get()
                .and_then(Weak::upgrade)
                .is_some_and(|g| g.active_streams() == 0)
        });
    }

    fn park_with(quiet: impl FnOnce() -> bool) {
        if !WORKED.with(Cell::get) {
            return;
        }
        if quiet() {
            WORKED.with(|w| w.set(false));
            flush();
            purge();
            if !NUDGED.swap(true, Ordering::AcqRel) {
                nudge();
            }
        } else if NUDGED.load(Ordering::Relaxed) {
            // Read first: a busy worker parks often, and a write each time
            // would move the flag's line between cores.
            NUDGED.store(false, Ordering::Relaxed);
        }
    }

    /// How long a nudged worker waits for the others to take theirs.
    const MEET: Duration = Duration::from_millis(20);

    /// Hands every worker a task that waits (up to [`MEET`]) until each has
    /// one: a worker holding one cannot take another, so each runs its own,
    /// then parks, finds the gateway quiet and flushes. The tasks are
    /// spawned from a thread of their own: spawned here, they would go to
    /// this worker's own queue, and no other worker would be told of them.
    /// (A thread, not `spawn_blocking`, which panics when the system has no
    /// thread to give; here a failed spawn only leaves the caches as they
    /// were.)
    fn nudge() {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let workers = rt.metrics().num_workers();
        if workers < 2 {
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("babelgate-nudge".into())
            .spawn(move || {
                let met = std::sync::Arc::new((Mutex::new(0usize), Condvar::new()));
                for _ in 0..workers {
                    let met = met.clone();
                    drop(rt.spawn(async move {
                        let (count, all) = &*met;
                        let mut n = count.lock().unwrap_or_else(|e| e.into_inner());
                        *n += 1;
                        all.notify_all();
                        // Blocks this worker on purpose, briefly and only when
                        // the gateway is quiet, so that it takes no other's task.
                        let _ = all
                            .wait_timeout_while(n, MEET, |n| *n < workers)
                            .unwrap_or_else(|e| e.into_inner());
                    }));
                }
            });
        drop(spawned);
    }

    /// jemalloc's `thread.tcache.flush` takes no value, which the safe
    /// interface cannot express; turning the cache off flushes and frees it,
    /// and on again starts an empty one.
    fn flush() {
        #[cfg(test)]
        tests::flushed_here();
        let enabled = b"thread.tcache.enabled\0".name();
        if enabled.write(false).is_ok() {
            let _ = enabled.write(true);
        }
    }

    /// Hands every arena's freed pages back now. jemalloc applies a new
    /// decay time at once, and with 0 it purges all it holds freed; the
    /// arena's own time is then put back. (`arena.<i>.purge` takes no value,
    /// which the safe interface cannot express.) An arena not yet in use
    /// refuses the read.
    fn purge() {
        let arenas: Result<u32, _> = b"arenas.narenas\0".name().read();
        let Ok(arenas) = arenas else {
            return;
        };
        for i in 0..arenas {
            let name = format!("arena.{i}.dirty_decay_ms\0");
            let decay = name.as_bytes().name();
            let ms: Result<isize, _> = decay.read();
            if let Ok(ms) = ms {
                if decay.write(0isize).is_ok() {
                    let _ = decay.write(ms);
                }
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// Held by the tests that purge, so that one's purge does not give
        /// back the pages another counts.
        static PURGING: std::sync::Mutex<()> = std::sync::Mutex::new(());

        fn cache_on() -> bool {
            b"thread.tcache.enabled\0".name().read().unwrap()
        }

        /// The flush must leave the cache on: a thread without one would
        /// take every allocation to its arena, slower on every stream.
        #[test]
        fn a_flush_leaves_the_thread_its_cache() {
            std::thread::spawn(|| {
                let kept: Vec<Vec<u8>> = (0..1000).map(|i| vec![0; 16 + i % 200]).collect();
                drop(kept);
                assert!(cache_on());
                flush();
                assert!(cache_on());
                // And it still allocates.
                let again: Vec<Box<u64>> = (0..1000).map(Box::new).collect();
                assert_eq!(again.iter().map(|b| **b).sum::<u64>(), 499_500);
            })
            .join()
            .unwrap();
        }

        /// Pages in the arenas' hands, freed and not yet given back.
        fn freed_pages() -> usize {
            tikv_jemalloc_ctl::epoch::advance().unwrap();
            b"stats.arenas.4096.pdirty\0".name().read().unwrap()
        }

        /// 16 MiB in blocks past the thread cache's sizes (the arena's own).
        fn sixteen_mib() -> Vec<Vec<u8>> {
            (0..256).map(|_| vec![1u8; 64 * 1024]).collect()
        }

        /// Freed pages go back at once, not over the decay time; the arenas
        /// keep their decay time for the busy gateway.
        #[test]
        fn a_purge_hands_back_the_freed_pages() {
            let _alone = PURGING.lock().unwrap_or_else(|e| e.into_inner());
            std::thread::spawn(|| {
                let decay = || -> isize { b"arena.0.dirty_decay_ms\0".name().read().unwrap() };
                let before = decay();
                // Past the thread cache's sizes: freed to the arena itself.
                // 16 MiB freed, 4 MiB looked for: the other tests of this
                // binary allocate meanwhile, from the same freed pages.
                drop(sixteen_mib());
                let held = freed_pages();
                assert!(held >= 1024, "{held} pages held after 16 MiB freed");
                purge();
                // Other tests of this binary allocate meanwhile: a little may
                // be freed again (none of them purges meanwhile).
                let left = freed_pages();
                assert!(left < 256, "{left} pages held after the purge");
                assert_eq!(decay(), before);
            })
            .join()
            .unwrap();
        }

        /// A worker flushes and purges once it parks with no stream open, and
        /// once only until it runs again; with no gateway yet it does nothing.
        #[test]
        fn a_worker_flushes_when_it_parks_with_no_stream_open() {
            let _alone = PURGING.lock().unwrap_or_else(|e| e.into_inner());
            std::thread::spawn(|| {
                worked();
                parked();
                assert!(WORKED.with(Cell::get), "no gateway: not flushed");
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                let config = crate::config::Config::parse(
                    "[[routes]]\npath = \"/a\"\nclient = \"vercel\"\nupstream = \"http://127.0.0.1:9/\"\nupstream_protocol = \"ag-ui\"\n",
                )
                .unwrap();
                let gateway = rt.block_on(async { std::sync::Arc::new(Gateway::new(config).unwrap()) });
                let _ = GATEWAY.set(std::sync::Arc::downgrade(&gateway));
                drop(sixteen_mib());
                let held = freed_pages();
                assert!(held >= 1024, "{held} pages held after 16 MiB freed");
                parked();
                assert!(!WORKED.with(Cell::get), "quiet: flushed");
                assert!(cache_on());
                let left = freed_pages();
                assert!(left < 256, "quiet: purged, {left} pages held");
            })
            .join()
            .unwrap();
        }

        /// The threads that flushed their cache, in order.
        static FLUSHED: std::sync::Mutex<Vec<std::thread::ThreadId>> =
            std::sync::Mutex::new(Vec::new());

        pub(super) fn flushed_here() {
            FLUSHED
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(std::thread::current().id());
        }

        /// When the gateway goes quiet, the worker that parked while streams
        /// were open flushes too, not only the one a timer woke (only that
        /// one flushed before the nudge: the test waited in vain).
        #[test]
        fn every_worker_flushes_when_the_gateway_goes_quiet() {
            use std::sync::atomic::AtomicBool;
            use std::sync::{Arc, Barrier};
            use std::time::{Duration, Instant};
            static QUIET: AtomicBool = AtomicBool::new(false);
            let _alone = PURGING.lock().unwrap_or_else(|e| e.into_inner());
            NUDGED.store(false, Ordering::SeqCst);
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .on_thread_unpark(worked)
                .on_thread_park(|| park_with(|| QUIET.load(Ordering::SeqCst)))
                .build()
                .unwrap();
            // Both workers run at once (each holds its task until the other
            // has one), then park while the gateway is busy: no flush.
            let both = Arc::new(Barrier::new(2));
            let tasks: Vec<_> = (0..2)
                .map(|_| {
                    let both = both.clone();
                    rt.spawn(async move {
                        both.wait();
                        std::thread::current().id()
                    })
                })
                .collect();
            let workers: Vec<_> = tasks.into_iter().map(|t| rt.block_on(t).unwrap()).collect();
            assert_ne!(workers[0], workers[1]);
            // A timer wakes the worker that waits on it, and only that one.
            drop(rt.spawn(async { tokio::time::sleep(Duration::from_millis(300)).await }));
            std::thread::sleep(Duration::from_millis(100));
            FLUSHED.lock().unwrap_or_else(|e| e.into_inner()).clear();
            QUIET.store(true, Ordering::SeqCst);
            let deadline = Instant::now() + Duration::from_secs(3);
            let all = || {
                let flushed = FLUSHED.lock().unwrap_or_else(|e| e.into_inner());
                workers.iter().all(|w| flushed.contains(w))
            };
            while !all() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            let flushed = FLUSHED.lock().unwrap_or_else(|e| e.into_inner()).clone();
            rt.shutdown_timeout(Duration::from_secs(1));
            assert!(
                workers.iter().all(|w| flushed.contains(w)),
                "workers {workers:?}, flushed {flushed:?}"
            );
        }
    }
}

#[cfg(target_env = "msvc")]
pub mod when_quiet {
    pub static GATEWAY: std::sync::OnceLock<std::sync::Weak<crate::server::Gateway>> =
        std::sync::OnceLock::new();
    pub fn worked() {}
    pub fn parked() {}
}

/// jemalloc hands freed pages back to the system only as it allocates
/// again, so after a burst of streams a quiet gateway would keep its peak
/// RSS. Its background thread purges them on a timer instead (within about
/// ten seconds, its decay time). Not on by default in jemalloc.
///
/// What it can purge depends on its slabs, the runs of pages that small
/// objects of one size share: a slab goes back only once all of its objects
/// are freed. jemalloc is built with slabs of 8 pages for every size
/// (`.cargo/config.toml`), not 1 to 7: after 9,900 streams closed, 1.3 MiB
/// less stayed resident, at the same speed (docs/benchmarks-log.md).
#[cfg(not(target_env = "msvc"))]
pub fn return_freed_memory() {
    if let Err(e) = tikv_jemalloc_ctl::background_thread::write(true) {
        tracing::warn!(error = %e, "jemalloc's background purging could not be turned on");
    }
}

#[cfg(target_env = "msvc")]
pub fn return_freed_memory() {}

/// Grows the descriptor table once, at start, to hold every connection the
/// gateway may take (two descriptors each: client and upstream), within the
/// soft `RLIMIT_NOFILE`. Linux grows it as descriptors are opened, doubling,
/// and in a process of several threads each growth waits for an RCU grace
/// period (`synchronize_rcu`): milliseconds in which the worker that
/// accepted or connected runs no other stream. The table costs 8 bytes of
/// kernel memory per descriptor, none of the process's own.
#[cfg(target_os = "linux")]
pub fn reserve_descriptors(max_connections: usize) {
    use rustix::process::{getrlimit, Resource};
    let want = u64::try_from(max_connections)
        .unwrap_or(u64::MAX)
        .saturating_mul(2)
        .saturating_add(64);
    let top = getrlimit(Resource::Nofile)
        .current
        .map_or(want, |limit| limit.min(want));
    // The lowest free descriptor at or above `top - 1`: the table grows to
    // hold it, and keeps that size once it is closed.
    let Ok(min) = i32::try_from(top.saturating_sub(1)) else {
        return;
    };
    if let Err(e) = rustix::io::fcntl_dupfd_cloexec(std::io::stderr(), min) {
        tracing::debug!(error = %e, "the descriptor table could not be grown ahead");
    }
}

#[cfg(not(target_os = "linux"))]
pub fn reserve_descriptors(_max_connections: usize) {}
