//! Drift prevention (`--prevent-drift`): a change to an object that carries the management
//! label, by anyone but Arbor's own service accounts, is refused when it changes what git
//! declares.
//!
//! - "What git declares" is arbor-gitsync's answer to `GetDeclared`, compared with
//!   [`arbor_policy::sync::compare`] (declared-subset semantics, the Sync's `compareFields`).
//!   For a Secret that answer has no `data` / `stringData` ([`arbor_policy::secret`]: the
//!   payload never leaves Secret protection, not even towards the webhook), so drift prevention
//!   guards a Secret's metadata and type, and a change of its payload alone is not refused here:
//!   gitsync's resync (and ReportDrift) puts the payload back from the repository.
//! - An update is refused for a difference the change **introduces**
//!   ([`arbor_policy::sync::introduced`]): a declared field that the old object matched, or
//!   held at another value. A change that leaves earlier drift as it was (or moves the object
//!   back towards git) passes, so an object that drifted while the webhook was down can still
//!   be repaired by hand.
//! - Deleting a declared object is refused: git still declares it.
//! - An object no source declares is not protected: the label alone promises nothing.
//! - When gitsync cannot answer, `--drift-unreachable` decides (default allow: drift
//!   prevention is a guard rail, and the observer and gitsync repair drift anyway).

use std::collections::BTreeSet;

use arbor_policy::keys::ManagementLabel;
use arbor_policy::object;
use arbor_policy::sync::introduced;
use kube::core::admission::Operation;

use super::shape::{ShapeError, check_metadata_maps, string_at};
use crate::declared::{Declared, DeclaredState, ObjectIdentity};
use crate::review::ReviewInput;
use crate::review_outcome::Check;

/// The answer when arbor-gitsync cannot be asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum UnreachableAnswer {
    Allow,
    Deny,
}

/// Drift prevention's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriftSettings {
    pub label: ManagementLabel,
    /// Usernames whose changes are Arbor's own, like
    /// `system:serviceaccount:arbor-system:arbor-gitsync`.
    pub service_accounts: BTreeSet<String>,
    pub unreachable: UnreachableAnswer,
}

/// How many differences a denial lists before it summarises.
const LISTED_DIFFERENCES: usize = 5;

/// Reviews a change of any object; `None` when drift prevention has nothing to say.
pub async fn review(
    settings: &DriftSettings,
    input: &ReviewInput,
    declared: &dyn DeclaredState,
) -> Result<Option<Check>, ShapeError> {
    let rule = |name: &str| format!("drift {name}");
    if input.operation == Operation::Connect {
        return Ok(None);
    }
    let mut managed = false;
    for object in [&input.object, &input.old_object].into_iter().flatten() {
        check_metadata_maps(object)?;
        managed |= settings.label.is_on(&object::labels(object));
    }
    if !managed {
        return Ok(None);
    }
    let what = format!("{} {}", input.kind.kind, input.object_name());
    if settings.service_accounts.contains(input.username()) {
        return Ok(Some(Check::allow(
            rule("arbor-service-account"),
            format!(
                "{what} is changed by Arbor's service account {}",
                input.username()
            ),
        )));
    }
    let identity = identity(input)?;
    let (object, fields, source, file) = match declared.declared(&identity).await {
        Err(error) => {
            let reason = format!(
                "{what} carries {}, but its declared state is unknown: {error} \
                 (--drift-unreachable={:?})",
                settings.label, settings.unreachable
            );
            return Ok(Some(match settings.unreachable {
                UnreachableAnswer::Allow => Check::allow(rule("gitsync-unreachable"), reason),
                UnreachableAnswer::Deny => Check::deny(rule("gitsync-unreachable"), reason),
            }));
        }
        Ok(Declared::NotDeclared) => {
            return Ok(Some(Check::allow(
                rule("not-declared"),
                format!(
                    "{what} carries {} but no source declares it",
                    settings.label
                ),
            )));
        }
        Ok(Declared::Object {
            object,
            fields,
            source,
            file,
        }) => (object, fields, source, file),
    };
    let declared_in = format!("declared by {source} in {file}");
    let Some(new) = &input.object else {
        return Ok(Some(Check::deny(
            rule("declared-object-deleted"),
            format!(
                "{what} is {declared_in}; remove it from git (or its {} label) instead of \
                 deleting it by hand",
                settings.label
            ),
        )));
    };
    let new_differences = introduced(
        &object,
        input.old_object.as_ref(),
        new,
        &fields,
        &settings.label,
    );
    if new_differences.is_empty() {
        return Ok(Some(Check::allow(
            rule("matches-declared"),
            format!("{what} still matches what is {declared_in}"),
        )));
    }
    let mut listed: Vec<String> = new_differences
        .iter()
        .take(LISTED_DIFFERENCES)
        .map(ToString::to_string)
        .collect();
    if new_differences.len() > LISTED_DIFFERENCES {
        listed.push(format!(
            "and {} more",
            new_differences.len() - LISTED_DIFFERENCES
        ));
    }
    Ok(Some(Check::deny(
        rule("declared-field-changed"),
        format!(
            "{what} is {declared_in}; this change makes it differ from git: {}. Change it in git instead",
            listed.join("; ")
        ),
    )))
}

fn identity(input: &ReviewInput) -> Result<ObjectIdentity, ShapeError> {
    let name = if input.name.is_empty() {
        let object = input.object.as_ref().or(input.old_object.as_ref());
        object
            .map(|object| string_at(object, &["metadata", "name"]))
            .transpose()?
            .flatten()
            .ok_or_else(|| ShapeError::missing("metadata.name"))?
            .to_owned()
    } else {
        input.name.clone()
    };
    Ok(ObjectIdentity {
        group: input.kind.group.clone(),
        version: input.kind.version.clone(),
        kind: input.kind.kind.clone(),
        namespace: input.namespace.clone().unwrap_or_default(),
        name,
    })
}
