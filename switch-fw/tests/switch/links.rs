//! The switch over real links: every port is a `port::LinkPort` (a protocol `UaLink` with the
//! protocol's TL credits), joined to a peer `LinkPort` by two `phy::Wire`s with fault
//! injection, driven in virtual time.
//!
//! ```text
//!   peer[p] ──up[p]: Wire (latency, FaultInjector)──▶ ports[p] ─┐
//!   (accelerator       ◀──down[p]: Wire────────────── LinkPort  ├─ fabric::service ─ Switch
//!    or switch)                                                  ┘
//! ```

use super::*;
use podlink_protocol::flow::{CreditClass, CreditTarget, Credits};
use podlink_protocol::phy::{FaultConfig, FaultInjector, Probability, Wire};
use podlink_protocol::retry::FLIT_LEN;
use podlink_protocol::time::Duration;
use podlink_protocol::wire::tl_pack::Transfer;
use podlink_protocol::wire::{
    Opcode, Tag, TlCompressedRequest, TlField, TlUncompressedRequest, TlUncompressedResponse,
};
use podlink_switch::fabric;
use podlink_switch::port::{
    LinkPort, LinkPortConfig, PortLink, SendError, DEVICE_TYPE_ACCELERATOR, DEVICE_TYPE_SWITCH,
};
use podlink_switch::{Event, Health};
use std::collections::{BTreeMap, VecDeque};

type Port = LinkPort<16, 16, 32>;
type W = Wire<8, FLIT_LEN>;
/// Frames a peer still has to send on one VC, with their data.
type Outbox = VecDeque<(TlField, Vec<u8>)>;

/// One flit on a x4 200G port.
const FLIT_TIME: Duration = Duration::from_ps(6_400);
const LATENCY: Duration = Duration::from_ns(20);

fn retry_tuned(mut c: LinkPortConfig) -> LinkPortConfig {
    // A flit lost last is only found by the ack timeout; 50 µs instead of 10.24 ms keeps
    // runs short, and lossy wires may time out several times in a row.
    c.link.retry.ack_timeout = Duration::from_us(50);
    c.link.retry.ack_timeout_replays = 16;
    c
}

/// The peer of switch port `p` in `small_pod`: accelerator `p` on 0..4, a switch on trunks.
fn peer_cfg(p: u8) -> LinkPortConfig {
    retry_tuned(if p < 4 {
        LinkPortConfig::new(DEVICE_TYPE_ACCELERATOR, u16::from(p), 0, 32)
    } else {
        LinkPortConfig::new(DEVICE_TYPE_SWITCH, 500 + u16::from(p), 1, 32)
    })
}

fn wire(ber: f64, seed: u64) -> W {
    let cfg = FaultConfig {
        bit_error_rate: Probability::from_f64(ber),
        ..FaultConfig::default()
    };
    Wire::new(FaultInjector::new(cfg, seed), LATENCY)
}

#[derive(Debug, Clone, Copy, Default)]
struct End {
    free_at: Instant,
    idle: bool,
}

/// A frame as delivered to a peer: the field (pool bit cleared: it is per hop) and data.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Got {
    field: TlField,
    data: Vec<u8>,
}

fn normalise(mut f: TlField) -> TlField {
    match &mut f {
        TlField::UncompressedRequest(r) => r.pool = false,
        TlField::UncompressedResponse(r) => r.pool = false,
        _ => {}
    }
    f
}

struct Fabric {
    sw: Box<Switch>,
    ports: Vec<Port>,
    peers: Vec<Port>,
    up: Vec<W>,
    down: Vec<W>,
    ends: Vec<[End; 2]>,
    now: Instant,
    /// Frames each peer still has to send, per VC (retried until credits allow; a VC out
    /// of credit does not hold up the others).
    outbox: Vec<[Outbox; 4]>,
    /// What each peer received, in order.
    got: Vec<Vec<Got>>,
    /// Peers keep (do not release) what they receive on these VCs.
    hold_vc: Vec<[bool; 4]>,
    held: Vec<Vec<u8>>,
    events: Vec<Event>,
    last_sent: Option<(TlField, Vec<u8>)>,
    buf: [u8; FLIT_LEN],
}

impl Fabric {
    /// `n` ports, with `peer_cfg` far ends and `ber[p]` on both wires of port `p`.
    fn new(
        build: impl FnOnce(&mut Tables) -> Result<(), ConfigError>,
        n: u8,
        peer: impl Fn(u8) -> LinkPortConfig,
        ber: impl Fn(u8) -> (f64, f64),
        seed: u64,
    ) -> Fabric {
        Fabric::with_ports(build, n, |c| c, peer, ber, seed)
    }

    /// [`Fabric::new`], with `port` changing the switch ports' configuration.
    fn with_ports(
        build: impl FnOnce(&mut Tables) -> Result<(), ConfigError>,
        n: u8,
        port: impl Fn(LinkPortConfig) -> LinkPortConfig,
        peer: impl Fn(u8) -> LinkPortConfig,
        ber: impl Fn(u8) -> (f64, f64),
        seed: u64,
    ) -> Fabric {
        let mut sw = Box::new(Switch::new());
        sw.stage_with(build).unwrap();
        sw.commit().unwrap();
        let mut f = Fabric {
            sw,
            ports: (0..n)
                .map(|p| {
                    Port::new(port(retry_tuned(LinkPortConfig::new(
                        DEVICE_TYPE_SWITCH,
                        900,
                        p.into(),
                        32,
                    ))))
                    .unwrap()
                })
                .collect(),
            peers: (0..n).map(|p| Port::new(peer(p)).unwrap()).collect(),
            up: (0..n)
                .map(|p| wire(ber(p).0, seed ^ (u64::from(p) << 8)))
                .collect(),
            down: (0..n)
                .map(|p| wire(ber(p).1, seed ^ (u64::from(p) << 8) ^ 1))
                .collect(),
            ends: vec![[End::default(); 2]; usize::from(n)],
            now: Instant::from_ps(1_000),
            outbox: vec![Default::default(); usize::from(n)],
            got: vec![Vec::new(); usize::from(n)],
            hold_vc: vec![[false; 4]; usize::from(n)],
            held: vec![Vec::new(); usize::from(n)],
            events: Vec::new(),
            last_sent: None,
            buf: [0; FLIT_LEN],
        };
        for p in 0..usize::from(n) {
            f.ports[p].handle_link_up(f.now);
            f.peers[p].handle_link_up(f.now);
        }
        f.run_for(Duration::from_us(20));
        assert!(f.ports.iter().all(Port::is_ready), "ports up");
        assert!(f.peers.iter().all(Port::is_ready), "peers up");
        f
    }

    fn wake(&mut self) {
        for e in self.ends.iter_mut().flatten() {
            e.idle = false;
        }
    }

    fn next_wakeup(&self) -> Option<Instant> {
        let timers = self
            .ports
            .iter()
            .chain(&self.peers)
            .filter_map(Port::poll_timeout);
        let wires = self.up.iter().chain(&self.down).filter_map(W::next_arrival);
        let tx = self
            .ends
            .iter()
            .flatten()
            .filter(|e| !e.idle)
            .map(|e| e.free_at.max(self.now));
        timers
            .chain(wires)
            .chain(tx)
            .chain([self.sw.poll_timeout()])
            .min()
    }

    fn step(&mut self) {
        let Some(t) = self.next_wakeup() else { return };
        self.now = self.now.max(t);
        let now = self.now;
        let n = self.ports.len();
        for p in 0..n {
            while self.up[p]
                .recv_with(now, |f| self.ports[p].handle_flit(now, f))
                .is_some()
            {
                self.ends[p][0].idle = false;
            }
            while self.down[p]
                .recv_with(now, |f| self.peers[p].handle_flit(now, f))
                .is_some()
            {
                self.ends[p][1].idle = false;
            }
            for (e, x) in [&mut self.ports[p], &mut self.peers[p]]
                .into_iter()
                .enumerate()
            {
                if x.poll_timeout().is_some_and(|d| d <= now) {
                    x.handle_timeout(now);
                    self.ends[p][e].idle = false;
                }
            }
        }
        let events = &mut self.events;
        let s = fabric::service(&mut self.sw, now, &mut self.ports, |e| events.push(e));
        if s.any() {
            for e in &mut self.ends {
                e[0].idle = false;
            }
        }
        // Peers: take what arrived, send what they have.
        for p in 0..n {
            let peer = &mut self.peers[p];
            while let Some(slot) = peer.next_arrival() {
                let f = peer.frame(slot).unwrap();
                self.got[p].push(Got {
                    field: normalise(f.field),
                    data: f.data().to_vec(),
                });
                let vc = usize::from(f.header().vc.get());
                if self.hold_vc[p][vc] {
                    self.held[p].push(slot);
                } else {
                    peer.release(now, slot);
                }
                self.ends[p][1].idle = false;
            }
            for q in self.outbox[p].iter_mut() {
                while let Some((f, data)) = q.front() {
                    match peer.send(&Transfer::new(*f, data)) {
                        Ok(_) => {
                            q.pop_front();
                            self.ends[p][1].idle = false;
                        }
                        Err(SendError::NoCredit | SendError::Busy) => break,
                        Err(e) => panic!("peer {p} send: {e:?}"),
                    }
                }
            }
        }
        for p in 0..n {
            for (e, (x, w)) in [
                (&mut self.ports[p], &mut self.down[p]),
                (&mut self.peers[p], &mut self.up[p]),
            ]
            .into_iter()
            .enumerate()
            {
                let end = &mut self.ends[p][e];
                if end.idle || end.free_at > now {
                    continue;
                }
                match x.poll_transmit(now, &mut self.buf) {
                    Some(len) => {
                        let done = now + FLIT_TIME;
                        w.send(done, &self.buf[..len]);
                        end.free_at = done;
                    }
                    None => end.idle = true,
                }
            }
        }
    }

    fn run_until(&mut self, deadline: Instant) {
        while self.next_wakeup().is_some_and(|t| t <= deadline) {
            self.step();
        }
        self.now = self.now.max(deadline);
    }

    fn run_for(&mut self, d: Duration) {
        let deadline = self.now + d;
        self.run_until(deadline);
    }

    fn send(&mut self, from: u8, f: TlField) {
        let n = podlink_protocol::wire::TlDataShape::of(&f).unwrap().bytes;
        let data: Vec<u8> = (0..n)
            .map(|i| (i as u8) ^ (f.tag().unwrap().get() as u8))
            .collect();
        let vc = usize::from(podlink_switch::Header::from_tl(&f).vc.get());
        self.outbox[usize::from(from)][vc].push_back((f, data));
        self.last_sent = Some((
            f,
            self.outbox[usize::from(from)][vc].back().unwrap().1.clone(),
        ));
        self.wake();
    }

    /// Take port `p`'s link down or up (both ends and both wires).
    fn set_link(&mut self, p: u8, up: bool) {
        let (p, now) = (usize::from(p), self.now);
        self.up[p].set_link_up(up);
        self.down[p].set_link_up(up);
        for x in [&mut self.ports[p], &mut self.peers[p]] {
            if up {
                x.handle_link_up(now);
            } else {
                x.handle_link_down(now);
            }
        }
        self.wake();
    }

    fn release_held(&mut self, p: u8) {
        let now = self.now;
        for slot in core::mem::take(&mut self.held[usize::from(p)]) {
            assert!(self.peers[usize::from(p)].release(now, slot));
        }
        self.wake();
    }

    fn quiet(&self) -> bool {
        self.outbox.iter().flatten().all(VecDeque::is_empty) && self.sw.queued_frames() == 0
    }

    /// Every receiver's credits were respected and every switch slot came back.
    fn check_conservation(&self) {
        for (p, e) in self.ports.iter().chain(&self.peers).enumerate() {
            assert_eq!(e.credit_receiver().stats().overruns, 0, "end {p}: overrun");
            assert_eq!(e.stats().overruns + e.stats().no_slot, 0, "end {p}");
            assert_eq!(e.credit_sender().stats().return_above_grant, 0, "end {p}");
        }
        for (p, e) in self.ports.iter().enumerate() {
            assert_eq!(e.held_slots(), 0, "port {p} holds slots");
        }
    }
}

fn write(src: u16, dst: u16, vc: u8, tag: u16, bytes: usize, region: u64) -> TlField {
    TlField::UncompressedRequest(TlUncompressedRequest {
        cmd: Opcode::WriteFull,
        vchan: Vc::new(vc).unwrap(),
        tag: Tag::new(tag).unwrap(),
        len: (bytes / 4 - 1) as u8,
        numbeats: (bytes.div_ceil(64) - 1) as u8,
        addr: (region << 8) >> 2,
        srcaccid: aid(src),
        dstaccid: aid(dst),
        ..Default::default()
    })
}

fn read(src: u16, dst: u16, vc: u8, tag: u16, region: u64) -> TlField {
    TlField::UncompressedRequest(TlUncompressedRequest {
        cmd: Opcode::Read,
        vchan: Vc::new(vc).unwrap(),
        tag: Tag::new(tag).unwrap(),
        len: 15,
        addr: (region << 8) >> 2,
        srcaccid: aid(src),
        dstaccid: aid(dst),
        ..Default::default()
    })
}

fn response(src: u16, dst: u16, vc: u8, tag: u16) -> TlField {
    TlField::UncompressedResponse(TlUncompressedResponse {
        vchan: Vc::new(vc).unwrap(),
        tag: Tag::new(tag).unwrap(),
        rd_wr: true,
        last: true,
        srcaccid: aid(src),
        dstaccid: aid(dst),
        ..Default::default()
    })
}

/// (src, dst, vc, tag) of a delivered field.
fn key(f: &TlField) -> (u16, u16, u8, u16) {
    match f {
        TlField::UncompressedRequest(r) => (
            r.srcaccid.get(),
            r.dstaccid.get(),
            r.vchan.get(),
            r.tag.get(),
        ),
        TlField::UncompressedResponse(r) => (
            r.srcaccid.get(),
            r.dstaccid.get(),
            r.vchan.get(),
            r.tag.get(),
        ),
        _ => unreachable!(),
    }
}

#[test]
fn links_forward_end_to_end_exactly_once_in_order_over_lossy_wires() {
    for seed in 1..=3u64 {
        // Flit error rate ≈ 5 % on every wire, both directions.
        let mut f = Fabric::new(small_pod, PORTS as u8, peer_cfg, |_| (1e-5, 1e-5), seed);
        let mut sent: BTreeMap<(u16, u16, u8, u16), Got> = BTreeMap::new();
        let mut next_tag: BTreeMap<(u16, u16, u8), u16> = BTreeMap::new();
        let mut tag = |s: u16, d: u16, v: u8| {
            let t = next_tag.entry((s, d, v)).or_insert(0);
            *t += 1;
            *t
        };
        // Partition 0: accelerators 0, 1 and remote 100..200; partition 1: 2, 3, 200..300.
        let flows: Vec<(u8, u16, u16)> = vec![
            (0, 0, 1),
            (1, 1, 0),
            (0, 0, 150),
            (1, 1, 120),
            (2, 2, 3),
            (3, 3, 250),
            (4, 150, 0),
            (5, 160, 1),
            (6, 260, 2),
            (7, 270, 3),
        ];
        for round in 0..30u16 {
            for &(port, src, dst) in &flows {
                let vc = ((round + src) % 4) as u8;
                let t = tag(src, dst, vc);
                let fld = match (round + dst) % 4 {
                    0 => write(src, dst, vc, t, 64 * (1 + usize::from(round % 4)), 7),
                    1 => read(src, dst, vc, t, 7),
                    2 => response(src, dst, vc, t),
                    _ => write(src, dst, vc, t, 256, u64::from(round)),
                };
                f.send(port, fld);
                let (_, data) = f.last_sent.clone().unwrap();
                sent.insert(key(&fld), Got { field: fld, data });
            }
            f.run_for(Duration::from_ns(300));
        }
        f.run_for(Duration::from_us(500));
        assert!(f.quiet(), "seed {seed}: everything sent");
        // Exactly once: every frame arrived at one peer, no frame twice, nothing extra.
        let mut seen = BTreeMap::new();
        for (p, got) in f.got.iter().enumerate() {
            for g in got {
                let k = key(&g.field);
                assert_eq!(sent.get(&k), Some(g), "seed {seed}: peer {p} got {k:?}");
                assert!(seen.insert(k, p).is_none(), "seed {seed}: {k:?} twice");
            }
        }
        assert_eq!(seen.len(), sent.len(), "seed {seed}: lost frames");
        // In order: per (src, dst, VC) at each receiving peer (local destinations have one
        // path, so that is the whole flow).
        for (p, got) in f.got.iter().enumerate() {
            let mut last: BTreeMap<(u16, u16, u8), u16> = BTreeMap::new();
            for g in got {
                let (s, d, v, t) = key(&g.field);
                let prev = last.insert((s, d, v), t).unwrap_or(0);
                assert!(
                    t > prev,
                    "seed {seed}: peer {p}: {s}->{d} vc {v}: {t} after {prev}"
                );
            }
        }
        // The lossy wires caused real replays, and the switch sees them through `stats()`.
        let (crc, replays) = f.ports.iter().fold((0, 0), |(c, r), x| {
            let s = PortLink::stats(x);
            (c + s.crc_errors, r + s.replays)
        });
        assert!(
            crc > 0 && replays > 0,
            "seed {seed}: crc {crc} replays {replays}"
        );
        let c = f.sw.counters().total();
        assert_eq!(c.tx_frames as usize, sent.len());
        assert_eq!(c.drops(), 0);
        f.check_conservation();
    }
}

/// Address compression is per link (a 4-way cache on each side): accelerators compress
/// their requests toward the switch, each switch port expands what arrives with its own
/// decoder before the frame is forwarded, and, when the switch ports compress too, the
/// receiving accelerator's port expands again. Every request arrives as sent (uncompressed,
/// loading no way), over lossy wires, and compression really happened on both hops. A
/// switch that forwarded compressed requests unchanged (the old `FIXME`) would hand the
/// destination a way its cache never loaded.
#[cfg(feature = "addr-compression")]
#[test]
fn links_compressed_requests_are_expanded_at_each_hop() {
    for switch_compresses in [false, true] {
        let compressing = |mut c: LinkPortConfig| {
            c.compress_requests = true;
            c
        };
        let mut f = Fabric::with_ports(
            small_pod,
            PORTS as u8,
            |c| LinkPortConfig {
                compress_requests: switch_compresses,
                ..c
            },
            |p| compressing(peer_cfg(p)),
            |_| (1e-6, 1e-6),
            7,
        );
        let mut sent = BTreeMap::new();
        let full = |fld: TlField| match fld {
            TlField::UncompressedRequest(r) => {
                TlField::UncompressedRequest(TlUncompressedRequest { attr: 0xff, ..r })
            }
            other => other,
        };
        let mut tag = 0u16;
        // Accelerators 0..4 write and read a few 256 B blocks of two 1 MB regions of their
        // partner's memory (0 and 1, 2 and 3 share a partition; ways hit after the first
        // request per region), now and then far away (a miss that loads a fresh way).
        for round in 0..24u16 {
            for src in 0..4u16 {
                let dst = src ^ 1;
                tag += 1;
                let block = u64::from(round % 5) + if round % 2 == 0 { 0 } else { 1 << 12 };
                let block = if round % 7 == 6 {
                    block + (9 << 12)
                } else {
                    block
                };
                let fld = full(if round % 3 == 0 {
                    read(src, dst, 0, tag, block)
                } else {
                    write(src, dst, 0, tag, 64 * (1 + usize::from(round % 4)), block)
                });
                f.send(src as u8, fld);
                let (_, data) = f.last_sent.clone().unwrap();
                sent.insert(key(&fld), Got { field: fld, data });
            }
            f.run_for(Duration::from_ns(400));
        }
        f.run_for(Duration::from_us(300));
        assert!(f.quiet(), "everything sent");
        let got: Vec<&Got> = f.got.iter().flatten().collect();
        assert_eq!(got.len(), sent.len(), "every request arrived once");
        for g in got {
            assert_eq!(sent.get(&key(&g.field)), Some(g), "arrived as sent");
        }
        let sum = |ends: &[Port], get: fn(&podlink_switch::port::LinkPortStats) -> u64| {
            ends.iter().map(|e| get(e.stats())).sum::<u64>()
        };
        let (peers_sent, ports_expanded) = (
            sum(&f.peers, |s| s.requests_compressed),
            sum(&f.ports, |s| s.requests_expanded),
        );
        assert!(peers_sent > 0, "accelerators compressed");
        assert_eq!(ports_expanded, peers_sent);
        let (ports_sent, peers_expanded) = (
            sum(&f.ports, |s| s.requests_compressed),
            sum(&f.peers, |s| s.requests_expanded),
        );
        assert_eq!(ports_sent > 0, switch_compresses);
        assert_eq!(peers_expanded, ports_sent);
        let errors = sum(&f.ports, |s| s.expand_errors) + sum(&f.peers, |s| s.expand_errors);
        assert_eq!(errors, 0);
        f.check_conservation();
    }
}

/// A compressed request naming a way its port's cache never loaded cannot be expanded (nor,
/// in a build without the feature `addr-compression`, as the firmware's, can any compressed
/// request): the switch port drops it, counts it (`expand_errors`; `no_slot` without the
/// feature) and gives its credits back. Nothing is forwarded, and the sender holds its whole
/// grant again.
#[test]
fn links_a_compressed_request_that_cannot_be_expanded_is_dropped_and_counted() {
    let mut f = Fabric::new(small_pod, PORTS as u8, peer_cfg, |_| (0.0, 0.0), 3);
    let read = TlField::CompressedRequest(TlCompressedRequest {
        cmd: 0,
        vchan: Vc::new(0).unwrap(),
        tag: Tag::new(5).unwrap(),
        addr: 4,
        srcaccid: aid(0),
        dstaccid: aid(1),
        cway: 2,
        ..Default::default()
    });
    f.send(0, read);
    f.run_for(Duration::from_us(20));
    assert!(f.quiet(), "sent");
    assert!(f.got.iter().all(Vec::is_empty), "nothing forwarded");
    let s = f.ports[0].stats();
    let counted = if cfg!(feature = "addr-compression") {
        (1, 0)
    } else {
        (0, 1)
    };
    assert_eq!((s.expand_errors, s.no_slot), counted, "{s:?}");
    assert_eq!(f.ports[0].held_slots(), 0);
    holds_its_whole_grant(&f.peers[0], "peer 0");
}

/// `end` holds every credit its peer granted it (whatever it sent was released).
fn holds_its_whole_grant(end: &Port, what: &str) {
    let tx = end.credit_sender();
    for t in CreditTarget::ALL {
        for cl in CreditClass::ALL {
            assert_eq!(tx.available(t, cl), tx.grant(t, cl), "{what} {t:?} {cl:?}");
        }
    }
}

#[test]
fn links_spoofed_and_cross_partition_frames_are_dropped_and_their_credits_returned() {
    let mut f = Fabric::new(small_pod, PORTS as u8, peer_cfg, |_| (0.0, 0.0), 7);
    f.send(0, write(1, 0, 0, 1, 64, 1)); // accelerator 0 claims to be 1
    f.send(0, write(0, 2, 0, 2, 64, 1)); // partition 0 → partition 1
    f.send(4, write(0, 1, 0, 3, 64, 1)); // a local ID arriving on a trunk
    f.send(4, write(150, 2, 0, 4, 64, 1)); // remote partition 0 → local partition 1
    f.send(0, write(0, 1, 0, 5, 64, 1)); // legal
    f.run_for(Duration::from_us(20));
    assert!(f
        .got
        .iter()
        .flatten()
        .map(|g| key(&g.field))
        .eq([(0, 1, 0, 5)]));
    let c = f.sw.counters().total();
    assert_eq!((c.spoofed, c.cross_partition), (2, 2));
    let drops = f
        .events
        .iter()
        .filter(|e| matches!(e, Event::Dropped { .. }))
        .count();
    assert_eq!(drops, 4);
    // Dropped frames' receive slots were released: the senders hold their whole grant again.
    for p in [0usize, 4] {
        holds_its_whole_grant(&f.peers[p], &format!("peer {p}"));
    }
    f.check_conservation();
}

#[test]
fn links_credit_exhaustion_on_one_vc_queues_and_never_overruns_the_peer() {
    // Accelerator 1 grants one request credit per VC and keeps what arrives on VC 1.
    let peer = |p: u8| {
        let mut c = peer_cfg(p);
        if p == 1 {
            c.grant.capacity = [Credits([1, 1, 4, 4]); 5];
            c.grant.capacity[4] = Credits::ZERO;
        }
        c
    };
    let mut f = Fabric::new(small_pod, PORTS as u8, peer, |_| (0.0, 0.0), 3);
    f.hold_vc[1][1] = true;
    for t in 1..=12 {
        f.send(0, write(0, 1, 1, t, 64, 1));
        f.send(0, write(0, 1, 0, t, 64, 2));
    }
    f.run_for(Duration::from_us(50));
    // VC 0 flows; VC 1 stops after the one credit: the rest wait in the switch (up to the
    // switch port's grant to accelerator 0) and at the sender, never beyond.
    let got = |f: &Fabric, vc: u8| {
        f.got[1]
            .iter()
            .filter(|g| key(&g.field).2 == vc)
            .map(|g| key(&g.field).3)
            .collect::<Vec<_>>()
    };
    assert_eq!(got(&f, 0), (1..=12).collect::<Vec<_>>());
    assert_eq!(got(&f, 1), vec![1]);
    let queued = f.sw.queue_depth(1, vc(1));
    assert!(queued > 0, "VC 1 frames queue in the switch");
    assert!(
        !f.outbox[0][1].is_empty(),
        "and at the sender, which waits for credits"
    );
    assert!(f.peers[0].credit_sender().stats().credit_stalls > 0);
    assert!(f.ports[1].credit_sender().stats().credit_stalls > 0);
    assert_eq!(f.peers[1].credit_receiver().stats().overruns, 0);
    // Releasing one buffer at a time lets exactly one more through, in order.
    f.hold_vc[1][1] = false;
    f.release_held(1);
    f.run_for(Duration::from_us(100));
    assert_eq!(got(&f, 1), (1..=12).collect::<Vec<_>>());
    assert!(f.quiet());
    f.check_conservation();
}

#[test]
fn links_degraded_port_is_drained_from_adaptive_choice() {
    // The wire into trunk port 4 has a flit error rate of ≈ 10 %.
    let mut f = Fabric::new(
        small_pod,
        PORTS as u8,
        peer_cfg,
        |p| if p == 4 { (2e-5, 0.0) } else { (0.0, 0.0) },
        11,
    );
    // Remote accelerator 150 (behind trunk port 4) writes to 0 steadily for 4 ms.
    let mut t = 0;
    for _ in 0..400 {
        t += 1;
        f.send(4, write(150, 0, 0, t, 64, 3));
        f.run_for(Duration::from_us(10));
    }
    let s = PortLink::stats(&f.ports[4]);
    assert!(s.replays >= 8 && s.crc_errors >= 8, "{s:?}");
    assert_eq!(f.sw.health(4), Health::Degraded);
    assert!(f.events.iter().any(|e| matches!(
        e,
        Event::HealthChanged {
            port: 4,
            to: Health::Degraded,
            ..
        }
    )));
    // New flows from accelerator 0 to remote IDs avoid port 4 (it has as much credit as
    // the others), and all arrive.
    let before = f.got[4].len();
    for (i, dst) in (100..140u16).enumerate() {
        f.send(0, write(0, dst, (i % 4) as u8, 1, 64, i as u64));
        f.run_for(Duration::from_us(2));
    }
    f.run_for(Duration::from_us(100));
    assert_eq!(f.got[4].len(), before, "degraded port drained");
    let arrived: usize = [5usize, 6, 7].iter().map(|&p| f.got[p].len()).sum();
    assert_eq!(arrived, 40);
    assert_eq!(f.got[0].len(), 400, "the noisy link lost nothing");
    f.check_conservation();
}

#[test]
fn links_flap_flushes_queued_frames_and_frees_their_slots() {
    let peer = |p: u8| {
        let mut c = peer_cfg(p);
        if p == 1 {
            c.grant.capacity = [Credits([1, 1, 4, 4]); 5];
            c.grant.capacity[4] = Credits::ZERO;
        }
        c
    };
    let mut f = Fabric::new(small_pod, PORTS as u8, peer, |_| (0.0, 0.0), 5);
    f.hold_vc[1][0] = true;
    for t in 1..=6 {
        f.send(0, write(0, 1, 0, t, 64, 1));
    }
    f.run_for(Duration::from_us(20));
    let queued = f.sw.queue_depth(1, vc(0));
    assert!(queued > 0);
    assert!(f.ports[0].held_slots() >= usize::from(queued));
    // Port 1's link goes down at both ends: its queue is flushed, and the flushed frames'
    // slots at port 0 are released through `poll_discarded`.
    f.set_link(1, false);
    f.run_for(Duration::from_us(5));
    let flushed = f.sw.counters().ports[1].flushed;
    assert_eq!(flushed, u32::from(queued));
    assert_eq!(f.sw.discarded_frames(), 0);
    assert!(f
        .events
        .iter()
        .any(|e| matches!(e, Event::Flushed { port: 1, .. })));
    // The sender's last frame, which had waited for credit, reached the switch while the
    // only way to accelerator 1 was down: dropped as unreachable, its slot released. Back
    // up, the link resumes where it was (the frame in the peer's hands stays delivered).
    f.set_link(1, true);
    f.hold_vc[1][0] = false;
    f.release_held(1);
    f.run_for(Duration::from_us(100));
    let delivered = f.got[1].len() as u32;
    let unreachable = f.sw.counters().ports[0].unreachable;
    assert_eq!((delivered, flushed, unreachable), (1, 4, 1));
    assert!(f.quiet());
    f.check_conservation();
}

/// `small_pod` plus a ninth port, unused in the configuration and routed nowhere.
fn pod_with_spare(t: &mut Tables) -> Result<(), ConfigError> {
    small_pod(t)?;
    t.set_num_ports(9)?;
    Ok(())
}

#[test]
fn links_bring_up_sets_the_port_attachment() {
    let peer = |p: u8| match p {
        // Port 2 is configured for accelerator 2; its peer says it is accelerator 3.
        2 => retry_tuned(LinkPortConfig::new(DEVICE_TYPE_ACCELERATOR, 3, 0, 32)),
        // Port 8 is unused in the configuration; a switch answers on it.
        8 => retry_tuned(LinkPortConfig::new(DEVICE_TYPE_SWITCH, 508, 1, 32)),
        p => peer_cfg(p),
    };
    let mut f = Fabric::new(pod_with_spare, 9, peer, |_| (0.0, 0.0), 9);
    // Before learning, frames arriving on port 8 are dropped (nothing attached).
    f.send(8, write(150, 0, 0, 1, 64, 1));
    f.run_for(Duration::from_us(10));
    assert_eq!(f.sw.counters().ports[8].bad_ingress, 1);
    let mut learned = Vec::new();
    for p in 0..9u8 {
        let peer = f.ports[usize::from(p)].peer().unwrap();
        assert_eq!(peer.port_number, if p < 4 { 0 } else { 1 });
        learned.push(f.sw.learn_attachment(p.into(), peer.attachment()));
    }
    for (p, r) in learned.iter().enumerate() {
        match p {
            2 => assert_eq!(
                *r,
                Err(ConfigError::RouteToWrongAccelerator { dst: 2, port: 2 })
            ),
            8 => assert_eq!(*r, Ok(true)),
            _ => assert_eq!(*r, Ok(false)),
        }
    }
    assert_eq!(f.sw.tables().port(8).unwrap().attach, Attachment::Switch);
    assert_eq!(
        f.sw.tables().port(2).unwrap().attach,
        Attachment::Accelerator(aid(2))
    );
    let events: Vec<Event> = core::iter::from_fn(|| f.sw.poll_event()).collect();
    assert!(events.contains(&Event::AttachmentLearned {
        port: 8,
        attach: Attachment::Switch
    }));
    // Port 8 is now a trunk: remote sources pass, local ones are spoofed. The peer of
    // port 2 claims accelerator 3 but the refused claim changed nothing: its frames are
    // spoofed.
    f.send(8, write(150, 0, 0, 2, 64, 1));
    f.send(8, write(1, 0, 0, 3, 64, 1));
    f.send(2, write(3, 2, 0, 4, 64, 1));
    f.run_for(Duration::from_us(10));
    assert!(f.got[0].iter().map(|g| key(&g.field)).eq([(150, 0, 0, 2)]));
    assert_eq!(f.sw.counters().total().spoofed, 2);
    f.check_conservation();
}
