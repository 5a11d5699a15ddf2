//! The streaming TL unpacker (`spec-notes/wire.md#packing`): 64 B TL flits back into
//! [`Item`]s, checking every packing rule.
//!
//! It keeps, across flits, the control half-flit being read and the transfer whose data
//! half-flits are arriving; every call does bounded work (one flit's two half-flits and at
//! most eight control fields).

use core::fmt;

use super::tl_field::{FlowControl, TlField};
use super::tl_flit::{
    is_nop, merge_credits, rule, ControlFields, DataShape, Half, HalfKind, TlMessage,
    BYTE_ENABLE_LEN, FLIT_LEN, HALF_LEN, MAX_DATA_LEN, SECTOR_LEN,
};
use super::tl_pack::{Item, Transfer};
use super::{Error, Result, Tag};

/// [`TlUnpacker::handle_flit`] was called before the previous flit's items were all polled.
/// The new flit was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotDrained;

impl fmt::Display for NotDrained {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "previous TL flit not drained")
    }
}

impl core::error::Error for NotDrained {}

/// Most control fields in one control half-flit (one per 4 B sector).
const MAX_FIELDS: usize = HALF_LEN / SECTOR_LEN;

/// A parsed field of the active control half-flit: the field and, unless it is a
/// flow-control field, the data that follows it.
type Parsed = (TlField, Option<DataShape>);

/// The transfer whose data half-flits are arriving (its buffers are reused from one transfer
/// to the next; `active` says whether it holds one).
#[derive(Debug, Clone)]
struct Pending {
    active: bool,
    field: TlField,
    shape: DataShape,
    got: usize,
    poisoned: u8,
    byte_enables: [u8; BYTE_ENABLE_LEN],
    data: [u8; MAX_DATA_LEN],
}

impl Pending {
    fn store(&mut self, half: &[u8; HALF_LEN]) -> HalfKind {
        let be = usize::from(self.shape.byte_enables);
        let kind = if self.got < be {
            self.byte_enables = *half;
            HalfKind::ByteEnable
        } else {
            let start = (self.got - be) * HALF_LEN;
            if let Some(dst) = self.data.get_mut(start..start + HALF_LEN) {
                dst.copy_from_slice(half);
            }
            HalfKind::Data
        };
        self.got += 1;
        kind
    }

    fn item(&self) -> Item<'_> {
        Item::Transfer(Transfer {
            field: self.field,
            data: self.data.get(..self.shape.bytes).unwrap_or(&[]),
            byte_enables: self.shape.byte_enables.then_some(&self.byte_enables),
            poisoned: self.poisoned,
        })
    }
}

/// What one unpacking step produced.
enum Step {
    Drained,
    Field(TlField),
    Credits(FlowControl),
    Message(TlMessage),
    Transfer,
}

/// Turns 64 B TL flits back into TL items, checking every packing rule.
///
/// Usage: [`handle_flit`](Self::handle_flit), then [`poll_item`](Self::poll_item) until it
/// returns `Ok(None)`; or [`unpack_flit`](Self::unpack_flit) with a callback. Transfers are
/// copied into an internal 256 B buffer and lent out until the next `poll_item`.
///
/// A rule broken by the stream is fatal: `poll_item` returns the same error from then on
/// (flits handed in are dropped) until [`reset`](Self::reset).
#[derive(Debug, Clone)]
pub struct TlUnpacker {
    flit: [u8; FLIT_LEN],
    next_half: usize,
    kinds: [HalfKind; 2],
    drained: bool,
    /// The fields of the active control half-flit, parsed (and checked) once when it was
    /// loaded; `ctrl_next..ctrl_len` are still to be taken.
    ctrl: [Option<Parsed>; MAX_FIELDS],
    ctrl_next: usize,
    ctrl_len: usize,
    /// OR of the control half-flit's flow-control fields, until delivered.
    ctrl_fc: Option<FlowControl>,
    pending: Pending,
    delivered: bool,
    poison: Option<(Tag, u8)>,
    failed: Option<Error>,
}

impl Default for TlUnpacker {
    fn default() -> Self {
        Self::new()
    }
}

impl TlUnpacker {
    /// An unpacker at the start of a TL stream.
    pub const fn new() -> Self {
        TlUnpacker {
            flit: [0; FLIT_LEN],
            next_half: 2,
            kinds: [HalfKind::Nop; 2],
            drained: true,
            ctrl: [None; MAX_FIELDS],
            ctrl_next: 0,
            ctrl_len: 0,
            ctrl_fc: None,
            pending: Pending {
                active: false,
                field: TlField::FlowControl(FlowControl {
                    req_cmd: 0,
                    rsp_cmd: 0,
                    req_data: 0,
                    rsp_data: 0,
                }),
                shape: DataShape::NONE,
                got: 0,
                poisoned: 0,
                byte_enables: [0; BYTE_ENABLE_LEN],
                data: [0; MAX_DATA_LEN],
            },
            delivered: false,
            poison: None,
            failed: None,
        }
    }

    /// Forget all state (link reset).
    pub fn reset(&mut self) {
        *self = Self::new();
    }

    /// The error that stopped the unpacker, if any.
    pub fn failed(&self) -> Option<Error> {
        self.failed
    }

    /// What each half of the current flit carried (final once it is drained).
    pub fn kinds(&self) -> [HalfKind; 2] {
        self.kinds
    }

    /// A transfer's data is partly received (the stream is mid-transfer).
    pub fn in_transfer(&self) -> bool {
        self.pending_field().is_some()
    }

    /// The control field whose data is still arriving, with the half-flits received and
    /// expected (for traces: a flit decoded on its own may end mid-transfer).
    pub fn pending_field(&self) -> Option<(TlField, usize, usize)> {
        let p = &self.pending;
        (p.active && !self.delivered).then_some((p.field, p.got, p.shape.halves()))
    }

    /// Take the next TL flit.
    ///
    /// # Errors
    /// [`NotDrained`] when items of the previous flit have not all been polled.
    pub fn handle_flit(&mut self, flit: &[u8; FLIT_LEN]) -> core::result::Result<(), NotDrained> {
        if self.failed.is_some() {
            return Ok(());
        }
        if !self.drained {
            return Err(NotDrained);
        }
        self.flit = *flit;
        self.next_half = 0;
        self.kinds = [HalfKind::Nop; 2];
        self.drained = false;
        Ok(())
    }

    /// The next item of the flits handed in, or `Ok(None)` when the current flit is drained.
    ///
    /// # Errors
    /// The rule the stream breaks (see [`rule`], [`DataShape::of`], [`TlField::parse`],
    /// [`TlMessage::parse`]); fatal.
    pub fn poll_item(&mut self) -> Result<Option<Item<'_>>> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        if self.delivered {
            self.delivered = false;
            self.pending.active = false;
        }
        let step = match self.step() {
            Ok(s) => s,
            Err(e) => {
                self.failed = Some(e);
                return Err(e);
            }
        };
        Ok(match step {
            Step::Drained => {
                self.drained = true;
                None
            }
            Step::Field(field) => Some(Item::Transfer(Transfer::new(field, &[]))),
            Step::Credits(fc) => Some(Item::Credits(fc)),
            Step::Message(m) => Some(Item::Message(m)),
            Step::Transfer => {
                self.delivered = true;
                Some(self.pending.item())
            }
        })
    }

    /// Hand in a flit and pass every item it completes to `sink` (items still waiting from an
    /// earlier flit are passed first).
    ///
    /// # Errors
    /// As [`poll_item`](Self::poll_item); items before the error have been passed on.
    pub fn unpack_flit(
        &mut self,
        flit: &[u8; FLIT_LEN],
        mut sink: impl FnMut(Item<'_>),
    ) -> Result<()> {
        self.drain_into(&mut sink)?;
        let _ = self.handle_flit(flit);
        self.drain_into(&mut sink)
    }

    /// Pass every item still to come from the current flit to `sink`: what a loop over
    /// [`poll_item`](Self::poll_item) does, without building a `Result<Option<Item>>` for
    /// each item (the simulator's hottest receive path). It repeats `poll_item`'s steps on
    /// purpose: sharing them through a helper returning `Result<Option<Step>>` cost 1.5 %
    /// more instructions on `ualink-1024` than this saves. The test
    /// `unpack_flit_agrees_with_poll_item` (tests/tl_pack.rs) keeps the two in step.
    fn drain_into(&mut self, sink: &mut impl FnMut(Item<'_>)) -> Result<()> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        loop {
            if self.delivered {
                self.delivered = false;
                self.pending.active = false;
            }
            match self.step() {
                Err(e) => {
                    self.failed = Some(e);
                    return Err(e);
                }
                Ok(Step::Drained) => {
                    self.drained = true;
                    return Ok(());
                }
                Ok(Step::Field(field)) => sink(Item::Transfer(Transfer::new(field, &[]))),
                Ok(Step::Credits(fc)) => sink(Item::Credits(fc)),
                Ok(Step::Message(m)) => sink(Item::Message(m)),
                Ok(Step::Transfer) => {
                    self.delivered = true;
                    sink(self.pending.item());
                }
            }
        }
    }

    /// Advance until an item is ready or the flit is used up. Bounded: each turn of the loop
    /// consumes a control field (at most 8 per half-flit) or a half-flit (2 per flit).
    fn step(&mut self) -> Result<Step> {
        loop {
            if !self.pending.active && self.ctrl_next < self.ctrl_len {
                if let Some(step) = self.next_field()? {
                    return Ok(step);
                }
                continue;
            }
            // The half-flit is read in place (no copy).
            let Some(half) = Half::BOTH.get(self.next_half).copied() else {
                return Ok(Step::Drained);
            };
            self.next_half += 1;
            let Some(bytes) = self
                .flit
                .get(half.range())
                .and_then(|b| <&[u8; HALF_LEN]>::try_from(b).ok())
            else {
                return Ok(Step::Drained);
            };
            let kind_slot = self.kinds.get_mut(half.index());
            if self.pending.active {
                let p = &mut self.pending;
                let kind = p.store(bytes);
                let done = p.got >= p.shape.halves();
                if let Some(k) = kind_slot {
                    *k = kind;
                }
                if done {
                    return Ok(Step::Transfer);
                }
                continue;
            }
            if TlMessage::is_message(bytes) {
                if let Some(k) = kind_slot {
                    *k = HalfKind::Message;
                }
                match TlMessage::parse(bytes)? {
                    TlMessage::PoisonedData { tag, beats } => {
                        if self.poison.is_some() {
                            return Err(Error::Packing(rule::POISON_PENDING));
                        }
                        self.poison = Some((tag, beats));
                    }
                    m => return Ok(Step::Message(m)),
                }
                continue;
            }
            if is_nop(bytes) {
                continue;
            }
            if half == Half::Upper {
                return Err(Error::Packing(rule::CONTROL_IN_UPPER_HALF));
            }
            let bytes = *bytes;
            self.load_control(&bytes)?;
            self.set_kind(half, HalfKind::Control);
        }
    }

    fn set_kind(&mut self, half: Half, kind: HalfKind) {
        if let Some(k) = self.kinds.get_mut(half.index()) {
            *k = kind;
        }
    }

    /// Check a whole control half-flit before using it (so no item of a bad one escapes).
    /// Out of line on purpose: inlined, it made [`step`](Self::step) compute its field
    /// addresses before the loop on every call (42 instructions of prologue, now 15).
    #[inline(never)]
    fn load_control(&mut self, bytes: &[u8; HALF_LEN]) -> Result<()> {
        // Parsed in place: nothing of the half-flit is taken until `ctrl_len` covers it, and
        // an error stops the unpacker for good.
        self.ctrl_next = 0;
        self.ctrl_len = 0;
        let mut fc = None;
        let mut n = 0;
        for field in ControlFields::new(bytes) {
            let field = field?;
            let shape = match field {
                TlField::FlowControl(c) => {
                    fc = Some(merge_credits(fc.unwrap_or_default(), c));
                    None
                }
                other => Some(DataShape::of(&other)?),
            };
            // At most one field per sector: `n` stays below MAX_FIELDS.
            if let Some(slot) = self.ctrl.get_mut(n) {
                *slot = Some((field, shape));
                n += 1;
            }
        }
        self.ctrl_len = n;
        self.ctrl_fc = fc;
        Ok(())
    }

    /// Take the next field of the active control half-flit: an item, or `None` if the field
    /// starts a transfer (or the half-flit is exhausted).
    fn next_field(&mut self) -> Result<Option<Step>> {
        let Some(Some((field, shape))) = self.ctrl.get(self.ctrl_next).copied() else {
            self.ctrl_next = self.ctrl_len;
            return Ok(None);
        };
        self.ctrl_next += 1;
        let Some(shape) = shape else {
            // Fields that arrive together are OR-merged: deliver the merge once, at the first.
            return Ok(self.ctrl_fc.take().map(Step::Credits));
        };
        if shape.halves() == 0 {
            return Ok(Some(Step::Field(field)));
        }
        let poisoned = match self.poison.take() {
            None => 0,
            Some((tag, beats))
                if Some(tag) == field.tag() && u32::from(beats) >> shape.beats == 0 =>
            {
                beats
            }
            Some(_) => return Err(Error::Packing(rule::POISON_TARGET)),
        };
        // The byte enables and data are all overwritten by the half-flits that follow before
        // the transfer is delivered (`shape` counts them), so the buffers are not cleared.
        let p = &mut self.pending;
        p.active = true;
        p.field = field;
        p.shape = shape;
        p.got = 0;
        p.poisoned = poisoned;
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::tl_field::{Opcode, UncompressedRequest, UncompressedResponse};
    use crate::wire::tl_pack::tests::{control_flit, msg, owned, unpack_all, write, wrsp, Owned};

    #[test]
    fn unpack_rule_errors() {
        let unpack_err = |fl: &[[u8; 64]]| unpack_all(fl).unwrap_err();
        // A control half-flit in the upper half.
        let mut f = [0u8; 64];
        wrsp(1).emit(&mut f[32..]).unwrap();
        assert_eq!(
            unpack_err(&[f]),
            Error::Packing(rule::CONTROL_IN_UPPER_HALF)
        );
        // Data where a control half-flit is due: an unknown FTYPE.
        assert_eq!(unpack_err(&[[0x77; 64]]), Error::UnknownFtype(7));
        // A control field crossing the half-flit end.
        let mut f = [0u8; 64];
        f[24] = 0x10;
        assert_eq!(unpack_err(&[f]), Error::Packing(rule::FIELD_CROSSES_HALF));
        // Length and boundary rules.
        let short = write(Opcode::Write, 32, 1);
        assert_eq!(
            unpack_err(&[control_flit(&[short])]),
            Error::LengthMismatch(rule::DATA_LENGTH)
        );
        let TlField::UncompressedRequest(r) = write(Opcode::WriteFull, 128, 1) else {
            unreachable!()
        };
        let crossing = TlField::UncompressedRequest(UncompressedRequest {
            addr: 0x40c0 >> 2,
            ..r
        });
        assert_eq!(
            unpack_err(&[control_flit(&[crossing])]),
            Error::Packing(rule::CROSSES_256B)
        );
        // Poison: two pending, or one that does not match the next transfer.
        let p = msg(TlMessage::PoisonedData {
            tag: Tag::new(1).unwrap(),
            beats: 1,
        });
        let mut f = [0u8; 64];
        f[..32].copy_from_slice(&p);
        f[32..].copy_from_slice(&p);
        assert_eq!(unpack_err(&[f]), Error::Packing(rule::POISON_PENDING));
        let mut f = [0u8; 64];
        f[32..].copy_from_slice(&p);
        let other = write(Opcode::WriteFull, 64, 2);
        assert_eq!(
            unpack_err(&[f, control_flit(&[other])]),
            Error::Packing(rule::POISON_TARGET)
        );
        let beyond = msg(TlMessage::PoisonedData {
            tag: Tag::new(2).unwrap(),
            beats: 0b10,
        });
        f[32..].copy_from_slice(&beyond);
        assert_eq!(
            unpack_err(&[f, control_flit(&[other])]),
            Error::Packing(rule::POISON_TARGET)
        );
        // A bad message.
        let mut f = [0u8; 64];
        f[0] = 0xf0;
        f[1] = 7;
        assert_eq!(unpack_err(&[f]), Error::FieldRange(rule::MESSAGE_TYPE));
    }

    #[test]
    fn no_item_of_a_bad_control_half_escapes() {
        // A good response followed by a bad request: the response must not be delivered.
        let bad = write(Opcode::Write, 32, 1);
        let f = control_flit(&[wrsp(1), bad]);
        let mut u = TlUnpacker::new();
        u.handle_flit(&f).unwrap();
        assert_eq!(
            u.poll_item().unwrap_err(),
            Error::LengthMismatch(rule::DATA_LENGTH)
        );
        // Sticky until reset; new flits are dropped.
        assert!(u.handle_flit(&[0; 64]).is_ok());
        assert!(u.poll_item().is_err());
        assert!(u.failed().is_some());
        u.reset();
        assert_eq!(u.failed(), None);
        u.handle_flit(&[0; 64]).unwrap();
        assert!(u.poll_item().unwrap().is_none());
    }

    #[test]
    fn not_drained_and_state_across_flits() {
        let rsp = TlField::UncompressedResponse(UncompressedResponse {
            len: 1,
            ..Default::default()
        });
        let mut u = TlUnpacker::new();
        let f0 = control_flit(&[rsp, wrsp(5)]);
        u.handle_flit(&f0).unwrap();
        assert_eq!(u.handle_flit(&f0), Err(NotDrained));
        assert!(u.poll_item().unwrap().is_none());
        assert!(u.in_transfer());
        assert_eq!(u.pending_field(), Some((rsp, 1, 4)));
        assert_eq!(u.kinds(), [HalfKind::Control, HalfKind::Data]);
        u.handle_flit(&[1; 64]).unwrap();
        assert!(u.poll_item().unwrap().is_none());
        u.handle_flit(&[2; 64]).unwrap();
        let Some(Item::Transfer(t)) = u.poll_item().unwrap() else {
            panic!("transfer expected")
        };
        assert_eq!(t.data.len(), 128);
        assert_eq!(&t.data[..32], &[0; 32]);
        assert_eq!(&t.data[32..96], &[1; 64]);
        assert_eq!(&t.data[96..], &[2; 32]);
        assert_eq!(
            owned(u.poll_item().unwrap().unwrap()),
            Owned::T(wrsp(5), vec![], None, 0)
        );
        // The upper half after the transfer is not owed data: 0x02 bytes are a bad control.
        assert_eq!(
            u.poll_item(),
            Err(Error::Packing(rule::CONTROL_IN_UPPER_HALF))
        );
        assert!(!format!("{NotDrained}").is_empty());
    }
}
