//! Flits, credits and routes: the values that cross a router's ports.

/// Where a head flit goes at one router: an output port and the range of output VCs it may
/// take there, and optionally a second element of lower priority (BookSim's `OutputSet` with
/// one element, or with two of different priorities: `min_adapt_mesh`'s adaptive VCs at
/// priority 1 and its escape VC at priority 0).
///
/// With a second element the first has allocation priority 1 and the second 0 (BookSim's
/// `in_pri`, which the priority-aware VC allocators honour); without one the first has
/// priority 0. The two elements' output VCs must not overlap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// Output port.
    pub port: u16,
    /// First output VC the packet may be allocated.
    pub vc_lo: u8,
    /// Last output VC the packet may be allocated (inclusive).
    pub vc_hi: u8,
    /// The second element's output port, [`Route::NO_ALT`] when there is none.
    pub alt_port: u16,
    /// The second element's VC range (inclusive).
    pub alt_lo: u8,
    /// See [`alt_lo`](Self::alt_lo).
    pub alt_hi: u8,
}

impl Route {
    /// [`alt_port`](Self::alt_port) of a route with one element.
    pub const NO_ALT: u16 = u16::MAX;

    /// A route to `port` on any VC in `vc_lo..=vc_hi`.
    pub const fn new(port: u16, vc_lo: u8, vc_hi: u8) -> Self {
        Route {
            port,
            vc_lo,
            vc_hi,
            alt_port: Self::NO_ALT,
            alt_lo: 0,
            alt_hi: 0,
        }
    }

    /// This route (now at priority 1) with a second element at priority 0: `port` on any VC
    /// in `vc_lo..=vc_hi`.
    pub const fn or_else(self, port: u16, vc_lo: u8, vc_hi: u8) -> Self {
        Route {
            alt_port: port,
            alt_lo: vc_lo,
            alt_hi: vc_hi,
            ..self
        }
    }

    /// The second element, if any: `(port, vc_lo, vc_hi)`.
    #[inline]
    pub const fn alt(&self) -> Option<(u16, u8, u8)> {
        if self.alt_port == Self::NO_ALT {
            None
        } else {
            Some((self.alt_port, self.alt_lo, self.alt_hi))
        }
    }
}

impl Default for Route {
    fn default() -> Self {
        Route::new(0, 0, 0)
    }
}

/// One flit. `Copy` and 20 bytes: routers store flits by value in preallocated rings.
///
/// The router looks only at `vc`, the head/tail flags, `dest` (handed to the routing
/// function), `pri` and, under lookahead routing, `la_route`. `payload` is an opaque handle
/// the owner of the flit uses to find its contents (the pod simulator attaches real TL flits
/// this way; BookSim mode keeps a packet index there).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flit {
    /// Opaque handle owned by the sender.
    pub payload: u32,
    /// Destination terminal (meaning is up to the routing function).
    pub dest: u32,
    /// Lookahead route at the next router (used only when `routing_delay == 0`).
    pub la_route: Route,
    /// VC the flit occupies on the channel it travels on.
    pub vc: u8,
    flags: u8,
    /// Priority; higher wins ties in allocation (BookSim's `pri`, 0 when priorities are off).
    pub pri: u16,
}

const HEAD: u8 = 1;
const TAIL: u8 = 2;

impl Flit {
    /// A flit of a packet: `head` for the first flit, `tail` for the last (both for a
    /// single-flit packet).
    pub const fn new(payload: u32, dest: u32, head: bool, tail: bool) -> Self {
        Flit {
            payload,
            dest,
            la_route: Route::new(0, 0, 0),
            vc: 0,
            flags: (head as u8) | ((tail as u8) << 1),
            pri: 0,
        }
    }

    /// First flit of its packet.
    #[inline]
    pub const fn is_head(&self) -> bool {
        self.flags & HEAD != 0
    }

    /// Last flit of its packet.
    #[inline]
    pub const fn is_tail(&self) -> bool {
        self.flags & TAIL != 0
    }
}

/// A credit: the set of VCs (bit `v` for VC `v`) that each freed one buffer slot. A router
/// returns at most one credit per input per cycle, covering every flit that left that input
/// in one internal step (BookSim's `Credit` with its `vc` set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Credit(pub u64);

impl Credit {
    /// A credit for one VC.
    pub const fn for_vc(vc: u8) -> Self {
        Credit(1u64 << (vc as u32 & 63))
    }

    /// Whether the credit names no VC.
    pub const fn is_empty(&self) -> bool {
        self.0 == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flit_flags_and_size() {
        let f = Flit::new(7, 3, true, false);
        assert!(f.is_head() && !f.is_tail());
        let f = Flit::new(7, 3, true, true);
        assert!(f.is_head() && f.is_tail());
        assert_eq!(core::mem::size_of::<Flit>(), 20);
        assert_eq!(Credit::for_vc(3).0, 8);
    }
}
