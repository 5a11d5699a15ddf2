//! The BookSim-comparable mode beyond the reference crossbar: other topologies, pipeline
//! options, determinism, and the command line.

use std::process::Command;

use podlink_sim::booksim::{headline, run, BooksimConfig, Outcome, Sim, SimError};

const CFG: &str = include_str!("data/booksim/xbar16.cfg");

fn latency_and_rate(overrides: &[&str]) -> (f64, f64) {
    let cfg = BooksimConfig::from_text(CFG, overrides).unwrap();
    headline(&run(cfg).unwrap())
}

/// Zero-load latency: 2 cycles per channel (a 1-cycle BookSim channel is read in the cycle
/// after the one it is written in), the router stages after the first (which runs in the
/// arrival cycle), and serialisation of the body. The crossbar: 2 + 3 + 2 = 7, as BookSim's
/// "1 source + 1 channel + route + VA + SA + crossbar + 1 channel".
fn zero_load(routers: f64, packet: f64, per_router: f64) -> f64 {
    2.0 * (routers + 1.0) + (per_router - 1.0) * routers + (packet - 1.0)
}

#[test]
fn zero_load_latency_matches_the_pipeline_for_each_topology() {
    let short = ["sample_period=2000", "injection_rate=0.002"];
    for (topo, hops) in [
        (&["k=8"][..], 1.0),
        (&["k=4", "n=2"][..], 2.0),
        (&["k=2", "n=3"][..], 3.0),
        // Fat tree k=4, n=2: 1 router for a same-leaf destination (1/4), else 3.
        (
            &["topology=fattree", "routing_function=nca", "k=4", "n=2"][..],
            2.5,
        ),
    ] {
        for ps in [1.0, 5.0] {
            let p = format!("packet_size={ps}");
            let mut o: Vec<&str> = topo.to_vec();
            o.extend_from_slice(&short);
            o.push(&p);
            let cfg = BooksimConfig::from_text(CFG, &o).unwrap();
            let Outcome::Done(r) = run(cfg).unwrap() else {
                panic!("{o:?} unstable")
            };
            // The fat tree's hop mix is random: use the mean hop count the run saw.
            let h = r[0].hops.avg();
            assert!((h - hops).abs() < 0.2, "{o:?}: hops {h} vs {hops}");
            let lat = r[0].plat.avg();
            let want = zero_load(h, ps, 4.0);
            assert!((lat - want).abs() < 0.1, "{o:?}: {lat} vs {want}");
        }
    }
}

/// Meshes and tori (kncube.cpp): one router per terminal, minimal dimension-order routes. A
/// mesh's channels take 1 cycle; a torus's router-to-router channels take 2 with
/// `use_noc_latency` (the default), so each of the h - 1 links adds a cycle.
#[test]
fn zero_load_latency_of_meshes_and_tori() {
    let short = ["sample_period=2000", "injection_rate=0.002"];
    // Mean routers per packet under uniform traffic (the source itself included): k = 4
    // mesh, per dimension (0 x 4 + 1 x 6 + 2 x 4 + 3 x 2) / 16 = 1.25; k = 4 torus
    // (0 x 4 + 1 x 8 + 2 x 4) / 16 = 1; plus the first router.
    for (topo, hops, extra_per_link) in [
        (&["topology=mesh", "k=4", "n=2"][..], 3.5, 0.0),
        (&["topology=torus", "k=4", "n=2"][..], 3.0, 1.0),
        (
            &["topology=torus", "k=4", "n=2", "use_noc_latency=0"][..],
            3.0,
            0.0,
        ),
    ] {
        for ps in [1.0, 5.0] {
            let p = format!("packet_size={ps}");
            let mut o: Vec<&str> = topo.to_vec();
            o.extend_from_slice(&short);
            o.extend_from_slice(&["routing_function=dim_order", &p]);
            let cfg = BooksimConfig::from_text(CFG, &o).unwrap();
            let Outcome::Done(r) = run(cfg).unwrap() else {
                panic!("{o:?} unstable")
            };
            // Few packets at this load: the measured mean hop count, checked loosely.
            let h = r[0].hops.avg();
            assert!((h - hops).abs() < 0.4, "{o:?}: hops {h} vs {hops}");
            let lat = r[0].plat.avg();
            let want = zero_load(h, ps, 4.0) + extra_per_link * (h - 1.0);
            assert!((lat - want).abs() < 0.1, "{o:?}: {lat} vs {want}");
        }
    }
}

#[test]
fn pipeline_options_shift_zero_load_latency_as_booksim_does() {
    let base = [
        "sample_period=2000",
        "injection_rate=0.002",
        "packet_size=1",
    ];
    for (opt, per_router) in [
        ("speculative=1", 3.0),
        ("routing_delay=0", 3.0),
        ("vc_alloc_delay=2", 5.0),
        ("internal_speedup=2.0", 2.0),
    ] {
        let mut o = base.to_vec();
        o.push(opt);
        let (lat, _) = latency_and_rate(&o);
        let want = zero_load(1.0, 1.0, per_router);
        assert!((lat - want).abs() < 0.1, "{opt}: {lat} vs {want}");
    }
}

#[test]
fn runs_are_deterministic_and_conserve_flits() {
    let o = [
        "topology=fattree",
        "routing_function=nca",
        "k=4",
        "n=2",
        "packet_size=5",
        "injection_rate=0.4",
        "sample_period=1000",
    ];
    let a = latency_and_rate(&o);
    let b = latency_and_rate(&o);
    assert_eq!(a.0.to_bits(), b.0.to_bits());
    assert_eq!(a.1.to_bits(), b.1.to_bits());
    let cfg = BooksimConfig::from_text(CFG, &o).unwrap();
    match run(cfg).unwrap() {
        Outcome::Done(r) => {
            let r = &r[0];
            // Everything injected in the window is accounted for by ejections plus flits
            // still in flight at the window's end (at most a few per node).
            let sent: u64 = r.sent_flits.iter().sum();
            let got: u64 = r.accepted_flits.iter().sum();
            assert!(sent.abs_diff(got) < 16 * 40, "{sent} vs {got}");
            assert!(r.plat.n > 1000);
        }
        Outcome::Unstable { .. } => panic!("0.4 load is stable"),
    }
}

#[test]
fn overload_is_reported_unstable_in_latency_mode() {
    let (lat, acc) = latency_and_rate(&["injection_rate=0.9", "sample_period=1000"]);
    assert!(lat.is_infinite());
    assert!(acc > 0.5 && acc < 0.75, "{acc}");
}

fn cli(args: &[&str]) -> (i32, String, String) {
    let cfg = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/booksim/xbar16.cfg");
    let out = Command::new(env!("CARGO_BIN_EXE_podlink-sim"))
        .arg("booksim")
        .arg(cfg)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn command_line_prints_booksim_lines() {
    let (code, out, _) = cli(&["injection_rate=0.05", "sample_period=2000", "--quiet"]);
    assert_eq!(code, 0);
    assert_eq!(out.matches("Packet latency average = ").count(), 1, "{out}");
    assert_eq!(
        out.matches("Accepted flit rate average = ").count(),
        1,
        "{out}"
    );
}

/// An `anynet` configuration run from another working directory finds its network file beside
/// it, and prints BookSim's block (the sweep compares its figures with BookSim2's).
#[test]
fn anynet_runs_from_anywhere() {
    let cfg = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/booksim/sweep/anynet_k4.cfg"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_podlink-sim"))
        .current_dir(std::env::temp_dir())
        .args(["booksim", cfg, "sample_period=200", "--quiet"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("Hops average = "), "{text}");
}

#[test]
fn command_line_errors_name_the_key_and_exit_2() {
    for (arg, key) in [
        ("bogus_key=3", "bogus_key"),
        ("topology=anynet", "routing_function"),
        ("topology=anynet routing_function=min", "network_file"),
        ("topology=flatfly", "routing_function"),
        ("topology=dragonflynew", "routing_function"),
        ("topology=torus", "routing_function"),
        ("traffic=hotspot(99)", "traffic"),
        ("vc_allocator=select(2)", "vc_allocator"),
        ("sw_allocator=islip(0)", "sw_allocator"),
        ("num_vcs=0", "num_vcs"),
        ("--frobnicate", "--frobnicate"),
    ] {
        let args: Vec<&str> = arg.split(' ').collect();
        let (code, _, err) = cli(&args);
        assert_eq!(code, 2, "{arg}");
        assert!(err.contains(key), "{arg}: {err}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_podlink-sim"))
        .args(["booksim", "/nonexistent.cfg"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.cfg"));
}

/// BookSim2's own example configurations (`tests/data/booksim/examples/`, their settings as
/// shipped in BookSim2 master): the fat tree, which holds the switch for the rest of a packet
/// and sends watch output to standard output, runs as BookSim2 28f4329 does, to its printed
/// digits; the dragonfly parses (its 1,056 terminals run for minutes in a debug build).
#[test]
fn booksim2s_own_examples_run_as_booksim2_does() {
    let dir = format!("{}/tests/data/booksim/examples", env!("CARGO_MANIFEST_DIR"));
    let text = |name: &str| std::fs::read_to_string(format!("{dir}/{name}")).unwrap();
    let cfg = BooksimConfig::from_text(&text("fattree_config"), &[]).unwrap();
    assert!(cfg.router.hold_switch_for_packet);
    let (lat, acc) = headline(&run(cfg).unwrap());
    // BookSim prints 6 significant digits.
    let same = |a: f64, b: f64| ((a - b) / b).abs() < 5e-6;
    assert!(same(lat, 27.5504) && same(acc, 0.599387), "{lat} {acc}");
    let cfg = BooksimConfig::from_text(&text("dragonflyconfig"), &[]).unwrap();
    assert_eq!(cfg.topology.nodes(), 1056);
    // Request/reply traffic on a concentrated mesh: unstable as shipped in both (BookSim2's
    // last sample accepted 0.0881719), stable at a lower load.
    let cfg = BooksimConfig::from_text(&text("cmeshconfig"), &[]).unwrap();
    assert!(cfg.read_write.is_some());
    let (lat, acc) = headline(&run(cfg).unwrap());
    assert!(lat.is_infinite() && same(acc, 0.0881719), "{lat} {acc}");
    let cfg = BooksimConfig::from_text(&text("cmeshconfig"), &["injection_rate=0.05"]).unwrap();
    let (lat, acc) = headline(&run(cfg).unwrap());
    assert!(same(lat, 36.3137) && same(acc, 0.101068), "{lat} {acc}");
}

/// BookSim2 runs every topology with k = 1 (a one-terminal mesh, torus or fat tree, a
/// one-terminal fly of n routers in a row); the mode runs them too, with BookSim2's figures
/// (master 28f4329, the same overrides). The 6-terminal dragonfly (p = 1) and the one-router
/// concentrated mesh are in `sweep.csv`.
#[test]
fn one_terminal_networks_run_as_booksim2_does() {
    let same = |a: f64, b: f64| ((a - b) / b).abs() < 5e-6;
    for (topo, lat, acc) in [
        (
            &["topology=mesh", "routing_function=dim_order", "n=2"][..],
            10.1547,
            0.515,
        ),
        (
            &["topology=torus", "routing_function=dim_order", "n=2"][..],
            10.1547,
            0.515,
        ),
        (
            &["topology=fattree", "routing_function=nca", "n=3"][..],
            10.1547,
            0.515,
        ),
        (
            &["topology=fly", "routing_function=dest_tag", "n=3"][..],
            20.1547,
            0.5155,
        ),
    ] {
        let mut o = topo.to_vec();
        o.extend_from_slice(&[
            "k=1",
            "sample_period=1000",
            "packet_size=3",
            "injection_rate=0.5",
        ]);
        let (l, a) = latency_and_rate(&o);
        assert!(same(l, lat) && same(a, acc), "{topo:?}: {l} {a}");
    }
}

/// `on_off` injection with `randperm` traffic and no initial states given: BookSim2 draws
/// them from the generator the permutation left half-restored. Figures of BookSim2 (master
/// 28f4329, the same overrides). With 100 terminals the permutation uses up its buffer, so
/// every source starts off whatever `perm_seed` is, and the two seeds agree, in BookSim2 too.
#[test]
fn on_off_initial_states_after_a_random_permutation_are_booksim2s() {
    let same = |a: f64, b: f64| ((a - b) / b).abs() < 5e-6;
    for (k, seed, lat, acc) in [
        ("k=16", "perm_seed=3", 8.20439, 0.299812),
        ("k=16", "perm_seed=11", 8.20244, 0.296729),
        ("k=100", "perm_seed=3", 8.21365, 0.297687),
        ("k=100", "perm_seed=11", 8.21365, 0.297687),
    ] {
        let o = [
            k,
            seed,
            "traffic=randperm",
            "injection_process=on_off",
            "sample_period=1000",
            "injection_rate=0.3",
            "packet_size=2",
        ];
        let (l, a) = latency_and_rate(&o);
        assert!(same(l, lat) && same(a, acc), "{o:?}: {l} {a}");
    }
}

/// Request/reply traffic (`use_read_write = 1`): BookSim2's figures (master 28f4329, the same
/// overrides) with its default sizes and VC ranges over 16 VCs, with 4-flit write requests and
/// read replies and mostly writes, with ranges of its own over 4 VCs (the two replies
/// sharing VC 3) under on/off injection, and on the 6-terminal dragonfly, whose routing
/// ignores the ranges.
#[test]
fn request_reply_traffic_runs_as_booksim2_does() {
    let same = |a: f64, b: f64| ((a - b) / b).abs() < 5e-6;
    let rw = [
        "use_read_write=1",
        "sample_period=1000",
        "injection_rate=0.3",
    ];
    for (extra, lat, acc) in [
        (&["num_vcs=16"][..], 7.88691, 0.303854),
        (
            &[
                "num_vcs=16",
                "write_fraction=0.75",
                "read_reply_size=4",
                "write_request_size=4",
            ][..],
            11.01,
            0.306188,
        ),
        (
            &[
                "num_vcs=4",
                "read_request_begin_vc=0",
                "read_request_end_vc=1",
                "write_request_begin_vc=0",
                "write_request_end_vc=1",
                "read_reply_begin_vc=2",
                "read_reply_end_vc=3",
                "write_reply_begin_vc=3",
                "write_reply_end_vc=3",
                "injection_process=on_off",
            ][..],
            8.1932,
            0.299646,
        ),
        // min_dragonflynew ignores the ranges (BookSim's defaults reach VC 15 of these 4).
        (
            &[
                "topology=dragonflynew",
                "routing_function=min",
                "k=1",
                "n=1",
                "injection_rate=0.05",
            ][..],
            114.435,
            0.0503,
        ),
    ] {
        let mut o = rw.to_vec();
        o.extend_from_slice(extra);
        let (l, a) = latency_and_rate(&o);
        assert!(same(l, lat) && same(a, acc), "{extra:?}: {l} {a}");
    }
}

/// Several packet sizes (`packet_size = {{...}}` with `packet_size_rate`), each packet's size
/// drawn before its destination: BookSim2's figures (master 28f4329, the same overrides). A
/// flat list `{1,5}` gives the first class its first element only, 1 flit.
#[test]
fn packet_size_mixes_run_as_booksim2_does() {
    let same = |a: f64, b: f64| ((a - b) / b).abs() < 5e-6;
    for (extra, lat, acc) in [
        (&["packet_size={{1,5}}"][..], 19.2358, 0.505609),
        (
            &["packet_size={{1,5}}", "packet_size_rate={{3,1}}"][..],
            14.8765,
            0.504962,
        ),
        (
            &["packet_size={{1,2,8}}", "packet_size_rate=2"][..],
            22.994,
            0.5056,
        ),
        (
            &["packet_size={{1,5}}", "packet_size_rate={{0,1}}"][..],
            24.2665,
            0.504078,
        ),
        (&["packet_size={1,5}"][..], 8.40736, 0.502708),
    ] {
        let mut o = vec!["sample_period=1000", "injection_rate=0.5"];
        o.extend_from_slice(extra);
        let (l, a) = latency_and_rate(&o);
        assert!(same(l, lat) && same(a, acc), "{extra:?}: {l} {a}");
    }
}

/// `run(cfg)` on a thread, failing the test if it has not ended within `secs` seconds (the
/// runs below loop forever in BookSim2; a regression must fail, not hang the suite).
fn run_within(cfg: BooksimConfig, secs: u64) -> Result<Outcome, SimError> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(run(cfg));
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .expect("the run did not end")
}

/// Request/reply traffic on a torus whose reply VC ranges overlap the requests' deadlocks
/// the network. BookSim2 (master 28f4329) runs this throughput simulation forever, emptying
/// the network after its last sample and printing its deadlock warning every 256 cycles;
/// the mode stops with an error once no flit has arrived for far longer than a moving network
/// can go without one.
#[test]
fn a_deadlocked_drain_stops_with_an_error() {
    let text = include_str!("data/booksim/drains/torus_rw_deadlock.cfg");
    let cfg = BooksimConfig::from_text(text, &[]).unwrap();
    match run_within(cfg, 120) {
        Err(SimError::Deadlock {
            in_flight, cycles, ..
        }) => {
            assert!(in_flight > 0 && cycles > 10_000, "{in_flight} {cycles}");
        }
        other => panic!("{:?}", other.map(|o| headline(&o))),
    }
}

/// Request/reply traffic where one source keeps serving replies it owes (a reply does not
/// move a source's clock) and never gets its clock past the drain's start: BookSim2 (master
/// 28f4329, assertion and `-DNDEBUG` builds) drains this latency run forever with no measured
/// flit left; the mode stops with an error.
#[test]
fn a_drain_whose_clocks_stall_stops_with_an_error() {
    let text = include_str!("data/booksim/drains/fly_rw_drain_stall.cfg");
    let cfg = BooksimConfig::from_text(text, &[]).unwrap();
    // The default limit (2^30 cycles) is far beyond the drains BookSim2 does end; lowered
    // here so that the test runs in a moment.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sim = Sim::new(cfg).unwrap();
        sim.limit_drain_stall(50_000);
        let _ = tx.send(sim.run());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(120)) {
        Ok(Err(SimError::DrainStalled {
            sources, cycles, ..
        })) => {
            assert!(sources > 0 && cycles > 50_000, "{sources} {cycles}");
        }
        Ok(other) => panic!("{:?}", other.map(|o| headline(&o))),
        Err(_) => panic!("the run did not end"),
    }
}

/// A request/reply drain that stalls for a while but that BookSim2 (master 28f4329) ends by
/// its latency threshold after about 99,000 drain cycles: unstable in both, not stopped early
/// by the mode's stall limit.
#[test]
fn a_long_request_reply_drain_ends_as_booksim2s_does() {
    let text = include_str!("data/booksim/drains/fattree_rw_long_drain.cfg");
    let cfg = BooksimConfig::from_text(text, &[]).unwrap();
    let (lat, acc) = headline(&run_within(cfg, 120).unwrap());
    assert!(lat.is_infinite(), "{lat}");
    assert!(((acc - 0.331875) / 0.331875).abs() < 5e-6, "{acc}");
}

/// Every terminal sends requests to terminal 0, whose 16-flit replies leave more slowly than
/// requests arrive: the replies it owes pile up. BookSim2 keeps them all (3191.67 cycles,
/// 0.5 accepted at saturation, master 28f4329; the mode gives the same); the mode caps them
/// ([`podlink_sim::booksim::sim::MAX_REPLIES_OWED`] by default) and stops with an error past
/// the cap.
#[test]
fn replies_owed_are_capped() {
    let cfg = || {
        let text = include_str!("data/booksim/sweep/xbar4.cfg");
        let o = [
            "use_read_write=1",
            "num_vcs=16",
            "read_reply_size=16",
            "write_reply_size=16",
            "traffic=hotspot({{0}})",
            "injection_rate_uses_flits=0",
            "injection_rate=1.0",
            "sim_type=throughput",
        ];
        BooksimConfig::from_text(text, &o).unwrap()
    };
    let (lat, acc) = headline(&run(cfg()).unwrap());
    let same = |a: f64, b: f64| ((a - b) / b).abs() < 5e-6;
    assert!(same(lat, 3191.67) && same(acc, 0.5), "{lat} {acc}");
    let mut sim = Sim::new(cfg()).unwrap();
    sim.limit_replies_owed(1000);
    match sim.run() {
        Err(SimError::TooManyReplies { owed, limit, .. }) => {
            assert!(owed > 1000 && limit == 1000, "{owed} {limit}");
        }
        other => panic!("{:?}", other.map(|o| headline(&o))),
    }
}
