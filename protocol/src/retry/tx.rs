//! Transmit half of link-level retry: the replay buffer and its window
//! (`spec-notes/link.md#retry-tx`).
//!
//! The buffer is a ring of `CAP` whole flits (≤ 255, the DL's limit of unacknowledged
//! flits). It holds every submitted flit until the peer acknowledges it:
//!
//! ```text
//!  oldest                                   oldest + len
//!    |<------ sent ------>|                      |
//!    [ s | s | s | s | s | s | u | u | u ]         s = sent at least once, u = not yet sent
//!              ^ next (the next flit to put on the wire; moves back on a replay)
//! ```

use super::flit::Flit;
use crate::wire::dl_flit::FLIT_LEN;
use crate::wire::SeqNum;

/// What an incoming Ack did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AckOutcome {
    /// Inside the window: `freed` flits left the buffer.
    Accepted { freed: u16 },
    /// Acknowledges the flit just before the window again.
    Duplicate,
    /// Neither: ignored.
    OutOfWindow,
}

/// What an incoming Replay Request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RrOutcome {
    /// Accepted: `freed` flits before `from` were implicitly acknowledged and the
    /// transmitter rewound to `from` (`resend` flits to send again).
    Rewound { freed: u16, resend: u16 },
    /// Inside the window but within the ignore window after the previous replay.
    Ignored,
    /// Outside the window: ignored.
    OutOfWindow,
}

/// The next payload flit to put on the wire.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outgoing<'a> {
    pub(crate) seq: SeqNum,
    pub(crate) flit: &'a Flit,
    /// Sent before: this is a retransmission.
    pub(crate) resend: bool,
    /// First flit after a rewind: op ReplayStart.
    pub(crate) replay_start: bool,
    /// Must carry its full sequence number (explicit header).
    pub(crate) explicit: bool,
}

/// The replay buffer and the transmit side of the sequence window.
// Memory layout (`repr(C)`: declaration order): the window state first, the replay buffer
// last.
#[derive(Debug, Clone)]
#[repr(C)]
pub(crate) struct Tx<const CAP: usize> {
    /// Ring index of the oldest buffered flit.
    head: u16,
    /// Flits buffered (submitted and not yet acknowledged).
    len: u16,
    /// Of those, how many (from the oldest) went on the wire at least once.
    sent: u16,
    /// Offset from the oldest of the next flit to send.
    next: u16,
    /// Sequence number of the oldest buffered flit (or of the next submission if empty).
    oldest: SeqNum,
    replay_start: bool,
    force_explicit: bool,
    /// Flits still to send before Replay Requests are honoured again.
    ignore_left: u16,
    /// Replays since the window last moved forward.
    replays_since_progress: u16,
    slots: [Flit; CAP],
}

impl<const CAP: usize> Tx<CAP> {
    const CAP_OK: () = assert!(
        CAP >= 1 && CAP <= 255,
        "replay buffer capacity must be 1..=255 flits"
    );
    #[allow(clippy::cast_possible_truncation)]
    const CAP16: u16 = CAP as u16;

    /// An empty buffer whose first flit will carry sequence number 1.
    pub(crate) fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::CAP_OK;
        Tx {
            slots: [[0; FLIT_LEN]; CAP],
            head: 0,
            len: 0,
            sent: 0,
            next: 0,
            oldest: SeqNum::FIRST,
            replay_start: false,
            force_explicit: true,
            ignore_left: 0,
            replays_since_progress: 0,
        }
    }

    /// Forget everything (after a Fault): sequence numbers restart at 1.
    pub(crate) fn reset(&mut self) {
        self.head = 0;
        self.len = 0;
        self.sent = 0;
        self.next = 0;
        self.oldest = SeqNum::FIRST;
        self.replay_start = false;
        self.force_explicit = true;
        self.ignore_left = 0;
        self.replays_since_progress = 0;
    }

    fn slot(&self, off: u16) -> usize {
        let i = self.head.wrapping_add(off);
        usize::from(if i >= Self::CAP16 {
            i.wrapping_sub(Self::CAP16)
        } else {
            i
        })
    }

    /// Flits buffered (submitted, not acknowledged).
    pub(crate) fn buffered(&self) -> u16 {
        self.len
    }
    /// Flits sent and not acknowledged.
    pub(crate) fn unacked(&self) -> u16 {
        self.sent
    }
    /// Flits waiting to go on the wire (new, or to be resent).
    pub(crate) fn unsent(&self) -> u16 {
        self.len.saturating_sub(self.next)
    }
    /// Room for another submission.
    pub(crate) fn has_room(&self) -> bool {
        self.len < Self::CAP16
    }
    /// Sequence number of the oldest unacknowledged flit.
    pub(crate) fn oldest(&self) -> SeqNum {
        self.oldest
    }
    /// Sequence number the next flit put on the wire will carry.
    pub(crate) fn next_seq(&self) -> SeqNum {
        self.oldest.add(self.next)
    }
    /// Sequence number the next submission will get.
    pub(crate) fn next_submit_seq(&self) -> SeqNum {
        self.oldest.add(self.len)
    }
    /// Replays since the window last moved forward.
    pub(crate) fn replays_since_progress(&self) -> u16 {
        self.replays_since_progress
    }
    /// Inside the Replay Request ignore window.
    pub(crate) fn ignoring(&self) -> bool {
        self.ignore_left > 0
    }

    /// The slot the next submitted flit is written into (its old contents), if there is room.
    pub(crate) fn next_slot(&self) -> Option<&Flit> {
        if !self.has_room() {
            return None;
        }
        self.slots.get(self.slot(self.len))
    }

    /// Store a new flit written by `fill`; `None` when the buffer is full.
    pub(crate) fn submit_with(&mut self, fill: impl FnOnce(&mut Flit)) -> Option<SeqNum> {
        if !self.has_room() {
            return None;
        }
        let i = self.slot(self.len);
        let slot = self.slots.get_mut(i)?;
        fill(slot);
        let seq = self.next_submit_seq();
        self.len = self.len.wrapping_add(1);
        Some(seq)
    }

    /// The next payload flit to send, if any.
    pub(crate) fn peek(&self) -> Option<Outgoing<'_>> {
        if self.next >= self.len {
            return None;
        }
        let flit = self.slots.get(self.slot(self.next))?;
        Some(Outgoing {
            seq: self.next_seq(),
            flit,
            resend: self.next < self.sent,
            replay_start: self.replay_start,
            // Every resent flit carries its full number, not only the first of a replay: if
            // the ReplayStart flit is corrupted, the receiver cannot know the stream went
            // back, and an old flit's low 3 bits could resolve to the flit it expects next
            // (anchor + 1 ≡ anchor − 7), delivering it twice and out of order. Flits sent for
            // the first time are always ahead of the receiver's anchor, where resolution is
            // sound (`rx.rs`).
            explicit: self.replay_start || self.force_explicit || self.next < self.sent,
        })
    }

    /// The flit from [`Tx::peek`] went on the wire.
    pub(crate) fn mark_sent(&mut self) {
        if self.next < self.len {
            self.next = self.next.wrapping_add(1);
            self.sent = self.sent.max(self.next);
            self.replay_start = false;
            self.force_explicit = false;
        }
    }

    /// Any flit (payload, command or NOP) went on the wire: advances the ignore window.
    pub(crate) fn count_flit(&mut self) {
        self.ignore_left = self.ignore_left.saturating_sub(1);
    }

    /// The ignore window's time fallback expired.
    pub(crate) fn end_ignore(&mut self) {
        self.ignore_left = 0;
    }

    fn free(&mut self, n: u16) {
        let n = n.min(self.sent);
        if n == 0 {
            return;
        }
        self.head = u16::try_from(self.slot(n)).unwrap_or(0);
        self.len = self.len.saturating_sub(n);
        self.sent = self.sent.saturating_sub(n);
        if self.next < n {
            // The peer already has flits we were about to resend: skip them. The next
            // flit no longer follows the last one sent, so it must carry its full number.
            self.next = 0;
            self.force_explicit = true;
        } else {
            self.next = self.next.wrapping_sub(n);
        }
        self.oldest = self.oldest.add(n);
        self.replays_since_progress = 0;
    }

    /// An Ack for `a`: frees every flit up to and including `a` if `a` was sent and is
    /// unacknowledged.
    pub(crate) fn handle_ack(&mut self, a: SeqNum) -> AckOutcome {
        let d = a.distance_from(self.oldest);
        if d < self.sent {
            let freed = d.wrapping_add(1);
            self.free(freed);
            AckOutcome::Accepted { freed }
        } else if a == self.oldest.prev() {
            AckOutcome::Duplicate
        } else {
            AckOutcome::OutOfWindow
        }
    }

    /// A Replay Request for `s`: accepted when `s` is a sent, unacknowledged flit or the
    /// next one to send, and the ignore window (`ignore_flits` long) is closed.
    pub(crate) fn handle_replay_request(&mut self, s: SeqNum, ignore_flits: u16) -> RrOutcome {
        let d = s.distance_from(self.oldest);
        if d > self.sent {
            return RrOutcome::OutOfWindow;
        }
        if self.ignoring() {
            return RrOutcome::Ignored;
        }
        self.free(d);
        let resend = self.rewind();
        self.ignore_left = ignore_flits;
        RrOutcome::Rewound { freed: d, resend }
    }

    /// Resend every unacknowledged flit; counts toward the replay limit unless there is
    /// nothing to resend (a request for the next unsent flit replays nothing).
    pub(crate) fn rewind(&mut self) -> u16 {
        self.next = 0;
        self.replay_start = true;
        if self.sent > 0 {
            self.replays_since_progress = self.replays_since_progress.saturating_add(1);
        }
        self.sent
    }

    /// After the link came back up: resend every unacknowledged flit (not counted toward
    /// the replay limit); the next flit carries its full number either way.
    pub(crate) fn link_up_rewind(&mut self) -> u16 {
        self.force_explicit = true;
        self.ignore_left = 0;
        if self.sent > 0 {
            self.next = 0;
            self.replay_start = true;
        }
        self.sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(v: u16) -> SeqNum {
        SeqNum::new(v).unwrap()
    }

    fn send_n<const C: usize>(tx: &mut Tx<C>, n: u16) {
        for _ in 0..n {
            tx.submit_with(|b| b[0] = 1).unwrap();
            assert!(tx.peek().is_some());
            tx.mark_sent();
        }
    }

    #[test]
    fn fills_to_capacity() {
        let mut tx = Tx::<4>::new();
        for i in 1..=4 {
            assert_eq!(tx.submit_with(|b| b[0] = i as u8), Some(seq(i)));
        }
        assert_eq!(tx.submit_with(|_| {}), None);
        let o = tx.peek().unwrap();
        assert_eq!(
            (o.seq, o.flit[0], o.explicit, o.resend),
            (seq(1), 1, true, false)
        );
        tx.mark_sent();
        let o = tx.peek().unwrap();
        assert_eq!((o.seq, o.explicit), (seq(2), false));
    }

    #[test]
    fn ack_window_edges() {
        let mut tx = Tx::<8>::new();
        send_n(&mut tx, 5); // 1..=5 sent
        tx.submit_with(|_| {}).unwrap(); // 6 buffered, unsent
        assert_eq!(tx.handle_ack(seq(6)), AckOutcome::OutOfWindow);
        assert_eq!(tx.handle_ack(seq(511)), AckOutcome::Duplicate);
        assert_eq!(tx.handle_ack(seq(200)), AckOutcome::OutOfWindow);
        assert_eq!(tx.handle_ack(seq(1)), AckOutcome::Accepted { freed: 1 });
        assert_eq!(tx.handle_ack(seq(1)), AckOutcome::Duplicate);
        assert_eq!(tx.handle_ack(seq(5)), AckOutcome::Accepted { freed: 4 });
        assert_eq!((tx.unacked(), tx.buffered(), tx.oldest()), (0, 1, seq(6)));
        assert_eq!(tx.handle_ack(seq(5)), AckOutcome::Duplicate);
    }

    #[test]
    fn wraps_511_to_1() {
        let mut tx = Tx::<255>::new();
        send_n(&mut tx, 255);
        assert_eq!(tx.handle_ack(seq(255)), AckOutcome::Accepted { freed: 255 });
        send_n(&mut tx, 255); // 256..=510
        assert_eq!(tx.handle_ack(seq(510)), AckOutcome::Accepted { freed: 255 });
        send_n(&mut tx, 3); // 511, 1, 2
        assert_eq!(tx.next_seq(), seq(3));
        assert_eq!(tx.handle_ack(seq(1)), AckOutcome::Accepted { freed: 2 });
        assert_eq!(tx.oldest(), seq(2));
    }

    #[test]
    fn replay_request_rewinds_and_ignores() {
        let mut tx = Tx::<16>::new();
        send_n(&mut tx, 10);
        assert_eq!(
            tx.handle_replay_request(seq(12), 12),
            RrOutcome::OutOfWindow
        );
        assert_eq!(
            tx.handle_replay_request(seq(4), 12),
            RrOutcome::Rewound {
                freed: 3,
                resend: 7
            }
        );
        assert_eq!(tx.oldest(), seq(4));
        let o = tx.peek().unwrap();
        assert!(o.replay_start && o.explicit && o.resend);
        assert_eq!(o.seq, seq(4));
        tx.mark_sent();
        tx.count_flit();
        assert!(!tx.peek().unwrap().replay_start);
        // Copies of the same request (and any other) are ignored for 12 flits.
        for _ in 0..11 {
            assert_eq!(tx.handle_replay_request(seq(4), 12), RrOutcome::Ignored);
            tx.count_flit();
        }
        assert!(!tx.ignoring());
        assert!(matches!(
            tx.handle_replay_request(seq(5), 12),
            RrOutcome::Rewound { freed: 1, .. }
        ));
        // The request for the next unsent flit is inside the window.
        tx.end_ignore();
        assert!(matches!(
            tx.handle_replay_request(seq(11), 12),
            RrOutcome::Rewound {
                freed: 6,
                resend: 0
            }
        ));
    }

    #[test]
    fn ack_past_rewind_skips_and_forces_explicit() {
        let mut tx = Tx::<16>::new();
        send_n(&mut tx, 6);
        tx.rewind();
        tx.mark_sent(); // resent 1
        assert_eq!(tx.handle_ack(seq(4)), AckOutcome::Accepted { freed: 4 });
        let o = tx.peek().unwrap();
        assert_eq!(o.seq, seq(5));
        assert!(o.explicit && o.resend);
        assert_eq!(tx.replays_since_progress(), 0);
    }
}
