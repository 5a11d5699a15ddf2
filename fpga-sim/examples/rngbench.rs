fn main() {
    let mut r = podlink_sim::booksim::rng::BookSimRng::new(1);
    let t = std::time::Instant::now();
    let mut s = 0.0;
    for _ in 0..20_000_000 {
        s += r.float.fraction();
    }
    let e1 = t.elapsed().as_secs_f64();
    let t = std::time::Instant::now();
    let mut x = 0u64;
    for _ in 0..20_000_000 {
        x += u64::from(r.int.int(63));
    }
    let e2 = t.elapsed().as_secs_f64();
    println!(
        "{s} {x} float {:.2} ns/draw, int {:.2} ns/draw",
        e1 * 1e9 / 2e7,
        e2 * 1e9 / 2e7
    );
}
