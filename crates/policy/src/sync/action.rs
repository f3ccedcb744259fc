//! The management action table of seeds/000.
//!
//! The five columns of the seed's table are not independent: "Has Label" only means something
//! when the resource is on the cluster, and "Resource Matches" only when it is declared, on the
//! cluster and labelled. [`Situation`] nests them so that exactly the eight rows of the table can
//! be built and every "N/A" cell is unrepresentable: [`decide`] is then a total `match` with one
//! arm per row, and the compiler checks that no row is missing.

use std::fmt;

use serde_json::Value;

use super::label::{Control, UnmanagedReason};
use super::matches::{CompareFields, Comparison, compare};
use crate::keys::ManagementLabel;
use crate::object;

/// What git and the cluster say about one object, in the terms of the seed's table.
#[derive(Debug, Clone, PartialEq)]
pub enum Situation {
    /// No Sync is declared for the object's kind: Arbor does not manage the kind.
    SyncNotDeclared,
    /// A Sync is declared and git declares the object.
    ResourceDeclared(DeclaredOnCluster),
    /// A Sync is declared and git does not declare the object.
    ResourceNotDeclared(UndeclaredOnCluster),
}

/// The cluster side of a declared object.
#[derive(Debug, Clone, PartialEq)]
pub enum DeclaredOnCluster {
    NotOnCluster,
    /// On the cluster without the management label.
    Unmanaged(UnmanagedReason),
    /// On the cluster with the management label, compared with its declaration.
    Managed(Comparison),
}

/// The cluster side of an object that git does not declare.
#[derive(Debug, Clone, PartialEq)]
pub enum UndeclaredOnCluster {
    NotOnCluster,
    /// On the cluster without the management label.
    Unmanaged(UnmanagedReason),
    /// On the cluster with the management label.
    Managed,
}

impl Situation {
    /// Builds the situation from what gitsync holds: whether a Sync covers the kind, the declared
    /// object if git has one, and the live object if the cluster has one. The comparison runs
    /// only when the table needs it (declared, on the cluster, labelled).
    pub fn assess(
        sync_declared: bool,
        declared: Option<&Value>,
        live: Option<&Value>,
        label: &ManagementLabel,
        fields: &CompareFields,
    ) -> Self {
        if !sync_declared {
            return Self::SyncNotDeclared;
        }
        let control = live.map(|live| (live, Control::of(label, &object::labels(live))));
        match (declared, control) {
            (Some(_), None) => Self::ResourceDeclared(DeclaredOnCluster::NotOnCluster),
            (Some(_), Some((_, Control::Unmanaged(reason)))) => {
                Self::ResourceDeclared(DeclaredOnCluster::Unmanaged(reason))
            }
            (Some(declared), Some((live, Control::Managed))) => Self::ResourceDeclared(
                DeclaredOnCluster::Managed(compare(declared, live, fields, label)),
            ),
            (None, None) => Self::ResourceNotDeclared(UndeclaredOnCluster::NotOnCluster),
            (None, Some((_, Control::Unmanaged(reason)))) => {
                Self::ResourceNotDeclared(UndeclaredOnCluster::Unmanaged(reason))
            }
            (None, Some((_, Control::Managed))) => {
                Self::ResourceNotDeclared(UndeclaredOnCluster::Managed)
            }
        }
    }
}

/// What Arbor does to the live object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    NoAction,
    Create,
    Update,
    Delete,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NoAction => "no action",
            Self::Create => "create",
            Self::Update => "update",
            Self::Delete => "delete",
        })
    }
}

/// A row of the seed's action table, in the seed's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Row {
    /// yes | yes | yes | yes | yes → no action
    ManagedAndMatching,
    /// yes | yes | yes | yes | no → update
    ManagedAndDrifted,
    /// yes | yes | yes | no | N/A → no action
    DeclaredButUnmanaged,
    /// yes | yes | no | N/A | N/A → create
    DeclaredNotOnCluster,
    /// yes | no | yes | yes | N/A → delete
    UndeclaredButManaged,
    /// yes | no | yes | no | N/A → no action
    UndeclaredAndUnmanaged,
    /// yes | no | no | N/A | N/A → no action
    UndeclaredNotOnCluster,
    /// no | N/A | N/A | N/A | N/A → no action
    SyncNotDeclared,
}

/// The seed's column headings, in order.
pub const COLUMNS: [&str; 5] = [
    "Sync Declared",
    "Resource Declared",
    "On Cluster",
    "Has Label",
    "Resource Matches",
];

impl Row {
    /// Every row, in the seed's order.
    pub const ALL: [Row; 8] = [
        Row::ManagedAndMatching,
        Row::ManagedAndDrifted,
        Row::DeclaredButUnmanaged,
        Row::DeclaredNotOnCluster,
        Row::UndeclaredButManaged,
        Row::UndeclaredAndUnmanaged,
        Row::UndeclaredNotOnCluster,
        Row::SyncNotDeclared,
    ];

    /// The row's number in the seed's table, from 1.
    pub fn number(self) -> u8 {
        match self {
            Row::ManagedAndMatching => 1,
            Row::ManagedAndDrifted => 2,
            Row::DeclaredButUnmanaged => 3,
            Row::DeclaredNotOnCluster => 4,
            Row::UndeclaredButManaged => 5,
            Row::UndeclaredAndUnmanaged => 6,
            Row::UndeclaredNotOnCluster => 7,
            Row::SyncNotDeclared => 8,
        }
    }

    /// A stable identifier, for APIs and metrics.
    pub fn id(self) -> &'static str {
        match self {
            Row::ManagedAndMatching => "managed-and-matching",
            Row::ManagedAndDrifted => "managed-and-drifted",
            Row::DeclaredButUnmanaged => "declared-but-unmanaged",
            Row::DeclaredNotOnCluster => "declared-not-on-cluster",
            Row::UndeclaredButManaged => "undeclared-but-managed",
            Row::UndeclaredAndUnmanaged => "undeclared-and-unmanaged",
            Row::UndeclaredNotOnCluster => "undeclared-not-on-cluster",
            Row::SyncNotDeclared => "sync-not-declared",
        }
    }

    /// The row's cells under [`COLUMNS`], as the seed writes them.
    pub fn cells(self) -> [&'static str; 5] {
        match self {
            Row::ManagedAndMatching => ["yes", "yes", "yes", "yes", "yes"],
            Row::ManagedAndDrifted => ["yes", "yes", "yes", "yes", "no"],
            Row::DeclaredButUnmanaged => ["yes", "yes", "yes", "no", "N/A"],
            Row::DeclaredNotOnCluster => ["yes", "yes", "no", "N/A", "N/A"],
            Row::UndeclaredButManaged => ["yes", "no", "yes", "yes", "N/A"],
            Row::UndeclaredAndUnmanaged => ["yes", "no", "yes", "no", "N/A"],
            Row::UndeclaredNotOnCluster => ["yes", "no", "no", "N/A", "N/A"],
            Row::SyncNotDeclared => ["no", "N/A", "N/A", "N/A", "N/A"],
        }
    }

    /// The action the row prescribes.
    pub fn action(self) -> Action {
        match self {
            Row::ManagedAndDrifted => Action::Update,
            Row::DeclaredNotOnCluster => Action::Create,
            Row::UndeclaredButManaged => Action::Delete,
            Row::ManagedAndMatching
            | Row::DeclaredButUnmanaged
            | Row::UndeclaredAndUnmanaged
            | Row::UndeclaredNotOnCluster
            | Row::SyncNotDeclared => Action::NoAction,
        }
    }

    /// Why the row leads to its action, for `Explain`.
    pub fn reason(self) -> &'static str {
        match self {
            Row::ManagedAndMatching => {
                "declared in git and on the cluster with the management label, and they match"
            }
            Row::ManagedAndDrifted => {
                "declared in git and on the cluster with the management label, but they differ: \
                 update it to match git"
            }
            Row::DeclaredButUnmanaged => {
                "declared in git and on the cluster without the management label: Arbor never \
                 updates an object it does not manage"
            }
            Row::DeclaredNotOnCluster => {
                "declared in git and not on the cluster: create it to match git"
            }
            Row::UndeclaredButManaged => {
                "not declared in git, on the cluster with the management label: delete it to \
                 match git"
            }
            Row::UndeclaredAndUnmanaged => {
                "not declared in git, on the cluster without the management label: Arbor never \
                 deletes an object it does not manage"
            }
            Row::UndeclaredNotOnCluster => "neither declared in git nor on the cluster",
            Row::SyncNotDeclared => "no Sync is declared for the kind, so Arbor does not manage it",
        }
    }
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "action table row {} (", self.number())?;
        for (index, (column, cell)) in COLUMNS.iter().zip(self.cells()).enumerate() {
            if index > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{column}: {cell}")?;
        }
        write!(f, "): {}", self.reason())
    }
}

/// The action for one object and the table row that decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision {
    pub action: Action,
    pub row: Row,
}

impl From<Row> for Decision {
    fn from(row: Row) -> Self {
        Self {
            action: row.action(),
            row,
        }
    }
}

/// Applies the action table.
pub fn decide(situation: &Situation) -> Decision {
    let row = match situation {
        Situation::SyncNotDeclared => Row::SyncNotDeclared,
        Situation::ResourceDeclared(DeclaredOnCluster::Managed(comparison)) => {
            if comparison.matches() {
                Row::ManagedAndMatching
            } else {
                Row::ManagedAndDrifted
            }
        }
        Situation::ResourceDeclared(DeclaredOnCluster::Unmanaged(_)) => Row::DeclaredButUnmanaged,
        Situation::ResourceDeclared(DeclaredOnCluster::NotOnCluster) => Row::DeclaredNotOnCluster,
        Situation::ResourceNotDeclared(UndeclaredOnCluster::Managed) => Row::UndeclaredButManaged,
        Situation::ResourceNotDeclared(UndeclaredOnCluster::Unmanaged(_)) => {
            Row::UndeclaredAndUnmanaged
        }
        Situation::ResourceNotDeclared(UndeclaredOnCluster::NotOnCluster) => {
            Row::UndeclaredNotOnCluster
        }
    };
    row.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_numbered_in_the_seeds_order_with_distinct_ids() {
        for (index, row) in Row::ALL.into_iter().enumerate() {
            assert_eq!(usize::from(row.number()), index + 1);
        }
        let mut ids: Vec<_> = Row::ALL.map(Row::id).to_vec();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), Row::ALL.len());
    }

    #[test]
    fn row_display_spells_out_the_columns_and_reason() {
        assert_eq!(
            Row::DeclaredNotOnCluster.to_string(),
            "action table row 4 (Sync Declared: yes, Resource Declared: yes, On Cluster: no, \
             Has Label: N/A, Resource Matches: N/A): declared in git and not on the cluster: \
             create it to match git"
        );
    }

    #[test]
    fn only_rows_with_the_label_on_cluster_update_or_delete() {
        for row in Row::ALL {
            if matches!(row.action(), Action::Update | Action::Delete) {
                assert_eq!(row.cells()[3], "yes", "{row}");
            }
        }
    }
}
