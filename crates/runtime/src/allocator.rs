//! How a controller process's malloc is set up: its arenas, and for gitsync its mmap threshold.
//!
//! glibc's malloc gives threads that allocate at the same time arenas of their own (up to eight
//! per core) and keeps what is freed in an arena for that arena's later allocations. gitsync
//! parses a source on a blocking thread and writes from the runtime's workers, so the memory a
//! large parse freed stayed resident in arenas that later work hardly reused: with one GitTrack
//! of 10,000 ConfigMaps its peak resident set was 96.6 MiB for a live heap of at most 39 MB.
//! Measured with the memory bench (release, each controller its own process), peak / settled:
//!
//! | arenas | 10,000 ConfigMaps | 100,000 ConfigMaps |
//! |---|---|---|
//! | glibc's default (16 on 2 cores) | 96.6 / 93.1 MiB | 717.5 / 681.3 MiB |
//! | 2 | 77.1 / 73.9 MiB | 549.9 / 514.2 MiB |
//! | 1 | — | 473.0 / 436.8 MiB |
//!
//! jemalloc and mimalloc in place of malloc (Debian's builds, preloaded) gave 95.4 / 95.4 and
//! 94.2 / 91.3 MiB at 10,000: no better than the default. Once gitsync's own heap was made
//! smaller (interned keys, shared tracking-record parts), the arenas were the difference at
//! 100,000: two arenas 366.3 / 366.9 MiB, one 311.1 / 284.7 MiB; jemalloc settled lower
//! (252.4) but peaked higher (418.7), mimalloc 468.7 / 282.3. With one arena, a fixed mmap
//! threshold of 32 KiB (glibc raises its threshold to up to 32 MiB after a large block is freed,
//! and then keeps later large blocks, the tables and buffers of a round, in the heap among
//! small ones, where freeing them returns nothing) gave 295.4 / 261.1 MiB (128 KiB: 306.9 /
//! 269.5). The sync bench's times did not move (10,000 objects: initial sync 1.16 × the bare
//! client, against 1.13 × with two arenas; resync 1,170 against 1,241 ms).
//!
//! So each controller gives its settings ([`MallocSettings`]): gitsync one arena and the 32 KiB
//! threshold ([`MallocSettings::HOLDS_EVERY_OBJECT`]), its memory being what it holds of every
//! object it syncs; the others two arenas ([`MallocSettings::ANSWERS_REQUESTS`]), so that the
//! runtime's two workers on a two-core node do not queue on one lock when they answer
//! requests (the webhook above all).
//!
//! The settings are glibc's `MALLOC_ARENA_MAX` and `MALLOC_MMAP_THRESHOLD_`, read when malloc
//! starts, so they are given to the process before it starts: [`tune_malloc`] runs the binary
//! again in its own process (`exec`, the same process id) with the variables set, each unless
//! it is already set, which also leaves an operator free to choose other values.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::process::Command;

/// The variable glibc's malloc reads its arena limit from.
pub const ARENA_LIMIT_VARIABLE: &str = "MALLOC_ARENA_MAX";
/// The variable glibc's malloc reads a fixed mmap threshold from (bytes).
pub const MMAP_THRESHOLD_VARIABLE: &str = "MALLOC_MMAP_THRESHOLD_";

/// A controller's malloc settings (see the module docs for the measurements).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MallocSettings {
    pub arenas: u32,
    /// `None`: glibc's own, adjusted as blocks are freed.
    pub mmap_threshold: Option<u32>,
}

impl MallocSettings {
    /// For a controller whose memory is what it holds of every object it handles (gitsync).
    pub const HOLDS_EVERY_OBJECT: Self = Self {
        arenas: 1,
        mmap_threshold: Some(32 * 1024),
    };
    /// For a controller that mostly answers requests and events.
    pub const ANSWERS_REQUESTS: Self = Self {
        arenas: 2,
        mmap_threshold: None,
    };

    /// The variables these settings give, each with its value.
    fn variables(self) -> Vec<(&'static str, String)> {
        let mut variables = vec![(ARENA_LIMIT_VARIABLE, self.arenas.to_string())];
        if let Some(threshold) = self.mmap_threshold {
            variables.push((MMAP_THRESHOLD_VARIABLE, threshold.to_string()));
        }
        variables
    }
}

/// Restarts this process with the variables of `settings` that are unset; the first thing a
/// controller's `main` does, before its async runtime starts. Returns when every variable was
/// already set, or when the restart failed (then the process goes on with malloc's defaults,
/// said on stderr: the logger is not set up yet).
pub fn tune_malloc(settings: MallocSettings) {
    let missing: Vec<(&str, String)> = settings
        .variables()
        .into_iter()
        .filter(|(variable, _)| std::env::var_os(variable).is_none())
        .collect();
    if missing.is_empty() {
        return;
    }
    let arguments: Vec<OsString> = std::env::args_os().collect();
    let Some((program, rest)) = arguments.split_first() else {
        return;
    };
    let error = match std::env::current_exe() {
        Ok(executable) => Command::new(executable)
            .arg0(program)
            .args(rest)
            .envs(missing.iter().map(|(variable, value)| (variable, value)))
            .exec(),
        Err(error) => error,
    };
    eprintln!(
        "could not restart with the malloc settings {missing:?} ({error}); going on with malloc's defaults"
    );
}
