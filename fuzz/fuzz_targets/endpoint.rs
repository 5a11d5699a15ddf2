//! Arbitrary TL fields, TL flits, DL flits, timeouts, link flaps and submissions into a
//! `txn::Endpoint`.
//!
//! The endpoint talks to a fuzzer-controlled peer: a bare `UaLink` that carries whatever TL
//! flits the fuzzer makes — raw 64-byte flits, or TL fields with arbitrary data packed by a
//! `TlPacker` — so the endpoint's TL unpacker, credit accounting, requester and completer see
//! arbitrary but link-valid input. Raw DL flits are injected too.
//!
//! The completer may hold its responses (`response_delay`), the host may take responses for
//! tags it does not own (`ReadSink::foreign_response`), and the endpoint may withhold one
//! target's credit returns, all under the fuzzer's control.
//!
//! Invariants: nothing panics; every operation completes at most once and only operations
//! that were submitted complete; the requester never has more requests in flight than tags;
//! `wants_transmit` is never false when a poll sends a DL flit; once time has passed every
//! deadline, every submitted operation has completed exactly once.
#![no_main]

use std::collections::HashSet;

use libfuzzer_sys::fuzz_target;
use podlink_protocol::flow::CreditTarget;
use podlink_protocol::link::{TlSink, UaLink, UaLinkConfig};
use podlink_protocol::retry::FLIT_LEN;
use podlink_protocol::time::{Duration, Instant};
use podlink_protocol::txn::{
    Atomic, AtomicOp, AtomicSize, ByteEnables, CompleterConfig, Endpoint, EndpointConfig,
    MemoryTarget, OpId, Operation, OrderingMode, PartitionTable, ReadData, ReadSink, Request,
    RequesterConfig, TargetError, WindowMemory,
};
use podlink_protocol::wire::{AccelId, PartitionId, TlField, TlItem, TlPacker, TlTransfer, Vc};

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

struct Host {
    mem: WindowMemory<4096>,
    read_bytes: usize,
    /// Take (and drop) responses for tags the requester does not own.
    take_foreign: bool,
    foreign: usize,
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
        self.read_bytes += d.data.len();
    }
    fn foreign_response(&mut self, _now: Instant, _t: &TlTransfer<'_>) -> bool {
        self.foreign += usize::from(self.take_foreign);
        self.take_foreign
    }
}

/// The peer discards what the endpoint sends (it only keeps the link going).
struct Discard;
impl TlSink for Discard {
    fn tl_flit(&mut self, _: &[u8; 64]) {}
}

type End = Endpoint<Host, TAGS, 8, 16, 4, 32, 16>;
type Peer = UaLink<32, 16>;

struct World {
    end: Box<End>,
    peer: Box<Peer>,
    now: Instant,
    submitted: HashSet<OpId>,
    completed: HashSet<OpId>,
    data: [u8; 1024],
}

impl World {
    fn drain(&mut self) {
        while let Some(c) = self.end.poll_completion() {
            assert!(self.submitted.contains(&c.id), "completion of an unknown op");
            assert!(self.completed.insert(c.id), "op completed twice");
        }
        while self.end.poll_event().is_some() {}
        while self.peer.poll_event().is_some() {}
        assert!(self.end.requester().in_flight() <= TAGS);
    }

    /// Exchange DL flits both ways for a few rounds.
    fn exchange(&mut self, rounds: usize) {
        let mut buf = [0u8; FLIT_LEN];
        for _ in 0..rounds {
            let mut moved = false;
            let wants = self.end.wants_transmit();
            if let Some(n) = self.end.poll_transmit(self.now, &mut buf) {
                assert!(wants, "sent a DL flit while wants_transmit was false");
                self.peer.handle_flit(self.now, &buf[..n], &mut Discard);
                moved = true;
            }
            if let Some(n) = self.peer.poll_transmit(self.now, &mut buf) {
                self.end.handle_frame(self.now, &buf[..n]);
                moved = true;
            }
            self.drain();
            if !moved {
                break;
            }
        }
    }

    fn tick(&mut self, ns: u64) {
        self.now += Duration::from_ns(ns);
        if self.end.poll_timeout().is_some_and(|t| t <= self.now) {
            self.end.handle_timeout(self.now);
        }
        if self.peer.poll_timeout().is_some_and(|t| t <= self.now) {
            self.peer.handle_timeout(self.now);
        }
        self.drain();
    }
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    let (a, b) = (AccelId::new(1).unwrap(), AccelId::new(2).unwrap());
    let mut rc = RequesterConfig::new(a);
    rc.request_timeout = Duration::from_us(2);
    rc.queue_timeout = Duration::from_us(4);
    rc.tag_quarantine = Duration::from_ns(u64::from(inp.u8()) * 10);
    rc.compress_requests = inp.u8() & 1 != 0;
    if inp.u8() & 1 != 0 {
        rc.ordering = OrderingMode::Strict;
    }
    let mut cc = CompleterConfig::new(a);
    cc.beats_per_response = inp.u8();
    cc.compress_responses = inp.u8() & 1 != 0;
    cc.response_delay = Duration::from_ns(u64::from(inp.u8() & 0x3f) * 8);
    let take_foreign = inp.u8() & 1 != 0;
    let mut cfg = EndpointConfig::new(rc, cc);
    let mut table = PartitionTable::all_in(PartitionId::default());
    if inp.u8() & 1 != 0 {
        table.set(b, PartitionId::new(1));
    }
    cfg.partitions = table;
    let mut w = World {
        end: Box::new(Endpoint::new(
            cfg,
            Host {
                mem: WindowMemory::new(0),
                read_bytes: 0,
                take_foreign,
                foreign: 0,
            },
        )),
        peer: Box::new(UaLink::new(UaLinkConfig::default())),
        now: Instant::ZERO,
        submitted: HashSet::new(),
        completed: HashSet::new(),
        data: core::array::from_fn(|i| i as u8),
    };
    w.end.handle_link_up(w.now);
    w.peer.handle_link_up(w.now);
    w.exchange(16);
    let mut steps = 0;
    while !inp.is_empty() && steps < 2000 {
        steps += 1;
        match inp.u8() % 9 {
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
                    2 => Operation::WriteFull {
                        addr: addr & !63,
                        data: &w.data[..usize::from(len & !63)],
                    },
                    3 => Operation::Message { addr: addr & !255, data: &w.data[..64] },
                    k => Operation::Atomic { addr, atomic, returning: k == 4 },
                };
                if let Ok(id) = w.end.submit(w.now, &Request { dst, vc, op }) {
                    assert!(w.submitted.insert(id), "op id reused while open");
                }
            }
            1 => {
                // A raw TL flit from the peer.
                let flit: [u8; 64] = inp.bytes();
                let _ = w.peer.submit_tl_flit(w.now, &flit);
            }
            2 => {
                // A TL field with arbitrary data, packed by a TL packer at the peer.
                let raw: [u8; 16] = inp.bytes();
                let Ok(field) = TlField::parse(&raw) else { continue };
                let len = usize::from(inp.u16() % 300);
                let fill = inp.u8();
                let body = vec![fill; len];
                let be: [u8; 32] = inp.bytes();
                let poisoned = inp.u8() & 0xf;
                let mut t = podlink_protocol::wire::TlTransfer::new(field, &body);
                t.poisoned = poisoned;
                if inp.u8() & 1 != 0 {
                    t.byte_enables = Some(&be);
                }
                let mut packer: TlPacker = TlPacker::new();
                if packer.push(&TlItem::Transfer(t)).is_ok() {
                    let mut f = [0u8; 64];
                    while packer.poll_flit(&mut f).is_some() {
                        let _ = w.peer.submit_tl_flit(w.now, &f);
                    }
                }
            }
            3 => {
                // A raw DL flit (mostly refused by the CRC or the sequence check).
                let mut f = [0u8; FLIT_LEN];
                for (i, x) in f.iter_mut().enumerate().take(64) {
                    *x = inp.u8().wrapping_add(i as u8);
                }
                w.end.handle_frame(w.now, &f);
                w.drain();
            }
            4 | 5 => {
                let n = usize::from(inp.u8() % 32);
                w.exchange(n);
            }
            6 => {
                let ns = u64::from(inp.u16());
                w.tick(ns);
            }
            8 => {
                // Withhold (or return again) one target's credits.
                let t = CreditTarget::ALL[usize::from(inp.u8()) % CreditTarget::COUNT];
                w.end.set_credits_withheld(t, inp.u8() & 1 != 0);
            }
            _ => {
                // Link flap, or a reset of both ends.
                if inp.u8() & 1 == 0 {
                    w.end.handle_link_down(w.now);
                    w.peer.handle_link_down(w.now);
                    w.tick(100);
                    w.end.handle_link_up(w.now);
                    w.peer.handle_link_up(w.now);
                } else {
                    w.end.reset(w.now);
                    w.peer.reset(w.now);
                    w.end.handle_link_up(w.now);
                    w.peer.handle_link_up(w.now);
                }
                w.drain();
            }
        }
    }
    // Liveness: keep the links going and let every deadline pass.
    for t in CreditTarget::ALL {
        w.end.set_credits_withheld(t, false);
    }
    for _ in 0..64 {
        w.exchange(64);
        w.tick(20_000);
    }
    w.drain();
    assert_eq!(w.end.requester().ops_open(), 0, "every op completed");
    assert_eq!(w.submitted, w.completed);
});
