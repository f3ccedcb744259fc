//! Which Arbor source an ownerReference names: the group and the kind must both be Arbor's.

use arbor_policy::ownership::OwningSourceKind;

#[test]
fn an_owner_reference_is_arbors_only_in_arbors_group_and_kind() {
    let cases: [(&str, &str, Option<OwningSourceKind>); 9] = [
        (
            "arbor.dev/v1alpha1",
            "GitTrack",
            Some(OwningSourceKind::GitTrack),
        ),
        (
            "arbor.dev/v1alpha1",
            "ClusterGitTrack",
            Some(OwningSourceKind::ClusterGitTrack),
        ),
        ("arbor.dev/v2", "GitTrack", Some(OwningSourceKind::GitTrack)),
        ("other.example/v1alpha1", "GitTrack", None),
        ("other.example/v1", "ClusterGitTrack", None),
        ("arbor.dev.example/v1alpha1", "GitTrack", None),
        ("arbor.dev/v1alpha1", "GitTrackObject", None),
        ("v1", "GitTrack", None),
        ("apps/v1", "ReplicaSet", None),
    ];
    for (api_version, kind, expected) in cases {
        assert_eq!(
            OwningSourceKind::named_by("arbor.dev", api_version, kind),
            expected,
            "{api_version} {kind}"
        );
    }
}

/// The inventory split of a source's tracking objects: whose each one is, from its
/// ownerReferences (uid, controller).
#[test]
fn a_tracking_object_is_the_sources_another_holders_or_nobodys() {
    use arbor_policy::ownership::{OwnerRef, TrackingHolder};
    let ours = "uid-ours";
    let reference = |uid, controller| OwnerRef { uid, controller };
    let cases: [(&str, Vec<OwnerRef<'_>>, TrackingHolder); 7] = [
        ("no ownerReference", vec![], TrackingHolder::Unowned),
        (
            "the source as controller",
            vec![reference(ours, true)],
            TrackingHolder::Ours,
        ),
        (
            // Only a controller reference makes a tracking object a source's.
            "the source, not as controller",
            vec![reference(ours, false)],
            TrackingHolder::Unowned,
        ),
        (
            "another controller",
            vec![reference("uid-other", true)],
            TrackingHolder::Another,
        ),
        (
            "another owner, not as controller",
            vec![reference("uid-other", false)],
            TrackingHolder::Unowned,
        ),
        (
            "the source as controller beside another owner",
            vec![reference("uid-other", false), reference(ours, true)],
            TrackingHolder::Ours,
        ),
        (
            "another controller beside the source as plain owner",
            vec![reference(ours, false), reference("uid-other", true)],
            TrackingHolder::Another,
        ),
    ];
    for (case, references, expected) in cases {
        assert_eq!(TrackingHolder::of(references, ours), expected, "{case}");
    }
}
