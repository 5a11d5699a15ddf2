//! A bounded FIFO whose entries stay in place and can leave from any position.
//!
//! Entries live in fixed slots; a small index vector keeps their arrival order, so taking an
//! entry from the middle (a request that may pass a blocked one) moves two bytes per entry
//! behind it, never the entries themselves.

use heapless::Vec;

pub(crate) struct SlotQueue<T, const N: usize> {
    slots: [Option<T>; N],
    /// Slot indices, oldest first.
    order: Vec<u16, N>,
    /// Free slot indices.
    free: Vec<u16, N>,
}

impl<T, const N: usize> SlotQueue<T, N> {
    pub(crate) fn new() -> Self {
        const { assert!(N >= 1 && N <= u16::MAX as usize, "1 ≤ capacity ≤ 65535") };
        let mut free = Vec::new();
        for i in (0..N).rev() {
            // Cannot fail: `free` has room for N entries.
            let _ = free.push(i as u16);
        }
        SlotQueue {
            slots: core::array::from_fn(|_| None),
            order: Vec::new(),
            free,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub(crate) fn free_slots(&self) -> usize {
        self.free.len()
    }

    /// Append `v`; gives it back when full.
    pub(crate) fn push(&mut self, v: T) -> Result<(), T> {
        let Some(i) = self.free.pop() else {
            return Err(v);
        };
        match (self.slots.get_mut(usize::from(i)), self.order.push(i)) {
            (Some(slot), Ok(())) => {
                *slot = Some(v);
                Ok(())
            }
            _ => {
                let _ = self.free.push(i);
                Err(v)
            }
        }
    }

    fn slot_at(&self, pos: usize) -> Option<usize> {
        self.order.get(pos).map(|&i| usize::from(i))
    }

    /// The entry at FIFO position `pos` (0 = oldest).
    pub(crate) fn get(&self, pos: usize) -> Option<&T> {
        self.slots.get(self.slot_at(pos)?)?.as_ref()
    }

    /// The entry at FIFO position `pos`, mutably.
    pub(crate) fn get_mut(&mut self, pos: usize) -> Option<&mut T> {
        let i = self.slot_at(pos)?;
        self.slots.get_mut(i)?.as_mut()
    }

    /// Take the entry at FIFO position `pos` out of the queue.
    pub(crate) fn remove(&mut self, pos: usize) -> Option<T> {
        if pos >= self.order.len() {
            return None;
        }
        let i = self.order.remove(pos);
        let _ = self.free.push(i);
        self.slots.get_mut(usize::from(i))?.take()
    }

    /// Drop every entry for which `keep` is false; returns how many were dropped.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) -> usize {
        let mut pos = 0;
        let mut dropped = 0;
        while pos < self.order.len() {
            if self.get(pos).is_some_and(&mut keep) {
                pos += 1;
            } else {
                let _ = self.remove(pos);
                dropped += 1;
            }
        }
        dropped
    }

    /// Entries oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.order
            .iter()
            .filter_map(|&i| self.slots.get(usize::from(i)).and_then(Option::as_ref))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_with_middle_removal() {
        let mut q: SlotQueue<u32, 3> = SlotQueue::new();
        assert!(q.is_empty());
        q.push(1).unwrap();
        q.push(2).unwrap();
        q.push(3).unwrap();
        assert_eq!(q.push(4), Err(4));
        assert_eq!(q.free_slots(), 0);
        assert_eq!(q.remove(1), Some(2));
        assert_eq!(q.remove(5), None);
        q.push(5).unwrap();
        assert_eq!(q.iter().copied().collect::<std::vec::Vec<_>>(), [1, 3, 5]);
        *q.get_mut(0).unwrap() = 10;
        assert_eq!(q.get(0), Some(&10));
        assert_eq!(q.get(3), None);
        assert_eq!(q.retain(|&v| v != 3), 1);
        assert_eq!(q.len(), 2);
        assert_eq!(q.iter().copied().collect::<std::vec::Vec<_>>(), [10, 5]);
    }
}
