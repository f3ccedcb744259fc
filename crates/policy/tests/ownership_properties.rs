//! seeds/002's invariants over arbitrary namespaces and modes: "forbid GitTracks from owning
//! cluster scoped resources and ensure that cross namespace management is also disallowed".

use arbor_policy::ownership::{
    ClusterGitTrackMode, GitTrackMode, NamespaceRestriction, ObjectScope, Owner, TrackingObject,
    WatchScope, may_own,
};
use proptest::prelude::*;

fn namespace() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("foo".to_owned()),
        Just("bar".to_owned()),
        "[a-z][a-z0-9-]{0,8}[a-z0-9]"
    ]
}

fn cluster_gittrack_mode() -> impl Strategy<Value = ClusterGitTrackMode> {
    prop_oneof![
        Just(ClusterGitTrackMode::Disabled),
        Just(ClusterGitTrackMode::IncludeNamespaced),
        Just(ClusterGitTrackMode::ExcludeNamespaced),
    ]
}

fn tracking_object() -> impl Strategy<Value = TrackingObject> {
    prop_oneof![
        Just(TrackingObject::ClusterGitTrackObject),
        namespace().prop_map(|namespace| TrackingObject::GitTrackObject {
            namespace: namespace.into()
        }),
    ]
}

fn object_scope() -> impl Strategy<Value = ObjectScope> {
    prop_oneof![
        Just(ObjectScope::Cluster),
        proptest::option::of(namespace())
            .prop_map(|namespace| ObjectScope::Namespaced { namespace }),
    ]
}

fn restriction() -> impl Strategy<Value = NamespaceRestriction> {
    prop_oneof![
        Just(NamespaceRestriction::AllNamespaces),
        namespace().prop_map(NamespaceRestriction::Only),
    ]
}

proptest! {
    #[test]
    fn gittrack_never_owns_cluster_scoped_or_cross_namespace(
        owner_namespace in namespace(),
        owned in tracking_object(),
        mode in cluster_gittrack_mode(),
    ) {
        let owner = Owner::GitTrack { namespace: owner_namespace.clone() };
        let allowed = may_own(&owner, &owned, mode).allowed();
        let same_namespace = matches!(
            &owned, TrackingObject::GitTrackObject { namespace } if *namespace == owner_namespace);
        prop_assert_eq!(allowed, same_namespace);
    }

    #[test]
    fn no_instance_applies_a_gittracks_object_outside_its_namespace(
        owner_namespace in namespace(),
        scope in object_scope(),
        mode in cluster_gittrack_mode(),
        restriction in restriction(),
    ) {
        let Ok(instance) = WatchScope::from_flags(GitTrackMode::Enabled, mode, restriction) else {
            return Ok(());
        };
        let owner = Owner::GitTrack { namespace: owner_namespace.clone() };
        if let Ok(tracking) = instance.may_apply(&owner, &scope) {
            prop_assert_eq!(tracking, TrackingObject::GitTrackObject { namespace: owner_namespace.into() });
        }
    }

    #[test]
    fn applied_objects_are_always_watched_by_the_instance(
        owner_namespace in namespace(),
        cluster_owner in any::<bool>(),
        scope in object_scope(),
        gittrack_enabled in any::<bool>(),
        mode in cluster_gittrack_mode(),
        restriction in restriction(),
    ) {
        let gittrack_mode = if gittrack_enabled { GitTrackMode::Enabled } else { GitTrackMode::Disabled };
        let Ok(instance) = WatchScope::from_flags(gittrack_mode, mode, restriction) else {
            return Ok(());
        };
        let owner = if cluster_owner {
            Owner::ClusterGitTrack
        } else {
            Owner::GitTrack { namespace: owner_namespace }
        };
        if let Ok(tracking) = instance.may_apply(&owner, &scope) {
            let watched = match &tracking {
                TrackingObject::GitTrackObject { namespace } => arbor_policy::ownership::Watched::GitTrackObject { namespace },
                TrackingObject::ClusterGitTrackObject => arbor_policy::ownership::Watched::ClusterGitTrackObject,
            };
            prop_assert!(instance.watches().watches(watched), "{} applied but not watched", tracking);
        }
    }
}
