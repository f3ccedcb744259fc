//! A controller's first step gives its process at most two malloc arenas: this test binary,
//! started without `MALLOC_ARENA_MAX`, is run again in its own process with it set.

use arbor_runtime::allocator::{ARENA_LIMIT_VARIABLE, ARENAS, limit_malloc_arenas};

#[test]
fn a_process_started_without_an_arena_limit_runs_again_with_two_arenas() {
    // The first run (no variable) never gets past this call: the process is replaced, and
    // the second run, with the variable, returns from it.
    limit_malloc_arenas();
    assert_eq!(
        std::env::var(ARENA_LIMIT_VARIABLE).as_deref(),
        Ok(ARENAS),
        "the process runs with the arena limit"
    );
}
