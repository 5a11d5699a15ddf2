//! Partitions (virtual pods): which accelerator belongs to which partition
//! (`spec-notes/transactions.md#partitions`).
//!
//! A TL request carries no partition field, so a completer learns the requester's partition
//! from its own table, indexed by the request's `srcaccid`. The fabric manager (or the test
//! harness) fills the table; an accelerator with no entry is in no partition and every
//! request from it is refused.

use crate::wire::{AccelId, PartitionId};

const UNASSIGNED: u16 = u16::MAX;
const ENTRIES: usize = 1 << AccelId::BITS;

/// Accelerator → partition, for every 10-bit accelerator ID (2 KiB).
#[derive(Clone, PartialEq, Eq)]
pub struct PartitionTable {
    entries: [u16; ENTRIES],
}

impl core::fmt::Debug for PartitionTable {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let assigned = self.entries.iter().filter(|&&e| e != UNASSIGNED).count();
        write!(f, "PartitionTable {{ {assigned} assigned }}")
    }
}

impl PartitionTable {
    /// Every accelerator in partition `p` (a pod without virtual pods).
    pub const fn all_in(p: PartitionId) -> Self {
        PartitionTable {
            entries: [p.get(); ENTRIES],
        }
    }

    /// No accelerator in any partition.
    pub const fn empty() -> Self {
        PartitionTable {
            entries: [UNASSIGNED; ENTRIES],
        }
    }

    /// Put `accel` in partition `p`, or in none.
    pub fn set(&mut self, accel: AccelId, p: Option<PartitionId>) {
        if let Some(e) = self.entries.get_mut(usize::from(accel.get())) {
            *e = p.map_or(UNASSIGNED, PartitionId::get);
        }
    }

    /// The partition of `accel`.
    pub fn get(&self, accel: AccelId) -> Option<PartitionId> {
        self.entries
            .get(usize::from(accel.get()))
            .and_then(|&e| PartitionId::new(e))
    }

    /// `accel` is in partition `p`.
    pub fn is_member(&self, accel: AccelId, p: PartitionId) -> bool {
        self.get(accel) == Some(p)
    }
}

impl Default for PartitionTable {
    fn default() -> Self {
        PartitionTable::all_in(PartitionId::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership() {
        let a = AccelId::new(5).unwrap();
        let p1 = PartitionId::new(1).unwrap();
        let mut t = PartitionTable::default();
        assert_eq!(t.get(a), Some(PartitionId::default()));
        t.set(a, Some(p1));
        assert!(t.is_member(a, p1));
        t.set(a, None);
        assert_eq!(t.get(a), None);
        assert!(!t.is_member(a, p1));
        let e = PartitionTable::empty();
        assert_eq!(e.get(AccelId::new(1023).unwrap()), None);
        assert_eq!(format!("{e:?}"), "PartitionTable { 0 assigned }");
        assert_eq!(PartitionTable::all_in(p1).get(a), Some(p1));
    }
}
