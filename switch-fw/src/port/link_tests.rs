//! Unit tests of [`LinkPort`]: two ends back to back in memory ([`crate::fabric::shuttle`]).

use super::link::set_pool;
use super::*;
use crate::fabric::shuttle;
use crate::tables::Attachment;
use podlink_protocol::flow::{CreditClass, CreditTarget, Credits};
use podlink_protocol::retry::FLIT_LEN;
use podlink_protocol::time::{Duration, Instant};
use podlink_protocol::wire::tl_pack::Transfer;
use podlink_protocol::wire::{
    AccelId, Opcode, Tag, TlField, TlUncompressedRequest, TlUncompressedResponse,
};

type P = LinkPort<8, 8, 16>;

fn id(v: u16) -> AccelId {
    AccelId::new(v).unwrap()
}

fn vc(v: u8) -> Vc {
    Vc::new(v).unwrap()
}

fn pair(grant_b: [Credits; 5]) -> (P, P) {
    let a = P::new(LinkPortConfig::new(DEVICE_TYPE_SWITCH, 900, 5, 16)).unwrap();
    let mut cfg = LinkPortConfig::new(DEVICE_TYPE_ACCELERATOR, 7, 0, 16);
    cfg.grant.capacity = grant_b;
    let b = P::new(cfg).unwrap();
    (a, b)
}

/// Shuttle flits and fire timers until both ends are quiet or `deadline`.
fn settle(
    now: &mut Instant,
    a: &mut P,
    b: &mut P,
    deadline: Instant,
    mut fault: impl FnMut(bool, &mut [u8]) -> bool,
) {
    let mut buf = [0u8; FLIT_LEN];
    for _ in 0..100_000 {
        shuttle(*now, a, b, &mut buf, 64, &mut fault);
        let next = [a.poll_timeout(), b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        match next {
            Some(t) if t <= deadline => {
                *now = (*now).max(t);
                a.handle_timeout(*now);
                b.handle_timeout(*now);
            }
            _ => return,
        }
    }
    panic!("did not settle");
}

fn up(now: &mut Instant, a: &mut P, b: &mut P) {
    a.handle_link_up(*now);
    b.handle_link_up(*now);
    let d = *now + Duration::from_us(100);
    settle(now, a, b, d, |_, _| true);
    assert!(a.is_ready() && b.is_ready());
}

fn write(src: u16, dst: u16, v: u8, tag: u16, bytes: usize) -> TlField {
    TlField::UncompressedRequest(TlUncompressedRequest {
        cmd: Opcode::WriteFull,
        vchan: vc(v),
        tag: Tag::new(tag).unwrap(),
        len: (bytes / 4 - 1) as u8,
        numbeats: (bytes.div_ceil(64) - 1) as u8,
        addr: (0x10_0000 + 256 * u64::from(tag)) >> 2,
        srcaccid: id(src),
        dstaccid: id(dst),
        ..Default::default()
    })
}

fn response(src: u16, dst: u16, v: u8, tag: u16) -> TlField {
    TlField::UncompressedResponse(TlUncompressedResponse {
        vchan: vc(v),
        tag: Tag::new(tag).unwrap(),
        rd_wr: true,
        last: true,
        srcaccid: id(src),
        dstaccid: id(dst),
        ..Default::default()
    })
}

fn pool_of(f: &TlField) -> bool {
    match f {
        TlField::UncompressedRequest(r) => r.pool,
        TlField::UncompressedResponse(r) => r.pool,
        _ => false,
    }
}

#[test]
fn test_bring_up_identity_and_initial_credits() {
    let grant = LinkPortConfig::grant_for_slots(16);
    let (mut a, mut b) = pair(grant);
    assert!(!a.is_ready() && !PortLink::is_up(&a));
    assert_eq!(a.tx_credits(vc(0)), 0);
    let mut now = Instant::from_ps(1_000);
    up(&mut now, &mut a, &mut b);
    let peer = a.peer().unwrap();
    assert_eq!(
        peer,
        PeerIdentity {
            device_type: DEVICE_TYPE_ACCELERATOR,
            device_id: 7,
            port_number: 0
        }
    );
    assert_eq!(peer.attachment(), Attachment::Accelerator(id(7)));
    assert_eq!(b.peer().unwrap().attachment(), Attachment::Switch);
    assert_eq!(b.peer().unwrap().port_number, 5);
    // a holds b's whole grant, per target and class.
    for t in CreditTarget::ALL {
        for c in CreditClass::ALL {
            let want = u32::from(grant[t.index()].get(c));
            assert_eq!(a.credit_sender().grant(t, c), want, "{t:?} {c:?}");
            assert_eq!(a.credit_sender().available(t, c), want);
        }
    }
    assert!(a.credit_sender().initial_release_complete());
    // 16 slots: 2 command credits per VC, none in the pool.
    assert_eq!(a.tx_credits(vc(3)), 4);
    assert_eq!(PortLink::stats(&a), LinkStats::default());
}

#[test]
fn test_frames_on_every_vc_and_the_pool_with_credit_returns() {
    // b grants 1 request credit (4 data) per VC and 2 in the pool.
    let mut g = [Credits([1, 1, 4, 4]); 5];
    g[4] = Credits([2, 2, 8, 8]);
    let (mut a, mut b) = pair(g);
    let mut now = Instant::from_ps(1_000);
    up(&mut now, &mut a, &mut b);
    let data: Vec<u8> = (0..=255).collect();
    let mut sent = Vec::new();
    // Two writes per VC: the first on the VC's credits, the second from the pool (only
    // two pool credits: VC 2 and 3's second writes find nothing).
    for tag in 0..8u16 {
        let v = (tag % 4) as u8;
        let f = write(7, 3, v, tag, 256);
        let r = a.send(&Transfer::new(f, &data));
        let d = now + Duration::from_us(50);
        settle(&mut now, &mut a, &mut b, d, |_, _| true);
        match tag {
            0..=3 => assert_eq!(r, Ok(CreditTarget::Vc(vc(v)))),
            4 | 5 => assert_eq!(r, Ok(CreditTarget::Shared)),
            _ => {
                assert_eq!(r, Err(SendError::NoCredit));
                continue;
            }
        }
        sent.push((f, tag >= 4));
    }
    assert_eq!(b.credit_receiver().stats().overruns, 0);
    assert_eq!(a.credit_sender().stats().credit_stalls, 2);
    let mut got = Vec::new();
    while let Some(slot) = b.next_arrival() {
        let f = b.frame(slot).unwrap().clone();
        assert_eq!(f.data(), &data[..]);
        got.push((slot, f));
    }
    assert_eq!(got.len(), 6);
    for ((_, f), (want, pool)) in got.iter().zip(&sent) {
        assert_eq!(pool_of(&f.field), *pool);
        let mut w = *want;
        set_pool(&mut w, *pool);
        assert_eq!(f.field, w);
    }
    // Release everything: every credit comes back to the target it was spent from (the
    // credit-target message tells a which), never above the grant.
    for (slot, _) in &got {
        assert!(b.release(now, *slot));
    }
    assert!(!b.release(now, got[0].0));
    let d = now + Duration::from_us(50);
    settle(&mut now, &mut a, &mut b, d, |_, _| true);
    for t in CreditTarget::ALL {
        for c in CreditClass::ALL {
            assert_eq!(
                a.credit_sender().available(t, c),
                u32::from(g[t.index()].get(c)),
                "{t:?} {c:?}"
            );
        }
    }
    assert_eq!(a.credit_sender().stats().return_above_grant, 0);
    assert_eq!(b.held_slots(), 0);
}

#[test]
fn test_switch_path_consume_then_transmit() {
    let (mut a, mut b) = pair([Credits([0, 1, 0, 0]); 5]);
    let mut now = Instant::from_ps(1_000);
    up(&mut now, &mut a, &mut b);
    let f = crate::port::RxFrame::from_transfer(&Transfer::new(response(3, 7, 2, 9), &[]));
    assert_eq!(a.transmit(&f), Err(SendError::NoGrant));
    // A request finds no request credit; a response takes VC 2's.
    assert!(!a.try_consume_credit(&Header::request(id(3), id(7), vc(2), 0)));
    let h = f.header();
    assert!(a.try_consume_credit(&h));
    // One grant at a time.
    assert!(!a.try_consume_credit(&h));
    assert_eq!(
        a.send(&Transfer::new(response(3, 7, 1, 1), &[])),
        Err(SendError::Busy)
    );
    assert_eq!(a.transmit(&f), Ok(()));
    // VC 2 spent; the pool's response credit next.
    assert!(a.try_consume_credit(&h));
    assert_eq!(a.transmit(&f), Ok(()));
    assert!(!a.try_consume_credit(&h));
    let d = now + Duration::from_us(50);
    settle(&mut now, &mut a, &mut b, d, |_, _| true);
    let s = b.next_arrival().unwrap();
    assert!(!pool_of(&b.frame(s).unwrap().field));
    let s2 = b.next_arrival().unwrap();
    assert!(pool_of(&b.frame(s2).unwrap().field));
    assert_eq!(b.next_arrival(), None);
    assert!(!a.try_consume_credit(&Header::from_tl(&TlField::FlowControl(Default::default()))));
}

#[test]
fn test_bit_errors_replay_and_show_in_stats() {
    let (mut a, mut b) = pair(LinkPortConfig::grant_for_slots(16));
    let mut now = Instant::from_ps(1_000);
    up(&mut now, &mut a, &mut b);
    let data = [0x5au8; 64];
    let mut n = 0u32;
    let mut delivered = Vec::new();
    for tag in 0..40u16 {
        let f = write(7, 3, 0, tag, 64);
        // Retry until a credit is back.
        loop {
            match a.send(&Transfer::new(f, &data)) {
                Ok(_) => break,
                Err(SendError::NoCredit | SendError::Busy) => {
                    let d = now + Duration::from_us(20);
                    settle(&mut now, &mut a, &mut b, d, |_, _| true);
                    while let Some(s) = b.next_arrival() {
                        delivered.push(b.frame(s).unwrap().field);
                        b.release(now, s);
                    }
                }
                Err(e) => panic!("{e:?}"),
            }
        }
        // Corrupt every 5th payload flit a→b (acks alone are lost without a replay).
        let d = now + Duration::from_us(20);
        settle(&mut now, &mut a, &mut b, d, |a_to_b, flit| {
            let payload =
                podlink_protocol::wire::DlFlitHeader::parse(flit).is_ok_and(|h| h.payload());
            if a_to_b && payload {
                n += 1;
                if n % 5 == 0 {
                    flit[100] ^= 0x10;
                }
            }
            true
        });
        while let Some(s) = b.next_arrival() {
            delivered.push(b.frame(s).unwrap().field);
            b.release(now, s);
        }
    }
    let want: Vec<TlField> = (0..40).map(|t| write(7, 3, 0, t, 64)).collect();
    assert_eq!(delivered, want, "exactly once, in order");
    let sb = PortLink::stats(&b);
    let sa = PortLink::stats(&a);
    assert!(sb.crc_errors > 0, "{sb:?}");
    // The sender replayed what was lost (on the receiver's Replay Request when a later flit
    // showed the gap, or on its tail-loss probe when the lost flit was the last one).
    assert!(sa.replays > 0, "{sa:?} {sb:?}");
    assert_eq!(b.credit_receiver().stats().overruns, 0);
}

#[test]
fn test_grant_larger_than_slots_is_refused() {
    let cfg = LinkPortConfig::new(DEVICE_TYPE_SWITCH, 1, 0, 32);
    let e = LinkPort::<4, 8, 16>::new(cfg).unwrap_err();
    assert_eq!(
        e,
        GrantError {
            command_credits: 32,
            slots: 16
        }
    );
    assert!(e.to_string().contains("32 command credits"));
    // The default grants: 8 slots = 1 + 1 per VC; 4 slots = all in the pool.
    assert_eq!(
        LinkPortConfig::grant_for_slots(8),
        [
            Credits([1, 1, 4, 4]),
            Credits([1, 1, 4, 4]),
            Credits([1, 1, 4, 4]),
            Credits([1, 1, 4, 4]),
            Credits::ZERO
        ]
    );
    assert_eq!(LinkPortConfig::grant_for_slots(3)[4], Credits([2, 1, 8, 4]));
}

#[test]
fn test_reset_waits_for_held_slots_before_the_new_grant() {
    let (mut a, mut b) = pair(LinkPortConfig::grant_for_slots(16));
    let mut now = Instant::from_ps(1_000);
    up(&mut now, &mut a, &mut b);
    a.send(&Transfer::new(write(7, 3, 1, 1, 64), &[1; 64]))
        .unwrap();
    let d = now + Duration::from_us(20);
    settle(&mut now, &mut a, &mut b, d, |_, _| true);
    let held = b.next_arrival().unwrap();
    // Both ends reset (after a Fault, say): b still holds a slot.
    a.reset(now);
    b.reset(now);
    assert_eq!(b.stats().resets, 1);
    a.handle_link_up(now);
    b.handle_link_up(now);
    let d = now + Duration::from_us(100);
    settle(&mut now, &mut a, &mut b, d, |_, _| true);
    // b's new grant waits for the held slot: a is not up yet.
    assert!(b.is_ready() && !a.is_ready());
    assert!(b.frame(held).is_some());
    assert!(b.release(now, held));
    let d = now + Duration::from_us(100);
    settle(&mut now, &mut a, &mut b, d, |_, _| true);
    assert!(a.is_ready());
    assert_eq!(
        a.credit_sender()
            .available(CreditTarget::Vc(vc(1)), CreditClass::ReqCmd),
        2
    );
}

#[test]
fn test_ram_of_the_firmware_port() {
    use core::mem::size_of;
    type T = LinkPort<4, 8, 8>;
    let parts = [
        (
            "UaLink<4, 8>",
            size_of::<podlink_protocol::link::UaLink<4, 8>>(),
        ),
        (
            "CreditSender",
            size_of::<podlink_protocol::flow::CreditSender>(),
        ),
        (
            "CreditReceiver",
            size_of::<podlink_protocol::flow::CreditReceiver>(),
        ),
        (
            "TlPacker<10>",
            size_of::<podlink_protocol::wire::TlPacker<10>>(),
        ),
        (
            "TlUnpacker",
            size_of::<podlink_protocol::wire::TlUnpacker>(),
        ),
        ("RxFrame", size_of::<RxFrame>()),
        ("LinkPort<4, 8, 8>", size_of::<T>()),
    ];
    for (n, s) in parts {
        println!("{n}: {s} B");
    }
    // The firmware's figure (spec-notes/switch.md#ram): keep it in view when capacities move.
    // The firmware is built without `addr-compression`; with it, a port also keeps its two
    // address caches.
    let caches = if cfg!(feature = "addr-compression") {
        2 * size_of::<Option<podlink_protocol::wire::AddrCache>>()
    } else {
        0
    };
    assert!(size_of::<T>() < 12 * 1024 + caches, "{}", size_of::<T>());
}
