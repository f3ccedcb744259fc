//! The management action table of seeds/000 and its six examples, through a running
//! arbor-gitsync on an emulated cluster with a hierarchical (Nomos) repository.

mod controller_support;

use controller_support::*;
use serde_json::json;

type Synced = (Cluster, Instance, Repo, arbor_api::keys::SourceRef);

/// foo-corp synced into `cluster` by a ClusterGitTrack, on an instance with the default flags.
async fn sync_foo_corp(cluster: Cluster) -> anyhow::Result<Synced> {
    let repo = Repo::new()?;
    foo_corp(&repo)?;
    let commit = repo.commit("foo-corp")?;
    let instance = cluster.instance(&[]).await?;
    let source = cluster
        .create_cluster_gittrack("foo-corp", &repo, "Hierarchical")
        .await?;
    cluster.synced(&instance, &source, &commit).await?;
    Ok((cluster, instance, repo, source))
}

/// A new cluster with foo-corp synced.
async fn foo_corp_synced() -> anyhow::Result<Synced> {
    sync_foo_corp(Cluster::start().await?).await
}

#[tokio::test]
async fn example_pod_accountant_not_in_git_is_not_deleted_or_altered() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    let created = cluster
        .create(
            &cluster.clusterroles(),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "pod-accountant"},
                   "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}),
        )
        .await?;
    let (cluster, instance, _repo, source) = sync_foo_corp(cluster).await?;
    instance.rounds(&source, 2).await;

    // Row 6: a Sync for ClusterRole, pod-accountant not in git and without the label.
    let live = cluster.clusterroles().get("pod-accountant").await?;
    assert_eq!(
        live.metadata.resource_version,
        created.metadata.resource_version
    );
    assert!(
        cluster
            .exists(&cluster.clusterroles(), "pod-creator")
            .await?
    );
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn example_quota_viewer_is_created_then_removed_when_deleted_from_git() -> anyhow::Result<()>
{
    let (cluster, instance, repo, source) = foo_corp_synced().await?;
    repo.write(
        "cluster/quota-viewer-clusterrole.yaml",
        &cluster_role("quota-viewer", "resourcequotas"),
    )?;
    let added = repo.commit("add quota-viewer")?;
    cluster.synced(&instance, &source, &added).await?;

    // Row 4: declared, not on the cluster: created, with the management label.
    let live = cluster.clusterroles().get("quota-viewer").await?;
    assert_eq!(
        labels(&live).get(LABEL).map(String::as_str),
        Some("enabled")
    );
    assert_eq!(
        live.data["rules"][0]["resources"],
        json!(["resourcequotas"])
    );

    repo.remove("cluster/quota-viewer-clusterrole.yaml")?;
    let removed = repo.commit("remove quota-viewer")?;
    cluster.synced(&instance, &source, &removed).await?;
    // Row 5: no longer declared, labelled: deleted (through the ClusterGitTrackObject's
    // finalizer).
    cluster
        .gone(&instance, &source, &cluster.clusterroles(), "quota-viewer")
        .await?;
    assert!(
        cluster
            .exists(&cluster.clusterroles(), "pod-creator")
            .await?
    );
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn example_job_creator_is_updated_to_match_git() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("shipping-dev").await?;
    cluster
        .create(
            &cluster.roles("shipping-dev"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "job-creator", "labels": {LABEL: "enabled"}},
                   "rules": [{"apiGroups": ["batch"], "resources": ["cronjobs"], "verbs": ["get"]}]}),
        )
        .await?;
    let (cluster, instance, _repo, _source) = sync_foo_corp(cluster).await?;

    // Row 2: declared, labelled, different: updated to match git.
    let live = cluster.roles("shipping-dev").get("job-creator").await?;
    assert_eq!(live.data["rules"][0]["resources"], json!(["jobs"]));
    assert_eq!(live.data["rules"][0]["verbs"], json!(["*"]));
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn example_pod_creators_match_in_every_descendant_then_are_removed_from_them()
-> anyhow::Result<()> {
    let (cluster, instance, repo, source) = foo_corp_synced().await?;
    for namespace in DESCENDANTS {
        let live = cluster.rolebindings(namespace).get("pod-creators").await?;
        assert_eq!(
            live.data["subjects"][0]["name"], "bob@foo-corp.com",
            "{namespace}"
        );
        assert_eq!(live.data["roleRef"]["name"], "pod-creator", "{namespace}");
    }

    // Someone modifies shipping-prod's copy: the next full round puts it back.
    let prod = cluster.rolebindings("shipping-prod");
    cluster
        .edit(&prod, "pod-creators", json!({"subjects": [{"kind": "User", "name": "mallory@evil.com", "apiGroup": "rbac.authorization.k8s.io"}]}))
        .await?;
    eventually(
        "pod-creators in shipping-prod to match git again",
        || async {
            instance.request_round(&source);
            let live = prod.get("pod-creators").await?;
            Ok((live.data["subjects"][0]["name"] == "bob@foo-corp.com").then_some(()))
        },
    )
    .await?;

    repo.remove(&format!("{BACKEND}/pod-creator-rolebinding.yaml"))?;
    let removed = repo.commit("remove pod-creators")?;
    cluster.synced(&instance, &source, &removed).await?;
    for namespace in DESCENDANTS {
        cluster
            .gone(
                &instance,
                &source,
                &cluster.rolebindings(namespace),
                "pod-creators",
            )
            .await?;
    }
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn example_secret_admin_is_kept_until_labelled_then_deleted() -> anyhow::Result<()> {
    let (cluster, instance, _repo, source) = foo_corp_synced().await?;
    let prod = cluster.roles("shipping-prod");
    cluster
        .create(
            &prod,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "secret-admin"},
                   "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]}]}),
        )
        .await?;
    instance.rounds(&source, 2).await;
    // Row 6: not declared, no label: left alone.
    assert!(cluster.exists(&prod, "secret-admin").await?);

    cluster
        .edit(
            &prod,
            "secret-admin",
            json!({"metadata": {"labels": {LABEL: "enabled"}}}),
        )
        .await?;
    // Row 5: not declared, labelled: deleted.
    cluster
        .gone(&instance, &source, &prod, "secret-admin")
        .await?;
    assert!(
        cluster
            .exists(&cluster.roles("shipping-dev"), "job-creator")
            .await?
    );
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn example_shipping_admin_is_created() -> anyhow::Result<()> {
    let (cluster, instance, repo, source) = foo_corp_synced().await?;
    repo.write(
        &format!("{BACKEND}/shipping-prod/shipping-admin-role.yaml"),
        &role("shipping-admin", "deployments"),
    )?;
    let added = repo.commit("add shipping-admin")?;
    cluster.synced(&instance, &source, &added).await?;
    let live = cluster.roles("shipping-prod").get("shipping-admin").await?;
    assert_eq!(
        labels(&live).get(LABEL).map(String::as_str),
        Some("enabled")
    );
    assert!(
        !cluster
            .exists(&cluster.roles("shipping-dev"), "shipping-admin")
            .await?
    );
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn row_3_declared_object_without_the_label_is_not_updated_and_reported_unmanaged()
-> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("shipping-dev").await?;
    let created = cluster
        .create(
            &cluster.roles("shipping-dev"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "job-creator"},
                   "rules": [{"apiGroups": ["batch"], "resources": ["cronjobs"], "verbs": ["get"]}]}),
        )
        .await?;
    let (cluster, instance, _repo, source) = sync_foo_corp(cluster).await?;
    let status = cluster.status(&source).await?.unwrap_or_default();

    let live = cluster.roles("shipping-dev").get("job-creator").await?;
    assert_eq!(
        live.metadata.resource_version,
        created.metadata.resource_version
    );
    let unmanaged = status
        .errors
        .iter()
        .find(|error| {
            error.object.as_deref()
                == Some("Role.rbac.authorization.k8s.io/shipping-dev/job-creator")
        })
        .expect("the unmanaged object is reported");
    assert_eq!(unmanaged.code, "ARB3006");
    assert_eq!(
        unmanaged.file.as_deref(),
        Some("namespaces/online/shipping-app-backend/shipping-dev/job-creator-role.yaml")
    );
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn row_8_object_whose_sync_is_removed_is_left_on_the_cluster() -> anyhow::Result<()> {
    let (cluster, instance, repo, source) = foo_corp_synced().await?;
    assert!(
        cluster
            .exists(&cluster.configmaps("shipping-dev"), "settings")
            .await?
    );
    repo.remove("system/core-sync.yaml")?;
    repo.remove(&format!("{BACKEND}/settings-configmap.yaml"))?;
    let commit = repo.commit("stop syncing ConfigMaps")?;
    cluster.synced(&instance, &source, &commit).await?;
    // The tracking objects go; the ConfigMaps stay, because no Sync declares their kind.
    let tracking = cluster.api(
        "arbor.dev/v1alpha1",
        "GitTrackObject",
        "gittrackobjects",
        Some("shipping-dev"),
    );
    eventually("the settings tracking object to go", || async {
        Ok((!cluster.exists(&tracking, "configmap.settings").await?).then_some(()))
    })
    .await?;
    for namespace in DESCENDANTS {
        assert!(
            cluster
                .exists(&cluster.configmaps(namespace), "settings")
                .await?,
            "{namespace}"
        );
    }
    // Explain names row 8 and the state the round records for it: ignored.
    let explained = instance
        .grpc()
        .await?
        .explain(arbor_proto::v1::ExplainRequest {
            object: Some(arbor_proto::v1::ObjectRef {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: "shipping-dev".into(),
                name: "settings".into(),
            }),
        })
        .await?
        .into_inner();
    assert_eq!(explained.decision.unwrap().rule, "seeds/000 row 8");
    assert_eq!(
        explained.state,
        i32::from(arbor_proto::v1::ManagedState::Ignored)
    );
    instance.stop().await;
    Ok(())
}

#[tokio::test]
async fn explain_names_the_row_and_reason_for_rows_1_6_and_7() -> anyhow::Result<()> {
    let (cluster, instance, _repo, _source) = foo_corp_synced().await?;
    cluster
        .create(
            &cluster.clusterroles(),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "pod-accountant"}, "rules": []}),
        )
        .await?;
    let mut grpc = instance.grpc().await?;
    let explain = |name: &str| arbor_proto::v1::ExplainRequest {
        object: Some(arbor_proto::v1::ObjectRef {
            group: "rbac.authorization.k8s.io".into(),
            version: "v1".into(),
            kind: "ClusterRole".into(),
            namespace: String::new(),
            name: name.into(),
        }),
    };
    let in_sync = grpc.explain(explain("pod-creator")).await?.into_inner();
    let decision = in_sync.decision.unwrap();
    assert_eq!(decision.rule, "seeds/000 row 1");
    assert!(
        decision.reason.starts_with("[managed-and-matching]"),
        "{}",
        decision.reason
    );
    assert_eq!(
        in_sync.declarations[0].file,
        "cluster/pod-creator-clusterrole.yaml"
    );
    let inputs = in_sync.inputs.unwrap();
    assert_eq!((inputs.has_label, inputs.matches), (Some(true), Some(true)));

    let unmanaged = grpc.explain(explain("pod-accountant")).await?.into_inner();
    assert_eq!(unmanaged.decision.unwrap().rule, "seeds/000 row 6");
    assert!(unmanaged.declarations.is_empty());

    let nowhere = grpc.explain(explain("nobody")).await?.into_inner();
    let decision = nowhere.decision.unwrap();
    assert_eq!(decision.rule, "seeds/000 row 7");
    assert_eq!(decision.action, i32::from(arbor_proto::v1::Action::None));
    instance.stop().await;
    Ok(())
}
