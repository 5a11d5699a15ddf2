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
    // The read `podlink-sim run` traces at zero load (`Fabric::probe_pair`).
    let hops = fabric.probe_pair().map_or(1, |(_, _, h)| h);
    let rtt: u64 = read_breakdown(pod, hops)
        .iter()
        .map(|s| s.time.as_ps())
        .sum();
    let rtt = rtt as f64 / 1000.0;
    if rtt > pod.budgets.read_rtt_ns {
        out.push(Finding {
            check: "budgets",
            message: format!(
                "64 B read round trip {rtt:.3} ns at zero load ({hops} switch hops) exceeds budgets.read_rtt_ns = {}",
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

#[cfg(test)]
mod override_tests {
    use super::*;
    use crate::pod::presets;

    fn with_routes(extra: &str) -> Result<PodFile, crate::pod::PodError> {
        let base = presets::PRESETS
            .iter()
            .find(|p| p.name == "two-tier-384")
            .unwrap()
            .text;
        PodFile::parse(&format!("{base}\n{extra}"), "pod.toml")
    }

    #[test]
    fn missing_route_and_loop_are_refused_by_verify() {
        // Leaf 0 loses its route to accelerator 200.
        let pod = with_routes("[[routes]]\nswitch = 0\ndest = \"200\"\nports = []\n").unwrap();
        let v = verify(&pod, &Fabric::build(&pod));
        assert!(
            v.iter()
                .any(|f| f.message.contains("switch 0: no route to accelerator 200")),
            "{v:?}"
        );
        // Spine 0 (switch 24, port 0 goes to leaf 0) sends accelerator 300 back to leaf 0,
        // which sends it up again: a loop.
        let pod = with_routes("[[routes]]\nswitch = 24\ndest = \"300\"\nports = [0]\n").unwrap();
        let v = verify(&pod, &Fabric::build(&pod));
        assert!(v.iter().any(|f| f.message.contains("loop")), "{v:?}");
        // Export refuses both too.
        assert!(crate::export::export(&pod, &Fabric::build(&pod), 0).is_err());
    }

    #[test]
    fn override_entries_are_validated_with_file_and_line() {
        let e = with_routes("[[routes]]\nswitch = 99\ndest = \"1\"\nports = []\n").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("routes.0.switch"));
        assert!(e.line.is_some());
        let e = with_routes("[[routes]]\nswitch = 0\ndest = \"1\"\nports = [40]\n").unwrap_err();
        assert!(e.message.contains("port 40"), "{e}");
    }
}
