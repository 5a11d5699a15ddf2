//! Where a component's often-used state lies in memory, for callers that prefetch it.
//!
//! A simulation of a large pod keeps thousands of links, packers and requesters; each event
//! works on a different one, whose state went cold since it was last used, so the simulation
//! is bound by cache misses rather than by the protocol's instructions. The `cache_lines`
//! methods of [`UaLink`](crate::link::UaLink), [`TlPacker`](crate::wire::tl_pack::TlPacker),
//! [`TlUnpacker`](crate::wire::tl_unpack::TlUnpacker), the requester and the completer call a
//! function with the address of each cache line the next call into them is likely to touch,
//! so that the caller can issue prefetches one event ahead. They change nothing, return no
//! data and are never needed for correctness; addresses are plain numbers here (the crate
//! has no `unsafe`).

use core::mem::size_of;

/// Cache line size assumed by the hints.
pub const LINE: usize = 64;

/// Every line of `v`.
#[inline(always)]
pub(crate) fn whole<T>(v: &T, f: &mut impl FnMut(usize)) {
    span(v, size_of::<T>(), f);
}

/// The lines of the first `len` bytes from `v`'s address.
#[inline(always)]
pub(crate) fn span<T>(v: &T, len: usize, f: &mut impl FnMut(usize)) {
    let a = core::ptr::from_ref(v) as usize;
    let mut l = a & !(LINE - 1);
    while l < a + len {
        f(l);
        l += LINE;
    }
}

/// The line holding `v`'s first byte.
#[inline(always)]
pub(crate) fn at<T>(v: &T, f: &mut impl FnMut(usize)) {
    f(core::ptr::from_ref(v) as usize);
}

/// The line holding `v`'s last byte (where `heapless` keeps a queue's indices, after its
/// buffer).
#[inline(always)]
pub(crate) fn tail<T>(v: &T, f: &mut impl FnMut(usize)) {
    f(core::ptr::from_ref(v) as usize + size_of::<T>().saturating_sub(1));
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::LINE;
    use crate::link::UaLink;
    use crate::wire::tl_pack::TlPacker;
    use crate::wire::tl_unpack::TlUnpacker;
    use std::vec::Vec;

    fn lines_of(run: impl FnOnce(&mut dyn FnMut(usize))) -> Vec<usize> {
        let mut v = Vec::new();
        run(&mut |a| v.push(a & !(LINE - 1)));
        v
    }

    fn inside<T>(v: &T, lines: &[usize]) -> bool {
        let a = core::ptr::from_ref(v) as usize;
        let end = a + core::mem::size_of::<T>();
        lines.iter().all(|&l| l + LINE > a && l < end)
    }

    /// Every hinted line lies in the component, the small state starts at its first byte,
    /// and the deep hint is the replay slot: 640 contiguous bytes beyond the small state.
    #[test]
    fn hints_point_into_the_component() {
        let link: UaLink<32, 16> = UaLink::new(Default::default());
        let small = lines_of(|f| link.cache_lines(&mut |a| f(a)));
        assert!(inside(&link, &small));
        assert!(small.contains(&((core::ptr::from_ref(&link) as usize) & !(LINE - 1))));
        assert!(
            small.len() < 40,
            "small state is a few lines, not {}",
            small.len()
        );
        let deep = lines_of(|f| link.cache_lines_deep(&mut |a| f(a)));
        assert!(inside(&link, &deep));
        assert!(
            (10..=11).contains(&deep.len()),
            "one 640 B slot: {}",
            deep.len()
        );
        assert!(deep.windows(2).all(|w| w[1] == w[0] + LINE));
        assert!(deep[0] > *small.iter().max().unwrap_or(&0) - 2 * LINE);

        let p: TlPacker<64> = TlPacker::new();
        let pl = lines_of(|f| p.cache_lines(&mut |a| f(a)));
        assert!(!pl.is_empty() && inside(&p, &pl));
        let u = TlUnpacker::new();
        let ul = lines_of(|f| u.cache_lines(&mut |a| f(a)));
        assert!(!ul.is_empty() && inside(&u, &ul));
    }
}
