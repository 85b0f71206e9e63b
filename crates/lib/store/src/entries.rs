//! The entries of one run log in the memory store: the buffers appended, each
//! kept once, and per entry its id and where its bytes lie in one of them.
//!
//! Why not an [`Entry`] each: the gateway appends a whole upstream read at
//! once, often hundreds of events in one buffer, and a handle per event (a
//! `Bytes` is 32 bytes, and each slice of a shared buffer bumps its count)
//! cost more room and time than the event's own bytes. Here an entry is its
//! id, packed in 8 bytes, and four offsets (24 bytes in all), and a buffer
//! goes when its last entry does.

use std::collections::VecDeque;

use bytes::Bytes;

use crate::blocks::Blocks;
use crate::{Entry, EventId, Part};

/// Where one entry's bytes lie: `start..end` of buffer `chunk` (its number
/// since the run began, wrapping), the event up to `split`, the rest its
/// core part when [`CORE`] is set in `end`.
#[derive(Debug, Clone, Copy)]
struct Slot {
    chunk: u32,
    start: u32,
    split: u32,
    end: u32,
}

/// The top bit of [`Slot::end`]: the entry has a core part (an empty one is
/// kept as given). Buffers are therefore under 2 GiB ([`MAX_CHUNK`]).
const CORE: u32 = 1 << 31;

/// The largest buffer kept whole; a larger one (never an upstream read) is
/// kept as one buffer per entry.
pub(crate) const MAX_CHUNK: usize = (CORE - 1) as usize;

impl Slot {
    fn end(self) -> usize {
        (self.end & !CORE) as usize
    }

    fn has_core(self) -> bool {
        self.end & CORE != 0
    }

    fn size(self) -> usize {
        self.end() - self.start as usize
    }
}

/// Bits of a packed id that hold its `seq` (the store's ids keep it below
/// [`SEQ_LIMIT`]); the rest hold its `ms` after the log's first.
const SEQ_BITS: u32 = 24;
pub(crate) const SEQ_LIMIT: u64 = 1 << SEQ_BITS;
/// 2^40 ms is 34 years: a run's ids stay within it of its first.
const MS_LIMIT: u64 = (1 << (64 - SEQ_BITS)) - 1;

#[derive(Debug, Default)]
pub(crate) struct Entries {
    slots: Blocks<(u64, Slot)>,
    /// The `ms` of the first id appended; ids are packed relative to it.
    base_ms: Option<u64>,
    /// The buffers still holding an entry, oldest first.
    chunks: VecDeque<Bytes>,
    /// The number of `chunks[0]`.
    first_chunk: u32,
}

impl Entries {
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    fn pack(&mut self, id: EventId) -> u64 {
        let base = *self.base_ms.get_or_insert(id.ms);
        (id.ms.saturating_sub(base).min(MS_LIMIT) << SEQ_BITS) | id.seq.min(SEQ_LIMIT - 1)
    }

    fn unpack(&self, packed: u64) -> EventId {
        EventId {
            ms: self.base_ms.unwrap_or(0) + (packed >> SEQ_BITS),
            seq: packed & (SEQ_LIMIT - 1),
        }
    }

    /// Appends the parts of `chunk` with `ids` (one each, in order); returns
    /// the bytes added. Parts must lie within the chunk and the chunk be at
    /// most [`MAX_CHUNK`] long (see [`Entries::push_entry`] otherwise).
    pub(crate) fn push_chunk(
        &mut self,
        chunk: Bytes,
        parts: &[Part],
        ids: impl Iterator<Item = EventId>,
    ) -> usize {
        debug_assert!(chunk.len() <= MAX_CHUNK);
        let number = self.first_chunk.wrapping_add(self.chunks.len() as u32);
        let mut added = 0;
        for (id, p) in ids.zip(parts) {
            let end = p.end.min(chunk.len() as u32);
            let start = p.start.min(end);
            let split = p.split.clamp(start, end);
            added += (end - start) as usize;
            let end = if p.has_core { end | CORE } else { end };
            let id = self.pack(id);
            self.slots.push_back((
                id,
                Slot {
                    chunk: number,
                    start,
                    split,
                    end,
                },
            ));
        }
        // Room for one to start with (a `VecDeque` takes four): most runs
        // are a few reads.
        if self.chunks.capacity() == 0 {
            self.chunks.reserve_exact(1);
        }
        self.chunks.push_back(chunk);
        added
    }

    /// Appends one entry as a buffer of its own; returns its size.
    pub(crate) fn push_entry(&mut self, id: EventId, entry: Entry) -> usize {
        let size = entry.size();
        if size > MAX_CHUNK {
            // Never an event of a stream (those are bounded far below): its
            // event part is kept, cut to 2 GiB, without its core part.
            let event = entry.event();
            return self.push_entry(id, Entry::data(event.slice(..MAX_CHUNK.min(event.len()))));
        }
        let part = Part {
            start: 0,
            split: entry.split() as u32,
            end: size as u32,
            has_core: entry.has_core,
        };
        self.push_chunk(entry.bytes, &[part], std::iter::once(id))
    }

    /// Drops the oldest entry: its id and size.
    pub(crate) fn pop_front(&mut self) -> Option<(EventId, usize)> {
        let (id, slot) = self.slots.pop_front()?;
        // The buffers before the next entry's (all of them, when none is
        // left) hold nothing more.
        let keep_from = match self.slots.front() {
            Some((_, next)) => next.chunk,
            None => self.first_chunk.wrapping_add(self.chunks.len() as u32),
        };
        while self.first_chunk != keep_from && self.chunks.pop_front().is_some() {
            self.first_chunk = self.first_chunk.wrapping_add(1);
        }
        Some((self.unpack(id), slot.size()))
    }

    pub(crate) fn back_id(&self) -> Option<EventId> {
        self.slots.back().map(|&(id, _)| self.unpack(id))
    }

    /// The index of the first entry whose id is after `id`.
    pub(crate) fn after(&self, id: EventId) -> usize {
        self.slots.partition_point(|&(i, _)| self.unpack(i) <= id)
    }

    /// The entries from index `from` on: id, event and core part.
    pub(crate) fn iter_from(
        &self,
        from: usize,
    ) -> impl Iterator<Item = (EventId, Bytes, Option<Bytes>)> + '_ {
        self.slots.iter_from(from).map(|&(id, slot)| {
            let (start, split, end) = (slot.start as usize, slot.split as usize, slot.end());
            // Offsets were cut to their buffer when appended.
            let slice = |range: std::ops::Range<usize>| {
                self.chunks
                    .get(slot.chunk.wrapping_sub(self.first_chunk) as usize)
                    .map_or_else(Bytes::new, |c| c.slice(range))
            };
            let core = slot.has_core().then(|| slice(split..end));
            (self.unpack(id), slice(start..split), core)
        })
    }

    /// Buffers held, for tests.
    #[cfg(test)]
    pub(crate) fn chunks(&self) -> usize {
        self.chunks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(seq: u64) -> EventId {
        EventId { ms: 1, seq }
    }

    fn part(start: u32, split: u32, end: u32, has_core: bool) -> Part {
        Part {
            start,
            split,
            end,
            has_core,
        }
    }

    fn all(e: &Entries) -> Vec<(u64, String, Option<String>)> {
        let s = |b: &Bytes| String::from_utf8(b.to_vec()).unwrap();
        e.iter_from(0)
            .map(|(id, d, c)| (id.seq, s(&d), c.as_ref().map(s)))
            .collect()
    }

    #[test]
    fn entries_read_back_from_their_chunks_and_a_chunk_goes_with_its_last_entry() {
        let mut e = Entries::default();
        let added = e.push_chunk(
            Bytes::from_static(b"aaCCbbD"),
            &[part(0, 2, 4, true), part(4, 6, 7, true)],
            (1..).map(id),
        );
        assert_eq!(added, 7);
        assert_eq!(
            e.push_entry(id(3), Entry::data(Bytes::from_static(b"cc"))),
            2
        );
        assert_eq!(
            e.push_entry(
                id(4),
                Entry::new(Bytes::from_static(b"dd"), Some(Bytes::new()))
            ),
            2
        );
        assert_eq!(
            all(&e),
            [
                (1, "aa".into(), Some("CC".into())),
                (2, "bb".into(), Some("D".into())),
                (3, "cc".into(), None),
                (4, "dd".into(), Some("".into())),
            ]
        );
        assert_eq!((e.len(), e.chunks(), e.back_id()), (4, 3, Some(id(4))));
        assert_eq!(e.after(id(2)), 2);
        assert_eq!(e.pop_front(), Some((id(1), 4)));
        assert_eq!(e.chunks(), 3, "the first chunk still holds entry 2");
        assert_eq!(e.pop_front(), Some((id(2), 3)));
        assert_eq!(e.chunks(), 2);
        assert_eq!(e.iter_from(1).next().map(|x| x.0), Some(id(4)));
        assert_eq!(e.pop_front().map(|x| x.0), Some(id(3)));
        assert_eq!(e.pop_front().map(|x| x.0), Some(id(4)));
        assert_eq!((e.len(), e.chunks(), e.pop_front()), (0, 0, None));
        // And it starts again after being emptied.
        e.push_entry(id(5), Entry::data(Bytes::from_static(b"ee")));
        assert_eq!(all(&e), [(5, "ee".into(), None)]);
    }

    #[test]
    fn ids_come_back_as_appended() {
        let mut e = Entries::default();
        let ids = [
            EventId {
                ms: 1_700_000_000_000,
                seq: 0,
            },
            EventId {
                ms: 1_700_000_000_000,
                seq: SEQ_LIMIT - 1,
            },
            EventId {
                ms: 1_700_000_000_001,
                seq: 3,
            },
            // 30 years on.
            EventId {
                ms: 1_700_000_000_000 + 30 * 365 * 86_400_000,
                seq: 7,
            },
        ];
        for id in ids {
            e.push_entry(id, Entry::data(Bytes::from_static(b"x")));
        }
        let back: Vec<EventId> = e.iter_from(0).map(|x| x.0).collect();
        assert_eq!(back, ids);
        assert_eq!(e.back_id(), Some(ids[3]));
        assert_eq!(e.after(ids[1]), 2);
        assert_eq!(e.after(EventId { ms: 1, seq: 0 }), 0);
        assert_eq!(e.pop_front().map(|x| x.0), Some(ids[0]));
    }

    #[test]
    fn parts_outside_the_chunk_are_cut_to_it() {
        let mut e = Entries::default();
        let added = e.push_chunk(
            Bytes::from_static(b"abc"),
            &[part(2, 1, 9, false), part(5, 6, 7, true)],
            (1..).map(id),
        );
        assert_eq!(added, 1);
        assert_eq!(
            all(&e),
            [(1, "".into(), None), (2, "".into(), Some("".into()))]
        );
    }
}
