//! How many malloc arenas a controller process uses.
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
//! 94.2 / 91.3 MiB at 10,000: no better than the default. Two arenas, not one, so that the
//! runtime's two workers on a two-core node do not queue on one lock.
//!
//! The limit is glibc's `MALLOC_ARENA_MAX`, read when malloc starts, so it is given to the
//! process before it starts: [`limit_malloc_arenas`] runs the binary again in its own process
//! (`exec`, the same process id) with the variable set, unless it is already set, which also
//! leaves an operator free to choose another value.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::process::Command;

/// The variable glibc's malloc reads its arena limit from.
pub const ARENA_LIMIT_VARIABLE: &str = "MALLOC_ARENA_MAX";
/// The arenas a controller uses, unless [`ARENA_LIMIT_VARIABLE`] says otherwise.
pub const ARENAS: &str = "2";

/// Restarts this process with [`ARENA_LIMIT_VARIABLE`] set to [`ARENAS`] when it is unset; the
/// first thing a controller's `main` does. Returns only when the variable was already set or
/// the restart failed (then the process goes on with malloc's default, said on stderr: the
/// logger is not set up yet).
pub fn limit_malloc_arenas() {
    if std::env::var_os(ARENA_LIMIT_VARIABLE).is_some() {
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
            .env(ARENA_LIMIT_VARIABLE, ARENAS)
            .exec(),
        Err(error) => error,
    };
    eprintln!(
        "could not restart with {ARENA_LIMIT_VARIABLE}={ARENAS} ({error}); going on with \
         malloc's default arenas"
    );
}
