//! The switch's binary configuration: format, parser (nom, `complete` parsers), validation
//! and emitter (`spec-notes/switch.md#configuration-format`).
//!
//! ```text
//! header   16 B   magic "PLSW" | version 1 | flags | num_ports u8 | rsvd | generation u32 | rsvd u32 (ignored)
//!              or magic "PLSW" | version 2 | flags | num_ports u16     | generation u32 | rsvd u32 (ignored)
//! section  4 B + body, repeated:   type u8 | rsvd u8 | length u16 | body[length]
//! trailer  4 B    CRC-32/BZIP2 of everything before it
//! ```
//!
//! Version 1 carries port numbers as `u8` (at most 255 ports); version 2 as big-endian `u16`
//! (port records `port u16 | plane | kind | accel u16`, still 6 B; route ways 2 B each), for
//! switches of more than 255 ports. The parser reads both; [`emit`] writes version 1 whenever
//! the port count fits. A configuration with more ports than the instance's capacity is
//! refused with [`ConfigError::PortCapacity`].
//!
//! All integers are big-endian. Sections: [`SECTION_PORTS`] (once, required),
//! [`SECTION_VC_WEIGHTS`] (at most once), [`SECTION_PARTITION`] (one per partition),
//! [`SECTION_ROUTES`] (any number). A configuration is parsed into a cleared standby bank and
//! validated as a whole ([`Tables::validate`]); any error refuses it and the bank in force is
//! untouched ([`crate::Switch::stage_config`]).
//!
//! # Fuzzing
//! Under `cfg(fuzzing)` the trailer CRC is not checked (the protocol crate's
//! `wire::crc::verify`), so a fuzzer reaches the sections.

use crate::tables::{Attachment, PartitionCfg, PortCfg, PortIndex, RateCap, Tables, NO_PART};
use crate::{MAX_IDS, MAX_WAYS, NUM_VCS};
use core::fmt;
use nom::bytes::complete::take;
use nom::number::complete::{be_u16, be_u32, be_u8};
use nom::{IResult, Parser};
use podlink_protocol::wire::crc::{verify, CRC32_BZIP2};
use podlink_protocol::wire::{AccelId, PartitionId};

/// The magic at offset 0.
pub const MAGIC: [u8; 4] = *b"PLSW";
/// The format version with `u8` port numbers (read and written).
pub const VERSION: u8 = 1;
/// The format version with `u16` port numbers (read, and written for more than 255 ports).
pub const VERSION_2: u8 = 2;
/// Header length.
pub const HEADER_LEN: usize = 16;
/// Section header length.
pub const SECTION_HEADER_LEN: usize = 4;
/// Trailer (CRC) length.
pub const TRAILER_LEN: usize = 4;
/// Header flag: adaptive forwarding on.
pub const FLAG_ADAPTIVE: u8 = 0x01;
/// Section: port attachments, 6 B per port.
pub const SECTION_PORTS: u8 = 0x01;
/// Section: the four VC weights.
pub const SECTION_VC_WEIGHTS: u8 = 0x02;
/// Section: one partition and its member ranges.
pub const SECTION_PARTITION: u8 = 0x03;
/// Section: route records.
pub const SECTION_ROUTES: u8 = 0x04;
/// Port record length.
pub const PORT_RECORD_LEN: usize = 6;
/// Partition section fixed part length (before the member ranges).
pub const PARTITION_FIXED_LEN: usize = 12;
/// Attachment kind codes in a port record.
pub const ATTACH_UNUSED: u8 = 0;
/// Attachment kind: one accelerator.
pub const ATTACH_ACCELERATOR: u8 = 1;
/// Attachment kind: another switch.
pub const ATTACH_SWITCH: u8 = 2;
/// Partition flag: a rate cap follows.
pub const PARTITION_FLAG_RATE_CAP: u8 = 0x01;

/// Why a configuration was refused. Every variant leaves the tables in force unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigError {
    /// The first four bytes are not `PLSW`.
    BadMagic,
    /// A format version this crate does not read.
    BadVersion(u8),
    /// The input ends inside a header, section or record.
    Truncated,
    /// The trailer CRC does not match.
    BadCrc {
        /// CRC in the trailer.
        carried: u32,
        /// CRC of the content.
        computed: u32,
    },
    /// A reserved field or bit is not zero (the name says which).
    Reserved(&'static str),
    /// A section type this version does not define.
    UnknownSection(u8),
    /// A section that may appear once appears twice.
    DuplicateSection(u8),
    /// A required section is missing.
    MissingSection(u8),
    /// A section's length does not fit its records.
    SectionLength(u8),
    /// A port number at or above the port count (or a port count of 0).
    PortOutOfRange(u16),
    /// A port count above the switch instance's capacity.
    PortCapacity {
        /// Ports the configuration describes.
        ports: u16,
        /// Ports the switch instance holds.
        capacity: u16,
    },
    /// A port is configured twice.
    DuplicatePort(u16),
    /// A plane number too large.
    BadPlane(u8),
    /// An unknown attachment kind, or an accelerator field on a non-accelerator port.
    BadAttachment(u8),
    /// An accelerator ID (or the end of an ID range) above 1023.
    IdOutOfRange(u16),
    /// A destination is routed twice.
    DuplicateRoute(u16),
    /// A destination is given more than [`MAX_WAYS`] egress ports.
    TooManyWays(u16),
    /// A destination lists the same egress port twice.
    DuplicateWay {
        /// Destination.
        dst: u16,
        /// Port.
        port: u16,
    },
    /// A permitted destination (a partition member), or an explicit route record, has no
    /// egress port.
    EmptyRoute(u16),
    /// A route uses a port that does not exist or has nothing attached.
    RouteToNonexistentPort {
        /// Destination.
        dst: u16,
        /// Port.
        port: u16,
    },
    /// A route uses a port attached to a different accelerator.
    RouteToWrongAccelerator {
        /// Destination.
        dst: u16,
        /// Port.
        port: u16,
    },
    /// More than [`crate::MAX_PARTITIONS`] partitions.
    TooManyPartitions,
    /// A member added to a partition index that does not exist.
    NoSuchPartition(u8),
    /// A partition ID appears twice.
    DuplicatePartition(u16),
    /// An accelerator is a member of two partitions (or twice of one).
    DuplicateMember(u16),
    /// A weight of 0.
    ZeroWeight,
    /// A rate cap of 0 bytes/µs.
    ZeroRate,
    /// An ID range or route record of count 0.
    EmptyRange,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ConfigError::*;
        match *self {
            BadMagic => f.write_str("bad magic (not a podlink switch configuration)"),
            BadVersion(v) => write!(f, "unsupported configuration version {v}"),
            Truncated => f.write_str("configuration truncated"),
            BadCrc { carried, computed } => {
                write!(
                    f,
                    "bad CRC: carried {carried:#010x}, computed {computed:#010x}"
                )
            }
            Reserved(what) => write!(f, "reserved field not zero: {what}"),
            UnknownSection(t) => write!(f, "unknown section type {t:#04x}"),
            DuplicateSection(t) => write!(f, "section {t:#04x} appears twice"),
            MissingSection(t) => write!(f, "required section {t:#04x} missing"),
            SectionLength(t) => write!(f, "bad length of section {t:#04x}"),
            PortOutOfRange(p) => write!(f, "port {p} out of range"),
            PortCapacity { ports, capacity } => {
                write!(f, "{ports} ports, but this switch holds at most {capacity}")
            }
            DuplicatePort(p) => write!(f, "port {p} configured twice"),
            BadPlane(p) => write!(f, "plane {p} out of range"),
            BadAttachment(k) => write!(f, "bad attachment kind {k}"),
            IdOutOfRange(i) => write!(f, "accelerator id {i} out of range"),
            DuplicateRoute(d) => write!(f, "destination {d} routed twice"),
            TooManyWays(d) => write!(f, "destination {d} has more than {MAX_WAYS} ports"),
            DuplicateWay { dst, port } => write!(f, "destination {dst} lists port {port} twice"),
            EmptyRoute(d) => write!(f, "permitted destination {d} has no route"),
            RouteToNonexistentPort { dst, port } => {
                write!(f, "destination {dst} routed to unused port {port}")
            }
            RouteToWrongAccelerator { dst, port } => write!(
                f,
                "destination {dst} routed to port {port}, attached to another accelerator"
            ),
            TooManyPartitions => f.write_str("too many partitions"),
            NoSuchPartition(p) => write!(f, "no partition at index {p}"),
            DuplicatePartition(p) => write!(f, "partition {p} defined twice"),
            DuplicateMember(a) => write!(f, "accelerator {a} in two partitions"),
            ZeroWeight => f.write_str("weight of 0"),
            ZeroRate => f.write_str("rate cap of 0"),
            EmptyRange => f.write_str("range of 0 ids"),
        }
    }
}

impl core::error::Error for ConfigError {}

impl<I> nom::error::ParseError<I> for ConfigError {
    fn from_error_kind(_: I, _: nom::error::ErrorKind) -> Self {
        ConfigError::Truncated
    }
    fn append(_: I, _: nom::error::ErrorKind, other: Self) -> Self {
        other
    }
}

type PResult<'a, T> = IResult<&'a [u8], T, ConfigError>;

/// Run a nom parser to a plain result.
fn run<'a, T>(r: PResult<'a, T>) -> Result<(&'a [u8], T), ConfigError> {
    r.map_err(|e| match e {
        nom::Err::Incomplete(_) => ConfigError::Truncated,
        nom::Err::Error(e) | nom::Err::Failure(e) => e,
    })
}

fn id(v: u16) -> Result<AccelId, ConfigError> {
    AccelId::new(v).ok_or(ConfigError::IdOutOfRange(v))
}

/// An ID range `first .. first + count`.
fn range(first: u16, count: u16) -> Result<core::ops::Range<u16>, ConfigError> {
    if count == 0 {
        return Err(ConfigError::EmptyRange);
    }
    let end = first
        .checked_add(count)
        .filter(|&e| usize::from(e) <= MAX_IDS)
        .ok_or(ConfigError::IdOutOfRange(first.saturating_add(count - 1)))?;
    Ok(first..end)
}

/// Parse a configuration into `t` (which the caller has cleared). Does not run
/// [`Tables::validate`]; [`crate::Switch::stage_config`] does.
///
/// # Errors
/// The first problem found, as a typed [`ConfigError`].
pub fn parse_into<const PORTS: usize, P: PortIndex>(
    bytes: &[u8],
    t: &mut Tables<PORTS, P>,
) -> Result<(), ConfigError> {
    let content_len = bytes
        .len()
        .checked_sub(TRAILER_LEN)
        .filter(|&n| n >= HEADER_LEN)
        .ok_or(ConfigError::Truncated)?;
    let (content, trailer) = bytes
        .split_at_checked(content_len)
        .ok_or(ConfigError::Truncated)?;
    let (_, carried) = run(be_u32(trailer))?;
    // Header first, so a wrong file says "bad magic" rather than "bad CRC".
    let (rest, magic) = run(take(4usize).parse(content))?;
    if magic != MAGIC {
        return Err(ConfigError::BadMagic);
    }
    let (rest, (version, flags, count, generation, _ignored)) =
        run((be_u8, be_u8, be_u16, be_u32, be_u32).parse(rest))?;
    // Version 1: port count in byte 6, byte 7 reserved; version 2: a u16 over both.
    let (wide, num_ports, rsvd) = match version {
        VERSION => (false, count >> 8, count & 0xff),
        VERSION_2 => (true, count, 0),
        other => return Err(ConfigError::BadVersion(other)),
    };
    let computed = CRC32_BZIP2.checksum(content);
    if !verify(carried, computed) {
        return Err(ConfigError::BadCrc { carried, computed });
    }
    if flags & !FLAG_ADAPTIVE != 0 {
        return Err(ConfigError::Reserved("header flags"));
    }
    if rsvd != 0 {
        return Err(ConfigError::Reserved("header byte 7"));
    }
    t.set_num_ports(num_ports)?;
    t.set_adaptive(flags & FLAG_ADAPTIVE != 0);
    t.set_generation(generation);
    // Bytes 12..16 held a flow-pin hold time in earlier builds; the ordering rule no longer
    // uses time (`spec-notes/switch.md#ordering-rule`), so they are read and ignored.

    let mut rest = rest;
    let mut seen = 0u32;
    while !rest.is_empty() {
        let (r, (ty, rsvd, len)) = run((be_u8, be_u8, be_u16).parse(rest))?;
        let (r, body) = run(take(len).parse(r))?;
        rest = r;
        if rsvd != 0 {
            return Err(ConfigError::Reserved("section header"));
        }
        let once = matches!(ty, SECTION_PORTS | SECTION_VC_WEIGHTS);
        let bit = 1u32 << (ty & 31);
        if once && seen & bit != 0 {
            return Err(ConfigError::DuplicateSection(ty));
        }
        seen |= bit;
        match ty {
            SECTION_PORTS => ports(body, wide, t)?,
            SECTION_VC_WEIGHTS => vc_weights(body, t)?,
            SECTION_PARTITION => partition(body, t)?,
            SECTION_ROUTES => routes(body, wide, t)?,
            other => return Err(ConfigError::UnknownSection(other)),
        }
    }
    if seen & (1 << SECTION_PORTS) == 0 {
        return Err(ConfigError::MissingSection(SECTION_PORTS));
    }
    Ok(())
}

fn ports<const PORTS: usize, P: PortIndex>(
    mut body: &[u8],
    wide: bool,
    t: &mut Tables<PORTS, P>,
) -> Result<(), ConfigError> {
    if body.len() % PORT_RECORD_LEN != 0 {
        return Err(ConfigError::SectionLength(SECTION_PORTS));
    }
    while !body.is_empty() {
        // Version 1: port u8 | plane | kind | rsvd | accel; version 2: port u16 | plane |
        // kind | accel.
        let (r, (a, b, kind, accel)) = run((be_u8, be_u8, be_u16, be_u16).parse(body))?;
        body = r;
        let (port, plane, kind, rsvd) = if wide {
            (u16::from_be_bytes([a, b]), (kind >> 8) as u8, kind as u8, 0)
        } else {
            (u16::from(a), b, (kind >> 8) as u8, kind as u8)
        };
        if rsvd != 0 {
            return Err(ConfigError::Reserved("port record"));
        }
        let attach = match kind {
            ATTACH_ACCELERATOR => Attachment::Accelerator(id(accel)?),
            ATTACH_UNUSED if accel == 0 => Attachment::Unused,
            ATTACH_SWITCH if accel == 0 => Attachment::Switch,
            other => return Err(ConfigError::BadAttachment(other)),
        };
        t.set_port(port, PortCfg { attach, plane })?;
    }
    Ok(())
}

fn vc_weights<const PORTS: usize, P: PortIndex>(
    body: &[u8],
    t: &mut Tables<PORTS, P>,
) -> Result<(), ConfigError> {
    let w: [u8; NUM_VCS] = body
        .try_into()
        .map_err(|_| ConfigError::SectionLength(SECTION_VC_WEIGHTS))?;
    t.set_vc_weights(w)
}

fn partition<const PORTS: usize, P: PortIndex>(
    body: &[u8],
    t: &mut Tables<PORTS, P>,
) -> Result<(), ConfigError> {
    let (mut body, (pid, weight, flags, rate, burst)): (_, (u16, u8, u8, u32, u32)) =
        run((be_u16, be_u8, be_u8, be_u32, be_u32).parse(body))
            .map_err(|_| ConfigError::SectionLength(SECTION_PARTITION))?;
    if body.len() % 4 != 0 {
        return Err(ConfigError::SectionLength(SECTION_PARTITION));
    }
    if flags & !PARTITION_FLAG_RATE_CAP != 0 {
        return Err(ConfigError::Reserved("partition flags"));
    }
    let rate_cap = if flags & PARTITION_FLAG_RATE_CAP != 0 {
        Some(RateCap {
            bytes_per_us: rate,
            burst_bytes: burst,
        })
    } else if rate != 0 || burst != 0 {
        return Err(ConfigError::Reserved(
            "rate fields without the rate-cap flag",
        ));
    } else {
        None
    };
    let id = PartitionId::new(pid).ok_or(ConfigError::Reserved("partition id above 1023"))?;
    let idx = t.add_partition(PartitionCfg {
        id,
        weight,
        rate_cap,
    })?;
    while !body.is_empty() {
        let (r, (first, count)) = run((be_u16, be_u16).parse(body))?;
        body = r;
        for a in range(first, count)? {
            t.add_member(idx, self::id(a)?)?;
        }
    }
    Ok(())
}

fn route_record(body: &[u8], wide: bool) -> PResult<'_, (u16, u16, u8, &[u8])> {
    let (r, (first, count, n)) = (be_u16, be_u16, be_u8).parse(body)?;
    let width = if wide { 2usize } else { 1 };
    let (r, ways) = take(usize::from(n) * width).parse(r)?;
    Ok((r, (first, count, n, ways)))
}

fn routes<const PORTS: usize, P: PortIndex>(
    mut body: &[u8],
    wide: bool,
    t: &mut Tables<PORTS, P>,
) -> Result<(), ConfigError> {
    while !body.is_empty() {
        let (r, (first, count, n, bytes)) = run(route_record(body, wide))?;
        body = r;
        let mut ways = [0u16; MAX_WAYS];
        let n = usize::from(n);
        if wide {
            for (w, b) in ways.iter_mut().zip(bytes.chunks_exact(2)) {
                *w = u16::from_be_bytes([
                    b.first().copied().unwrap_or(0),
                    b.get(1).copied().unwrap_or(0),
                ]);
            }
        } else {
            for (w, &b) in ways.iter_mut().zip(bytes) {
                *w = u16::from(b);
            }
        }
        for d in range(first, count)? {
            let dst = id(d)?;
            let ways = ways.get(..n).ok_or(ConfigError::TooManyWays(d))?;
            t.set_route(dst, ways)?;
        }
    }
    Ok(())
}

/// Error of [`emit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EmitError {
    /// The output buffer is too small; `needed` bytes would do.
    BufferTooSmall {
        /// Bytes the configuration needs.
        needed: usize,
    },
    /// A section would exceed 65535 bytes (cannot happen within the crate's capacities).
    SectionTooLong,
    /// The format version asked for cannot describe the tables (version 1 and more than 255
    /// ports), or is unknown.
    Version(u8),
}

/// A cursor that counts what it could not write.
struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl Writer<'_> {
    fn put(&mut self, bytes: &[u8]) {
        if let Some(dst) = self
            .buf
            .get_mut(self.pos..self.pos.saturating_add(bytes.len()))
        {
            dst.copy_from_slice(bytes);
        }
        self.pos = self.pos.saturating_add(bytes.len());
    }
    fn patch_u16(&mut self, at: usize, v: u16) {
        if let Some(dst) = self.buf.get_mut(at..at.saturating_add(2)) {
            dst.copy_from_slice(&v.to_be_bytes());
        }
    }
    fn section(&mut self, ty: u8, body: impl FnOnce(&mut Self)) -> Result<(), EmitError> {
        self.put(&[ty, 0, 0, 0]);
        let start = self.pos;
        body(self);
        let len = u16::try_from(self.pos - start).map_err(|_| EmitError::SectionTooLong)?;
        self.patch_u16(start - 2, len);
        Ok(())
    }
}

/// Write `t` in the binary format, version 1 when its port count fits a byte and version 2
/// otherwise; returns the length. Consecutive IDs with the same ways (routes) or partition
/// (members) are written as one range.
///
/// # Errors
/// [`EmitError::BufferTooSmall`] with the length needed.
pub fn emit<const PORTS: usize, P: PortIndex>(
    t: &Tables<PORTS, P>,
    out: &mut [u8],
) -> Result<usize, EmitError> {
    let version = if t.num_ports() <= 0xff {
        VERSION
    } else {
        VERSION_2
    };
    emit_version(t, out, version)
}

/// [`emit`] in a given format version.
///
/// # Errors
/// [`EmitError::Version`] when `version` is not 1 or 2, or is 1 and `t` has more than 255
/// ports; [`EmitError::BufferTooSmall`] with the length needed.
pub fn emit_version<const PORTS: usize, P: PortIndex>(
    t: &Tables<PORTS, P>,
    out: &mut [u8],
    version: u8,
) -> Result<usize, EmitError> {
    let wide = match version {
        VERSION if t.num_ports() <= 0xff => false,
        VERSION_2 => true,
        other => return Err(EmitError::Version(other)),
    };
    let mut w = Writer { buf: out, pos: 0 };
    w.put(&MAGIC);
    let flags = if t.adaptive() { FLAG_ADAPTIVE } else { 0 };
    w.put(&[version, flags]);
    if wide {
        w.put(&t.num_ports().to_be_bytes());
    } else {
        w.put(&[t.num_ports() as u8, 0]);
    }
    w.put(&t.generation().to_be_bytes());
    w.put(&0u32.to_be_bytes());
    w.section(SECTION_PORTS, |w| {
        for p in 0..t.num_ports() {
            if !t.port_configured(p) {
                continue;
            }
            let cfg = t.port(p).unwrap_or_default();
            let (kind, accel) = match cfg.attach {
                Attachment::Unused => (ATTACH_UNUSED, 0),
                Attachment::Accelerator(a) => (ATTACH_ACCELERATOR, a.get()),
                Attachment::Switch => (ATTACH_SWITCH, 0),
            };
            if wide {
                w.put(&p.to_be_bytes());
                w.put(&[cfg.plane, kind]);
            } else {
                w.put(&[p as u8, cfg.plane, kind, 0]);
            }
            w.put(&accel.to_be_bytes());
        }
    })?;
    w.section(SECTION_VC_WEIGHTS, |w| w.put(&t.vc_weights()))?;
    for (idx, p) in (0u8..).zip(t.partitions()) {
        w.section(SECTION_PARTITION, |w| {
            w.put(&p.id.get().to_be_bytes());
            let (flags, rate, burst) = match p.rate_cap {
                Some(c) => (PARTITION_FLAG_RATE_CAP, c.bytes_per_us, c.burst_bytes),
                None => (0, 0, 0),
            };
            w.put(&[p.weight, flags]);
            w.put(&rate.to_be_bytes());
            w.put(&burst.to_be_bytes());
            for_runs(
                |a| (t.ids.get(usize::from(a)).map_or(NO_PART, |e| e.part) == idx).then_some(()),
                |first, count, ()| {
                    w.put(&first.to_be_bytes());
                    w.put(&count.to_be_bytes());
                },
            );
        })?;
    }
    w.section(SECTION_ROUTES, |w| {
        for_runs(
            |a| {
                let e = t.ids.get(usize::from(a))?;
                (e.n != 0).then_some((e.ways, e.n))
            },
            |first, count, (ways, n)| {
                w.put(&first.to_be_bytes());
                w.put(&count.to_be_bytes());
                w.put(&[n]);
                for p in ways.iter().take(usize::from(n)) {
                    if wide {
                        w.put(&p.get().to_be_bytes());
                    } else {
                        w.put(&[p.get() as u8]);
                    }
                }
            },
        );
    })?;
    let len = w.pos;
    if len.saturating_add(TRAILER_LEN) > w.buf.len() {
        return Err(EmitError::BufferTooSmall {
            needed: len + TRAILER_LEN,
        });
    }
    let crc = CRC32_BZIP2.checksum(w.buf.get(..len).unwrap_or(&[]));
    w.put(&crc.to_be_bytes());
    Ok(w.pos)
}

/// Call `f(first, count, value)` for each maximal run of consecutive IDs on which `key`
/// gives the same `Some(value)`.
fn for_runs<K: PartialEq + Copy>(key: impl Fn(u16) -> Option<K>, mut f: impl FnMut(u16, u16, K)) {
    let mut run: Option<(u16, u16, K)> = None;
    for a in 0..MAX_IDS as u16 {
        let k = key(a);
        match (run, k) {
            (Some((first, count, v)), Some(k)) if v == k => run = Some((first, count + 1, v)),
            _ => {
                if let Some((first, count, v)) = run.take() {
                    f(first, count, v);
                }
                run = k.map(|k| (a, 1, k));
            }
        }
    }
    if let Some((first, count, v)) = run {
        f(first, count, v);
    }
}

#[cfg(test)]
mod tests;
