//! Accelerator ports as the protocol crate's `txn::Endpoint`, unchanged
//! (`accelerator.model = "endpoint"`; `spec-notes/simulator.md#accelerators`).
//!
//! The model only carries out the endpoint's outputs: it hands each port the DL flits that
//! arrive ([`Endpoint::handle_frame`]), wakes it at its deadline
//! ([`Endpoint::poll_timeout`]), sends what [`Endpoint::poll_transmit`] writes over the wire,
//! and submits the workload's requests. Requesting, completing, TL packing, credits both
//! ways and the link all happen inside the endpoint. The port's host ([`Host`]) is the
//! accelerator's sparse memory (shared by its ports) and a sink that keeps read data and
//! responses for a sibling port until the model has checked or handed them on.

use super::accel::{OPS, QUEUE, TAGS};
use super::check::{IntMap, SparseMem};
use super::port::{Frame, VCS};
use super::trace::Mark;
use super::{Owner, Sim, LINK_TXQ, REPLAY_FLITS};
use crate::pod::config::PodFile;
use crate::pod::timing::ns;
use crate::pod::topology::Fabric;
use podlink_protocol::flow::Credits;
use podlink_protocol::link::UaLinkConfig;
use podlink_protocol::time::Instant;
use podlink_protocol::txn::{
    ByteEnables, Endpoint, EndpointConfig, MemoryTarget, ReadData, ReadSink, TargetError,
};
use podlink_protocol::wire::TlTransfer;
use std::cell::RefCell;
use std::rc::Rc;

/// Response slots of an endpoint's completer. The endpoint grants its peer at most this many
/// request commands in all (so its completer is never busy): an eighth of them on each VC's
/// own credits, the other half in the shared pool, which any VC spends once its own are gone
/// (with four data credits per command there). A response holds its slot for the
/// completer's latency (`completer_ns + endpoint_ns`, 60 ns by default) and a request command
/// credit comes back a credit round trip later (about 200 ns by default), so one VC's 160
/// commands carry about 0.8 requests per ns, more than a port's line rate carries of 256 B
/// writes and about two thirds of it in 64 B reads (whose responses fill the other
/// direction first). 256 slots of up to 256 B of data each cost about 74 KB per port.
pub const EP_RESP: usize = 256;

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
        if !self.siblings {
            return false;
        }
        let mut f = Frame {
            field: r.field,
            len: 0,
            data: [0; 256],
            be: r.byte_enables.copied(),
            poisoned: r.poisoned,
            ingress: 0,
            trace: false,
        };
        let n = r.data.len().min(256);
        f.data[..n].copy_from_slice(&r.data[..n]);
        f.len = n as u16;
        self.foreign.push(f);
        true
    }
}

/// The endpoints of every accelerator port, in link-end order from the first accelerator
/// end. `link` is the link configuration every end of the pod runs; `mem` the shared
/// memory.
pub(crate) fn build(
    pod: &PodFile,
    fabric: &Fabric,
    first_end: u32,
    link: UaLinkConfig,
    mem: &Rc<RefCell<SparseMem>>,
) -> Vec<Box<Ep>> {
    let g = u16::try_from(pod.switch.buffer_flits_per_vc).unwrap_or(u16::MAX);
    let own = g.min((EP_RESP / (2 * VCS)) as u16);
    let pool = (EP_RESP / 2) as u16;
    let table = super::accel::partition_table(fabric);
    let mut out = Vec::new();
    let mut e = first_end;
    for (a, p) in fabric.accel_ports.iter().enumerate() {
        for (k, &(sw, _)) in p.iter().enumerate() {
            let (rc, mut cc) = super::accel::port_configs(pod, fabric, a, k);
            cc.response_delay = ns(pod.accelerator.completer_ns + pod.accelerator.endpoint_ns);
            let mut cfg = EndpointConfig::new(rc, cc);
            cfg.partitions = table.clone();
            cfg.link = link;
            cfg.link.control.port_number = (e & 0xfff) as u16;
            cfg.credits = Credits([pool, 0, pool.saturating_mul(4), 0]);
            cfg.per_vc = Credits([own, g, g, g]);
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
        let before = self.before(e);
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
        if self.trace.is_some() {
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
            let ep = &self.accels.eps[i];
            if self.hot[ei].stall_since.is_none()
                && ep.state() == podlink_protocol::retry::LinkState::Up
                && ep.wants_transmit()
            {
                self.hot[ei].stall_since = Some(now);
            }
            return;
        }
        self.launch(e, now, slot, packed);
        if self.accels.eps[i].wants_transmit() {
            self.kick_lazily(e, now);
        }
    }

    /// A DL flit from end `e` arrives at accelerator end `r`'s endpoint.
    pub(crate) fn arrive_ep(&mut self, e: u32, r: u32, now: u64) {
        let before = self.before(r);
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
            self.schedule(n.at, super::Ev::Arrive(e));
        }
        self.ep_outputs(r, now, Some(before));
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
    /// endpoint's counters keep them). With `before` (an arrival), trace marks for what
    /// arrived.
    fn ep_outputs(&mut self, r: u32, now: u64, before: Option<Before>) {
        let Some(i) = self.accels.ep_index(r) else {
            return;
        };
        if let (Some(b), true) = (before, self.trace.is_some()) {
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
            let (ok, old) = match c.result {
                Ok(old) => (true, old),
                Err(_) => (false, None),
            };
            completed = true;
            self.piece_done(piece, ok, old, now);
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
            let before = self.before(e);
            let took = self
                .ep_mut(e)
                .is_some_and(|ep| ep.handle_foreign_response(Instant::from_ps(now), &f.transfer()));
            if took {
                self.ep_outputs(e, now, Some(before));
                self.kick_lazily(e, now);
                return;
            }
        }
        // No port owns the tag.
        self.stats.invalid_frames += 1;
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
    use super::EP_RESP;
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

    /// The switch end facing an endpoint learns the endpoint's grant from its initial
    /// release: an eighth of `EP_RESP` request commands on each VC's own credits, half in
    /// the shared pool (with four data credits each); under a one-VC load heavier than a
    /// VC's own commands carry, the switch spends the pool, marks those frames' `pool` bit,
    /// and the endpoint releases them there: nothing refused, overrun or lost.
    #[test]
    fn the_switch_spends_an_endpoints_pool_and_says_so() {
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
        let pool = (EP_RESP / 2) as u32;
        let mut spends = 0;
        for e in first_accel..sim.ends() {
            let s = sim.peer[e] as usize;
            let c = &sim.ports[s].credits;
            assert!(c.initial_release_complete(), "switch end {s}");
            let vc0 = CreditTarget::Vc(Vc::default());
            assert_eq!(c.grant(vc0, CreditClass::ReqCmd), (EP_RESP / 8) as u32);
            assert_eq!(c.grant(vc0, CreditClass::RspCmd), 256);
            assert_eq!(c.grant(CreditTarget::Shared, CreditClass::ReqCmd), pool);
            assert_eq!(
                c.grant(CreditTarget::Shared, CreditClass::ReqData),
                4 * pool
            );
            assert_eq!(c.grant(CreditTarget::Shared, CreditClass::RspCmd), 0);
            spends += c.stats().pool_spends;
            let ep = sim.ep(e as u32).expect("an endpoint");
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
        assert!(spends > 0, "the pool was spent");
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

    /// Fault plans need the composed model (for now): a pod file asking for both is refused
    /// naming the field.
    #[test]
    fn endpoints_with_faults_are_refused() {
        let text = "name = \"x\"\n[topology]\nkind = \"single-switch\"\naccelerators = 4\n\
                    [accelerator]\nmodel = \"endpoint\"\n[faults]\n[[faults.events]]\n\
                    at_us = 1\nkind = \"port-fail\"\nswitch = 0\nport = 1\n";
        let e = PodFile::parse(text, "x.toml").expect_err("refused");
        assert_eq!(e.field.as_deref(), Some("accelerator.model"), "{e}");
        assert!(PodFile::parse(&text.replace("endpoint", "composed"), "x.toml").is_ok());
    }
}
