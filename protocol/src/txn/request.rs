//! Operations as the user submits them, and their split into wire requests
//! (`spec-notes/transactions.md#operations`).
//!
//! Reads, writes and write messages travel as requests of 64, 128, 192 or 256 B that start on
//! a 64 B boundary and never cross a 256 B boundary. An operation on any other range is
//! widened to whole 64 B blocks (reads return only the bytes asked for; writes disable the
//! extra bytes) and split at every 256 B boundary. An atomic is always one request.

use super::atomic::Atomic;
use super::enables::{ByteEnables, REGION_BYTES};
use super::Pool;
use crate::wire::tl_flit::{BEAT_LEN as BEAT_BYTES, MAX_DATA_LEN as MAX_DATA_BYTES};
use crate::wire::{AccelId, Opcode, Tag, TlUncompressedRequest, Vc};

/// Addresses are 57 bits.
pub const ADDR_LIMIT: u64 = 1 << 57;

/// The kind of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Read (0x03).
    Read,
    /// Write with byte enables (0x28).
    Write,
    /// Write of whole 64 B blocks (0x29).
    WriteFull,
    /// Atomic returning the old value (0x30).
    AtomicR,
    /// Atomic returning status only (0x32).
    AtomicNR,
    /// Write message (0x2A).
    Message,
}

impl OpKind {
    /// The request opcode.
    pub const fn opcode(self) -> Opcode {
        match self {
            OpKind::Read => Opcode::Read,
            OpKind::Write => Opcode::Write,
            OpKind::WriteFull => Opcode::WriteFull,
            OpKind::AtomicR => Opcode::AtomicR,
            OpKind::AtomicNR => Opcode::AtomicNR,
            OpKind::Message => Opcode::WriteMessage,
        }
    }
}

/// A memory operation on a remote accelerator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation<'a> {
    /// Read `len` bytes at `addr` (any alignment; the data arrives through
    /// [`ReadData`](super::ReadData)).
    Read {
        /// Byte address.
        addr: u64,
        /// Bytes to read (≥ 1).
        len: u32,
    },
    /// Write `data` at `addr` (any alignment). `enables`, if given, holds one bit per data
    /// byte (LSB first): a clear bit leaves that byte of memory unchanged.
    Write {
        /// Byte address.
        addr: u64,
        /// The bytes.
        data: &'a [u8],
        /// Optional byte enables (at least `ceil(data.len() / 8)` bytes).
        enables: Option<&'a [u8]>,
    },
    /// Write whole 64 B blocks: `addr` and `data.len()` are multiples of 64.
    WriteFull {
        /// Byte address, 64 B aligned.
        addr: u64,
        /// The bytes, a non-zero multiple of 64.
        data: &'a [u8],
    },
    /// An atomic on a 4 or 8 B element aligned to its size (compare-and-swap: to twice
    /// its size, the length of its two operands).
    Atomic {
        /// Byte address of the element.
        addr: u64,
        /// Operation, size and operands.
        atomic: Atomic,
        /// Return the old value (AtomicR) or status only (AtomicNR).
        returning: bool,
    },
    /// A write message: 64–256 B in whole 64 B blocks inside one 256 B region, delivered
    /// whole to the target's message handler.
    Message {
        /// Byte address, 64 B aligned.
        addr: u64,
        /// The message, 64, 128, 192 or 256 B.
        data: &'a [u8],
    },
}

impl Operation<'_> {
    /// The operation's kind.
    pub const fn kind(&self) -> OpKind {
        match self {
            Operation::Read { .. } => OpKind::Read,
            Operation::Write { .. } => OpKind::Write,
            Operation::WriteFull { .. } => OpKind::WriteFull,
            Operation::Atomic {
                returning: true, ..
            } => OpKind::AtomicR,
            Operation::Atomic { .. } => OpKind::AtomicNR,
            Operation::Message { .. } => OpKind::Message,
        }
    }

    /// First byte address and length in bytes.
    pub const fn range(&self) -> (u64, u64) {
        match *self {
            Operation::Read { addr, len } => (addr, len as u64),
            Operation::Write { addr, data, .. }
            | Operation::WriteFull { addr, data }
            | Operation::Message { addr, data } => (addr, data.len() as u64),
            Operation::Atomic { addr, atomic, .. } => (addr, atomic.size.bytes() as u64),
        }
    }
}

/// An operation and where it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    /// The completer's accelerator.
    pub dst: AccelId,
    /// The virtual channel.
    pub vc: Vc,
    /// The operation.
    pub op: Operation<'a>,
}

/// Why an operation was not accepted. Nothing was queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubmitError {
    /// Every operation slot is taken (poll completions to free them).
    OpTableFull,
    /// The request queue has `free` slots; the operation needs `needed` requests.
    QueueFull {
        /// Requests the operation splits into.
        needed: usize,
        /// Free queue slots.
        free: usize,
    },
    /// Zero length, a message longer than 256 B, or byte enables shorter than the data.
    BadLength,
    /// The address or length breaks the operation's alignment rule.
    Misaligned,
    /// The range goes beyond the 57-bit address space.
    AddressRange,
    /// The destination is in another partition (requester-side check).
    PartitionDenied,
}

impl core::fmt::Display for SubmitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SubmitError::OpTableFull => f.write_str("operation table full"),
            SubmitError::QueueFull { needed, free } => {
                write!(f, "request queue full: need {needed}, {free} free")
            }
            SubmitError::BadLength => f.write_str("bad length"),
            SubmitError::Misaligned => f.write_str("misaligned"),
            SubmitError::AddressRange => f.write_str("address beyond 57 bits"),
            SubmitError::PartitionDenied => f.write_str("destination in another partition"),
        }
    }
}

impl core::error::Error for SubmitError {}

/// One wire request, waiting in the requester's queue.
#[derive(Clone)]
pub(crate) struct Piece {
    /// The operation slot it belongs to.
    pub(crate) op: u16,
    pub(crate) dst: AccelId,
    pub(crate) vc: Vc,
    pub(crate) cmd: Opcode,
    /// Byte address.
    pub(crate) addr: u64,
    /// 64 B beats the request covers (1 for an atomic).
    pub(crate) span_beats: u8,
    pub(crate) attr: u8,
    pub(crate) len_field: u8,
    /// Data beats the request carries.
    pub(crate) data_beats: u8,
    pub(crate) enables: Option<ByteEnables>,
    pub(crate) data: [u8; MAX_DATA_BYTES],
}

impl Piece {
    /// A placeholder.
    pub(crate) const EMPTY: Piece = Piece {
        op: 0,
        dst: AccelId::from_bits_truncate(0),
        vc: Vc::from_bits_truncate(0),
        cmd: Opcode::Read,
        addr: 0,
        span_beats: 0,
        attr: 0,
        len_field: 0,
        data_beats: 0,
        enables: None,
        data: [0; MAX_DATA_BYTES],
    };

    /// The 256 B ordering region.
    pub(crate) const fn region(&self) -> u64 {
        self.addr / REGION_BYTES
    }

    /// Data beats the response carries.
    pub(crate) const fn response_beats(&self) -> u8 {
        match self.cmd {
            Opcode::Read => self.span_beats,
            Opcode::AtomicR => 1,
            _ => 0,
        }
    }

    /// The request's control field.
    pub(crate) fn request(&self, src: AccelId, tag: Tag, pool: Pool) -> TlUncompressedRequest {
        TlUncompressedRequest {
            cmd: self.cmd,
            vchan: self.vc,
            asi: 0,
            tag,
            pool: pool.bit(),
            attr: self.attr,
            len: self.len_field,
            metadata: 0,
            addr: self.addr >> 2,
            srcaccid: src,
            dstaccid: self.dst,
            cload: false,
            cway: 0,
            numbeats: self.span_beats.saturating_sub(1) & 3,
        }
    }

    /// The data that follows the field: whole beats, or an atomic's operand bytes.
    pub(crate) fn payload(&self) -> &[u8] {
        let n = if self.cmd.is_atomic() {
            (usize::from(self.len_field) + 1) * 4
        } else {
            usize::from(self.data_beats) * BEAT_BYTES
        };
        self.data.get(..n).unwrap_or(&[])
    }
}

/// The 64 B-block pieces of `[addr, addr + len)`: (first byte, beats), split at 256 B.
pub(crate) fn blocks(addr: u64, len: u64) -> impl Iterator<Item = (u64, u8)> {
    let b = BEAT_BYTES as u64;
    let start = addr & !(b - 1);
    let end = addr.saturating_add(len).saturating_add(b - 1) & !(b - 1);
    let mut p = start;
    core::iter::from_fn(move || {
        if p >= end {
            return None;
        }
        let region_end = (p / REGION_BYTES + 1) * REGION_BYTES;
        let e = region_end.min(end);
        let beats = ((e - p) / b) as u8;
        let piece = (p, beats);
        p = e;
        Some(piece)
    })
}

/// Check an operation and count its pieces.
pub(crate) fn plan(op: &Operation<'_>) -> Result<usize, SubmitError> {
    let (addr, len) = op.range();
    if len == 0 {
        return Err(SubmitError::BadLength);
    }
    if addr.checked_add(len).is_none_or(|end| end > ADDR_LIMIT) {
        return Err(SubmitError::AddressRange);
    }
    let b = BEAT_BYTES as u64;
    match *op {
        Operation::Read { .. } => {}
        Operation::Write { data, enables, .. } => {
            if enables.is_some_and(|e| e.len() < data.len().div_ceil(8)) {
                return Err(SubmitError::BadLength);
            }
        }
        Operation::WriteFull { .. } => {
            if addr % b != 0 || len % b != 0 {
                return Err(SubmitError::Misaligned);
            }
        }
        Operation::Message { .. } => {
            if len > MAX_DATA_BYTES as u64 {
                return Err(SubmitError::BadLength);
            }
            if addr % b != 0 || len % b != 0 || addr % REGION_BYTES + len > REGION_BYTES {
                return Err(SubmitError::Misaligned);
            }
        }
        Operation::Atomic { atomic, .. } => {
            if addr % (atomic.operand_bytes() as u64) != 0 {
                return Err(SubmitError::Misaligned);
            }
            return Ok(1);
        }
    }
    Ok(blocks(addr, len).count())
}

/// First- and last-word byte enables (`attr` of a partial write): first word in bits 7..4,
/// last word in bits 3..0, byte `i` of a word in bit `i` of its nibble.
fn word_enables_attr(be: &ByteEnables, bytes: usize) -> u8 {
    let nibble = |word: usize| (0..4).fold(0u8, |n, i| n | (u8::from(be.get(word * 4 + i)) << i));
    (nibble(0) << 4) | nibble((bytes / 4).saturating_sub(1))
}

/// Build the piece of `op` that covers `beats` blocks from `paddr`.
pub(crate) fn build_piece(req: &Request<'_>, op_slot: u16, paddr: u64, beats: u8) -> Piece {
    let mut p = Piece {
        op: op_slot,
        dst: req.dst,
        vc: req.vc,
        cmd: req.op.kind().opcode(),
        addr: paddr,
        span_beats: beats,
        attr: 0xff,
        len_field: (usize::from(beats) * BEAT_BYTES / 4).saturating_sub(1) as u8,
        data_beats: 0,
        enables: None,
        data: [0; MAX_DATA_BYTES],
    };
    let bytes = usize::from(beats) * BEAT_BYTES;
    match req.op {
        Operation::Read { .. } => {}
        Operation::Write {
            addr,
            data,
            enables,
        } => {
            let mut be = ByteEnables::NONE;
            let lo = paddr.max(addr);
            let hi = (paddr + bytes as u64).min(addr.saturating_add(data.len() as u64));
            if let (Some(i0), Some(k0), Some(n)) = (
                lo.checked_sub(paddr).and_then(|v| usize::try_from(v).ok()),
                lo.checked_sub(addr).and_then(|v| usize::try_from(v).ok()),
                hi.checked_sub(lo).and_then(|v| usize::try_from(v).ok()),
            ) {
                if let (Some(dst), Some(src)) = (p.data.get_mut(i0..i0 + n), data.get(k0..k0 + n)) {
                    dst.copy_from_slice(src);
                    match enables {
                        None => be = ByteEnables::range(i0, i0 + n),
                        Some(e) => {
                            for (j, d) in dst.iter_mut().enumerate() {
                                let k = k0 + j;
                                if e.get(k / 8).is_some_and(|b| b & (1 << (k % 8)) != 0) {
                                    be.set(i0 + j, true);
                                } else {
                                    *d = 0;
                                }
                            }
                        }
                    }
                }
            }
            p.attr = word_enables_attr(&be, bytes);
            p.enables = Some(be);
            p.data_beats = beats;
        }
        Operation::WriteFull { addr, data } | Operation::Message { addr, data } => {
            let from = paddr
                .checked_sub(addr)
                .and_then(|v| usize::try_from(v).ok())
                .unwrap_or(usize::MAX);
            if let (Some(src), Some(dst)) = (
                data.get(from..from.saturating_add(bytes)),
                p.data.get_mut(..bytes),
            ) {
                dst.copy_from_slice(src);
            }
            p.data_beats = beats;
        }
        Operation::Atomic { atomic, .. } => {
            p.span_beats = 1;
            p.data_beats = 1;
            p.attr = atomic.attr();
            p.len_field = atomic.len_field();
            atomic.encode_operands(&mut p.data);
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::{AtomicOp, AtomicSize};

    fn pieces(addr: u64, len: u64) -> std::vec::Vec<(u64, u8)> {
        blocks(addr, len).collect()
    }

    #[test]
    fn split_at_256() {
        assert_eq!(pieces(0, 64), [(0, 1)]);
        assert_eq!(pieces(0, 256), [(0, 4)]);
        assert_eq!(pieces(1, 1), [(0, 1)]);
        assert_eq!(pieces(192, 128), [(192, 1), (256, 1)]);
        assert_eq!(
            pieces(100, 1000),
            [(64, 3), (256, 4), (512, 4), (768, 4), (1024, 2)]
        );
        assert_eq!(pieces(0, 0), []);
    }

    #[test]
    fn plan_rules() {
        let d = [0u8; 512];
        let rd = |addr, len| Operation::Read { addr, len };
        assert_eq!(plan(&rd(0, 0)), Err(SubmitError::BadLength));
        assert_eq!(plan(&rd(ADDR_LIMIT - 1, 2)), Err(SubmitError::AddressRange));
        assert_eq!(plan(&rd(u64::MAX, 2)), Err(SubmitError::AddressRange));
        assert_eq!(plan(&rd(ADDR_LIMIT - 1, 1)), Ok(1));
        let wf = |addr, n| Operation::WriteFull {
            addr,
            data: &d[..n],
        };
        assert_eq!(plan(&wf(64, 128)), Ok(1));
        assert_eq!(plan(&wf(192, 128)), Ok(2));
        assert_eq!(plan(&wf(65, 64)), Err(SubmitError::Misaligned));
        assert_eq!(plan(&wf(64, 65)), Err(SubmitError::Misaligned));
        let msg = |addr, n| Operation::Message {
            addr,
            data: &d[..n],
        };
        assert_eq!(plan(&msg(0, 256)), Ok(1));
        assert_eq!(plan(&msg(0, 320)), Err(SubmitError::BadLength));
        assert_eq!(plan(&msg(192, 128)), Err(SubmitError::Misaligned));
        let w = Operation::Write {
            addr: 3,
            data: &d[..17],
            enables: Some(&[0xff, 0xff]),
        };
        assert_eq!(plan(&w), Err(SubmitError::BadLength));
        let at = |addr| Operation::Atomic {
            addr,
            atomic: Atomic {
                op: AtomicOp::FetchAdd,
                size: AtomicSize::Eight,
                operand: 1,
                compare: 0,
            },
            returning: true,
        };
        assert_eq!(plan(&at(8)), Ok(1));
        assert_eq!(plan(&at(4)), Err(SubmitError::Misaligned));
    }

    #[test]
    fn partial_write_piece() {
        let data = [0xaa; 8];
        let req = Request {
            dst: AccelId::new(1).unwrap(),
            vc: Vc::default(),
            op: Operation::Write {
                addr: 66,
                data: &data,
                enables: Some(&[0b1111_1101]),
            },
        };
        let p = build_piece(&req, 0, 64, 1);
        let be = p.enables.unwrap();
        assert!(!be.get(1) && be.get(2) && !be.get(3) && be.get(4) && be.get(9) && !be.get(10));
        assert_eq!(p.data[2], 0xaa);
        assert_eq!(p.data[3], 0);
        assert_eq!(p.attr, 0b0100_0000);
        assert_eq!(p.len_field, 15);
        assert_eq!(p.data_beats, 1);
        let r = p.request(AccelId::new(2).unwrap(), Tag::new(9).unwrap(), Pool::Shared);
        assert_eq!((r.addr, r.numbeats, r.tag.get(), r.pool), (16, 0, 9, true));
        assert_eq!(p.payload().len(), 64);
    }
}
