//! The wire of one link direction (`spec-notes/simulator.md#links`): DL flits in flight and
//! the bit-error process.
//!
//! Every DL flit is the 640 real bytes the protocol crate's link layer (`UaLink`: DL packer,
//! link-level retry, DL control) produced; the wire flips real bits at the configured bit
//! error rate, so the receiver's real CRC check fails and real replays follow.

use crate::rng::Rng;
use podlink_protocol::wire::dl_flit::FLIT_LEN;
use std::collections::VecDeque;

/// Bits of one DL flit exposed to bit errors (the 640 B flit; FEC parity is not modelled).
pub const FLIT_BITS: u64 = FLIT_LEN as u64 * 8;

/// Storage for the DL flits in flight on every wire: 640-byte slots with stable indices. A
/// freed slot is the next one handed out (last in, first out), so a flit is written into
/// memory that a receiver has just read (still in cache) rather than into a per-wire ring
/// that has gone cold; no allocation once the pool has reached the pod's high-water mark.
#[derive(Default)]
pub struct FlitPool {
    slots: Vec<[u8; FLIT_LEN]>,
    free: Vec<u32>,
}

impl FlitPool {
    /// A free slot (its bytes are whatever it held last).
    pub fn take(&mut self) -> u32 {
        match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push([0; FLIT_LEN]);
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// Give a slot back.
    pub fn put(&mut self, i: u32) {
        self.free.push(i);
    }

    /// The bytes of slot `i`.
    pub fn get(&self, i: u32) -> &[u8; FLIT_LEN] {
        &self.slots[i as usize]
    }

    /// The bytes of slot `i`, mutable.
    pub fn get_mut(&mut self, i: u32) -> &mut [u8; FLIT_LEN] {
        &mut self.slots[i as usize]
    }

    /// Ask for the cache lines of slot `i` ahead of its arrival (the receiver reads the CRC
    /// at the end first, then every byte).
    #[inline(always)]
    pub fn prefetch(&self, i: u32) {
        if let Some(bytes) = self.slots.get(i as usize) {
            super::window::prefetch_flit(bytes);
        }
    }

    /// Slots in use.
    pub fn in_use(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

/// A DL flit on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InFlight {
    /// Arrival time (decoded, at the receiver), ps.
    pub at: u64,
    /// The [`FlitPool`] slot holding its bytes as they arrive (bit errors applied).
    pub slot: u32,
    /// Lost (the link went down while it was on the wire): it never arrives.
    pub lost: bool,
}

/// The flits in flight on one wire, oldest first. Arrival times are non-decreasing. Each
/// holds a [`FlitPool`] slot until it is popped (a lost flit too: it is popped at its
/// arrival time, unread). The oldest is kept apart from the rest, in the wire's own record,
/// so that the receiver (and the engine asking for its flit ahead) finds it without reading
/// the queue's buffer.
#[derive(Default)]
pub struct Flight {
    /// The oldest flit (`None`: nothing in flight, and `rest` is empty).
    first: Option<InFlight>,
    /// The others, oldest first.
    rest: VecDeque<InFlight>,
}

impl Flight {
    /// Nothing in flight.
    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// Flits in flight.
    pub fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }

    /// Put the flit in pool slot `slot` in flight, arriving at `at`.
    pub fn push(&mut self, at: u64, slot: u32) {
        let f = InFlight {
            at,
            slot,
            lost: false,
        };
        if self.first.is_none() {
            self.first = Some(f);
        } else {
            self.rest.push_back(f);
        }
    }

    /// The oldest flit.
    pub fn front(&self) -> Option<InFlight> {
        self.first
    }

    /// Ask for the cache line of the flit after the oldest (which [`Flight::pop`] moves into
    /// the wire's record) ahead of the oldest's arrival: a hint, nothing is read.
    #[inline(always)]
    pub fn prefetch_next(&self) {
        if let Some(n) = self.rest.front() {
            super::window::prefetch(n);
        }
    }

    /// Mark every flit in flight lost (the link went down); returns how many.
    pub fn lose_all(&mut self) -> u64 {
        for f in self.first.iter_mut().chain(self.rest.iter_mut()) {
            f.lost = true;
        }
        self.len() as u64
    }

    /// Remove the oldest flit and free its slot.
    pub fn pop(&mut self, pool: &mut FlitPool) {
        if let Some(f) = self.first.take() {
            pool.put(f.slot);
            self.first = self.rest.pop_front();
        }
    }
}

/// The wire of one link direction: flits in flight, in order, and the bit-error process.
// `repr(C)`: the flits in flight first, so that the line the engine asks for ahead of an
// arrival holds the oldest one.
#[repr(C)]
pub struct Wire {
    /// Flits in flight (arrival times are non-decreasing).
    pub flight: Flight,
    rng: Rng,
    ber: f64,
    /// Bits until the next error.
    gap: u64,
    /// Bits flipped.
    pub bits_flipped: u64,
    /// Flits that had at least one bit flipped.
    pub flits_corrupted: u64,
}

impl Wire {
    /// A wire with bit error rate `ber` and its own random stream.
    pub fn new(ber: f64, rng: Rng) -> Self {
        let mut w = Wire {
            flight: Flight::default(),
            rng,
            ber,
            gap: u64::MAX,
            bits_flipped: 0,
            flits_corrupted: 0,
        };
        w.gap = w.draw_gap();
        w
    }

    /// The bit error rate.
    pub fn ber(&self) -> f64 {
        self.ber
    }

    /// Change the bit error rate (from the next bit on).
    pub fn set_ber(&mut self, ber: f64) {
        self.ber = ber;
        self.gap = self.draw_gap();
    }

    /// Bits before the next error: geometric with parameter `ber`.
    fn draw_gap(&mut self) -> u64 {
        if self.ber <= 0.0 {
            return u64::MAX;
        }
        let u = 1.0 - self.rng.f64(); // (0, 1]
        let g = (u.ln() / (1.0 - self.ber).ln()).floor();
        if (0.0..1e18).contains(&g) {
            g as u64
        } else {
            u64::MAX
        }
    }

    /// Flip the bits the error process puts in this flit.
    pub fn corrupt(&mut self, bytes: &mut [u8; FLIT_LEN]) {
        if self.gap >= FLIT_BITS {
            self.gap = self.gap.saturating_sub(FLIT_BITS);
            return;
        }
        let mut pos = self.gap;
        self.flits_corrupted += 1;
        while pos < FLIT_BITS {
            if let Some(b) = bytes.get_mut((pos / 8) as usize) {
                *b ^= 0x80 >> (pos % 8);
            }
            self.bits_flipped += 1;
            let g = self.draw_gap();
            pos = pos.saturating_add(1).saturating_add(g);
        }
        self.gap = pos - FLIT_BITS;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ber_flips_expected_number_of_bits() {
        let mut w = Wire::new(1e-4, Rng::new(3, 0));
        let mut total = 0;
        for _ in 0..2000 {
            let mut b = [0u8; FLIT_LEN];
            w.corrupt(&mut b);
            total += b.iter().map(|x| x.count_ones() as u64).sum::<u64>();
        }
        assert_eq!(total, w.bits_flipped);
        let expect = 2000.0 * FLIT_BITS as f64 * 1e-4;
        assert!(
            (total as f64 - expect).abs() < expect * 0.1,
            "{total} vs {expect}"
        );
        let mut clean = Wire::new(0.0, Rng::new(3, 0));
        let mut b = [0u8; FLIT_LEN];
        clean.corrupt(&mut b);
        assert_eq!(b, [0u8; FLIT_LEN]);
    }

    #[test]
    fn lost_flits_keep_their_slots_until_popped_and_new_error_rate() {
        let mut pool = FlitPool::default();
        let mut f = Flight::default();
        for t in 0..5 {
            let s = pool.take();
            f.push(t, s);
        }
        f.pop(&mut pool);
        assert_eq!(f.lose_all(), 4);
        assert_eq!(pool.in_use(), 4);
        let mut at = 1;
        while let Some(x) = f.front() {
            assert!(x.lost);
            assert_eq!(x.at, at);
            at += 1;
            f.pop(&mut pool);
        }
        assert_eq!(pool.in_use(), 0);
        let s = pool.take();
        f.push(9, s);
        assert!(!f.front().unwrap().lost);
        let mut w = Wire::new(0.0, Rng::new(1, 0));
        let mut b = [0u8; FLIT_LEN];
        w.corrupt(&mut b);
        assert_eq!(w.bits_flipped, 0);
        w.set_ber(1e-3);
        for _ in 0..10 {
            w.corrupt(&mut b);
        }
        assert!(w.bits_flipped > 10, "{}", w.bits_flipped);
    }

    #[test]
    fn flights_keep_order_and_reuse_slots_last_in_first_out() {
        let mut pool = FlitPool::default();
        let mut f = Flight::default();
        let mut g = Flight::default();
        let mut next = 0u64;
        let mut expect = 0u64;
        for round in 0..50 {
            for _ in 0..(round % 7 + 1) {
                let s = pool.take();
                pool.get_mut(s)[0] = next as u8;
                f.push(next, s);
                // Another wire shares the pool.
                let t = pool.take();
                g.push(next, t);
                next += 1;
            }
            for _ in 0..(round % 5) {
                if let Some(InFlight { at, slot: s, .. }) = f.front() {
                    assert_eq!(at, expect);
                    assert_eq!(pool.get(s)[0], expect as u8);
                    expect += 1;
                    f.pop(&mut pool);
                    // The slot just freed is the next one taken.
                    let again = pool.take();
                    assert_eq!(again, s);
                    pool.put(again);
                }
                g.pop(&mut pool);
            }
        }
        while let Some(InFlight { at, slot: s, .. }) = f.front() {
            assert_eq!((at, pool.get(s)[0]), (expect, expect as u8));
            expect += 1;
            f.pop(&mut pool);
        }
        assert_eq!(expect, next);
        assert!(f.is_empty());
        assert_eq!(pool.in_use(), g.len());
    }
}
