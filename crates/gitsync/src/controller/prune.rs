//! The mass-prune guard: a round that would delete more than `--max-prune-fraction` of a
//! source's objects, or every namespace it declared, deletes nothing and reports, until the
//! source carries the allow-mass-prune annotation. A repository emptied by mistake (a wrong
//! subPath, a force-push) then costs a status message, not the cluster.

/// What a round is about to delete, against what the source had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PruneCount {
    /// Objects the source tracked before the round.
    pub tracked: usize,
    /// Objects the round would delete.
    pub removals: usize,
    /// Namespaces the source tracked before the round.
    pub namespaces: usize,
    /// Of those, the ones the round would delete.
    pub namespaces_removed: usize,
}

/// Whether the round may delete, and if not, why.
#[derive(Debug, Clone, PartialEq)]
pub enum PruneVerdict {
    Allowed,
    Blocked(String),
}

/// Applies the guard; `allowed` is the allow-mass-prune annotation.
pub fn check(count: PruneCount, max_fraction: f64, allowed: bool) -> PruneVerdict {
    if allowed || count.removals == 0 {
        return PruneVerdict::Allowed;
    }
    if count.namespaces > 0 && count.namespaces_removed == count.namespaces {
        return PruneVerdict::Blocked(format!(
            "the round would delete all {} namespaces of the source",
            count.namespaces
        ));
    }
    // Counts are far below 2^52, so the conversion is exact.
    #[allow(clippy::cast_precision_loss)]
    let fraction = count.removals as f64 / count.tracked.max(1) as f64;
    if fraction > max_fraction {
        return PruneVerdict::Blocked(format!(
            "the round would delete {} of the source's {} objects ({:.0}%, more than \
             --max-prune-fraction {:.0}%)",
            count.removals,
            count.tracked,
            fraction * 100.0,
            max_fraction * 100.0
        ));
    }
    PruneVerdict::Allowed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(tracked: usize, removals: usize) -> PruneCount {
        PruneCount {
            tracked,
            removals,
            ..PruneCount::default()
        }
    }

    #[test]
    fn pruning_up_to_the_fraction_is_allowed() {
        assert_eq!(check(count(10, 5), 0.5, false), PruneVerdict::Allowed);
    }

    #[test]
    fn pruning_more_than_the_fraction_is_blocked_until_allowed() {
        assert!(
            matches!(check(count(10, 6), 0.5, false), PruneVerdict::Blocked(m) if m.contains("6 of the source's 10"))
        );
        assert_eq!(check(count(10, 6), 0.5, true), PruneVerdict::Allowed);
    }

    #[test]
    fn deleting_every_namespace_is_blocked_whatever_the_fraction() {
        let all_namespaces = PruneCount {
            tracked: 100,
            removals: 2,
            namespaces: 2,
            namespaces_removed: 2,
        };
        assert!(matches!(
            check(all_namespaces, 0.5, false),
            PruneVerdict::Blocked(_)
        ));
    }
}
