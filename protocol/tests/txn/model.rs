//! A model-based harness for the transaction layer, shared by `tests/txn.rs` and
//! `examples/txn_soak.rs`.
//!
//! Several requesters issue random mixes of every operation (reads, partial writes, full
//! writes, write messages, every atomic returning data or not) to several completers, some
//! across partitions and some at unmapped addresses. A reference model applies each request
//! to its own copy of the completer's memory at the moment the real completer executes it;
//! every completion, every byte of read data and, at the end, every byte of memory is
//! checked against the model. Independently of the model: concurrent fetch-adds on one
//! counter must sum exactly, compare-and-swap winners must be unique, and requests with the
//! same (source, destination, VC, 256 B region) must arrive in submission order.
//!
//! The "fabric" connects every requester to every completer in one of two ways
//! ([`Transport`]): a FIFO per (source, destination, VC) of transfers — lossless, reordering
//! only across FIFOs — or a TL packer → 64 B TL flits → TL unpacker per direction of each
//! pair. TL credits are per requester and per completer, returned when the peer consumes the
//! transfer.
#![allow(dead_code, unreachable_pub, clippy::needless_range_loop)]

use std::collections::{BTreeMap, HashMap, VecDeque};

use podlink_protocol::time::{Duration, Instant};
use podlink_protocol::txn::{
    Atomic, AtomicOp, AtomicSize, Completer, CompleterConfig, CreditGate, Flow, MemoryTarget, OpId,
    OpKind, Operation, OrderingMode, PartitionTable, Pool, Request, Requester, RequesterConfig,
    Status, SubmitError, TransferBuf, TxnError, WindowMemory,
};
use podlink_protocol::wire::tl_flit::FLIT_LEN;
use podlink_protocol::wire::{
    AccelId, Opcode, PartitionId, Tag, TlField, TlItem, TlPacker, TlPushError, TlTransfer,
    TlUnpacker, Vc,
};

/// Mapped bytes per completer; the 64 bytes at 0 are the hot counters.
pub const MEM: usize = 8192;
/// The fetch-add counter.
pub const HOT_ADD: u64 = 0;
/// The compare-and-swap counter.
pub const HOT_CAS: u64 = 16;

pub type Req = Requester<64, 32, 64>;
pub type Cpl = Completer<16>;
pub type Mem = WindowMemory<MEM>;

/// xorshift64*: deterministic, seedable, dependency-free.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15 | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p && p > 0.0
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct ModelConfig {
    pub requesters: usize,
    pub completers: usize,
    /// Operations in total, shared out among the requesters.
    pub ops: usize,
    pub partitions: usize,
    pub seed: u64,
    pub ordering: OrderingMode,
    pub beats_per_response: u8,
    /// Request credits per VC a requester holds: (command, data).
    pub request_credits: (u32, u32),
    /// Response credits per VC a completer holds: (command, data).
    pub response_credits: (u32, u32),
    /// Most operations open per requester.
    pub max_open: usize,
    /// Chance an operation goes to any completer rather than one of its own partition.
    pub any_destination: f64,
    /// How transfers travel.
    pub transport: Transport,
    /// Compress requests and responses with the address cache (packed transport only:
    /// the direct one reorders across VCs, which the cache does not survive).
    pub compress: bool,
}

/// How transfers travel between a requester and a completer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// A FIFO of transfers per (source, destination, VC).
    Direct,
    /// TL packer → TL flits → TL unpacker, per direction of each pair.
    Packed,
}

impl ModelConfig {
    /// Operations requester `i` issues.
    pub fn quota(&self, i: usize) -> usize {
        let n = self.requesters.max(1);
        self.ops / n + usize::from(i < self.ops % n)
    }
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            requesters: 3,
            completers: 2,
            ops: 600,
            partitions: 1,
            seed: 1,
            ordering: OrderingMode::PerRegion,
            beats_per_response: 4,
            request_credits: (8, 16),
            response_credits: (8, 16),
            max_open: 24,
            any_destination: 0.25,
            transport: Transport::Direct,
            compress: false,
        }
    }
}

/// The outcome, as the soak example prints it.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub ops: u64,
    pub completed: u64,
    pub mismatches: u64,
    pub timeouts: u64,
    pub partition_denied: u64,
    pub cross_partition_leaks: u64,
    pub lost: u64,
    pub duplicated: u64,
    /// Compressed request and response fields sent (not printed).
    pub compressed: u64,
    /// TL flits sent (packed transport; not printed).
    pub flits: u64,
    /// Linked mode: DL flits that arrived corrupted and were replayed (not printed).
    pub link_errors: u64,
    /// Human-readable notes on the first mismatches.
    pub details: Vec<String>,
}

impl Report {
    pub fn to_json(&self) -> String {
        format!(
            "{{\"ops\":{},\"completed\":{},\"mismatches\":{},\"timeouts\":{},\"partition_denied\":{},\"cross_partition_leaks\":{},\"lost\":{},\"duplicated\":{}}}",
            self.ops,
            self.completed,
            self.mismatches,
            self.timeouts,
            self.partition_denied,
            self.cross_partition_leaks,
            self.lost,
            self.duplicated
        )
    }

    /// Every operation completed once with the right result and nothing leaked.
    pub fn is_clean(&self) -> bool {
        self.completed == self.ops
            && self.mismatches == 0
            && self.timeouts == 0
            && self.cross_partition_leaks == 0
            && self.lost == 0
            && self.duplicated == 0
    }

    fn mismatch(&mut self, what: String) {
        self.mismatches += 1;
        if self.details.len() < 20 {
            self.details.push(what);
        }
    }
}

/// Credits one side holds for sending, per VC: (command, data).
#[derive(Clone, Debug)]
pub struct CreditLoop {
    avail: [(u32, u32); 4],
    grant: (u32, u32),
    pub stalls: u64,
}

impl CreditLoop {
    pub fn new(grant: (u32, u32)) -> Self {
        CreditLoop {
            avail: [grant; 4],
            grant,
            stalls: 0,
        }
    }
    /// The peer freed an item's buffers.
    pub fn give(&mut self, vc: Vc, beats: u8) {
        let a = &mut self.avail[usize::from(vc.get())];
        a.0 += 1;
        a.1 += u32::from(beats);
        assert!(
            a.0 <= self.grant.0 && a.1 <= self.grant.1,
            "credits above the grant"
        );
    }
}

impl CreditGate for CreditLoop {
    fn try_consume(&mut self, _flow: Flow, vc: Vc, beats: u8) -> Option<Pool> {
        let a = &mut self.avail[usize::from(vc.get())];
        if a.0 >= 1 && a.1 >= u32::from(beats) {
            a.0 -= 1;
            a.1 -= u32::from(beats);
            Some(Pool::PerVc)
        } else {
            self.stalls += 1;
            None
        }
    }
    fn release(&mut self, _: Flow, _: Vc, _: Pool, _: u8) {
        unreachable!("a sending loop is not released into")
    }
}

/// The receive side of a direct connection: a release returns credits to the sender.
struct ReturnTo<'a>(&'a mut CreditLoop, &'a mut u64);

impl CreditGate for ReturnTo<'_> {
    fn try_consume(&mut self, _: Flow, _: Vc, _: u8) -> Option<Pool> {
        None
    }
    fn release(&mut self, _: Flow, vc: Vc, _: Pool, beats: u8) {
        *self.1 += 1;
        self.0.give(vc, beats);
    }
}

/// A completer's sending gate: response credits from its own loop; a request's credits,
/// released with its last response, are held until the harness knows the requester.
struct CplGate<'a> {
    tx: &'a mut CreditLoop,
    released: Option<(Vc, u8)>,
}

impl CreditGate for CplGate<'_> {
    fn try_consume(&mut self, flow: Flow, vc: Vc, beats: u8) -> Option<Pool> {
        self.tx.try_consume(flow, vc, beats)
    }
    fn release(&mut self, flow: Flow, vc: Vc, _: Pool, beats: u8) {
        assert_eq!(flow, Flow::Request);
        assert!(
            self.released.replace((vc, beats)).is_none(),
            "one release per response"
        );
    }
}

/// One operation as the model knows it.
#[derive(Clone, Debug)]
pub struct OpRec {
    pub req: usize,
    pub id: OpId,
    pub kind: OpKind,
    pub dst: usize,
    pub vc: Vc,
    pub addr: u64,
    pub len: usize,
    pub data: Vec<u8>,
    pub enables: Option<Vec<u8>>,
    pub atomic: Option<Atomic>,
    pub cross: bool,
    pub hot: bool,
    pub pieces: usize,
    pub expected_read: Vec<u8>,
    pub expected_old: Option<u64>,
    pub piece_status: Vec<Status>,
    pub got: Vec<u8>,
    pub got_mask: Vec<bool>,
    pub completions: u32,
    pub result: Option<Result<Option<u64>, TxnError>>,
    /// Linked mode: the status the model expects (computed at submission).
    pub expected_status: Option<Status>,
}

impl OpRec {
    fn operation(&self) -> Operation<'_> {
        match self.kind {
            OpKind::Read => Operation::Read {
                addr: self.addr,
                len: self.len as u32,
            },
            OpKind::Write => Operation::Write {
                addr: self.addr,
                data: &self.data,
                enables: self.enables.as_deref(),
            },
            OpKind::WriteFull => Operation::WriteFull {
                addr: self.addr,
                data: &self.data,
            },
            OpKind::Message => Operation::Message {
                addr: self.addr,
                data: &self.data,
            },
            OpKind::AtomicR | OpKind::AtomicNR => Operation::Atomic {
                addr: self.addr,
                atomic: self.atomic.expect("an atomic"),
                returning: self.kind == OpKind::AtomicR,
            },
        }
    }

    fn enabled(&self, k: usize) -> bool {
        self.enables
            .as_ref()
            .is_none_or(|e| e[k / 8] & (1 << (k % 8)) != 0)
    }
}

/// Number of 64 B-aligned pieces (split at 256 B) covering a range.
pub fn piece_count(addr: u64, len: u64) -> usize {
    let start = addr & !63;
    let end = (addr + len + 63) & !63;
    let mut p = start;
    let mut n = 0;
    while p < end {
        p = ((p / 256 + 1) * 256).min(end);
        n += 1;
    }
    n
}

pub fn accel_of_requester(i: usize) -> AccelId {
    AccelId::new(1 + i as u16).unwrap()
}
pub fn accel_of_completer(j: usize) -> AccelId {
    AccelId::new(512 + j as u16).unwrap()
}
pub fn partition_of_requester(cfg: &ModelConfig, i: usize) -> PartitionId {
    PartitionId::new((i % cfg.partitions.max(1)) as u16).unwrap()
}
pub fn partition_of_completer(cfg: &ModelConfig, j: usize) -> PartitionId {
    PartitionId::new((j % cfg.partitions.max(1)) as u16).unwrap()
}

/// The partition table every completer uses.
pub fn partition_table(cfg: &ModelConfig) -> PartitionTable {
    let mut t = PartitionTable::empty();
    for i in 0..cfg.requesters {
        t.set(accel_of_requester(i), Some(partition_of_requester(cfg, i)));
    }
    t
}

/// The model: operations, reference memories and the checks that need history.
pub struct Model {
    pub cfg: ModelConfig,
    pub rng: Rng,
    pub ops: Vec<OpRec>,
    pub index: HashMap<(usize, OpId), usize>,
    pub ref_mem: Vec<Vec<u8>>,
    /// Per requester and completer: the next compare value for the hot CAS.
    cas_guess: Vec<Vec<u64>>,
    /// (source, destination, VC, region) → last op id seen arriving.
    last_in_region: HashMap<(usize, usize, u8, u64), OpId>,
    /// Per requester: last op id emitted (strict mode).
    last_emitted: Vec<Option<OpId>>,
    /// (requester, tag) → op, recorded when the request leaves.
    emitted: HashMap<(usize, u16), OpId>,
    pub report: Report,
}

impl Model {
    pub fn new(cfg: ModelConfig) -> Self {
        Model {
            rng: Rng::new(cfg.seed),
            ops: Vec::new(),
            index: HashMap::new(),
            ref_mem: vec![vec![0; MEM]; cfg.completers],
            cas_guess: vec![vec![0; cfg.completers]; cfg.requesters],
            last_in_region: HashMap::new(),
            last_emitted: vec![None; cfg.requesters],
            emitted: HashMap::new(),
            report: Report::default(),
            cfg,
        }
    }

    /// A random operation for requester `req` (not yet submitted: `id` is filled later).
    pub fn generate(&mut self, req: usize) -> OpRec {
        self.generate_in(req, None)
    }

    /// A random operation; with `window` = (lo, hi, mapped end) every non-hot address lies in
    /// `lo..hi`, and unmapped operations lie wholly beyond the mapped end.
    pub fn generate_in(&mut self, req: usize, window: Option<(u64, u64, u64)>) -> OpRec {
        let cfg = &self.cfg;
        let rng = &mut self.rng;
        let mine: Vec<usize> = (0..cfg.completers)
            .filter(|&j| partition_of_completer(cfg, j) == partition_of_requester(cfg, req))
            .collect();
        let dst = if mine.is_empty() || rng.chance(cfg.any_destination) {
            rng.below(cfg.completers as u64) as usize
        } else {
            mine[rng.below(mine.len() as u64) as usize]
        };
        let vc = Vc::new(rng.below(4) as u8).unwrap();
        let unmapped = rng.chance(0.03);
        let span = |rng: &mut Rng, max_len: u64| -> u64 {
            match (window, unmapped) {
                (Some((_, _, end)), true) => end + rng.below(4096),
                (Some((lo, hi, _)), false) => lo + rng.below(hi - lo - max_len),
                (None, true) => MEM as u64 - 128 + rng.below(512),
                (None, false) => 64 + rng.below(MEM as u64 - 64 - max_len),
            }
        };
        let mut rec = OpRec {
            req,
            id: OpId(0),
            kind: OpKind::Read,
            dst,
            vc,
            addr: 0,
            len: 0,
            data: Vec::new(),
            enables: None,
            atomic: None,
            cross: partition_of_completer(cfg, dst) != partition_of_requester(cfg, req),
            hot: false,
            pieces: 1,
            expected_read: Vec::new(),
            expected_old: None,
            piece_status: Vec::new(),
            got: Vec::new(),
            got_mask: Vec::new(),
            completions: 0,
            result: None,
            expected_status: None,
        };
        match rng.below(100) {
            0..=21 => {
                rec.kind = OpKind::Read;
                rec.len = 1 + rng.below(600) as usize;
                rec.addr = span(rng, 700);
            }
            22..=39 => {
                rec.kind = OpKind::Write;
                rec.len = 1 + rng.below(600) as usize;
                rec.addr = span(rng, 700);
                if rng.chance(0.4) {
                    rec.enables = Some(
                        (0..rec.len.div_ceil(8))
                            .map(|_| rng.next_u64() as u8)
                            .collect(),
                    );
                }
            }
            40..=49 => {
                rec.kind = OpKind::WriteFull;
                rec.len = 64 * (1 + rng.below(8) as usize);
                rec.addr = span(rng, 700) & !63;
            }
            50..=55 => {
                rec.kind = OpKind::Message;
                let off = 64 * rng.below(4);
                rec.len = 64 * (1 + rng.below(4 - off / 64) as usize);
                rec.addr = ((span(rng, 700) + 255) & !255) + off;
            }
            56..=85 => {
                let size = if rng.chance(0.5) {
                    AtomicSize::Four
                } else {
                    AtomicSize::Eight
                };
                let op = AtomicOp::ALL[rng.below(10) as usize];
                let small = |rng: &mut Rng| {
                    if rng.chance(0.5) {
                        rng.below(16)
                    } else {
                        rng.next_u64()
                    }
                };
                rec.atomic = Some(Atomic {
                    op,
                    size,
                    operand: small(rng),
                    compare: small(rng),
                });
                rec.kind = if rng.chance(0.6) {
                    OpKind::AtomicR
                } else {
                    OpKind::AtomicNR
                };
                rec.len = size.bytes();
                let align = rec.atomic.unwrap().operand_bytes() as u64;
                rec.addr = span(rng, 64) & !(align - 1);
            }
            86..=93 => {
                rec.hot = true;
                rec.kind = if rng.chance(0.5) {
                    OpKind::AtomicR
                } else {
                    OpKind::AtomicNR
                };
                rec.atomic = Some(Atomic {
                    op: AtomicOp::FetchAdd,
                    size: AtomicSize::Eight,
                    operand: 1 + rng.below(1000),
                    compare: 0,
                });
                rec.len = 8;
                rec.addr = HOT_ADD;
            }
            _ => {
                rec.hot = true;
                rec.kind = OpKind::AtomicR;
                let guess = self.cas_guess[req][dst];
                rec.atomic = Some(Atomic {
                    op: AtomicOp::CompareSwap,
                    size: AtomicSize::Eight,
                    operand: guess + 1,
                    compare: guess,
                });
                rec.len = 8;
                rec.addr = HOT_CAS;
            }
        }
        if matches!(
            rec.kind,
            OpKind::Write | OpKind::WriteFull | OpKind::Message
        ) {
            rec.data = (0..rec.len).map(|_| rng.next_u64() as u8).collect();
        }
        rec.pieces = if rec.atomic.is_some() {
            1
        } else {
            piece_count(rec.addr, rec.len as u64)
        };
        rec.expected_read = vec![0; if rec.kind == OpKind::Read { rec.len } else { 0 }];
        rec.got = rec.expected_read.clone();
        rec.got_mask = vec![false; rec.got.len()];
        rec
    }

    /// Submit `rec` to `r`; on success the model tracks it.
    pub fn submit(&mut self, now: Instant, r: &mut Req, rec: &OpRec) -> Result<(), SubmitError> {
        let request = Request {
            dst: accel_of_completer(rec.dst),
            vc: rec.vc,
            op: rec.operation(),
        };
        let id = r.submit(now, &request)?;
        let mut rec = rec.clone();
        rec.id = id;
        self.index.insert((rec.req, id), self.ops.len());
        self.ops.push(rec);
        self.report.ops += 1;
        Ok(())
    }

    /// Requester `req` sent `item`.
    pub fn on_emit(&mut self, req: usize, r: &Req, item: &TlTransfer<'_>) {
        if let Err(e) = item.check() {
            self.report
                .mismatch(format!("requester {req} sent a malformed transfer: {e}"));
        }
        let q = match item.field {
            TlField::UncompressedRequest(q) => EmitTag { tag: q.tag },
            TlField::CompressedRequest(q) => EmitTag { tag: q.tag },
            f => {
                self.report
                    .mismatch(format!("requester {req} sent a non-request {f:?}"));
                return;
            }
        };
        let Some(id) = r.in_flight_op(q.tag) else {
            self.report
                .mismatch(format!("requester {req}: tag {} not in flight", q.tag));
            return;
        };
        self.emitted.insert((req, q.tag.get()), id);
        if self.cfg.ordering == OrderingMode::Strict {
            if let Some(last) = self.last_emitted[req] {
                if id < last {
                    self.report
                        .mismatch(format!("strict order broken: op {id:?} after {last:?}"));
                }
            }
            self.last_emitted[req] = Some(id);
        }
    }

    /// Completer `cpl` accepted `item` (the real completer has executed it); `q` is the
    /// request expanded from the field.
    pub fn on_execute(&mut self, cpl: usize, q: &podlink_protocol::wire::TlUncompressedRequest) {
        let req = usize::from(q.srcaccid.get()) - 1;
        let Some(&id) = self.emitted.get(&(req, q.tag.get())) else {
            self.report.mismatch(format!(
                "completer {cpl}: request with unknown tag {}",
                q.tag
            ));
            return;
        };
        let Some(&k) = self.index.get(&(req, id)) else {
            return;
        };
        let paddr = q.addr << 2;
        let key = (req, cpl, q.vchan.get(), paddr / 256);
        if let Some(&last) = self.last_in_region.get(&key) {
            if id < last {
                self.report.mismatch(format!(
                    "region order broken at {key:?}: op {id:?} after {last:?}"
                ));
            }
        }
        self.last_in_region.insert(key, id);
        let beats = u64::from(q.numbeats) + 1;
        let mem = &mut self.ref_mem[cpl];
        let rec = &mut self.ops[k];
        let status = if rec.cross {
            Status::PARTITION_DENIED
        } else if let Some(a) = rec.atomic {
            let n = a.size.bytes();
            let at = rec.addr as usize;
            if at + n > MEM {
                Status::ADDRESS_NOT_MAPPED
            } else {
                let mut b = [0u8; 8];
                b[..n].copy_from_slice(&mem[at..at + n]);
                let old = u64::from_le_bytes(b);
                mem[at..at + n].copy_from_slice(&a.apply(old).to_le_bytes()[..n]);
                rec.expected_old = Some(old);
                Status::OK
            }
        } else {
            let (lo, hi) = (paddr as usize, (paddr + beats * 64) as usize);
            if hi > MEM {
                Status::ADDRESS_NOT_MAPPED
            } else {
                let (a, e) = (rec.addr as usize, rec.addr as usize + rec.len);
                for b in lo.max(a)..hi.min(e) {
                    let kk = b - a;
                    match rec.kind {
                        OpKind::Read => rec.expected_read[kk] = mem[b],
                        OpKind::Write => {
                            if rec.enabled(kk) {
                                mem[b] = rec.data[kk];
                            }
                        }
                        _ => mem[b] = rec.data[kk],
                    }
                }
                Status::OK
            }
        };
        rec.piece_status.push(status);
    }

    /// Read data for requester `req`'s operation `id`.
    pub fn on_read_data(&mut self, req: usize, id: OpId, offset: u32, data: &[u8]) {
        let Some(&k) = self.index.get(&(req, id)) else {
            self.report
                .mismatch(format!("read data for unknown op {id:?}"));
            return;
        };
        let rec = &mut self.ops[k];
        if rec.cross {
            self.report.cross_partition_leaks += 1;
        }
        let off = offset as usize;
        if off + data.len() > rec.got.len() {
            self.report.mismatch(format!("read data beyond op {id:?}"));
            return;
        }
        rec.got[off..off + data.len()].copy_from_slice(data);
        for m in &mut rec.got_mask[off..off + data.len()] {
            *m = true;
        }
    }

    /// Requester `req` completed operation `id`.
    pub fn on_complete(&mut self, req: usize, id: OpId, result: Result<Option<u64>, TxnError>) {
        let Some(&k) = self.index.get(&(req, id)) else {
            self.report
                .mismatch(format!("completion of unknown op {id:?}"));
            return;
        };
        let rec = &mut self.ops[k];
        rec.completions += 1;
        if rec.completions > 1 {
            self.report.duplicated += 1;
            return;
        }
        self.report.completed += 1;
        rec.result = Some(result);
        if rec.kind == OpKind::AtomicR && rec.hot {
            if let (Ok(Some(old)), Some(a)) = (result, rec.atomic) {
                if a.op == AtomicOp::CompareSwap {
                    self.cas_guess[req][rec.dst] = if old == a.compare { old + 1 } else { old };
                }
            }
        }
        let rec = &self.ops[k];
        let bad = match result {
            Err(TxnError::Timeout) => {
                self.report.timeouts += 1;
                None
            }
            Err(TxnError::Status(Status::PARTITION_DENIED)) if rec.cross => {
                self.report.partition_denied += 1;
                None
            }
            Err(TxnError::Status(s)) if !rec.cross && rec.piece_status.contains(&s) => None,
            Err(e) => Some(format!("unexpected error {e}")),
            Ok(_) if rec.cross => {
                self.report.cross_partition_leaks += 1;
                Some("a cross-partition operation succeeded".into())
            }
            Ok(_)
                if rec.piece_status.len() != rec.pieces
                    || rec.piece_status.iter().any(|s| !s.is_ok()) =>
            {
                Some(format!(
                    "Ok, but pieces executed {:?} of {}",
                    rec.piece_status, rec.pieces
                ))
            }
            Ok(v) => match rec.kind {
                OpKind::Read if rec.got_mask.iter().any(|m| !m) => {
                    Some("read bytes missing".into())
                }
                OpKind::Read if rec.got != rec.expected_read => Some("read data differs".into()),
                OpKind::AtomicR if v != rec.expected_old => {
                    Some(format!("atomic old {v:?}, model {:?}", rec.expected_old))
                }
                OpKind::AtomicR | OpKind::Read => None,
                _ if v.is_some() => Some("a value from a non-returning op".into()),
                _ => None,
            },
        };
        if let Some(b) = bad {
            let what = format!(
                "req {req} op {id:?} {:?} dst {} addr {:#x} len {}: {b}",
                rec.kind, rec.dst, rec.addr, rec.len
            );
            self.report.mismatch(what);
        }
    }

    /// The final checks: memory, fetch-add sums, CAS winners, lost operations.
    pub fn finish(&mut self, mems: &[&[u8]]) {
        for (j, m) in mems.iter().enumerate() {
            if *m != &self.ref_mem[j][..] {
                let first = m.iter().zip(&self.ref_mem[j]).position(|(a, b)| a != b);
                self.report.mismatch(format!(
                    "completer {j}: memory differs from the model at {first:?}"
                ));
            }
            let le = |at: usize| u64::from_le_bytes(m[at..at + 8].try_into().unwrap());
            let hot = self.ops.iter().filter(|o| o.dst == j && o.hot);
            let mut sum = 0u64;
            let mut uncertain = false;
            let mut winners = BTreeMap::new();
            for o in hot {
                let a = o.atomic.unwrap();
                match (a.op, o.result) {
                    (_, Some(Err(TxnError::Timeout)) | None) => uncertain = true,
                    (AtomicOp::FetchAdd, Some(Ok(_))) => sum += a.operand,
                    (AtomicOp::CompareSwap, Some(Ok(Some(old)))) if old == a.compare => {
                        *winners.entry(a.compare).or_insert(0) += 1;
                    }
                    _ => {}
                }
            }
            if !uncertain && le(HOT_ADD as usize) != sum {
                self.report.mismatch(format!(
                    "completer {j}: fetch-adds sum to {sum}, memory holds {}",
                    le(0)
                ));
            }
            if winners.values().any(|&n| n > 1) {
                self.report
                    .mismatch(format!("completer {j}: CAS winners not unique {winners:?}"));
            }
            if !uncertain && le(HOT_CAS as usize) != winners.len() as u64 {
                self.report.mismatch(format!(
                    "completer {j}: {} CAS winners, counter {}",
                    winners.len(),
                    le(HOT_CAS as usize)
                ));
            }
        }
        self.report.lost = self.ops.iter().filter(|o| o.completions == 0).count() as u64;
    }
}

struct EmitTag {
    tag: Tag,
}

/// A requester and its bookkeeping in the harness.
pub struct Side {
    pub req: Box<Req>,
    pub pending: Option<OpRec>,
    pub submitted: usize,
    pub credits: CreditLoop,
}

/// One direction between a requester and a completer.
pub struct Pipe {
    transport: Transport,
    /// Direct: a FIFO per VC.
    fifos: [VecDeque<TransferBuf>; 4],
    /// Packed: transfers waiting for room in the packer.
    staged: VecDeque<TransferBuf>,
    packer: Box<TlPacker>,
    flits: VecDeque<[u8; FLIT_LEN]>,
    unpacker: Box<TlUnpacker>,
    /// Packed: transfers unpacked, in order.
    arrived: VecDeque<TransferBuf>,
    pub flits_sent: u64,
}

impl Pipe {
    pub fn new(transport: Transport) -> Self {
        Pipe {
            transport,
            fifos: Default::default(),
            staged: VecDeque::new(),
            packer: Box::new(TlPacker::new()),
            flits: VecDeque::new(),
            unpacker: Box::new(TlUnpacker::new()),
            arrived: VecDeque::new(),
            flits_sent: 0,
        }
    }

    pub fn send(&mut self, t: &TlTransfer<'_>) {
        let b = TransferBuf::new(t);
        match self.transport {
            Transport::Direct => {
                let vc = match t.field {
                    TlField::UncompressedRequest(q) => q.vchan,
                    TlField::CompressedRequest(q) => q.vchan,
                    TlField::UncompressedResponse(r) => r.vchan,
                    TlField::CompressedReadResponse(r) => r.vchan,
                    TlField::CompressedWriteResponse(r) => r.vchan,
                    TlField::FlowControl(_) => Vc::default(),
                };
                self.fifos[usize::from(vc.get())].push_back(b);
            }
            Transport::Packed => {
                self.staged.push_back(b);
                self.pump();
            }
        }
    }

    /// Packed: move staged transfers into the packer and flits out of it.
    fn pump(&mut self) {
        while let Some(b) = self.staged.front() {
            match self.packer.push(&TlItem::Transfer(b.as_transfer())) {
                Ok(()) => {
                    self.staged.pop_front();
                }
                Err(TlPushError::Full) => {
                    let mut flit = [0u8; FLIT_LEN];
                    if self.packer.poll_flit(&mut flit).is_none() {
                        break;
                    }
                    self.flits.push_back(flit);
                    self.flits_sent += 1;
                }
                Err(e) => panic!("the packer refused a transfer: {e} {:?}", b.field),
            }
        }
        let mut flit = [0u8; FLIT_LEN];
        while self.packer.poll_flit(&mut flit).is_some() {
            self.flits.push_back(flit);
            self.flits_sent += 1;
        }
    }

    /// Queues (by index) holding something deliverable now.
    fn ready(&mut self) -> Vec<usize> {
        match self.transport {
            Transport::Direct => (0..4).filter(|&v| !self.fifos[v].is_empty()).collect(),
            Transport::Packed => {
                if self.arrived.is_empty() {
                    if let Some(flit) = self.flits.pop_front() {
                        let arrived = &mut self.arrived;
                        self.unpacker
                            .unpack_flit(&flit, |item| {
                                if let TlItem::Transfer(t) = item {
                                    arrived.push_back(TransferBuf::new(&t));
                                }
                            })
                            .expect("the unpacker accepts the packer's flits");
                    }
                }
                if self.arrived.is_empty() {
                    vec![]
                } else {
                    vec![0]
                }
            }
        }
    }

    fn queue(&mut self, which: usize) -> &mut VecDeque<TransferBuf> {
        match self.transport {
            Transport::Direct => &mut self.fifos[which],
            Transport::Packed => &mut self.arrived,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.fifos.iter().all(VecDeque::is_empty)
            && self.staged.is_empty()
            && self.flits.is_empty()
            && self.arrived.is_empty()
            && self.packer.is_idle()
    }
}

/// Run the model over a lossless connection (direct FIFOs or TL packer and unpacker).
pub fn run_direct(cfg: ModelConfig) -> Report {
    let mut model = Model::new(cfg.clone());
    let mut sides: Vec<Side> = (0..cfg.requesters)
        .map(|i| {
            let mut c = RequesterConfig::new(accel_of_requester(i));
            c.partition = partition_of_requester(&cfg, i);
            c.ordering = cfg.ordering;
            c.request_timeout = Duration::from_ms(10);
            c.queue_timeout = Duration::from_ms(10);
            c.compress_requests = cfg.compress;
            Side {
                req: Box::new(Req::new(c)),
                pending: None,
                submitted: 0,
                credits: CreditLoop::new(cfg.request_credits),
            }
        })
        .collect();
    let table = partition_table(&cfg);
    // An address cache pairs one encoder with one decoder (the two ends of a link), and a
    // requester here has one encoder for all completers: compress only with one completer.
    assert!(!cfg.compress || (cfg.completers == 1 && cfg.transport == Transport::Packed));
    let mut cpls: Vec<(Box<Cpl>, Box<Mem>, CreditLoop)> = (0..cfg.completers)
        .map(|j| {
            let mut c = CompleterConfig::new(accel_of_completer(j));
            c.partition = partition_of_completer(&cfg, j);
            c.beats_per_response = cfg.beats_per_response;
            c.compress_responses = cfg.compress;
            (
                Box::new(Cpl::new(c, table.clone())),
                Box::new(Mem::new(0)),
                CreditLoop::new(cfg.response_credits),
            )
        })
        .collect();
    let mut to_cpl: Vec<Vec<Pipe>> = (0..cfg.requesters)
        .map(|_| {
            (0..cfg.completers)
                .map(|_| Pipe::new(cfg.transport))
                .collect()
        })
        .collect();
    let mut to_req: Vec<Vec<Pipe>> = (0..cfg.completers)
        .map(|_| {
            (0..cfg.requesters)
                .map(|_| Pipe::new(cfg.transport))
                .collect()
        })
        .collect();
    let mut decoders: Vec<podlink_protocol::wire::AddrCache> =
        vec![podlink_protocol::wire::AddrCache::new(); cfg.requesters * cfg.completers];
    let mut releases = 0u64;
    let mut delivered = 0u64;
    let mut now = Instant::ZERO;
    let total = cfg.ops;
    let limit = 50_000 + 200 * total;
    for _step in 0..limit {
        // Submit.
        for (i, s) in sides.iter_mut().enumerate() {
            while s.submitted < cfg.quota(i) && s.req.ops_open() < cfg.max_open {
                let rec = match s.pending.take() {
                    Some(r) => r,
                    None => model.generate(i),
                };
                match model.submit(now, &mut s.req, &rec) {
                    Ok(()) => s.submitted += 1,
                    Err(SubmitError::QueueFull { .. } | SubmitError::OpTableFull) => {
                        s.pending = Some(rec);
                        break;
                    }
                    Err(e) => panic!("generator made an invalid op {rec:?}: {e}"),
                }
            }
        }
        // Requests out.
        for (i, s) in sides.iter_mut().enumerate() {
            for _ in 0..4 {
                let Some(t) = s.req.poll_transmit(now, &mut s.credits) else {
                    break;
                };
                let b = TransferBuf::new(&t);
                model.on_emit(i, &s.req, &b.as_transfer());
                if matches!(b.field, TlField::CompressedRequest(_)) {
                    model.report.compressed += 1;
                }
                let dst = match b.field {
                    TlField::UncompressedRequest(q) => q.dstaccid,
                    TlField::CompressedRequest(q) => q.dstaccid,
                    _ => break,
                };
                let j = usize::from(dst.get()) - 512;
                to_cpl[i][j].send(&b.as_transfer());
            }
        }
        // Responses out.
        for (j, (c, _, credits)) in cpls.iter_mut().enumerate() {
            for _ in 0..4 {
                let mut gate = CplGate {
                    tx: credits,
                    released: None,
                };
                let Some(t) = c.poll_transmit(now, &mut gate) else {
                    break;
                };
                if let Err(e) = t.check() {
                    model
                        .report
                        .mismatch(format!("completer {j} sent a malformed transfer: {e}"));
                }
                let dst = match t.field {
                    TlField::UncompressedResponse(r) => r.dstaccid,
                    TlField::CompressedReadResponse(r) => r.dstaccid,
                    TlField::CompressedWriteResponse(r) => r.dstaccid,
                    _ => break,
                };
                if !matches!(t.field, TlField::UncompressedResponse(_)) {
                    model.report.compressed += 1;
                }
                let i = usize::from(dst.get()) - 1;
                to_req[j][i].send(&t);
                if let Some((vc, beats)) = gate.released {
                    sides[i].credits.give(vc, beats);
                    releases += 1;
                }
            }
        }
        // Deliver a random selection.
        for _ in 0..8 {
            let mut keys: Vec<(bool, usize, usize, usize)> = Vec::new();
            for (i, row) in to_cpl.iter_mut().enumerate() {
                for (j, p) in row.iter_mut().enumerate() {
                    keys.extend(p.ready().into_iter().map(|q| (true, i, j, q)));
                }
            }
            for (j, row) in to_req.iter_mut().enumerate() {
                for (i, p) in row.iter_mut().enumerate() {
                    keys.extend(p.ready().into_iter().map(|q| (false, i, j, q)));
                }
            }
            if keys.is_empty() {
                break;
            }
            let (is_req, i, j, qi) = keys[model.rng.below(keys.len() as u64) as usize];
            if is_req {
                let q = to_cpl[i][j].queue(qi);
                let it = q.front().unwrap().clone();
                let (c, mem, _) = &mut cpls[j];
                let mut back = ReturnTo(&mut sides[i].credits, &mut releases);
                if c.handle_request(now, &it.as_transfer(), mem.as_mut(), &mut back)
                    .is_ok()
                {
                    to_cpl[i][j].queue(qi).pop_front();
                    delivered += 1;
                    // The harness's own decoder mirrors the completer's address cache.
                    let d = &mut decoders[i * cfg.completers + j];
                    match d.decode_request(&it.field) {
                        Ok(q) => model.on_execute(j, &q),
                        Err(e) => model.report.mismatch(format!("undecodable request: {e}")),
                    }
                }
            } else {
                let it = to_req[j][i].queue(qi).pop_front().unwrap();
                delivered += 1;
                let mut back = ReturnTo(&mut cpls[j].2, &mut releases);
                if let Some(d) = sides[i]
                    .req
                    .handle_response(now, &it.as_transfer(), &mut back)
                {
                    let (id, off) = (d.op, d.offset);
                    model.on_read_data(i, id, off, d.data);
                }
            }
        }
        // Completions and timers.
        for (i, s) in sides.iter_mut().enumerate() {
            while let Some(c) = s.req.poll_completion() {
                model.on_complete(i, c.id, c.result);
            }
            while s.req.poll_event().is_some() {}
            if s.req.poll_timeout().is_some_and(|t| t <= now) {
                s.req.handle_timeout(now);
            }
        }
        now += Duration::from_ns(10);
        let idle = sides
            .iter()
            .enumerate()
            .all(|(i, s)| s.submitted == cfg.quota(i) && s.req.ops_open() == 0)
            && to_cpl.iter().flatten().all(Pipe::is_empty)
            && to_req.iter().flatten().all(Pipe::is_empty)
            && cpls.iter().all(|c| c.0.pending() == 0);
        if idle {
            break;
        }
    }
    if releases != delivered {
        model.report.mismatch(format!(
            "{delivered} transfers delivered but {releases} credit releases"
        ));
    }
    for s in &sides {
        let st = s.req.stats();
        if st.responses_dropped != 0 {
            model
                .report
                .mismatch(format!("requester dropped responses: {st:?}"));
        }
    }
    model.report.flits = to_cpl
        .iter()
        .chain(&to_req)
        .flatten()
        .map(|p| p.flits_sent)
        .sum();
    let mems: Vec<&[u8]> = cpls.iter().map(|c| &c.1.bytes()[..]).collect();
    model.finish(&mems);
    model.report
}

/// Keep a few names used only by some includers.
pub fn _unused(_: Tag, _: Opcode, _: &mut dyn MemoryTarget) {}

// ---------------------------------------------------------------------------------------------
// Linked mode: endpoints over lossy links.

use core::cell::RefCell;
use podlink_protocol::phy::{FaultConfig, FaultInjector, Probability, Wire};
use podlink_protocol::retry::FLIT_LEN as DL_FLIT_LEN;
use podlink_protocol::testing::{LinkPair, PairConfig};
use podlink_protocol::txn::{
    ByteEnables, Endpoint, EndpointConfig, ReadData, ReadSink, TargetError,
};
use std::rc::Rc;

/// Bytes of each requester's private window on each completer.
pub const WINDOW: u64 = 2048;
/// The first window starts here (below: the hot counters).
pub const WINDOW_BASE: u64 = 256;

/// A completer's memory, shared by all its ports.
#[derive(Clone)]
pub struct SharedMem(pub Rc<RefCell<Vec<u8>>>);

impl SharedMem {
    fn range(&self, addr: u64, len: usize) -> Result<core::ops::Range<usize>, TargetError> {
        let a = usize::try_from(addr).map_err(|_| TargetError::NotMapped)?;
        let end = a.checked_add(len).ok_or(TargetError::NotMapped)?;
        if end > self.0.borrow().len() {
            return Err(TargetError::NotMapped);
        }
        Ok(a..end)
    }
}

impl MemoryTarget for SharedMem {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        let r = self.range(addr, buf.len())?;
        buf.copy_from_slice(&self.0.borrow()[r]);
        Ok(())
    }
    fn write(&mut self, addr: u64, data: &[u8], en: &ByteEnables) -> Result<(), TargetError> {
        let r = self.range(addr, data.len())?;
        let mut m = self.0.borrow_mut();
        for (i, (d, s)) in m[r].iter_mut().zip(data).enumerate() {
            if en.get(i) {
                *d = *s;
            }
        }
        Ok(())
    }
}

impl ReadSink for SharedMem {
    fn read_data(&mut self, _: ReadData<'_>) {}
}

/// A requester port's host: serves no memory, collects read data.
#[derive(Default)]
pub struct Collector {
    pub reads: Vec<(OpId, u32, Vec<u8>)>,
}

impl MemoryTarget for Collector {
    fn read(&mut self, _: u64, _: &mut [u8]) -> Result<(), TargetError> {
        Err(TargetError::NotMapped)
    }
    fn write(&mut self, _: u64, _: &[u8], _: &ByteEnables) -> Result<(), TargetError> {
        Err(TargetError::NotMapped)
    }
}

impl ReadSink for Collector {
    fn read_data(&mut self, d: ReadData<'_>) {
        self.reads.push((d.op, d.offset, d.data.to_vec()));
    }
}

pub type ReqEnd = Endpoint<Collector, 64, 32, 64, 16, 128, 64>;
pub type CplEnd = Endpoint<SharedMem, 16, 4, 16, 32, 128, 64>;
pub type Pair = LinkPair<ReqEnd, CplEnd, 64, DL_FLIT_LEN>;

/// Link faults for a flit error rate: each DL flit is hit by a 16-bit burst with
/// probability `rate` (the lossy_link example's model).
pub fn faults(rate: f64) -> FaultConfig {
    FaultConfig {
        burst_rate: Probability::from_f64(rate),
        burst_len: 16,
        ..FaultConfig::default()
    }
}

/// One requester–completer link with its endpoints.
pub fn make_pair(cfg: &ModelConfig, i: usize, j: usize, mem: SharedMem, rate: f64) -> Box<Pair> {
    let mut rc = RequesterConfig::new(accel_of_requester(i));
    rc.partition = partition_of_requester(cfg, i);
    rc.ordering = cfg.ordering;
    rc.compress_requests = cfg.compress;
    let mut cc = CompleterConfig::new(accel_of_completer(j));
    cc.partition = partition_of_completer(cfg, j);
    cc.beats_per_response = cfg.beats_per_response;
    cc.compress_responses = cfg.compress;
    let mut a_cfg = EndpointConfig::new(rc, CompleterConfig::new(accel_of_requester(i)));
    a_cfg.partitions = PartitionTable::empty();
    let mut b_cfg = EndpointConfig::new(RequesterConfig::new(accel_of_completer(j)), cc);
    b_cfg.partitions = partition_table(cfg);
    let seed = cfg.seed ^ ((i as u64) << 32 | j as u64).wrapping_mul(0x9e37_79b9);
    let wire = |s: u64| Wire::new(FaultInjector::new(faults(rate), s), Duration::from_ns(100));
    let mut p = Box::new(LinkPair::new(
        Endpoint::new(a_cfg, Collector::default()),
        Endpoint::new(b_cfg, mem),
        wire(seed),
        wire(seed.wrapping_mul(31).wrapping_add(7)),
        PairConfig::default(),
    ));
    p.set_link(true);
    p
}

/// Run the model with every requester–completer pair on its own lossy link (flit error
/// rate `rate`). Each requester owns a private window on every completer, and each pair uses
/// one VC, so the results of plain operations follow from submission order; the hot counters
/// are shared and checked by sum and by unique CAS winners.
pub fn run_linked(cfg: ModelConfig, rate: f64) -> Report {
    // Endpoints and wires are large value types: build them on a roomy stack.
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || run_linked_here(cfg, rate))
        .expect("spawn")
        .join()
        .expect("the linked run panicked")
}

fn run_linked_here(cfg: ModelConfig, rate: f64) -> Report {
    let mut model = Model::new(cfg.clone());
    let mem_len = WINDOW_BASE + WINDOW * cfg.requesters as u64;
    model.ref_mem = vec![vec![0; mem_len as usize]; cfg.completers];
    let mems: Vec<SharedMem> = (0..cfg.completers)
        .map(|_| SharedMem(Rc::new(RefCell::new(vec![0; mem_len as usize]))))
        .collect();
    let mut pairs: Vec<Vec<Box<Pair>>> = (0..cfg.requesters)
        .map(|i| {
            (0..cfg.completers)
                .map(|j| make_pair(&cfg, i, j, mems[j].clone(), rate))
                .collect()
        })
        .collect();
    // (pair, op id) → model index.
    let mut index: HashMap<(usize, usize, OpId), usize> = HashMap::new();
    let mut pending: Vec<Option<OpRec>> = vec![None; cfg.requesters];
    let mut submitted = vec![0usize; cfg.requesters];
    let mut t = Instant::ZERO;
    let slice = Duration::from_ns(200);
    let deadline = Instant::ZERO + Duration::from_ms(200);
    loop {
        for i in 0..cfg.requesters {
            let lo = WINDOW_BASE + WINDOW * i as u64;
            let window = Some((lo, lo + WINDOW, mem_len));
            while submitted[i] < cfg.quota(i) {
                let mut rec = match pending[i].take() {
                    Some(r) => r,
                    None => model.generate_in(i, window),
                };
                rec.vc = Vc::new(((i + rec.dst) % 4) as u8).unwrap();
                let p = &mut pairs[i][rec.dst];
                if p.a.requester().ops_open() >= cfg.max_open {
                    pending[i] = Some(rec);
                    break;
                }
                let now = p.now();
                let request = Request {
                    dst: accel_of_completer(rec.dst),
                    vc: rec.vc,
                    op: rec.operation(),
                };
                match p.a.submit(now, &request) {
                    Ok(id) => {
                        rec.id = id;
                        model.expect_sequential(&mut rec);
                        index.insert((i, rec.dst, id), model.ops.len());
                        model.ops.push(rec);
                        model.report.ops += 1;
                        submitted[i] += 1;
                        p.wake();
                    }
                    Err(SubmitError::QueueFull { .. } | SubmitError::OpTableFull) => {
                        pending[i] = Some(rec);
                        break;
                    }
                    Err(e) => panic!("generator made an invalid op {rec:?}: {e}"),
                }
            }
        }
        t += slice;
        let mut busy = false;
        for (i, row) in pairs.iter_mut().enumerate() {
            for (j, p) in row.iter_mut().enumerate() {
                p.drive(t);
                p.advance_to(t);
                for (id, off, data) in p.a.host_mut().reads.drain(..) {
                    if let Some(&k) = index.get(&(i, j, id)) {
                        let rec = &mut model.ops[k];
                        if rec.cross {
                            model.report.cross_partition_leaks += 1;
                        }
                        let o = off as usize;
                        if o + data.len() <= rec.got.len() {
                            rec.got[o..o + data.len()].copy_from_slice(&data);
                            rec.got_mask[o..o + data.len()]
                                .iter_mut()
                                .for_each(|m| *m = true);
                        }
                    }
                }
                while let Some(c) = p.a.poll_completion() {
                    match index.get(&(i, j, c.id)) {
                        Some(&k) => model.check_linked(k, c.result),
                        None => model.report.mismatch(format!("unknown completion {c:?}")),
                    }
                }
                while p.a.poll_event().is_some() {}
                while p.b.poll_event().is_some() {}
                busy |= !p.a.is_idle() || !p.b.is_idle();
            }
        }
        let all_in = (0..cfg.requesters).all(|i| submitted[i] == cfg.quota(i));
        if (all_in && !busy) || t > deadline {
            break;
        }
    }
    for row in &pairs {
        for p in row {
            model.report.link_errors +=
                p.a.link().retry().stats().crc_errors + p.b.link().retry().stats().crc_errors;
            let s = p.a.requester().stats();
            if s.responses_dropped != 0 {
                model
                    .report
                    .mismatch(format!("requester dropped responses: {s:?}"));
            }
            let (ea, eb) = (p.a.stats(), p.b.stats());
            if ea.overruns
                + eb.overruns
                + ea.busy_drops
                + eb.busy_drops
                + ea.packer_refusals
                + eb.packer_refusals
                != 0
            {
                model
                    .report
                    .mismatch(format!("endpoint trouble: {ea:?} {eb:?}"));
            }
            // Every request and response taken for a link was received whole at the other
            // end (the run drained, and a link that recovers loses nothing).
            let sent_a =
                p.a.requester().stats().requests_sent + p.a.completer().stats().responses_sent;
            let sent_b =
                p.b.requester().stats().requests_sent + p.b.completer().stats().responses_sent;
            if ea.transfers_sent != sent_a
                || eb.transfers_sent != sent_b
                || ea.transfers_sent != eb.transfers_received
                || eb.transfers_sent != ea.transfers_received
            {
                model.report.mismatch(format!(
                    "transfers sent {sent_a} / {sent_b}, counted {ea:?} {eb:?}"
                ));
            }
        }
    }
    let snapshot: Vec<Vec<u8>> = mems.iter().map(|m| m.0.borrow().clone()).collect();
    // The hot counters' order is not modelled here: they are checked by sum and CAS winners.
    for (r, m) in model.ref_mem.iter_mut().zip(&snapshot) {
        r[..WINDOW_BASE as usize].copy_from_slice(&m[..WINDOW_BASE as usize]);
    }
    let views: Vec<&[u8]> = snapshot.iter().map(|v| &v[..]).collect();
    model.finish(&views);
    model.report
}

impl Model {
    /// Linked mode: apply a private-window operation to the model at submission and record
    /// what it must return.
    fn expect_sequential(&mut self, rec: &mut OpRec) {
        let mem = &mut self.ref_mem[rec.dst];
        let end = rec.addr as usize + rec.len;
        if rec.cross {
            rec.expected_status = Some(Status::PARTITION_DENIED);
            return;
        }
        if end > mem.len() {
            rec.expected_status = Some(Status::ADDRESS_NOT_MAPPED);
            return;
        }
        rec.expected_status = Some(Status::OK);
        let a = rec.addr as usize;
        match rec.kind {
            OpKind::Read => rec.expected_read.copy_from_slice(&mem[a..end]),
            OpKind::Write => {
                for k in 0..rec.len {
                    if rec.enabled(k) {
                        mem[a + k] = rec.data[k];
                    }
                }
            }
            OpKind::WriteFull | OpKind::Message => mem[a..end].copy_from_slice(&rec.data),
            OpKind::AtomicR | OpKind::AtomicNR => {
                if !rec.hot {
                    let at = rec.atomic.unwrap();
                    let n = at.size.bytes();
                    let mut b = [0u8; 8];
                    b[..n].copy_from_slice(&mem[a..a + n]);
                    let old = u64::from_le_bytes(b);
                    mem[a..a + n].copy_from_slice(&at.apply(old).to_le_bytes()[..n]);
                    rec.expected_old = Some(old);
                }
            }
        }
    }

    /// Linked mode: check a completion against the sequential expectation.
    fn check_linked(&mut self, k: usize, result: Result<Option<u64>, TxnError>) {
        let rec = &mut self.ops[k];
        rec.completions += 1;
        if rec.completions > 1 {
            self.report.duplicated += 1;
            return;
        }
        self.report.completed += 1;
        rec.result = Some(result);
        let (req, dst) = (rec.req, rec.dst);
        if let (true, Some(a), Ok(Some(old))) = (rec.hot, rec.atomic, result) {
            if a.op == AtomicOp::CompareSwap {
                self.cas_guess[req][dst] = if old == a.compare { old + 1 } else { old };
            }
        }
        let rec = &self.ops[k];
        let want = rec.expected_status.unwrap_or(Status::OK);
        let bad = match result {
            Err(TxnError::Timeout) => {
                self.report.timeouts += 1;
                None
            }
            Err(TxnError::Status(s)) if s == want && !s.is_ok() => {
                if s == Status::PARTITION_DENIED {
                    self.report.partition_denied += 1;
                }
                None
            }
            Err(e) => Some(format!("error {e}, expected {want:?}")),
            Ok(_) if !want.is_ok() => {
                if rec.cross {
                    self.report.cross_partition_leaks += 1;
                }
                Some(format!("Ok, expected {want:?}"))
            }
            Ok(v) => match rec.kind {
                OpKind::Read if rec.got_mask.iter().any(|m| !m) => {
                    Some("read bytes missing".into())
                }
                OpKind::Read if rec.got != rec.expected_read => Some("read data differs".into()),
                OpKind::AtomicR if !rec.hot && v != rec.expected_old => {
                    Some(format!("atomic old {v:?}, model {:?}", rec.expected_old))
                }
                OpKind::AtomicR if v.is_none() => Some("no old value".into()),
                OpKind::AtomicR | OpKind::Read => None,
                _ if v.is_some() => Some("a value from a non-returning op".into()),
                _ => None,
            },
        };
        if let Some(b) = bad {
            let what = format!(
                "req {} op {:?} {:?} dst {} addr {:#x} len {}: {b}",
                rec.req, rec.id, rec.kind, rec.dst, rec.addr, rec.len
            );
            self.report.mismatch(what);
        }
    }
}
