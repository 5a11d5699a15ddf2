//! Per-VC go-back-N transmit state of the Ethernet link: a ring of up to `FRAMES` frames of up
//! to `MAXF` TL flits, numbered by 16-bit PSNs.

use crate::wire::dl_stream::TL_FLIT_LEN;
use crate::wire::{AccelId, Psn};

/// A frame kept for retransmission.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stored<const MAXF: usize> {
    pub(crate) dst: AccelId,
    pub(crate) n: usize,
    pub(crate) flits: [[u8; TL_FLIT_LEN]; MAXF],
}

/// What an incoming cumulative ack did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acked {
    Freed(u16),
    Duplicate,
    OutOfWindow,
}

#[derive(Debug, Clone)]
pub(crate) struct TxVc<const FRAMES: usize, const MAXF: usize> {
    ring: [Stored<MAXF>; FRAMES],
    head: u16,
    len: u16,
    sent: u16,
    next: u16,
    oldest: Psn,
}

impl<const FRAMES: usize, const MAXF: usize> TxVc<FRAMES, MAXF> {
    const OK: () = assert!(
        FRAMES >= 1 && FRAMES <= 32_768 && MAXF >= 1 && MAXF <= 64,
        "1..=32768 frames of 1..=64 flits"
    );
    #[allow(clippy::cast_possible_truncation)]
    const F16: u16 = FRAMES as u16;

    pub(crate) fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::OK;
        TxVc {
            ring: [Stored {
                dst: AccelId::default(),
                n: 0,
                flits: [[0; TL_FLIT_LEN]; MAXF],
            }; FRAMES],
            head: 0,
            len: 0,
            sent: 0,
            next: 0,
            oldest: Psn(0),
        }
    }

    fn idx(&self, off: u16) -> usize {
        let i = self.head.wrapping_add(off);
        usize::from(if i >= Self::F16 {
            i.wrapping_sub(Self::F16)
        } else {
            i
        })
    }

    pub(crate) fn has_room(&self) -> bool {
        self.len < Self::F16
    }
    pub(crate) fn unacked(&self) -> u16 {
        self.sent
    }
    pub(crate) fn buffered(&self) -> u16 {
        self.len
    }
    pub(crate) fn next_psn(&self) -> Psn {
        Psn(self.oldest.0.wrapping_add(self.len))
    }

    /// A new frame in the next slot, filled by `fill` (which returns the flit count).
    pub(crate) fn push(
        &mut self,
        dst: AccelId,
        fill: impl FnOnce(&mut [[u8; TL_FLIT_LEN]; MAXF]) -> usize,
    ) -> bool {
        if !self.has_room() {
            return false;
        }
        let i = self.idx(self.len);
        let Some(s) = self.ring.get_mut(i) else {
            return false;
        };
        s.dst = dst;
        s.n = fill(&mut s.flits).min(MAXF);
        self.len = self.len.wrapping_add(1);
        true
    }

    /// The next frame to put on the wire: PSN, frame, and whether it is a retransmission.
    pub(crate) fn peek(&self) -> Option<(Psn, &Stored<MAXF>, bool)> {
        if self.next >= self.len {
            return None;
        }
        let s = self.ring.get(self.idx(self.next))?;
        Some((
            Psn(self.oldest.0.wrapping_add(self.next)),
            s,
            self.next < self.sent,
        ))
    }

    pub(crate) fn mark_sent(&mut self) {
        if self.next < self.len {
            self.next = self.next.wrapping_add(1);
            self.sent = self.sent.max(self.next);
        }
    }

    /// Cumulative ack of `a`.
    pub(crate) fn ack(&mut self, a: Psn) -> Acked {
        let d = a.0.wrapping_sub(self.oldest.0);
        if d < self.sent {
            let n = d.wrapping_add(1);
            self.head = u16::try_from(self.idx(n)).unwrap_or(0);
            self.len = self.len.saturating_sub(n);
            self.sent = self.sent.saturating_sub(n);
            self.next = self.next.saturating_sub(n);
            self.oldest = Psn(self.oldest.0.wrapping_add(n));
            Acked::Freed(n)
        } else if a.0 == self.oldest.0.wrapping_sub(1) {
            Acked::Duplicate
        } else {
            Acked::OutOfWindow
        }
    }

    /// Go back to the oldest unacknowledged frame; returns the frames to resend.
    pub(crate) fn rewind(&mut self) -> u16 {
        self.next = 0;
        self.sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_ack_rewind_and_wrap() {
        let mut t = TxVc::<4, 2>::new();
        t.oldest = Psn(65534);
        for _ in 0..4 {
            assert!(t.push(AccelId::default(), |f| {
                f[0][0] = 1;
                1
            }));
        }
        assert!(!t.push(AccelId::default(), |_| 1));
        for _ in 0..3 {
            t.mark_sent();
        }
        assert_eq!(t.ack(Psn(65533)), Acked::Duplicate);
        assert_eq!(t.ack(Psn(1)), Acked::OutOfWindow); // sent only 65534, 65535, 0
        assert_eq!(t.ack(Psn(65535)), Acked::Freed(2));
        assert_eq!(t.rewind(), 1);
        let (psn, s, resend) = t.peek().unwrap();
        assert_eq!((psn, s.n, resend), (Psn(0), 1, true));
        assert_eq!(t.next_psn(), Psn(2));
    }
}
