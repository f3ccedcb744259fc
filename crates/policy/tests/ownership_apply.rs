//! seeds/002 applied to declared objects: which tracking object each becomes, and why the
//! others are ignored (gitsync's `ignoredFiles`).

use arbor_policy::ownership::{
    ClusterGitTrackMode, GitTrackMode, IgnoreReason, NamespaceRestriction, ObjectScope, Owner,
    OwnershipRule, TrackingObject, WatchScope,
};
use serde_json::json;

fn instance(cluster_gittrack: ClusterGitTrackMode, namespace: &str) -> WatchScope {
    WatchScope::from_flags(
        GitTrackMode::Enabled,
        cluster_gittrack,
        namespace.parse().unwrap(),
    )
    .unwrap()
}

fn namespaced(namespace: Option<&str>) -> ObjectScope {
    ObjectScope::Namespaced {
        namespace: namespace.map(Into::into),
    }
}

fn forbidden_rule(result: Result<TrackingObject, IgnoreReason>) -> OwnershipRule {
    match result {
        Err(IgnoreReason::Forbidden { verdict, .. }) => verdict.rule,
        other => panic!("expected the matrix to forbid it, got {other:?}"),
    }
}

#[test]
fn object_scope_comes_from_discovery_and_metadata() {
    let role = json!({"kind": "Role", "metadata": {"name": "r", "namespace": "foo"}});
    assert_eq!(ObjectScope::of(&role, true), namespaced(Some("foo")));
    let unnamespaced = json!({"kind": "Role", "metadata": {"name": "r"}});
    assert_eq!(ObjectScope::of(&unnamespaced, true), namespaced(None));
    let cluster_role = json!({"kind": "ClusterRole", "metadata": {"name": "r", "namespace": "x"}});
    assert_eq!(ObjectScope::of(&cluster_role, false), ObjectScope::Cluster);
}

#[test]
fn gittrack_object_in_its_namespace_becomes_a_gittrackobject_there() {
    let scope = instance(ClusterGitTrackMode::Disabled, "");
    assert_eq!(
        scope.may_apply(&Owner::gittrack("foo"), &namespaced(Some("foo"))),
        Ok(TrackingObject::gittrack_object("foo"))
    );
}

#[test]
fn gittrack_object_without_namespace_defaults_to_the_gittracks() {
    let scope = instance(ClusterGitTrackMode::Disabled, "foo");
    assert_eq!(
        scope.may_apply(&Owner::gittrack("foo"), &namespaced(None)),
        Ok(TrackingObject::gittrack_object("foo"))
    );
}

#[test]
fn gittrack_object_in_another_namespace_is_ignored_cross_namespace() {
    let scope = instance(ClusterGitTrackMode::IncludeNamespaced, "");
    let result = scope.may_apply(&Owner::gittrack("foo"), &namespaced(Some("bar")));
    assert_eq!(
        result.clone().unwrap_err().to_string(),
        "a GitTrack in namespace foo may not own a GitTrackObject in namespace bar: Cross \
         namespace never allowed"
    );
    assert_eq!(
        forbidden_rule(result),
        OwnershipRule::CrossNamespaceNeverAllowed
    );
}

#[test]
fn gittrack_cluster_scoped_object_is_ignored() {
    let scope = instance(ClusterGitTrackMode::IncludeNamespaced, "");
    assert_eq!(
        forbidden_rule(scope.may_apply(&Owner::gittrack("foo"), &ObjectScope::Cluster)),
        OwnershipRule::GitTrackCanNeverOwnClusterScoped
    );
}

#[test]
fn clustergittrack_objects_follow_the_clustergittrack_mode() {
    let include = instance(ClusterGitTrackMode::IncludeNamespaced, "");
    assert_eq!(
        include.may_apply(&Owner::ClusterGitTrack, &namespaced(Some("bar"))),
        Ok(TrackingObject::gittrack_object("bar"))
    );
    assert_eq!(
        include.may_apply(&Owner::ClusterGitTrack, &ObjectScope::Cluster),
        Ok(TrackingObject::ClusterGitTrackObject)
    );
    let exclude = instance(ClusterGitTrackMode::ExcludeNamespaced, "");
    assert_eq!(
        forbidden_rule(exclude.may_apply(&Owner::ClusterGitTrack, &namespaced(Some("bar")))),
        OwnershipRule::ExcludeNamespacedDisallowsNamespaced
    );
    assert_eq!(
        exclude.may_apply(&Owner::ClusterGitTrack, &ObjectScope::Cluster),
        Ok(TrackingObject::ClusterGitTrackObject)
    );
}

#[test]
fn clustergittrack_namespaced_object_without_namespace_is_ignored() {
    let scope = instance(ClusterGitTrackMode::IncludeNamespaced, "");
    assert_eq!(
        scope.may_apply(&Owner::ClusterGitTrack, &namespaced(None)),
        Err(IgnoreReason::NamespaceRequired)
    );
}

#[test]
fn sources_this_instance_does_not_watch_are_not_applied() {
    let foo_only = instance(ClusterGitTrackMode::Disabled, "foo");
    assert_eq!(
        foo_only.may_apply(&Owner::gittrack("bar"), &namespaced(Some("bar"))),
        Err(IgnoreReason::OwnerNotWatched {
            owner: Owner::gittrack("bar")
        })
    );
    assert!(matches!(
        foo_only.may_apply(&Owner::ClusterGitTrack, &ObjectScope::Cluster),
        Err(IgnoreReason::OwnerNotWatched { .. })
    ));
    let cluster_only = WatchScope::from_flags(
        GitTrackMode::Disabled,
        ClusterGitTrackMode::IncludeNamespaced,
        NamespaceRestriction::AllNamespaces,
    )
    .unwrap();
    assert!(matches!(
        cluster_only.may_apply(&Owner::gittrack("foo"), &namespaced(Some("foo"))),
        Err(IgnoreReason::OwnerNotWatched { .. })
    ));
}
