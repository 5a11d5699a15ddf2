//! A [`UaLink`] with a numbered-TL-flit source and an exactly-once, in-order checking sink.

use super::{DeliveryLog, Endpoint};
use crate::link::control::ControlEvent;
use crate::link::{TlSink, UaLink, UaLinkEvent};
use crate::retry;
use crate::time::Instant;
use crate::wire::dl_stream::TL_FLIT_LEN;

/// Fill TL flit number `id`: `id + 1` (never an all-zero NOP flit), then a pattern.
pub fn fill_tl(id: u64, flit: &mut [u8; TL_FLIT_LEN]) {
    let (head, rest) = flit.split_at_mut(8);
    head.copy_from_slice(&id.wrapping_add(1).to_be_bytes());
    let mut x = id.wrapping_mul(0xd6e8_feb8_6659_fd93) | 1;
    for b in rest.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x.to_le_bytes()[0];
    }
}

/// The number of a TL flit written by [`fill_tl`], or `None` if it does not match.
pub fn check_tl(flit: &[u8; TL_FLIT_LEN]) -> Option<u64> {
    let id = u64::from_be_bytes(flit.first_chunk::<8>().copied()?).checked_sub(1)?;
    let mut want = [0u8; TL_FLIT_LEN];
    fill_tl(id, &mut want);
    (want == *flit).then_some(id)
}

impl TlSink for DeliveryLog {
    fn tl_flit(&mut self, flit: &[u8; TL_FLIT_LEN]) {
        self.record_id(check_tl(flit));
    }
}

/// A [`UaLink`] end that submits `to_submit` numbered TL flits as fast as the link takes
/// them and checks what it receives.
#[derive(Debug, Clone)]
pub struct UaEnd<const CAP: usize, const TXQ: usize> {
    /// The link.
    pub link: UaLink<CAP, TXQ>,
    /// TL flits still to submit.
    pub to_submit: u64,
    /// TL flits submitted so far.
    pub submitted: u64,
    /// What arrived.
    pub log: DeliveryLog,
    /// The last Fault event seen.
    pub fault: Option<retry::Event>,
    /// Control events seen (the first 32).
    pub control_log: heapless::Vec<ControlEvent, 32>,
}

impl<const CAP: usize, const TXQ: usize> UaEnd<CAP, TXQ> {
    /// An end that will send `to_submit` TL flits.
    pub fn new(link: UaLink<CAP, TXQ>, to_submit: u64) -> Self {
        UaEnd {
            link,
            to_submit,
            submitted: 0,
            log: DeliveryLog::default(),
            fault: None,
            control_log: heapless::Vec::new(),
        }
    }

    fn drain_events(&mut self) {
        while let Some(e) = self.link.poll_event() {
            match e {
                UaLinkEvent::Retry(e @ retry::Event::Fault { .. }) => self.fault = Some(e),
                UaLinkEvent::Control(c) => {
                    let _ = self.control_log.push(c);
                }
                _ => {}
            }
        }
    }
}

impl<const CAP: usize, const TXQ: usize> Endpoint for UaEnd<CAP, TXQ> {
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        while self.to_submit > 0 && self.link.tx_room() > 0 {
            let mut f = [0u8; TL_FLIT_LEN];
            fill_tl(self.submitted, &mut f);
            if self.link.submit_tl_flit(now, &f).is_err() {
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
        self.link.handle_flit(now, frame, &mut self.log);
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
    fn tl_pattern_round_trip() {
        let mut f = [0u8; TL_FLIT_LEN];
        fill_tl(0, &mut f);
        assert_ne!(f, [0; TL_FLIT_LEN]);
        assert_eq!(check_tl(&f), Some(0));
        f[63] ^= 1;
        assert_eq!(check_tl(&f), None);
        assert_eq!(check_tl(&[0; TL_FLIT_LEN]), None);
    }
}
