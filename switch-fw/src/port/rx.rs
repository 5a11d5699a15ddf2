//! Receive buffers of a [`super::LinkPort`]: one slot per command credit the port grants its
//! peer, each holding one request or response with up to 256 B of data.
//!
//! A slot is taken when a transfer arrives (after the protocol's `CreditReceiver` accepted
//! its credits), handed out in arrival order, and freed by the owner once the frame has left
//! the switch or was dropped; freeing it returns its credits to the peer. The credit grant,
//! not this store, bounds what the peer may send: the port refuses a configuration that
//! grants more command credits than there are slots.

use crate::header::Header;
use heapless::Deque;
use podlink_protocol::flow::{CreditTarget, Credits};
use podlink_protocol::wire::tl_flit::{DataShape, BYTE_ENABLE_LEN, HALF_LEN, MAX_DATA_LEN};
use podlink_protocol::wire::tl_pack::Transfer;
use podlink_protocol::wire::TlField;

/// One received request or response: its control field and what followed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RxFrame {
    /// The control field, as received (its `pool` bit is the previous hop's).
    pub field: TlField,
    /// The byte-enable mask of a partial write.
    pub byte_enables: Option<[u8; BYTE_ENABLE_LEN]>,
    /// Poisoned beats (bit *i* = beat *i*).
    pub poisoned: u8,
    data_len: u16,
    data: [u8; MAX_DATA_LEN],
}

impl RxFrame {
    /// An empty frame (a zero flow-control field, no data).
    pub const EMPTY: RxFrame = RxFrame {
        field: TlField::FlowControl(podlink_protocol::wire::TlFlowControl {
            req_cmd: 0,
            rsp_cmd: 0,
            req_data: 0,
            rsp_data: 0,
        }),
        byte_enables: None,
        poisoned: 0,
        data_len: 0,
        data: [0; MAX_DATA_LEN],
    };

    /// A copy of a transfer (data beyond 256 B is cut; a transfer never has more).
    pub fn from_transfer(t: &Transfer<'_>) -> RxFrame {
        let mut f = RxFrame {
            field: t.field,
            byte_enables: t.byte_enables.copied(),
            poisoned: t.poisoned,
            ..RxFrame::EMPTY
        };
        let n = t.data.len().min(MAX_DATA_LEN);
        if let (Some(dst), Some(src)) = (f.data.get_mut(..n), t.data.get(..n)) {
            dst.copy_from_slice(src);
        }
        f.data_len = u16::try_from(n).unwrap_or(0);
        f
    }

    /// The data bytes.
    pub fn data(&self) -> &[u8] {
        self.data.get(..usize::from(self.data_len)).unwrap_or(&[])
    }

    /// The frame as a transfer for the TL packer.
    pub fn transfer(&self) -> Transfer<'_> {
        Transfer {
            field: self.field,
            data: self.data(),
            byte_enables: self.byte_enables.as_ref(),
            poisoned: self.poisoned,
        }
    }

    /// What the switch routes on.
    pub fn header(&self) -> Header {
        Header::from_tl(&self.field)
    }

    /// Bytes on the TL stream: the field plus its data and byte-enable half-flits (for rate
    /// caps).
    pub fn wire_bytes(&self) -> u16 {
        let halves = DataShape::of(&self.field).map_or(0, |s| s.halves());
        let n = self
            .field
            .buffer_len()
            .saturating_add(halves.saturating_mul(HALF_LEN));
        u16::try_from(n).unwrap_or(u16::MAX)
    }
}

/// Credits a held slot returns when it is freed; `None` for a slot held across a link reset
/// (the peer's credits were re-granted from scratch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held {
    pub(crate) credits: Option<(CreditTarget, Credits)>,
}

/// `SLOTS` receive slots (at most 255) and the arrival order.
#[derive(Debug, Clone)]
pub(crate) struct RxStore<const SLOTS: usize> {
    frames: [RxFrame; SLOTS],
    held: [Option<Held>; SLOTS],
    arrivals: Deque<u8, SLOTS>,
    orphans: u16,
}

impl<const SLOTS: usize> RxStore<SLOTS> {
    const SLOTS_OK: () = assert!(SLOTS >= 1 && SLOTS <= 255, "1..=255 receive slots");

    pub(crate) fn new() -> Self {
        let () = Self::SLOTS_OK;
        RxStore {
            frames: [const { RxFrame::EMPTY }; SLOTS],
            held: [None; SLOTS],
            arrivals: Deque::new(),
            orphans: 0,
        }
    }

    /// Store an arrived transfer; `None` when every slot is held.
    pub(crate) fn put(&mut self, t: &Transfer<'_>, target: CreditTarget, needs: Credits) -> bool {
        // A port without address compression cannot expand a compressed request, and
        // must not forward it: the next link's caches are not the sender's.
        if cfg!(not(feature = "addr-compression"))
            && matches!(t.field, TlField::CompressedRequest(_))
        {
            return false;
        }
        let Some(i) = self.held.iter().position(Option::is_none) else {
            return false;
        };
        let (Some(h), Some(f), Ok(idx)) = (
            self.held.get_mut(i),
            self.frames.get_mut(i),
            u8::try_from(i),
        ) else {
            return false;
        };
        *h = Some(Held {
            credits: Some((target, needs)),
        });
        *f = RxFrame::from_transfer(t);
        // Cannot fail: at most SLOTS slots are held, so at most SLOTS arrivals wait.
        let _ = self.arrivals.push_back(idx);
        true
    }

    pub(crate) fn next_arrival(&mut self) -> Option<u8> {
        self.arrivals.pop_front()
    }

    pub(crate) fn frame(&self, slot: u8) -> Option<&RxFrame> {
        let i = usize::from(slot);
        self.held.get(i)?.as_ref()?;
        self.frames.get(i)
    }

    /// Free a held slot; returns the credits to give back (if any). `None` (nothing changes)
    /// when the slot is not held.
    pub(crate) fn free(&mut self, slot: u8) -> Option<Held> {
        let h = self.held.get_mut(usize::from(slot))?.take()?;
        if h.credits.is_none() {
            self.orphans = self.orphans.saturating_sub(1);
        }
        Some(h)
    }

    /// Slots held.
    pub(crate) fn held(&self) -> usize {
        self.held.iter().flatten().count()
    }

    /// Slots held across a link reset, not yet freed.
    pub(crate) fn orphans(&self) -> u16 {
        self.orphans
    }

    /// Link reset: arrivals not yet handed out are freed; slots the owner holds keep their
    /// frame but return no credits when freed.
    pub(crate) fn reset(&mut self) {
        while let Some(i) = self.arrivals.pop_front() {
            if let Some(h) = self.held.get_mut(usize::from(i)) {
                *h = None;
            }
        }
        for h in self.held.iter_mut().flatten() {
            if h.credits.take().is_some() {
                self.orphans = self.orphans.saturating_add(1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podlink_protocol::wire::{AccelId, Opcode, Tag, TlUncompressedRequest, Vc};

    fn write(tag: u16, bytes: usize) -> TlField {
        TlField::UncompressedRequest(TlUncompressedRequest {
            cmd: Opcode::WriteFull,
            vchan: Vc::new(1).unwrap(),
            tag: Tag::new(tag).unwrap(),
            len: (bytes / 4 - 1) as u8,
            numbeats: (bytes.div_ceil(64) - 1) as u8,
            addr: 0x1000 >> 2,
            srcaccid: AccelId::new(1).unwrap(),
            dstaccid: AccelId::new(2).unwrap(),
            ..Default::default()
        })
    }

    #[test]
    fn test_store_order_free_and_reset() {
        let data = [7u8; 128];
        let t = Transfer::new(write(1, 128), &data);
        let vc1 = CreditTarget::Vc(Vc::new(1).unwrap());
        let mut s = RxStore::<2>::new();
        assert!(s.put(&t, vc1, Credits::request(2)));
        assert!(s.put(
            &Transfer::new(write(2, 128), &data),
            vc1,
            Credits::request(2)
        ));
        assert!(!s.put(&t, vc1, Credits::request(2)));
        assert_eq!(s.next_arrival(), Some(0));
        let f = s.frame(0).unwrap();
        assert_eq!((f.data(), f.field), (&data[..], write(1, 128)));
        assert_eq!(f.wire_bytes(), 16 + 4 * 32);
        assert_eq!(f.header().beats, 2);
        assert_eq!(f.transfer().check().unwrap().beats, 2);
        let h = s.free(0).unwrap();
        assert_eq!(h.credits, Some((vc1, Credits::request(2))));
        assert_eq!(s.free(0), None);
        assert_eq!(s.frame(0), None);
        // Slot 1 waits as an arrival; a reset frees it. A handed-out slot becomes an orphan.
        assert!(s.put(&t, vc1, Credits::request(2)));
        assert_eq!(s.next_arrival(), Some(1));
        assert_eq!(s.next_arrival(), Some(0));
        s.reset();
        assert_eq!((s.held(), s.orphans()), (2, 2));
        assert_eq!(s.free(1).unwrap().credits, None);
        assert_eq!(s.orphans(), 1);
    }
}
