//! The `podlink-sim run` / `sweep` command line: byte-identical output folders for the same
//! pod and seed, exit statuses, errors that name the file and line.

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_podlink-sim"))
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
        let out = bin()
            .args([
                "run",
                "--preset",
                "single-switch-16",
                "--duration",
                "1us",
                "--out",
            ])
            .arg(d)
            .output()
            .unwrap();
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
    std::fs::write(
        &pod,
        "name = \"bad\"\n[topology]\nkind = \"single-switch\"\naccelerators = 4\n[link]\nlanes = 3\n",
    )
    .unwrap();
    let out = bin().arg("run").arg(&pod).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml:6") && err.contains("link.lanes"),
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
fn sweep_writes_latency_versus_load() {
    let dir = tmp("sweep");
    let out = bin()
        .args([
            "sweep",
            "--preset",
            "single-switch-16",
            "--duration",
            "500ns",
            "--loads",
            "0.1,0.4",
            "--out",
        ])
        .arg(&dir)
        .output()
        .unwrap();
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
