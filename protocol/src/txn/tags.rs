//! The 11-bit tag pool and the order in which tags time out
//! (`spec-notes/transactions.md#tags`).
//!
//! Free tags are handed out oldest-freed first, so a tag is reused as late as possible. A
//! tag in flight sits in a list ordered by issue time; a tag whose request timed out sits in
//! a quarantine list until a late response can no longer be confused with a new request.
//! Both lists are doubly linked through per-tag index arrays: every operation is O(1) and
//! the earliest deadline is always at a list head (deadlines are `issue time + constant`,
//! and time never goes backwards).

use crate::time::{earliest, Instant};
use crate::wire::Tag;
use heapless::Deque;

const NIL: u16 = u16::MAX;

/// Where a tag is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TagState {
    /// In the free pool.
    Free,
    /// A request with this tag is outstanding.
    InFlight,
    /// Its request timed out; a late response is still possible.
    Quarantined,
}

#[derive(Clone, Copy)]
struct Chain {
    head: u16,
    tail: u16,
}

impl Chain {
    const EMPTY: Chain = Chain {
        head: NIL,
        tail: NIL,
    };
}

/// A pool of `N` tags (`N` ≤ 2048), numbered `0..N`.
pub(crate) struct TagTable<const N: usize> {
    free: Deque<u16, N>,
    state: [TagState; N],
    deadline: [Instant; N],
    prev: [u16; N],
    next: [u16; N],
    in_flight: Chain,
    quarantine: Chain,
    in_flight_len: usize,
}

impl<const N: usize> TagTable<N> {
    pub(crate) fn new() -> Self {
        const { assert!(N >= 1 && N <= 1 << Tag::BITS, "1 ≤ tags ≤ 2048") };
        let mut free = Deque::new();
        for i in 0..N {
            let _ = free.push_back(i as u16);
        }
        TagTable {
            free,
            state: [TagState::Free; N],
            deadline: [Instant::ZERO; N],
            prev: [NIL; N],
            next: [NIL; N],
            in_flight: Chain::EMPTY,
            quarantine: Chain::EMPTY,
            in_flight_len: 0,
        }
    }

    /// Tags in the free pool.
    pub(crate) fn available(&self) -> usize {
        self.free.len()
    }

    /// Tags in flight.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight_len
    }

    /// The state of `tag` (`None` for a tag outside the pool).
    pub(crate) fn state(&self, tag: Tag) -> Option<TagState> {
        self.state.get(usize::from(tag.get())).copied()
    }

    /// Take a free tag whose request times out at `deadline`.
    pub(crate) fn alloc(&mut self, deadline: Instant) -> Option<Tag> {
        let i = self.free.pop_front()?;
        self.set(i, TagState::InFlight, deadline);
        let mut chain = self.in_flight;
        self.append(&mut chain, i);
        self.in_flight = chain;
        self.in_flight_len += 1;
        Tag::new(i)
    }

    /// An in-flight tag's request finished: the tag goes back to the pool.
    pub(crate) fn release(&mut self, tag: Tag) {
        let i = tag.get();
        if self.state(tag) == Some(TagState::InFlight) {
            self.unlink_in_flight(i);
            self.set(i, TagState::Free, Instant::ZERO);
            let _ = self.free.push_back(i);
        }
    }

    /// An in-flight tag timed out: hold it until `until` before reuse.
    pub(crate) fn quarantine(&mut self, tag: Tag, until: Instant) {
        let i = tag.get();
        if self.state(tag) == Some(TagState::InFlight) {
            self.unlink_in_flight(i);
            self.set(i, TagState::Quarantined, until);
            let mut chain = self.quarantine;
            self.append(&mut chain, i);
            self.quarantine = chain;
        }
    }

    /// The earliest in-flight deadline or quarantine end.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let a = self.deadline_of(self.in_flight.head);
        let b = self.deadline_of(self.quarantine.head);
        earliest(a, b)
    }

    /// Free every quarantined tag whose quarantine ended by `now`; returns how many.
    pub(crate) fn expire_quarantine(&mut self, now: Instant) -> usize {
        let mut n = 0;
        while let Some(d) = self.deadline_of(self.quarantine.head) {
            if d > now {
                break;
            }
            let i = self.quarantine.head;
            let mut chain = self.quarantine;
            self.unlink(&mut chain, i);
            self.quarantine = chain;
            self.set(i, TagState::Free, Instant::ZERO);
            let _ = self.free.push_back(i);
            n += 1;
        }
        n
    }

    /// The oldest in-flight tag, whatever its deadline.
    pub(crate) fn oldest_in_flight(&self) -> Option<Tag> {
        if self.in_flight.head == NIL {
            return None;
        }
        Tag::new(self.in_flight.head)
    }

    /// The oldest in-flight tag, if its deadline is at or before `now`.
    pub(crate) fn expired(&self, now: Instant) -> Option<Tag> {
        let d = self.deadline_of(self.in_flight.head)?;
        if d <= now {
            Tag::new(self.in_flight.head)
        } else {
            None
        }
    }

    fn deadline_of(&self, i: u16) -> Option<Instant> {
        self.deadline.get(usize::from(i)).copied()
    }

    fn set(&mut self, i: u16, s: TagState, deadline: Instant) {
        if let (Some(st), Some(d)) = (
            self.state.get_mut(usize::from(i)),
            self.deadline.get_mut(usize::from(i)),
        ) {
            *st = s;
            *d = deadline;
        }
    }

    fn unlink_in_flight(&mut self, i: u16) {
        let mut chain = self.in_flight;
        self.unlink(&mut chain, i);
        self.in_flight = chain;
        self.in_flight_len = self.in_flight_len.saturating_sub(1);
    }

    fn link(&mut self, i: u16, prev: Option<u16>, next: Option<u16>) {
        if let Some(p) = prev {
            if let Some(slot) = self.prev.get_mut(usize::from(i)) {
                *slot = p;
            }
        }
        if let Some(n) = next {
            if let Some(slot) = self.next.get_mut(usize::from(i)) {
                *slot = n;
            }
        }
    }

    fn append(&mut self, chain: &mut Chain, i: u16) {
        let tail = chain.tail;
        self.link(i, Some(tail), Some(NIL));
        if tail == NIL {
            chain.head = i;
        } else {
            self.link(tail, None, Some(i));
        }
        chain.tail = i;
    }

    fn unlink(&mut self, chain: &mut Chain, i: u16) {
        let p = self.prev.get(usize::from(i)).copied().unwrap_or(NIL);
        let n = self.next.get(usize::from(i)).copied().unwrap_or(NIL);
        if p == NIL {
            chain.head = n;
        } else {
            self.link(p, None, Some(n));
        }
        if n == NIL {
            chain.tail = p;
        } else {
            self.link(n, Some(p), None);
        }
        self.link(i, Some(NIL), Some(NIL));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ps: u64) -> Instant {
        Instant::from_ps(ps)
    }

    #[test]
    fn alloc_release_fifo_reuse() {
        let mut tt: TagTable<3> = TagTable::new();
        let a = tt.alloc(t(10)).unwrap();
        let b = tt.alloc(t(20)).unwrap();
        assert_eq!((a.get(), b.get()), (0, 1));
        assert_eq!(tt.in_flight(), 2);
        tt.release(a);
        tt.release(a); // no effect twice
        assert_eq!(tt.available(), 2);
        // Tag 2 was free before tag 0 was released: it comes first.
        assert_eq!(tt.alloc(t(30)).unwrap().get(), 2);
        assert_eq!(tt.alloc(t(40)).unwrap().get(), 0);
        assert_eq!(tt.alloc(t(50)), None);
        assert_eq!(tt.state(Tag::new(5).unwrap()), None);
    }

    #[test]
    fn deadlines_in_issue_order() {
        let mut tt: TagTable<4> = TagTable::new();
        let a = tt.alloc(t(10)).unwrap();
        let b = tt.alloc(t(20)).unwrap();
        let c = tt.alloc(t(30)).unwrap();
        assert_eq!(tt.next_deadline(), Some(t(10)));
        tt.release(a);
        assert_eq!(tt.next_deadline(), Some(t(20)));
        assert_eq!(tt.expired(t(19)), None);
        assert_eq!(tt.expired(t(20)), Some(b));
        tt.quarantine(b, t(100));
        assert_eq!(tt.state(b), Some(TagState::Quarantined));
        assert_eq!(tt.next_deadline(), Some(t(30)));
        tt.release(b); // a quarantined tag is not released early
        assert_eq!(tt.state(b), Some(TagState::Quarantined));
        tt.release(c);
        assert_eq!(tt.next_deadline(), Some(t(100)));
        assert_eq!(tt.expire_quarantine(t(99)), 0);
        assert_eq!(tt.expire_quarantine(t(100)), 1);
        assert_eq!(tt.next_deadline(), None);
        assert_eq!(tt.available(), 4);
        assert_eq!(tt.in_flight(), 0);
    }

    #[test]
    fn unlink_middle_and_tail() {
        let mut tt: TagTable<4> = TagTable::new();
        let tags: std::vec::Vec<Tag> = (0..4).map(|i| tt.alloc(t(i)).unwrap()).collect();
        tt.release(tags[2]);
        tt.release(tags[3]);
        tt.release(tags[0]);
        assert_eq!(tt.expired(t(100)), Some(tags[1]));
        tt.release(tags[1]);
        assert_eq!(tt.expired(t(100)), None);
        let x = tt.alloc(t(5)).unwrap();
        assert_eq!(tt.expired(t(5)), Some(x));
    }
}
