//! [`BlockMap`]: the map from memory block keys to small records that the simulated memory
//! and its reference copy keep per 256 B block (`check.rs`), about a million entries in the
//! 100 µs `ualink-1024` run, looked up at random.
//!
//! Open addressing with linear probing, each key stored beside its value: a lookup usually
//! costs one cache miss (the entry's line), where a `HashMap` costs two (its control bytes,
//! then the entry). Nothing is ever removed. Iteration order is the table's, which depends
//! only on the keys inserted and their order: deterministic.

/// The key an empty slot holds; a real key equal to it is kept apart ([`BlockMap::edge`]).
const EMPTY: u64 = u64::MAX;

/// A map from `u64` keys to `Copy` values without removal (empty slots hold
/// `V::default()`).
#[derive(Clone)]
pub struct BlockMap<V: Copy + Default> {
    /// Slots, a power of two of them (or none before the first insert).
    slots: Vec<(u64, V)>,
    /// Keys stored in `slots`.
    len: usize,
    /// `64 - log2(slots.len())`: the home slot is the hash's top bits.
    shift: u32,
    /// The value of key [`EMPTY`], if inserted.
    edge: Option<V>,
}

impl<V: Copy + Default> Default for BlockMap<V> {
    fn default() -> Self {
        BlockMap {
            slots: Vec::new(),
            len: 0,
            shift: 64,
            edge: None,
        }
    }
}

/// The slot a key's probe starts at, in a table of `2^(64 - shift)` slots: Fibonacci
/// hashing, the product's top bits (which depend on every bit of the key; the low ones do
/// not, and block keys differ in their top bits too).
#[inline]
fn home(key: u64, shift: u32) -> usize {
    key.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .checked_shr(shift)
        .unwrap_or(0) as usize
}

impl<V: Copy + Default> BlockMap<V> {
    /// Entries stored.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.len + usize::from(self.edge.is_some())
    }

    /// The slot holding `key`, or the empty slot where it would go.
    #[inline]
    fn find(&self, key: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = home(key, self.shift) & mask;
        // Terminates: the table is never more than half full.
        loop {
            let k = self.slots[i].0;
            if k == key || k == EMPTY {
                return i;
            }
            i = (i + 1) & mask;
        }
    }

    /// The value of `key`.
    #[inline]
    pub fn get(&self, key: u64) -> Option<&V> {
        if key == EMPTY {
            return self.edge.as_ref();
        }
        if self.slots.is_empty() {
            return None;
        }
        let (k, v) = &self.slots[self.find(key)];
        (*k == key).then_some(v)
    }

    /// Ask for the cache line of `key`'s home slot, where a lookup starts (a hint: nothing is
    /// read).
    #[inline]
    pub fn prefetch(&self, key: u64) {
        if let Some(slot) = self
            .slots
            .get(home(key, self.shift) & self.slots.len().wrapping_sub(1))
        {
            super::window::prefetch(slot);
        }
    }

    /// Whether `key` is stored.
    pub fn contains_key(&self, key: u64) -> bool {
        self.get(key).is_some()
    }

    /// The value of `key`, inserting `make()` first if it is absent.
    #[inline]
    pub fn get_or_insert_with(&mut self, key: u64, make: impl FnOnce() -> V) -> &mut V {
        if key == EMPTY {
            return self.edge.get_or_insert_with(make);
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let i = self.find(key);
        if self.slots[i].0 != key {
            self.slots[i] = (key, make());
            self.len += 1;
        }
        &mut self.slots[i].1
    }

    /// Double the table (at least 16 slots) and re-insert every entry.
    #[cold]
    fn grow(&mut self) {
        let n = (self.slots.len() * 2).max(16);
        let old = std::mem::replace(&mut self.slots, vec![(EMPTY, V::default()); n]);
        self.shift = 64 - n.trailing_zeros();
        for (k, v) in old {
            if k != EMPTY {
                let i = self.find(k);
                self.slots[i] = (k, v);
            }
        }
    }

    /// Every entry, in table order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> + '_ {
        self.slots
            .iter()
            .filter(|(k, _)| *k != EMPTY)
            .map(|(k, v)| (*k, v))
            .chain(self.edge.as_ref().map(|v| (EMPTY, v)))
    }

    /// Every key, in table order.
    pub fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.iter().map(|(k, _)| k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use std::collections::HashMap;

    /// Random inserts and lookups, against a `HashMap`: keys spread out, keys that share a
    /// home slot (runs of probes that wrap), and the key an empty slot holds.
    #[test]
    fn behaves_as_a_hash_map() {
        for seed in 0..20u64 {
            let mut rng = Rng::new(seed, 0);
            let mut m: BlockMap<[u32; 4]> = BlockMap::default();
            let mut want: HashMap<u64, [u32; 4]> = HashMap::new();
            for step in 0..3000u32 {
                let key = match rng.below(6) {
                    0 => EMPTY,
                    // Block keys as `check::block_key` makes them.
                    1 | 2 => (rng.below(1024) << 50) | rng.below(1 << 20),
                    // Keys that differ only in bits the hash spreads least.
                    3 => rng.below(64) << 58,
                    _ => rng.below(200),
                };
                let v = m.get_or_insert_with(key, || [step, 0, 0, 0]);
                v[1] = v[1].wrapping_add(1);
                let w = want.entry(key).or_insert([step, 0, 0, 0]);
                w[1] = w[1].wrapping_add(1);
                assert_eq!(m.len(), want.len(), "seed {seed} step {step}");
                let probe = rng.below(300);
                assert_eq!(m.get(probe), want.get(&probe), "seed {seed} probe {probe}");
                assert_eq!(m.contains_key(probe), want.contains_key(&probe));
            }
            for (k, v) in &want {
                assert_eq!(m.get(*k), Some(v));
            }
            let mut got: Vec<(u64, [u32; 4])> = m.iter().map(|(k, v)| (k, *v)).collect();
            let mut all: Vec<(u64, [u32; 4])> = want.into_iter().collect();
            got.sort_unstable();
            all.sort_unstable();
            assert_eq!(got, all, "seed {seed}");
            assert_eq!(m.keys().count(), all.len());
        }
    }

    /// Keys shaped like `check::block_key` (accelerator in bits 50 and up, block below), the
    /// same few blocks at every accelerator as all-to-all writes them: probes stay short. A
    /// home slot taken from the product's middle bits (where the accelerator hardly shows)
    /// made them hundreds long.
    #[test]
    fn block_keys_spread_over_the_table() {
        let mut m: BlockMap<u32> = BlockMap::default();
        for a in 0..1024u64 {
            for b in 0..64u64 {
                m.get_or_insert_with((a << 50) | (b * 256 + a % 7), || 1);
            }
        }
        let mask = m.slots.len() - 1;
        let (mut total, mut worst) = (0usize, 0usize);
        for (i, &(k, _)) in m.slots.iter().enumerate() {
            if k != EMPTY {
                let d = i.wrapping_sub(home(k, m.shift)) & mask;
                total += d;
                worst = worst.max(d);
            }
        }
        let mean = total as f64 / m.len() as f64;
        assert!(mean < 2.0, "mean probe {mean}");
        assert!(worst < 64, "longest probe {worst}");
    }

    #[test]
    fn the_table_stays_at_most_half_full() {
        let mut m: BlockMap<u32> = BlockMap::default();
        assert_eq!(m.get(3), None);
        for k in 0..10_000u64 {
            *m.get_or_insert_with(k * 256, || 0) += 1;
            assert!(m.len * 2 <= m.slots.len());
            assert!(m.slots.len().is_power_of_two());
            assert_eq!(1usize << (64 - m.shift), m.slots.len());
        }
        assert_eq!(m.len(), 10_000);
        assert_eq!(m.get(256 * 9_999), Some(&1));
        assert_eq!(m.get(1), None);
    }
}
