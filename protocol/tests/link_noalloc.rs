//! The link hot path never allocates: a counting global allocator (this test binary only)
//! watches two retry ends, two composed UALink links and two composed Ethernet links exchange
//! thousands of flits over faulty wires, with link flaps.
//!
//! `harness = false`: the counter is global, so no libtest threads may run beside it.

use podlink_protocol::link::{EthLink, EthLinkConfig, UaLink, UaLinkConfig};
use podlink_protocol::phy::{FaultConfig, FaultInjector, Probability, Wire};
use podlink_protocol::retry::{Config, LinkRetry, FLIT_LEN};
use podlink_protocol::testing::{Endpoint, EthEnd, LinkPair, PairConfig, RetryEnd, UaEnd};
use podlink_protocol::time::{Duration, Instant};
use podlink_protocol::wire::eth::MAX_FRAME_LEN;
use podlink_protocol::wire::AccelId;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

type End = RetryEnd<128>;

fn main() {
    retry_hot_path_does_not_allocate();
    // The composed links are large: build them on a big stack (spawning allocates, but
    // before any measured region).
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(|| {
            ualink_hot_path_does_not_allocate();
            ethernet_hot_path_does_not_allocate();
        })
        .unwrap()
        .join()
        .unwrap();
    println!("link_noalloc: ok (no allocation on the retry, UALink and Ethernet hot paths)");
}

/// Flap the link once, then run until `done`; assert nothing was allocated meanwhile.
fn measure<A: Endpoint, B: Endpoint, const S: usize, const M: usize>(
    pair: &mut LinkPair<A, B, S, M>,
    mut done: impl FnMut(&mut LinkPair<A, B, S, M>) -> bool,
) {
    let region = Region::new(GLOBAL);
    pair.set_link(true);
    pair.drive(Instant::from_ps(3_000_000));
    pair.set_link(false);
    pair.advance_to(Instant::from_ps(4_000_000));
    pair.set_link(true);
    let ok = pair.drive_until(Instant::from_ps(1_000_000_000_000), |p| done(p));
    let change = region.change();
    assert!(ok);
    assert_eq!(
        (
            change.allocations,
            change.reallocations,
            change.bytes_allocated
        ),
        (0, 0, 0),
        "{change:?}"
    );
}

fn faults() -> FaultConfig {
    FaultConfig {
        bit_error_rate: Probability::from_f64(2e-6),
        burst_rate: Probability::from_f64(0.01),
        burst_len: 32,
        ..FaultConfig::default()
    }
}

fn ualink_hot_path_does_not_allocate() {
    type End = UaEnd<128, 64>;
    let mut pair = Box::new(LinkPair::<End, End, 256, FLIT_LEN>::new(
        UaEnd::new(UaLink::new(UaLinkConfig::default()), 20_000),
        UaEnd::new(UaLink::new(UaLinkConfig::default()), 20_000),
        Wire::new(FaultInjector::new(faults(), 21), Duration::from_ns(80)),
        Wire::new(FaultInjector::new(faults(), 22), Duration::from_ns(80)),
        PairConfig::default(),
    ));
    measure(&mut pair, |p| {
        p.a.log.delivered == 20_000 && p.b.log.delivered == 20_000
    });
    assert!(pair.a.link.retry().stats().replays > 0);
}

fn ethernet_hot_path_does_not_allocate() {
    type End = EthEnd<8, 64, 128>;
    let f = FaultConfig {
        drop_rate: Probability::from_f64(0.01),
        duplicate_rate: Probability::from_f64(0.01),
        delay_rate: Probability::from_f64(0.01),
        max_delay: Duration::from_ns(300),
        ..faults()
    };
    let id = |v| AccelId::new(v).unwrap();
    let cfg = |l, r| EthLinkConfig {
        local: id(l),
        peer: id(r),
        ..EthLinkConfig::default()
    };
    let mut pair = Box::new(LinkPair::<End, End, 64, MAX_FRAME_LEN>::new(
        EthEnd::new(EthLink::new(cfg(1, 2), Instant::ZERO), id(2), 4, 20_000),
        EthEnd::new(EthLink::new(cfg(2, 1), Instant::ZERO), id(1), 4, 20_000),
        Wire::new(FaultInjector::new(f, 31), Duration::from_ns(200)),
        Wire::new(FaultInjector::new(f, 32), Duration::from_ns(200)),
        PairConfig::ETHERNET_800G,
    ));
    measure(&mut pair, |p| {
        p.a.logs.delivered() == 20_000 && p.b.logs.delivered() == 20_000
    });
    assert!(pair.a.link.stats().retransmits > 0);
}

fn retry_hot_path_does_not_allocate() {
    let faults = FaultConfig {
        bit_error_rate: Probability::from_f64(1e-5),
        burst_rate: Probability::from_f64(0.01),
        burst_len: 32,
        ..FaultConfig::default()
    };
    let cfg = Config {
        ack_timeout: Duration::from_us(5),
        ack_timeout_replays: 16,
        ..Config::default()
    };
    // Everything is built (and boxed) before the measured region.
    let mut pair = Box::new(LinkPair::<End, End, 256, FLIT_LEN>::new(
        RetryEnd::new(LinkRetry::new(cfg), 3_000),
        RetryEnd::new(LinkRetry::new(cfg), 3_000),
        Wire::new(FaultInjector::new(faults, 11), Duration::from_ns(80)),
        Wire::new(FaultInjector::new(faults, 12), Duration::from_ns(80)),
        PairConfig::default(),
    ));

    // The counter works.
    let probe = Region::new(GLOBAL);
    drop(core::hint::black_box(vec![0u8; 16]));
    assert!(probe.change().allocations >= 1);

    let region = Region::new(GLOBAL);
    pair.set_link(true);
    pair.drive(Instant::from_ps(5_000_000));
    pair.set_link(false);
    pair.advance_to(Instant::from_ps(6_000_000));
    pair.set_link(true);
    let done = pair.drive_until(Instant::from_ps(1_000_000_000_000), |p| {
        p.a.log.delivered == 3_000 && p.b.log.delivered == 3_000
    });
    let change = region.change();

    assert!(done);
    assert!(
        pair.a.link.stats().replays > 0,
        "the faults exercised replay"
    );
    assert_eq!(
        (
            change.allocations,
            change.reallocations,
            change.bytes_allocated
        ),
        (0, 0, 0),
        "{change:?}"
    );
}
