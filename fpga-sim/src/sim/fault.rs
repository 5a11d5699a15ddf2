//! Fault schedules (`spec-notes/validation.md#conformance-scenarios`): timed faults a run
//! applies to its pod, and what the run observed about them.
//!
//! A [`FaultPlan`] lives in [`super::Options`]. Fault times count from the start of injection
//! (after link bring-up and the traced zero-load read), so a plan means the same thing on
//! every pod. Every link has a switch end, so a link is named by that end ([`PortRef`]).
//!
//! What each fault does, and which real code path handles it:
//!
//! | fault | model action | handled by |
//! |---|---|---|
//! | [`FaultKind::LinkDown`] / [`FaultKind::LinkUp`] | both ends' PHY down / up; DL flits on the wire are lost | protocol `UaLink` (retry keeps its replay buffer; NOP bring-up and replay on up) |
//! | (down longer than [`FaultPlan::holdoff_ps`]) | the switch is told the link is down; frames still in the ingress pipelines of the link's switch ends are discarded (`FaultReport::ingress_discarded`) | podlink-switch `refresh_port` (flushes the port's queues; the port joins hashing again only after it settles when it comes back) |
//! | [`FaultKind::PortFail`] | alarm: switch port Failed at once, link down for good | podlink-switch `force_health`, then as above |
//! | [`FaultKind::PlaneFail`] | every port of one switch fails | as `PortFail` |
//! | [`FaultKind::SetBer`] | the link's bit error rate changes (both ways) | protocol CRC and replay; the switch's health monitor grades the link's counters |
//! | [`FaultKind::ModuleErrors`] | the link's transceivers count errors that FEC still corrects (data intact); a port the monitor grades Failed is disabled as by `PortFail` | podlink-switch health monitor (module error grade) |
//! | [`FaultKind::Inject`] | a rogue requester behind an accelerator port sends writes with a chosen source ID | protocol `Requester`; podlink-switch spoofing and partition checks |
//! | [`FaultKind::Withhold`] / [`FaultKind::Release`] | an accelerator's receiver keeps / returns the TL credits of one VC | the switch's per-VC credit scheduling |
//!
//! Endpoints learn about failures like a fabric manager would tell them: an accelerator
//! sees its own link go down at once (after the hold-off); every other endpoint learns of a
//! port that went down, failed, degraded or recovered [`FaultPlan::notify_ps`] after the
//! switch did. Endpoints then steer new requests away from ports that are down (and prefer
//! healthy over degraded ones), keeping a 256 B region on its port while requests of it are
//! in flight there, so that moving traffic never reorders it.

use serde::Serialize;

/// A link, named by its switch end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct PortRef {
    /// Switch index.
    pub switch: u32,
    /// Port of that switch.
    pub port: u32,
}

/// What a fault does.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FaultKind {
    /// Take the link down (both ends' PHY); DL flits on the wire are lost.
    LinkDown(PortRef),
    /// Bring a link that is down up again (bring-up, then replay of what was not acked).
    LinkUp(PortRef),
    /// The switch port fails for good: an alarm puts it in Failed at once (its queues are
    /// flushed) and its link goes down.
    PortFail(PortRef),
    /// Every port of a switch fails (a whole plane).
    PlaneFail {
        /// The switch.
        switch: u32,
    },
    /// The link's bit error rate (both directions) becomes `ber`.
    SetBer {
        /// The link.
        link: PortRef,
        /// New bit error rate.
        ber: f64,
    },
    /// The transceivers at the switch end(s) of the link report `per_window` more (corrected)
    /// errors every health window: a degrading link whose FEC still delivers clean data.
    /// Needs [`FaultPlan::health_window_ps`].
    ModuleErrors {
        /// The link.
        link: PortRef,
        /// Error-counter increment per health window.
        per_window: u32,
    },
    /// A rogue requester behind accelerator `from`'s port `port` sends `count` 256 B writes,
    /// `gap_ps` apart, with source ID `claim`, to `dst` at `addr`, `addr + 256`, ...
    Inject {
        /// Accelerator whose port the frames leave from.
        from: u32,
        /// Its port.
        port: u32,
        /// Source ID the requests carry (its partition is taken from the pod).
        claim: u32,
        /// Destination.
        dst: u32,
        /// First byte address.
        addr: u64,
        /// Writes.
        count: u32,
        /// Gap between writes, ps.
        gap_ps: u64,
    },
    /// Accelerator `accel`'s receivers stop returning TL credits of `vc`.
    Withhold {
        /// Accelerator.
        accel: u32,
        /// Virtual channel.
        vc: u8,
    },
    /// Accelerator `accel`'s receivers return the credits of `vc` again (with what they
    /// kept).
    Release {
        /// Accelerator.
        accel: u32,
        /// Virtual channel.
        vc: u8,
    },
    /// No fault: a point in the timeline, with switch `switch`'s counters, for judging
    /// windows.
    Mark {
        /// The switch whose counters are sampled.
        switch: u32,
    },
}

/// One timed fault.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fault {
    /// Time from the start of injection, ps.
    pub at_ps: u64,
    /// What happens.
    pub what: FaultKind,
}

/// Default link-down hold-off: 10 µs.
pub const DEFAULT_HOLDOFF_PS: u64 = 10_000_000;
/// Default fabric-manager notification delay: 1 µs.
pub const DEFAULT_NOTIFY_PS: u64 = 1_000_000;

/// The faults of a run and how the pod reacts to them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FaultPlan {
    /// The faults (any order; applied in time order, ties in list order).
    pub faults: Vec<Fault>,
    /// A link that stays down this long is reported down to its switch(es) and endpoints;
    /// a shorter outage is left to link-level retry (a debounce, as switch ports have).
    pub holdoff_ps: u64,
    /// Delay from a switch learning of a port change to every endpoint knowing it.
    pub notify_ps: u64,
    /// Run the switches' health monitors with this window (`None`: not run).
    pub health_window_ps: Option<u64>,
    /// Keep a record of every operation (for judging) even with no fault.
    pub record_ops: bool,
}

impl Default for FaultPlan {
    fn default() -> Self {
        FaultPlan {
            faults: Vec::new(),
            holdoff_ps: DEFAULT_HOLDOFF_PS,
            notify_ps: DEFAULT_NOTIFY_PS,
            health_window_ps: None,
            record_ops: false,
        }
    }
}

impl FaultPlan {
    /// Whether the run needs the fault machinery at all.
    pub fn active(&self) -> bool {
        !self.faults.is_empty() || self.health_window_ps.is_some() || self.record_ops
    }
}

/// One finished operation (recorded when a fault plan is active).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpRecord {
    /// Issued, ps (absolute simulated time).
    pub issued_ps: u64,
    /// Completed (or failed), ps.
    pub done_ps: u64,
    /// Issuer.
    pub src: u32,
    /// Target.
    pub dst: u32,
    /// Virtual channel.
    pub vc: u8,
    /// Completed without error.
    pub ok: bool,
    /// Bit k: a piece of it went out of the issuer's port k.
    pub ports: u8,
}

/// Something that happened to the fabric during a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Happening {
    /// Fault `index` of the plan was applied.
    Applied {
        /// Index in the plan.
        index: usize,
    },
    /// The switch was told a port's link is down (`up` false) or up again.
    Declared {
        /// The port.
        at: PortRef,
        /// Up again.
        up: bool,
    },
    /// The switch's health monitor moved a port.
    Health {
        /// The port.
        at: PortRef,
        /// Old state.
        from: String,
        /// New state.
        to: String,
    },
    /// Every endpoint now knows of a port change (`state`: up, degraded or down).
    Notified {
        /// The port.
        at: PortRef,
        /// What they know.
        state: String,
    },
}

/// A timeline entry, with the transmitted-frame counters of the switch concerned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// Simulated time, ps.
    pub t_ps: u64,
    /// What happened.
    pub what: Happening,
    /// Switch the counters are of (`u32::MAX`: none).
    pub switch: u32,
    /// Frames each port of that switch had transmitted (podlink-switch counters).
    pub tx_frames: Vec<u64>,
}

/// What a rogue requester saw.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RogueResult {
    /// Writes handed to its link.
    pub sent: u64,
    /// Of those, completed with an error at the rogue (never answered).
    pub failed: u64,
    /// Completed successfully (they reached a completer and were answered).
    pub answered: u64,
    /// 64 B lines of the target range checked after the run.
    pub lines_checked: u64,
    /// Lines whose content differs from what the legitimate operations left.
    pub lines_changed: u64,
}

/// Fault observations of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FaultReport {
    /// Start of injection (fault times count from here), ps.
    pub inject_from_ps: u64,
    /// The plan's faults.
    pub plan: Vec<Fault>,
    /// What happened, in time order.
    pub timeline: Vec<Entry>,
    /// Drops counted by the switches' own counters, summed over switches, per reason.
    pub switch_drops: Vec<(String, u64)>,
    /// DL flits lost on the wire when links went down.
    pub flits_lost: u64,
    /// Link ends retrained (a link that stayed down past the hold-off comes back with empty
    /// link and TL state and a fresh credit release, not replaying what it held).
    pub retrains: u64,
    /// TL transfers the retrained ends had taken but not yet sent (dropped with the TL
    /// state; their operations fail by timeout).
    pub frames_discarded: u64,
    /// Frames that had arrived on a switch port declared down (or failed) and were still in
    /// its ingress pipeline, not yet taken by the switch: discarded with the port
    /// (`Sim::discard_ingress`; their operations fail by timeout).
    pub ingress_discarded: u64,
    /// Regions (source, destination, 256 B) held on an accelerator port declared down while
    /// requests of theirs were in flight (`FaultState::hold`), summed over declarations.
    pub regions_held: u64,
    /// Times a region stayed on its port after one of its requests was given up (timed out
    /// or aborted) while it may still be in the fabric (`FaultState::unpin_given_up`).
    pub regions_held_after_give_up: u64,
    /// Requests failed at their source without being sent: every port of the source had
    /// failed or been declared down (as far as the source was told).
    pub failed_at_source: u64,
    /// Link outages that went on across an up too brief for the link to replay what it held
    /// from before the outage (a flit sent before it still unacknowledged at the next
    /// down): the outage is counted from its first down (`Sim::phy_down`).
    pub outages_carried: u64,
    /// Link-down and link-up transitions of the protocol's link ends (summed).
    pub link_downs: u64,
    /// Link ups (bring-ups started), summed over link ends.
    pub link_ups: u64,
    /// Link ends not Up at the end of the run.
    pub links_not_up: u64,
    /// At the end of the run the fabric was whole again (every link's PHY up, no port
    /// failed, no VC's credits withheld, no rogue write open, no link at a bit error rate
    /// that corrupts a DL flit on average): nothing may then be left in it
    /// (`Integrity::stranded` = 0).
    pub whole_at_end: bool,
    /// Operations open when each fault was applied (same order as `plan`).
    pub open_at_fault: Vec<u64>,
    /// Rogue requesters, in plan order.
    pub rogues: Vec<RogueResult>,
    /// Every finished operation (not serialised).
    #[serde(skip)]
    pub ops: Vec<OpRecord>,
}

impl FaultReport {
    /// A switch drop counter by reason name (0 when absent).
    pub fn switch_drop(&self, reason: &str) -> u64 {
        self.switch_drops
            .iter()
            .find(|(r, _)| r == reason)
            .map_or(0, |x| x.1)
    }

    /// The first entry matching `f`.
    pub fn first(&self, f: impl Fn(&Happening) -> bool) -> Option<&Entry> {
        self.timeline.iter().find(|e| f(&e.what))
    }
}
