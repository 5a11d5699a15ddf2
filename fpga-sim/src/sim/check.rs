//! The end-to-end data-integrity checker and the accelerators' sparse memory
//! (`spec-notes/simulator.md#integrity`).
//!
//! Every write carries data generated from a unique write ID and the line address; the
//! reference copy of memory records, per (destination, 64 B line), the ID of the last write
//! issued to it. A read's expected content is taken from the reference when the read is
//! issued (the address plan and the per-region ordering rule make that exact) and every byte
//! that comes back is compared with it. Atomics are fetch-adds of 1 on one counter per
//! destination: the returned old values of a destination must be exactly 0..n−1, so their
//! count and sum are checked, and the counter must end at n.
//!
//! Under faults an operation may be reported failed; a failed write may or may not have
//! reached memory. A read that disagrees with the reference is therefore judged once the run
//! is over ([`Reference::resolve`]): it is excused only if it returned what a line held
//! before a run of writes that were all reported failed (or one of those writes). A failed
//! atomic widens the counter check to every count it allows.

use super::blockmap::BlockMap;
use podlink_protocol::txn::{ByteEnables, MemoryTarget, TargetError};
use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

/// A fast hasher for integer keys (deterministic; no DoS concerns in a simulator).
#[derive(Default, Clone, Copy)]
pub struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        let x = (v ^ (v >> 31)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = x ^ (x >> 29);
    }
}

/// A map keyed by integers with [`IntHasher`].
pub type IntMap<V> = HashMap<u64, V, BuildHasherDefault<IntHasher>>;

/// Key of a 64 B line of accelerator `a`'s memory.
pub fn line_key(a: u32, addr: u64) -> u64 {
    (u64::from(a) << 50) | (addr >> 6)
}

/// The 64 bytes a write with ID `wid` puts in the line at `addr` of `dst`; ID 0 is the initial
/// content of memory (a pattern too, not zeros; zero except the atomic counters' line).
pub fn pattern(wid: u32, dst: u32, addr: u64, out: &mut [u8]) {
    if wid == 0 && addr & !63 == crate::workload::ATOMIC_COUNTER_ADDR & !63 {
        out.fill(0);
        return;
    }
    let mut s = (u64::from(wid) << 32) ^ line_key(dst, addr).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    let mut next = || {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        z.to_le_bytes()
    };
    // Whole 8-byte words with fixed-size copies (no call per word), then the rest.
    let mut words = out.chunks_exact_mut(8);
    for chunk in &mut words {
        chunk.copy_from_slice(&next());
    }
    let rest = words.into_remainder();
    if !rest.is_empty() {
        let b = next();
        rest.copy_from_slice(&b[..rest.len()]);
    }
}

/// Bytes in a block of the simulated memory: the 256 B ordering region, so that one piece of
/// an operation touches one block (one map lookup instead of one per 64 B line).
const BLOCK: u64 = 256;

/// Key of the 256 B block of accelerator `a`'s memory that holds `addr`.
pub fn block_key(a: u32, addr: u64) -> u64 {
    (u64::from(a) << 50) | (addr / BLOCK)
}

/// The initial content of the block at `base` (256-aligned) of accelerator `a`: the pattern
/// of write ID 0, line by line.
fn initial_block(a: u32, base: u64) -> [u8; BLOCK as usize] {
    let mut b = [0u8; BLOCK as usize];
    for (l, line) in b.chunks_mut(64).enumerate() {
        pattern(0, a, base + l as u64 * 64, line);
    }
    b
}

/// The 64 bytes of the line at `addr` (64-aligned) of accelerator `a` into `out`, given its
/// block's bytes (`None`: never written, so it holds the pattern of write ID 0).
fn line_of(block: Option<&[u8; BLOCK as usize]>, a: u32, addr: u64, out: &mut [u8; 64]) {
    let off = (addr % BLOCK) as usize & !63;
    match block.and_then(|b| b.get(off..off + 64)) {
        Some(bytes) => out.copy_from_slice(bytes),
        None => pattern(0, a, addr & !63, out),
    }
}

/// The simulated memory of every accelerator: 256 B blocks, allocated when first written.
#[derive(Default)]
pub struct SparseMem {
    index: BlockMap<u32>,
    blocks: Vec<[u8; BLOCK as usize]>,
    /// Bytes each accelerator exposes (addresses at or above are not mapped).
    pub limit: u64,
}

impl SparseMem {
    /// Memory of `limit` bytes per accelerator.
    pub fn new(limit: u64) -> Self {
        SparseMem {
            index: BlockMap::default(),
            blocks: Vec::new(),
            limit,
        }
    }

    /// Blocks (256 B) allocated.
    pub fn blocks(&self) -> usize {
        self.blocks.len()
    }

    /// The keys ([`block_key`]) of the blocks ever written, in no particular order.
    pub fn written_blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.index.keys()
    }

    /// The 64 bytes the line at `addr` (64-aligned) of accelerator `a` holds now.
    pub fn line(&self, a: u32, addr: u64) -> [u8; 64] {
        let mut out = [0u8; 64];
        line_of(self.block(block_key(a, addr)), a, addr, &mut out);
        out
    }

    /// The bytes of the block with key `key` ([`block_key`]), if it was ever written.
    pub fn block(&self, key: u64) -> Option<&[u8; BLOCK as usize]> {
        self.index
            .get(key)
            .and_then(|&i| self.blocks.get(i as usize))
    }

    /// Ask for the cache lines of the block with key `key` ahead of a read (a hint: the
    /// index is looked up, the bytes are not read).
    fn prefetch_block(&self, key: u64) {
        if let Some(b) = self.block(key) {
            for line in b.chunks(64) {
                super::window::prefetch(line.as_ptr());
            }
        }
    }

    /// Accelerator `a`'s view.
    pub fn of(&mut self, a: u32) -> AccelMem<'_> {
        AccelMem { mem: self, a }
    }
}

/// One accelerator's memory, as its completers see it.
pub struct AccelMem<'a> {
    mem: &'a mut SparseMem,
    a: u32,
}

impl MemoryTarget for AccelMem<'_> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), TargetError> {
        if addr.saturating_add(buf.len() as u64) > self.mem.limit {
            return Err(TargetError::NotMapped);
        }
        let mut pos = 0usize;
        while pos < buf.len() {
            let a = addr + pos as u64;
            let off = (a % BLOCK) as usize;
            let n = (BLOCK as usize - off).min(buf.len() - pos);
            let dst = &mut buf[pos..pos + n];
            match self.mem.index.get(block_key(self.a, a)) {
                Some(&i) => dst.copy_from_slice(&self.mem.blocks[i as usize][off..off + n]),
                None => dst.copy_from_slice(&initial_block(self.a, a - off as u64)[off..off + n]),
            }
            pos += n;
        }
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8], enables: &ByteEnables) -> Result<(), TargetError> {
        if addr.saturating_add(data.len() as u64) > self.mem.limit {
            return Err(TargetError::NotMapped);
        }
        let all = enables.all_set(data.len());
        let mut pos = 0usize;
        while pos < data.len() {
            let a = addr + pos as u64;
            let off = (a % BLOCK) as usize;
            let n = (BLOCK as usize - off).min(data.len() - pos);
            let blocks = &mut self.mem.blocks;
            let acc = self.a;
            let src = &data[pos..pos + n];
            let i = *self.mem.index.get_or_insert_with(block_key(self.a, a), || {
                // A new block written whole, every byte enabled: its initial content
                // is not needed (the copy below writes the same bytes again).
                match <[u8; BLOCK as usize]>::try_from(src) {
                    Ok(b) if all => blocks.push(b),
                    _ => blocks.push(initial_block(acc, a - off as u64)),
                }
                (blocks.len() - 1) as u32
            });
            let block = &mut self.mem.blocks[i as usize][off..off + n];
            if all {
                block.copy_from_slice(src);
            } else {
                for (k, (d, s)) in block.iter_mut().zip(src).enumerate() {
                    if enables.get(pos + k) {
                        *d = *s;
                    }
                }
            }
            pos += n;
        }
        Ok(())
    }
}

/// What the checker found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Integrity {
    /// 64 B lines of read data compared.
    pub lines_checked: u64,
    /// Lines that differed from the reference.
    pub mismatches: u64,
    /// Completions for an operation that had already completed (or was never issued).
    pub duplicates: u64,
    /// Operations that completed with an error.
    pub failed: u64,
    /// Operations issued and never completed.
    pub lost: u64,
    /// Reads that returned data of a write that was reported failed, or the data such a write
    /// would have replaced (allowed: a failed write may or may not have taken effect).
    pub excused: u64,
    /// Destinations whose atomic results or counter disagree with the atomics issued.
    pub atomic_errors: u64,
    /// 64 B lines of memory compared with the reference after a drained run
    /// ([`Reference::audit`]).
    pub lines_audited: u64,
    /// Audited lines that held neither their last write nor what a failed write may leave.
    pub memory_mismatches: u64,
    /// Audited lines that held what a chain of writes reported failed may have left (allowed).
    pub memory_excused: u64,
    /// Pieces (requests) of failed operations that failed for another reason than a timeout
    /// (an error status, poisoned data, a request refused).
    pub failed_not_timed_out: u64,
    /// Requests their requesters stopped waiting for (`RequesterStats::request_timeouts`;
    /// rogue requesters' too).
    pub requests_timed_out: u64,
    /// Requests in flight given up when their port was declared down
    /// (`RequesterStats::requests_abandoned`).
    pub requests_abandoned: u64,
    /// Operations that timed out before all their requests were sent.
    pub queue_timeouts: u64,
    /// Responses dropped by their requesters as late or of a tag not in flight.
    pub late_responses: u64,
    /// Frames the switches dropped, every reason (`expired` among them).
    pub switch_drops: u64,
    /// Requests and responses links reset after a link fault dropped (`Sim::on_link_fault`:
    /// a link held a TL flit past its hold limit, or its retry gave up): those its ends had
    /// sent that their peers had not received when the link was reset, frames still
    /// waiting for a TL packer, and responses an endpoint's completer still held.
    pub reset_drops: u64,
    /// Frames discarded from the ingress pipelines of switch ports declared down
    /// (`FaultReport::ingress_discarded`).
    pub ingress_discarded: u64,
    /// Requests completers dropped as addressed to another accelerator
    /// (`CompleterStats::misrouted`).
    pub completer_drops: u64,
    /// Requests whose responses completers dropped unsent, past their lifetime (a request
    /// timeout after they were ready; `CompleterStats::responses_expired`).
    pub responses_expired: u64,
    /// Requests and responses still in the fabric when the run ended ([`Sim::stranded`]:
    /// on links that stayed down, or held in switches): zero in a drained run without
    /// faults.
    ///
    /// [`Sim::stranded`]: super::Sim
    pub stranded: u64,
    /// Of `stranded`: on links (sent, not received).
    pub stranded_on_links: u64,
    /// Of `stranded`: queued in switches, or for a TL packer or a completer.
    pub stranded_queued: u64,
    /// Of `stranded`: held by completers.
    pub stranded_in_completers: u64,
    /// The first problems, described.
    pub first_problems: Vec<String>,
}

impl Integrity {
    /// No problem found, and no operation reported failed.
    pub fn ok(&self) -> bool {
        self.sound_but_failed() && self.failed == 0
    }

    /// Where the requests given up went: each left exactly one trace. Its response came
    /// back late (dropped by its requester), a switch dropped its request or its response,
    /// a link reset dropped one of them, a port declared down discarded one from its
    /// ingress pipeline, a completer dropped the request as misrouted or its response past
    /// its lifetime, or one of them is still in the fabric (`stranded`).
    pub fn traced(&self) -> u64 {
        self.late_responses
            + self.switch_drops
            + self.reset_drops
            + self.ingress_discarded
            + self.completer_drops
            + self.responses_expired
            + self.stranded
    }

    /// Every request given up (timed out, or abandoned when its port was declared down)
    /// left exactly one trace ([`Integrity::traced`]): a request or response lost without
    /// being counted, or counted twice, breaks the balance. Held in every run, faults or
    /// not.
    pub fn requests_accounted(&self) -> bool {
        self.requests_timed_out + self.requests_abandoned == self.traced()
    }

    /// Every failure was a timeout, nothing is left in the fabric, and every request that
    /// timed out left its trace ([`Integrity::requests_accounted`]). In a pod without
    /// faults, a request timeout shorter than the queueing of an overloaded fabric, or than
    /// a link's recovery from bit errors, fails operations this way, and nothing else may.
    pub fn timeouts_accounted(&self) -> bool {
        self.failed_not_timed_out == 0 && self.stranded == 0 && self.requests_accounted()
    }

    /// No problem found except operations reported failed (which faults may cause): nothing
    /// lost, duplicated or wrong.
    pub fn sound_but_failed(&self) -> bool {
        self.mismatches == 0
            && self.duplicates == 0
            && self.lost == 0
            && self.atomic_errors == 0
            && self.memory_mismatches == 0
    }

    /// Note a problem (the first 10 are kept in words).
    pub fn note(&mut self, what: impl FnOnce() -> String) {
        if self.first_problems.len() < 10 {
            self.first_problems.push(what());
        }
    }

    /// Note an operation reported failed: kept in words only while fewer than 5 problems
    /// are, so that failures (expected under some faults) leave room for worse ones.
    pub fn note_failed(&mut self, what: impl FnOnce() -> String) {
        if self.first_problems.len() < 5 {
            self.first_problems.push(what());
        }
    }
}

/// Most disagreeing reads kept for judging after the run (the rest count as mismatches).
pub const MAX_SUSPECTS: usize = 100_000;

/// A read line that disagreed with the reference when it arrived.
struct Suspect {
    dst: u32,
    addr: u64,
    expected: u32,
    data: [u8; 64],
}

/// The reference copy of memory and the atomic bookkeeping.
#[derive(Default)]
pub struct Reference {
    /// Per 256 B block (`block_key`): the last write ID issued to each of its 64 B lines.
    blocks: BlockMap<[u32; 4]>,
    next_wid: u32,
    /// Per destination: atomics completed, sum of old values returned, atomics failed.
    atomics: Vec<(u64, u128, u64)>,
    /// (line, write ID) of a failed write → the write ID the line held before it.
    failed_writes: HashMap<(u64, u32), u32>,
    suspects: Vec<Suspect>,
    /// Findings.
    pub found: Integrity,
}

/// Whether `data`, found in the line at `addr` of `dst` whose last write issued was
/// `expected`, is what a chain of writes that were all reported failed (`failed`: (line, write
/// ID) → the write ID the line held before) may have left.
fn left_by_failed(
    failed: &HashMap<(u64, u32), u32>,
    dst: u32,
    addr: u64,
    expected: u32,
    data: &[u8; 64],
) -> bool {
    let key = line_key(dst, addr);
    let mut want = [0u8; 64];
    let mut w = expected;
    // Each step goes to an older write; bounded by the failed writes recorded.
    for _ in 0..=failed.len() {
        let Some(&prev) = failed.get(&(key, w)) else {
            return false;
        };
        w = prev;
        pattern(w, dst, addr, &mut want);
        if want == *data {
            return true;
        }
    }
    false
}

/// How many blocks ahead [`Reference::audit`] asks for the memory's next blocks.
const AUDIT_AHEAD: usize = 8;

/// Index of the 64 B line of `addr` in its 256 B block.
fn line_in_block(addr: u64) -> usize {
    ((addr % BLOCK) / 64) as usize
}

/// The `lines` 64 B lines from `addr` of `dst`, block by block: each block's key and the
/// indices (from 0 at `addr`) of the lines in it, so that a block is looked up once.
fn lines_by_block(
    dst: u32,
    addr: u64,
    lines: usize,
) -> impl Iterator<Item = (u64, std::ops::Range<usize>)> {
    let line = move |l: usize| addr + l as u64 * 64;
    let mut l = 0;
    std::iter::from_fn(move || {
        if l >= lines {
            return None;
        }
        let (key, first) = (block_key(dst, line(l)), l);
        while l < lines && block_key(dst, line(l)) == key {
            l += 1;
        }
        Some((key, first..l))
    })
}

impl Reference {
    /// A reference for `n` accelerators.
    pub fn new(n: u32) -> Self {
        Reference {
            blocks: BlockMap::default(),
            next_wid: 0,
            atomics: vec![(0, 0, 0); n as usize],
            failed_writes: HashMap::new(),
            suspects: Vec::new(),
            found: Integrity::default(),
        }
    }

    /// Record a write of `bytes` at `addr` of `dst` issued now; returns its write ID.
    pub fn write(&mut self, dst: u32, addr: u64, bytes: u32) -> u32 {
        self.write_prev(dst, addr, bytes, &mut [])
    }

    /// Record a write like [`Reference::write`], and put the write ID each line held before
    /// in `prev`.
    pub fn write_prev(&mut self, dst: u32, addr: u64, bytes: u32, prev: &mut [u32]) -> u32 {
        self.next_wid = self.next_wid.wrapping_add(1).max(1);
        let wid = self.next_wid;
        for (key, ls) in lines_by_block(dst, addr, bytes.div_ceil(64) as usize) {
            let block = self.blocks.get_or_insert_with(key, || [0; 4]);
            for l in ls {
                let old = block
                    .get_mut(line_in_block(addr + l as u64 * 64))
                    .map_or(0, |w| std::mem::replace(w, wid));
                if let Some(p) = prev.get_mut(l) {
                    *p = old;
                }
            }
        }
        wid
    }

    /// Ask for where [`Reference::write_prev`] and [`Reference::expect`] look up the line at
    /// `addr` of `dst` first (a hint: nothing is read).
    pub fn prefetch(&self, dst: u32, addr: u64) {
        self.blocks.prefetch(block_key(dst, addr));
    }

    /// Write `wid` to the line at `addr` of `dst` was reported failed; the line held `prev`
    /// before it.
    pub fn write_failed(&mut self, dst: u32, addr: u64, wid: u32, prev: u32) {
        self.failed_writes.insert((line_key(dst, addr), wid), prev);
    }

    /// An atomic on `dst` was reported failed (it may or may not have been applied).
    pub fn atomic_failed(&mut self, dst: u32) {
        if let Some(a) = self.atomics.get_mut(dst as usize) {
            a.2 += 1;
        }
    }

    /// The write ID each line of a read issued now must return.
    pub fn expect(&self, dst: u32, addr: u64, bytes: u32, out: &mut [u32]) {
        let lines = (bytes.div_ceil(64) as usize).min(out.len());
        for (key, ls) in lines_by_block(dst, addr, lines) {
            let block = self.blocks.get(key);
            for l in ls {
                if let Some(o) = out.get_mut(l) {
                    *o = block
                        .and_then(|b| b.get(line_in_block(addr + l as u64 * 64)).copied())
                        .unwrap_or(0);
                }
            }
        }
    }

    /// Compare read data (starting at line `first_line` of a read at `addr`) with the
    /// expected write IDs.
    pub fn check_read(&mut self, dst: u32, addr: u64, data: &[u8], expected: &[u32]) {
        let mut want = [0u8; 64];
        for (i, chunk) in data.chunks(64).enumerate() {
            let wid = expected.get(i).copied().unwrap_or(0);
            let a = addr + i as u64 * 64;
            pattern(wid, dst, a, &mut want);
            self.found.lines_checked += 1;
            if chunk != &want[..chunk.len()] {
                self.found.mismatches += 1;
                if self.suspects.len() < MAX_SUSPECTS {
                    let mut data = want;
                    data[..chunk.len()].copy_from_slice(chunk);
                    self.suspects.push(Suspect {
                        dst,
                        addr: a,
                        expected: wid,
                        data,
                    });
                } else {
                    self.found.note(|| {
                        format!(
                            "read of accelerator {dst} line {a:#x}: data differs from write {wid}"
                        )
                    });
                }
            }
        }
    }

    /// At the end of the run: judge the reads that disagreed with the reference. A read is
    /// excused when it returned the data of its expected write's chain of failed writes: the
    /// expected write if it failed, the write before it, and so on back through writes that
    /// all failed. The others stay mismatches.
    pub fn resolve(&mut self) {
        let suspects = std::mem::take(&mut self.suspects);
        for s in &suspects {
            if left_by_failed(&self.failed_writes, s.dst, s.addr, s.expected, &s.data) {
                self.found.mismatches -= 1;
                self.found.excused += 1;
            } else {
                let (d, a, e) = (s.dst, s.addr, s.expected);
                self.found.note(|| {
                    format!("read of accelerator {d} line {a:#x}: data differs from write {e}")
                });
            }
        }
    }

    /// At the end of a drained run (no operation open): compare every line a write was issued
    /// to, and every line of every block of memory that was written, with what the writes
    /// issued put there (the initial pattern where none was). This covers runs that write
    /// without reading a line back (all-to-all is write-only): a write lost, misdirected or
    /// corrupted after its CRC checks shows here. A line whose last write was reported failed
    /// may hold what the chain of failed writes allows ([`Reference::resolve`]'s rule). The
    /// atomic counters' line is left to [`Reference::check_atomics`]. No copy of the block
    /// lists is made (the 100 µs `ualink-1024` run writes about 12 M blocks); the problems
    /// noted are the lowest addresses found wrong.
    pub fn audit(&mut self, mem: &SparseMem) {
        let counter_line = crate::workload::ATOMIC_COUNTER_ADDR & !63;
        let mut lowest: BTreeSet<(u32, u64, u32)> = BTreeSet::new();
        let found = &mut self.found;
        let failed = &self.failed_writes;
        let mut want = [0u8; 64];
        let mut got = [0u8; 64];
        // `data`: the block's bytes in memory (`None`: never written).
        let mut block = |key: u64, wids: [u32; 4], data: Option<&[u8; BLOCK as usize]>| {
            let dst = (key >> 50) as u32;
            let base = (key & ((1 << 50) - 1)) * BLOCK;
            for (l, &wid) in wids.iter().enumerate() {
                let addr = base + l as u64 * 64;
                if wid == 0 && addr == counter_line {
                    continue;
                }
                line_of(data, dst, addr, &mut got);
                pattern(wid, dst, addr, &mut want);
                found.lines_audited += 1;
                if got == want {
                    continue;
                }
                if left_by_failed(failed, dst, addr, wid, &got) {
                    found.memory_excused += 1;
                } else {
                    found.memory_mismatches += 1;
                    lowest.insert((dst, addr, wid));
                    if lowest.len() > 10 {
                        lowest.pop_last();
                    }
                }
            }
        };
        // The reference's blocks in its table's order; the memory's block a few entries ahead
        // is asked for early, since each is a cache miss (the run writes millions of blocks).
        let mut ahead = self.blocks.keys().skip(AUDIT_AHEAD);
        let mut in_both = 0usize;
        for (key, &wids) in self.blocks.iter() {
            if let Some(next) = ahead.next() {
                mem.prefetch_block(next);
            }
            let data = mem.block(key);
            in_both += usize::from(data.is_some());
            block(key, wids, data);
        }
        // Blocks written that the reference never recorded: stray writes (only looked for
        // when the memory holds more blocks than the reference's found there).
        if mem.blocks() > in_both {
            for key in mem.written_blocks() {
                if !self.blocks.contains_key(key) {
                    block(key, [0; 4], mem.block(key));
                }
            }
        }
        for (dst, addr, wid) in lowest {
            self.found.note(|| {
                format!(
                    "memory of accelerator {dst} line {addr:#x}: holds neither write {wid} nor what a failed write may leave"
                )
            });
        }
    }

    /// An atomic on `dst` returned `old`.
    pub fn atomic_done(&mut self, dst: u32, old: u64) {
        if let Some(a) = self.atomics.get_mut(dst as usize) {
            a.0 += 1;
            a.1 += u128::from(old);
        }
    }

    /// At the end of a drained run: every destination's returned old values are 0..n−1 in
    /// count and sum, and its counter holds n. With `f` atomics reported failed, the counter
    /// may hold n..=n+f and the old values returned must be n distinct values below it (their
    /// sum between the n smallest and the n largest).
    pub fn check_atomics(&mut self, counter: impl Fn(u32) -> u64) {
        for (d, &(n, sum, failed)) in self.atomics.iter().enumerate() {
            let d = d as u32;
            let c = counter(d);
            let tri = |k: u64| u128::from(k) * u128::from(k.saturating_sub(1)) / 2;
            let want_sum = tri(n);
            let ok = if failed == 0 {
                sum == want_sum && c == n
            } else {
                (n..=n + failed).contains(&c) && sum >= want_sum && sum <= tri(c) - tri(c - n)
            };
            if !ok {
                self.found.atomic_errors += 1;
                self.found.note(|| {
                    format!("accelerator {d}: {n} atomics returned sum {sum} (want {want_sum}), counter {c}")
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_accounted_only_when_every_one_left_a_trace() {
        let i = Integrity {
            failed: 7,
            requests_timed_out: 5,
            queue_timeouts: 2,
            late_responses: 3,
            switch_drops: 2,
            ..Integrity::default()
        };
        assert!(i.timeouts_accounted() && i.sound_but_failed() && !i.ok());
        // A timed-out request with no trace (lost without being counted).
        let lost = Integrity {
            late_responses: 2,
            ..i.clone()
        };
        assert!(!lost.timeouts_accounted());
        // More traces than timeouts (a late response counted twice, or a drop of a request
        // still awaited).
        let extra = Integrity {
            switch_drops: 3,
            ..i.clone()
        };
        assert!(!extra.timeouts_accounted());
        // A failure that is not a timeout.
        let other = Integrity {
            failed_not_timed_out: 1,
            ..i.clone()
        };
        assert!(!other.timeouts_accounted());
        // A timeout traced by a link reset that dropped its request or response; a reset
        // that dropped more than the timeouts left untraced (a count too high) is not.
        let reset = Integrity {
            reset_drops: 1,
            ..lost.clone()
        };
        assert!(reset.timeouts_accounted());
        let over = Integrity {
            reset_drops: 2,
            ..lost.clone()
        };
        assert!(!over.timeouts_accounted());
        let short = Integrity {
            requests_timed_out: 7,
            reset_drops: 1,
            ..i.clone()
        };
        assert!(!short.timeouts_accounted());
        // Something still in the fabric balances a request given up under faults, but a
        // run without faults must not end with anything stranded.
        let stranded = Integrity {
            stranded: 1,
            ..lost.clone()
        };
        assert!(stranded.requests_accounted() && !stranded.timeouts_accounted());
    }

    /// Under faults: requests abandoned at a port declared down count like timed-out ones,
    /// and frames discarded from ingress pipelines, misrouted requests and responses dropped
    /// past their lifetime are traces.
    #[test]
    fn requests_given_up_under_faults_are_balanced_by_every_kind_of_trace() {
        let i = Integrity {
            failed: 9,
            failed_not_timed_out: 4,
            requests_timed_out: 6,
            requests_abandoned: 4,
            late_responses: 3,
            switch_drops: 1,
            reset_drops: 1,
            ingress_discarded: 2,
            completer_drops: 1,
            responses_expired: 1,
            stranded: 1,
            ..Integrity::default()
        };
        assert_eq!(i.traced(), 10);
        assert!(i.requests_accounted() && !i.timeouts_accounted());
        for short in [
            Integrity {
                ingress_discarded: 1,
                ..i.clone()
            },
            Integrity {
                completer_drops: 0,
                ..i.clone()
            },
            Integrity {
                responses_expired: 0,
                ..i.clone()
            },
            Integrity {
                requests_abandoned: 5,
                ..i.clone()
            },
        ] {
            assert!(!short.requests_accounted(), "{short:?}");
        }
    }

    /// The pattern as first written (one call per word, a short last word cut): the fast
    /// version must give the same bytes for every length.
    fn pattern_reference(wid: u32, dst: u32, addr: u64, out: &mut [u8]) {
        if wid == 0 && addr & !63 == crate::workload::ATOMIC_COUNTER_ADDR & !63 {
            out.fill(0);
            return;
        }
        let mut s =
            (u64::from(wid) << 32) ^ line_key(dst, addr).wrapping_mul(0xD6E8_FEB8_6659_FD93);
        for chunk in out.chunks_mut(8) {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            let b = z.to_le_bytes();
            chunk.copy_from_slice(&b[..chunk.len()]);
        }
    }

    #[test]
    fn pattern_equals_reference_for_every_length() {
        for (wid, dst, addr) in [
            (0, 3, 0),
            (7, 1, 4096),
            (123_456, 1023, 1 << 30),
            (1, 0, 64),
        ] {
            for len in 0..=70 {
                let mut got = [0xa5u8; 70];
                let mut want = [0x5au8; 70];
                pattern(wid, dst, addr, &mut got[..len]);
                pattern_reference(wid, dst, addr, &mut want[..len]);
                assert_eq!(got[..len], want[..len], "wid {wid} len {len}");
            }
        }
        let mut z = [1u8; 64];
        pattern(0, 5, crate::workload::ATOMIC_COUNTER_ADDR, &mut z);
        assert_eq!(z, [0u8; 64]);
    }

    #[test]
    fn memory_reads_back_what_was_written() {
        let mut m = SparseMem::new(1 << 20);
        let mut v = m.of(3);
        v.write(60, &[1, 2, 3, 4, 5, 6], &ByteEnables::ALL).unwrap();
        let mut b = [9u8; 8];
        v.read(58, &mut b).unwrap();
        let mut init = [0u8; 64];
        pattern(0, 3, 0, &mut init);
        assert_ne!(init, [0; 64]);
        assert_eq!(b, [init[58], init[59], 1, 2, 3, 4, 5, 6]);
        assert!(v.read(1 << 20, &mut b).is_err());
        assert_eq!(m.blocks(), 1);
        let mut o = [0u8; 4];
        m.of(4).read(60, &mut o).unwrap();
        pattern(0, 4, 0, &mut init);
        assert_eq!(o, init[60..64]);
        let mut half = ByteEnables::NONE;
        half.set(1, true);
        m.of(3).write(60, &[9, 9], &half).unwrap();
        m.of(3).read(60, &mut o).unwrap();
        assert_eq!(o, [1, 9, 3, 4]);
        // Across a block boundary: the written bytes, and the initial pattern around them
        // (also in a block never written).
        m.of(3).write(254, &[7; 4], &ByteEnables::ALL).unwrap();
        assert_eq!(m.blocks(), 2);
        let mut c = [0u8; 8];
        m.of(3).read(252, &mut c).unwrap();
        let mut p0 = [0u8; 64];
        pattern(0, 3, 192, &mut p0);
        let mut p1 = [0u8; 64];
        pattern(0, 3, 256, &mut p1);
        assert_eq!(c, [p0[60], p0[61], 7, 7, 7, 7, p1[2], p1[3]]);
        let mut d = [0u8; 70];
        m.of(3).read(1000, &mut d).unwrap();
        let mut want = [0u8; 128];
        pattern(0, 3, 960, &mut want[..64]);
        pattern(0, 3, 1024, &mut want[64..]);
        assert_eq!(d, want[40..110]);
        assert_eq!(m.blocks(), 2);
    }

    /// A new block written whole takes the data as it is; written whole with some bytes not
    /// enabled, it keeps its initial content in those; a write spanning blocks at an offset
    /// keeps the initial content around it.
    #[test]
    fn whole_block_writes_into_new_blocks() {
        let mut m = SparseMem::new(1 << 20);
        let data: [u8; 512] = core::array::from_fn(|i| (i * 7 + 1) as u8);
        m.of(2).write(1024, &data, &ByteEnables::ALL).unwrap();
        let mut back = [0u8; 512];
        m.of(2).read(1024, &mut back).unwrap();
        assert_eq!(back, data);
        let mut init = [0u8; 256];
        for (l, line) in init.chunks_mut(64).enumerate() {
            pattern(0, 2, 4096 + l as u64 * 64, line);
        }
        let mut some = ByteEnables::ALL;
        some.set(0, false);
        some.set(255, false);
        m.of(2).write(4096, &data[..256], &some).unwrap();
        let mut got = [0u8; 256];
        m.of(2).read(4096, &mut got).unwrap();
        let mut want = data;
        want[0] = init[0];
        want[255] = init[255];
        assert_eq!(got, want[..256]);
        m.of(2)
            .write(8192 + 64, &data[..256], &ByteEnables::ALL)
            .unwrap();
        let mut around = [0u8; 384];
        m.of(2).read(8192, &mut around).unwrap();
        let mut first = [0u8; 64];
        pattern(0, 2, 8192, &mut first);
        let mut last = [0u8; 64];
        pattern(0, 2, 8192 + 320, &mut last);
        assert_eq!(around[..64], first);
        assert_eq!(around[64..320], data[..256]);
        assert_eq!(around[320..], last);
        assert_eq!(m.blocks(), 5);
    }

    #[test]
    fn reference_catches_stale_and_corrupt_reads() {
        let mut r = Reference::new(4);
        let w1 = r.write(2, 256, 128);
        let mut exp = [0u32; 2];
        r.expect(2, 256, 128, &mut exp);
        assert_eq!(exp, [w1, w1]);
        let mut data = [0u8; 128];
        pattern(w1, 2, 256, &mut data[..64]);
        pattern(w1, 2, 320, &mut data[64..]);
        r.check_read(2, 256, &data, &exp);
        assert!(r.found.ok());
        let _w2 = r.write(2, 256, 64);
        r.check_read(2, 256, &data, &[w1 + 1, w1]);
        assert_eq!(r.found.mismatches, 1);
        // A write across blocks records every line; other lines and destinations keep theirs.
        let w3 = r.write(2, 448, 192);
        let mut e = [9u32; 6];
        r.expect(2, 384, 384, &mut e);
        assert_eq!(e, [0, w3, w3, w3, 0, 0]);
        r.expect(3, 448, 64, &mut e[..1]);
        assert_eq!(e[0], 0);
        data[70] ^= 1;
        r.check_read(2, 256, &data, &exp);
        assert_eq!(r.found.mismatches, 2);
    }

    #[test]
    fn reads_are_excused_only_by_failed_writes() {
        let mut r = Reference::new(4);
        let mut prev = [0u32; 1];
        let w1 = r.write_prev(1, 0, 64, &mut prev);
        assert_eq!(prev, [0]);
        let w2 = r.write_prev(1, 0, 64, &mut prev);
        assert_eq!(prev, [w1]);
        let w3 = r.write_prev(1, 0, 64, &mut prev);
        let mut exp = [0u32; 1];
        r.expect(1, 0, 64, &mut exp);
        assert_eq!(exp, [w3]);
        let data = |w: u32| {
            let mut d = [0u8; 64];
            pattern(w, 1, 0, &mut d);
            d
        };
        // Three reads expecting w3 return w3, w2 and w1; w3 and w2 fail afterwards.
        r.check_read(1, 0, &data(w3), &exp);
        r.check_read(1, 0, &data(w2), &exp);
        r.check_read(1, 0, &data(w1), &exp);
        // A read of garbage is never excused.
        r.check_read(1, 0, &[7u8; 64], &exp);
        assert_eq!(r.found.mismatches, 3);
        r.write_failed(1, 0, w3, w2);
        r.write_failed(1, 0, w2, w1);
        r.resolve();
        assert_eq!((r.found.mismatches, r.found.excused), (1, 2));
        // With only w3 failed, w1's data is stale, not excused.
        let mut r = Reference::new(4);
        let w1 = r.write_prev(1, 0, 64, &mut prev);
        let w2 = r.write_prev(1, 0, 64, &mut prev);
        let w3 = r.write_prev(1, 0, 64, &mut prev);
        r.check_read(1, 0, &data(w1), &[w3]);
        r.check_read(1, 0, &data(w2), &[w3]);
        r.write_failed(1, 0, w3, w2);
        r.resolve();
        assert_eq!((r.found.mismatches, r.found.excused), (1, 1));
        assert!(r.found.first_problems[0].contains("differs"));
    }

    /// Memory as the completers left it: `writes` are (dst, addr, write ID) of 64 B lines.
    fn memory_with(writes: &[(u32, u64, u32)]) -> SparseMem {
        let mut m = SparseMem::new(1 << 30);
        for &(dst, addr, wid) in writes {
            let mut d = [0u8; 64];
            pattern(wid, dst, addr, &mut d);
            m.of(dst).write(addr, &d, &ByteEnables::ALL).unwrap();
        }
        m
    }

    #[test]
    fn audit_finds_lost_stale_stray_and_corrupt_writes() {
        let mut r = Reference::new(4);
        let mut prev = [0u32; 4];
        let w1 = r.write_prev(1, 256, 128, &mut prev);
        let w2 = r.write_prev(1, 256, 64, &mut prev);
        let w3 = r.write_prev(2, 512, 64, &mut prev);
        // Every write landed, in order; the atomic counter moved (not the audit's business).
        let mut m = memory_with(&[(1, 256, w1), (1, 320, w1), (1, 256, w2), (2, 512, w3)]);
        m.of(3)
            .write(
                crate::workload::ATOMIC_COUNTER_ADDR,
                &[5, 0, 0, 0, 0, 0, 0, 0],
                &ByteEnables::ALL,
            )
            .unwrap();
        let mut ok = clone_of(&r);
        ok.audit(&m);
        assert!(ok.found.ok(), "{:?}", ok.found);
        // Four lines per written block (two blocks of the writes, the counter's minus its line).
        assert_eq!(ok.found.lines_audited, 4 + 4 + 3);

        // The second write lost: line 256 still holds w1.
        let lost = memory_with(&[(1, 256, w1), (1, 320, w1), (2, 512, w3)]);
        let mut a = clone_of(&r);
        a.audit(&lost);
        assert_eq!(a.found.memory_mismatches, 1, "{:?}", a.found);
        assert!(!a.found.ok());
        assert!(a.found.first_problems[0].contains("accelerator 1 line 0x100"));

        // A stray write into a block no write was issued to, and a flipped byte.
        let mut stray = memory_with(&[(1, 256, w1), (1, 320, w1), (1, 256, w2), (2, 512, w3)]);
        stray
            .of(0)
            .write(4096, &[1; 64], &ByteEnables::ALL)
            .unwrap();
        let mut bad = stray.line(2, 512);
        bad[17] ^= 0x10;
        stray.of(2).write(512, &bad, &ByteEnables::ALL).unwrap();
        let mut a = clone_of(&r);
        a.audit(&stray);
        assert_eq!(a.found.memory_mismatches, 2, "{:?}", a.found);

        // The second write reported failed: a line holding w1 is excused, and so is one holding
        // w2; garbage is not.
        let mut f = clone_of(&r);
        f.write_failed(1, 256, w2, w1);
        f.audit(&lost);
        assert_eq!((f.found.memory_mismatches, f.found.memory_excused), (0, 1));
        let mut f2 = clone_of(&r);
        f2.write_failed(1, 256, w2, w1);
        let mut g = memory_with(&[(1, 320, w1), (2, 512, w3)]);
        g.of(1).write(256, &[3; 64], &ByteEnables::ALL).unwrap();
        f2.audit(&g);
        assert_eq!(
            (f2.found.memory_mismatches, f2.found.memory_excused),
            (1, 0)
        );
    }

    /// A copy of the reference's records (the audit consumes nothing, but each case wants
    /// fresh findings).
    fn clone_of(r: &Reference) -> Reference {
        Reference {
            blocks: r.blocks.clone(),
            next_wid: r.next_wid,
            atomics: r.atomics.clone(),
            failed_writes: r.failed_writes.clone(),
            suspects: Vec::new(),
            found: Integrity::default(),
        }
    }

    #[test]
    fn failed_atomics_widen_the_counter_check() {
        // Two atomics answered 0 and 1, one failed: the counter may be 2 or 3.
        for (c, ok) in [(2, true), (3, true), (1, false), (4, false)] {
            let mut r = Reference::new(1);
            r.atomic_done(0, 0);
            r.atomic_done(0, 1);
            r.atomic_failed(0);
            r.check_atomics(|_| c);
            assert_eq!(r.found.atomic_errors == 0, ok, "counter {c}");
        }
        // With the failed one applied first, the answers are 1 and 2: allowed at 3 only.
        let mut r = Reference::new(1);
        r.atomic_done(0, 1);
        r.atomic_done(0, 2);
        r.atomic_failed(0);
        r.check_atomics(|_| 2);
        assert_eq!(r.found.atomic_errors, 1);
        r.found.atomic_errors = 0;
        r.check_atomics(|_| 3);
        assert_eq!(r.found.atomic_errors, 0);
    }

    #[test]
    fn atomics_are_checked_by_count_and_sum() {
        let mut r = Reference::new(2);
        for old in [0, 2, 1] {
            r.atomic_done(1, old);
        }
        r.check_atomics(|d| if d == 1 { 3 } else { 0 });
        assert!(r.found.ok());
        r.atomic_done(0, 5);
        r.check_atomics(|_| 1);
        assert_eq!(r.found.atomic_errors, 2);
    }
}
