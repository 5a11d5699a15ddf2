//! The results of a run (`spec-notes/simulator.md#results`): counters, the summary and its
//! parts, and the report that tables and charts are drawn from.

use super::check::Integrity;
use crate::pod::timing::Stage;
use crate::report::{Latency, LatencySummary};
use podlink_switch::DropReason;
use serde::Serialize;

/// Drop reasons in report order.
pub const DROP_REASONS: [&str; 10] = [
    "link-local",
    "bad-ingress",
    "spoofed",
    "cross-partition",
    "no-route",
    "unreachable",
    "queue-full",
    "flushed",
    "pin-lost",
    "expired",
];

/// Model-level counters.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    /// Frames the TL packer or a completer refused (a model bug if not zero).
    pub invalid_frames: u64,
    /// Compressed requests a switch port could not expand (its cache out of step with the
    /// sender's: a model bug if not zero).
    pub expand_errors: u64,
    /// Times a switch pipeline stopped because the switch buffer was full.
    pub ingress_blocked: u64,
    /// Frames dropped by switches, per [`DROP_REASONS`].
    pub drops: [u64; 10],
}

impl Counters {
    /// Count a drop.
    pub fn note_drop(&mut self, r: DropReason) {
        let i = match r {
            DropReason::LinkLocal => 0,
            DropReason::BadIngress => 1,
            DropReason::Spoofed => 2,
            DropReason::CrossPartition => 3,
            DropReason::NoRoute => 4,
            DropReason::Unreachable => 5,
            DropReason::QueueFull => 6,
            DropReason::Flushed => 7,
            DropReason::PinLost => 8,
            DropReason::Expired => 9,
        };
        self.drops[i] += 1;
    }
}

/// Latency of one operation class.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ClassLatency {
    /// read, write or atomic.
    pub class: &'static str,
    /// Percentiles, ns.
    #[serde(flatten)]
    pub latency: LatencySummary,
}

/// One partition's results.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PartitionResult {
    /// Partition ID.
    pub id: u16,
    /// Accelerators in it.
    pub members: u32,
    /// Throughput of its members' completed operations, Gb/s.
    pub throughput_gbps: f64,
    /// Latency of its operations (all classes), ns.
    pub latency: LatencySummary,
    /// Jain's fairness index over its members' throughput.
    pub jain: f64,
}

/// Link counters summed over every link direction.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct LinkTotals {
    /// Link directions.
    pub directions: u64,
    /// Payload DL flits sent for the first time.
    pub dl_flits: u64,
    /// Acks sent (alone or on a payload flit).
    pub acks: u64,
    /// NOP flits sent (link bring-up).
    pub nops: u64,
    /// DL flits resent by replays.
    pub dl_resent: u64,
    /// Replays (replay requests honoured).
    pub replays: u64,
    /// DL flits with a bad CRC.
    pub crc_errors: u64,
    /// Link ends that ended in `Fault` (retry gave up, or the end held a TL flit past its
    /// hold limit); each time both ends of the link were reset (`Sim::on_link_fault`).
    pub link_faults: u64,
    /// Bits flipped by the bit error rate.
    pub bits_flipped: u64,
    /// TL flits carried (first transmissions).
    pub tl_flits: u64,
    /// Mean share of the injection window a link direction spent sending DL flits (a DL
    /// flit goes out as soon as anything is ready, so partly filled flits count fully).
    pub utilisation_mean: f64,
    /// Highest of those.
    pub utilisation_max: f64,
    /// Mean share of a link direction's TL capacity (628 B per DL flit time) carrying TL
    /// flits during the injection window.
    pub payload_utilisation_mean: f64,
    /// Highest of those.
    pub payload_utilisation_max: f64,
    /// Time transmitters with something to send waited for credits or the replay window,
    /// summed, ns.
    pub credit_stall_ns: f64,
    /// Requests that arrived compressed at switch ports (`link.compress_requests`) and were
    /// expanded there.
    pub requests_expanded: u64,
    /// Responses the completers sent compressed (`link.compress_responses`); switches
    /// forward them as they are.
    pub responses_compressed: u64,
}

/// Conservation: everything injected was delivered or is still in flight.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Conservation {
    /// TL flits packed into DL flits.
    pub tl_injected: u64,
    /// TL flits delivered by receivers.
    pub tl_delivered: u64,
    /// TL flits in DL flits sent and not yet delivered.
    pub tl_in_flight: u64,
    /// TL flits dropped by link retrains (a link down past the hold-off comes back reset).
    pub tl_discarded: u64,
    /// Operations issued, completed, open.
    pub ops_issued: u64,
    /// Operations completed.
    pub ops_completed: u64,
    /// Operations still open.
    pub ops_open: u64,
    /// Frames held by the model (switch buffers, completer queues, transmit queues).
    pub frames_held: u64,
    /// Frames the model's queues account for.
    pub frames_queued: u64,
    /// Events scheduled inside a window of the engine for a component that had already run
    /// its part of it (`spec-notes/simulator.md#engine`): always 0.
    pub events_out_of_window: u64,
    /// Every balance holds.
    pub ok: bool,
}

/// One budget and its verdict.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Verdict {
    /// What is measured.
    pub what: String,
    /// Measured, ns.
    pub measured_ns: f64,
    /// Budget, ns.
    pub budget_ns: f64,
    /// "ok", "VIOLATED", or "info" (reported, not enforced).
    pub verdict: &'static str,
}

/// A stage of the zero-load breakdown.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StageNs {
    /// Stage.
    pub stage: String,
    /// Time, ns.
    pub ns: f64,
}

/// Everything a run reports (all of it a pure function of pod, options and seed).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    /// Pod name.
    pub pod: String,
    /// Seed.
    pub seed: u64,
    /// Injection starts (after link bring-up and the traced zero-load read), ns.
    pub start_ns: f64,
    /// Injection time, ns.
    pub duration_ns: f64,
    /// Warm-up excluded from measurements, ns.
    pub warmup_ns: f64,
    /// Simulated time at the end (after draining), ns.
    pub end_ns: f64,
    /// Every operation completed before the end.
    pub drained: bool,
    /// Accelerators.
    pub accelerators: u32,
    /// Switches, and which forwarding logic they run.
    pub switches: Vec<(String, u32)>,
    /// Events executed.
    pub events: u64,
    /// Latency per operation class (measured operations).
    pub latency: Vec<ClassLatency>,
    /// Total throughput of measured operations, Gb/s.
    pub throughput_gbps: f64,
    /// Per accelerator: mean, min, max throughput, Gb/s.
    pub accel_throughput_gbps: [f64; 3],
    /// Jain's fairness index over the accelerators that issue operations.
    pub jain: f64,
    /// Per partition.
    pub partitions: Vec<PartitionResult>,
    /// Links.
    pub links: LinkTotals,
    /// Drops per reason (only non-zero ones).
    pub drops: Vec<(String, u64)>,
    /// Integrity checker findings.
    pub integrity: Integrity,
    /// Conservation.
    pub conservation: Conservation,
    /// Zero-load 64 B read breakdown.
    pub breakdown: Vec<StageNs>,
    /// The zero-load read completed (false: it failed or did not finish within 1 ms, and
    /// there is no round trip or breakdown; its budget is VIOLATED).
    pub read_completed: bool,
    /// Simulated zero-load 64 B read round trip, ns.
    pub read_rtt_ns: f64,
    /// Switch hops each way of that read.
    pub read_hops: u32,
    /// The accelerator that read and the one read from (`Fabric::probe_pair`: accelerator 0
    /// and its farthest peer in its partition).
    pub read_pair: [u32; 2],
    /// Budget verdicts.
    pub budgets: Vec<Verdict>,
    /// What the run's fault plan did (only when it has one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub faults: Option<super::fault::FaultReport>,
}

impl Summary {
    /// A budget is violated.
    pub fn violated(&self) -> bool {
        self.budgets.iter().any(|v| v.verdict == "VIOLATED")
    }

    /// The run is sound: integrity and conservation hold.
    pub fn sound(&self) -> bool {
        self.integrity_ok() && self.conservation.ok
    }

    /// The run applied faults (a fault plan with at least one fault).
    pub fn had_faults(&self) -> bool {
        self.faults
            .as_ref()
            .is_some_and(|f| !f.open_at_fault.is_empty())
    }

    /// The integrity check passed: nothing lost, duplicated or wrong, and no operation
    /// reported failed unless the run applied faults (which may fail operations, as long as
    /// every request given up left its trace, [`Integrity::requests_accounted`], and nothing
    /// is left in a fabric that is whole again at the end, `FaultReport::whole_at_end`; a read
    /// that disagrees is still wrong unless only failed writes explain it) or the failures
    /// are timeouts with every timed-out request accounted for
    /// ([`Integrity::timeouts_accounted`]: an overloaded pod with a short request timeout).
    pub fn integrity_ok(&self) -> bool {
        if self.had_faults() {
            let whole = self.faults.as_ref().is_some_and(|f| f.whole_at_end);
            self.integrity.sound_but_failed()
                && self.integrity.requests_accounted()
                && !(whole && self.integrity.stranded > 0)
        } else {
            self.integrity.ok()
                || (self.integrity.sound_but_failed() && self.integrity.timeouts_accounted())
        }
    }
}

/// A finished run: the summary and the raw material for tables and charts.
pub struct Report {
    /// The summary.
    pub summary: Summary,
    /// Latency histograms per class.
    pub latency: [Latency; 3],
    /// Per accelerator throughput, Gb/s.
    pub per_accel_gbps: Vec<f64>,
    /// Partition of each accelerator.
    pub partition_of: Vec<u16>,
    /// Per link direction: (end, owner description, utilisation, DL flits, CRC errors, replays).
    pub links: Vec<(u32, String, f64, u64, u64, u64)>,
    /// Zero-load breakdown.
    pub breakdown: Vec<Stage>,
}
