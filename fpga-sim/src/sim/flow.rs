//! Moving flits and frames: transmitters, wires, receivers, in-band credit returns and
//! switch pipelines (`spec-notes/simulator.md#links`).

use super::port::{flow_of, vc_of, FrameSlab, VCS};
use super::trace::Mark;
use super::{Ev, Owner, Sim};
use podlink_protocol::flow::{CreditOutput, CreditSender, CreditTarget};
use podlink_protocol::link::TlSink;
use podlink_protocol::retry::LinkState;
use podlink_protocol::time::{earliest, Instant};
use podlink_protocol::txn::Flow;
use podlink_protocol::wire::dl_stream::TL_FLIT_LEN;
use podlink_protocol::wire::{
    AddrCache, TlField, TlItem, TlMessage, TlPushError, TlTransfer, TlUnpacker,
};
use podlink_switch::header::Header;
use std::collections::VecDeque;

/// Data half-flits kept in a TL packer before a DL flit is packed (about one DL flit).
const PREFILL_HALVES: usize = 20;

/// The link's sink: TL flits into the TL unpacker, transfers into owned frames,
/// flow-control fields and the "initial credit release complete" message into the
/// receiving end's protocol `CreditSender` (a field returns the credits of the target the
/// stream's last `TlMessage::CreditTarget` selected).
struct Sink<'a> {
    tlu: &'a mut TlUnpacker,
    /// The end's address-compression decoder (`None` when nothing compresses).
    decoder: Option<&'a mut AddrCache>,
    expanded: u64,
    expand_errors: u64,
    frames: &'a mut FrameSlab,
    batch: &'a mut Vec<u32>,
    credits: &'a mut CreditSender,
    target: &'a mut u8,
    ingress: u32,
    tl: u64,
    errors: u64,
    fields: u64,
}

impl TlSink for Sink<'_> {
    fn tl_flit(&mut self, flit: &[u8; TL_FLIT_LEN]) {
        self.tl += 1;
        let _ = self.tlu.handle_flit(flit);
        loop {
            match self.tlu.poll_item() {
                Ok(Some(TlItem::Transfer(t))) => {
                    let h = match self.decoder.as_deref_mut() {
                        None => self.frames.alloc_transfer(&t, self.ingress),
                        Some(d) => alloc_expanded(
                            self.frames,
                            d,
                            t,
                            self.ingress,
                            &mut self.expanded,
                            &mut self.expand_errors,
                        ),
                    };
                    self.batch.push(h);
                }
                Ok(Some(TlItem::Credits(fc))) => match CreditTarget::from_index(*self.target) {
                    Some(t) => {
                        self.credits.handle_return(t, &fc);
                        self.fields += 1;
                    }
                    // A target the encoding does not name: a stream error.
                    None => self.errors += 1,
                },
                Ok(Some(TlItem::Message(TlMessage::CreditTarget { target }))) => {
                    *self.target = target;
                }
                Ok(Some(TlItem::Message(TlMessage::InitialCreditReleaseComplete))) => {
                    self.credits.handle_initial_release_complete();
                    self.fields += 1;
                }
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => {
                    self.errors += 1;
                    break;
                }
            }
        }
    }
}

/// A frame for transfer `t` that arrived at a model end whose senders compress: what goes
/// on past a switch port (or waits for a composed accelerator's completer) is uncompressed,
/// since the caches are per link
/// (`AddrCache::forward_request`). A request that cannot be expanded, which a lossless link
/// never delivers, goes on as it came and is counted (`Counters::expand_errors`). Out of
/// line: the usual arrival has no decoder to consult.
#[cold]
#[inline(never)]
fn alloc_expanded(
    frames: &mut FrameSlab,
    decoder: &mut AddrCache,
    t: TlTransfer<'_>,
    ingress: u32,
    expanded: &mut u64,
    errors: &mut u64,
) -> u32 {
    let (mut field, mut enables) = (t.field, t.byte_enables.copied());
    match decoder.forward_request(&t.field) {
        Ok(None) => {}
        Ok(Some(f)) => {
            if matches!(t.field, TlField::CompressedRequest(_)) {
                *expanded += 1;
            }
            field = TlField::UncompressedRequest(f.req);
            enables = f.byte_enables.or(enables);
        }
        Err(_) => *errors += 1,
    }
    let t = TlTransfer {
        field,
        byte_enables: enables.as_ref(),
        ..t
    };
    frames.alloc_transfer(&t, ingress)
}

impl Sim {
    /// Wake end `e`'s transmitter: at once if its wire is free, else when it frees.
    pub(crate) fn kick(&mut self, e: u32, now: u64) {
        let key = self.current_key();
        let h = &mut self.hot[e as usize];
        if h.pending {
            return;
        }
        h.pending = true;
        if let Some((at, seq)) = h.deferred.take() {
            if (at, seq) > key {
                // A deferred wake-up that has not passed yet: schedule it where it would be.
                self.schedule_in_place(at, seq, Ev::Tx(e));
                return;
            }
        }
        let at = h.busy_until.max(now);
        self.schedule(at, Ev::Tx(e));
    }

    /// [`Sim::kick`] for a wake-up that may find nothing to do (a flit was received, a timer
    /// fired, a flit was sent): when end `e`'s link has nothing to transmit and its source
    /// nothing waiting, the `Tx` event would be a no-op, so it is not scheduled, only its
    /// place in the event order is kept (`EndHot::deferred`): any kick before that place
    /// schedules it there. Every change that gives a transmitter work kicks it, so the run is
    /// event for event the one with every wake-up scheduled, minus the no-ops.
    pub(crate) fn kick_lazily(&mut self, e: u32, now: u64) {
        if self.hot[e as usize].pending {
            return;
        }
        if self.wants_tx(e) {
            self.kick(e, now);
            return;
        }
        let key = self.current_key();
        if self.hot[e as usize].deferred.is_some_and(|d| d > key) {
            return; // a deferred wake-up still ahead: this one merges with it
        }
        let at = self.hot[e as usize].busy_until.max(now);
        let seq = self.sched.reserve_seq();
        self.hot[e as usize].deferred = Some((at, seq));
    }

    /// Whether end `e`'s transmitter may send something now: its link has a DL flit to
    /// give or TL data waits ([`Sim::source_waiting`]); an endpoint answers for itself
    /// (`Endpoint::wants_transmit`, which does not see a rogue requester behind it).
    pub(crate) fn wants_tx(&self, e: u32) -> bool {
        self.source_waiting(e) || (self.ep(e).is_none() && self.txs[e as usize].link.has_transmit())
    }

    /// Whether end `e` has TL data waiting to be sent: in its link's queue, its TL packer,
    /// its overflow queue, or its source (switch queue, requester, completer; an endpoint's
    /// `wants_transmit`).
    pub(crate) fn source_waiting(&self, e: u32) -> bool {
        if let Some(ep) = self.ep(e) {
            return ep.wants_transmit() || ep.host().rogue_waiting();
        }
        let h = &self.hot[e as usize];
        debug_assert_eq!(h.tx_backlog, self.tx_backlog_now(e), "end {e}");
        debug_assert_eq!(h.owes, self.ports[e as usize].owes(), "end {e}");
        if h.tx_backlog || h.owes {
            return true;
        }
        match self.owner[e as usize] {
            Owner::Switch { s, p } => self.switches[s as usize].fwd.backlog(p),
            Owner::Accel { .. } => {
                debug_assert_eq!(h.accel_work, self.accel_work_now(e), "end {e}");
                h.accel_work
            }
        }
    }

    /// Whether end `e`'s overflow queue, TL packer or link queue holds TL data (read from
    /// the structures; `EndHot::tx_backlog` keeps the answer).
    fn tx_backlog_now(&self, e: u32) -> bool {
        let tx = &self.txs[e as usize];
        !tx.txq.is_empty() || !tx.tl.is_idle() || tx.link.tx_room() < super::LINK_TXQ
    }

    /// Whether accelerator end `e`'s requester or completer, or a rogue requester behind it
    /// (a fault), has something queued (read from the structures; `EndHot::accel_work`
    /// keeps the answer).
    fn accel_work_now(&self, e: u32) -> bool {
        self.accels.port(e).is_some_and(|ap| ap.has_work())
            || self.fault.as_ref().is_some_and(|f| f.rogue_waiting(e))
    }

    /// Record whether accelerator end `e`'s requester or completer, or a rogue requester
    /// behind it, has something queued (after any of them changed).
    pub(crate) fn note_accel_work(&mut self, e: u32) {
        let work = self.accel_work_now(e);
        self.hot[e as usize].accel_work = work;
    }

    pub(crate) fn on_tx(&mut self, e: u32, now: u64) {
        let ei = e as usize;
        self.hot[ei].pending = false;
        if self.hot[ei].busy_until > now {
            self.kick(e, now);
            return;
        }
        if self.accels.ep_index(e).is_some() {
            self.on_tx_ep(e, now);
            return;
        }
        // The source, overflow queue and TL packer are looked at only if they may hold
        // something (flags in EndHot), so that a transmitter with nothing but link work to do
        // does not touch them.
        let filled = self.prefill(e, now);
        let credited = self.hot[ei].owes && self.pack_credits(e);
        let fed = filled || credited || self.hot[ei].tl_busy;
        if fed {
            self.feed_link(e, now);
        }
        let tx = &mut self.txs[ei];
        let packed_before = tx.link.stats().tl_packed;
        let slot = self.flits.take();
        let bytes = self.flits.get_mut(slot);
        let sent = tx
            .link
            .poll_transmit(Instant::from_ps(now), bytes)
            .is_some();
        if !sent {
            self.flits.put(slot);
        }
        let tx = &self.txs[ei];
        let h = &mut self.hot[ei];
        if filled {
            h.overflow = !tx.txq.is_empty();
        }
        if fed {
            h.tl_busy = !tx.tl.is_idle();
        }
        h.link_queued = tx.link.tx_room() < super::LINK_TXQ;
        h.tx_backlog = h.overflow || h.tl_busy || h.link_queued;
        self.arm_timer(e, now);
        if !sent {
            self.note_link_fault(e, now);
            // A stall: TL data (or credits owed) waiting while the link carries payload and
            // sent nothing (not link bring-up, when only the link's own flits go).
            if self.hot[ei].stall_since.is_none()
                && self.txs[ei].link.state() == LinkState::Up
                && self.source_waiting(e)
            {
                self.hot[ei].stall_since = Some(now);
            }
            return;
        }
        let packed = self.txs[ei].link.stats().tl_packed - packed_before;
        self.launch(e, now, slot, packed);
        if let Some(next) = self.txs[ei].link.retry().next_submit_slot() {
            super::window::prefetch_flit(next);
        }
        // A DL flit that started many TL flits may end inside one, whose rest must follow.
        let maybe_carrying = packed >= 6;
        let more = maybe_carrying || self.txs[ei].link.retry().unsent() > 0;
        // Keep going while data may follow; otherwise sleep until the next kick (new data,
        // credits, an ack that opens the replay window, a timer, a received flit).
        if more || self.source_waiting(e) {
            self.kick_lazily(e, now);
        }
    }

    /// DL flit `slot`, which carries `packed` TL flits, leaves end `e` now: onto its wire
    /// (with the wire's bit errors), arriving after the link's latency (and the endpoint's
    /// receive latency at an accelerator); the transmitter is busy for a flit time.
    pub(crate) fn launch(&mut self, e: u32, now: u64, slot: u32, packed: u64) {
        let ei = e as usize;
        let to_accel = matches!(self.owner[self.peer[ei] as usize], Owner::Accel { .. });
        let at = now + self.t.link + if to_accel { self.t.endpoint } else { 0 };
        let ser = self.t.ser;
        let wire = &mut self.wires[ei];
        wire.corrupt(self.flits.get_mut(slot));
        let h = &mut self.hot[ei];
        if let Some(s) = h.stall_since.take() {
            h.stall_ps += now - s;
        }
        let first = wire.flight.is_empty();
        wire.flight.push(at, slot);
        h.busy_until = now + ser;
        h.busy_ps += ser;
        if now >= self.inject_from && now < self.inject_until {
            h.busy_window_ps += ser;
            h.tl_window += packed;
        }
        if first {
            self.schedule(at, Ev::Arrive(e));
        }
        if let Owner::Accel { a, .. } = self.owner[ei] {
            if !self.accels.backlog[a as usize].is_empty() {
                self.drain_backlog(a, now);
            }
        }
    }

    /// Move TL flits from end `e`'s TL packer into its link while the link has room.
    fn feed_link(&mut self, e: u32, now: u64) {
        let tx = &mut self.txs[e as usize];
        if tx.link.state() == LinkState::Fault {
            // Taken nothing until its reset (`Sim::on_link_fault`), which drops the packer's.
            return;
        }
        let mut flit = [0u8; TL_FLIT_LEN];
        while tx.link.tx_room() > 0 && !tx.tl.is_idle() {
            if tx.tl.poll_flit(&mut flit).is_none() {
                break;
            }
            if tx.link.submit_tl_flit(Instant::from_ps(now), &flit).is_ok() {
                self.hot[e as usize].tl_submitted += 1;
            } else {
                self.stats.invalid_frames += 1;
            }
        }
    }

    /// Schedule a `Timer` event for end `e`'s link deadline or credit return deadline,
    /// whichever is first, if it is earlier than the one already scheduled. Requester deadlines are not timers: the periodic sweep
    /// (`Sim::on_sweep`) handles them. (A `Timer` armed for an expired requester deadline
    /// that only the sweep clears re-armed itself at the same instant forever.)
    pub(crate) fn arm_timer(&mut self, e: u32, now: u64) {
        let next = match self.ep(e) {
            Some(ep) => ep.poll_timeout(),
            None => {
                let tx = &self.txs[e as usize];
                earliest(tx.link.poll_timeout(), tx.credit_rx.poll_timeout())
            }
        };
        self.arm_at(e, next, now);
    }

    /// Schedule a `Timer` event for end `e` at `next` (not before `now`) if that is earlier
    /// than the one already scheduled.
    fn arm_at(&mut self, e: u32, next: Option<Instant>, now: u64) {
        if let Some(t) = next {
            let t = t.as_ps().max(now);
            let h = &mut self.hot[e as usize];
            if t < h.timer_at {
                h.timer_at = t;
                self.schedule(t, Ev::Timer(e));
            }
        }
    }

    pub(crate) fn on_timer(&mut self, e: u32, now: u64) {
        let h = &mut self.hot[e as usize];
        if now != h.timer_at {
            return; // superseded
        }
        h.timer_at = u64::MAX;
        if self.accels.ep_index(e).is_some() {
            self.timer_ep(e, now);
            return;
        }
        let tx = &mut self.txs[e as usize];
        let t = Instant::from_ps(now);
        tx.link.handle_timeout(t);
        while tx.link.poll_event().is_some() {}
        tx.credit_rx.handle_timeout(t);
        self.take_due_returns(e);
        self.arm_timer(e, now);
        self.kick_lazily(e, now);
    }

    /// Move frames from end `e`'s source into its TL packer, about one DL flit's worth.
    /// Returns false when there was nothing to move (the overflow queue and TL packer were
    /// not touched).
    fn prefill(&mut self, e: u32, now: u64) -> bool {
        let overflow = self.hot[e as usize].overflow;
        match self.owner[e as usize] {
            Owner::Switch { s, p } => {
                if !overflow && !self.switches[s as usize].fwd.backlog(p) {
                    return false;
                }
                self.prefill_switch(e, s, p, now);
            }
            Owner::Accel { .. } => {
                if !overflow && !self.hot[e as usize].accel_work {
                    return false;
                }
                self.prefill_accel(e, now);
            }
        }
        true
    }

    fn prefill_switch(&mut self, e: u32, s: u32, p: u32, now: u64) {
        let mut pulled = false;
        loop {
            if self.txs[e as usize].tl.buffered_halves() >= PREFILL_HALVES {
                break;
            }
            let h = match self.txs[e as usize].txq.pop_front() {
                Some(h) => h,
                None => {
                    let sw = &mut self.switches[s as usize];
                    if !sw.fwd.backlog(p) {
                        break;
                    }
                    let range = sw.base as usize..(sw.base + sw.n) as usize;
                    let got = sw
                        .fwd
                        .pull(Instant::from_ps(now), p, &mut self.ports[range]);
                    match got {
                        Some(h) => {
                            pulled = true;
                            self.release_frame(h, now);
                            h
                        }
                        None => break,
                    }
                }
            };
            if !self.push_frame(e, h, now) {
                break;
            }
        }
        // Frames past the residence limit were dropped instead of pulled.
        if self.switches[s as usize].fwd.discarded() > 0 {
            self.reap_expired(s, now);
            pulled = true;
        }
        if pulled {
            self.wake_blocked(s, now);
        }
    }

    /// Free the frames switch `s` dropped from its queues for staying past the residence
    /// limit (their credits go back to their senders).
    fn reap_expired(&mut self, s: u32, now: u64) {
        while let Some(h) = self.switches[s as usize].fwd.switch().poll_discarded() {
            self.stats.note_drop(podlink_switch::DropReason::Expired);
            self.release_frame(h, now);
            self.frames.free(h);
        }
    }

    /// Frames left switch `s`'s queues: ingress pipelines that stopped for lack of room try
    /// again.
    pub(crate) fn wake_blocked(&mut self, s: u32, now: u64) {
        if self.switches[s as usize].blocked.is_empty() {
            return;
        }
        let mut blocked = std::mem::take(&mut self.switches[s as usize].blocked);
        for &b in &blocked {
            self.schedule_pipe(b, now);
        }
        blocked.clear();
        self.switches[s as usize].blocked = blocked;
    }

    /// Push frame `h` into end `e`'s TL packer; false (frame kept at the queue's head) when
    /// the packer is full.
    pub(crate) fn push_frame(&mut self, e: u32, h: u32, now: u64) -> bool {
        let Some(f) = self.frames.get(h) else {
            return true;
        };
        let tx = &mut self.txs[e as usize];
        let mut t = f.transfer();
        // A switch end compresses what it can with its own encoder (accelerator ends'
        // requesters compress for themselves); the encoder's state is kept only if the
        // packer takes the request, so the peer's decoder sees exactly what was sent.
        let mut encoder = None;
        if self.pod.link.compress_requests {
            if let (TlField::UncompressedRequest(r), Owner::Switch { .. }) =
                (t.field, self.owner[e as usize])
            {
                let mut enc = tx.encoder;
                t.field = enc.encode_request(&r, t.byte_enables);
                if matches!(t.field, TlField::CompressedRequest(_)) {
                    t.byte_enables = None;
                }
                encoder = Some(enc);
            }
        }
        let pushed = tx.tl.push(&TlItem::Transfer(t));
        match pushed {
            Ok(()) => {
                if let Some(enc) = encoder {
                    tx.encoder = enc;
                }
                tx.transfers_sent += 1;
                if let Some(t) = self.trace.as_mut() {
                    t.mark(now, Mark::Pull(e));
                }
                self.frames.free(h);
                true
            }
            Err(TlPushError::Full) => {
                tx.txq.push_front(h);
                false
            }
            Err(TlPushError::Invalid(_)) => {
                self.stats.invalid_frames += 1;
                self.frames.free(h);
                true
            }
        }
    }

    /// The receiver of frame `h` released its buffer: its credits are freed, to go back to
    /// the sender when the return policy says.
    pub(crate) fn release_frame(&mut self, h: u32, now: u64) {
        let Some(f) = self.frames.get(h) else {
            return;
        };
        let (r, flow, vc, beats) = (
            f.ingress,
            flow_of(&f.field),
            usize::from(vc_of(&f.field).get()),
            f.beats(),
        );
        self.ports[r as usize].free_buffers(flow, vc, beats);
        // Only the ingress end's credit receiver changes here, not its link: the link's
        // deadline was armed by whatever changed it last.
        if self.credit_policy(r, now, false) {
            self.kick(r, now);
        }
    }

    /// End `r` freed buffers or its withheld VCs changed: apply the return policy
    /// ([`Sim::apply_credit_policy`]) and, if credits may go now, wake its transmitter,
    /// which sends them in band even when it has nothing else to send.
    pub(crate) fn note_owed(&mut self, r: u32, now: u64) {
        if self.apply_credit_policy(r, now) {
            self.kick(r, now);
        }
    }

    /// The protocol decides when end `r` returns credits: the buffers it freed since the
    /// last call (`PortState::freed`) are handed to its `CreditReceiver` (consumed and
    /// released at once: the model keeps the buffers' occupancy itself), and the returns
    /// the receiver makes due (a class reached `link.credit_return_threshold` pending, or
    /// `link.credit_return_ns` passed since the first pending credit: its timer, armed here,
    /// fires through the end's `Timer` event) become owed (`PortState::owed`), which the
    /// end's next `Tx` event packs. Records and returns whether the end owes credits it may
    /// send now (`EndHot::owes`). Does not kick.
    pub(crate) fn apply_credit_policy(&mut self, r: u32, now: u64) -> bool {
        self.credit_policy(r, now, true)
    }

    /// [`Sim::apply_credit_policy`]; with `link` false, only the credit receiver's deadline
    /// is armed (the caller changed nothing else of the end).
    fn credit_policy(&mut self, r: u32, now: u64, link: bool) -> bool {
        let ri = r as usize;
        let freed = std::mem::take(&mut self.ports[ri].freed);
        let rx = &mut self.txs[ri].credit_rx;
        if !freed.is_zero() {
            let t = Instant::from_ps(now);
            for (vc, target) in CreditTarget::ALL.into_iter().enumerate().take(VCS) {
                let c = freed.field_credits(vc);
                if c.is_zero() {
                    continue;
                }
                // The model's credits never let the peer overrun the grant, so neither call
                // fails; if one did, the credits would go back at once rather than be lost.
                let ok = rx.handle_consumed(target, c).is_ok() && rx.release(t, target, c).is_ok();
                debug_assert!(ok, "end {r}: credit receiver refused {c:?} on VC {vc}");
                if !ok {
                    if let (Some(o), Some(f)) = (self.ports[ri].owed.0.get_mut(vc), freed.0.get(vc))
                    {
                        for (o, f) in o.iter_mut().zip(f) {
                            *o = o.saturating_add(*f);
                        }
                    }
                }
            }
        }
        self.take_due_returns(r);
        if link || self.ep(r).is_some() {
            self.arm_timer(r, now);
        } else {
            let t = self.txs[ri].credit_rx.poll_timeout();
            self.arm_at(r, t, now);
        }
        self.hot[ri].owes
    }

    /// Move the returns end `r`'s `CreditReceiver` says are due into its owed credits;
    /// update `EndHot::owes`. None while a switch end still holds frames from before its
    /// link was retrained (`PortState::stale`): the fresh initial release waits until they
    /// have all left, as the switch library's `LinkPort` waits for its orphaned slots, so the
    /// peer is never granted a buffer that is still in use. (A composed accelerator's end
    /// does not wait for the requests its completer still holds: their answers may need the
    /// credits of switch ends that wait in turn, and random pod 243889, with links faulting
    /// at both ends of such chains, stalled for good. The endpoint model drops what its
    /// completer holds at a reset.)
    pub(crate) fn take_due_returns(&mut self, r: u32) {
        let ri = r as usize;
        let rx = &mut self.txs[ri].credit_rx;
        if !rx.initial_release_done()
            && !self.ports[ri].stale.is_zero()
            && matches!(self.owner[ri], Owner::Switch { .. })
        {
            self.hot[ri].owes = self.ports[ri].owes();
            return;
        }
        while let Some(out) = rx.poll_return() {
            match out {
                CreditOutput::Return { target, fc } => {
                    let vc = target.index();
                    if vc < VCS {
                        self.ports[ri].owed.add_field(vc, &fc);
                    }
                }
                CreditOutput::InitialReleaseComplete => {
                    self.ports[ri].owe_release_complete = true;
                }
            }
        }
        self.hot[ri].owes = self.ports[ri].owes();
    }

    /// Put the credits end `e` owes its peer into its TL packer as TL flow-control fields,
    /// each preceded by a `TlMessage::CreditTarget` when it returns another VC's credits
    /// than the stream's last field, as the switch library's `LinkPort` does (the public
    /// field names no VC). A field holds at most what its encoding does (6-bit command,
    /// 8-bit data counts, `flow::Credits::to_field`); the rest follows in further fields.
    /// Stops when the packer is full (the rest stays owed). Returns whether anything was
    /// pushed; keeps `EndHot::owes` up to date.
    fn pack_credits(&mut self, e: u32) -> bool {
        let ei = e as usize;
        let mut pushed = false;
        while let Some((vc, fc)) = self.ports[ei].next_return(self.txs[ei].credit_target) {
            let tx = &mut self.txs[ei];
            if vc != tx.credit_target {
                let select = TlItem::Message(TlMessage::CreditTarget { target: vc });
                match tx.tl.push(&select) {
                    Ok(()) => {
                        tx.credit_target = vc;
                        pushed = true;
                    }
                    Err(TlPushError::Full) => break,
                    Err(TlPushError::Invalid(_)) => {
                        self.stats.invalid_frames += 1;
                        break;
                    }
                }
            }
            match tx.tl.push(&TlItem::Credits(fc)) {
                Ok(()) => {
                    self.ports[ei].returned(vc, &fc);
                    pushed = true;
                }
                Err(TlPushError::Full) => break,
                Err(TlPushError::Invalid(_)) => {
                    self.stats.invalid_frames += 1;
                    break;
                }
            }
        }
        if self.ports[ei].release_complete_due() {
            let done = TlItem::Message(TlMessage::InitialCreditReleaseComplete);
            match self.txs[ei].tl.push(&done) {
                Ok(()) => {
                    self.ports[ei].owe_release_complete = false;
                    pushed = true;
                }
                Err(TlPushError::Full) => {}
                Err(TlPushError::Invalid(_)) => {
                    self.stats.invalid_frames += 1;
                    self.ports[ei].owe_release_complete = false;
                }
            }
        }
        self.hot[ei].owes = self.ports[ei].owes();
        pushed
    }

    pub(crate) fn on_arrive(&mut self, e: u32, now: u64) {
        let ei = e as usize;
        let r = self.peer[ei];
        if self.accels.ep_index(r).is_some() {
            self.arrive_ep(e, r, now);
            return;
        }
        let ri = r as usize;
        let mut batch = std::mem::take(&mut self.batch);
        let rx = &mut self.rxs[ri];
        // Model ends decode at arrival when senders compress (nothing else sends a compressed
        // request or a cache load): a switch end because the caches are per link, a composed
        // accelerator's end so that requests waiting for its completer across a retrain are
        // not decoded later against the cleared cache.
        let decodes = self.pod.link.compress_requests;
        let mut sink = Sink {
            tlu: &mut rx.tlu,
            decoder: decodes.then_some(&mut rx.decoder),
            expanded: 0,
            expand_errors: 0,
            frames: &mut self.frames,
            batch: &mut batch,
            credits: &mut self.ports[ri].credits,
            target: &mut rx.credit_target,
            ingress: r,
            tl: 0,
            errors: 0,
            fields: 0,
        };
        let wire = &mut self.wires[ei];
        let Some(f) = wire.flight.front() else {
            return;
        };
        let link = &mut self.txs[ri].link;
        if !f.lost {
            link.handle_flit(Instant::from_ps(now), self.flits.get(f.slot), &mut sink);
            while link.poll_event().is_some() {}
        }
        wire.flight.pop(&mut self.flits);
        let next = wire.flight.front().map(|n| {
            self.flits.prefetch(n.slot);
            n.at
        });
        rx.tl_delivered += sink.tl;
        rx.tl_errors += sink.errors;
        rx.transfers_received += sink.batch.len() as u64;
        rx.expanded += sink.expanded;
        self.stats.expand_errors += sink.expand_errors;
        let credited = sink.fields > 0;
        rx.credit_fields += sink.fields;
        if let Some(at) = next {
            self.schedule(at, Ev::Arrive(e));
        }
        // Credits returned in band: the switch's forwarding logic sees them (the kick below
        // wakes the transmitter if it has frames waiting for them).
        if credited {
            if let Owner::Switch { s, p } = self.owner[ri] {
                let sw = &mut self.switches[s as usize];
                let range = sw.base as usize..(sw.base + sw.n) as usize;
                sw.fwd.refresh(p, &self.ports[range]);
            }
        }
        // The receiving end may owe an ack or a replay request, or may send again now that
        // an ack freed its replay buffer.
        self.arm_timer(r, now);
        self.kick_lazily(r, now);
        for &h in &batch {
            if let Some(t) = self.trace.as_mut() {
                t.mark(now, Mark::Deliver(r));
            }
            self.deliver(r, h, now);
        }
        batch.clear();
        self.batch = batch;
    }

    /// A frame arrived at end `r`.
    fn deliver(&mut self, r: u32, h: u32, now: u64) {
        match self.owner[r as usize] {
            Owner::Switch { .. } => {
                let at = now + self.t.pipeline;
                let response = self
                    .frames
                    .get(h)
                    .is_some_and(|f| flow_of(&f.field) == Flow::Response);
                let rx = &mut self.rxs[r as usize];
                let q = if response { &mut rx.rsp } else { &mut rx.fifo };
                let first = q.is_empty();
                q.push_back((at, h));
                if first {
                    self.schedule_pipe(r, at);
                }
            }
            Owner::Accel { .. } => self.accel_deliver(r, h, now),
        }
    }

    /// Have switch ingress end `r`'s pipeline looked at, at `at`, unless a look is scheduled
    /// at or before then.
    pub(crate) fn schedule_pipe(&mut self, r: u32, at: u64) {
        let rx = &mut self.rxs[r as usize];
        if at < rx.pipe_at {
            rx.pipe_at = at;
            self.schedule(at, Ev::Pipe(r));
        }
    }

    /// Queue frame `h` at end `r`'s FIFO, due at `at`; `ev` fires for the head.
    pub(crate) fn enqueue(&mut self, r: u32, at: u64, h: u32, ev: Ev) {
        let q = &mut self.rxs[r as usize].fifo;
        let first = q.is_empty();
        q.push_back((at, h));
        if first {
            self.schedule(at, ev);
        }
    }

    /// Switch ingress end `r`'s pipeline: hand its due frames to the forwarding logic,
    /// requests and responses each in order and together in arrival order. A FIFO whose
    /// head finds no room in the switch ([`Forwarder::has_room`]) waits until frames leave;
    /// the other goes on.
    pub(crate) fn on_pipe(&mut self, r: u32, now: u64) {
        let Owner::Switch { s, p } = self.owner[r as usize] else {
            return;
        };
        let ri = r as usize;
        if self.rxs[ri].pipe_at != now {
            return; // superseded by an earlier look
        }
        self.rxs[ri].pipe_at = u64::MAX;
        // Lanes: 0 responses, 1 requests.
        let mut stopped = [false; 2];
        loop {
            let rx = &self.rxs[ri];
            let due = |q: &VecDeque<(u64, u32)>, stop: bool| {
                q.front()
                    .filter(|&&(at, _)| !stop && at <= now)
                    .map(|&(at, _)| at)
            };
            let lane = match (due(&rx.rsp, stopped[0]), due(&rx.fifo, stopped[1])) {
                (Some(a), Some(b)) => usize::from(b < a),
                (Some(_), None) => 0,
                (None, Some(_)) => 1,
                (None, None) => break,
            };
            let rx = &mut self.rxs[ri];
            let q = if lane == 0 { &mut rx.rsp } else { &mut rx.fifo };
            let Some(&(due, h)) = q.front() else {
                break;
            };
            let Some(f) = self.frames.get(h) else {
                q.pop_front();
                continue;
            };
            let sw = &mut self.switches[s as usize];
            if !sw.fwd.has_room(p, &Header::from_tl(&f.field)) {
                stopped[lane] = true;
                if !sw.blocked.contains(&r) {
                    sw.blocked.push(r);
                }
                self.stats.ingress_blocked += 1;
                continue;
            }
            q.pop_front();
            if let Some(t) = self.trace.as_mut() {
                t.mark(now, Mark::PipeOut(r));
            }
            let range = sw.base as usize..(sw.base + sw.n) as usize;
            let res = sw.fwd.forward(
                Instant::from_ps(now),
                Instant::from_ps(due.saturating_sub(self.t.pipeline)),
                p,
                h,
                f,
                &mut self.ports[range],
            );
            let base = sw.base;
            if self.fault.is_some() {
                self.switch_events(s, now);
            } else {
                // Without faults nothing is flushed and no health changes: only drop events.
                let x = sw.fwd.switch();
                while x.poll_event().is_some() {}
            }
            match res {
                Ok(egress) => self.kick(base + egress, now),
                Err(reason) => {
                    self.stats.note_drop(reason);
                    self.release_frame(h, now);
                    self.frames.free(h);
                }
            }
        }
        // The next frame not yet due, in a FIFO that is not waiting for room.
        let rx = &self.rxs[ri];
        let next = [(&rx.rsp, stopped[0]), (&rx.fifo, stopped[1])]
            .into_iter()
            .filter(|&(_, stop)| !stop)
            .filter_map(|(q, _)| q.front().map(|&(at, _)| at))
            .min();
        if let Some(at) = next {
            self.schedule_pipe(r, at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fault::{Fault, FaultKind, FaultPlan, PortRef};
    use super::super::port::VCS;
    use super::super::{run_settled_until, Options, Sim};
    use crate::pod::config::{AccelModel, PodFile};
    use crate::pod::presets;
    use podlink_protocol::flow::{CreditClass, CreditTarget};
    use podlink_protocol::wire::Vc;

    /// Credits each receiver grants per VC and class in these tests: one largest transfer's
    /// worth (4 data beats), so every link can carry one 256 B frame per VC and flow at a
    /// time, and a run finishes only if credits keep coming back.
    const GRANT: u32 = 4;

    /// Run `pod` with `opts` for 2 µs of injection from 6 µs, drain, then let the last
    /// credit returns land; returns the sim (not yet reported).
    fn run_settled(pod: &PodFile, opts: &Options) -> Sim {
        run_settled_until(pod, opts).0
    }

    /// These tests look at every end's credit plumbing in the model (`PortState`, the
    /// end's `CreditReceiver`), which the composed accelerators share with the switch ends;
    /// an endpoint keeps its own (`sim::endpoint` tests).
    fn composed(name: &str) -> PodFile {
        let mut pod = presets::load(name).expect("preset");
        pod.accelerator.model = AccelModel::Composed;
        pod
    }

    fn shallow() -> PodFile {
        let mut pod = composed("single-switch-16");
        pod.switch.buffer_flits_per_vc = GRANT;
        for w in &mut pod.workloads {
            w.offered_load = 0.5;
        }
        pod
    }

    /// End `e`'s protocol `CreditSender` learnt a grant of `g` credits of every class on
    /// every VC (nothing in the pool) from its peer's initial release, which is complete,
    /// holds all of them now, and saw no return above the grant.
    fn holds_grant(sim: &Sim, e: usize, g: u32) {
        let c = &sim.ports[e].credits;
        assert!(c.initial_release_complete(), "end {e}");
        assert_eq!(c.stats().return_above_grant, 0, "end {e}");
        for target in CreditTarget::ALL {
            let want = if target == CreditTarget::Shared { 0 } else { g };
            for class in CreditClass::ALL {
                assert_eq!(c.grant(target, class), want, "end {e} {target:?} {class:?}");
                assert_eq!(
                    c.available(target, class),
                    want,
                    "end {e} {target:?} {class:?}"
                );
            }
        }
    }

    /// Every end holds its whole grant again and owes nothing: each credit spent came back
    /// exactly once, through the TL flow-control fields its peer's unpacker delivered.
    fn all_credits_home(sim: &Sim) {
        for e in 0..sim.ends() {
            holds_grant(sim, e, GRANT);
            assert!(
                sim.ports[e].owed.is_zero(),
                "end {e}: {:?}",
                sim.ports[e].owed
            );
            assert!(!sim.hot[e].owes, "end {e}");
            assert!(sim.txs[e].tl.is_idle(), "end {e}");
            assert!(sim.ports[e].freed.is_zero(), "end {e}");
            let rx = &sim.txs[e].credit_rx;
            for target in CreditTarget::ALL {
                for class in CreditClass::ALL {
                    assert_eq!(rx.pending(target, class), 0, "end {e} {target:?} {class:?}");
                }
            }
        }
    }

    /// The protocol's return policy decides when credits go back: with a threshold no
    /// class reaches (deep buffers), every return waits for the `CreditReceiver`'s delay, so
    /// an end receives at most one field per VC per delay (the timer restarts only with the
    /// first credit freed after a return); returning at once (threshold 1) on the same pod
    /// sends many times more fields, one per freed frame or so. Both runs complete their
    /// operations and bring every credit home.
    #[test]
    fn credit_returns_follow_the_threshold_and_delay() {
        const DEEP: u32 = 64;
        const DELAY_NS: f64 = 200.0;
        let run = |threshold: u32| {
            let mut pod = shallow();
            pod.switch.buffer_flits_per_vc = DEEP;
            pod.link.credit_return_threshold = threshold;
            pod.link.credit_return_ns = DELAY_NS;
            let opts = Options {
                duration_ps: 2_000_000,
                warmup_ps: 0,
                ..Options::default()
            };
            let (sim, end) = run_settled_until(&pod, &opts);
            for e in 0..sim.ends() {
                holds_grant(&sim, e, DEEP);
                assert!(sim.ports[e].owed.is_zero(), "end {e}");
            }
            let most = sim.rxs.iter().map(|r| r.credit_fields).max().unwrap_or(0);
            let fields = sim.credit_fields();
            let r = sim.report(None);
            let s = &r.summary;
            assert!(s.drained && s.integrity.ok() && s.conservation.ok, "{s:?}");
            (fields, most, s.conservation.ops_completed, end)
        };
        let (coalesced, most, ops, end) = run(u32::from(u16::MAX));
        let (at_once, _, ops_at_once, _) = run(1);
        assert!(
            ops > 1000 && ops_at_once > 1000,
            "{ops} / {ops_at_once} operations"
        );
        // From the start of injection (6 µs) to the end, one expiry per delay at most.
        let expiries = (end - 6_000_000) / (DELAY_NS as u64 * 1000) + 1;
        assert!(
            most <= VCS as u64 * expiries,
            "an end received {most} fields in {expiries} delays"
        );
        assert!(coalesced < ops, "{coalesced} fields for {ops} operations");
        assert!(
            at_once > 4 * coalesced,
            "at once {at_once} fields, coalesced {coalesced}"
        );
    }

    /// No end starts with credits: each learns its peer's grant from the initial credit
    /// release, which travels in band (a credit-target message and flow-control fields per
    /// VC, then "initial credit release complete") once the link carries TL flits, well
    /// before the traced read at 5 µs. The grant is the pod's `buffer_flits_per_vc`.
    #[test]
    fn initial_credit_release_travels_in_band() {
        let mut pod = composed("single-switch-16");
        pod.switch.buffer_flits_per_vc = 300; // more than one field holds per class
        let opts = Options {
            traffic: false,
            ..Options::default()
        };
        let mut sim = Sim::new(&pod, &opts).expect("pod builds");
        for e in 0..sim.ends() {
            let c = &sim.ports[e].credits;
            assert!(!c.initial_release_complete(), "end {e}");
            assert_eq!(
                c.available(CreditTarget::Vc(Vc::default()), CreditClass::ReqCmd),
                0
            );
            assert!(sim.hot[e].owes, "end {e} has its release to send");
        }
        sim.run_to(5_000_000);
        for e in 0..sim.ends() {
            holds_grant(&sim, e, 300);
            assert!(!sim.hot[e].owes && sim.ports[e].owed.is_zero(), "end {e}");
            // 300 commands of each class need 5 fields of at most 63 (the data counts fit
            // in 2 of at most 255, and ride the same fields), on each of 4 VCs, then the
            // closing message; nothing else was returned on the idle pod.
            assert_eq!(sim.rxs[e].credit_fields, 4 * 5 + 1, "end {e}");
            assert_eq!(sim.rxs[e].tl_errors, 0, "end {e}");
        }
    }

    /// Credits travel in band: with one frame's worth of credits per link, thousands of
    /// operations complete only because the receivers' TL unpackers deliver flow-control
    /// fields (counted per end), and at the end every credit is back where it started.
    #[test]
    fn credits_return_in_band_through_shallow_buffers() {
        let pod = shallow();
        let opts = Options {
            duration_ps: 2_000_000,
            warmup_ps: 0,
            ..Options::default()
        };
        let sim = run_settled(&pod, &opts);
        all_credits_home(&sim);
        // Every link carried traffic both ways, so every receiving end applied returns.
        for e in 0..sim.ends() {
            assert!(sim.rxs[e].credit_fields > 0, "end {e} received no credits");
            assert_eq!(sim.rxs[e].tl_errors, 0, "end {e}");
        }
        let fields = sim.credit_fields();
        let ends = sim.ends() as u64;
        let r = sim.report(None);
        let s = &r.summary;
        assert!(s.drained && s.integrity.ok() && s.conservation.ok, "{s:?}");
        // Far more operations than one grant per link: credits cycled many times.
        assert!(
            s.conservation.ops_completed > 20 * ends,
            "{} operations",
            s.conservation.ops_completed
        );
        assert!(fields > s.conservation.ops_completed, "{fields} fields");
    }

    /// Credits in flight when a link goes down are replayed with the link's flits when it
    /// comes back (none lost, none applied twice), and credits withheld by a receiver go
    /// back when it releases them.
    #[test]
    fn credits_survive_a_link_flap_and_withholding() {
        let pod = shallow();
        let link = PortRef { switch: 0, port: 3 };
        let opts = Options {
            duration_ps: 2_000_000,
            warmup_ps: 0,
            faults: FaultPlan {
                faults: vec![
                    Fault {
                        at_ps: 300_000,
                        what: FaultKind::Withhold { accel: 5, vc: 0 },
                    },
                    Fault {
                        at_ps: 500_000,
                        what: FaultKind::LinkDown(link),
                    },
                    Fault {
                        at_ps: 500_000 + 30_000,
                        what: FaultKind::LinkUp(link),
                    },
                    Fault {
                        at_ps: 900_000,
                        what: FaultKind::Release { accel: 5, vc: 0 },
                    },
                ],
                ..FaultPlan::default()
            },
            ..Options::default()
        };
        let sim = run_settled(&pod, &opts);
        let lost = sim.fault.as_ref().map_or(0, |f| f.report.flits_lost);
        assert!(lost > 0, "the flap lost flits on the wire");
        all_credits_home(&sim);
        let r = sim.report(None);
        let s = &r.summary;
        assert!(s.drained && s.integrity.ok() && s.conservation.ok, "{s:?}");
        assert_eq!(s.integrity.failed, 0, "{:?}", s.integrity);
    }
}
