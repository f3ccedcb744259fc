//! The value sets every chart check runs against: the defaults, the documented non-default
//! combinations, and the example values files in `deploy/values/`.

use super::workspace_root;

/// A named set of helm value arguments (`--set ...`, `-f ...`).
#[derive(Debug, Clone)]
pub struct ValueSet {
    pub name: String,
    pub args: Vec<String>,
}

impl ValueSet {
    pub fn new(name: &str, sets: &[&str]) -> Self {
        let args = sets
            .iter()
            .flat_map(|set| ["--set".to_owned(), (*set).to_owned()])
            .collect();
        ValueSet {
            name: name.to_owned(),
            args,
        }
    }
}

/// The chart's defaults.
pub fn defaults() -> ValueSet {
    ValueSet::new("defaults", &[])
}

/// cert-manager certificates, ServiceMonitor, NetworkPolicies and drift prevention.
pub fn cert_manager_monitoring_network_policies() -> ValueSet {
    ValueSet::new(
        "cert-manager + ServiceMonitor + NetworkPolicies + drift prevention",
        &[
            "tls.certManager.enabled=true",
            "serviceMonitor.enabled=true",
            "networkPolicy.enabled=true",
            "webhook.preventDrift=true",
        ],
    )
}

/// gitsync alone, restricted to one namespace.
pub fn gitsync_only_one_namespace() -> ValueSet {
    ValueSet::new(
        "gitsync only, --namespace team-a",
        &[
            "hierarchy.enabled=false",
            "observer.enabled=false",
            "webhook.enabled=false",
            "ownership.namespace=team-a",
            "ownership.clusterGitTrackMode=Disabled",
        ],
    )
}

/// Everything but the webhook.
pub fn webhook_disabled() -> ValueSet {
    ValueSet::new("webhook disabled", &["webhook.enabled=false"])
}

/// The example values files in `deploy/values/`, each as one set.
pub fn example_files() -> Vec<ValueSet> {
    let dir = workspace_root().join("deploy/values");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("reading {}: {error}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "{} holds no example values",
        dir.display()
    );
    files
        .into_iter()
        .map(|path| ValueSet {
            name: format!(
                "deploy/values/{}",
                path.file_name().unwrap_or_default().to_string_lossy()
            ),
            args: vec!["--values".to_owned(), path.display().to_string()],
        })
        .collect()
}

/// Every set the chart is checked with.
pub fn all() -> Vec<ValueSet> {
    let mut sets = vec![
        defaults(),
        cert_manager_monitoring_network_policies(),
        gitsync_only_one_namespace(),
        webhook_disabled(),
    ];
    sets.extend(example_files());
    sets
}
