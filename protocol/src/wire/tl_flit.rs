//! 64 B TL flits, their half-flit kinds, TL messages and the packing rules
//! (`spec-notes/wire.md`).
//!
//! A TL flit is two 32 B half-flits (lower = bytes 0..32, sent first; upper = bytes 32..64),
//! each made of eight 4 B sectors. A half-flit is one of:
//!
//! | kind | where | content |
//! |---|---|---|
//! | control | lower half only | control fields ([`TlField`]) back to back from sector 0; a zero flow-control field (four zero bytes) is padding |
//! | data | any half that is owed data | 32 B of a 64 B data beat |
//! | byte enable | any half that is owed data | the 32 B byte-enable mask of a partial write (bit *i* = data byte *i*) |
//! | message | any half that is not owed data | a [`TlMessage`]: first nibble `0xF` (an FTYPE no control field uses) |
//! | NOP | any half that is not owed data | 32 zero bytes (a control half-flit of padding only) |
//! | auth tag | reserved for link security | not produced or accepted by podlink |
//!
//! Data and byte-enable half-flits are opaque: a receiver knows them only by counting, from the
//! control fields, how many half-flits each request or response owns ([`DataShape::of`]).
//! The streaming packer and unpacker that apply these rules are in [`super::tl_pack`].

use core::ops::Range;

use super::addr_cache::compressed_cmd_opcode;
use super::bits::{BitReader, BitWriter};
use super::tl_field::{FlowControl, Opcode, TlField};
use super::{check_len, check_out, Error, Result, Tag};

/// Length of a TL flit in bytes.
pub const FLIT_LEN: usize = 64;
/// Length of a half-flit in bytes.
pub const HALF_LEN: usize = 32;
/// Length of a sector in bytes.
pub const SECTOR_LEN: usize = 4;
/// Sectors in a TL flit.
pub const SECTORS: usize = FLIT_LEN / SECTOR_LEN;
/// Length of a data beat in bytes (two data half-flits; one data credit).
pub const BEAT_LEN: usize = 64;
/// Most data bytes one request or response carries.
pub const MAX_DATA_LEN: usize = 256;
/// Most data beats one request or response carries.
pub const MAX_BEATS: usize = MAX_DATA_LEN / BEAT_LEN;
/// Length of the byte-enable mask of a partial write.
pub const BYTE_ENABLE_LEN: usize = 32;
/// Most half-flits that follow one control field (4 beats plus a byte-enable half-flit).
pub const MAX_TRANSFER_HALVES: usize = 2 * MAX_BEATS + 1;
/// First nibble of a message half-flit (an FTYPE no control field uses).
pub const MESSAGE_MARKER: u8 = 0xF;

/// The rule a TL stream breaks, as carried in [`Error`] (`Packing`, `LengthMismatch`,
/// `FieldRange`, `Reserved`): compare an error against these to tell rules apart.
pub mod rule {
    /// `Packing`: a half-flit that is not owed data, not a NOP and not a message sits in the
    /// upper half (control half-flits go in the lower half only).
    pub const CONTROL_IN_UPPER_HALF: &str = "control half-flit in the upper half";
    /// `Packing`: a control field runs past the end of its half-flit.
    pub const FIELD_CROSSES_HALF: &str = "control field crosses the half-flit end";
    /// `Packing`: a request (or its compressed address) crosses a 256 B boundary.
    pub const CROSSES_256B: &str = "request crosses a 256 B boundary";
    /// `Packing`: a WriteFull whose address or length is not a multiple of 64 B.
    pub const WRITE_FULL_ALIGN: &str = "WriteFull not 64 B aligned";
    /// `Packing`: a read response whose offset + beats runs past 256 B.
    pub const RESPONSE_BEYOND_256B: &str = "response data runs past 256 B";
    /// `LengthMismatch`: a write-class request whose length is not 64..=256 B.
    pub const DATA_LENGTH: &str = "data request length not 64..=256 B";
    /// `LengthMismatch`: `numbeats` + 1 is not the number of 64 B beats `len` needs.
    pub const NUMBEATS: &str = "numbeats disagrees with len";
    /// `LengthMismatch`: atomic operands longer than one 64 B beat.
    pub const ATOMIC_LENGTH: &str = "atomic operands exceed one 64 B beat";
    /// `FieldRange`: a reserved compressed-request `cmd` (3..=7).
    pub const COMPRESSED_CMD: &str = "compressed cmd";
    /// `FieldRange`: a TL message type podlink does not define.
    pub const MESSAGE_TYPE: &str = "tl message type";
    /// `FieldRange`: a credit-target message naming no VC (0..=3) nor the pool (4).
    pub const CREDIT_TARGET: &str = "credit target";
    /// `Reserved`: reserved bits of a TL message are set.
    pub const MESSAGE_RESERVED: &str = "tl message";
    /// `FieldRange`: a poisoned-data beat mask that is empty or names a beat the data lacks.
    pub const POISON_BEATS: &str = "poisoned beat mask";
    /// `Packing`: a second poisoned-data message before the data of the first.
    pub const POISON_PENDING: &str = "poisoned-data message already pending";
    /// `Packing`: a poisoned-data message whose tag is not that of the next data transfer.
    pub const POISON_TARGET: &str = "poisoned-data message does not match the next transfer";
    /// `Packing`: a poisoned-data message pushed on its own (it travels with its transfer).
    pub const POISON_STANDALONE: &str = "poisoned-data message pushed without its transfer";
    /// `Packing`: a transfer whose field is a flow-control field (push credits instead).
    pub const FLOW_CONTROL_TRANSFER: &str = "flow-control field given as a transfer";
    /// `LengthMismatch`: transfer data length differs from the length its field declares.
    pub const TRANSFER_DATA: &str = "transfer data length";
    /// `LengthMismatch`: byte enables given without a partial write, or missing from one.
    pub const BYTE_ENABLES: &str = "byte enables";
}

/// One half of a TL flit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Half {
    /// Bytes 0..32 (sectors 0..8), sent first: the only place for a control half-flit.
    Lower,
    /// Bytes 32..64 (sectors 8..16).
    Upper,
}

impl Half {
    /// Both halves, lower first.
    pub const BOTH: [Half; 2] = [Half::Lower, Half::Upper];

    /// 0 for the lower half, 1 for the upper.
    pub const fn index(self) -> usize {
        match self {
            Half::Lower => 0,
            Half::Upper => 1,
        }
    }

    /// Byte range of this half inside the flit.
    pub const fn range(self) -> Range<usize> {
        match self {
            Half::Lower => 0..HALF_LEN,
            Half::Upper => HALF_LEN..FLIT_LEN,
        }
    }
}

/// What a half-flit carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HalfKind {
    /// Nothing: 32 zero bytes.
    Nop,
    /// Control fields.
    Control,
    /// Half of a 64 B data beat.
    Data,
    /// The byte-enable mask of a partial write.
    ByteEnable,
    /// A TL message.
    Message,
    /// Link-security authentication tag: reserved, podlink neither sends nor accepts it.
    AuthTag,
}

impl HalfKind {
    /// Short lowercase name for traces and `podlink decode`.
    pub const fn name(self) -> &'static str {
        match self {
            HalfKind::Nop => "nop",
            HalfKind::Control => "control",
            HalfKind::Data => "data",
            HalfKind::ByteEnable => "byte_enable",
            HalfKind::Message => "message",
            HalfKind::AuthTag => "auth_tag",
        }
    }
}

/// A view of a 64 B TL flit.
///
/// Accessors never panic; after [`TlFlit::new_checked`] they always see the full 64 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlFlit<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TlFlit<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Self {
        TlFlit { buffer }
    }

    /// Wrap a buffer of at least [`FLIT_LEN`] bytes.
    ///
    /// # Errors
    /// `Truncated` when the buffer is shorter.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let flit = Self::new_unchecked(buffer);
        flit.check_len()?;
        Ok(flit)
    }

    /// Check that the buffer holds a whole flit.
    ///
    /// # Errors
    /// `Truncated` when it does not.
    pub fn check_len(&self) -> Result<()> {
        check_len(self.buffer.as_ref(), FLIT_LEN)
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The bytes of one half (empty if the buffer is too short).
    pub fn half(&self, half: Half) -> &[u8] {
        self.buffer.as_ref().get(half.range()).unwrap_or(&[])
    }

    /// Sector `i` (0..16), or `None` past the end.
    pub fn sector(&self, i: usize) -> Option<[u8; SECTOR_LEN]> {
        if i >= SECTORS {
            return None;
        }
        let start = i.checked_mul(SECTOR_LEN)?;
        let s = self
            .buffer
            .as_ref()
            .get(start..start.checked_add(SECTOR_LEN)?)?;
        s.try_into().ok()
    }

    /// The half is a NOP (all zero).
    pub fn is_nop(&self, half: Half) -> bool {
        is_nop(self.half(half))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TlFlit<T> {
    /// The bytes of one half, mutable (empty if the buffer is too short).
    pub fn half_mut(&mut self, half: Half) -> &mut [u8] {
        self.buffer
            .as_mut()
            .get_mut(half.range())
            .unwrap_or(&mut [])
    }

    /// Overwrite sector `i` (ignored past the end).
    pub fn set_sector(&mut self, i: usize, value: [u8; SECTOR_LEN]) {
        let start = i.saturating_mul(SECTOR_LEN);
        if let Some(s) = self
            .buffer
            .as_mut()
            .get_mut(start..start.saturating_add(SECTOR_LEN))
        {
            s.copy_from_slice(&value);
        }
    }
}

/// A half-flit (or any byte run) is all zeros: a NOP.
pub fn is_nop(half: &[u8]) -> bool {
    // Eight bytes at a time.
    let mut words = half.chunks_exact(8);
    let acc = (&mut words).fold(0u64, |acc, w| {
        acc | <[u8; 8]>::try_from(w).map_or(u64::MAX, u64::from_ne_bytes)
    });
    acc == 0 && words.remainder().iter().all(|&b| b == 0)
}

/// A TL message, carried in a message half-flit (`spec-notes/wire.md#tl-messages`).
///
/// podlink's encoding (the public facts give none), MSB-first in sector 0, the other seven
/// sectors reserved (zero): `marker:4 (0xF) rsvd:4 mtype:8 beats:4 rsvd:1 tag:11`; a
/// credit-target message puts its target where `beats` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TlMessage {
    /// mtype 0: no operation.
    Nop,
    /// mtype 1: the sender has released all its initial credits.
    InitialCreditReleaseComplete,
    /// mtype 2: the next data transfer (with this tag) has corrupted beats. Each beat whose
    /// bit is set in `beats` (bit *i* = beat *i*) travels as 64 zero bytes instead of its data.
    PoisonedData {
        /// Tag of the request or response whose data is poisoned.
        tag: Tag,
        /// Beat mask (4 bits, never 0).
        beats: u8,
    },
    /// mtype 3 (podlink's): the flow-control fields that follow return credits of `target`
    /// (VC 0..=3, or 4 for the shared pool) until the next credit-target message; a TL stream
    /// starts at the shared pool, so an end that grants only pool credits never sends one.
    /// The public flow-control field names no target (`spec-notes/link.md`, L12).
    CreditTarget {
        /// 0..=3: that VC's own credits; 4: the shared pool.
        target: u8,
    },
}

impl TlMessage {
    /// The half-flit starts with the message marker.
    pub fn is_message(half: &[u8]) -> bool {
        half.first().is_some_and(|b| b >> 4 == MESSAGE_MARKER)
    }

    /// Name for traces and `podlink decode`.
    pub const fn name(&self) -> &'static str {
        match self {
            TlMessage::Nop => "tl_msg_nop",
            TlMessage::InitialCreditReleaseComplete => "tl_msg_initial_credit_release_complete",
            TlMessage::PoisonedData { .. } => "tl_msg_poisoned_data",
            TlMessage::CreditTarget { .. } => "tl_msg_credit_target",
        }
    }

    /// Parse a message half-flit.
    ///
    /// # Errors
    /// `Truncated`; `FieldRange(rule::MESSAGE_TYPE)` for a missing marker or an unknown
    /// type; `Reserved(rule::MESSAGE_RESERVED)`; `FieldRange(rule::POISON_BEATS)` for an
    /// empty poison mask.
    pub fn parse(half: &[u8]) -> Result<TlMessage> {
        check_len(half, HALF_LEN)?;
        let mut r = BitReader::new::<4>(half)?;
        if r.bits(4) != u64::from(MESSAGE_MARKER) {
            return Err(Error::FieldRange(rule::MESSAGE_TYPE));
        }
        r.reserved(4, rule::MESSAGE_RESERVED)?;
        let mtype: u8 = r.take(8);
        let beats: u8 = r.take(4);
        r.reserved(1, rule::MESSAGE_RESERVED)?;
        let tag: Tag = r.take(11);
        if !half.get(SECTOR_LEN..HALF_LEN).is_some_and(is_nop) {
            return Err(Error::Reserved(rule::MESSAGE_RESERVED));
        }
        let plain = |m| {
            if beats == 0 && tag.get() == 0 {
                Ok(m)
            } else {
                Err(Error::Reserved(rule::MESSAGE_RESERVED))
            }
        };
        match mtype {
            0 => plain(TlMessage::Nop),
            1 => plain(TlMessage::InitialCreditReleaseComplete),
            2 if beats == 0 => Err(Error::FieldRange(rule::POISON_BEATS)),
            2 => Ok(TlMessage::PoisonedData { tag, beats }),
            3 if tag.get() != 0 => Err(Error::Reserved(rule::MESSAGE_RESERVED)),
            3 if beats > 4 => Err(Error::FieldRange(rule::CREDIT_TARGET)),
            3 => Ok(TlMessage::CreditTarget { target: beats }),
            _ => Err(Error::FieldRange(rule::MESSAGE_TYPE)),
        }
    }

    /// Emit the message into a 32 B half-flit; returns [`HALF_LEN`].
    ///
    /// # Errors
    /// `BufferTooSmall`; `FieldRange` for a poison mask that is empty or wider than 4 bits.
    pub fn emit(&self, half: &mut [u8]) -> Result<usize> {
        check_out(half, HALF_LEN)?;
        let (mtype, beats, tag) = match *self {
            TlMessage::Nop => (0u8, 0u8, Tag::default()),
            TlMessage::InitialCreditReleaseComplete => (1, 0, Tag::default()),
            TlMessage::PoisonedData { beats: 0, .. } => {
                return Err(Error::FieldRange(rule::POISON_BEATS))
            }
            TlMessage::PoisonedData { tag, beats } => (2, beats, tag),
            TlMessage::CreditTarget { target } if target > 4 => {
                return Err(Error::FieldRange(rule::CREDIT_TARGET))
            }
            TlMessage::CreditTarget { target } => (3, target, Tag::default()),
        };
        let mut w = BitWriter::new(32);
        w.bits(4, u64::from(MESSAGE_MARKER), "marker")?;
        w.reserved(4);
        w.put(8, mtype, "mtype")?;
        w.put(4, beats, rule::POISON_BEATS)?;
        w.reserved(1);
        w.put(11, tag, "tag")?;
        if let Some(rest) = half.get_mut(..HALF_LEN) {
            rest.fill(0);
        }
        w.finish::<4>(half)?;
        Ok(HALF_LEN)
    }
}

/// Iterator over the control fields of a control half-flit, skipping zero padding sectors.
///
/// Stops after the first error.
#[derive(Debug, Clone)]
pub struct ControlFields<'a> {
    half: &'a [u8],
    pos: usize,
}

impl<'a> ControlFields<'a> {
    /// Iterate the fields of `half` (normally 32 bytes).
    pub const fn new(half: &'a [u8]) -> Self {
        ControlFields { half, pos: 0 }
    }

    /// Byte offset just past the last field returned (or padding skipped).
    pub const fn offset(&self) -> usize {
        self.pos
    }

    fn fail(&mut self, e: Error) -> Option<Result<TlField>> {
        self.pos = self.half.len();
        Some(Err(e))
    }
}

impl Iterator for ControlFields<'_> {
    type Item = Result<TlField>;

    fn next(&mut self) -> Option<Result<TlField>> {
        loop {
            let rest = self.half.get(self.pos..)?;
            if rest.is_empty() {
                return None;
            }
            let Some(sector) = rest.get(..SECTOR_LEN) else {
                return self.fail(Error::Packing(rule::FIELD_CROSSES_HALF));
            };
            if is_nop(sector) {
                self.pos = self.pos.saturating_add(SECTOR_LEN);
                continue;
            }
            let len = match TlField::peek_ftype(rest) {
                Ok(ftype) => ftype.field_len(),
                Err(e) => return self.fail(e),
            };
            if rest.len() < len {
                return self.fail(Error::Packing(rule::FIELD_CROSSES_HALF));
            }
            return match TlField::parse(rest) {
                Ok(field) => {
                    self.pos = self.pos.saturating_add(len);
                    Some(Ok(field))
                }
                Err(e) => self.fail(e),
            };
        }
    }
}

/// OR-merge two flow-control fields (the rule for fields that arrive together).
pub const fn merge_credits(a: FlowControl, b: FlowControl) -> FlowControl {
    FlowControl {
        req_cmd: a.req_cmd | b.req_cmd,
        rsp_cmd: a.rsp_cmd | b.rsp_cmd,
        req_data: a.req_data | b.req_data,
        rsp_data: a.rsp_data | b.rsp_data,
    }
}

/// The data that follows a control field (`spec-notes/wire.md#data-half-flit-count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DataShape {
    /// Meaningful data bytes (the last beat is padded with zeros to 64 B).
    pub bytes: usize,
    /// 64 B data beats (two data half-flits each).
    pub beats: usize,
    /// A 32 B byte-enable half-flit comes first (uncompressed partial Write only).
    pub byte_enables: bool,
}

impl DataShape {
    /// No data.
    pub const NONE: DataShape = DataShape {
        bytes: 0,
        beats: 0,
        byte_enables: false,
    };

    /// Half-flits that follow the control field.
    pub const fn halves(&self) -> usize {
        self.beats
            .saturating_mul(2)
            .saturating_add(self.byte_enables as usize)
    }

    const fn beats(bytes: usize, beats: usize, byte_enables: bool) -> DataShape {
        DataShape {
            bytes,
            beats,
            byte_enables,
        }
    }

    /// The data a control field owns, and the length rules it must obey.
    ///
    /// | field | half-flits that follow |
    /// |---|---|
    /// | flow control | 0 |
    /// | uncompressed request, opcode bit 5 clear (reads) | 0 |
    /// | uncompressed request 0x30..=0x3F (atomics) | 2 (one operand beat, `len` ≤ 64 B, `numbeats` = 0) |
    /// | uncompressed Write 0x28 | 1 byte-enable + 2 × beats |
    /// | other uncompressed request with bit 5 set | 2 × beats |
    /// | compressed request Read / Write / WriteFull | 0 / 2 (`len`+1) / 2 (`len`+1) |
    /// | uncompressed response, `rd_wr` = 0 and status OK | 2 (`len`+1) |
    /// | uncompressed response otherwise | 0 |
    /// | compressed single-beat read response | 2 |
    /// | compressed write / multi-beat read response | 0 if `rd_wr`, else 2 (`len`+1) |
    ///
    /// Write-class requests carry `(len+1) × 4` bytes, 64..=256, in `ceil(bytes / 64)` beats
    /// and `numbeats` must be beats − 1.
    ///
    /// # Errors
    /// `Packing(rule::CROSSES_256B | WRITE_FULL_ALIGN | RESPONSE_BEYOND_256B)`,
    /// `LengthMismatch(rule::DATA_LENGTH | NUMBEATS | ATOMIC_LENGTH)`,
    /// `FieldRange(rule::COMPRESSED_CMD)`.
    pub fn of(field: &TlField) -> Result<DataShape> {
        match field {
            TlField::FlowControl(_) => Ok(DataShape::NONE),
            TlField::UncompressedRequest(r) => {
                let bytes = (usize::from(r.len) + 1) * 4;
                // `addr` holds byte-address bits 56..2: bits 5..0 of it are bits 7..2.
                let offset = ((r.addr & 0x3f) as usize) * 4;
                if offset + bytes > MAX_DATA_LEN {
                    return Err(Error::Packing(rule::CROSSES_256B));
                }
                let raw = r.cmd.raw();
                if raw & 0x20 == 0 {
                    return Ok(DataShape::NONE);
                }
                if raw >= 0x30 {
                    if bytes > BEAT_LEN {
                        return Err(Error::LengthMismatch(rule::ATOMIC_LENGTH));
                    }
                    if r.numbeats != 0 {
                        return Err(Error::LengthMismatch(rule::NUMBEATS));
                    }
                    return Ok(DataShape::beats(bytes, 1, false));
                }
                if !(BEAT_LEN..=MAX_DATA_LEN).contains(&bytes) {
                    return Err(Error::LengthMismatch(rule::DATA_LENGTH));
                }
                let beats = bytes.div_ceil(BEAT_LEN);
                if usize::from(r.numbeats) + 1 != beats {
                    return Err(Error::LengthMismatch(rule::NUMBEATS));
                }
                if r.cmd == Opcode::WriteFull && (bytes % BEAT_LEN != 0 || offset % BEAT_LEN != 0) {
                    return Err(Error::Packing(rule::WRITE_FULL_ALIGN));
                }
                Ok(DataShape::beats(bytes, beats, r.cmd == Opcode::Write))
            }
            TlField::CompressedRequest(c) => {
                let op =
                    compressed_cmd_opcode(c.cmd).ok_or(Error::FieldRange(rule::COMPRESSED_CMD))?;
                let beats = usize::from(c.len) + 1;
                if usize::from(c.addr & 3) + beats > MAX_BEATS {
                    return Err(Error::Packing(rule::CROSSES_256B));
                }
                if op.carries_data() {
                    Ok(DataShape::beats(beats * BEAT_LEN, beats, false))
                } else {
                    Ok(DataShape::NONE)
                }
            }
            TlField::UncompressedResponse(r) if !r.rd_wr && r.status == 0 => {
                response_beats(usize::from(r.offset), usize::from(r.len) + 1)
            }
            TlField::UncompressedResponse(_) => Ok(DataShape::NONE),
            TlField::CompressedReadResponse(_) => Ok(DataShape::beats(BEAT_LEN, 1, false)),
            TlField::CompressedWriteResponse(r) if !r.rd_wr => {
                response_beats(0, usize::from(r.len) + 1)
            }
            TlField::CompressedWriteResponse(_) => Ok(DataShape::NONE),
        }
    }
}

fn response_beats(offset: usize, beats: usize) -> Result<DataShape> {
    if offset + beats > MAX_BEATS {
        return Err(Error::Packing(rule::RESPONSE_BEYOND_256B));
    }
    Ok(DataShape::beats(beats * BEAT_LEN, beats, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::tl_field::{
        CompressedRequest, CompressedWriteResponse, UncompressedRequest, UncompressedResponse,
    };

    static FLIT_BYTES: [u8; 64] = {
        let mut b = [0u8; 64];
        // Lower: a flow-control field then a compressed write response; upper: a message.
        b[0] = 0x0b;
        b[1] = 0x15;
        b[2] = 0x16;
        b[3] = 0xa5;
        b[4] = 0x58;
        b[5] = 0x0e;
        b[6] = 0x5d;
        b[7] = 0xb6;
        b[32] = 0xf0;
        b[33] = 0x01;
        b
    };

    fn req(cmd: Opcode, len_bytes: usize, byte_addr: u64, numbeats: u8) -> TlField {
        TlField::UncompressedRequest(UncompressedRequest {
            cmd,
            len: (len_bytes / 4 - 1) as u8,
            addr: byte_addr >> 2,
            numbeats,
            ..Default::default()
        })
    }

    #[test]
    fn test_deconstruct() {
        let flit = TlFlit::new_checked(&FLIT_BYTES[..]).unwrap();
        assert_eq!(flit.sector(0), Some([0x0b, 0x15, 0x16, 0xa5]));
        assert_eq!(flit.sector(16), None);
        let mut fields = ControlFields::new(flit.half(Half::Lower));
        assert_eq!(
            fields.next().unwrap().unwrap(),
            TlField::FlowControl(FlowControl {
                req_cmd: 44,
                rsp_cmd: 21,
                req_data: 22,
                rsp_data: 165
            })
        );
        assert!(matches!(
            fields.next().unwrap().unwrap(),
            TlField::CompressedWriteResponse(CompressedWriteResponse { rd_wr: true, .. })
        ));
        assert!(fields.next().is_none());
        assert_eq!(fields.offset(), HALF_LEN);
        assert!(TlMessage::is_message(flit.half(Half::Upper)));
        assert_eq!(
            TlMessage::parse(flit.half(Half::Upper)),
            Ok(TlMessage::InitialCreditReleaseComplete)
        );
        assert!(!flit.is_nop(Half::Upper));
    }

    #[test]
    fn test_construct() {
        let mut flit = TlFlit::new_unchecked([0u8; 64]);
        flit.set_sector(0, [0x0b, 0x15, 0x16, 0xa5]);
        flit.set_sector(1, [0x58, 0x0e, 0x5d, 0xb6]);
        let n = TlMessage::InitialCreditReleaseComplete
            .emit(flit.half_mut(Half::Upper))
            .unwrap();
        assert_eq!(n, HALF_LEN);
        assert_eq!(flit.into_inner(), FLIT_BYTES);
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            TlFlit::new_checked(&FLIT_BYTES[..63]).unwrap_err(),
            Error::Truncated {
                needed: 64,
                got: 63
            }
        );
        let short = TlFlit::new_unchecked(&FLIT_BYTES[..10]);
        assert!(short.half(Half::Upper).is_empty());
        assert_eq!(short.sector(3), None);
        assert!(matches!(
            TlMessage::parse(&[0xf0; 31]),
            Err(Error::Truncated { .. })
        ));
        assert!(matches!(
            TlMessage::Nop.emit(&mut [0; 31]),
            Err(Error::BufferTooSmall { .. })
        ));
    }

    #[test]
    fn message_round_trip_and_errors() {
        for m in [
            TlMessage::Nop,
            TlMessage::InitialCreditReleaseComplete,
            TlMessage::PoisonedData {
                tag: Tag::new(2047).unwrap(),
                beats: 0b1010,
            },
            TlMessage::CreditTarget { target: 0 },
            TlMessage::CreditTarget { target: 4 },
        ] {
            let mut half = [0xaa; 32];
            m.emit(&mut half).unwrap();
            assert_eq!(TlMessage::parse(&half), Ok(m));
        }
        let mut half = [0u8; 32];
        TlMessage::PoisonedData {
            tag: Tag::new(5).unwrap(),
            beats: 0b11,
        }
        .emit(&mut half)
        .unwrap();
        assert_eq!(&half[..4], &[0xf0, 0x02, 0x30, 0x05]);
        let bad = |f: fn(&mut [u8; 32])| {
            let mut h = [0u8; 32];
            TlMessage::Nop.emit(&mut h).unwrap();
            f(&mut h);
            TlMessage::parse(&h)
        };
        assert_eq!(
            bad(|h| h[1] = 9),
            Err(Error::FieldRange(rule::MESSAGE_TYPE))
        );
        assert_eq!(
            bad(|h| h[0] = 0xe0),
            Err(Error::FieldRange(rule::MESSAGE_TYPE))
        );
        assert_eq!(
            bad(|h| h[0] = 0xf1),
            Err(Error::Reserved(rule::MESSAGE_RESERVED))
        );
        assert_eq!(
            bad(|h| h[31] = 1),
            Err(Error::Reserved(rule::MESSAGE_RESERVED))
        );
        assert_eq!(
            bad(|h| h[3] = 1),
            Err(Error::Reserved(rule::MESSAGE_RESERVED))
        );
        assert_eq!(
            bad(|h| h[1] = 2),
            Err(Error::FieldRange(rule::POISON_BEATS))
        );
        let zero = TlMessage::PoisonedData {
            tag: Tag::default(),
            beats: 0,
        };
        assert_eq!(
            zero.emit(&mut [0; 32]),
            Err(Error::FieldRange(rule::POISON_BEATS))
        );
        let wide = TlMessage::PoisonedData {
            tag: Tag::default(),
            beats: 16,
        };
        assert_eq!(
            wide.emit(&mut [0; 32]),
            Err(Error::FieldRange(rule::POISON_BEATS))
        );
    }

    #[test]
    fn credit_target_message() {
        let mut half = [0u8; 32];
        TlMessage::CreditTarget { target: 4 }
            .emit(&mut half)
            .unwrap();
        assert_eq!(&half[..4], &[0xf0, 0x03, 0x40, 0x00]);
        assert_eq!(
            TlMessage::CreditTarget { target: 5 }.emit(&mut [0; 32]),
            Err(Error::FieldRange(rule::CREDIT_TARGET))
        );
        half[2] = 0x50;
        assert_eq!(
            TlMessage::parse(&half),
            Err(Error::FieldRange(rule::CREDIT_TARGET))
        );
        half[2] = 0x10;
        half[3] = 0x01;
        assert_eq!(
            TlMessage::parse(&half),
            Err(Error::Reserved(rule::MESSAGE_RESERVED))
        );
        assert_eq!(
            TlMessage::CreditTarget { target: 2 }.name(),
            "tl_msg_credit_target"
        );
    }

    #[test]
    fn nop_is_all_zeros() {
        for len in [0usize, 1, 7, 8, 9, 31, 32, 33, 64] {
            let zeros = [0u8; 64];
            assert!(is_nop(&zeros[..len]));
            for i in 0..len {
                let mut b = [0u8; 64];
                b[i] = 0x80;
                assert!(!is_nop(&b[..len]), "len {len} byte {i}");
            }
        }
    }

    #[test]
    fn control_fields_errors() {
        // A 16 B request starting at sector 5 runs past the half.
        let mut half = [0u8; 32];
        half[20] = 0x10;
        let mut it = ControlFields::new(&half);
        assert_eq!(
            it.next(),
            Some(Err(Error::Packing(rule::FIELD_CROSSES_HALF)))
        );
        assert_eq!(it.next(), None);
        half[20] = 0x70;
        assert_eq!(
            ControlFields::new(&half).next(),
            Some(Err(Error::UnknownFtype(7)))
        );
        assert_eq!(
            ControlFields::new(&[0, 0, 0, 0, 0x10]).next(),
            Some(Err(Error::Packing(rule::FIELD_CROSSES_HALF)))
        );
        assert_eq!(ControlFields::new(&[0u8; 32]).next(), None);
    }

    #[test]
    fn shape_requests() {
        use rule::*;
        let s = DataShape::of(&req(Opcode::Write, 100, 0x1000, 1)).unwrap();
        assert_eq!(
            (s.bytes, s.beats, s.byte_enables, s.halves()),
            (100, 2, true, 5)
        );
        let s = DataShape::of(&req(Opcode::WriteFull, 256, 0x1000, 3)).unwrap();
        assert_eq!(s.halves(), 8);
        assert_eq!(
            DataShape::of(&req(Opcode::Read, 4, 0x10fc, 0))
                .unwrap()
                .halves(),
            0
        );
        let s = DataShape::of(&req(Opcode::AtomicR, 16, 0x20, 0)).unwrap();
        assert_eq!((s.bytes, s.halves()), (16, 2));
        let s = DataShape::of(&req(Opcode::VendorWrite(0x2d), 64, 0, 0)).unwrap();
        assert_eq!(s.halves(), 2);
        let err = |f| DataShape::of(&f).unwrap_err();
        assert_eq!(
            err(req(Opcode::Write, 32, 0, 0)),
            Error::LengthMismatch(DATA_LENGTH)
        );
        assert_eq!(
            err(req(Opcode::Write, 128, 0, 0)),
            Error::LengthMismatch(NUMBEATS)
        );
        assert_eq!(
            err(req(Opcode::AtomicNR, 8, 0, 1)),
            Error::LengthMismatch(NUMBEATS)
        );
        assert_eq!(
            err(req(Opcode::AtomicR, 68, 0, 0)),
            Error::LengthMismatch(ATOMIC_LENGTH)
        );
        assert_eq!(
            err(req(Opcode::Read, 8, 0xfc, 0)),
            Error::Packing(CROSSES_256B)
        );
        assert_eq!(
            err(req(Opcode::Write, 64, 0x1c4, 0)),
            Error::Packing(CROSSES_256B)
        );
        assert_eq!(
            err(req(Opcode::WriteFull, 64, 0x104, 0)),
            Error::Packing(WRITE_FULL_ALIGN)
        );
        assert_eq!(
            err(req(Opcode::WriteFull, 68, 0x100, 1)),
            Error::Packing(WRITE_FULL_ALIGN)
        );
        let c = |cmd, len, addr| {
            TlField::CompressedRequest(CompressedRequest {
                cmd,
                len,
                addr,
                ..Default::default()
            })
        };
        assert_eq!(DataShape::of(&c(0, 3, 0)).unwrap().halves(), 0);
        assert_eq!(DataShape::of(&c(1, 1, 2)).unwrap().halves(), 4);
        assert_eq!(DataShape::of(&c(2, 0, 3)).unwrap().bytes, 64);
        assert_eq!(err(c(3, 0, 0)), Error::FieldRange(COMPRESSED_CMD));
        assert_eq!(err(c(0, 1, 3)), Error::Packing(CROSSES_256B));
    }

    #[test]
    fn shape_responses() {
        let r = |rd_wr, status, len, offset| {
            TlField::UncompressedResponse(UncompressedResponse {
                rd_wr,
                status,
                len,
                offset,
                ..Default::default()
            })
        };
        assert_eq!(DataShape::of(&r(false, 0, 3, 0)).unwrap().halves(), 8);
        assert_eq!(DataShape::of(&r(false, 0, 1, 2)).unwrap().bytes, 128);
        assert_eq!(DataShape::of(&r(false, 5, 3, 0)).unwrap().halves(), 0);
        assert_eq!(DataShape::of(&r(true, 0, 3, 3)).unwrap().halves(), 0);
        assert_eq!(
            DataShape::of(&r(false, 0, 1, 3)),
            Err(Error::Packing(rule::RESPONSE_BEYOND_256B))
        );
        let w = |rd_wr, len| {
            TlField::CompressedWriteResponse(CompressedWriteResponse {
                rd_wr,
                len,
                ..Default::default()
            })
        };
        assert_eq!(DataShape::of(&w(false, 2)).unwrap().halves(), 6);
        assert_eq!(DataShape::of(&w(true, 2)).unwrap().halves(), 0);
        assert_eq!(
            DataShape::of(&w(false, 4)),
            Err(Error::Packing(rule::RESPONSE_BEYOND_256B))
        );
        let one = TlField::CompressedReadResponse(Default::default());
        assert_eq!(DataShape::of(&one).unwrap().halves(), 2);
        let fc = TlField::FlowControl(FlowControl::default());
        assert_eq!(DataShape::of(&fc), Ok(DataShape::NONE));
    }

    #[test]
    fn merge_is_or() {
        let a = FlowControl {
            req_cmd: 1,
            rsp_cmd: 2,
            req_data: 4,
            rsp_data: 8,
        };
        let b = FlowControl {
            req_cmd: 1,
            rsp_cmd: 1,
            req_data: 1,
            rsp_data: 1,
        };
        assert_eq!(
            merge_credits(a, b),
            FlowControl {
                req_cmd: 1,
                rsp_cmd: 3,
                req_data: 5,
                rsp_data: 9
            }
        );
    }
}
