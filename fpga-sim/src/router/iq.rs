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

use super::alloc::{supersedes, SwitchAllocator};
use super::buffer_state::BufferState;
use super::config::{RouterConfig, RouterConfigError};
use super::flit::{Credit, Flit, Route};
use super::ring::Ring;
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
}

const PENDING: i64 = -1;
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

#[derive(Clone, Copy)]
struct InputVc {
    state: VcState,
    route: Route,
    out_port: u16,
    out_vc: u8,
    head: u16,
    len: u16,
}

#[derive(Clone, Copy)]
struct IvcInfo {
    input: u32,
    vc: u32,
    exp_in: u32,
}

/// A bid for an output VC: the bidding input VC and its priority (`ivc == NONE`: no bid).
#[derive(Clone, Copy)]
struct Bid {
    ivc: u32,
    pri: i32,
}

const NONE: u32 = u32::MAX;

/// Bits `lo..=hi`.
#[inline]
fn range_mask(lo: u8, hi: u8) -> u64 {
    (!0u64 >> (63 - u32::from(hi))) & (!0u64 << u32::from(lo))
}

#[derive(Clone, Copy, Default)]
struct StageItem {
    time: i64,
    ivc: u32,
    result: i32,
}

#[derive(Clone, Copy, Default)]
struct XbarItem {
    time: i64,
    flit: Flit,
    out: u32,
}

#[derive(Clone, Copy, Default)]
struct CreditItem {
    time: i64,
    credit: Credit,
    output: u32,
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
    in_speedup: usize,
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
    output_buffer_size: Option<usize>,

    vcs: Vec<InputVc>,
    bufs: Vec<Flit>,
    next_buf: Vec<BufferState>,
    in_flit: Vec<Flit>,
    in_mask: Vec<u64>,
    in_any: bool,

    route_q: Ring<StageItem>,
    va_q: Ring<StageItem>,
    sa_q: Ring<StageItem>,
    xbar_q: Ring<XbarItem>,
    proc_credits: Ring<CreditItem>,

    out_buf: Vec<Ring<Flit>>,
    out_pending: usize,
    out_mask: Vec<u64>,
    credit_buf: Vec<Ring<Credit>>,
    credit_pending: usize,
    credit_mask: Vec<u64>,
    step_credit: Vec<u64>,
    step_credit_inputs: Vec<u32>,

    /// Per input VC: (input, vc, expanded switch input).
    ivc_info: Vec<IvcInfo>,
    /// Expanded switch output -> output port.
    exp_out_port: Vec<u32>,
    /// Input port -> its slice of the expanded outputs (`input % output_speedup`).
    in_mod_os: Vec<u32>,
    alloc_iters: usize,
    /// VC allocation: per input VC the round-robin pointer over output VCs, and the grant of
    /// this step (`port << 6 | vc`, or `NONE`).
    va_in_ptr: Vec<u32>,
    va_grant: Vec<u32>,
    va_granted: Vec<u32>,
    /// Per output VC: round-robin pointer over input VCs and the best bid of this step.
    va_out_ptr: Vec<u32>,
    va_out_best: Vec<Bid>,
    va_touched: Vec<(u32, u32)>,
    /// Per output port: output VCs granted this step (for iterations after the first).
    va_taken: Vec<u64>,
    va_taken_ports: Vec<u32>,
    sw_alloc: SwitchAllocator,
    sw_rr_offset: Vec<u32>,

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
            in_speedup: cfg.input_speedup,
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
            output_buffer_size: cfg.output_buffer_size,
            vcs: vec![
                InputVc {
                    state: VcState::Idle,
                    route: Route::default(),
                    out_port: 0,
                    out_vc: 0,
                    head: 0,
                    len: 0,
                };
                ivcs
            ],
            bufs: vec![Flit::default(); ivcs * b],
            next_buf: (0..n_out)
                .map(|_| BufferState::new(v, b, cfg.wait_for_tail_credit))
                .collect(),
            in_flit: vec![Flit::default(); n_in],
            in_mask: vec![0; n_in.div_ceil(64)],
            in_any: false,
            route_q: Ring::with_capacity(ivcs),
            va_q: Ring::with_capacity(ivcs),
            sa_q: Ring::with_capacity(ivcs),
            xbar_q: Ring::with_capacity(xbar_cap),
            proc_credits: Ring::with_capacity(n_out * (cfg.credit_delay as usize + 2)),
            out_buf: (0..n_out).map(|_| Ring::with_capacity(out_cap)).collect(),
            out_pending: 0,
            out_mask: vec![0; n_out.div_ceil(64)],
            credit_buf: (0..n_in).map(|_| Ring::with_capacity(4)).collect(),
            credit_pending: 0,
            credit_mask: vec![0; n_in.div_ceil(64)],
            step_credit: vec![0; n_in],
            step_credit_inputs: Vec::with_capacity(n_in),
            ivc_info: (0..ivcs)
                .map(|i| IvcInfo {
                    input: (i / v) as u32,
                    vc: (i % v) as u32,
                    exp_in: ((i / v) * cfg.input_speedup + (i % v) % cfg.input_speedup) as u32,
                })
                .collect(),
            exp_out_port: (0..exp_out)
                .map(|e| (e / cfg.output_speedup) as u32)
                .collect(),
            in_mod_os: (0..n_in).map(|i| (i % cfg.output_speedup) as u32).collect(),
            alloc_iters: cfg.alloc_iters,
            va_in_ptr: vec![0; ivcs],
            va_grant: vec![NONE; ivcs],
            va_granted: Vec::with_capacity(ivcs),
            va_out_ptr: vec![0; n_out * v],
            va_out_best: vec![Bid { ivc: NONE, pri: 0 }; n_out * v],
            va_touched: Vec::with_capacity(n_out * v),
            va_taken: vec![0; n_out],
            va_taken_ports: Vec::with_capacity(n_out),
            sw_alloc: SwitchAllocator::new(exp_in, exp_out, v, cfg.alloc_iters),
            sw_rr_offset: (0..exp_in)
                .map(|i| (i % cfg.input_speedup) as u32)
                .collect(),
            active: false,
            partial_internal: 0.0,
            stats: RouterStats::default(),
        })
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
        !self.active && !self.in_any && self.out_pending == 0 && self.credit_pending == 0
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
            + self.xbar_q.len()
            + self.out_buf.iter().map(Ring::len).sum::<usize>()
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
        if self.credit_delay == 0 && self.internal_speedup >= 1.0 {
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
        self.partial_internal += self.internal_speedup;
        while self.partial_internal >= 1.0 {
            self.internal_step(now as i64, routing)?;
            self.partial_internal -= 1.0;
        }
        Ok(())
    }

    /// Write phase: hand out the flit at the head of each non-empty output queue.
    pub fn poll_flits(&mut self, mut send: impl FnMut(usize, Flit)) {
        if self.out_pending == 0 {
            return;
        }
        for w in 0..self.out_mask.len() {
            let mut m = self.out_mask[w];
            while m != 0 {
                let o = w * 64 + m.trailing_zeros() as usize;
                m &= m - 1;
                let q = &mut self.out_buf[o];
                if let Some(f) = q.pop_front() {
                    send(o, f);
                }
                if q.is_empty() {
                    self.out_pending -= 1;
                    self.out_mask[w] &= !(1u64 << (o % 64));
                }
            }
        }
    }

    /// Write phase: hand out the credit at the head of each non-empty input credit queue.
    pub fn poll_credits(&mut self, mut send: impl FnMut(usize, Credit)) {
        if self.credit_pending == 0 {
            return;
        }
        for w in 0..self.credit_mask.len() {
            let mut m = self.credit_mask[w];
            while m != 0 {
                let i = w * 64 + m.trailing_zeros() as usize;
                m &= m - 1;
                let q = &mut self.credit_buf[i];
                if let Some(c) = q.pop_front() {
                    send(i, c);
                }
                if q.is_empty() {
                    self.credit_pending -= 1;
                    self.credit_mask[w] &= !(1u64 << (i % 64));
                }
            }
        }
    }

    // ---- internals -------------------------------------------------------------------

    #[inline]
    fn front(&self, ivc: usize) -> Flit {
        let vc = &self.vcs[ivc];
        self.bufs[ivc * self.b + vc.head as usize]
    }

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

        if !self.route_q.is_empty() {
            evaluate_times(&mut self.route_q, now + self.routing_delay - 1);
        }
        for &ivc in &self.va_granted {
            self.va_grant[ivc as usize] = NONE;
        }
        self.va_granted.clear();
        if !self.va_q.is_empty() {
            self.va_evaluate(now);
        }
        self.sw_alloc.clear();
        if !self.sa_q.is_empty() {
            self.sa_evaluate(now);
        }
        if !self.xbar_q.is_empty() {
            let t = now + self.crossbar_delay - 1;
            for k in 0..self.xbar_q.len() {
                let it = self.xbar_q.get_mut(k);
                if it.time >= 0 {
                    break;
                }
                it.time = t;
            }
        }

        if !self.route_q.is_empty() {
            self.route_update(now, routing)?;
            activity |= !self.route_q.is_empty();
        }
        if !self.va_q.is_empty() {
            self.va_update(now)?;
            activity |= !self.va_q.is_empty();
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
            let q = &mut self.credit_buf[i as usize];
            if q.is_empty() {
                self.credit_pending += 1;
                self.credit_mask[i as usize / 64] |= 1u64 << (i % 64);
            }
            q.push_back(Credit(self.step_credit[i as usize]));
            self.step_credit[i as usize] = 0;
        }
        self.step_credit_inputs.clear();
        Ok(())
    }

    fn input_queuing(&mut self, now: i64) -> Result<(), RouterError> {
        if self.in_any {
            self.in_any = false;
            for w in 0..self.in_mask.len() {
                let mut m = self.in_mask[w];
                self.in_mask[w] = 0;
                while m != 0 {
                    let input = w * 64 + m.trailing_zeros() as usize;
                    m &= m - 1;
                    let f = self.in_flit[input];
                    self.enqueue_flit(input, f)?;
                }
            }
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

    #[inline]
    fn enqueue_flit(&mut self, input: usize, f: Flit) -> Result<(), RouterError> {
        let vcn = f.vc as usize;
        let ivc = input * self.v + vcn;
        let b = self.b;
        let st = self.vcs[ivc];
        if st.len as usize >= b {
            return Err(RouterError::BufferOverflow { input, vc: f.vc });
        }
        let slot = st.head as usize + st.len as usize;
        let slot = if slot >= b { slot - b } else { slot };
        self.bufs[ivc * b + slot] = f;
        self.vcs[ivc].len += 1;
        match st.state {
            VcState::Idle => {
                if !f.is_head() || st.len != 0 {
                    return Err(RouterError::NotHead { input, vc: f.vc });
                }
                self.start_packet(ivc, f);
            }
            VcState::Active if st.len == 0 => {
                self.sa_q.push_back(StageItem {
                    time: PENDING,
                    ivc: ivc as u32,
                    result: UNDECIDED,
                });
            }
            _ => {}
        }
        Ok(())
    }

    /// A head flit reached the front of VC `ivc`: start routing it.
    #[inline]
    fn start_packet(&mut self, ivc: usize, head: Flit) {
        let item = StageItem {
            time: PENDING,
            ivc: ivc as u32,
            result: UNDECIDED,
        };
        if self.routing_delay > 0 {
            self.vcs[ivc].state = VcState::Routing;
            self.route_q.push_back(item);
        } else {
            self.vcs[ivc].route = head.la_route;
            self.vcs[ivc].state = VcState::VcAlloc;
            if self.speculative {
                self.sa_q.push_back(item);
            }
            self.va_q.push_back(item);
        }
    }

    fn check_route(&self, r: Route) -> Result<Route, RouterError> {
        if r.port as usize >= self.n_out || r.vc_lo > r.vc_hi || r.vc_hi as usize >= self.v {
            return Err(RouterError::BadRoute {
                port: r.port,
                vc_lo: r.vc_lo,
                vc_hi: r.vc_hi,
            });
        }
        Ok(r)
    }

    fn route_update<R: RoutingFunction>(
        &mut self,
        now: i64,
        routing: &mut R,
    ) -> Result<(), RouterError> {
        while let Some(&it) = self.route_q.front() {
            if it.time < 0 || now < it.time {
                break;
            }
            self.route_q.pop_front();
            let ivc = it.ivc as usize;
            let f = self.front(ivc);
            let r = routing.route(self.id, self.ivc_info[ivc].input as usize, &f);
            self.vcs[ivc].route = self.check_route(r)?;
            self.vcs[ivc].state = VcState::VcAlloc;
            let item = StageItem {
                time: PENDING,
                ivc: it.ivc,
                result: UNDECIDED,
            };
            if self.speculative {
                self.sa_q.push_back(item);
            }
            self.va_q.push_back(item);
        }
        Ok(())
    }

    fn va_evaluate(&mut self, now: i64) {
        let v = self.v as u32;
        let (n_ov, n_iv) = (self.n_out as u32 * v, self.n_in as u32 * v);
        for iter in 0..self.alloc_iters {
            // Input stage: each unmatched input VC picks one available output VC of its
            // route, the first at or after its round-robin pointer.
            for k in 0..self.va_q.len() {
                let it = *self.va_q.get(k);
                if it.time >= 0 {
                    break;
                }
                let ivc = it.ivc as usize;
                if iter == 0 {
                    self.stats.vc_alloc_attempts += 1;
                } else if self.va_grant[ivc] != NONE || it.result < UNDECIDED {
                    continue;
                }
                let route = self.vcs[ivc].route;
                let port = route.port as usize;
                let mut avail =
                    self.next_buf[port].avail_mask() & range_mask(route.vc_lo, route.vc_hi);
                if iter > 0 {
                    avail &= !self.va_taken[port];
                }
                if avail == 0 {
                    if iter == 0 {
                        self.va_q.get_mut(k).result = STALL;
                    }
                    continue;
                }
                let base = port as u32 * v;
                let off = self.va_in_ptr[ivc].wrapping_sub(base);
                let bit = if off < v {
                    let upper = avail & (!0u64 << off);
                    if upper != 0 {
                        upper.trailing_zeros()
                    } else {
                        avail.trailing_zeros()
                    }
                } else {
                    avail.trailing_zeros()
                };
                let ov = base + bit;
                let pri = i32::from(self.front(ivc).pri);
                // Output stage: the output VC keeps the best bid.
                let best = &mut self.va_out_best[ov as usize];
                if best.ivc == NONE {
                    *best = Bid { ivc: it.ivc, pri };
                    self.va_touched.push((ov, (port as u32) << 6 | bit));
                } else if supersedes(
                    it.ivc,
                    pri,
                    best.ivc,
                    best.pri,
                    self.va_out_ptr[ov as usize],
                    n_iv,
                ) {
                    *best = Bid { ivc: it.ivc, pri };
                }
            }
            if self.va_touched.is_empty() {
                break;
            }
            for t in 0..self.va_touched.len() {
                let (ov, packed) = self.va_touched[t];
                let win = std::mem::replace(
                    &mut self.va_out_best[ov as usize],
                    Bid { ivc: NONE, pri: 0 },
                );
                self.va_grant[win.ivc as usize] = packed;
                self.va_granted.push(win.ivc);
                if iter == 0 {
                    self.va_in_ptr[win.ivc as usize] = if ov + 1 == n_ov { 0 } else { ov + 1 };
                    self.va_out_ptr[ov as usize] =
                        if win.ivc + 1 == n_iv { 0 } else { win.ivc + 1 };
                }
                if self.alloc_iters > 1 {
                    let port = (packed >> 6) as usize;
                    if self.va_taken[port] == 0 {
                        self.va_taken_ports.push(port as u32);
                    }
                    self.va_taken[port] |= 1u64 << (packed & 63);
                }
            }
            self.va_touched.clear();
        }
        for &p in &self.va_taken_ports {
            self.va_taken[p as usize] = 0;
        }
        self.va_taken_ports.clear();

        let t = now + self.vc_alloc_delay - 1;
        for k in 0..self.va_q.len() {
            let it = self.va_q.get_mut(k);
            if it.time >= 0 {
                break;
            }
            it.time = t;
            if it.result < UNDECIDED {
                continue;
            }
            let g = self.va_grant[it.ivc as usize];
            it.result = if g == NONE { STALL } else { g as i32 };
        }
        if self.vc_alloc_delay <= 1 {
            return;
        }
        for k in 0..self.va_q.len() {
            let it = self.va_q.get_mut(k);
            if now < it.time {
                break;
            }
            if it.result >= 0 {
                let (port, ovc) = (it.result as usize >> 6, it.result as usize & 63);
                if !self.next_buf[port].is_available_for(ovc) {
                    it.result = STALL;
                }
            }
        }
    }

    fn va_update(&mut self, now: i64) -> Result<(), RouterError> {
        while let Some(&it) = self.va_q.front() {
            if it.time < 0 || now < it.time {
                break;
            }
            self.va_q.pop_front();
            let ivc = it.ivc as usize;
            let item = StageItem {
                time: PENDING,
                ivc: it.ivc,
                result: UNDECIDED,
            };
            if it.result >= 0 {
                let (port, ovc) = (it.result as usize >> 6, it.result as usize & 63);
                self.next_buf[port].take_buffer(ovc, it.ivc)?;
                let st = &mut self.vcs[ivc];
                st.out_port = port as u16;
                st.out_vc = ovc as u8;
                st.state = VcState::Active;
                if !self.speculative {
                    self.sa_q.push_back(item);
                }
            } else {
                self.va_q.push_back(item);
            }
        }
        Ok(())
    }

    #[inline]
    fn out_queue_full(&self, output: usize) -> bool {
        match self.output_buffer_size {
            Some(n) => self.out_buf[output].len() >= n,
            None => false,
        }
    }

    /// Add (or improve) the switch request of VC `ivc` for output `output`.
    #[inline]
    fn sa_add_request(&mut self, ivc: usize, output: usize) {
        let info = self.ivc_info[ivc];
        let (vc, exp_in) = (info.vc as usize, info.exp_in);
        let exp_out = output as u32 * self.out_speedup as u32 + self.in_mod_os[info.input as usize];
        let mut prio = i32::from(self.front(ivc).pri);
        if self.speculative && self.vcs[ivc].state == VcState::VcAlloc {
            prio += i32::MIN;
        }
        self.sw_alloc.bid(
            exp_in,
            exp_out,
            vc as u32,
            prio,
            self.sw_rr_offset[exp_in as usize],
            self.v as u32,
        );
    }

    fn sa_evaluate(&mut self, now: i64) {
        let v = self.v;
        for k in 0..self.sa_q.len() {
            let it = *self.sa_q.get(k);
            if it.time >= 0 {
                break;
            }
            self.stats.sw_alloc_attempts += 1;
            let ivc = it.ivc as usize;
            let st = self.vcs[ivc];
            if st.state == VcState::Active {
                let port = st.out_port as usize;
                if self.next_buf[port].is_full_for(st.out_vc as usize) || self.out_queue_full(port)
                {
                    self.sa_q.get_mut(k).result = STALL;
                    continue;
                }
                self.sa_add_request(ivc, port);
                continue;
            }
            // Speculative bid of a head flit still in VC allocation.
            let route = st.route;
            let port = route.port as usize;
            let dest = &self.next_buf[port];
            let mut elig = false;
            let mut cred = false;
            if self.spec_check_elig {
                let oq_ok = !self.out_queue_full(port);
                for ovc in route.vc_lo..=route.vc_hi {
                    if dest.is_available_for(ovc as usize) && oq_ok {
                        elig = true;
                        if !self.spec_check_cred || !dest.is_full_for(ovc as usize) {
                            cred = true;
                            break;
                        }
                    }
                }
            }
            if (self.spec_check_elig && !elig) || (self.spec_check_cred && !cred) {
                self.sa_q.get_mut(k).result = STALL;
            } else {
                self.sa_add_request(ivc, port);
            }
        }
        self.sw_alloc.allocate();
        let t = now + self.sw_alloc_delay - 1;
        for k in 0..self.sa_q.len() {
            let it = *self.sa_q.get(k);
            if it.time >= 0 {
                break;
            }
            self.sa_q.get_mut(k).time = t;
            if it.result < UNDECIDED {
                continue;
            }
            let info = self.ivc_info[it.ivc as usize];
            let (vc, exp_in) = (info.vc as usize, info.exp_in);
            let mut result = STALL;
            if let Some((exp_out, label)) = self.sw_alloc.grant(exp_in) {
                if label == vc as u32 {
                    let next = vc + self.in_speedup;
                    let next = if next < v { next } else { next % v };
                    self.sw_rr_offset[exp_in as usize] = next as u32;
                    result = exp_out as i32;
                }
            }
            self.sa_q.get_mut(k).result = result;
        }
        if !self.speculative && self.sw_alloc_delay <= 1 {
            return;
        }
        for k in 0..self.sa_q.len() {
            let it = *self.sa_q.get(k);
            if now < it.time {
                break;
            }
            if it.result < 0 {
                continue;
            }
            let output = self.exp_out_port[it.result as usize] as usize;
            let ivc = it.ivc as usize;
            let st = self.vcs[ivc];
            let dest = &self.next_buf[output];
            let result = if self.speculative && st.state == VcState::VcAlloc {
                match self.va_grant[ivc] {
                    NONE => UNDECIDED,
                    g if (g >> 6) as usize != output => STALL,
                    g if dest.is_full_for((g & 63) as usize) => STALL,
                    _ => it.result,
                }
            } else if dest.is_full_for(st.out_vc as usize) {
                STALL
            } else {
                it.result
            };
            self.sa_q.get_mut(k).result = result;
        }
    }

    fn sa_update<R: RoutingFunction>(
        &mut self,
        now: i64,
        routing: &mut R,
    ) -> Result<(), RouterError> {
        let b = self.b;
        while let Some(&it) = self.sa_q.front() {
            if it.time < 0 || now < it.time {
                break;
            }
            self.sa_q.pop_front();
            let ivc = it.ivc as usize;
            let retry = StageItem {
                time: PENDING,
                ivc: it.ivc,
                result: UNDECIDED,
            };
            if it.result < 0 {
                self.sa_q.push_back(retry);
                continue;
            }
            let output = self.exp_out_port[it.result as usize] as usize;
            let info = self.ivc_info[ivc];
            let (input, vcn) = (info.input as usize, info.vc as usize);
            let st = self.vcs[ivc];
            let mut f = self.bufs[ivc * b + st.head as usize];
            {
                let s = &mut self.vcs[ivc];
                s.head = if s.head as usize + 1 == b {
                    0
                } else {
                    s.head + 1
                };
                s.len -= 1;
            }
            f.vc = st.out_vc;
            if self.routing_delay == 0 && f.is_head() {
                f.la_route = routing.lookahead(self.id, output, &f).unwrap_or_default();
            }
            self.next_buf[output].sending_flit(&f)?;
            self.xbar_q.push_back(XbarItem {
                time: PENDING,
                flit: f,
                out: output as u32,
            });
            self.stats.flits_switched += 1;
            if self.step_credit[input] == 0 {
                self.step_credit_inputs.push(input as u32);
            }
            self.step_credit[input] |= 1u64 << vcn;

            if self.vcs[ivc].len == 0 {
                if f.is_tail() {
                    self.vcs[ivc].state = VcState::Idle;
                }
            } else if f.is_tail() {
                let nf = self.front(ivc);
                if !nf.is_head() {
                    return Err(RouterError::NotHead { input, vc: nf.vc });
                }
                self.start_packet(ivc, nf);
            } else {
                self.sa_q.push_back(retry);
            }
        }
        Ok(())
    }

    fn switch_update(&mut self, now: i64) {
        while let Some(&it) = self.xbar_q.front() {
            if it.time < 0 || now < it.time {
                break;
            }
            self.xbar_q.pop_front();
            let q = &mut self.out_buf[it.out as usize];
            if q.is_empty() {
                self.out_pending += 1;
                self.out_mask[it.out as usize / 64] |= 1u64 << (it.out % 64);
            }
            q.push_back(it.flit);
        }
    }
}

/// Stamp the not-yet-evaluated prefix of a stage queue with its completion cycle.
fn evaluate_times(q: &mut Ring<StageItem>, t: i64) {
    for k in 0..q.len() {
        let it = q.get_mut(k);
        if it.time >= 0 {
            break;
        }
        it.time = t;
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

    #[test]
    fn internal_speedup_two_halves_the_pipeline() {
        let mut c = cfg();
        c.internal_speedup = 2.0;
        let mut r = IqRouter::new(0, &c).unwrap();
        let out = run(&mut r, &[(0, 0, Flit::new(1, 1, true, true))], 10);
        assert_eq!(out[0].0, 1);
    }
}
