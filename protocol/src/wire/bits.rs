//! MSB-first bit packing shared by every bit-packed header (`spec-notes/wire.md#bit-order`).
//!
//! A header of up to 16 bytes is loaded as one big-endian integer; fields are taken from the
//! top bits down, in the order the layout lists them. The compiler folds the shifts into
//! constants, so decoding a header costs a load and a few mask-and-shift operations.

use super::{Error, Result};

/// A value that occupies a fixed-width bit field.
pub(crate) trait Field: Sized + Copy {
    /// Build from the field's bits (already masked to the width).
    fn from_bits(v: u64) -> Self;
    /// The field's bits (may exceed the width: the writer checks).
    fn to_bits(self) -> u64;
}

macro_rules! int_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            #[allow(clippy::cast_possible_truncation)]
            fn from_bits(v: u64) -> Self { v as $t }
            fn to_bits(self) -> u64 { u64::from(self) }
        }
    )*};
}
int_field!(u8, u16, u32, u64);

impl Field for bool {
    fn from_bits(v: u64) -> Self {
        v != 0
    }
    fn to_bits(self) -> u64 {
        u64::from(self)
    }
}

/// All-ones mask of `w` bits (`w` ≤ 64).
#[inline(always)]
pub(crate) const fn mask(w: u32) -> u64 {
    if w >= 64 {
        u64::MAX
    } else {
        (1u64 << w) - 1
    }
}

/// Reads fields MSB-first out of a header of `N` bytes (`N` ≤ 16).
pub(crate) struct BitReader {
    v: u128,
    pos: u32,
}

impl BitReader {
    /// A reader over the first `N` bytes of `buf`, or `Truncated`.
    #[inline(always)]
    pub(crate) fn new<const N: usize>(buf: &[u8]) -> Result<Self> {
        let bytes: &[u8; N] =
            buf.get(..N)
                .and_then(|b| b.try_into().ok())
                .ok_or(Error::Truncated {
                    needed: N,
                    got: buf.len(),
                })?;
        let mut v: u128 = 0;
        for b in bytes {
            v = (v << 8) | u128::from(*b);
        }
        Ok(BitReader {
            v,
            pos: (N as u32) * 8,
        })
    }

    /// Take the next `w` bits as a raw integer.
    #[inline(always)]
    pub(crate) fn bits(&mut self, w: u32) -> u64 {
        self.pos = self.pos.saturating_sub(w);
        ((self.v >> self.pos) as u64) & mask(w)
    }

    /// Take the next `w` bits as a typed field.
    #[inline(always)]
    pub(crate) fn take<F: Field>(&mut self, w: u32) -> F {
        F::from_bits(self.bits(w))
    }

    /// Take `w` reserved bits: an error names `what` if any is set.
    #[inline(always)]
    pub(crate) fn reserved(&mut self, w: u32, what: &'static str) -> Result<()> {
        if self.bits(w) != 0 {
            Err(Error::Reserved(what))
        } else {
            Ok(())
        }
    }
}

/// Writes fields MSB-first into a header of `N` bytes.
pub(crate) struct BitWriter {
    v: u128,
    pos: u32,
}

impl BitWriter {
    /// A writer for a header of `bits` bits.
    #[inline(always)]
    pub(crate) const fn new(bits: u32) -> Self {
        BitWriter { v: 0, pos: bits }
    }

    /// Put a raw value in the next `w` bits; `FieldRange(what)` if it does not fit.
    #[inline(always)]
    pub(crate) fn bits(&mut self, w: u32, value: u64, what: &'static str) -> Result<()> {
        if value > mask(w) {
            return Err(Error::FieldRange(what));
        }
        self.pos = self.pos.saturating_sub(w);
        self.v |= u128::from(value) << self.pos;
        Ok(())
    }

    /// Put a typed field in the next `w` bits.
    #[inline(always)]
    pub(crate) fn put<F: Field>(&mut self, w: u32, value: F, what: &'static str) -> Result<()> {
        self.bits(w, value.to_bits(), what)
    }

    /// Skip `w` reserved (zero) bits.
    #[inline(always)]
    pub(crate) fn reserved(&mut self, w: u32) {
        self.pos = self.pos.saturating_sub(w);
    }

    /// Store the header into the first `N` bytes of `buf`.
    #[inline(always)]
    pub(crate) fn finish<const N: usize>(self, buf: &mut [u8]) -> Result<usize> {
        let got = buf.len();
        let out: &mut [u8; N] = buf
            .get_mut(..N)
            .and_then(|b| b.try_into().ok())
            .ok_or(Error::BufferTooSmall { needed: N, got })?;
        let be = self.v.to_be_bytes();
        let start = 16usize.saturating_sub(N);
        if let Some(src) = be.get(start..) {
            out.copy_from_slice(src);
        }
        Ok(N)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msb_first_round_trip() {
        // DL explicit header example from protocol-facts §2: op=0 payload=1 seq=511 → 11 ff 00.
        let mut w = BitWriter::new(24);
        w.bits(3, 0, "op").unwrap();
        w.bits(1, 1, "payload").unwrap();
        w.reserved(3);
        w.bits(9, 511, "seq").unwrap();
        w.reserved(8);
        let mut buf = [0u8; 3];
        assert_eq!(w.finish::<3>(&mut buf).unwrap(), 3);
        assert_eq!(buf, [0x11, 0xff, 0x00]);
        let mut r = BitReader::new::<3>(&buf).unwrap();
        assert_eq!(r.bits(3), 0);
        assert_eq!(r.bits(1), 1);
        r.reserved(3, "rsvd").unwrap();
        assert_eq!(r.bits(9), 511);
    }

    #[test]
    fn overflow_and_truncation() {
        let mut w = BitWriter::new(8);
        assert_eq!(w.bits(3, 8, "x"), Err(Error::FieldRange("x")));
        assert!(matches!(
            BitReader::new::<4>(&[1, 2]),
            Err(Error::Truncated { needed: 4, got: 2 })
        ));
        let w = BitWriter::new(32);
        assert!(matches!(
            w.finish::<4>(&mut [0u8; 3]),
            Err(Error::BufferTooSmall { needed: 4, got: 3 })
        ));
    }
}
