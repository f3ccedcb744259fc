//! The spec and status shared by GitTrack and ClusterGitTrack.
//!
//! Both kinds describe the same thing, a git repository to sync (seeds/002: "A ClusterGitTrack
//! will look identical to the GitTrack but will be defined at the cluster scope"). The only
//! difference is where the authentication secret lives: next to a GitTrack, or in a namespace
//! named by the ClusterGitTrack. [`GitSourceSpec`] is therefore generic over the secret
//! reference, and both CRD specs flatten it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use arbor_policy::git_url::{GitUrl, Transport};

use crate::validation::{Errors, FieldError, parse_positive_duration};

/// How often a source is fetched when `pollInterval` is not set.
pub const DEFAULT_POLL_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// What to sync from where, and how.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitSourceSpec<S> {
    /// Repository URL: `https://`, `http://`, `ssh://`, scp-like `git@host:path`, or `file://`.
    pub repository: String,
    /// The revision to sync: exactly one of branch, tag or commit.
    pub reference: GitReference,
    /// Directory inside the repository to read; the repository root when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_path: Option<String>,
    /// How the tree is organised.
    #[serde(default)]
    pub layout: Layout,
    /// Credentials for fetching; none for public or `file://` repositories.
    // Missing `Option`s deserialise as `None` anyway; `default` here would demand `S: Default`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<GitAuth<S>>,
    /// How often to fetch, as a duration like `1m` (default `1m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval: Option<String>,
    /// Stop fetching and applying; what is on the cluster stays as it is.
    #[serde(default)]
    pub suspend: bool,
    /// Delete managed objects whose declaration was removed from the repository.
    #[serde(default = "default_prune")]
    pub prune: bool,
    /// What happens to the applied objects when this source is deleted.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

fn default_prune() -> bool {
    true
}

/// A git revision. Exactly one field is set; [`GitReference::resolve`] enforces it and the API
/// server does too, through the CEL rule in the schema.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "[has(self.branch), has(self.tag), has(self.commit)].filter(x, x).size() == 1",
    "message": "exactly one of branch, tag or commit must be set",
}]))]
pub struct GitReference {
    /// Follow the head of this branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Sync this tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// Sync this commit (full or abbreviated hexadecimal id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

/// A [`GitReference`] with its one field picked out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revision<'a> {
    Branch(&'a str),
    Tag(&'a str),
    Commit(&'a str),
}

impl GitReference {
    pub fn branch(name: &str) -> Self {
        Self {
            branch: Some(name.to_owned()),
            ..Self::default()
        }
    }

    pub fn tag(name: &str) -> Self {
        Self {
            tag: Some(name.to_owned()),
            ..Self::default()
        }
    }

    pub fn commit(id: &str) -> Self {
        Self {
            commit: Some(id.to_owned()),
            ..Self::default()
        }
    }

    /// The one revision this reference names; `field` is its path for the error.
    pub fn resolve(&self, field: &str) -> Result<Revision<'_>, FieldError> {
        let set: Vec<Revision<'_>> = [
            self.branch.as_deref().map(Revision::Branch),
            self.tag.as_deref().map(Revision::Tag),
            self.commit.as_deref().map(Revision::Commit),
        ]
        .into_iter()
        .flatten()
        .collect();
        let revision = match set.as_slice() {
            [] => {
                return Err(FieldError::required(
                    field,
                    "set exactly one of branch, tag or commit",
                ));
            }
            [one] => *one,
            _ => {
                return Err(FieldError::forbidden(
                    field,
                    "only one of branch, tag or commit may be set",
                ));
            }
        };
        let (name, value) = match revision {
            Revision::Branch(v) => ("branch", v),
            Revision::Tag(v) => ("tag", v),
            Revision::Commit(v) => ("commit", v),
        };
        if value.trim().is_empty() {
            return Err(FieldError::invalid(
                format!("{field}.{name}"),
                "must not be empty",
            ));
        }
        if let Revision::Commit(id) = revision
            && (id.len() < 7 || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(FieldError::invalid(
                format!("{field}.commit"),
                format!("{id:?} is not a commit id (7 to 64 hexadecimal digits)"),
            ));
        }
        Ok(revision)
    }
}

/// How a repository's tree is organised.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum Layout {
    /// Every YAML / JSON object anywhere in the tree (Faros).
    #[default]
    Flat,
    /// `system/`, `cluster/` and `namespaces/` with abstract namespaces (Nomos).
    Hierarchical,
}

/// What happens to applied objects when their source is deleted.
///
/// `Orphan` is the default, as in Config Sync: deleting a source must never empty a cluster by
/// surprise. `Delete` is a prune of everything the source applied, held by the same guards as a
/// round (`--max-prune-fraction`, never every namespace) until the source carries the
/// allow-mass-prune annotation; Namespaces go last, and one that holds objects the source did
/// not apply is left.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DeletionPolicy {
    /// Delete the managed objects (those still carrying the management label), subject to the
    /// mass-prune guard.
    Delete,
    /// Leave them on the cluster.
    #[default]
    Orphan,
}

/// Credentials for fetching: the kind of credential and the secret that holds it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitAuth<S> {
    /// Which credential the secret holds; decides the keys read from it.
    #[serde(rename = "type")]
    pub type_: AuthType,
    /// The secret holding the credential.
    pub secret_ref: S,
}

/// Kinds of git credentials, with the secret keys each reads.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum AuthType {
    /// SSH deploy key: keys `ssh-privatekey` and `known_hosts`.
    #[serde(rename = "SSH")]
    Ssh,
    /// HTTP basic auth: keys `username` and `password`.
    Basic,
    /// HTTP bearer token (sent as the password of basic auth): key `token`.
    Token,
}

impl AuthType {
    /// The secret keys this credential type reads, all required.
    pub fn secret_keys(self) -> &'static [&'static str] {
        match self {
            Self::Ssh => &[secret_keys::SSH_PRIVATE_KEY, secret_keys::KNOWN_HOSTS],
            Self::Basic => &[secret_keys::USERNAME, secret_keys::PASSWORD],
            Self::Token => &[secret_keys::TOKEN],
        }
    }

    fn fits(self, transport: Transport) -> bool {
        match self {
            Self::Ssh => transport == Transport::Ssh,
            Self::Basic | Self::Token => transport.is_http(),
        }
    }
}

/// Keys read from authentication secrets; the SSH and basic ones are those of the
/// `kubernetes.io/ssh-auth` and `kubernetes.io/basic-auth` secret types.
pub mod secret_keys {
    pub const SSH_PRIVATE_KEY: &str = "ssh-privatekey";
    pub const KNOWN_HOSTS: &str = "known_hosts";
    pub const USERNAME: &str = "username";
    pub const PASSWORD: &str = "password";
    pub const TOKEN: &str = "token";
}

/// A secret in the namespace of the GitTrack that refers to it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct SecretRef {
    pub name: String,
    /// Never valid: a GitTrack reads secrets from its own namespace. The field is part of the
    /// schema only so that a namespace written here is refused by validation instead of being
    /// pruned by the API server, which would leave the author believing another namespace's
    /// secret is read. A ClusterGitTrack names the secret's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl SecretRef {
    /// A reference to the secret `name` in the GitTrack's namespace.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            namespace: None,
        }
    }
}

/// A secret anywhere: ClusterGitTracks have no namespace of their own.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct NamespacedSecretRef {
    pub name: String,
    pub namespace: String,
}

/// A secret reference that can name the secret's namespace, given the referring object's.
pub trait SecretReference {
    /// `(namespace, name)` of the secret; `own_namespace` is the referring object's namespace.
    fn locate<'a>(&'a self, own_namespace: Option<&'a str>) -> (Option<&'a str>, &'a str);

    /// Field-level checks, with `field` the path of this reference.
    fn validate(&self, field: &str) -> Vec<FieldError>;
}

impl SecretReference for SecretRef {
    fn locate<'a>(&'a self, own_namespace: Option<&'a str>) -> (Option<&'a str>, &'a str) {
        (own_namespace, &self.name)
    }

    fn validate(&self, field: &str) -> Vec<FieldError> {
        let mut errors: Vec<FieldError> = check_object_name(&format!("{field}.name"), &self.name)
            .err()
            .into_iter()
            .collect();
        if self.namespace.is_some() {
            errors.push(FieldError::forbidden(
                format!("{field}.namespace"),
                "a GitTrack reads secrets from its own namespace; remove the field (a \
                 ClusterGitTrack names the namespace of its secret)",
            ));
        }
        errors
    }
}

impl SecretReference for NamespacedSecretRef {
    fn locate<'a>(&'a self, _own_namespace: Option<&'a str>) -> (Option<&'a str>, &'a str) {
        (Some(&self.namespace), &self.name)
    }

    fn validate(&self, field: &str) -> Vec<FieldError> {
        [
            check_object_name(&format!("{field}.name"), &self.name),
            check_object_name(&format!("{field}.namespace"), &self.namespace),
        ]
        .into_iter()
        .filter_map(Result::err)
        .collect()
    }
}

impl<S: SecretReference> GitSourceSpec<S> {
    /// Checks every field; the errors name their paths under `spec`.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Errors::default();
        let transport = match GitUrl::parse(&self.repository) {
            Ok(url) => Some(url.transport),
            Err(error) => {
                errors.push(FieldError::invalid(
                    "spec.repository",
                    format!(
                        "{:?} is not a git URL (https://, http://, ssh://, user@host:path or \
                         file://): {error}",
                        // The URL may carry a password or token: never repeat it.
                        arbor_policy::git_url::redact(&self.repository)
                    ),
                ));
                None
            }
        };
        errors.check(self.reference.resolve("spec.reference").map(drop));
        if let Some(sub_path) = &self.sub_path {
            errors.check(check_sub_path(sub_path));
        }
        if let Some(auth) = &self.auth {
            errors.extend(auth.secret_ref.validate("spec.auth.secretRef"));
            if let Some(transport) = transport
                && !auth.type_.fits(transport)
            {
                errors.push(FieldError::forbidden(
                    "spec.auth.type",
                    format!(
                        "{:?} credentials cannot be used to fetch {:?}",
                        auth.type_, self.repository
                    ),
                ));
            }
        }
        if let Some(interval) = &self.poll_interval {
            errors.check(parse_positive_duration("spec.pollInterval", interval).map(drop));
        }
        errors.finish()
    }

    /// The poll interval, or the default when unset. Call [`Self::validate`] first to report a
    /// malformed value; here it is an error naming the field.
    pub fn poll_interval(&self) -> Result<std::time::Duration, FieldError> {
        self.poll_interval
            .as_deref()
            .map_or(Ok(DEFAULT_POLL_INTERVAL), |value| {
                parse_positive_duration("spec.pollInterval", value)
            })
    }
}

fn check_sub_path(sub_path: &str) -> Result<(), FieldError> {
    use arbor_policy::layout::sub_path::SubPathProblem;
    let refuse = |detail: &str| {
        Err(FieldError::invalid(
            "spec.subPath",
            format!("{sub_path:?} {detail}"),
        ))
    };
    match arbor_policy::layout::sub_path::check(sub_path) {
        Ok(()) => Ok(()),
        Err(SubPathProblem::Absolute) => refuse("must be relative to the repository root"),
        Err(SubPathProblem::LeavesRepository) => refuse("must not leave the repository (no `..`)"),
    }
}

/// Checks a Kubernetes object name (RFC 1123 subdomain: lower case, digits, `-` and `.`).
pub(crate) fn check_object_name(field: &str, name: &str) -> Result<(), FieldError> {
    let valid = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        });
    if valid {
        Ok(())
    } else if name.is_empty() {
        Err(FieldError::required(field, "a name is required"))
    } else {
        Err(FieldError::invalid(
            field,
            format!("{name:?} is not a valid object name (lower-case RFC 1123 subdomain)"),
        ))
    }
}

/// What a source last did: the commit, the counters, and every problem, per file.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitSourceStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The commit last synced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_commit: Option<String>,
    /// When the last sync round finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync_time: Option<Time>,
    /// Objects declared at the observed commit.
    #[serde(default)]
    pub objects_discovered: i64,
    /// Objects currently applied by this source and matching their declaration (created,
    /// updated or found matching), not the writes of the last round: a count of writes would
    /// change, and cost a status write, every round.
    #[serde(default)]
    pub objects_applied: i64,
    /// Objects declared but not applied (see `ignoredFiles`).
    #[serde(default)]
    pub objects_ignored: i64,
    /// Objects whose cluster state matches the declaration.
    #[serde(default)]
    pub objects_in_sync: i64,
    /// Files whose objects were not applied, with the reason.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ignored_files: BTreeMap<String, String>,
    /// Errors of the last round.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<SourceError>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The mass-prune window: the most objects the source held since `start` and how many were
    /// pruned since (the guard allows `--max-prune-fraction` of the high-water mark per
    /// `--prune-window`). Kept here so a restart does not reset it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prune_window: Option<PruneWindowStatus>,
    /// Progress of deleting the source, while it is being deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion: Option<DeletionProgress>,
    /// The shard the source belongs to when gitsync shares its sources between replicas
    /// (`--shards`): its uid's hash modulo the number of shards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<u32>,
    /// The gitsync replica (its Lease identity, the pod name in a cluster) that syncs the
    /// source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled_by: Option<String>,
}

/// See [`GitSourceStatus::prune_window`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PruneWindowStatus {
    /// When the window began.
    pub start: Time,
    /// The most objects the source held within the window.
    pub high_water_mark: i64,
    /// Objects pruned within the window.
    pub pruned: i64,
}

/// How far deleting a source has come: its tracking objects finalized so far and left.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeletionProgress {
    /// Tracking objects still to finalize.
    pub remaining: i64,
    /// Objects deleted from the cluster.
    pub deleted: i64,
    /// Tracking objects let go while their object stays (orphaned, declared by another source,
    /// or a Namespace holding other objects).
    pub released: i64,
}

/// One problem found while syncing, located as precisely as known.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceError {
    /// Stable error code, like `ARB1001`.
    pub code: String,
    /// Repository file, relative to `subPath`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The object, as `kind/namespace/name` or `kind/name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::refused_fields;

    fn spec(repository: &str) -> GitSourceSpec<SecretRef> {
        GitSourceSpec {
            repository: repository.into(),
            reference: GitReference::branch("main"),
            sub_path: None,
            layout: Layout::Flat,
            auth: None,
            poll_interval: None,
            suspend: false,
            prune: true,
            deletion_policy: DeletionPolicy::Delete,
        }
    }

    #[test]
    fn minimal_spec_is_valid_and_polls_every_minute() {
        let spec = spec("https://example.com/repo.git");
        assert_eq!(spec.validate(), Ok(()));
        assert_eq!(spec.poll_interval().unwrap(), DEFAULT_POLL_INTERVAL);
    }

    #[test]
    fn every_supported_url_form_is_accepted() {
        for url in [
            "https://h/r",
            "http://h/r",
            "ssh://git@h/r",
            "git@github.com:org/repo.git",
            "file:///srv/repo",
        ] {
            assert_eq!(spec(url).validate(), Ok(()), "{url}");
        }
    }

    #[test]
    fn unknown_url_forms_are_refused() {
        for url in ["", "ftp://h/r", "repo", "/srv/repo", "https://"] {
            assert_eq!(
                refused_fields(spec(url).validate()),
                ["spec.repository"],
                "{url:?}"
            );
        }
    }

    #[test]
    fn urls_the_fetcher_cannot_reach_are_refused_naming_the_part_that_is_wrong() {
        for (url, part) in [
            ("https://h:99999/r", "port"),
            ("ssh://git@h:twenty/r", "port"),
            ("https://:443/r", "host"),
            ("ssh://[::1/r", "host"),
            ("@h:r", "scp-like"),
            ("file://", "path"),
            ("ftp://h/r", "scheme"),
        ] {
            let errors = spec(url).validate().unwrap_err();
            assert_eq!(errors.len(), 1, "{url:?}: {errors:?}");
            assert_eq!(errors[0].field, "spec.repository", "{url:?}");
            let message = errors[0].to_string();
            assert!(message.contains(part), "{url:?}: {message}");
        }
    }

    #[test]
    fn reference_needs_exactly_one_revision() {
        let mut none = spec("https://h/r");
        none.reference = GitReference::default();
        assert_eq!(refused_fields(none.validate()), ["spec.reference"]);

        let mut two = spec("https://h/r");
        two.reference.tag = Some("v1".into());
        assert_eq!(refused_fields(two.validate()), ["spec.reference"]);
    }

    #[test]
    fn commit_must_be_hexadecimal() {
        assert_eq!(
            GitReference::commit("0123abc").resolve("spec.reference"),
            Ok(Revision::Commit("0123abc"))
        );
        let error = GitReference::commit("main")
            .resolve("spec.reference")
            .unwrap_err();
        assert_eq!(error.field, "spec.reference.commit");
    }

    #[test]
    fn empty_branch_names_its_field() {
        let error = GitReference::branch(" ")
            .resolve("spec.reference")
            .unwrap_err();
        assert_eq!(error.field, "spec.reference.branch");
    }

    #[test]
    fn sub_path_must_stay_inside_the_repository() {
        for bad in ["/etc", "a/../../b", ".."] {
            let mut s = spec("https://h/r");
            s.sub_path = Some(bad.into());
            assert_eq!(refused_fields(s.validate()), ["spec.subPath"], "{bad}");
        }
        let mut good = spec("https://h/r");
        good.sub_path = Some("clusters/prod".into());
        assert_eq!(good.validate(), Ok(()));
    }

    #[test]
    fn auth_type_must_fit_the_transport() {
        let mut ssh_on_https = spec("https://h/r");
        ssh_on_https.auth = Some(GitAuth {
            type_: AuthType::Ssh,
            secret_ref: SecretRef::named("key"),
        });
        assert_eq!(refused_fields(ssh_on_https.validate()), ["spec.auth.type"]);

        let mut token_on_ssh = spec("git@h:r");
        token_on_ssh.auth = Some(GitAuth {
            type_: AuthType::Token,
            secret_ref: SecretRef::named("tok"),
        });
        assert_eq!(refused_fields(token_on_ssh.validate()), ["spec.auth.type"]);
    }

    #[test]
    fn cluster_secret_refs_need_a_valid_namespace() {
        let mut s: GitSourceSpec<NamespacedSecretRef> = GitSourceSpec {
            auth: Some(GitAuth {
                type_: AuthType::Basic,
                secret_ref: NamespacedSecretRef {
                    name: "creds".into(),
                    namespace: String::new(),
                },
            }),
            ..spec_with_ref("https://h/r")
        };
        assert_eq!(
            refused_fields(s.validate()),
            ["spec.auth.secretRef.namespace"]
        );
        if let Some(auth) = &mut s.auth {
            auth.secret_ref.namespace = "arbor-system".into();
        }
        assert_eq!(s.validate(), Ok(()));
        let auth = s.auth.as_ref().unwrap();
        assert_eq!(
            auth.secret_ref.locate(None),
            (Some("arbor-system"), "creds")
        );
    }

    fn spec_with_ref(repository: &str) -> GitSourceSpec<NamespacedSecretRef> {
        GitSourceSpec {
            repository: repository.into(),
            reference: GitReference::tag("v1.0.0"),
            sub_path: None,
            layout: Layout::Hierarchical,
            auth: None,
            poll_interval: Some("5m".into()),
            suspend: false,
            prune: false,
            deletion_policy: DeletionPolicy::Orphan,
        }
    }

    #[test]
    fn malformed_poll_interval_is_reported_on_its_field() {
        let mut s = spec("https://h/r");
        s.poll_interval = Some("often".into());
        assert_eq!(refused_fields(s.validate()), ["spec.pollInterval"]);
        assert_eq!(s.poll_interval().unwrap_err().field, "spec.pollInterval");
    }

    #[test]
    fn omitted_prune_defaults_to_true() {
        let spec: GitSourceSpec<SecretRef> = serde_json::from_value(serde_json::json!({
            "repository": "https://h/r",
            "reference": {"branch": "main"},
        }))
        .unwrap();
        assert!(spec.prune);
        assert_eq!(spec.layout, Layout::Flat);
        assert_eq!(spec.deletion_policy, DeletionPolicy::Orphan);
    }

    #[test]
    fn auth_secret_keys_follow_the_type() {
        assert_eq!(
            AuthType::Ssh.secret_keys(),
            ["ssh-privatekey", "known_hosts"]
        );
        assert_eq!(AuthType::Token.secret_keys(), ["token"]);
    }

    #[test]
    fn namespaced_secret_ref_is_found_next_to_its_gittrack() {
        let secret = SecretRef::named("creds");
        assert_eq!(secret.locate(Some("team-a")), (Some("team-a"), "creds"));
    }

    #[test]
    fn a_gittrack_secret_ref_naming_a_namespace_is_forbidden() {
        let mut s: GitSourceSpec<SecretRef> = serde_json::from_value(serde_json::json!({
            "repository": "https://h/r",
            "reference": {"branch": "main"},
            "auth": {"type": "Token", "secretRef": {"name": "tok", "namespace": "other"}},
        }))
        .unwrap();
        let errors = s.validate().unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].to_string().starts_with(
                "spec.auth.secretRef.namespace: Forbidden: a GitTrack reads secrets from its own namespace"
            ),
            "{}",
            errors[0]
        );
        s.auth.as_mut().unwrap().secret_ref.namespace = None;
        assert_eq!(s.validate(), Ok(()));
    }
}
