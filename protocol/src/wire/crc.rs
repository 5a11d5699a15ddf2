//! CRCs (`spec-notes/wire.md#crc`).
//!
//! * DL flit CRC: CRC-32 with the IEEE 802.3 polynomial; podlink's default algorithm is
//!   CRC-32/BZIP2 (MSB-first, init and xorout all ones), as the public model uses, over the
//!   636 bytes before it, stored big-endian. The algorithm is a parameter ([`DlCrc`]).
//! * Ethernet FCS: CRC-32/ISO-HDLC (reflected), stored little-endian.
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
    /// The CRC of `bytes`.
    pub fn checksum(self, bytes: &[u8]) -> u32 {
        #[cfg(feature = "crc-fast")]
        {
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

    #[test]
    fn selected_implementation_matches_table() {
        let data: [u8; 636] = core::array::from_fn(|i| (i * 7 + 3) as u8);
        for alg in [DlCrc::Bzip2, DlCrc::IsoHdlc] {
            for len in [0, 1, 9, 63, 64, 65, 636] {
                assert_eq!(alg.checksum(&data[..len]), alg.checksum_table(&data[..len]));
            }
        }
    }
}
