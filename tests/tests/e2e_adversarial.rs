//! The repository attacks of issue #23, end to end: `arbor-kube-emu` and `arbor-gitsync` as
//! processes (gitsync with `--allow-file-repositories`, as the demo runs it), tenants' GitTracks
//! on `file://` repositories.
//!
//! - #23.1: a directory nested 1,500 levels deep used to overflow gitsync's stack and abort the
//!   process; now its source reports ARB3009 and another tenant's source keeps syncing.
//! - #23.2: a tenant pointing `file://` at another tenant's cache (its path as a leak would
//!   give it) is refused, and nothing of the victim's is applied in the tenant's namespace.
//! - #23.4: a Secret declared in git is applied, and its GitTrackObject holds no payload.

use anyhow::Context;
use arbor_api::{GitTrack, GitTrackObject};
use arbor_e2e::eventually;
use arbor_e2e::system::{TestSystem, WAIT, namespaced_source, start, sync_to};
use arbor_testkit::GitRepo;
use arbor_testkit::cluster::{apply, ensure_namespace};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use serde_json::json;

const PASSWORD_BASE64: &str = "aHVudGVyMi1zM2NyM3Q=";

/// Creates the flat GitTrack `namespace/name` on `repository` at `reference`.
async fn gittrack(
    system: &TestSystem,
    namespace: &str,
    name: &str,
    repository: &str,
    reference: serde_json::Value,
) -> anyhow::Result<()> {
    ensure_namespace(&system.client, namespace).await?;
    apply(
        &system.client,
        &json!({"apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrack",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"repository": repository, "reference": reference,
                         "layout": "Flat", "pollInterval": "5s"}}),
        None,
    )
    .await?;
    Ok(())
}

/// Waits until the GitTrack's status carries `code`; returns that error's message.
async fn status_error(
    system: &TestSystem,
    namespace: &str,
    name: &str,
    code: &str,
) -> anyhow::Result<String> {
    let api: Api<GitTrack> = Api::namespaced(system.client.clone(), namespace);
    eventually(&format!("{code} on {namespace}/{name}"), WAIT, || {
        let api = api.clone();
        async move {
            let status = api
                .get(name)
                .await
                .map_err(|source| arbor_testkit::Error::Kube {
                    what: format!("reading GitTrack {namespace}/{name}"),
                    source,
                })?
                .status
                .unwrap_or_default();
            Ok(status
                .errors
                .into_iter()
                .find(|error| error.code == code)
                .map(|error| error.message))
        }
    })
    .await
    .map_err(anyhow::Error::from)
}

fn configmap(name: &str, value: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  value: {value}\n")
}

#[tokio::test]
async fn hostile_repositories_fail_alone_and_reach_nothing_of_another_tenant() -> anyhow::Result<()>
{
    let system = start(&["gitsync"]).await?;
    let repos = system.dir.path().join("repos");

    // The healthy tenant, with a private ConfigMap and a Secret.
    let shop = GitRepo::init(repos.join("shop"))?;
    shop.write("private.yaml", &configmap("private", "s3cr3t"))?;
    shop.write(
        "secret.yaml",
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  password: \
             {PASSWORD_BASE64}\n"
        ),
    )?;
    let first = shop.commit_all("shop's configuration")?;
    gittrack(
        &system,
        "shop",
        "flat-app",
        &shop.file_url(),
        json!({"branch": "main"}),
    )
    .await?;
    sync_to(&system, namespaced_source("shop", "flat-app"), &first).await?;

    // #23.4: the Secret is applied; its tracking object holds no payload.
    let secret = Api::<Secret>::namespaced(system.client.clone(), "shop")
        .get("db")
        .await?;
    let password = secret.data.unwrap_or_default().remove("password");
    assert_eq!(
        password.map(|bytes| bytes.0),
        Some(b"hunter2-s3cr3t".to_vec())
    );
    let tracking = Api::<GitTrackObject>::namespaced(system.client.clone(), "shop")
        .get("secret.db")
        .await?;
    let tracking_text = serde_json::to_string(&tracking)?;
    assert!(
        !tracking_text.contains(PASSWORD_BASE64) && !tracking_text.contains("hunter2"),
        "{tracking_text}"
    );

    // #23.1: 1,500 nested directories in another tenant's repository.
    let deep = GitRepo::init(repos.join("deep"))?;
    deep.write("cm.yaml", &configmap("settings", "1"))?;
    let nested: String = "d/".repeat(1500);
    deep.write(&format!("{nested}bottom.txt"), "the bottom\n")?;
    deep.commit_all("nest a directory 1,500 levels deep")?;
    gittrack(
        &system,
        "deep",
        "app",
        &deep.file_url(),
        json!({"branch": "main"}),
    )
    .await?;
    let message = status_error(&system, "deep", "app", "ARB3009").await?;
    assert!(
        message.contains("GitTrack deep/app") && message.contains("nested more than 256"),
        "{message}"
    );

    // #23.2: a GitTrack in emptyns fetching shop's cache at shop's commit.
    let cache_root = system.dir.path().join("cache/gitsync");
    let shop_cache = std::fs::read_dir(&cache_root)
        .with_context(|| format!("reading {}", cache_root.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| {
            path.join("repo.git").is_dir()
                && path.join("repo.git/config").is_file()
                && std::fs::read_to_string(path.join("repo.git/config"))
                    .is_ok_and(|config| config.contains("repos/shop"))
        })
        .context("shop's cache directory")?;
    assert!(!cache_root.join("gittrack_shop_flat-app").exists());
    let stolen = format!("file://{}/repo.git", shop_cache.display());
    gittrack(
        &system,
        "emptyns",
        "thief",
        &stolen,
        json!({"commit": first}),
    )
    .await?;
    let message = status_error(&system, "emptyns", "thief", "ARB3001").await?;
    assert!(
        message.contains("inside the controller's cache directory"),
        "{message}"
    );
    let emptyns = Api::<ConfigMap>::namespaced(system.client.clone(), "emptyns");
    assert!(emptyns.get_opt("private").await?.is_none());

    // The process survived all of it: the healthy tenant keeps syncing.
    shop.write("private.yaml", &configmap("private", "rotated"))?;
    let second = shop.commit_all("rotate")?;
    sync_to(&system, namespaced_source("shop", "flat-app"), &second).await?;
    let private = Api::<ConfigMap>::namespaced(system.client.clone(), "shop")
        .get("private")
        .await?;
    assert_eq!(
        private
            .data
            .unwrap_or_default()
            .get("value")
            .map(String::as_str),
        Some("rotated")
    );
    Ok(())
}
