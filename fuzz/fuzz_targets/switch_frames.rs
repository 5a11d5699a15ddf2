//! Arbitrary frames, link changes and time into the forwarding logic of the self-test pod
//! (64 ports, 1024 IDs): never panics, every forwarded frame leaves on a port of its
//! destination's route, spoofed sources never pass, and queues stay bounded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podlink_protocol::time::{Duration, Instant};
use podlink_protocol::wire::Vc;
use podlink_switch::port::{PortLink, SimPort};
use podlink_switch::selftest::{bring_up, pod_tables, LOCAL};
use podlink_switch::{DropReason, Frame, FrameKind, Header, Switch, MAX_PORTS, QUEUE_SLOTS};

fuzz_target!(|data: &[u8]| {
    let mut sw = Box::new(Switch::new());
    sw.stage_with(pod_tables).expect("the self-test pod is valid");
    sw.commit().expect("staged");
    let mut ports = vec![SimPort::default(); MAX_PORTS];
    bring_up(&mut sw, &mut ports, 4);
    let mut now = Instant::from_ps(1);
    let mut handle = 0u32;
    let mut rest = data;
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        match op % 6 {
            // A frame: ingress port, then a TL control field parsed by the protocol crate.
            0 | 1 | 2 => {
                let Some((&ingress, tail)) = rest.split_first() else { break };
                let n = tail.len().min(16);
                let (field, tail) = tail.split_at(n);
                rest = tail;
                let Ok(header) = Header::parse(field) else { continue };
                handle = handle.wrapping_add(1);
                let frame = Frame { handle, header, bytes: 64 };
                let ingress = u16::from(ingress % 70);
                match sw.forward(now, ingress, frame, &mut ports) {
                    Ok(f) => {
                        let mut route = sw.tables().route(header.dst);
                        assert!(route.any(|p| p == f.port()), "egress outside the route set");
                        if let (Some(src), true) = (header.src, ingress < LOCAL) {
                            assert_eq!(src.get(), ingress, "spoofed source passed");
                        }
                        assert_ne!(header.kind, FrameKind::LinkLocal);
                    }
                    Err(DropReason::LinkLocal) => assert_eq!(header.kind, FrameKind::LinkLocal),
                    Err(_) => {}
                }
            }
            // Credits or link state of a port.
            3 => {
                let Some((&[p, x], tail)) = rest.split_first_chunk::<2>() else { break };
                rest = tail;
                let p = u16::from(p) % MAX_PORTS as u16;
                let link = &mut ports[usize::from(p)];
                match x >> 6 {
                    0 => link.grant(Vc::from_bits_truncate(x), u32::from(x & 0x0f)),
                    1 => {
                        let up = link.is_up();
                        link.set_up(!up);
                    }
                    2 => link.inject_crc_errors(u32::from(x & 0x3f)),
                    _ => link.inject_replays(u32::from(x & 0x3f)),
                }
                sw.refresh_port(p, &ports[usize::from(p)]);
            }
            // Time passes; health windows close.
            4 => {
                let Some((&d, tail)) = rest.split_first() else { break };
                rest = tail;
                now += Duration::from_us(u64::from(d) * 10);
                sw.handle_timeout(now, &ports);
            }
            // Drain.
            _ => {
                for _ in 0..8 {
                    if sw.poll_transmit(now, &mut ports).is_none() {
                        break;
                    }
                }
                while sw.poll_event().is_some() {}
                while sw.poll_discarded().is_some() {}
            }
        }
        assert!(usize::from(sw.queued_frames()) <= QUEUE_SLOTS);
    }
});
