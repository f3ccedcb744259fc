//! Valid repositories: `arborctl vet` accepts them and `arborctl hydrate` writes exactly the
//! objects they declare (compared with the golden directories under
//! `tests/fixtures/hydrated/`). Set `ARBOR_BLESS=1` to rewrite a golden directory after an
//! intended change, then review the diff.

use std::collections::BTreeMap;
use std::path::Path;

use arbor_e2e::{arborctl, fixture, read_files};

fn hydrate(repo: &Path, out: &Path, extra: &[&str]) -> arbor_e2e::Run {
    let mut args = vec![
        "hydrate".to_owned(),
        repo.display().to_string(),
        "-o".to_owned(),
        out.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    arborctl(&args).unwrap()
}

fn assert_matches_golden(actual: &Path, golden_name: &str) {
    let golden = fixture(&format!("hydrated/{golden_name}"));
    if std::env::var_os("ARBOR_BLESS").is_some() {
        let _ = std::fs::remove_dir_all(&golden);
        for (path, contents) in read_files(actual).unwrap() {
            let target = golden.join(path);
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::write(target, contents).unwrap();
        }
    }
    let expected = read_files(&golden).unwrap();
    let actual = read_files(actual).unwrap();
    let names = |files: &BTreeMap<String, String>| files.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(&actual),
        names(&expected),
        "hydrated file set differs"
    );
    for (path, contents) in &expected {
        assert_eq!(
            &actual[path], contents,
            "{path} differs from the golden copy"
        );
    }
}

#[test]
fn foo_corp_vets_clean() {
    let run = arborctl(["vet".as_ref(), fixture("repos/good/foo-corp").as_os_str()]).unwrap();
    assert!(run.success, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("21 object(s) in 4 namespace(s)"),
        "{}",
        run.stdout
    );
}

#[test]
fn foo_corp_hydrates_to_the_golden_per_namespace_objects() {
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("hydrated");
    let run = hydrate(&fixture("repos/good/foo-corp"), &target, &[]);
    assert!(run.success, "{}{}", run.stdout, run.stderr);
    assert_matches_golden(&target, "foo-corp");
}

#[test]
fn foo_corp_inheritance_selectors_and_quota_are_visible_in_the_output() {
    let out = tempfile::tempdir().unwrap();
    let run = hydrate(
        &fixture("repos/good/foo-corp"),
        out.path(),
        &["--format", "json"],
    );
    assert!(run.success, "{}{}", run.stdout, run.stderr);
    let files = read_files(out.path()).unwrap();
    let object = |path: &str| -> serde_json::Value {
        serde_json::from_str(files.get(path).unwrap_or_else(|| panic!("{path} missing"))).unwrap()
    };
    // The abstract namespace's RoleBinding lands in all three shipping namespaces.
    for ns in ["shipping-prod", "shipping-staging", "shipping-dev"] {
        let rb = object(&format!("{ns}/rolebinding_pod-creators.json"));
        assert_eq!(rb["metadata"]["namespace"], ns);
    }
    assert!(!files.contains_key("audit/rolebinding_pod-creators.json"));
    // sre-supported selects env in (prod, staging): audit is prod, shipping-dev is not selected.
    assert!(files.contains_key("audit/rolebinding_sre-admin.json"));
    assert!(files.contains_key("shipping-staging/rolebinding_sre-admin.json"));
    assert!(!files.contains_key("shipping-dev/rolebinding_sre-admin.json"));
    assert!(
        object("shipping-prod/rolebinding_sre-admin.json")["metadata"]
            .get("annotations")
            .is_none()
    );
    // hierarchicalQuota: shipping-dev's own quota wins, the others inherit the abstract one.
    assert_eq!(
        object("shipping-dev/resourcequota_quota.json")["spec"]["hard"]["pods"],
        "3"
    );
    assert_eq!(
        object("shipping-prod/resourcequota_quota.json")["spec"]["hard"]["pods"],
        "10"
    );
    assert!(files.contains_key("cluster/clusterrole_pod-creator.json"));
}

#[test]
fn hydrate_refuses_a_non_empty_output_directory() {
    let out = tempfile::tempdir().unwrap();
    std::fs::write(out.path().join("keep.txt"), "mine").unwrap();
    let run = hydrate(&fixture("repos/good/foo-corp"), out.path(), &[]);
    assert!(!run.success);
    assert!(run.stderr.contains("not empty"), "{}", run.stderr);
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 1);
}

#[test]
fn hydrate_of_an_invalid_repo_prints_its_errors_and_writes_nothing() {
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("never");
    let run = hydrate(
        &fixture("repos/bad/ARB2009-kind-without-sync"),
        &target,
        &[],
    );
    assert!(!run.success);
    assert!(run.stdout.starts_with("ARB2009 "), "{}", run.stdout);
    assert!(!target.exists());
}

#[test]
fn flat_repo_vets_clean_and_hydrates_by_namespace() {
    let repo = fixture("repos/good/flat-app");
    let run = arborctl([
        "vet",
        repo.to_str().unwrap(),
        "--layout",
        "flat",
        "--sub-path",
        "deploy",
    ])
    .unwrap();
    assert!(run.success, "{}{}", run.stdout, run.stderr);
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("hydrated");
    let run = hydrate(
        &repo,
        &target,
        &["--layout", "flat", "--sub-path", "deploy"],
    );
    assert!(run.success, "{}{}", run.stdout, run.stderr);
    assert_matches_golden(&target, "flat-app");
}

#[test]
fn completions_are_printed_for_a_shell() {
    let run = arborctl(["completions", "bash"]).unwrap();
    assert!(run.success, "{}", run.stderr);
    assert!(run.stdout.contains("arborctl") && run.stdout.contains("hydrate"));
}
