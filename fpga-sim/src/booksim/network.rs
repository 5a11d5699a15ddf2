//! BookSim's networks built from [`IqRouter`]s: k-ary n-flies, fat trees, quad trees and
//! `tree4`, meshes and tori (k-ary n-cubes), concentrated meshes, flattened butterflies,
//! dragonflies and `anynet` networks read from a file, their channels, and their oblivious
//! routing functions and the adaptive ones that pick one output from router state
//! ([`BookSimRouting`]).
//!
//! Channels are BookSim's: one flit per cycle with a latency of 1 cycle by default (the
//! topologies' layouts, `use_noc_latency` and `anynet` files set others, terminal channels
//! included). A value sent in cycle `t` (by a router's
//! write phase, or by a terminal) is received in the read phase of cycle `t + latency + 1`,
//! because BookSim's channel takes its input in the next cycle's read phase and presents it in
//! the write phase `latency` cycles after that. Every flit channel has a credit channel running
//! the other way with the same timing.

use super::config::Topology;
use super::rng::KnuthInt;
use super::sim::Packet;
use crate::router::{Flit, IqRouter, Route, RouterConfig, RouterConfigError, RoutingFunction};

/// One end of a channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// A terminal (injection source or ejection sink).
    Node(u32),
    /// A router port.
    Router {
        /// Router.
        router: u32,
        /// Port (output port at the source end, input port at the sink end).
        port: u32,
    },
}

/// Channels of one kind (flits or credits) with latencies of at most `latency` cycles: per
/// arrival slot, the list of deliveries due. Reading a cycle's deliveries costs time
/// proportional to what arrives, not to the number of channels.
pub struct Channels<T: Copy> {
    depth: u64,
    lists: Vec<Vec<(u32, T)>>,
}

impl<T: Copy> Channels<T> {
    /// Channels of at most `latency` cycles, expecting about `per_cycle` deliveries per cycle.
    pub fn new(per_cycle: usize, latency: usize) -> Self {
        Channels {
            depth: latency as u64 + 1,
            lists: (0..=latency)
                .map(|_| Vec::with_capacity(per_cycle))
                .collect(),
        }
    }

    /// The slot of cycle `t` (compute once per cycle): where cycle `t`'s deliveries are, and
    /// where values sent in cycle `t` on channels of the maximum latency go.
    #[inline]
    pub fn slot(&self, t: u64) -> usize {
        (t % self.depth) as usize
    }

    /// Where values sent in cycle `t` on a channel of `latency` cycles (at most the maximum)
    /// go: the slot of cycle `t + latency + 1`.
    #[inline]
    pub fn slot_after(&self, t: u64, latency: u32) -> usize {
        ((t + u64::from(latency) + 1) % self.depth) as usize
    }

    /// Send on channel `c` in the cycle whose slot is `slot`.
    #[inline]
    pub fn send(&mut self, slot: usize, c: usize, v: T) {
        self.lists[slot].push((c as u32, v));
    }

    /// The list of values sent in the cycle whose slot is `slot` (to send many at once).
    #[inline]
    pub fn list(&mut self, slot: usize) -> &mut Vec<(u32, T)> {
        &mut self.lists[slot]
    }

    /// Take the deliveries due in the cycle whose slot is `slot` (give the list back with
    /// [`Channels::restore`] before sending in that cycle).
    #[inline]
    pub fn take(&mut self, slot: usize) -> Vec<(u32, T)> {
        std::mem::take(&mut self.lists[slot])
    }

    /// Return a list taken with [`Channels::take`], emptied, to reuse its storage.
    #[inline]
    pub fn restore(&mut self, slot: usize, mut list: Vec<(u32, T)>) {
        list.clear();
        self.lists[slot] = list;
    }

    /// Whether anything is in flight.
    pub fn is_empty(&self) -> bool {
        self.lists.iter().all(Vec::is_empty)
    }
}

/// The wiring of a network (immutable once built).
pub struct Wiring {
    /// The topology.
    pub topology: Topology,
    /// Terminals.
    pub nodes: usize,
    /// Channel `c` carries flits from `src[c]` to `dst[c]` (credits the other way).
    pub src: Vec<End>,
    /// See `src`.
    pub dst: Vec<End>,
    /// Channel feeding each input port of each router.
    pub router_in: Vec<Vec<u32>>,
    /// Channel leaving each output port of each router.
    pub router_out: Vec<Vec<u32>>,
    /// VCs per channel.
    pub vcs: u8,
    /// VC range (first, last) by packet kind code (0: every VC; 1 to 4: `use_read_write`'s
    /// [`PacketKind`](super::config::PacketKind) + 1). Set with [`Wiring::set_kind_vcs`].
    pub kind_vcs: [(u8, u8); 5],
    /// Whether packets have kinds (`use_read_write`): routes then read the packet's kind.
    pub typed: bool,
    /// Latency of each channel, cycles (injection and ejection channels take 1 but in
    /// `anynet`).
    pub latency: Vec<u32>,
    /// Whether some injection or ejection channel takes more than 1 cycle.
    pub terminal_latency: bool,
    /// Routing table: output port of router `r` for destination `d` at `r * nodes + d`,
    /// `UP` for "any up port" (fat tree); empty when too large (computed instead).
    table: Vec<u16>,
}

/// Routing-table entry meaning "a random up port".
const UP: u16 = u16::MAX;

impl Wiring {
    /// The VC ranges of `use_read_write`'s packet kinds, by [`PacketKind`](super::config::PacketKind).
    pub fn set_kind_vcs(&mut self, ranges: [(u8, u8); 4]) {
        self.kind_vcs[1..].copy_from_slice(&ranges);
        self.typed = true;
    }

    /// Channel on which terminal `n` injects.
    #[inline]
    pub fn inject(&self, n: usize) -> usize {
        n
    }

    /// Channel on which terminal `n` receives.
    #[inline]
    pub fn eject(&self, n: usize) -> usize {
        self.nodes + n
    }

    /// Whether channel `c` is a router-to-router channel, not an injection or ejection
    /// channel.
    #[inline]
    pub fn is_link(&self, c: usize) -> bool {
        c >= 2 * self.nodes
    }

    /// The longest channel latency.
    pub fn max_latency(&self) -> u32 {
        self.latency.iter().copied().max().unwrap_or(1)
    }

    /// The output port `dest_tag` / `nca` / `dim_order_mesh` picks at router `router` for
    /// `dest`, or `None` for "any up port" (fat tree, destination not below this router) and
    /// for every torus route (it depends on the input port and the packet's source, and may
    /// draw: see `BookSimRouting::torus_route`).
    pub fn port_for(&self, router: u32, dest: usize) -> Option<usize> {
        match self.topology {
            Topology::Fly { k, n } => {
                // dest_tag_fly: the stage's digit of the destination.
                let per_stage = powi(k, n - 1);
                let stage = router as usize / per_stage;
                Some((dest / powi(k, n - 1 - stage as u32)) % k as usize)
            }
            Topology::FatTree { k, n, .. } => {
                // fattree_nca: down when the destination is below, else up.
                let per_level = powi(k, n - 1);
                let pos = router as usize % per_level;
                let depth = router as usize / per_level;
                let rpn = powi(k, n - depth as u32 - 1);
                let nb = pos / rpn;
                let coverage = powi(k, n - depth as u32);
                if dest >= nb * coverage && dest < (nb + 1) * coverage {
                    Some(if depth == n as usize - 1 {
                        dest % k as usize
                    } else {
                        (dest - nb * coverage) / powi(k, n - (depth as u32 + 1))
                    })
                } else {
                    None
                }
            }
            Topology::QTree { k, n } => {
                // nca_qtree: down towards the destination when it is below, else up (port k).
                let (h, pos) = qtree_place(k as usize, router as usize);
                let below = dest / powi(k, n - 1 - h as u32);
                Some(if pos == below / k as usize {
                    below % k as usize
                } else {
                    k as usize
                })
            }
            Topology::Mesh { k, n }
            | Topology::MeshMinAdapt { k, n }
            | Topology::MeshPlanarAdapt { k, n }
            | Topology::MeshNi { k, n, .. } => {
                // dor_next_mesh: the lowest dimension whose digit differs, towards the
                // destination (port 2d up, 2d + 1 down); port 2n ejects.
                let (k, mut cur, mut dest) = (k as usize, router as usize, dest);
                for dim in 0..n as usize {
                    let (c, d) = (cur % k, dest % k);
                    if c != d {
                        return Some(2 * dim + usize::from(c > d));
                    }
                    cur /= k;
                    dest /= k;
                }
                Some(2 * n as usize)
            }
            // Random up ports at every level: see `tree4_route`.
            Topology::Tree4 { .. } => None,
            // Depend on the input port (and VC) and may draw a random number: see
            // `torus_route`, `xy_yx_route` and `flatfly_xy_yx_route`.
            Topology::Torus { .. }
            | Topology::MeshXyYx { .. }
            | Topology::MeshTwoPhase { .. }
            | Topology::FlatFly { xy_yx: true, .. }
            | Topology::FlatFly { valiant: true, .. } => None,
            Topology::FlatFly { k, xr, x, .. } => {
                // min_flatfly: the terminal's port at its router, else flatfly_outport (the
                // lowest differing dimension first).
                let (to, port) = flatfly_terminal(xr as usize, x as usize, dest);
                Some(if to == router as usize {
                    port
                } else {
                    flatfly_port(k as usize, (xr * xr) as usize, router as usize, to, false)
                })
            }
            Topology::DragonFly { p, ugal: false } => {
                Some(dragonfly_port(p as usize, router as usize, dest))
            }
            // Adaptive, with per-packet state: see `ugal_route`.
            Topology::DragonFly { ugal: true, .. } => None,
            // min_anynet: the table computed from the file (`AnyNet::routing_table`).
            Topology::AnyNet(_) => self
                .table
                .get(router as usize * self.nodes + dest)
                .map(|&p| usize::from(p)),
            // Drawn at the first router: see `cmesh_xy_yx_route`.
            Topology::CMesh { xy_yx: true, .. } => None,
            Topology::CMesh { k, express, .. } => {
                // dor_cmesh / dor_no_express_cmesh: the terminal's port at its router, else
                // cmesh_next towards the destination's router.
                let (to, port) = cmesh_terminal(k, dest);
                Some(if to == router as usize {
                    port
                } else {
                    4 + cmesh_next(k as usize, router as usize, to, express)
                })
            }
        }
    }

    /// The `_ni` / `_pni` routings' slice of the VC range `lo..=hi` for a packet to `dest`
    /// leaving in dimension `dim`: one slice per terminal, the destination's, or
    /// (`dim_order_pni_mesh`) one per coordinate, the destination's digit in `dim`; each
    /// `(hi - lo + 1) / slices` VCs (the configuration refuses fewer VCs than slices).
    fn ni_slice(&self, lo: u8, hi: u8, dest: usize, dim: usize) -> (u8, u8) {
        let (parts, owner) = match self.topology {
            Topology::MeshNi {
                k, per_coord: true, ..
            } => {
                let k = k as usize;
                (k, (dest / k.pow(dim as u32)) % k)
            }
            _ => (self.nodes, dest),
        };
        let per = (usize::from(hi - lo) + 1) / parts.max(1);
        let first = usize::from(lo) + owner * per;
        (first as u8, (first + per).saturating_sub(1) as u8)
    }

    /// The VCs a terminal may inject a packet to `dest` on, of its kind's range `lo..=hi`
    /// (BookSim's injection route): `dim_order_ni_mesh`, `dim_order_pni_mesh` and
    /// `romm_ni_mesh` restrict it to the slice the first router's route will take (the
    /// destination's, or its lowest digit's); every other routing leaves it whole.
    /// (Callers on a hot path check [`injection_sliced`](Self::injection_sliced) once and call
    /// this only when it holds.)
    #[inline]
    pub fn injection_vcs(&self, lo: u8, hi: u8, dest: usize) -> (u8, u8) {
        if self.injection_sliced() {
            self.ni_slice(lo, hi, dest, 0)
        } else {
            (lo, hi)
        }
    }

    /// Whether [`injection_vcs`](Self::injection_vcs) narrows a range (the mesh's `_ni` /
    /// `_pni` routings).
    #[inline]
    pub fn injection_sliced(&self) -> bool {
        matches!(
            self.topology,
            Topology::MeshNi { .. } | Topology::MeshTwoPhase { ni: true, .. }
        )
    }

    /// Hops (routers) from `src` to `dest` of a packet whose routing state
    /// ([`BookSimRouting::intm`]) is `intm`: through the intermediate router for two-phase
    /// routing, and for UGAL when the packet went non-minimally (both legs, the intermediate
    /// router once); [`hops`](Self::hops) elsewhere.
    pub fn hops_via(&self, src: usize, intm: u32, dest: usize) -> u32 {
        match self.topology {
            Topology::MeshTwoPhase { k, n, .. } => {
                let intm = (intm & !PHASE_1) as usize;
                kncube_hops(k, n, src, intm, false) + kncube_hops(k, n, intm, dest, false) - 1
            }
            Topology::FlatFly {
                k,
                xr,
                x,
                valiant: true,
                ..
            } => flatfly_valiant_hops(k, xr, x, src, (intm & !PHASE_1) as usize, dest),
            // Counted as the packet was routed (see `cmesh_xy_yx_route`).
            Topology::CMesh { xy_yx: true, .. } => intm,
            Topology::DragonFly { p, ugal: true } if intm & UGAL_NONMIN != 0 => {
                let (p, intm) = (p as usize, (intm & UGAL_INTM) as usize);
                dragonfly_hops(p, src, intm) + dragonfly_hops(p, intm, dest) - 1
            }
            _ => self.hops(src, dest),
        }
    }

    /// Hops (routers) from `src` to `dest`.
    #[inline]
    pub fn hops(&self, src: usize, dest: usize) -> u32 {
        match self.topology {
            Topology::Fly { n, .. } => n,
            Topology::Tree4 { .. } => {
                // The same leaf, the same group of four leaves (under two middle routers),
                // else through a top router.
                if src / 4 == dest / 4 {
                    1
                } else if src / 16 == dest / 16 {
                    3
                } else {
                    5
                }
            }
            Topology::FatTree { k, n, .. } | Topology::QTree { k, n } => {
                // Up to the nearest common ancestor and back down.
                let (k, mut a, mut b) = (k as usize, src / k as usize, dest / k as usize);
                let mut up = 0;
                while a != b {
                    a /= k;
                    b /= k;
                    up += 1;
                }
                let _ = n;
                2 * up + 1
            }
            Topology::Mesh { k, n }
            | Topology::MeshXyYx { k, n, .. }
            | Topology::MeshMinAdapt { k, n }
            | Topology::MeshPlanarAdapt { k, n }
            | Topology::MeshNi { k, n, .. }
            | Topology::MeshTwoPhase { k, n, .. } => kncube_hops(k, n, src, dest, false),
            Topology::Torus { k, n, .. } => kncube_hops(k, n, src, dest, true),
            Topology::CMesh { k, express, .. } => cmesh_hops(k, express, src, dest),
            Topology::DragonFly { p, .. } => dragonfly_hops(p as usize, src, dest),
            Topology::FlatFly { k, n, xr, x, .. } => flatfly_hops(k, n, xr, x, src, dest),
            Topology::AnyNet(_) => self.walked_hops(src, dest),
        }
    }

    /// Routers on the table's route from terminal `src` to terminal `dest`, walked channel by
    /// channel (out of line, like [`kncube_hops`]).
    #[inline(never)]
    fn walked_hops(&self, src: usize, dest: usize) -> u32 {
        let End::Router { router, .. } = self.dst[self.inject(src)] else {
            return 0;
        };
        let (mut r, mut hops) = (router as usize, 1);
        while hops as usize <= self.router_in.len() {
            let Some(&port) = self.table.get(r * self.nodes + dest) else {
                break;
            };
            match self.router_out[r]
                .get(usize::from(port))
                .map(|&c| self.dst[c as usize])
            {
                Some(End::Router { router, .. }) => {
                    r = router as usize;
                    hops += 1;
                }
                _ => break,
            }
        }
        hops
    }
}

/// One of the two VC classes BookSim's routings split a range `lo..=hi` into (its
/// `available_vcs`, half the range's VCs rounded down): the lower `count - count / 2` VCs,
/// or with `upper` the upper `count / 2` (the two share the middle VC when the count is odd).
fn class_route(port: u16, lo: u8, hi: u8, upper: bool) -> Route {
    let count = hi - lo + 1;
    let avail = count / 2;
    if upper {
        Route::new(port, lo + avail, hi)
    } else {
        Route::new(port, lo, hi - avail)
    }
}

/// `adaptive_xy_yx_mesh`, `adaptive_xyyx_flatfly`: XY unless its output's downstream buffers
/// hold more flits than YX's (`GetUsedCredit`), a tie drawn (`RandomInt(1) > 0`: XY).
fn adaptive_order(xy: u32, yx: u32, rng: &mut KnuthInt) -> bool {
    match xy.cmp(&yx) {
        std::cmp::Ordering::Greater => false,
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Equal => rng.int(1) > 0,
    }
}

/// `qtree`: the height and position of the router at index `r` (routers are numbered by
/// height, then position: k^h routers at height h).
fn qtree_place(k: usize, r: usize) -> (usize, usize) {
    let (mut h, mut first, mut width) = (0, 0, 1);
    while r >= first + width {
        first += width;
        width *= k;
        h += 1;
    }
    (h, r - first)
}

/// `flatfly`: terminal `t`'s router and port. `flatfly_onchip.cpp` numbers terminals across
/// the rows of its layout (`x` routers of `xr` by `xr` terminals to a row); its
/// `flatfly_transformation` maps such a number to `router * c + port`.
fn flatfly_terminal(xr: usize, x: usize, t: usize) -> (usize, usize) {
    let row_len = x * xr;
    let (col, row) = (t % row_len, t / row_len);
    ((row / xr) * x + col / xr, xr * (row % xr) + col % xr)
}

/// `flatfly` with `use_noc_latency`: each terminal's channel latency (injection, ejection and
/// their credits alike), `flatfly_onchip.cpp`'s estimate of the client's distance from its
/// router: for the clients of router `r`, visited row by row of its `xr` by `xr` block, two
/// counters run from `-xr / 2` (skipping 0 when `xr` is even), the first advancing per client
/// and the second when the first wraps; the latency is 1 plus each counter's distance past 1.
/// (The counters advance in the other order than the visit, as in BookSim.) 1 for `xr <= 3`.
fn flatfly_terminal_latencies(
    xr: usize,
    x: usize,
    routers: usize,
) -> impl Iterator<Item = (usize, u32)> {
    let half = (xr / 2) as i64;
    let even = xr.is_multiple_of(2);
    (0..routers).flat_map(move |r| {
        let (y_index, x_index) = (r / x, r % x);
        let (mut yleng, mut xleng) = (-half, -half);
        (0..xr * xr).map(move |i| {
            let (yy, xx) = (i / xr, i % xr);
            if yleng == 0 && even {
                yleng += 1;
            }
            if xleng == 0 && even {
                xleng += 1;
            }
            let lat = 1 + (yleng.abs() - 1).max(0) + (xleng.abs() - 1).max(0);
            yleng += 1;
            if yleng > half {
                yleng = -half;
                xleng += 1;
            }
            let link = (x * xr) * (xr * y_index + yy) + (xr * x_index + xx);
            (link, lat as u32)
        })
    })
}

/// `flatfly_outport` (`yx`: `flatfly_outport_yx`): from router `r` towards router `to`
/// (another one), the port to the router of the lowest (highest) dimension whose base-`k`
/// digit differs, with that digit. After the `c` terminal ports each dimension has `k - 1`
/// ports, one per other digit in order, skipping the router's own.
fn flatfly_port(k: usize, c: usize, r: usize, to: usize, yx: bool) -> usize {
    let (mut dim, mut pow, mut found) = (0, 1, None);
    while pow <= r.max(to) {
        let (a, b) = ((r / pow) % k, (to / pow) % k);
        if a != b {
            found = Some((dim, a, b));
            if !yx {
                break;
            }
        }
        dim += 1;
        pow *= k;
    }
    let Some((dim, own, want)) = found else {
        return 0;
    };
    c + (k - 1) * dim + if want > own { want - 1 } else { want }
}

/// Routers on a minimal flatfly route: one per differing dimension, and the first.
fn flatfly_hops(k: u32, n: u32, xr: u32, x: u32, src: usize, dest: usize) -> u32 {
    let (a, b) = (
        flatfly_terminal(xr as usize, x as usize, src).0,
        flatfly_terminal(xr as usize, x as usize, dest).0,
    );
    let (k, mut a, mut b, mut hops) = (k as usize, a, b, 1);
    for _ in 0..n {
        hops += u32::from(a % k != b % k);
        a /= k;
        b /= k;
    }
    hops
}

/// Routers on a `valiant_flatfly` route from terminal `src` to `dest` through terminal
/// `intm`'s router: towards it until reaching it or the destination's router, then to the
/// destination's, each leg lowest differing dimension first.
fn flatfly_valiant_hops(k: u32, xr: u32, x: u32, src: usize, intm: usize, dest: usize) -> u32 {
    let place = |t: usize| flatfly_terminal(xr as usize, x as usize, t).0;
    let (mut r, im, to) = (place(src), place(intm), place(dest));
    let k = k as usize;
    // The router one hop from `r` towards `t`: the lowest differing digit set to `t`'s.
    let step = |r: usize, t: usize| {
        let mut pow = 1;
        while (r / pow) % k == (t / pow) % k {
            pow *= k;
        }
        r - ((r / pow) % k) * pow + ((t / pow) % k) * pow
    };
    let mut hops = 1;
    while r != im && r != to {
        r = step(r, im);
        hops += 1;
    }
    while r != to {
        r = step(r, to);
        hops += 1;
    }
    hops
}

/// `dragonfly_port` (min routing): at the destination's router its terminal port; at the
/// router of this group holding the global link towards the destination's group, that link
/// (ports `p + a - 1 ..`); otherwise the local port towards that router (local ports
/// `p .. p + a - 1` skip the router itself).
fn dragonfly_port(p: usize, r: usize, dest: usize) -> usize {
    let a = 2 * p;
    let (grp, dest_grp) = (r / a, dest / (a * p));
    let (grp_rid, grp_output) = if dest_grp == grp {
        (dest / p, 0)
    } else {
        let out = if grp > dest_grp {
            dest_grp
        } else {
            dest_grp - 1
        };
        (out / p + grp * a, out)
    };
    if dest / p == r {
        dest % p
    } else if grp_rid == r {
        p + (a - 1) + grp_output % p
    } else if r < grp_rid {
        grp_rid % a - 1 + p
    } else {
        grp_rid % a + p
    }
}

/// Routers on a dragonfly min route, walked (out of line, like [`kncube_hops`]).
#[inline(never)]
fn dragonfly_hops(p: usize, src: usize, dest: usize) -> u32 {
    let (mut r, mut hops) = (src / p, 1);
    loop {
        let port = dragonfly_port(p, r, dest);
        if port < p || hops > 8 {
            return hops;
        }
        r = dragonfly_neighbour(p, r, port);
        hops += 1;
    }
}

/// The router behind output `port` (at least `p`) of dragonfly router `r`.
fn dragonfly_neighbour(p: usize, r: usize, port: usize) -> usize {
    let a = 2 * p;
    let (grp, local) = (r / a, r % a);
    let j = port - p;
    if j < a - 1 {
        // Local: output j reaches local router j, or j + 1 from j = local on.
        grp * a + if j < local { j } else { j + 1 }
    } else {
        // Global output m = j - (a - 1) of local router `local` serves group index
        // local * p + m, counted without the own group.
        let out = local * p + (j - (a - 1));
        let to_grp = if out < grp { out } else { out + 1 };
        // The receiving router: in group to_grp, the one whose global outputs include ours.
        let back = if grp < to_grp { grp } else { grp - 1 };
        to_grp * a + back / p
    }
}

/// Router and port of terminal `t` in the concentrated mesh (`CMesh::NodeToRouter`,
/// `NodeToPort` with c = 4: terminals form a 2k x 2k grid, row-major; each router serves a
/// 2 x 2 block, ports 0-3 row-major within it).
fn cmesh_terminal(k: u32, t: usize) -> (usize, usize) {
    let k = k as usize;
    let (row, col) = (t / (2 * k), t % (2 * k));
    ((row / 2) * k + col / 2, 2 * (row % 2) + col % 2)
}

/// `cmesh_next` (express) / `cmesh_next_no_express`: the network port (0 +x, 1 -x, 2 +y,
/// 3 -y) from router `cur` towards router `dest`, x first. With express channels, a move of
/// more than k/2 - 1 along an edge row (column) takes that edge's outward channel instead,
/// which BookSim wires to the router k/2 along the same edge.
fn cmesh_next(k: usize, cur: usize, dest: usize, express: bool) -> usize {
    cmesh_dir(
        k,
        cur,
        dest,
        express.then(|| (k / 2).saturating_sub(1)),
        false,
    )
}

/// The concentrated mesh's dimension-order step (port 0 +x, 1 -x, 2 +y, 3 -y) from router
/// `cur` towards router `dest`, x first or with `yx` y first; a move of more than
/// `express_over` routers along an edge row (column) takes that edge's outward channel.
/// `cmesh_next` uses k/2 - 1; `xy_yx_cmesh`'s `cmesh_xy` and `cmesh_yx` use 1 (their
/// `_no_express` versions, none).
fn cmesh_dir(k: usize, cur: usize, dest: usize, express_over: Option<usize>, yx: bool) -> usize {
    let (cy, cx, dy, dx) = (cur / k, cur % k, dest / k, dest % k);
    let far = |d: usize| express_over.is_some_and(|t| d > t);
    // A move along one axis from `c` to `d`, at `across` on the other: on that axis's edges
    // (`across` 0 or k - 1) a far move takes the edge's express output (`edge`).
    let axis = |c: usize, d: usize, across: usize, edge: [usize; 2], base: usize| {
        (c != d).then(|| {
            if far(c.abs_diff(d)) {
                if across == 0 {
                    return edge[0];
                }
                if across == k - 1 {
                    return edge[1];
                }
            }
            base + usize::from(c > d)
        })
    };
    let x_step = || axis(cx, dx, cy, [3, 2], 0);
    let y_step = || axis(cy, dy, cx, [1, 0], 2);
    let step = if yx {
        y_step().or_else(x_step)
    } else {
        x_step().or_else(y_step)
    };
    step.unwrap_or(0)
}

/// The router a concentrated-mesh output port leads to (see [`build`]).
fn cmesh_neighbour(k: usize, r: usize, port: usize) -> usize {
    let (y, x, h) = (r / k, r % k, k / 2);
    let other = |v: usize| if v < h { v + h } else { v - h };
    match port {
        0 if x == k - 1 => other(y) * k + x,
        0 => r + 1,
        1 if x == 0 => other(y) * k + x,
        1 => r - 1,
        2 if y == k - 1 => y * k + other(x),
        2 => r + k,
        _ if y == 0 => other(x),
        _ => r - k,
    }
}

/// Routers on a concentrated-mesh route (out of line, like [`kncube_hops`]).
#[inline(never)]
fn cmesh_hops(k: u32, express: bool, src: usize, dest: usize) -> u32 {
    let kk = k as usize;
    let (mut r, to) = (cmesh_terminal(k, src).0, cmesh_terminal(k, dest).0);
    let mut hops = 1;
    while r != to && hops <= 4 * k {
        r = cmesh_neighbour(kk, r, cmesh_next(kk, r, to, express));
        hops += 1;
    }
    hops
}

/// Routers on a minimal route in a mesh or torus (a torus tie goes either way, k / 2 hops).
/// Out of line so that [`Wiring::hops`] stays small enough to inline for the fly.
#[inline(never)]
fn kncube_hops(k: u32, n: u32, src: usize, dest: usize, torus: bool) -> u32 {
    let (k, mut s, mut d, mut hops) = (k as usize, src, dest, 1);
    for _ in 0..n {
        let delta = (s % k).abs_diff(d % k);
        hops += if torus { delta.min(k - delta) } else { delta } as u32;
        s /= k;
        d /= k;
    }
    hops
}

fn powi(k: u32, e: u32) -> usize {
    (k as usize).pow(e)
}

/// Build the routers and wiring of `topology` with router parameters `base`.
/// Router-to-router channels take `link_latency` cycles (see [`Wiring::is_link`]).
pub fn build(
    topology: Topology,
    link_latency: u32,
    base: &RouterConfig,
) -> Result<(Wiring, Vec<IqRouter>), RouterConfigError> {
    let nodes = topology.nodes();
    let (k, n) = topology.k_n();
    let per_level = powi(k, n - 1);
    let (mut routers, radix_in, radix_out): (Vec<IqRouter>, Vec<usize>, Vec<usize>);
    let internal;
    match topology {
        Topology::Fly { .. } => {
            internal = (n as usize - 1) * nodes;
            radix_in = vec![k as usize; n as usize * per_level];
            radix_out = radix_in.clone();
        }
        Topology::Tree4 { .. } => {
            // tree4.cpp: 4 top routers, 8 middle ones (8 ports each), 16 leaves (6 ports).
            internal = 128;
            radix_in = (0..28).map(|r| if r < 12 { 8 } else { 6 }).collect();
            radix_out = radix_in.clone();
        }
        Topology::QTree { .. } => {
            // qtree.cpp: k^h routers at height h; the root has k ports, the others k + 1.
            let routers_n: usize = (0..n).map(|h| powi(k, h)).sum();
            internal = 2 * (routers_n - 1);
            radix_in = (0..routers_n)
                .map(|r| k as usize + usize::from(r > 0))
                .collect();
            radix_out = radix_in.clone();
        }
        Topology::FatTree { .. } => {
            internal = 2 * k as usize * per_level * (n as usize - 1);
            radix_in = (0..n as usize * per_level)
                .map(|id| {
                    if id < per_level {
                        k as usize
                    } else {
                        2 * k as usize
                    }
                })
                .collect();
            radix_out = radix_in.clone();
        }
        Topology::Mesh { .. }
        | Topology::MeshXyYx { .. }
        | Topology::MeshMinAdapt { .. }
        | Topology::MeshPlanarAdapt { .. }
        | Topology::MeshNi { .. }
        | Topology::MeshTwoPhase { .. }
        | Topology::Torus { .. } => {
            // kncube.cpp: one router per terminal, 2n + 1 ports; a mesh has the torus's
            // wrap-around channels too (its routing never takes them).
            internal = 2 * n as usize * nodes;
            radix_in = vec![2 * n as usize + 1; nodes];
            radix_out = radix_in.clone();
        }
        Topology::DragonFly { .. } => {
            // dragonfly.cpp: 2p routers per group, each p terminal, 2p - 1 local and p global
            // ports; BookSim's channel count (3p - 1 per router).
            let routers_n = nodes / k as usize;
            internal = routers_n * (3 * k as usize - 1);
            radix_in = vec![4 * k as usize - 1; routers_n];
            radix_out = radix_in.clone();
        }
        Topology::CMesh { .. } => {
            // cmesh.cpp: k^2 routers of 4 terminal ports and 4 network ports.
            internal = 4 * per_level * k as usize;
            radix_in = vec![8; per_level * k as usize];
            radix_out = radix_in.clone();
        }
        Topology::AnyNet(ref net) => {
            // anynet.cpp: each router's terminals and router channels, as many inputs as
            // outputs.
            internal = net.links.iter().map(Vec::len).sum();
            radix_in = (0..net.routers()).map(|r| net.radix(r)).collect();
            radix_out = radix_in.clone();
        }
        Topology::FlatFly { xr, .. } => {
            // flatfly_onchip.cpp: k^n routers of c terminal ports and k - 1 ports per
            // dimension.
            let routers_n = per_level * k as usize;
            let network_ports = (k as usize - 1) * n as usize;
            internal = routers_n * network_ports;
            radix_in = vec![(xr * xr) as usize + network_ports; routers_n];
            radix_out = radix_in.clone();
        }
    }
    routers = Vec::with_capacity(radix_in.len());
    for (id, (&ri, &ro)) in radix_in.iter().zip(&radix_out).enumerate() {
        let cfg = RouterConfig {
            inputs: ri,
            outputs: ro,
            ..base.clone()
        };
        routers.push(IqRouter::new(id as u32, &cfg)?);
    }
    let chans = 2 * nodes + internal;
    let unset = End::Node(u32::MAX);
    let mut w = Wiring {
        topology: topology.clone(),
        nodes,
        src: vec![unset; chans],
        dst: vec![unset; chans],
        router_in: radix_in.iter().map(|&r| vec![u32::MAX; r]).collect(),
        router_out: radix_out.iter().map(|&r| vec![u32::MAX; r]).collect(),
        vcs: base.vcs as u8,
        kind_vcs: [(0, base.vcs.saturating_sub(1) as u8); 5],
        typed: false,
        latency: (0..chans)
            .map(|c| if c >= 2 * nodes { link_latency } else { 1 })
            .collect(),
        terminal_latency: false,
        table: Vec::new(),
    };
    let connect_in = |w: &mut Wiring, c: usize, r: usize, port: usize| {
        w.dst[c] = End::Router {
            router: r as u32,
            port: port as u32,
        };
        w.router_in[r][port] = c as u32;
    };
    let connect_out = |w: &mut Wiring, c: usize, r: usize, port: usize| {
        w.src[c] = End::Router {
            router: r as u32,
            port: port as u32,
        };
        w.router_out[r][port] = c as u32;
    };
    for t in 0..nodes {
        w.src[t] = End::Node(t as u32);
        w.dst[nodes + t] = End::Node(t as u32);
    }
    let kk = k as usize;
    match topology {
        Topology::Fly { .. } => {
            // Router (stage, addr) has id stage * k^(n-1) + addr. Terminal t injects at
            // stage 0, router t / k, port t % k and is reached from the last stage likewise.
            // Internal channel (stage s, addr a, port p) -> stage s + 1 swaps address digit
            // n-s-2 with the port digit (BookSim's butterfly wiring).
            for t in 0..nodes {
                connect_in(&mut w, t, t / kk, t % kk);
                let last = (n as usize - 1) * per_level;
                connect_out(&mut w, nodes + t, last + t / kk, t % kk);
            }
            for stage in 1..n as usize {
                for addr in 0..per_level {
                    for port in 0..kk {
                        let shift = powi(k, n - stage as u32 - 1);
                        let zero_digit = (addr / shift) % kk;
                        let in_addr = addr - zero_digit * shift + port * shift;
                        let in_port = zero_digit;
                        let c = 2 * nodes + (stage - 1) * nodes + in_addr * kk + in_port;
                        connect_in(&mut w, c, stage * per_level + addr, port);
                        connect_out(&mut w, c, (stage - 1) * per_level + in_addr, in_port);
                    }
                }
            }
        }
        Topology::FatTree { .. } => {
            // Router (level, pos) has id level * k^(n-1) + pos; level 0 is the top. Ports
            // below k face down, ports from k face up. Channel numbering follows BookSim's
            // fattree.cpp so that the up-link choices line up with its random draws.
            let (cpd, cpl) = (kk * per_level, 2 * kk * per_level);
            let id = |level: usize, pos: usize| level * per_level + pos;
            let bottom = n as usize - 1;
            for pos in 0..per_level {
                for idx in 0..kk {
                    let t = pos * kk + idx;
                    connect_in(&mut w, t, id(bottom, pos), idx);
                    connect_out(&mut w, nodes + t, id(bottom, pos), idx);
                }
            }
            for level in 0..bottom {
                for pos in 0..per_level {
                    for port in 0..kk {
                        let c = 2 * nodes + level * cpl + pos * kk + port;
                        connect_out(&mut w, c, id(level, pos), port);
                    }
                }
            }
            for level in 1..n as usize {
                for pos in 0..per_level {
                    for port in 0..kk {
                        let c = 2 * nodes + level * cpl - cpd + pos * kk + port;
                        connect_out(&mut w, c, id(level, pos), kk + port);
                    }
                }
            }
            // Input links are interleaved by neighbourhood (rpn routers) and branch (rpb).
            let link = |base: usize, pos: usize, port: usize, rpn: usize, rpb: usize| {
                let (nb, npos) = (pos / rpn, pos % rpn);
                base + nb * rpn * kk + port * rpb * kk + (npos % rpb) * kk + npos / rpb
            };
            for level in 0..bottom {
                let rpn = powi(k, n - 1 - level as u32);
                let rpb = powi(k, n - 1 - (level as u32 + 1));
                for pos in 0..per_level {
                    for port in 0..kk {
                        let c = 2 * nodes + link((level + 1) * cpl - cpd, pos, port, rpn, rpb);
                        connect_in(&mut w, c, id(level, pos), port);
                    }
                }
            }
            for level in 1..n as usize {
                let rpn = powi(k, n - 1 - (level as u32 - 1));
                let rpb = powi(k, n - 1 - level as u32);
                for pos in 0..per_level {
                    for port in 0..kk {
                        let c = 2 * nodes + link((level - 1) * cpl, pos, port, rpn, rpb);
                        connect_in(&mut w, c, id(level, pos), kk + port);
                    }
                }
            }
        }
        Topology::QTree { .. } => {
            // qtree.cpp: leaf p serves terminals k p .. k p + k - 1 on ports 0..k. BookSim's
            // channel to parent from the router at (h, pos) is numbered (routers above h)
            // - 1 + pos (`_InputIndex` of its parent), the channel from the parent down to
            // it half the internal channels later (`_OutputIndex`); it is input and output
            // k of the child, input and output `pos % k` of the parent.
            let routers_n = w.router_in.len();
            let leaves = powi(k, n - 1);
            for t in 0..nodes {
                let leaf = routers_n - leaves + t / kk;
                connect_in(&mut w, t, leaf, t % kk);
                connect_out(&mut w, nodes + t, leaf, t % kk);
            }
            let half = routers_n - 1;
            for r in 1..routers_n {
                let (h, pos) = qtree_place(kk, r);
                let parent = r - powi(k, h as u32 - 1) - pos + pos / kk;
                let up = 2 * nodes + r - 1;
                let down = up + half;
                connect_out(&mut w, up, r, kk);
                connect_in(&mut w, up, parent, pos % kk);
                connect_out(&mut w, down, parent, pos % kk);
                connect_in(&mut w, down, r, kk);
            }
        }
        Topology::Tree4 { .. } => {
            // tree4.cpp: router indices 0..4 top, 4..12 middle, 12..28 leaves. Leaf p serves
            // terminals 4p .. 4p + 3 on ports 0..4. Middle router m's ports 0..4 go down to
            // leaves 4 (m / 2) .. + 3, whose ports 4 and 5 go up to middle routers 2 (p / 4)
            // and + 1; top router t's port m goes down to middle router m, whose port 4 + t
            // goes up to it. Channels in BookSim's order: for each middle router and each of
            // its leaves the down channel, then the up one; then for each top router and
            // middle router likewise.
            for t in 0..nodes {
                connect_in(&mut w, t, 12 + t / 4, t % 4);
                connect_out(&mut w, nodes + t, 12 + t / 4, t % 4);
            }
            let mut c = 2 * nodes;
            for m in 0..8 {
                for port in 0..4 {
                    let leaf = 4 * (m / 2) + port;
                    connect_out(&mut w, c, 4 + m, port);
                    connect_in(&mut w, c, 12 + leaf, 4 + m % 2);
                    connect_in(&mut w, c + 1, 4 + m, port);
                    connect_out(&mut w, c + 1, 12 + leaf, 4 + m % 2);
                    c += 2;
                }
            }
            for top in 0..4 {
                for m in 0..8 {
                    connect_out(&mut w, c, top, m);
                    connect_in(&mut w, c, 4 + m, 4 + top);
                    connect_in(&mut w, c + 1, top, m);
                    connect_out(&mut w, c + 1, 4 + m, 4 + top);
                    c += 2;
                }
            }
        }
        // Wired below.
        Topology::CMesh { .. } | Topology::DragonFly { .. } | Topology::FlatFly { .. } => {}
        Topology::AnyNet(ref net) => {
            // anynet.cpp: router by router, its terminals' channels (terminal order) on ports
            // 0.., then its channels to other routers (by their number) on the outputs after;
            // a router's inputs from other routers in the order they are added, by sending
            // router. Channels take the file's latencies, credits too.
            let mut next_in: Vec<usize> = net.terminals.iter().map(Vec::len).collect();
            for (r, terms) in net.terminals.iter().enumerate() {
                for (port, &(t, lat)) in terms.iter().enumerate() {
                    let t = t as usize;
                    connect_in(&mut w, t, r, port);
                    connect_out(&mut w, nodes + t, r, port);
                    w.latency[t] = lat;
                    w.latency[nodes + t] = lat;
                }
            }
            let mut c = 2 * nodes;
            for (r, links) in net.links.iter().enumerate() {
                for (i, &(to, lat)) in links.iter().enumerate() {
                    let to = to as usize;
                    connect_out(&mut w, c, r, net.terminals[r].len() + i);
                    connect_in(&mut w, c, to, next_in[to]);
                    next_in[to] += 1;
                    w.latency[c] = lat;
                    c += 1;
                }
            }
            w.table = net.routing_table();
            w.terminal_latency = w.latency[..2 * nodes].iter().any(|&l| l != 1);
        }
        Topology::Mesh { .. }
        | Topology::MeshXyYx { .. }
        | Topology::MeshMinAdapt { .. }
        | Topology::MeshPlanarAdapt { .. }
        | Topology::MeshNi { .. }
        | Topology::MeshTwoPhase { .. }
        | Topology::Torus { .. } => {
            // kncube.cpp: for each dimension d, input 2d comes from the right neighbour (its left
            // channel), input 2d + 1 from the left neighbour (its right channel); output 2d is
            // this router's right channel, 2d + 1 its left one; port 2n is the terminal's.
            // Channel 2n * node + 2d is node's right channel, + 1 its left one.
            let (kk, nn) = (k as usize, n as usize);
            for node in 0..nodes {
                connect_in(&mut w, node, node, 2 * nn);
                connect_out(&mut w, nodes + node, node, 2 * nn);
                let mut k_to_dim = 1;
                for dim in 0..nn {
                    let loc = (node / k_to_dim) % kk;
                    let left = if loc == 0 {
                        node + (kk - 1) * k_to_dim
                    } else {
                        node - k_to_dim
                    };
                    let right = if loc == kk - 1 {
                        node - (kk - 1) * k_to_dim
                    } else {
                        node + k_to_dim
                    };
                    let chan = |node: usize, left: bool| {
                        2 * nodes + 2 * nn * node + 2 * dim + usize::from(left)
                    };
                    connect_in(&mut w, chan(right, true), node, 2 * dim);
                    connect_in(&mut w, chan(left, false), node, 2 * dim + 1);
                    connect_out(&mut w, chan(node, false), node, 2 * dim);
                    connect_out(&mut w, chan(node, true), node, 2 * dim + 1);
                    k_to_dim *= kk;
                }
            }
        }
    }
    if let Topology::CMesh { k, noc, .. } = topology {
        // cmesh.cpp: terminal t at (cmesh_terminal); channel 4 * ... numbered as BookSim's
        // px/nx/py/ny_out = k y + x + {0,1,2,3} k^2. Output ports 4..8 are +x, -x, +y, -y;
        // input port 4 + d receives the channel arriving from direction d's side (the
        // neighbour's opposite output, or an edge's express channel). Latencies with
        // use_noc_latency: 2 (the concentration) for ordinary links, k (= 2 * k / 2) for the
        // edge channels; 1 without.
        let kk = k as usize;
        let routers_n = kk * kk;
        for t in 0..nodes {
            let (r, port) = cmesh_terminal(k, t);
            connect_in(&mut w, t, r, port);
            connect_out(&mut w, nodes + t, r, port);
        }
        let chan = |r: usize, dir: usize| 2 * nodes + r + dir * routers_n;
        for r in 0..routers_n {
            let (y, x) = (r / kk, r % kk);
            for dir in 0..4 {
                let c = chan(r, dir);
                connect_out(&mut w, c, r, 4 + dir);
                let to = cmesh_neighbour(kk, r, dir);
                let edge = match dir {
                    0 => x == kk - 1,
                    1 => x == 0,
                    2 => y == kk - 1,
                    _ => y == 0,
                };
                // An ordinary channel travelling in direction `dir` arrives on the input of
                // the opposite side (a +x channel comes in from -x); an edge channel joins
                // two routers of the same edge and arrives on the input of its own direction.
                connect_in(&mut w, c, to, 4 + if edge { dir } else { dir ^ 1 });
                w.latency[c] = match (noc, edge) {
                    (false, _) => 1,
                    (true, true) => k,
                    (true, false) => 2,
                };
            }
        }
    }
    if let Topology::FlatFly {
        k, n, xr, x, noc, ..
    } = topology
    {
        // flatfly_onchip.cpp: terminal t on its router's port (flatfly_terminal). Router r's
        // channel to the router `other` that differs from it in dimension `dim` only is
        // channel (k - 1) n r + (k - 1) dim + i of the internal ones, on output c + (k - 1) dim
        // + i, where i numbers the other digits in order; routers take their inputs in the
        // order BookSim adds them: by sending router, then dimension, then digit. Latencies
        // with use_noc_latency: xr per router of layout distance (x routers to a row); 1
        // without. Terminal channels: see `flatfly_terminal_latencies`.
        let (kk, nn, xr, x) = (k as usize, n as usize, xr as usize, x as usize);
        let c = xr * xr;
        let routers_n = per_level * kk;
        for t in 0..nodes {
            let (r, port) = flatfly_terminal(xr, x, t);
            connect_in(&mut w, t, r, port);
            connect_out(&mut w, nodes + t, r, port);
        }
        if noc {
            for (t, lat) in flatfly_terminal_latencies(xr, x, routers_n) {
                w.latency[t] = lat;
                w.latency[nodes + t] = lat;
            }
            w.terminal_latency = w.latency[..2 * nodes].iter().any(|&l| l != 1);
        }
        let mut next_in = vec![c; routers_n];
        for r in 0..routers_n {
            let mut pow = 1;
            for dim in 0..nn {
                let own = (r / pow) % kk;
                for digit in (0..kk).filter(|&d| d != own) {
                    let other = r - own * pow + digit * pow;
                    let i = if digit > own { digit - 1 } else { digit };
                    let ch = 2 * nodes + (kk - 1) * nn * r + (kk - 1) * dim + i;
                    connect_out(&mut w, ch, r, c + (kk - 1) * dim + i);
                    connect_in(&mut w, ch, other, next_in[other]);
                    next_in[other] += 1;
                    w.latency[ch] = if noc {
                        let cols = (r % x).abs_diff(other % x);
                        let rows = (r / x).abs_diff(other / x);
                        (xr * (cols + rows)) as u32
                    } else {
                        1
                    };
                }
                pow *= kk;
            }
        }
    }
    if let Topology::DragonFly { p, .. } = topology {
        // dragonfly.cpp, literally: terminal c = p r + i on port i of router r; BookSim's
        // channel (3p - 1) r + j leaves router r on output p + j (j < 2p - 1: local, else
        // global); each router's inputs p.. take the channels `_BuildNet` computes.
        let (p, a) = (p as usize, 2 * p as usize);
        let per = 3 * p - 1;
        let routers_n = nodes / p;
        for t in 0..nodes {
            connect_in(&mut w, t, t / p, t % p);
            connect_out(&mut w, nodes + t, t / p, t % p);
        }
        for c in 0..routers_n * per {
            connect_out(&mut w, 2 * nodes + c, c / per, p + c % per);
            // dragonfly.cpp defines DRAGON_LATENCY: local channels (and their credits) take
            // 10 cycles, global ones 100, whatever use_noc_latency says.
            w.latency[2 * nodes + c] = if c % per < 2 * p - 1 { 10 } else { 100 };
        }
        for node in 0..routers_n {
            let (grp, dim) = (node / a, node % a);
            for cnt in 0..2 * p - 1 {
                let input = if cnt < dim {
                    grp * per * a + cnt * per + (dim - 1)
                } else {
                    grp * per * a + dim * per + (cnt - dim + 1) * per + dim
                };
                connect_in(&mut w, 2 * nodes + input, node, p + cnt);
            }
            for cnt in 0..p {
                let grp_output = dim * p + cnt;
                let input = if grp > grp_output {
                    grp_output * per * a + (per - p) * ((grp - 1) / p) + (per - p) + grp - 1
                } else {
                    (grp_output + 1) * per * a + (per - p) * (grp / p) + (per - p) + grp
                };
                connect_in(&mut w, 2 * nodes + input, node, p + 2 * p - 1 + cnt);
            }
        }
    }
    match topology {
        // dest_tag and dim_order_mesh routes are a function of the router and destination
        // alone (no random up-link draws, unlike nca), so the routers may use their one-cycle
        // pipeline. So are dim_order_torus routes when k is odd (no tie to break at random):
        // they depend on the input port and the packet's source, both arguments.
        // dragonflynew's min routes depend on the router, destination and source only; its
        // random draw is at injection, outside the routers.
        Topology::Fly { .. }
        | Topology::Mesh { .. }
        | Topology::MeshPlanarAdapt { .. }
        | Topology::MeshNi { .. }
        | Topology::QTree { .. }
        | Topology::FlatFly {
            xy_yx: false,
            valiant: false,
            ..
        }
        | Topology::DragonFly { ugal: false, .. }
        | Topology::CMesh { xy_yx: false, .. }
        | Topology::AnyNet(_) => {
            for r in &mut routers {
                r.set_order_free_routing(true);
            }
        }
        Topology::Torus {
            k,
            balanced: false,
            adaptive: false,
            ..
        } if k % 2 == 1 => {
            for r in &mut routers {
                r.set_order_free_routing(true);
            }
        }
        _ => {}
    }
    if let Topology::MeshXyYx { adaptive: true, .. }
    | Topology::FlatFly { adaptive: true, .. }
    | Topology::DragonFly { ugal: true, .. } = topology
    {
        // Lookahead routes for the first router are computed at injection, from the
        // router's downstream occupancy before this cycle's credits.
        for r in &mut routers {
            r.set_credits_at_step();
        }
    }
    if !matches!(
        topology,
        Topology::Torus { .. }
            | Topology::Tree4 { .. }
            | Topology::MeshXyYx { .. }
            | Topology::MeshMinAdapt { .. }
            | Topology::MeshPlanarAdapt { .. }
            | Topology::MeshNi { .. }
            | Topology::MeshTwoPhase { .. }
            | Topology::FlatFly { xy_yx: true, .. }
            | Topology::FlatFly { valiant: true, .. }
            | Topology::CMesh { xy_yx: true, .. }
            | Topology::DragonFly { .. }
            | Topology::AnyNet(_)
    ) && routers.len() * nodes <= 1 << 22
    {
        let mut table = Vec::with_capacity(routers.len() * nodes);
        for r in 0..routers.len() {
            for d in 0..nodes {
                table.push(w.port_for(r as u32, d).map_or(UP, |p| p as u16));
            }
        }
        w.table = table;
    }
    debug_assert!(w.src.iter().chain(&w.dst).all(|e| *e != unset));
    debug_assert!(w
        .router_in
        .iter()
        .chain(&w.router_out)
        .flatten()
        .all(|&c| c != u32::MAX));
    Ok((w, routers))
}

/// BookSim's routing functions for the supported topologies, drawing random up-links from the
/// shared integer generator exactly when BookSim does.
pub struct BookSimRouting<'a> {
    /// Wiring (for lookahead routing).
    pub wiring: &'a Wiring,
    /// BookSim's integer generator.
    pub rng: &'a mut KnuthInt,
    /// The packets in flight, indexed by a flit's `payload` (the torus's dateline class
    /// depends on the packet's source).
    pub packets: &'a [Packet],
    /// Routing state per packet, by `payload`: two-phase routing's intermediate router and
    /// [`PHASE_1`] once the packet has reached it (BookSim's `f->intm` and `f->ph`), the
    /// balanced torus's partition (`f->ph`). Empty for other routing functions.
    pub intm: &'a mut [u32],
}

/// In [`BookSimRouting::intm`]: the packet is in its second phase.
pub const PHASE_1: u32 = 1 << 31;
/// `ugal_dragonflynew`'s state in [`BookSimRouting::intm`]: the phase (0 to 2) from this bit
/// up, [`UGAL_NONMIN`], and the intermediate terminal in [`UGAL_INTM`].
const UGAL_PH_SHIFT: u32 = 30;
/// The packet was sent non-minimally.
const UGAL_NONMIN: u32 = 1 << 29;
const UGAL_INTM: u32 = UGAL_NONMIN - 1;

/// One hop of `dor_next_torus` ([`BookSimRouting::dor_next_torus`]).
struct TorusHop {
    /// The lowest dimension whose digit differs.
    dim: usize,
    /// This router's digit in it.
    cur: usize,
    /// The destination's digit in it.
    dest: usize,
    /// The packet turns into that dimension here (or starts in it).
    turning: bool,
    /// The output.
    port: usize,
}

impl BookSimRouting<'_> {
    /// The VC range of flit `f`'s packet: its kind's under `use_read_write` (BookSim's
    /// `vcBegin`, `vcEnd` by flit type), else every VC.
    #[inline(always)]
    fn vc_range(&self, f: &Flit) -> (u8, u8) {
        let w = self.wiring;
        if !w.typed {
            return (0, w.vcs - 1);
        }
        let kind = self.packets.get(f.payload as usize).map_or(0, Packet::kind);
        w.kind_vcs[kind as usize % 5]
    }

    /// Route at router `router` (not at injection).
    #[inline(always)]
    pub fn route_at(&mut self, router: u32, in_port: usize, f: &Flit) -> Route {
        let w = self.wiring;
        let dest = f.dest as usize;
        let entry = if !w.table.is_empty() {
            w.table[router as usize * w.nodes + dest]
        } else if let Topology::Torus {
            k,
            n,
            balanced,
            adaptive,
            ni,
        } = w.topology
        {
            if adaptive {
                return self.min_adapt_torus_route(router, in_port, f, k, n);
            }
            if ni {
                return self.ni_torus_route(router, in_port, f, k, n);
            }
            return self.torus_route(router, in_port, f, k, n, balanced);
        } else if let Topology::MeshXyYx { k, n, .. } = w.topology {
            // (Adaptive routes read occupancies: see `route_reading`. A lookahead route is
            // never for a first router, the only one where they are read.)
            return self.xy_yx_route(router, in_port, f, k, n, None);
        } else if let Topology::MeshMinAdapt { n, .. } = w.topology {
            return self.min_adapt_mesh_route(router, in_port, f, n);
        } else if let Topology::MeshNi { n, .. } = w.topology {
            // dim_order_ni_mesh / dim_order_pni_mesh: dimension order on the destination's
            // (or its next digit's) slice of the range.
            let (lo, hi) = self.vc_range(f);
            let port = w.port_for(router, dest).unwrap_or(2 * n as usize);
            if router as usize == dest {
                return Route::new(port as u16, lo, hi);
            }
            let (lo, hi) = w.ni_slice(lo, hi, dest, port / 2);
            return Route::new(port as u16, lo, hi);
        } else if let Topology::MeshPlanarAdapt { n, .. } = w.topology {
            // planar_adapt_mesh: dimension order on the range's upper third.
            let (lo, hi) = self.vc_range(f);
            let port = w.port_for(router, dest).unwrap_or(2 * n as usize) as u16;
            if router as usize == dest {
                return Route::new(port, lo, hi);
            }
            return Route::new(port, lo + 2 * ((hi - lo + 1) / 3), hi);
        } else if let Topology::MeshTwoPhase { k, n, romm, ni } = w.topology {
            return self.two_phase_route(router, in_port, f, k, n, romm, ni);
        } else if let Topology::DragonFly { p, ugal } = w.topology {
            if ugal {
                return self.ugal_route(router, in_port, f, p, None);
            }
            return self.dragonfly_route(router, f, p);
        } else if let Topology::Tree4 { anca } = w.topology {
            return self.tree4_route(router, f, anca);
        } else if let Topology::FlatFly {
            k,
            xr,
            x,
            xy_yx: true,
            ..
        } = w.topology
        {
            return self.flatfly_xy_yx_route(router, in_port, f, k, xr, x, None);
        } else if let Topology::FlatFly {
            k,
            xr,
            x,
            valiant: true,
            ..
        } = w.topology
        {
            return self.flatfly_valiant_route(router, in_port, f, k, xr, x);
        } else if let Topology::CMesh {
            k,
            express,
            xy_yx: true,
            ..
        } = w.topology
        {
            return self.cmesh_xy_yx_route(router, in_port, f, k, express);
        } else {
            w.port_for(router, dest).map_or(UP, |p| p as u16)
        };
        let port = if entry == UP {
            // A random up port, drawn when BookSim draws it (route computation).
            let k = w.topology.k_n().0;
            if let Topology::FatTree { anca: true, .. } = w.topology {
                // (Adaptive: see `route_reading`, which every anca route goes through; the
                // configuration refuses lookahead routing with it.)
                self.anca_up(k, &|_| 0)
            } else {
                (k + self.rng.int(k - 1)) as u16
            }
        } else {
            entry
        };
        let (lo, hi) = self.vc_range(f);
        Route::new(port, lo, hi)
    }

    /// BookSim's `dor_next_torus` output for a packet at `router` bound for `dest`, having come
    /// in on `in_port` (the terminal port `2n` when injected): `None` at the destination's
    /// router; else the lowest dimension whose digit differs, this router's and the
    /// destination's digits in it, whether the packet turns into that dimension, and the
    /// output: on turning the shorter way (a tie, k even and k / 2 apart, drawn by
    /// `RandomInt(1)`, 1: up), else on in the direction of travel (`in_port ^ 1`).
    #[inline(always)]
    fn dor_next_torus(
        &mut self,
        router: usize,
        dest: usize,
        in_port: usize,
        k: usize,
        n: usize,
    ) -> Option<TorusHop> {
        let (mut cur, mut dest) = (router, dest);
        let mut dim = 0;
        while dim < n && cur % k == dest % k {
            cur /= k;
            dest /= k;
            dim += 1;
        }
        if dim == n {
            return None;
        }
        let (c, d) = (cur % k, dest % k);
        let turning = in_port / 2 != dim;
        let port = if turning {
            let dist2 = k as i64 - 2 * ((d + k - c) % k) as i64;
            if dist2 > 0 || (dist2 == 0 && self.rng.int(1) != 0) {
                2 * dim
            } else {
                2 * dim + 1
            }
        } else {
            in_port ^ 1
        };
        Some(TorusHop {
            dim,
            cur: c,
            dest: d,
            turning,
            port,
        })
    }

    /// `dim_order_torus` (`dor_next_torus` without balancing): in the lowest dimension whose
    /// digit differs, continue in the direction the packet travels (output = input port ^ 1),
    /// or, when turning into that dimension (from another dimension or from the terminal), go
    /// the shorter way, a tie (k even, k / 2 apart) broken by `RandomInt(1)` (1: up). The VC
    /// range is split into two classes of `vcs / 2` VCs: the lower `vcs - vcs / 2` VCs for
    /// partition 0, the upper `vcs / 2` for partition 1 (the two overlap when `vcs` is odd).
    /// The partition is decided on turning into a dimension and kept while travelling in it:
    /// 1 when the current digit is above the destination's (BookSim tests `cur > dest` going
    /// up and `dest < cur` going down: the same test, whichever way the packet goes). A packet
    /// turns into dimension d at a router whose digit d is still its source's, so the
    /// partition is `src_d > dest_d`, recomputed here from the packet's source instead of being
    /// carried in the flit (BookSim's `f->ph`). At the destination router: the ejection port
    /// and every VC.
    /// `xy_yx_mesh`: at the destination router the ejection port and every VC; else XY
    /// (`dor_next_mesh`, lowest differing dimension first) or YX (highest first) order, chosen
    /// at the first router by `RandomInt(1)` (1: XY) and afterwards read from the VC the flit
    /// arrived on (below `vcs / 2`: XY); XY packets take the lower `vcs - vcs / 2` VCs, YX
    /// the upper `vcs / 2` (overlapping in the middle VC when `vcs` is odd, where BookSim
    /// then reads the order as YX).
    ///
    /// `adaptive_xy_yx_mesh` (`used`: the router's downstream occupancy per output, BookSim's
    /// `GetUsedCredit`) chooses the order at the first router instead by the two outputs'
    /// occupancies, the less occupied one's order, drawing only on a tie.
    #[inline(never)]
    fn xy_yx_route(
        &mut self,
        router: u32,
        in_port: usize,
        f: &Flit,
        k: u32,
        n: u32,
        used: Option<&dyn Fn(usize) -> u32>,
    ) -> Route {
        let (lo, hi) = self.vc_range(f);
        let (k, n) = (k as usize, n as usize);
        let (cur, dest) = (router as usize, f.dest as usize);
        if cur == dest {
            return Route::new(2 * n as u16, lo, hi);
        }
        let digit = |v: usize, d: u32| (v / k.pow(d)) % k;
        let port_of = |xy: bool| {
            let dim = if xy {
                (0..n as u32).find(|&d| digit(cur, d) != digit(dest, d))
            } else {
                (1..n as u32)
                    .rev()
                    .find(|&d| digit(cur, d) != digit(dest, d))
            }
            .unwrap_or(0);
            2 * dim as usize + usize::from(digit(cur, dim) >= digit(dest, dim))
        };
        // BookSim's `available_vcs`: half the range's VCs, rounded down.
        let count = hi - lo + 1;
        let avail = count / 2;
        let xy = if in_port < 2 * n {
            f.vc < lo + avail
        } else if let Some(used) = used {
            adaptive_order(used(port_of(true)), used(port_of(false)), self.rng)
        } else {
            self.rng.int(1) > 0
        };
        class_route(port_of(xy) as u16, lo, hi, !xy)
    }

    /// `min_adapt_torus`: at the destination router the ejection port and every VC. Else, in
    /// the lowest dimension whose digit differs: off the escape VCs (the flit arrived on a VC
    /// above the range's second; from the terminal it counts as the last), the minimal
    /// direction (down on a tie) on the range's fourth VC at priority 1, and at priority 0
    /// `dor_next_torus` as if the packet were injected here (the shorter way, a tie drawn by
    /// `RandomInt(1)`, 1: up); on an escape VC, `dor_next_torus` from the input port (on
    /// in the direction of travel when staying in the dimension). The escape element takes
    /// the range's first VC, or its second when the dateline class `f->ph` is 1: set where
    /// the direction is chosen (1 when this router's digit is above the destination's) and
    /// kept in [`BookSimRouting::intm`] while the packet goes on in its dimension.
    /// BookSim adds a minimal direction for every differing dimension, but its `OutputSet`
    /// keeps one element per priority: the lowest dimension's.
    fn min_adapt_torus_route(
        &mut self,
        router: u32,
        in_port: usize,
        f: &Flit,
        k: u32,
        n: u32,
    ) -> Route {
        let (k, n) = (k as usize, n as usize);
        let (lo, hi) = self.vc_range(f);
        let in_vc = if in_port == 2 * n { hi } else { f.vc };
        let adaptive = in_vc > lo.saturating_add(1);
        // Off the escape VCs the escape element is computed as if the packet were injected
        // here (always turning).
        let from = if adaptive { 2 * n } else { in_port };
        let Some(hop) = self.dor_next_torus(router as usize, f.dest as usize, from, k, n) else {
            return Route::new(2 * n as u16, lo, hi);
        };
        let (dim, c, d) = (hop.dim, hop.cur, hop.dest);
        let dist2 = k as i64 - 2 * ((d + k - c) % k) as i64;
        let slot = f.payload as usize;
        if hop.turning {
            if let Some(s) = self.intm.get_mut(slot) {
                *s = u32::from(c > d);
            }
        }
        let escape_port = hop.port;
        let ph = self.intm.get(slot).is_some_and(|&s| s != 0);
        let escape_vc = lo + u8::from(ph);
        if adaptive {
            let port = 2 * dim + usize::from(dist2 <= 0);
            Route::new(port as u16, lo + 3, lo + 3).or_else(
                escape_port as u16,
                escape_vc,
                escape_vc,
            )
        } else {
            Route::new(escape_port as u16, escape_vc, escape_vc)
        }
    }

    /// `dim_order_ni_torus`: at the destination router the ejection port and every VC; else
    /// `dor_next_torus` without a dateline class (the shorter way when turning into a
    /// dimension, a tie drawn by `RandomInt(1)`, 1: up; on in the direction of travel
    /// otherwise) on the destination's slice of the range.
    fn ni_torus_route(&mut self, router: u32, in_port: usize, f: &Flit, k: u32, n: u32) -> Route {
        let (lo, hi) = self.vc_range(f);
        let (k, n) = (k as usize, n as usize);
        let Some(hop) = self.dor_next_torus(router as usize, f.dest as usize, in_port, k, n) else {
            return Route::new(2 * n as u16, lo, hi);
        };
        let port = hop.port;
        let (lo, hi) = self.wiring.ni_slice(lo, hi, f.dest as usize, 0);
        Route::new(port as u16, lo, hi)
    }

    /// `min_adapt_mesh`: at the destination router the ejection port and every VC; else the
    /// dimension-order output ([`Wiring::port_for`]'s `dor_next_mesh`) on the escape VC (the
    /// range's first) at priority 0, and, unless the flit arrived on the escape VC (a flit
    /// from the terminal counts as arriving on the range's last VC), the same output on the
    /// VCs above it at priority 1. BookSim adds each dimension's minimal direction at
    /// priority 1, but its `OutputSet` keeps one element per priority (its order compares
    /// priorities only), so only the first, lowest differing dimension's, is kept: the
    /// dimension-order output. (BookSim writes the escape element as VCs 0 to the range's
    /// first at priority equal to that VC, which is the above only for a range that begins
    /// at VC 0; the configuration refuses other ranges, on which BookSim asserts.)
    fn min_adapt_mesh_route(&mut self, router: u32, in_port: usize, f: &Flit, n: u32) -> Route {
        let (lo, hi) = self.vc_range(f);
        let port = self
            .wiring
            .port_for(router, f.dest as usize)
            .unwrap_or(2 * n as usize) as u16;
        if router == f.dest {
            return Route::new(port, lo, hi);
        }
        let in_vc = if in_port == 2 * n as usize { hi } else { f.vc };
        if in_vc == lo {
            Route::new(port, lo, lo)
        } else {
            Route::new(port, lo + 1, hi).or_else(port, lo, lo)
        }
    }

    /// [`route_at`](Self::route_at) at a router whose downstream occupancy per output is
    /// `used` (BookSim's `GetUsedCredit`), which adaptive routing reads.
    pub fn route_reading(
        &mut self,
        router: u32,
        in_port: usize,
        f: &Flit,
        used: &dyn Fn(usize) -> u32,
    ) -> Route {
        match self.wiring.topology {
            Topology::MeshXyYx {
                k,
                n,
                adaptive: true,
            } => self.xy_yx_route(router, in_port, f, k, n, Some(used)),
            Topology::FlatFly {
                k,
                xr,
                x,
                xy_yx: true,
                adaptive: true,
                ..
            } => self.flatfly_xy_yx_route(router, in_port, f, k, xr, x, Some(used)),
            Topology::DragonFly { p, ugal: true } => {
                self.ugal_route(router, in_port, f, p, Some(used))
            }
            Topology::FatTree { k, anca: true, .. } => {
                let w = self.wiring;
                let dest = f.dest as usize;
                let entry = match w.table.get(router as usize * w.nodes + dest) {
                    Some(&e) => e,
                    None => w.port_for(router, dest).map_or(UP, |p| p as u16),
                };
                let port = if entry == UP {
                    self.anca_up(k, used)
                } else {
                    entry
                };
                let (lo, hi) = self.vc_range(f);
                Route::new(port, lo, hi)
            }
            _ => self.route_at(router, in_port, f),
        }
    }

    /// `anca_fattree` going up: two up ports drawn (`RandomInt(k - 1)` twice, in that
    /// order), the second taken only if the first's downstream buffers (`used`, BookSim's
    /// `GetUsedCredit`) hold more flits.
    fn anca_up(&mut self, k: u32, used: &dyn Fn(usize) -> u32) -> u16 {
        let first = k + self.rng.int(k - 1);
        let second = k + self.rng.int(k - 1);
        if used(first as usize) > used(second as usize) {
            second as u16
        } else {
            first as u16
        }
    }

    /// `xyyx_flatfly`: at the destination's router its terminal port and every VC; else
    /// XY ([`flatfly_port`], lowest differing dimension first) or YX (highest first), chosen
    /// at the first router (a flit from a terminal port) by `RandomInt(1)` (1: XY) and
    /// afterwards read from the VC the flit arrived on, with the VC classes of
    /// [`xy_yx_route`](Self::xy_yx_route).
    ///
    /// `adaptive_xyyx_flatfly` (`used`: the router's downstream occupancy per output) chooses
    /// the order at the first router by the two outputs' occupancies instead, as
    /// `adaptive_xy_yx_mesh` does.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn flatfly_xy_yx_route(
        &mut self,
        router: u32,
        in_port: usize,
        f: &Flit,
        k: u32,
        xr: u32,
        x: u32,
        used: Option<&dyn Fn(usize) -> u32>,
    ) -> Route {
        let (lo, hi) = self.vc_range(f);
        let c = (xr * xr) as usize;
        let (to, port) = flatfly_terminal(xr as usize, x as usize, f.dest as usize);
        if to == router as usize {
            return Route::new(port as u16, lo, hi);
        }
        // BookSim's `available_vcs`: half the range's VCs, rounded down.
        let count = hi - lo + 1;
        let avail = count / 2;
        let port_of = |xy: bool| flatfly_port(k as usize, c, router as usize, to, !xy);
        let xy = if in_port >= c {
            f.vc < lo + avail
        } else if let Some(used) = used {
            adaptive_order(used(port_of(true)), used(port_of(false)), self.rng)
        } else {
            self.rng.int(1) > 0
        };
        class_route(port_of(xy) as u16, lo, hi, !xy)
    }

    /// `valiant_flatfly`: at the first router (a flit from a terminal port) an intermediate
    /// terminal is drawn (`RandomInt(k^n c - 1)`) and the packet enters phase 0; at the
    /// intermediate terminal's router or the destination's it enters phase 1 (and stays).
    /// Phase 0 goes towards the intermediate router, phase 1 towards the destination, each by
    /// `flatfly_outport` (lowest differing dimension first); except at the destination's
    /// router phase 0 takes the lower `vcs - vcs / 2` VCs of the range and phase 1 the upper
    /// `vcs / 2`. The intermediate terminal and phase are kept per packet ([`PHASE_1`]).
    #[inline(never)]
    fn flatfly_valiant_route(
        &mut self,
        router: u32,
        in_port: usize,
        f: &Flit,
        k: u32,
        xr: u32,
        x: u32,
    ) -> Route {
        let (lo, hi) = self.vc_range(f);
        let (c, r) = ((xr * xr) as usize, router as usize);
        let slot = f.payload as usize;
        let mut state = self.intm.get(slot).copied().unwrap_or(0);
        if in_port < c {
            state = self.rng.int(self.wiring.nodes as u32 - 1);
        }
        let im_router = flatfly_terminal(xr as usize, x as usize, (state & !PHASE_1) as usize).0;
        let (to, term_port) = flatfly_terminal(xr as usize, x as usize, f.dest as usize);
        if im_router == r || to == r {
            state |= PHASE_1;
        }
        if let Some(s) = self.intm.get_mut(slot) {
            *s = state;
        }
        let toward = |t: usize| flatfly_port(k as usize, c, r, t, false);
        if to == r {
            return Route::new(term_port as u16, lo, hi);
        }
        if state & PHASE_1 == 0 {
            class_route(toward(im_router) as u16, lo, hi, false)
        } else {
            class_route(toward(to) as u16, lo, hi, true)
        }
    }

    /// `xy_yx_cmesh` / `xy_yx_no_express_cmesh`: at the destination's router its terminal
    /// port and every VC; else XY (`cmesh_xy`) or YX (`cmesh_yx`), drawn at the first router
    /// (a flit from a terminal port: `RandomInt(1)`, 1: XY) and afterwards read from the VC,
    /// with the VC classes of [`xy_yx_route`](Self::xy_yx_route). With express channels these
    /// take an edge's express channel for a move of more than 1 router (`dor_cmesh`: more
    /// than k/2 - 1). A packet on the middle VC of an odd range reads as YX at the next
    /// router whichever order it started in, and XY and YX paths differ in length once
    /// express channels are taken, so the packet's routers are counted as they route it
    /// (each router routes a packet once), for its hop count.
    #[inline(never)]
    fn cmesh_xy_yx_route(
        &mut self,
        router: u32,
        in_port: usize,
        f: &Flit,
        k: u32,
        express: bool,
    ) -> Route {
        let (lo, hi) = self.vc_range(f);
        if let Some(s) = self.intm.get_mut(f.payload as usize) {
            // A new packet at its first router (a terminal port) starts the count.
            *s = if in_port < 4 { 1 } else { s.saturating_add(1) };
        }
        let (to, port) = cmesh_terminal(k, f.dest as usize);
        if to == router as usize {
            return Route::new(port as u16, lo, hi);
        }
        // BookSim's `available_vcs`: half the range's VCs, rounded down.
        let count = hi - lo + 1;
        let avail = count / 2;
        let xy = if in_port < 4 {
            self.rng.int(1) > 0
        } else {
            f.vc < lo + avail
        };
        let dir = cmesh_dir(k as usize, router as usize, to, express.then_some(1), !xy);
        class_route(4 + dir as u16, lo, hi, !xy)
    }

    /// `valiant_mesh` / `romm_mesh`. At the first router (a flit from the terminal port)
    /// the intermediate router is drawn: `RandomInt(nodes - 1)`, or for ROMM one draw per
    /// dimension from the lower of the two digits, `RandomInt(|difference|)` (a draw even
    /// when they are equal). On reaching the intermediate router the packet enters phase 1.
    /// The port is `dor_next_mesh` towards the intermediate router in phase 0, the
    /// destination in phase 1. Except at the destination's router (even when passing it in
    /// phase 0) phase 0 takes the lower `vcs - vcs / 2` VCs of the range and phase 1 the
    /// upper `vcs / 2`.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn two_phase_route(
        &mut self,
        router: u32,
        in_port: usize,
        f: &Flit,
        k: u32,
        n: u32,
        romm: bool,
        ni: bool,
    ) -> Route {
        let (lo, hi) = self.vc_range(f);
        let (kk, nn) = (k as usize, n as usize);
        let slot = f.payload as usize;
        let mut state = self.intm.get(slot).copied().unwrap_or(0);
        if in_port == 2 * nn {
            state = if romm {
                let src = self.packets.get(slot).map_or(0, |p| p.src() as usize);
                let (mut s, mut d, mut intm, mut place) = (src, f.dest as usize, 0, 1);
                for _ in 0..nn {
                    let (a, b) = (s % kk, d % kk);
                    let low = a.min(b);
                    intm += place * (low + self.rng.int(a.abs_diff(b) as u32) as usize);
                    place *= kk;
                    s /= kk;
                    d /= kk;
                }
                intm as u32
            } else {
                self.rng.int(self.wiring.nodes as u32 - 1)
            };
        }
        if state & PHASE_1 == 0 && router == state {
            state |= PHASE_1;
        }
        if let Some(s) = self.intm.get_mut(slot) {
            *s = state;
        }
        let target = if state & PHASE_1 != 0 {
            f.dest as usize
        } else {
            (state & !PHASE_1) as usize
        };
        // dor_next_mesh: the lowest differing dimension, up (2d) or down (2d + 1).
        let (mut cur, mut to, mut port) = (router as usize, target, 2 * nn);
        for dim in 0..nn {
            let (c, d) = (cur % kk, to % kk);
            if c != d {
                port = 2 * dim + usize::from(c > d);
                break;
            }
            cur /= kk;
            to /= kk;
        }
        if router == f.dest {
            return Route::new(port as u16, lo, hi);
        }
        if ni {
            let (lo, hi) = self.wiring.ni_slice(lo, hi, f.dest as usize, 0);
            return Route::new(port as u16, lo, hi);
        }
        class_route(port as u16, lo, hi, state & PHASE_1 != 0)
    }

    /// `nca_tree4`: a top router goes down to one of the two middle routers over the
    /// destination's group of leaves (`2 g + RandomInt(1)`); a middle router down to the
    /// destination's leaf if it is in its group, else up to a random top router
    /// (`4 + RandomInt(3)`); a leaf ejects, or goes up to one of its two middle routers
    /// (`4 + RandomInt(1)`). Every VC of the range. `anca_tree4` adds every up port to its
    /// route set at one priority, of which BookSim's `OutputSet` keeps the first: up is
    /// always the first up port (4), without a draw.
    #[inline(never)]
    fn tree4_route(&mut self, router: u32, f: &Flit, anca: bool) -> Route {
        let (lo, hi) = self.vc_range(f);
        let (r, dest) = (router as usize, f.dest as usize);
        let port = if r < 4 {
            2 * (dest / 16) as u32 + self.rng.int(1)
        } else if r < 12 {
            let leaf = dest / 4;
            if leaf / 4 == (r - 4) / 2 {
                (leaf % 4) as u32
            } else if anca {
                4
            } else {
                4 + self.rng.int(3)
            }
        } else if dest / 4 == r - 12 {
            (dest % 4) as u32
        } else if anca {
            4
        } else {
            4 + self.rng.int(1)
        };
        Route::new(port as u16, lo, hi)
    }

    /// `min_dragonflynew`: [`dragonfly_port`], on VC `ph`: 0 until the packet takes a global
    /// link, 1 from the global link on (BookSim sets `f->ph` to 0 at the first router and to
    /// 1 on a global output, and it stays; its same-group test compares against an unset
    /// group and never fires). So `ph` is 1 exactly when the output is global or the router
    /// is outside the source's group.
    #[inline(never)]
    fn dragonfly_route(&mut self, router: u32, f: &Flit, p: u32) -> Route {
        let p = p as usize;
        let port = dragonfly_port(p, router as usize, f.dest as usize);
        let src = self
            .packets
            .get(f.payload as usize)
            .map_or(0, |pk| pk.src() as usize);
        let a = 2 * p;
        let ph = u8::from(port >= p + a - 1 || router as usize / a != src / (a * p));
        Route::new(port as u16, ph, ph)
    }

    /// `ugal_dragonflynew` (3 VCs, the VC being the phase). At the source router: a
    /// destination in the source's group goes minimally in phase 2; otherwise an intermediate
    /// terminal is drawn (`RandomInt(nodes - 1)`), and the packet goes minimally (phase 1)
    /// if that terminal is in the source's group or if the minimal output's downstream
    /// occupancy is at most twice the non-minimal one's plus 30, else towards the
    /// intermediate terminal's router in phase 0. Phase 0 becomes 1 at that router; phase 1
    /// becomes 2 on a global output. The state (intermediate terminal, phase, and whether
    /// the packet went non-minimally, for its hop count) is kept per packet in `intm`, as
    /// BookSim keeps `f->intm` and `f->ph`.
    #[inline(never)]
    fn ugal_route(
        &mut self,
        router: u32,
        in_port: usize,
        f: &Flit,
        p: u32,
        used: Option<&dyn Fn(usize) -> u32>,
    ) -> Route {
        let (p, r, dest) = (p as usize, router as usize, f.dest as usize);
        let a = 2 * p;
        let group_nodes = a * p;
        let slot = f.payload as usize;
        let state = self.intm.get(slot).copied().unwrap_or(0);
        let (mut ph, mut im, mut nonmin) = (state >> UGAL_PH_SHIFT, state & UGAL_INTM, false);
        if in_port < p {
            if dest / group_nodes == r / a {
                ph = 2;
            } else {
                im = self.rng.int(self.wiring.nodes as u32 - 1);
                if (im as usize) / group_nodes == r / a {
                    ph = 1;
                } else {
                    let used = |o: usize| used.map_or(0, |u| u(o));
                    let min_q = used(dragonfly_port(p, r, dest));
                    let nonmin_q = used(dragonfly_port(p, r, im as usize));
                    ph = if min_q <= 2 * nonmin_q + 30 { 1 } else { 0 };
                    nonmin = ph == 0;
                }
            }
        } else {
            nonmin = state & UGAL_NONMIN != 0;
        }
        if ph == 0 && r == im as usize / p {
            ph = 1;
        }
        let port = if ph == 0 {
            dragonfly_port(p, r, im as usize)
        } else {
            dragonfly_port(p, r, dest)
        };
        if ph == 1 && port >= p + a - 1 {
            ph = 2;
        }
        if let Some(s) = self.intm.get_mut(slot) {
            *s = ph << UGAL_PH_SHIFT | if nonmin { UGAL_NONMIN } else { 0 } | im;
        }
        Route::new(port as u16, ph as u8, ph as u8)
    }

    // Kept out of line so that `route_at`, inlined into the routers' hot loops, stays small.
    /// With `balanced` (`dim_order_bal_torus`) the partition chosen on turning into a
    /// dimension is Cray's: 1 when the way taken crosses the dateline between k - 1 and 0, 0
    /// when it crosses the one between `(k - 1) / 2` and the digit above, else
    /// `RandomInt(1)` (after the direction's own draw); it is kept per packet while the
    /// packet travels in that dimension (BookSim's `f->ph`).
    #[inline(never)]
    fn torus_route(
        &mut self,
        router: u32,
        in_port: usize,
        f: &Flit,
        k: u32,
        n: u32,
        balanced: bool,
    ) -> Route {
        let (k, n) = (k as usize, n as usize);
        let (lo, hi) = self.vc_range(f);
        let Some(hop) = self.dor_next_torus(router as usize, f.dest as usize, in_port, k, n) else {
            return Route::new(2 * n as u16, lo, hi);
        };
        let TorusHop {
            dim,
            cur: c,
            dest: d,
            turning,
            port,
        } = hop;
        let upper = if balanced {
            let slot = f.payload as usize;
            if turning {
                let (up, mid) = (port == 2 * dim, (k - 1) / 2);
                let part = if (up && c > d) || (!up && c < d) {
                    1
                } else if (up && c <= mid && d > mid) || (!up && c > mid && d <= mid) {
                    0
                } else {
                    self.rng.int(1)
                };
                if let Some(s) = self.intm.get_mut(slot) {
                    *s = part;
                }
                part != 0
            } else {
                self.intm.get(slot).is_some_and(|&s| s != 0)
            }
        } else {
            let src = self
                .packets
                .get(f.payload as usize)
                .map_or(0, |p| p.src() as usize);
            (src / k.pow(dim as u32)) % k > d
        };
        class_route(port as u16, lo, hi, upper)
    }
}

impl RoutingFunction for BookSimRouting<'_> {
    #[inline(always)]
    fn route(&mut self, router: u32, in_port: usize, flit: &Flit) -> Route {
        self.route_at(router, in_port, flit)
    }

    fn lookahead(&mut self, router: u32, out_port: usize, flit: &Flit) -> Option<Route> {
        let c = self.wiring.router_out[router as usize][out_port] as usize;
        match self.wiring.dst[c] {
            End::Router { router, port } => Some(self.route_at(router, port as usize, flit)),
            End::Node(_) => None,
        }
    }

    fn random_int(&mut self, max: u32) -> u32 {
        self.rng.int(max)
    }

    fn route_reading(
        &mut self,
        router: u32,
        in_port: usize,
        flit: &Flit,
        used: &dyn Fn(usize) -> u32,
    ) -> Route {
        BookSimRouting::route_reading(self, router, in_port, flit, used)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routing<'a>(
        wiring: &'a Wiring,
        rng: &'a mut KnuthInt,
        packets: &'a [Packet],
        intm: &'a mut [u32],
    ) -> BookSimRouting<'a> {
        BookSimRouting {
            wiring,
            rng,
            packets,
            intm,
        }
    }

    fn base() -> RouterConfig {
        RouterConfig {
            vcs: 2,
            ..RouterConfig::default()
        }
    }

    /// Follow dest_tag / nca / dim_order routes from every source to every destination.
    fn walk(topo: Topology) {
        let (w, routers) = build(topo.clone(), 1, &base()).unwrap();
        let mut rng = KnuthInt::new(1);
        for s in 0..w.nodes {
            let packets = [Packet::from_source(s as u32)];
            let mut intm = [0u32];
            for d in 0..w.nodes {
                let mut rt = routing(&w, &mut rng, &packets, &mut intm);
                let mut f = Flit::new(0, d as u32, true, true);
                // Whether a router is the destination's.
                let at_dest = |router: u32| match topo {
                    Topology::FlatFly { xr, x, .. } => {
                        router as usize == flatfly_terminal(xr as usize, x as usize, d).0
                    }
                    Topology::AnyNet(ref net) => router == net.router_of[d],
                    Topology::CMesh { k, .. } => router as usize == cmesh_terminal(k, d).0,
                    _ => router as usize == d,
                };
                let mut c = w.inject(s);
                let mut hops = 0;
                loop {
                    match w.dst[c] {
                        End::Node(t) => {
                            assert_eq!(t as usize, d, "{topo:?} {s}->{d}");
                            break;
                        }
                        End::Router { router, port } => {
                            assert!((port as usize) < routers[router as usize].inputs());
                            let r = rt.route(router, port as usize, &f);
                            if let (Topology::Torus { balanced: true, .. }, true) =
                                (topo.clone(), router as usize != d)
                            {
                                // One dateline class, by Cray's rule or drawn.
                                assert_eq!(r.vc_lo, r.vc_hi, "{s}->{d}");
                            } else if let (Topology::Torus { k, .. }, true) =
                                (topo.clone(), router as usize != d)
                            {
                                // Two VCs: the dateline class of the dimension being
                                // travelled (VC 1 when the source's digit is above the
                                // destination's).
                                let (k, mut x, mut y, mut z) = (k as usize, router as usize, d, s);
                                while x % k == y % k {
                                    (x, y, z) = (x / k, y / k, z / k);
                                }
                                let class = u8::from(z % k > y % k);
                                assert_eq!((r.vc_lo, r.vc_hi), (class, class), "{s}->{d}");
                            } else if let Topology::DragonFly { ugal, .. } = topo.clone() {
                                // min: VC 0 before the global link, 1 from it on; ugal: the
                                // phase (0 to 2).
                                let top = if ugal { 2 } else { 1 };
                                assert!(r.vc_lo == r.vc_hi && r.vc_hi <= top, "{s}->{d}");
                            } else if let (
                                Topology::FlatFly { xy_yx: true, .. }
                                | Topology::FlatFly { valiant: true, .. }
                                | Topology::CMesh { xy_yx: true, .. }
                                | Topology::MeshTwoPhase { .. },
                                false,
                            ) = (topo.clone(), at_dest(router))
                            {
                                // As xy_yx on the mesh: one VC per order class.
                                assert_eq!(r.vc_lo, r.vc_hi, "{s}->{d}");
                            } else if let (Topology::MeshXyYx { .. }, true) =
                                (topo.clone(), router as usize != d)
                            {
                                // One VC per order class.
                                assert_eq!(r.vc_lo, r.vc_hi, "{s}->{d}");
                            } else if let (Topology::MeshMinAdapt { n, .. }, true) =
                                (topo.clone(), router as usize != d)
                            {
                                // Off the escape VC: VC 1 first, the escape VC 0 at the same
                                // (dimension-order) output as a fallback; on the escape VC
                                // (not from the terminal, which counts as the last VC), only
                                // the escape VC.
                                assert_eq!((r.vc_lo, r.vc_hi), (1, 1), "{s}->{d}");
                                assert_eq!(r.alt(), Some((r.port, 0, 0)), "{s}->{d}");
                                let mut on_escape = f;
                                on_escape.vc = 0;
                                let e = rt.route(router, port as usize, &on_escape);
                                if port != 2 * n {
                                    assert_eq!(e, Route::new(r.port, 0, 0), "{s}->{d}");
                                } else {
                                    assert_eq!(e, r, "{s}->{d}");
                                }
                            } else {
                                assert_eq!((r.vc_lo, r.vc_hi), (0, 1), "{topo:?} {s}->{d}");
                            }
                            c = w.router_out[router as usize][r.port as usize] as usize;
                            // The next hop sees the flit on a VC of its route (its class).
                            f.vc = r.vc_lo;
                            assert_eq!(
                                w.src[c],
                                End::Router {
                                    router,
                                    port: r.port as u32
                                }
                            );
                            hops += 1;
                            assert!(hops <= 40, "{topo:?} {s}->{d}");
                        }
                    }
                }
                if let Topology::MeshTwoPhase { k, n, romm, .. } = topo.clone() {
                    // Through the intermediate router, in phase 1 at the end; ROMM's stays
                    // inside the minimal quadrant, so its route is a minimal one.
                    let im = (intm[0] & !PHASE_1) as usize;
                    assert!(intm[0] & PHASE_1 != 0, "{topo:?} {s}->{d}");
                    assert_eq!(
                        hops,
                        w.hops_via(s, intm[0], d),
                        "{topo:?} {s}->{d} via {im}"
                    );
                    if romm {
                        assert_eq!(hops, kncube_hops(k, n, s, d, false), "{s}->{d} via {im}");
                    }
                } else {
                    assert_eq!(hops, w.hops_via(s, intm[0], d), "{topo:?} {s}->{d}");
                }
            }
        }
    }

    fn anynet(text: &str) -> Topology {
        Topology::AnyNet(std::sync::Arc::new(
            super::super::anynet::AnyNet::parse(text).unwrap(),
        ))
    }

    const ANYNET_TREE: &str = include_str!("../../tests/data/booksim/sweep/anynet_tree.net");
    const ANYNET_K4: &str = include_str!("../../tests/data/booksim/sweep/anynet_k4.net");

    /// anynet: ports, channels and latencies as BookSim builds them, and every route as short
    /// (in channel latency) as any path between its routers.
    #[test]
    fn anynet_wiring_and_shortest_routes() {
        let topo = anynet(ANYNET_K4);
        let (w, routers) = build(topo.clone(), 1, &base()).unwrap();
        assert_eq!((w.nodes, routers.len()), (8, 4));
        assert!(w.terminal_latency);
        // Router 0: terminals 0 and 1 on ports 0 and 1, then routers 1, 2, 3.
        let to = |r: usize, p: usize| w.dst[w.router_out[r][p] as usize];
        assert_eq!(to(0, 0), End::Node(0));
        assert_eq!(to(0, 4), End::Router { router: 3, port: 2 });
        assert_eq!(w.latency[w.router_out[0][4] as usize], 5);
        assert_eq!(w.latency[w.router_out[3][2] as usize], 1);
        // Router 3's inputs: its terminals 6 and 7, then routers 0, 1, 2 by number.
        let from = |r: usize, p: usize| w.src[w.router_in[r][p] as usize];
        assert_eq!(from(3, 1), End::Node(7));
        for (p, r) in [(2, 0), (3, 1), (4, 2)] {
            assert!(matches!(from(3, p), End::Router { router, .. } if router == r));
        }
        // Terminal 2 (router 2's first terminal) on 2-cycle channels both ways.
        assert_eq!(w.dst[w.inject(2)], End::Router { router: 2, port: 0 });
        assert_eq!((w.latency[w.inject(2)], w.latency[w.eject(2)]), (2, 2));
        assert_eq!(w.latency[w.inject(3)], 1);
        for text in [ANYNET_K4, ANYNET_TREE] {
            let topo = anynet(text);
            let (w, routers) = build(topo.clone(), 1, &base()).unwrap();
            let n = routers.len();
            // Floyd-Warshall over the router channels.
            let mut dist = vec![vec![u64::MAX / 4; n]; n];
            for (r, row) in dist.iter_mut().enumerate() {
                row[r] = 0;
            }
            for c in 2 * w.nodes..w.src.len() {
                if let (End::Router { router: a, .. }, End::Router { router: b, .. }) =
                    (w.src[c], w.dst[c])
                {
                    let l = u64::from(w.latency[c]);
                    let e = &mut dist[a as usize][b as usize];
                    *e = (*e).min(l);
                }
            }
            for m in 0..n {
                for a in 0..n {
                    for b in 0..n {
                        dist[a][b] = dist[a][b].min(dist[a][m] + dist[m][b]);
                    }
                }
            }
            let Topology::AnyNet(net) = &topo else {
                unreachable!()
            };
            for s in 0..w.nodes {
                for d in 0..w.nodes {
                    let (mut r, mut total) = (net.router_of[s] as usize, 0);
                    loop {
                        let c = w.router_out[r][w.port_for(r as u32, d).unwrap()] as usize;
                        match w.dst[c] {
                            End::Node(t) => {
                                assert_eq!(t as usize, d);
                                break;
                            }
                            End::Router { router, .. } => {
                                total += u64::from(w.latency[c]);
                                r = router as usize;
                            }
                        }
                    }
                    let want = dist[net.router_of[s] as usize][net.router_of[d] as usize];
                    assert_eq!(total, want, "{s} -> {d}");
                }
            }
        }
    }

    /// flatfly with use_noc_latency: BookSim's client distances (xr = 4 worked by hand from
    /// `flatfly_onchip.cpp`), 1 up to xr = 3, and terminal numbers across the layout.
    #[test]
    fn flatfly_terminal_channel_latencies() {
        let lat: Vec<u32> = flatfly_terminal_latencies(4, 1, 1)
            .map(|(_, l)| l)
            .collect();
        assert_eq!(lat, [3, 2, 2, 3, 2, 1, 1, 2, 2, 1, 1, 2, 3, 2, 2, 3]);
        let five: Vec<u32> = flatfly_terminal_latencies(5, 1, 1)
            .map(|(_, l)| l)
            .collect();
        let edge = |i: usize| u32::from(i == 0 || i == 4);
        for (i, &l) in five.iter().enumerate() {
            assert_eq!(l, 1 + edge(i % 5) + edge(i / 5), "client {i}");
        }
        for xr in 1..=3 {
            assert!(flatfly_terminal_latencies(xr, 2, 4).all(|(_, l)| l == 1));
        }
        // Every terminal once, on the router flatfly_terminal places it at.
        let (xr, x, routers) = (4, 2, 4);
        let mut seen = vec![false; routers * xr * xr];
        for (r, chunk) in (0..routers).zip(
            flatfly_terminal_latencies(xr, x, routers)
                .collect::<Vec<_>>()
                .chunks(xr * xr),
        ) {
            for &(t, _) in chunk {
                assert_eq!(flatfly_terminal(xr, x, t).0, r);
                assert!(!std::mem::replace(&mut seen[t], true));
            }
        }
        let topo = Topology::FlatFly {
            k: 2,
            n: 2,
            xr: 4,
            x: 2,
            xy_yx: false,
            adaptive: false,
            valiant: false,
            noc: true,
        };
        let (w, _) = build(topo, 1, &base()).unwrap();
        assert!(w.terminal_latency);
        assert_eq!(w.latency[w.inject(0)], 3);
        assert_eq!(w.latency[w.eject(0)], 3);
    }

    /// `adaptive_xy_yx` and `adaptive_xyyx` choose the order at the first router by the two
    /// outputs' downstream occupancy, drawing only on a tie; later routers read the order
    /// from the VC as the oblivious versions do.
    #[test]
    fn adaptive_orders_follow_occupancy() {
        let mesh = Topology::MeshXyYx {
            k: 4,
            n: 2,
            adaptive: true,
        };
        let flat = Topology::FlatFly {
            k: 4,
            n: 2,
            xr: 1,
            x: 4,
            xy_yx: true,
            adaptive: true,
            valiant: false,
            noc: false,
        };
        // From router 0 to terminal 5 (router 5: one step in each dimension). Mesh: XY leaves
        // on port 0 (+x), YX on port 2 (+y); flatfly (1 terminal port): XY on port 1 (to
        // router 1), YX on port 4 (to router 4).
        for (topo, inject, xy_port, yx_port) in [(mesh, 4, 0u16, 2u16), (flat, 0, 1, 4)] {
            let (w, _) = build(topo.clone(), 1, &base()).unwrap();
            let packets = [Packet::from_source(0)];
            let f = Flit::new(0, 5, true, true);
            let mut rng = KnuthInt::new(7);
            for (occ_xy, occ_yx, want) in [(1, 3, Some(xy_port)), (3, 1, Some(yx_port))] {
                let used = |o: usize| {
                    if o == usize::from(xy_port) {
                        occ_xy
                    } else if o == usize::from(yx_port) {
                        occ_yx
                    } else {
                        0
                    }
                };
                let before = rng.clone();
                let mut rt = routing(&w, &mut rng, &packets, &mut []);
                let r = rt.route_reading(0, inject, &f, &used);
                assert_eq!(Some(r.port), want, "{topo:?} {occ_xy} {occ_yx}");
                // No draw unless tied.
                assert_eq!(rng.clone().int(1000), before.clone().int(1000));
            }
            // A tie draws, as the oblivious version always does.
            let mut tied = rng.clone();
            let mut rt = routing(&w, &mut rng, &packets, &mut []);
            let r = rt.route_reading(0, inject, &f, &|_| 2);
            let want = if tied.int(1) > 0 { xy_port } else { yx_port };
            assert_eq!(r.port, want, "{topo:?} tie");
        }
    }

    /// UGAL on the dragonfly: with the minimal output's queue far longer than the
    /// non-minimal one's, a packet to another group goes through the drawn intermediate
    /// terminal's router (phase 0 on VC 0, then phase 1, phase 2 after a global link), and
    /// the hop count follows the path taken; within its group it goes minimally on VC 2.
    #[test]
    fn ugal_routes_through_the_intermediate_router_when_minimal_is_busy() {
        let p = 2;
        let topo = Topology::DragonFly { p, ugal: true };
        let (w, routers) = build(topo, 1, &RouterConfig { vcs: 3, ..base() }).unwrap();
        let mut rng = KnuthInt::new(3);
        let (mut nonmin, mut minimal) = (0, 0);
        for s in 0..w.nodes {
            for d in 0..w.nodes {
                let packets = [Packet::from_source(s as u32)];
                let mut intm = [0u32];
                let f0 = Flit::new(0, d as u32, true, true);
                let (mut c, mut hops, mut first) = (w.inject(s), 0, true);
                let mut vcs = Vec::new();
                while let End::Router { router, port } = w.dst[c] {
                    let mut rt = routing(&w, &mut rng, &packets, &mut intm);
                    let mut f = f0;
                    f.vc = *vcs.last().unwrap_or(&0);
                    // The minimal output (what min routing takes) is congested at the source.
                    let min_out = dragonfly_port(p as usize, router as usize, d);
                    let busy = |o: usize| if first && o == min_out { 1000 } else { 0 };
                    let r = rt.route_reading(router, port as usize, &f, &busy);
                    first = false;
                    assert_eq!(r.vc_lo, r.vc_hi);
                    vcs.push(r.vc_lo);
                    c = w.router_out[router as usize][r.port as usize] as usize;
                    hops += 1;
                    assert!(hops < assert_limit(routers.len()), "{s}->{d}");
                }
                assert_eq!(w.dst[c], End::Node(d as u32), "{s}->{d}");
                assert_eq!(hops, w.hops_via(s, intm[0], d), "{s}->{d}");
                let same_group =
                    s / (2 * p as usize * p as usize) == d / (2 * p as usize * p as usize);
                if same_group {
                    assert!(vcs.iter().all(|&v| v == 2), "{s}->{d}: {vcs:?}");
                } else if intm[0] & UGAL_NONMIN != 0 {
                    nonmin += 1;
                    assert_eq!(vcs[0], 0, "{s}->{d}");
                } else {
                    minimal += 1;
                }
                // Phases never go back.
                assert!(vcs.windows(2).all(|v| v[0] <= v[1]), "{s}->{d}: {vcs:?}");
            }
        }
        assert!(
            nonmin > 100 && minimal > 10,
            "{nonmin} non-minimal, {minimal} minimal"
        );
    }

    fn assert_limit(routers: usize) -> u32 {
        routers as u32 + 2
    }

    /// min_adapt on the mesh and the torus, 4 VCs: from every source to every destination,
    /// following either element of every route (the adaptive one while there is one, or the
    /// escape one), the packet arrives by a minimal path. Off the escape VCs the adaptive
    /// element is the mesh's VCs 1-3 or the torus's VC 3, the escape element VC 0 (the
    /// torus: its dateline class, 0 or 1); once on an escape VC a route has no other element.
    #[test]
    fn min_adapt_routes_are_minimal_with_an_escape() {
        let cfg = RouterConfig {
            vcs: 4,
            ..RouterConfig::default()
        };
        let topos = [
            Topology::MeshMinAdapt { k: 4, n: 2 },
            Topology::MeshMinAdapt { k: 3, n: 3 },
            Topology::Torus {
                k: 4,
                n: 2,
                balanced: false,
                adaptive: true,
                ni: false,
            },
            Topology::Torus {
                k: 5,
                n: 2,
                balanced: false,
                adaptive: true,
                ni: false,
            },
            Topology::Torus {
                k: 2,
                n: 3,
                balanced: false,
                adaptive: true,
                ni: false,
            },
        ];
        for topo in topos {
            let torus = matches!(topo, Topology::Torus { .. });
            let (k, n) = topo.k_n();
            let (w, _) = build(topo.clone(), 1, &cfg).unwrap();
            let mut rng = KnuthInt::new(7);
            for s in 0..w.nodes {
                for d in 0..w.nodes {
                    for escape_at in [usize::MAX, 0, 1, 2] {
                        let packets = [Packet::from_source(s as u32)];
                        let mut intm = [0u32];
                        let mut rt = routing(&w, &mut rng, &packets, &mut intm);
                        let mut f = Flit::new(0, d as u32, true, true);
                        let mut c = w.inject(s);
                        let (mut hops, mut on_escape) = (0, false);
                        while let End::Router { router, port } = w.dst[c] {
                            let r = rt.route(router, port as usize, &f);
                            let (out, vc) = if router as usize == d {
                                assert_eq!((r.vc_lo, r.vc_hi, r.alt()), (0, 3, None));
                                (r.port, 0)
                            } else if on_escape {
                                assert!(r.alt().is_none() && r.vc_lo == r.vc_hi, "{topo:?}");
                                assert!(r.vc_lo <= u8::from(torus), "{topo:?} {s}->{d}");
                                (r.port, r.vc_lo)
                            } else {
                                let want = if torus { (3, 3) } else { (1, 3) };
                                assert_eq!((r.vc_lo, r.vc_hi), want, "{topo:?} {s}->{d}");
                                let (p, lo, hi) = r.alt().unwrap();
                                assert!(lo == hi && hi <= u8::from(torus), "{topo:?}");
                                if hops == escape_at {
                                    on_escape = true;
                                    (p, lo)
                                } else {
                                    (r.port, r.vc_lo)
                                }
                            };
                            f.vc = vc;
                            c = w.router_out[router as usize][out as usize] as usize;
                            hops += 1;
                            assert!(hops <= 40, "{topo:?} {s}->{d}");
                        }
                        assert_eq!(w.dst[c], End::Node(d as u32), "{topo:?} {s}->{d}");
                        assert_eq!(hops as u32, kncube_hops(k, n, s, d, torus), "{topo:?}");
                    }
                }
            }
        }
    }

    /// planar_adapt on the mesh: dimension order on the VC range's upper third (from the
    /// first VC plus twice a third of the range's size, rounded down), every VC to eject.
    #[test]
    fn planar_adapt_takes_the_upper_third_of_the_vcs() {
        let topo = Topology::MeshPlanarAdapt { k: 3, n: 2 };
        for (vcs, upper) in [(2u8, 0u8), (3, 2), (4, 2), (6, 4), (8, 4), (9, 6)] {
            let cfg = RouterConfig {
                vcs: vcs as usize,
                ..RouterConfig::default()
            };
            let (w, _) = build(topo.clone(), 1, &cfg).unwrap();
            let mut rng = KnuthInt::new(1);
            let packets = [Packet::from_source(0)];
            let mut rt = routing(&w, &mut rng, &packets, &mut []);
            // Router 0 to terminal 5 (digits 2, 1): up in dimension 0 first.
            let f = Flit::new(0, 5, true, true);
            assert_eq!(
                rt.route(0, 4, &f),
                Route::new(0, upper, vcs - 1),
                "{vcs} VCs"
            );
            assert_eq!(
                rt.route(2, 1, &f),
                Route::new(2, upper, vcs - 1),
                "{vcs} VCs"
            );
            assert_eq!(rt.route(5, 2, &f), Route::new(4, 0, vcs - 1), "{vcs} VCs");
        }
    }

    /// The `_ni` / `_pni` routings: dimension order on the destination's slice of the VC
    /// range (`dim_order_ni`: one per terminal; `dim_order_pni`: one per coordinate, the
    /// destination's digit in the dimension being left), every VC to eject; routes arrive by
    /// minimal paths (`romm_ni`'s too: its intermediate router lies in the minimal quadrant).
    #[test]
    fn ni_routes_take_their_destinations_slice() {
        let ni = Topology::MeshNi {
            k: 4,
            n: 2,
            per_coord: false,
        };
        let pni = Topology::MeshNi {
            k: 4,
            n: 2,
            per_coord: true,
        };
        let torus = Topology::Torus {
            k: 3,
            n: 2,
            balanced: false,
            adaptive: false,
            ni: true,
        };
        // (topology, VCs, router, input, destination, route)
        let cases = [
            (ni.clone(), 16, 0, 4, 5, Route::new(0, 5, 5)),
            (ni.clone(), 35, 4, 3, 6, Route::new(0, 12, 13)),
            (ni.clone(), 16, 5, 1, 5, Route::new(4, 0, 15)),
            // Terminal 6 has digits 2 and 1: dimension 0 first (digit 2), then 1 (digit 1).
            (pni.clone(), 8, 0, 4, 6, Route::new(0, 4, 5)),
            (pni.clone(), 8, 2, 1, 6, Route::new(2, 2, 3)),
            (pni.clone(), 9, 2, 1, 6, Route::new(2, 2, 3)),
            (pni.clone(), 8, 6, 3, 6, Route::new(4, 0, 7)),
            // Router 0 to terminal 2 on a 3-ary torus: down (the shorter way), slice 2.
            (torus.clone(), 9, 0, 4, 2, Route::new(1, 2, 2)),
            (torus.clone(), 18, 0, 4, 5, Route::new(1, 10, 11)),
            (torus.clone(), 9, 2, 4, 2, Route::new(4, 0, 8)),
        ];
        for (topo, vcs, router, input, dest, want) in cases {
            let cfg = RouterConfig {
                vcs,
                ..RouterConfig::default()
            };
            let (w, _) = build(topo.clone(), 1, &cfg).unwrap();
            let mut rng = KnuthInt::new(1);
            let packets = [Packet::from_source(0)];
            let mut rt = routing(&w, &mut rng, &packets, &mut []);
            let f = Flit::new(0, dest, true, true);
            assert_eq!(rt.route(router, input, &f), want, "{topo:?} {vcs} VCs");
        }
        let romm_ni = Topology::MeshTwoPhase {
            k: 4,
            n: 2,
            romm: true,
            ni: true,
        };
        for topo in [ni, pni, torus, romm_ni] {
            let cfg = RouterConfig {
                vcs: 16,
                ..RouterConfig::default()
            };
            let (w, _) = build(topo.clone(), 1, &cfg).unwrap();
            let (k, n) = topo.k_n();
            let is_torus = matches!(topo, Topology::Torus { .. });
            let mut rng = KnuthInt::new(3);
            for s in 0..w.nodes {
                for d in 0..w.nodes {
                    let packets = [Packet::from_source(s as u32)];
                    let mut intm = [0u32];
                    let mut rt = routing(&w, &mut rng, &packets, &mut intm);
                    let mut f = Flit::new(0, d as u32, true, true);
                    let (mut c, mut hops) = (w.inject(s), 0);
                    while let End::Router { router, port } = w.dst[c] {
                        let r = rt.route(router, port as usize, &f);
                        if router as usize != d
                            && !matches!(
                                topo,
                                Topology::MeshNi {
                                    per_coord: true,
                                    ..
                                }
                            )
                        {
                            // One VC per destination (16 terminals, 16 VCs).
                            assert_eq!((r.vc_lo, r.vc_hi), (d as u8, d as u8), "{topo:?}");
                        }
                        f.vc = r.vc_lo;
                        c = w.router_out[router as usize][r.port as usize] as usize;
                        hops += 1;
                        assert!(hops <= 20, "{topo:?} {s}->{d}");
                    }
                    assert_eq!(w.dst[c], End::Node(d as u32));
                    assert_eq!(hops, kncube_hops(k, n, s, d, is_torus), "{topo:?}");
                }
            }
        }
    }

    /// `anca_fattree` going up draws two up ports and takes the second only when the
    /// first's downstream buffers hold more flits; down it is `nca`'s route, without draws.
    #[test]
    fn anca_goes_up_by_the_less_occupied_of_two_drawn_ports() {
        let topo = Topology::FatTree {
            k: 4,
            n: 2,
            anca: true,
        };
        let (w, _) = build(topo, 1, &base()).unwrap();
        let packets = [Packet::from_source(0)];
        // Leaf router 4 (the second level's first) serves terminals 0-3: terminal 9 is up.
        let f = Flit::new(0, 9, true, true);
        for seed in 1..40 {
            let mut draws = KnuthInt::new(seed);
            let (a, b) = (4 + draws.int(3) as usize, 4 + draws.int(3) as usize);
            for (busy, want) in [(None, a), (Some(a), b), (Some(b), a)] {
                let mut rng = KnuthInt::new(seed);
                let mut rt = routing(&w, &mut rng, &packets, &mut []);
                let used = |o: usize| u32::from(Some(o) == busy && a != b) * 5;
                let r = rt.route_reading(4, 0, &f, &used);
                assert_eq!(
                    r,
                    Route::new(want as u16, 0, 1),
                    "seed {seed}: {a} {b} {busy:?}"
                );
                // Exactly two draws.
                let mut after = KnuthInt::new(seed);
                for _ in 0..2 {
                    after.int(3);
                }
                assert_eq!(rt.rng.int(1000), after.int(1000));
            }
            // Down to terminal 2 from its leaf: port 2, no draw.
            let mut rng = KnuthInt::new(seed);
            let mut rt = routing(&w, &mut rng, &packets, &mut []);
            let r = rt.route_reading(4, 5, &Flit::new(0, 2, true, true), &|_| 9);
            assert_eq!(r, Route::new(2, 0, 1));
            assert_eq!(rt.rng.int(1000), KnuthInt::new(seed).int(1000));
        }
    }

    #[test]
    fn every_route_arrives() {
        walk(anynet(ANYNET_TREE));
        walk(anynet(ANYNET_K4));
        walk(Topology::Fly { k: 4, n: 1 });
        walk(Topology::Fly { k: 2, n: 3 });
        walk(Topology::Fly { k: 4, n: 2 });
        walk(Topology::Fly { k: 3, n: 3 });
        walk(Topology::FatTree {
            k: 4,
            n: 1,
            anca: false,
        });
        walk(Topology::FatTree {
            k: 2,
            n: 3,
            anca: false,
        });
        walk(Topology::FatTree {
            k: 4,
            n: 2,
            anca: false,
        });
        walk(Topology::FatTree {
            k: 3,
            n: 3,
            anca: false,
        });
        walk(Topology::FatTree {
            k: 4,
            n: 2,
            anca: true,
        });
        walk(Topology::Mesh { k: 4, n: 2 });
        walk(Topology::Mesh { k: 3, n: 3 });
        walk(Topology::Mesh { k: 5, n: 1 });
        walk(Topology::MeshMinAdapt { k: 4, n: 2 });
        walk(Topology::MeshPlanarAdapt { k: 4, n: 2 });
        walk(Topology::MeshMinAdapt { k: 3, n: 3 });
        walk(Topology::QTree { k: 4, n: 3 });
        walk(Topology::Tree4 { anca: false });
        walk(Topology::Tree4 { anca: true });
        walk(Topology::MeshXyYx {
            k: 4,
            n: 2,
            adaptive: false,
        });
        walk(Topology::DragonFly { p: 1, ugal: false });
        walk(Topology::DragonFly { p: 2, ugal: false });
        walk(Topology::DragonFly { p: 2, ugal: true });
        walk(Topology::MeshXyYx {
            k: 3,
            n: 3,
            adaptive: false,
        });
        walk(Topology::MeshXyYx {
            k: 4,
            n: 2,
            adaptive: true,
        });
        for romm in [false, true] {
            for (k, n) in [(4, 2), (3, 3), (5, 1)] {
                walk(Topology::MeshTwoPhase {
                    k,
                    n,
                    romm,
                    ni: false,
                });
            }
        }
        for (k, n) in [(4, 2), (5, 2), (2, 3), (3, 1), (6, 1)] {
            for (balanced, adaptive) in [(false, false), (true, false), (false, true)] {
                walk(Topology::Torus {
                    k,
                    n,
                    balanced,
                    adaptive,
                    ni: false,
                });
            }
        }
        for (k, express) in [
            (2, true),
            (4, true),
            (4, false),
            (6, true),
            (8, true),
            (8, false),
        ] {
            // (xy_yx with express channels is refused from k = 6 on: its routes loop.)
            for xy_yx in [false, true]
                .into_iter()
                .filter(|&x| !(x && express && k > 4))
            {
                walk(Topology::CMesh {
                    k,
                    noc: true,
                    express,
                    xy_yx,
                });
            }
        }
        for (k, n, xr, x) in [
            (4, 2, 2, 4),
            (4, 2, 2, 8),
            (2, 3, 1, 2),
            (3, 2, 3, 3),
            (2, 4, 2, 4),
            (5, 1, 1, 5),
            (1, 2, 2, 1),
        ] {
            for (xy_yx, valiant) in [(false, false), (true, false), (false, true)] {
                walk(Topology::FlatFly {
                    k,
                    n,
                    xr,
                    x,
                    xy_yx,
                    adaptive: false,
                    valiant,
                    noc: true,
                });
            }
        }
    }

    /// qtree.cpp's and tree4.cpp's wiring, channel by channel as BookSim numbers them.
    #[test]
    fn tree_wiring() {
        let router = |w: &Wiring, c: usize| match w.dst[c] {
            End::Router { router, port } => (router, port),
            End::Node(n) => panic!("channel {c} ends at terminal {n}"),
        };
        let (w, routers) = build(Topology::QTree { k: 4, n: 3 }, 1, &base()).unwrap();
        assert_eq!((w.nodes, routers.len()), (64, 21));
        assert_eq!(routers[0].inputs(), 4);
        assert!(routers[1..].iter().all(|r| r.inputs() == 5));
        // Terminal 37 on leaf 9 (router 5 + 9), port 1; the leaf's parent is height-1 router
        // 2 (index 3), its port 1; up channels are numbered from 0 by child index - 1, down
        // ones 20 later.
        assert_eq!(router(&w, w.inject(37)), (14, 1));
        assert_eq!(w.router_out[14][4] as usize, 2 * 64 + 13);
        assert_eq!(router(&w, 2 * 64 + 13), (3, 1));
        assert_eq!(w.router_out[3][1] as usize, 2 * 64 + 13 + 20);
        assert_eq!(router(&w, 2 * 64 + 13 + 20), (14, 4));
        assert_eq!(router(&w, 2 * 64 + 2), (0, 2));
        // nca: up from leaf 9 for terminal 0, down at the root towards its subtree.
        assert_eq!(w.port_for(14, 0), Some(4));
        assert_eq!(w.port_for(0, 37), Some(2));
        assert_eq!(w.port_for(14, 37), Some(1));

        let (w, routers) = build(Topology::Tree4 { anca: false }, 1, &base()).unwrap();
        assert_eq!((w.nodes, routers.len()), (64, 28));
        // Leaf 9 (router 21) serves terminals 36..40 and hangs off middle routers 4 and 5
        // (routers 8, 9), whose ports to it are 1; top router 2's port 5 goes to middle
        // router 5, whose port 4 + 2 goes back up.
        assert_eq!(router(&w, w.inject(37)), (21, 1));
        let up = w.router_out[21][5] as usize;
        assert_eq!((up, router(&w, up)), (2 * 64 + 2 * (5 * 4 + 1) + 1, (9, 1)));
        let down = w.router_out[2][5] as usize;
        assert_eq!(
            (down, router(&w, down)),
            (2 * 64 + 64 + 2 * (2 * 8 + 5), (9, 6))
        );
        assert_eq!(router(&w, w.router_out[9][6] as usize), (2, 5));
    }

    /// flatfly_onchip.cpp's wiring on 4 x 4 routers of 4 terminals, laid out 4 to a row:
    /// terminals numbered across the layout's rows, router r's output to the router with
    /// digit j in dimension d on port c + 3 d + (j, skipping r's own digit) and channel
    /// 2 nodes + 6 r + 3 d + that index, inputs in the order BookSim adds them (by sending
    /// router), and the layout latencies (xr = 2 cycles per router of distance).
    #[test]
    fn flatfly_wiring() {
        let topo = Topology::FlatFly {
            k: 4,
            n: 2,
            xr: 2,
            x: 4,
            xy_yx: false,
            adaptive: false,
            valiant: false,
            noc: true,
        };
        let (w, routers) = build(topo, 1, &base()).unwrap();
        assert_eq!((w.nodes, routers.len()), (64, 16));
        assert!(routers.iter().all(|r| r.inputs() == 10));
        // Terminals 0, 1, 8, 9 share router 0 (ports 0, 1, 2, 3); 2 is on router 1; 16 on
        // router 4 (the second row of routers).
        for (t, r, p) in [
            (0, 0, 0),
            (1, 0, 1),
            (8, 0, 2),
            (9, 0, 3),
            (2, 1, 0),
            (16, 4, 0),
        ] {
            let want = End::Router { router: r, port: p };
            assert_eq!(w.dst[w.inject(t)], want, "terminal {t}");
            assert_eq!(w.src[w.eject(t)], want, "terminal {t}");
        }
        let link = |i: usize| 2 * 64 + i;
        // Router 5 = (1, 1): in dimension 0 to routers 4, 6, 7; in dimension 1 to 1, 9, 13.
        for (i, to) in [4, 6, 7, 1, 9, 13].into_iter().enumerate() {
            let ch = w.router_out[5][4 + i] as usize;
            assert_eq!(ch, link(6 * 5 + i));
            assert!(matches!(w.dst[ch], End::Router { router, .. } if router as usize == to));
            let (dx, dy) = ((to % 4usize).abs_diff(1), (to / 4usize).abs_diff(1));
            assert_eq!(w.latency[ch] as usize, 2 * (dx + dy), "5 -> {to}");
        }
        // Router 5's inputs after its terminals: from routers 1, 4, 6, 7, 9, 13 in that order.
        for (i, from) in [1, 4, 6, 7, 9, 13].into_iter().enumerate() {
            let ch = w.router_in[5][4 + i] as usize;
            assert!(matches!(w.src[ch], End::Router { router, .. } if router as usize == from));
        }
        // min_flatfly from router 5 to terminal 63 (router 15 = (3, 3)): X first, to router 7.
        assert_eq!(w.port_for(5, 63), Some(4 + 2));
        assert_eq!(w.port_for(15, 63), Some(3));
        // Without use_noc_latency every channel takes a cycle.
        let unit = Topology::FlatFly {
            k: 4,
            n: 2,
            xr: 2,
            x: 4,
            xy_yx: false,
            adaptive: false,
            valiant: false,
            noc: false,
        };
        let (w, _) = build(unit, 1, &base()).unwrap();
        assert_eq!(w.max_latency(), 1);
    }

    /// cmesh.cpp's wiring, channel by channel as BookSim numbers them: `px_in` of router
    /// (x, y) is `nx_out` of (x + 1, y), or on the right edge `px_out` of (k - 1, y +- k/2);
    /// likewise for the other sides; terminal t's router and port; the layout latencies.
    #[test]
    fn cmesh_wiring() {
        let k = 4usize;
        let topo = Topology::CMesh {
            k: k as u32,
            noc: true,
            express: true,
            xy_yx: false,
        };
        let (w, routers) = build(topo, 1, &base()).unwrap();
        assert_eq!((w.nodes, routers.len()), (64, 16));
        let off = k * k;
        let chan = |bs: usize| 2 * w.nodes + bs;
        for node in 0..off {
            let (x, y) = (node % k, node / k);
            let h = |v: usize| if v < k / 2 { v + k / 2 } else { v - k / 2 };
            // BookSim's px_in, nx_in, py_in, ny_in.
            let px_in = if x == k - 1 {
                k * h(y) + x
            } else {
                k * y + x + 1 + off
            };
            let nx_in = if x == 0 {
                k * h(y) + x + off
            } else {
                k * y + x - 1
            };
            let py_in = if y == k - 1 {
                k * y + h(x) + 2 * off
            } else {
                k * (y + 1) + x + 3 * off
            };
            let ny_in = if y == 0 {
                h(x) + 3 * off
            } else {
                k * (y - 1) + x + 2 * off
            };
            for (port, bs) in [px_in, nx_in, py_in, ny_in].into_iter().enumerate() {
                assert_eq!(
                    w.router_in[node][4 + port] as usize,
                    chan(bs),
                    "{node} in {port}"
                );
            }
            for dir in 0..4 {
                let c = w.router_out[node][4 + dir] as usize;
                assert_eq!(c, chan(k * y + x + dir * off));
                let edge = [x == k - 1, x == 0, y == k - 1, y == 0][dir];
                assert_eq!(w.latency[c], if edge { k as u32 } else { 2 });
            }
        }
        // Terminal 2k + 3 is in the second row of the 2k x 2k grid, column 3: router 1, port 3.
        assert_eq!(
            w.dst[w.inject(2 * k + 3)],
            End::Router { router: 1, port: 3 }
        );
        assert_eq!(
            w.src[w.eject(2 * k + 3)],
            End::Router { router: 1, port: 3 }
        );
        assert!(w.latency[..2 * w.nodes].iter().all(|&l| l == 1));
    }

    /// kncube.cpp's ports: output 2d goes up dimension d (wrapping) into the neighbour's
    /// input 2d + 1, output 2d + 1 down into input 2d; port 2n is the terminal's.
    #[test]
    fn kncube_ports() {
        for topo in [
            Topology::Mesh { k: 4, n: 2 },
            Topology::Torus {
                k: 3,
                n: 3,
                balanced: false,
                adaptive: false,
                ni: false,
            },
        ] {
            let (w, _) = build(topo.clone(), 2, &base()).unwrap();
            let (k, n) = topo.k_n();
            let (k, n) = (k as usize, n as usize);
            for node in 0..w.nodes {
                assert_eq!(
                    w.dst[w.inject(node)],
                    End::Router {
                        router: node as u32,
                        port: 2 * n as u32
                    }
                );
                assert_eq!(
                    w.src[w.eject(node)],
                    End::Router {
                        router: node as u32,
                        port: 2 * n as u32
                    }
                );
                let mut step = 1;
                for dim in 0..n {
                    let digit = (node / step) % k;
                    let up = node - digit * step + ((digit + 1) % k) * step;
                    let down = node - digit * step + ((digit + k - 1) % k) * step;
                    for (port, to, in_port) in
                        [(2 * dim, up, 2 * dim + 1), (2 * dim + 1, down, 2 * dim)]
                    {
                        let c = w.router_out[node][port] as usize;
                        assert!(w.is_link(c));
                        assert_eq!(
                            w.dst[c],
                            End::Router {
                                router: to as u32,
                                port: in_port as u32
                            },
                            "{topo:?} {node} {port}"
                        );
                    }
                    step *= k;
                }
            }
        }
    }

    #[test]
    fn mixed_latencies_share_the_arrival_slot() {
        // Latency 2 (the maximum) sent in cycle 10 and latency 1 sent in cycle 11 both arrive
        // in cycle 13; latency 2 sent in cycle 11, in cycle 14.
        let mut ch: Channels<u32> = Channels::new(2, 2);
        let s10 = ch.slot(10);
        ch.send(s10, 1, 7);
        assert_eq!(ch.slot_after(10, 2), s10);
        ch.send(ch.slot_after(11, 1), 2, 8);
        ch.send(ch.slot_after(11, 2), 3, 9);
        assert!(ch.take(ch.slot(12)).is_empty());
        let s13 = ch.slot(13);
        assert_eq!(ch.take(s13), vec![(1, 7), (2, 8)]);
        assert_eq!(ch.take(ch.slot(14)), vec![(3, 9)]);
    }

    #[test]
    fn channels_deliver_latency_plus_one_later() {
        let mut ch: Channels<u32> = Channels::new(2, 1);
        let s10 = ch.slot(10);
        let l = ch.take(s10);
        ch.restore(s10, l);
        ch.send(s10, 1, 7);
        let s11 = ch.slot(11);
        assert!(ch.take(s11).is_empty());
        let s12 = ch.slot(12);
        assert_eq!(ch.take(s12), vec![(1, 7)]);
        assert!(ch.is_empty());
    }
}
