//! Arbitrary bytes into the TL control-field parser: never panics, and every accepted field
//! emits back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podlink_protocol::wire::TlField;

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = TlField::parse(data) {
        let len = f.buffer_len();
        let mut out = [0u8; 16];
        let n = f.emit(&mut out).expect("an accepted field re-emits");
        assert_eq!(n, len);
        assert_eq!(&out[..n], &data[..n], "parse then emit gives the same bytes");
        assert_eq!(TlField::parse(&out[..n]), Ok(f));
    }
});
