//! `podlink-sim verify POD.toml`: static checks of a pod file before any run
//! (`spec-notes/validation.md#verify`): routes reach every permitted pair without loops,
//! partitions and port attachments are consistent, and the zero-load budgets hold analytically.

use crate::pod::timing::{read_breakdown, switch_port_to_port};
use crate::pod::topology::{check_routes, Attach, Fabric};
use crate::pod::PodFile;

/// One finding.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// Which check.
    pub check: &'static str,
    /// What is wrong, naming the offending entry.
    pub message: String,
}

/// Everything `verify` checks; empty means the pod is sound.
pub fn verify(pod: &PodFile, fabric: &Fabric) -> Vec<Finding> {
    let mut out = Vec::new();
    for p in check_routes(fabric) {
        out.push(Finding {
            check: "routes",
            message: p.to_string(),
        });
    }
    // Attachments: every switch port's far end points back at it.
    for (si, s) in fabric.switches.iter().enumerate() {
        for (pi, a) in s.ports.iter().enumerate() {
            let ok = match *a {
                Attach::Accel { accel, port } => {
                    fabric
                        .accel_ports
                        .get(accel as usize)
                        .and_then(|v| v.get(port as usize))
                        == Some(&(si as u32, pi as u32))
                }
                Attach::Switch { switch, port } => {
                    fabric
                        .switches
                        .get(switch as usize)
                        .and_then(|o| o.ports.get(port as usize))
                        == Some(&Attach::Switch {
                            switch: si as u32,
                            port: pi as u32,
                        })
                }
            };
            if !ok {
                out.push(Finding {
                    check: "attachments",
                    message: format!("switch {si} port {pi}: far end {a:?} does not point back"),
                });
            }
        }
    }
    if !pod.partitions.is_empty() {
        let ids: Vec<u16> = pod.partitions.iter().map(|p| p.id).collect();
        for (a, p) in fabric.partition_of.iter().enumerate() {
            if !ids.contains(p) {
                out.push(Finding {
                    check: "partitions",
                    message: format!("accelerator {a} is in no partition"),
                });
            }
        }
    }
    let p2p = switch_port_to_port(pod).as_ps() as f64 / 1000.0;
    if p2p > pod.budgets.switch_port_to_port_ns {
        out.push(Finding {
            check: "budgets",
            message: format!(
                "switch port-to-port {p2p:.3} ns at zero load exceeds budgets.switch_port_to_port_ns = {}",
                pod.budgets.switch_port_to_port_ns
            ),
        });
    }
    let max_hops = (0..fabric.accels)
        .filter_map(|d| fabric.hops(0, d))
        .max()
        .unwrap_or(1);
    let rtt: u64 = read_breakdown(pod, max_hops)
        .iter()
        .map(|s| s.time.as_ps())
        .sum();
    let rtt = rtt as f64 / 1000.0;
    if rtt > pod.budgets.read_rtt_ns {
        out.push(Finding {
            check: "budgets",
            message: format!(
                "64 B read round trip {rtt:.3} ns at zero load ({max_hops} switch hops) exceeds budgets.read_rtt_ns = {}",
                pod.budgets.read_rtt_ns
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::presets;

    #[test]
    fn presets_verify_clean() {
        for name in [
            "ualink-64x4",
            "nvl72-like",
            "two-tier-384",
            "single-switch-16",
        ] {
            let pod = presets::load(name).unwrap();
            let f = Fabric::build(&pod);
            assert_eq!(verify(&pod, &f), vec![], "{name}");
        }
    }

    #[test]
    fn budget_violation_is_reported() {
        let mut pod = presets::load("single-switch-16").unwrap();
        pod.budgets.switch_port_to_port_ns = 10.0;
        pod.budgets.read_rtt_ns = 100.0;
        let f = Fabric::build(&pod);
        let v = verify(&pod, &f);
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(v.iter().all(|x| x.check == "budgets"));
    }
}
