//! seeds/002, "Resource Ownership Matrix": one test per row and column, with the seed's Foo and
//! Bar namespaces.

use arbor_policy::ownership::{
    ClusterGitTrackMode, MatrixRow, Owner, OwnershipRule, TrackingObject, may_own,
};

const CGTO: TrackingObject = TrackingObject::ClusterGitTrackObject;

const SAME_NAMESPACE: &str = "a GitTrack owns GitTrackObjects in its own namespace";
const CROSS_NAMESPACE: &str = "Cross namespace never allowed";
const CLUSTER_SCOPED: &str = "GitTrack can never own cluster-scoped resource";

/// The cell of a GitTrack in `owner_namespace` for a GitTrackObject in `owned_namespace`, or for
/// a ClusterGitTrackObject when that is `None`. The row does not depend on the ClusterGitTrack
/// mode ("N/A"), so every mode is checked.
fn assert_gittrack_cell(
    owner_namespace: &str,
    owned_namespace: Option<&str>,
    allowed: bool,
    reason: &str,
) {
    let owner = Owner::gittrack(owner_namespace);
    let owned = owned_namespace.map_or(CGTO, TrackingObject::gittrack_object);
    for mode in [
        ClusterGitTrackMode::Disabled,
        ClusterGitTrackMode::IncludeNamespaced,
        ClusterGitTrackMode::ExcludeNamespaced,
    ] {
        let verdict = may_own(&owner, &owned, mode);
        assert_eq!(verdict.row, MatrixRow::GitTrack);
        assert_eq!(verdict.allowed(), allowed, "{owner} / {owned} under {mode}");
        assert_eq!(verdict.reason(), reason);
    }
}

#[test]
fn ownership_matrix_gittrack_foo_owns_gittrackobject_in_foo() {
    assert_gittrack_cell("foo", Some("foo"), true, SAME_NAMESPACE);
}

#[test]
fn ownership_matrix_gittrack_foo_gittrackobject_in_bar_cross_namespace_never_allowed() {
    assert_gittrack_cell("foo", Some("bar"), false, CROSS_NAMESPACE);
}

#[test]
fn ownership_matrix_gittrack_foo_gittrack_can_never_own_cluster_scoped_resource() {
    assert_gittrack_cell("foo", None, false, CLUSTER_SCOPED);
}

#[test]
fn ownership_matrix_gittrack_bar_gittrackobject_in_foo_cross_namespace_never_allowed() {
    assert_gittrack_cell("bar", Some("foo"), false, CROSS_NAMESPACE);
}

#[test]
fn ownership_matrix_gittrack_bar_owns_gittrackobject_in_bar() {
    assert_gittrack_cell("bar", Some("bar"), true, SAME_NAMESPACE);
}

#[test]
fn ownership_matrix_gittrack_bar_gittrack_can_never_own_cluster_scoped_resource() {
    assert_gittrack_cell("bar", None, false, CLUSTER_SCOPED);
}

/// The matrix row of a ClusterGitTrack under `mode`.
fn cluster_gittrack_row(mode: ClusterGitTrackMode) -> MatrixRow {
    match mode {
        ClusterGitTrackMode::ExcludeNamespaced => MatrixRow::ClusterGitTrackExcludeNamespaced,
        ClusterGitTrackMode::IncludeNamespaced => MatrixRow::ClusterGitTrackIncludeNamespaced,
        ClusterGitTrackMode::Disabled => MatrixRow::ClusterGitTrackDisabled,
    }
}

/// A ClusterGitTrack's cell under `mode` for GitTrackObjects, in Foo and in Bar alike.
fn assert_cluster_gittrack_owns_gittrackobjects(
    mode: ClusterGitTrackMode,
    rule: OwnershipRule,
    allowed: bool,
) {
    for namespace in ["foo", "bar"] {
        let owned = TrackingObject::gittrack_object(namespace);
        let verdict = may_own(&Owner::ClusterGitTrack, &owned, mode);
        assert_eq!(verdict.row, cluster_gittrack_row(mode));
        assert_eq!(verdict.rule, rule, "{owned} under {mode}");
        assert_eq!(verdict.allowed(), allowed, "{owned} under {mode}");
    }
}

/// A ClusterGitTrack's cell under `mode` for a ClusterGitTrackObject: always Y.
fn assert_cluster_gittrack_can_always_own_cgto(mode: ClusterGitTrackMode) {
    let verdict = may_own(&Owner::ClusterGitTrack, &CGTO, mode);
    assert_eq!(verdict.row, cluster_gittrack_row(mode));
    assert!(verdict.allowed(), "{verdict}");
    assert_eq!(verdict.reason(), "ClusterGitTracks can always own CGTO");
}

#[test]
fn ownership_matrix_clustergittrack_excludenamespaced_owns_no_gittrackobject() {
    let rule = OwnershipRule::ExcludeNamespacedDisallowsNamespaced;
    assert_cluster_gittrack_owns_gittrackobjects(
        ClusterGitTrackMode::ExcludeNamespaced,
        rule,
        false,
    );
}

#[test]
fn ownership_matrix_clustergittrack_excludenamespaced_clustergittracks_can_always_own_cgto() {
    assert_cluster_gittrack_can_always_own_cgto(ClusterGitTrackMode::ExcludeNamespaced);
}

#[test]
fn ownership_matrix_clustergittrack_includenamespaced_owns_gittrackobjects_in_foo_and_bar() {
    let rule = OwnershipRule::IncludeNamespacedAllowsNamespaced;
    assert_cluster_gittrack_owns_gittrackobjects(
        ClusterGitTrackMode::IncludeNamespaced,
        rule,
        true,
    );
}

#[test]
fn ownership_matrix_clustergittrack_includenamespaced_clustergittracks_can_always_own_cgto() {
    assert_cluster_gittrack_can_always_own_cgto(ClusterGitTrackMode::IncludeNamespaced);
}

#[test]
fn clustergittrack_under_disabled_mode_keeps_cgto_and_owns_no_gittrackobject() {
    assert_cluster_gittrack_can_always_own_cgto(ClusterGitTrackMode::Disabled);
    let rule = OwnershipRule::DisabledDisallowsNamespaced;
    assert_cluster_gittrack_owns_gittrackobjects(ClusterGitTrackMode::Disabled, rule, false);
}

#[test]
fn verdict_display_reads_like_the_matrix_cell() {
    let verdict = may_own(
        &Owner::gittrack("foo"),
        &TrackingObject::gittrack_object("bar"),
        ClusterGitTrackMode::IncludeNamespaced,
    );
    assert_eq!(
        verdict.to_string(),
        "N (Cross namespace never allowed) [GitTrack]"
    );
}
