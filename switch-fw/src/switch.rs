//! The switch: forwarding decision, egress scheduling, health and table banks
//! (`spec-notes/switch.md#pipeline`).

use crate::config::{self, ConfigError};
use crate::egress::{Egress, LANES};
use crate::event::{Counters, DropReason, Event};
use crate::header::{FrameKind, Header};
use crate::health::{Health, HealthMonitor, HealthPolicy, TransceiverReading};
use crate::port::PortLink;
use crate::tables::{map_at, Attachment, PortIndex, Tables, INGRESS_TRUNK, NO_PART};
use crate::{EVENT_QUEUE, FLOW_BUCKETS, MAX_IDS, MAX_PARTITIONS, MAX_PORTS, NUM_VCS};
use heapless::Deque;
#[cfg(feature = "residence-limit")]
use podlink_protocol::time::Duration;
use podlink_protocol::time::Instant;
use podlink_protocol::wire::{AccelId, Vc};

const FLOW_BITS: u32 = FLOW_BUCKETS.trailing_zeros();
const _: () = assert!(1 << FLOW_BITS == FLOW_BUCKETS);

/// Score tier of a healthy port (degraded ports score below every healthy one).
const HEALTHY_TIER: u16 = 0x4000;
/// Centre of the load part of a score, so that it stays ≥ 1.
const LOAD_BIAS: u16 = 0x2000;
const LOAD_CLAMP: u32 = 0x1fff;

/// A frame offered to the switch: the caller's buffer handle, its header and its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// The caller's handle for the frame's bytes (the switch never touches them).
    pub handle: u32,
    /// Routing fields.
    pub header: Header,
    /// Size on the wire in bytes (for rate caps).
    pub bytes: u16,
}

/// What [`Switch::forward`] did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forwarded {
    /// Sent at once on `port` (the egress VC was idle and had credit): start transmitting.
    CutThrough {
        /// Egress port.
        port: u16,
    },
    /// Queued at `port`; it leaves through [`Switch::poll_transmit`].
    Queued {
        /// Egress port.
        port: u16,
    },
}

impl Forwarded {
    /// The egress port.
    pub fn port(self) -> u16 {
        match self {
            Forwarded::CutThrough { port } | Forwarded::Queued { port } => port,
        }
    }
}

/// A queued frame the caller must now send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Egress port.
    pub port: u16,
    /// The caller's handle.
    pub handle: u32,
    /// The frame's header.
    pub header: Header,
}

/// Error of [`Switch::commit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommitError {
    /// No validated configuration is staged; the tables in force are unchanged.
    NothingStaged,
}

/// One entry of the flow-pin table: the port a flow's requests leave on while any is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FlowPin<P: PortIndex> {
    /// [`flow_key`] of the flow (0: empty).
    key: u64,
    /// [`Switch`]'s table serial when the port was chosen: while it is unchanged the port is
    /// still one of the destination's ways.
    serial: u32,
    /// The source's generation when the flow last sent ([`SrcOrder::gen`]).
    epoch: u16,
    port: P,
}

impl<P: PortIndex> FlowPin<P> {
    const EMPTY: FlowPin<P> = FlowPin {
        key: 0,
        serial: 0,
        epoch: 0,
        port: P::NONE,
    };
}

/// Per attached accelerator: its unanswered requests in two generations.
///
/// Every request forwarded from the source is counted in the current generation `gen` (and
/// its tag remembers which); its last response uncounts it from that generation. When the
/// previous generation has no unanswered request left, the current one becomes the previous
/// and a new one starts, so only the current and the previous generation can have unanswered
/// requests. A flow that last sent in generation `g` has its requests in `g` or earlier;
/// its pin (or hash decision) therefore holds while `g` is the current generation and either
/// generation has unanswered requests, or `g` is the previous one and still has some. After
/// that none of its requests is in flight.
/// Under steady load generations keep turning over (each lasts about one round trip), unlike
/// a single count that seldom returns to zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SrcOrder {
    /// Unanswered requests of the generations with even and odd numbers.
    count: [u16; 2],
    /// The current generation.
    gen: u16,
    /// How many generations back decisions hold (0, 1 or 2; kept by [`SrcOrder::settle`]):
    /// decisions of generation `g` hold while `gen - g < span`.
    span: u16,
    /// Per generation parity, the pin slots (modulo [`HASH_BITS`]) from which a request of
    /// this source went by hash in that generation because the slot held another live flow.
    /// While the generation holds, every flow of the source in such a slot goes by hash (one
    /// that finds the slot free then takes it, on its hash port), so a hashed flow never
    /// switches to a free choice while its hashed requests are in flight; the source's flows in
    /// other slots are unaffected (a few more in slots with the same residue go by hash too).
    hashed: [[u32; HASH_WORDS]; 2],
    /// The marks that hold now: the current generation's if `span ≥ 1`, or'ed with the
    /// previous one's if `span = 2` (kept by `settle`, so that the forwarding path tests one
    /// bit).
    live: [u32; HASH_WORDS],
    /// The generation that was current when a port of the switch last went down or failed
    /// (valid while `fenced`): while it holds, requests of this source that went by hash
    /// before the loss may still be in flight beyond the lost port, so a marked flow whose
    /// hash way is lost must not go another way (`spec-notes/switch.md#ordering-rule`).
    fence: u16,
    /// `fence` is set and still holds (cleared by `settle` once it no longer does, so that
    /// generation numbers wrapping around cannot revive it).
    fenced: bool,
}

/// Hash-mark bits per source and generation.
const HASH_BITS: usize = 256;
const HASH_WORDS: usize = HASH_BITS / 32;

const SRC_IDLE: SrcOrder = SrcOrder {
    count: [0; 2],
    gen: 2,
    span: 0,
    hashed: [[0; HASH_WORDS]; 2],
    live: [0; HASH_WORDS],
    fence: 0,
    fenced: false,
};

impl SrcOrder {
    /// Whether a decision last taken in generation `g` still holds: `g` is the current
    /// generation and either has unanswered requests, or `g` is the previous one and still has
    /// some (two instructions on the forwarding path, thanks to `span`).
    #[inline(always)]
    fn holds(&self, g: u16) -> bool {
        self.gen.wrapping_sub(g) < self.span
    }

    /// Whether a flow of this source in pin slot `slot` must go by hash.
    #[inline(always)]
    fn hashed_at(&self, slot: usize) -> bool {
        let w = self.live.get((slot >> 5) & (HASH_WORDS - 1)).copied();
        w.unwrap_or(0) >> (slot & 31) & 1 != 0
    }

    /// Mark `slot` in generation `g` (the current one).
    #[inline(never)]
    fn mark(&mut self, slot: usize, g: u16) {
        let (w, bit) = ((slot >> 5) & (HASH_WORDS - 1), 1u32 << (slot & 31));
        if let Some(x) = self
            .hashed
            .get_mut(usize::from(g & 1))
            .and_then(|m| m.get_mut(w))
        {
            *x |= bit;
        }
        if let Some(x) = self.live.get_mut(w) {
            *x |= bit;
        }
    }

    /// Uncount an answered (or given up) request of the generation with parity `odd`.
    #[inline(never)]
    fn uncount(&mut self, odd: bool) {
        let [even, o] = &mut self.count;
        let c = if odd { o } else { even };
        *c = c.saturating_sub(1);
    }

    /// Count a request forwarded now (after turning the generations over if the previous
    /// one is answered); returns its generation. `settling`: some port of the switch is
    /// joining ([`SrcOrder::settle`]).
    #[inline(never)]
    fn add(&mut self, settling: bool) -> u16 {
        self.settle(settling);
        let g = self.gen;
        let [even, odd] = &mut self.count;
        let (c, other) = if g & 1 == 0 { (even, odd) } else { (odd, even) };
        *c = c.saturating_add(1);
        let span = if *other != 0 { 2 } else { 1 };
        self.set_span(span);
        g
    }

    /// Set `span` and the live marks that follow from it.
    #[inline(never)]
    fn set_span(&mut self, span: u16) {
        self.span = span;
        let [even, odd] = self.hashed;
        let (a, b) = if self.gen & 1 == 0 {
            (even, odd)
        } else {
            (odd, even)
        };
        for ((l, x), y) in self.live.iter_mut().zip(a).zip(b) {
            *l = match span {
                0 => 0,
                1 => x,
                _ => x | y,
            };
        }
    }

    /// After a count changed: turn the generations over while the previous one is fully
    /// answered and the current one has requests, and recompute `span`. A fence that no
    /// longer holds is cleared, but not while a port is joining (`settling`): see
    /// [`SrcOrder::fence_holds`].
    #[inline(never)]
    fn settle(&mut self, settling: bool) {
        let prev_odd = self.gen & 1 == 0;
        let [even, odd] = self.count;
        let (prev, cur) = if prev_odd { (odd, even) } else { (even, odd) };
        if prev == 0 && cur != 0 {
            // The new previous generation has requests: decisions of both hold. The new
            // current generation starts without marks (its parity's last one is answered).
            self.gen = self.gen.wrapping_add(1);
            let [he, ho] = &mut self.hashed;
            *(if prev_odd { ho } else { he }) = [0; HASH_WORDS];
            self.set_span(2);
            return;
        }
        let span = if prev != 0 { 2 } else { u16::from(cur != 0) };
        self.set_span(span);
        if self.fenced && !settling && !self.holds(self.fence) {
            self.fenced = false;
        }
    }

    /// Requests of this source from before the last port loss may still be in flight; or
    /// the source was fenced and a port is joining (`settling`): then its hashed flows keep
    /// the fenced rule until every port has joined. Their requests sent under it (on their
    /// hash ways, which the fenced level may let them take while their bucket's level keeps
    /// other flows away) may still be in flight when the fence itself expires; under their
    /// bucket's level the next ones could be diverted and overtake them.
    #[inline(always)]
    fn fence_holds(&self, settling: bool) -> bool {
        self.fenced && (settling || self.holds(self.fence))
    }
}

/// Tags per requester (11-bit tags).
const TAGS: usize = 2048;

/// Buckets (by flow hash) of hashed flows for settling after a port comes back: each has a
/// level (the joining ports its flows no longer keep away from), raised by every settling
/// window in which none of its flows was diverted (`spec-notes/switch.md#settling`).
const DIVERT_BUCKETS: u32 = u32::BITS;

/// The divert bucket of a flow hash as a one-bit mask (from the low bits: the way is chosen
/// by the high ones).
const fn divert_bucket(hash: u32) -> u32 {
    1 << (hash % DIVERT_BUCKETS)
}

/// Per port with an accelerator attached, per tag: the request is unanswered (`open`) and
/// the parity of the generation that counts it (`odd`).
struct TagTable<const PORTS: usize> {
    open: [[u64; TAGS / 64]; PORTS],
    odd: [[u64; TAGS / 64]; PORTS],
}

impl<const PORTS: usize> TagTable<PORTS> {
    /// The `open` and `odd` words of (`port`, `tag`) and the tag's bit in them.
    #[inline(always)]
    fn words<P: PortIndex>(&mut self, port: P, tag: u16) -> Option<(&mut u64, &mut u64, u64)> {
        let w = usize::from(tag >> 6) & (TAGS / 64 - 1);
        let p = usize::from(port.get());
        let o = self.open.get_mut(p)?.get_mut(w)?;
        let d = self.odd.get_mut(p)?.get_mut(w)?;
        Some((o, d, 1u64 << (tag & 63)))
    }
}

/// The exact key of a flow: valid bit, VC, destination, source, region.
#[inline(always)]
fn flow_key(src: u16, h: &Header) -> u64 {
    (1 << 63)
        | (u64::from(h.vc.get()) << 52)
        | (u64::from(h.dst.get()) << 42)
        | (u64::from(src & 0x3ff) << 32)
        | u64::from(h.region)
}

/// The source of a pin's key.
#[inline(always)]
fn key_src(key: u64) -> usize {
    ((key >> 32) & 0x3ff) as usize
}

/// A stateless table-routing switch of up to `PORTS` ports, whose tables store port numbers
/// as `P` ([`PortIndex`]). The default instance, `Switch` = `Switch<64, u8>`, is the
/// firmware's; the simulator also runs wider instances (e.g. `Switch<1024, u16>`). Every
/// instance runs the same code; port numbers are `u16` at the interface.
///
/// Sans-IO: the caller feeds frames ([`Switch::forward`]), link readings
/// ([`Switch::refresh_port`], [`Switch::set_transceiver`]) and time
/// ([`Switch::handle_timeout`]), and drains outputs ([`Switch::poll_transmit`],
/// [`Switch::poll_event`]).
///
/// # Polling order
/// After any input: `poll_transmit` until `None`, then `poll_event` until `None`, then sleep
/// until [`Switch::poll_timeout`] or the next input (a frame, or credits returned on a port:
/// call `refresh_port` then `poll_transmit`).
///
/// # Time
/// `now` must never decrease between calls.
///
/// # Ordering rule
/// Requests of one (source, destination, VC, 256 B region) leave on the same port while any is
/// in flight, where "in flight" means *not yet answered*: the switch counts, per attached
/// source, the requests it forwarded in two *generations* (each request's tag remembers its
/// generation; the last response with that tag uncounts it), and starts a new generation when
/// the previous one is fully answered. A flow's pin (an exact-keyed entry of a
/// [`FLOW_BUCKETS`]-entry direct-mapped table) is re-stamped by each of its requests and holds
/// while the generation it was stamped in may still have requests in flight, so pins expire
/// about one round trip after a flow's last request even when its source is never idle. A flow
/// whose slot is held by another live flow goes by deterministic hash (health below Failed is
/// ignored, so it never moves while in flight), and marks the slot for its source until that
/// generation is answered. Requests arriving on trunks (sources not attached here, whose
/// responses need not pass here) always go by deterministic hash. Counting assumes what UALink
/// routing gives: an accelerator's responses return through the switch its requests entered
/// by, and its tags are unique among its unanswered requests through one switch
/// (`spec-notes/switch.md#ordering-rule`); lost requests only keep pins longer (until their
/// tag is reused).
pub struct Switch<const PORTS: usize = MAX_PORTS, P: PortIndex = u8> {
    banks: [Tables<PORTS, P>; 2],
    active: u8,
    staged: bool,
    /// Per VC, the score of each port number (every value of `P`; 0 beyond `PORTS`).
    score: [P::Map; NUM_VCS],
    credits: [[u32; NUM_VCS]; PORTS],
    up: [bool; PORTS],
    flows: [FlowPin<P>; FLOW_BUCKETS],
    srcs: [SrcOrder; MAX_IDS],
    tags: TagTable<PORTS>,
    /// Bumped by every commit (the tables in force changed).
    serial: u32,
    health: [HealthMonitor; PORTS],
    policy: HealthPolicy,
    next_window: Instant,
    egress: Egress<PORTS>,
    counters: Counters<PORTS>,
    events: Deque<Event, EVENT_QUEUE>,
    tx_rr: u16,
    /// Per port: the order in which it last came back (up, or out of Failed), counted over
    /// the switch's life from 1; 0 if it never did (`spec-notes/switch.md#settling`). While
    /// ports are settling, hashed flows keep away from ports that came back after their
    /// bucket's level.
    joining: [u32; PORTS],
    /// Ports that came back so far (the last `joining` order given).
    joined: u32,
    /// `joined` when the current settling episode started.
    base: u32,
    /// A settling episode is under way: some bucket's level is below `joined`.
    settling: bool,
    /// Per bucket of hashed flows (by flow hash): the joining ports its flows no longer keep
    /// away from are those that came back at or before this level. Raised to `joined` by
    /// every window in which no flow of the bucket was diverted.
    level: [u32; DIVERT_BUCKETS as usize],
    /// The level of every flow whose source is fenced (it is dropped rather than diverted):
    /// `joined` at the end of every window, `base` after a port is lost.
    level_fenced: u32,
    /// One bit per bucket: a flow of the bucket was sent in this window to another way than
    /// its settled one, because that one was joining. Its diverted requests may still be
    /// queued on the other way, so the bucket keeps its level for the next window too.
    diverted: u32,
    /// When the current settling window ends (windows last `policy.settle`; the first one
    /// starts at the switch's clock when the last port came back).
    settle_until: Instant,
    /// The time of the last frame handed to [`Switch::forward`] (settling is counted from
    /// there: nothing the switch sent can be younger).
    clock: Instant,
    /// The residence limit: a frame older than this (from its arrival at the switch) is
    /// dropped instead of forwarded or sent ([`Duration::MAX`]: no limit).
    #[cfg(feature = "residence-limit")]
    max_residence: Duration,
}

impl<const PORTS: usize, P: PortIndex> Default for Switch<PORTS, P> {
    fn default() -> Self {
        Self::empty()
    }
}

impl Switch {
    /// The default (firmware) instance, as [`Switch::empty`].
    pub fn new() -> Switch {
        Switch::empty()
    }
}

/// Mix the flow key (source, destination, VC, region) into 32 bits.
#[inline(always)]
fn flow_hash(h: &Header) -> u32 {
    let src = u32::from(h.src.map_or(0x3ff, |s| s.get()));
    let key = (src << 12) | (u32::from(h.dst.get()) << 2) | u32::from(h.vc.get());
    let x = key.wrapping_mul(0x9e37_79b1) ^ h.region.wrapping_mul(0x85eb_ca77);
    x ^ (x >> 15)
}

/// The first usable way (up, not Failed) from the flow's hash way. Health below Failed does
/// not move a hashed flow: its requests may be in flight, and only the ordering rule's own
/// bookkeeping (a flow's pin or hash mark expiring) can tell when they are not; a Degraded
/// port is drained of the flows that choose freely (`spec-notes/switch.md#ordering-rule`).
#[inline]
fn stick_hash<P: PortIndex>(
    ways: &[P],
    hash: u32,
    score: impl Fn(P) -> u16,
) -> Result<P, DropReason> {
    let n = ways.len();
    let start = ((u64::from(hash) * n as u64) >> 32) as usize;
    for k in 0..n {
        let p = ways.get((start + k) % n).copied().unwrap_or(P::NONE);
        if score(p) != 0 {
            return Ok(p);
        }
    }
    Err(DropReason::Unreachable)
}

/// `p` if it is the flow's hash way, else [`DropReason::PinLost`]: a marked flow whose hash
/// way was lost while requests of its source from before the loss are unanswered must not
/// move (its earlier requests may be in flight beyond the lost way).
#[inline(never)]
fn held_if_moved<P: PortIndex>(ways: &[P], hash: u32, p: P) -> Result<P, DropReason> {
    let start = ((u64::from(hash) * ways.len() as u64) >> 32) as usize;
    if ways.get(start) == Some(&p) {
        Ok(p)
    } else {
        Err(DropReason::PinLost)
    }
}

impl<const PORTS: usize, P: PortIndex> Switch<PORTS, P> {
    /// A switch with empty tables (it drops everything until a configuration is committed)
    /// and the default health policy. Every port is down until [`Switch::refresh_port`].
    ///
    /// The value is large (a few KiB per port plus about 300 KiB); a wide instance is best
    /// built on a thread with a large stack.
    pub fn empty() -> Self {
        Switch {
            banks: [Tables::empty(), Tables::empty()],
            active: 0,
            staged: false,
            score: [P::map(0); NUM_VCS],
            credits: [[0; NUM_VCS]; PORTS],
            up: [false; PORTS],
            flows: [FlowPin::EMPTY; FLOW_BUCKETS],
            srcs: [SRC_IDLE; MAX_IDS],
            tags: TagTable {
                open: [[0; TAGS / 64]; PORTS],
                odd: [[0; TAGS / 64]; PORTS],
            },
            serial: 0,
            health: [HealthMonitor::new(); PORTS],
            policy: HealthPolicy::default(),
            next_window: Instant::ZERO,
            egress: Egress::new(),
            counters: Counters::zero(),
            events: Deque::new(),
            tx_rr: 0,
            joining: [0; PORTS],
            joined: 0,
            base: 0,
            settling: false,
            level: [0; DIVERT_BUCKETS as usize],
            level_fenced: 0,
            diverted: 0,
            settle_until: Instant::ZERO,
            clock: Instant::ZERO,
            #[cfg(feature = "residence-limit")]
            max_residence: Duration::MAX,
        }
    }

    /// Replace the health policy.
    pub fn set_health_policy(&mut self, p: HealthPolicy) {
        self.policy = p;
    }

    /// Set the residence limit (`None`, the default: none). A frame that has been in the
    /// switch longer than `limit`, counted from its arrival ([`Switch::forward_aged`]), is
    /// dropped when it would move on (into an egress queue or onto its egress link) and
    /// counted as [`DropReason::Expired`]; a queued one is handed back through
    /// [`Switch::poll_discarded`]. Its requester has given up on it by then, so delivering it
    /// late could overtake requests sent since: with the limit, how long a request can stay
    /// in the fabric is bounded (`spec-notes/switch.md#residence-limit`).
    #[cfg(feature = "residence-limit")]
    pub fn set_max_residence(&mut self, limit: Option<Duration>) {
        self.max_residence = limit.unwrap_or(Duration::MAX);
    }

    /// The residence limit.
    #[cfg(feature = "residence-limit")]
    pub fn max_residence(&self) -> Option<Duration> {
        (self.max_residence != Duration::MAX).then_some(self.max_residence)
    }

    /// Whether a frame that arrived at `arrived` is past the residence limit at `now`.
    #[cfg(feature = "residence-limit")]
    #[inline(always)]
    fn expired(&self, arrived: Instant, now: Instant) -> bool {
        now.saturating_since(arrived) > self.max_residence
    }

    /// The tables in force.
    #[inline(always)]
    pub fn tables(&self) -> &Tables<PORTS, P> {
        // `active` is 0 or 1; the mask lets the compiler drop the bounds check.
        let [a, b] = &self.banks;
        if self.active & 1 == 0 {
            a
        } else {
            b
        }
    }

    fn staging(&mut self) -> &mut Tables<PORTS, P> {
        let i = usize::from((self.active ^ 1) & 1);
        let [a, b] = &mut self.banks;
        if i == 0 {
            a
        } else {
            b
        }
    }

    /// Counters.
    pub fn counters(&self) -> &Counters<PORTS> {
        &self.counters
    }

    /// Health of port `p` (`Healthy` for out-of-range ports).
    pub fn health(&self, p: u16) -> Health {
        self.health
            .get(usize::from(p))
            .map_or(Health::Healthy, HealthMonitor::state)
    }

    /// Frames queued at (port, VC).
    pub fn queue_depth(&self, port: u16, vc: Vc) -> u16 {
        self.egress.depth(port, vc.get())
    }

    /// Frames queued in the whole switch (flushed frames not yet taken back included).
    pub fn queued_frames(&self) -> u16 {
        self.egress.used()
    }

    /// Whether [`Switch::forward`] would find a queue descriptor for a frame with header `h`
    /// arriving on port `ingress` should it have to queue it. Requests may hold at most
    /// `QUEUE_SLOTS - RESPONSE_RESERVE` descriptors, and one partition's requests fewer than
    /// four times the request descriptors still free (a dynamic threshold, so one tenant
    /// cannot fill the switch); responses may take any. Frames going up (from an accelerator
    /// port to an accelerator attached to another switch) leave reserves to those bound for
    /// this switch's accelerators ([`crate::UPLINK_RESERVE`],
    /// [`crate::UPLINK_RESPONSE_RESERVE`]). A caller that buffers frames
    /// ahead of the switch (an ingress FIFO) holds a frame there while this is false, per
    /// flow, so that a waiting request never holds up a response
    /// (`spec-notes/switch.md#buffers-and-deadlock`).
    #[must_use]
    pub fn has_room(&self, ingress: u16, h: &Header) -> bool {
        let (part, up) = self.tables().frame_class(ingress, h.dst);
        self.egress.has_room(h, part, up)
    }

    /// The handle of a frame flushed from a port that went down or failed (oldest first),
    /// so that the caller can free its buffer. Flushed frames hold a queue descriptor until
    /// taken back here: drain this after every [`Event::Flushed`].
    #[must_use]
    pub fn poll_discarded(&mut self) -> Option<u32> {
        self.egress.pop_discard().map(|s| s.handle)
    }

    /// Flushed frames whose handles [`Switch::poll_discarded`] has not handed back yet.
    pub fn discarded_frames(&self) -> u16 {
        self.egress.discarded()
    }

    /// The port requests of `h`'s flow are pinned to, while the flow is in flight (unanswered
    /// requests forwarded from a source attached here).
    pub fn flow_pin(&self, h: &Header) -> Option<u16> {
        let src = h.src?.get();
        let pin = self.flows.get(Self::flow_index(h)).copied()?;
        (pin.key == flow_key(src, h) && self.pin_live(&pin)).then_some(pin.port.get())
    }

    /// The slot of `h`'s flow in the pin table (diagnostics and tests: flows with equal slots
    /// collide).
    pub fn flow_slot(&self, h: &Header) -> usize {
        Self::flow_index(h)
    }

    /// The settling bucket of `h`'s flow, and whether the bucket is held away from joining
    /// ports now (diagnostics and tests; `spec-notes/switch.md#settling`).
    pub fn settle_bucket(&self, h: &Header) -> (u32, bool) {
        let b = flow_hash(h) % DIVERT_BUCKETS;
        let level = self.level.get(b as usize).copied().unwrap_or(0);
        (b, self.settling && level < self.joined)
    }

    /// Requests from `src` forwarded here and not yet answered (as counted by the ordering
    /// rule).
    pub fn unanswered(&self, src: AccelId) -> u32 {
        self.srcs
            .get(usize::from(src.get()))
            .map_or(0, |s| u32::from(s.count[0]) + u32::from(s.count[1]))
    }

    /// The ordering rule's current generation of `src` (diagnostics and tests: it turns over
    /// once every request of the previous generation is answered).
    pub fn generation(&self, src: AccelId) -> u16 {
        self.srcs.get(usize::from(src.get())).map_or(0, |s| s.gen)
    }

    #[inline(always)]
    fn flow_index(h: &Header) -> usize {
        (flow_hash(h) >> (32 - FLOW_BITS)) as usize
    }

    /// The port accelerator `id` is attached to here (`P::NONE`: none).
    #[inline(always)]
    fn home_of(&self, id: u16) -> P {
        self.tables()
            .ids
            .get(usize::from(id) & (MAX_IDS - 1))
            .map_or(P::NONE, |e| e.home)
    }

    /// The packed attachment word of ingress port `ingress`: an accelerator ID, `INGRESS_TRUNK`
    /// or `INGRESS_UNUSED`.
    #[inline(always)]
    fn attachment(&self, ingress: u16) -> u16 {
        self.tables().attachment(ingress)
    }

    /// A pin holds while the generation it was last taken in holds.
    #[inline(always)]
    fn pin_live(&self, pin: &FlowPin<P>) -> bool {
        pin.key != 0
            && self
                .srcs
                .get(key_src(pin.key))
                .is_some_and(|s| s.holds(pin.epoch))
    }

    fn raise(&mut self, e: Event) {
        if self.events.push_back(e).is_err() {
            self.counters.events_lost = self.counters.events_lost.wrapping_add(1);
        }
    }

    /// The next event, oldest first.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    // ---- configuration ---------------------------------------------------------------

    /// Parse and validate a binary configuration into the standby bank.
    ///
    /// # Errors
    /// A typed [`ConfigError`]; the tables in force are untouched and a
    /// [`Event::ConfigRefused`] is raised.
    pub fn stage_config(&mut self, bytes: &[u8]) -> Result<(), ConfigError> {
        self.stage_with(|t| config::parse_into(bytes, t))
    }

    /// Fill the standby bank with `build` (starting from empty), then validate it.
    ///
    /// # Errors
    /// What `build` or [`Tables::validate`] returns; the tables in force are untouched.
    pub fn stage_with(
        &mut self,
        build: impl FnOnce(&mut Tables<PORTS, P>) -> Result<(), ConfigError>,
    ) -> Result<(), ConfigError> {
        self.staged = false;
        let t = self.staging();
        t.clear();
        let r = build(t).and_then(|()| t.validate());
        match r {
            Ok(()) => self.staged = true,
            Err(error) => {
                self.counters.refusals = self.counters.refusals.wrapping_add(1);
                self.raise(Event::ConfigRefused { error });
            }
        }
        r
    }

    /// Put the staged bank in force (an O(1) swap); returns its generation.
    ///
    /// Flows pinned before the swap keep their port until they drain.
    ///
    /// # Errors
    /// [`CommitError::NothingStaged`].
    pub fn commit(&mut self) -> Result<u32, CommitError> {
        if !self.staged {
            return Err(CommitError::NothingStaged);
        }
        self.staged = false;
        self.active ^= 1;
        self.serial = self.serial.wrapping_add(1);
        let generation = self.tables().generation();
        self.counters.commits = self.counters.commits.wrapping_add(1);
        self.raise(Event::ConfigCommitted { generation });
        Ok(generation)
    }

    /// Stage and commit a binary configuration.
    ///
    /// # Errors
    /// As [`Switch::stage_config`]; on error the old tables stay in force.
    pub fn load_config(&mut self, bytes: &[u8]) -> Result<u32, ConfigError> {
        self.stage_config(bytes)?;
        // Cannot fail: a bank was just staged.
        Ok(self.commit().unwrap_or_else(|_| self.tables().generation()))
    }

    /// Bring-up told what port `port`'s peer is (the link's device ID exchange): make it the
    /// port's attachment, which the spoofing check uses from then on.
    ///
    /// Nothing changes when the tables in force already say so (`Ok(false)`). Otherwise the
    /// tables in force are copied into the standby bank (discarding a staged, uncommitted
    /// configuration), the attachment is replaced, the bank is validated and committed
    /// (`Ok(true)`, [`Event::AttachmentLearned`]; the generation is kept).
    ///
    /// # Errors
    /// `PortOutOfRange`, or what [`Tables::validate`] reports (for example
    /// `RouteToWrongAccelerator`: routes send another accelerator's traffic to this port). The
    /// tables in force are kept (frames from a peer that claims another identity stay
    /// spoofed) and [`Event::ConfigRefused`] is raised.
    pub fn learn_attachment(&mut self, port: u16, attach: Attachment) -> Result<bool, ConfigError> {
        let Some(cur) = self
            .tables()
            .port(port)
            .filter(|_| port < self.tables().num_ports())
        else {
            return Err(ConfigError::PortOutOfRange(port));
        };
        if cur.attach == attach {
            return Ok(false);
        }
        self.staged = false;
        let [a, b] = &mut self.banks;
        let standby = if self.active & 1 == 0 {
            b.clone_from(a);
            b
        } else {
            a.clone_from(b);
            a
        };
        match standby.replace_attachment(port, attach) {
            Ok(()) => {
                self.staged = true;
                let _ = self.commit();
                self.raise(Event::AttachmentLearned { port, attach });
                Ok(true)
            }
            Err(error) => {
                self.counters.refusals = self.counters.refusals.wrapping_add(1);
                self.raise(Event::ConfigRefused { error });
                Err(error)
            }
        }
    }

    // ---- port state ------------------------------------------------------------------

    fn credits_mut(&mut self, port: u16, vc: u8) -> Option<&mut u32> {
        self.credits
            .get_mut(usize::from(port))?
            .get_mut(usize::from(vc & 3))
    }

    fn rescore(&mut self, port: u16, vc: u8) {
        let up = self.up.get(usize::from(port)).copied().unwrap_or(false);
        let h = self.health(port);
        let credits = self
            .credits
            .get(usize::from(port))
            .and_then(|c| c.get(usize::from(vc & 3)))
            .copied()
            .unwrap_or(0)
            .min(LOAD_CLAMP) as u16;
        let queued = u32::from(self.egress.depth(port, vc)).min(LOAD_CLAMP) as u16;
        let s = if !up || h == Health::Failed {
            0
        } else {
            // 1 ..= 0x3fff: more credit and a shorter queue score higher.
            let load = LOAD_BIAS + credits - queued;
            if h == Health::Healthy {
                HEALTHY_TIER | load
            } else {
                load
            }
        };
        if let Some(slot) = self
            .score
            .get_mut(usize::from(vc & 3))
            .and_then(|row| row.as_mut().get_mut(usize::from(port)))
        {
            *slot = s;
        }
    }

    /// Read port `port`'s link: up/down (raising events, flushing its queues on down) and
    /// credits per VC. Call after any change on that link.
    pub fn refresh_port<L: PortLink + ?Sized>(&mut self, port: u16, link: &L) {
        let Some(was_up) = self.up.get_mut(usize::from(port)) else {
            return;
        };
        let up = link.is_up();
        if up != *was_up {
            *was_up = up;
            if up {
                self.raise(Event::LinkUp { port });
                self.unsettle(port);
            } else {
                self.raise(Event::LinkDown { port });
                self.flush(port);
            }
        }
        for vc in 0..NUM_VCS as u8 {
            if let Some(c) = self.credits_mut(port, vc) {
                *c = link.tx_credits(Vc::from_bits_truncate(vc));
            }
            self.rescore(port, vc);
        }
    }

    /// Record a transceiver reading for port `port` (graded at the end of the health window).
    pub fn set_transceiver(&mut self, port: u16, r: TransceiverReading) {
        if let Some(m) = self.health.get_mut(usize::from(port)) {
            m.set_transceiver(r);
        }
    }

    fn flush(&mut self, port: u16) {
        // Hashed requests sent through the port before now may still be in flight beyond it:
        // fence every source with requests in flight (see `stick_hash`).
        for src in self.srcs.iter_mut().filter(|s| s.span != 0) {
            src.fence = src.gen;
            src.fenced = true;
        }
        // Flows fenced now may have diverted requests queued on other ways: they keep away
        // from every joining port for a whole window. (With none joining, a window changes
        // no choice.)
        self.level_fenced = self.base;
        self.open_window();
        // Flushed requests are never answered: their sources' pins stay until the requester's
        // own timeout shows up as an error response (conservative, never reordering).
        let n = self.egress.drain_port(port);
        if n > 0 {
            if let Some(c) = self.counters.ports.get_mut(usize::from(port)) {
                c.flushed = c.flushed.wrapping_add(n);
            }
            self.raise(Event::Flushed { port, frames: n });
        }
        for vc in 0..NUM_VCS as u8 {
            self.rescore(port, vc);
        }
    }

    /// Port `port` came back: it takes the next joining order, above every bucket's level,
    /// and a first settling window starts from the last frame handed to `forward`. Before
    /// the first frame nothing can be in flight: ports coming up then join at once.
    #[inline(never)]
    fn unsettle(&mut self, port: u16) {
        if self.clock == Instant::ZERO {
            return;
        }
        if let Some(m) = self.joining.get_mut(usize::from(port)) {
            // Later than every bucket's level: every flow keeps away from it for a first
            // window. (A flow diverted before keeps its way at least until this window ends,
            // `policy.settle` after the diversion.)
            if !self.settling {
                self.base = self.joined;
                self.settling = true;
            }
            // (Saturating: past 2^32 comebacks with never a quiet window, later ports share
            // the last order, and may be taken too early by flows released onto it.)
            self.joined = self.joined.saturating_add(1);
            *m = self.joined;
            self.open_window();
        }
    }

    /// Start a settling window of `policy.settle` from the switch's clock.
    #[inline(never)]
    fn open_window(&mut self) {
        self.diverted = 0;
        self.settle_until = self.clock + self.policy.settle;
    }

    /// A settling window is over (found by the first frame after it): every bucket with no
    /// diversion in it, and every fenced flow, no longer keeps away from the ports that are
    /// joining; if no bucket was diverted, the episode is over and every port has joined.
    /// (After a time with nothing forwarded, that is one window later than needed.)
    fn settle(&mut self) {
        let (diverted, joined) = (self.diverted, self.joined);
        for (b, l) in self.level.iter_mut().enumerate() {
            if diverted >> b & 1 == 0 {
                *l = joined;
            }
        }
        self.level_fenced = joined;
        self.settling = diverted != 0;
        self.open_window();
    }

    /// Some port is joining.
    fn unsettled(&self) -> bool {
        self.settling
    }

    /// Whether port `p` came back recently and hashed flows still keep away from it.
    pub fn joining(&self, p: u16) -> bool {
        let j = self.joining.get(usize::from(p)).copied().unwrap_or(0);
        self.settling && self.level.iter().any(|&l| j > l)
    }

    /// The way of a hashed flow while some port is joining: from the flow's hash way, the
    /// first usable way that is not joining above the flow's level, else the usable one that
    /// came back first. A flow that moved off a way while it was lost keeps the way it moved
    /// to until the way has settled: its requests queued there must not be overtaken.
    ///
    /// Requests diverted so *while* the way is joining are in the same position. Settling
    /// goes by windows of `policy.settle`: in the first (from the last frame before the port
    /// came back) every bucket of flows is held away from it; in each next one, the buckets
    /// diverted in the window before (their level stays). A flow returns to its hash way
    /// only once a whole window passed without a diversion in its bucket, `policy.settle` or
    /// more after its last diverted request (which its requester has then answered or given
    /// up on).
    ///
    /// When every usable way is joining, flows take the one that came back first, not their
    /// first usable one: a way that comes back later must not take them from it (they may
    /// have requests queued beyond it), and a choice other than the first usable way counts
    /// as a diversion too.
    #[inline(never)]
    fn settled_hash(
        &self,
        ways: &[P],
        hash: u32,
        vc: u8,
        fenced: bool,
        diverted: &mut u32,
    ) -> Result<P, DropReason> {
        let scores = self.scores(vc);
        let n = ways.len();
        let start = ((u64::from(hash) * n as u64) >> 32) as usize;
        let bucket = divert_bucket(hash);
        let level = if fenced {
            self.level_fenced
        } else {
            self.level
                .get((hash % DIVERT_BUCKETS) as usize)
                .copied()
                .unwrap_or(0)
        };
        // The first usable way (the settled choice), and the first usable one that is not
        // joining above the level, else the usable one that came back first.
        let mut first = Err(DropReason::Unreachable);
        let mut oldest = (u32::MAX, Err(DropReason::Unreachable));
        for k in 0..n {
            let p = ways.get((start + k) % n).copied().unwrap_or(P::NONE);
            if map_at::<P>(scores, p).unwrap_or(0) == 0 {
                continue;
            }
            let j = self.joining.get(usize::from(p.get())).copied().unwrap_or(0);
            if j <= level {
                if first.is_ok() {
                    *diverted = bucket;
                }
                return Ok(p);
            }
            if first.is_err() {
                first = Ok(p);
            }
            if j < oldest.0 {
                oldest = (j, Ok(p));
            }
        }
        // A fenced flow in its first window may have diverted requests on any way: none
        // that is joining is safe for it yet, the one that came back first included.
        if fenced {
            return first.and(Err(DropReason::PinLost));
        }
        if oldest.1 != first {
            *diverted = bucket;
        }
        oldest.1
    }

    /// The next time [`Switch::handle_timeout`] has work (end of the health window, or a
    /// rate-capped queue becoming eligible).
    #[must_use]
    pub fn poll_timeout(&self) -> Instant {
        let mut t = self.next_window;
        let tables = self.tables();
        if !self.egress.any_backlog() {
            return t;
        }
        for p in (0..PORTS as u16).filter(|&p| self.egress.backlogged(p)) {
            for vc in 0..NUM_VCS as u8 {
                let mut m = self.egress.part_mask(p, vc);
                while m != 0 {
                    let part = m.trailing_zeros() as u8;
                    m &= m - 1;
                    let cap = tables.parts.get(usize::from(part)).and_then(|c| c.rate_cap);
                    if let (Some(cap), Some(g)) = (cap, self.egress.gcra(p, part)) {
                        t = t.min(g.next_conforming(&cap));
                    }
                }
            }
        }
        t
    }

    /// Close the health window if it is due: grade every configured port from its link
    /// counters and transceiver reading, apply hysteresis, raise events, flush ports that
    /// failed. Spurious calls do nothing.
    pub fn handle_timeout<L: PortLink>(&mut self, now: Instant, ports: &[L]) {
        if now < self.next_window {
            return;
        }
        self.next_window = now + self.policy.window;
        let n = self.tables().num_ports();
        for (p, link) in (0..n).zip(ports.iter()) {
            let used = !matches!(
                self.tables().port(p).map(|c| c.attach),
                Some(Attachment::Unused) | None
            );
            if !used {
                continue;
            }
            let policy = self.policy;
            let Some(m) = self.health.get_mut(usize::from(p)) else {
                continue;
            };
            let (_, change) = m.end_window(&policy, link.stats(), link.is_up());
            if let Some((from, to)) = change {
                self.raise(Event::HealthChanged { port: p, from, to });
                if to == Health::Failed {
                    self.flush(p);
                } else if from == Health::Failed {
                    self.unsettle(p);
                }
                for vc in 0..NUM_VCS as u8 {
                    self.rescore(p, vc);
                }
            }
        }
    }

    /// Force port `p`'s health (operator override, and tests). A change raises
    /// [`Event::HealthChanged`] as a health window's would; a port forced out of `Failed`
    /// rejoins as a returning link does (hashed flows settle before they use it again:
    /// frames they sent elsewhere meanwhile may still be queued).
    pub fn force_health(&mut self, p: u16, state: Health) {
        let policy = self.policy;
        let mut change = None;
        if let Some(m) = self.health.get_mut(usize::from(p)) {
            let from = m.state();
            let grade = match state {
                Health::Healthy => crate::health::Grade::Good,
                _ => crate::health::Grade::Critical,
            };
            // Drive the machine until it reaches the state.
            for _ in 0..=2 * u16::from(policy.recover_after.max(1)) {
                if m.state() == state {
                    break;
                }
                let g = if state == Health::Degraded && m.state() == Health::Healthy {
                    crate::health::Grade::Bad
                } else if state == Health::Degraded {
                    crate::health::Grade::Good
                } else {
                    grade
                };
                m.step(&policy, g);
            }
            let to = m.state();
            if to != from {
                change = Some((from, to));
            }
        }
        if let Some((from, to)) = change {
            self.raise(Event::HealthChanged { port: p, from, to });
            if from == Health::Failed {
                self.unsettle(p);
            }
        }
        if state == Health::Failed {
            self.flush(p);
        }
        for vc in 0..NUM_VCS as u8 {
            self.rescore(p, vc);
        }
    }

    // ---- forwarding ------------------------------------------------------------------

    /// The score row of a VC (indexed by port number; ports ≥ `PORTS` and `P::NONE` score 0).
    #[inline(always)]
    fn scores(&self, vc: u8) -> &P::Map {
        let [a, b, c, d] = &self.score;
        match vc & 3 {
            0 => a,
            1 => b,
            2 => c,
            _ => d,
        }
    }

    /// The forwarding decision for a frame arriving on `ingress`: route lookup, isolation
    /// checks, ordering pin, adaptive choice (or deterministic hashing). Changes nothing.
    ///
    /// This is the hot path measured by the firmware's PERF line; it reads one packed
    /// ingress word, two 16-byte ID entries, one flow bucket and at most [`crate::MAX_WAYS`]
    /// scores.
    ///
    /// # Errors
    /// The [`DropReason`] when the frame must be dropped.
    #[inline]
    pub fn decide(&self, ingress: u16, h: &Header) -> Result<u16, DropReason> {
        self.decide_port(ingress, h, &mut 0).map(P::get)
    }

    /// [`Switch::decide`], the port as stored; sets `diverted` to the flow's divert bucket if
    /// a hashed flow was sent off a joining port (see `settled_hash`).
    #[inline(always)]
    fn decide_port(&self, ingress: u16, h: &Header, diverted: &mut u32) -> Result<P, DropReason> {
        if h.kind == FrameKind::LinkLocal {
            return Err(DropReason::LinkLocal);
        }
        let t = self.tables();
        let att = t.attachment(ingress);
        let entry = |a: u16| t.ids.get(usize::from(a) & (MAX_IDS - 1));
        let d = entry(h.dst.get()).ok_or(DropReason::NoRoute)?;
        let src_part = match h.src {
            Some(s) => {
                let e = entry(s.get()).ok_or(DropReason::Spoofed)?;
                if att < INGRESS_TRUNK {
                    // An accelerator port carries only its accelerator's ID.
                    if s.get() != att {
                        return Err(DropReason::Spoofed);
                    }
                } else if att == INGRESS_TRUNK {
                    // A trunk never carries the ID of an accelerator attached here.
                    if e.home != P::NONE {
                        return Err(DropReason::Spoofed);
                    }
                } else {
                    return Err(DropReason::BadIngress);
                }
                e.part
            }
            // No source field (compressed responses): the source is the attached accelerator.
            None if att < INGRESS_TRUNK => entry(att).map_or(NO_PART, |e| e.part),
            // On a trunk a compressed response still names no source. The switch where it
            // entered checked it by the arm above (its attached accelerator's partition against
            // the destination's); here only the destination's membership can be checked
            // (`spec-notes/switch.md#deviations-and-guesses`).
            None if att == INGRESS_TRUNK => d.part,
            None => return Err(DropReason::BadIngress),
        };
        if src_part == NO_PART || src_part != d.part {
            return Err(DropReason::CrossPartition);
        }
        if d.n == 0 {
            return Err(DropReason::NoRoute);
        }
        let scores = self.scores(h.vc.get());
        let score = |p: P| map_at::<P>(scores, p).unwrap_or(0);
        let hash = flow_hash(h);
        let adaptive = t.adaptive;
        if h.kind == FrameKind::Request {
            if att < INGRESS_TRUNK {
                // Source attached here: its own live pin, else hash when its slot is taken, or
                // a flow of this source went by hash from this slot in a generation that
                // holds, else a free choice.
                let slot = (hash >> (32 - FLOW_BITS)) as usize;
                let empty = FlowPin::EMPTY;
                let pin = self.flows.get(slot).unwrap_or(&empty);
                let src = self
                    .srcs
                    .get(usize::from(att) & (MAX_IDS - 1))
                    .unwrap_or(&SRC_IDLE);
                let own = pin.key == flow_key(att, h);
                if own && src.holds(pin.epoch) {
                    // Live: its port while it is still a way (the tables may have changed
                    // since it was chosen). If that port went down or failed, requests of the
                    // flow may still be queued beyond it, so another way could overtake them:
                    // the request is dropped until the pin expires.
                    if pin.serial == self.serial || d.ways().contains(&pin.port) {
                        if score(pin.port) != 0 {
                            return Ok(pin.port);
                        }
                        // (`Unreachable` if no way is usable at all.)
                        return stick_hash(d.ways(), hash, score).and(Err(DropReason::PinLost));
                    }
                } else if src.hashed_at(slot) || (!own && self.pin_live(pin)) {
                    // Fenced whether or not the slot is marked yet: a flow whose first
                    // request is decided here is marked by it, and its next requests, marked
                    // and fenced, must find the way this one takes (decided by the same
                    // level, `settled_hash`), not a way it was diverted from.
                    let fenced = || src.fence_holds(self.unsettled());
                    let way = if self.unsettled() {
                        self.settled_hash(d.ways(), hash, h.vc.get(), fenced(), diverted)
                    } else {
                        stick_hash(d.ways(), hash, score)
                    };
                    return match way {
                        // Hashed requests of the flow may be in flight (or this one makes it
                        // marked) and its hash way was lost since requests from before the
                        // loss were sent: held back.
                        Ok(p) if fenced() => held_if_moved(d.ways(), hash, p),
                        r => r,
                    };
                }
            } else {
                // A trunk: the source's answers need not pass here, so no pin can be proved
                // free; the flow's hash port keeps its requests in order. In hashing mode
                // too: the free choice below moves a flow off a way that is merely Degraded,
                // ahead of its requests queued there.
                return if self.unsettled() {
                    self.settled_hash(d.ways(), hash, h.vc.get(), false, diverted)
                } else {
                    stick_hash(d.ways(), hash, score)
                };
            }
        }
        let mut best = 0u16;
        let mut best_port = P::NONE;
        if adaptive {
            // Unused ways hold P::NONE (score 0): read all of them, no count, no bounds, and
            // unrolled by hand so that the firmware's size-optimised build does not loop.
            let [w0, w1, w2, w3, w4, w5, w6, w7] = d.ways;
            best = score(w0);
            best_port = w0;
            macro_rules! way {
                ($($p:ident),*) => {$(
                    let s = score($p);
                    if s > best {
                        best = s;
                        best_port = $p;
                    }
                )*};
            }
            way!(w1, w2, w3, w4, w5, w6, w7);
        } else {
            // Deterministic: start at the hashed way, take the first healthy one, else the
            // first usable one.
            let ways = d.ways();
            let n = ways.len();
            let start = ((u64::from(hash) * n as u64) >> 32) as usize;
            for k in 0..n {
                let p = ways.get((start + k) % n).copied().unwrap_or(P::NONE);
                let s = score(p);
                if s >= HEALTHY_TIER {
                    return Ok(p);
                }
                if s != 0 && best == 0 {
                    best = s;
                    best_port = p;
                }
            }
        }
        if best == 0 {
            Err(DropReason::Unreachable)
        } else {
            Ok(best_port)
        }
    }

    /// Record a forwarded request or last response for the ordering rule.
    #[inline]
    fn note_order(&mut self, ingress: u16, port: P, h: &Header) {
        match h.kind {
            FrameKind::Request => {
                let att = self.attachment(ingress);
                if att >= INGRESS_TRUNK {
                    return;
                }
                let key = flow_key(att, h);
                let i = Self::flow_index(h);
                let Some(pin) = self.flows.get(i).copied() else {
                    return;
                };
                let free = pin.key == key || !self.pin_live(&pin);
                // Tags by the source's home port, where its answers are looked up too.
                let home = self.home_of(att);
                let settling = self.settling;
                let Some(src) = self.srcs.get_mut(usize::from(att)) else {
                    return;
                };
                // The slot held another live flow: it went by hash; mark the slot in the
                // generation that counts it. (A flow that went by a mark into a free slot
                // takes the slot, on its hash port: its pin keeps it there from now on.)
                let hashed = !free;
                let words = self.tags.words(home, h.tag);
                // Without a tag entry (no home port: not expected for an attached source) the
                // request is counted for good: its pins then hold for good (conservative).
                if let Some((o, d, bit)) = &words {
                    if **o & bit != 0 {
                        // The tag is reused: its requester gave up on the earlier request (a
                        // timeout), so it is no longer waited for.
                        src.uncount(**d & bit != 0);
                    }
                }
                let epoch = src.add(settling);
                if let Some((o, d, bit)) = words {
                    *o |= bit;
                    if epoch & 1 != 0 {
                        *d |= bit;
                    } else {
                        *d &= !bit;
                    }
                }
                if hashed {
                    src.mark(i, epoch);
                }
                let serial = self.serial;
                if free {
                    if let Some(slot) = self.flows.get_mut(i) {
                        *slot = FlowPin {
                            key,
                            serial,
                            epoch,
                            port,
                        };
                    }
                }
            }
            // (A tag not open here is not a request counted here, or was answered already.)
            FrameKind::Response if h.last => {
                self.close_tag(h.dst.get(), h.tag);
            }
            _ => {}
        }
    }

    /// Request `h` from `ingress` reuses the tag of an unanswered request counted here: its
    /// requester gave up on that one (a timeout). Uncount it; `true` if there was one.
    #[inline(never)]
    fn release_reused_tag(&mut self, ingress: u16, h: &Header) -> bool {
        let att = self.attachment(ingress);
        att < INGRESS_TRUNK && self.close_tag(att, h.tag)
    }

    /// The request of source `src` with tag `tag` is answered or given up: if it is counted
    /// here (its tag open), uncount it from its generation; `true` if it was.
    fn close_tag(&mut self, src: u16, tag: u16) -> bool {
        let home = self.home_of(src);
        let settling = self.settling;
        let Some((o, d, bit)) = self.tags.words(home, tag) else {
            return false;
        };
        if *o & bit == 0 {
            return false;
        }
        *o &= !bit;
        let odd = *d & bit != 0;
        if let Some(s) = self.srcs.get_mut(usize::from(src)) {
            s.uncount(odd);
            s.settle(settling);
        }
        true
    }

    /// Drop the frames at the heads of port `p`'s VC `vc` FIFOs (partitions in `mask`) that
    /// are past the residence limit, onto the discard list; returns the partitions that
    /// still hold frames. Frames behind a young head wait their turn (a FIFO's frames arrived
    /// in order). Bounded: each turn removes a frame.
    #[cfg(feature = "residence-limit")]
    #[inline(never)]
    fn expire_heads(&mut self, now: Instant, p: u16, vc: u8, mask: u16) -> u16 {
        let mut expired = false;
        let mut parts = mask;
        while parts != 0 {
            let part = parts.trailing_zeros() as u8;
            parts &= parts - 1;
            for lane in LANES {
                while let Some(s) = self
                    .egress
                    .peek(p, vc, part, lane)
                    .copied()
                    .filter(|s| self.expired(s.arrived, now))
                {
                    let _ = self.egress.discard_head(p, vc, part, lane);
                    self.drop_frame(p, DropReason::Expired, &s.header);
                    expired = true;
                }
            }
        }
        if !expired {
            return mask;
        }
        self.rescore(p, vc);
        self.egress.part_mask(p, vc)
    }

    fn drop_frame(&mut self, ingress: u16, reason: DropReason, h: &Header) {
        if let Some(c) = self.counters.ports.get_mut(usize::from(ingress)) {
            c.count_drop(reason);
        }
        self.raise(Event::Dropped {
            port: ingress,
            reason,
            src: h.src,
            dst: h.dst,
        });
    }

    fn rate_ok(&self, port: u16, part: u8, now: Instant) -> bool {
        match self
            .tables()
            .parts
            .get(usize::from(part))
            .and_then(|c| c.rate_cap)
        {
            None => true,
            Some(cap) => self
                .egress
                .gcra(port, part)
                .is_some_and(|g| g.conforms(&cap, now)),
        }
    }

    fn charge_rate(&mut self, port: u16, part: u8, now: Instant, bytes: u16) {
        let cap = self
            .tables()
            .parts
            .get(usize::from(part))
            .and_then(|c| c.rate_cap);
        if let (Some(cap), Some(g)) = (cap, self.egress.gcra_mut(port, part)) {
            g.charge(&cap, now, bytes);
        }
    }

    fn note_sent(&mut self, port: u16, was_queued: bool) {
        if let Some(c) = self.counters.ports.get_mut(usize::from(port)) {
            c.tx_frames = c.tx_frames.wrapping_add(1);
            if !was_queued {
                c.cut_through = c.cut_through.wrapping_add(1);
            }
        }
    }

    /// Forward a frame that arrived on `ingress`: decide, then cut through when the egress VC
    /// has nothing queued, the partition is within its rate cap and the link takes the
    /// credit; otherwise queue it.
    ///
    /// # Errors
    /// The [`DropReason`]; the drop is counted on `ingress` and raised as an event.
    pub fn forward<L: PortLink>(
        &mut self,
        now: Instant,
        ingress: u16,
        frame: Frame,
        ports: &mut [L],
    ) -> Result<Forwarded, DropReason> {
        self.forward_at(now, now, ingress, frame, ports)
    }

    /// [`Switch::forward`] for a frame that reached the switch at `arrived` (and waited in
    /// its ingress buffer since): the residence limit ([`Switch::set_max_residence`]) counts
    /// from then. A frame already past it is dropped as [`DropReason::Expired`].
    ///
    /// # Errors
    /// As [`Switch::forward`].
    #[cfg(feature = "residence-limit")]
    pub fn forward_aged<L: PortLink>(
        &mut self,
        now: Instant,
        arrived: Instant,
        ingress: u16,
        frame: Frame,
        ports: &mut [L],
    ) -> Result<Forwarded, DropReason> {
        if self.expired(arrived, now) {
            if let Some(c) = self.counters.ports.get_mut(usize::from(ingress)) {
                c.rx_frames = c.rx_frames.wrapping_add(1);
            }
            self.clock = now;
            self.drop_frame(ingress, DropReason::Expired, &frame.header);
            return Err(DropReason::Expired);
        }
        self.forward_at(now, arrived, ingress, frame, ports)
    }

    /// The body of [`Switch::forward`]; a queued frame keeps `arrived`.
    #[inline(always)]
    fn forward_at<L: PortLink>(
        &mut self,
        now: Instant,
        arrived: Instant,
        ingress: u16,
        frame: Frame,
        ports: &mut [L],
    ) -> Result<Forwarded, DropReason> {
        if let Some(c) = self.counters.ports.get_mut(usize::from(ingress)) {
            c.rx_frames = c.rx_frames.wrapping_add(1);
        }
        self.clock = now;
        if self.unsettled() && now >= self.settle_until {
            self.settle();
        }
        let h = frame.header;
        let mut retried = false;
        let mut diverted = 0;
        // (One call site: the decision is inlined once.)
        let stored = loop {
            match self.decide_port(ingress, &h, &mut diverted) {
                Ok(p) => {
                    // A hashed flow sent off a joining port: its bucket keeps away from
                    // joining ports for the settle time from now (see `settled_hash`).
                    self.diverted |= diverted;
                    break p;
                }
                // A request with a tag still open here tells that its requester gave up on
                // the earlier request with that tag: release it, which may end the pin that
                // held this one back, and decide again.
                Err(DropReason::PinLost) if !retried && self.release_reused_tag(ingress, &h) => {
                    retried = true;
                }
                Err(r) => {
                    self.drop_frame(ingress, r, &h);
                    return Err(r);
                }
            }
        };
        let port = stored.get();
        let vc = h.vc.get();
        let (part, up) = self.tables().frame_class(ingress, h.dst);
        if self.egress.depth(port, vc) == 0 && self.rate_ok(port, part, now) {
            if let Some(link) = ports.get_mut(usize::from(port)) {
                if link.try_consume_credit(&h) {
                    let c = link.tx_credits(h.vc);
                    self.charge_rate(port, part, now, frame.bytes);
                    self.note_sent(port, false);
                    self.note_order(ingress, stored, &h);
                    if let Some(s) = self.credits_mut(port, vc) {
                        *s = c;
                    }
                    self.rescore(port, vc);
                    return Ok(Forwarded::CutThrough { port });
                }
            }
        }
        if self
            .egress
            .push(port, part, up, frame.handle, h, frame.bytes, arrived)
            .is_err()
        {
            self.drop_frame(ingress, DropReason::QueueFull, &h);
            return Err(DropReason::QueueFull);
        }
        self.note_order(ingress, stored, &h);
        if let Some(c) = self.counters.ports.get_mut(usize::from(port)) {
            c.queued = c.queued.wrapping_add(1);
        }
        self.rescore(port, vc);
        Ok(Forwarded::Queued { port })
    }

    /// The next queued frame to send, if any port has one it may send now (link up, credit,
    /// rate cap). One frame per call; ports are visited round robin, and within a port the
    /// VC and then the partition are chosen by weighted round robin.
    #[must_use]
    pub fn poll_transmit<L: PortLink>(
        &mut self,
        now: Instant,
        ports: &mut [L],
    ) -> Option<Transmit> {
        if !self.egress.any_backlog() {
            return None;
        }
        let n = PORTS as u16;
        let start = self.tx_rr % n;
        for k in 0..n {
            let p = if start + k >= n {
                start + k - n
            } else {
                start + k
            };
            if !self.egress.backlogged(p) {
                continue;
            }
            if let Some(link) = ports.get_mut(usize::from(p)) {
                if let Some(tx) = self.try_port(now, p, link) {
                    self.tx_rr = p.wrapping_add(1) % n;
                    return Some(tx);
                }
            }
        }
        None
    }

    /// [`Switch::poll_transmit`] for one egress port: the next frame `port` may send now,
    /// if any. The same choice, and the same round-robin update, as `poll_transmit` when
    /// every other port is unavailable, without visiting them: for a caller whose transmitters
    /// pull frames one port at a time (e.g. as each packs a DL flit).
    #[must_use]
    pub fn poll_transmit_port<L: PortLink>(
        &mut self,
        now: Instant,
        port: u16,
        link: &mut L,
    ) -> Option<Transmit> {
        if !self.egress.backlogged(port) {
            return None;
        }
        let tx = self.try_port(now, port, link)?;
        self.tx_rr = port.wrapping_add(1) % PORTS as u16;
        Some(tx)
    }

    fn try_port<L: PortLink>(&mut self, now: Instant, p: u16, link: &mut L) -> Option<Transmit> {
        if !link.is_up() {
            return None;
        }
        let mut vc_mask = 0u32;
        let mut part_masks = [0u32; NUM_VCS];
        for (vc, pm) in (0..NUM_VCS as u8).zip(part_masks.iter_mut()) {
            #[cfg_attr(not(feature = "residence-limit"), allow(unused_mut))]
            let mut m = self.egress.part_mask(p, vc);
            if m == 0 || link.tx_credits(Vc::from_bits_truncate(vc)) == 0 {
                continue;
            }
            #[cfg(feature = "residence-limit")]
            if self.max_residence != Duration::MAX {
                m = self.expire_heads(now, p, vc, m);
            }
            let mut el = 0u32;
            for part in 0..MAX_PARTITIONS as u8 {
                if m & (1 << part) != 0 && self.rate_ok(p, part, now) {
                    el |= 1 << part;
                }
            }
            *pm = el;
            if el != 0 {
                vc_mask |= 1 << vc;
            }
        }
        let t = self.tables();
        let vcw = t.vc_weights();
        let pw = |i: usize| t.parts.get(i).map_or(1, |c| c.weight);
        let vwrr = self.egress.vc_wrr.get(usize::from(p))?;
        // The round-robin pick first; when the link refuses its head frame (a credit class or
        // data credits the VC lacks), the next pick among the rest, so that one class short
        // of credit does not block the others. At most 4 VCs × 16 partitions tries.
        let (vc, vc_mask, part, pmask, lane, slot) = 'found: {
            let mut vc_left = vc_mask;
            while let Some(vc) = vwrr.pick(vc_left, |i| vcw.get(i).copied().unwrap_or(1)) {
                let vc8 = vc as u8;
                let pwrr = self
                    .egress
                    .part_wrr
                    .get(usize::from(p))?
                    .get(usize::from(vc8 & 3))?;
                let pmask = part_masks.get(vc).copied().unwrap_or(0);
                let mut part_left = pmask;
                while let Some(part) = pwrr.pick(part_left, pw) {
                    // Responses first: their credits are separate, and a response must never
                    // wait behind a request (`spec-notes/switch.md#buffers-and-deadlock`).
                    for lane in LANES {
                        let slot = self.egress.peek(p, vc8, part as u8, lane).copied();
                        if let Some(slot) = slot.filter(|s| link.try_consume_credit(&s.header)) {
                            // Refused partitions were not eligible after all.
                            break 'found (vc, vc_left, part as u8, part_left, lane, slot);
                        }
                    }
                    part_left &= !(1u32 << (part & 31));
                }
                vc_left &= !(1u32 << (vc & 31));
            }
            return None;
        };
        let vc8 = vc as u8;
        // Served: apply the round-robin picks and dequeue.
        let weights: [u8; MAX_PARTITIONS] = core::array::from_fn(pw);
        if let Some(w) = self.egress.vc_wrr.get_mut(usize::from(p)) {
            w.commit(vc, vc_mask, |i| vcw.get(i).copied().unwrap_or(1));
        }
        if let Some(w) = self
            .egress
            .part_wrr
            .get_mut(usize::from(p))
            .and_then(|w| w.get_mut(usize::from(vc8 & 3)))
        {
            w.commit(usize::from(part), pmask, |i| {
                weights.get(i).copied().unwrap_or(1)
            });
        }
        self.egress.pop(p, vc8, part, lane);
        self.charge_rate(p, part, now, slot.bytes);
        self.note_sent(p, true);
        let c = link.tx_credits(slot.header.vc);
        if let Some(s) = self.credits_mut(p, vc8) {
            *s = c;
        }
        self.rescore(p, vc8);
        Some(Transmit {
            port: p,
            handle: slot.handle,
            header: slot.header,
        })
    }
}
