//! CRCs (`spec-notes/wire.md#crc`).
//!
//! * DL flit CRC: CRC-32 with the IEEE 802.3 polynomial; podlink's default algorithm is
//!   CRC-32/BZIP2 (MSB-first, init and xorout all ones), as the public model uses, over the
//!   636 bytes before it, stored big-endian. The algorithm is a parameter ([`DlCrc`]).
//! * Ethernet FCS: CRC-32/ISO-HDLC (reflected), stored little-endian.
//!
//! Most DL flits end in zero padding (NOP TL flits). [`DlCrc::checksum_skipping_zeros`]
//! computes the same value as [`DlCrc::checksum`] without reading through it: the CRC
//! register after `n` more zero bytes is a linear function of the register before them, so
//! whole trailing blocks of [`ZERO_BLOCK`] zero bytes are applied with one precomputed table
//! lookup per register byte ([`ZeroShift`]) instead of byte by byte.
//!
//! # Fuzzing
//! Under `cfg(fuzzing)` [`verify`] accepts any CRC so that a fuzzer reaches the code behind it.

use crc::{Crc, Table, CRC_32_BZIP2, CRC_32_ISO_HDLC};

/// CRC-32/BZIP2 with a 16-way slicing table (the fast portable variant).
pub static CRC32_BZIP2: Crc<u32, Table<16>> = Crc::<u32, Table<16>>::new(&CRC_32_BZIP2);
/// CRC-32/ISO-HDLC (the Ethernet FCS) with a 16-way slicing table.
pub static CRC32_ISO_HDLC: Crc<u32, Table<16>> = Crc::<u32, Table<16>>::new(&CRC_32_ISO_HDLC);

/// Which CRC-32 a DL flit carries. The polynomial is IEEE 802.3's in both; what varies is
/// bit order, init and xorout, which the public facts leave open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DlCrc {
    /// CRC-32/BZIP2: MSB-first, init 0xFFFFFFFF, xorout 0xFFFFFFFF (the default; public model).
    #[default]
    Bzip2,
    /// CRC-32/ISO-HDLC: reflected (Ethernet's FCS algorithm).
    IsoHdlc,
}

impl DlCrc {
    /// The CRC of `bytes`. With `crc-fast`, a DL flit's 636 covered bytes under
    /// [`DlCrc::Bzip2`] take `podlink-simd-crc`'s carry-less-multiplication kernel where the
    /// CPU has it, everything else crc-fast.
    pub fn checksum(self, bytes: &[u8]) -> u32 {
        #[cfg(feature = "crc-fast")]
        {
            // A DL flit's covered bytes under the default CRC: the SIMD kernels.
            if self == DlCrc::Bzip2 {
                if let Ok(covered) = <&[u8; podlink_simd_crc::COVERED]>::try_from(bytes) {
                    if let Some(c) = podlink_simd_crc::bzip2_covered(covered) {
                        return c;
                    }
                }
            }
            let alg = match self {
                DlCrc::Bzip2 => crc_fast::CrcAlgorithm::Crc32Bzip2,
                DlCrc::IsoHdlc => crc_fast::CrcAlgorithm::Crc32IsoHdlc,
            };
            // A CRC-32 fits in the low 32 bits of crc-fast's u64 result.
            (crc_fast::checksum(alg, bytes) & 0xffff_ffff) as u32
        }
        #[cfg(not(feature = "crc-fast"))]
        {
            self.checksum_table(bytes)
        }
    }

    /// The CRC of `bytes` with the portable table-driven implementation (the `crc` crate),
    /// whatever the features.
    pub fn checksum_table(self, bytes: &[u8]) -> u32 {
        match self {
            DlCrc::Bzip2 => CRC32_BZIP2.checksum(bytes),
            DlCrc::IsoHdlc => CRC32_ISO_HDLC.checksum(bytes),
        }
    }
}

/// Bytes in a block of trailing zeros that [`DlCrc::checksum_skipping_zeros`] skips at once.
pub const ZERO_BLOCK: usize = 64;

/// Both DL CRC algorithms use an all-ones xorout (and init).
const XOROUT: u32 = 0xffff_ffff;

/// The linear map "append [`ZERO_BLOCK`] zero bytes" on a CRC-32 register, as four tables,
/// one per register byte: `apply(r) = t[0][r & 0xff] ^ t[1][(r >> 8) & 0xff] ^ ...`.
pub struct ZeroShift {
    t: [[u32; 256]; 4],
}

impl ZeroShift {
    /// One zero bit into the register: MSB-first (`reflected == false`, polynomial
    /// 0x04C11DB7) or reflected (polynomial 0xEDB88320).
    const fn step(r: u32, reflected: bool) -> u32 {
        if reflected {
            if r & 1 != 0 {
                (r >> 1) ^ 0xedb8_8320
            } else {
                r >> 1
            }
        } else if r & 0x8000_0000 != 0 {
            (r << 1) ^ 0x04c1_1db7
        } else {
            r << 1
        }
    }

    /// The tables for [`ZERO_BLOCK`] zero bytes (computed at compile time: indices are loop
    /// counters below the arrays' constant lengths, and any panic would stop the build).
    #[allow(clippy::indexing_slicing)]
    const fn new(reflected: bool) -> ZeroShift {
        // The map of each single-bit register (the map is linear: the tables XOR these).
        let mut basis = [0u32; 32];
        let mut k = 0;
        while k < 32 {
            let mut r = 1u32 << k;
            let mut n = 0;
            while n < ZERO_BLOCK * 8 {
                r = Self::step(r, reflected);
                n += 1;
            }
            basis[k] = r;
            k += 1;
        }
        let mut t = [[0u32; 256]; 4];
        let mut i = 0;
        while i < 4 {
            let mut b = 0;
            while b < 256 {
                let mut v = 0;
                let mut j = 0;
                while j < 8 {
                    if b & (1 << j) != 0 {
                        v ^= basis[8 * i + j];
                    }
                    j += 1;
                }
                t[i][b] = v;
                b += 1;
            }
            i += 1;
        }
        ZeroShift { t }
    }

    /// The register after [`ZERO_BLOCK`] zero bytes, from the register `r` before them.
    #[inline]
    #[allow(clippy::indexing_slicing)] // a byte indexes a 256-entry table
    pub fn apply(&self, r: u32) -> u32 {
        let [b0, b1, b2, b3] = r.to_le_bytes();
        let [t0, t1, t2, t3] = &self.t;
        t0[usize::from(b0)] ^ t1[usize::from(b1)] ^ t2[usize::from(b2)] ^ t3[usize::from(b3)]
    }
}

/// [`ZeroShift`] for CRC-32/BZIP2 (MSB-first register).
static ZERO_SHIFT_BZIP2: ZeroShift = ZeroShift::new(false);
/// [`ZeroShift`] for CRC-32/ISO-HDLC (reflected register).
static ZERO_SHIFT_ISO_HDLC: ZeroShift = ZeroShift::new(true);

impl DlCrc {
    /// The CRC of a DL flit's covered bytes: [`DlCrc::checksum`], through
    /// [`DlCrc::checksum_skipping_zeros`] with the table implementation (where reading
    /// padding costs about three instructions a byte) but not with `crc-fast`, whose SIMD
    /// pass over the padding costs less than the skipping (measured with callgrind on the
    /// simulator: no gain; the 636 covered bytes take `podlink-simd-crc`'s kernel there).
    #[inline]
    pub fn checksum_flit(self, bytes: &[u8]) -> u32 {
        if cfg!(feature = "crc-fast") {
            self.checksum(bytes)
        } else {
            self.checksum_skipping_zeros(bytes)
        }
    }

    /// The same value as [`DlCrc::checksum`], computed without reading through the whole
    /// [`ZERO_BLOCK`]-byte blocks of zeros that end `bytes` (blocks counted back from the
    /// end): the CRC of the bytes before them, then one table step per block.
    pub fn checksum_skipping_zeros(self, bytes: &[u8]) -> u32 {
        let mut end = bytes.len();
        let mut blocks = 0u32;
        for block in bytes.rchunks_exact(ZERO_BLOCK) {
            if block.iter().fold(0u8, |acc, &b| acc | b) != 0 {
                break;
            }
            end -= ZERO_BLOCK;
            blocks += 1;
        }
        if blocks == 0 {
            return self.checksum(bytes);
        }
        let shift = match self {
            DlCrc::Bzip2 => &ZERO_SHIFT_BZIP2,
            DlCrc::IsoHdlc => &ZERO_SHIFT_ISO_HDLC,
        };
        // The register (init and data folded in) is the CRC without its xorout.
        let mut r = self.checksum(bytes.get(..end).unwrap_or_default()) ^ XOROUT;
        for _ in 0..blocks {
            r = shift.apply(r);
        }
        r ^ XOROUT
    }
}

/// Whether `carried` is the CRC the bytes should carry (always true under `cfg(fuzzing)`).
#[inline]
pub fn verify(carried: u32, computed: u32) -> bool {
    cfg!(fuzzing) || carried == computed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_check_values() {
        assert_eq!(CRC32_BZIP2.checksum(b"123456789"), CRC_32_BZIP2.check);
        assert_eq!(CRC32_BZIP2.checksum(b"123456789"), 0xfc89_1918);
        assert_eq!(CRC32_ISO_HDLC.checksum(b"123456789"), CRC_32_ISO_HDLC.check);
        assert_eq!(CRC32_ISO_HDLC.checksum(b"123456789"), 0xcbf4_3926);
        assert_eq!(DlCrc::IsoHdlc.checksum(b"123456789"), 0xcbf4_3926);
        assert_eq!(DlCrc::Bzip2.checksum(b"123456789"), 0xfc89_1918);
    }

    const CRC_COVERED: usize = crate::wire::dl_flit::CRC_COVERED_LEN;

    #[test]
    fn selected_implementation_matches_table() {
        let data: [u8; 636] = core::array::from_fn(|i| (i * 7 + 3) as u8);
        for alg in [DlCrc::Bzip2, DlCrc::IsoHdlc] {
            for len in [0, 1, 9, 63, 64, 65, 636] {
                assert_eq!(alg.checksum(&data[..len]), alg.checksum_table(&data[..len]));
            }
        }
    }

    #[test]
    fn xorout_is_all_ones_for_both() {
        assert_eq!(CRC_32_BZIP2.xorout, XOROUT);
        assert_eq!(CRC_32_ISO_HDLC.xorout, XOROUT);
        assert_eq!(CRC_32_BZIP2.init, XOROUT);
        assert_eq!(CRC_32_ISO_HDLC.init, XOROUT);
    }

    #[test]
    fn skipping_zeros_on_edge_cases() {
        for alg in [DlCrc::Bzip2, DlCrc::IsoHdlc] {
            let zeros = [0u8; 700];
            for len in [0, 1, 63, 64, 65, 127, 128, 129, 636, 700] {
                assert_eq!(
                    alg.checksum_skipping_zeros(&zeros[..len]),
                    alg.checksum_table(&zeros[..len]),
                    "{alg:?} {len} zeros"
                );
            }
            // A flit's 636 covered bytes with 0..=9 TL flits of data, then padding, and a
            // single set bit at every position of the last blocks (a corrupted zero).
            for tl in 0..=9usize {
                let mut b = [0u8; 636];
                for (i, x) in b.iter_mut().enumerate().take(8 + 64 * tl) {
                    *x = (i as u8).wrapping_mul(31) ^ 0x5a;
                }
                assert_eq!(alg.checksum_skipping_zeros(&b), alg.checksum_table(&b));
                for pos in (8 + 64 * tl..636).step_by(7) {
                    for bit in [0x01u8, 0x80] {
                        b[pos] ^= bit;
                        assert_eq!(
                            alg.checksum_skipping_zeros(&b),
                            alg.checksum_table(&b),
                            "{alg:?} tl {tl} pos {pos}"
                        );
                        b[pos] ^= bit;
                    }
                }
            }
        }
    }

    proptest::proptest! {
        /// Equal to the plain CRC on any bytes followed by any run of zeros, with or without a
        /// stray set bit inside the zeros.
        #[test]
        fn skipping_zeros_equals_plain_crc(
            data in proptest::collection::vec(proptest::num::u8::ANY, 0..700),
            zeros in 0usize..700,
            flip in proptest::option::of((0usize..700, 0u32..8)),
            iso in proptest::bool::ANY,
        ) {
            let alg = if iso { DlCrc::IsoHdlc } else { DlCrc::Bzip2 };
            let mut b = data.clone();
            b.resize(data.len() + zeros, 0);
            if let Some((pos, bit)) = flip {
                if let Some(x) = b.get_mut(pos) {
                    *x ^= 1 << bit;
                }
            }
            proptest::prop_assert_eq!(alg.checksum_skipping_zeros(&b), alg.checksum_table(&b));
            proptest::prop_assert_eq!(alg.checksum_skipping_zeros(&b), alg.checksum(&b));
            proptest::prop_assert_eq!(alg.checksum_flit(&b), alg.checksum_table(&b));
        }

        /// A DL flit's 636 covered bytes (the length `podlink-simd-crc`'s kernel takes under
        /// `crc-fast`): data, zero padding from any point, a stray flipped bit.
        #[test]
        fn covered_bytes_equal_the_table_crc(
            data in proptest::collection::vec(proptest::num::u8::ANY, CRC_COVERED),
            zero_from in 0usize..=CRC_COVERED,
            flip in proptest::option::of((0usize..CRC_COVERED, 0u32..8)),
            iso in proptest::bool::ANY,
        ) {
            let alg = if iso { DlCrc::IsoHdlc } else { DlCrc::Bzip2 };
            let mut b = data.clone();
            b[zero_from..].fill(0);
            if let Some((pos, bit)) = flip {
                b[pos] ^= 1 << bit;
            }
            proptest::prop_assert_eq!(alg.checksum(&b), alg.checksum_table(&b));
            proptest::prop_assert_eq!(alg.checksum_flit(&b), alg.checksum_table(&b));
        }
    }
}
