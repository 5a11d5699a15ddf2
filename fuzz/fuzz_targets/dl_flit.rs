//! Arbitrary bytes as one DL flit: the view, the CRC check, the header and segment-header
//! parsers and the DL messages never panic; an accepted flit re-emits to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podlink_protocol::wire::{crc::DlCrc, dl_flit::FLIT_LEN, DlFlit, DlFlitRepr, DlMessage, DlMessageSpace};

fuzz_target!(|data: &[u8]| {
    // DL messages on their own, in both spaces.
    for space in [DlMessageSpace::Standard, DlMessageSpace::Vendor] {
        if let Ok((m, used)) = DlMessage::parse_prefix(data, space) {
            let mut out = [0u8; 4 * 33];
            let n = m.emit(&mut out).expect("an accepted message re-emits");
            assert_eq!(n, used);
            assert_eq!(&out[..n], &data[..n]);
        }
    }
    let Ok(flit) = DlFlit::new_checked(data) else { return };
    for i in 0..8 {
        let _ = flit.segment_header(i);
        let _ = flit.segment(i);
    }
    let _ = flit.flit_header();
    if let Ok(repr) = DlFlitRepr::parse(&flit, DlCrc::Bzip2) {
        let mut out = [0u8; FLIT_LEN];
        out.copy_from_slice(&data[..FLIT_LEN]);
        let mut view = DlFlit::new_unchecked(&mut out[..]);
        repr.emit(&mut view, DlCrc::Bzip2).expect("an accepted flit re-emits");
        // Under cfg(fuzzing) any CRC is accepted, so compare everything but the CRC.
        assert_eq!(&out[..FLIT_LEN - 4], &data[..FLIT_LEN - 4]);
    }
});
