//! Where a declared object stands, from the row of seeds/000's table that applies to it.
//!
//! Two moments ask: `Explain` asks what the row *finds* (a drifted object is `Drifted`, one not
//! yet created is `Pending`), and a round records where the object stands once it *carried
//! out* the row's action (both are `InSync` then). [`ObjectState::of`] answers both from one
//! table, so the round's `ListManaged` and `Explain` cannot disagree about a row.

use super::action::Row;

/// Where a declared object stands (the `ManagedState` of `SyncService`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectState {
    /// On the cluster with the management label, matching the declaration.
    InSync,
    /// On the cluster with the management label, differing: an update is due.
    Drifted,
    /// Declared, not on the cluster yet: a create is due.
    Pending,
    /// On the cluster without the management label: Arbor leaves it alone.
    Unmanaged,
    /// Refused by the ownership matrix, or of a kind no Sync declares (row 8): never applied.
    Ignored,
    /// Applying failed.
    Failed,
    /// Labelled on the cluster and no longer declared: a delete is due.
    Pruning,
}

/// When the state is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    /// Before acting: what the row finds.
    Found,
    /// After the row's action was carried out.
    CarriedOut,
}

impl ObjectState {
    pub const ALL: [ObjectState; 7] = [
        Self::InSync,
        Self::Drifted,
        Self::Pending,
        Self::Unmanaged,
        Self::Ignored,
        Self::Failed,
        Self::Pruning,
    ];

    /// The state `row` implies at `moment`; `None` when there is no object to speak of (row 7,
    /// and row 5 once its delete was carried out).
    pub fn of(row: Row, moment: Moment) -> Option<Self> {
        let carried_out = moment == Moment::CarriedOut;
        match row {
            Row::ManagedAndMatching => Some(Self::InSync),
            Row::ManagedAndDrifted | Row::DeclaredNotOnCluster if carried_out => Some(Self::InSync),
            Row::ManagedAndDrifted => Some(Self::Drifted),
            Row::DeclaredNotOnCluster => Some(Self::Pending),
            Row::DeclaredButUnmanaged | Row::UndeclaredAndUnmanaged => Some(Self::Unmanaged),
            Row::UndeclaredButManaged if carried_out => None,
            Row::UndeclaredButManaged => Some(Self::Pruning),
            Row::UndeclaredNotOnCluster => None,
            Row::SyncNotDeclared => Some(Self::Ignored),
        }
    }

    /// Whether a source whose declaration is in this state may manage the object: one the
    /// ownership matrix refused, or of a kind the source has no Sync for, can neither take an
    /// object over nor keep it from being deleted.
    pub fn may_manage(self) -> bool {
        self != Self::Ignored
    }

    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InSync => "in_sync",
            Self::Drifted => "drifted",
            Self::Pending => "pending",
            Self::Unmanaged => "unmanaged",
            Self::Ignored => "ignored",
            Self::Failed => "failed",
            Self::Pruning => "pruning",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_row_has_one_state_found_and_one_after_its_action() {
        use Moment::{CarriedOut, Found};
        use ObjectState::*;
        let table = [
            (Row::ManagedAndMatching, Some(InSync), Some(InSync)),
            (Row::ManagedAndDrifted, Some(Drifted), Some(InSync)),
            (Row::DeclaredButUnmanaged, Some(Unmanaged), Some(Unmanaged)),
            (Row::DeclaredNotOnCluster, Some(Pending), Some(InSync)),
            (Row::UndeclaredButManaged, Some(Pruning), None),
            (
                Row::UndeclaredAndUnmanaged,
                Some(Unmanaged),
                Some(Unmanaged),
            ),
            (Row::UndeclaredNotOnCluster, None, None),
            (Row::SyncNotDeclared, Some(Ignored), Some(Ignored)),
        ];
        assert_eq!(table.len(), Row::ALL.len());
        for (row, found, carried_out) in table {
            assert_eq!(ObjectState::of(row, Found), found, "{row}");
            assert_eq!(ObjectState::of(row, CarriedOut), carried_out, "{row}");
        }
    }

    #[test]
    fn only_an_ignored_declaration_may_not_manage_its_object() {
        for state in ObjectState::ALL {
            assert_eq!(
                state.may_manage(),
                state != ObjectState::Ignored,
                "{state:?}"
            );
        }
    }

    #[test]
    fn metric_labels_are_distinct() {
        let mut labels: Vec<_> = ObjectState::ALL.map(ObjectState::as_str).to_vec();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), ObjectState::ALL.len());
    }
}
