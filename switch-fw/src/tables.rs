//! Forwarding tables: routes, port attachments, partitions, weights and rate caps
//! (`spec-notes/switch.md#tables`).
//!
//! One [`Tables`] value is one bank. The switch holds two and swaps them on commit; a bank is
//! filled in place (by [`crate::config::parse_into`] or the builder methods below) and then
//! checked as a whole by [`Tables::validate`]. Builder methods refuse an entry with the same
//! typed [`ConfigError`] the binary parser reports, so both paths share every rule.
//!
//! Per destination ID the bank holds one packed [`IdEntry`] (egress ways, partition, local
//! attachment), so the fast path reads one entry for the source and one for the destination.
//!
//! A bank's capacity is a compile-time parameter: `PORTS` ports, whose numbers the packed
//! entries store as `P` ([`PortIndex`]: `u8` for at most 255 ports, `u16` for at most
//! [`crate::WIDE_PORTS`]). The public interface always speaks `u16` port numbers.

use crate::config::ConfigError;
use crate::{MAX_IDS, MAX_PARTITIONS, MAX_PORTS, MAX_WAYS, NUM_VCS, WIDE_PORTS};
use core::fmt::Debug;
use core::hash::Hash;
use podlink_protocol::wire::{AccelId, PartitionId};

/// "No partition" in a packed table entry.
pub(crate) const NO_PART: u8 = 0xff;
/// Most switch planes a port may be labelled with.
pub const MAX_PLANES: u8 = 16;

mod sealed {
    pub trait Sealed {}
    impl Sealed for u8 {}
    impl Sealed for u16 {}
}

/// How a switch instance stores port numbers in its packed tables (`u8` or `u16`).
///
/// Besides the storage width it fixes the size of the per-port-number maps the forwarding
/// decision reads (egress scores, ingress attachments): [`PortIndex::Map`] has one entry for
/// every value of `u8` (256), so the firmware's lookups need no bounds check, and
/// [`WIDE_PORTS`] entries for `u16` (a lookup beyond scores 0 / "unused").
pub trait PortIndex:
    sealed::Sealed + Copy + Eq + Ord + Debug + Hash + Send + Sync + 'static
{
    /// "No port".
    const NONE: Self;
    /// Most ports an instance with this storage may have.
    const LIMIT: usize;
    /// One `u16` per port number.
    type Map: Copy + Debug + PartialEq + Eq + Send + Sync + AsRef<[u16]> + AsMut<[u16]>;
    /// A map filled with `v`.
    fn map(v: u16) -> Self::Map;
    /// The stored form of port `p` ([`PortIndex::NONE`] for a value that does not fit).
    fn store(p: u16) -> Self;
    /// The port number (widened; [`PortIndex::NONE`] is no port below `LIMIT`).
    fn get(self) -> u16;
}

impl PortIndex for u8 {
    const NONE: u8 = 0xff;
    const LIMIT: usize = 255;
    type Map = [u16; 256];
    #[inline(always)]
    fn map(v: u16) -> [u16; 256] {
        [v; 256]
    }
    #[inline(always)]
    fn store(p: u16) -> u8 {
        u8::try_from(p).unwrap_or(0xff)
    }
    #[inline(always)]
    fn get(self) -> u16 {
        u16::from(self)
    }
}

impl PortIndex for u16 {
    const NONE: u16 = 0xffff;
    const LIMIT: usize = WIDE_PORTS;
    type Map = [u16; WIDE_PORTS];
    #[inline(always)]
    fn map(v: u16) -> [u16; WIDE_PORTS] {
        [v; WIDE_PORTS]
    }
    #[inline(always)]
    fn store(p: u16) -> u16 {
        p
    }
    #[inline(always)]
    fn get(self) -> u16 {
        self
    }
}

/// The entry of port `p` in a map (`None` beyond it).
#[inline(always)]
pub(crate) fn map_at<P: PortIndex>(m: &P::Map, p: P) -> Option<u16> {
    m.as_ref().get(usize::from(p.get())).copied()
}

/// What is attached to a port: decides which source IDs it may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Attachment {
    /// Nothing: every frame arriving on the port is dropped; no route may use it.
    #[default]
    Unused,
    /// One accelerator: only its ID is a legal source on this port.
    Accelerator(AccelId),
    /// Another switch (a trunk): any source that is not attached to this switch locally.
    Switch,
}

/// Configuration of one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PortCfg {
    /// What the port is attached to.
    pub attach: Attachment,
    /// The switch plane the port belongs to (labels only; `< MAX_PLANES`).
    pub plane: u8,
}

/// A per-partition rate cap at each egress port (a GCRA token bucket on explicit time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RateCap {
    /// Sustained rate in bytes per microsecond (= MB/s); at least 1.
    pub bytes_per_us: u32,
    /// Burst the cap lets through at once, in bytes.
    pub burst_bytes: u32,
}

/// One partition (virtual pod).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartitionCfg {
    /// The partition ID.
    pub id: PartitionId,
    /// Its weight in the per-partition round robin at each egress (≥ 1).
    pub weight: u8,
    /// Optional rate cap per egress port.
    pub rate_cap: Option<RateCap>,
}

/// The packed per-ID entry: egress ways to reach the ID, its partition and local port.
///
/// 16 bytes with `u8` ports (32 with `u16`), so an ID indexes the table with a shift. Unused
/// ways hold [`PortIndex::NONE`], whose score is always 0, so the adaptive choice can scan
/// all [`MAX_WAYS`] without a count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C, align(16))]
pub struct IdEntry<P: PortIndex = u8> {
    pub(crate) ways: [P; MAX_WAYS],
    pub(crate) n: u8,
    pub(crate) part: u8,
    pub(crate) home: P,
}

const _: () = assert!(core::mem::size_of::<IdEntry<u8>>() == 16);
const _: () = assert!(core::mem::size_of::<IdEntry<u16>>() == 32);

/// Packed ingress attachment: an accelerator ID (< 1024), [`INGRESS_TRUNK`] or
/// [`INGRESS_UNUSED`].
pub(crate) const INGRESS_TRUNK: u16 = 0x8000;
/// Packed ingress attachment of an unused or out-of-range port.
pub(crate) const INGRESS_UNUSED: u16 = 0xffff;

impl<P: PortIndex> IdEntry<P> {
    const EMPTY: IdEntry<P> = IdEntry {
        ways: [P::NONE; MAX_WAYS],
        n: 0,
        part: NO_PART,
        home: P::NONE,
    };

    /// The egress ports that reach this ID, as stored.
    pub fn ways(&self) -> &[P] {
        self.ways.get(..usize::from(self.n)).unwrap_or(&[])
    }
}

/// One bank of forwarding tables of a switch of at most `PORTS` ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tables<const PORTS: usize = MAX_PORTS, P: PortIndex = u8> {
    pub(crate) ids: [IdEntry<P>; MAX_IDS],
    pub(crate) ports: [PortCfg; PORTS],
    /// Derived by `validate`: packed attachment per ingress port number (every value of `P`).
    pub(crate) ingress: P::Map,
    pub(crate) parts: [PartitionCfg; MAX_PARTITIONS],
    pub(crate) n_parts: u8,
    pub(crate) num_ports: u16,
    pub(crate) vc_weights: [u8; NUM_VCS],
    pub(crate) adaptive: bool,
    pub(crate) generation: u32,
    configured: [bool; PORTS],
}

const EMPTY_PART: PartitionCfg = PartitionCfg {
    id: PartitionId::from_bits_truncate(0),
    weight: 1,
    rate_cap: None,
};

impl<const PORTS: usize, P: PortIndex> Default for Tables<PORTS, P> {
    fn default() -> Self {
        Self::empty()
    }
}

impl Tables {
    /// An empty bank of the default (firmware) instance: no ports, no routes, no partitions
    /// (every frame is dropped). [`Tables::empty`] for any instance.
    pub fn new() -> Tables {
        Tables::empty()
    }
}

impl<const PORTS: usize, P: PortIndex> Tables<PORTS, P> {
    /// Compile-time check of the instance: 1 ..= `P::LIMIT` ports.
    const CAPACITY_OK: () = assert!(PORTS > 0 && PORTS <= P::LIMIT);

    /// An empty bank: no ports, no routes, no partitions (every frame is dropped).
    pub fn empty() -> Self {
        let () = Self::CAPACITY_OK;
        Tables {
            ids: [IdEntry::EMPTY; MAX_IDS],
            ports: [PortCfg {
                attach: Attachment::Unused,
                plane: 0,
            }; PORTS],
            ingress: P::map(INGRESS_UNUSED),
            parts: [EMPTY_PART; MAX_PARTITIONS],
            n_parts: 0,
            num_ports: 0,
            vc_weights: [1; NUM_VCS],
            adaptive: true,
            generation: 0,
            configured: [false; PORTS],
        }
    }

    /// Ports this instance can hold (`PORTS`).
    pub const fn capacity(&self) -> u16 {
        PORTS as u16
    }

    /// Reset the bank in place to [`Tables::empty`] (no large temporary on the stack).
    pub fn clear(&mut self) {
        self.ids.fill(IdEntry::EMPTY);
        self.ports.fill(PortCfg::default());
        self.ingress.as_mut().fill(INGRESS_UNUSED);
        self.parts.fill(EMPTY_PART);
        self.n_parts = 0;
        self.num_ports = 0;
        self.vc_weights = [1; NUM_VCS];
        self.adaptive = true;
        self.generation = 0;
        self.configured.fill(false);
    }

    /// Ports in use: port numbers are `0..num_ports`.
    pub fn num_ports(&self) -> u16 {
        self.num_ports
    }

    /// Set the number of ports.
    ///
    /// # Errors
    /// `PortOutOfRange` for 0, `PortCapacity` for more than `PORTS`.
    pub fn set_num_ports(&mut self, n: u16) -> Result<(), ConfigError> {
        if n == 0 {
            return Err(ConfigError::PortOutOfRange(n));
        }
        if usize::from(n) > PORTS {
            return Err(ConfigError::PortCapacity {
                ports: n,
                capacity: PORTS as u16,
            });
        }
        self.num_ports = n;
        Ok(())
    }

    /// Adaptive choice among a destination's ports (`false`: deterministic hashing).
    pub fn adaptive(&self) -> bool {
        self.adaptive
    }

    /// Turn adaptive choice on or off.
    pub fn set_adaptive(&mut self, on: bool) {
        self.adaptive = on;
    }

    /// The configuration generation (an operator's version number, echoed in events).
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Set the generation.
    pub fn set_generation(&mut self, g: u32) {
        self.generation = g;
    }

    /// Weights of the per-VC round robin at each egress.
    pub fn vc_weights(&self) -> [u8; NUM_VCS] {
        self.vc_weights
    }

    /// Set the VC weights.
    ///
    /// # Errors
    /// `ZeroWeight` when a weight is 0.
    pub fn set_vc_weights(&mut self, w: [u8; NUM_VCS]) -> Result<(), ConfigError> {
        if w.contains(&0) {
            return Err(ConfigError::ZeroWeight);
        }
        self.vc_weights = w;
        Ok(())
    }

    /// The configuration of port `p`, if it is in range.
    pub fn port(&self, p: u16) -> Option<PortCfg> {
        self.ports.get(usize::from(p)).copied()
    }

    /// Port `p` was configured in this bank.
    pub fn port_configured(&self, p: u16) -> bool {
        self.configured
            .get(usize::from(p))
            .copied()
            .unwrap_or(false)
    }

    /// Configure port `p` (once per bank).
    ///
    /// # Errors
    /// `PortOutOfRange`, `DuplicatePort`, `BadPlane`.
    pub fn set_port(&mut self, p: u16, cfg: PortCfg) -> Result<(), ConfigError> {
        if p >= self.num_ports {
            return Err(ConfigError::PortOutOfRange(p));
        }
        if cfg.plane >= MAX_PLANES {
            return Err(ConfigError::BadPlane(cfg.plane));
        }
        let (Some(slot), Some(done)) = (
            self.ports.get_mut(usize::from(p)),
            self.configured.get_mut(usize::from(p)),
        ) else {
            return Err(ConfigError::PortOutOfRange(p));
        };
        if *done {
            return Err(ConfigError::DuplicatePort(p));
        }
        *slot = cfg;
        *done = true;
        Ok(())
    }

    /// Replace the attachment of configured port `p` and validate the bank again (used when
    /// bring-up identifies the peer, [`crate::Switch::learn_attachment`]).
    ///
    /// # Errors
    /// `PortOutOfRange`, or the first rule [`Tables::validate`] finds broken.
    pub fn replace_attachment(&mut self, p: u16, attach: Attachment) -> Result<(), ConfigError> {
        if p >= self.num_ports {
            return Err(ConfigError::PortOutOfRange(p));
        }
        let slot = self
            .ports
            .get_mut(usize::from(p))
            .ok_or(ConfigError::PortOutOfRange(p))?;
        slot.attach = attach;
        self.validate()
    }

    /// The partitions, in the order they were added (their index is their queue class).
    pub fn partitions(&self) -> &[PartitionCfg] {
        self.parts.get(..usize::from(self.n_parts)).unwrap_or(&[])
    }

    /// Add a partition; returns its index.
    ///
    /// # Errors
    /// `TooManyPartitions`, `DuplicatePartition`, `ZeroWeight`, `ZeroRate`.
    pub fn add_partition(&mut self, cfg: PartitionCfg) -> Result<u8, ConfigError> {
        if cfg.weight == 0 {
            return Err(ConfigError::ZeroWeight);
        }
        if matches!(cfg.rate_cap, Some(c) if c.bytes_per_us == 0) {
            return Err(ConfigError::ZeroRate);
        }
        if self.partitions().iter().any(|p| p.id == cfg.id) {
            return Err(ConfigError::DuplicatePartition(cfg.id.get()));
        }
        let idx = self.n_parts;
        let slot = self
            .parts
            .get_mut(usize::from(idx))
            .ok_or(ConfigError::TooManyPartitions)?;
        *slot = cfg;
        self.n_parts = idx.wrapping_add(1);
        Ok(idx)
    }

    /// Make `accel` a member of the partition at index `part`.
    ///
    /// # Errors
    /// `NoSuchPartition`, `DuplicateMember` (an accelerator belongs to one partition).
    pub fn add_member(&mut self, part: u8, accel: AccelId) -> Result<(), ConfigError> {
        if part >= self.n_parts {
            return Err(ConfigError::NoSuchPartition(part));
        }
        let e = self
            .ids
            .get_mut(usize::from(accel.get()))
            .ok_or(ConfigError::IdOutOfRange(accel.get()))?;
        if e.part != NO_PART {
            return Err(ConfigError::DuplicateMember(accel.get()));
        }
        e.part = part;
        Ok(())
    }

    /// The partition index of a frame for `dst` (0 if none) that arrived on port `ingress`,
    /// and whether it goes up: from an accelerator port to an accelerator attached to another
    /// switch (a leaf's request or response for another leaf; [`crate::UPLINK_RESERVE`]).
    pub(crate) fn frame_class(&self, ingress: u16, dst: AccelId) -> (u8, bool) {
        let Some(d) = self.ids.get(usize::from(dst.get()) & (MAX_IDS - 1)) else {
            return (0, false);
        };
        let part = if d.part == NO_PART { 0 } else { d.part };
        (
            part,
            d.home == P::NONE && self.attachment(ingress) < INGRESS_TRUNK,
        )
    }

    /// The packed attachment word of ingress port `ingress`: an accelerator ID,
    /// `INGRESS_TRUNK` or `INGRESS_UNUSED`.
    #[inline(always)]
    pub(crate) fn attachment(&self, ingress: u16) -> u16 {
        self.ingress
            .as_ref()
            .get(usize::from(ingress))
            .copied()
            .unwrap_or(INGRESS_UNUSED)
    }

    /// The index of the partition `accel` belongs to.
    pub fn partition_of(&self, accel: AccelId) -> Option<u8> {
        self.ids
            .get(usize::from(accel.get()))
            .map(|e| e.part)
            .filter(|&p| p != NO_PART)
    }

    /// Set the egress ports that reach `dst` (once per destination per bank).
    ///
    /// # Errors
    /// `DuplicateRoute`, `EmptyRoute`, `TooManyWays`, `DuplicateWay`, `PortOutOfRange`.
    pub fn set_route(&mut self, dst: AccelId, ports: &[u16]) -> Result<(), ConfigError> {
        let d = dst.get();
        if ports.is_empty() {
            return Err(ConfigError::EmptyRoute(d));
        }
        if ports.len() > MAX_WAYS {
            return Err(ConfigError::TooManyWays(d));
        }
        for (i, &p) in ports.iter().enumerate() {
            if usize::from(p) >= PORTS {
                return Err(ConfigError::PortOutOfRange(p));
            }
            if ports.get(..i).is_some_and(|before| before.contains(&p)) {
                return Err(ConfigError::DuplicateWay { dst: d, port: p });
            }
        }
        let e = self
            .ids
            .get_mut(usize::from(d))
            .ok_or(ConfigError::IdOutOfRange(d))?;
        if e.n != 0 {
            return Err(ConfigError::DuplicateRoute(d));
        }
        for (slot, &p) in e.ways.iter_mut().zip(ports) {
            *slot = P::store(p);
        }
        e.n = ports.len() as u8; // ≤ MAX_WAYS, checked above
        Ok(())
    }

    /// The egress ports that reach `dst` (none when there is no route).
    pub fn route(&self, dst: AccelId) -> impl Iterator<Item = u16> + '_ {
        self.ids
            .get(usize::from(dst.get()))
            .map_or(&[][..], IdEntry::ways)
            .iter()
            .map(|p| p.get())
    }

    /// How many egress ports reach `dst`.
    pub fn route_len(&self, dst: AccelId) -> usize {
        self.ids
            .get(usize::from(dst.get()))
            .map_or(0, |e| usize::from(e.n))
    }

    /// The port `accel` is attached to locally, if any (filled in by [`Tables::validate`]).
    pub fn home_port(&self, accel: AccelId) -> Option<u16> {
        self.ids
            .get(usize::from(accel.get()))
            .filter(|e| e.home != P::NONE)
            .map(|e| e.home.get())
    }

    /// Check the bank as a whole and derive the local-attachment index.
    ///
    /// Rules (`spec-notes/switch.md#validation`): ports set; every route way is a configured,
    /// used port below `num_ports`; a way attached to an accelerator only routes to that
    /// accelerator; every member of a partition (a permitted destination) has a route.
    /// A routing loop through other switches cannot be seen from one switch and is not
    /// checked.
    ///
    /// # Errors
    /// The first rule broken, as a typed [`ConfigError`].
    pub fn validate(&mut self) -> Result<(), ConfigError> {
        if self.num_ports == 0 {
            return Err(ConfigError::MissingSection(crate::config::SECTION_PORTS));
        }
        for e in self.ids.iter_mut() {
            e.home = P::NONE;
        }
        self.ingress.as_mut().fill(INGRESS_UNUSED);
        for (p, cfg) in (0u16..)
            .zip(self.ports.iter())
            .take(usize::from(self.num_ports))
        {
            if let Some(slot) = self.ingress.as_mut().get_mut(usize::from(p)) {
                *slot = match cfg.attach {
                    Attachment::Unused => INGRESS_UNUSED,
                    Attachment::Accelerator(a) => a.get(),
                    Attachment::Switch => INGRESS_TRUNK,
                };
            }
            if let Attachment::Accelerator(a) = cfg.attach {
                if let Some(e) = self.ids.get_mut(usize::from(a.get())) {
                    if e.home == P::NONE {
                        e.home = P::store(p);
                    }
                }
            }
        }
        for (d, e) in (0u16..).zip(self.ids.iter()) {
            for p in e.ways().iter().map(|p| p.get()) {
                let cfg = self
                    .ports
                    .get(usize::from(p))
                    .filter(|_| p < self.num_ports)
                    .ok_or(ConfigError::RouteToNonexistentPort { dst: d, port: p })?;
                match cfg.attach {
                    Attachment::Unused => {
                        return Err(ConfigError::RouteToNonexistentPort { dst: d, port: p })
                    }
                    Attachment::Accelerator(a) if a.get() != d => {
                        return Err(ConfigError::RouteToWrongAccelerator { dst: d, port: p })
                    }
                    _ => {}
                }
            }
            if e.part != NO_PART && e.n == 0 {
                return Err(ConfigError::EmptyRoute(d));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(v: u16) -> AccelId {
        AccelId::new(v).unwrap()
    }

    fn base() -> Tables {
        let mut t = Tables::new();
        t.set_num_ports(4).unwrap();
        t.set_port(
            0,
            PortCfg {
                attach: Attachment::Accelerator(id(1)),
                plane: 0,
            },
        )
        .unwrap();
        t.set_port(
            1,
            PortCfg {
                attach: Attachment::Accelerator(id(2)),
                plane: 0,
            },
        )
        .unwrap();
        t.set_port(
            2,
            PortCfg {
                attach: Attachment::Switch,
                plane: 1,
            },
        )
        .unwrap();
        let p = t
            .add_partition(PartitionCfg {
                id: PartitionId::new(7).unwrap(),
                weight: 1,
                rate_cap: None,
            })
            .unwrap();
        t.add_member(p, id(1)).unwrap();
        t.add_member(p, id(2)).unwrap();
        t.set_route(id(1), &[0]).unwrap();
        t.set_route(id(2), &[1]).unwrap();
        t
    }

    #[test]
    fn test_valid_bank() {
        let mut t = base();
        t.validate().unwrap();
        assert_eq!(t.home_port(id(1)), Some(0));
        assert_eq!(t.home_port(id(3)), None);
        assert_eq!(t.route(id(2)).collect::<Vec<_>>(), [1]);
        assert_eq!(t.partition_of(id(2)), Some(0));
    }

    #[test]
    fn test_refusals() {
        let mut t = base();
        assert_eq!(
            t.set_route(id(1), &[0]),
            Err(ConfigError::DuplicateRoute(1))
        );
        assert_eq!(t.set_route(id(5), &[]), Err(ConfigError::EmptyRoute(5)));
        assert_eq!(
            t.set_route(id(5), &[2, 2]),
            Err(ConfigError::DuplicateWay { dst: 5, port: 2 })
        );
        assert_eq!(
            t.set_route(id(5), &[0; 9]),
            Err(ConfigError::TooManyWays(5))
        );
        assert_eq!(
            t.set_route(id(5), &[64]),
            Err(ConfigError::PortOutOfRange(64))
        );
        assert_eq!(
            t.set_port(0, PortCfg::default()),
            Err(ConfigError::DuplicatePort(0))
        );
        assert_eq!(
            t.set_port(4, PortCfg::default()),
            Err(ConfigError::PortOutOfRange(4))
        );
        assert_eq!(
            t.set_port(
                3,
                PortCfg {
                    attach: Attachment::Switch,
                    plane: 16
                }
            ),
            Err(ConfigError::BadPlane(16))
        );
        assert_eq!(t.add_member(0, id(1)), Err(ConfigError::DuplicateMember(1)));
        assert_eq!(t.add_member(3, id(9)), Err(ConfigError::NoSuchPartition(3)));
        assert_eq!(t.set_vc_weights([1, 0, 1, 1]), Err(ConfigError::ZeroWeight));
        assert_eq!(t.set_num_ports(0), Err(ConfigError::PortOutOfRange(0)));
        let dup = PartitionCfg {
            id: PartitionId::new(7).unwrap(),
            weight: 1,
            rate_cap: None,
        };
        assert_eq!(
            t.add_partition(dup),
            Err(ConfigError::DuplicatePartition(7))
        );
        let zero = PartitionCfg {
            id: PartitionId::new(8).unwrap(),
            weight: 0,
            rate_cap: None,
        };
        assert_eq!(t.add_partition(zero), Err(ConfigError::ZeroWeight));
        let zr = PartitionCfg {
            id: PartitionId::new(8).unwrap(),
            weight: 1,
            rate_cap: Some(RateCap {
                bytes_per_us: 0,
                burst_bytes: 1,
            }),
        };
        assert_eq!(t.add_partition(zr), Err(ConfigError::ZeroRate));
        for i in 1..MAX_PARTITIONS as u16 {
            let c = PartitionCfg {
                id: PartitionId::new(100 + i).unwrap(),
                weight: 1,
                rate_cap: None,
            };
            t.add_partition(c).unwrap();
        }
        let c = PartitionCfg {
            id: PartitionId::new(99).unwrap(),
            weight: 1,
            rate_cap: None,
        };
        assert_eq!(t.add_partition(c), Err(ConfigError::TooManyPartitions));
    }

    #[test]
    fn test_validate_errors() {
        let mut t = base();
        t.set_route(id(9), &[3]).unwrap();
        assert_eq!(
            t.validate(),
            Err(ConfigError::RouteToNonexistentPort { dst: 9, port: 3 })
        );

        let mut t = base();
        t.set_route(id(9), &[0]).unwrap();
        assert_eq!(
            t.validate(),
            Err(ConfigError::RouteToWrongAccelerator { dst: 9, port: 0 })
        );

        let mut t = base();
        t.add_member(0, id(3)).unwrap();
        assert_eq!(t.validate(), Err(ConfigError::EmptyRoute(3)));

        let mut t = Tables::new();
        assert!(matches!(t.validate(), Err(ConfigError::MissingSection(_))));
    }

    #[test]
    fn test_clear() {
        let mut t = base();
        t.clear();
        assert_eq!(t, Tables::new());
    }
}
