//! The link hot path never allocates: a counting global allocator (this test binary only)
//! watches two retry ends exchange thousands of flits over a faulty wire, with link flaps.
//!
//! `harness = false`: the counter is global, so no libtest threads may run beside it.

use podlink_protocol::phy::{FaultConfig, FaultInjector, Probability, Wire};
use podlink_protocol::retry::{Config, LinkRetry, FLIT_LEN};
use podlink_protocol::testing::{LinkPair, PairConfig, RetryEnd};
use podlink_protocol::time::{Duration, Instant};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

type End = RetryEnd<128>;

fn main() {
    retry_hot_path_does_not_allocate();
    println!("link_noalloc: ok (no allocation on the retry hot path)");
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
