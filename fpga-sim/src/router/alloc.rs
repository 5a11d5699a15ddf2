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
                let o = b.out as usize;
                match self.out_best[o] {
                    None => {
                        self.out_best[o] = Some(Candidate {
                            input: i,
                            pri: b.out_pri,
                        });
                        self.touched_out.push(b.out);
                    }
                    Some(c) => {
                        if supersedes(i, b.out_pri, c.input, c.pri, self.out_ptr[o], self.n_in) {
                            self.out_best[o] = Some(Candidate {
                                input: i,
                                pri: b.out_pri,
                            });
                        }
                    }
                }
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

    #[test]
    fn full_request_table_drops() {
        let mut a = SeparableInputFirst::new(1, 4, 2, 1);
        assert!(a.add(0, req(0)));
        assert!(a.add(0, req(1)));
        assert!(!a.add(0, req(2)));
    }
}
