//! Arbitrary bytes as a stream of TL flits into one TL unpacker: never panics; every transfer it
//! delivers has the data length its control field implies; after an error it keeps refusing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podlink_protocol::wire::{TlDataShape, TlItem, TlUnpacker};

fuzz_target!(|data: &[u8]| {
    let mut un = TlUnpacker::new();
    for chunk in data.chunks_exact(64).take(64) {
        let flit: &[u8; 64] = chunk.try_into().unwrap();
        let r = un.unpack_flit(flit, |item| {
            if let TlItem::Transfer(t) = item {
                if !t.data.is_empty() {
                    let shape = TlDataShape::of(&t.field).expect("a delivered transfer has a valid shape");
                    assert_eq!(t.data.len(), shape.bytes);
                }
            }
        });
        if r.is_err() {
            assert!(un.failed().is_some());
            assert!(un.unpack_flit(flit, |_| {}).is_err(), "errors are sticky until reset");
            un.reset();
        }
    }
});
