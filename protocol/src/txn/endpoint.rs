//! One accelerator port: requester + completer + TL packing + TL credits + the UALink-profile
//! link (`spec-notes/transactions.md#endpoint`).
//!
//! ```text
//!  submit ─▶ Requester ─┐                 ┌─▶ TlPacker ─▶ UaLink ─▶ DL flits out
//!            Completer ─┼─ CreditSender ──┤
//!  credit returns ──────┘                 │
//!                                          │
//!  DL flits in ─▶ UaLink ─▶ TlUnpacker ─▶ CreditReceiver ─┬─▶ Completer ─▶ MemoryTarget
//!                                                          └─▶ Requester ─▶ ReadSink
//! ```
//!
//! The host driver and the simulator instantiate one per accelerator port and feed it DL
//! flits, time and operations; it implements [`testing::Endpoint`](crate::testing::Endpoint)
//! so that a [`LinkPair`](crate::testing::LinkPair) can drive two of them over a faulty wire.

use heapless::Deque;

use super::buf::TransferBuf;
use super::completer::{Completer, CompleterEvent};
use super::endpoint_rx::{Gate, Rx};
use super::partition::PartitionTable;
use super::request::{Request, SubmitError};
use super::requester::Requester;
use super::requester_types::{Completion, OpId, ReadData, RequesterEvent};
use super::target::MemoryTarget;
use super::{CompleterConfig, CreditGate, RequesterConfig};
use crate::flow::{
    CreditClass, CreditOutput, CreditReceiver, CreditSender, CreditTarget, Credits, FlowEvent,
    ReceiverConfig,
};
use crate::link::{UaLink, UaLinkConfig, UaLinkEvent};
use crate::retry::LinkState;
use crate::time::{earliest, Duration, Instant};
use crate::wire::dl_stream::TL_FLIT_LEN;
use crate::wire::{TlItem, TlMessage, TlPacker, TlPushError, TlTransfer, TlUnpacker};

pub(crate) const EVENTS: usize = 32;

/// Where an endpoint delivers read data (the requester side's results).
pub trait ReadSink {
    /// Bytes of a read operation arrived (valid only if the operation completes `Ok`).
    fn read_data(&mut self, data: ReadData<'_>);

    /// A response arrived whose tag this port's requester does not own. An accelerator with
    /// several ports into one switch gives each port's requester its own tag range
    /// (`RequesterConfig::tag_base`), and the switch routes a response by destination only,
    /// so it may arrive at a sibling port: return `true` to take it (copy it and hand it to
    /// the owner's [`Endpoint::handle_foreign_response`]); its credits are released here at
    /// once. The default, `false`, leaves it to this port's requester, which drops and
    /// counts it (`UnknownTag`).
    fn foreign_response(&mut self, _now: Instant, _response: &TlTransfer<'_>) -> bool {
        false
    }

    /// A transfer from another agent behind this port, sent after the port's own responses
    /// and requests and spending the port's credits through `credits` (take them with
    /// `try_consume`; `None` when nothing can go): a second requester sharing the port,
    /// such as a fault injector's rogue requester with a forged source ID. Its responses
    /// come back through [`ReadSink::foreign_response`] (its tags are not the port's). The
    /// default sends nothing.
    fn extra_transfer(
        &mut self,
        _now: Instant,
        _credits: &mut dyn CreditGate,
    ) -> Option<TlTransfer<'_>> {
        None
    }
}

/// Settings of an [`Endpoint`].
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    /// The requester.
    pub requester: RequesterConfig,
    /// The completer.
    pub completer: CompleterConfig,
    /// Accelerator → partition, for the completer.
    pub partitions: PartitionTable,
    /// The link.
    pub link: UaLinkConfig,
    /// Buffers this end grants its peer in the shared pool, per class (request-command
    /// credits, here and in `per_vc` together, are capped at the completer's response slots;
    /// the VCs keep theirs first).
    pub credits: Credits,
    /// Buffers this end grants its peer on each VC's own credits, per class (default none:
    /// everything in the pool). Returns of a VC's credits are preceded by a
    /// `TlMessage::CreditTarget` naming it (`spec-notes/link.md` L12); the peer spends a VC's
    /// own credits first and the pool after.
    pub per_vc: Credits,
    /// Request-command credits on each VC's own credits, VC by VC, in place of `per_vc`'s
    /// (default `None`: `per_vc`'s on every VC): more on the VCs that carry requests, fewer
    /// on the others. Still capped at the completer's response slots in all, VCs in order.
    pub per_vc_req_cmds: Option<[u16; 4]>,
    /// Return credits at once when a class has this many pending.
    pub credit_return_threshold: u16,
    /// … otherwise this long after the first pending credit.
    pub credit_return_delay: Duration,
}

impl EndpointConfig {
    /// Defaults for `requester` and `completer`: 64 request / 64 response commands, 256
    /// request / 256 response data beats, returns after 8 credits or 100 ns.
    pub fn new(requester: RequesterConfig, completer: CompleterConfig) -> Self {
        EndpointConfig {
            requester,
            completer,
            partitions: PartitionTable::default(),
            link: UaLinkConfig::default(),
            credits: Credits([64, 64, 256, 256]),
            per_vc: Credits::ZERO,
            per_vc_req_cmds: None,
            credit_return_threshold: 8,
            credit_return_delay: Duration::from_ns(100),
        }
    }
}

/// Something worth knowing from one of the endpoint's parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndpointEvent {
    /// From the link (state changes, replays, Fault).
    Link(UaLinkEvent),
    /// From the requester.
    Requester(RequesterEvent),
    /// From the completer.
    Completer(CompleterEvent),
    /// From TL credit flow control (a peer overrun or over-return).
    Flow(FlowEvent),
    /// The TL unpacker met a broken TL stream: nothing more is received until
    /// [`Endpoint::reset`] (fatal for the port).
    TlStreamBroken(crate::wire::Error),
}

/// Counters of an [`Endpoint`] (its parts keep their own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EndpointStats {
    /// TL flits handed to the link.
    pub tl_flits_sent: u64,
    /// TL flits received from the link.
    pub tl_flits_received: u64,
    /// Transfers dropped because the peer sent them without credits.
    pub overruns: u64,
    /// Requests dropped because the completer was busy (peer granted too many credits).
    pub busy_drops: u64,
    /// TL flits dropped after the TL stream broke.
    pub broken_stream_flits: u64,
    /// Items the TL packer refused as invalid (a local bug; dropped).
    pub packer_refusals: u64,
    /// Credit releases the credit receiver refused (more freed than in use).
    pub bad_releases: u64,
    /// Events discarded because the event queue was full.
    pub events_lost: u64,
    /// Responses for another port's requester, handed to the host
    /// ([`ReadSink::foreign_response`]).
    pub foreign_responses: u64,
    /// Requests and responses taken for the TL packer (from the completer, the requester
    /// and the host), whether or not they have left yet.
    pub transfers_sent: u64,
    /// Requests and responses the TL unpacker delivered whole, before any check of them.
    /// Less the peer's [`transfers_sent`](Self::transfers_sent): what is still on the way,
    /// or was lost when the link was reset.
    pub transfers_received: u64,
}

/// One accelerator port over the UALink profile.
///
/// * `H`: the accelerator's memory (served to remote requesters) and the sink for its own
///   read results.
/// * `TAGS`, `OPS`, `QUEUE`: the [`Requester`]'s tag pool, operation table and request queue.
/// * `RESP`: the [`Completer`]'s response slots (and at most this many request-command
///   credits are granted to the peer).
/// * `CAP`, `TXQ`: the [`UaLink`]'s replay buffer (DL flits, ≤ 255) and TL flit queue.
///
/// Sans-IO (`spec-notes/transactions.md#endpoint`): submit operations with
/// [`submit`](Self::submit); send every DL flit [`poll_transmit`](Self::poll_transmit) writes
/// (one per call); hand every received DL flit to [`handle_frame`](Self::handle_frame) (read
/// data goes to [`ReadSink::read_data`], requests to the [`MemoryTarget`]); call
/// [`handle_timeout`](Self::handle_timeout) at or after [`poll_timeout`](Self::poll_timeout);
/// drain [`poll_completion`](Self::poll_completion) and [`poll_event`](Self::poll_event).
/// Report the PHY with [`handle_link_up`](Self::handle_link_up) /
/// [`handle_link_down`](Self::handle_link_down). `now` never decreases. On a link `Fault` or
/// a broken TL stream, call [`reset`](Self::reset) (the peer must reset too); operations in
/// flight then complete with a timeout.
pub struct Endpoint<
    H,
    const TAGS: usize,
    const OPS: usize,
    const QUEUE: usize,
    const RESP: usize,
    const CAP: usize,
    const TXQ: usize,
> {
    requester: Requester<TAGS, OPS, QUEUE>,
    completer: Completer<RESP>,
    host: H,
    link: UaLink<CAP, TXQ>,
    packer: TlPacker,
    unpacker: TlUnpacker,
    sender: CreditSender,
    receiver: CreditReceiver,
    /// A transfer taken from the requester or completer that the packer had no room for.
    stash: Option<TransferBuf>,
    /// A credit output the packer had no room for.
    credit_stash: Option<CreditOutput>,
    /// Target of the flow-control fields received next (set by `TlMessage::CreditTarget`).
    credit_target: CreditTarget,
    /// Target of the flow-control fields this end sends next (the last
    /// `TlMessage::CreditTarget` it sent; a stream starts at the pool).
    tx_target: CreditTarget,
    events: Deque<EndpointEvent, EVENTS>,
    stats: EndpointStats,
}

impl<
        H: MemoryTarget + ReadSink,
        const TAGS: usize,
        const OPS: usize,
        const QUEUE: usize,
        const RESP: usize,
        const CAP: usize,
        const TXQ: usize,
    > Endpoint<H, TAGS, OPS, QUEUE, RESP, CAP, TXQ>
{
    /// A port with the link down.
    pub fn new(cfg: EndpointConfig, host: H) -> Self {
        let receiver = CreditReceiver::new(receiver_config(&cfg, RESP));
        Endpoint {
            requester: Requester::new(cfg.requester),
            completer: Completer::new(cfg.completer, cfg.partitions),
            host,
            link: UaLink::new(cfg.link),
            packer: TlPacker::new(),
            unpacker: TlUnpacker::new(),
            sender: CreditSender::new(),
            receiver,
            stash: None,
            credit_stash: None,
            credit_target: CreditTarget::Shared,
            tx_target: CreditTarget::Shared,
            events: Deque::new(),
            stats: EndpointStats::default(),
        }
    }

    // ---- getters ----

    /// The requester.
    pub const fn requester(&self) -> &Requester<TAGS, OPS, QUEUE> {
        &self.requester
    }
    /// The completer.
    pub const fn completer(&self) -> &Completer<RESP> {
        &self.completer
    }
    /// The completer, to update its partition table.
    pub fn completer_mut(&mut self) -> &mut Completer<RESP> {
        &mut self.completer
    }
    /// The host (memory and read sink).
    pub const fn host(&self) -> &H {
        &self.host
    }
    /// The host, mutably.
    pub fn host_mut(&mut self) -> &mut H {
        &mut self.host
    }
    /// The link.
    pub const fn link(&self) -> &UaLink<CAP, TXQ> {
        &self.link
    }
    /// Credits this end holds toward the peer.
    pub const fn credit_sender(&self) -> &CreditSender {
        &self.sender
    }
    /// Buffers this end granted the peer.
    pub const fn credit_receiver(&self) -> &CreditReceiver {
        &self.receiver
    }
    /// Counters.
    pub const fn stats(&self) -> &EndpointStats {
        &self.stats
    }
    /// The link state.
    pub fn state(&self) -> LinkState {
        self.link.state()
    }
    /// Nothing waits to be sent or answered on this port.
    pub fn is_idle(&self) -> bool {
        self.requester.ops_open() == 0
            && self.completer.pending() == 0
            && self.stash.is_none()
            && self.credit_stash.is_none()
            && self.packer.is_idle()
            && self.link.is_idle()
    }

    /// Whether [`poll_transmit`](Self::poll_transmit) may have something to send now: the
    /// link has a DL flit to give (a replay, an ack, a control message, queued TL flits), or
    /// it takes TL flits and something waits for the packer (credit returns due, a ready
    /// response, a queued request, a transfer the packer had no room for). Conservative
    /// where credits decide (a queued request the peer has no credits for counts), and it
    /// does not see [`ReadSink::extra_transfer`]. For an event loop that wakes a port only
    /// when it has work; with the timers ([`poll_timeout`](Self::poll_timeout)), nothing is
    /// missed.
    pub fn wants_transmit(&self) -> bool {
        if self.link.has_transmit() {
            return true;
        }
        if self.link.state() != LinkState::Up || self.link.tx_room() == 0 {
            return false;
        }
        !self.packer.is_idle()
            || self.stash.is_some()
            || self.credit_stash.is_some()
            || self.receiver.has_return()
            || self.completer.has_ready()
            || self.requester.queued() > 0
    }

    // ---- commands ----

    /// Submit an operation (see [`Requester::submit`]).
    ///
    /// # Errors
    /// [`SubmitError`]; nothing is queued then.
    pub fn submit(&mut self, now: Instant, req: &Request<'_>) -> Result<OpId, SubmitError> {
        self.requester.submit(now, req)
    }

    /// The PHY is up.
    pub fn handle_link_up(&mut self, now: Instant) {
        self.link.handle_link_up(now);
        self.drain_link_events();
    }

    /// The PHY went down (nothing is lost: the link replays after the next link up).
    pub fn handle_link_down(&mut self, now: Instant) {
        self.link.handle_link_down(now);
        self.drain_link_events();
    }

    /// Start over after a link `Fault` or a broken TL stream: empty the link, the TL packer
    /// and unpacker, forget credits and address caches (the peer must reset too). Operations
    /// in flight are not forgotten: they complete with a timeout.
    pub fn reset(&mut self, now: Instant) {
        self.link.reset(now);
        self.packer.reset();
        self.unpacker.reset();
        self.sender.reset();
        // The receiver's fresh initial release grants every buffer, so none may stay in use:
        // the completer drops the responses it still holds (their requests time out).
        self.completer.drop_held();
        self.receiver.reset();
        self.requester.reset_addr_cache();
        self.completer.reset_addr_cache();
        self.stash = None;
        self.credit_stash = None;
        self.credit_target = CreditTarget::Shared;
        self.tx_target = CreditTarget::Shared;
        self.drain_link_events();
    }

    /// Give up every operation of this port's requester now, in flight or queued: each
    /// completes with [`TxnError::LinkDown`](super::TxnError::LinkDown), and a response that
    /// still arrives for one is dropped ([`Requester::abort`]). For a port declared down
    /// whose link will be reset before it carries anything again, so that nothing queued
    /// here leaves after the operations that followed it went another way.
    pub fn abort(&mut self, now: Instant) {
        self.requester.abort(now);
        self.drain_part_events();
    }

    // ---- inputs ----

    /// A DL flit arrived.
    pub fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        let Endpoint {
            requester,
            completer,
            host,
            link,
            unpacker,
            sender,
            receiver,
            credit_target,
            events,
            stats,
            ..
        } = self;
        let mut rx = Rx {
            requester,
            completer,
            host,
            unpacker,
            sender,
            receiver,
            credit_target,
            events,
            stats,
            now,
        };
        link.handle_flit(now, frame, &mut rx);
        self.drain_part_events();
    }

    /// Keep (`true`) or return again (`false`) the credits of `target` that this port frees
    /// ([`CreditReceiver::set_withheld`]): a receiver that starves the peer of one VC's
    /// credits, for tests and fault injection.
    #[cfg(feature = "withhold")]
    pub fn set_credits_withheld(&mut self, target: CreditTarget, withheld: bool) {
        self.receiver.set_withheld(target, withheld);
    }

    /// A response that arrived at another port of this accelerator (handed over by that
    /// port's [`ReadSink::foreign_response`]): this port's requester takes it, and read data
    /// goes to this port's host. Its credits were released where it arrived. Returns whether
    /// this port's requester owns its tag (if not, nothing happens).
    pub fn handle_foreign_response(&mut self, now: Instant, response: &TlTransfer<'_>) -> bool {
        let owned = response
            .field
            .tag()
            .is_some_and(|t| self.requester.owns_tag(t));
        if owned {
            if let Some(d) = self
                .requester
                .handle_response(now, response, &mut super::Unlimited)
            {
                self.host.read_data(d);
            }
            self.drain_part_events();
        }
        owned
    }

    /// Fire expired timers (link, credit returns, request timeouts, responses the
    /// completer's `response_delay` held back).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.link.handle_timeout(now);
        self.receiver.handle_timeout(now);
        self.requester.handle_timeout(now);
        self.completer.handle_timeout(now);
        self.drain_part_events();
    }

    // ---- outputs ----

    /// The earliest timer deadline.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        earliest(
            earliest(self.link.poll_timeout(), self.receiver.poll_timeout()),
            earliest(self.requester.poll_timeout(), self.completer.poll_timeout()),
        )
    }

    /// Write the next DL flit into `buf` (at least 640 bytes); one per call.
    ///
    /// Before that, moves what is ready — credit returns, then responses, then requests —
    /// through the TL packer into the link's TL flit queue, as far as there is room.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        if self.link.state() != LinkState::Fault {
            self.fill_packer(now);
            while self.link.tx_room() > 0 {
                let mut flit = [0u8; TL_FLIT_LEN];
                if self.packer.poll_flit(&mut flit).is_none() {
                    break;
                }
                if self.link.submit_tl_flit(now, &flit).is_err() {
                    break;
                }
                self.stats.tl_flits_sent = self.stats.tl_flits_sent.saturating_add(1);
                self.fill_packer(now);
            }
        }
        let r = self.link.poll_transmit(now, buf);
        self.drain_part_events();
        r
    }

    /// The next finished operation.
    #[must_use]
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.requester.poll_completion()
    }

    /// The next event.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<EndpointEvent> {
        self.drain_part_events();
        self.events.pop_front()
    }

    /// Push into the packer until it is full or nothing is ready. Bounded by the packer's
    /// capacity: every turn pushes one item.
    fn fill_packer(&mut self, now: Instant) {
        while self.fill_one(now) {}
    }

    /// One turn of [`fill_packer`](Self::fill_packer): push one item; `false` when the
    /// packer is full or nothing is ready. Out of line on purpose: inlined into the loop, its
    /// many field addresses were computed once before the loop, about 65 instructions per
    /// call, for a loop that usually turns once or twice.
    #[inline(never)]
    fn fill_one(&mut self, now: Instant) -> bool {
        if let Some(c) = self.credit_stash {
            if !self.push_credit(c) {
                return false;
            }
            self.credit_stash = None;
        }
        if let Some(b) = &self.stash {
            match self.packer.push(&TlItem::Transfer(b.as_transfer())) {
                Err(TlPushError::Full) => return false,
                Err(TlPushError::Invalid(_)) => {
                    self.stats.packer_refusals = self.stats.packer_refusals.saturating_add(1);
                }
                Ok(()) => {}
            }
            self.stash = None;
        }
        if let Some(c) = self.receiver.poll_return() {
            if !self.push_credit(c) {
                self.credit_stash = Some(c);
                return false;
            }
            return true;
        }
        let Endpoint {
            requester,
            completer,
            host,
            packer,
            sender,
            receiver,
            stash,
            stats,
            ..
        } = self;
        let mut gate = Gate {
            sender,
            receiver,
            now,
            bad_releases: &mut stats.bad_releases,
        };
        let t = match completer.poll_transmit(now, &mut gate) {
            Some(t) => t,
            None => match requester.poll_transmit(now, &mut gate) {
                Some(t) => t,
                None => match host.extra_transfer(now, &mut gate) {
                    Some(t) => t,
                    None => return false,
                },
            },
        };
        stats.transfers_sent = stats.transfers_sent.saturating_add(1);
        if !push_transfer(packer, &t, stats) {
            *stash = Some(TransferBuf::new(&t));
            return false;
        }
        true
    }

    /// Push a credit output (a return of another target than the last one is preceded by a
    /// `TlMessage::CreditTarget`); `false` when the packer is full (then nothing of the
    /// return went, or only its credit-target message, which is not repeated).
    fn push_credit(&mut self, c: CreditOutput) -> bool {
        let item = match c {
            CreditOutput::Return { target, fc } => {
                if target != self.tx_target {
                    let select = TlItem::Message(TlMessage::CreditTarget {
                        target: target.index() as u8,
                    });
                    match self.packer.push(&select) {
                        Ok(()) => self.tx_target = target,
                        Err(TlPushError::Full) => return false,
                        Err(TlPushError::Invalid(_)) => {
                            self.stats.packer_refusals =
                                self.stats.packer_refusals.saturating_add(1);
                            return true;
                        }
                    }
                }
                TlItem::Credits(fc)
            }
            CreditOutput::InitialReleaseComplete => {
                TlItem::Message(TlMessage::InitialCreditReleaseComplete)
            }
        };
        match self.packer.push(&item) {
            Ok(()) => true,
            Err(TlPushError::Full) => false,
            Err(TlPushError::Invalid(_)) => {
                self.stats.packer_refusals = self.stats.packer_refusals.saturating_add(1);
                true
            }
        }
    }

    fn push_event(&mut self, e: EndpointEvent) {
        if self.events.push_back(e).is_err() {
            self.stats.events_lost = self.stats.events_lost.saturating_add(1);
        }
    }

    fn drain_link_events(&mut self) {
        while let Some(e) = self.link.poll_event() {
            self.push_event(EndpointEvent::Link(e));
        }
    }

    /// Move the parts' events into the endpoint's queue, oldest part first.
    fn drain_part_events(&mut self) {
        self.drain_link_events();
        while let Some(e) = self.sender.poll_event() {
            self.push_event(EndpointEvent::Flow(e));
        }
        while let Some(e) = self.receiver.poll_event() {
            self.push_event(EndpointEvent::Flow(e));
        }
        while let Some(e) = self.requester.poll_event() {
            self.push_event(EndpointEvent::Requester(e));
        }
        while let Some(e) = self.completer.poll_event() {
            self.push_event(EndpointEvent::Completer(e));
        }
    }
}

/// Push a transfer; `false` when the packer is full (an invalid one is counted and dropped).
fn push_transfer(packer: &mut TlPacker, t: &TlTransfer<'_>, stats: &mut EndpointStats) -> bool {
    match packer.push(&TlItem::Transfer(*t)) {
        Ok(()) => true,
        Err(TlPushError::Full) => false,
        Err(TlPushError::Invalid(_)) => {
            stats.packer_refusals = stats.packer_refusals.saturating_add(1);
            true
        }
    }
}

/// The credit receiver's settings: the pool and each VC's own credits as configured, request
/// commands capped at the completer's response slots in all (VC 0 to 3 keep theirs first,
/// the pool gets what is left), so that a peer within its credits never finds the completer
/// full.
fn receiver_config(cfg: &EndpointConfig, resp: usize) -> ReceiverConfig {
    let mut left = u16::try_from(resp).unwrap_or(u16::MAX);
    let mut capacity = [Credits::ZERO; CreditTarget::COUNT];
    for t in CreditTarget::ALL {
        if let Some(c) = capacity.get_mut(t.index()) {
            *c = if t == CreditTarget::Shared {
                cfg.credits
            } else {
                cfg.per_vc
            };
            if let (Some(cmds), CreditTarget::Vc(vc)) = (cfg.per_vc_req_cmds, t) {
                if let Some(&n) = cmds.get(usize::from(vc.get())) {
                    c.set(CreditClass::ReqCmd, n);
                }
            }
        }
    }
    // VCs keep their own request commands before the pool does: the cap goes over the
    // VCs in order, then the pool gets what is left.
    for t in CreditTarget::ALL {
        if t == CreditTarget::Shared {
            continue;
        }
        if let Some(c) = capacity.get_mut(t.index()) {
            let n = c.get(CreditClass::ReqCmd).min(left);
            c.set(CreditClass::ReqCmd, n);
            left -= n;
        }
    }
    if let Some(c) = capacity.get_mut(CreditTarget::Shared.index()) {
        c.set(CreditClass::ReqCmd, c.get(CreditClass::ReqCmd).min(left));
    }
    ReceiverConfig {
        capacity,
        return_threshold: cfg.credit_return_threshold.max(1),
        return_delay: cfg.credit_return_delay,
    }
}

impl<
        H: MemoryTarget + ReadSink,
        const TAGS: usize,
        const OPS: usize,
        const QUEUE: usize,
        const RESP: usize,
        const CAP: usize,
        const TXQ: usize,
    > crate::testing::Endpoint for Endpoint<H, TAGS, OPS, QUEUE, RESP, CAP, TXQ>
{
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        Endpoint::poll_transmit(self, now, buf)
    }
    fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        Endpoint::handle_frame(self, now, frame);
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        Endpoint::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Endpoint::handle_timeout(self, now);
    }
    fn handle_link(&mut self, now: Instant, up: bool) {
        if up {
            self.handle_link_up(now);
        } else {
            self.handle_link_down(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::TlSink;
    use crate::phy::{FaultConfig, FaultInjector, Wire};
    use crate::retry::FLIT_LEN;
    use crate::testing::{LinkPair, PairConfig};
    use crate::txn::endpoint_rx::{needs, target};
    use crate::txn::{
        Atomic, AtomicOp, AtomicSize, ByteEnables, Flow, Operation, Pool, TargetError, TxnError,
        WindowMemory,
    };
    use crate::wire::{AccelId, TlUncompressedRequest};
    use crate::wire::{TlField, Vc};
    use std::boxed::Box;
    use std::vec::Vec;

    struct Host {
        mem: WindowMemory<4096>,
        reads: Vec<(OpId, u32, Vec<u8>)>,
        /// `Some`: take responses for other ports' requesters (kept here).
        foreign: Option<Vec<TransferBuf>>,
        /// A second requester behind the port (sends through `extra_transfer`).
        rogue: Option<Box<Requester<4, 4, 4>>>,
    }

    impl MemoryTarget for Host {
        fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
            self.mem.read(addr, buf)
        }
        fn write(&mut self, addr: u64, data: &[u8], en: &ByteEnables) -> Result<(), TargetError> {
            self.mem.write(addr, data, en)
        }
    }

    impl ReadSink for Host {
        fn read_data(&mut self, d: ReadData<'_>) {
            self.reads.push((d.op, d.offset, d.data.to_vec()));
        }
        fn foreign_response(&mut self, now: Instant, t: &TlTransfer<'_>) -> bool {
            if let (Some(r), Some(tag)) = (self.rogue.as_mut(), t.field.tag()) {
                if r.owns_tag(tag) {
                    let _ = r.handle_response(now, t, &mut crate::txn::Unlimited);
                    return true;
                }
            }
            match &mut self.foreign {
                Some(v) => {
                    v.push(TransferBuf::new(t));
                    true
                }
                None => false,
            }
        }
        fn extra_transfer(
            &mut self,
            now: Instant,
            credits: &mut dyn CreditGate,
        ) -> Option<TlTransfer<'_>> {
            self.rogue.as_mut()?.poll_transmit(now, &mut &mut *credits)
        }
    }

    type End = Endpoint<Host, 16, 8, 16, 8, 32, 16>;
    type Pair = LinkPair<End, End, 64, FLIT_LEN>;

    fn id(n: u16) -> AccelId {
        AccelId::new(n).unwrap()
    }

    fn end(me: u16) -> End {
        end_with(EndpointConfig::new(
            RequesterConfig::new(id(me)),
            CompleterConfig::new(id(me)),
        ))
    }

    fn end_with(cfg: EndpointConfig) -> End {
        let host = Host {
            mem: WindowMemory::new(0),
            reads: Vec::new(),
            foreign: None,
            rogue: None,
        };
        Endpoint::new(cfg, host)
    }

    /// A 64 B read of accelerator 2 at `addr`.
    fn read64(addr: u64) -> Request<'static> {
        Request {
            dst: id(2),
            vc: Vc::default(),
            op: Operation::Read { addr, len: 64 },
        }
    }

    fn on_big_stack(f: impl FnOnce() + Send + 'static) {
        std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap();
    }

    fn pair() -> Box<Pair> {
        pair_of(end(1), end(2))
    }

    fn pair_of(a: End, b: End) -> Box<Pair> {
        let wire = |s| {
            Wire::new(
                FaultInjector::new(FaultConfig::default(), s),
                Duration::from_ns(50),
            )
        };
        let mut p = Box::new(LinkPair::new(a, b, wire(1), wire(2), PairConfig::default()));
        p.set_link(true);
        p
    }

    /// The request commands of each credit target (VC 0..=3, then the pool).
    fn req_cmds(r: &ReceiverConfig) -> Vec<u16> {
        r.capacity
            .iter()
            .map(|c| c.get(CreditClass::ReqCmd))
            .collect()
    }

    #[test]
    fn receiver_config_caps_request_commands() {
        let mut cfg = EndpointConfig::new(RequesterConfig::new(id(1)), CompleterConfig::new(id(1)));
        let r = receiver_config(&cfg, 8);
        let shared = r.capacity[CreditTarget::Shared.index()];
        assert_eq!(shared, Credits([8, 64, 256, 256]));
        assert_eq!(r.capacity[0], Credits::ZERO);
        // Per-VC grants keep their request commands first; the pool gets what is left of
        // the completer's 8 slots (3 + 3 + 2 + 0, pool 0).
        cfg.per_vc = Credits([3, 4, 16, 16]);
        let r = receiver_config(&cfg, 8);
        assert_eq!(req_cmds(&r), [3, 3, 2, 0, 0]);
        assert_eq!(r.capacity[3], Credits([0, 4, 16, 16]));
        assert_eq!(r.capacity[4], Credits([0, 64, 256, 256]));
        // VC by VC request commands replace `per_vc`'s, under the same cap.
        cfg.per_vc_req_cmds = Some([1, 5, 0, 9]);
        let r = receiver_config(&cfg, 8);
        assert_eq!(req_cmds(&r), [1, 5, 0, 2, 0]);
        assert_eq!(r.capacity[1], Credits([5, 4, 16, 16]));
        assert_eq!(target(Vc::default(), Pool::Shared), CreditTarget::Shared);
        assert_eq!(needs(Flow::Response, 2), Credits::response(2));
    }

    #[test]
    fn write_read_atomic_over_a_link() {
        on_big_stack(|| {
            let mut p = pair();
            let b = id(2);
            let vc = Vc::default();
            let now = p.now();
            let data: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
            let w =
                p.a.submit(
                    now,
                    &Request {
                        dst: b,
                        vc,
                        op: Operation::Write {
                            addr: 100,
                            data: &data,
                            enables: None,
                        },
                    },
                )
                .unwrap();
            let r =
                p.a.submit(
                    now,
                    &Request {
                        dst: b,
                        vc,
                        op: Operation::Read {
                            addr: 100,
                            len: 300,
                        },
                    },
                )
                .unwrap();
            let atomic = Atomic {
                op: AtomicOp::FetchAdd,
                size: AtomicSize::Eight,
                operand: 5,
                compare: 0,
            };
            let x =
                p.a.submit(
                    now,
                    &Request {
                        dst: b,
                        vc,
                        op: Operation::Atomic {
                            addr: 8,
                            atomic,
                            returning: true,
                        },
                    },
                )
                .unwrap();
            let y =
                p.a.submit(
                    now,
                    &Request {
                        dst: b,
                        vc,
                        op: Operation::Atomic {
                            addr: 8,
                            atomic,
                            returning: true,
                        },
                    },
                )
                .unwrap();
            p.wake();
            p.drive(now + Duration::from_us(20));
            let mut got = std::collections::HashMap::new();
            while let Some(c) = p.a.poll_completion() {
                got.insert(c.id, c.result);
            }
            assert_eq!(got[&w], Ok(None));
            assert_eq!(got[&r], Ok(None));
            assert_eq!(got[&x], Ok(Some(0)));
            assert_eq!(got[&y], Ok(Some(5)));
            let mut back = std::vec![0u8; 300];
            for (op, off, bytes) in &p.a.host().reads {
                assert_eq!(*op, r);
                back[*off as usize..*off as usize + bytes.len()].copy_from_slice(bytes);
            }
            assert_eq!(back, data);
            assert_eq!(&p.b.host().mem.bytes()[100..400], &data[..]);
            assert!(p.a.is_idle() && p.b.is_idle());
            // Every credit came back: each end holds its whole grant again.
            for e in [&p.a, &p.b] {
                let s = e.credit_sender();
                for c in CreditClass::ALL {
                    assert_eq!(
                        s.available(CreditTarget::Shared, c),
                        s.grant(CreditTarget::Shared, c)
                    );
                }
            }
            assert_eq!(p.a.stats().overruns + p.b.stats().overruns, 0);
        });
    }

    /// Per-VC grants: each end learns its peer's grant per VC and in the pool from the
    /// initial release (the returns of a VC preceded by a credit-target message), spends a
    /// VC's own credits first and the pool after, and every credit comes home to the target
    /// it was taken from, none above a grant.
    #[test]
    fn per_vc_grants_are_released_spent_and_returned_per_target() {
        on_big_stack(|| {
            let end_vc = |me: u16| {
                let mut cfg =
                    EndpointConfig::new(RequesterConfig::new(id(me)), CompleterConfig::new(id(me)));
                cfg.per_vc = Credits([1, 1, 4, 4]);
                cfg.credits = Credits([2, 2, 8, 8]);
                let host = Host {
                    mem: WindowMemory::new(0),
                    reads: Vec::new(),
                    foreign: None,
                    rogue: None,
                };
                Endpoint::new(cfg, host)
            };
            let mut p = pair_of(end_vc(1), end_vc(2));
            let vc = |n| Vc::new(n).unwrap();
            let data = [0x5au8; 256];
            let now = p.now();
            let mut ops = Vec::new();
            for k in 0..4u64 {
                let w = Request {
                    dst: id(2),
                    vc: vc(1),
                    op: Operation::Write {
                        addr: k * 256,
                        data: &data,
                        enables: None,
                    },
                };
                ops.push(p.a.submit(now, &w).unwrap());
                let r = Request {
                    dst: id(2),
                    vc: vc(2),
                    op: Operation::Read {
                        addr: 2048 + k * 256,
                        len: 256,
                    },
                };
                ops.push(p.a.submit(now, &r).unwrap());
            }
            let back = Request {
                dst: id(1),
                vc: vc(3),
                op: Operation::Write {
                    addr: 0,
                    data: &data,
                    enables: None,
                },
            };
            let b_op = p.b.submit(now, &back).unwrap();
            p.wake();
            p.drive(now + Duration::from_us(50));
            let mut done = Vec::new();
            while let Some(c) = p.a.poll_completion() {
                assert_eq!(c.result, Ok(None), "{c:?}");
                done.push(c.id);
            }
            done.sort_by_key(|o| o.0);
            ops.sort_by_key(|o| o.0);
            assert_eq!(done, ops);
            assert_eq!(
                p.b.poll_completion().map(|c| (c.id, c.result)),
                Some((b_op, Ok(None)))
            );
            assert_eq!(&p.b.host().mem.bytes()[..1024], &[0x5au8; 1024][..]);
            assert_eq!(&p.a.host().mem.bytes()[..256], &data[..]);
            // Four 4-beat writes on VC 1 with one command credit there: the pool carried some.
            assert!(p.a.credit_sender().stats().pool_spends > 0);
            for e in [&p.a, &p.b] {
                let s = e.credit_sender();
                assert!(s.initial_release_complete());
                assert_eq!(s.stats().return_above_grant, 0);
                for t in CreditTarget::ALL {
                    let want = if t == CreditTarget::Shared {
                        Credits([2, 2, 8, 8])
                    } else {
                        Credits([1, 1, 4, 4])
                    };
                    for c in CreditClass::ALL {
                        assert_eq!(s.grant(t, c), u32::from(want.get(c)), "{t:?} {c:?}");
                        assert_eq!(s.available(t, c), s.grant(t, c), "{t:?} {c:?}");
                    }
                }
                assert_eq!(e.stats().overruns + e.stats().busy_drops, 0);
            }
        });
    }

    /// Feed `end` the TL flits a peer link carries.
    fn from_peer(e: &mut End, flits: &[[u8; TL_FLIT_LEN]]) {
        let mut peer: UaLink<32, 16> = UaLink::new(UaLinkConfig::default());
        let now = Instant::ZERO;
        e.handle_link_up(now);
        peer.handle_link_up(now);
        struct Nothing;
        impl TlSink for Nothing {
            fn tl_flit(&mut self, _: &[u8; TL_FLIT_LEN]) {}
        }
        let mut buf = [0u8; FLIT_LEN];
        let mut queued = flits.iter();
        for _ in 0..64 {
            if peer.tx_room() > 0 {
                if let Some(f) = queued.next() {
                    peer.submit_tl_flit(now, f).unwrap();
                }
            }
            if let Some(n) = e.poll_transmit(now, &mut buf) {
                peer.handle_flit(now, &buf[..n], &mut Nothing);
            }
            if let Some(n) = peer.poll_transmit(now, &mut buf) {
                e.handle_frame(now, &buf[..n]);
            }
        }
    }

    fn packed(t: &TlTransfer<'_>) -> Vec<[u8; TL_FLIT_LEN]> {
        let mut packer: TlPacker = TlPacker::new();
        packer.push(&TlItem::Transfer(*t)).unwrap();
        let mut out = Vec::new();
        let mut f = [0u8; TL_FLIT_LEN];
        while packer.poll_flit(&mut f).is_some() {
            out.push(f);
        }
        out
    }

    #[test]
    fn overrun_is_dropped_and_broken_stream_reported() {
        on_big_stack(|| {
            let mut e = Box::new(end(2));
            // A read on VC 0's own credits: this end granted none there.
            let req = TlField::UncompressedRequest(TlUncompressedRequest {
                cmd: crate::wire::Opcode::Read,
                len: 15,
                srcaccid: id(1),
                dstaccid: id(2),
                ..Default::default()
            });
            let mut flits = packed(&TlTransfer::new(req, &[]));
            // Then garbage: an unknown FTYPE in a control half breaks the TL stream.
            let mut bad = [0u8; TL_FLIT_LEN];
            bad[0] = 0x70;
            flits.push(bad);
            from_peer(&mut e, &flits);
            assert_eq!(e.stats().overruns, 1);
            assert_eq!(
                e.completer().stats().requests,
                0,
                "the completer never saw it"
            );
            let mut broken = false;
            while let Some(ev) = e.poll_event() {
                broken |= matches!(ev, EndpointEvent::TlStreamBroken(_));
            }
            assert!(broken);
            e.reset(Instant::ZERO);
            assert!(e.is_idle());
        });
    }

    #[test]
    fn credit_returns_follow_the_peers_credit_target() {
        on_big_stack(|| {
            let mut e = Box::new(end(2));
            let mut packer: TlPacker = TlPacker::new();
            let fc = |n| crate::wire::TlFlowControl {
                req_cmd: n,
                ..Default::default()
            };
            // Pool (where a stream starts), then VC 1, then the pool again.
            for item in [
                TlItem::Credits(fc(2)),
                TlItem::Message(TlMessage::CreditTarget { target: 1 }),
                TlItem::Credits(fc(3)),
                TlItem::Message(TlMessage::CreditTarget { target: 4 }),
                TlItem::Credits(fc(5)),
                TlItem::Message(TlMessage::InitialCreditReleaseComplete),
            ] {
                packer.push(&item).unwrap();
            }
            let mut flits = Vec::new();
            let mut f = [0u8; TL_FLIT_LEN];
            while packer.poll_flit(&mut f).is_some() {
                flits.push(f);
            }
            from_peer(&mut e, &flits);
            let s = e.credit_sender();
            let vc1 = CreditTarget::Vc(Vc::new(1).unwrap());
            assert_eq!(s.grant(vc1, CreditClass::ReqCmd), 3);
            assert_eq!(s.grant(CreditTarget::Shared, CreditClass::ReqCmd), 7);
            assert!(s.initial_release_complete());
        });
    }

    #[test]
    fn ops_time_out_when_the_link_never_comes_up() {
        on_big_stack(|| {
            let mut e = Box::new(end(1));
            let now = Instant::ZERO;
            let op = e.submit(now, &read64(0)).unwrap();
            let mut buf = [0u8; FLIT_LEN];
            assert!(
                e.poll_transmit(now, &mut buf).is_none(),
                "link down: nothing leaves"
            );
            let t = e.poll_timeout().unwrap();
            e.handle_timeout(t);
            let c = e.poll_completion().unwrap();
            assert_eq!((c.id, c.result), (op, Err(TxnError::Timeout)));
        });
    }

    /// A read's round trip with the completer's `response_delay` is longer by exactly the
    /// delay: the response waits at the completer, and the endpoint's timer wakes it.
    #[test]
    fn response_delay_adds_exactly_to_the_round_trip() {
        fn round_trip(delay_ns: u64) -> Duration {
            let mut cfg =
                EndpointConfig::new(RequesterConfig::new(id(2)), CompleterConfig::new(id(2)));
            cfg.completer.response_delay = Duration::from_ns(delay_ns);
            let b = end_with(cfg);
            let mut p = pair_of(end(1), b);
            // Bring-up and the initial credit release first.
            p.drive(p.now() + Duration::from_us(5));
            let start = p.now();
            let op = p.a.submit(start, &read64(64)).unwrap();
            p.wake();
            let mut done = None;
            let ok = p.drive_until(start + Duration::from_us(50), |p| {
                if let Some(c) = p.a.poll_completion() {
                    assert_eq!((c.id, c.result), (op, Ok(None)));
                    done = Some(p.now());
                }
                done.is_some()
            });
            assert!(ok, "the read completes");
            done.unwrap() - start
        }
        on_big_stack(|| {
            let plain = round_trip(0);
            assert_eq!(round_trip(300).as_ps(), plain.as_ps() + 300_000);
            assert_eq!(round_trip(1_000).as_ps(), plain.as_ps() + 1_000_000);
        });
    }

    /// A response for a sibling port's requester (several ports of one accelerator into one
    /// switch, disjoint tag ranges) is handed over by the port it arrived at, with its
    /// credits released there, and completes the sibling's operation; without the host's
    /// hook it is dropped as before.
    #[test]
    fn a_response_for_a_sibling_port_is_handed_over() {
        on_big_stack(|| {
            // The sibling: accelerator 1's second port (tags 16..), linked to accelerator 2,
            // sends a read; it is in flight once accelerator 2 has taken it.
            let mut rc = RequesterConfig::new(id(1));
            rc.tag_base = 16;
            let sibling = end_with(EndpointConfig::new(rc, CompleterConfig::new(id(1))));
            let mut p = pair_of(sibling, end(2));
            p.drive(p.now() + Duration::from_us(5));
            let start = p.now();
            let op = p.a.submit(start, &read64(64)).unwrap();
            p.wake();
            assert!(p.drive_until(start + Duration::from_us(5), |p| p
                .b
                .completer()
                .stats()
                .requests
                == 1));
            // Its response arrives instead at accelerator 1's first port (tags 0..16).
            let data = [0x5au8; 64];
            let rsp = TlField::UncompressedResponse(crate::wire::TlUncompressedResponse {
                vchan: Vc::default(),
                tag: crate::wire::Tag::new(16).unwrap(),
                pool: Pool::Shared.bit(),
                len: 0,
                offset: 0,
                status: crate::txn::Status::OK.raw(),
                rd_wr: false,
                last: true,
                srcaccid: id(2),
                dstaccid: id(1),
                spares: 0,
            });
            let flits = packed(&TlTransfer::new(rsp, &data));
            let mut dropping = Box::new(end(1));
            from_peer(&mut dropping, &flits);
            assert_eq!(dropping.stats().foreign_responses, 0);
            assert_eq!(dropping.requester().stats().dropped_unknown_tag, 1);
            let mut first = Box::new(end(1));
            first.host_mut().foreign = Some(Vec::new());
            from_peer(&mut first, &flits);
            assert_eq!(first.stats().foreign_responses, 1);
            assert_eq!(first.requester().stats().dropped_unknown_tag, 0);
            for k in [CreditClass::RspCmd, CreditClass::RspData] {
                assert_eq!(
                    first.credit_receiver().in_use(CreditTarget::Shared, k),
                    0,
                    "its credits were released where it arrived"
                );
            }
            let taken = first.host_mut().foreign.take().unwrap();
            assert_eq!(taken.len(), 1);
            let now = p.now();
            assert!(!first.handle_foreign_response(now, &taken[0].as_transfer()));
            assert!(p.a.handle_foreign_response(now, &taken[0].as_transfer()));
            let c = p.a.poll_completion().unwrap();
            assert_eq!((c.id, c.result), (op, Ok(None)));
            assert_eq!(p.a.host().reads, [(op, 0, data.to_vec())]);
        });
    }

    /// A port that withholds its credits starves the peer: once the peer has spent its grant,
    /// its next request waits, and goes when the credits are returned again.
    #[cfg(feature = "withhold")]
    #[test]
    fn withheld_credits_starve_the_peer_until_released() {
        on_big_stack(|| {
            let mut p = pair();
            p.drive(p.now() + Duration::from_us(5));
            p.b.set_credits_withheld(CreditTarget::Shared, true);
            let write = |p: &mut Box<Pair>, addr: u64| {
                let now = p.now();
                let op =
                    p.a.submit(
                        now,
                        &Request {
                            dst: id(2),
                            vc: Vc::default(),
                            op: Operation::WriteFull {
                                addr,
                                data: &[7u8; 64],
                            },
                        },
                    )
                    .unwrap();
                p.wake();
                op
            };
            let mut done = 0;
            // The completer's 8 slots are the whole request-command grant.
            for k in 0..8 {
                write(&mut p, 64 * k);
            }
            let t = p.now() + Duration::from_us(20);
            p.drive_until(t, |p| {
                while let Some(c) = p.a.poll_completion() {
                    assert_eq!(c.result, Ok(None));
                    done += 1;
                }
                done == 8
            });
            assert_eq!(done, 8);
            let late = write(&mut p, 1024);
            let t = p.now() + Duration::from_us(20);
            assert!(!p.drive_until(t, |p| p.a.poll_completion().is_some()));
            assert_eq!(p.b.completer().stats().requests, 8, "the ninth never went");
            p.b.set_credits_withheld(CreditTarget::Shared, false);
            p.wake();
            let mut last = None;
            let t = p.now() + Duration::from_us(20);
            assert!(p.drive_until(t, |p| {
                last = p.a.poll_completion();
                last.is_some()
            }));
            assert_eq!(last.map(|c| (c.id, c.result)), Some((late, Ok(None))));
        });
    }

    /// A second requester behind a port (here a rogue with a forged source ID) sends through
    /// the host's `extra_transfer`, spending the port's credits, after the port's own
    /// requests; its responses come back as foreign responses.
    #[test]
    fn an_extra_requester_shares_the_port() {
        on_big_stack(|| {
            let mut rc = RequesterConfig::new(id(3));
            rc.tag_base = 32;
            let mut rogue = Box::new(Requester::<4, 4, 4>::new(rc));
            let now = Instant::ZERO;
            let w = rogue
                .submit(
                    now,
                    &Request {
                        dst: id(2),
                        vc: Vc::default(),
                        op: Operation::WriteFull {
                            addr: 512,
                            data: &[0x33; 64],
                        },
                    },
                )
                .unwrap();
            let mut a = end(1);
            a.host_mut().rogue = Some(rogue);
            let mut p = pair_of(a, end(2));
            let start = p.now();
            let own = p.a.submit(start, &read64(512)).unwrap();
            p.wake();
            let (mut got, mut rogue_got) = (None, None);
            assert!(p.drive_until(start + Duration::from_us(20), |p| {
                if let Some(c) = p.a.poll_completion() {
                    got = Some(c);
                }
                if let Some(c) = p.a.host_mut().rogue.as_mut().unwrap().poll_completion() {
                    rogue_got = Some(c);
                }
                got.is_some() && rogue_got.is_some()
            }));
            // The port's own read went first (it was sent before the rogue's write).
            let c = got.unwrap();
            assert_eq!((c.id, c.result), (own, Ok(None)));
            assert_eq!(p.a.host().reads[0].2, [0u8; 64]);
            let c = rogue_got.unwrap();
            assert_eq!((c.id, c.result), (w, Ok(None)));
            let mut m = [0u8; 64];
            p.b.host_mut().mem.read(512, &mut m).unwrap();
            assert_eq!(m, [0x33; 64]);
            assert_eq!(p.a.stats().foreign_responses, 1);
            assert_eq!(p.b.completer().stats().requests, 2);
        });
    }

    /// `wants_transmit` follows the work: nothing before the link is up, bring-up, a queued
    /// request, nothing once everything is answered and acknowledged, and a response held by
    /// the completer's delay only once it is ready.
    #[test]
    fn wants_transmit_follows_the_work() {
        on_big_stack(|| {
            let mut a = Box::new(end(1));
            assert!(!a.wants_transmit(), "link down, nothing queued");
            let now = Instant::ZERO;
            a.submit(now, &read64(0)).unwrap();
            assert!(!a.wants_transmit(), "link down: nothing can leave");
            let mut cfg =
                EndpointConfig::new(RequesterConfig::new(id(2)), CompleterConfig::new(id(2)));
            cfg.completer.response_delay = Duration::from_ns(500);
            let b = end_with(cfg);
            let mut p = pair_of(*a, b);
            assert!(p.a.wants_transmit(), "bring-up");
            // Run until B holds the request (its response delayed) and the link is quiet.
            let t = p.now() + Duration::from_us(20);
            assert!(p.drive_until(t, |p| p.b.completer().pending() == 1
                && !p.b.completer().has_ready()
                && !p.a.wants_transmit()
                && !p.b.wants_transmit()));
            let ready = p.b.poll_timeout().unwrap();
            p.advance_to(ready);
            let now = p.now();
            p.b.handle_timeout(now);
            assert!(p.b.wants_transmit(), "the response is ready");
            p.wake();
            assert!(p.drive(p.now() + Duration::from_us(20)));
            assert!(p.a.poll_completion().is_some_and(|c| c.result.is_ok()));
            assert!(!p.a.wants_transmit() && !p.b.wants_transmit());
            // A queued request, link up: work.
            let now = p.now();
            p.a.submit(now, &read64(0)).unwrap();
            assert!(p.a.wants_transmit());
        });
    }

    /// `abort` gives up an operation in flight and one still queued: both complete with
    /// `LinkDown` at once, and the in-flight read's response, which still arrives, is
    /// dropped rather than completing anything twice.
    #[test]
    fn abort_gives_up_in_flight_and_queued_operations() {
        on_big_stack(|| {
            let mut cfg =
                EndpointConfig::new(RequesterConfig::new(id(2)), CompleterConfig::new(id(2)));
            cfg.completer.response_delay = Duration::from_ns(500);
            let mut p = pair_of(end(1), end_with(cfg));
            p.drive(p.now() + Duration::from_us(5));
            let start = p.now();
            let sent = p.a.submit(start, &read64(0)).unwrap();
            p.wake();
            let t = start + Duration::from_us(20);
            assert!(p.drive_until(t, |p| p.b.completer().pending() == 1));
            let now = p.now();
            let queued = p.a.submit(now, &read64(256)).unwrap();
            p.a.abort(now);
            let mut done: Vec<_> = core::iter::from_fn(|| p.a.poll_completion())
                .map(|c| (c.id, c.result))
                .collect();
            done.sort_by_key(|d| d.0 .0);
            assert_eq!(
                done,
                [
                    (sent, Err(super::super::TxnError::LinkDown)),
                    (queued, Err(super::super::TxnError::LinkDown))
                ]
            );
            assert_eq!(p.a.requester().ops_open(), 0);
            let t = p.now() + Duration::from_us(20);
            assert!(
                p.drive_until(t, |p| p.a.requester().stats().responses_dropped > 0),
                "the late response arrives and is dropped"
            );
            assert!(p.a.poll_completion().is_none(), "nothing completes twice");
        });
    }
}
