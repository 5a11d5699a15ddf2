//! Accelerator ports as the protocol crate's `txn::Endpoint`, unchanged
//! (`accelerator.model = "endpoint"`, the default; `spec-notes/simulator.md#accelerators`).
//!
//! The model only carries out the endpoint's outputs: it hands each port the DL flits that
//! arrive ([`Endpoint::handle_frame`]), wakes it at its deadline
//! ([`Endpoint::poll_timeout`]), sends what [`Endpoint::poll_transmit`] writes over the wire,
//! and submits the workload's requests. Requesting, completing, TL packing, credits both
//! ways and the link all happen inside the endpoint. The port's host ([`Host`]) is the
//! accelerator's sparse memory (shared by its ports) and a sink that keeps read data and
//! responses for a sibling port until the model has checked or handed them on; a rogue
//! requester of a fault plan sits behind it. Faults reach the endpoint through its own
//! inputs (`handle_link_down`/`up`, `reset`, `abort`, `set_credits_withheld`).

use super::accel::{OPS, QUEUE, TAGS};
use super::check::{IntMap, SparseMem};
use super::port::{Frame, VCS};
use super::steer::RogueRequester;
use super::trace::Mark;
use super::{Owner, Sim, LINK_TXQ, REPLAY_FLITS};
use crate::pod::config::PodFile;
use crate::pod::timing::ns;
use crate::pod::topology::Fabric;
use podlink_protocol::flow::{CreditTarget, Credits};
use podlink_protocol::link::UaLinkConfig;
use podlink_protocol::time::Instant;
use podlink_protocol::txn::{
    ByteEnables, CreditGate, Endpoint, EndpointConfig, MemoryTarget, ReadData, ReadSink,
    TargetError,
};
use podlink_protocol::wire::TlTransfer;
use std::cell::RefCell;
use std::rc::Rc;

/// Response slots of an endpoint's completer: the endpoint grants its peer at most this many
/// request commands in all, so that its completer is never busy ([`request_grants`] splits
/// them over the VCs). A slot holds up to 256 B of data: 256 slots cost about 74 KB per port.
pub const EP_RESP: usize = 256;

/// Request commands kept for a VC that no workload uses (the pod's VCs are known when it is
/// built; a few let a stray request through).
const SPARE_VC_CMDS: u16 = 8;

/// The request commands an endpoint grants on each VC's own credits: [`SPARE_VC_CMDS`] on a
/// VC no workload uses, the rest of [`EP_RESP`] evenly over the VCs that carry requests
/// (`used`: bit per VC), each at most `g` (the pod's `buffer_flits_per_vc`). Nothing goes in
/// the shared pool, so that a VC whose credits a receiver withholds stops (the
/// `vc-starvation` scenario): a VC with credits in a pool could go on through it.
pub fn request_grants(g: u16, used: u8) -> [u16; VCS] {
    let used = if used & 0xf == 0 { 1 } else { used & 0xf };
    let n_used = used.count_ones() as u16;
    let spare = SPARE_VC_CMDS * (VCS as u16 - n_used);
    let each = (EP_RESP as u16 - spare) / n_used;
    core::array::from_fn(|vc| {
        let n = if used & (1 << vc) != 0 {
            each
        } else {
            SPARE_VC_CMDS
        };
        n.min(g)
    })
}

/// One accelerator port.
pub(crate) type Ep = Endpoint<Host, TAGS, OPS, QUEUE, EP_RESP, REPLAY_FLITS, LINK_TXQ>;

/// What an endpoint serves and where its results go.
pub(crate) struct Host {
    /// The accelerator.
    a: u32,
    /// Every accelerator's memory (one map, each port sees its accelerator's part).
    mem: Rc<RefCell<SparseMem>>,
    /// The accelerator has another port into the same switch: a response may arrive at
    /// this port for that port's requester.
    siblings: bool,
    /// Requester operation ID → piece (operation × 16 + index).
    pub piece_of: IntMap<u32>,
    /// Read data delivered since the model last looked: (operation ID, offset, start in
    /// `bytes`, length).
    reads: Vec<(u32, u32, usize, usize)>,
    bytes: Vec<u8>,
    /// Responses for a sibling port's requester.
    foreign: Vec<Frame>,
    /// Rogue requesters behind this port (a fault plan's `inject`), shared with the fault
    /// state; they send after the port's own transfers ([`ReadSink::extra_transfer`]).
    rogues: Vec<Rc<RefCell<RogueRequester>>>,
    /// The rogue transfer being sent (copied out of its requester).
    extra: Option<Frame>,
    /// TL flits the port's link dropped at retrains: queued in the link, and packed into
    /// DL flits the peer never delivered (for the conservation balance).
    pub discarded_queued: u64,
    pub discarded_packed: u64,
}

impl Host {
    /// A rogue requester now sits behind this port.
    pub fn add_rogue(&mut self, r: Rc<RefCell<RogueRequester>>) {
        self.rogues.push(r);
    }

    /// Whether a rogue requester behind this port has requests queued.
    pub fn rogue_waiting(&self) -> bool {
        self.rogues.iter().any(|r| r.borrow().queued() > 0)
    }
}

impl MemoryTarget for Host {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.mem.borrow_mut().of(self.a).read(addr, buf)
    }

    fn write(&mut self, addr: u64, data: &[u8], enables: &ByteEnables) -> Result<(), TargetError> {
        self.mem.borrow_mut().of(self.a).write(addr, data, enables)
    }
}

impl ReadSink for Host {
    fn read_data(&mut self, d: ReadData<'_>) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(d.data);
        self.reads.push((d.op.0, d.offset, start, d.data.len()));
    }

    fn foreign_response(&mut self, _now: Instant, r: &TlTransfer<'_>) -> bool {
        // (A rogue requester's tags overlap the port's own: a response to it, if one came
        // back here, would be its owner's to drop, as in the composed model.)
        if !self.siblings {
            return false;
        }
        self.foreign.push(Frame::of(r, 0));
        true
    }

    fn extra_transfer(
        &mut self,
        now: Instant,
        credits: &mut dyn CreditGate,
    ) -> Option<TlTransfer<'_>> {
        let f = self.rogues.iter().find_map(|r| {
            let mut req = r.borrow_mut();
            req.poll_transmit(now, &mut &mut *credits)
                .map(|t| Frame::of(&t, 0))
        })?;
        Some(self.extra.insert(f).transfer())
    }
}

/// The endpoints of every accelerator port, in link-end order from the first accelerator
/// end. `link` is the link configuration every end of the pod runs; `mem` the shared
/// memory; `vcs` the VCs requests use (bit per VC).
pub(crate) fn build(
    pod: &PodFile,
    fabric: &Fabric,
    first_end: u32,
    link: UaLinkConfig,
    mem: &Rc<RefCell<SparseMem>>,
    vcs: u8,
) -> Vec<Box<Ep>> {
    let g = u16::try_from(pod.switch.buffer_flits_per_vc).unwrap_or(u16::MAX);
    let cmds = request_grants(g, vcs);
    let table = super::accel::partition_table(fabric);
    let quarantine = super::accel::tag_quarantine(pod, fabric);
    let mut out = Vec::new();
    let mut e = first_end;
    for (a, p) in fabric.accel_ports.iter().enumerate() {
        for (k, &(sw, _)) in p.iter().enumerate() {
            let (rc, mut cc) = super::accel::port_configs(pod, fabric, a, k, quarantine);
            cc.response_delay = ns(pod.accelerator.completer_ns + pod.accelerator.endpoint_ns);
            let mut cfg = EndpointConfig::new(rc, cc);
            cfg.partitions = table.clone();
            cfg.link = link;
            cfg.link.control.port_number = (e & 0xfff) as u16;
            cfg.credits = Credits::ZERO;
            cfg.per_vc = Credits([g, g, g, g]);
            cfg.per_vc_req_cmds = Some(cmds);
            cfg.credit_return_threshold = u16::try_from(pod.link.credit_return_threshold)
                .unwrap_or(u16::MAX)
                .max(1);
            cfg.credit_return_delay = ns(pod.link.credit_return_ns);
            let host = Host {
                a: a as u32,
                mem: Rc::clone(mem),
                siblings: p.iter().filter(|&&(s, _)| s == sw).count() > 1,
                piece_of: IntMap::default(),
                reads: Vec::new(),
                bytes: Vec::new(),
                foreign: Vec::new(),
                rogues: Vec::new(),
                extra: None,
                discarded_queued: 0,
                discarded_packed: 0,
            };
            let mut ep = Box::new(Endpoint::new(cfg, host));
            ep.handle_link_up(Instant::ZERO);
            out.push(ep);
            e += 1;
        }
    }
    out
}

/// What a port's outputs looked like before an input, to tell what it did (trace marks).
#[derive(Clone, Copy)]
pub(crate) struct Before {
    /// Requests queued in the requester.
    queued: usize,
    /// Responses the completer holds.
    pending: usize,
    /// Operations open in the requester.
    open: usize,
}

impl Sim {
    /// The endpoint of accelerator end `e`, if the pod runs endpoints.
    pub(crate) fn ep(&self, e: u32) -> Option<&Ep> {
        self.accels.eps.get(self.accels.ep_index(e)?).map(|b| &**b)
    }

    fn ep_mut(&mut self, e: u32) -> Option<&mut Ep> {
        let i = self.accels.ep_index(e)?;
        self.accels.eps.get_mut(i).map(|b| &mut **b)
    }

    fn before(&self, e: u32) -> Before {
        let ep = self.ep(e);
        Before {
            queued: ep.map_or(0, |p| p.requester().queued()),
            pending: ep.map_or(0, |p| p.completer().pending()),
            open: ep.map_or(0, |p| p.requester().ops_open()),
        }
    }

    /// End `e`'s endpoint may send: one DL flit from `poll_transmit`, onto the wire.
    pub(crate) fn on_tx_ep(&mut self, e: u32, now: u64) {
        let ei = e as usize;
        let before = self.trace.is_some().then(|| self.before(e));
        let slot = self.flits.take();
        let t = Instant::from_ps(now);
        let Some(i) = self.accels.ep_index(e) else {
            self.flits.put(slot);
            return;
        };
        let ep = &mut self.accels.eps[i];
        let packed_before = ep.link().stats().tl_packed;
        let sent = ep.poll_transmit(t, self.flits.get_mut(slot)).is_some();
        let packed = ep.link().stats().tl_packed - packed_before;
        self.hot[ei].tl_submitted = ep.stats().tl_flits_sent;
        while ep.poll_event().is_some() {}
        if let Some(before) = before {
            let after = self.before(e);
            if after.queued < before.queued || after.pending < before.pending {
                if let Some(tr) = self.trace.as_mut() {
                    tr.mark(now, Mark::Pull(e));
                }
            }
        }
        self.arm_timer(e, now);
        if !sent {
            self.flits.put(slot);
            self.note_link_fault(e, now);
            if self.hot[ei].stall_since.is_none()
                && self.accels.eps[i].state() == podlink_protocol::retry::LinkState::Up
                && self.wants_tx(e)
            {
                self.hot[ei].stall_since = Some(now);
            }
            return;
        }
        self.launch(e, now, slot, packed);
        // The replay slot the next DL flit is packed into has not been touched since the
        // ring last came round: have it in cache by then.
        if let Some(next) = self.accels.eps[i].link().retry().next_submit_slot() {
            super::window::prefetch_flit(next);
        }
        if self.wants_tx(e) {
            self.kick_lazily(e, now);
        }
    }

    /// A DL flit from end `e` arrives at accelerator end `r`'s endpoint.
    pub(crate) fn arrive_ep(&mut self, e: u32, r: u32, now: u64) {
        let before = self.trace.is_some().then(|| self.before(r));
        let wire = &mut self.wires[e as usize];
        let Some(f) = wire.flight.front() else {
            return;
        };
        let Some(i) = self.accels.ep_index(r) else {
            return;
        };
        let ep = &mut self.accels.eps[i];
        if !f.lost {
            ep.handle_frame(Instant::from_ps(now), self.flits.get(f.slot));
        }
        self.rxs[r as usize].tl_delivered = ep.stats().tl_flits_received;
        wire.flight.pop(&mut self.flits);
        if let Some(n) = wire.flight.front() {
            self.flits.prefetch(n.slot);
            self.schedule(n.at, super::Ev::Arrive(e));
        }
        self.ep_outputs(r, now, before);
        self.arm_timer(r, now);
        self.kick_lazily(r, now);
    }

    /// End `e`'s endpoint's deadline passed.
    pub(crate) fn timer_ep(&mut self, e: u32, now: u64) {
        if let Some(ep) = self.ep_mut(e) {
            ep.handle_timeout(Instant::from_ps(now));
        }
        self.ep_outputs(e, now, None);
        self.arm_timer(e, now);
        self.kick_lazily(e, now);
    }

    /// Carry out what accelerator end `r`'s endpoint produced: check read data, hand
    /// responses for a sibling port over, finish completed pieces, drop events (the
    /// endpoint's counters keep them). With `before` (an arrival while a trace is on),
    /// trace marks for what arrived.
    fn ep_outputs(&mut self, r: u32, now: u64, before: Option<Before>) {
        let Some(i) = self.accels.ep_index(r) else {
            return;
        };
        if let Some(b) = before {
            let after = self.before(r);
            let host = self.accels.eps[i].host();
            let response = !host.reads.is_empty() || !host.foreign.is_empty();
            let done = after.open < b.open;
            if let Some(tr) = self.trace.as_mut() {
                if after.pending > b.pending {
                    // The request took effect now; its response is ready after the
                    // completer's latency (`response_delay`).
                    tr.mark(now, Mark::Deliver(r));
                    tr.mark(now + self.t.completer + self.t.endpoint, Mark::Handle(r));
                } else if response || done {
                    tr.mark(now, Mark::Deliver(r));
                }
            }
        }
        // Read data, checked against the reference.
        let host = self.accels.eps[i].host_mut();
        let reads = std::mem::take(&mut host.reads);
        let bytes = std::mem::take(&mut host.bytes);
        for &(op, offset, start, len) in &reads {
            let piece = self.accels.eps[i]
                .host()
                .piece_of
                .get(&u64::from(op))
                .copied()
                .unwrap_or(u32::MAX);
            let data = bytes.get(start..start + len).unwrap_or(&[]);
            super::accel::check_read(&self.accels.ops, &mut self.reference, piece, offset, data);
        }
        let host = self.accels.eps[i].host_mut();
        host.reads = reads;
        host.reads.clear();
        host.bytes = bytes;
        host.bytes.clear();
        // Responses for a sibling port (same accelerator, same switch).
        let foreign = std::mem::take(&mut self.accels.eps[i].host_mut().foreign);
        for f in &foreign {
            self.hand_over(r, f, now);
        }
        let host = self.accels.eps[i].host_mut();
        host.foreign = foreign;
        host.foreign.clear();
        // Completions.
        let mut completed = false;
        loop {
            let ep = &mut self.accels.eps[i];
            let Some(c) = ep.poll_completion() else {
                break;
            };
            let piece = ep
                .host_mut()
                .piece_of
                .remove(&u64::from(c.id.0))
                .unwrap_or(u32::MAX);
            let (end, old) = super::accel::PieceEnd::of(c.result);
            completed = true;
            self.piece_done(piece, end, old, now);
        }
        while self.accels.eps[i].poll_event().is_some() {}
        if completed {
            if let Owner::Accel { a, .. } = self.owner[r as usize] {
                self.drain_backlog(a, now);
            }
        }
    }

    /// Response `f` arrived at end `r` for another port of the same accelerator into the
    /// same switch: the port whose requester owns its tag takes it.
    fn hand_over(&mut self, r: u32, f: &Frame, now: u64) {
        let Owner::Accel { a, .. } = self.owner[r as usize] else {
            return;
        };
        let first = self.accels.end_of[a as usize];
        let sw = self.switch_behind(r);
        for e in first..first + self.accels.nports[a as usize] {
            if e == r || self.switch_behind(e) != sw {
                continue;
            }
            let before = self.trace.is_some().then(|| self.before(e));
            let took = self
                .ep_mut(e)
                .is_some_and(|ep| ep.handle_foreign_response(Instant::from_ps(now), &f.transfer()));
            if took {
                self.ep_outputs(e, now, before);
                self.kick_lazily(e, now);
                return;
            }
        }
        // No port owns the tag.
        self.stats.invalid_frames += 1;
    }

    /// Fault paths: the PHY of accelerator end `e` went down (`up` false) or came up.
    /// Returns false if `e` runs no endpoint.
    pub(crate) fn ep_phy(&mut self, e: u32, up: bool, now: u64) -> bool {
        let Some(ep) = self.ep_mut(e) else {
            return false;
        };
        let t = Instant::from_ps(now);
        if up {
            ep.handle_link_up(t);
        } else {
            ep.handle_link_down(t);
        }
        while ep.poll_event().is_some() {}
        true
    }

    /// Fault paths: accelerator end `e`'s endpoint starts over (`Sim::retrain`): its link,
    /// TL packer and unpacker, credits and address caches reset; what the link dropped is
    /// counted for the conservation balance. Its requester's operations in flight complete
    /// by timeout (or were given up when the port was declared down); the completer drops
    /// the responses it held (`Completer::drop_held`), as the fresh initial release grants
    /// their buffers again. Returns false if `e` runs no endpoint.
    pub(crate) fn ep_retrain(&mut self, e: u32, now: u64) -> bool {
        let delivered = self.rxs[self.peer[e as usize] as usize].tl_delivered;
        let Some(ep) = self.ep_mut(e) else {
            return false;
        };
        let queued = (LINK_TXQ - ep.link().tx_room()) as u64;
        let packed = ep.link().stats().tl_packed;
        ep.reset(Instant::from_ps(now));
        while ep.poll_event().is_some() {}
        let h = ep.host_mut();
        h.discarded_queued += queued;
        h.discarded_packed = packed.saturating_sub(delivered);
        true
    }

    /// Fault paths: accelerator end `e` was declared down: its requester gives up every
    /// operation open on it (`Endpoint::abort`). Returns false if `e` runs no endpoint.
    pub(crate) fn ep_abort(&mut self, e: u32, now: u64) -> bool {
        let Some(ep) = self.ep_mut(e) else {
            return false;
        };
        ep.abort(Instant::from_ps(now));
        self.ep_outputs(e, now, None);
        true
    }

    /// Fault paths: accelerator end `e` keeps (`keep`) or returns again the credits of VC
    /// `vc` that it frees. Returns false if `e` runs no endpoint.
    pub(crate) fn ep_withhold(&mut self, e: u32, vc: u8, keep: bool, now: u64) -> bool {
        let Some(ep) = self.ep_mut(e) else {
            return false;
        };
        let target = CreditTarget::Vc(podlink_protocol::wire::Vc::from_bits_truncate(vc));
        ep.set_credits_withheld(target, keep);
        self.arm_timer(e, now);
        self.kick_lazily(e, now);
        true
    }

    /// The VCs that requests of this pod use (bit per VC): its workloads' (a trace's, op by
    /// op), and VC 0 (the traced read, rogue requesters).
    pub(crate) fn request_vcs(&self) -> u8 {
        let mut vcs = 1u8;
        for w in &self.pod.workloads {
            if w.pattern != crate::pod::config::Pattern::Trace {
                vcs |= 1u8.checked_shl(u32::from(w.vc)).unwrap_or(0);
            }
        }
        for t in &self.trace_ops {
            vcs |= 1u8.checked_shl(u32::from(t.op.vc)).unwrap_or(0);
        }
        vcs & 0xf
    }

    /// The switch at the far end of accelerator end `e`.
    pub(crate) fn switch_behind(&self, e: u32) -> Option<u32> {
        match self.owner[self.peer[e as usize] as usize] {
            Owner::Switch { s, .. } => Some(s),
            Owner::Accel { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{run_settled_until, Options, Sim};
    use super::{request_grants, EP_RESP};
    use crate::pod::config::{AccelModel, PodFile, Topology};
    use crate::pod::presets;
    use podlink_protocol::flow::{CreditClass, CreditTarget};
    use podlink_protocol::wire::Vc;

    fn endpoint_pod(name: &str) -> PodFile {
        let mut pod = presets::load(name).expect("preset");
        pod.accelerator.model = AccelModel::Endpoint;
        pod
    }

    /// Run `pod` for `us` µs of injection from 6 µs and let every operation finish.
    fn run_drained(pod: &PodFile, us: u64) -> Sim {
        let opts = Options {
            duration_ps: us * 1_000_000,
            warmup_ps: 0,
            ..Options::default()
        };
        run_settled_until(pod, &opts).0
    }

    /// `request_grants`: unused VCs keep a few request commands, the VCs in use share the
    /// rest of the completer's slots, never more than the pod's per-VC grant, never more
    /// than the slots in all.
    #[test]
    fn request_commands_go_to_the_vcs_in_use() {
        assert_eq!(request_grants(256, 0b0001), [232, 8, 8, 8]);
        assert_eq!(request_grants(256, 0b0011), [120, 120, 8, 8]);
        assert_eq!(request_grants(256, 0b1111), [64; 4]);
        assert_eq!(request_grants(100, 0b0001), [100, 8, 8, 8]);
        assert_eq!(request_grants(4, 0b0101), [4; 4]);
        assert_eq!(request_grants(256, 0), request_grants(256, 1));
        for used in 0..16u8 {
            let sum: u16 = request_grants(u16::MAX, used).iter().sum();
            assert!(sum <= EP_RESP as u16, "{used:#b}: {sum}");
        }
    }

    /// The switch end facing an endpoint learns the endpoint's grant from its initial
    /// release: the request commands of [`request_grants`] on each VC (the pod's workloads
    /// use VC 0 only here), nothing in the shared pool, the pod's grant in the other
    /// classes. Under a load of 64 B reads heavy enough to use them all, the endpoints'
    /// completers are never busy and nothing is refused, overrun or lost; once the run has
    /// settled, every credit spent either way is back, none twice.
    #[test]
    fn the_switch_learns_an_endpoints_grant() {
        let mut pod = endpoint_pod("single-switch-16");
        for w in &mut pod.workloads {
            w.offered_load = 0.9;
            w.message_bytes = 64;
            w.read = 1.0;
            w.write = 0.0;
            w.atomic = 0.0;
            w.vc = 0;
        }
        let sim = run_drained(&pod, 2);
        let first_accel = sim.accels.end_of[0] as usize;
        let want = request_grants(256, 1);
        for e in first_accel..sim.ends() {
            let s = sim.peer[e] as usize;
            let c = &sim.ports[s].credits;
            assert!(c.initial_release_complete(), "switch end {s}");
            for (vc, &cmds) in want.iter().enumerate() {
                let t = CreditTarget::Vc(Vc::from_bits_truncate(vc as u8));
                assert_eq!(c.grant(t, CreditClass::ReqCmd), u32::from(cmds), "VC {vc}");
                assert_eq!(c.grant(t, CreditClass::ReqData), 256, "VC {vc}");
                assert_eq!(c.grant(t, CreditClass::RspCmd), 256, "VC {vc}");
            }
            for class in CreditClass::ALL {
                assert_eq!(c.grant(CreditTarget::Shared, class), 0);
            }
            let ep = sim.ep(e as u32).expect("an endpoint");
            // Settled: every credit spent either way came back, once.
            for t in CreditTarget::ALL {
                for class in CreditClass::ALL {
                    assert_eq!(c.available(t, class), c.grant(t, class), "switch end {s}");
                    let back = ep.credit_sender();
                    assert_eq!(back.available(t, class), back.grant(t, class), "end {e}");
                }
            }
            assert_eq!(c.stats().return_above_grant, 0, "switch end {s}");
            let st = ep.stats();
            assert_eq!(
                (st.overruns, st.busy_drops, st.bad_releases),
                (0, 0, 0),
                "end {e}"
            );
            assert!(
                ep.completer().stats().requests > 0,
                "end {e} served requests"
            );
        }
        let r = sim.report(None);
        let s = &r.summary;
        assert!(s.drained && s.integrity.ok() && s.conservation.ok, "{s:?}");
        assert!(s.integrity.lines_checked > 1000, "{:?}", s.integrity);
    }

    /// With two ports of an accelerator into one switch, a response may arrive at the port
    /// whose requester did not send the request: the arrival port's endpoint hands it over
    /// (`ReadSink::foreign_response`) and the owner's completes it
    /// (`Endpoint::handle_foreign_response`); every read is checked.
    #[test]
    fn responses_at_a_sibling_port_are_handed_over() {
        let mut pod = endpoint_pod("single-switch-16");
        pod.topology = Topology::SingleSwitch {
            accelerators: 8,
            ports_per_accel: 2,
        };
        for w in &mut pod.workloads {
            w.offered_load = 0.3;
        }
        let sim = run_drained(&pod, 1);
        let foreign: u64 = sim
            .accels
            .eps
            .iter()
            .map(|e| e.stats().foreign_responses)
            .sum();
        assert!(foreign > 10, "{foreign} responses handed over");
        assert_eq!(sim.stats.invalid_frames, 0);
        let r = sim.report(None);
        let s = &r.summary;
        assert_eq!(s.integrity.failed, 0, "{:?}", s.integrity);
        assert!(s.drained && s.integrity.ok() && s.conservation.ok, "{s:?}");
    }
}
