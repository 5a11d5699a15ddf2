//! The pod file's `[faults]` section (`spec-notes/simulator.md#faults-in-a-pod-file`): timed
//! faults that every `podlink-sim run` and `sweep` of the pod applies, for architects who
//! want their own fault mixes rather than the built-in conformance scenarios.
//!
//! ```toml
//! [faults]
//! holdoff_us = 10          # a link down this long is reported to its switches (default 10)
//! notify_us = 1            # switch → every endpoint notification delay (default 1)
//! health_window_us = 1     # run the switches' health monitors (default: not run)
//!
//! [[faults.events]]
//! at_us = 2.0              # from the start of injection
//! kind = "link-down"       # link-down | link-up | port-fail | plane-fail | set-ber |
//! switch = 2               #   module-errors | withhold | release | inject
//! port = 3
//! ```
//!
//! Each kind needs its own fields: `switch` and `port` (a link, named by its switch end) for
//! `link-down`, `link-up`, `port-fail`, `set-ber` (+ `ber`) and `module-errors`
//! (+ `per_window`, and a health window); `switch` for `plane-fail`; `accel` and `vc` for
//! `withhold` and `release`; `from`, `port`, `claim`, `dst`, `addr`, `count` and `gap_ns` for
//! `inject`. A field a kind does not use is an error, as is a missing one.

use crate::sim::fault::{Fault, FaultKind, FaultPlan, PortRef};
use serde::Deserialize;

/// The `[faults]` section.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct FaultsParams {
    /// A link down this long is reported down to its switches and endpoints, µs.
    pub holdoff_us: f64,
    /// Delay from a switch learning of a port change to every endpoint knowing, µs.
    pub notify_us: f64,
    /// Health window of the switches' monitors, µs (absent: monitors not run).
    pub health_window_us: Option<f64>,
    /// The faults, applied in time order (ties in file order).
    pub events: Vec<FaultEvent>,
}

impl Default for FaultsParams {
    fn default() -> Self {
        let d = FaultPlan::default();
        FaultsParams {
            holdoff_us: d.holdoff_ps as f64 / 1e6,
            notify_us: d.notify_ps as f64 / 1e6,
            health_window_us: None,
            events: Vec::new(),
        }
    }
}

/// What a fault event does (the kinds of [`FaultKind`] a pod file may name).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// Both ends' PHY go down.
    LinkDown,
    /// The link comes up again.
    LinkUp,
    /// The switch port fails for good.
    PortFail,
    /// Every port of a switch fails.
    PlaneFail,
    /// The link's bit error rate changes.
    SetBer,
    /// The link's transceivers report corrected errors every health window.
    ModuleErrors,
    /// An accelerator's receivers keep one VC's credits.
    Withhold,
    /// … and return them again.
    Release,
    /// A rogue requester behind an accelerator port writes with a forged source ID.
    Inject,
}

impl EventKind {
    /// The name a pod file gives the kind.
    pub const fn name(self) -> &'static str {
        match self {
            EventKind::LinkDown => "link-down",
            EventKind::LinkUp => "link-up",
            EventKind::PortFail => "port-fail",
            EventKind::PlaneFail => "plane-fail",
            EventKind::SetBer => "set-ber",
            EventKind::ModuleErrors => "module-errors",
            EventKind::Withhold => "withhold",
            EventKind::Release => "release",
            EventKind::Inject => "inject",
        }
    }
}

/// One `[[faults.events]]` entry.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FaultEvent {
    /// Time from the start of injection, µs.
    pub at_us: f64,
    /// What happens.
    pub kind: EventKind,
    /// Switch (a link's switch end, or the failing plane).
    pub switch: Option<u32>,
    /// Port of `switch`; for `inject`, the port of accelerator `from`.
    pub port: Option<u32>,
    /// `set-ber`: the new bit error rate.
    pub ber: Option<f64>,
    /// `module-errors`: error-counter increment per health window.
    pub per_window: Option<u32>,
    /// `withhold` / `release`: the accelerator.
    pub accel: Option<u32>,
    /// `withhold` / `release`: the virtual channel.
    pub vc: Option<u8>,
    /// `inject`: the accelerator whose port the rogue sits behind.
    pub from: Option<u32>,
    /// `inject`: the source ID the rogue claims.
    pub claim: Option<u32>,
    /// `inject`: the destination.
    pub dst: Option<u32>,
    /// `inject`: the first byte address.
    pub addr: Option<u64>,
    /// `inject`: number of 256 B writes.
    pub count: Option<u32>,
    /// `inject`: gap between writes, ns.
    pub gap_ns: Option<f64>,
}

/// µs (validated: finite, in range) to ps.
fn ps(us: f64) -> u64 {
    crate::pod::timing::ns(us * 1000.0).as_ps()
}

impl FaultEvent {
    /// Field `f`'s value, which this event's kind needs.
    fn need<T>(&self, v: Option<T>, f: &'static str) -> Result<T, (&'static str, String)> {
        v.ok_or((f, format!("missing: `{}` needs `{f}`", self.kind.name())))
    }

    /// The fields this event's kind uses, and the event as the simulator's fault.
    ///
    /// # Errors
    /// `(field, message)`: a missing field, a field the kind does not use, or a value out of
    /// range (references to switches, ports and accelerators are checked against the pod's
    /// fabric by the caller).
    fn to_fault(&self) -> Result<Fault, (&'static str, String)> {
        let link = || -> Result<PortRef, (&'static str, String)> {
            Ok(PortRef {
                switch: self.need(self.switch, "switch")?,
                port: self.need(self.port, "port")?,
            })
        };
        let vc = || -> Result<u8, (&'static str, String)> {
            let vc = self.need(self.vc, "vc")?;
            if vc > 3 {
                return Err(("vc", format!("{vc}: must be 0..=3")));
            }
            Ok(vc)
        };
        let what = match self.kind {
            EventKind::LinkDown => FaultKind::LinkDown(link()?),
            EventKind::LinkUp => FaultKind::LinkUp(link()?),
            EventKind::PortFail => FaultKind::PortFail(link()?),
            EventKind::PlaneFail => FaultKind::PlaneFail {
                switch: self.need(self.switch, "switch")?,
            },
            EventKind::SetBer => {
                let ber = self.need(self.ber, "ber")?;
                if !(ber.is_finite() && (0.0..1e-2).contains(&ber)) {
                    return Err(("ber", format!("{ber}: must be in [0, 0.01)")));
                }
                FaultKind::SetBer { link: link()?, ber }
            }
            EventKind::ModuleErrors => FaultKind::ModuleErrors {
                link: link()?,
                per_window: self.need(self.per_window, "per_window")?,
            },
            EventKind::Withhold => FaultKind::Withhold {
                accel: self.need(self.accel, "accel")?,
                vc: vc()?,
            },
            EventKind::Release => FaultKind::Release {
                accel: self.need(self.accel, "accel")?,
                vc: vc()?,
            },
            EventKind::Inject => {
                let gap = self.need(self.gap_ns, "gap_ns")?;
                if !(gap.is_finite() && (1.0..=1e6).contains(&gap)) {
                    return Err(("gap_ns", format!("{gap}: must be in [1, 1e6]")));
                }
                FaultKind::Inject {
                    from: self.need(self.from, "from")?,
                    port: self.need(self.port, "port")?,
                    claim: self.need(self.claim, "claim")?,
                    dst: self.need(self.dst, "dst")?,
                    addr: self.need(self.addr, "addr")?,
                    count: self.need(self.count, "count")?,
                    gap_ps: (gap * 1e3).round() as u64,
                }
            }
        };
        // Fields the kind does not use: an error (a typo for another kind's field would
        // otherwise be ignored silently).
        let used: &[&str] = match self.kind {
            EventKind::LinkDown | EventKind::LinkUp | EventKind::PortFail => &["switch", "port"],
            EventKind::PlaneFail => &["switch"],
            EventKind::SetBer => &["switch", "port", "ber"],
            EventKind::ModuleErrors => &["switch", "port", "per_window"],
            EventKind::Withhold | EventKind::Release => &["accel", "vc"],
            EventKind::Inject => &["from", "port", "claim", "dst", "addr", "count", "gap_ns"],
        };
        let given = [
            ("switch", self.switch.is_some()),
            ("port", self.port.is_some()),
            ("ber", self.ber.is_some()),
            ("per_window", self.per_window.is_some()),
            ("accel", self.accel.is_some()),
            ("vc", self.vc.is_some()),
            ("from", self.from.is_some()),
            ("claim", self.claim.is_some()),
            ("dst", self.dst.is_some()),
            ("addr", self.addr.is_some()),
            ("count", self.count.is_some()),
            ("gap_ns", self.gap_ns.is_some()),
        ];
        if let Some((f, _)) = given.iter().find(|(f, set)| *set && !used.contains(f)) {
            return Err((f, format!("not a field of `{}`", self.kind.name())));
        }
        Ok(Fault {
            at_ps: ps(self.at_us),
            what,
        })
    }
}

impl FaultsParams {
    /// The simulator's fault plan.
    ///
    /// # Errors
    /// `(field path, message)` for the first event or setting that is wrong (paths like
    /// `faults.events.2.vc`).
    pub fn plan(&self) -> Result<FaultPlan, (String, String)> {
        let time = |name: &str, v: f64| {
            if v.is_finite() && (0.0..=1e6).contains(&v) {
                Ok(())
            } else {
                Err((
                    format!("faults.{name}"),
                    format!("{v}: must be a finite number of µs in [0, 1e6]"),
                ))
            }
        };
        time("holdoff_us", self.holdoff_us)?;
        time("notify_us", self.notify_us)?;
        if let Some(w) = self.health_window_us {
            if !(w.is_finite() && (0.01..=1e6).contains(&w)) {
                return Err((
                    "faults.health_window_us".into(),
                    format!("{w}: must be in [0.01, 1e6] µs"),
                ));
            }
        }
        if self.events.len() > 10_000 {
            return Err((
                "faults.events".into(),
                format!("{} events: at most 10000", self.events.len()),
            ));
        }
        let mut faults = Vec::with_capacity(self.events.len());
        for (i, ev) in self.events.iter().enumerate() {
            time(&format!("events.{i}.at_us"), ev.at_us)?;
            let f = ev
                .to_fault()
                .map_err(|(f, m)| (format!("faults.events.{i}.{f}"), m))?;
            faults.push(f);
        }
        Ok(FaultPlan {
            faults,
            holdoff_ps: ps(self.holdoff_us),
            notify_ps: ps(self.notify_us),
            health_window_ps: self.health_window_us.map(ps),
            record_ops: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::pod::config::PodFile;
    use crate::sim::fault::{FaultKind, PortRef};

    const POD: &str = r#"
name = "faults"
[topology]
kind = "leaf-spine"
leaves = 2
spines = 2
accels_per_leaf = 4
uplinks_per_spine = 2
"#;

    fn parse(faults: &str) -> Result<PodFile, String> {
        PodFile::parse(&format!("{POD}{faults}"), "f.toml").map_err(|e| e.to_string())
    }

    #[test]
    fn events_become_the_simulators_plan() {
        let pod = parse(
            r#"
[faults]
holdoff_us = 5
health_window_us = 1
[[faults.events]]
at_us = 2.5
kind = "link-down"
switch = 2
port = 3
[[faults.events]]
at_us = 1
kind = "withhold"
accel = 7
vc = 2
[[faults.events]]
at_us = 0
kind = "inject"
from = 1
port = 0
claim = 2
dst = 3
addr = 4096
count = 4
gap_ns = 100
[[faults.events]]
at_us = 3
kind = "module-errors"
switch = 0
port = 4
per_window = 100
"#,
        )
        .unwrap();
        let plan = pod.fault_plan();
        assert_eq!(plan.holdoff_ps, 5_000_000);
        assert_eq!(plan.notify_ps, 1_000_000, "default");
        assert_eq!(plan.health_window_ps, Some(1_000_000));
        assert_eq!(plan.faults.len(), 4);
        assert_eq!(plan.faults[0].at_ps, 2_500_000);
        assert_eq!(
            plan.faults[0].what,
            FaultKind::LinkDown(PortRef { switch: 2, port: 3 })
        );
        assert_eq!(plan.faults[1].what, FaultKind::Withhold { accel: 7, vc: 2 });
        assert!(matches!(
            plan.faults[2].what,
            FaultKind::Inject {
                from: 1,
                claim: 2,
                dst: 3,
                addr: 4096,
                count: 4,
                gap_ps: 100_000,
                ..
            }
        ));
        // No section: no faults.
        assert!(!parse("").unwrap().fault_plan().active());
    }

    /// Every mistake names the file, the line and the field.
    #[test]
    fn bad_events_name_line_and_field() {
        let ev = |body: &str| format!("[faults]\n[[faults.events]]\nat_us = 1\n{body}\n");
        for (body, field, what) in [
            (
                "kind = \"link-down\"\nswitch = 2",
                "faults.events.0.port",
                "missing",
            ),
            (
                "kind = \"withhold\"\naccel = 1\nvc = 4",
                "faults.events.0.vc",
                "0..=3",
            ),
            (
                "kind = \"withhold\"\naccel = 1\nvc = 0\nport = 3",
                "faults.events.0.port",
                "not a field",
            ),
            (
                "kind = \"set-ber\"\nswitch = 0\nport = 0\nber = 0.5",
                "faults.events.0.ber",
                "[0, 0.01)",
            ),
            (
                "kind = \"port-fail\"\nswitch = 9\nport = 0",
                "faults.events.0",
                "no switch 9",
            ),
            (
                "kind = \"port-fail\"\nswitch = 0\nport = 99",
                "faults.events.0",
                "no port 99",
            ),
            (
                "kind = \"withhold\"\naccel = 8\nvc = 0",
                "faults.events.0",
                "no accelerator 8",
            ),
            (
                "kind = \"module-errors\"\nswitch = 0\nport = 0\nper_window = 5",
                "faults.events.0",
                "health window",
            ),
        ] {
            let e = parse(&ev(body)).expect_err(body);
            assert!(e.contains(&format!("field `{field}`")), "{body}: {e}");
            assert!(e.contains(what), "{body}: {e}");
            assert!(e.starts_with("f.toml:"), "{body}: {e}");
        }
        let e = parse(&ev("kind = \"melt\"")).unwrap_err();
        assert!(e.contains("melt") && e.starts_with("f.toml:"), "{e}");
        let e = parse(
            "[faults]\n[[faults.events]]\nat_us = -1\nkind = \"link-up\"\nswitch = 0\nport = 0\n",
        )
        .unwrap_err();
        assert!(e.contains("faults.events.0.at_us"), "{e}");
        let e = parse("[faults]\nhold_us = 3\n").unwrap_err();
        assert!(e.contains("hold_us"), "{e}");
    }
}
