//! Link-layer throughput (criterion; stable harness): TL flits per second through a pair of
//! composed UALink-profile links and a pair of Ethernet-profile links in virtual time, and DL
//! flits per second through a pair of bare retry machines, each on a clean wire and at a
//! flit (frame) error rate of 1e-3.
//!
//! Run: `cargo bench -p podlink-protocol --bench link`. This measures the protocol code (and
//! the harness's wires), not a real link: virtual time costs nothing.

use core::hint::black_box;
use core::time::Duration as StdDuration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use podlink_protocol::link::{EthLink, EthLinkConfig, UaLink, UaLinkConfig};
use podlink_protocol::phy::{FaultConfig, FaultInjector, Probability, Wire};
use podlink_protocol::retry::{Config, LinkRetry, LinkState, FLIT_LEN};
use podlink_protocol::testing::{Endpoint, EthEnd, LinkPair, PairConfig, RetryEnd, UaEnd};
use podlink_protocol::time::{Duration, Instant};
use podlink_protocol::wire::eth::MAX_FRAME_LEN;
use podlink_protocol::wire::AccelId;

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(StdDuration::from_secs(1))
        .measurement_time(StdDuration::from_secs(3))
        .sample_size(10)
}

fn faults(flit_error_rate: f64) -> FaultConfig {
    FaultConfig {
        burst_rate: Probability::from_f64(flit_error_rate),
        burst_len: 8,
        ..FaultConfig::default()
    }
}

fn run<A: Endpoint, B: Endpoint, const M: usize>(
    p: &mut LinkPair<A, B, 64, M>,
    done: impl FnMut(&mut LinkPair<A, B, 64, M>) -> bool,
) {
    p.set_link(true);
    assert!(p.drive_until(Instant::from_ps(u64::MAX / 2), done));
}

fn ualink(c: &mut Criterion) {
    const N: u64 = 20_000;
    let mut g = c.benchmark_group("ualink_pair");
    g.throughput(Throughput::Elements(N));
    for fer in [0.0, 1e-3] {
        g.bench_with_input(BenchmarkId::new("tl_flits", fer), &fer, |b, &fer| {
            b.iter(|| {
                let wire = |s| {
                    Wire::<64, FLIT_LEN>::new(
                        FaultInjector::new(faults(fer), s),
                        Duration::from_ns(100),
                    )
                };
                let mut p = Box::new(LinkPair::new(
                    UaEnd::new(UaLink::<255, 128>::new(UaLinkConfig::default()), N),
                    UaEnd::new(UaLink::<255, 128>::new(UaLinkConfig::default()), 0),
                    wire(1),
                    wire(2),
                    PairConfig::default(),
                ));
                run(&mut p, |p| {
                    p.b.log.delivered == N && p.a.link.is_idle()
                        || p.a.link.state() == LinkState::Fault
                });
                black_box(p.b.log.delivered)
            })
        });
    }
    g.finish();
}

fn retry(c: &mut Criterion) {
    const N: u64 = 5_000;
    let mut g = c.benchmark_group("retry_pair");
    g.throughput(Throughput::Elements(N));
    for fer in [0.0, 1e-3] {
        g.bench_with_input(BenchmarkId::new("dl_flits", fer), &fer, |b, &fer| {
            b.iter(|| {
                let wire = |s| {
                    Wire::<64, FLIT_LEN>::new(
                        FaultInjector::new(faults(fer), s),
                        Duration::from_ns(100),
                    )
                };
                let mut p = Box::new(LinkPair::new(
                    RetryEnd::new(LinkRetry::<255>::new(Config::default()), N),
                    RetryEnd::new(LinkRetry::<255>::new(Config::default()), 0),
                    wire(1),
                    wire(2),
                    PairConfig::default(),
                ));
                run(&mut p, |p| {
                    p.b.log.delivered == N && p.a.link.buffered() == 0
                        || p.a.link.state() == LinkState::Fault
                });
                black_box(p.b.log.delivered)
            })
        });
    }
    g.finish();
}

fn ethernet(c: &mut Criterion) {
    const N: u64 = 20_000;
    let mut g = c.benchmark_group("ethernet_pair");
    g.throughput(Throughput::Elements(N));
    let id = |v| AccelId::new(v).unwrap();
    let cfg = |l, r| EthLinkConfig {
        local: id(l),
        peer: id(r),
        ..EthLinkConfig::default()
    };
    for fer in [0.0, 1e-3] {
        g.bench_with_input(BenchmarkId::new("tl_flits", fer), &fer, |b, &fer| {
            b.iter(|| {
                let wire = |s| {
                    Wire::<64, MAX_FRAME_LEN>::new(
                        FaultInjector::new(faults(fer), s),
                        Duration::from_ns(200),
                    )
                };
                let mut p = Box::new(LinkPair::new(
                    EthEnd::<8, 64, 128>::new(EthLink::new(cfg(1, 2), Instant::ZERO), id(2), 4, N),
                    EthEnd::<8, 64, 128>::new(EthLink::new(cfg(2, 1), Instant::ZERO), id(1), 4, 0),
                    wire(1),
                    wire(2),
                    PairConfig::ETHERNET_800G,
                ));
                run(&mut p, |p| {
                    p.b.logs.delivered() == N && p.a.link.is_idle()
                        || p.a.link.state() == LinkState::Fault
                });
                black_box(p.b.logs.delivered())
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = ualink, retry, ethernet
}
criterion_main!(benches);
