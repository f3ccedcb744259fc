//! An Application's manifest as the controller applies it: each object's kind is looked up on
//! the cluster, and arbor-policy places it ([`arbor_policy::observe::place`]: only in the
//! Application's own namespace).

use arbor_policy::observe::{ManifestProblem, manifest_kind, place};
use serde_json::Value;

use crate::resolve::Resolver;

/// The manifest with namespaces filled in, or every problem found.
pub async fn normalize(
    resolver: &Resolver,
    namespace: &str,
    manifest: &[Value],
) -> Result<Vec<Value>, Vec<ManifestProblem>> {
    let mut problems = Vec::new();
    let mut objects = Vec::with_capacity(manifest.len());
    for (index, object) in manifest.iter().enumerate() {
        let placed = match manifest_kind(index, object) {
            Ok((api_version, kind)) => match resolver.served(api_version, kind).await {
                Ok(served) => place(index, object, served.namespaced, namespace),
                Err(error) => Err(ManifestProblem::object(index, error.to_string())),
            },
            Err(problem) => Err(problem),
        };
        match placed {
            Ok(placed) => objects.push(placed),
            Err(problem) => problems.push(problem),
        }
    }
    if problems.is_empty() {
        Ok(objects)
    } else {
        Err(problems)
    }
}
