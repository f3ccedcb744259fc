//! Sharding work across replicas (DESIGN.md "Scale"): which shard an object belongs to, and
//! which shard Leases a replica should hold, take or give up.
//!
//! An object belongs to shard `fnv1a64(uid) mod N`. The hash is spelled out here (FNV-1a, 64
//! bits) rather than taken from `std`, whose hasher is seeded per process: every replica, every
//! build and every `arborctl` must put one uid in the same shard.
//!
//! Replicas coordinate through Leases only. Each replica sees the same picture (the live
//! members and each shard's holder) and computes its own share from it: with `n` members sorted
//! by identity, the first `N mod n` hold `ceil(N / n)` shards and the rest `floor(N / n)`, so the
//! shares add up to exactly `N` and every replica agrees who gets the larger ones. A replica
//! above its share releases its highest shards; one below takes free shards (no holder, or a
//! holder whose Lease expired), lowest first. A replica never takes a shard another live
//! replica holds: it waits until that replica, seeing the same membership, releases it.

use std::collections::BTreeSet;

/// The shard of the object with `uid`, out of `shards` (at least 1).
pub fn shard_of(uid: &str, shards: u32) -> u32 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let hash = uid.bytes().fold(OFFSET, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    });
    // Lossless: the remainder is below `shards`, a u32.
    (hash % u64::from(shards.max(1))) as u32
}

/// How many of `shards` the member `me` should hold among `members` (`me` counts as a member
/// whether listed or not).
pub fn fair_share(me: &str, members: &BTreeSet<String>, shards: u32) -> u32 {
    let mut everyone: BTreeSet<&str> = members.iter().map(String::as_str).collect();
    everyone.insert(me);
    let count = u32::try_from(everyone.len()).unwrap_or(u32::MAX);
    let rank = everyone
        .iter()
        .position(|member| *member == me)
        .unwrap_or(0);
    let larger = shards % count;
    shards / count + u32::from(u32::try_from(rank).unwrap_or(u32::MAX) < larger)
}

/// What a replica sees of one shard's Lease.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShardView {
    /// The holder's identity; `None` when the Lease is absent or released.
    pub holder: Option<String>,
    /// The holder has not renewed for a lease duration, by this replica's clock.
    pub expired: bool,
}

/// What a replica should do with the shard Leases this round.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShardMoves {
    /// Shards it holds and keeps (renews).
    pub keep: Vec<u32>,
    /// Free shards it takes.
    pub acquire: Vec<u32>,
    /// Shards above its share that it gives up.
    pub release: Vec<u32>,
}

/// The moves of replica `me`, given the live `members` and every shard's Lease (index = shard).
pub fn plan_moves(me: &str, members: &BTreeSet<String>, shards: &[ShardView]) -> ShardMoves {
    let count = u32::try_from(shards.len()).unwrap_or(u32::MAX);
    let share = fair_share(me, members, count) as usize;
    let index = |i: usize| u32::try_from(i).unwrap_or(u32::MAX);
    let mine: Vec<u32> = shards
        .iter()
        .enumerate()
        .filter(|(_, view)| view.holder.as_deref() == Some(me))
        .map(|(i, _)| index(i))
        .collect();
    if mine.len() >= share {
        let (keep, release) = mine.split_at(share);
        return ShardMoves {
            keep: keep.to_vec(),
            acquire: Vec::new(),
            release: release.to_vec(),
        };
    }
    let acquire = shards
        .iter()
        .enumerate()
        .filter(|(_, view)| view.holder.is_none() || view.expired)
        .filter(|(_, view)| view.holder.as_deref() != Some(me))
        .map(|(i, _)| index(i))
        .take(share - mine.len())
        .collect();
    ShardMoves {
        keep: mine,
        acquire,
        release: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    fn held(holders: &[Option<&str>]) -> Vec<ShardView> {
        holders
            .iter()
            .map(|holder| ShardView {
                holder: holder.map(str::to_owned),
                expired: false,
            })
            .collect()
    }

    #[test]
    fn a_uid_lands_in_the_same_shard_in_every_process_and_build() {
        // Fixed values: a change of hash would move every object to another shard on upgrade.
        assert_eq!(shard_of("", 6), (0xcbf2_9ce4_8422_2325_u64 % 6) as u32);
        assert_eq!(
            shard_of("a", 1_000_000),
            (0xaf63_dc4c_8601_ec8c_u64 % 1_000_000) as u32
        );
        assert_eq!(shard_of("6f1c6a1e-2b7d-4c55-9a57-0e9c3f2b8f10", 1), 0);
    }

    #[test]
    fn uids_spread_over_every_shard() {
        let mut counts = [0_u32; 6];
        for i in 0..600 {
            counts[shard_of(&format!("uid-{i:04}"), 6) as usize] += 1;
        }
        assert!(
            counts.iter().all(|count| (60..=140).contains(count)),
            "{counts:?}"
        );
    }

    #[test]
    fn fair_shares_add_up_to_every_shard_with_the_larger_ones_first() {
        let three = members(&["a", "b", "c"]);
        // (me, members, shards) -> share
        let rows: [(&str, &BTreeSet<String>, u32, u32); 8] = [
            ("a", &three, 6, 2),
            ("c", &three, 6, 2),
            ("a", &three, 7, 3),
            ("b", &three, 7, 2),
            ("c", &three, 7, 2),
            ("c", &three, 2, 0),
            // A replica that is not listed yet counts itself.
            ("d", &three, 8, 2),
            ("a", &BTreeSet::new(), 6, 6),
        ];
        for (me, members, shards, share) in rows {
            assert_eq!(
                fair_share(me, members, shards),
                share,
                "{me} of {members:?}, {shards} shards"
            );
        }
        for shards in 1..20 {
            let total: u32 = three.iter().map(|me| fair_share(me, &three, shards)).sum();
            assert_eq!(total, shards);
        }
    }

    #[test]
    fn a_lone_replica_takes_every_free_shard() {
        let moves = plan_moves("a", &members(&["a"]), &held(&[None, None, None]));
        assert_eq!(moves.acquire, [0, 1, 2]);
        assert!(moves.release.is_empty() && moves.keep.is_empty());
    }

    #[test]
    fn a_replica_gives_up_its_surplus_when_another_appears() {
        let all_mine = held(&[Some("a"); 6]);
        let moves = plan_moves("a", &members(&["a", "b"]), &all_mine);
        assert_eq!(moves.keep, [0, 1, 2]);
        assert_eq!(moves.release, [3, 4, 5]);
        // The newcomer takes nothing another live replica holds; it waits for the release.
        let newcomer = plan_moves("b", &members(&["a", "b"]), &all_mine);
        assert_eq!(newcomer, ShardMoves::default());
        let after = held(&[Some("a"), Some("a"), Some("a"), None, None, None]);
        assert_eq!(
            plan_moves("b", &members(&["a", "b"]), &after).acquire,
            [3, 4, 5]
        );
    }

    #[test]
    fn expired_shards_of_a_dead_replica_are_taken_over() {
        let mut shards = held(&[
            Some("a"),
            Some("a"),
            Some("b"),
            Some("b"),
            Some("c"),
            Some("c"),
        ]);
        for view in &mut shards[2..4] {
            view.expired = true;
        }
        // b is gone from the members; a and c share its two shards.
        let alive = members(&["a", "c"]);
        assert_eq!(plan_moves("a", &alive, &shards).acquire, [2]);
        assert_eq!(plan_moves("c", &alive, &shards).acquire, [2]);
        // Both aim at the lowest; the Lease write lets one win, and the loser takes shard 3 next.
        shards[2] = ShardView {
            holder: Some("a".into()),
            expired: false,
        };
        assert_eq!(plan_moves("c", &alive, &shards).acquire, [3]);
        assert!(plan_moves("a", &alive, &shards).acquire.is_empty());
    }

    #[test]
    fn a_replica_at_its_share_keeps_what_it_holds() {
        let shards = held(&[Some("a"), Some("b"), Some("a"), Some("b")]);
        let moves = plan_moves("a", &members(&["a", "b"]), &shards);
        assert_eq!(
            moves,
            ShardMoves {
                keep: vec![0, 2],
                ..ShardMoves::default()
            }
        );
    }
}
