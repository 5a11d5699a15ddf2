//! DL flit headers and segment headers (`spec-notes/wire.md#dl-flit`).
//!
//! The 3-byte flit header has two forms, told apart by `op`:
//!
//! | form | layout MSB→LSB |
//! |---|---|
//! | explicit | op:3 payload:1 rsvd:3 flit_seq_no:9 rsvd:8 |
//! | command  | op:3 payload:1 ack_req_seq:9 flit_seq_lo:3 rsvd:8 |
//!
//! Command ops are Ack (0b010) and Replay Request (0b011); every other op is explicit
//! (0b000 a normal payload flit, 0b001 the first flit of a replay).

use super::bits::{BitReader, BitWriter};
use super::{Error, Result};

/// Length of the DL flit header in bytes.
pub const HEADER_LEN: usize = 3;

/// The 3-bit DL flit header op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DlOp {
    /// 0b000: an explicit payload flit.
    Payload,
    /// 0b001: the first flit of a replay.
    ReplayStart,
    /// 0b010: command: acknowledge every flit up to and including `ack_req_seq`.
    Ack,
    /// 0b011: command: replay from `ack_req_seq`.
    ReplayRequest,
    /// Any other value (0b100–0b111): reserved, kept visible.
    Other(u8),
}

impl DlOp {
    /// The op of a raw 3-bit value.
    pub const fn from_raw(v: u8) -> DlOp {
        match v & 7 {
            0 => DlOp::Payload,
            1 => DlOp::ReplayStart,
            2 => DlOp::Ack,
            3 => DlOp::ReplayRequest,
            other => DlOp::Other(other),
        }
    }
    /// The raw 3-bit value.
    pub const fn raw(self) -> u8 {
        match self {
            DlOp::Payload => 0,
            DlOp::ReplayStart => 1,
            DlOp::Ack => 2,
            DlOp::ReplayRequest => 3,
            DlOp::Other(v) => v,
        }
    }
    /// A command op (its header carries `ack_req_seq`, not `flit_seq_no`).
    pub const fn is_command(self) -> bool {
        matches!(self, DlOp::Ack | DlOp::ReplayRequest)
    }
}

/// Explicit flit header: op:3 payload:1 rsvd:3 flit_seq_no:9 rsvd:8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ExplicitHeader {
    /// Op (3 bits).
    pub op: u8,
    /// The flit carries TL payload.
    pub payload: bool,
    /// Flit sequence number (9 bits; 0 is reserved for flits that consume none).
    pub flit_seq_no: u16,
}

/// Command flit header: op:3 payload:1 ack_req_seq:9 flit_seq_lo:3 rsvd:8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CommandHeader {
    /// Op (3 bits).
    pub op: u8,
    /// The flit carries TL payload.
    pub payload: bool,
    /// Sequence number acknowledged or requested (9 bits).
    pub ack_req_seq: u16,
    /// Low 3 bits of the sender's flit sequence number.
    pub flit_seq_lo: u8,
}

impl ExplicitHeader {
    /// Parse from the first 3 bytes.
    ///
    /// # Errors
    /// `Truncated`, or `Reserved` when a reserved bit is set.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let mut r = BitReader::new::<3>(buf)?;
        let op = r.take(3);
        let payload = r.take(1);
        r.reserved(3, "explicit header rsvd")?;
        let flit_seq_no = r.take(9);
        r.reserved(8, "explicit header rsvd")?;
        Ok(ExplicitHeader {
            op,
            payload,
            flit_seq_no,
        })
    }

    /// Emit into the first 3 bytes.
    ///
    /// # Errors
    /// `BufferTooSmall` or `FieldRange`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let mut w = BitWriter::new(24);
        w.put(3, self.op, "op")?;
        w.put(1, self.payload, "payload")?;
        w.reserved(3);
        w.put(9, self.flit_seq_no, "flit_seq_no")?;
        w.reserved(8);
        w.finish::<3>(buf)
    }
}

impl CommandHeader {
    /// Parse from the first 3 bytes.
    ///
    /// # Errors
    /// `Truncated`, or `Reserved` when a reserved bit is set.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let mut r = BitReader::new::<3>(buf)?;
        let h = CommandHeader {
            op: r.take(3),
            payload: r.take(1),
            ack_req_seq: r.take(9),
            flit_seq_lo: r.take(3),
        };
        r.reserved(8, "command header rsvd")?;
        Ok(h)
    }

    /// Emit into the first 3 bytes.
    ///
    /// # Errors
    /// `BufferTooSmall` or `FieldRange`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let mut w = BitWriter::new(24);
        w.put(3, self.op, "op")?;
        w.put(1, self.payload, "payload")?;
        w.put(9, self.ack_req_seq, "ack_req_seq")?;
        w.put(3, self.flit_seq_lo, "flit_seq_lo")?;
        w.reserved(8);
        w.finish::<3>(buf)
    }
}

/// A DL flit header of either form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlitHeader {
    /// Explicit (payload) header.
    Explicit(ExplicitHeader),
    /// Command (ack / replay request) header.
    Command(CommandHeader),
}

impl FlitHeader {
    /// Parse, choosing the form by the op in the top 3 bits.
    ///
    /// # Errors
    /// As [`ExplicitHeader::parse`] and [`CommandHeader::parse`].
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let first = buf.first().ok_or(Error::Truncated {
            needed: HEADER_LEN,
            got: 0,
        })?;
        if DlOp::from_raw(first >> 5).is_command() {
            CommandHeader::parse(buf).map(FlitHeader::Command)
        } else {
            ExplicitHeader::parse(buf).map(FlitHeader::Explicit)
        }
    }

    /// Emit into the first 3 bytes.
    ///
    /// # Errors
    /// `BufferTooSmall` or `FieldRange`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        match self {
            FlitHeader::Explicit(h) => h.emit(buf),
            FlitHeader::Command(h) => h.emit(buf),
        }
    }

    /// The header's op.
    pub const fn op(&self) -> DlOp {
        match self {
            FlitHeader::Explicit(h) => DlOp::from_raw(h.op),
            FlitHeader::Command(h) => DlOp::from_raw(h.op),
        }
    }

    /// Whether the flit carries TL payload.
    pub const fn payload(&self) -> bool {
        match self {
            FlitHeader::Explicit(h) => h.payload,
            FlitHeader::Command(h) => h.payload,
        }
    }
}

/// Segment header (1 byte): tl_flit1:1 message1:2 tl_flit0:1 message0:2 rsvd:1 dl_alt_sector:1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SegmentHeader {
    /// TL flit indicator for the segment's second half.
    pub tl_flit1: bool,
    /// DL message indicator for the second half (2 bits).
    pub message1: u8,
    /// TL flit indicator for the segment's first half.
    pub tl_flit0: bool,
    /// DL message indicator for the first half (2 bits).
    pub message0: u8,
    /// The segment starts with an alternative sector carrying DL messages.
    pub dl_alt_sector: bool,
}

impl SegmentHeader {
    /// Parse one byte.
    ///
    /// # Errors
    /// `Truncated`, or `Reserved` if the reserved bit is set.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let mut r = BitReader::new::<1>(buf)?;
        let h = SegmentHeader {
            tl_flit1: r.take(1),
            message1: r.take(2),
            tl_flit0: r.take(1),
            message0: r.take(2),
            dl_alt_sector: {
                r.reserved(1, "segment header rsvd")?;
                r.take(1)
            },
        };
        Ok(h)
    }

    /// Emit one byte.
    ///
    /// # Errors
    /// `BufferTooSmall` or `FieldRange`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let mut w = BitWriter::new(8);
        w.put(1, self.tl_flit1, "tl_flit1")?;
        w.put(2, self.message1, "message1")?;
        w.put(1, self.tl_flit0, "tl_flit0")?;
        w.put(2, self.message0, "message0")?;
        w.reserved(1);
        w.put(1, self.dl_alt_sector, "dl_alt_sector")?;
        w.finish::<1>(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_explicit_construct() {
        let h = ExplicitHeader {
            op: 0,
            payload: true,
            flit_seq_no: 511,
        };
        let mut b = [0u8; 3];
        h.emit(&mut b).unwrap();
        assert_eq!(b, [0x11, 0xff, 0x00]);
        assert_eq!(FlitHeader::parse(&b).unwrap(), FlitHeader::Explicit(h));
    }

    #[test]
    fn test_command_deconstruct() {
        let h = FlitHeader::parse(&[0x49, 0x1b, 0x00]).unwrap();
        assert_eq!(
            h,
            FlitHeader::Command(CommandHeader {
                op: 2,
                payload: false,
                ack_req_seq: 291,
                flit_seq_lo: 3
            })
        );
        assert_eq!(h.op(), DlOp::Ack);
    }

    #[test]
    fn test_reserved() {
        assert_eq!(
            ExplicitHeader::parse(&[0x12, 0, 0]),
            Err(Error::Reserved("explicit header rsvd"))
        );
        assert_eq!(
            ExplicitHeader::parse(&[0x10, 0, 1]),
            Err(Error::Reserved("explicit header rsvd"))
        );
        assert_eq!(
            CommandHeader::parse(&[0x40, 0, 1]),
            Err(Error::Reserved("command header rsvd"))
        );
        assert_eq!(
            SegmentHeader::parse(&[0x02]),
            Err(Error::Reserved("segment header rsvd"))
        );
    }

    #[test]
    fn test_segment_header() {
        let h = SegmentHeader::parse(&[0x10]).unwrap();
        assert!(h.tl_flit0 && !h.tl_flit1 && h.message1 == 0);
        let h = SegmentHeader::parse(&[0xe1]).unwrap();
        assert!(h.tl_flit1 && h.message1 == 3 && h.dl_alt_sector);
        let mut b = [0u8; 1];
        h.emit(&mut b).unwrap();
        assert_eq!(b, [0xe1]);
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            FlitHeader::parse(&[0x10, 0x01]),
            Err(Error::Truncated { needed: 3, got: 2 })
        );
        assert_eq!(
            FlitHeader::parse(&[]),
            Err(Error::Truncated { needed: 3, got: 0 })
        );
    }
}
