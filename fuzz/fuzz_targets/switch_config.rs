//! Arbitrary bytes into the switch configuration parser: never panics; a refused
//! configuration leaves the tables in force unchanged; an accepted one re-emits to bytes
//! that parse to the same tables. The same bytes also go into a 1024-port instance's tables
//! (format version 2 with port numbers above 255), with the same round-trip check.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podlink_switch::config;
use podlink_switch::selftest::pod_tables;
use podlink_switch::{Switch, Tables};

fuzz_target!(|data: &[u8]| {
    let mut sw = Box::new(Switch::new());
    sw.stage_with(pod_tables).expect("the self-test pod is valid");
    sw.commit().expect("staged");
    let before = sw.tables().clone();
    match sw.load_config(data) {
        Err(_) => assert!(*sw.tables() == before, "refusal changed the tables in force"),
        Ok(_) => {
            let mut buf = vec![0u8; 64 * 1024];
            let n = config::emit(sw.tables(), &mut buf).expect("accepted tables emit");
            let mut again = Box::new(Switch::new());
            again.load_config(&buf[..n]).expect("emitted configuration parses");
            assert!(again.tables() == sw.tables(), "emit/parse round trip");
        }
    }
    let mut wide = Box::new(Tables::<1024, u16>::empty());
    if config::parse_into(data, &mut wide).and_then(|()| wide.validate()).is_ok() {
        let mut buf = vec![0u8; 64 * 1024];
        let n = config::emit(&wide, &mut buf).expect("accepted wide tables emit");
        let mut again = Box::new(Tables::<1024, u16>::empty());
        config::parse_into(&buf[..n], &mut again).expect("emitted wide configuration parses");
        again.validate().expect("emitted wide configuration validates");
        assert!(again == wide, "wide emit/parse round trip");
    }
});
