//! Accelerators: workload sources, operations split into requests, the integrity checks on
//! everything that comes back, and the composed model's requester and completer of each port
//! (`accelerator.model = "composed"`; the default, an endpoint per port, is in
//! [`super::endpoint`]; `spec-notes/simulator.md#accelerators`).

use super::check::{pattern, IntMap, Reference};
use super::endpoint::Ep;
use super::port::{flow_of, vc_of};
use super::trace::Mark;
use super::{class_index, Ev, Owner, Sim};
use crate::pod::config::{AccelModel, PodFile};
use crate::pod::topology::Fabric;
use crate::report::OpClass;
use podlink_protocol::time::{Duration, Instant};
use podlink_protocol::txn::{
    Atomic, AtomicOp, AtomicSize, Completer, CompleterConfig, CompleterStats, Flow, Operation,
    PartitionTable, Request, Requester, RequesterConfig, RequesterStats, SubmitError, TxnError,
};
use podlink_protocol::wire::PartitionId;
use podlink_protocol::wire::{AccelId, TlItem, TlPushError, Vc};
use std::collections::VecDeque;

/// Tags per accelerator port.
pub const TAGS: usize = 512;
/// Operations open per accelerator port.
pub const OPS: usize = 512;
/// Requests queued in a requester waiting for a tag or credits.
pub const QUEUE: usize = 64;
/// Requests a completer holds (response slots).
pub const RESP: usize = 64;
/// Largest operation in 256 B pieces (4 KB).
pub(crate) const MAX_PIECES: u32 = 16;

/// One port of an accelerator: the protocol crate's requester and completer.
pub(crate) struct AccelPort {
    pub req: Requester<TAGS, OPS, QUEUE>,
    pub cpl: Completer<RESP>,
    /// The completer refused a request (response slots full): retry after it sends.
    pub cpl_blocked: bool,
    /// Requester operation ID → piece (operation × 16 + index).
    pub piece_of: IntMap<u32>,
}

impl AccelPort {
    /// Something waits to be sent.
    pub fn has_work(&self) -> bool {
        self.req.queued() > 0 || self.cpl.pending() > 0
    }
}

/// An operation in flight.
#[derive(Clone, Copy)]
pub(crate) struct Op {
    pub src: u32,
    pub dst: u32,
    pub class: OpClass,
    pub bytes: u32,
    pub addr: u64,
    pub issued: u64,
    /// Pieces still outstanding (bit k = piece k).
    pub left: u16,
    pub measured: bool,
    pub failed: bool,
    pub wid: u32,
    /// Virtual channel of its requests.
    pub vc: u8,
    /// Bit k: a piece went out of the issuer's port k.
    pub ports: u8,
    /// Reads: the write ID each 64 B line must return. Writes: the write ID each line held
    /// before (what a failed write may have left).
    pub expect: [u32; 64],
}

/// How a piece's request ended at its requester.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PieceEnd {
    /// Answered, successfully.
    Ok,
    /// Failed by a request or queue timeout (which congestion alone may cause).
    TimedOut,
    /// Failed otherwise (an error status, poisoned data).
    Failed,
    /// Failed at the source without being sent (no usable port, or refused by its
    /// requester): nothing of it is in the fabric, and its region's pin is not its.
    Unsent,
}

impl PieceEnd {
    /// The end of a requester completion's result, and the atomic's old value.
    pub(crate) fn of(result: Result<Option<u64>, TxnError>) -> (Self, Option<u64>) {
        match result {
            Ok(old) => (PieceEnd::Ok, old),
            Err(TxnError::Timeout) => (PieceEnd::TimedOut, None),
            Err(_) => (PieceEnd::Failed, None),
        }
    }
}

/// Every accelerator.
pub(crate) struct Accels {
    /// First link end of accelerator ports.
    base: u32,
    /// First end of each accelerator.
    pub end_of: Vec<u32>,
    pub nports: Vec<u32>,
    pub ports: Vec<AccelPort>,
    /// Each port as the protocol's `txn::Endpoint` (`accelerator.model = "endpoint"`;
    /// `ports` is empty then).
    pub(crate) eps: Vec<Box<Ep>>,
    pub backlog: Vec<VecDeque<u32>>,
    pub ops: Vec<Op>,
    pub(crate) free_ops: Vec<u32>,
    /// Operations issued, completed.
    pub issued: u64,
    pub completed: u64,
    /// Bytes completed per accelerator among measured operations.
    pub bytes_done: Vec<u64>,
}

/// Accelerator → partition, as every completer admits requesters.
pub(crate) fn partition_table(fabric: &Fabric) -> PartitionTable {
    let mut table = PartitionTable::empty();
    for a in 0..fabric.accels as usize {
        let p = PartitionId::from_bits_truncate(fabric.partition_of[a]);
        table.set(AccelId::from_bits_truncate(a as u16), Some(p));
    }
    table
}

/// How long a requester keeps a timed-out request's tag from reuse: until its response, if
/// it comes, has certainly arrived or been dropped (`simulator.md`, finding 15). The request
/// and the response each stay in the fabric at most `PodFile::hop_residence_ps` per switch
/// on their path (then a switch drops them, or a link reset does), and the completer holds
/// the response at most its lifetime, a request timeout after it was ready; the request
/// timed out a request timeout after it was sent. So twice the request timeout plus twice
/// the fabric's diameter in hop residences, and at least the protocol's default 1 ms.
pub(crate) fn tag_quarantine(pod: &PodFile, fabric: &Fabric) -> Duration {
    let timeout = crate::pod::timing::ns(pod.accelerator.timeout_us * 1000.0).as_ps();
    let fabric_ps = u64::from(fabric.diameter())
        .saturating_mul(pod.hop_residence_ps())
        .saturating_mul(2);
    let ps = timeout.saturating_mul(2).saturating_add(fabric_ps);
    Duration::from_ps(ps).max(Duration::from_ms(1))
}

/// The requester and completer settings of accelerator `a`'s port `k`; `quarantine` is
/// [`tag_quarantine`] (worked out once per pod).
pub(crate) fn port_configs(
    pod: &PodFile,
    fabric: &Fabric,
    a: usize,
    k: usize,
    quarantine: Duration,
) -> (RequesterConfig, CompleterConfig) {
    let part = PartitionId::from_bits_truncate(fabric.partition_of[a]);
    let timeout = crate::pod::timing::ns(pod.accelerator.timeout_us * 1000.0);
    let id = AccelId::from_bits_truncate(a as u16);
    let p = &fabric.accel_ports[a];
    let mut rc = RequesterConfig::new(id);
    rc.partition = part;
    rc.compress_requests = pod.link.compress_requests;
    rc.request_timeout = timeout;
    rc.queue_timeout = timeout;
    rc.tag_quarantine = quarantine;
    // Ports of this accelerator into the same switch take disjoint tag ranges: a response
    // may come back on any of them (the switch routes by destination).
    let sw = p[k].0;
    let same = p[..k].iter().filter(|&&(s, _)| s == sw).count();
    rc.tag_base = (same * TAGS) as u16;
    let mut cc = CompleterConfig::new(id);
    cc.partition = part;
    cc.compress_responses = pod.link.compress_responses;
    // A response that could not leave within a request timeout of being ready is useless
    // (its requester has given up) and, sent later, could outlive the tag's quarantine.
    cc.response_lifetime = timeout;
    (rc, cc)
}

impl Accels {
    /// Every accelerator; its ports' requesters and completers unless the pod runs
    /// endpoints (`accelerator.model`), which `Sim::new` builds into `eps`.
    pub fn new(pod: &PodFile, fabric: &Fabric, base: u32, end_of: &[u32]) -> Accels {
        let mut ports = Vec::new();
        let mut nports = Vec::new();
        let composed = pod.accelerator.model == AccelModel::Composed;
        let table = partition_table(fabric);
        // Only composed ports are built here (`endpoint::build` works out its own).
        let quarantine = if composed {
            tag_quarantine(pod, fabric)
        } else {
            Duration::ZERO
        };
        for (a, p) in fabric.accel_ports.iter().enumerate() {
            nports.push(p.len() as u32);
            let built = if composed { p.len() } else { 0 };
            for k in 0..built {
                let (rc, cc) = port_configs(pod, fabric, a, k, quarantine);
                ports.push(AccelPort {
                    req: Requester::new(rc),
                    cpl: Completer::new(cc, table.clone()),
                    cpl_blocked: false,
                    piece_of: IntMap::default(),
                });
            }
        }
        let n = fabric.accels as usize;
        Accels {
            base,
            end_of: end_of.to_vec(),
            nports,
            ports,
            eps: Vec::new(),
            backlog: (0..n).map(|_| VecDeque::new()).collect(),
            ops: Vec::new(),
            free_ops: Vec::new(),
            issued: 0,
            completed: 0,
            bytes_done: vec![0; n],
        }
    }

    /// The index in `eps` of accelerator end `e`, when the pod runs endpoints.
    pub fn ep_index(&self, e: u32) -> Option<usize> {
        if self.eps.is_empty() {
            return None;
        }
        let i = e.checked_sub(self.base)? as usize;
        (i < self.eps.len()).then_some(i)
    }

    /// The port of link end `e`.
    pub fn port(&self, e: u32) -> Option<&AccelPort> {
        self.ports.get(e.checked_sub(self.base)? as usize)
    }

    pub fn port_mut(&mut self, e: u32) -> Option<&mut AccelPort> {
        self.ports.get_mut(e.checked_sub(self.base)? as usize)
    }

    /// Every accelerator port's completer, in either accelerator model: its counters and the
    /// requests it holds.
    pub fn completers(&self) -> impl Iterator<Item = (&CompleterStats, usize)> + '_ {
        self.ports
            .iter()
            .map(|p| (p.cpl.stats(), p.cpl.pending()))
            .chain(self.eps.iter().map(|e| {
                let c = e.completer();
                (c.stats(), c.pending())
            }))
    }

    /// The requesters' timeout and dropped-response counters, summed over both accelerator
    /// models (the other fields stay 0).
    pub fn requester_stats(&self) -> RequesterStats {
        let mut t = RequesterStats::default();
        let each = self
            .ports
            .iter()
            .map(|p| p.req.stats())
            .chain(self.eps.iter().map(|e| e.requester().stats()));
        for s in each {
            t.request_timeouts += s.request_timeouts;
            t.queue_timeouts += s.queue_timeouts;
            t.dropped_late += s.dropped_late;
            t.dropped_unknown_tag += s.dropped_unknown_tag;
            t.requests_abandoned += s.requests_abandoned;
            t.responses_dropped += s.responses_dropped;
        }
        t
    }

    /// Operations open.
    pub fn open(&self) -> usize {
        self.ops.len() - self.free_ops.len()
    }
}

/// Check read data of piece `piece` (of `ops`) at `offset` from the piece's start against
/// the reference copy of memory.
pub(crate) fn check_read(
    ops: &[Op],
    reference: &mut Reference,
    piece: u32,
    offset: u32,
    data: &[u8],
) {
    let (op, k) = (piece / MAX_PIECES, piece % MAX_PIECES);
    if let Some(o) = ops.get(op as usize) {
        let first = (k * 4 + offset / 64) as usize;
        let exp = o.expect.get(first..).unwrap_or(&[]);
        let addr = o.addr + u64::from(k) * 256 + u64::from(offset);
        reference.check_read(o.dst, addr, data, exp);
    }
}

/// What became of a piece handed to [`Sim::submit_piece`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    /// Taken by its port's requester (or failed at once and reported).
    Yes,
    /// The requester has no room: try again when an operation completes.
    Full,
    /// Its region must wait (`FaultState::choose`); later pieces may go.
    Wait,
}

/// Which of `n` ports carries requests to `dst` for the 256 B region of `addr`: fixed per
/// (destination, region), so the ordering rule holds.
fn pick_port(dst: u32, addr: u64, n: u32) -> u32 {
    let x = (u64::from(dst) << 32 ^ (addr >> 8)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    ((x >> 32) % u64::from(n.max(1))) as u32
}

impl Sim {
    pub(crate) fn on_submit(&mut self, op: u32, now: u64) {
        let Some(o) = self.accels.ops.get(op as usize).copied() else {
            return;
        };
        if let Some(t) = self.trace.as_mut() {
            t.mark(now, Mark::Submit);
        }
        let pieces = if o.class == OpClass::Atomic {
            1
        } else {
            o.bytes.div_ceil(256)
        };
        let a = o.src as usize;
        let mut queued = false;
        for k in 0..pieces {
            let piece = op * MAX_PIECES + k;
            if !self.accels.backlog[a].is_empty() || self.submit_piece(piece, now) != Sent::Yes {
                self.accels.backlog[a].push_back(piece);
                queued = true;
            }
        }
        // Under faults the queue may hold only regions that wait: what was just queued
        // behind them may go now.
        if queued && self.fault.is_some() {
            self.drain_backlog(o.src, now);
        }
    }

    /// Hand a piece to its port's requester.
    fn submit_piece(&mut self, piece: u32, now: u64) -> Sent {
        let (op, k) = (piece / MAX_PIECES, piece % MAX_PIECES);
        let Some(o) = self.accels.ops.get(op as usize) else {
            return Sent::Yes;
        };
        let addr = o.addr + u64::from(k) * 256;
        let len = (o.bytes - k * 256).min(256);
        let vc = Vc::from_bits_truncate(o.vc);
        let fallback = pick_port(o.dst, addr, self.accels.nports[o.src as usize]);
        let port = match self.fault.as_mut() {
            // Every port of the source failed or was declared down: the request fails here,
            // unsent, as a driver refuses a request it has no way to send, instead of
            // waiting in a queue for its timeout. (Nothing of it can overtake anything.)
            Some(f) if !f.any_port(o.src) => {
                f.report.failed_at_source += 1;
                self.piece_done(piece, PieceEnd::Unsent, None, now);
                return Sent::Yes;
            }
            Some(f) => match f.choose(o.src, o.dst, addr, fallback, now) {
                Some(p) => p,
                // Its region waits for requests in flight on a port gone unusable.
                None => return Sent::Wait,
            },
            None => fallback,
        };
        let (src, dst_id) = (o.src, o.dst);
        let e = self.accels.end_of[o.src as usize] + port;
        let dst = AccelId::from_bits_truncate(o.dst as u16);
        let mut data = [0u8; 256];
        let operation = match o.class {
            OpClass::Read => Operation::Read { addr, len },
            OpClass::Write => {
                for (l, chunk) in data[..len as usize].chunks_mut(64).enumerate() {
                    pattern(o.wid, o.dst, addr + l as u64 * 64, chunk);
                }
                Operation::WriteFull {
                    addr,
                    data: &data[..len as usize],
                }
            }
            OpClass::Atomic => Operation::Atomic {
                addr,
                atomic: Atomic {
                    op: AtomicOp::FetchAdd,
                    size: AtomicSize::Eight,
                    operand: 1,
                    compare: 0,
                },
                returning: true,
            },
        };
        let req = Request {
            dst,
            vc,
            op: operation,
        };
        let t = Instant::from_ps(now);
        let submitted = if let Some(i) = self.accels.ep_index(e) {
            let ep = &mut self.accels.eps[i];
            let r = ep.submit(t, &req);
            if let Ok(id) = r {
                ep.host_mut().piece_of.insert(u64::from(id.0), piece);
            }
            r
        } else {
            let Some(ap) = self.accels.port_mut(e) else {
                return Sent::Yes;
            };
            let r = ap.req.submit(t, &req);
            if let Ok(id) = r {
                ap.piece_of.insert(u64::from(id.0), piece);
            }
            r
        };
        match submitted {
            Ok(_) => {
                self.note_accel_work(e);
                if let Some(f) = self.fault.as_mut() {
                    f.pin(src, dst_id, addr, port, now);
                    if let Some(o) = self.accels.ops.get_mut(op as usize) {
                        o.ports |= 1u8.checked_shl(port).unwrap_or(0);
                    }
                }
                self.kick(e, now);
                Sent::Yes
            }
            Err(SubmitError::OpTableFull | SubmitError::QueueFull { .. }) => Sent::Full,
            Err(_) => {
                self.stats.invalid_frames += 1;
                self.piece_done(piece, PieceEnd::Unsent, None, now);
                Sent::Yes
            }
        }
    }

    /// Move end `e`'s completer responses and requester requests into its TL packer.
    pub(crate) fn prefill_accel(&mut self, e: u32, now: u64) {
        let ei = e as usize;
        let t = Instant::from_ps(now);
        // Responses sent, and those the completer drops past their lifetime, free its slots.
        let pending = |s: &Self| s.accels.port(e).map_or(0, |ap| ap.cpl.pending());
        let pending_before = pending(self);
        while self.txs[ei].tl.buffered_halves() < 20 {
            if let Some(h) = self.txs[ei].txq.pop_front() {
                if !self.push_frame(e, h, now) {
                    break;
                }
                continue;
            }
            let Some(ap) = self.accels.ports.get_mut((e - self.accels.base) as usize) else {
                break;
            };
            let port = &mut self.ports[ei];
            let item = match ap.cpl.poll_transmit(t, port) {
                Some(x) => Some(x),
                None => ap.req.poll_transmit(t, port),
            };
            let Some(item) = item else {
                // A rogue requester behind the port (a fault) sends after the port's own; its
                // transfer borrows it, so it goes through a frame.
                let frames = &mut self.frames;
                let rogue = self.fault.as_ref().and_then(|f| {
                    f.rogues.iter().filter(|r| r.end == e).find_map(|r| {
                        let mut req = r.req.borrow_mut();
                        let x = req.poll_transmit(t, &mut *port)?;
                        Some(frames.alloc_transfer(&x, e))
                    })
                });
                match rogue {
                    Some(h) if self.push_frame(e, h, now) => continue,
                    _ => break,
                }
            };
            // Straight into the TL packer; only an item that does not fit now is kept as a
            // frame in the overflow queue (as `push_frame` would keep it).
            match self.txs[ei].tl.push(&TlItem::Transfer(item)) {
                Ok(()) => {
                    self.txs[ei].transfers_sent += 1;
                    if let Some(tr) = self.trace.as_mut() {
                        tr.mark(now, Mark::Pull(e));
                    }
                }
                Err(TlPushError::Full) => {
                    let h = self.frames.alloc_transfer(&item, e);
                    self.txs[ei].txq.push_front(h);
                    break;
                }
                Err(TlPushError::Invalid(_)) => self.stats.invalid_frames += 1,
            }
        }
        self.note_accel_work(e);
        // Responses sent release the requests' credits (the return policy decides when they
        // go; the end's `Tx` event, which called this, packs what is due next) and free
        // completer slots.
        self.apply_credit_policy(e, now);
        if pending(self) < pending_before {
            if let Some(ap) = self.accels.port_mut(e) {
                if std::mem::take(&mut ap.cpl_blocked) {
                    self.schedule(now, Ev::Cpl(e));
                }
            }
        }
    }

    /// A frame arrived at accelerator end `r`.
    pub(crate) fn accel_deliver(&mut self, r: u32, h: u32, now: u64) {
        let Some(f) = self.frames.get(h) else {
            return;
        };
        if flow_of(&f.field) == Flow::Request {
            let at = now + self.t.completer + self.t.endpoint;
            self.enqueue(r, at, h, Ev::Cpl(r));
            return;
        }
        let t = Instant::from_ps(now);
        // The requester that owns the response's tag: this port's, or (several ports of the
        // accelerator into one switch, which routes by destination only) another port's.
        let tag = f.field.tag().unwrap_or_default();
        let owner = self.tag_owner(r, tag);
        if let Some(ap) = self
            .accels
            .ports
            .get_mut((owner - self.accels.base) as usize)
        {
            // The credits are the arrival link's.
            let gate = &mut self.ports[r as usize];
            if let Some(d) = ap.req.handle_response(t, &f.transfer(), gate) {
                let piece = ap
                    .piece_of
                    .get(&u64::from(d.op.0))
                    .copied()
                    .unwrap_or(u32::MAX);
                check_read(
                    &self.accels.ops,
                    &mut self.reference,
                    piece,
                    d.offset,
                    d.data,
                );
            }
            self.note_accel_work(owner);
        }
        self.frames.free(h);
        self.note_owed(r, now);
        self.drain_completions(owner, now);
        if owner != r {
            // The owner's requester may send again (a tag came free).
            self.kick(owner, now);
        }
    }

    /// The accelerator end whose requester owns `tag`, for a response that arrived at end `r`
    /// (`r` itself unless another port of the same accelerator owns it).
    fn tag_owner(&self, r: u32, tag: podlink_protocol::wire::Tag) -> u32 {
        if self.accels.port(r).is_none_or(|ap| ap.req.owns_tag(tag)) {
            return r;
        }
        let Owner::Accel { a, .. } = self.owner[r as usize] else {
            return r;
        };
        // Only ports into the same switch share a tag space.
        let switch_of = |e: u32| match self.owner[self.peer[e as usize] as usize] {
            Owner::Switch { s, .. } => Some(s),
            Owner::Accel { .. } => None,
        };
        let sw = switch_of(r);
        let first = self.accels.end_of[a as usize];
        (first..first + self.accels.nports[a as usize])
            .filter(|&e| switch_of(e) == sw)
            .find(|&e| self.accels.port(e).is_some_and(|ap| ap.req.owns_tag(tag)))
            .unwrap_or(r)
    }

    /// Requester timeouts: every accelerator port's requester is swept at a tenth of the
    /// request timeout (so an unanswered request fails within 110 % of its timeout), instead
    /// of a timer per port that every request would re-arm.
    /// Start the requester sweep again if it stopped (it stops once nothing is open and no
    /// more operations may be issued): a requester given work after that, a rogue's next
    /// write, must still time out.
    pub(crate) fn keep_sweeping(&mut self, now: u64) {
        if !self.sweeping {
            self.sweeping = true;
            self.schedule(now + self.sweep_ps, Ev::Sweep);
        }
    }

    pub(crate) fn on_sweep(&mut self, now: u64) {
        let t = Instant::from_ps(now);
        for i in 0..self.accels.ports.len() {
            let e = self.accels.base + i as u32;
            let ap = &mut self.accels.ports[i];
            if ap.req.poll_timeout().is_some_and(|d| d <= t) {
                ap.req.handle_timeout(t);
                while ap.req.poll_event().is_some() {}
                self.note_accel_work(e);
                self.drain_completions(e, now);
            }
        }
        self.sweep_rogues(now);
        let rogues = self.fault.as_ref().is_some_and(|f| f.rogues_open());
        // Keep sweeping while operations are open or may still be issued (before the
        // workloads start, `inject_until` is 0: the traced read may be open then).
        if self.accels.open() > 0 || self.inject_until == 0 || now < self.inject_until || rogues {
            self.schedule(now + self.sweep_ps, Ev::Sweep);
        } else {
            self.sweeping = false;
        }
    }

    /// Take the completions of accelerator end `r`'s requester and submit what waited.
    pub(crate) fn drain_completions(&mut self, r: u32, now: u64) {
        while let Some(ap) = self.accels.port_mut(r) {
            let Some(c) = ap.req.poll_completion() else {
                break;
            };
            let piece = ap.piece_of.remove(&u64::from(c.id.0)).unwrap_or(u32::MAX);
            let (end, old) = PieceEnd::of(c.result);
            self.piece_done(piece, end, old, now);
        }
        if let Owner::Accel { a, .. } = self.owner[r as usize] {
            self.drain_backlog(a, now);
        }
    }

    /// Requests due at accelerator end `r`'s completer.
    pub(crate) fn on_cpl(&mut self, r: u32, now: u64) {
        let Owner::Accel { a, .. } = self.owner[r as usize] else {
            return;
        };
        let mut handled = false;
        while let Some(&(at, h)) = self.rxs[r as usize].fifo.front() {
            if at > now {
                self.schedule(at, Ev::Cpl(r));
                break;
            }
            let Some(f) = self.frames.get(h) else {
                self.rxs[r as usize].fifo.pop_front();
                continue;
            };
            if let Some(t) = self.trace.as_mut() {
                t.mark(now, Mark::Handle(r));
            }
            let mut mem_map = self.mem.borrow_mut();
            let mut mem = mem_map.of(a);
            let Some(ap) = self.accels.ports.get_mut((r - self.accels.base) as usize) else {
                break;
            };
            let gate = &mut self.ports[r as usize];
            // Counted as held before the completer sees it (it may release at once).
            let (vc, beats) = (usize::from(vc_of(&f.field).get()), f.beats());
            gate.held.give(Flow::Request, vc, 1, beats);
            if ap
                .cpl
                .handle_request(Instant::from_ps(now), &f.transfer(), &mut mem, gate)
                .is_err()
            {
                // Response slots full: the request waits until responses leave.
                gate.held.take(Flow::Request, vc, beats);
                ap.cpl_blocked = true;
                break;
            }
            self.rxs[r as usize].fifo.pop_front();
            self.frames.free(h);
            handled = true;
        }
        if handled {
            self.note_accel_work(r);
            self.note_owed(r, now);
            self.kick(r, now);
        }
    }

    /// Submit accelerator `a`'s waiting pieces in order, up to the first its requester has
    /// no room for. A piece whose region must wait is passed over (only the order within a
    /// region is kept, and its later pieces wait too: they find the same pin).
    pub(crate) fn drain_backlog(&mut self, a: u32, now: u64) {
        let mut i = 0;
        while let Some(&piece) = self.accels.backlog[a as usize].get(i) {
            match self.submit_piece(piece, now) {
                Sent::Yes => {
                    self.accels.backlog[a as usize].remove(i);
                }
                Sent::Full => break,
                Sent::Wait => i += 1,
            }
        }
    }

    /// Piece `piece` completed (`end`), an atomic returning `old`.
    pub(crate) fn piece_done(&mut self, piece: u32, end: PieceEnd, old: Option<u64>, now: u64) {
        let ok = end == PieceEnd::Ok;
        if matches!(end, PieceEnd::Failed | PieceEnd::Unsent) {
            self.reference.found.failed_not_timed_out += 1;
        }
        let (op, k) = (piece / MAX_PIECES, piece % MAX_PIECES);
        // Only a piece given up holds its region (worked out only then: this runs per piece):
        // the request may still be in its source port's link (a link down for less than a
        // request timeout replays it on coming up) and then in the fabric beyond.
        let hold_until = match self.accels.ops.get(op as usize) {
            Some(o) if !ok => now
                .saturating_add(self.request_timeout().as_ps())
                .saturating_add(self.fabric_residence_ps(o.src, o.dst)),
            _ => 0,
        };
        let Some(o) = self.accels.ops.get_mut(op as usize) else {
            self.reference.found.duplicates += 1;
            return;
        };
        let bit = 1u16 << k;
        if o.left & bit == 0 {
            self.reference.found.duplicates += 1;
            self.reference
                .found
                .note(|| format!("operation {op} piece {k} completed twice"));
            return;
        }
        o.left &= !bit;
        let piece_addr = o.addr + u64::from(k) * 256;
        let mut held = false;
        if let Some(f) = self.fault.as_mut().filter(|_| end != PieceEnd::Unsent) {
            if ok {
                f.unpin(o.src, o.dst, piece_addr);
            } else {
                held = f.unpin_given_up(o.src, o.dst, piece_addr, hold_until);
            }
        }
        if !ok {
            match o.class {
                OpClass::Write => {
                    let lines = (o.bytes - k * 256).min(256).div_ceil(64);
                    for l in 0..lines {
                        let i = (k * 4 + l) as usize;
                        let prev = o.expect.get(i).copied().unwrap_or(0);
                        let a = piece_addr + u64::from(l) * 64;
                        self.reference.write_failed(o.dst, a, o.wid, prev);
                    }
                }
                OpClass::Atomic => self.reference.atomic_failed(o.dst),
                OpClass::Read => {}
            }
        }
        if !ok && !o.failed {
            o.failed = true;
            self.reference.found.failed += 1;
            let (src, dst) = (o.src, o.dst);
            self.reference
                .found
                .note_failed(|| format!("operation {op} from {src} to {dst} failed"));
        }
        let o = *o;
        if held {
            // The region's waiting requests are looked at again when the hold ends.
            self.schedule(hold_until, Ev::Held(o.src));
        }
        if let (OpClass::Atomic, Some(old)) = (o.class, old) {
            self.reference.atomic_done(o.dst, old);
        }
        if o.left != 0 {
            return;
        }
        if let Some(t) = self.trace.as_mut() {
            t.mark(now, Mark::Done);
        }
        if self.fault.is_some() {
            self.record_op(crate::sim::fault::OpRecord {
                issued_ps: o.issued,
                done_ps: now,
                src: o.src,
                dst: o.dst,
                vc: o.vc,
                ok: !o.failed,
                ports: o.ports,
            });
        }
        self.accels.completed += 1;
        // Latency and throughput are those of operations that did their work: a failed one
        // (its time to failure, bytes that were not moved) is counted by the integrity check
        // instead (`integrity.failed`).
        if o.measured && !o.failed {
            let lat = now - o.issued;
            self.lat[class_index(o.class)].record(lat);
            let i = self.part_index[o.src as usize] as usize;
            if let Some(l) = self.part_lat.get_mut(i) {
                l.record(lat);
            }
            self.accels.bytes_done[o.src as usize] += u64::from(o.bytes);
        }
        self.accels.ops[op as usize].left = 0;
        self.accels.free_ops.push(op);
    }

    /// Pieces accelerator end `e`'s requester has open.
    #[cfg(test)]
    pub(crate) fn pieces_out(&self, e: u32) -> usize {
        match self.ep(e) {
            Some(ep) => ep.host().piece_of.len(),
            None => self.accels.port(e).map_or(0, |ap| ap.piece_of.len()),
        }
    }

    /// The atomic counter of accelerator `d`.
    pub(crate) fn counter(&mut self, d: u32) -> u64 {
        use podlink_protocol::txn::MemoryTarget;
        let mut b = [0u8; 8];
        let _ = self
            .mem
            .borrow_mut()
            .of(d)
            .read(crate::workload::ATOMIC_COUNTER_ADDR, &mut b);
        u64::from_le_bytes(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::config::{AccelModel, Topology};
    use crate::pod::presets;
    use crate::pod::timing::LinkTiming;
    use crate::sim::fault::FaultPlan;
    use crate::sim::Options;
    use crate::workload::OpSpec;

    /// How long a given-up request may stay in the fabric: for every switch on its path (one
    /// in a multi-plane pod, three between leaves of a leaf/spine pod, one within a leaf) a
    /// residence limit (the request timeout unless the pod sets `switch.max_residence_us`)
    /// and what the link after it may take: two hold limits (each a request timeout less two
    /// link latencies, at least two 2 µs tail-loss probes) and two link latencies.
    #[test]
    fn fabric_residence_counts_every_switch_on_the_path() {
        let us = 1_000_000u64;
        let planes = presets::load("ualink-64x4").unwrap();
        let t = (planes.accelerator.timeout_us * 1e6) as u64;
        let lat = LinkTiming::new(&planes.link).flit_latency().as_ps();
        assert_eq!(planes.link_hold_limit_ps(), t - 2 * lat);
        let link = 2 * t - 2 * lat;
        let sim = Sim::new(&planes, &Options::default()).unwrap();
        assert_eq!(sim.fabric_residence_ps(0, 63), t + link);
        let mut short = planes.clone();
        short.switch.max_residence_us = Some(3.0);
        let sim = Sim::new(&short, &Options::default()).unwrap();
        assert_eq!(sim.fabric_residence_ps(5, 9), 3 * us + link);
        let mut tiers = presets::load("two-tier-384").unwrap();
        tiers.accelerator.timeout_us = 10.0;
        let lat = LinkTiming::new(&tiers.link).flit_latency().as_ps();
        let hop = 10 * us + 2 * (10 * us - lat);
        let sim = Sim::new(&tiers, &Options::default()).unwrap();
        assert_eq!(sim.fabric.hops(0, 383), Some(3));
        assert_eq!(sim.fabric_residence_ps(0, 383), 3 * hop);
        assert_eq!(sim.fabric.hops(0, 1), Some(1));
        assert_eq!(sim.fabric_residence_ps(0, 1), hop);
        // A 2 µs timeout: the hold limit is two 2 µs probes.
        tiers.accelerator.timeout_us = 2.0;
        assert_eq!(tiers.link_hold_limit_ps(), 4 * us);
        let sim = Sim::new(&tiers, &Options::default()).unwrap();
        assert_eq!(
            sim.fabric_residence_ps(0, 383),
            3 * (2 * us + 2 * (4 * us + lat))
        );
    }

    /// A region that must wait (held on a port declared down, with no other way into its
    /// switch) stays in its accelerator's queue; a request to another region issued after
    /// it goes out at once, without waiting for anything to complete.
    #[test]
    fn a_waiting_region_does_not_hold_back_other_regions() {
        for model in [AccelModel::Endpoint, AccelModel::Composed] {
            let mut pod = presets::load("ualink-64x4").unwrap();
            pod.accelerator.model = model;
            waiting_region(pod);
        }
    }

    fn waiting_region(mut pod: crate::pod::config::PodFile) {
        pod.topology = Topology::MultiPlane {
            accelerators: 4,
            planes: 2,
            ports_per_plane: 2,
        };
        let opts = Options {
            faults: FaultPlan {
                record_ops: true,
                ..FaultPlan::default()
            },
            ..Options::default()
        };
        let mut sim = Sim::new(&pod, &opts).unwrap();
        let start = 6_000_000;
        sim.run_to(start);
        let (src, dst) = (0u32, 1u32);
        let held = 0x1000u64;
        let port = pick_port(dst, held, sim.accels.nports[src as usize]);
        {
            let f = sim.fault.as_mut().unwrap();
            let first = f.end_of[src as usize];
            // Accelerator 0's ports into the held port's switch are declared down, and a
            // request of the region was given up there.
            let sw = f.switch_of[(first + port - f.accel_base) as usize];
            for k in 0..f.nports[src as usize] {
                let i = (first + k - f.accel_base) as usize;
                if f.switch_of[i] == sw {
                    f.local_ok[i] = false;
                }
            }
            f.pin(src, dst, held, port, start);
            f.hold(src, port, start, |_| start + 5_000_000);
            f.unpin(src, dst, held);
        }
        // As `Sim::declare` does with a hold.
        sim.schedule(start + 5_000_000, Ev::Held(src));
        let spec = |addr| OpSpec {
            src,
            dst,
            class: OpClass::Write,
            bytes: 64,
            addr,
            vc: 0,
        };
        let waiting = sim.issue(spec(held), start);
        let free = sim.issue(spec(0x2000), start + 1_000);
        sim.run_to(start + 100_000);
        assert_eq!(
            sim.accels.backlog[src as usize]
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            [waiting * MAX_PIECES],
            "only the held region waits"
        );
        assert_eq!(sim.accels.completed, 0, "nothing completed in between");
        let e0 = sim.accels.end_of[src as usize];
        let sent: usize = (0..sim.accels.nports[src as usize])
            .map(|k| sim.pieces_out(e0 + k))
            .sum();
        assert_eq!(sent, 1, "operation {free} went out");
        // The hold ends: the region leaves by the other switch, and both complete.
        sim.run_to(start + 8_000_000);
        assert!(sim.accels.backlog[src as usize].is_empty());
        assert_eq!(sim.accels.completed, 2);
    }
}
