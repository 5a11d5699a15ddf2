//! The composed Ethernet-profile link over a faulty network wire (corruption, drops,
//! duplicates, reordering, link flaps): per VC every TL flit arrives exactly once and in
//! order, CBFC never lets a frame overrun the receiver.

use podlink_protocol::flow::cbfc::CbfcConfig;
use podlink_protocol::link::{EthLink, EthLinkConfig};
use podlink_protocol::phy::{FaultConfig, FaultInjector, Probability, Wire};
use podlink_protocol::retry::LinkState;
use podlink_protocol::testing::{EthEnd, LinkPair, PairConfig};
use podlink_protocol::time::{Duration, Instant};
use podlink_protocol::wire::eth::MAX_FRAME_LEN;
use podlink_protocol::wire::AccelId;
use proptest::prelude::*;

type End = EthEnd<8, 64, 256>;
type Pair = LinkPair<End, End, 64, MAX_FRAME_LEN>;

/// The pair holds several 4 KB frame buffers per VC: build and run it on a thread with a big
/// stack (debug builds copy it on the way into its box).
fn big_stack<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

fn id(v: u16) -> AccelId {
    AccelId::new(v).unwrap()
}

fn config(local: u16, peer: u16, max_flits: usize, limit_credits: u32) -> EthLinkConfig {
    EthLinkConfig {
        local: id(local),
        peer: id(peer),
        max_flits,
        retransmit_timeout: Duration::from_us(5),
        retransmit_limit: 64,
        cbfc: CbfcConfig {
            limit_credits,
            ..CbfcConfig::default()
        },
        ..EthLinkConfig::default()
    }
}

fn pair(
    faults: FaultConfig,
    seed: u64,
    n: u64,
    vcs: u8,
    max_flits: usize,
    credits: u32,
) -> Box<Pair> {
    let wire = |s| Wire::new(FaultInjector::new(faults, s), Duration::from_ns(200));
    let mut p = Box::new(LinkPair::new(
        EthEnd::new(
            EthLink::new(config(1, 2, max_flits, credits), Instant::ZERO),
            id(2),
            vcs,
            n,
        ),
        EthEnd::new(
            EthLink::new(config(2, 1, max_flits, credits), Instant::ZERO),
            id(1),
            vcs,
            n,
        ),
        wire(seed),
        wire(seed ^ 0x5555),
        PairConfig::ETHERNET_800G,
    ));
    p.set_link(true);
    p
}

fn finished(p: &mut Pair, n: u64) -> bool {
    let fault = p.a.link.state() == LinkState::Fault || p.b.link.state() == LinkState::Fault;
    let up = p.a.link.state() == LinkState::Up && p.b.link.state() == LinkState::Up;
    fault
        || (up
            && p.a.logs.delivered() == n
            && p.b.logs.delivered() == n
            && p.a.link.is_idle()
            && p.b.link.is_idle())
}

#[test]
fn clean_wire_full_frames() {
    big_stack(clean_wire_full_frames_body);
}

fn clean_wire_full_frames_body() {
    let n = 20_000;
    let mut p = pair(FaultConfig::default(), 1, n, 4, 64, 512);
    assert!(p.drive_until(Instant::from_ps(1_000_000_000_000), |p| finished(p, n)));
    for e in [&p.a, &p.b] {
        assert!(e.logs.is_clean());
        assert_eq!(e.logs.delivered(), n);
        let s = e.link.stats();
        assert_eq!(s.frames_resent, 0);
        assert_eq!(s.cbfc_overruns, 0);
        // Mostly full frames.
        assert!(s.flits_sent >= s.frames_sent * 32, "{s:?}");
    }
}

#[test]
fn small_credit_limit_stalls_but_never_overruns() {
    big_stack(small_credit_body);
}

fn small_credit_body() {
    let n = 3_000;
    // 20 credits of 64 B: at most one 16-flit frame in flight per VC.
    let mut p = pair(FaultConfig::default(), 2, n, 2, 16, 20);
    assert!(p.drive_until(Instant::from_ps(1_000_000_000_000), |p| finished(p, n)));
    for e in [&p.a, &p.b] {
        assert!(e.logs.is_clean());
        assert_eq!(e.logs.delivered(), n);
        assert!(e.link.stats().credit_stalls > 0);
        assert_eq!(e.link.stats().cbfc_overruns, 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, .. ProptestConfig::default() })]

    #[test]
    fn exactly_once_in_order_per_vc(
        seed in any::<u64>(),
        ber in 0.0..2e-6f64,
        drop in 0.0..0.05f64,
        dup in 0.0..0.05f64,
        delay in 0.0..0.05f64,
        vcs in 1u8..=4,
        max_flits in 1usize..=64,
        credits in 70u32..600,
        flap_at_us in prop::option::of(1u64..30),
    ) {
        let r = big_stack(move || {
            let n = 3_000;
            let faults = FaultConfig {
                bit_error_rate: Probability::from_f64(ber),
                drop_rate: Probability::from_f64(drop),
                duplicate_rate: Probability::from_f64(dup),
                delay_rate: Probability::from_f64(delay),
                max_delay: Duration::from_ns(300),
                ..FaultConfig::default()
            };
            let mut p = pair(faults, seed, n, vcs, max_flits, credits);
            let deadline = Instant::from_ps(10_000_000_000_000);
            if let Some(at) = flap_at_us {
                let at = Instant::from_ps(at * 1_000_000);
                p.drive_until(at, |p| finished(p, n));
                p.advance_to(at);
                p.set_link(false);
                p.advance_to(at + Duration::from_us(4));
                p.set_link(true);
            }
            p.drive_until(deadline, |p| finished(p, n));
            let check = |e: &End| -> Result<(), String> {
                if !e.logs.is_clean() {
                    return Err(format!("not clean: {:?}", e.logs));
                }
                if e.link.state() != LinkState::Up || e.logs.delivered() != n {
                    return Err(format!("{:?} delivered {} {:?}", e.link.state(), e.logs.delivered(), e.link.stats()));
                }
                if e.link.stats().cbfc_overruns != 0 {
                    return Err("overrun".into());
                }
                Ok(())
            };
            check(&p.a).and_then(|()| check(&p.b))
        });
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}
