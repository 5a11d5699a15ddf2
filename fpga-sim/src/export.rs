//! `podlink-sim export POD.toml --switch ID --out FILE`: the binary switch configuration
//! (`spec-notes/switch.md#configuration-format`) of one switch of a pod, built from the same
//! fabric the simulator runs, so that one description both simulates and deploys.

use crate::pod::config::{parse_ranges, PodFile};
use crate::pod::topology::{check_routes, Attach, Fabric};
use podlink_protocol::wire::{AccelId, PartitionId};
use podlink_switch::config::{emit, EmitError};
use podlink_switch::tables::{Attachment, PartitionCfg, PortCfg, RateCap};
use podlink_switch::{PortIndex, Tables, WIDE_PORTS};

/// Why a switch cannot be exported.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ExportError {
    /// No switch with that index.
    #[error("no switch {0} (the pod has {1})")]
    NoSuchSwitch(u32, usize),
    /// More ports than the switch library's widest instance holds.
    #[error("switch {switch} has {ports} ports; the switch library holds at most {max}")]
    TooManyPorts {
        /// Switch.
        switch: u32,
        /// Its ports.
        ports: usize,
        /// The instance's capacity.
        max: usize,
    },
    /// The pod's routes are unsound (a missing route or a loop); nothing is exported.
    #[error("the pod's routes are unsound: {0}")]
    Routes(String),
    /// The firmware's table builder refused an entry (names it).
    #[error("switch {switch}: {what}: {err:?}")]
    Tables {
        /// Switch.
        switch: u32,
        /// Which entry.
        what: String,
        /// The firmware's error.
        err: podlink_switch::config::ConfigError,
    },
    /// Emitting the binary format failed.
    #[error("emit: {0:?}")]
    Emit(EmitError),
}

/// Default burst of a partition rate cap, bytes.
pub const RATE_CAP_BURST_BYTES: u32 = 4096;

/// The switch library's tables of switch `sw`, in the instance `Tables<PORTS, P>`.
///
/// # Errors
/// See [`ExportError`].
pub fn switch_tables<const PORTS: usize, P: PortIndex>(
    pod: &PodFile,
    fabric: &Fabric,
    sw: u32,
) -> Result<Tables<PORTS, P>, ExportError> {
    let node = fabric
        .switches
        .get(sw as usize)
        .ok_or(ExportError::NoSuchSwitch(sw, fabric.switches.len()))?;
    let max = PORTS;
    if node.ports.len() > max {
        return Err(ExportError::TooManyPorts {
            switch: sw,
            ports: node.ports.len(),
            max,
        });
    }
    let problems = check_routes(fabric);
    if let Some(p) = problems.first() {
        return Err(ExportError::Routes(p.to_string()));
    }
    let err = |what: String| {
        move |err| ExportError::Tables {
            switch: sw,
            what,
            err,
        }
    };
    let mut t = Tables::<PORTS, P>::empty();
    t.set_num_ports(node.ports.len() as u16)
        .map_err(err("port count".into()))?;
    t.set_adaptive(pod.switch.adaptive);
    for (p, a) in node.ports.iter().enumerate() {
        let attach = match a {
            Attach::Accel { accel, .. } => {
                Attachment::Accelerator(AccelId::from_bits_truncate(*accel as u16))
            }
            Attach::Switch { .. } => Attachment::Switch,
        };
        t.set_port(p as u16, PortCfg { attach, plane: 0 })
            .map_err(err(format!("port {p}")))?;
    }
    // Partitions: the pod's, or one partition 0 holding every accelerator.
    let parts: Vec<(u16, u32, Option<f64>, Vec<u32>)> = if pod.partitions.is_empty() {
        vec![(0, 1, None, (0..fabric.accels).collect())]
    } else {
        pod.partitions
            .iter()
            .map(|p| {
                let members = parse_ranges(&p.accelerators, fabric.accels).unwrap_or_default();
                (p.id, p.weight, p.rate_cap_gbps, members)
            })
            .collect()
    };
    for (id, weight, cap, members) in parts {
        let cfg = PartitionCfg {
            id: PartitionId::from_bits_truncate(id),
            weight: weight.clamp(1, 255) as u8,
            rate_cap: cap.map(|gbps| RateCap {
                // 1 Gb/s = 125 bytes per microsecond.
                bytes_per_us: ((gbps * 125.0).round() as u32).max(1),
                burst_bytes: RATE_CAP_BURST_BYTES,
            }),
        };
        let slot = t
            .add_partition(cfg)
            .map_err(err(format!("partition {id}")))?;
        for a in members {
            t.add_member(slot, AccelId::from_bits_truncate(a as u16))
                .map_err(err(format!("partition {id} member {a}")))?;
        }
    }
    for (d, ports) in node.routes.iter().enumerate() {
        let ways: Vec<u16> = ports.iter().map(|p| *p as u16).collect();
        if !ways.is_empty() {
            t.set_route(AccelId::from_bits_truncate(d as u16), &ways)
                .map_err(err(format!("route to {d}")))?;
        }
    }
    t.validate().map_err(err("validation".into()))?;
    Ok(t)
}

/// The binary configuration of switch `sw`: format version 1 for up to 255 ports, version 2
/// (u16 port numbers) above, up to the library's widest instance ([`WIDE_PORTS`]).
///
/// # Errors
/// See [`ExportError`].
pub fn export(pod: &PodFile, fabric: &Fabric, sw: u32) -> Result<Vec<u8>, ExportError> {
    let t = switch_tables::<WIDE_PORTS, u16>(pod, fabric, sw)?;
    let mut buf = vec![0u8; 64 * 1024];
    let n = emit(&t, &mut buf).map_err(ExportError::Emit)?;
    buf.truncate(n);
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::presets;
    use podlink_protocol::wire::Vc;
    use podlink_switch::port::SimPort;
    use podlink_switch::{DropReason, Header, Switch};

    /// Load the exported bytes into the firmware library and check that every forwarding
    /// decision is one the simulator's fabric allows, for every source and destination.
    fn firmware_agrees(pod: &PodFile, sw: u32) {
        agrees::<64, u8>(pod, sw);
    }

    /// [`firmware_agrees`] with the library instance `Switch<PORTS, P>` (built on a thread
    /// with a stack that holds it).
    fn agrees<const PORTS: usize, P: PortIndex>(pod: &PodFile, sw: u32) {
        let pod = pod.clone();
        std::thread::Builder::new()
            .stack_size(4 * std::mem::size_of::<Switch<PORTS, P>>() + (8 << 20))
            .spawn(move || agrees_on::<PORTS, P>(&pod, sw))
            .unwrap()
            .join()
            .unwrap();
    }

    fn agrees_on<const PORTS: usize, P: PortIndex>(pod: &PodFile, sw: u32) {
        let fabric = Fabric::build(pod);
        let bytes = export(pod, &fabric, sw).unwrap();
        let mut s = Box::new(Switch::<PORTS, P>::empty());
        s.load_config(&bytes).unwrap();
        let node = &fabric.switches[sw as usize];
        for p in 0..node.ports.len() {
            s.refresh_port(p as u16, &SimPort::up_with_credits(64));
        }
        for (ingress, a) in node.ports.iter().enumerate() {
            let sources: Vec<u32> = match a {
                Attach::Accel { accel, .. } => vec![*accel],
                // A trunk carries any accelerator not attached to this switch.
                Attach::Switch { .. } => (0..fabric.accels)
                    .filter(|x| {
                        !node
                            .ports
                            .iter()
                            .any(|q| matches!(q, Attach::Accel { accel, .. } if accel == x))
                    })
                    .take(4)
                    .collect(),
            };
            for src in sources {
                for dst in 0..fabric.accels {
                    if dst == src {
                        continue;
                    }
                    let h = Header::request(
                        AccelId::new(src as u16).unwrap(),
                        AccelId::new(dst as u16).unwrap(),
                        Vc::new(0).unwrap(),
                        u64::from(dst) * 256,
                    );
                    let same =
                        fabric.partition_of[src as usize] == fabric.partition_of[dst as usize];
                    match s.decide(ingress as u16, &h) {
                        Ok(port) => {
                            assert!(same, "switch {sw}: {src}->{dst} crosses partitions");
                            assert!(
                                node.routes[dst as usize].contains(&u32::from(port)),
                                "switch {sw}: {src}->{dst} left on port {port}, fabric allows {:?}",
                                node.routes[dst as usize]
                            );
                        }
                        Err(DropReason::CrossPartition) => assert!(!same),
                        Err(e) => panic!("switch {sw}: {src}->{dst} from port {ingress}: {e}"),
                    }
                }
            }
        }
    }

    #[test]
    fn exported_configs_make_the_fabrics_decisions() {
        let pod = presets::load("ualink-64x4").unwrap();
        firmware_agrees(&pod, 0);
        firmware_agrees(&pod, 3);
        let pod = presets::load("two-tier-384").unwrap();
        firmware_agrees(&pod, 0); // a leaf
        firmware_agrees(&pod, 30); // a spine
        let text = format!(
            "{}\n[[partitions]]\nid = 1\naccelerators = \"0-7\"\n[[partitions]]\nid = 2\naccelerators = \"8-15\"\nrate_cap_gbps = 100.0\n",
            presets::PRESETS.iter().find(|p| p.name == "single-switch-16").unwrap().text
        );
        let pod = PodFile::parse(&text, "two-partitions").unwrap();
        firmware_agrees(&pod, 0);
    }

    /// Switches over 64 ports: the NVL72-like 72-port switch (format version 1) and a
    /// 1024-port plane of `ualink-1024` (version 2) load into wider library instances and
    /// make the fabric's decisions; the firmware's 64-port instance refuses them with a
    /// typed error.
    #[test]
    fn large_switches_export_and_agree() {
        let pod = presets::load("nvl72-like").unwrap();
        let f = Fabric::build(&pod);
        let bytes = export(&pod, &f, 0).unwrap();
        assert_eq!(bytes[4], podlink_switch::config::VERSION);
        agrees::<128, u8>(&pod, 0);
        let pod = presets::load("ualink-1024").unwrap();
        let f = Fabric::build(&pod);
        let bytes = export(&pod, &f, 2).unwrap();
        assert_eq!(bytes[4], podlink_switch::config::VERSION_2);
        assert_eq!(u16::from_be_bytes([bytes[6], bytes[7]]), 1024);
        agrees::<1024, u16>(&pod, 2);
        let mut fw = Box::new(Switch::new());
        assert_eq!(
            fw.load_config(&bytes),
            Err(podlink_switch::config::ConfigError::PortCapacity {
                ports: 1024,
                capacity: 64
            })
        );
    }

    #[test]
    fn refusals() {
        let pod = presets::load("nvl72-like").unwrap();
        let f = Fabric::build(&pod);
        assert!(matches!(
            switch_tables::<64, u8>(&pod, &f, 0),
            Err(ExportError::TooManyPorts {
                ports: 72,
                max: 64,
                ..
            })
        ));
        assert!(matches!(
            export(&pod, &f, 99),
            Err(ExportError::NoSuchSwitch(99, 18))
        ));
        let pod = presets::load("two-tier-384").unwrap();
        let mut f = Fabric::build(&pod);
        f.switches[3].routes[100].clear();
        assert!(matches!(export(&pod, &f, 0), Err(ExportError::Routes(_))));
    }
}
