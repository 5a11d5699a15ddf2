//! Glue between [`LinkPort`]s and the [`Switch`] (`spec-notes/switch.md#ports`): frames that
//! arrived on a port go to [`Switch::forward`], frames the switch sends go into the egress
//! port's link, and every receive slot is released (returning its credits to the ingress
//! peer) once its frame has left or was dropped.
//!
//! ```text
//!  peer ══ UaLink ══ LinkPort[p] ─next_arrival─▶ Switch::forward ─CutThrough{e}─┐
//!                        ▲ release (credits back)        │ Queued                ▼
//!                        └───────────────────────────────┴─ poll_transmit ─▶ LinkPort[e].transmit ══ UaLink ══ peer
//! ```
//!
//! A frame's switch handle is `(ingress port << 8) | slot` ([`handle`]); the bytes stay in
//! the ingress port's slot until they are copied into the egress port's TL packer.
//!
//! [`shuttle`] joins two link ends back to back in memory (the firmware self-test's links).

use crate::port::LinkPort;
use crate::{Event, Forwarded, Frame, PortIndex, Switch};
use podlink_protocol::retry::FLIT_LEN;
use podlink_protocol::time::Instant;

/// The switch handle of the frame in `slot` of ingress port `port`.
pub const fn handle(port: u16, slot: u8) -> u32 {
    ((port as u32) << 8) | slot as u32
}

/// The (ingress port, slot) of a handle made by [`handle`].
pub const fn split_handle(h: u32) -> (u16, u8) {
    ((h >> 8) as u16, h as u8)
}

/// What one [`service`] pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Serviced {
    /// Frames handed to [`Switch::forward`].
    pub offered: u32,
    /// Of those, dropped by the switch (slot released at once).
    pub dropped: u32,
    /// Frames copied into an egress port's link (cut through or from the queues).
    pub sent: u32,
    /// Flushed frames whose slots were released.
    pub discarded: u32,
    /// Frames the egress port refused after the switch took its credit (never expected).
    pub send_errors: u32,
}

impl Serviced {
    /// Anything happened.
    pub fn any(&self) -> bool {
        self.offered != 0 || self.sent != 0 || self.discarded != 0
    }
}

fn move_frame<const CAP: usize, const TXQ: usize, const SLOTS: usize>(
    now: Instant,
    ports: &mut [LinkPort<CAP, TXQ, SLOTS>],
    h: u32,
    egress: u16,
    done: &mut Serviced,
) {
    let (p, slot) = split_handle(h);
    let Some(frame) = ports
        .get(usize::from(p))
        .and_then(|x| x.frame(slot))
        .cloned()
    else {
        return;
    };
    match ports
        .get_mut(usize::from(egress))
        .map(|e| e.transmit(&frame))
    {
        Some(Ok(())) => done.sent = done.sent.saturating_add(1),
        _ => done.send_errors = done.send_errors.saturating_add(1),
    }
    if let Some(x) = ports.get_mut(usize::from(p)) {
        x.release(now, slot);
    }
}

fn release_discarded<
    const PORTS: usize,
    I: PortIndex,
    const CAP: usize,
    const TXQ: usize,
    const SLOTS: usize,
>(
    sw: &mut Switch<PORTS, I>,
    now: Instant,
    ports: &mut [LinkPort<CAP, TXQ, SLOTS>],
    done: &mut Serviced,
) {
    while let Some(h) = sw.poll_discarded() {
        let (p, slot) = split_handle(h);
        if let Some(x) = ports.get_mut(usize::from(p)) {
            x.release(now, slot);
        }
        done.discarded = done.discarded.saturating_add(1);
    }
}

/// One pass of the switch over its ports (index = port number): read every link's state and
/// credits, forward every frame that arrived, send every queued frame that may go, close the
/// health window if due, and release the slots of frames that left, were dropped or were
/// flushed. Call after any link input and at [`Switch::poll_timeout`]. The switch's events
/// go to `on_event` as they happen (so that 64 ports changing state at once lose none).
pub fn service<
    const PORTS: usize,
    I: PortIndex,
    const CAP: usize,
    const TXQ: usize,
    const SLOTS: usize,
>(
    sw: &mut Switch<PORTS, I>,
    now: Instant,
    ports: &mut [LinkPort<CAP, TXQ, SLOTS>],
    mut on_event: impl FnMut(Event),
) -> Serviced {
    let mut done = Serviced::default();
    let n = ports.len().min(PORTS);
    let mut drain = |sw: &mut Switch<PORTS, I>| {
        while let Some(e) = sw.poll_event() {
            on_event(e);
        }
    };
    for (p, link) in (0u16..).zip(ports.iter()).take(n) {
        sw.refresh_port(p, link);
        drain(sw);
    }
    release_discarded(sw, now, ports, &mut done);
    for p in 0..n as u16 {
        while let Some(port) = ports.get_mut(usize::from(p)) {
            let Some(slot) = port.next_arrival() else {
                break;
            };
            let Some(f) = port.frame(slot) else {
                continue;
            };
            let frame = Frame {
                handle: handle(p, slot),
                header: f.header(),
                bytes: f.wire_bytes(),
            };
            done.offered = done.offered.saturating_add(1);
            let r = sw.forward(now, p, frame, ports);
            drain(sw);
            match r {
                Ok(Forwarded::CutThrough { port: e }) => {
                    move_frame(now, ports, frame.handle, e, &mut done);
                }
                Ok(Forwarded::Queued { .. }) => {}
                Err(_) => {
                    done.dropped = done.dropped.saturating_add(1);
                    if let Some(x) = ports.get_mut(usize::from(p)) {
                        x.release(now, slot);
                    }
                }
            }
        }
    }
    while let Some(tx) = sw.poll_transmit(now, ports) {
        move_frame(now, ports, tx.handle, tx.port, &mut done);
    }
    sw.handle_timeout(now, ports);
    drain(sw);
    release_discarded(sw, now, ports, &mut done);
    done
}

/// Carry DL flits between two link ends joined back to back in memory, one flit each way per
/// round, until neither has anything to send or `max_flits` have moved; returns how many
/// moved. `fault(a_to_b, flit)` sees every flit and may corrupt it in place, or return
/// `false` to lose it. Time does not pass: the caller fires timers.
pub fn shuttle<
    const C1: usize,
    const T1: usize,
    const S1: usize,
    const C2: usize,
    const T2: usize,
    const S2: usize,
>(
    now: Instant,
    a: &mut LinkPort<C1, T1, S1>,
    b: &mut LinkPort<C2, T2, S2>,
    buf: &mut [u8; FLIT_LEN],
    max_flits: u32,
    mut fault: impl FnMut(bool, &mut [u8]) -> bool,
) -> u32 {
    let mut moved = 0u32;
    while moved < max_flits {
        let mut any = false;
        if let Some(n) = a.poll_transmit(now, buf) {
            any = true;
            moved = moved.saturating_add(1);
            if let Some(f) = buf.get_mut(..n) {
                if fault(true, f) {
                    b.handle_flit(now, f);
                }
            }
        }
        if let Some(n) = b.poll_transmit(now, buf) {
            any = true;
            moved = moved.saturating_add(1);
            if let Some(f) = buf.get_mut(..n) {
                if fault(false, f) {
                    a.handle_flit(now, f);
                }
            }
        }
        if !any {
            break;
        }
    }
    moved
}
