//! Link-level retry over a faulty wire: every submitted flit is delivered exactly once and in
//! order, or the link reports Fault (never a silent loss), for seeds and fault mixes.

use podlink_protocol::phy::{FaultConfig, FaultInjector, Probability, Wire};
use podlink_protocol::retry::{Config, Event, FaultReason, LinkRetry, LinkState, FLIT_LEN};
use podlink_protocol::testing::{LinkPair, PairConfig, RetryEnd};
use podlink_protocol::time::{Duration, Instant};
use proptest::prelude::*;

const CAP: usize = 64;
type End = RetryEnd<CAP>;
type Pair = LinkPair<End, End, 256, FLIT_LEN>;

struct Setup {
    cfg: Config,
    faults: FaultConfig,
    latency: Duration,
    flits: u64,
    seed: u64,
}

fn pair(s: &Setup) -> Box<Pair> {
    let wire = |seed| Wire::new(FaultInjector::new(s.faults, seed), s.latency);
    let mut p = Box::new(LinkPair::new(
        RetryEnd::new(LinkRetry::new(s.cfg), s.flits),
        RetryEnd::new(LinkRetry::new(s.cfg), s.flits),
        wire(s.seed),
        wire(s.seed ^ 0xdead_beef),
        PairConfig::default(),
    ));
    p.set_link(true);
    p
}

fn done(p: &mut Pair, n: u64) -> bool {
    let end_done = |e: &End| e.link.state() == LinkState::Fault || (e.log.delivered == n);
    end_done(&p.a) && end_done(&p.b) && p.a.link.unacked() == 0 && p.b.link.unacked() == 0
        || p.a.link.state() == LinkState::Fault
        || p.b.link.state() == LinkState::Fault
}

/// Run with `flaps` link down/up cycles at pseudo-random times; returns the pair.
fn run(s: &Setup, flaps: &[(u64, u64)]) -> Box<Pair> {
    let mut p = pair(s);
    let deadline = Instant::from_ps(2_000_000_000_000); // 2 s of virtual time
    for &(at_ns, down_ns) in flaps {
        let at = Instant::from_ps(at_ns * 1000);
        p.drive_until(at, |p| done(p, s.flits));
        p.advance_to(at);
        p.set_link(false);
        p.advance_to(at + Duration::from_ns(down_ns));
        p.set_link(true);
    }
    p.drive_until(deadline, |p| done(p, s.flits));
    p
}

/// The invariant: nothing duplicated, reordered or corrupted; everything delivered unless
/// the sender reported Fault.
fn check(p: &Pair, n: u64) -> Result<(), TestCaseError> {
    for (tx, rx) in [(&p.a, &p.b), (&p.b, &p.a)] {
        prop_assert!(rx.log.is_clean(), "{:?}", rx.log);
        if tx.link.state() == LinkState::Fault || rx.link.state() == LinkState::Fault {
            let faulted = if tx.link.state() == LinkState::Fault {
                tx
            } else {
                rx
            };
            prop_assert!(
                matches!(faulted.fault, Some(Event::Fault { .. })),
                "Fault state without a Fault event"
            );
        } else {
            prop_assert_eq!(
                rx.log.delivered,
                n,
                "tx {:?}\nrx {:?}",
                tx.link.stats(),
                rx.link.stats()
            );
            prop_assert_eq!(tx.link.buffered(), 0);
        }
    }
    Ok(())
}

fn serial_faults() -> impl Strategy<Value = FaultConfig> {
    (0.0..2e-5f64, 0.0..0.05f64, 1u32..128).prop_map(|(ber, burst, len)| FaultConfig {
        bit_error_rate: Probability::from_f64(ber),
        burst_rate: Probability::from_f64(burst),
        burst_len: len,
        ..FaultConfig::default()
    })
}

fn network_faults() -> impl Strategy<Value = FaultConfig> {
    (
        serial_faults(),
        0.0..0.05f64,
        0.0..0.05f64,
        0.0..0.05f64,
        0u64..200,
    )
        .prop_map(|(f, drop, dup, delay, max_delay_ns)| FaultConfig {
            drop_rate: Probability::from_f64(drop),
            duplicate_rate: Probability::from_f64(dup),
            delay_rate: Probability::from_f64(delay),
            max_delay: Duration::from_ns(max_delay_ns),
            ..f
        })
}

fn flaps() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0u64..3_000, 1u64..5_000), 0..3).prop_map(|mut v| {
        // Increasing start times.
        let mut t = 0;
        for (at, down) in v.iter_mut() {
            t += *at;
            *at = t;
            t += *down;
        }
        v
    })
}

/// Short timers keep virtual runs short. A lost last flit (and a lost replay of it) is
/// only found by the ack timeout, so lossy wires get more than one timeout replay.
fn test_config(piggyback: bool, ack_interval: u16) -> Config {
    Config {
        piggyback,
        ack_interval,
        ack_timeout: Duration::from_us(5),
        ack_timeout_replays: 16,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// A serial PHY: bit errors, bursts, link flaps. Command flits carry payload.
    #[test]
    fn lossless_over_serial_faults(
        seed in any::<u64>(),
        faults in serial_faults(),
        flaps in flaps(),
        ack_interval in 1u16..32,
        latency_ns in 0u64..200,
    ) {
        let s = Setup {
            cfg: test_config(true, ack_interval),
            faults,
            latency: Duration::from_ns(latency_ns),
            flits: 300,
            seed,
        };
        let p = run(&s, &flaps);
        check(&p, s.flits)?;
        // These rates are far below the replay limit: no fault expected.
        prop_assert_eq!(p.a.log.delivered, s.flits);
        prop_assert_eq!(p.b.log.delivered, s.flits);
    }

    /// A network: also drops, duplicates and reordering. Every payload flit carries its full
    /// sequence number (`piggyback` off).
    #[test]
    fn lossless_over_network_faults(
        seed in any::<u64>(),
        faults in network_faults(),
        flaps in flaps(),
        ack_interval in 1u16..32,
        latency_ns in 0u64..200,
    ) {
        let s = Setup {
            cfg: test_config(false, ack_interval),
            faults,
            latency: Duration::from_ns(latency_ns),
            flits: 300,
            seed,
        };
        let p = run(&s, &flaps);
        check(&p, s.flits)?;
        prop_assert_eq!(p.a.log.delivered, s.flits);
        prop_assert_eq!(p.b.log.delivered, s.flits);
    }

    /// Faults far beyond what retry can repair: the link reports Fault; what was delivered
    /// is still exactly once and in order.
    #[test]
    fn hopeless_wire_reports_fault(seed in any::<u64>(), ber in 3e-4..2e-3f64, piggyback in any::<bool>()) {
        let s = Setup {
            cfg: Config { ack_timeout_replays: 1, ..test_config(piggyback, 8) },
            faults: FaultConfig {
                bit_error_rate: Probability::from_f64(ber),
                ..FaultConfig::default()
            },
            latency: Duration::from_ns(50),
            flits: 300,
            seed,
        };
        let p = run(&s, &[]);
        check(&p, s.flits)?;
        let faulted = [&p.a, &p.b].into_iter().any(|e| e.link.state() == LinkState::Fault);
        prop_assert!(faulted);
        for e in [&p.a, &p.b] {
            if let Some(Event::Fault { reason, undelivered }) = e.fault {
                prop_assert!(matches!(reason, FaultReason::ReplayLimit | FaultReason::AckTimeout));
                prop_assert!(undelivered > 0);
            }
        }
    }
}

#[test]
fn clean_wire_at_full_rate() {
    let s = Setup {
        cfg: Config::default(),
        faults: FaultConfig::default(),
        latency: Duration::from_ns(100),
        flits: 5_000,
        seed: 1,
    };
    let p = run(&s, &[]);
    check(&p, s.flits).unwrap();
    assert_eq!(p.a.link.stats().flits_resent, 0);
    assert_eq!(p.a.link.stats().replays, 0);
    // 5000 flits each way at 6.4 ns each: about 32 µs, plus the round trips.
    assert!(p.now() < Instant::from_ps(40_000_000), "{}", p.now());
}

#[test]
fn long_outage_replays_without_fault() {
    let s = Setup {
        cfg: test_config(true, 8),
        faults: FaultConfig::default(),
        latency: Duration::from_ns(100),
        flits: 1_000,
        seed: 2,
    };
    // Down for 10 ms, far longer than the 5 µs ack timeout.
    let p = run(&s, &[(1_000, 10_000_000)]);
    check(&p, s.flits).unwrap();
    assert_eq!(p.a.log.delivered, s.flits);
    assert_eq!(p.a.link.stats().link_downs, 1);
    assert_eq!(p.a.link.stats().faults, 0);
}

/// A case proptest found (session 12): burst errors on a piggybacked link plus a 1 ns flap
/// at 576 ns delivered 16 flits twice and one out of order.
#[test]
fn burst_errors_and_a_short_flap_regression() {
    let s = Setup {
        cfg: test_config(true, 10),
        faults: FaultConfig {
            bit_error_rate: Probability(217_377_812_964_196),
            burst_rate: Probability(303_014_892_760_334_208),
            burst_len: 38,
            ..FaultConfig::default()
        },
        latency: Duration::from_ns(192),
        flits: 300,
        seed: 1_878_489_349_821_234_341,
    };
    let p = run(&s, &[(576, 1)]);
    check(&p, s.flits).unwrap();
    assert_eq!(p.a.log.delivered, s.flits);
    assert_eq!(p.b.log.delivered, s.flits);
}
