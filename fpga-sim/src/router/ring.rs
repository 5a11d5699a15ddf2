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

    /// The first `n` values (`n <= len`) as up to two contiguous slices, in order.
    #[inline]
    pub fn front_slices_mut(&mut self, n: usize) -> (&mut [T], &mut [T]) {
        let n = n.min(self.len);
        let cap = self.buf.len();
        let first = n.min(cap - self.head);
        let (lo, hi) = self.buf.split_at_mut(self.head);
        let (a, _) = hi.split_at_mut(first);
        let (b, _) = lo.split_at_mut(n - first);
        (a, b)
    }

    /// The first `n` values (`n <= len`) as one contiguous slice, in order: when they wrap
    /// around the end of the storage, the storage is rotated first so that the ring starts
    /// at its beginning (it wraps once per capacity's worth of values passing through).
    #[inline]
    pub fn front_mut(&mut self, n: usize) -> &mut [T] {
        let n = n.min(self.len);
        if self.head + n > self.buf.len() {
            self.buf.rotate_left(self.head);
            self.head = 0;
        }
        let (_, hi) = self.buf.split_at_mut(self.head);
        let (a, _) = hi.split_at_mut(n);
        a
    }

    /// Drop the first `n` values (at most `len`).
    #[inline]
    pub fn advance(&mut self, n: usize) {
        let n = n.min(self.len);
        self.head = (self.head + n) & self.mask;
        self.len -= n;
    }

    /// Move the first `n` values (at most `len`) into `out`, in order, replacing its contents.
    #[inline]
    pub fn drain_front_into(&mut self, n: usize, out: &mut Vec<T>) {
        out.clear();
        let (a, b) = self.front_slices_mut(n);
        let n = a.len() + b.len();
        out.extend_from_slice(a);
        out.extend_from_slice(b);
        self.advance(n);
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

/// One FIFO per port, with every queue's front entry in one dense table: a port's ring is
/// touched only while more than one entry waits there, and finding the non-empty queues is
/// a scan of bitmasks.
pub(crate) struct PortQueues<T: Copy + Default> {
    front: Vec<T>,
    /// Per port: a front entry waits.
    mask: Vec<u64>,
    /// Per port: entries wait behind the front, in `rest`.
    more: Vec<u64>,
    rest: Vec<Ring<T>>,
    /// Non-empty queues.
    pending: usize,
}

impl<T: Copy + Default> PortQueues<T> {
    /// `ports` empty queues, each with room for `cap` entries before it grows.
    pub fn new(ports: usize, cap: usize) -> Self {
        PortQueues {
            front: vec![T::default(); ports],
            mask: vec![0; ports.div_ceil(64)],
            more: vec![0; ports.div_ceil(64)],
            rest: (0..ports).map(|_| Ring::with_capacity(cap)).collect(),
            pending: 0,
        }
    }

    /// Whether every queue is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pending == 0
    }

    /// Append `v` to port `p`'s queue.
    #[inline(always)]
    pub fn push(&mut self, p: usize, v: T) {
        let (w, bit) = (p / 64, 1u64 << (p % 64));
        if self.mask[w] & bit == 0 {
            self.mask[w] |= bit;
            self.front[p] = v;
            self.pending += 1;
        } else {
            self.rest[p].push_back(v);
            self.more[w] |= bit;
        }
    }

    /// Append `vals[p]` to the queue of every port `p` whose bit is set in `mask` (one entry
    /// per port, in port order) and empty `mask`. When every queue is empty the tables are
    /// exchanged instead of copied, which leaves stale values in `vals`. `vals` has an entry
    /// per port and `mask` a word per 64 ports.
    #[inline]
    pub fn push_each(&mut self, vals: &mut Vec<T>, mask: &mut Vec<u64>) {
        if self.pending == 0 && vals.len() == self.front.len() && mask.len() == self.mask.len() {
            // No queue holds anything: every `mask` and `more` word is zero.
            std::mem::swap(&mut self.front, vals);
            std::mem::swap(&mut self.mask, mask);
            self.pending = self.mask.iter().map(|w| w.count_ones() as usize).sum();
            return;
        }
        for (w, word) in mask.iter_mut().enumerate() {
            let mut bits = std::mem::take(word);
            while bits != 0 {
                let p = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if let Some(&v) = vals.get(p) {
                    self.push(p, v);
                }
            }
        }
    }

    /// Entries waiting at port `p`.
    #[inline]
    pub fn len(&self, p: usize) -> usize {
        let (w, bit) = (p / 64, 1u64 << (p % 64));
        if self.mask[w] & bit == 0 {
            0
        } else if self.more[w] & bit == 0 {
            1
        } else {
            1 + self.rest[p].len()
        }
    }

    /// Entries waiting over all ports.
    pub fn total(&self) -> usize {
        (0..self.front.len()).map(|p| self.len(p)).sum()
    }

    /// Remove the front of every non-empty queue, handing each to `f` in port order.
    #[inline]
    pub fn pop_fronts(&mut self, mut f: impl FnMut(usize, T)) {
        if self.pending == 0 {
            return;
        }
        let words = self.mask.iter_mut().zip(self.more.iter_mut());
        for (w, (mask, more)) in words.enumerate() {
            let m = *mask;
            if m == 0 {
                continue;
            }
            let front = self.front.get(w * 64..).unwrap_or_default();
            let mut bits = m;
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if let Some(&v) = front.get(b) {
                    f(w * 64 + b, v);
                }
            }
            // Every front left; the queues with more entries move their next one up.
            let refill = m & *more;
            *mask = refill;
            self.pending -= (m & !refill).count_ones() as usize;
            let mut bits = refill;
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let p = w * 64 + b;
                let q = &mut self.rest[p];
                if let Some(v) = q.pop_front() {
                    self.front[p] = v;
                }
                if q.is_empty() {
                    *more &= !(1u64 << b);
                }
            }
        }
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
        let mut r: Ring<u32> = Ring::with_capacity(4);
        for i in 0..3 {
            r.push_back(i);
        }
        r.pop_front();
        r.pop_front();
        for i in 3..6 {
            r.push_back(i);
        }
        let mut c: Ring<u32> = Ring::with_capacity(4);
        for i in 0..4 {
            c.push_back(i);
        }
        c.pop_front();
        c.pop_front();
        c.push_back(4);
        c.push_back(5);
        assert_eq!(c.front_mut(4), &[2, 3, 4, 5][..]);
        c.front_mut(3)[2] = 7;
        c.push_back(6);
        let got: Vec<u32> = std::iter::from_fn(|| c.pop_front()).collect();
        assert_eq!(got, vec![2, 3, 7, 5, 6]);
        let (a, b) = r.front_slices_mut(3);
        assert_eq!((&*a, &*b), (&[2, 3][..], &[4][..]));
        let (a, b) = r.front_slices_mut(4);
        assert_eq!((a.len(), b.len()), (2, 2));
        b[1] = 9;
        assert_eq!(*r.get(3), 9);
        let mut out = vec![7];
        r.drain_front_into(3, &mut out);
        assert_eq!(out, vec![2, 3, 4]);
        assert_eq!((r.len(), r.pop_front()), (1, Some(9)));
    }

    #[test]
    fn port_queues_keep_fifo_order_per_port() {
        let mut q: PortQueues<u32> = PortQueues::new(70, 1);
        assert!(q.is_empty());
        for (p, v) in [(3, 1), (69, 2), (3, 3), (3, 4), (0, 5)] {
            q.push(p, v);
        }
        assert_eq!(
            (q.len(3), q.len(69), q.len(0), q.len(1), q.total()),
            (3, 1, 1, 0, 5)
        );
        let mut got = Vec::new();
        q.pop_fronts(|p, v| got.push((p, v)));
        assert_eq!(got, vec![(0, 5), (3, 1), (69, 2)]);
        q.push(69, 6);
        got.clear();
        q.pop_fronts(|p, v| got.push((p, v)));
        q.pop_fronts(|p, v| got.push((p, v)));
        assert_eq!(got, vec![(3, 3), (69, 6), (3, 4)]);
        assert!(q.is_empty() && q.total() == 0);
        q.push(3, 3);
        q.push(3, 4);
        // One entry per marked port: appended behind what waits, or swapped in when empty.
        let mut vals: Vec<u32> = (100..170).collect();
        let mut mask = vec![1u64 << 3 | 1, 1 << 5];
        q.push_each(&mut vals, &mut mask);
        assert_eq!(mask, vec![0, 0]);
        assert_eq!((q.len(0), q.len(3), q.len(69)), (1, 3, 1));
        got.clear();
        while !q.is_empty() {
            q.pop_fronts(|p, v| got.push((p, v)));
        }
        assert_eq!(got, vec![(0, 100), (3, 3), (69, 169), (3, 4), (3, 103)]);
        let mut mask = vec![1u64 << 7, 1 << 1];
        q.push_each(&mut vals, &mut mask);
        assert_eq!(
            (mask, q.len(7), q.len(65), q.total()),
            (vec![0, 0], 1, 1, 2)
        );
        got.clear();
        q.pop_fronts(|p, v| got.push((p, v)));
        assert_eq!(got, vec![(7, 107), (65, 165)]);
        assert!(q.is_empty());
    }
}
