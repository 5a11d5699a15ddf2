//! The self-test the firmware runs at boot (and the host tests run too): load a
//! configuration, bring ports up over in-memory links, forward a batch of frames including
//! spoofed, cross-partition and degraded-port cases, check every decision, print the
//! counters (`spec-notes/switch.md#self-test`).
//!
//! The pod it configures ([`pod_tables`]) is the one the PERF figures are measured on:
//! 64 ports and 1024 accelerator IDs. Ports 0..32 attach local accelerators 0..32; ports
//! 32..64 are trunks to 8 other switch planes (4 ports per plane). Every remote ID is routed
//! over 8 trunk ways, one per plane (port `32 + 4·plane + dst/256`). Accelerator `a` is in
//! partition `(a / 8) % 4`.

use crate::config::{self, ConfigError};
use crate::health::Health;
use crate::port::SimPort;
use crate::tables::{Attachment, PartitionCfg, PortCfg, RateCap, Tables};
use crate::{DropReason, Forwarded, Frame, Header, Switch, MAX_PORTS};
use embedded_io::Write;
use podlink_protocol::time::{Duration, Instant};
use podlink_protocol::wire::{AccelId, PartitionId, Vc};

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
    t.set_num_ports(POD_PORTS)?;
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
        t.set_port(p, PortCfg { attach, plane })?;
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
            t.set_route(aid(a), &[a as u8])?;
        } else {
            let mut ways = [0u8; WAYS as usize];
            for (k, w) in (0u8..).zip(ways.iter_mut()) {
                *w = trunk_port(a, k);
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

/// Bring every port of the pod up with `credits` frame credits per VC.
pub fn bring_up(sw: &mut Switch, ports: &mut [SimPort], credits: u32) {
    for (p, link) in (0u8..).zip(ports.iter_mut()) {
        *link = SimPort::up_with_credits(credits);
        sw.refresh_port(p, link);
    }
}

/// A request from `src` to `dst`.
pub fn request(src: u16, dst: u16, vc: u8, addr: u64) -> Header {
    Header::request(aid(src), aid(dst), Vc::from_bits_truncate(vc), addr)
}

fn frame(handle: u32, header: Header) -> Frame {
    Frame {
        handle,
        header,
        bytes: 80,
    }
}

/// Run the self-test on `sw` (which must be new) and `ports` (at least [`MAX_PORTS`]),
/// using `buf` (≥ 4 KiB) for the binary configuration, printing to `out`.
///
/// # Errors
/// The first failed check.
pub fn run<W: Write>(
    sw: &mut Switch,
    ports: &mut [SimPort],
    buf: &mut [u8],
    out: &mut W,
) -> Result<(), Failure> {
    check(ports.len() >= MAX_PORTS, "port array")?;
    let mut say = |s: &str| {
        out.write_all(s.as_bytes())
            .map_err(|_| Failure { step: "console" })
    };

    // 1. Configuration: build, emit to the binary format, load it back through the parser.
    sw.stage_with(pod_tables)
        .map_err(|_| Failure { step: "build pod" })?;
    check(sw.commit() == Ok(GENERATION), "commit built tables")?;
    let n = config::emit(sw.tables(), buf).map_err(|_| Failure {
        step: "emit config",
    })?;
    let cfg = buf.get(..n).ok_or(Failure {
        step: "emit length",
    })?;
    check(sw.load_config(cfg) == Ok(GENERATION), "load binary config")?;
    say("selftest: config loaded\n")?;

    // A damaged copy is refused and the tables in force stay.
    let mut bad = [0u8; 64];
    let k = bad.len().min(n);
    if let (Some(d), Some(s)) = (bad.get_mut(..k), cfg.get(..k)) {
        d.copy_from_slice(s);
    }
    if let Some(b) = bad.get_mut(0) {
        *b ^= 0xff;
    }
    check(
        sw.stage_config(bad.get(..k).unwrap_or(&[])) == Err(ConfigError::BadMagic),
        "refuse bad config",
    )?;
    check(sw.tables().generation() == GENERATION, "old tables kept")?;

    // 2. Ports up.
    bring_up(sw, ports, 64);
    let t0 = Instant::from_ps(1_000_000);

    // 3. Local forwarding, isolation.
    let r = sw.forward(t0, 1, frame(1, request(1, 2, 0, 0x1000)), ports);
    check(r == Ok(Forwarded::CutThrough { port: 2 }), "local forward")?;
    let r = sw.forward(t0, 1, frame(2, request(5, 2, 0, 0x1000)), ports);
    check(r == Err(DropReason::Spoofed), "spoofed on accelerator port")?;
    let r = sw.forward(t0, 40, frame(3, request(3, 4, 0, 0x1000)), ports);
    check(r == Err(DropReason::Spoofed), "local source on trunk")?;
    let r = sw.forward(t0, 1, frame(4, request(1, 9, 0, 0x1000)), ports);
    check(r == Err(DropReason::CrossPartition), "cross-partition")?;
    let r = sw.forward(t0, 40, frame(5, request(32, 9, 0, 0x1000)), ports);
    check(
        r == Err(DropReason::CrossPartition),
        "cross-partition via trunk",
    )?;
    let r = sw.forward(t0, 40, frame(6, request(64, 2, 0, 0x1000)), ports);
    check(
        r == Ok(Forwarded::CutThrough { port: 2 }),
        "remote to local",
    )?;

    // 4. Adaptive choice: the way with the most credit wins.
    let dst = 512u16; // partition 0, like accelerator 1
    let best = trunk_port(dst, 5);
    if let Some(p) = ports.get_mut(usize::from(best)) {
        p.grant(Vc::from_bits_truncate(0), 100);
        sw.refresh_port(best, p);
    }
    let r = sw.forward(t0, 1, frame(7, request(1, dst, 0, 0x2000)), ports);
    check(
        r == Ok(Forwarded::CutThrough { port: best }),
        "adaptive by credit",
    )?;

    // 5. Degraded port is drained from adaptive choice; a failed one carries nothing.
    sw.force_health(best, Health::Degraded);
    let r = sw.forward(t0, 1, frame(8, request(1, dst, 0, 0x9000)), ports);
    check(
        r.is_ok_and(|f| f.port() != best && (LOCAL as u8..POD_PORTS).contains(&f.port())),
        "degraded drained",
    )?;
    for k in 0..WAYS {
        sw.force_health(trunk_port(dst, k), Health::Failed);
    }
    let r = sw.forward(t0, 1, frame(9, request(1, dst, 0, 0xa000)), ports);
    check(r == Err(DropReason::Unreachable), "all ways failed")?;
    for k in 0..WAYS {
        sw.force_health(trunk_port(dst, k), Health::Healthy);
    }

    // 6. Ordering: with the chosen port out of credit, requests of one flow queue behind each
    // other on it even when another way has more credit.
    let dst = 544u16; // partition 0, like accelerator 1

    let flow = request(1, dst, 1, 0x4_0000);
    let t1 = t0 + Duration::from_us(10);
    let first = sw
        .forward(t1, 1, frame(10, flow), ports)
        .map_err(|_| Failure {
            step: "ordering first",
        })?
        .port();
    let vc1 = Vc::from_bits_truncate(1);
    if let Some(p) = ports.get_mut(usize::from(first)) {
        p.set_credits(vc1, 0);
        sw.refresh_port(first, p);
    }
    for h in 11..15u32 {
        let r = sw.forward(t1, 1, frame(h, flow), ports);
        check(
            r == Ok(Forwarded::Queued { port: first }),
            "ordering pinned",
        )?;
    }
    let other = request(1, dst, 1, 0x8_0000);
    let r = sw.forward(t1, 1, frame(15, other), ports);
    check(r.is_ok_and(|f| f.port() != first), "other region free")?;
    check(
        sw.poll_transmit(t1, ports).is_none(),
        "no credit, no transmit",
    )?;
    if let Some(p) = ports.get_mut(usize::from(first)) {
        p.grant(vc1, 8);
        sw.refresh_port(first, p);
    }
    for h in 11..15u32 {
        let tx = sw.poll_transmit(t1, ports);
        check(
            tx.is_some_and(|t| t.handle == h && t.port == first),
            "in-order drain",
        )?;
    }
    check(sw.poll_transmit(t1, ports).is_none(), "drained")?;

    // 7. Link-local fields are never forwarded.
    let fc = Header::from_tl(&podlink_protocol::wire::TlField::FlowControl(
        Default::default(),
    ));
    check(
        sw.forward(t1, 1, frame(16, fc), ports) == Err(DropReason::LinkLocal),
        "link-local",
    )?;

    let c = sw.counters().total();
    let mut line = LineBuf::new();
    let _ = core::fmt::write(
        &mut line,
        format_args!(
            "selftest: rx={} tx={} cut_through={} queued={} spoofed={} cross_partition={} unreachable={} link_local={} refusals={} commits={}\n",
            c.rx_frames,
            c.tx_frames,
            c.cut_through,
            c.queued,
            c.spoofed,
            c.cross_partition,
            c.unreachable,
            c.link_local,
            sw.counters().refusals,
            sw.counters().commits
        ),
    );
    say(line.as_str())?;
    check(c.spoofed == 2 && c.cross_partition == 2, "drop counters")?;
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
        let mut ports: Vec<SimPort> = vec![SimPort::default(); MAX_PORTS];
        let mut buf = vec![0u8; 8192];
        let mut out = Out(Vec::new());
        run(&mut sw, &mut ports, &mut buf, &mut out).unwrap();
        let text = String::from_utf8(out.0).unwrap();
        assert!(text.contains("spoofed=2 cross_partition=2"), "{text}");
        let n = config::emit(sw.tables(), &mut buf).unwrap();
        assert!(n < 4096, "pod config is {n} bytes");
        println!(
            "pod config bytes: {n}; switch bytes: {}",
            core::mem::size_of::<Switch>()
        );
    }
}
