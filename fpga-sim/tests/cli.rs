//! The `podlink-sim run` / `sweep` command line: byte-identical output folders for the same
//! pod and seed, exit statuses, errors that name the file and line.

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_podlink-sim"))
}

/// Run `podlink-sim ARGS --out DIR`.
fn run_out(args: &[&str], dir: &Path) -> std::process::Output {
    bin().args(args).arg("--out").arg(dir).output().unwrap()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("podlink-sim-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn same_pod_and_seed_write_byte_identical_folders() {
    let (a, b) = (tmp("a"), tmp("b"));
    for d in [&a, &b] {
        let out = run_out(
            &["run", "--preset", "single-switch-16", "--duration", "1us"],
            d,
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let (fa, fb) = (files(&a), files(&b));
    let names: Vec<&str> = fa.iter().map(|(n, _)| n.as_str()).collect();
    for want in [
        "summary.json",
        "latency.csv",
        "latency_cdf.csv",
        "latency_cdf.svg",
        "breakdown.csv",
        "breakdown.svg",
        "accelerators.csv",
        "links.csv",
        "partitions.csv",
        "budgets.csv",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    assert_eq!(fa, fb);
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

#[test]
fn json_summary_and_budget_violation_exit_1() {
    let dir = tmp("pod");
    std::fs::create_dir_all(&dir).unwrap();
    let pod = dir.join("tight.toml");
    std::fs::write(
        &pod,
        "name = \"tight\"\n[topology]\nkind = \"single-switch\"\naccelerators = 4\n[budgets]\nswitch_port_to_port_ns = 20\nread_rtt_ns = 100\n",
    )
    .unwrap();
    let out = bin()
        .args(["run", "--duration", "500ns", "--json"])
        .arg(&pod)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let verdicts: Vec<&str> = v["budgets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["verdict"].as_str().unwrap())
        .collect();
    assert!(verdicts.contains(&"VIOLATED"), "{verdicts:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("VIOLATED"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_exits_2_naming_the_problem() {
    let dir = tmp("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let pod = dir.join("bad.toml");
    // Run a pod file whose last line is `tail`: refused with exit 2; the message.
    let refused = |tail: &str| {
        let head = "name = \"bad\"\n[topology]\nkind = \"single-switch\"\naccelerators = 4\n";
        std::fs::write(&pod, format!("{head}{tail}")).unwrap();
        let out = bin().arg("run").arg(&pod).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{tail}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = refused("[link]\nlanes = 3\n");
    assert!(
        err.contains("bad.toml:6") && err.contains("link.lanes"),
        "{err}"
    );
    // An accelerator model that does not exist: the line and the models that do.
    let err = refused("[accelerator]\nmodel = \"bogus\"\n");
    assert!(
        err.contains("bad.toml:6") && err.contains("bogus") && err.contains("composed"),
        "{err}"
    );
    for args in [
        vec!["run", "--preset", "nope"],
        vec!["run", "--duration", "3 parsecs"],
        vec!["run", "--workload", "sideways"],
        vec!["run", "--load", "1.5"],
        vec!["sweep", "--loads", "0.1,x"],
    ] {
        let out = bin().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_output_folder_that_cannot_be_made_is_refused_before_the_run() {
    let dir = tmp("outfile");
    std::fs::create_dir_all(&dir).unwrap();
    // A plain file where the folder should go, and a folder below it.
    let file = dir.join("taken");
    std::fs::write(&file, b"x").unwrap();
    for (cmd, out) in [
        (vec!["run", "--duration", "1us"], file.clone()),
        (
            vec!["sweep", "--duration", "1us", "--loads", "0.1"],
            file.join("below"),
        ),
    ] {
        let o = run_out(&cmd, &out);
        assert_eq!(o.status.code(), Some(2), "{cmd:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(&*out.to_string_lossy()), "{err}");
        // Nothing simulated: no summary printed.
        assert!(
            o.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sweep_writes_latency_versus_load() {
    let dir = tmp("sweep");
    let out = run_out(
        &[
            "sweep",
            "--preset",
            "single-switch-16",
            "--duration",
            "500ns",
            "--loads",
            "0.1,0.4",
        ],
        &dir,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("0.100") && text.contains("0.400"), "{text}");
    let csv = std::fs::read_to_string(dir.join("latency_vs_load.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 3, "{csv}");
    assert!(std::fs::read_to_string(dir.join("latency_vs_load.svg"))
        .unwrap()
        .starts_with("<svg"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sweep says how many operations failed at each load (an overloaded pod with a short
/// request timeout fails some at full load and none at a light one), and shows no latency for
/// a class of which nothing completed rather than 0.0.
#[test]
fn sweep_reports_failed_operations_per_load() {
    let dir = tmp("sweep-failed");
    let pod = format!(
        "{}/tests/data/pods/overload-short-timeout.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = run_out(
        &["sweep", &pod, "--duration", "2us", "--loads", "0.05,1.0"],
        &dir,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(dir.join("latency_vs_load.csv")).unwrap();
    let failed = |load: &str| -> u64 {
        let row = csv
            .lines()
            .find(|l| l.starts_with(&format!("{load},read,")))
            .unwrap_or_else(|| panic!("{csv}"));
        row.split(',').nth(10).unwrap().parse().unwrap()
    };
    assert!(
        csv.lines().next().unwrap().ends_with(",failed,sound"),
        "{csv}"
    );
    assert_eq!(failed("0.050"), 0, "{csv}");
    assert!(failed("1.000") > 0, "{csv}");
    let text = String::from_utf8_lossy(&out.stdout);
    let full = text
        .lines()
        .find(|l| l.trim_start().starts_with("1.000"))
        .unwrap();
    let cols: Vec<&str> = full.split_whitespace().collect();
    assert_eq!(cols[3], failed("1.000").to_string(), "{text}");
    // The pod issues no atomics: their columns say so.
    assert_eq!(cols[cols.len() - 2..], ["-", "-"], "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A pod file's `[faults]` section is applied by `run`: the summary reports the faults and
/// what they cost, operations reported failed do not fail the run (reads and completions are
/// still checked), the same pod and seed give the same bytes, and a bad event is refused with
/// its line and field.
/// A pod without faults whose operations time out under overload passes (exit 0) and says
/// where every timed-out request went; `--json` carries the same account.
#[test]
fn timeouts_under_overload_exit_0_and_are_accounted() {
    let pod = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/pods/overload-short-timeout.toml"
    );
    let out = bin()
        .args(["run", pod, "--duration", "4us"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("OK (operations timed out, every timed-out request accounted for)"),
        "{text}"
    );
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("timeouts:"))
        .unwrap_or_else(|| panic!("no timeouts line: {text}"));
    let n: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    assert!(n.len() == 4 && n[0] > 0 && n[0] == n[1] + n[2], "{line}");
    let out = bin()
        .args(["run", pod, "--duration", "4us", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let i = &v["integrity"];
    assert_eq!(i["requests_timed_out"].as_u64(), Some(n[0]), "{i}");
    assert_eq!(i["late_responses"].as_u64(), Some(n[1]), "{i}");
    assert_eq!(i["switch_drops"].as_u64(), Some(n[2]), "{i}");
    assert_eq!(i["failed_not_timed_out"].as_u64(), Some(0), "{i}");
}

#[test]
fn pod_file_faults_are_applied() {
    let dir = tmp("faults");
    std::fs::create_dir_all(&dir).unwrap();
    let pod = dir.join("faults.toml");
    let text = r#"name = "leaf-spine with faults"
[topology]
kind = "leaf-spine"
leaves = 2
spines = 2
accels_per_leaf = 4
uplinks_per_spine = 2
[accelerator]
timeout_us = 10
[faults]
[[faults.events]]
at_us = 1
kind = "port-fail"
switch = 2
port = 2
[[faults.events]]
at_us = 0.5
kind = "set-ber"
switch = 0
port = 0
ber = 1e-6
"#;
    std::fs::write(&pod, text).unwrap();
    let run = || {
        bin()
            .arg("run")
            .arg(&pod)
            .args(["--duration", "3us", "--json"])
            .output()
            .unwrap()
    };
    let (a, b) = (run(), run());
    assert_eq!(
        a.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&a.stderr)
    );
    assert_eq!(a.stdout, b.stdout, "same pod and seed, same bytes");
    let j: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    let f = &j["faults"];
    assert_eq!(f["open_at_fault"].as_array().map(Vec::len), Some(2));
    assert!(
        f["flits_lost"].as_u64().unwrap() > 0,
        "the failed port's wire lost flits"
    );
    let text_out = bin()
        .arg("run")
        .arg(&pod)
        .args(["--duration", "3us"])
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&text_out.stdout);
    assert!(s.contains("faults: 2 applied"), "{s}");
    // Without the section the same pod applies nothing.
    std::fs::write(&pod, &text[..text.find("[faults]").unwrap()]).unwrap();
    let out = run();
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(j["faults"].is_null(), "{}", j["faults"]);
    // A bad event: exit 2, file, line and field named.
    std::fs::write(&pod, text.replace("port = 2\n", "port = 2\nvc = 1\n")).unwrap();
    let out = run();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("faults.toml:16") && err.contains("faults.events.0.vc"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--bench` prints its figures (events, TL flits, peak memory, the allocator) on standard
/// error and, with `--out`, into `bench.json`.
#[test]
fn bench_reports_figures_and_allocator() {
    let d = tmp("bench");
    let out = run_out(
        &[
            "run",
            "--preset",
            "single-switch-16",
            "--duration",
            "0.5us",
            "--bench",
        ],
        &d,
    );
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err
        .lines()
        .find(|l| l.starts_with("bench: "))
        .unwrap_or_else(|| panic!("no bench line in {err}"));
    let allocator = if cfg!(all(target_os = "linux", feature = "jemalloc")) {
        "jemalloc"
    } else {
        "system"
    };
    assert!(
        line.contains(" events (") && line.ends_with(&format!("; allocator {allocator}")),
        "{line}"
    );
    let j: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("bench.json")).unwrap()).unwrap();
    assert_eq!(j["allocator"], allocator, "{j}");
    assert!(j["events"].as_u64().is_some_and(|e| e > 0), "{j}");
    assert!(j["tl_flits"].as_u64().is_some_and(|e| e > 0), "{j}");
    let _ = std::fs::remove_dir_all(&d);
}
