//! seeds/001 (and seeds/003 under the Innu domain), bullet by bullet, against arbor-kube-emu:
//! every scenario runs under `arbor.dev`, `accurate.cybozu.com` and `innu.cybozu.com`.

mod common;

use anyhow::{Result, ensure};
use arbor_api::condition::{ConditionStatus, condition_status, find_condition, reasons, types};
use arbor_hierarchy::metrics::ErrorLabels;
use common::{Cluster, wait_for};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

for_each_domain!(
    subnamespace_new_creates_sub_namespace,
    subnamespace_deleting_deletes_sub_namespace_when_parent_matches,
    subnamespace_deleting_keeps_namespace_that_is_not_its_child,
    template_instance_propagates_labels_and_annotations_from_template,
    template_instance_creates_missing_copies_of_create_resources,
    template_instance_creates_or_updates_copies_of_update_resources,
    template_instance_deletes_update_copy_when_from_is_not_template,
    template_instance_deletes_update_copy_when_template_has_no_source,
    namespace_without_type_or_template_deletes_update_copies,
    template_propagates_labels_and_annotations_to_instances,
    root_propagates_labels_and_annotations_to_sub_namespaces,
    sub_namespace_propagates_labels_and_annotations_from_parent,
    sub_namespace_propagates_its_labels_and_annotations_to_its_sub_namespaces,
    sub_namespace_creates_missing_copies_of_create_resources,
    sub_namespace_creates_or_updates_copies_of_update_resources,
    sub_namespace_deletes_update_copy_when_from_is_not_parent,
    sub_namespace_deletes_update_copy_when_parent_has_no_source,
    any_namespaced_kind_is_propagated,
    from_copy_is_updated_when_parent_resource_is_update_and_differs,
    from_orphan_is_deleted_at_start_when_source_vanished_while_stopped,
    propagate_create_creates_copy_in_all_sub_namespaces_if_missing,
    propagate_update_creates_or_updates_copy_in_all_sub_namespaces,
    propagate_deleting_source_deletes_update_copies_in_sub_namespaces,
    propagate_generated_annotates_owned_resource_with_owner_mode,
    removed_keys_of_a_root_and_a_parent_are_removed_from_every_descendant,
    removed_keys_of_a_template_are_removed_from_its_instances,
    removed_keys_of_a_sub_namespace_spec_are_removed_from_its_namespace,
    subnamespace_without_spec_in_the_domain_group_creates_sub_namespace,
    propagate_generated_works_for_an_owner_of_a_kind_not_watched,
    same_name_object_without_from_keeps_the_copy_out_visibly,
);

/// A root `root` with sub-namespace `child` (created directly with the parent key).
async fn root_and_child(domain: &str) -> Result<Cluster> {
    let cluster = Cluster::start(domain).await?;
    cluster
        .create_namespace("root", &[("type", "root")])
        .await?;
    cluster
        .create_namespace("child", &[("parent", "root")])
        .await?;
    Ok(cluster)
}

/// A root `root` with sub-namespaces `child` and `child-2`, and `grand` below `child`.
async fn root_with_three_below(domain: &str) -> Result<Cluster> {
    let cluster = root_and_child(domain).await?;
    cluster
        .create_namespace("child-2", &[("parent", "root")])
        .await?;
    cluster
        .create_namespace("grand", &[("parent", "child")])
        .await?;
    Ok(cluster)
}

/// A template `tmpl` and its instance `inst`.
async fn template_and_instance(domain: &str) -> Result<Cluster> {
    let cluster = Cluster::start(domain).await?;
    cluster
        .create_namespace("tmpl", &[("type", "template")])
        .await?;
    cluster
        .create_namespace("inst", &[("template", "tmpl")])
        .await?;
    Ok(cluster)
}

async fn subnamespace_new_creates_sub_namespace(domain: &str) -> Result<()> {
    let cluster = Cluster::start(domain).await?;
    cluster
        .create_namespace("root", &[("type", "root")])
        .await?;
    cluster.create_sub_namespace("root", "team-a", &[]).await?;
    cluster
        .wait_namespace_label("team-a", "parent", Some("root"))
        .await?;
    wait_for("SubNamespace root/team-a Ready", || async {
        let conditions = cluster.sub_namespace_conditions("root", "team-a").await?;
        Ok(condition_status(&conditions, types::READY) == ConditionStatus::True)
    })
    .await?;
    cluster.shutdown().await;
    Ok(())
}

async fn subnamespace_deleting_deletes_sub_namespace_when_parent_matches(
    domain: &str,
) -> Result<()> {
    let cluster = Cluster::start(domain).await?;
    cluster
        .create_namespace("root", &[("type", "root")])
        .await?;
    cluster.create_sub_namespace("root", "team-a", &[]).await?;
    cluster
        .wait_namespace_label("team-a", "parent", Some("root"))
        .await?;
    cluster
        .sub_namespaces("root")
        .delete("team-a", &DeleteParams::default())
        .await?;
    cluster.wait_namespace_gone("team-a").await?;
    cluster.shutdown().await;
    Ok(())
}

async fn subnamespace_deleting_keeps_namespace_that_is_not_its_child(domain: &str) -> Result<()> {
    let cluster = Cluster::start(domain).await?;
    cluster
        .create_namespace("root", &[("type", "root")])
        .await?;
    cluster
        .create_namespace("other-root", &[("type", "root")])
        .await?;
    cluster
        .create_namespace("taken", &[("parent", "other-root")])
        .await?;
    cluster.create_sub_namespace("root", "taken", &[]).await?;
    let subs = cluster.sub_namespaces("root");
    wait_for(
        "SubNamespace root/taken Stalled and Conflict with reason NamespaceConflict",
        || async {
            let conditions = cluster.sub_namespace_conditions("root", "taken").await?;
            let conflicting = |type_| {
                find_condition(&conditions, type_)
                    .is_some_and(|c| c.status == "True" && c.reason == reasons::NAMESPACE_CONFLICT)
            };
            Ok(conflicting(types::STALLED) && conflicting(types::CONFLICT))
        },
    )
    .await?;
    subs.delete("taken", &DeleteParams::default()).await?;
    wait_for("SubNamespace root/taken to be gone", || async {
        Ok(subs.get_opt("taken").await?.is_none())
    })
    .await?;
    ensure!(
        cluster.namespace_label("taken", "parent").await?.as_deref() == Some("other-root"),
        "namespace taken must survive with its own parent"
    );
    cluster.shutdown().await;
    Ok(())
}

async fn template_instance_propagates_labels_and_annotations_from_template(
    domain: &str,
) -> Result<()> {
    let cluster = Cluster::start(domain).await?;
    cluster
        .create_namespace_with(
            "tmpl",
            &[("type", "template"), ("team", "blue"), ("private", "x")],
            &[("note", "hi")],
        )
        .await?;
    cluster
        .create_namespace("inst", &[("template", "tmpl")])
        .await?;
    cluster
        .wait_namespace_label("inst", "team", Some("blue"))
        .await?;
    cluster
        .wait_namespace_annotation("inst", "note", Some("hi"))
        .await?;
    cluster.settle().await?;
    ensure!(
        cluster.namespace_label("inst", "private").await?.is_none(),
        "keys outside labelKeys are not propagated"
    );
    cluster.shutdown().await;
    Ok(())
}

async fn namespace_without_type_or_template_deletes_update_copies(domain: &str) -> Result<()> {
    let cluster = template_and_instance(domain).await?;
    cluster
        .create_secret("tmpl", "u", "x", &[("propagate", "update")])
        .await?;
    cluster
        .create_secret("tmpl", "c", "x", &[("propagate", "create")])
        .await?;
    cluster.wait_secret("inst", "u", "x").await?;
    cluster.wait_secret("inst", "c", "x").await?;
    cluster
        .label_namespace("inst", &[("template", None)])
        .await?;
    cluster.wait_secret_gone("inst", "u").await?;
    cluster.settle().await?;
    ensure!(
        cluster.secret_value("inst", "c").await?.is_some(),
        "a create copy is never deleted"
    );
    // The same for a sub-namespace of a root losing its keys.
    cluster
        .create_namespace("root", &[("type", "root")])
        .await?;
    cluster
        .create_namespace("child", &[("parent", "root")])
        .await?;
    cluster
        .create_secret("root", "u", "y", &[("propagate", "update")])
        .await?;
    cluster.wait_secret("child", "u", "y").await?;
    cluster
        .label_namespace("child", &[("parent", None)])
        .await?;
    cluster.wait_secret_gone("child", "u").await?;
    cluster.shutdown().await;
    Ok(())
}

async fn template_propagates_labels_and_annotations_to_instances(domain: &str) -> Result<()> {
    let cluster = template_and_instance(domain).await?;
    cluster
        .create_namespace("inst-2", &[("template", "tmpl")])
        .await?;
    cluster
        .label_namespace("tmpl", &[("team", Some("red")), ("tier-1", Some("gold"))])
        .await?;
    for instance in ["inst", "inst-2"] {
        cluster
            .wait_namespace_label(instance, "team", Some("red"))
            .await?;
        cluster
            .wait_namespace_label(instance, "tier-1", Some("gold"))
            .await?;
    }
    cluster.shutdown().await;
    Ok(())
}

async fn root_propagates_labels_and_annotations_to_sub_namespaces(domain: &str) -> Result<()> {
    let cluster = Cluster::start(domain).await?;
    cluster
        .create_namespace_with(
            "root",
            &[("type", "root"), ("team", "green")],
            &[("note", "n")],
        )
        .await?;
    cluster.create_sub_namespace("root", "a", &[]).await?;
    cluster.create_namespace("b", &[("parent", "root")]).await?;
    for sub in ["a", "b"] {
        cluster
            .wait_namespace_label(sub, "team", Some("green"))
            .await?;
        cluster
            .wait_namespace_annotation(sub, "note", Some("n"))
            .await?;
    }
    cluster.shutdown().await;
    Ok(())
}

async fn sub_namespace_propagates_labels_and_annotations_from_parent(domain: &str) -> Result<()> {
    let cluster = root_and_child(domain).await?;
    cluster
        .label_namespace("root", &[("team", Some("violet"))])
        .await?;
    cluster
        .wait_namespace_label("child", "team", Some("violet"))
        .await?;
    // The SubNamespace's own spec labels, selected by subNamespaceLabelKeys.
    cluster
        .create_sub_namespace("child", "grand", &[("app", "web"), ("ignored", "x")])
        .await?;
    cluster
        .wait_namespace_label("grand", "app", Some("web"))
        .await?;
    cluster
        .wait_namespace_label("grand", "team", Some("violet"))
        .await?;
    cluster.settle().await?;
    ensure!(cluster.namespace_label("grand", "ignored").await?.is_none());
    cluster.shutdown().await;
    Ok(())
}

async fn sub_namespace_propagates_its_labels_and_annotations_to_its_sub_namespaces(
    domain: &str,
) -> Result<()> {
    let cluster = root_and_child(domain).await?;
    cluster
        .create_namespace("grand", &[("parent", "child")])
        .await?;
    cluster
        .label_namespace("child", &[("team", Some("own"))])
        .await?;
    cluster
        .wait_namespace_label("grand", "team", Some("own"))
        .await?;
    cluster.shutdown().await;
    Ok(())
}

async fn any_namespaced_kind_is_propagated(domain: &str) -> Result<()> {
    let cluster = root_and_child(domain).await?;
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "reader", "namespace": "root",
                     "annotations": {cluster.key("propagate"): "update"}},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
    });
    cluster
        .dynamic("root", "rbac.authorization.k8s.io", "v1", "Role")
        .patch("reader", &PatchParams::apply("test"), &Patch::Apply(&role))
        .await?;
    let roles = cluster.dynamic("child", "rbac.authorization.k8s.io", "v1", "Role");
    wait_for("Role child/reader", || async {
        Ok(roles
            .get_opt("reader")
            .await?
            .is_some_and(|r| r.data["rules"][0]["verbs"] == json!(["get"])))
    })
    .await?;
    cluster.shutdown().await;
    Ok(())
}

async fn from_copy_is_updated_when_parent_resource_is_update_and_differs(
    domain: &str,
) -> Result<()> {
    let cluster = root_and_child(domain).await?;
    cluster
        .create_secret("root", "s", "good", &[("propagate", "update")])
        .await?;
    cluster.wait_secret("child", "s", "good").await?;
    cluster.edit_secret("child", "s", "tampered").await?;
    cluster.wait_secret("child", "s", "good").await?;
    cluster.shutdown().await;
    Ok(())
}

async fn from_orphan_is_deleted_at_start_when_source_vanished_while_stopped(
    domain: &str,
) -> Result<()> {
    let mut cluster = root_and_child(domain).await?;
    cluster
        .create_secret("root", "s", "v", &[("propagate", "update")])
        .await?;
    cluster.wait_secret("child", "s", "v").await?;
    cluster.stop_controller().await;
    cluster.delete_secret("root", "s").await?;
    ensure!(
        cluster.secret_value("child", "s").await?.is_some(),
        "nothing runs while the controller is stopped"
    );
    cluster.start_controller().await?;
    cluster.wait_secret_gone("child", "s").await?;
    cluster.shutdown().await;
    Ok(())
}

async fn propagate_create_creates_copy_in_all_sub_namespaces_if_missing(
    domain: &str,
) -> Result<()> {
    let cluster = root_with_three_below(domain).await?;
    cluster
        .create_secret("root", "s", "c", &[("propagate", "create")])
        .await?;
    for namespace in ["child", "child-2", "grand"] {
        cluster.wait_secret(namespace, "s", "c").await?;
    }
    cluster.shutdown().await;
    Ok(())
}

async fn propagate_update_creates_or_updates_copy_in_all_sub_namespaces(
    domain: &str,
) -> Result<()> {
    let cluster = root_with_three_below(domain).await?;
    cluster
        .create_secret("root", "s", "1", &[("propagate", "update")])
        .await?;
    for namespace in ["child", "child-2", "grand"] {
        cluster.wait_secret(namespace, "s", "1").await?;
    }
    cluster.edit_secret("root", "s", "2").await?;
    for namespace in ["child", "child-2", "grand"] {
        cluster.wait_secret(namespace, "s", "2").await?;
    }
    ensure!(
        cluster
            .secret_annotation("grand", "s", "from")
            .await?
            .as_deref()
            == Some("child")
    );
    cluster.shutdown().await;
    Ok(())
}

async fn propagate_deleting_source_deletes_update_copies_in_sub_namespaces(
    domain: &str,
) -> Result<()> {
    let cluster = root_and_child(domain).await?;
    cluster
        .create_namespace("grand", &[("parent", "child")])
        .await?;
    cluster
        .create_secret("root", "u", "1", &[("propagate", "update")])
        .await?;
    cluster
        .create_secret("root", "c", "1", &[("propagate", "create")])
        .await?;
    for namespace in ["child", "grand"] {
        cluster.wait_secret(namespace, "u", "1").await?;
        cluster.wait_secret(namespace, "c", "1").await?;
    }
    cluster.delete_secret("root", "u").await?;
    cluster.delete_secret("root", "c").await?;
    for namespace in ["child", "grand"] {
        cluster.wait_secret_gone(namespace, "u").await?;
    }
    cluster.settle().await?;
    for namespace in ["child", "grand"] {
        ensure!(
            cluster.secret_value(namespace, "c").await?.is_some(),
            "create copies stay in {namespace}"
        );
    }
    cluster.shutdown().await;
    Ok(())
}

async fn propagate_generated_annotates_owned_resource_with_owner_mode(domain: &str) -> Result<()> {
    let cluster = root_and_child(domain).await?;
    let owner = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "owner", "namespace": "root",
                     "annotations": {cluster.key("propagate-generated"): "update"}},
    });
    let config_maps = cluster.dynamic("root", "", "v1", "ConfigMap");
    let owner = config_maps
        .patch("owner", &PatchParams::apply("test"), &Patch::Apply(&owner))
        .await?;
    let uid = owner.metadata.uid.clone().unwrap_or_default();
    let generated = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "generated", "namespace": "root", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid, "controller": true}]},
        "data": {"value": common::base64("g")},
    });
    cluster
        .secrets("root")
        .patch(
            "generated",
            &PatchParams::apply("test"),
            &Patch::Apply(&generated),
        )
        .await?;
    wait_for(
        "Secret root/generated annotated propagate=update",
        || async {
            Ok(cluster
                .secret_annotation("root", "generated", "propagate")
                .await?
                .as_deref()
                == Some("update"))
        },
    )
    .await?;
    cluster.wait_secret("child", "generated", "g").await?;
    cluster.shutdown().await;
    Ok(())
}

// The copy bullets read the same for a template instance (from its template) and a
// sub-namespace (from its parent); each is one scenario run for both relations.

/// `create` resources of the upstream are copied when missing, never updated, and copied
/// again when the copy is deleted.
async fn copies_create_resources(cluster: Cluster, upstream: &str, below: &str) -> Result<()> {
    cluster
        .create_secret(upstream, "s", "one", &[("propagate", "create")])
        .await?;
    cluster.wait_secret(below, "s", "one").await?;
    let from = cluster.secret_annotation(below, "s", "from").await?;
    ensure!(from.as_deref() == Some(upstream), "from is {from:?}");
    cluster.edit_secret(upstream, "s", "two").await?;
    cluster.settle().await?;
    let value = cluster.secret_value(below, "s").await?;
    ensure!(
        value.as_deref() == Some("one"),
        "a create copy was updated to {value:?}"
    );
    cluster.delete_secret(below, "s").await?;
    cluster.wait_secret(below, "s", "two").await?;
    cluster.shutdown().await;
    Ok(())
}

/// `update` resources of the upstream are copied when missing and updated when different.
async fn copies_update_resources(cluster: Cluster, upstream: &str, below: &str) -> Result<()> {
    cluster
        .create_secret(upstream, "s", "one", &[("propagate", "update")])
        .await?;
    cluster.wait_secret(below, "s", "one").await?;
    cluster.edit_secret(upstream, "s", "two").await?;
    cluster.wait_secret(below, "s", "two").await?;
    cluster.shutdown().await;
    Ok(())
}

/// An `update` copy whose `from` names another namespace is deleted.
async fn deletes_update_copy_from_elsewhere(cluster: Cluster, below: &str) -> Result<()> {
    let annotations = [("propagate", "update"), ("from", "elsewhere")];
    cluster
        .create_secret(below, "stray", "x", &annotations)
        .await?;
    cluster.wait_secret_gone(below, "stray").await?;
    cluster.shutdown().await;
    Ok(())
}

/// An `update` copy from the upstream without a source of that kind and name is deleted;
/// an object without `from` (the namespace's own) is never touched.
async fn deletes_update_copy_without_source(
    cluster: Cluster,
    upstream: &str,
    below: &str,
) -> Result<()> {
    let annotations = [("propagate", "update"), ("from", upstream)];
    cluster
        .create_secret(below, "orphan", "x", &annotations)
        .await?;
    cluster.wait_secret_gone(below, "orphan").await?;
    cluster
        .create_secret(below, "own", "x", &[("propagate", "update")])
        .await?;
    cluster.settle().await?;
    ensure!(
        cluster.secret_value(below, "own").await?.is_some(),
        "the namespace's own object was deleted"
    );
    cluster.shutdown().await;
    Ok(())
}

async fn template_instance_creates_missing_copies_of_create_resources(domain: &str) -> Result<()> {
    copies_create_resources(template_and_instance(domain).await?, "tmpl", "inst").await
}

async fn template_instance_creates_or_updates_copies_of_update_resources(
    domain: &str,
) -> Result<()> {
    copies_update_resources(template_and_instance(domain).await?, "tmpl", "inst").await
}

async fn template_instance_deletes_update_copy_when_from_is_not_template(
    domain: &str,
) -> Result<()> {
    deletes_update_copy_from_elsewhere(template_and_instance(domain).await?, "inst").await
}

async fn template_instance_deletes_update_copy_when_template_has_no_source(
    domain: &str,
) -> Result<()> {
    deletes_update_copy_without_source(template_and_instance(domain).await?, "tmpl", "inst").await
}

async fn sub_namespace_creates_missing_copies_of_create_resources(domain: &str) -> Result<()> {
    copies_create_resources(root_and_child(domain).await?, "root", "child").await
}

async fn sub_namespace_creates_or_updates_copies_of_update_resources(domain: &str) -> Result<()> {
    copies_update_resources(root_and_child(domain).await?, "root", "child").await
}

async fn sub_namespace_deletes_update_copy_when_from_is_not_parent(domain: &str) -> Result<()> {
    deletes_update_copy_from_elsewhere(root_and_child(domain).await?, "child").await
}

async fn sub_namespace_deletes_update_copy_when_parent_has_no_source(domain: &str) -> Result<()> {
    deletes_update_copy_without_source(root_and_child(domain).await?, "root", "child").await
}

/// Removed keys are removed below (#16.8): a label or annotation taken off a root leaves every
/// namespace below it, one taken off a parent leaves its sub-namespaces; keys nobody
/// propagated stay, even when their names match `labelKeys`.
async fn removed_keys_of_a_root_and_a_parent_are_removed_from_every_descendant(
    domain: &str,
) -> Result<()> {
    let cluster = root_with_three_below(domain).await?;
    cluster
        .label_namespace("root", &[("team", Some("blue")), ("tier-1", Some("gold"))])
        .await?;
    cluster
        .annotate_namespace("root", &[("note", Some("n"))])
        .await?;
    // Set by a user on the parent: propagated from there, but never by Arbor onto `child`.
    cluster
        .label_namespace("child", &[("tier-own", Some("x")), ("owner", Some("me"))])
        .await?;
    for below in ["child", "child-2", "grand"] {
        cluster
            .wait_namespace_label(below, "team", Some("blue"))
            .await?;
        cluster
            .wait_namespace_annotation(below, "note", Some("n"))
            .await?;
    }
    cluster
        .wait_namespace_label("grand", "tier-own", Some("x"))
        .await?;

    cluster.label_namespace("root", &[("team", None)]).await?;
    cluster
        .annotate_namespace("root", &[("note", None)])
        .await?;
    for below in ["child", "child-2", "grand"] {
        cluster.wait_namespace_label(below, "team", None).await?;
        cluster
            .wait_namespace_annotation(below, "note", None)
            .await?;
    }
    cluster
        .label_namespace("child", &[("tier-own", None)])
        .await?;
    cluster
        .wait_namespace_label("grand", "tier-own", None)
        .await?;
    cluster.settle().await?;
    for below in ["child", "child-2", "grand"] {
        ensure!(
            cluster.namespace_label(below, "tier-1").await?.as_deref() == Some("gold"),
            "{below}: a key still propagated stays"
        );
        ensure!(
            cluster.namespace_label(below, "parent").await?.is_some(),
            "{below}: the parent label stays"
        );
    }
    ensure!(
        cluster.namespace_label("child", "owner").await?.as_deref() == Some("me"),
        "a key nobody propagated stays"
    );
    cluster.shutdown().await;
    Ok(())
}

async fn removed_keys_of_a_template_are_removed_from_its_instances(domain: &str) -> Result<()> {
    let cluster = template_and_instance(domain).await?;
    cluster
        .label_namespace("inst", &[("tier-mine", Some("kept"))])
        .await?;
    cluster
        .label_namespace("tmpl", &[("team", Some("red")), ("tier-1", Some("gold"))])
        .await?;
    cluster
        .annotate_namespace("tmpl", &[("note", Some("t"))])
        .await?;
    cluster
        .wait_namespace_label("inst", "tier-1", Some("gold"))
        .await?;
    cluster
        .wait_namespace_annotation("inst", "note", Some("t"))
        .await?;
    cluster.label_namespace("tmpl", &[("tier-1", None)]).await?;
    cluster
        .annotate_namespace("tmpl", &[("note", None)])
        .await?;
    cluster.wait_namespace_label("inst", "tier-1", None).await?;
    cluster
        .wait_namespace_annotation("inst", "note", None)
        .await?;
    cluster.settle().await?;
    ensure!(
        cluster.namespace_label("inst", "team").await?.as_deref() == Some("red"),
        "a key still propagated stays"
    );
    ensure!(
        cluster
            .namespace_label("inst", "tier-mine")
            .await?
            .as_deref()
            == Some("kept"),
        "a key nobody propagated stays, though labelKeys matches it"
    );
    cluster.shutdown().await;
    Ok(())
}

async fn removed_keys_of_a_sub_namespace_spec_are_removed_from_its_namespace(
    domain: &str,
) -> Result<()> {
    let cluster = Cluster::start(domain).await?;
    cluster
        .create_namespace("root", &[("type", "root")])
        .await?;
    cluster
        .create_sub_namespace("root", "team-a", &[("app", "shop")])
        .await?;
    cluster
        .wait_namespace_label("team-a", "app", Some("shop"))
        .await?;
    cluster
        .sub_namespaces("root")
        .patch(
            "team-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"labels": {"app": null}}})),
        )
        .await?;
    cluster.wait_namespace_label("team-a", "app", None).await?;
    cluster.settle().await?;
    ensure!(
        cluster
            .namespace_label("team-a", "parent")
            .await?
            .as_deref()
            == Some("root"),
        "the parent label stays"
    );
    cluster.shutdown().await;
    Ok(())
}

/// #17.1: the manifest of Accurate's docs/subnamespaces.md, in the domain's group
/// (`accurate.cybozu.com/v2` under Accurate's domain), without `spec`.
async fn subnamespace_without_spec_in_the_domain_group_creates_sub_namespace(
    domain: &str,
) -> Result<()> {
    let cluster = Cluster::start(domain).await?;
    cluster
        .create_namespace("root", &[("type", "root")])
        .await?;
    let api_version = cluster.sub_api.api_version();
    if domain == common::ACCURATE {
        ensure!(api_version == "accurate.cybozu.com/v2", "{api_version}");
    }
    cluster
        .create_sub_namespace_object(json!({"apiVersion": api_version, "kind": "SubNamespace",
            "metadata": {"namespace": "root", "name": "sn1"}}))
        .await?;
    cluster
        .wait_namespace_label("sn1", "parent", Some("root"))
        .await?;
    wait_for("SubNamespace root/sn1 Ready", || async {
        let conditions = cluster.sub_namespace_conditions("root", "sn1").await?;
        Ok(condition_status(&conditions, types::READY) == ConditionStatus::True)
    })
    .await?;
    cluster.shutdown().await;
    Ok(())
}

/// #16.9: `propagate-generated` for an owner of any kind. The owner here is a cert-manager
/// Certificate, a kind the controller does not watch; the Secret it generated gets
/// `propagate=update` and is copied below.
async fn propagate_generated_works_for_an_owner_of_a_kind_not_watched(domain: &str) -> Result<()> {
    let cluster = root_and_child(domain).await?;
    cluster
        .create_crd(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "certificates.cert-manager.io"},
            "spec": {"group": "cert-manager.io", "scope": "Namespaced",
                "names": {"kind": "Certificate", "plural": "certificates",
                          "singular": "certificate", "listKind": "CertificateList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]},
        }))
        .await?;
    let certificates = cluster.dynamic("root", "cert-manager.io", "v1", "Certificate");
    let certificate = json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": "web", "namespace": "root",
                     "annotations": {cluster.key("propagate-generated"): "update"}},
        "spec": {"secretName": "web-tls"},
    });
    wait_for("the Certificate kind to be served", || async {
        Ok(certificates
            .patch(
                "web",
                &PatchParams::apply("test"),
                &Patch::Apply(&certificate),
            )
            .await
            .is_ok())
    })
    .await?;
    let uid = certificates
        .get("web")
        .await?
        .metadata
        .uid
        .unwrap_or_default();
    let generated = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "web-tls", "namespace": "root", "ownerReferences": [
            {"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "name": "web",
             "uid": uid, "controller": true}]},
        "data": {"value": common::base64("cert")},
    });
    cluster
        .secrets("root")
        .patch(
            "web-tls",
            &PatchParams::apply("test"),
            &Patch::Apply(&generated),
        )
        .await?;
    cluster.wait_secret("child", "web-tls", "cert").await?;
    ensure!(
        cluster
            .secret_annotation("root", "web-tls", "propagate")
            .await?
            .as_deref()
            == Some("update"),
        "the generated Secret carries propagate=update"
    );
    cluster.shutdown().await;
    Ok(())
}

/// #16.10: a sub-namespace already holds an object of the source's kind and name that is not a
/// copy. Arbor leaves it (see arbor-policy's decision, rows 6-7) and says so: a Warning Event
/// `CopyBlocked` on the object, the `errors{reason="CopyBlocked"}` metric, and
/// ExplainPropagation naming the rule.
async fn same_name_object_without_from_keeps_the_copy_out_visibly(domain: &str) -> Result<()> {
    let cluster = root_and_child(domain).await?;
    cluster.create_secret("child", "s", "mine", &[]).await?;
    cluster
        .create_secret("root", "s", "theirs", &[("propagate", "update")])
        .await?;
    let events: Api<Event> = Api::namespaced(cluster.client.clone(), "child");
    wait_for("a CopyBlocked event on Secret child/s", || async {
        Ok(events
            .list(&Default::default())
            .await?
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("CopyBlocked")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("s")
            }))
    })
    .await?;
    cluster.settle().await?;
    ensure!(
        cluster.secret_value("child", "s").await?.as_deref() == Some("mine"),
        "the object that is not a copy is never overwritten"
    );
    let blocked = cluster
        .metrics
        .errors
        .get_or_create(&ErrorLabels {
            reason: "CopyBlocked".into(),
        })
        .get();
    ensure!(
        blocked == 1,
        "the metric counts the blocked copy once, got {blocked}"
    );
    let explained =
        cluster
            .controller()
            .service()
            .explain(&arbor_proto::v1::ExplainPropagationRequest {
                object: Some(arbor_proto::v1::ObjectRef {
                    group: String::new(),
                    version: "v1".into(),
                    kind: "Secret".into(),
                    namespace: "root".into(),
                    name: "s".into(),
                }),
                target_namespace: "child".into(),
            })?;
    let rule = explained
        .targets
        .first()
        .and_then(|t| t.decision.as_ref())
        .map(|d| d.rule.clone())
        .unwrap_or_default();
    ensure!(
        rule == arbor_policy::propagation::NAME_OCCUPIED_RULE,
        "explain names the rule: {rule}"
    );
    cluster.shutdown().await;
    Ok(())
}
