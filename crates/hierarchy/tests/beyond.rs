//! What arbor-hierarchy does beyond Accurate: cycles halt propagation (with an event on each
//! namespace of the cycle) and it resumes when they are broken; a tree in place costs no
//! write; start-up refuses what it cannot serve (cluster-scoped or unknown kinds, missing
//! RBAC), naming it.

mod common;

use std::sync::Arc;

use anyhow::{Result, ensure};
use arbor_hierarchy::metrics::ErrorLabels;
use arbor_kube_emu::KubeEmu;
use arbor_kube_emu::auth::Identity;
use arbor_kube_emu::authz::{Attributes, Authorizer, Decision};
use arbor_kube_emu::faults::{Fault, FaultEffect};
use arbor_policy::propagation::WatchedKind;
use common::{Cluster, test_config, wait_for};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

for_each_domain!(
    cycle_halts_propagation_with_event_and_resumes_when_broken,
    unchanged_tree_reconcile_makes_no_write,
    one_undecodable_sub_namespace_never_stops_the_others,
);

async fn cycle_halts_propagation_with_event_and_resumes_when_broken(domain: &str) -> Result<()> {
    let cluster = Cluster::start(domain).await?;
    cluster.create_namespace("r", &[("type", "root")]).await?;
    cluster.create_namespace("a", &[("parent", "r")]).await?;
    cluster.create_namespace("b", &[("parent", "a")]).await?;
    cluster.create_namespace("c", &[("parent", "b")]).await?;
    cluster
        .label_namespace("a", &[("parent", Some("b"))])
        .await?;

    let events: Api<Event> = Api::namespaced(cluster.client.clone(), "default");
    for member in ["a", "b"] {
        wait_for(
            &format!("a CycleDetected event on namespace {member}"),
            || async {
                Ok(events
                    .list(&Default::default())
                    .await?
                    .items
                    .iter()
                    .any(|e| {
                        e.reason.as_deref() == Some("CycleDetected")
                            && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(member)
                            && e.note.as_deref().is_some_and(|n| n.contains("a -> b -> a"))
                    }))
            },
        )
        .await?;
    }
    cluster
        .create_secret("b", "s", "v", &[("propagate", "update")])
        .await?;
    cluster.settle().await?;
    ensure!(
        cluster.secret_value("c", "s").await?.is_none(),
        "nothing propagates below a cycle"
    );

    cluster
        .label_namespace("a", &[("parent", Some("r"))])
        .await?;
    cluster.wait_secret("c", "s", "v").await?;
    cluster.shutdown().await;
    Ok(())
}

async fn unchanged_tree_reconcile_makes_no_write(domain: &str) -> Result<()> {
    let cluster = Cluster::start(domain).await?;
    cluster
        .create_namespace_with("root", &[("type", "root"), ("team", "t")], &[("note", "n")])
        .await?;
    cluster
        .create_sub_namespace("root", "sub", &[("app", "a")])
        .await?;
    cluster
        .create_namespace("grand", &[("parent", "sub")])
        .await?;
    cluster
        .create_namespace("tmpl", &[("type", "template"), ("team", "x")])
        .await?;
    cluster
        .create_namespace("inst", &[("template", "tmpl")])
        .await?;
    cluster
        .create_secret("root", "u", "1", &[("propagate", "update")])
        .await?;
    cluster
        .create_secret("root", "c", "1", &[("propagate", "create")])
        .await?;
    cluster
        .create_secret("tmpl", "t", "1", &[("propagate", "update")])
        .await?;
    cluster.wait_secret("grand", "u", "1").await?;
    cluster.wait_secret("grand", "c", "1").await?;
    cluster.wait_secret("inst", "t", "1").await?;
    cluster
        .wait_namespace_label("grand", "team", Some("t"))
        .await?;
    cluster.settle().await?;

    let before = cluster.emu.resource_version();
    cluster.resync_and_wait().await?;
    cluster.resync_and_wait().await?;
    let after = cluster.emu.resource_version();
    ensure!(
        before == after,
        "a resync of an unchanged tree wrote (revision {before} -> {after})"
    );
    cluster.shutdown().await;
    Ok(())
}

/// One bad object never stops a kind (#16.12): a SubNamespace whose spec does not decode (on a
/// cluster whose CRD lets it through, as a hand-written or older CRD does) is reported with a
/// warning, an Event naming the field and the `errors` metric, and skipped; one without spec
/// (valid, as Accurate documents it) and the others are reconciled, before and after it.
async fn one_undecodable_sub_namespace_never_stops_the_others(domain: &str) -> Result<()> {
    let mut cluster = Cluster::without_controller(domain).await?;
    cluster.loosen_sub_namespace_spec().await?;
    cluster
        .create_namespace("root", &[("type", "root")])
        .await?;
    let api_version = cluster.sub_api.api_version();
    cluster
        .create_sub_namespace_object(json!({"apiVersion": api_version, "kind": "SubNamespace",
            "metadata": {"namespace": "root", "name": "bad"}, "spec": {"labels": "app=x"}}))
        .await?;
    cluster
        .create_sub_namespace_object(json!({"apiVersion": api_version, "kind": "SubNamespace",
            "metadata": {"namespace": "root", "name": "no-spec"}}))
        .await?;
    cluster
        .create_sub_namespace("root", "good", &[("app", "shop")])
        .await?;
    cluster.start_controller().await?;

    cluster
        .wait_namespace_label("no-spec", "parent", Some("root"))
        .await?;
    cluster
        .wait_namespace_label("good", "app", Some("shop"))
        .await?;
    let events: Api<Event> = Api::namespaced(cluster.client.clone(), "root");
    wait_for("an UndecodableSubNamespace event on root/bad", || async {
        Ok(events
            .list(&Default::default())
            .await?
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("UndecodableSubNamespace")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("bad")
                    && e.note.as_deref().is_some_and(|n| n.contains("spec.labels"))
            }))
    })
    .await?;
    let undecodable = cluster
        .metrics
        .errors
        .get_or_create(&ErrorLabels {
            reason: "UndecodableSubNamespace".into(),
        })
        .get();
    ensure!(
        undecodable >= 1,
        "the errors metric counts the undecodable SubNamespace"
    );

    cluster.create_sub_namespace("root", "later", &[]).await?;
    cluster
        .wait_namespace_label("later", "parent", Some("root"))
        .await?;
    cluster.settle().await?;
    ensure!(
        cluster.namespace("bad").await?.is_none(),
        "no namespace is made from a spec that cannot be read"
    );
    cluster.shutdown().await;
    Ok(())
}

/// The start-up error with one more entry in `watches`.
async fn start_error_watching(group: &str, kind: &str) -> Result<String> {
    let cluster = Cluster::without_controller(common::ARBOR).await?;
    let mut config = test_config();
    config.watches.push(WatchedKind {
        group: group.into(),
        version: "v1".into(),
        kind: kind.into(),
    });
    let error = match cluster.try_start_controller(config).await {
        Ok(_) => anyhow::bail!("the controller started watching {kind}"),
        Err(error) => error.to_string(),
    };
    cluster.shutdown().await;
    Ok(error)
}

#[tokio::test]
async fn start_refuses_a_cluster_scoped_kind_naming_it() -> Result<()> {
    let error = start_error_watching("rbac.authorization.k8s.io", "ClusterRole").await?;
    ensure!(
        error.contains("watches[3]")
            && error.contains("ClusterRole")
            && error.contains("cluster-scoped"),
        "{error}"
    );
    Ok(())
}

#[tokio::test]
async fn start_refuses_an_unknown_kind_naming_it() -> Result<()> {
    let error = start_error_watching("example.com", "Widget").await?;
    ensure!(
        error.contains("watches[3]") && error.contains("Widget") && error.contains("not serve"),
        "{error}"
    );
    Ok(())
}

/// Allows everything except deleting Secrets.
#[derive(Debug)]
struct NoSecretDeletes;

impl Authorizer for NoSecretDeletes {
    fn authorize(&self, _identity: &Identity, attributes: &Attributes) -> Decision {
        let denied = attributes.verb == "delete" && attributes.resource == "secrets";
        Decision {
            allowed: !denied,
            reason: if denied {
                "test denies deleting secrets".into()
            } else {
                String::new()
            },
        }
    }
}

#[tokio::test]
async fn start_refuses_without_rbac_naming_what_is_missing() -> Result<()> {
    let emu = KubeEmu::builder()
        .authorizer(Arc::new(NoSecretDeletes))
        .start()
        .await?;
    let cluster = Cluster::on(emu, common::ARBOR).await?;
    let error = match cluster.try_start_controller(test_config()).await {
        Ok(_) => anyhow::bail!("the controller started without RBAC to delete secrets"),
        Err(error) => error.to_string(),
    };
    ensure!(error.contains("delete secrets"), "{error}");
    ensure!(
        !error.contains("configmaps"),
        "only what is missing is named: {error}"
    );
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_explains_propagation_from_the_live_index() -> Result<()> {
    use arbor_proto::v1::hierarchy_service_client::HierarchyServiceClient;
    use arbor_proto::v1::{Action, ExplainPropagationRequest, GetTreeRequest, ObjectRef};

    let cluster = Cluster::start(common::ARBOR).await?;
    cluster
        .create_namespace("root", &[("type", "root")])
        .await?;
    cluster.create_sub_namespace("root", "a", &[]).await?;
    cluster
        .create_secret("root", "s", "v", &[("propagate", "update")])
        .await?;
    cluster.wait_secret("a", "s", "v").await?;
    cluster.settle().await?;

    let (incoming, addr) = arbor_runtime::grpc::bind("127.0.0.1:0".parse()?).await?;
    let stop = tokio_util::sync::CancellationToken::new();
    let server = arbor_runtime::grpc::server(addr, None)?
        .add_service(cluster.controller().service().into_server())
        .serve_with_incoming_shutdown(incoming, stop.clone().cancelled_owned());
    let serving = tokio::spawn(server);
    let channel = arbor_runtime::grpc::connect(&format!("http://{addr}"), None).await?;
    let mut client = HierarchyServiceClient::new(channel);

    let tree = client
        .get_tree(GetTreeRequest::default())
        .await?
        .into_inner();
    ensure!(
        tree.nodes.len() == 2 && tree.nodes[1].name == "a" && tree.nodes[1].parent == "root",
        "{tree:?}"
    );
    ensure!(tree.nodes[1].from_subnamespace);

    let answer = client
        .explain_propagation(ExplainPropagationRequest {
            object: Some(ObjectRef {
                version: "v1".into(),
                kind: "Secret".into(),
                namespace: "root".into(),
                name: "s".into(),
                ..ObjectRef::default()
            }),
            target_namespace: "a".into(),
        })
        .await?
        .into_inner();
    let decision = answer.targets[0].decision.clone().unwrap_or_default();
    ensure!(
        decision.allowed && decision.action == Action::None as i32,
        "{decision:?}"
    );
    ensure!(decision.reason.contains("up to date"), "{decision:?}");

    stop.cancel();
    serving.await??;
    cluster.shutdown().await;
    Ok(())
}

/// How many watches of `resource` (`plural` or `group/plural`, given the cluster) the
/// controller opened from its start until a small tree with one propagated Secret settled.
async fn watches_while_making_a_tree(resource: impl Fn(&Cluster) -> String) -> Result<u64> {
    let mut cluster = Cluster::without_controller(common::ARBOR).await?;
    cluster.emu.requests().reset();
    cluster.start_controller().await?;
    cluster.root_with_sub_namespace("sub").await?;
    cluster
        .create_secret("root", "shared", "1", &[("propagate", "update")])
        .await?;
    cluster.wait_secret("sub", "shared", "1").await?;
    cluster.settle().await?;
    let watches = cluster.emu.requests().count("watch", &resource(&cluster));
    cluster.shutdown().await;
    Ok(watches)
}

/// Namespaces are watched once, for the index and both controllers: a thousand namespaces cost
/// one stream of their events, not one per consumer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_are_watched_once() -> Result<()> {
    let watches = watches_while_making_a_tree(|_| "namespaces".into()).await?;
    ensure!(
        watches == 1,
        "Namespaces were watched {watches} times; one watch serves the index and both controllers"
    );
    Ok(())
}

/// SubNamespaces are watched once, for the index and the SubNamespace controller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_namespaces_are_watched_once() -> Result<()> {
    let watches = watches_while_making_a_tree(|cluster| {
        let resource = cluster.sub_api.api_resource();
        format!("{}/{}", resource.group, resource.plural)
    })
    .await?;
    ensure!(
        watches == 1,
        "SubNamespaces were watched {watches} times; one watch serves the index and the \
         SubNamespace controller"
    );
    Ok(())
}

/// How many changes the emulator remembers in the relist test: small, so that a watch that was
/// down for a few dozen changes cannot resume and must list again.
const SHORT_HISTORY: usize = 40;

/// A relist tells everything that depends on what vanished while the watch was down, as the
/// live Deleted event would have: a SubNamespace's namespace, deleted while the Namespace watch
/// was refused and its history overrun, is made again as soon as the watch lists again, not
/// at the SubNamespace's 600 s requeue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_deleted_while_the_watch_was_down_is_made_again_at_the_relist() -> Result<()> {
    let emu = KubeEmu::builder()
        .history_window(SHORT_HISTORY)
        .start()
        .await?;
    let mut cluster = Cluster::on(emu, common::ARBOR).await?;
    cluster.start_controller().await?;
    cluster.root_with_sub_namespace("sub").await?;
    cluster.settle().await?;

    let lists = || cluster.emu.requests().count("list", "namespaces");
    let listed_before = lists();
    let faults = cluster.emu.faults();
    faults.inject(
        Fault::status(503)
            .verbs(&["watch"])
            .resources(&["namespaces"]),
    );
    faults.inject(Fault::new(FaultEffect::CloseWatches).resources(&["namespaces"]));
    cluster
        .namespaces()
        .delete("sub", &DeleteParams::default())
        .await?;
    cluster.wait_namespace_gone("sub").await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client.clone(), "default");
    for n in 0..2 * SHORT_HISTORY {
        let account = serde_json::from_value(json!({"metadata": {"name": format!("churn-{n}")}}))?;
        accounts.create(&PostParams::default(), &account).await?;
    }
    faults.clear();
    wait_for("the Namespace watch to list again", || async {
        Ok(lists() > listed_before)
    })
    .await?;

    cluster
        .wait_namespace_label("sub", "parent", Some("root"))
        .await?;
    cluster.shutdown().await;
    Ok(())
}

/// Issue 22 (third review): a reconcile starts no write once the controller stops. A new child
/// namespace gets three Secrets copied one after the other; the API server holds the first
/// copy for 4 s as the controller stops: that write is answered, the other two are never
/// sent, and the next leader copies them. The reconcile ended by the stop is no error: the
/// `errors` metric does not move (it counted `Stopping` before).
#[tokio::test]
async fn a_reconcile_between_writes_when_the_controller_stops_sends_no_further_write() -> Result<()>
{
    let mut cluster = Cluster::start(common::ARBOR).await?;
    cluster
        .create_namespace("root", &[("type", "root")])
        .await?;
    for name in ["s-0", "s-1", "s-2"] {
        cluster
            .create_secret("root", name, "v", &[("propagate", "update")])
            .await?;
    }
    cluster.settle().await?;
    held(
        &cluster,
        "patch",
        "secrets",
        cluster.create_namespace("child", &[("parent", "root")]),
    )
    .await?;
    stop_without_a_reconcile_error(&mut cluster).await?;

    let copies = cluster.emu.requests().count("patch", "secrets");
    ensure!(
        copies == 1,
        "{copies} copies written; only the held one was sent"
    );
    cluster.shutdown().await;
    Ok(())
}

/// Stops the controller; a graceful stop is no reconcile error, so the error count must not move.
async fn stop_without_a_reconcile_error(cluster: &mut Cluster) -> Result<()> {
    let errors = cluster.errors_counted();
    cluster.stop_controller().await;
    ensure!(
        cluster.errors_counted() == errors,
        "the stop was counted as a reconcile error"
    );
    Ok(())
}

/// The SubNamespace writes of the emulator's request log: the object's and its status'.
fn sub_namespace_patches(cluster: &Cluster) -> u64 {
    let resource = cluster.sub_api.api_resource();
    cluster
        .emu
        .requests()
        .count("patch", &format!("{}/{}", resource.group, resource.plural))
}

/// Has the API server hold the first `verb` on `resource` for 4 s, runs `cause`, and returns
/// once that request is held, with the request log emptied.
async fn held(
    cluster: &Cluster,
    verb: &str,
    resource: &str,
    cause: impl Future<Output = Result<()>>,
) -> Result<()> {
    let faults = cluster.emu.faults();
    faults.inject(
        Fault::held_once(std::time::Duration::from_secs(4))
            .verbs(&[verb])
            .resources(&[resource]),
    );
    cause.await?;
    wait_for(&format!("a {verb} of {resource} to be held"), || async {
        Ok(faults.fired() == vec![1])
    })
    .await?;
    cluster.emu.requests().reset();
    Ok(())
}

/// Issue 22 (review of the rounds change): a SubNamespace reconcile whose namespace write the
/// API server holds when the controller stops sends no status write after it: the status
/// goes through the Writer's check like every other write. Before, it was sent once the
/// namespace write was answered. Ending so is no reconcile error (the `errors` metric counted
/// it before).
#[tokio::test]
async fn a_sub_namespace_reconcile_whose_namespace_write_is_held_at_the_stop_writes_no_status()
-> Result<()> {
    let mut cluster = Cluster::start(common::ARBOR).await?;
    cluster
        .create_namespace("root", &[("type", "root")])
        .await?;
    cluster.settle().await?;
    held(
        &cluster,
        "patch",
        "namespaces",
        cluster.create_sub_namespace("root", "sub", &[]),
    )
    .await?;
    stop_without_a_reconcile_error(&mut cluster).await?;

    ensure!(
        cluster.emu.requests().count("patch", "namespaces") == 1,
        "the held namespace write was not answered before the stop ended"
    );
    let writes = sub_namespace_patches(&cluster);
    ensure!(
        writes == 0,
        "{writes} SubNamespace writes after the stop began"
    );
    cluster.shutdown().await;
    Ok(())
}

/// Issue 22 (review of the rounds change): a SubNamespace clean-up whose read of the namespace
/// the API server holds when the controller stops does not remove the finalizer after, even
/// though it finds nothing to delete (the namespace is not its child): the finalizer's removal
/// is a write like any other. Before, kube's `finalizer()` removed it. Ending so is no
/// reconcile error (the `errors` metric counted it before).
#[tokio::test]
async fn a_sub_namespace_clean_up_held_at_the_stop_keeps_its_finalizer() -> Result<()> {
    let mut cluster = Cluster::start(common::ARBOR).await?;
    cluster
        .create_namespace("root", &[("type", "root")])
        .await?;
    // Not a child of root: the clean-up keeps it and only lets the SubNamespace go.
    cluster.create_namespace("taken", &[]).await?;
    cluster.create_sub_namespace("root", "taken", &[]).await?;
    let subs = cluster.sub_namespaces("root");
    wait_for("the SubNamespace's finalizer", || async {
        Ok(!subs.get("taken").await?.finalizers().is_empty())
    })
    .await?;
    cluster.settle().await?;
    held(&cluster, "get", "namespaces", async {
        subs.delete("taken", &DeleteParams::default()).await?;
        Ok(())
    })
    .await?;
    stop_without_a_reconcile_error(&mut cluster).await?;

    let writes = sub_namespace_patches(&cluster);
    ensure!(
        writes == 0,
        "{writes} SubNamespace writes after the stop began"
    );
    ensure!(
        subs.get_opt("taken").await?.is_some(),
        "the finalizer was removed after the stop began"
    );
    cluster.shutdown().await;
    Ok(())
}
