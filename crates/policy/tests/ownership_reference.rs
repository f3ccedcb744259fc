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
