//! Link ends as the forwarding logic sees them, TL credits, and owned TL transfers (frames)
//! (`spec-notes/simulator.md#credits`).

use podlink_protocol::flow::{CreditClass, CreditSender, CreditTarget, Credits as FieldCredits};
use podlink_protocol::txn::{CreditGate, Flow, Pool};
use podlink_protocol::wire::{TlField, TlFlowControl, TlTransfer, Vc};
use podlink_switch::header::{FrameKind, Header};
use podlink_switch::port::{LinkStats, PortLink};

/// Credit classes: command and data (64 B beats) for each flow.
pub const CLASSES: usize = 4;
/// Virtual channels.
pub const VCS: usize = 4;
/// TL credits per VC and class: `[vc][class]`, class 0/1 request command/data, 2/3 response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Credits(pub [[u32; CLASSES]; VCS]);

impl Credits {
    /// Every class of every VC at `n`.
    pub const fn all(n: u32) -> Credits {
        Credits([[n; CLASSES]; VCS])
    }

    pub(crate) fn classes(flow: Flow) -> (usize, usize) {
        match flow {
            Flow::Request => (0, 1),
            Flow::Response => (2, 3),
        }
    }

    /// Whether one command and `beats` data credits are there.
    pub fn has(&self, flow: Flow, vc: usize, beats: u32) -> bool {
        let (c, d) = Self::classes(flow);
        self.0.get(vc).is_some_and(|v| v[c] >= 1 && v[d] >= beats)
    }

    /// Take one command and `beats` data credits (caller checked [`Credits::has`]).
    pub fn take(&mut self, flow: Flow, vc: usize, beats: u32) {
        let (c, d) = Self::classes(flow);
        if let Some(v) = self.0.get_mut(vc) {
            v[c] = v[c].saturating_sub(1);
            v[d] = v[d].saturating_sub(beats);
        }
    }

    /// Give back `cmd` command and `beats` data credits.
    pub fn give(&mut self, flow: Flow, vc: usize, cmd: u32, beats: u32) {
        let (c, d) = Self::classes(flow);
        if let Some(v) = self.0.get_mut(vc) {
            v[c] = v[c].saturating_add(cmd);
            v[d] = v[d].saturating_add(beats);
        }
    }

    /// All zero.
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|v| v.iter().all(|&x| x == 0))
    }

    /// VC `vc`'s counters in the protocol's class order (request command, response command,
    /// request data, response data), each at most `u16::MAX`.
    pub fn field_credits(&self, vc: usize) -> FieldCredits {
        let v = self.0.get(vc).copied().unwrap_or_default();
        let c = |x: u32| u16::try_from(x).unwrap_or(u16::MAX);
        FieldCredits([c(v[0]), c(v[2]), c(v[1]), c(v[3])])
    }

    /// Add the credits a flow-control field returns for VC `vc`.
    pub fn add_field(&mut self, vc: usize, fc: &TlFlowControl) {
        let c = FieldCredits::from_field(fc);
        let get = |k: CreditClass| u32::from(c.get(k));
        self.give(
            Flow::Request,
            vc,
            get(CreditClass::ReqCmd),
            get(CreditClass::ReqData),
        );
        self.give(
            Flow::Response,
            vc,
            get(CreditClass::RspCmd),
            get(CreditClass::RspData),
        );
    }

    /// Take away the credits a flow-control field returns for VC `vc` (at most what is
    /// there).
    fn sub_field(&mut self, vc: usize, fc: &TlFlowControl) {
        let c = FieldCredits::from_field(fc);
        if let Some(v) = self.0.get_mut(vc) {
            for (i, k) in [
                CreditClass::ReqCmd,
                CreditClass::ReqData,
                CreditClass::RspCmd,
                CreditClass::RspData,
            ]
            .into_iter()
            .enumerate()
            {
                v[i] = v[i].saturating_sub(u32::from(c.get(k)));
            }
        }
    }
}

/// The flow of a TL control field.
pub fn flow_of(f: &TlField) -> Flow {
    match f {
        TlField::UncompressedRequest(_) | TlField::CompressedRequest(_) => Flow::Request,
        _ => Flow::Response,
    }
}

/// The VC of a TL control field.
pub fn vc_of(f: &TlField) -> Vc {
    match f {
        TlField::UncompressedRequest(r) => r.vchan,
        TlField::CompressedRequest(r) => r.vchan,
        TlField::UncompressedResponse(r) => r.vchan,
        TlField::CompressedReadResponse(r) => r.vchan,
        TlField::CompressedWriteResponse(r) => r.vchan,
        TlField::FlowControl(_) => Vc::default(),
    }
}

/// The protocol credits a frame of `flow` with `beats` data beats spends on a hop: one
/// command credit of its flow's class and one data credit per beat.
pub fn needs(flow: Flow, beats: u8) -> FieldCredits {
    match flow {
        Flow::Request => FieldCredits::request(u16::from(beats)),
        Flow::Response => FieldCredits::response(u16::from(beats)),
    }
}

/// The sending state of one link end, as the switch's forwarding logic sees it
/// ([`PortLink`]): link up, the TL credits the far end granted, and whether the end's
/// transmitter is pulling frames right now.
#[derive(Debug, Clone, Default)]
pub struct PortState {
    /// Link up.
    pub up: bool,
    /// The transmitter is packing a DL flit and takes a frame now.
    pub accepting: bool,
    /// Credits the far end granted: the protocol's `flow::CreditSender`, which learns the
    /// grant from the far end's initial release (in band, after link bring-up) and refuses
    /// returns above it.
    pub credits: CreditSender,
    /// Credits of frames the far end sent that this end has released, not yet handed to
    /// the end's return policy (`Sim::apply_credit_policy` moves them into the protocol's
    /// `CreditReceiver` at once).
    pub freed: Credits,
    /// Credits the return policy made due, not yet put into the end's TL packer as
    /// flow-control fields (withheld VCs' stay here).
    pub owed: Credits,
    /// The "initial credit release complete" message is due, after every owed credit.
    pub owe_release_complete: bool,
    /// Requests an accelerator end's completer holds (their credits are released when it
    /// answers them).
    pub held: Credits,
    /// Credits of buffers the end still held when its link was retrained (frames received
    /// before, requests its completer held): the fresh initial release grants every buffer,
    /// so freeing them returns nothing; at a switch end the release waits until they are
    /// all freed (`Sim::take_due_returns`).
    pub stale: Credits,
    /// VCs (bit per VC) whose credits this end keeps instead of returning (a fault).
    pub withheld: u8,
    /// Health counters for the switch (CRC errors and replays seen on this end).
    pub health: LinkStats,
}

impl PortState {
    /// The next credit return to send, if any: a VC whose owed credits may go now (not
    /// withheld), `current` (the VC the outgoing TL stream has selected) first, and the
    /// flow-control field carrying as much of them as the field's encoding holds
    /// (`flow::Credits::to_field`; the rest goes in later fields).
    pub fn next_return(&self, current: u8) -> Option<(u8, TlFlowControl)> {
        let may = |vc: usize| {
            self.withheld & (1 << vc) == 0
                && self
                    .owed
                    .0
                    .get(vc)
                    .is_some_and(|v| v.iter().any(|&x| x != 0))
        };
        let vc = if usize::from(current) < VCS && may(usize::from(current)) {
            usize::from(current)
        } else {
            (0..VCS).find(|&vc| may(vc))?
        };
        let (fc, _) = self.owed.field_credits(vc).to_field();
        Some((vc as u8, fc))
    }

    /// The return `fc` of VC `vc` went into the TL packer: those credits are no longer owed.
    pub fn returned(&mut self, vc: u8, fc: &TlFlowControl) {
        self.owed.sub_field(usize::from(vc), fc);
    }

    /// The end freed a buffer of a frame of `flow` with `beats` data beats on VC `vc`: its
    /// credits go to the return policy (`freed`), unless the buffer was held across a
    /// retrain (`stale`), whose credits the fresh initial release gives back (at a switch
    /// end, once they are all freed).
    pub fn free_buffers(&mut self, flow: Flow, vc: usize, beats: u32) {
        let (c, d) = Credits::classes(flow);
        let Some(st) = self.stale.0.get_mut(vc) else {
            return;
        };
        let from_stale = [(c, 1), (d, beats)].map(|(k, n)| {
            let t = st[k].min(n);
            st[k] -= t;
            n - t
        });
        self.freed.give(flow, vc, from_stale[0], from_stale[1]);
    }

    /// Whether owed credits (or the "initial credit release complete" message, which follows
    /// every owed credit) could be sent now.
    pub fn owes(&self) -> bool {
        self.release_complete_due()
            || self
                .owed
                .0
                .iter()
                .enumerate()
                .any(|(vc, v)| self.withheld & (1 << vc) == 0 && v.iter().any(|&x| x != 0))
    }

    /// The "initial credit release complete" message may go now: it is owed and every
    /// credit of the release went before it.
    pub fn release_complete_due(&self) -> bool {
        self.owe_release_complete && self.owed.is_zero()
    }
}

impl PortLink for PortState {
    fn is_up(&self) -> bool {
        self.up
    }

    /// Command credits of either flow (an upper bound, as the firmware's `LinkPort` gives):
    /// 0 only when no frame of the VC can go. (It was the minimum of the two, which let a
    /// completer short of request credits block the responses its own requester waited for:
    /// the pod deadlocked at high load.)
    fn tx_credits(&self, vc: Vc) -> u32 {
        [CreditClass::ReqCmd, CreditClass::RspCmd]
            .map(|c| self.credits.available(CreditTarget::Vc(vc), c))
            .into_iter()
            .fold(0u32, u32::saturating_add)
    }

    /// Takes the frame's protocol credits on its VC (a command credit of its flow and one
    /// data credit per beat, as the header says; the model's receivers grant nothing in the
    /// shared pool), as the switch library's own `LinkPort` does, if the end's transmitter
    /// is pulling a frame now.
    fn try_consume_credit(&mut self, h: &Header) -> bool {
        let flow = match h.kind {
            FrameKind::Request => Flow::Request,
            FrameKind::Response => Flow::Response,
            FrameKind::LinkLocal => return false,
        };
        if !self.accepting {
            return false;
        }
        let ok = self
            .credits
            .consume(CreditTarget::Vc(h.vc), needs(flow, h.beats))
            .is_ok();
        if ok {
            self.accepting = false;
        }
        ok
    }

    fn stats(&self) -> LinkStats {
        self.health
    }
}

/// The transaction layer's credit gate at an accelerator port: it spends the credits the
/// far end granted and frees the credits of what the port consumed (the return policy
/// decides when they go back in band; `Sim::note_owed`).
impl CreditGate for PortState {
    fn try_consume(&mut self, flow: Flow, vc: Vc, data_beats: u8) -> Option<Pool> {
        self.credits
            .consume(CreditTarget::Vc(vc), needs(flow, data_beats))
            .ok()
            .map(|()| Pool::PerVc)
    }

    fn release(&mut self, flow: Flow, vc: Vc, _pool: Pool, data_beats: u8) {
        let (vc, beats) = (usize::from(vc.get()), u32::from(data_beats));
        if flow == Flow::Request {
            self.held.take(flow, vc, beats);
        }
        self.free_buffers(flow, vc, beats);
    }
}

/// A TL transfer owned by the simulator while it waits (switch buffers, completer pipeline).
#[derive(Debug, Clone, Copy)]
pub struct Frame {
    /// The control field.
    pub field: TlField,
    /// Data bytes.
    pub len: u16,
    /// The data.
    pub data: [u8; 256],
    /// Byte enables, when the field has them.
    pub be: Option<[u8; 32]>,
    /// Poisoned beats.
    pub poisoned: u8,
    /// The link end it arrived on.
    pub ingress: u32,
    /// Part of the traced operation (per-hop breakdown).
    pub trace: bool,
}

impl Frame {
    /// An owned copy of transfer `t`, arrived on end `ingress`.
    pub fn of(t: &TlTransfer<'_>, ingress: u32) -> Frame {
        let mut f = Frame {
            field: t.field,
            len: 0,
            data: [0; 256],
            be: None,
            poisoned: 0,
            ingress,
            trace: false,
        };
        f.copy_from(t, ingress);
        f
    }

    /// Make this frame a copy of transfer `t`, arrived on end `ingress` (only its data bytes
    /// are copied).
    pub fn copy_from(&mut self, t: &TlTransfer<'_>, ingress: u32) {
        let n = t.data.len().min(256);
        self.field = t.field;
        self.len = n as u16;
        self.data[..n].copy_from_slice(&t.data[..n]);
        self.be = t.byte_enables.copied();
        self.poisoned = t.poisoned;
        self.ingress = ingress;
        self.trace = false;
    }

    /// The transfer, borrowing the data.
    pub fn transfer(&self) -> TlTransfer<'_> {
        TlTransfer {
            field: self.field,
            data: &self.data[..usize::from(self.len).min(256)],
            byte_enables: self.be.as_ref(),
            poisoned: self.poisoned,
        }
    }

    /// Data beats (for credits).
    pub fn beats(&self) -> u32 {
        u32::from(self.len).div_ceil(64)
    }

    /// Size on the wire in bytes (control field and data half-flits).
    pub fn wire_bytes(&self) -> u16 {
        let be = if self.be.is_some() { 32 } else { 0 };
        (self.field.buffer_len() as u16)
            .saturating_add(self.beats() as u16 * 64)
            .saturating_add(be)
    }
}

/// Frames with stable handles; storage is reused (no allocation in steady state).
#[derive(Default)]
pub struct FrameSlab {
    frames: Vec<Frame>,
    free: Vec<u32>,
}

impl FrameSlab {
    /// Store a copy of transfer `t` that arrived on `ingress` (only its data bytes are
    /// copied); returns its handle.
    pub fn alloc_transfer(&mut self, t: &TlTransfer<'_>, ingress: u32) -> u32 {
        match self.free.pop() {
            Some(h) => {
                if let Some(f) = self.frames.get_mut(h as usize) {
                    f.copy_from(t, ingress);
                }
                h
            }
            None => {
                self.frames.push(Frame::of(t, ingress));
                (self.frames.len() - 1) as u32
            }
        }
    }

    /// Release a handle.
    pub fn free(&mut self, h: u32) {
        self.free.push(h);
    }

    /// The frame of a handle.
    pub fn get(&self, h: u32) -> Option<&Frame> {
        self.frames.get(h as usize)
    }

    /// The frames currently stored.
    pub fn live_frames(&self) -> impl Iterator<Item = &Frame> {
        self.live_handles().map(|(_, f)| f)
    }

    /// The frames currently stored, with their handles.
    pub fn live_handles(&self) -> impl Iterator<Item = (u32, &Frame)> {
        let mut free = vec![false; self.frames.len()];
        for &h in &self.free {
            if let Some(f) = free.get_mut(h as usize) {
                *f = true;
            }
        }
        (0u32..)
            .zip(&self.frames)
            .zip(free)
            .filter(|(_, free)| !free)
            .map(|(hf, _)| hf)
    }

    /// Frames currently stored.
    pub fn live(&self) -> usize {
        self.frames.len() - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podlink_protocol::wire::AccelId;

    /// A sender holding `n` credits of every class on every VC, learnt from an initial
    /// release as its peer sends it.
    fn granted(n: u16) -> CreditSender {
        let mut c = CreditSender::new();
        let (fc, rest) = FieldCredits([n; 4]).to_field();
        assert!(rest.is_zero(), "one field holds {n}");
        for vc in 0..4 {
            c.handle_return(CreditTarget::Vc(Vc::from_bits_truncate(vc)), &fc);
        }
        c.handle_initial_release_complete();
        c
    }

    /// The switch takes exactly the frame's credits (a command credit of its flow, a data
    /// credit per beat the header names), only while the transmitter pulls; accelerators
    /// spend through the same protocol `CreditSender`.
    #[test]
    fn frames_spend_exactly_their_credits() {
        let mut p = PortState {
            up: true,
            credits: granted(4),
            ..Default::default()
        };
        let (a, b) = (AccelId::new(1).unwrap(), AccelId::new(2).unwrap());
        let vc0 = CreditTarget::Vc(Vc::default());
        let mut h = Header::request(a, b, Vc::default(), 0);
        h.beats = 3;
        assert!(!p.try_consume_credit(&h), "not accepting");
        p.accepting = true;
        assert!(p.try_consume_credit(&h));
        assert!(!p.accepting, "one frame per pull");
        assert_eq!(p.credits.available(vc0, CreditClass::ReqCmd), 3);
        assert_eq!(p.credits.available(vc0, CreditClass::ReqData), 1);
        assert_eq!(p.credits.available(vc0, CreditClass::RspData), 4);
        p.accepting = true;
        assert!(!p.try_consume_credit(&h), "data credits exhausted");
        assert!(p.accepting, "nothing taken");
        h.beats = 1;
        assert!(p.try_consume_credit(&h), "one beat still fits");
        assert!(p.try_consume(Flow::Request, Vc::default(), 1).is_none());
        assert!(p.try_consume(Flow::Response, Vc::default(), 4).is_some());
        assert_eq!(p.credits.available(vc0, CreditClass::RspCmd), 3);
        p.release(Flow::Response, Vc::default(), Pool::PerVc, 2);
        assert_eq!(p.freed.0[0], [0, 0, 1, 2]);
        // A return above the grant is the peer's error: capped and counted (per class:
        // both data classes overflow here, the command classes do not).
        let (fc, _) = FieldCredits([1, 1, 9, 9]).to_field();
        p.credits.handle_return(vc0, &fc);
        assert_eq!(p.credits.stats().return_above_grant, 2);
        assert_eq!(p.credits.available(vc0, CreditClass::RspCmd), 4);
        assert_eq!(p.credits.available(vc0, CreditClass::ReqData), 4);
    }

    /// Owed credits go out in fields no larger than the encoding holds (6-bit command,
    /// 8-bit data counts), split over several returns, none lost or counted twice; the
    /// selected VC goes first and withheld VCs not at all.
    #[test]
    fn returns_split_to_the_field_width() {
        let mut p = PortState::default();
        p.owed.give(Flow::Request, 2, 100, 300);
        p.owed.give(Flow::Response, 2, 5, 20);
        p.owed.give(Flow::Response, 1, 1, 4);
        let mut back = Credits::default();
        let mut fields = 0;
        let mut current = 4;
        while let Some((vc, fc)) = p.next_return(current) {
            assert!(fc.req_cmd <= 63 && fc.rsp_cmd <= 63);
            if fields == 0 {
                assert_eq!(vc, 1, "lowest VC first when the stream selects the pool");
            } else if current == 2 {
                assert_eq!(vc, 2, "the selected VC goes on");
            }
            back.add_field(usize::from(vc), &fc);
            p.returned(vc, &fc);
            current = vc;
            fields += 1;
        }
        assert!(p.owed.is_zero());
        assert_eq!(back.0[2], [100, 300, 5, 20]);
        assert_eq!(back.0[1], [0, 0, 1, 4]);
        // VC 1 in one field, VC 2's 100 request commands in two (63 + 37).
        assert_eq!(fields, 3);
        p.owed.give(Flow::Request, 3, 1, 1);
        p.withheld = 1 << 3;
        assert_eq!(p.next_return(3), None);
        assert!(!p.owes());
    }
}
