//! The requester: turns operations into tagged requests and responses into completions
//! (`spec-notes/transactions.md#requester`).

use heapless::Deque;

use super::atomic::get_le;
use super::partition::PartitionTable;
use super::queue::SlotQueue;
use super::request::{blocks, build_piece, plan, OpKind, Operation, Piece, Request, SubmitError};
use super::requester_types::{
    Completion, DropReason, OpId, ReadData, RequesterConfig, RequesterEvent, RequesterStats,
};
use super::tags::{TagState, TagTable};
use super::{CreditGate, Flow, OrderingMode, Pool, Status, TxnError};
use crate::time::{earliest, Duration, Instant};
use crate::wire::addr_cache::{decode_response, AddrCache};
use crate::wire::tl_flit::BEAT_LEN as BEAT_BYTES;
use crate::wire::{AccelId, Opcode, Tag, TlField, TlTransfer, TlUncompressedRequest, Vc};

/// Events kept for [`Requester::poll_event`]; older ones are not lost silently but counted.
const EVENTS: usize = 16;

#[derive(Clone, Copy)]
struct Outstanding {
    op: u16,
    cmd: Opcode,
    dst: AccelId,
    vc: Vc,
    addr: u64,
    expect_beats: u8,
    received: u8,
}

const IDLE: Outstanding = Outstanding {
    op: 0,
    cmd: Opcode::Read,
    dst: AccelId::from_bits_truncate(0),
    vc: Vc::from_bits_truncate(0),
    addr: 0,
    expect_beats: 0,
    received: 0,
};

#[derive(Clone, Copy)]
struct OpSlot {
    id: OpId,
    kind: OpKind,
    addr: u64,
    len: u64,
    atomic_bytes: usize,
    queued: u16,
    in_flight: u16,
    error: Option<TxnError>,
    old: Option<u64>,
    queue_deadline: Instant,
    live: bool,
    done: bool,
}

const FREE_OP: OpSlot = OpSlot {
    id: OpId(0),
    kind: OpKind::Read,
    addr: 0,
    len: 0,
    atomic_bytes: 0,
    queued: 0,
    in_flight: 0,
    error: None,
    old: None,
    queue_deadline: Instant::NEVER,
    live: false,
    done: false,
};

/// The requester side of a port: tags, outstanding requests, timeouts, ordering.
///
/// * `TAGS`: tag pool size (≤ 2048) = most requests in flight.
/// * `OPS`: most operations submitted and not yet polled as completions.
/// * `QUEUE`: most requests waiting for a tag or credits; one operation splits into at most
///   this many requests.
///
/// Sans-IO (`spec-notes/transactions.md#polling`): submit operations; then, until nothing
/// changes, call [`poll_transmit`](Self::poll_transmit) and send each item; feed every
/// received response to [`handle_response`](Self::handle_response); call
/// [`handle_timeout`](Self::handle_timeout) at or after [`poll_timeout`](Self::poll_timeout);
/// drain [`poll_completion`](Self::poll_completion) and [`poll_event`](Self::poll_event).
/// `now` must never go backwards between calls.
pub struct Requester<const TAGS: usize, const OPS: usize, const QUEUE: usize> {
    config: RequesterConfig,
    dst_partitions: Option<PartitionTable>,
    tags: TagTable<TAGS>,
    outstanding: [Outstanding; TAGS],
    ops: [OpSlot; OPS],
    free_ops: heapless::Vec<u16, OPS>,
    done: Deque<u16, OPS>,
    queue: SlotQueue<Piece, QUEUE>,
    /// The request last handed out by `poll_transmit` (its data is borrowed from here).
    staged: Piece,
    staged_field: TlField,
    encoder: AddrCache,
    next_id: u32,
    events: Deque<RequesterEvent, EVENTS>,
    stats: RequesterStats,
}

impl<const TAGS: usize, const OPS: usize, const QUEUE: usize> Requester<TAGS, OPS, QUEUE> {
    /// A requester with no operation in flight.
    pub fn new(config: RequesterConfig) -> Self {
        const { assert!(OPS >= 1 && OPS <= u16::MAX as usize, "1 ≤ OPS ≤ 65535") };
        let mut free_ops = heapless::Vec::new();
        for i in (0..OPS).rev() {
            let _ = free_ops.push(i as u16);
        }
        Requester {
            config,
            dst_partitions: None,
            tags: TagTable::new(),
            outstanding: [IDLE; TAGS],
            ops: [FREE_OP; OPS],
            free_ops,
            done: Deque::new(),
            queue: SlotQueue::new(),
            staged: Piece::EMPTY,
            staged_field: TlField::UncompressedRequest(TlUncompressedRequest::default()),
            encoder: AddrCache::new(),
            next_id: 0,
            events: Deque::new(),
            stats: RequesterStats::default(),
        }
    }

    /// Refuse, at submission, operations whose destination is in another partition
    /// according to `table` (`None`: leave the check to the completers).
    pub fn set_partition_check(&mut self, table: Option<PartitionTable>) {
        self.dst_partitions = table;
    }

    /// The settings.
    pub const fn config(&self) -> &RequesterConfig {
        &self.config
    }

    /// The counters.
    pub const fn stats(&self) -> &RequesterStats {
        &self.stats
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> usize {
        self.tags.in_flight()
    }

    /// The first wire tag of this requester ([`RequesterConfig::tag_base`], moved down so
    /// that all `TAGS` fit in 11 bits).
    pub fn tag_base(&self) -> u16 {
        let max = (1usize << Tag::BITS).saturating_sub(TAGS);
        self.config.tag_base.min(max as u16)
    }

    /// Whether wire tag `tag` is one of this requester's.
    pub fn owns_tag(&self, tag: Tag) -> bool {
        self.local_tag(tag).is_some()
    }

    /// The pool index of wire tag `tag`, if it is one of this requester's.
    fn local_tag(&self, tag: Tag) -> Option<Tag> {
        let i = tag.get().checked_sub(self.tag_base())?;
        (usize::from(i) < TAGS).then(|| Tag::new(i)).flatten()
    }

    /// The wire tag of pool index `tag`.
    fn wire_tag(&self, tag: Tag) -> Tag {
        Tag::from_bits_truncate(tag.get().saturating_add(self.tag_base()))
    }

    /// The operation a tag in flight (a wire tag) belongs to (for tracing).
    pub fn in_flight_op(&self, tag: Tag) -> Option<OpId> {
        let tag = self.local_tag(tag)?;
        if self.tags.state(tag) != Some(TagState::InFlight) {
            return None;
        }
        let o = self.outstanding.get(usize::from(tag.get()))?;
        self.ops.get(usize::from(o.op)).map(|op| op.id)
    }

    /// Requests waiting to be sent.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Operations submitted and not yet polled as completions.
    pub fn ops_open(&self) -> usize {
        OPS - self.free_ops.len()
    }

    /// Submit an operation.
    ///
    /// # Errors
    /// [`SubmitError`]; nothing is queued then.
    pub fn submit(&mut self, now: Instant, req: &Request<'_>) -> Result<OpId, SubmitError> {
        let pieces = plan(&req.op)?;
        if let Some(t) = &self.dst_partitions {
            if !t.is_member(req.dst, self.config.partition) {
                self.stats.partition_denied += 1;
                return Err(SubmitError::PartitionDenied);
            }
        }
        if pieces > self.queue.free_slots() {
            return Err(SubmitError::QueueFull {
                needed: pieces,
                free: self.queue.free_slots(),
            });
        }
        let slot = *self.free_ops.last().ok_or(SubmitError::OpTableFull)?;
        let _ = self.free_ops.pop();
        let id = OpId(self.next_id);
        self.next_id = self.next_id.wrapping_add(1);
        let (addr, len) = req.op.range();
        let atomic_bytes = match req.op {
            Operation::Atomic { atomic, .. } => atomic.size.bytes(),
            _ => 0,
        };
        if let Some(op) = self.ops.get_mut(usize::from(slot)) {
            *op = OpSlot {
                id,
                kind: req.op.kind(),
                addr,
                len,
                atomic_bytes,
                queued: pieces as u16,
                in_flight: 0,
                error: None,
                old: None,
                queue_deadline: now + self.config.queue_timeout,
                live: true,
                done: false,
            };
        }
        if let Operation::Atomic { addr, .. } = req.op {
            let _ = self.queue.push(build_piece(req, slot, addr, 1));
        } else {
            for (paddr, beats) in blocks(addr, len) {
                let _ = self.queue.push(build_piece(req, slot, paddr, beats));
            }
        }
        self.stats.ops_submitted += 1;
        Ok(id)
    }

    /// Read `len` bytes at `addr` of `dst`.
    ///
    /// # Errors
    /// See [`submit`](Self::submit).
    pub fn submit_read(
        &mut self,
        now: Instant,
        dst: AccelId,
        vc: Vc,
        addr: u64,
        len: u32,
    ) -> Result<OpId, SubmitError> {
        self.submit(
            now,
            &Request {
                dst,
                vc,
                op: Operation::Read { addr, len },
            },
        )
    }

    /// Write `data` at `addr` of `dst` (partial writes, byte enables).
    ///
    /// # Errors
    /// See [`submit`](Self::submit).
    pub fn submit_write(
        &mut self,
        now: Instant,
        dst: AccelId,
        vc: Vc,
        addr: u64,
        data: &[u8],
        enables: Option<&[u8]>,
    ) -> Result<OpId, SubmitError> {
        let op = Operation::Write {
            addr,
            data,
            enables,
        };
        self.submit(now, &Request { dst, vc, op })
    }

    /// The next request to send; `None` when nothing can go (queue empty, no free tag, or
    /// no credits for any request that the ordering rule lets go).
    ///
    /// Sends one request per call; work is O(QUEUE²) comparisons in the worst case.
    #[must_use]
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        credits: &mut impl CreditGate,
    ) -> Option<TlTransfer<'_>> {
        if self.queue.is_empty() {
            return None;
        }
        if self.tags.available() == 0 {
            self.stats.tag_stalls += 1;
            return None;
        }
        let strict = self.config.ordering == OrderingMode::Strict;
        let mut stalled = false;
        let mut chosen = None;
        // Keys of the pieces passed so far, as a 4096-bit filter: the exact (quadratic)
        // search for an earlier piece of the same region runs only on a filter hit, so a long
        // queue stalled on credit costs one pass, not a pass per piece.
        let mut seen = [0u64; 64];
        // Per VC, the fewest data beats refused credit in this pass: larger pieces of that VC
        // are skipped without asking (refusals are monotonic), and the pass ends once every
        // VC refused a piece without data.
        let mut refused = [u8::MAX; 4];
        for pos in 0..self.queue.len() {
            if strict && pos > 0 {
                break;
            }
            let Some(p) = self.queue.get(pos) else {
                break;
            };
            let h = region_filter_bit(p);
            let word = seen.get_mut(h >> 6);
            let bit = 1u64 << (h & 63);
            let maybe = word.as_ref().is_some_and(|w| **w & bit != 0);
            if let Some(w) = word {
                *w |= bit;
            }
            if maybe && self.blocked_by_earlier(pos, p) {
                continue;
            }
            let vc = usize::from(p.vc.get() & 3);
            if refused.get(vc).is_some_and(|&r| p.data_beats >= r) {
                continue;
            }
            match credits.try_consume(Flow::Request, p.vc, p.data_beats) {
                Some(pool) => {
                    chosen = Some((pos, pool));
                    break;
                }
                None => {
                    stalled = true;
                    if let Some(r) = refused.get_mut(vc) {
                        *r = (*r).min(p.data_beats);
                    }
                    if refused == [0; 4] {
                        break;
                    }
                }
            }
        }
        let Some((pos, pool)) = chosen else {
            if stalled {
                self.stats.credit_stalls += 1;
            }
            return None;
        };
        let piece = self.queue.remove(pos)?;
        let Some(tag) = self.tags.alloc(now + self.config.request_timeout) else {
            // Unreachable: a tag was available above. Undo.
            credits.release(Flow::Request, piece.vc, pool, piece.data_beats);
            let _ = self.queue.push(piece);
            return None;
        };
        if let Some(o) = self.outstanding.get_mut(usize::from(tag.get())) {
            *o = Outstanding {
                op: piece.op,
                cmd: piece.cmd,
                dst: piece.dst,
                vc: piece.vc,
                addr: piece.addr,
                expect_beats: piece.response_beats(),
                received: 0,
            };
        }
        if let Some(op) = self.ops.get_mut(usize::from(piece.op)) {
            op.queued = op.queued.saturating_sub(1);
            op.in_flight = op.in_flight.saturating_add(1);
        }
        self.stats.requests_sent += 1;
        let req = piece.request(self.config.local, self.wire_tag(tag), pool);
        self.staged = piece;
        let be = self.staged.enables.as_ref().map(|b| &b.0);
        self.staged_field = if self.config.compress_requests {
            self.encoder.encode_request(&req, be)
        } else {
            TlField::UncompressedRequest(req)
        };
        Some(TlTransfer {
            field: self.staged_field,
            data: self.staged.payload(),
            byte_enables: match self.staged_field {
                TlField::UncompressedRequest(_) => be,
                _ => None,
            },
            poisoned: 0,
        })
    }

    /// Forget the address-compression cache (on link reset, together with the peer's).
    pub fn reset_addr_cache(&mut self) {
        self.encoder.clear();
    }

    /// An earlier queued request has the same (destination, VC, 256 B region).
    /// Callers may skip it when no earlier piece has the same [`region_filter_bit`].
    fn blocked_by_earlier(&self, pos: usize, p: &Piece) -> bool {
        self.queue
            .iter()
            .take(pos)
            .any(|q| q.dst == p.dst && q.vc == p.vc && q.region() == p.region())
    }

    /// A received response. Returns the read data it carries, if any.
    ///
    /// Every response is consumed: its credits go back through `credits`, even when it is
    /// dropped. An invalid response is dropped, counted and reported as an event; it never
    /// changes an operation.
    pub fn handle_response<'a>(
        &mut self,
        _now: Instant,
        t: &TlTransfer<'a>,
        credits: &mut impl CreditGate,
    ) -> Option<ReadData<'a>> {
        let wire = t.field.tag().unwrap_or_default();
        let local = self.local_tag(wire);
        // Compressed responses do not name the completer: it is the request's destination.
        let expected_src = local
            .and_then(|l| self.outstanding.get(usize::from(l.get())))
            .map(|o| o.dst);
        let Ok(mut rsp) = decode_response(&t.field, expected_src.unwrap_or_default()) else {
            self.drop_response(DropReason::NotAResponse, wire, None);
            return None;
        };
        let shape = t.check();
        let beats = shape.map_or(0, |s| s.beats.min(4) as u8);
        credits.release(Flow::Response, rsp.vchan, Pool::from_bit(rsp.pool), beats);
        let reason = if rsp.dstaccid != self.config.local {
            Some(DropReason::WrongDestination)
        } else {
            match local.and_then(|l| self.tags.state(l)) {
                None | Some(TagState::Free) => Some(DropReason::UnknownTag),
                Some(TagState::Quarantined) => Some(DropReason::Late),
                Some(TagState::InFlight) => None,
            }
        };
        let Some(local) = local.filter(|_| reason.is_none()) else {
            self.drop_response(
                reason.unwrap_or(DropReason::UnknownTag),
                wire,
                Some(rsp.srcaccid),
            );
            return None;
        };
        // From here on the tag is the pool index; events report wire tags.
        rsp.tag = local;
        let ti = usize::from(rsp.tag.get());
        let out = *self.outstanding.get(ti)?;
        let status = Status::from_raw(rsp.status);
        let expect_write = !matches!(out.cmd, Opcode::Read | Opcode::AtomicR);
        let offset = if beats == 0 { 0 } else { rsp.offset };
        let mask = beat_mask(offset, beats);
        let reason = if rsp.srcaccid != out.dst || rsp.vchan != out.vc {
            Some(DropReason::WrongSource)
        } else if rsp.rd_wr != expect_write {
            Some(DropReason::WrongKind)
        } else if shape.is_err()
            || (status.is_ok() && (out.expect_beats == 0) != (beats == 0))
            || u16::from(offset) + u16::from(beats) > u16::from(out.expect_beats.max(1))
        {
            Some(DropReason::WrongLength)
        } else {
            (out.received & mask != 0).then_some(DropReason::Duplicate)
        };
        if let Some(r) = reason {
            self.drop_response(r, wire, Some(rsp.srcaccid));
            return None;
        }
        self.stats.responses_accepted += 1;
        if !status.is_ok() {
            if status == Status::PARTITION_DENIED {
                self.stats.partition_denied += 1;
            }
            self.finish_piece(rsp.tag, out.op, Some(TxnError::Status(status)));
            return None;
        }
        if out.expect_beats == 0 {
            self.finish_piece(rsp.tag, out.op, None);
            return None;
        }
        let received = out.received | mask;
        if let Some(o) = self.outstanding.get_mut(ti) {
            o.received = received;
        }
        let mut data = None;
        if t.poisoned & beat_mask(0, beats) != 0 {
            self.stats.poisoned += 1;
            self.fail_op(out.op, TxnError::Poisoned);
        } else if let Some(op) = self.ops.get_mut(usize::from(out.op)) {
            if op.error.is_none() {
                if out.cmd == Opcode::AtomicR {
                    op.old = Some(get_le(t.data, 0, op.atomic_bytes));
                } else {
                    data = read_slice(op, out.addr, offset, t.data);
                }
            }
        }
        if received == beat_mask(0, out.expect_beats) {
            self.finish_piece(rsp.tag, out.op, None);
        }
        data
    }

    /// Fire every expired timer: unanswered requests, operations stuck in the queue, and
    /// the end of tag quarantines. Spurious calls do nothing. Work is bounded by
    /// `TAGS + QUEUE`; [`poll_timeout`](Self::poll_timeout) is O(1).
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(tag) = self.tags.expired(now) {
            self.stats.request_timeouts += 1;
            let op = self.give_up_tag(tag, now, TxnError::Timeout);
            let id = self.ops.get(usize::from(op)).map_or(OpId(0), |o| o.id);
            let wire = self.wire_tag(tag);
            self.push_event(RequesterEvent::TimedOut {
                op: id,
                tag: Some(wire),
            });
        }
        self.tags.expire_quarantine(now);
        // The oldest queued request belongs to the op with the earliest queue deadline.
        while let Some(op) = self.queue.get(0).map(|p| p.op) {
            let Some(&o) = self.ops.get(usize::from(op)) else {
                break;
            };
            if o.queue_deadline > now {
                break;
            }
            self.stats.queue_timeouts += 1;
            self.push_event(RequesterEvent::TimedOut {
                op: o.id,
                tag: None,
            });
            self.give_up_queued(op, TxnError::Timeout);
        }
    }

    /// The request with `tag` will not be answered: the tag leaves flight (quarantined, so a
    /// late response is dropped, or freed when there is no quarantine) and its operation
    /// fails with `err`. Returns the operation's slot.
    fn give_up_tag(&mut self, tag: Tag, now: Instant, err: TxnError) -> u16 {
        let op = self
            .outstanding
            .get(usize::from(tag.get()))
            .map_or(0, |o| o.op);
        if self.config.tag_quarantine == Duration::ZERO {
            self.tags.release(tag);
        } else {
            self.tags.quarantine(tag, now + self.config.tag_quarantine);
        }
        if let Some(o) = self.ops.get_mut(usize::from(op)) {
            o.in_flight = o.in_flight.saturating_sub(1);
        }
        self.fail_op(op, err);
        op
    }

    /// Operation `op`, at the head of the queue, fails with `err`: every queued request of it
    /// is cancelled, so a loop over the queue head moves on.
    fn give_up_queued(&mut self, op: u16, err: TxnError) {
        self.fail_op(op, err);
        if self.queue.get(0).map(|p| p.op) == Some(op) {
            // Unreachable (a queued request always has a live op); never loop forever.
            let _ = self.queue.remove(0);
        }
    }

    /// The earliest queue deadline: that of the oldest queued request's operation (requests
    /// are queued in submission order and deadlines are submission time + a constant).
    fn queue_deadline(&self) -> Option<Instant> {
        let op = self.queue.get(0)?.op;
        self.ops.get(usize::from(op)).map(|o| o.queue_deadline)
    }

    /// The port's link was reported down (and will be reset before it carries anything
    /// again): every open operation, queued or in flight, completes now with
    /// [`TxnError::LinkDown`], instead of by timeout, so that nothing queued here is sent
    /// after the operation was given up and its successors were sent another way. The tags
    /// of requests in flight are quarantined as after a timeout (a response already on its
    /// way must not match a new request). Work is bounded by `TAGS + QUEUE`.
    pub fn abort(&mut self, now: Instant) {
        let failed_before = self.stats.ops_failed;
        while let Some(tag) = self.tags.oldest_in_flight() {
            self.stats.requests_abandoned += 1;
            self.give_up_tag(tag, now, TxnError::LinkDown);
        }
        while let Some(op) = self.queue.get(0).map(|p| p.op) {
            self.give_up_queued(op, TxnError::LinkDown);
        }
        self.stats.ops_aborted += self.stats.ops_failed - failed_before;
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work, if ever.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        earliest(self.tags.next_deadline(), self.queue_deadline())
    }

    /// The next finished operation (each is reported exactly once).
    #[must_use]
    pub fn poll_completion(&mut self) -> Option<Completion> {
        let slot = self.done.pop_front()?;
        let op = self.ops.get_mut(usize::from(slot))?;
        let c = Completion {
            id: op.id,
            kind: op.kind,
            result: match op.error {
                Some(e) => Err(e),
                None => Ok(op.old),
            },
        };
        *op = FREE_OP;
        let _ = self.free_ops.push(slot);
        Some(c)
    }

    /// The next event.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<RequesterEvent> {
        self.events.pop_front()
    }

    fn push_event(&mut self, e: RequesterEvent) {
        if self.events.push_back(e).is_err() {
            self.stats.events_lost += 1;
        }
    }

    fn drop_response(&mut self, reason: DropReason, tag: Tag, src: Option<AccelId>) {
        self.stats.responses_dropped += 1;
        let c = match reason {
            DropReason::UnknownTag => &mut self.stats.dropped_unknown_tag,
            DropReason::Late => &mut self.stats.dropped_late,
            DropReason::WrongSource => &mut self.stats.dropped_wrong_source,
            DropReason::Duplicate => &mut self.stats.dropped_duplicate,
            DropReason::WrongLength | DropReason::WrongKind => &mut self.stats.dropped_wrong_length,
            DropReason::NotAResponse | DropReason::WrongDestination => {
                &mut self.stats.dropped_other
            }
        };
        *c += 1;
        self.push_event(RequesterEvent::ResponseDropped { reason, tag, src });
    }

    /// A request is answered (with `err` if it failed): free its tag, maybe finish its op.
    fn finish_piece(&mut self, tag: Tag, op: u16, err: Option<TxnError>) {
        self.tags.release(tag);
        if let Some(o) = self.ops.get_mut(usize::from(op)) {
            o.in_flight = o.in_flight.saturating_sub(1);
        }
        match err {
            Some(e) => self.fail_op(op, e),
            None => self.maybe_done(op),
        }
    }

    /// Record the op's first error, cancel its unsent requests, maybe finish it.
    fn fail_op(&mut self, op: u16, err: TxnError) {
        let Some(o) = self.ops.get_mut(usize::from(op)) else {
            return;
        };
        if !o.live {
            return;
        }
        if o.error.is_none() {
            o.error = Some(err);
        }
        if o.queued > 0 {
            o.queued = 0;
            self.queue.retain(|p| p.op != op);
        }
        self.maybe_done(op);
    }

    fn maybe_done(&mut self, op: u16) {
        let Some(o) = self.ops.get_mut(usize::from(op)) else {
            return;
        };
        if o.live && !o.done && o.queued == 0 && o.in_flight == 0 {
            o.done = true;
            if o.error.is_some() {
                self.stats.ops_failed += 1;
            } else {
                self.stats.ops_ok += 1;
            }
            let _ = self.done.push_back(op);
        }
    }
}

/// Bits `offset..offset + beats` of a beat mask.
const fn beat_mask(offset: u8, beats: u8) -> u8 {
    let ones = ((1u16 << (beats & 7)) - 1) as u8;
    ones.wrapping_shl(offset as u32 & 7)
}

/// The part of a read response that lies inside the operation's range.
fn read_slice<'a>(
    op: &OpSlot,
    piece_addr: u64,
    offset: u8,
    payload: &'a [u8],
) -> Option<ReadData<'a>> {
    let start = piece_addr + u64::from(offset) * BEAT_BYTES as u64;
    let end = start + payload.len() as u64;
    let lo = start.max(op.addr);
    let hi = end.min(op.addr.saturating_add(op.len));
    if lo >= hi {
        return None;
    }
    let data = payload.get(usize::try_from(lo - start).ok()?..usize::try_from(hi - start).ok()?)?;
    Some(ReadData {
        op: op.id,
        offset: u32::try_from(lo - op.addr).ok()?,
        data,
    })
}

/// A 12-bit hash of a piece's (destination, VC, 256 B region): equal keys give equal bits.
fn region_filter_bit(p: &Piece) -> usize {
    let k = (p.region() << 12) ^ (u64::from(p.dst.get()) << 2) ^ u64::from(p.vc.get());
    (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::{TransferBuf, Unlimited};
    use crate::wire::{PartitionId, TlUncompressedResponse};

    type Req = Requester<4, 4, 8>;

    fn id(n: u16) -> AccelId {
        AccelId::new(n).unwrap()
    }
    fn t(ns: u64) -> Instant {
        Instant::ZERO + Duration::from_ns(ns)
    }
    fn vc0() -> Vc {
        Vc::default()
    }

    fn sent(r: &mut Req, now: Instant) -> TlUncompressedRequest {
        let t = r.poll_transmit(now, &mut Unlimited).expect("a request");
        t.check().expect("a well-formed transfer");
        match t.field {
            TlField::UncompressedRequest(q) => q,
            f => panic!("not a request: {f:?}"),
        }
    }

    fn rsp(q: &TlUncompressedRequest, status: Status, offset: u8, beats: u8) -> TransferBuf {
        let mut it = TransferBuf::default();
        it.field = TlField::UncompressedResponse(TlUncompressedResponse {
            vchan: q.vchan,
            tag: q.tag,
            len: beats.saturating_sub(1),
            offset,
            status: status.raw(),
            rd_wr: !matches!(q.cmd, Opcode::Read | Opcode::AtomicR),
            last: true,
            srcaccid: q.dstaccid,
            dstaccid: q.srcaccid,
            ..Default::default()
        });
        let data: std::vec::Vec<u8> = (0..usize::from(beats) * 64).map(|i| i as u8).collect();
        it.set_data(&data);
        it
    }

    fn give(r: &mut Req, it: &TransferBuf) -> Option<(OpId, u32, usize, u8)> {
        r.handle_response(t(1), &it.as_transfer(), &mut Unlimited)
            .map(|d| {
                (
                    d.op,
                    d.offset,
                    d.data.len(),
                    d.data.first().copied().unwrap_or(0),
                )
            })
    }

    fn req() -> Req {
        Req::new(RequesterConfig::new(id(1)))
    }

    #[test]
    fn split_read_completes_once() {
        let mut r = req();
        let op = r.submit_read(t(0), id(2), vc0(), 250, 20).unwrap();
        let (a, b) = (sent(&mut r, t(0)), sent(&mut r, t(0)));
        assert_eq!((a.addr << 2, a.numbeats, b.addr << 2), (192, 0, 256));
        assert!(r.poll_transmit(t(0), &mut Unlimited).is_none());
        let ra = rsp(&a, Status::OK, 0, 1);
        assert_eq!(give(&mut r, &ra), Some((op, 0, 6, 58)));
        assert_eq!(r.poll_completion(), None);
        let rb = rsp(&b, Status::OK, 0, 1);
        assert_eq!(give(&mut r, &rb), Some((op, 6, 14, 0)));
        let c = r.poll_completion().unwrap();
        assert_eq!((c.id, c.kind, c.result), (op, OpKind::Read, Ok(None)));
        assert_eq!(r.poll_completion(), None);
        assert_eq!(r.ops_open(), 0);
        assert_eq!(r.in_flight(), 0);
        assert_eq!(r.stats().ops_ok, 1);
    }

    #[test]
    fn multi_beat_responses_and_duplicates() {
        let mut r = req();
        r.submit_read(t(0), id(2), vc0(), 0, 256).unwrap();
        let q = sent(&mut r, t(0));
        assert_eq!(q.numbeats, 3);
        assert!(give(&mut r, &rsp(&q, Status::OK, 1, 2)).is_some());
        assert!(give(&mut r, &rsp(&q, Status::OK, 2, 1)).is_none());
        assert_eq!(r.stats().dropped_duplicate, 1);
        assert!(give(&mut r, &rsp(&q, Status::OK, 3, 2)).is_none());
        assert_eq!(r.stats().dropped_wrong_length, 1);
        assert!(give(&mut r, &rsp(&q, Status::OK, 0, 1)).is_some());
        assert_eq!(r.poll_completion(), None);
        assert!(give(&mut r, &rsp(&q, Status::OK, 3, 1)).is_some());
        assert!(r.poll_completion().unwrap().result.is_ok());
        assert!(matches!(
            r.poll_event(),
            Some(RequesterEvent::ResponseDropped {
                reason: DropReason::Duplicate,
                ..
            })
        ));
    }

    #[test]
    fn invalid_responses_are_dropped() {
        let mut r = req();
        r.submit_write(t(0), id(2), vc0(), 0, &[1; 64], None)
            .unwrap();
        let q = sent(&mut r, t(0));
        let good = rsp(&q, Status::OK, 0, 0);
        let mut bad = good.clone();
        let TlField::UncompressedResponse(ref mut f) = bad.field else {
            unreachable!()
        };
        f.srcaccid = id(3);
        assert!(give(&mut r, &bad).is_none());
        let mut bad = good.clone();
        let TlField::UncompressedResponse(ref mut f) = bad.field else {
            unreachable!()
        };
        f.vchan = Vc::new(2).unwrap();
        assert!(give(&mut r, &bad).is_none());
        let mut bad = good.clone();
        let TlField::UncompressedResponse(ref mut f) = bad.field else {
            unreachable!()
        };
        f.dstaccid = id(7);
        assert!(give(&mut r, &bad).is_none());
        let mut bad = good.clone();
        let TlField::UncompressedResponse(ref mut f) = bad.field else {
            unreachable!()
        };
        f.rd_wr = false;
        assert!(give(&mut r, &bad).is_none());
        let mut bad = good.clone();
        bad.set_data(&[0; 64]);
        assert!(give(&mut r, &bad).is_none());
        let mut bad = good.clone();
        let TlField::UncompressedResponse(ref mut f) = bad.field else {
            unreachable!()
        };
        f.tag = Tag::new(3).unwrap();
        assert!(give(&mut r, &bad).is_none());
        assert!(give(&mut r, &TransferBuf::default()).is_none());
        let s = *r.stats();
        assert_eq!(
            (
                s.dropped_wrong_source,
                s.dropped_other,
                s.dropped_wrong_length,
                s.dropped_unknown_tag
            ),
            (2, 2, 2, 1)
        );
        assert_eq!(s.responses_dropped, 7);
        assert_eq!(r.poll_completion(), None);
        assert!(give(&mut r, &good).is_none());
        assert_eq!(r.poll_completion().unwrap().result, Ok(None));
        // The same response again: its tag is free now.
        assert!(give(&mut r, &good).is_none());
        assert_eq!(r.stats().dropped_unknown_tag, 2);
        let mut n = 0;
        while r.poll_event().is_some() {
            n += 1;
        }
        assert_eq!(n, 8);
    }

    #[test]
    fn error_status_cancels_unsent_pieces() {
        let mut r = req();
        r.submit_write(t(0), id(2), vc0(), 0, &[1; 1024], None)
            .unwrap();
        let q = sent(&mut r, t(0));
        assert_eq!(r.queued(), 3);
        let e = rsp(&q, Status::ADDRESS_NOT_MAPPED, 0, 0);
        assert!(give(&mut r, &e).is_none());
        assert_eq!(r.queued(), 0);
        let c = r.poll_completion().unwrap();
        assert_eq!(c.result, Err(TxnError::Status(Status::ADDRESS_NOT_MAPPED)));
        assert_eq!(r.stats().ops_failed, 1);
    }

    #[test]
    fn atomic_returns_old_value_and_poison_fails() {
        let mut r = req();
        let a = crate::txn::Atomic {
            op: crate::txn::AtomicOp::FetchAdd,
            size: crate::txn::AtomicSize::Four,
            operand: 1,
            compare: 0,
        };
        let op = Operation::Atomic {
            addr: 4,
            atomic: a,
            returning: true,
        };
        r.submit(
            t(0),
            &Request {
                dst: id(2),
                vc: vc0(),
                op,
            },
        )
        .unwrap();
        let q = sent(&mut r, t(0));
        assert_eq!((q.cmd, q.attr, q.len), (Opcode::AtomicR, 0x00, 0));
        let mut it = rsp(&q, Status::OK, 0, 1);
        it.data_mut()[..8].copy_from_slice(&0x1_2345_6789u64.to_le_bytes());
        assert!(give(&mut r, &it).is_none());
        assert_eq!(r.poll_completion().unwrap().result, Ok(Some(0x2345_6789)));

        r.submit_read(t(2), id(2), vc0(), 0, 64).unwrap();
        let q = sent(&mut r, t(2));
        let mut it = rsp(&q, Status::OK, 0, 1);
        it.poisoned = 1;
        assert!(give(&mut r, &it).is_none());
        assert_eq!(r.poll_completion().unwrap().result, Err(TxnError::Poisoned));
        assert_eq!(r.stats().poisoned, 1);
    }

    #[test]
    fn request_timeout_then_late_response() {
        let mut cfg = RequesterConfig::new(id(1));
        cfg.request_timeout = Duration::from_ns(100);
        cfg.tag_quarantine = Duration::from_ns(50);
        let mut r = Req::new(cfg);
        let op = r.submit_read(t(0), id(2), vc0(), 0, 64).unwrap();
        let q = sent(&mut r, t(10));
        assert_eq!(r.poll_timeout(), Some(t(110)));
        r.handle_timeout(t(109));
        assert_eq!(r.poll_completion(), None);
        r.handle_timeout(t(110));
        assert_eq!(r.poll_completion().unwrap().result, Err(TxnError::Timeout));
        assert_eq!(r.poll_completion(), None);
        assert_eq!(
            r.poll_event(),
            Some(RequesterEvent::TimedOut {
                op,
                tag: Some(q.tag)
            })
        );
        assert!(give(&mut r, &rsp(&q, Status::OK, 0, 1)).is_none());
        assert_eq!(r.stats().dropped_late, 1);
        assert_eq!(r.poll_timeout(), Some(t(160)));
        r.handle_timeout(t(160));
        assert_eq!(r.poll_timeout(), None);
        assert!(give(&mut r, &rsp(&q, Status::OK, 0, 1)).is_none());
        assert_eq!(r.stats().dropped_unknown_tag, 1);
        assert_eq!(r.stats().request_timeouts, 1);
    }

    /// A requester with a tag base sends its tags from the base and takes back only
    /// responses with its own tags; timeouts report wire tags; a base too high is moved down.
    #[test]
    fn tag_base_offsets_wire_tags() {
        let mut cfg = RequesterConfig::new(id(1));
        cfg.tag_base = 512;
        cfg.request_timeout = Duration::from_ns(100);
        let mut r = Req::new(cfg);
        assert_eq!(r.tag_base(), 512);
        let op = r.submit_read(t(0), id(2), vc0(), 0, 64).unwrap();
        let op2 = r.submit_read(t(0), id(2), vc0(), 4096, 64).unwrap();
        let (a, b) = (sent(&mut r, t(0)), sent(&mut r, t(0)));
        assert!((512..516).contains(&a.tag.get()) && (512..516).contains(&b.tag.get()));
        assert_ne!(a.tag, b.tag);
        assert!(r.owns_tag(a.tag) && !r.owns_tag(Tag::new(3).unwrap()));
        assert_eq!(r.in_flight_op(a.tag), Some(op));
        // The same response with a tag below the base is not ours.
        let mut other = rsp(&a, Status::OK, 0, 1);
        if let TlField::UncompressedResponse(f) = &mut other.field {
            f.tag = Tag::new(a.tag.get() - 512).unwrap();
        }
        assert!(give(&mut r, &other).is_none());
        assert_eq!(r.stats().dropped_unknown_tag, 1);
        assert_eq!(
            give(&mut r, &rsp(&a, Status::OK, 0, 1)).map(|x| x.0),
            Some(op)
        );
        assert_eq!(r.poll_completion().map(|c| c.id), Some(op));
        r.handle_timeout(t(100));
        assert_eq!(
            r.poll_event(),
            Some(RequesterEvent::ResponseDropped {
                reason: DropReason::UnknownTag,
                tag: Tag::new(a.tag.get() - 512).unwrap(),
                src: Some(id(2)),
            })
        );
        assert_eq!(
            r.poll_event(),
            Some(RequesterEvent::TimedOut {
                op: op2,
                tag: Some(b.tag)
            })
        );
        let mut high = RequesterConfig::new(id(1));
        high.tag_base = 2047;
        assert_eq!(Req::new(high).tag_base(), 2044);
    }

    /// Abort: every open operation, in flight or queued, completes at once with `LinkDown`;
    /// nothing queued is sent afterwards; the in-flight tag is quarantined, so a response on
    /// its way is dropped as late; new operations work as before.
    #[test]
    fn abort_fails_everything_open_and_sends_nothing_after() {
        let mut cfg = RequesterConfig::new(id(1));
        cfg.request_timeout = Duration::from_ns(1000);
        cfg.tag_quarantine = Duration::from_ns(50);
        let mut r = Req::new(cfg);
        let a = r.submit_read(t(0), id(2), vc0(), 0, 64).unwrap();
        let q = sent(&mut r, t(0));
        let b = r
            .submit_write(t(0), id(2), vc0(), 4096, &[7; 300], None)
            .unwrap();
        assert_eq!((r.in_flight(), r.queued()), (1, 2));
        r.abort(t(5));
        let mut done: std::vec::Vec<_> = core::iter::from_fn(|| r.poll_completion())
            .map(|c| (c.id, c.result))
            .collect();
        done.sort_by_key(|d| d.0 .0);
        assert_eq!(
            done,
            [(a, Err(TxnError::LinkDown)), (b, Err(TxnError::LinkDown))]
        );
        assert_eq!((r.in_flight(), r.queued(), r.ops_open()), (0, 0, 0));
        assert_eq!(r.stats().ops_aborted, 2);
        assert_eq!(
            r.stats().requests_abandoned,
            1,
            "the read in flight, not the queued write"
        );
        assert!(
            r.poll_transmit(t(6), &mut Unlimited).is_none(),
            "nothing left to send"
        );
        assert!(give(&mut r, &rsp(&q, Status::OK, 0, 1)).is_none());
        assert_eq!(r.stats().dropped_late, 1);
        // The quarantine ends; a new operation goes out and completes.
        r.handle_timeout(t(55));
        let c = r.submit_read(t(60), id(2), vc0(), 0, 64).unwrap();
        let q2 = sent(&mut r, t(60));
        assert!(give(&mut r, &rsp(&q2, Status::OK, 0, 1)).is_some());
        assert_eq!(
            r.poll_completion().map(|x| (x.id, x.result)),
            Some((c, Ok(None)))
        );
        r.abort(t(70));
        assert_eq!(r.stats().ops_aborted, 2, "nothing open: nothing aborted");
        assert_eq!(r.stats().requests_abandoned, 1);
    }

    #[test]
    fn timeout_without_quarantine_frees_the_tag_at_once() {
        let mut cfg = RequesterConfig::new(id(1));
        cfg.request_timeout = Duration::from_ns(10);
        cfg.tag_quarantine = Duration::ZERO;
        let mut r = Req::new(cfg);
        let op = r.submit_read(t(0), id(2), vc0(), 0, 64).unwrap();
        let q = sent(&mut r, t(0));
        assert_eq!(r.in_flight_op(q.tag), Some(op));
        r.handle_timeout(t(10));
        assert_eq!(r.in_flight_op(q.tag), None);
        assert_eq!(r.poll_timeout(), None);
        assert!(give(&mut r, &rsp(&q, Status::OK, 0, 1)).is_none());
        assert_eq!(r.stats().dropped_unknown_tag, 1);
        assert_eq!(r.poll_completion().unwrap().result, Err(TxnError::Timeout));
    }

    struct NoCredits;
    impl CreditGate for NoCredits {
        fn try_consume(&mut self, _: Flow, _: Vc, _: u8) -> Option<Pool> {
            None
        }
        fn release(&mut self, _: Flow, _: Vc, _: Pool, _: u8) {}
    }

    #[test]
    fn queue_timeout_without_credits() {
        let mut cfg = RequesterConfig::new(id(1));
        cfg.queue_timeout = Duration::from_ns(100);
        let mut r = Req::new(cfg);
        let op = r
            .submit_write(t(0), id(2), vc0(), 0, &[0; 300], None)
            .unwrap();
        assert!(r.poll_transmit(t(1), &mut NoCredits).is_none());
        assert_eq!(r.stats().credit_stalls, 1);
        assert_eq!(r.poll_timeout(), Some(t(100)));
        r.handle_timeout(t(100));
        assert_eq!(r.poll_completion().unwrap().result, Err(TxnError::Timeout));
        assert_eq!(
            r.poll_event(),
            Some(RequesterEvent::TimedOut { op, tag: None })
        );
        assert_eq!((r.queued(), r.stats().queue_timeouts), (0, 1));
        assert_eq!(r.poll_timeout(), None);
    }

    /// Request data credits are out: reads may go, writes wait.
    struct NoData;
    impl CreditGate for NoData {
        fn try_consume(&mut self, _: Flow, _: Vc, beats: u8) -> Option<Pool> {
            (beats == 0).then_some(Pool::PerVc)
        }
        fn release(&mut self, _: Flow, _: Vc, _: Pool, _: u8) {}
    }

    #[test]
    fn ordering_per_region_and_strict() {
        for strict in [false, true] {
            let mut cfg = RequesterConfig::new(id(1));
            if strict {
                cfg.ordering = OrderingMode::Strict;
            }
            let mut r = Req::new(cfg);
            r.submit_write(t(0), id(2), vc0(), 0, &[0; 64], None)
                .unwrap();
            r.submit_read(t(0), id(2), vc0(), 128, 64).unwrap(); // same region: waits
            r.submit_read(t(0), id(2), vc0(), 256, 64).unwrap(); // other region: may pass
            r.submit_read(t(0), id(3), vc0(), 0, 64).unwrap(); // other destination: may pass
            let mut passed = std::vec::Vec::new();
            while let Some(it) = r.poll_transmit(t(1), &mut NoData) {
                let TlField::UncompressedRequest(q) = it.field else {
                    unreachable!()
                };
                passed.push((q.dstaccid.get(), q.addr << 2));
            }
            if strict {
                assert!(passed.is_empty());
            } else {
                assert_eq!(passed, [(2, 256), (3, 0)]);
            }
            let mut order = std::vec::Vec::new();
            while let Some(it) = r.poll_transmit(t(2), &mut Unlimited) {
                let TlField::UncompressedRequest(q) = it.field else {
                    unreachable!()
                };
                order.push((q.cmd, q.addr << 2));
            }
            assert_eq!(order[..2], [(Opcode::Write, 0), (Opcode::Read, 128)]);
        }
    }

    /// Refuses everything, counting the questions.
    struct Counting(u32);
    impl CreditGate for Counting {
        fn try_consume(&mut self, _f: Flow, _vc: Vc, _beats: u8) -> Option<Pool> {
            self.0 += 1;
            None
        }
        fn release(&mut self, _: Flow, _: Vc, _: Pool, _: u8) {}
    }

    #[test]
    fn credit_stalled_queue_is_not_scanned_piece_by_piece() {
        let mut r = Requester::<32, 32, 32>::new(RequesterConfig::new(id(1)));
        for k in 0..24u64 {
            r.submit_read(t(0), id(2), vc0(), k * 256, 64).unwrap();
        }
        // Every VC refused a piece without data: the pass stops there.
        let vc = |v| Vc::new(v).unwrap();
        for v in 1..4 {
            r.submit_read(t(0), id(3), vc(v), 0, 64).unwrap();
        }
        let mut g = Counting(0);
        assert!(r.poll_transmit(t(1), &mut g).is_none());
        assert_eq!(g.0, 4, "one question per VC");
        // A smaller piece behind a refused larger one of the same VC is still asked for.
        let mut r = req();
        r.submit_write(t(0), id(2), vc0(), 0, &[0; 64], None)
            .unwrap();
        r.submit_read(t(0), id(2), vc0(), 4096, 64).unwrap();
        let it = r.poll_transmit(t(1), &mut NoData).expect("the read passes");
        let TlField::UncompressedRequest(q) = it.field else {
            unreachable!()
        };
        assert_eq!((q.cmd, q.addr << 2), (Opcode::Read, 4096));
    }

    #[test]
    fn bounded_tables() {
        let mut r = req();
        assert_eq!(
            r.submit_read(t(0), id(2), vc0(), 0, 64 * 40),
            Err(SubmitError::QueueFull {
                needed: 10,
                free: 8
            })
        );
        for _ in 0..4 {
            r.submit_read(t(0), id(2), vc0(), 0, 64).unwrap();
        }
        assert_eq!(
            r.submit_read(t(0), id(2), vc0(), 0, 64),
            Err(SubmitError::OpTableFull)
        );
        for _ in 0..4 {
            assert!(r.poll_transmit(t(0), &mut Unlimited).is_some());
        }
        assert_eq!(r.in_flight(), 4);
        assert!(r.submit_read(t(0), id(2), vc0(), 0, 0).is_err());
        let mut small: Requester<2, 4, 8> = Requester::new(RequesterConfig::new(id(1)));
        small.submit_read(t(0), id(2), vc0(), 0, 256 * 3).unwrap();
        assert!(small.poll_transmit(t(0), &mut Unlimited).is_some());
        assert!(small.poll_transmit(t(0), &mut Unlimited).is_some());
        assert!(small.poll_transmit(t(0), &mut Unlimited).is_none());
        assert_eq!(small.stats().tag_stalls, 1);
    }

    #[test]
    fn partition_check_at_submit() {
        let mut r = req();
        let mut table = PartitionTable::all_in(PartitionId::default());
        table.set(id(5), PartitionId::new(3));
        r.set_partition_check(Some(table));
        assert_eq!(
            r.submit_read(t(0), id(5), vc0(), 0, 64),
            Err(SubmitError::PartitionDenied)
        );
        assert!(r.submit_read(t(0), id(2), vc0(), 0, 64).is_ok());
        assert_eq!(r.stats().partition_denied, 1);
    }

    #[test]
    fn compressed_responses_accepted() {
        use crate::wire::{TlCompressedReadResponse, TlCompressedWriteResponse};
        let mut r = req();
        let rd = r.submit_read(t(0), id(2), vc0(), 0, 128).unwrap();
        r.submit_write(t(0), id(2), vc0(), 512, &[1; 64], None)
            .unwrap();
        let (a, b) = (sent(&mut r, t(0)), sent(&mut r, t(0)));
        let mut it = TransferBuf::default();
        it.field = TlField::CompressedReadResponse(TlCompressedReadResponse {
            vchan: a.vchan,
            tag: a.tag,
            pool: false,
            dstaccid: id(1),
            offset: 1,
            last: true,
        });
        it.set_data(&[3; 64]);
        assert_eq!(give(&mut r, &it), Some((rd, 64, 64, 3)));
        let f = TlCompressedWriteResponse {
            vchan: a.vchan,
            tag: a.tag,
            pool: false,
            dstaccid: id(1),
            len: 0,
            rd_wr: false,
        };
        it.field = TlField::CompressedWriteResponse(f);
        assert_eq!(give(&mut r, &it), Some((rd, 0, 64, 3)));
        it.field = TlField::CompressedWriteResponse(TlCompressedWriteResponse {
            tag: b.tag,
            rd_wr: true,
            ..f
        });
        it.set_data(&[]);
        assert!(give(&mut r, &it).is_none());
        assert!(r.poll_completion().unwrap().result.is_ok());
        assert!(r.poll_completion().unwrap().result.is_ok());
    }

    #[test]
    fn compressed_requests_with_the_address_cache() {
        use crate::wire::addr_cache::AddrCache;
        let mut cfg = RequesterConfig::new(id(1));
        cfg.compress_requests = true;
        let mut r = Req::new(cfg);
        let mut decoder = AddrCache::new();
        r.submit_read(t(0), id(2), vc0(), 0x10_0040, 64).unwrap();
        r.submit_write(t(0), id(2), vc0(), 0x10_0100, &[9; 128], None)
            .unwrap();
        r.submit_write(t(0), id(2), vc0(), 0x10_0200, &[9; 120], None)
            .unwrap();
        let mut fields = std::vec::Vec::new();
        while let Some(x) = r.poll_transmit(t(0), &mut Unlimited) {
            x.check().unwrap();
            fields.push((x.field, x.byte_enables.is_some()));
        }
        assert!(matches!(fields[0], (TlField::UncompressedRequest(q), false) if q.cload));
        assert!(matches!(fields[1], (TlField::CompressedRequest(_), false)));
        assert!(matches!(fields[2], (TlField::UncompressedRequest(q), true) if !q.cload));
        for (f, _) in &fields {
            let q = decoder.decode_request(f).unwrap();
            assert_eq!(q.srcaccid, id(1));
        }
        r.reset_addr_cache();
    }

    #[test]
    fn beat_masks() {
        assert_eq!(beat_mask(0, 4), 0b1111);
        assert_eq!(beat_mask(2, 2), 0b1100);
        assert_eq!(beat_mask(3, 0), 0);
        assert_eq!(beat_mask(7, 7), 0b1000_0000);
    }
}
