//! One direction of a link: the DL transmitter, the wire and the DL receiver
//! (`spec-notes/simulator.md#links`).
//!
//! Every DL flit is 640 real bytes built by the protocol crate's [`DlPacker`] (TL flits
//! straddling segments and flits) with a real explicit header and CRC; the wire flips real
//! bits at the configured bit error rate; the receiver checks the real CRC and sequence number
//! and unpacks with the protocol crate's [`DlUnpacker`].
//!
//! **Stand-in retry.** Link-level retry here is a minimal go-back-N (sequence numbers
//! 1..=511, replay buffer, replay on a bad CRC or a sequence gap) whose acknowledgements,
//! replay requests and credit returns travel out of band with one flit latency. It stands in
//! for the protocol crate's link layer (`UaLink`, `LinkRetry`) until that lands in main.

use crate::rng::Rng;
use podlink_protocol::wire::crc::DlCrc;
use podlink_protocol::wire::dl_flit::FLIT_LEN;
use podlink_protocol::wire::dl_stream::PackSource;
use podlink_protocol::wire::{DlExplicitHeader, DlFlit, DlFlitHeader, DlPacker};
use std::collections::VecDeque;

/// The CRC every DL flit carries.
pub const CRC: DlCrc = DlCrc::Bzip2;
/// Most unacknowledged DL flits (protocol-facts §4).
pub const MAX_UNACKED: usize = 255;
/// Bits of one DL flit exposed to bit errors (the 640 B flit; FEC parity is not modelled).
pub const FLIT_BITS: u64 = FLIT_LEN as u64 * 8;

/// The next DL sequence number: 1..=511, wrapping 511 → 1 (0 is reserved).
pub const fn next_seq(s: u16) -> u16 {
    if s >= 511 {
        1
    } else {
        s + 1
    }
}

/// A DL flit kept for replay.
#[derive(Clone)]
struct Sent {
    seq: u16,
    tl: u16,
    bytes: [u8; FLIT_LEN],
}

/// The DL transmitter of one link direction.
pub struct DlTx {
    packer: DlPacker,
    next: u16,
    replay: VecDeque<Sent>,
    /// Index in `replay` of the next flit to resend (`replay.len()`: none).
    resend: usize,
    /// New DL flits sent (not counting replays).
    pub flits: u64,
    /// DL flits resent.
    pub resent: u64,
    /// Replays started (replay requests honoured).
    pub replays: u64,
    /// TL flits packed into new DL flits.
    pub tl_packed: u64,
}

impl Default for DlTx {
    fn default() -> Self {
        DlTx {
            packer: DlPacker::new(),
            next: 1,
            replay: VecDeque::new(),
            resend: 0,
            flits: 0,
            resent: 0,
            replays: 0,
            tl_packed: 0,
        }
    }
}

impl DlTx {
    /// A flit is waiting to be resent.
    pub fn replaying(&self) -> bool {
        self.resend < self.replay.len()
    }

    /// The replay buffer has room for a new flit.
    pub fn can_send_new(&self) -> bool {
        self.replay.len() < MAX_UNACKED
    }

    /// A TL flit begun in the last DL flit must continue in the next.
    pub fn carrying(&self) -> bool {
        self.packer.carrying_tl_flit()
    }

    /// Flits sent and not yet acknowledged.
    pub fn unacked(&self) -> usize {
        self.replay.len()
    }

    /// TL flits in DL flits sent and not yet acknowledged, after `delivered_through`
    /// (the receiver's last in-order sequence number; 0 = none).
    pub fn tl_unacked_after(&self, delivered_through: u16) -> u64 {
        let start = self
            .replay
            .iter()
            .position(|s| s.seq == delivered_through)
            .map_or(0, |i| i + 1);
        self.replay
            .iter()
            .skip(start)
            .map(|s| u64::from(s.tl))
            .sum()
    }

    /// Pack a new DL flit from `src` into `out`; returns the TL flits it finished.
    pub fn pack_new<S: PackSource>(&mut self, src: &mut S, out: &mut [u8; FLIT_LEN]) -> u16 {
        let seq = self.next;
        let header = DlFlitHeader::Explicit(DlExplicitHeader {
            op: 0,
            payload: true,
            flit_seq_no: seq,
        });
        let tl = self
            .packer
            .pack_flit(src, &header, CRC, out)
            .map_or(0, |s| s.tl_finished as u16);
        self.next = next_seq(seq);
        self.flits += 1;
        self.tl_packed += u64::from(tl);
        self.replay.push_back(Sent {
            seq,
            tl,
            bytes: *out,
        });
        self.resend = self.replay.len();
        tl
    }

    /// Copy the next flit to resend into `out`.
    pub fn resend_next(&mut self, out: &mut [u8; FLIT_LEN]) -> bool {
        match self.replay.get(self.resend) {
            Some(s) => {
                *out = s.bytes;
                self.resend += 1;
                self.resent += 1;
                true
            }
            None => false,
        }
    }

    /// The peer acknowledged every flit up to and including `seq`.
    pub fn ack(&mut self, seq: u16) {
        if let Some(i) = self.replay.iter().position(|s| s.seq == seq) {
            self.replay.drain(..=i);
            self.resend = self.resend.saturating_sub(i + 1);
        }
    }

    /// The peer asks for every flit from `seq` on again.
    pub fn replay_from(&mut self, seq: u16) {
        if let Some(i) = self.replay.iter().position(|s| s.seq == seq) {
            self.resend = i;
            self.replays += 1;
        }
    }
}

/// What the receiver did with a flit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxVerdict {
    /// In order and intact: unpack it.
    Deliver,
    /// Bad CRC: dropped.
    BadCrc,
    /// Intact but not the next in sequence: dropped.
    OutOfOrder,
}

/// The DL receiver of one link direction.
pub struct DlRx {
    expect: u16,
    last_request: Option<u64>,
    /// DL flits with a bad CRC.
    pub crc_errors: u64,
    /// Intact DL flits dropped out of sequence.
    pub out_of_order: u64,
    /// DL flits delivered in order.
    pub delivered: u64,
}

impl Default for DlRx {
    fn default() -> Self {
        DlRx {
            expect: 1,
            last_request: None,
            crc_errors: 0,
            out_of_order: 0,
            delivered: 0,
        }
    }
}

impl DlRx {
    /// Check a received flit. Returns the verdict and, when the peer must replay, the sequence
    /// number to ask for (at most one request per `rtt`).
    pub fn check(
        &mut self,
        bytes: &[u8; FLIT_LEN],
        now: u64,
        rtt: u64,
    ) -> (RxVerdict, Option<u16>) {
        let flit = DlFlit::new_unchecked(&bytes[..]);
        let verdict = if flit.verify_crc(CRC).is_err() {
            self.crc_errors += 1;
            RxVerdict::BadCrc
        } else {
            match flit.flit_header() {
                Ok(DlFlitHeader::Explicit(h)) if h.flit_seq_no == self.expect => {
                    self.expect = next_seq(self.expect);
                    self.delivered += 1;
                    self.last_request = None;
                    return (RxVerdict::Deliver, None);
                }
                _ => {
                    self.out_of_order += 1;
                    RxVerdict::OutOfOrder
                }
            }
        };
        let due = self
            .last_request
            .is_none_or(|t| now >= t.saturating_add(rtt));
        if due {
            self.last_request = Some(now);
            (verdict, Some(self.expect))
        } else {
            (verdict, None)
        }
    }

    /// The last sequence number delivered in order (0 = none yet).
    pub fn delivered_through(&self) -> u16 {
        if self.delivered == 0 {
            0
        } else if self.expect == 1 {
            511
        } else {
            self.expect - 1
        }
    }
}

/// A DL flit on the wire.
pub struct InFlight {
    /// Arrival time (decoded, at the receiver), ps.
    pub at: u64,
    /// The bytes as they arrive (bit errors applied).
    pub bytes: [u8; FLIT_LEN],
}

/// The wire of one link direction: flits in flight, in order, and the bit-error process.
pub struct Wire {
    /// Flits in flight (arrival times are non-decreasing).
    pub flight: VecDeque<InFlight>,
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
            flight: VecDeque::new(),
            rng,
            ber,
            gap: u64::MAX,
            bits_flipped: 0,
            flits_corrupted: 0,
        };
        w.gap = w.draw_gap();
        w
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
    use podlink_protocol::wire::dl_stream::TL_FLIT_LEN;

    struct Src(u8, u8);
    impl PackSource for Src {
        fn next_tl_flit(&mut self, out: &mut [u8; TL_FLIT_LEN]) -> bool {
            if self.0 == 0 {
                return false;
            }
            self.0 -= 1;
            self.1 = self.1.wrapping_add(1);
            *out = [self.1 | 1; TL_FLIT_LEN];
            true
        }
    }

    #[test]
    fn seq_wraps_past_511_to_1() {
        assert_eq!(next_seq(1), 2);
        assert_eq!(next_seq(511), 1);
    }

    #[test]
    fn go_back_n_after_bad_crc() {
        let mut tx = DlTx::default();
        let mut rx = DlRx::default();
        let mut src = Src(30, 0);
        let mut f = [[0u8; FLIT_LEN]; 3];
        let mut tls = [0u64; 3];
        for (b, t) in f.iter_mut().zip(tls.iter_mut()) {
            *t = u64::from(tx.pack_new(&mut src, b));
        }
        assert_eq!(tls.iter().sum::<u64>(), tx.tl_packed);
        assert_eq!(tx.unacked(), 3);
        let mut bad = f[0];
        bad[100] ^= 1;
        assert_eq!(rx.check(&bad, 0, 10), (RxVerdict::BadCrc, Some(1)));
        assert_eq!(rx.check(&f[1], 1, 10), (RxVerdict::OutOfOrder, None));
        tx.replay_from(1);
        let mut again = [0u8; FLIT_LEN];
        assert!(tx.resend_next(&mut again));
        assert_eq!(again, f[0]);
        assert_eq!(rx.check(&again, 20, 10).0, RxVerdict::Deliver);
        assert_eq!(rx.delivered_through(), 1);
        tx.ack(1);
        assert_eq!(tx.unacked(), 2);
        assert!(tx.replaying());
        // Flits 2 and 3 are still unacknowledged and undelivered.
        assert_eq!(tx.tl_unacked_after(0), tx.tl_unacked_after(1));
        assert_eq!(tx.tl_unacked_after(2) + tls[1], tx.tl_unacked_after(1));
    }

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
}
