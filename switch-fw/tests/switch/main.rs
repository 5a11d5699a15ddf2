//! Integration and property tests of the switch rules, one module per behaviour.
#![allow(missing_docs)]

mod config;
mod endpoints;
mod forwarding;
mod health;
mod isolation;
mod links;
mod ordering;
mod wide;
mod wrr;

use podlink_protocol::time::Instant;
use podlink_protocol::wire::{AccelId, PartitionId, Vc};
use podlink_switch::port::SimPort;
use podlink_switch::tables::{Attachment, PartitionCfg, PortCfg, RateCap, Tables};
use podlink_switch::{config::ConfigError, Frame, Header, Switch};

pub(crate) fn aid(v: u16) -> AccelId {
    AccelId::new(v).unwrap()
}

pub(crate) fn vc(v: u8) -> Vc {
    Vc::new(v).unwrap()
}

/// Ports 0..4: accelerators 0..4. Ports 4..8: trunks (planes 1..4).
/// Partition 0 (id 10): 0, 1, 100..200. Partition 1 (id 11): 2, 3, 200..300.
/// Remote IDs route over [4, 5, 6, 7].
pub(crate) const PORTS: usize = 8;
pub(crate) const TRUNKS: [u16; 4] = [4, 5, 6, 7];

pub(crate) fn small_pod(t: &mut Tables) -> Result<(), ConfigError> {
    small_pod_with(t, true, None)
}

pub(crate) fn small_pod_with(
    t: &mut Tables,
    adaptive: bool,
    cap: Option<RateCap>,
) -> Result<(), ConfigError> {
    t.set_num_ports(PORTS as u16)?;
    t.set_adaptive(adaptive);
    t.set_generation(7);
    for p in 0..4u16 {
        t.set_port(
            p,
            PortCfg {
                attach: Attachment::Accelerator(aid(p)),
                plane: 0,
            },
        )?;
    }
    for p in TRUNKS {
        t.set_port(
            p,
            PortCfg {
                attach: Attachment::Switch,
                plane: p as u8 - 3,
            },
        )?;
    }
    let a = t.add_partition(PartitionCfg {
        id: PartitionId::new(10).unwrap(),
        weight: 1,
        rate_cap: None,
    })?;
    let b = t.add_partition(PartitionCfg {
        id: PartitionId::new(11).unwrap(),
        weight: 1,
        rate_cap: cap,
    })?;
    for x in [0u16, 1].into_iter().chain(100..200) {
        t.add_member(a, aid(x))?;
    }
    for x in [2u16, 3].into_iter().chain(200..300) {
        t.add_member(b, aid(x))?;
    }
    for p in 0..4u16 {
        t.set_route(aid(p), &[p])?;
    }
    for x in 100..300 {
        t.set_route(aid(x), &TRUNKS)?;
    }
    Ok(())
}

pub(crate) fn new_switch(
    build: impl FnOnce(&mut Tables) -> Result<(), ConfigError>,
    credits: u32,
) -> (Box<Switch>, Vec<SimPort>) {
    let mut sw = Box::new(Switch::new());
    sw.stage_with(build).unwrap();
    sw.commit().unwrap();
    let ports = vec![SimPort::up_with_credits(credits); PORTS];
    for (p, link) in ports.iter().enumerate() {
        sw.refresh_port(p as u16, link);
    }
    while sw.poll_event().is_some() {}
    (sw, ports)
}

pub(crate) fn frame(handle: u32, header: Header) -> Frame {
    Frame {
        handle,
        header,
        bytes: 64,
    }
}

pub(crate) fn t(ns: u64) -> Instant {
    Instant::from_ps(ns * 1000)
}
