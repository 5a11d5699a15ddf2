//! A global allocator that asks Linux for transparent huge pages on large allocations.
//!
//! A large pod's state (hundreds of MB: a link, TL packer and unpacker per link end, a
//! requester and completer per accelerator port) is touched at random, one event at a time.
//! With 4 KB pages nearly every such touch also misses the TLB; with 2 MB pages the whole
//! state fits in the TLB's reach. Many Linux machines enable transparent huge pages only for
//! memory that asks for them (`/sys/kernel/mm/transparent_hugepage/enabled` = `madvise`), so
//! this allocator passes every request to the system allocator and marks allocations of
//! [`HUGE_FROM`] bytes or more with `madvise(MADV_HUGEPAGE)`. It changes no result: it is a
//! hint to the kernel, and a failed `madvise` is ignored. Elsewhere than Linux it is the
//! system allocator.

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations at least this large are marked.
pub const HUGE_FROM: usize = 4 << 20;

/// The allocator (declare it with `#[global_allocator]` in a binary).
pub struct HugePages;

#[cfg(target_os = "linux")]
fn advise(p: *mut u8, size: usize) {
    const PAGE: usize = 4096;
    let start = (p as usize).next_multiple_of(PAGE);
    let end = (p as usize + size) & !(PAGE - 1);
    if end > start {
        // SAFETY: the range lies inside an allocation the system allocator just returned to
        // us; MADV_HUGEPAGE changes only how the kernel backs it, not its contents or
        // validity.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise(_p: *mut u8, _size: usize) {}

// SAFETY: every method forwards to `System` with the same arguments and returns its result;
// `advise` only adds a kernel hint on memory `System` returned.
unsafe impl GlobalAlloc for HugePages {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged (the caller upholds `alloc`'s contract).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() && layout.size() >= HUGE_FROM {
            advise(p, layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() && layout.size() >= HUGE_FROM {
            advise(p, layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() && new_size >= HUGE_FROM {
            advise(p, new_size);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small and large blocks, zeroed or not, grown across the threshold and shrunk: the
    /// allocator hands out usable memory and keeps contents through `realloc`.
    #[test]
    fn allocates_reallocates_and_keeps_contents() {
        let a = HugePages;
        for (size, zeroed) in [(64, false), (HUGE_FROM, true), (HUGE_FROM + 12_345, false)] {
            let layout = Layout::from_size_align(size, 64).unwrap();
            // SAFETY: non-zero size; the block is written within bounds, reallocated with
            // its own layout and freed with the layout it has then.
            unsafe {
                let p = if zeroed {
                    a.alloc_zeroed(layout)
                } else {
                    a.alloc(layout)
                };
                assert!(!p.is_null());
                if zeroed {
                    assert!((0..size).step_by(4093).all(|i| *p.add(i) == 0));
                }
                for i in (0..size).step_by(997) {
                    *p.add(i) = (i % 251) as u8;
                }
                let grown = 2 * HUGE_FROM + size;
                let q = a.realloc(p, layout, grown);
                assert!(!q.is_null());
                assert!((0..size).step_by(997).all(|i| *q.add(i) == (i % 251) as u8));
                *q.add(grown - 1) = 7;
                let big = Layout::from_size_align(grown, 64).unwrap();
                let r = a.realloc(q, big, 100);
                assert!(!r.is_null());
                assert_eq!(*r, 0);
                a.dealloc(r, Layout::from_size_align(100, 64).unwrap());
            }
        }
    }
}
