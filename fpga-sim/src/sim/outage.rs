//! Applying a fault plan (`spec-notes/validation.md#conformance-scenarios`): links going down
//! and up, the hold-off before a switch is told, failed ports and planes, bit error rates,
//! switch health windows and events, credit withholding, and the notifications that tell
//! endpoints what changed. See [`super::fault`] for the plan and what each fault means.

use super::fault::{Entry, FaultKind, Happening, PortRef};
use super::port::{flow_of, vc_of, Credits};
use super::steer::Known;
use super::{Ev, Owner, Sim};
use podlink_protocol::flow::CreditSender;
use podlink_protocol::retry::LinkState;
use podlink_protocol::time::Instant;
use podlink_switch::health::TransceiverReading;
use podlink_switch::{DropReason, Event, Health};

fn health_name(h: Health) -> String {
    h.to_string()
}

/// A transceiver reading within every limit except, possibly, its error counter: 40 °C,
/// 3.3 V, 500 µW received.
fn healthy_module(errors: u32) -> TransceiverReading {
    TransceiverReading {
        temp_c256: 40 * 256,
        vcc_100uv: 33_000,
        rx_power_min_01uw: 5_000,
        errors,
    }
}

impl Sim {
    /// Schedule the plan's faults from `at` (the start of injection).
    pub(crate) fn schedule_faults(&mut self, at: u64) {
        let Some(f) = self.fault.as_mut() else {
            return;
        };
        f.report.inject_from_ps = at;
        let times: Vec<u64> = f.plan.faults.iter().map(|x| x.at_ps).collect();
        for (i, t) in times.into_iter().enumerate() {
            self.schedule(at.saturating_add(t), Ev::Fault(i as u32));
        }
    }

    /// Set the health policy of every podlink switch and start their windows.
    pub(crate) fn start_health(&mut self) {
        let Some(w) = self.fault.as_ref().and_then(|f| f.plan.health_window_ps) else {
            return;
        };
        for s in 0..self.switches.len() {
            self.switches[s]
                .fwd
                .switch()
                .set_health_policy(super::switch::policy(&self.pod, Some(w)));
            self.schedule(w.max(1), Ev::Health(s as u32));
        }
    }

    /// The two ends of the link of switch port `p`, the lower-numbered first (a switch end:
    /// accelerator ends come after every switch end). The fault state of a link is kept
    /// under that first end, so a link between two switches is the same link whichever of
    /// its ports a fault names: its outage named from one side and ended from the other
    /// must not leave half of it down.
    fn ends_of(&self, p: PortRef) -> (u32, u32) {
        let e = self.switches[p.switch as usize].base + p.port;
        let f = self.peer[e as usize];
        (e.min(f), e.max(f))
    }

    fn log(&mut self, t: u64, what: Happening, switch: Option<u32>) {
        let tx = switch
            .and_then(|s| {
                let m = self.switches.get(s as usize)?;
                let sw = m.fwd.switch_ref();
                Some(
                    (0..m.n as usize)
                        .map(|p| u64::from(sw.tx_frames(p)))
                        .collect(),
                )
            })
            .unwrap_or_default();
        if let Some(f) = self.fault.as_mut() {
            f.report.timeline.push(Entry {
                t_ps: t,
                what,
                switch: switch.unwrap_or(u32::MAX),
                tx_frames: tx,
            });
        }
    }

    pub(crate) fn on_fault(&mut self, i: u32, now: u64) {
        let Some(f) = self.fault.as_mut() else {
            return;
        };
        let Some(fault) = f.plan.faults.get(i as usize).copied() else {
            return;
        };
        if let Some(o) = f.report.open_at_fault.get_mut(i as usize) {
            *o = (self.accels.open()) as u64;
        }
        let sw = match fault.what {
            FaultKind::LinkDown(p)
            | FaultKind::LinkUp(p)
            | FaultKind::PortFail(p)
            | FaultKind::SetBer { link: p, .. }
            | FaultKind::ModuleErrors { link: p, .. } => Some(p.switch),
            FaultKind::PlaneFail { switch } | FaultKind::Mark { switch } => Some(switch),
            _ => None,
        };
        self.log(now, Happening::Applied { index: i as usize }, sw);
        match fault.what {
            FaultKind::LinkDown(p) => self.phy_down(p, now),
            FaultKind::LinkUp(p) => self.phy_up(p, now),
            FaultKind::PortFail(p) => self.port_fail(p, now),
            FaultKind::PlaneFail { switch } => {
                for port in 0..self.switches[switch as usize].n {
                    self.port_fail(PortRef { switch, port }, now);
                }
            }
            FaultKind::SetBer { link, ber } => {
                let (a, b) = self.ends_of(link);
                self.wires[a as usize].set_ber(ber);
                self.wires[b as usize].set_ber(ber);
            }
            FaultKind::ModuleErrors { link, per_window } => {
                let (a, b) = self.ends_of(link);
                for x in [a, b] {
                    if matches!(self.owner[x as usize], Owner::Switch { .. }) {
                        if let Some(f) = self.fault.as_mut() {
                            // The counter goes on from where it is (a counter that went
                            // back would read as a huge increment).
                            let w = f.plan.health_window_ps.unwrap_or(1);
                            let base = f
                                .module_errors
                                .iter()
                                .find(|m| m.end == x)
                                .map_or(0, |m| m.counter(now, w));
                            f.module_errors.retain(|m| m.end != x);
                            f.module_errors.push(super::steer::ModuleErrors {
                                end: x,
                                per_window,
                                since_ps: now,
                                base,
                            });
                        }
                    }
                }
            }
            FaultKind::Inject { .. } => self.start_rogue(fault.what, now),
            FaultKind::Withhold { accel, vc } | FaultKind::Release { accel, vc } => {
                let keep = matches!(fault.what, FaultKind::Withhold { .. });
                if let Some(f) = self.fault.as_mut() {
                    f.withheld.retain(|&w| w != (accel, vc));
                    if keep {
                        f.withheld.push((accel, vc));
                    }
                }
                let e0 = self.accels.end_of[accel as usize];
                for e in e0..e0 + self.accels.nports[accel as usize] {
                    if self.ep_withhold(e, vc, keep, now) {
                        continue;
                    }
                    let p = &mut self.ports[e as usize];
                    if keep {
                        p.withheld |= 1 << vc;
                    } else {
                        p.withheld &= !(1 << vc);
                    }
                    self.note_owed(e, now);
                }
            }
            FaultKind::Mark { .. } => {}
        }
    }

    /// Both ends' PHY go down; what is on the wire is lost. The switch and the endpoints are
    /// told only if the link stays down for the hold-off. A link already down stays down
    /// as it was (its outage and hold-off run from when it went down).
    fn phy_down(&mut self, p: PortRef, now: u64) {
        let (a, b) = self.ends_of(p);
        if [a, b].iter().all(|&x| !self.hot[x as usize].phy_up) {
            return;
        }
        let mut lost = 0;
        for x in [a, b] {
            let h = &mut self.hot[x as usize];
            if !h.phy_up {
                continue;
            }
            h.phy_up = false;
            if !self.ep_phy(x, false, now) {
                let tx = &mut self.txs[x as usize];
                tx.link.handle_link_down(Instant::from_ps(now));
                while tx.link.poll_event().is_some() {}
            }
            lost += self.wires[x as usize].flight.lose_all();
        }
        // The outage goes on if a flit sent before it began is still unacknowledged at either
        // end (the link came up too briefly to replay it); otherwise a new one starts now.
        let next = [a, b].map(|x| self.link_of(x as usize).retry().next_submit_seq());
        let held = [a, b].map(|x| self.link_of(x as usize).retry().buffered());
        let Some(f) = self.fault.as_mut() else {
            return;
        };
        f.report.flits_lost += lost;
        f.down_at[a as usize] = Some(now);
        let carried = f.outage[a as usize].is_some_and(|(_, marks)| {
            (0..2).any(|k| {
                // Steps from the oldest flit held to the outage's mark: a flit from before
                // the mark is still held.
                let space = podlink_protocol::wire::SeqNum::SPACE;
                let oldest = next[k].add(space - held[k] % space);
                let before = marks[k].distance_from(oldest);
                held[k] > 0 && before > 0 && before <= held[k]
            })
        });
        if carried {
            f.report.outages_carried += 1;
        } else {
            f.outage[a as usize] = Some((now, next));
        }
        let at = now.saturating_add(f.plan.holdoff_ps);
        self.schedule(at, Ev::Holdoff(a));
    }

    /// Both ends' PHY come up: bring-up, then retry replays what was not acknowledged; or,
    /// after an outage past the hold-off or past the request timeout, the link is retrained
    /// ([`Sim::retrain`]): what it held belongs to operations already reported failed.
    fn phy_up(&mut self, p: PortRef, now: u64) {
        let (a, b) = self.ends_of(p);
        if [a, b].iter().all(|&x| self.hot[x as usize].phy_up) {
            // Up already: nothing to bring up (retraining it here would leave it reset and
            // never brought up again).
            return;
        }
        let timeout = self.request_timeout().as_ps();
        let Some(f) = self.fault.as_mut() else {
            return;
        };
        if f.failed[a as usize] {
            return;
        }
        // Counted from the start of the outage, which may span ups too brief to replay.
        let down_for = f.outage[a as usize]
            .map(|(t, _)| t)
            .or(f.down_at[a as usize])
            .map_or(0, |t| now.saturating_sub(t));
        f.down_at[a as usize] = None;
        let declared = f.declared[a as usize];
        if declared || down_for >= timeout {
            f.outage[a as usize] = None;
            for x in [a, b] {
                self.retrain(x, now);
            }
            self.note_reset_losses(a, b);
        }
        for x in [a, b] {
            let h = &mut self.hot[x as usize];
            if h.phy_up {
                continue;
            }
            h.phy_up = true;
            self.link_up(x, now);
        }
        if declared {
            self.declare(p, true, now);
        }
    }

    /// The buffers end `x` holds, in credits: frames that came in on it and are still in the
    /// model, and requests its completer holds. A frame a switch handed an egress port whose
    /// TL packer was full (in that end's overflow queue, `EndTx::txq`) gave its buffer back
    /// when it was pulled, so it does not count. (Before session 37's last fix it did: such a
    /// frame left a retrained port's `PortState::stale` above zero for good, and random pod
    /// 250939 stalled.)
    pub(crate) fn held_at(&self, x: u32) -> Credits {
        let released: std::collections::HashSet<u32> = self
            .txs
            .iter()
            .flat_map(|t| t.txq.iter().copied())
            .collect();
        let mut held = self.ports[x as usize].held;
        for (_, f) in self
            .frames
            .live_handles()
            .filter(|(h, f)| f.ingress == x && !released.contains(h))
        {
            held.give(
                flow_of(&f.field),
                usize::from(vc_of(&f.field).get()),
                1,
                f.beats(),
            );
        }
        held
    }

    /// Link end `x` of a link that stayed down past the hold-off (its switch and endpoints
    /// were told it was down) or past the request timeout (its operations in flight were
    /// reported failed) starts over, as a port reported down is reinitialised rather
    /// than resumed: the protocol link is reset (sequence numbers restart, the replay buffer
    /// is emptied, so nothing sent before the outage is delivered after the operations it
    /// belongs to were reported failed), the TL packer and unpacker and the compressed-address
    /// caches restart, transfers taken but not sent are dropped, and credits start over: the
    /// end's `CreditSender` learns the peer's grant again from a fresh initial release, and
    /// the end queues its own. That release grants every buffer, so buffers the end still
    /// holds from before (frames received before, requests its completer holds:
    /// `PortState::stale`) return nothing when freed, and a switch end holds the release
    /// back until they are all freed (`Sim::take_due_returns`).
    fn retrain(&mut self, x: u32, now: u64) {
        // Responses an endpoint's completer still holds are dropped by its reset
        // (`Completer::drop_held`); frames a model end took for its link that had not reached
        // its TL packer are dropped below. Both are counted with what links lost at resets
        // (`Sim::reset_drops`); what was in the TL packers and links is counted once both
        // ends are reset (`Sim::note_reset_losses`).
        self.reset_unpacked += match (self.txs.get(x as usize), self.ep(x)) {
            (Some(tx), _) => tx.txq.len() as u64,
            (None, Some(ep)) => ep.completer().pending() as u64,
            (None, None) => 0,
        };
        if self.ep_retrain(x, now) {
            if let Some(f) = self.fault.as_mut() {
                f.report.retrains += 1;
            }
            return;
        }
        let xi = x as usize;
        let t = Instant::from_ps(now);
        let txq = std::mem::take(&mut self.txs[xi].txq);
        let dropped = txq.len() as u64;
        for h in txq {
            self.frames.free(h);
        }
        let delivered = self.rxs[self.peer[xi] as usize].tl_delivered;
        let tx = &mut self.txs[xi];
        // What the reset drops, for the conservation balance: TL flits queued in the link,
        // and those packed that the peer never delivered (the wire lost its flits when the
        // link went down; the replay buffer goes now).
        tx.discarded_queued += (super::LINK_TXQ - tx.link.tx_room()) as u64;
        tx.discarded_packed = tx.link.stats().tl_packed.saturating_sub(delivered);
        tx.link.reset(t);
        while tx.link.poll_event().is_some() {}
        tx.tl.reset();
        tx.credit_target = super::POOL;
        tx.credit_rx.reset();
        tx.encoder.clear();
        let rx = &mut self.rxs[xi];
        rx.tlu.reset();
        rx.decoder.clear();
        rx.credit_target = super::POOL;
        if let Some(ap) = self.accels.port_mut(x) {
            ap.req.reset_addr_cache();
            ap.cpl.reset_addr_cache();
        }
        let stale = self.held_at(x);
        let p = &mut self.ports[xi];
        p.credits = CreditSender::new();
        p.owed = Credits::default();
        p.freed = Credits::default();
        p.owe_release_complete = false;
        p.stale = stale;
        self.take_due_returns(x);
        let h = &mut self.hot[xi];
        h.overflow = false;
        h.tl_busy = false;
        h.link_queued = false;
        h.tx_backlog = false;
        if let Owner::Switch { s, p } = self.owner[xi] {
            let sw = &mut self.switches[s as usize];
            let range = sw.base as usize..(sw.base + sw.n) as usize;
            sw.fwd.refresh(p, &self.ports[range]);
        }
        if let Some(f) = self.fault.as_mut() {
            f.report.retrains += 1;
            f.report.frames_discarded += dropped;
        }
    }

    pub(crate) fn on_holdoff(&mut self, a: u32, now: u64) {
        let Some(f) = self.fault.as_ref() else {
            return;
        };
        let due = f.down_at[a as usize].is_some_and(|t| t.saturating_add(f.plan.holdoff_ps) <= now)
            && !f.declared[a as usize];
        if due {
            if let Owner::Switch { s, p } = self.owner[a as usize] {
                self.declare(PortRef { switch: s, port: p }, false, now);
            }
        }
    }

    /// An alarm: the switch port is Failed at once and its link goes down for good.
    fn port_fail(&mut self, p: PortRef, now: u64) {
        let (a, _) = self.ends_of(p);
        if self.fault.as_ref().is_some_and(|f| f.failed[a as usize]) {
            return;
        }
        // The switch raises the change (`HealthChanged`), which is logged and disables the
        // port (endpoints are told it is down by that); a port that was Failed already is
        // disabled here.
        self.switches[p.switch as usize]
            .fwd
            .switch()
            .force_health(p.port as u16, Health::Failed);
        self.switch_events(p.switch, now);
        self.disable_port(p, now);
    }

    /// Tell the switch(es) of link `p` that it is down (or up again), and the endpoints.
    fn declare(&mut self, p: PortRef, up: bool, now: u64) {
        let (a, b) = self.ends_of(p);
        if let Some(f) = self.fault.as_mut() {
            f.declared[a as usize] = !up;
            f.declared[b as usize] = !up;
        }
        for x in [a, b] {
            if let Owner::Switch { s, p } = self.owner[x as usize] {
                if !up {
                    self.discard_ingress(x, now);
                }
                self.ports[x as usize].up = up;
                let sw = &mut self.switches[s as usize];
                let range = sw.base as usize..(sw.base + sw.n) as usize;
                sw.fwd.refresh(p, &self.ports[range]);
                self.switch_events(s, now);
                if up {
                    self.kick(x, now);
                }
            }
        }
        self.log(now, Happening::Declared { at: p, up }, Some(p.switch));
        if let Some(e) = self.accel_end_at(p) {
            if let Some(f) = self.fault.as_mut() {
                let i = (e - f.accel_base) as usize;
                f.local_ok[i] = up;
            }
            if !up {
                // The port's own requester gives up everything open on it (the link will be
                // retrained before it carries anything again): nothing queued there can go
                // out later, after its successors were steered to other ports. What it sent
                // before the link went down may still be in the fabric: those regions are
                // held until it can no longer be there (`FaultState::hold`): the link's last
                // time up + how long a request may stay in the fabric beyond its source's
                // link (`Sim::fabric_residence_ps`).
                if let (Some(last_up), Owner::Accel { a: src, .. }) = (
                    self.fault
                        .as_ref()
                        .map(|f| f.down_at[a as usize].unwrap_or(now)),
                    self.owner[e as usize],
                ) {
                    let until: Vec<u64> = (0..self.fabric.accels)
                        .map(|dst| last_up.saturating_add(self.fabric_residence_ps(src, dst)))
                        .collect();
                    let ends = self.fault.as_mut().map_or_else(Vec::new, |f| {
                        let port = e - f.end_of[src as usize];
                        f.hold(src, port, now, |dst| {
                            until.get(dst as usize).copied().unwrap_or(u64::MAX)
                        })
                    });
                    for t in ends {
                        self.schedule(t, Ev::Held(src));
                    }
                }
                if !self.ep_abort(e, now) {
                    if let Some(ap) = self.accels.port_mut(e) {
                        ap.req.abort(Instant::from_ps(now));
                        while ap.req.poll_event().is_some() {}
                    }
                    self.note_accel_work(e);
                    self.drain_completions(e, now);
                }
            }
            let state = if up { self.known_of(p) } else { Known::Down };
            self.notify(e, state, p, now);
        }
    }

    /// Switch end `x` was declared down: the port is reset, and the frames that arrived on
    /// it but are still in its ingress pipeline (waiting for their pipeline time or for room
    /// in the switch) are discarded; their buffers are freed. What the switch already took
    /// is queued at its egress ports, ahead of anything that arrives later by another way
    /// (`spec-notes/switch.md#settling`), so a flow the upstream switch now sends another
    /// way cannot overtake a request that crossed the lost link.
    pub(crate) fn discard_ingress(&mut self, x: u32, now: u64) {
        let rx = &mut self.rxs[x as usize];
        let mut gone: Vec<u32> = rx.fifo.drain(..).map(|(_, h)| h).collect();
        gone.extend(rx.rsp.drain(..).map(|(_, h)| h));
        for &h in &gone {
            self.release_frame(h, now);
            self.frames.free(h);
        }
        if let Some(f) = self.fault.as_mut() {
            f.report.ingress_discarded += gone.len() as u64;
        }
    }

    /// What endpoints should know of switch port `p` now.
    fn known_of(&self, p: PortRef) -> Known {
        let (a, _) = self.ends_of(p);
        if self.fault.as_ref().is_some_and(|f| f.declared[a as usize]) {
            return Known::Down;
        }
        match self.switches[p.switch as usize]
            .fwd
            .switch_ref()
            .health(p.port as u16)
        {
            Health::Healthy => Known::Up,
            Health::Degraded => Known::Degraded,
            Health::Failed => Known::Down,
        }
    }

    fn notify(&mut self, e: u32, state: Known, p: PortRef, now: u64) {
        let Some(f) = self.fault.as_mut() else {
            return;
        };
        f.notes.push((e, state, p));
        let i = (f.notes.len() - 1) as u32;
        let at = now.saturating_add(f.plan.notify_ps);
        self.schedule(at, Ev::Notify(i));
    }

    pub(crate) fn on_notify(&mut self, i: u32, now: u64) {
        let Some(f) = self.fault.as_mut() else {
            return;
        };
        let Some(&(e, state, p)) = f.notes.get(i as usize) else {
            return;
        };
        let ai = (e - f.accel_base) as usize;
        f.known[ai] = state;
        self.log(
            now,
            Happening::Notified {
                at: p,
                state: state.name().to_string(),
            },
            Some(p.switch),
        );
        if let Owner::Accel { a, .. } = self.owner[e as usize] {
            self.drain_backlog(a, now);
        }
    }

    /// Close switch `s`'s health window: feed each port's link counters to its monitor.
    pub(crate) fn on_health(&mut self, s: u32, now: u64) {
        let (base, n) = {
            let sw = &self.switches[s as usize];
            (sw.base as usize, sw.n as usize)
        };
        for e in base..base + n {
            let rs = self.txs[e].link.retry().stats();
            let h = &mut self.ports[e].health;
            h.crc_errors = rs.crc_errors as u32;
            h.replays = rs.replays as u32;
            h.flaps = rs.link_downs as u32;
        }
        let mut readings = Vec::new();
        let w = self
            .fault
            .as_ref()
            .and_then(|f| f.plan.health_window_ps)
            .unwrap_or(1)
            .max(1);
        if let Some(f) = self.fault.as_mut() {
            for m in &f.module_errors {
                if (base..base + n).contains(&(m.end as usize)) {
                    readings.push((m.end as usize - base, m.counter(now, w)));
                }
            }
        }
        {
            let sw = self.switches[s as usize].fwd.switch();
            for (p, errors) in readings {
                sw.set_transceiver(p as u16, healthy_module(errors));
            }
            sw.handle_timeout(Instant::from_ps(now), &self.ports[base..base + n]);
        }
        self.switch_events(s, now);
        // The next window's end. (Not `Switch::poll_timeout`, which also names the times at
        // which rate-capped partitions conform again, for a firmware loop to transmit then:
        // the model's transmitters keep their own time, and a partition that conforms but
        // waits for credits or a link kept that time in the past, so this event came back
        // every picosecond: `tests/pod_mix.rs::health_windows_with_a_rate_cap_do_not_spin`.)
        self.schedule(now + w, Ev::Health(s));
    }

    /// Drain switch `s`'s events: free the frames it flushed (their credits go back to the
    /// sender), log health changes and tell endpoints about them.
    pub(crate) fn switch_events(&mut self, s: u32, now: u64) {
        let mut changes = Vec::new();
        let mut flushed = Vec::new();
        {
            let sw = self.switches[s as usize].fwd.switch();
            while let Some(ev) = sw.poll_event() {
                match ev {
                    Event::HealthChanged { port, from, to } => changes.push((port, from, to)),
                    Event::Flushed { .. } => {
                        while let Some(h) = sw.poll_discarded() {
                            flushed.push(h);
                        }
                    }
                    _ => {}
                }
            }
            while let Some(h) = sw.poll_discarded() {
                flushed.push(h);
            }
        }
        let any = !flushed.is_empty();
        for h in flushed {
            self.stats.note_drop(DropReason::Flushed);
            self.release_frame(h, now);
            self.frames.free(h);
        }
        if any {
            self.wake_blocked(s, now);
        }
        for (port, from, to) in changes {
            let p = PortRef {
                switch: s,
                port: u32::from(port),
            };
            self.log(
                now,
                Happening::Health {
                    at: p,
                    from: health_name(from),
                    to: health_name(to),
                },
                Some(s),
            );
            // A change to Failed disables the port (below), which declares it down and so
            // tells the endpoints; a health notice as well would be a second, identical one.
            let (a, _) = self.ends_of(p);
            let disables =
                to == Health::Failed && self.fault.as_ref().is_some_and(|f| !f.failed[a as usize]);
            if let Some(e) = self.accel_end_at(p).filter(|_| !disables) {
                let state = self.known_of(p);
                self.notify(e, state, p, now);
            }
            if to == Health::Failed {
                self.disable_port(p, now);
            }
        }
    }

    /// A failed port (by an alarm, [`FaultKind::PortFail`](super::fault::FaultKind::PortFail),
    /// or by its switch's health monitor) is disabled: its link goes down for
    /// good (what is on the wire is lost, what the link layer still held is never sent) and
    /// it is declared down at once (the far switch end discards its ingress pipeline), so
    /// nothing sent through the port before it failed can arrive after requests of the same
    /// flows that now go another way (`spec-notes/switch.md#settling`).
    fn disable_port(&mut self, p: PortRef, now: u64) {
        let (a, _) = self.ends_of(p);
        match self.fault.as_mut() {
            Some(f) if !f.failed[a as usize] => f.failed[a as usize] = true,
            _ => return,
        }
        self.phy_down(p, now);
        self.declare(p, false, now);
    }
}

impl Sim {
    /// Whether end `e`'s link is in `Fault` (retry gave up, or it held a TL flit past its
    /// hold limit).
    #[inline]
    fn link_faulted(&self, e: u32) -> bool {
        // Ends with a transmitter of their own first (every end but those running an
        // endpoint, which come last).
        let state = match self.txs.get(e as usize) {
            Some(tx) => tx.link.state(),
            None => match self.ep(e) {
                Some(ep) => ep.link().state(),
                None => return false,
            },
        };
        state == LinkState::Fault
    }

    /// After an event of end `e`: if its link just ended in `Fault`, the link is reset one
    /// link latency later ([`Sim::on_link_fault`]), when the far end has seen it stop (a
    /// whole-pod event: both ends change at once, after every window in which the fault
    /// could have been seen). Until then the end sends nothing and drops what it receives.
    #[inline]
    pub(crate) fn note_link_fault(&mut self, e: u32, now: u64) {
        if !self.link_faulted(e) || self.hot.get(e as usize).is_none_or(|h| h.fault_due) {
            return;
        }
        self.hot[e as usize].fault_due = true;
        self.schedule(now.saturating_add(self.t.link), Ev::LinkFault(e));
    }

    /// End `e`'s link ended in `Fault`: the link is retrained as after a long outage
    /// ([`Sim::retrain`], both ends; what is on its wires is lost, what its ends held is
    /// dropped, and their operations fail by timeout), then comes up again if its PHY is
    /// up. Nothing it held is delivered after the reset. The requests and responses it
    /// dropped are counted ([`Sim::reset_drops`]).
    pub(crate) fn on_link_fault(&mut self, e: u32, now: u64) {
        if !self.link_faulted(e) {
            // Reset meanwhile (an outage of the fault plan retrained it).
            self.hot[e as usize].fault_due = false;
            return;
        }
        let p = self.peer[e as usize];
        for x in [e, p] {
            let h = &mut self.hot[x as usize];
            h.fault_due = false;
            h.busy_until = h.busy_until.min(now);
            let lost = self.wires[x as usize].flight.lose_all();
            if let Some(f) = self.fault.as_mut() {
                f.report.flits_lost += lost;
            }
        }
        for x in [e, p] {
            self.retrain(x, now);
        }
        self.note_reset_losses(e, p);
        for x in [e, p] {
            if self.hot[x as usize].phy_up {
                self.link_up(x, now);
            }
        }
    }

    /// Both ends of the link of ends `a` and `b` were just reset, which empties both its
    /// directions: what each end has sent that its peer has not received is what the
    /// link's resets so far lost in that direction (cumulative counts, so it is set, not
    /// added).
    fn note_reset_losses(&mut self, a: u32, b: u32) {
        if self.reset_lost.is_empty() {
            self.reset_lost = vec![0; self.ends()];
        }
        for (x, y) in [(a, b), (b, a)] {
            let lost = self
                .transfers_sent(x)
                .saturating_sub(self.transfers_received(y));
            if let Some(l) = self.reset_lost.get_mut(x as usize) {
                self.reset_lost_sum = self.reset_lost_sum - *l + lost;
                *l = lost;
            }
        }
    }

    /// The fabric is whole again: every link's PHY is up, no port has failed, no VC's
    /// credits are withheld, no rogue requester has a write open, and no link's bit error
    /// rate corrupts a DL flit on average (one error in fewer than its 5,120 bits: such a
    /// link may never finish bring-up, its retry giving up again and again). Whatever is
    /// still in the fabric then can still move, so a run with faults must drain it
    /// completely (`Summary::integrity_ok`). Always true without a fault plan.
    pub(crate) fn fabric_whole(&self) -> bool {
        let Some(f) = self.fault.as_ref() else {
            return true;
        };
        let flit_bits = (podlink_protocol::wire::dl_flit::FLIT_LEN * 8) as f64;
        f.withheld.is_empty()
            && !f.failed.iter().any(|&x| x)
            && self.hot.iter().all(|h| h.phy_up)
            && self.wires.iter().all(|w| w.ber() * flit_bits < 1.0)
            && f.rogues.iter().all(|r| r.req.borrow().ops_open() == 0)
    }

    /// Requests and responses still in the fabric: sent on a link and not yet received
    /// (less what resets lost), frames held in switches or waiting for a TL packer, and
    /// responses completers hold. Zero at the end of a drained run without faults; with
    /// faults, what links that stayed down hold, what waits in switches and completers
    /// behind them, and late responses still on their way when the run ended.
    pub(crate) fn stranded(&self) -> u64 {
        self.stranded_parts().iter().sum()
    }

    /// [`Sim::stranded`] by where it is: on links, queued (in switches, or for a TL
    /// packer or a completer), and held by completers (requests they answer).
    pub(crate) fn stranded_parts(&self) -> [u64; 3] {
        let on_links: u64 = (0..self.ends() as u32)
            .map(|x| {
                let y = self.peer.get(x as usize).copied().unwrap_or(x);
                self.transfers_sent(x)
                    .saturating_sub(self.transfers_received(y))
            })
            .sum();
        let held: u64 = self.accels.completers().map(|(_, n)| n as u64).sum();
        [
            on_links.saturating_sub(self.reset_lost_sum),
            self.frames.live_frames().count() as u64,
            held,
        ]
    }

    /// Requests and responses end `x` has taken for its link (pushed into its TL packer, or
    /// into its endpoint's).
    fn transfers_sent(&self, x: u32) -> u64 {
        match (self.txs.get(x as usize), self.ep(x)) {
            (Some(tx), _) => tx.transfers_sent,
            (None, Some(ep)) => ep.stats().transfers_sent,
            (None, None) => 0,
        }
    }

    /// Requests and responses end `x`'s TL unpacker (or its endpoint's) has delivered.
    fn transfers_received(&self, x: u32) -> u64 {
        match self.ep(x) {
            Some(ep) => ep.stats().transfers_received,
            None => self
                .rxs
                .get(x as usize)
                .map_or(0, |rx| rx.transfers_received),
        }
    }

    /// The requests and responses link resets dropped (after a link fault, or a fault
    /// plan's outage past the hold-off or the request timeout): exact, as each reset empties
    /// both directions of its link (what an end sent and its peer did not receive is then
    /// lost), plus frames waiting for a TL packer and responses endpoints' completers held.
    pub(crate) fn reset_drops(&self) -> u64 {
        self.reset_unpacked + self.reset_lost_sum
    }

    /// End `x`'s PHY is up: its link (or its endpoint's) starts bring-up, and its
    /// transmitter and timer are woken.
    fn link_up(&mut self, x: u32, now: u64) {
        if !self.ep_phy(x, true, now) {
            let tx = &mut self.txs[x as usize];
            tx.link.handle_link_up(Instant::from_ps(now));
            while tx.link.poll_event().is_some() {}
        }
        self.kick(x, now);
        self.arm_timer(x, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::scenarios;
    use crate::sim::fault::{Fault, FaultPlan};
    use crate::sim::Options;
    use podlink_protocol::flow::{CreditClass, CreditTarget};

    const US: u64 = 1_000_000;

    /// Per credit class, summed over VCs and targets: the buffers model end `x` holds (frames
    /// received on it that are still in the model, and requests its completer holds) plus
    /// the credits its peer may still spend on it; and the buffers `x` has.
    fn committed(sim: &Sim, x: u32) -> ([u32; 4], [u32; 4]) {
        let xi = x as usize;
        let held = sim.held_at(x);
        let peer = sim.peer[xi];
        let (mut used, mut cap) = ([0u32; 4], [0u32; 4]);
        for (k, class) in CreditClass::ALL.into_iter().enumerate() {
            for vc in 0..crate::sim::port::VCS {
                used[k] += u32::from(held.field_credits(vc).get(class));
            }
            for target in CreditTarget::ALL {
                let avail = match sim.ep(peer) {
                    Some(ep) => ep.credit_sender().available(target, class),
                    None => sim.ports[peer as usize].credits.available(target, class),
                };
                used[k] += avail;
                cap[k] += sim.txs[xi].credit_rx.capacity(target, class);
            }
        }
        (used, cap)
    }

    /// A switch port's link stays down past the hold-off while frames that came in on it wait
    /// in the switch for an accelerator that withholds its credits, so the port still holds
    /// them when its link is retrained. The port's fresh initial credit release grants every
    /// buffer, so it waits until those frames have left (as the switch library's `LinkPort`
    /// waits for its orphaned slots): at no moment may the buffers the port holds and the
    /// credits its peer holds for it add up to more than the port has. (Found in harsh plan
    /// 34 on the single-switch fault-mix pod: before, the release went at once, and the
    /// accelerator could send a whole buffer's worth into a port still holding 11 requests.)
    #[test]
    fn a_retrained_port_grants_no_buffer_it_still_holds() {
        let pod = scenarios::single_pod("fault-mix", 8, 2);
        let link = PortRef { switch: 0, port: 8 };
        let faults = FaultPlan {
            record_ops: true,
            faults: vec![
                Fault {
                    at_ps: 951_008,
                    what: FaultKind::Withhold { accel: 7, vc: 0 },
                },
                Fault {
                    at_ps: 5_232_086,
                    what: FaultKind::LinkDown(link),
                },
                Fault {
                    at_ps: 15_655_252,
                    what: FaultKind::LinkUp(link),
                },
                Fault {
                    at_ps: 25_000_000,
                    what: FaultKind::Release { accel: 7, vc: 0 },
                },
            ],
            ..FaultPlan::default()
        };
        let opts = Options {
            seed: 34,
            duration_ps: 8 * US,
            warmup_ps: US,
            faults,
            ..Options::default()
        };
        let mut sim = Sim::new(&pod, &opts).expect("the pod builds");
        let x = sim.switches[0].base + link.port;
        let mut now = 6 * US;
        sim.run_to(now);
        sim.start_workload(now);
        let mut retrained_holding = false;
        while now < 46 * US {
            now += 2_000;
            sim.run_to(now);
            retrained_holding |= !sim.ports[x as usize].stale.is_zero();
            let (used, cap) = committed(&sim, x);
            assert!(
                used.iter().zip(&cap).all(|(u, c)| u <= c),
                "at {now} ps end {x} holds and has granted {used:?} of {cap:?} buffers"
            );
        }
        assert!(
            retrained_holding,
            "the port held frames when it was retrained"
        );
        // Once they left, the release went: the accelerator holds the port's grant again.
        assert!(sim.ports[x as usize].stale.is_zero());
        let ep = sim
            .ep(sim.peer[x as usize])
            .expect("an endpoint accelerator");
        assert!(ep.credit_sender().initial_release_complete());
        assert_eq!(sim.accels.open(), 0, "every operation finished");
    }
}
