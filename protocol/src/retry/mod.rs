//! DL link-level retry and link bring-up as one sans-IO machine (`spec-notes/link.md`).
//!
//! [`LinkRetry`] makes a stream of 640 B DL flits lossless over a wire that corrupts, and
//! (with [`Config::piggyback`] off) drops, duplicates or reorders them: 9-bit sequence
//! numbers (1..=511, wrapping to 1), a replay buffer of at most 255 flits, coalesced Acks,
//! Replay Requests on a gap, rewind-and-resend, a replay limit and an ack timeout that end in
//! `Fault` rather than a silent loss.
//!
//! # Link states
//! ```text
//!            handle_link_up            good flit received
//!   Idle ─────────────────────▶ Nop ─────────────────────▶ Up
//!    ▲  ◀──────────────────────  │  ◀─────── (none) ────────│
//!    │        handle_link_down   │                          │ replay limit exceeded,
//!    │◀─────────────────────────────────────────────────────│ ack timeouts exhausted
//!    │               handle_link_down                       ▼
//!    └──────────────────────── reset ─────────────────── Fault
//! ```
//! * `Idle`: the PHY is down. Nothing is sent; received flits are dropped. Sequence state and
//!   the replay buffer survive, so a link flap loses nothing.
//! * `Nop`: the PHY is up; NOP flits (which consume no sequence number) are sent until a good
//!   flit arrives from the peer, every [`Config::nop_interval`].
//! * `Up`: payload flows. On entry every unacknowledged flit is resent.
//! * `Fault`: terminal until [`LinkRetry::reset`]; an [`Event::Fault`] says how many submitted
//!   flits were never acknowledged.
//!
//! # Driving it
//! The caller owns time and I/O. `now` must never decrease between calls. After any input
//! ([`LinkRetry::handle_flit`], [`LinkRetry::handle_timeout`], a command), call
//! [`LinkRetry::poll_transmit`] until it returns `None` (one flit per call, so each call does
//! bounded work; pace calls at the wire's flit rate), drain [`LinkRetry::poll_event`], and
//! sleep until [`LinkRetry::poll_timeout`] or the next received flit.

#![cfg_attr(not(test), deny(clippy::arithmetic_side_effects))]

mod flit;
mod rx;
mod tx;

pub use crate::wire::dl_flit::FLIT_LEN;

use self::rx::{Rx, RxCommand, SeqOutcome};
use self::tx::{AckOutcome, RrOutcome, Tx};
use crate::time::{Duration, Instant};
use crate::timer::TimerTable;
use crate::wire::crc::DlCrc;
use crate::wire::{DlCommandHeader, DlExplicitHeader, DlFlitHeader, DlOp, Error, SeqNum};
use core::fmt;
use heapless::Deque;

/// Parameters of [`LinkRetry`]. Defaults follow protocol-facts §4 where it gives a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// CRC algorithm of the flit.
    pub crc: DlCrc,
    /// Send an Ack after this many in-order flits (coalescing; ≥ 1).
    pub ack_interval: u16,
    /// … or this long after the first unacknowledged delivery, whichever comes first.
    pub ack_delay: Duration,
    /// No ack progress for this long: replay everything (10.24 ms).
    pub ack_timeout: Duration,
    /// Replays on consecutive ack timeouts before the next timeout is a Fault (1: "replay,
    /// then Fault"). A lost last flit is only found by the ack timeout, so a lossy wire
    /// with bursty traffic wants more.
    pub ack_timeout_replays: u16,
    /// Tail-loss probe (podlink's addition; `None`: off): no ack progress for this long
    /// while flits are unacknowledged, replay them; the wait doubles with each probe in a
    /// row and starts again at the next progress. A flit lost at the end of a burst leaves
    /// no later flit to reveal the gap, so without a probe only the 10.24 ms ack timeout
    /// would resend it. Probes do not count toward [`Config::ack_timeout_replays`]; the
    /// ack timeout still ends a link whose peer never answers
    /// (`spec-notes/link.md#tail-loss-probe`).
    pub tail_probe: Option<Duration>,
    /// Replays allowed without the window moving forward; one more is a Fault (50).
    pub replay_limit: u16,
    /// Copies of each Replay Request (3).
    pub replay_request_copies: u8,
    /// Replay Requests are ignored while this many flits after a replay go out (12).
    pub replay_ignore_flits: u16,
    /// One flit time on the wire. The ignore window also closes after
    /// `replay_ignore_flits` flit times, standing in for the NOP flits an idle PHY sends.
    pub flit_time: Duration,
    /// Bad flits since the last full sequence number that make the receiver ambiguous (7).
    pub ambiguous_threshold: u16,
    /// Resend the Replay Request if the replay has not arrived after this long (podlink's
    /// addition; `None`: rely on the peer's ack timeout).
    pub replay_request_retry: Option<Duration>,
    /// … at most this many times per gap; then the peer's ack timeout is the backstop (a
    /// peer with nothing unacknowledged has nothing to replay).
    pub replay_request_retries: u8,
    /// Interval between NOP flits in the `Nop` state.
    pub nop_interval: Duration,
    /// Let Ack / Replay Request command flits carry payload (then only the low 3 bits of
    /// their sequence number travel). Turn off on a wire that can drop, duplicate or
    /// reorder flits without a trace: every payload flit then carries its full number.
    pub piggyback: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            crc: DlCrc::Bzip2,
            ack_interval: 8,
            ack_delay: Duration::from_ns(50),
            ack_timeout: Duration::from_ns(10_240_000),
            ack_timeout_replays: 1,
            tail_probe: Some(Duration::from_us(2)),
            replay_limit: 50,
            replay_request_copies: 3,
            replay_ignore_flits: 12,
            flit_time: Duration::from_ps(6_400),
            ambiguous_threshold: 7,
            replay_request_retry: Some(Duration::from_us(1)),
            replay_request_retries: 8,
            nop_interval: Duration::from_us(1),
            piggyback: true,
        }
    }
}

impl Config {
    /// These settings for a link whose round trip is `rtt` (a flit out and a flit back, each
    /// from the start of its transmission to its decoding at the far end). podlink's own
    /// timers wait long enough for an answer to come back on a long link: the tail-loss
    /// probe at least `2 × rtt + ack_delay` (an ack may wait out the peer's coalescing
    /// delay, the same setting at both ends), the Replay Request retry at least `2 × rtt`
    /// (a replay is sent at once). With the simulator's 1 µs ack delay the probe's 2 µs
    /// default stays for one-way latencies up to 250 ns (about 40 m of cable); the retry's
    /// 1 µs up to 250 ns too. The ack timeout (10.24 ms, from the facts) is left alone
    /// (`spec-notes/link.md#timers-and-link-length`).
    #[must_use]
    pub const fn for_round_trip(mut self, rtt: Duration) -> Self {
        let replay = rtt.saturating_mul(2);
        let ack = replay.saturating_add(self.ack_delay);
        if let Some(t) = self.tail_probe {
            if t.as_ps() < ack.as_ps() {
                self.tail_probe = Some(ack);
            }
        }
        if let Some(t) = self.replay_request_retry {
            if t.as_ps() < replay.as_ps() {
                self.replay_request_retry = Some(replay);
            }
        }
        self
    }
}

/// DL link state (protocol-facts §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkState {
    /// PHY down; nothing sent.
    Idle,
    /// PHY up; exchanging NOP flits.
    Nop,
    /// Payload flows.
    Up,
    /// Unrecoverable; see [`Event::Fault`]. Leave with [`LinkRetry::reset`].
    Fault,
}

impl fmt::Display for LinkState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LinkState::Idle => "Idle",
            LinkState::Nop => "NOP",
            LinkState::Up => "Up",
            LinkState::Fault => "Fault",
        })
    }
}

/// The timers of [`LinkRetry`], each an entry of a fixed table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Timer {
    /// No ack progress while flits are unacknowledged.
    AckTimeout = 0,
    /// Coalesced ack is due.
    AckCoalesce = 1,
    /// Time fallback that closes the Replay Request ignore window.
    ReplayIgnore = 2,
    /// Resend an unanswered Replay Request.
    ReplayRequestRetry = 3,
    /// Send the next NOP in the `Nop` state.
    NopRetry = 4,
    /// Tail-loss probe ([`Config::tail_probe`]).
    TailProbe = 5,
}

impl Timer {
    const COUNT: usize = 6;
}

/// Why the transmitter rewound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReplayCause {
    /// The peer sent a Replay Request.
    ReplayRequest,
    /// No ack progress for [`Config::ack_timeout`].
    AckTimeout,
    /// No ack progress for [`Config::tail_probe`] (or its backed-off multiple).
    TailProbe,
    /// The link came back up.
    LinkUp,
}

/// Why the link entered `Fault`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FaultReason {
    /// More than [`Config::replay_limit`] replays without the window moving forward.
    ReplayLimit,
    /// [`Config::ack_timeout`] expired again after [`Config::ack_timeout_replays`] replays.
    AckTimeout,
    /// The user of the link ended it ([`LinkRetry::abort`]): a [`UaLink`](crate::link::UaLink)
    /// holding a TL flit longer than its hold limit.
    Aborted,
}

/// Something the user of [`LinkRetry`] may want to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Event {
    /// The link state changed.
    StateChanged {
        /// Old state.
        from: LinkState,
        /// New state.
        to: LinkState,
    },
    /// The receiver saw too many bad flits to trust a 3-bit sequence; it requested a replay.
    Ambiguous {
        /// The flit it waits for.
        expected: SeqNum,
    },
    /// The receiver asked the peer to replay (a new request, not a copy or a retry).
    ReplayRequested {
        /// First flit wanted.
        from: SeqNum,
    },
    /// The transmitter rewound.
    Replaying {
        /// First flit resent.
        from: SeqNum,
        /// Flits that will be sent again.
        flits: u16,
        /// Why.
        cause: ReplayCause,
    },
    /// Fatal: the link is in `Fault`. Nothing more is sent or delivered until `reset`.
    Fault {
        /// Why.
        reason: FaultReason,
        /// Submitted flits never acknowledged (the peer may or may not have them).
        undelivered: u16,
    },
}

/// Every counter of [`LinkRetry`]; they only grow (saturating).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Payload flits sent for the first time.
    pub flits_sent: u64,
    /// Payload flits sent again (replays).
    pub flits_resent: u64,
    /// NOP flits sent.
    pub nops_sent: u64,
    /// Acks sent (alone or on a payload flit).
    pub acks_sent: u64,
    /// Replay Request copies sent.
    pub replay_requests_sent: u64,
    /// Command flits that also carried payload.
    pub piggybacked: u64,
    /// Acks received.
    pub acks_received: u64,
    /// Acks for the flit just before the window.
    pub acks_duplicate: u64,
    /// Acks outside the window (ignored).
    pub acks_out_of_window: u64,
    /// Replay Requests received.
    pub replay_requests_received: u64,
    /// Replay Requests ignored inside the ignore window.
    pub replay_requests_ignored: u64,
    /// Replay Requests outside the window (ignored).
    pub replay_requests_out_of_window: u64,
    /// Rewinds (any cause) that resent at least one flit.
    pub replays: u64,
    /// Accepted Replay Requests for the next unsent flit (nothing to resend).
    pub empty_replays: u64,
    /// Ack timeouts.
    pub ack_timeouts: u64,
    /// Tail-loss probes ([`Config::tail_probe`]).
    pub tail_probes: u64,
    /// Entries into `Fault`.
    pub faults: u64,
    /// Good-CRC flits received.
    pub flits_received: u64,
    /// Payload flits delivered in order.
    pub delivered: u64,
    /// Flits dropped for a bad CRC.
    pub crc_errors: u64,
    /// Flits of the wrong length.
    pub length_errors: u64,
    /// Good-CRC flits with an illegal header (reserved bits, op, sequence 0).
    pub header_errors: u64,
    /// NOP flits received.
    pub nops_received: u64,
    /// ReplayStart flits received.
    pub replay_starts_received: u64,
    /// Payload flits already delivered (dropped).
    pub duplicates: u64,
    /// Payload flits ahead of the expected one, or arriving while a replay is awaited
    /// (dropped).
    pub out_of_sequence: u64,
    /// Command flits whose 3-bit sequence could not be resolved (dropped).
    pub unresolved: u64,
    /// Entries into the ambiguous state.
    pub ambiguous_entries: u64,
    /// New replay requests issued (each sent `replay_request_copies` times).
    pub replay_requests_issued: u64,
    /// Replay requests resent after [`Config::replay_request_retry`].
    pub replay_request_retries: u64,
    /// Flits received while `Idle` or in `Fault` (dropped).
    pub rx_while_down: u64,
    /// `poll_transmit` calls with a buffer shorter than a flit.
    pub tx_buffer_too_small: u64,
    /// PHY up / down transitions seen.
    pub link_ups: u64,
    /// PHY down transitions seen.
    pub link_downs: u64,
    /// Events lost because the queue was full (the state getters still tell the truth).
    pub events_dropped: u64,
}

/// Why [`LinkRetry::submit`] refused a flit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SubmitError {
    /// The replay buffer is full (`CAP` flits unacknowledged): try after acks arrive.
    Full,
    /// The link is in `Fault`.
    Fault,
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SubmitError::Full => "replay buffer full",
            SubmitError::Fault => "link in Fault",
        })
    }
}

impl core::error::Error for SubmitError {}

/// A payload flit delivered in order, borrowed from the received bytes (CRC verified).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery<'a> {
    /// Its sequence number.
    pub seq: SeqNum,
    /// The whole flit; its segment headers and payload are what the sender submitted.
    pub flit: &'a [u8; FLIT_LEN],
}

const EVENT_CAP: usize = 16;

fn inc(c: &mut u64) {
    *c = c.saturating_add(1);
}

/// Link-level retry and bring-up for one end of a DL link; `CAP` (1..=255) flits of replay
/// buffer. See the [module docs](self) for the states and the polling contract.
// Memory layout (`repr(C)`: declaration order): the small state first, the transmit side last
// (its replay buffer is the tail), so that the state a flit touches shares few cache lines.
#[derive(Debug, Clone)]
#[repr(C)]
pub struct LinkRetry<const CAP: usize> {
    state: LinkState,
    nop_pending: bool,
    reply_pending: bool,
    ack_timeouts_in_row: u16,
    /// Tail-loss probes since the last ack progress (the probe wait's back-off).
    probes_in_row: u16,
    rx: Rx,
    timers: TimerTable<{ Timer::COUNT }>,
    stats: Stats,
    events: Deque<Event, EVENT_CAP>,
    cfg: Config,
    tx: Tx<CAP>,
}

mod machine;

#[cfg(test)]
mod tests;
