//! Rule-by-rule tests of [`LinkRetry`] on a hand-driven wire.

use super::machine::command_header;
use super::*;
use std::vec::Vec;

type End = LinkRetry<64>;
type Flit = [u8; FLIT_LEN];

fn t(ns: u64) -> Instant {
    Instant::from_ps(ns * 1000)
}

fn body(id: u16) -> [u8; FLIT_LEN] {
    let mut b = [0u8; FLIT_LEN];
    b[8..10].copy_from_slice(&id.to_be_bytes());
    b[635] = 0x5a;
    b
}

fn id_of(b: &[u8; FLIT_LEN]) -> u16 {
    u16::from_be_bytes([b[8], b[9]])
}

fn out(e: &mut End, now: Instant) -> Option<Flit> {
    let mut f = [0u8; FLIT_LEN];
    e.poll_transmit(now, &mut f).map(|n| {
        assert_eq!(n, FLIT_LEN);
        f
    })
}

fn deliver(e: &mut End, now: Instant, f: &Flit, got: &mut Vec<u16>) {
    if let Some(d) = e.handle_flit(now, f) {
        got.push(id_of(d.flit));
    }
}

fn events(e: &mut End) -> Vec<Event> {
    core::iter::from_fn(|| e.poll_event()).collect()
}

fn header(f: &Flit) -> DlFlitHeader {
    DlFlitHeader::parse(f).unwrap()
}

/// Bring both ends up with a NOP exchange.
fn up_pair(cfg: Config) -> (End, End) {
    let (mut a, mut b) = (End::new(cfg), End::new(cfg));
    a.handle_link_up(t(0));
    b.handle_link_up(t(0));
    let na = out(&mut a, t(0)).unwrap();
    let nb = out(&mut b, t(0)).unwrap();
    assert_eq!(
        header(&na),
        DlFlitHeader::Explicit(DlExplicitHeader::default())
    );
    assert_eq!(out(&mut a, t(0)), None);
    let mut sink = Vec::new();
    deliver(&mut a, t(1), &nb, &mut sink);
    deliver(&mut b, t(1), &na, &mut sink);
    assert!(sink.is_empty());
    assert_eq!((a.state(), b.state()), (LinkState::Up, LinkState::Up));
    // Each answers the peer's NOP with one ack; acks trigger nothing further.
    let ra = out(&mut a, t(1)).unwrap();
    let rb = out(&mut b, t(1)).unwrap();
    assert_eq!(header(&ra).op(), DlOp::Ack);
    deliver(&mut a, t(2), &rb, &mut sink);
    deliver(&mut b, t(2), &ra, &mut sink);
    assert_eq!((out(&mut a, t(2)), out(&mut b, t(2))), (None, None));
    events(&mut a);
    events(&mut b);
    (a, b)
}

/// Move flits both ways until both ends are quiet; `fault` may corrupt a flit
/// (`(from_a, index_of_flit_from_that_end)`) and returns whether to deliver it.
fn run(
    a: &mut End,
    b: &mut End,
    now: &mut Instant,
    got_a: &mut Vec<u16>,
    got_b: &mut Vec<u16>,
    mut fault: impl FnMut(bool, usize, &mut Flit) -> bool,
) {
    let (mut ia, mut ib) = (0usize, 0usize);
    for _ in 0..100_000 {
        *now = now.saturating_add(Duration::from_ps(6_400));
        a.handle_timeout(*now);
        b.handle_timeout(*now);
        let fa = out(a, *now);
        let fb = out(b, *now);
        if let Some(mut f) = fa {
            if fault(true, ia, &mut f) {
                deliver(b, *now, &f, got_b);
            }
            ia += 1;
        }
        if let Some(mut f) = fb {
            if fault(false, ib, &mut f) {
                deliver(a, *now, &f, got_a);
            }
            ib += 1;
        }
        if fa.is_none() && fb.is_none() {
            match (a.poll_timeout(), b.poll_timeout()) {
                (None, None) => return,
                (x, y) => {
                    let next = x.into_iter().chain(y).min().unwrap();
                    *now = (*now).max(next);
                }
            }
        }
    }
    panic!("did not settle");
}

fn submit_range(e: &mut End, ids: core::ops::Range<u16>) {
    for i in ids {
        e.submit(&body(i)).unwrap();
    }
}

#[test]
fn bring_up_and_in_order_delivery() {
    let (mut a, mut b) = up_pair(Config::default());
    submit_range(&mut a, 0..20);
    let (mut now, mut ga, mut gb) = (t(10), Vec::new(), Vec::new());
    run(&mut a, &mut b, &mut now, &mut ga, &mut gb, |_, _, _| true);
    assert_eq!(gb, (0..20).collect::<Vec<_>>());
    assert_eq!(a.buffered(), 0);
    assert_eq!(a.stats().flits_sent, 20);
    assert_eq!(a.stats().flits_resent, 0);
    assert_eq!(b.stats().delivered, 20);
    // 20 flits at an interval of 8: two acks by count, one by the coalescing timer.
    assert_eq!(b.stats().acks_sent, 1 + 3);
    assert_eq!(a.poll_timeout(), None);
}

#[test]
fn sequence_wraps_511_to_1() {
    let (mut a, mut b) = up_pair(Config::default());
    let (mut now, mut ga, mut gb) = (t(10), Vec::new(), Vec::new());
    for round in 0..40u16 {
        submit_range(&mut a, round * 30..round * 30 + 30);
        run(&mut a, &mut b, &mut now, &mut ga, &mut gb, |_, _, _| true);
    }
    assert_eq!(gb, (0..1200).collect::<Vec<_>>());
    // 1200 flits: 511 + 511 + 178, so the next number is 179.
    assert_eq!(a.next_submit_seq().get(), 179);
    assert_eq!(b.expected_seq().get(), 179);
}

#[test]
fn bad_crc_then_gap_requests_replay_three_times() {
    let (mut a, mut b) = up_pair(Config::default());
    submit_range(&mut a, 0..6);
    let (mut now, mut ga, mut gb) = (t(10), Vec::new(), Vec::new());
    let mut rr_copies = 0;
    let mut starts = Vec::new();
    run(
        &mut a,
        &mut b,
        &mut now,
        &mut ga,
        &mut gb,
        |from_a, i, f| {
            if from_a && i == 2 {
                f[300] ^= 1;
            }
            if from_a && f[0] >> 5 == 1 {
                starts.push(header(f));
            }
            if !from_a && header(f).op() == DlOp::ReplayRequest {
                rr_copies += 1;
            }
            true
        },
    );
    assert_eq!(gb, (0..6).collect::<Vec<_>>());
    assert_eq!(b.stats().crc_errors, 1);
    // Copies still queued when the replay arrives are dropped (this wire has no latency).
    assert!((1..=3).contains(&rr_copies));
    assert_eq!(b.stats().replay_requests_issued, 1);
    // The first resent flit is explicit, marked ReplayStart, for the flit lost (seq 3).
    assert_eq!(
        starts,
        [DlFlitHeader::Explicit(DlExplicitHeader {
            op: 1,
            payload: true,
            flit_seq_no: 3
        })]
    );
    assert_eq!(a.stats().replays, 1);
    assert_eq!(a.stats().replay_requests_ignored + 1, rr_copies);
    assert!(events(&mut a).iter().any(|e| matches!(
        e,
        Event::Replaying {
            from,
            cause: ReplayCause::ReplayRequest,
            ..
        } if from.get() == 3
    )));
}

#[test]
fn replay_request_sent_three_times() {
    let (mut a, mut b) = up_pair(Config::default());
    submit_range(&mut a, 0..4);
    let now = t(10);
    let mut sink = Vec::new();
    let _lost = out(&mut a, now).unwrap();
    let f = out(&mut a, now).unwrap();
    deliver(&mut b, now, &f, &mut sink);
    assert!(b.awaiting_replay());
    for _ in 0..3 {
        let f = out(&mut b, now).unwrap();
        assert_eq!(
            header(&f),
            DlFlitHeader::Command(DlCommandHeader {
                op: 3,
                payload: false,
                ack_req_seq: 1,
                flit_seq_lo: 1
            })
        );
    }
    assert_eq!(out(&mut b, now), None);
    // Unanswered: the request goes out again (3 more copies) after the retry interval.
    let retry = b.timer(Timer::ReplayRequestRetry).unwrap();
    assert_eq!(retry, now + Duration::from_us(1));
    b.handle_timeout(retry);
    assert_eq!(b.stats().replay_request_retries, 1);
    for _ in 0..3 {
        assert_eq!(
            header(&out(&mut b, retry).unwrap()).op(),
            DlOp::ReplayRequest
        );
    }
    assert_eq!(out(&mut b, retry), None);
    assert_eq!(b.stats().replay_requests_issued, 1);
    assert_eq!(b.stats().replay_requests_sent, 6);
}

#[test]
fn replay_requests_ignored_for_12_flits() {
    let (mut a, _) = up_pair(Config::default());
    submit_range(&mut a, 0..30);
    let now = t(10);
    for _ in 0..5 {
        out(&mut a, now).unwrap();
    }
    let rr = |s: u16| {
        let mut f = [0u8; FLIT_LEN];
        let h = command_header(RxCommand::ReplayRequest(SeqNum::new(s).unwrap()), false, 0);
        flit::emit(&mut f, &h, None, DlCrc::Bzip2).unwrap();
        f
    };
    assert!(a.handle_flit(now, &rr(2)).is_none());
    assert_eq!(a.stats().replays, 1);
    for sent in 0..12 {
        assert!(a.handle_flit(now, &rr(3)).is_none());
        assert_eq!(a.stats().replay_requests_ignored, sent + 1);
        out(&mut a, now).unwrap();
    }
    assert!(a.handle_flit(now, &rr(3)).is_none());
    assert_eq!(a.stats().replays, 2);
    // The time fallback closes the window when no flits go out.
    let now = t(20);
    assert!(a.handle_flit(now, &rr(3)).is_none());
    assert_eq!(a.stats().replay_requests_ignored, 13);
    let end = a.timer(Timer::ReplayIgnore).unwrap();
    assert_eq!(end, t(10) + Duration::from_ps(6_400 * 12));
    a.handle_timeout(end);
    assert!(a.handle_flit(end, &rr(3)).is_none());
    assert_eq!(a.stats().replays, 3);
    // A request outside the window (never sent) is ignored.
    assert!(a.handle_flit(end, &rr(40)).is_none());
    assert_eq!(a.stats().replay_requests_out_of_window, 1);
}

#[test]
fn duplicate_and_out_of_window_acks() {
    let (mut a, _) = up_pair(Config::default());
    submit_range(&mut a, 0..4);
    let now = t(10);
    for _ in 0..3 {
        out(&mut a, now).unwrap();
    }
    let ack = |s: u16| {
        let mut f = [0u8; FLIT_LEN];
        let h = command_header(RxCommand::Ack(SeqNum::new(s).unwrap()), false, 0);
        flit::emit(&mut f, &h, None, DlCrc::Bzip2).unwrap();
        f
    };
    let before = *a.stats();
    assert!(a.handle_flit(now, &ack(4)).is_none()); // buffered but never sent
    assert!(a.handle_flit(now, &ack(300)).is_none());
    assert_eq!(a.stats().acks_out_of_window, before.acks_out_of_window + 2);
    assert!(a.handle_flit(now, &ack(2)).is_none());
    assert_eq!((a.unacked(), a.buffered()), (1, 2));
    assert!(a.handle_flit(now, &ack(2)).is_none());
    assert_eq!(a.stats().acks_duplicate, before.acks_duplicate + 1);
    assert!(a.handle_flit(now, &ack(3)).is_none());
    assert_eq!((a.unacked(), a.buffered()), (0, 1));
    assert_eq!(a.timer(Timer::AckTimeout), None);
}

#[test]
fn seven_bad_crcs_make_the_receiver_ambiguous() {
    let (mut a, mut b) = up_pair(Config::default());
    submit_range(&mut a, 0..20);
    let (mut now, mut ga, mut gb) = (t(10), Vec::new(), Vec::new());
    run(
        &mut a,
        &mut b,
        &mut now,
        &mut ga,
        &mut gb,
        |from_a, i, f| {
            if from_a && (3..10).contains(&i) {
                f[10] ^= 0x80;
            }
            true
        },
    );
    assert_eq!(gb, (0..20).collect::<Vec<_>>());
    assert_eq!(b.stats().crc_errors, 7);
    assert_eq!(b.stats().ambiguous_entries, 1);
    assert!(events(&mut b)
        .iter()
        .any(|e| matches!(e, Event::Ambiguous { .. })));
    assert!(!b.is_ambiguous());
}

#[test]
fn piggybacked_commands_resolve_low_bits() {
    let cfg = Config {
        ack_interval: 1,
        ..Config::default()
    };
    let (mut a, mut b) = up_pair(cfg);
    submit_range(&mut a, 0..40);
    submit_range(&mut b, 1000..1040);
    let (mut now, mut ga, mut gb) = (t(10), Vec::new(), Vec::new());
    let mut forms = Vec::new();
    run(
        &mut a,
        &mut b,
        &mut now,
        &mut ga,
        &mut gb,
        |from_a, i, f| {
            // Corrupt a few command-form payload flits: the receiver resolves the 3-bit
            // numbers of the following ones from its anchor and the bad count.
            if from_a {
                forms.push((i, header(f)));
                if i == 7 || i == 8 || i == 20 {
                    f[200] ^= 0x10;
                }
            }
            true
        },
    );
    // Flits 8 and 9 are lost (a replay brings them back); the flit after them is still
    // identified as 10 from its low bits, so nothing is left unresolved.
    assert!(forms
        .iter()
        .any(|(i, h)| *i == 9 && h.op() == DlOp::Ack && h.payload()));
    assert_eq!(gb, (0..40).collect::<Vec<_>>());
    assert_eq!(ga, (1000..1040).collect::<Vec<_>>());
    assert_eq!(b.stats().unresolved, 0);
    assert!(b.stats().out_of_sequence >= 1);
    assert_eq!(b.stats().crc_errors, 3);
    assert!(a.stats().piggybacked > 20);
    assert!(b.stats().piggybacked > 20);
}

#[test]
fn silent_drops_alias_low_bits_so_need_explicit_numbers() {
    // A wire that loses 8 flits without a trace (a network, not a FEC'd serial link)
    // aliases the 3-bit numbers of command flits; with `piggyback` off every payload flit
    // carries its full number and the same loss is repaired exactly.
    let drops = |from_a: bool, i: usize, _: &mut Flit| !(from_a && (10..18).contains(&i));
    for piggyback in [true, false] {
        let cfg = Config {
            ack_interval: 1,
            piggyback,
            ..Config::default()
        };
        let (mut a, mut b) = up_pair(cfg);
        submit_range(&mut a, 0..40);
        submit_range(&mut b, 1000..1040);
        let (mut now, mut ga, mut gb) = (t(10), Vec::new(), Vec::new());
        run(&mut a, &mut b, &mut now, &mut ga, &mut gb, drops);
        assert_eq!(gb == (0..40).collect::<Vec<_>>(), !piggyback);
        if !piggyback {
            assert_eq!(a.stats().piggybacked, 0);
        }
    }
}

#[test]
fn replay_limit_ends_in_fault() {
    let cfg = Config {
        replay_limit: 5,
        ..Config::default()
    };
    let (mut a, mut b) = up_pair(cfg);
    submit_range(&mut a, 0..3);
    let (mut now, mut ga, mut gb) = (t(10), Vec::new(), Vec::new());
    // Every flit a sends is corrupted: b keeps asking, a keeps replaying.
    run(
        &mut a,
        &mut b,
        &mut now,
        &mut ga,
        &mut gb,
        |from_a, _, f| {
            if from_a {
                f[5] ^= 1;
            }
            true
        },
    );
    assert!(gb.is_empty());
    assert_eq!(a.state(), LinkState::Fault);
    let ev = events(&mut a);
    assert!(
        ev.contains(&Event::Fault {
            reason: FaultReason::AckTimeout,
            undelivered: 3
        }) || ev.contains(&Event::Fault {
            reason: FaultReason::ReplayLimit,
            undelivered: 3
        })
    );
    assert_eq!(a.submit(&body(9)), Err(SubmitError::Fault));
    assert_eq!(out(&mut a, now), None);
    a.reset(now);
    assert_eq!(a.state(), LinkState::Idle);
    assert_eq!(a.buffered(), 0);
}

#[test]
fn replay_limit_counts_replay_requests() {
    let cfg = Config {
        replay_limit: 3,
        tail_probe: None,
        ..Config::default()
    };
    let (mut a, _) = up_pair(cfg);
    submit_range(&mut a, 0..3);
    let mut now = t(10);
    out(&mut a, now).unwrap();
    let mut f = [0u8; FLIT_LEN];
    let h = command_header(RxCommand::ReplayRequest(SeqNum::FIRST), false, 0);
    flit::emit(&mut f, &h, None, DlCrc::Bzip2).unwrap();
    for n in 1..=4u64 {
        now += Duration::from_us(1);
        a.handle_timeout(now);
        assert!(a.handle_flit(now, &f).is_none());
        assert_eq!(a.stats().replays, n);
    }
    assert_eq!(a.state(), LinkState::Fault);
    assert!(events(&mut a).contains(&Event::Fault {
        reason: FaultReason::ReplayLimit,
        undelivered: 3
    }));
}

#[test]
fn ack_timeout_replays_then_faults() {
    let (mut a, _) = up_pair(Config {
        tail_probe: None,
        ..Config::default()
    });
    submit_range(&mut a, 0..2);
    let now = t(10);
    out(&mut a, now).unwrap();
    out(&mut a, now).unwrap();
    let dl = a.timer(Timer::AckTimeout).unwrap();
    assert_eq!(dl, now + Duration::from_ns(10_240_000));
    a.handle_timeout(Instant::from_ps(dl.as_ps() - 1)); // spurious: nothing
    assert_eq!(a.stats().ack_timeouts, 0);
    a.handle_timeout(dl);
    assert_eq!(a.stats().ack_timeouts, 1);
    let f = out(&mut a, dl).unwrap();
    assert_eq!(
        header(&f),
        DlFlitHeader::Explicit(DlExplicitHeader {
            op: 1,
            payload: true,
            flit_seq_no: 1
        })
    );
    let dl2 = a.timer(Timer::AckTimeout).unwrap();
    a.handle_timeout(dl2);
    assert_eq!(a.state(), LinkState::Fault);
    assert!(events(&mut a).contains(&Event::Fault {
        reason: FaultReason::AckTimeout,
        undelivered: 2
    }));
}

#[test]
fn link_flap_replays_unacked_without_loss_or_duplicates() {
    let (mut a, mut b) = up_pair(Config::default());
    submit_range(&mut a, 0..10);
    let mut now = t(10);
    let mut gb = Vec::new();
    // Five flits reach b, then the link drops with the rest (and b's acks) in flight.
    for _ in 0..5 {
        let f = out(&mut a, now).unwrap();
        deliver(&mut b, now, &f, &mut gb);
    }
    for _ in 0..3 {
        let _ = out(&mut a, now).unwrap();
    }
    a.handle_link_down(now);
    b.handle_link_down(now);
    assert_eq!((a.state(), b.state()), (LinkState::Idle, LinkState::Idle));
    assert_eq!(a.poll_timeout(), None);
    assert_eq!(out(&mut a, now), None);
    submit_range(&mut a, 10..12); // still accepted while down
    now += Duration::from_ms(50); // longer than the ack timeout: not a fault
    a.handle_link_up(now);
    b.handle_link_up(now);
    let mut ga = Vec::new();
    run(&mut a, &mut b, &mut now, &mut ga, &mut gb, |_, _, _| true);
    assert_eq!(gb, (0..12).collect::<Vec<_>>());
    assert_eq!(a.state(), LinkState::Up);
    // 6..=8 were lost; 1..=5 are resent only until b's ack (sent on link-up) arrives.
    assert!(a.stats().flits_resent >= 3);
    assert_eq!(b.stats().duplicates, a.stats().flits_resent - 3);
    assert!(events(&mut a).iter().any(|e| matches!(
        e,
        Event::Replaying {
            cause: ReplayCause::LinkUp,
            ..
        }
    )));
}

#[test]
fn nop_retry_until_peer_answers() {
    let cfg = Config::default();
    let (mut a, mut b) = (End::new(cfg), End::new(cfg));
    a.handle_link_up(t(0));
    let _lost = out(&mut a, t(0)).unwrap();
    assert_eq!(out(&mut a, t(0)), None);
    let retry = a.poll_timeout().unwrap();
    assert_eq!(retry, t(0) + cfg.nop_interval);
    a.handle_timeout(retry);
    let nop = out(&mut a, retry).unwrap();
    b.handle_link_up(retry);
    let nb = out(&mut b, retry).unwrap();
    let mut sink = Vec::new();
    deliver(&mut b, retry, &nop, &mut sink);
    assert_eq!(b.state(), LinkState::Up);
    deliver(&mut a, retry, &nb, &mut sink);
    assert_eq!(a.state(), LinkState::Up);
    assert_eq!(
        events(&mut a),
        [
            Event::StateChanged {
                from: LinkState::Idle,
                to: LinkState::Nop
            },
            Event::StateChanged {
                from: LinkState::Nop,
                to: LinkState::Up
            }
        ]
    );
}

#[test]
fn malformed_input_never_panics() {
    let (mut a, _) = up_pair(Config::default());
    let now = t(10);
    assert!(a.handle_flit(now, &[]).is_none());
    assert!(a.handle_flit(now, &[0u8; FLIT_LEN + 3]).is_none());
    assert_eq!(a.stats().length_errors, 2);
    // Good CRC, illegal header: reserved bits, payload with sequence 0, op 0b101, ack 0.
    let bad_headers: [[u8; 3]; 4] = [
        [0x00, 0x00, 0x01],
        [0x10, 0x00, 0x00],
        [0xb0, 0x80, 0],
        [0x40, 0, 0],
    ];
    for h in bad_headers {
        let mut f = [0u8; FLIT_LEN];
        f[..3].copy_from_slice(&h);
        let crc = DlCrc::Bzip2.checksum(&f[..crate::wire::dl_flit::CRC_COVERED_LEN]);
        f[crate::wire::dl_flit::CRC_COVERED_LEN..].copy_from_slice(&crc.to_be_bytes());
        assert!(a.handle_flit(now, &f).is_none());
    }
    assert_eq!(a.stats().header_errors, 4);
    assert_eq!(a.poll_transmit(now, &mut [0u8; 100]), None);
    assert_eq!(a.stats().tx_buffer_too_small, 1);
}

#[test]
fn full_buffer_back_pressure() {
    let mut a = LinkRetry::<2>::new(Config::default());
    a.submit(&body(0)).unwrap();
    a.submit_with(|b| b[0] = 1).unwrap();
    assert!(!a.can_submit());
    assert_eq!(a.submit(&body(2)), Err(SubmitError::Full));
    assert_eq!(a.handle_flit(t(0), &[0u8; FLIT_LEN]), None);
    assert_eq!(a.stats().rx_while_down, 1);
}

#[test]
fn empty_replays_do_not_count_toward_the_limit() {
    // An ambiguous receiver asks for the next unsent flit; a peer with nothing new to send
    // must not be driven into Fault by the request's retries.
    let cfg = Config {
        replay_limit: 2,
        ..Config::default()
    };
    let (mut a, _) = up_pair(cfg);
    submit_range(&mut a, 0..2);
    let mut now = t(10);
    out(&mut a, now).unwrap();
    out(&mut a, now).unwrap();
    let mut f = [0u8; FLIT_LEN];
    let h = command_header(RxCommand::ReplayRequest(SeqNum::new(3).unwrap()), false, 0);
    flit::emit(&mut f, &h, None, DlCrc::Bzip2).unwrap();
    for _ in 0..10 {
        now += Duration::from_us(1);
        a.handle_timeout(now);
        assert!(a.handle_flit(now, &f).is_none());
    }
    assert_eq!(a.state(), LinkState::Up);
    assert_eq!(a.stats().empty_replays, 10);
    assert_eq!(a.stats().replays, 0);
    assert_eq!(a.buffered(), 0); // the request acknowledged 1 and 2
                                 // The next new flit is explicit and marked ReplayStart.
    a.submit(&body(7)).unwrap();
    let f = out(&mut a, now).unwrap();
    assert_eq!(
        header(&f),
        DlFlitHeader::Explicit(DlExplicitHeader {
            op: 1,
            payload: true,
            flit_seq_no: 3
        })
    );
}

#[test]
fn replay_request_retries_are_capped() {
    let cfg = Config {
        replay_request_retries: 2,
        ..Config::default()
    };
    let (mut a, mut b) = up_pair(cfg);
    submit_range(&mut a, 0..3);
    let mut sink = Vec::new();
    let now = t(10);
    let _lost = out(&mut a, now).unwrap();
    let f = out(&mut a, now).unwrap();
    deliver(&mut b, now, &f, &mut sink);
    while out(&mut b, now).is_some() {}
    for _ in 0..5 {
        if let Some(d) = b.poll_timeout() {
            b.handle_timeout(d);
            while out(&mut b, d).is_some() {}
        }
    }
    assert_eq!(b.stats().replay_request_retries, 2);
    assert!(b.awaiting_replay());
}

/// The last flit of a burst is lost: no later flit shows the receiver a gap. The tail-loss
/// probe resends it after `tail_probe`; without the probe only the ack timeout does.
#[test]
fn tail_probe_resends_a_lost_last_flit() {
    for probe in [Some(Duration::from_us(2)), None] {
        let cfg = Config {
            tail_probe: probe,
            ..Config::default()
        };
        let (mut a, mut b) = up_pair(cfg);
        submit_range(&mut a, 0..3);
        let start = t(10);
        let (mut now, mut ga, mut gb) = (start, Vec::new(), Vec::new());
        run(
            &mut a,
            &mut b,
            &mut now,
            &mut ga,
            &mut gb,
            |from_a, i, _| !(from_a && i == 2),
        );
        assert_eq!(gb, [0, 1, 2], "{probe:?}");
        assert_eq!(a.buffered(), 0, "{probe:?}");
        let took = now.as_ps() - start.as_ps();
        match probe {
            Some(p) => {
                assert_eq!(a.stats().tail_probes, 1);
                assert_eq!(a.stats().ack_timeouts, 0);
                assert!(took >= p.as_ps() && took < 2 * p.as_ps(), "{took} ps");
                assert!(events(&mut a).iter().any(|e| matches!(
                    e,
                    Event::Replaying {
                        cause: ReplayCause::TailProbe,
                        ..
                    }
                )));
            }
            None => {
                assert_eq!(a.stats().tail_probes, 0);
                assert_eq!(a.stats().ack_timeouts, 1);
                assert!(took >= 10_240_000_000, "{took} ps");
            }
        }
        // Nothing armed once everything is acknowledged.
        assert_eq!(a.timer(Timer::TailProbe), None);
    }
}

/// A peer that never answers: probes back off (2, 4, 8 … µs) and do not end the link;
/// the ack timeout still does.
#[test]
fn tail_probes_back_off_and_leave_faults_to_the_ack_timeout() {
    let (mut a, _) = up_pair(Config::default());
    submit_range(&mut a, 0..1);
    let start = t(10);
    out(&mut a, start).unwrap();
    let ack_dl = a.timer(Timer::AckTimeout).unwrap();
    let mut prev = start;
    let mut waits = Vec::new();
    while let Some(p) = a.timer(Timer::TailProbe).filter(|&p| p < ack_dl) {
        waits.push((p.as_ps() - prev.as_ps()) / 1_000_000);
        a.handle_timeout(p);
        assert_eq!(a.state(), LinkState::Up);
        // The probe resends the unacknowledged flit.
        let f = out(&mut a, p).unwrap();
        assert_eq!(header(&f).op(), DlOp::ReplayStart);
        prev = p;
    }
    assert_eq!(
        waits,
        [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
    );
    assert_eq!(a.stats().tail_probes, 12);
    a.handle_timeout(ack_dl);
    assert_eq!(a.stats().ack_timeouts, 1);
    assert_eq!(a.state(), LinkState::Up);
    let f = out(&mut a, ack_dl).unwrap();
    assert_eq!(header(&f).op(), DlOp::ReplayStart);
    let dl2 = a.timer(Timer::AckTimeout).unwrap();
    a.handle_timeout(dl2);
    assert_eq!(a.state(), LinkState::Fault);
}

/// On a long link (a 5 µs round trip) the tail-loss probe waits twice the round trip plus
/// the ack delay and the Replay Request retry twice the round trip, so that neither resends
/// before an answer could come back; on a short link they keep their defaults, and a probe
/// turned off stays off.
#[test]
fn timers_follow_the_round_trip() {
    let d = Config {
        ack_delay: Duration::from_us(1),
        ..Config::default()
    };
    assert_eq!(d.for_round_trip(Duration::from_ns(400)), d);
    let long = d.for_round_trip(Duration::from_us(5));
    assert_eq!(long.tail_probe, Some(Duration::from_us(11)));
    assert_eq!(long.replay_request_retry, Some(Duration::from_us(10)));
    assert_eq!(long.ack_timeout, d.ack_timeout);
    let off = Config {
        tail_probe: None,
        ..d
    }
    .for_round_trip(Duration::from_us(5));
    assert_eq!(off.tail_probe, None);
    // Armed accordingly: a flit sent at 10 ns is probed 11 µs later, not 2 µs.
    for (cfg, wait) in [(d, 2), (long, 11)] {
        let (mut a, _) = up_pair(cfg);
        submit_range(&mut a, 0..1);
        out(&mut a, t(10)).unwrap();
        assert_eq!(
            a.timer(Timer::TailProbe),
            Some(t(10).saturating_add(Duration::from_us(wait)))
        );
    }
}

/// `next_submit_slot` names the replay slot the next submission fills, across the ring's
/// wrap, and nothing once the buffer is full.
#[test]
fn next_submit_slot_is_where_the_next_flit_goes() {
    let (mut a, mut b) = up_pair(Config::default());
    let (mut now, mut ga, mut gb) = (t(10), Vec::new(), Vec::new());
    for round in 0..3u16 {
        for i in 0..64 {
            let id = round * 64 + i;
            let before = a.next_submit_slot().map(|s| s as *const Flit);
            assert!(before.is_some(), "room for flit {id}");
            let mut filled = None;
            a.submit_with(|slot| {
                filled = Some(slot as *const Flit);
                *slot = body(id);
            })
            .unwrap();
            assert_eq!(filled, before, "flit {id}");
        }
        assert_eq!(a.next_submit_slot(), None, "full after round {round}");
        run(&mut a, &mut b, &mut now, &mut ga, &mut gb, |_, _, _| true);
        assert_eq!(a.buffered(), 0);
    }
    assert_eq!(gb.len(), 3 * 64);
}
