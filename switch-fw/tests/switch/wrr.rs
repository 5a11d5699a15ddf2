//! Weighted round robin at an egress under saturation: per-VC and per-partition shares
//! within 5 % of the weights.

use super::*;
use podlink_switch::port::PortLink;
use proptest::prelude::*;

/// Small pod variant: every remote ID goes out on trunk 4 only; partition weights given.
fn one_egress(t: &mut Tables, vw: [u8; 4], pw: [u8; 2]) -> Result<(), ConfigError> {
    t.set_num_ports(5)?;
    t.set_vc_weights(vw)?;
    for p in 0..4u16 {
        t.set_port(
            p,
            PortCfg {
                attach: Attachment::Accelerator(aid(p)),
                plane: 0,
            },
        )?;
    }
    t.set_port(
        4,
        PortCfg {
            attach: Attachment::Switch,
            plane: 1,
        },
    )?;
    for (i, w) in pw.iter().enumerate() {
        let idx = t.add_partition(PartitionCfg {
            id: PartitionId::new(20 + i as u16).unwrap(),
            weight: *w,
            rate_cap: None,
        })?;
        for x in [2 * i as u16, 2 * i as u16 + 1, 100 + 100 * i as u16] {
            t.add_member(idx, aid(x))?;
        }
    }
    for p in 0..4u16 {
        t.set_route(aid(p), &[p])?;
    }
    t.set_route(aid(100), &[4])?;
    t.set_route(aid(200), &[4])?;
    Ok(())
}

/// Class (vc, partition) → a frame from accelerator 0 or 2 to 100 or 200.
fn class_frame(handle: u32, v: u8, part: usize) -> (u8, Frame) {
    let (src, dst) = if part == 0 { (0u16, 100u16) } else { (2, 200) };
    (
        src as u8,
        frame(handle, Header::response(Some(aid(src)), aid(dst), vc(v))),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn prop_wrr_shares_under_saturation(vw in proptest::array::uniform4(1u8..=8), pw in proptest::array::uniform2(1u8..=8)) {
        let mut sw = Box::new(Switch::new());
        sw.stage_with(|t| one_egress(t, vw, pw)).unwrap();
        sw.commit().unwrap();
        let mut ports = vec![SimPort::up_with_credits(0); 5];
        for p in ports.iter_mut().take(4) { *p = SimPort::up_with_credits(1_000_000); }
        for (p, l) in ports.iter().enumerate() { sw.refresh_port(p as u16, l); }
        // Backlog every class (15 responses each: responses going up, as these are, are
        // queued only while fewer than RESPONSE_RESERVE - UPLINK_RESPONSE_RESERVE = 192 are).
        let mut handle = 0u32;
        for v in 0..4u8 {
            for part in 0..2usize {
                for _ in 0..15 {
                    handle += 1;
                    let (ing, f) = class_frame(handle, v, part);
                    sw.forward(t(1), ing.into(), f, &mut ports).unwrap();
                }
            }
        }
        for v in 0..4 { ports[4].grant(vc(v), 1_000_000); }
        sw.refresh_port(4, &ports[4]);
        let sum_v: u32 = vw.iter().map(|&w| u32::from(w)).sum();
        let sum_p: u32 = pw.iter().map(|&w| u32::from(w)).sum();
        let round = sum_v * sum_p;
        let k = round * (4000 / round).max(1);
        let mut count = [[0u32; 2]; 4];
        for _ in 0..k {
            let tx = sw.poll_transmit(t(2), &mut ports).expect("saturated port transmits");
            prop_assert_eq!(tx.port, 4);
            let v = tx.header.vc.get();
            let part = usize::from(tx.header.dst.get() == 200);
            count[usize::from(v)][part] += 1;
            // Keep the class backlogged (saturation).
            handle += 1;
            let (ing, f) = class_frame(handle, v, part);
            sw.forward(t(2), ing.into(), f, &mut ports).unwrap();
        }
        for v in 0..4 {
            let vc_share = f64::from(count[v][0] + count[v][1]) / f64::from(k);
            let want_v = f64::from(vw[v]) / f64::from(sum_v);
            prop_assert!((vc_share - want_v).abs() <= 0.05 * want_v, "vc {} share {} want {}", v, vc_share, want_v);
            for p in 0..2 {
                let share = f64::from(count[v][p]) / f64::from(count[v][0] + count[v][1]);
                let want = f64::from(pw[p]) / f64::from(sum_p);
                prop_assert!((share - want).abs() <= 0.05 * want, "vc {} part {} share {} want {}", v, p, share, want);
            }
        }
        prop_assert!(ports[4].tx_credits(vc(0)) < 1_000_000);
    }
}

#[test]
fn test_incast_does_not_starve_other_partition() {
    // Partition 0 floods; partition 1 sends a trickle; with equal weights partition 1 gets
    // every other slot while it has frames.
    let mut sw = Box::new(Switch::new());
    sw.stage_with(|t| one_egress(t, [1, 1, 1, 1], [1, 1]))
        .unwrap();
    sw.commit().unwrap();
    let mut ports = vec![SimPort::up_with_credits(1_000); 5];
    ports[4] = SimPort::up_with_credits(0);
    for (p, l) in ports.iter().enumerate() {
        sw.refresh_port(p as u16, l);
    }
    // (At most 192 responses going up are queued: `UPLINK_RESPONSE_RESERVE`.)
    for h in 0..100 {
        let (ing, f) = class_frame(h, 0, 0);
        sw.forward(t(1), ing.into(), f, &mut ports).unwrap();
    }
    for h in 500..510 {
        let (ing, f) = class_frame(h, 0, 1);
        sw.forward(t(1), ing.into(), f, &mut ports).unwrap();
    }
    ports[4].grant(vc(0), 20);
    sw.refresh_port(4, &ports[4]);
    let mut p1 = 0;
    for _ in 0..20 {
        let tx = sw.poll_transmit(t(2), &mut ports).unwrap();
        p1 += u32::from(tx.header.dst.get() == 200);
    }
    assert_eq!(p1, 10);
}

/// A port whose far end has response credits but no request credits (the protocol's classes).
struct ResponsesOnly(SimPort);

impl PortLink for ResponsesOnly {
    fn is_up(&self) -> bool {
        self.0.is_up()
    }
    fn tx_credits(&self, vc: Vc) -> u32 {
        self.0.tx_credits(vc)
    }
    fn try_consume_credit(&mut self, h: &Header) -> bool {
        h.kind != podlink_switch::FrameKind::Request && self.0.try_consume_credit(h)
    }
    fn stats(&self) -> podlink_switch::port::LinkStats {
        self.0.stats()
    }
}

#[test]
fn refused_pick_falls_through_to_the_other_classes() {
    let mut sw = Box::new(Switch::new());
    sw.stage_with(|t| one_egress(t, [8, 1, 1, 1], [1, 1]))
        .unwrap();
    sw.commit().unwrap();
    // Everything queues first (no credit), then trunk 4 gets credit for responses only.
    let mut ports: Vec<ResponsesOnly> = (0..5)
        .map(|_| ResponsesOnly(SimPort::up_with_credits(0)))
        .collect();
    for (p, l) in ports.iter().enumerate() {
        sw.refresh_port(p as u16, l);
    }
    let req = Header::request(aid(0), aid(100), vc(0), 0x1000);
    let rsp = Header::response(Some(aid(0)), aid(100), vc(1));
    assert!(sw.forward(t(1), 0, frame(1, req), &mut ports).is_ok());
    assert!(sw.forward(t(1), 0, frame(2, rsp), &mut ports).is_ok());
    ports[4].0.set_credits(vc(0), 4);
    ports[4].0.set_credits(vc(1), 4);
    sw.refresh_port(4, &ports[4]);
    // VC 0 (weight 8) is picked first, its request refused: the response on VC 1 goes.
    let tx = sw.poll_transmit(t(2), &mut ports).unwrap();
    assert_eq!((tx.port, tx.handle), (4, 2));
    assert!(sw.poll_transmit(t(2), &mut ports).is_none());
    assert_eq!(sw.queue_depth(4, vc(0)), 1);
}

/// A port whose transmitter may be closed: while closed it reports the link down (as the pod
/// simulator does for every port but the one pulling a frame).
struct Gated {
    port: SimPort,
    open: bool,
}

impl PortLink for Gated {
    fn is_up(&self) -> bool {
        self.open && self.port.is_up()
    }
    fn tx_credits(&self, vc: Vc) -> u32 {
        self.port.tx_credits(vc)
    }
    fn try_consume_credit(&mut self, h: &Header) -> bool {
        self.open && self.port.try_consume_credit(h)
    }
    fn stats(&self) -> podlink_switch::port::LinkStats {
        self.port.stats()
    }
}

/// `poll_transmit_port(p)` makes exactly the choices of `poll_transmit` with every port but
/// `p` closed: same frames, in the same order, on every port, across VCs, partitions and
/// credit shortages, and leaves the round robin where it would be (checked by full
/// `poll_transmit` calls in between).
#[test]
fn poll_transmit_port_is_poll_transmit_with_the_other_ports_closed() {
    let build = || {
        let mut sw = Box::new(Switch::new());
        sw.stage_with(small_pod).unwrap();
        sw.commit().unwrap();
        let ports: Vec<Gated> = (0..PORTS)
            .map(|_| Gated {
                port: SimPort::up_with_credits(3),
                open: true,
            })
            .collect();
        for (p, l) in ports.iter().enumerate() {
            sw.refresh_port(p as u16, l);
        }
        (sw, ports)
    };
    let (mut a, mut pa) = build();
    let (mut b, mut pb) = build();
    let mut x = 0x9e37_79b9u32;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    let mut sent = 0;
    for i in 0..2000u32 {
        let now = t(u64::from(i) * 10);
        let r = next();
        if r % 3 != 0 {
            // A frame between accelerators of one partition, or to a remote ID over trunks.
            let (src, dst) = match r % 5 {
                0 => (0u16, 1u16),
                1 => (1, 0),
                2 => (2, 3),
                3 => (0, 150),
                _ => (3, 250),
            };
            let h = if r & 64 == 0 {
                Header::request(
                    aid(src),
                    aid(dst),
                    vc((r >> 8) as u8 % 4),
                    u64::from(r >> 4),
                )
            } else {
                Header::response(Some(aid(src)), aid(dst), vc((r >> 8) as u8 % 4))
            };
            let fa = a.forward(now, src, frame(i, h), &mut pa);
            let fb = b.forward(now, src, frame(i, h), &mut pb);
            assert_eq!(fa, fb);
        }
        if r % 7 == 0 {
            // Credits come back on some port and VC.
            let (p, v) = ((r >> 12) as usize % PORTS, vc((r >> 16) as u8 % 4));
            pa[p].port.set_credits(v, 3);
            pb[p].port.set_credits(v, 3);
            a.refresh_port(p as u16, &pa[p]);
            b.refresh_port(p as u16, &pb[p]);
        }
        if r % 11 == 0 {
            // Now and then every port open on both: the round-robin state must agree too.
            assert_eq!(a.poll_transmit(now, &mut pa), b.poll_transmit(now, &mut pb));
        }
        let p = (next() as usize) % PORTS;
        for (q, l) in pa.iter_mut().enumerate() {
            l.open = q == p;
        }
        let ta = a.poll_transmit(now, &mut pa);
        for l in pa.iter_mut() {
            l.open = true;
        }
        let tb = b.poll_transmit_port(now, p as u16, &mut pb[p]);
        assert_eq!(ta, tb, "step {i} port {p}");
        sent += usize::from(ta.is_some());
        for q in 0..PORTS as u16 {
            for v in 0..4 {
                assert_eq!(a.queue_depth(q, vc(v)), b.queue_depth(q, vc(v)));
            }
        }
    }
    assert!(sent > 300, "{sent}");
}
