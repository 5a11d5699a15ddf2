//! The fabric built from a pod file: switches, their ports and what each port attaches to,
//! accelerator ports, links and route tables (`spec-notes/simulator.md#topologies`).
//!
//! The same structure feeds the simulator, `podlink-sim verify` and `podlink-sim export`
//! (the switch configuration), so one description both simulates and deploys.

use super::config::{PodFile, Topology};

/// Most egress ways one route may list: the switch firmware's table width
/// (`podlink_switch::MAX_WAYS`), so every route the simulator uses can be deployed.
pub const MAX_ROUTE_WAYS: usize = podlink_switch::MAX_WAYS;

/// At most [`MAX_ROUTE_WAYS`] of `ways` for destination `d`: a window that rotates with `d`, so
/// that with more uplinks than a route can list, destinations still spread over all of them.
fn spread_ways(ways: &[u32], d: u32) -> Vec<u32> {
    if ways.len() <= MAX_ROUTE_WAYS {
        return ways.to_vec();
    }
    let start = (d as usize * MAX_ROUTE_WAYS) % ways.len();
    (0..MAX_ROUTE_WAYS)
        .map(|k| ways[(start + k) % ways.len()])
        .collect()
}

/// What the far end of a switch port is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Attach {
    /// Port `port` of accelerator `accel`.
    Accel {
        /// Accelerator ID.
        accel: u32,
        /// The accelerator's port index.
        port: u32,
    },
    /// Port `port` of switch `switch`.
    Switch {
        /// Switch index.
        switch: u32,
        /// Its port.
        port: u32,
    },
}

/// One switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchNode {
    /// Human name ("plane 2", "leaf 5", "spine 0").
    pub name: String,
    /// What each port attaches to.
    pub ports: Vec<Attach>,
    /// For each destination accelerator, the egress ports that reach it (empty: no route).
    pub routes: Vec<Vec<u32>>,
}

/// The whole fabric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fabric {
    /// Accelerator count.
    pub accels: u32,
    /// Switches.
    pub switches: Vec<SwitchNode>,
    /// For each accelerator, its ports as (switch, switch port).
    pub accel_ports: Vec<Vec<(u32, u32)>>,
    /// Partition of each accelerator.
    pub partition_of: Vec<u16>,
}

impl Fabric {
    /// Build the fabric of a (validated) pod file.
    pub fn build(pod: &PodFile) -> Fabric {
        let n = pod.accelerators();
        let mut f = Fabric {
            accels: n,
            switches: Vec::new(),
            accel_ports: vec![Vec::new(); n as usize],
            partition_of: vec![0; n as usize],
        };
        let new_switch = |name: String| SwitchNode {
            name,
            ports: Vec::new(),
            routes: vec![Vec::new(); n as usize],
        };
        match pod.topology {
            Topology::SingleSwitch {
                ports_per_accel, ..
            } => {
                f.switches.push(new_switch("switch 0".into()));
                for a in 0..n {
                    for k in 0..ports_per_accel {
                        f.attach_accel(0, a, k);
                    }
                }
            }
            Topology::MultiPlane {
                planes,
                ports_per_plane,
                ..
            } => {
                for p in 0..planes {
                    f.switches.push(new_switch(format!("plane {p}")));
                    for a in 0..n {
                        for k in 0..ports_per_plane {
                            f.attach_accel(p, a, p * ports_per_plane + k);
                        }
                    }
                }
            }
            Topology::LeafSpine {
                leaves,
                spines,
                accels_per_leaf,
                uplinks_per_spine,
            } => {
                for l in 0..leaves {
                    f.switches.push(new_switch(format!("leaf {l}")));
                    for i in 0..accels_per_leaf {
                        f.attach_accel(l, l * accels_per_leaf + i, 0);
                    }
                }
                for s in 0..spines {
                    f.switches.push(new_switch(format!("spine {s}")));
                }
                for l in 0..leaves {
                    for s in 0..spines {
                        for _ in 0..uplinks_per_spine {
                            let sw = leaves + s;
                            let lp = f.switches[l as usize].ports.len() as u32;
                            let sp = f.switches[sw as usize].ports.len() as u32;
                            f.switches[l as usize].ports.push(Attach::Switch {
                                switch: sw,
                                port: sp,
                            });
                            f.switches[sw as usize].ports.push(Attach::Switch {
                                switch: l,
                                port: lp,
                            });
                        }
                    }
                }
                // Routes: a leaf sends local destinations down, everything else up every uplink;
                // a spine sends each destination down every link to its leaf.
                for l in 0..leaves {
                    let sw = &mut f.switches[l as usize];
                    let up: Vec<u32> = (accels_per_leaf..sw.ports.len() as u32).collect();
                    for d in 0..n {
                        sw.routes[d as usize] = if d / accels_per_leaf == l {
                            vec![d % accels_per_leaf]
                        } else {
                            spread_ways(&up, d)
                        };
                    }
                }
                for s in 0..spines {
                    let sw = &mut f.switches[(leaves + s) as usize];
                    for d in 0..n {
                        let leaf = d / accels_per_leaf;
                        let down: Vec<u32> = sw
                            .ports
                            .iter()
                            .enumerate()
                            .filter(|(_, a)| matches!(a, Attach::Switch { switch, .. } if *switch == leaf))
                            .map(|(i, _)| i as u32)
                            .collect();
                        sw.routes[d as usize] = spread_ways(&down, d);
                    }
                }
            }
        }
        for r in &pod.routes {
            if let (Some(sw), Ok(dests)) = (
                f.switches.get_mut(r.switch as usize),
                super::config::parse_ranges(&r.dest, n),
            ) {
                for d in dests {
                    if let Some(route) = sw.routes.get_mut(d as usize) {
                        *route = r.ports.clone();
                    }
                }
            }
        }
        for (pid, p) in pod.partitions.iter().enumerate() {
            let _ = pid;
            if let Ok(members) = super::config::parse_ranges(&p.accelerators, n) {
                for a in members {
                    f.partition_of[a as usize] = p.id;
                }
            }
        }
        f
    }

    /// Attach accelerator `a`'s port `k` to a new port of switch `sw`, with its route.
    fn attach_accel(&mut self, sw: u32, a: u32, k: u32) {
        let s = &mut self.switches[sw as usize];
        let port = s.ports.len() as u32;
        s.ports.push(Attach::Accel { accel: a, port: k });
        s.routes[a as usize].push(port);
        let ap = &mut self.accel_ports[a as usize];
        if ap.len() <= k as usize {
            ap.resize(k as usize + 1, (u32::MAX, u32::MAX));
        }
        ap[k as usize] = (sw, port);
    }

    /// The read the zero-load trace makes (`spec-notes/simulator.md#breakdown`), as
    /// (source, destination, switch hops): from accelerator 0 (or, when it has no peer, the
    /// lowest accelerator that has one) to its farthest peer, the lowest ID among equals. A
    /// peer is another accelerator of the same partition with a route to it: a read across
    /// partitions is dropped by the switches' isolation, and would fail. `None` when no
    /// accelerator has a peer.
    pub fn probe_pair(&self) -> Option<(u32, u32, u32)> {
        (0..self.accels).find_map(|s| {
            let part = self.partition_of.get(s as usize)?;
            (0..self.accels)
                .filter(|&d| d != s && self.partition_of.get(d as usize) == Some(part))
                .filter_map(|d| self.hops(s, d).map(|h| (s, d, h)))
                .max_by_key(|&(_, d, h)| (h, std::cmp::Reverse(d)))
        })
    }

    /// The most switch hops from a switch an accelerator is attached to, to an accelerator
    /// it has a route to (1 for one tier, 3 for leaf/spine); 1 with no route at all.
    pub fn diameter(&self) -> u32 {
        let mut from: Vec<u32> = self
            .accel_ports
            .iter()
            .flat_map(|p| p.iter().map(|&(sw, _)| sw))
            .collect();
        from.sort_unstable();
        from.dedup();
        from.iter()
            .flat_map(|&sw| (0..self.accels).filter_map(move |d| self.walk(sw, d, 0)))
            .max()
            .unwrap_or(1)
    }

    /// Switch hops on the shortest path from `src` to `dst` (1 for single tier).
    pub fn hops(&self, src: u32, dst: u32) -> Option<u32> {
        let (sw, _) = *self.accel_ports.get(src as usize)?.first()?;
        self.walk(sw, dst, 0)
    }

    fn walk(&self, sw: u32, dst: u32, depth: u32) -> Option<u32> {
        if depth as usize > self.switches.len() {
            return None;
        }
        let s = self.switches.get(sw as usize)?;
        let port = *s.routes.get(dst as usize)?.first()?;
        match s.ports.get(port as usize)? {
            Attach::Accel { accel, .. } if *accel == dst => Some(depth + 1),
            Attach::Accel { .. } => None,
            Attach::Switch { switch, .. } => self.walk(*switch, dst, depth + 1),
        }
    }

    /// Total switch ports.
    pub fn switch_ports(&self) -> usize {
        self.switches.iter().map(|s| s.ports.len()).sum()
    }
}

/// A problem `verify` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteProblem {
    /// No route at a switch for a destination that must be reachable.
    Missing {
        /// Switch.
        switch: u32,
        /// Destination accelerator.
        dest: u32,
    },
    /// Following routes from a switch revisits a switch.
    Loop {
        /// Where the walk started.
        switch: u32,
        /// Destination accelerator.
        dest: u32,
    },
    /// A route points at a port that does not exist or at the wrong accelerator.
    BadPort {
        /// Switch.
        switch: u32,
        /// Destination accelerator.
        dest: u32,
        /// The port.
        port: u32,
    },
}

impl std::fmt::Display for RouteProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RouteProblem::Missing { switch, dest } => {
                write!(f, "switch {switch}: no route to accelerator {dest}")
            }
            RouteProblem::Loop { switch, dest } => {
                write!(f, "switch {switch}: routes to accelerator {dest} loop")
            }
            RouteProblem::BadPort { switch, dest, port } => {
                write!(f, "switch {switch}: route to accelerator {dest} uses port {port}, which does not lead there")
            }
        }
    }
}

/// Check that every switch reaches every destination, through every allowed port, without
/// loops. Per destination this is a cycle search on the graph "switch → next switch" over all
/// allowed ports: O(switches + ports) per destination, whatever the tables hold.
pub fn check_routes(f: &Fabric) -> Vec<RouteProblem> {
    let mut out = Vec::new();
    let ns = f.switches.len();
    let mut next: Vec<Vec<u32>> = vec![Vec::new(); ns];
    let mut color = vec![0u8; ns]; // 0 new, 1 on stack, 2 done
    for d in 0..f.accels {
        for (si, s) in f.switches.iter().enumerate() {
            next[si].clear();
            let ports = s.routes.get(d as usize).map(Vec::as_slice).unwrap_or(&[]);
            if ports.is_empty() {
                out.push(RouteProblem::Missing {
                    switch: si as u32,
                    dest: d,
                });
            }
            for &p in ports {
                match s.ports.get(p as usize) {
                    Some(Attach::Accel { accel, .. }) if *accel == d => {}
                    Some(Attach::Switch { switch, .. }) if (*switch as usize) < ns => {
                        next[si].push(*switch)
                    }
                    _ => out.push(RouteProblem::BadPort {
                        switch: si as u32,
                        dest: d,
                        port: p,
                    }),
                }
            }
        }
        color.iter_mut().for_each(|c| *c = 0);
        for start in 0..ns {
            if color[start] != 0 {
                continue;
            }
            // Iterative DFS: (node, index of the next edge to follow).
            let mut stack = vec![(start, 0usize)];
            color[start] = 1;
            while let Some(&mut (node, ref mut i)) = stack.last_mut() {
                if let Some(&nx) = next[node].get(*i) {
                    *i += 1;
                    let nx = nx as usize;
                    match color[nx] {
                        0 => {
                            color[nx] = 1;
                            stack.push((nx, 0));
                        }
                        1 => {
                            let p = RouteProblem::Loop {
                                switch: nx as u32,
                                dest: d,
                            };
                            if !out.contains(&p) {
                                out.push(p);
                            }
                        }
                        _ => {}
                    }
                } else {
                    color[node] = 2;
                    stack.pop();
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::presets;

    #[test]
    fn presets_route_everywhere() {
        for p in presets::PRESETS {
            if p.name == "ualink-1024" {
                continue; // large; covered by its own shape test below
            }
            let pod = presets::load(p.name).unwrap();
            let f = Fabric::build(&pod);
            assert!(check_routes(&f).is_empty(), "{}", p.name);
        }
    }

    #[test]
    fn shapes() {
        let f = Fabric::build(&presets::load("ualink-64x4").unwrap());
        assert_eq!(f.switches.len(), 4);
        assert_eq!(f.switch_ports(), 256);
        assert_eq!(f.accel_ports[5], vec![(0, 5), (1, 5), (2, 5), (3, 5)]);
        assert_eq!(f.hops(0, 63), Some(1));
        let f = Fabric::build(&presets::load("two-tier-384").unwrap());
        assert_eq!(f.switches.len(), 40);
        assert_eq!(f.hops(0, 1), Some(1));
        assert_eq!(f.hops(0, 383), Some(3));
        let f = Fabric::build(&presets::load("ualink-1024").unwrap());
        assert_eq!(f.switch_ports(), 4096);
    }

    #[test]
    fn the_probe_pair_is_the_farthest_peer_in_the_partition() {
        // No partitions: accelerator 0 and the lowest of the farthest (three switches away).
        let mut f = Fabric::build(&presets::load("two-tier-384").unwrap());
        assert_eq!(f.probe_pair(), Some((0, 16, 3)));
        assert_eq!(f.diameter(), 3);
        let one = Fabric::build(&presets::load("ualink-64x4").unwrap());
        assert_eq!(one.diameter(), 1);
        // Accelerator 0's partition on its own leaf: its farthest peer is a neighbour.
        for a in 0..f.accels {
            f.partition_of[a as usize] = if a < 5 { 1 } else { 2 };
        }
        assert_eq!(f.probe_pair(), Some((0, 1, 1)));
        // A peer of accelerator 0 on another leaf.
        f.partition_of[200] = 1;
        assert_eq!(f.probe_pair(), Some((0, 200, 3)));
        // Accelerator 0 alone in its partition: the lowest accelerator with a peer reads.
        for a in 1..5 {
            f.partition_of[a] = 3;
        }
        f.partition_of[200] = 2;
        assert_eq!(f.probe_pair(), Some((1, 2, 1)));
        // Nobody has a peer.
        for a in 0..f.accels {
            f.partition_of[a as usize] = a as u16;
        }
        assert_eq!(f.probe_pair(), None);
    }

    #[test]
    fn missing_route_and_loop_are_found() {
        let mut f = Fabric::build(&presets::load("two-tier-384").unwrap());
        f.switches[0].routes[200].clear();
        let p = check_routes(&f);
        assert!(
            p.contains(&RouteProblem::Missing {
                switch: 0,
                dest: 200
            }),
            "{p:?}"
        );
        let mut f = Fabric::build(&presets::load("two-tier-384").unwrap());
        // Spine 0 sends accelerator 300 back up to leaf 0, which sends it to spine 0 again.
        let spine = 24;
        let to_leaf0 = f.switches[spine]
            .ports
            .iter()
            .position(|a| matches!(a, Attach::Switch { switch: 0, .. }))
            .unwrap();
        f.switches[spine].routes[300] = vec![to_leaf0 as u32];
        let p = check_routes(&f);
        assert!(
            p.iter()
                .any(|x| matches!(x, RouteProblem::Loop { dest: 300, .. })),
            "{p:?}"
        );
    }
}
