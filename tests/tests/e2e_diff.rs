//! `arborctl diff` (issue #19 item 3) against a running arbor-gitsync on arbor-kube-emu:
//! `SyncService.Preview` plans a revision or a local directory with the round's own plan
//! (`arbor_policy::sync::round`) and writes nothing.
//!
//! One source, `GitTrack/team-a/config` (flat), synced at a first commit; a second commit on
//! `main` (not synced: the poll interval is an hour) creates, updates and deletes; two
//! hand-made ConfigMaps without the management label stand for rows 3 and 6.

use arbor_e2e::Run;
use arbor_e2e::eventually;
use arbor_e2e::system::{TestSystem, WAIT, namespaced_source, start, sync_to};
use arbor_testkit::GitRepo;
use arbor_testkit::cluster::{apply, ensure_namespace};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use serde::Deserialize;
use serde_json::{Value, json};

fn configmap(name: &str, key: &str, value: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  {key}: {value}\n")
}

fn diff(system: &TestSystem, args: &[&str]) -> (Option<i32>, Run) {
    let mut all: Vec<String> = vec!["diff".into(), "GitTrack/team-a/config".into()];
    all.extend(args.iter().map(|arg| (*arg).to_owned()));
    all.extend(system.arborctl_flags());
    let path = arbor_e2e::binary("arborctl", "arborctl").unwrap();
    let output = std::process::Command::new(path)
        .args(&all)
        .env("ARBORCONFIG", "/dev/null")
        .output()
        .unwrap();
    (output.status.code(), output.into())
}

#[derive(Debug, Deserialize)]
struct Record {
    verb: String,
    resource: String,
    namespace: String,
    name: String,
}

/// The writes the emulator recorded, leaving out leader election's lease renewals and Events.
async fn writes(system: &TestSystem) -> Vec<String> {
    #[derive(Deserialize)]
    struct Report {
        records: Vec<Record>,
    }
    let request = http::Request::get("/__emu/requests")
        .body(Vec::new())
        .unwrap();
    let text = system.client.request_text(request).await.unwrap();
    let report: Report = serde_json::from_str(&text).unwrap();
    report
        .records
        .into_iter()
        .filter(|r| !matches!(r.verb.as_str(), "get" | "list" | "watch"))
        .filter(|r| r.resource != "leases" && r.resource != "events")
        .map(|r| format!("{} {} {}/{}", r.verb, r.resource, r.namespace, r.name))
        .collect()
}

fn entry<'a>(answer: &'a Value, name: &str) -> &'a Value {
    answer["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|object| object["object"]["name"] == name)
        .unwrap_or_else(|| panic!("{name} is not in the preview: {answer:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arborctl_diff_previews_create_update_delete_unmanaged_and_the_prune_guard()
-> anyhow::Result<()> {
    let system = start(&["gitsync"]).await?;
    let repo = GitRepo::init(system.dir.path().join("repos/config"))?;
    repo.write("keep.yaml", &configmap("keep", "value", "same"))?;
    repo.write("change.yaml", &configmap("change", "color", "blue"))?;
    repo.write("remove.yaml", &configmap("remove", "value", "old"))?;
    repo.write("stay-1.yaml", &configmap("stay-1", "value", "x"))?;
    repo.write("stay-2.yaml", &configmap("stay-2", "value", "x"))?;
    let first = repo.commit_all("first")?;
    ensure_namespace(&system.client, "team-a").await?;
    apply(
        &system.client,
        &json!({"apiVersion": "arbor.dev/v1alpha1", "kind": "GitTrack",
                "metadata": {"name": "config", "namespace": "team-a"},
                "spec": {"repository": repo.file_url(), "reference": {"branch": "main"},
                         "layout": "Flat", "pollInterval": "1h"}}),
        None,
    )
    .await?;
    sync_to(&system, namespaced_source("team-a", "config"), &first).await?;
    // Made by hand, without the management label: one the next commit declares (row 3), one
    // nothing declares (row 6).
    for name in ["adopt", "handmade"] {
        apply(
            &system.client,
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": "team-a"},
                    "data": {"value": "by hand"}}),
            None,
        )
        .await?;
    }

    // The applied commit: nothing would change (exit 0); the hand-made one is left alone.
    let (code, run) = diff(&system, &["--revision", &first]);
    assert_eq!(code, Some(0), "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("0 to create, 0 to update, 0 to delete"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("ConfigMap/team-a/handmade"),
        "{}",
        run.stdout
    );

    // A second commit on main, not synced.
    repo.write("change.yaml", &configmap("change", "color", "green"))?;
    repo.remove("remove.yaml")?;
    repo.write("new.yaml", &configmap("new", "value", "fresh"))?;
    repo.write("adopt.yaml", &configmap("adopt", "value", "from git"))?;
    let second = repo.commit_all("second")?;

    let before = writes(&system).await;
    let (code, run) = diff(&system, &["--revision", "main", "-o", "json"]);
    assert_eq!(
        code,
        Some(1),
        "changes exit 1: {}{}",
        run.stdout,
        run.stderr
    );
    let answer: Value = serde_json::from_str(&run.stdout)?;
    assert_eq!(answer["commit"], second.as_str());
    assert_eq!(answer["changes"], 3, "{answer:#}");
    let new = entry(&answer, "new");
    assert_eq!(new["change"], "CREATE");
    assert_eq!(new["rule"], "seeds/000 row 4");
    assert_eq!(new["file"], "new.yaml");
    let change = entry(&answer, "change");
    assert_eq!(change["change"], "UPDATE");
    assert_eq!(change["rule"], "seeds/000 row 2");
    assert_eq!(
        change["fields"],
        json!([{"path": "data.color", "live": "\"blue\"", "declared": "\"green\""}]),
        "only the field git changes, as server-side apply would set it"
    );
    let removed = entry(&answer, "remove");
    assert_eq!(removed["change"], "DELETE");
    assert_eq!(removed["rule"], "seeds/000 row 5");
    assert_eq!(removed["held"], false);
    assert_eq!(entry(&answer, "adopt")["change"], "UNMANAGED");
    assert_eq!(entry(&answer, "adopt")["rule"], "seeds/000 row 3");
    assert_eq!(entry(&answer, "handmade")["change"], "UNMANAGED");
    assert_eq!(entry(&answer, "handmade")["rule"], "seeds/000 row 6");
    assert_eq!(entry(&answer, "keep")["change"], "UNCHANGED");
    assert_eq!(answer["blockedBy"], json!([]));

    // The table people read says the same.
    let (code, table) = diff(&system, &["--revision", "main"]);
    assert_eq!(code, Some(1), "{}{}", table.stdout, table.stderr);
    assert!(
        table
            .stdout
            .contains("1 to create, 1 to update, 1 to delete, 3 unchanged, 2 left alone"),
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.contains("~ data.color: \"blue\" -> \"green\""),
        "{}",
        table.stdout
    );

    // A local directory that drops most of the source: the mass-prune guard would stop the
    // round (deletions and everything else held), and the preview says so.
    let dir = system.dir.path().join("local");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("keep.yaml"), configmap("keep", "value", "same"))?;
    std::fs::write(dir.join("README.md"), "not part of the source")?;
    let (code, run) = diff(&system, &["--dir", dir.to_str().unwrap(), "-o", "json"]);
    assert_eq!(code, Some(1), "{}{}", run.stdout, run.stderr);
    let answer: Value = serde_json::from_str(&run.stdout)?;
    let guard = answer["blockedBy"][0].as_str().unwrap_or_default();
    assert!(guard.contains("--max-prune-fraction"), "{answer:#}");
    assert_eq!(entry(&answer, "stay-1")["change"], "DELETE");
    assert_eq!(entry(&answer, "stay-1")["held"], true);

    // A directory that does not parse: exit 2, with the file named.
    std::fs::write(dir.join("broken.yaml"), "kind: [unclosed")?;
    let (code, run) = diff(&system, &["--dir", dir.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("broken.yaml"), "{}", run.stdout);

    // A revision the repository does not have: exit 2.
    let (code, run) = diff(&system, &["--revision", "branch:no-such-branch"]);
    assert_eq!(code, Some(2), "{}{}", run.stdout, run.stderr);

    // Nothing was written by any preview, and the cluster still holds the first commit.
    let after = writes(&system).await;
    assert_eq!(
        after.get(before.len()..).unwrap_or_default(),
        &[] as &[String],
        "a preview writes nothing"
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(system.client.clone(), "team-a");
    assert!(configmaps.get_opt("new").await?.is_none());
    assert!(configmaps.get_opt("remove").await?.is_some());
    let color = configmaps.get("change").await?.data.unwrap_or_default();
    assert_eq!(color.get("color").map(String::as_str), Some("blue"));

    // Syncing the second commit does what the preview said.
    sync_to(&system, namespaced_source("team-a", "config"), &second).await?;
    eventually("remove is deleted", WAIT, || {
        let configmaps = configmaps.clone();
        async move {
            let found = configmaps.get_opt("remove").await.map_err(|source| {
                arbor_testkit::Error::Kube {
                    what: "reading ConfigMap team-a/remove".into(),
                    source,
                }
            })?;
            Ok(found.is_none().then_some(()))
        }
    })
    .await?;
    assert!(configmaps.get_opt("new").await?.is_some());
    let (code, run) = diff(&system, &["--revision", "main"]);
    assert_eq!(code, Some(0), "{}{}", run.stdout, run.stderr);
    Ok(())
}
