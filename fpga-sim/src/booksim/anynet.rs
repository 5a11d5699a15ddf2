//! BookSim's `anynet` topology: a network read from a file (`network_file`), with its
//! `min_anynet` routing (shortest paths by channel latency).
//!
//! The file is read the way BookSim2's `AnyNet::readFile` reads it, quirks included, and the
//! network is then checked for the shapes BookSim2 itself cannot build or route (it asserts,
//! indexes past its arrays or loops forever on them): those are refused with the reason.
//!
//! Each line is `router R` or `node N` followed by items `router R'` / `node N'`, each
//! optionally followed by a latency (cycles). Words are separated by single spaces (BookSim
//! splits on `' '` only) and read with C's `atoi`. What a line does:
//! - `router R ... router R' [L]`: channels R -> R' (latency L, default 1) and, unless one is
//!   already there, R' -> R (latency 1). Mentioning R -> R' again resets its latency to 1.
//! - `router R ... node N`, `node N ... router R`: terminal N on router R (one router per
//!   terminal), injection and ejection channels of latency 1.
//! - A latency is written into the entry of the line's *head* type, keyed by the head and the
//!   last body item: after `router R ... router R'` the channel R -> R'; after `router R ...
//!   node N` a router channel R -> N (BookSim's example 2 in `anynet.cpp` says otherwise,
//!   its code does this); after `node N ... router R` terminal R's channels at router N, which
//!   is terminal N's own only when N = R.
//! - A `node` head also creates a router of the same number (BookSim initialises both maps for
//!   any head).
//!
//! Then, as BookSim builds it: routers in number order, each with its terminals (by number)
//! on ports 0.. and its router channels (by the number of the router they lead to) on the
//! ports after; inputs likewise, router channels by the number of the router they come from;
//! router channels numbered router by router. Routes: for each router, Dijkstra over channel
//! latencies, the lowest-numbered router taken among equals and a distance improved only when
//! strictly shorter, each destination router's terminals reached through the first hop of its
//! path.

use super::config::atoi;
use std::collections::BTreeMap;
use std::fmt;

/// The largest file read (bytes).
pub const MAX_FILE_BYTES: u64 = 16 << 20;
/// The largest router or terminal number accepted (BookSim needs them dense from 0).
pub const MAX_ID: i64 = 1 << 16;
/// The longest channel latency accepted, cycles (the mode keeps one delivery list per cycle
/// of the longest latency).
pub const MAX_LATENCY: i64 = 1 << 12;
/// The most routers accepted (the routes take time cubic in their number).
pub const MAX_ROUTERS: usize = 1 << 10;
/// The most ports of one router accepted.
pub const MAX_RADIX: usize = 1 << 12;
/// The largest routing table accepted (routers x terminals).
pub const MAX_TABLE: usize = 1 << 22;

/// A network file BookSim2 would not build, route or simulate, or this mode does not take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnyNetError {
    /// 1-based line, or 0 for the network as a whole.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for AnyNetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "line {}: {}", self.line, self.message)
        } else {
            f.write_str(&self.message)
        }
    }
}

impl std::error::Error for AnyNetError {}

fn err(line: usize, message: impl Into<String>) -> AnyNetError {
    AnyNetError {
        line,
        message: message.into(),
    }
}

/// A parsed and checked `anynet` network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnyNet {
    /// Terminals of each router with their channel latency, by terminal number.
    pub terminals: Vec<Vec<(u32, u32)>>,
    /// Router channels leaving each router with their latency, by destination router.
    pub links: Vec<Vec<(u32, u32)>>,
    /// Each terminal's router.
    pub router_of: Vec<u32>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Node,
    Router,
}

type Map = BTreeMap<i64, BTreeMap<i64, (i64, i64)>>;

impl AnyNet {
    /// Read a network file's text as BookSim2 does, then check it (see the module notes).
    ///
    /// # Errors
    /// What BookSim2 asserts on, what it cannot build or route, and numbers past this mode's
    /// limits, each with its line where it has one.
    pub fn parse(text: &str) -> Result<AnyNet, AnyNetError> {
        // BookSim's router_list[NODE] (router -> terminal -> (port, latency)) and
        // router_list[ROUTER] (router -> router -> (port, latency)); node_list (terminal ->
        // router).
        let mut lists: [Map; 2] = [Map::new(), Map::new()];
        let mut node_list: BTreeMap<i64, i64> = BTreeMap::new();
        let id = |word: &str, line: usize| -> Result<i64, AnyNetError> {
            match atoi(word) {
                v if (0..MAX_ID).contains(&v) => Ok(v),
                _ => Err(err(
                    line,
                    format!(
                        "`{word}`: router and terminal numbers must be 0 to {} (BookSim needs \
                         them dense from 0)",
                        MAX_ID - 1
                    ),
                )),
            }
        };
        for (i, line) in text.split('\n').enumerate() {
            let ln = i + 1;
            if line.is_empty() {
                continue;
            }
            #[derive(PartialEq)]
            enum St {
                HeadType,
                HeadId,
                BodyType,
                BodyId,
                Weight,
            }
            let mut st = St::HeadType;
            let (mut head, mut head_id, mut body, mut body_id) = (Kind::Node, 0, Kind::Node, 0);
            for word in line.split(' ') {
                if word.is_empty() {
                    continue;
                }
                let kind = match word {
                    "router" => Some(Kind::Router),
                    "node" => Some(Kind::Node),
                    _ => None,
                };
                match st {
                    St::HeadType => {
                        head = kind.ok_or_else(|| {
                            err(ln, format!("unknown head of line type `{word}`"))
                        })?;
                        st = St::HeadId;
                    }
                    St::HeadId => {
                        head_id = id(word, ln)?;
                        lists[0].entry(head_id).or_default();
                        lists[1].entry(head_id).or_default();
                        st = St::BodyType;
                    }
                    St::Weight if kind.is_none() => {
                        let w = atoi(word);
                        let table = if head == Kind::Router { 1 } else { 0 };
                        lists[table]
                            .entry(head_id)
                            .or_default()
                            .entry(body_id)
                            .or_insert((0, 0))
                            .1 = w;
                    }
                    St::BodyType | St::Weight => {
                        body =
                            kind.ok_or_else(|| err(ln, format!("unknown body type `{word}`")))?;
                        st = St::BodyId;
                    }
                    St::BodyId => {
                        body_id = id(word, ln)?;
                        if body == Kind::Router {
                            lists[0].entry(body_id).or_default();
                            lists[1].entry(body_id).or_default();
                        }
                        match (head, body) {
                            (Kind::Node, Kind::Node) => {
                                return Err(err(ln, "a terminal cannot connect to a terminal"))
                            }
                            (Kind::Node, Kind::Router) | (Kind::Router, Kind::Node) => {
                                let (n, r) = if head == Kind::Node {
                                    (head_id, body_id)
                                } else {
                                    (body_id, head_id)
                                };
                                if node_list.get(&n).is_some_and(|&at| at != r) {
                                    return Err(err(
                                        ln,
                                        format!(
                                            "terminal {n} connects to router {r} and to router {}",
                                            node_list[&n]
                                        ),
                                    ));
                                }
                                node_list.insert(n, r);
                                lists[0].entry(r).or_default().insert(n, (-1, 1));
                            }
                            (Kind::Router, Kind::Router) => {
                                lists[1]
                                    .entry(head_id)
                                    .or_default()
                                    .insert(body_id, (-1, 1));
                                lists[1]
                                    .entry(body_id)
                                    .or_default()
                                    .entry(head_id)
                                    .or_insert((-1, 1));
                            }
                        }
                        st = St::Weight;
                    }
                }
            }
        }
        Self::check(&lists, &node_list)
    }

    /// The checks BookSim2's own build and routing need (it fails or hangs otherwise).
    fn check(lists: &[Map; 2], node_list: &BTreeMap<i64, i64>) -> Result<AnyNet, AnyNetError> {
        let routers = lists[1].len();
        if node_list.is_empty() {
            return Err(err(0, "no terminals"));
        }
        for (want, (&r, _)) in lists[1].iter().enumerate() {
            if r != want as i64 {
                return Err(err(
                    0,
                    format!(
                        "routers are numbered with gaps (no router {want}): BookSim2 numbers its \
                         routers 0 to {} and indexes past them",
                        routers - 1
                    ),
                ));
            }
        }
        for (want, (&n, _)) in node_list.iter().enumerate() {
            if n != want as i64 {
                return Err(err(
                    0,
                    format!(
                        "terminals are numbered with gaps (no terminal {want}): BookSim2's \
                         traffic manager asserts they are numbered from 0"
                    ),
                ));
            }
        }
        if routers > MAX_ROUTERS {
            return Err(err(
                0,
                format!("{routers} routers: this mode takes at most {MAX_ROUTERS}"),
            ));
        }
        if routers.saturating_mul(node_list.len()) > MAX_TABLE {
            return Err(err(
                0,
                format!(
                    "{routers} routers x {} terminals: the routing table is limited to {MAX_TABLE} \
                     entries",
                    node_list.len()
                ),
            ));
        }
        let latency = |l: i64, what: &str| -> Result<u32, AnyNetError> {
            if (1..=MAX_LATENCY).contains(&l) {
                Ok(l as u32)
            } else {
                Err(err(
                    0,
                    format!(
                        "{what} has latency {l}: BookSim2's channels need at least 1 cycle, and \
                         this mode takes at most {MAX_LATENCY}"
                    ),
                ))
            }
        };
        let mut terminals = Vec::with_capacity(routers);
        for (&r, ts) in &lists[0] {
            let mut list = Vec::with_capacity(ts.len());
            for (&n, &(_, lat)) in ts {
                if node_list.get(&n) != Some(&r) {
                    return Err(err(
                        0,
                        format!(
                            "router {r} lists terminal {n}, which is not its own (a latency \
                             after `node {r} router {n}` goes to router {r}'s terminal {n} in \
                             BookSim2): BookSim2 would wire terminal {n}'s channels twice or \
                             past its terminals"
                        ),
                    ));
                }
                list.push((n as u32, latency(lat, &format!("terminal {n}'s channel"))?));
            }
            terminals.push(list);
        }
        let mut links = Vec::with_capacity(routers);
        for (&a, outs) in &lists[1] {
            let mut list = Vec::with_capacity(outs.len());
            for (&b, &(_, lat)) in outs {
                if !lists[1].get(&b).is_some_and(|back| back.contains_key(&a)) {
                    return Err(err(
                        0,
                        format!(
                            "router {a} has a channel to {b} and none back (a latency after \
                             `router {a} ... node {b}` makes one in BookSim2): BookSim2's \
                             routers would have more inputs than outputs or a channel to no \
                             router"
                        ),
                    ));
                }
                list.push((b as u32, latency(lat, &format!("channel {a} -> {b}"))?));
            }
            let radix = list.len() + terminals[a as usize].len();
            if radix == 0 {
                return Err(err(0, format!("router {a} has no ports")));
            }
            if radix > MAX_RADIX {
                return Err(err(
                    0,
                    format!("router {a} has {radix} ports: this mode takes at most {MAX_RADIX}"),
                ));
            }
            links.push(list);
        }
        let net = AnyNet {
            terminals,
            links,
            router_of: node_list.values().map(|&r| r as u32).collect(),
        };
        // Dijkstra from router 0 reaches every router exactly when the network is connected
        // (every channel has one back); BookSim2's own loop never ends otherwise.
        let (dist, _) = net.shortest_paths(0);
        if let Some(r) = dist.iter().position(|&d| d == i64::MAX) {
            return Err(err(
                0,
                format!(
                    "router {r} cannot be reached from router 0: BookSim2's route computation \
                     never ends on a network in pieces"
                ),
            ));
        }
        Ok(net)
    }

    /// Routers.
    pub fn routers(&self) -> usize {
        self.links.len()
    }

    /// Terminals.
    pub fn nodes(&self) -> usize {
        self.router_of.len()
    }

    /// Ports of router `r` (inputs and outputs alike).
    pub fn radix(&self, r: usize) -> usize {
        self.terminals[r].len() + self.links[r].len()
    }

    /// Output port of router `r` for its terminal `n` (by terminal number, from 0).
    fn terminal_port(&self, r: usize, n: u32) -> usize {
        self.terminals[r].partition_point(|&(t, _)| t < n)
    }

    /// Output port of router `r` for its channel to router `to`.
    pub fn link_port(&self, r: usize, to: u32) -> usize {
        self.terminals[r].len() + self.links[r].partition_point(|&(b, _)| b < to)
    }

    /// BookSim's `AnyNet::route` from router `start`: distances (i64::MAX where unreached)
    /// and each router's predecessor.
    fn shortest_paths(&self, start: usize) -> (Vec<i64>, Vec<Option<usize>>) {
        let n = self.routers();
        let mut dist = vec![i64::MAX; n];
        let mut prev = vec![None; n];
        // BookSim scans a `set<int>` of the routers left in number order and takes the first
        // strictly nearer than the best so far.
        let mut done = vec![false; n];
        dist[start] = 0;
        loop {
            let mut best: Option<(usize, i64)> = None;
            for r in (0..n).filter(|&r| !done[r]) {
                if dist[r] < best.map_or(i64::MAX, |b| b.1) {
                    best = Some((r, dist[r]));
                }
            }
            let Some((r, d)) = best else {
                break;
            };
            done[r] = true;
            for &(b, lat) in &self.links[r] {
                let nd = d + i64::from(lat);
                if nd < dist[b as usize] {
                    dist[b as usize] = nd;
                    prev[b as usize] = Some(r);
                }
            }
        }
        (dist, prev)
    }

    /// The routing table, `min_anynet`'s: the output port of router `r` for terminal `d` at
    /// `r * nodes + d`.
    pub fn routing_table(&self) -> Vec<u16> {
        let (routers, nodes) = (self.routers(), self.nodes());
        let mut table = vec![0u16; routers * nodes];
        for start in 0..routers {
            let (_, prev) = self.shortest_paths(start);
            for i in 0..routers {
                let port = if i == start {
                    None
                } else {
                    // The first hop: walk back to the router whose predecessor is `start`.
                    let mut hop = i;
                    let mut guard = routers;
                    while let Some(p) = prev[hop] {
                        if p == start || guard == 0 {
                            break;
                        }
                        hop = p;
                        guard -= 1;
                    }
                    Some(self.link_port(start, hop as u32))
                };
                for &(t, _) in &self.terminals[i] {
                    let p = port.unwrap_or_else(|| self.terminal_port(start, t));
                    table[start * nodes + t as usize] = p as u16;
                }
            }
        }
        table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two routers joined both ways, terminals numbered around them, a latency on one way.
    #[test]
    fn reads_routers_terminals_and_latencies() {
        let net = AnyNet::parse("router 0 node 1 node 0 router 1 7\nrouter 1 node 2\n\n").unwrap();
        assert_eq!(net.terminals, vec![vec![(0, 1), (1, 1)], vec![(2, 1)]]);
        assert_eq!(net.links, vec![vec![(1, 7)], vec![(0, 1)]]);
        assert_eq!(net.router_of, vec![0, 0, 1]);
        // Terminal ports first, then router channels.
        let t = net.routing_table();
        assert_eq!(&t[0..3], &[0, 1, 2]);
        assert_eq!(&t[3..6], &[1, 1, 0]);
    }

    /// A later plain mention resets a latency; a node-headed latency with equal numbers is the
    /// terminal's own; double spaces are skipped.
    #[test]
    fn keeps_booksims_quirks() {
        let net = AnyNet::parse(
            "router 0 router 1 9\nrouter 0  router 1\nnode 0 router 0 4\nrouter 1 node 1",
        )
        .unwrap();
        assert_eq!(net.links[0], vec![(1, 1)]);
        assert_eq!(net.terminals[0], vec![(0, 4)]);
        // A node head creates a router of its number: here router 1, with no ports.
        let e = AnyNet::parse("node 1 router 0\nnode 0 router 0").unwrap_err();
        assert!(e.message.contains("router 1 has no ports"), "{e}");
    }

    #[test]
    fn refuses_what_booksim_cannot_build() {
        let big: String = (0..4097).map(|t| format!("router 0 node {t}\n")).collect();
        for (text, want) in [
            ("", "no terminals"),
            ("switch 0 node 0", "unknown head"),
            (
                "router 0 node 0 node 1\nrouter 1 node 0",
                "terminal 0 connects",
            ),
            ("router 0 node 0 node 2", "numbered with gaps"),
            (
                "router 0 node 0\nrouter 2 node 1 router 0",
                "routers are numbered with gaps",
            ),
            (
                "router 0 node 0 router 1\nrouter 1 node 2 5\nrouter 0 node 1",
                "none back",
            ),
            ("node 1 router 0 3\nnode 0 router 0", "not its own"),
            ("router 0 node 0 router 1 0\nrouter 1 node 1", "latency 0"),
            ("router 0 node 0\nrouter 1 node 1", "cannot be reached"),
            ("node 0 node 1", "terminal cannot connect"),
            ("router 99999999 node 0", "must be 0 to"),
            (&big, "4097 ports"),
        ] {
            let e = AnyNet::parse(text).unwrap_err();
            assert!(e.to_string().contains(want), "{text:?}: {e}");
        }
    }

    /// Dijkstra by latency: a slow direct channel loses to a fast detour; equal distances go
    /// through the lower-numbered router.
    #[test]
    fn routes_by_latency_with_booksims_ties() {
        let text = "router 0 node 0 router 1 10 router 2\nrouter 1 node 1 router 2\n\
                    router 2 node 2 router 3\nrouter 3 node 3 router 1";
        let net = AnyNet::parse(text).unwrap();
        let t = net.routing_table();
        let n = net.nodes();
        // Router 0 to terminal 1: direct costs 10, via 2 costs 2.
        assert_eq!(t[1], net.link_port(0, 2) as u16);
        // Router 0 to terminal 3: via 1 (10 + 1) or via 2 (1 + 1): via 2.
        assert_eq!(t[3], net.link_port(0, 2) as u16);
        // Router 2 to terminal 1 costs 1 directly (the reverse channel created for `router 1 ... router 2`).
        assert_eq!(t[2 * n + 1], net.link_port(2, 1) as u16);
        // Router 3 to terminal 0: via 1 (1 + 1 back to 0) and via 2 (1 + 1) tie; router 1 is
        // settled first, and router 0 is first reached from it.
        assert_eq!(t[3 * n], net.link_port(3, 1) as u16);
    }
}
