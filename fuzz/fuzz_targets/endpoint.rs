//! Arbitrary TL fields, data, timeouts and submissions into a requester and a completer
//! wired back to back (the transaction half of an endpoint).
//!
//! Invariants: nothing panics; every operation completes at most once; the requester never
//! has more requests in flight than tags; once time has passed every deadline and the wire
//! is drained, every submitted operation has completed exactly once.
//!
//! FIXME: drive a `txn::Endpoint` (with its `Link`) once the link layer is composed in.
#![no_main]

use std::collections::HashSet;

use libfuzzer_sys::fuzz_target;
use podlink_protocol::time::{Duration, Instant};
use podlink_protocol::txn::{
    Atomic, AtomicOp, AtomicSize, Completer, CompleterConfig, OpId, Operation, OrderingMode,
    PartitionTable, Request, Requester, RequesterConfig, TransferBuf, Unlimited, WindowMemory,
};
use podlink_protocol::wire::{AccelId, PartitionId, TlField, TlItem, TlPacker, TlUnpacker, Vc};

const TAGS: usize = 8;

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from(self.u8()) << 8 | u16::from(self.u8())
    }
    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |v, _| v << 8 | u64::from(self.u8()))
    }
    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        core::array::from_fn(|_| self.u8())
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

struct World {
    req: Box<Requester<TAGS, 8, 16>>,
    cpl: Box<Completer<4>>,
    mem: Box<WindowMemory<4096>>,
    now: Instant,
    submitted: HashSet<OpId>,
    completed: HashSet<OpId>,
    data: [u8; 1024],
}

impl World {
    fn drain(&mut self) {
        while let Some(c) = self.req.poll_completion() {
            assert!(self.submitted.contains(&c.id), "completion of an unknown op");
            assert!(self.completed.insert(c.id), "op completed twice");
        }
        while self.req.poll_event().is_some() {}
        while self.cpl.poll_event().is_some() {}
        assert!(self.req.in_flight() <= TAGS);
    }

    fn pump(&mut self, rounds: usize) {
        for _ in 0..rounds {
            let mut progress = false;
            if let Some(t) = self.req.poll_transmit(self.now, &mut Unlimited) {
                assert!(t.check().is_ok(), "the requester sends well-formed transfers");
                // A busy completer drops the request: the requester times out.
                let _ = self.cpl.handle_request(self.now, &t, self.mem.as_mut(), &mut Unlimited);
                progress = true;
            }
            if let Some(t) = self.cpl.poll_transmit(self.now, &mut Unlimited) {
                assert!(t.check().is_ok(), "the completer sends well-formed transfers");
                let _ = self.req.handle_response(self.now, &t, &mut Unlimited);
                progress = true;
            }
            self.drain();
            if !progress {
                break;
            }
        }
    }

    fn tick(&mut self, ns: u64) {
        self.now += Duration::from_ns(ns);
        if self.req.poll_timeout().is_some_and(|t| t <= self.now) {
            self.req.handle_timeout(self.now);
        }
        self.drain();
    }
}

/// An arbitrary transfer: a field parsed from 16 bytes with arbitrary data, or whatever a
/// TL unpacker makes of one arbitrary 64 B flit.
fn arbitrary_transfers(inp: &mut Input<'_>) -> Vec<TransferBuf> {
    if inp.u8() & 1 == 0 {
        let raw: [u8; 16] = inp.bytes();
        let Ok(field) = TlField::parse(&raw) else {
            return vec![];
        };
        let mut b = TransferBuf::default();
        b.field = field;
        let len = usize::from(inp.u16() % 300);
        let fill = inp.u8();
        b.set_data(&vec![fill; len]);
        b.poisoned = inp.u8();
        if inp.u8() & 1 != 0 {
            b.byte_enables = Some(inp.bytes());
        }
        vec![b]
    } else {
        let flit: [u8; 64] = inp.bytes();
        let mut out = vec![];
        let _ = TlUnpacker::new().unpack_flit(&flit, |item| {
            if let TlItem::Transfer(t) = item {
                out.push(TransferBuf::new(&t));
            }
        });
        out
    }
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    let (a, b) = (AccelId::new(1).unwrap(), AccelId::new(2).unwrap());
    let mut rc = RequesterConfig::new(a);
    rc.request_timeout = Duration::from_us(1);
    rc.queue_timeout = Duration::from_us(2);
    rc.tag_quarantine = Duration::from_ns(u64::from(inp.u8()) * 10);
    if inp.u8() & 1 != 0 {
        rc.ordering = OrderingMode::Strict;
    }
    let mut cc = CompleterConfig::new(b);
    cc.beats_per_response = inp.u8();
    let mut table = PartitionTable::all_in(PartitionId::default());
    if inp.u8() & 1 != 0 {
        table.set(a, PartitionId::new(1));
    }
    let mut w = World {
        req: Box::new(Requester::new(rc)),
        cpl: Box::new(Completer::new(cc, table)),
        mem: Box::new(WindowMemory::new(0)),
        now: Instant::ZERO,
        submitted: HashSet::new(),
        completed: HashSet::new(),
        data: core::array::from_fn(|i| i as u8),
    };
    let mut mem_poisoned = false;
    while !inp.is_empty() {
        match inp.u8() % 7 {
            0 => {
                let dst = if inp.u8() & 7 == 0 { AccelId::new(3).unwrap() } else { b };
                let vc = Vc::from_bits_truncate(inp.u8());
                let addr = u64::from(inp.u16()) * 4 % 5000;
                let len = inp.u16() % 1024 + 1;
                let d = &w.data[..usize::from(len)];
                let en: [u8; 128] = inp.bytes();
                let atomic = Atomic {
                    op: AtomicOp::ALL[usize::from(inp.u8() % 10)],
                    size: if inp.u8() & 1 != 0 { AtomicSize::Eight } else { AtomicSize::Four },
                    operand: inp.u64(),
                    compare: inp.u64(),
                };
                let op = match inp.u8() % 6 {
                    0 => Operation::Read { addr, len: u32::from(len) },
                    1 => Operation::Write { addr, data: d, enables: Some(&en) },
                    2 => Operation::WriteFull { addr: addr & !63, data: &w.data[..usize::from(len & !63)] },
                    3 => Operation::Message { addr: addr & !255, data: &w.data[..64] },
                    k => Operation::Atomic { addr, atomic, returning: k == 4 },
                };
                if let Ok(id) = w.req.submit(w.now, &Request { dst, vc, op }) {
                    assert!(w.submitted.insert(id), "op id reused while open");
                }
            }
            1 => {
                for b in arbitrary_transfers(&mut inp) {
                    let _ = w.req.handle_response(w.now, &b.as_transfer(), &mut Unlimited);
                    w.drain();
                }
            }
            2 => {
                for b in arbitrary_transfers(&mut inp) {
                    let _ = w.cpl.handle_request(w.now, &b.as_transfer(), w.mem.as_mut(), &mut Unlimited);
                }
            }
            3 => {
                let n = usize::from(inp.u8() % 16);
                w.pump(n);
            }
            4 => {
                let ns = u64::from(inp.u16());
                w.tick(ns);
            }
            5 => {
                // A request goes through a TL packer and unpacker; its response comes back
                // once as sent and once mangled.
                if let Some(t) = w.req.poll_transmit(w.now, &mut Unlimited) {
                    let mut packer: TlPacker = TlPacker::new();
                    packer.push(&TlItem::Transfer(t)).expect("a valid transfer");
                    let mut unpacker = TlUnpacker::new();
                    let mut got = vec![];
                    let mut flit = [0u8; 64];
                    while packer.poll_flit(&mut flit).is_some() {
                        unpacker
                            .unpack_flit(&flit, |item| {
                                if let TlItem::Transfer(t) = item {
                                    got.push(TransferBuf::new(&t));
                                }
                            })
                            .expect("the packer's flits unpack");
                    }
                    assert_eq!(got.len(), 1);
                    let _ = w.cpl.handle_request(w.now, &got[0].as_transfer(), w.mem.as_mut(), &mut Unlimited);
                    if let Some(t) = w.cpl.poll_transmit(w.now, &mut Unlimited) {
                        let mut b = TransferBuf::new(&t);
                        let _ = w.req.handle_response(w.now, &b.as_transfer(), &mut Unlimited);
                        if let TlField::UncompressedResponse(ref mut r) = b.field {
                            r.offset = inp.u8() & 3;
                            r.status = inp.u8() & 15;
                        }
                        let _ = w.req.handle_response(w.now, &b.as_transfer(), &mut Unlimited);
                    }
                    w.drain();
                }
            }
            _ => {
                if !mem_poisoned {
                    mem_poisoned = w.mem.poison(u64::from(inp.u16()) % 4096);
                }
            }
        }
    }
    // Liveness: drain the wire, let every deadline pass.
    for _ in 0..64 {
        w.pump(64);
        w.tick(10_000);
    }
    w.drain();
    assert_eq!(w.req.ops_open(), 0, "every op completed");
    assert_eq!(w.submitted, w.completed);
});
