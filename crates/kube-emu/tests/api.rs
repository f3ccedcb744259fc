//! The API semantics of arbor-kube-emu, driven through kube-rs (and raw requests where the exact
//! status code and body matter).

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{
    Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams, Preconditions,
};
use serde_json::{Value, json};
use support::{
    api_status, clear_finalizers, config_map, create, get, post, raw, start, start_with,
};

async fn create_namespace(client: &kube::Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .expect("namespace created");
}

#[tokio::test]
async fn created_objects_carry_server_fields_and_read_back() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = create(&api, &config_map("settings", &[])).await;
    let uid = created.metadata.uid.clone().expect("uid assigned");
    assert!(created.metadata.creation_timestamp.is_some());
    let first_version: u64 = created
        .metadata
        .resource_version
        .clone()
        .expect("resourceVersion")
        .parse()
        .expect("numeric");
    let read = api.get("settings").await.expect("read back");
    assert_eq!(read.metadata.uid.as_deref(), Some(uid.as_str()));
    assert_eq!(read.data, created.data);
    let second = create(&api, &config_map("other", &[])).await;
    let second_version: u64 = second
        .metadata
        .resource_version
        .expect("rv")
        .parse()
        .expect("numeric");
    assert!(
        second_version > first_version,
        "resourceVersions grow globally"
    );
    assert_ne!(second.metadata.uid.as_deref(), Some(uid.as_str()));
    emu.shutdown().await;
}

#[tokio::test]
async fn errors_are_status_objects_worded_like_kube_apiserver() {
    let (emu, client) = start().await;
    let (code, status) = get(&client, "/api/v1/namespaces/default/configmaps/missing").await;
    assert_eq!(code, 404);
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "NotFound");
    assert_eq!(status["message"], "configmaps \"missing\" not found");
    assert_eq!(status["details"]["name"], "missing");

    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create(&api, &config_map("once", &[])).await;
    let duplicate = api_status(
        api.create(&PostParams::default(), &config_map("once", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!(duplicate.code, 409);
    assert_eq!(duplicate.reason, "AlreadyExists");
    assert_eq!(duplicate.message, "configmaps \"once\" already exists");

    let (code, status) = get(&client, "/apis/apps/v1/namespaces/default/deployments/web").await;
    assert_eq!(
        (code, status["message"].as_str()),
        (404, Some("deployments.apps \"web\" not found"))
    );

    let (code, status) = get(
        &client,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (405, Some("MethodNotAllowed"))
    );

    let (code, status) = get(&client, "/apis/nothing.example.com/v1/things").await;
    assert_eq!((code, status["reason"].as_str()), (404, Some("NotFound")));

    let (code, status) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        None,
    )
    .await;
    assert_eq!((code, status["reason"].as_str()), (400, Some("BadRequest")));
    emu.shutdown().await;
}

/// A create the server refuses: why, where, what, and the status it answers with.
struct RefusedCreate {
    case: &'static str,
    path: &'static str,
    body: Value,
    code: u16,
    message_start: &'static str,
}

#[tokio::test]
async fn refused_creates_answer_with_kube_statuses() {
    let (emu, client) = start().await;
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let cases = [
        RefusedCreate {
            case: "a resourceVersion on create is a bad request",
            path: configmaps,
            body: json!({"metadata": {"name": "x", "resourceVersion": "7"}}),
            code: 400,
            message_start: "resourceVersion should not be set on objects to be created",
        },
        RefusedCreate {
            case: "a body namespace that differs from the URL is a bad request",
            path: configmaps,
            body: json!({"metadata": {"name": "x", "namespace": "kube-system"}}),
            code: 400,
            message_start: "the namespace of the provided object does not match the namespace sent on the request",
        },
        RefusedCreate {
            case: "an invalid name is 422 Invalid",
            path: configmaps,
            body: json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name"}}),
            code: 422,
            message_start: "ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain",
        },
        RefusedCreate {
            case: "a missing name is 422 Invalid",
            path: configmaps,
            body: json!({"metadata": {}}),
            code: 422,
            message_start: "ConfigMap \"\" is invalid: metadata.name: Required value: name or generateName is required",
        },
        RefusedCreate {
            case: "namespace names are DNS labels",
            path: "/api/v1/namespaces",
            body: json!({"metadata": {"name": "has.dots"}}),
            code: 422,
            message_start: "Namespace \"has.dots\" is invalid: metadata.name",
        },
        RefusedCreate {
            case: "a body of another kind is a bad request",
            path: configmaps,
            body: json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}),
            code: 400,
            message_start: "the kind in the data (Secret) does not match the expected kind (ConfigMap)",
        },
    ];
    for refused in cases {
        let (code, status) = post(&client, refused.path, refused.body).await;
        assert_eq!(code, refused.code, "{}: {status}", refused.case);
        assert_eq!(status["kind"], "Status", "{}", refused.case);
        assert!(
            status["message"]
                .as_str()
                .is_some_and(|message| message.starts_with(refused.message_start)),
            "{}: {status}",
            refused.case
        );
        if code == 422 {
            assert_eq!(
                status["details"]["causes"][0]["field"], "metadata.name",
                "{}",
                refused.case
            );
        }
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn creating_in_a_missing_namespace_is_not_found() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "nowhere");
    let status = api_status(
        api.create(&PostParams::default(), &config_map("x", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 404);
    assert_eq!(status.message, "namespaces \"nowhere\" not found");
    emu.shutdown().await;
}

#[tokio::test]
async fn updates_with_a_stale_resource_version_conflict() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = create(&api, &config_map("x", &[])).await;
    let mut first = created.clone();
    first.data = Some(BTreeMap::from([("key".into(), "first".into())]));
    api.replace("x", &PostParams::default(), &first)
        .await
        .expect("first update wins");
    let mut second = created.clone();
    second.data = Some(BTreeMap::from([("key".into(), "second".into())]));
    let status = api_status(
        api.replace("x", &PostParams::default(), &second)
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 409);
    assert_eq!(status.reason, "Conflict");
    assert_eq!(
        status.message,
        "Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your changes to the latest version and try again"
    );
    // Without a resourceVersion the update is unconditional.
    second.metadata.resource_version = None;
    let updated = api
        .replace("x", &PostParams::default(), &second)
        .await
        .expect("unconditional update");
    assert_eq!(updated.data.expect("data")["key"], "second");
    emu.shutdown().await;
}

#[tokio::test]
async fn label_selectors_filter_lists() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    for (name, labels) in [
        ("web", vec![("app", "web"), ("tier", "front")]),
        ("db", vec![("app", "db"), ("tier", "back")]),
        ("plain", vec![]),
    ] {
        create(&api, &config_map(name, &labels)).await;
    }
    let names = |list: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        list.items
            .into_iter()
            .filter_map(|cm| cm.metadata.name)
            .collect()
    };
    let select = |selector: &'static str| {
        let api = api.clone();
        async move {
            names(
                api.list(&ListParams::default().labels(selector))
                    .await
                    .expect("listed"),
            )
        }
    };
    assert_eq!(select("app=web").await, vec!["web"]);
    assert_eq!(select("app==db").await, vec!["db"]);
    assert_eq!(select("app!=web").await, vec!["db", "plain"]);
    assert_eq!(select("tier in (front,back)").await, vec!["db", "web"]);
    assert_eq!(select("tier notin (front)").await, vec!["db", "plain"]);
    assert_eq!(select("app").await, vec!["db", "web"]);
    assert_eq!(select("!app").await, vec!["plain"]);
    emu.shutdown().await;
}

#[tokio::test]
async fn field_selectors_filter_by_name_and_namespace() {
    let (emu, client) = start().await;
    create_namespace(&client, "other").await;
    for namespace in ["default", "other"] {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        create(&api, &config_map("shared", &[])).await;
        create(&api, &config_map(&format!("only-{namespace}"), &[])).await;
    }
    let all: Api<ConfigMap> = Api::all(client.clone());
    let by_name = all
        .list(&ListParams::default().fields("metadata.name=shared"))
        .await
        .expect("listed");
    assert_eq!(by_name.items.len(), 2);
    let by_namespace = all
        .list(&ListParams::default().fields("metadata.namespace=other,metadata.name!=shared"))
        .await
        .expect("listed");
    assert_eq!(by_namespace.items.len(), 1);
    assert_eq!(
        by_namespace.items[0].metadata.name.as_deref(),
        Some("only-other")
    );
    let status = api_status(
        all.list(&ListParams::default().fields("data.key=value"))
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 400);
    assert_eq!(status.message, "field label not supported: data.key");
    let secrets: Api<Secret> = Api::all(client);
    secrets
        .list(&ListParams::default().fields("type=Opaque"))
        .await
        .expect("secrets select by type");
    emu.shutdown().await;
}

#[tokio::test]
async fn a_last_page_that_fills_its_limit_ends_the_list() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    for index in 0..6 {
        create(&api, &config_map(&format!("cm-{index}"), &[])).await;
    }
    let first = api
        .list(&ListParams::default().limit(3))
        .await
        .expect("first page");
    assert_eq!(first.metadata.remaining_item_count, Some(3));
    let token = first.metadata.continue_.expect("more pages");
    let last = api
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .expect("last page");
    assert_eq!(last.items.len(), 3);
    assert_eq!(last.metadata.remaining_item_count, None);
    assert!(
        last.metadata.continue_.is_none_or(|token| token.is_empty()),
        "nothing is left after the last page"
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn paging_serves_a_consistent_snapshot() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    for index in 0..7 {
        create(&api, &config_map(&format!("cm-{index}"), &[])).await;
    }
    let first = api
        .list(&ListParams::default().limit(3))
        .await
        .expect("first page");
    assert_eq!(first.items.len(), 3);
    assert_eq!(first.metadata.remaining_item_count, Some(4));
    let token = first.metadata.continue_.clone().expect("more pages");
    // Changes after the first page do not show up in later pages of the same list.
    create(&api, &config_map("cm-9-late", &[])).await;
    api.delete("cm-5", &DeleteParams::default())
        .await
        .expect("deleted");
    let mut names: Vec<String> = first
        .items
        .into_iter()
        .filter_map(|cm| cm.metadata.name)
        .collect();
    let mut counts = Vec::new();
    let mut next = Some(token);
    while let Some(token) = next {
        let page = api
            .list(&ListParams::default().limit(3).continue_token(&token))
            .await
            .expect("next page");
        assert_eq!(
            page.metadata.resource_version,
            first.metadata.resource_version
        );
        counts.push(page.metadata.remaining_item_count);
        names.extend(page.items.into_iter().filter_map(|cm| cm.metadata.name));
        next = page.metadata.continue_.filter(|token| !token.is_empty());
    }
    let expected: Vec<String> = (0..7).map(|index| format!("cm-{index}")).collect();
    assert_eq!(names, expected);
    // Each page counts what comes after it in the list's snapshot, not in the store of now.
    assert_eq!(counts, [Some(1), None]);
    emu.shutdown().await;
}

#[tokio::test]
async fn a_later_page_shows_objects_as_they_were_when_the_list_began() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for index in 0..6 {
        create(&api, &config_map(&format!("cm-{index}"), &[])).await;
    }
    // Keys sort by namespace first: a namespaced list must neither start before nor run past
    // its namespace's objects.
    create_namespace(&client, "aaa").await;
    create_namespace(&client, "zzz").await;
    for namespace in ["aaa", "zzz"] {
        let elsewhere: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        create(&elsewhere, &config_map("cm-0", &[])).await;
    }
    let first = api
        .list(&ListParams::default().limit(2))
        .await
        .expect("first page");
    let token = first.metadata.continue_.clone().expect("more pages");
    let mut changed = config_map("cm-4", &[]);
    changed.data = Some([("changed".to_owned(), "yes".to_owned())].into());
    api.replace("cm-4", &PostParams::default(), &changed)
        .await
        .expect("replaced");
    let rest = api
        .list(&ListParams::default().limit(10).continue_token(&token))
        .await
        .expect("the rest");
    let names: Vec<_> = rest
        .items
        .iter()
        .filter_map(|cm| cm.metadata.name.clone())
        .collect();
    assert_eq!(names, ["cm-2", "cm-3", "cm-4", "cm-5"]);
    assert_eq!(
        rest.items[2].data,
        config_map("cm-4", &[]).data,
        "cm-4 as it was at the first page"
    );
    assert_eq!(rest.metadata.continue_, None);
    emu.shutdown().await;
}

#[tokio::test]
async fn a_paged_list_with_a_selector_says_there_is_more_but_not_how_many() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    for index in 0..5 {
        let labels: &[(&str, &str)] = if index == 2 { &[] } else { &[("team", "a")] };
        create(&api, &config_map(&format!("cm-{index}"), labels)).await;
    }
    // kube-apiserver's ListMeta: with a label or field selector the number of remaining items
    // is unknown, so remainingItemCount is left unset; without one it is counted.
    let first = api
        .list(&ListParams::default().labels("team=a").limit(2))
        .await
        .expect("first page");
    assert_eq!(first.metadata.remaining_item_count, None);
    let token = first.metadata.continue_.clone().expect("more pages");
    let rest = api
        .list(
            &ListParams::default()
                .labels("team=a")
                .limit(2)
                .continue_token(&token),
        )
        .await
        .expect("second page");
    let names: Vec<_> = first
        .items
        .iter()
        .chain(&rest.items)
        .filter_map(|cm| cm.metadata.name.clone())
        .collect();
    assert_eq!(names, ["cm-0", "cm-1", "cm-3", "cm-4"]);
    assert_eq!(rest.metadata.continue_, None, "nothing left to select");
    let unselected = api
        .list(&ListParams::default().limit(2))
        .await
        .expect("listed");
    assert_eq!(unselected.metadata.remaining_item_count, Some(3));
    emu.shutdown().await;
}

#[tokio::test]
async fn an_exact_resource_version_lists_the_state_of_that_moment() {
    use kube::api::VersionMatch;
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    create(&api, &config_map("early", &[])).await;
    let then = api
        .list(&ListParams::default())
        .await
        .expect("listed")
        .metadata
        .resource_version
        .expect("rv");
    create(&api, &config_map("late", &[])).await;
    api.delete("early", &DeleteParams::default())
        .await
        .expect("deleted");
    let at_then = api
        .list(
            &ListParams::default()
                .at(&then)
                .matching(VersionMatch::Exact),
        )
        .await
        .expect("listed at a revision");
    let names: Vec<String> = at_then
        .items
        .into_iter()
        .filter_map(|cm| cm.metadata.name)
        .collect();
    assert_eq!(names, vec!["early"]);
    assert_eq!(at_then.metadata.resource_version, Some(then));
    emu.shutdown().await;
}

#[tokio::test]
async fn a_continue_token_older_than_the_history_is_gone() {
    let (emu, client) = start_with(arbor_kube_emu::KubeEmu::builder().history_window(5)).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    for index in 0..4 {
        create(&api, &config_map(&format!("cm-{index}"), &[])).await;
    }
    let first = api
        .list(&ListParams::default().limit(2))
        .await
        .expect("first page");
    let token = first.metadata.continue_.expect("more pages");
    for index in 0..6 {
        create(&api, &config_map(&format!("later-{index}"), &[])).await;
    }
    let status = api_status(
        api.list(&ListParams::default().limit(2).continue_token(&token))
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 410);
    assert_eq!(status.reason, "Expired");
    emu.shutdown().await;
}

#[tokio::test]
async fn generate_name_gets_a_random_suffix() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut template = config_map("", &[]);
    template.metadata.name = None;
    template.metadata.generate_name = Some("job-".into());
    let first = create(&api, &template).await;
    let second = create(&api, &template).await;
    let first_name = first.metadata.name.expect("named");
    assert!(
        first_name.starts_with("job-") && first_name.len() == "job-".len() + 5,
        "{first_name}"
    );
    assert_ne!(Some(first_name), second.metadata.name);
    emu.shutdown().await;
}

#[tokio::test]
async fn dry_run_writes_change_nothing() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let preview = api
        .create(&dry, &config_map("ghost", &[]))
        .await
        .expect("dry-run create");
    assert_eq!(preview.metadata.name.as_deref(), Some("ghost"));
    assert!(api.get_opt("ghost").await.expect("read").is_none());
    create(&api, &config_map("real", &[])).await;
    api.delete("real", &DeleteParams::default().dry_run())
        .await
        .expect("dry-run delete");
    assert!(api.get_opt("real").await.expect("read").is_some());
    emu.shutdown().await;
}

fn deployment(name: &str, replicas: i32) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1"}]},
            },
        },
    })
}

#[tokio::test]
async fn generation_moves_with_spec_changes_and_status_is_a_separate_subresource() {
    let (emu, client) = start().await;
    let api: Api<Deployment> = Api::namespaced(client, "default");
    let created: Deployment = create(
        &api,
        &serde_json::from_value(deployment("web", 1)).expect("valid"),
    )
    .await;
    assert_eq!(created.metadata.generation, Some(1));
    let labelled = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}})),
        )
        .await
        .expect("labelled");
    assert_eq!(
        labelled.metadata.generation,
        Some(1),
        "metadata changes keep the generation"
    );
    let scaled = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}, "status": {"replicas": 99}})),
        )
        .await
        .expect("scaled");
    assert_eq!(scaled.metadata.generation, Some(2));
    assert!(scaled.status.is_none(), "the main resource ignores status");
    let with_status = api
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 3}, "spec": {"replicas": 7}})),
        )
        .await
        .expect("status patched");
    assert_eq!(with_status.status.expect("status").replicas, Some(3));
    assert_eq!(with_status.spec.replicas, Some(3), "/status ignores spec");
    assert_eq!(
        with_status.metadata.generation,
        Some(2),
        "status changes keep the generation"
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn finalizers_hold_deleted_objects_until_removed() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut held = config_map("held", &[]);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    create(&api, &held).await;
    let deleted = api
        .delete("held", &DeleteParams::default())
        .await
        .expect("delete accepted");
    let pending = deleted.left().expect("the object, still there");
    assert!(pending.metadata.deletion_timestamp.is_some());
    let still_there = api.get("held").await.expect("still readable");
    assert!(still_there.metadata.deletion_timestamp.is_some());
    let status = api_status(
        api.patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}}),
            ),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(status.code, 422, "no new finalizers on a deleted object");
    clear_finalizers(&api, "held").await;
    assert!(
        api.get_opt("held").await.expect("read").is_none(),
        "removing the last finalizer deletes"
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn delete_preconditions_are_checked() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let created = create(&api, &config_map("x", &[])).await;
    let wrong_uid = DeleteParams::default().preconditions(Preconditions {
        uid: Some("not-the-uid".into()),
        resource_version: None,
    });
    let status = api_status(api.delete("x", &wrong_uid).await.unwrap_err());
    assert_eq!(status.code, 409);
    assert!(
        status
            .message
            .contains("Precondition failed: UID in precondition: not-the-uid"),
        "{}",
        status.message
    );
    let wrong_version = DeleteParams::default().preconditions(Preconditions {
        uid: None,
        resource_version: Some("1".into()),
    });
    assert_eq!(
        api_status(api.delete("x", &wrong_version).await.unwrap_err()).code,
        409
    );
    let right = DeleteParams::default().preconditions(Preconditions {
        uid: created.metadata.uid.clone(),
        resource_version: created.metadata.resource_version.clone(),
    });
    let status = api
        .delete("x", &right)
        .await
        .expect("deleted")
        .right()
        .expect("a Status for built-ins");
    assert_eq!(status.details.expect("details").name, "x");
    emu.shutdown().await;
}

fn owned_config_map(name: &str, owners: &[&ConfigMap], block: bool) -> ConfigMap {
    let mut child = config_map(name, &[]);
    child.metadata.owner_references = Some(
        owners
            .iter()
            .map(
                |owner| k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                    name: owner.metadata.name.clone().expect("named"),
                    uid: owner.metadata.uid.clone().expect("uid"),
                    block_owner_deletion: Some(block),
                    controller: None,
                },
            )
            .collect(),
    );
    child
}

#[tokio::test]
async fn deleting_an_owner_collects_its_dependents_in_the_background() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let owner = create(&api, &config_map("owner", &[])).await;
    let other_owner = create(&api, &config_map("other-owner", &[])).await;
    create(&api, &owned_config_map("child", &[&owner], false)).await;
    let grandchild_owner = api.get("child").await.expect("child");
    create(
        &api,
        &owned_config_map("grandchild", &[&grandchild_owner], false),
    )
    .await;
    create(
        &api,
        &owned_config_map("shared", &[&owner, &other_owner], false),
    )
    .await;
    // A reference with the right name but another uid is not an owner.
    let mut impostor = owner.clone();
    impostor.metadata.uid = Some("another-uid".into());
    create(&api, &owned_config_map("unrelated", &[&impostor], false)).await;

    api.delete("owner", &DeleteParams::background())
        .await
        .expect("deleted");
    assert!(api.get_opt("child").await.expect("read").is_none());
    assert!(
        api.get_opt("grandchild").await.expect("read").is_none(),
        "collection cascades"
    );
    assert!(
        api.get_opt("shared").await.expect("read").is_some(),
        "a live owner keeps it"
    );
    assert!(api.get_opt("unrelated").await.expect("read").is_some());
    emu.shutdown().await;
}

#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let owner = create(&api, &config_map("owner", &[])).await;
    let mut child = owned_config_map("child", &[&owner], true);
    child.metadata.finalizers = Some(vec!["example.com/slow".into()]);
    create(&api, &child).await;

    api.delete("owner", &DeleteParams::foreground())
        .await
        .expect("delete accepted");
    let waiting = api.get("owner").await.expect("the owner waits");
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert_eq!(
        waiting.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_owned()])
    );
    let child = api.get("child").await.expect("the child is being deleted");
    assert!(child.metadata.deletion_timestamp.is_some());

    clear_finalizers(&api, "child").await;
    assert!(api.get_opt("child").await.expect("read").is_none());
    assert!(
        api.get_opt("owner").await.expect("read").is_none(),
        "the owner goes once its dependents are gone"
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn orphan_deletion_keeps_dependents_without_the_owner_reference() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let owner = create(&api, &config_map("owner", &[])).await;
    create(&api, &owned_config_map("child", &[&owner], false)).await;
    api.delete("owner", &DeleteParams::orphan())
        .await
        .expect("deleted");
    assert!(api.get_opt("owner").await.expect("read").is_none());
    let child = api.get("child").await.expect("the child stays");
    assert_eq!(child.metadata.owner_references, None);
    emu.shutdown().await;
}

#[tokio::test]
async fn a_deleted_namespace_terminates_until_its_contents_are_gone() {
    let (emu, client) = start().await;
    create_namespace(&client, "team").await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    create(&api, &config_map("plain", &[])).await;
    let mut held = config_map("held", &[]);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    create(&api, &held).await;

    namespaces
        .delete("team", &DeleteParams::default())
        .await
        .expect("delete accepted");
    let terminating = namespaces.get("team").await.expect("still there");
    assert_eq!(
        terminating.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    assert!(
        api.get_opt("plain").await.expect("read").is_none(),
        "contents are deleted"
    );
    let status = api_status(
        api.create(&PostParams::default(), &config_map("new", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 403);
    assert_eq!(status.reason, "Forbidden");
    assert_eq!(
        status.message,
        "configmaps \"new\" is forbidden: unable to create new content in namespace team because it is being terminated"
    );
    clear_finalizers(&api, "held").await;
    assert!(
        namespaces.get_opt("team").await.expect("read").is_none(),
        "the empty namespace goes"
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn system_namespaces_may_not_be_deleted() {
    let (emu, client) = start().await;
    let namespaces: Api<Namespace> = Api::all(client);
    for name in ["default", "kube-system", "kube-public"] {
        let status = api_status(
            namespaces
                .delete(name, &DeleteParams::default())
                .await
                .unwrap_err(),
        );
        assert_eq!(status.code, 403);
        assert_eq!(
            status.message,
            format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted")
        );
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn deletecollection_deletes_what_the_selector_matches() {
    let (emu, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    for (name, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        create(&api, &config_map(name, &[("app", app)])).await;
    }
    let deleted = api
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("app=x"),
        )
        .await
        .expect("deleted")
        .left()
        .expect("the deleted items");
    assert_eq!(deleted.items.len(), 2);
    let left: Vec<String> = api
        .list(&ListParams::default())
        .await
        .expect("listed")
        .items
        .into_iter()
        .filter_map(|cm| cm.metadata.name)
        .collect();
    assert_eq!(left, vec!["c"]);
    emu.shutdown().await;
}

#[tokio::test]
async fn leases_support_optimistic_updates() {
    let (emu, client) = start().await;
    let api: Api<Lease> = Api::namespaced(client, "kube-system");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "arbor-leader"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }))
    .expect("valid");
    let created = create(&api, &lease).await;
    let mut taken = created.clone();
    taken.spec.as_mut().expect("spec").holder_identity = Some("b".into());
    api.replace("arbor-leader", &PostParams::default(), &taken)
        .await
        .expect("taken over");
    let mut late = created;
    late.spec.as_mut().expect("spec").holder_identity = Some("c".into());
    assert_eq!(
        api_status(
            api.replace("arbor-leader", &PostParams::default(), &late)
                .await
                .unwrap_err()
        )
        .code,
        409
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn self_subject_access_reviews_are_answered_not_stored() {
    let (emu, client) = start().await;
    let review = json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "list", "resource": "configmaps", "namespace": "default"}},
    });
    let (code, answer) = post(
        &client,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        review,
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(answer["status"]["allowed"], true);
    let (code, _) = get(
        &client,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
    )
    .await;
    assert_eq!(code, 405);
    emu.shutdown().await;
}

#[tokio::test]
async fn namespaces_carry_their_name_label_and_keep_their_finalizer() {
    let (emu, client) = start().await;
    create_namespace(&client, "team").await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let created = namespaces.get("team").await.expect("created");
    assert_eq!(
        created.metadata.labels.expect("labels")["kubernetes.io/metadata.name"],
        "team"
    );
    // A client replacing the namespace without its spec cannot drop the "kubernetes" finalizer.
    let bare = Namespace {
        metadata: ObjectMeta {
            name: Some("team".into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    let replaced = namespaces
        .replace("team", &PostParams::default(), &bare)
        .await
        .expect("replaced");
    assert_eq!(
        replaced.spec.and_then(|spec| spec.finalizers),
        Some(vec!["kubernetes".to_owned()])
    );
    assert!(
        replaced
            .metadata
            .labels
            .expect("labels")
            .contains_key("kubernetes.io/metadata.name")
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn every_built_in_kind_arbor_needs_is_served() {
    let (emu, client) = start().await;
    let collections = [
        "/api/v1/namespaces",
        "/api/v1/namespaces/default/configmaps",
        "/api/v1/namespaces/default/secrets",
        "/api/v1/namespaces/default/serviceaccounts",
        "/api/v1/namespaces/default/services",
        "/api/v1/namespaces/default/pods",
        "/api/v1/namespaces/default/resourcequotas",
        "/api/v1/namespaces/default/limitranges",
        "/api/v1/namespaces/default/events",
        "/apis/apps/v1/namespaces/default/deployments",
        "/apis/apps/v1/namespaces/default/replicasets",
        "/apis/apps/v1/namespaces/default/statefulsets",
        "/apis/apps/v1/namespaces/default/daemonsets",
        "/apis/batch/v1/namespaces/default/jobs",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    ];
    for path in collections {
        let (code, list) = get(&client, path).await;
        assert_eq!(code, 200, "{path}: {list}");
        assert!(
            list["kind"].as_str().expect("kind").ends_with("List"),
            "{path}: {list}"
        );
    }
    let (code, _) = get(&client, "/apis/apps/v1/deployments").await;
    assert_eq!(code, 200, "namespaced kinds list across namespaces");
    let (code, _) = get(&client, "/api/v1/namespaces/default/namespaces").await;
    assert_eq!(code, 404, "cluster-scoped kinds have no namespaced path");
    emu.shutdown().await;
}

#[tokio::test]
async fn kube_rs_event_recorders_create_then_update_events() {
    use k8s_openapi::api::events::v1::Event as EventV1;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let (emu, client) = start().await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let subject = create(&config_maps, &config_map("subject", &[])).await;
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "arbor-test".into(),
            instance: None,
        },
    );
    let event = Event {
        type_: EventType::Normal,
        reason: "Synced".into(),
        note: Some("all good".into()),
        action: "Sync".into(),
        secondary: None,
    };
    let reference = kube::Resource::object_ref(&subject, &());
    recorder
        .publish(&event, &reference)
        .await
        .expect("published");
    recorder
        .publish(&event, &reference)
        .await
        .expect("published again");
    let events: Api<EventV1> = Api::namespaced(client, "default");
    let listed = events.list(&Default::default()).await.expect("listed");
    assert_eq!(listed.items.len(), 1, "a repeated event is one object");
    assert_eq!(listed.items[0].reason.as_deref(), Some("Synced"));
    assert_eq!(
        listed.items[0].series.as_ref().map(|series| series.count),
        Some(2)
    );
    emu.shutdown().await;
}
