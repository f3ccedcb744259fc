//! Apply conflicts and the message kube-apiserver words them with.

use super::managed::ManagerId;
use super::path::{PathElement, display_path};
use super::{FieldConflict, PatchError};

/// The conflict error for `conflicts` (manager, owned paths that the apply would change), in
/// kube-apiserver's words:
/// `Apply failed with 1 conflict: conflict with "m" using v1: .data.key`, or for several
/// `Apply failed with 2 conflicts: conflicts with "m":\n- .spec.a\n- .spec.b`.
pub fn conflict_error(conflicts: &[(ManagerId, Vec<Vec<PathElement>>)]) -> PatchError {
    let listed: Vec<FieldConflict> = conflicts
        .iter()
        .flat_map(|(id, paths)| {
            paths.iter().map(|path| FieldConflict {
                manager: id.manager.clone(),
                field: display_path(path),
            })
        })
        .collect();
    let message = match (conflicts, listed.as_slice()) {
        ([(id, _)], [only]) => format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            id.describe(),
            only.field
        ),
        _ => {
            let mut lines = Vec::new();
            for (id, paths) in conflicts {
                lines.push(format!("conflicts with {}:", id.describe()));
                lines.extend(paths.iter().map(|path| format!("- {}", display_path(path))));
            }
            format!(
                "Apply failed with {} conflicts: {}",
                listed.len(),
                lines.join("\n")
            )
        }
    };
    PatchError::Conflict {
        message,
        conflicts: listed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::managed::Operation;

    fn path(fields: &[&str]) -> Vec<PathElement> {
        fields
            .iter()
            .map(|name| PathElement::Field((*name).to_owned()))
            .collect()
    }

    #[test]
    fn one_conflict_names_manager_version_and_field() {
        let id = ManagerId::new("kubectl-client-side-apply", Operation::Update, "v1", None);
        let error = conflict_error(&[(id, vec![path(&["data", "key"])])]);
        assert_eq!(
            error.to_string(),
            r#"Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .data.key"#
        );
    }

    #[test]
    fn several_conflicts_are_listed_per_manager() {
        let x = ManagerId::new("x", Operation::Apply, "v1", None);
        let y = ManagerId::new("y", Operation::Update, "apps/v1", None);
        let error = conflict_error(&[
            (x, vec![path(&["spec", "a"]), path(&["spec", "b"])]),
            (y, vec![path(&["spec", "c"])]),
        ]);
        assert_eq!(
            error.to_string(),
            "Apply failed with 3 conflicts: conflicts with \"x\":\n- .spec.a\n- .spec.b\n\
             conflicts with \"y\" using apps/v1:\n- .spec.c"
        );
        let PatchError::Conflict { conflicts, .. } = error else {
            panic!("not a conflict");
        };
        assert_eq!(conflicts.len(), 3);
    }
}
