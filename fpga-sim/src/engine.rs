//! The discrete-event engine (`spec-notes/simulator.md#engine`).
//!
//! Time is in picoseconds ([`podlink_protocol::time::Instant`]). Events are compact `Copy`
//! records in a binary heap ordered by (time, sequence): two events at the same time run in
//! the order they were scheduled, so a run is deterministic. The heap and its storage are reused,
//! so a run in steady state allocates nothing per event.

pub mod bucket;
mod calendar;

pub use self::calendar::Calendar;

use podlink_protocol::time::{Duration, Instant};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// One scheduled event.
#[derive(Clone, Copy)]
struct Entry<E> {
    at: u64,
    seq: u64,
    ev: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        self.at == o.at && self.seq == o.seq
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
        // BinaryHeap is a max-heap: invert so the earliest (time, seq) pops first.
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

/// The event queue and the current time.
pub struct Scheduler<E> {
    now: Instant,
    seq: u64,
    /// Sequence number of the event popped last.
    cur_seq: u64,
    heap: BinaryHeap<Entry<E>>,
    executed: u64,
}

impl<E: Copy> Default for Scheduler<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Copy> Scheduler<E> {
    /// An empty queue at time zero.
    pub fn new() -> Self {
        Scheduler {
            now: Instant::ZERO,
            seq: 0,
            cur_seq: 0,
            heap: BinaryHeap::with_capacity(1024),
            executed: 0,
        }
    }

    /// The current simulated time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Events executed so far.
    pub fn executed(&self) -> u64 {
        self.executed
    }

    /// Events waiting.
    pub fn pending(&self) -> usize {
        self.heap.len()
    }

    /// Schedule `ev` at absolute time `at` (clamped to now: the past cannot be scheduled).
    pub fn at(&mut self, at: Instant, ev: E) {
        let at = at.max(self.now).as_ps();
        self.seq += 1;
        self.heap.push(Entry {
            at,
            seq: self.seq,
            ev,
        });
    }

    /// Take the sequence number the next scheduled event would get, without scheduling one:
    /// [`Scheduler::at_seq`] can schedule the event later in the place it would have had.
    pub fn reserve_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Schedule `ev` at `at` with a sequence number from [`Scheduler::reserve_seq`].
    pub fn at_seq(&mut self, at: Instant, seq: u64, ev: E) {
        let at = at.max(self.now).as_ps();
        self.heap.push(Entry { at, seq, ev });
    }

    /// (time in ps, sequence number) of the event popped last: an event with a smaller key
    /// would already have run.
    pub fn current_key(&self) -> (u64, u64) {
        (self.now.as_ps(), self.cur_seq)
    }

    /// Schedule `ev` after `d`.
    pub fn after(&mut self, d: Duration, ev: E) {
        self.at(self.now + d, ev);
    }

    /// Time of the next event.
    pub fn peek_time(&self) -> Option<Instant> {
        self.heap.peek().map(|e| Instant::from_ps(e.at))
    }

    /// Pop the next event if it is due at or before `until`, advancing time to it.
    pub fn pop_until(&mut self, until: Instant) -> Option<E> {
        let next = self.heap.peek()?;
        if next.at > until.as_ps() {
            return None;
        }
        let e = self.heap.pop()?;
        self.now = Instant::from_ps(e.at);
        self.cur_seq = e.seq;
        self.executed += 1;
        Some(e.ev)
    }

    /// Advance the clock to `t` (used when a run ends with nothing left to do before `t`).
    pub fn advance_to(&mut self, t: Instant) {
        self.now = self.now.max(t);
    }
}

/// A model driven by the engine: it handles one event at a time and may schedule more.
pub trait Model {
    /// The model's event record (keep it small and `Copy`).
    type Event: Copy;
    /// Handle one event at `sched.now()`.
    fn handle(&mut self, ev: Self::Event, sched: &mut Scheduler<Self::Event>);
}

/// Run `model` until no event is due at or before `until`; returns the events executed.
pub fn run_until<M: Model>(model: &mut M, sched: &mut Scheduler<M::Event>, until: Instant) -> u64 {
    let start = sched.executed();
    while let Some(ev) = sched.pop_until(until) {
        model.handle(ev, sched);
    }
    sched.executed() - start
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Recorder(Vec<(u64, u32)>);
    impl Model for Recorder {
        type Event = u32;
        fn handle(&mut self, ev: u32, s: &mut Scheduler<u32>) {
            self.0.push((s.now().as_ps(), ev));
            if ev == 1 {
                s.after(Duration::from_ps(5), 10);
                s.after(Duration::ZERO, 11);
            }
        }
    }

    #[test]
    fn time_order_then_schedule_order() {
        let mut s = Scheduler::new();
        s.at(Instant::from_ps(10), 2);
        s.at(Instant::from_ps(3), 1);
        s.at(Instant::from_ps(10), 3);
        let mut m = Recorder(Vec::new());
        assert_eq!(run_until(&mut m, &mut s, Instant::from_ps(100)), 5);
        assert_eq!(m.0, vec![(3, 1), (3, 11), (8, 10), (10, 2), (10, 3)]);
    }

    #[test]
    fn stops_at_horizon() {
        let mut s = Scheduler::new();
        s.at(Instant::from_ps(50), 7);
        let mut m = Recorder(Vec::new());
        assert_eq!(run_until(&mut m, &mut s, Instant::from_ps(49)), 0);
        assert_eq!(s.pending(), 1);
        assert_eq!(run_until(&mut m, &mut s, Instant::from_ps(50)), 1);
    }
}
