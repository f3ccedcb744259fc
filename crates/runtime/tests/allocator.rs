//! A controller's first step sets up its process's malloc: this test binary, started without
//! the variables, is run again in its own process with them set.

use arbor_runtime::allocator::{
    ARENA_LIMIT_VARIABLE, MMAP_THRESHOLD_VARIABLE, MallocSettings, tune_malloc,
};

#[test]
fn a_process_started_without_malloc_settings_runs_again_with_those_it_asks_for() {
    // The first run (no variables) never gets past this call: the process is replaced, and
    // the second run, with the variables, returns from it.
    tune_malloc(MallocSettings {
        arenas: 3,
        mmap_threshold: Some(65536),
    });
    assert_eq!(std::env::var(ARENA_LIMIT_VARIABLE).as_deref(), Ok("3"));
    assert_eq!(
        std::env::var(MMAP_THRESHOLD_VARIABLE).as_deref(),
        Ok("65536")
    );
}
