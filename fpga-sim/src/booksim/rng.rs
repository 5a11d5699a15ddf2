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

/// `mod_diff` on 32-bit lanes (values below 2^30): wrapping subtraction then the mask gives
/// the same result as the 64-bit form, with twice the lanes per vector.
#[inline]
fn mod_diff32(x: u32, y: u32) -> u32 {
    x.wrapping_sub(y) & (MM as u32 - 1)
}

fn mod_sum(x: f64, y: f64) -> f64 {
    // (x + y) mod 1 for x, y in [0, 1): subtracting 0.0 or 1.0 is exact either way.
    let s = x + y;
    s - if s >= 1.0 { 1.0 } else { 0.0 }
}

/// `aa[j] = op(aa[j - KK], aa[j - LL])` for `j` in `KK..n`, in blocks of `LL` independent
/// elements so the compiler can vectorise each block.
#[inline]
fn lagged_fill<T: Copy + Default>(aa: &mut [T], op: impl Fn(T, T) -> T) {
    let n = aa.len();
    let mut j = KK;
    // Full blocks through fixed-size arrays, so the loop has a constant trip count.
    while j + LL <= n {
        let mut far = [T::default(); LL];
        far.copy_from_slice(&aa[j - KK..j - KK + LL]);
        let mut near = [T::default(); LL];
        near.copy_from_slice(&aa[j - LL..j]);
        let out = &mut aa[j..j + LL];
        for i in 0..LL {
            out[i] = op(far[i], near[i]);
        }
        j += LL;
    }
    for i in j..n {
        aa[i] = op(aa[i - KK], aa[i - LL]);
    }
}

/// Knuth's 30-bit integer generator (`ran_start`, `ran_array`, `ran_arr_next`).
#[derive(Clone)]
pub struct KnuthInt {
    x: [u32; KK],
    buf: Vec<u32>,
    next: usize,
}

impl KnuthInt {
    /// A generator started with `seed` (Knuth's `ran_start`).
    pub fn new(seed: i64) -> Self {
        let mut g = KnuthInt {
            x: [0; KK],
            buf: vec![0; QUALITY],
            next: USED,
        };
        g.start(seed);
        g
    }

    fn array(&mut self, aa: &mut [u32]) {
        let n = aa.len();
        aa[..KK].copy_from_slice(&self.x);
        lagged_fill(aa, mod_diff32);
        let mut j = n;
        for i in 0..LL {
            self.x[i] = mod_diff32(aa[j - KK], aa[j - LL]);
            j += 1;
        }
        for i in LL..KK {
            self.x[i] = mod_diff32(aa[j - KK], self.x[i - LL]);
            j += 1;
        }
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
        let mut warm = [0u32; KK + KK - 1];
        for _ in 0..10 {
            self.array(&mut warm);
        }
        self.next = USED;
    }

    /// The next number in `[0, 2^30)` (Knuth's `ran_arr_next`).
    #[inline]
    pub fn next_raw(&mut self) -> u32 {
        if self.next < USED {
            let v = self.buf[self.next];
            self.next += 1;
            return v;
        }
        let mut buf = std::mem::take(&mut self.buf);
        self.array(&mut buf);
        self.buf = buf;
        self.next = 1;
        self.buf[0]
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
/// The fraction mask: values are kept as integers below 2^52.
const FRAC: u64 = (1u64 << 52) - 1;

/// `(x + y) mod 1` on fractions held as integer multiples of 2^-52. Knuth's generator only
/// ever holds such multiples (its seed is one, and sums of them stay exact in a double), so
/// integer addition modulo 2^52 gives bit-for-bit the same values as the floating-point
/// form, and vectorises better.
#[inline]
fn mod_sum_int(x: u64, y: u64) -> u64 {
    (x + y) & FRAC
}

/// Knuth's floating-point generator (`ranf_start`, `ranf_array`, `ranf_arr_next`).
#[derive(Clone)]
pub struct KnuthFloat {
    u: [u64; KK],
    buf: Vec<u64>,
    next: usize,
}

impl KnuthFloat {
    /// A generator started with `seed` (Knuth's `ranf_start`).
    pub fn new(seed: i64) -> Self {
        let mut g = KnuthFloat {
            u: [0; KK],
            buf: vec![0; QUALITY],
            next: USED,
        };
        g.start(seed);
        g
    }

    fn array(&mut self, aa: &mut [u64]) {
        let n = aa.len();
        aa[..KK].copy_from_slice(&self.u);
        lagged_fill(aa, mod_sum_int);
        let mut j = n;
        for i in 0..LL {
            self.u[i] = mod_sum_int(aa[j - KK], aa[j - LL]);
            j += 1;
        }
        for i in LL..KK {
            self.u[i] = mod_sum_int(aa[j - KK], self.u[i - LL]);
            j += 1;
        }
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
        let mut warm = [0u64; KK + KK - 1];
        for _ in 0..10 {
            self.array(&mut warm);
        }
        self.next = USED;
    }

    /// The next fraction in `[0, 1)` (BookSim's `RandomFloat()`).
    #[inline]
    pub fn fraction(&mut self) -> f64 {
        if self.next < USED {
            let v = self.buf[self.next];
            self.next += 1;
            return v as f64 * ULP;
        }
        let mut buf = std::mem::take(&mut self.buf);
        self.array(&mut buf);
        self.buf = buf;
        self.next = 1;
        self.buf[0] as f64 * ULP
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
        let mut a = vec![0u32; 2009];
        for _ in 0..=2009 {
            g.array(&mut a[..1009]);
        }
        assert_eq!(a[0], 995_235_265);
        let mut g = KnuthInt::new(310_952);
        for _ in 0..=1009 {
            g.array(&mut a);
        }
        assert_eq!(a[0], 995_235_265);
    }

    #[test]
    fn knuth_float_check_value() {
        let mut g = KnuthFloat::new(310_952);
        let mut a = vec![0u64; 2009];
        for _ in 0..2009 {
            g.array(&mut a[..1009]);
        }
        assert_eq!(
            format!("{:.20}", g.u[0] as f64 * ULP),
            "0.36410514377569680455"
        );
        let mut g = KnuthFloat::new(310_952);
        for _ in 0..1009 {
            g.array(&mut a);
        }
        assert_eq!(
            format!("{:.20}", g.u[0] as f64 * ULP),
            "0.36410514377569680455"
        );
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
