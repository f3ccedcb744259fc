//! The ownership matrix and both controller reconcile matrices of seeds/002, through running
//! arbor-gitsync instances.

mod controller_support;

use arbor_api::keys::SourceRef;
use arbor_gitsync::run::Args;
use clap::Parser;
use controller_support::*;

fn cluster_role_yaml(name: &str) -> String {
    cluster_role(name, "pods")
}

/// Asserts that the tracking object `name` in `namespace` is owned by `owner_kind/owner_name`
/// with `controller: true` and carries the gitsync finalizer.
async fn assert_tracked_by(
    cluster: &Cluster,
    namespace: Option<&str>,
    name: &str,
    owner_kind: &str,
    owner_name: &str,
) -> anyhow::Result<()> {
    let api = match namespace {
        Some(namespace) => cluster.api(
            "arbor.dev/v1alpha1",
            "GitTrackObject",
            "gittrackobjects",
            Some(namespace),
        ),
        None => cluster.api(
            "arbor.dev/v1alpha1",
            "ClusterGitTrackObject",
            "clustergittrackobjects",
            None,
        ),
    };
    let tracking = api.get(name).await?;
    let owners = tracking
        .metadata
        .owner_references
        .clone()
        .unwrap_or_default();
    assert_eq!(owners.len(), 1, "{name}: {owners:?}");
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].name.as_str()),
        (owner_kind, owner_name)
    );
    assert_eq!(owners[0].controller, Some(true));
    assert!(
        tracking
            .metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"arbor.dev/gitsync".to_owned())
    );
    Ok(())
}

#[tokio::test]
async fn gittrack_applies_only_its_namespace_and_lists_cluster_scoped_and_cross_namespace_objects_as_ignored()
-> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    cluster.namespace("bar").await?;
    let repo = Repo::new()?;
    repo.write("app.yaml", &configmap(None, "app", "1"))?;
    repo.write("other.yaml", &configmap(Some("bar"), "other", "1"))?;
    repo.write("clusterrole.yaml", &cluster_role_yaml("reader"))?;
    let commit = repo.commit("flat")?;
    let instance = cluster
        .instance(&["--gittrack-mode=Enabled", "--clustergittrack-mode=Disabled"])
        .await?;
    let source = cluster.create_gittrack("foo", "apps", &repo).await?;
    let status = cluster.synced(&instance, &source, &commit).await?;

    let app = cluster.configmaps("foo").get("app").await?;
    assert!(
        app.metadata.owner_references.is_none(),
        "applied objects carry no ownerReference"
    );
    assert_tracked_by(&cluster, Some("foo"), "configmap.app", "GitTrack", "apps").await?;
    assert!(!cluster.exists(&cluster.configmaps("bar"), "other").await?);
    assert!(!cluster.exists(&cluster.clusterroles(), "reader").await?);

    let ignored = &status.ignored_files;
    assert!(
        ignored["other.yaml"].contains("Cross namespace never allowed"),
        "{ignored:?}"
    );
    assert!(
        ignored["clusterrole.yaml"].contains("GitTrack can never own cluster-scoped resource"),
        "{ignored:?}"
    );
    assert_eq!(
        (
            status.objects_discovered,
            status.objects_ignored,
            status.objects_applied
        ),
        (3, 2, 1)
    );
    instance.stop().await;
    Ok(())
}

/// A tracking object whose controller ownerReference names a `GitTrack` of another API group
/// is another project's claim, not an Arbor source's (the webhook's rule,
/// `OwningSourceKind::named_by`), and still a claim: kube-apiserver allows one controller per
/// object, so the GitTrack declaring the object reports the conflict (ARB3020, naming that
/// controller) and leaves the tracking object and the ConfigMap as they are.
#[tokio::test]
async fn a_tracking_object_controlled_by_a_gittrack_of_a_foreign_group_is_a_conflict_left_alone()
-> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    let tracking_objects = cluster.api(
        "arbor.dev/v1alpha1",
        "GitTrackObject",
        "gittrackobjects",
        Some("foo"),
    );
    let foreign: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "arbor.dev/v1alpha1",
        "kind": "GitTrackObject",
        "metadata": {
            "name": "configmap.app",
            "namespace": "foo",
            "ownerReferences": [{
                "apiVersion": "other.example/v1alpha1", "kind": "GitTrack", "name": "elsewhere",
                "uid": "8d0c7b52-foreign-gittrack", "controller": true,
            }],
        },
        "spec": {"name": "app", "kind": "ConfigMap", "data": {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "app", "namespace": "foo"}, "data": {"value": "0"},
        }},
    }))?;
    tracking_objects
        .create(&kube::api::PostParams::default(), &foreign)
        .await?;
    let repo = Repo::new()?;
    repo.write("app.yaml", &configmap(None, "app", "1"))?;
    let commit = repo.commit("app")?;
    let instance = cluster
        .instance(&["--gittrack-mode=Enabled", "--clustergittrack-mode=Disabled"])
        .await?;
    let source = cluster.create_gittrack("foo", "apps", &repo).await?;
    let status = cluster.synced(&instance, &source, &commit).await?;

    let conflict = status
        .errors
        .iter()
        .find(|error| error.code == "ARB3020")
        .unwrap_or_else(|| panic!("ARB3020 expected: {status:?}"));
    assert_eq!(conflict.object.as_deref(), Some("ConfigMap/foo/app"));
    assert!(
        conflict
            .message
            .contains("GitTrack/elsewhere (other.example/v1alpha1)"),
        "{}",
        conflict.message
    );
    assert_eq!(status.objects_applied, 0, "{status:?}");
    assert!(cluster.configmaps("foo").get_opt("app").await?.is_none());
    let owners = tracking_objects
        .get("configmap.app")
        .await?
        .metadata
        .owner_references
        .unwrap_or_default();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(owners[0].api_version, "other.example/v1alpha1");
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn includenamespaced_clustergittrack_owns_gittrackobjects_in_every_namespace_and_cgtos()
-> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    cluster.namespace("bar").await?;
    let repo = Repo::new()?;
    repo.write("foo.yaml", &configmap(Some("foo"), "a", "1"))?;
    repo.write("bar.yaml", &configmap(Some("bar"), "b", "1"))?;
    repo.write("clusterrole.yaml", &cluster_role_yaml("reader"))?;
    let commit = repo.commit("flat")?;
    // Row A: the default --clustergittrack-mode=IncludeNamespaced.
    let instance = cluster.instance(&[]).await?;
    let source = cluster
        .create_cluster_gittrack("platform", &repo, "Flat")
        .await?;
    let status = cluster.synced(&instance, &source, &commit).await?;
    assert!(
        status.ignored_files.is_empty(),
        "{:?}",
        status.ignored_files
    );
    assert_tracked_by(
        &cluster,
        Some("foo"),
        "configmap.a",
        "ClusterGitTrack",
        "platform",
    )
    .await?;
    assert_tracked_by(
        &cluster,
        Some("bar"),
        "configmap.b",
        "ClusterGitTrack",
        "platform",
    )
    .await?;
    assert_tracked_by(
        &cluster,
        None,
        "clusterrole.rbac.authorization.k8s.io.reader",
        "ClusterGitTrack",
        "platform",
    )
    .await?;
    assert!(cluster.exists(&cluster.clusterroles(), "reader").await?);
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn excludenamespaced_clustergittrack_applies_only_cluster_scoped_objects()
-> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    repo.write("foo.yaml", &configmap(Some("foo"), "a", "1"))?;
    repo.write("clusterrole.yaml", &cluster_role_yaml("reader"))?;
    let commit = repo.commit("flat")?;
    // Row B.
    let instance = cluster
        .instance(&["--clustergittrack-mode=ExcludeNamespaced"])
        .await?;
    let source = cluster
        .create_cluster_gittrack("platform", &repo, "Flat")
        .await?;
    let status = cluster.synced(&instance, &source, &commit).await?;
    assert!(cluster.exists(&cluster.clusterroles(), "reader").await?);
    assert!(!cluster.exists(&cluster.configmaps("foo"), "a").await?);
    assert!(
        status.ignored_files["foo.yaml"].contains("ExcludeNamespaced"),
        "{:?}",
        status.ignored_files
    );
    instance.stop().await;
    Ok(())
}

/// Namespaces `foo` and `bar`, a repository declaring the ConfigMap `app` (no namespace) and
/// one declaring the ClusterRole `reader`, each with its commit.
async fn two_namespaces_and_two_repos() -> anyhow::Result<(Cluster, (Repo, String), (Repo, String))>
{
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    cluster.namespace("bar").await?;
    let repo = Repo::new()?;
    repo.write("app.yaml", &configmap(None, "app", "1"))?;
    let commit = repo.commit("flat")?;
    let cluster_repo = Repo::new()?;
    cluster_repo.write("clusterrole.yaml", &cluster_role_yaml("reader"))?;
    let cluster_commit = cluster_repo.commit("cluster")?;
    Ok((cluster, (repo, commit), (cluster_repo, cluster_commit)))
}

#[tokio::test]
async fn two_namespaced_instances_each_touch_only_their_own_gittracks_and_no_clustergittrack()
-> anyhow::Result<()> {
    let (cluster, apps, cluster_apps) = two_namespaces_and_two_repos().await?;
    let (repo, commit) = apps;
    let (cluster_repo, _) = cluster_apps;

    // Rows 2 and 3 of the GitTrack matrix (with ClusterGitTrack row C).
    let in_foo = cluster
        .instance(&[
            "--gittrack-mode=Enabled",
            "--clustergittrack-mode=Disabled",
            "--namespace=foo",
        ])
        .await?;
    let in_bar = cluster
        .instance(&[
            "--gittrack-mode=Enabled",
            "--clustergittrack-mode=Disabled",
            "--namespace=bar",
        ])
        .await?;
    let foo = cluster.create_gittrack("foo", "apps", &repo).await?;
    let bar = cluster.create_gittrack("bar", "apps", &repo).await?;
    let platform = cluster
        .create_cluster_gittrack("platform", &cluster_repo, "Flat")
        .await?;
    cluster.synced(&in_foo, &foo, &commit).await?;
    cluster.synced(&in_bar, &bar, &commit).await?;
    assert!(cluster.exists(&cluster.configmaps("foo"), "app").await?);
    assert!(cluster.exists(&cluster.configmaps("bar"), "app").await?);

    let sources_of = |instance: &Instance| -> Vec<SourceRef> {
        instance
            .running()
            .context()
            .registry
            .sources()
            .into_iter()
            .map(|(source, _)| source)
            .collect()
    };
    assert_eq!(sources_of(&in_foo), vec![foo.clone()]);
    assert_eq!(sources_of(&in_bar), vec![bar.clone()]);
    // Nobody reconciles the ClusterGitTrack.
    in_foo.rounds(&foo, 1).await;
    assert!(cluster.status(&platform).await?.is_none());
    assert!(!cluster.exists(&cluster.clusterroles(), "reader").await?);
    in_foo.stop().await;
    in_bar.stop().await;
    Ok(())
}

#[tokio::test]
async fn gittrack_row_1_and_clustergittrack_row_a_together_reconcile_both_kinds()
-> anyhow::Result<()> {
    let (cluster, apps, cluster_apps) = two_namespaces_and_two_repos().await?;
    let (repo, commit) = apps;
    let (cluster_repo, cluster_commit) = cluster_apps;
    let instance = cluster.instance(&["--gittrack-mode=Enabled"]).await?;
    let foo = cluster.create_gittrack("foo", "apps", &repo).await?;
    let bar = cluster.create_gittrack("bar", "apps", &repo).await?;
    let platform = cluster
        .create_cluster_gittrack("platform", &cluster_repo, "Flat")
        .await?;
    cluster.synced(&instance, &foo, &commit).await?;
    cluster.synced(&instance, &bar, &commit).await?;
    cluster
        .synced(&instance, &platform, &cluster_commit)
        .await?;
    assert!(cluster.exists(&cluster.clusterroles(), "reader").await?);
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn clustergittrack_row_a_alone_does_not_reconcile_gittracks() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    repo.write("app.yaml", &configmap(None, "app", "1"))?;
    let commit = repo.commit("flat")?;
    let instance = cluster.instance(&[]).await?;
    let platform = cluster
        .create_cluster_gittrack("platform", &repo, "Flat")
        .await?;
    let foo = cluster.create_gittrack("foo", "apps", &repo).await?;
    let status = cluster.synced(&instance, &platform, &commit).await?;
    // A ClusterGitTrack's namespaced object without a namespace has nowhere to go.
    assert!(
        status.ignored_files["app.yaml"].contains("metadata.namespace"),
        "{:?}",
        status.ignored_files
    );
    assert!(cluster.status(&foo).await?.is_none());
    assert!(!cluster.exists(&cluster.configmaps("foo"), "app").await?);
    instance.stop().await;
    Ok(())
}

fn settings_error(flags: &[&str]) -> String {
    let mut argv = vec!["arbor-gitsync"];
    argv.extend_from_slice(flags);
    Args::try_parse_from(argv)
        .expect("the flags parse")
        .settings()
        .expect_err("the combination is refused")
        .to_string()
}

#[test]
fn namespace_with_the_default_clustergittrack_mode_is_refused_and_says_to_set_the_mode() {
    let error = settings_error(&["--gittrack-mode=Enabled", "--namespace=foo"]);
    assert!(error.contains("--clustergittrack-mode"), "{error}");
}

#[test]
fn namespace_with_any_clustergittrack_mode_but_disabled_is_refused_naming_both_flags() {
    // As Faros: --namespace serves the GitTracks of one namespace and no ClusterGitTrack.
    for mode in ["IncludeNamespaced", "ExcludeNamespaced"] {
        let mode_flag = format!("--clustergittrack-mode={mode}");
        let error = settings_error(&["--gittrack-mode=Enabled", "--namespace=foo", &mode_flag]);
        assert!(
            error.contains("--namespace=foo")
                && error.contains(&mode_flag)
                && error.contains("set --clustergittrack-mode=Disabled"),
            "{error}"
        );
    }
}

#[test]
fn namespace_without_gittracks_and_nothing_watched_are_refused() {
    let error = settings_error(&["--clustergittrack-mode=Disabled", "--namespace=foo"]);
    assert!(error.contains("--gittrack-mode=Enabled"), "{error}");
    let error = settings_error(&["--clustergittrack-mode=Disabled"]);
    assert!(error.contains("watch nothing"), "{error}");
}

#[test]
fn flags_default_as_the_chart_expects() {
    let args = Args::try_parse_from(["arbor-gitsync"]).unwrap();
    assert_eq!(args.max_prune_fraction, 0.5);
    assert_eq!(args.resync_period, std::time::Duration::from_secs(600));
    assert_eq!(
        args.management_label.to_string(),
        "arbor.dev/managed=enabled"
    );
    assert_eq!(args.cache_dir, std::path::PathBuf::from("/var/cache/arbor"));
    assert!(Args::try_parse_from(["arbor-gitsync", "--max-prune-fraction=1.5"]).is_err());
}
