//! Byte enables and the ordering region (`spec-notes/transactions.md#byte-enables`).

use crate::wire::tl_flit::{BYTE_ENABLE_LEN, MAX_DATA_LEN};

/// Requests never cross a boundary of this many bytes; it is also the ordering region.
pub const REGION_BYTES: u64 = MAX_DATA_LEN as u64;

/// Byte enables of a partial write, as carried by the byte-enable half-flit: bit `i % 8`
/// (LSB first) of byte `i / 8` enables data byte `i` of the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ByteEnables(pub [u8; BYTE_ENABLE_LEN]);

impl ByteEnables {
    /// Every byte enabled.
    pub const ALL: ByteEnables = ByteEnables([0xff; BYTE_ENABLE_LEN]);
    /// No byte enabled.
    pub const NONE: ByteEnables = ByteEnables([0; BYTE_ENABLE_LEN]);

    /// Byte `i` is enabled (false beyond 256).
    pub fn get(&self, i: usize) -> bool {
        self.0.get(i / 8).is_some_and(|b| b & (1u8 << (i % 8)) != 0)
    }

    /// Enable or disable byte `i` (ignored beyond 256).
    pub fn set(&mut self, i: usize, on: bool) {
        if let Some(b) = self.0.get_mut(i / 8) {
            let bit = 1u8 << (i % 8);
            if on {
                *b |= bit;
            } else {
                *b &= !bit;
            }
        }
    }

    /// Every one of the first `len` bytes is enabled.
    pub fn all_set(&self, len: usize) -> bool {
        let len = len.min(MAX_DATA_LEN);
        let (whole, bits) = (len / 8, len % 8);
        // Whole bytes a byte at a time, then the low `bits` bits of the next byte.
        let bytes_ok = self
            .0
            .get(..whole)
            .is_some_and(|b| b.iter().all(|&x| x == 0xff));
        let mask = (1u8 << bits).wrapping_sub(1);
        bytes_ok && (bits == 0 || self.0.get(whole).is_some_and(|&b| b & mask == mask))
    }

    /// Enables for the bytes `start..end` only.
    pub fn range(start: usize, end: usize) -> ByteEnables {
        let mut be = ByteEnables::NONE;
        let end = end.min(MAX_DATA_LEN);
        let mut i = start;
        while i < end {
            if i % 8 == 0 && i + 8 <= end {
                if let Some(b) = be.0.get_mut(i / 8) {
                    *b = 0xff;
                }
                i += 8;
            } else {
                be.set(i, true);
                i += 1;
            }
        }
        be
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::addr_cache::full_byte_enables;

    #[test]
    fn byte_enables_bits() {
        let be = ByteEnables::range(3, 10);
        assert!(!be.get(2));
        assert!(be.get(3) && be.get(9));
        assert!(!be.get(10));
        assert_eq!(be.0[0], 0b1111_1000);
        assert_eq!(be.0[1], 0b0000_0011);
        assert!(!be.get(300));
        assert!(ByteEnables::ALL.all_set(256));
        assert!(!be.all_set(4));
        let mut b = ByteEnables::NONE;
        b.set(255, true);
        b.set(400, true);
        assert!(b.get(255));
        b.set(255, false);
        assert_eq!(b, ByteEnables::NONE);
        // all_set against the bit-by-bit definition, for every length and a hole anywhere.
        for len in 0..=MAX_DATA_LEN + 8 {
            for hole in [
                None,
                Some(0),
                Some(len.saturating_sub(1)),
                Some(len / 2),
                Some(len),
            ] {
                let mut e = ByteEnables::ALL;
                if let Some(h) = hole {
                    e.set(h, false);
                }
                let want = (0..len.min(MAX_DATA_LEN)).all(|i| e.get(i));
                assert_eq!(e.all_set(len), want, "len {len} hole {hole:?}");
            }
        }
        // The same bit order as the TL flit's byte-enable half.
        assert_eq!(ByteEnables::range(0, 100).0, full_byte_enables(100));
    }
}
