//! Round-robin arbitration and the separable input-first allocator.
//!
//! The allocator matches requesting inputs to outputs in two arbitration stages: every input
//! first picks one of the outputs it requests (its round-robin arbiter), then every output
//! picks one of the inputs that picked it. A winner advances both arbiters' pointers to one
//! past the party it was matched with; a loser's pointers stay put. This is BookSim's
//! `SeparableInputFirstAllocator` over `RoundRobinArbiter`s (one pass); higher priorities win
//! first and round-robin order breaks ties (`supersedes`).
//!
//! Requests are kept per input in a fixed-capacity table and only touched entries are cleared,
//! so an allocation costs time proportional to the requests, not to inputs x outputs, and
//! allocates no memory.

/// In a round-robin scheme over `size` positions whose highest-priority position is
/// `offset`, does a request at `a` with priority `pa` beat one at `b` with priority `pb`?
#[inline]
pub(crate) fn supersedes(a: u32, pa: i32, b: u32, pb: i32, offset: u32, size: u32) -> bool {
    pa > pb || (pa == pb && rr_dist(a, offset, size) < rr_dist(b, offset, size))
}

#[inline]
fn rr_dist(a: u32, offset: u32, size: u32) -> u32 {
    if a >= offset {
        a - offset
    } else {
        a + size - offset
    }
}

#[derive(Clone, Copy, Default)]
pub(crate) struct Request {
    pub out: u32,
    pub label: i32,
    pub in_pri: i32,
    pub out_pri: i32,
}

#[derive(Clone, Copy)]
struct Candidate {
    input: u32,
    pri: i32,
}

use super::config::AllocatorKind;

const NONE: u32 = u32::MAX;

/// Separable input-first allocator with round-robin arbiters.
pub(crate) struct SeparableInputFirst {
    n_in: u32,
    n_out: u32,
    cap: usize,
    iters: usize,
    reqs: Vec<Request>,
    nreq: Vec<u16>,
    touched_in: Vec<u32>,
    in_ptr: Vec<u32>,
    out_ptr: Vec<u32>,
    inmatch: Vec<u32>,
    outmatch: Vec<u32>,
    matched_in: Vec<u32>,
    matched_out: Vec<u32>,
    out_best: Vec<Option<Candidate>>,
    touched_out: Vec<u32>,
    /// What `allocate` runs.
    kind: SparseKind,
}

/// The algorithm of a [`SeparableInputFirst`] table.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SparseKind {
    InputFirst,
    /// [`SeparableInputFirst::allocate_output_first`].
    OutputFirst,
    /// [`SeparableInputFirst::allocate_islip`].
    Islip,
    /// [`SeparableInputFirst::allocate_islip`] honouring priorities (BookSim's `select`).
    Select,
}

impl SeparableInputFirst {
    /// `n_in` x `n_out` allocator taking at most `cap` requests per input.
    pub fn new(n_in: usize, n_out: usize, cap: usize, iters: usize) -> Self {
        SeparableInputFirst {
            n_in: n_in as u32,
            n_out: n_out as u32,
            cap,
            iters: iters.max(1),
            reqs: vec![Request::default(); n_in * cap],
            nreq: vec![0; n_in],
            touched_in: Vec::with_capacity(n_in),
            in_ptr: vec![0; n_in],
            out_ptr: vec![0; n_out],
            inmatch: vec![NONE; n_in],
            outmatch: vec![NONE; n_out],
            matched_in: Vec::with_capacity(n_in.min(n_out)),
            matched_out: Vec::with_capacity(n_in.min(n_out)),
            out_best: vec![None; n_out],
            touched_out: Vec::with_capacity(n_out),
            kind: SparseKind::InputFirst,
        }
    }

    /// `n_in` x `n_out` iSLIP allocator with `iters` passes, at most `cap` requests per input.
    pub fn new_islip(n_in: usize, n_out: usize, cap: usize, iters: usize) -> Self {
        SeparableInputFirst {
            kind: SparseKind::Islip,
            ..SeparableInputFirst::new(n_in, n_out, cap, iters)
        }
    }

    /// `n_in` x `n_out` separable output-first allocator (one pass), at most `cap` requests
    /// per input.
    pub fn new_output_first(n_in: usize, n_out: usize, cap: usize) -> Self {
        SeparableInputFirst {
            kind: SparseKind::OutputFirst,
            ..SeparableInputFirst::new(n_in, n_out, cap, 1)
        }
    }

    /// `n_in` x `n_out` `select` allocator (one pass), at most `cap` requests per input.
    pub fn new_select(n_in: usize, n_out: usize, cap: usize) -> Self {
        SeparableInputFirst {
            kind: SparseKind::Select,
            ..SeparableInputFirst::new(n_in, n_out, cap, 1)
        }
    }

    /// Forget all requests and grants.
    pub fn clear(&mut self) {
        for &i in &self.touched_in {
            self.nreq[i as usize] = 0;
        }
        self.touched_in.clear();
        for &i in &self.matched_in {
            self.inmatch[i as usize] = NONE;
        }
        for &o in &self.matched_out {
            self.outmatch[o as usize] = NONE;
        }
        self.matched_in.clear();
        self.matched_out.clear();
    }

    #[inline]
    fn slot(&self, input: u32) -> usize {
        input as usize * self.cap
    }

    /// The request from `input` to `out`, if any.
    #[inline]
    pub fn request(&self, input: u32, out: u32) -> Option<Request> {
        let base = self.slot(input);
        let n = self.nreq[input as usize] as usize;
        self.reqs[base..base + n]
            .iter()
            .find(|r| r.out == out)
            .copied()
    }

    /// Add a request (the caller guarantees no request from `input` to `out` exists yet).
    /// Returns false when the input's request table is full (the request is dropped).
    #[inline]
    pub fn add(&mut self, input: u32, req: Request) -> bool {
        let n = self.nreq[input as usize] as usize;
        if n >= self.cap {
            return false;
        }
        if n == 0 {
            self.touched_in.push(input);
        }
        let base = self.slot(input);
        self.reqs[base + n] = req;
        self.nreq[input as usize] = (n + 1) as u16;
        true
    }

    /// Replace the existing request from `input` to `req.out`.
    #[inline]
    pub fn replace(&mut self, input: u32, req: Request) {
        let base = self.slot(input);
        let n = self.nreq[input as usize] as usize;
        if let Some(r) = self.reqs[base..base + n]
            .iter_mut()
            .find(|r| r.out == req.out)
        {
            *r = req;
        }
    }

    /// The output matched to `input`.
    #[inline]
    pub fn output_assigned(&self, input: u32) -> Option<u32> {
        let o = self.inmatch[input as usize];
        (o != NONE).then_some(o)
    }

    /// Run the allocation over the current requests.
    pub fn allocate(&mut self) {
        match self.kind {
            SparseKind::InputFirst => {}
            SparseKind::OutputFirst => return self.allocate_output_first(),
            SparseKind::Islip => return self.allocate_islip(false),
            SparseKind::Select => return self.allocate_islip(true),
        }
        for iter in 0..self.iters {
            self.touched_out.clear();
            for t in 0..self.touched_in.len() {
                let i = self.touched_in[t];
                if self.inmatch[i as usize] != NONE {
                    continue;
                }
                let base = self.slot(i);
                let n = self.nreq[i as usize] as usize;
                let ptr = self.in_ptr[i as usize];
                let mut best: Option<Request> = None;
                for r in &self.reqs[base..base + n] {
                    if iter > 0 && self.outmatch[r.out as usize] != NONE {
                        continue;
                    }
                    best = match best {
                        Some(b)
                            if !supersedes(r.out, r.in_pri, b.out, b.in_pri, ptr, self.n_out) =>
                        {
                            Some(b)
                        }
                        _ => Some(*r),
                    };
                }
                let Some(b) = best else { continue };
                self.offer(b.out, i, b.out_pri);
            }
            if self.touched_out.is_empty() {
                break;
            }
            for t in 0..self.touched_out.len() {
                let o = self.touched_out[t];
                let Some(c) = self.out_best[o as usize].take() else {
                    continue;
                };
                self.inmatch[c.input as usize] = o;
                self.outmatch[o as usize] = c.input;
                self.matched_in.push(c.input);
                self.matched_out.push(o);
                if iter == 0 {
                    self.in_ptr[c.input as usize] = if o + 1 == self.n_out { 0 } else { o + 1 };
                    self.out_ptr[o as usize] = if c.input + 1 == self.n_in {
                        0
                    } else {
                        c.input + 1
                    };
                }
            }
        }
    }
}

impl SeparableInputFirst {
    /// Input `i` bids `pri` for output `out`: the output's arbiter keeps the better of it and
    /// its current candidate (higher priority first, then nearest its round-robin pointer).
    #[inline(always)]
    fn offer(&mut self, out: u32, i: u32, pri: i32) {
        let o = out as usize;
        match self.out_best[o] {
            None => {
                self.out_best[o] = Some(Candidate { input: i, pri });
                self.touched_out.push(out);
            }
            Some(c) => {
                if supersedes(i, pri, c.input, c.pri, self.out_ptr[o], self.n_in) {
                    self.out_best[o] = Some(Candidate { input: i, pri });
                }
            }
        }
    }

    /// BookSim's `SeparableOutputFirstAllocator` (one pass): every output's round-robin
    /// arbiter picks one of the inputs requesting it (higher `out_pri` first, then nearest
    /// its pointer); every input's arbiter picks one of the outputs that picked it (higher
    /// `in_pri` first, then nearest its pointer). A match moves both pointers to one past the
    /// partner.
    fn allocate_output_first(&mut self) {
        self.touched_out.clear();
        for t in 0..self.touched_in.len() {
            let i = self.touched_in[t];
            let base = self.slot(i);
            for k in 0..self.nreq[i as usize] as usize {
                let r = self.reqs[base + k];
                self.offer(r.out, i, r.out_pri);
            }
        }
        for t in 0..self.touched_in.len() {
            let i = self.touched_in[t];
            let base = self.slot(i);
            let ptr = self.in_ptr[i as usize];
            let mut best: Option<Request> = None;
            for r in &self.reqs[base..base + self.nreq[i as usize] as usize] {
                if !matches!(self.out_best[r.out as usize], Some(c) if c.input == i) {
                    continue;
                }
                best = match best {
                    Some(b) if !supersedes(r.out, r.in_pri, b.out, b.in_pri, ptr, self.n_out) => {
                        Some(b)
                    }
                    _ => Some(*r),
                };
            }
            let Some(b) = best else { continue };
            let o = b.out;
            self.inmatch[i as usize] = o;
            self.outmatch[o as usize] = i;
            self.matched_in.push(i);
            self.matched_out.push(o);
            self.in_ptr[i as usize] = if o + 1 == self.n_out { 0 } else { o + 1 };
            self.out_ptr[o as usize] = if i + 1 == self.n_in { 0 } else { i + 1 };
        }
        for t in 0..self.touched_out.len() {
            self.out_best[self.touched_out[t] as usize] = None;
        }
    }

    /// BookSim's `iSLIP_Sparse::Allocate`. Each pass: every unmatched output grants the
    /// unmatched input requesting it that comes first in round-robin order from the output's
    /// grant pointer; every unmatched input accepts, of the outputs that granted it, the
    /// first in round-robin order from its accept pointer. Only first-pass accepts move the
    /// pointers (to one past the partner). Request priorities play no part.
    /// iSLIP (BookSim's `iSLIP_Sparse`): per pass, each free output grants the free input
    /// nearest its pointer, each input accepts the granting output nearest its pointer, and
    /// first-pass accepts move both pointers. With `prio` (BookSim's `SelAlloc`, one pass)
    /// the highest output priority wins the grant and the highest input priority the accept,
    /// the pointers breaking ties.
    fn allocate_islip(&mut self, prio: bool) {
        for iter in 0..self.iters {
            // Grant.
            self.touched_out.clear();
            for t in 0..self.touched_in.len() {
                let i = self.touched_in[t];
                if self.inmatch[i as usize] != NONE {
                    continue;
                }
                let base = self.slot(i);
                for k in 0..self.nreq[i as usize] as usize {
                    let o = self.reqs[base + k].out as usize;
                    if self.outmatch[o] != NONE {
                        continue;
                    }
                    let pri = if prio { self.reqs[base + k].out_pri } else { 0 };
                    match self.out_best[o] {
                        None => {
                            self.out_best[o] = Some(Candidate { input: i, pri });
                            self.touched_out.push(o as u32);
                        }
                        Some(c) => {
                            let ptr = self.out_ptr[o];
                            if supersedes(i, pri, c.input, c.pri, ptr, self.n_in) {
                                self.out_best[o] = Some(Candidate { input: i, pri });
                            }
                        }
                    }
                }
            }
            if self.touched_out.is_empty() {
                break;
            }
            // Accept.
            let before = self.matched_in.len();
            for t in 0..self.touched_in.len() {
                let i = self.touched_in[t];
                if self.inmatch[i as usize] != NONE {
                    continue;
                }
                let base = self.slot(i);
                let ptr = self.in_ptr[i as usize];
                let (mut best, mut best_pri) = (NONE, 0);
                for r in &self.reqs[base..base + self.nreq[i as usize] as usize] {
                    let granted = matches!(self.out_best[r.out as usize], Some(c) if c.input == i);
                    let pri = if prio { r.in_pri } else { 0 };
                    if granted
                        && (best == NONE || supersedes(r.out, pri, best, best_pri, ptr, self.n_out))
                    {
                        (best, best_pri) = (r.out, pri);
                    }
                }
                if best == NONE {
                    continue;
                }
                self.inmatch[i as usize] = best;
                self.outmatch[best as usize] = i;
                self.matched_in.push(i);
                self.matched_out.push(best);
                if iter == 0 {
                    self.in_ptr[i as usize] = if best + 1 == self.n_out { 0 } else { best + 1 };
                    self.out_ptr[best as usize] = if i + 1 == self.n_in { 0 } else { i + 1 };
                }
            }
            for t in 0..self.touched_out.len() {
                self.out_best[self.touched_out[t] as usize] = None;
            }
            if self.matched_in.len() == before {
                // Nothing changed: every further pass would be this one again.
                break;
            }
        }
    }
}

/// Separable input-first allocation for at most 64 inputs and 64 outputs, on bitmasks:
/// the same matches and pointer updates as [`SeparableInputFirst`], each arbitration a few
/// word operations. Tables are fixed 64-entry arrays indexed by masked port numbers, so no
/// access needs a bounds check.
pub(crate) struct DenseSeparable {
    n_in: u32,
    n_out: u32,
    iters: usize,
    in_any: u64,
    in_matched: u64,
    out_matched: u64,
    out_any: u64,
    /// No request has a priority other than `first_pri` (the first request's).
    uniform: bool,
    /// `allocate` (one pass) zeroed `req` and `explicit` as it read them.
    req_consumed: bool,
    first_pri: i32,
    req: [u64; 64],
    /// Per input: requests whose priority differs from `first_pri` (kept in `pri`); the
    /// others have `first_pri`, so with uniform priorities `pri` is never touched.
    explicit: [u64; 64],
    /// Output granted to each input (valid where `in_matched` has the input's bit).
    grant: [u8; 64],
    in_ptr: [u32; 64],
    out_ptr: [u32; 64],
    bidders: [u64; 64],
    bid_pri: [i32; 64],
    /// Per (input, output): the label (a VC, below 64) and priority of the request.
    label: [[u8; 64]; 64],
    pri: [[i32; 64]; 64],
}

/// First set bit of `mask` in round-robin order starting at `ptr`.
#[inline]
fn rr_pick(mask: u64, ptr: u32) -> u32 {
    // Without a branch: rotate `ptr` down to bit 0 and take the first set bit. Positions
    // at or above the arbiter's size are never set, so circular order over 64 positions is
    // round-robin order over the arbiter's. (`mask` is never empty here.)
    let ptr = if ptr < 64 { ptr } else { 0 };
    (mask.rotate_right(ptr).trailing_zeros() + ptr) & 63
}

impl DenseSeparable {
    fn new(n_in: usize, n_out: usize, iters: usize) -> Self {
        debug_assert!(n_in <= 64 && n_out <= 64);
        DenseSeparable {
            n_in: n_in as u32,
            n_out: n_out as u32,
            iters: iters.max(1),
            in_any: 0,
            in_matched: 0,
            out_matched: 0,
            out_any: 0,
            uniform: true,
            req_consumed: false,
            first_pri: 0,
            req: [0; 64],
            explicit: [0; 64],
            grant: [0; 64],
            in_ptr: [0; 64],
            out_ptr: [0; 64],
            bidders: [0; 64],
            bid_pri: [0; 64],
            label: [[0; 64]; 64],
            pri: [[0; 64]; 64],
        }
    }

    #[inline]
    fn clear(&mut self) {
        // A one-pass allocation has already emptied the request words it read.
        let mut m = if self.req_consumed { 0 } else { self.in_any };
        self.req_consumed = false;
        while m != 0 {
            let i = m.trailing_zeros() as usize & 63;
            m &= m - 1;
            self.req[i] = 0;
            self.explicit[i] = 0;
        }
        self.in_any = 0;
        self.in_matched = 0;
        self.out_matched = 0;
        self.uniform = true;
    }

    #[inline(always)]
    pub(crate) fn bid(
        &mut self,
        input: u32,
        out: u32,
        label: u32,
        pri: i32,
        offset: u32,
        labels: u32,
    ) {
        debug_assert!(label < 64);
        let (i, o) = (input as usize & 63, out as usize & 63);
        let bit = 1u64 << o;
        if self.in_any == 0 {
            self.first_pri = pri;
        } else if pri != self.first_pri {
            self.uniform = false;
        }
        if self.req[i] & bit != 0 {
            let old_label = u32::from(self.label[i][o]);
            let old_pri = self.pri_of(i, o);
            if supersedes(label, pri, old_label, old_pri, offset, labels) {
                self.label[i][o] = label as u8;
                self.set_pri(i, o, pri);
            }
            return;
        }
        self.req[i] |= bit;
        self.in_any |= 1u64 << i;
        self.label[i][o] = label as u8;
        // A new request's `explicit` bit is clear (`clear` empties the word of every input
        // that bid).
        if pri != self.first_pri {
            self.explicit[i] |= bit;
            self.pri[i][o] = pri;
        }
    }

    /// [`DenseSeparable::bid`] at priority 0, for callers whose every request has priority
    /// 0 (no priority bookkeeping).
    #[inline(always)]
    pub(crate) fn bid_unprioritised(
        &mut self,
        input: u32,
        out: u32,
        label: u32,
        offset: u32,
        labels: u32,
    ) {
        let (i, o) = (input as usize & 63, out as usize & 63);
        let bit = 1u64 << o;
        if self.req[i] & bit != 0 {
            // Another VC of the input bids for the same output: the one nearer the offset.
            let old = u32::from(self.label[i][o]);
            if rr_dist(label, offset, labels) < rr_dist(old, offset, labels) {
                self.label[i][o] = label as u8;
            }
            return;
        }
        self.req[i] |= bit;
        self.in_any |= 1u64 << i;
        self.label[i][o] = label as u8;
    }

    /// Every match of the last allocation, `(input, output, label)`, in input order.
    #[inline(always)]
    pub(crate) fn for_each_match(&self, mut f: impl FnMut(u32, u32, u32)) {
        let mut m = self.in_matched;
        while m != 0 {
            let i = m.trailing_zeros() as usize & 63;
            m &= m - 1;
            let o = self.grant[i] as usize & 63;
            f(i as u32, o as u32, u32::from(self.label[i][o]));
        }
    }

    /// Priority of the request from input `i` to output `o`.
    #[inline]
    fn pri_of(&self, i: usize, o: usize) -> i32 {
        if self.explicit[i] & (1u64 << o) != 0 {
            self.pri[i][o]
        } else {
            self.first_pri
        }
    }

    #[inline]
    fn set_pri(&mut self, i: usize, o: usize, pri: i32) {
        if pri == self.first_pri {
            self.explicit[i] &= !(1u64 << o);
        } else {
            self.explicit[i] |= 1u64 << o;
            self.pri[i][o] = pri;
        }
    }

    fn allocate(&mut self) {
        if self.iters == 1 && self.uniform {
            // One pass with equal priorities (the common case): each requesting input reads
            // its request word once, so it empties it on the way (`clear` has nothing left
            // to do).
            let mut inputs = self.in_any & !self.in_matched;
            while inputs != 0 {
                let i = inputs.trailing_zeros() as usize & 63;
                inputs &= inputs - 1;
                let m = std::mem::take(&mut self.req[i]) & !self.out_matched;
                self.explicit[i] = 0;
                if m == 0 {
                    continue;
                }
                let o = rr_pick(m, self.in_ptr[i]) as usize & 63;
                self.bidders[o] |= 1u64 << i;
                self.out_any |= 1u64 << o;
            }
            self.req_consumed = true;
            self.match_outputs(0);
            return;
        }
        for iter in 0..self.iters {
            let mut inputs = self.in_any & !self.in_matched;
            while inputs != 0 {
                let i = inputs.trailing_zeros() as usize & 63;
                inputs &= inputs - 1;
                let m = self.req[i] & !self.out_matched;
                if m == 0 {
                    continue;
                }
                let ptr = self.in_ptr[i];
                if self.uniform {
                    // Equal priorities: every input that picks an output is a bidder there
                    // (no branch on who bid first).
                    let o = rr_pick(m, ptr) as usize & 63;
                    self.bidders[o] |= 1u64 << i;
                    self.out_any |= 1u64 << o;
                    continue;
                }
                let (o, p) = {
                    let mut best = NONE;
                    let mut bits = m;
                    while bits != 0 {
                        let o = bits.trailing_zeros();
                        bits &= bits - 1;
                        if best == NONE
                            || supersedes(
                                o,
                                self.pri_of(i, o as usize & 63),
                                best,
                                self.pri_of(i, best as usize & 63),
                                ptr,
                                self.n_out,
                            )
                        {
                            best = o;
                        }
                    }
                    let o = best as usize & 63;
                    (o, self.pri_of(i, o))
                };
                let ob = &mut self.bidders[o];
                if *ob == 0 || p > self.bid_pri[o] {
                    *ob = 1u64 << i;
                    self.bid_pri[o] = p;
                    self.out_any |= 1u64 << o;
                } else if p == self.bid_pri[o] {
                    *ob |= 1u64 << i;
                }
            }
            if self.out_any == 0 {
                break;
            }
            self.match_outputs(iter);
        }
    }

    /// Output stage of pass `iter`: every output with bidders grants one (round-robin).
    #[inline]
    fn match_outputs(&mut self, iter: usize) {
        let mut outs = self.out_any;
        self.out_any = 0;
        while outs != 0 {
            let o = outs.trailing_zeros();
            outs &= outs - 1;
            let ou = o as usize & 63;
            let w = rr_pick(self.bidders[ou], self.out_ptr[ou]);
            self.bidders[ou] = 0;
            let wu = w as usize & 63;
            self.grant[wu] = o as u8;
            self.in_matched |= 1u64 << wu;
            self.out_matched |= 1u64 << ou;
            if iter == 0 {
                self.in_ptr[wu] = if o + 1 == self.n_out { 0 } else { o + 1 };
                self.out_ptr[ou] = if w + 1 == self.n_in { 0 } else { w + 1 };
            }
        }
    }

    /// Every match of the last allocation as `(input, output, label)`, in input order.
    #[inline]
    fn grants_into(&self, out: &mut Vec<(u32, u32, u32)>) {
        let mut m = self.in_matched;
        while m != 0 {
            let i = m.trailing_zeros() as usize & 63;
            m &= m - 1;
            let o = self.grant[i];
            out.push((
                i as u32,
                u32::from(o),
                u32::from(self.label[i][o as usize & 63]),
            ));
        }
    }

    #[inline]
    fn grant(&self, input: u32) -> Option<(u32, u32)> {
        let i = input as usize & 63;
        if self.in_matched & (1u64 << i) == 0 {
            return None;
        }
        let o = self.grant[i];
        Some((u32::from(o), u32::from(self.label[i][o as usize & 63])))
    }
}

/// The switch allocator: a request per (input, output) pair carrying the VC that won the
/// input's per-output VC arbitration, then separable input-first allocation.
pub(crate) enum SwitchAllocator {
    Dense(Box<DenseSeparable>),
    Sparse(Box<SeparableInputFirst>),
    Table(Box<TableAllocator>),
}

impl SwitchAllocator {
    /// `n_in` x `n_out`, at most `cap` requests per input; dense when both fit in a word.
    pub fn new(n_in: usize, n_out: usize, cap: usize, iters: usize) -> Self {
        if n_in <= 64 && n_out <= 64 {
            SwitchAllocator::Dense(Box::new(DenseSeparable::new(n_in, n_out, iters)))
        } else {
            SwitchAllocator::Sparse(Box::new(SeparableInputFirst::new(n_in, n_out, cap, iters)))
        }
    }

    /// An iSLIP allocator (BookSim's `islip`) with `iters` passes.
    pub fn new_islip(n_in: usize, n_out: usize, cap: usize, iters: usize) -> Self {
        SwitchAllocator::Sparse(Box::new(SeparableInputFirst::new_islip(
            n_in, n_out, cap, iters,
        )))
    }

    /// A separable output-first allocator (BookSim's `separable_output_first`).
    pub fn new_output_first(n_in: usize, n_out: usize, cap: usize) -> Self {
        SwitchAllocator::Sparse(Box::new(SeparableInputFirst::new_output_first(
            n_in, n_out, cap,
        )))
    }

    /// A `select` allocator (BookSim's `SelAlloc`, one pass).
    pub fn new_select(n_in: usize, n_out: usize, cap: usize) -> Self {
        SwitchAllocator::Sparse(Box::new(SeparableInputFirst::new_select(n_in, n_out, cap)))
    }

    /// A table allocator (BookSim's `wavefront`, `rr_wavefront`, `max_size`, `loa`, `pim`).
    pub fn new_table(t: TableAllocator) -> Self {
        SwitchAllocator::Table(Box::new(t))
    }

    /// Whether `allocate` must run at every evaluation of a non-empty stage, bids or not
    /// (BookSim's `max_size` moves its start then).
    pub fn allocates_empty(&self) -> bool {
        matches!(self, SwitchAllocator::Table(t) if t.allocates_empty())
    }

    #[cfg(test)]
    fn new_sparse(n_in: usize, n_out: usize, cap: usize, iters: usize) -> Self {
        SwitchAllocator::Sparse(Box::new(SeparableInputFirst::new(n_in, n_out, cap, iters)))
    }

    #[inline]
    pub fn clear(&mut self) {
        match self {
            SwitchAllocator::Dense(d) => d.clear(),
            SwitchAllocator::Sparse(s) => s.clear(),
            SwitchAllocator::Table(w) => w.clear(),
        }
    }

    /// The dense allocator, when this is one (its `bid` inlines into a caller's loop).
    #[inline]
    pub fn dense_mut(&mut self) -> Option<&mut DenseSeparable> {
        match self {
            SwitchAllocator::Dense(d) => Some(d),
            SwitchAllocator::Sparse(_) | SwitchAllocator::Table(_) => None,
        }
    }

    /// Input `input` bids for `out` with VC `label` at priority `pri`; when the input already
    /// bids for `out`, the VC that wins round-robin order from `offset` over `labels` VCs
    /// (higher priority first) keeps the bid.
    #[inline]
    pub fn bid(&mut self, input: u32, out: u32, label: u32, pri: i32, offset: u32, labels: u32) {
        match self {
            SwitchAllocator::Dense(d) => d.bid(input, out, label, pri, offset, labels),
            SwitchAllocator::Sparse(s) => {
                let req = Request {
                    out,
                    label: label as i32,
                    in_pri: pri,
                    out_pri: pri,
                };
                match s.request(input, out) {
                    Some(old) => {
                        if supersedes(label, pri, old.label as u32, old.in_pri, offset, labels) {
                            s.replace(input, req);
                        }
                    }
                    None => {
                        s.add(input, req);
                    }
                }
            }
            SwitchAllocator::Table(w) => match w.request(input, out) {
                // BookSim removes the earlier request and adds the new one.
                Some((old, old_pri)) => {
                    if supersedes(label, pri, old as u32, old_pri, offset, labels) {
                        w.remove(input, out);
                        w.add(input, out, label as i32, pri, pri);
                    }
                }
                None => w.add(input, out, label as i32, pri, pri),
            },
        }
    }

    pub fn allocate(&mut self) {
        self.allocate_drawing(&mut |_| 0);
    }

    /// `Allocate`, for an allocator that draws random numbers (`pim`) from `draw` (BookSim's
    /// `RandomInt(max)`: 0 to `max` inclusive).
    pub fn allocate_drawing(&mut self, draw: &mut dyn FnMut(u32) -> u32) {
        match self {
            SwitchAllocator::Dense(d) => d.allocate(),
            SwitchAllocator::Sparse(s) => s.allocate(),
            SwitchAllocator::Table(w) => w.allocate(draw),
        }
    }

    /// Every match of the last allocation as `(input, output, label)` (the output granted
    /// to the input and the VC label of its request), appended to `out`.
    #[inline]
    pub fn grants_into(&self, out: &mut Vec<(u32, u32, u32)>) {
        match self {
            SwitchAllocator::Dense(d) => d.grants_into(out),
            SwitchAllocator::Sparse(s) => {
                for &i in &s.matched_in {
                    if let Some((o, label)) = self.grant(i) {
                        out.push((i, o, label));
                    }
                }
            }
            SwitchAllocator::Table(w) => {
                for &i in w.matched() {
                    if let Some((o, label)) = w.grant(i) {
                        out.push((i, o, label));
                    }
                }
            }
        }
    }

    /// The output granted to `input` and the VC label of its request.
    #[inline]
    pub fn grant(&self, input: u32) -> Option<(u32, u32)> {
        match self {
            SwitchAllocator::Dense(d) => d.grant(input),
            SwitchAllocator::Sparse(s) => {
                let o = s.output_assigned(input)?;
                s.request(input, o).map(|r| (o, r.label as u32))
            }
            SwitchAllocator::Table(w) => w.grant(input),
        }
    }
}

/// BookSim's `DenseAllocator` state: a request table of `inputs x outputs` (label, -1 for
/// none, and priorities) and the current match.
pub(crate) struct RequestTable {
    n_out: usize,
    /// Label (-1: none) and priorities (in, out) of each `input * n_out + output`.
    req: Vec<(i32, i32, i32)>,
    /// Table entries set since the last `clear`.
    touched: Vec<u32>,
    inmatch: Vec<u32>,
    outmatch: Vec<u32>,
    /// Inputs matched by the last allocation.
    matched_in: Vec<u32>,
}

impl RequestTable {
    fn new(n_in: usize, n_out: usize) -> Self {
        RequestTable {
            n_out,
            req: vec![(-1, 0, 0); n_in * n_out],
            touched: Vec::new(),
            inmatch: vec![NONE; n_in],
            outmatch: vec![NONE; n_out],
            matched_in: Vec::new(),
        }
    }

    /// `DenseAllocator::Clear`: no requests, no matches.
    fn clear(&mut self) {
        for &t in &self.touched {
            self.req[t as usize].0 = -1;
        }
        self.touched.clear();
        for &i in &self.matched_in {
            let o = std::mem::replace(&mut self.inmatch[i as usize], NONE);
            if let Some(m) = self.outmatch.get_mut(o as usize) {
                *m = NONE;
            }
        }
        self.matched_in.clear();
    }

    /// The request of `input` for `out`: its label and input priority.
    fn request(&self, input: u32, out: u32) -> Option<(i32, i32)> {
        let (label, in_pri, _) = self.req[input as usize * self.n_out + out as usize];
        (label >= 0).then_some((label, in_pri))
    }

    fn set(&mut self, input: u32, out: u32, label: i32, in_pri: i32, out_pri: i32) {
        let at = input as usize * self.n_out + out as usize;
        if self.req[at].0 < 0 {
            self.touched.push(at as u32);
        }
        self.req[at] = (label, in_pri, out_pri);
    }

    fn remove(&mut self, input: u32, out: u32) {
        self.req[input as usize * self.n_out + out as usize].0 = -1;
    }

    fn has(&self, input: usize, out: usize) -> bool {
        self.req[input * self.n_out + out].0 >= 0
    }

    /// Match `i` with `o` (`i` newly matched).
    fn pair(&mut self, i: u32, o: u32) {
        self.inmatch[i as usize] = o;
        self.outmatch[o as usize] = i;
        self.matched_in.push(i);
    }

    /// The output matched to `input` and its request's label.
    fn grant(&self, input: u32) -> Option<(u32, u32)> {
        let o = *self.inmatch.get(input as usize)?;
        if o == NONE {
            return None;
        }
        let (label, _, _) = self.req[input as usize * self.n_out + o as usize];
        Some((o, label.max(0) as u32))
    }
}

/// BookSim's `Wavefront` allocator (a `DenseAllocator`): one pass over the request table.
/// Priority classes (out, in) from the highest; within a class the diagonals of the square
/// of side `max(inputs, outputs)` from the rotating `pri`, each diagonal by output; a
/// request whose input and output are both free is matched. `pri` moves on by one after
/// every allocation with requests (`rr_wavefront`: to the diagonal after the first match).
/// As in BookSim, `AddRequest` counts requests for the one-request shortcut and its
/// priority classes even when it replaces an earlier request.
struct Wavefront {
    square: usize,
    skip_diags: bool,
    pri: usize,
    adds: usize,
    last: (u32, u32),
    classes: Vec<(i32, i32)>,
    order: Vec<(u64, u32, u32)>,
}

impl Wavefront {
    fn note_add(&mut self, input: u32, out: u32, in_pri: i32, out_pri: i32) {
        self.adds += 1;
        self.last = (input, out);
        if !self.classes.contains(&(out_pri, in_pri)) {
            self.classes.push((out_pri, in_pri));
        }
    }

    fn allocate(&mut self, t: &mut RequestTable) {
        if self.adds == 0 {
            return;
        }
        let first_diag = if self.adds == 1 {
            let (i, o) = self.last;
            t.pair(i, o);
            (i + o) as usize
        } else {
            // Diagonal p holds input (pri + p - output) mod square: p = (input + output -
            // pri) mod square; within a diagonal, outputs in order.
            let (sq, pri, n_out) = (self.square, self.pri, t.n_out);
            self.classes.sort_unstable_by(|a, b| b.cmp(a));
            let mut first = None;
            for &(out_pri, in_pri) in &self.classes {
                self.order.clear();
                for &at in &t.touched {
                    let (label, ip, op) = t.req[at as usize];
                    if label < 0 || ip != in_pri || op != out_pri {
                        continue;
                    }
                    let (i, o) = (at as usize / n_out, at as usize % n_out);
                    let p = (i + o + 2 * sq - pri) % sq;
                    self.order.push(((p * sq + o) as u64, i as u32, o as u32));
                }
                self.order.sort_unstable();
                for &(_, i, o) in &self.order {
                    if t.inmatch[i as usize] == NONE && t.outmatch[o as usize] == NONE {
                        t.pair(i, o);
                        first.get_or_insert((i + o) as usize);
                    }
                }
            }
            first.unwrap_or(self.pri)
        };
        self.adds = 0;
        self.last = (NONE, NONE);
        self.classes.clear();
        self.pri = ((if self.skip_diags {
            first_diag
        } else {
            self.pri
        }) + 1)
            % self.square;
    }
}

/// BookSim's `MaxSizeMatch` (`max_size`): a maximum matching by repeated shortest augmenting
/// paths, searched breadth-first from the unmatched inputs in order from the rotating
/// `prio`, outputs in order; `prio` moves on by one at every allocation, requests or not.
/// Priorities are not read.
struct MaxSize {
    n_in: usize,
    prio: usize,
    s: Vec<u32>,
    ns: Vec<u32>,
    from: Vec<u32>,
}

impl MaxSize {
    fn allocate(&mut self, t: &mut RequestTable) {
        if !t.touched.is_empty() {
            while self.augment(t) {}
        }
        self.prio = (self.prio + 1) % self.n_in.max(1);
    }

    /// `_ShortestAugmenting`: one augmenting path applied, or `false` when none is left.
    fn augment(&mut self, t: &mut RequestTable) -> bool {
        self.s.clear();
        for k in 0..self.n_in {
            let j = (k + self.prio) % self.n_in;
            if t.inmatch[j] == NONE {
                self.s.push(j as u32);
            }
        }
        // BookSim sizes `_from` by outputs, then `assign`s it by inputs at every search: with
        // more outputs than inputs the entries past the inputs keep their first value, 0,
        // which reads as "reached already", so those outputs are never matched.
        let reset = self.n_in.min(self.from.len());
        self.from[..reset].fill(NONE);
        for _ in 0..self.n_in {
            self.ns.clear();
            for e in 0..self.s.len() {
                let i = self.s[e] as usize;
                for j in 0..t.n_out {
                    if t.has(i, j) && t.inmatch[i] != j as u32 && self.from[j] == NONE {
                        self.from[j] = i as u32;
                        if t.outmatch[j] == NONE {
                            self.flip(t, j);
                            return true;
                        }
                        self.ns.push(t.outmatch[j]);
                    }
                }
            }
            std::mem::swap(&mut self.s, &mut self.ns);
        }
        false
    }

    /// Apply the augmenting path that ends at the free output `j`.
    fn flip(&self, t: &mut RequestTable, mut j: usize) {
        let mut i = self.from[j] as usize;
        t.outmatch[j] = i as u32;
        while t.inmatch[i] != NONE {
            let jn = t.inmatch[i] as usize;
            t.inmatch[i] = j as u32;
            j = jn;
            i = self.from[j] as usize;
            t.outmatch[j] = i as u32;
        }
        t.inmatch[i] = j as u32;
        t.matched_in.push(i as u32);
    }
}

/// BookSim's `LOA` (`loa`, the lonely output allocator): each input requests, of the outputs
/// it wants, the one fewest inputs want (ties: the first from its pointer); each output
/// grants the first requesting input from its pointer; a match moves both pointers on by
/// one.
struct Loa {
    counts: Vec<u32>,
    req: Vec<u32>,
    rptr: Vec<u32>,
    gptr: Vec<u32>,
}

impl Loa {
    fn allocate(&mut self, t: &mut RequestTable) {
        let (n_in, n_out) = (self.req.len(), self.counts.len());
        for (j, c) in self.counts.iter_mut().enumerate() {
            *c = (0..n_in).filter(|&i| t.has(i, j)).count() as u32;
        }
        for (i, r) in self.req.iter_mut().enumerate() {
            let (mut lonely, mut lonely_cnt) = (NONE, n_in as u32 + 1);
            for o in 0..n_out {
                let out = (o + self.rptr[i] as usize) % n_out;
                if t.has(i, out) && self.counts[out] < lonely_cnt {
                    (lonely, lonely_cnt) = (out as u32, self.counts[out]);
                }
            }
            *r = lonely;
        }
        for out in 0..n_out {
            for k in 0..n_in {
                let i = (k + self.gptr[out] as usize) % n_in;
                if self.req[i] == out as u32 {
                    t.pair(i as u32, out as u32);
                    self.rptr[i] = (self.rptr[i] + 1) % n_out as u32;
                    self.gptr[out] = (self.gptr[out] + 1) % n_in as u32;
                    break;
                }
            }
        }
    }
}

/// BookSim's `PIM` (a `DenseAllocator`): per pass, every output grants the first requesting
/// input from a random start among the free inputs (if it is free itself), then every input
/// accepts the first grant from a random start. One draw per output and per input in every
/// pass, requests or not, all `RandomInt`s of the shared generator.
struct Pim {
    iters: usize,
    grants: Vec<u32>,
}

impl Pim {
    fn allocate(&mut self, t: &mut RequestTable, draw: &mut dyn FnMut(u32) -> u32) {
        let (n_in, n_out) = (t.inmatch.len(), t.n_out);
        if n_in == 0 || n_out == 0 {
            return;
        }
        for _ in 0..self.iters {
            self.grants.fill(NONE);
            for o in 0..n_out {
                let start = draw(n_in as u32 - 1) as usize;
                for k in 0..n_in {
                    let i = (k + start) % n_in;
                    if t.has(i, o) && t.inmatch[i] == NONE && t.outmatch[o] == NONE {
                        self.grants[o] = i as u32;
                        break;
                    }
                }
            }
            for i in 0..n_in as u32 {
                let start = draw(n_out as u32 - 1) as usize;
                for k in 0..n_out {
                    let o = (k + start) % n_out;
                    if self.grants[o] == i {
                        t.pair(i, o as u32);
                        break;
                    }
                }
            }
        }
    }
}

enum TableAlgo {
    Wavefront(Wavefront),
    MaxSize(MaxSize),
    Loa(Loa),
    Pim(Pim),
}

/// The allocators that keep BookSim's whole request table (`DenseAllocator`s: wavefront,
/// maximum size, LOA, PIM), for VC or switch allocation.
pub(crate) struct TableAllocator {
    t: RequestTable,
    algo: TableAlgo,
}

impl TableAllocator {
    /// The table allocator of `kind`, if it is one.
    pub fn of(kind: AllocatorKind, n_in: usize, n_out: usize) -> Option<Self> {
        let algo = match kind {
            AllocatorKind::Wavefront { skip_diags } => TableAlgo::Wavefront(Wavefront {
                square: n_in.max(n_out),
                skip_diags,
                pri: 0,
                adds: 0,
                last: (NONE, NONE),
                classes: Vec::new(),
                order: Vec::new(),
            }),
            AllocatorKind::Loa => TableAlgo::Loa(Loa {
                counts: vec![0; n_out],
                req: vec![NONE; n_in],
                rptr: vec![0; n_in],
                gptr: vec![0; n_out],
            }),
            AllocatorKind::Pim { iters } => TableAlgo::Pim(Pim {
                iters,
                grants: vec![NONE; n_out],
            }),
            AllocatorKind::MaxSize => TableAlgo::MaxSize(MaxSize {
                n_in,
                prio: 0,
                s: Vec::with_capacity(n_in),
                ns: Vec::with_capacity(n_in),
                from: vec![0; n_out],
            }),
            _ => return None,
        };
        Some(TableAllocator {
            t: RequestTable::new(n_in, n_out),
            algo,
        })
    }

    /// `DenseAllocator::Clear` (the allocator's own state stays).
    pub fn clear(&mut self) {
        self.t.clear();
    }

    /// The request of `input` for `out`: its label and input priority.
    pub fn request(&self, input: u32, out: u32) -> Option<(i32, i32)> {
        self.t.request(input, out)
    }

    /// `AddRequest`.
    pub fn add(&mut self, input: u32, out: u32, label: i32, in_pri: i32, out_pri: i32) {
        self.t.set(input, out, label, in_pri, out_pri);
        if let TableAlgo::Wavefront(w) = &mut self.algo {
            w.note_add(input, out, in_pri, out_pri);
        }
    }

    /// `RemoveRequest`.
    pub fn remove(&mut self, input: u32, out: u32) {
        self.t.remove(input, out);
    }

    /// `Allocate`; BookSim calls it at every evaluation of a non-empty stage, requests or
    /// not (`max_size` then moves its start, `pim` draws). `pim` draws from `draw`
    /// (`RandomInt(max)`).
    pub fn allocate(&mut self, draw: &mut dyn FnMut(u32) -> u32) {
        match &mut self.algo {
            TableAlgo::Wavefront(w) => w.allocate(&mut self.t),
            TableAlgo::MaxSize(m) => m.allocate(&mut self.t),
            TableAlgo::Loa(l) => l.allocate(&mut self.t),
            TableAlgo::Pim(p) => p.allocate(&mut self.t, draw),
        }
    }

    /// Whether `allocate` changes state (or draws) without requests.
    pub fn allocates_empty(&self) -> bool {
        matches!(self.algo, TableAlgo::MaxSize(_) | TableAlgo::Pim(_))
    }

    /// The output matched to `input` and its request's label.
    pub fn grant(&self, input: u32) -> Option<(u32, u32)> {
        self.t.grant(input)
    }

    /// Inputs matched by the last allocation.
    pub fn matched(&self) -> &[u32] {
        &self.t.matched_in
    }

    /// The rotating start (wavefront's `pri`, max_size's `prio`).
    #[cfg(test)]
    fn start(&self) -> usize {
        match &self.algo {
            TableAlgo::Wavefront(w) => w.pri,
            TableAlgo::MaxSize(m) => m.prio,
            TableAlgo::Loa(l) => l.rptr[0] as usize,
            TableAlgo::Pim(_) => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(out: u32) -> Request {
        Request {
            out,
            label: out as i32,
            in_pri: 0,
            out_pri: 0,
        }
    }

    #[test]
    fn supersedes_round_robin_and_priority() {
        assert!(supersedes(2, 0, 3, 0, 2, 4));
        assert!(!supersedes(1, 0, 3, 0, 2, 4)); // 1 is three places after 2, 3 is one
        assert!(supersedes(1, 5, 3, 0, 2, 4));
    }

    #[test]
    fn input_first_conflict_and_pointer_update() {
        let mut a = SeparableInputFirst::new(2, 2, 2, 1);
        // Both inputs want output 0 only.
        a.add(0, req(0));
        a.add(1, req(0));
        a.allocate();
        assert_eq!(a.output_assigned(0), Some(0));
        assert_eq!(a.output_assigned(1), None);
        a.clear();
        a.add(0, req(0));
        a.add(1, req(0));
        a.allocate();
        // Output 0's pointer moved past input 0.
        assert_eq!(a.output_assigned(1), Some(0));
        assert_eq!(a.output_assigned(0), None);
    }

    #[test]
    fn one_pass_leaves_a_match_on_the_table_more_iterations_find_it() {
        // Input 0 wants outputs 0 and 1, input 1 wants output 0. Both input pointers at 0:
        // both pick output 0, input 0 wins, input 1 loses; output 1 stays idle in one pass.
        for (iters, expect) in [(1, None), (2, None)] {
            let mut a = SeparableInputFirst::new(2, 2, 2, iters);
            a.add(0, req(0));
            a.add(0, req(1));
            a.add(1, req(0));
            a.allocate();
            assert_eq!(a.output_assigned(0), Some(0));
            assert_eq!(a.output_assigned(1), expect);
        }
        // Input 1 wants 0 and 1, input 0 wants 0: iteration 2 gives input 1 output 1.
        let mut a = SeparableInputFirst::new(2, 2, 2, 2);
        a.add(0, req(0));
        a.add(1, req(0));
        a.add(1, req(1));
        a.allocate();
        assert_eq!(a.output_assigned(0), Some(0));
        assert_eq!(a.output_assigned(1), Some(1));
    }

    /// The dense allocator makes the same grants as the sparse one, round after round.
    #[test]
    fn dense_matches_sparse() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for case in 0..200 {
            let n_in = 1 + rnd(20) as usize;
            let n_out = 1 + rnd(20) as usize;
            let labels = 1 + rnd(6) as u32;
            let iters = 1 + (case % 3);
            let mut d = SwitchAllocator::new(n_in, n_out, n_out, iters);
            let mut s = SwitchAllocator::new_sparse(n_in, n_out, n_out, iters);
            assert!(matches!(d, SwitchAllocator::Dense(_)));
            for _round in 0..30 {
                d.clear();
                s.clear();
                for _ in 0..rnd(3 * n_in as u64 + 1) {
                    let (i, o) = (rnd(n_in as u64) as u32, rnd(n_out as u64) as u32);
                    let label = rnd(u64::from(labels)) as u32;
                    let pri = match rnd(4) {
                        0 => i32::MIN,
                        1 => 3,
                        _ => 0,
                    };
                    let off = rnd(u64::from(labels)) as u32;
                    d.bid(i, o, label, pri, off, labels);
                    s.bid(i, o, label, pri, off, labels);
                }
                d.allocate();
                s.allocate();
                for i in 0..n_in as u32 {
                    assert_eq!(d.grant(i), s.grant(i), "case {case} input {i}");
                }
                // The listed matches are exactly the per-input grants.
                let (mut gd, mut gs) = (Vec::new(), Vec::new());
                d.grants_into(&mut gd);
                s.grants_into(&mut gs);
                gs.sort_unstable();
                let each: Vec<(u32, u32, u32)> = (0..n_in as u32)
                    .filter_map(|i| d.grant(i).map(|(o, l)| (i, o, l)))
                    .collect();
                assert_eq!(gd, each, "case {case}");
                assert_eq!(gs, each, "case {case}");
            }
        }
    }

    #[test]
    fn islip_grant_accept_and_pointers() {
        // Both inputs request both outputs; every pointer at 0.
        let both = |a: &mut SeparableInputFirst, pri1: i32| {
            a.clear();
            for i in 0..2 {
                for o in 0..2 {
                    let pri = if i == 1 { pri1 } else { 0 };
                    a.add(
                        i,
                        Request {
                            in_pri: pri,
                            out_pri: pri,
                            ..req(o)
                        },
                    );
                }
            }
            a.allocate();
            (a.output_assigned(0), a.output_assigned(1))
        };
        // One pass: both outputs grant input 0, which accepts output 0; input 1 is left
        // unmatched (input 1's priority plays no part).
        let mut a = SeparableInputFirst::new_islip(2, 2, 2, 1);
        assert_eq!(both(&mut a, 7), (Some(0), None));
        // Pointers moved: output 0 now prefers input 1, input 0 prefers output 1, so the
        // next round matches both.
        assert_eq!(both(&mut a, 0), (Some(1), Some(0)));
        // Two passes: the second matches input 1 to output 1 without moving pointers, so
        // the next round repeats the first.
        let mut a = SeparableInputFirst::new_islip(2, 2, 2, 2);
        assert_eq!(both(&mut a, 0), (Some(0), Some(1)));
        assert_eq!(both(&mut a, 0), (Some(1), Some(0)));
        let mut a = SeparableInputFirst::new_islip(2, 2, 2, 2);
        a.add(0, req(0));
        a.add(1, req(0));
        a.add(1, req(1));
        a.allocate();
        assert_eq!(
            (a.output_assigned(0), a.output_assigned(1)),
            (Some(0), Some(1))
        );
    }

    #[test]
    fn output_first_outputs_choose_then_inputs() {
        // Input 0 wants outputs 0 and 1, input 1 wants output 0; all pointers at 0. Both
        // outputs pick input 0 (output-first), which takes output 0: input 1 gets nothing
        // (input-first would match the same here, but see the priority case below).
        let mut a = SeparableInputFirst::new_output_first(2, 2, 2);
        a.add(0, req(0));
        a.add(0, req(1));
        a.add(1, req(0));
        a.allocate();
        assert_eq!(
            (a.output_assigned(0), a.output_assigned(1)),
            (Some(0), None)
        );
        // Output priorities decide at the outputs: input 1's high `out_pri` wins output 0,
        // so input 0 (pointer now at output 1) takes output 1.
        a.clear();
        a.add(0, req(0));
        a.add(0, req(1));
        a.add(
            1,
            Request {
                out_pri: 5,
                ..req(0)
            },
        );
        a.allocate();
        assert_eq!(
            (a.output_assigned(0), a.output_assigned(1)),
            (Some(1), Some(0))
        );
    }

    /// BookSim's wavefront on a 3 x 3 table: diagonals from the rotating start, each by
    /// output; the start moves by one (rr: past the first match's diagonal); a higher
    /// priority class first; one request alone is granted directly; a replaced request
    /// still counts as two `AddRequest`s.
    #[test]
    fn wavefront_diagonals_priorities_and_rotation() {
        let grants =
            |w: &TableAllocator| (0..3).map(|i| w.grant(i).map(|g| g.0)).collect::<Vec<_>>();
        let wavefront =
            |skip_diags| TableAllocator::of(AllocatorKind::Wavefront { skip_diags }, 3, 3).unwrap();
        let mut w = wavefront(false);
        // Every input wants outputs 0 and 1. Start 0: diagonal 0 holds (0,0), (2,1), (1,2);
        // diagonal 1 (1,0), (0,1), (2,2).
        for i in 0..3 {
            w.add(i, 0, 7, 0, 0);
            w.add(i, 1, 7, 0, 0);
        }
        w.allocate(&mut |_| 0);
        assert_eq!(grants(&w), [Some(0), None, Some(1)]);
        assert_eq!(w.start(), 1);
        // Start 1: diagonal 1 first: (1,0), (0,1).
        w.clear();
        for i in 0..3 {
            w.add(i, 0, 7, 0, 0);
            w.add(i, 1, 7, 0, 0);
        }
        w.allocate(&mut |_| 0);
        assert_eq!(grants(&w), [Some(1), Some(0), None]);
        // A higher class wins whatever the diagonal: input 2's request for output 0.
        w.clear();
        w.add(1, 0, 7, 0, 0);
        w.add(2, 0, 7, 5, 5);
        w.allocate(&mut |_| 0);
        assert_eq!(grants(&w), [None, None, Some(0)]);
        // rr_wavefront: the next start is one past the first match's diagonal (2 + 2).
        let mut rr = wavefront(true);
        rr.add(2, 2, 1, 0, 0);
        rr.allocate(&mut |_| 0);
        assert_eq!(rr.start(), (2 + 2 + 1) % 3);
        // A request replaced: two adds, so the general pass, with the same match.
        rr.clear();
        rr.add(0, 1, 1, 0, 0);
        rr.remove(0, 1);
        rr.add(0, 1, 2, 0, 0);
        rr.allocate(&mut |_| 0);
        assert_eq!(rr.grant(0), Some((1, 2)));
        assert_eq!(rr.start(), 2);
        // No request: nothing moves.
        rr.clear();
        rr.allocate(&mut |_| 0);
        assert_eq!((grants(&rr), rr.start()), (vec![None, None, None], 2));
    }

    /// BookSim's MaxSizeMatch: an augmenting path that moves an earlier match, the search
    /// start rotating at every allocation, with requests or without.
    #[test]
    fn max_size_augments_and_rotates() {
        let mut m = TableAllocator::of(AllocatorKind::MaxSize, 3, 3).unwrap();
        // Input 0 wants outputs 0 and 1, input 1 only output 0: searching from input 0,
        // 0 takes output 0; then input 1 reaches output 0, whose holder moves to output 1.
        m.add(0, 0, 1, 0, 0);
        m.add(0, 1, 1, 0, 0);
        m.add(1, 0, 2, 0, 0);
        m.allocate(&mut |_| 0);
        assert_eq!(
            (m.grant(0), m.grant(1), m.grant(2)),
            (Some((1, 1)), Some((0, 2)), None)
        );
        assert_eq!(m.start(), 1);
        // Two inputs for one output: the search starts at input `prio`.
        m.clear();
        m.add(0, 2, 1, 0, 0);
        m.add(1, 2, 1, 0, 0);
        m.allocate(&mut |_| 0);
        assert_eq!((m.grant(0), m.grant(1)), (None, Some((2, 1))));
        // Without requests the start still moves.
        m.clear();
        m.allocate(&mut |_| 0);
        assert_eq!((m.matched().len(), m.start()), (0, 0));
        // More outputs than inputs: BookSim never reaches the outputs past the inputs.
        let mut m = TableAllocator::of(AllocatorKind::MaxSize, 2, 4).unwrap();
        m.add(0, 3, 1, 0, 0);
        m.add(1, 1, 1, 0, 0);
        m.allocate(&mut |_| 0);
        assert_eq!((m.grant(0), m.grant(1)), (None, Some((1, 1))));
    }

    /// BookSim's LOA: each input asks for its loneliest wanted output, each output grants
    /// from its pointer, and a match moves both pointers on by one.
    /// `select`: iSLIP's pointers, but the highest priority wins the grant and the accept
    /// (a speculative request, at `i32::MIN`, loses to a non-speculative one nearer the
    /// pointer's end); iSLIP itself ignores priorities.
    #[test]
    fn select_honours_priorities_where_islip_does_not() {
        let req = |out: u32, pri: i32| Request {
            out,
            label: 0,
            in_pri: pri,
            out_pri: pri,
        };
        for (select, want_out0, want_in0) in [(false, 0, 0), (true, 1, 1)] {
            let mut a = if select {
                SeparableInputFirst::new_select(2, 2, 2)
            } else {
                SeparableInputFirst::new_islip(2, 2, 2, 1)
            };
            // Output 0: input 0 speculative, input 1 not. Input 0 also asks output 1
            // (speculative) and output 0.
            a.add(0, req(0, i32::MIN));
            a.add(1, req(0, 0));
            a.add(0, req(1, 0));
            a.allocate();
            assert_eq!(a.outmatch[0], want_out0, "select {select}");
            assert_eq!(a.inmatch[0], want_in0, "select {select}");
        }
    }

    /// PIM: one draw per output (over the inputs), then one per input (over the outputs), in
    /// every pass, requests or not; each output grants the first free requesting input from
    /// its draw, each input accepts the first grant from its draw.
    #[test]
    fn pim_draws_for_every_port_in_every_pass() {
        let mut p = TableAllocator::of(AllocatorKind::Pim { iters: 2 }, 3, 2).unwrap();
        let mut seen = Vec::new();
        p.allocate(&mut |m| {
            seen.push(m);
            0
        });
        // No requests: still 2 outputs' and 3 inputs' draws per pass.
        assert_eq!(seen, [2, 2, 1, 1, 1, 2, 2, 1, 1, 1]);
        assert!(p.allocates_empty());
        p.clear();
        // Inputs 0 and 2 both want output 1; input 1 wants output 0 and 1.
        p.add(0, 1, 0, 0, 0);
        p.add(2, 1, 0, 0, 0);
        p.add(1, 0, 0, 0, 0);
        p.add(1, 1, 0, 0, 0);
        // Pass 1: output 0 starts at input 2 (grants 1); output 1 starts at input 2 (grants
        // 2). Input 1 starts at output 1 (no grant there), wraps to output 0: accepts it;
        // input 2 accepts output 1. Pass 2: nothing free is left to match (input 0's only
        // output is taken).
        let mut draws = [2u32, 2, 0, 1, 0, 0, 0, 0, 0, 0].into_iter();
        p.allocate(&mut |_| draws.next().unwrap());
        assert_eq!(draws.next(), None);
        assert_eq!(p.grant(0), None);
        assert_eq!(p.grant(1).map(|g| g.0), Some(0));
        assert_eq!(p.grant(2).map(|g| g.0), Some(1));
    }

    #[test]
    fn loa_prefers_lonely_outputs() {
        let mut l = TableAllocator::of(AllocatorKind::Loa, 3, 3).unwrap();
        // Output 0 is wanted by all three inputs, output 1 by input 0 alone: input 0 asks
        // for 1; inputs 1 and 2 ask for 0, which grants 1 (the first from pointer 0).
        for i in 0..3 {
            l.add(i, 0, 1, 0, 0);
        }
        l.add(0, 1, 1, 0, 0);
        l.allocate(&mut |_| 0);
        assert_eq!(
            (l.grant(0), l.grant(1), l.grant(2)),
            (Some((1, 1)), Some((0, 1)), None)
        );
        assert_eq!(l.start(), 1);
    }

    #[test]
    fn full_request_table_drops() {
        let mut a = SeparableInputFirst::new(1, 4, 2, 1);
        assert!(a.add(0, req(0)));
        assert!(a.add(0, req(1)));
        assert!(!a.add(0, req(2)));
    }
}
