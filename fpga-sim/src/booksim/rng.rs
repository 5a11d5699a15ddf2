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

/// Elements per block of [`lagged_fill`]: below the short lag (so a block's inputs all lie
/// before it) and a multiple of the vector widths.
const BLOCK: usize = 36;

/// `aa[j] = op(aa[j - KK], aa[j - LL])` for `j` in `KK..n`, in fixed blocks of `BLOCK`
/// elements: within a block every input lies before the block, so inputs and outputs are
/// separate fixed-size arrays and the compiler vectorises each block completely.
#[inline]
fn lagged_fill<T: Copy>(aa: &mut [T], op: impl Fn(T, T) -> T) {
    let n = aa.len();
    let mut j = KK;
    while j + BLOCK <= n {
        let (done, rest) = aa.split_at_mut(j);
        let (Ok(far), Ok(near), Ok(out)) = (
            <&[T; BLOCK]>::try_from(&done[j - KK..j - KK + BLOCK]),
            <&[T; BLOCK]>::try_from(&done[j - LL..j - LL + BLOCK]),
            <&mut [T; BLOCK]>::try_from(&mut rest[..BLOCK]),
        ) else {
            break;
        };
        for i in 0..BLOCK {
            out[i] = op(far[i], near[i]);
        }
        j += BLOCK;
    }
    for i in j..n {
        aa[i] = op(aa[i - KK], aa[i - LL]);
    }
}

/// The 30-bit integers are kept modulo 2^32 and reduced on output: subtraction modulo 2^32
/// reduces to subtraction modulo 2^30, so the fill loops need no mask.
const MASK30: u32 = MM as u32 - 1;

/// Knuth's 30-bit integer generator (`ran_start`, `ran_array`, `ran_arr_next`).
#[derive(Clone)]
pub struct KnuthInt {
    x: [u32; KK],
    /// Numbers of the current cycle followed by room for the next state (`QUALITY + KK`).
    buf: Box<[u32; QUALITY + KK]>,
    next: usize,
}

impl KnuthInt {
    /// A generator started with `seed` (Knuth's `ran_start`).
    pub fn new(seed: i64) -> Self {
        let mut g = KnuthInt {
            x: [0; KK],
            buf: Box::new([0; QUALITY + KK]),
            next: USED,
        };
        g.start(seed);
        g
    }

    /// Knuth's `ran_array` for `work.len() - KK` numbers: they land in `work[..len - KK]`
    /// (not yet reduced modulo 2^30), and the state moves past them. The sequence simply
    /// continues into the last `KK` places, which are the new state.
    fn array(x: &mut [u32; KK], work: &mut [u32]) {
        let n = work.len() - KK;
        work[..KK].copy_from_slice(x);
        lagged_fill(work, u32::wrapping_sub);
        x.copy_from_slice(&work[n..]);
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
        let mut warm = [0u32; KK + KK - 1 + KK];
        for _ in 0..10 {
            Self::array(&mut self.x, &mut warm);
        }
        self.next = USED;
    }

    /// The next number in `[0, 2^30)` (Knuth's `ran_arr_next`).
    #[inline]
    pub fn next_raw(&mut self) -> u32 {
        let i = self.next;
        if i < USED {
            self.next = i + 1;
            return self.buf[i] & MASK30;
        }
        self.refill()
    }

    /// Knuth's `ran_arr_cycle`: the next `QUALITY` numbers, of which the first `USED` are
    /// handed out; returns the first.
    #[cold]
    #[inline(never)]
    fn refill(&mut self) -> u32 {
        Self::array(&mut self.x, &mut self.buf[..]);
        self.next = 1;
        self.buf[0] & MASK30
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
    u: [u64; KK],
    /// Numbers of the current cycle followed by room for the next state (`QUALITY + KK`).
    buf: Box<[u64; QUALITY + KK]>,
    next: usize,
}

impl KnuthFloat {
    /// A generator started with `seed` (Knuth's `ranf_start`).
    pub fn new(seed: i64) -> Self {
        let mut g = KnuthFloat {
            u: [0; KK],
            buf: Box::new([0; QUALITY + KK]),
            next: USED,
        };
        g.start(seed);
        g
    }

    /// Knuth's `ranf_array` on the multiples of 2^-52 (not yet reduced modulo 2^52), for
    /// `work.len() - KK` numbers, as [`KnuthInt`]'s.
    fn array(u: &mut [u64; KK], work: &mut [u64]) {
        let n = work.len() - KK;
        work[..KK].copy_from_slice(u);
        lagged_fill(work, u64::wrapping_add);
        u.copy_from_slice(&work[n..]);
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
        let mut warm = [0u64; KK + KK - 1 + KK];
        for _ in 0..10 {
            Self::array(&mut self.u, &mut warm);
        }
        self.next = USED;
    }

    /// The next fraction as an integer multiple of 2^-52 (below 2^52).
    #[inline]
    pub fn next_raw(&mut self) -> u64 {
        let i = self.next;
        if i < USED {
            self.next = i + 1;
            return self.buf[i] & FRAC;
        }
        self.refill()
    }

    #[cold]
    #[inline(never)]
    fn refill(&mut self) -> u64 {
        Self::array(&mut self.u, &mut self.buf[..]);
        self.next = 1;
        self.buf[0] & FRAC
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
        let mut g = KnuthInt::new(310_952);
        let mut a = vec![0u32; 2009 + KK];
        for _ in 0..=2009 {
            KnuthInt::array(&mut g.x, &mut a[..1009 + KK]);
        }
        assert_eq!(a[0] & MASK30, 995_235_265);
        let mut g = KnuthInt::new(310_952);
        for _ in 0..=1009 {
            KnuthInt::array(&mut g.x, &mut a);
        }
        assert_eq!(a[0] & MASK30, 995_235_265);
    }

    #[test]
    fn knuth_float_check_value() {
        let mut g = KnuthFloat::new(310_952);
        let mut a = vec![0u64; 2009 + KK];
        for _ in 0..2009 {
            KnuthFloat::array(&mut g.u, &mut a[..1009 + KK]);
        }
        assert_eq!(
            format!("{:.20}", (g.u[0] & FRAC) as f64 * ULP),
            "0.36410514377569680455"
        );
        let mut g = KnuthFloat::new(310_952);
        for _ in 0..1009 {
            KnuthFloat::array(&mut g.u, &mut a);
        }
        assert_eq!(
            format!("{:.20}", (g.u[0] & FRAC) as f64 * ULP),
            "0.36410514377569680455"
        );
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
    fn ranges() {
        let mut r = BookSimRng::new(1);
        for _ in 0..5000 {
            assert!(r.int.int(15) <= 15);
            let f = r.float.fraction();
            assert!((0.0..1.0).contains(&f));
        }
    }
}
