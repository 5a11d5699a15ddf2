//! What endpoints know about the fabric under faults, and how they steer requests
//! (`spec-notes/validation.md#conformance-scenarios`): per accelerator port, what its own PHY
//! says and what the fabric manager told every endpoint; the choice of port for a new request;
//! the per-region pins that keep a moved region in order; the record of finished operations;
//! rogue requesters.

use super::check::{pattern, IntMap};
use super::fault::{FaultKind, FaultPlan, FaultReport, OpRecord, PortRef, RogueResult};
use super::{Ev, Owner, Sim, SimError};
use crate::pod::topology::{Attach, Fabric};
use podlink_protocol::time::{Duration, Instant};
use podlink_protocol::txn::{Operation, Request, Requester, RequesterConfig};
use podlink_protocol::wire::{AccelId, PartitionId, Vc};
use std::cell::RefCell;
use std::rc::Rc;

/// A rogue requester: small tables, it sends at most a few dozen writes.
pub(crate) type RogueRequester = Requester<64, 64, 16>;

/// Write ID whose pattern rogue writes carry (the reference never reaches it).
const ROGUE_WID: u32 = u32::MAX;

/// What every endpoint knows about an accelerator port (after notification).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Known {
    Up,
    Degraded,
    Down,
}

impl Known {
    pub fn name(self) -> &'static str {
        match self {
            Known::Up => "up",
            Known::Degraded => "degraded",
            Known::Down => "down",
        }
    }
}

/// A rogue requester and where it sends.
pub(crate) struct Rogue {
    pub end: u32,
    /// Shared with the host of the endpoint it sits behind (`accelerator.model =
    /// "endpoint"`), which sends its transfers.
    pub req: Rc<RefCell<RogueRequester>>,
    pub dst: u32,
    pub addr: u64,
    pub count: u32,
    pub gap_ps: u64,
    pub result: RogueResult,
}

/// Fault-run state.
pub(crate) struct FaultState {
    pub plan: FaultPlan,
    pub report: FaultReport,
    /// First accelerator link end.
    pub accel_base: u32,
    /// Per link end: the PHY went down at this time (None: up).
    pub down_at: Vec<Option<u64>>,
    /// Per link (by its switch end): when its current outage began, and each end's next
    /// sequence number then (its flits before it were sent before the outage). An outage
    /// goes on across an up too short to replay them (`Sim::phy_down`).
    pub outage: Vec<Option<(u64, [podlink_protocol::wire::SeqNum; 2])>>,
    /// Per link end: reported down to its switch / endpoint.
    pub declared: Vec<bool>,
    /// Per link end: failed for good (never comes up).
    pub failed: Vec<bool>,
    /// Per accelerator end: its own PHY is usable (immediate knowledge).
    pub local_ok: Vec<bool>,
    /// Per accelerator end: what every endpoint has been told.
    pub known: Vec<Known>,
    /// Per accelerator end: the switch it attaches to.
    pub switch_of: Vec<u32>,
    /// First end and port count of each accelerator.
    pub end_of: Vec<u32>,
    pub nports: Vec<u32>,
    /// Pending notifications: (accelerator end, state, the switch port it concerns).
    pub notes: Vec<(u32, Known, PortRef)>,
    /// (source, destination, region) → the port its requests go out of, and what keeps it
    /// there.
    pub pins: IntMap<Pin>,
    pub rogues: Vec<Rogue>,
    /// Switch ends whose transceivers count errors.
    pub module_errors: Vec<ModuleErrors>,
    /// (accelerator, VC) whose credits are withheld now (`withhold` not yet released).
    pub withheld: Vec<(u32, u8)>,
}

/// A switch end whose transceiver counts (corrected) errors: its counter is `base` at
/// `since_ps` and grows by `per_window` every health window after, whenever it is read (the
/// switches' timers run more often than the health window when rate caps are in force).
#[derive(Debug, Clone, Copy)]
pub struct ModuleErrors {
    /// The switch end.
    pub end: u32,
    /// Errors per health window.
    pub per_window: u32,
    /// When this rate started.
    pub since_ps: u64,
    /// The counter then.
    pub base: u32,
}

impl ModuleErrors {
    /// The counter at `now` with health windows of `window_ps`: `per_window` more for every
    /// window that has begun since `since_ps` (so the first window to close after the rate
    /// started reads `per_window` more, as a counter read once per window would).
    pub fn counter(&self, now: u64, window_ps: u64) -> u32 {
        let windows = now.saturating_sub(self.since_ps).div_ceil(window_ps.max(1));
        let n = u64::from(self.per_window).saturating_mul(windows);
        self.base.wrapping_add(n as u32)
    }
}

/// Check that every fault names things the pod has.
///
/// # Errors
/// [`SimError::Fault`] naming the fault and what is missing.
pub(crate) fn validate(plan: &FaultPlan, f: &Fabric) -> Result<(), SimError> {
    for (index, fault) in plan.faults.iter().enumerate() {
        let err = |message: String| SimError::Fault { index, message };
        let port = |p: &PortRef| -> Result<(), SimError> {
            let sw = f
                .switches
                .get(p.switch as usize)
                .ok_or_else(|| err(format!("no switch {}", p.switch)))?;
            if p.port as usize >= sw.ports.len() {
                return Err(err(format!("switch {} has no port {}", p.switch, p.port)));
            }
            Ok(())
        };
        let accel = |a: u32| -> Result<(), SimError> {
            if a >= f.accels {
                return Err(err(format!("no accelerator {a}")));
            }
            Ok(())
        };
        match fault.what {
            FaultKind::LinkDown(p) | FaultKind::LinkUp(p) | FaultKind::PortFail(p) => port(&p)?,
            FaultKind::ModuleErrors { link, .. } => {
                port(&link)?;
                if plan.health_window_ps.is_none() {
                    return Err(err("module errors need a health window".into()));
                }
            }
            FaultKind::SetBer { link, ber } => {
                port(&link)?;
                if !(ber.is_finite() && (0.0..1e-2).contains(&ber)) {
                    return Err(err(format!("bit error rate {ber}: must be in [0, 0.01)")));
                }
            }
            FaultKind::PlaneFail { switch } => {
                if switch as usize >= f.switches.len() {
                    return Err(err(format!("no switch {switch}")));
                }
            }
            FaultKind::Inject {
                from,
                port: k,
                claim,
                dst,
                count,
                ..
            } => {
                accel(from)?;
                accel(claim)?;
                accel(dst)?;
                if k as usize >= f.accel_ports[from as usize].len() {
                    return Err(err(format!("accelerator {from} has no port {k}")));
                }
                if count > 64 {
                    return Err(err(format!("{count} writes: at most 64")));
                }
            }
            FaultKind::Withhold { accel: a, vc } | FaultKind::Release { accel: a, vc } => {
                accel(a)?;
                if vc > 3 {
                    return Err(err(format!("virtual channel {vc}: must be 0..=3")));
                }
            }
            FaultKind::Mark { switch } => {
                if switch as usize >= f.switches.len() {
                    return Err(err(format!("no switch {switch}")));
                }
            }
        }
    }
    Ok(())
}

impl FaultState {
    pub fn new(sim: &Sim, plan: &FaultPlan) -> FaultState {
        let n = sim.ends();
        let accel_base = sim.accels.end_of.first().copied().unwrap_or(n as u32);
        let switch_of = (accel_base as usize..n)
            .map(|e| match sim.owner[sim.peer[e] as usize] {
                Owner::Switch { s, .. } => s,
                Owner::Accel { .. } => u32::MAX,
            })
            .collect();
        let na = n - accel_base as usize;
        let mut plan = plan.clone();
        plan.faults.sort_by_key(|f| f.at_ps);
        FaultState {
            report: FaultReport {
                plan: plan.faults.clone(),
                open_at_fault: vec![0; plan.faults.len()],
                ..FaultReport::default()
            },
            plan,
            accel_base,
            down_at: vec![None; n],
            outage: vec![None; n],
            declared: vec![false; n],
            failed: vec![false; n],
            local_ok: vec![true; na],
            known: vec![Known::Up; na],
            switch_of,
            end_of: sim.accels.end_of.clone(),
            nports: sim.accels.nports.clone(),
            notes: Vec::new(),
            pins: IntMap::default(),
            rogues: Vec::new(),
            module_errors: Vec::new(),
            withheld: Vec::new(),
        }
    }

    fn ai(&self, e: u32) -> usize {
        e.saturating_sub(self.accel_base) as usize
    }

    /// Whether `src` has a port it may send out of at all (as far as it was told: not
    /// failed, not declared down).
    pub(crate) fn any_port(&self, src: u32) -> bool {
        let first = self.end_of[src as usize];
        (0..self.nports[src as usize]).any(|k| {
            let i = self.ai(first + k);
            self.local_ok.get(i).copied().unwrap_or(false)
                && self.known.get(i).is_some_and(|&k| k != Known::Down)
        })
    }

    /// Whether `src` may send to `dst` out of its port `k`, and whether that way is healthy.
    fn way(&self, src: u32, dst: u32, k: u32) -> (bool, bool) {
        let e = self.end_of[src as usize] + k;
        let i = self.ai(e);
        let sw = self.switch_of[i];
        let own = self.known[i];
        if !self.local_ok[i] || own == Known::Down {
            return (false, false);
        }
        let mut usable = false;
        let mut healthy = false;
        let d0 = self.end_of[dst as usize];
        for j in 0..self.nports[dst as usize] {
            let di = self.ai(d0 + j);
            if self.switch_of[di] != sw {
                continue;
            }
            match self.known[di] {
                Known::Up => {
                    usable = true;
                    healthy = true;
                }
                Known::Degraded => usable = true,
                Known::Down => {}
            }
        }
        (usable, usable && healthy && own == Known::Up)
    }

    /// The port of `src` for a request to `dst` at `addr` at `now`: the region's pinned port
    /// while requests of it are in flight there or held ([`FaultState::hold`]); otherwise a
    /// healthy way, else a usable (degraded) one, else any (the request will fail and be
    /// reported). With every way healthy this is `fallback` (the fault-free choice).
    ///
    /// A busy region whose pinned port is no longer usable (as far as `src` was told) may
    /// move only where nothing of it can be overtaken:
    /// * if the pinned port's own link was declared down, what the link held is gone (it is
    ///   reset before it carries anything again) or was taken by its switch, whose ordering
    ///   rule keeps the region's flow on its way there (`spec-notes/switch.md#ordering-rule`): a
    ///   usable port into the same switch is safe, unless a request of the region was sent
    ///   there after the declaration ([`Pin::sent_while_down`]: the link may be back);
    /// * otherwise (a port into another switch, or a link that may still deliver what it
    ///   holds) it waits (`None`) until its requests are answered, fail, or their hold ends.
    pub fn choose(&self, src: u32, dst: u32, addr: u64, fallback: u32, now: u64) -> Option<u32> {
        let busy = self
            .pins
            .get(&pin_key(src, dst, addr))
            .filter(|p| p.inflight > 0 || p.held_until > now);
        let Some(&Pin {
            port: p,
            sent_while_down,
            ..
        }) = busy
        else {
            return Some(self.pick(src, dst, addr, fallback));
        };
        if self.way(src, dst, p).0 {
            return Some(p);
        }
        let q = self.pick(src, dst, addr, fallback);
        if q == p {
            return Some(p);
        }
        let first = self.end_of[src as usize];
        let pi = self.ai(first + p);
        if self.local_ok.get(pi).copied().unwrap_or(true) || sent_while_down {
            return None;
        }
        let sw = self.switch_of.get(pi).copied();
        let same = |k: u32| self.switch_of.get(self.ai(first + k)).copied() == sw;
        if same(q) {
            return Some(q);
        }
        (0..self.nports[src as usize]).find(|&k| k != p && same(k) && self.way(src, dst, k).0)
    }

    /// The port of `src` for a request to `dst` at `addr`, pins aside: a healthy way, else a
    /// usable one, else `fallback` (also the choice when every way is healthy).
    fn pick(&self, src: u32, dst: u32, addr: u64, fallback: u32) -> u32 {
        let n = self.nports[src as usize];
        let mut healthy = [0u32; 32];
        let mut usable = [0u32; 32];
        let (mut nh, mut nu) = (0, 0);
        for k in 0..n.min(32) {
            let (u, h) = self.way(src, dst, k);
            if h {
                healthy[nh] = k;
                nh += 1;
            }
            if u {
                usable[nu] = k;
                nu += 1;
            }
        }
        if nh == n as usize {
            return fallback;
        }
        let x = (u64::from(dst) << 32 ^ (addr >> 8)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        let pick = |set: &[u32]| set[(x % set.len() as u64) as usize];
        if nh > 0 {
            pick(&healthy[..nh])
        } else if nu > 0 {
            pick(&usable[..nu])
        } else {
            fallback
        }
    }

    /// A request of (`src`, `dst`, `addr`'s region) went out of port `port` at `now`.
    pub fn pin(&mut self, src: u32, dst: u32, addr: u64, port: u32, now: u64) {
        let down = !self
            .local_ok
            .get(self.ai(self.end_of[src as usize] + port))
            .copied()
            .unwrap_or(true);
        let e = self.pins.entry(pin_key(src, dst, addr)).or_insert(Pin {
            src,
            dst,
            port,
            inflight: 0,
            held_until: 0,
            sent_while_down: false,
        });
        if e.held_until <= now {
            e.held_until = 0;
        }
        if e.inflight == 0 && e.held_until == 0 {
            e.sent_while_down = false;
        }
        if e.inflight == 0 {
            e.port = port;
        }
        e.sent_while_down |= down;
        e.inflight += 1;
    }

    /// A request of (`src`, `dst`, `addr`'s region) finished.
    pub fn unpin(&mut self, src: u32, dst: u32, addr: u64) {
        let k = pin_key(src, dst, addr);
        if let Some(e) = self.pins.get_mut(&k) {
            e.inflight = e.inflight.saturating_sub(1);
            if e.inflight == 0 && e.held_until == 0 {
                self.pins.remove(&k);
            }
        }
    }

    /// A request of (`src`, `dst`, `addr`'s region) was given up (timed out, or aborted) at a
    /// time when it may still be in the fabric: held up behind withheld credits or a full
    /// queue, it can still be executed later. Were the region's next request to take another
    /// way, it could overtake it (a write given up landing after the write that followed it:
    /// plan 31033 of the harsh fault mixes, found by the memory audit). So the region stays
    /// on its port until `until` ([`FaultState::hold`]'s rule: there it is behind the
    /// request, in order), as if the request were still open. Returns whether the region is
    /// held.
    pub fn unpin_given_up(&mut self, src: u32, dst: u32, addr: u64, until: u64) -> bool {
        let k = pin_key(src, dst, addr);
        let Some(e) = self.pins.get_mut(&k) else {
            return false;
        };
        e.inflight = e.inflight.saturating_sub(1);
        e.held_until = e.held_until.max(until);
        self.report.regions_held_after_give_up += 1;
        true
    }

    /// Port `port` of accelerator `src` was declared down and its requester is about to give
    /// up everything open on it. What it sent may still be in the fabric: taken by the
    /// switch before the link went down, it waits in an egress queue (or is further on) and
    /// will still be executed. Each region with requests in flight there stays held on the
    /// port until `until(destination)`, the time by which those requests can no longer be in
    /// the fabric (the link's last time up + [`Sim::fabric_residence_ps`](super::Sim)):
    /// before then, the region may move only into the same switch ([`FaultState::choose`]).
    /// A region whose time is not after `now` is not held. Returns the distinct times at
    /// which holds end, in order.
    pub fn hold(&mut self, src: u32, port: u32, now: u64, until: impl Fn(u32) -> u64) -> Vec<u64> {
        let mut n = 0;
        let mut ends = Vec::new();
        for pin in self.pins.values_mut() {
            if pin.src == src && pin.port == port && pin.inflight > 0 {
                let t = until(pin.dst);
                if t <= now {
                    continue;
                }
                pin.held_until = pin.held_until.max(t);
                n += 1;
                if !ends.contains(&t) {
                    ends.push(t);
                }
            }
        }
        ends.sort_unstable();
        self.report.regions_held += n;
        ends
    }

    /// Whether a rogue requester on end `e` has requests waiting.
    pub fn rogue_waiting(&self, e: u32) -> bool {
        self.rogues
            .iter()
            .any(|r| r.end == e && r.req.borrow().queued() > 0)
    }

    /// Whether any rogue requester has operations open.
    pub fn rogues_open(&self) -> bool {
        self.rogues.iter().any(|r| r.req.borrow().ops_open() > 0)
    }
}

/// Where a (source, destination, region) sends its requests, and why it must stay there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pin {
    /// The source accelerator.
    pub src: u32,
    /// The destination accelerator.
    pub dst: u32,
    /// The source's port.
    pub port: u32,
    /// Requests of the region in flight (answered or failed ones no longer count).
    pub inflight: u32,
    /// Requests of the region that were given up (by timeout, or when `port`'s link was
    /// declared down) may still be in the fabric (in a switch's queues, or beyond) until
    /// this time (ps, 0: none); see [`FaultState::hold`] and
    /// [`FaultState::unpin_given_up`].
    pub held_until: u64,
    /// A request of the region went out of `port` while its link was declared down (no
    /// other way was usable). The link may have come back before the accelerator was told,
    /// and then it delivers: "declared down, so it holds nothing" does not apply.
    pub sent_while_down: bool,
}

fn pin_key(src: u32, dst: u32, addr: u64) -> u64 {
    (u64::from(src) << 54) ^ (u64::from(dst) << 44) ^ (addr >> 8)
}

impl Sim {
    /// Record a finished operation (fault runs).
    pub(crate) fn record_op(&mut self, r: OpRecord) {
        if let Some(f) = self.fault.as_mut() {
            f.report.ops.push(r);
        }
    }

    /// Start a rogue requester (fault `index`).
    pub(crate) fn start_rogue(&mut self, what: FaultKind, now: u64) {
        let FaultKind::Inject {
            from,
            port,
            claim,
            dst,
            addr,
            count,
            gap_ps,
        } = what
        else {
            return;
        };
        let end = self.accels.end_of[from as usize] + port;
        let mut rc = RequesterConfig::new(AccelId::from_bits_truncate(claim as u16));
        rc.partition = PartitionId::from_bits_truncate(self.fabric.partition_of[claim as usize]);
        let timeout = self.request_timeout();
        rc.request_timeout = timeout;
        rc.queue_timeout = timeout;
        rc.tag_quarantine = Duration::ZERO;
        if self.fault.is_none() {
            return;
        }
        let req = Rc::new(RefCell::new(Requester::new(rc)));
        if let Some(i) = self.accels.ep_index(end) {
            self.accels.eps[i].host_mut().add_rogue(Rc::clone(&req));
        }
        let Some(f) = self.fault.as_mut() else {
            return;
        };
        f.rogues.push(Rogue {
            end,
            req,
            dst,
            addr,
            count,
            gap_ps,
            result: RogueResult::default(),
        });
        let i = (f.rogues.len() - 1) as u32;
        self.schedule(now, Ev::Rogue(i));
    }

    /// Rogue requester `i` submits its next write.
    pub(crate) fn on_rogue(&mut self, i: u32, now: u64) {
        let Some(f) = self.fault.as_mut() else {
            return;
        };
        let Some(r) = f.rogues.get_mut(i as usize) else {
            return;
        };
        let k = r.result.sent;
        if k >= u64::from(r.count) {
            return;
        }
        let addr = r.addr + k * 256;
        let mut data = [0u8; 256];
        for (l, chunk) in data.chunks_mut(64).enumerate() {
            pattern(ROGUE_WID, r.dst, addr + l as u64 * 64, chunk);
        }
        let req = Request {
            dst: AccelId::from_bits_truncate(r.dst as u16),
            vc: Vc::default(),
            op: Operation::WriteFull { addr, data: &data },
        };
        if r.req
            .borrow_mut()
            .submit(Instant::from_ps(now), &req)
            .is_ok()
        {
            r.result.sent += 1;
        }
        let (end, gap, more) = (r.end, r.gap_ps, r.result.sent < u64::from(r.count));
        // The sweep times rogue requests out too; it may have stopped since the last write.
        self.keep_sweeping(now);
        self.note_accel_work(end);
        self.kick(end, now);
        if more {
            self.schedule(now + gap.max(1), Ev::Rogue(i));
        }
    }

    /// Rogue requesters' timeouts and completions (from the requester sweep).
    pub(crate) fn sweep_rogues(&mut self, now: u64) {
        let Some(f) = self.fault.as_mut() else {
            return;
        };
        let t = Instant::from_ps(now);
        let mut timed_out = Vec::new();
        for r in &mut f.rogues {
            let mut req = r.req.borrow_mut();
            if req.poll_timeout().is_some_and(|d| d <= t) {
                req.handle_timeout(t);
                // A queue timeout may have emptied its queue.
                timed_out.push(r.end);
            }
            while req.poll_event().is_some() {}
            while let Some(c) = req.poll_completion() {
                match c.result {
                    Ok(_) => r.result.answered += 1,
                    Err(_) => r.result.failed += 1,
                }
            }
        }
        for e in timed_out {
            self.note_accel_work(e);
        }
    }

    /// After the run: compare every line rogue writes targeted with what the legitimate
    /// operations left there.
    pub(crate) fn check_rogue_targets(&mut self) {
        use podlink_protocol::txn::MemoryTarget;
        let Some(mut f) = self.fault.take() else {
            return;
        };
        for r in &mut f.rogues {
            for l in 0..u64::from(r.count) * 4 {
                let a = r.addr + l * 64;
                let mut wid = [0u32; 1];
                self.reference.expect(r.dst, a, 64, &mut wid);
                let mut want = [0u8; 64];
                pattern(wid[0], r.dst, a, &mut want);
                let mut got = [0u8; 64];
                let _ = self.mem.borrow_mut().of(r.dst).read(a, &mut got);
                r.result.lines_checked += 1;
                if got != want {
                    r.result.lines_changed += 1;
                }
            }
        }
        f.report.rogues = f.rogues.iter().map(|r| r.result.clone()).collect();
        self.fault = Some(f);
    }

    /// The accelerator end attached to switch port `p`, if any.
    pub(crate) fn accel_end_at(&self, p: PortRef) -> Option<u32> {
        match self
            .fabric
            .switches
            .get(p.switch as usize)?
            .ports
            .get(p.port as usize)?
        {
            Attach::Accel { accel, port } => Some(self.accels.end_of[*accel as usize] + port),
            Attach::Switch { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::presets;
    use crate::sim::Options;

    /// A transceiver's error counter depends on time, not on how often it is read: the
    /// switches' timers fire far more often than the health window when rate caps are in
    /// force, and a counter bumped at every read made 10 errors a window look like thousands
    /// (a port failed under a two-tenant fault mix, plan 394). The first window that closes
    /// after the rate starts reads `per_window` more; a new rate goes on from the counter.
    #[test]
    fn module_error_counter_follows_windows_not_reads() {
        let w = 1_000_000;
        let m = ModuleErrors {
            end: 3,
            per_window: 10,
            since_ps: 2_400_000,
            base: 7,
        };
        assert_eq!(m.counter(2_400_000, w), 7);
        // Read at every nanosecond of the next window: the same value at its close.
        let at_close = (2_400_001..=3_000_000)
            .step_by(1000)
            .map(|t| m.counter(t, w))
            .last();
        assert_eq!(at_close, Some(17));
        assert_eq!(m.counter(4_000_000, w), 27);
        assert_eq!(m.counter(5_000_000, w), 37);
        let next = ModuleErrors {
            per_window: 0,
            since_ps: 5_000_000,
            base: m.counter(5_000_000, w),
            ..m
        };
        assert_eq!(
            next.counter(9_000_000, w),
            37,
            "a rate of 0 keeps the counter"
        );
    }

    fn state() -> FaultState {
        state_of(4, 1)
    }

    /// Four accelerators on `planes` planes with `ports_per_plane` ports each.
    fn state_of(planes: u32, ports_per_plane: u32) -> FaultState {
        let mut pod = presets::load("ualink-64x4").unwrap();
        pod.topology = crate::pod::config::Topology::MultiPlane {
            accelerators: 4,
            planes,
            ports_per_plane,
        };
        let opts = Options {
            faults: FaultPlan {
                record_ops: true,
                ..FaultPlan::default()
            },
            ..Options::default()
        };
        let sim = Sim::new(&pod, &opts).unwrap();
        FaultState::new(&sim, &opts.faults)
    }

    #[test]
    fn ports_are_chosen_away_from_what_is_down_or_degraded() {
        let mut f = state();
        // Everything healthy: the fault-free choice.
        assert_eq!(f.choose(0, 1, 0x1000, 2, 0), Some(2));
        // Accelerator 1's port on plane 2 is down: another plane, never 2.
        f.known[(f.end_of[1] + 2 - f.accel_base) as usize] = Known::Down;
        let picks: Vec<u32> = (0..64).flat_map(|r| f.choose(0, 1, r << 8, 2, 0)).collect();
        assert_eq!(picks.len(), 64);
        assert!(picks.iter().all(|&p| p != 2), "{picks:?}");
        assert!(picks.iter().any(|&p| p != picks[0]), "spread: {picks:?}");
        // Plane 0 degraded at the source: healthy planes 1 and 3 only.
        f.known[(f.end_of[0] - f.accel_base) as usize] = Known::Degraded;
        assert!((0..64).all(|r| matches!(f.choose(0, 1, r << 8, 2, 0), Some(1 | 3))));
        // Only degraded ways left: they are used.
        for p in [1, 3] {
            f.local_ok[(f.end_of[0] + p - f.accel_base) as usize] = false;
        }
        assert_eq!(f.choose(0, 1, 0, 2, 0), Some(0));
        // Nothing usable: the fault-free choice (the request will fail and be reported).
        f.local_ok[(f.end_of[0] - f.accel_base) as usize] = false;
        assert_eq!(f.choose(0, 1, 0, 2, 0), Some(2));
    }

    #[test]
    fn a_region_stays_on_its_port_while_in_flight() {
        let mut f = state();
        f.pin(0, 1, 0x300, 2, 0);
        f.pin(0, 1, 0x3c0, 2, 0);
        // Plane 2 is degraded but still usable: the region stays there.
        f.known[(f.end_of[0] + 2 - f.accel_base) as usize] = Known::Degraded;
        assert_eq!(f.choose(0, 1, 0x340, 0, 0), Some(2));
        f.unpin(0, 1, 0x300);
        assert_eq!(f.choose(0, 1, 0x300, 0, 0), Some(2));
        f.unpin(0, 1, 0x300);
        // Drained: a healthy way.
        assert!(f.choose(0, 1, 0x300, 2, 0).is_some_and(|p| p != 2));
        // Reported down with a request of the region in flight there: the region waits
        // (a request on another plane could overtake it), whatever other region's way.
        f.pin(0, 1, 0x300, 2, 0);
        f.known[(f.end_of[0] + 2 - f.accel_base) as usize] = Known::Down;
        assert_eq!(f.choose(0, 1, 0x300, 2, 0), None);
        assert!(f.choose(0, 1, 0x400, 2, 0).is_some_and(|p| p != 2));
        // With no other way to go to, it does not wait: nothing could overtake.
        for p in [0, 1, 3] {
            f.local_ok[(f.end_of[0] + p - f.accel_base) as usize] = false;
        }
        assert_eq!(f.choose(0, 1, 0x300, 2, 0), Some(2));
        for p in [0, 1, 3] {
            f.local_ok[(f.end_of[0] + p - f.accel_base) as usize] = true;
        }
        // Answered (or failed): it moves.
        f.unpin(0, 1, 0x300);
        assert!(f.choose(0, 1, 0x300, 2, 0).is_some_and(|p| p != 2));
    }

    #[test]
    fn a_region_given_up_on_a_lost_port_moves_only_into_its_switch_until_the_hold_ends() {
        // Two planes, two ports per plane: accelerator 0's ports 0 and 1 enter switch 0,
        // ports 2 and 3 switch 1.
        let mut f = state_of(2, 2);
        let end =
            |f: &FaultState, a: u32, k: u32| (f.end_of[a as usize] + k - f.accel_base) as usize;
        assert_eq!(f.switch_of[end(&f, 0, 1)], f.switch_of[end(&f, 0, 0)]);
        assert_ne!(f.switch_of[end(&f, 0, 2)], f.switch_of[end(&f, 0, 0)]);
        // A region with a request out of port 1; the port is declared down and the request
        // given up (failed) at 5 µs; it would have timed out at 9 µs.
        f.pin(0, 1, 0x300, 1, 1_000_000);
        let i = end(&f, 0, 1);
        f.local_ok[i] = false;
        f.hold(0, 1, 5_000_000, |_| 9_000_000);
        f.hold(0, 2, 5_000_000, |_| 9_000_000); // another port's hold does not touch the region
        f.unpin(0, 1, 0x300);
        // Only port 0 is healthy enough to stay in switch 0: there it goes, whatever the
        // fault-free choice, while the hold lasts.
        for fallback in 0..4 {
            assert_eq!(
                f.choose(0, 1, 0x300, fallback, 5_000_000),
                Some(0),
                "{fallback}"
            );
        }
        // With port 0 down too the region waits; other regions go to switch 1.
        let i = end(&f, 0, 0);
        f.local_ok[i] = false;
        assert_eq!(f.choose(0, 1, 0x300, 1, 8_999_999), None);
        assert!(f.choose(0, 1, 0x400, 1, 5_000_000).is_some_and(|p| p >= 2));
        // The hold has ended: switch 1.
        assert!(f.choose(0, 1, 0x300, 1, 9_000_000).is_some_and(|p| p >= 2));
        // A new request there ends the hold for good (the entry goes with its last answer).
        f.pin(0, 1, 0x300, 3, 9_000_000);
        f.unpin(0, 1, 0x300);
        assert!(f.pins.is_empty());
        // A port reported down by a notice only (its link was not reset here, so it may
        // still deliver what it holds): the region waits even with a way into its switch.
        let mut f = state_of(2, 2);
        f.pin(0, 1, 0x300, 1, 0);
        let i = end(&f, 0, 1);
        f.known[i] = Known::Down;
        assert_eq!(f.choose(0, 1, 0x300, 1, 0), None);
    }

    #[test]
    fn a_region_whose_request_was_given_up_stays_on_its_port_until_the_hold_ends() {
        let mut f = state_of(2, 2);
        // A write of region 0x300 went out of port 1 and timed out at 5 µs: it may still be
        // in the fabric, so the region stays on port 1 (behind it) whatever the fault-free
        // choice, until 5 µs + the hold.
        f.pin(0, 1, 0x300, 1, 1_000_000);
        assert!(f.unpin_given_up(0, 1, 0x300, 15_000_000));
        assert_eq!(f.report.regions_held_after_give_up, 1);
        for fallback in 0..4 {
            assert_eq!(f.choose(0, 1, 0x300, fallback, 5_000_000), Some(1));
            assert_eq!(f.choose(0, 1, 0x300, fallback, 14_999_999), Some(1));
        }
        // Other regions are free; so is this one when the hold ends.
        assert_eq!(f.choose(0, 1, 0x400, 3, 5_000_000), Some(3));
        assert_eq!(f.choose(0, 1, 0x300, 3, 15_000_000), Some(3));
        // Its next request, sent there while held, answered: the region is still held.
        f.pin(0, 1, 0x300, 1, 6_000_000);
        f.unpin(0, 1, 0x300);
        assert_eq!(f.choose(0, 1, 0x300, 3, 6_000_000), Some(1));
        // If port 1 becomes unusable while held, the region waits rather than move.
        let i = (f.end_of[0] + 1 - f.accel_base) as usize;
        f.known[i] = Known::Down;
        assert_eq!(f.choose(0, 1, 0x300, 3, 7_000_000), None);
        // A region with nothing pinned (its entry already gone) is not held.
        assert!(!f.unpin_given_up(0, 1, 0x500, 15_000_000));
    }

    #[test]
    fn a_request_sent_on_a_port_declared_down_keeps_its_region_there() {
        // Two planes, two ports per plane: ports 0 and 1 enter switch 0.
        let mut f = state_of(2, 2);
        let i = (f.end_of[0] + 1 - f.accel_base) as usize;
        // Port 1 declared down, then a request goes out of it anyway (nothing else usable):
        // its link may be back before the accelerator is told, and deliver it.
        f.local_ok[i] = false;
        f.pin(0, 1, 0x300, 1, 1_000_000);
        assert!(f.pins.values().all(|p| p.sent_while_down));
        // The region does not move into the same switch, as it would if port 1 had gone down
        // with the request already in flight: it waits.
        assert_eq!(f.choose(0, 1, 0x300, 0, 2_000_000), None);
        // Answered: it moves, and a request sent while port 1 is fine again starts afresh.
        f.unpin(0, 1, 0x300);
        assert!(f.choose(0, 1, 0x300, 0, 2_000_000).is_some_and(|p| p != 1));
        f.local_ok[i] = true;
        f.pin(0, 1, 0x300, 1, 3_000_000);
        assert!(f.pins.values().all(|p| !p.sent_while_down));
        f.local_ok[i] = false;
        assert_eq!(f.choose(0, 1, 0x300, 0, 4_000_000), Some(0));
    }
}
