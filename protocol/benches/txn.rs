//! Transaction-layer benchmarks (criterion; stable harness): operations per second through a
//! requester and a completer connected directly (no link, unlimited credits).
//!
//! Run: `cargo bench -p podlink-protocol --bench txn`.
//!
//! Each iteration submits a batch of operations, moves every request to the completer and
//! every response back, and drains the completions; throughput is counted in operations.

use core::hint::black_box;
use core::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use podlink_protocol::time::Instant;
use podlink_protocol::txn::{
    Atomic, AtomicOp, AtomicSize, Completer, CompleterConfig, Operation, PartitionTable, Request,
    Requester, RequesterConfig, Unlimited, WindowMemory,
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

criterion_group! {
    name = benches;
    config = config();
    targets = ops
}
criterion_main!(benches);
