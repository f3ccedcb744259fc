//! The one shape of every benchmark's results, so that `make bench` can gather them into
//! `target/bench/results.md` (issue 21 item 6).
//!
//! A benchmark measures figures; each figure stands beside its baseline from the same run (what
//! the same work costs without Arbor, or the same figure at another setting) and the target it
//! is held to. A [`Table`] is one markdown table of such [`Row`]s under a heading:
//!
//! | figure | measured | baseline (same run) | target | met? |
//!
//! [`Table::emit`] prints the table and, when `ARBOR_BENCH_RESULTS` names a file, appends it
//! there too; the Makefile gives each benchmark its own file and joins them.
//!
//! Sizes: every benchmark runs at the sizes the issues name. [`size`] reads a benchmark's own
//! override and the shared divisor `ARBOR_BENCH_SCALE` (a quick run: `ARBOR_BENCH_SCALE=10`);
//! once any size is smaller than the one the targets are set for, the tables of that process
//! show their figures without a verdict, since a target at 10,000 objects says nothing of 1,000.
//! [`large`] tells whether `ARBOR_BENCH_LARGE=1` asks for the large sizes as well (100,000
//! objects), which take longer than `make bench`'s budget allows by default.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::Error;

/// The file each table is appended to, besides standard output.
pub const RESULTS_ENV: &str = "ARBOR_BENCH_RESULTS";
/// The divisor of every size, for a quick run.
pub const SCALE_ENV: &str = "ARBOR_BENCH_SCALE";
/// `1`: run the large sizes too.
pub const LARGE_ENV: &str = "ARBOR_BENCH_LARGE";

/// Set once a size below its full value is chosen: this process's targets are not judged.
static REDUCED: AtomicBool = AtomicBool::new(false);

/// The size of a load: `override_env` if set, else `full` divided by `ARBOR_BENCH_SCALE`
/// (at least 1). A size below `full` turns this process's verdicts off.
pub fn size(override_env: &str, full: usize) -> Result<usize, Error> {
    let chosen = chosen_size(
        (override_env, std::env::var(override_env).ok()),
        std::env::var(SCALE_ENV).ok(),
        full,
    )?;
    if chosen < full {
        REDUCED.store(true, Ordering::Relaxed);
    }
    Ok(chosen)
}

/// The size given the override `(name, value)` and the divisor's value.
fn chosen_size(
    (name, value): (&str, Option<String>),
    scale: Option<String>,
    full: usize,
) -> Result<usize, Error> {
    if let Some(value) = positive(name, value)? {
        return Ok(value);
    }
    Ok((full / positive(SCALE_ENV, scale)?.unwrap_or(1)).max(1))
}

/// Whether `ARBOR_BENCH_LARGE=1` asks for the large sizes.
pub fn large() -> bool {
    std::env::var(LARGE_ENV).is_ok_and(|value| value == "1")
}

/// Whether every size chosen so far is the full one, so the targets apply.
pub fn full_size() -> bool {
    !REDUCED.load(Ordering::Relaxed)
}

fn positive(name: &str, value: Option<String>) -> Result<Option<usize>, Error> {
    let Some(value) = value else {
        return Ok(None);
    };
    match value.trim().parse::<usize>() {
        Ok(number) if number > 0 => Ok(Some(number)),
        _ => Err(Error::Invalid {
            what: format!("environment variable {name}"),
            message: format!("{value:?} is not a positive whole number"),
        }),
    }
}

/// One figure: what was measured, beside its baseline and its target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    figure: String,
    measured: String,
    baseline: String,
    target: String,
    met: Option<bool>,
}

impl Row {
    /// A figure and what was measured, with no baseline and no target yet.
    pub fn new(figure: impl Into<String>, measured: impl Into<String>) -> Row {
        Row {
            figure: figure.into(),
            measured: measured.into(),
            baseline: String::new(),
            target: String::new(),
            met: None,
        }
    }

    /// The baseline measured in the same run.
    pub fn baseline(mut self, baseline: impl Into<String>) -> Row {
        self.baseline = baseline.into();
        self
    }

    /// The target the figure is held to and whether it was met.
    pub fn target(mut self, target: impl Into<String>, met: bool) -> Row {
        self.target = target.into();
        self.met = Some(met);
        self
    }

    /// A target stated for reading only: no verdict (none is set by the issues, or it holds
    /// at another size).
    pub fn context(mut self, target: impl Into<String>) -> Row {
        self.target = target.into();
        self.met = None;
        self
    }
}

/// One markdown table of figures under a heading.
#[derive(Debug, Clone)]
pub struct Table {
    title: String,
    notes: Vec<String>,
    rows: Vec<Row>,
}

impl Table {
    pub fn new(title: impl Into<String>) -> Table {
        Table {
            title: title.into(),
            notes: Vec::new(),
            rows: Vec::new(),
        }
    }

    /// A paragraph under the heading: the load, how the figures are taken.
    pub fn note(&mut self, text: impl Into<String>) -> &mut Table {
        self.notes.push(text.into());
        self
    }

    pub fn row(&mut self, row: Row) -> &mut Table {
        self.rows.push(row);
        self
    }

    /// The table as markdown; `judged` false leaves every verdict out.
    pub fn render(&self, judged: bool) -> String {
        let mut text = format!("## {}\n\n", self.title);
        for note in &self.notes {
            let _ = writeln!(text, "{note}\n");
        }
        if !judged {
            text.push_str(
                "Reduced sizes (ARBOR_BENCH_SCALE or a size override): targets not judged.\n\n",
            );
        }
        text.push_str("| figure | measured | baseline (same run) | target | met? |\n");
        text.push_str("|---|---|---|---|---|\n");
        for row in &self.rows {
            let verdict = match (judged, row.met) {
                (true, Some(true)) => "yes",
                (true, Some(false)) => "**no**",
                _ => "—",
            };
            let _ = writeln!(
                text,
                "| {} | {} | {} | {} | {verdict} |",
                cell(&row.figure),
                cell(&row.measured),
                cell(&row.baseline),
                cell(&row.target),
            );
        }
        text.push('\n');
        text
    }

    /// Prints the table (judged unless a size was reduced) and appends it to the file named by
    /// `ARBOR_BENCH_RESULTS`, if any.
    pub fn emit(&self) -> Result<(), Error> {
        let text = self.render(full_size());
        print!("{text}");
        match std::env::var_os(RESULTS_ENV) {
            Some(path) => append(std::path::Path::new(&path), &text),
            None => Ok(()),
        }
    }
}

fn append(path: &std::path::Path, text: &str) -> Result<(), Error> {
    let what = || format!("appending to {} ({RESULTS_ENV})", path.display());
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(Error::io(what()))?;
    file.write_all(text.as_bytes()).map_err(Error::io(what()))
}

/// An empty cell as a dash; a `|` inside a cell would end it.
fn cell(text: &str) -> String {
    if text.is_empty() {
        "—".into()
    } else {
        text.replace('|', "\\|")
    }
}

/// Milliseconds with one decimal below 10 ms, none above.
pub fn millis(duration: std::time::Duration) -> String {
    let ms = duration.as_secs_f64() * 1000.0;
    if ms < 10.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

/// Seconds with two decimals.
pub fn seconds(duration: std::time::Duration) -> String {
    format!("{:.2} s", duration.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut table = Table::new("gitsync: initial sync");
        table.note("10,000 ConfigMaps.");
        table
            .row(
                Row::new("initial sync", "3.00 s")
                    .baseline("bare client: 2.50 s")
                    .target("≤ 1.5 × baseline", true),
            )
            .row(Row::new("writes", "20,003").target("≤ 20,010", false))
            .row(Row::new("watch latency", "p50 1 ms | p99 2 ms"));
        table
    }

    #[test]
    fn a_table_has_the_five_columns_and_a_verdict_per_judged_row() {
        let text = table().render(true);
        assert!(text.starts_with("## gitsync: initial sync\n\n10,000 ConfigMaps.\n\n"));
        assert!(text.contains("| figure | measured | baseline (same run) | target | met? |\n"));
        assert!(text.contains(
            "| initial sync | 3.00 s | bare client: 2.50 s | ≤ 1.5 × baseline | yes |\n"
        ));
        assert!(text.contains("| writes | 20,003 | — | ≤ 20,010 | **no** |\n"));
        // No target: no verdict; a `|` in a cell is escaped so the row keeps five cells.
        assert!(text.contains("| watch latency | p50 1 ms \\| p99 2 ms | — | — | — |\n"));
    }

    #[test]
    fn an_unjudged_table_says_so_and_gives_no_verdict() {
        let text = table().render(false);
        assert!(text.contains("targets not judged"));
        assert!(
            !text.contains("| yes |") && !text.contains("**no**"),
            "{text}"
        );
    }

    #[test]
    fn each_table_is_appended_to_the_results_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("part.md");
        append(&path, &table().render(true)).unwrap();
        append(&path, &table().render(true)).unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        assert_eq!(written.matches("## gitsync: initial sync").count(), 2);
        assert!(written.contains("| initial sync | 3.00 s |"));
    }

    #[test]
    fn a_results_file_that_cannot_be_written_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing/part.md");
        let message = append(&path, "x").unwrap_err().to_string();
        assert!(message.contains("missing/part.md"), "{message}");
    }

    #[test]
    fn a_size_is_its_override_else_the_full_size_divided_by_the_scale() {
        let name = "ARBOR_BENCH_OBJECTS";
        assert_eq!(chosen_size((name, None), None, 10_000).unwrap(), 10_000);
        assert_eq!(
            chosen_size((name, None), Some("10".into()), 10_000).unwrap(),
            1_000
        );
        assert_eq!(chosen_size((name, None), Some("50".into()), 10).unwrap(), 1);
        let overridden = chosen_size((name, Some("300".into())), Some("10".into()), 10_000);
        assert_eq!(overridden.unwrap(), 300);
    }

    #[test]
    fn a_bad_size_names_its_variable_and_value() {
        let message = chosen_size(("ARBOR_BENCH_OBJECTS", Some("many".into())), None, 10)
            .unwrap_err()
            .to_string();
        assert!(message.contains("ARBOR_BENCH_OBJECTS"), "{message}");
        assert!(message.contains("many"), "{message}");
        let message = chosen_size(("ARBOR_BENCH_OBJECTS", None), Some("0".into()), 10)
            .unwrap_err()
            .to_string();
        assert!(message.contains(SCALE_ENV), "{message}");
    }
}
