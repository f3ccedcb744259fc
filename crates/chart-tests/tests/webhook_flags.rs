//! The webhook's command line, as the chart renders it, is one arbor-webhook starts with:
//! its own flag parser accepts it and turns it into decision settings, reading the hierarchy
//! configuration the chart mounts. A combination of values the binary refuses (drift
//! prevention without Arbor's service accounts, a namespace restriction that contradicts the
//! ClusterGitTrack mode, a configuration with a reserved key) fails here, not in a
//! crash-looping pod.

mod common;

use clap::Parser;
use common::manifest::{Rendered, render};
use common::value_sets::{self, ValueSet};
use common::workload::{args, component_name, flag_value, hierarchy_config};

/// Where the chart mounts the hierarchy configuration in the webhook's pod.
const MOUNTED_CONFIG: &str = "/etc/arbor/hierarchy/config.yaml";

/// The webhook's arguments with the mounted configuration replaced by a local copy of the
/// rendered ConfigMap, parsed by arbor-webhook.
fn parse_webhook_args(rendered: &Rendered, config_dir: &std::path::Path) -> arbor_webhook::Args {
    let mut args = args(rendered, "webhook");
    assert_eq!(
        flag_value(&args, "--hierarchy-config"),
        Some(MOUNTED_CONFIG),
        "[{}] the webhook reads the mounted hierarchy configuration",
        rendered.set
    );
    let text = hierarchy_config(rendered);
    let local = config_dir.join("config.yaml");
    std::fs::write(&local, text).expect("writing the configuration copy");
    for arg in &mut args {
        if arg == MOUNTED_CONFIG {
            *arg = local.display().to_string();
        }
    }
    arbor_webhook::Args::try_parse_from(std::iter::once("arbor-webhook".to_owned()).chain(args))
        .unwrap_or_else(|error| {
            panic!(
                "[{}] arbor-webhook refuses its flags: {error}",
                rendered.set
            )
        })
}

#[test]
fn every_value_set_gives_the_webhook_flags_it_starts_with() {
    let config_dir = tempfile::tempdir().expect("a temporary directory");
    let extra = [
        ValueSet::new(
            "drift prevention, writers not deployed",
            &[
                "webhook.preventDrift=true",
                "gitsync.enabled=false",
                "hierarchy.enabled=false",
                "observer.enabled=false",
            ],
        ),
        ValueSet::new(
            "one namespace",
            &[
                "ownership.namespace=team-a",
                "ownership.clusterGitTrackMode=Disabled",
                "webhook.preventDrift=true",
                "webhook.driftUnreachable=deny",
            ],
        ),
    ];
    let mut checked = 0;
    for set in value_sets::all().into_iter().chain(extra) {
        let rendered = render(&set);
        if rendered
            .find("Deployment", &component_name("webhook"))
            .is_none()
        {
            continue;
        }
        let parsed = parse_webhook_args(&rendered, config_dir.path());
        if let Err(error) = parsed.settings() {
            panic!("[{}] arbor-webhook refuses its settings: {error}", set.name);
        }
        checked += 1;
    }
    assert!(checked >= 4, "only {checked} value sets deploy the webhook");
}

#[test]
fn the_webhook_enforces_the_naming_policies_the_chart_configures() {
    let config_dir = tempfile::tempdir().expect("a temporary directory");
    let rendered = render(&ValueSet::new(
        "naming policy",
        &[
            "hierarchy.config.namingPolicies[0].root=^team-(?P<team>[a-z]+)$",
            "hierarchy.config.namingPolicies[0].match=^${team}-[a-z]+$",
        ],
    ));
    let settings = parse_webhook_args(&rendered, config_dir.path())
        .settings()
        .expect("valid settings");
    let policies = settings.rules.naming_policies();
    assert_eq!(policies.len(), 1);
    assert_eq!(
        policies[0].expanded_for("team-blue").as_deref(),
        Some("^blue-[a-z]+$")
    );
}

#[test]
fn the_webhook_refuses_what_the_schema_refuses_for_a_namespace_restriction() {
    // The schema allows a namespace restriction only with clusterGitTrackMode Disabled
    // (lint.rs); the webhook, given the rendered flags with any other mode, refuses to start
    // and names both flags.
    let config_dir = tempfile::tempdir().expect("a temporary directory");
    let rendered = render(&ValueSet::new(
        "one namespace",
        &[
            "ownership.namespace=team-a",
            "ownership.clusterGitTrackMode=Disabled",
        ],
    ));
    let allowed = parse_webhook_args(&rendered, config_dir.path());
    assert!(allowed.settings().is_ok());
    for mode in ["IncludeNamespaced", "ExcludeNamespaced"] {
        let mut args = vec![
            "arbor-webhook".to_owned(),
            "--webhook-cert=/tls/tls.crt".to_owned(),
            "--webhook-key=/tls/tls.key".to_owned(),
        ];
        args.extend(["--gittrack-mode", "Enabled", "--namespace", "team-a"].map(str::to_owned));
        args.push(format!("--clustergittrack-mode={mode}"));
        let parsed = arbor_webhook::Args::try_parse_from(args).expect("the flags parse");
        let error = parsed
            .settings()
            .expect_err("a namespace restriction with ClusterGitTracks is refused")
            .to_string();
        assert!(
            error.contains("--namespace=team-a")
                && error.contains(&format!("--clustergittrack-mode={mode}")),
            "{error}"
        );
    }
}
