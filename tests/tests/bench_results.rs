//! `make bench`'s results writer (`tests/benches/results.sh`): the benchmarks' parts joined
//! into one file, with the verdicts counted, the missed rows repeated first, the failed
//! benchmarks named and the run times summed.

use std::process::Command;

use arbor_e2e::package_root;

const PART_SYNC: &str = "## gitsync: sync\n\n\
| figure | measured | baseline (same run) | target | met? |\n|---|---|---|---|---|\n\
| initial sync: time | 3.00 s | bare kube-rs client: 2.50 s | ≤ 1.5 × baseline | yes |\n\
| commit → applied | 900 ms | 300 ms | ≤ baseline | **no** |\n\n";
const PART_EMU: &str = "## arbor-kube-emu\n\n\
| figure | measured | baseline (same run) | target | met? |\n|---|---|---|---|---|\n\
| creates | 20000 creates/s | — | — | — |\n\n";

fn results(parts: &std::path::Path, benches: &str, failed: &str) -> String {
    let output = Command::new("sh")
        .arg(package_root().join("benches/results.sh"))
        .args([parts.as_os_str(), benches.as_ref(), failed.as_ref()])
        .env_remove("ARBOR_BENCH_LARGE")
        .env_remove("ARBOR_BENCH_SCALE")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn the_parts_are_joined_in_order_under_a_summary_of_the_verdicts_and_the_run_times() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("sync.md"), PART_SYNC).unwrap();
    std::fs::write(dir.path().join("throughput.md"), PART_EMU).unwrap();
    std::fs::write(
        dir.path().join("times"),
        "| release build | 600 s |\n| throughput | 20 s |\n| sync | 40 s |\n",
    )
    .unwrap();
    let text = results(dir.path(), "throughput sync memory", " memory");
    assert!(text.starts_with("# Arbor benchmarks\n"), "{text}");
    assert!(text.contains("Targets met: 1; missed: 1."), "{text}");
    assert!(
        text.contains("Benchmarks that failed (no figures): memory."),
        "{text}"
    );
    // The missed row comes first, in the summary, and again in its benchmark's table.
    assert_eq!(
        text.matches("| commit → applied | 900 ms |").count(),
        2,
        "{text}"
    );
    let summary = text.find("## Summary").unwrap();
    let emulator = text.find("## arbor-kube-emu").unwrap();
    let sync = text.find("## gitsync: sync").unwrap();
    let times = text.find("## Run time").unwrap();
    assert!(
        summary < emulator && emulator < sync && sync < times,
        "{text}"
    );
    assert!(text.contains("| total | 660 s |"), "{text}");
}

#[test]
fn a_run_where_every_target_is_met_lists_no_missed_rows() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("throughput.md"), PART_EMU).unwrap();
    let text = results(dir.path(), "throughput", "");
    assert!(text.contains("Targets met: 0; missed: 0."), "{text}");
    assert!(!text.contains("| missed |"), "{text}");
    assert!(!text.contains("failed"), "{text}");
}

#[test]
fn a_missing_parts_directory_is_named() {
    let output = Command::new("sh")
        .arg(package_root().join("benches/results.sh"))
        .args(["/nonexistent/parts", "sync", ""])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("/nonexistent/parts"), "{stderr}");
}
