//! Typed identifiers with their widths (`spec-notes/wire.md#identifiers`).

use super::bits::Field;
use core::fmt;

macro_rules! bounded_id {
    ($(#[$m:meta])* $name:ident($raw:ty), bits = $bits:literal, what = $what:literal) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name($raw);

        impl $name {
            /// Width of the field in bits.
            pub const BITS: u32 = $bits;
            /// Largest legal value.
            pub const MAX: $raw = ((1u32 << $bits) - 1) as $raw;

            /// The identifier, or `None` when `raw` does not fit in its width.
            pub const fn new(raw: $raw) -> Option<Self> {
                if raw <= Self::MAX { Some(Self(raw)) } else { None }
            }

            /// The identifier from the low bits of `raw` (higher bits are discarded).
            pub const fn from_bits_truncate(raw: $raw) -> Self {
                Self(raw & Self::MAX)
            }

            /// The raw value.
            pub const fn get(self) -> $raw {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl Field for $name {
            fn from_bits(v: u64) -> Self {
                Self((v as $raw) & Self::MAX)
            }
            fn to_bits(self) -> u64 {
                u64::from(self.0)
            }
        }
    };
}

bounded_id!(
    /// Accelerator ID: 10 bits, up to 1024 accelerators in a pod.
    AccelId(u16), bits = 10, what = "accelerator id"
);
bounded_id!(
    /// Transaction tag: 11 bits, 2048 outstanding requests per source.
    Tag(u16), bits = 11, what = "tag"
);
bounded_id!(
    /// Virtual channel: 2 bits, 4 VCs.
    Vc(u8), bits = 2, what = "virtual channel"
);
bounded_id!(
    /// Partition (virtual pod) ID: 10 bits.
    PartitionId(u16), bits = 10, what = "partition id"
);

/// Ethernet-profile packet sequence number: 16 bits, wrapping modulo 2^16.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(pub u16);

impl Psn {
    /// The next PSN (wraps 65535 → 0).
    pub const fn next(self) -> Self {
        Psn(self.0.wrapping_add(1))
    }
    /// Signed distance from `other` to `self` in the 16-bit sequence space.
    pub const fn diff(self, other: Psn) -> i16 {
        self.0.wrapping_sub(other.0) as i16
    }
    /// `self` is after `other` (within half the sequence space).
    pub const fn is_after(self, other: Psn) -> bool {
        self.diff(other) > 0
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// DL flit sequence number: 9 bits, 1..=511; 0 is reserved; 511 wraps to 1.
///
/// The space has 511 values, so window arithmetic is modulo 511 over `value - 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SeqNum(u16);

impl SeqNum {
    /// The first sequence number after link-up.
    pub const FIRST: SeqNum = SeqNum(1);
    /// Largest sequence number.
    pub const MAX: u16 = 511;
    /// Number of distinct sequence numbers.
    pub const SPACE: u16 = 511;

    /// The sequence number, or `None` for 0 (reserved) or anything above 511.
    pub const fn new(raw: u16) -> Option<Self> {
        if raw >= 1 && raw <= Self::MAX {
            Some(SeqNum(raw))
        } else {
            None
        }
    }

    /// The raw 9-bit value.
    pub const fn get(self) -> u16 {
        self.0
    }

    /// The next sequence number (511 → 1).
    pub const fn next(self) -> Self {
        self.add(1)
    }

    /// The previous sequence number (1 → 511).
    pub const fn prev(self) -> Self {
        SeqNum(((self.0 - 1 + Self::SPACE - 1) % Self::SPACE) + 1)
    }

    /// `self + n` in the 511-value space.
    pub const fn add(self, n: u16) -> Self {
        SeqNum((((self.0 - 1) as u32 + n as u32) % Self::SPACE as u32) as u16 + 1)
    }

    /// Forward distance from `from` to `self` (0..=510).
    pub const fn distance_from(self, from: SeqNum) -> u16 {
        (self.0 + Self::SPACE - from.0) % Self::SPACE
    }

    /// `self` lies in the window of `len` numbers starting at `start`
    /// (`start`, `start + 1`, …, `start + len - 1`).
    pub const fn in_window(self, start: SeqNum, len: u16) -> bool {
        self.distance_from(start) < len
    }
}

impl Default for SeqNum {
    fn default() -> Self {
        SeqNum::FIRST
    }
}

impl fmt::Display for SeqNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_wraps_511_to_1() {
        let s = SeqNum::new(511).unwrap();
        assert_eq!(s.next().get(), 1);
        assert_eq!(SeqNum::FIRST.prev().get(), 511);
        assert_eq!(SeqNum::new(0), None);
        assert_eq!(SeqNum::new(512), None);
        assert_eq!(SeqNum::new(510).unwrap().add(3).get(), 2);
    }

    #[test]
    fn seq_window_edges() {
        let start = SeqNum::new(500).unwrap();
        assert!(start.in_window(start, 1));
        assert!(!start.in_window(start, 0));
        let end = start.add(254);
        assert_eq!(end.get(), 243);
        assert!(end.in_window(start, 255));
        assert!(!end.next().in_window(start, 255));
        assert!(!start.prev().in_window(start, 255));
        assert_eq!(end.distance_from(start), 254);
    }

    #[test]
    fn psn_wraps() {
        assert_eq!(Psn(65535).next(), Psn(0));
        assert!(Psn(2).is_after(Psn(65530)));
        assert!(!Psn(65530).is_after(Psn(2)));
    }

    #[test]
    fn ids_bounded() {
        assert!(AccelId::new(1023).is_some());
        assert!(AccelId::new(1024).is_none());
        assert!(Tag::new(2047).is_some());
        assert!(Tag::new(2048).is_none());
        assert!(Vc::new(4).is_none());
        assert_eq!(PartitionId::from_bits_truncate(1025).get(), 1);
    }
}
