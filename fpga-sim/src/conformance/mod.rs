//! `podlink-sim conformance [NAME...]` (`spec-notes/validation.md#conformance-scenarios`):
//! named fault scenarios, each run on a small pod derived from a preset, judged by explicit
//! criteria, and reported as a verdict table (or JSON).
//!
//! Every scenario that runs also requires, from the data-integrity checker, that no operation
//! was lost, duplicated or corrupted, and that the conservation balances hold. Scenarios whose
//! pod must be refused (a missing route, a loop) pass only when the run is refused, with a
//! typed error naming the entry, before anything is simulated.
//!
//! Each scenario is a setup (pod and options, with a [`crate::sim::fault::FaultPlan`]) and a
//! judge: a pure function of the setup and the run's summary, so that tests can judge
//! doctored results and broken setups.

pub mod judge;
pub mod scenarios;

use serde::Serialize;
use std::fmt::Write as _;

/// One figure a verdict reports.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Figure {
    /// Name (with unit where it has one).
    pub name: String,
    /// Value.
    pub value: f64,
}

/// One pass criterion and whether it held.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Check {
    /// The criterion, with the measured values.
    pub what: String,
    /// It held.
    pub ok: bool,
}

/// The verdict of one scenario.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Outcome {
    /// Scenario name.
    pub scenario: String,
    /// "PASS" or "FAIL".
    pub verdict: &'static str,
    /// Key figures.
    pub figures: Vec<Figure>,
    /// Every criterion.
    pub checks: Vec<Check>,
    /// Why: the criteria that failed, or a one-line statement of what passed.
    pub reason: String,
}

impl Outcome {
    /// The scenario passed.
    pub fn pass(&self) -> bool {
        self.verdict == "PASS"
    }

    /// A figure by name.
    pub fn figure(&self, name: &str) -> Option<f64> {
        self.figures
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.value)
    }
}

/// A named scenario.
pub struct Scenario {
    /// Name used on the command line.
    pub name: &'static str,
    /// One line: the fault and what it proves.
    pub about: &'static str,
    /// Run and judge it with a seed.
    pub run: fn(u64) -> Outcome,
}

/// Every scenario, in the order the table lists them.
pub static SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "bit-error-sweep",
        about: "bit error rates 0..4e-6 on every link: replays grow with the rate, nothing is lost",
        run: scenarios::bit_error_sweep,
    },
    Scenario {
        name: "link-flap",
        about: "a link goes down for 2 us mid-traffic: retry and bring-up recover, nothing is lost or failed",
        run: scenarios::link_flap,
    },
    Scenario {
        name: "port-failure",
        about: "a switch port fails mid-traffic: its traffic moves to the other planes, in-flight operations complete or fail once",
        run: scenarios::port_failure,
    },
    Scenario {
        name: "plane-failure",
        about: "a whole switch plane fails: every accelerator moves to the other planes",
        run: scenarios::plane_failure,
    },
    Scenario {
        name: "degraded-drain",
        about: "a link's (corrected) transceiver errors make its port Degraded; adaptive choice drains it, so its failure fails a fraction of what it fails undrained",
        run: scenarios::degraded_drain,
    },
    Scenario {
        name: "vc-starvation",
        about: "a receiver withholds one VC's credits: that VC stops, the other keeps completing within budget",
        run: scenarios::vc_starvation,
    },
    Scenario {
        name: "incast-isolation",
        about: "incast on one accelerator of one partition: the other partition's p99 stays within budget",
        run: scenarios::incast_isolation,
    },
    Scenario {
        name: "spoofed-source",
        about: "writes claiming another accelerator's ID: dropped and counted by the switch, memory untouched",
        run: scenarios::spoofed_source,
    },
    Scenario {
        name: "cross-partition",
        about: "writes into another partition: dropped and counted by the switch, memory untouched",
        run: scenarios::cross_partition,
    },
    Scenario {
        name: "missing-route",
        about: "a route table with no route to one accelerator: refused before the run, naming the entry",
        run: scenarios::missing_route,
    },
    Scenario {
        name: "route-loop",
        about: "a route table with a loop: refused before the run, naming the entry",
        run: scenarios::route_loop,
    },
];

/// Find scenarios by name (all of them for an empty list).
///
/// # Errors
/// The first unknown name, with the list of valid names.
pub fn select(names: &[String]) -> Result<Vec<&'static Scenario>, String> {
    if names.is_empty() {
        return Ok(SCENARIOS.iter().collect());
    }
    names
        .iter()
        .map(|n| {
            SCENARIOS.iter().find(|s| s.name == n).ok_or_else(|| {
                format!(
                    "unknown scenario `{n}` (valid: {})",
                    SCENARIOS
                        .iter()
                        .map(|s| s.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
        })
        .collect()
}

/// The results of a conformance run, as `--json` prints them.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Results {
    /// Seed.
    pub seed: u64,
    /// Scenarios that passed.
    pub passed: usize,
    /// Scenarios that failed.
    pub failed: usize,
    /// Each scenario's verdict.
    pub scenarios: Vec<Outcome>,
}

/// Run `list` with `seed`; `done(i, n, outcome)` after each.
pub fn run(list: &[&Scenario], seed: u64, mut done: impl FnMut(usize, usize, &Outcome)) -> Results {
    let mut out = Vec::new();
    for (i, s) in list.iter().enumerate() {
        let o = (s.run)(seed);
        done(i + 1, list.len(), &o);
        out.push(o);
    }
    let passed = out.iter().filter(|o| o.pass()).count();
    Results {
        seed,
        passed,
        failed: out.len() - passed,
        scenarios: out,
    }
}

fn fmt_value(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.2e}")
    }
}

/// The verdict table as text.
pub fn table(r: &Results) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<18} {:<7} {:<70} reason",
        "scenario", "verdict", "key figures"
    );
    for s in &r.scenarios {
        let figs: Vec<String> = s
            .figures
            .iter()
            .map(|f| format!("{} {}", f.name, fmt_value(f.value)))
            .collect();
        let figs = figs.join(", ");
        let _ = writeln!(
            o,
            "{:<18} {:<7} {:<70} {}",
            s.scenario, s.verdict, figs, s.reason
        );
    }
    let _ = writeln!(
        o,
        "\n{} passed, {} failed (seed {})",
        r.passed, r.failed, r.seed
    );
    o
}
