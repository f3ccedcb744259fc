//! What a hostile tenant tried through the running controller (issue #23): repositories that
//! nest directories deeper than any stack, and sources that point at another source's cache.
//! Each attack fails for the attacking source alone, with a clear error on its status, while
//! the other sources keep syncing.

mod controller_support;

use std::path::Path;

use arbor_api::GitTrack;
use arbor_api::condition::{find_condition, reasons, types};
use arbor_api::keys::SourceRef;
use arbor_api::source::GitSourceStatus;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use controller_support::*;

const GITTRACKS_ONLY: [&str; 2] = ["--gittrack-mode=Enabled", "--clustergittrack-mode=Disabled"];

/// Commits, on top of `main`, a chain of `depth` directories (`deep/d/d/…`) ending in one file,
/// written as git objects directly: the file system of the test need not hold the path.
fn commit_deep_directory(repo: &Path, depth: usize) -> anyhow::Result<String> {
    let repo = git2::Repository::open(repo)?;
    let blob = repo.blob(b"the bottom\n")?;
    let mut builder = repo.treebuilder(None)?;
    builder.insert("bottom.txt", blob, 0o100_644)?;
    let mut tree = builder.write()?;
    for _ in 1..depth {
        let mut builder = repo.treebuilder(None)?;
        builder.insert("d", tree, 0o040_000)?;
        tree = builder.write()?;
    }
    let head = repo.head()?.peel_to_commit()?;
    let mut root = repo.treebuilder(Some(&head.tree()?))?;
    root.insert("deep", tree, 0o040_000)?;
    let root = repo.find_tree(root.write()?)?;
    let signature = git2::Signature::now("Tenant", "tenant@example.com")?;
    let commit = repo.commit(
        Some("HEAD"),
        &signature,
        &signature,
        "nest a directory deeply",
        &root,
        &[&head],
    )?;
    Ok(commit.to_string())
}

/// Waits until the status of `source` carries an error with `code`; returns the status.
async fn error_on(
    cluster: &Cluster,
    instance: &Instance,
    source: &SourceRef,
    code: &str,
) -> anyhow::Result<GitSourceStatus> {
    eventually(&format!("{code} on the status of {source}"), || async {
        let status = cluster.status(source).await?.unwrap_or_default();
        if status.errors.iter().any(|error| error.code == code) {
            return Ok(Some(status));
        }
        instance.rounds(source, 1).await;
        Ok(None)
    })
    .await
}

/// #23.1: a directory nested 700 (or 1,500) levels deep made gitsync overflow its stack and
/// abort. The process survives (this test runs the controller in its own process), each deep
/// source reports the depth with its name and the directory, and a healthy source keeps
/// syncing beside them.
#[tokio::test]
async fn a_deeply_nested_directory_fails_its_source_alone_and_the_process_survives()
-> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    for namespace in ["deep700", "deep1500", "healthy"] {
        cluster.namespace(namespace).await?;
    }
    let instance = cluster.instance(&GITTRACKS_ONLY).await?;

    let mut deep = Vec::new();
    for (namespace, depth) in [("deep700", 700), ("deep1500", 1500)] {
        let repo = Repo::new()?;
        repo.write("cm.yaml", &configmap(None, "settings", "1"))?;
        repo.commit("a ConfigMap")?;
        commit_deep_directory(repo.path(), depth)?;
        let source = cluster.create_gittrack(namespace, "app", &repo).await?;
        deep.push((repo, source));
    }
    let healthy_repo = Repo::new()?;
    healthy_repo.write("cm.yaml", &configmap(None, "settings", "1"))?;
    let first = healthy_repo.commit("first")?;
    let healthy = cluster
        .create_gittrack("healthy", "app", &healthy_repo)
        .await?;
    cluster.synced(&instance, &healthy, &first).await?;

    for (_, source) in &deep {
        let status = error_on(&cluster, &instance, source, "ARB3009").await?;
        let error = status
            .errors
            .iter()
            .find(|error| error.code == "ARB3009")
            .unwrap();
        let SourceRef::GitTrack { namespace, .. } = source else {
            unreachable!()
        };
        assert!(
            error.message.contains(&format!("GitTrack {namespace}/app")),
            "the error names the source: {}",
            error.message
        );
        assert!(
            error.message.contains("\"deep/d/d/")
                && error
                    .message
                    .contains("nested more than 256 directories deep"),
            "the error names the directory and the bound: {}",
            error.message
        );
        assert!(status.observed_commit.is_none(), "nothing was applied");
        assert!(
            !cluster
                .exists(&cluster.configmaps(namespace), "settings")
                .await?
        );
    }

    healthy_repo.write("cm.yaml", &configmap(None, "settings", "2"))?;
    let second = healthy_repo.commit("second")?;
    cluster.synced(&instance, &healthy, &second).await?;
    let settings = cluster.configmaps("healthy").get("settings").await?;
    assert_eq!(settings.data["data"]["value"], "2");
    instance.stop().await;
    Ok(())
}

/// Creates the GitTrack `namespace/name` following `reference` (a JSON `spec.reference`).
async fn gittrack_at(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    repository: &str,
    reference: serde_json::Value,
) -> anyhow::Result<SourceRef> {
    let spec = json!({"repository": repository, "reference": reference});
    gittrack_with(cluster, namespace, name, spec).await
}

/// Creates the flat GitTrack `namespace/name` with `spec` (repository, reference and more).
async fn gittrack_with(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    mut spec: serde_json::Value,
) -> anyhow::Result<SourceRef> {
    spec["layout"] = json!("Flat");
    spec["pollInterval"] = json!("1h");
    let api: Api<GitTrack> = Api::namespaced(cluster.client.clone(), namespace);
    let source: GitTrack = serde_json::from_value(json!({
        "apiVersion": "arbor.dev/v1alpha1",
        "kind": "GitTrack",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }))?;
    api.create(&PostParams::default(), &source).await?;
    Ok(SourceRef::GitTrack {
        namespace: namespace.into(),
        name: name.into(),
    })
}

/// Asserts that the fetch of `source` failed with ARB3001 saying `why`, with `Ready=False`.
async fn refused(
    cluster: &Cluster,
    instance: &Instance,
    source: &SourceRef,
    why: &str,
) -> anyhow::Result<()> {
    let status = error_on(cluster, instance, source, "ARB3001").await?;
    let error = status.errors.iter().find(|e| e.code == "ARB3001").unwrap();
    assert!(error.message.contains(why), "{}", error.message);
    let ready = find_condition(&status.conditions, types::READY).expect("Ready");
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason, reasons::FETCH_FAILED);
    assert!(ready.message.contains(why), "{}", ready.message);
    assert!(status.observed_commit.is_none());
    Ok(())
}

/// #23.2: a GitTrack in `emptyns` fetched `file://<cache>/gittrack_shop_flat-app/repo.git` at
/// shop's observed commit and applied shop's private ConfigMap in `emptyns`. The cache
/// directory is no longer derivable from the source's name, and even knowing it (here: read
/// from the disk, as a leak would give it), directly or through a symbolic link, the fetch is
/// refused with a condition that says why.
#[tokio::test]
async fn a_tenant_cannot_fetch_another_tenants_repository_from_the_cache() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    for namespace in ["shop", "emptyns"] {
        cluster.namespace(namespace).await?;
    }
    let instance = cluster.instance(&GITTRACKS_ONLY).await?;
    let repo = Repo::new()?;
    repo.write("private.yaml", &configmap(None, "private", "s3cr3t"))?;
    let commit = repo.commit("shop's private settings")?;
    let shop = cluster.create_gittrack("shop", "flat-app", &repo).await?;
    cluster.synced(&instance, &shop, &commit).await?;

    assert!(
        !instance.cache_dir().join("gittrack_shop_flat-app").exists(),
        "the cache path is not the predictable one any more"
    );
    let shop_cache = std::fs::read_dir(instance.cache_dir())?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.join("repo.git").is_dir())
        .expect("shop's cache directory");
    let link_dir = tempfile::tempdir()?;
    let link = link_dir.path().join("innocent.git");
    std::os::unix::fs::symlink(shop_cache.join("repo.git"), &link)?;

    let direct = format!("file://{}/repo.git", shop_cache.display());
    let through_link = format!("file://{}", link.display());
    for (name, url) in [("direct", direct), ("link", through_link)] {
        let thief = gittrack_at(&cluster, "emptyns", name, &url, json!({"commit": commit})).await?;
        refused(
            &cluster,
            &instance,
            &thief,
            "inside the controller's cache directory",
        )
        .await?;
    }
    assert!(
        !cluster
            .exists(&cluster.configmaps("emptyns"), "private")
            .await?
    );
    instance.stop().await;
    Ok(())
}

/// #23.2: without `--allow-file-repositories` (the chart's default), a `file://` source is
/// refused with a condition naming the flag, and nothing is applied.
#[tokio::test]
async fn file_repositories_are_refused_unless_the_instance_allows_them() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("team").await?;
    let mut flags = GITTRACKS_ONLY.to_vec();
    flags.push("--allow-file-repositories=false");
    let instance = cluster.instance(&flags).await?;
    let repo = Repo::new()?;
    repo.write("cm.yaml", &configmap(None, "settings", "1"))?;
    repo.commit("a ConfigMap")?;
    let source = cluster.create_gittrack("team", "app", &repo).await?;
    refused(&cluster, &instance, &source, "--allow-file-repositories").await?;
    assert!(
        !cluster
            .exists(&cluster.configmaps("team"), "settings")
            .await?
    );
    instance.stop().await;
    Ok(())
}

const PASSWORD: &str = "hunter2-s3cr3t";
const PASSWORD_BASE64: &str = "aHVudGVyMi1zM2NyM3Q=";
const NEW_PASSWORD_BASE64: &str = "Y29ycmVjdC1ob3JzZQ=="; // correct-horse
const USER: &str = "admin-sekrit-user";
const DRIFTED_BASE64: &str = "ZHJpZnRlZC12YWx1ZQ=="; // drifted-value

fn secret_yaml(password_base64: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\ndata:\n  password: \
         {password_base64}\nstringData:\n  user: {USER}\n"
    )
}

/// Asserts that `text` (something Arbor wrote or answered) holds no part of the payload.
fn assert_no_payload(what: &str, text: &str) {
    for secret in [PASSWORD, PASSWORD_BASE64, NEW_PASSWORD_BASE64, USER] {
        assert!(!text.contains(secret), "{what} carries {secret:?}: {text}");
    }
}

/// #23.4: a Secret declared in git was copied verbatim (`data` and `stringData`) into its
/// GitTrackObject. The tracking object now holds the Secret without its payload and a keyed
/// digest that changes with it; GetDeclared, the status and the Events carry no payload; and the
/// Secret itself is applied (and re-applied after a restart) from the repository.
#[tokio::test]
async fn a_secrets_payload_never_leaves_secret_protection() -> anyhow::Result<()> {
    let cluster = Cluster::start().await?;
    cluster.namespace("shop").await?;
    let repo = Repo::new()?;
    repo.write("secret.yaml", &secret_yaml(PASSWORD_BASE64))?;
    let first = repo.commit("a Secret")?;
    let instance = cluster.instance(&GITTRACKS_ONLY).await?;
    let source = cluster.create_gittrack("shop", "app", &repo).await?;
    cluster.synced(&instance, &source, &first).await?;

    let secrets = cluster.api("v1", "Secret", "secrets", Some("shop"));
    let live = secrets.get("db").await?;
    assert_eq!(live.data["data"]["password"], PASSWORD_BASE64);
    let tracking = cluster.api(
        "arbor.dev/v1alpha1",
        "GitTrackObject",
        "gittrackobjects",
        Some("shop"),
    );
    let tracked = tracking.get("secret.db").await?;
    assert_no_payload("the GitTrackObject", &serde_json::to_string(&tracked)?);
    let spec = &tracked.data["spec"];
    assert_eq!(spec["data"]["metadata"]["name"], "db");
    assert_eq!(spec["data"]["type"], "Opaque");
    assert!(spec["data"].get("data").is_none() && spec["data"].get("stringData").is_none());
    let first_digest = spec["payloadDigest"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(first_digest.starts_with("hmac-sha256:"), "{spec}");

    let secret_ref = arbor_proto::v1::ObjectRef {
        group: String::new(),
        version: "v1".into(),
        kind: "Secret".into(),
        namespace: "shop".into(),
        name: "db".into(),
    };
    let mut grpc = instance.grpc().await?;
    let declared = grpc
        .get_declared(arbor_proto::v1::GetDeclaredRequest {
            object: Some(secret_ref.clone()),
        })
        .await?
        .into_inner();
    assert!(declared.declared);
    assert_no_payload("GetDeclared", &declared.object_json);

    // Explain of a drifted Secret names the field that differs, not the values.
    cluster
        .edit(
            &secrets,
            "db",
            json!({"data": {"password": DRIFTED_BASE64}}),
        )
        .await?;
    let explained = grpc
        .explain(arbor_proto::v1::ExplainRequest {
            object: Some(secret_ref),
        })
        .await?
        .into_inner();
    let reason = explained.decision.map(|d| d.reason).unwrap_or_default();
    assert!(reason.contains("data.password differs"), "{reason}");
    assert_no_payload("Explain", &reason);
    assert!(!reason.contains(DRIFTED_BASE64), "{reason}");

    repo.write("secret.yaml", &secret_yaml(NEW_PASSWORD_BASE64))?;
    let second = repo.commit("rotate the password")?;
    cluster.synced(&instance, &source, &second).await?;
    assert_eq!(
        secrets.get("db").await?.data["data"]["password"],
        NEW_PASSWORD_BASE64
    );
    let rotated = tracking.get("secret.db").await?;
    assert_no_payload("the GitTrackObject", &serde_json::to_string(&rotated)?);
    assert_ne!(rotated.data["spec"]["payloadDigest"], first_digest.as_str());

    let status = cluster.status(&source).await?.unwrap_or_default();
    assert_no_payload("the status", &serde_json::to_string(&status)?);
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(cluster.client.clone(), "shop");
    let events = events.list(&Default::default()).await?;
    assert_no_payload("the Events", &serde_json::to_string(&events.items)?);

    // After a restart the payload comes from the repository again, not from the tracking
    // object: a Secret lost meanwhile is recreated whole.
    instance.stop().await;
    secrets.delete("db", &Default::default()).await?;
    let instance = cluster.instance(&GITTRACKS_ONLY).await?;
    let recreated = eventually("the Secret to be recreated", || async {
        instance.request_round(&source);
        instance.rounds(&source, 1).await;
        Ok(secrets.get_opt("db").await?)
    })
    .await?;
    assert_eq!(recreated.data["data"]["password"], NEW_PASSWORD_BASE64);
    assert_no_payload(
        "the GitTrackObject",
        &serde_json::to_string(&tracking.get("secret.db").await?)?,
    );
    instance.stop().await;
    Ok(())
}

const CLUSTER_ADMIN_BINDING: &str = "apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: take-over
subjects:
- kind: User
  name: mallory
  apiGroup: rbac.authorization.k8s.io
roleRef:
  kind: ClusterRole
  name: cluster-admin
  apiGroup: rbac.authorization.k8s.io
";

/// #23.3: a namespaced GitTrack created a RoleBinding to `cluster-admin` with gitsync's own
/// (cluster-wide bind/escalate) permissions. A GitTrack now applies as the ServiceAccount it
/// names, through impersonation: when that account may not write RoleBindings, the binding is
/// not created, the refusal (naming the account) is on the source, and the rest of the source
/// (a ConfigMap the account may write) is applied.
#[tokio::test]
async fn a_gittrack_applies_with_its_service_accounts_permissions() -> anyhow::Result<()> {
    let rule = arbor_kube_emu::authz::DenyRule::parse(
        "deny user=system:serviceaccount:team:deployer resource=rolebindings",
    )
    .map_err(anyhow::Error::msg)?;
    let cluster = Cluster::start_with(arbor_kube_emu::KubeEmu::builder().deny(rule)).await?;
    cluster.namespace("team").await?;
    let instance = cluster.instance(&GITTRACKS_ONLY).await?;
    let repo = Repo::new()?;
    repo.write("binding.yaml", CLUSTER_ADMIN_BINDING)?;
    repo.write("cm.yaml", &configmap(None, "settings", "1"))?;
    repo.commit("a ConfigMap and a way to cluster-admin")?;
    let spec = json!({
        "repository": repo.url(),
        "reference": {"branch": "main"},
        "serviceAccountName": "deployer",
    });
    let source = gittrack_with(&cluster, "team", "app", spec).await?;

    let status = error_on(&cluster, &instance, &source, "ARB3004").await?;
    let error = status.errors.iter().find(|e| e.code == "ARB3004").unwrap();
    assert!(
        error
            .message
            .contains("system:serviceaccount:team:deployer")
            && error.message.contains("rolebindings"),
        "the refusal names the account and the resource: {}",
        error.message
    );
    assert_eq!(
        error.object.as_deref(),
        Some("RoleBinding.rbac.authorization.k8s.io/team/take-over")
    );
    assert!(
        !cluster
            .exists(&cluster.rolebindings("team"), "take-over")
            .await?
    );
    assert!(
        cluster
            .exists(&cluster.configmaps("team"), "settings")
            .await?
    );
    let ready = find_condition(&status.conditions, types::READY).expect("Ready");
    assert_eq!(ready.status, "False");
    instance.stop().await;
    Ok(())
}

/// #23.3: with `--require-service-account`, a GitTrack naming no ServiceAccount (and no
/// installation default) is not synced, and says which field to set.
#[tokio::test]
async fn a_gittrack_without_a_service_account_is_refused_when_one_is_required() -> anyhow::Result<()>
{
    let cluster = Cluster::start().await?;
    cluster.namespace("team").await?;
    let mut flags = GITTRACKS_ONLY.to_vec();
    flags.push("--require-service-account");
    let instance = cluster.instance(&flags).await?;
    let repo = Repo::new()?;
    repo.write("cm.yaml", &configmap(None, "settings", "1"))?;
    repo.commit("a ConfigMap")?;
    let source = cluster.create_gittrack("team", "app", &repo).await?;
    let status = error_on(&cluster, &instance, &source, "ARB3007").await?;
    let stalled = find_condition(&status.conditions, types::STALLED).expect("Stalled");
    assert_eq!(stalled.reason, reasons::INVALID_SPEC);
    assert!(
        stalled.message.contains("spec.serviceAccountName"),
        "{}",
        stalled.message
    );
    assert!(
        !cluster
            .exists(&cluster.configmaps("team"), "settings")
            .await?
    );
    instance.stop().await;
    Ok(())
}
