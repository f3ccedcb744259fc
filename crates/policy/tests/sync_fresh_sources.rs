//! Safety rule (DESIGN "Deleting a source", issue 20 item 1): a decision that may delete an
//! object, taken from the sources as cached, is taken again from a fresh LIST of them before
//! it is carried out. A cache behind a watch outage can miss a management conflict another
//! source reported meanwhile; a delete cannot be undone, a release or a wait can.
//!
//! Through the running controller: `crates/gitsync/tests/controller_shards.rs`,
//! `a_deletion_is_confirmed_with_a_fresh_list_of_the_sources`.

use arbor_policy::object::{GroupKind, ObjectKey};
use arbor_policy::sync::prune::{DeletionStep, Disposal, Release};
use arbor_policy::sync::round::{Finalize, Freshness};

#[test]
fn a_finalizer_decision_is_confirmed_from_a_fresh_list_only_when_it_may_delete() {
    let cases = [
        (
            Finalize::ApplyTable {
                sync_declared: true,
            },
            true,
        ),
        // Row 8 deletes nothing, but the table decides it from the live object: confirmed too.
        (
            Finalize::ApplyTable {
                sync_declared: false,
            },
            true,
        ),
        (Finalize::WaitForSourceDeletion, false),
        (Finalize::WaitForRound, false),
        (Finalize::Recreate, false),
        (Finalize::ReleaseToAnotherSource, false),
        (Finalize::WaitForOtherSources, false),
        (Finalize::ReleaseUnowned, false),
        (Finalize::Orphan, false),
    ];
    for (decision, may_delete) in cases {
        assert_eq!(decision.may_delete(), may_delete, "{decision:?}");
        let confirm = Freshness::Cached.to_confirm(decision.may_delete());
        let expected = may_delete.then_some(Freshness::Listed);
        assert_eq!(confirm, expected, "{decision:?}");
        // A decision already made from a fresh list stands.
        assert_eq!(Freshness::Listed.to_confirm(decision.may_delete()), None);
    }
}

#[test]
fn a_deletion_step_is_confirmed_from_a_fresh_list_only_when_it_deletes() {
    let key = |name: &str| ObjectKey {
        group_kind: GroupKind::new("", "ConfigMap"),
        namespace: Some("team".into()),
        name: name.into(),
    };
    let proceed = |now: Vec<(ObjectKey, Disposal)>| DeletionStep::Proceed { now, waiting: 0 };
    let cases = [
        (proceed(vec![(key("a"), Disposal::Delete)]), true),
        (
            proceed(vec![
                (key("a"), Disposal::Release(Release::Orphan)),
                (key("b"), Disposal::Delete),
            ]),
            true,
        ),
        (
            proceed(vec![
                (key("a"), Disposal::Release(Release::Orphan)),
                (
                    key("b"),
                    Disposal::Release(Release::DeclaredBy("GitTrack/t/o".into())),
                ),
                (
                    key("c"),
                    Disposal::Release(Release::HoldsUnmanaged(vec![key("d")])),
                ),
            ]),
            false,
        ),
        (proceed(Vec::new()), false),
        (DeletionStep::Blocked("over the budget".into()), false),
        (DeletionStep::WaitForOtherSources(vec![key("a")]), false),
    ];
    for (step, deletes) in cases {
        assert_eq!(step.deletes(), deletes, "{step:?}");
        let expected = deletes.then_some(Freshness::Listed);
        assert_eq!(
            Freshness::Cached.to_confirm(step.deletes()),
            expected,
            "{step:?}"
        );
    }
}
