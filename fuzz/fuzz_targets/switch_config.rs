//! Arbitrary bytes into the switch configuration parser: never panics; a refused
//! configuration leaves the tables in force unchanged; an accepted one re-emits to bytes
//! that parse to the same tables.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podlink_switch::config;
use podlink_switch::selftest::pod_tables;
use podlink_switch::Switch;

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
});
