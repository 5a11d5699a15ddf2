//! An [`EthLink`] with numbered TL flits spread over VCs and a per-VC exactly-once, in-order
//! checking sink (the Ethernet profile orders per {destination, VC} only).

use super::{check_tl, fill_tl, DeliveryLog, Endpoint};
use crate::link::{EthEvent, EthLink, TlSink};
use crate::time::Instant;
use crate::wire::dl_stream::TL_FLIT_LEN;
use crate::wire::{AccelId, Vc};

/// One [`DeliveryLog`] per VC; a TL flit's number carries its VC in bits 48..50.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VcLogs(pub [DeliveryLog; 4]);

impl VcLogs {
    /// Flits delivered in order, all VCs.
    pub fn delivered(&self) -> u64 {
        self.0.iter().map(|l| l.delivered).sum()
    }
    /// Nothing duplicated, reordered or corrupted on any VC.
    pub fn is_clean(&self) -> bool {
        self.0.iter().all(DeliveryLog::is_clean)
    }
    /// Duplicated flits, all VCs.
    pub fn duplicated(&self) -> u64 {
        self.0.iter().map(|l| l.duplicated).sum()
    }
    /// Reordered or corrupted flits, all VCs.
    pub fn reordered(&self) -> u64 {
        self.0
            .iter()
            .map(|l| l.reordered.saturating_add(l.corrupted))
            .sum()
    }
}

impl TlSink for VcLogs {
    fn tl_flit(&mut self, flit: &[u8; TL_FLIT_LEN]) {
        match check_tl(flit) {
            Some(id) => {
                let vc = usize::try_from((id >> 48) & 3).unwrap_or(0);
                if let Some(l) = self.0.get_mut(vc) {
                    l.record_id(Some(id & ((1 << 48) - 1)));
                }
            }
            None => {
                if let Some(l) = self.0.first_mut() {
                    l.record_id(None);
                }
            }
        }
    }
}

/// An [`EthLink`] end that submits `to_submit` numbered TL flits to `dst`, round robin over
/// the first `vcs` VCs, and checks what it receives per VC.
#[derive(Debug, Clone)]
pub struct EthEnd<const FRAMES: usize, const MAXF: usize, const TXQ: usize> {
    /// The link.
    pub link: EthLink<FRAMES, MAXF, TXQ>,
    /// Destination of the flits.
    pub dst: AccelId,
    /// VCs used (1..=4).
    pub vcs: u8,
    /// TL flits still to submit.
    pub to_submit: u64,
    /// TL flits submitted.
    pub submitted: u64,
    next: [u64; 4],
    /// What arrived.
    pub logs: VcLogs,
    /// The Fault event, if any.
    pub fault: Option<EthEvent>,
}

impl<const FRAMES: usize, const MAXF: usize, const TXQ: usize> EthEnd<FRAMES, MAXF, TXQ> {
    /// An end sending `to_submit` flits to `dst` over `vcs` VCs.
    pub fn new(link: EthLink<FRAMES, MAXF, TXQ>, dst: AccelId, vcs: u8, to_submit: u64) -> Self {
        EthEnd {
            link,
            dst,
            vcs: vcs.clamp(1, 4),
            to_submit,
            submitted: 0,
            next: [0; 4],
            logs: VcLogs::default(),
            fault: None,
        }
    }

    fn drain_events(&mut self) {
        while let Some(e) = self.link.poll_event() {
            if matches!(e, EthEvent::Fault { .. }) {
                self.fault = Some(e);
            }
        }
    }
}

impl<const FRAMES: usize, const MAXF: usize, const TXQ: usize> Endpoint
    for EthEnd<FRAMES, MAXF, TXQ>
{
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        while self.to_submit > 0 {
            let v = u8::try_from(self.submitted.checked_rem(u64::from(self.vcs)).unwrap_or(0))
                .unwrap_or(0);
            let vc = Vc::from_bits_truncate(v);
            if self.link.tx_room(vc) == 0 {
                break;
            }
            let Some(n) = self.next.get_mut(usize::from(v)) else {
                break;
            };
            let mut f = [0u8; TL_FLIT_LEN];
            fill_tl((u64::from(v) << 48) | *n, &mut f);
            if self.link.submit_tl_flit(self.dst, vc, &f).is_err() {
                break;
            }
            *n = n.saturating_add(1);
            self.submitted = self.submitted.saturating_add(1);
            self.to_submit = self.to_submit.saturating_sub(1);
        }
        let r = self.link.poll_transmit(now, buf);
        self.drain_events();
        r
    }

    fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        self.link.handle_frame(now, frame, &mut self.logs);
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
