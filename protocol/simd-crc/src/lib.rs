//! # podlink-simd-crc
//!
//! The CRC-32/BZIP2 of exactly [`COVERED`] bytes (a DL flit's CRC-covered bytes,
//! `spec-notes/wire.md#crc`) by carry-less multiplication on x86-64: with AVX-512 and
//! `VPCLMULQDQ` (four 128-bit lanes a vector) where the CPU has them, else with `PCLMULQDQ`
//! on 128-bit vectors. On this project's machines a call takes about 11 ns and 39 ns
//! respectively, against about 84 ns for `crc-fast`'s general entry point on this length
//! (`spec-notes/performance.md`, session 45). [`bzip2_covered`] returns `None` where the CPU
//! has neither (checked at run time, once) or on other architectures; the caller then uses
//! its general CRC.
//!
//! This is the workspace's only `unsafe` SIMD code, kept out of the protocol crate (which
//! forbids `unsafe`); the protocol crate calls it from `DlCrc::checksum` under its `crc-fast`
//! feature and tests it against the table CRC.
//!
//! ## How
//! CRC-32/BZIP2 is MSB-first: the message is a polynomial over GF(2) whose first byte's top
//! bit is the highest power, and the CRC is `(M(x) * x^32 + I(x) * x^(8n)) mod P(x)` (init
//! `I` = all ones), complemented (xorout). Prepending zero bytes does not change `M(x)`, so
//! the 636 bytes are read as 4 zero bytes and the data: 40 big-endian 16-byte chunks. The
//! init is the same as complementing the first 4 data bytes.
//!
//! Four 128-bit accumulators take chunks 0-3; each of the following groups of four is added
//! after multiplying every accumulator by `x^512` modulo `P`: an accumulator `A = H x^64 + L`
//! (two 64-bit halves) becomes `H * (x^576 mod P) + L * (x^512 mod P)`, two carry-less
//! products below degree 96. The four are then combined (`A0 x^384 + A1 x^256 + A2 x^128 +
//! A3`, the same way), multiplied by `x^32`, brought below degree 64 by the same step, and
//! reduced modulo `P` by Barrett reduction with `mu = floor(x^64 / P)`. The AVX-512 kernel
//! holds the four accumulators in one vector and runs two such vectors (blocks of 64 bytes,
//! folded by `x^1024`), so its chain of dependent multiplications is four long, not nine.
//!
//! Run-time feature detection needs `std` on x86-64; elsewhere the crate is `no_std` (and
//! always answers `None`).
#![cfg_attr(not(target_arch = "x86_64"), no_std)]

/// Bytes the kernel covers: a DL flit's 640 bytes less its 4-byte CRC.
pub const COVERED: usize = 636;

/// The CRC-32/BZIP2 (`crc::CRC_32_BZIP2`) of `data`, or `None` where the CPU cannot run
/// either kernel (not x86-64, or no `PCLMULQDQ` / `SSSE3`).
#[inline]
pub fn bzip2_covered(data: &[u8; COVERED]) -> Option<u32> {
    #[cfg(target_arch = "x86_64")]
    {
        match x86::kernel() {
            // SAFETY: the CPU supports the features each kernel is compiled for (`kernel`
            // checked them), and each reads only within `data`.
            Kernel::Avx512 => return Some(unsafe { x86::bzip2_avx512(data) }),
            Kernel::Pclmul => return Some(unsafe { x86::bzip2_pclmul(data) }),
            Kernel::None => {}
        }
    }
    let _ = data;
    None
}

/// Which kernel [`bzip2_covered`] runs on this CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kernel {
    /// AVX-512 (`F`, `BW`) with `VPCLMULQDQ`.
    Avx512 = 1,
    /// `PCLMULQDQ` with `SSSE3` on 128-bit vectors.
    Pclmul = 2,
    /// Neither: [`bzip2_covered`] returns `None`.
    None = 3,
}

/// The kernel [`bzip2_covered`] runs here.
pub fn kernel() -> Kernel {
    #[cfg(target_arch = "x86_64")]
    {
        x86::kernel()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Kernel::None
    }
}

/// The generator polynomial with its `x^32` term.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const P: u64 = 0x1_04C1_1DB7;

/// `x^n mod P` (degree below 32).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const fn x_pow_mod(n: u32) -> u64 {
    let mut r: u64 = 1;
    let mut i = 0;
    while i < n {
        r <<= 1;
        if r & (1 << 32) != 0 {
            r ^= P;
        }
        i += 1;
    }
    r
}

/// `floor(x^64 / P)` (degree 32), Barrett reduction's constant.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const fn barrett_mu() -> u64 {
    let mut q: u64 = 0;
    let mut r: u128 = 1 << 64;
    let mut d: u32 = 64;
    while d >= 32 {
        if r & (1 << d) != 0 {
            q |= 1 << (d - 32);
            r ^= (P as u128) << (d - 32);
        }
        d -= 1;
    }
    q
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{barrett_mu, x_pow_mod, Kernel, COVERED, P};
    use std::arch::is_x86_feature_detected;
    use std::arch::x86_64::{
        __m128i, __m512i, _mm512_alignr_epi32, _mm512_broadcast_i32x4, _mm512_castsi512_si128,
        _mm512_clmulepi64_epi128, _mm512_extracti32x4_epi32, _mm512_loadu_si512, _mm512_set_epi32,
        _mm512_set_epi64, _mm512_setzero_si512, _mm512_shuffle_epi8, _mm512_ternarylogic_epi64,
        _mm512_xor_si512, _mm_and_si128, _mm_clmulepi64_si128, _mm_cvtsi128_si64,
        _mm_cvtsi64_si128, _mm_loadu_si128, _mm_set_epi32, _mm_set_epi64x, _mm_set_epi8,
        _mm_shuffle_epi8, _mm_slli_si128, _mm_srli_si128, _mm_xor_si128,
    };
    use std::sync::atomic::{AtomicU8, Ordering};

    /// The kernel chosen: 0 not yet asked, else `Kernel as u8`.
    static CHOSEN: AtomicU8 = AtomicU8::new(0);

    /// The kernel this CPU (and its OS, for the AVX-512 state) can run, asked once.
    #[inline]
    pub(super) fn kernel() -> Kernel {
        match CHOSEN.load(Ordering::Relaxed) {
            1 => Kernel::Avx512,
            2 => Kernel::Pclmul,
            3 => Kernel::None,
            _ => {
                let k = if is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("vpclmulqdq")
                    && is_x86_feature_detected!("pclmulqdq")
                    && is_x86_feature_detected!("ssse3")
                {
                    Kernel::Avx512
                } else if is_x86_feature_detected!("pclmulqdq") && is_x86_feature_detected!("ssse3")
                {
                    Kernel::Pclmul
                } else {
                    Kernel::None
                };
                CHOSEN.store(k as u8, Ordering::Relaxed);
                k
            }
        }
    }

    /// Whether the CPU can run [`bzip2_pclmul`] (for tests of that kernel where the other
    /// one is chosen).
    #[cfg(test)]
    pub(super) fn pclmul_supported() -> bool {
        is_x86_feature_detected!("pclmulqdq") && is_x86_feature_detected!("ssse3")
    }

    /// `(x^(n+64) mod P, x^n mod P)` as a vector: high half, low half.
    const fn pair(n: u32) -> (i64, i64) {
        (x_pow_mod(n + 64) as i64, x_pow_mod(n) as i64)
    }

    const BY1024: (i64, i64) = pair(1024);
    const BY512: (i64, i64) = pair(512);
    const BY384: (i64, i64) = pair(384);
    const BY256: (i64, i64) = pair(256);
    const BY128: (i64, i64) = pair(128);
    const X96: i64 = x_pow_mod(96) as i64;
    const X64: i64 = x_pow_mod(64) as i64;
    const MU: i64 = barrett_mu() as i64;

    /// The 16 bytes at `p` as a big-endian 128-bit polynomial.
    ///
    /// # Safety
    /// `p..p + 16` must be readable; the CPU must have `SSSE3`.
    #[inline(always)]
    unsafe fn chunk(p: *const u8, swap: __m128i) -> __m128i {
        // SAFETY: the caller's contract; `loadu` has no alignment requirement.
        unsafe { _mm_shuffle_epi8(_mm_loadu_si128(p.cast::<__m128i>()), swap) }
    }

    /// `a * x^n mod P`, not fully reduced: `hi(a) * k.hi + lo(a) * k.lo` with
    /// `k = pair(n)` (degree below 96).
    #[inline(always)]
    unsafe fn times(a: __m128i, k: (i64, i64)) -> __m128i {
        // SAFETY: PCLMULQDQ is enabled by the caller.
        unsafe {
            let k = _mm_set_epi64x(k.0, k.1);
            _mm_xor_si128(
                _mm_clmulepi64_si128(a, k, 0x11),
                _mm_clmulepi64_si128(a, k, 0x00),
            )
        }
    }

    /// The 128-bit kernel.
    ///
    /// # Safety
    /// The CPU must have `PCLMULQDQ` and `SSSE3`.
    #[target_feature(enable = "pclmulqdq,ssse3")]
    pub(super) unsafe fn bzip2_pclmul(data: &[u8; COVERED]) -> u32 {
        let swap = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        let p = data.as_ptr();
        // SAFETY (every `chunk` below): the offsets read `p[0..16]`, then `p[12 + 16 i..]`
        // up to `p[620..636]`, all within `data`.
        unsafe {
            // Chunk 0 is 4 zero bytes and data[0..12]; the init complements data[0..4].
            let first = _mm_srli_si128(chunk(p, swap), 4);
            let mut a0 = _mm_xor_si128(first, _mm_set_epi32(0, -1, 0, 0));
            let mut a1 = chunk(p.add(12), swap);
            let mut a2 = chunk(p.add(28), swap);
            let mut a3 = chunk(p.add(44), swap);
            let mut off = 60;
            while off + 64 <= COVERED {
                a0 = _mm_xor_si128(times(a0, BY512), chunk(p.add(off), swap));
                a1 = _mm_xor_si128(times(a1, BY512), chunk(p.add(off + 16), swap));
                a2 = _mm_xor_si128(times(a2, BY512), chunk(p.add(off + 32), swap));
                a3 = _mm_xor_si128(times(a3, BY512), chunk(p.add(off + 48), swap));
                off += 64;
            }
            let a = _mm_xor_si128(
                _mm_xor_si128(times(a0, BY384), times(a1, BY256)),
                _mm_xor_si128(times(a2, BY128), a3),
            );
            reduce(a)
        }
    }

    /// The CRC from the combined accumulator `a` (degree below 128): `!(a x^32 mod P)`.
    #[inline(always)]
    unsafe fn reduce(a: __m128i) -> u32 {
        // SAFETY: PCLMULQDQ is enabled by the caller.
        unsafe {
            // a * x^32 = H x^96 + L x^32: below degree 96.
            let low64 = _mm_set_epi64x(0, -1);
            let r = _mm_xor_si128(
                _mm_clmulepi64_si128(a, _mm_set_epi64x(0, X96), 0x01),
                _mm_slli_si128(_mm_and_si128(a, low64), 4),
            );
            // r = Rh x^64 + Rl (Rh below 32 bits): below degree 64.
            let t = _mm_xor_si128(
                _mm_clmulepi64_si128(_mm_srli_si128(r, 8), _mm_set_epi64x(0, X64), 0x00),
                _mm_and_si128(r, low64),
            );
            let t = _mm_cvtsi128_si64(t) as u64;
            // Barrett: q = floor(floor(t / x^32) * mu / x^32); t mod P = t + q P (low 32).
            let qm = _mm_clmulepi64_si128(
                _mm_cvtsi64_si128((t >> 32) as i64),
                _mm_cvtsi64_si128(MU),
                0x00,
            );
            let q = (_mm_cvtsi128_si64(qm) as u64 >> 32)
                | ((_mm_cvtsi128_si64(_mm_srli_si128(qm, 8)) as u64) << 32);
            let qp = _mm_clmulepi64_si128(
                _mm_cvtsi64_si128(q as i64),
                _mm_cvtsi64_si128(P as i64),
                0x00,
            );
            !((t ^ _mm_cvtsi128_si64(qp) as u64) as u32)
        }
    }

    /// `a * x^n mod P` in each 128-bit lane, not fully reduced (as [`times`]), the next
    /// block `d` added: `hi * k.hi + lo * k.lo + d` lane by lane.
    #[inline(always)]
    unsafe fn times_add_512(a: __m512i, k: (i64, i64), d: __m512i) -> __m512i {
        // SAFETY: AVX-512F and VPCLMULQDQ are enabled by the caller.
        unsafe {
            let k = _mm512_broadcast_i32x4(_mm_set_epi64x(k.0, k.1));
            _mm512_ternarylogic_epi64(
                _mm512_clmulepi64_epi128(a, k, 0x11),
                _mm512_clmulepi64_epi128(a, k, 0x00),
                d,
                0x96, // a ^ b ^ c
            )
        }
    }

    /// The AVX-512 kernel: the message (4 zero bytes and the data) as ten 64-byte blocks of
    /// four chunks, each chunk in its own 128-bit lane.
    ///
    /// # Safety
    /// The CPU must have AVX-512F, AVX-512BW, `VPCLMULQDQ`, `PCLMULQDQ` and `SSSE3`, and the
    /// OS must save the AVX-512 state ([`kernel`] checks both).
    #[target_feature(enable = "avx512f,avx512bw,vpclmulqdq,pclmulqdq,ssse3")]
    pub(super) unsafe fn bzip2_avx512(data: &[u8; COVERED]) -> u32 {
        let p = data.as_ptr();
        let swap = _mm512_broadcast_i32x4(_mm_set_epi8(
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
        ));
        // SAFETY (every `block`): the offsets read `p[0..64]`, then `p[60 + 64 i..]` up to
        // `p[572..636]`, all within `data`; `loadu` has no alignment requirement.
        let block = |off: usize| unsafe {
            _mm512_shuffle_epi8(_mm512_loadu_si512(p.add(off).cast::<__m512i>()), swap)
        };
        // SAFETY: the CPU features are the caller's contract; the reads are as above.
        unsafe {
            // Block 0: 4 zero bytes and data[0..60] (the loaded dwords moved up one place
            // across the whole vector), the init complementing data[0..4] (lane 0, bits
            // 64..96 once swapped).
            let raw = _mm512_alignr_epi32(
                _mm512_loadu_si512(p.cast::<__m512i>()),
                _mm512_setzero_si512(),
                15,
            );
            let init = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0);
            let mut a0 = _mm512_xor_si512(_mm512_shuffle_epi8(raw, swap), init);
            let mut a1 = block(60);
            let mut off = 124;
            while off + 128 <= COVERED + 4 {
                a0 = times_add_512(a0, BY1024, block(off));
                a1 = times_add_512(a1, BY1024, block(off + 64));
                off += 128;
            }
            let a = times_add_512(a0, BY512, a1);
            // Lanes 0..3 weigh x^384, x^256, x^128, x^0.
            let k = _mm512_set_epi64(0, 0, BY128.0, BY128.1, BY256.0, BY256.1, BY384.0, BY384.1);
            let f = _mm512_xor_si512(
                _mm512_clmulepi64_epi128(a, k, 0x11),
                _mm512_clmulepi64_epi128(a, k, 0x00),
            );
            let x = _mm_xor_si128(
                _mm_xor_si128(_mm512_castsi512_si128(f), _mm512_extracti32x4_epi32(f, 1)),
                _mm_xor_si128(
                    _mm512_extracti32x4_epi32(f, 2),
                    _mm512_extracti32x4_epi32(a, 3),
                ),
            );
            reduce(x)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TABLE: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_BZIP2);

    /// Every kernel this CPU runs, on `data`.
    fn kernels(data: &[u8; COVERED]) -> Vec<(Kernel, u32)> {
        let mut out = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if x86::kernel() == Kernel::Avx512 {
                out.push((Kernel::Avx512, unsafe { x86::bzip2_avx512(data) }));
            }
            if x86::pclmul_supported() {
                out.push((Kernel::Pclmul, unsafe { x86::bzip2_pclmul(data) }));
            }
        }
        if let Some(c) = bzip2_covered(data) {
            out.push((kernel(), c));
        }
        out
    }

    fn check(data: &[u8; COVERED]) {
        let want = TABLE.checksum(data);
        for (k, c) in kernels(data) {
            assert_eq!(c, want, "{k:?}");
        }
    }

    #[test]
    fn a_kernel_runs_on_this_machine() {
        // Every x86-64 machine this project has run on has PCLMULQDQ; fail loudly if the
        // fast path silently stopped being taken there.
        if cfg!(target_arch = "x86_64") {
            assert_ne!(kernel(), Kernel::None);
            assert!(bzip2_covered(&[0; COVERED]).is_some());
            assert!(!kernels(&[0; COVERED]).is_empty());
        }
    }

    #[test]
    fn constants() {
        assert_eq!(x_pow_mod(0), 1);
        assert_eq!(x_pow_mod(32), P & 0xffff_ffff);
        // mu * P = x^64 + (remainder below degree 32)
        let mut prod: u128 = 0;
        for i in 0..64 {
            if barrett_mu() & (1 << i) != 0 {
                prod ^= (P as u128) << i;
            }
        }
        assert_eq!(prod >> 32, 1 << 32);
    }

    #[test]
    fn edge_patterns() {
        check(&[0; COVERED]);
        check(&[0xff; COVERED]);
        let mut ramp = [0u8; COVERED];
        for (i, b) in ramp.iter_mut().enumerate() {
            *b = i as u8;
        }
        check(&ramp);
        // Every single bit, alone.
        for bit in 0..COVERED * 8 {
            let mut d = [0u8; COVERED];
            d[bit / 8] = 0x80 >> (bit % 8);
            check(&d);
        }
    }

    proptest! {
        #[test]
        fn equals_the_table_crc(bytes in proptest::collection::vec(any::<u8>(), COVERED), zero_from in 0..=COVERED) {
            let mut d = [0u8; COVERED];
            d.copy_from_slice(&bytes);
            // Most DL flits end in zero padding.
            for b in &mut d[zero_from..] {
                *b = 0;
            }
            let want = TABLE.checksum(&d);
            for (k, c) in kernels(&d) {
                prop_assert_eq!(c, want, "{:?}", k);
            }
        }
    }
}
