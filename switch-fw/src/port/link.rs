//! [`LinkPort`]: a switch port over the protocol crate's UALink-profile link
//! (`spec-notes/switch.md#ports`).
//!
//! ```text
//!  transmit / send ─▶ TlPacker ─▶ UaLink (DL packer, retry, control) ─▶ 640 B DL flits
//!   (CreditSender: spend      ▲                                            │
//!    per VC or pool)          │ credit returns: CreditReceiver::poll_return │
//!                             │  as [credit-target message] + flow-control field
//!  next_arrival / frame ◀─ RxStore ◀─ CreditReceiver::handle_consumed ◀─ TlUnpacker ◀─┘
//!  release ─▶ CreditReceiver::release            (flow-control fields ─▶ CreditSender)
//! ```
//!
//! Nothing here re-implements protocol rules: bring-up, DL messages and replay are the
//! `UaLink`'s, credit accounting is `flow::CreditSender` / `flow::CreditReceiver`, TL flit
//! packing is `TlPacker` / `TlUnpacker`. The port only wires them together:
//!
//! * A frame costs the protocol's credit classes on each hop: one request- or
//!   response-command credit plus one data credit per 64 B beat, spent from the frame's VC or
//!   else the shared pool (`CreditSender::consume_vc_or_pool`); the port rewrites the field's
//!   `pool` bit to say which, since credits are per hop.
//! * What this end grants is its receive buffers: one slot per command credit
//!   ([`LinkPort::new`] refuses a grant larger than `SLOTS`). A slot is freed, and its
//!   credits returned, when the owner calls [`LinkPort::release`].
//! * Credit returns travel as TL flow-control fields. The public field names no VC or pool,
//!   so a `TlMessage::CreditTarget` goes before the fields whenever the target changes
//!   (`spec-notes/link.md` L12).
//! * The port reports up ([`PortLink::is_up`]) only when the link is Up, the device ID and
//!   port number exchange is done, and the peer's initial credit release is complete.

use super::rx::{RxFrame, RxStore};
use super::{LinkStats, PortLink};
use crate::header::{FrameKind, Header};
use crate::tables::Attachment;
use core::fmt;
use podlink_protocol::flow::{
    CreditClass, CreditOutput, CreditReceiver, CreditSender, CreditTarget, Credits, ReceiverConfig,
};
use podlink_protocol::link::control::ControlConfig;
use podlink_protocol::link::{TlSink, UaLink, UaLinkConfig, UaLinkEvent};
use podlink_protocol::retry::LinkState;
use podlink_protocol::time::{earliest, Instant};
use podlink_protocol::wire::dl_stream::TL_FLIT_LEN;
use podlink_protocol::wire::tl_flit::{DataShape, TlMessage};
use podlink_protocol::wire::tl_pack::{Item, TlPacker, Transfer};
use podlink_protocol::wire::tl_unpack::TlUnpacker;
use podlink_protocol::wire::{self, AccelId, TlField, Vc};

/// Device type an accelerator announces in the device ID exchange (podlink's code; the public
/// facts give the 2-bit field, not its values).
pub const DEVICE_TYPE_ACCELERATOR: u8 = 0;
/// Device type a switch announces in the device ID exchange (podlink's code).
pub const DEVICE_TYPE_SWITCH: u8 = 1;

/// Data half-flits the TL packer buffers: one 256 B partial write (9) and a spare.
const PACK_HALVES: usize = 10;

/// The credit target a TL stream starts at: the shared pool (`TlMessage::CreditTarget`).
const POOL: u8 = 4;

/// Parameters of a [`LinkPort`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkPortConfig {
    /// The link: retry parameters and this end's identity (device ID, type, port number).
    pub link: UaLinkConfig,
    /// What this end grants its peer (command credits ≤ receive slots).
    pub grant: ReceiverConfig,
    /// Send requests compressed where the address cache allows (`wire::AddrCache`, this
    /// link's encoder; feature `addr-compression`, without which nothing is compressed).
    /// Whatever this says, requests that arrive compressed are expanded (this link's
    /// decoder) before they are handed out, since the next link's caches are its own;
    /// without the feature they are dropped (`LinkPortStats::no_slot`).
    pub compress_requests: bool,
}

impl LinkPortConfig {
    /// A port announcing `device_type` / `device_id` / `port_number`, granting
    /// [`LinkPortConfig::grant_for_slots`]`(slots)`, with the protocol's default timers.
    pub fn new(device_type: u8, device_id: u16, port_number: u16, slots: usize) -> Self {
        LinkPortConfig {
            link: UaLinkConfig {
                control: ControlConfig {
                    device_type,
                    device_id,
                    port_number,
                    ..ControlConfig::default()
                },
                ..UaLinkConfig::default()
            },
            grant: ReceiverConfig {
                capacity: Self::grant_for_slots(slots),
                ..ReceiverConfig::default()
            },
            compress_requests: false,
        }
    }

    /// The default grant for `slots` receive slots: `slots / 8` request and response
    /// command credits per VC (with 4 data credits each, one 256 B frame), the rest in the
    /// shared pool (likewise with 4 data credits per command credit).
    pub fn grant_for_slots(slots: usize) -> [Credits; CreditTarget::COUNT] {
        let per = u16::try_from(slots / 8).unwrap_or(u16::MAX / 8);
        let rest = u16::try_from(slots.saturating_sub(8 * usize::from(per))).unwrap_or(0);
        let vc = Credits([per, per, per.saturating_mul(4), per.saturating_mul(4)]);
        let (rq, rs) = (rest - rest / 2, rest / 2);
        [
            vc,
            vc,
            vc,
            vc,
            Credits([rq, rs, rq.saturating_mul(4), rs.saturating_mul(4)]),
        ]
    }
}

/// [`LinkPort::new`] refused a grant of more command credits than receive slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GrantError {
    /// Command credits (both classes, every target) the configuration grants.
    pub command_credits: u32,
    /// Receive slots.
    pub slots: usize,
}

impl fmt::Display for GrantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "grant of {} command credits exceeds {} receive slots",
            self.command_credits, self.slots
        )
    }
}

/// Why a frame was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// The port is not up (link, identity exchange, or the peer's initial credit release).
    NotReady,
    /// The previous frame is still being packed (or a credit taken by
    /// [`PortLink::try_consume_credit`] awaits [`LinkPort::transmit`]): poll first.
    Busy,
    /// Not enough credits on the frame's VC nor in the pool (nothing was spent).
    NoCredit,
    /// [`LinkPort::transmit`] without a credit taken by [`PortLink::try_consume_credit`].
    NoGrant,
    /// The transfer breaks a field or packing rule.
    Invalid(wire::Error),
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::NotReady => f.write_str("port not up"),
            SendError::Busy => f.write_str("port busy packing"),
            SendError::NoCredit => f.write_str("no credit"),
            SendError::NoGrant => f.write_str("transmit without a consumed credit"),
            SendError::Invalid(e) => write!(f, "invalid transfer: {e}"),
        }
    }
}

/// Who is at the other end, from the link's device ID and port number exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerIdentity {
    /// Device type ([`DEVICE_TYPE_ACCELERATOR`], [`DEVICE_TYPE_SWITCH`]).
    pub device_type: u8,
    /// Device ID (an accelerator's is its accelerator ID).
    pub device_id: u16,
    /// The peer's port number.
    pub port_number: u16,
}

impl PeerIdentity {
    /// What the switch's tables call this peer: an accelerator, a switch (trunk), or
    /// `Unused` for a device type podlink does not know.
    pub fn attachment(&self) -> Attachment {
        match self.device_type {
            DEVICE_TYPE_ACCELERATOR => {
                Attachment::Accelerator(AccelId::from_bits_truncate(self.device_id))
            }
            DEVICE_TYPE_SWITCH => Attachment::Switch,
            _ => Attachment::Unused,
        }
    }
}

/// Counters of a [`LinkPort`] (the parts keep their own: [`LinkPort::link`],
/// [`LinkPort::credit_sender`], [`LinkPort::credit_receiver`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkPortStats {
    /// Requests and responses handed to the TL packer.
    pub frames_sent: u64,
    /// Requests and responses received into a slot.
    pub frames_received: u64,
    /// Received transfers the peer had no credits for (refused by the `CreditReceiver`,
    /// dropped).
    pub overruns: u64,
    /// Received transfers with credits but no free slot (only after a link reset while the
    /// owner still held slots; dropped, credits given back). Without the feature
    /// `addr-compression`, compressed requests too, which such a port cannot expand
    /// (`RxStore::put` refuses them: the firmware's `.text` has no room for a counter of
    /// their own).
    pub no_slot: u64,
    /// TL stream errors (the unpacker stops; the port stays down until reset).
    pub tl_errors: u64,
    /// TL flits the link refused (it was in `Fault`).
    pub tl_flits_lost: u64,
    /// Requests sent compressed (`LinkPortConfig::compress_requests`).
    pub requests_compressed: u64,
    /// Requests that arrived compressed, expanded before they were handed out.
    pub requests_expanded: u64,
    /// Compressed requests that could not be expanded (a cache way never loaded, a reserved
    /// `cmd`; feature `addr-compression`): dropped, their credits given back.
    pub expand_errors: u64,
    /// Link resets.
    pub resets: u64,
}

/// A switch port (or an accelerator's link end) over a protocol `UaLink<CAP, TXQ>` with
/// `SLOTS` receive slots.
///
/// Sans-IO like its parts: wire side [`LinkPort::handle_flit`] /
/// [`LinkPort::poll_transmit`] (one 640 B DL flit per call) / [`LinkPort::poll_timeout`] /
/// [`LinkPort::handle_timeout`] and PHY up/down; frame side [`LinkPort::send`] (endpoint use),
/// [`PortLink::try_consume_credit`] then [`LinkPort::transmit`] (switch use), and
/// [`LinkPort::next_arrival`] / [`LinkPort::frame`] / [`LinkPort::release`]. `now` never
/// decreases.
///
/// RAM: `size_of::<LinkPort<4, 8, 8>>()` is printed by the firmware (`RAM` line) and listed in
/// `spec-notes/switch.md#ram`; the replay buffer (`CAP` × 640 B), the DL control machine's
/// message queue and the `SLOTS` × 328 B receive slots dominate.
#[derive(Debug, Clone)]
pub struct LinkPort<const CAP: usize, const TXQ: usize, const SLOTS: usize> {
    link: UaLink<CAP, TXQ>,
    tx: CreditSender,
    rx: CreditReceiver,
    packer: TlPacker<PACK_HALVES>,
    unpacker: TlUnpacker,
    store: RxStore<SLOTS>,
    /// Address caches.
    caches: Caches,
    /// Target of the flow-control fields this end sends next.
    tx_target: u8,
    /// Target of the flow-control fields this end receives next.
    rx_target: u8,
    /// Credits taken by `try_consume_credit`, for the frame `transmit` sends next.
    grant: Option<CreditTarget>,
    stats: LinkPortStats,
    /// The time of the last [`LinkPort::poll_transmit`]: TL flits the link takes without a
    /// time of their own (a frame sent between timed calls) count their hold from it, so
    /// that the link's hold limit (`UaLinkConfig::hold_limit`, with the protocol crate's
    /// `hold-limit` feature) runs early for them, never late.
    clock: Instant,
}

/// The credits a field costs on one hop and where they come from (its VC or the pool).
fn credit_of(f: &TlField) -> Option<(CreditTarget, Credits)> {
    let beats = u16::try_from(DataShape::of(f).ok()?.beats).unwrap_or(u16::MAX);
    let (vc, pool, request) = match f {
        TlField::UncompressedRequest(r) => (r.vchan, r.pool, true),
        TlField::CompressedRequest(r) => (r.vchan, r.pool, true),
        TlField::UncompressedResponse(r) => (r.vchan, r.pool, false),
        TlField::CompressedReadResponse(r) => (r.vchan, r.pool, false),
        TlField::CompressedWriteResponse(r) => (r.vchan, r.pool, false),
        TlField::FlowControl(_) => return None,
    };
    let target = if pool {
        CreditTarget::Shared
    } else {
        CreditTarget::Vc(vc)
    };
    let needs = if request {
        Credits::request(beats)
    } else {
        Credits::response(beats)
    };
    Some((target, needs))
}

pub(super) fn set_pool(f: &mut TlField, pool: bool) {
    match f {
        TlField::UncompressedRequest(r) => r.pool = pool,
        TlField::CompressedRequest(r) => r.pool = pool,
        TlField::UncompressedResponse(r) => r.pool = pool,
        TlField::CompressedReadResponse(r) => r.pool = pool,
        TlField::CompressedWriteResponse(r) => r.pool = pool,
        TlField::FlowControl(_) => {}
    }
}

/// A port's address caches (`wire::AddrCache`): the decoder of what arrives, and the encoder
/// of what it sends when it compresses. Without the feature `addr-compression` (the soft-core
/// firmware, whose `.text` budget they would overrun) a stand-in that expands and compresses
/// nothing; `RxStore::put` then refuses compressed requests.
#[cfg(feature = "addr-compression")]
#[derive(Debug, Clone, Copy)]
struct Caches {
    decoder: wire::AddrCache,
    encoder: Option<wire::AddrCache>,
}

#[cfg(feature = "addr-compression")]
impl Caches {
    fn new(compress: bool) -> Self {
        Caches {
            decoder: wire::AddrCache::new(),
            encoder: compress.then(wire::AddrCache::new),
        }
    }

    fn clear(&mut self) {
        self.decoder.clear();
        if let Some(e) = self.encoder.as_mut() {
            e.clear();
        }
    }

    /// What goes on for a received field (`AddrCache::forward_request`); `Err` when a
    /// compressed request cannot be expanded.
    fn forward(&mut self, field: &TlField) -> Result<Option<wire::Forward>, wire::ExpandError> {
        self.decoder.forward_request(field)
    }

    /// Compress `t` if it is a request the encoder can compress; whether it did.
    fn encode(&mut self, t: &mut Transfer<'_>) -> bool {
        let (Some(enc), TlField::UncompressedRequest(r)) = (self.encoder.as_mut(), t.field) else {
            return false;
        };
        t.field = enc.encode_request(&r, t.byte_enables);
        let compressed = matches!(t.field, TlField::CompressedRequest(_));
        if compressed {
            t.byte_enables = None;
        }
        compressed
    }
}

#[cfg(not(feature = "addr-compression"))]
#[derive(Debug, Clone, Copy)]
struct Caches;

#[cfg(not(feature = "addr-compression"))]
impl Caches {
    fn new(_compress: bool) -> Self {
        Caches
    }

    fn clear(&mut self) {}

    /// Everything goes on as it is (`RxStore::put` refuses compressed requests).
    fn forward(
        &mut self,
        _field: &TlField,
    ) -> Result<Option<wire::Forward>, core::convert::Infallible> {
        Ok(None)
    }

    fn encode(&mut self, _t: &mut Transfer<'_>) -> bool {
        false
    }
}

/// Where the link delivers TL flits: unpack them into credits, messages and transfers.
struct Ingress<'a, const SLOTS: usize> {
    now: Instant,
    unpacker: &'a mut TlUnpacker,
    tx: &'a mut CreditSender,
    rx: &'a mut CreditReceiver,
    store: &'a mut RxStore<SLOTS>,
    caches: &'a mut Caches,
    rx_target: &'a mut u8,
    stats: &'a mut LinkPortStats,
}

impl<const SLOTS: usize> TlSink for Ingress<'_, SLOTS> {
    fn tl_flit(&mut self, flit: &[u8; TL_FLIT_LEN]) {
        // Every earlier flit was drained below, so the unpacker always takes this one.
        let _ = self.unpacker.handle_flit(flit);
        loop {
            let item = match self.unpacker.poll_item() {
                Ok(Some(item)) => item,
                Ok(None) => break,
                Err(_) => {
                    self.stats.tl_errors = self.stats.tl_errors.saturating_add(1);
                    break;
                }
            };
            match item {
                Item::Credits(fc) => {
                    let target =
                        CreditTarget::from_index(*self.rx_target).unwrap_or(CreditTarget::Shared);
                    self.tx.handle_return(target, &fc);
                }
                Item::Message(TlMessage::InitialCreditReleaseComplete) => {
                    self.tx.handle_initial_release_complete();
                }
                Item::Message(TlMessage::CreditTarget { target }) => *self.rx_target = target,
                Item::Message(_) => {}
                Item::Transfer(mut t) => {
                    let Some((target, needs)) = credit_of(&t.field) else {
                        continue;
                    };
                    if self.rx.handle_consumed(target, needs).is_err() {
                        // Dropped, but the decoder still sees it, as the peer's encoder did.
                        let _ = self.caches.forward(&t.field);
                        self.stats.overruns = self.stats.overruns.saturating_add(1);
                        continue;
                    }
                    // What is kept is what goes on: a compressed request expanded.
                    let enables;
                    let kept = match self.caches.forward(&t.field) {
                        Ok(f) => {
                            if let Some(f) = f {
                                if matches!(t.field, TlField::CompressedRequest(_)) {
                                    self.stats.requests_expanded =
                                        self.stats.requests_expanded.saturating_add(1);
                                }
                                t.field = TlField::UncompressedRequest(f.req);
                                enables = f.byte_enables;
                                if let Some(be) = enables.as_ref() {
                                    t.byte_enables = Some(be);
                                }
                            }
                            let kept = self.store.put(&t, target, needs);
                            if !kept {
                                self.stats.no_slot = self.stats.no_slot.saturating_add(1);
                            }
                            kept
                        }
                        Err(_) => {
                            self.stats.expand_errors = self.stats.expand_errors.saturating_add(1);
                            false
                        }
                    };
                    if kept {
                        self.stats.frames_received = self.stats.frames_received.saturating_add(1);
                    } else {
                        let _ = self.rx.release(self.now, target, needs);
                    }
                }
            }
        }
    }
}

impl<const CAP: usize, const TXQ: usize, const SLOTS: usize> LinkPort<CAP, TXQ, SLOTS> {
    /// A port whose link is down (`Idle`), with every credit of `cfg.grant` pending its
    /// initial release.
    ///
    /// # Errors
    /// [`GrantError`] when the grant has more command credits than `SLOTS`.
    pub fn new(cfg: LinkPortConfig) -> Result<Self, GrantError> {
        let command_credits = cfg.grant.capacity.iter().fold(0u32, |a, c| {
            a.saturating_add(u32::from(c.get(CreditClass::ReqCmd)))
                .saturating_add(u32::from(c.get(CreditClass::RspCmd)))
        });
        if usize::try_from(command_credits).map_or(true, |c| c > SLOTS) {
            return Err(GrantError {
                command_credits,
                slots: SLOTS,
            });
        }
        let mut p = LinkPort {
            link: UaLink::new(cfg.link),
            tx: CreditSender::new(),
            rx: CreditReceiver::new(cfg.grant),
            packer: TlPacker::new(),
            unpacker: TlUnpacker::new(),
            store: RxStore::new(),
            caches: Caches::new(cfg.compress_requests),
            tx_target: POOL,
            rx_target: POOL,
            grant: None,
            stats: LinkPortStats::default(),
            clock: Instant::ZERO,
        };
        p.pump(Instant::ZERO);
        Ok(p)
    }

    // ---- getters ----

    /// The link (state, retry and control counters, peer identity).
    pub fn link(&self) -> &UaLink<CAP, TXQ> {
        &self.link
    }
    /// Credits toward the peer.
    pub fn credit_sender(&self) -> &CreditSender {
        &self.tx
    }
    /// Credits granted to the peer.
    pub fn credit_receiver(&self) -> &CreditReceiver {
        &self.rx
    }
    /// Counters.
    pub fn stats(&self) -> &LinkPortStats {
        &self.stats
    }
    /// Receive slots held (arrived, not yet released).
    pub fn held_slots(&self) -> usize {
        self.store.held()
    }

    /// Up: link Up, identities exchanged, the peer's initial credit release complete, and
    /// the TL stream intact.
    pub fn is_ready(&self) -> bool {
        self.link.state() == LinkState::Up
            && self.link.control().is_identified()
            && self.tx.initial_release_complete()
            && self.unpacker.failed().is_none()
    }

    /// The peer, once the device ID and port number exchange has told it.
    pub fn peer(&self) -> Option<PeerIdentity> {
        let c = self.link.control();
        let d = c.peer_device().filter(|d| d.valid)?;
        let p = c.peer_port().filter(|p| p.valid)?;
        Some(PeerIdentity {
            device_type: d.r#type,
            device_id: d.id,
            port_number: p.port_number,
        })
    }

    // ---- wire side ----

    /// The PHY is up: the link starts its NOP exchange, then the control exchange.
    pub fn handle_link_up(&mut self, now: Instant) {
        self.link.handle_link_up(now);
        self.pump(now);
    }

    /// The PHY went down. Nothing is lost: the link replays after the next link up, and the
    /// TL stream and credits continue where they were.
    pub fn handle_link_down(&mut self, now: Instant) {
        self.link.handle_link_down(now);
    }

    /// Leave `Fault` (the peer must reset too): the link, TL stream and credits restart.
    /// Frames that arrived but were not handed out are dropped; slots the owner holds stay
    /// valid until released but return no credits, and the new initial credit release waits
    /// until they are all released (so the peer never has credits for a slot in use).
    pub fn reset(&mut self, now: Instant) {
        self.link.reset(now);
        self.packer.reset();
        self.unpacker.reset();
        self.tx.reset();
        self.rx.reset();
        self.store.reset();
        self.caches.clear();
        self.tx_target = POOL;
        self.rx_target = POOL;
        self.grant = None;
        self.stats.resets = self.stats.resets.saturating_add(1);
        self.pump(now);
    }

    /// A DL flit arrived.
    pub fn handle_flit(&mut self, now: Instant, bytes: &[u8]) {
        let LinkPort {
            link,
            tx,
            rx,
            unpacker,
            store,
            caches,
            rx_target,
            stats,
            ..
        } = self;
        let mut sink = Ingress {
            now,
            unpacker,
            tx,
            rx,
            store,
            caches,
            rx_target,
            stats,
        };
        link.handle_flit(now, bytes, &mut sink);
        self.pump(now);
    }

    /// Fire expired timers (link retry and control, credit return coalescing).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.link.handle_timeout(now);
        self.rx.handle_timeout(now);
        self.pump(now);
    }

    /// The earliest timer deadline.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        earliest(self.link.poll_timeout(), self.rx.poll_timeout())
    }

    /// Write the next DL flit into `buf` (at least 640 B); one per call.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.clock = now;
        self.pump(now);
        let n = self.link.poll_transmit(now, buf);
        self.pump(now);
        n
    }

    /// The link's next event (state changes, replays, Fault, peer identified), if any.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<UaLinkEvent> {
        self.link.poll_event()
    }

    // ---- frame side ----

    /// The slot of the oldest frame that arrived and was not handed out yet.
    pub fn next_arrival(&mut self) -> Option<u8> {
        self.store.next_arrival()
    }

    /// The frame held in `slot`.
    pub fn frame(&self, slot: u8) -> Option<&RxFrame> {
        self.store.frame(slot)
    }

    /// The frame in `slot` has left (or was dropped): free the slot and return its credits
    /// to the peer. `false` when the slot was not held.
    pub fn release(&mut self, now: Instant, slot: u8) -> bool {
        let Some(h) = self.store.free(slot) else {
            return false;
        };
        if let Some((target, credits)) = h.credits {
            // Cannot fail: the slot's credits are in use until this release.
            let _ = self.rx.release(now, target, credits);
        }
        self.pump(now);
        true
    }

    /// Send a request or response as an endpoint: take its credits from its VC or else the
    /// pool, set the `pool` bit accordingly, and queue it. Returns where the credits came
    /// from.
    ///
    /// # Errors
    /// [`SendError`]; nothing was spent.
    pub fn send(&mut self, t: &Transfer<'_>) -> Result<CreditTarget, SendError> {
        if !self.is_ready() {
            return Err(SendError::NotReady);
        }
        if self.grant.is_some() || !self.packer.is_idle() {
            return Err(SendError::Busy);
        }
        t.check().map_err(SendError::Invalid)?;
        t.field.emit(&mut [0u8; 16]).map_err(SendError::Invalid)?;
        let (_, needs) = credit_of(&t.field).ok_or(SendError::Invalid(wire::Error::Packing(
            wire::tl_flit::rule::FLOW_CONTROL_TRANSFER,
        )))?;
        let vc = Header::from_tl(&t.field).vc;
        let target = self
            .tx
            .consume_vc_or_pool(vc, needs)
            .map_err(|_| SendError::NoCredit)?;
        self.push_transfer(t, target)?;
        Ok(target)
    }

    /// Send a frame the switch forwards here, after [`PortLink::try_consume_credit`] took its
    /// credits (the switch's [`crate::Forwarded::CutThrough`] or [`crate::Transmit`]).
    ///
    /// # Errors
    /// [`SendError::NoGrant`] when no credit was taken; [`SendError::Invalid`] (the credits
    /// are spent) for a frame that does not pack, which a received frame never is.
    pub fn transmit(&mut self, frame: &RxFrame) -> Result<(), SendError> {
        let target = self.grant.take().ok_or(SendError::NoGrant)?;
        self.push_transfer(&frame.transfer(), target)
    }

    fn push_transfer(&mut self, t: &Transfer<'_>, target: CreditTarget) -> Result<(), SendError> {
        let mut t = *t;
        // A request goes through the encoder (on a copy of the caches, kept only once the
        // packer took the request: the peer's decoder sees exactly what was sent).
        let mut caches = self.caches;
        let compressed = caches.encode(&mut t);
        set_pool(&mut t.field, target == CreditTarget::Shared);
        self.packer.push(&Item::Transfer(t)).map_err(|e| match e {
            wire::TlPushError::Invalid(e) => SendError::Invalid(e),
            wire::TlPushError::Full => SendError::Busy,
        })?;
        self.caches = caches;
        if compressed {
            self.stats.requests_compressed = self.stats.requests_compressed.saturating_add(1);
        }
        self.stats.frames_sent = self.stats.frames_sent.saturating_add(1);
        self.pump(self.clock);
        Ok(())
    }

    /// Move packed TL flits into the link while it has room; when the packer is idle, queue
    /// the next credit return (a credit-target message first if the target changes).
    /// (Never inlined: it is called from every entry point, and the firmware's .text is
    /// budgeted.)
    #[inline(never)]
    fn pump(&mut self, now: Instant) {
        loop {
            while self.link.tx_room() > 0 {
                let mut f = [0u8; TL_FLIT_LEN];
                if self.packer.poll_flit(&mut f).is_none() {
                    break;
                }
                if self.link.submit_tl_flit(now, &f).is_err() {
                    self.stats.tl_flits_lost = self.stats.tl_flits_lost.saturating_add(1);
                }
            }
            if !self.packer.is_idle()
                || self.store.orphans() > 0
                || self.link.state() == LinkState::Fault
            {
                return;
            }
            let items = match self.rx.poll_return() {
                None => return,
                Some(CreditOutput::InitialReleaseComplete) => [
                    None,
                    Some(Item::Message(TlMessage::InitialCreditReleaseComplete)),
                ],
                Some(CreditOutput::Return { target, fc }) => {
                    let t = u8::try_from(target.index()).unwrap_or(0);
                    let select = (t != self.tx_target)
                        .then_some(Item::Message(TlMessage::CreditTarget { target: t }));
                    self.tx_target = t;
                    [select, Some(Item::Credits(fc))]
                }
            };
            for item in items.iter().flatten() {
                // An idle packer has room for a message and a flow-control field.
                let _ = self.packer.push(item);
            }
        }
    }
}

impl<const CAP: usize, const TXQ: usize, const SLOTS: usize> PortLink
    for LinkPort<CAP, TXQ, SLOTS>
{
    fn is_up(&self) -> bool {
        self.is_ready()
    }

    /// Command credits (either class) the frame's VC and the pool hold: an upper bound on
    /// the frames the peer can take now, used to compare ports.
    fn tx_credits(&self, vc: Vc) -> u32 {
        if !self.is_ready() {
            return 0;
        }
        [CreditTarget::Vc(vc), CreditTarget::Shared]
            .into_iter()
            .flat_map(|t| {
                [CreditClass::ReqCmd, CreditClass::RspCmd].map(|c| self.tx.available(t, c))
            })
            .fold(0u32, u32::saturating_add)
    }

    /// Take the protocol credits of the frame (command class by kind, one data credit per
    /// beat, own VC first, else the pool) if the port is up and its packer can take the
    /// frame now; the next [`LinkPort::transmit`] sends it.
    fn try_consume_credit(&mut self, h: &Header) -> bool {
        if !self.is_ready() || self.grant.is_some() || !self.packer.is_idle() {
            return false;
        }
        let needs = match h.kind {
            FrameKind::Request => Credits::request(u16::from(h.beats)),
            FrameKind::Response => Credits::response(u16::from(h.beats)),
            FrameKind::LinkLocal => return false,
        };
        match self.tx.consume_vc_or_pool(h.vc, needs) {
            Ok(target) => {
                self.grant = Some(target);
                true
            }
            Err(_) => false,
        }
    }

    /// The link's retry counters: CRC errors received; replays = rewinds of this end's
    /// transmitter plus replays this end's receiver requested (an error in either direction
    /// counts once); flaps = link-down transitions plus faults.
    fn stats(&self) -> LinkStats {
        let r = self.link.retry().stats();
        let low = |v: u64| v as u32;
        LinkStats {
            crc_errors: low(r.crc_errors),
            replays: low(r.replays.wrapping_add(r.replay_requests_issued)),
            flaps: low(r.link_downs.wrapping_add(r.faults)),
        }
    }
}
