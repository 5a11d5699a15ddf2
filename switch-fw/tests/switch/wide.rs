//! A wide instance (`Switch<1024, u16>`): the same rules on port numbers above 255, through
//! the whole path (decide, cut-through, queueing, poll_transmit, flush, events, counters).

use super::{aid, frame, t, vc};
use podlink_protocol::wire::PartitionId;
use podlink_switch::port::{PortLink, SimPort};
use podlink_switch::tables::{Attachment, PartitionCfg, PortCfg, Tables};
use podlink_switch::{config, DropReason, Event, Forwarded, Header, Switch, Transmit};

const N: usize = 1024;
/// Accelerator 7 sits on port 300, accelerator 9 on port 1000; ports 700 and 701 are trunks
/// reaching 20..40.
fn wide_pod(t: &mut Tables<N, u16>) -> Result<(), config::ConfigError> {
    t.set_num_ports(N as u16)?;
    let cfg = |attach| PortCfg { attach, plane: 0 };
    t.set_port(300, cfg(Attachment::Accelerator(aid(7))))?;
    t.set_port(1000, cfg(Attachment::Accelerator(aid(9))))?;
    t.set_port(700, cfg(Attachment::Switch))?;
    t.set_port(701, cfg(Attachment::Switch))?;
    let p = t.add_partition(PartitionCfg {
        id: PartitionId::new(1).unwrap(),
        weight: 1,
        rate_cap: None,
    })?;
    for a in [7, 9].into_iter().chain(20..40) {
        t.add_member(p, aid(a))?;
    }
    t.set_route(aid(7), &[300])?;
    t.set_route(aid(9), &[1000])?;
    for a in 20..40 {
        t.set_route(aid(a), &[700, 701])?;
    }
    Ok(())
}

fn wide_switch() -> (Box<Switch<N, u16>>, Vec<SimPort>) {
    let mut sw = Box::new(Switch::<N, u16>::empty());
    sw.stage_with(wide_pod).unwrap();
    sw.commit().unwrap();
    let ports = vec![SimPort::up_with_credits(1); N];
    for (p, link) in ports.iter().enumerate() {
        sw.refresh_port(p as u16, link);
    }
    while sw.poll_event().is_some() {}
    (sw, ports)
}

#[test]
fn wide_instance_forwards_over_ports_above_255() {
    // The instance is about 2 MB: run on a thread with room for it.
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(run)
        .unwrap()
        .join()
        .unwrap();
}

fn run() {
    let (mut sw, mut ports) = wide_switch();
    assert_eq!(sw.tables().home_port(aid(9)), Some(1000));
    let req = Header::request(aid(9), aid(7), vc(0), 0x1000);
    // Cut through on port 300 (one credit), then queued there.
    assert_eq!(
        sw.forward(t(1), 1000, frame(1, req), &mut ports),
        Ok(Forwarded::CutThrough { port: 300 })
    );
    assert_eq!(
        sw.forward(t(2), 1000, frame(2, req), &mut ports),
        Ok(Forwarded::Queued { port: 300 })
    );
    assert_eq!(sw.queue_depth(300, vc(0)), 1);
    // The flow is pinned to its port while unanswered.
    assert_eq!(sw.flow_pin(&req), Some(300));
    // Nothing goes until port 300 has credit again; then it leaves from the queue.
    assert_eq!(sw.poll_transmit(t(3), &mut ports), None);
    ports[300].grant(vc(0), 1);
    sw.refresh_port(300, &ports[300]);
    assert!(matches!(
        sw.poll_transmit(t(4), &mut ports),
        Some(Transmit {
            port: 300,
            handle: 2,
            ..
        })
    ));
    assert_eq!(sw.counters().ports[300].tx_frames, 2);
    assert_eq!(sw.counters().ports[1000].rx_frames, 2);
    // A spoofed source on port 1000 is dropped and the event names port 1000.
    let spoof = Header::request(aid(7), aid(9), vc(0), 0);
    assert_eq!(
        sw.forward(t(5), 1000, frame(3, spoof), &mut ports),
        Err(DropReason::Spoofed)
    );
    assert!(matches!(
        sw.poll_event(),
        Some(Event::Dropped {
            port: 1000,
            reason: DropReason::Spoofed,
            ..
        })
    ));
    // Remote destinations over the two trunks; a frame queued on the chosen trunk is flushed
    // when its link goes down, with events naming the port.
    let remote = Header::request(aid(9), aid(25), vc(1), 0x2000);
    let first = sw
        .forward(t(6), 1000, frame(4, remote), &mut ports)
        .unwrap()
        .port();
    assert!(first == 700 || first == 701);
    let queued = sw
        .forward(t(7), 1000, frame(5, remote), &mut ports)
        .unwrap();
    assert_eq!(queued, Forwarded::Queued { port: first });
    ports[usize::from(first)].set_up(false);
    sw.refresh_port(first, &ports[usize::from(first)]);
    let events: Vec<Event> = core::iter::from_fn(|| sw.poll_event()).collect();
    assert!(
        events.contains(&Event::LinkDown { port: first }),
        "{events:?}"
    );
    assert!(
        events.contains(&Event::Flushed {
            port: first,
            frames: 1
        }),
        "{events:?}"
    );
    assert_eq!(sw.poll_discarded(), Some(5));
    assert!(!ports[usize::from(first)].is_up());
    // Out-of-range ports are ignored or refused, never panic.
    assert_eq!(
        sw.forward(t(8), 4000, frame(6, req), &mut ports),
        Err(DropReason::BadIngress)
    );
    sw.refresh_port(u16::MAX, &ports[0]);
    assert_eq!(sw.queue_depth(u16::MAX, vc(0)), 0);
}
