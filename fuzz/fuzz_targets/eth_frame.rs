//! Arbitrary bytes as an Ethernet-profile frame: never panics; an accepted frame re-emits to
//! the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podlink_protocol::wire::{EthFrame, EthFrameRepr, EthRelHeader};

fuzz_target!(|data: &[u8]| {
    let _ = EthRelHeader::parse(data);
    let Ok(frame) = EthFrame::new_checked(data) else { return };
    let _ = frame.rel_header();
    let _ = frame.tl_flits().count();
    if let Ok(repr) = EthFrameRepr::parse(&frame) {
        let n = repr.buffer_len();
        let mut out = vec![0u8; n];
        assert_eq!(repr.emit(&mut out), Ok(n));
        assert_eq!(&out[..n - 4], &data[..n - 4]);
    }
});
