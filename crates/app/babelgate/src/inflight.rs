//! `[server] max_inflight_bytes`: one budget for the memory that request
//! bodies and upstream events take while they are read and translated, over
//! the whole gateway. Each body or event holds what it may cost parsed
//! ([`babelgate_core::cost::FACTOR`] times its bytes) for as long as it is
//! worked on; once the holds reach the budget, new requests are refused with
//! 503 `memory_budget` and `retry-after` before their body is read, and a
//! body that would pass the budget as it arrives is refused the same way.
//! Streams already running are not cut: their events are counted, so that
//! new work waits for them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use http::StatusCode;

use crate::error::GatewayError;

/// What a refused client is told to wait, in seconds.
const RETRY_AFTER_SECS: u64 = 1;

/// The budget when `/proc/meminfo` cannot be read.
const FALLBACK: usize = 1 << 30;

/// The default budget: a quarter of physical memory (the rest left to the
/// streams' own state, the store and the system), or 1 GiB where it cannot
/// be read.
pub fn default_budget() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .as_deref()
        .and_then(mem_total)
        .map_or(FALLBACK, |total| total / 4)
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
fn mem_total(meminfo: &str) -> Option<usize> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: usize = line
        .trim_start_matches("MemTotal:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// The gateway's budget and what is held against it.
#[derive(Debug)]
pub struct Inflight {
    budget: usize,
    used: AtomicUsize,
}

impl Inflight {
    pub fn new(budget: usize) -> Arc<Inflight> {
        Arc::new(Inflight {
            budget,
            used: AtomicUsize::new(0),
        })
    }

    /// Bytes held now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    pub fn budget(&self) -> usize {
        self.budget
    }

    /// A hold for a new request, or 503 when the budget is spent.
    pub fn admit(self: &Arc<Self>) -> Result<Held, GatewayError> {
        if self.used() >= self.budget {
            return Err(self.refusal());
        }
        Ok(self.hold(0))
    }

    /// A hold that is never refused (the events of a stream already running).
    pub fn hold(self: &Arc<Self>, bytes: usize) -> Held {
        self.used.fetch_add(bytes, Ordering::Relaxed);
        Held {
            of: self.clone(),
            bytes,
        }
    }

    fn refusal(&self) -> GatewayError {
        let mut e = GatewayError::client(
            StatusCode::SERVICE_UNAVAILABLE,
            "memory_budget",
            format!(
                "the gateway is at its memory budget for requests in flight \
                 ([server] max_inflight_bytes = {}); retry later",
                self.budget
            ),
        );
        e.fault = crate::error::Fault::Internal;
        e.retry_after = Some(RETRY_AFTER_SECS);
        e
    }
}

/// Bytes held against the budget until dropped.
#[derive(Debug)]
pub struct Held {
    of: Arc<Inflight>,
    bytes: usize,
}

impl Held {
    /// Holds `more` bytes besides, or refuses (503) when that passes the
    /// budget (what was held stays held until the hold is dropped).
    pub fn grow(&mut self, more: usize) -> Result<(), GatewayError> {
        let before = self.of.used.fetch_add(more, Ordering::Relaxed);
        self.bytes += more;
        if before.saturating_add(more) > self.of.budget {
            return Err(self.of.refusal());
        }
        Ok(())
    }

    /// Holds exactly `bytes` from now on, never refused.
    pub fn set(&mut self, bytes: usize) {
        if bytes >= self.bytes {
            self.of
                .used
                .fetch_add(bytes - self.bytes, Ordering::Relaxed);
        } else {
            self.of
                .used
                .fetch_sub(self.bytes - bytes, Ordering::Relaxed);
        }
        self.bytes = bytes;
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.of.used.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_count_until_dropped_and_refuse_past_the_budget() {
        let b = Inflight::new(100);
        let mut a = b.admit().unwrap();
        a.grow(60).unwrap();
        let mut c = b.admit().unwrap();
        let e = c.grow(50).unwrap_err();
        assert_eq!(
            (e.status, e.code, e.retry_after),
            (StatusCode::SERVICE_UNAVAILABLE, "memory_budget", Some(1))
        );
        drop(c);
        assert_eq!(b.used(), 60);
        let mut ev = b.hold(40);
        assert!(b.admit().is_err(), "at the budget: new requests wait");
        ev.set(10);
        assert_eq!(b.used(), 70);
        drop((a, ev));
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn the_default_is_a_quarter_of_physical_memory() {
        let info = "MemTotal:       16314752 kB\nMemFree:         1000 kB\n";
        assert_eq!(mem_total(info), Some(16_314_752 * 1024));
        assert!(default_budget() >= 64 << 20);
    }
}
