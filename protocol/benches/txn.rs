//! Transaction-layer benchmarks (criterion; stable harness): operations per second
//!
//! * `txn_direct`: through a requester and a completer connected directly (no link,
//!   unlimited credits);
//! * `txn_endpoint_pair`: through two `txn::Endpoint`s over a `testing::LinkPair` (TL packing,
//!   TL credits, DL packing, link-level retry, CRC; clean wires).
//!
//! Run: `cargo bench -p podlink-protocol --bench txn`.
//!
//! Each iteration submits a batch of operations, runs them to completion and drains the
//! completions; throughput is counted in operations (CPU time of both ends together).

use core::hint::black_box;
use core::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use podlink_protocol::phy::{FaultConfig, FaultInjector, Wire};
use podlink_protocol::retry::FLIT_LEN;
use podlink_protocol::testing::{LinkPair, PairConfig};
use podlink_protocol::time::Duration as Span;
use podlink_protocol::time::Instant;
use podlink_protocol::txn::{
    Atomic, AtomicOp, AtomicSize, ByteEnables, Completer, CompleterConfig, Endpoint,
    EndpointConfig, MemoryTarget, Operation, PartitionTable, ReadData, ReadSink, Request,
    Requester, RequesterConfig, TargetError, Unlimited, WindowMemory,
};
use podlink_protocol::wire::{AccelId, PartitionId, Vc};

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
}

const BATCH: usize = 64;

struct Pair {
    req: Box<Requester<256, 128, 256>>,
    cpl: Box<Completer<64>>,
    mem: Box<WindowMemory<65536>>,
    data: [u8; 256],
}

impl Pair {
    fn new() -> Self {
        let (a, b) = (AccelId::new(1).unwrap(), AccelId::new(2).unwrap());
        Pair {
            req: Box::new(Requester::new(RequesterConfig::new(a))),
            cpl: Box::new(Completer::new(
                CompleterConfig::new(b),
                PartitionTable::all_in(PartitionId::default()),
            )),
            mem: Box::new(WindowMemory::new(0)),
            data: [0x5a; 256],
        }
    }

    /// Submit `BATCH` operations of `kind`, run them to completion; returns bytes read.
    fn batch(&mut self, kind: &str) -> usize {
        let now = Instant::ZERO;
        let dst = AccelId::new(2).unwrap();
        for k in 0..BATCH {
            let addr = (k as u64 * 256) % 65536;
            let op = match kind {
                "read64" => Operation::Read { addr, len: 64 },
                "read256" => Operation::Read { addr, len: 256 },
                "write64" => Operation::Write {
                    addr,
                    data: &self.data[..64],
                    enables: None,
                },
                "writefull256" => Operation::WriteFull {
                    addr,
                    data: &self.data,
                },
                _ => Operation::Atomic {
                    addr: 0,
                    atomic: Atomic {
                        op: AtomicOp::FetchAdd,
                        size: AtomicSize::Eight,
                        operand: 1,
                        compare: 0,
                    },
                    returning: true,
                },
            };
            let vc = Vc::new((k % 4) as u8).unwrap();
            self.req.submit(now, &Request { dst, vc, op }).unwrap();
        }
        let mut read = 0;
        loop {
            let mut progress = false;
            while let Some(t) = self.req.poll_transmit(now, &mut Unlimited) {
                self.cpl
                    .handle_request(now, &t, self.mem.as_mut(), &mut Unlimited)
                    .unwrap();
                progress = true;
                while let Some(t) = self.cpl.poll_transmit(now, &mut Unlimited) {
                    if let Some(d) = self.req.handle_response(now, &t, &mut Unlimited) {
                        read += d.data.len();
                    }
                }
            }
            while let Some(c) = self.req.poll_completion() {
                black_box(c);
                progress = true;
            }
            if !progress {
                break;
            }
        }
        read
    }
}

fn ops(c: &mut Criterion) {
    let mut g = c.benchmark_group("txn_direct");
    g.throughput(Throughput::Elements(BATCH as u64));
    for kind in ["read64", "read256", "write64", "writefull256", "atomic8"] {
        let mut pair = Pair::new();
        g.bench_with_input(BenchmarkId::from_parameter(kind), kind, |b, kind| {
            b.iter(|| black_box(pair.batch(kind)));
        });
    }
    g.finish();
}

/// Memory for the completer end, a read counter for the requester end.
struct Host {
    mem: Box<WindowMemory<65536>>,
    read: usize,
}

impl MemoryTarget for Host {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.mem.read(addr, buf)
    }
    fn write(&mut self, addr: u64, data: &[u8], en: &ByteEnables) -> Result<(), TargetError> {
        self.mem.write(addr, data, en)
    }
}

impl ReadSink for Host {
    fn read_data(&mut self, d: ReadData<'_>) {
        self.read += d.data.len();
    }
}

type End = Endpoint<Host, 256, 128, 256, 64, 255, 128>;
type EPair = LinkPair<End, End, 64, FLIT_LEN>;

fn endpoint_pair() -> Box<EPair> {
    let (a, b) = (AccelId::new(1).unwrap(), AccelId::new(2).unwrap());
    let cfg = |me| EndpointConfig::new(RequesterConfig::new(me), CompleterConfig::new(me));
    let host = || Host {
        mem: Box::new(WindowMemory::new(0)),
        read: 0,
    };
    let wire = |s| {
        Wire::new(
            FaultInjector::new(FaultConfig::default(), s),
            Span::from_ns(100),
        )
    };
    let mut p = Box::new(LinkPair::new(
        Endpoint::new(cfg(a), host()),
        Endpoint::new(cfg(b), host()),
        wire(1),
        wire(2),
        PairConfig::default(),
    ));
    p.set_link(true);
    p.drive(p.now() + Span::from_us(2));
    p
}

fn run_pair(p: &mut EPair, kind: &str, data: &[u8; 256]) {
    let dst = AccelId::new(2).unwrap();
    let now = p.now();
    for k in 0..BATCH {
        let addr = (k as u64 * 256) % 65536;
        let op = match kind {
            "read64" => Operation::Read { addr, len: 64 },
            "read256" => Operation::Read { addr, len: 256 },
            _ => Operation::WriteFull { addr, data },
        };
        let vc = Vc::new((k % 4) as u8).unwrap();
        p.a.submit(now, &Request { dst, vc, op }).unwrap();
    }
    p.wake();
    let mut done = 0;
    while done < BATCH {
        if !p.step() {
            break;
        }
        while let Some(c) = p.a.poll_completion() {
            black_box(c);
            done += 1;
        }
    }
    assert_eq!(done, BATCH, "every operation completes");
}

fn pair_ops(c: &mut Criterion) {
    let mut g = c.benchmark_group("txn_endpoint_pair");
    g.throughput(Throughput::Elements(BATCH as u64));
    let data = [0x5a; 256];
    for kind in ["read64", "read256", "writefull256"] {
        let mut p = endpoint_pair();
        g.bench_with_input(BenchmarkId::from_parameter(kind), kind, |b, kind| {
            b.iter(|| run_pair(&mut p, kind, &data));
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = ops, pair_ops
}
criterion_main!(benches);
