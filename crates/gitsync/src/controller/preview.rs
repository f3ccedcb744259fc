//! What a round would do with a revision or a directory that is not applied yet
//! (`SyncService.Preview`, `arborctl diff`).
//!
//! A preview observes what a round observes (the source's inventory, the live objects of the
//! declared kinds, discovery) and asks the same plan, [`arbor_policy::sync::round::plan`], with
//! every declared object to decide against its live object. It never writes to the API server:
//! it only reads, and the revision is fetched into the source's cache and checked out into a
//! directory of its own, never over the commit the source applies. A preview holds the
//! source's round lock, so it never runs beside one of the source's rounds.
//!
//! Files sent in the request are bounded ([`MAX_FILES`], [`MAX_BYTES`]) and go through the
//! same reader rules (hidden files and non-YAML/JSON files skipped) and the same parser and
//! validation as a fetched commit.

use std::collections::BTreeMap;

use arbor_api::keys::{ArborKeys, SourceRef};
use arbor_api::{ClusterGitTrack, GitTrack};
use arbor_policy::layout::{ScopeTable, SourceError};
use arbor_policy::object::ObjectKey;
use arbor_policy::sync::prune::{Claim, claim, kind_has_sync};
use arbor_policy::sync::round::{DeclaredInput, Prune};
use arbor_policy::sync::{Row, Situation, UndeclaredOnCluster};
use kube::Api;

use super::Context;
use super::error::ControllerError;
use super::fetch_and_parse::{self, LoadRequest};
use super::held_state::{HeldObject, HeldState};
use super::live_objects::Snapshot;
use super::plan::{Part, PlannedObject, Planner, Why};
use super::round::{Observed, declared_kinds, plan_round};
use super::source_handle::SourceHandle;
use super::tracking;
use crate::fetch::GitReference;
use arbor_source::document::Format;
use arbor_source::files::{RawFile, SourceTree};

pub use arbor_proto::preview::{MAX_BYTES, MAX_FILES};

/// What to preview.
#[derive(Debug, Clone)]
pub enum Target {
    /// A revision of the source's repository; empty: its configured reference.
    Revision(String),
    /// The files of the source's directory, by relative path.
    Files(Vec<(String, Vec<u8>)>),
}

/// Why a preview could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    #[error("{0} does not exist")]
    NotFound(SourceRef),
    #[error("{reference}: the source's spec is invalid: {message}")]
    InvalidSpec {
        reference: SourceRef,
        message: String,
    },
    #[error("revision {revision:?}: {message}")]
    InvalidRevision { revision: String, message: String },
    #[error("file {path:?}: {message}")]
    InvalidFile { path: String, message: String },
    #[error("the request carries {what}, more than the limit of {limit}")]
    TooLarge { what: String, limit: usize },
    #[error(transparent)]
    Controller(#[from] ControllerError),
}

/// What a round would do to one object (decided in arbor-policy).
pub use arbor_policy::sync::round::Change;

/// One object of a preview.
#[derive(Debug, Clone)]
pub struct PreviewObject {
    pub key: ObjectKey,
    /// The version it is applied or listed by; empty when unknown.
    pub version: String,
    /// The declaring file; empty for objects git does not declare.
    pub file: String,
    pub change: Change,
    /// The table's inputs and row, when the table decided.
    pub decided: Option<(Situation, Row)>,
    /// Why an ignored object is not applied, or what else the row's reason needs.
    pub message: String,
    /// A guard stops this change.
    pub held: bool,
}

/// The answer of a preview.
#[derive(Debug, Clone, Default)]
pub struct Preview {
    /// The previewed commit; `None` for files.
    pub commit: Option<String>,
    pub objects: Vec<PreviewObject>,
    /// Why deletions (or the whole round) would not go ahead.
    pub blocked_by: Vec<String>,
    /// The revision or files do not parse or validate: nothing would be applied.
    pub errors: Vec<SourceError>,
}

/// Previews `target` for `source` (see the [module docs](self)).
pub async fn preview(
    ctx: &Context,
    source: &SourceRef,
    target: Target,
) -> Result<Preview, PreviewError> {
    let handle = read_handle(ctx, source).await?;
    if let Some(message) = handle.spec_error_message() {
        return Err(PreviewError::InvalidSpec {
            reference: source.clone(),
            message,
        });
    }
    let lock = ctx.registry.round_lock(&handle.reference);
    let _round = lock.lock().await;
    let (commit, parsed) = match target {
        Target::Revision(revision) => {
            let (commit, parsed) = fetch(ctx, &handle, &revision).await?;
            (Some(commit), parsed)
        }
        Target::Files(files) => (
            None,
            arbor_source::source::parse_tree_held(
                &tree_of(files)?,
                handle.layout,
                &ScopeTable::default(),
                HeldObject::hold,
            ),
        ),
    };
    let state = match parsed {
        // Planned as a round plans: from the state as gitsync holds it.
        Ok(state) => state,
        Err(errors) => {
            return Ok(Preview {
                commit,
                errors,
                ..Preview::default()
            });
        }
    };
    let mut preview = plan(ctx, &handle, &state).await?;
    preview.commit = commit;
    Ok(preview)
}

async fn read_handle(ctx: &Context, source: &SourceRef) -> Result<SourceHandle, PreviewError> {
    let keys = &ctx.settings.keys;
    let read = |error| ControllerError::kube("read", source.to_string(), error);
    let handle = match source {
        SourceRef::GitTrack { namespace, name } => {
            Api::<GitTrack>::namespaced(ctx.client.clone(), namespace)
                .get_opt(name)
                .await
                .map_err(read)?
                .map(|found| SourceHandle::of(&found, keys))
        }
        SourceRef::ClusterGitTrack { name } => Api::<ClusterGitTrack>::all(ctx.client.clone())
            .get_opt(name)
            .await
            .map_err(read)?
            .map(|found| SourceHandle::of(&found, keys)),
    };
    handle.ok_or_else(|| PreviewError::NotFound(source.clone()))
}

/// Reads a revision as `arborctl diff --revision` takes it: `branch:`, `tag:` or `commit:`
/// spelled out, or what `spec.reference` accepts.
pub fn parse_revision(text: &str) -> Result<GitReference, String> {
    let named = |kind: &str, rest: &str| {
        if rest.is_empty() {
            Err(format!("{kind}: names nothing"))
        } else {
            Ok(rest.to_owned())
        }
    };
    if let Some(branch) = text.strip_prefix("branch:") {
        return named("branch", branch).map(GitReference::Branch);
    }
    if let Some(tag) = text.strip_prefix("tag:") {
        return named("tag", tag).map(GitReference::Tag);
    }
    if let Some(commit) = text.strip_prefix("commit:") {
        return match commit.parse::<GitReference>() {
            Ok(GitReference::Commit(commit)) => Ok(GitReference::Commit(commit)),
            _ => Err("commit: takes a full object id (40 or 64 hexadecimal digits)".to_owned()),
        };
    }
    text.parse::<GitReference>()
        .map_err(|error| error.to_string())
}

async fn fetch(
    ctx: &Context,
    handle: &SourceHandle,
    revision: &str,
) -> Result<(String, Result<HeldState, Vec<SourceError>>), PreviewError> {
    let reference = if revision.is_empty() {
        handle
            .revision
            .clone()
            .ok_or_else(|| PreviewError::InvalidSpec {
                reference: handle.reference.clone(),
                message: "spec.reference names no revision".to_owned(),
            })?
    } else {
        parse_revision(revision).map_err(|message| PreviewError::InvalidRevision {
            revision: revision.to_owned(),
            message,
        })?
    };
    let credentials = super::credentials::read(&ctx.client, handle.auth.as_ref()).await?;
    let request = LoadRequest {
        id: handle.fetch_id.clone(),
        url: handle.repository.clone(),
        reference,
        credentials,
        sub_path: handle.sub_path.clone(),
        layout: handle.layout,
        known_commit: None,
    };
    let loaded = fetch_and_parse::fetch_and_load(&ctx.fetcher, request, &ctx.stopping).await?;
    let parsed = loaded
        .parsed
        .ok_or_else(|| ControllerError::Load("the commit was not parsed".to_owned()))?;
    Ok((loaded.commit, parsed))
}

/// The tree of the files a request carries, under the reader's rules.
fn tree_of(files: Vec<(String, Vec<u8>)>) -> Result<SourceTree, PreviewError> {
    if files.len() > MAX_FILES {
        return Err(PreviewError::TooLarge {
            what: format!("{} files", files.len()),
            limit: MAX_FILES,
        });
    }
    let bytes: usize = files.iter().map(|(_, content)| content.len()).sum();
    if bytes > MAX_BYTES {
        return Err(PreviewError::TooLarge {
            what: format!("{bytes} bytes of files"),
            limit: MAX_BYTES,
        });
    }
    let mut tree = SourceTree::default();
    for (path, bytes) in files {
        let segments: Vec<&str> = path.split('/').collect();
        if path.starts_with('/')
            || segments
                .iter()
                .any(|segment| segment.is_empty() || *segment == "." || *segment == "..")
        {
            return Err(PreviewError::InvalidFile {
                path,
                message: "must be a relative path inside the source, without \".\" or \"..\""
                    .to_owned(),
            });
        }
        // Hidden entries and other files are not part of a source (see `crate::tree`).
        let hidden = segments.iter().any(|segment| segment.starts_with('.'));
        let format = segments.last().and_then(|name| Format::of(name));
        if let (false, Some(format)) = (hidden, format) {
            tree.files.push(RawFile {
                path,
                format,
                bytes,
            });
        }
    }
    tree.files.sort_by(|a, b| a.path.cmp(&b.path));
    if let Some(twice) = tree
        .files
        .windows(2)
        .find(|pair| pair[0].path == pair[1].path)
    {
        return Err(PreviewError::InvalidFile {
            path: twice[0].path.clone(),
            message: "sent twice".to_owned(),
        });
    }
    Ok(tree)
}

/// Observes the cluster as a round does and plans `state` with every object decided.
async fn plan(
    ctx: &Context,
    handle: &SourceHandle,
    state: &HeldState,
) -> Result<Preview, PreviewError> {
    let inventory = tracking::list_inventory(ctx, handle, tracking::InventoryRead::Watch).await?;
    let kinds = declared_kinds(ctx, state).await;
    let snapshot = Snapshot::read(ctx.applier.discovery(), &kinds, handle.namespace.as_deref())
        .await
        .map_err(ControllerError::from)?;
    let planner = Planner {
        discovery: ctx.applier.discovery(),
        scope: &ctx.settings.scope,
        keys: &ctx.settings.keys,
        label: &ctx.settings.label,
    };
    let mut objects = Vec::new();
    let mut planned: Vec<PlannedObject> = Vec::new();
    for part in [Part::Foundation, Part::Rest] {
        let plan = planner.plan(handle, state, part).await;
        for unapplied in plan.unapplied {
            let message = match &unapplied.why {
                Why::Ignored(reason) => reason.clone(),
                Why::Failed(error) => error.to_string(),
            };
            objects.push(PreviewObject {
                version: unapplied
                    .gvk
                    .map(|gvk| gvk.version.to_string())
                    .unwrap_or_default(),
                key: unapplied.key,
                file: unapplied.file.to_string(),
                change: Change::Ignored,
                decided: None,
                message,
                held: false,
            });
        }
        for object in plan.objects {
            let holder = inventory
                .others
                .get(&object.key)
                .and_then(tracking::manager);
            let claimed = claim(
                holder
                    .as_ref()
                    .map(|(name, uid)| (name.as_str(), uid.as_str())),
                &handle.uid,
            );
            match claimed {
                Claim::ManagedBy(manager) => objects.push(PreviewObject {
                    key: object.key.clone(),
                    version: object.gvk.version.to_string(),
                    file: object.file.to_string(),
                    change: Change::Ignored,
                    decided: None,
                    message: format!(
                        "management conflict: {manager} manages this object; this source \
                         leaves it alone"
                    ),
                    held: false,
                }),
                Claim::Free | Claim::Ours => planned.push(object),
            }
        }
    }
    let desired: Vec<serde_json::Value> = planned
        .iter()
        .map(|object| {
            object.applied_form(
                state,
                &ctx.settings.keys,
                &ctx.settings.label,
                &handle.reference,
            )
        })
        .collect();
    let declared: Vec<DeclaredInput<'_>> = planned
        .iter()
        .zip(&desired)
        .map(|(object, desired)| DeclaredInput {
            key: &object.key,
            desired,
            compare: &object.compare,
        })
        .collect();
    let observed = Observed {
        state,
        tracked: &inventory.owned,
        snapshot: &snapshot,
        kinds: &kinds,
    };
    let round = plan_round(ctx, handle, &observed, &declared, false);
    let blocked = round.blocked().is_some();
    let by_key: BTreeMap<&ObjectKey, &PlannedObject> =
        planned.iter().map(|object| (&object.key, object)).collect();
    for decided in &round.apply {
        let change = Change::of(decided.decision.row);
        let object = by_key.get(&decided.key);
        objects.push(PreviewObject {
            key: decided.key.clone(),
            version: object
                .map(|o| o.gvk.version.to_string())
                .unwrap_or_default(),
            file: object.map(|o| o.file.to_string()).unwrap_or_default(),
            change,
            decided: Some((decided.situation.clone(), decided.decision.row)),
            message: String::new(),
            held: change.held(&round.prune),
        });
    }
    let version_of = |key: &ObjectKey| {
        super::round::served_of(&kinds, key)
            .map_or_else(String::new, |(gvk, _)| gvk.version.to_string())
    };
    for key in &round.delete {
        let tracked = &inventory.owned[key];
        objects.extend(removal(
            ctx,
            handle,
            state,
            &snapshot,
            tracked,
            &round.prune,
        ));
    }
    for key in &round.sweep {
        objects.push(PreviewObject {
            key: key.clone(),
            version: version_of(key),
            file: String::new(),
            change: Change::Delete,
            decided: Some((
                Situation::ResourceNotDeclared(UndeclaredOnCluster::Managed),
                Row::UndeclaredButManaged,
            )),
            message: "it carries the management label and no declaration or tracking object \
                      explains it"
                .to_owned(),
            held: Change::Delete.held(&round.prune),
        });
    }
    for (key, row) in &round.unmanaged {
        if *row != Row::UndeclaredAndUnmanaged {
            continue;
        }
        let situation = snapshot.get(key).map(|live| {
            Situation::assess(
                true,
                None,
                Some(live),
                &ctx.settings.label,
                &arbor_policy::sync::CompareFields::AllDeclared,
            )
        });
        objects.push(PreviewObject {
            key: key.clone(),
            version: version_of(key),
            file: String::new(),
            change: Change::Unmanaged,
            decided: situation.map(|situation| (situation, *row)),
            message: String::new(),
            held: false,
        });
    }
    objects.sort_by(|a, b| a.key.cmp(&b.key));
    let mut blocked_by = Vec::new();
    if let Some(reason) = round.prune.stopped_by() {
        blocked_by.push(if blocked {
            format!(
                "{reason}; the round would change nothing. Annotate the source with {}=true to \
                 allow one round",
                ctx.settings.keys.allow_mass_prune_annotation()
            )
        } else {
            reason
        });
    }
    Ok(Preview {
        commit: None,
        objects,
        blocked_by,
        errors: Vec::new(),
    })
}

/// A tracked object the state no longer declares: its tracking object is deleted and the
/// finalizer applies the table (row 5 deletes it when labelled; row 8 leaves it when the
/// source's Sync for the kind is gone; another declaring source takes it over).
fn removal(
    ctx: &Context,
    handle: &SourceHandle,
    state: &HeldState,
    snapshot: &Snapshot,
    tracked: &tracking::Tracked,
    prune: &Prune,
) -> Option<PreviewObject> {
    let key = tracked.key();
    // Gone from the cluster already: only its tracking object is removed.
    let live = snapshot.get(key)?;
    let base = |change, decided, message: String| PreviewObject {
        key: key.clone(),
        version: tracked.gvk().version.to_string(),
        file: String::new(),
        change,
        decided,
        message,
        held: false,
    };
    let others = tracking::declared_elsewhere(ctx, Some(&handle.reference), key);
    if let Some(other) = others.first() {
        return Some(base(
            Change::Ignored,
            None,
            format!("{other} declares it too and takes it over"),
        ));
    }
    let sync_declared = kind_has_sync(state.layout, state.declares_kind(&key.group_kind), true);
    let situation = Situation::assess(
        sync_declared,
        None,
        Some(live),
        &ctx.settings.label,
        &arbor_policy::sync::CompareFields::AllDeclared,
    );
    let row = arbor_policy::sync::decide(&situation).row;
    let change = Change::of(row);
    let mut object = base(
        change,
        Some((situation, row)),
        "removed from git; its tracking object is removed".to_owned(),
    );
    object.held = change.held(prune);
    Some(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_read_as_the_cli_writes_them() {
        assert_eq!(
            parse_revision("branch:feature/x"),
            Ok(GitReference::Branch("feature/x".into()))
        );
        assert_eq!(parse_revision("tag:v1"), Ok(GitReference::Tag("v1".into())));
        assert_eq!(
            parse_revision("main"),
            Ok(GitReference::Name("main".into()))
        );
        assert!(parse_revision("commit:abc").is_err());
        assert!(parse_revision("branch:").is_err());
    }

    #[test]
    fn files_outside_the_source_are_refused_and_others_skipped() {
        let file = |path: &str| (path.to_owned(), b"a: 1".to_vec());
        assert!(matches!(
            tree_of(vec![file("../x.yaml")]),
            Err(PreviewError::InvalidFile { .. })
        ));
        assert!(matches!(
            tree_of(vec![file("/x.yaml")]),
            Err(PreviewError::InvalidFile { .. })
        ));
        let tree = tree_of(vec![file("a.yaml"), file(".git/x.yaml"), file("README.md")]).unwrap();
        assert_eq!(tree.files.len(), 1);
        assert!(matches!(
            tree_of(vec![("big.yaml".into(), vec![b' '; MAX_BYTES + 1])]),
            Err(PreviewError::TooLarge { .. })
        ));
    }
}
