//! Transaction-layer integration tests: the model-based test over a direct connection,
//! partition isolation, credits, and property tests of the wire encoding.

#[path = "txn/model.rs"]
mod model;

use model::{run_direct, ModelConfig, Transport};
use podlink_protocol::txn::OrderingMode;

fn check(cfg: ModelConfig) -> model::Report {
    let r = run_direct(cfg.clone());
    assert!(r.is_clean(), "{cfg:?}\n{}\n{:#?}", r.to_json(), r.details);
    assert_eq!(r.ops as usize, cfg.ops);
    r
}

#[test]
fn model_direct_per_region() {
    for seed in 1..=4 {
        check(ModelConfig {
            seed,
            ..ModelConfig::default()
        });
    }
}

#[test]
fn model_direct_strict_single_beat_responses() {
    check(ModelConfig {
        seed: 11,
        ordering: OrderingMode::Strict,
        beats_per_response: 1,
        ..ModelConfig::default()
    });
}

#[test]
fn model_direct_tight_credits() {
    check(ModelConfig {
        seed: 21,
        requesters: 4,
        completers: 3,
        request_credits: (1, 4),
        response_credits: (1, 4),
        beats_per_response: 2,
        ..ModelConfig::default()
    });
}

#[test]
fn model_direct_partitions_isolated() {
    for seed in 31..=33 {
        let cfg = ModelConfig {
            seed,
            ops: 800,
            requesters: 4,
            completers: 4,
            partitions: 2,
            any_destination: 0.5,
            ..ModelConfig::default()
        };
        let r = run_direct(cfg.clone());
        assert!(r.is_clean(), "{}\n{:#?}", r.to_json(), r.details);
        assert!(r.partition_denied > 0, "some operations crossed partitions");
        assert_eq!(r.cross_partition_leaks, 0);
    }
}

#[test]
fn model_through_tl_packer() {
    for (seed, ordering) in [(41, OrderingMode::PerRegion), (42, OrderingMode::Strict)] {
        let r = check(ModelConfig {
            seed,
            transport: Transport::Packed,
            ordering,
            beats_per_response: 1 + (seed % 4) as u8,
            ..ModelConfig::default()
        });
        assert!(r.flits > 0);
        assert_eq!(r.compressed, 0);
    }
}

#[test]
fn model_through_tl_packer_compressed() {
    let r = check(ModelConfig {
        seed: 51,
        requesters: 3,
        completers: 1,
        transport: Transport::Packed,
        compress: true,
        ..ModelConfig::default()
    });
    assert!(r.compressed > 100, "{} compressed fields", r.compressed);
}

mod dead_link {
    use podlink_protocol::time::{Duration, Instant};
    use podlink_protocol::txn::*;
    use podlink_protocol::wire::{AccelId, Vc};
    use std::collections::HashMap;

    /// Credits for `n` requests, then nothing: the link died.
    struct Dying(u32);
    impl CreditGate for Dying {
        fn try_consume(&mut self, _: Flow, _: Vc, _: u8) -> Option<Pool> {
            self.0.checked_sub(1).map(|n| {
                self.0 = n;
                Pool::PerVc
            })
        }
        fn release(&mut self, _: Flow, _: Vc, _: Pool, _: u8) {}
    }

    #[test]
    fn every_outstanding_op_completes_once_with_timeout() {
        let mut cfg = RequesterConfig::new(AccelId::new(1).unwrap());
        cfg.request_timeout = Duration::from_us(2);
        cfg.queue_timeout = Duration::from_us(5);
        cfg.tag_quarantine = Duration::from_us(3);
        let mut r: Box<Requester<16, 32, 64>> = Box::new(Requester::new(cfg));
        let dst = AccelId::new(2).unwrap();
        let mut now = Instant::ZERO;
        let mut ids = Vec::new();
        for k in 0..20u64 {
            let vc = Vc::new((k % 4) as u8).unwrap();
            let id = match k % 3 {
                0 => r.submit_read(now, dst, vc, k * 300, 300).unwrap(),
                1 => r
                    .submit_write(now, dst, vc, k * 64, &[7; 64], None)
                    .unwrap(),
                _ => {
                    let atomic = Atomic {
                        op: AtomicOp::FetchAdd,
                        size: AtomicSize::Eight,
                        operand: 1,
                        compare: 0,
                    };
                    let op = Operation::Atomic {
                        addr: 0,
                        atomic,
                        returning: true,
                    };
                    r.submit(now, &Request { dst, vc, op }).unwrap()
                }
            };
            ids.push(id);
            now += Duration::from_ns(100);
        }
        // Ten requests leave, then the link is dead: nothing comes back.
        let mut gate = Dying(10);
        while r.poll_transmit(now, &mut gate).is_some() {}
        assert_eq!(r.in_flight(), 10);
        let mut done: HashMap<OpId, u32> = HashMap::new();
        let mut steps = 0;
        while let Some(t) = r.poll_timeout() {
            assert!(t >= now, "timers never go back");
            now = t;
            r.handle_timeout(now);
            while r.poll_transmit(now, &mut gate).is_some() {}
            while let Some(c) = r.poll_completion() {
                assert_eq!(c.result, Err(TxnError::Timeout));
                *done.entry(c.id).or_default() += 1;
            }
            steps += 1;
            assert!(steps < 100);
        }
        assert_eq!(done.len(), ids.len());
        assert!(done.values().all(|&n| n == 1));
        assert_eq!((r.in_flight(), r.queued(), r.ops_open()), (0, 0, 0));
        let s = r.stats();
        assert_eq!(s.request_timeouts, 10);
        assert_eq!(s.ops_failed, 20);
        // Every tag is back: 16 requests can be in flight again.
        for k in 0..16 {
            r.submit_read(now, dst, Vc::default(), k * 64, 64).unwrap();
        }
        let mut n = 0;
        while r.poll_transmit(now, &mut Unlimited).is_some() {
            n += 1;
        }
        assert_eq!(n, 16);
    }
}

mod isolation {
    use podlink_protocol::time::Instant;
    use podlink_protocol::txn::*;
    use podlink_protocol::wire::{AccelId, PartitionId, Vc};

    /// Requester 1 (partition 1) attacks completer 9 (partition 0) with every operation.
    #[test]
    fn cross_partition_never_reads_nor_changes_memory() {
        let (a, b) = (AccelId::new(1).unwrap(), AccelId::new(9).unwrap());
        let mut table = PartitionTable::all_in(PartitionId::default());
        table.set(a, PartitionId::new(1));
        let mut rc = RequesterConfig::new(a);
        rc.partition = PartitionId::new(1).unwrap();
        let mut r: Box<Requester<32, 32, 64>> = Box::new(Requester::new(rc));
        let mut c: Box<Completer<64>> = Box::new(Completer::new(CompleterConfig::new(b), table));
        let mut mem: Box<WindowMemory<4096>> = Box::new(WindowMemory::new(0));
        mem.bytes_mut().fill(0x5a);
        let before = *mem.bytes();
        let now = Instant::ZERO;
        let vc = Vc::default();
        let data = [1u8; 256];
        let mut ops = vec![
            Request {
                dst: b,
                vc,
                op: Operation::Read {
                    addr: 10,
                    len: 1000,
                },
            },
            Request {
                dst: b,
                vc,
                op: Operation::Write {
                    addr: 3,
                    data: &data,
                    enables: None,
                },
            },
            Request {
                dst: b,
                vc,
                op: Operation::WriteFull {
                    addr: 512,
                    data: &data,
                },
            },
            Request {
                dst: b,
                vc,
                op: Operation::Message {
                    addr: 1024,
                    data: &data,
                },
            },
        ];
        for op in AtomicOp::ALL {
            for returning in [true, false] {
                let atomic = Atomic {
                    op,
                    size: AtomicSize::Eight,
                    operand: 3,
                    compare: 0x5a5a_5a5a_5a5a_5a5a,
                };
                ops.push(Request {
                    dst: b,
                    vc,
                    op: Operation::Atomic {
                        addr: 64,
                        atomic,
                        returning,
                    },
                });
            }
        }
        for op in &ops {
            r.submit(now, op).unwrap();
        }
        let mut leaks = 0;
        loop {
            let mut progress = false;
            while let Some(item) = r.poll_transmit(now, &mut Unlimited) {
                c.handle_request(now, &item, mem.as_mut(), &mut Unlimited)
                    .unwrap();
                progress = true;
            }
            while let Some(item) = c.poll_transmit(now, &mut Unlimited) {
                assert!(item.data.is_empty(), "a refusal carries no data");
                if r.handle_response(now, &item, &mut Unlimited).is_some() {
                    leaks += 1;
                }
                progress = true;
            }
            if !progress {
                break;
            }
        }
        let mut n = 0;
        while let Some(cpl) = r.poll_completion() {
            assert_eq!(cpl.result, Err(TxnError::Status(Status::PARTITION_DENIED)));
            n += 1;
        }
        assert_eq!(n, ops.len());
        assert_eq!(leaks, 0);
        assert_eq!(mem.bytes(), &before);
        assert_eq!(
            c.stats().partition_denied as usize,
            c.stats().requests as usize
        );
        assert_eq!(c.stats().ok, 0);
    }
}

mod props {
    use podlink_protocol::time::Instant;
    use podlink_protocol::txn::*;
    use podlink_protocol::wire::{AccelId, TlField, Vc};
    use proptest::prelude::*;

    fn atomic() -> impl Strategy<Value = Atomic> {
        (0..10usize, any::<bool>(), any::<u64>(), any::<u64>()).prop_map(|(o, eight, a, b)| {
            let size = if eight {
                AtomicSize::Eight
            } else {
                AtomicSize::Four
            };
            Atomic {
                op: AtomicOp::ALL[o],
                size,
                operand: a & size.mask(),
                compare: b & size.mask(),
            }
        })
    }

    proptest! {
        /// attr and operand beat: encode then decode gives the same atomic.
        #[test]
        fn atomic_round_trip(a in atomic(), slot in 0u64..8) {
            let mut beat = [0u8; 64];
            a.encode_operands(&mut beat);
            let addr = slot * a.size.bytes() as u64;
            let addr = addr * a.op.operands() as u64;
            let mut b = Atomic::decode(a.attr(), a.len_field(), addr, &beat).unwrap();
            if a.op != AtomicOp::CompareSwap {
                b.compare = a.compare;
            }
            prop_assert_eq!(b, a);
            prop_assert_eq!(Atomic::decode_attr(a.attr()), Ok((a.op, a.size)));
        }

        /// Status: raw → status → raw keeps the 4 bits.
        #[test]
        fn status_round_trip(v in 0u8..16) {
            prop_assert_eq!(Status::from_raw(v).raw(), v);
            prop_assert_eq!(Status::from_raw(v).is_reserved(), v > 5);
        }

        /// Every request a requester emits is a valid TL field (emit → parse → same), is
        /// 64–256 B, 64 B aligned, inside one 256 B region, and the pieces of an operation
        /// cover exactly the 64 B blocks of its range, in order.
        #[test]
        fn requests_are_well_formed(addr in 0u64..(1 << 20), len in 1u32..2000, kind in 0u8..5, a in atomic()) {
            let mut r: Box<Requester<64, 4, 64>> = Box::new(Requester::new(RequesterConfig::new(AccelId::new(1).unwrap())));
            let data = vec![0xc3u8; len as usize];
            let dst = AccelId::new(2).unwrap();
            let (op, lo, hi) = match kind {
                0 => (Operation::Read { addr, len }, addr & !63, (addr + u64::from(len) + 63) & !63),
                1 => (Operation::Write { addr, data: &data, enables: None }, addr & !63, (addr + u64::from(len) + 63) & !63),
                2 => {
                    let (aa, l) = (addr & !63, (u64::from(len) + 63) & !63);
                    (Operation::WriteFull { addr: aa, data: &data[..0] }, aa, aa + l)
                }
                3 => {
                    let aa = addr & !255;
                    (Operation::Message { addr: aa, data: &data[..0] }, aa, aa + 64)
                }
                _ => {
                    let aa = addr & !15;
                    (Operation::Atomic { addr: aa, atomic: a, returning: true }, aa & !63, (aa & !63) + 64)
                }
            };
            let full = vec![0u8; (hi - lo) as usize];
            let op = match op {
                Operation::WriteFull { addr, .. } => Operation::WriteFull { addr, data: &full },
                Operation::Message { addr, .. } => Operation::Message { addr, data: &full[..64] },
                o => o,
            };
            r.submit(Instant::ZERO, &Request { dst, vc: Vc::default(), op }).unwrap();
            let mut next = lo;
            while let Some(item) = r.poll_transmit(Instant::ZERO, &mut Unlimited) {
                prop_assert!(item.check().is_ok());
                let mut buf = [0u8; 16];
                prop_assert_eq!(item.field.emit(&mut buf), Ok(16));
                prop_assert_eq!(TlField::parse(&buf), Ok(item.field));
                let TlField::UncompressedRequest(q) = item.field else { unreachable!() };
                let pa = q.addr << 2;
                if q.cmd.is_atomic() {
                    prop_assert_eq!(item.data.len(), a.operand_bytes());
                    prop_assert_eq!(q.numbeats, 0);
                    next = hi;
                    continue;
                }
                let bytes = (u64::from(q.len) + 1) * 4;
                prop_assert_eq!(pa, next);
                prop_assert!(pa % 64 == 0 && (64..=256).contains(&bytes) && bytes % 64 == 0);
                prop_assert!(pa % 256 + bytes <= 256);
                prop_assert_eq!(u64::from(q.numbeats) + 1, bytes / 64);
                prop_assert_eq!(item.byte_enables.is_some(), kind == 1);
                prop_assert_eq!(item.data.len() as u64, if kind == 0 { 0 } else { bytes });
                next = pa + bytes;
            }
            prop_assert_eq!(next, hi);
        }
    }
}

#[test]
fn model_over_clean_links() {
    let cfg = ModelConfig {
        seed: 61,
        ops: 400,
        requesters: 2,
        completers: 2,
        partitions: 2,
        ..ModelConfig::default()
    };
    let r = model::run_linked(cfg, 0.0);
    assert!(r.is_clean(), "{}\n{:#?}", r.to_json(), r.details);
    assert!(r.partition_denied > 0);
}

#[test]
fn model_over_lossy_links() {
    for (seed, rate) in [(71, 1e-3), (72, 1e-2)] {
        let cfg = ModelConfig {
            seed,
            ops: 400,
            requesters: 2,
            completers: 2,
            ..ModelConfig::default()
        };
        let r = model::run_linked(cfg, rate);
        assert!(
            r.is_clean(),
            "rate {rate}: {}\n{:#?}",
            r.to_json(),
            r.details
        );
    }
}

mod endpoint_dead_link {
    use super::model::{self, ModelConfig};
    use podlink_protocol::time::{Duration, Instant};
    use podlink_protocol::txn::{Operation, Request, TxnError};
    use podlink_protocol::wire::Vc;
    use std::collections::HashMap;

    /// Traffic flows, then the link goes down for good: every open operation — sent,
    /// queued in the link, or still in the requester — completes exactly once, with a
    /// timeout, and the port ends idle.
    #[test]
    fn every_open_op_times_out_once() {
        std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(|| {
                let cfg = ModelConfig::default();
                let mem =
                    model::SharedMem(std::rc::Rc::new(core::cell::RefCell::new(vec![0; 8192])));
                let mut p = model::make_pair(&cfg, 0, 0, mem, 0.0);
                let dst = model::accel_of_completer(0);
                let mut ids = Vec::new();
                let mut submit = |p: &mut Box<model::Pair>, k: u64| {
                    let now = p.now();
                    let op = Operation::Read {
                        addr: 256 + 64 * (k % 100),
                        len: 200,
                    };
                    ids.push(
                        p.a.submit(
                            now,
                            &Request {
                                dst,
                                vc: Vc::default(),
                                op,
                            },
                        )
                        .unwrap(),
                    );
                    p.wake();
                };
                for k in 0..10 {
                    submit(&mut p, k);
                }
                p.drive(Instant::ZERO + Duration::from_us(3));
                let mut done: HashMap<_, u32> = HashMap::new();
                let mut ok = 0;
                while let Some(c) = p.a.poll_completion() {
                    ok += u32::from(c.result.is_ok());
                    *done.entry(c.id).or_default() += 1;
                }
                assert_eq!(ok, 10, "the link works at first");
                for k in 10..30 {
                    submit(&mut p, k);
                }
                p.set_link(false);
                p.drive(Instant::ZERO + Duration::from_ms(20));
                while let Some(c) = p.a.poll_completion() {
                    assert_eq!(c.result, Err(TxnError::Timeout));
                    *done.entry(c.id).or_default() += 1;
                }
                assert_eq!(done.len(), 30);
                assert!(done.values().all(|&n| n == 1));
                assert_eq!(p.a.requester().ops_open(), 0);
                assert_eq!(p.a.requester().in_flight(), 0);
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
