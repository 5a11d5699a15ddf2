//! Two link ends over a lossy wire in virtual time: proves (or disproves) that every TL flit
//! arrives exactly once and in order, and reports what it cost.
//!
//! ```text
//!   a: numbered TL flits ──▶ composed link ──▶ Wire (FaultInjector) ──▶ composed link ──▶ b: checker
//!                        ◀── acks / replay requests ◀── Wire (FaultInjector) ◀──
//! ```
//!
//! ```text
//! cargo run -p podlink-protocol --example lossy_link -- \
//!     --profile ualink --flits 100000 --flit-error-rate 1e-3 --burst-len 16 --link-flaps 2 --seed 7
//! ```
//!
//! Prints one JSON object: `submitted`, `delivered`, `lost`, `duplicated`, `reordered` (TL flits;
//! `reordered` also counts flits with wrong content), `replays`, `crc_errors`, `link_faults`,
//! and `goodput`: TL payload delivered over the wire time used, as a fraction of the port's
//! line rate (1.0 = no overhead at all; `ualink`: one 640 B flit per 6.4 ns each way, i.e.
//! 800 Gb/s, so DL framing alone caps it at 64·9.8/640 ≈ 0.98). Exits 0 only if nothing was lost, duplicated or reordered.
//!
//! `--flit-error-rate R` corrupts each frame with probability R by a burst of `--burst-len`
//! bits (1 = a single bit flip): a 640 B DL flit for `ualink`, an Ethernet frame of up to 64 TL
//! flits for `ethernet` (which also sees drops, duplicates and reordering at R / 4 each).
//! `--link-flaps F` takes the link down F times for 2 µs, at seeded random times during the
//! transfer. The `ethernet` profile sends over 4 VCs and checks order per VC; its goodput is
//! over an 800 Gb/s port.

use podlink_protocol::link::{EthLink, EthLinkConfig, UaLink, UaLinkConfig};
use podlink_protocol::phy::{FaultConfig, FaultInjector, Probability, Wire, Xorshift64};
use podlink_protocol::retry::{LinkState, FLIT_LEN};
use podlink_protocol::testing::{EthEnd, LinkPair, PairConfig, UaEnd};
use podlink_protocol::time::{Duration, Instant};
use podlink_protocol::wire::eth::MAX_FRAME_LEN;
use podlink_protocol::wire::AccelId;
use std::process::ExitCode;

struct Args {
    profile: String,
    flits: u64,
    flit_error_rate: f64,
    burst_len: u32,
    link_flaps: u32,
    seed: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        profile: "ualink".into(),
        flits: 10_000,
        flit_error_rate: 0.0,
        burst_len: 1,
        link_flaps: 0,
        seed: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().ok_or(format!("{flag} needs a value"))?;
        let bad = |e: &dyn core::fmt::Display| format!("{flag} {v}: {e}");
        match flag.as_str() {
            "--profile" => a.profile = v,
            "--flits" => a.flits = v.parse().map_err(|e| bad(&e))?,
            "--flit-error-rate" => a.flit_error_rate = v.parse().map_err(|e| bad(&e))?,
            "--burst-len" => a.burst_len = v.parse().map_err(|e| bad(&e))?,
            "--link-flaps" => a.link_flaps = v.parse().map_err(|e| bad(&e))?,
            "--seed" => a.seed = v.parse().map_err(|e| bad(&e))?,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if !(0.0..=1.0).contains(&a.flit_error_rate) {
        return Err("--flit-error-rate must be in [0, 1]".into());
    }
    Ok(a)
}

/// What one run measured.
struct Report {
    submitted: u64,
    delivered: u64,
    duplicated: u64,
    reordered: u64,
    replays: u64,
    crc_errors: u64,
    link_faults: u64,
    elapsed: Duration,
}

fn faults(a: &Args) -> FaultConfig {
    FaultConfig {
        burst_rate: Probability::from_f64(a.flit_error_rate),
        burst_len: a.burst_len.max(1),
        ..FaultConfig::default()
    }
}

/// Flap times: spread over the expected transfer time, seeded.
fn flap_times(a: &Args, expected: Duration) -> Vec<Instant> {
    let mut rng = Xorshift64::new(a.seed ^ 0xf1a9);
    let mut v: Vec<_> = (0..a.link_flaps)
        .map(|_| Instant::from_ps(rng.below(expected.as_ps().max(1))))
        .collect();
    v.sort();
    v
}

fn run_ualink(a: &Args) -> Report {
    type End = UaEnd<255, 128>;
    let wire = |seed| {
        Wire::<512, FLIT_LEN>::new(FaultInjector::new(faults(a), seed), Duration::from_ns(100))
    };
    let mut p = Box::new(LinkPair::new(
        UaEnd::new(UaLink::<255, 128>::new(UaLinkConfig::default()), a.flits),
        UaEnd::new(UaLink::<255, 128>::new(UaLinkConfig::default()), 0),
        wire(a.seed),
        wire(a.seed.wrapping_mul(31).wrapping_add(7)),
        PairConfig::default(),
    ));
    p.set_link(true);
    let n = a.flits;
    let done = |p: &mut LinkPair<End, End, 512, FLIT_LEN>| {
        let fault = p.a.link.state() == LinkState::Fault || p.b.link.state() == LinkState::Fault;
        fault
            || (p.a.link.state() == LinkState::Up
                && p.b.link.state() == LinkState::Up
                && p.b.log.delivered >= n
                && p.a.link.is_idle())
    };
    // About 9.8 TL flits per 6.4 ns DL flit: flaps land inside the transfer.
    let expected = Duration::from_ps(n.saturating_mul(600));
    let deadline = Instant::from_ps(3_600_000_000_000_000); // one virtual hour
    for at in flap_times(a, expected) {
        p.drive_until(at, done);
        p.advance_to(at);
        p.set_link(false);
        p.advance_to(at + Duration::from_us(2));
        p.set_link(true);
    }
    p.drive_until(deadline, done);
    let (ra, rb) = (p.a.link.retry().stats(), p.b.link.retry().stats());
    Report {
        submitted: p.a.submitted,
        delivered: p.b.log.delivered,
        duplicated: p.b.log.duplicated,
        reordered: p.b.log.reordered + p.b.log.corrupted,
        replays: ra.replays + rb.replays,
        crc_errors: ra.crc_errors + rb.crc_errors,
        link_faults: ra.faults + rb.faults,
        elapsed: p.now() - Instant::ZERO,
    }
}

fn run_ethernet(a: &Args) -> Report {
    type End = EthEnd<16, 64, 256>;
    type Pair = LinkPair<End, End, 128, MAX_FRAME_LEN>;
    let r4 = a.flit_error_rate / 4.0;
    let f = FaultConfig {
        drop_rate: Probability::from_f64(r4),
        duplicate_rate: Probability::from_f64(r4),
        delay_rate: Probability::from_f64(r4),
        max_delay: Duration::from_ns(500),
        ..faults(a)
    };
    let wire =
        |seed| Wire::<128, MAX_FRAME_LEN>::new(FaultInjector::new(f, seed), Duration::from_ns(200));
    let id = |v| AccelId::new(v).unwrap_or_default();
    let cfg = |local, peer| EthLinkConfig {
        local: id(local),
        peer: id(peer),
        ..EthLinkConfig::default()
    };
    let mut p: Box<Pair> = Box::new(LinkPair::new(
        EthEnd::new(EthLink::new(cfg(1, 2), Instant::ZERO), id(2), 4, a.flits),
        EthEnd::new(EthLink::new(cfg(2, 1), Instant::ZERO), id(1), 4, 0),
        wire(a.seed),
        wire(a.seed.wrapping_mul(31).wrapping_add(7)),
        PairConfig::ETHERNET_800G,
    ));
    p.set_link(true);
    let n = a.flits;
    let done = |p: &mut Pair| {
        let fault = p.a.link.state() == LinkState::Fault || p.b.link.state() == LinkState::Fault;
        fault
            || (p.a.link.state() == LinkState::Up
                && p.b.link.state() == LinkState::Up
                && p.b.logs.delivered() >= n
                && p.a.link.is_idle())
    };
    // 64 flits per 4124 wire bytes at 10 ps per byte.
    let expected = Duration::from_ps(n.saturating_mul(640));
    let deadline = Instant::from_ps(3_600_000_000_000_000);
    for at in flap_times(a, expected) {
        p.drive_until(at, done);
        p.advance_to(at);
        p.set_link(false);
        p.advance_to(at + Duration::from_us(2));
        p.set_link(true);
    }
    p.drive_until(deadline, done);
    let (sa, sb) = (p.a.link.stats(), p.b.link.stats());
    Report {
        submitted: p.a.submitted,
        delivered: p.b.logs.delivered(),
        duplicated: p.b.logs.duplicated(),
        reordered: p.b.logs.reordered(),
        replays: sa.retransmits + sb.retransmits,
        crc_errors: sa.fcs_errors + sb.fcs_errors,
        link_faults: sa.faults + sb.faults,
        elapsed: p.now() - Instant::ZERO,
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("lossy_link: {e}");
            return ExitCode::from(2);
        }
    };
    let r = match args.profile.as_str() {
        "ualink" => run_ualink(&args),
        "ethernet" => run_ethernet(&args),
        p => {
            eprintln!("lossy_link: unknown profile {p} (ualink|ethernet)");
            return ExitCode::from(2);
        }
    };
    let lost = r.submitted.saturating_sub(r.delivered);
    let secs = r.elapsed.as_ps() as f64 * 1e-12;
    // Both profiles model an 800 Gb/s port.
    const LINE_GBPS: f64 = 800.0;
    let goodput = if secs > 0.0 {
        r.delivered as f64 * 64.0 * 8.0 / secs / 1e9 / LINE_GBPS
    } else {
        0.0
    };
    let json = serde_json::json!({
        "submitted": r.submitted,
        "delivered": r.delivered,
        "lost": lost,
        "duplicated": r.duplicated,
        "reordered": r.reordered,
        "replays": r.replays,
        "crc_errors": r.crc_errors,
        "link_faults": r.link_faults,
        "goodput": (goodput * 1000.0).round() / 1000.0,
    });
    println!("{json}");
    if lost == 0 && r.duplicated == 0 && r.reordered == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
