//! The wire of one link direction (`spec-notes/simulator.md#links`): DL flits in flight and
//! the bit-error process.
//!
//! Every DL flit is the 640 real bytes the protocol crate's link layer (`UaLink`: DL packer,
//! link-level retry, DL control) produced; the wire flips real bits at the configured bit
//! error rate, so the receiver's real CRC check fails and real replays follow.

use crate::rng::Rng;
use podlink_protocol::wire::dl_flit::FLIT_LEN;

/// Bits of one DL flit exposed to bit errors (the 640 B flit; FEC parity is not modelled).
pub const FLIT_BITS: u64 = FLIT_LEN as u64 * 8;

/// A DL flit on the wire.
pub struct InFlight {
    /// Arrival time (decoded, at the receiver), ps.
    pub at: u64,
    /// The bytes as they arrive (bit errors applied).
    pub bytes: [u8; FLIT_LEN],
    /// Lost (the link went down while it was on the wire): it never arrives.
    pub lost: bool,
}

/// Flits in flight, in order: a ring of reusable slots (no allocation or zeroing per flit
/// once it has grown to the link's high-water mark).
#[derive(Default)]
pub struct Flight {
    slots: Vec<InFlight>,
    head: usize,
    len: usize,
}

impl Flight {
    /// Nothing in flight.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Flits in flight.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The slot the next flit goes into (not yet in flight until [`Flight::commit`]).
    pub fn next_slot(&mut self) -> &mut InFlight {
        if self.len == self.slots.len() {
            // Grow: unroll the ring so that the order stays head..head+len.
            self.slots.rotate_left(self.head);
            self.head = 0;
            let n = self.slots.len().max(4);
            self.slots.extend((0..n).map(|_| InFlight {
                at: 0,
                bytes: [0; FLIT_LEN],
                lost: false,
            }));
        }
        let i = (self.head + self.len) % self.slots.len();
        &mut self.slots[i]
    }

    /// Put the slot [`Flight::next_slot`] returned in flight.
    pub fn commit(&mut self) {
        self.len += 1;
    }

    /// The oldest flit.
    pub fn front(&self) -> Option<&InFlight> {
        (self.len > 0).then(|| &self.slots[self.head])
    }

    /// Mark every flit in flight lost (the link went down); returns how many.
    pub fn lose_all(&mut self) -> u64 {
        let n = self.slots.len();
        for k in 0..self.len {
            if let Some(s) = self.slots.get_mut((self.head + k) % n.max(1)) {
                s.lost = true;
            }
        }
        self.len as u64
    }

    /// Remove the oldest flit (read it with [`Flight::front`] first).
    pub fn pop(&mut self) {
        if self.len > 0 {
            self.head = (self.head + 1) % self.slots.len();
            self.len -= 1;
        }
    }
}

/// The wire of one link direction: flits in flight, in order, and the bit-error process.
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

    /// Apply the error process to the flit in the ring's next slot (about to be committed).
    pub fn corrupt_last(&mut self) {
        if self.gap >= FLIT_BITS {
            self.gap = self.gap.saturating_sub(FLIT_BITS);
            return;
        }
        let mut bytes = std::mem::replace(&mut self.flight.next_slot().bytes, [0; FLIT_LEN]);
        self.corrupt(&mut bytes);
        self.flight.next_slot().bytes = bytes;
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
    fn lost_flits_and_new_error_rate() {
        let mut f = Flight::default();
        for t in 0..5 {
            let s = f.next_slot();
            s.at = t;
            s.lost = false;
            f.commit();
        }
        f.pop();
        assert_eq!(f.lose_all(), 4);
        while let Some(x) = f.front() {
            assert!(x.lost);
            f.pop();
        }
        let s = f.next_slot();
        s.lost = false;
        f.commit();
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
    fn flight_ring_keeps_order_while_growing() {
        let mut f = Flight::default();
        let mut next = 0u64;
        let mut expect = 0u64;
        for round in 0..50 {
            for _ in 0..(round % 7 + 1) {
                f.next_slot().at = next;
                f.commit();
                next += 1;
            }
            for _ in 0..(round % 5) {
                if let Some(x) = f.front() {
                    assert_eq!(x.at, expect);
                    expect += 1;
                    f.pop();
                }
            }
        }
        while let Some(x) = f.front() {
            assert_eq!(x.at, expect);
            expect += 1;
            f.pop();
        }
        assert_eq!(expect, next);
        assert!(f.is_empty());
    }
}
