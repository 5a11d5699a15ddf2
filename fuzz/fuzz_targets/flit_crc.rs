//! Arbitrary bytes as a DL flit's 636 CRC-covered bytes (cut or zero-padded to that length):
//! the CRC the simulator's build computes (`podlink-simd-crc`'s kernels under `crc-fast`,
//! which this build has through podlink-sim) equals the portable table CRC, for both DL CRCs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podlink_protocol::wire::{crc::DlCrc, dl_flit::CRC_COVERED_LEN};

fuzz_target!(|data: &[u8]| {
    let mut covered = [0u8; CRC_COVERED_LEN];
    let n = data.len().min(CRC_COVERED_LEN);
    covered[..n].copy_from_slice(&data[..n]);
    for alg in [DlCrc::Bzip2, DlCrc::IsoHdlc] {
        assert_eq!(alg.checksum(&covered), alg.checksum_table(&covered), "{alg:?}");
        assert_eq!(alg.checksum_flit(&covered), alg.checksum_table(&covered), "{alg:?}");
    }
    // The bytes as given, any length (the general path).
    assert_eq!(DlCrc::Bzip2.checksum(data), DlCrc::Bzip2.checksum_table(data));
});
