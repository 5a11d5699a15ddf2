//! An owned copy of a TL transfer, for callers that must hold one across calls — a request a
//! busy completer refused, a transfer waiting on a wire model, a test vector.

use crate::wire::tl_flit::{BYTE_ENABLE_LEN, MAX_DATA_LEN};
use crate::wire::{TlField, TlFlowControl, TlTransfer};

/// A [`TlTransfer`] with its own storage (≈ 330 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferBuf {
    /// The control field.
    pub field: TlField,
    data: [u8; MAX_DATA_LEN],
    len: usize,
    /// The byte-enable mask, if any.
    pub byte_enables: Option<[u8; BYTE_ENABLE_LEN]>,
    /// Poisoned beats.
    pub poisoned: u8,
}

impl Default for TransferBuf {
    fn default() -> Self {
        TransferBuf {
            field: TlField::FlowControl(TlFlowControl::default()),
            data: [0; MAX_DATA_LEN],
            len: 0,
            byte_enables: None,
            poisoned: 0,
        }
    }
}

impl TransferBuf {
    /// A copy of `t` (data beyond 256 bytes is cut off).
    pub fn new(t: &TlTransfer<'_>) -> Self {
        let mut b = TransferBuf::default();
        b.set(t);
        b
    }

    /// Overwrite with a copy of `t` (data beyond 256 bytes is cut off).
    pub fn set(&mut self, t: &TlTransfer<'_>) {
        self.field = t.field;
        self.len = t.data.len().min(MAX_DATA_LEN);
        if let (Some(d), Some(s)) = (self.data.get_mut(..self.len), t.data.get(..self.len)) {
            d.copy_from_slice(s);
        }
        self.byte_enables = t.byte_enables.copied();
        self.poisoned = t.poisoned;
    }

    /// The data.
    pub fn data(&self) -> &[u8] {
        self.data.get(..self.len).unwrap_or(&[])
    }

    /// Replace the data (cut at 256 bytes).
    pub fn set_data(&mut self, data: &[u8]) {
        self.len = data.len().min(MAX_DATA_LEN);
        if let (Some(d), Some(s)) = (self.data.get_mut(..self.len), data.get(..self.len)) {
            d.copy_from_slice(s);
        }
    }

    /// The data, mutably.
    pub fn data_mut(&mut self) -> &mut [u8] {
        self.data.get_mut(..self.len).unwrap_or(&mut [])
    }

    /// Borrow as a transfer.
    pub fn as_transfer(&self) -> TlTransfer<'_> {
        TlTransfer {
            field: self.field,
            data: self.data(),
            byte_enables: self.byte_enables.as_ref(),
            poisoned: self.poisoned,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let be = [1u8; BYTE_ENABLE_LEN];
        let t = TlTransfer {
            field: TlField::FlowControl(TlFlowControl::default()),
            data: &[7; 300],
            byte_enables: Some(&be),
            poisoned: 2,
        };
        let mut b = TransferBuf::new(&t);
        assert_eq!(b.data().len(), 256);
        assert_eq!(b.as_transfer().byte_enables, Some(&be));
        b.set_data(&[1, 2]);
        b.data_mut()[0] = 9;
        assert_eq!(b.as_transfer().data, &[9, 2]);
        assert_eq!(b.as_transfer().poisoned, 2);
    }
}
