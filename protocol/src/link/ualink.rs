//! The UALink-profile link endpoint: TL flits in, DL flits out, and back.
//!
//! ```text
//!  submit_tl_flit ─▶ txq ─┐                                   ┌─▶ TlSink::tl_flit
//!                         ├─▶ DlPacker ─▶ LinkRetry ─▶ wire ─▶ LinkRetry ─▶ DlUnpacker ─┤
//!  Control (DL msgs) ─────┘      (fills a replay slot)                                  └─▶ Control / TlSink::dl_message
//! ```

use super::control::{
    ChannelCommand, ChannelResponse, Control, ControlConfig, ControlError, ControlEvent,
};
use crate::retry::{self, LinkRetry, LinkState, FLIT_LEN};
use crate::time::{earliest, Duration, Instant};
use crate::wire::dl_flit::DlFlit;
use crate::wire::dl_msg::DlMessage;
use crate::wire::dl_stream::{DlPacker, DlUnpacker, PackSource, UnpackSink, TL_FLIT_LEN};
use core::fmt;
use heapless::Deque;

/// Parameters of a [`UaLink`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UaLinkConfig {
    /// Link-level retry.
    pub retry: retry::Config,
    /// DL control messages.
    pub control: ControlConfig,
    /// Hold limit (podlink's addition; [`Duration::MAX`], the default: none): the longest a
    /// TL flit may stay in the link, from [`UaLink::submit_tl_flit`] until the peer
    /// acknowledges the DL flit that carries it. A link that would hold one longer ends in
    /// `Fault` ([`retry::FaultReason::Aborted`]) instead of sending it again, so that what it
    /// still holds is dropped by the reset that follows rather than delivered late: a link
    /// kept up but slowed by bit errors otherwise holds requests for as long as its replays
    /// take, after their requesters gave them up and sent their successors another way
    /// (`spec-notes/link.md#hold-limit`). Enforced with the crate feature `hold-limit` only
    /// (the switch firmware leaves it out, for its `.text` budget); without it the link
    /// holds flits for as long as retry goes on.
    pub hold_limit: Duration,
}

impl Default for UaLinkConfig {
    fn default() -> Self {
        UaLinkConfig {
            retry: retry::Config::default(),
            control: ControlConfig::default(),
            hold_limit: Duration::MAX,
        }
    }
}

/// Where a [`UaLink`] delivers what it receives.
pub trait TlSink {
    /// A TL flit (NOP padding flits are not delivered).
    fn tl_flit(&mut self, flit: &[u8; TL_FLIT_LEN]);
    /// A DL message the link does not handle itself (UART, vendor-defined).
    fn dl_message(&mut self, msg: DlMessage) {
        let _ = msg;
    }
}

/// Something the upper layer may want to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UaLinkEvent {
    /// From link-level retry (state changes, replays, Fault).
    Retry(retry::Event),
    /// From the DL control machine.
    Control(ControlEvent),
}

/// Counters of a [`UaLink`] (the parts keep their own: [`UaLink::retry`],
/// [`UaLink::control`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UaLinkStats {
    /// TL flits accepted from the upper layer.
    pub tl_submitted: u64,
    /// TL flits packed into DL flits.
    pub tl_packed: u64,
    /// NOP TL flits padded in.
    pub tl_padding: u64,
    /// DL flits packed (submitted to retry).
    pub dl_flits_packed: u64,
    /// TL flits delivered to the sink.
    pub tl_delivered: u64,
    /// DL messages delivered (to control or the sink).
    pub messages_received: u64,
    /// DL messages the packer could not emit (dropped).
    pub messages_dropped: u64,
    /// Delivered DL flits the unpacker rejected (the stream re-synchronises).
    pub unpack_errors: u64,
}

/// Why the link refused a TL flit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TxError {
    /// The TL flit queue is full: retry after `poll_transmit`.
    QueueFull,
    /// The link is in `Fault`.
    Fault,
}

impl fmt::Display for TxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TxError::QueueFull => "TL flit queue full",
            TxError::Fault => "link in Fault",
        })
    }
}

impl core::error::Error for TxError {}

/// A UALink-profile link end: `CAP` DL flits of replay buffer (≤ 255), `TXQ` TL flits of
/// send queue.
///
/// Sans-IO, like its parts: commands ([`UaLink::submit_tl_flit`], link up/down), inputs
/// ([`UaLink::handle_flit`], [`UaLink::handle_timeout`]) and outputs
/// ([`UaLink::poll_transmit`] one DL flit per call, [`UaLink::poll_timeout`],
/// [`UaLink::poll_event`]). `now` never decreases. A DL flit is packed only when retry has
/// nothing else to send, so TL flits that arrive meanwhile share it (less NOP padding).
// Memory layout (`repr(C)`: declaration order): the small state every flit touches first and
// together, the buffers (TL flit queue, replay buffer, DL message queue) after it, each behind
// its own small state, so that a flit sent or received touches few cache lines.
#[derive(Debug, Clone)]
#[repr(C)]
pub struct UaLink<const CAP: usize, const TXQ: usize> {
    state: LinkState,
    stats: UaLinkStats,
    packer: DlPacker,
    unpacker: DlUnpacker,
    control: Control,
    txq: Deque<[u8; TL_FLIT_LEN], TXQ>,
    retry: LinkRetry<CAP>,
    #[cfg(feature = "hold-limit")]
    hold: Hold<CAP, TXQ>,
}

/// The times at which a link took what it holds ([`UaLinkConfig::hold_limit`]): two rings
/// that follow the TL flit queue and retry's buffer (both first in, first out), so that
/// nothing is popped: an entry is dead once its queue or buffer has moved past it.
#[cfg(feature = "hold-limit")]
#[derive(Debug, Clone)]
struct Hold<const CAP: usize, const TXQ: usize> {
    limit: Duration,
    /// When each TL flit in the queue was submitted; the queue's front is at `front`.
    queued: [Instant; TXQ],
    front: usize,
    /// Per DL flit in retry's buffer: when the oldest TL flit (or part of one) it carries
    /// was submitted, or when it was packed if that is earlier; the next one packed goes
    /// at `next`.
    packed: [Instant; CAP],
    next: usize,
    /// When the TL flit the packer last started was submitted (its rest may go in the
    /// next DL flit).
    last: Instant,
    /// No TL flit the link holds reaches the limit before this (a lower bound, raised when
    /// reached: acknowledgements only make the true time later; `Instant::NEVER`: nothing
    /// held).
    due: Instant,
}

#[cfg(feature = "hold-limit")]
impl<const CAP: usize, const TXQ: usize> Hold<CAP, TXQ> {
    /// The submission time of the oldest TL flit the link holds, given the DL flits in
    /// retry's buffer and the TL flits queued (DL flits carry older ones than the queue).
    #[inline]
    fn oldest(&self, buffered: u16, queued: usize) -> Option<Instant> {
        let b = usize::from(buffered);
        if b > 0 && b <= CAP {
            self.packed
                .get(ring(self.next.wrapping_add(CAP).wrapping_sub(b), CAP))
                .copied()
        } else if queued > 0 {
            self.queued.get(self.front).copied()
        } else {
            None
        }
    }

    fn clear(&mut self) {
        self.front = 0;
        self.next = 0;
        self.due = Instant::NEVER;
    }

    /// Something taken at `t` is held now.
    #[inline]
    fn holds(&mut self, t: Instant) {
        self.due = self.due.min(t.saturating_add(self.limit));
    }
}

/// `i` modulo `n` (0 for `n` = 0): a place in a ring of `n`.
#[cfg(feature = "hold-limit")]
#[inline]
fn ring(i: usize, n: usize) -> usize {
    i.checked_rem(n).unwrap_or(0)
}

struct Source<'a, const TXQ: usize> {
    txq: &'a mut Deque<[u8; TL_FLIT_LEN], TXQ>,
    control: &'a mut Control,
}

impl<const TXQ: usize> PackSource for Source<'_, TXQ> {
    fn next_tl_flit(&mut self, out: &mut [u8; TL_FLIT_LEN]) -> bool {
        match self.txq.pop_front() {
            Some(f) => {
                *out = f;
                true
            }
            None => false,
        }
    }
    fn peek_message(&self) -> Option<&DlMessage> {
        self.control.peek_message()
    }
    fn pop_message(&mut self) {
        self.control.pop_message();
    }
}

struct Sink<'a, S: TlSink + ?Sized> {
    user: &'a mut S,
    control: &'a mut Control,
    now: Instant,
    tl: u64,
    messages: u64,
}

impl<S: TlSink + ?Sized> UnpackSink for Sink<'_, S> {
    fn tl_flit(&mut self, flit: &[u8; TL_FLIT_LEN]) {
        self.tl = self.tl.saturating_add(1);
        self.user.tl_flit(flit);
    }
    fn message(&mut self, msg: DlMessage) {
        self.messages = self.messages.saturating_add(1);
        if let Some(m) = self.control.handle_message(self.now, msg) {
            self.user.dl_message(m);
        }
    }
}

impl<const CAP: usize, const TXQ: usize> UaLink<CAP, TXQ> {
    /// A link end in `Idle`.
    pub fn new(cfg: UaLinkConfig) -> Self {
        UaLink {
            retry: LinkRetry::new(cfg.retry),
            control: Control::new(cfg.control),
            packer: DlPacker::new(),
            unpacker: DlUnpacker::new(),
            txq: Deque::new(),
            state: LinkState::Idle,
            stats: UaLinkStats::default(),
            #[cfg(feature = "hold-limit")]
            hold: Hold {
                limit: cfg.hold_limit,
                queued: [Instant::ZERO; TXQ],
                front: 0,
                packed: [Instant::ZERO; CAP],
                next: 0,
                last: Instant::ZERO,
                due: Instant::NEVER,
            },
        }
    }

    // ---- getters ----

    /// Link-level retry (state, counters).
    pub fn retry(&self) -> &LinkRetry<CAP> {
        &self.retry
    }
    /// The DL control machine (peer identity, counters).
    pub fn control(&self) -> &Control {
        &self.control
    }
    /// Counters.
    pub fn stats(&self) -> &UaLinkStats {
        &self.stats
    }
    /// The link state.
    pub fn state(&self) -> LinkState {
        self.retry.state()
    }
    /// Room in the TL flit queue.
    pub fn tx_room(&self) -> usize {
        TXQ.saturating_sub(self.txq.len())
    }
    /// [`UaLink::poll_transmit`] would return a DL flit now: one waits in retry (new, to be
    /// resent, an Ack, a Replay Request, a NOP), or one would be packed (TL flits queued, a DL
    /// message waiting, or the rest of a TL flit that a sent DL flit cut). O(1); lets a caller
    /// sleep instead of polling when nothing would come out.
    pub fn has_transmit(&self) -> bool {
        let pack = self.retry.state() == LinkState::Up
            && self.retry.unsent() == 0
            && self.retry.can_submit()
            && (!self.txq.is_empty()
                || self.control.has_message()
                || self.packer.carrying_tl_flit());
        pack || self.retry.has_transmit()
    }
    /// Nothing waits to be sent or acknowledged.
    pub fn is_idle(&self) -> bool {
        self.txq.is_empty()
            && self.retry.buffered() == 0
            && !self.control.has_message()
            && !self.packer.carrying_tl_flit()
    }

    // ---- commands ----

    /// Queue a TL flit, taken `now` (from then the hold limit runs for it).
    ///
    /// # Errors
    /// [`TxError::QueueFull`], [`TxError::Fault`].
    pub fn submit_tl_flit(
        &mut self,
        now: Instant,
        flit: &[u8; TL_FLIT_LEN],
    ) -> Result<(), TxError> {
        if self.retry.state() == LinkState::Fault {
            return Err(TxError::Fault);
        }
        self.txq.push_back(*flit).map_err(|_| TxError::QueueFull)?;
        #[cfg(feature = "hold-limit")]
        {
            if let Some(t) = self.hold.queued.get_mut(ring(
                self.hold.front.wrapping_add(self.txq.len()).wrapping_sub(1),
                TXQ,
            )) {
                *t = now;
            }
            self.hold.holds(now);
        }
        #[cfg(not(feature = "hold-limit"))]
        let _ = now;
        self.stats.tl_submitted = self.stats.tl_submitted.saturating_add(1);
        Ok(())
    }

    /// Queue a DL message (UART, vendor-defined) for the peer.
    ///
    /// # Errors
    /// [`ControlError::QueueFull`].
    pub fn send_dl_message(&mut self, msg: DlMessage) -> Result<(), ControlError> {
        self.control.send_message(msg)
    }

    /// Ask the peer to bring a channel online or offline.
    ///
    /// # Errors
    /// As [`Control::request_channel`].
    pub fn request_channel(
        &mut self,
        now: Instant,
        target: u8,
        command: ChannelCommand,
    ) -> Result<(), ControlError> {
        self.control.request_channel(now, target, command)
    }

    /// Answer the peer's channel request.
    ///
    /// # Errors
    /// As [`Control::respond_channel`].
    pub fn respond_channel(
        &mut self,
        now: Instant,
        response: ChannelResponse,
    ) -> Result<(), ControlError> {
        self.control.respond_channel(now, response)
    }

    /// Announce a new TL rate.
    pub fn notify_tl_rate(&mut self, now: Instant, rate: u16) {
        self.control.notify_tl_rate(now, rate);
    }

    /// The PHY is up.
    pub fn handle_link_up(&mut self, now: Instant) {
        self.retry.handle_link_up(now);
        self.sync(now);
    }

    /// The PHY went down (nothing is lost: retry resends after the next link up).
    pub fn handle_link_down(&mut self, now: Instant) {
        self.retry.handle_link_down(now);
        self.sync(now);
    }

    /// Leave `Fault`: empty every buffer and restart the stream (the peer must reset too).
    pub fn reset(&mut self, now: Instant) {
        self.retry.reset(now);
        self.packer.reset();
        self.unpacker.reset();
        self.txq.clear();
        #[cfg(feature = "hold-limit")]
        self.hold.clear();
        self.control.handle_link_down();
        self.state = self.retry.state();
    }

    // ---- inputs ----

    /// A DL flit arrived; its TL flits go to `sink`.
    pub fn handle_flit<S: TlSink + ?Sized>(&mut self, now: Instant, bytes: &[u8], sink: &mut S) {
        let delivery = self.retry.handle_flit(now, bytes);
        self.sync(now);
        let Some(d) = delivery else {
            return;
        };
        let mut s = Sink {
            user: sink,
            control: &mut self.control,
            now,
            tl: 0,
            messages: 0,
        };
        let r = self
            .unpacker
            .unpack(&DlFlit::new_unchecked(&d.flit[..]), &mut s);
        self.stats.tl_delivered = self.stats.tl_delivered.saturating_add(s.tl);
        self.stats.messages_received = self.stats.messages_received.saturating_add(s.messages);
        if r.is_err() {
            self.stats.unpack_errors = self.stats.unpack_errors.saturating_add(1);
            self.unpacker.lose_sync();
        }
    }

    /// Fire expired timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.retry.handle_timeout(now);
        self.control.handle_timeout(now);
        self.check_hold(now);
        self.sync(now);
    }

    /// End the link if it holds a TL flit past the hold limit. Checked before every DL
    /// flit sent and at every timeout, not on a timer of its own: what matters is that
    /// nothing goes out after the limit (a flit sent before it arrives within the link's
    /// latency); a link with something to resend has a timer running anyway.
    #[inline]
    fn check_hold(&mut self, now: Instant) {
        #[cfg(feature = "hold-limit")]
        if now >= self.hold.due {
            match self.hold.oldest(self.retry.buffered(), self.txq.len()) {
                Some(t) if now.saturating_since(t) >= self.hold.limit => self.retry.abort(),
                Some(t) => self.hold.due = t.saturating_add(self.hold.limit),
                None => self.hold.due = Instant::NEVER,
            }
        }
        #[cfg(not(feature = "hold-limit"))]
        let _ = now;
    }

    // ---- outputs ----

    /// The earliest timer deadline.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        earliest(self.retry.poll_timeout(), self.control.poll_timeout())
    }

    /// The next event, if any.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<UaLinkEvent> {
        if let Some(e) = self.retry.poll_event() {
            return Some(UaLinkEvent::Retry(e));
        }
        self.control.poll_event().map(UaLinkEvent::Control)
    }

    /// Write the next DL flit into `buf` (at least [`FLIT_LEN`] bytes); one per call.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.check_hold(now);
        self.sync(now);
        if self.retry.state() == LinkState::Up
            && self.retry.unsent() == 0
            && self.retry.can_submit()
            && (!self.txq.is_empty()
                || self.control.has_message()
                || self.packer.carrying_tl_flit())
        {
            self.pack(now);
        }
        self.retry.poll_transmit(now, buf)
    }

    fn pack(&mut self, now: Instant) {
        let UaLink {
            retry,
            control,
            packer,
            txq,
            stats,
            #[cfg(feature = "hold-limit")]
            hold,
            ..
        } = self;
        #[cfg(feature = "hold-limit")]
        let (carried, queued) = (packer.carrying_tl_flit().then_some(hold.last), txq.len());
        let mut src = Source { txq, control };
        let mut result = None;
        let submitted = retry.submit_with(|slot: &mut [u8; FLIT_LEN]| {
            result = Some(packer.pack(&mut src, &mut DlFlit::new_unchecked(&mut slot[..])));
        });
        #[cfg(not(feature = "hold-limit"))]
        let _ = now;
        #[cfg(feature = "hold-limit")]
        {
            // The TL flits taken are the queue's first `taken`: the first and the last of them.
            let taken = queued.saturating_sub(src.txq.len());
            let mut first = None;
            if taken > 0 {
                first = hold.queued.get(hold.front).copied();
                hold.front = ring(hold.front.wrapping_add(taken), TXQ);
                let at = ring(hold.front.wrapping_add(TXQ).wrapping_sub(1), TXQ);
                hold.last = hold.queued.get(at).copied().unwrap_or(hold.last);
            }
            if submitted.is_ok() {
                let t = carried.or(first).map_or(now, |t| t.min(now));
                if let Some(slot) = hold.packed.get_mut(hold.next) {
                    *slot = t;
                }
                hold.next = ring(hold.next.wrapping_add(1), CAP);
                hold.holds(t);
            }
        }
        if submitted.is_ok() {
            stats.dl_flits_packed = stats.dl_flits_packed.saturating_add(1);
        }
        if let Some(Ok(p)) = result {
            let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
            stats.tl_packed = stats.tl_packed.saturating_add(n(p.tl_started));
            stats.tl_padding = stats.tl_padding.saturating_add(n(p.nop_started));
            stats.messages_dropped = stats.messages_dropped.saturating_add(n(p.dropped_messages));
        }
    }

    /// Follow retry's state: start the control exchange on `Up`, stop it when down.
    fn sync(&mut self, now: Instant) {
        let s = self.retry.state();
        if s == self.state {
            return;
        }
        match s {
            LinkState::Up => self.control.handle_link_up(now),
            LinkState::Idle | LinkState::Fault => self.control.handle_link_down(),
            LinkState::Nop => {}
        }
        self.state = s;
    }
}
