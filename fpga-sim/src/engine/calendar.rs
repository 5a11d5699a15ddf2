//! A calendar queue with the same order as [`Scheduler`](super::Scheduler): events pop by
//! (time, sequence), so a model gets the same run from either.
//!
//! Time is cut into buckets of 2^`shift` ps; a ring of `N` buckets covers the near future and
//! a binary heap holds events beyond it. The current bucket is taken out of the ring and sorted
//! (descending, so the next event is popped from the end) when it becomes current. Buckets are
//! narrow (32 ps by default), so the current one holds few events even on the largest pods
//! (`ualink-1024` runs about two events per picosecond) and an insertion into it moves little.
//! Events scheduled for the current time itself (a component woken "now") come after every
//! event already due then, in the order they are scheduled: they go to a FIFO, so a burst of
//! them (every link end kicked at once) costs O(1) each. A bitmap of non-empty buckets lets the queue skip empty
//! stretches a word at a time.
//!
//! Memory: only non-empty buckets own storage. A bucket's storage goes back to a pool when the
//! bucket has been run and is reused by the next bucket that receives an event, so the queue's
//! memory follows the number of pending events, not the horizon, and a run in steady state
//! allocates nothing per event.

use podlink_protocol::time::Instant;
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

#[derive(Clone, Copy)]
struct Entry<E> {
    at: u64,
    seq: u64,
    ev: E,
}

impl<E> Entry<E> {
    fn key(&self) -> (u64, u64) {
        (self.at, self.seq)
    }
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        self.key() == o.key()
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, o: &Self) -> Ordering {
        self.key().cmp(&o.key())
    }
}

/// Sort `v` descending by (time, sequence). Keys are unique (sequence numbers are), so the
/// result is the one any sort gives; a bucket holds a handful of events, for which an
/// insertion sort on the key costs a fraction of the library sort's set-up.
fn sort_descending<E: Copy>(v: &mut [Entry<E>]) {
    if v.len() > 32 {
        v.sort_unstable_by_key(|e| Reverse(e.key()));
        return;
    }
    for i in 1..v.len() {
        let x = v[i];
        let k = x.key();
        let mut j = i;
        while j > 0 && v[j - 1].key() < k {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
}

/// The event queue and the current time, as a calendar queue.
pub struct Calendar<E> {
    now: u64,
    seq: u64,
    /// Sequence number of the event popped last.
    cur_seq: u64,
    executed: u64,
    shift: u32,
    mask: u64,
    /// Ring buckets (unsorted); the current bucket's slot is empty (its events are in
    /// `current`).
    buckets: Vec<Vec<Entry<E>>>,
    /// Bit `i` set: ring slot `i` holds events.
    occupied: Vec<u64>,
    /// Absolute index of the current bucket.
    cur: u64,
    /// The current bucket's events, sorted descending by (time, sequence), except those
    /// scheduled for `now` while the time was already `now` (in `now_fifo`).
    current: Vec<Entry<E>>,
    /// Events scheduled at the current time while it was current, in scheduling order (so
    /// ascending): the next event is the earlier of this FIFO's front and `current`'s last.
    now_fifo: VecDeque<Entry<E>>,
    /// Events in ring buckets (not counting `current`).
    ring_len: usize,
    /// Storage of buckets that have been run, for reuse.
    pool: Vec<Vec<Entry<E>>>,
    far: BinaryHeap<Reverse<Entry<E>>>,
}

impl<E: Copy> Default for Calendar<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Copy> Calendar<E> {
    /// 2^15 buckets of 256 ps: about 8.4 µs of near future. A bucket holds about 470 of the
    /// events `ualink-1024` schedules in a link latency (51.4 ns), so that scheduling appends
    /// to the ends of some 200 buckets, whose lines stay in cache, rather than of 1,600 (32 ps
    /// buckets: about 1.02x slower, `spec-notes/performance.md`, "Session 47").
    pub fn new() -> Self {
        Self::with_buckets(15, 8)
    }

    /// `2^log2_buckets` buckets (at least 64) of `2^shift` ps each.
    pub fn with_buckets(log2_buckets: u32, shift: u32) -> Self {
        let n = 1usize << log2_buckets.clamp(6, 24);
        Calendar {
            now: 0,
            seq: 0,
            cur_seq: 0,
            executed: 0,
            shift: shift.min(40),
            mask: n as u64 - 1,
            buckets: (0..n).map(|_| Vec::new()).collect(),
            occupied: vec![0; n / 64],
            cur: 0,
            current: Vec::new(),
            now_fifo: VecDeque::new(),
            ring_len: 0,
            pool: Vec::new(),
            far: BinaryHeap::new(),
        }
    }

    /// The current simulated time.
    pub fn now(&self) -> Instant {
        Instant::from_ps(self.now)
    }

    /// Events executed so far.
    pub fn executed(&self) -> u64 {
        self.executed
    }

    /// Events waiting.
    pub fn pending(&self) -> usize {
        self.current.len() + self.now_fifo.len() + self.ring_len + self.far.len()
    }

    fn horizon(&self) -> u64 {
        self.cur.saturating_add(self.mask + 1)
    }

    fn slot(&self, abs: u64) -> usize {
        (abs & self.mask) as usize
    }

    /// Put an entry into the current bucket or the ring (its bucket is within the horizon).
    fn ring_push(&mut self, e: Entry<E>) {
        let abs = (e.at >> self.shift).max(self.cur);
        if abs == self.cur {
            // The FIFO takes events due now with a sequence number above all it holds (every
            // newly scheduled one); one scheduled with a reserved, older number is sorted into
            // `current`.
            if e.at == self.now && self.now_fifo.back().is_none_or(|b| b.seq < e.seq) {
                self.now_fifo.push_back(e);
            } else {
                // Descending: insert before every entry that is earlier.
                let pos = self.current.partition_point(|x| x.key() > e.key());
                self.current.insert(pos, e);
            }
            return;
        }
        let slot = self.slot(abs);
        let b = &mut self.buckets[slot];
        if b.capacity() == 0 {
            if let Some(v) = self.pool.pop() {
                *b = v;
            }
            self.occupied[slot / 64] |= 1 << (slot % 64);
        }
        b.push(e);
        self.ring_len += 1;
    }

    /// Schedule `ev` at absolute time `at` (clamped to now: the past cannot be scheduled).
    pub fn at(&mut self, at: Instant, ev: E) {
        self.seq += 1;
        self.at_seq(at, self.seq, ev);
    }

    /// Take the sequence number the next scheduled event would get, without scheduling one:
    /// [`Calendar::at_seq`] can schedule the event later in the place it would have had.
    pub fn reserve_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// (time in ps, sequence number) of the event popped last: an event with a smaller key
    /// would already have run.
    pub fn current_key(&self) -> (u64, u64) {
        (self.now, self.cur_seq)
    }

    /// Schedule `ev` at `at` (clamped to now) with a sequence number from
    /// [`Calendar::reserve_seq`] (or the next one, through [`Calendar::at`]).
    pub fn at_seq(&mut self, at: Instant, seq: u64, ev: E) {
        let at = at.as_ps().max(self.now);
        let e = Entry { at, seq, ev };
        if (at >> self.shift) < self.horizon() {
            self.ring_push(e);
        } else {
            self.far.push(Reverse(e));
        }
    }

    /// The first non-empty ring bucket after the current one, as an absolute index.
    fn next_occupied(&self) -> Option<u64> {
        if self.ring_len == 0 {
            return None;
        }
        let n = self.mask + 1;
        let mut k = 1; // buckets after `cur`
        while k < n {
            let slot = self.slot(self.cur + k);
            let word = self.occupied[slot / 64] >> (slot % 64);
            if word != 0 {
                let d = u64::from(word.trailing_zeros());
                if k + d < n {
                    return Some(self.cur + k + d);
                }
                return None;
            }
            k += 64 - (slot % 64) as u64;
        }
        None
    }

    /// Make bucket `to` (beyond the current one) current: take its events out of the ring,
    /// sort them, and move far events that the horizon now covers into the ring.
    fn advance_bucket(&mut self, to: u64) {
        self.cur = to;
        let slot = self.slot(to);
        let b = std::mem::take(&mut self.buckets[slot]);
        if b.capacity() > 0 {
            self.occupied[slot / 64] &= !(1 << (slot % 64));
            self.ring_len -= b.len();
        }
        let old = std::mem::replace(&mut self.current, b);
        if old.capacity() > 0 {
            self.pool.push(old);
        }
        sort_descending(&mut self.current);
        while let Some(Reverse(f)) = self.far.peek() {
            if (f.at >> self.shift) >= self.horizon() {
                break;
            }
            if let Some(Reverse(f)) = self.far.pop() {
                self.ring_push(f);
            }
        }
    }

    /// Pop the next event if it is due at or before `until`, advancing time to it.
    pub fn pop_until(&mut self, until: Instant) -> Option<E> {
        let until = until.as_ps();
        loop {
            // The earlier of `current`'s last and the FIFO's front (both due now or later).
            let from_current = match (self.current.last(), self.now_fifo.front()) {
                (Some(c), Some(f)) => Some(c.key() < f.key()),
                (Some(_), None) => Some(true),
                (None, Some(_)) => Some(false),
                (None, None) => None,
            };
            if let Some(from_current) = from_current {
                let next = if from_current {
                    self.current.last()
                } else {
                    self.now_fifo.front()
                };
                if next.is_none_or(|e| e.at > until) {
                    return None;
                }
                let e = if from_current {
                    self.current.pop()
                } else {
                    self.now_fifo.pop_front()
                }?;
                self.now = e.at;
                self.cur_seq = e.seq;
                self.executed += 1;
                return Some(e.ev);
            }
            let to = match self.next_occupied() {
                Some(abs) => abs,
                // Jump over the empty stretch to the first far event.
                None => self.far.peek()?.0.at >> self.shift,
            };
            if to.saturating_mul(1u64 << self.shift) > until {
                return None;
            }
            self.advance_bucket(to);
        }
    }

    /// Time of the next event.
    pub fn peek_time(&self) -> Option<Instant> {
        if !self.now_fifo.is_empty() {
            return Some(Instant::from_ps(self.now));
        }
        if let Some(last) = self.current.last() {
            return Some(Instant::from_ps(last.at));
        }
        if let Some(abs) = self.next_occupied() {
            let b = &self.buckets[self.slot(abs)];
            if let Some(m) = b.iter().map(Entry::key).min() {
                return Some(Instant::from_ps(m.0));
            }
        }
        self.far.peek().map(|Reverse(f)| Instant::from_ps(f.at))
    }

    /// Advance the clock to `t` (used when a run ends with nothing left to do before `t`).
    pub fn advance_to(&mut self, t: Instant) {
        // Events due now that wait in the FIFO keep their place among the sorted ones.
        while let Some(e) = self.now_fifo.pop_front() {
            let pos = self.current.partition_point(|x| x.key() > e.key());
            self.current.insert(pos, e);
        }
        self.now = self.now.max(t.as_ps());
    }
}

#[cfg(test)]
mod tests {
    use super::super::Scheduler;
    use super::*;
    use crate::rng::Rng;

    /// Against the binary-heap scheduler on random schedules with ties, near and far events,
    /// events scheduled while running, events scheduled later in a reserved place, horizons
    /// that stop between events, and idle jumps.
    #[test]
    fn insertion_sort_matches_library_sort() {
        let mut r = Rng::new(5, 1);
        for n in 0..80usize {
            let mut v: Vec<Entry<u32>> = (0..n)
                .map(|i| Entry {
                    at: r.below(8),
                    seq: (i as u64 * 7919) % 1009,
                    ev: i as u32,
                })
                .collect();
            let mut w = v.clone();
            sort_descending(&mut v);
            w.sort_unstable_by_key(|e| Reverse(e.key()));
            let keys = |v: &[Entry<u32>]| v.iter().map(|e| (e.key(), e.ev)).collect::<Vec<_>>();
            assert_eq!(keys(&v), keys(&w), "n {n}");
        }
    }

    #[test]
    fn same_order_as_the_heap_scheduler() {
        for seed in 0..60 {
            let mut r = Rng::new(seed, 7);
            // 64 buckets of 1, 2 or 8 ps: horizons of 64 to 512 ps, so that the ring wraps,
            // far events migrate and the bitmap's words are all crossed.
            let shift = [0, 1, 3][seed as usize % 3];
            let mut cal: Calendar<u32> = Calendar::with_buckets(6, shift);
            let mut heap: Scheduler<u32> = Scheduler::new();
            let mut id = 0u32;
            let mut now = 0u64;
            let mut reserved: Vec<(u64, u64)> = Vec::new();
            for _round in 0..200 {
                for _ in 0..r.below(6) {
                    let d = match r.below(4) {
                        0 => 0,
                        1 => r.below(16),
                        2 => r.below(200),
                        _ => r.below(100_000),
                    };
                    let t = Instant::from_ps(now + d);
                    cal.at(t, id);
                    heap.at(t, id);
                    id += 1;
                }
                let until = Instant::from_ps(now + r.below(300));
                loop {
                    let a = cal.pop_until(until);
                    let b = heap.pop_until(until);
                    assert_eq!(a, b, "seed {seed}");
                    assert_eq!(cal.now(), heap.now());
                    if a.is_none() {
                        break;
                    }
                    assert_eq!(cal.current_key(), heap.current_key());
                    // Events scheduled by a handler, at now and just after.
                    if r.chance(0.3) {
                        let t = Instant::from_ps(cal.now().as_ps() + r.below(3));
                        cal.at(t, id);
                        heap.at(t, id);
                        id += 1;
                    }
                    // A handler reserves a place (not scheduled yet), at now or a little
                    // later; a later handler schedules it there if it has not passed.
                    if r.chance(0.2) {
                        let t = cal.now().as_ps() + [0, 0, 1, 40][r.below(4) as usize];
                        let seq = cal.reserve_seq();
                        assert_eq!(heap.reserve_seq(), seq);
                        reserved.push((t, seq));
                    }
                    if r.chance(0.3) && !reserved.is_empty() {
                        let (t, seq) =
                            reserved.swap_remove(r.below(reserved.len() as u64) as usize);
                        if (t, seq) > cal.current_key() {
                            cal.at_seq(Instant::from_ps(t), seq, id);
                            heap.at_seq(Instant::from_ps(t), seq, id);
                            id += 1;
                        }
                    }
                }
                assert_eq!(cal.pending(), heap.pending());
                assert_eq!(cal.peek_time(), heap.peek_time());
                cal.advance_to(until);
                heap.advance_to(until);
                now = until.as_ps();
            }
            let end = Instant::from_ps(u64::MAX / 2);
            while let Some(b) = heap.pop_until(end) {
                assert_eq!(cal.pop_until(end), Some(b));
            }
            assert_eq!(cal.pop_until(end), None);
            assert_eq!(cal.executed(), heap.executed());
        }
    }
}
