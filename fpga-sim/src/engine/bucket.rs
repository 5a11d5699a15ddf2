//! The queue of the events a component schedules for itself while it runs its part of a
//! window (`spec-notes/simulator.md#engine`): a bucket queue over the window.
//!
//! The window `[start, end)` is cut into at most [`MAX_BUCKETS`] buckets of equal width (a
//! power of two picoseconds). An event goes to the end of its bucket's list, unsorted; a
//! bucket is sorted only when the queue reaches it and it becomes the current one. The events
//! come out in (time, sequence) order, exactly the order of a binary heap on the same keys
//! (keys are unique: sequence numbers are), but a push is an append and a pop the end of a
//! short sorted list, without the heap's walk of a dozen unpredictable comparisons down a
//! switch's few thousand events.
//!
//! The component's other events (those other components scheduled for it) come from a sorted
//! list, merged with this queue: [`BucketQueue::pop_before`] gives the queue's earliest event
//! only if it comes before the list's next one, and looks no further ahead than that event's
//! bucket. Events are never scheduled before the event being run, so a new event goes to
//! the end of a bucket after the current one, or into its place in the current bucket's
//! short sorted list. Any other event (scheduled before the current bucket, or outside the
//! window) is inserted in its place in that list too: the order holds whatever the keys,
//! only less cheaply.
//!
//! [`Calendar`](super::Calendar) is the same idea over the whole run (a ring of buckets and a
//! heap beyond it, sequence numbers of its own, a clock); this queue lives for one
//! component's part of one window, takes the keys it is given, and stops at a key rather than
//! a time.

/// Most buckets a window is cut into.
pub const MAX_BUCKETS: usize = 1024;

/// One event: time (ps), sequence number and the event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item<E> {
    /// Time, ps.
    pub at: u64,
    /// Sequence number (unique).
    pub seq: u64,
    /// The event.
    pub ev: E,
}

impl<E> Item<E> {
    fn key(&self) -> (u64, u64) {
        (self.at, self.seq)
    }
}

/// A bucket queue over one window; see the module documentation.
pub struct BucketQueue<E> {
    /// Start of the window, ps.
    start: u64,
    /// log2 of the bucket width in ps.
    shift: u32,
    /// Buckets in this window.
    count: usize,
    /// The buckets after the current one, each unsorted.
    buckets: Vec<Vec<Item<E>>>,
    /// Bit `b % 64` of word `b / 64`: bucket `b` holds events.
    occupied: Vec<u64>,
    /// Index of the current bucket.
    cur: usize,
    /// The current bucket's events (and any scheduled before it), latest first.
    now: Vec<Item<E>>,
    len: usize,
}

impl<E: Copy> Default for BucketQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Copy> BucketQueue<E> {
    /// An empty queue over an empty window.
    pub fn new() -> Self {
        BucketQueue {
            start: 0,
            shift: 0,
            count: 1,
            buckets: vec![Vec::new()],
            occupied: vec![0],
            cur: 0,
            now: Vec::new(),
            len: 0,
        }
    }

    /// Events in the queue.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Start over for events in `[start, end)` (any others are still ordered, only less
    /// cheaply). The queue must be empty.
    pub fn begin(&mut self, start: u64, end: u64) {
        debug_assert!(self.is_empty());
        let last = end.saturating_sub(start).max(1) - 1;
        let mut shift = 0;
        while (last >> shift) >= MAX_BUCKETS as u64 {
            shift += 1;
        }
        let count = (last >> shift) as usize + 1;
        if self.buckets.len() < count {
            self.buckets.resize_with(count, Vec::new);
            self.occupied.resize(count.div_ceil(64), 0);
        }
        self.start = start;
        self.shift = shift;
        self.count = count;
        self.cur = 0;
    }

    /// Add an event.
    pub fn push(&mut self, item: Item<E>) {
        let b = self.bucket(item.at);
        self.len += 1;
        if b <= self.cur {
            // The current list is sorted latest first: the event goes after every later one.
            let key = item.key();
            let pos = self.now.partition_point(|x| x.key() > key);
            self.now.insert(pos, item);
            return;
        }
        if let (Some(list), Some(word)) = (self.buckets.get_mut(b), self.occupied.get_mut(b / 64)) {
            list.push(item);
            *word |= 1u64 << (b % 64);
        }
    }

    /// Bucket of time `at`.
    fn bucket(&self, at: u64) -> usize {
        ((at.saturating_sub(self.start) >> self.shift) as usize).min(self.count - 1)
    }

    /// Take the earliest event if it comes before `limit` (a (time, sequence) key; `None`:
    /// take it whatever its key). The queue looks no further ahead than `limit`'s bucket,
    /// so that the events scheduled by the event at `limit`, which are never earlier than
    /// it, are appended to their buckets rather than inserted into a sorted list.
    pub fn pop_before(&mut self, limit: Option<(u64, u64)>) -> Option<Item<E>> {
        if self.now.is_empty() {
            let upto = limit.map_or(self.count - 1, |(at, _)| self.bucket(at));
            self.advance(upto.max(self.cur));
        }
        let last = self.now.last()?;
        if limit.is_some_and(|l| last.key() > l) {
            return None;
        }
        self.len -= 1;
        self.now.pop()
    }

    /// Take the earliest event, if any.
    pub fn pop(&mut self) -> Option<Item<E>> {
        self.pop_before(None)
    }

    /// Make the first bucket after the current one and at or before `upto` that holds events
    /// the current one; if there is none, bucket `upto` (the current list is empty).
    fn advance(&mut self, upto: usize) {
        let from = self.cur + 1;
        let mut w = from / 64;
        let mut mask = !0u64 << (from % 64);
        while w <= upto / 64 {
            let Some(word) = self.occupied.get_mut(w) else {
                break;
            };
            let bits = *word & mask;
            if bits != 0 {
                let b = w * 64 + bits.trailing_zeros() as usize;
                if b > upto {
                    break;
                }
                *word &= !(1u64 << (b % 64));
                self.cur = b;
                if let Some(list) = self.buckets.get_mut(b) {
                    std::mem::swap(&mut self.now, list);
                }
                self.now
                    .sort_unstable_by_key(|x| std::cmp::Reverse(x.key()));
                return;
            }
            w += 1;
            mask = !0;
        }
        self.cur = upto;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// Pops everything, checking `len` on the way.
    fn drain(q: &mut BucketQueue<u32>) -> Vec<(u64, u64, u32)> {
        let mut out = Vec::new();
        while let Some(i) = q.pop() {
            out.push((i.at, i.seq, i.ev));
        }
        assert_eq!(q.len(), 0);
        out
    }

    #[test]
    fn pops_in_time_then_sequence_order() {
        let mut q = BucketQueue::new();
        q.begin(1_000, 51_400);
        for (at, seq) in [(5_000, 3), (1_000, 9), (5_000, 1), (51_399, 2), (1_063, 4)] {
            q.push(Item {
                at,
                seq,
                ev: seq as u32,
            });
        }
        assert_eq!(q.len(), 5);
        assert_eq!(
            drain(&mut q).iter().map(|x| x.1).collect::<Vec<_>>(),
            [9, 4, 1, 3, 2]
        );
        assert!(q.pop().is_none());
    }

    #[test]
    fn pop_before_stops_at_the_limit() {
        let mut q = BucketQueue::new();
        q.begin(0, 100_000);
        q.push(Item {
            at: 90_000,
            seq: 1,
            ev: 1,
        });
        q.push(Item {
            at: 20_000,
            seq: 5,
            ev: 2,
        });
        // Not before (20_000, 4): nothing. Before (20_000, 6): the event.
        assert!(q.pop_before(Some((20_000, 4))).is_none());
        assert!(q.pop_before(Some((10, 0))).is_none());
        assert_eq!(q.pop_before(Some((20_000, 6))).map(|i| i.seq), Some(5));
        assert!(q.pop_before(Some((89_999, 9))).is_none());
        // An event scheduled into the current bucket, and one before it, still come first.
        q.push(Item {
            at: 89_999,
            seq: 7,
            ev: 3,
        });
        q.push(Item {
            at: 30,
            seq: 8,
            ev: 4,
        });
        assert_eq!(
            drain(&mut q).iter().map(|x| x.1).collect::<Vec<_>>(),
            [8, 7, 1]
        );
    }

    /// Windows of any length, and events outside the window, are still ordered; the queue is
    /// reused from window to window.
    #[test]
    fn any_window_and_events_outside_it() {
        let mut q = BucketQueue::new();
        for (start, end) in [
            (0, 1),
            (7, 8),
            (0, 3_000_000),
            (10, 5),
            (u64::MAX - 10, u64::MAX),
        ] {
            q.begin(start, end);
            for (k, at) in [
                end.saturating_add(5),
                start,
                start.saturating_sub(3),
                end / 2,
            ]
            .into_iter()
            .enumerate()
            {
                q.push(Item {
                    at,
                    seq: k as u64,
                    ev: 0,
                });
            }
            let out = drain(&mut q);
            assert!(
                out.windows(2).all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)),
                "{out:?}"
            );
            assert_eq!(out.len(), 4);
        }
    }

    proptest! {
        /// The merge as the window runs it, against a binary heap on the same keys: a sorted
        /// list of events from elsewhere, and events scheduled by each event run, at or
        /// after its time (mostly within the window, some past its end, many at that very
        /// time). Every event must run in (time, sequence) order.
        #[test]
        fn merges_like_a_binary_heap(
            len in 1u64..200_000,
            list in proptest::collection::vec(0u64..200_000, 0..60),
            spawn in proptest::collection::vec((0u8..4, 0u64..400_000), 1..300),
        ) {
            let start = 1_000_000;
            let mut list: Vec<u64> = list.into_iter().map(|d| start + d % len).collect();
            list.sort_unstable();
            let mut seq = 0u64;
            let list: Vec<(u64, u64)> = list
                .into_iter()
                .map(|at| {
                    seq += 1;
                    (at, seq)
                })
                .collect();
            let mut q = BucketQueue::new();
            q.begin(start, start + len);
            let mut heap = BinaryHeap::new();
            let mut spawn = spawn.into_iter();
            let mut next = 0;
            let mut ran = Vec::new();
            loop {
                let head = list.get(next).copied();
                let want = heap.peek().map(|Reverse(k): &Reverse<(u64, u64)>| *k);
                let key = match q.pop_before(head) {
                    Some(i) => {
                        prop_assert_eq!(Some((i.at, i.seq)), want);
                        heap.pop();
                        (i.at, i.seq)
                    }
                    None => {
                        prop_assert!(want.is_none() || want > head);
                        match head {
                            Some(k) => {
                                next += 1;
                                k
                            }
                            None => break,
                        }
                    }
                };
                ran.push(key);
                // The event just run schedules zero to two events at or after its time.
                for _ in 0..2 {
                    let Some((kind, dt)) = spawn.next() else { break };
                    if kind == 0 {
                        continue;
                    }
                    seq += 1;
                    let at = if kind == 1 { key.0 } else { key.0 + dt % (2 * len) };
                    q.push(Item { at, seq, ev: 0u32 });
                    heap.push(Reverse((at, seq)));
                }
                prop_assert_eq!(q.len(), heap.len());
            }
            prop_assert!(heap.is_empty() && q.is_empty());
            prop_assert!(ran.windows(2).all(|w| w[0] < w[1]));
        }
    }
}
