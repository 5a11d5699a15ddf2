//! Atomic operations on 4- and 8-byte elements and their encoding in the request's `attr`
//! byte (`spec-notes/transactions.md#atomics`).
//!
//! `attr` of an AtomicR (0x30) or AtomicNR (0x32) request, MSB→LSB:
//!
//! | bits | field | values |
//! |---|---|---|
//! | 7..4 | op | 0 fetch-add, 1 swap, 2 compare-and-swap, 3 and, 4 or, 5 xor, 6 signed min, 7 signed max, 8 unsigned min, 9 unsigned max; 10–15 reserved |
//! | 3..2 | size | log2(bytes) − 2: 0 = 4 B, 1 = 8 B; 2 (16 B) and 3 (32 B) reserved for double-width elements |
//! | 1..0 | reserved | 0 |
//!
//! Operands travel in one 64 B data beat, little-endian, from byte 0: the operand, or for
//! compare-and-swap the compare value followed by the swap value. The request's `len` is the
//! operand bytes in 4 B words minus one, and the address is aligned to the operand bytes (the
//! element size; twice that for compare-and-swap, so the operands never cross 256 B). AtomicR
//! returns the old value in one beat, from byte 0.

use crate::wire::tl_flit::BEAT_LEN as BEAT_BYTES;

/// An atomic operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// `new = old + operand` (wrapping).
    FetchAdd,
    /// `new = operand`.
    Swap,
    /// `new = if old == compare { swap } else { old }`.
    CompareSwap,
    /// `new = old & operand`.
    And,
    /// `new = old | operand`.
    Or,
    /// `new = old ^ operand`.
    Xor,
    /// `new = min(old, operand)`, two's complement.
    MinSigned,
    /// `new = max(old, operand)`, two's complement.
    MaxSigned,
    /// `new = min(old, operand)`, unsigned.
    MinUnsigned,
    /// `new = max(old, operand)`, unsigned.
    MaxUnsigned,
}

impl AtomicOp {
    /// Every operation, in code order.
    pub const ALL: [AtomicOp; 10] = [
        AtomicOp::FetchAdd,
        AtomicOp::Swap,
        AtomicOp::CompareSwap,
        AtomicOp::And,
        AtomicOp::Or,
        AtomicOp::Xor,
        AtomicOp::MinSigned,
        AtomicOp::MaxSigned,
        AtomicOp::MinUnsigned,
        AtomicOp::MaxUnsigned,
    ];

    /// The 4-bit code.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The operation of a 4-bit code, `None` for a reserved code.
    pub const fn from_code(code: u8) -> Option<AtomicOp> {
        match code {
            0 => Some(AtomicOp::FetchAdd),
            1 => Some(AtomicOp::Swap),
            2 => Some(AtomicOp::CompareSwap),
            3 => Some(AtomicOp::And),
            4 => Some(AtomicOp::Or),
            5 => Some(AtomicOp::Xor),
            6 => Some(AtomicOp::MinSigned),
            7 => Some(AtomicOp::MaxSigned),
            8 => Some(AtomicOp::MinUnsigned),
            9 => Some(AtomicOp::MaxUnsigned),
            _ => None,
        }
    }

    /// Operands the operation takes (2 for compare-and-swap).
    pub const fn operands(self) -> usize {
        match self {
            AtomicOp::CompareSwap => 2,
            _ => 1,
        }
    }
}

/// The element size of an atomic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtomicSize {
    /// 4 bytes.
    Four,
    /// 8 bytes.
    Eight,
}

impl AtomicSize {
    /// Element size in bytes.
    pub const fn bytes(self) -> usize {
        match self {
            AtomicSize::Four => 4,
            AtomicSize::Eight => 8,
        }
    }

    /// All-ones mask of the element width.
    pub const fn mask(self) -> u64 {
        match self {
            AtomicSize::Four => 0xffff_ffff,
            AtomicSize::Eight => u64::MAX,
        }
    }

    /// The 2-bit size code.
    pub const fn code(self) -> u8 {
        match self {
            AtomicSize::Four => 0,
            AtomicSize::Eight => 1,
        }
    }

    /// The size of a 2-bit code, `None` for the reserved 16 B and 32 B codes.
    pub const fn from_code(code: u8) -> Option<AtomicSize> {
        match code {
            0 => Some(AtomicSize::Four),
            1 => Some(AtomicSize::Eight),
            _ => None,
        }
    }

    /// Sign-extend a value of this width to 64 bits.
    const fn signed(self, v: u64) -> i64 {
        match self {
            AtomicSize::Four => v as u32 as i32 as i64,
            AtomicSize::Eight => v as i64,
        }
    }
}

/// Why an `attr` byte or operand beat does not describe a supported atomic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtomicError {
    /// The op code is reserved.
    ReservedOp(u8),
    /// The size code is reserved (16 B or 32 B elements).
    UnsupportedSize(u8),
    /// The reserved low bits of `attr` are set.
    ReservedBits,
    /// The request's `len` disagrees with the operand count and size.
    OperandLength,
    /// The address is not aligned to the operand length (the element size; twice that for
    /// compare-and-swap).
    Misaligned,
}

/// One atomic: operation, element size and operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Atomic {
    /// The operation.
    pub op: AtomicOp,
    /// The element size.
    pub size: AtomicSize,
    /// The operand (the swap value of compare-and-swap). Bits above the size are ignored.
    pub operand: u64,
    /// The compare value of compare-and-swap (ignored by the other operations).
    pub compare: u64,
}

impl Atomic {
    /// The `attr` byte.
    pub const fn attr(&self) -> u8 {
        (self.op.code() << 4) | (self.size.code() << 2)
    }

    /// Operand bytes on the wire.
    pub const fn operand_bytes(&self) -> usize {
        self.op.operands() * self.size.bytes()
    }

    /// The request's `len` field: operand bytes in 4 B words, minus one.
    pub const fn len_field(&self) -> u8 {
        (self.operand_bytes() / 4 - 1) as u8
    }

    /// Operation and size of an `attr` byte.
    ///
    /// # Errors
    /// The reserved bits, op code or size code is not supported.
    pub const fn decode_attr(attr: u8) -> Result<(AtomicOp, AtomicSize), AtomicError> {
        if attr & 0b11 != 0 {
            return Err(AtomicError::ReservedBits);
        }
        let Some(op) = AtomicOp::from_code(attr >> 4) else {
            return Err(AtomicError::ReservedOp(attr >> 4));
        };
        let Some(size) = AtomicSize::from_code((attr >> 2) & 0b11) else {
            return Err(AtomicError::UnsupportedSize((attr >> 2) & 0b11));
        };
        Ok((op, size))
    }

    /// Write the operands into the first bytes of a data beat (little-endian).
    pub fn encode_operands(&self, beat: &mut [u8]) {
        let n = self.size.bytes();
        let (first, second) = match self.op {
            AtomicOp::CompareSwap => (self.compare, Some(self.operand)),
            _ => (self.operand, None),
        };
        put_le(beat, 0, n, first);
        if let Some(v) = second {
            put_le(beat, n, n, v);
        }
    }

    /// The atomic carried by a request: its `attr`, `len` field, byte address and data beat.
    ///
    /// # Errors
    /// Any [`AtomicError`].
    pub fn decode(attr: u8, len_field: u8, addr: u64, beat: &[u8]) -> Result<Atomic, AtomicError> {
        let (op, size) = Atomic::decode_attr(attr)?;
        let n = size.bytes();
        let mut a = Atomic {
            op,
            size,
            operand: 0,
            compare: 0,
        };
        if usize::from(len_field) + 1 != a.operand_bytes() / 4 || beat.len() < a.operand_bytes() {
            return Err(AtomicError::OperandLength);
        }
        if addr % (a.operand_bytes() as u64) != 0 {
            return Err(AtomicError::Misaligned);
        }
        let first = get_le(beat, 0, n);
        match op {
            AtomicOp::CompareSwap => {
                a.compare = first;
                a.operand = get_le(beat, n, n);
            }
            _ => a.operand = first,
        }
        Ok(a)
    }

    /// The new memory value given the old one (both of this atomic's width).
    pub const fn apply(&self, old: u64) -> u64 {
        let m = self.size.mask();
        let (old, x) = (old & m, self.operand & m);
        let new = match self.op {
            AtomicOp::FetchAdd => old.wrapping_add(x),
            AtomicOp::Swap => x,
            AtomicOp::CompareSwap => {
                if old == self.compare & m {
                    x
                } else {
                    old
                }
            }
            AtomicOp::And => old & x,
            AtomicOp::Or => old | x,
            AtomicOp::Xor => old ^ x,
            AtomicOp::MinSigned => {
                if self.size.signed(x) < self.size.signed(old) {
                    x
                } else {
                    old
                }
            }
            AtomicOp::MaxSigned => {
                if self.size.signed(x) > self.size.signed(old) {
                    x
                } else {
                    old
                }
            }
            AtomicOp::MinUnsigned => {
                if x < old {
                    x
                } else {
                    old
                }
            }
            AtomicOp::MaxUnsigned => {
                if x > old {
                    x
                } else {
                    old
                }
            }
        };
        new & m
    }
}

/// Store the low `n` bytes of `v` little-endian at `buf[at..at + n]` (nothing if out of range).
pub(crate) fn put_le(buf: &mut [u8], at: usize, n: usize, v: u64) {
    let bytes = v.to_le_bytes();
    if let (Some(dst), Some(src)) = (buf.get_mut(at..at.saturating_add(n)), bytes.get(..n)) {
        dst.copy_from_slice(src);
    }
}

/// Load `n` (≤ 8) bytes little-endian from `buf[at..]` (missing bytes read as 0).
pub(crate) fn get_le(buf: &[u8], at: usize, n: usize) -> u64 {
    let mut bytes = [0u8; 8];
    if let (Some(dst), Some(src)) = (bytes.get_mut(..n), buf.get(at..at.saturating_add(n))) {
        dst.copy_from_slice(src);
    }
    u64::from_le_bytes(bytes)
}

const _: () = assert!(BEAT_BYTES >= 16, "a beat holds two 8 B operands");

#[cfg(test)]
mod tests {
    use super::*;

    fn at(op: AtomicOp, size: AtomicSize, operand: u64, compare: u64) -> Atomic {
        Atomic {
            op,
            size,
            operand,
            compare,
        }
    }

    #[test]
    fn attr_round_trip() {
        for op in AtomicOp::ALL {
            for size in [AtomicSize::Four, AtomicSize::Eight] {
                let a = at(op, size, 0, 0);
                assert_eq!(Atomic::decode_attr(a.attr()), Ok((op, size)));
            }
        }
        assert_eq!(
            at(AtomicOp::CompareSwap, AtomicSize::Eight, 0, 0).attr(),
            0x24
        );
        assert_eq!(
            at(AtomicOp::MaxUnsigned, AtomicSize::Four, 0, 0).attr(),
            0x90
        );
    }

    #[test]
    fn attr_errors() {
        assert_eq!(Atomic::decode_attr(0x01), Err(AtomicError::ReservedBits));
        assert_eq!(Atomic::decode_attr(0xa0), Err(AtomicError::ReservedOp(10)));
        assert_eq!(
            Atomic::decode_attr(0x08),
            Err(AtomicError::UnsupportedSize(2))
        );
        assert_eq!(
            Atomic::decode_attr(0x0c),
            Err(AtomicError::UnsupportedSize(3))
        );
    }

    #[test]
    fn operands_round_trip() {
        let a = at(
            AtomicOp::CompareSwap,
            AtomicSize::Eight,
            0x1122_3344_5566_7788,
            9,
        );
        let mut beat = [0u8; 64];
        a.encode_operands(&mut beat);
        assert_eq!(beat[0], 9);
        assert_eq!(beat[8], 0x88);
        assert_eq!(a.len_field(), 3);
        assert_eq!(Atomic::decode(a.attr(), 3, 64, &beat), Ok(a));
        assert_eq!(
            Atomic::decode(a.attr(), 3, 72, &beat),
            Err(AtomicError::Misaligned)
        );
        let b = at(AtomicOp::FetchAdd, AtomicSize::Four, 7, 0);
        assert_eq!(b.len_field(), 0);
        let mut beat = [0u8; 64];
        b.encode_operands(&mut beat);
        assert_eq!(Atomic::decode(b.attr(), 0, 4, &beat), Ok(b));
    }

    #[test]
    fn decode_errors() {
        let b = at(AtomicOp::FetchAdd, AtomicSize::Eight, 7, 0);
        let beat = [0u8; 64];
        assert_eq!(
            Atomic::decode(b.attr(), 0, 8, &beat),
            Err(AtomicError::OperandLength)
        );
        assert_eq!(
            Atomic::decode(b.attr(), 1, 8, &beat[..4]),
            Err(AtomicError::OperandLength)
        );
        assert_eq!(
            Atomic::decode(b.attr(), 1, 12, &beat),
            Err(AtomicError::Misaligned)
        );
    }

    #[test]
    fn apply_every_op() {
        use AtomicOp::*;
        use AtomicSize::*;
        let cases: &[(AtomicOp, AtomicSize, u64, u64, u64, u64)] = &[
            // op, size, old, operand, compare, new
            (FetchAdd, Four, 0xffff_ffff, 2, 0, 1),
            (FetchAdd, Eight, u64::MAX, 2, 0, 1),
            (Swap, Four, 5, 0x1_0000_0009, 0, 9),
            (CompareSwap, Eight, 5, 6, 5, 6),
            (CompareSwap, Eight, 5, 6, 4, 5),
            (CompareSwap, Four, 5, 6, 0x1_0000_0005, 6),
            (And, Four, 0b1100, 0b1010, 0, 0b1000),
            (Or, Four, 0b1100, 0b1010, 0, 0b1110),
            (Xor, Eight, 0b1100, 0b1010, 0, 0b0110),
            (MinSigned, Four, 1, 0xffff_ffff, 0, 0xffff_ffff),
            (MaxSigned, Four, 1, 0xffff_ffff, 0, 1),
            (MinSigned, Eight, 1, u64::MAX, 0, u64::MAX),
            (MaxSigned, Eight, u64::MAX, 1, 0, 1),
            (MinUnsigned, Four, 1, 0xffff_ffff, 0, 1),
            (MaxUnsigned, Four, 1, 0xffff_ffff, 0, 0xffff_ffff),
            (MinUnsigned, Eight, 3, 2, 0, 2),
            (MaxUnsigned, Eight, 3, 2, 0, 3),
        ];
        for &(op, size, old, operand, compare, new) in cases {
            assert_eq!(
                at(op, size, operand, compare).apply(old),
                new,
                "{op:?} {size:?}"
            );
        }
    }

    #[test]
    fn le_helpers_bounds() {
        let mut b = [0u8; 4];
        put_le(&mut b, 2, 4, u64::MAX);
        assert_eq!(b, [0; 4]);
        assert_eq!(get_le(&b, 2, 4), 0);
        put_le(&mut b, 0, 4, 0x0102_0304);
        assert_eq!(get_le(&b, 0, 4), 0x0102_0304);
    }
}
