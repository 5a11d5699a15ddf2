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
                        let _ = ends[e].submit_tl_flit(&[id; 64]);
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
