//! A queue kept in fixed blocks, for the memory store's run logs: pushed at
//! the back, trimmed at the front, searched by a monotone predicate.
//!
//! Why not a `VecDeque`: a log grows one event at a time to thousands of
//! entries, and a `VecDeque` grows by reallocating, which copies every entry
//! it holds and touches fresh pages each time (a tenth of the gateway's CPU at
//! saturation went to that growth). Here an entry past the first block never
//! moves: a full block stays as it is and a new one is begun.
//!
//! Invariant: every block but the first and the last holds exactly
//! [`BLOCK`] items (items are pushed into the last block only and popped
//! from the first only), so an index is found by arithmetic.

use std::collections::VecDeque;

/// Items per block: 256 entries of the run log are about 20 KiB.
pub(crate) const BLOCK: usize = 256;

#[derive(Debug)]
pub(crate) struct Blocks<T> {
    blocks: VecDeque<VecDeque<T>>,
    len: usize,
}

impl<T> Default for Blocks<T> {
    fn default() -> Self {
        Blocks {
            blocks: VecDeque::new(),
            len: 0,
        }
    }
}

impl<T> Blocks<T> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn push_back(&mut self, item: T) {
        match self.blocks.back_mut() {
            Some(last) if last.len() < BLOCK => last.push_back(item),
            _ => {
                // Most runs are short: the first block grows as a
                // `VecDeque` does (a full block up front would be 20 KiB
                // per open stream); a run that filled one gets whole ones.
                let mut block = match self.blocks.is_empty() {
                    true => VecDeque::new(),
                    false => VecDeque::with_capacity(BLOCK),
                };
                block.push_back(item);
                // Room for one block to start with (a `VecDeque` takes
                // four): most runs never fill their first.
                if self.blocks.capacity() == 0 {
                    self.blocks.reserve_exact(1);
                }
                self.blocks.push_back(block);
            }
        }
        self.len += 1;
    }

    pub(crate) fn pop_front(&mut self) -> Option<T> {
        let first = self.blocks.front_mut()?;
        let item = first.pop_front();
        if first.is_empty() {
            self.blocks.pop_front();
        }
        if item.is_some() {
            self.len -= 1;
        }
        item
    }

    pub(crate) fn front(&self) -> Option<&T> {
        self.blocks.front().and_then(VecDeque::front)
    }

    pub(crate) fn back(&self) -> Option<&T> {
        self.blocks.back().and_then(VecDeque::back)
    }

    /// Where block `b` starts, as an index of the whole queue.
    fn start_of(&self, b: usize) -> usize {
        match b {
            0 => 0,
            _ => self.blocks.front().map_or(0, VecDeque::len) + (b - 1) * BLOCK,
        }
    }

    /// The index of the first item for which `pred` is false, `pred` being
    /// true for a prefix of the queue (as [`VecDeque::partition_point`]).
    pub(crate) fn partition_point(&self, mut pred: impl FnMut(&T) -> bool) -> usize {
        // The first block whose last item fails holds the point.
        let b = self
            .blocks
            .partition_point(|block| block.back().is_some_and(&mut pred));
        match self.blocks.get(b) {
            Some(block) => self.start_of(b) + block.partition_point(pred),
            None => self.len,
        }
    }

    /// The items from index `from` on, in order.
    pub(crate) fn iter_from(&self, from: usize) -> impl Iterator<Item = &T> {
        let first_len = self.blocks.front().map_or(0, VecDeque::len);
        let (b, skip) = if from < first_len {
            (0, from)
        } else {
            let rest = from - first_len;
            (1 + rest / BLOCK, rest % BLOCK)
        };
        self.blocks
            .range(b.min(self.blocks.len())..)
            .flatten()
            .skip(skip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same operations on a `VecDeque`, compared after each one: every
    /// length, both ends, every search point and every read position.
    fn check(ops: &[(bool, u8)]) {
        let mut b = Blocks::default();
        let mut v = VecDeque::new();
        let mut next = 0u32;
        for &(push, n) in ops {
            for _ in 0..n {
                if push {
                    b.push_back(next);
                    v.push_back(next);
                    next += 1;
                } else {
                    assert_eq!(b.pop_front(), v.pop_front());
                }
            }
            assert_eq!(b.len(), v.len());
            assert_eq!(b.back(), v.back());
            let lo = v.front().copied().unwrap_or(next);
            for c in [
                lo.saturating_sub(1),
                lo,
                lo + 1,
                lo + 255,
                lo + 256,
                lo + 257,
                next.saturating_sub(1),
                next,
                next + 1,
            ] {
                assert_eq!(
                    b.partition_point(|x| *x <= c),
                    v.partition_point(|x| *x <= c),
                    "point of {c}"
                );
            }
            for from in [
                0,
                1,
                255,
                256,
                257,
                511,
                512,
                v.len().saturating_sub(1),
                v.len(),
                v.len() + 3,
            ] {
                let got: Vec<u32> = b.iter_from(from).copied().collect();
                let want: Vec<u32> = v.iter().skip(from).copied().collect();
                assert_eq!(got, want, "from {from}");
            }
        }
    }

    #[test]
    fn behaves_as_a_vecdeque_across_block_edges() {
        check(&[
            (true, 255),
            (true, 1),
            (true, 1),
            (false, 1),
            (false, 255),
            (false, 1),
        ]);
        check(&[
            (true, 200),
            (true, 200),
            (true, 200),
            (false, 100),
            (false, 156),
            (true, 250),
            (false, 200),
        ]);
        check(&[(false, 3), (true, 1), (false, 1), (false, 1), (true, 255)]);
    }

    #[test]
    fn behaves_as_a_vecdeque_on_random_pushes_and_pops() {
        // A small deterministic generator: the store crate has no proptest.
        let mut s = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..40 {
            let mut ops = Vec::new();
            for _ in 0..30 {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ops.push((!s.is_multiple_of(3), (s >> 8) as u8));
            }
            check(&ops);
        }
    }

    #[test]
    fn past_the_first_block_a_pushed_item_never_moves() {
        let mut b = Blocks::default();
        for i in 0..=BLOCK as u64 {
            b.push_back(i);
        }
        let at = b.back().map(|x| x as *const u64);
        for i in 0..10_000 {
            b.push_back(i);
        }
        let moved = b.iter_from(BLOCK).next().map(|x| x as *const u64);
        assert_eq!(moved, at);
    }

    #[test]
    fn a_short_run_holds_no_whole_block() {
        let mut b = Blocks::default();
        for i in 0..15u64 {
            b.push_back(i);
        }
        let room: usize = b.blocks.iter().map(VecDeque::capacity).sum();
        assert!(room < 64, "{room} slots for 15 items");
    }
}
