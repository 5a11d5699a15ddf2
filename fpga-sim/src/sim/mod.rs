//! The pod model (`spec-notes/simulator.md#model`): accelerators, links and switches on the
//! discrete-event engine, running the protocol crate's codecs and the switch library.
//!
//! ```text
//!  workload ─▶ requester ─▶ TL packer ─▶ DL packer ─▶ wire (BER) ─▶ DL rx ─▶ TL unpacker ─┐
//!  (accel a)   completer ◀─ TL unpacker ◀─ DL rx ◀─ wire ◀─ DL tx ◀─ TL packer ◀─ switch ◀─┘
//! ```
//!
//! Every component sleeps until an event concerns it: a transmitter is woken when it has
//! something to send and its wire is free; nothing is scheduled for idle links.

mod accel;
mod blockmap;
pub mod check;
mod endpoint;
pub mod fault;
mod flow;
mod inject;
pub mod link;
mod outage;
pub mod output;
pub mod port;
pub mod results;
mod steer;
mod summary;
pub mod sweep;
pub mod switch;
pub mod trace;
mod window;

use self::check::{Reference, SparseMem};
use self::fault::FaultPlan;
use self::link::{FlitPool, Wire};
use self::port::{FrameSlab, PortState};
pub(crate) use self::steer::validate as validate_faults;
use self::steer::FaultState;
use self::switch::Forwarder;
use self::trace::Trace;
use crate::engine::Calendar;
use crate::pod::config::{AccelModel, Pattern, PodFile};
use crate::pod::timing::{ns, LinkTiming, SwitchTiming};
use crate::pod::topology::{check_routes, Attach, Fabric, RouteProblem};
use crate::report::{Latency, OpClass};
use crate::rng::Rng;
use crate::workload::{Generator, OpSpec};
use podlink_protocol::flow::{CreditReceiver, CreditTarget, ReceiverConfig};
use podlink_protocol::link::{UaLink, UaLinkConfig};
use podlink_protocol::time::Duration;
use podlink_protocol::time::Instant;
use podlink_protocol::wire::{AddrCache, TlPacker, TlUnpacker};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

/// Run options (from the command line).
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Seed of every random stream.
    pub seed: u64,
    /// Injection time, ps.
    pub duration_ps: u64,
    /// Operations issued before this time are not measured, ps.
    pub warmup_ps: u64,
    /// Replace every workload's pattern.
    pub pattern: Option<Pattern>,
    /// Replace every workload's offered load.
    pub load: Option<f64>,
    /// After injection stops, run until every operation completes: at most this long, ps,
    /// or [`DRAIN_TIMEOUTS`] request timeouts of the pod if that is longer
    /// (`Sim::drain_limit_ps`), and that many timeouts after the last operation that
    /// completed.
    pub drain_ps: u64,
    /// Run the pod's workloads (false: an idle pod, for traced single operations).
    pub traffic: bool,
    /// Timed faults and how the pod reacts to them (default: none).
    pub faults: FaultPlan,
    /// Run every event in the global (time, sequence) order instead of in windows of one
    /// link latency, component by component (`spec-notes/simulator.md#engine`).
    pub sequential: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            seed: 1,
            duration_ps: 20_000_000,
            warmup_ps: 2_000_000,
            pattern: None,
            load: None,
            // Past the link layer's 10.24 ms ack timeout, which recovers a lost last flit.
            drain_ps: 20_000_000_000,
            traffic: true,
            faults: FaultPlan::default(),
            sequential: false,
        }
    }
}

/// Request timeouts of the pod's accelerators that the drain lasts at least
/// (`spec-notes/simulator.md#model`): an operation's pieces may each wait up to a queue timeout
/// to be sent and then a request timeout to be answered (both the pod's
/// `accelerator.timeout_us`), requesters are swept for timeouts at a tenth of it, a region
/// given up is held for one more, and pieces waiting behind a full requester or a held region
/// start that clock late. Eight timeouts cover every one of these with room to spare, so an
/// operation still open eight timeouts after the last one completed is lost, not slow.
pub const DRAIN_TIMEOUTS: u64 = 8;

/// Simulator events: compact, `Copy`, one `u32` argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ev {
    /// Transmitter of link end `e` may send.
    Tx(u32),
    /// The oldest flit on the wire from end `e` arrives at its peer.
    Arrive(u32),
    /// A timer of end `e`'s link (ack coalescing, replay, control) may be due.
    Timer(u32),
    /// Frames in the pipeline of switch ingress end `e` are due.
    Pipe(u32),
    /// Requests waiting at the completer of accelerator end `e` are due.
    Cpl(u32),
    /// Workload source `i` issues its next operation.
    Issue(u32),
    /// Operation `i` reaches its requesters (after the endpoint's transmit latency).
    Submit(u32),
    /// Sweep the requesters for timed-out requests.
    Sweep,
    /// Trace operations from index `i` are due.
    Replay(u32),
    /// Fault `i` of the plan is due.
    Fault(u32),
    /// The link-down hold-off of the link whose switch end is `e` may have expired.
    Holdoff(u32),
    /// Endpoint notification `i` is due.
    Notify(u32),
    /// Switch `s`'s health window may have ended.
    Health(u32),
    /// Rogue requester `i` sends its next write.
    Rogue(u32),
    /// Regions of accelerator `a` held on a port declared down may move now.
    Held(u32),
    /// The link of end `e` ended in `Fault` one link latency ago: both ends start over.
    LinkFault(u32),
}

/// Why a pod cannot be run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// The pod's routes leave a destination unreachable, loop, or use a wrong port: refused
    /// before the run. `entry` names the pod-file entry responsible (`routes.N`, or
    /// `topology` when the topology's own routes are at fault).
    #[error("{pod}: {entry}: {problem}")]
    Route {
        /// Pod name.
        pod: String,
        /// The responsible entry.
        entry: String,
        /// The problem.
        problem: RouteProblem,
    },
    /// A workload could not be built (a trace file that cannot be read or parsed).
    #[error("{0}")]
    Workload(String),
    /// A switch the switch library cannot hold (too many partitions or ports) or whose
    /// tables it refuses.
    #[error("{pod}: switch {switch}: {problem}")]
    Switch {
        /// Pod name.
        pod: String,
        /// Switch index.
        switch: usize,
        /// The problem.
        problem: String,
    },
    /// A fault of the plan names something the pod does not have.
    #[error("faults.{index}: {message}")]
    Fault {
        /// Index in the plan.
        index: usize,
        /// What is wrong.
        message: String,
    },
}

/// What a link end belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// Port `k` of accelerator `a`.
    Accel {
        /// Accelerator.
        a: u32,
        /// Its port.
        k: u32,
    },
    /// Port `p` of switch `s`.
    Switch {
        /// Switch.
        s: u32,
        /// Its port.
        p: u32,
    },
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Owner::Accel { a, k } => write!(f, "accelerator {a} port {k}"),
            Owner::Switch { s, p } => write!(f, "switch {s} port {p}"),
        }
    }
}

/// The credit target a TL stream starts at: the shared pool (`TlMessage::CreditTarget`).
const POOL: u8 = CreditTarget::Shared.index() as u8;

/// DL flits each link end keeps for replay (the round trip of a link is about 20 flit times).
pub const REPLAY_FLITS: usize = 32;
/// TL flits queued in each link end.
pub const LINK_TXQ: usize = 16;
/// The protocol crate's UALink-profile link end, as every port of the pod runs it.
pub type Link = UaLink<REPLAY_FLITS, LINK_TXQ>;

/// Fixed delays, ps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Times {
    /// Serialisation of one DL flit.
    pub ser: u64,
    /// DL flit start of transmission to decoded availability at the far end.
    pub link: u64,
    /// Endpoint processing, each way.
    pub endpoint: u64,
    /// Completer memory access.
    pub completer: u64,
    /// Switch pipeline.
    pub pipeline: u64,
}

/// A link end's transmitter and link state (large: the link's replay buffer and the TL
/// packer; the scheduling state every event looks at is in [`EndHot`]).
pub(crate) struct EndTx {
    pub tl: TlPacker<64>,
    pub link: Link,
    /// Frames taken from a source that did not fit in the TL packer.
    pub txq: VecDeque<u32>,
    /// The credit target (VC 0..=3, 4 the shared pool) the TL stream this end sends has
    /// selected (`TlMessage::CreditTarget`): the flow-control fields pushed return its
    /// credits. A stream starts at the pool.
    pub credit_target: u8,
    /// The protocol's return policy for the credits this end grants its peer: it is told
    /// of every buffer the end frees and says when the credits are due
    /// (`spec-notes/simulator.md#credits`, `Sim::apply_credit_policy`).
    pub credit_rx: CreditReceiver,
    /// TL flits this end's link dropped at retrains (`Sim::retrain`): queued in the link,
    /// and packed into DL flits the peer never delivered.
    pub discarded_queued: u64,
    pub discarded_packed: u64,
    /// Requests and responses pushed into the TL packer.
    pub transfers_sent: u64,
    /// A switch end's address-compression encoder (`link.compress_requests`).
    pub encoder: AddrCache,
}

/// The small, often-read state of a link end's transmitter, kept apart from [`EndTx`] so that
/// waking a transmitter or checking its timer touches one cache line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EndHot {
    /// A `Tx` event is scheduled.
    pub pending: bool,
    /// A wake-up that would have found nothing to do was not scheduled: the (time, sequence
    /// number) it would have had. A kick before that point schedules it there, so the run is
    /// the same as if it had been scheduled (`Sim::kick_lazily`).
    pub deferred: Option<(u64, u64)>,
    pub busy_until: u64,
    /// The time a `Timer` event is scheduled for (`u64::MAX`: none).
    pub timer_at: u64,
    /// TL flits submitted to the link.
    pub tl_submitted: u64,
    pub busy_ps: u64,
    /// Wire time and TL flits carried while the workloads inject.
    pub busy_window_ps: u64,
    pub tl_window: u64,
    pub stall_since: Option<u64>,
    pub stall_ps: u64,
    /// TL data waits in the end's overflow queue, TL packer or link queue (only the end's
    /// own `Tx` event changes those; kept up to date there).
    pub tx_backlog: bool,
    /// The parts of `tx_backlog`: frames in the overflow queue, data in the TL packer, TL
    /// flits in the link's queue.
    pub overflow: bool,
    pub tl_busy: bool,
    pub link_queued: bool,
    /// An accelerator end's requester or completer has something queued (kept up to date
    /// wherever either is changed: `Sim::note_accel_work`).
    pub accel_work: bool,
    /// The end owes its peer credits it may return now (`PortState::owes`; kept up to date
    /// wherever the owed credits or the withheld VCs change: `Sim::note_owed`, and the
    /// end's own `Tx` event, which packs them).
    pub owes: bool,
    /// The PHY is up (false while a fault holds the link down).
    pub phy_up: bool,
    /// The end's link is in `Fault` and an `Ev::LinkFault` is scheduled to reset it.
    pub fault_due: bool,
}

impl EndHot {
    const IDLE: EndHot = EndHot {
        pending: false,
        deferred: None,
        busy_until: 0,
        timer_at: u64::MAX,
        tl_submitted: 0,
        busy_ps: 0,
        busy_window_ps: 0,
        tl_window: 0,
        stall_since: None,
        stall_ps: 0,
        tx_backlog: false,
        overflow: false,
        tl_busy: false,
        link_queued: false,
        accel_work: false,
        owes: false,
        phy_up: true,
        fault_due: false,
    };
}

/// Receive side of a link end.
pub(crate) struct EndRx {
    pub tlu: TlUnpacker,
    /// Frames waiting with their due time: requests at a switch ingress (its pipeline) or
    /// at an accelerator's completer.
    pub fifo: VecDeque<(u64, u32)>,
    /// Responses waiting in a switch ingress pipeline: apart from requests, because their
    /// credits and buffers are, and a request the switch cannot take yet must not hold them
    /// up (`spec-notes/simulator.md#switches`).
    pub rsp: VecDeque<(u64, u32)>,
    /// Time of the `Pipe` event scheduled for this end (`u64::MAX`: none).
    pub pipe_at: u64,
    /// The credit target the TL stream this end receives has selected: the flow-control
    /// fields it carries return that VC's credits (a stream starts at the pool).
    pub credit_target: u8,
    /// Flow-control fields the end's TL unpacker delivered (credit returns applied).
    pub credit_fields: u64,
    /// TL flits delivered by the link.
    pub tl_delivered: u64,
    pub tl_errors: u64,
    /// Requests and responses the TL unpacker delivered.
    pub transfers_received: u64,
    /// A switch end's address-compression decoder: every request that arrives goes through
    /// it (`AddrCache::forward_request`), and what goes on is uncompressed.
    pub decoder: AddrCache,
    /// Requests that arrived compressed and were expanded.
    pub expanded: u64,
}

/// A switch: its forwarding logic and where its ports are among the link ends.
pub(crate) struct SwitchModel {
    pub fwd: Forwarder,
    pub base: u32,
    pub n: u32,
    /// Ingress ends whose pipeline stopped because the switch buffer had no room for the
    /// frame at the head of one of their FIFOs.
    pub blocked: Vec<u32>,
}

/// The whole pod.
pub struct Sim {
    pub(crate) pod: PodFile,
    pub(crate) fabric: Fabric,
    pub(crate) opts: Options,
    pub(crate) t: Times,
    pub(crate) peer: Vec<u32>,
    pub(crate) owner: Vec<Owner>,
    pub(crate) ports: Vec<PortState>,
    /// Every end's transmitter, but for accelerator ends that run an endpoint (which has
    /// its own): those come last, so this is shorter then.
    pub(crate) txs: Vec<EndTx>,
    pub(crate) hot: Vec<EndHot>,
    /// The wire of each link end's transmit direction.
    pub(crate) wires: Vec<Wire>,
    /// The bytes of every DL flit in flight.
    pub(crate) flits: FlitPool,
    pub(crate) rxs: Vec<EndRx>,
    pub(crate) frames: FrameSlab,
    pub(crate) switches: Vec<SwitchModel>,
    pub(crate) accels: accel::Accels,
    /// Every accelerator's memory (shared with the endpoints' hosts).
    pub(crate) mem: Rc<RefCell<SparseMem>>,
    pub(crate) reference: Reference,
    pub(crate) gens: Vec<Generator>,
    /// Workload sources: (generator, member index).
    pub(crate) sources: Vec<(u32, u32)>,
    /// Each source's next operation (gap to the one after, and the operation), drawn when
    /// the one before it issued (`Sim::on_issue`).
    pub(crate) ahead: Vec<Option<(u64, OpSpec)>>,
    pub(crate) trace: Option<Trace>,
    pub(crate) stats: results::Counters,
    pub(crate) lat: [Latency; 3],
    pub(crate) part_lat: Vec<Latency>,
    /// Partition index of each accelerator (into `partition_ids`).
    pub(crate) part_index: Vec<u32>,
    /// Scratch list of frames delivered by one DL flit.
    pub(crate) batch: Vec<u32>,
    sched: Calendar<Ev>,
    /// Injection starts at this time (after link bring-up and the traced read).
    pub(crate) inject_from: u64,
    /// No more injection after this time.
    pub(crate) inject_until: u64,
    /// Offset of each source's first operation from the start of injection.
    pub(crate) first_issue: Vec<u64>,
    /// Interval of the requester timeout sweep, ps.
    pub(crate) sweep_ps: u64,
    /// A `Sweep` event is scheduled (the sweep stops while nothing is open).
    pub(crate) sweeping: bool,
    /// Operations replayed from traces, by time from the start of injection.
    pub(crate) trace_ops: Vec<crate::workload::TraceOp>,
    /// Fault schedule state (only when the options' fault plan is active).
    pub(crate) fault: Option<Box<FaultState>>,
    pub(crate) win: window::Windows,
    /// Requests and responses link resets dropped (`Sim::on_link_fault`, and a fault
    /// plan's long outages, `Sim::note_reset_losses`): per end, what its direction of the
    /// link had lost at its last reset (the end's transfers sent less its peer's received;
    /// empty until the first reset) ...
    pub(crate) reset_lost: Vec<u64>,
    /// (their sum) ...
    pub(crate) reset_lost_sum: u64,
    /// ... and frames waiting for a TL packer, and responses endpoints' completers held,
    /// that resets dropped.
    pub(crate) reset_unpacked: u64,
}

/// Credits each receiver grants per VC and class.
fn grant(pod: &PodFile) -> u32 {
    pod.switch.buffer_flits_per_vc
}

/// A link end's credit policy: the protocol's `CreditReceiver` granting [`grant`] credits
/// of every class per VC (none in the shared pool, which the model does not use), released
/// in band after link bring-up (`TlMessage::CreditTarget` + flow-control fields per VC, then
/// "initial credit release complete"), later returned at `link.credit_return_threshold`
/// pending in a class or `link.credit_return_ns` after the first pending credit.
fn credit_receiver(pod: &PodFile) -> CreditReceiver {
    let g = u16::try_from(grant(pod)).unwrap_or(u16::MAX);
    let per_vc = podlink_protocol::flow::Credits([g; 4]);
    CreditReceiver::new(ReceiverConfig {
        capacity: [
            per_vc,
            per_vc,
            per_vc,
            per_vc,
            podlink_protocol::flow::Credits::ZERO,
        ],
        return_threshold: u16::try_from(pod.link.credit_return_threshold)
            .unwrap_or(u16::MAX)
            .max(1),
        return_delay: ns(pod.link.credit_return_ns),
    })
}

impl Sim {
    /// Build the pod model.
    ///
    /// # Errors
    /// Routes with a missing destination, a loop or a wrong port ([`SimError::Route`],
    /// naming the entry), a fault naming something the pod lacks, a workload trace that
    /// cannot be read or parsed.
    pub fn new(pod: &PodFile, opts: &Options) -> Result<Sim, SimError> {
        let fabric = Fabric::build(pod);
        if let Some(problem) = check_routes(&fabric).into_iter().next() {
            return Err(SimError::Route {
                pod: pod.name.clone(),
                entry: route_entry(pod, &problem),
                problem,
            });
        }
        steer::validate(&opts.faults, &fabric)?;
        let endpoints = pod.accelerator.model == AccelModel::Endpoint;
        let lt = LinkTiming::new(&pod.link);
        let st = SwitchTiming::new(&pod.switch);
        let t = Times {
            ser: lt.serialisation.as_ps(),
            link: lt.flit_latency().as_ps(),
            endpoint: ns(pod.accelerator.endpoint_ns).as_ps(),
            completer: ns(pod.accelerator.completer_ns).as_ps(),
            pipeline: st.pipeline().as_ps(),
        };
        // Link ends: every switch port (contiguous per switch), then every accelerator port.
        let mut owner = Vec::new();
        let mut switches = Vec::new();
        for (s, node) in fabric.switches.iter().enumerate() {
            switches.push(SwitchModel {
                fwd: Forwarder::build(pod, &fabric, s).map_err(|problem| SimError::Switch {
                    pod: pod.name.clone(),
                    switch: s,
                    problem,
                })?,
                base: owner.len() as u32,
                n: node.ports.len() as u32,
                blocked: Vec::new(),
            });
            for p in 0..node.ports.len() {
                owner.push(Owner::Switch {
                    s: s as u32,
                    p: p as u32,
                });
            }
        }
        let accel_base = owner.len() as u32;
        let mut accel_end = Vec::new();
        for (a, ports) in fabric.accel_ports.iter().enumerate() {
            accel_end.push(owner.len() as u32);
            for k in 0..ports.len() {
                owner.push(Owner::Accel {
                    a: a as u32,
                    k: k as u32,
                });
            }
        }
        let mut peer = vec![0u32; owner.len()];
        for (i, o) in owner.iter().enumerate() {
            peer[i] = match *o {
                Owner::Switch { s, p } => match fabric.switches[s as usize].ports[p as usize] {
                    Attach::Accel { accel, port } => accel_end[accel as usize] + port,
                    Attach::Switch { switch, port } => switches[switch as usize].base + port,
                },
                Owner::Accel { a, k } => {
                    let (s, p) = fabric.accel_ports[a as usize][k as usize];
                    switches[s as usize].base + p
                }
            };
        }
        let n = owner.len();
        let ports = (0..n)
            .map(|_| PortState {
                up: true,
                ..Default::default()
            })
            .collect();
        let cfg = UaLinkConfig {
            retry: pod.link_retry_config(),
            hold_limit: Duration::from_ps(pod.link_hold_limit_ps()),
            ..UaLinkConfig::default()
        };
        // Accelerator ends that run an endpoint use its link, TL packer and credits.
        let own_tx = if endpoints { accel_base as usize } else { n };
        let txs = (0..own_tx)
            .map(|i| EndTx {
                tl: TlPacker::new(),
                link: {
                    let mut c = cfg;
                    c.control.port_number = (i & 0xfff) as u16;
                    let mut l = Link::new(c);
                    l.handle_link_up(Instant::ZERO);
                    l
                },
                txq: VecDeque::new(),
                credit_target: POOL,
                credit_rx: credit_receiver(pod),
                discarded_queued: 0,
                discarded_packed: 0,
                transfers_sent: 0,
                encoder: AddrCache::new(),
            })
            .collect();
        let wires = (0..n)
            .map(|i| Wire::new(pod.link.ber, Rng::new(opts.seed, 0x1000_0000 + i as u64)))
            .collect();
        let rxs = (0..n)
            .map(|_| EndRx {
                tlu: TlUnpacker::new(),
                fifo: VecDeque::new(),
                rsp: VecDeque::new(),
                pipe_at: u64::MAX,
                credit_target: POOL,
                credit_fields: 0,
                tl_delivered: 0,
                tl_errors: 0,
                transfers_received: 0,
                decoder: AddrCache::new(),
                expanded: 0,
            })
            .collect();
        let mem = Rc::new(RefCell::new(SparseMem::new(pod.accelerator.memory_bytes)));
        let accels = accel::Accels::new(pod, &fabric, accel_base, &accel_end);
        let mut sim = Sim {
            pod: pod.clone(),
            opts: opts.clone(),
            t,
            peer,
            owner,
            ports,
            txs,
            hot: vec![EndHot::IDLE; n],
            wires,
            flits: FlitPool::default(),
            rxs,
            frames: FrameSlab::default(),
            switches,
            accels,
            mem,
            reference: Reference::new(fabric.accels),
            gens: Vec::new(),
            sources: Vec::new(),
            ahead: Vec::new(),
            trace: None,
            stats: results::Counters::default(),
            lat: Default::default(),
            part_lat: Vec::new(),
            part_index: Vec::new(),
            batch: Vec::new(),
            sched: Calendar::new(),
            inject_from: 0,
            inject_until: 0,
            first_issue: Vec::new(),
            trace_ops: Vec::new(),
            sweep_ps: (ns(pod.accelerator.timeout_us * 1000.0).as_ps() / 10).max(1),
            sweeping: true,
            fabric,
            fault: None,
            win: window::Windows::default(),
            reset_lost: Vec::new(),
            reset_lost_sum: 0,
            reset_unpacked: 0,
        };
        for s in 0..sim.switches.len() {
            let sw = &mut sim.switches[s];
            let range = sw.base as usize..(sw.base + sw.n) as usize;
            for p in 0..sw.n {
                sw.fwd.refresh(p, &sim.ports[range.clone()]);
            }
        }
        sim.build_workloads().map_err(SimError::Workload)?;
        if endpoints {
            // Built once the workloads (and traces) say which VCs carry requests.
            let vcs = sim.request_vcs();
            sim.accels.eps = endpoint::build(pod, &sim.fabric, accel_base, cfg, &sim.mem, vcs);
        }
        if opts.faults.active() {
            sim.fault = Some(Box::new(FaultState::new(&sim, &opts.faults)));
            sim.start_health();
        }
        let sweep = sim.sweep_ps;
        sim.schedule(sweep, Ev::Sweep);
        if !opts.sequential && !opts.faults.active() {
            // The lookahead: a flit reaches the next component a link latency after it
            // leaves, and the sweep comes at least this long after it is scheduled.
            sim.win.len = t.link.min(sweep);
        }
        // Bring every link up: NOP flits both ways, then the DL control exchange; each end's
        // initial credit release waits in its TL packer until the link carries TL flits.
        for e in 0..sim.ends() as u32 {
            if sim.accels.ep_index(e).is_none() {
                sim.take_due_returns(e);
            }
            sim.kick(e, 0);
            sim.arm_timer(e, 0);
        }
        Ok(sim)
    }

    /// The link ends.
    pub fn ends(&self) -> usize {
        self.owner.len()
    }

    /// The fabric.
    pub fn fabric(&self) -> &Fabric {
        &self.fabric
    }

    /// Current simulated time, ps.
    pub fn now(&self) -> u64 {
        self.sched.now().as_ps()
    }

    /// Events executed so far.
    pub fn events(&self) -> u64 {
        self.sched.executed() + self.win.local
    }

    /// Windows run so far (0 when the run goes event by event).
    pub fn windows(&self) -> u64 {
        self.win.windows
    }

    /// Flow-control fields (credit returns) the TL unpackers of all link ends delivered.
    pub fn credit_fields(&self) -> u64 {
        self.rxs.iter().map(|r| r.credit_fields).sum()
    }

    /// Run until `until` ps (or until nothing is left to do). Returns events executed.
    pub fn run_to(&mut self, until: u64) -> u64 {
        let start = self.events();
        let horizon = Instant::from_ps(until);
        if self.win.len > 0 {
            self.run_windows(until);
            self.sched.advance_to(horizon);
            return self.events() - start;
        }
        while let Some(ev) = self.sched.pop_until(horizon) {
            let now = self.sched.now().as_ps();
            self.dispatch(ev, now);
        }
        self.sched.advance_to(horizon);
        self.events() - start
    }

    /// The link of end `e`: the model's, or an accelerator end's endpoint's.
    pub(crate) fn link_of(&self, e: usize) -> &Link {
        match self.ep(e as u32) {
            Some(ep) => ep.link(),
            None => &self.txs[e].link,
        }
    }

    /// Events waiting.
    pub fn pending(&self) -> usize {
        self.sched.pending()
    }

    /// How long the run goes on after injection stops while operations are open, ps: the
    /// options' `drain_ps`, or [`DRAIN_TIMEOUTS`] request timeouts if that is longer.
    pub(crate) fn drain_limit_ps(&self, drain_ps: u64) -> u64 {
        drain_ps.max(
            self.request_timeout()
                .as_ps()
                .saturating_mul(DRAIN_TIMEOUTS),
        )
    }

    /// The accelerators' request timeout (the pod's `accelerator.timeout_us`).
    pub(crate) fn request_timeout(&self) -> Duration {
        ns(self.pod.accelerator.timeout_us * 1000.0)
    }

    /// How long a request from `src` to `dst` that has left its source port's link may
    /// still be in the fabric, ps (`spec-notes/validation.md#fault-plans`): in each switch on
    /// its path at most the residence limit (then the switch drops it), and on each link
    /// after a switch at most a request timeout (a link down that long is retrained on
    /// coming up, its replay buffer emptied, and one declared down is reset).
    pub(crate) fn fabric_residence_ps(&self, src: u32, dst: u32) -> u64 {
        let hops = self
            .fabric
            .hops(src, dst)
            .unwrap_or(self.fabric.switches.len() as u32);
        u64::from(hops).saturating_mul(self.pod.hop_residence_ps())
    }

    /// Time of the next event, ps.
    pub fn next_event(&self) -> Option<u64> {
        self.sched.peek_time().map(Instant::as_ps)
    }

    pub(crate) fn schedule(&mut self, at: u64, ev: Ev) {
        if self.win.on && at < self.win.end {
            let seq = self.sched.reserve_seq();
            if self.window_take(at, seq, ev) {
                return;
            }
            self.sched.at_seq(Instant::from_ps(at), seq, ev);
            return;
        }
        self.sched.at(Instant::from_ps(at), ev);
    }

    /// Schedule `ev` at `at` in the place of sequence number `seq` (from
    /// [`Calendar::reserve_seq`]).
    pub(crate) fn schedule_in_place(&mut self, at: u64, seq: u64, ev: Ev) {
        if self.window_take(at, seq, ev) {
            return;
        }
        self.sched.at_seq(Instant::from_ps(at), seq, ev);
    }
}

impl Sim {
    fn dispatch(&mut self, ev: Ev, now: u64) {
        match ev {
            // (A link that ends in `Fault` while sending sends nothing: `on_tx` looks then.)
            Ev::Tx(e) => self.on_tx(e, now),
            Ev::Arrive(e) => {
                self.on_arrive(e, now);
                if let Some(&r) = self.peer.get(e as usize) {
                    self.note_link_fault(r, now);
                }
            }
            Ev::Timer(e) => {
                self.on_timer(e, now);
                self.note_link_fault(e, now);
            }
            Ev::Pipe(e) => self.on_pipe(e, now),
            Ev::Cpl(e) => self.on_cpl(e, now),
            Ev::Issue(i) => self.on_issue(i, now),
            Ev::Submit(i) => self.on_submit(i, now),
            Ev::Sweep => self.on_sweep(now),
            Ev::Replay(i) => self.on_replay(i, now),
            Ev::Fault(i) => self.on_fault(i, now),
            Ev::Holdoff(e) => self.on_holdoff(e, now),
            Ev::Notify(i) => self.on_notify(i, now),
            Ev::Health(s) => self.on_health(s, now),
            Ev::Rogue(i) => self.on_rogue(i, now),
            Ev::Held(a) => self.drain_backlog(a, now),
            Ev::LinkFault(e) => self.on_link_fault(e, now),
        }
    }
}

/// Run `pod` with `opts` for its injection time from 6 µs, until every operation is done
/// (at most 1 ms more), then 1 µs for the last credit returns to land; returns the sim (not
/// yet reported) and the time the run ended. For tests.
#[cfg(test)]
pub(crate) fn run_settled_until(pod: &PodFile, opts: &Options) -> (Sim, u64) {
    let mut sim = Sim::new(pod, opts).expect("pod builds");
    let start = 6_000_000;
    sim.run_to(start);
    sim.start_workload(start);
    let mut t = start + opts.duration_ps;
    sim.run_to(t);
    while sim.accels.open() > 0 && t < start + 1_000_000_000 {
        t += 1_000_000;
        sim.run_to(t);
    }
    // The last responses released credits: give their returns a few flit times (and the
    // return policy's delay).
    sim.run_to(t + 1_000_000);
    (sim, t + 1_000_000)
}

/// The pod-file entry responsible for a route problem: the last route override at the
/// problem's switch covering its destination, else the last override covering the
/// destination anywhere (a loop runs through several switches), else the topology itself.
fn route_entry(pod: &PodFile, p: &RouteProblem) -> String {
    let (switch, dest) = match *p {
        RouteProblem::Missing { switch, dest }
        | RouteProblem::Loop { switch, dest }
        | RouteProblem::BadPort { switch, dest, .. } => (switch, dest),
    };
    let n = pod.accelerators();
    let covers = |r: &crate::pod::config::RouteOverride| {
        crate::pod::config::parse_ranges(&r.dest, n).is_ok_and(|d| d.contains(&dest))
    };
    let at_switch = pod
        .routes
        .iter()
        .rposition(|r| r.switch == switch && covers(r));
    match at_switch.or_else(|| pod.routes.iter().rposition(covers)) {
        Some(i) => format!("routes.{i}"),
        None => "topology".to_string(),
    }
}

/// Classes in report order, as an index.
pub(crate) fn class_index(c: OpClass) -> usize {
    match c {
        OpClass::Read => 0,
        OpClass::Write => 1,
        OpClass::Atomic => 2,
    }
}
