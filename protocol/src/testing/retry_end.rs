//! A [`LinkRetry`] with a numbered-flit source and an exactly-once, in-order checking sink.

use super::Endpoint;
use crate::retry::{Event, LinkRetry};
use crate::time::Instant;
use crate::wire::dl_flit::{CRC_COVERED_LEN, FLIT_LEN, SEGMENT_HEADERS_OFFSET};

/// What a checking sink saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeliveryLog {
    /// Flits delivered exactly in order.
    pub delivered: u64,
    /// Flits delivered again (must stay 0).
    pub duplicated: u64,
    /// Flits delivered ahead of a missing one (must stay 0).
    pub reordered: u64,
    /// Flits whose body did not match its number (must stay 0).
    pub corrupted: u64,
    /// The number of the next flit expected.
    pub next_expected: u64,
}

impl DeliveryLog {
    /// Record a delivered DL flit filled by [`fill_body`].
    pub fn record(&mut self, flit: &[u8; FLIT_LEN]) {
        self.record_id(check_body(flit));
    }

    /// Record the number of a delivered item (`None`: its content was wrong).
    pub fn record_id(&mut self, id: Option<u64>) {
        let Some(id) = id else {
            self.corrupted = self.corrupted.saturating_add(1);
            return;
        };
        if id == self.next_expected {
            self.delivered = self.delivered.saturating_add(1);
            self.next_expected = id.saturating_add(1);
        } else if id < self.next_expected {
            self.duplicated = self.duplicated.saturating_add(1);
        } else {
            self.reordered = self.reordered.saturating_add(1);
            self.next_expected = id.saturating_add(1);
        }
    }

    /// Nothing duplicated, reordered or corrupted.
    pub fn is_clean(&self) -> bool {
        self.duplicated == 0 && self.reordered == 0 && self.corrupted == 0
    }
}

/// Fill the part of `flit` that retry carries unchanged (segment headers and payload) for
/// flit number `id`: the number, then a pattern derived from it.
pub fn fill_body(id: u64, flit: &mut [u8; FLIT_LEN]) {
    let body = flit
        .get_mut(SEGMENT_HEADERS_OFFSET..CRC_COVERED_LEN)
        .unwrap_or_default();
    let (head, rest) = body.split_at_mut(8);
    head.copy_from_slice(&id.to_be_bytes());
    let mut x = id.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for b in rest.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x.to_le_bytes()[0];
    }
}

/// The number of a flit written by [`fill_body`], or `None` if it does not match.
pub fn check_body(flit: &[u8; FLIT_LEN]) -> Option<u64> {
    let body = flit.get(SEGMENT_HEADERS_OFFSET..CRC_COVERED_LEN)?;
    let id = u64::from_be_bytes(body.first_chunk::<8>().copied()?);
    let mut want = [0u8; FLIT_LEN];
    fill_body(id, &mut want);
    (want.get(SEGMENT_HEADERS_OFFSET..CRC_COVERED_LEN)? == body).then_some(id)
}

/// A [`LinkRetry`] end that submits `to_submit` numbered flits as fast as the link takes
/// them and checks that what it receives is every number once, in order.
#[derive(Debug, Clone)]
pub struct RetryEnd<const CAP: usize> {
    /// The machine.
    pub link: LinkRetry<CAP>,
    /// Flits still to submit.
    pub to_submit: u64,
    /// Flits submitted so far.
    pub submitted: u64,
    /// The receiving side's log.
    pub log: DeliveryLog,
    /// The last Fault event seen.
    pub fault: Option<Event>,
}

impl<const CAP: usize> RetryEnd<CAP> {
    /// An end that will send `to_submit` flits.
    pub fn new(link: LinkRetry<CAP>, to_submit: u64) -> Self {
        RetryEnd {
            link,
            to_submit,
            submitted: 0,
            log: DeliveryLog::default(),
            fault: None,
        }
    }

    fn drain_events(&mut self) {
        while let Some(e) = self.link.poll_event() {
            if matches!(e, Event::Fault { .. }) {
                self.fault = Some(e);
            }
        }
    }
}

impl<const CAP: usize> Endpoint for RetryEnd<CAP> {
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        while self.to_submit > 0 && self.link.can_submit() {
            let id = self.submitted;
            if self.link.submit_with(|b| fill_body(id, b)).is_err() {
                break;
            }
            self.submitted = self.submitted.saturating_add(1);
            self.to_submit = self.to_submit.saturating_sub(1);
        }
        let r = self.link.poll_transmit(now, buf);
        self.drain_events();
        r
    }

    fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        if let Some(d) = self.link.handle_flit(now, frame) {
            self.log.record(d.flit);
        }
        self.drain_events();
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        self.link.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.link.handle_timeout(now);
        self.drain_events();
    }

    fn handle_link(&mut self, now: Instant, up: bool) {
        if up {
            self.link.handle_link_up(now);
        } else {
            self.link.handle_link_down(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_pattern_round_trip() {
        let mut b = [0u8; FLIT_LEN];
        fill_body(12345, &mut b);
        b[0] = 0xff; // header and CRC bytes are not part of the body
        b[639] = 0xff;
        assert_eq!(check_body(&b), Some(12345));
        assert_eq!(check_body(&b), Some(12345));
        b[400] ^= 1;
        assert_eq!(check_body(&b), None);
        let mut log = DeliveryLog::default();
        fill_body(0, &mut b);
        log.record(&b);
        log.record(&b);
        fill_body(5, &mut b);
        log.record(&b);
        assert_eq!((log.delivered, log.duplicated, log.reordered), (1, 1, 1));
        assert!(!log.is_clean());
    }
}
