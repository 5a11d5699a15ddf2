//! BookSim's networks built from [`IqRouter`]s: k-ary n-flies and fat trees, their channels,
//! and their routing functions (`dest_tag`, `nca`).
//!
//! Channels are BookSim's: one flit per cycle with a latency of 1 cycle. A value sent in
//! cycle `t` (by a router's write phase, or by a terminal) is received in the read phase of
//! cycle `t + latency + 1`, because BookSim's channel takes its input in the next cycle's read
//! phase and presents it in the write phase `latency` cycles after that. Every flit channel
//! has a credit channel running the other way with the same timing.

use super::config::Topology;
use super::rng::KnuthInt;
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

/// Fixed-latency channels, all of one kind: per arrival slot, the list of deliveries due.
/// Reading a cycle's deliveries costs time proportional to what arrives, not to the number
/// of channels.
pub struct Channels<T: Copy> {
    depth: u64,
    lists: Vec<Vec<(u32, T)>>,
}

impl<T: Copy> Channels<T> {
    /// Channels of `latency` cycles, expecting about `per_cycle` deliveries per cycle.
    pub fn new(per_cycle: usize, latency: usize) -> Self {
        Channels {
            depth: latency as u64 + 1,
            lists: (0..=latency)
                .map(|_| Vec::with_capacity(per_cycle))
                .collect(),
        }
    }

    /// The slot of cycle `t` (compute once per cycle).
    #[inline]
    pub fn slot(&self, t: u64) -> usize {
        (t % self.depth) as usize
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
    /// Routing table: output port of router `r` for destination `d` at `r * nodes + d`,
    /// `UP` for "any up port" (fat tree); empty when too large (computed instead).
    table: Vec<u16>,
}

/// Routing-table entry meaning "a random up port".
const UP: u16 = u16::MAX;

impl Wiring {
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

    /// The output port `dest_tag` / `nca` picks at router `router` for `dest`, or `None` for
    /// "any up port" (fat tree, destination not below this router).
    pub fn port_for(&self, router: u32, dest: usize) -> Option<usize> {
        match self.topology {
            Topology::Fly { k, n } => {
                // dest_tag_fly: the stage's digit of the destination.
                let per_stage = powi(k, n - 1);
                let stage = router as usize / per_stage;
                Some((dest / powi(k, n - 1 - stage as u32)) % k as usize)
            }
            Topology::FatTree { k, n } => {
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
        }
    }

    /// Hops (routers) from `src` to `dest`.
    pub fn hops(&self, src: usize, dest: usize) -> u32 {
        match self.topology {
            Topology::Fly { n, .. } => n,
            Topology::FatTree { k, n } => {
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
        }
    }
}

fn powi(k: u32, e: u32) -> usize {
    (k as usize).pow(e)
}

/// Build the routers and wiring of `topology` with router parameters `base`.
pub fn build(
    topology: Topology,
    base: &RouterConfig,
) -> Result<(Wiring, Vec<IqRouter>), RouterConfigError> {
    let nodes = topology.nodes();
    let (k, n) = match topology {
        Topology::Fly { k, n } | Topology::FatTree { k, n } => (k, n),
    };
    let per_level = powi(k, n - 1);
    let (mut routers, radix_in, radix_out): (Vec<IqRouter>, Vec<usize>, Vec<usize>);
    let internal;
    match topology {
        Topology::Fly { .. } => {
            internal = (n as usize - 1) * nodes;
            radix_in = vec![k as usize; n as usize * per_level];
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
        topology,
        nodes,
        src: vec![unset; chans],
        dst: vec![unset; chans],
        router_in: radix_in.iter().map(|&r| vec![u32::MAX; r]).collect(),
        router_out: radix_out.iter().map(|&r| vec![u32::MAX; r]).collect(),
        vcs: base.vcs as u8,
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
    }
    if let Topology::Fly { .. } = topology {
        // dest_tag routes are a function of the router and destination alone (no random
        // up-link draws, unlike nca), so the routers may use their one-cycle pipeline.
        for r in &mut routers {
            r.set_order_free_routing(true);
        }
    }
    if routers.len() * nodes <= 1 << 22 {
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
}

impl BookSimRouting<'_> {
    /// Route at router `router` (not at injection).
    #[inline]
    pub fn route_at(&mut self, router: u32, in_port: usize, f: &Flit) -> Route {
        let _ = in_port;
        let w = self.wiring;
        let dest = f.dest as usize;
        let entry = if w.table.is_empty() {
            w.port_for(router, dest).map_or(UP, |p| p as u16)
        } else {
            w.table[router as usize * w.nodes + dest]
        };
        let port = if entry == UP {
            // A random up port, drawn when BookSim draws it (route computation).
            let k = match w.topology {
                Topology::Fly { k, .. } | Topology::FatTree { k, .. } => k,
            };
            (k + self.rng.int(k - 1)) as u16
        } else {
            entry
        };
        Route::new(port, 0, w.vcs - 1)
    }
}

impl RoutingFunction for BookSimRouting<'_> {
    #[inline]
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> RouterConfig {
        RouterConfig {
            vcs: 2,
            ..RouterConfig::default()
        }
    }

    /// Follow dest_tag / nca routes from every source to every destination.
    fn walk(topo: Topology) {
        let (w, routers) = build(topo, &base()).unwrap();
        let mut rng = KnuthInt::new(1);
        for s in 0..w.nodes {
            for d in 0..w.nodes {
                let mut rt = BookSimRouting {
                    wiring: &w,
                    rng: &mut rng,
                };
                let f = Flit::new(0, d as u32, true, true);
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
                            c = w.router_out[router as usize][r.port as usize] as usize;
                            assert_eq!(
                                w.src[c],
                                End::Router {
                                    router,
                                    port: r.port as u32
                                }
                            );
                            hops += 1;
                            assert!(hops <= 16);
                        }
                    }
                }
                assert_eq!(hops, w.hops(s, d), "{topo:?} {s}->{d}");
            }
        }
    }

    #[test]
    fn every_route_arrives() {
        walk(Topology::Fly { k: 4, n: 1 });
        walk(Topology::Fly { k: 2, n: 3 });
        walk(Topology::Fly { k: 4, n: 2 });
        walk(Topology::Fly { k: 3, n: 3 });
        walk(Topology::FatTree { k: 4, n: 1 });
        walk(Topology::FatTree { k: 2, n: 3 });
        walk(Topology::FatTree { k: 4, n: 2 });
        walk(Topology::FatTree { k: 3, n: 3 });
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
