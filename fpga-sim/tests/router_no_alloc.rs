//! The router model and the BookSim mode allocate nothing per flit in steady state: after a
//! warm-up, thousands of cycles of traffic run without a single heap allocation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use podlink_sim::router::{Credit, Flit, IqRouter, Route, RouterConfig, RoutingFunction};

struct Counting;

thread_local! {
    // Per thread: only the simulation's own allocations count, not those of the test
    // harness's other threads (a const-initialised `Cell<bool>` needs no allocation).
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}
static ALLOCS: AtomicU64 = AtomicU64::new(0);

fn counting() -> bool {
    COUNTING.try_with(Cell::get).unwrap_or(false)
}

fn set_counting(on: bool) {
    COUNTING.with(|c| c.set(on));
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if counting() {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if counting() {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

struct ToDest(u8);
impl RoutingFunction for ToDest {
    fn route(&mut self, _r: u32, _i: usize, f: &Flit) -> Route {
        Route::new(f.dest as u16, 0, self.0 - 1)
    }
}

/// A 16-port router with sinks that return credits two cycles later and sources that send
/// 3-flit packets whenever their VC has credit; `order_free` selects the one-cycle pipeline
/// (not with `hold`, BookSim's `hold_switch_for_packet`).
fn run_router(cycles: u64, count_from: u64, order_free: bool, hold: bool) -> u64 {
    let cfg = RouterConfig {
        inputs: 16,
        outputs: 16,
        vcs: 4,
        vc_buf_size: 8,
        hold_switch_for_packet: hold,
        ..RouterConfig::default()
    };
    let mut r = IqRouter::new(0, &cfg).unwrap();
    assert_eq!(r.set_order_free_routing(order_free), order_free && !hold);
    let mut credit = [[8u32; 4]; 16];
    let mut pending_credits: Vec<(u64, usize, Credit)> = Vec::with_capacity(1024);
    let mut pending_flits: Vec<(u64, usize, Flit)> = Vec::with_capacity(1024);
    let mut seq = [0u32; 16];
    let mut x = 12345u64;
    let mut sent = 0u64;
    for now in 0..cycles {
        if now == count_from {
            set_counting(true);
        }
        for i in 0..16 {
            let vc = i % 4;
            if credit[i][vc] > 0 {
                let k = seq[i] % 3;
                if k == 0 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                }
                let dest = ((x >> 8) % 16) as u32;
                let mut f = Flit::new(i as u32, dest, k == 0, k == 2);
                f.vc = vc as u8;
                r.handle_flit(i, f).unwrap();
                credit[i][vc] -= 1;
                seq[i] += 1;
            }
        }
        pending_credits.retain(|&(t, o, c)| {
            if t == now {
                r.handle_credit(now, o, c).unwrap();
                false
            } else {
                true
            }
        });
        r.step(now, &mut ToDest(4)).unwrap();
        r.poll_flits(|o, f| {
            pending_flits.push((now, o, f));
            pending_credits.push((now + 2, o, Credit::for_vc(f.vc)));
            sent += 1;
        });
        pending_flits.clear();
        r.poll_credits(|i, c| {
            for (v, slot) in credit[i].iter_mut().enumerate() {
                if c.0 & (1 << v) != 0 {
                    *slot += 1;
                }
            }
        });
    }
    set_counting(false);
    sent
}

/// The whole BookSim mode (engine, terminals, channels, router) on a 16-port crossbar: count
/// allocations over two measured sample periods (the fifth and sixth).
fn run_booksim() -> u64 {
    use podlink_sim::booksim::{BooksimConfig, Sim};
    let cfg = BooksimConfig::from_text(
        include_str!("data/booksim/xbar16.cfg"),
        &[
            "packet_size=5",
            "injection_rate=0.5",
            "sample_period=2000",
            "stopping_thres=-1",
            "acc_stopping_thres=-1",
            "max_samples=6",
        ],
    )
    .unwrap();
    let mut sim = Sim::new(cfg).unwrap();
    sim.on_sample = Some(Box::new(|s| {
        set_counting(s.phase == 4 || s.phase == 5);
    }));
    sim.run().unwrap();
    set_counting(false);
    sim.work().flits
}

#[test]
fn steady_state_allocates_nothing() {
    // One test function: the counter is process-wide.
    for (order_free, hold) in [(false, false), (true, false), (false, true)] {
        let sent = run_router(6000, 1000, order_free, hold);
        assert!(sent > 20_000, "traffic flowed: {sent}");
        assert_eq!(
            ALLOCS.load(Ordering::Relaxed),
            0,
            "router (order-free routing {order_free}, held switch {hold}): allocations in steady state"
        );
    }
    let flits = run_booksim();
    assert!(flits > 20_000, "traffic flowed: {flits}");
    assert_eq!(
        ALLOCS.load(Ordering::Relaxed),
        0,
        "booksim mode: allocations in steady state"
    );
}
