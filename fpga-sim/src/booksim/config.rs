//! BookSim2 configuration files: syntax, key names, defaults, and what this mode can honour.
//!
//! Syntax (BookSim's `config.l`): statements `key = value;`, `//` comments to the end of the
//! line, values that are integers, floating-point numbers, bare strings
//! (`[A-Za-z_\-/.][A-Za-z0-9_\-/.+(){},]*`), `{...}` lists, or (an extension) double-quoted
//! strings. Command-line overrides `key=value` use the same syntax with the `;` implied, and
//! apply in order after the file, as in BookSim.
//!
//! Defaults are BookSim's (`booksim_config.cpp`). Every key is checked: a key BookSim does not
//! know, or a value this mode cannot reproduce faithfully, is an error naming the key.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use thiserror::Error;

use super::anynet::{self, AnyNet};
use super::rng::KnuthInt;
use crate::router::{AllocatorKind, RouterConfig};

/// A configuration value as written.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// An integer token.
    Int(i64),
    /// A floating-point token.
    Float(f64),
    /// A string, list or quoted token.
    Str(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Str(s) => write!(f, "{s}"),
        }
    }
}

/// Where a setting came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Origin {
    /// File name, or `command line`.
    pub source: String,
    /// Line number (1-based) within the source.
    pub line: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.source, self.line)
    }
}

/// A configuration this mode cannot use.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Not BookSim syntax.
    #[error("{origin}: syntax error: {msg}")]
    Syntax {
        /// Where.
        origin: Origin,
        /// What.
        msg: String,
    },
    /// A key BookSim does not have.
    #[error("{origin}: unknown configuration key `{key}`")]
    UnknownKey {
        /// The key.
        key: String,
        /// Where it was set.
        origin: Origin,
    },
    /// A value of the wrong kind or out of range.
    #[error("{origin}: `{key} = {value}`: {reason}")]
    BadValue {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// Why.
        reason: String,
        /// Where it was set.
        origin: Origin,
    },
    /// A value BookSim accepts but this mode does not reproduce.
    #[error("`{key} = {value}` is not supported by the BookSim-comparable mode: {reason}")]
    Unsupported {
        /// The key.
        key: String,
        /// The value in effect.
        value: String,
        /// Why, and what is supported.
        reason: String,
    },
    /// Command-line usage.
    #[error("{0}")]
    Usage(String),
}

// ---- lexer and parser --------------------------------------------------------------

#[derive(Debug, PartialEq)]
enum Tok {
    Val(Value),
    Eq,
    Semi,
}

fn is_str_start(c: char) -> bool {
    c.is_ascii_alphabetic() || matches!(c, '_' | '-' | '/' | '.')
}

fn is_str_cont(c: char) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(c, '_' | '-' | '/' | '.' | '+' | '(' | ')' | '{' | '}' | ',')
}

fn lex(text: &str, source: &str) -> Result<Vec<(Tok, usize)>, ConfigError> {
    let chars: Vec<char> = text.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    let mut line = 1;
    let err = |line: usize, msg: String| ConfigError::Syntax {
        origin: Origin {
            source: source.to_string(),
            line,
        },
        msg,
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '=' {
            toks.push((Tok::Eq, line));
            i += 1;
        } else if c == ';' {
            toks.push((Tok::Semi, line));
            i += 1;
        } else if c == '"' {
            let start = i + 1;
            i += 1;
            while i < chars.len() && chars[i] != '"' && chars[i] != '\n' {
                i += 1;
            }
            if chars.get(i) != Some(&'"') {
                return Err(err(line, "unterminated string".into()));
            }
            let s: String = chars[start..i].iter().collect();
            toks.push((Tok::Val(Value::Str(s)), line));
            i += 1;
        } else if c == '{' {
            let start = i;
            let mut depth = 0usize;
            while i < chars.len() {
                match chars[i] {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    '\n' => return Err(err(line, "unterminated `{` list".into())),
                    _ => {}
                }
                i += 1;
            }
            if i >= chars.len() {
                return Err(err(line, "unterminated `{` list".into()));
            }
            i += 1;
            let s: String = chars[start..i]
                .iter()
                .filter(|c| !c.is_whitespace())
                .collect();
            toks.push((Tok::Val(Value::Str(s)), line));
        } else if c.is_ascii_digit()
            || ((c == '-' || c == '.')
                && chars
                    .get(i + 1)
                    .is_some_and(|d| d.is_ascii_digit() || (*d == '.' && c == '-')))
        {
            let start = i;
            i += 1;
            while i < chars.len()
                && (chars[i].is_ascii_digit()
                    || chars[i] == '.'
                    || chars[i] == 'e'
                    || chars[i] == 'E'
                    || ((chars[i] == '+' || chars[i] == '-') && matches!(chars[i - 1], 'e' | 'E')))
            {
                i += 1;
            }
            let s: String = chars[start..i].iter().collect();
            if let Ok(v) = s.parse::<i64>() {
                toks.push((Tok::Val(Value::Int(v)), line));
            } else if let Ok(v) = s.parse::<f64>() {
                toks.push((Tok::Val(Value::Float(v)), line));
            } else {
                return Err(err(line, format!("bad number `{s}`")));
            }
        } else if is_str_start(c) {
            let start = i;
            while i < chars.len() && is_str_cont(chars[i]) {
                i += 1;
            }
            let s: String = chars[start..i].iter().collect();
            toks.push((Tok::Val(Value::Str(s)), line));
        } else {
            return Err(err(line, format!("unexpected character `{c}`")));
        }
    }
    Ok(toks)
}

/// Parse BookSim configuration text into `(key, value, origin)` settings, in order.
pub fn parse(text: &str, source: &str) -> Result<Vec<(String, Value, Origin)>, ConfigError> {
    let toks = lex(text, source)?;
    let mut out = Vec::new();
    let mut i = 0;
    let origin = |line| Origin {
        source: source.to_string(),
        line,
    };
    while i < toks.len() {
        let (key, line) = match &toks[i] {
            (Tok::Val(Value::Str(k)), l) => (k.clone(), *l),
            (t, l) => {
                return Err(ConfigError::Syntax {
                    origin: origin(*l),
                    msg: format!("expected a key, found {t:?}"),
                })
            }
        };
        if !matches!(toks.get(i + 1), Some((Tok::Eq, _))) {
            return Err(ConfigError::Syntax {
                origin: origin(line),
                msg: format!("expected `=` after `{key}`"),
            });
        }
        let value = match toks.get(i + 2) {
            Some((Tok::Val(v), _)) => v.clone(),
            _ => {
                return Err(ConfigError::Syntax {
                    origin: origin(line),
                    msg: format!("expected a value for `{key}`"),
                })
            }
        };
        match toks.get(i + 3) {
            Some((Tok::Semi, _)) => i += 4,
            None => i += 3,
            Some((_, l)) => {
                return Err(ConfigError::Syntax {
                    origin: origin(*l),
                    msg: format!("expected `;` after `{key} = {value}`"),
                })
            }
        }
        out.push((key, value, origin(line)));
    }
    Ok(out)
}

// ---- typed configuration -----------------------------------------------------------

/// The network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Topology {
    /// k-ary n-fly (butterfly) with destination-tag routing; n = 1 is a k x k crossbar.
    Fly {
        /// Radix.
        k: u32,
        /// Stages.
        n: u32,
    },
    /// k-ary n-level fat tree with nearest-common-ancestor routing (random up ports).
    FatTree {
        /// Radix (down ports per router).
        k: u32,
        /// Levels.
        n: u32,
        /// `anca_fattree`: going up, two up ports drawn (`RandomInt(k - 1)` twice) and the
        /// one whose downstream buffers hold fewer flits taken (the first on a tie).
        anca: bool,
    },
    /// BookSim's quad tree (`qtree`, which asserts k = 4, n = 3): a root with k children per
    /// router down to the leaves, each leaf serving k terminals; nearest-common-ancestor
    /// routing (`nca_qtree`). Routers in height order; child ports first, the parent port
    /// last.
    QTree {
        /// Children per router (4).
        k: u32,
        /// Levels (3).
        n: u32,
    },
    /// BookSim's `tree4` (which asserts k = 4, n = 3): 16 leaf routers of 4 terminals, in
    /// four groups of four leaves under two middle routers each, and 4 top routers joined
    /// to all 8 middle ones; nearest-common-ancestor routing with random up ports
    /// (`nca_tree4`).
    Tree4 {
        /// `anca_tree4`: up always by the first up port (BookSim's route set keeps only it).
        anca: bool,
    },
    /// k-ary n-dimensional mesh (BookSim's `kncube` without wrap-around routes) with
    /// dimension-order routing; one terminal per router.
    Mesh {
        /// Routers per dimension.
        k: u32,
        /// Dimensions.
        n: u32,
    },
    /// k-ary n-dimensional mesh with BookSim's `xy_yx_mesh` routing: the first router picks
    /// XY or YX order at random (`RandomInt(1)`), and the order travels as the VC class;
    /// `adaptive_xy_yx_mesh` picks the order whose output is less occupied downstream.
    MeshXyYx {
        /// Routers per dimension.
        k: u32,
        /// Dimensions.
        n: u32,
        /// `adaptive_xy_yx` rather than `xy_yx`.
        adaptive: bool,
    },
    /// k-ary n-dimensional mesh with BookSim's `min_adapt_mesh` routing. Its route set holds
    /// the minimal directions at priority 1 on VCs above the escape VC and dimension order at
    /// priority 0 on the escape VC (the lowest), but BookSim's `OutputSet` orders and
    /// deduplicates its elements by priority alone, so only the first minimal direction
    /// (dimension order's) survives: the dimension-order output, the VCs above the escape
    /// VC preferred, the escape VC as a fallback (and alone once a packet is on it).
    MeshMinAdapt {
        /// Routers per dimension.
        k: u32,
        /// Dimensions.
        n: u32,
    },
    /// k-ary n-dimensional mesh with BookSim's `planar_adapt_mesh` routing. Without link
    /// faults every element of its route set has priority 0 and BookSim's `OutputSet` keeps
    /// the first: the dimension-order output on the upper third of the VC range (from the
    /// range's first VC plus twice a third of its size, rounded down, to its last); the
    /// ejection port on every VC.
    MeshPlanarAdapt {
        /// Routers per dimension.
        k: u32,
        /// Dimensions.
        n: u32,
    },
    /// k-ary n-dimensional mesh with dimension-order routing and a slice of the VC range per
    /// destination: `dim_order_ni_mesh` (the range's size divided by the terminals, the
    /// destination's slice) or `dim_order_pni_mesh` (divided by k, the slice of the
    /// destination's digit in the dimension the packet is about to travel). At injection too;
    /// every VC to eject.
    MeshNi {
        /// Routers per dimension.
        k: u32,
        /// Dimensions.
        n: u32,
        /// `dim_order_pni_mesh` rather than `dim_order_ni_mesh`.
        per_coord: bool,
    },
    /// k-ary n-dimensional mesh with BookSim's two-phase oblivious routing, `valiant_mesh`
    /// (an intermediate router drawn anywhere, `RandomInt(nodes - 1)`) or `romm_mesh` (drawn
    /// digit by digit inside the minimal quadrant of source and destination,
    /// `rand_min_intr_mesh`), at the first router: dimension order to the intermediate
    /// router, then to the destination, each phase on its half of the VCs.
    MeshTwoPhase {
        /// Routers per dimension.
        k: u32,
        /// Dimensions.
        n: u32,
        /// `romm_mesh` rather than `valiant_mesh`.
        romm: bool,
        /// `romm_ni_mesh`: the phases share the VC range, and each destination takes its own
        /// slice of it (as `dim_order_ni_mesh`), at injection too.
        ni: bool,
    },
    /// k-ary n-cube (torus) with dimension-order routing and two dateline VC classes.
    Torus {
        /// Routers per dimension.
        k: u32,
        /// Dimensions.
        n: u32,
        /// `dim_order_bal_torus` (Cray's partition: a second dateline between digits
        /// `(k - 1) / 2` and `(k - 1) / 2 + 1`, either class drawn where neither is crossed)
        /// rather than `dim_order_torus`.
        balanced: bool,
        /// `min_adapt_torus`: off the escape VCs (the range's first two) a minimal direction
        /// on the range's fourth VC at priority 1 (only the lowest differing dimension's:
        /// BookSim's `OutputSet` keeps one element per priority, and a tie goes down), and
        /// dimension order on the escape VC of the dateline class at priority 0, computed as
        /// if the packet were injected at this router; on an escape VC, dimension order on
        /// escape VCs only. The class travels with the packet (BookSim's `f->ph`).
        adaptive: bool,
        /// `dim_order_ni_torus`: dimension order without datelines, each destination on its
        /// own slice of the VC range (the range's size divided by the terminals, rounded
        /// down) on every channel between routers; every VC at injection and ejection.
        ni: bool,
    },
    /// BookSim's concentrated mesh (`cmesh`): k x k routers, 4 terminals each (2 x 2), with
    /// express channels along the edges; `dor` (express) or `dor_no_express` routing, or
    /// `xy_yx` / `xy_yx_no_express` (the order drawn at the first router, one VC class each).
    CMesh {
        /// Routers per dimension (even).
        k: u32,
        /// `use_noc_latency`: channel latencies from the layout (else 1).
        noc: bool,
        /// Express channels taken (`dor_cmesh`, `xy_yx_cmesh`) rather than not (`_no_express`).
        express: bool,
        /// `xy_yx_cmesh` / `xy_yx_no_express_cmesh` rather than dimension order.
        xy_yx: bool,
    },
    /// BookSim's `dragonflynew` (n = 1) with `min` or `ugal` routing: groups of `a = 2p`
    /// routers, each with `p` terminals, `2p - 1` local and `p` global ports; `g = a p + 1`
    /// groups.
    DragonFly {
        /// Terminals (and global ports) per router (BookSim's `k`).
        p: u32,
        /// `ugal_dragonflynew` rather than `min_dragonflynew`.
        ugal: bool,
    },
    /// BookSim's flattened butterfly (`flatfly`, `flatfly_onchip.cpp`): `k^n` routers, each
    /// joined to every other router of its row in each of the `n` dimensions (`k - 1` ports
    /// per dimension) and serving `c = xr^2` terminals laid out `xr` by `xr`; routers are
    /// placed `x` to a row of the layout. `ran_min` routing (`min_flatfly`: the lowest
    /// differing dimension first, no draw) or `xyyx` (`xyyx_flatfly`: XY or YX order drawn
    /// at the first router, carried as the VC class).
    FlatFly {
        /// Routers per dimension.
        k: u32,
        /// Dimensions (at most 4).
        n: u32,
        /// Terminals per router side (`xr = yr`; `c = xr^2`).
        xr: u32,
        /// Routers per row of the layout (`x = y`).
        x: u32,
        /// `xyyx_flatfly` rather than `min_flatfly`.
        xy_yx: bool,
        /// With `xy_yx`: `adaptive_xyyx_flatfly` (the order whose output is less occupied
        /// downstream, drawn on a tie).
        adaptive: bool,
        /// `valiant_flatfly` (through a random intermediate terminal's router, two VC
        /// phases) rather than `min_flatfly` (`xy_yx` false).
        valiant: bool,
        /// `use_noc_latency`: channel latencies from the layout (else 1).
        noc: bool,
    },
    /// BookSim's `anynet`: the network of a file (`network_file`), with `min` routing
    /// (`min_anynet`, shortest paths by channel latency); see [`AnyNet`].
    AnyNet(Arc<AnyNet>),
}

impl Topology {
    /// `(k, n)`.
    pub fn k_n(&self) -> (u32, u32) {
        match *self {
            Topology::Fly { k, n }
            | Topology::FatTree { k, n, .. }
            | Topology::QTree { k, n }
            | Topology::Mesh { k, n }
            | Topology::MeshXyYx { k, n, .. }
            | Topology::MeshMinAdapt { k, n }
            | Topology::MeshPlanarAdapt { k, n }
            | Topology::MeshNi { k, n, .. }
            | Topology::MeshTwoPhase { k, n, .. }
            | Topology::Torus { k, n, .. }
            | Topology::FlatFly { k, n, .. } => (k, n),
            Topology::CMesh { k, .. } => (k, 2),
            Topology::Tree4 { .. } => (4, 3),
            Topology::DragonFly { p, .. } => (p, 1),
            // Not a k-ary network (only the traffic patterns read `k` and `n`).
            Topology::AnyNet(_) => (1, 1),
        }
    }

    /// Routers and router input ports (the same number of outputs).
    pub fn routers_and_ports(&self) -> (u128, u128) {
        if let Topology::AnyNet(net) = self {
            let ports = (0..net.routers()).map(|r| net.radix(r) as u128).sum();
            return (net.routers() as u128, ports);
        }
        let (k, n) = self.k_n();
        let (k, n) = (u128::from(k), u128::from(n));
        let per_level = k.saturating_pow(n as u32 - 1);
        match self {
            Topology::Fly { .. } => (n * per_level, n * per_level * k),
            Topology::FatTree { .. } => (n * per_level, per_level * (k + (n - 1) * 2 * k)),
            Topology::QTree { .. } => {
                let r: u128 = (0..n as u32).map(|h| k.saturating_pow(h)).sum();
                (r, (r - 1) * (k + 1) + k)
            }
            Topology::Tree4 { .. } => (28, 4 * 8 + 8 * 8 + 16 * 6),
            Topology::Mesh { .. }
            | Topology::MeshXyYx { .. }
            | Topology::MeshMinAdapt { .. }
            | Topology::MeshPlanarAdapt { .. }
            | Topology::MeshNi { .. }
            | Topology::MeshTwoPhase { .. }
            | Topology::Torus { .. } => {
                let r = k.saturating_pow(n as u32);
                (r, r * (2 * n + 1))
            }
            Topology::CMesh { .. } => (k * k, 8 * k * k),
            Topology::FlatFly { xr, .. } => {
                let r = k.saturating_pow(n as u32);
                let c = u128::from(*xr) * u128::from(*xr);
                (r, r.saturating_mul(c + (k - 1) * n))
            }
            Topology::DragonFly { .. } => {
                let r = 2 * k * (2 * k * k + 1);
                (r, r * (4 * k - 1))
            }
            Topology::AnyNet(_) => (0, 0),
        }
    }

    /// Terminals (`k^n`; `4 k^2` for the concentrated mesh, `c k^n` for the flattened
    /// butterfly, `2p^2 (2p^2 + 1)` for the dragonfly).
    pub fn nodes(&self) -> usize {
        if let Topology::AnyNet(net) = self {
            return net.nodes();
        }
        if let Topology::DragonFly { p, .. } = *self {
            let p = p as usize;
            return 2 * p * p * (2 * p * p + 1);
        }
        let (k, n) = self.k_n();
        let c = match *self {
            Topology::CMesh { .. } => 4,
            Topology::FlatFly { xr, .. } => (xr * xr) as usize,
            _ => 1,
        };
        c * (k as usize).pow(n)
    }
}

/// `traffic`: how a new packet's destination is chosen (BookSim's `traffic.cpp`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Traffic {
    /// `uniform`: `RandomInt(nodes - 1)`, the source itself included.
    Uniform,
    /// `bitcomp`: the complement of the source's bits (nodes a power of two).
    BitComp,
    /// `transpose`: the source's high and low halves of bits swapped (nodes an even power of
    /// two).
    Transpose,
    /// `bitrev`: the source's bits reversed (nodes a power of two).
    BitRev,
    /// `shuffle`: the source's bits rotated left by one (nodes a power of two).
    Shuffle,
    /// `tornado`: each radix-`xr * k` digit advanced by `ceil(xr * k / 2) - 1`.
    Tornado {
        /// Radix parameter.
        k: u32,
        /// Digits.
        n: u32,
        /// Concentration parameter.
        xr: u32,
    },
    /// `neighbor`: each radix-`xr * k` digit advanced by one.
    Neighbor {
        /// Radix parameter.
        k: u32,
        /// Digits.
        n: u32,
        /// Concentration parameter.
        xr: u32,
    },
    /// `randperm`: a random permutation drawn from its own generator seeded with `perm_seed`.
    RandPerm {
        /// The permutation's seed.
        seed: i64,
    },
    /// `diagonal`: the next node (`RandomInt(2) == 0`) or the source itself.
    Diagonal,
    /// `asymmetric`: the source modulo half the nodes, in the lower or (`RandomInt(1)`) upper
    /// half.
    Asymmetric,
    /// `taper64` (64 nodes): half the time a random neighbour in an 8 x 8 grid (wrapping
    /// linearly), else uniform.
    Taper64,
    /// `bad_dragon`: uniform within the next group of `2k * k` nodes.
    BadDragon {
        /// Radix parameter.
        k: u32,
    },
    /// `badperm_yarc`: a random row of the source's column (radix `xr * k`).
    BadPermYarc {
        /// Radix parameter.
        k: u32,
        /// Concentration parameter.
        xr: u32,
    },
    /// `background`: uniform, redrawn while the draw is an excluded node.
    Background {
        /// Nodes never chosen (one bit per node).
        excluded: Vec<bool>,
    },
    /// `hotspot`: one of the hotspots, chosen by `RandomInt(sum of rates - 1)` (no draw with
    /// a single hotspot).
    HotSpot {
        /// The hotspots.
        spots: Vec<u32>,
        /// Their relative rates.
        rates: Vec<u32>,
    },
}

impl Traffic {
    /// The destination of each source for the permutation patterns (`None` for `uniform`),
    /// or the first destination outside `0..nodes` (BookSim stops with "Incorrect packet
    /// destination").
    pub fn table(&self, nodes: usize) -> Result<Option<Vec<u32>>, usize> {
        let bits = nodes.trailing_zeros();
        let digits = |k: u32, n: u32, xr: u32, add: u64| -> Vec<u64> {
            let radix = u64::from(xr) * u64::from(k);
            (0..nodes as u64)
                .map(|s| {
                    let (mut offset, mut result) = (1u64, 0u64);
                    for _ in 0..n {
                        result = result.saturating_add(
                            offset.saturating_mul(((s / offset) % radix + add) % radix),
                        );
                        offset = offset.saturating_mul(radix);
                    }
                    result
                })
                .collect()
        };
        let t: Vec<u64> = match *self {
            Traffic::Uniform
            | Traffic::Diagonal
            | Traffic::Asymmetric
            | Traffic::Taper64
            | Traffic::BadDragon { .. }
            | Traffic::BadPermYarc { .. }
            | Traffic::Background { .. }
            | Traffic::HotSpot { .. } => return Ok(None),
            Traffic::BitComp => (0..nodes as u64).map(|s| !s & (nodes as u64 - 1)).collect(),
            Traffic::Transpose => {
                let shift = bits / 2;
                let lo = (1u64 << shift) - 1;
                (0..nodes as u64)
                    .map(|s| ((s >> shift) & lo) | ((s << shift) & (lo << shift)))
                    .collect()
            }
            Traffic::BitRev => (0..nodes as u64)
                .map(|s| {
                    let (mut src, mut r) = (s, 0u64);
                    for _ in 0..bits {
                        r = (r << 1) | (src & 1);
                        src >>= 1;
                    }
                    r
                })
                .collect(),
            Traffic::Shuffle => (0..nodes as u64)
                .map(|s| {
                    let sh = s << 1;
                    (sh & (nodes as u64 - 1)) | u64::from(sh & nodes as u64 != 0)
                })
                .collect(),
            Traffic::Tornado { k, n, xr } => {
                let radix = u64::from(xr) * u64::from(k);
                digits(k, n, xr, radix.div_ceil(2) - 1)
            }
            Traffic::Neighbor { k, n, xr } => digits(k, n, xr, 1),
            Traffic::RandPerm { seed } => {
                // BookSim saves the generators, reseeds with perm_seed, draws, and restores:
                // the main streams are untouched (and are reseeded afterwards anyway).
                let mut rng = KnuthInt::new(seed);
                let mut dest = vec![u64::MAX; nodes];
                // Free sources counted in a Fenwick tree, to find the ind-th free one in
                // O(log nodes) (BookSim scans; the result is the same).
                let mut tree = vec![0u32; nodes + 1];
                for i in 1..=nodes {
                    tree[i] += 1;
                    let up = i + (i & i.wrapping_neg());
                    if up <= nodes {
                        tree[up] += tree[i];
                    }
                }
                let top = if nodes == 0 {
                    0
                } else {
                    1usize << (usize::BITS - 1 - nodes.leading_zeros())
                };
                for i in 0..nodes {
                    // The (ind + 1)-th still unassigned source gets destination i.
                    let ind = rng.int((nodes - 1 - i) as u32);
                    let (mut pos, mut rem, mut step) = (0usize, ind, top);
                    while step > 0 {
                        if pos + step <= nodes && tree[pos + step] <= rem {
                            pos += step;
                            rem -= tree[pos];
                        }
                        step >>= 1;
                    }
                    // `pos` free sources lie before source `pos` (0-based), which is free.
                    let j = pos;
                    dest[j] = i as u64;
                    let mut x = j + 1;
                    while x <= nodes {
                        tree[x] -= 1;
                        x += x & x.wrapping_neg();
                    }
                }
                dest
            }
        };
        match t.iter().position(|&d| d >= nodes as u64) {
            Some(s) => Err(t[s].min(usize::MAX as u64) as usize),
            None => Ok(Some(t.into_iter().map(|d| d as u32).collect())),
        }
    }

    /// The destination of a packet from `src` under a random pattern other than `uniform`,
    /// drawn from BookSim's integer generator exactly as `traffic.cpp` draws it. The
    /// permutation patterns (see [`Traffic::table`]) and `uniform` (drawn by the caller) give
    /// `src`.
    pub fn random_dest(&self, src: u32, nodes: u32, rng: &mut KnuthInt) -> u32 {
        match self {
            Traffic::Diagonal => {
                if rng.int(2) == 0 {
                    (src + 1) % nodes
                } else {
                    src
                }
            }
            Traffic::Asymmetric => {
                let half = nodes / 2;
                src % half + if rng.int(1) != 0 { half } else { 0 }
            }
            Traffic::Taper64 => {
                if rng.int(1) != 0 {
                    // `64 + source + 8 * (RandomInt(2) - 1) + (RandomInt(2) - 1)`: g++
                    // evaluates the left-hand call first (checked against BookSim2).
                    let row = rng.int(2) as i64 - 1;
                    let col = rng.int(2) as i64 - 1;
                    ((64 + i64::from(src) + 8 * row + col) % 64) as u32
                } else {
                    rng.int(nodes - 1)
                }
            }
            Traffic::BadDragon { k } => {
                let grp = 2 * k * k;
                (rng.int(grp - 1) + (src / grp + 1) * grp) % nodes
            }
            Traffic::BadPermYarc { k, xr } => {
                let radix = xr * k;
                rng.int(radix - 1) * radix + src / radix
            }
            Traffic::Background { excluded } => loop {
                let d = rng.int(nodes - 1);
                if !excluded.get(d as usize).copied().unwrap_or(false) {
                    break d;
                }
            },
            Traffic::HotSpot { spots, rates } => {
                if spots.len() == 1 {
                    return spots[0];
                }
                let max_val: u32 = rates.iter().sum::<u32>() - 1;
                let mut pct = rng.int(max_val);
                for (i, &limit) in rates.iter().enumerate().take(spots.len() - 1) {
                    if limit > pct {
                        return spots[i];
                    }
                    pct -= limit;
                }
                spots[spots.len() - 1]
            }
            _ => src,
        }
    }
}

/// BookSim's `tokenize_str`: a value starting with `{` is a list of its top-level
/// comma-separated elements (nested braces kept whole, empty elements dropped); any other
/// value, commas included, is one element; an empty value, no element.
fn tokenize(data: &str) -> Vec<String> {
    if data.is_empty() {
        return Vec::new();
    }
    if !data.starts_with('{') {
        return vec![data.to_string()];
    }
    let b = data.as_bytes();
    let (mut out, mut start, mut nested) = (Vec::new(), 1, 0usize);
    for (i, &c) in b.iter().enumerate().skip(1) {
        match c {
            b'{' => nested += 1,
            b'}' if nested > 0 => nested -= 1,
            b'}' | b',' if nested == 0 => {
                if i > start {
                    out.push(data[start..i].to_string());
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    out
}

/// C's `atoi`: optional leading whitespace and sign, then the longest run of digits; 0 when
/// there is none (saturating instead of overflowing).
pub(crate) fn atoi(s: &str) -> i64 {
    let t = s.trim_start();
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let mut v: i64 = 0;
    for c in digits.bytes().take_while(u8::is_ascii_digit) {
        v = v.saturating_mul(10).saturating_add(i64::from(c - b'0'));
    }
    if neg {
        -v
    } else {
        v
    }
}

/// `injection_process`.
#[derive(Clone, Debug, PartialEq)]
pub enum Injection {
    /// `bernoulli`: a packet with probability `rate` each cycle.
    Bernoulli,
    /// `on_off`: bursts (BookSim's `OnOffInjectionProcess`).
    OnOff(OnOff),
}

/// The parameters of the on/off process as configured: exactly one of `alpha`, `beta`, `r1`
/// is negative, and is derived from the others and the rate.
#[derive(Clone, Debug, PartialEq)]
pub struct OnOff {
    /// Probability that an off source turns on.
    pub alpha: f64,
    /// Probability that an on source turns off.
    pub beta: f64,
    /// Injection probability while on.
    pub r1: f64,
    /// Each source's state at the start of every simulation.
    pub initial: Vec<bool>,
}

/// `sim_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimType {
    /// Measure latency: abort when unstable, drain measured packets.
    Latency,
    /// Measure sustained throughput only.
    Throughput,
}

/// A validated BookSim configuration.
#[derive(Clone, Debug)]
pub struct BooksimConfig {
    /// Network.
    pub topology: Topology,
    /// Latency of the router-to-router channels, cycles (2 for a torus with
    /// `use_noc_latency`, else 1; injection and ejection channels always take 1).
    pub link_latency: u32,
    /// `traffic`.
    pub traffic: Traffic,
    /// `injection_process`.
    pub injection: Injection,
    /// Router parameters (ports are filled in per router).
    pub router: RouterConfig,
    /// Flits per packet.
    pub packet_size: u32,
    /// Packets per node per cycle (BookSim's `_load`).
    pub packet_rate: f64,
    /// `injection_rate` as written.
    pub injection_rate: f64,
    /// `injection_rate_uses_flits`.
    pub injection_rate_uses_flits: bool,
    /// `sim_type`.
    pub sim_type: SimType,
    /// `warmup_periods`.
    pub warmup_periods: u32,
    /// `sample_period`, cycles.
    pub sample_period: u32,
    /// `max_samples`.
    pub max_samples: u32,
    /// `latency_thres`.
    pub latency_thres: f64,
    /// `warmup_thres`.
    pub warmup_thres: f64,
    /// `acc_warmup_thres`.
    pub acc_warmup_thres: f64,
    /// `stopping_thres`.
    pub stopping_thres: f64,
    /// `acc_stopping_thres`.
    pub acc_stopping_thres: f64,
    /// `include_queuing`: latency counted from generation (true) or from leaving the queue.
    pub include_queuing: bool,
    /// `seed`.
    pub seed: i64,
    /// `sim_count`.
    pub sim_count: u32,
    /// `print_csv_results`.
    pub print_csv_results: bool,
    /// `deadlock_warn_timeout`, cycles.
    pub deadlock_warn_timeout: i64,
    /// `use_read_write = 1`: request/reply traffic (`None`: every packet is BookSim's
    /// `ANY_TYPE`, of `packet_size` flits, on any VC).
    pub read_write: Option<ReadWrite>,
    /// Several packet sizes (`packet_size = {{a,b,...}}` with `packet_size_rate`); `None`:
    /// every packet has `packet_size` flits. Not used under `use_read_write`.
    pub packet_mix: Option<PacketSizes>,
}

/// Packet sizes drawn per packet (BookSim's `_GetNextPacketSize`): size `i` with weight
/// `rates[i]`, by one `RandomInt(max_val)` per packet.
#[derive(Clone, Debug, PartialEq)]
pub struct PacketSizes {
    /// Flits per packet.
    pub sizes: Vec<u32>,
    /// Weights, one per size.
    pub rates: Vec<u32>,
    /// The sum of the weights less one (BookSim's `_packet_size_max_val`).
    pub max_val: u32,
}

impl PacketSizes {
    /// The most sizes a mix may have (they are numbered in a packet's 11-bit kind code).
    pub const MAX: usize = 2000;

    /// The index of the size a draw `pct` in `0..=max_val` picks.
    pub fn pick(&self, mut pct: u32) -> usize {
        let last = self.sizes.len() - 1;
        for (i, &limit) in self.rates[..last].iter().enumerate() {
            if limit > pct {
                return i;
            }
            pct -= limit;
        }
        last
    }

    /// BookSim's `_GetAveragePacketSize`.
    pub fn average(&self) -> f64 {
        let sum: i64 = self
            .sizes
            .iter()
            .zip(&self.rates)
            .map(|(&s, &r)| i64::from(s) * i64::from(r))
            .sum();
        sum as f64 / (f64::from(self.max_val) + 1.0)
    }
}

/// A packet's type under `use_read_write` (BookSim's `Flit::FlitType`), as an index into
/// [`ReadWrite::size`] and [`ReadWrite::vcs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketKind {
    /// `READ_REQUEST`.
    ReadRequest = 0,
    /// `WRITE_REQUEST`.
    WriteRequest = 1,
    /// `READ_REPLY`.
    ReadReply = 2,
    /// `WRITE_REPLY`.
    WriteReply = 3,
}

impl PacketKind {
    /// The kinds, by index.
    pub const ALL: [PacketKind; 4] = [
        PacketKind::ReadRequest,
        PacketKind::WriteRequest,
        PacketKind::ReadReply,
        PacketKind::WriteReply,
    ];

    /// The reply a request of this kind is answered with.
    pub fn reply(self) -> PacketKind {
        match self {
            PacketKind::ReadRequest | PacketKind::ReadReply => PacketKind::ReadReply,
            PacketKind::WriteRequest | PacketKind::WriteReply => PacketKind::WriteReply,
        }
    }

    /// Whether this is a request (answered by a reply when its tail is ejected).
    pub fn is_request(self) -> bool {
        matches!(self, PacketKind::ReadRequest | PacketKind::WriteRequest)
    }
}

/// `use_read_write = 1` (BookSim's `TrafficManager`): a source injects read and write
/// requests (a write with probability `write_fraction`); when a request's tail is ejected,
/// its destination owes the source a reply, which it injects before any new request, with
/// its latency counted from the request's ejection. Each kind has its own size and VC range.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadWrite {
    /// `write_fraction`.
    pub write_fraction: f64,
    /// Flits per packet, by [`PacketKind`] (`read_request_size`, `write_request_size`,
    /// `read_reply_size`, `write_reply_size`).
    pub size: [u32; 4],
    /// VC range (first, last) by [`PacketKind`] (`read_request_begin_vc` ..
    /// `write_reply_end_vc`).
    pub vcs: [(u8, u8); 4],
}

/// Keys BookSim knows that change nothing in what this mode simulates (other topologies,
/// other traffic managers, tracing, power), each with the values accepted. `None` accepts
/// any value.
const INERT_KEYS: &[(&str, Option<&str>)] = &[
    ("channel_file", Some("")),
    ("c", None),
    ("x", None),
    ("y", None),
    ("yr", None),
    ("fail_seed", None),
    ("in_ports", None),
    ("out_ports", None),
    ("output_delay", None),
    ("vct", None),
    ("batch_size", None),
    ("batch_count", None),
    ("max_outstanding_requests", None),
    ("write_fraction", None),
    ("read_request_begin_vc", None),
    ("read_request_end_vc", None),
    ("write_request_begin_vc", None),
    ("write_request_end_vc", None),
    ("read_reply_begin_vc", None),
    ("read_reply_end_vc", None),
    ("write_reply_begin_vc", None),
    ("write_reply_end_vc", None),
    ("read_request_subnet", None),
    ("read_reply_subnet", None),
    ("write_request_subnet", None),
    ("write_reply_subnet", None),
    ("read_request_size", None),
    ("write_request_size", None),
    ("read_reply_size", None),
    ("write_reply_size", None),
    ("class_priority", None),
    ("pair_stats", Some("0")),
    ("print_activity", Some("0")),
    ("viewer_trace", Some("0")),
    ("watch_file", Some("")),
    ("watch_flits", Some("")),
    ("watch_packets", Some("")),
    ("watch_transactions", Some("")),
    ("watch_out", Some("")),
    ("stats_out", Some("")),
    ("sent_packets_out", Some("")),
    ("sim_power", Some("0")),
    ("power_output_file", None),
    ("tech_file", None),
    ("channel_width", None),
    ("channel_sweep", None),
    ("network_file", None),
    ("private_bufs", None),
    ("private_buf_size", None),
    ("private_buf_start_vc", None),
    ("private_buf_end_vc", None),
    ("max_held_slots", None),
    ("feedback_aging_scale", None),
    ("feedback_offset", None),
    ("spec_mask_by_reqs", None),
];

/// Keys with exactly one honoured value (BookSim's default): anything else is unsupported.
const FIXED_KEYS: &[(&str, &str, &str)] = &[
    (
        "router",
        "iq",
        "only the input-queued `iq` router is modelled",
    ),
    ("subnets", "1", "one network"),
    ("classes", "1", "one traffic class"),
    ("priority", "none", "no message priorities"),
    ("buffer_policy", "private", "private per-VC buffers"),
    ("buf_size", "-1", "per-VC buffers sized by vc_buf_size"),
    ("noq", "0", "no next-hop output queueing"),
    ("vc_busy_when_full", "0", "full VCs stay allocatable"),
    ("vc_prioritize_empty", "0", "no empty-VC preference"),
    ("vc_priority_donation", "0", "no priority donation"),
    ("vc_shuffle_requests", "0", "no request shuffling"),
    (
        "spec_sw_allocator",
        "prio",
        "speculative requests at low priority in one allocator",
    ),
    ("arb_type", "round_robin", "round-robin arbiters"),
    ("link_failures", "0", "no failed links"),
    ("measure_stats", "1", "class 0 measured"),
    (
        "print_csv_results",
        "0",
        "BookSim's CSV result line is not produced",
    ),
];

struct Raw {
    map: BTreeMap<String, (Value, Origin)>,
    used: Vec<String>,
}

impl Raw {
    fn take(&mut self, key: &str) -> Option<(Value, Origin)> {
        self.used.push(key.to_string());
        self.map.get(key).cloned()
    }

    fn int(&mut self, key: &str, default: i64) -> Result<i64, ConfigError> {
        match self.take(key) {
            None => Ok(default),
            Some((Value::Int(v), _)) => Ok(v),
            Some((Value::Float(f), _)) if f.fract() == 0.0 && f.abs() < 1e15 => Ok(f as i64),
            Some((v, origin)) => Err(bad(key, &v, "expects an integer", origin)),
        }
    }

    fn float(&mut self, key: &str, default: f64) -> Result<f64, ConfigError> {
        match self.take(key) {
            None => Ok(default),
            Some((Value::Int(v), _)) => Ok(v as f64),
            Some((Value::Float(v), _)) => Ok(v),
            Some((v, origin)) => Err(bad(key, &v, "expects a number", origin)),
        }
    }

    fn string(&mut self, key: &str, default: &str) -> String {
        match self.take(key) {
            None => default.to_string(),
            Some((v, _)) => v.to_string(),
        }
    }

    fn origin(&self, key: &str) -> Origin {
        self.map.get(key).map(|(_, o)| o.clone()).unwrap_or(Origin {
            source: "default".into(),
            line: 0,
        })
    }
}

/// `packet_size` and `packet_size_rate` as BookSim's `TrafficManager` reads them: an integer,
/// or a per-class list whose first element (one class) is read with `tokenize_int`; the
/// rates likewise, or one integer rate for every size; rates shorter than the sizes repeat
/// their last value.
fn packet_sizes(raw: &mut Raw) -> Result<PacketSizes, ConfigError> {
    let first_class = |raw: &mut Raw, key: &str| -> Option<Vec<i64>> {
        match raw.take(key) {
            Some((Value::Str(s), _)) => {
                let classes = tokenize(&s);
                Some(
                    classes
                        .first()
                        .map(|c| tokenize_ints(c))
                        .unwrap_or_default(),
                )
            }
            _ => None,
        }
    };
    let sizes = match first_class(raw, "packet_size") {
        Some(v) => v,
        None => vec![raw.int("packet_size", 1)?],
    };
    let origin = raw.origin("packet_size");
    if sizes.is_empty() || sizes.len() > PacketSizes::MAX {
        return Err(unsupported(
            "packet_size",
            raw.string("packet_size", "1"),
            &format!("1 to {} packet sizes", PacketSizes::MAX),
        ));
    }
    for &v in &sizes {
        if !(1..=1 << 16).contains(&v) {
            return Err(bad(
                "packet_size",
                &Value::Int(v),
                "must be 1..=65536 flits",
                origin,
            ));
        }
    }
    let mut rates = match first_class(raw, "packet_size_rate") {
        Some(v) => v,
        None => vec![raw.int("packet_size_rate", 1)?; sizes.len()],
    };
    let last = *rates.last().unwrap_or(&1);
    rates.resize(sizes.len(), last);
    let sum: i64 = rates.iter().sum();
    if rates.iter().any(|&r| !(0..=1 << 20).contains(&r)) || sum < 1 {
        return Err(unsupported(
            "packet_size_rate",
            raw.string("packet_size_rate", "1"),
            "weights 0..=2^20, at least one above 0 (BookSim asserts)",
        ));
    }
    Ok(PacketSizes {
        sizes: sizes.iter().map(|&v| v as u32).collect(),
        rates: rates.iter().map(|&v| v as u32).collect(),
        max_val: (sum - 1) as u32,
    })
}

/// `topology = flatfly`: the geometry `flatfly_onchip.cpp` asserts, and what the mode
/// models of it. `nodes` is `c k^n` (at most 2^20, checked by the caller).
/// `network_file` for `anynet`: read as BookSim reads it, from the working directory, or
/// failing that next to the configuration file that named it; then parsed and checked
/// ([`AnyNet::parse`]). Only regular files of at most [`anynet::MAX_FILE_BYTES`] are read.
fn read_network_file(name: &str, origin: Origin) -> Result<AnyNet, ConfigError> {
    use std::io::Read as _;
    if name.is_empty() {
        return Err(bad(
            "network_file",
            &Value::Str(String::new()),
            "anynet needs a network file",
            origin,
        ));
    }
    let mut path = std::path::PathBuf::from(name);
    if !path.exists() && origin.line > 0 {
        if let Some(dir) = std::path::Path::new(&origin.source).parent() {
            let beside = dir.join(name);
            if beside.exists() {
                path = beside;
            }
        }
    }
    let shown = path.display().to_string();
    let io = |source| ConfigError::Io {
        path: shown.clone(),
        source,
    };
    let meta = std::fs::metadata(&path).map_err(io)?;
    if !meta.is_file() || meta.len() > anynet::MAX_FILE_BYTES {
        return Err(bad(
            "network_file",
            &Value::Str(name.to_string()),
            &format!(
                "{shown} is not a regular file of at most {} bytes",
                anynet::MAX_FILE_BYTES
            ),
            origin,
        ));
    }
    let mut text = String::new();
    std::fs::File::open(&path)
        .map_err(io)?
        .take(anynet::MAX_FILE_BYTES)
        .read_to_string(&mut text)
        .map_err(io)?;
    AnyNet::parse(&text).map_err(|e| {
        bad(
            "network_file",
            &Value::Str(name.to_string()),
            &format!("{shown}: {e}"),
            origin,
        )
    })
}

fn flatfly(raw: &mut Raw, k: i64, n: i64, rf: &str, nodes: u128) -> Result<Topology, ConfigError> {
    let (xy_yx, adaptive, valiant) = match rf {
        "ran_min" => (false, false, false),
        "xyyx" => (true, false, false),
        "adaptive_xyyx" => (true, true, false),
        "valiant" => (false, false, true),
        _ => {
            return Err(unsupported(
                "routing_function",
                rf,
                "flatfly uses ran_min (min_flatfly), xyyx (xyyx_flatfly), adaptive_xyyx \
                 (adaptive_xyyx_flatfly) or valiant (valiant_flatfly); the ugal variants are \
                 not modelled",
            ))
        }
    };
    if n > 4 {
        return Err(unsupported(
            "n",
            n,
            "BookSim's flatfly wires at most 4 dimensions (it asserts dim < 4)",
        ));
    }
    let (c, x, y) = (raw.int("c", 1)?, raw.int("x", 8)?, raw.int("y", 8)?);
    let (xr, yr) = (raw.int("xr", 1)?, raw.int("yr", 1)?);
    if x != y || xr != yr || xr < 1 || c != xr.saturating_mul(yr) {
        return Err(unsupported(
            "c",
            format!("{c} (x = {x}, y = {y}, xr = {xr}, yr = {yr})"),
            "BookSim's flatfly asserts x = y, xr = yr and c = xr * yr",
        ));
    }
    // Router r sits at column r % x, row r / x of the layout; terminals are numbered across
    // the whole layout's rows. Unless x divides the routers, terminal numbers run past the
    // network (BookSim would index its channels out of range).
    let routers = nodes / c as u128;
    if x < 1 || !routers.is_multiple_of(x as u128) {
        return Err(unsupported(
            "x",
            x,
            &format!("the routers per layout row must divide the {routers} routers (k^n)"),
        ));
    }
    let noc = raw.int("use_noc_latency", 1)? != 0;
    Ok(Topology::FlatFly {
        k: k as u32,
        n: n as u32,
        xr: xr as u32,
        x: x as u32,
        xy_yx,
        adaptive,
        valiant,
        noc,
    })
}

/// Into how many slices the `_ni` / `_pni` routings cut a VC range: the terminals
/// (`dim_order_ni_mesh`, `dim_order_ni_torus`) or k (`dim_order_pni_mesh`).
fn ni_parts(topology: &Topology) -> Option<u128> {
    match *topology {
        Topology::MeshNi {
            k, per_coord: true, ..
        } => Some(u128::from(k)),
        Topology::MeshNi { k, n, .. }
        | Topology::Torus { k, n, ni: true, .. }
        | Topology::MeshTwoPhase { k, n, ni: true, .. } => Some(u128::from(k).saturating_pow(n)),
        _ => None,
    }
}

/// The keys of `use_read_write = 1`, with BookSim's defaults. BookSim would index past its
/// VCs or subnetworks (or, on a torus or with xy_yx, assert) on what is refused here.
fn read_write_keys(
    raw: &mut Raw,
    topology: &Topology,
    vcs: usize,
) -> Result<ReadWrite, ConfigError> {
    let write_fraction = raw.float("write_fraction", 0.5)?;
    if !write_fraction.is_finite() {
        return Err(bad(
            "write_fraction",
            &Value::Float(write_fraction),
            "must be a finite number",
            raw.origin("write_fraction"),
        ));
    }
    let names = ["read_request", "write_request", "read_reply", "write_reply"];
    let defaults = [(0, 5), (2, 7), (8, 13), (10, 15)];
    let mut size = [1u32; 4];
    let mut ranges = [(0u8, 0u8); 4];
    // Two VC classes per range (dateline or XY/YX order) on these.
    let split = matches!(
        topology,
        Topology::Torus { .. }
            | Topology::MeshXyYx { .. }
            | Topology::MeshTwoPhase { .. }
            | Topology::FlatFly { xy_yx: true, .. }
    );
    for (i, name) in names.iter().enumerate() {
        let key = format!("{name}_size");
        let v = raw.int(&key, 1)?;
        if !(1..=1 << 16).contains(&v) {
            return Err(bad(
                &key,
                &Value::Int(v),
                "must be 1..=65536 flits",
                raw.origin(&key),
            ));
        }
        size[i] = v as u32;
        let (bk, ek) = (format!("{name}_begin_vc"), format!("{name}_end_vc"));
        let (b, e) = (raw.int(&bk, defaults[i].0)?, raw.int(&ek, defaults[i].1)?);
        // min_dragonflynew picks VCs by phase and never reads the ranges.
        let ignored = matches!(topology, Topology::DragonFly { .. });
        if !ignored && (b < 0 || e < b || e >= vcs as i64) {
            return Err(unsupported(
                &bk,
                format!("{b} ({ek} = {e})"),
                &format!("the VC range must lie within the {vcs} VCs (num_vcs), first <= last"),
            ));
        }
        // A kind is used when write_fraction lets it be drawn (BookSim draws a write when
        // a number from [0, 1) is below write_fraction); requests and replies alike.
        let used = if i % 2 == 1 {
            write_fraction > 0.0
        } else {
            write_fraction < 1.0
        };
        if let Some(parts) = ni_parts(topology) {
            if used && ((e - b + 1) as u128) < parts {
                return Err(unsupported(
                    &bk,
                    format!("{b} ({ek} = {e})"),
                    &format!(
                        "the _ni / _pni routings give each of {parts} destinations (or \
                         coordinates) a slice of the range: at least {parts} VCs (BookSim2 \
                         asserts vcs_per_dest > 0)"
                    ),
                ));
            }
        }
        if used && matches!(topology, Topology::Torus { adaptive: true, .. }) && e - b == 2 {
            return Err(unsupported(
                &bk,
                format!("{b} ({ek} = {e})"),
                "min_adapt_torus sends a packet off its escape VCs on the range's fourth VC, \
                 which a range of 3 VCs does not have: BookSim2 asserts",
            ));
        }
        if !ignored && split && e - b < 1 {
            return Err(unsupported(
                &bk,
                format!("{b} ({ek} = {e})"),
                "the torus's dimension-order routing, xy_yx (xyyx) and the two-phase mesh \
                 routings split each VC range in two classes: at least 2 VCs (BookSim2 asserts)",
            ));
        }
        if matches!(topology, Topology::MeshMinAdapt { .. }) && used && b > 0 {
            return Err(unsupported(
                &bk,
                format!("{b} ({ek} = {e})"),
                "min_adapt_mesh's escape element is VCs 0 to the range's first (written \
                 AddRange(port, 0, vcBegin, vcBegin)), outside a range that does not begin at \
                 VC 0: BookSim2 asserts at the next router",
            ));
        }
        ranges[i] = (b.clamp(0, 63) as u8, e.clamp(0, 63) as u8);
        let sk = format!("{name}_subnet");
        if raw.int(&sk, 0)? != 0 {
            return Err(unsupported(
                &sk,
                raw.string(&sk, "0"),
                "one network (subnets = 1)",
            ));
        }
    }
    Ok(ReadWrite {
        write_fraction,
        size,
        vcs: ranges,
    })
}

fn bad(key: &str, v: &Value, reason: &str, origin: Origin) -> ConfigError {
    ConfigError::BadValue {
        key: key.to_string(),
        value: v.to_string(),
        reason: reason.to_string(),
        origin,
    }
}

fn unsupported(key: &str, value: impl fmt::Display, reason: &str) -> ConfigError {
    ConfigError::Unsupported {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// An allocator name as BookSim writes it (`Allocator::NewAllocator`): `islip`, `islip(N)`
/// (N passes, read with `atoi`), `separable_input_first`, `separable_output_first`, either
/// optionally with `(round_robin)`. The `iq` router builds its allocators without the
/// configuration, so a bare `islip` makes one pass whatever `alloc_iters` says.
/// The most `pim` passes accepted (each draws once per port: a huge count would only spin).
const MAX_PIM_PASSES: i64 = 1 << 10;

fn check_allocator(key: &str, name: &str) -> Result<AllocatorKind, ConfigError> {
    let (base, param) = match name.find('(') {
        Some(i) => {
            let rest = &name[i + 1..];
            (&name[..i], rest.rfind(')').map_or(rest, |j| &rest[..j]))
        }
        None => (name, ""),
    };
    match base {
        "separable_input_first" | "separable_output_first" => {
            if !param.is_empty() && param != "round_robin" {
                return Err(unsupported(
                    key,
                    name,
                    "only round_robin arbiters are modelled",
                ));
            }
            Ok(if base == "separable_input_first" {
                AllocatorKind::SeparableInputFirst
            } else {
                AllocatorKind::SeparableOutputFirst
            })
        }
        "islip" => {
            let iters = if param.is_empty() { 1 } else { atoi(param) };
            if iters < 1 {
                return Err(unsupported(
                    key,
                    name,
                    "islip needs at least one iteration (BookSim would never grant)",
                ));
            }
            Ok(AllocatorKind::Islip {
                // (BookSim's `int`; passes after one that matches nothing change nothing.)
                iters: iters.min(i64::from(i32::MAX)) as usize,
            })
        }
        // BookSim reads no parameter of these.
        "wavefront" | "rr_wavefront" => Ok(AllocatorKind::Wavefront {
            skip_diags: base == "rr_wavefront",
        }),
        "max_size" => Ok(AllocatorKind::MaxSize),
        "loa" => Ok(AllocatorKind::Loa),
        "select" => {
            // BookSim's SelAlloc keeps the grants of one pass into the next, where an input
            // already matched can accept a second output: only one pass is modelled (a bare
            // `select` makes one, as the iq router passes no configuration).
            if !param.is_empty() && atoi(param) != 1 {
                return Err(unsupported(
                    key,
                    name,
                    "select is modelled with one pass (BookSim2's keeps stale grants across \
                     passes and can match an input to two outputs)",
                ));
            }
            Ok(AllocatorKind::Select)
        }
        "pim" => {
            // As islip: the iq router passes no configuration, so a bare `pim` makes one pass.
            let iters = if param.is_empty() { 1 } else { atoi(param) };
            if !(1..=MAX_PIM_PASSES).contains(&iters) {
                return Err(unsupported(
                    key,
                    name,
                    &format!(
                        "pim makes 1 to {MAX_PIM_PASSES} passes here (BookSim never grants \
                         with none, and draws for every port in every pass)"
                    ),
                ));
            }
            Ok(AllocatorKind::Pim {
                iters: iters as usize,
            })
        }
        _ => Err(unsupported(
            key,
            name,
            "only islip, separable_input_first, separable_output_first, wavefront, \
             rr_wavefront, max_size, loa, pim and select are modelled",
        )),
    }
}

/// BookSim's `name(p1,p2,...)` spec: the name and its parameters (tokenised as BookSim
/// does; a missing `)` takes the rest of the string).
fn name_and_params(first: &str) -> (&str, Vec<String>) {
    match first.find('(') {
        None => (first, Vec::new()),
        Some(left) => {
            let inner = match first.rfind(')') {
                Some(right) if right > left => &first[left + 1..right],
                _ => &first[left + 1..],
            };
            (&first[..left], tokenize(inner))
        }
    }
}

/// BookSim's `TrafficPattern::New`: `traffic` is a per-class list (`tokenize_str`; the first
/// element serves the one class), each a pattern name with optional `(parameters)`, the
/// parameters again a `tokenize_str` list read with `atoi` (so `tornado(4,2,1)` is *one*
/// parameter, 4; `tornado({4,2,1})` is three).
fn parse_traffic(
    spec: &str,
    k: i64,
    n: i64,
    xr: i64,
    perm_seed: i64,
    nodes: usize,
    unseeded: &mut KnuthInt,
) -> Result<Traffic, ConfigError> {
    let refuse = |why: &str| unsupported("traffic", spec, why);
    let classes = tokenize(spec);
    let first = classes
        .first()
        .ok_or_else(|| refuse("an empty traffic list"))?
        .as_str();
    let (name, params) = name_and_params(first);
    let param = |i: usize, default: i64| params.get(i).map_or(default, |p| atoi(p));
    let positive = |v: i64, what: &str| -> Result<u32, ConfigError> {
        if (1..=1 << 20).contains(&v) {
            Ok(v as u32)
        } else {
            Err(refuse(&format!("{what} = {v}: must be 1..=2^20")))
        }
    };
    let pow2 = nodes.is_power_of_two();
    let traffic = match name {
        "uniform" => Traffic::Uniform,
        "bitcomp" | "bitrev" | "shuffle" | "transpose" => {
            if !pow2 {
                return Err(refuse(
                    "bit permutations need a power-of-two number of terminals (BookSim's rule)",
                ));
            }
            match name {
                "bitcomp" => Traffic::BitComp,
                "bitrev" => Traffic::BitRev,
                "shuffle" => Traffic::Shuffle,
                _ => {
                    if !nodes.trailing_zeros().is_multiple_of(2) {
                        return Err(refuse(
                            "transpose needs the number of terminals to be an even power of \
                             two (BookSim's rule)",
                        ));
                    }
                    Traffic::Transpose
                }
            }
        }
        "tornado" | "neighbor" | "badperm_yarc" => {
            let k = positive(param(0, k), "k")?;
            let n = positive(param(1, n), "n")?;
            let xr = positive(param(2, xr), "xr")?;
            match name {
                "tornado" => Traffic::Tornado { k, n, xr },
                "neighbor" => Traffic::Neighbor { k, n, xr },
                _ => {
                    let radix = u64::from(xr) * u64::from(k);
                    let top = (radix - 1) * radix + (nodes as u64 - 1) / radix;
                    if top >= nodes as u64 {
                        return Err(refuse(&format!(
                            "can send to terminal {top}, outside the {nodes} terminals \
                             (BookSim stops with \"Incorrect packet destination\")"
                        )));
                    }
                    Traffic::BadPermYarc { k, xr }
                }
            }
        }
        "bad_dragon" => {
            // (BookSim also reads an `n` parameter, and does not use it.)
            let k = positive(param(0, k), "k")?;
            if 2 * u64::from(k) * u64::from(k) > 1 << 30 {
                return Err(refuse("groups of 2k^2 nodes must stay below 2^30"));
            }
            Traffic::BadDragon { k }
        }
        "randperm" => Traffic::RandPerm {
            seed: param(0, perm_seed),
        },
        "diagonal" => Traffic::Diagonal,
        "asymmetric" => {
            if nodes < 2 {
                return Err(refuse("asymmetric needs at least 2 terminals"));
            }
            Traffic::Asymmetric
        }
        "taper64" => {
            if nodes != 64 {
                return Err(refuse(
                    "taper64 needs exactly 64 terminals (BookSim's rule)",
                ));
            }
            Traffic::Taper64
        }
        "background" => {
            // BookSim reads the first parameter as an integer list: `background({{1,2}})`
            // excludes 1 and 2, `background({1,2})` only 1.
            let list = params
                .first()
                .ok_or_else(|| refuse("background needs its excluded nodes as a parameter"))?;
            let mut excluded = vec![false; nodes];
            for v in tokenize(list).iter().map(|t| atoi(t)) {
                let slot = usize::try_from(v)
                    .ok()
                    .and_then(|i| excluded.get_mut(i))
                    .ok_or_else(|| refuse(&format!("excluded node {v} is not a terminal")))?;
                *slot = true;
            }
            if excluded.iter().all(|&e| e) {
                return Err(refuse("every terminal is excluded"));
            }
            Traffic::Background { excluded }
        }
        "hotspot" => {
            let spot_list = params.first().map_or("-1", String::as_str);
            let mut spots = Vec::new();
            // Unset hotspots (-1) are drawn when the pattern is built, before BookSim seeds
            // its generators: from Knuth's default start, seed 314159 ("the user forgot to
            // initialize").
            for v in tokenize(spot_list).iter().map(|t| atoi(t)) {
                if v < 0 {
                    spots.push(unseeded.int(nodes as u32 - 1));
                } else if (v as u64) < nodes as u64 {
                    spots.push(v as u32);
                } else {
                    return Err(refuse(&format!("hotspot {v} is not a terminal")));
                }
            }
            if spots.is_empty() {
                return Err(refuse("no hotspots"));
            }
            let mut rates: Vec<i64> = match params.get(1) {
                Some(r) => tokenize(r).iter().map(|t| atoi(t)).collect(),
                None => Vec::new(),
            };
            let last = rates.last().copied().unwrap_or(1);
            rates.resize(spots.len(), last);
            let rates: Vec<u32> = rates
                .into_iter()
                .map(|r| u32::try_from(r).ok().filter(|&r| r <= 1 << 20))
                .collect::<Option<_>>()
                .ok_or_else(|| refuse("hotspot rates must be 0..=2^20"))?;
            if spots.len() > 1 && rates.iter().sum::<u32>() == 0 {
                return Err(refuse("hotspot rates sum to 0"));
            }
            Traffic::HotSpot { spots, rates }
        }
        _ => {
            return Err(refuse(
                "supported: uniform, bitcomp, transpose, bitrev, shuffle, tornado, neighbor, \
                 randperm, diagonal, asymmetric, taper64, bad_dragon, badperm_yarc, \
                 background, hotspot",
            ))
        }
    };
    if let Err(d) = traffic.table(nodes) {
        return Err(refuse(&format!(
            "sends to terminal {d}, outside the {nodes} terminals (BookSim stops with \
             \"Incorrect packet destination\")"
        )));
    }
    Ok(traffic)
}

/// BookSim's `InjectionProcess::New` (parameters read as in [`parse_traffic`], with `atof`).
fn parse_injection(
    spec: &str,
    (burst_alpha, burst_beta, burst_r1): (f64, f64, f64),
    traffic: &Traffic,
    nodes: usize,
    unseeded: &mut KnuthInt,
) -> Result<Injection, ConfigError> {
    let refuse = |why: &str| unsupported("injection_process", spec, why);
    let classes = tokenize(spec);
    let first = classes
        .first()
        .ok_or_else(|| refuse("an empty list"))?
        .as_str();
    let (name, params) = name_and_params(first);
    match name {
        "bernoulli" => Ok(Injection::Bernoulli),
        "on_off" => {
            let param = |i: usize, default: f64| params.get(i).map_or(default, |p| atof(p));
            let (alpha, beta, r1) = (
                param(0, burst_alpha),
                param(1, burst_beta),
                param(2, burst_r1),
            );
            let negatives = [alpha, beta, r1].iter().filter(|&&v| v < 0.0).count();
            if negatives != 1 || [alpha, beta, r1].iter().any(|v| v.is_nan() || *v > 1.0) {
                return Err(refuse(
                    "exactly one of burst_alpha, burst_beta, burst_r1 must be negative (derived \
                     from the rate), the others within [0, 1] (BookSim's rule)",
                ));
            }
            let initial: Vec<bool> = if params.len() > 3 {
                // BookSim reads the initial states from the *third* parameter (r1's).
                let mut v: Vec<bool> = tokenize_ints(&params[2]).iter().map(|&x| x != 0).collect();
                let last = *v.last().ok_or_else(|| refuse("no initial states"))?;
                v.resize(nodes, last);
                v
            } else if let Traffic::RandPerm { seed } = *traffic {
                // randperm reseeds BookSim's generator and restores only part of its state:
                // the draws that follow read what is left of the permutation's buffer, then
                // an all-zero generator.
                let mut g = KnuthInt::after_permutation(seed, nodes);
                (0..nodes).map(|_| g.int(1) != 0).collect()
            } else {
                (0..nodes).map(|_| unseeded.int(1) != 0).collect()
            };
            Ok(Injection::OnOff(OnOff {
                alpha,
                beta,
                r1,
                initial,
            }))
        }
        _ => Err(refuse("supported: bernoulli, on_off")),
    }
}

/// BookSim's `tokenize_int`: [`tokenize`] with each element read by `atoi`.
fn tokenize_ints(data: &str) -> Vec<i64> {
    tokenize(data).iter().map(|t| atoi(t)).collect()
}

/// C's `atof` for the forms configuration files use: the longest prefix that parses as a
/// decimal number (0 when none).
fn atof(s: &str) -> f64 {
    let t = s.trim_start();
    (1..=t.len())
        .rev()
        .filter(|&i| t.is_char_boundary(i))
        .find_map(|i| t[..i].parse::<f64>().ok().filter(|v| v.is_finite()))
        .unwrap_or(0.0)
}

impl BooksimConfig {
    /// Build a configuration from settings applied in order (later settings win).
    pub fn from_settings(settings: Vec<(String, Value, Origin)>) -> Result<Self, ConfigError> {
        let mut raw = Raw {
            map: BTreeMap::new(),
            used: Vec::new(),
        };
        for (k, v, o) in settings {
            raw.map.insert(k, (v, o));
        }

        let topo_name = raw.string("topology", "torus");
        let k = raw.int("k", 8)?;
        let n = raw.int("n", 2)?;
        let rf = raw.string("routing_function", "none");
        for (key, val) in [("k", k), ("n", n)] {
            if !(1..=1 << 16).contains(&val) {
                return Err(bad(
                    key,
                    &Value::Int(val),
                    "must be at least 1",
                    raw.origin(key),
                ));
            }
        }
        let (k32, n32) = (k as u32, n as u32);
        let concentration = match topo_name.as_str() {
            "cmesh" => 4,
            "flatfly" => raw.int("c", 1)?.clamp(1, 1 << 20) as u128,
            _ => 1,
        };
        let nodes = if topo_name == "dragonflynew" {
            let p = k as u128;
            (2 * p * p).saturating_mul(2 * p * p + 1)
        } else {
            (k as u128)
                .checked_pow(n32)
                .unwrap_or(u128::MAX)
                .saturating_mul(concentration)
        };
        if nodes > 1 << 20 {
            return Err(unsupported(
                "k",
                format!("{k} (n = {n})"),
                "at most 2^20 terminals",
            ));
        }
        // BookSim looks the routing function up as `routing_function` + `_` + `topology`.
        let topology = match topo_name.as_str() {
            "fly" => {
                if rf != "dest_tag" {
                    return Err(unsupported(
                        "routing_function",
                        &rf,
                        "fly uses dest_tag (dest_tag_fly)",
                    ));
                }
                Topology::Fly { k: k32, n: n32 }
            }
            "fattree" => {
                if rf != "nca" && rf != "anca" {
                    return Err(unsupported(
                        "routing_function",
                        &rf,
                        "fattree uses nca (nca_fattree) or anca (anca_fattree)",
                    ));
                }
                Topology::FatTree {
                    k: k32,
                    n: n32,
                    anca: rf == "anca",
                }
            }
            "qtree" | "tree4" => {
                if rf != "nca" && !(rf == "anca" && topo_name == "tree4") {
                    return Err(unsupported(
                        "routing_function",
                        &rf,
                        &format!(
                            "{topo_name} uses nca (nca_{topo_name}){}",
                            if topo_name == "tree4" {
                                " or anca (anca_tree4)"
                            } else {
                                ""
                            }
                        ),
                    ));
                }
                if (k, n) != (4, 3) {
                    return Err(unsupported(
                        "k",
                        format!("{k} (n = {n})"),
                        &format!(
                            "BookSim's {topo_name} works only with k = 4, n = 3 (it asserts both)"
                        ),
                    ));
                }
                if topo_name == "qtree" {
                    Topology::QTree { k: k32, n: n32 }
                } else {
                    Topology::Tree4 { anca: rf == "anca" }
                }
            }
            "mesh" => match rf.as_str() {
                // `dor_mesh` is BookSim's alias of `dim_order_mesh`.
                "dim_order" | "dor" => Topology::Mesh { k: k32, n: n32 },
                "xy_yx" | "adaptive_xy_yx" => Topology::MeshXyYx {
                    k: k32,
                    n: n32,
                    adaptive: rf == "adaptive_xy_yx",
                },
                "min_adapt" => Topology::MeshMinAdapt { k: k32, n: n32 },
                "planar_adapt" => Topology::MeshPlanarAdapt { k: k32, n: n32 },
                "dim_order_ni" | "dim_order_pni" => Topology::MeshNi {
                    k: k32,
                    n: n32,
                    per_coord: rf == "dim_order_pni",
                },
                "valiant" | "romm" | "romm_ni" => Topology::MeshTwoPhase {
                    k: k32,
                    n: n32,
                    romm: rf != "valiant",
                    ni: rf == "romm_ni",
                },
                _ => {
                    return Err(unsupported(
                        "routing_function",
                        &rf,
                        "mesh uses dim_order (dim_order_mesh, alias dor), xy_yx (xy_yx_mesh), \
                         adaptive_xy_yx, min_adapt (min_adapt_mesh), planar_adapt \
                         (planar_adapt_mesh), dim_order_ni, dim_order_pni, valiant \
                         (valiant_mesh), romm (romm_mesh) or romm_ni (romm_ni_mesh)",
                    ))
                }
            },
            "cmesh" => {
                let (express, xy_yx) = match rf.as_str() {
                    "dor" => (true, false),
                    "dor_no_express" => (false, false),
                    "xy_yx" => (true, true),
                    "xy_yx_no_express" => (false, true),
                    _ => {
                        return Err(unsupported(
                            "routing_function",
                            &rf,
                            "cmesh uses dor (dor_cmesh), dor_no_express (dor_no_express_cmesh), \
                             xy_yx (xy_yx_cmesh) or xy_yx_no_express (xy_yx_no_express_cmesh)",
                        ))
                    }
                };
                // CMesh::_ComputeSize asserts all of these ("broken" otherwise).
                let geometry = [
                    ("n", n, 2),
                    ("c", raw.int("c", 1)?, 4),
                    ("xr", raw.int("xr", 1)?, 2),
                    ("yr", raw.int("yr", 1)?, 2),
                ];
                for (key, v, want) in geometry {
                    if v != want {
                        return Err(unsupported(
                            key,
                            v,
                            &format!(
                                "BookSim's cmesh works only with n = 2, c = 4, xr = yr = 2 \
                                 (it asserts {key} = {want})"
                            ),
                        ));
                    }
                }
                let (x, y) = (raw.int("x", 8)?, raw.int("y", 8)?);
                if x != y {
                    return Err(unsupported(
                        "x",
                        x,
                        "BookSim's cmesh asserts x = y (the values are not used otherwise)",
                    ));
                }
                if k % 2 != 0 && k != 1 {
                    return Err(unsupported(
                        "k",
                        k,
                        "the concentrated mesh's express channels pair rows and columns k/2 \
                         apart: k must be 1 or even",
                    ));
                }
                if xy_yx && express && k > 4 {
                    // cmesh_xy / cmesh_yx take an edge's express channel (k/2 routers long)
                    // for any move of more than 1: with k >= 6 a packet 2 routers from its
                    // destination along an edge is sent k/2 past it and back for ever.
                    return Err(unsupported(
                        "routing_function",
                        &rf,
                        "BookSim's xy_yx_cmesh takes an edge's express channel for any move of \
                         more than one router, so from k = 6 on some packets go back and forth \
                         along the edge for ever (xy_yx_no_express, or k <= 4)",
                    ));
                }
                Topology::CMesh {
                    k: k32,
                    noc: raw.int("use_noc_latency", 1)? != 0,
                    express,
                    xy_yx,
                }
            }
            "dragonflynew" => {
                if rf != "min" && rf != "ugal" {
                    return Err(unsupported(
                        "routing_function",
                        &rf,
                        "dragonflynew uses min (min_dragonflynew) or ugal (ugal_dragonflynew)",
                    ));
                }
                if n != 1 {
                    return Err(unsupported(
                        "n",
                        n,
                        "BookSim's dragonflynew works only with n = 1 (it asserts n = 1)",
                    ));
                }
                Topology::DragonFly {
                    p: k32,
                    ugal: rf == "ugal",
                }
            }
            "flatfly" => flatfly(&mut raw, k, n, &rf, nodes)?,
            "anynet" => {
                if rf != "min" {
                    return Err(unsupported(
                        "routing_function",
                        &rf,
                        "anynet uses min (min_anynet)",
                    ));
                }
                let file = raw.string("network_file", "");
                let origin = raw.origin("network_file");
                Topology::AnyNet(Arc::new(read_network_file(&file, origin)?))
            }
            "torus" => {
                if !["dim_order", "dim_order_bal", "min_adapt", "dim_order_ni"].contains(&rf.as_str())
                {
                    return Err(unsupported(
                        "routing_function",
                        &rf,
                        "torus uses dim_order (dim_order_torus), dim_order_bal \
                         (dim_order_bal_torus), min_adapt (min_adapt_torus) or dim_order_ni \
                         (dim_order_ni_torus); \
                         valiant_torus reads a partition BookSim2 \
                         leaves uninitialised when a packet keeps its dimension, so its \
                         behaviour is the compiler's",
                    ));
                }
                Topology::Torus {
                    k: k32,
                    n: n32,
                    balanced: rf == "dim_order_bal",
                    adaptive: rf == "min_adapt",
                    ni: rf == "dim_order_ni",
                }
            }
            other => {
                return Err(unsupported(
                    "topology",
                    other,
                    "supported: fly (k, n; n = 1 is a crossbar), fattree (k, n), qtree and tree4 \
                     (k = 4, n = 3), mesh and torus (k, n), cmesh (k; n = 2, c = 4), flatfly (k, n <= 4, c = xr^2), \
                     dragonflynew (k; n = 1), anynet (network_file)",
                ))
            }
        };
        // anynet's terminals are its file's (k and n still feed the traffic patterns).
        let nodes = match &topology {
            Topology::AnyNet(net) => net.nodes() as u128,
            _ => nodes,
        };
        if matches!(
            topology,
            Topology::Mesh { .. }
                | Topology::MeshXyYx { .. }
                | Topology::MeshMinAdapt { .. }
                | Topology::MeshPlanarAdapt { .. }
                | Topology::MeshNi { .. }
                | Topology::MeshTwoPhase { .. }
                | Topology::Torus { .. }
        ) && n > 24
        {
            return Err(bad(
                "n",
                &Value::Int(n),
                "at most 24 dimensions",
                raw.origin("n"),
            ));
        }
        // kncube.cpp: with use_noc_latency (the default) torus channels take 2 cycles ("longer
        // due to wrap around"), mesh channels 1; without it every channel takes 1. Injection
        // and ejection channels always take 1. Other topologies ignore the key.
        let use_noc_latency = raw.int("use_noc_latency", 1)? != 0;
        let link_latency = match topology {
            Topology::Torus { .. } if use_noc_latency => 2,
            _ => 1,
        };

        let traffic_name = raw.string("traffic", "uniform");
        let perm_seed = match raw.take("perm_seed") {
            None => 0,
            Some((Value::Int(v), _)) => v,
            Some((v, origin)) => {
                return Err(bad(
                    "perm_seed",
                    &v,
                    "expects an integer (`time` is not reproducible)",
                    origin,
                ))
            }
        };
        let xr = raw.int("xr", 1)?;
        // Draws made before BookSim seeds its generators (unset hotspots, then the on/off
        // process's initial states) come from Knuth's default start.
        let mut unseeded = KnuthInt::new(314_159);
        let traffic = parse_traffic(
            &traffic_name,
            k,
            n,
            xr,
            perm_seed,
            nodes as usize,
            &mut unseeded,
        )?;
        let injection_name = raw.string("injection_process", "bernoulli");
        let burst = (
            raw.float("burst_alpha", 0.5)?,
            raw.float("burst_beta", 0.5)?,
            raw.float("burst_r1", -1.0)?,
        );
        let injection = parse_injection(
            &injection_name,
            burst,
            &traffic,
            nodes as usize,
            &mut unseeded,
        )?;
        for (key, want, why) in FIXED_KEYS {
            let got = raw.string(key, want);
            if got != *want {
                return Err(unsupported(key, got, why));
            }
        }
        let nonneg =
            |raw: &mut Raw, key: &str, default: i64, min: i64| -> Result<i64, ConfigError> {
                let v = raw.int(key, default)?;
                if v < min || v > i64::from(u32::MAX) {
                    return Err(bad(
                        key,
                        &Value::Int(v),
                        &format!("must be at least {min}"),
                        raw.origin(key),
                    ));
                }
                Ok(v)
            };
        // `alloc_iters` changes nothing: BookSim's separable allocators ignore it, and its `iq`
        // router creates its allocators without the configuration, so `islip` without a
        // parameter makes one pass (`islip(N)` makes N). The router's own `alloc_iters`
        // (separable passes) stays 1.
        let _ = nonneg(&mut raw, "alloc_iters", 1, 1)?;
        let vc_alloc = raw.string("vc_allocator", "islip");
        let vc_allocator = check_allocator("vc_allocator", &vc_alloc)?;
        let sw_alloc = raw.string("sw_allocator", "islip");
        let sw_allocator = check_allocator("sw_allocator", &sw_alloc)?;
        let vcs = nonneg(&mut raw, "num_vcs", 16, 1)?;
        let vc_buf_size = nonneg(&mut raw, "vc_buf_size", 8, 1)?;
        let obs = raw.int("output_buffer_size", -1)?;
        let router = RouterConfig {
            inputs: 1,
            outputs: 1,
            vcs: vcs as usize,
            vc_buf_size: vc_buf_size as usize,
            wait_for_tail_credit: nonneg(&mut raw, "wait_for_tail_credit", 0, 0)? != 0,
            routing_delay: nonneg(&mut raw, "routing_delay", 1, 0)? as u32,
            vc_alloc_delay: nonneg(&mut raw, "vc_alloc_delay", 1, 1)? as u32,
            sw_alloc_delay: nonneg(&mut raw, "sw_alloc_delay", 1, 1)? as u32,
            st_prepare_delay: nonneg(&mut raw, "st_prepare_delay", 0, 0)? as u32,
            st_final_delay: nonneg(&mut raw, "st_final_delay", 1, 0)? as u32,
            credit_delay: nonneg(&mut raw, "credit_delay", 0, 0)? as u32,
            input_speedup: nonneg(&mut raw, "input_speedup", 1, 1)? as usize,
            output_speedup: nonneg(&mut raw, "output_speedup", 1, 1)? as usize,
            internal_speedup: raw.float("internal_speedup", 1.0)?,
            speculative: nonneg(&mut raw, "speculative", 0, 0)? != 0,
            spec_check_elig: nonneg(&mut raw, "spec_check_elig", 1, 0)? != 0,
            spec_check_cred: nonneg(&mut raw, "spec_check_cred", 1, 0)? != 0,
            alloc_iters: 1,
            vc_allocator,
            sw_allocator,
            output_buffer_size: if obs < 0 { None } else { Some(obs as usize) },
            hold_switch_for_packet: nonneg(&mut raw, "hold_switch_for_packet", 0, 0)? != 0,
        };
        if let Err(e) = router.validate() {
            return Err(unsupported("router", "parameters", &e.to_string()));
        }
        // Two corners BookSim2 itself cannot simulate (checked against BookSim2 master
        // 28f4329, spec-notes/validation.md, "BookSim2 as a reference tool"): there is no
        // BookSim behaviour to reproduce, so they are refused rather than invented.
        // The routers' state is allocated up front: about 28 KiB per router (fixed-size
        // allocator and queue tables) plus, per input VC, its 16-byte slots and about 256 bytes
        // of bookkeeping (measured peak RSS with 4 VCs of 8 flits: 4,096 routers of 25 ports
        // 0.27 GB, 65,536 of 33 ports 5.3 GB, 114,688 two-port routers 3.2 GB, 245,760 6.8 GB).
        // Refuse what would not fit in 8 GiB rather than fail to allocate.
        let (n_routers, n_ports) = topology.routers_and_ports();
        // A table allocator (wavefront, max_size) keeps 12 bytes per pair of its inputs and
        // outputs: input VCs x output VCs for VC allocation, expanded ports for switches.
        let radix = n_ports / n_routers.max(1);
        let table = |kind: AllocatorKind, side: u128| match kind {
            AllocatorKind::Wavefront { .. }
            | AllocatorKind::MaxSize
            | AllocatorKind::Loa
            | AllocatorKind::Pim { .. } => {
                n_routers.saturating_mul(side.saturating_mul(side).saturating_mul(12))
            }
            _ => 0,
        };
        let speedup = router.input_speedup.max(router.output_speedup) as u128;
        let bytes = n_routers
            .saturating_mul(28 << 10)
            .saturating_add(
                n_ports
                    .saturating_mul(router.vcs as u128)
                    .saturating_mul(router.vc_buf_size as u128 * 16 + 256),
            )
            .saturating_add(table(
                router.vc_allocator,
                radix.saturating_mul(router.vcs as u128),
            ))
            .saturating_add(table(router.sw_allocator, radix.saturating_mul(speedup)));
        if bytes > 8 << 30 {
            return Err(unsupported(
                "k",
                format!(
                    "{k} (n = {n}, num_vcs = {}, vc_buf_size = {})",
                    router.vcs, router.vc_buf_size
                ),
                &format!(
                    "{n_routers} routers with {n_ports} ports need about {} GiB of router state \
                     (limit 8 GiB)",
                    bytes >> 30
                ),
            ));
        }
        if router.internal_speedup < 1.0 {
            // IQRouter keeps at most one arriving flit per input between internal steps
            // (`_in_queue_flits` is a map): a second flit arriving before the next internal
            // step is dropped. 1-flit packets vanish (the run ends unstable), multi-flit
            // packets stop on `assert(f->head)` in `_InputQueuing`.
            return Err(unsupported(
                "internal_speedup",
                router.internal_speedup,
                "BookSim2 loses flits when internal_speedup < 1 (one flit per input is kept \
                 between internal steps); use a value >= 1",
            ));
        }
        if router.speculative && router.vc_alloc_delay > 1 {
            // A speculative switch grant is checked against the VC allocation of the same
            // internal step; with a multi-cycle VC allocator the two batches drift apart and a
            // speculative grant completes without (or before) its VC allocation. BookSim2
            // stops on `assert(time >= 0)` (`_VCAllocEvaluate`) or on
            // `assert(cur_buf->GetOutputPort(vc) == output)` (`_SWAllocUpdate`); built without
            // assertions it sends flits on a stale output (misrouted packets, crashes).
            // `vc_alloc_delay = 1` with any `sw_alloc_delay` is fine and is compared.
            return Err(unsupported(
                "vc_alloc_delay",
                router.vc_alloc_delay,
                "with speculative = 1, BookSim2 works only with vc_alloc_delay = 1 (a \
                 speculative switch grant can complete without its VC allocation)",
            ));
        }

        let mix = packet_sizes(&mut raw)?;
        let packet_size = i64::from(mix.sizes[0]);
        let packet_mix = (mix.sizes.len() > 1).then_some(mix);
        let read_write = if nonneg(&mut raw, "use_read_write", 0, 0)? != 0 {
            Some(read_write_keys(&mut raw, &topology, router.vcs)?)
        } else {
            None
        };
        // BookSim divides a flit rate by the average packet size, which under
        // `use_read_write` is half the sum of the four sizes (integer division).
        let rate_size = match (&read_write, &packet_mix) {
            (Some(rw), _) => (rw.size.iter().map(|&s| i64::from(s)).sum::<i64>() / 2) as f64,
            (None, Some(mix)) => mix.average(),
            (None, None) => packet_size as f64,
        };
        let injection_rate = match raw.take("injection_rate") {
            None => 0.1,
            Some((Value::Int(v), _)) => v as f64,
            Some((Value::Float(v), _)) => v,
            Some((Value::Str(s), origin)) => s
                .trim_matches(|c| c == '{' || c == '}')
                .parse::<f64>()
                .map_err(|_| {
                    bad(
                        "injection_rate",
                        &Value::Str(s.clone()),
                        "expects a number",
                        origin,
                    )
                })?,
        };
        let uses_flits = nonneg(&mut raw, "injection_rate_uses_flits", 0, 0)? != 0;
        let packet_rate = if uses_flits {
            injection_rate / rate_size
        } else {
            injection_rate
        };
        if !(0.0..=1.0).contains(&packet_rate) {
            return Err(bad(
                "injection_rate",
                &Value::Float(injection_rate),
                "the packet injection rate must be within [0, 1] (BookSim's rule)",
                raw.origin("injection_rate"),
            ));
        }

        let sim_type = match raw.string("sim_type", "latency").as_str() {
            "latency" => SimType::Latency,
            "throughput" => SimType::Throughput,
            other => {
                return Err(unsupported(
                    "sim_type",
                    other,
                    "supported: latency, throughput",
                ))
            }
        };
        let seed = match raw.take("seed") {
            None => 0,
            Some((Value::Int(v), _)) => v,
            Some((Value::Str(s), _)) if s == "time" => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64 & 0x7fff_ffff)
                .unwrap_or(0),
            Some((v, origin)) => {
                return Err(bad("seed", &v, "expects an integer or `time`", origin))
            }
        };

        if matches!(
            topology,
            Topology::Torus { .. }
                | Topology::MeshXyYx { .. }
                | Topology::MeshTwoPhase { .. }
                | Topology::FlatFly { xy_yx: true, .. }
                | Topology::FlatFly { valiant: true, .. }
                | Topology::CMesh { xy_yx: true, .. }
                | Topology::DragonFly { .. }
        ) && router.vcs < 2
        {
            // dim_order_torus and xy_yx_mesh split the VCs into two classes and assert that
            // each has at least one VC.
            return Err(unsupported(
                "num_vcs",
                router.vcs,
                "the torus's dimension-order routing, xy_yx (xyyx), valiant, romm and the \
                 dragonfly need at least 2 VCs (two VC classes; BookSim2 stops on an assertion \
                 with 1)",
            ));
        }
        if let (Some(parts), None) = (ni_parts(&topology), &read_write) {
            if (router.vcs as u128) < parts {
                return Err(unsupported(
                    "num_vcs",
                    router.vcs,
                    &format!(
                        "the _ni / _pni routings give each of {parts} destinations (or \
                         coordinates) its own VCs: at least {parts} (BookSim2 asserts \
                         vcs_per_dest > 0)"
                    ),
                ));
            }
        }
        if matches!(topology, Topology::Torus { adaptive: true, .. })
            && read_write.is_none()
            && router.vcs == 3
        {
            return Err(unsupported(
                "num_vcs",
                router.vcs,
                "min_adapt_torus sends a packet off its escape VCs (0 and 1) on VC 3: with 3 VCs \
                 BookSim2 asserts",
            ));
        }
        if matches!(topology, Topology::FatTree { anca: true, .. }) && router.routing_delay == 0 {
            return Err(unsupported(
                "routing_delay",
                router.routing_delay,
                "anca_fattree reads the downstream occupancy of the router it routes at; under \
                 lookahead routing BookSim reads the next router's while the current one steps, \
                 which the mode's routers do not expose to each other",
            ));
        }
        if matches!(topology, Topology::DragonFly { ugal: true, .. }) && router.vcs != 3 {
            return Err(unsupported(
                "num_vcs",
                router.vcs,
                "ugal_dragonflynew works only with 3 VCs, one per phase (it asserts \
                 num_vcs == 3)",
            ));
        }

        let cfg = BooksimConfig {
            topology,
            link_latency,
            traffic,
            injection,
            router,
            packet_size: packet_size as u32,
            packet_rate,
            injection_rate,
            injection_rate_uses_flits: uses_flits,
            sim_type,
            warmup_periods: nonneg(&mut raw, "warmup_periods", 3, 0)? as u32,
            sample_period: nonneg(&mut raw, "sample_period", 1000, 1)? as u32,
            max_samples: nonneg(&mut raw, "max_samples", 10, 0)? as u32,
            latency_thres: raw.float("latency_thres", 500.0)?,
            warmup_thres: raw.float("warmup_thres", 0.05)?,
            acc_warmup_thres: raw.float("acc_warmup_thres", 0.05)?,
            stopping_thres: raw.float("stopping_thres", 0.05)?,
            acc_stopping_thres: raw.float("acc_stopping_thres", 0.05)?,
            include_queuing: nonneg(&mut raw, "include_queuing", 1, 0)? != 0,
            seed,
            sim_count: nonneg(&mut raw, "sim_count", 1, 1)? as u32,
            print_csv_results: false,
            deadlock_warn_timeout: raw.int("deadlock_warn_timeout", 256)?,
            read_write,
            packet_mix,
        };

        // Everything else must be a known key that changes nothing here.
        for (key, (value, origin)) in &raw.map {
            if raw.used.iter().any(|u| u == key) {
                continue;
            }
            match INERT_KEYS.iter().find(|(k, _)| k == key) {
                None => {
                    return Err(ConfigError::UnknownKey {
                        key: key.clone(),
                        origin: origin.clone(),
                    })
                }
                // `watch_out = -` sends watch output to standard output, and with nothing to
                // watch (the other watch keys stay empty) BookSim prints none: BookSim2's own
                // dragonfly example sets it.
                Some((_, Some(allowed)))
                    if value.to_string() != *allowed
                        && !(key == "watch_out" && value.to_string() == "-") =>
                {
                    return Err(unsupported(
                        key,
                        value,
                        "tracing and power output are not modelled",
                    ))
                }
                Some(_) => {}
            }
        }
        Ok(cfg)
    }

    /// Read `args` the way BookSim does: each argument without `=` is a configuration file,
    /// each `key=value` an override, applied in order.
    pub fn from_args<S: AsRef<str>>(args: &[S]) -> Result<Self, ConfigError> {
        let mut settings = Vec::new();
        let mut have_file = false;
        for a in args {
            let a = a.as_ref();
            if a.contains('=') {
                settings.extend(parse(a, "command line")?);
            } else {
                let text = std::fs::read_to_string(a).map_err(|e| ConfigError::Io {
                    path: a.to_string(),
                    source: e,
                })?;
                settings.extend(parse(&text, a)?);
                have_file = true;
            }
        }
        if !have_file {
            return Err(ConfigError::Usage(
                "usage: podlink-sim booksim CONFIG [key=value ...]".into(),
            ));
        }
        Self::from_settings(settings)
    }

    /// Build from configuration text plus overrides (for tests and embedding).
    pub fn from_text(text: &str, overrides: &[&str]) -> Result<Self, ConfigError> {
        let mut s = parse(text, "config")?;
        for o in overrides {
            s.extend(parse(o, "command line")?);
        }
        Self::from_settings(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const XBAR: &str = include_str!("../../tests/data/booksim/xbar16.cfg");

    /// `hold_switch_for_packet` reaches the router; with a limited output buffer and output
    /// speedup it is refused (BookSim reads its output queues by expanded output there).
    #[test]
    fn hold_switch_for_packet_is_read() {
        let c = BooksimConfig::from_text(XBAR, &["hold_switch_for_packet=1"]).unwrap();
        assert!(c.router.hold_switch_for_packet);
        let c = BooksimConfig::from_text(XBAR, &[]).unwrap();
        assert!(!c.router.hold_switch_for_packet);
        let e = BooksimConfig::from_text(
            XBAR,
            &[
                "hold_switch_for_packet=1",
                "output_speedup=2",
                "output_buffer_size=4",
            ],
        )
        .expect_err("refused")
        .to_string();
        assert!(e.contains("hold_switch_for_packet"), "{e}");
    }

    #[test]
    fn parses_the_reference_config() {
        let c = BooksimConfig::from_text(XBAR, &[]).unwrap();
        assert_eq!(c.topology, Topology::Fly { k: 16, n: 1 });
        assert_eq!(c.router.vcs, 4);
        assert_eq!(c.router.vc_buf_size, 8);
        assert_eq!(c.sample_period, 10000);
        assert_eq!(c.max_samples, 20);
        assert_eq!(c.seed, 1);
        assert!(c.injection_rate_uses_flits);
        assert_eq!(c.internal_speedup_str(), "1");
    }

    #[test]
    fn overrides_apply_in_order() {
        let c = BooksimConfig::from_text(XBAR, &["packet_size=5", "injection_rate=0.5"]).unwrap();
        assert_eq!(c.packet_size, 5);
        assert!((c.packet_rate - 0.1).abs() < 1e-12);
        // Under use_read_write the flit rate is divided by half the sum of the four sizes
        // (integer division), whatever packet_size says.
        let c = BooksimConfig::from_text(
            XBAR,
            &[
                "packet_size=5",
                "injection_rate=0.5",
                "use_read_write=1",
                "num_vcs=16",
                "write_request_size=4",
                "read_reply_size=4",
            ],
        )
        .unwrap();
        assert_eq!(c.packet_rate, 0.5 / 5.0);
        let rw = c.read_write.expect("use_read_write");
        assert_eq!(rw.size, [1, 4, 4, 1]);
        assert_eq!(rw.vcs, [(0, 5), (2, 7), (8, 13), (10, 15)]);
        assert_eq!(rw.write_fraction, 0.5);
        let c = BooksimConfig::from_text(
            XBAR,
            &[
                "injection_rate=0.5",
                "use_read_write=1",
                "num_vcs=16",
                "read_reply_size=2",
            ],
        )
        .unwrap();
        assert_eq!(c.packet_rate, 0.5 / 2.0);
        // A mix of sizes: the rate is divided by the weighted average size.
        let c = BooksimConfig::from_text(
            XBAR,
            &[
                "injection_rate=0.5",
                "packet_size={{1,5}}",
                "packet_size_rate={{3}}",
            ],
        )
        .unwrap();
        let mix = c.packet_mix.expect("two sizes");
        assert_eq!(
            (mix.sizes, mix.rates, mix.max_val),
            (vec![1, 5], vec![3, 3], 5)
        );
        assert_eq!(c.packet_rate, 0.5 / 3.0);
        let c = BooksimConfig::from_text(
            XBAR,
            &["packet_size={{1,2,8}}", "packet_size_rate={{1,0,2}}"],
        )
        .unwrap();
        let mix = c.packet_mix.expect("three sizes");
        let picks: Vec<usize> = (0..=mix.max_val).map(|p| mix.pick(p)).collect();
        assert_eq!(picks, [0, 2, 2]);
        // One size in a list is no mix; a flat list is one size per class.
        for ov in ["packet_size={{4}}", "packet_size={4,5}"] {
            let c = BooksimConfig::from_text(XBAR, &[ov]).unwrap();
            assert!(c.packet_mix.is_none(), "{ov}");
            assert_eq!(c.packet_size, 4, "{ov}");
        }
    }

    #[test]
    fn syntax() {
        let s = parse("a = 1; // c\n b=2.5;c = {1,2};\nd=fly", "t").unwrap();
        assert_eq!(s.len(), 4);
        assert_eq!(s[1].1, Value::Float(2.5));
        assert_eq!(s[2].1, Value::Str("{1,2}".into()));
        assert_eq!(s[3].2.line, 3);
        assert!(parse("a 1;", "t").is_err());
        assert!(parse("a = ;", "t").is_err());
        assert!(parse("a = 1 b = 2;", "t").is_err());
        assert!(parse("a = \"x", "t").is_err());
        assert!(parse("a = #;", "t").is_err());
    }

    /// `anynet`: the network file is found beside the configuration that names it (or from
    /// the working directory, as BookSim finds it), and its problems name the file.
    #[test]
    fn anynet_reads_its_network_file() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/booksim/sweep");
        let cfg = format!("{dir}/anynet_tree.cfg");
        let c = BooksimConfig::from_args(&[cfg.as_str()]).unwrap();
        assert_eq!(c.topology.nodes(), 12);
        assert_eq!(c.topology.routers_and_ports(), (6, 12 + 2 * 5));
        let net = format!("network_file={dir}/anynet_k4.net");
        let c = BooksimConfig::from_args(&[cfg.as_str(), net.as_str()]).unwrap();
        assert_eq!(c.topology.nodes(), 8);
        // From the working directory (the crate's, under cargo test).
        let ov = [
            "topology=anynet",
            "routing_function=min",
            "network_file=tests/data/booksim/sweep/anynet_k4.net",
        ];
        assert_eq!(
            BooksimConfig::from_text(XBAR, &ov)
                .unwrap()
                .topology
                .nodes(),
            8
        );
        // A bad file: the key, the file and the line.
        let bad = std::env::temp_dir().join(format!("anynet-bad-{}.net", std::process::id()));
        std::fs::write(&bad, "router 0 node 0\nrouter 0 hub 1\n").unwrap();
        let ov = format!("network_file={}", bad.display());
        let e = BooksimConfig::from_args(&[cfg.as_str(), ov.as_str()])
            .unwrap_err()
            .to_string();
        let _ = std::fs::remove_file(&bad);
        assert!(
            e.contains("network_file") && e.contains("line 2: unknown body type `hub`"),
            "{e}"
        );
    }

    #[test]
    fn errors_name_the_key() {
        for (ov, key) in [
            ("frobnicate=1", "frobnicate"),
            ("topology=anynet routing_function=min", "network_file"),
            ("topology=anynet routing_function=dor", "`routing_function = dor`"),
            (
                "topology=anynet routing_function=min network_file=no/such/file",
                "no/such/file",
            ),
            ("topology=anynet routing_function=min network_file=.", "not a regular file"),
            ("topology=qtree routing_function=anca k=4 n=3", "`routing_function = anca`"),
            (
                "topology=fattree routing_function=anca k=4 n=2 routing_delay=0",
                "`routing_delay = 0`",
            ),
            ("topology=tree4 routing_function=nca k=2 n=3", "`k = 2 (n = 3)`"),
            ("topology=qtree routing_function=nca k=4 n=2", "`k = 4 (n = 2)`"),
            ("topology=mesh routing_function=valiant num_vcs=1", "`num_vcs = 1`"),
            ("topology=torus routing_function=valiant", "`routing_function = valiant`"),
            ("topology=flatfly routing_function=ugal_xyyx", "`routing_function = ugal_xyyx`"),
            ("topology=flatfly routing_function=ran_min k=2 n=5", "`n = 5`"),
            ("topology=flatfly routing_function=ran_min c=4 xr=2", "`c = 4"),
            ("topology=flatfly routing_function=ran_min k=4 n=2 x=3 y=3", "`x = 3`"),
            (
                "topology=flatfly routing_function=xyyx k=4 n=2 x=4 y=4 num_vcs=1",
                "`num_vcs = 1`",
            ),
            ("topology=cmesh routing_function=dor", "`n = 1`"),
            ("topology=cmesh routing_function=dor n=2", "`c = 1`"),
            ("topology=cmesh routing_function=dor n=2 c=4", "`xr = 1`"),
            ("topology=cmesh routing_function=dor n=2 c=4 xr=2", "`yr = 1`"),
            ("topology=cmesh routing_function=dor c=4 xr=2 yr=2 n=3", "`n = 3`"),
            ("topology=cmesh routing_function=dor c=4 xr=2 yr=2 n=2 k=3", "`k = 3`"),
            ("topology=cmesh routing_function=dor c=4 xr=2 yr=2 n=2 x=4", "`x = 4`"),
            (
                "topology=cmesh routing_function=adaptive_xy_yx c=4 xr=2 yr=2 n=2",
                "`routing_function = adaptive_xy_yx`",
            ),
            (
                "topology=cmesh routing_function=xy_yx c=4 xr=2 yr=2 n=2 k=6",
                "`routing_function = xy_yx`",
            ),
            ("routing_function=nca", "routing_function"),
            (
                "topology=torus routing_function=dim_order num_vcs=1",
                "num_vcs",
            ),
            ("topology=torus routing_function=dor", "routing_function"),
            (
                "topology=torus routing_function=dim_order_pni",
                "routing_function",
            ),
            (
                "topology=mesh routing_function=chaos",
                "routing_function",
            ),
            ("topology=mesh routing_function=xy_yx num_vcs=1", "`num_vcs = 1`"),
            (
                "topology=torus routing_function=min_adapt num_vcs=3",
                "`num_vcs = 3`",
            ),
            (
                "topology=mesh routing_function=dim_order_ni k=4 n=2 num_vcs=15",
                "`num_vcs = 15`",
            ),
            (
                "topology=mesh routing_function=dim_order_pni k=5 n=2 num_vcs=4",
                "`num_vcs = 4`",
            ),
            (
                "topology=torus routing_function=dim_order_ni k=3 n=2 num_vcs=8",
                "`num_vcs = 8`",
            ),
            (
                "topology=mesh routing_function=romm_ni k=3 n=2 num_vcs=8",
                "`num_vcs = 8`",
            ),
            (
                "topology=mesh routing_function=dim_order_ni k=2 n=2 num_vcs=16 \
                 use_read_write=1 read_request_end_vc=2",
                "`read_request_begin_vc = 0 (read_request_end_vc = 2)`",
            ),
            (
                "topology=torus routing_function=min_adapt num_vcs=16 use_read_write=1 \
                 read_request_end_vc=2",
                "`read_request_begin_vc = 0 (read_request_end_vc = 2)`",
            ),
            (
                "topology=mesh routing_function=min_adapt num_vcs=16 use_read_write=1",
                "`write_request_begin_vc = 2",
            ),
            (
                "topology=mesh routing_function=min_adapt num_vcs=8 use_read_write=1 \
                 write_fraction=0 read_request_end_vc=1 read_reply_begin_vc=1 \
                 read_reply_end_vc=3 write_reply_begin_vc=4 write_reply_end_vc=7",
                "`read_reply_begin_vc = 1",
            ),
            ("topology=flatfly routing_function=ugal", "routing_function"),
            (
                "topology=dragonflynew routing_function=ugal k=1 n=1 num_vcs=4",
                "`num_vcs = 4`",
            ),
            ("topology=mesh routing_function=dim_order traffic=hotspot(16)", "traffic"),
            ("topology=mesh routing_function=dim_order traffic=taper64", "traffic"),
            ("topology=mesh routing_function=dim_order traffic=background", "traffic"),
            (
                "topology=mesh routing_function=dim_order traffic=background({{0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15}})",
                "traffic",
            ),
            ("topology=mesh routing_function=dim_order traffic=badperm_yarc n=1", "traffic"),
            ("topology=mesh routing_function=dim_order traffic=bad_dragon(0)", "traffic"),
            ("topology=mesh routing_function=dim_order traffic=hotspot({{1,2},{0,0}})", "traffic"),
            ("topology=mesh routing_function=dim_order traffic={}", "traffic"),
            (
                "topology=mesh routing_function=dim_order traffic=tornado({4,2,0})",
                "traffic",
            ),
            (
                "topology=mesh routing_function=dim_order k=3 traffic=bitrev",
                "traffic",
            ),
            (
                "topology=mesh routing_function=dim_order k=2 n=3 traffic=transpose",
                "traffic",
            ),
            ("topology=torus routing_function=dim_order k=2 n=20", "GiB"),
            ("topology=dragonflynew routing_function=valiant k=2", "`routing_function = valiant`"),
            ("topology=dragonflynew routing_function=min k=2 n=2", "`n = 2`"),
            ("topology=dragonflynew routing_function=min k=2 num_vcs=1", "`num_vcs = 1`"),
            ("topology=fly k=2 n=20", "GiB"),
            (
                "topology=mesh routing_function=dim_order xr=2 traffic=tornado",
                "traffic",
            ),
            (
                "topology=mesh routing_function=dim_order traffic=tornado(a)",
                "traffic",
            ),
            ("perm_seed=time traffic=randperm", "perm_seed"),
            ("vc_allocator=islip(0)", "vc_allocator"),
            ("vc_allocator=pim(0)", "`vc_allocator = pim(0)`"),
            ("sw_allocator=pim(5000)", "`sw_allocator = pim(5000)`"),
            ("sw_allocator=select(2)", "`sw_allocator = select(2)`"),
            ("traffic=bad_random", "traffic"),
            ("injection_process=poisson", "injection_process"),
            ("injection_process=on_off burst_r1=0.5", "injection_process"),
            ("injection_process=on_off burst_alpha=-1.0", "injection_process"),
            ("injection_process=on_off burst_beta=1.5", "injection_process"),
            // BookSim's default VC ranges reach VC 15; the file has 4 VCs.
            ("use_read_write=1", "read_request_begin_vc"),
            ("packet_size={{1,5}} packet_size_rate={{0,0}}", "packet_size_rate"),
            ("packet_size={{1,0}}", "packet_size"),
            ("packet_size={{}}", "packet_size"),
            ("use_read_write=1 num_vcs=16 read_reply_subnet=1", "read_reply_subnet"),
            ("use_read_write=1 num_vcs=16 read_request_size=0", "read_request_size"),
            ("use_read_write=1 num_vcs=16 write_fraction=nan", "write_fraction"),
            (
                "use_read_write=1 num_vcs=16 topology=torus routing_function=dim_order \
                 write_reply_begin_vc=3 write_reply_end_vc=3",
                "write_reply_begin_vc",
            ),
            (
                "use_read_write=1 num_vcs=16 read_request_begin_vc=4 read_request_end_vc=3",
                "read_request_begin_vc",
            ),
            ("router=event", "router"),
            ("sim_type=batch", "sim_type"),
            ("num_vcs=0", "num_vcs"),
            ("vc_alloc_delay=0", "vc_alloc_delay"),
            ("injection_rate=7", "injection_rate"),
            ("k=abc", "k"),
            ("watch_out=trace.txt", "watch_out"),
            ("watch_flits={3}", "watch_flits"),
            ("internal_speedup=0.7", "internal_speedup"),
            ("speculative=1 vc_alloc_delay=2", "vc_alloc_delay"),
        ] {
            let ov: Vec<&str> = ov.split(' ').collect();
            let ov = &ov[..];
            let e = BooksimConfig::from_text(XBAR, ov)
                .expect_err(&ov.join(" "))
                .to_string();
            assert!(e.contains(key), "{ov:?}: {e}");
        }
    }

    #[test]
    fn kncube_topologies_and_their_latency() {
        let mesh = BooksimConfig::from_text(XBAR, &["topology=mesh", "routing_function=dor"]);
        let mesh = mesh.unwrap();
        assert_eq!(mesh.topology, Topology::Mesh { k: 16, n: 1 });
        assert_eq!(mesh.link_latency, 1);
        // min_adapt with typed VC ranges: those of the kinds drawn must begin at VC 0 (the
        // write kinds are never drawn here).
        let min_adapt = [
            "topology=mesh",
            "routing_function=min_adapt",
            "k=4",
            "n=2",
            "num_vcs=8",
            "use_read_write=1",
            "write_fraction=0",
            "read_request_end_vc=1",
            "read_reply_begin_vc=0",
            "read_reply_end_vc=3",
            "write_reply_begin_vc=4",
            "write_reply_end_vc=7",
        ];
        let m = BooksimConfig::from_text(XBAR, &min_adapt).unwrap();
        assert_eq!(m.topology, Topology::MeshMinAdapt { k: 4, n: 2 });
        let torus = ["topology=torus", "routing_function=dim_order", "k=4", "n=2"];
        let t = BooksimConfig::from_text(XBAR, &torus).unwrap();
        assert_eq!(
            (t.topology, t.link_latency),
            (
                Topology::Torus {
                    k: 4,
                    n: 2,
                    balanced: false,
                    adaptive: false,
                    ni: false
                },
                2
            )
        );
        let t = BooksimConfig::from_text(XBAR, &[&torus[..], &["use_noc_latency=0"]].concat());
        assert_eq!(t.unwrap().link_latency, 1);
        let bal = [&torus[..], &["routing_function=dim_order_bal"]].concat();
        let t = BooksimConfig::from_text(XBAR, &bal).unwrap();
        assert_eq!(
            t.topology,
            Topology::Torus {
                k: 4,
                n: 2,
                balanced: true,
                adaptive: false,
                ni: false
            }
        );
        // use_noc_latency changes nothing for the fly.
        let f = BooksimConfig::from_text(XBAR, &["use_noc_latency=0"]).unwrap();
        assert_eq!(f.link_latency, 1);
    }

    #[test]
    fn cmesh_geometry() {
        let ov = [
            "topology=cmesh",
            "routing_function=dor",
            "k=4",
            "n=2",
            "c=4",
            "xr=2",
            "yr=2",
        ];
        let c = BooksimConfig::from_text(XBAR, &ov).unwrap();
        let cmesh = |noc, express| Topology::CMesh {
            k: 4,
            noc,
            express,
            xy_yx: false,
        };
        assert_eq!(c.topology, cmesh(true, true));
        assert_eq!(c.topology.nodes(), 64);
        let more = [
            &ov[..],
            &["use_noc_latency=0", "routing_function=dor_no_express"],
        ]
        .concat();
        let c = BooksimConfig::from_text(XBAR, &more).unwrap();
        assert_eq!(c.topology, cmesh(false, false));
    }

    #[test]
    fn the_fixed_trees_parse() {
        for (topo, want) in [
            ("topology=qtree", Topology::QTree { k: 4, n: 3 }),
            ("topology=tree4", Topology::Tree4 { anca: false }),
        ] {
            let ov = [topo, "routing_function=nca", "k=4", "n=3"];
            let c = BooksimConfig::from_text(XBAR, &ov).unwrap();
            assert_eq!(c.topology, want);
            assert_eq!(c.topology.nodes(), 64);
        }
        assert_eq!(
            Topology::QTree { k: 4, n: 3 }.routers_and_ports(),
            (21, 104)
        );
        assert_eq!(
            Topology::Tree4 { anca: false }.routers_and_ports(),
            (28, 192)
        );
    }

    #[test]
    fn two_phase_mesh_routings_parse() {
        for (rf, romm) in [("valiant", false), ("romm", true)] {
            let rf = format!("routing_function={rf}");
            let ov = ["topology=mesh", "k=4", "n=2", &rf];
            let c = BooksimConfig::from_text(XBAR, &ov).unwrap();
            assert_eq!(
                c.topology,
                Topology::MeshTwoPhase {
                    k: 4,
                    n: 2,
                    romm,
                    ni: false
                }
            );
            assert_eq!(c.topology.nodes(), 16);
        }
    }

    #[test]
    fn flattened_butterflies_parse() {
        let ov = [
            "topology=flatfly",
            "routing_function=xyyx",
            "k=4",
            "n=2",
            "c=4",
            "xr=2",
            "yr=2",
            "x=4",
            "y=4",
        ];
        let c = BooksimConfig::from_text(XBAR, &ov).unwrap();
        let ff = |x, xy_yx, noc| Topology::FlatFly {
            k: 4,
            n: 2,
            xr: 2,
            x,
            xy_yx,
            adaptive: false,
            valiant: false,
            noc,
        };
        assert_eq!(c.topology, ff(4, true, true));
        assert_eq!(c.topology.nodes(), 64);
        assert_eq!(c.topology.routers_and_ports(), (16, 16 * 10));
        let more = [
            &ov[..],
            &[
                "routing_function=ran_min",
                "x=8",
                "y=8",
                "use_noc_latency=0",
            ],
        ]
        .concat();
        let c = BooksimConfig::from_text(XBAR, &more).unwrap();
        assert_eq!(c.topology, ff(8, false, false));
        // Four terminals a side run without the layout's latencies.
        let wide = [&more[..], &["c=16", "xr=4", "yr=4"]].concat();
        assert_eq!(
            BooksimConfig::from_text(XBAR, &wide)
                .unwrap()
                .topology
                .nodes(),
            256
        );
    }

    /// BookSim's patterns on 16 nodes (k = 4, n = 2), worked by hand from `traffic.cpp`.
    #[test]
    fn permutation_patterns() {
        let table = |t: &Traffic| t.table(16).unwrap().unwrap();
        // 5 = 0101: complement 1010, transpose (swap 2-bit halves) 0101, reverse 1010,
        // rotate left 1010.
        assert_eq!(table(&Traffic::BitComp)[5], 10);
        assert_eq!(table(&Traffic::Transpose)[5], 5);
        assert_eq!(table(&Traffic::Transpose)[1], 4);
        assert_eq!(table(&Traffic::BitRev)[1], 8);
        assert_eq!(table(&Traffic::Shuffle)[9], 3);
        // Tornado on radix 4 moves each digit by (4 + 1) / 2 - 1 = 1; on radix 5 by 2.
        let tornado = Traffic::Tornado { k: 4, n: 2, xr: 1 };
        assert_eq!(table(&tornado)[3], 4);
        assert_eq!(table(&tornado)[6], 4 * 2 + 3);
        let t5 = Traffic::Tornado { k: 5, n: 2, xr: 1 }
            .table(25)
            .unwrap()
            .unwrap();
        assert_eq!(t5[4 + 5 * 3], 1);
        assert_eq!(
            table(&Traffic::Neighbor { k: 4, n: 2, xr: 1 }),
            table(&tornado)
        );
        // xr = 2 doubles the radix: digits beyond the nodes are refused.
        assert!(Traffic::Tornado { k: 4, n: 2, xr: 2 }.table(16).is_err());
        assert_eq!(Traffic::Uniform.table(16), Ok(None));
        for t in [
            Traffic::BitComp,
            Traffic::Transpose,
            Traffic::BitRev,
            Traffic::Shuffle,
            tornado,
            Traffic::RandPerm { seed: 0 },
            Traffic::RandPerm { seed: 7 },
        ] {
            let mut seen = table(&t);
            seen.sort_unstable();
            assert_eq!(
                seen,
                (0..16).collect::<Vec<u32>>(),
                "{t:?} is a permutation"
            );
        }
    }

    /// BookSim's `tokenize_str` and `atoi`, as `TrafficPattern::New` uses them.
    #[test]
    fn traffic_parameters_are_read_as_booksim_reads_them() {
        assert_eq!(tokenize(""), Vec::<String>::new());
        assert_eq!(tokenize("4,2,1"), vec!["4,2,1"]);
        assert_eq!(tokenize("{4,2,1}"), vec!["4", "2", "1"]);
        assert_eq!(tokenize("{{0,5}},{{1,3}}"), vec!["{0,5}"]);
        assert_eq!(tokenize("{{0,5},{1,3}}"), vec!["{0,5}", "{1,3}"]);
        assert_eq!(tokenize("{a,,b}"), vec!["a", "b"]);
        assert_eq!(
            (atoi("4,2,1"), atoi(" -3x"), atoi("x"), atoi("+7")),
            (4, -3, 0, 7)
        );
        let cfg = |t: &str| {
            let tr = format!("traffic={t}");
            let ov = [
                "topology=mesh",
                "routing_function=dim_order",
                "k=4",
                "n=2",
                &tr,
            ];
            BooksimConfig::from_text(XBAR, &ov).unwrap().traffic
        };
        // One parameter, 4: n and xr come from the configuration.
        assert_eq!(
            cfg("tornado(4,1,3)"),
            Traffic::Tornado { k: 4, n: 2, xr: 1 }
        );
        assert_eq!(
            cfg("tornado({2,1,1})"),
            Traffic::Tornado { k: 2, n: 1, xr: 1 }
        );
        assert_eq!(cfg("{bitcomp,uniform}"), Traffic::BitComp);
        assert_eq!(cfg("randperm(5)"), Traffic::RandPerm { seed: 5 });
        let mut excluded = vec![false; 16];
        excluded[0] = true;
        assert_eq!(
            cfg("background({0,5,6})"),
            Traffic::Background {
                excluded: excluded.clone()
            }
        );
        excluded[5] = true;
        excluded[6] = true;
        assert_eq!(
            cfg("background({{0,5,6}})"),
            Traffic::Background { excluded }
        );
        let spots = |spots: Vec<u32>, rates: Vec<u32>| Traffic::HotSpot { spots, rates };
        // `hotspot({{0,5}},{{1,3}})` is one parameter (the parameter string does not start
        // with a brace): the rates default to 1.
        assert_eq!(
            cfg("hotspot({{0,5}},{{1,3}})"),
            spots(vec![0, 5], vec![1, 1])
        );
        assert_eq!(cfg("hotspot({{0,5},{1,3}})"), spots(vec![0, 5], vec![1, 3]));
        assert_eq!(
            cfg("hotspot({{0,5,9},2})"),
            spots(vec![0, 5, 9], vec![2, 2, 2])
        );
        // An unset hotspot is drawn from Knuth's default start (seed 314159).
        let first = KnuthInt::new(314_159).int(15);
        assert_eq!(cfg("hotspot"), spots(vec![first], vec![1]));
    }

    /// The random patterns' destinations, drawn as `traffic.cpp` draws them.
    #[test]
    fn random_patterns_draw_as_booksim_does() {
        let draws = |t: &Traffic, nodes: u32| {
            let (mut a, mut b) = (KnuthInt::new(3), KnuthInt::new(3));
            let got: Vec<u32> = (0..200)
                .map(|i| t.random_dest(i % nodes, nodes, &mut a))
                .collect();
            (got, (0..400).map(|_| b.next_raw()).collect::<Vec<u32>>())
        };
        let (got, raw) = draws(&Traffic::Diagonal, 16);
        for (i, &d) in got.iter().enumerate() {
            let s = i as u32 % 16;
            assert_eq!(d, if raw[i] % 3 == 0 { (s + 1) % 16 } else { s });
        }
        let (got, raw) = draws(&Traffic::Asymmetric, 16);
        for (i, &d) in got.iter().enumerate() {
            assert_eq!(d, i as u32 % 8 + 8 * (raw[i] % 2));
        }
        let (got, _) = draws(&Traffic::BadPermYarc { k: 4, xr: 1 }, 16);
        for (i, &d) in got.iter().enumerate() {
            assert_eq!(d % 4, (i as u32 % 16) / 4, "the source's row");
        }
        let mut excluded = vec![false; 16];
        excluded[3] = true;
        let (got, _) = draws(&Traffic::Background { excluded }, 16);
        assert!(got.iter().all(|&d| d != 3 && d < 16));
        let one = Traffic::HotSpot {
            spots: vec![7],
            rates: vec![1],
        };
        assert!(draws(&one, 16).0.iter().all(|&d| d == 7));
        assert!(draws(&Traffic::Taper64, 64).0.iter().all(|&d| d < 64));
    }

    /// `on_off` as `InjectionProcess::New` reads it: parameters or `burst_*` keys, exactly one
    /// negative; initial states from the unseeded generator (after any unset hotspots), or,
    /// with four or more parameters, from the *third* one.
    #[test]
    fn on_off_parameters() {
        let inj = |ov: &[&str]| BooksimConfig::from_text(XBAR, ov).unwrap().injection;
        let mut unseeded = KnuthInt::new(314_159);
        let drawn: Vec<bool> = (0..16).map(|_| unseeded.int(1) != 0).collect();
        assert_eq!(
            inj(&["injection_process=on_off"]),
            Injection::OnOff(OnOff {
                alpha: 0.5,
                beta: 0.5,
                r1: -1.0,
                initial: drawn.clone()
            })
        );
        // One unset hotspot is drawn first, from the same stream.
        let mut unseeded = KnuthInt::new(314_159);
        unseeded.int(15);
        let after: Vec<bool> = (0..16).map(|_| unseeded.int(1) != 0).collect();
        let Injection::OnOff(p) = inj(&["injection_process=on_off", "traffic=hotspot"]) else {
            panic!("on_off")
        };
        assert_eq!(p.initial, after);
        assert_ne!(after, drawn);
        // After randperm: the rest of the permutation's buffer (16 of its 100 numbers drawn),
        // whatever the pattern's parameter or perm_seed says.
        let mut perm = KnuthInt::new(5);
        for _ in 0..16 {
            perm.next_raw();
        }
        let rest: Vec<bool> = (0..16).map(|_| perm.int(1) != 0).collect();
        for o in [
            &[
                "injection_process=on_off",
                "traffic=randperm",
                "perm_seed=5",
            ][..],
            &[
                "injection_process=on_off",
                "traffic=randperm(5)",
                "perm_seed=9",
            ],
        ] {
            let Injection::OnOff(p) = inj(o) else {
                panic!("on_off")
            };
            assert_eq!(p.initial, rest, "{o:?}");
        }
        assert_ne!(rest, drawn);
        let Injection::OnOff(p) = inj(&["injection_process=on_off({0.25,-1.0,0.75,{1,0}})"]) else {
            panic!("on_off")
        };
        assert_eq!((p.alpha, p.beta, p.r1), (0.25, -1.0, 0.75));
        // atoi("0.75") = 0: every source starts off.
        assert_eq!(p.initial, vec![false; 16]);
        assert_eq!(
            inj(&["injection_process={bernoulli}"]),
            Injection::Bernoulli
        );
        assert_eq!(
            (atof("0.25x"), atof("-1"), atof("abc"), atof(" 2e-1")),
            (0.25, -1.0, 0.0, 0.2)
        );
    }

    /// The random permutation is BookSim's scan (the (ind + 1)-th unassigned source gets the
    /// next destination), found here with a Fenwick tree.
    #[test]
    fn random_permutation_is_booksims_scan() {
        for (nodes, seed) in [(1usize, 0i64), (2, 3), (16, 0), (37, 7), (256, 12345)] {
            let mut rng = super::super::rng::KnuthInt::new(seed);
            let mut dest = vec![-1i64; nodes];
            for i in 0..nodes {
                let ind = rng.int((nodes - 1 - i) as u32) as usize;
                let (mut j, mut cnt) = (0, 0);
                while cnt < ind || dest[j] != -1 {
                    if dest[j] == -1 {
                        cnt += 1;
                    }
                    j += 1;
                }
                dest[j] = i as i64;
            }
            let want: Vec<u32> = dest.iter().map(|&d| d as u32).collect();
            let got = Traffic::RandPerm { seed }.table(nodes).unwrap().unwrap();
            assert_eq!(got, want, "{nodes} nodes, seed {seed}");
        }
    }

    #[test]
    fn missing_allocator_is_booksims_islip_default() {
        let text = "topology = fly; k = 4; n = 1; routing_function = dest_tag;";
        let c = BooksimConfig::from_text(text, &[]).unwrap();
        assert_eq!(c.router.vc_allocator, AllocatorKind::Islip { iters: 1 });
        assert_eq!(c.router.sw_allocator, AllocatorKind::Islip { iters: 1 });
        // The iq router builds its allocators without the configuration: alloc_iters is
        // ignored, only `islip(N)` sets the passes.
        let c =
            BooksimConfig::from_text(text, &["alloc_iters=3", "sw_allocator=islip(2)"]).unwrap();
        assert_eq!(c.router.vc_allocator, AllocatorKind::Islip { iters: 1 });
        assert_eq!(c.router.sw_allocator, AllocatorKind::Islip { iters: 2 });
        let c = BooksimConfig::from_text(text, &["vc_allocator=separable_input_first"]).unwrap();
        assert_eq!(c.router.vc_allocator, AllocatorKind::SeparableInputFirst);
        // pim likewise: one pass unless written `pim(N)`.
        let c = BooksimConfig::from_text(
            text,
            &["alloc_iters=3", "vc_allocator=pim", "sw_allocator=pim(3)"],
        )
        .unwrap();
        assert_eq!(c.router.vc_allocator, AllocatorKind::Pim { iters: 1 });
        assert_eq!(c.router.sw_allocator, AllocatorKind::Pim { iters: 3 });
        let c = BooksimConfig::from_text(text, &["vc_allocator=select(1)", "sw_allocator=select"])
            .unwrap();
        assert_eq!(c.router.vc_allocator, AllocatorKind::Select);
        assert_eq!(c.router.sw_allocator, AllocatorKind::Select);
    }

    impl BooksimConfig {
        fn internal_speedup_str(&self) -> String {
            format!("{}", self.router.internal_speedup)
        }
    }
}
