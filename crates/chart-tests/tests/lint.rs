//! `helm lint` and the values schema.

mod common;

use common::helm;
use common::value_sets::{self, ValueSet};

#[test]
fn helm_lint_passes_with_the_defaults_and_every_documented_value_set() {
    for set in value_sets::all() {
        let output = helm::lint(&set.args).expect("helm runs");
        assert!(
            output.success,
            "[{}] helm lint --strict fails:\n{}{}",
            set.name, output.stdout, output.stderr
        );
    }
}

/// Asserts that both `helm lint` and `helm template` refuse `set`, naming `expected`.
fn assert_schema_rejects(set: &ValueSet, expected: &str) {
    let lint = helm::lint(&set.args).expect("helm runs");
    assert!(!lint.success, "[{}] helm lint accepts it", set.name);
    assert!(
        lint.stdout.contains(expected) || lint.stderr.contains(expected),
        "[{}] helm lint fails without naming {expected:?}:\n{}{}",
        set.name,
        lint.stdout,
        lint.stderr
    );
    let template = helm::template(&set.args);
    let error = template.expect_err(&format!("[{}] helm template accepts it", set.name));
    assert!(
        format!("{error:#}").contains(expected),
        "[{}] helm template fails without naming {expected:?}: {error:#}",
        set.name
    );
}

#[test]
fn schema_rejects_replicas_that_are_not_an_integer() {
    // --set-string: a plain --set would let helm turn "two" into a string anyway, but be
    // explicit that the schema, not YAML typing, refuses it.
    let set = ValueSet {
        name: "gitsync.replicas: \"two\"".to_owned(),
        args: vec!["--set-string".to_owned(), "gitsync.replicas=two".to_owned()],
    };
    assert_schema_rejects(&set, "gitsync.replicas");
}

#[test]
fn schema_rejects_keys_it_does_not_define() {
    let set = ValueSet::new("misspelt key", &["webhook.failurPolicy=Ignore"]);
    assert_schema_rejects(&set, "failurPolicy");
}

#[test]
fn schema_rejects_an_ownership_mode_the_binaries_do_not_know() {
    let set = ValueSet::new("bad mode", &["ownership.clusterGitTrackMode=Everything"]);
    assert_schema_rejects(&set, "ownership.clusterGitTrackMode");
}

#[test]
fn schema_rejects_a_management_label_without_a_value() {
    let set = ValueSet::new(
        "label without value",
        &["managementLabel=arbor.dev/managed"],
    );
    assert_schema_rejects(&set, "managementLabel");
}

#[test]
fn schema_rejects_a_namespace_restriction_with_clustergittracks_served() {
    // gitsync and the webhook refuse --namespace with any --clustergittrack-mode but Disabled
    // (arbor-policy's WatchScope::from_flags, as Faros); the schema says so before a pod
    // crash-loops.
    for mode in ["IncludeNamespaced", "ExcludeNamespaced"] {
        let namespace_mode = format!("ownership.clusterGitTrackMode={mode}");
        let set = ValueSet::new(
            "namespace with ClusterGitTracks",
            &["ownership.namespace=team-a", &namespace_mode],
        );
        assert_schema_rejects(&set, "ownership.clusterGitTrackMode");
    }
    let set = ValueSet::new(
        "namespace without GitTracks",
        &[
            "ownership.namespace=team-a",
            "ownership.gitTrackMode=Disabled",
            "ownership.clusterGitTrackMode=ExcludeNamespaced",
        ],
    );
    assert_schema_rejects(&set, "ownership.gitTrackMode");
    let set = ValueSet::new(
        "nothing served",
        &[
            "ownership.gitTrackMode=Disabled",
            "ownership.clusterGitTrackMode=Disabled",
        ],
    );
    assert_schema_rejects(&set, "ownership");
    let allowed = ValueSet::new(
        "namespace with ClusterGitTracks disabled",
        &[
            "ownership.namespace=team-a",
            "ownership.clusterGitTrackMode=Disabled",
        ],
    );
    let lint = helm::lint(&allowed.args).expect("helm runs");
    assert!(lint.success, "{}{}", lint.stdout, lint.stderr);
}
