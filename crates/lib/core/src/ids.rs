//! Ids and time that encoders synthesize when the source dialect has none.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Makes ids. Random by default; sequential (`msg-1`, `msg-2`...) for tests and
/// golden files, so snapshots need no id filters. Its state is plain data: a
/// copy taken before a stream (see `journal::Setup`) mints the same ids again
/// for the same calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdGen {
    /// Ids keyed by a random key drawn once per generator.
    Random {
        key: [u64; 2],
        counter: u64,
    },
    Sequential {
        next: u64,
    },
}

impl Default for IdGen {
    fn default() -> Self {
        // RandomState is keyed from the OS: two of its hashes make the key.
        let word = |salt: u64| {
            let mut h = RandomState::new().build_hasher();
            h.write_u64(salt);
            h.finish()
        };
        IdGen::Random {
            key: [word(1), word(2)],
            counter: 0,
        }
    }
}

/// SipHash-1-3 of `word` under `key`: a keyed PRF, so ids do not give the key
/// away (an invertible mixer would: one id, and the rest follow).
fn keyed(key: [u64; 2], word: u64) -> u64 {
    use std::hash::Hasher;
    let mut h = siphasher::sip::SipHasher13::new_with_keys(key[0], key[1]);
    h.write_u64(word);
    h.finish()
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
            IdGen::Random { key, counter } => {
                *counter += 1;
                // 128 bits from a random key and the counter: unique per
                // generator, unrelated between generators.
                let a = keyed(*key, *counter);
                let b = keyed(*key, !*counter);
                format!("{prefix}_{a:016x}{b:016x}")
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
        // a copy of the state mints the same ids; another generator others
        let mut copy = IdGen::default();
        let mut again = copy.clone();
        assert_eq!(copy.next("m"), again.next("m"));
        assert_ne!(copy.next("m"), IdGen::default().next("m"));
    }
}
