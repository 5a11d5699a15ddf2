//! The Ethernet-profile link endpoint (`spec-notes/link.md#ethernet-link`): TL flits for one
//! {destination, VC} are packed into one frame of up to 64 flits; each VC has its own PSN space
//! and go-back-N link-level retry (LLR) on PSN / acknowledged PSN; CBFC keeps the peer's
//! buffers from overflowing.
//!
//! ```text
//!  submit_tl_flit(dst, vc) ─▶ per-VC queue ─▶ WRR ─▶ frame (PSN, CBFC credits) ─▶ per-VC ring ─▶ wire
//!  wire ─▶ data: in order? deliver to TlSink, ack (coalesced) ; ahead: NACK once ; behind: ack
//!       ─▶ ACK/NACK: free ring (NACK: go back) ; CBFC frame: raise credit limits
//! ```

use super::eth_tx::{Acked, TxVc};
use super::TlSink;
use crate::flow::cbfc::{CbfcConfig, CbfcReceiver, CbfcSender, CbfcUpdate};
use crate::retry::LinkState;
use crate::time::{earliest, Duration, Instant};
use crate::timer::TimerTable;
use crate::wire::dl_stream::TL_FLIT_LEN;
use crate::wire::eth::{frame_len, Frame, MacScheme, Repr};
use crate::wire::eth_cbfc::{self, CreditEntry};
use crate::wire::eth_rel::{RelHeader, RelOp};
use crate::wire::{AccelId, Error, PartitionId, Psn, Vc};
use heapless::Deque;

const VCS: usize = 4;

/// Parameters of an [`EthLink`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthLinkConfig {
    /// This end's accelerator (the `src` of every frame).
    pub local: AccelId,
    /// The link partner (destination of ACK, NACK and CBFC frames).
    pub peer: AccelId,
    /// Partition of every frame.
    pub partition: PartitionId,
    /// Accelerator ↔ MAC mapping.
    pub scheme: MacScheme,
    /// Most TL flits per frame (1..=64, and ≤ `MAXF`).
    pub max_flits: usize,
    /// Acknowledge after this many in-order frames of a VC …
    pub ack_every: u16,
    /// … or this long after the first unacknowledged one.
    pub ack_delay: Duration,
    /// Go back on every VC when no ack progress for this long.
    pub retransmit_timeout: Duration,
    /// Retransmit timeouts in a row before `Fault`.
    pub retransmit_limit: u16,
    /// Credit-based flow control.
    pub cbfc: CbfcConfig,
}

impl Default for EthLinkConfig {
    fn default() -> Self {
        EthLinkConfig {
            local: AccelId::default(),
            peer: AccelId::default(),
            partition: PartitionId::default(),
            scheme: MacScheme::DEFAULT,
            max_flits: 64,
            ack_every: 4,
            ack_delay: Duration::from_ns(100),
            retransmit_timeout: Duration::from_us(10),
            retransmit_limit: 16,
            cbfc: CbfcConfig::default(),
        }
    }
}

/// The timers of an [`EthLink`] (CBFC's refresh timer lives in its receiver).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EthTimer {
    /// No ack progress while frames are unacknowledged.
    Retransmit = 0,
    /// A coalesced ack is due.
    AckDelay = 1,
}

/// Something the upper layer may want to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EthEvent {
    /// The link state changed.
    StateChanged {
        /// Old.
        from: LinkState,
        /// New.
        to: LinkState,
    },
    /// A VC went back and resends.
    Retransmit {
        /// VC.
        vc: Vc,
        /// Frames to resend.
        frames: u16,
    },
    /// Fatal: no ack progress after `retransmit_limit` timeouts. Leave with `reset`.
    Fault {
        /// Frames never acknowledged.
        undelivered: u32,
    },
}

/// Counters of an [`EthLink`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EthStats {
    /// Data frames sent for the first time.
    pub frames_sent: u64,
    /// Data frames sent again.
    pub frames_resent: u64,
    /// TL flits sent for the first time.
    pub flits_sent: u64,
    /// ACK frames sent.
    pub acks_sent: u64,
    /// NACK frames sent.
    pub nacks_sent: u64,
    /// CBFC frames sent.
    pub cbfc_sent: u64,
    /// Good frames received.
    pub frames_received: u64,
    /// Frames with a bad FCS.
    pub fcs_errors: u64,
    /// Frames that failed to parse otherwise.
    pub parse_errors: u64,
    /// Data frames delivered in order.
    pub delivered_frames: u64,
    /// TL flits delivered.
    pub delivered_flits: u64,
    /// Data frames already delivered (dropped).
    pub duplicates: u64,
    /// Data frames ahead of the expected PSN (dropped).
    pub out_of_order: u64,
    /// Acks (ACK, NACK or piggybacked) that freed frames.
    pub acks_accepted: u64,
    /// Acks repeating the last one.
    pub acks_duplicate: u64,
    /// Acks outside the window (ignored).
    pub acks_out_of_window: u64,
    /// NACK frames received.
    pub nacks_received: u64,
    /// Go-backs (NACK, timeout, link up).
    pub retransmits: u64,
    /// Retransmit timeouts.
    pub retransmit_timeouts: u64,
    /// Entries into `Fault`.
    pub faults: u64,
    /// Frames held back for lack of CBFC credits.
    pub credit_stalls: u64,
    /// In-order frames refused: the peer overran its CBFC credits (protocol errors).
    pub cbfc_overruns: u64,
    /// CBFC entries received.
    pub cbfc_updates_received: u64,
    /// Frames received while not `Up` (dropped).
    pub rx_while_down: u64,
    /// Events lost because the queue was full.
    pub events_dropped: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct RxVc {
    expected: u16,
    received_any: bool,
    since_ack: u16,
    ack_now: bool,
    nack_now: bool,
    nack_sent: bool,
}

/// An Ethernet-profile link end: per VC (4) a ring of `FRAMES` frames of up to `MAXF` TL flits
/// (≤ 64) and a queue of `TXQ` TL flits.
///
/// Sans-IO like the others: commands ([`EthLink::submit_tl_flit`], link up/down, `reset`),
/// inputs ([`EthLink::handle_frame`], [`EthLink::handle_timeout`]), outputs
/// ([`EthLink::poll_transmit`] one frame per call, [`EthLink::poll_timeout`],
/// [`EthLink::poll_event`]). `now` never decreases.
#[derive(Debug, Clone)]
pub struct EthLink<const FRAMES: usize, const MAXF: usize, const TXQ: usize> {
    cfg: EthLinkConfig,
    state: LinkState,
    txq: [Deque<(AccelId, [u8; TL_FLIT_LEN]), TXQ>; VCS],
    tx: [TxVc<FRAMES, MAXF>; VCS],
    rx: [RxVc; VCS],
    cbfc_tx: CbfcSender<VCS>,
    cbfc_rx: CbfcReceiver<VCS>,
    rr: usize,
    timers: TimerTable<2>,
    timeouts_in_row: u16,
    events: Deque<EthEvent, 8>,
    stats: EthStats,
}

fn vc_of(i: usize) -> Vc {
    Vc::from_bits_truncate(u8::try_from(i).unwrap_or(0))
}

fn inc(c: &mut u64) {
    *c = c.saturating_add(1);
}

impl<const FRAMES: usize, const MAXF: usize, const TXQ: usize> EthLink<FRAMES, MAXF, TXQ> {
    /// A link end in `Idle`; CBFC's refresh runs from `now`.
    pub fn new(cfg: EthLinkConfig, now: Instant) -> Self {
        EthLink {
            cfg,
            state: LinkState::Idle,
            txq: [const { Deque::new() }; VCS],
            tx: core::array::from_fn(|_| TxVc::new()),
            rx: [RxVc::default(); VCS],
            cbfc_tx: CbfcSender::new(cfg.cbfc),
            cbfc_rx: CbfcReceiver::new(cfg.cbfc, now),
            rr: 0,
            timers: TimerTable::new(),
            timeouts_in_row: 0,
            events: Deque::new(),
            stats: EthStats::default(),
        }
    }

    /// The link state (`Idle`, `Up` or `Fault`; there is no NOP exchange).
    pub fn state(&self) -> LinkState {
        self.state
    }
    /// Counters.
    pub fn stats(&self) -> &EthStats {
        &self.stats
    }
    /// CBFC credits available toward the peer on `vc`.
    pub fn credits(&self, vc: Vc) -> u32 {
        self.cbfc_tx.available(vc.get())
    }
    /// Room in `vc`'s TL flit queue.
    pub fn tx_room(&self, vc: Vc) -> usize {
        self.txq
            .get(usize::from(vc.get()))
            .map_or(0, |q| TXQ.saturating_sub(q.len()))
    }
    /// Nothing waits to be sent or acknowledged.
    pub fn is_idle(&self) -> bool {
        self.txq.iter().all(Deque::is_empty) && self.tx.iter().all(|t| t.buffered() == 0)
    }

    /// Queue a TL flit for accelerator `dst` on `vc`.
    ///
    /// # Errors
    /// [`super::TxError::QueueFull`], [`super::TxError::Fault`].
    pub fn submit_tl_flit(
        &mut self,
        dst: AccelId,
        vc: Vc,
        flit: &[u8; TL_FLIT_LEN],
    ) -> Result<(), super::TxError> {
        if self.state == LinkState::Fault {
            return Err(super::TxError::Fault);
        }
        let q = self
            .txq
            .get_mut(usize::from(vc.get()))
            .ok_or(super::TxError::QueueFull)?;
        q.push_back((dst, *flit))
            .map_err(|_| super::TxError::QueueFull)
    }

    fn set_state(&mut self, to: LinkState) {
        let from = self.state;
        if from != to {
            self.state = to;
            self.event(EthEvent::StateChanged { from, to });
        }
    }

    fn event(&mut self, e: EthEvent) {
        if self.events.is_full() {
            self.events.pop_front();
            inc(&mut self.stats.events_dropped);
        }
        let _ = self.events.push_back(e);
    }

    /// The PHY is up: resend everything unacknowledged, acknowledge and re-advertise credits.
    pub fn handle_link_up(&mut self, now: Instant) {
        if self.state != LinkState::Idle {
            return;
        }
        self.set_state(LinkState::Up);
        for i in 0..VCS {
            self.go_back(i);
            if let Some(r) = self.rx.get_mut(i) {
                r.ack_now = r.received_any;
                r.nack_sent = false;
            }
        }
        self.cbfc_rx.refresh_all();
        self.arm_retransmit(now);
    }

    /// The PHY went down: frames in flight are lost; nothing else is.
    pub fn handle_link_down(&mut self, _now: Instant) {
        if self.state == LinkState::Up {
            self.set_state(LinkState::Idle);
            self.timers.stop_all();
            self.timeouts_in_row = 0;
        }
    }

    /// Leave `Fault` (or any state) for `Idle` with everything empty and PSNs at 0; the peer
    /// must reset too.
    pub fn reset(&mut self, now: Instant) {
        *self = Self::new(self.cfg, now);
    }

    fn go_back(&mut self, i: usize) {
        if let Some(t) = self.tx.get_mut(i) {
            let frames = t.rewind();
            if frames > 0 {
                inc(&mut self.stats.retransmits);
                self.event(EthEvent::Retransmit {
                    vc: vc_of(i),
                    frames,
                });
            }
        }
    }

    fn unacked(&self) -> u32 {
        self.tx.iter().map(|t| u32::from(t.unacked())).sum()
    }

    fn arm_retransmit(&mut self, now: Instant) {
        if self.unacked() > 0 {
            self.timers.set(
                EthTimer::Retransmit as usize,
                now.saturating_add(self.cfg.retransmit_timeout),
            );
        } else {
            self.timers.stop(EthTimer::Retransmit as usize);
        }
    }

    fn on_ack(&mut self, now: Instant, i: usize, a: Psn) {
        let Some(t) = self.tx.get_mut(i) else {
            return;
        };
        match t.ack(a) {
            Acked::Freed(_) => {
                inc(&mut self.stats.acks_accepted);
                self.timeouts_in_row = 0;
                self.arm_retransmit(now);
            }
            Acked::Duplicate => inc(&mut self.stats.acks_duplicate),
            Acked::OutOfWindow => inc(&mut self.stats.acks_out_of_window),
        }
    }

    /// A frame arrived; TL flits of in-order data frames go to `sink`.
    pub fn handle_frame<S: TlSink + ?Sized>(&mut self, now: Instant, bytes: &[u8], sink: &mut S) {
        if self.state != LinkState::Up {
            inc(&mut self.stats.rx_while_down);
            return;
        }
        if eth_cbfc::is_cbfc(bytes) {
            match eth_cbfc::parse(bytes) {
                Ok(f) => {
                    inc(&mut self.stats.frames_received);
                    for e in f.entries() {
                        inc(&mut self.stats.cbfc_updates_received);
                        self.cbfc_tx.handle_update(&CbfcUpdate {
                            vc: e.vc,
                            limit: e.limit,
                        });
                    }
                }
                Err(Error::BadCrc { .. }) => inc(&mut self.stats.fcs_errors),
                Err(_) => inc(&mut self.stats.parse_errors),
            }
            return;
        }
        let repr = match Frame::new_checked(bytes).and_then(|f| Repr::parse(&f)) {
            Ok(r) => r,
            Err(Error::BadCrc { .. }) => {
                inc(&mut self.stats.fcs_errors);
                return;
            }
            Err(_) => {
                inc(&mut self.stats.parse_errors);
                return;
            }
        };
        inc(&mut self.stats.frames_received);
        let rel = repr.rel;
        let i = usize::from(rel.vc.get());
        match rel.op {
            RelOp::Data | RelOp::Ack => self.on_ack(now, i, rel.ack_psn),
            RelOp::Nack => {
                inc(&mut self.stats.nacks_received);
                self.on_ack(now, i, rel.ack_psn);
                self.go_back(i);
            }
        }
        if rel.op != RelOp::Data {
            return;
        }
        let Some(r) = self.rx.get_mut(i) else {
            return;
        };
        let d = rel.psn.0.wrapping_sub(r.expected) as i16;
        if d > 0 {
            inc(&mut self.stats.out_of_order);
            if !r.nack_sent {
                r.nack_now = true;
                r.nack_sent = true;
            }
            return;
        }
        if d < 0 {
            inc(&mut self.stats.duplicates);
            r.ack_now = r.received_any;
            return;
        }
        let vc = rel.vc.get();
        let credits = match self.cbfc_rx.handle_frame(vc, bytes.len()) {
            Ok(c) => c,
            Err(_) => {
                inc(&mut self.stats.cbfc_overruns);
                return;
            }
        };
        for f in repr.flits {
            sink.tl_flit(f);
        }
        // The sink consumed the flits: the buffer is free again.
        self.cbfc_rx.release(vc, credits);
        let n = u64::try_from(repr.flits.len()).unwrap_or(0);
        self.stats.delivered_flits = self.stats.delivered_flits.saturating_add(n);
        inc(&mut self.stats.delivered_frames);
        let Some(r) = self.rx.get_mut(i) else {
            return;
        };
        r.expected = r.expected.wrapping_add(1);
        r.received_any = true;
        r.nack_sent = false;
        r.since_ack = r.since_ack.saturating_add(1);
        if r.since_ack >= self.cfg.ack_every.max(1) {
            r.ack_now = true;
        } else {
            self.timers.set_if_stopped(
                EthTimer::AckDelay as usize,
                now.saturating_add(self.cfg.ack_delay),
            );
        }
    }

    /// Fire expired timers (spurious calls do nothing).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.cbfc_rx.handle_timeout(now);
        if self.timers.take_expired(EthTimer::AckDelay as usize, now) {
            for r in self.rx.iter_mut() {
                if r.since_ack > 0 {
                    r.ack_now = true;
                }
            }
        }
        if self.timers.take_expired(EthTimer::Retransmit as usize, now)
            && self.state == LinkState::Up
            && self.unacked() > 0
        {
            inc(&mut self.stats.retransmit_timeouts);
            self.timeouts_in_row = self.timeouts_in_row.saturating_add(1);
            if self.timeouts_in_row > self.cfg.retransmit_limit {
                inc(&mut self.stats.faults);
                let undelivered = self.tx.iter().map(|t| u32::from(t.buffered())).sum();
                self.timers.stop_all();
                self.set_state(LinkState::Fault);
                self.event(EthEvent::Fault { undelivered });
                return;
            }
            for i in 0..VCS {
                self.go_back(i);
            }
            self.arm_retransmit(now);
        }
    }

    /// The earliest timer deadline.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let cbfc = (self.state == LinkState::Up)
            .then(|| self.cbfc_rx.poll_timeout())
            .flatten();
        earliest(self.timers.next(), cbfc)
    }

    /// The next event, if any.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<EthEvent> {
        self.events.pop_front()
    }

    /// Write the next frame into `buf` (at least 4104 bytes for 64-flit frames); one per call.
    /// Order: credit updates, then ACK/NACK, then data (resends first, then new frames by
    /// round robin over the VCs that have credits).
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        if self.state != LinkState::Up {
            return None;
        }
        if let Some(n) = self.transmit_cbfc(buf) {
            return Some(n);
        }
        if let Some(n) = self.transmit_ack(buf) {
            return Some(n);
        }
        for k in 0..VCS {
            let i = (self.rr.wrapping_add(k)) % VCS;
            let needs_new = self.tx.get(i).is_some_and(|t| t.peek().is_none());
            if needs_new && !self.frame_new(i) {
                continue;
            }
            if let Some(n) = self.transmit_data(now, i, buf) {
                self.rr = i.wrapping_add(1) % VCS;
                return Some(n);
            }
        }
        None
    }

    fn transmit_cbfc(&mut self, buf: &mut [u8]) -> Option<usize> {
        let mut entries = [CreditEntry::default(); VCS];
        let mut n = 0;
        while n < VCS {
            let Some(u) = self.cbfc_rx.poll_update() else {
                break;
            };
            if let Some(e) = entries.get_mut(n) {
                *e = CreditEntry {
                    vc: u.vc,
                    limit: u.limit,
                };
            }
            n = n.saturating_add(1);
        }
        let e = entries.get(..n).filter(|e| !e.is_empty())?;
        let s = &self.cfg.scheme;
        let len = eth_cbfc::emit(buf, s.mac(self.cfg.peer), s.mac(self.cfg.local), e).ok()?;
        inc(&mut self.stats.cbfc_sent);
        Some(len)
    }

    fn transmit_ack(&mut self, buf: &mut [u8]) -> Option<usize> {
        let i = self.rx.iter().position(|r| r.nack_now || r.ack_now)?;
        let r = self.rx.get(i).copied()?;
        let op = if r.nack_now { RelOp::Nack } else { RelOp::Ack };
        let rel = self.rel(i, op);
        let n = Repr::new(&self.cfg.scheme, self.cfg.peer, rel, &[])
            .emit(buf)
            .ok()?;
        if let Some(r) = self.rx.get_mut(i) {
            r.nack_now = false;
            r.ack_now = false;
            r.since_ack = 0;
        }
        inc(if op == RelOp::Nack {
            &mut self.stats.nacks_sent
        } else {
            &mut self.stats.acks_sent
        });
        Some(n)
    }

    fn rel(&self, i: usize, op: RelOp) -> RelHeader {
        let expected = self.rx.get(i).map_or(0, |r| r.expected);
        RelHeader {
            op,
            vc: vc_of(i),
            src: self.cfg.local,
            partition: self.cfg.partition,
            psn: self.tx.get(i).map_or(Psn(0), |t| t.next_psn()),
            ack_psn: Psn(expected.wrapping_sub(1)),
        }
    }

    /// Build a new frame for VC `i` from its queue if credits allow; `false` if not.
    fn frame_new(&mut self, i: usize) -> bool {
        let max = self.cfg.max_flits.clamp(1, MAXF);
        let (Some(q), Some(t)) = (self.txq.get_mut(i), self.tx.get_mut(i)) else {
            return false;
        };
        let Some(&(dst, _)) = q.front() else {
            return false;
        };
        if !t.has_room() {
            return false;
        }
        let mut n = q.iter().take(max).take_while(|(d, _)| *d == dst).count();
        let vc = u8::try_from(i).unwrap_or(0);
        // As many flits as the credits allow (at least one).
        let avail = self.cbfc_tx.available(vc);
        while n > 1 && self.cbfc_tx.config().credits_for(frame_len(n)) > avail {
            n = n.saturating_sub(1);
        }
        if self.cbfc_tx.try_send(vc, frame_len(n)).is_err() {
            inc(&mut self.stats.credit_stalls);
            return false;
        }
        t.push(dst, |flits| {
            let mut k: usize = 0;
            for slot in flits.iter_mut().take(n) {
                if let Some((_, f)) = q.pop_front() {
                    *slot = f;
                    k = k.saturating_add(1);
                }
            }
            k
        })
    }

    fn transmit_data(&mut self, now: Instant, i: usize, buf: &mut [u8]) -> Option<usize> {
        let rel_ack = self.rel(i, RelOp::Data);
        let t = self.tx.get(i)?;
        let (psn, stored, resend) = t.peek()?;
        let flits = stored.flits.get(..stored.n)?;
        let rel = RelHeader { psn, ..rel_ack };
        let n = Repr::new(&self.cfg.scheme, stored.dst, rel, flits)
            .emit(buf)
            .ok()?;
        let count = u64::try_from(stored.n).unwrap_or(0);
        if let Some(t) = self.tx.get_mut(i) {
            t.mark_sent();
        }
        if resend {
            inc(&mut self.stats.frames_resent);
        } else {
            inc(&mut self.stats.frames_sent);
            self.stats.flits_sent = self.stats.flits_sent.saturating_add(count);
        }
        // The frame carried our cumulative ack for this VC.
        if let Some(r) = self.rx.get_mut(i) {
            r.ack_now = false;
            r.since_ack = 0;
        }
        self.timers.set_if_stopped(
            EthTimer::Retransmit as usize,
            now.saturating_add(self.cfg.retransmit_timeout),
        );
        Some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::eth::MAX_FRAME_LEN;
    use std::boxed::Box;
    use std::vec::Vec;

    type L = EthLink<4, 8, 64>;

    struct Got(Vec<[u8; TL_FLIT_LEN]>);
    impl TlSink for Got {
        fn tl_flit(&mut self, f: &[u8; TL_FLIT_LEN]) {
            self.0.push(*f);
        }
    }

    fn id(v: u16) -> AccelId {
        AccelId::new(v).unwrap()
    }

    fn link(local: u16, peer: u16, max_flits: usize) -> Box<L> {
        let cfg = EthLinkConfig {
            local: id(local),
            peer: id(peer),
            max_flits,
            retransmit_limit: 2,
            ..EthLinkConfig::default()
        };
        let mut l = Box::new(L::new(cfg, Instant::ZERO));
        l.handle_link_up(Instant::ZERO);
        l
    }

    fn frames(l: &mut L, now: Instant) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = [0u8; MAX_FRAME_LEN];
        while let Some(n) = l.poll_transmit(now, &mut buf) {
            out.push(buf[..n].to_vec());
        }
        out
    }

    fn op(f: &[u8]) -> Option<RelOp> {
        if eth_cbfc::is_cbfc(f) {
            return None;
        }
        Frame::new_checked(f)
            .and_then(|fr| Repr::parse(&fr))
            .map(|r| r.rel.op)
            .ok()
    }

    /// Exchange credit frames so both ends can send.
    fn pair() -> (Box<L>, Box<L>) {
        let (mut a, mut b) = (link(1, 2, 2), link(2, 1, 2));
        let t = Instant::ZERO;
        let mut sink = Got(Vec::new());
        for f in frames(&mut a, t) {
            b.handle_frame(t, &f, &mut sink);
        }
        for f in frames(&mut b, t) {
            a.handle_frame(t, &f, &mut sink);
        }
        assert_eq!(a.credits(Vc::new(0).unwrap()), 512);
        (a, b)
    }

    fn submit(l: &mut L, vc: u8, n: u8) {
        for i in 0..n {
            l.submit_tl_flit(id(2), Vc::new(vc).unwrap(), &[i + 1; TL_FLIT_LEN])
                .unwrap();
        }
    }

    #[test]
    fn frames_per_destination_and_coalesced_acks() {
        let (mut a, mut b) = pair();
        let t = Instant::ZERO;
        submit(&mut a, 0, 8); // 4 frames of 2 flits
        a.submit_tl_flit(id(3), Vc::new(0).unwrap(), &[9; TL_FLIT_LEN])
            .unwrap();
        let fs = frames(&mut a, t);
        assert_eq!(fs.len(), 4); // the ring holds 4 frames: the fifth waits
        let mut got = Got(Vec::new());
        for f in &fs {
            b.handle_frame(t, f, &mut got);
        }
        assert_eq!(got.0.len(), 8);
        let back = frames(&mut b, t);
        assert_eq!(back.iter().filter(|f| op(f) == Some(RelOp::Ack)).count(), 1);
        for f in &back {
            a.handle_frame(t, f, &mut got);
        }
        assert_eq!(a.stats().acks_accepted, 1);
        // Room again: the flit for accelerator 3 goes in a frame of its own.
        let fs = frames(&mut a, t);
        assert_eq!(fs.len(), 1);
        let r = Repr::parse(&Frame::new_checked(&fs[0][..]).unwrap()).unwrap();
        assert_eq!(r.dst_accel(&MacScheme::DEFAULT), Some(id(3)));
        assert_eq!(r.flits.len(), 1);
    }

    #[test]
    fn gap_gets_one_nack_and_go_back() {
        let (mut a, mut b) = pair();
        let t = Instant::ZERO;
        submit(&mut a, 1, 8);
        let fs = frames(&mut a, t);
        let mut got = Got(Vec::new());
        for f in fs.iter().skip(1) {
            b.handle_frame(t, f, &mut got); // PSN 0 lost
        }
        assert!(got.0.is_empty());
        assert_eq!(b.stats().out_of_order, 3);
        let back = frames(&mut b, t);
        assert_eq!(
            back.iter().filter(|f| op(f) == Some(RelOp::Nack)).count(),
            1
        );
        for f in &back {
            a.handle_frame(t, f, &mut got);
        }
        assert_eq!(a.stats().nacks_received, 1);
        let again = frames(&mut a, t);
        assert_eq!(again.len(), 4);
        assert_eq!(a.stats().frames_resent, 4);
        for f in &again {
            b.handle_frame(t, f, &mut got);
        }
        assert_eq!(got.0.len(), 8);
        // Duplicates are dropped and acknowledged.
        b.handle_frame(t, &again[0], &mut got);
        assert_eq!(b.stats().duplicates, 1);
        assert_eq!(got.0.len(), 8);
    }

    #[test]
    fn acks_outside_the_window_and_timeouts() {
        let (mut a, _) = pair();
        let t = Instant::ZERO;
        submit(&mut a, 2, 2);
        assert_eq!(frames(&mut a, t).len(), 1);
        let mut bogus = [0u8; MAX_FRAME_LEN];
        let rel = RelHeader {
            op: RelOp::Ack,
            vc: Vc::new(2).unwrap(),
            src: id(2),
            ack_psn: Psn(40),
            ..RelHeader::default()
        };
        let n = Repr::new(&MacScheme::DEFAULT, id(1), rel, &[])
            .emit(&mut bogus)
            .unwrap();
        a.handle_frame(t, &bogus[..n], &mut Got(Vec::new()));
        assert_eq!(a.stats().acks_out_of_window, 1);
        // No ack: go back twice, then Fault.
        for k in 1..=3u64 {
            let d = a.timers.get(EthTimer::Retransmit as usize).unwrap();
            a.handle_timeout(d);
            assert_eq!(a.stats().retransmit_timeouts, k);
        }
        assert_eq!(a.state(), LinkState::Fault);
        assert_eq!(a.stats().faults, 1);
        assert!(matches!(
            a.submit_tl_flit(id(2), Vc::new(0).unwrap(), &[1; TL_FLIT_LEN]),
            Err(super::super::TxError::Fault)
        ));
        a.reset(Instant::from_ps(1));
        assert_eq!(a.state(), LinkState::Idle);
    }

    #[test]
    fn down_drops_input_and_garbage_is_counted() {
        let (mut a, mut b) = pair();
        let t = Instant::ZERO;
        submit(&mut a, 0, 2);
        let fs = frames(&mut a, t);
        b.handle_link_down(t);
        b.handle_frame(t, &fs[0], &mut Got(Vec::new()));
        assert_eq!(b.stats().rx_while_down, 1);
        b.handle_link_up(t);
        b.handle_frame(t, &fs[0][..20], &mut Got(Vec::new()));
        let mut bad = fs[0].clone();
        bad[30] ^= 1;
        b.handle_frame(t, &bad, &mut Got(Vec::new()));
        assert_eq!((b.stats().parse_errors, b.stats().fcs_errors), (1, 1));
    }
}
