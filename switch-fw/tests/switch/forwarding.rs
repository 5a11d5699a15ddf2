//! Forwarding details: hashing mode, link down, rate caps, timeouts, queue limits.

use super::*;
use podlink_switch::health::TransceiverReading;
use podlink_switch::{DropReason, Event, Forwarded, Health, QUEUE_SLOTS};
use proptest::prelude::*;

proptest! {
    #[test]
    fn prop_hash_mode_is_deterministic(src in prop_oneof![Just(0u16), Just(1)], dst in 100u16..200, region in 0u64..1_000_000, v in 0u8..4) {
        let (sw1, _) = new_switch(|t| small_pod_with(t, false, None), 8);
        let (sw2, _) = new_switch(|t| small_pod_with(t, false, None), 1000);
        let h = Header::request(aid(src), aid(dst), vc(v), region);
        let a = sw1.decide(src, &h);
        prop_assert!(a.is_ok());
        // Independent of load (credits), same for the same key.
        prop_assert_eq!(a, sw2.decide(src, &h));
        prop_assert_eq!(a, sw1.decide(src, &h));
    }
}

#[test]
fn test_hash_mode_spreads_and_avoids_degraded() {
    let (mut sw, _) = new_switch(|t| small_pod_with(t, false, None), 8);
    let mut hits = [0u32; 8];
    for r in 0..400u64 {
        let h = Header::request(aid(0), aid(150), vc(0), r * 256);
        hits[usize::from(sw.decide(0, &h).unwrap())] += 1;
    }
    for p in TRUNKS {
        assert!(hits[usize::from(p)] > 50, "{hits:?}");
    }
    sw.force_health(5, Health::Degraded);
    for r in 0..400u64 {
        let h = Header::request(aid(0), aid(150), vc(0), r * 256);
        assert_ne!(sw.decide(0, &h), Ok(5));
    }
}

/// In hashing mode a trunk flow keeps its hash way while that way is Degraded, as in adaptive
/// mode: its requests on it may still be queued there or beyond (the switch sees none of
/// their answers), and moving it to a healthy way lets the next request overtake them
/// (`podlink-sim` random pod 124556, session 32: a write took 21 µs to cross a spine link
/// at a bit error rate of 1e-4 and landed after the flow's next write, which the spine had
/// sent by the parallel link). Fresh flows from attached
/// sources still avoid it (`test_hash_mode_spreads_and_avoids_degraded`).
#[test]
fn test_hash_mode_keeps_trunk_flows_on_a_degraded_way() {
    let (mut sw, mut ports) = new_switch(|t| small_pod_with(t, false, None), 8);
    // A trunk flow (source 150, remote, entering on trunk 4) to another remote ID.
    let h = Header::request(aid(150), aid(160), vc(0), 0x3000);
    let p = sw
        .forward(t(1), 4, frame(1, h.with_tag(1)), &mut ports)
        .unwrap()
        .port();
    sw.force_health(p, Health::Degraded);
    let q = sw
        .forward(t(2), 4, frame(2, h.with_tag(2)), &mut ports)
        .unwrap()
        .port();
    assert_eq!(q, p, "the trunk flow moved off its Degraded way");
    // Failed: it moves (its queue there was flushed).
    sw.force_health(p, Health::Failed);
    let r = sw
        .forward(t(3), 4, frame(3, h.with_tag(3)), &mut ports)
        .unwrap()
        .port();
    assert_ne!(r, p);
}

#[test]
fn test_link_down_flushes_and_reroutes() {
    let (mut sw, mut ports) = new_switch(small_pod, 0);
    let h = Header::request(aid(0), aid(150), vc(2), 0);
    let p = sw.forward(t(1), 0, frame(1, h), &mut ports).unwrap().port();
    assert_eq!(sw.queue_depth(p, vc(2)), 1);
    ports[usize::from(p)].set_up(false);
    sw.refresh_port(p, &ports[usize::from(p)]);
    assert_eq!(sw.queue_depth(p, vc(2)), 0);
    let evs: Vec<Event> = core::iter::from_fn(|| sw.poll_event()).collect();
    assert!(evs.contains(&Event::LinkDown { port: p }));
    assert!(evs.contains(&Event::Flushed { port: p, frames: 1 }));
    // The flushed request is never answered; its requester gives up on it and reuses its
    // tag, which releases the flow's pin: the retry goes another way.
    let q = sw.forward(t(2), 0, frame(2, h), &mut ports).unwrap().port();
    assert_ne!(q, p);
    // All trunks down: unreachable.
    for x in TRUNKS {
        ports[usize::from(x)].set_up(false);
        sw.refresh_port(x, &ports[usize::from(x)]);
    }
    assert_eq!(
        sw.forward(t(3), 0, frame(3, h), &mut ports),
        Err(DropReason::Unreachable)
    );
    ports[usize::from(p)].set_up(true);
    sw.refresh_port(p, &ports[usize::from(p)]);
    assert!(core::iter::from_fn(|| sw.poll_event()).any(|e| e == Event::LinkUp { port: p }));
}

#[test]
fn test_rate_cap_limits_partition() {
    // Partition 1 capped at 64 B/µs with a 128 B burst; frames are 64 B.
    let cap = RateCap {
        bytes_per_us: 64,
        burst_bytes: 128,
    };
    let (mut sw, mut ports) = new_switch(|t| small_pod_with(t, true, Some(cap)), 1_000_000);
    let mut sent = 0u32;
    let mut now = t(1000);
    for i in 0..200u32 {
        let h = Header::response(Some(aid(2)), aid(3), vc(0));
        match sw.forward(now, 2, frame(i, h), &mut ports).unwrap() {
            Forwarded::CutThrough { .. } => sent += 1,
            Forwarded::Queued { .. } => {}
        }
        while sw.poll_transmit(now, &mut ports).is_some() {
            sent += 1;
        }
        now += podlink_protocol::time::Duration::from_ns(100);
    }
    // 20 µs at 64 B/µs = 20 frames, plus the burst of 2 (and the first at once).
    assert!((20..=24).contains(&sent), "sent {sent}");
    // The rest is queued; poll_timeout says when the next may leave (the health window,
    // due at once on a new switch, is closed first).
    sw.handle_timeout(now, &ports);
    let next = sw.poll_timeout();
    assert!(
        next.as_ps() > now.as_ps() - 1_000_000 && next.as_ps() <= now.as_ps() + 2_000_000,
        "{next} vs {now}"
    );
    // Partition 0 is not capped.
    let h = Header::response(Some(aid(0)), aid(1), vc(0));
    assert!(matches!(
        sw.forward(now, 0, frame(999, h), &mut ports),
        Ok(Forwarded::CutThrough { port: 1 })
    ));
}

#[test]
fn test_queue_full_and_link_local() {
    let (mut sw, mut ports) = new_switch(small_pod, 0);
    let mut full = 0;
    for i in 0..(QUEUE_SLOTS as u32 + 10) {
        let h = Header::response(Some(aid(0)), aid(1), vc(0));
        if sw.forward(t(1), 0, frame(i, h), &mut ports) == Err(DropReason::QueueFull) {
            full += 1;
        }
    }
    assert_eq!(full, 10);
    assert_eq!(sw.queued_frames() as usize, QUEUE_SLOTS);
    assert_eq!(sw.counters().ports[0].queue_full, 10);
    let fc = Header::from_tl(&podlink_protocol::wire::TlField::FlowControl(
        Default::default(),
    ));
    for _ in 0..40 {
        assert_eq!(
            sw.forward(t(1), 0, frame(1, fc), &mut ports),
            Err(DropReason::LinkLocal)
        );
    }
    // The event queue is bounded: the overflow is counted.
    assert_eq!(sw.counters().events_lost, 50 - 32);
}

#[test]
fn test_transceiver_alarm_fails_port() {
    let (mut sw, ports) = new_switch(small_pod, 8);
    sw.set_transceiver(
        6,
        TransceiverReading {
            temp_c256: 90 * 256,
            vcc_100uv: 33_000,
            rx_power_min_01uw: 5000,
            errors: 0,
        },
    );
    sw.handle_timeout(t(0), &ports);
    assert_eq!(sw.health(6), Health::Failed);
    assert_eq!(sw.health(5), Health::Healthy);
    // Spurious timeouts do nothing.
    sw.handle_timeout(t(1), &ports);
    assert_eq!(sw.poll_timeout(), t(0) + HealthPolicy::default().window);
}

use podlink_switch::HealthPolicy;

#[test]
fn test_compressed_response_without_source() {
    let (mut sw, mut ports) = new_switch(small_pod, 8);
    let h = Header::response(None, aid(1), vc(0));
    assert_eq!(
        sw.forward(t(1), 0, frame(1, h), &mut ports)
            .map(Forwarded::port),
        Ok(1)
    );
    let h = Header::response(None, aid(2), vc(0));
    assert_eq!(
        sw.forward(t(1), 0, frame(2, h), &mut ports),
        Err(DropReason::CrossPartition)
    );
}

/// A port with separate request and response credits per VC, as a UALink TL has.
#[derive(Default)]
struct FlowPort {
    req: [u32; 4],
    rsp: [u32; 4],
}

impl podlink_switch::port::PortLink for FlowPort {
    fn is_up(&self) -> bool {
        true
    }
    fn tx_credits(&self, v: podlink_protocol::wire::Vc) -> u32 {
        let i = usize::from(v.get());
        self.req[i] + self.rsp[i]
    }
    fn try_consume_credit(&mut self, h: &Header) -> bool {
        let i = usize::from(h.vc.get());
        let c = if h.kind == podlink_switch::header::FrameKind::Request {
            &mut self.req[i]
        } else {
            &mut self.rsp[i]
        };
        if *c == 0 {
            return false;
        }
        *c -= 1;
        true
    }
    fn stats(&self) -> podlink_switch::port::LinkStats {
        Default::default()
    }
}

#[test]
fn test_response_never_waits_behind_a_request() {
    // Port 1 (accelerator 1) grants no request credit: its completer is full. A response to
    // accelerator 1 queued after requests to it must still leave: responses are what let
    // completers free up, so one held behind a request can close a request/response cycle.
    let mut sw = Box::new(Switch::new());
    sw.stage_with(small_pod).unwrap();
    sw.commit().unwrap();
    let mut ports: Vec<FlowPort> = (0..PORTS)
        .map(|_| FlowPort {
            req: [0; 4],
            rsp: [0; 4],
        })
        .collect();
    for (p, link) in ports.iter().enumerate() {
        sw.refresh_port(p as u16, link);
    }
    while sw.poll_event().is_some() {}
    for i in 0..3 {
        let h = Header::request(aid(0), aid(1), vc(0), u64::from(i) * 256);
        assert_eq!(
            sw.forward(t(1), 0, frame(i, h), &mut ports),
            Ok(Forwarded::Queued { port: 1 })
        );
    }
    let rsp = Header::response(Some(aid(0)), aid(1), vc(0)).with_last(true);
    assert_eq!(
        sw.forward(t(1), 0, frame(9, rsp), &mut ports),
        Ok(Forwarded::Queued { port: 1 })
    );
    assert_eq!(sw.queue_depth(1, vc(0)), 4);
    assert!(sw.poll_transmit(t(2), &mut ports).is_none());
    // Response credit only: the response leaves, the requests stay, in order.
    ports[1].rsp[0] = 1;
    sw.refresh_port(1, &ports[1]);
    assert_eq!(
        sw.poll_transmit(t(3), &mut ports).map(|x| x.handle),
        Some(9)
    );
    assert!(sw.poll_transmit(t(3), &mut ports).is_none());
    ports[1].req[0] = 3;
    sw.refresh_port(1, &ports[1]);
    let order: Vec<u32> = core::iter::from_fn(|| sw.poll_transmit(t(4), &mut ports))
        .map(|x| x.handle)
        .collect();
    assert_eq!(order, [0, 1, 2]);
}

#[test]
fn test_requests_cannot_fill_the_switch() {
    // Requests to a port without request credit pile up; one partition stops at its dynamic
    // threshold (has_room false, forward drops as QueueFull), the other partition's requests
    // and responses are still taken.
    let (mut sw, mut ports) = new_switch(small_pod, 0);
    let mut queued = 0usize;
    let mut i = 0u32;
    loop {
        let h = Header::request(aid(0), aid(1), vc(0), u64::from(i) * 256);
        if !sw.has_room(0, &h) {
            assert_eq!(
                sw.forward(t(1), 0, frame(i, h), &mut ports),
                Err(DropReason::QueueFull)
            );
            break;
        }
        sw.forward(t(1), 0, frame(i, h), &mut ports).unwrap();
        queued += 1;
        i += 1;
        assert!(queued <= QUEUE_SLOTS);
    }
    let share = QUEUE_SLOTS - podlink_switch::RESPONSE_RESERVE;
    assert!(queued > share / 2 && queued < share, "{queued}");
    // Partition 1 (accelerators 2, 3) still gets request descriptors.
    let other = Header::request(aid(2), aid(3), vc(0), 0);
    assert!(sw.has_room(2, &other));
    assert!(sw.forward(t(1), 2, frame(9_000, other), &mut ports).is_ok());
    let rsp = Header::response(Some(aid(1)), aid(0), vc(0));
    let mut k = 0u32;
    while sw.has_room(1, &rsp) {
        assert!(sw
            .forward(t(1), 1, frame(5000 + k, rsp), &mut ports)
            .is_ok());
        k += 1;
    }
    assert!(k as usize >= podlink_switch::RESPONSE_RESERVE);
    assert_eq!(sw.queued_frames() as usize, QUEUE_SLOTS);
}

/// Requests going up (from an accelerator attached here to one attached to another switch)
/// cannot take the last `UPLINK_RESERVE` descriptors of the requests' share: a leaf full of
/// them, from both partitions, still takes requests coming down from a trunk for its own
/// accelerators (which always drain), so a spine full of requests coming down is never
/// stuck behind a leaf full of requests going up (random pod 257219 in the simulator).
/// Responses going up likewise leave `UPLINK_RESPONSE_RESERVE` descriptors to responses
/// coming down.
#[test]
fn test_frames_going_up_leave_room_for_frames_coming_down() {
    use podlink_switch::{RESPONSE_RESERVE, UPLINK_RESERVE, UPLINK_RESPONSE_RESERVE};
    // No credit anywhere: every frame queues.
    let (mut sw, mut ports) = new_switch(small_pod, 0);
    let mut handle = 0u32;
    // Queue frames of each class in turn, (ingress, frame i of the class), while any fits;
    // once none does, `forward` refuses one more of the first class. How many were queued.
    let mut fill =
        |sw: &mut Switch, ports: &mut Vec<SimPort>, classes: &[(u16, &dyn Fn(u16) -> Header)]| {
            let mut n = 0usize;
            for i in 0u16.. {
                let mut took = false;
                for (ingress, class) in classes {
                    let h = class(i);
                    if sw.has_room(*ingress, &h) {
                        handle += 1;
                        sw.forward(t(1), *ingress, frame(handle, h), ports).unwrap();
                        n += 1;
                        took = true;
                    }
                }
                if !took {
                    let (ingress, class) = classes[0];
                    handle += 1;
                    assert_eq!(
                        sw.forward(t(1), ingress, frame(handle, class(i)), ports),
                        Err(DropReason::QueueFull)
                    );
                    return n;
                }
                assert!(n <= QUEUE_SLOTS);
            }
            unreachable!()
        };
    let req =
        |src: u16, dst: u16, i: u16| Header::request(aid(src), aid(dst), vc(0), u64::from(i) * 256);
    // Requests going up, the two partitions in turn, until neither fits.
    let up = fill(
        &mut sw,
        &mut ports,
        &[
            (0, &|i| req(0, 100 + i % 100, i)),
            (2, &|i| req(2, 200 + i % 100, i)),
        ],
    );
    let share = QUEUE_SLOTS - RESPONSE_RESERVE;
    assert!(up <= share - UPLINK_RESERVE, "{up}");
    assert!(up > (share - UPLINK_RESERVE) * 3 / 4, "{up}");
    // Requests coming down from a trunk for accelerators 1 and 3 (one per partition) are
    // still taken, and so are requests between the leaf's own accelerators.
    let down = fill(
        &mut sw,
        &mut ports,
        &[
            (TRUNKS[0], &|i| req(100, 1, i)),
            (TRUNKS[1], &|i| req(200, 3, i)),
            (0, &|i| req(0, 1, i)),
        ],
    );
    assert!(down >= UPLINK_RESERVE * 3 / 4, "{up} up, {down} down");
    assert!(up + down <= share, "{up} up, {down} down");
    // Responses going up (from accelerator 0's completer to 150) are queued only while fewer
    // than RESPONSE_RESERVE - UPLINK_RESPONSE_RESERVE responses are; responses coming down
    // (from 100 to accelerator 1) take every descriptor left, at least the reserve.
    let rsp_up = fill(
        &mut sw,
        &mut ports,
        &[(0, &|_| Header::response(Some(aid(0)), aid(150), vc(0)))],
    );
    assert_eq!(rsp_up, RESPONSE_RESERVE - UPLINK_RESPONSE_RESERVE);
    let rsp_down = fill(
        &mut sw,
        &mut ports,
        &[(TRUNKS[2], &|_| {
            Header::response(Some(aid(100)), aid(1), vc(0))
        })],
    );
    assert!(rsp_down >= UPLINK_RESPONSE_RESERVE, "{rsp_down}");
    assert_eq!(usize::from(sw.queued_frames()), QUEUE_SLOTS);
    // A switch with no accelerator of its own (a spine) keeps no reserve: everything it
    // carries is on its way down.
    let spine = |t: &mut Tables| -> Result<(), ConfigError> {
        t.set_num_ports(PORTS as u16)?;
        for p in 0..PORTS as u16 {
            t.set_port(
                p,
                PortCfg {
                    attach: Attachment::Switch,
                    plane: 0,
                },
            )?;
        }
        let a = t.add_partition(PartitionCfg {
            id: PartitionId::new(10).unwrap(),
            weight: 1,
            rate_cap: None,
        })?;
        for x in 100..200 {
            t.add_member(a, aid(x))?;
            t.set_route(aid(x), &[x % 8])?;
        }
        Ok(())
    };
    let (mut sw, mut ports) = new_switch(spine, 0);
    let on_spine = fill(
        &mut sw,
        &mut ports,
        &[(0, &|i| req(100 + i % 7 * 8, 101 + i % 7 * 8, i))],
    );
    // One partition's requests alone: on a leaf, going up, fewer.
    let (mut sw, mut ports) = new_switch(small_pod, 0);
    let going_up = fill(&mut sw, &mut ports, &[(0, &|i| req(0, 100 + i % 100, i))]);
    assert!(
        going_up < on_spine,
        "{going_up} going up, {on_spine} on a spine"
    );
    assert!(going_up <= share - UPLINK_RESERVE, "{going_up}");
}

/// The residence limit: a queued frame that waits past it (here behind a VC with no credit)
/// is dropped when its turn comes instead of being sent, handed back through
/// `poll_discarded` and counted on its egress port; frames younger than the limit behind it
/// still go. A frame that reaches `forward_aged` already past the limit (it waited in the
/// ingress buffer) is dropped there, counted on its ingress. Without a limit nothing expires.
/// (Feature `residence-limit`: on in the workspace's test run, which builds the simulator.)
#[cfg(feature = "residence-limit")]
#[test]
fn test_residence_limit_drops_frames_that_waited_too_long() {
    use podlink_protocol::time::Duration;
    for limit in [Some(Duration::from_ns(1000)), None] {
        let (mut sw, mut ports) = new_switch(small_pod, 0);
        sw.set_max_residence(limit);
        assert_eq!(sw.max_residence(), limit);
        // Two writes from 0 to 1 on VC 2, queued for lack of credit at 100 ns and 900 ns.
        let h = Header::request(aid(0), aid(1), vc(2), 0);
        for (handle, at) in [(1, 100), (2, 900)] {
            let f = sw.forward(t(at), 0, frame(handle, h), &mut ports).unwrap();
            assert_eq!(f, Forwarded::Queued { port: 1 });
        }
        // Credits come back at 1,500 ns: the first waited 1,400 ns, the second 600 ns.
        ports[1].grant(vc(2), 4);
        let sent: Vec<u32> = core::iter::from_fn(|| sw.poll_transmit(t(1500), &mut ports))
            .map(|x| x.handle)
            .collect();
        let discarded: Vec<u32> = core::iter::from_fn(|| sw.poll_discarded()).collect();
        let drops: Vec<(u16, DropReason)> = core::iter::from_fn(|| sw.poll_event())
            .filter_map(|e| match e {
                Event::Dropped { port, reason, .. } => Some((port, reason)),
                _ => None,
            })
            .collect();
        // A frame that arrived at 100 ns and is forwarded at 1,500 ns (it waited at ingress).
        let late = sw.forward_aged(t(1500), t(100), 0, frame(3, h), &mut ports);
        if limit.is_some() {
            assert_eq!(sent, [2]);
            assert_eq!(discarded, [1]);
            assert_eq!(drops, [(1, DropReason::Expired)]);
            assert_eq!(sw.counters().ports[1].expired, 1);
            assert_eq!(late, Err(DropReason::Expired));
            assert_eq!(sw.counters().ports[0].expired, 1);
            assert_eq!(sw.counters().total().expired, 2);
        } else {
            assert_eq!(sent, [1, 2]);
            assert!(discarded.is_empty() && drops.is_empty());
            assert_eq!(late, Ok(Forwarded::CutThrough { port: 1 }));
            assert_eq!(sw.counters().total().expired, 0);
        }
        assert_eq!(sw.queued_frames(), 0);
    }
}
