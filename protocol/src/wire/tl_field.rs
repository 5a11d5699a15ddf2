//! TL control fields: the six FTYPEs (`spec-notes/wire.md#tl-control-fields`).
//!
//! Every control field starts with a 4-bit FTYPE; its length follows from the FTYPE
//! (4, 8 or 16 bytes). Layouts are MSB-first, field names are those of the reference vectors.

use super::bits::{BitReader, BitWriter, Field};
use super::{AccelId, Error, Result, Tag, Vc};

/// The 4-bit FTYPE at the top of every TL control field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Ftype {
    /// Flow control / NOP (4 B).
    FlowControl = 0x0,
    /// Uncompressed request (16 B).
    UncompressedRequest = 0x1,
    /// Uncompressed response (8 B).
    UncompressedResponse = 0x2,
    /// Compressed request (8 B).
    CompressedRequest = 0x3,
    /// Compressed single-beat read response (4 B).
    CompressedReadResponse = 0x4,
    /// Compressed write or multi-beat read response (4 B).
    CompressedWriteResponse = 0x5,
}

impl Ftype {
    /// The FTYPE of a raw 4-bit value.
    pub const fn from_raw(v: u8) -> Result<Ftype> {
        Ok(match v {
            0x0 => Ftype::FlowControl,
            0x1 => Ftype::UncompressedRequest,
            0x2 => Ftype::UncompressedResponse,
            0x3 => Ftype::CompressedRequest,
            0x4 => Ftype::CompressedReadResponse,
            0x5 => Ftype::CompressedWriteResponse,
            other => return Err(Error::UnknownFtype(other)),
        })
    }

    /// The field kind's name as the reference vectors spell it (`tl_uncompressed_request`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Ftype::FlowControl => "tl_flow_control_nop",
            Ftype::UncompressedRequest => "tl_uncompressed_request",
            Ftype::UncompressedResponse => "tl_uncompressed_response",
            Ftype::CompressedRequest => "tl_compressed_request",
            Ftype::CompressedReadResponse => "tl_compressed_response_single_beat_read",
            Ftype::CompressedWriteResponse => "tl_compressed_response_write_or_multibeat_read",
        }
    }

    /// Encoded length in bytes of a field with this FTYPE.
    pub const fn field_len(self) -> usize {
        match self {
            Ftype::FlowControl | Ftype::CompressedReadResponse | Ftype::CompressedWriteResponse => {
                4
            }
            Ftype::UncompressedResponse | Ftype::CompressedRequest => 8,
            Ftype::UncompressedRequest => 16,
        }
    }
}

/// A 6-bit request opcode. Unknown and vendor values stay visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Opcode {
    /// Read (0x03).
    #[default]
    Read,
    /// Write with byte enables (0x28).
    Write,
    /// Write with all byte enables, 64 B aligned (0x29).
    WriteFull,
    /// Write message (0x2A).
    WriteMessage,
    /// Atomic returning data (0x30).
    AtomicR,
    /// Atomic returning status only (0x32).
    AtomicNR,
    /// Vendor read, 0x08–0x0F.
    VendorRead(u8),
    /// Vendor write, 0x2C–0x2F.
    VendorWrite(u8),
    /// Vendor atomic, 0x3C–0x3F.
    VendorAtomic(u8),
    /// Any other value.
    Unknown(u8),
}

impl Opcode {
    /// The opcode of a raw 6-bit value (higher bits are ignored).
    pub const fn from_raw(v: u8) -> Opcode {
        let v = v & 0x3f;
        match v {
            0x03 => Opcode::Read,
            0x28 => Opcode::Write,
            0x29 => Opcode::WriteFull,
            0x2a => Opcode::WriteMessage,
            0x30 => Opcode::AtomicR,
            0x32 => Opcode::AtomicNR,
            0x08..=0x0f => Opcode::VendorRead(v),
            0x2c..=0x2f => Opcode::VendorWrite(v),
            0x3c..=0x3f => Opcode::VendorAtomic(v),
            other => Opcode::Unknown(other),
        }
    }

    /// The raw 6-bit value.
    pub const fn raw(self) -> u8 {
        match self {
            Opcode::Read => 0x03,
            Opcode::Write => 0x28,
            Opcode::WriteFull => 0x29,
            Opcode::WriteMessage => 0x2a,
            Opcode::AtomicR => 0x30,
            Opcode::AtomicNR => 0x32,
            Opcode::VendorRead(v)
            | Opcode::VendorWrite(v)
            | Opcode::VendorAtomic(v)
            | Opcode::Unknown(v) => v,
        }
    }

    /// Bit 5 of the opcode: the request carries data.
    pub const fn carries_data(self) -> bool {
        self.raw() & 0x20 != 0
    }

    /// Read, Write, WriteFull: the only commands that may use address compression.
    pub const fn compressible(self) -> bool {
        matches!(self, Opcode::Read | Opcode::Write | Opcode::WriteFull)
    }

    /// An atomic (standard or vendor).
    pub const fn is_atomic(self) -> bool {
        matches!(
            self,
            Opcode::AtomicR | Opcode::AtomicNR | Opcode::VendorAtomic(_)
        )
    }
}

impl Field for Opcode {
    fn from_bits(v: u64) -> Self {
        Opcode::from_raw(v as u8)
    }
    fn to_bits(self) -> u64 {
        u64::from(self.raw())
    }
}

/// Flow control / NOP field (FTYPE 0x0, 4 B): credits returned per class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowControl {
    /// Request-command credits returned (6 bits).
    pub req_cmd: u8,
    /// Response-command credits returned (6 bits).
    pub rsp_cmd: u8,
    /// Request-data credits returned (8 bits).
    pub req_data: u8,
    /// Response-data credits returned (8 bits).
    pub rsp_data: u8,
}

/// Uncompressed request (FTYPE 0x1, 16 B).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct UncompressedRequest {
    /// Opcode (6 bits).
    pub cmd: Opcode,
    /// Virtual channel.
    pub vchan: Vc,
    /// Address space identifier (2 bits).
    pub asi: u8,
    /// Tag.
    pub tag: Tag,
    /// Credit pool: false = per-VC, true = shared.
    pub pool: bool,
    /// Byte enables of first/last word, or the atomic operation and size (8 bits).
    pub attr: u8,
    /// Length in 4 B words minus one (6 bits).
    pub len: u8,
    /// Metadata (8 bits).
    pub metadata: u8,
    /// Address bits 56..2 (55 bits).
    pub addr: u64,
    /// Source accelerator.
    pub srcaccid: AccelId,
    /// Destination accelerator.
    pub dstaccid: AccelId,
    /// Load the address-compression cache way `cway` with this address's region.
    pub cload: bool,
    /// Address-compression cache way (2 bits).
    pub cway: u8,
    /// Number of data beats (2 bits).
    pub numbeats: u8,
}

/// Uncompressed response (FTYPE 0x2, 8 B).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct UncompressedResponse {
    /// Virtual channel.
    pub vchan: Vc,
    /// Tag of the request.
    pub tag: Tag,
    /// Credit pool.
    pub pool: bool,
    /// Data length code (2 bits).
    pub len: u8,
    /// Offset of this beat (2 bits).
    pub offset: u8,
    /// Status (4 bits).
    pub status: u8,
    /// Response to a write (true) or a read (false).
    pub rd_wr: bool,
    /// Last response of the request.
    pub last: bool,
    /// Source accelerator (the completer).
    pub srcaccid: AccelId,
    /// Destination accelerator (the requester).
    pub dstaccid: AccelId,
    /// Spare bits (16), carried through unchanged.
    pub spares: u16,
}

/// Compressed request (FTYPE 0x3, 8 B): address bits 19..6, region from the cache way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CompressedRequest {
    /// Compressed opcode (3 bits, `spec-notes/deviations.md#compressed-cmd`).
    pub cmd: u8,
    /// Virtual channel.
    pub vchan: Vc,
    /// Address space identifier (2 bits).
    pub asi: u8,
    /// Tag.
    pub tag: Tag,
    /// Credit pool.
    pub pool: bool,
    /// Length code: 64 B × (len + 1) (2 bits).
    pub len: u8,
    /// Metadata (3 bits).
    pub metadata: u8,
    /// Address bits 19..6 (14 bits).
    pub addr: u16,
    /// Source accelerator.
    pub srcaccid: AccelId,
    /// Destination accelerator.
    pub dstaccid: AccelId,
    /// Address-compression cache way (2 bits).
    pub cway: u8,
}

/// Compressed single-beat read response (FTYPE 0x4, 4 B).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CompressedSingleBeatReadResponse {
    /// Virtual channel.
    pub vchan: Vc,
    /// Tag.
    pub tag: Tag,
    /// Credit pool.
    pub pool: bool,
    /// Destination accelerator (the requester).
    pub dstaccid: AccelId,
    /// Beat offset (2 bits).
    pub offset: u8,
    /// Last response of the request.
    pub last: bool,
}

/// Compressed write or multi-beat read response (FTYPE 0x5, 4 B).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CompressedWriteResponse {
    /// Virtual channel.
    pub vchan: Vc,
    /// Tag.
    pub tag: Tag,
    /// Credit pool.
    pub pool: bool,
    /// Destination accelerator (the requester).
    pub dstaccid: AccelId,
    /// Length code (2 bits).
    pub len: u8,
    /// Write (true) or read (false).
    pub rd_wr: bool,
}

/// Any TL control field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TlField {
    /// FTYPE 0x0.
    FlowControl(FlowControl),
    /// FTYPE 0x1.
    UncompressedRequest(UncompressedRequest),
    /// FTYPE 0x2.
    UncompressedResponse(UncompressedResponse),
    /// FTYPE 0x3.
    CompressedRequest(CompressedRequest),
    /// FTYPE 0x4.
    CompressedReadResponse(CompressedSingleBeatReadResponse),
    /// FTYPE 0x5.
    CompressedWriteResponse(CompressedWriteResponse),
}

impl TlField {
    /// The FTYPE of the field at the start of `buf`.
    pub fn peek_ftype(buf: &[u8]) -> Result<Ftype> {
        let first = buf.first().ok_or(Error::Truncated { needed: 1, got: 0 })?;
        Ftype::from_raw(first >> 4)
    }

    /// The FTYPE of this field.
    pub const fn ftype(&self) -> Ftype {
        match self {
            TlField::FlowControl(_) => Ftype::FlowControl,
            TlField::UncompressedRequest(_) => Ftype::UncompressedRequest,
            TlField::UncompressedResponse(_) => Ftype::UncompressedResponse,
            TlField::CompressedRequest(_) => Ftype::CompressedRequest,
            TlField::CompressedReadResponse(_) => Ftype::CompressedReadResponse,
            TlField::CompressedWriteResponse(_) => Ftype::CompressedWriteResponse,
        }
    }

    /// The tag of a request or response (`None` for a flow-control field).
    pub const fn tag(&self) -> Option<Tag> {
        match self {
            TlField::FlowControl(_) => None,
            TlField::UncompressedRequest(f) => Some(f.tag),
            TlField::UncompressedResponse(f) => Some(f.tag),
            TlField::CompressedRequest(f) => Some(f.tag),
            TlField::CompressedReadResponse(f) => Some(f.tag),
            TlField::CompressedWriteResponse(f) => Some(f.tag),
        }
    }

    /// Encoded length in bytes.
    pub const fn buffer_len(&self) -> usize {
        self.ftype().field_len()
    }

    /// Parse the field at the start of `buf` (trailing bytes are ignored).
    ///
    /// # Errors
    /// `Truncated`, `UnknownFtype`, or `Reserved` when the spare bit of a compressed
    /// response is set.
    #[inline]
    pub fn parse(buf: &[u8]) -> Result<TlField> {
        Ok(match Self::peek_ftype(buf)? {
            Ftype::FlowControl => {
                let mut r = BitReader::new::<4>(buf)?;
                r.bits(4);
                TlField::FlowControl(FlowControl {
                    req_cmd: r.take(6),
                    rsp_cmd: r.take(6),
                    req_data: r.take(8),
                    rsp_data: r.take(8),
                })
            }
            Ftype::UncompressedRequest => {
                let mut r = BitReader::new::<16>(buf)?;
                r.bits(4);
                TlField::UncompressedRequest(UncompressedRequest {
                    cmd: r.take(6),
                    vchan: r.take(2),
                    asi: r.take(2),
                    tag: r.take(11),
                    pool: r.take(1),
                    attr: r.take(8),
                    len: r.take(6),
                    metadata: r.take(8),
                    addr: r.take(55),
                    srcaccid: r.take(10),
                    dstaccid: r.take(10),
                    cload: r.take(1),
                    cway: r.take(2),
                    numbeats: r.take(2),
                })
            }
            Ftype::UncompressedResponse => {
                let mut r = BitReader::new::<8>(buf)?;
                r.bits(4);
                TlField::UncompressedResponse(UncompressedResponse {
                    vchan: r.take(2),
                    tag: r.take(11),
                    pool: r.take(1),
                    len: r.take(2),
                    offset: r.take(2),
                    status: r.take(4),
                    rd_wr: r.take(1),
                    last: r.take(1),
                    srcaccid: r.take(10),
                    dstaccid: r.take(10),
                    spares: r.take(16),
                })
            }
            Ftype::CompressedRequest => {
                let mut r = BitReader::new::<8>(buf)?;
                r.bits(4);
                TlField::CompressedRequest(CompressedRequest {
                    cmd: r.take(3),
                    vchan: r.take(2),
                    asi: r.take(2),
                    tag: r.take(11),
                    pool: r.take(1),
                    len: r.take(2),
                    metadata: r.take(3),
                    addr: r.take(14),
                    srcaccid: r.take(10),
                    dstaccid: r.take(10),
                    cway: r.take(2),
                })
            }
            Ftype::CompressedReadResponse => {
                let mut r = BitReader::new::<4>(buf)?;
                r.bits(4);
                let f = CompressedSingleBeatReadResponse {
                    vchan: r.take(2),
                    tag: r.take(11),
                    pool: r.take(1),
                    dstaccid: r.take(10),
                    offset: r.take(2),
                    last: r.take(1),
                };
                r.reserved(1, "compressed read response spare")?;
                TlField::CompressedReadResponse(f)
            }
            Ftype::CompressedWriteResponse => {
                let mut r = BitReader::new::<4>(buf)?;
                r.bits(4);
                let f = CompressedWriteResponse {
                    vchan: r.take(2),
                    tag: r.take(11),
                    pool: r.take(1),
                    dstaccid: r.take(10),
                    len: r.take(2),
                    rd_wr: r.take(1),
                };
                r.reserved(1, "compressed write response spare")?;
                TlField::CompressedWriteResponse(f)
            }
        })
    }

    /// Emit the field into the start of `buf`; returns the bytes written.
    ///
    /// # Errors
    /// `BufferTooSmall`, or `FieldRange` naming a field whose value does not fit.
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let ftype = self.ftype() as u64;
        match self {
            TlField::FlowControl(f) => {
                let mut w = BitWriter::new(32);
                w.bits(4, ftype, "ftype")?;
                w.put(6, f.req_cmd, "req_cmd")?;
                w.put(6, f.rsp_cmd, "rsp_cmd")?;
                w.put(8, f.req_data, "req_data")?;
                w.put(8, f.rsp_data, "rsp_data")?;
                w.finish::<4>(buf)
            }
            TlField::UncompressedRequest(f) => {
                let mut w = BitWriter::new(128);
                w.bits(4, ftype, "ftype")?;
                w.put(6, f.cmd, "cmd")?;
                w.put(2, f.vchan, "vchan")?;
                w.put(2, f.asi, "asi")?;
                w.put(11, f.tag, "tag")?;
                w.put(1, f.pool, "pool")?;
                w.put(8, f.attr, "attr")?;
                w.put(6, f.len, "len")?;
                w.put(8, f.metadata, "metadata")?;
                w.put(55, f.addr, "addr")?;
                w.put(10, f.srcaccid, "srcaccid")?;
                w.put(10, f.dstaccid, "dstaccid")?;
                w.put(1, f.cload, "cload")?;
                w.put(2, f.cway, "cway")?;
                w.put(2, f.numbeats, "numbeats")?;
                w.finish::<16>(buf)
            }
            TlField::UncompressedResponse(f) => {
                let mut w = BitWriter::new(64);
                w.bits(4, ftype, "ftype")?;
                w.put(2, f.vchan, "vchan")?;
                w.put(11, f.tag, "tag")?;
                w.put(1, f.pool, "pool")?;
                w.put(2, f.len, "len")?;
                w.put(2, f.offset, "offset")?;
                w.put(4, f.status, "status")?;
                w.put(1, f.rd_wr, "rd_wr")?;
                w.put(1, f.last, "last")?;
                w.put(10, f.srcaccid, "srcaccid")?;
                w.put(10, f.dstaccid, "dstaccid")?;
                w.put(16, f.spares, "spares")?;
                w.finish::<8>(buf)
            }
            TlField::CompressedRequest(f) => {
                let mut w = BitWriter::new(64);
                w.bits(4, ftype, "ftype")?;
                w.put(3, f.cmd, "cmd")?;
                w.put(2, f.vchan, "vchan")?;
                w.put(2, f.asi, "asi")?;
                w.put(11, f.tag, "tag")?;
                w.put(1, f.pool, "pool")?;
                w.put(2, f.len, "len")?;
                w.put(3, f.metadata, "metadata")?;
                w.put(14, f.addr, "addr")?;
                w.put(10, f.srcaccid, "srcaccid")?;
                w.put(10, f.dstaccid, "dstaccid")?;
                w.put(2, f.cway, "cway")?;
                w.finish::<8>(buf)
            }
            TlField::CompressedReadResponse(f) => {
                let mut w = BitWriter::new(32);
                w.bits(4, ftype, "ftype")?;
                w.put(2, f.vchan, "vchan")?;
                w.put(11, f.tag, "tag")?;
                w.put(1, f.pool, "pool")?;
                w.put(10, f.dstaccid, "dstaccid")?;
                w.put(2, f.offset, "offset")?;
                w.put(1, f.last, "last")?;
                w.reserved(1);
                w.finish::<4>(buf)
            }
            TlField::CompressedWriteResponse(f) => {
                let mut w = BitWriter::new(32);
                w.bits(4, ftype, "ftype")?;
                w.put(2, f.vchan, "vchan")?;
                w.put(11, f.tag, "tag")?;
                w.put(1, f.pool, "pool")?;
                w.put(10, f.dstaccid, "dstaccid")?;
                w.put(2, f.len, "len")?;
                w.put(1, f.rd_wr, "rd_wr")?;
                w.reserved(1);
                w.finish::<4>(buf)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> [u8; 16] {
        let mut out = [0u8; 16];
        for (i, o) in out.iter_mut().enumerate().take(s.len() / 2) {
            *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
        }
        out
    }

    #[test]
    fn test_deconstruct_flow_control() {
        let f = TlField::parse(&hex("0b1516a5")).unwrap();
        assert_eq!(
            f,
            TlField::FlowControl(FlowControl {
                req_cmd: 44,
                rsp_cmd: 21,
                req_data: 22,
                rsp_data: 165
            })
        );
    }

    #[test]
    fn test_construct_uncompressed_request_max() {
        let f = TlField::UncompressedRequest(UncompressedRequest {
            cmd: Opcode::from_raw(63),
            vchan: Vc::new(3).unwrap(),
            asi: 3,
            tag: Tag::new(2047).unwrap(),
            pool: true,
            attr: 255,
            len: 63,
            metadata: 255,
            addr: (1 << 55) - 1,
            srcaccid: AccelId::new(1023).unwrap(),
            dstaccid: AccelId::new(1023).unwrap(),
            cload: true,
            cway: 3,
            numbeats: 3,
        });
        let mut buf = [0u8; 16];
        assert_eq!(f.emit(&mut buf).unwrap(), 16);
        assert_eq!(buf, hex("1fffffffffffffffffffffffffffffff"));
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            TlField::parse(&hex("1f")[..8]),
            Err(Error::Truncated { needed: 16, got: 8 })
        );
        assert_eq!(
            TlField::parse(&[]),
            Err(Error::Truncated { needed: 1, got: 0 })
        );
    }

    #[test]
    fn test_unknown_ftype_and_reserved() {
        assert_eq!(
            TlField::parse(&[0x60, 0, 0, 0]),
            Err(Error::UnknownFtype(6))
        );
        assert_eq!(
            TlField::parse(&[0x40, 0, 0, 1]),
            Err(Error::Reserved("compressed read response spare"))
        );
        assert_eq!(
            TlField::parse(&[0x50, 0, 0, 1]),
            Err(Error::Reserved("compressed write response spare"))
        );
    }

    #[test]
    fn test_emit_range_and_small_buffer() {
        let f = TlField::FlowControl(FlowControl {
            req_cmd: 64,
            ..Default::default()
        });
        assert_eq!(f.emit(&mut [0u8; 4]), Err(Error::FieldRange("req_cmd")));
        let f = TlField::FlowControl(FlowControl::default());
        assert_eq!(
            f.emit(&mut [0u8; 3]),
            Err(Error::BufferTooSmall { needed: 4, got: 3 })
        );
    }

    #[test]
    fn opcode_classes() {
        for raw in 0u8..64 {
            assert_eq!(Opcode::from_raw(raw).raw(), raw);
        }
        assert_eq!(Opcode::from_raw(0x09), Opcode::VendorRead(0x09));
        assert_eq!(Opcode::from_raw(0x2d), Opcode::VendorWrite(0x2d));
        assert_eq!(Opcode::from_raw(0x3e), Opcode::VendorAtomic(0x3e));
        assert_eq!(Opcode::from_raw(0x11), Opcode::Unknown(0x11));
        assert!(Opcode::Write.carries_data());
        assert!(!Opcode::Read.carries_data());
        assert!(!Opcode::AtomicR.compressible());
    }
}
