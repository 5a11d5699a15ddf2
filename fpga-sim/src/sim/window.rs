//! Windowed execution (`spec-notes/simulator.md#engine`): the run is cut into windows no
//! longer than the shortest delay with which one component can reach another (a DL flit's
//! link latency), and within a window the events of one component, a switch or an
//! accelerator with its ports, run together, in their own (time, sequence) order. Nothing a
//! component does in a window can reach another component before the window ends, so every
//! component sees the same inputs at the same times as if the whole pod ran event by event;
//! what changes is where a component's state is when its events run: in cache, rather than
//! evicted by the thousands of other ports' events in between.
//!
//! Events that concern the whole pod (the requester timeout sweep, trace replay, faults and
//! their notifications, health windows) are barriers: a window ends where one is due, and it
//! runs alone. Runs with a fault plan run event by event.

use super::{Ev, Owner, Sim};
use crate::engine::bucket::{BucketQueue, Item};
use podlink_protocol::time::Instant;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One due event: time (ps), sequence number, event; ordered so that a max-heap pops the
/// earliest (time, sequence) first.
#[derive(Clone, Copy)]
pub(crate) struct Due {
    at: u64,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Due {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Due {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

/// The state of windowed execution.
#[derive(Default)]
pub(crate) struct Windows {
    /// Length of a window, ps (0: run event by event).
    pub len: u64,
    /// A window is being run.
    pub on: bool,
    /// The window ends before this time, ps.
    pub end: u64,
    /// Key of the event being run.
    pub key: (u64, u64),
    /// Component whose events are being run.
    pub cur: u32,
    /// Each component's events due in the window, but the running component's: earliest
    /// first, as the calendar hands them out (unless the component is in `unsorted`).
    pub due: Vec<Vec<Due>>,
    /// Components whose `due` list got an event out of order (from another component).
    pub unsorted: Vec<u32>,
    /// Events the running component scheduled for itself in the window.
    pub running: BucketQueue<Ev>,
    /// Components with events due in the window that have not run yet, smallest first (a
    /// window costs what its events do, however many components the pod has).
    pub waiting: BinaryHeap<Reverse<u32>>,
    /// Windows run.
    pub windows: u64,
    /// Events scheduled in a window for a time in it (never through the calendar).
    pub local: u64,
    /// Events scheduled in a window for a time in it, for a component that had already run
    /// its part of the window, or for the whole pod: the window was longer than the
    /// model's lookahead. Always 0 (checked by the conservation balance).
    pub late: u64,
}

impl Windows {
    /// Component `c`'s event `due` waits for the component to run.
    fn wait(&mut self, c: u32, due: Due) {
        let list = &mut self.due[c as usize];
        match list.last() {
            None => self.waiting.push(Reverse(c)),
            // `due` sorts before the last one (a max-heap order: greater is earlier).
            Some(last) if due > *last => self.unsorted.push(c),
            Some(_) => {}
        }
        list.push(due);
    }
}

/// How many of a component's listed events ahead their state is asked for (and how many of
/// the next component's first events).
const PREFETCH_AHEAD: usize = 8;

/// Ask for the cache line at `p` (a hint: nothing is read).
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it reads nothing into the program and cannot fault,
    // whatever the address; SSE is part of every x86_64 target.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Ask for every cache line of a DL flit, the last (its CRC, read first) first.
#[inline(always)]
pub(crate) fn prefetch_flit(bytes: &[u8; podlink_protocol::wire::dl_flit::FLIT_LEN]) {
    let p = bytes.as_ptr();
    prefetch(p.wrapping_add(bytes.len() - 1));
    for line in (0..bytes.len() - 1).step_by(64) {
        prefetch(p.wrapping_add(line));
    }
}

impl Sim {
    /// For an event some events ahead: the state of the end it runs at (session 36: about
    /// 1.04x on `ualink-1024`, `spec-notes/performance.md`), and for an arrival
    /// the wire's record of flits in flight (addresses known without reading anything but
    /// the end's peer).
    #[inline(always)]
    fn prefetch_far(&self, ev: Ev) {
        let end = match ev {
            Ev::Arrive(e) => {
                if let Some(w) = self.wires.get(e as usize) {
                    prefetch(w);
                }
                self.peer.get(e as usize).copied()
            }
            Ev::Tx(e) | Ev::Timer(e) | Ev::Pipe(e) => Some(e),
            _ => None,
        };
        if let Some(e) = end {
            self.prefetch_end(e as usize);
        }
    }

    /// The first line of each part of end `e`'s state an event touches first: its hot
    /// flags, transmit and receive state (TL packer, link retry, credit receiver, TL
    /// unpacker), credit state, and an endpoint's link, requester and completer (one load:
    /// the endpoint's box).
    #[inline(always)]
    fn prefetch_end(&self, e: usize) {
        if let Some(h) = self.hot.get(e) {
            prefetch(h);
        }
        if let Some(tx) = self.txs.get(e) {
            prefetch(tx);
            prefetch(&tx.tl);
            prefetch(&tx.link);
            prefetch(tx.link.retry());
            prefetch(&tx.credit_rx);
        }
        if let Some(rx) = self.rxs.get(e) {
            prefetch(rx);
            prefetch(&rx.tlu);
        }
        if let Some(p) = self.ports.get(e) {
            prefetch(p);
        }
        if let Some(ep) = self.ep(e as u32) {
            prefetch(ep);
            prefetch(ep.link());
            prefetch(ep.link().retry());
            prefetch(ep.requester());
            prefetch(ep.completer());
        }
    }

    /// For an event a few places ahead, what its state led to: for an arrival, the DL flit
    /// at the front of the wire and the wire's next flit record; for a switch port's
    /// pipeline event, the records at the front of its queues.
    #[inline(always)]
    fn prefetch_near(&self, ev: Ev) {
        match ev {
            Ev::Arrive(e) => {
                if let Some(w) = self.wires.get(e as usize) {
                    if let Some(f) = w.flight.front() {
                        self.flits.prefetch(f.slot);
                    }
                    w.flight.prefetch_next();
                }
            }
            // A switch port's pipeline: the records at the front of its two queues.
            Ev::Pipe(r) => {
                if let Some(rx) = self.rxs.get(r as usize) {
                    if let Some(f) = rx.rsp.front() {
                        prefetch(f);
                    }
                    if let Some(f) = rx.fifo.front() {
                        prefetch(f);
                    }
                }
            }
            _ => {}
        }
    }

    /// The component that runs event `ev`: switch `s` is component `s`, accelerator `a`
    /// (with its ports) is component `switches + a`; `None` for events of the whole pod.
    fn component(&self, ev: Ev) -> Option<u32> {
        let sw = self.switches.len() as u32;
        let of_end = |e: u32| match self.owner.get(e as usize) {
            Some(Owner::Switch { s, .. }) => Some(*s),
            Some(Owner::Accel { a, .. }) => Some(sw + a),
            None => None,
        };
        match ev {
            Ev::Tx(e) | Ev::Timer(e) | Ev::Pipe(e) | Ev::Cpl(e) | Ev::Holdoff(e) => of_end(e),
            // An arrival runs at the receiving end.
            Ev::Arrive(e) => of_end(*self.peer.get(e as usize)?),
            Ev::Issue(i) => {
                let &(g, m) = self.sources.get(i as usize)?;
                let a = *self.gens.get(g as usize)?.members().get(m as usize)?;
                Some(sw + a)
            }
            Ev::Submit(op) => Some(sw + self.accels.ops.get(op as usize)?.src),
            Ev::Held(a) => Some(sw + a),
            Ev::Sweep
            | Ev::Replay(_)
            | Ev::Fault(_)
            | Ev::Notify(_)
            | Ev::Health(_)
            | Ev::Rogue(_)
            | Ev::LinkFault(_) => None,
        }
    }

    /// The (time, sequence number) of the event being run.
    pub(crate) fn current_key(&self) -> (u64, u64) {
        if self.win.on {
            self.win.key
        } else {
            self.sched.current_key()
        }
    }

    /// An event scheduled while a window runs: kept in the window if it falls in it (true),
    /// else left to the calendar (false).
    pub(crate) fn window_take(&mut self, at: u64, seq: u64, ev: Ev) -> bool {
        if !self.win.on || at >= self.win.end {
            return false;
        }
        let Some(c) = self.component(ev) else {
            self.win.late += 1;
            return false;
        };
        let w = &mut self.win;
        if c < w.cur {
            w.late += 1;
            return false;
        }
        let due = Due { at, seq, ev };
        if c == w.cur {
            w.running.push(Item { at, seq, ev });
        } else {
            w.wait(c, due);
        }
        w.local += 1;
        true
    }

    /// Run every event due at or before `until`, window by window.
    pub(crate) fn run_windows(&mut self, until: u64) {
        let components = self.switches.len() + self.fabric.accels as usize;
        if self.win.due.len() < components {
            self.win.due.resize_with(components, Vec::new);
        }
        while let Some(t0) = self.sched.peek_time().map(Instant::as_ps) {
            if t0 > until {
                break;
            }
            let mut end = t0.saturating_add(self.win.len).min(until.saturating_add(1));
            let mut barrier = None;
            while let Some(ev) = self.sched.pop_until(Instant::from_ps(end - 1)) {
                let (at, seq) = self.sched.current_key();
                match self.component(ev) {
                    Some(c) => self.win.wait(c, Due { at, seq, ev }),
                    None => {
                        // Everything before it runs first; it then runs alone.
                        barrier = Some((at, ev));
                        end = at;
                        break;
                    }
                }
            }
            self.win.on = true;
            self.win.end = end;
            self.win.windows += 1;
            while let Some(Reverse(c)) = self.win.waiting.pop() {
                // The next component's first events, while this one runs.
                if let Some(&Reverse(n)) = self.win.waiting.peek() {
                    if let Some(list) = self.win.due.get(n as usize) {
                        for d in list.iter().take(PREFETCH_AHEAD) {
                            self.prefetch_far(d.ev);
                        }
                    }
                }
                self.win.cur = c;
                self.win.running.begin(t0, end);
                let mut list = std::mem::take(&mut self.win.due[c as usize]);
                if self.win.unsorted.contains(&c) {
                    self.win.unsorted.retain(|&u| u != c);
                    list.sort_unstable_by(|x, y| y.cmp(x));
                }
                // Merge the list (earliest first) with what the component schedules for
                // itself as it runs.
                let mut next = 0;
                loop {
                    let head = list.get(next).map(|d| (d.at, d.seq));
                    let due = match self.win.running.pop_before(head) {
                        Some(i) => Due {
                            at: i.at,
                            seq: i.seq,
                            ev: i.ev,
                        },
                        None => {
                            let Some(&d) = list.get(next) else {
                                break;
                            };
                            if let Some(f) = list.get(next + PREFETCH_AHEAD) {
                                self.prefetch_far(f.ev);
                            }
                            if let Some(f) = list.get(next + PREFETCH_AHEAD / 2) {
                                self.prefetch_near(f.ev);
                            }
                            next += 1;
                            d
                        }
                    };
                    self.win.key = (due.at, due.seq);
                    self.dispatch(due.ev, due.at);
                }
                list.clear();
                self.win.due[c as usize] = list;
            }
            self.win.on = false;
            if let Some((at, ev)) = barrier {
                self.dispatch(ev, at);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::results::{run_built, run_then};
    use super::super::{Options, Sim};
    use crate::pod::config::{Pattern, PodFile};
    use crate::pod::presets;

    fn opts(sequential: bool) -> Options {
        Options {
            duration_ps: 2_000_000,
            warmup_ps: 200_000,
            sequential,
            ..Options::default()
        }
    }

    /// Runs `pod` with `o`; returns the summary and the windows run.
    fn run(pod: &PodFile, o: &Options) -> (super::super::summary::Summary, u64) {
        let mut windows = 0;
        let r = run_then(pod, o, |_, _| {}, |sim| windows = sim.windows()).expect("runs");
        (r.summary, windows)
    }

    /// Windows run on fault-free pods, and the run is the one event-by-event execution
    /// gives up to the order of events due at the same picosecond: the same operations,
    /// every one completed and checked, the same latencies to within a few per cent.
    #[test]
    fn windows_run_and_agree_with_event_by_event_execution() {
        let pods = [
            ("single-switch-16", None),
            ("ualink-64x4", Some(Pattern::Uniform)),
            ("single-switch-16", Some(Pattern::Hotspot)),
        ];
        for (name, pattern) in pods {
            let pod = presets::load(name).unwrap();
            let (mut a, mut b) = (opts(false), opts(true));
            a.pattern = pattern;
            b.pattern = pattern;
            let (w, windows) = run(&pod, &a);
            let (s, none) = run(&pod, &b);
            assert!(windows > 20, "{}: {windows} windows", pod.name);
            assert_eq!(none, 0, "{}", pod.name);
            for x in [&w, &s] {
                assert!(
                    x.drained && x.integrity.ok() && x.conservation.ok,
                    "{}: {x:?}",
                    pod.name
                );
                assert_eq!(x.conservation.events_out_of_window, 0);
            }
            assert_eq!(w.conservation.ops_issued, s.conservation.ops_issued);
            assert!(w.conservation.ops_issued > 1000, "{}", pod.name);
            for (a, b) in w.latency.iter().zip(&s.latency) {
                assert_eq!(a.latency.count, b.latency.count, "{} {}", pod.name, a.class);
                let (ma, mb) = (a.latency.mean_ns, b.latency.mean_ns);
                assert!(
                    (ma - mb).abs() <= 0.03 * mb.max(1.0),
                    "{} {}: mean {ma} ns windowed, {mb} ns event by event",
                    pod.name,
                    a.class
                );
            }
        }
    }

    /// The shortest links a pod file allows (2,000 Gb/s lanes, no PHY, FEC or cable delay)
    /// make windows one flit time (680 ps) long: the run is still sound, every event in its
    /// window.
    #[test]
    fn windows_of_one_flit_time() {
        let mut pod = presets::load("ualink-64x4").unwrap();
        let l = &mut pod.link;
        (l.fec_decode_ns, l.phy_tx_ns, l.phy_rx_ns, l.cable_m) = (0.0, 0.0, 0.0, 0.0);
        l.lane_gbps = 2000.0;
        let mut o = opts(false);
        o.duration_ps = 500_000;
        o.warmup_ps = 50_000;
        let sim = Sim::new(&pod, &o).unwrap();
        assert!(sim.win.len < 1000, "{} ps", sim.win.len);
        let (s, windows) = run(&pod, &o);
        assert!(s.drained && s.integrity.ok() && s.conservation.ok, "{s:?}");
        assert!(windows > 500, "{windows} windows");
    }

    /// A run with a fault plan goes event by event (its events reach across components).
    #[test]
    fn a_run_with_faults_runs_event_by_event() {
        let pod = presets::load("single-switch-16").unwrap();
        let mut o = opts(false);
        o.faults = crate::sim::fault::FaultPlan {
            record_ops: true,
            ..Default::default()
        };
        let (_, windows) = run(&pod, &o);
        assert_eq!(windows, 0);
    }

    /// The check is not vacuous: windows longer than the link latency let a component
    /// schedule into a window another component has already run, and the run fails its
    /// conservation balance.
    #[test]
    fn a_window_longer_than_the_lookahead_fails_the_run() {
        let pod = presets::load("single-switch-16").unwrap();
        let o = opts(false);
        let mut sim = Sim::new(&pod, &o).unwrap();
        sim.win.len = sim.t.link * 4;
        let r = run_built(sim, &o, |_, _| {}, |_| {}).unwrap();
        assert!(r.summary.conservation.events_out_of_window > 0);
        assert!(!r.summary.conservation.ok);
    }
}
