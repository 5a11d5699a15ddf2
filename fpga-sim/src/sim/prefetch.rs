//! Software prefetch of the state the next events will touch.
//!
//! A large pod is memory-bound: every event works on a different link end, whose state went
//! cold since it was last touched, and an event takes long enough (about a microsecond on
//! `ualink-1024`) for its misses to be fetched several times over while the one before it
//! runs. So while one event runs, the cache lines of the next few are requested, in stages:
//! three events ahead the lines found by indexing alone (a link end's structures), two ahead
//! those found by reading the first (a wire's oldest flit record, the replay slot the next DL
//! flit goes to), one ahead those found by reading the second (the bytes of that flit). The
//! protocol crate says where its structures keep their often-used state
//! (`podlink_protocol::hint`). A prefetch is only a hint: it changes no state and no result
//! (the run is the same, event for event, with or without it).

use super::{Ev, Sim};

/// How many events ahead stage 0 looks (stage `s` looks `AHEAD - s` ahead).
pub(crate) const AHEAD: usize = 3;

/// Ask for the cache line holding address `a`.
#[inline(always)]
fn line(a: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` is a hint: it never faults, reads nothing into the program and
    // writes nothing, whatever the address; SSE is part of the x86-64 baseline.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(a as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = a;
}

#[inline(always)]
fn at<T>(v: &T) {
    line(core::ptr::from_ref(v) as usize);
}

#[inline(always)]
fn whole<T>(v: &T) {
    let a = core::ptr::from_ref(v) as usize;
    let mut l = a & !63;
    while l < a + core::mem::size_of::<T>() {
        line(l);
        l += 64;
    }
}

impl Sim {
    /// Prefetch, for event `ev`, the lines of stage `stage` (0, 1 or 2).
    #[inline]
    pub(crate) fn prefetch(&self, ev: Ev, stage: usize) {
        let f = &mut |a: usize| line(a);
        match ev {
            Ev::Tx(e) | Ev::Timer(e) => {
                let i = e as usize;
                let (Some(h), Some(t), Some(w)) =
                    (self.hot.get(i), self.txs.get(i), self.wires.get(i))
                else {
                    return;
                };
                match stage {
                    0 => {
                        at(h);
                        at(w);
                        t.link.cache_lines(f);
                        t.tl.cache_lines(f);
                        if matches!(ev, Ev::Tx(_)) {
                            if let Some(p) = self.accels.port(e) {
                                p.req.cache_lines(f);
                                p.cpl.cache_lines(f);
                            }
                        }
                    }
                    1 => {
                        t.link.cache_lines_deep(f);
                        if let Some(s) = self.flits.next_free() {
                            whole(s);
                        }
                    }
                    _ => {}
                }
            }
            Ev::Arrive(e) => {
                let i = e as usize;
                let Some(&r) = self.peer.get(i) else { return };
                let r = r as usize;
                let (Some(w), Some(h), Some(t), Some(x)) = (
                    self.wires.get(i),
                    self.hot.get(r),
                    self.txs.get(r),
                    self.rxs.get(r),
                ) else {
                    return;
                };
                match stage {
                    0 => {
                        at(w);
                        at(h);
                        t.link.cache_lines(f);
                        at(x);
                        x.tlu.cache_lines(f);
                        if let Some(p) = self.accels.port(r as u32) {
                            p.req.cache_lines(f);
                        }
                    }
                    1 => {
                        if let Some(fl) = w.flight.front_ref() {
                            at(fl);
                        }
                    }
                    _ => {
                        if let Some(fl) = w.flight.front_ref() {
                            whole(self.flits.get(fl.slot));
                        }
                    }
                }
            }
            Ev::Ctl(e) | Ev::Pipe(e) | Ev::Cpl(e) if stage == 0 => {
                if let Some(x) = self.rxs.get(e as usize) {
                    at(x);
                }
                if let (Ev::Cpl(_), Some(p)) = (ev, self.accels.port(e)) {
                    p.cpl.cache_lines(f);
                }
            }
            _ => {}
        }
    }
}
