//! Every error code has a fixture repository under `tests/fixtures/repos/bad/<CODE>-*/` that
//! produces exactly that code, from the library and from `arborctl vet`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use arbor_e2e::{arborctl, fixture, fixture_args, flag_value, workspace_root};
use arbor_policy::layout::{ErrorCode, Layout};
use arbor_source::LoadError;
use arbor_source::{LoadOptions, load};

/// Each bad fixture with the code its directory name starts with.
fn bad_fixtures() -> Vec<(ErrorCode, PathBuf)> {
    let root = fixture("repos/bad");
    let mut fixtures: Vec<_> = std::fs::read_dir(&root)
        .expect("tests/fixtures/repos/bad exists")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let code = name
                .split_once('-')
                .and_then(|(code, _)| ErrorCode::parse(code))
                .unwrap_or_else(|| panic!("fixture {name} is not named <CODE>-<what>"));
            (code, path)
        })
        .collect();
    fixtures.sort();
    fixtures
}

fn library_codes(repo: &Path, args: &[String]) -> BTreeSet<ErrorCode> {
    let options = LoadOptions {
        layout: flag_value(args, "--layout")
            .map(|l| l.parse().unwrap())
            .unwrap_or(Layout::Hierarchical),
        sub_path: flag_value(args, "--sub-path").unwrap_or("").to_owned(),
        ..LoadOptions::default()
    };
    match load(repo, &options) {
        Err(LoadError::Invalid(errors)) => errors.iter().map(|e| e.code).collect(),
        other => panic!("{}: expected source errors, got {other:?}", repo.display()),
    }
}

#[test]
fn every_error_code_has_a_bad_fixture() {
    let covered: BTreeSet<_> = bad_fixtures().into_iter().map(|(code, _)| code).collect();
    // ARB3xxx are the running controller's (the cluster, the repository server, the source's
    // spec): no repository shows them, and the controller's tests do.
    let missing: Vec<_> = ErrorCode::ALL
        .iter()
        .filter(|code| !code.as_str().starts_with("ARB3"))
        .filter(|code| !covered.contains(code))
        .collect();
    assert!(missing.is_empty(), "codes without a fixture: {missing:?}");
}

#[test]
fn each_bad_fixture_yields_exactly_its_code_from_the_library() {
    for (code, repo) in bad_fixtures() {
        let args = fixture_args(&repo).unwrap();
        let codes = library_codes(&repo, &args);
        assert_eq!(codes, BTreeSet::from([code]), "{}", repo.display());
    }
}

#[test]
fn each_bad_fixture_yields_exactly_its_code_from_arborctl_vet() {
    for (code, repo) in bad_fixtures() {
        let mut args = vec!["vet".to_owned(), repo.display().to_string()];
        args.extend(fixture_args(&repo).unwrap());
        let run = arborctl(&args).unwrap();
        assert!(!run.success, "vet accepted {}", repo.display());
        let reported: BTreeSet<_> = run
            .stdout
            .lines()
            .map(|line| line.split_whitespace().next().and_then(ErrorCode::parse))
            .collect::<Option<_>>()
            .unwrap_or_else(|| panic!("a line without a code:\n{}", run.stdout));
        assert_eq!(
            reported,
            BTreeSet::from([code]),
            "{}:\n{}",
            repo.display(),
            run.stdout
        );
        assert!(run.stderr.contains("error(s)"), "{}", run.stderr);
    }
}

#[test]
fn vet_names_file_object_code_and_message() {
    let repo = fixture("repos/bad/ARB2005-duplicate-in-ancestry");
    let run = arborctl(["vet".as_ref(), repo.as_os_str()]).unwrap();
    assert_eq!(
        run.stdout.trim(),
        "ARB2005 namespaces/team/prod/viewers.yaml: RoleBinding.rbac.authorization.k8s.io/viewers: \
         RoleBinding.rbac.authorization.k8s.io/viewers is also declared in namespaces/team/viewers.yaml, \
         above this directory; both would land in the same namespaces"
    );
}

#[test]
fn malformed_yaml_is_reported_with_its_line() {
    let repo = fixture("repos/bad/ARB1001-malformed-yaml");
    let run = arborctl(["vet".as_ref(), repo.as_os_str()]).unwrap();
    assert!(
        run.stdout
            .starts_with("ARB1001 namespaces/team/prod/broken.yaml:5: "),
        "{}",
        run.stdout
    );
}

#[test]
fn every_error_code_is_documented() {
    let docs = std::fs::read_to_string(workspace_root().join("docs/error-codes.md")).unwrap();
    for code in ErrorCode::ALL {
        assert!(
            docs.contains(&format!("## {}", code.as_str())),
            "docs/error-codes.md has no section for {code}"
        );
    }
}

/// Issue 23 item 10: names the API server refuses for their kind (`Bad_Name` for a ConfigMap,
/// `-lead` for a Deployment, a Service starting with a digit) are refused by `arborctl vet`
/// with ARB1003, the file and the rule; an RBAC name with ':' is valid, as for the API server.
#[test]
fn vet_refuses_names_invalid_for_their_kind() {
    let dir = tempfile::tempdir().unwrap();
    let write = |file: &str, text: &str| std::fs::write(dir.path().join(file), text).unwrap();
    write(
        "settings.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n",
    );
    write(
        "lead.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: -lead\n",
    );
    write(
        "web.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: 1st-web\n",
    );
    write(
        "viewer.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: system:viewer\n",
    );
    let run = arborctl([
        "vet".as_ref(),
        dir.path().as_os_str(),
        "--layout".as_ref(),
        "flat".as_ref(),
    ])
    .unwrap();
    assert!(!run.success, "vet accepted invalid names:\n{}", run.stdout);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    for (file, name, rule) in [
        ("settings.yaml", "Bad_Name", "DNS-1123 subdomain"),
        ("lead.yaml", "-lead", "DNS-1123 subdomain"),
        ("web.yaml", "1st-web", "DNS-1035 label"),
    ] {
        assert!(
            lines
                .iter()
                .any(|line| line.starts_with(&format!("ARB1003 {file}"))
                    && line.contains(&format!("{name:?}"))
                    && line.contains(rule)),
            "no ARB1003 line for {file}:\n{}",
            run.stdout
        );
    }
}
