//! Egress queues: two FIFOs per (egress port, VC, partition), one for responses and one for
//! requests, over a shared pool of frame descriptors, with the round-robin and rate-cap state
//! of each port (`spec-notes/switch.md#qos`).
//!
//! The pool is a singly linked free list of [`QUEUE_SLOTS`] descriptors; a FIFO is a head and
//! a tail index. Bit masks of non-empty partitions per (port, VC) keep the scheduler from
//! scanning empty queues. Per-port state is sized by the switch's port capacity `PORTS`. Requests never hold more than `QUEUE_SLOTS -
//! RESPONSE_RESERVE` descriptors, and a response never waits behind a request (their credits
//! are separate): together these keep requests from blocking the responses that would let
//! them drain (`spec-notes/switch.md#buffers-and-deadlock`).

use crate::header::{FrameKind, Header};
use crate::qos::{Gcra, SmoothWrr};
use crate::{
    MAX_PARTITIONS, NUM_VCS, QUEUE_SLOTS, RESPONSE_RESERVE, UPLINK_RESERVE, UPLINK_RESPONSE_RESERVE,
};
use podlink_protocol::time::Instant;
use podlink_protocol::wire::{AccelId, Vc};

const NIL: u16 = u16::MAX;

/// A queued frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) handle: u32,
    pub(crate) header: Header,
    pub(crate) bytes: u16,
    /// When the frame reached the switch (for the residence limit).
    #[cfg_attr(not(feature = "residence-limit"), allow(dead_code))]
    pub(crate) arrived: Instant,
    next: u16,
}

const EMPTY_SLOT: Slot = Slot {
    handle: 0,
    header: Header {
        kind: FrameKind::LinkLocal,
        src: None,
        dst: AccelId::from_bits_truncate(0),
        vc: Vc::from_bits_truncate(0),
        region: 0,
        beats: 0,
        last: false,
        tag: 0,
    },
    bytes: 0,
    arrived: Instant::ZERO,
    next: NIL,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fifo {
    head: u16,
    tail: u16,
}

const EMPTY_FIFO: Fifo = Fifo {
    head: NIL,
    tail: NIL,
};

/// FIFOs per port: per (VC, partition), one per lane.
const PORT_FIFOS: usize = NUM_VCS * MAX_PARTITIONS * 2;

/// The FIFO lane of responses.
pub(crate) const RESPONSES: u8 = 0;
/// The FIFO lane of requests.
pub(crate) const REQUESTS: u8 = 1;
/// Lanes in the order a port tries them: responses first.
pub(crate) const LANES: [u8; 2] = [RESPONSES, REQUESTS];
/// Most descriptors requests hold.
pub(crate) const REQUEST_SLOTS: u16 = (QUEUE_SLOTS - RESPONSE_RESERVE) as u16;
/// Dynamic threshold of one partition's requests: it may take another request descriptor
/// while it holds fewer than `ALPHA` times the request descriptors still free (so a lone
/// partition can use 4/5 of the requests' share, and a partition hogging them always leaves
/// some for the others: one tenant's incast cannot fill the switch).
pub(crate) const ALPHA: u32 = 4;

/// The lane of a frame.
#[inline(always)]
pub(crate) fn lane_of(h: &Header) -> u8 {
    u8::from(h.kind == FrameKind::Request)
}

/// Index of the (VC, partition, lane) FIFO within a port.
fn fifo_index(vc: u8, part: u8, lane: u8) -> usize {
    (((usize::from(vc & 3) * MAX_PARTITIONS) + usize::from(part)) << 1) | usize::from(lane & 1)
}

pub(crate) struct Egress<const PORTS: usize> {
    slots: [Slot; QUEUE_SLOTS],
    free: u16,
    used: u16,
    /// Descriptors held by queued requests.
    requests: u16,
    /// Of those, per partition index.
    part_requests: [u16; MAX_PARTITIONS],
    fifos: [[Fifo; PORT_FIFOS]; PORTS],
    part_mask: [[u16; NUM_VCS]; PORTS],
    depth: [[u16; NUM_VCS]; PORTS],
    /// Frames flushed from their queue, waiting for the caller to take their handles back.
    discard: Fifo,
    discarded: u16,
    pub(crate) vc_wrr: [SmoothWrr<NUM_VCS>; PORTS],
    pub(crate) part_wrr: [[SmoothWrr<MAX_PARTITIONS>; NUM_VCS]; PORTS],
    pub(crate) gcra: [[Gcra; MAX_PARTITIONS]; PORTS],
}

impl<const PORTS: usize> Egress<PORTS> {
    pub(crate) fn new() -> Self {
        let mut e = Egress {
            slots: [EMPTY_SLOT; QUEUE_SLOTS],
            free: 0,
            used: 0,
            requests: 0,
            part_requests: [0; MAX_PARTITIONS],
            fifos: [[EMPTY_FIFO; PORT_FIFOS]; PORTS],
            part_mask: [[0; NUM_VCS]; PORTS],
            depth: [[0; NUM_VCS]; PORTS],
            discard: EMPTY_FIFO,
            discarded: 0,
            vc_wrr: [SmoothWrr::new(); PORTS],
            part_wrr: [[SmoothWrr::new(); NUM_VCS]; PORTS],
            gcra: [[Gcra::new(); MAX_PARTITIONS]; PORTS],
        };
        for (i, s) in (1u16..).zip(e.slots.iter_mut()) {
            s.next = if usize::from(i) < QUEUE_SLOTS { i } else { NIL };
        }
        e
    }

    /// Whether any frame is queued (flushed frames not counted).
    pub(crate) fn any_backlog(&self) -> bool {
        self.used != self.discarded
    }

    /// Whether frames are queued at `port`.
    pub(crate) fn backlogged(&self, port: u16) -> bool {
        self.part_mask
            .get(usize::from(port))
            .is_some_and(|m| m.iter().any(|&x| x != 0))
    }

    /// Partitions with queued frames at (port, VC) (bit per partition index).
    pub(crate) fn part_mask(&self, port: u16, vc: u8) -> u16 {
        self.part_mask
            .get(usize::from(port))
            .and_then(|m| m.get(usize::from(vc & 3)))
            .copied()
            .unwrap_or(0)
    }

    /// Frames queued at (port, VC).
    pub(crate) fn depth(&self, port: u16, vc: u8) -> u16 {
        self.depth
            .get(usize::from(port))
            .and_then(|m| m.get(usize::from(vc & 3)))
            .copied()
            .unwrap_or(0)
    }

    /// The rate-cap state of (port, partition).
    pub(crate) fn gcra(&self, port: u16, part: u8) -> Option<&Gcra> {
        self.gcra.get(usize::from(port))?.get(usize::from(part))
    }

    /// The rate-cap state of (port, partition), to update.
    pub(crate) fn gcra_mut(&mut self, port: u16, part: u8) -> Option<&mut Gcra> {
        self.gcra
            .get_mut(usize::from(port))?
            .get_mut(usize::from(part))
    }

    /// Descriptors in use.
    pub(crate) fn used(&self) -> u16 {
        self.used
    }

    /// Whether a frame with header `h` of partition index `part` would find a descriptor:
    /// any free one for a response, and for a response going up (`up`) only while fewer
    /// than `RESPONSE_RESERVE - UPLINK_RESPONSE_RESERVE` responses are queued; for a
    /// request, one within the requests' share and within the partition's dynamic threshold
    /// ([`ALPHA`]), and for a request going up one that leaves [`UPLINK_RESERVE`] of the
    /// share free, with the threshold taken over what is free beyond it.
    pub(crate) fn has_room(&self, h: &Header, part: u8, up: bool) -> bool {
        if usize::from(self.used) >= QUEUE_SLOTS {
            return false;
        }
        if lane_of(h) == RESPONSES {
            let responses = self.used.wrapping_sub(self.requests);
            return !up || usize::from(responses) < RESPONSE_RESERVE - UPLINK_RESPONSE_RESERVE;
        }
        let reserve = if up { UPLINK_RESERVE as u16 } else { 0 };
        let free = u32::from(REQUEST_SLOTS.saturating_sub(self.requests.saturating_add(reserve)));
        let mine = self
            .part_requests
            .get(usize::from(part))
            .copied()
            .unwrap_or(u16::MAX);
        free != 0 && u32::from(mine) < ALPHA * free
    }

    /// Append a frame to its lane's (port, VC, partition) FIFO; `Err` when it finds no
    /// descriptor ([`Egress::has_room`]; `up`: a frame going up) or the indices are out
    /// of range.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push(
        &mut self,
        port: u16,
        part: u8,
        up: bool,
        handle: u32,
        header: Header,
        bytes: u16,
        arrived: Instant,
    ) -> Result<(), ()> {
        let vc = header.vc.get();
        let lane = lane_of(&header);
        let fi = fifo_index(vc, part, lane);
        if usize::from(port) >= PORTS
            || usize::from(part) >= MAX_PARTITIONS
            || !self.has_room(&header, part, up)
        {
            return Err(());
        }
        let idx = self.free;
        let slot = self.slots.get_mut(usize::from(idx)).ok_or(())?;
        self.free = slot.next;
        *slot = Slot {
            handle,
            header,
            bytes,
            arrived,
            next: NIL,
        };
        let fifo = self
            .fifos
            .get_mut(usize::from(port))
            .and_then(|f| f.get_mut(fi))
            .ok_or(())?;
        let old_tail = fifo.tail;
        fifo.tail = idx;
        if old_tail == NIL {
            fifo.head = idx;
        } else if let Some(t) = self.slots.get_mut(usize::from(old_tail)) {
            t.next = idx;
        }
        self.used = self.used.wrapping_add(1);
        self.requests = self.requests.wrapping_add(u16::from(lane));
        if let Some(c) = self.part_requests.get_mut(usize::from(part)) {
            *c = c.wrapping_add(u16::from(lane));
        }
        let (p, v) = (usize::from(port), usize::from(vc & 3));
        if let Some(m) = self.part_mask.get_mut(p).and_then(|m| m.get_mut(v)) {
            *m |= 1 << (part & 15);
        }
        if let Some(d) = self.depth.get_mut(p).and_then(|d| d.get_mut(v)) {
            *d = d.wrapping_add(1);
        }
        Ok(())
    }

    /// The frame at the head of the (port, VC, partition) FIFO of `lane`.
    pub(crate) fn peek(&self, port: u16, vc: u8, part: u8, lane: u8) -> Option<&Slot> {
        let head = self
            .fifos
            .get(usize::from(port))?
            .get(fifo_index(vc, part, lane))?
            .head;
        self.slots.get(usize::from(head))
    }

    /// Remove and return the head of the (port, VC, partition) FIFO of `lane`.
    pub(crate) fn pop(&mut self, port: u16, vc: u8, part: u8, lane: u8) -> Option<Slot> {
        let (p, v) = (usize::from(port), usize::from(vc & 3));
        let fifos = self.fifos.get_mut(p)?;
        let fifo = fifos.get_mut(fifo_index(vc, part, lane))?;
        let idx = fifo.head;
        let slot = *self.slots.get(usize::from(idx))?;
        fifo.head = slot.next;
        if slot.next == NIL {
            fifo.tail = NIL;
            let other = fifos
                .get(fifo_index(vc, part, lane ^ 1))
                .map_or(NIL, |f| f.head);
            if let Some(m) = self
                .part_mask
                .get_mut(p)
                .and_then(|m| m.get_mut(v))
                .filter(|_| other == NIL)
            {
                *m &= !(1 << (part & 15));
            }
        }
        if let Some(d) = self.depth.get_mut(p).and_then(|d| d.get_mut(v)) {
            *d = d.saturating_sub(1);
        }
        if let Some(s) = self.slots.get_mut(usize::from(idx)) {
            s.next = self.free;
        }
        self.free = idx;
        self.used = self.used.saturating_sub(1);
        self.requests = self.requests.saturating_sub(u16::from(lane & 1));
        if let Some(c) = self.part_requests.get_mut(usize::from(part)) {
            *c = c.saturating_sub(u16::from(lane & 1));
        }
        Some(slot)
    }

    /// Remove every frame queued at `port` and keep its descriptor on the discard list until
    /// [`Egress::pop_discard`]; returns how many.
    pub(crate) fn drain_port(&mut self, port: u16) -> u32 {
        let mut n = 0u32;
        for vc in 0..NUM_VCS as u8 {
            for part in 0..MAX_PARTITIONS as u8 {
                for lane in LANES {
                    while let Some(s) = self.pop(port, vc, part, lane) {
                        self.push_discard(s);
                        n = n.wrapping_add(1);
                    }
                }
            }
        }
        n
    }

    /// Move the head of the (port, VC, partition) FIFO of `lane` to the discard list (it
    /// aged past the residence limit); returns it.
    #[cfg(feature = "residence-limit")]
    pub(crate) fn discard_head(&mut self, port: u16, vc: u8, part: u8, lane: u8) -> Option<Slot> {
        let s = self.pop(port, vc, part, lane)?;
        self.push_discard(s);
        Some(s)
    }

    /// Append a popped frame to the discard list (the descriptor `pop` just freed is reused).
    fn push_discard(&mut self, s: Slot) {
        let idx = self.free;
        let Some(slot) = self.slots.get_mut(usize::from(idx)) else {
            return;
        };
        self.free = slot.next;
        *slot = Slot { next: NIL, ..s };
        let old_tail = self.discard.tail;
        self.discard.tail = idx;
        if old_tail == NIL {
            self.discard.head = idx;
        } else if let Some(t) = self.slots.get_mut(usize::from(old_tail)) {
            t.next = idx;
        }
        self.used = self.used.wrapping_add(1);
        self.discarded = self.discarded.wrapping_add(1);
    }

    /// The oldest flushed frame, freeing its descriptor.
    pub(crate) fn pop_discard(&mut self) -> Option<Slot> {
        let idx = self.discard.head;
        let slot = *self.slots.get(usize::from(idx))?;
        self.discard.head = slot.next;
        if slot.next == NIL {
            self.discard.tail = NIL;
        }
        if let Some(s) = self.slots.get_mut(usize::from(idx)) {
            s.next = self.free;
        }
        self.free = idx;
        self.used = self.used.saturating_sub(1);
        self.discarded = self.discarded.saturating_sub(1);
        Some(slot)
    }

    /// Flushed frames not yet taken back.
    pub(crate) fn discarded(&self) -> u16 {
        self.discarded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Egress<64> {
        /// Bit per backlogged port.
        fn backlogged_ports(&self) -> u64 {
            (0..64u16)
                .filter(|&p| self.backlogged(p))
                .fold(0, |m, p| m | 1 << p)
        }
    }

    fn hdr(vc: u8) -> Header {
        Header::response(None, AccelId::new(1).unwrap(), Vc::new(vc).unwrap())
    }

    #[test]
    fn test_fifo_order_and_masks() {
        let mut e = Egress::<64>::new();
        for h in 0..3 {
            e.push(5, 2, false, h, hdr(1), 64, Instant::ZERO).unwrap();
        }
        e.push(5, 3, false, 9, hdr(0), 64, Instant::ZERO).unwrap();
        assert_eq!(e.backlogged_ports(), 1 << 5);
        assert_eq!(e.part_mask(5, 1), 1 << 2);
        assert_eq!(e.depth(5, 1), 3);
        assert_eq!(e.used(), 4);
        assert_eq!(e.peek(5, 1, 2, RESPONSES).unwrap().handle, 0);
        for h in 0..3 {
            assert_eq!(e.pop(5, 1, 2, RESPONSES).unwrap().handle, h);
        }
        assert_eq!(e.pop(5, 1, 2, RESPONSES), None);
        assert_eq!(e.backlogged_ports(), 1 << 5);
        assert_eq!(e.drain_port(5), 1);
        assert_eq!(e.backlogged_ports(), 0);
        assert_eq!((e.used(), e.discarded()), (1, 1));
        assert_eq!(e.pop_discard().map(|s| s.handle), Some(9));
        assert_eq!(e.pop_discard(), None);
        assert_eq!((e.used(), e.discarded()), (0, 0));
        // The freed descriptors are usable again.
        for h in 0..QUEUE_SLOTS as u32 {
            e.push((h % 64) as u16, 0, false, h, hdr(0), 64, Instant::ZERO)
                .unwrap();
        }
    }

    #[test]
    fn test_pool_exhaustion() {
        let mut e = Egress::<64>::new();
        for h in 0..QUEUE_SLOTS as u32 {
            e.push((h % 64) as u16, 0, false, h, hdr(0), 64, Instant::ZERO)
                .unwrap();
        }
        assert!(e.push(0, 0, false, 0, hdr(0), 64, Instant::ZERO).is_err());
        assert!(e.pop(3, 0, 0, RESPONSES).is_some());
        assert!(e.push(0, 0, false, 0, hdr(0), 64, Instant::ZERO).is_ok());
        assert!(e.push(64, 0, false, 0, hdr(0), 64, Instant::ZERO).is_err());
        assert!(e.push(0, 16, false, 0, hdr(0), 64, Instant::ZERO).is_err());
    }

    fn req(vc: u8) -> Header {
        Header::request(
            AccelId::new(2).unwrap(),
            AccelId::new(1).unwrap(),
            Vc::new(vc).unwrap(),
            0,
        )
    }

    #[test]
    fn test_requests_leave_room_for_responses() {
        let mut e = Egress::<64>::new();
        // Requests of every partition, while any has room: never beyond the requests' share.
        let mut n = 0u32;
        while let Some(part) = (0..16u8).find(|&p| e.has_room(&req(0), p, false)) {
            e.push((n % 64) as u16, part, false, n, req(0), 64, Instant::ZERO)
                .unwrap();
            n += 1;
        }
        assert!(
            n <= u32::from(REQUEST_SLOTS) && n > u32::from(REQUEST_SLOTS) - 64,
            "{n}"
        );
        assert!(e.push(0, 0, false, 0, req(1), 64, Instant::ZERO).is_err());
        // Responses take everything else: at least the reserve.
        let mut k = 0u32;
        while e.has_room(&hdr(0), 3, false) {
            e.push((k % 64) as u16, 3, false, k, hdr(0), 64, Instant::ZERO)
                .unwrap();
            k += 1;
        }
        assert!(k as usize >= RESPONSE_RESERVE);
        assert_eq!(usize::from(e.used()), QUEUE_SLOTS);
        assert!(e.push(0, 0, false, 0, hdr(0), 64, Instant::ZERO).is_err());
        // A response leaving makes room for another.
        assert!(e.pop(3, 0, 3, RESPONSES).is_some());
        assert!(e.has_room(&hdr(0), 3, false));
        // Discarded requests count as used descriptors, not as requests.
        let n = e.drain_port(1);
        assert!(n > 0);
        assert_eq!(e.discarded(), n as u16);
    }

    /// One partition's requests stop at the dynamic threshold (fewer than ALPHA times the
    /// free request descriptors); another partition still finds room, and so would a third.
    #[test]
    fn test_one_partition_cannot_take_every_request_descriptor() {
        let mut e = Egress::<64>::new();
        let mut n = 0u32;
        while e.has_room(&req(0), 2, false) {
            e.push((n % 64) as u16, 2, false, n, req(0), 64, Instant::ZERO)
                .unwrap();
            n += 1;
            assert!(n <= u32::from(REQUEST_SLOTS));
        }
        // n < 4 (768 - n) stops at n = 615: four fifths of the requests' share.
        assert_eq!(n, 615);
        assert!(e.push(0, 2, false, 0, req(0), 64, Instant::ZERO).is_err());
        let free = u32::from(REQUEST_SLOTS) - n;
        let mut m = 0u32;
        while e.has_room(&req(0), 5, false) {
            e.push(
                (m % 64) as u16,
                5,
                false,
                10_000 + m,
                req(0),
                64,
                Instant::ZERO,
            )
            .unwrap();
            m += 1;
        }
        assert!(m > 0 && m < free, "{m} of {free}");
        // Both partitions stopped, yet request descriptors are left for a third.
        assert!(e.has_room(&req(0), 9, false));
        // Responses are never held back by the thresholds.
        assert!(e.has_room(&hdr(0), 2, false));
    }

    #[test]
    fn test_response_lane_is_not_behind_requests() {
        let mut e = Egress::<64>::new();
        e.push(3, 1, false, 10, req(2), 64, Instant::ZERO).unwrap();
        e.push(3, 1, false, 11, hdr(2), 64, Instant::ZERO).unwrap();
        e.push(3, 1, false, 12, req(2), 64, Instant::ZERO).unwrap();
        assert_eq!(e.depth(3, 2), 3);
        assert_eq!(e.peek(3, 2, 1, RESPONSES).unwrap().handle, 11);
        assert_eq!(e.peek(3, 2, 1, REQUESTS).unwrap().handle, 10);
        // The response leaves first; the partition stays backlogged while requests wait.
        assert_eq!(e.pop(3, 2, 1, RESPONSES).unwrap().handle, 11);
        assert_eq!(e.part_mask(3, 2), 1 << 1);
        assert_eq!(e.pop(3, 2, 1, REQUESTS).unwrap().handle, 10);
        assert_eq!(e.pop(3, 2, 1, REQUESTS).unwrap().handle, 12);
        assert_eq!(
            (e.part_mask(3, 2), e.backlogged_ports(), e.depth(3, 2)),
            (0, 0, 0)
        );
        assert_eq!(e.used(), 0);
    }
}
