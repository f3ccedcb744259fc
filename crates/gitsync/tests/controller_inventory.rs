//! A round's inventory (its tracking objects) comes from the finalizer's watch, not a LIST per
//! round; and a round right after another never acts on a watch that has not shown the last
//! round's writes: it waits for them, and lists instead when they are late.

mod controller_support;

use std::time::Duration;

use arbor_api::keys::SourceRef;
use arbor_kube_emu::faults::{Fault, FaultEffect};

use controller_support::*;

const TRACKING: &str = "arbor.dev/gittrackobjects";

/// `a` in `foo`, synced by a GitTrack, and the rounds after the first settled.
async fn one_configmap() -> anyhow::Result<(Cluster, Instance, Repo, SourceRef)> {
    let cluster = Cluster::start().await?;
    cluster.namespace("foo").await?;
    let repo = Repo::new()?;
    repo.write("a.yaml", &configmap(None, "a", "1"))?;
    let commit = repo.commit("a")?;
    let instance = cluster
        .instance(&["--gittrack-mode=Enabled", "--clustergittrack-mode=Disabled"])
        .await?;
    let source = cluster.create_gittrack("foo", "apps", &repo).await?;
    cluster.synced(&instance, &source, &commit).await?;
    instance.rounds(&source, 2).await;
    Ok((cluster, instance, repo, source))
}

/// Holds the tracking objects' watch back by `lag`: the open watches end and opening one again
/// takes that long, so the store shows no write made meanwhile until then.
fn hold_back_the_tracking_watch(cluster: &Cluster, lag: Duration) {
    let faults = cluster.emu.faults();
    faults.inject(
        Fault::new(FaultEffect::Latency(lag))
            .verbs(&["watch"])
            .resources(&[TRACKING]),
    );
    faults.inject(
        Fault::new(FaultEffect::CloseWatches)
            .verbs(&["watch"])
            .resources(&[TRACKING]),
    );
}

/// A new declaration in a new commit, then two more full rounds right after the one that
/// applies it; returns the commit.
async fn declare_b_and_run_three_rounds(
    cluster: &Cluster,
    instance: &Instance,
    repo: &Repo,
    source: &SourceRef,
) -> anyhow::Result<String> {
    repo.write("b.yaml", &configmap(None, "b", "1"))?;
    let commit = repo.commit("b")?;
    cluster.emu.requests().reset();
    instance.rounds(source, 3).await;
    Ok(commit)
}

async fn assert_b_synced_once(
    cluster: &Cluster,
    instance: &Instance,
    source: &SourceRef,
    commit: &str,
) -> anyhow::Result<()> {
    let status = cluster.synced(instance, source, commit).await?;
    assert_eq!(
        cluster.emu.requests().count("create", TRACKING),
        1,
        "b's tracking object is created once, however soon the next round starts"
    );
    assert!(status.errors.is_empty(), "{:?}", status.errors);
    assert!(cluster.exists(&cluster.configmaps("foo"), "b").await?);
    Ok(())
}

#[tokio::test]
async fn rounds_read_the_tracking_objects_from_the_watch_without_listing_them() -> anyhow::Result<()>
{
    let (cluster, instance, _repo, source) = one_configmap().await?;
    cluster.emu.requests().reset();
    instance.rounds(&source, 3).await;
    assert_eq!(cluster.emu.requests().count("list", TRACKING), 0);
    instance.stop().await;
    Ok(())
}

/// The race found in session 5: round two starts while the watch has not yet shown the tracking
/// object round one created. Reading that store as it is, round two would create it again (and
/// fail with AlreadyExists). It waits until the watch shows round one's writes instead.
#[tokio::test]
async fn a_round_right_after_another_waits_for_the_watch_to_show_its_writes() -> anyhow::Result<()>
{
    let (cluster, instance, repo, source) = one_configmap().await?;
    hold_back_the_tracking_watch(&cluster, Duration::from_millis(1500));
    let commit = declare_b_and_run_three_rounds(&cluster, &instance, &repo, &source).await?;
    assert_b_synced_once(&cluster, &instance, &source, &commit).await?;
    assert_eq!(
        cluster.emu.requests().count("list", TRACKING),
        0,
        "a watch 1.5 s late is waited for"
    );
    cluster.emu.faults().clear();
    instance.stop().await;
    Ok(())
}

/// A watch later than the patience (5 s) is not waited for: the round lists the tracking
/// objects, and still creates none twice.
#[tokio::test]
async fn a_round_lists_the_tracking_objects_when_the_watch_is_too_late() -> anyhow::Result<()> {
    let (cluster, instance, repo, source) = one_configmap().await?;
    hold_back_the_tracking_watch(&cluster, Duration::from_secs(8));
    let commit = declare_b_and_run_three_rounds(&cluster, &instance, &repo, &source).await?;
    assert_b_synced_once(&cluster, &instance, &source, &commit).await?;
    assert!(cluster.emu.requests().count("list", TRACKING) >= 1);
    cluster.emu.faults().clear();
    instance.stop().await;
    Ok(())
}

/// Only this replica's writes are waited for, so a source's tracking objects are read from the
/// watch only after a round here listed them: a source new to this replica (created, or its
/// shard gained, or after a restart) may have tracking objects that another replica, a person
/// or the garbage collector changed while the watch lags. Its first round lists them even with
/// the watch ready and caught up; its later rounds read the watch.
#[tokio::test]
async fn a_sources_first_round_here_lists_its_tracking_objects_and_later_rounds_read_the_watch()
-> anyhow::Result<()> {
    let (cluster, instance, _repo, _source) = one_configmap().await?;
    let repo = Repo::new()?;
    repo.write("c.yaml", &configmap(None, "c", "1"))?;
    let commit = repo.commit("c")?;
    cluster.emu.requests().reset();
    let second = cluster.create_gittrack("foo", "more", &repo).await?;
    cluster.synced(&instance, &second, &commit).await?;
    assert!(
        cluster.emu.requests().count("list", TRACKING) >= 1,
        "the first round of a source new here lists its tracking objects"
    );
    cluster.emu.requests().reset();
    instance.rounds(&second, 2).await;
    assert_eq!(cluster.emu.requests().count("list", TRACKING), 0);
    instance.stop().await;
    Ok(())
}
