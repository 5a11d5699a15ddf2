//! Link ends as the forwarding logic sees them, TL credits, and owned TL transfers (frames)
//! (`spec-notes/simulator.md#credits`).

use podlink_protocol::txn::{CreditGate, Flow, Pool};
use podlink_protocol::wire::{TlField, TlTransfer, Vc};
use podlink_switch::header::{FrameKind, Header};
use podlink_switch::port::{LinkStats, PortLink};

/// Credit classes: command and data (64 B beats) for each flow.
pub const CLASSES: usize = 4;
/// Virtual channels.
pub const VCS: usize = 4;
/// Most data beats one transfer carries (256 B).
pub const MAX_BEATS: u32 = 4;

/// TL credits per VC and class: `[vc][class]`, class 0/1 request command/data, 2/3 response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Credits(pub [[u32; CLASSES]; VCS]);

impl Credits {
    /// Every class of every VC at `n`.
    pub const fn all(n: u32) -> Credits {
        Credits([[n; CLASSES]; VCS])
    }

    fn classes(flow: Flow) -> (usize, usize) {
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

    /// Add every counter of `o`.
    pub fn add(&mut self, o: &Credits) {
        for (a, b) in self.0.iter_mut().zip(o.0.iter()) {
            for (x, y) in a.iter_mut().zip(b.iter()) {
                *x = x.saturating_add(*y);
            }
        }
    }

    /// All zero.
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|v| v.iter().all(|&x| x == 0))
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

/// The sending state of one link end, as the switch's forwarding logic sees it
/// ([`PortLink`]): link up, the TL credits the far end granted, and whether the end's
/// transmitter is pulling frames right now.
#[derive(Debug, Clone, Default)]
pub struct PortState {
    /// Link up.
    pub up: bool,
    /// The transmitter is packing a DL flit and takes a frame now.
    pub accepting: bool,
    /// Credits the far end granted.
    pub credits: Credits,
    /// Credits to return to the far end (frames it sent that this end has released).
    pub owed: Credits,
    /// A credit return is travelling to the far end.
    pub return_in_flight: bool,
    /// VCs (bit per VC) whose credits this end keeps instead of returning (a fault).
    pub withheld: u8,
    /// Health counters for the switch (CRC errors and replays seen on this end).
    pub health: LinkStats,
}

impl PortState {
    /// Take the owed credits that may be returned now (all but the withheld VCs').
    pub fn take_owed(&mut self) -> Credits {
        if self.withheld == 0 {
            return std::mem::take(&mut self.owed);
        }
        let mut c = Credits::default();
        for (vc, (out, owed)) in c.0.iter_mut().zip(self.owed.0.iter_mut()).enumerate() {
            if self.withheld & (1 << vc) == 0 {
                *out = std::mem::take(owed);
            }
        }
        c
    }

    /// Whether owed credits could be returned now.
    pub fn owes(&self) -> bool {
        self.owed
            .0
            .iter()
            .enumerate()
            .any(|(vc, v)| self.withheld & (1 << vc) == 0 && v.iter().any(|&x| x != 0))
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
        self.credits
            .0
            .get(usize::from(vc.get()))
            .map_or(0, |v| v[0].saturating_add(v[2]))
    }

    /// Reserves a command credit and the largest transfer's data credits (the header does
    /// not say how many beats the frame has); the simulator refunds the difference as soon
    /// as the switch names the frame.
    fn try_consume_credit(&mut self, h: &Header) -> bool {
        let flow = match h.kind {
            FrameKind::Request => Flow::Request,
            FrameKind::Response => Flow::Response,
            FrameKind::LinkLocal => return false,
        };
        let vc = usize::from(h.vc.get());
        if !self.accepting || !self.credits.has(flow, vc, MAX_BEATS) {
            return false;
        }
        self.credits.take(flow, vc, MAX_BEATS);
        self.accepting = false;
        true
    }

    fn stats(&self) -> LinkStats {
        self.health
    }
}

/// The transaction layer's credit gate at an accelerator port: it spends the credits the
/// far end granted and owes the far end the credits of what the port consumed (the model
/// returns them; `Sim::flush_credits`).
impl CreditGate for PortState {
    fn try_consume(&mut self, flow: Flow, vc: Vc, data_beats: u8) -> Option<Pool> {
        let vc = usize::from(vc.get());
        let beats = u32::from(data_beats);
        if self.credits.has(flow, vc, beats) {
            self.credits.take(flow, vc, beats);
            Some(Pool::PerVc)
        } else {
            None
        }
    }

    fn release(&mut self, flow: Flow, vc: Vc, _pool: Pool, data_beats: u8) {
        self.owed
            .give(flow, usize::from(vc.get()), 1, u32::from(data_beats));
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
        let h = match self.free.pop() {
            Some(h) => h,
            None => {
                self.frames.push(Frame {
                    field: t.field,
                    len: 0,
                    data: [0; 256],
                    be: None,
                    poisoned: 0,
                    ingress,
                    trace: false,
                });
                (self.frames.len() - 1) as u32
            }
        };
        if let Some(f) = self.frames.get_mut(h as usize) {
            let n = t.data.len().min(256);
            f.field = t.field;
            f.len = n as u16;
            f.data[..n].copy_from_slice(&t.data[..n]);
            f.be = t.byte_enables.copied();
            f.poisoned = t.poisoned;
            f.ingress = ingress;
            f.trace = false;
        }
        h
    }

    /// Release a handle.
    pub fn free(&mut self, h: u32) {
        self.free.push(h);
    }

    /// The frame of a handle.
    pub fn get(&self, h: u32) -> Option<&Frame> {
        self.frames.get(h as usize)
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

    #[test]
    fn credits_reserve_max_and_refund() {
        let mut p = PortState {
            up: true,
            credits: Credits::all(4),
            ..Default::default()
        };
        let h = Header::request(
            AccelId::new(1).unwrap(),
            AccelId::new(2).unwrap(),
            Vc::default(),
            0,
        );
        assert!(!p.try_consume_credit(&h), "not accepting");
        p.accepting = true;
        assert!(p.try_consume_credit(&h));
        assert_eq!(p.credits.0[0], [3, 0, 4, 4]);
        p.accepting = true;
        assert!(!p.try_consume_credit(&h), "data credits exhausted");
        p.credits.give(Flow::Request, 0, 0, 3);
        assert_eq!(p.credits.0[0][1], 3);
        assert!(p.try_consume(Flow::Request, Vc::default(), 3).is_some());
        assert!(p.try_consume(Flow::Request, Vc::default(), 1).is_none());
        p.release(Flow::Response, Vc::default(), Pool::PerVc, 2);
        assert_eq!(p.owed.0[0], [0, 0, 1, 2]);
    }
}
