//! Receive half of link-level retry: in-order acceptance, replay requests, ambiguity and
//! ack coalescing (`spec-notes/link.md#retry-rx`).
//!
//! # Anchoring and the 3-bit sequence of command flits
//! An explicit flit carries its full 9-bit sequence number. A command flit (Ack or Replay
//! Request) that also carries payload only has the low 3 bits (`flit_seq_lo`). The receiver
//! resolves them against its *anchor*, the last full sequence number it saw, and the count
//! `k` of bad-CRC flits since then: every bad flit may have hidden one sequence number, so
//! the flit is `anchor + 1 + j` for the unique `j ≤ k` with matching low bits. That is
//! unique while `k ≤ 7`; podlink declares the receiver *ambiguous* at `k` =
//! `ambiguous_threshold` (7 by default, protocol-facts §4) and from then on accepts only
//! explicit flits. A flit it cannot resolve is never guessed: it is dropped and a replay is
//! requested, and the transmitter's first replayed flit is explicit.

use crate::wire::SeqNum;

/// How a flit carrying a sequence number was classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SeqOutcome {
    /// The next expected flit: deliver it.
    InOrder,
    /// Already delivered: drop.
    Duplicate,
    /// Ahead of the expected flit (flits were lost): drop; `requested` if this started a
    /// replay request.
    Gap { requested: bool },
}

/// A command the receiver wants sent to the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RxCommand {
    /// Ack every flit up to and including this one.
    Ack(SeqNum),
    /// Replay from this flit.
    ReplayRequest(SeqNum),
}

/// Receiver state.
#[derive(Debug, Clone)]
pub(crate) struct Rx {
    expected: SeqNum,
    anchor: SeqNum,
    anchored: bool,
    bad_since_anchor: u16,
    bad_in_row: u16,
    ambiguous: bool,
    awaiting_replay: bool,
    rr_left: u8,
    rr_retries: u8,
    since_ack: u16,
    ack_now: bool,
    received_any: bool,
}

impl Rx {
    /// Expecting sequence number 1, not anchored.
    pub(crate) const fn new() -> Self {
        Rx {
            expected: SeqNum::FIRST,
            anchor: SeqNum::FIRST,
            anchored: false,
            bad_since_anchor: 0,
            bad_in_row: 0,
            ambiguous: false,
            awaiting_replay: false,
            rr_left: 0,
            rr_retries: 0,
            since_ack: 0,
            ack_now: false,
            received_any: false,
        }
    }

    /// The next sequence number to deliver.
    pub(crate) fn expected(&self) -> SeqNum {
        self.expected
    }
    /// Ambiguous after too many bad flits (until an explicit flit re-anchors).
    pub(crate) fn is_ambiguous(&self) -> bool {
        self.ambiguous
    }
    /// A replay was requested and the expected flit has not arrived yet.
    pub(crate) fn awaiting_replay(&self) -> bool {
        self.awaiting_replay
    }
    /// Bad-CRC flits in a row.
    pub(crate) fn bad_in_row(&self) -> u16 {
        self.bad_in_row
    }

    /// The link went down: flits in flight are gone and the transmitter will resend from
    /// its oldest unacknowledged flit with a full sequence number, so forget the anchor and
    /// any pending request; keep `expected`.
    pub(crate) fn link_down(&mut self) {
        let expected = self.expected;
        let received_any = self.received_any;
        *self = Rx::new();
        self.expected = expected;
        self.received_any = received_any;
    }

    /// The link came up: acknowledge promptly so the peer frees what we already have.
    pub(crate) fn link_up(&mut self) {
        self.ack_now = self.received_any;
    }

    /// A bad-CRC flit. Returns `(became_ambiguous, requested_replay)`.
    pub(crate) fn on_bad_crc(&mut self, threshold: u16, copies: u8) -> (bool, bool) {
        self.bad_in_row = self.bad_in_row.saturating_add(1);
        self.bad_since_anchor = self.bad_since_anchor.saturating_add(1);
        if self.anchored && self.bad_since_anchor >= threshold {
            self.anchored = false;
            self.ambiguous = true;
            (true, self.request_replay(copies))
        } else {
            (false, false)
        }
    }

    /// A good flit that carries no sequence number (NOP or command only).
    pub(crate) fn on_good_unsequenced(&mut self) {
        self.bad_in_row = 0;
    }

    /// Ask the peer to replay from `expected` (`copies` times); `false` if a request is
    /// already outstanding.
    pub(crate) fn request_replay(&mut self, copies: u8) -> bool {
        if self.awaiting_replay {
            return false;
        }
        self.awaiting_replay = true;
        self.rr_left = copies;
        self.rr_retries = 0;
        true
    }

    /// The replay-request retry timer fired: send the request again if still waiting and
    /// fewer than `max` retries were made for it.
    pub(crate) fn retry_replay_request(&mut self, copies: u8, max: u8) -> bool {
        if !self.awaiting_replay || self.rr_retries >= max {
            return false;
        }
        self.rr_retries = self.rr_retries.saturating_add(1);
        self.rr_left = copies;
        true
    }

    /// The full sequence number of a command flit's payload from its low 3 bits, if it
    /// can be resolved without guessing.
    pub(crate) fn resolve_lo(&self, lo: u8) -> Option<SeqNum> {
        if !self.anchored || self.awaiting_replay {
            return None;
        }
        let base = self.anchor.next();
        let j = u16::from(lo).wrapping_sub(base.get()) & 7;
        (j <= self.bad_since_anchor).then(|| base.add(j))
    }

    /// A good flit with full sequence number `seq` (explicit, or resolved from 3 bits).
    pub(crate) fn on_seq_flit(&mut self, seq: SeqNum, copies: u8) -> SeqOutcome {
        self.bad_in_row = 0;
        self.bad_since_anchor = 0;
        self.anchor = seq;
        self.anchored = true;
        self.ambiguous = false;
        let d = seq.distance_from(self.expected);
        if d == 0 {
            self.expected = seq.next();
            self.awaiting_replay = false;
            self.rr_left = 0;
            self.since_ack = self.since_ack.saturating_add(1);
            self.received_any = true;
            SeqOutcome::InOrder
        } else if d < 256 {
            SeqOutcome::Gap {
                requested: self.request_replay(copies),
            }
        } else {
            // Behind `expected` (by up to 255): the peer did not see our ack.
            self.ack_now = self.received_any;
            SeqOutcome::Duplicate
        }
    }

    /// Ask for an ack to go out at the next opportunity (coalescing timer, or a peer that
    /// is restarting).
    pub(crate) fn ack_soon(&mut self) {
        self.ack_now = self.received_any;
    }

    /// Flits delivered since the last ack went out.
    pub(crate) fn since_ack(&self) -> u16 {
        self.since_ack
    }

    /// The command to send next, if any: replay-request copies first, then a due ack.
    pub(crate) fn next_command(&self, ack_interval: u16) -> Option<RxCommand> {
        if self.rr_left > 0 {
            Some(RxCommand::ReplayRequest(self.expected))
        } else if self.received_any && (self.ack_now || self.since_ack >= ack_interval.max(1)) {
            Some(RxCommand::Ack(self.expected.prev()))
        } else {
            None
        }
    }

    /// The latest ack value (for an unsolicited ack).
    pub(crate) fn ack_value(&self) -> SeqNum {
        self.expected.prev()
    }

    /// `cmd` went on the wire.
    pub(crate) fn command_sent(&mut self, cmd: RxCommand) {
        match cmd {
            RxCommand::ReplayRequest(_) => self.rr_left = self.rr_left.saturating_sub(1),
            RxCommand::Ack(_) => {
                self.since_ack = 0;
                self.ack_now = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(v: u16) -> SeqNum {
        SeqNum::new(v).unwrap()
    }

    #[test]
    fn in_order_duplicate_gap() {
        let mut rx = Rx::new();
        assert_eq!(rx.next_command(1), None);
        assert_eq!(rx.on_seq_flit(seq(1), 3), SeqOutcome::InOrder);
        assert_eq!(rx.on_seq_flit(seq(1), 3), SeqOutcome::Duplicate);
        assert_eq!(rx.next_command(8), Some(RxCommand::Ack(seq(1))));
        rx.command_sent(RxCommand::Ack(seq(1)));
        assert_eq!(
            rx.on_seq_flit(seq(3), 3),
            SeqOutcome::Gap { requested: true }
        );
        assert_eq!(
            rx.on_seq_flit(seq(4), 3),
            SeqOutcome::Gap { requested: false }
        );
        for _ in 0..3 {
            assert_eq!(rx.next_command(8), Some(RxCommand::ReplayRequest(seq(2))));
            rx.command_sent(RxCommand::ReplayRequest(seq(2)));
        }
        assert_eq!(rx.next_command(8), None);
        // The last 255 numbers behind `expected` are duplicates; 255 ahead are gaps.
        assert_eq!(
            rx.on_seq_flit(seq(2).add(511 - 255), 3),
            SeqOutcome::Duplicate
        );
        assert!(matches!(
            rx.on_seq_flit(seq(2).add(255), 3),
            SeqOutcome::Gap { .. }
        ));
        assert_eq!(rx.on_seq_flit(seq(2), 3), SeqOutcome::InOrder);
        assert!(!rx.awaiting_replay());
    }

    #[test]
    fn resolves_low_bits_within_bad_count() {
        let mut rx = Rx::new();
        assert_eq!(rx.resolve_lo(1), None); // not anchored
        rx.on_seq_flit(seq(509), 3); // gap, but anchors
        assert_eq!(rx.resolve_lo(2), None); // awaiting replay
        let mut rx = Rx::new();
        rx.on_seq_flit(seq(1), 3);
        assert_eq!(rx.resolve_lo(2), Some(seq(2)));
        assert_eq!(rx.resolve_lo(3), None); // would need one hidden flit
        rx.on_bad_crc(7, 3);
        rx.on_bad_crc(7, 3);
        assert_eq!(rx.resolve_lo(3), Some(seq(3)));
        assert_eq!(rx.resolve_lo(4), Some(seq(4)));
        assert_eq!(rx.resolve_lo(5), None);
    }

    #[test]
    fn seven_bad_flits_make_it_ambiguous() {
        let mut rx = Rx::new();
        rx.on_seq_flit(seq(511), 3);
        for _ in 0..6 {
            assert_eq!(rx.on_bad_crc(7, 3), (false, false));
            rx.on_good_unsequenced(); // NOPs do not re-anchor
        }
        assert_eq!(rx.resolve_lo(6), Some(seq(6))); // 511 + 1 + 5 wraps to 6
        assert_eq!(rx.on_bad_crc(7, 3), (true, true));
        assert!(rx.is_ambiguous());
        assert_eq!(rx.resolve_lo(1), None);
        assert_eq!(rx.next_command(8), Some(RxCommand::ReplayRequest(seq(1))));
        assert_eq!(rx.on_bad_crc(7, 3), (false, false));
        assert_eq!(rx.on_seq_flit(seq(1), 3), SeqOutcome::InOrder);
        assert!(!rx.is_ambiguous());
        assert_eq!(rx.bad_in_row(), 0);
    }
}
