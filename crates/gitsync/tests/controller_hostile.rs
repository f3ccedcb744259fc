//! What a hostile tenant tried through the running controller (issue #23): repositories that
//! nest directories deeper than any stack, and sources that point at another source's cache.
//! Each attack fails for the attacking source alone, with a clear error on its status, while
//! the other sources keep syncing.

mod controller_support;

use std::path::Path;

use arbor_api::keys::SourceRef;
use arbor_api::source::GitSourceStatus;

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
