//! Transactions through the switch: two accelerators, each a protocol `txn::Endpoint`
//! (requester, completer, TL credits, `UaLink`), on switch ports 0 and 1 (`LinkPort`s), over
//! lossy `phy::Wire`s. Writes, reads and atomics complete end to end.
//!
//! ```text
//!  Endpoint(accel 0) ══ wires ══ LinkPort 0 ─┐
//!                                            ├─ fabric::service ─ Switch
//!  Endpoint(accel 1) ══ wires ══ LinkPort 1 ─┘
//! ```
//!
//! The switch's ports grant per-VC credits (with `TlMessage::CreditTarget`); the endpoints
//! grant pool credits only (the target a TL stream starts at). Both directions must account
//! the same credits for this to run without overruns.

use super::*;
use podlink_protocol::flow::{CreditClass, CreditTarget};
use podlink_protocol::link::control::ControlConfig;
use podlink_protocol::link::UaLinkConfig;
use podlink_protocol::phy::{FaultConfig, FaultInjector, Probability, Wire};
use podlink_protocol::retry::FLIT_LEN;
use podlink_protocol::time::Duration;
use podlink_protocol::txn::{
    Atomic, AtomicOp, AtomicSize, ByteEnables, CompleterConfig, Endpoint, EndpointConfig,
    MemoryTarget, OpId, Operation, ReadData, ReadSink, Request, RequesterConfig, TargetError,
    WindowMemory,
};
use podlink_switch::fabric;
use podlink_switch::port::{LinkPort, LinkPortConfig, DEVICE_TYPE_ACCELERATOR, DEVICE_TYPE_SWITCH};
use std::collections::HashMap;

struct Host {
    mem: WindowMemory<4096>,
    reads: Vec<(OpId, u32, Vec<u8>)>,
}

impl MemoryTarget for Host {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        self.mem.read(addr, buf)
    }
    fn write(&mut self, addr: u64, data: &[u8], en: &ByteEnables) -> Result<(), TargetError> {
        self.mem.write(addr, data, en)
    }
}

impl ReadSink for Host {
    fn read_data(&mut self, d: ReadData<'_>) {
        self.reads.push((d.op, d.offset, d.data.to_vec()));
    }
}

type Accel = Endpoint<Host, 16, 8, 16, 8, 32, 16>;
type Port = LinkPort<16, 16, 32>;
type W = Wire<8, FLIT_LEN>;

const FLIT_TIME: Duration = Duration::from_ps(6_400);

fn accel(me: u16) -> Box<Accel> {
    let mut cfg = EndpointConfig::new(RequesterConfig::new(aid(me)), CompleterConfig::new(aid(me)));
    cfg.link = UaLinkConfig {
        control: ControlConfig {
            device_type: DEVICE_TYPE_ACCELERATOR,
            device_id: me,
            ..ControlConfig::default()
        },
        ..UaLinkConfig::default()
    };
    cfg.link.retry.ack_timeout = Duration::from_us(50);
    cfg.link.retry.ack_timeout_replays = 16;
    let host = Host {
        mem: WindowMemory::new(0),
        reads: Vec::new(),
    };
    Box::new(Endpoint::new(cfg, host))
}

struct Pod {
    sw: Box<Switch>,
    ports: Vec<Port>,
    accels: Vec<Box<Accel>>,
    up: Vec<W>,
    down: Vec<W>,
    idle: Vec<[bool; 2]>,
    free_at: Vec<[Instant; 2]>,
    now: Instant,
    buf: [u8; FLIT_LEN],
}

impl Pod {
    fn new(ber: f64) -> Pod {
        let mut sw = Box::new(Switch::new());
        sw.stage_with(small_pod).unwrap();
        sw.commit().unwrap();
        let wire = |seed| {
            let cfg = FaultConfig {
                bit_error_rate: Probability::from_f64(ber),
                ..FaultConfig::default()
            };
            Wire::new(FaultInjector::new(cfg, seed), Duration::from_ns(20))
        };
        let port_cfg = |p: u16| {
            let mut c = LinkPortConfig::new(DEVICE_TYPE_SWITCH, 900, p, 32);
            c.link.retry.ack_timeout = Duration::from_us(50);
            c.link.retry.ack_timeout_replays = 16;
            Port::new(c).unwrap()
        };
        let mut pod = Pod {
            sw,
            ports: vec![port_cfg(0), port_cfg(1)],
            accels: vec![accel(0), accel(1)],
            up: vec![wire(1), wire(2)],
            down: vec![wire(3), wire(4)],
            idle: vec![[false; 2]; 2],
            free_at: vec![[Instant::ZERO; 2]; 2],
            now: Instant::from_ps(1_000),
            buf: [0; FLIT_LEN],
        };
        for p in 0..2 {
            pod.ports[p].handle_link_up(pod.now);
            pod.accels[p].handle_link_up(pod.now);
        }
        pod.run_for(Duration::from_us(20));
        for p in 0..2u8 {
            let peer = pod.ports[usize::from(p)].peer().expect("identified");
            assert_eq!(
                pod.sw.learn_attachment(p.into(), peer.attachment()),
                Ok(false)
            );
        }
        pod
    }

    fn next_wakeup(&mut self) -> Option<Instant> {
        let mut t = vec![self.sw.poll_timeout()];
        for p in 0..2 {
            t.extend(self.ports[p].poll_timeout());
            t.extend(self.accels[p].poll_timeout());
            t.extend(self.up[p].next_arrival());
            t.extend(self.down[p].next_arrival());
            for e in 0..2 {
                if !self.idle[p][e] {
                    t.push(self.free_at[p][e].max(self.now));
                }
            }
        }
        t.into_iter().min()
    }

    fn step(&mut self) {
        let Some(t) = self.next_wakeup() else { return };
        self.now = self.now.max(t);
        let now = self.now;
        for p in 0..2 {
            let (port, acc) = (&mut self.ports[p], &mut self.accels[p]);
            while self.up[p]
                .recv_with(now, |f| port.handle_flit(now, f))
                .is_some()
            {
                self.idle[p][0] = false;
            }
            while self.down[p]
                .recv_with(now, |f| acc.handle_frame(now, f))
                .is_some()
            {
                self.idle[p][1] = false;
            }
            if port.poll_timeout().is_some_and(|d| d <= now) {
                port.handle_timeout(now);
                self.idle[p][0] = false;
            }
            if acc.poll_timeout().is_some_and(|d| d <= now) {
                acc.handle_timeout(now);
                self.idle[p][1] = false;
            }
        }
        if fabric::service(&mut self.sw, now, &mut self.ports, |_| {}).any() {
            self.idle.iter_mut().for_each(|i| i[0] = false);
        }
        for p in 0..2 {
            for e in 0..2 {
                if self.idle[p][e] || self.free_at[p][e] > now {
                    continue;
                }
                let n = if e == 0 {
                    self.ports[p].poll_transmit(now, &mut self.buf)
                } else {
                    self.accels[p].poll_transmit(now, &mut self.buf)
                };
                match n {
                    Some(n) => {
                        let done = now + FLIT_TIME;
                        let w = if e == 0 {
                            &mut self.down[p]
                        } else {
                            &mut self.up[p]
                        };
                        w.send(done, &self.buf[..n]);
                        self.free_at[p][e] = done;
                    }
                    None => self.idle[p][e] = true,
                }
            }
        }
    }

    fn run_for(&mut self, d: Duration) {
        let deadline = self.now + d;
        while self.next_wakeup().is_some_and(|t| t <= deadline) {
            self.step();
        }
        self.now = self.now.max(deadline);
    }

    fn submit(&mut self, from: usize, req: &Request<'_>) -> OpId {
        let id = self.accels[from].submit(self.now, req).unwrap();
        self.idle[from][1] = false;
        id
    }
}

fn transactions_through_the_switch(ber: f64) {
    let mut pod = Pod::new(ber);
    let data: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
    let back: Vec<u8> = (0..200u32).map(|i| (i * 13 + 1) as u8).collect();
    let mut ops = Vec::new();
    for (from, to, vc, payload) in [(0usize, 1u16, 0u8, &data), (1, 0, 2, &back)] {
        let w = pod.submit(
            from,
            &Request {
                dst: aid(to),
                vc: super::vc(vc),
                op: Operation::Write {
                    addr: 100,
                    data: payload,
                    enables: None,
                },
            },
        );
        let r = pod.submit(
            from,
            &Request {
                dst: aid(to),
                vc: super::vc(vc),
                op: Operation::Read {
                    addr: 100,
                    len: payload.len() as u32,
                },
            },
        );
        ops.push((from, w, r));
    }
    let atomic = Atomic {
        op: AtomicOp::FetchAdd,
        size: AtomicSize::Eight,
        operand: 5,
        compare: 0,
    };
    let fetch = |pod: &mut Pod| {
        pod.submit(
            0,
            &Request {
                dst: aid(1),
                vc: super::vc(1),
                op: Operation::Atomic {
                    addr: 8,
                    atomic,
                    returning: true,
                },
            },
        )
    };
    let (x, y) = (fetch(&mut pod), fetch(&mut pod));
    pod.run_for(Duration::from_us(400));

    let mut done: Vec<HashMap<OpId, _>> = vec![HashMap::new(), HashMap::new()];
    for (p, d) in done.iter_mut().enumerate() {
        while let Some(c) = pod.accels[p].poll_completion() {
            d.insert(c.id, c.result);
        }
    }
    for (from, w, r) in &ops {
        assert_eq!(done[*from][w], Ok(None), "write from {from}");
        assert_eq!(done[*from][r], Ok(None), "read from {from}");
    }
    assert_eq!(done[0][&x], Ok(Some(0)));
    assert_eq!(done[0][&y], Ok(Some(5)));
    assert_eq!(&pod.accels[1].host().mem.bytes()[100..400], &data[..]);
    assert_eq!(&pod.accels[0].host().mem.bytes()[100..300], &back[..]);
    for (from, _, r) in &ops {
        let want = if *from == 0 { &data } else { &back };
        let mut got = vec![0u8; want.len()];
        for (op, off, bytes) in &pod.accels[*from].host().reads {
            if op == r {
                got[*off as usize..*off as usize + bytes.len()].copy_from_slice(bytes);
            }
        }
        assert_eq!(&got, want, "read back by {from}");
    }
    // Credits: nobody overran anybody, and everything came back on the target it was
    // spent from (per VC toward the switch, the pool toward the endpoints).
    for p in 0..2 {
        let a = &pod.accels[p];
        assert_eq!(a.stats().overruns, 0);
        assert!(a.is_idle(), "accelerator {p} idle");
        for t in CreditTarget::ALL {
            for c in CreditClass::ALL {
                let s = a.credit_sender();
                assert_eq!(s.available(t, c), s.grant(t, c), "accel {p} {t:?} {c:?}");
                let s = pod.ports[p].credit_sender();
                assert_eq!(s.available(t, c), s.grant(t, c), "port {p} {t:?} {c:?}");
            }
        }
        assert_eq!(pod.ports[p].credit_receiver().stats().overruns, 0);
        assert_eq!(pod.ports[p].held_slots(), 0);
    }
    // The endpoints were granted per-VC credits by the switch, and used them.
    let s = pod.accels[0].credit_sender();
    assert_eq!(
        s.grant(CreditTarget::Vc(super::vc(0)), CreditClass::ReqCmd),
        4
    );
    assert_eq!(s.grant(CreditTarget::Shared, CreditClass::ReqCmd), 0);
    assert_eq!(pod.sw.counters().total().drops(), 0);
    if ber > 0.0 {
        let replays: u32 = pod
            .ports
            .iter()
            .map(|p| podlink_switch::port::PortLink::stats(p).replays)
            .sum();
        assert!(replays > 0);
    }
}

fn on_big_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn endpoints_transact_through_the_switch() {
    on_big_stack(|| transactions_through_the_switch(0.0));
}

#[test]
fn endpoints_transact_through_the_switch_over_lossy_wires() {
    on_big_stack(|| transactions_through_the_switch(1e-5));
}
