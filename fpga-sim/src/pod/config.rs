//! The pod file (`spec-notes/simulator.md#pod-file`): one TOML description of a pod that both
//! simulates (podlink-sim) and deploys (the switch configuration is exported from it).
//!
//! Parsing is strict: an unknown key, a wrong type or an out-of-range value is an error naming
//! the file, the line and the field. Nothing here panics on any input.

pub use super::faults::FaultsParams;
use serde::Deserialize;
use std::fmt;
use std::path::Path;

/// A pod-file error: where and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodError {
    /// The file (or preset) name.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The field's dotted path, when known.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for PodError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if let Some(k) = &self.field {
            write!(f, ": field `{k}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for PodError {}

/// The whole pod file.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PodFile {
    /// Name of the pod.
    pub name: String,
    /// Free text.
    #[serde(default)]
    pub description: String,
    /// The topology.
    pub topology: Topology,
    /// Link (PHY) parameters, the same for every link.
    #[serde(default)]
    pub link: LinkParams,
    /// Switch pipeline parameters, the same for every switch.
    #[serde(default)]
    pub switch: SwitchParams,
    /// Accelerator (endpoint and completer) parameters.
    #[serde(default)]
    pub accelerator: AccelParams,
    /// Latency budgets checked by every run.
    #[serde(default)]
    pub budgets: Budgets,
    /// Partitions (virtual pods). Empty: one partition holding every accelerator.
    #[serde(default)]
    pub partitions: Vec<Partition>,
    /// Workloads. Empty: the default workload (uniform random 64 B reads and writes).
    #[serde(default)]
    pub workloads: Vec<Workload>,
    /// Route overrides, applied after the topology's own routes (for experiments and for
    /// conformance scenarios; `podlink-sim verify` refuses missing routes and loops).
    #[serde(default)]
    pub routes: Vec<RouteOverride>,
    /// Timed faults every run of the pod applies (`[faults]`, [`FaultsParams`]; default
    /// none).
    #[serde(default)]
    pub faults: FaultsParams,
}

/// Replace the route of some destinations at one switch.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RouteOverride {
    /// Switch index (as `podlink-sim verify` numbers them).
    pub switch: u32,
    /// Destination accelerators, e.g. "0-31,40".
    pub dest: String,
    /// Egress ports (empty: no route).
    pub ports: Vec<u32>,
}

/// Pod topology.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Topology {
    /// One switch; every accelerator has `ports_per_accel` ports into it.
    SingleSwitch {
        /// Accelerators (1..=1024).
        accelerators: u32,
        /// Ports from each accelerator into the switch.
        #[serde(default = "one")]
        ports_per_accel: u32,
    },
    /// Single tier, several switch planes: each accelerator has `ports_per_plane` ports into each
    /// of `planes` switches (UALink pods, NVL72).
    MultiPlane {
        /// Accelerators (1..=1024).
        accelerators: u32,
        /// Switch planes.
        planes: u32,
        /// Ports from each accelerator into each plane.
        #[serde(default = "one")]
        ports_per_plane: u32,
    },
    /// Two tiers: leaves with accelerators below, spines above (CloudMatrix384-like).
    LeafSpine {
        /// Leaf switches.
        leaves: u32,
        /// Spine switches.
        spines: u32,
        /// Accelerators under each leaf (one port each into their leaf).
        accels_per_leaf: u32,
        /// Links from each leaf to each spine.
        #[serde(default = "one")]
        uplinks_per_spine: u32,
    },
}

fn one() -> u32 {
    1
}

/// Link parameters. Defaults from protocol-facts §1 (see spec-notes/simulator.md).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LinkParams {
    /// Lane rate in Gb/s (212.5: "200G" PAM4 lanes).
    pub lane_gbps: f64,
    /// Lanes per port: 1, 2 or 4.
    pub lanes: u32,
    /// RS(544,514) FEC interleave: 1, 2 or 4 codewords.
    pub fec_interleave: u32,
    /// FEC decoder pipeline latency, ns.
    pub fec_decode_ns: f64,
    /// PCS/PMA transmit latency, ns.
    pub phy_tx_ns: f64,
    /// PCS/PMA receive latency (excluding FEC), ns.
    pub phy_rx_ns: f64,
    /// Cable length, m.
    pub cable_m: f64,
    /// Propagation delay, ns per metre.
    pub ns_per_m: f64,
    /// Bit error rate applied to the bytes on the wire (0 = none).
    pub ber: f64,
    /// Link-level retry: send a standalone Ack this long after the first unacknowledged
    /// delivery when no payload flit carries one sooner, ns.
    pub ack_delay_ns: f64,
    /// TL credit return policy (the protocol's `CreditReceiver`): return a receiver's freed
    /// credits at once when a class has this many pending (1 = every freed buffer at once).
    pub credit_return_threshold: u32,
    /// … otherwise this long after the first pending credit, ns.
    pub credit_return_ns: f64,
    /// Address compression (`wire::AddrCache`, a 4-way cache of 1 MB regions on each side
    /// of every link): accelerators' requesters and switch ports send eligible requests
    /// compressed; switch ports expand what arrives compressed (the caches are per link).
    pub compress_requests: bool,
    /// Compressed responses (FTYPE 0x4 and 0x5): completers send an OK response compressed
    /// where nothing is lost (`wire::encode_response`); they carry no source ID, need no
    /// cache, and switches forward them as they are.
    pub compress_responses: bool,
}

impl Default for LinkParams {
    fn default() -> Self {
        LinkParams {
            lane_gbps: 212.5,
            lanes: 4,
            fec_interleave: 1,
            fec_decode_ns: 10.0,
            phy_tx_ns: 10.0,
            phy_rx_ns: 10.0,
            cable_m: 2.0,
            ns_per_m: 5.0,
            ber: 0.0,
            ack_delay_ns: 1000.0,
            credit_return_threshold: 8,
            credit_return_ns: 100.0,
            compress_requests: false,
            compress_responses: false,
        }
    }
}

/// Switch pipeline parameters.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SwitchParams {
    /// Core clock, MHz.
    pub clock_mhz: f64,
    /// Datapath width, bytes per cycle.
    pub datapath_bytes: u32,
    /// Parse stage, cycles.
    pub parse_cycles: u32,
    /// Route lookup, cycles.
    pub route_cycles: u32,
    /// Arbitration (VC and switch allocation), cycles.
    pub arb_cycles: u32,
    /// Crossbar traversal, cycles.
    pub xbar_cycles: u32,
    /// Egress stage, cycles.
    pub egress_cycles: u32,
    /// Forward a TL flit once its header is in (true) or once all of it is (false).
    pub cut_through: bool,
    /// Buffer per input port and VC, in 64 B TL flits.
    pub buffer_flits_per_vc: u32,
    /// Adaptive choice among allowed egress ports (false: deterministic hashing).
    pub adaptive: bool,
    /// Residence limit, µs: a frame that has been in a switch longer than this is dropped
    /// instead of sent on (`spec-notes/switch.md#residence-limit`). Unset: the accelerators'
    /// request timeout (a frame that old belongs to a request its requester has given up).
    pub max_residence_us: Option<f64>,
}

impl Default for SwitchParams {
    fn default() -> Self {
        SwitchParams {
            clock_mhz: 1000.0,
            datapath_bytes: 64,
            parse_cycles: 2,
            route_cycles: 2,
            arb_cycles: 2,
            xbar_cycles: 2,
            egress_cycles: 2,
            cut_through: true,
            buffer_flits_per_vc: 256,
            adaptive: true,
            max_residence_us: None,
        }
    }
}

/// Accelerator parameters.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct AccelParams {
    /// Completer (memory) access latency, ns.
    pub completer_ns: f64,
    /// Requester/endpoint processing latency each way (TL+DL), ns.
    pub endpoint_ns: f64,
    /// Request timeout, µs.
    pub timeout_us: f64,
    /// Bytes of simulated memory each accelerator exposes.
    pub memory_bytes: u64,
    /// How each accelerator port is modelled.
    pub model: AccelModel,
}

/// How an accelerator port is modelled (`spec-notes/simulator.md#accelerators`).
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum AccelModel {
    /// The protocol crate's `txn::Endpoint` per port, unchanged: the simulator hands it DL
    /// flits, time and operations only (a request executes on arrival and its response
    /// waits the completer's latency; the port grants at most as many request commands as
    /// its completer has response slots).
    #[default]
    Endpoint,
    /// The protocol crate's requester, completer, TL packer and unpacker, credit sender and
    /// receiver and `UaLink`, each driven by the simulator (a request waits the completer's
    /// latency before it executes; the completer back-pressures when its slots are full;
    /// the port grants `buffer_flits_per_vc` request commands per VC). The model before
    /// session 17, kept for comparison.
    Composed,
}

impl Default for AccelParams {
    fn default() -> Self {
        AccelParams {
            completer_ns: 50.0,
            endpoint_ns: 10.0,
            timeout_us: 100.0,
            memory_bytes: 1 << 30,
            model: AccelModel::Endpoint,
        }
    }
}

/// Latency budgets.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Budgets {
    /// Switch port-to-port latency, ns.
    pub switch_port_to_port_ns: f64,
    /// 64 B read round trip, ns.
    pub read_rtt_ns: f64,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            switch_port_to_port_ns: 100.0,
            read_rtt_ns: 1000.0,
        }
    }
}

/// A partition: a set of accelerators that may talk to each other.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Partition {
    /// Partition ID (0..=1023).
    pub id: u16,
    /// Accelerator ranges, e.g. "0-31,40,48-63".
    pub accelerators: String,
    /// Weight in each switch's per-partition weighted round robin.
    #[serde(default = "one")]
    pub weight: u32,
    /// Optional rate cap per egress port, Gb/s.
    #[serde(default)]
    pub rate_cap_gbps: Option<f64>,
}

/// A workload.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Pattern.
    pub pattern: Pattern,
    /// Partition the workload runs in (default: the first).
    #[serde(default)]
    pub partition: Option<u16>,
    /// Bytes per operation (64..=4096; split into ≤256 B requests).
    #[serde(default = "default_msg")]
    pub message_bytes: u32,
    /// Offered load per accelerator, as a fraction of one port's line rate.
    #[serde(default = "default_load")]
    pub offered_load: f64,
    /// Fraction of reads.
    #[serde(default = "default_half")]
    pub read: f64,
    /// Fraction of writes.
    #[serde(default = "default_half")]
    pub write: f64,
    /// Fraction of atomics (fetch-add on 8 B).
    #[serde(default)]
    pub atomic: f64,
    /// Hotspot/incast target accelerator.
    #[serde(default)]
    pub target: Option<u32>,
    /// Trace file (CSV) for `pattern = "trace"`.
    #[serde(default)]
    pub trace: Option<String>,
    /// Virtual channel (0..=3) the workload's requests travel on.
    #[serde(default)]
    pub vc: u8,
    /// Accelerators that issue this workload, e.g. "0-3" (default: every member of its
    /// partition); destinations are still drawn from every member.
    #[serde(default)]
    pub sources: Option<String>,
}

fn default_msg() -> u32 {
    64
}
fn default_load() -> f64 {
    0.3
}
fn default_half() -> f64 {
    0.5
}

/// Traffic pattern.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Uniform random destination (not self).
    Uniform,
    /// A fixed random permutation.
    Permutation,
    /// Everyone sends to `target` (incast).
    Hotspot,
    /// All-to-all (expert parallel): each source cycles over every other accelerator.
    AllToAll,
    /// Ring all-reduce (tensor parallel): each sends to its ring neighbour.
    RingAllreduce,
    /// Replay of an operation trace from CSV.
    Trace,
}

/// Find the 1-based line of a dotted key path (`a.b.c`, `workloads.2.read`) in TOML text:
/// the deepest part of the path that exists.
pub fn line_of(text: &str, path: &str) -> Option<usize> {
    enum Node<'a> {
        Item(&'a toml_edit::Item),
        Table(&'a toml_edit::Table),
    }
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let mut node = Node::Table(doc.as_table());
    let mut span = None;
    for part in path.split('.') {
        let next = match (&node, part.parse::<usize>()) {
            (Node::Item(toml_edit::Item::ArrayOfTables(a)), Ok(i)) => a.get(i).map(Node::Table),
            (Node::Item(it), Ok(i)) => it
                .as_array()
                .and_then(|a| a.get(i))
                .map(|v| (v.span(), ()))
                .map(|(s, ())| {
                    span = s.or(span.clone());
                    None
                })
                .unwrap_or(None),
            (Node::Item(it), Err(_)) => it.get(part).map(Node::Item),
            (Node::Table(t), _) => t.get(part).map(Node::Item),
        };
        match next {
            Some(n) => {
                let s = match &n {
                    Node::Item(i) => i.span(),
                    Node::Table(t) => t.span(),
                };
                span = s.or(span);
                node = n;
            }
            None => break,
        }
    }
    span.map(|s| offset_to_line(text, s.start))
}

/// The dotted path of the key at byte `off` of `text` (the key itself, or its value), for a
/// parse error the deserializer reports by position only (a value of the wrong type, an
/// unknown key): `link.compress_requests`, `workloads.1.pattern`.
fn field_at(text: &str, off: usize) -> Option<String> {
    fn inside(span: Option<std::ops::Range<usize>>, off: usize) -> bool {
        span.is_some_and(|s| s.contains(&off))
    }
    fn table(t: &toml_edit::Table, off: usize, path: &str) -> Option<String> {
        for (k, item) in t.iter() {
            let here = if path.is_empty() {
                k.to_string()
            } else {
                format!("{path}.{k}")
            };
            match item {
                toml_edit::Item::Table(sub) => {
                    if let Some(f) = table(sub, off, &here) {
                        return Some(f);
                    }
                }
                toml_edit::Item::ArrayOfTables(a) => {
                    for (i, sub) in a.iter().enumerate() {
                        if let Some(f) = table(sub, off, &format!("{here}.{i}")) {
                            return Some(f);
                        }
                    }
                }
                _ => {
                    if inside(t.key(k).and_then(toml_edit::Key::span), off)
                        || inside(item.span(), off)
                    {
                        return Some(here);
                    }
                }
            }
        }
        None
    }
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    table(doc.as_table(), off, "")
}

fn offset_to_line(text: &str, off: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(off)
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Largest pod file accepted (bytes).
pub const MAX_POD_FILE: u64 = 1 << 20;

impl PodFile {
    /// The switches' residence limit, ps (`switch.max_residence_us`, else the request
    /// timeout).
    pub fn max_residence_ps(&self) -> u64 {
        let us = self
            .switch
            .max_residence_us
            .unwrap_or(self.accelerator.timeout_us);
        (us * 1e6).round() as u64
    }

    /// How long a request may still be on its way through one switch and the link after it,
    /// ps: the residence limit in the switch's queues, and then what the link may take: two
    /// hold limits and two link latencies (a frame the switch handed the link waits at most
    /// one hold limit to be taken and one more to be acknowledged, or the link is reset,
    /// [`PodFile::link_hold_limit_ps`]; then it arrives), at least a request timeout (a link
    /// down that long is retrained, its replay buffer emptied). The simulator's bound on a given-up
    /// request's life in the fabric is this per switch on its path
    /// (`Sim::fabric_residence_ps`), and its switches settle for it
    /// (`spec-notes/switch.md#settling`).
    pub fn hop_residence_ps(&self) -> u64 {
        let timeout = crate::pod::timing::ns(self.accelerator.timeout_us * 1000.0).as_ps();
        let latency = crate::pod::timing::LinkTiming::new(&self.link)
            .flit_latency()
            .as_ps();
        let link = self
            .link_hold_limit_ps()
            .saturating_add(latency)
            .saturating_mul(2)
            .max(timeout);
        self.max_residence_ps().saturating_add(link)
    }

    /// The link-level retry settings every link end of the pod runs: the protocol's
    /// defaults with the pod's flit time and ack delay, podlink's own timers stretched for
    /// the link's round trip (`spec-notes/link.md#timers-and-link-length`).
    pub fn link_retry_config(&self) -> podlink_protocol::retry::Config {
        let lt = crate::pod::timing::LinkTiming::new(&self.link);
        let mut c = podlink_protocol::retry::Config {
            flit_time: lt.serialisation,
            ack_delay: crate::pod::timing::ns(self.link.ack_delay_ns),
            ..podlink_protocol::retry::Config::default()
        };
        c = c.for_round_trip(lt.flit_latency().saturating_mul(2));
        c
    }

    /// How long a link may hold a TL flit, ps (`UaLinkConfig::hold_limit`,
    /// `spec-notes/simulator.md#links`): a request timeout less two link latencies, as long
    /// as a link may stay down and still replay what it held (a longer outage retrains it);
    /// but at least two of the link's tail-loss probe times, so that a link that loses a
    /// flit now and then recovers it by itself.
    pub fn link_hold_limit_ps(&self) -> u64 {
        let timeout = crate::pod::timing::ns(self.accelerator.timeout_us * 1000.0).as_ps();
        let latency = crate::pod::timing::LinkTiming::new(&self.link)
            .flit_latency()
            .as_ps();
        let probe = self.link_retry_config().tail_probe.map_or(0, |d| d.as_ps());
        timeout
            .saturating_sub(latency.saturating_mul(2))
            .max(probe.saturating_mul(2))
    }

    /// Parse pod-file text; `file` names it in errors.
    ///
    /// # Errors
    /// Syntax, unknown key, type and range errors, each naming file, line and field.
    pub fn parse(text: &str, file: &str) -> Result<PodFile, PodError> {
        let pod: PodFile = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| offset_to_line(text, s.start));
            PodError {
                file: file.to_string(),
                line,
                field: e.span().and_then(|s| field_at(text, s.start)),
                message: e.message().trim().to_string(),
            }
        })?;
        pod.validate()
            .and_then(|()| pod.validate_faults())
            .map_err(|(field, message)| PodError {
                file: file.to_string(),
                line: line_of(text, &field),
                field: Some(field),
                message,
            })?;
        Ok(pod)
    }

    /// Check a pod built or changed in code as strictly as [`PodFile::parse`] checks a file.
    ///
    /// # Errors
    /// The first range or consistency error, naming the field (`file` names the pod).
    pub fn check(&self, file: &str) -> Result<(), PodError> {
        self.validate()
            .and_then(|()| self.validate_faults())
            .map_err(|(field, message)| PodError {
                file: file.to_string(),
                line: None,
                field: Some(field),
                message,
            })
    }

    /// Read and parse a pod file.
    ///
    /// # Errors
    /// I/O errors (naming the file), a file over 1 MiB, and everything [`PodFile::parse`] refuses.
    pub fn load(path: &Path) -> Result<PodFile, PodError> {
        let file = path.display().to_string();
        let err = |m: String| PodError {
            file: file.clone(),
            line: None,
            field: None,
            message: m,
        };
        let meta = std::fs::metadata(path).map_err(|e| err(e.to_string()))?;
        if meta.len() > MAX_POD_FILE {
            return Err(err(format!("larger than {MAX_POD_FILE} bytes")));
        }
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        PodFile::parse(&text, &file)
    }

    /// The fault plan of the `[faults]` section (none if there is none). A pod that
    /// [`PodFile::parse`] or [`PodFile::check`] accepted always has a plan.
    pub fn fault_plan(&self) -> crate::sim::fault::FaultPlan {
        self.faults.plan().unwrap_or_default()
    }

    /// The `[faults]` section: every event well formed and naming switches, ports and
    /// accelerators the pod has (after [`PodFile::validate`], which the fabric needs).
    fn validate_faults(&self) -> Result<(), (String, String)> {
        if self.faults == FaultsParams::default() {
            return Ok(());
        }
        let plan = self.faults.plan()?;
        let fabric = crate::pod::topology::Fabric::build(self);
        crate::sim::validate_faults(&plan, &fabric).map_err(|e| match e {
            crate::sim::SimError::Fault { index, message } => {
                (format!("faults.events.{index}"), message)
            }
            other => ("faults".to_string(), other.to_string()),
        })
    }

    /// Number of accelerators.
    pub fn accelerators(&self) -> u32 {
        match self.topology {
            Topology::SingleSwitch { accelerators, .. } => accelerators,
            Topology::MultiPlane { accelerators, .. } => accelerators,
            Topology::LeafSpine {
                leaves,
                accels_per_leaf,
                ..
            } => leaves.saturating_mul(accels_per_leaf),
        }
    }

    /// Number of switches and the port count of each.
    pub fn switch_ports(&self) -> Vec<u32> {
        let n = self.accelerators();
        match self.topology {
            Topology::SingleSwitch {
                ports_per_accel, ..
            } => vec![n.saturating_mul(ports_per_accel)],
            Topology::MultiPlane {
                planes,
                ports_per_plane,
                ..
            } => {
                vec![n.saturating_mul(ports_per_plane); planes as usize]
            }
            Topology::LeafSpine {
                leaves,
                spines,
                accels_per_leaf,
                uplinks_per_spine,
            } => {
                let mut v = vec![accels_per_leaf + spines * uplinks_per_spine; leaves as usize];
                v.extend(std::iter::repeat_n(
                    leaves * uplinks_per_spine,
                    spines as usize,
                ));
                v
            }
        }
    }

    /// Semantic checks: `Err((field path, message))`.
    fn validate(&self) -> Result<(), (String, String)> {
        let e = |f: &str, m: String| Err((f.to_string(), m));
        let n = self.accelerators();
        if n == 0 || n > 1024 {
            return e("topology", format!("{n} accelerators: must be 1..=1024"));
        }
        match self.topology {
            Topology::SingleSwitch {
                ports_per_accel, ..
            } => {
                // An accelerator's 2048 tags are split 512 per port into one switch.
                if !(1..=4).contains(&ports_per_accel) {
                    return e(
                        "topology.ports_per_accel",
                        format!("{ports_per_accel}: must be 1..=4 (512 of the 2048 tags per port)"),
                    );
                }
            }
            Topology::MultiPlane {
                planes,
                ports_per_plane,
                ..
            } => {
                if !(1..=32).contains(&planes) {
                    return e("topology.planes", format!("{planes}: must be 1..=32"));
                }
                if !(1..=4).contains(&ports_per_plane) {
                    return e(
                        "topology.ports_per_plane",
                        format!("{ports_per_plane}: must be 1..=4 (512 of the 2048 tags per port)"),
                    );
                }
            }
            Topology::LeafSpine {
                leaves,
                spines,
                accels_per_leaf,
                uplinks_per_spine,
            } => {
                if !(1..=64).contains(&leaves) {
                    return e("topology.leaves", format!("{leaves}: must be 1..=64"));
                }
                if !(1..=64).contains(&spines) {
                    return e("topology.spines", format!("{spines}: must be 1..=64"));
                }
                if accels_per_leaf == 0 {
                    return e("topology.accels_per_leaf", "must be at least 1".into());
                }
                if !(1..=8).contains(&uplinks_per_spine) {
                    return e(
                        "topology.uplinks_per_spine",
                        format!("{uplinks_per_spine}: must be 1..=8"),
                    );
                }
            }
        }
        let l = &self.link;
        if !(l.lane_gbps.is_finite() && l.lane_gbps > 0.0 && l.lane_gbps <= 2000.0) {
            return e(
                "link.lane_gbps",
                format!("{}: must be in (0, 2000]", l.lane_gbps),
            );
        }
        if ![1, 2, 4].contains(&l.lanes) {
            return e("link.lanes", format!("{}: must be 1, 2 or 4", l.lanes));
        }
        if ![1, 2, 4].contains(&l.fec_interleave) {
            return e(
                "link.fec_interleave",
                format!("{}: must be 1, 2 or 4", l.fec_interleave),
            );
        }
        for (name, v) in [
            ("link.fec_decode_ns", l.fec_decode_ns),
            ("link.phy_tx_ns", l.phy_tx_ns),
            ("link.phy_rx_ns", l.phy_rx_ns),
            ("link.cable_m", l.cable_m),
            ("link.ns_per_m", l.ns_per_m),
            ("link.ack_delay_ns", l.ack_delay_ns),
            ("link.credit_return_ns", l.credit_return_ns),
            ("accelerator.completer_ns", self.accelerator.completer_ns),
            ("accelerator.endpoint_ns", self.accelerator.endpoint_ns),
            (
                "budgets.switch_port_to_port_ns",
                self.budgets.switch_port_to_port_ns,
            ),
            ("budgets.read_rtt_ns", self.budgets.read_rtt_ns),
        ] {
            if !(v.is_finite() && (0.0..=1e6).contains(&v)) {
                return e(name, format!("{v}: must be a finite number in [0, 1e6]"));
            }
        }
        if !(1..=u32::from(u16::MAX)).contains(&l.credit_return_threshold) {
            return e(
                "link.credit_return_threshold",
                format!("{}: must be 1..=65535", l.credit_return_threshold),
            );
        }
        if !(l.ber.is_finite() && (0.0..1e-2).contains(&l.ber)) {
            return e("link.ber", format!("{}: must be in [0, 0.01)", l.ber));
        }
        let t = self.accelerator.timeout_us;
        if !(t.is_finite() && t > 0.0 && t <= 1e6) {
            return e(
                "accelerator.timeout_us",
                format!("{t}: must be in (0, 1e6]"),
            );
        }
        // The workload address plan (`workload.rs`): a 64 KiB window per possible source, then
        // the shared atomic counter; addresses are 57 bits on the wire.
        let m = self.accelerator.memory_bytes;
        let need = crate::workload::ATOMIC_COUNTER_ADDR + 64;
        if !(need..=1 << 57).contains(&m) {
            return e(
                "accelerator.memory_bytes",
                format!(
                    "{m}: must be {need}..={} (the workloads use a 64 KiB window per source \
                     and an atomic counter after them)",
                    1u64 << 57
                ),
            );
        }
        let s = &self.switch;
        if !(s.clock_mhz.is_finite() && s.clock_mhz >= 10.0 && s.clock_mhz <= 10_000.0) {
            return e(
                "switch.clock_mhz",
                format!("{}: must be 10..=10000", s.clock_mhz),
            );
        }
        if !s.datapath_bytes.is_power_of_two() || !(4..=1024).contains(&s.datapath_bytes) {
            return e(
                "switch.datapath_bytes",
                format!("{}: must be a power of two in 4..=1024", s.datapath_bytes),
            );
        }
        for (name, v) in [
            ("switch.parse_cycles", s.parse_cycles),
            ("switch.route_cycles", s.route_cycles),
            ("switch.arb_cycles", s.arb_cycles),
            ("switch.xbar_cycles", s.xbar_cycles),
            ("switch.egress_cycles", s.egress_cycles),
        ] {
            if v > 1000 {
                return e(name, format!("{v}: must be at most 1000"));
            }
        }
        // A sender takes every credit of a frame before it sends it: a grant below one
        // 256 B request's or response's data beats could never pass one (the frames wait
        // for good, and the operations fail).
        let beats = podlink_protocol::wire::tl_flit::MAX_BEATS as u32;
        if !(beats..=4096).contains(&s.buffer_flits_per_vc) {
            return e(
                "switch.buffer_flits_per_vc",
                format!(
                    "{}: must be {beats}..=4096 (a 256 B request or response takes {beats} \
                     data credits at once)",
                    s.buffer_flits_per_vc
                ),
            );
        }
        if let Some(r) = s.max_residence_us {
            if !(r.is_finite() && r > 0.0 && r <= 1e6) {
                return e(
                    "switch.max_residence_us",
                    format!("{r}: must be in (0, 1e6]"),
                );
            }
        }
        let mut seen = vec![None::<u16>; n as usize];
        for (i, p) in self.partitions.iter().enumerate() {
            let f = |k: &str| format!("partitions.{i}.{k}");
            if p.id > 1023 {
                return e(&f("id"), format!("{}: must be 0..=1023", p.id));
            }
            if p.weight == 0 || p.weight > 1000 {
                return e(&f("weight"), format!("{}: must be 1..=1000", p.weight));
            }
            if let Some(c) = p.rate_cap_gbps {
                if !(c.is_finite() && c > 0.0) {
                    return e(&f("rate_cap_gbps"), format!("{c}: must be positive"));
                }
            }
            if self.partitions[..i].iter().any(|q| q.id == p.id) {
                return e(&f("id"), format!("partition {} defined twice", p.id));
            }
            for a in parse_ranges(&p.accelerators, n).map_err(|m| (f("accelerators"), m))? {
                let slot = &mut seen[a as usize];
                if let Some(other) = *slot {
                    return e(
                        &f("accelerators"),
                        format!("accelerator {a} is already in partition {other}"),
                    );
                }
                *slot = Some(p.id);
            }
        }
        let sw_ports = self.switch_ports();
        for (i, r) in self.routes.iter().enumerate() {
            let f = |k: &str| format!("routes.{i}.{k}");
            let Some(&np) = sw_ports.get(r.switch as usize) else {
                return e(
                    &f("switch"),
                    format!("{}: the pod has {} switches", r.switch, sw_ports.len()),
                );
            };
            parse_ranges(&r.dest, n).map_err(|m| (f("dest"), m))?;
            if r.ports.len() > 8 {
                return e(
                    &f("ports"),
                    format!("{} ports: a route lists at most 8", r.ports.len()),
                );
            }
            if let Some(p) = r.ports.iter().find(|p| **p >= np) {
                return e(
                    &f("ports"),
                    format!("port {p}: switch {} has {np} ports", r.switch),
                );
            }
        }
        for (i, w) in self.workloads.iter().enumerate() {
            let f = |k: &str| format!("workloads.{i}.{k}");
            if !(64..=4096).contains(&w.message_bytes) || w.message_bytes % 64 != 0 {
                return e(
                    &f("message_bytes"),
                    format!("{}: must be a multiple of 64 in 64..=4096", w.message_bytes),
                );
            }
            if !(w.offered_load.is_finite() && w.offered_load > 0.0 && w.offered_load <= 1.0) {
                return e(
                    &f("offered_load"),
                    format!("{}: must be in (0, 1]", w.offered_load),
                );
            }
            for (k, v) in [("read", w.read), ("write", w.write), ("atomic", w.atomic)] {
                if !(v.is_finite() && (0.0..=1.0).contains(&v)) {
                    return e(&f(k), format!("{v}: must be in [0, 1]"));
                }
            }
            if (w.read + w.write + w.atomic - 1.0).abs() > 1e-6 {
                return e(
                    &f("read"),
                    format!(
                        "read + write + atomic = {}: must be 1",
                        w.read + w.write + w.atomic
                    ),
                );
            }
            if let Some(p) = w.partition {
                if !self.partitions.is_empty() && !self.partitions.iter().any(|q| q.id == p) {
                    return e(&f("partition"), format!("partition {p} is not defined"));
                }
            }
            match (w.pattern, w.target) {
                (Pattern::Hotspot, None) => {
                    return e(&f("target"), "hotspot needs a target".into())
                }
                (_, Some(t)) if t >= n => {
                    return e(&f("target"), format!("{t}: no such accelerator"))
                }
                _ => {}
            }
            if w.pattern == Pattern::Trace && w.trace.is_none() {
                return e(&f("trace"), "pattern trace needs a trace file".into());
            }
            if w.vc > 3 {
                return e(&f("vc"), format!("{}: must be 0..=3", w.vc));
            }
            if let Some(src) = &w.sources {
                parse_ranges(src, n).map_err(|m| (f("sources"), m))?;
            }
        }
        Ok(())
    }
}

/// Parse "0-31,40,48-63" into accelerator numbers below `n`.
///
/// # Errors
/// A malformed or out-of-range item.
pub fn parse_ranges(s: &str, n: u32) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        let (a, b) = match item.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (item, item),
        };
        let a: u32 = a
            .parse()
            .map_err(|_| format!("`{item}`: not a number or range"))?;
        let b: u32 = b
            .parse()
            .map_err(|_| format!("`{item}`: not a number or range"))?;
        if a > b || b >= n {
            return Err(format!("`{item}`: must be within 0..{n} and ascending"));
        }
        out.extend(a..=b);
    }
    if out.is_empty() {
        return Err("no accelerators".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "name = \"x\"\n[topology]\nkind = \"single-switch\"\naccelerators = 8\n";

    #[test]
    fn minimal_pod_parses_with_defaults() {
        let p = PodFile::parse(GOOD, "good.toml").unwrap();
        assert_eq!(p.accelerators(), 8);
        assert_eq!(p.link, LinkParams::default());
        assert_eq!(p.budgets.read_rtt_ns, 1000.0);
    }

    #[test]
    fn unknown_field_names_file_and_line() {
        let text = format!("{GOOD}[link]\nlanes = 4\nlane_speed = 3\n");
        let e = PodFile::parse(&text, "pod.toml").unwrap_err();
        assert_eq!(e.file, "pod.toml");
        assert_eq!(e.line, Some(7), "{e}");
        assert!(e.message.contains("lane_speed"), "{e}");
        assert_eq!(e.field.as_deref(), Some("link.lane_speed"), "{e}");
    }

    /// A value of the wrong type names its line and field, in a table or in the n-th entry
    /// of an array of tables.
    #[test]
    fn wrong_type_names_line_and_field() {
        let text = format!("{GOOD}[switch]\nclock_mhz = \"fast\"\n");
        let e = PodFile::parse(&text, "pod.toml").unwrap_err();
        assert_eq!(e.line, Some(6), "{e}");
        assert_eq!(e.field.as_deref(), Some("switch.clock_mhz"), "{e}");
        let text = format!(
            "{GOOD}[[workloads]]\npattern = \"uniform\"\n[[workloads]]\npattern = \"uniform\"\noffered_load = \"high\"\n"
        );
        let e = PodFile::parse(&text, "pod.toml").unwrap_err();
        assert_eq!(e.line, Some(9), "{e}");
        assert_eq!(e.field.as_deref(), Some("workloads.1.offered_load"), "{e}");
    }

    #[test]
    fn range_error_names_field_and_line() {
        let text = format!("{GOOD}[link]\nlanes = 3\n");
        let e = PodFile::parse(&text, "pod.toml").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("link.lanes"));
        assert_eq!(e.line, Some(6), "{e}");
        let text = format!(
            "{GOOD}[[partitions]]\nid = 1\naccelerators = \"0-3\"\n[[partitions]]\nid = 2\naccelerators = \"3-7\"\n"
        );
        let e = PodFile::parse(&text, "pod.toml").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("partitions.1.accelerators"));
        assert_eq!(e.line, Some(10), "{e}");
        assert!(e.message.contains("already in partition 1"));
    }

    #[test]
    fn credit_return_policy_parses_and_is_checked() {
        let text = format!("{GOOD}[link]\ncredit_return_threshold = 32\ncredit_return_ns = 250\n");
        let l = PodFile::parse(&text, "p").unwrap().link;
        assert_eq!((l.credit_return_threshold, l.credit_return_ns), (32, 250.0));
        let text = format!("{GOOD}[link]\ncredit_return_threshold = 0\n");
        let e = PodFile::parse(&text, "p").unwrap_err();
        assert_eq!(
            e.field.as_deref(),
            Some("link.credit_return_threshold"),
            "{e}"
        );
        let text = format!("{GOOD}[link]\ncredit_return_threshold = 65536\n");
        assert!(PodFile::parse(&text, "p").is_err());
        let text = format!("{GOOD}[link]\ncredit_return_ns = -1\n");
        let e = PodFile::parse(&text, "p").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("link.credit_return_ns"), "{e}");
    }

    /// A switch buffer smaller than one 256 B request's or response's data beats is refused:
    /// its port could never grant the credits such a frame takes at once (session 40: pods
    /// with 1 to 3 flits per VC ended with every such operation failed and frames stuck).
    #[test]
    fn a_switch_buffer_holds_at_least_one_largest_frame() {
        let text = format!("{GOOD}[switch]\nbuffer_flits_per_vc = 3\n");
        let e = PodFile::parse(&text, "p").unwrap_err();
        assert_eq!(
            e.field.as_deref(),
            Some("switch.buffer_flits_per_vc"),
            "{e}"
        );
        assert_eq!(e.line, Some(6), "{e}");
        assert!(e.message.contains("must be 4..=4096"), "{e}");
        let text = format!("{GOOD}[switch]\nbuffer_flits_per_vc = 4\n");
        assert_eq!(
            PodFile::parse(&text, "p")
                .unwrap()
                .switch
                .buffer_flits_per_vc,
            4
        );
        let text = format!("{GOOD}[switch]\nbuffer_flits_per_vc = 4097\n");
        assert!(PodFile::parse(&text, "p").is_err());
    }

    /// Request and response compression are off unless the pod file turns them on (each
    /// on its own); a value that is not a boolean names its field and line.
    #[test]
    fn compression_keys_parse_and_are_checked() {
        let link = PodFile::parse(GOOD, "p").unwrap().link;
        assert!(!link.compress_requests && !link.compress_responses);
        let text = format!("{GOOD}[link]\ncompress_requests = true\n");
        let link = PodFile::parse(&text, "p").unwrap().link;
        assert!(link.compress_requests && !link.compress_responses);
        let text = format!("{GOOD}[link]\ncompress_responses = true\n");
        let link = PodFile::parse(&text, "p").unwrap().link;
        assert!(!link.compress_requests && link.compress_responses);
        for key in ["compress_requests", "compress_responses"] {
            let text = format!("{GOOD}[link]\n{key} = \"yes\"\n");
            let e = PodFile::parse(&text, "p").unwrap_err();
            assert_eq!(e.field.as_deref(), Some(&*format!("link.{key}")), "{e}");
            assert!(e.line.is_some(), "{e}");
        }
    }

    /// The residence limit is the request timeout unless set; a set one must be positive.
    #[test]
    fn residence_limit_defaults_to_the_request_timeout() {
        let p = PodFile::parse(GOOD, "p").unwrap();
        assert_eq!(p.switch.max_residence_us, None);
        assert_eq!(
            p.max_residence_ps(),
            (p.accelerator.timeout_us * 1e6) as u64
        );
        let text = format!("{GOOD}[switch]\nmax_residence_us = 2.5\n");
        assert_eq!(
            PodFile::parse(&text, "p").unwrap().max_residence_ps(),
            2_500_000
        );
        for bad in ["0", "-1", "2e6", "nan"] {
            let text = format!("{GOOD}[switch]\nmax_residence_us = {bad}\n");
            let e = PodFile::parse(&text, "p").unwrap_err();
            assert_eq!(e.field.as_deref(), Some("switch.max_residence_us"), "{e}");
            assert_eq!(e.line, Some(6), "{e}");
        }
    }

    #[test]
    fn memory_must_hold_the_address_plan() {
        let text = format!("{GOOD}[accelerator]\nmemory_bytes = 65536\n");
        let e = PodFile::parse(&text, "p").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("accelerator.memory_bytes"), "{e}");
        assert_eq!(e.line, Some(6), "{e}");
        let ok = crate::workload::ATOMIC_COUNTER_ADDR + 64;
        let text = format!("{GOOD}[accelerator]\nmemory_bytes = {ok}\n");
        assert!(PodFile::parse(&text, "p").is_ok());
    }

    /// Accelerator ports are endpoints unless the pod file asks for the composed model.
    #[test]
    fn accelerator_model_defaults_to_the_endpoint() {
        assert_eq!(
            PodFile::parse(GOOD, "p").unwrap().accelerator.model,
            AccelModel::Endpoint
        );
        let text = format!("{GOOD}[accelerator]\nmodel = \"composed\"\n");
        let pod = PodFile::parse(&text, "p").unwrap();
        assert_eq!(pod.accelerator.model, AccelModel::Composed);
        let text = format!("{GOOD}[accelerator]\nmodel = \"endpoints\"\n");
        let e = PodFile::parse(&text, "p").unwrap_err();
        assert_eq!(e.line, Some(6), "{e}");
    }

    #[test]
    fn workload_checks() {
        let text = format!("{GOOD}[[workloads]]\npattern = \"hotspot\"\n");
        let e = PodFile::parse(&text, "p").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("workloads.0.target"));
        let text = format!("{GOOD}[[workloads]]\npattern = \"uniform\"\nread = 0.9\n");
        assert!(PodFile::parse(&text, "p")
            .unwrap_err()
            .message
            .contains("must be 1"));
        let text = format!("{GOOD}[[workloads]]\npattern = \"sideways\"\n");
        assert!(PodFile::parse(&text, "p").is_err());
        let text = format!("{GOOD}[[workloads]]\npattern = \"uniform\"\nvc = 4\n");
        let e = PodFile::parse(&text, "p").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("workloads.0.vc"), "{e}");
        let text = format!("{GOOD}[[workloads]]\npattern = \"uniform\"\nsources = \"2-9\"\n");
        let e = PodFile::parse(&text, "p").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("workloads.0.sources"), "{e}");
        let text =
            format!("{GOOD}[[workloads]]\npattern = \"uniform\"\nvc = 2\nsources = \"0-3\"\n");
        let w = &PodFile::parse(&text, "p").unwrap().workloads[0];
        assert_eq!((w.vc, w.sources.as_deref()), (2, Some("0-3")));
    }

    #[test]
    fn ranges() {
        assert_eq!(parse_ranges("0-2, 5", 8).unwrap(), vec![0, 1, 2, 5]);
        assert!(parse_ranges("3-1", 8).is_err());
        assert!(parse_ranges("0-8", 8).is_err());
        assert!(parse_ranges("x", 8).is_err());
        assert!(parse_ranges("", 8).is_err());
    }
}
