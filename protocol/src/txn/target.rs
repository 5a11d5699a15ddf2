//! The memory a completer serves (`spec-notes/transactions.md#memory-target`).
//!
//! # For driver and simulator authors
//!
//! Implement [`MemoryTarget`] over the accelerator's memory. The completer calls it only for
//! well-formed requests from the requester's own partition, with addresses already checked
//! against the 57-bit space and the 256 B rule; it never calls it for a refused request.
//! Each call is one request (or one 64 B beat of a read), so a target that needs atomicity
//! across a request gets it for free in a single-threaded event loop.

use super::atomic::Atomic;
use super::enables::ByteEnables;
use super::Status;
use crate::wire::AccelId;

/// Why a memory target refused or failed an access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TargetError {
    /// No memory at the address. Nothing changed.
    NotMapped,
    /// The target does not support this access (an atomic's op or size). Nothing changed.
    Unsupported,
    /// The data read is poisoned (a read returns the beat as poisoned data; an atomic fails).
    Poisoned,
    /// Any other failure.
    Failed,
}

impl TargetError {
    /// The response status that reports this error.
    pub const fn status(self) -> Status {
        match self {
            TargetError::NotMapped => Status::ADDRESS_NOT_MAPPED,
            TargetError::Unsupported => Status::UNSUPPORTED,
            TargetError::Poisoned => Status::POISONED,
            TargetError::Failed => Status::TARGET_ERROR,
        }
    }
}

/// Memory that remote requesters read, write and update atomically.
pub trait MemoryTarget {
    /// Fill `buf` from `addr` (at most one 64 B beat per call).
    ///
    /// # Errors
    /// [`TargetError::Poisoned`] marks the beat as poisoned data; any other error fails the
    /// whole read with its status.
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError>;

    /// Store the enabled bytes of `data` at `addr` (`enables` bit `i` ↔ `data[i]`).
    ///
    /// # Errors
    /// The write's status; the completer reports it as is.
    fn write(&mut self, addr: u64, data: &[u8], enables: &ByteEnables) -> Result<(), TargetError>;

    /// Apply `atomic` to the element at `addr`; return the old value.
    ///
    /// The default reads, applies [`Atomic::apply`] and writes back: atomic as long as
    /// nothing else touches the memory between the calls. Return
    /// [`TargetError::Unsupported`], changing nothing, for a combination you do not support.
    ///
    /// # Errors
    /// The atomic's status.
    fn atomic(&mut self, addr: u64, atomic: &Atomic) -> Result<u64, TargetError> {
        let n = atomic.size.bytes();
        let mut buf = [0u8; 8];
        self.read(addr, buf.get_mut(..n).ok_or(TargetError::Unsupported)?)?;
        let old = u64::from_le_bytes(buf);
        let new = atomic.apply(old).to_le_bytes();
        self.write(
            addr,
            new.get(..n).ok_or(TargetError::Unsupported)?,
            &ByteEnables::ALL,
        )?;
        Ok(old)
    }

    /// A write message from `src` to `addr`. The default writes it like a full write.
    ///
    /// # Errors
    /// The message's status.
    fn message(&mut self, src: AccelId, addr: u64, data: &[u8]) -> Result<(), TargetError> {
        let _ = src;
        self.write(addr, data, &ByteEnables::ALL)
    }
}

/// A window of `N` bytes of memory at `base`, with up to 8 poisoned 64 B lines: enough for
/// tests, benchmarks, fuzzing and small firmware targets.
#[derive(Debug, Clone)]
pub struct WindowMemory<const N: usize> {
    base: u64,
    bytes: [u8; N],
    poisoned: heapless::Vec<u64, 8>,
}

impl<const N: usize> WindowMemory<N> {
    /// Zeroed memory at `base`.
    pub const fn new(base: u64) -> Self {
        WindowMemory {
            base,
            bytes: [0; N],
            poisoned: heapless::Vec::new(),
        }
    }

    /// The bytes.
    pub const fn bytes(&self) -> &[u8; N] {
        &self.bytes
    }

    /// The bytes, mutably.
    pub fn bytes_mut(&mut self) -> &mut [u8; N] {
        &mut self.bytes
    }

    /// Mark the 64 B line holding `addr` as poisoned (false when 8 lines already are).
    pub fn poison(&mut self, addr: u64) -> bool {
        self.poisoned.push(addr & !63).is_ok()
    }

    fn range(&self, addr: u64, len: usize) -> Result<core::ops::Range<usize>, TargetError> {
        let off = addr.checked_sub(self.base).ok_or(TargetError::NotMapped)?;
        let off = usize::try_from(off).map_err(|_| TargetError::NotMapped)?;
        let end = off.checked_add(len).ok_or(TargetError::NotMapped)?;
        if end > N {
            return Err(TargetError::NotMapped);
        }
        Ok(off..end)
    }

    fn is_poisoned(&self, addr: u64, len: usize) -> bool {
        let end = addr.saturating_add(len as u64);
        self.poisoned.iter().any(|&l| l < end && addr < l + 64)
    }
}

impl<const N: usize> MemoryTarget for WindowMemory<N> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        let r = self.range(addr, buf.len())?;
        if self.is_poisoned(addr, buf.len()) {
            return Err(TargetError::Poisoned);
        }
        buf.copy_from_slice(self.bytes.get(r).ok_or(TargetError::NotMapped)?);
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8], enables: &ByteEnables) -> Result<(), TargetError> {
        let r = self.range(addr, data.len())?;
        let dst = self.bytes.get_mut(r).ok_or(TargetError::NotMapped)?;
        if enables == &ByteEnables::ALL {
            dst.copy_from_slice(data);
        } else {
            for (i, (d, s)) in dst.iter_mut().zip(data).enumerate() {
                if enables.get(i) {
                    *d = *s;
                }
            }
        }
        if self.poisoned.is_empty() {
            return Ok(());
        }
        // A full overwrite of a poisoned line cures it.
        let (start, len) = (addr, data.len() as u64);
        self.poisoned.retain(|&l| {
            let cured = l >= start
                && l.saturating_add(64) <= start.saturating_add(len)
                && (0..64).all(|i| enables.get((l - start + i) as usize));
            !cured
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::{AtomicOp, AtomicSize};

    #[test]
    fn window_read_write_poison() {
        let mut m: WindowMemory<256> = WindowMemory::new(0x1000);
        assert_eq!(m.read(0xfff, &mut [0; 2]), Err(TargetError::NotMapped));
        assert_eq!(m.read(0x10ff, &mut [0; 2]), Err(TargetError::NotMapped));
        let be = ByteEnables::range(1, 3);
        m.write(0x1000, &[1, 2, 3, 4], &be).unwrap();
        let mut b = [0; 4];
        m.read(0x1000, &mut b).unwrap();
        assert_eq!(b, [0, 2, 3, 0]);
        assert!(m.poison(0x1040));
        assert_eq!(m.read(0x1044, &mut b), Err(TargetError::Poisoned));
        m.write(0x1040, &[9; 64], &ByteEnables::ALL).unwrap();
        m.read(0x1044, &mut b).unwrap();
        assert_eq!(b, [9; 4]);
        assert_eq!(m.bytes()[0x41], 9);
        m.bytes_mut()[0] = 5;
        assert_eq!(TargetError::Failed.status(), Status::TARGET_ERROR);
    }

    #[test]
    fn default_atomic_and_message() {
        let mut m: WindowMemory<64> = WindowMemory::new(0);
        let a = Atomic {
            op: AtomicOp::FetchAdd,
            size: AtomicSize::Four,
            operand: 5,
            compare: 0,
        };
        assert_eq!(m.atomic(4, &a), Ok(0));
        assert_eq!(m.atomic(4, &a), Ok(5));
        assert_eq!(m.atomic(64, &a), Err(TargetError::NotMapped));
        m.message(AccelId::default(), 32, &[7; 32]).unwrap();
        assert_eq!(m.bytes()[63], 7);
        m.poison(0);
        assert_eq!(m.atomic(4, &a), Err(TargetError::Poisoned));
    }
}
