//! BookSim's traffic manager on the engine and the router model: sources, sinks, the
//! per-cycle step, and the measurement rules (warm-up, sample periods, convergence, drain).
//!
//! One BookSim cycle is one engine event (`CYCLE_PS` apart). Within it the phases run in
//! BookSim's order: terminals read what the network delivered; routers read their channels;
//! sources generate and inject; sinks return credits; routers evaluate (idle routers sleep);
//! routers write their outputs.

use thiserror::Error;

use super::config::{BooksimConfig, SimType};
use super::network::{build, BookSimRouting, Channels, End, Wiring};
use super::rng::BookSimRng;
use crate::engine::{run_until, Model, Scheduler};
use crate::router::{BufferState, Credit, Flit, IqRouter, RouterConfigError, RouterError};
use podlink_protocol::time::{Duration, Instant};

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
    fn default() -> Self {
        Stat {
            n: 0,
            sum: 0.0,
            min: f64::NAN,
            max: f64::NAN,
        }
    }
}

impl Stat {
    fn add(&mut self, v: f64) {
        self.n += 1;
        self.sum += v;
        // f64::max/min return the other operand for a NaN: the first sample replaces the
        // empty statistic's NaN, as in BookSim.
        self.max = self.max.max(v);
        self.min = self.min.min(v);
    }

    /// Mean (NaN when empty, as in BookSim).
    pub fn avg(&self) -> f64 {
        self.sum / self.n as f64
    }
}

#[derive(Clone, Copy, Default)]
struct Packet {
    src: u32,
    dest: u32,
    size: u32,
    ctime: i64,
    itime: i64,
    head_atime: i64,
    record: bool,
}

#[derive(Clone, Copy)]
struct Partial {
    slot: u32,
    sent: u32,
    vc: i32,
}

struct Source {
    qtime: i64,
    qdrained: bool,
    pkt: Option<Partial>,
    last_vc: i32,
    buf: BufferState,
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
    rng: BookSimRng,
    sources: Vec<Source>,
    packets: Vec<Packet>,
    free: Vec<u32>,
    ejected: Vec<(u32, Flit)>,
    time: i64,
    global: u64,
    state: State,
    empty_network: bool,
    drain_time: i64,
    reset_time: i64,
    cur: SimResult,
    in_flight: u64,
    in_flight_ctime: i64,
    measured_in_flight: u64,
    deadlock_timer: i64,
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
        let (wiring, routers) = build(cfg.topology, &cfg.router)?;
        let nodes = wiring.nodes;
        let chans = wiring.src.len();
        // Every packet in flight holds a buffer slot, a channel or an output-queue slot (or
        // waits at its source): reserve for all of them so the tables never grow mid-run.
        let slots: usize = routers.iter().map(IqRouter::inputs).sum::<usize>()
            * cfg.router.vcs
            * cfg.router.vc_buf_size;
        let packet_cap = slots + 4 * chans + 2 * nodes;
        let vcs = cfg.router.vcs;
        let sources = (0..nodes)
            .map(|_| Source {
                qtime: 0,
                qdrained: false,
                pkt: None,
                last_vc: -1,
                buf: BufferState::new(vcs, cfg.router.vc_buf_size, cfg.router.wait_for_tail_credit),
            })
            .collect();
        let mut sched = Scheduler::new();
        sched.at(Instant::ZERO, ());
        Ok(Sim {
            rng: BookSimRng::new(cfg.seed),
            flits: Channels::new(chans, 1),
            credits: Channels::new(chans, 1),
            sources,
            packets: Vec::with_capacity(packet_cap),
            free: Vec::with_capacity(packet_cap),
            ejected: Vec::with_capacity(nodes),
            time: 0,
            global: 0,
            state: State::WarmingUp,
            empty_network: false,
            drain_time: -1,
            reset_time: 0,
            cur: SimResult::default(),
            in_flight: 0,
            in_flight_ctime: 0,
            measured_in_flight: 0,
            deadlock_timer: 0,
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
        self.reset_time = self.time;
    }

    fn counting(&self) -> bool {
        matches!(self.state, State::WarmingUp | State::Running)
    }

    /// One BookSim cycle (`TrafficManager::_Step`).
    fn step(&mut self) -> Result<(), SimError> {
        let g = self.global;
        if self.in_flight > 0 {
            self.deadlock_timer += 1;
            if self.deadlock_timer > self.cfg.deadlock_warn_timeout {
                self.deadlock_timer = 0;
                eprintln!("WARNING: Possible network deadlock.");
            }
        }
        // Terminals and routers read what their channels deliver this cycle.
        let counting = self.counting();
        let slot = self.flits.slot(g);
        let arrivals = self.flits.take(slot);
        for &(c, f) in &arrivals {
            match self.wiring.dst[c as usize] {
                End::Node(n) => {
                    self.ejected.push((n, f));
                    if counting {
                        self.cur.accepted_flits[n as usize] += 1;
                        if f.is_tail() {
                            self.cur.accepted_packets[n as usize] += 1;
                        }
                    }
                }
                End::Router { router, port } => {
                    self.routers[router as usize]
                        .handle_flit(port as usize, f)
                        .map_err(|err| SimError::Router {
                            router,
                            cycle: self.time,
                            err,
                        })?;
                }
            }
        }
        self.flits.restore(slot, arrivals);
        let arrivals = self.credits.take(slot);
        for &(c, cr) in &arrivals {
            self.credits_in_channels -= 1;
            match self.wiring.src[c as usize] {
                End::Node(n) => {
                    self.sources[n as usize]
                        .buf
                        .process_credit(cr)
                        .map_err(|err| SimError::Terminal {
                            node: n,
                            cycle: self.time,
                            err,
                        })?;
                }
                End::Router { router, port } => {
                    self.routers[router as usize]
                        .handle_credit(g, port as usize, cr)
                        .map_err(|err| SimError::Router {
                            router,
                            cycle: self.time,
                            err,
                        })?;
                }
            }
        }
        self.credits.restore(slot, arrivals);
        if !self.empty_network {
            self.generate();
        }
        self.inject(slot)?;
        // Sinks return credits and retire flits.
        let ejected = std::mem::take(&mut self.ejected);
        for &(n, f) in &ejected {
            self.credits
                .send(slot, self.wiring.eject(n as usize), Credit::for_vc(f.vc));
            self.credits_in_channels += 1;
            self.retire(n, f)?;
        }
        self.ejected = ejected;
        self.ejected.clear();
        // Routers evaluate and write.
        let mut routing = BookSimRouting {
            wiring: &self.wiring,
            rng: &mut self.rng.int,
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
            let (flits, credits) = (&mut self.flits, &mut self.credits);
            let (outs, ins) = (&self.wiring.router_out[r], &self.wiring.router_in[r]);
            router.poll_flits(|o, f| flits.send(slot, outs[o] as usize, f));
            let sent = &mut self.credits_in_channels;
            router.poll_credits(|i, c| {
                *sent += 1;
                credits.send(slot, ins[i] as usize, c)
            });
        }
        self.time += 1;
        self.global += 1;
        self.work.cycles += 1;
        Ok(())
    }

    /// Sources whose queue is empty generate their next packet (`_Inject`): one Bernoulli
    /// trial per cycle of the source's own clock `qtime`, catching up lazily, so a source
    /// behind its clock models an unbounded queue.
    fn generate(&mut self) {
        let rate = self.cfg.packet_rate;
        let nodes = self.wiring.nodes as u32;
        for n in 0..self.wiring.nodes {
            if self.sources[n].pkt.is_some() {
                continue;
            }
            while self.sources[n].qtime <= self.time {
                let q = self.sources[n].qtime;
                self.sources[n].qtime += 1;
                if self.rng.float.fraction() < rate {
                    let ctime = if self.cfg.include_queuing {
                        q
                    } else {
                        self.time
                    };
                    let dest = self.rng.int.int(nodes - 1);
                    let _subnet = self.rng.int.int(0);
                    let record = match self.state {
                        State::Running => true,
                        State::Draining => ctime < self.drain_time,
                        State::WarmingUp => false,
                    };
                    let size = self.cfg.packet_size;
                    let p = Packet {
                        src: n as u32,
                        dest,
                        size,
                        ctime,
                        itime: 0,
                        head_atime: 0,
                        record,
                    };
                    let slot = match self.free.pop() {
                        Some(s) => {
                            self.packets[s as usize] = p;
                            s
                        }
                        None => {
                            self.packets.push(p);
                            (self.packets.len() - 1) as u32
                        }
                    };
                    self.in_flight += u64::from(size);
                    self.in_flight_ctime += i64::from(size) * ctime;
                    if record {
                        self.measured_in_flight += u64::from(size);
                    }
                    self.sources[n].pkt = Some(Partial {
                        slot,
                        sent: 0,
                        vc: -1,
                    });
                    break;
                }
            }
            if self.state == State::Draining && self.sources[n].qtime > self.drain_time {
                self.sources[n].qdrained = true;
            }
        }
    }

    /// Each source with a flit ready sends it if its VC has credit; a head first claims the
    /// next free VC after the one it used last.
    fn inject(&mut self, slot: usize) -> Result<(), SimError> {
        let vcs = self.cfg.router.vcs as i32;
        let counting = self.counting();
        for n in 0..self.wiring.nodes {
            let src = &mut self.sources[n];
            let Some(mut p) = src.pkt else { continue };
            let head = p.sent == 0;
            if head && p.vc < 0 {
                let lvc = src.last_vc;
                for i in 1..=vcs {
                    let vc = if lvc < 0 || lvc > vcs - 1 {
                        0
                    } else {
                        (lvc + i) % vcs
                    };
                    if src.buf.is_available_for(vc as usize) && !src.buf.is_full_for(vc as usize) {
                        p.vc = vc;
                        break;
                    }
                }
            }
            if p.vc < 0 || src.buf.is_full_for(p.vc as usize) {
                src.pkt = Some(p);
                continue;
            }
            let pk = &mut self.packets[p.slot as usize];
            let tail = p.sent + 1 == pk.size;
            let mut f = Flit::new(p.slot, pk.dest, head, tail);
            f.vc = p.vc as u8;
            let cycle = self.time;
            let terr = |err| SimError::Terminal {
                node: n as u32,
                cycle,
                err,
            };
            if head {
                pk.itime = self.time;
                if self.cfg.router.routing_delay == 0 {
                    let c = self.wiring.inject(n);
                    if let End::Router { router, port } = self.wiring.dst[c] {
                        let mut rt = BookSimRouting {
                            wiring: &self.wiring,
                            rng: &mut self.rng.int,
                        };
                        f.la_route = rt.route_at(router, port as usize, &f);
                    }
                }
                src.buf.take_buffer(p.vc as usize, 0).map_err(terr)?;
                src.last_vc = p.vc;
            }
            src.buf.sending_flit(&f).map_err(terr)?;
            p.sent += 1;
            src.pkt = if tail { None } else { Some(p) };
            if counting {
                self.cur.sent_flits[n] += 1;
                if head {
                    self.cur.sent_packets[n] += 1;
                }
            }
            self.flits.send(slot, self.wiring.inject(n), f);
        }
        Ok(())
    }

    fn retire(&mut self, n: u32, f: Flit) -> Result<(), SimError> {
        self.deadlock_timer = 0;
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
        if p.record {
            self.measured_in_flight -= 1;
        }
        if f.is_head() {
            p.head_atime = self.time;
        }
        if f.is_tail() {
            let p = *p;
            if self.state == State::WarmingUp || p.record {
                let t = self.time;
                self.cur
                    .hops
                    .add(f64::from(self.wiring.hops(p.src as usize, p.dest as usize)));
                self.cur.plat.add((t - p.ctime) as f64);
                self.cur.nlat.add((t - p.itime) as f64);
                self.cur
                    .frag
                    .add(((t - p.head_atime) - i64::from(p.size - 1)) as f64);
            }
            self.free.push(slot as u32);
            self.work.flits += u64::from(p.size);
        }
        Ok(())
    }

    fn packets_outstanding(&self) -> bool {
        if self.measured_in_flight == 0 {
            self.sources.iter().any(|s| !s.qdrained)
        } else {
            true
        }
    }

    /// Latency of retired packets plus the age of every flit in flight
    /// (BookSim's instability test).
    fn latency_with_in_flight(&self) -> f64 {
        let sum =
            self.cur.plat.sum + (self.in_flight as i64 * self.time - self.in_flight_ctime) as f64;
        sum / (self.cur.plat.n + self.in_flight) as f64
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
            if clear_last || (self.state == State::WarmingUp && total_phases % 2 == 0) {
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
                    in_flight: self.in_flight,
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
                while self.packets_outstanding() {
                    self.run_cycles(1)?;
                    empty_steps += 1;
                    if empty_steps % 1000 == 0
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
            for s in &mut self.sources {
                s.qtime = 0;
                s.qdrained = false;
            }
            self.state = State::WarmingUp;
            self.clear_stats();
            if let Err(reason) = self.single_sim()? {
                let last = Box::new(std::mem::take(&mut self.cur));
                return Ok(Outcome::Unstable { reason, last });
            }
            // Empty the network, then wait for the last credits.
            self.empty_network = true;
            while self.in_flight > 0 {
                self.run_cycles(1)?;
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
