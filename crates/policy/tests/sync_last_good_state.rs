//! Safety rule (arbor-gitsync "Safety rules"): a commit that does not parse deletes nothing,
//! and the source keeps its last good state. Which declared state a round syncs, from what the
//! fetch loaded and whether a good state is known, as a table.
//!
//! Through the running controller: `crates/gitsync/tests/controller_safety.rs`,
//! `a_commit_that_does_not_parse_keeps_the_last_good_state_and_deletes_nothing`.

use arbor_policy::sync::round::{CommitLoad, StateToSync, state_to_sync};

#[test]
fn a_round_syncs_the_new_state_or_keeps_the_last_good_one() {
    let cases = [
        // The commit parses: it is the new good state, whatever came before.
        (CommitLoad::Parsed, false, StateToSync::New),
        (CommitLoad::Parsed, true, StateToSync::New),
        // Nothing new was parsed (the same commit): the last good state again, if any.
        (CommitLoad::Unchanged, true, StateToSync::LastGood),
        (CommitLoad::Unchanged, false, StateToSync::Nothing),
        // A commit that does not parse: the last good state stays applied, with the errors
        // reported (and the round's plan deletes nothing); without one, nothing is applied.
        (
            CommitLoad::ParseFailed,
            true,
            StateToSync::LastGoodDespiteErrors,
        ),
        (
            CommitLoad::ParseFailed,
            false,
            StateToSync::StallNothingGood,
        ),
    ];
    for (loaded, last_good_known, expected) in cases {
        assert_eq!(
            state_to_sync(loaded, last_good_known),
            expected,
            "{loaded:?}, last good state known: {last_good_known}"
        );
    }
}
