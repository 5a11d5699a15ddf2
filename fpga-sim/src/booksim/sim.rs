//! BookSim's traffic manager on the engine and the router model: sources, sinks, the
//! per-cycle step, and the measurement rules (warm-up, sample periods, convergence, drain).
//!
//! One BookSim cycle is one engine event (`CYCLE_PS` apart). Within it the phases run in
//! BookSim's order: terminals read what the network delivered; routers read their channels;
//! sources generate and inject; sinks return credits; routers evaluate (idle routers sleep);
//! routers write their outputs.

use std::collections::VecDeque;

use thiserror::Error;

use super::config::{BooksimConfig, Injection, OnOff, PacketKind, SimType, Topology, Traffic};
use super::network::{build, BookSimRouting, Channels, End, Wiring};
use super::rng::{BookSimRng, FastMod, KnuthFloat};
use crate::engine::{run_until, Model, Scheduler};
use crate::router::{BufferState, Credit, Flit, IqRouter, RouterConfigError, RouterError};
use podlink_protocol::time::{Duration, Instant};

/// Cycles a request/reply drain may go without a source still to drain moving its clock
/// (with no measured flit left) before the mode gives up on it. BookSim2 itself sometimes ends
/// such a drain, by its latency threshold, after millions of cycles (8.4 M seen), and
/// sometimes never; the limit is far beyond the first.
pub const DRAIN_STALL_LIMIT: u64 = 1 << 30;

/// The most replies owed at once under `use_read_write` (24 bytes each in the queues).
pub const MAX_REPLIES_OWED: usize = 1 << 24;

/// Engine time of one BookSim cycle (the mode counts cycles; 1 ns keeps the numbers readable).
pub const CYCLE_PS: u64 = 1000;

/// A simulation that cannot continue.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SimError {
    /// The router parameters are invalid.
    #[error("router configuration: {0}")]
    Config(#[from] RouterConfigError),
    /// A router refused what it was handed (a model bug).
    #[error("router {router} at cycle {cycle}: {err}")]
    Router {
        /// Router.
        router: u32,
        /// BookSim time.
        cycle: i64,
        /// What.
        err: RouterError,
    },
    /// The injection buffer state went wrong at a terminal (a model bug).
    #[error("terminal {node} at cycle {cycle}: {err}")]
    Terminal {
        /// Terminal.
        node: u32,
        /// BookSim time.
        cycle: i64,
        /// What.
        err: RouterError,
    },
    /// While draining, no flit arrived anywhere for `cycles` cycles with flits in flight:
    /// the network is deadlocked (possible with `use_read_write` VC ranges that let replies
    /// wait behind requests). Where BookSim2 has no way out of its drain loop (emptying the
    /// network after a simulation, or draining measured packets with `latency_thres`
    /// disabled), it runs forever, printing its deadlock warning; the mode stops.
    #[error(
        "network deadlock at cycle {cycle}: no flit moved for {cycles} cycles with {in_flight} \
         flits in flight (BookSim2 would run forever)"
    )]
    Deadlock {
        /// BookSim time.
        cycle: i64,
        /// Cycles without a flit arriving anywhere.
        cycles: u64,
        /// Flits generated and not retired.
        in_flight: u64,
    },
    /// Draining measured packets under `use_read_write`, no measured flit was left in flight,
    /// yet for `cycles` cycles no source still to drain moved its clock: each kept serving
    /// replies it owed (a reply does not move the clock) or could not inject, so the drain
    /// could not end. BookSim2 runs such a configuration forever; the mode stops.
    #[error(
        "the drain cannot end at cycle {cycle}: for {cycles} cycles none of the {sources} \
         sources still to drain moved its clock (each serves replies it owes or cannot \
         inject; BookSim2 would run forever)"
    )]
    DrainStalled {
        /// BookSim time.
        cycle: i64,
        /// Cycles without a clock step.
        cycles: u64,
        /// Sources not drained.
        sources: usize,
    },
    /// Under `use_read_write`, more replies were owed than the limit ([`MAX_REPLIES_OWED`]
    /// by default): requests arrive faster than their replies can leave (BookSim2 keeps every
    /// one; the mode stops rather than grow without bound).
    #[error(
        "{owed} replies owed at cycle {cycle}, more than the {limit} the mode keeps \
         (requests arrive faster than their replies leave)"
    )]
    TooManyReplies {
        /// BookSim time.
        cycle: i64,
        /// Replies owed.
        owed: usize,
        /// The limit.
        limit: usize,
    },
    /// A packet reached the wrong terminal (a routing bug).
    #[error("packet for terminal {want} ejected at terminal {got}")]
    Misrouted {
        /// Destination.
        want: u32,
        /// Where it arrived.
        got: u32,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    WarmingUp,
    Running,
    Draining,
}

/// Running sum, count, minimum and maximum (BookSim's `Stats`, without the histogram).
#[derive(Clone, Copy, Debug)]
pub struct Stat {
    /// Samples.
    pub n: u64,
    /// Sum.
    pub sum: f64,
    /// Minimum (NaN when empty).
    pub min: f64,
    /// Maximum (NaN when empty).
    pub max: f64,
}

impl Default for Stat {
    /// No samples: BookSim's `Stats::Clear` sets the minimum to a quiet NaN and the maximum
    /// to its negation, so an empty maximum prints as `-nan` and an empty minimum as `nan`.
    fn default() -> Self {
        Stat {
            n: 0,
            sum: 0.0,
            min: f64::NAN,
            max: -f64::NAN,
        }
    }
}

impl Stat {
    /// Mean (a negative NaN when empty, as BookSim computes it on x86).
    pub fn avg(&self) -> f64 {
        if self.n == 0 {
            // BookSim's 0.0 / 0.0 on x86 is the default NaN, sign bit set (printed `-nan`);
            // spelled out so that constant folding cannot give the other sign.
            return -f64::NAN;
        }
        self.sum / self.n as f64
    }
}

/// The per-packet statistics of the current measurement, in integers (every value is a
/// whole number of cycles or hops): the sums are the ones [`Stat`] would accumulate in
/// floating point (exact below 2^53). Copied into [`SimResult`] after every run of cycles.
#[derive(Clone, Copy)]
struct PacketStats {
    n: u64,
    /// Packet latency, network latency, fragmentation, hops.
    sum: [i64; 4],
    min: [i64; 4],
    max: [i64; 4],
}

impl PacketStats {
    const EMPTY: PacketStats = PacketStats {
        n: 0,
        sum: [0; 4],
        min: [i64::MAX; 4],
        max: [i64::MIN; 4],
    };

    #[inline]
    #[allow(clippy::needless_range_loop)]
    fn add(&mut self, v: [i64; 4]) {
        self.n += 1;
        // A fixed four-iteration loop the compiler unrolls (the iterator form does not).
        for k in 0..4 {
            self.sum[k] += v[k];
            // Extremes rarely move: branches predict better than selects.
            if v[k] < self.min[k] {
                self.min[k] = v[k];
            }
            if v[k] > self.max[k] {
                self.max[k] = v[k];
            }
        }
    }

    fn stat(&self, k: usize) -> Stat {
        if self.n == 0 {
            return Stat::default();
        }
        Stat {
            n: self.n,
            sum: self.sum[k] as f64,
            min: self.min[k] as f64,
            max: self.max[k] as f64,
        }
    }
}

/// The packets in flight and what retiring them measures.
struct Ledger {
    packets: Vec<Packet>,
    /// Routing state by packet slot ([`BookSimRouting::intm`]: two-phase routing's, the
    /// balanced torus's partition); empty for other routing functions.
    intm: Vec<u32>,
    /// Whether routing keeps state per packet (`intm` then grows with `packets`).
    two_phase: bool,
    free: Vec<u32>,
    /// Flits generated and not yet retired, and the sum of their creation times.
    in_flight: u64,
    in_flight_ctime: i64,
    /// Of those, flits of measured packets.
    measured_in_flight: u64,
    pstats: PacketStats,
    /// Flits of retired packets.
    retired_flits: u64,
    /// Flits per packet by kind code (0: the configuration's `packet_size`; 1 to 4: the
    /// `use_read_write` kinds, [`PacketKind`] + 1; else 1 to n: the sizes of a packet-size
    /// mix).
    sizes: Vec<u32>,
    /// Whether packets are requests and replies (`use_read_write`).
    read_write: bool,
    /// A flit retired since the flag was last cleared (BookSim resets its deadlock timer).
    retired_any: bool,
    /// Replies owed by requests whose tails were ejected this cycle: (the terminal that
    /// owes it, the reply). They join the terminals' queues after this cycle's generation,
    /// as BookSim retires flits after `_Inject`.
    new_replies: Vec<(u32, Reply)>,
}

/// A reply owed (BookSim's `PacketReplyInfo`).
#[derive(Clone, Copy, Debug)]
struct Reply {
    /// The requester.
    source: u32,
    /// When the request's tail was ejected (the reply's creation time).
    time: i64,
    /// Whether the request was measured.
    record: bool,
    /// The reply's kind code.
    kind: u32,
}

impl Ledger {
    /// A packet of `size` flits from the source and kind in `src_rec` to `dest`, created at
    /// `ctime`, enters: a slot for it, its flits counted in flight, and the source's partial
    /// packet.
    #[inline]
    fn start(&mut self, src_rec: u32, dest: u32, ctime: i64, size: u32) -> Partial {
        let p = Packet {
            src_rec,
            dest,
            ctime,
            itime: 0,
            head_atime: 0,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                if let Some(old) = self.packets.get_mut(s as usize) {
                    *old = p;
                }
                s
            }
            None => {
                self.packets.push(p);
                if self.two_phase {
                    self.intm.push(0);
                }
                (self.packets.len() - 1) as u32
            }
        };
        self.in_flight += u64::from(size);
        self.in_flight_ctime += i64::from(size) * ctime;
        if p.record() {
            self.measured_in_flight += u64::from(size);
        }
        Partial {
            slot,
            sent: 0,
            vc: -1,
            dest,
            size,
        }
    }

    /// Flit `f` reached terminal `n` at `time`; a tail retires its packet (measured if it
    /// is `record`ed, or if `record_all`, during warm-up).
    #[inline]
    fn retire(
        &mut self,
        n: u32,
        f: Flit,
        time: i64,
        record_all: bool,
        wiring: &Wiring,
    ) -> Result<(), SimError> {
        self.retired_any = true;
        let slot = f.payload as usize;
        let p = &mut self.packets[slot];
        if f.is_head() && p.dest != n {
            return Err(SimError::Misrouted {
                want: p.dest,
                got: n,
            });
        }
        self.in_flight -= 1;
        self.in_flight_ctime -= p.ctime;
        if p.record() {
            self.measured_in_flight -= 1;
        }
        if f.is_head() {
            p.head_atime = time;
        }
        if f.is_tail() {
            let p = *p;
            let kind = p.kind();
            let size = self.sizes.get(kind as usize).copied().unwrap_or(1);
            if record_all || p.record() {
                let hops = match self.intm.get(slot) {
                    Some(&im) => wiring.hops_via(p.src() as usize, im, p.dest as usize),
                    None => wiring.hops(p.src() as usize, p.dest as usize),
                };
                let hops = i64::from(hops);
                self.pstats.add([
                    time - p.ctime,
                    time - p.itime,
                    (time - p.head_atime) - i64::from(size - 1),
                    hops,
                ]);
            }
            let rw_kind = kind.checked_sub(1).filter(|_| self.read_write);
            if let Some(k) = rw_kind.map(|k| PacketKind::ALL[k as usize & 3]) {
                if k.is_request() {
                    self.new_replies.push((
                        n,
                        Reply {
                            source: p.src(),
                            time,
                            record: p.record(),
                            kind: k.reply() as u32 + 1,
                        },
                    ));
                }
            }
            self.free.push(slot as u32);
            self.retired_flits += u64::from(size);
        }
        Ok(())
    }
}

/// A packet in flight: 32 bytes (two per cache line). `src_rec` holds the source (bits 0 to
/// 19; at most 2^20 terminals), the kind code (bits 20 to 30: 0 for a packet of the
/// configuration's one size, else under `use_read_write` [`PacketKind`] + 1, or the size's
/// number in a packet-size mix, from 1) and, in bit 31, whether the packet is measured
/// (`record`).
#[derive(Clone, Copy, Default)]
pub struct Packet {
    ctime: i64,
    itime: i64,
    head_atime: i64,
    src_rec: u32,
    dest: u32,
}

const RECORD: u32 = 1 << 31;
const KIND_SHIFT: u32 = 20;
const KIND: u32 = 0x7ff << KIND_SHIFT;

impl Packet {
    /// A packet from `src` (for routing tests).
    #[cfg(test)]
    pub(crate) fn from_source(src: u32) -> Self {
        Packet {
            src_rec: src,
            ..Packet::default()
        }
    }

    /// The source terminal.
    #[inline]
    pub fn src(&self) -> u32 {
        self.src_rec & !(RECORD | KIND)
    }

    /// The kind code: 0 for BookSim's `ANY_TYPE`, else [`PacketKind`] + 1.
    #[inline]
    pub fn kind(&self) -> u32 {
        (self.src_rec & KIND) >> KIND_SHIFT
    }

    #[inline]
    fn record(&self) -> bool {
        self.src_rec & RECORD != 0
    }
}

/// The packet a source is injecting (`slot == NO_PACKET`: none).
#[derive(Clone, Copy)]
struct Partial {
    slot: u32,
    sent: u32,
    vc: i32,
    dest: u32,
    /// Flits in the packet.
    size: u32,
}

const NO_PACKET: u32 = u32::MAX;

impl Partial {
    const NONE: Partial = Partial {
        slot: NO_PACKET,
        sent: 0,
        vc: -1,
        dest: 0,
        size: 0,
    };
}

/// BookSim's `OnOffInjectionProcess`: each source is on or off. A trial first moves the
/// state (an on source stays on if `RandomFloat() >= beta`, an off source turns on if
/// `RandomFloat() < alpha`), then, when on, injects if `RandomFloat() < r1`: one or two
/// fractions per trial, from the same generator as Bernoulli's.
struct OnOffSources {
    alpha: f64,
    beta: f64,
    r1: f64,
    initial: Vec<bool>,
    on: Vec<bool>,
}

impl OnOffSources {
    fn new(p: &OnOff, rate: f64) -> Self {
        // The constructor derives the one parameter left unset (negative) from the rate.
        let (mut alpha, mut beta, mut r1) = (p.alpha, p.beta, p.r1);
        if alpha < 0.0 {
            alpha = beta * rate / (r1 - rate);
        } else if beta < 0.0 {
            beta = alpha * (r1 - rate) / rate;
        } else {
            r1 = rate * (alpha + beta) / alpha;
        }
        OnOffSources {
            alpha,
            beta,
            r1,
            initial: p.initial.clone(),
            on: p.initial.clone(),
        }
    }

    /// Back to the initial states (BookSim resets the process before each simulation).
    fn reset(&mut self) {
        self.on.clone_from(&self.initial);
    }

    /// `test(source)`.
    #[inline]
    fn trial(&mut self, n: usize, float: &mut KnuthFloat) -> bool {
        let Some(on) = self.on.get_mut(n) else {
            return false;
        };
        *on = if *on {
            float.fraction() >= self.beta
        } else {
            float.fraction() < self.alpha
        };
        *on && float.fraction() < self.r1
    }

    /// Every idle source's trials for this cycle, in node order, with the same clock and
    /// drain bookkeeping as the Bernoulli path in [`Sim::generate`] (one trial for a source
    /// caught up with its clock; a lagging source tries cycle by cycle until it succeeds or
    /// catches up).
    #[allow(clippy::too_many_arguments)]
    fn trials(
        &mut self,
        sources: &mut Sources,
        float: &mut KnuthFloat,
        nodes: usize,
        time: i64,
        draining: bool,
        drain_time: i64,
        include_queuing: bool,
    ) {
        let drained_now = draining && time + 1 > drain_time;
        let words = sources.busy.iter().zip(sources.born.iter_mut());
        let words = words.zip(sources.lag.iter_mut());
        for (w, (((&busy, born_w), lag_w), chunk)) in words.zip(sources.term.iter_mut()).enumerate()
        {
            let valid = if (w + 1) * 64 <= nodes {
                !0u64
            } else {
                (1u64 << (nodes % 64)) - 1
            };
            let mut idle = !busy & valid;
            let mut born = 0u64;
            while idle != 0 {
                let b = idle.trailing_zeros() as usize;
                idle &= idle - 1;
                let (bit, n) = (1u64 << b, w * 64 + b);
                let t = &mut chunk[b];
                if *lag_w & bit == 0 {
                    if drained_now {
                        t.qdrained = true;
                    }
                    born |= u64::from(self.trial(n, float)) << b;
                    continue;
                }
                while t.qtime <= time {
                    let q = t.qtime;
                    t.qtime += 1;
                    if self.trial(n, float) {
                        born |= bit;
                        t.born_ctime = if include_queuing { q } else { time };
                        break;
                    }
                }
                if t.qtime == time + 1 && born & bit == 0 {
                    *lag_w &= !bit;
                }
                if draining && t.qtime > drain_time {
                    t.qdrained = true;
                }
            }
            *born_w = born;
        }
    }
}

/// One terminal's source state and counters.
#[derive(Clone, Copy)]
struct Terminal {
    /// The source's own clock (BookSim's `_qtime`).
    qtime: i64,
    /// Scratch of [`Sim::generate`]: creation time of the packet born this cycle.
    born_ctime: i64,
    pkt: Partial,
    last_vc: i32,
    qdrained: bool,
    /// Flits and packets injected and ejected since the statistics were cleared (copied into
    /// [`SimResult`] after every run of cycles).
    sent_flits: u64,
    sent_packets: u64,
    accepted_flits: u64,
    accepted_packets: u64,
}

impl Terminal {
    const NEW: Terminal = Terminal {
        qtime: 0,
        born_ctime: 0,
        pkt: Partial::NONE,
        last_vc: -1,
        qdrained: false,
        sent_flits: 0,
        sent_packets: 0,
        accepted_flits: 0,
        accepted_packets: 0,
    };
}

/// The terminals, in chunks of 64 that line up with the words of the bitmasks: a loop over
/// a mask word indexes its chunk with the bit number, which needs no bounds check.
struct Sources {
    nodes: usize,
    term: Vec<[Terminal; 64]>,
    /// Credit state of each injection channel's VCs.
    buf: Vec<[BufferState; 64]>,
    /// Bit per source: it holds a packet (`pkt.slot != NO_PACKET`).
    busy: Vec<u64>,
    /// Scratch of [`Sim::generate`]: bit per source whose trial succeeded this cycle.
    born: Vec<u64>,
    /// Bit per source whose clock `qtime` is stored: busy sources, and idle ones behind
    /// the simulation's clock. Every other source is idle with `qtime == time` at
    /// generation, and its stored `qtime` is stale.
    lag: Vec<u64>,
}

impl Sources {
    /// Terminal `n`.
    #[inline]
    fn term(&mut self, n: usize) -> Option<&mut Terminal> {
        self.term.get_mut(n / 64).map(|c| &mut c[n % 64])
    }

    /// Every terminal, in node order.
    fn all(&mut self) -> impl Iterator<Item = &mut Terminal> {
        let nodes = self.nodes;
        self.term.iter_mut().flatten().take(nodes)
    }
}

/// Per-simulation results (one of `sim_count`).
#[derive(Clone, Debug, Default)]
pub struct SimResult {
    /// Packet latency (generation to tail ejection).
    pub plat: Stat,
    /// Network latency (head injection to tail ejection).
    pub nlat: Stat,
    /// Fragmentation (cycles the tail trails a back-to-back packet).
    pub frag: Stat,
    /// Routers traversed.
    pub hops: Stat,
    /// Measurement window, cycles (`drain_time - reset_time`).
    pub window: f64,
    /// Flits injected per node in the window.
    pub sent_flits: Vec<u64>,
    /// Packets injected per node in the window.
    pub sent_packets: Vec<u64>,
    /// Flits ejected per node in the window.
    pub accepted_flits: Vec<u64>,
    /// Packets ejected per node in the window.
    pub accepted_packets: Vec<u64>,
    /// Cycles simulated including drains ("Time taken").
    pub time_taken: i64,
}

impl SimResult {
    fn rate(v: &[u64], window: f64) -> (f64, f64, f64) {
        let sum: u64 = v.iter().sum();
        let min = v.iter().copied().min().unwrap_or(0);
        let max = v.iter().copied().max().unwrap_or(0);
        (
            sum as f64 / window / v.len() as f64,
            min as f64 / window,
            max as f64 / window,
        )
    }

    /// (average per node, minimum node, maximum node) accepted flits per cycle.
    pub fn accepted_flit_rate(&self) -> (f64, f64, f64) {
        Self::rate(&self.accepted_flits, self.window)
    }

    /// Same for injected flits.
    pub fn sent_flit_rate(&self) -> (f64, f64, f64) {
        Self::rate(&self.sent_flits, self.window)
    }

    /// Same for accepted packets.
    pub fn accepted_packet_rate(&self) -> (f64, f64, f64) {
        Self::rate(&self.accepted_packets, self.window)
    }

    /// Same for injected packets.
    pub fn sent_packet_rate(&self) -> (f64, f64, f64) {
        Self::rate(&self.sent_packets, self.window)
    }
}

/// What one sample period measured (BookSim's per-period `DisplayStats`).
#[derive(Clone, Copy, Debug)]
pub struct SampleReport {
    /// Periods run so far in this simulation (1-based).
    pub phase: u32,
    /// Still warming up.
    pub warming_up: bool,
    /// Average packet latency so far.
    pub latency: f64,
    /// Accepted flits per node per cycle so far.
    pub accepted: f64,
    /// Relative latency change from the previous period.
    pub latency_change: f64,
    /// Relative throughput change.
    pub accepted_change: f64,
    /// Flits in flight (source queues included).
    pub in_flight: u64,
}

/// A callback run after each sample period.
pub type SampleHook = Box<dyn FnMut(&SampleReport)>;

/// The outcome of a run.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// Every simulation converged (or ran out of samples while measuring).
    Done(Vec<SimResult>),
    /// Latency passed `latency_thres` (or warm-up never ended): BookSim's "Simulation
    /// unstable". `last` holds what was measured up to the abort.
    Unstable {
        /// Why.
        reason: String,
        /// Measurements up to the abort.
        last: Box<SimResult>,
    },
}

/// Work done, for the speed report.
#[derive(Clone, Copy, Debug, Default)]
pub struct Work {
    /// Cycles simulated.
    pub cycles: u64,
    /// Flits ejected.
    pub flits: u64,
    /// Engine events executed.
    pub events: u64,
}

/// A BookSim-comparable simulation: network, terminals and measurement state.
pub struct Sim {
    cfg: BooksimConfig,
    wiring: Wiring,
    routers: Vec<IqRouter>,
    flits: Channels<Flit>,
    credits: Channels<Credit>,
    /// Destination of each source under a permutation traffic pattern (`None`: uniform).
    dest_table: Option<Vec<u32>>,
    /// The on/off injection process (`None`: Bernoulli).
    onoff: Option<OnOffSources>,
    rng: BookSimRng,
    /// `packet_rate` as an integer threshold on the fraction generator's raw values.
    rate_threshold: u64,
    sources: Sources,
    ledger: Ledger,
    /// Under `use_read_write`, each terminal's replies owed, oldest first (BookSim's
    /// `_repliesPending`); empty otherwise.
    replies: Vec<VecDeque<Reply>>,
    /// Replies owed in all, and the most allowed ([`MAX_REPLIES_OWED`] unless lowered).
    replies_owed: usize,
    max_replies_owed: usize,
    time: i64,
    global: u64,
    state: State,
    empty_network: bool,
    drain_time: i64,
    reset_time: i64,
    cur: SimResult,
    deadlock_timer: i64,
    /// Consecutive cycles in which no flit arrived anywhere while flits were in flight.
    still: u64,
    /// [`Sim::still`] at which the network counts as deadlocked: far beyond the longest a
    /// network that moves can go without a flit arriving (a flit's pipeline, its channel and
    /// the credit's way back).
    still_limit: u64,
    /// Under `use_read_write`: the last cycle in which a source not yet drained moved its
    /// clock (the drain ends only when every source's clock passes the drain's start).
    clock_moved_at: i64,
    /// Cycles of such a stall after which the drain stops ([`DRAIN_STALL_LIMIT`] unless
    /// lowered).
    drain_stall_limit: u64,
    credits_in_channels: i64,
    work: Work,
    error: Option<SimError>,
    sched: Option<Scheduler<()>>,
    /// Called after each sample period.
    pub on_sample: Option<SampleHook>,
}

impl Sim {
    /// Build the network and terminals of `cfg`.
    pub fn new(cfg: BooksimConfig) -> Result<Self, SimError> {
        let (mut wiring, routers) = build(cfg.topology.clone(), cfg.link_latency, &cfg.router)?;
        match &cfg.read_write {
            // min_dragonflynew picks VCs by phase and ignores packet types.
            Some(rw) if !matches!(cfg.topology, Topology::DragonFly { .. }) => {
                wiring.set_kind_vcs(rw.vcs);
            }
            _ => {}
        }
        let max_latency = wiring.max_latency();
        // Validated with the configuration; an out-of-range table cannot get here.
        let dest_table = cfg.traffic.table(wiring.nodes).unwrap_or(None);
        let nodes = wiring.nodes;
        let chans = wiring.src.len();
        // Every packet in flight holds a buffer slot, a channel or an output-queue slot (or
        // waits at its source): reserve for all of them so the tables never grow mid-run.
        let slots: usize = routers.iter().map(IqRouter::inputs).sum::<usize>()
            * cfg.router.vcs
            * cfg.router.vc_buf_size;
        let packet_cap = slots + 2 * (max_latency as usize + 1) * chans + 2 * nodes;
        let vcs = cfg.router.vcs;
        let chunks = nodes.div_ceil(64);
        let buf = BufferState::new(vcs, cfg.router.vc_buf_size, cfg.router.wait_for_tail_credit);
        let sources = Sources {
            nodes,
            term: vec![[Terminal::NEW; 64]; chunks],
            buf: (0..chunks)
                .map(|_| std::array::from_fn(|_| buf.clone()))
                .collect(),
            busy: vec![0; chunks],
            born: vec![0; chunks],
            lag: vec![0; chunks],
        };
        let mut sched = Scheduler::new();
        sched.at(Instant::ZERO, ());
        Ok(Sim {
            rng: BookSimRng::new(cfg.seed),
            rate_threshold: KnuthFloat::threshold(cfg.packet_rate),
            flits: Channels::new(chans, max_latency as usize),
            credits: Channels::new(chans, max_latency as usize),
            dest_table,
            onoff: match &cfg.injection {
                Injection::Bernoulli => None,
                Injection::OnOff(p) => Some(OnOffSources::new(p, cfg.packet_rate)),
            },
            sources,
            ledger: Ledger {
                packets: Vec::with_capacity(packet_cap),
                intm: Vec::new(),
                two_phase: matches!(
                    cfg.topology,
                    Topology::MeshTwoPhase { .. }
                        | Topology::Torus { balanced: true, .. }
                        | Topology::Torus { adaptive: true, .. }
                        | Topology::DragonFly { ugal: true, .. }
                        | Topology::FlatFly { valiant: true, .. }
                        | Topology::CMesh { xy_yx: true, .. }
                ),
                free: Vec::with_capacity(packet_cap),
                in_flight: 0,
                in_flight_ctime: 0,
                measured_in_flight: 0,
                pstats: PacketStats::EMPTY,
                retired_flits: 0,
                retired_any: false,
                sizes: match (&cfg.read_write, &cfg.packet_mix) {
                    (Some(rw), _) => {
                        let z = rw.size;
                        vec![cfg.packet_size, z[0], z[1], z[2], z[3]]
                    }
                    (None, Some(mix)) => std::iter::once(cfg.packet_size)
                        .chain(mix.sizes.iter().copied())
                        .collect(),
                    (None, None) => vec![cfg.packet_size],
                },
                read_write: cfg.read_write.is_some(),
                new_replies: Vec::new(),
            },
            replies_owed: 0,
            max_replies_owed: MAX_REPLIES_OWED,
            replies: if cfg.read_write.is_some() {
                vec![VecDeque::new(); nodes]
            } else {
                Vec::new()
            },
            time: 0,
            global: 0,
            state: State::WarmingUp,
            empty_network: false,
            drain_time: -1,
            reset_time: 0,
            cur: SimResult::default(),
            deadlock_timer: 0,
            still: 0,
            clock_moved_at: 0,
            drain_stall_limit: DRAIN_STALL_LIMIT,
            still_limit: {
                let r = &cfg.router;
                let stages = r.routing_delay
                    + r.vc_alloc_delay
                    + r.sw_alloc_delay
                    + r.st_prepare_delay
                    + r.st_final_delay
                    + r.credit_delay;
                1000 * (stages as u64 + 2 * u64::from(max_latency) + 2) + 10_000
            },
            credits_in_channels: 0,
            work: Work::default(),
            error: None,
            sched: Some(sched),
            on_sample: None,
            wiring,
            routers,
            cfg,
        })
    }

    /// Lower the cycles a request/reply drain may stall (default [`DRAIN_STALL_LIMIT`]).
    pub fn limit_drain_stall(&mut self, cycles: u64) {
        self.drain_stall_limit = cycles.min(DRAIN_STALL_LIMIT);
    }

    /// Lower the most replies owed at once (default [`MAX_REPLIES_OWED`]).
    pub fn limit_replies_owed(&mut self, limit: usize) {
        self.max_replies_owed = limit.min(MAX_REPLIES_OWED);
    }

    /// The configuration.
    pub fn config(&self) -> &BooksimConfig {
        &self.cfg
    }

    /// Counters of router `r`.
    pub fn router_stats(&self, r: usize) -> Option<crate::router::RouterStats> {
        self.routers.get(r).map(IqRouter::stats)
    }

    /// Work done so far.
    pub fn work(&self) -> Work {
        Work {
            events: self.sched.as_ref().map_or(0, Scheduler::executed),
            flits: self.ledger.retired_flits,
            ..self.work
        }
    }

    /// Run `n` cycles on the engine.
    fn run_cycles(&mut self, n: u64) -> Result<(), SimError> {
        if n == 0 {
            return Ok(());
        }
        let until = Instant::from_ps((self.global + n - 1) * CYCLE_PS);
        // The scheduler lives beside the model; lend it out for the run (no allocation).
        if let Some(mut sched) = self.sched.take() {
            run_until(self, &mut sched, until);
            self.sched = Some(sched);
        }
        let ps = &self.ledger.pstats;
        (self.cur.plat, self.cur.nlat) = (ps.stat(0), ps.stat(1));
        (self.cur.frag, self.cur.hops) = (ps.stat(2), ps.stat(3));
        let cur = &mut self.cur;
        let counters = (cur.sent_flits.iter_mut())
            .zip(cur.sent_packets.iter_mut())
            .zip(cur.accepted_flits.iter_mut())
            .zip(cur.accepted_packets.iter_mut());
        for ((((sf, sp), af), ap), t) in counters.zip(self.sources.all()) {
            (*sf, *sp, *af, *ap) = (
                t.sent_flits,
                t.sent_packets,
                t.accepted_flits,
                t.accepted_packets,
            );
        }
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn clear_stats(&mut self) {
        let n = self.wiring.nodes;
        self.cur = SimResult {
            sent_flits: vec![0; n],
            sent_packets: vec![0; n],
            accepted_flits: vec![0; n],
            accepted_packets: vec![0; n],
            ..SimResult::default()
        };
        self.ledger.pstats = PacketStats::EMPTY;
        for t in self.sources.all() {
            (t.sent_flits, t.sent_packets) = (0, 0);
            (t.accepted_flits, t.accepted_packets) = (0, 0);
        }
        self.reset_time = self.time;
    }

    fn counting(&self) -> bool {
        matches!(self.state, State::WarmingUp | State::Running)
    }

    /// One BookSim cycle (`TrafficManager::_Step`).
    fn step(&mut self) -> Result<(), SimError> {
        let g = self.global;
        if self.ledger.in_flight > 0 {
            self.deadlock_timer += 1;
            if self.deadlock_timer > self.cfg.deadlock_warn_timeout {
                self.deadlock_timer = 0;
                eprintln!("WARNING: Possible network deadlock.");
            }
        }
        // Terminals and routers read what their channels deliver this cycle. Credits first
        // (credits and flits touch disjoint state, so their order does not matter, and the
        // credit list must be empty before the sinks send this cycle's credits).
        self.read_credits(g)?;
        // Flits: routers buffer them; sinks return a credit and retire them at once (BookSim
        // does this after injection, but nothing in generation or injection reads what a
        // sink changes, and retirement order only permutes exact integer sums).
        self.read_flits(g)?;
        if std::mem::take(&mut self.ledger.retired_any) {
            self.deadlock_timer = 0;
        }
        // Sends on channels of the longest latency go to this cycle's slot, sends on 1-cycle
        // channels (injection, ejection, and every channel of the fly, fat tree and mesh) to
        // `short`; with other latencies (torus, concentrated mesh), each to its own.
        let slot = self.flits.slot(g);
        let short = self.flits.slot_after(g, 1);
        if !self.empty_network {
            if self.cfg.read_write.is_some() {
                self.generate_read_write();
            } else {
                self.generate();
            }
        }
        self.inject(g, short)?;
        // Replies owed by this cycle's ejections (BookSim retires after injection).
        self.replies_owed += self.ledger.new_replies.len();
        for (n, r) in self.ledger.new_replies.drain(..) {
            if let Some(q) = self.replies.get_mut(n as usize) {
                q.push_back(r);
            }
        }
        if self.replies_owed > self.max_replies_owed {
            return Err(SimError::TooManyReplies {
                cycle: self.time,
                owed: self.replies_owed,
                limit: self.max_replies_owed,
            });
        }
        // Routers evaluate and write.
        let mut routing = BookSimRouting {
            wiring: &self.wiring,
            rng: &mut self.rng.int,
            packets: &self.ledger.packets,
            intm: &mut self.ledger.intm,
        };
        for (r, router) in self.routers.iter_mut().enumerate() {
            if router.is_idle() && !router.steps_when_idle() {
                continue;
            }
            router
                .step(g, &mut routing)
                .map_err(|err| SimError::Router {
                    router: r as u32,
                    cycle: self.time,
                    err,
                })?;
            let (outs, ins) = (
                &self.wiring.router_out[r][..],
                &self.wiring.router_in[r][..],
            );
            if short == slot {
                let (flits, credits) = (self.flits.list(slot), self.credits.list(slot));
                router.poll_flits(|o, f| flits.push((outs[o], f)));
                let before = credits.len();
                router.poll_credits(|i, c| credits.push((ins[i], c)));
                self.credits_in_channels += (credits.len() - before) as i64;
            } else {
                // Channels of several latencies: each value goes to the slot of its arrival.
                let lat = &self.wiring.latency[..];
                let flits = &mut self.flits;
                router.poll_flits(|o, f| {
                    let c = outs[o];
                    let s = flits.slot_after(g, lat[c as usize]);
                    flits.send(s, c as usize, f);
                });
                let credits = &mut self.credits;
                let mut sent = 0;
                router.poll_credits(|i, cr| {
                    let c = ins[i];
                    let s = credits.slot_after(g, lat[c as usize]);
                    credits.send(s, c as usize, cr);
                    sent += 1;
                });
                self.credits_in_channels += sent;
            }
        }
        self.time += 1;
        self.global += 1;
        self.work.cycles += 1;
        Ok(())
    }

    /// Credits delivered this cycle, to terminals' injection buffers and to routers.
    fn read_credits(&mut self, g: u64) -> Result<(), SimError> {
        let cycle = self.time;
        let slot = self.credits.slot(g);
        let Sim {
            wiring,
            routers,
            sources,
            credits,
            credits_in_channels,
            ..
        } = self;
        let arrivals = credits.take(slot);
        *credits_in_channels -= arrivals.len() as i64;
        let (src, routers) = (&wiring.src[..], &mut routers[..]);
        for &(c, cr) in &arrivals {
            match src[c as usize] {
                End::Node(n) => {
                    let (w, b) = (n as usize / 64, n as usize % 64);
                    if let Some(chunk) = sources.buf.get_mut(w) {
                        chunk[b]
                            .process_credit(cr)
                            .map_err(|err| SimError::Terminal {
                                node: n,
                                cycle,
                                err,
                            })?;
                    }
                }
                End::Router { router, port } => {
                    routers[router as usize]
                        .handle_credit(g, port as usize, cr)
                        .map_err(|err| SimError::Router { router, cycle, err })?;
                }
            }
        }
        credits.restore(slot, arrivals);
        Ok(())
    }

    /// Flits delivered this cycle: routers buffer them; sinks count them, return a credit
    /// and retire them.
    fn read_flits(&mut self, g: u64) -> Result<(), SimError> {
        let (cycle, counting) = (self.time, self.counting());
        let slot = self.flits.slot(g);
        let arrivals = self.flits.take(slot);
        if arrivals.is_empty() && self.ledger.in_flight > 0 {
            self.still += 1;
        } else {
            self.still = 0;
        }
        // Sinks return their credits on the ejection channels (1-cycle but in `anynet`).
        let short = self.credits.slot_after(g, 1);
        let result = self.deliver(&arrivals, g, short, cycle, counting);
        self.flits.restore(slot, arrivals);
        result
    }

    fn deliver(
        &mut self,
        arrivals: &[(u32, Flit)],
        g: u64,
        slot: usize,
        cycle: i64,
        counting: bool,
    ) -> Result<(), SimError> {
        let record_all = self.state == State::WarmingUp;
        let Sim {
            wiring,
            routers,
            sources,
            credits,
            credits_in_channels,
            ledger,
            ..
        } = self;
        let (dst, routers) = (&wiring.dst[..], &mut routers[..]);
        let terminal_latency = wiring.terminal_latency;
        for (c, f) in arrivals {
            // (By reference: the flit is copied whole where it goes.)
            match dst[*c as usize] {
                End::Node(n) => {
                    if counting {
                        if let Some(t) = sources.term(n as usize) {
                            t.accepted_flits += 1;
                            t.accepted_packets += u64::from(f.is_tail());
                        }
                    }
                    let c = wiring.eject(n as usize);
                    let s = if terminal_latency {
                        credits.slot_after(g, wiring.latency[c])
                    } else {
                        slot
                    };
                    credits.send(s, c, Credit::for_vc(f.vc));
                    *credits_in_channels += 1;
                    ledger.retire(n, *f, cycle, record_all, wiring)?;
                }
                End::Router { router, port } => {
                    routers[router as usize]
                        .handle_flit(port as usize, *f)
                        .map_err(|err| SimError::Router { router, cycle, err })?;
                }
            }
        }
        Ok(())
    }

    /// Sources whose queue is empty generate their next packet (`_Inject`): one Bernoulli
    /// trial per cycle of the source's own clock `qtime`, catching up lazily, so a source
    /// behind its clock models an unbounded queue.
    ///
    /// Two passes: first every idle source's trials (which draw only from the fraction
    /// generator), then, for the sources that succeeded, the destination and subnetwork
    /// draws (only from the integer generator). Each generator sees BookSim's order (node
    /// by node), and the trial outcomes land in a bitmask instead of steering branches.
    fn generate(&mut self) {
        let threshold = self.rate_threshold;
        let nodes = self.wiring.nodes;
        let time = self.time;
        let (state, drain_time) = (self.state, self.drain_time);
        let include_queuing = self.cfg.include_queuing;
        let size = self.cfg.packet_size;
        let Sim {
            sources,
            rng,
            ledger,
            dest_table,
            onoff,
            cfg,
            ..
        } = self;
        let dest_table = dest_table.as_deref();
        let traffic = &cfg.traffic;
        let uniform = *traffic == Traffic::Uniform;
        let mix = cfg.packet_mix.as_ref();
        let draining = state == State::Draining;
        // BookSim's RandomInt(nodes - 1): the raw value modulo `nodes`.
        let dest_mod = FastMod::new(nodes as u32);
        // Sources caught up with their clock (`qtime == time`; no `lag` bit) make exactly one
        // trial, and their clocks are implied, not stored: a run of them takes its numbers
        // from the generator's buffer in one batch. A lagging source catches up trial by
        // trial, in node order between the runs.
        let drained_now = draining && time + 1 > drain_time;
        if let Some(oo) = onoff.as_mut() {
            oo.trials(
                sources,
                &mut rng.float,
                nodes,
                time,
                draining,
                drain_time,
                include_queuing,
            );
        } else {
            let words = sources.busy.iter().zip(sources.born.iter_mut());
            let words = words.zip(sources.lag.iter_mut());
            for (w, (((&busy, born_w), lag_w), chunk)) in
                words.zip(sources.term.iter_mut()).enumerate()
            {
                let valid = if (w + 1) * 64 <= nodes {
                    !0u64
                } else {
                    (1u64 << (nodes % 64)) - 1
                };
                let idle = !busy & valid;
                let mut fast = idle & !*lag_w;
                let mut slow = idle & *lag_w;
                if drained_now {
                    let mut m = fast;
                    while m != 0 {
                        chunk[m.trailing_zeros() as usize].qdrained = true;
                        m &= m - 1;
                    }
                }
                let mut born = 0u64;
                loop {
                    // The caught-up sources before the next lagging one.
                    let run = if slow == 0 {
                        fast
                    } else {
                        fast & ((slow & slow.wrapping_neg()) - 1)
                    };
                    if run != 0 {
                        fast &= !run;
                        let mut m = run;
                        if let Some(vals) = rng.float.take(run.count_ones() as usize) {
                            for &v in vals {
                                let b = m.trailing_zeros();
                                m &= m - 1;
                                born |= u64::from(v < threshold) << b;
                            }
                        } else {
                            while m != 0 {
                                let b = m.trailing_zeros();
                                m &= m - 1;
                                born |= u64::from(rng.float.below(threshold)) << b;
                            }
                        }
                    }
                    if slow == 0 {
                        break;
                    }
                    let b = slow.trailing_zeros() as usize;
                    slow &= slow - 1;
                    let t = &mut chunk[b];
                    while t.qtime <= time {
                        let q = t.qtime;
                        t.qtime += 1;
                        if rng.float.below(threshold) {
                            born |= 1u64 << b;
                            t.born_ctime = if include_queuing { q } else { time };
                            break;
                        }
                    }
                    if t.qtime == time + 1 && born & (1u64 << b) == 0 {
                        // Caught up without a packet: from now on one trial per cycle.
                        *lag_w &= !(1u64 << b);
                    }
                    if draining && t.qtime > drain_time {
                        t.qdrained = true;
                    }
                }
                *born_w = born;
            }
        }
        let words = sources.busy.iter_mut().zip(sources.born.iter_mut());
        let words = words.zip(sources.lag.iter_mut());
        for (w, (((busy, born_w), lag_w), chunk)) in words.zip(sources.term.iter_mut()).enumerate()
        {
            let mut born = std::mem::take(born_w);
            *busy |= born;
            let lagged = *lag_w;
            // A busy source's clock is stored.
            *lag_w |= born;
            while born != 0 {
                let b = born.trailing_zeros() as usize;
                let n = w * 64 + b;
                born &= born - 1;
                let t = &mut chunk[b];
                let ctime = if lagged & (1u64 << b) != 0 {
                    t.born_ctime
                } else {
                    t.qtime = time + 1;
                    time
                };
                // A mix of sizes draws the packet's size first (`_GetNextPacketSize`).
                let (code, size) = match mix {
                    None => (0, size),
                    Some(m) => {
                        let i = m.pick(rng.int.int(m.max_val));
                        (i as u32 + 1, m.sizes[i])
                    }
                };
                let dest = match dest_table {
                    None if uniform => rng.int.int_below(dest_mod),
                    None => traffic.random_dest(n as u32, nodes as u32, &mut rng.int),
                    Some(t) => t.get(n).copied().unwrap_or(0),
                };
                let _subnet = rng.int.int(0);
                let record = match state {
                    State::Running => true,
                    State::Draining => ctime < drain_time,
                    State::WarmingUp => false,
                };
                let src_rec = n as u32 | code << KIND_SHIFT | if record { RECORD } else { 0 };
                t.pkt = ledger.start(src_rec, dest, ctime, size);
            }
        }
    }

    /// [`Sim::generate`] under `use_read_write` (BookSim's `_Inject`, `_IssuePacket` and
    /// `_GeneratePacket` with `use_read_write`), node by node: an idle source that owes a
    /// reply due by now generates it without a trial and without moving its clock; otherwise
    /// it makes its trials as in [`Sim::generate`], and a success is a write request with
    /// probability `write_fraction` (a second fraction drawn), else a read request. Every
    /// packet, reply or not, draws its destination from the traffic pattern (a reply then
    /// goes to its requester); typed packets draw no subnetwork. A reply is created at its
    /// request's ejection and is measured if its request was, or if it is created while
    /// measuring (or draining, before the drain began).
    fn generate_read_write(&mut self) {
        let threshold = self.rate_threshold;
        let nodes = self.wiring.nodes;
        let time = self.time;
        let (state, drain_time) = (self.state, self.drain_time);
        let draining = state == State::Draining;
        let include_queuing = self.cfg.include_queuing;
        let Sim {
            sources,
            rng,
            ledger,
            dest_table,
            onoff,
            cfg,
            replies,
            replies_owed,
            ..
        } = self;
        let Some(rw) = cfg.read_write.as_ref() else {
            return;
        };
        let dest_table = dest_table.as_deref();
        let traffic = &cfg.traffic;
        let uniform = *traffic == Traffic::Uniform;
        let dest_mod = FastMod::new(nodes as u32);
        let mut clock_moved = false;
        for n in 0..nodes {
            let (w, bit) = (n / 64, 1u64 << (n % 64));
            let (Some(busy), Some(chunk), Some(owed)) = (
                sources.busy.get_mut(w),
                sources.term.get_mut(w),
                replies.get_mut(n),
            ) else {
                continue;
            };
            if *busy & bit != 0 {
                continue;
            }
            let t = &mut chunk[n % 64];
            let mut generated = false;
            while !generated && t.qtime <= time {
                // (kind code, creation time, measured already, reply's requester)
                let born = match owed.front() {
                    Some(r) if r.time <= time => {
                        let r = *r;
                        owed.pop_front();
                        *replies_owed -= 1;
                        Some((r.kind, r.time, r.record, Some(r.source)))
                    }
                    Some(_) => None,
                    None => {
                        let hit = match onoff.as_mut() {
                            Some(oo) => oo.trial(n, &mut rng.float),
                            None => rng.float.below(threshold),
                        };
                        hit.then(|| {
                            let write = rng.float.fraction() < rw.write_fraction;
                            let kind = if write {
                                PacketKind::WriteRequest
                            } else {
                                PacketKind::ReadRequest
                            };
                            let ctime = if include_queuing { t.qtime } else { time };
                            (kind as u32 + 1, ctime, false, None)
                        })
                    }
                };
                let reply = matches!(born, Some((_, _, _, Some(_))));
                if let Some((kind, ctime, recorded, requester)) = born {
                    generated = true;
                    let drawn = match dest_table {
                        None if uniform => rng.int.int_below(dest_mod),
                        None => traffic.random_dest(n as u32, nodes as u32, &mut rng.int),
                        Some(tbl) => tbl.get(n).copied().unwrap_or(0),
                    };
                    let dest = requester.unwrap_or(drawn);
                    let record = match state {
                        State::Running => true,
                        State::Draining => ctime < drain_time || recorded,
                        State::WarmingUp => recorded,
                    };
                    let size = ledger.sizes[kind as usize % 5];
                    let src_rec = n as u32 | kind << KIND_SHIFT | if record { RECORD } else { 0 };
                    t.pkt = ledger.start(src_rec, dest, ctime, size);
                    *busy |= bit;
                }
                // A reply does not move the source's clock.
                if !reply {
                    t.qtime += 1;
                    clock_moved |= !t.qdrained;
                }
            }
            if draining && t.qtime > drain_time {
                t.qdrained = true;
            }
        }
        if clock_moved {
            self.clock_moved_at = time;
        }
    }

    /// Each source with a flit ready sends it if its VC has credit; a head first claims the
    /// next free VC after the one it used last.
    fn inject(&mut self, g: u64, slot: usize) -> Result<(), SimError> {
        let vcs = self.cfg.router.vcs as i32;
        let counting = self.counting();
        let time = self.time;
        let lookahead = self.cfg.router.routing_delay == 0;
        let random_vc = matches!(self.cfg.topology, Topology::DragonFly { .. });
        let Sim {
            sources,
            ledger: Ledger { packets, intm, .. },
            flits,
            wiring,
            rng,
            routers,
            ..
        } = self;
        let terminal_latency = wiring.terminal_latency;
        let injection_sliced = wiring.injection_sliced();
        let chunks = sources.term.iter_mut().zip(sources.buf.iter_mut());
        let words = sources.busy.iter_mut().zip(sources.lag.iter_mut());
        for (w, ((busy_w, lag_w), (tchunk, bchunk))) in words.zip(chunks).enumerate() {
            let mut busy = *busy_w;
            while busy != 0 {
                let b = busy.trailing_zeros() as usize;
                let n = w * 64 + b;
                busy &= busy - 1;
                let (t, buf) = (&mut tchunk[b], &mut bchunk[b]);
                let (p, last_vc) = (&mut t.pkt, &mut t.last_vc);
                let head = p.sent == 0;
                if head && p.vc < 0 {
                    // The first VC of the packet's range (every VC, or its kind's under
                    // use_read_write) after the last one used that is free and has credit
                    // (BookSim tries the range's first VC only while the last one used lies
                    // outside the range). min_dragonflynew's injection route is one random VC
                    // of all instead, drawn at every attempt.
                    let ok = buf.avail_mask() & !buf.full_mask();
                    let lvc = *last_vc;
                    let (lo, hi) = if wiring.typed {
                        let kind = packets.get(p.slot as usize).map_or(0, Packet::kind);
                        let (lo, hi) = wiring.kind_vcs[kind as usize % 5];
                        (i32::from(lo), i32::from(hi))
                    } else {
                        (0, vcs - 1)
                    };
                    let (lo, hi) = if injection_sliced {
                        let (lo, hi) = wiring.injection_vcs(lo as u8, hi as u8, p.dest as usize);
                        (i32::from(lo), i32::from(hi))
                    } else {
                        (lo, hi)
                    };
                    // The range's VCs (hi < 64).
                    let ok = ok & (!0u64 >> (63 - hi)) & (!0u64 << lo);
                    p.vc = if random_vc {
                        let v = rng.int.int(vcs as u32 - 1);
                        if ok >> v & 1 != 0 {
                            v as i32
                        } else {
                            -1
                        }
                    } else if lvc < lo || lvc > hi {
                        if ok >> lo & 1 != 0 {
                            lo
                        } else {
                            -1
                        }
                    } else {
                        let start = if lvc == hi { lo as u32 } else { lvc as u32 + 1 };
                        let upper = ok & (!0u64 << start);
                        if upper != 0 {
                            upper.trailing_zeros() as i32
                        } else if ok != 0 {
                            ok.trailing_zeros() as i32
                        } else {
                            -1
                        }
                    };
                }
                if p.vc < 0 || buf.is_full_for(p.vc as usize) {
                    continue;
                }
                let tail = p.sent + 1 == p.size;
                let mut f = Flit::new(p.slot, p.dest, head, tail);
                f.vc = p.vc as u8;
                let terr = |err| SimError::Terminal {
                    node: n as u32,
                    cycle: time,
                    err,
                };
                if head {
                    if let Some(pk) = packets.get_mut(p.slot as usize) {
                        pk.itime = time;
                    }
                    if lookahead {
                        let c = wiring.inject(n);
                        if let End::Router { router, port } = wiring.dst[c] {
                            let mut rt = BookSimRouting {
                                wiring,
                                rng: &mut rng.int,
                                packets,
                                intm,
                            };
                            // The first router's route, from its state now (adaptive
                            // routing reads its downstream occupancy).
                            let r = &routers[router as usize];
                            let used = |o: usize| r.downstream(o).map_or(0, |b| b.occupancy());
                            f.la_route = rt.route_reading(router, port as usize, &f, &used);
                        }
                    }
                    buf.take_buffer(p.vc as usize, 0).map_err(terr)?;
                    *last_vc = p.vc;
                }
                buf.sending_flit(&f).map_err(terr)?;
                p.sent += 1;
                if tail {
                    *p = Partial::NONE;
                    *busy_w &= !(1u64 << b);
                    if t.qtime == time + 1 {
                        // Idle and caught up at the next cycle's generation.
                        *lag_w &= !(1u64 << b);
                    }
                }
                if counting {
                    t.sent_flits += 1;
                    t.sent_packets += u64::from(head);
                }
                // On the 1-cycle injection channel (`anynet`'s may take longer).
                let c = wiring.inject(n);
                let s = if terminal_latency {
                    flits.slot_after(g, wiring.latency[c])
                } else {
                    slot
                };
                flits.send(s, c, f);
            }
        }
        Ok(())
    }

    fn packets_outstanding(&self) -> bool {
        if self.ledger.measured_in_flight == 0 {
            let nodes = self.sources.nodes;
            self.sources
                .term
                .iter()
                .flatten()
                .take(nodes)
                .any(|t| !t.qdrained)
        } else {
            true
        }
    }

    /// The drain's one cycle: a simulation error, or [`SimError::Deadlock`] once no flit has
    /// arrived for [`Sim::still_limit`] cycles.
    fn drain_cycle(&mut self) -> Result<(), SimError> {
        self.run_cycles(1)?;
        if self.still > self.still_limit {
            return Err(SimError::Deadlock {
                cycle: self.time,
                cycles: self.still,
                in_flight: self.ledger.in_flight,
            });
        }
        Ok(())
    }

    /// Under `use_read_write`, with no measured flit in flight: [`SimError::DrainStalled`]
    /// once no source still to drain has moved its clock for [`Sim::drain_stall_limit`]
    /// cycles.
    fn check_clocks_move(&self) -> Result<(), SimError> {
        let stalled = (self.time - self.clock_moved_at) as u64;
        if self.cfg.read_write.is_none()
            || self.ledger.measured_in_flight > 0
            || stalled <= self.drain_stall_limit
        {
            return Ok(());
        }
        let nodes = self.sources.nodes;
        let sources = self.sources.term.iter().flatten().take(nodes);
        Err(SimError::DrainStalled {
            cycle: self.time,
            cycles: stalled,
            sources: sources.filter(|t| !t.qdrained).count(),
        })
    }

    /// Latency of retired packets plus the age of every flit in flight
    /// (BookSim's instability test).
    fn latency_with_in_flight(&self) -> f64 {
        let sum = self.cur.plat.sum
            + (self.ledger.in_flight as i64 * self.time - self.ledger.in_flight_ctime) as f64;
        sum / (self.cur.plat.n + self.ledger.in_flight) as f64
    }

    /// One simulation (`_SingleSim`): warm up, sample until converged, drain. Returns whether
    /// it converged.
    fn single_sim(&mut self) -> Result<Result<(), String>, SimError> {
        let cfg = self.cfg.clone();
        let measure_latency = cfg.sim_type == SimType::Latency;
        let mut converged = 0u32;
        let (mut prev_latency, mut prev_accepted) = (0.0f64, 0.0f64);
        let mut clear_last = false;
        let mut total_phases = 0u32;
        let mut why = String::new();
        while total_phases < cfg.max_samples && (self.state != State::Running || converged < 3) {
            if clear_last || (self.state == State::WarmingUp && total_phases.is_multiple_of(2)) {
                clear_last = false;
                self.clear_stats();
            }
            self.run_cycles(u64::from(cfg.sample_period))?;

            let cur_latency = self.cur.plat.avg();
            let total: u64 = self.cur.accepted_flits.iter().sum();
            let cur_accepted =
                total as f64 / (self.time - self.reset_time) as f64 / self.wiring.nodes as f64;
            let latency_change = ((cur_latency - prev_latency) / cur_latency).abs();
            prev_latency = cur_latency;
            let accepted_change = ((cur_accepted - prev_accepted) / cur_accepted).abs();
            prev_accepted = cur_accepted;
            let lat_exc =
                cfg.latency_thres >= 0.0 && self.latency_with_in_flight() > cfg.latency_thres;
            let (lat_chg_exc, acc_chg_exc) = match self.state {
                State::WarmingUp => (
                    cfg.warmup_thres >= 0.0 && latency_change > cfg.warmup_thres,
                    cfg.acc_warmup_thres >= 0.0 && accepted_change > cfg.acc_warmup_thres,
                ),
                State::Running => (
                    cfg.stopping_thres >= 0.0 && latency_change > cfg.stopping_thres,
                    cfg.acc_stopping_thres >= 0.0 && accepted_change > cfg.acc_stopping_thres,
                ),
                State::Draining => (false, false),
            };
            if let Some(cb) = self.on_sample.as_mut() {
                cb(&SampleReport {
                    phase: total_phases + 1,
                    warming_up: self.state == State::WarmingUp,
                    latency: cur_latency,
                    accepted: cur_accepted,
                    latency_change,
                    accepted_change,
                    in_flight: self.ledger.in_flight,
                });
            }
            if measure_latency && lat_exc {
                why = format!(
                    "Average latency for class 0 exceeded {} cycles. Aborting simulation.",
                    super::report::fmt_g(cfg.latency_thres)
                );
                converged = 0;
                self.state = State::Draining;
                self.drain_time = self.time;
                break;
            }
            match self.state {
                State::WarmingUp => {
                    let done = if cfg.warmup_periods > 0 {
                        total_phases + 1 >= cfg.warmup_periods
                    } else {
                        (!measure_latency || !lat_chg_exc) && !acc_chg_exc
                    };
                    if done {
                        clear_last = true;
                        self.state = State::Running;
                    }
                }
                State::Running => {
                    if (!measure_latency || !lat_chg_exc) && !acc_chg_exc {
                        converged += 1;
                    } else {
                        converged = 0;
                    }
                }
                State::Draining => {}
            }
            total_phases += 1;
        }
        if self.state == State::Running {
            converged += 1;
            self.state = State::Draining;
            self.drain_time = self.time;
            if measure_latency {
                let mut empty_steps = 0u64;
                self.clock_moved_at = self.time;
                while self.packets_outstanding() {
                    // With latency_thres disabled nothing else ends a deadlocked drain.
                    if cfg.latency_thres < 0.0 {
                        self.drain_cycle()?;
                    } else {
                        self.run_cycles(1)?;
                    }
                    self.check_clocks_move()?;
                    empty_steps += 1;
                    if empty_steps.is_multiple_of(1000)
                        && cfg.latency_thres >= 0.0
                        && self.latency_with_in_flight() > cfg.latency_thres
                    {
                        why = format!(
                            "Average latency for class 0 exceeded {} cycles. Aborting simulation.",
                            super::report::fmt_g(cfg.latency_thres)
                        );
                        converged = 0;
                        self.state = State::WarmingUp;
                        break;
                    }
                }
            }
        } else if why.is_empty() {
            why = "Too many sample periods needed to converge".into();
        }
        self.cur.window = (self.drain_time - self.reset_time) as f64;
        Ok(if converged > 0 { Ok(()) } else { Err(why) })
    }

    /// Run all `sim_count` simulations (`TrafficManager::Run`).
    pub fn run(&mut self) -> Result<Outcome, SimError> {
        let mut results = Vec::new();
        for _ in 0..self.cfg.sim_count {
            self.time = 0;
            for t in self.sources.all() {
                (t.qtime, t.qdrained) = (0, false);
            }
            // Replies still owed from the previous simulation are dropped, as BookSim does.
            self.replies.iter_mut().for_each(VecDeque::clear);
            self.replies_owed = 0;
            // The network is empty: every source is idle, and caught up at time 0.
            self.sources.lag.fill(0);
            if let Some(oo) = self.onoff.as_mut() {
                oo.reset();
            }
            self.state = State::WarmingUp;
            self.clear_stats();
            if let Err(reason) = self.single_sim()? {
                let last = Box::new(std::mem::take(&mut self.cur));
                return Ok(Outcome::Unstable { reason, last });
            }
            // Empty the network, then wait for the last credits.
            self.empty_network = true;
            while self.ledger.in_flight > 0 {
                self.drain_cycle()?;
            }
            while !self.routers.iter().all(IqRouter::is_idle) || self.credits_in_channels > 0 {
                self.run_cycles(1)?;
            }
            self.empty_network = false;
            self.cur.time_taken = self.time;
            results.push(std::mem::take(&mut self.cur));
        }
        Ok(Outcome::Done(results))
    }
}

impl Model for Sim {
    type Event = ();

    fn handle(&mut self, _ev: (), sched: &mut Scheduler<()>) {
        if self.error.is_some() {
            return;
        }
        if let Err(e) = self.step() {
            self.error = Some(e);
            return;
        }
        sched.after(Duration::from_ps(CYCLE_PS), ());
    }
}
