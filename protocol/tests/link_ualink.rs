//! The composed UALink-profile link over a faulty wire: TL flits arrive exactly once and in
//! order through packing, straddling, replay and link flaps; DL control messages complete.

use podlink_protocol::link::control::{
    ChannelCommand, ChannelResponse, ControlConfig, ControlEvent,
};
use podlink_protocol::link::{UaLink, UaLinkConfig};
use podlink_protocol::phy::{FaultConfig, FaultInjector, Probability, Wire};
use podlink_protocol::retry::{self, LinkState, FLIT_LEN};
use podlink_protocol::testing::{DeliveryLog, LinkPair, PairConfig, UaEnd};
use podlink_protocol::time::{Duration, Instant};
use proptest::prelude::*;

type End = UaEnd<64, 64>;
type Pair = LinkPair<End, End, 256, FLIT_LEN>;

fn config(id: u16, port: u16) -> UaLinkConfig {
    UaLinkConfig {
        retry: retry::Config {
            ack_timeout: Duration::from_us(5),
            ack_timeout_replays: 16,
            ..retry::Config::default()
        },
        control: ControlConfig {
            device_id: id,
            port_number: port,
            tl_rate: 800,
            ..ControlConfig::default()
        },
        ..UaLinkConfig::default()
    }
}

fn pair(faults: FaultConfig, seed: u64, n: u64, latency: Duration) -> Box<Pair> {
    let wire = |s| Wire::new(FaultInjector::new(faults, s), latency);
    let mut p = Box::new(LinkPair::new(
        UaEnd::new(UaLink::new(config(3, 17)), n),
        UaEnd::new(UaLink::new(config(5, 42)), n),
        wire(seed),
        wire(seed.wrapping_add(1)),
        PairConfig::default(),
    ));
    p.set_link(true);
    p
}

fn finished(p: &mut Pair, n: u64) -> bool {
    let fault = p.a.link.state() == LinkState::Fault || p.b.link.state() == LinkState::Fault;
    let up = p.a.link.state() == LinkState::Up && p.b.link.state() == LinkState::Up;
    fault
        || (up
            && p.a.log.delivered == n
            && p.b.log.delivered == n
            && p.a.link.is_idle()
            && p.b.link.is_idle())
}

#[test]
fn clean_link_identifies_and_delivers() {
    let n = 2_000;
    let mut p = pair(FaultConfig::default(), 1, n, Duration::from_ns(100));
    assert!(p.drive_until(Instant::from_ps(1_000_000_000), |p| finished(p, n)));
    for e in [&p.a, &p.b] {
        assert!(e.log.is_clean());
        assert_eq!(e.log.delivered, n);
        assert!(e.link.control().is_identified());
    }
    assert_eq!(p.a.link.control().peer_device().unwrap().id, 5);
    assert_eq!(p.b.link.control().peer_port().unwrap().port_number, 17);
    assert_eq!(p.a.link.control().peer_tl_rate(), Some(800));
    // About 9.8 TL flits per DL flit when the queue is full.
    let s = p.a.link.stats();
    assert!(
        s.dl_flits_packed * 9 <= s.tl_packed + s.tl_padding + 9 * 2,
        "{s:?}"
    );
    assert_eq!(s.unpack_errors, 0);
}

#[test]
fn channel_negotiation_over_the_link() {
    let mut p = pair(FaultConfig::default(), 2, 0, Duration::from_ns(100));
    p.drive(Instant::from_ps(2_000_000));
    let now = p.now();
    p.a.link
        .request_channel(now, 2, ChannelCommand::Online)
        .unwrap();
    p.wake();
    p.drive(now + Duration::from_us(2));
    // b's upper layer did not answer: b said "pending" within 1 µs, a is waiting.
    assert_eq!(p.b.link.control().stats().auto_pending, 1);
    let now = p.now();
    p.b.link.respond_channel(now, ChannelResponse::Ack).unwrap();
    p.wake();
    p.drive(now + Duration::from_us(2));
    let answered: Vec<_> =
        p.a.control_log
            .iter()
            .filter_map(|e| match e {
                ControlEvent::ChannelAnswered { response, .. } => Some(*response),
                _ => None,
            })
            .collect();
    assert_eq!(answered, [ChannelResponse::Pending, ChannelResponse::Ack]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, .. ProptestConfig::default() })]

    #[test]
    fn tl_flits_exactly_once_in_order(
        seed in any::<u64>(),
        ber in 0.0..1e-5f64,
        burst in 0.0..0.02f64,
        flap_at_us in prop::option::of(1u64..20),
        latency_ns in 0u64..150,
    ) {
        let n = 2_500;
        let faults = FaultConfig {
            bit_error_rate: Probability::from_f64(ber),
            burst_rate: Probability::from_f64(burst),
            burst_len: 48,
            ..FaultConfig::default()
        };
        let mut p = pair(faults, seed, n, Duration::from_ns(latency_ns));
        let deadline = Instant::from_ps(1_000_000_000_000);
        if let Some(at) = flap_at_us {
            let at = Instant::from_ps(at * 1_000_000);
            p.drive_until(at, |p| finished(p, n));
            p.advance_to(at);
            p.set_link(false);
            p.advance_to(at + Duration::from_us(3));
            p.set_link(true);
        }
        p.drive_until(deadline, |p| finished(p, n));
        for e in [&p.a, &p.b] {
            prop_assert!(e.log.is_clean(), "{:?}", e.log);
            prop_assert_eq!(e.link.state(), LinkState::Up);
            prop_assert_eq!(e.log.delivered, n);
            prop_assert_eq!(e.link.stats().unpack_errors, 0);
        }
    }
}

/// What a randomised step of the two-link harness below does.
#[derive(Debug, Clone)]
enum Step {
    /// Submit this many TL flits at end 0 or 1.
    Submit(usize, u8),
    /// Let this many picoseconds pass.
    Wait(u64),
    /// Poll end 0 or 1 for a DL flit; deliver it to the peer unless dropped or corrupted.
    Send(usize, u8),
    /// Fire expired timers of both ends.
    Timers,
    /// PHY down and up again at both ends.
    Flap,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => (0usize..2, 0u8..12).prop_map(|(e, n)| Step::Submit(e, n)),
        2 => (0u64..3_000_000).prop_map(Step::Wait),
        6 => (0usize..2, any::<u8>()).prop_map(|(e, f)| Step::Send(e, f)),
        1 => Just(Step::Timers),
        1 => Just(Step::Flap),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// `has_transmit` says exactly whether `poll_transmit` would return a flit, in every state
    /// a link reaches: bring-up, payload with straddling TL flits, due and coalesced acks,
    /// replays after lost or corrupt flits, link flaps, control messages.
    #[test]
    fn has_transmit_predicts_poll_transmit(steps in prop::collection::vec(step(), 1..400)) {
        let mut ends: [UaLink<8, 16>; 2] = [UaLink::new(config(3, 17)), UaLink::new(config(5, 42))];
        let mut now = Instant::ZERO;
        for e in ends.iter_mut() {
            e.handle_link_up(now);
        }
        let mut buf = [0u8; FLIT_LEN];
        let mut id = 0u8;
        let mut sinks = [DeliveryLog::default(), DeliveryLog::default()];
        for s in steps {
            for e in ends.iter() {
                let mut probe = e.clone();
                let want = probe.poll_transmit(now, &mut buf).is_some();
                prop_assert_eq!(e.has_transmit(), want, "{:?}", e.retry().state());
            }
            match s {
                Step::Submit(e, n) => {
                    for _ in 0..n {
                        id = id.wrapping_add(1) | 1;
                        let _ = ends[e].submit_tl_flit(now, &[id; 64]);
                    }
                }
                Step::Wait(t) => now += Duration::from_ps(t),
                Step::Send(e, fate) => {
                    if ends[e].poll_transmit(now, &mut buf).is_some() && fate % 8 != 0 {
                        if fate % 8 == 1 {
                            buf[100] ^= 1;
                        }
                        let [a, b] = &mut ends;
                        let (peer, sink) = if e == 0 { (b, &mut sinks[1]) } else { (a, &mut sinks[0]) };
                        peer.handle_flit(now, &buf, sink);
                    }
                }
                Step::Timers => {
                    for e in ends.iter_mut() {
                        e.handle_timeout(now);
                    }
                }
                Step::Flap => {
                    for e in ends.iter_mut() {
                        e.handle_link_down(now);
                        e.handle_link_up(now);
                    }
                }
            }
            for e in ends.iter_mut() {
                while e.poll_event().is_some() {}
            }
        }
    }
}

/// Two link ends joined by a wire without delay; `cut` drops everything `a` sends.
struct Hold {
    a: UaLink<32, 16>,
    b: UaLink<32, 16>,
    now: Instant,
    delivered: u64,
    sent_by_a: u64,
}

struct Count(u64);
impl podlink_protocol::link::TlSink for Count {
    fn tl_flit(&mut self, _: &[u8; 64]) {
        self.0 += 1;
    }
}

impl Hold {
    fn new(limit: Duration) -> Hold {
        let cfg = UaLinkConfig {
            hold_limit: limit,
            ..UaLinkConfig::default()
        };
        let mut h = Hold {
            a: UaLink::new(cfg),
            b: UaLink::new(cfg),
            now: Instant::ZERO,
            delivered: 0,
            sent_by_a: 0,
        };
        h.a.handle_link_up(h.now);
        h.b.handle_link_up(h.now);
        for _ in 0..100 {
            h.step(false);
        }
        assert_eq!((h.a.state(), h.b.state()), (LinkState::Up, LinkState::Up));
        h
    }

    /// 10 ns: timers, then one DL flit each way.
    fn step(&mut self, cut: bool) {
        self.now += Duration::from_ns(10);
        let now = self.now;
        for l in [&mut self.a, &mut self.b] {
            if l.poll_timeout().is_some_and(|t| t <= now) {
                l.handle_timeout(now);
            }
        }
        let mut buf = [0u8; FLIT_LEN];
        if let Some(n) = self.a.poll_transmit(now, &mut buf) {
            self.sent_by_a += 1;
            if !cut {
                let mut c = Count(0);
                self.b.handle_flit(now, &buf[..n], &mut c);
                self.delivered += c.0;
            }
        }
        if let Some(n) = self.b.poll_transmit(now, &mut buf) {
            self.a.handle_flit(now, &buf[..n], &mut Count(0));
        }
    }
}

/// A link that cannot get a TL flit acknowledged within its hold limit ends in `Fault`
/// (`Aborted`) at the first step at or after the limit, and sends nothing from then on:
/// what it held is never delivered late (`spec-notes/link.md#hold-limit`).
#[test]
fn hold_limit_ends_a_link_that_holds_a_flit_too_long() {
    let limit = Duration::from_us(2);
    let mut h = Hold::new(limit);
    let t0 = h.now;
    h.a.submit_tl_flit(t0, &[7; 64]).unwrap();
    while h.now < t0 + limit {
        assert_eq!(h.a.state(), LinkState::Up, "at {:?}", h.now);
        h.step(true);
    }
    assert_eq!(h.a.state(), LinkState::Fault);
    let faults: Vec<_> = core::iter::from_fn(|| h.a.poll_event())
        .filter_map(|e| match e {
            podlink_protocol::link::UaLinkEvent::Retry(retry::Event::Fault { reason, .. }) => {
                Some(reason)
            }
            _ => None,
        })
        .collect();
    assert_eq!(faults, [retry::FaultReason::Aborted]);
    let sent = h.sent_by_a;
    for _ in 0..100 {
        h.step(false);
    }
    assert_eq!(h.sent_by_a, sent, "a faulted link sends nothing");
    assert_eq!(h.delivered, 0);
}

/// A link that keeps delivering is never ended by its hold limit, however long it stays
/// busy: the limit runs per TL flit, from its submission to its acknowledgement. Without a
/// limit (the default), a link holds a flit as long as retry goes on.
#[test]
fn hold_limit_spares_a_busy_link_that_delivers() {
    let mut h = Hold::new(Duration::from_us(2));
    let mut submitted = 0u64;
    for _ in 0..5_000 {
        // 50 µs of traffic: a TL flit every 10 ns while there is room.
        if h.a.tx_room() > 0 {
            h.a.submit_tl_flit(h.now, &[1; 64]).unwrap();
            submitted += 1;
        }
        h.step(false);
    }
    assert_eq!(h.a.state(), LinkState::Up);
    assert!(
        h.delivered + 16 * 10 >= submitted && submitted > 4_000,
        "{} of {submitted}",
        h.delivered
    );
    let mut never = Hold::new(Duration::MAX);
    never.a.submit_tl_flit(never.now, &[7; 64]).unwrap();
    for _ in 0..2_000 {
        never.step(true);
    }
    assert_eq!(never.a.state(), LinkState::Up);
}
