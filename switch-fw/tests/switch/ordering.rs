//! The ordering rule under adaptivity: requests of one (src, dst, VC, 256 B region) leave on
//! one port while any is in flight, and in arrival order.

use super::*;
use podlink_switch::Forwarded;
use proptest::prelude::*;
use std::collections::HashMap;

#[derive(Debug, Clone)]
enum Op {
    /// Request of flow `f` (0..12).
    Send(u8),
    /// The response to the oldest unanswered request of flow `f`, entering on trunk `k`;
    /// `split`: first a response field that is not the last.
    Answer(u8, u8, bool),
    /// Grant `n` credits on trunk `k` (VC of flow).
    Grant(u8, u8),
    /// Take all credits of trunk `k`.
    Starve(u8),
    /// Transmit up to `n` queued frames.
    Drain(u8),
    /// Advance time by `ns`.
    Wait(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..12).prop_map(Op::Send),
        3 => (0u8..12, 0u8..4, any::<bool>()).prop_map(|(f, k, s)| Op::Answer(f, k, s)),
        2 => (0u8..4, 1u8..8).prop_map(|(k, n)| Op::Grant(k, n)),
        1 => (0u8..4).prop_map(Op::Starve),
        2 => (1u8..8).prop_map(Op::Drain),
        1 => (1u16..5000).prop_map(Op::Wait),
    ]
}

/// Flow f: src f%2 (ports 0 and 1) → dst 100 + f/4, VC (f/2)%2, region f%3.
fn flow(f: u8) -> Header {
    Header::request(
        aid(u16::from(f % 2)),
        aid(100 + u16::from(f / 4)),
        vc((f / 2) % 2),
        u64::from(f % 3) * 256 + 17,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// "In flight" = forwarded and not yet answered: while a flow has an unanswered request,
    /// its next request leaves on the same port as its last one; queued frames of a flow
    /// leave in arrival order.
    #[test]
    fn prop_ordering_kept(ops in proptest::collection::vec(op(), 1..160)) {
        let (mut sw, mut ports) = new_switch(small_pod, 2);
        let now = &mut t(1);
        let mut handle = 0u32;
        // Model, per flow: unanswered requests and the port of its last request.
        let mut unanswered: HashMap<u8, u32> = HashMap::new();
        let mut last_port: HashMap<u8, u8> = HashMap::new();
        // Per flow, the handles queued in the switch, in arrival order.
        let mut queued: HashMap<u8, Vec<u32>> = HashMap::new();
        let mut handle_flow: HashMap<u32, u8> = HashMap::new();
        for op in ops {
            match op {
                Op::Send(f) => {
                    handle += 1;
                    let h = flow(f);
                    let r = sw.forward(*now, f % 2, frame(handle, h), &mut ports);
                    let got = r.map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
                    if unanswered.get(&f).copied().unwrap_or(0) > 0 {
                        prop_assert_eq!(Some(got.port()), last_port.get(&f).copied(),
                            "flow {} left its port with a request unanswered", f);
                        prop_assert_eq!(sw.flow_pin(&h), Some(got.port()));
                    }
                    *unanswered.entry(f).or_default() += 1;
                    last_port.insert(f, got.port());
                    if let Forwarded::Queued { .. } = got {
                        handle_flow.insert(handle, f);
                        queued.entry(f).or_default().push(handle);
                    }
                }
                Op::Answer(f, k, split) => {
                    let Some(n) = unanswered.get_mut(&f).filter(|n| **n > 0) else { continue };
                    let req = flow(f);
                    let resp = Header::response(Some(req.dst), req.src.unwrap(), req.vc);
                    let trunk = TRUNKS[usize::from(k)];
                    if split {
                        handle += 1;
                        sw.forward(*now, trunk, frame(handle, resp.with_last(false)), &mut ports)
                            .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
                    }
                    handle += 1;
                    sw.forward(*now, trunk, frame(handle, resp), &mut ports)
                        .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
                    *n -= 1;
                }
                Op::Grant(k, n) => {
                    let p = TRUNKS[usize::from(k)];
                    for v in 0..2 { ports[usize::from(p)].grant(vc(v), u32::from(n)); }
                    sw.refresh_port(p, &ports[usize::from(p)]);
                }
                Op::Starve(k) => {
                    let p = TRUNKS[usize::from(k)];
                    for v in 0..2 { ports[usize::from(p)].set_credits(vc(v), 0); }
                    sw.refresh_port(p, &ports[usize::from(p)]);
                }
                Op::Drain(n) => {
                    for _ in 0..n {
                        let Some(tx) = sw.poll_transmit(*now, &mut ports) else { break };
                        let Some(&f) = handle_flow.get(&tx.handle) else { continue };
                        let q = queued.get_mut(&f).expect("queued flow");
                        prop_assert_eq!(q.first().copied(), Some(tx.handle), "flow {} out of order", f);
                        q.remove(0);
                    }
                }
                Op::Wait(ns) => *now += podlink_protocol::time::Duration::from_ns(ns.into()),
            }
        }
        // The switch's count agrees with the model.
        for src in 0..2u16 {
            let model: u32 = unanswered.iter().filter(|(f, _)| u16::from(**f % 2) == src).map(|(_, n)| n).sum();
            prop_assert_eq!(sw.unanswered(aid(src)), model);
        }
    }
}

/// Once every request of a source is answered its pins are free: a flow whose port is now the
/// busiest moves to a less loaded one (adaptivity is regained), while one unanswered request
/// keeps it in place however long it waits.
#[test]
fn test_pin_released_by_last_response_only() {
    let (mut sw, mut ports) = new_switch(small_pod, 0);
    let h = Header::request(aid(0), aid(150), vc(0), 0x1000);
    let p = sw.forward(t(1), 0, frame(1, h), &mut ports).unwrap().port();
    // Load every other way less than p: queue frames of other flows elsewhere is not needed,
    // p already has one queued; a long wait does not release the pin.
    let q = sw
        .forward(t(1_000_000), 0, frame(2, h), &mut ports)
        .unwrap()
        .port();
    assert_eq!(q, p, "pinned while unanswered, even a millisecond later");
    assert_eq!(sw.unanswered(aid(0)), 2);
    let resp = Header::response(Some(aid(150)), aid(0), vc(0));
    // A non-last response field and a response to the other source change nothing.
    sw.forward(t(2), 4, frame(3, resp.with_last(false)), &mut ports)
        .unwrap();
    sw.forward(
        t(2),
        4,
        frame(4, Header::response(Some(aid(150)), aid(1), vc(0))),
        &mut ports,
    )
    .unwrap();
    assert_eq!(sw.unanswered(aid(0)), 2);
    sw.forward(t(2), 4, frame(5, resp), &mut ports).unwrap();
    assert_eq!(sw.flow_pin(&h), Some(p), "one request still unanswered");
    assert_eq!(
        sw.forward(t(3), 0, frame(6, h), &mut ports).unwrap().port(),
        p
    );
    sw.forward(t(4), 4, frame(7, resp), &mut ports).unwrap();
    sw.forward(t(4), 4, frame(8, resp), &mut ports).unwrap();
    assert_eq!(sw.unanswered(aid(0)), 0);
    assert_eq!(sw.flow_pin(&h), None, "all answered: pin free");
    // p holds three queued frames, the other ways none: the flow now moves.
    assert_ne!(
        sw.forward(t(5), 0, frame(9, h), &mut ports).unwrap().port(),
        p
    );
}

/// Requests from a trunk (sources attached elsewhere, whose answers need not pass here) go by
/// their flow's hash: same flow, same port, whatever the load.
#[test]
fn test_trunk_requests_hashed() {
    // 110 and 120 are both remote (routed over the four trunks), as at a spine.
    let (mut sw, mut ports) = new_switch(small_pod, 0);
    let h = Header::request(aid(110), aid(120), vc(0), 0x40);
    let p = sw.forward(t(1), 4, frame(1, h), &mut ports).unwrap().port();
    for i in 0..20 {
        assert_eq!(
            sw.forward(t(1), 4, frame(2 + i, h), &mut ports)
                .unwrap()
                .port(),
            p
        );
    }
    assert_eq!(sw.flow_pin(&h), None, "no pin state for trunk sources");
}

#[test]
fn test_adaptive_spreads_new_flows() {
    // Different regions are different flows: with equal credits they are spread by load.
    let (mut sw, mut ports) = new_switch(small_pod, 0);
    let mut used = std::collections::HashSet::new();
    for r in 0..8u64 {
        let h = Header::request(aid(0), aid(150), vc(0), r * 256);
        used.insert(
            sw.forward(t(1), 0, frame(r as u32, h), &mut ports)
                .unwrap()
                .port(),
        );
    }
    assert_eq!(
        used.len(),
        4,
        "queue depth spreads flows over all ways: {used:?}"
    );
}

/// The pin table is direct-mapped with exact keys: a flow whose slot is held by another live
/// flow goes by hash on its own ways (never the other flow's port, found by podlink-sim:
/// requests for one accelerator were executed by another), and so does every unpinned flow of
/// that source until all its requests are answered.
#[test]
fn test_colliding_flows_keep_order() {
    let (mut sw, mut ports) = new_switch(small_pod, 0);
    let h1 = Header::request(aid(0), aid(1), vc(0), 0);
    assert_eq!(
        sw.forward(t(1), 0, frame(1, h1), &mut ports)
            .unwrap()
            .port(),
        1
    );
    let slot = sw.flow_slot(&h1);
    let h2 = (100u16..200)
        .flat_map(|d| (0..64u64).map(move |r| Header::request(aid(0), aid(d), vc(0), r * 256)))
        .find(|h| sw.flow_slot(h) == slot)
        .expect("a colliding flow");
    // Its decision is a hash over its own ways, stable whatever the load.
    let p = sw.decide(0, &h2).unwrap();
    assert!(TRUNKS.contains(&p));
    for i in 0..6 {
        assert_eq!(
            sw.forward(t(2), 0, frame(10 + i, h2), &mut ports)
                .unwrap()
                .port(),
            p
        );
    }
    assert_eq!(sw.flow_pin(&h1), Some(1), "the first flow keeps its pin");
    assert_eq!(sw.flow_pin(&h2), None);
    // Another flow of the same source, slot free, also goes by hash in this epoch.
    let h3 = Header::request(aid(0), aid(160), vc(1), 0x7700);
    assert_ne!(sw.flow_slot(&h3), slot);
    let p3 = sw.decide(0, &h3).unwrap();
    for i in 0..4 {
        assert_eq!(
            sw.forward(t(3), 0, frame(20 + i, h3), &mut ports)
                .unwrap()
                .port(),
            p3
        );
    }
}
