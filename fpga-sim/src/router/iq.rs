//! The input-queued virtual-channel router.
//!
//! # Cycle contract
//!
//! Drive a router once per router cycle `now` (cycles count up by one; the router never reads
//! a clock), in three phases, like BookSim's `ReadInputs` / `Evaluate` / `WriteOutputs`:
//!
//! 1. **read**: [`IqRouter::handle_flit`] for each input that received a flit this cycle (at
//!    most one per input) and [`IqRouter::handle_credit`] for each output that received a
//!    credit;
//! 2. **evaluate**: [`IqRouter::step`], which runs `internal_speedup` internal steps of the
//!    pipeline (input queuing, route, VC allocation, switch allocation, crossbar);
//! 3. **write**: [`IqRouter::poll_flits`] and [`IqRouter::poll_credits`], which hand out at
//!    most one flit per output and one credit per input.
//!
//! A router with nothing in flight reports [`IqRouter::is_idle`]; it may then be left alone
//! (no step, no poll) until a flit or credit arrives.
//!
//! # Pipeline
//!
//! Each stage keeps a FIFO of VCs; a stage first *evaluates* the VCs that joined it since its
//! last evaluation (stamping them with the cycle they finish, `now + delay - 1`), then
//! *updates* the VCs whose stamp has come. All evaluations of a step run before all updates,
//! so a head flit spends at least one step per stage: buffer write + route (`routing_delay`),
//! VC allocation (`vc_alloc_delay`), switch allocation (`sw_alloc_delay`), crossbar
//! (`st_prepare_delay + st_final_delay`), then the output queue. With `speculative`, a head
//! bids for the switch during VC allocation at a priority below every non-speculative bid.
//! A stage with a delay above one works in batches: VCs that join while a batch is in flight
//! wait for it to finish (BookSim's behaviour).

use super::alloc::{SwitchAllocator, TableAllocator};
use super::buffer_state::BufferState;
use super::config::{AllocatorKind, RouterConfig, RouterConfigError};
use super::flit::{Credit, Flit, Route};
use super::ring::{PortQueues, Ring};
use super::RouterError;

/// Decides where head flits go.
pub trait RoutingFunction {
    /// The route of head flit `flit`, which arrived at input `in_port` of router `router`.
    /// The port must be below the router's output count and the VC range within its VCs.
    fn route(&mut self, router: u32, in_port: usize, flit: &Flit) -> Route;

    /// Lookahead routing (`routing_delay == 0`): the route `flit` will take at the router
    /// behind output `out_port` of router `router`, or `None` when that output leaves the
    /// network. Called when the head flit crosses the switch.
    fn lookahead(&mut self, router: u32, out_port: usize, flit: &Flit) -> Option<Route> {
        let _ = (router, out_port, flit);
        None
    }

    /// A random integer from 0 to `max` inclusive (BookSim's `RandomInt`) from the generator
    /// the routes draw from: the `pim` allocator draws its arbiters' starts here, in the
    /// order BookSim does (allocation is evaluated before the step's routes are computed).
    /// Routers that do not use `pim` never call it.
    fn random_int(&mut self, max: u32) -> u32 {
        let _ = max;
        0
    }

    /// [`route`](Self::route) for a router whose downstream buffers hold `used(o)` flits
    /// behind output `o` (BookSim's `GetUsedCredit`), which adaptive routing functions read.
    fn route_reading(
        &mut self,
        router: u32,
        in_port: usize,
        flit: &Flit,
        used: &dyn Fn(usize) -> u32,
    ) -> Route {
        let _ = used;
        self.route(router, in_port, flit)
    }
}

/// Stage result: not decided yet, or (switch allocation) lost to misspeculation.
const UNDECIDED: i32 = -1;
/// Stage result: stalled (busy VC, full buffer, lost arbitration).
const STALL: i32 = -2;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum VcState {
    Idle,
    Routing,
    VcAlloc,
    Active,
}

/// Everything the pipeline keeps per input VC, in one 36-byte record: one lookup per VC and
/// stage.
#[derive(Clone, Copy)]
struct InputVc {
    route: Route,
    out_port: u16,
    out_vc: u8,
    state: VcState,
    /// Buffer slot of the front flit, and flits buffered.
    head: u16,
    len: u16,
    /// VC allocation: round-robin pointer over output VCs, and this step's grant
    /// (`port << 6 | vc`, or `NONE`).
    va_in_ptr: u32,
    va_grant: u32,
    /// Expanded switch input (`input * input_speedup + vc % input_speedup`).
    exp_in: u32,
    input: u16,
    vc: u8,
    /// This input's slice of each output's expanded ports (`input % output_speedup`, which
    /// is at most the input number).
    out_off: u16,
    /// Priority of the head flit while the VC is in VC allocation (it stays at the front).
    head_pri: u16,
}

/// VC allocation per output VC: the round-robin pointer over input VCs, this step's best
/// bid as a key (`NO_BID`: none; see [`bid_key`]), and the grant it stands for
/// (`port << 6 | vc`).
#[derive(Clone, Copy)]
struct OutputVc {
    key: u64,
    ptr: u32,
    packed: u32,
}

const NO_BID: u64 = u64::MAX;

/// Output-stage arbitration as a minimum: higher priority first, then the bidder nearest
/// the round-robin pointer (`dist`, which differs between bidders), so the smallest key is
/// the bid that supersedes every other (the allocators' `supersedes`).
#[inline]
fn bid_key(pri: i32, dist: u32) -> u64 {
    (u64::from(!((pri as u32) ^ 0x8000_0000)) << 32) | u64::from(dist)
}

const NONE: u32 = u32::MAX;

/// Output stage of VC allocation: output VC `ov` keeps the best bid (the smallest key) of
/// those offered, here input VC `ivc`'s at priority `pri` (`n_iv` input VCs in all), and is
/// marked as bid for.
#[inline(always)]
fn va_offer(va_out: &mut [OutputVc], touched: &mut [u64], ov: u32, ivc: u32, n_iv: u32, pri: i32) {
    let out = &mut va_out[ov as usize];
    let dist = if ivc >= out.ptr {
        ivc - out.ptr
    } else {
        ivc + n_iv - out.ptr
    };
    out.key = out.key.min(bid_key(pri, dist));
    touched[ov as usize / 64] |= 1u64 << (ov % 64);
}

/// What a VA-stage entry may request in allocation pass `iter`: its route's output port and
/// the output VCs of its range available downstream (after the first pass, not taken by an
/// earlier pass), and likewise for its route's second element (priority 0; the first then
/// has priority 1). `None` when it takes no part: matched in an earlier pass, or nothing
/// available in either element (the first pass marks it stalled).
#[inline(always)]
fn va_request(
    it: &mut StageItem,
    st: &InputVc,
    next_buf: &[BufferState],
    va_taken: &[u64],
    iter: usize,
) -> Option<VaReq> {
    if iter > 0 && (st.va_grant != NONE || it.result < UNDECIDED) {
        return None;
    }
    let route = st.route;
    let avail_at = |port: usize, lo: u8, hi: u8| {
        let mut avail = next_buf[port].avail_mask() & range_mask(lo, hi);
        if iter > 0 {
            avail &= !va_taken[port];
        }
        avail
    };
    let port = route.port as usize;
    let avail = avail_at(port, route.vc_lo, route.vc_hi);
    let alt = route
        .alt()
        .map(|(p, lo, hi)| (p as usize, avail_at(p as usize, lo, hi)));
    if avail == 0 && alt.is_none_or(|(_, a)| a == 0) {
        if iter == 0 {
            it.result = STALL;
        }
        return None;
    }
    Some(VaReq { port, avail, alt })
}

/// One VA-stage entry's requests: output VCs `avail` (bit per VC) at `port`, and the second
/// element's `(port, VCs)` at lower priority, if the route has one. Either mask may be empty,
/// not both.
#[derive(Clone, Copy)]
struct VaReq {
    port: usize,
    avail: u64,
    alt: Option<(usize, u64)>,
}

impl VaReq {
    /// The requests of highest priority that are not empty: the first element's if it has
    /// any VC available, else the second's.
    #[inline(always)]
    fn best(&self) -> (usize, u64) {
        match self.alt {
            Some(alt) if self.avail == 0 => alt,
            _ => (self.port, self.avail),
        }
    }

    /// Every request as `(port, VCs, input priority)`.
    #[inline(always)]
    fn each(&self) -> impl Iterator<Item = (usize, u64, i32)> {
        let pri = i32::from(self.alt.is_some());
        core::iter::once((self.port, self.avail, pri))
            .chain(self.alt.map(|(p, a)| (p, a, 0)))
            .filter(|&(_, a, _)| a != 0)
    }
}

/// A route's ports and VC ranges are the router's, and its second element (if `alt_ok`)
/// does not share an output VC with its first.
fn check_route(r: &Route, n_out: usize, v: usize, alt_ok: bool) -> Result<(), RouterError> {
    let bad = |port: u16, vc_lo: u8, vc_hi: u8| Err(RouterError::BadRoute { port, vc_lo, vc_hi });
    if r.port as usize >= n_out || r.vc_lo > r.vc_hi || r.vc_hi as usize >= v {
        return bad(r.port, r.vc_lo, r.vc_hi);
    }
    if let Some((port, lo, hi)) = r.alt() {
        let overlaps = port == r.port && lo <= r.vc_hi && r.vc_lo <= hi;
        if !alt_ok || port as usize >= n_out || lo > hi || hi as usize >= v || overlaps {
            return bad(port, lo, hi);
        }
    }
    Ok(())
}

/// Bits `lo..=hi`.
#[inline]
fn range_mask(lo: u8, hi: u8) -> u64 {
    (!0u64 >> (63 - u32::from(hi))) & (!0u64 << u32::from(lo))
}

/// An input VC waiting in an allocation stage, and the stage's verdict for it.
#[derive(Clone, Copy, Default)]
struct StageItem {
    ivc: u32,
    result: i32,
}

#[derive(Clone, Copy, Default)]
struct XbarItem {
    flit: Flit,
    out: u32,
}

/// What the one-cycle pipeline's switch bids read.
struct SaBidCtx<'a> {
    v: u32,
    pri_seen: bool,
    out_limit: usize,
    vcs: &'a [InputVc],
    next_buf: &'a [BufferState],
    bufs: &'a [Flit],
    out_q: &'a PortQueues<Flit>,
    sw_rr_offset: &'a [u32],
}

impl SaBidCtx<'_> {
    /// Hand every bid of the VCs in `set` to `bid` (the allocator's); returns the number of
    /// attempts (VCs in the set).
    #[inline(always)]
    fn bids(&self, set: &[u64], mut bid: impl FnMut(u32, u32, u32, i32, u32, u32)) -> u64 {
        let n_ivc = self.vcs.len();
        let mut attempts = 0u64;
        for (w, &word) in set.iter().enumerate() {
            attempts += u64::from(word.count_ones());
            let mut bits = word;
            while bits != 0 {
                let ivc = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let st = &self.vcs[ivc];
                let port = st.out_port as usize;
                if self.next_buf[port].is_full_for(st.out_vc as usize)
                    || (self.out_limit != usize::MAX && self.out_q.len(port) >= self.out_limit)
                {
                    continue;
                }
                let prio = if self.pri_seen {
                    i32::from(self.bufs[st.head as usize * n_ivc + ivc].pri)
                } else {
                    0
                };
                bid(
                    st.exp_in,
                    port as u32,
                    u32::from(st.vc),
                    prio,
                    self.sw_rr_offset[st.exp_in as usize],
                    self.v,
                );
            }
        }
        attempts
    }
}

/// What a switch-allocation winner of the one-cycle pipeline changes.
struct SaWinner<'a> {
    b: usize,
    v: usize,
    vcs: &'a mut [InputVc],
    bufs: &'a [Flit],
    next_buf: &'a mut [BufferState],
    xbar_front: &'a mut [Flit],
    xbar_mask: &'a mut [u64],
    stats: &'a mut RouterStats,
    credit_front: &'a mut [Credit],
    credit_mask: &'a mut [u64],
    sa_set: &'a mut [u64],
    route_next: &'a mut Vec<u32>,
    sw_rr_offset: &'a mut [u32],
    sw_rr_next: &'a [u8; 64],
}

impl SaWinner<'_> {
    /// VC `vcn` of `input`, granted `output`, sends its front flit across the switch.
    #[inline(always)]
    fn cross(&mut self, input: usize, output: usize, vcn: usize) -> Result<(), RouterError> {
        let (b, n_ivc) = (self.b, self.vcs.len());
        let ivc = input * self.v + vcn;
        self.sw_rr_offset[input] = u32::from(self.sw_rr_next[vcn & 63]);
        let s = &mut self.vcs[ivc];
        // One winner per output (no output speedup): the flit moves to the crossbar stage
        // whole and takes its output VC there.
        let f = &mut self.xbar_front[output];
        *f = self.bufs[s.head as usize * n_ivc + ivc];
        f.vc = s.out_vc;
        let len = s.len - 1;
        let head = if len == 0 || s.head as usize + 1 == b {
            0
        } else {
            s.head + 1
        };
        (s.len, s.head) = (len, head);
        self.next_buf[output].sending_flit(f)?;
        let f = *f;
        self.xbar_mask[output / 64] |= 1u64 << (output % 64);
        self.stats.flits_switched += 1;
        // One credit per input (one switch input each).
        self.credit_front[input] = Credit(1u64 << vcn);
        self.credit_mask[input / 64] |= 1u64 << (input % 64);
        let (iw, ibit) = (ivc / 64, 1u64 << (ivc % 64));
        if len == 0 {
            if f.is_tail() {
                s.state = VcState::Idle;
            }
            self.sa_set[iw] &= !ibit;
        } else if f.is_tail() {
            // The next packet's head is at the front: it is routed at the next step.
            let nf = self.bufs[head as usize * n_ivc + ivc];
            if !nf.is_head() {
                return Err(RouterError::NotHead { input, vc: nf.vc });
            }
            s.state = VcState::Routing;
            self.route_next.push(ivc as u32);
            self.sa_set[iw] &= !ibit;
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Default)]
struct CreditItem {
    time: i64,
    credit: Credit,
    output: u32,
}

/// One pipeline stage's FIFO.
///
/// A stage's evaluation stamps the entries that joined since its last evaluation with their
/// completion time, but only when no stamped entry is still waiting, and its update removes
/// the stamped entries once their time has come. So the queue is always a stamped batch
/// (all with one time) followed by unstamped entries, and a count and a time describe it:
/// nothing per entry, no scans to find the boundary.
struct Stage<T: Copy + Default> {
    q: Ring<T>,
    /// Stamped entries at the front (0: no batch in flight).
    batch: usize,
    /// When the batch completes.
    time: i64,
}

impl<T: Copy + Default> Stage<T> {
    fn with_capacity(cap: usize) -> Self {
        Stage {
            q: Ring::with_capacity(cap),
            batch: 0,
            time: 0,
        }
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    #[inline]
    fn push(&mut self, v: T) {
        self.q.push_back(v);
    }

    /// Evaluation: unless a batch is in flight, everything queued becomes a batch completing
    /// at `t`. Returns the size of the new batch (0 when none was started).
    #[inline]
    fn stamp(&mut self, t: i64) -> usize {
        if self.batch != 0 {
            return 0;
        }
        self.batch = self.q.len();
        self.time = t;
        self.batch
    }

    /// Size of the batch if it completes by `now`, else 0.
    #[inline]
    fn due(&self, now: i64) -> usize {
        if self.time <= now {
            self.batch
        } else {
            0
        }
    }

    /// Update: hand over the batch if it completes by `now` (its size; the caller pops that
    /// many entries).
    #[inline]
    fn take_due(&mut self, now: i64) -> usize {
        let n = self.due(now);
        self.batch -= n;
        n
    }
}

/// Counters since construction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouterStats {
    /// Flits received.
    pub flits_in: u64,
    /// Flits that crossed the switch.
    pub flits_switched: u64,
    /// Internal steps run.
    pub internal_steps: u64,
    /// VC-allocation attempts (a head flit bidding for an output VC).
    pub vc_alloc_attempts: u64,
    /// Switch-allocation attempts (a flit bidding for the crossbar).
    pub sw_alloc_attempts: u64,
}

/// An input-queued VC router with credit-based flow control.
pub struct IqRouter {
    id: u32,
    n_in: usize,
    n_out: usize,
    v: usize,
    b: usize,
    out_speedup: usize,
    internal_speedup: f64,
    routing_delay: i64,
    vc_alloc_delay: i64,
    sw_alloc_delay: i64,
    crossbar_delay: i64,
    credit_delay: i64,
    speculative: bool,
    spec_check_elig: bool,
    spec_check_cred: bool,
    /// `output_buffer_size`, `usize::MAX` when unlimited.
    out_limit: usize,
    /// Non-speculative one-cycle switch allocation: the update reads the allocator's grants
    /// directly instead of a per-VC verdict written in the evaluation.
    sa_fused: bool,
    /// Credits are usable at the first internal step of the cycle they arrive in, which
    /// runs before anything reads the credit state: `credit_delay == 0` and at least one
    /// internal step per cycle.
    credit_now: bool,

    vcs: Vec<InputVc>,
    /// Input buffers, slot-major: slot `s` of input VC `i` at `s * vcs.len() + i` (an empty
    /// VC restarts at slot 0, so lightly loaded VCs share a few cache lines).
    bufs: Vec<Flit>,
    next_buf: Vec<BufferState>,
    in_flit: Vec<Flit>,
    in_mask: Vec<u64>,
    in_any: bool,
    /// A flit with a nonzero priority has arrived (until then every priority is 0 and the
    /// switch bids need not read the front flits).
    pri_seen: bool,

    route_q: Stage<StageItem>,
    va_q: Stage<StageItem>,
    sa_q: Stage<StageItem>,
    xbar_q: Stage<XbarItem>,
    /// A stage's completed batch while its update runs (storage reused every step).
    batch: Vec<StageItem>,
    proc_credits: Ring<CreditItem>,

    /// Flits waiting for each output channel.
    out_q: PortQueues<Flit>,
    /// Credits waiting for each input's credit channel.
    credit_q: PortQueues<Credit>,
    step_credit: Vec<u64>,
    step_credit_inputs: Vec<u32>,
    /// One switch input per input (`input_speedup == 1`): at most one flit leaves an input
    /// per internal step, so its credit goes straight to the credit queue.
    credit_direct: bool,

    /// Expanded switch output -> output port.
    exp_out_port: Vec<u32>,
    alloc_iters: usize,
    /// VC allocation is iSLIP with this many passes, or separable output-first (`Some(0)`);
    /// `None`: separable input-first.
    va_islip: Option<usize>,
    /// VC allocation is a table allocator (wavefront, maximum size, LOA, PIM) over input VCs x
    /// output VCs (then `va_islip` is not read).
    va_table: Option<Box<TableAllocator>>,
    /// Input VCs granted an output VC this step.
    va_granted: Vec<u32>,
    va_out: Vec<OutputVc>,
    /// Output VCs that received a bid this iteration (bit per output VC).
    va_touched: Vec<u64>,
    /// Per output port: output VCs granted this step (for iterations after the first).
    va_taken: Vec<u64>,
    va_taken_ports: Vec<u32>,
    sw_alloc: SwitchAllocator,
    sw_rr_offset: Vec<u32>,
    /// Per VC: where its input's VC offset moves when it wins the switch
    /// (`(vc + input_speedup) % vcs`).
    sw_rr_next: [u8; 64],

    /// The configuration allows the one-cycle pipeline (see [`IqRouter::set_order_free_routing`]).
    fast_ok: bool,
    /// The one-cycle pipeline is in use: stage membership is kept in the bit sets below
    /// instead of the stage queues.
    fast: bool,
    /// Input VCs in VC allocation, and those joining it at the next step.
    va_set: Vec<u64>,
    va_next: Vec<u64>,
    /// Input VCs in switch allocation, and those joining it at the next step.
    sa_set: Vec<u64>,
    sa_next: Vec<u64>,
    /// Input VCs whose next packet's head reached the front: routed at the next step.
    route_next: Vec<u32>,
    /// This step's switch grants `(input, output, VC)`.
    sa_wins: Vec<(u32, u32, u32)>,
    /// The crossbar stage: the flit each output receives at the next step (one at most),
    /// and a bit per output holding one.
    xbar_front: Vec<Flit>,
    xbar_mask: Vec<u64>,
    /// This step's credits per input (one at most), and a bit per input holding one.
    credit_front: Vec<Credit>,
    credit_mask: Vec<u64>,

    /// `hold_switch_for_packet`: per expanded input, the expanded output it holds and the
    /// VC holding it; per expanded output, the expanded input holding it (-1: none).
    hold: bool,
    hold_in: Vec<i32>,
    hold_vc: Vec<i32>,
    hold_out: Vec<i32>,
    /// Input VCs whose next flit crosses a held connection, with this step's verdict (the
    /// expanded output, or `STALL` without credit); the first `hold_n` were evaluated.
    hold_q: std::collections::VecDeque<StageItem>,
    hold_n: usize,

    active: bool,
    partial_internal: f64,
    stats: RouterStats,
}

impl IqRouter {
    /// A router numbered `id` (passed to the routing function) with configuration `cfg`.
    pub fn new(id: u32, cfg: &RouterConfig) -> Result<Self, RouterConfigError> {
        cfg.validate()?;
        let (n_in, n_out, v, b) = (cfg.inputs, cfg.outputs, cfg.vcs, cfg.vc_buf_size);
        let ivcs = n_in * v;
        let exp_in = n_in * cfg.input_speedup;
        let exp_out = n_out * cfg.output_speedup;
        let xbar_cap = exp_in.min(exp_out) * (cfg.crossbar_delay() as usize + 1);
        let out_cap = 4 + cfg.output_speedup * (cfg.crossbar_delay() as usize + 1);
        Ok(IqRouter {
            id,
            n_in,
            n_out,
            v,
            b,
            out_speedup: cfg.output_speedup,
            internal_speedup: cfg.internal_speedup,
            routing_delay: i64::from(cfg.routing_delay),
            vc_alloc_delay: i64::from(cfg.vc_alloc_delay),
            sw_alloc_delay: i64::from(cfg.sw_alloc_delay),
            crossbar_delay: i64::from(cfg.crossbar_delay()),
            credit_delay: i64::from(cfg.credit_delay),
            speculative: cfg.speculative,
            spec_check_elig: cfg.spec_check_elig,
            spec_check_cred: cfg.spec_check_cred,
            out_limit: cfg.output_buffer_size.unwrap_or(usize::MAX),
            sa_fused: !cfg.speculative && cfg.sw_alloc_delay <= 1,
            credit_now: cfg.credit_delay == 0 && cfg.internal_speedup >= 1.0,
            vcs: (0..ivcs)
                .map(|i| InputVc {
                    route: Route::default(),
                    out_port: 0,
                    out_vc: 0,
                    state: VcState::Idle,
                    head: 0,
                    len: 0,
                    va_in_ptr: 0,
                    va_grant: NONE,
                    exp_in: ((i / v) * cfg.input_speedup + (i % v) % cfg.input_speedup) as u32,
                    input: (i / v) as u16,
                    vc: (i % v) as u8,
                    out_off: ((i / v) % cfg.output_speedup) as u16,
                    head_pri: 0,
                })
                .collect(),
            bufs: vec![Flit::default(); ivcs * b],
            next_buf: (0..n_out)
                .map(|_| BufferState::new(v, b, cfg.wait_for_tail_credit))
                .collect(),
            in_flit: vec![Flit::default(); n_in],
            in_mask: vec![0; n_in.div_ceil(64)],
            in_any: false,
            pri_seen: false,
            route_q: Stage::with_capacity(ivcs),
            va_q: Stage::with_capacity(ivcs),
            sa_q: Stage::with_capacity(ivcs),
            xbar_q: Stage::with_capacity(xbar_cap),
            batch: Vec::with_capacity(ivcs),
            proc_credits: Ring::with_capacity(n_out * (cfg.credit_delay as usize + 2)),
            out_q: PortQueues::new(n_out, out_cap),
            credit_q: PortQueues::new(n_in, 4),
            step_credit: vec![0; n_in],
            step_credit_inputs: Vec::with_capacity(n_in),
            credit_direct: cfg.input_speedup == 1,
            exp_out_port: (0..exp_out)
                .map(|e| (e / cfg.output_speedup) as u32)
                .collect(),
            alloc_iters: cfg.alloc_iters,
            va_islip: match cfg.vc_allocator {
                AllocatorKind::SeparableInputFirst
                | AllocatorKind::Wavefront { .. }
                | AllocatorKind::MaxSize
                | AllocatorKind::Loa
                | AllocatorKind::Pim { .. } => None,
                AllocatorKind::SeparableOutputFirst => Some(0),
                AllocatorKind::Islip { iters } => Some(iters),
                // `SelAlloc` grants by output priority and accepts by input priority, as the
                // separable output-first allocator does in one pass.
                AllocatorKind::Select => Some(0),
            },
            va_table: TableAllocator::of(cfg.vc_allocator, n_in * v, n_out * v).map(Box::new),
            va_granted: Vec::with_capacity(ivcs),
            va_out: (0..n_out * v)
                .map(|ov| OutputVc {
                    key: NO_BID,
                    ptr: 0,
                    packed: ((ov / v) << 6 | (ov % v)) as u32,
                })
                .collect(),
            va_touched: vec![0; (n_out * v).div_ceil(64)],
            va_taken: vec![0; n_out],
            va_taken_ports: Vec::with_capacity(n_out),
            sw_alloc: match cfg.sw_allocator {
                AllocatorKind::SeparableInputFirst => {
                    SwitchAllocator::new(exp_in, exp_out, v, cfg.alloc_iters)
                }
                AllocatorKind::SeparableOutputFirst => {
                    SwitchAllocator::new_output_first(exp_in, exp_out, v)
                }
                AllocatorKind::Islip { iters } => {
                    SwitchAllocator::new_islip(exp_in, exp_out, v, iters)
                }
                AllocatorKind::Select => SwitchAllocator::new_select(exp_in, exp_out, v),
                kind @ (AllocatorKind::Wavefront { .. }
                | AllocatorKind::MaxSize
                | AllocatorKind::Loa
                | AllocatorKind::Pim { .. }) => match TableAllocator::of(kind, exp_in, exp_out) {
                    Some(t) => SwitchAllocator::new_table(t),
                    None => SwitchAllocator::new(exp_in, exp_out, v, cfg.alloc_iters),
                },
            },
            sw_rr_offset: (0..exp_in)
                .map(|i| (i % cfg.input_speedup) as u32)
                .collect(),
            sw_rr_next: std::array::from_fn(|vc| ((vc + cfg.input_speedup) % v) as u8),
            fast_ok: cfg.routing_delay == 1
                && cfg.vc_alloc_delay == 1
                && cfg.sw_alloc_delay == 1
                && cfg.crossbar_delay() == 1
                && cfg.credit_delay == 0
                && cfg.internal_speedup == 1.0
                && !cfg.speculative
                && cfg.input_speedup == 1
                && cfg.output_speedup == 1
                && cfg.alloc_iters == 1
                && cfg.vc_allocator == AllocatorKind::SeparableInputFirst
                && cfg.sw_allocator == AllocatorKind::SeparableInputFirst
                && !cfg.hold_switch_for_packet,
            fast: false,
            va_set: vec![0; ivcs.div_ceil(64)],
            va_next: vec![0; ivcs.div_ceil(64)],
            sa_set: vec![0; ivcs.div_ceil(64)],
            sa_next: vec![0; ivcs.div_ceil(64)],
            route_next: Vec::with_capacity(ivcs),
            sa_wins: Vec::with_capacity(n_in),
            xbar_front: vec![Flit::default(); n_out],
            xbar_mask: vec![0; n_out.div_ceil(64)],
            credit_front: vec![Credit::default(); n_in],
            credit_mask: vec![0; n_in.div_ceil(64)],
            hold: cfg.hold_switch_for_packet,
            hold_in: vec![-1; exp_in],
            hold_vc: vec![-1; exp_in],
            hold_out: vec![-1; exp_out],
            hold_q: std::collections::VecDeque::with_capacity(if cfg.hold_switch_for_packet {
                ivcs
            } else {
                0
            }),
            hold_n: 0,
            active: false,
            partial_internal: 0.0,
            stats: RouterStats::default(),
        })
    }

    /// Declare that the routing function used with this router is *order-free*: its routes
    /// (and lookahead routes) depend only on its arguments, not on the order or number of
    /// calls (no random draws, no state). The router may then use its one-cycle pipeline when
    /// the configuration allows it (every stage delay 1, no credit delay, one internal step
    /// per cycle, no speculation, no speedups, one allocation pass): stage membership kept
    /// as bit sets, visited in input-VC order instead of queue order, which gives the same
    /// results exactly because every allocation in that configuration is independent of
    /// the order its requests arrive in, and only the routing function could observe it.
    ///
    /// Only before the first flit arrives (the stage state has two representations).
    /// Returns whether the one-cycle pipeline is now in use.
    pub fn set_order_free_routing(&mut self, order_free: bool) -> bool {
        if self.stats.flits_in == 0 {
            self.fast = self.fast_ok && order_free;
        }
        self.fast
    }

    /// Keep this cycle's arriving credits out of the downstream state until the router's
    /// step (as BookSim's `_InputQueuing` does), for routes computed outside the step that
    /// read it: an adaptive lookahead route computed at injection.
    pub fn set_credits_at_step(&mut self) {
        self.credit_now = false;
    }

    /// The router's number.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Input ports.
    pub fn inputs(&self) -> usize {
        self.n_in
    }

    /// Output ports.
    pub fn outputs(&self) -> usize {
        self.n_out
    }

    /// Counters since construction.
    pub fn stats(&self) -> RouterStats {
        self.stats
    }

    /// Size the VC buffers behind output `output` (flit slots per VC) when they differ from
    /// the router's own `vc_buf_size` (for example a link into an endpoint with deeper
    /// buffers). Only while nothing is outstanding on that output.
    pub fn set_downstream_vc_buf_size(
        &mut self,
        output: usize,
        vc_buf_size: usize,
        wait_for_tail_credit: bool,
    ) -> Result<(), RouterError> {
        let Some(b) = self.next_buf.get_mut(output) else {
            return Err(RouterError::BadPort { port: output });
        };
        if b.occupancy() != 0 || b.avail_mask() != BufferState::new(self.v, 1, false).avail_mask() {
            return Err(RouterError::OutputBusy { output });
        }
        if vc_buf_size == 0 || vc_buf_size > 65535 {
            return Err(RouterError::BadBufferSize {
                output,
                vc_buf_size,
            });
        }
        *b = BufferState::new(self.v, vc_buf_size, wait_for_tail_credit);
        Ok(())
    }

    /// Credit state of the buffers behind output `output`.
    pub fn downstream(&self, output: usize) -> Option<&BufferState> {
        self.next_buf.get(output)
    }

    /// Whether the router has nothing to do until a flit or credit arrives: no flit in any
    /// stage, nothing queued for output, no credit pending.
    pub fn is_idle(&self) -> bool {
        !self.active && !self.in_any && self.out_q.is_empty() && self.credit_q.is_empty()
    }

    /// Whether [`IqRouter::step`] must be called every cycle even when idle: with a fractional
    /// `internal_speedup` the step accumulator advances every cycle (as in BookSim), so
    /// skipping idle cycles would shift which cycles get the extra internal step.
    pub fn steps_when_idle(&self) -> bool {
        self.internal_speedup.fract() != 0.0
    }

    /// Flits buffered at the inputs, in the crossbar and in the output queues.
    pub fn flits_inside(&self) -> usize {
        self.vcs.iter().map(|v| v.len as usize).sum::<usize>()
            + self.xbar_q.q.len()
            + self
                .xbar_mask
                .iter()
                .map(|w| w.count_ones() as usize)
                .sum::<usize>()
            + self.out_q.total()
    }

    /// Read phase: a flit arrived at `input` on VC `flit.vc`.
    #[inline]
    pub fn handle_flit(&mut self, input: usize, flit: Flit) -> Result<(), RouterError> {
        if input >= self.n_in {
            return Err(RouterError::BadPort { port: input });
        }
        if flit.vc as usize >= self.v {
            return Err(RouterError::BadVc { vc: flit.vc });
        }
        let (w, bit) = (input / 64, 1u64 << (input % 64));
        if self.in_mask[w] & bit != 0 {
            return Err(RouterError::InputBusy { input });
        }
        self.in_mask[w] |= bit;
        self.in_flit[input] = flit;
        self.in_any = true;
        self.pri_seen |= flit.pri != 0;
        self.active = true;
        self.stats.flits_in += 1;
        Ok(())
    }

    /// Read phase: a credit arrived for output `output` at cycle `now`; it becomes usable
    /// `credit_delay` cycles later.
    #[inline]
    pub fn handle_credit(
        &mut self,
        now: u64,
        output: usize,
        credit: Credit,
    ) -> Result<(), RouterError> {
        if output >= self.n_out {
            return Err(RouterError::BadPort { port: output });
        }
        self.active = true;
        if self.credit_now {
            // Usable at the first internal step of this cycle, which runs before anything
            // else reads the credit state: apply it now.
            return self.next_buf[output].process_credit(credit);
        }
        self.proc_credits.push_back(CreditItem {
            time: now as i64 + self.credit_delay,
            credit,
            output: output as u32,
        });
        self.active = true;
        Ok(())
    }

    /// Evaluate phase of cycle `now`: run the internal steps this cycle is due.
    pub fn step<R: RoutingFunction>(
        &mut self,
        now: u64,
        routing: &mut R,
    ) -> Result<(), RouterError> {
        if self.fast {
            // One internal step per cycle (`partial_internal` would stay 0).
            if self.active {
                self.fast_step(now as i64, routing)?;
            }
            return Ok(());
        }
        self.partial_internal += self.internal_speedup;
        while self.partial_internal >= 1.0 {
            self.internal_step(now as i64, routing)?;
            self.partial_internal -= 1.0;
        }
        Ok(())
    }

    /// Write phase: hand out the flit at the head of each non-empty output queue.
    pub fn poll_flits(&mut self, send: impl FnMut(usize, Flit)) {
        self.out_q.pop_fronts(send);
    }

    /// Write phase: hand out the credit at the head of each non-empty input credit queue.
    pub fn poll_credits(&mut self, send: impl FnMut(usize, Credit)) {
        self.credit_q.pop_fronts(send);
    }

    // ---- internals -------------------------------------------------------------------

    fn internal_step<R: RoutingFunction>(
        &mut self,
        now: i64,
        routing: &mut R,
    ) -> Result<(), RouterError> {
        if !self.active {
            return Ok(());
        }
        self.stats.internal_steps += 1;
        self.input_queuing(now)?;
        let mut activity = !self.proc_credits.is_empty();

        // Evaluate every stage, then update every stage.
        self.route_q.stamp(now + self.routing_delay - 1);
        for &ivc in &self.va_granted {
            self.vcs[ivc as usize].va_grant = NONE;
        }
        self.va_granted.clear();
        if !self.va_q.is_empty() {
            self.va_evaluate(now, routing);
        }
        if !self.hold_q.is_empty() {
            self.hold_evaluate();
        }
        self.sw_alloc.clear();
        if !self.sa_q.is_empty() {
            self.sa_evaluate(now, routing)?;
        }
        self.xbar_q.stamp(now + self.crossbar_delay - 1);

        if !self.route_q.is_empty() {
            self.route_update(now, routing)?;
            activity |= !self.route_q.is_empty();
        }
        if !self.va_q.is_empty() {
            self.va_update(now)?;
            activity |= !self.va_q.is_empty();
        }
        if !self.hold_q.is_empty() {
            self.hold_update(routing)?;
            activity |= !self.hold_q.is_empty();
        }
        if !self.sa_q.is_empty() {
            self.sa_update(now, routing)?;
            activity |= !self.sa_q.is_empty();
        }
        if !self.xbar_q.is_empty() {
            self.switch_update(now);
            activity |= !self.xbar_q.is_empty();
        }
        self.active = activity;

        for &i in &self.step_credit_inputs {
            let c = std::mem::take(&mut self.step_credit[i as usize]);
            self.credit_q.push(i as usize, Credit(c));
        }
        self.step_credit_inputs.clear();
        Ok(())
    }

    fn input_queuing(&mut self, now: i64) -> Result<(), RouterError> {
        if self.in_any {
            self.in_any = false;
            self.enqueue_arrivals()?;
        }
        while let Some(c) = self.proc_credits.front() {
            if now < c.time {
                break;
            }
            let c = *c;
            self.proc_credits.pop_front();
            self.next_buf[c.output as usize].process_credit(c.credit)?;
        }
        Ok(())
    }

    /// Write the flits that arrived this cycle into their VC buffers, in input order; a head
    /// at an idle VC starts routing, a flit at an active empty VC joins switch allocation.
    fn enqueue_arrivals(&mut self) -> Result<(), RouterError> {
        let (v, b) = (self.v, self.b);
        let routing_stage = self.routing_delay > 0;
        let speculative = self.speculative;
        let IqRouter {
            in_mask,
            in_flit,
            vcs,
            bufs,
            route_q,
            va_q,
            sa_q,
            hold_q,
            hold_vc,
            ..
        } = self;
        let (vcs, bufs, in_flit) = (&mut vcs[..], &mut bufs[..], &in_flit[..]);
        let n_ivc = vcs.len();
        for (w, mask) in in_mask.iter_mut().enumerate() {
            let mut m = std::mem::take(mask);
            while m != 0 {
                let input = w * 64 + m.trailing_zeros() as usize;
                m &= m - 1;
                let f = in_flit[input];
                let ivc = input * v + f.vc as usize;
                let st = &mut vcs[ivc];
                let len = st.len as usize;
                if len >= b {
                    return Err(RouterError::BufferOverflow { input, vc: f.vc });
                }
                let slot = st.head as usize + len;
                let slot = if slot >= b { slot - b } else { slot };
                bufs[slot * n_ivc + ivc] = f;
                st.len += 1;
                let item = StageItem {
                    ivc: ivc as u32,
                    result: UNDECIDED,
                };
                match st.state {
                    VcState::Idle => {
                        if !f.is_head() || len != 0 {
                            return Err(RouterError::NotHead { input, vc: f.vc });
                        }
                        if routing_stage {
                            st.state = VcState::Routing;
                            route_q.push(item);
                        } else {
                            st.route = f.la_route;
                            st.head_pri = f.pri;
                            st.state = VcState::VcAlloc;
                            if speculative {
                                sa_q.push(item);
                            }
                            va_q.push(item);
                        }
                    }
                    // A flit of a packet holding its switch connection crosses it.
                    VcState::Active if len == 0 => {
                        if hold_vc.get(st.exp_in as usize) == Some(&i32::from(f.vc)) {
                            hold_q.push_back(item);
                        } else {
                            sa_q.push(item);
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    fn route_update<R: RoutingFunction>(
        &mut self,
        now: i64,
        routing: &mut R,
    ) -> Result<(), RouterError> {
        let (id, speculative) = (self.id, self.speculative);
        let (n_out, v) = (self.n_out, self.v);
        let n = self.route_q.take_due(now);
        let IqRouter {
            route_q,
            va_q,
            sa_q,
            vcs,
            bufs,
            next_buf,
            ..
        } = self;
        let (vcs, bufs) = (&mut vcs[..], &bufs[..]);
        let used = |o: usize| next_buf.get(o).map_or(0, BufferState::occupancy);
        let n_ivc = vcs.len();
        // In place: the route stage never rejoins itself.
        for &it in route_q.q.front_mut(n).iter() {
            let ivc = it.ivc as usize;
            let st = &mut vcs[ivc];
            let f = bufs[st.head as usize * n_ivc + ivc];
            let r = routing.route_reading(id, usize::from(st.input), &f, &used);
            check_route(&r, n_out, v, true)?;
            st.route = r;
            st.head_pri = f.pri;
            st.state = VcState::VcAlloc;
            let item = StageItem {
                ivc: it.ivc,
                result: UNDECIDED,
            };
            if speculative {
                sa_q.push(item);
            }
            va_q.push(item);
        }
        route_q.q.advance(n);
        Ok(())
    }

    fn va_evaluate<R: RoutingFunction>(&mut self, now: i64, routing: &mut R) {
        let n = self.va_q.stamp(now + self.vc_alloc_delay - 1);
        if n == 0 {
            // BookSim allocates at every evaluation of a non-empty stage (`max_size` moves
            // its start even without requests, `pim` draws).
            if let Some(t) = self.va_table.as_mut().filter(|t| t.allocates_empty()) {
                t.clear();
                t.allocate(&mut |m| routing.random_int(m));
            }
        }
        if n > 0 {
            self.va_allocate(n, routing);
        } else if self.vc_alloc_delay > 1 {
            // A multi-cycle batch completing now: a VC granted at its start may have been
            // taken since.
            let n = self.va_q.due(now);
            let (a, b) = self.va_q.q.front_slices_mut(n);
            for it in a.iter_mut().chain(b.iter_mut()) {
                if it.result >= 0 {
                    let (port, ovc) = (it.result as usize >> 6, it.result as usize & 63);
                    if !self.next_buf[port].is_available_for(ovc) {
                        it.result = STALL;
                    }
                }
            }
        }
    }

    /// VC allocation over the first `n` entries of the VA stage.
    fn va_allocate<R: RoutingFunction>(&mut self, n: usize, routing: &mut R) {
        self.stats.vc_alloc_attempts += n as u64;
        match self.va_islip {
            None if self.va_table.is_some() => self.va_table(n, routing),
            None => self.va_separable(n),
            Some(0) => self.va_output_first(n, 1, true),
            Some(iters) => self.va_output_first(n, iters, false),
        }
        for &p in &self.va_taken_ports {
            self.va_taken[p as usize] = 0;
        }
        self.va_taken_ports.clear();
        if self.vc_alloc_delay > 1 {
            // The verdicts outlive this step's grants: keep them with the entries. (With a
            // one-cycle stage the update reads the grants directly.)
            let (qa, qb) = self.va_q.q.front_slices_mut(n);
            for it in qa.iter_mut().chain(qb.iter_mut()) {
                if it.result < UNDECIDED {
                    continue;
                }
                let g = self.vcs[it.ivc as usize].va_grant;
                it.result = if g == NONE { STALL } else { g as i32 };
            }
        }
    }

    /// Output-first VC allocation of the first `n` entries of the VA stage: iSLIP (BookSim's
    /// `iSLIP_Sparse` over input VCs x output VCs), `iters` passes, or with `prioritised`
    /// separable output-first (`SeparableOutputFirstAllocator`, one pass; `select` too). Every
    /// input VC requests each available output VC of its route; every requested output VC
    /// grants the requesting input VC nearest its pointer (`va_out[..].ptr`; separable: the
    /// highest head priority first); every input VC accepts, of the output VCs that granted
    /// it, the one nearest its pointer (`va_in_ptr`; separable: the route's first element's
    /// before its second's, iSLIP ignoring their input priorities). First-pass
    /// accepts move both pointers past the partner; later passes only match what is still
    /// unmatched.
    fn va_output_first(&mut self, n: usize, iters: usize, prioritised: bool) {
        let v = self.v as u32;
        let (n_ov, n_iv) = (self.n_out as u32 * v, self.n_in as u32 * v);
        let IqRouter {
            va_q,
            vcs,
            next_buf,
            va_taken,
            va_taken_ports,
            va_out,
            va_touched,
            va_granted,
            vc_alloc_delay,
            ..
        } = self;
        let (vcs, next_buf) = (&mut vcs[..], &next_buf[..]);
        let va_out = &mut va_out[..];
        for iter in 0..iters {
            // Grant: each output VC keeps the requester nearest its pointer (the smallest
            // distance as key).
            let mut any = false;
            for it in va_q.q.front_mut(n).iter_mut() {
                let st = vcs[it.ivc as usize];
                let Some(req) = va_request(it, &st, next_buf, va_taken, iter) else {
                    continue;
                };
                any = true;
                let pri = if prioritised {
                    i32::from(st.head_pri)
                } else {
                    0
                };
                for (port, mut avail, _) in req.each() {
                    let base = port as u32 * v;
                    while avail != 0 {
                        let ov = base + avail.trailing_zeros();
                        avail &= avail - 1;
                        va_offer(va_out, va_touched, ov, it.ivc, n_iv, pri);
                    }
                }
            }
            if !any {
                break;
            }
            // Accept: each input VC takes the granting output VC nearest its pointer.
            let mut accepted = false;
            for it in va_q.q.front_mut(n).iter_mut() {
                let ivc = it.ivc;
                let st = vcs[ivc as usize];
                if st.va_grant != NONE || it.result < UNDECIDED {
                    continue;
                }
                // The granting output VC of an element nearest the input VC's pointer.
                let va_out_ro = &*va_out;
                let find = |port: u16, lo: u8, hi: u8| {
                    let port = port as usize;
                    let avail = next_buf[port].avail_mask() & range_mask(lo, hi);
                    let base = port as u32 * v;
                    let off = st.va_in_ptr.wrapping_sub(base);
                    let off = if off < v { off } else { 0 };
                    let mut bits = avail.rotate_right(off);
                    while bits != 0 {
                        let bit = (bits.trailing_zeros() + off) & 63;
                        bits &= bits - 1;
                        let ov = base + bit;
                        let out = &va_out_ro[ov as usize];
                        if out.key == NO_BID {
                            continue;
                        }
                        let win = out.ptr + out.key as u32;
                        let win = if win >= n_iv { win - n_iv } else { win };
                        if win == ivc {
                            return Some(ov);
                        }
                    }
                    None
                };
                let route = st.route;
                let mut pick = find(route.port, route.vc_lo, route.vc_hi);
                if let Some((p, lo, hi)) = route.alt() {
                    // Separable output-first and `select` accept the higher input priority
                    // (the first element); iSLIP ignores it: the nearest to the pointer.
                    if pick.is_none() || !prioritised {
                        if let Some(a) = find(p, lo, hi) {
                            let ptr = st.va_in_ptr;
                            let d = |ov: u32| if ov >= ptr { ov - ptr } else { ov + n_ov - ptr };
                            pick = Some(match pick {
                                Some(m) if d(m) < d(a) => m,
                                _ => a,
                            });
                        }
                    }
                }
                if let Some(ov) = pick {
                    let out = &mut va_out[ov as usize];
                    // Taken: no other input VC may read this grant (its pointer moves).
                    out.key = NO_BID;
                    accepted = true;
                    let packed = out.packed;
                    if iter == 0 {
                        out.ptr = if ivc + 1 == n_iv { 0 } else { ivc + 1 };
                    }
                    let s = &mut vcs[ivc as usize];
                    s.va_grant = packed;
                    if iter == 0 {
                        s.va_in_ptr = if ov + 1 == n_ov { 0 } else { ov + 1 };
                    }
                    if *vc_alloc_delay > 1 {
                        va_granted.push(ivc);
                    }
                    if iters > 1 {
                        let p = (packed >> 6) as usize;
                        if va_taken[p] == 0 {
                            va_taken_ports.push(p as u32);
                        }
                        va_taken[p] |= 1u64 << (packed & 63);
                    }
                }
            }
            for (w, word) in va_touched.iter_mut().enumerate() {
                let mut bits = std::mem::take(word);
                while bits != 0 {
                    let ov = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    va_out[ov].key = NO_BID;
                }
            }
            if !accepted {
                // Nothing changed: every further pass would be this one again.
                break;
            }
        }
    }

    /// Table-allocator VC allocation (wavefront, maximum size, LOA, PIM) of the first `n` entries of
    /// the VA stage: every input VC requests each available output VC of its route (input
    /// priority its route element's, output priority its head's), then one `Allocate`.
    fn va_table<R: RoutingFunction>(&mut self, n: usize, routing: &mut R) {
        let v = self.v;
        let IqRouter {
            va_q,
            vcs,
            next_buf,
            va_taken,
            va_table,
            va_granted,
            vc_alloc_delay: alloc_delay,
            ..
        } = self;
        let Some(table) = va_table.as_mut() else {
            return;
        };
        table.clear();
        for it in va_q.q.front_mut(n).iter_mut() {
            let st = vcs[it.ivc as usize];
            let Some(req) = va_request(it, &st, next_buf, va_taken, 0) else {
                continue;
            };
            for (port, mut avail, in_pri) in req.each() {
                while avail != 0 {
                    let ovc = avail.trailing_zeros() as usize;
                    avail &= avail - 1;
                    let ov = (port * v + ovc) as u32;
                    table.add(it.ivc, ov, 0, in_pri, i32::from(st.head_pri));
                }
            }
        }
        table.allocate(&mut |m| routing.random_int(m));
        for &ivc in table.matched() {
            let Some((ov, _)) = table.grant(ivc) else {
                continue;
            };
            let (port, ovc) = (ov as usize / v, ov as usize % v);
            vcs[ivc as usize].va_grant = (port << 6 | ovc) as u32;
            if *alloc_delay > 1 {
                va_granted.push(ivc);
            }
        }
    }

    /// Separable input-first VC allocation over the first `n` entries of the VA stage.
    fn va_separable(&mut self, n: usize) {
        let v = self.v as u32;
        let (n_ov, n_iv) = (self.n_out as u32 * v, self.n_in as u32 * v);
        for iter in 0..self.alloc_iters {
            // Input stage: each unmatched input VC picks one available output VC of its
            // route, the first at or after its round-robin pointer. (Tables as local slices:
            // their addresses and lengths stay in registers across the loop.)
            let IqRouter {
                va_q,
                vcs,
                next_buf,
                va_taken,
                va_out,
                va_touched,
                ..
            } = self;
            let (vcs, next_buf) = (&vcs[..], &next_buf[..]);
            let (va_taken, va_out) = (&va_taken[..], &mut va_out[..]);
            let mut any = false;
            for it in va_q.q.front_mut(n).iter_mut() {
                let ivc = it.ivc as usize;
                let st = vcs[ivc];
                let Some(req) = va_request(it, &st, next_buf, va_taken, iter) else {
                    continue;
                };
                // The input arbiter takes the highest input priority first.
                let (port, avail) = req.best();
                let base = port as u32 * v;
                let off = st.va_in_ptr.wrapping_sub(base);
                // First available VC at or after the pointer, circularly, without a branch
                // (bits at or above `v` are never set).
                let off = if off < v { off } else { 0 };
                let bit = (avail.rotate_right(off).trailing_zeros() + off) & 63;
                let ov = base + bit;
                let pri = i32::from(st.head_pri);
                va_offer(va_out, va_touched, ov, it.ivc, n_iv, pri);
                any = true;
            }
            if !any {
                break;
            }
            let IqRouter {
                vcs,
                va_out,
                va_touched,
                va_granted,
                va_taken,
                va_taken_ports,
                alloc_iters,
                vc_alloc_delay: alloc_delay,
                ..
            } = self;
            let (vcs, va_out) = (&mut vcs[..], &mut va_out[..]);
            for (w, word) in va_touched.iter_mut().enumerate() {
                let mut bits = std::mem::take(word);
                while bits != 0 {
                    let ov = (w * 64) as u32 + bits.trailing_zeros();
                    bits &= bits - 1;
                    let out = &mut va_out[ov as usize];
                    let dist = std::mem::replace(&mut out.key, NO_BID) as u32;
                    let win = out.ptr + dist;
                    let win = if win >= n_iv { win - n_iv } else { win };
                    let packed = out.packed;
                    if iter == 0 {
                        out.ptr = if win + 1 == n_iv { 0 } else { win + 1 };
                    }
                    let st = &mut vcs[win as usize];
                    st.va_grant = packed;
                    if iter == 0 {
                        st.va_in_ptr = if ov + 1 == n_ov { 0 } else { ov + 1 };
                    }
                    if *alloc_delay > 1 {
                        // (One-cycle allocation: the update clears the grant.)
                        va_granted.push(win);
                    }
                    if *alloc_iters > 1 {
                        let port = (packed >> 6) as usize;
                        if va_taken[port] == 0 {
                            va_taken_ports.push(port as u32);
                        }
                        va_taken[port] |= 1u64 << (packed & 63);
                    }
                }
            }
        }
    }

    fn va_update(&mut self, now: i64) -> Result<(), RouterError> {
        let one_cycle = self.vc_alloc_delay == 1;
        let speculative = self.speculative;
        let n = self.va_q.take_due(now);
        let IqRouter {
            batch,
            va_q,
            sa_q,
            vcs,
            next_buf,
            ..
        } = self;
        va_q.q.drain_front_into(n, batch);
        let (vcs, next_buf) = (&mut vcs[..], &mut next_buf[..]);
        for &it in batch.iter() {
            let st = &mut vcs[it.ivc as usize];
            let result = if one_cycle {
                // Read and clear this step's grant (nothing reads it after the update).
                match std::mem::replace(&mut st.va_grant, NONE) {
                    NONE => STALL,
                    g => g as i32,
                }
            } else {
                it.result
            };
            let item = StageItem {
                ivc: it.ivc,
                result: UNDECIDED,
            };
            if result >= 0 {
                let (port, ovc) = (result as usize >> 6, result as usize & 63);
                next_buf[port].take_buffer(ovc, it.ivc)?;
                st.out_port = port as u16;
                st.out_vc = ovc as u8;
                st.state = VcState::Active;
                if !speculative {
                    sa_q.push(item);
                }
            } else {
                va_q.push(item);
            }
        }
        Ok(())
    }

    fn sa_evaluate<R: RoutingFunction>(
        &mut self,
        now: i64,
        routing: &mut R,
    ) -> Result<(), RouterError> {
        let n = self.sa_q.stamp(now + self.sw_alloc_delay - 1);
        if n > 0 {
            self.stats.sw_alloc_attempts += n as u64;
            self.sa_bids(n);
            self.sw_alloc
                .allocate_drawing(&mut |m| routing.random_int(m));
            if !self.sa_fused {
                self.sa_results(n);
            }
        } else if self.sw_alloc.allocates_empty() {
            self.sw_alloc
                .allocate_drawing(&mut |m| routing.random_int(m));
        }
        if self.sa_fused {
            return Ok(());
        }
        // Entries completing now: a speculative grant stands only if VC allocation gave the
        // VC an output VC at that output with credit; any grant needs credit still.
        let n = self.sa_q.due(now);
        let (qa, qb) = self.sa_q.q.front_slices_mut(n);
        for it in qa.iter_mut().chain(qb.iter_mut()) {
            if it.result < 0 {
                continue;
            }
            let output = self.exp_out_port[it.result as usize] as usize;
            let ivc = it.ivc as usize;
            let st = self.vcs[ivc];
            // A grant made before a packet took the input or the output is void.
            if self.hold
                && (self.hold_in[st.exp_in as usize] >= 0 || self.hold_out[it.result as usize] >= 0)
            {
                it.result = STALL;
                continue;
            }
            let dest = &self.next_buf[output];
            it.result = if self.speculative && st.state == VcState::VcAlloc {
                match st.va_grant {
                    NONE => UNDECIDED,
                    g if (g >> 6) as usize != output => STALL,
                    g if dest.is_full_for((g & 63) as usize) => STALL,
                    _ => it.result,
                }
            } else if output != st.out_port as usize {
                return Err(RouterError::SplitSpeculation {
                    input: usize::from(st.input),
                    vc: st.vc,
                    granted: output,
                    allocated: usize::from(st.out_port),
                });
            } else if dest.is_full_for(st.out_vc as usize) {
                STALL
            } else {
                it.result
            };
        }
        Ok(())
    }

    /// Switch requests of the first `n` entries of the SA stage.
    fn sa_bids(&mut self, n: usize) {
        let v = self.v as u32;
        let n_ivc = self.vcs.len();
        let os = self.out_speedup as u32;
        let IqRouter {
            sa_q,
            vcs,
            next_buf,
            bufs,
            out_q,
            sw_alloc,
            sw_rr_offset,
            out_limit,
            speculative,
            spec_check_elig,
            spec_check_cred,
            pri_seen,
            hold,
            hold_in,
            hold_out,
            ..
        } = self;
        let pri_seen = *pri_seen;
        let (hold, hold_in, hold_out) = (*hold, &hold_in[..], &hold_out[..]);
        let (vcs, next_buf, bufs, sw_rr_offset) =
            (&vcs[..], &next_buf[..], &bufs[..], &sw_rr_offset[..]);
        let (out_limit, speculative) = (*out_limit, *speculative);
        let (spec_check_elig, spec_check_cred) = (*spec_check_elig, *spec_check_cred);
        for it in sa_q.q.front_mut(n).iter_mut() {
            let ivc = it.ivc as usize;
            let st = vcs[ivc];
            let head_pri = || {
                if pri_seen {
                    i32::from(bufs[st.head as usize * n_ivc + ivc].pri)
                } else {
                    0
                }
            };
            // An input or output held for a packet takes no other request (the entry stays
            // undecided and finds no grant).
            let mut bid = |port: usize, prio: i32| {
                let exp_out = port as u32 * os + u32::from(st.out_off);
                if hold && (hold_in[st.exp_in as usize] >= 0 || hold_out[exp_out as usize] >= 0) {
                    return;
                }
                sw_alloc.bid(
                    st.exp_in,
                    exp_out,
                    u32::from(st.vc),
                    prio,
                    sw_rr_offset[st.exp_in as usize],
                    v,
                );
            };
            if st.state == VcState::Active {
                let port = st.out_port as usize;
                let full = next_buf[port].is_full_for(st.out_vc as usize)
                    || (out_limit != usize::MAX && out_q.len(port) >= out_limit);
                if full {
                    it.result = STALL;
                    continue;
                }
                bid(port, head_pri());
                continue;
            }
            // Speculative bid of a head flit still in VC allocation, for each element of its
            // route (once per output: BookSim's repeated request for an output is a no-op):
            // only for an output with an available VC (spec_check_elig) that has credit
            // (spec_check_cred). An element that fails stalls the entry (it reads no grant),
            // but the other element's bid stands, as in BookSim.
            let route = st.route;
            let spec_pri = if speculative { i32::MIN } else { 0 };
            let prio = spec_pri + head_pri();
            let mut first = usize::MAX;
            let elements =
                core::iter::once((route.port, route.vc_lo, route.vc_hi)).chain(route.alt());
            for (port, lo, hi) in elements {
                let port = port as usize;
                let dest = &next_buf[port];
                let mut elig = false;
                let mut cred = false;
                if spec_check_elig {
                    let oq_ok = out_limit == usize::MAX || out_q.len(port) < out_limit;
                    if oq_ok {
                        let am = dest.avail_mask() & range_mask(lo, hi);
                        elig = am != 0;
                        cred = if spec_check_cred {
                            am & !dest.full_mask() != 0
                        } else {
                            elig
                        };
                    }
                }
                if (spec_check_elig && !elig) || (spec_check_cred && !cred) {
                    it.result = STALL;
                    continue;
                }
                if port != first {
                    bid(port, prio);
                    first = port;
                }
            }
        }
    }

    /// The switch grant of VC `ivc` (its expanded output), moving the input's VC offset past
    /// it; `STALL` when it has none.
    #[inline(always)]
    fn sa_grant(&mut self, ivc: usize) -> i32 {
        let st = &self.vcs[ivc];
        let (exp_in, vc) = (st.exp_in, u32::from(st.vc));
        match self.sw_alloc.grant(exp_in) {
            Some((exp_out, label)) if label == vc => {
                self.sw_rr_offset[exp_in as usize] = u32::from(self.sw_rr_next[vc as usize & 63]);
                exp_out as i32
            }
            _ => STALL,
        }
    }

    /// Verdicts of the first `n` entries of the SA stage, kept with the entries.
    fn sa_results(&mut self, n: usize) {
        for k in 0..n {
            let it = *self.sa_q.q.get(k);
            if it.result < UNDECIDED {
                continue;
            }
            let result = self.sa_grant(it.ivc as usize);
            self.sa_q.q.get_mut(k).result = result;
        }
    }

    /// Switch-allocation update of the completed batch: winners cross the switch, the others
    /// retry. Works on local table slices so that their addresses and lengths stay in
    /// registers.
    fn sa_update<R: RoutingFunction>(
        &mut self,
        now: i64,
        routing: &mut R,
    ) -> Result<(), RouterError> {
        let n = self.sa_q.take_due(now);
        let (b, id) = (self.b, self.id);
        let lookahead = self.routing_delay == 0;
        let routing_stage = self.routing_delay > 0;
        let (fused, speculative) = (self.sa_fused, self.speculative);
        let IqRouter {
            vcs,
            bufs,
            exp_out_port,
            next_buf,
            xbar_q,
            stats,
            step_credit,
            step_credit_inputs,
            credit_direct,
            credit_q,
            sa_q,
            va_q,
            route_q,
            sw_alloc,
            sw_rr_offset,
            sw_rr_next,
            batch,
            hold,
            hold_in,
            hold_vc,
            hold_out,
            hold_q,
            ..
        } = self;
        let (vcs, bufs, exp_out_port) = (&mut vcs[..], &bufs[..], &exp_out_port[..]);
        let (next_buf, step_credit) = (&mut next_buf[..], &mut step_credit[..]);
        let credit_direct = *credit_direct;
        let sw_rr_offset = &mut sw_rr_offset[..];
        let n_ivc = vcs.len();
        sa_q.q.drain_front_into(n, batch);
        for &it in batch.iter() {
            let ivc = it.ivc as usize;
            let retry = StageItem {
                ivc: it.ivc,
                result: UNDECIDED,
            };
            let st = vcs[ivc];
            let result = if !fused || it.result == STALL {
                it.result
            } else {
                // The grant of this VC's switch input, if it went to this VC; the input's VC
                // offset then moves past it.
                match sw_alloc.grant(st.exp_in) {
                    Some((exp_out, label)) if label == u32::from(st.vc) => {
                        sw_rr_offset[st.exp_in as usize] =
                            u32::from(sw_rr_next[usize::from(st.vc) & 63]);
                        exp_out as i32
                    }
                    _ => STALL,
                }
            };
            if result < 0 {
                sa_q.push(retry);
                continue;
            }
            let output = exp_out_port[result as usize] as usize;
            let (input, vcn) = (usize::from(st.input), usize::from(st.vc));
            let mut f = bufs[st.head as usize * n_ivc + ivc];
            let len = st.len - 1;
            let head = if len == 0 || st.head as usize + 1 == b {
                0
            } else {
                st.head + 1
            };
            let s = &mut vcs[ivc];
            (s.len, s.head) = (len, head);
            f.vc = st.out_vc;
            if lookahead && f.is_head() {
                f.la_route = routing.lookahead(id, output, &f).unwrap_or_default();
            }
            next_buf[output].sending_flit(&f)?;
            xbar_q.push(XbarItem {
                flit: f,
                out: output as u32,
            });
            stats.flits_switched += 1;
            if credit_direct {
                credit_q.push(input, Credit(1u64 << vcn));
            } else {
                let credit = &mut step_credit[input];
                if *credit == 0 {
                    step_credit_inputs.push(input as u32);
                }
                *credit |= 1u64 << vcn;
            }

            if len == 0 {
                if f.is_tail() {
                    s.state = VcState::Idle;
                }
            } else if f.is_tail() {
                // The next packet's head is at the front: it starts routing now.
                let nf = bufs[head as usize * n_ivc + ivc];
                if !nf.is_head() {
                    return Err(RouterError::NotHead { input, vc: nf.vc });
                }
                let item = StageItem {
                    ivc: it.ivc,
                    result: UNDECIDED,
                };
                if routing_stage {
                    s.state = VcState::Routing;
                    route_q.push(item);
                } else {
                    s.route = nf.la_route;
                    s.head_pri = nf.pri;
                    s.state = VcState::VcAlloc;
                    if speculative {
                        sa_q.push(item);
                    }
                    va_q.push(item);
                }
            } else if *hold {
                // The rest of the packet keeps the connection.
                hold_vc[st.exp_in as usize] = i32::from(st.vc);
                hold_in[st.exp_in as usize] = result;
                hold_out[result as usize] = st.exp_in as i32;
                hold_q.push_back(retry);
            } else {
                sa_q.push(retry);
            }
        }
        Ok(())
    }

    // ---- held switch connections (`hold_switch_for_packet`) -------------------------

    /// Held connections: each waiting VC's next flit may cross if its output VC has credit.
    fn hold_evaluate(&mut self) {
        let os = self.out_speedup as i32;
        for it in self.hold_q.iter_mut() {
            let st = &self.vcs[it.ivc as usize];
            let port = usize::from(st.out_port);
            it.result = if self.next_buf[port].is_full_for(usize::from(st.out_vc)) {
                STALL
            } else {
                port as i32 * os + i32::from(st.out_off)
            };
        }
        self.hold_n = self.hold_q.len();
    }

    /// The connection of `exp_in` is released.
    fn release_hold(&mut self, exp_in: usize) {
        let out = std::mem::replace(&mut self.hold_in[exp_in], -1);
        self.hold_vc[exp_in] = -1;
        if out >= 0 {
            self.hold_out[out as usize] = -1;
        }
    }

    /// Held connections evaluated this step: a flit with credit (and room in its output
    /// queue) crosses; the connection ends with the packet, when the VC has nothing more
    /// buffered, or when the flit could not cross (the VC then bids for the switch again).
    fn hold_update<R: RoutingFunction>(&mut self, routing: &mut R) -> Result<(), RouterError> {
        let (b, n_ivc) = (self.b, self.vcs.len());
        for _ in 0..std::mem::take(&mut self.hold_n) {
            let Some(it) = self.hold_q.pop_front() else {
                break;
            };
            let ivc = it.ivc as usize;
            let st = self.vcs[ivc];
            let exp_in = st.exp_in as usize;
            let retry = StageItem {
                ivc: it.ivc,
                result: UNDECIDED,
            };
            let output = usize::from(st.out_port);
            let room = self.out_limit == usize::MAX || self.out_q.len(output) < self.out_limit;
            if it.result < 0 || !room {
                self.release_hold(exp_in);
                self.sa_q.push(retry);
                continue;
            }
            let (input, vcn) = (usize::from(st.input), usize::from(st.vc));
            let mut f = self.bufs[st.head as usize * n_ivc + ivc];
            let len = st.len - 1;
            let head = if len == 0 || st.head as usize + 1 == b {
                0
            } else {
                st.head + 1
            };
            (self.vcs[ivc].len, self.vcs[ivc].head) = (len, head);
            f.vc = st.out_vc;
            if self.routing_delay == 0 && f.is_head() {
                f.la_route = routing.lookahead(self.id, output, &f).unwrap_or_default();
            }
            self.next_buf[output].sending_flit(&f)?;
            self.xbar_q.push(XbarItem {
                flit: f,
                out: output as u32,
            });
            self.stats.flits_switched += 1;
            if self.credit_direct {
                self.credit_q.push(input, Credit(1u64 << vcn));
            } else {
                let credit = &mut self.step_credit[input];
                if *credit == 0 {
                    self.step_credit_inputs.push(input as u32);
                }
                *credit |= 1u64 << vcn;
            }
            if len == 0 {
                self.release_hold(exp_in);
                if f.is_tail() {
                    self.vcs[ivc].state = VcState::Idle;
                }
            } else if f.is_tail() {
                self.release_hold(exp_in);
                let nf = self.bufs[head as usize * n_ivc + ivc];
                if !nf.is_head() {
                    return Err(RouterError::NotHead { input, vc: nf.vc });
                }
                let s = &mut self.vcs[ivc];
                if self.routing_delay > 0 {
                    s.state = VcState::Routing;
                    self.route_q.push(retry);
                } else {
                    s.route = nf.la_route;
                    s.head_pri = nf.pri;
                    s.state = VcState::VcAlloc;
                    if self.speculative {
                        self.sa_q.push(retry);
                    }
                    self.va_q.push(retry);
                }
            } else {
                self.hold_q.push_back(retry);
            }
        }
        Ok(())
    }

    // ---- the one-cycle pipeline ------------------------------------------------------

    /// One internal step of the one-cycle pipeline (`fast`): the stages of
    /// [`IqRouter::internal_step`] with every delay 1, in the same order of effects.
    ///
    /// * A head arriving at an idle VC is routed at once (the route stage would route it
    ///   later in the same step) and joins VC allocation at the next step; a flit arriving
    ///   at an active VC with nothing buffered joins this step's switch allocation.
    /// * VC allocation grants take their output VC at once (only speculative switch bids
    ///   read VC availability, and there are none) and join switch allocation at the next
    ///   step; losers stay.
    /// * Switch-allocation winners cross to the crossbar stage, which delivers them to the
    ///   output queues at the next step; losers stay.
    fn fast_step<R: RoutingFunction>(
        &mut self,
        now: i64,
        routing: &mut R,
    ) -> Result<(), RouterError> {
        let _ = now;
        self.stats.internal_steps += 1;
        if self.in_any {
            self.in_any = false;
            self.fast_arrivals(routing)?;
        }
        if !self.route_next.is_empty() {
            self.fast_route_next(routing)?;
        }
        if self.va_set.iter().any(|&w| w != 0) {
            self.fast_va()?;
        }
        self.sw_alloc.clear();
        let bids = self.sa_set.iter().any(|&w| w != 0);
        if bids {
            self.fast_sa_bids();
            self.sw_alloc.allocate();
        }
        // The crossbar: last step's winners reach their output queues (one per output).
        self.out_q
            .push_each(&mut self.xbar_front, &mut self.xbar_mask);
        if bids {
            self.fast_sa_winners()?;
            self.credit_q
                .push_each(&mut self.credit_front, &mut self.credit_mask);
        }
        let mut busy = !self.route_next.is_empty();
        for &w in &self.xbar_mask {
            busy |= w != 0;
        }
        let sets = self.va_set.iter_mut().zip(self.va_next.iter_mut());
        for (set, next) in sets.zip(self.sa_set.iter_mut().zip(self.sa_next.iter_mut())) {
            *set.0 |= std::mem::take(set.1);
            *next.0 |= std::mem::take(next.1);
            busy |= (*set.0 | *next.0) != 0;
        }
        self.active = busy;
        Ok(())
    }

    /// Route a head at the front of input VC `ivc` (state `VcAlloc`, joining VC allocation
    /// at the next step).
    #[inline(always)]
    fn fast_route<R: RoutingFunction>(
        id: u32,
        (n_out, v): (usize, usize),
        st: &mut InputVc,
        f: &Flit,
        routing: &mut R,
    ) -> Result<(), RouterError> {
        let r = routing.route(id, usize::from(st.input), f);
        // (The one-cycle pipeline takes routes of one element only.)
        check_route(&r, n_out, v, false)?;
        st.route = r;
        st.head_pri = f.pri;
        st.state = VcState::VcAlloc;
        Ok(())
    }

    /// [`IqRouter::enqueue_arrivals`] for the one-cycle pipeline.
    fn fast_arrivals<R: RoutingFunction>(&mut self, routing: &mut R) -> Result<(), RouterError> {
        let (v, b, id, n_out) = (self.v, self.b, self.id, self.n_out);
        let IqRouter {
            in_mask,
            in_flit,
            vcs,
            bufs,
            va_next,
            sa_set,
            ..
        } = self;
        let (vcs, bufs, in_flit) = (&mut vcs[..], &mut bufs[..], &in_flit[..]);
        let n_ivc = vcs.len();
        for (w, mask) in in_mask.iter_mut().enumerate() {
            let mut m = std::mem::take(mask);
            while m != 0 {
                let input = w * 64 + m.trailing_zeros() as usize;
                m &= m - 1;
                let vc = in_flit[input].vc;
                let ivc = input * v + vc as usize;
                let st = &mut vcs[ivc];
                let len = st.len as usize;
                if len >= b {
                    return Err(RouterError::BufferOverflow { input, vc });
                }
                let slot = st.head as usize + len;
                let slot = if slot >= b { slot - b } else { slot };
                // The flit moves whole (a field-by-field copy costs more).
                let f = &mut bufs[slot * n_ivc + ivc];
                *f = in_flit[input];
                let f = &*f;
                st.len += 1;
                let (iw, ibit) = (ivc / 64, 1u64 << (ivc % 64));
                match st.state {
                    VcState::Idle => {
                        if !f.is_head() || len != 0 {
                            return Err(RouterError::NotHead { input, vc: f.vc });
                        }
                        Self::fast_route(id, (n_out, v), st, f, routing)?;
                        va_next[iw] |= ibit;
                    }
                    VcState::Active if len == 0 => sa_set[iw] |= ibit,
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// The route stage for heads that reached the front of their VC last step.
    fn fast_route_next<R: RoutingFunction>(&mut self, routing: &mut R) -> Result<(), RouterError> {
        let (v, id, n_out) = (self.v, self.id, self.n_out);
        let IqRouter {
            route_next,
            vcs,
            bufs,
            va_next,
            ..
        } = self;
        let n_ivc = vcs.len();
        for &ivc in route_next.iter() {
            let ivc = ivc as usize;
            let st = &mut vcs[ivc];
            let f = bufs[st.head as usize * n_ivc + ivc];
            Self::fast_route(id, (n_out, v), st, &f, routing)?;
            va_next[ivc / 64] |= 1u64 << (ivc % 64);
        }
        route_next.clear();
        Ok(())
    }

    /// VC allocation over `va_set` ([`IqRouter::va_allocate`] and [`IqRouter::va_update`]
    /// for one pass and a one-cycle stage).
    fn fast_va(&mut self) -> Result<(), RouterError> {
        let v = self.v as u32;
        let (n_ov, n_iv) = (self.n_out as u32 * v, self.n_in as u32 * v);
        let IqRouter {
            vcs,
            next_buf,
            va_out,
            va_touched,
            va_set,
            sa_next,
            stats,
            ..
        } = self;
        let (vcs, next_buf, va_out) = (&mut vcs[..], &mut next_buf[..], &mut va_out[..]);
        let mut attempts = 0u64;
        for (w, &word) in va_set.iter().enumerate() {
            attempts += u64::from(word.count_ones());
            let mut bits = word;
            while bits != 0 {
                let ivc = (w * 64) as u32 + bits.trailing_zeros();
                bits &= bits - 1;
                let st = &vcs[ivc as usize];
                let route = st.route;
                let port = route.port as usize;
                let avail = next_buf[port].avail_mask() & range_mask(route.vc_lo, route.vc_hi);
                if avail == 0 {
                    continue;
                }
                let base = port as u32 * v;
                let off = st.va_in_ptr.wrapping_sub(base);
                let off = if off < v { off } else { 0 };
                let bit = (avail.rotate_right(off).trailing_zeros() + off) & 63;
                let ov = base + bit;
                let pri = i32::from(st.head_pri);
                va_offer(va_out, va_touched, ov, ivc, n_iv, pri);
            }
        }
        stats.vc_alloc_attempts += attempts;
        for (w, word) in va_touched.iter_mut().enumerate() {
            let mut bits = std::mem::take(word);
            while bits != 0 {
                let ov = (w * 64) as u32 + bits.trailing_zeros();
                bits &= bits - 1;
                let out = &mut va_out[ov as usize];
                let dist = std::mem::replace(&mut out.key, NO_BID) as u32;
                let win = out.ptr + dist;
                let win = if win >= n_iv { win - n_iv } else { win };
                let packed = out.packed;
                out.ptr = if win + 1 == n_iv { 0 } else { win + 1 };
                let st = &mut vcs[win as usize];
                st.va_in_ptr = if ov + 1 == n_ov { 0 } else { ov + 1 };
                let (port, ovc) = ((packed >> 6) as usize, (packed & 63) as usize);
                next_buf[port].take_buffer(ovc, win)?;
                st.out_port = port as u16;
                st.out_vc = ovc as u8;
                st.state = VcState::Active;
                let (iw, ibit) = (win as usize / 64, 1u64 << (win % 64));
                va_set[iw] &= !ibit;
                sa_next[iw] |= ibit;
            }
        }
        Ok(())
    }

    /// Switch bids of the VCs in `sa_set` ([`IqRouter::sa_bids`] without speculation or
    /// speedup).
    fn fast_sa_bids(&mut self) {
        let IqRouter {
            sa_set,
            vcs,
            next_buf,
            bufs,
            out_q,
            sw_alloc,
            sw_rr_offset,
            out_limit,
            pri_seen,
            stats,
            v,
            ..
        } = self;
        let ctx = SaBidCtx {
            v: *v as u32,
            pri_seen: *pri_seen,
            out_limit: *out_limit,
            vcs,
            next_buf,
            bufs,
            out_q,
            sw_rr_offset,
        };
        let unprioritised = !ctx.pri_seen;
        stats.sw_alloc_attempts += match sw_alloc.dense_mut() {
            // Every priority is 0: no priority bookkeeping.
            Some(d) if unprioritised => ctx.bids(sa_set, |i, o, l, _, off, n| {
                d.bid_unprioritised(i, o, l, off, n)
            }),
            Some(d) => ctx.bids(sa_set, |i, o, l, p, off, n| d.bid(i, o, l, p, off, n)),
            None => ctx.bids(sa_set, |i, o, l, p, off, n| {
                sw_alloc.bid(i, o, l, p, off, n)
            }),
        };
    }

    /// Switch-allocation winners cross the switch ([`IqRouter::sa_update`] without
    /// speculation, lookahead or speedup).
    fn fast_sa_winners(&mut self) -> Result<(), RouterError> {
        let IqRouter {
            vcs,
            bufs,
            next_buf,
            xbar_front,
            xbar_mask,
            stats,
            credit_front,
            credit_mask,
            sa_set,
            route_next,
            sw_alloc,
            sw_rr_offset,
            sw_rr_next,
            sa_wins,
            b,
            v,
            ..
        } = self;
        let mut w = SaWinner {
            b: *b,
            v: *v,
            vcs,
            bufs,
            next_buf,
            xbar_front,
            xbar_mask,
            stats,
            credit_front,
            credit_mask,
            sa_set,
            route_next,
            sw_rr_offset,
            sw_rr_next,
        };
        let mut result = Ok(());
        match sw_alloc.dense_mut() {
            // (An error is fatal for the run: the first one is reported.)
            Some(d) => d.for_each_match(|i, o, l| {
                if result.is_ok() {
                    result = w.cross(i as usize, o as usize, l as usize);
                }
            }),
            None => {
                sa_wins.clear();
                sw_alloc.grants_into(sa_wins);
                for &(i, o, l) in sa_wins.iter() {
                    w.cross(i as usize, o as usize, l as usize)?;
                }
            }
        }
        result
    }

    fn switch_update(&mut self, now: i64) {
        let n = self.xbar_q.take_due(now);
        let (a, b) = self.xbar_q.q.front_slices_mut(n);
        for it in a.iter().chain(b.iter()) {
            self.out_q.push(it.out as usize, it.flit);
        }
        self.xbar_q.q.advance(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Crossbar routing: output = destination.
    struct Direct;
    impl RoutingFunction for Direct {
        fn route(&mut self, _r: u32, _i: usize, f: &Flit) -> Route {
            Route::new(f.dest as u16, 0, 1)
        }
    }

    fn cfg() -> RouterConfig {
        RouterConfig {
            inputs: 2,
            outputs: 2,
            vcs: 2,
            vc_buf_size: 4,
            ..RouterConfig::default()
        }
    }

    /// Run cycles, returning (cycle, output, flit) of everything sent and returning credits
    /// for outputs immediately (as an ejecting terminal does, two cycles later).
    fn run(
        r: &mut IqRouter,
        inject: &[(u64, usize, Flit)],
        cycles: u64,
    ) -> Vec<(u64, usize, Flit)> {
        let mut out = Vec::new();
        let mut credits: Vec<(u64, usize, Credit)> = Vec::new();
        for now in 0..cycles {
            for &(t, i, f) in inject {
                if t == now {
                    r.handle_flit(i, f).unwrap();
                }
            }
            for &(t, o, c) in &credits {
                if t == now {
                    r.handle_credit(now, o, c).unwrap();
                }
            }
            r.step(now, &mut Direct).unwrap();
            r.poll_flits(|o, f| {
                out.push((now, o, f));
                credits.push((now + 4, o, Credit::for_vc(f.vc)));
            });
            r.poll_credits(|_, _| {});
        }
        out
    }

    #[test]
    fn zero_load_pipeline_is_four_cycles() {
        let mut r = IqRouter::new(0, &cfg()).unwrap();
        let f = Flit::new(1, 1, true, true);
        let out = run(&mut r, &[(0, 0, f)], 10);
        // Buffer+route at 0, VA at 1, SA at 2, crossbar at 3: sent in the write phase of 3.
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, 3);
        assert_eq!(out[0].1, 1);
        assert!(r.is_idle());
    }

    #[test]
    fn packet_body_follows_head_back_to_back() {
        let mut r = IqRouter::new(0, &cfg()).unwrap();
        let flits = [
            (0, 0, Flit::new(1, 0, true, false)),
            (1, 0, Flit::new(1, 0, false, false)),
            (2, 0, Flit::new(1, 0, false, true)),
        ];
        let out = run(&mut r, &flits, 12);
        let times: Vec<u64> = out.iter().map(|o| o.0).collect();
        assert_eq!(times, vec![3, 4, 5]);
        assert!(out.iter().all(|o| o.2.vc == out[0].2.vc));
    }

    /// Two 4-flit packets from two inputs to one output, on different output VCs: switch
    /// allocation per flit interleaves them at the output; with `hold_switch_for_packet`
    /// the first packet to win keeps the connection to its tail, then the other crosses.
    /// A connection whose VC runs dry is given up (the input bids again for the next flit).
    #[test]
    fn a_held_switch_connection_carries_the_whole_packet() {
        let packet = |id: u32, vc: u8| -> Vec<Flit> {
            (0..4)
                .map(|k| {
                    let mut f = Flit::new(id, 1, k == 0, k == 3);
                    f.vc = vc;
                    f
                })
                .collect()
        };
        let mut inject = Vec::new();
        for (k, (a, b)) in packet(10, 0).into_iter().zip(packet(20, 1)).enumerate() {
            inject.push((k as u64, 0, a));
            inject.push((k as u64, 1, b));
        }
        let order = |hold: bool| -> Vec<u32> {
            let c = RouterConfig {
                hold_switch_for_packet: hold,
                ..cfg()
            };
            let mut r = IqRouter::new(0, &c).unwrap();
            let out = run(&mut r, &inject, 30);
            assert!(r.is_idle() && r.hold_q.is_empty());
            assert!(r.hold_in.iter().chain(&r.hold_out).all(|&h| h == -1));
            out.iter().map(|o| o.2.payload).collect()
        };
        assert_eq!(order(false), [10, 20, 10, 20, 10, 20, 10, 20]);
        assert_eq!(order(true), [10, 10, 10, 10, 20, 20, 20, 20]);
        // One packet whose body arrives with a gap: the connection is dropped when the VC
        // runs dry and the late flits still get through.
        let late: Vec<_> = packet(30, 0)
            .into_iter()
            .zip([0u64, 1, 8, 9])
            .map(|(f, t)| (t, 0, f))
            .collect();
        let c = RouterConfig {
            hold_switch_for_packet: true,
            ..cfg()
        };
        let mut r = IqRouter::new(0, &c).unwrap();
        let out = run(&mut r, &late, 30);
        assert_eq!(out.len(), 4);
        assert!(r.is_idle() && r.hold_in.iter().all(|&h| h == -1));
    }

    #[test]
    fn two_inputs_one_output_serialise() {
        let mut r = IqRouter::new(0, &cfg()).unwrap();
        let a = Flit::new(1, 1, true, true);
        let mut b = Flit::new(2, 1, true, true);
        b.vc = 1;
        let out = run(&mut r, &[(0, 0, a), (0, 1, b)], 12);
        let times: Vec<u64> = out.iter().map(|o| o.0).collect();
        assert_eq!(times, vec![3, 4]);
    }

    #[test]
    fn higher_priority_wins_vc_allocation_over_round_robin() {
        // One VC per port: both heads want the only VC of output 1. With equal priorities
        // the round-robin pointer (at input VC 0) picks input 0; a higher priority at input
        // 1 wins instead, in VC allocation and then in switch allocation.
        let c = RouterConfig { vcs: 1, ..cfg() };
        struct OneVc;
        impl RoutingFunction for OneVc {
            fn route(&mut self, _r: u32, _i: usize, f: &Flit) -> Route {
                Route::new(f.dest as u16, 0, 0)
            }
        }
        for (pri1, first) in [(0u16, 1u32), (5, 2)] {
            let mut r = IqRouter::new(0, &c).unwrap();
            let a = Flit::new(1, 1, true, true);
            let mut b = Flit::new(2, 1, true, true);
            b.pri = pri1;
            r.handle_flit(0, a).unwrap();
            r.handle_flit(1, b).unwrap();
            let mut sent = Vec::new();
            for now in 0..12 {
                r.step(now, &mut OneVc).unwrap();
                r.poll_flits(|_, f| sent.push(f.payload));
                r.poll_credits(|_, _| {});
                if now == 4 {
                    // The first packet's credit comes back: the VC frees for the second.
                    r.handle_credit(now + 1, 1, Credit::for_vc(0)).unwrap();
                }
            }
            assert_eq!(sent.first(), Some(&first), "priority {pri1}");
            assert_eq!(sent.len(), 2);
        }
    }

    #[test]
    fn two_element_routes_take_priority_where_the_allocator_honours_it() {
        // One output, two VCs: each head may take VC 1 (priority 1) or VC 0 (priority 0),
        // as min_adapt_mesh routes. Allocators that honour input priority give the first
        // packet VC 1 and the second VC 0, at once; iSLIP ignores it and accepts the VC
        // nearest its pointer (VC 0) first. With VC 1 alone the second packet waits until the
        // first's tail releases it.
        struct Adaptive(bool);
        impl RoutingFunction for Adaptive {
            fn route(&mut self, _r: u32, _i: usize, _f: &Flit) -> Route {
                if self.0 {
                    Route::new(0, 1, 1).or_else(0, 0, 0)
                } else {
                    Route::new(0, 1, 1)
                }
            }
        }
        let cases = [
            (AllocatorKind::SeparableInputFirst, true, [(3, 1), (4, 0)]),
            (AllocatorKind::SeparableOutputFirst, true, [(3, 1), (4, 0)]),
            (AllocatorKind::Select, true, [(3, 1), (4, 0)]),
            (
                AllocatorKind::Wavefront { skip_diags: false },
                true,
                [(3, 1), (4, 0)],
            ),
            (AllocatorKind::Islip { iters: 1 }, true, [(3, 0), (4, 1)]),
            (AllocatorKind::SeparableInputFirst, false, [(3, 1), (5, 1)]),
        ];
        for (kind, alt, want) in cases {
            let c = RouterConfig {
                vc_allocator: kind,
                ..cfg()
            };
            let mut r = IqRouter::new(0, &c).unwrap();
            r.handle_flit(0, Flit::new(1, 0, true, true)).unwrap();
            r.handle_flit(1, Flit::new(2, 0, true, true)).unwrap();
            let mut sent = Vec::new();
            for now in 0..12 {
                r.step(now, &mut Adaptive(alt)).unwrap();
                r.poll_flits(|_, f| sent.push((now, f.vc)));
                r.poll_credits(|_, _| {});
            }
            assert_eq!(sent, want, "{kind:?}, second element {alt}");
        }
        // A second element overlapping the first is refused.
        struct Overlap;
        impl RoutingFunction for Overlap {
            fn route(&mut self, _r: u32, _i: usize, _f: &Flit) -> Route {
                Route::new(0, 0, 1).or_else(0, 1, 1)
            }
        }
        let mut r = IqRouter::new(0, &cfg()).unwrap();
        r.handle_flit(0, Flit::new(1, 0, true, true)).unwrap();
        assert!(matches!(
            r.step(0, &mut Overlap),
            Err(RouterError::BadRoute { port: 0, .. })
        ));
    }

    #[test]
    fn bad_inputs_are_errors_not_panics() {
        let mut r = IqRouter::new(0, &cfg()).unwrap();
        let f = Flit::new(1, 1, true, true);
        assert_eq!(r.handle_flit(5, f), Err(RouterError::BadPort { port: 5 }));
        let mut g = f;
        g.vc = 9;
        assert_eq!(r.handle_flit(0, g), Err(RouterError::BadVc { vc: 9 }));
        r.handle_flit(0, f).unwrap();
        assert_eq!(
            r.handle_flit(0, f),
            Err(RouterError::InputBusy { input: 0 })
        );
        let body = Flit::new(1, 1, false, false);
        r.handle_flit(1, body).unwrap();
        assert!(matches!(
            r.step(0, &mut Direct),
            Err(RouterError::NotHead { input: 1, .. })
        ));
        struct Bad;
        impl RoutingFunction for Bad {
            fn route(&mut self, _r: u32, _i: usize, _f: &Flit) -> Route {
                Route::new(7, 0, 0)
            }
        }
        let mut r = IqRouter::new(0, &cfg()).unwrap();
        r.handle_flit(0, f).unwrap();
        assert!(matches!(
            r.step(0, &mut Bad),
            Err(RouterError::BadRoute { port: 7, .. })
        ));
        assert_eq!(
            r.handle_credit(0, 3, Credit(1)),
            Err(RouterError::BadPort { port: 3 })
        );
    }

    #[test]
    fn overflow_is_reported() {
        let mut c = cfg();
        c.vc_buf_size = 1;
        let mut r = IqRouter::new(0, &c).unwrap();
        r.handle_flit(0, Flit::new(1, 1, true, false)).unwrap();
        r.step(0, &mut Direct).unwrap();
        r.handle_flit(0, Flit::new(1, 1, false, false)).unwrap();
        assert_eq!(
            r.step(1, &mut Direct),
            Err(RouterError::BufferOverflow { input: 0, vc: 0 })
        );
    }

    #[test]
    fn downstream_buffer_size_can_be_set_per_output() {
        let mut r = IqRouter::new(0, &cfg()).unwrap();
        r.set_downstream_vc_buf_size(1, 2, false).unwrap();
        assert_eq!(
            r.set_downstream_vc_buf_size(9, 2, false),
            Err(RouterError::BadPort { port: 9 })
        );
        assert_eq!(
            r.set_downstream_vc_buf_size(0, 0, false),
            Err(RouterError::BadBufferSize {
                output: 0,
                vc_buf_size: 0
            })
        );
        // Five single-flit packets to output 1 (no credits come back): 2 VCs x 2 slots.
        for t in 0..5 {
            let mut x = Flit::new(t, 1, true, true);
            x.vc = (t % 2) as u8;
            r.handle_flit(0, x).unwrap();
            r.step(u64::from(t), &mut Direct).unwrap();
            r.poll_flits(|_, _| {});
            r.poll_credits(|_, _| {});
        }
        for t in 5..20 {
            r.step(t, &mut Direct).unwrap();
            r.poll_flits(|_, _| {});
            r.poll_credits(|_, _| {});
        }
        assert_eq!(r.downstream(1).unwrap().occupancy(), 4);
        assert_eq!(r.flits_inside(), 1);
        assert_eq!(
            r.set_downstream_vc_buf_size(1, 4, false),
            Err(RouterError::OutputBusy { output: 1 })
        );
    }

    #[test]
    fn speculative_saves_a_cycle() {
        let mut c = cfg();
        c.speculative = true;
        let mut r = IqRouter::new(0, &c).unwrap();
        let out = run(&mut r, &[(0, 0, Flit::new(1, 1, true, true))], 10);
        assert_eq!(out[0].0, 2);
    }

    /// The one-cycle pipeline (order-free routing) and the general one give the same
    /// flits, credits and counters, cycle by cycle, under random traffic that obeys flow
    /// control: multi-flit packets, priorities, tail-credit waits, small and output buffers.
    #[test]
    fn one_cycle_pipeline_matches_general_pipeline() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        struct ByDest(usize);
        impl RoutingFunction for ByDest {
            fn route(&mut self, _r: u32, _i: usize, f: &Flit) -> Route {
                let vcs = self.0 as u8;
                let lo = (f.dest >> 16) as u8 % vcs;
                Route::new((f.dest & 0xffff) as u16, lo, vcs - 1)
            }
        }
        let mut fast_runs = 0;
        for case in 0..60 {
            // Every fourth case is wider: input VCs straddle the 64-bit words of the sets.
            // The last two have more than 64 ports (the sparse switch allocator).
            let wide = case % 4 == 1;
            let huge = case >= 58;
            let inputs = if huge {
                65 + rnd(8)
            } else if wide {
                20 + rnd(12)
            } else {
                1 + rnd(6)
            } as usize;
            let outputs = if huge {
                60 + rnd(10)
            } else if wide {
                1 + rnd(24)
            } else {
                1 + rnd(6)
            } as usize;
            let c = RouterConfig {
                inputs,
                outputs,
                vcs: if wide { 3 + rnd(5) } else { 1 + rnd(4) } as usize,
                vc_buf_size: 1 + rnd(4) as usize,
                wait_for_tail_credit: rnd(3) == 0,
                output_buffer_size: if rnd(4) == 0 { Some(1) } else { None },
                ..RouterConfig::default()
            };
            let (v, b) = (c.vcs, c.vc_buf_size);
            let mut fast = IqRouter::new(0, &c).unwrap();
            let mut general = IqRouter::new(0, &c).unwrap();
            assert!(fast.set_order_free_routing(true));
            assert!(!general.set_order_free_routing(false));
            fast_runs += 1;
            let max_len = 1 + rnd(4) as u32;
            let rate = 1 + rnd(10);
            // Sender state per input VC: credits, and the packet being sent (flits left).
            let mut credits = vec![b; inputs * v];
            let mut left = vec![0u32; inputs * v];
            let mut dest = vec![0u32; inputs * v];
            let mut pending: Vec<(u64, usize, Credit)> = Vec::new();
            let mut next_id = 0u32;
            for now in 0..400u64 {
                for &(t, o, cr) in &pending {
                    if t == now {
                        fast.handle_credit(now, o, cr).unwrap();
                        general.handle_credit(now, o, cr).unwrap();
                    }
                }
                pending.retain(|&(t, _, _)| t > now);
                for input in 0..inputs {
                    if now >= 300 || rnd(10) >= rate {
                        continue;
                    }
                    let vc = rnd(v as u64) as usize;
                    let ivc = input * v + vc;
                    if credits[ivc] == 0 {
                        continue;
                    }
                    let head = left[ivc] == 0;
                    if head {
                        left[ivc] = 1 + rnd(u64::from(max_len)) as u32;
                        dest[ivc] = rnd(outputs as u64) as u32 | (rnd(v as u64) as u32) << 16;
                    }
                    left[ivc] -= 1;
                    let mut f = Flit::new(next_id, dest[ivc], head, left[ivc] == 0);
                    next_id += 1;
                    f.vc = vc as u8;
                    if case % 3 == 0 {
                        f.pri = rnd(3) as u16;
                    }
                    credits[ivc] -= 1;
                    fast.handle_flit(input, f).unwrap();
                    general.handle_flit(input, f).unwrap();
                }
                fast.step(now, &mut ByDest(v)).unwrap();
                general.step(now, &mut ByDest(v)).unwrap();
                let (mut a, mut g) = (Vec::new(), Vec::new());
                fast.poll_flits(|o, f| a.push((o, f)));
                general.poll_flits(|o, f| g.push((o, f)));
                assert_eq!(a, g, "case {case} cycle {now}: flits");
                for &(o, f) in &a {
                    // The downstream buffer drains after a random delay.
                    pending.push((now + 1 + rnd(4), o, Credit::for_vc(f.vc)));
                }
                let (mut ca, mut cg) = (Vec::new(), Vec::new());
                fast.poll_credits(|i, cr| ca.push((i, cr)));
                general.poll_credits(|i, cr| cg.push((i, cr)));
                assert_eq!(ca, cg, "case {case} cycle {now}: credits");
                for &(i, cr) in &ca {
                    for vc in 0..v {
                        if cr.0 & (1u64 << vc) != 0 {
                            credits[i * v + vc] += 1;
                        }
                    }
                }
                assert_eq!(fast.stats(), general.stats(), "case {case} cycle {now}");
                assert_eq!(fast.is_idle(), general.is_idle(), "case {case} cycle {now}");
                assert_eq!(fast.flits_inside(), general.flits_inside());
            }
            assert!(fast.stats().flits_switched > 0, "case {case} moved nothing");
        }
        assert_eq!(fast_runs, 60);
        // Configurations outside the one-cycle pipeline keep the general one.
        let mut r = IqRouter::new(
            0,
            &RouterConfig {
                speculative: true,
                ..cfg()
            },
        )
        .unwrap();
        assert!(!r.set_order_free_routing(true));
        let mut r = IqRouter::new(0, &cfg()).unwrap();
        r.handle_flit(0, Flit::new(1, 1, true, true)).unwrap();
        assert!(
            !r.set_order_free_routing(true),
            "only before the first flit"
        );
    }

    #[test]
    fn internal_speedup_two_halves_the_pipeline() {
        let mut c = cfg();
        c.internal_speedup = 2.0;
        let mut r = IqRouter::new(0, &c).unwrap();
        let out = run(&mut r, &[(0, 0, Flit::new(1, 1, true, true))], 10);
        assert_eq!(out[0].0, 1);
    }
}
