//! Flow control against a reference model: TL credits and Ethernet CBFC never go negative
//! nor above the grant, an honest sender never overruns, a dishonest one is caught, and
//! credits are conserved (`sender + in flight + receiver = capacity`).

use podlink_protocol::flow::cbfc::{CbfcConfig, CbfcReceiver, CbfcSender, CbfcUpdate};
use podlink_protocol::flow::{
    merge, CreditClass, CreditOutput, CreditReceiver, CreditSender, CreditTarget, Credits,
    ReceiverConfig,
};
use podlink_protocol::time::{Duration, Instant};
use podlink_protocol::wire::{TlFlowControl, Vc};
use proptest::prelude::*;
use std::collections::VecDeque;

#[derive(Debug, Clone)]
enum Op {
    /// The sender tries to send a request (or response) with `data` beats on `vc`.
    Send { vc: u8, data: u16, response: bool },
    /// The oldest request in flight reaches the receiver.
    Arrive,
    /// The receiver frees the `k`-th buffer it holds.
    Free(usize),
    /// Time passes.
    Tick(u64),
    /// The receiver produces returns; up to one per target goes into a TL flit, each field
    /// repeated (a NOP half copying it), and the flit arrives.
    ReturnFlit,
    /// A dishonest peer sends with credits it does not hold.
    Overrun { vc: u8 },
    /// The link is reset: what is in flight either way is lost, the receiver drops what
    /// its buffers hold (as `Endpoint::reset` has its completer drop its held responses),
    /// and both start over.
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..4, 0u16..5, any::<bool>()).prop_map(|(vc, data, response)| Op::Send { vc, data, response }),
        3 => Just(Op::Arrive),
        3 => (0usize..64).prop_map(Op::Free),
        1 => (1u64..500).prop_map(Op::Tick),
        2 => Just(Op::ReturnFlit),
        1 => (0u8..4).prop_map(|vc| Op::Overrun { vc }),
        1 => Just(Op::Restart),
    ]
}

fn capacity() -> impl Strategy<Value = [Credits; 5]> {
    let c = || {
        (0u16..80, 0u16..80, 0u16..300, 0u16..300).prop_map(|(a, b, c, d)| Credits([a, b, c, d]))
    };
    [c(), c(), c(), c(), c()]
}

struct Model {
    s: CreditSender,
    r: CreditReceiver,
    to_rx: VecDeque<(CreditTarget, Credits)>,
    to_tx: VecDeque<CreditOutput>,
    held: Vec<(CreditTarget, Credits)>,
    now: Instant,
    overruns: u64,
}

impl Model {
    fn check(&self) -> Result<(), TestCaseError> {
        for t in CreditTarget::ALL {
            for c in CreditClass::ALL {
                let cap = self.r.capacity(t, c);
                // The receiver's books balance.
                prop_assert_eq!(
                    self.r.peer_holds(t, c) + self.r.in_use(t, c) + self.r.pending(t, c),
                    cap
                );
                // What the sender has + requests in flight + returns in flight = what the
                // receiver thinks the peer holds.
                let inflight_req: u32 = self
                    .to_rx
                    .iter()
                    .filter(|(x, _)| *x == t)
                    .map(|(_, n)| u32::from(n.get(c)))
                    .sum();
                let inflight_ret: u32 = self
                    .to_tx
                    .iter()
                    .map(|o| match o {
                        CreditOutput::Return { target, fc } if *target == t => {
                            u32::from(Credits::from_field(fc).get(c))
                        }
                        _ => 0,
                    })
                    .sum();
                prop_assert_eq!(
                    self.s.available(t, c) + inflight_req + inflight_ret,
                    self.r.peer_holds(t, c)
                );
                // Never above the grant once it is known.
                if self.s.initial_release_complete() {
                    prop_assert!(self.s.available(t, c) <= self.s.grant(t, c));
                    prop_assert_eq!(self.s.grant(t, c), cap);
                }
            }
        }
        Ok(())
    }
}

proptest! {
    #[test]
    fn tl_credits_conserved(cap in capacity(), threshold in 1u16..20, ops in prop::collection::vec(op(), 1..300)) {
        let cfg = ReceiverConfig { capacity: cap, return_threshold: threshold, return_delay: Duration::from_ns(100) };
        let mut m = Model {
            s: CreditSender::new(),
            r: CreditReceiver::new(cfg),
            to_rx: VecDeque::new(),
            to_tx: VecDeque::new(),
            held: Vec::new(),
            now: Instant::ZERO,
            overruns: 0,
        };
        for op in ops {
            match op {
                Op::Send { vc, data, response } => {
                    let needs = if response { Credits::response(data) } else { Credits::request(data) };
                    let stalls = m.s.stats().credit_stalls;
                    match m.s.consume_vc_or_pool(Vc::new(vc).unwrap(), needs) {
                        Ok(t) => m.to_rx.push_back((t, needs)),
                        Err(_) => prop_assert_eq!(m.s.stats().credit_stalls, stalls + 1),
                    }
                }
                Op::Arrive => {
                    if let Some((t, n)) = m.to_rx.pop_front() {
                        prop_assert_eq!(m.r.handle_consumed(t, n), Ok(()));
                        m.held.push((t, n));
                    }
                }
                Op::Free(k) => {
                    if !m.held.is_empty() {
                        let (t, n) = m.held.remove(k % m.held.len());
                        prop_assert_eq!(m.r.release(m.now, t, n), Ok(()));
                    }
                }
                Op::Tick(ns) => {
                    m.now += Duration::from_ns(ns);
                    m.r.handle_timeout(m.now);
                }
                Op::ReturnFlit => {
                    while let Some(o) = m.r.poll_return() {
                        m.to_tx.push_back(o);
                    }
                    let mut in_flit: Vec<CreditTarget> = Vec::new();
                    while let Some(o) = m.to_tx.front().copied() {
                        match o {
                            CreditOutput::Return { target, fc } => {
                                if in_flit.contains(&target) {
                                    break;
                                }
                                in_flit.push(target);
                                m.to_tx.pop_front();
                                let merged: TlFlowControl = merge([fc, fc]);
                                m.s.handle_return(target, &merged);
                            }
                            CreditOutput::InitialReleaseComplete => {
                                m.to_tx.pop_front();
                                m.s.handle_initial_release_complete();
                            }
                        }
                    }
                }
                Op::Overrun { vc } => {
                    let t = CreditTarget::Vc(Vc::new(vc).unwrap());
                    let held = m.r.peer_holds(t, CreditClass::ReqData);
                    let bad = Credits([0, 0, u16::try_from(held + 1).unwrap_or(u16::MAX), 0]);
                    prop_assert!(m.r.handle_consumed(t, bad).is_err());
                    m.overruns += 1;
                }
                Op::Restart => {
                    m.to_rx.clear();
                    m.to_tx.clear();
                    m.held.clear();
                    m.s.reset();
                    m.r.reset();
                }
            }
            m.check()?;
        }
        prop_assert_eq!(m.r.stats().overruns, m.overruns);
        prop_assert_eq!(m.s.stats().return_above_grant, 0);
        // Drain: everything comes home.
        for (t, n) in core::mem::take(&mut m.to_rx) {
            m.r.handle_consumed(t, n).unwrap();
            m.held.push((t, n));
        }
        for (t, n) in core::mem::take(&mut m.held) {
            m.r.release(m.now, t, n).unwrap();
        }
        m.now += Duration::from_us(1);
        m.r.handle_timeout(m.now);
        while let Some(o) = m.r.poll_return() {
            m.to_tx.push_back(o);
        }
        for o in core::mem::take(&mut m.to_tx) {
            match o {
                CreditOutput::Return { target, fc } => m.s.handle_return(target, &fc),
                CreditOutput::InitialReleaseComplete => m.s.handle_initial_release_complete(),
            }
        }
        m.check()?;
        for t in CreditTarget::ALL {
            for c in CreditClass::ALL {
                prop_assert_eq!(m.s.available(t, c), m.r.capacity(t, c));
            }
        }
    }
}

#[derive(Debug, Clone)]
enum CbOp {
    Send { vc: u8, len: usize },
    Arrive,
    Free(usize),
    Update { lose: bool, reorder: bool },
    Tick,
}

fn cb_op() -> impl Strategy<Value = CbOp> {
    prop_oneof![
        4 => (0u8..4, 1usize..4200).prop_map(|(vc, len)| CbOp::Send { vc, len }),
        3 => Just(CbOp::Arrive),
        3 => (0usize..64).prop_map(CbOp::Free),
        3 => (prop::bool::weighted(0.3), prop::bool::weighted(0.3)).prop_map(|(lose, reorder)| CbOp::Update { lose, reorder }),
        1 => Just(CbOp::Tick),
    ]
}

proptest! {
    #[test]
    fn cbfc_heals_lost_and_reordered_updates(
        credit_bytes in 16u32..256,
        limit in 1u32..600,
        overhead in 0u32..64,
        ops in prop::collection::vec(cb_op(), 1..400),
    ) {
        let cfg = CbfcConfig { credit_bytes, limit_credits: limit, overhead_bytes: overhead, update_interval: Duration::from_us(1) };
        let mut now = Instant::ZERO;
        let mut tx = CbfcSender::<4>::new(cfg);
        let mut rx = CbfcReceiver::<4>::new(cfg, now);
        let mut frames: VecDeque<(u8, usize)> = VecDeque::new();
        let mut held: Vec<(u8, u32)> = Vec::new();
        let mut updates: VecDeque<CbfcUpdate> = VecDeque::new();
        for op in ops {
            match op {
                CbOp::Send { vc, len } => {
                    if tx.try_send(vc, len).is_ok() {
                        frames.push_back((vc, len));
                    }
                }
                CbOp::Arrive => {
                    if let Some((vc, len)) = frames.pop_front() {
                        let n = rx.handle_frame(vc, len);
                        prop_assert!(n.is_ok(), "honest sender overran: {:?}", n);
                        held.push((vc, n.unwrap()));
                    }
                }
                CbOp::Free(k) => {
                    if !held.is_empty() {
                        let (vc, n) = held.remove(k % held.len());
                        prop_assert!(rx.release(vc, n));
                    }
                }
                CbOp::Update { lose, reorder } => {
                    while let Some(u) = rx.poll_update() {
                        if !lose {
                            updates.push_back(u);
                        }
                    }
                    if reorder && updates.len() > 1 {
                        let u = updates.pop_front().unwrap();
                        updates.push_back(u);
                    }
                    if let Some(u) = updates.pop_front() {
                        tx.handle_update(&u);
                    }
                }
                CbOp::Tick => {
                    now += Duration::from_us(1);
                    rx.handle_timeout(now);
                }
            }
            for vc in 0..4 {
                prop_assert!(tx.available(vc) <= limit);
                let inflight: u32 = frames.iter().filter(|f| f.0 == vc).map(|f| cfg.credits_for(f.1)).sum();
                prop_assert!(tx.available(vc) + inflight + rx.occupied(vc) <= limit);
            }
        }
        prop_assert_eq!(rx.stats().overruns, 0);
        prop_assert_eq!(tx.stats().invalid_updates, 0);
        // Drain, then one refresh heals every lost update.
        while let Some((vc, len)) = frames.pop_front() {
            let n = rx.handle_frame(vc, len).unwrap();
            held.push((vc, n));
        }
        for (vc, n) in held.drain(..) {
            prop_assert!(rx.release(vc, n));
        }
        now += Duration::from_us(1);
        rx.handle_timeout(now);
        while let Some(u) = rx.poll_update() {
            tx.handle_update(&u);
        }
        for vc in 0..4 {
            prop_assert_eq!(tx.available(vc), limit);
        }
    }
}
