//! Wire formats: bit-exact views and representations of every frame podlink sends.
//!
//! Every format follows the same pattern (smoltcp's): a checked zero-copy view over
//! `AsRef<[u8]>` where the format is a byte buffer, and a `Repr` with `parse` / `emit`.
//! Fields are packed MSB-first from bit 7 of byte 0 (`spec-notes/wire.md#bit-order`).
//!
//! ```
//! use podlink_protocol::wire::{TlField, TlUncompressedRequest, Opcode, AccelId, Tag, Vc};
//! let req = TlUncompressedRequest {
//!     cmd: Opcode::Read, vchan: Vc::new(1).unwrap(), tag: Tag::new(7).unwrap(),
//!     len: 15, addr: 0x40 >> 2, srcaccid: AccelId::new(3).unwrap(),
//!     dstaccid: AccelId::new(9).unwrap(), ..Default::default()
//! };
//! let mut buf = [0u8; 16];
//! let n = TlField::UncompressedRequest(req).emit(&mut buf).unwrap();
//! assert_eq!(n, 16);
//! assert_eq!(TlField::parse(&buf).unwrap(), TlField::UncompressedRequest(req));
//! ```

pub mod addr_cache;
pub(crate) mod bits;
pub mod crc;
pub mod dl_flit;
pub mod dl_header;
pub mod dl_msg;
pub mod dl_stream;
pub mod eth;
pub mod eth_cbfc;
pub mod eth_rel;
mod ids;
pub mod tl_field;
pub mod tl_flit;
pub mod tl_pack;
pub mod tl_unpack;

pub use self::addr_cache::{AddrCache, ExpandError, Forward};
pub use self::dl_flit::{DlFlit, Repr as DlFlitRepr};
pub use self::dl_header::{
    CommandHeader as DlCommandHeader, DlOp, ExplicitHeader as DlExplicitHeader,
    FlitHeader as DlFlitHeader, SegmentHeader as DlSegmentHeader,
};
pub use self::dl_msg::{DlMessage, MessageSpace as DlMessageSpace};
pub use self::dl_stream::{DlPacker, DlUnpacker};
pub use self::eth::{
    EthAddr, EthHeader, Frame as EthFrame, MacScheme as EthMacScheme, Repr as EthFrameRepr,
};
pub use self::eth_rel::{RelHeader as EthRelHeader, RelOp as EthRelOp};
pub use self::ids::{AccelId, PartitionId, Psn, SeqNum, Tag, Vc};
pub use self::tl_field::{
    CompressedRequest as TlCompressedRequest,
    CompressedSingleBeatReadResponse as TlCompressedReadResponse,
    CompressedWriteResponse as TlCompressedWriteResponse, FlowControl as TlFlowControl, Ftype,
    Opcode, TlField, UncompressedRequest as TlUncompressedRequest,
    UncompressedResponse as TlUncompressedResponse,
};
pub use self::tl_flit::{
    DataShape as TlDataShape, Half as TlHalf, HalfKind as TlHalfKind, TlFlit, TlMessage,
};
pub use self::tl_pack::{
    Item as TlItem, PushError as TlPushError, TlPacker, Transfer as TlTransfer,
};
pub use self::tl_unpack::{NotDrained, TlUnpacker};

use core::fmt;

/// A parse or emit error on a wire format.
///
/// Small and `Copy`, with enough variants to triage a fuzz crash or a bad capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// The input is shorter than the format needs.
    Truncated {
        /// Bytes the format needs.
        needed: usize,
        /// Bytes that were given.
        got: usize,
    },
    /// The caller's output buffer is too small.
    BufferTooSmall {
        /// Bytes the emitter needs.
        needed: usize,
        /// Bytes the buffer has.
        got: usize,
    },
    /// The check sequence does not match the content.
    BadCrc {
        /// CRC carried in the frame.
        carried: u32,
        /// CRC computed over the frame.
        computed: u32,
    },
    /// Reserved bits are set (the name says which field).
    Reserved(&'static str),
    /// A 4-bit TL FTYPE podlink does not know.
    UnknownFtype(u8),
    /// A length field disagrees with the bytes present or with the format.
    LengthMismatch(&'static str),
    /// A field value does not fit its width or is outside its legal range.
    FieldRange(&'static str),
    /// A message class or type that is not defined.
    UnknownMessage {
        /// The message class.
        mclass: u8,
        /// The message type.
        mtype: u8,
    },
    /// A packing rule is broken (the name says which).
    Packing(&'static str),
    /// The Ethernet frame does not carry podlink's EtherType.
    BadEtherType(u16),
    /// A header version podlink does not speak.
    BadVersion(u8),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Truncated { needed, got } => {
                write!(f, "truncated: need {needed} bytes, got {got}")
            }
            Error::BufferTooSmall { needed, got } => {
                write!(f, "output buffer too small: need {needed} bytes, got {got}")
            }
            Error::BadCrc { carried, computed } => write!(
                f,
                "bad CRC: carried {carried:#010x}, computed {computed:#010x}"
            ),
            Error::Reserved(field) => write!(f, "reserved bits set in {field}"),
            Error::UnknownFtype(t) => write!(f, "unknown TL FTYPE {t:#x}"),
            Error::LengthMismatch(what) => write!(f, "length mismatch: {what}"),
            Error::FieldRange(what) => write!(f, "field out of range: {what}"),
            Error::UnknownMessage { mclass, mtype } => {
                write!(f, "unknown DL message class {mclass} type {mtype}")
            }
            Error::Packing(rule) => write!(f, "packing rule broken: {rule}"),
            Error::BadEtherType(t) => write!(f, "not a podlink frame: EtherType {t:#06x}"),
            Error::BadVersion(v) => write!(f, "unsupported header version {v}"),
        }
    }
}

impl core::error::Error for Error {}

/// Result of a wire operation.
pub type Result<T> = core::result::Result<T, Error>;

/// Check that `buf` holds at least `needed` bytes.
#[allow(dead_code)]
pub(crate) fn check_len(buf: &[u8], needed: usize) -> Result<()> {
    if buf.len() < needed {
        Err(Error::Truncated {
            needed,
            got: buf.len(),
        })
    } else {
        Ok(())
    }
}

/// Check that an output buffer holds at least `needed` bytes.
#[allow(dead_code)]
pub(crate) fn check_out(buf: &[u8], needed: usize) -> Result<()> {
    if buf.len() < needed {
        Err(Error::BufferTooSmall {
            needed,
            got: buf.len(),
        })
    } else {
        Ok(())
    }
}
