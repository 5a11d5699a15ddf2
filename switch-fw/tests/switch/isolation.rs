//! Spoofed sources and cross-partition frames are dropped, counted and raised.

use super::*;
use podlink_switch::{DropReason, Event, FrameKind};
use proptest::prelude::*;

/// The reference model of the isolation rules on the small pod.
fn expected(ingress: u8, src: Option<u16>, dst: u16) -> Option<DropReason> {
    let part = |a: u16| match a {
        0 | 1 | 100..=199 => Some(0),
        2 | 3 | 200..=299 => Some(1),
        _ => None,
    };
    let src_part = match (ingress, src) {
        (0..=3, Some(s)) if s != u16::from(ingress) => return Some(DropReason::Spoofed),
        (0..=3, _) => part(u16::from(ingress)),
        (4..=7, Some(s)) if s < 4 => return Some(DropReason::Spoofed),
        (4..=7, Some(s)) => part(s),
        (4..=7, None) => part(dst),
        _ => return Some(DropReason::BadIngress),
    };
    match (src_part, part(dst)) {
        (Some(a), Some(b)) if a == b => None,
        _ => Some(DropReason::CrossPartition),
    }
}

proptest! {
    #[test]
    fn prop_isolation_matches_model(
        ingress in 0u8..10,
        src in proptest::option::weighted(0.9, prop_oneof![0u16..8, 90u16..310, 0u16..1024]),
        dst in prop_oneof![0u16..8, 90u16..310, 0u16..1024],
        request in any::<bool>(),
    ) {
        let (mut sw, mut ports) = new_switch(small_pod, 16);
        let h = match (request, src) {
            (true, Some(s)) => Header::request(aid(s), aid(dst), vc(0), 0),
            _ => Header::response(src.map(aid), aid(dst), vc(0)),
        };
        let want = expected(ingress, src, dst);
        let got = sw.forward(t(1), ingress.into(), frame(1, h), &mut ports);
        match want {
            Some(reason) => {
                prop_assert_eq!(got, Err(reason));
                let ev = sw.poll_event();
                prop_assert_eq!(ev, Some(Event::Dropped { port: ingress.into(), reason, src: h.src, dst: h.dst }));
                let c = sw.counters().total();
                prop_assert_eq!(c.spoofed, u32::from(reason == DropReason::Spoofed));
                prop_assert_eq!(c.cross_partition, u32::from(reason == DropReason::CrossPartition));
            }
            None => {
                // Permitted: routed (IDs without a route in a partition do not exist here).
                let p = got.map_err(|e| TestCaseError::fail(format!("{e:?}")))?.port();
                if dst < 4 { prop_assert_eq!(p, dst); } else { prop_assert!(TRUNKS.contains(&p)); }
            }
        }
        prop_assert_eq!(h.kind == FrameKind::Request, request && src.is_some());
    }
}

#[test]
fn test_spoof_and_partition_examples() {
    let (mut sw, mut ports) = new_switch(small_pod, 16);
    let r = sw.forward(
        t(1),
        0,
        frame(1, Header::request(aid(1), aid(0), vc(0), 0)),
        &mut ports,
    );
    assert_eq!(r, Err(DropReason::Spoofed));
    let r = sw.forward(
        t(1),
        4,
        frame(2, Header::request(aid(0), aid(1), vc(0), 0)),
        &mut ports,
    );
    assert_eq!(
        r,
        Err(DropReason::Spoofed),
        "a local accelerator's ID on a trunk"
    );
    let r = sw.forward(
        t(1),
        0,
        frame(3, Header::request(aid(0), aid(2), vc(0), 0)),
        &mut ports,
    );
    assert_eq!(r, Err(DropReason::CrossPartition));
    let r = sw.forward(
        t(1),
        0,
        frame(4, Header::request(aid(0), aid(500), vc(0), 0)),
        &mut ports,
    );
    assert_eq!(
        r,
        Err(DropReason::CrossPartition),
        "destination in no partition"
    );
    assert_eq!(sw.counters().ports[0].spoofed, 1);
    assert_eq!(sw.counters().ports[4].spoofed, 1);
    assert_eq!(sw.counters().ports[0].cross_partition, 2);
}
