//! Ids and time that encoders synthesize when the source dialect has none.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

/// Makes ids. Random by default; sequential (`msg-1`, `msg-2`...) for tests and
/// golden files, so snapshots need no id filters.
#[derive(Debug, Clone)]
pub enum IdGen {
    Random { seed: RandomState, counter: u64 },
    Sequential { next: u64 },
}

impl Default for IdGen {
    fn default() -> Self {
        IdGen::Random {
            seed: RandomState::new(),
            counter: 0,
        }
    }
}

impl IdGen {
    pub fn sequential() -> Self {
        IdGen::Sequential { next: 1 }
    }

    /// A new id such as `msg_3f9c...` (random) or `msg-4` (sequential).
    pub fn next(&mut self, prefix: &str) -> String {
        match self {
            IdGen::Sequential { next } => {
                let n = *next;
                *next += 1;
                format!("{prefix}-{n}")
            }
            IdGen::Random { seed, counter } => {
                *counter += 1;
                // RandomState is keyed per process from the OS; two hashes
                // of a counter give 128 unpredictable-enough bits for ids.
                let mut a = seed.build_hasher();
                a.write_u64(*counter);
                let mut b = seed.build_hasher();
                b.write_u64(!*counter);
                format!("{prefix}_{:016x}{:016x}", a.finish(), b.finish())
            }
        }
    }
}

/// Where timestamps come from.
#[derive(Debug, Clone, Copy, Default)]
pub enum Clock {
    #[default]
    System,
    Fixed(i64),
}

impl Clock {
    /// Milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        match self {
            Clock::System => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0),
            Clock::Fixed(t) => *t,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_are_stable_and_random_ids_unique() {
        let mut s = IdGen::sequential();
        assert_eq!(s.next("msg"), "msg-1");
        assert_eq!(s.next("call"), "call-2");
        let mut r = IdGen::default();
        let (a, b) = (r.next("m"), r.next("m"));
        assert_ne!(a, b);
        assert_eq!(a.len(), 2 + 32);
    }
}
