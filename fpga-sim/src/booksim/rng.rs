//! BookSim2's random numbers: Knuth's lagged-Fibonacci generators.
//!
//! BookSim draws every random number from the two generators of Knuth, *The Art of Computer
//! Programming*, vol. 2, 3rd ed., §3.6 (the 2002 "9th printing" versions of `ran_array` and
//! `ranf_array`, with the `QUALITY = 1009` stream of exercise 3.6-15 that uses the first 100 of
//! every 1009 numbers). Integers come from the 30-bit generator (`RandomInt(max)` is
//! `ran_next() % (max + 1)`), fractions from the floating-point one (`RandomFloat()`), and both
//! are seeded with the configuration's `seed`. Using the same generators, seeded the same way
//! and called in the same order, is what lets this mode reproduce BookSim's traffic exactly
//! (`spec-notes/validation.md#booksim`).
//!
//! Written from Knuth's description of the algorithm (the generators are public domain); the
//! checks at the bottom are the ones Knuth publishes with them.

const KK: usize = 100;
const LL: usize = 37;
const MM: i64 = 1 << 30;
const QUALITY: usize = 1009;
const TT: u32 = 70;
/// Numbers handed out per refill of the quality buffer.
const USED: usize = 100;

fn mod_diff(x: i64, y: i64) -> i64 {
    (x - y) & (MM - 1)
}

fn mod_sum(x: f64, y: f64) -> f64 {
    // (x + y) mod 1 for x, y in [0, 1): subtracting 0.0 or 1.0 is exact either way.
    let s = x + y;
    s - if s >= 1.0 { 1.0 } else { 0.0 }
}

/// Knuth's `ran_array` recurrence, `a[j] = op(a[j - KK], a[j - LL])`, run in place on a
/// window holding the last `KK` values (oldest first): `n` more values of the sequence are
/// computed and the window moves past them. The window is all the recurrence needs, so a
/// refill touches 100 values of memory instead of 1,109.
#[inline(always)]
fn advance<T: Copy>(x: &mut [T; KK], n: usize, op: impl Fn(T, T) -> T + Copy) {
    for _ in 0..n / KK {
        pass(x, KK, op);
    }
    let r = n % KK;
    if r > 0 {
        pass(x, r, op);
        x.rotate_left(r);
    }
}

/// Replace `x[p]` by the next value of the sequence for `p` in `0..m`: value `p` needs the
/// one `KK` before it (the old `x[p]`) and the one `LL` before it, which is the old
/// `x[p + KK - LL]` for `p < LL` and the new `x[p - LL]` after. Each of the three stretches
/// reads only slots outside the ones it writes, so each is a plain vector loop.
#[inline(always)]
fn pass<T: Copy>(x: &mut [T; KK], m: usize, op: impl Fn(T, T) -> T) {
    let (lo, hi) = x.split_at_mut(KK - LL);
    for (d, &s) in lo.iter_mut().zip(hi.iter()).take(m.min(LL)) {
        *d = op(*d, s);
    }
    if m > LL {
        let (lo, hi) = x.split_at_mut(LL);
        for (d, &s) in hi.iter_mut().zip(lo.iter()).take((m - LL).min(LL)) {
            *d = op(*d, s);
        }
    }
    if m > 2 * LL {
        let (lo, hi) = x.split_at_mut(2 * LL);
        for (d, &s) in hi.iter_mut().zip(lo[LL..].iter()).take(m - 2 * LL) {
            *d = op(*d, s);
        }
    }
}

/// [`advance`] for both generators, with 256-bit vectors where the CPU has them (AVX2,
/// detected at run time): the same additions and subtractions, four 64-bit or eight 32-bit
/// lanes at a time instead of two or four, so the numbers are the same on every machine.
mod wide {
    use super::{advance, KK};

    /// Knuth's integer recurrence (`u32` lanes, subtraction).
    pub(super) fn advance_u32(x: &mut [u32; KK], n: usize) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above), the only requirement of
            // calling a function compiled with `target_feature(enable = "avx2")`.
            unsafe { advance_u32_avx2(x, n) };
            return;
        }
        advance(x, n, u32::wrapping_sub);
    }

    /// Knuth's fraction recurrence on multiples of 2^-52 (`u64` lanes, addition).
    pub(super) fn advance_u64(x: &mut [u64; KK], n: usize) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: as in `advance_u32`.
            unsafe { advance_u64_avx2(x, n) };
            return;
        }
        advance(x, n, u64::wrapping_add);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn advance_u32_avx2(x: &mut [u32; KK], n: usize) {
        advance(x, n, u32::wrapping_sub);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn advance_u64_avx2(x: &mut [u64; KK], n: usize) {
        advance(x, n, u64::wrapping_add);
    }
}

/// The 30-bit integers are kept modulo 2^32 and reduced on output: subtraction modulo 2^32
/// reduces to subtraction modulo 2^30, so the fill loops need no mask.
const MASK30: u32 = MM as u32 - 1;

/// Knuth's 30-bit integer generator (`ran_start`, `ran_array`, `ran_arr_next`).
#[derive(Clone)]
pub struct KnuthInt {
    /// The window of the last `KK` values (not yet reduced modulo 2^30).
    x: [u32; KK],
    /// The numbers being handed out: the first `USED` of the current cycle.
    out: [u32; USED],
    next: usize,
}

impl KnuthInt {
    /// A generator started with `seed` (Knuth's `ran_start`).
    pub fn new(seed: i64) -> Self {
        let mut g = KnuthInt {
            x: [0; KK],
            out: [0; USED],
            next: USED,
        };
        g.start(seed);
        g
    }

    /// The generator BookSim's `randperm` leaves behind when it is the first to draw:
    /// `RandomPermutationTrafficPattern::randomize` saves Knuth's window (still the zeros
    /// of a generator never started), reseeds with `seed`, draws `draws` numbers and
    /// restores the window, but not the buffer of numbers being handed out or the position
    /// in it. The next draws read the rest of that buffer; after it, the all-zero window
    /// yields zeros.
    pub fn after_permutation(seed: i64, draws: usize) -> Self {
        let mut g = KnuthInt::new(seed);
        for _ in 0..draws {
            g.next_raw();
        }
        g.x = [0; KK];
        g
    }

    /// Knuth's `ran_array(aa, n)`: the `n` numbers it yields start with the current
    /// window, and the window moves past them.
    fn array(x: &mut [u32; KK], n: usize) {
        wide::advance_u32(x, n);
    }

    fn start(&mut self, seed: i64) {
        let mut x = [0i64; KK + KK - 1];
        let mut ss = (seed + 2) & (MM - 2);
        for slot in x.iter_mut().take(KK) {
            *slot = ss;
            ss <<= 1;
            if ss >= MM {
                ss -= MM - 2;
            }
        }
        x[1] += 1;
        let mut ss = seed & (MM - 1);
        let mut t = TT - 1;
        while t > 0 {
            for j in (1..KK).rev() {
                x[j + j] = x[j];
                x[j + j - 1] = 0;
            }
            for j in (KK..=KK + KK - 2).rev() {
                x[j - (KK - LL)] = mod_diff(x[j - (KK - LL)], x[j]);
                x[j - KK] = mod_diff(x[j - KK], x[j]);
            }
            if ss & 1 == 1 {
                for j in (1..=KK).rev() {
                    x[j] = x[j - 1];
                }
                x[0] = x[KK];
                x[LL] = mod_diff(x[LL], x[KK]);
            }
            if ss != 0 {
                ss >>= 1;
            } else {
                t -= 1;
            }
        }
        for (j, &v) in x.iter().enumerate().take(KK) {
            // Positions rotate by LL; every value is below 2^30.
            let to = if j < LL { j + KK - LL } else { j - LL };
            self.x[to] = v as u32;
        }
        for _ in 0..10 {
            Self::array(&mut self.x, KK + KK - 1);
        }
        self.next = USED;
    }

    /// The next number in `[0, 2^30)` (Knuth's `ran_arr_next`).
    #[inline]
    pub fn next_raw(&mut self) -> u32 {
        let i = self.next;
        if i < USED {
            self.next = i + 1;
            return self.out[i] & MASK30;
        }
        self.refill()
    }

    /// Knuth's `ran_arr_cycle`: the next `QUALITY` numbers, of which the first `USED` are
    /// handed out; returns the first.
    #[cold]
    #[inline(never)]
    fn refill(&mut self) -> u32 {
        self.out.copy_from_slice(&self.x);
        Self::array(&mut self.x, QUALITY);
        self.next = 1;
        self.out[0] & MASK30
    }

    /// `RandomInt(m.divisor() - 1)` with the remainder taken by multiplication.
    #[inline]
    pub fn int_below(&mut self, m: FastMod) -> u32 {
        m.remainder(self.next_raw())
    }

    /// BookSim's `RandomInt(max)`: uniform in `[0, max]`.
    #[inline]
    pub fn int(&mut self, max: u32) -> u32 {
        // The raw value is below 2^30, so u32 arithmetic is exact (max + 1 cannot wrap to 0
        // for the maxima BookSim uses; guard anyway).
        match max.checked_add(1) {
            Some(m) => self.next_raw() % m,
            None => self.next_raw(),
        }
    }
}

/// `x % d` for every 32-bit `x`, by two multiplications instead of a division (Lemire,
/// Kaser and Kurz, "Faster remainder by direct computation", 2019: exact for all 32-bit
/// operands).
#[derive(Clone, Copy, Debug)]
pub struct FastMod {
    m: u64,
    d: u32,
}

impl FastMod {
    /// Remainders modulo `d` (at least 1).
    pub fn new(d: u32) -> Self {
        let d = d.max(1);
        FastMod {
            m: (u64::MAX / u64::from(d)).wrapping_add(1),
            d,
        }
    }

    /// The divisor.
    pub fn divisor(self) -> u32 {
        self.d
    }

    /// `x % d`.
    #[inline]
    pub fn remainder(self, x: u32) -> u32 {
        let low = self.m.wrapping_mul(u64::from(x));
        ((u128::from(low) * u128::from(self.d)) >> 64) as u32
    }
}

/// 2^-52: every value of the floating-point generator is an integer multiple of it.
const ULP: f64 = 1.0 / (1u64 << 52) as f64;
/// The fraction mask: values are integers below 2^52.
const FRAC: u64 = (1u64 << 52) - 1;

/// Knuth's floating-point generator (`ranf_start`, `ranf_array`, `ranf_arr_next`).
///
/// Knuth's generator only ever holds integer multiples of 2^-52 (its seed is one, and sums
/// of them stay exact in a double), so `(x + y) mod 1` on the doubles is, bit for bit,
/// integer addition modulo 2^52 on the multiples. The integers are kept modulo 2^64 and
/// reduced on output (addition modulo 2^64 reduces to addition modulo 2^52), so the fill
/// loops are plain vector additions.
#[derive(Clone)]
pub struct KnuthFloat {
    /// The window of the last `KK` values (not yet reduced modulo 2^52).
    u: [u64; KK],
    /// The numbers being handed out: the first `USED` of the current cycle, reduced.
    out: [u64; USED],
    next: usize,
}

impl KnuthFloat {
    /// A generator started with `seed` (Knuth's `ranf_start`).
    pub fn new(seed: i64) -> Self {
        let mut g = KnuthFloat {
            u: [0; KK],
            out: [0; USED],
            next: USED,
        };
        g.start(seed);
        g
    }

    /// Knuth's `ranf_array(aa, n)` on the multiples of 2^-52, as [`KnuthInt`]'s.
    fn array(u: &mut [u64; KK], n: usize) {
        wide::advance_u64(u, n);
    }

    fn start(&mut self, seed: i64) {
        let mut u = [0.0f64; KK + KK - 1];
        let ulp = (1.0 / (1u64 << 30) as f64) / (1u64 << 22) as f64;
        let mut ss = 2.0 * ulp * (((seed & 0x3fff_ffff) + 2) as f64);
        for slot in u.iter_mut().take(KK) {
            *slot = ss;
            ss += ss;
            if ss >= 1.0 {
                ss -= 1.0 - 2.0 * ulp;
            }
        }
        u[1] += ulp;
        let mut s = seed & 0x3fff_ffff;
        let mut t = TT - 1;
        while t > 0 {
            for j in (1..KK).rev() {
                u[j + j] = u[j];
                u[j + j - 1] = 0.0;
            }
            for j in (KK..=KK + KK - 2).rev() {
                u[j - (KK - LL)] = mod_sum(u[j - (KK - LL)], u[j]);
                u[j - KK] = mod_sum(u[j - KK], u[j]);
            }
            if s & 1 == 1 {
                for j in (1..=KK).rev() {
                    u[j] = u[j - 1];
                }
                u[0] = u[KK];
                u[LL] = mod_sum(u[LL], u[KK]);
            }
            if s != 0 {
                s >>= 1;
            } else {
                t -= 1;
            }
        }
        for (j, &v) in u.iter().enumerate().take(KK) {
            // Positions rotate by LL; each value is an exact multiple of 2^-52 below 1.
            let to = if j < LL { j + KK - LL } else { j - LL };
            self.u[to] = (v / ULP) as u64;
        }
        for _ in 0..10 {
            Self::array(&mut self.u, KK + KK - 1);
        }
        self.next = USED;
    }

    /// The next fraction as an integer multiple of 2^-52 (below 2^52).
    #[inline]
    pub fn next_raw(&mut self) -> u64 {
        let i = self.next;
        if i < USED {
            self.next = i + 1;
            return self.out[i];
        }
        self.refill()
    }

    /// The next `n` fractions (as [`KnuthFloat::next_raw`] would return them one by one) when
    /// they are all in the current quality buffer; `None`, drawing nothing, when a refill
    /// would be needed on the way.
    #[inline]
    pub fn take(&mut self, n: usize) -> Option<&[u64]> {
        let i = self.next;
        let end = i + n;
        if end > USED {
            return None;
        }
        self.next = end;
        self.out.get(i..end)
    }

    #[cold]
    #[inline(never)]
    fn refill(&mut self) -> u64 {
        for (o, &u) in self.out.iter_mut().zip(self.u.iter()) {
            *o = u & FRAC;
        }
        Self::array(&mut self.u, QUALITY);
        self.next = 1;
        self.out[0]
    }

    /// The next fraction in `[0, 1)` (BookSim's `RandomFloat()`).
    #[inline]
    pub fn fraction(&mut self) -> f64 {
        // Below 2^52, so the signed conversion is exact (and a single instruction).
        (self.next_raw() as i64) as f64 * ULP
    }

    /// A Bernoulli trial `RandomFloat() < p` (draws one number): `threshold` is
    /// [`KnuthFloat::threshold`]`(p)`.
    #[inline]
    pub fn below(&mut self, threshold: u64) -> bool {
        self.next_raw() < threshold
    }

    /// The integer threshold `t` with `v < t` exactly when `v * 2^-52 < p`, for every
    /// value `v` the generator yields: `ceil(p * 2^52)` clamped to `[0, 2^52]` (scaling by a
    /// power of two is exact, and `v` is an integer).
    pub fn threshold(p: f64) -> u64 {
        let t = p / ULP;
        if t > 0.0 {
            (t.ceil().min((FRAC + 1) as f64)) as u64
        } else {
            0
        }
    }
}

/// Both generators, seeded together as BookSim's `RandomSeed` does.
#[derive(Clone)]
pub struct BookSimRng {
    /// Integers (`RandomInt`).
    pub int: KnuthInt,
    /// Fractions (`RandomFloat`).
    pub float: KnuthFloat,
}

impl BookSimRng {
    /// Seed both generators with `seed`.
    pub fn new(seed: i64) -> Self {
        BookSimRng {
            int: KnuthInt::new(seed),
            float: KnuthFloat::new(seed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knuth_integer_check_value() {
        // Knuth's check: a[0] after 2010 calls of ran_array(a, 1009), or 1010 of
        // ran_array(a, 2009); a[0] is the window before the last call.
        let mut g = KnuthInt::new(310_952);
        let mut a0 = 0;
        for _ in 0..=2009 {
            a0 = g.x[0];
            KnuthInt::array(&mut g.x, 1009);
        }
        assert_eq!(a0 & MASK30, 995_235_265);
        let mut g = KnuthInt::new(310_952);
        for _ in 0..=1009 {
            a0 = g.x[0];
            KnuthInt::array(&mut g.x, 2009);
        }
        assert_eq!(a0 & MASK30, 995_235_265);
    }

    /// BookSim's generator after `randperm`: the rest of the buffer the permutation's draws
    /// left, then zeros (the restored window of a generator never started).
    #[test]
    fn after_a_permutation_the_buffer_runs_out_into_zeros() {
        // (BookSim's permutation draws once per terminal, so at least once.)
        for draws in [1usize, 37, 99, 100, 101, 250] {
            let mut full = KnuthInt::new(11);
            for _ in 0..draws {
                full.next_raw();
            }
            let left = (USED - draws % USED) % USED;
            let expect: Vec<u32> = (0..left).map(|_| full.next_raw()).collect();
            let mut g = KnuthInt::after_permutation(11, draws);
            let got: Vec<u32> = (0..left).map(|_| g.next_raw()).collect();
            assert_eq!(got, expect, "{draws}");
            assert!((0..3 * USED).all(|_| g.next_raw() == 0), "{draws}");
        }
    }

    #[test]
    fn knuth_float_check_value() {
        let mut g = KnuthFloat::new(310_952);
        for _ in 0..2009 {
            KnuthFloat::array(&mut g.u, 1009);
        }
        assert_eq!(
            format!("{:.20}", (g.u[0] & FRAC) as f64 * ULP),
            "0.36410514377569680455"
        );
        let mut g = KnuthFloat::new(310_952);
        for _ in 0..1009 {
            KnuthFloat::array(&mut g.u, 2009);
        }
        assert_eq!(
            format!("{:.20}", (g.u[0] & FRAC) as f64 * ULP),
            "0.36410514377569680455"
        );
    }

    /// The vector paths compute the same windows as the plain recurrence.
    #[test]
    fn wide_recurrence_matches_plain() {
        let mut x32 = [0u32; KK];
        let mut x64 = [0u64; KK];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for k in 0..KK {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            x32[k] = seed as u32;
            x64[k] = seed;
        }
        let (mut p32, mut p64) = (x32, x64);
        for n in [1009usize, 199, 100, 37, 38, 73, 74, 75, 1, 0, 5000] {
            wide::advance_u32(&mut x32, n);
            advance(&mut p32, n, u32::wrapping_sub);
            assert_eq!(x32, p32, "u32, n = {n}");
            wide::advance_u64(&mut x64, n);
            advance(&mut p64, n, u64::wrapping_add);
            assert_eq!(x64, p64, "u64, n = {n}");
        }
    }

    #[test]
    fn bernoulli_threshold_agrees_with_the_fraction() {
        for p in [
            0.0,
            1e-300,
            0.1,
            0.25,
            0.5,
            1.0 / 3.0,
            0.999_999,
            1.0,
            1.5,
            -0.5,
        ] {
            let t = KnuthFloat::threshold(p);
            let (mut a, mut b) = (KnuthFloat::new(7), KnuthFloat::new(7));
            for _ in 0..3000 {
                assert_eq!(a.fraction() < p, b.below(t), "p = {p}");
            }
            // At the boundary itself.
            for v in [t.saturating_sub(1), t, t + 1] {
                if v <= FRAC {
                    assert_eq!((v as f64) * ULP < p, v < t, "p = {p}, v = {v}");
                }
            }
        }
    }

    #[test]
    fn batches_are_the_same_numbers_as_single_draws() {
        let (mut a, mut b) = (KnuthFloat::new(3), KnuthFloat::new(3));
        let mut drawn = 0usize;
        for n in [0usize, 1, 7, 64, 31, 5, 100, 63, 2, 50, 90, 13]
            .iter()
            .cycle()
            .take(200)
        {
            match a.take(*n) {
                Some(vals) => {
                    assert_eq!(vals.len(), *n);
                    for &v in vals {
                        assert_eq!(v, b.next_raw(), "draw {drawn}");
                        drawn += 1;
                    }
                }
                None => {
                    // Nothing drawn: the batch would cross a refill.
                    for _ in 0..*n {
                        assert_eq!(a.next_raw(), b.next_raw(), "draw {drawn}");
                        drawn += 1;
                    }
                }
            }
        }
        assert!(drawn > 1000);
    }

    #[test]
    fn fast_remainder_is_exact() {
        let mut x = 0x9e37_79b9u32;
        for d in [
            1u32,
            2,
            3,
            7,
            10,
            16,
            63,
            64,
            100,
            1 << 20,
            (1 << 30) + 3,
            u32::MAX,
        ] {
            let m = FastMod::new(d);
            for probe in [0, 1, d - 1, d, d.wrapping_add(1), u32::MAX, u32::MAX - 1] {
                assert_eq!(m.remainder(probe), probe % d, "{probe} % {d}");
            }
            for _ in 0..20_000 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                assert_eq!(m.remainder(x), x % d, "{x} % {d}");
            }
        }
    }

    #[test]
    fn ranges() {
        let mut r = BookSimRng::new(1);
        for _ in 0..5000 {
            assert!(r.int.int(15) <= 15);
            let f = r.float.fraction();
            assert!((0.0..1.0).contains(&f));
        }
    }
}
