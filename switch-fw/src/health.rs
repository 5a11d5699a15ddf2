//! Per-port health monitor with hysteresis (`spec-notes/switch.md#health-scoring`).
//!
//! At the end of every window (default 1 ms of explicit time) each port's inputs are graded:
//! the deltas of the link's CRC errors, replays and flaps ([`crate::port::LinkStats`]), the
//! link state, and the latest transceiver reading (temperature, supply voltage, lowest lane
//! rx power, module error counter). Each input grades Good, Bad or Critical against the
//! [`HealthPolicy`] thresholds; the window takes the worst grade. The state moves:
//!
//! | from | Good window | Bad window | Critical window |
//! |---|---|---|---|
//! | Healthy | stay | `degrade_after` bad in a row → Degraded | → Failed |
//! | Degraded | `recover_after` good in a row → Healthy | `fail_after` bad in a row → Failed | → Failed |
//! | Failed | `recover_after` good in a row → Degraded | stay | stay |
//!
//! Recovery needs many more good windows than degradation needs bad ones: that gap is the
//! hysteresis that keeps a marginal link from flapping between states. Degraded ports are
//! drained from adaptive choice; Failed ports carry nothing.

use crate::port::LinkStats;
use core::fmt;
use podlink_protocol::time::Duration;

/// A port's health state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Health {
    /// In full use.
    #[default]
    Healthy,
    /// Still forwards (pinned flows, or when no healthy way is left) but new adaptive
    /// choices avoid it.
    Degraded,
    /// Carries nothing; its queued frames are flushed.
    Failed,
}

impl fmt::Display for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Health::Healthy => "healthy",
            Health::Degraded => "degraded",
            Health::Failed => "failed",
        })
    }
}

/// The grade of one window (or of one input in it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Grade {
    /// Within limits.
    Good,
    /// Past a warning threshold.
    Bad,
    /// Past an alarm threshold.
    Critical,
}

/// A transceiver module's monitors, in CMIS units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TransceiverReading {
    /// Module temperature in 1/256 °C (signed).
    pub temp_c256: i16,
    /// Supply voltage in 100 µV units.
    pub vcc_100uv: u16,
    /// Lowest rx optical power over the lanes, in 0.1 µW units.
    pub rx_power_min_01uw: u16,
    /// Cumulative module error counter (wrapping).
    pub errors: u32,
}

/// Two thresholds of one input: at or above `bad` a window is Bad, at or above `critical`
/// it is Critical.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limits {
    /// Warning threshold.
    pub bad: u32,
    /// Alarm threshold.
    pub critical: u32,
}

impl Limits {
    fn grade(self, v: u32) -> Grade {
        if v >= self.critical {
            Grade::Critical
        } else if v >= self.bad {
            Grade::Bad
        } else {
            Grade::Good
        }
    }
}

/// Thresholds and window counts of the health monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HealthPolicy {
    /// Window length.
    pub window: Duration,
    /// CRC errors per window.
    pub crc_errors: Limits,
    /// Replays per window.
    pub replays: Limits,
    /// Link-down transitions per window.
    pub flaps: Limits,
    /// Transceiver error-counter increments per window.
    pub module_errors: Limits,
    /// Temperature warning, 1/256 °C.
    pub temp_bad_c256: i16,
    /// Temperature alarm, 1/256 °C.
    pub temp_critical_c256: i16,
    /// Rx power warning (below), 0.1 µW.
    pub rx_power_bad_01uw: u16,
    /// Rx power alarm (below), 0.1 µW.
    pub rx_power_critical_01uw: u16,
    /// Lowest good supply voltage, 100 µV.
    pub vcc_min_100uv: u16,
    /// Highest good supply voltage, 100 µV.
    pub vcc_max_100uv: u16,
    /// Bad windows in a row that take Healthy to Degraded.
    pub degrade_after: u8,
    /// Bad windows in a row that take Degraded to Failed.
    pub fail_after: u8,
    /// Good windows in a row that take Failed to Degraded, or Degraded to Healthy.
    pub recover_after: u8,
    /// How long hashed flows keep away from a port that came back (up, or out of Failed),
    /// counted from the last frame the switch forwarded before it came back
    /// (`spec-notes/switch.md#settling`): the flows that moved off it while it was lost keep
    /// the way they moved to, where their requests may still be queued. Default 100 µs, the
    /// accelerators' default request timeout: a request forwarded that long ago has been
    /// answered or given up by its requester.
    pub settle: Duration,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        HealthPolicy {
            window: Duration::from_ms(1),
            crc_errors: Limits {
                bad: 4,
                critical: 256,
            },
            replays: Limits {
                bad: 4,
                critical: 64,
            },
            flaps: Limits {
                bad: 1,
                critical: 3,
            },
            module_errors: Limits {
                bad: 16,
                critical: 4096,
            },
            temp_bad_c256: 70 * 256,
            temp_critical_c256: 80 * 256,
            rx_power_bad_01uw: 1000,     // 100 µW, -10 dBm
            rx_power_critical_01uw: 200, // 20 µW, about -17 dBm
            vcc_min_100uv: 31_350,       // 3.135 V
            vcc_max_100uv: 34_650,       // 3.465 V
            degrade_after: 2,
            fail_after: 4,
            recover_after: 8,
            settle: Duration::from_us(100),
        }
    }
}

impl HealthPolicy {
    /// Grade a transceiver reading (`err_delta`: error-counter increment in the window).
    pub fn grade_transceiver(&self, r: &TransceiverReading, err_delta: u32) -> Grade {
        let temp = if r.temp_c256 >= self.temp_critical_c256 {
            Grade::Critical
        } else if r.temp_c256 >= self.temp_bad_c256 {
            Grade::Bad
        } else {
            Grade::Good
        };
        let rx = if r.rx_power_min_01uw < self.rx_power_critical_01uw {
            Grade::Critical
        } else if r.rx_power_min_01uw < self.rx_power_bad_01uw {
            Grade::Bad
        } else {
            Grade::Good
        };
        let vcc = if r.vcc_100uv < self.vcc_min_100uv || r.vcc_100uv > self.vcc_max_100uv {
            Grade::Bad
        } else {
            Grade::Good
        };
        temp.max(rx)
            .max(vcc)
            .max(self.module_errors.grade(err_delta))
    }

    /// Grade the link counters of one window.
    pub fn grade_link(&self, delta: LinkStats, up: bool) -> Grade {
        let down = if up { Grade::Good } else { Grade::Bad };
        self.crc_errors
            .grade(delta.crc_errors)
            .max(self.replays.grade(delta.replays))
            .max(self.flaps.grade(delta.flaps))
            .max(down)
    }
}

/// The health monitor of one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthMonitor {
    state: Health,
    last: LinkStats,
    xcvr: Option<TransceiverReading>,
    xcvr_last_errors: Option<u32>,
    bad_run: u8,
    good_run: u8,
}

impl Default for HealthMonitor {
    fn default() -> Self {
        Self::new()
    }
}

impl HealthMonitor {
    /// A healthy port with no history.
    pub const fn new() -> HealthMonitor {
        HealthMonitor {
            state: Health::Healthy,
            last: LinkStats {
                crc_errors: 0,
                replays: 0,
                flaps: 0,
            },
            xcvr: None,
            xcvr_last_errors: None,
            bad_run: 0,
            good_run: 0,
        }
    }

    /// The current state.
    pub fn state(&self) -> Health {
        self.state
    }

    /// Start counting deltas from `stats` (on attach, so old history is not graded).
    pub fn baseline(&mut self, stats: LinkStats) {
        self.last = stats;
    }

    /// Record the latest transceiver reading (graded at the end of the window).
    pub fn set_transceiver(&mut self, r: TransceiverReading) {
        self.xcvr = Some(r);
    }

    /// Close a window: grade it and move the state. Returns the grade and the transition, if
    /// any.
    pub fn end_window(
        &mut self,
        policy: &HealthPolicy,
        stats: LinkStats,
        up: bool,
    ) -> (Grade, Option<(Health, Health)>) {
        let delta = LinkStats {
            crc_errors: stats.crc_errors.wrapping_sub(self.last.crc_errors),
            replays: stats.replays.wrapping_sub(self.last.replays),
            flaps: stats.flaps.wrapping_sub(self.last.flaps),
        };
        self.last = stats;
        let mut grade = policy.grade_link(delta, up);
        if let Some(r) = self.xcvr {
            let err_delta = self
                .xcvr_last_errors
                .map_or(0, |last| r.errors.wrapping_sub(last));
            self.xcvr_last_errors = Some(r.errors);
            grade = grade.max(policy.grade_transceiver(&r, err_delta));
        }
        (grade, self.step(policy, grade))
    }

    /// Apply one window's grade to the state machine.
    pub fn step(&mut self, policy: &HealthPolicy, grade: Grade) -> Option<(Health, Health)> {
        let from = self.state;
        match grade {
            Grade::Good => {
                self.bad_run = 0;
                self.good_run = self.good_run.saturating_add(1);
                if self.good_run >= policy.recover_after {
                    self.state = match from {
                        Health::Failed => Health::Degraded,
                        _ => Health::Healthy,
                    };
                }
            }
            Grade::Bad => {
                self.good_run = 0;
                self.bad_run = self.bad_run.saturating_add(1);
                match from {
                    Health::Healthy if self.bad_run >= policy.degrade_after => {
                        self.state = Health::Degraded
                    }
                    Health::Degraded if self.bad_run >= policy.fail_after => {
                        self.state = Health::Failed
                    }
                    _ => {}
                }
            }
            Grade::Critical => {
                self.good_run = 0;
                self.bad_run = self.bad_run.saturating_add(1);
                self.state = Health::Failed;
            }
        }
        if self.state != from {
            self.good_run = 0;
            self.bad_run = 0;
            Some((from, self.state))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(m: &mut HealthMonitor, p: &HealthPolicy, g: Grade, n: usize) -> Health {
        for _ in 0..n {
            m.step(p, g);
        }
        m.state()
    }

    #[test]
    fn test_hysteresis_path() {
        let p = HealthPolicy::default();
        let mut m = HealthMonitor::new();
        assert_eq!(run(&mut m, &p, Grade::Bad, 1), Health::Healthy);
        assert_eq!(run(&mut m, &p, Grade::Bad, 1), Health::Degraded);
        // One good window does not recover; a bad one restarts the count.
        assert_eq!(run(&mut m, &p, Grade::Good, 7), Health::Degraded);
        assert_eq!(run(&mut m, &p, Grade::Bad, 1), Health::Degraded);
        assert_eq!(run(&mut m, &p, Grade::Good, 7), Health::Degraded);
        assert_eq!(run(&mut m, &p, Grade::Good, 1), Health::Healthy);
        assert_eq!(run(&mut m, &p, Grade::Bad, 2), Health::Degraded);
        assert_eq!(run(&mut m, &p, Grade::Bad, 3), Health::Degraded);
        assert_eq!(run(&mut m, &p, Grade::Bad, 1), Health::Failed);
        assert_eq!(run(&mut m, &p, Grade::Good, 8), Health::Degraded);
        assert_eq!(run(&mut m, &p, Grade::Good, 8), Health::Healthy);
        assert_eq!(
            m.step(&p, Grade::Critical),
            Some((Health::Healthy, Health::Failed))
        );
    }

    #[test]
    fn test_grades_from_inputs() {
        let p = HealthPolicy::default();
        let mut m = HealthMonitor::new();
        let s = LinkStats {
            crc_errors: 5,
            replays: 0,
            flaps: 0,
        };
        assert_eq!(m.end_window(&p, s, true).0, Grade::Bad);
        // Deltas, not totals: no new errors is a good window.
        assert_eq!(m.end_window(&p, s, true).0, Grade::Good);
        let s2 = LinkStats {
            crc_errors: 5,
            replays: 100,
            flaps: 0,
        };
        assert_eq!(m.end_window(&p, s2, true).0, Grade::Critical);
        assert_eq!(m.state(), Health::Failed);
        assert_eq!(m.end_window(&p, s2, false).0, Grade::Bad);
        let s3 = LinkStats { flaps: 3, ..s2 };
        assert_eq!(m.end_window(&p, s3, true).0, Grade::Critical);
        // Wrapping counters.
        let mut m = HealthMonitor::new();
        m.baseline(LinkStats {
            crc_errors: u32::MAX,
            replays: 0,
            flaps: 0,
        });
        let w = LinkStats {
            crc_errors: 1,
            replays: 0,
            flaps: 0,
        };
        assert_eq!(m.end_window(&p, w, true).0, Grade::Good);
    }

    #[test]
    fn test_transceiver_grades() {
        let p = HealthPolicy::default();
        let ok = TransceiverReading {
            temp_c256: 40 * 256,
            vcc_100uv: 33_000,
            rx_power_min_01uw: 5000,
            errors: 0,
        };
        assert_eq!(p.grade_transceiver(&ok, 0), Grade::Good);
        assert_eq!(
            p.grade_transceiver(
                &TransceiverReading {
                    temp_c256: 75 * 256,
                    ..ok
                },
                0
            ),
            Grade::Bad
        );
        assert_eq!(
            p.grade_transceiver(
                &TransceiverReading {
                    temp_c256: 85 * 256,
                    ..ok
                },
                0
            ),
            Grade::Critical
        );
        assert_eq!(
            p.grade_transceiver(
                &TransceiverReading {
                    rx_power_min_01uw: 500,
                    ..ok
                },
                0
            ),
            Grade::Bad
        );
        assert_eq!(
            p.grade_transceiver(
                &TransceiverReading {
                    rx_power_min_01uw: 10,
                    ..ok
                },
                0
            ),
            Grade::Critical
        );
        assert_eq!(
            p.grade_transceiver(
                &TransceiverReading {
                    vcc_100uv: 30_000,
                    ..ok
                },
                0
            ),
            Grade::Bad
        );
        assert_eq!(p.grade_transceiver(&ok, 20), Grade::Bad);
        let mut m = HealthMonitor::new();
        m.set_transceiver(ok);
        assert_eq!(m.end_window(&p, LinkStats::default(), true).0, Grade::Good);
        m.set_transceiver(TransceiverReading { errors: 5000, ..ok });
        assert_eq!(
            m.end_window(&p, LinkStats::default(), true).0,
            Grade::Critical
        );
    }
}
