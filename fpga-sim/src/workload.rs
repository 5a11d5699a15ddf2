//! Workload generators (`spec-notes/simulator.md#workloads`): uniform random, permutation,
//! hotspot/incast, all-to-all (expert parallel), ring all-reduce (tensor parallel), and replay of
//! an operation trace from CSV. Each source has its own seeded stream.
//!
//! Address plan (what makes end-to-end checking exact): source `s` reads and writes only its own
//! window at each destination (`window_base(s)`), so the ordering rule per (source, destination,
//! VC, 256 B region) makes every read's expected value known; when workloads use several VCs,
//! each VC has its own slots of every window, since requests on different VCs are not ordered
//! against each other (`Sim::build_workloads`); atomics are fetch-adds of 1 on one shared
//! counter per destination, whose final value must equal the number of atomics applied.

use crate::pod::config::{Pattern, Workload};
use crate::report::OpClass;
use crate::rng::Rng;

/// Bytes of each source's window at a destination.
pub const WINDOW_BYTES: u64 = 64 * 1024;
/// Slots (256 B each) a source uses in its window.
pub const SLOTS: u64 = WINDOW_BYTES / 256;
/// Address of the shared atomic counter at every destination: just past the windows of all
/// 1024 possible sources (64 MiB), so it lies in every accelerator's memory.
pub const ATOMIC_COUNTER_ADDR: u64 = 1024 * WINDOW_BYTES;

/// Base of source `src`'s window at any destination.
pub fn window_base(src: u32) -> u64 {
    u64::from(src) * WINDOW_BYTES
}

/// One operation to issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpSpec {
    /// Issuing accelerator.
    pub src: u32,
    /// Target accelerator.
    pub dst: u32,
    /// Read, write or atomic.
    pub class: OpClass,
    /// Bytes (atomics: 8).
    pub bytes: u32,
    /// Byte address at the destination.
    pub addr: u64,
    /// Virtual channel of its requests (0..=3).
    pub vc: u8,
}

/// A generator for one workload over a set of member accelerators.
#[derive(Debug, Clone)]
pub struct Generator {
    w: Workload,
    members: Vec<u32>,
    rngs: Vec<Rng>,
    perm: Vec<u32>,
    cursor: Vec<u32>,
    /// Mean gap between operations of one source, ps.
    mean_gap_ps: f64,
    /// 256 B slots used in each window (1..=SLOTS), from `first_slot`.
    slots: u64,
    /// First slot used in each window.
    first_slot: u64,
}

impl Generator {
    /// A generator for `w` over `members`, where one source can inject `bytes_per_us` at line rate.
    pub fn new(w: &Workload, members: &[u32], bytes_per_us: f64, seed: u64, stream: u64) -> Self {
        let n = members.len();
        let rngs = (0..n)
            .map(|i| Rng::new(seed, stream.wrapping_mul(1 << 20).wrapping_add(i as u64)))
            .collect();
        // A fixed random permutation with no fixed points (when n > 1): a derangement by shifting
        // a shuffled order by one.
        let mut order: Vec<u32> = (0..n as u32).collect();
        let mut r = Rng::new(seed, stream ^ 0xD1B5_4A32_D192_ED03);
        for i in (1..n).rev() {
            let j = r.below(i as u64 + 1) as usize;
            order.swap(i, j);
        }
        let mut perm = vec![0u32; n];
        for k in 0..n {
            perm[order[k] as usize] = order[(k + 1) % n.max(1)];
        }
        let load = w.offered_load.clamp(1e-6, 1.0);
        let mean_gap_ps = f64::from(w.message_bytes) / (bytes_per_us * load) * 1e6;
        Generator {
            w: w.clone(),
            members: members.to_vec(),
            rngs,
            perm,
            cursor: vec![1; n],
            mean_gap_ps,
            slots: SLOTS,
            first_slot: 0,
        }
    }

    /// Use only the first `slots` 256 B slots of each window (bounds the memory a large pod
    /// touches; clamped to 1..=SLOTS).
    pub fn with_slots(mut self, slots: u64) -> Self {
        self.slots = slots.clamp(1, SLOTS - self.first_slot);
        self
    }

    /// Use the slots from `first` on (the workload's VC has its own slots of every window
    /// when workloads use several VCs; call before [`Generator::with_slots`]).
    pub fn with_first_slot(mut self, first: u64) -> Self {
        self.first_slot = first.min(SLOTS - 1);
        self.slots = self.slots.clamp(1, SLOTS - self.first_slot);
        self
    }

    /// The members (accelerators that issue operations).
    pub fn members(&self) -> &[u32] {
        &self.members
    }

    /// Gap before source index `i`'s next operation (ps, exponential), and the operation.
    /// `None` when the workload cannot produce one (a single-member pattern with no peer).
    pub fn next(&mut self, i: usize) -> Option<(u64, OpSpec)> {
        let n = self.members.len();
        if n < 2 && self.w.pattern != Pattern::Hotspot {
            return None;
        }
        let rng = self.rngs.get_mut(i)?;
        let src = *self.members.get(i)?;
        let gap = rng.exp(self.mean_gap_ps).round() as u64;
        let dst_idx = match self.w.pattern {
            Pattern::Uniform => {
                let k = rng.below(n as u64 - 1) as usize;
                if k >= i {
                    k + 1
                } else {
                    k
                }
            }
            Pattern::Permutation => *self.perm.get(i)? as usize,
            Pattern::Hotspot => {
                let t = self.w.target.unwrap_or(0);
                if t == src {
                    return None;
                }
                return Some((gap, self.op(i, t)));
            }
            Pattern::AllToAll => {
                let c = self.cursor.get_mut(i)?;
                let d = (i + *c as usize) % n;
                *c = if *c as usize >= n - 1 { 1 } else { *c + 1 };
                d
            }
            Pattern::RingAllreduce => (i + 1) % n,
            Pattern::Trace => return None,
        };
        let dst = *self.members.get(dst_idx)?;
        Some((gap, self.op(i, dst)))
    }

    fn op(&mut self, i: usize, dst: u32) -> OpSpec {
        let src = self.members[i];
        let rng = &mut self.rngs[i];
        let x = rng.f64();
        let class = if x < self.w.read {
            OpClass::Read
        } else if x < self.w.read + self.w.write {
            OpClass::Write
        } else {
            OpClass::Atomic
        };
        match class {
            OpClass::Atomic => OpSpec {
                src,
                dst,
                class,
                bytes: 8,
                addr: ATOMIC_COUNTER_ADDR,
                vc: self.w.vc,
            },
            _ => {
                let bytes = self.w.message_bytes;
                let span_slots = u64::from(bytes).div_ceil(256).max(1);
                let slot = self.first_slot + rng.below(self.slots.saturating_sub(span_slots) + 1);
                OpSpec {
                    src,
                    dst,
                    class,
                    bytes,
                    addr: window_base(src) + slot * 256,
                    vc: self.w.vc,
                }
            }
        }
    }
}

/// One line of an operation trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceOp {
    /// Issue time, ps.
    pub at_ps: u64,
    /// The operation.
    pub op: OpSpec,
}

/// Largest trace accepted (lines).
pub const MAX_TRACE_LINES: usize = 10_000_000;

/// Parse a trace CSV: header `time_ns,src,dst,op,bytes`, then one operation per line
/// (`op` = read | write | atomic). Addresses follow the address plan.
///
/// # Errors
/// `line N: what` for the first malformed line.
pub fn parse_trace(text: &str, accelerators: u32) -> Result<Vec<TraceOp>, String> {
    let mut out = Vec::new();
    let mut slot_cursor = std::collections::HashMap::<(u32, u32), u64>::new();
    for (ln, line) in text.lines().enumerate() {
        let n = ln + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if n == 1 && line.starts_with("time_ns") {
            if line.replace(' ', "") != "time_ns,src,dst,op,bytes" {
                return Err("line 1: header must be `time_ns,src,dst,op,bytes`".to_string());
            }
            continue;
        }
        if out.len() >= MAX_TRACE_LINES {
            return Err(format!("line {n}: more than {MAX_TRACE_LINES} operations"));
        }
        let cols: Vec<&str> = line.split(',').map(str::trim).collect();
        if cols.len() != 5 {
            return Err(format!("line {n}: expected 5 columns, got {}", cols.len()));
        }
        let t: f64 = cols[0]
            .parse()
            .map_err(|_| format!("line {n}: time_ns `{}` is not a number", cols[0]))?;
        if !(t.is_finite() && (0.0..=1e12).contains(&t)) {
            return Err(format!("line {n}: time_ns {t} out of range"));
        }
        let acc = |s: &str, what: &str| -> Result<u32, String> {
            let v: u32 = s
                .parse()
                .map_err(|_| format!("line {n}: {what} `{s}` is not a number"))?;
            if v >= accelerators {
                return Err(format!("line {n}: {what} {v}: no such accelerator"));
            }
            Ok(v)
        };
        let src = acc(cols[1], "src")?;
        let dst = acc(cols[2], "dst")?;
        if src == dst {
            return Err(format!("line {n}: src and dst are the same accelerator"));
        }
        let class = match cols[3] {
            "read" => OpClass::Read,
            "write" => OpClass::Write,
            "atomic" => OpClass::Atomic,
            o => return Err(format!("line {n}: op `{o}` (read, write or atomic)")),
        };
        let bytes: u32 = cols[4]
            .parse()
            .map_err(|_| format!("line {n}: bytes `{}` is not a number", cols[4]))?;
        let op = match class {
            OpClass::Atomic => {
                if bytes != 8 {
                    return Err(format!("line {n}: atomics are 8 bytes"));
                }
                OpSpec {
                    src,
                    dst,
                    class,
                    bytes,
                    addr: ATOMIC_COUNTER_ADDR,
                    vc: 0,
                }
            }
            _ => {
                if !(64..=4096).contains(&bytes) || !bytes.is_multiple_of(64) {
                    return Err(format!(
                        "line {n}: bytes {bytes}: a multiple of 64 in 64..=4096"
                    ));
                }
                let span = u64::from(bytes).div_ceil(256);
                let c = slot_cursor.entry((src, dst)).or_insert(0);
                let slot = *c % (SLOTS - span + 1);
                *c += span;
                OpSpec {
                    src,
                    dst,
                    class,
                    bytes,
                    addr: window_base(src) + slot * 256,
                    vc: 0,
                }
            }
        };
        out.push(TraceOp {
            at_ps: (t * 1000.0).round() as u64,
            op,
        });
    }
    out.sort_by_key(|o| o.at_ps);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wl(p: Pattern) -> Workload {
        Workload {
            pattern: p,
            partition: None,
            message_bytes: 256,
            offered_load: 0.5,
            read: 0.5,
            write: 0.4,
            atomic: 0.1,
            target: Some(3),
            trace: None,
            vc: 0,
            sources: None,
        }
    }

    #[test]
    fn patterns_never_target_self_and_stay_in_members() {
        let members: Vec<u32> = (10..26).collect();
        for p in [
            Pattern::Uniform,
            Pattern::Permutation,
            Pattern::Hotspot,
            Pattern::AllToAll,
            Pattern::RingAllreduce,
        ] {
            let mut w = wl(p);
            w.target = Some(12);
            let mut g = Generator::new(&w, &members, 100_000.0, 1, 0);
            for i in 0..members.len() {
                for _ in 0..50 {
                    if let Some((_, op)) = g.next(i) {
                        assert_ne!(op.src, op.dst, "{p:?}");
                        assert!(members.contains(&op.dst));
                        if op.class != OpClass::Atomic {
                            assert!(op.addr >= window_base(op.src));
                            assert!(
                                op.addr + u64::from(op.bytes) <= window_base(op.src) + WINDOW_BYTES
                            );
                        }
                    } else {
                        assert_eq!(p, Pattern::Hotspot);
                        assert_eq!(members[i], 12);
                    }
                }
            }
        }
    }

    #[test]
    fn all_to_all_visits_everyone() {
        let members: Vec<u32> = (0..8).collect();
        let mut g = Generator::new(&wl(Pattern::AllToAll), &members, 1e5, 1, 0);
        let mut seen: Vec<u32> = (0..7).map(|_| g.next(0).unwrap().1.dst).collect();
        seen.sort();
        assert_eq!(seen, (1..8).collect::<Vec<_>>());
    }

    #[test]
    fn offered_load_sets_mean_gap() {
        let members: Vec<u32> = (0..4).collect();
        let mut g = Generator::new(&wl(Pattern::Uniform), &members, 100_000.0, 9, 0);
        let total: u64 = (0..20_000).map(|_| g.next(0).unwrap().0).sum();
        let mean = total as f64 / 20_000.0;
        // 256 B at 0.5 of 100 000 B/µs → 5.12 ns = 5120 ps.
        assert!((mean - 5120.0).abs() < 150.0, "{mean}");
    }

    #[test]
    fn trace_parsing() {
        let t = "time_ns,src,dst,op,bytes\n10,0,1,read,64\n5,1,0,atomic,8\n";
        let ops = parse_trace(t, 4).unwrap();
        assert_eq!(ops.len(), 2);
        assert_eq!(ops[0].at_ps, 5000);
        assert_eq!(ops[0].op.class, OpClass::Atomic);
        for bad in [
            "time_ns,src,dst,op,bytes\n1,0,9,read,64\n",
            "time_ns,src,dst,op,bytes\n1,0,0,read,64\n",
            "time_ns,src,dst,op,bytes\n1,0,1,poke,64\n",
            "time_ns,src,dst,op,bytes\n1,0,1,read,65\n",
            "time_ns,src,dst,op,bytes\nx,0,1,read,64\n",
            "time_ns,src,dst,op,bytes\n1,0,1\n",
            "time_ns,src,dest,op,bytes\n",
        ] {
            let e = parse_trace(bad, 4).unwrap_err();
            assert!(e.starts_with("line "), "{e}");
        }
    }
}
