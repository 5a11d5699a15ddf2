//! Moving flits and frames: transmitters, wires, receivers, control messages and switch
//! pipelines (`spec-notes/simulator.md#links`).

use super::port::{flow_of, vc_of, FrameSlab};
use super::switch::frame_cost;
use super::trace::Mark;
use super::{Ctl, Ev, Owner, Sim};
use podlink_protocol::link::TlSink;
use podlink_protocol::time::Instant;
use podlink_protocol::txn::Flow;
use podlink_protocol::wire::dl_stream::TL_FLIT_LEN;
use podlink_protocol::wire::{TlItem, TlPushError, TlUnpacker};
use podlink_switch::header::Header;
use std::collections::VecDeque;

/// Data half-flits kept in a TL packer before a DL flit is packed (about one DL flit).
const PREFILL_HALVES: usize = 20;

/// The link's sink: TL flits into the TL unpacker, transfers into owned frames.
struct Sink<'a> {
    tlu: &'a mut TlUnpacker,
    frames: &'a mut FrameSlab,
    batch: &'a mut Vec<u32>,
    ingress: u32,
    tl: u64,
    errors: u64,
}

impl TlSink for Sink<'_> {
    fn tl_flit(&mut self, flit: &[u8; TL_FLIT_LEN]) {
        self.tl += 1;
        let _ = self.tlu.handle_flit(flit);
        loop {
            match self.tlu.poll_item() {
                Ok(Some(TlItem::Transfer(t))) => {
                    let h = self.frames.alloc_transfer(&t, self.ingress);
                    self.batch.push(h);
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

impl Sim {
    /// Wake end `e`'s transmitter: at once if its wire is free, else when it frees.
    pub(crate) fn kick(&mut self, e: u32, now: u64) {
        let key = self.sched.current_key();
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
        if self.source_waiting(e) || self.txs[e as usize].link.has_transmit() {
            self.kick(e, now);
            return;
        }
        let key = self.sched.current_key();
        if self.hot[e as usize].deferred.is_some_and(|d| d > key) {
            return; // a deferred wake-up still ahead: this one merges with it
        }
        let at = self.hot[e as usize].busy_until.max(now);
        let seq = self.sched.reserve_seq();
        self.hot[e as usize].deferred = Some((at, seq));
    }

    /// Whether end `e` has TL data waiting to be sent: in its link's queue, its TL packer,
    /// its overflow queue, or its source (switch queue, requester, completer).
    pub(crate) fn source_waiting(&self, e: u32) -> bool {
        let h = &self.hot[e as usize];
        debug_assert_eq!(h.tx_backlog, self.tx_backlog_now(e), "end {e}");
        if h.tx_backlog {
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
        // The source, overflow queue and TL packer are looked at only if they may hold
        // something (flags in EndHot), so that a transmitter with nothing but link work to do
        // does not touch them.
        let filled = self.prefill(e, now);
        let fed = filled || self.hot[ei].tl_busy;
        if fed {
            self.feed_link(e);
        }
        let to_accel = matches!(self.owner[self.peer[ei] as usize], Owner::Accel { .. });
        let at = now + self.t.link + if to_accel { self.t.endpoint } else { 0 };
        let tx = &mut self.txs[ei];
        let wire = &mut self.wires[ei];
        let packed_before = tx.link.stats().tl_packed;
        let slot = self.flits.take();
        let bytes = self.flits.get_mut(slot);
        let sent = tx
            .link
            .poll_transmit(Instant::from_ps(now), bytes)
            .is_some();
        if sent {
            wire.corrupt(bytes);
        } else {
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
            if self.hot[ei].stall_since.is_none() && self.source_waiting(e) {
                self.hot[ei].stall_since = Some(now);
            }
            return;
        }
        let ser = self.t.ser;
        let tx = &mut self.txs[ei];
        let wire = &mut self.wires[ei];
        let h = &mut self.hot[ei];
        if let Some(s) = h.stall_since.take() {
            h.stall_ps += now - s;
        }
        let first = wire.flight.is_empty();
        wire.flight.push(at, slot);
        h.busy_until = now + ser;
        h.busy_ps += ser;
        let packed = tx.link.stats().tl_packed - packed_before;
        if now >= self.inject_from && now < self.inject_until {
            h.busy_window_ps += ser;
            h.tl_window += packed;
        }
        // A DL flit that started many TL flits may end inside one, whose rest must follow.
        let maybe_carrying = packed >= 6;
        let more = maybe_carrying || tx.link.retry().unsent() > 0;
        if first {
            self.schedule(at, Ev::Arrive(e));
        }
        if let Owner::Accel { a, .. } = self.owner[ei] {
            if !self.accels.backlog[a as usize].is_empty() {
                self.drain_backlog(a, now);
            }
        }
        // Keep going while data may follow; otherwise sleep until the next kick (new data,
        // credits, an ack that opens the replay window, a timer, a received flit).
        if more || self.source_waiting(e) {
            self.kick_lazily(e, now);
        }
    }

    /// Move TL flits from end `e`'s TL packer into its link while the link has room.
    fn feed_link(&mut self, e: u32) {
        let tx = &mut self.txs[e as usize];
        let mut flit = [0u8; TL_FLIT_LEN];
        while tx.link.tx_room() > 0 && !tx.tl.is_idle() {
            if tx.tl.poll_flit(&mut flit).is_none() {
                break;
            }
            if tx.link.submit_tl_flit(&flit).is_ok() {
                self.hot[e as usize].tl_submitted += 1;
            } else {
                self.stats.invalid_frames += 1;
            }
        }
    }

    /// Schedule a `Timer` event for end `e`'s link deadline if it is earlier than the one
    /// already scheduled. Requester deadlines are not timers: the periodic sweep
    /// (`Sim::on_sweep`) handles them. (A `Timer` armed for an expired requester deadline
    /// that only the sweep clears re-armed itself at the same instant forever.)
    pub(crate) fn arm_timer(&mut self, e: u32, now: u64) {
        if let Some(t) = self.txs[e as usize].link.poll_timeout() {
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
        let tx = &mut self.txs[e as usize];
        tx.link.handle_timeout(Instant::from_ps(now));
        while tx.link.poll_event().is_some() {}
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
                    // Nothing to send; owed credits are returned as they are released, so
                    // this returns nothing either (kept for the invariant's sake).
                    self.flush_credits(e, now);
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
                    let frames = &self.frames;
                    let got = sw
                        .fwd
                        .pull(Instant::from_ps(now), p, &mut self.ports[range], |h| {
                            frames
                                .get(h)
                                .map_or((podlink_protocol::txn::Flow::Request, 4), frame_cost)
                        });
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
        if pulled {
            self.wake_blocked(s, now);
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
        let pushed = tx.tl.push(&TlItem::Transfer(f.transfer()));
        match pushed {
            Ok(()) => {
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

    /// The receiver of frame `h` released its buffer: return the credits to the sender.
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
        let port = &mut self.ports[r as usize];
        port.owed.give(flow, vc, 1, beats);
        if !port.return_in_flight && port.owes() {
            let c = port.take_owed();
            port.return_in_flight = true;
            self.ctl_send(r, Ctl::Credits(c), now);
        }
    }

    /// Return the credits end `r` owes its peer, unless a return is already travelling
    /// (then they go with the next one).
    pub(crate) fn flush_credits(&mut self, r: u32, now: u64) {
        let port = &mut self.ports[r as usize];
        if !port.return_in_flight && port.owes() {
            let c = port.take_owed();
            port.return_in_flight = true;
            self.ctl_send(r, Ctl::Credits(c), now);
        }
    }

    /// Send a control message from end `r` to its peer (one flit latency, out of band).
    pub(crate) fn ctl_send(&mut self, r: u32, msg: Ctl, now: u64) {
        let at = now + self.t.link;
        let q = &mut self.rxs[r as usize].ctl_out;
        let first = q.is_empty();
        q.push_back((at, msg));
        if first {
            self.schedule(at, Ev::Ctl(r));
        }
    }

    pub(crate) fn on_ctl(&mut self, r: u32, now: u64) {
        let ri = r as usize;
        // A credit return travels in the link's flits: it waits while the link is down
        // (the link-up schedules it again), and a stale event finds it not yet due.
        match self.rxs[ri].ctl_out.front() {
            None => return,
            Some(_) if !self.hot[ri].phy_up => return,
            Some(&(at, _)) if at > now => {
                self.schedule(at, Ev::Ctl(r));
                return;
            }
            Some(_) => {}
        }
        let Some((_, msg)) = self.rxs[ri].ctl_out.pop_front() else {
            return;
        };
        if let Some(&(at, _)) = self.rxs[ri].ctl_out.front() {
            self.schedule(at, Ev::Ctl(r));
        }
        let e = self.peer[ri];
        let ei = e as usize;
        let Ctl::Credits(c) = msg;
        self.ports[ei].credits.add(&c);
        self.ports[ri].return_in_flight = false;
        if self.ports[ri].owes() {
            let c = self.ports[ri].take_owed();
            self.ports[ri].return_in_flight = true;
            self.ctl_send(r, Ctl::Credits(c), now);
        }
        if let Owner::Switch { s, p } = self.owner[ei] {
            let sw = &mut self.switches[s as usize];
            let range = sw.base as usize..(sw.base + sw.n) as usize;
            sw.fwd.refresh(p, &self.ports[range]);
        }
        if self.source_waiting(e) {
            self.kick(e, now);
        }
    }

    pub(crate) fn on_arrive(&mut self, e: u32, now: u64) {
        let ei = e as usize;
        let r = self.peer[ei];
        let ri = r as usize;
        let mut batch = std::mem::take(&mut self.batch);
        let rx = &mut self.rxs[ri];
        let mut sink = Sink {
            tlu: &mut rx.tlu,
            frames: &mut self.frames,
            batch: &mut batch,
            ingress: r,
            tl: 0,
            errors: 0,
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
        let next = wire.flight.front().map(|n| n.at);
        rx.tl_delivered += sink.tl;
        rx.tl_errors += sink.errors;
        if let Some(at) = next {
            self.schedule(at, Ev::Arrive(e));
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
            let Some(&(_, h)) = q.front() else {
                break;
            };
            let Some(f) = self.frames.get(h) else {
                q.pop_front();
                continue;
            };
            let sw = &mut self.switches[s as usize];
            if !sw.fwd.has_room(&Header::from_tl(&f.field)) {
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
            let res = sw
                .fwd
                .forward(Instant::from_ps(now), p, h, f, &mut self.ports[range]);
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
