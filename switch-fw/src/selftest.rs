//! The self-test the firmware runs at boot (and the host tests run too): load a
//! configuration, bring every port up over an in-memory link between two protocol
//! `UaLink`s, forward a batch of frames including spoofed, cross-partition and
//! degraded-port cases, check every decision, print the counters
//! (`spec-notes/switch.md#firmware-and-self-test`).
//!
//! The pod it configures ([`pod_tables`]) is the one the PERF figures are measured on:
//! 64 ports and 1024 accelerator IDs. Ports 0..32 attach local accelerators 0..32; ports
//! 32..64 are trunks to 8 other switch planes (4 ports per plane). Every remote ID is routed
//! over 8 trunk ways, one per plane (port `32 + 4·plane + dst/256`). Accelerator `a` is in
//! partition `(a / 8) % 4`.

use crate::config::ConfigError;
use crate::fabric::{self, shuttle};
use crate::health::Health;
use crate::port::{
    LinkPort, LinkPortConfig, PortLink, RxFrame, SendError, SimPort, DEVICE_TYPE_ACCELERATOR,
    DEVICE_TYPE_SWITCH,
};
use crate::tables::{Attachment, PartitionCfg, PortCfg, RateCap, Tables};
use crate::{DropReason, Event, Frame, Header, Switch, MAX_PORTS};
use embedded_io::Write;
use podlink_protocol::flow::Credits;
use podlink_protocol::retry::FLIT_LEN;
use podlink_protocol::time::{Duration, Instant};
use podlink_protocol::wire::tl_pack::Transfer;
use podlink_protocol::wire::{
    AccelId, Opcode, PartitionId, Tag, TlField, TlUncompressedRequest, Vc,
};

/// Ports of the self-test pod.
pub const POD_PORTS: u8 = 64;
/// Local accelerators (on ports `0..LOCAL`).
pub const LOCAL: u16 = 32;
/// Trunk ways per remote destination.
pub const WAYS: u8 = 8;
/// Generation of the self-test configuration.
pub const GENERATION: u32 = 0x5e1f;

fn aid(v: u16) -> AccelId {
    AccelId::from_bits_truncate(v)
}

/// The partition index of accelerator `a` in the self-test pod.
pub const fn partition_index(a: u16) -> u8 {
    ((a / 8) % 4) as u8
}

/// The trunk way of remote destination `dst` in plane `k`.
pub const fn trunk_port(dst: u16, k: u8) -> u8 {
    LOCAL as u8 + 4 * k + ((dst / 256) % 4) as u8
}

/// Fill `t` with the self-test pod (see the module docs).
///
/// # Errors
/// None in practice; the builder's errors are passed through.
pub fn pod_tables(t: &mut Tables) -> Result<(), ConfigError> {
    t.set_num_ports(u16::from(POD_PORTS))?;
    t.set_generation(GENERATION);
    t.set_adaptive(true);
    t.set_vc_weights([4, 2, 1, 1])?;
    for p in 0..POD_PORTS {
        let attach = if u16::from(p) < LOCAL {
            Attachment::Accelerator(aid(u16::from(p)))
        } else {
            Attachment::Switch
        };
        let plane = if u16::from(p) < LOCAL {
            0
        } else {
            (p - LOCAL as u8) / 4 + 1
        };
        t.set_port(u16::from(p), PortCfg { attach, plane })?;
    }
    for i in 0..4u16 {
        let rate_cap = (i == 3).then_some(RateCap {
            bytes_per_us: 1000,
            burst_bytes: 8192,
        });
        t.add_partition(PartitionCfg {
            id: PartitionId::from_bits_truncate(100 + i),
            weight: (i + 1) as u8,
            rate_cap,
        })?;
    }
    for a in 0..crate::MAX_IDS as u16 {
        t.add_member(partition_index(a), aid(a))?;
        if a < LOCAL {
            t.set_route(aid(a), &[a])?;
        } else {
            let mut ways = [0u16; WAYS as usize];
            for (k, w) in (0u8..).zip(ways.iter_mut()) {
                *w = u16::from(trunk_port(a, k));
            }
            t.set_route(aid(a), &ways)?;
        }
    }
    Ok(())
}

/// Why the self-test failed: the step that went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    /// The check that failed.
    pub step: &'static str,
}

fn check(ok: bool, step: &'static str) -> Result<(), Failure> {
    if ok {
        Ok(())
    } else {
        Err(Failure { step })
    }
}

/// The port type of the self-test, on both ends of every link: 4 DL flits of replay buffer,
/// 8 TL flits of send queue, 8 receive slots (1 request and 1 response command credit per VC
/// with 4 data credits each).
pub type TestPort = LinkPort<4, 8, 8>;

/// Receive slots of a [`TestPort`].
pub const TEST_SLOTS: usize = 8;
/// Device ID the switch announces on every port.
pub const SWITCH_DEVICE_ID: u16 = 1000;
/// The port whose peer claims to be another accelerator than the configuration says.
pub const MISIDENTIFIED_PORT: u8 = 3;
/// What that peer claims to be.
pub const MISIDENTIFIED_AS: u16 = 7;

/// Retry timing for a zero-latency in-memory link: a DL flit lost last (nothing follows it
/// to reveal the gap) is found by the ack timeout, so make it 2 µs rather than 10.24 ms, and
/// allow several timeouts in a row before a Fault (the noisy-link test corrupts replays too).
fn in_memory(mut cfg: LinkPortConfig) -> LinkPortConfig {
    cfg.link.retry.ack_timeout = Duration::from_us(2);
    cfg.link.retry.ack_timeout_replays = 16;
    cfg
}

/// The configuration of the switch's end of port `p`.
pub fn switch_end(p: u8) -> LinkPortConfig {
    in_memory(LinkPortConfig::new(
        DEVICE_TYPE_SWITCH,
        SWITCH_DEVICE_ID,
        u16::from(p),
        TEST_SLOTS,
    ))
}

/// The configuration of the far end of port `p`: accelerator `p` on ports `0..LOCAL` (but
/// [`MISIDENTIFIED_PORT`]'s claims to be [`MISIDENTIFIED_AS`]), a switch of plane `k`
/// (device ID `SWITCH_DEVICE_ID + 1 + k`) on the trunks.
pub fn far_end(p: u8) -> LinkPortConfig {
    in_memory(if p == MISIDENTIFIED_PORT {
        LinkPortConfig::new(DEVICE_TYPE_ACCELERATOR, MISIDENTIFIED_AS, 0, TEST_SLOTS)
    } else if u16::from(p) < LOCAL {
        LinkPortConfig::new(DEVICE_TYPE_ACCELERATOR, u16::from(p), 0, TEST_SLOTS)
    } else {
        let plane = u16::from(p - LOCAL as u8) / 4;
        LinkPortConfig::new(
            DEVICE_TYPE_SWITCH,
            SWITCH_DEVICE_ID + 1 + plane,
            u16::from(p),
            TEST_SLOTS,
        )
    })
}

/// A fresh port from `cfg` (the self-test's configurations always fit [`TEST_SLOTS`]).
///
/// # Errors
/// `"port config"` if the grant does not fit.
pub fn new_port(cfg: LinkPortConfig) -> Result<TestPort, Failure> {
    TestPort::new(cfg).map_err(|_| Failure {
        step: "port config",
    })
}

/// Bring every port of `ports` up as a bare [`SimPort`] with `credits` frame credits per VC
/// (for tests of the switch logic alone, such as the forwarding fuzz target).
pub fn bring_up(sw: &mut Switch, ports: &mut [SimPort], credits: u32) {
    for (p, link) in (0u8..).zip(ports.iter_mut()) {
        *link = SimPort::up_with_credits(credits);
        sw.refresh_port(u16::from(p), link);
    }
}

/// A request from `src` to `dst`.
pub fn request(src: u16, dst: u16, vc: u8, addr: u64) -> Header {
    Header::request(aid(src), aid(dst), Vc::from_bits_truncate(vc), addr)
}

/// A 64 B WriteFull from `src` to `dst` on `vc` at byte address `addr` (64 B aligned), with
/// `tag`.
pub fn write64(src: u16, dst: u16, vc: u8, tag: u16, addr: u64) -> TlField {
    TlField::UncompressedRequest(TlUncompressedRequest {
        cmd: Opcode::WriteFull,
        vchan: Vc::from_bits_truncate(vc),
        tag: Tag::from_bits_truncate(tag),
        len: 15,
        numbeats: 0,
        addr: addr >> 2,
        srcaccid: aid(src),
        dstaccid: aid(dst),
        ..Default::default()
    })
}

/// The data of the self-test's writes.
const DATA: [u8; 64] = {
    let mut d = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        // Constant evaluation: an out-of-range index would fail the build, not panic.
        #[allow(clippy::indexing_slicing)]
        {
            d[i] = (i as u8).wrapping_mul(37) ^ 0xa5;
        }
        i += 1;
    }
    d
};

/// The switch, its ports, their far ends and virtual time, joined by in-memory links.
struct Bench<'a> {
    sw: &'a mut Switch,
    ports: &'a mut [TestPort],
    peers: &'a mut [TestPort],
    now: Instant,
    buf: [u8; FLIT_LEN],
    /// Corrupt every `noise_every`-th flit the far end of `noisy` sends (0: off).
    noisy: u8,
    noise_every: u32,
    noise_count: u32,
    health_changes: u32,
}

impl Bench<'_> {
    fn n(&self) -> usize {
        self.ports.len().min(self.peers.len())
    }

    /// Move flits and frames and fire timers until nothing happens before `deadline`; time
    /// ends at `deadline` or later.
    fn settle(&mut self, deadline: Instant) -> Result<(), Failure> {
        for _ in 0..200_000u32 {
            let mut moved = 0u32;
            for p in 0..self.n() {
                let (Some(a), Some(b)) = (self.ports.get_mut(p), self.peers.get_mut(p)) else {
                    continue;
                };
                let (noisy, every) = (usize::from(self.noisy) == p, self.noise_every);
                let count = &mut self.noise_count;
                moved += shuttle(self.now, a, b, &mut self.buf, 64, |a_to_b, flit| {
                    if noisy && every != 0 && !a_to_b {
                        *count = count.wrapping_add(1);
                        if *count % every == 0 {
                            if let Some(x) = flit.get_mut(200) {
                                *x ^= 0x04;
                            }
                        }
                    }
                    true
                });
            }
            let hc = &mut self.health_changes;
            let s = fabric::service(self.sw, self.now, self.ports, |e| {
                if let Event::HealthChanged { .. } = e {
                    *hc += 1;
                }
            });
            if moved > 0 || s.any() {
                continue;
            }
            let next = self
                .ports
                .iter()
                .chain(self.peers.iter())
                .filter_map(TestPort::poll_timeout)
                .fold(self.sw.poll_timeout(), Instant::min);
            if next > deadline {
                self.now = self.now.max(deadline);
                return Ok(());
            }
            self.now = self.now.max(next);
            let now = self.now;
            for e in self.ports.iter_mut().chain(self.peers.iter_mut()) {
                if e.poll_timeout().is_some_and(|t| t <= now) {
                    e.handle_timeout(now);
                }
            }
        }
        Err(Failure {
            step: "links did not settle",
        })
    }

    fn settle_for(&mut self, d: Duration) -> Result<(), Failure> {
        let deadline = self.now + d;
        self.settle(deadline)
    }

    fn send(&mut self, from: u8, f: TlField) -> Result<(), Failure> {
        let data: &[u8] = match f {
            TlField::UncompressedRequest(r) if r.cmd == Opcode::WriteFull => &DATA,
            _ => &[],
        };
        // A sender waits for credits: a few tries, the links settling in between.
        for _ in 0..8 {
            let peer = self.peers.get_mut(usize::from(from)).ok_or(Failure {
                step: "no such peer",
            })?;
            let step = match peer.send(&Transfer::new(f, data)) {
                Ok(_) => return self.settle_for(Duration::from_us(20)),
                Err(SendError::NoCredit | SendError::Busy) => "peer send: no credit",
                Err(SendError::NotReady) => "peer send: not up",
                Err(_) => "peer send",
            };
            if step != "peer send: no credit" {
                return Err(Failure { step });
            }
            self.settle_for(Duration::from_us(20))?;
        }
        Err(Failure {
            step: "peer send: no credit",
        })
    }

    /// Send without letting time pass (frames cross zero-latency links at once).
    fn send_at_once(&mut self, from: u8, f: TlField) -> Result<(), Failure> {
        let peer = self.peers.get_mut(usize::from(from)).ok_or(Failure {
            step: "no such peer",
        })?;
        peer.send(&Transfer::new(f, &DATA)).map_err(|_| Failure {
            step: "peer send at once",
        })?;
        let now = self.now;
        self.settle(now)
    }

    /// Take (and release) the next frame that arrived at the far end of `p`.
    fn take(&mut self, p: u8) -> Option<RxFrame> {
        let now = self.now;
        let peer = self.peers.get_mut(usize::from(p))?;
        let slot = peer.next_arrival()?;
        let f = peer.frame(slot).cloned();
        peer.release(now, slot);
        f
    }

    /// Release everything that arrived at every far end; returns how many.
    fn drain_peers(&mut self) -> u32 {
        let now = self.now;
        let mut n = 0;
        for peer in self.peers.iter_mut() {
            while let Some(slot) = peer.next_arrival() {
                peer.release(now, slot);
                n += 1;
            }
        }
        n
    }

    /// The far end of `p` received exactly `f` (with the 64 B data if it is a write).
    fn arrived(&mut self, p: u8, f: TlField) -> bool {
        self.take(p).is_some_and(|got| {
            let mut want = got.clone();
            want.field = f;
            header_eq(&got.field, &f) && got.data() == want.transfer().data
        })
    }

    fn set_links(&mut self, ports: impl Iterator<Item = u8> + Clone, up: bool) {
        let now = self.now;
        for p in ports {
            let (Some(a), Some(b)) = (
                self.ports.get_mut(usize::from(p)),
                self.peers.get_mut(usize::from(p)),
            ) else {
                continue;
            };
            if up {
                a.handle_link_up(now);
                b.handle_link_up(now);
            } else {
                a.handle_link_down(now);
                b.handle_link_down(now);
            }
        }
    }
}

/// Equal up to the `pool` bit (credits are per hop).
fn header_eq(a: &TlField, b: &TlField) -> bool {
    match (a, b) {
        (TlField::UncompressedRequest(x), TlField::UncompressedRequest(y)) => {
            TlUncompressedRequest { pool: false, ..*x }
                == TlUncompressedRequest { pool: false, ..*y }
        }
        _ => a == b,
    }
}

/// The self-test pod ([`pod_tables`]) in the binary configuration format, as the firmware
/// ships it (`qemu --emit-config switch-fw/selftest-pod.bin` writes it; a host test checks
/// that it is exactly `config::emit` of [`pod_tables`]). Loading bytes, not building tables
/// in code, is what a deployed switch does, and keeps the table builder and the emitter out
/// of the firmware's 64 KiB of `.text`.
pub const POD_CONFIG: &[u8] = include_bytes!("../selftest-pod.bin");

/// Run the self-test on `sw` (which must be new), `ports` (the switch's ends, at least
/// [`MAX_PORTS`]) and `peers` (their far ends, as many), printing to `out`. Every port comes
/// up over an in-memory link between two protocol `UaLink`s ([`TestPort`]s); the far ends
/// play the accelerators and the other switch planes.
///
/// # Errors
/// The first failed check.
pub fn run<W: Write>(
    sw: &mut Switch,
    ports: &mut [TestPort],
    peers: &mut [TestPort],
    out: &mut W,
) -> Result<(), Failure> {
    check(
        ports.len() >= MAX_PORTS && peers.len() >= MAX_PORTS,
        "port array",
    )?;
    let mut say = |s: &[u8]| out.write_all(s).map_err(|_| Failure { step: "console" });

    // 1. Configuration: load the binary pod configuration through the parser.
    check(
        sw.load_config(POD_CONFIG) == Ok(GENERATION),
        "load binary config",
    )?;
    check(
        sw.tables().num_ports() == u16::from(POD_PORTS) && sw.tables().route_len(aid(600)) == 8,
        "pod tables",
    )?;
    say(b"selftest: config loaded\n")?;

    // A damaged copy (one byte of a route flipped) is refused by its CRC and the tables in
    // force stay.
    let mut bad = [0u8; POD_CONFIG.len()];
    bad.copy_from_slice(POD_CONFIG);
    if let Some(b) = bad.get_mut(POD_CONFIG.len() / 2) {
        *b ^= 0x10;
    }
    check(
        matches!(sw.stage_config(&bad), Err(ConfigError::BadCrc { .. })),
        "refuse bad config",
    )?;
    check(sw.tables().generation() == GENERATION, "old tables kept")?;
    while sw.poll_event().is_some() {}

    // 2. Bring every port up over an in-memory link. The far end of the best way to ID 512
    //    on VC 0 grants twice the VC 0 command credits (from VC 3's share); the switch's end
    //    of port 1 grants 5 VC 1 request credits (for the ordering test's burst).
    let dst = 512u16; // partition 0, like accelerator 1
    let best = trunk_port(dst, 5);
    for (p, (a, b)) in (0u8..).zip(ports.iter_mut().zip(peers.iter_mut())) {
        let (mut near, mut far) = (switch_end(p), far_end(p));
        if p == best {
            let c = &mut far.grant.capacity;
            c[0] = Credits([2, 2, 8, 8]);
            c[3] = Credits::ZERO;
        }
        if p == 1 {
            near.grant.capacity = [
                Credits([1, 1, 4, 4]),
                Credits([5, 0, 8, 0]),
                Credits([1, 0, 4, 0]),
                Credits::ZERO,
                Credits::ZERO,
            ];
        }
        *a = new_port(near)?;
        *b = new_port(far)?;
    }
    let mut bench = Bench {
        sw,
        ports,
        peers,
        now: Instant::from_ps(1_000_000),
        buf: [0; FLIT_LEN],
        noisy: 0,
        noise_every: 0,
        noise_count: 0,
        health_changes: 0,
    };
    let all = 0..POD_PORTS;
    bench.set_links(all.clone(), true);
    bench.settle_for(Duration::from_us(50))?;
    check(
        bench.ports.iter().take(MAX_PORTS).all(TestPort::is_ready),
        "all ports up",
    )?;
    // Bring-up told each port what is attached: the tables agree everywhere but on the
    // misidentified port, whose claim is refused (routes send accelerator 3's traffic there).
    for p in all.clone() {
        let peer = bench.ports.get(usize::from(p)).and_then(TestPort::peer);
        let attach = peer.map_or(Attachment::Unused, |i| i.attachment());
        let r = bench.sw.learn_attachment(u16::from(p), attach);
        let ok = if p == MISIDENTIFIED_PORT {
            matches!(r, Err(ConfigError::RouteToWrongAccelerator { .. }))
        } else {
            r == Ok(false)
        };
        check(ok, "attachment from bring-up")?;
    }
    check(
        bench
            .sw
            .tables()
            .port(u16::from(MISIDENTIFIED_PORT))
            .map(|c| c.attach)
            == Some(Attachment::Accelerator(aid(u16::from(MISIDENTIFIED_PORT)))),
        "misidentified port keeps its configured attachment",
    )?;
    say(b"selftest: 64 ports up over in-memory UALink links\n")?;

    // 3. Local forwarding, isolation: frames travel peer → link → switch → link → peer.
    let w = write64(1, 2, 0, 1, 0x1000);
    bench.send(1, w)?;
    check(bench.arrived(2, w), "local forward")?;
    bench.send(1, write64(5, 2, 0, 2, 0x1000))?;
    bench.send(
        MISIDENTIFIED_PORT,
        write64(MISIDENTIFIED_AS, 2, 0, 2, 0x1000),
    )?;
    bench.send(40, write64(3, 4, 0, 3, 0x1000))?;
    bench.send(1, write64(1, 9, 0, 4, 0x1000))?;
    bench.send(40, write64(32, 9, 0, 5, 0x1000))?;
    check(
        bench.drain_peers() == 0,
        "spoofed and cross-partition dropped",
    )?;
    let w = write64(64, 2, 0, 6, 0x1000);
    bench.send(40, w)?;
    check(bench.arrived(2, w), "remote to local")?;

    // 4. Adaptive choice: the way with the most credit wins.
    let w = write64(1, dst, 0, 7, 0x2000);
    bench.send(1, w)?;
    check(bench.arrived(best, w), "adaptive by credit")?;

    // 5. A noisy link: every 3rd flit from the far end of `best` is corrupted while it
    //    carries traffic for 4 health windows. Real CRC errors and replays make it Degraded,
    //    and adaptive choice drains it although it still has the most credit.
    bench.noisy = best;
    bench.noise_every = 3;
    for w in 0..4u16 {
        let end = bench.now + Duration::from_us(1_000);
        for i in 0..12u16 {
            bench.send(best, write64(dst, 1, 0, 100 + 12 * w + i, 0x3000))?;
            bench.drain_peers();
        }
        bench.settle(end)?;
    }
    bench.noise_every = 0;
    let noisy = bench
        .ports
        .get(usize::from(best))
        .map(PortLink::stats)
        .unwrap_or_default();
    check(noisy.crc_errors >= 8 && noisy.replays >= 8, "noise replays")?;
    check(
        bench.sw.health(u16::from(best)) == Health::Degraded && bench.health_changes == 1,
        "noisy port degraded",
    )?;
    let w = write64(1, dst, 0, 8, 0x9000);
    bench.send(1, w)?;
    let drained = (0..WAYS).any(|k| {
        let p = trunk_port(dst, k);
        p != best && bench.arrived(p, w)
    });
    check(drained, "degraded drained")?;

    // 6. Every way down (links down at both ends): unreachable; then back up.
    let ways = (0..WAYS).map(|k| trunk_port(dst, k));
    bench.set_links(ways.clone(), false);
    bench.settle_for(Duration::from_us(5))?;
    let unreachable = bench.sw.counters().total().unreachable;
    bench.send(1, write64(1, dst, 0, 9, 0xa000))?;
    check(
        bench.sw.counters().total().unreachable == unreachable + 1,
        "all ways down",
    )?;
    bench.set_links(ways.clone(), true);
    bench.settle_for(Duration::from_us(50))?;
    check(
        ways.clone().all(|p| {
            bench
                .ports
                .get(usize::from(p))
                .is_some_and(TestPort::is_ready)
        }),
        "ways back up",
    )?;

    // 7. Ordering: the far end of the flow's port keeps what it receives, so that port runs
    //    out of VC 1 request credit (1 per VC); later requests of the flow, sent at once (in
    //    flight together), queue behind on it although other ways have credit, and leave in
    //    order as credits come back.
    let dst = 544u16;
    let flow = |tag: u16| write64(1, dst, 1, tag, 0x4_0000);
    bench.send_at_once(1, flow(10))?;
    let first = (0..WAYS)
        .map(|k| trunk_port(dst, k))
        .find(|&p| {
            bench
                .peers
                .get(usize::from(p))
                .is_some_and(|x| x.held_slots() > 0)
        })
        .ok_or(Failure {
            step: "ordering first",
        })?;
    let held = bench
        .peers
        .get_mut(usize::from(first))
        .and_then(TestPort::next_arrival)
        .ok_or(Failure {
            step: "ordering first",
        })?;
    for tag in 11..15 {
        bench.send_at_once(1, flow(tag))?;
    }
    // (The last may wait for an ack to free peer 1's replay buffer: let time pass; queued
    // frames keep the pin however long they wait.)
    bench.settle_for(Duration::from_us(5))?;
    let vc1 = Vc::from_bits_truncate(1);
    check(
        bench.sw.queue_depth(u16::from(first), vc1) == 4,
        "ordering pinned",
    )?;
    let other = write64(1, dst, 1, 15, 0x8_0000);
    bench.send(1, other)?;
    let elsewhere = (0..WAYS).any(|k| {
        let p = trunk_port(dst, k);
        p != first && bench.arrived(p, other)
    });
    check(elsewhere, "other region free")?;
    let now = bench.now;
    if let Some(x) = bench.peers.get_mut(usize::from(first)) {
        x.release(now, held);
    }
    for tag in 11..15 {
        bench.settle_for(Duration::from_us(20))?;
        check(bench.arrived(first, flow(tag)), "in-order drain")?;
    }
    bench.settle_for(Duration::from_us(20))?;
    check(bench.sw.queued_frames() == 0, "drained")?;

    // 8. Link-local fields never reach the forwarding logic over a link; offered directly,
    //    they are dropped.
    let fc = Header::from_tl(&TlField::FlowControl(Default::default()));
    let now = bench.now;
    check(
        bench.sw.forward(
            now,
            1,
            Frame {
                handle: 0,
                header: fc,
                bytes: 4,
            },
            bench.ports,
        ) == Err(DropReason::LinkLocal),
        "link-local",
    )?;

    // 9. Nothing overran a receiver, every receive slot came back.
    bench.drain_peers();
    bench.settle_for(Duration::from_us(20))?;
    let ends = || bench.ports.iter().chain(bench.peers.iter());
    check(
        ends().all(|e| e.credit_receiver().stats().overruns == 0 && e.stats().overruns == 0),
        "no credit overrun",
    )?;
    check(
        bench.ports.iter().all(|e| e.held_slots() == 0),
        "every slot released",
    )?;
    let (replays, crc) = ends().fold((0u32, 0u32), |(r, c), e| {
        let s = PortLink::stats(e);
        (r + s.replays, c + s.crc_errors)
    });

    let sw = &*bench.sw;
    let c = sw.counters().total();
    let mut line = LineBuf::new();
    let _ = core::fmt::write(
        &mut line,
        format_args!(
            "selftest: rx={} tx={} cut_through={} queued={} spoofed={} cross_partition={} unreachable={} link_local={} refusals={} commits={} replays={} crc_errors={}\n",
            c.rx_frames,
            c.tx_frames,
            c.cut_through,
            c.queued,
            c.spoofed,
            c.cross_partition,
            c.unreachable,
            c.link_local,
            sw.counters().refusals,
            sw.counters().commits,
            replays,
            crc,
        ),
    );
    say(line.as_bytes())?;
    check(c.spoofed == 3 && c.cross_partition == 2, "drop counters")?;
    Ok(())
}

/// A small fixed line buffer for formatting without a heap.
pub struct LineBuf {
    buf: [u8; 256],
    len: usize,
}

impl Default for LineBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl LineBuf {
    /// Empty.
    pub const fn new() -> Self {
        LineBuf {
            buf: [0; 256],
            len: 0,
        }
    }

    /// The bytes so far (UTF-8: only `&str`s are written).
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }

    /// The text so far.
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(self.buf.get(..self.len).unwrap_or(&[])).unwrap_or("")
    }
}

impl core::fmt::Write for LineBuf {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(core::fmt::Error)?;
        let dst = self.buf.get_mut(self.len..end).ok_or(core::fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config;

    #[test]
    fn test_shipped_pod_config_is_the_pod() {
        let mut t = Tables::new();
        pod_tables(&mut t).unwrap();
        t.validate().unwrap();
        let mut buf = vec![0u8; 8192];
        let n = config::emit(&t, &mut buf).unwrap();
        assert!(
            &buf[..n] == POD_CONFIG,
            "switch-fw/selftest-pod.bin is stale: regenerate it with \
             `cargo run -p podlink-switch --bin qemu -- --emit-config switch-fw/selftest-pod.bin`"
        );
        let mut parsed = Tables::new();
        config::parse_into(POD_CONFIG, &mut parsed).unwrap();
        parsed.validate().unwrap();
        assert_eq!(parsed, t);
    }

    struct Out(Vec<u8>);
    impl embedded_io::ErrorType for Out {
        type Error = core::convert::Infallible;
    }
    impl Write for Out {
        fn write(&mut self, b: &[u8]) -> Result<usize, Self::Error> {
            self.0.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    #[test]
    fn test_selftest_passes_on_host() {
        let mut sw = Box::new(Switch::new());
        let idle = new_port(switch_end(0)).unwrap();
        let mut ports = vec![idle.clone(); MAX_PORTS];
        let mut peers = vec![idle; MAX_PORTS];
        let mut out = Out(Vec::new());
        let r = run(&mut sw, &mut ports, &mut peers, &mut out);
        let text = String::from_utf8(out.0).unwrap();
        println!("{text}");
        r.unwrap();
        assert!(text.contains("spoofed=3 cross_partition=2"), "{text}");
        let mut buf = vec![0u8; 8192];
        let n = config::emit(sw.tables(), &mut buf).unwrap();
        assert!(n < 4096, "pod config is {n} bytes");
        println!(
            "pod config bytes: {n}; switch bytes: {}; test port bytes: {}",
            core::mem::size_of::<Switch>(),
            core::mem::size_of::<TestPort>()
        );
    }
}
