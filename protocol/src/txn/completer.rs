//! The completer: executes requests against a [`MemoryTarget`] and answers them
//! (`spec-notes/transactions.md#completer`).

use heapless::Deque;

use super::atomic::{put_le, Atomic};
use super::enables::{ByteEnables, REGION_BYTES};
use super::partition::PartitionTable;
use super::queue::SlotQueue;
use super::target::{MemoryTarget, TargetError};
use super::{CreditGate, Flow, Pool, Status};
use crate::time::{Duration, Instant};
use crate::wire::addr_cache::{encode_response, AddrCache};
use crate::wire::tl_flit::{BEAT_LEN as BEAT_BYTES, MAX_BEATS, MAX_DATA_LEN as MAX_DATA_BYTES};
use crate::wire::{
    AccelId, Opcode, PartitionId, Tag, TlField, TlTransfer, TlUncompressedRequest,
    TlUncompressedResponse, Vc,
};

const EVENTS: usize = 16;

/// Completer settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompleterConfig {
    /// This accelerator (requests for others are dropped).
    pub local: AccelId,
    /// This accelerator's partition.
    pub partition: PartitionId,
    /// Data beats per response field (1..=4): 4 answers a 256 B read with one response,
    /// 1 with four single-beat responses.
    pub beats_per_response: u8,
    /// Send OK responses in compressed form where nothing is lost.
    pub compress_responses: bool,
    /// A response may leave this long after its request was handled, not before: the
    /// completer's processing latency (memory access, endpoint receive path) as a model or
    /// a device sees it. The request takes effect on memory when handled. Default zero.
    pub response_delay: Duration,
    /// A response still unsent this long after it became ready (it waited for response
    /// credits) is dropped instead of sent, and its request's credits are released
    /// ([`CompleterStats::responses_expired`]). Its requester has given up on it when this is
    /// at least the requester's request timeout (the request was sent before it was handled
    /// here); sent later still, it could reach the requester after the tag's quarantine,
    /// when the tag names another request, and be taken as that one's answer
    /// (`spec-notes/transactions.md#response-lifetime`). Default 1 ms, the requester's
    /// default request timeout.
    pub response_lifetime: Duration,
}

impl CompleterConfig {
    /// Defaults: partition 0, whole responses.
    pub const fn new(local: AccelId) -> Self {
        CompleterConfig {
            local,
            partition: PartitionId::from_bits_truncate(0),
            beats_per_response: MAX_BEATS as u8,
            compress_responses: false,
            response_delay: Duration::ZERO,
            response_lifetime: Duration::from_ms(1),
        }
    }
}

/// The completer cannot take the request now: its response queue is full. Nothing
/// happened; poll responses out and offer the request again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CompleterBusy;

impl core::fmt::Display for CompleterBusy {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("completer response queue full")
    }
}

impl core::error::Error for CompleterBusy {}

/// Something worth knowing about a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompleterEvent {
    /// A request was answered with an error status (memory was not touched unless the
    /// status is `TARGET_ERROR`).
    Refused {
        /// The requester.
        src: AccelId,
        /// Its tag.
        tag: Tag,
        /// The status sent.
        status: Status,
    },
    /// A request for another accelerator was dropped unanswered.
    Misrouted {
        /// The requester.
        src: AccelId,
        /// The destination it named.
        dst: AccelId,
    },
    /// A field that is not a request was offered and ignored.
    NotARequest,
    /// A compressed request named an address-cache way no request loaded: the two ends'
    /// caches are out of step (reset the link). It was answered UNSUPPORTED.
    AddrCacheMiss {
        /// The requester.
        src: AccelId,
        /// The way.
        way: u8,
    },
}

/// Completer counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CompleterStats {
    /// Requests taken.
    pub requests: u64,
    /// … answered OK.
    pub ok: u64,
    /// … answered ADDRESS_NOT_MAPPED.
    pub not_mapped: u64,
    /// … answered UNSUPPORTED (includes malformed requests).
    pub unsupported: u64,
    /// … answered PARTITION_DENIED (memory never touched).
    pub partition_denied: u64,
    /// … answered TARGET_ERROR.
    pub target_errors: u64,
    /// … answered POISONED (poisoned write data or atomic operand memory).
    pub poisoned: u64,
    /// … malformed (shape, length or byte enables wrong; answered UNSUPPORTED).
    pub malformed: u64,
    /// Read beats sent as poisoned data.
    pub poisoned_beats: u64,
    /// Requests for another accelerator, dropped.
    pub misrouted: u64,
    /// Non-request fields offered, ignored.
    pub ignored: u64,
    /// Times a request was refused with [`CompleterBusy`].
    pub busy: u64,
    /// Response fields sent.
    pub responses_sent: u64,
    /// … of which compressed (FTYPE 0x4 or 0x5; [`CompleterConfig::compress_responses`]).
    pub responses_compressed: u64,
    /// Requests whose responses were dropped unsent by [`Completer::drop_held`] (a link
    /// reset): their requesters time out.
    pub dropped_at_reset: u64,
    /// Requests whose responses were dropped unsent, past their
    /// [`response_lifetime`](CompleterConfig::response_lifetime): their requesters time out.
    pub responses_expired: u64,
    /// Events discarded because the event queue was full.
    pub events_lost: u64,
}

struct Pending {
    tag: Tag,
    /// The requester.
    dst: AccelId,
    vc: Vc,
    status: Status,
    rd_wr: bool,
    beats: u8,
    next: u8,
    poisoned: u8,
    /// The request's credits, returned when the last response field leaves.
    req_pool: Pool,
    req_beats: u8,
    /// No response field leaves before this (`CompleterConfig::response_delay`).
    ready: Instant,
    data: [u8; MAX_DATA_BYTES],
}

impl Pending {
    const fn new(tag: Tag, dst: AccelId, vc: Vc, rd_wr: bool, credit: (Pool, u8)) -> Self {
        Pending {
            tag,
            dst,
            vc,
            status: Status::OK,
            rd_wr,
            beats: 0,
            next: 0,
            poisoned: 0,
            req_pool: credit.0,
            req_beats: credit.1,
            ready: Instant::ZERO,
            data: [0; MAX_DATA_BYTES],
        }
    }
}

/// The completer side of a port, answering up to `Q` requests at a time.
///
/// Sans-IO: offer each received request to [`handle_request`](Self::handle_request) (it runs
/// against the memory target at once and queues the response); send what
/// [`poll_transmit`](Self::poll_transmit) writes; drain [`poll_event`](Self::poll_event).
/// With a [`response_delay`](CompleterConfig::response_delay), a response may leave only
/// that long after its request was handled: [`poll_timeout`](Self::poll_timeout) says when
/// the next one becomes ready. `now` never decreases.
///
/// A request's credits go back to the requester when its last response field leaves: the
/// response slot is the buffer the request credit stands for. Grant the peer at most `Q`
/// request-command credits and the completer is never busy.
pub struct Completer<const Q: usize> {
    config: CompleterConfig,
    partitions: PartitionTable,
    queue: SlotQueue<Pending, Q>,
    /// The latest `now` seen (responses ready by then are not timers any more).
    clock: Instant,
    decoder: AddrCache,
    staged: [u8; MAX_DATA_BYTES],
    staged_field: TlField,
    events: Deque<CompleterEvent, EVENTS>,
    stats: CompleterStats,
}

impl<const Q: usize> Completer<Q> {
    /// A completer that admits requesters according to `partitions`.
    pub fn new(config: CompleterConfig, partitions: PartitionTable) -> Self {
        Completer {
            config,
            partitions,
            queue: SlotQueue::new(),
            clock: Instant::ZERO,
            decoder: AddrCache::new(),
            staged: [0; MAX_DATA_BYTES],
            staged_field: TlField::UncompressedResponse(TlUncompressedResponse::default()),
            events: Deque::new(),
            stats: CompleterStats::default(),
        }
    }

    /// The settings.
    pub const fn config(&self) -> &CompleterConfig {
        &self.config
    }

    /// The accelerator → partition table.
    pub const fn partitions(&self) -> &PartitionTable {
        &self.partitions
    }

    /// The accelerator → partition table, to update.
    pub fn partitions_mut(&mut self) -> &mut PartitionTable {
        &mut self.partitions
    }

    /// The counters.
    pub const fn stats(&self) -> &CompleterStats {
        &self.stats
    }

    /// Responses waiting to be sent.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Drop every response still waiting to be sent (on link reset): the buffers of their
    /// requests are free again, as the credit receiver's fresh initial release grants them
    /// (a completer that kept them would be sent into them while still full). Their
    /// requests were carried out (a write has landed); their requesters time out. Returns
    /// how many were dropped.
    pub fn drop_held(&mut self) -> usize {
        let n = self.queue.len();
        self.queue = SlotQueue::new();
        self.stats.dropped_at_reset = self.stats.dropped_at_reset.saturating_add(n as u64);
        n
    }

    /// Forget the address-compression cache (on link reset, together with the peer's).
    pub fn reset_addr_cache(&mut self) {
        self.decoder.clear();
    }

    /// A received request: check, execute against `target` and queue the response. The
    /// request's credits are returned through `credits` at once if no response follows (a
    /// misrouted request), else by [`poll_transmit`](Self::poll_transmit) with the last
    /// response field.
    ///
    /// Requests must be offered in the order they arrived (compressed requests depend on
    /// the address cache that earlier requests loaded).
    ///
    /// # Errors
    /// [`CompleterBusy`] when the response queue is full; nothing happened.
    pub fn handle_request(
        &mut self,
        now: Instant,
        t: &TlTransfer<'_>,
        target: &mut impl MemoryTarget,
        credits: &mut impl CreditGate,
    ) -> Result<(), CompleterBusy> {
        self.clock = self.clock.max(now);
        let ready = now + self.config.response_delay;
        let (tag, vc, pool, src) = match t.field {
            TlField::UncompressedRequest(r) => (r.tag, r.vchan, r.pool, r.srcaccid),
            TlField::CompressedRequest(r) => (r.tag, r.vchan, r.pool, r.srcaccid),
            _ => {
                self.stats.ignored += 1;
                self.push_event(CompleterEvent::NotARequest);
                return Ok(());
            }
        };
        if self.queue.free_slots() == 0 {
            self.stats.busy += 1;
            return Err(CompleterBusy);
        }
        let shape = t.check();
        let beats = shape.map_or(t.data.len().div_ceil(BEAT_BYTES), |s| s.beats);
        let credit = (Pool::from_bit(pool), beats.min(MAX_BEATS) as u8);
        self.stats.requests += 1;
        let req = match self.decoder.decode_request(&t.field) {
            Ok(r) => r,
            Err(e) => {
                if let crate::wire::ExpandError::WayNotLoaded(way) = e {
                    self.push_event(CompleterEvent::AddrCacheMiss { src, way });
                }
                let mut p = Pending::new(tag, src, vc, !t.data.is_empty(), credit);
                p.status = self.malformed();
                p.ready = ready;
                self.refuse(p);
                return Ok(());
            }
        };
        if req.dstaccid != self.config.local {
            credits.release(Flow::Request, vc, credit.0, credit.1);
            self.stats.misrouted += 1;
            self.push_event(CompleterEvent::Misrouted {
                src,
                dst: req.dstaccid,
            });
            return Ok(());
        }
        let mut p = Pending::new(tag, src, vc, write_type(req.cmd), credit);
        p.ready = ready;
        p.status = if !self.partitions.is_member(src, self.config.partition) {
            Status::PARTITION_DENIED
        } else if shape.is_err() {
            self.malformed()
        } else {
            let compressed = matches!(t.field, TlField::CompressedRequest(_));
            self.execute(&req, t, compressed, target, &mut p)
        };
        self.refuse(p);
        Ok(())
    }

    /// Count `p`'s status, report it if it is an error, and queue it.
    fn refuse(&mut self, mut p: Pending) {
        if !p.status.is_ok() {
            p.beats = 0;
            p.poisoned = 0;
            self.push_event(CompleterEvent::Refused {
                src: p.dst,
                tag: p.tag,
                status: p.status,
            });
        }
        self.count(p.status);
        // Cannot fail: a slot was checked free by the caller.
        let _ = self.queue.push(p);
    }

    fn count(&mut self, s: Status) {
        let c = match s {
            Status::OK => &mut self.stats.ok,
            Status::ADDRESS_NOT_MAPPED => &mut self.stats.not_mapped,
            Status::UNSUPPORTED => &mut self.stats.unsupported,
            Status::PARTITION_DENIED => &mut self.stats.partition_denied,
            Status::POISONED => &mut self.stats.poisoned,
            _ => &mut self.stats.target_errors,
        };
        *c += 1;
    }

    fn malformed(&mut self) -> Status {
        self.stats.malformed += 1;
        Status::UNSUPPORTED
    }

    fn execute(
        &mut self,
        r: &TlUncompressedRequest,
        t: &TlTransfer<'_>,
        compressed: bool,
        target: &mut impl MemoryTarget,
        p: &mut Pending,
    ) -> Status {
        let addr = r.addr << 2;
        match r.cmd {
            Opcode::Read => {
                let Some(beats) = shape(r) else {
                    return self.malformed();
                };
                for b in 0..beats {
                    let at = usize::from(b) * BEAT_BYTES;
                    let Some(buf) = p.data.get_mut(at..at + BEAT_BYTES) else {
                        return self.malformed();
                    };
                    match target.read(addr + at as u64, buf) {
                        Ok(()) => {}
                        Err(TargetError::Poisoned) => {
                            buf.fill(0);
                            p.poisoned |= 1 << b;
                            self.stats.poisoned_beats += 1;
                        }
                        Err(e) => return e.status(),
                    }
                }
                p.beats = beats;
                Status::OK
            }
            Opcode::Write | Opcode::WriteFull | Opcode::WriteMessage => {
                let Some(beats) = shape(r) else {
                    return self.malformed();
                };
                let enables = match (r.cmd, t.byte_enables) {
                    (Opcode::Write, Some(be)) => ByteEnables(*be),
                    (Opcode::Write, None) if !compressed => return self.malformed(),
                    _ => ByteEnables::ALL,
                };
                if t.data.len() != usize::from(beats) * BEAT_BYTES {
                    return self.malformed();
                }
                if t.poisoned & ((1 << beats) - 1) != 0 {
                    return Status::POISONED;
                }
                let res = match r.cmd {
                    Opcode::WriteMessage => target.message(r.srcaccid, addr, t.data),
                    _ => target.write(addr, t.data, &enables),
                };
                res.err().map_or(Status::OK, TargetError::status)
            }
            Opcode::AtomicR | Opcode::AtomicNR => {
                if r.numbeats != 0 {
                    return self.malformed();
                }
                let Ok(a) = Atomic::decode(r.attr, r.len, addr, t.data) else {
                    return self.malformed();
                };
                if t.poisoned & 1 != 0 {
                    return Status::POISONED;
                }
                match target.atomic(addr, &a) {
                    Ok(old) => {
                        if r.cmd == Opcode::AtomicR {
                            put_le(&mut p.data, 0, a.size.bytes(), old);
                            p.beats = 1;
                        }
                        Status::OK
                    }
                    Err(e) => e.status(),
                }
            }
            _ => Status::UNSUPPORTED,
        }
    }

    /// When the next response that is not ready yet becomes ready (with a
    /// [`response_delay`](CompleterConfig::response_delay)); `None` if none waits for time.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        // Handled in order with one delay: ready times never decrease along the queue.
        (0..self.queue.len())
            .filter_map(|pos| self.queue.get(pos))
            .map(|p| p.ready)
            .find(|&r| r > self.clock)
    }

    /// Whether a response is ready to go (as of the latest `now` seen), credits aside.
    pub fn has_ready(&self) -> bool {
        self.queue.get(0).is_some_and(|p| p.ready <= self.clock)
    }

    /// Note the time (a response ready by `now` may then be sent).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.clock = self.clock.max(now);
    }

    /// The next response to send; `None` when none can go (none queued or ready, or no
    /// response credits on any VC with a response waiting).
    ///
    /// One response field per call; O(Q) work.
    #[must_use]
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        credits: &mut impl CreditGate,
    ) -> Option<TlTransfer<'_>> {
        self.clock = self.clock.max(now);
        let bpr = self.config.beats_per_response.clamp(1, MAX_BEATS as u8);
        let mut chosen = None;
        let mut pos = 0;
        while let Some(p) = self.queue.get(pos) {
            if p.ready > now {
                // The rest were handled later still.
                break;
            }
            if pos == 0 && p.ready.saturating_add(self.config.response_lifetime) < now {
                // Past its lifetime: dropped. Ready times never decrease along the queue,
                // so the expired responses are at its front.
                credits.release(Flow::Request, p.vc, p.req_pool, p.req_beats);
                let _ = self.queue.remove(0);
                self.stats.responses_expired = self.stats.responses_expired.saturating_add(1);
                continue;
            }
            let chunk = p.beats.saturating_sub(p.next).min(bpr);
            if let Some(pool) = credits.try_consume(Flow::Response, p.vc, chunk) {
                chosen = Some((pos, pool, chunk));
                break;
            }
            pos += 1;
        }
        let (pos, pool, chunk) = chosen?;
        let p = self.queue.get_mut(pos)?;
        let last = p.next + chunk >= p.beats;
        let rsp = TlUncompressedResponse {
            vchan: p.vc,
            tag: p.tag,
            pool: pool.bit(),
            len: chunk.saturating_sub(1),
            offset: p.next,
            status: p.status.raw(),
            rd_wr: p.rd_wr,
            last,
            srcaccid: self.config.local,
            dstaccid: p.dst,
            spares: 0,
        };
        let from = usize::from(p.next) * BEAT_BYTES;
        let n = usize::from(chunk) * BEAT_BYTES;
        if let (Some(d), Some(s)) = (self.staged.get_mut(..n), p.data.get(from..from + n)) {
            d.copy_from_slice(s);
        }
        let poisoned = (p.poisoned >> p.next) & ((1u8 << chunk) - 1);
        p.next += chunk;
        if last {
            credits.release(Flow::Request, p.vc, p.req_pool, p.req_beats);
            let _ = self.queue.remove(pos);
        }
        self.stats.responses_sent += 1;
        self.staged_field = if self.config.compress_responses {
            encode_response(&rsp)
        } else {
            TlField::UncompressedResponse(rsp)
        };
        if !matches!(self.staged_field, TlField::UncompressedResponse(_)) {
            self.stats.responses_compressed += 1;
        }
        Some(TlTransfer {
            field: self.staged_field,
            data: self.staged.get(..n).unwrap_or(&[]),
            byte_enables: None,
            poisoned,
        })
    }

    /// The next event.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<CompleterEvent> {
        self.events.pop_front()
    }

    fn push_event(&mut self, e: CompleterEvent) {
        if self.events.push_back(e).is_err() {
            self.stats.events_lost += 1;
        }
    }
}

/// A response to this opcode carries no data.
const fn write_type(cmd: Opcode) -> bool {
    cmd.carries_data() && !matches!(cmd, Opcode::AtomicR)
}

/// Beats of a well-formed read, write, write-full or message request: 64 B aligned,
/// 64–256 B, `numbeats` consistent, inside one 256 B region.
fn shape(r: &TlUncompressedRequest) -> Option<u8> {
    let addr = r.addr << 2;
    let words = usize::from(r.len) + 1;
    if words % (BEAT_BYTES / 4) != 0 || addr % BEAT_BYTES as u64 != 0 {
        return None;
    }
    let beats = (words / (BEAT_BYTES / 4)) as u8;
    let fits = addr % REGION_BYTES + u64::from(beats) * BEAT_BYTES as u64 <= REGION_BYTES;
    (r.numbeats + 1 == beats && fits).then_some(beats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::{AtomicOp, AtomicSize, TransferBuf, Unlimited, WindowMemory};
    use crate::wire::TlCompressedRequest;

    type Cpl = Completer<2>;
    type Mem = WindowMemory<1024>;

    fn id(n: u16) -> AccelId {
        AccelId::new(n).unwrap()
    }

    fn cpl() -> Cpl {
        Completer::new(CompleterConfig::new(id(2)), PartitionTable::default())
    }

    fn request(cmd: Opcode, addr: u64, beats: u8) -> TransferBuf {
        let mut it = TransferBuf::default();
        it.field = TlField::UncompressedRequest(TlUncompressedRequest {
            cmd,
            tag: Tag::new(7).unwrap(),
            attr: 0xff,
            len: beats * 16 - 1,
            addr: addr >> 2,
            srcaccid: id(1),
            dstaccid: id(2),
            numbeats: beats - 1,
            ..Default::default()
        });
        if cmd.carries_data() {
            it.set_data(&[0xab; 256][..usize::from(beats) * 64]);
        }
        if cmd == Opcode::Write {
            it.byte_enables = Some(ByteEnables::range(0, usize::from(beats) * 64).0);
        }
        it
    }

    fn req_mut(it: &mut TransferBuf) -> &mut TlUncompressedRequest {
        match &mut it.field {
            TlField::UncompressedRequest(r) => r,
            _ => unreachable!(),
        }
    }

    /// Offer `it`, then collect the response fields.
    fn run(
        c: &mut Cpl,
        m: &mut Mem,
        it: &TransferBuf,
    ) -> std::vec::Vec<(TlUncompressedResponse, TransferBuf)> {
        c.handle_request(Instant::ZERO, &it.as_transfer(), m, &mut Unlimited)
            .unwrap();
        let mut out = std::vec::Vec::new();
        while let Some(o) = c.poll_transmit(Instant::ZERO, &mut Unlimited) {
            o.check().expect("a well-formed response");
            let TlField::UncompressedResponse(r) = o.field else {
                unreachable!()
            };
            out.push((r, TransferBuf::new(&o)));
        }
        out
    }

    fn beats(b: &TransferBuf) -> usize {
        b.data().len() / 64
    }

    fn status_of(c: &mut Cpl, m: &mut Mem, it: &TransferBuf) -> Status {
        let r = run(c, m, it);
        assert_eq!(r.len(), 1);
        Status::from_raw(r[0].0.status)
    }

    #[test]
    fn write_then_read_in_beats() {
        let (mut c, mut m) = (cpl(), Mem::new(0));
        c.config.beats_per_response = 1;
        let w = run(&mut c, &mut m, &request(Opcode::WriteFull, 256, 4));
        assert_eq!(w.len(), 1);
        assert!(w[0].0.rd_wr && w[0].0.last && beats(&w[0].1) == 0);
        let r = run(&mut c, &mut m, &request(Opcode::Read, 256, 3));
        assert_eq!(r.len(), 3);
        for (i, (f, it)) in r.iter().enumerate() {
            assert_eq!(
                (f.offset, f.len, f.last, f.rd_wr),
                (i as u8, 0, i == 2, false)
            );
            assert_eq!((f.dstaccid, f.srcaccid, f.tag.get()), (id(1), id(2), 7));
            assert_eq!(it.data(), &[0xab; 64]);
        }
        c.config.beats_per_response = 2;
        let r = run(&mut c, &mut m, &request(Opcode::Read, 256, 3));
        assert_eq!(
            r.iter().map(|x| beats(&x.1)).collect::<std::vec::Vec<_>>(),
            [2, 1]
        );
        assert_eq!(c.stats().ok, 3);
        assert_eq!(c.stats().responses_sent, 6);
    }

    #[test]
    fn a_reset_drops_held_responses_after_the_writes_landed() {
        let (mut c, mut m) = (cpl(), Mem::new(0));
        let w = request(Opcode::WriteFull, 256, 2);
        c.handle_request(Instant::ZERO, &w.as_transfer(), &mut m, &mut Unlimited)
            .unwrap();
        c.handle_request(Instant::ZERO, &w.as_transfer(), &mut m, &mut Unlimited)
            .unwrap();
        assert_eq!(c.pending(), 2);
        assert_eq!(c.drop_held(), 2);
        assert_eq!(c.pending(), 0);
        assert_eq!(c.stats().dropped_at_reset, 2);
        assert!(c.poll_transmit(Instant::ZERO, &mut Unlimited).is_none());
        // The writes were carried out; only their responses are gone.
        assert_eq!(m.bytes()[256..384], [0xab; 128]);
        // Both slots are free again.
        assert_eq!(run(&mut c, &mut m, &w).len(), 1);
        assert_eq!(c.drop_held(), 0);
    }

    /// Response credits refused while `shut`; request credits released are counted.
    struct Gate {
        shut: bool,
        released: u32,
    }

    impl CreditGate for Gate {
        fn try_consume(&mut self, _flow: Flow, _vc: Vc, _data_beats: u8) -> Option<Pool> {
            (!self.shut).then_some(Pool::PerVc)
        }
        fn release(&mut self, flow: Flow, _vc: Vc, _pool: Pool, _data_beats: u8) {
            assert_eq!(flow, Flow::Request);
            self.released += 1;
        }
    }

    #[test]
    fn a_response_past_its_lifetime_is_dropped_not_sent() {
        let (mut c, mut m) = (cpl(), Mem::new(0));
        assert_eq!(c.config().response_lifetime, Duration::from_ms(1));
        c.config.response_lifetime = Duration::from_us(10);
        let mut gate = Gate {
            shut: true,
            released: 0,
        };
        let r = request(Opcode::Read, 256, 1);
        let t = |us| Instant::ZERO + Duration::from_us(us);
        c.handle_request(t(0), &r.as_transfer(), &mut m, &mut gate)
            .unwrap();
        c.handle_request(t(5), &r.as_transfer(), &mut m, &mut gate)
            .unwrap();
        // No credits: both wait; at the end of the first one's lifetime it still may go.
        assert!(c.poll_transmit(t(10), &mut gate).is_none());
        assert_eq!((c.pending(), c.stats().responses_expired), (2, 0));
        // Past it, the first is dropped (its request credits go back), the second waits.
        assert!(c
            .poll_transmit(t(10) + Duration::from_ps(1), &mut gate)
            .is_none());
        assert_eq!((c.pending(), c.stats().responses_expired), (1, 1));
        assert_eq!(gate.released, 1);
        // Credits come back within the second one's lifetime: it is sent.
        gate.shut = false;
        assert!(c.poll_transmit(t(15), &mut gate).is_some());
        assert_eq!((c.pending(), c.stats().responses_sent), (0, 1));
        assert_eq!(gate.released, 2);
        // And one that waited past its lifetime is not sent when credits come back.
        gate.shut = true;
        c.handle_request(t(20), &r.as_transfer(), &mut m, &mut gate)
            .unwrap();
        gate.shut = false;
        assert!(c.poll_transmit(t(31), &mut gate).is_none());
        assert_eq!(c.stats().responses_expired, 2);
        assert_eq!(
            (c.pending(), c.stats().responses_sent, gate.released),
            (0, 1, 3)
        );
    }

    #[test]
    fn partial_write_and_message() {
        let (mut c, mut m) = (cpl(), Mem::new(0));
        let mut w = request(Opcode::Write, 64, 1);
        w.byte_enables = Some(ByteEnables::range(2, 4).0);
        assert_eq!(status_of(&mut c, &mut m, &w), Status::OK);
        assert_eq!(m.bytes()[64..70], [0, 0, 0xab, 0xab, 0, 0]);
        w.byte_enables = None;
        assert_eq!(status_of(&mut c, &mut m, &w), Status::UNSUPPORTED);
        let msg = request(Opcode::WriteMessage, 512, 2);
        assert_eq!(status_of(&mut c, &mut m, &msg), Status::OK);
        assert_eq!(m.bytes()[512..640], [0xab; 128]);
    }

    #[test]
    fn malformed_requests_unsupported() {
        let (mut c, mut m) = (cpl(), Mem::new(0));
        let mut bad = std::vec::Vec::new();
        let mut it = request(Opcode::Read, 32, 1); // misaligned
        bad.push(it.clone());
        it = request(Opcode::Read, 192, 2); // crosses 256
        bad.push(it.clone());
        it = request(Opcode::Read, 0, 2);
        req_mut(&mut it).numbeats = 0; // inconsistent
        bad.push(it.clone());
        it = request(Opcode::Read, 0, 1);
        req_mut(&mut it).len = 7; // 32 B
        bad.push(it.clone());
        it = request(Opcode::Read, 0, 1);
        it.set_data(&[0; 64]); // a read with data
        bad.push(it.clone());
        it = request(Opcode::WriteFull, 0, 2);
        it.set_data(&[0; 64]); // data missing
        bad.push(it.clone());
        bad.push(request(Opcode::VendorRead(9), 0, 1));
        for b in &bad {
            assert_eq!(status_of(&mut c, &mut m, b), Status::UNSUPPORTED);
        }
        assert_eq!(c.stats().malformed, 6);
        assert_eq!(c.stats().unsupported, 7);
        assert!(m.bytes().iter().all(|&b| b == 0));
    }

    fn atomic_item(cmd: Opcode, addr: u64, a: Atomic) -> TransferBuf {
        let mut it = request(cmd, addr, 1);
        let mut d = [0u8; 64];
        a.encode_operands(&mut d);
        it.set_data(&d[..a.operand_bytes()]);
        let r = req_mut(&mut it);
        r.attr = a.attr();
        r.len = a.len_field();
        it
    }

    #[test]
    fn atomics() {
        let (mut c, mut m) = (cpl(), Mem::new(0));
        m.bytes_mut()[16] = 5;
        let cas = Atomic {
            op: AtomicOp::CompareSwap,
            size: AtomicSize::Eight,
            operand: 9,
            compare: 5,
        };
        let r = run(&mut c, &mut m, &atomic_item(Opcode::AtomicR, 16, cas));
        assert_eq!(
            (r[0].0.rd_wr, beats(&r[0].1), r[0].1.data()[0]),
            (false, 1, 5)
        );
        assert_eq!(m.bytes()[16], 9);
        let r = run(&mut c, &mut m, &atomic_item(Opcode::AtomicNR, 16, cas));
        assert_eq!((r[0].0.rd_wr, beats(&r[0].1)), (true, 0));
        assert_eq!(m.bytes()[16], 9);
        // Reserved op, 16 B size, misaligned (CAS: to 16 B), wrong len: unsupported, nothing
        // changes.
        for (attr, addr, len) in [(0xa0, 16, 3), (0x08, 16, 3), (0x24, 8, 3), (0x24, 16, 1)] {
            let mut it = atomic_item(Opcode::AtomicR, addr, cas);
            let r = req_mut(&mut it);
            (r.attr, r.len) = (attr, len);
            assert_eq!(status_of(&mut c, &mut m, &it), Status::UNSUPPORTED);
        }
        assert_eq!(m.bytes()[16], 9);
        let mut it = atomic_item(Opcode::AtomicR, 16, cas);
        it.poisoned = 1;
        assert_eq!(status_of(&mut c, &mut m, &it), Status::POISONED);
        let it = atomic_item(Opcode::AtomicR, 4096, cas);
        assert_eq!(status_of(&mut c, &mut m, &it), Status::ADDRESS_NOT_MAPPED);
        assert_eq!(c.stats().not_mapped, 1);
    }

    #[test]
    fn partition_denied_never_touches_memory() {
        let (mut c, mut m) = (cpl(), Mem::new(0));
        c.partitions_mut().set(id(1), PartitionId::new(4));
        assert_eq!(
            status_of(&mut c, &mut m, &request(Opcode::WriteFull, 0, 4)),
            Status::PARTITION_DENIED
        );
        let r = run(&mut c, &mut m, &request(Opcode::Read, 0, 1));
        assert_eq!(
            (
                Status::from_raw(r[0].0.status),
                beats(&r[0].1),
                r[0].0.rd_wr
            ),
            (Status::PARTITION_DENIED, 0, false)
        );
        assert!(m.bytes().iter().all(|&b| b == 0));
        assert_eq!(c.stats().partition_denied, 2);
        assert!(matches!(
            c.poll_event(),
            Some(CompleterEvent::Refused {
                status: Status::PARTITION_DENIED,
                ..
            })
        ));
        c.partitions_mut().set(id(1), None);
        assert_eq!(
            status_of(&mut c, &mut m, &request(Opcode::Read, 0, 1)),
            Status::PARTITION_DENIED
        );
    }

    #[test]
    fn poison_in_and_out() {
        let (mut c, mut m) = (cpl(), Mem::new(0));
        let mut w = request(Opcode::WriteFull, 0, 2);
        w.poisoned = 0b10;
        assert_eq!(status_of(&mut c, &mut m, &w), Status::POISONED);
        assert!(m.bytes().iter().all(|&b| b == 0));
        m.poison(64);
        let r = run(&mut c, &mut m, &request(Opcode::Read, 0, 2));
        assert_eq!((r[0].1.poisoned, beats(&r[0].1)), (0b10, 2));
        assert_eq!(c.stats().poisoned_beats, 1);
    }

    #[test]
    fn responses_wait_for_the_response_delay_in_order() {
        let mut cfg = CompleterConfig::new(id(2));
        cfg.response_delay = Duration::from_ns(50);
        let mut c: Cpl = Completer::new(cfg, PartitionTable::default());
        let mut m = Mem::new(0);
        let t = |ns| Instant::ZERO + Duration::from_ns(ns);
        let mut w = request(Opcode::Write, 0, 1);
        req_mut(&mut w).tag = Tag::new(1).unwrap();
        let mut r = request(Opcode::Read, 0, 1);
        req_mut(&mut r).tag = Tag::new(2).unwrap();
        c.handle_request(t(100), &w.as_transfer(), &mut m, &mut Unlimited)
            .unwrap();
        // The write took effect at once; its response waits.
        assert_eq!(m.bytes()[0], 0xab);
        c.handle_request(t(120), &r.as_transfer(), &mut m, &mut Unlimited)
            .unwrap();
        assert_eq!(c.poll_timeout(), Some(t(150)));
        assert!(c.poll_transmit(t(149), &mut Unlimited).is_none());
        c.handle_timeout(t(149));
        assert_eq!(c.poll_timeout(), Some(t(150)));
        assert!(!c.has_ready());
        c.handle_timeout(t(150));
        assert!(c.has_ready());
        let tag_of = |o: TlTransfer<'_>| match o.field {
            TlField::UncompressedResponse(r) => r.tag.get(),
            _ => unreachable!(),
        };
        let first = c.poll_transmit(t(150), &mut Unlimited).map(tag_of);
        assert_eq!(first, Some(1));
        assert!(c.poll_transmit(t(169), &mut Unlimited).is_none());
        assert_eq!(c.poll_timeout(), Some(t(170)));
        // Ready but not sent (say, no credits yet): no timer any more.
        c.handle_timeout(t(175));
        assert_eq!(c.poll_timeout(), None);
        let second = c.poll_transmit(t(180), &mut Unlimited).map(tag_of);
        assert_eq!(second, Some(2));
        assert_eq!(c.pending(), 0);
        // Without a delay, a response can leave at once.
        let mut c = cpl();
        c.handle_request(t(5), &r.as_transfer(), &mut m, &mut Unlimited)
            .unwrap();
        assert_eq!(c.poll_timeout(), None);
        assert!(c.poll_transmit(t(5), &mut Unlimited).is_some());
    }

    #[test]
    fn busy_misrouted_ignored_compressed() {
        let (mut c, mut m) = (cpl(), Mem::new(0));
        let rd = request(Opcode::Read, 0, 1);
        let t = rd.as_transfer();
        c.handle_request(Instant::ZERO, &t, &mut m, &mut Unlimited)
            .unwrap();
        c.handle_request(Instant::ZERO, &t, &mut m, &mut Unlimited)
            .unwrap();
        assert_eq!(
            c.handle_request(Instant::ZERO, &t, &mut m, &mut Unlimited),
            Err(CompleterBusy)
        );
        assert_eq!((c.stats().busy, c.pending()), (1, 2));
        while c.poll_transmit(Instant::ZERO, &mut Unlimited).is_some() {}
        let mut mis = rd.clone();
        req_mut(&mut mis).dstaccid = id(9);
        assert!(run(&mut c, &mut m, &mis).is_empty());
        assert!(run(&mut c, &mut m, &TransferBuf::default()).is_empty());
        assert_eq!((c.stats().misrouted, c.stats().ignored), (1, 1));
        let mut comp = TransferBuf::default();
        comp.field = TlField::CompressedRequest(TlCompressedRequest {
            srcaccid: id(1),
            dstaccid: id(2),
            ..Default::default()
        });
        assert_eq!(status_of(&mut c, &mut m, &comp), Status::UNSUPPORTED);
        assert!(matches!(
            c.poll_event(),
            Some(CompleterEvent::Misrouted { .. })
        ));
        assert_eq!(c.poll_event(), Some(CompleterEvent::NotARequest));
    }

    struct Counting {
        req_released: u32,
        rsp_allowed: u32,
    }
    impl CreditGate for Counting {
        fn try_consume(&mut self, flow: Flow, _: Vc, beats: u8) -> Option<Pool> {
            assert_eq!(flow, Flow::Response);
            let need = 1 + u32::from(beats);
            (self.rsp_allowed >= need).then(|| {
                self.rsp_allowed -= need;
                Pool::Shared
            })
        }
        fn release(&mut self, flow: Flow, _: Vc, _: Pool, beats: u8) {
            assert_eq!(flow, Flow::Request);
            self.req_released += 1 + u32::from(beats);
        }
    }

    #[test]
    fn credits_returned_and_respected() {
        let (mut c, mut m) = (cpl(), Mem::new(0));
        let mut g = Counting {
            req_released: 0,
            rsp_allowed: 2,
        };
        let w = request(Opcode::WriteFull, 0, 4);
        c.handle_request(Instant::ZERO, &w.as_transfer(), &mut m, &mut g)
            .unwrap();
        let r = request(Opcode::Read, 0, 4);
        c.handle_request(Instant::ZERO, &r.as_transfer(), &mut m, &mut g)
            .unwrap();
        assert_eq!(g.req_released, 0, "request credits wait for the response");
        // The read response needs 5 credits: the write response passes it.
        let o = c.poll_transmit(Instant::ZERO, &mut g).unwrap();
        let TlField::UncompressedResponse(r) = o.field else {
            unreachable!()
        };
        assert!(r.rd_wr && r.pool);
        assert_eq!(g.req_released, 5);
        assert!(c.poll_transmit(Instant::ZERO, &mut g).is_none());
        g.rsp_allowed = 5;
        assert_eq!(
            c.poll_transmit(Instant::ZERO, &mut g).unwrap().data.len(),
            256
        );
        assert_eq!(c.pending(), 0);
    }

    #[test]
    fn compressed_requests_and_responses() {
        use crate::wire::addr_cache::AddrCache;
        let (mut c, mut m) = (cpl(), Mem::new(0));
        c.config.compress_responses = true;
        let mut enc = AddrCache::new();
        let mut send = |c: &mut Cpl, m: &mut Mem, it: &TransferBuf| {
            let TlField::UncompressedRequest(q) = it.field else {
                unreachable!()
            };
            let mut x = it.clone();
            x.field = enc.encode_request(&q, it.byte_enables.as_ref());
            if matches!(x.field, TlField::CompressedRequest(_)) {
                x.byte_enables = None;
            }
            c.handle_request(Instant::ZERO, &x.as_transfer(), m, &mut Unlimited)
                .unwrap();
            let o = c.poll_transmit(Instant::ZERO, &mut Unlimited).unwrap();
            o.check().unwrap();
            (x.field, o.field, o.data.len())
        };
        let (f, o, n) = send(&mut c, &mut m, &request(Opcode::WriteFull, 128, 2));
        assert!(matches!(f, TlField::UncompressedRequest(q) if q.cload));
        assert!(matches!(o, TlField::CompressedWriteResponse(r) if r.rd_wr));
        assert_eq!(n, 0);
        let (f, o, n) = send(&mut c, &mut m, &request(Opcode::Write, 192, 1));
        assert!(matches!(f, TlField::CompressedRequest(_)));
        assert!(matches!(o, TlField::CompressedWriteResponse(_)));
        assert_eq!(n, 0);
        let (f, o, n) = send(&mut c, &mut m, &request(Opcode::Read, 128, 2));
        assert!(matches!(f, TlField::CompressedRequest(_)));
        assert!(matches!(o, TlField::CompressedWriteResponse(r) if !r.rd_wr && r.len == 1));
        assert_eq!(n, 128);
        assert_eq!(m.bytes()[128..256], [0xab; 128]);
        assert_eq!(c.stats().ok, 3);
        assert_eq!(c.stats().responses_compressed, 3);
        c.reset_addr_cache();
        let (_, o, _) = send(&mut c, &mut m, &request(Opcode::Read, 128, 1));
        assert!(
            matches!(o, TlField::UncompressedResponse(r) if r.status == Status::UNSUPPORTED.raw())
        );
        assert!(matches!(
            c.poll_event(),
            Some(CompleterEvent::AddrCacheMiss { way: 0, .. })
        ));
        // The error response went uncompressed.
        assert_eq!(c.stats().responses_compressed, 3);
        assert_eq!(c.stats().responses_sent, 4);
    }
}
