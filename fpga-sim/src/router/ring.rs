//! A FIFO ring of `Copy` values with power-of-two capacity.
//!
//! Like `VecDeque`, but indexing is a mask and an add, and storage is sized up front from the
//! router's parameters so steady-state operation never allocates (if a bound was too tight the
//! ring doubles once rather than fail).

#[derive(Clone)]
pub(crate) struct Ring<T: Copy + Default> {
    buf: Vec<T>,
    head: usize,
    len: usize,
    mask: usize,
}

impl<T: Copy + Default> Ring<T> {
    /// A ring holding at least `cap` values.
    pub fn with_capacity(cap: usize) -> Self {
        let n = cap.max(2).next_power_of_two();
        Ring {
            buf: vec![T::default(); n],
            head: 0,
            len: 0,
            mask: n - 1,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn push_back(&mut self, v: T) {
        if self.len > self.mask {
            self.grow();
        }
        let i = (self.head + self.len) & self.mask;
        self.buf[i] = v;
        self.len += 1;
    }

    #[inline]
    pub fn front(&self) -> Option<&T> {
        if self.len == 0 {
            None
        } else {
            Some(&self.buf[self.head])
        }
    }

    #[inline]
    pub fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let v = self.buf[self.head];
        self.head = (self.head + 1) & self.mask;
        self.len -= 1;
        Some(v)
    }

    /// The `k`-th value from the front (`k < len`).
    #[inline]
    pub fn get(&self, k: usize) -> &T {
        &self.buf[(self.head + k) & self.mask]
    }

    /// The `k`-th value from the front, mutably (`k < len`).
    #[inline]
    pub fn get_mut(&mut self, k: usize) -> &mut T {
        let m = self.mask;
        &mut self.buf[(self.head + k) & m]
    }

    #[cold]
    fn grow(&mut self) {
        let n = self.buf.len() * 2;
        let mut buf = vec![T::default(); n];
        for (k, slot) in buf.iter_mut().enumerate().take(self.len) {
            *slot = self.buf[(self.head + k) & self.mask];
        }
        self.buf = buf;
        self.head = 0;
        self.mask = n - 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_wraps_and_grows() {
        let mut r: Ring<u32> = Ring::with_capacity(2);
        for round in 0..5u32 {
            r.push_back(round);
            r.push_back(round + 100);
            assert_eq!(r.pop_front(), Some(round));
            assert_eq!(*r.get(0), round + 100);
            assert_eq!(r.pop_front(), Some(round + 100));
        }
        for i in 0..9 {
            r.push_back(i);
        }
        assert_eq!(r.len(), 9);
        *r.get_mut(8) = 42;
        let got: Vec<u32> = std::iter::from_fn(|| r.pop_front()).collect();
        assert_eq!(got, vec![0, 1, 2, 3, 4, 5, 6, 7, 42]);
        assert!(r.is_empty() && r.front().is_none());
    }
}
