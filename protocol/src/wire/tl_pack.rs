//! TL items and the streaming TL packer (`spec-notes/wire.md#packing`).
//!
//! The transaction engine pushes [`Item`]s (requests and responses with their data, credit
//! returns, TL messages) into a [`TlPacker`] and the link layer polls 64 B TL flits out of it.
//! At the far end the link layer hands each TL flit to a
//! [`TlUnpacker`](super::tl_unpack::TlUnpacker) and the engine polls the same items back, in
//! the same order. Neither allocates; every call does bounded work
//! (at most one item's data copied, or one flit's half-flits and control fields walked).
//!
//! Packing as the packer does it:
//!
//! * Control fields accumulate in a control half-flit until it is full or the link polls a
//!   flit; it then goes into the next lower half. Its fields' data half-flits (byte enables
//!   first, then the beats, in field order) follow immediately, lower and upper halves alike.
//! * A half that is owed no data and has nothing else to carry is a NOP (zeros), or carries the
//!   next TL message if one is queued. A control half-flit waits for the next lower half.
//! * At most one (non-zero) flow-control field goes into a control half-flit, because a
//!   receiver OR-merges flow-control fields that arrive together.
//! * A message, or a transfer with poisoned beats, closes the control half-flit being built so
//!   that item order is kept; a poisoned transfer is preceded by its poisoned-data message and
//!   is the first data-carrying field of the next control half-flit.

use core::fmt;

use heapless::Deque;

use super::tl_field::{FlowControl, Ftype, TlField};
use super::tl_flit::{
    rule, DataShape, Half, HalfKind, TlMessage, BEAT_LEN, BYTE_ENABLE_LEN, FLIT_LEN, HALF_LEN,
    MAX_TRANSFER_HALVES,
};
use super::{Error, Result};

/// A request or response control field with the data that follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer<'a> {
    /// The control field (any FTYPE but flow control).
    pub field: TlField,
    /// Exactly [`DataShape::of`]`(field).bytes` bytes (empty for fields without data).
    pub data: &'a [u8],
    /// The byte-enable mask: present exactly for an uncompressed partial Write (0x28).
    pub byte_enables: Option<&'a [u8; BYTE_ENABLE_LEN]>,
    /// Poisoned beats (bit *i* = beat *i*); they travel as zeros.
    pub poisoned: u8,
}

impl<'a> Transfer<'a> {
    /// A transfer without byte enables or poison.
    pub const fn new(field: TlField, data: &'a [u8]) -> Self {
        Transfer {
            field,
            data,
            byte_enables: None,
            poisoned: 0,
        }
    }

    /// Check the transfer against the packing rules; returns its data shape.
    ///
    /// # Errors
    /// Those of [`DataShape::of`], and `Packing(rule::FLOW_CONTROL_TRANSFER)`,
    /// `LengthMismatch(rule::TRANSFER_DATA | BYTE_ENABLES)`, `FieldRange(rule::POISON_BEATS)`.
    pub fn check(&self) -> Result<DataShape> {
        if matches!(self.field, TlField::FlowControl(_)) {
            return Err(Error::Packing(rule::FLOW_CONTROL_TRANSFER));
        }
        let shape = DataShape::of(&self.field)?;
        if self.data.len() != shape.bytes {
            return Err(Error::LengthMismatch(rule::TRANSFER_DATA));
        }
        if self.byte_enables.is_some() != shape.byte_enables {
            return Err(Error::LengthMismatch(rule::BYTE_ENABLES));
        }
        if u32::from(self.poisoned) >> shape.beats != 0 {
            return Err(Error::FieldRange(rule::POISON_BEATS));
        }
        Ok(shape)
    }
}

/// One unit of the TL stream, as pushed into the packer and polled out of the unpacker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'a> {
    /// A request or response with its data.
    Transfer(Transfer<'a>),
    /// A credit return (a non-zero flow-control field; a zero one is padding).
    Credits(FlowControl),
    /// A TL message (NOP or initial credit release complete; poisoned data travels inside
    /// [`Transfer::poisoned`]).
    Message(TlMessage),
}

impl fmt::Display for Item<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Item::Transfer(t) => {
                write!(f, "{} {:?}", t.field.ftype().name(), t.field)?;
                if !t.data.is_empty() {
                    write!(f, " data={}B", t.data.len())?;
                }
                if t.byte_enables.is_some() {
                    write!(f, " byte_enables")?;
                }
                if t.poisoned != 0 {
                    write!(f, " poisoned={:#06b}", t.poisoned)?;
                }
                Ok(())
            }
            Item::Credits(c) => write!(f, "{} {c:?}", Ftype::FlowControl.name()),
            Item::Message(m) => write!(f, "{} {m:?}", m.name()),
        }
    }
}

/// Why [`TlPacker::push`] did not take an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushError {
    /// No room now: poll flits out and push the same item again. Nothing was changed.
    Full,
    /// The item breaks a packing or field rule and can never be sent. Nothing was changed.
    Invalid(Error),
}

impl fmt::Display for PushError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushError::Full => write!(f, "TL packer full"),
            PushError::Invalid(e) => write!(f, "invalid TL item: {e}"),
        }
    }
}

impl core::error::Error for PushError {}

/// A sealed unit waiting for its slot.
#[derive(Debug, Clone, Copy)]
enum Job {
    Control {
        bytes: [u8; HALF_LEN],
        halves: usize,
    },
    Message(TlMessage),
}

/// A data or byte-enable half-flit waiting to be sent.
#[derive(Debug, Clone, Copy)]
struct DataHalf {
    kind: HalfKind,
    bytes: [u8; HALF_LEN],
}

/// Sealed control half-flits and messages the packer can hold.
const JOBS: usize = 8;

/// Turns TL items into 64 B TL flits.
///
/// `HALVES` is the number of data half-flits it can buffer (at least
/// [`MAX_TRANSFER_HALVES`], checked at compile time). Usage: [`push`](Self::push) items until
/// it answers [`PushError::Full`] or you have none left, then [`poll_flit`](Self::poll_flit)
/// whenever the link can take a TL flit. Pushing several items before polling packs their
/// control fields densely; polling early sends what has been pushed (lower latency).
#[derive(Debug, Clone)]
pub struct TlPacker<const HALVES: usize = 64> {
    ctrl: [u8; HALF_LEN],
    ctrl_len: usize,
    ctrl_halves: usize,
    ctrl_fc: bool,
    jobs: Deque<Job, JOBS>,
    data: Deque<DataHalf, HALVES>,
    /// Data half-flits still owed by the last control half-flit sent.
    streaming: usize,
}

impl<const HALVES: usize> Default for TlPacker<HALVES> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const HALVES: usize> TlPacker<HALVES> {
    const CAPACITY_OK: () = assert!(
        HALVES >= MAX_TRANSFER_HALVES,
        "TlPacker needs room for at least one 256 B partial write (9 half-flits)"
    );

    /// An empty packer.
    pub const fn new() -> Self {
        let () = Self::CAPACITY_OK;
        TlPacker {
            ctrl: [0; HALF_LEN],
            ctrl_len: 0,
            ctrl_halves: 0,
            ctrl_fc: false,
            jobs: Deque::new(),
            data: Deque::new(),
            streaming: 0,
        }
    }

    /// Nothing is waiting to be sent.
    pub fn is_idle(&self) -> bool {
        self.streaming == 0 && self.jobs.is_empty() && self.ctrl_len == 0
    }

    /// Data half-flits buffered (owed by control half-flits sent or not yet sent).
    pub fn buffered_halves(&self) -> usize {
        self.data.len()
    }

    /// Drop everything (link reset).
    pub fn reset(&mut self) {
        *self = Self::new();
    }

    /// Queue one item; its data is copied.
    ///
    /// A zero credit return is padding and is accepted without effect. A
    /// [`TlMessage::PoisonedData`] cannot be pushed on its own: set [`Transfer::poisoned`].
    ///
    /// # Errors
    /// [`PushError::Full`] when the buffers lack room now, [`PushError::Invalid`] when the
    /// item breaks a rule ([`Transfer::check`], a field value that does not fit its width).
    pub fn push(&mut self, item: &Item<'_>) -> core::result::Result<(), PushError> {
        match item {
            Item::Credits(fc) => self.push_credits(*fc),
            Item::Message(m) => self.push_message(*m),
            Item::Transfer(t) => self.push_transfer(t),
        }
    }

    fn push_credits(&mut self, fc: FlowControl) -> core::result::Result<(), PushError> {
        if fc == FlowControl::default() {
            return Ok(());
        }
        let mut buf = [0u8; 4];
        TlField::FlowControl(fc)
            .emit(&mut buf)
            .map_err(PushError::Invalid)?;
        let seal = self.ctrl_fc || self.ctrl_len + buf.len() > HALF_LEN;
        self.reserve(usize::from(seal), 0)?;
        if seal {
            self.seal();
        }
        self.append(&buf, 0);
        self.ctrl_fc = true;
        Ok(())
    }

    fn push_message(&mut self, m: TlMessage) -> core::result::Result<(), PushError> {
        if matches!(m, TlMessage::PoisonedData { .. }) {
            return Err(PushError::Invalid(Error::Packing(rule::POISON_STANDALONE)));
        }
        let seal = self.ctrl_len != 0;
        self.reserve(usize::from(seal) + 1, 0)?;
        self.seal();
        self.push_job(Job::Message(m));
        Ok(())
    }

    fn push_transfer(&mut self, t: &Transfer<'_>) -> core::result::Result<(), PushError> {
        let shape = t.check().map_err(PushError::Invalid)?;
        let mut buf = [0u8; 16];
        let n = t.field.emit(&mut buf).map_err(PushError::Invalid)?;
        let field = buf.get(..n).unwrap_or(&[]);
        let halves = shape.halves();
        let poison = t.poisoned != 0;
        let seal = if poison {
            self.ctrl_len != 0
        } else {
            self.ctrl_len + n > HALF_LEN
        };
        self.reserve(usize::from(seal) + usize::from(poison), halves)?;
        if seal {
            self.seal();
        }
        if poison {
            let tag = t.field.tag().unwrap_or_default();
            let beats = t.poisoned;
            self.push_job(Job::Message(TlMessage::PoisonedData { tag, beats }));
        }
        self.append(field, halves);
        if let Some(be) = t.byte_enables {
            self.push_data(HalfKind::ByteEnable, be);
        }
        for beat in 0..shape.beats {
            let poisoned = (u32::from(t.poisoned) >> beat) & 1 != 0;
            for h in 0..2 {
                let mut bytes = [0u8; HALF_LEN];
                let start = beat * BEAT_LEN + h * HALF_LEN;
                let src = t.data.get(start..t.data.len().min(start + HALF_LEN));
                if let (false, Some(src)) = (poisoned, src) {
                    bytes.iter_mut().zip(src).for_each(|(d, s)| *d = *s);
                }
                self.push_data(HalfKind::Data, &bytes);
            }
        }
        Ok(())
    }

    /// Room for `jobs` more sealed units and `halves` more data half-flits?
    fn reserve(&self, jobs: usize, halves: usize) -> core::result::Result<(), PushError> {
        let free_jobs = self.jobs.capacity() - self.jobs.len();
        let free_halves = HALVES - self.data.len();
        if free_jobs < jobs || free_halves < halves {
            Err(PushError::Full)
        } else {
            Ok(())
        }
    }

    // `reserve` has checked the room, so these pushes cannot fail.
    fn push_job(&mut self, job: Job) {
        let _ = self.jobs.push_back(job);
    }

    fn push_data(&mut self, kind: HalfKind, bytes: &[u8; HALF_LEN]) {
        let _ = self.data.push_back(DataHalf {
            kind,
            bytes: *bytes,
        });
    }

    fn append(&mut self, field: &[u8], halves: usize) {
        if let Some(dst) = self
            .ctrl
            .get_mut(self.ctrl_len..self.ctrl_len + field.len())
        {
            dst.copy_from_slice(field);
            self.ctrl_len += field.len();
            self.ctrl_halves += halves;
        }
    }

    /// Close the control half-flit being built (if any) and queue it.
    fn seal(&mut self) {
        if self.ctrl_len != 0 {
            let bytes = self.ctrl;
            let halves = self.ctrl_halves;
            self.push_job(Job::Control { bytes, halves });
            self.ctrl = [0; HALF_LEN];
            self.ctrl_len = 0;
            self.ctrl_halves = 0;
            self.ctrl_fc = false;
        }
    }

    /// Write the next TL flit into `out`; returns what each half carries, or `None` (and
    /// leaves `out` alone) when there is nothing to send.
    #[must_use]
    pub fn poll_flit(&mut self, out: &mut [u8; FLIT_LEN]) -> Option<[HalfKind; 2]> {
        if self.is_idle() {
            return None;
        }
        let mut kinds = [HalfKind::Nop; 2];
        for ((slot, half), kind) in out
            .chunks_exact_mut(HALF_LEN)
            .zip(Half::BOTH)
            .zip(kinds.iter_mut())
        {
            *kind = self.fill(half, slot);
        }
        Some(kinds)
    }

    fn fill(&mut self, half: Half, slot: &mut [u8]) -> HalfKind {
        if self.streaming > 0 {
            self.streaming -= 1;
            if let Some(d) = self.data.pop_front() {
                slot.copy_from_slice(&d.bytes);
                return d.kind;
            }
        }
        if half == Half::Lower && self.jobs.is_empty() {
            self.seal();
        }
        match self.jobs.front() {
            Some(&Job::Control { bytes, halves }) if half == Half::Lower => {
                self.jobs.pop_front();
                slot.copy_from_slice(&bytes);
                self.streaming = halves;
                HalfKind::Control
            }
            Some(&Job::Message(m)) => {
                self.jobs.pop_front();
                if m.emit(slot).is_ok() {
                    return HalfKind::Message;
                }
                slot.fill(0);
                HalfKind::Nop
            }
            _ => {
                slot.fill(0);
                HalfKind::Nop
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::wire::tl_field::{CompressedWriteResponse, Opcode, UncompressedRequest};
    use crate::wire::tl_unpack::TlUnpacker;
    use crate::wire::{AccelId, Tag};

    pub(crate) fn write(cmd: Opcode, bytes: usize, tag: u16) -> TlField {
        TlField::UncompressedRequest(UncompressedRequest {
            cmd,
            tag: Tag::new(tag).unwrap(),
            len: (bytes / 4 - 1) as u8,
            numbeats: (bytes.div_ceil(64) - 1) as u8,
            addr: 0x4000 >> 2,
            dstaccid: AccelId::new(7).unwrap(),
            ..Default::default()
        })
    }

    pub(crate) fn wrsp(tag: u16) -> TlField {
        TlField::CompressedWriteResponse(CompressedWriteResponse {
            tag: Tag::new(tag).unwrap(),
            rd_wr: true,
            ..Default::default()
        })
    }

    pub(crate) const CREDITS: FlowControl = FlowControl {
        req_cmd: 1,
        rsp_cmd: 2,
        req_data: 3,
        rsp_data: 4,
    };

    fn flits(p: &mut TlPacker) -> ([[u8; 64]; 8], usize) {
        let mut out = [[0u8; 64]; 8];
        let mut n = 0;
        while p.poll_flit(&mut out[n]).is_some() {
            n += 1;
        }
        (out, n)
    }

    #[derive(Debug, PartialEq)]
    pub(crate) enum Owned {
        T(TlField, Vec<u8>, Option<[u8; 32]>, u8),
        C(FlowControl),
        M(TlMessage),
    }

    pub(crate) fn owned(item: Item<'_>) -> Owned {
        match item {
            Item::Transfer(t) => Owned::T(
                t.field,
                t.data.to_vec(),
                t.byte_enables.copied(),
                t.poisoned,
            ),
            Item::Credits(c) => Owned::C(c),
            Item::Message(m) => Owned::M(m),
        }
    }

    pub(crate) fn unpack_all(fl: &[[u8; 64]]) -> Result<Vec<Owned>> {
        let mut u = TlUnpacker::new();
        let mut got = Vec::new();
        for f in fl {
            u.unpack_flit(f, |i| got.push(owned(i)))?;
        }
        Ok(got)
    }

    pub(crate) fn control_flit(fields: &[TlField]) -> [u8; 64] {
        let mut f = [0u8; 64];
        let mut at = 0;
        for field in fields {
            at += field.emit(&mut f[at..]).unwrap();
        }
        f
    }

    pub(crate) fn msg(m: TlMessage) -> [u8; 32] {
        let mut h = [0u8; 32];
        m.emit(&mut h).unwrap();
        h
    }

    #[test]
    fn test_construct() {
        let mut p = TlPacker::<64>::new();
        let data: Vec<u8> = (0..100).collect();
        let be = [0xffu8; 32];
        p.push(&Item::Credits(CREDITS)).unwrap();
        p.push(&Item::Transfer(Transfer {
            byte_enables: Some(&be),
            ..Transfer::new(write(Opcode::Write, 100, 9), &data)
        }))
        .unwrap();
        p.push(&Item::Transfer(Transfer::new(wrsp(3), &[])))
            .unwrap();
        p.push(&Item::Message(TlMessage::InitialCreditReleaseComplete))
            .unwrap();
        let (out, n) = flits(&mut p);
        assert_eq!(n, 4);
        // Flit 0: control (credits, 16 B request, 4 B response) | byte enables.
        assert_eq!(&out[0][..4], &[0x00, 0x42, 0x03, 0x04]);
        assert_eq!(out[0][4] >> 4, 1);
        assert_eq!(out[0][20] >> 4, 5);
        assert_eq!(&out[0][24..32], &[0; 8]);
        assert_eq!(&out[0][32..], &be);
        // Flits 1, 2: the two data beats (100 B then zero padding); the message after them.
        assert_eq!(&out[1][..], &data[..64]);
        assert_eq!(&out[2][..36], &data[64..]);
        assert_eq!(&out[2][36..], &[0; 28]);
        assert_eq!(&out[3][..2], &[0xf0, 0x01]);
        assert_eq!(&out[3][32..], &[0; 32]);
        assert!(p.is_idle());
    }

    #[test]
    fn test_deconstruct() {
        let mut p = TlPacker::<64>::new();
        let data: Vec<u8> = (0..=255).collect();
        p.push(&Item::Transfer(Transfer::new(
            write(Opcode::WriteFull, 256, 1),
            &data,
        )))
        .unwrap();
        p.push(&Item::Transfer(Transfer::new(wrsp(2), &[])))
            .unwrap();
        let (out, n) = flits(&mut p);
        assert_eq!(n, 5);
        let mut u = TlUnpacker::new();
        let mut got = Vec::new();
        for f in &out[..n] {
            u.handle_flit(f).unwrap();
            while let Some(item) = u.poll_item().unwrap() {
                got.push(owned(item));
            }
        }
        assert_eq!(u.kinds(), [HalfKind::Data, HalfKind::Nop]);
        assert_eq!(
            got,
            vec![
                Owned::T(write(Opcode::WriteFull, 256, 1), data, None, 0),
                Owned::T(wrsp(2), vec![], None, 0)
            ]
        );
    }

    #[test]
    fn credits_one_per_control_half_and_or_merge() {
        let mut p = TlPacker::<64>::new();
        p.push(&Item::Credits(CREDITS)).unwrap();
        p.push(&Item::Credits(CREDITS)).unwrap();
        p.push(&Item::Credits(FlowControl::default())).unwrap();
        let (out, n) = flits(&mut p);
        assert_eq!(n, 2);
        assert_eq!(
            unpack_all(&out[..n]).unwrap(),
            vec![Owned::C(CREDITS), Owned::C(CREDITS)]
        );
        // Two flow-control fields in one control half-flit (another sender) are OR-merged.
        let mut f = [0u8; 64];
        f[..4].copy_from_slice(&[0x00, 0x42, 0x03, 0x04]);
        f[4..8].copy_from_slice(&[0x00, 0x40, 0x00, 0x01]);
        let merged = FlowControl {
            req_cmd: 1,
            rsp_cmd: 2,
            req_data: 3,
            rsp_data: 5,
        };
        assert_eq!(unpack_all(&[f]).unwrap(), vec![Owned::C(merged)]);
    }

    #[test]
    fn poisoned_beats_travel_as_zeros() {
        let mut p = TlPacker::<64>::new();
        let data = [0x55u8; 128];
        p.push(&Item::Transfer(Transfer::new(wrsp(1), &[])))
            .unwrap();
        p.push(&Item::Transfer(Transfer {
            poisoned: 0b10,
            ..Transfer::new(write(Opcode::WriteFull, 128, 4), &data)
        }))
        .unwrap();
        let (out, n) = flits(&mut p);
        // control | poison message, control | beat 0, beat 0 | beat 1, beat 1 | nop
        assert_eq!(n, 4);
        assert_eq!(&out[0][32..34], &[0xf0, 0x02]);
        let mut expect = data.to_vec();
        expect[64..].fill(0);
        assert_eq!(
            unpack_all(&out[..n]).unwrap(),
            vec![
                Owned::T(wrsp(1), vec![], None, 0),
                Owned::T(write(Opcode::WriteFull, 128, 4), expect, None, 0b10)
            ]
        );
    }

    #[test]
    fn push_errors() {
        let mut p = TlPacker::<9>::new();
        let inval = |e| Err(PushError::Invalid(e));
        let w = write(Opcode::WriteFull, 64, 1);
        let fc = TlField::FlowControl(CREDITS);
        assert_eq!(
            p.push(&Item::Transfer(Transfer::new(fc, &[]))),
            inval(Error::Packing(rule::FLOW_CONTROL_TRANSFER))
        );
        assert_eq!(
            p.push(&Item::Transfer(Transfer::new(w, &[0; 63]))),
            inval(Error::LengthMismatch(rule::TRANSFER_DATA))
        );
        let be = [0u8; 32];
        assert_eq!(
            p.push(&Item::Transfer(Transfer {
                byte_enables: Some(&be),
                ..Transfer::new(w, &[0; 64])
            })),
            inval(Error::LengthMismatch(rule::BYTE_ENABLES))
        );
        assert_eq!(
            p.push(&Item::Transfer(Transfer {
                poisoned: 0b10,
                ..Transfer::new(w, &[0; 64])
            })),
            inval(Error::FieldRange(rule::POISON_BEATS))
        );
        let poison = TlMessage::PoisonedData {
            tag: Tag::default(),
            beats: 1,
        };
        assert_eq!(
            p.push(&Item::Message(poison)),
            inval(Error::Packing(rule::POISON_STANDALONE))
        );
        let wide = FlowControl {
            req_cmd: 64,
            ..CREDITS
        };
        assert_eq!(
            p.push(&Item::Credits(wide)),
            inval(Error::FieldRange("req_cmd"))
        );
        assert!(p.is_idle());
        // Full: 4 + 4 data halves fit in 9; the third 64 B write does not, until polled.
        for tag in 0..4 {
            p.push(&Item::Transfer(Transfer::new(
                write(Opcode::WriteFull, 64, tag),
                &[0; 64],
            )))
            .unwrap();
        }
        let third = Item::Transfer(Transfer::new(write(Opcode::WriteFull, 128, 9), &[0; 128]));
        assert_eq!(p.push(&third), Err(PushError::Full));
        assert_eq!(p.buffered_halves(), 8);
        let mut f = [0u8; 64];
        assert!(p.poll_flit(&mut f).is_some());
        assert!(p.poll_flit(&mut f).is_some());
        assert!(p.poll_flit(&mut f).is_some());
        assert_eq!(p.push(&third), Ok(()));
        // Full on jobs: eight messages queue, the ninth waits.
        let mut p = TlPacker::<9>::new();
        for _ in 0..8 {
            p.push(&Item::Message(TlMessage::Nop)).unwrap();
        }
        assert_eq!(p.push(&Item::Message(TlMessage::Nop)), Err(PushError::Full));
        p.reset();
        assert!(p.is_idle());
        assert!(!format!("{}", PushError::Full).is_empty());
    }

    #[test]
    fn display_names() {
        let t = Item::Transfer(Transfer::new(wrsp(1), &[]));
        assert!(format!("{t}").starts_with("tl_compressed_response_write_or_multibeat_read"));
        assert!(format!("{}", Item::Credits(CREDITS)).starts_with("tl_flow_control_nop"));
        assert!(format!("{}", Item::Message(TlMessage::Nop)).starts_with("tl_msg_nop"));
    }
}
