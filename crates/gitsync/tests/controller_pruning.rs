//! What a source may delete, through the running controller: the last object of a kind in a
//! flat source (seeds/000 row 5), deleting a source (Orphan by default, Delete held by the
//! guard, Namespaces last), large deletions with progress, the mass-prune budget over a window
//! and the consumed allow annotation, and management conflicts between sources (the rules of
//! `arbor_policy::sync::prune`).

mod controller_support;

use arbor_api::condition::{find_condition, reasons, types};
use arbor_api::keys::SourceRef;
use arbor_api::{ClusterGitTrack, GitTrack};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use controller_support::*;

const ALLOW: &str = "arbor.dev/allow-mass-prune";
const GITTRACKS: [&str; 2] = ["--gittrack-mode=Enabled", "--clustergittrack-mode=Disabled"];

/// Creates a ClusterGitTrack `platform` with `extra` merged into its spec and `annotations`.
async fn cluster_source(
    cluster: &Cluster,
    repo: &Repo,
    extra: Value,
    annotations: Value,
) -> anyhow::Result<SourceRef> {
    let mut spec = json!({"repository": repo.url(), "reference": {"branch": "main"},
                          "layout": "Flat", "pollInterval": "1h"});
    for (key, value) in extra.as_object().into_iter().flatten() {
        spec[key] = value.clone();
    }
    let api: Api<ClusterGitTrack> = Api::all(cluster.client.clone());
    api.create(
        &Default::default(),
        &serde_json::from_value(json!({
            "apiVersion": "arbor.dev/v1alpha1", "kind": "ClusterGitTrack",
            "metadata": {"name": "platform", "annotations": annotations},
            "spec": spec,
        }))?,
    )
    .await?;
    Ok(SourceRef::ClusterGitTrack {
        name: "platform".into(),
    })
}

async fn gittrack_with_repo(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    repo: &Repo,
    deletion_policy: Option<&str>,
) -> anyhow::Result<SourceRef> {
    let mut spec = json!({"repository": repo.url(), "reference": {"branch": "main"},
                          "layout": "Flat", "pollInterval": "1h"});
    if let Some(policy) = deletion_policy {
        spec["deletionPolicy"] = json!(policy);
    }
    let api: Api<GitTrack> = Api::namespaced(cluster.client.clone(), namespace);
    api.create(
        &Default::default(),
        &serde_json::from_value(json!({
            "apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrack",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }))?,
    )
    .await?;
    Ok(SourceRef::GitTrack {
        namespace: namespace.into(),
        name: name.into(),
    })
}

fn gittracks(cluster: &Cluster, namespace: &str) -> Api<GitTrack> {
    Api::namespaced(cluster.client.clone(), namespace)
}

fn cluster_gittracks(cluster: &Cluster) -> Api<ClusterGitTrack> {
    Api::all(cluster.client.clone())
}

/// The notes of the Events with `reason` in `namespace`.
async fn events(cluster: &Cluster, namespace: &str, reason: &str) -> anyhow::Result<Vec<String>> {
    let api = cluster.api("events.k8s.io/v1", "Event", "events", Some(namespace));
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|event| event.data["reason"] == reason)
        .map(|event| event.data["note"].as_str().unwrap_or_default().to_owned())
        .collect())
}

async fn annotate(
    api: &Api<
        impl kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    >,
    name: &str,
    key: &str,
) -> anyhow::Result<()> {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {key: "true"}}})),
    )
    .await?;
    Ok(())
}

async fn stalled_reason(
    cluster: &Cluster,
    instance: &Instance,
    source: &SourceRef,
    reason: &str,
) -> anyhow::Result<String> {
    eventually(&format!("{source} to be stalled with {reason}"), || async {
        instance.request_round(source);
        let status = cluster.status(source).await?.unwrap_or_default();
        Ok(find_condition(&status.conditions, types::STALLED)
            .filter(|stalled| stalled.reason == reason)
            .map(|stalled| stalled.message.clone()))
    })
    .await
}

#[tokio::test]
async fn row_5_flat_source_deletes_the_last_object_of_a_kind_removed_from_git() -> anyhow::Result<()>
{
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    repo.write("settings.yaml", &configmap(None, "settings", "1"))?;
    for name in ["a", "b", "c"] {
        repo.write(&format!("role-{name}.yaml"), &role(name, "jobs"))?;
    }
    let first = repo.commit("one ConfigMap, three Roles")?;
    let instance = cluster.instance(&GITTRACKS).await?;
    let source = cluster.create_gittrack("foo", "apps", &repo).await?;
    cluster.synced(&instance, &source, &first).await?;
    assert!(
        cluster
            .exists(&cluster.configmaps("foo"), "settings")
            .await?
    );

    repo.remove("settings.yaml")?;
    let second = repo.commit("remove the last ConfigMap")?;
    cluster.synced(&instance, &source, &second).await?;
    // Flat: the kind stays declared while the inventory holds a ConfigMap, so row 5 deletes it.
    cluster
        .gone(&instance, &source, &cluster.configmaps("foo"), "settings")
        .await?;
    for name in ["a", "b", "c"] {
        assert!(cluster.exists(&cluster.roles("foo"), name).await?);
    }
    instance.stop().await;
    Ok(())
}

/// `spec.prune: false` (`arbor_policy::sync::round`'s `Prune::Disabled`): an object removed
/// from git stays on the cluster, labelled, and the rest of the round applies.
#[tokio::test]
async fn prune_false_leaves_an_object_removed_from_git_on_the_cluster() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    repo.write("settings.yaml", &configmap(None, "settings", "1"))?;
    repo.write("other.yaml", &configmap(None, "other", "1"))?;
    let first = repo.commit("two ConfigMaps")?;
    let instance = cluster.instance(&GITTRACKS).await?;
    let api: Api<GitTrack> = Api::namespaced(cluster.client.clone(), "foo");
    api.create(
        &Default::default(),
        &serde_json::from_value(json!({
            "apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrack",
            "metadata": {"name": "apps", "namespace": "foo"},
            "spec": {"repository": repo.url(), "reference": {"branch": "main"},
                     "layout": "Flat", "pollInterval": "1h", "prune": false},
        }))?,
    )
    .await?;
    let source = SourceRef::GitTrack {
        namespace: "foo".into(),
        name: "apps".into(),
    };
    cluster.synced(&instance, &source, &first).await?;

    repo.remove("settings.yaml")?;
    repo.write("other.yaml", &configmap(None, "other", "2"))?;
    let second = repo.commit("remove settings, change other")?;
    cluster.synced(&instance, &source, &second).await?;
    let other = cluster.configmaps("foo").get("other").await?;
    assert_eq!(other.data["data"]["value"], "2", "the round applied");
    let settings = cluster.configmaps("foo").get("settings").await?;
    assert_eq!(
        labels(&settings)
            .get("arbor.dev/managed")
            .map(String::as_str),
        Some("enabled"),
        "left as it was, not deleted"
    );
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn deleting_a_source_orphans_by_default() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    repo.write("a.yaml", &configmap(None, "a", "1"))?;
    let commit = repo.commit("one")?;
    let instance = cluster.instance(&GITTRACKS).await?;
    let source = gittrack_with_repo(&cluster, "foo", "apps", &repo, None).await?;
    cluster.synced(&instance, &source, &commit).await?;
    let stored = gittracks(&cluster, "foo").get("apps").await?;
    assert_eq!(
        stored.spec.source.deletion_policy,
        arbor_api::DeletionPolicy::Orphan
    );

    gittracks(&cluster, "foo")
        .delete("apps", &DeleteParams::default())
        .await?;
    eventually("the source to go", || async {
        Ok(gittracks(&cluster, "foo")
            .get_opt("apps")
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    let tracking = cluster.api(
        "arbor.dev/v1alpha1",
        "GitTrackObject",
        "gittrackobjects",
        Some("foo"),
    );
    assert!(!cluster.exists(&tracking, "configmap.a").await?);
    let kept = cluster.configmaps("foo").get("a").await?;
    assert!(
        labels(&kept).contains_key(LABEL),
        "left as it was, labelled"
    );
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn deleting_a_source_with_delete_policy_waits_for_the_allow_annotation() -> anyhow::Result<()>
{
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    for name in ["a", "b"] {
        repo.write(&format!("{name}.yaml"), &configmap(Some("foo"), name, "1"))?;
    }
    let commit = repo.commit("two")?;
    let instance = cluster.instance(&[]).await?;
    let source = cluster_source(
        &cluster,
        &repo,
        json!({"deletionPolicy": "Delete"}),
        json!({}),
    )
    .await?;
    cluster.synced(&instance, &source, &commit).await?;

    cluster_gittracks(&cluster)
        .delete("platform", &DeleteParams::default())
        .await?;
    let message = stalled_reason(&cluster, &instance, &source, reasons::DELETION_BLOCKED).await?;
    assert!(message.contains(ALLOW), "{message}");
    assert!(message.contains("delete 2"), "{message}");
    instance.rounds(&source, 2).await;
    let held = cluster_gittracks(&cluster).get("platform").await?;
    assert!(held.metadata.deletion_timestamp.is_some());
    assert!(cluster.exists(&cluster.configmaps("foo"), "a").await?);
    assert!(cluster.exists(&cluster.configmaps("foo"), "b").await?);
    assert!(
        !events(&cluster, "default", reasons::DELETION_BLOCKED)
            .await?
            .is_empty()
    );

    annotate(&cluster_gittracks(&cluster), "platform", ALLOW).await?;
    eventually("the source and its objects to go", || async {
        let source_gone = cluster_gittracks(&cluster)
            .get_opt("platform")
            .await?
            .is_none();
        let objects_gone = !cluster.exists(&cluster.configmaps("foo"), "a").await?
            && !cluster.exists(&cluster.configmaps("foo"), "b").await?;
        Ok((source_gone && objects_gone).then_some(()))
    })
    .await?;
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn deleting_a_source_deletes_namespaces_last_and_keeps_one_holding_unmanaged_objects()
-> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let repo = Repo::new()?;
    for namespace in ["team-a", "team-b"] {
        repo.write(
            &format!("{namespace}.yaml"),
            &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {namespace}\n"),
        )?;
        repo.write(
            &format!("{namespace}-settings.yaml"),
            &configmap(Some(namespace), "settings", "1"),
        )?;
    }
    let commit = repo.commit("two namespaces")?;
    let instance = cluster.instance(&[]).await?;
    let source = cluster_source(
        &cluster,
        &repo,
        json!({"deletionPolicy": "Delete"}),
        json!({ALLOW: "true"}),
    )
    .await?;
    cluster.synced(&instance, &source, &commit).await?;
    cluster
        .create(
            &cluster.configmaps("team-a"),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "hand-made", "namespace": "team-a"}}),
        )
        .await?;

    cluster_gittracks(&cluster)
        .delete("platform", &DeleteParams::default())
        .await?;
    eventually("the source to go", || async {
        Ok(cluster_gittracks(&cluster)
            .get_opt("platform")
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    let namespaces = cluster.api("v1", "Namespace", "namespaces", None);
    eventually("team-b to go", || async {
        Ok((!cluster.exists(&namespaces, "team-b").await?).then_some(()))
    })
    .await?;
    let team_a = namespaces.get("team-a").await?;
    assert!(
        team_a.metadata.deletion_timestamp.is_none(),
        "team-a is kept"
    );
    assert!(
        !cluster
            .exists(&cluster.configmaps("team-a"), "settings")
            .await?
    );
    assert!(
        cluster
            .exists(&cluster.configmaps("team-a"), "hand-made")
            .await?
    );
    let kept = events(&cluster, "default", "NamespaceKept").await?;
    assert!(
        kept.iter()
            .any(|note| note.contains("team-a") && note.contains("hand-made")),
        "{kept:?}"
    );
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn deleting_a_source_with_hundreds_of_objects_finishes_with_progress_in_its_status()
-> anyhow::Result<()> {
    const COUNT: usize = 300;
    let cluster = Cluster::start().await?;
    cluster.namespace("bulk").await?;
    cluster.namespace("stuck").await?;
    let repo = Repo::new()?;
    for i in 0..COUNT {
        repo.write(
            &format!("cm-{i}.yaml"),
            &configmap(Some("bulk"), &format!("cm-{i}"), "1"),
        )?;
    }
    repo.write("stuck.yaml", &configmap(Some("stuck"), "last", "1"))?;
    let commit = repo.commit("many")?;
    let instance = cluster.instance(&[]).await?;
    let source = cluster_source(
        &cluster,
        &repo,
        json!({"deletionPolicy": "Delete"}),
        json!({ALLOW: "true"}),
    )
    .await?;
    cluster.synced(&instance, &source, &commit).await?;

    // One object cannot be deleted for now: the deletion goes on around it and says so.
    let faults = cluster.emu.faults();
    faults.inject(
        arbor_kube_emu::faults::Fault::status(500)
            .verbs(&["delete"])
            .resources(&["configmaps"])
            .namespaces(&["stuck"]),
    );
    cluster_gittracks(&cluster)
        .delete("platform", &DeleteParams::default())
        .await?;
    let status = eventually("the deletion progress", || async {
        let status = cluster.status(&source).await?.unwrap_or_default();
        Ok(status
            .deletion
            .clone()
            .filter(|progress| progress.remaining == 1 && !status.errors.is_empty())
            .map(|_| status))
    })
    .await?;
    let progress = status.deletion.clone().unwrap();
    assert_eq!((progress.deleted, progress.released), (COUNT as i64, 0));
    let reconciling = find_condition(&status.conditions, types::RECONCILING).unwrap();
    assert!(
        reconciling
            .message
            .contains(&format!("{COUNT} of {}", COUNT + 1)),
        "{}",
        reconciling.message
    );
    assert!(
        status
            .errors
            .iter()
            .any(|error| error.object.as_deref() == Some("ConfigMap/stuck/last")),
        "{:?}",
        status.errors
    );
    let left = cluster
        .configmaps("bulk")
        .list(&ListParams::default())
        .await?;
    assert!(left.items.is_empty(), "{} left", left.items.len());

    faults.clear();
    eventually("the source to go", || async {
        Ok(cluster_gittracks(&cluster)
            .get_opt("platform")
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    assert!(!cluster.exists(&cluster.configmaps("stuck"), "last").await?);
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn pruning_hundreds_of_objects_in_one_round_finalizes_every_tracking_object()
-> anyhow::Result<()> {
    const COUNT: usize = 300;
    // A watch history shorter than the burst of deletions, as an API server's watch cache is
    // when thousands of tracking objects turn Terminating at once: watches expire (410) and
    // the controllers relist in the middle of finalizing.
    let cluster =
        Cluster::start_with(arbor_kube_emu::KubeEmu::builder().history_window(100)).await?;
    cluster.namespace("bulk").await?;
    let repo = Repo::new()?;
    for i in 0..COUNT {
        repo.write(
            &format!("cm-{i}.yaml"),
            &configmap(None, &format!("cm-{i}"), "1"),
        )?;
    }
    let first = repo.commit("many")?;
    let instance = cluster.instance(&GITTRACKS).await?;
    let source = cluster.create_gittrack("bulk", "apps", &repo).await?;
    cluster.synced(&instance, &source, &first).await?;
    for i in 1..COUNT {
        repo.remove(&format!("cm-{i}.yaml"))?;
    }
    let second = repo.commit("all but one")?;
    annotate(&gittracks(&cluster, "bulk"), "apps", ALLOW).await?;
    cluster.synced(&instance, &source, &second).await?;
    let tracking = cluster.api(
        "arbor.dev/v1alpha1",
        "GitTrackObject",
        "gittrackobjects",
        Some("bulk"),
    );
    eventually("every pruned tracking object to be finalized", || async {
        let left = tracking.list(&ListParams::default()).await?.items.len();
        Ok((left == 1).then_some(()))
    })
    .await?;
    let left = cluster
        .configmaps("bulk")
        .list(&ListParams::default())
        .await?;
    assert_eq!(left.items.len(), 1);
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn deleting_a_source_larger_than_the_watch_history_finishes_without_a_restart()
-> anyhow::Result<()> {
    // The shape of the reported stall: more tracking objects than the API server's watch
    // history holds. Before, the source went at once and garbage collection turned every
    // tracking object Terminating in one step; the tracking controller's watch expired in the
    // middle, and with 1,000 objects and a history of 300, 257 were never finalized (measured
    // on the previous controller: the count stayed at 257 for over a minute).
    const COUNT: usize = 1000;
    let cluster =
        Cluster::start_with(arbor_kube_emu::KubeEmu::builder().history_window(300)).await?;
    cluster.namespace("bulk").await?;
    let repo = Repo::new()?;
    for i in 0..COUNT {
        repo.write(
            &format!("cm-{i}.yaml"),
            &configmap(Some("bulk"), &format!("cm-{i}"), "1"),
        )?;
    }
    let commit = repo.commit("many")?;
    let instance = cluster.instance(&[]).await?;
    let source = cluster_source(
        &cluster,
        &repo,
        json!({"deletionPolicy": "Delete"}),
        json!({ALLOW: "true"}),
    )
    .await?;
    wait_for_commit(&cluster, &instance, &source, &commit).await?;

    cluster_gittracks(&cluster)
        .delete("platform", &DeleteParams::default())
        .await?;
    let tracking = cluster.api(
        "arbor.dev/v1alpha1",
        "GitTrackObject",
        "gittrackobjects",
        Some("bulk"),
    );
    // Bounded, not timed: each check waits for progress, and only no progress fails.
    let mut left = COUNT;
    while left > 0 {
        let before = left;
        let progressed = eventually("the deletion to make progress", || async {
            let now = tracking.list(&ListParams::default()).await?.items.len();
            Ok((now < before || now == 0).then_some(now))
        })
        .await?;
        left = progressed;
    }
    eventually("the source to go", || async {
        Ok(cluster_gittracks(&cluster)
            .get_opt("platform")
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    let configmaps = cluster
        .configmaps("bulk")
        .list(&ListParams::default())
        .await?;
    assert!(
        configmaps.items.is_empty(),
        "{} left",
        configmaps.items.len()
    );
    instance.stop().await;
    Ok(())
}

/// Waits until `source` has synced `commit`, asking for rounds; many objects take longer than
/// one round's wait, so this is bounded by rounds, not by the usual patience.
async fn wait_for_commit(
    cluster: &Cluster,
    instance: &Instance,
    source: &SourceRef,
    commit: &str,
) -> anyhow::Result<()> {
    for _ in 0..30 {
        let status = cluster.status(source).await?.unwrap_or_default();
        if status.observed_commit.as_deref() == Some(commit) {
            return Ok(());
        }
        instance.rounds(source, 1).await;
    }
    anyhow::bail!("{source} did not sync {commit}")
}

/// A GitTrack `apps` in `foo` with ConfigMaps `cm-0` .. `cm-<count - 1>`, synced.
async fn configmaps_synced(
    cluster: &Cluster,
    instance: &Instance,
    repo: &Repo,
    count: usize,
) -> anyhow::Result<SourceRef> {
    cluster.namespace("foo").await?;
    for i in 0..count {
        repo.write(
            &format!("cm-{i}.yaml"),
            &configmap(None, &format!("cm-{i}"), "1"),
        )?;
    }
    let commit = repo.commit("all")?;
    let source = cluster.create_gittrack("foo", "apps", repo).await?;
    cluster.synced(instance, &source, &commit).await?;
    Ok(source)
}

/// Commits the removal of `cm-<keep>` .. `cm-<before - 1>`; returns the commit.
fn keep(repo: &Repo, keep: usize, before: usize) -> anyhow::Result<String> {
    for i in keep..before {
        repo.remove(&format!("cm-{i}.yaml"))?;
    }
    repo.commit(&format!("keep {keep}"))
}

#[tokio::test]
async fn mass_prune_guard_counts_every_round_of_the_window_across_a_restart() -> anyhow::Result<()>
{
    let cluster = Cluster::start().await?;
    let repo = Repo::new()?;
    let instance = cluster.instance(&GITTRACKS).await?;
    let source = configmaps_synced(&cluster, &instance, &repo, 8).await?;
    // 8 -> 4: half of the high-water mark, allowed.
    let four = keep(&repo, 4, 8)?;
    cluster.synced(&instance, &source, &four).await?;
    cluster
        .gone(&instance, &source, &cluster.configmaps("foo"), "cm-4")
        .await?;

    // The window is on the status: a new instance still counts the first prune.
    instance.stop().await;
    let instance = cluster.instance(&GITTRACKS).await?;
    // 4 -> 2: within the hour, 6 of 8, blocked.
    keep(&repo, 2, 4)?;
    let message = stalled_reason(&cluster, &instance, &source, reasons::MASS_PRUNE_BLOCKED).await?;
    assert!(message.contains("4 pruned earlier"), "{message}");
    assert!(message.contains("high-water mark of 8"), "{message}");
    instance.rounds(&source, 2).await;
    assert!(cluster.exists(&cluster.configmaps("foo"), "cm-2").await?);
    assert!(cluster.exists(&cluster.configmaps("foo"), "cm-3").await?);
    let window = cluster
        .status(&source)
        .await?
        .unwrap()
        .prune_window
        .unwrap();
    assert_eq!((window.high_water_mark, window.pruned), (8, 4));
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn the_allow_annotation_is_removed_after_the_round_it_allowed() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let repo = Repo::new()?;
    let instance = cluster.instance(&GITTRACKS).await?;
    let source = configmaps_synced(&cluster, &instance, &repo, 4).await?;
    let one = keep(&repo, 1, 4)?;
    stalled_reason(&cluster, &instance, &source, reasons::MASS_PRUNE_BLOCKED).await?;

    annotate(&gittracks(&cluster, "foo"), "apps", ALLOW).await?;
    cluster.synced(&instance, &source, &one).await?;
    for name in ["cm-1", "cm-2", "cm-3"] {
        cluster
            .gone(&instance, &source, &cluster.configmaps("foo"), name)
            .await?;
    }
    eventually("the annotation to be removed", || async {
        let stored = gittracks(&cluster, "foo").get("apps").await?;
        Ok((!stored
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key(ALLOW))
        .then_some(()))
    })
    .await?;
    let allowed = events(&cluster, "foo", "MassPruneAllowed").await?;
    assert!(
        allowed.iter().any(|note| note.contains(ALLOW)),
        "{allowed:?}"
    );
    instance.stop().await;
    Ok(())
}

/// Three GitTracks in `shop`, each with its own repository declaring ConfigMap `via-ssh`
/// (values `first`, `second`, `third`); `first` is synced before the others exist.
async fn three_sources_one_object(
    cluster: &Cluster,
    instance: &Instance,
) -> anyhow::Result<(Vec<Repo>, Vec<SourceRef>)> {
    cluster.namespace("shop").await?;
    let mut repos = Vec::new();
    let mut sources = Vec::new();
    for name in ["first", "second", "third"] {
        let repo = Repo::new()?;
        repo.write("via-ssh.yaml", &configmap(None, "via-ssh", name))?;
        repo.write(&format!("{name}.yaml"), &configmap(None, name, name))?;
        let commit = repo.commit("via-ssh")?;
        let source = gittrack_with_repo(cluster, "shop", name, &repo, Some("Delete")).await?;
        cluster.synced(instance, &source, &commit).await?;
        repos.push(repo);
        sources.push(source);
    }
    Ok((repos, sources))
}

async fn value_of(cluster: &Cluster, name: &str) -> anyhow::Result<Option<String>> {
    Ok(cluster
        .configmaps("shop")
        .get_opt(name)
        .await?
        .and_then(|cm| cm.data["data"]["value"].as_str().map(str::to_owned)))
}

#[tokio::test]
async fn a_second_source_declaring_an_object_reports_a_management_conflict() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let instance = cluster.instance(&GITTRACKS).await?;
    let (_repos, sources) = three_sources_one_object(&cluster, &instance).await?;
    for source in &sources[1..] {
        let status = cluster.status(source).await?.unwrap_or_default();
        let ready = find_condition(&status.conditions, types::READY).unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", reasons::MANAGEMENT_CONFLICT),
            "{source}"
        );
        let conflict = status
            .errors
            .iter()
            .find(|error| error.code == "ARB3020")
            .expect("ARB3020");
        assert_eq!(conflict.object.as_deref(), Some("ConfigMap/shop/via-ssh"));
        assert!(
            conflict.message.contains("GitTrack/shop/first"),
            "{}",
            conflict.message
        );
        assert_eq!(
            status.objects_applied, 1,
            "{source}: only its own ConfigMap"
        );
    }
    // Applied by the first alone, tracked by the first alone.
    assert_eq!(
        value_of(&cluster, "via-ssh").await?.as_deref(),
        Some("first")
    );
    let tracking = cluster.api(
        "arbor.dev/v1alpha1",
        "GitTrackObject",
        "gittrackobjects",
        Some("shop"),
    );
    let tracked = tracking.get("configmap.via-ssh").await?;
    let owners = tracked.metadata.owner_references.unwrap_or_default();
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].name, "first");
    let conflicts = events(&cluster, "shop", reasons::MANAGEMENT_CONFLICT).await?;
    assert!(
        conflicts
            .iter()
            .any(|note| note.contains("GitTrack/shop/first")),
        "{conflicts:?}"
    );
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn pruning_or_deleting_one_source_keeps_an_object_another_declares() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let instance = cluster.instance(&GITTRACKS).await?;
    let (repos, sources) = three_sources_one_object(&cluster, &instance).await?;

    // Deleting the manager (deletionPolicy Delete, allowed) deletes its own ConfigMap only.
    annotate(&gittracks(&cluster, "shop"), "first", ALLOW).await?;
    gittracks(&cluster, "shop")
        .delete("first", &DeleteParams::default())
        .await?;
    eventually("the first source to go", || async {
        Ok(gittracks(&cluster, "shop")
            .get_opt("first")
            .await?
            .is_none()
            .then_some(()))
    })
    .await?;
    assert!(!cluster.exists(&cluster.configmaps("shop"), "first").await?);
    assert!(
        cluster
            .exists(&cluster.configmaps("shop"), "via-ssh")
            .await?
    );
    // Another declaring source takes it over at its next round.
    let taken = eventually("another source to take via-ssh over", || async {
        for source in &sources[1..] {
            instance.request_round(source);
        }
        let value = value_of(&cluster, "via-ssh").await?;
        Ok(value.filter(|value| value == "second" || value == "third"))
    })
    .await?;
    let (manager, other) = if taken == "second" { (1, 2) } else { (2, 1) };

    // Pruning it from the new manager's repository leaves it to the last one.
    repos[manager].remove("via-ssh.yaml")?;
    let commit = repos[manager].commit("no via-ssh")?;
    cluster
        .synced(&instance, &sources[manager], &commit)
        .await?;
    let expected = if other == 1 { "second" } else { "third" };
    eventually("the last source to take via-ssh over", || async {
        instance.request_round(&sources[other]);
        Ok((value_of(&cluster, "via-ssh").await?.as_deref() == Some(expected)).then_some(()))
    })
    .await?;
    instance.rounds(&sources[manager], 2).await;
    assert!(
        cluster
            .exists(&cluster.configmaps("shop"), "via-ssh")
            .await?
    );
    instance.stop().await;
    Ok(())
}

/// A leader syncing ConfigMaps `names` (one write at a time) for an Orphan GitTrack, which is
/// then deleted; returned once the first tracking object's DELETE of the deletion is held (8 s),
/// with the request log cleared.
async fn a_source_deletion_with_its_first_release_held(
    names: &[&str],
) -> anyhow::Result<(Cluster, Instance)> {
    let cluster = Cluster::start().await?;
    cluster.namespace("arbor-system").await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    for name in names {
        repo.write(&format!("{name}.yaml"), &configmap(None, name, "1"))?;
    }
    let commit = repo.commit("configmaps")?;
    let mut flags = GITTRACKS.to_vec();
    flags.push("--max-concurrent-writes=1");
    let instance = start_instance(cluster.config(), true, &flags).await?;
    let source = gittrack_with_repo(&cluster, "foo", "apps", &repo, Some("Orphan")).await?;
    cluster.synced(&instance, &source, &commit).await?;

    let faults = cluster.emu.faults();
    faults.inject(
        arbor_kube_emu::faults::Fault::held_once(std::time::Duration::from_secs(8))
            .verbs(&["delete"])
            .resources(&["arbor.dev/gittrackobjects"]),
    );
    gittracks(&cluster, "foo")
        .delete("apps", &DeleteParams::default())
        .await?;
    eventually("the first tracking object's DELETE to be held", || async {
        Ok((faults.fired() == vec![1]).then_some(()))
    })
    .await?;
    cluster.emu.requests().reset();
    Ok((cluster, instance))
}

/// Issue 22 (third review): deleting a source starts no write once its replica stops. A leader
/// (one shard) deletes an orphaning GitTrack's three tracking objects one at a time; the API
/// server holds the first DELETE for 8 s while the leader stops: that one is answered, the
/// other two are never sent, and the next leader goes on from the inventory left.
#[tokio::test]
async fn deleting_a_source_sends_no_further_write_once_the_leader_stops() -> anyhow::Result<()> {
    let (cluster, instance) =
        a_source_deletion_with_its_first_release_held(&["a", "b", "c"]).await?;
    instance.stop().await;

    assert_eq!(
        cluster
            .emu
            .requests()
            .count("delete", "arbor.dev/gittrackobjects"),
        1,
        "only the held DELETE was sent"
    );
    Ok(())
}

/// A source's deletion whose last write is held when the leader stops writes nothing to the
/// source after it: no progress on its status and no removal of its finalizer by a next pass
/// (both the next holder's to write). Before, the next pass listed the inventory again and
/// removed the finalizer.
#[tokio::test]
async fn deleting_a_source_writes_no_progress_once_the_leader_stops() -> anyhow::Result<()> {
    let (cluster, instance) = a_source_deletion_with_its_first_release_held(&["a"]).await?;
    instance.stop().await;

    let requests = cluster.emu.requests();
    assert_eq!(
        requests.count("delete", "arbor.dev/gittrackobjects"),
        1,
        "the held DELETE was answered before the stop ended"
    );
    assert_eq!(
        requests.count("patch", "arbor.dev/gittracks")
            + requests.count("update", "arbor.dev/gittracks"),
        0,
        "no status write after the stop began: {:?}",
        requests.counts()
    );
    Ok(())
}
