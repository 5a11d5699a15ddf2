//! The endpoint's plumbing: the credit gate over the link layer's credit machines, and the
//! receive path from TL flits to the requester and completer.

use heapless::Deque;

use super::completer::Completer;
use super::endpoint::{EndpointEvent, EndpointStats, ReadSink, EVENTS};
use super::requester::Requester;
use super::target::MemoryTarget;
use super::{CreditGate, Flow, Pool};
use crate::flow::{CreditReceiver, CreditSender, CreditTarget, Credits};
use crate::link::TlSink;
use crate::time::Instant;
use crate::wire::dl_stream::TL_FLIT_LEN;
use crate::wire::tl_flit::{BEAT_LEN, MAX_BEATS};
use crate::wire::{TlField, TlItem, TlMessage, TlUnpacker, Vc};

/// The credits of one port, seen through the transaction layer's [`CreditGate`]: a VC's own
/// credits first, else the shared pool (the transfer's `pool` bit says which; the peer's
/// returns name their target with `TlMessage::CreditTarget`, `spec-notes/link.md` L12).
pub(crate) struct Gate<'a> {
    pub(crate) sender: &'a mut CreditSender,
    pub(crate) receiver: &'a mut CreditReceiver,
    pub(crate) now: Instant,
    pub(crate) bad_releases: &'a mut u64,
}

pub(crate) const fn needs(flow: Flow, beats: u8) -> Credits {
    let beats = beats as u16;
    match flow {
        Flow::Request => Credits::request(beats),
        Flow::Response => Credits::response(beats),
    }
}

pub(crate) const fn target(vc: Vc, pool: Pool) -> CreditTarget {
    match pool {
        Pool::PerVc => CreditTarget::Vc(vc),
        Pool::Shared => CreditTarget::Shared,
    }
}

impl CreditGate for Gate<'_> {
    fn try_consume(&mut self, flow: Flow, vc: Vc, data_beats: u8) -> Option<Pool> {
        match self.sender.consume_vc_or_pool(vc, needs(flow, data_beats)) {
            Ok(CreditTarget::Shared) => Some(Pool::Shared),
            Ok(CreditTarget::Vc(_)) => Some(Pool::PerVc),
            Err(_) => None,
        }
    }

    fn release(&mut self, flow: Flow, vc: Vc, pool: Pool, data_beats: u8) {
        let t = target(vc, pool);
        if self
            .receiver
            .release(self.now, t, needs(flow, data_beats))
            .is_err()
        {
            *self.bad_releases = self.bad_releases.saturating_add(1);
        }
    }
}

/// Everything the receive path touches while the link is borrowed.
pub(crate) struct Rx<
    'a,
    H,
    const TAGS: usize,
    const OPS: usize,
    const QUEUE: usize,
    const RESP: usize,
> {
    pub(crate) requester: &'a mut Requester<TAGS, OPS, QUEUE>,
    pub(crate) completer: &'a mut Completer<RESP>,
    pub(crate) host: &'a mut H,
    pub(crate) unpacker: &'a mut TlUnpacker,
    pub(crate) sender: &'a mut CreditSender,
    pub(crate) receiver: &'a mut CreditReceiver,
    pub(crate) credit_target: &'a mut CreditTarget,
    pub(crate) events: &'a mut Deque<EndpointEvent, EVENTS>,
    pub(crate) stats: &'a mut EndpointStats,
    pub(crate) now: Instant,
}

impl<H, const TAGS: usize, const OPS: usize, const QUEUE: usize, const RESP: usize> TlSink
    for Rx<'_, H, TAGS, OPS, QUEUE, RESP>
where
    H: MemoryTarget + ReadSink,
{
    fn tl_flit(&mut self, flit: &[u8; TL_FLIT_LEN]) {
        self.stats.tl_flits_received = self.stats.tl_flits_received.saturating_add(1);
        if self.unpacker.failed().is_some() {
            self.stats.broken_stream_flits = self.stats.broken_stream_flits.saturating_add(1);
            return;
        }
        let Rx {
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
        } = self;
        let now = *now;
        let r = unpacker.unpack_flit(flit, |item| match item {
            // The peer may grant per-VC credits: its credit-target messages say whose
            // credits the flow-control fields that follow return (a stream starts at the pool).
            TlItem::Credits(fc) => sender.handle_return(**credit_target, &fc),
            TlItem::Message(TlMessage::CreditTarget { target }) => {
                **credit_target = CreditTarget::from_index(target).unwrap_or(CreditTarget::Shared);
            }
            TlItem::Message(TlMessage::InitialCreditReleaseComplete) => {
                sender.handle_initial_release_complete();
            }
            TlItem::Message(_) => {}
            TlItem::Transfer(t) => {
                stats.transfers_received = stats.transfers_received.saturating_add(1);
                let (request, vc, pool) = classify(&t.field);
                // The unpacker checked the transfer's shape: its data is `beats` whole or
                // partial beats (`DataShape::of`), so the shape is not worked out again.
                let beats = t.data.len().div_ceil(BEAT_LEN).min(MAX_BEATS) as u8;
                let flow = if request {
                    Flow::Request
                } else {
                    Flow::Response
                };
                let (tg, need) = (target(vc, pool), needs(flow, beats));
                if receiver.handle_consumed(tg, need).is_err() {
                    stats.overruns = stats.overruns.saturating_add(1);
                    return;
                }
                let mut gate = Gate {
                    sender,
                    receiver,
                    now,
                    bad_releases: &mut stats.bad_releases,
                };
                if request {
                    if completer.handle_request(now, &t, *host, &mut gate).is_err() {
                        gate.release(flow, vc, pool, beats);
                        stats.busy_drops = stats.busy_drops.saturating_add(1);
                    }
                } else if t.field.tag().is_some_and(|tag| !requester.owns_tag(tag))
                    && host.foreign_response(now, &t)
                {
                    // Another port's: consumed here, its credits go back from here.
                    gate.release(flow, vc, pool, beats);
                    stats.foreign_responses = stats.foreign_responses.saturating_add(1);
                } else if let Some(d) = requester.handle_response(now, &t, &mut gate) {
                    host.read_data(d);
                }
            }
        });
        if let Err(e) = r {
            if events.push_back(EndpointEvent::TlStreamBroken(e)).is_err() {
                stats.events_lost = stats.events_lost.saturating_add(1);
            }
        }
    }
}

/// (is a request, VC, pool) of a transfer's field.
const fn classify(f: &TlField) -> (bool, Vc, Pool) {
    match *f {
        TlField::UncompressedRequest(r) => (true, r.vchan, Pool::from_bit(r.pool)),
        TlField::CompressedRequest(r) => (true, r.vchan, Pool::from_bit(r.pool)),
        TlField::UncompressedResponse(r) => (false, r.vchan, Pool::from_bit(r.pool)),
        TlField::CompressedReadResponse(r) => (false, r.vchan, Pool::from_bit(r.pool)),
        TlField::CompressedWriteResponse(r) => (false, r.vchan, Pool::from_bit(r.pool)),
        TlField::FlowControl(_) => (false, Vc::from_bits_truncate(0), Pool::PerVc),
    }
}
