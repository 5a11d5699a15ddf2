//! Arbitrary TL flits, TL fields (compressed requests and cache loads among them), DL flits,
//! timeouts, link flaps and resets into a switch `port::LinkPort` (built with the feature
//! `addr-compression`, which the fuzz workspace gets from podlink-sim), whose owner takes,
//! holds and releases what arrives and sends frames back.
//!
//! The port talks to a fuzzer-controlled peer: a bare `UaLink` that carries whatever TL
//! flits the fuzzer makes — raw 64-byte flits, or TL fields with arbitrary data packed by a
//! `TlPacker` — so the port's TL unpacker, credit receiver, address-cache decoder and receive
//! slots see arbitrary but link-valid input.
//!
//! Invariants: nothing panics; the port never holds more slots than it has; nothing it hands
//! out is compressed or loads a cache way (what goes on past a port is uncompressed, since
//! the caches are per link); once everything is released, no slot stays held.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podlink_protocol::link::{TlSink, UaLink, UaLinkConfig};
use podlink_protocol::retry::FLIT_LEN;
use podlink_protocol::time::{Duration, Instant};
use podlink_protocol::wire::{TlField, TlItem, TlPacker, TlTransfer};
use podlink_switch::port::{LinkPort, LinkPortConfig, DEVICE_TYPE_SWITCH};

const SLOTS: usize = 16;
type Port = LinkPort<8, 8, SLOTS>;
type Peer = UaLink<32, 16>;

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
    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        core::array::from_fn(|_| self.u8())
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The peer discards what the port sends (it only keeps the link going).
struct Discard;
impl TlSink for Discard {
    fn tl_flit(&mut self, _: &[u8; 64]) {}
}

struct World {
    port: Box<Port>,
    peer: Box<Peer>,
    now: Instant,
    /// Slots taken from the port and not yet released.
    held: Vec<u8>,
    /// Release what arrives at once (else hold it until told).
    release_at_once: bool,
}

impl World {
    /// Take what arrived: check it, then release it or hold it.
    fn take(&mut self) {
        while let Some(slot) = self.port.next_arrival() {
            let f = self.port.frame(slot).expect("a slot handed out holds a frame");
            assert!(
                !matches!(f.field, TlField::CompressedRequest(_)),
                "a compressed request went past the port"
            );
            if let TlField::UncompressedRequest(r) = f.field {
                assert!(!r.cload, "a cache load went past the port");
            }
            if self.release_at_once {
                assert!(self.port.release(self.now, slot));
            } else {
                self.held.push(slot);
            }
        }
        assert!(self.port.held_slots() <= SLOTS);
        while self.port.poll_event().is_some() {}
        while self.peer.poll_event().is_some() {}
    }

    /// Exchange DL flits both ways for a few rounds.
    fn exchange(&mut self, rounds: usize) {
        let mut buf = [0u8; FLIT_LEN];
        for _ in 0..rounds {
            let mut moved = false;
            if let Some(n) = self.port.poll_transmit(self.now, &mut buf) {
                self.peer.handle_flit(self.now, &buf[..n], &mut Discard);
                moved = true;
            }
            if let Some(n) = self.peer.poll_transmit(self.now, &mut buf) {
                self.port.handle_flit(self.now, &buf[..n]);
                moved = true;
            }
            self.take();
            if !moved {
                break;
            }
        }
    }

    fn tick(&mut self, ns: u64) {
        self.now += Duration::from_ns(ns);
        if self.port.poll_timeout().is_some_and(|t| t <= self.now) {
            self.port.handle_timeout(self.now);
        }
        if self.peer.poll_timeout().is_some_and(|t| t <= self.now) {
            self.peer.handle_timeout(self.now);
        }
        self.take();
    }
}

/// A TL field from 16 fuzzer bytes, with arbitrary data, packed into TL flits.
fn packed(inp: &mut Input<'_>, mut flit: impl FnMut(&[u8; 64])) {
    let raw: [u8; 16] = inp.bytes();
    let Ok(field) = TlField::parse(&raw) else {
        return;
    };
    let len = usize::from(inp.u16() % 300);
    let body = vec![inp.u8(); len];
    let be: [u8; 32] = inp.bytes();
    let mut t = TlTransfer::new(field, &body);
    t.poisoned = inp.u8() & 0xf;
    if inp.u8() & 1 != 0 {
        t.byte_enables = Some(&be);
    }
    let mut packer: TlPacker = TlPacker::new();
    if packer.push(&TlItem::Transfer(t)).is_ok() {
        let mut f = [0u8; 64];
        while packer.poll_flit(&mut f).is_some() {
            flit(&f);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    let mut cfg = LinkPortConfig::new(DEVICE_TYPE_SWITCH, 900, 3, SLOTS);
    cfg.compress_requests = inp.u8() & 1 != 0;
    let Ok(port) = Port::new(cfg) else {
        return;
    };
    let mut w = World {
        port: Box::new(port),
        peer: Box::new(UaLink::new(UaLinkConfig::default())),
        now: Instant::ZERO,
        held: Vec::new(),
        release_at_once: inp.u8() & 1 != 0,
    };
    w.port.handle_link_up(w.now);
    w.peer.handle_link_up(w.now);
    w.exchange(32);
    let mut steps = 0;
    while !inp.is_empty() && steps < 2000 {
        steps += 1;
        match inp.u8() % 9 {
            0 => {
                // A raw TL flit from the peer.
                let flit: [u8; 64] = inp.bytes();
                let _ = w.peer.submit_tl_flit(w.now, &flit);
            }
            1 | 2 => {
                // A TL field with arbitrary data, packed at the peer.
                let (peer, now) = (&mut w.peer, w.now);
                packed(&mut inp, |f| {
                    let _ = peer.submit_tl_flit(now, f);
                });
            }
            3 => {
                // The port's owner sends a frame of its own (refused unless it is valid and
                // credits allow).
                let raw: [u8; 16] = inp.bytes();
                let Ok(field) = TlField::parse(&raw) else { continue };
                let len = usize::from(inp.u16() % 300);
                let body = vec![inp.u8(); len];
                let _ = w.port.send(&TlTransfer::new(field, &body));
            }
            4 => {
                // A raw DL flit (mostly refused by the CRC or the sequence check).
                let mut f = [0u8; FLIT_LEN];
                for (i, x) in f.iter_mut().enumerate().take(64) {
                    *x = inp.u8().wrapping_add(i as u8);
                }
                w.port.handle_flit(w.now, &f);
                w.take();
            }
            5 => {
                let n = usize::from(inp.u8() % 32);
                w.exchange(n);
            }
            6 => {
                let ns = u64::from(inp.u16());
                w.tick(ns);
            }
            7 => {
                // Release what is held; switch between holding and releasing at once.
                let now = w.now;
                for slot in std::mem::take(&mut w.held) {
                    assert!(w.port.release(now, slot), "a held slot released");
                }
                w.release_at_once = inp.u8() & 1 != 0;
            }
            _ => {
                // Link flap, or a reset of both ends.
                if inp.u8() & 1 == 0 {
                    w.port.handle_link_down(w.now);
                    w.peer.handle_link_down(w.now);
                    w.tick(100);
                    w.port.handle_link_up(w.now);
                    w.peer.handle_link_up(w.now);
                } else {
                    w.port.reset(w.now);
                    w.peer.reset(w.now);
                    w.port.handle_link_up(w.now);
                    w.peer.handle_link_up(w.now);
                }
                w.take();
            }
        }
    }
    // Release everything; nothing stays held.
    w.release_at_once = true;
    let now = w.now;
    for slot in std::mem::take(&mut w.held) {
        assert!(w.port.release(now, slot));
    }
    for _ in 0..8 {
        w.exchange(64);
        w.tick(20_000);
    }
    assert_eq!(w.port.held_slots(), 0, "every slot came back");
});
