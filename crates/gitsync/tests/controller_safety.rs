//! The safety rules: a broken commit deletes nothing, mass pruning waits for an explicit
//! allowance, an unserved kind or a failing object stops nothing else, CRDs come first, and a
//! deleted source takes only labelled objects with it (or none with `deletionPolicy: Orphan`).

mod controller_support;

use arbor_api::condition::{find_condition, reasons, types};
use arbor_api::keys::SourceRef;
use arbor_api::{ClusterGitTrack, GitTrack};
use arbor_kube_emu::faults::{Fault, FaultEffect};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use controller_support::*;

/// The annotation that lets one round past the mass-prune guard.
const ALLOW: &str = "arbor.dev/allow-mass-prune";

#[tokio::test]
async fn a_commit_that_does_not_parse_keeps_the_last_good_state_and_deletes_nothing()
-> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    for name in ["a", "b", "c"] {
        repo.write(&format!("{name}.yaml"), &configmap(None, name, "1"))?;
    }
    let good = repo.commit("good")?;
    let instance = cluster
        .instance(&["--gittrack-mode=Enabled", "--clustergittrack-mode=Disabled"])
        .await?;
    let source = cluster.create_gittrack("foo", "apps", &repo).await?;
    cluster.synced(&instance, &source, &good).await?;

    repo.remove("c.yaml")?;
    repo.write("broken.yaml", "kind: [")?;
    repo.commit("broken")?;
    let status = eventually("the parse error on the status", || async {
        instance.request_round(&source);
        let status = cluster.status(&source).await?.unwrap_or_default();
        Ok(status
            .errors
            .iter()
            .any(|error| error.code == "ARB1001")
            .then_some(status))
    })
    .await?;
    let error = status
        .errors
        .iter()
        .find(|error| error.code == "ARB1001")
        .unwrap();
    assert_eq!(error.file.as_deref(), Some("broken.yaml"));
    assert_eq!(status.observed_commit.as_deref(), Some(good.as_str()));
    let stalled = find_condition(&status.conditions, types::STALLED).expect("stalled");
    assert_eq!(stalled.reason, reasons::PARSE_FAILED);
    instance.rounds(&source, 2).await;
    assert!(
        cluster.exists(&cluster.configmaps("foo"), "c").await?,
        "nothing is deleted on a broken commit"
    );
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn pruning_more_than_the_fraction_waits_for_the_allow_annotation() -> anyhow::Result<()> {
    let (cluster, repo, instance, source) = four_configmaps_synced().await?;

    for name in ["b", "c", "d"] {
        repo.remove(&format!("{name}.yaml"))?;
    }
    repo.commit("remove three of four")?;
    let status = eventually("the prune to be blocked", || async {
        instance.request_round(&source);
        let status = cluster.status(&source).await?.unwrap_or_default();
        let blocked = find_condition(&status.conditions, types::STALLED)
            .is_some_and(|stalled| stalled.reason == reasons::MASS_PRUNE_BLOCKED);
        Ok(blocked.then_some(status))
    })
    .await?;
    let stalled = find_condition(&status.conditions, types::STALLED).unwrap();
    assert!(
        stalled.message.contains("3 of the source's 4"),
        "{}",
        stalled.message
    );
    assert!(
        stalled.message.contains("arbor.dev/allow-mass-prune"),
        "{}",
        stalled.message
    );
    instance.rounds(&source, 2).await;
    for name in ["a", "b", "c", "d"] {
        assert!(
            cluster.exists(&cluster.configmaps("foo"), name).await?,
            "{name} kept while blocked"
        );
    }

    let sources: Api<GitTrack> = Api::namespaced(cluster.client.clone(), "foo");
    sources
        .patch(
            "apps",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"arbor.dev/allow-mass-prune": "true"}}}),
            ),
        )
        .await?;
    for name in ["b", "c", "d"] {
        cluster
            .gone(&instance, &source, &cluster.configmaps("foo"), name)
            .await?;
    }
    assert!(cluster.exists(&cluster.configmaps("foo"), "a").await?);
    instance.stop().await;
    Ok(())
}

/// The allowance lets one round past the guard: it is removed after the round that used it
/// even when that round's status cannot be written, or a later mass prune would pass unasked.
#[tokio::test]
async fn a_used_mass_prune_allowance_is_removed_even_when_the_status_write_fails()
-> anyhow::Result<()> {
    let fired = allowance_used_with_a_fault(Fault::status(500).subresources(&["status"])).await?;
    assert!(
        fired > 0,
        "the round's status write was refused: the removal did not wait for it"
    );
    Ok(())
}

/// Removing the used allowance can fail too; the next round (with nothing left to prune, so
/// not using it) removes it then.
#[tokio::test]
async fn a_used_mass_prune_allowance_whose_removal_failed_is_removed_after_the_next_round()
-> anyhow::Result<()> {
    // The first write to the GitTrack itself (not its status) after the allowance: the removal.
    let once = Fault::new(FaultEffect::Status {
        code: 500,
        rate: 1.0,
        times: Some(1),
    });
    let fired = allowance_used_with_a_fault(once.subresources(&[""])).await?;
    assert_eq!(fired, 1, "the first removal was refused");
    Ok(())
}

/// A GitTrack `foo/apps` of four ConfigMaps (`a` to `d`, one file each), synced by an instance
/// that runs GitTracks only.
async fn four_configmaps_synced() -> anyhow::Result<(Cluster, Repo, Instance, SourceRef)> {
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    for name in ["a", "b", "c", "d"] {
        repo.write(&format!("{name}.yaml"), &configmap(None, name, "1"))?;
    }
    let first = repo.commit("four")?;
    let instance = cluster
        .instance(&["--gittrack-mode=Enabled", "--clustergittrack-mode=Disabled"])
        .await?;
    let source = cluster.create_gittrack("foo", "apps", &repo).await?;
    cluster.synced(&instance, &source, &first).await?;
    Ok((cluster, repo, instance, source))
}

/// A GitTrack of four ConfigMaps allowed to mass-prune, `fault` on the writes to GitTracks,
/// three of the four removed in git: waits until they are gone and the allowance annotation is
/// removed (asking for rounds meanwhile), and returns how often the fault fired.
async fn allowance_used_with_a_fault(fault: Fault) -> anyhow::Result<u32> {
    let (cluster, repo, instance, source) = four_configmaps_synced().await?;

    let sources: Api<GitTrack> = Api::namespaced(cluster.client.clone(), "foo");
    sources
        .patch(
            "apps",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {ALLOW: "true"}}})),
        )
        .await?;
    cluster.emu.faults().inject(
        fault
            .verbs(&["patch", "update"])
            .resources(&["arbor.dev/gittracks"]),
    );
    for name in ["b", "c", "d"] {
        repo.remove(&format!("{name}.yaml"))?;
    }
    repo.commit("remove three of four")?;
    for name in ["b", "c", "d"] {
        cluster
            .gone(&instance, &source, &cluster.configmaps("foo"), name)
            .await?;
    }
    eventually("the allowance to be removed", || async {
        instance.request_round(&source);
        let annotations = sources.get("apps").await?.metadata.annotations;
        let allowed = annotations.unwrap_or_default().contains_key(ALLOW);
        Ok((!allowed).then_some(()))
    })
    .await?;
    let fired = cluster.emu.faults().fired().iter().sum();
    cluster.emu.faults().clear();
    instance.stop().await;
    Ok(fired)
}

#[tokio::test]
async fn a_round_that_deletes_every_namespace_is_blocked() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("apps").await?;
    let repo = Repo::new()?;
    for namespace in ["team-a", "team-b"] {
        repo.write(
            &format!("{namespace}.yaml"),
            &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {namespace}\n"),
        )?;
    }
    for name in ["a", "b", "c", "d", "e", "f"] {
        repo.write(&format!("{name}.yaml"), &configmap(Some("apps"), name, "1"))?;
    }
    let first = repo.commit("namespaces and configmaps")?;
    let instance = cluster.instance(&[]).await?;
    let source = cluster
        .create_cluster_gittrack("platform", &repo, "Flat")
        .await?;
    cluster.synced(&instance, &source, &first).await?;
    let namespaces = cluster.api("v1", "Namespace", "namespaces", None);
    assert!(cluster.exists(&namespaces, "team-a").await?);

    repo.remove("team-a.yaml")?;
    repo.remove("team-b.yaml")?;
    repo.commit("remove both namespaces")?;
    let status = eventually("the prune to be blocked", || async {
        instance.request_round(&source);
        let status = cluster.status(&source).await?.unwrap_or_default();
        let stalled = find_condition(&status.conditions, types::STALLED).cloned();
        Ok(stalled.filter(|stalled| stalled.reason == reasons::MASS_PRUNE_BLOCKED))
    })
    .await?;
    assert!(
        status.message.contains("all 2 namespaces"),
        "{}",
        status.message
    );
    assert!(cluster.exists(&namespaces, "team-a").await?);
    assert!(cluster.exists(&namespaces, "team-b").await?);
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn an_unserved_kind_is_an_error_on_that_kind_alone() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    repo.write(
        "widget.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  size: 1\n",
    )?;
    repo.write("app.yaml", &configmap(None, "app", "1"))?;
    let commit = repo.commit("widget and configmap")?;
    let instance = cluster
        .instance(&["--gittrack-mode=Enabled", "--clustergittrack-mode=Disabled"])
        .await?;
    let source = cluster.create_gittrack("foo", "apps", &repo).await?;
    let status = cluster.synced(&instance, &source, &commit).await?;
    assert!(cluster.exists(&cluster.configmaps("foo"), "app").await?);
    let error = status
        .errors
        .iter()
        .find(|error| error.code == "ARB3003")
        .expect("ARB3003");
    assert!(error.message.contains("Widget"), "{}", error.message);
    assert_eq!(error.file.as_deref(), Some("widget.yaml"));
    let ready = find_condition(&status.conditions, types::READY).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", reasons::KIND_NOT_SERVED)
    );
    instance.stop().await;
    Ok(())
}

const WIDGET_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
";

#[tokio::test]
async fn a_custom_resource_definition_is_applied_and_served_before_its_objects()
-> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let repo = Repo::new()?;
    repo.write("a-widget.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: shop\nspec:\n  size: 1\n")?;
    repo.write(
        "b-namespace.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n",
    )?;
    repo.write("c-crd.yaml", WIDGET_CRD)?;
    let commit = repo.commit("crd, namespace and widget")?;
    let instance = cluster.instance(&[]).await?;
    let source = cluster
        .create_cluster_gittrack("platform", &repo, "Flat")
        .await?;
    let status = cluster.synced(&instance, &source, &commit).await?;
    assert!(status.errors.is_empty(), "{:?}", status.errors);
    let widgets = cluster.api("example.com/v1", "Widget", "widgets", Some("shop"));
    assert_eq!(widgets.get("w").await?.data["spec"]["size"], 1);
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn an_object_that_fails_to_apply_does_not_stop_the_others() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    repo.write("a.yaml", &configmap(Some("missing"), "lost", "1"))?;
    repo.write("b.yaml", &configmap(Some("foo"), "kept", "1"))?;
    let commit = repo.commit("one into a missing namespace")?;
    let instance = cluster.instance(&[]).await?;
    let source = cluster
        .create_cluster_gittrack("platform", &repo, "Flat")
        .await?;
    let status = cluster.synced(&instance, &source, &commit).await?;
    assert!(cluster.exists(&cluster.configmaps("foo"), "kept").await?);
    let error = status
        .errors
        .iter()
        .find(|error| error.code == "ARB3004")
        .expect("ARB3004");
    assert_eq!(error.object.as_deref(), Some("ConfigMap/missing/lost"));
    let ready = find_condition(&status.conditions, types::READY).unwrap();
    assert_eq!(ready.reason, reasons::APPLY_FAILED);
    instance.stop().await;
    Ok(())
}

/// A ClusterGitTrack with two ConfigMaps, allowed to mass-prune; the label is then removed
/// from `hand-kept`, and the source deleted.
async fn two_configmaps(
    cluster: &Cluster,
    instance: &Instance,
    deletion_policy: &str,
) -> anyhow::Result<()> {
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    repo.write("a.yaml", &configmap(Some("foo"), "managed", "1"))?;
    repo.write("b.yaml", &configmap(Some("foo"), "hand-kept", "1"))?;
    let commit = repo.commit("two")?;
    let api: Api<ClusterGitTrack> = Api::all(cluster.client.clone());
    api.create(
        &Default::default(),
        &serde_json::from_value(json!({
            "apiVersion": "arbor.dev/v1alpha1", "kind": "ClusterGitTrack",
            // Deleting with `Delete` is a prune of everything: allowed here, held by the guard
            // without the annotation (controller_pruning.rs).
            "metadata": {"name": "platform", "annotations": {"arbor.dev/allow-mass-prune": "true"}},
            "spec": {"repository": repo.url(), "reference": {"branch": "main"}, "layout": "Flat",
                     "pollInterval": "1h", "deletionPolicy": deletion_policy},
        }))?,
    )
    .await?;
    let source = arbor_api::keys::SourceRef::ClusterGitTrack {
        name: "platform".into(),
    };
    cluster.synced(instance, &source, &commit).await?;
    cluster
        .edit(
            &cluster.configmaps("foo"),
            "hand-kept",
            json!({"metadata": {"labels": {LABEL: null}}}),
        )
        .await?;
    api.delete("platform", &DeleteParams::default()).await?;
    Ok(())
}

#[tokio::test]
async fn deleting_a_source_deletes_only_its_labelled_objects() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let instance = cluster.instance(&[]).await?;
    two_configmaps(&cluster, &instance, "Delete").await?;
    let configmaps = cluster.configmaps("foo");
    eventually("the labelled ConfigMap to be deleted", || async {
        Ok((!cluster.exists(&configmaps, "managed").await?).then_some(()))
    })
    .await?;
    assert!(cluster.exists(&configmaps, "hand-kept").await?);
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn deletion_policy_orphan_leaves_every_object_when_the_source_is_deleted()
-> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let instance = cluster.instance(&[]).await?;
    two_configmaps(&cluster, &instance, "Orphan").await?;
    let tracking = cluster.api(
        "arbor.dev/v1alpha1",
        "GitTrackObject",
        "gittrackobjects",
        Some("foo"),
    );
    eventually("the tracking objects to go", || async {
        Ok((!cluster.exists(&tracking, "configmap.managed").await?).then_some(()))
    })
    .await?;
    assert!(
        cluster
            .exists(&cluster.configmaps("foo"), "managed")
            .await?
    );
    assert!(
        cluster
            .exists(&cluster.configmaps("foo"), "hand-kept")
            .await?
    );
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn a_conflict_or_server_error_on_one_object_does_not_stop_the_others() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    for namespace in ["conflict", "broken", "fine"] {
        cluster.namespace(namespace).await?;
    }
    let faults = cluster.emu.faults();
    faults.inject(
        arbor_kube_emu::faults::Fault::status(409)
            .verbs(&["patch"])
            .resources(&["configmaps"])
            .namespaces(&["conflict"]),
    );
    faults.inject(
        arbor_kube_emu::faults::Fault::status(500)
            .verbs(&["patch"])
            .resources(&["configmaps"])
            .namespaces(&["broken"]),
    );
    let repo = Repo::new()?;
    for namespace in ["conflict", "broken", "fine"] {
        repo.write(
            &format!("{namespace}.yaml"),
            &configmap(Some(namespace), "app", "1"),
        )?;
    }
    let commit = repo.commit("three namespaces")?;
    let instance = cluster.instance(&[]).await?;
    let source = cluster
        .create_cluster_gittrack("platform", &repo, "Flat")
        .await?;
    let status = cluster.synced(&instance, &source, &commit).await?;
    assert!(cluster.exists(&cluster.configmaps("fine"), "app").await?);
    let failed: Vec<&str> = status
        .errors
        .iter()
        .filter(|error| error.code == "ARB3004")
        .filter_map(|error| error.object.as_deref())
        .collect();
    assert_eq!(failed, ["ConfigMap/broken/app", "ConfigMap/conflict/app"]);

    // Once the server behaves, the same commit is applied in full at the next round.
    faults.clear();
    for namespace in ["conflict", "broken"] {
        eventually(&format!("the ConfigMap in {namespace}"), || async {
            instance.request_round(&source);
            Ok(cluster
                .exists(&cluster.configmaps(namespace), "app")
                .await?
                .then_some(()))
        })
        .await?;
    }
    instance.stop().await;
    Ok(())
}

/// A tracking object deleted by hand while gitsync was down is finalized by the next instance
/// only once that instance knows what the source declares: the object git still declares is
/// never deleted (its uid stays), and its tracking object comes back. Before, a finalizer that
/// ran before the new instance's first round saw nothing declared and deleted the object
/// (row 5).
#[tokio::test]
async fn a_tracking_object_deleted_while_gitsync_was_down_never_takes_a_declared_object_with_it()
-> anyhow::Result<()> {
    const FLAGS: [&str; 2] = ["--gittrack-mode=Enabled", "--clustergittrack-mode=Disabled"];
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    repo.write("kept.yaml", &configmap(None, "kept", "1"))?;
    let commit = repo.commit("one")?;
    let instance = cluster.instance(&FLAGS).await?;
    let source = cluster.create_gittrack("foo", "apps", &repo).await?;
    cluster.synced(&instance, &source, &commit).await?;
    instance.stop().await;

    let configmaps = cluster.configmaps("foo");
    let uid = configmaps.get("kept").await?.metadata.uid;
    let tracking = cluster.api(
        "arbor.dev/v1alpha1",
        "GitTrackObject",
        "gittrackobjects",
        Some("foo"),
    );
    // gitsync's finalizer keeps it Terminating until an instance decides.
    tracking
        .delete("configmap.kept", &Default::default())
        .await?;
    let instance = cluster.instance(&FLAGS).await?;
    eventually("the tracking object to come back", || async {
        let current = tracking.get_opt("configmap.kept").await?;
        Ok(current
            .filter(|object| object.metadata.deletion_timestamp.is_none())
            .map(drop))
    })
    .await?;
    let kept = configmaps.get_opt("kept").await?;
    assert_eq!(
        kept.and_then(|object| object.metadata.uid),
        uid,
        "the ConfigMap git declares was never deleted"
    );
    instance.stop().await;
    Ok(())
}

/// A source deleted with `propagationPolicy: Orphan` leaves its tracking objects with no owner.
/// Deleting one of them then lets it go and leaves the object it tracked on the cluster (nothing
/// says the object is Arbor's to delete any more), with a Warning Event on the tracking object
/// that says so. Before, gitsync's finalizer was kept on it for good, without a word.
#[tokio::test]
async fn a_tracking_object_left_without_an_owner_is_let_go_and_its_object_kept()
-> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    repo.write("kept.yaml", &configmap(None, "kept", "1"))?;
    let commit = repo.commit("one")?;
    let instance = cluster
        .instance(&["--gittrack-mode=Enabled", "--clustergittrack-mode=Disabled"])
        .await?;
    let source = cluster.create_gittrack("foo", "apps", &repo).await?;
    cluster.synced(&instance, &source, &commit).await?;
    let configmaps = cluster.configmaps("foo");
    let uid = configmaps.get("kept").await?.metadata.uid;

    let gittracks: Api<GitTrack> = Api::namespaced(cluster.client.clone(), "foo");
    let orphaning = DeleteParams {
        propagation_policy: Some(kube::api::PropagationPolicy::Orphan),
        ..DeleteParams::default()
    };
    gittracks.delete("apps", &orphaning).await?;
    eventually("the source to be gone", || async {
        Ok(gittracks.get_opt("apps").await?.is_none().then_some(()))
    })
    .await?;
    let tracking = cluster.gittrack_objects("foo");
    let left = tracking.get("configmap.kept").await?;
    assert!(
        left.metadata
            .owner_references
            .unwrap_or_default()
            .is_empty(),
        "the orphaning delete removed the ownerReference"
    );

    tracking
        .delete("configmap.kept", &DeleteParams::default())
        .await?;
    eventually("the tracking object to be let go", || async {
        Ok(tracking
            .get_opt("configmap.kept")
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    let kept = configmaps.get_opt("kept").await?;
    assert_eq!(
        kept.and_then(|object| object.metadata.uid),
        uid,
        "the ConfigMap was left as it was"
    );
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(cluster.client.clone(), "foo");
    let said = eventually("a Warning Event on the tracking object", || async {
        let listed = events.list(&Default::default()).await?;
        Ok(listed.items.into_iter().find(|event| {
            event.reason.as_deref() == Some("ReleasedUnowned")
                && event.regarding.as_ref().and_then(|r| r.name.as_deref())
                    == Some("configmap.kept")
        }))
    })
    .await?;
    assert_eq!(said.type_.as_deref(), Some("Warning"));
    assert!(
        said.note
            .unwrap_or_default()
            .contains("ConfigMap foo/kept is left"),
        "the Event names the object left"
    );
    instance.stop().await;
    Ok(())
}

/// A tracking object whose `spec.data` does not say what it tracks (no apiVersion: someone
/// wrote it by hand) and that is deleted is let go, and nothing else is touched. Before, it
/// kept gitsync's finalizer for good: the instance did not look at it at all.
#[tokio::test]
async fn a_tracking_object_that_names_no_object_is_let_go_when_deleted() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    let instance = cluster
        .instance(&["--gittrack-mode=Enabled", "--clustergittrack-mode=Disabled"])
        .await?;
    let tracking = cluster.gittrack_objects("foo");
    cluster
        .create(
            &tracking,
            json!({
                "apiVersion": "arbor.dev/v1alpha1",
                "kind": "GitTrackObject",
                "metadata": {
                    "name": "configmap.hand-made",
                    "namespace": "foo",
                    "finalizers": [arbor_api::keys::GITSYNC_FINALIZER],
                },
                "spec": {"name": "hand-made", "kind": "ConfigMap", "data": {"kind": "ConfigMap"}},
            }),
        )
        .await?;
    tracking
        .delete("configmap.hand-made", &DeleteParams::default())
        .await?;
    eventually("the tracking object to be let go", || async {
        Ok(tracking
            .get_opt("configmap.hand-made")
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    instance.stop().await;
    Ok(())
}
