//! Arbitrary bytes as a stream of DL flits into one unpacker: never panics, never holds more
//! than a partial TL flit, and an error leaves the unpacker able to go on.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podlink_protocol::wire::dl_flit::FLIT_LEN;
use podlink_protocol::wire::dl_stream::UnpackSink;
use podlink_protocol::wire::{DlFlit, DlMessage, DlUnpacker};

struct Count(usize, usize);
impl UnpackSink for Count {
    fn tl_flit(&mut self, _f: &[u8; 64]) {
        self.0 += 1;
    }
    fn message(&mut self, _m: DlMessage) {
        self.1 += 1;
    }
}

fuzz_target!(|data: &[u8]| {
    let mut un = DlUnpacker::new();
    let mut sink = Count(0, 0);
    for (i, chunk) in data.chunks_exact(FLIT_LEN).enumerate().take(32) {
        let flit = DlFlit::new_unchecked(chunk);
        if un.unpack(&flit, &mut sink).is_err() {
            if i % 2 == 0 {
                un.lose_sync();
            } else {
                un.reset();
            }
        }
        assert!(un.partial_len() < 64);
    }
});
