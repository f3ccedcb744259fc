//! seeds/002's "never" rows hold in every mode: through the running HTTPS endpoint, with the
//! settings built from the flags exactly as `arbor-webhook` builds them, for every mode
//! combination the flags accept. The rows that depend on the installation's mode stay
//! mode-dependent.

mod support;

use std::sync::Arc;

use arbor_webhook::Args;
use arbor_webhook::gittrack_owners::FixedGitTracks;
use clap::Parser;
use serde_json::{Value, json};
use support::*;

/// Every (`--gittrack-mode`, `--clustergittrack-mode`) the webhook accepts (both Disabled is
/// refused at start).
const MODES: [(&str, &str); 5] = [
    ("Enabled", "IncludeNamespaced"),
    ("Enabled", "ExcludeNamespaced"),
    ("Enabled", "Disabled"),
    ("Disabled", "IncludeNamespaced"),
    ("Disabled", "ExcludeNamespaced"),
];

async fn webhook(gittrack_mode: &str, cluster_mode: &str) -> HttpsServer {
    webhook_knowing(gittrack_mode, cluster_mode, FixedGitTracks::default()).await
}

/// The webhook with `gittracks` as the GitTracks its reflector has seen.
async fn webhook_knowing(
    gittrack_mode: &str,
    cluster_mode: &str,
    gittracks: FixedGitTracks,
) -> HttpsServer {
    let args = Args::try_parse_from([
        "arbor-webhook",
        "--webhook-cert",
        "tls.crt",
        "--webhook-key",
        "tls.key",
        "--gittrack-mode",
        gittrack_mode,
        "--clustergittrack-mode",
        cluster_mode,
    ])
    .unwrap();
    HttpsServer::start(
        policy(args.settings().unwrap(), vec![], None).with_gittracks(Arc::new(gittracks)),
    )
    .await
}

/// A GitTrackObject in `team-b` whose only claim is an ownerReference to GitTrack `apps` with
/// the uid of team-a's GitTrack: no source annotation names the other namespace.
fn gittrack_object_owned_by_uid_alone() -> Vec<u8> {
    let object = json!({
        "apiVersion": ARBOR,
        "kind": "GitTrackObject",
        "metadata": {
            "name": "configmap-settings",
            "namespace": "team-b",
            "ownerReferences": [{
                "apiVersion": ARBOR, "kind": "GitTrack", "name": "apps", "uid": TEAM_A_APPS_UID,
                "controller": true,
            }],
        },
        "spec": {"name": "settings", "kind": "ConfigMap", "data": {}},
    });
    create("GitTrackObject", Some("team-b"), object)
}

const TEAM_A_APPS_UID: &str = "5e1f0c3a-team-a-apps";

fn create(kind: &str, namespace: Option<&str>, object: Value) -> Vec<u8> {
    let name = object["metadata"]["name"].as_str().unwrap().to_owned();
    serde_json::to_vec(&review_body(request(
        "CREATE",
        ("arbor.dev", "v1alpha1", kind),
        namespace,
        &name,
        GITSYNC_SA,
        Some(object),
        None,
    )))
    .unwrap()
}

/// A GitTrackObject in `team-b` claimed by `source`, owned through an ownerReference of kind
/// `owner_kind`.
fn gittrack_object(source: &str, owner_kind: &str) -> Vec<u8> {
    let object = json!({
        "apiVersion": ARBOR,
        "kind": "GitTrackObject",
        "metadata": {
            "name": "configmap-settings",
            "namespace": "team-b",
            "annotations": {"arbor.dev/source": source},
            "ownerReferences": [{
                "apiVersion": ARBOR, "kind": owner_kind, "name": "apps", "uid": "1", "controller": true,
            }],
        },
        "spec": {"name": "settings", "kind": "ConfigMap", "data": {}},
    });
    create("GitTrackObject", Some("team-b"), object)
}

fn cluster_object_owned_by_a_gittrack() -> Vec<u8> {
    let object = json!({
        "apiVersion": ARBOR,
        "kind": "ClusterGitTrackObject",
        "metadata": {
            "name": "clusterrole-viewer",
            "annotations": {"arbor.dev/source": "GitTrack/team-a/apps"},
            "ownerReferences": [{"apiVersion": ARBOR, "kind": "GitTrack", "name": "apps", "uid": "1"}],
        },
        "spec": {"name": "viewer", "kind": "ClusterRole", "data": {}},
    });
    create("ClusterGitTrackObject", None, object)
}

/// `(allowed, message)` of the AdmissionReview the endpoint answered.
async fn answer(server: &HttpsServer, body: Vec<u8>) -> (bool, String) {
    let (status, body, _) = server.post("/validate", body).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let review: Value = serde_json::from_slice(&body).unwrap();
    let response = &review["response"];
    let message = response["status"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (response["allowed"].as_bool().unwrap(), message)
}

#[tokio::test]
async fn cross_namespace_never_allowed_in_every_mode() {
    for (gittrack_mode, cluster_mode) in MODES {
        let server = webhook(gittrack_mode, cluster_mode).await;
        let (allowed, message) =
            answer(&server, gittrack_object("GitTrack/team-a/apps", "GitTrack")).await;
        assert!(
            !allowed,
            "--gittrack-mode={gittrack_mode} --clustergittrack-mode={cluster_mode}: allowed"
        );
        assert!(
            message.contains("Cross namespace never allowed"),
            "{gittrack_mode}/{cluster_mode}: {message}"
        );
    }
}

/// An ownerReference has no namespace; its uid says where the owner is. A uid of another
/// namespace's GitTrack is the cross-namespace claim, annotation or not (before, the webhook read
/// the owner in the object's namespace and, with `--gittrack-mode=Disabled`, only warned).
#[tokio::test]
async fn cross_namespace_never_allowed_by_an_owner_uid_alone_in_every_mode() {
    for (gittrack_mode, cluster_mode) in MODES {
        let known = FixedGitTracks::default().with(TEAM_A_APPS_UID, "team-a");
        let server = webhook_knowing(gittrack_mode, cluster_mode, known).await;
        let (allowed, message) = answer(&server, gittrack_object_owned_by_uid_alone()).await;
        assert!(
            !allowed,
            "--gittrack-mode={gittrack_mode} --clustergittrack-mode={cluster_mode}: allowed ({message})"
        );
        assert!(
            message.contains("Cross namespace never allowed") && message.contains("team-a"),
            "{gittrack_mode}/{cluster_mode}: {message}"
        );
    }
    // The same object whose owner's uid is team-b's own GitTrack is the same-namespace row.
    let server = webhook_knowing(
        "Enabled",
        "IncludeNamespaced",
        FixedGitTracks::default().with(TEAM_A_APPS_UID, "team-b"),
    )
    .await;
    let (allowed, message) = answer(&server, gittrack_object_owned_by_uid_alone()).await;
    assert!(allowed, "{message}");
}

#[tokio::test]
async fn gittrack_can_never_own_cluster_scoped_resource_in_every_mode() {
    for (gittrack_mode, cluster_mode) in MODES {
        let server = webhook(gittrack_mode, cluster_mode).await;
        let (allowed, message) = answer(&server, cluster_object_owned_by_a_gittrack()).await;
        assert!(
            !allowed,
            "--gittrack-mode={gittrack_mode} --clustergittrack-mode={cluster_mode}: allowed"
        );
        assert!(
            message.contains("GitTrack can never own cluster-scoped resource"),
            "{gittrack_mode}/{cluster_mode}: {message}"
        );
    }
}

#[tokio::test]
async fn clustergittrack_owning_namespaced_objects_stays_mode_dependent() {
    for (gittrack_mode, cluster_mode) in MODES {
        let server = webhook(gittrack_mode, cluster_mode).await;
        let (allowed, message) = answer(
            &server,
            gittrack_object("ClusterGitTrack/platform", "ClusterGitTrack"),
        )
        .await;
        assert_eq!(
            allowed,
            cluster_mode == "IncludeNamespaced",
            "{gittrack_mode}/{cluster_mode}: {message}"
        );
    }
}

/// A ClusterGitTrackObject whose only ownerReference names a `GitTrack` of `api_version`.
fn cluster_object_owned_by_reference_alone(api_version: &str) -> Vec<u8> {
    let object = json!({
        "apiVersion": ARBOR,
        "kind": "ClusterGitTrackObject",
        "metadata": {
            "name": "clusterrole-viewer",
            "ownerReferences": [{
                "apiVersion": api_version, "kind": "GitTrack", "name": "apps", "uid": "1", "controller": true,
            }],
        },
        "spec": {"name": "viewer", "kind": "ClusterRole", "data": {}},
    });
    create("ClusterGitTrackObject", None, object)
}

/// The same rule as gitsync's (`OwningSourceKind::named_by`): an ownerReference of kind GitTrack in
/// another API group names another project's object, not an Arbor GitTrack, so the "GitTrack
/// can never own cluster-scoped resource" row does not apply to it.
#[tokio::test]
async fn an_owner_reference_of_the_right_kind_in_a_foreign_group_is_not_an_arbor_owner() {
    let server = webhook("Enabled", "IncludeNamespaced").await;
    let (allowed, message) = answer(
        &server,
        cluster_object_owned_by_reference_alone("arbor.dev/v1alpha1"),
    )
    .await;
    assert!(
        !allowed && message.contains("GitTrack can never own cluster-scoped resource"),
        "{message}"
    );
    let (allowed, message) = answer(
        &server,
        cluster_object_owned_by_reference_alone("other.example/v1alpha1"),
    )
    .await;
    assert!(allowed, "{message}");
}
