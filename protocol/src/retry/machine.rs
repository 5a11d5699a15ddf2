//! The behaviour of [`LinkRetry`]: getters, commands, inputs and outputs.

use super::*;

impl<const CAP: usize> LinkRetry<CAP> {
    /// A link end in `Idle` whose first flit will carry sequence number 1.
    pub fn new(cfg: Config) -> Self {
        LinkRetry {
            cfg,
            state: LinkState::Idle,
            tx: Tx::new(),
            rx: Rx::new(),
            timers: TimerTable::new(),
            events: Deque::new(),
            stats: Stats::default(),
            nop_pending: false,
            reply_pending: false,
            ack_timeouts_in_row: 0,
            probes_in_row: 0,
        }
    }

    // ---- getters ----

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }
    /// The link state.
    pub fn state(&self) -> LinkState {
        self.state
    }
    /// Every counter.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    /// Flits submitted and not yet acknowledged (sent or not).
    pub fn buffered(&self) -> u16 {
        self.tx.buffered()
    }
    /// Flits sent and not yet acknowledged.
    pub fn unacked(&self) -> u16 {
        self.tx.unacked()
    }
    /// Flits waiting to go on the wire (new, or to be resent after a replay).
    pub fn unsent(&self) -> u16 {
        self.tx.unsent()
    }
    /// [`LinkRetry::poll_transmit`] would write a flit now (given a buffer of at least
    /// [`FLIT_LEN`] bytes): a NOP during bring-up, a flit waiting to go on the wire (new or to
    /// be resent), a due Ack or Replay Request, or the Ack a restarting peer is owed. O(1);
    /// lets a caller sleep instead of polling when nothing would come out.
    pub fn has_transmit(&self) -> bool {
        match self.state {
            LinkState::Nop => self.nop_pending,
            LinkState::Up => {
                self.tx.unsent() > 0
                    || self.reply_pending
                    || self.rx.next_command(self.cfg.ack_interval).is_some()
            }
            LinkState::Idle | LinkState::Fault => false,
        }
    }
    /// [`LinkRetry::submit`] would accept a flit now.
    pub fn can_submit(&self) -> bool {
        self.state != LinkState::Fault && self.tx.has_room()
    }
    /// The replay-buffer slot the next submitted flit will be written into, with whatever
    /// it holds now; `None` when the buffer is full. Nothing reads it: it lets a caller
    /// that keeps many links have that memory brought into cache (a prefetch) before the
    /// flit is packed.
    pub fn next_submit_slot(&self) -> Option<&[u8; FLIT_LEN]> {
        self.tx.next_slot()
    }
    /// The sequence number the next submitted flit gets.
    pub fn next_submit_seq(&self) -> SeqNum {
        self.tx.next_submit_seq()
    }
    /// The sequence number the receiver delivers next.
    pub fn expected_seq(&self) -> SeqNum {
        self.rx.expected()
    }
    /// The receiver is ambiguous (accepts only flits with a full sequence number).
    pub fn is_ambiguous(&self) -> bool {
        self.rx.is_ambiguous()
    }
    /// The receiver waits for a replay it requested.
    pub fn awaiting_replay(&self) -> bool {
        self.rx.awaiting_replay()
    }
    /// Bad flits received in a row.
    pub fn crc_errors_in_row(&self) -> u16 {
        self.rx.bad_in_row()
    }
    /// Deadline of one timer.
    pub fn timer(&self, t: Timer) -> Option<Instant> {
        self.timers.get(t as usize)
    }

    // ---- commands ----

    /// Queue a payload flit for transmission. Its segment headers and payload are sent (and
    /// replayed) unchanged; its flit header and CRC bytes are ignored (retry writes them).
    ///
    /// # Errors
    /// [`SubmitError::Full`] when `CAP` flits are unacknowledged, [`SubmitError::Fault`].
    pub fn submit(&mut self, flit: &[u8; FLIT_LEN]) -> Result<SeqNum, SubmitError> {
        self.submit_with(|slot| slot.copy_from_slice(flit))
    }

    /// Like [`LinkRetry::submit`], but `fill` writes the flit straight into the replay
    /// buffer (no copy), e.g. through a `DlFlit` view and the DL packer. `fill` sees the
    /// previous contents of the slot.
    ///
    /// # Errors
    /// As [`LinkRetry::submit`]; `fill` is not called then.
    pub fn submit_with(
        &mut self,
        fill: impl FnOnce(&mut [u8; FLIT_LEN]),
    ) -> Result<SeqNum, SubmitError> {
        if self.state == LinkState::Fault {
            return Err(SubmitError::Fault);
        }
        self.tx.submit_with(fill).ok_or(SubmitError::Full)
    }

    /// The PHY is up (trained): `Idle` → `Nop`. Ignored in other states.
    pub fn handle_link_up(&mut self, now: Instant) {
        if self.state == LinkState::Idle {
            inc(&mut self.stats.link_ups);
            self.set_state(LinkState::Nop);
            self.nop_pending = true;
            self.timers.set(
                Timer::NopRetry as usize,
                now.saturating_add(self.cfg.nop_interval),
            );
        }
    }

    /// The PHY went down: `Nop`/`Up` → `Idle`. Flits in flight are lost; the replay
    /// buffer and sequence numbers are kept and everything unacknowledged is resent when
    /// the link is `Up` again. Timers stop (an outage is not an ack timeout).
    pub fn handle_link_down(&mut self, _now: Instant) {
        if matches!(self.state, LinkState::Nop | LinkState::Up) {
            inc(&mut self.stats.link_downs);
            self.set_state(LinkState::Idle);
            self.timers.stop_all();
            self.rx.link_down();
            self.nop_pending = false;
            self.reply_pending = false;
            self.ack_timeouts_in_row = 0;
            self.probes_in_row = 0;
        }
    }

    /// Leave `Fault` (or any state) for `Idle` with empty buffers; sequence numbers restart
    /// at 1, so the peer must be reset too (podlink: both ends reset on a link retrain).
    /// Counters are kept.
    pub fn reset(&mut self, _now: Instant) {
        self.tx.reset();
        self.rx = Rx::new();
        self.timers.stop_all();
        self.nop_pending = false;
        self.reply_pending = false;
        self.ack_timeouts_in_row = 0;
        self.probes_in_row = 0;
        self.set_state(LinkState::Idle);
    }

    /// End the link now: `Fault` ([`FaultReason::Aborted`]), as if retry had given up; leave
    /// it with [`LinkRetry::reset`]. Nothing in `Idle` or `Fault`.
    pub fn abort(&mut self) {
        if matches!(self.state, LinkState::Nop | LinkState::Up) {
            self.fault(FaultReason::Aborted);
        }
    }

    // ---- inputs ----

    /// A flit arrived. Returns the flit's body if it is the next payload flit in order.
    ///
    /// Never panics: a short, long or corrupt flit is counted and dropped.
    #[must_use = "a delivered flit is gone if ignored"]
    pub fn handle_flit<'a>(&mut self, now: Instant, flit: &'a [u8]) -> Option<Delivery<'a>> {
        if matches!(self.state, LinkState::Idle | LinkState::Fault) {
            inc(&mut self.stats.rx_while_down);
            return None;
        }
        let (header, content) = match flit::parse(flit, self.cfg.crc) {
            Ok(v) => v,
            Err(e) => {
                match e {
                    Error::BadCrc { .. } => inc(&mut self.stats.crc_errors),
                    Error::Truncated { .. } | Error::LengthMismatch(_) => {
                        inc(&mut self.stats.length_errors)
                    }
                    _ => inc(&mut self.stats.header_errors),
                }
                self.bad_flit(now);
                return None;
            }
        };
        inc(&mut self.stats.flits_received);
        if self.state == LinkState::Nop {
            self.enter_up(now);
        }
        match header {
            DlFlitHeader::Explicit(h) if !h.payload => {
                if h.op != 0 || h.flit_seq_no != 0 {
                    inc(&mut self.stats.header_errors);
                    self.bad_flit(now);
                    return None;
                }
                inc(&mut self.stats.nops_received);
                self.rx.on_good_unsequenced();
                // The peer is (re)starting: tell it where we are.
                self.reply_pending = true;
                None
            }
            DlFlitHeader::Explicit(h) => {
                let op = DlOp::from_raw(h.op);
                let seq = match (op, SeqNum::new(h.flit_seq_no)) {
                    (DlOp::Payload | DlOp::ReplayStart, Some(seq)) => seq,
                    _ => {
                        inc(&mut self.stats.header_errors);
                        self.bad_flit(now);
                        return None;
                    }
                };
                if op == DlOp::ReplayStart {
                    inc(&mut self.stats.replay_starts_received);
                }
                self.accept_seq(now, seq, content)
            }
            DlFlitHeader::Command(c) => {
                let Some(s) = SeqNum::new(c.ack_req_seq) else {
                    inc(&mut self.stats.header_errors);
                    self.bad_flit(now);
                    return None;
                };
                match DlOp::from_raw(c.op) {
                    DlOp::Ack => self.on_ack(now, s),
                    _ => self.on_replay_request(now, s),
                }
                if self.state != LinkState::Up {
                    return None;
                }
                if !c.payload {
                    self.rx.on_good_unsequenced();
                    return None;
                }
                if self.rx.awaiting_replay() {
                    // Only the explicit ReplayStart flit can end the wait.
                    inc(&mut self.stats.out_of_sequence);
                    self.rx.on_good_unsequenced();
                    return None;
                }
                match self.rx.resolve_lo(c.flit_seq_lo) {
                    Some(seq) => self.accept_seq(now, seq, content),
                    None => {
                        inc(&mut self.stats.unresolved);
                        self.rx.on_good_unsequenced();
                        if self.rx.request_replay(self.cfg.replay_request_copies) {
                            self.replay_requested(now);
                        }
                        None
                    }
                }
            }
        }
    }

    /// Fire every expired timer (spurious calls do nothing).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.timers.take_expired(Timer::AckTimeout as usize, now)
            && self.state == LinkState::Up
            && self.tx.unacked() > 0
        {
            inc(&mut self.stats.ack_timeouts);
            if self.ack_timeouts_in_row >= self.cfg.ack_timeout_replays {
                self.fault(FaultReason::AckTimeout);
                return;
            }
            self.ack_timeouts_in_row = self.ack_timeouts_in_row.saturating_add(1);
            self.timers.set(
                Timer::AckTimeout as usize,
                now.saturating_add(self.cfg.ack_timeout),
            );
            let from = self.tx.oldest();
            let flits = self.tx.rewind();
            self.replayed(from, flits, ReplayCause::AckTimeout);
            if self.state != LinkState::Up {
                return;
            }
        }
        if self.timers.take_expired(Timer::TailProbe as usize, now)
            && self.state == LinkState::Up
            && self.tx.unacked() > 0
        {
            inc(&mut self.stats.tail_probes);
            self.probes_in_row = self.probes_in_row.saturating_add(1);
            self.arm_probe(now, false);
            let from = self.tx.oldest();
            let flits = self.tx.rewind();
            self.replayed(from, flits, ReplayCause::TailProbe);
            if self.state != LinkState::Up {
                return;
            }
        }
        if self.timers.take_expired(Timer::AckCoalesce as usize, now) {
            self.rx.ack_soon();
        }
        if self.timers.take_expired(Timer::ReplayIgnore as usize, now) {
            self.tx.end_ignore();
        }
        if self
            .timers
            .take_expired(Timer::ReplayRequestRetry as usize, now)
            && self.state == LinkState::Up
            && self.rx.retry_replay_request(
                self.cfg.replay_request_copies,
                self.cfg.replay_request_retries,
            )
        {
            inc(&mut self.stats.replay_request_retries);
            self.arm_rr_retry(now);
        }
        if self.timers.take_expired(Timer::NopRetry as usize, now) && self.state == LinkState::Nop {
            self.nop_pending = true;
            self.timers.set(
                Timer::NopRetry as usize,
                now.saturating_add(self.cfg.nop_interval),
            );
        }
    }

    // ---- outputs ----

    /// The earliest timer deadline; call [`LinkRetry::handle_timeout`] then.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// The next event, if any.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Write the next flit to send into `buf` (at least [`FLIT_LEN`] bytes); returns its
    /// length, or `None` when there is nothing to send. One flit per call.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        if buf.len() < FLIT_LEN {
            inc(&mut self.stats.tx_buffer_too_small);
            return None;
        }
        match self.state {
            LinkState::Idle | LinkState::Fault => None,
            LinkState::Nop => {
                if !self.nop_pending {
                    return None;
                }
                let nop = DlFlitHeader::Explicit(DlExplicitHeader::default());
                let n = flit::emit(buf, &nop, None, self.cfg.crc).ok()?;
                self.nop_pending = false;
                inc(&mut self.stats.nops_sent);
                self.tx.count_flit();
                Some(n)
            }
            LinkState::Up => self.transmit_up(now, buf),
        }
    }

    fn transmit_up(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        let cfg = self.cfg;
        let next_lo = lo3(self.tx.next_seq());
        let out = self.tx.peek();
        // Priority: Replay Request copies, then a payload flit that must be explicit (an
        // ack can wait one flit; otherwise a steady stream of acks would starve it), then
        // a due ack (carrying the next payload flit if `piggyback`), then payload.
        let cmd = match self.rx.next_command(cfg.ack_interval) {
            Some(c @ RxCommand::ReplayRequest(_)) => Some(c),
            _ if out.is_some_and(|o| o.explicit) => None,
            c => c.or(self
                .reply_pending
                .then(|| RxCommand::Ack(self.rx.ack_value()))),
        };
        let (n, payload) = match (cmd, out) {
            (Some(c), Some(o)) if cfg.piggyback && !o.explicit => {
                let h = command_header(c, true, lo3(o.seq));
                (
                    flit::emit(buf, &h, Some(o.flit), cfg.crc).ok()?,
                    Some(o.resend),
                )
            }
            (Some(c), _) => {
                let h = command_header(c, false, next_lo);
                (flit::emit(buf, &h, None, cfg.crc).ok()?, None)
            }
            (None, Some(o)) => {
                let op = if o.replay_start {
                    DlOp::ReplayStart
                } else {
                    DlOp::Payload
                };
                let h = DlFlitHeader::Explicit(DlExplicitHeader {
                    op: op.raw(),
                    payload: true,
                    flit_seq_no: o.seq.get(),
                });
                (
                    flit::emit(buf, &h, Some(o.flit), cfg.crc).ok()?,
                    Some(o.resend),
                )
            }
            (None, None) => return None,
        };
        if let Some(c) = cmd {
            self.rx.command_sent(c);
            match c {
                RxCommand::Ack(_) => {
                    inc(&mut self.stats.acks_sent);
                    self.reply_pending = false;
                    self.timers.stop(Timer::AckCoalesce as usize);
                }
                RxCommand::ReplayRequest(_) => inc(&mut self.stats.replay_requests_sent),
            }
        }
        if let Some(resend) = payload {
            self.tx.mark_sent();
            if cmd.is_some() {
                inc(&mut self.stats.piggybacked);
            }
            inc(if resend {
                &mut self.stats.flits_resent
            } else {
                &mut self.stats.flits_sent
            });
            self.timers.set_if_stopped(
                Timer::AckTimeout as usize,
                now.saturating_add(self.cfg.ack_timeout),
            );
            self.arm_probe(now, true);
        }
        self.tx.count_flit();
        if !self.tx.ignoring() {
            self.timers.stop(Timer::ReplayIgnore as usize);
        }
        Some(n)
    }

    // ---- internals ----

    fn set_state(&mut self, to: LinkState) {
        let from = self.state;
        if from != to {
            self.state = to;
            self.push_event(Event::StateChanged { from, to });
        }
    }

    fn push_event(&mut self, e: Event) {
        if self.events.is_full() {
            self.events.pop_front();
            inc(&mut self.stats.events_dropped);
        }
        let _ = self.events.push_back(e);
    }

    fn enter_up(&mut self, now: Instant) {
        self.set_state(LinkState::Up);
        self.timers.stop(Timer::NopRetry as usize);
        self.nop_pending = false;
        let from = self.tx.oldest();
        let flits = self.tx.link_up_rewind();
        if flits > 0 {
            inc(&mut self.stats.replays);
            self.push_event(Event::Replaying {
                from,
                flits,
                cause: ReplayCause::LinkUp,
            });
            self.timers.set(
                Timer::AckTimeout as usize,
                now.saturating_add(self.cfg.ack_timeout),
            );
            self.probes_in_row = 0;
            self.arm_probe(now, false);
        }
        self.rx.link_up();
    }

    fn fault(&mut self, reason: FaultReason) {
        inc(&mut self.stats.faults);
        self.timers.stop_all();
        self.set_state(LinkState::Fault);
        self.push_event(Event::Fault {
            reason,
            undelivered: self.tx.buffered(),
        });
    }

    /// A flit that may have hidden a sequence number (bad CRC, bad length, bad header).
    fn bad_flit(&mut self, now: Instant) {
        if self.state != LinkState::Up {
            return;
        }
        let (ambiguous, requested) = self
            .rx
            .on_bad_crc(self.cfg.ambiguous_threshold, self.cfg.replay_request_copies);
        if ambiguous {
            inc(&mut self.stats.ambiguous_entries);
            self.push_event(Event::Ambiguous {
                expected: self.rx.expected(),
            });
        }
        if requested {
            self.replay_requested(now);
        }
    }

    fn accept_seq<'a>(
        &mut self,
        now: Instant,
        seq: SeqNum,
        flit: &'a [u8; FLIT_LEN],
    ) -> Option<Delivery<'a>> {
        match self.rx.on_seq_flit(seq, self.cfg.replay_request_copies) {
            SeqOutcome::InOrder => {
                inc(&mut self.stats.delivered);
                self.timers.stop(Timer::ReplayRequestRetry as usize);
                if self.rx.since_ack() >= self.cfg.ack_interval.max(1) {
                    self.timers.stop(Timer::AckCoalesce as usize);
                } else {
                    self.timers.set_if_stopped(
                        Timer::AckCoalesce as usize,
                        now.saturating_add(self.cfg.ack_delay),
                    );
                }
                Some(Delivery { seq, flit })
            }
            SeqOutcome::Duplicate => {
                inc(&mut self.stats.duplicates);
                None
            }
            SeqOutcome::Gap { requested } => {
                inc(&mut self.stats.out_of_sequence);
                if requested {
                    self.replay_requested(now);
                }
                None
            }
        }
    }

    fn replay_requested(&mut self, now: Instant) {
        inc(&mut self.stats.replay_requests_issued);
        self.push_event(Event::ReplayRequested {
            from: self.rx.expected(),
        });
        self.arm_rr_retry(now);
    }

    fn arm_rr_retry(&mut self, now: Instant) {
        if let Some(d) = self.cfg.replay_request_retry {
            self.timers
                .set(Timer::ReplayRequestRetry as usize, now.saturating_add(d));
        }
    }

    fn progress(&mut self, now: Instant) {
        self.ack_timeouts_in_row = 0;
        self.probes_in_row = 0;
        if self.tx.unacked() > 0 {
            self.timers.set(
                Timer::AckTimeout as usize,
                now.saturating_add(self.cfg.ack_timeout),
            );
            self.arm_probe(now, false);
        } else {
            self.timers.stop(Timer::AckTimeout as usize);
            self.timers.stop(Timer::TailProbe as usize);
        }
    }

    /// Arm the tail-loss probe: `tail_probe` doubled per probe in a row (at most 2^16
    /// times), only if stopped when `if_stopped`.
    fn arm_probe(&mut self, now: Instant, if_stopped: bool) {
        let Some(base) = self.cfg.tail_probe else {
            return;
        };
        let wait = Duration::from_ps(
            base.as_ps()
                .saturating_mul(1u64 << self.probes_in_row.min(16)),
        );
        let at = now.saturating_add(wait);
        if if_stopped {
            self.timers.set_if_stopped(Timer::TailProbe as usize, at);
        } else {
            self.timers.set(Timer::TailProbe as usize, at);
        }
    }

    fn on_ack(&mut self, now: Instant, a: SeqNum) {
        inc(&mut self.stats.acks_received);
        match self.tx.handle_ack(a) {
            AckOutcome::Accepted { .. } => self.progress(now),
            AckOutcome::Duplicate => inc(&mut self.stats.acks_duplicate),
            AckOutcome::OutOfWindow => inc(&mut self.stats.acks_out_of_window),
        }
    }

    fn on_replay_request(&mut self, now: Instant, s: SeqNum) {
        inc(&mut self.stats.replay_requests_received);
        match self
            .tx
            .handle_replay_request(s, self.cfg.replay_ignore_flits)
        {
            RrOutcome::Rewound { freed, resend } => {
                if freed > 0 {
                    self.progress(now);
                }
                self.timers.set(
                    Timer::ReplayIgnore as usize,
                    now.saturating_add(
                        self.cfg
                            .flit_time
                            .saturating_mul(u64::from(self.cfg.replay_ignore_flits)),
                    ),
                );
                if resend == 0 {
                    // The peer has everything we sent: nothing to replay; the next flit is
                    // still explicit and marked ReplayStart, which re-anchors it.
                    inc(&mut self.stats.empty_replays);
                } else {
                    self.replayed(s, resend, ReplayCause::ReplayRequest);
                }
            }
            RrOutcome::Ignored => inc(&mut self.stats.replay_requests_ignored),
            RrOutcome::OutOfWindow => inc(&mut self.stats.replay_requests_out_of_window),
        }
    }

    fn replayed(&mut self, from: SeqNum, flits: u16, cause: ReplayCause) {
        inc(&mut self.stats.replays);
        self.push_event(Event::Replaying { from, flits, cause });
        if self.tx.replays_since_progress() > self.cfg.replay_limit {
            self.fault(FaultReason::ReplayLimit);
        }
    }
}

fn lo3(s: SeqNum) -> u8 {
    u8::try_from(s.get() & 7).unwrap_or(0)
}

pub(super) fn command_header(c: RxCommand, payload: bool, flit_seq_lo: u8) -> DlFlitHeader {
    let (op, s) = match c {
        RxCommand::Ack(s) => (DlOp::Ack, s),
        RxCommand::ReplayRequest(s) => (DlOp::ReplayRequest, s),
    };
    DlFlitHeader::Command(DlCommandHeader {
        op: op.raw(),
        payload,
        ack_req_seq: s.get(),
        flit_seq_lo,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// The queue keeps the newest `EVENT_CAP` events and counts the ones it drops.
    #[test]
    fn the_event_queue_keeps_the_newest_and_counts_what_it_drops() {
        let mut r = LinkRetry::<4>::new(Config::default());
        assert_eq!(r.poll_event(), None);
        let ev = |i: u16| Event::ReplayRequested {
            from: SeqNum::new(i + 1).unwrap_or(SeqNum::FIRST),
        };
        let n = EVENT_CAP as u16 + 5;
        for i in 0..n {
            r.push_event(ev(i));
        }
        assert_eq!(r.stats().events_dropped, 5);
        let got: Vec<_> = core::iter::from_fn(|| r.poll_event()).collect();
        let want: Vec<_> = (5..n).map(ev).collect();
        assert_eq!(got, want);
        r.push_event(ev(0));
        assert_eq!(r.poll_event(), Some(ev(0)));
        assert_eq!(r.poll_event(), None);
    }
}
