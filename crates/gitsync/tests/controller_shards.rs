//! gitsync replicas sharing sources through shard Leases (`--shards`): what one replica decides
//! for a source must not depend on which replica ran the rounds of the others, and a replica
//! makes no write for a shard it no longer holds.

mod controller_support;

use std::collections::BTreeSet;
use std::time::Duration;

use arbor_api::GitTrack;
use arbor_api::keys::SourceRef;
use arbor_kube_emu::faults::{Fault, FaultEffect};
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};

use controller_support::*;

const SHARDS: u32 = 2;

/// A replica's flags: its identity, two shards and a short Lease (renewal deadline 2 s); with
/// `cluster_gittracks`, the default `--clustergittrack-mode` (ClusterGitTracks watched too).
fn replica(identity: &str, cluster_gittracks: bool) -> Vec<String> {
    let mode = (!cluster_gittracks).then_some("--clustergittrack-mode=Disabled");
    ["--gittrack-mode=Enabled"]
        .into_iter()
        .chain(mode)
        .chain([
            "--shards=2",
            "--lease-duration=3s",
            "--lease-renew-interval=1s",
        ])
        .map(str::to_owned)
        .chain([format!("--lease-identity={identity}")])
        .collect()
}

async fn start_replica(cluster: &Cluster, identity: &str) -> anyhow::Result<Instance> {
    start_replica_with(cluster, identity, false, &[]).await
}

async fn start_replica_with(
    cluster: &Cluster,
    identity: &str,
    cluster_gittracks: bool,
    extra: &[String],
) -> anyhow::Result<Instance> {
    let mut flags = replica(identity, cluster_gittracks);
    flags.extend_from_slice(extra);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    start_instance(cluster.config(), true, &flags).await
}

/// Replicas `gitsync-a` and `gitsync-b`, once each holds one of the two shards.
async fn two_replicas(cluster: &Cluster) -> anyhow::Result<(Instance, Instance)> {
    two_replicas_with(cluster, false, &[]).await
}

/// [`two_replicas`], each also given `extra` flags.
async fn two_replicas_with(
    cluster: &Cluster,
    cluster_gittracks: bool,
    extra: &[String],
) -> anyhow::Result<(Instance, Instance)> {
    let a = start_replica_with(cluster, "gitsync-a", cluster_gittracks, extra).await?;
    let b = start_replica_with(cluster, "gitsync-b", cluster_gittracks, extra).await?;
    eventually("each replica to hold one shard", || async {
        Ok((held(&a).len() == 1 && held(&b).len() == 1 && held(&a) != held(&b)).then_some(()))
    })
    .await?;
    Ok((a, b))
}

fn held(instance: &Instance) -> BTreeSet<u32> {
    instance.running().context().shards.held()
}

async fn uid(cluster: &Cluster, source: &SourceRef) -> anyhow::Result<String> {
    let SourceRef::GitTrack { namespace, name } = source else {
        anyhow::bail!("a GitTrack was expected");
    };
    let api: Api<GitTrack> = Api::namespaced(cluster.client.clone(), namespace);
    Ok(api.get(name).await?.metadata.uid.unwrap_or_default())
}

async fn shard(cluster: &Cluster, source: &SourceRef) -> anyhow::Result<u32> {
    Ok(arbor_policy::shards::shard_of(
        &uid(cluster, source).await?,
        SHARDS,
    ))
}

/// The replica of `replicas` that holds `source`'s shard.
async fn holder<'a>(
    cluster: &Cluster,
    replicas: &'a [&'a Instance],
    source: &SourceRef,
) -> anyhow::Result<&'a Instance> {
    let shard = shard(cluster, source).await?;
    eventually(&format!("a replica to hold shard {shard}"), || async {
        Ok(replicas
            .iter()
            .copied()
            .find(|replica| held(replica).contains(&shard)))
    })
    .await
}

/// An emulated cluster with namespace foo, and the first source's repository (shared.yaml,
/// one.yaml) with its commit.
async fn with_first_repo() -> anyhow::Result<(Cluster, Repo, String)> {
    let cluster = Cluster::start().await?;
    cluster.namespace("arbor-system").await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    repo.write("shared.yaml", &configmap(None, "shared", "1"))?;
    repo.write("one.yaml", &configmap(None, "one", "1"))?;
    let commit = repo.commit("first")?;
    Ok((cluster, repo, commit))
}

/// Two GitTracks in foo whose shards two replicas hold, both declaring ConfigMap foo/shared:
/// the first (from `first_repo` at `first_commit`) owns it, the second (shared.yaml and
/// two.yaml) reports the conflict.
struct Shared<'a> {
    first: SourceRef,
    second: SourceRef,
    first_replica: &'a Instance,
    second_replica: &'a Instance,
    shared_uid: Option<String>,
    /// The second source's repository, kept while the test runs.
    _second_repo: Repo,
}

impl<'a> Shared<'a> {
    async fn declare(
        cluster: &Cluster,
        replicas: &'a [&'a Instance],
        first_repo: &Repo,
        first_commit: &str,
    ) -> anyhow::Result<Self> {
        let second_repo = Repo::new()?;
        second_repo.write("shared.yaml", &configmap(None, "shared", "1"))?;
        second_repo.write("two.yaml", &configmap(None, "two", "1"))?;
        let second_commit = second_repo.commit("second")?;
        let first = cluster.create_gittrack("foo", "first", first_repo).await?;
        let first_replica = holder(cluster, replicas, &first).await?;
        cluster.synced(first_replica, &first, first_commit).await?;
        let configmaps = cluster.configmaps("foo");
        let shared_uid = configmaps.get("shared").await?.metadata.uid;

        let second = in_the_other_shard(cluster, &first, &second_repo).await?;
        let second_replica = holder(cluster, replicas, &second).await?;
        assert!(!std::ptr::eq(first_replica, second_replica));
        reports_the_conflict(cluster, second_replica, &second, &second_commit).await?;
        Ok(Self {
            first,
            second,
            first_replica,
            second_replica,
            shared_uid,
            _second_repo: second_repo,
        })
    }
}

/// Syncs `second` at `commit` and checks that its status reports the conflict on foo/shared.
async fn reports_the_conflict(
    cluster: &Cluster,
    replica: &Instance,
    second: &SourceRef,
    commit: &str,
) -> anyhow::Result<()> {
    let status = cluster.synced(replica, second, commit).await?;
    assert!(
        status
            .errors
            .iter()
            .any(|error| error.object.as_deref() == Some("ConfigMap/foo/shared")),
        "the second source reports the conflict: {:?}",
        status.errors
    );
    Ok(())
}

/// The name of the source owning the tracking object of foo/shared, if it has one.
async fn shared_owner(tracking: &Api<DynamicObject>) -> anyhow::Result<Option<String>> {
    Ok(tracking
        .get_opt("configmap.shared")
        .await?
        .and_then(|object| object.metadata.owner_references)
        .and_then(|owners| owners.into_iter().next())
        .map(|owner| owner.name))
}

/// A second GitTrack in foo from `repo`, in the shard `first` is not in (a name whose uid lands
/// there; the others are deleted).
async fn in_the_other_shard(
    cluster: &Cluster,
    first: &SourceRef,
    repo: &Repo,
) -> anyhow::Result<SourceRef> {
    let first_shard = shard(cluster, first).await?;
    let gittracks: Api<GitTrack> = Api::namespaced(cluster.client.clone(), "foo");
    for attempt in 0..32 {
        let name = format!("second-{attempt}");
        let candidate = cluster.create_gittrack("foo", &name, repo).await?;
        if shard(cluster, &candidate).await? != first_shard {
            return Ok(candidate);
        }
        gittracks.delete(&name, &DeleteParams::default()).await?;
    }
    anyhow::bail!("none of 32 uids landed in the other shard")
}

/// Two sources declare one ConfigMap; their shards are held by two replicas, so neither
/// replica runs both sources' rounds. When the owner stops declaring it, its replica's
/// finalizer must see from the cluster (the other source's status reports the conflict) that
/// the other source declares it, and release it rather than delete it: the other source takes
/// it over and its uid never changes. Before, that replica knew only the rounds it ran itself,
/// found nobody else declaring the ConfigMap and deleted it (row 5).
#[tokio::test]
async fn an_object_a_source_of_another_replica_declares_is_released_not_deleted()
-> anyhow::Result<()> {
    let (cluster, first_repo, first_commit) = with_first_repo().await?;

    let (a, b) = two_replicas(&cluster).await?;
    let replicas = [&a, &b];
    let shared = Shared::declare(&cluster, &replicas, &first_repo, &first_commit).await?;
    let Shared {
        first,
        second,
        first_replica,
        second_replica,
        shared_uid,
        _second_repo,
    } = shared;
    let configmaps = cluster.configmaps("foo");

    first_repo.remove("shared.yaml")?;
    let dropped = first_repo.commit("shared goes")?;
    cluster.synced(first_replica, &first, &dropped).await?;
    let tracking = cluster.gittrack_objects("foo");
    let second_name = match &second {
        SourceRef::GitTrack { name, .. } => name.clone(),
        SourceRef::ClusterGitTrack { name } => name.clone(),
    };
    eventually("the second source to take the ConfigMap over", || async {
        let current = configmaps.get_opt("shared").await?;
        assert_eq!(
            current.and_then(|object| object.metadata.uid),
            shared_uid,
            "the ConfigMap the second source declares was never deleted"
        );
        second_replica.request_round(&second);
        let owner = shared_owner(&tracking).await?;
        Ok((owner.as_deref() == Some(second_name.as_str())).then_some(()))
    })
    .await?;
    b.stop().await;
    a.stop().await;
    Ok(())
}

/// Deleting a source with `deletionPolicy: Delete` leaves an object that a source of another
/// replica's shard declares: with the default modes (ClusterGitTracks watched, none exists),
/// the deleting replica must still see the other source's status reporting the conflict, and
/// release the object, which the other source then takes over. Before, an empty ClusterGitTrack
/// cache made the other sources unknown, the deletion consulted only this replica's rounds and
/// deleted the ConfigMap.
#[tokio::test]
async fn deleting_a_source_leaves_an_object_a_source_of_another_replica_declares()
-> anyhow::Result<()> {
    let (cluster, first_repo, first_commit) = with_first_repo().await?;
    let (a, b) = two_replicas_with(&cluster, true, &[]).await?;
    let replicas = [&a, &b];
    let shared = Shared::declare(&cluster, &replicas, &first_repo, &first_commit).await?;
    let configmaps = cluster.configmaps("foo");
    let gittracks: Api<GitTrack> = Api::namespaced(cluster.client.clone(), "foo");
    let SourceRef::GitTrack { name: first, .. } = &shared.first else {
        anyhow::bail!("a GitTrack was expected");
    };
    let delete_policy = serde_json::json!({
        "metadata": {"annotations": {"arbor.dev/allow-mass-prune": "true"}},
        "spec": {"deletionPolicy": "Delete"},
    });
    gittracks
        .patch(
            first,
            &PatchParams::default(),
            &Patch::Merge(&delete_policy),
        )
        .await?;
    gittracks.delete(first, &DeleteParams::default()).await?;
    eventually("the first source to be deleted", || async {
        Ok(gittracks.get_opt(first).await?.is_none().then_some(()))
    })
    .await?;
    assert!(
        !cluster.exists(&configmaps, "one").await?,
        "the first source's own object was deleted"
    );
    assert_eq!(
        configmaps
            .get_opt("shared")
            .await?
            .and_then(|o| o.metadata.uid),
        shared.shared_uid,
        "the ConfigMap the second source declares was left in place"
    );
    let tracking = cluster.gittrack_objects("foo");
    eventually("the second source to take the ConfigMap over", || async {
        shared.second_replica.request_round(&shared.second);
        let owner = tracking
            .get_opt("configmap.shared")
            .await?
            .and_then(|object| object.metadata.owner_references)
            .and_then(|owners| owners.into_iter().next())
            .map(|owner| owner.uid);
        Ok((owner == Some(uid(&cluster, &shared.second).await?)).then_some(()))
    })
    .await?;
    b.stop().await;
    a.stop().await;
    Ok(())
}

/// A replica whose shard is lost while a tracking object's finalizer is between its decision and
/// its write makes no write: the finalizer runs under the shard's guard. The replica's reads of
/// the ConfigMap are slowed and its Lease renewals refused, so the shard's renewal deadline
/// passes while the finalizer waits for the read; the ConfigMap must still be there after the
/// read has returned. Before, the shard was checked once, before the decision, and the deletion
/// went out after the shard was lost.
#[tokio::test]
async fn a_finalizer_makes_no_write_once_its_shard_is_lost() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("arbor-system").await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    repo.write("doomed.yaml", &configmap(None, "doomed", "1"))?;
    repo.write("kept.yaml", &configmap(None, "kept", "1"))?;
    let commit = repo.commit("two")?;
    let instance = start_replica(&cluster, "gitsync-a").await?;
    eventually("the replica to hold both shards", || async {
        Ok((held(&instance).len() == 2).then_some(()))
    })
    .await?;
    let source = cluster.create_gittrack("foo", "apps", &repo).await?;
    cluster.synced(&instance, &source, &commit).await?;

    repo.remove("doomed.yaml")?;
    repo.commit("doomed goes")?;
    let slow_reads = FaultEffect::Latency(Duration::from_secs(5));
    cluster.emu.faults().inject(
        Fault::new(slow_reads)
            .verbs(&["get"])
            .resources(&["configmaps"])
            .namespaces(&["foo"]),
    );
    instance.request_round(&source);
    let tracking = cluster.gittrack_objects("foo");
    eventually("the round to delete the tracking object", || async {
        let current = tracking.get_opt("configmap.doomed").await?;
        Ok(current
            .is_some_and(|object| object.metadata.deletion_timestamp.is_some())
            .then_some(()))
    })
    .await?;
    // The finalizer now reads the ConfigMap (slowly); its shard goes while it waits.
    cluster.emu.faults().inject(
        Fault::status(500)
            .verbs(&["create", "update", "patch"])
            .resources(&["coordination.k8s.io/leases"]),
    );
    eventually("the shard to be lost", || async {
        Ok(held(&instance).is_empty().then_some(()))
    })
    .await?;
    // Past the slowed read of the finalizer.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(
        cluster.exists(&cluster.configmaps("foo"), "doomed").await?,
        "no deletion was sent for a shard the replica no longer held"
    );
    cluster.emu.faults().clear();
    // Held again, it finalizes as it should.
    eventually(
        "the ConfigMap to be deleted once the shard is back",
        || async {
            Ok((!cluster.exists(&cluster.configmaps("foo"), "doomed").await?).then_some(()))
        },
    )
    .await?;
    instance.stop().await;
    Ok(())
}

/// Two replicas, one GitTrack `foo/apps` (ConfigMap `one`) synced by the holder of its shard,
/// once the other replica knows where the holder serves: the cluster, the holder, the other
/// replica and the source.
async fn one_source_on_two_replicas() -> anyhow::Result<(Cluster, Instance, Instance, SourceRef)> {
    one_source_on_two_replicas_with(&[]).await
}

/// [`one_source_on_two_replicas`], the replicas also given `extra` flags.
async fn one_source_on_two_replicas_with(
    extra: &[String],
) -> anyhow::Result<(Cluster, Instance, Instance, SourceRef)> {
    let (cluster, holding, other, source, _repo) = one_source_and_its_repo(extra).await?;
    Ok((cluster, holding, other, source))
}

/// [`one_source_on_two_replicas_with`], and the source's repository, for rounds after it.
async fn one_source_and_its_repo(
    extra: &[String],
) -> anyhow::Result<(Cluster, Instance, Instance, SourceRef, Repo)> {
    let cluster = Cluster::start().await?;
    cluster.namespace("arbor-system").await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    repo.write("one.yaml", &configmap(None, "one", "1"))?;
    let commit = repo.commit("one")?;
    let (a, b) = two_replicas_with(&cluster, false, extra).await?;
    let source = cluster.create_gittrack("foo", "apps", &repo).await?;
    let holds_it = std::ptr::eq(holder(&cluster, &[&a, &b], &source).await?, &a);
    let (holding, other) = if holds_it { (a, b) } else { (b, a) };
    cluster.synced(&holding, &source, &commit).await?;
    // The other replica passes requests on once it has seen who holds the shard and where
    // that replica serves.
    let shard = shard(&cluster, &source).await?;
    eventually(
        "the other replica to know the holder and where it serves",
        || async {
            let shards = &other.running().context().shards;
            let holder = shards_identity(&holding);
            Ok((shards.holder(shard).as_deref() == Some(holder))
                .then(|| shards.peer(holder))
                .flatten()
                .map(drop))
        },
    )
    .await?;
    Ok((cluster, holding, other, source, repo))
}

fn shards_identity(instance: &Instance) -> &str {
    instance.running().context().shards.identity()
}

fn trigger(wait: bool) -> arbor_proto::v1::TriggerSyncRequest {
    arbor_proto::v1::TriggerSyncRequest {
        source: Some(arbor_proto::v1::SourceRef {
            kind: arbor_proto::v1::SourceKind::GitTrack.into(),
            namespace: "foo".into(),
            name: "apps".into(),
        }),
        wait,
    }
}

/// TriggerSync reaching a replica that does not hold the source's shard is passed to the
/// replica that does, which runs the round and answers. Before, the caller got
/// FailedPrecondition and had to find the holder itself.
#[tokio::test]
async fn a_trigger_at_a_replica_without_the_shard_is_passed_to_its_holder() -> anyhow::Result<()> {
    let (_cluster, holding, other, source) = one_source_on_two_replicas().await?;
    let rounds = |instance: &Instance| {
        instance
            .running()
            .context()
            .registry
            .get(&source)
            .map_or(0, |record| record.rounds)
    };
    let before = rounds(&holding);
    let answer = other
        .grpc()
        .await?
        .trigger_sync(trigger(true))
        .await?
        .into_inner();
    assert!(answer.completed, "the holder ran the round and said so");
    assert!(rounds(&holding) > before, "the round ran on the holder");
    assert_eq!(rounds(&other), 0, "no round ran on the other replica");
    other.stop().await;
    holding.stop().await;
    Ok(())
}

/// A request another replica passed on is answered by its receiver alone (one hop at most):
/// a replica without the shard names the holder (also in the `arbor-shard-holder` metadata)
/// instead of passing it on again.
#[tokio::test]
async fn a_passed_on_trigger_is_not_passed_on_again_and_names_the_holder() -> anyhow::Result<()> {
    let (_cluster, holding, other, _source) = one_source_on_two_replicas().await?;
    let holder_name = shards_identity(&holding).to_owned();
    let mut request = tonic::Request::new(trigger(true));
    request.metadata_mut().insert(
        arbor_gitsync::peer_replicas::FORWARDED_BY,
        "gitsync-c".parse()?,
    );
    let refused = other
        .grpc()
        .await?
        .trigger_sync(request)
        .await
        .expect_err("the replica without the shard does not take a passed-on request");
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(
        refused.message().contains(&holder_name),
        "the error names the holder: {}",
        refused.message()
    );
    assert_eq!(
        refused
            .metadata()
            .get(arbor_gitsync::grpc::SHARD_HOLDER)
            .and_then(|value| value.to_str().ok()),
        Some(holder_name.as_str())
    );
    other.stop().await;
    holding.stop().await;
    Ok(())
}

/// Drift reported to a replica whose shards do not hold the object's source is passed to the
/// others: the holder re-applies it at once and the answer counts it as accepted, while an
/// object no source declares stays unknown. Before, the answer was "unknown" and the drift
/// stayed until the holder's next round.
#[tokio::test]
async fn drift_reported_at_a_replica_without_the_shard_is_corrected_by_its_holder()
-> anyhow::Result<()> {
    let (cluster, holding, other, _source) = one_source_on_two_replicas().await?;
    let configmaps = cluster.configmaps("foo");
    configmaps
        .patch(
            "one",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"value": "tampered"}})),
        )
        .await?;
    let answer = other
        .grpc()
        .await?
        .report_drift(arbor_proto::v1::ReportDriftRequest {
            events: vec![
                arbor_proto::v1::DriftEvent {
                    object: Some(configmap_ref("foo", "one")),
                    kind: arbor_proto::v1::DriftKind::Modified.into(),
                    reporter: "test".into(),
                    ..Default::default()
                },
                arbor_proto::v1::DriftEvent {
                    object: Some(configmap_ref("foo", "not-declared")),
                    kind: arbor_proto::v1::DriftKind::Modified.into(),
                    reporter: "test".into(),
                    ..Default::default()
                },
            ],
        })
        .await?
        .into_inner();
    assert_eq!(answer.accepted, 1, "the holder took the drift of `one`");
    assert_eq!(answer.unknown, vec![configmap_ref("foo", "not-declared")]);
    // Re-applied before the answer.
    assert_eq!(configmaps.get("one").await?.data["data"]["value"], "1");
    other.stop().await;
    holding.stop().await;
    Ok(())
}

/// Issue 22 follow-up: drift reported at a replica without the shard while the shard's holder
/// stops (its stop held open by a round's write the API server holds) is refused with
/// `Unavailable`: the holder refused the report passed on to it, so the reporter is told to
/// send it again, and then reaches the next holder, which corrects it at once. Before, it was
/// answered as `unknown`, which the observer drops, and the drift waited for the next holder's
/// rounds.
#[tokio::test]
async fn drift_passed_to_a_holder_that_stops_is_refused_for_the_reporter_to_send_again()
-> anyhow::Result<()> {
    let (cluster, holding, other, source, repo) = one_source_and_its_repo(&[]).await?;
    repo.write("one.yaml", &configmap(None, "one", "2"))?;
    repo.commit("two")?;
    let faults = cluster.emu.faults();
    faults.inject(
        Fault::new(FaultEffect::Stall {
            delay: Duration::from_secs(8),
            times: 1,
        })
        .verbs(&["patch"])
        .resources(&["configmaps"]),
    );
    holding.request_round(&source);
    eventually("the round's write to be held", || async {
        Ok((faults.fired() == vec![1]).then_some(()))
    })
    .await?;
    let shutdown = holding.running().shutdown().clone();
    let mut grpc = other.grpc().await?;
    let report_while_stopping = async {
        eventually("the holder to begin stopping", || async {
            Ok(shutdown.is_shutting_down().then_some(()))
        })
        .await?;
        anyhow::Ok(
            grpc.report_drift(arbor_proto::v1::ReportDriftRequest {
                events: vec![arbor_proto::v1::DriftEvent {
                    object: Some(configmap_ref("foo", "one")),
                    kind: arbor_proto::v1::DriftKind::Modified.into(),
                    reporter: "test".into(),
                    ..Default::default()
                }],
            })
            .await,
        )
    };
    let ((), answer) = tokio::join!(holding.stop(), report_while_stopping);
    let refused =
        answer?.expect_err("a report the stopping holder refused is not answered as unknown");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    other.stop().await;
    Ok(())
}

/// What gitsync declares, its sources and its objects read the same at every replica: the
/// webhook's drift prevention (GetDeclared) and arborctl (GetStatus, ListManaged, Explain)
/// reach whichever replica the Service picks. Before, a replica answered from its own shards:
/// `one` read as undeclared, the source as unknown.
#[tokio::test]
async fn every_replica_answers_for_the_sources_of_every_shard() -> anyhow::Result<()> {
    let (_cluster, holding, other, _source) = one_source_on_two_replicas().await?;
    let mut grpc = other.grpc().await?;
    let declared = grpc
        .get_declared(arbor_proto::v1::GetDeclaredRequest {
            object: Some(configmap_ref("foo", "one")),
        })
        .await?
        .into_inner();
    assert!(declared.declared, "GetDeclared finds `one` on the holder");
    assert_eq!(declared.file, "one.yaml");
    let undeclared = grpc
        .get_declared(arbor_proto::v1::GetDeclaredRequest {
            object: Some(configmap_ref("foo", "not-declared")),
        })
        .await?
        .into_inner();
    assert!(!undeclared.declared);
    let status = grpc
        .get_status(arbor_proto::v1::GetStatusRequest {
            source: trigger(false).source,
        })
        .await?
        .into_inner();
    assert_eq!(
        status.sources.len(),
        1,
        "the source's status comes from its holder"
    );
    let all = grpc
        .get_status(arbor_proto::v1::GetStatusRequest::default())
        .await?
        .into_inner();
    assert_eq!(all.sources.len(), 1, "listed once");
    let managed = grpc
        .list_managed(arbor_proto::v1::ListManagedRequest::default())
        .await?
        .into_inner();
    let names: Vec<_> = managed
        .objects
        .iter()
        .filter_map(|object| object.object.as_ref().map(|o| o.name.as_str()))
        .collect();
    assert_eq!(names, ["one"]);
    let explained = grpc
        .explain(arbor_proto::v1::ExplainRequest {
            object: Some(configmap_ref("foo", "one")),
        })
        .await?
        .into_inner();
    assert_eq!(explained.declarations.len(), 1, "explained by the holder");
    other.stop().await;
    holding.stop().await;
    Ok(())
}

/// What a replica's rounds recorded about a source is forgotten when the source's shard is
/// lost: another replica syncs it meanwhile, and the record no longer says what the source
/// declares. Here a replica loses a shard to a second replica, git adds ConfigMap `late` which
/// the second replica applies, and the first takes the shard back when the second stops, unable
/// to fetch (its rounds fail). The tracking object of `late`, deleted by hand, must wait for a
/// round of the source rather than be decided from the old record, which does not declare it.
/// Before, the old record read as current, the finalizer found `late` undeclared and deleted it.
#[tokio::test]
async fn a_regained_shard_decides_nothing_from_before_it_was_lost() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("arbor-system").await?;
    cluster.namespace("foo").await?;
    let a = start_replica(&cluster, "gitsync-a").await?;
    eventually("the first replica to hold both shards", || async {
        Ok((held(&a).len() == 2).then_some(()))
    })
    .await?;
    // One source in each shard, each from its own repository, synced by the first replica.
    let mut sources: Vec<(SourceRef, Repo, u32)> = Vec::new();
    for attempt in 0..32 {
        let repo = Repo::new()?;
        repo.write("x.yaml", &configmap(None, &format!("x-{attempt}"), "1"))?;
        let commit = repo.commit("x")?;
        let source = cluster
            .create_gittrack("foo", &format!("apps-{attempt}"), &repo)
            .await?;
        let shard = shard(&cluster, &source).await?;
        if sources.iter().any(|(_, _, seen)| *seen == shard) {
            continue;
        }
        cluster.synced(&a, &source, &commit).await?;
        sources.push((source, repo, shard));
        if sources.len() == 2 {
            break;
        }
    }
    let b = start_replica(&cluster, "gitsync-b").await?;
    eventually("the second replica to take one shard", || async {
        Ok((held(&a).len() == 1 && held(&b).len() == 1).then_some(()))
    })
    .await?;
    let (source, repo, _) = sources
        .iter()
        .find(|(_, _, shard)| held(&b).contains(shard))
        .expect("a source in each shard");
    repo.write("late.yaml", &configmap(None, "late", "1"))?;
    let with_late = repo.commit("late")?;
    cluster.synced(&b, source, &with_late).await?;
    let configmaps = cluster.configmaps("foo");
    let late_uid = configmaps.get("late").await?.metadata.uid;
    let late_is_the_same = |why: &'static str| {
        let configmaps = configmaps.clone();
        let late_uid = late_uid.clone();
        async move {
            let current = configmaps.get_opt("late").await?;
            assert_eq!(current.and_then(|o| o.metadata.uid), late_uid, "{why}");
            anyhow::Ok(())
        }
    };

    // The first replica's rounds of the source now fail to fetch.
    let away = repo.path().with_extension("away");
    std::fs::rename(repo.path(), &away)?;
    b.stop().await;
    eventually("the first replica to take the shard back", || async {
        Ok((held(&a).len() == 2).then_some(()))
    })
    .await?;
    let tracking = cluster.gittrack_objects("foo");
    tracking
        .delete("configmap.late", &DeleteParams::default())
        .await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    late_is_the_same("late was not deleted on a record from before the shard was lost").await?;
    std::fs::rename(&away, repo.path())?;
    eventually(
        "a round to recreate the tracking object of late",
        || async {
            a.request_round(source);
            let current = tracking.get_opt("configmap.late").await?;
            Ok(current
                .is_some_and(|object| object.metadata.deletion_timestamp.is_none())
                .then_some(()))
        },
    )
    .await?;
    late_is_the_same("late is still the object the second replica applied").await?;
    a.stop().await;
    Ok(())
}

/// A decision to delete is confirmed with a fresh list of the sources: a replica whose source
/// watch is down keeps an old cache, in which a conflict reported meanwhile is missing. Here
/// the second source starts declaring the first's ConfigMap while the watches of GitTracks are
/// closed and refused, so the first replica's cache never sees its status report the conflict;
/// when the first source stops declaring the ConfigMap, its finalizer must still release it.
/// Before, the cache alone decided: nobody else declared it, and it was deleted.
#[tokio::test]
async fn a_deletion_is_confirmed_with_a_fresh_list_of_the_sources() -> anyhow::Result<()> {
    let (cluster, first_repo, first_commit) = with_first_repo().await?;
    let (a, b) = two_replicas(&cluster).await?;
    let replicas = [&a, &b];
    let first = cluster.create_gittrack("foo", "first", &first_repo).await?;
    let first_replica = holder(&cluster, &replicas, &first).await?;
    cluster.synced(first_replica, &first, &first_commit).await?;
    let configmaps = cluster.configmaps("foo");
    let shared_uid = configmaps.get("shared").await?.metadata.uid;
    let second_repo = Repo::new()?;
    second_repo.write("two.yaml", &configmap(None, "two", "1"))?;
    let two = second_repo.commit("two")?;
    let second = in_the_other_shard(&cluster, &first, &second_repo).await?;
    let second_replica = holder(&cluster, &replicas, &second).await?;
    cluster.synced(second_replica, &second, &two).await?;

    // The GitTrack watches end and cannot start again: the caches stay as they are.
    let gittracks = ["arbor.dev/gittracks"];
    cluster
        .emu
        .faults()
        .inject(Fault::status(500).verbs(&["watch"]).resources(&gittracks));
    cluster
        .emu
        .faults()
        .inject(Fault::new(FaultEffect::CloseWatches).resources(&gittracks));
    second_repo.write("shared.yaml", &configmap(None, "shared", "1"))?;
    let both = second_repo.commit("shared too")?;
    reports_the_conflict(&cluster, second_replica, &second, &both).await?;
    first_repo.remove("shared.yaml")?;
    let dropped = first_repo.commit("shared goes")?;
    cluster.synced(first_replica, &first, &dropped).await?;
    let tracking = cluster.gittrack_objects("foo");
    eventually(
        "the first source's tracking object to be let go",
        || async {
            let owner = shared_owner(&tracking).await?;
            Ok((owner.as_deref() != Some("first")).then_some(()))
        },
    )
    .await?;
    assert_eq!(
        configmaps
            .get_opt("shared")
            .await?
            .and_then(|o| o.metadata.uid),
        shared_uid,
        "the ConfigMap the second source declares was not deleted"
    );
    cluster.emu.faults().clear();
    b.stop().await;
    a.stop().await;
    Ok(())
}

/// The replicas call each other as they do in the chart: over mutual TLS, at an address their
/// certificate does not name (the pod IP there, loopback here), verified as the Service's
/// certificate (`--grpc-advertise-server-name`), and authorized by `--grpc-allow` rules that
/// name gitsync beside each method's callers. arborctl's GetStatus and the observer's drift
/// report reach the replica without the shard and are answered by the holder.
#[tokio::test]
async fn replicas_pass_requests_over_mutual_tls_as_the_chart_authorizes_them() -> anyhow::Result<()>
{
    use arbor_runtime::grpc::{self, TlsMaterial};
    use arbor_testkit::pki::Authority;

    let service = "arbor-gitsync.arbor-system.svc";
    let ca = Authority::generate("arbor test CA")?;
    let dir = tempfile::tempdir()?;
    let write = |name: &str, content: &str| -> anyhow::Result<String> {
        let path = dir.path().join(name);
        std::fs::write(&path, content)?;
        Ok(path.display().to_string())
    };
    let ca_file = write("ca.pem", ca.cert_pem())?;
    let gitsync = ca.issue("gitsync", &[service])?;
    let tls_flags = vec![
        format!("--tls-cert={}", write("gitsync.pem", &gitsync.cert_pem)?),
        format!("--tls-key={}", write("gitsync.key", &gitsync.key_pem)?),
        format!("--tls-client-ca={ca_file}"),
        format!("--grpc-advertise-server-name={service}"),
    ];
    let mut flags = arbor_testkit::system::grpc_allow("gitsync");
    flags.extend(tls_flags);
    let client_of = |common_name: &str| -> anyhow::Result<TlsMaterial> {
        let leaf = ca.issue(common_name, &[common_name])?;
        Ok(TlsMaterial {
            cert_pem: Some(leaf.cert_pem),
            key_pem: Some(leaf.key_pem),
            ca_pem: Some(ca.cert_pem().to_owned()),
        })
    };
    let (cluster, holding, other, _source) = one_source_on_two_replicas_with(&flags).await?;
    let address = format!("https://127.0.0.1:{}", other.running().grpc_addr().port());
    let connect = |tls: TlsMaterial| {
        let endpoint = grpc::endpoint_verified_as(&address, Some(&tls), Some(service));
        async move {
            let channel = endpoint?.connect().await?;
            anyhow::Ok(arbor_proto::v1::sync_service_client::SyncServiceClient::new(channel))
        }
    };
    let status = connect(client_of(arbor_testkit::system::CLIENT_IDENTITY)?)
        .await?
        .get_status(arbor_proto::v1::GetStatusRequest {
            source: trigger(false).source,
        })
        .await?
        .into_inner();
    assert_eq!(
        status.sources.len(),
        1,
        "the holder answered through the other"
    );
    cluster
        .configmaps("foo")
        .patch(
            "one",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"value": "tampered"}})),
        )
        .await?;
    let drift = connect(client_of("observer")?)
        .await?
        .report_drift(arbor_proto::v1::ReportDriftRequest {
            events: vec![arbor_proto::v1::DriftEvent {
                object: Some(configmap_ref("foo", "one")),
                kind: arbor_proto::v1::DriftKind::Modified.into(),
                reporter: "observer".into(),
                ..Default::default()
            }],
        })
        .await?
        .into_inner();
    assert_eq!(
        drift.accepted, 1,
        "the holder accepted the observer's report"
    );
    other.stop().await;
    holding.stop().await;
    Ok(())
}

/// Creates Lease `name` in the Lease namespace as a live membership Lease of replica `holder`,
/// saying it serves at an address where nothing answers.
async fn member_lease(cluster: &Cluster, name: &str, holder: &str) -> anyhow::Result<()> {
    use k8s_openapi::api::coordination::v1::Lease;

    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), "arbor-system");
    let lease: Lease = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": name,
            "annotations": {"arbor.dev/grpc-address": "http://127.0.0.1:9"},
        },
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 3600,
            "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
                k8s_openapi::jiff::Timestamp::now()
            ),
        },
    }))?;
    leases.create(&Default::default(), &lease).await?;
    Ok(())
}

/// Only a replica's own membership Lease says where it serves. A Lease that another component
/// (or anyone who may write Leases in the namespace) names after a real replica as its holder,
/// with an address of its own, must not redirect the requests meant for that replica: the
/// trigger still reaches the real holder. Before, the Lease listed last won.
#[tokio::test]
async fn a_forged_membership_lease_does_not_redirect_a_replicas_requests() -> anyhow::Result<()> {
    let (cluster, holding, other, _source) = one_source_on_two_replicas().await?;
    let holder = shards_identity(&holding).to_owned();
    member_lease(&cluster, "arbor-gitsync-member-zzz-forged", &holder).await?;
    // Two looks at the Leases (renew interval 1 s) later, the forged one has been read.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let address = other.running().context().shards.peer(&holder);
    assert_eq!(
        address.map(|peer| peer.address),
        Some(format!("http://{}", holding.running().grpc_addr())),
        "the holder's address is its own Lease's"
    );
    let answer = other
        .grpc()
        .await?
        .trigger_sync(trigger(true))
        .await?
        .into_inner();
    assert!(answer.completed, "the trigger reached the real holder");
    other.stop().await;
    holding.stop().await;
    Ok(())
}

/// A live replica that holds no shard (one draining during a rollout, its server already
/// closed) does not fail the questions the others gather: every shard's holder answered.
/// Here a membership Lease of replica `zz-ghost` (last in order, so no shard moves to it) with an address nobody serves: GetStatus at the
/// replica without the source's shard still answers. Before, any replica's failure failed it.
#[tokio::test]
async fn a_replica_holding_no_shard_does_not_fail_a_gathered_answer() -> anyhow::Result<()> {
    let (cluster, holding, other, _source) = one_source_on_two_replicas().await?;
    member_lease(&cluster, "arbor-gitsync-member-zz-ghost", "zz-ghost").await?;
    eventually(
        "the other replica to count the ghost as a live replica",
        || async { Ok(other.running().context().shards.peer("zz-ghost").map(drop)) },
    )
    .await?;
    let status = other
        .grpc()
        .await?
        .get_status(arbor_proto::v1::GetStatusRequest::default())
        .await?
        .into_inner();
    assert_eq!(status.sources.len(), 1, "the holder's answer is enough");
    other.stop().await;
    holding.stop().await;
    Ok(())
}

fn get_declared_one() -> arbor_proto::v1::GetDeclaredRequest {
    arbor_proto::v1::GetDeclaredRequest {
        object: Some(configmap_ref("foo", "one")),
    }
}

/// A replica that takes a shard over does not answer "not declared" about the objects of the
/// shard's sources before a round of each has finished there: until then the shard counts as
/// not answered for, and GetDeclared fails (Unavailable, naming the shard) for the webhook's
/// `--drift-unreachable` to decide. Here the holder stops while every read of a GitTrack
/// fails, so the other replica takes the shard and cannot finish its first round of `apps`.
/// Before, it answered at once that `one` was not declared.
#[tokio::test]
async fn a_new_holder_does_not_answer_not_declared_before_its_first_round() -> anyhow::Result<()> {
    let (cluster, holding, other, source, _repo) = one_source_and_its_repo(&[]).await?;
    let shard = shard(&cluster, &source).await?;
    cluster.emu.faults().inject(
        Fault::status(500)
            .verbs(&["get"])
            .resources(&["arbor.dev/gittracks"]),
    );
    holding.stop().await;
    eventually("the other replica to take the shard", || async {
        Ok(held(&other).contains(&shard).then_some(()))
    })
    .await?;
    let mut grpc = other.grpc().await?;
    let refused = grpc
        .get_declared(get_declared_one())
        .await
        .expect_err("no answer about `one` before a round of its source");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().contains(&format!("shard {shard} ")),
        "the error names the shard: {}",
        refused.message()
    );
    cluster.emu.faults().clear();
    eventually("`one` to read as declared after the first round", || {
        let mut grpc = grpc.clone();
        async move {
            let answer = grpc.get_declared(get_declared_one()).await;
            Ok(answer
                .ok()
                .filter(|answer| answer.get_ref().declared)
                .map(drop))
        }
    })
    .await?;
    other.stop().await;
    Ok(())
}

/// A replica that stops keeps answering for its shards until it has given their Leases up:
/// its controllers stop first, then the Leases go, then its gRPC server closes. Here the holder
/// stops while a slow round of `apps` is in flight, and the other replica is asked GetDeclared
/// about `one` all along: whenever the shard's Lease named the stopping replica before and
/// after the question, the answer is `one` as declared. Then the other replica takes the shard
/// and answers for it. Before, the server closed first, and for the whole drain the question
/// failed (Unavailable, the holder did not answer).
#[tokio::test]
async fn a_stopping_replica_answers_for_its_shards_until_it_gives_them_up() -> anyhow::Result<()> {
    use k8s_openapi::api::coordination::v1::Lease;

    let (cluster, holding, other, source, _repo) = one_source_and_its_repo(&[]).await?;
    let shard = shard(&cluster, &source).await?;
    let holder = shards_identity(&holding).to_owned();
    // A round reading slowly keeps the holder's controllers stopping for a while.
    cluster.emu.faults().inject(
        Fault::new(FaultEffect::Latency(Duration::from_secs(2)))
            .verbs(&["get", "list"])
            .resources(&["configmaps"])
            .namespaces(&["foo"]),
    );
    holding.request_round(&source);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), "arbor-system");
    let lease = format!("arbor-gitsync-shard-{shard}");
    let lease_names_holder = || async {
        let current = leases.get_opt(&lease).await?;
        anyhow::Ok(
            current
                .and_then(|lease| lease.spec)
                .and_then(|spec| spec.holder_identity)
                .as_deref()
                == Some(holder.as_str()),
        )
    };
    let stopping = tokio::spawn(holding.stop());
    let mut grpc = other.grpc().await?;
    let mut asked_while_held = 0;
    while !stopping.is_finished() {
        let before = lease_names_holder().await?;
        let answer = grpc.get_declared(get_declared_one()).await;
        if before && lease_names_holder().await? {
            asked_while_held += 1;
            let answer = answer.map_err(|status| {
                anyhow::anyhow!(
                    "GetDeclared failed while {holder} still held shard {shard}: {status:?}"
                )
            })?;
            assert!(answer.get_ref().declared, "`one` read as not declared");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stopping.await?;
    assert!(
        asked_while_held > 0,
        "asked while the stopping replica still held the shard"
    );
    cluster.emu.faults().clear();
    eventually(
        "the other replica to take the shard and answer for it",
        || {
            let mut grpc = grpc.clone();
            let other = &other;
            async move {
                let answer = grpc.get_declared(get_declared_one()).await;
                Ok((held(other).contains(&shard)
                    && answer.is_ok_and(|answer| answer.get_ref().declared))
                .then_some(()))
            }
        },
    )
    .await?;
    other.stop().await;
    Ok(())
}
