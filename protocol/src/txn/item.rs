//! The TL item: one control field plus the data that travels with it
//! (`spec-notes/transactions.md#tl-items`).
//!
//! This is what the transaction layer hands to the TL flit packer and receives from the
//! unpacker: a request or response control field, up to four 64 B data beats, the 32 B
//! byte-enable half-flit of a partial write, and a per-beat poison mask (a beat replaced by the
//! TL "poisoned data" message).
//!
//! FIXME: switch to the TL packer's item type when branch `tl` lands in `main`.

use crate::wire::{TlField, TlFlowControl};

/// Bytes in one data beat (one TL data credit, two data half-flits).
pub const BEAT_BYTES: usize = 64;
/// Most data beats one request or response carries.
pub const MAX_BEATS: usize = 4;
/// Most data bytes one request or response carries.
pub const MAX_DATA_BYTES: usize = BEAT_BYTES * MAX_BEATS;
/// Requests never cross a boundary of this many bytes (an ordering region, too).
pub const REGION_BYTES: u64 = 256;

/// Byte enables of a partial write: bit `i % 8` (LSB first) of byte `i / 8` enables data
/// byte `i` of the request (`spec-notes/transactions.md#byte-enables`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ByteEnables(pub [u8; 32]);

impl ByteEnables {
    /// Every byte enabled.
    pub const ALL: ByteEnables = ByteEnables([0xff; 32]);
    /// No byte enabled.
    pub const NONE: ByteEnables = ByteEnables([0; 32]);

    /// Byte `i` is enabled (false beyond 256).
    pub fn get(&self, i: usize) -> bool {
        self.0.get(i / 8).is_some_and(|b| b & (1u8 << (i % 8)) != 0)
    }

    /// Enable or disable byte `i` (ignored beyond 256).
    pub fn set(&mut self, i: usize, on: bool) {
        if let Some(b) = self.0.get_mut(i / 8) {
            let bit = 1u8 << (i % 8);
            if on {
                *b |= bit;
            } else {
                *b &= !bit;
            }
        }
    }

    /// Every one of the first `len` bytes is enabled.
    pub fn all_set(&self, len: usize) -> bool {
        (0..len.min(MAX_DATA_BYTES)).all(|i| self.get(i))
    }

    /// Enables for the bytes `start..end` only.
    pub fn range(start: usize, end: usize) -> ByteEnables {
        let mut be = ByteEnables::NONE;
        for i in start..end.min(MAX_DATA_BYTES) {
            be.set(i, true);
        }
        be
    }
}

/// A TL control field and its data: the unit of the TL packer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlItem {
    /// The control field (a request, a response, or flow control).
    pub field: TlField,
    /// Data beats, `beats × 64` bytes valid from the start.
    pub data: [u8; MAX_DATA_BYTES],
    /// Number of 64 B data beats that follow the field (0..=4).
    pub beats: u8,
    /// The byte-enable half-flit (partial writes only).
    pub byte_enables: Option<ByteEnables>,
    /// Bit `i` set: data beat `i` arrived as "poisoned data" and must not be used.
    pub poisoned: u8,
}

impl Default for TlItem {
    fn default() -> Self {
        TlItem::new(TlField::FlowControl(TlFlowControl::default()))
    }
}

impl TlItem {
    /// An item with no data.
    pub const fn new(field: TlField) -> Self {
        TlItem {
            field,
            data: [0; MAX_DATA_BYTES],
            beats: 0,
            byte_enables: None,
            poisoned: 0,
        }
    }

    /// The valid data bytes (`beats × 64`, at most 256).
    pub fn payload(&self) -> &[u8] {
        let n = usize::from(self.beats.min(MAX_BEATS as u8)) * BEAT_BYTES;
        self.data.get(..n).unwrap_or(&[])
    }

    /// Data beat `i`, if present.
    pub fn beat(&self, i: usize) -> Option<&[u8]> {
        if i >= usize::from(self.beats) {
            return None;
        }
        self.data.get(i * BEAT_BYTES..(i + 1) * BEAT_BYTES)
    }

    /// Beat `i` is poisoned.
    pub const fn is_poisoned(&self, i: usize) -> bool {
        i < 8 && self.poisoned & (1u8 << i) != 0
    }

    /// Clear data, byte enables and poison, keeping the buffer.
    pub fn clear_data(&mut self) {
        self.beats = 0;
        self.byte_enables = None;
        self.poisoned = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_enables_bits() {
        let be = ByteEnables::range(3, 10);
        assert!(!be.get(2));
        assert!(be.get(3) && be.get(9));
        assert!(!be.get(10));
        assert_eq!(be.0[0], 0b1111_1000);
        assert_eq!(be.0[1], 0b0000_0011);
        assert!(!be.get(300));
        assert!(ByteEnables::ALL.all_set(256));
        assert!(!be.all_set(4));
        let mut b = ByteEnables::NONE;
        b.set(255, true);
        b.set(400, true);
        assert!(b.get(255));
        b.set(255, false);
        assert_eq!(b, ByteEnables::NONE);
    }

    #[test]
    fn item_beats() {
        let mut it = TlItem::default();
        assert!(it.payload().is_empty());
        assert_eq!(it.beat(0), None);
        it.beats = 2;
        it.poisoned = 0b10;
        assert_eq!(it.payload().len(), 128);
        assert_eq!(it.beat(1).map(<[u8]>::len), Some(64));
        assert!(it.is_poisoned(1) && !it.is_poisoned(0) && !it.is_poisoned(9));
        it.beats = 200;
        assert_eq!(it.payload().len(), 256);
        it.clear_data();
        assert_eq!(it.beats, 0);
    }
}
