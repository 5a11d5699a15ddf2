//! Workloads into the pod (`spec-notes/simulator.md#workloads`): generators per workload and
//! partition, trace replay, and operations issued and split into ≤ 256 B pieces.

use super::accel::{Op, MAX_PIECES};
use super::trace::Mark;
use super::{Ev, Sim};
use crate::report::OpClass;
use crate::workload::{Generator, OpSpec, SLOTS};

/// Upper bound on distinct 64 B lines the address plan may touch, pod-wide (memory bound).
const LINE_BUDGET: u64 = 4 << 20;

/// 256 B slots each source uses in its window at a destination, so that the lines the
/// address plan can touch stay within [`LINE_BUDGET`].
pub fn slots_for(accels: u32) -> u64 {
    let pairs = u64::from(accels) * u64::from(accels.saturating_sub(1)).max(1);
    (LINE_BUDGET / 4 / pairs).clamp(1, SLOTS)
}

/// The slots of every window each VC's workloads use, as (VC, first slot, slots): all `slots`
/// for one VC; with several, each VC in use gets its own, at least an equal share and at
/// least its largest operation. Requests on different VCs are not ordered against each other
/// (the protocol orders them per VC), so a read on one VC could legally pass a write on
/// another to the same line and the integrity check could not know what it must return.
fn vc_lanes(wls: &[crate::pod::config::Workload], slots: u64) -> Vec<(u8, u64, u64)> {
    let vc_of = |w: &crate::pod::config::Workload| {
        if w.pattern == crate::pod::config::Pattern::Trace {
            0
        } else {
            w.vc
        }
    };
    let mut vcs: Vec<u8> = wls.iter().map(vc_of).collect();
    vcs.sort_unstable();
    vcs.dedup();
    if vcs.len() <= 1 {
        return vcs.into_iter().map(|vc| (vc, 0, slots)).collect();
    }
    let share = (slots / vcs.len() as u64).max(1);
    let mut first = 0;
    let mut lanes = Vec::new();
    for vc in vcs {
        let span = wls
            .iter()
            .filter(|w| vc_of(w) == vc)
            .map(|w| {
                if w.pattern == crate::pod::config::Pattern::Trace {
                    MAX_PIECES.into()
                } else {
                    u64::from(w.message_bytes).div_ceil(256)
                }
            })
            .max()
            .unwrap_or(1);
        let width = share.max(span).min(SLOTS - first.min(SLOTS - 1));
        lanes.push((vc, first, width));
        first = (first + width).min(SLOTS - 1);
    }
    lanes
}

impl Sim {
    /// Workload generators and sources from the pod file and the options; operation traces
    /// are read from their CSV files (paths relative to the working directory).
    ///
    /// # Errors
    /// A trace file that cannot be read or parsed (naming the file and line).
    pub(crate) fn build_workloads(&mut self) -> Result<(), String> {
        let mut wls = self.pod.workloads.clone();
        if wls.is_empty() {
            wls.push(crate::pod::config::Workload {
                pattern: crate::pod::config::Pattern::Uniform,
                partition: None,
                message_bytes: 64,
                offered_load: 0.3,
                read: 0.5,
                write: 0.5,
                atomic: 0.0,
                target: None,
                trace: None,
                vc: 0,
                sources: None,
            });
        }
        let ids = self.partition_ids();
        self.part_lat = vec![Default::default(); ids.len()];
        self.part_index = self
            .fabric
            .partition_of
            .iter()
            .map(|p| ids.iter().position(|q| q == p).unwrap_or(0) as u32)
            .collect();
        if !self.opts.traffic {
            return Ok(());
        }
        let line_rate = 628.0 / self.t.ser as f64 * 1e6; // TL bytes per µs of one port
        let slots = slots_for(self.fabric.accels);
        for w in &mut wls {
            if let Some(p) = self.opts.pattern {
                w.pattern = p;
            }
            if let Some(l) = self.opts.load {
                w.offered_load = l;
            }
        }
        let lanes = vc_lanes(&wls, slots);
        let lane_of = |vc: u8| {
            lanes
                .iter()
                .find(|l| l.0 == vc)
                .map_or((0, slots), |l| (l.1, l.2))
        };
        for (g, w) in wls.iter_mut().enumerate() {
            if w.pattern == crate::pod::config::Pattern::Trace {
                let path = w.trace.clone().unwrap_or_default();
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("workloads.{g}.trace: {path}: {e}"))?;
                let mut ops = crate::workload::parse_trace(&text, self.fabric.accels)
                    .map_err(|e| format!("{path}: {e}"))?;
                if lanes.len() > 1 {
                    // Trace operations travel on VC 0: move them into VC 0's slots.
                    let (first, width) = lane_of(0);
                    for o in ops.iter_mut().filter(|o| o.op.class != OpClass::Atomic) {
                        let base = crate::workload::window_base(o.op.src);
                        let span = u64::from(o.op.bytes).div_ceil(256);
                        let slot = (o.op.addr - base) / 256 % (width.saturating_sub(span) + 1);
                        o.op.addr = base + (first + slot) * 256;
                    }
                }
                self.trace_ops.extend(ops);
                continue;
            }
            let part = w
                .partition
                .or_else(|| self.pod.partitions.first().map(|p| p.id));
            let members: Vec<u32> = (0..self.fabric.accels)
                .filter(|&a| part.is_none_or(|p| self.fabric.partition_of[a as usize] == p))
                .collect();
            let (first, width) = lane_of(w.vc);
            let gen = Generator::new(w, &members, line_rate, self.opts.seed, g as u64)
                .with_first_slot(first)
                .with_slots(width);
            let mean = f64::from(w.message_bytes) / (line_rate * w.offered_load) * 1e6;
            let mut rng = crate::rng::Rng::new(self.opts.seed, 0x5000_0000 + g as u64);
            let issuers = w
                .sources
                .as_deref()
                .and_then(|r| crate::pod::config::parse_ranges(r, self.fabric.accels).ok());
            for (m, &a) in members.iter().enumerate() {
                // A hotspot's target issues nothing (it would send to itself).
                if w.pattern == crate::pod::config::Pattern::Hotspot && w.target == Some(a) {
                    continue;
                }
                if issuers.as_ref().is_some_and(|v| !v.contains(&a)) {
                    continue;
                }
                self.sources.push((g as u32, m as u32));
                self.ahead.push(None);
                self.first_issue.push((rng.f64() * mean) as u64);
            }
            self.gens.push(gen);
        }
        self.trace_ops.sort_by_key(|o| o.at_ps);
        Ok(())
    }

    /// Start the workloads at `at`: each source issues its first operation at a random offset
    /// within its mean gap, and sources stop at `at + duration`.
    pub fn start_workload(&mut self, at: u64) {
        self.inject_from = at;
        self.inject_until = at.saturating_add(self.opts.duration_ps);
        for i in 0..self.sources.len() {
            let t = at + self.first_issue[i];
            if t < self.inject_until {
                self.schedule(t, Ev::Issue(i as u32));
            }
        }
        if let Some(first) = self.trace_ops.first() {
            let t = at + first.at_ps;
            if t < self.inject_until {
                self.schedule(t, Ev::Replay(0));
            }
        }
        self.keep_sweeping(at);
        self.schedule_faults(at);
    }

    /// Issue every trace operation due now, from index `i`; schedule the next.
    pub(crate) fn on_replay(&mut self, i: u32, now: u64) {
        let mut k = i as usize;
        while let Some(o) = self.trace_ops.get(k).copied() {
            let t = self.inject_from + o.at_ps;
            if t > now {
                if t < self.inject_until {
                    self.schedule(t, Ev::Replay(k as u32));
                }
                return;
            }
            self.issue(o.op, now);
            k += 1;
        }
    }

    /// Partition IDs in report order.
    pub(crate) fn partition_ids(&self) -> Vec<u16> {
        if self.pod.partitions.is_empty() {
            vec![0]
        } else {
            self.pod.partitions.iter().map(|p| p.id).collect()
        }
    }

    /// Source `i` issues its operation drawn ahead (or drawn now, the first time) and, if it
    /// issues again, draws the next one: each source's draws come from its own generator
    /// stream in the same order either way, and the reference copy's entry for the next
    /// operation is asked for while other events run.
    pub(crate) fn on_issue(&mut self, i: u32, now: u64) {
        let Some(&(g, m)) = self.sources.get(i as usize) else {
            return;
        };
        let draw = |gens: &mut [Generator]| gens.get_mut(g as usize)?.next(m as usize);
        let ahead = self.ahead.get_mut(i as usize).and_then(Option::take);
        let Some((gap, spec)) = ahead.or_else(|| draw(&mut self.gens)) else {
            return;
        };
        self.issue(spec, now);
        let next = now.saturating_add(gap.max(1));
        if next < self.inject_until {
            self.schedule(next, Ev::Issue(i));
            let drawn = draw(&mut self.gens);
            if let Some((_, s)) = &drawn {
                self.reference.prefetch(s.dst, s.addr);
            }
            if let Some(slot) = self.ahead.get_mut(i as usize) {
                *slot = drawn;
            }
        }
    }

    /// Issue an operation now; returns its index.
    pub(crate) fn issue(&mut self, spec: OpSpec, now: u64) -> u32 {
        let bytes = if spec.class == OpClass::Atomic {
            8
        } else {
            spec.bytes.min(MAX_PIECES * 256)
        };
        let pieces = if spec.class == OpClass::Atomic {
            1
        } else {
            bytes.div_ceil(256)
        };
        let mut op = Op {
            src: spec.src,
            dst: spec.dst,
            class: spec.class,
            bytes,
            addr: spec.addr,
            issued: now,
            left: ((1u32 << pieces) - 1) as u16,
            measured: now >= self.inject_from + self.opts.warmup_ps && now < self.inject_until,
            failed: false,
            wid: 0,
            vc: spec.vc,
            ports: 0,
            expect: [0; 64],
        };
        match spec.class {
            OpClass::Write => {
                op.wid = self
                    .reference
                    .write_prev(spec.dst, spec.addr, bytes, &mut op.expect)
            }
            OpClass::Read => self
                .reference
                .expect(spec.dst, spec.addr, bytes, &mut op.expect),
            OpClass::Atomic => {}
        }
        let a = &mut self.accels;
        let idx = match a.free_ops.pop() {
            Some(i) => {
                a.ops[i as usize] = op;
                i
            }
            None => {
                a.ops.push(op);
                (a.ops.len() - 1) as u32
            }
        };
        a.issued += 1;
        if let Some(t) = self.trace.as_mut() {
            t.mark(now, Mark::Issue);
        }
        self.schedule(now + self.t.endpoint, Ev::Submit(idx));
        idx
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::config::{Pattern, Workload};

    fn wl(vc: u8, bytes: u32, pattern: Pattern) -> Workload {
        Workload {
            pattern,
            partition: None,
            message_bytes: bytes,
            offered_load: 0.1,
            read: 0.5,
            write: 0.5,
            atomic: 0.0,
            target: None,
            trace: None,
            vc,
            sources: None,
        }
    }

    /// A source issues its generator's draws in order, although each is drawn one issue
    /// ahead (`Sim::on_issue`): the same operations as drawing each when it issues.
    #[test]
    fn a_source_issues_its_generators_draws_in_order() {
        let mut pod = crate::pod::presets::load("single-switch-16").unwrap();
        pod.workloads = vec![Workload {
            atomic: 0.2,
            read: 0.4,
            write: 0.4,
            ..wl(1, 512, Pattern::Uniform)
        }];
        let opts = crate::sim::Options {
            duration_ps: 1_000_000,
            ..crate::sim::Options::default()
        };
        let mut sim = Sim::new(&pod, &opts).unwrap();
        let i = 3;
        let (g, m) = sim.sources[i];
        let mut twin = sim.gens[g as usize].clone();
        sim.start_workload(0);
        let mut now = 0;
        for k in 0..40 {
            let (gap, want) = twin.next(m as usize).unwrap();
            sim.on_issue(i as u32, now);
            let o = sim.accels.ops.last().unwrap();
            let got = (o.src, o.dst, o.class, o.addr, o.vc);
            assert_eq!(
                got,
                (want.src, want.dst, want.class, want.addr, want.vc),
                "op {k}"
            );
            assert_eq!(sim.accels.ops.len(), k + 1);
            assert_eq!(sim.ahead[i].is_some(), now + gap.max(1) < sim.inject_until);
            now += gap.max(1);
            if now >= sim.inject_until {
                break;
            }
        }
        assert!(
            now >= sim.inject_until,
            "the source issued to the end of injection"
        );
    }

    /// One VC: the whole window, as before. Several: disjoint slots per VC, each at least an
    /// equal share and at least its largest operation, all inside the window.
    #[test]
    fn vc_lanes_are_disjoint() {
        let one = [wl(2, 64, Pattern::Uniform), wl(2, 4096, Pattern::AllToAll)];
        assert_eq!(vc_lanes(&one, 256), vec![(2, 0, 256)]);
        assert_eq!(vc_lanes(&one, 1), vec![(2, 0, 1)]);
        let many = [
            wl(3, 256, Pattern::Uniform),
            wl(1, 4096, Pattern::RingAllreduce),
            wl(0, 64, Pattern::Trace),
            wl(1, 64, Pattern::Permutation),
        ];
        for slots in [1, 7, 64, 256] {
            let lanes = vc_lanes(&many, slots);
            assert_eq!(lanes.iter().map(|l| l.0).collect::<Vec<_>>(), [0, 1, 3]);
            let mut end = 0;
            for &(vc, first, width) in &lanes {
                assert!(first >= end, "{slots}: VC {vc} overlaps");
                assert!(width >= (slots / 3).max(1), "{slots}: VC {vc} share");
                end = first + width;
            }
            assert!(lanes[0].2 >= 16, "a trace may carry 4 KB operations");
            assert!(lanes[1].2 >= 16, "VC 1 carries 4 KB operations");
            assert!(end <= SLOTS);
        }
    }
}
