//! A deterministic two-endpoint harness with virtual time (model: quinn-proto's
//! `tests/util.rs` `Pair`), for tests here and in other crates (switch, simulator).
//!
//! ```text
//!        ┌────────┐  a_to_b: Wire (latency, FaultInjector)  ┌────────┐
//!        │   a    │ ──────────────────────────────────────▶ │   b    │
//!        │Endpoint│ ◀────────────────────────────────────── │Endpoint│
//!        └────────┘  b_to_a: Wire                           └────────┘
//! ```
//!
//! [`LinkPair::step`] jumps virtual time to the earliest wakeup (a timer, an arrival, or the
//! end of a frame's serialization), delivers what has arrived, fires timers and lets each end
//! send one frame. Nothing reads a clock, so a run is a pure function of its seeds.

#![cfg_attr(not(test), deny(clippy::arithmetic_side_effects))]

mod eth_end;
mod retry_end;
mod ualink_end;

pub use self::eth_end::{EthEnd, VcLogs};
pub use self::retry_end::{check_body, fill_body, DeliveryLog, RetryEnd};
pub use self::ualink_end::{check_tl, fill_tl, UaEnd};

use crate::phy::Wire;
use crate::time::{Duration, Instant};

/// One end of a [`LinkPair`]: any sans-IO machine that sends and receives frames.
pub trait Endpoint {
    /// Write the next frame into `buf`; `None` when there is nothing to send.
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize>;
    /// A frame arrived.
    fn handle_frame(&mut self, now: Instant, frame: &[u8]);
    /// The earliest timer deadline.
    fn poll_timeout(&mut self) -> Option<Instant>;
    /// Fire expired timers.
    fn handle_timeout(&mut self, now: Instant);
    /// The PHY went up (`true`) or down.
    fn handle_link(&mut self, now: Instant, up: bool);
}

/// Timing of a [`LinkPair`]: a frame of `len` bytes occupies its end's transmitter for
/// `frame_time + len × ps_per_byte`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairConfig {
    /// Fixed serialization time per frame (gaps, preamble).
    pub frame_time: Duration,
    /// Serialization time per byte, in picoseconds.
    pub ps_per_byte: u64,
}

impl Default for PairConfig {
    fn default() -> Self {
        // One 640 B flit on a x4 200G port.
        PairConfig {
            frame_time: Duration::from_ps(6_400),
            ps_per_byte: 0,
        }
    }
}

impl PairConfig {
    /// An 800 Gb/s Ethernet port: 10 ps per byte plus 20 bytes of preamble and gap.
    pub const ETHERNET_800G: PairConfig = PairConfig {
        frame_time: Duration::from_ps(200),
        ps_per_byte: 10,
    };
}

#[derive(Debug, Clone, Copy)]
struct Pace {
    free_at: Instant,
    idle: bool,
}

/// Two endpoints joined by two [`Wire`]s, driven in virtual time.
pub struct LinkPair<A, B, const SLOTS: usize, const MTU: usize> {
    /// End a.
    pub a: A,
    /// End b.
    pub b: B,
    /// The wire from a to b.
    pub a_to_b: Wire<SLOTS, MTU>,
    /// The wire from b to a.
    pub b_to_a: Wire<SLOTS, MTU>,
    cfg: PairConfig,
    now: Instant,
    pace_a: Pace,
    pace_b: Pace,
    link_up: bool,
    steps: u64,
    buf: [u8; MTU],
}

impl<A: Endpoint, B: Endpoint, const SLOTS: usize, const MTU: usize> LinkPair<A, B, SLOTS, MTU> {
    /// A pair at time zero with the link down (call [`LinkPair::set_link`]).
    pub fn new(
        a: A,
        b: B,
        a_to_b: Wire<SLOTS, MTU>,
        b_to_a: Wire<SLOTS, MTU>,
        cfg: PairConfig,
    ) -> Self {
        let pace = Pace {
            free_at: Instant::ZERO,
            idle: false,
        };
        LinkPair {
            a,
            b,
            a_to_b,
            b_to_a,
            cfg,
            now: Instant::ZERO,
            pace_a: pace,
            pace_b: pace,
            link_up: false,
            steps: 0,
            buf: [0; MTU],
        }
    }

    /// Virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }
    /// Steps taken.
    pub fn steps(&self) -> u64 {
        self.steps
    }
    /// The link is up.
    pub fn is_link_up(&self) -> bool {
        self.link_up
    }

    /// Bring the link up or down at the current time: the wires drop what is in flight,
    /// both ends hear about it.
    pub fn set_link(&mut self, up: bool) {
        self.link_up = up;
        self.a_to_b.set_link_up(up);
        self.b_to_a.set_link_up(up);
        self.a.handle_link(self.now, up);
        self.b.handle_link(self.now, up);
        self.wake();
    }

    /// Tell the harness that the upper layer gave an end something to send.
    pub fn wake(&mut self) {
        self.pace_a.idle = false;
        self.pace_b.idle = false;
    }

    /// Advance virtual time to `t` (never backwards) without doing anything.
    pub fn advance_to(&mut self, t: Instant) {
        self.now = self.now.max(t);
    }

    /// The earliest time something happens, if anything will.
    pub fn next_wakeup(&mut self) -> Option<Instant> {
        let tx_a = (!self.pace_a.idle).then_some(self.pace_a.free_at);
        let tx_b = (!self.pace_b.idle).then_some(self.pace_b.free_at);
        [
            self.a.poll_timeout(),
            self.b.poll_timeout(),
            self.a_to_b.next_arrival(),
            self.b_to_a.next_arrival(),
            tx_a,
            tx_b,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Jump to the next wakeup and process it. Returns `false` when nothing is left to do.
    pub fn step(&mut self) -> bool {
        let Some(t) = self.next_wakeup() else {
            return false;
        };
        self.now = self.now.max(t);
        self.steps = self.steps.saturating_add(1);
        let now = self.now;
        let LinkPair {
            a,
            b,
            a_to_b,
            b_to_a,
            pace_a,
            pace_b,
            buf,
            cfg,
            ..
        } = self;
        while a_to_b.recv_with(now, |f| b.handle_frame(now, f)).is_some() {
            pace_b.idle = false;
        }
        while b_to_a.recv_with(now, |f| a.handle_frame(now, f)).is_some() {
            pace_a.idle = false;
        }
        if a.poll_timeout().is_some_and(|d| d <= now) {
            a.handle_timeout(now);
            pace_a.idle = false;
        }
        if b.poll_timeout().is_some_and(|d| d <= now) {
            b.handle_timeout(now);
            pace_b.idle = false;
        }
        transmit(a, pace_a, a_to_b, buf, now, cfg);
        transmit(b, pace_b, b_to_a, buf, now, cfg);
        true
    }

    /// Step until nothing is left to do or the next wakeup is after `deadline`. Returns
    /// `true` if the pair went quiet.
    pub fn drive(&mut self, deadline: Instant) -> bool {
        loop {
            match self.next_wakeup() {
                None => return true,
                Some(t) if t > deadline => return false,
                Some(_) => {
                    self.step();
                }
            }
        }
    }

    /// Step until `done` holds (checked before each step), the pair goes quiet, or the next
    /// wakeup is after `deadline`. Returns whether `done` held.
    pub fn drive_until(
        &mut self,
        deadline: Instant,
        mut done: impl FnMut(&mut Self) -> bool,
    ) -> bool {
        loop {
            if done(self) {
                return true;
            }
            match self.next_wakeup() {
                Some(t) if t <= deadline => {
                    self.step();
                }
                _ => return done(self),
            }
        }
    }
}

fn transmit<E: Endpoint, const SLOTS: usize, const MTU: usize>(
    e: &mut E,
    pace: &mut Pace,
    wire: &mut Wire<SLOTS, MTU>,
    buf: &mut [u8; MTU],
    now: Instant,
    cfg: &PairConfig,
) {
    if pace.idle || pace.free_at > now {
        return;
    }
    match e.poll_transmit(now, buf) {
        Some(n) => {
            let bytes = u64::try_from(n).unwrap_or(u64::MAX);
            let ser = cfg
                .frame_time
                .saturating_add(Duration::from_ps(bytes.saturating_mul(cfg.ps_per_byte)));
            let done = now.saturating_add(ser);
            if let Some(frame) = buf.get(..n) {
                let _ = wire.send(done, frame);
            }
            pace.free_at = done;
        }
        None => pace.idle = true,
    }
}
