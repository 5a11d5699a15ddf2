//! What a sender knows of the VC buffers at the far end of a channel: credits and ownership.
//!
//! One `BufferState` per output port (and one per injecting terminal) mirrors BookSim's
//! `BufferState` with the private buffer policy: each VC has `vc_buf_size` slots; a flit sent
//! takes a slot, a credit returns it. A packet takes a VC with its head flit and releases it
//! with its tail (or, with `wait_for_tail_credit`, when the tail's credit has come back and
//! the VC is empty).

use super::flit::{Credit, Flit};
use super::RouterError;

/// Credit and ownership state of the downstream VC buffers of one channel.
///
/// Kept as bitmasks over the (at most 64) VCs plus a fixed table of per-VC occupancies, so
/// the allocators read availability and credit as single words and no access needs a bounds
/// check. A VC is available exactly when no packet holds it.
///
/// Laid out so that everything about the first 15 VCs shares one cache line.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub struct BufferState {
    avail: u64,
    full: u64,
    tail_sent: u64,
    vc_buf_size: u32,
    occupancy: u32,
    wait_for_tail_credit: bool,
    vc_occ: [u16; 64],
}

impl BufferState {
    /// `vcs` VCs of `vc_buf_size` slots, all free and empty.
    pub fn new(vcs: usize, vc_buf_size: usize, wait_for_tail_credit: bool) -> Self {
        BufferState {
            avail: if vcs >= 64 { !0 } else { (1u64 << vcs) - 1 },
            full: 0,
            tail_sent: 0,
            vc_buf_size: vc_buf_size as u32,
            occupancy: 0,
            wait_for_tail_credit,
            vc_occ: [0; 64],
        }
    }

    /// Bit `v` set when VC `v` is available (no packet holds it).
    #[inline]
    pub fn avail_mask(&self) -> u64 {
        self.avail
    }

    /// Bit `v` set when VC `v` has no free slot.
    #[inline]
    pub fn full_mask(&self) -> u64 {
        self.full
    }

    /// Whether no packet holds VC `vc`.
    #[inline]
    pub fn is_available_for(&self, vc: usize) -> bool {
        self.avail & (1u64 << vc) != 0
    }

    /// Whether VC `vc` has no free slot.
    #[inline]
    pub fn is_full_for(&self, vc: usize) -> bool {
        self.full & (1u64 << vc) != 0
    }

    /// Whether VC `vc` holds no flit (all its credits are back).
    #[inline]
    pub fn is_empty_for(&self, vc: usize) -> bool {
        self.vc_occ[vc] == 0
    }

    /// Slots in use on VC `vc`.
    #[inline]
    pub fn occupancy_for(&self, vc: usize) -> u32 {
        u32::from(self.vc_occ[vc])
    }

    /// Slots in use over all VCs.
    #[inline]
    pub fn occupancy(&self) -> u32 {
        self.occupancy
    }

    /// A packet (identified by `tag`) takes VC `vc`.
    #[inline]
    pub fn take_buffer(&mut self, vc: usize, tag: u32) -> Result<(), RouterError> {
        let _ = tag;
        let bit = 1u64 << (vc & 63);
        if self.avail & bit == 0 {
            return Err(RouterError::VcTaken { vc: vc as u8 });
        }
        self.avail &= !bit;
        self.tail_sent &= !bit;
        Ok(())
    }

    /// A flit is sent on its VC.
    #[inline]
    pub fn sending_flit(&mut self, f: &Flit) -> Result<(), RouterError> {
        let vc = f.vc as usize & 63;
        let bit = 1u64 << vc;
        let occ = u32::from(self.vc_occ[vc]);
        if occ >= self.vc_buf_size {
            return Err(RouterError::NoCredit { vc: f.vc });
        }
        self.vc_occ[vc] = (occ + 1) as u16;
        if occ + 1 >= self.vc_buf_size {
            self.full |= bit;
        }
        self.occupancy += 1;
        if f.is_tail() {
            self.tail_sent |= bit;
            if !self.wait_for_tail_credit {
                self.avail |= bit;
            }
        }
        Ok(())
    }

    /// A credit comes back.
    #[inline]
    pub fn process_credit(&mut self, c: Credit) -> Result<(), RouterError> {
        let mut mask = c.0;
        if mask & mask.wrapping_sub(1) == 0 && mask != 0 && !self.wait_for_tail_credit {
            // One VC, released with its tail already: the common case.
            let vc = mask.trailing_zeros() as usize & 63;
            let occ = self.vc_occ[vc];
            if occ == 0 {
                return Err(RouterError::CreditUnderflow { vc: vc as u8 });
            }
            self.vc_occ[vc] = occ - 1;
            self.full &= !mask;
            self.occupancy -= 1;
            return Ok(());
        }
        while mask != 0 {
            let vc = mask.trailing_zeros() as usize & 63;
            let bit = mask & mask.wrapping_neg();
            mask &= mask - 1;
            let occ = self.vc_occ[vc];
            if occ == 0 {
                return Err(RouterError::CreditUnderflow { vc: vc as u8 });
            }
            if self.wait_for_tail_credit && self.avail & bit != 0 {
                return Err(RouterError::CreditForIdleVc { vc: vc as u8 });
            }
            self.vc_occ[vc] = occ - 1;
            self.full &= !bit;
            self.occupancy -= 1;
            if self.wait_for_tail_credit && occ == 1 && self.tail_sent & bit != 0 {
                self.avail |= bit;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credit_cycle_and_release_on_tail() {
        let mut b = BufferState::new(2, 2, false);
        b.take_buffer(1, 7).unwrap();
        assert!(!b.is_available_for(1));
        let mut f = Flit::new(0, 0, true, false);
        f.vc = 1;
        b.sending_flit(&f).unwrap();
        let mut t = Flit::new(0, 0, false, true);
        t.vc = 1;
        b.sending_flit(&t).unwrap();
        assert!(b.is_full_for(1));
        assert!(b.is_available_for(1)); // released with the tail
        assert!(b.sending_flit(&t).is_err());
        b.process_credit(Credit(0b10)).unwrap();
        b.process_credit(Credit(0b10)).unwrap();
        assert!(b.is_empty_for(1));
        assert_eq!(b.full_mask(), 0);
        assert_eq!(b.avail_mask(), 0b11);
        assert_eq!(
            b.process_credit(Credit(0b10)),
            Err(RouterError::CreditUnderflow { vc: 1 })
        );
    }

    #[test]
    fn wait_for_tail_credit_holds_the_vc() {
        let mut b = BufferState::new(1, 4, true);
        b.take_buffer(0, 1).unwrap();
        let f = Flit::new(0, 0, true, true);
        b.sending_flit(&f).unwrap();
        assert!(!b.is_available_for(0));
        assert_eq!(b.take_buffer(0, 2), Err(RouterError::VcTaken { vc: 0 }));
        b.process_credit(Credit(1)).unwrap();
        assert!(b.is_available_for(0));
    }
}
