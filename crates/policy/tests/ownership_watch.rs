//! seeds/002, "Controller Reconcile Matrix": the ClusterGitTrack rows A, B, C and the GitTrack
//! rows 1, 2, 3, and how `WatchScope::from_flags` combines them.

use arbor_policy::ownership::{
    ClusterGitTrackMode, FlagError, GitTrackMode, ModeFlags, NamespaceRestriction, NamespaceScope,
    WatchScope, WatchSet, Watched,
};

/// The seed's GitTrack-matrix columns, in order: GitTrack (NS: Foo), GitTrackObject (NS: Foo),
/// GitTrack (NS: Bar), GitTrackObject (NS: Bar), ClusterGitTrack, ClusterGitTrackObject.
fn columns(watches: &WatchSet) -> [bool; 6] {
    [
        Watched::GitTrack { namespace: "foo" },
        Watched::GitTrackObject { namespace: "foo" },
        Watched::GitTrack { namespace: "bar" },
        Watched::GitTrackObject { namespace: "bar" },
        Watched::ClusterGitTrack,
        Watched::ClusterGitTrackObject,
    ]
    .map(|column| watches.watches(column))
}

const Y: bool = true;
const N: bool = false;

fn only(namespace: &str) -> NamespaceRestriction {
    NamespaceRestriction::Only(namespace.into())
}

fn scope(
    gittrack: GitTrackMode,
    cluster_gittrack: ClusterGitTrackMode,
    namespace: NamespaceRestriction,
) -> WatchScope {
    WatchScope::from_flags(gittrack, cluster_gittrack, namespace).expect("flags allowed")
}

#[test]
fn clustergittrack_mode_a_includenamespaced_watches_gittrackobject_clustergittrack_clustergittrackobject()
 {
    let row = ClusterGitTrackMode::IncludeNamespaced.watches();
    // GitTrack N, GitTrackObject Y (in every namespace), ClusterGitTrack Y, ClusterGitTrackObject Y.
    assert_eq!(columns(&row), [N, Y, N, Y, Y, Y]);
    assert_eq!(row.gittrack_objects(), NamespaceScope::AllNamespaces);
}

#[test]
fn clustergittrack_mode_b_excludenamespaced_watches_clustergittrack_clustergittrackobject() {
    let row = ClusterGitTrackMode::ExcludeNamespaced.watches();
    assert_eq!(columns(&row), [N, N, N, N, Y, Y]);
    assert_eq!(row.gittrack_objects(), NamespaceScope::Nowhere);
}

#[test]
fn clustergittrack_mode_c_disabled_watches_nothing() {
    let row = ClusterGitTrackMode::Disabled.watches();
    assert_eq!(columns(&row), [N; 6]);
    assert!(row.is_empty());
}

/// A GitTrack-matrix row: `--gittrack-mode=Enabled` with `namespace` contributes `expected`,
/// an instance with ClusterGitTracks disabled watches exactly that row, and its GitTrackObject
/// watch looks in `gittrack_objects`.
fn assert_gittrack_row(
    namespace: NamespaceRestriction,
    expected: [bool; 6],
    gittrack_objects: NamespaceScope,
) {
    let row = GitTrackMode::Enabled.watches(&namespace);
    assert_eq!(columns(&row), expected, "--namespace={namespace}");
    let instance = scope(
        GitTrackMode::Enabled,
        ClusterGitTrackMode::Disabled,
        namespace,
    );
    assert_eq!(instance.watches(), &row);
    assert_eq!(instance.watches().gittrack_objects(), gittrack_objects);
}

#[test]
fn gittrack_mode_1_enabled_no_namespace_watches_gittracks_and_gittrackobjects_in_foo_and_bar() {
    let all = NamespaceRestriction::AllNamespaces;
    assert_gittrack_row(all, [Y, Y, Y, Y, N, N], NamespaceScope::AllNamespaces);
}

#[test]
fn gittrack_mode_2_enabled_namespace_foo_watches_gittracks_and_gittrackobjects_in_foo_only() {
    let foo = NamespaceScope::Only("foo".into());
    assert_gittrack_row(only("foo"), [Y, Y, N, N, N, N], foo);
}

#[test]
fn gittrack_mode_3_enabled_namespace_bar_watches_gittracks_and_gittrackobjects_in_bar_only() {
    let bar = NamespaceScope::Only("bar".into());
    assert_gittrack_row(only("bar"), [N, N, Y, Y, N, N], bar);
}

#[test]
fn gittrack_mode_disabled_contributes_nothing() {
    let row = GitTrackMode::Disabled.watches(&NamespaceRestriction::AllNamespaces);
    assert!(row.is_empty());
}

#[test]
fn default_flags_are_row_a() {
    let instance = scope(
        GitTrackMode::default(),
        ClusterGitTrackMode::default(),
        NamespaceRestriction::default(),
    );
    assert_eq!(columns(instance.watches()), [N, Y, N, Y, Y, Y]);
}

#[test]
fn row_1_with_row_a_watches_everything() {
    let instance = scope(
        GitTrackMode::Enabled,
        ClusterGitTrackMode::IncludeNamespaced,
        NamespaceRestriction::AllNamespaces,
    );
    assert_eq!(columns(instance.watches()), [Y; 6]);
}

#[test]
fn row_2_with_row_c_watches_foo_only() {
    // Rows 2 and B together are refused (see below): a namespaced instance serves no
    // ClusterGitTrack, as in Faros.
    let instance = scope(
        GitTrackMode::Enabled,
        ClusterGitTrackMode::Disabled,
        only("foo"),
    );
    assert_eq!(columns(instance.watches()), [Y, Y, N, N, N, N]);
    assert_eq!(
        instance.watches().gittrack_objects(),
        NamespaceScope::Only("foo".into())
    );
}

#[test]
fn row_b_alone_watches_only_cluster_scoped_sources() {
    let instance = scope(
        GitTrackMode::Disabled,
        ClusterGitTrackMode::ExcludeNamespaced,
        NamespaceRestriction::AllNamespaces,
    );
    assert_eq!(columns(instance.watches()), [N, N, N, N, Y, Y]);
}

#[test]
fn namespace_flag_is_for_use_with_gittrack_mode_enabled() {
    let error = WatchScope::from_flags(
        GitTrackMode::Disabled,
        ClusterGitTrackMode::ExcludeNamespaced,
        only("foo"),
    )
    .unwrap_err();
    assert_eq!(
        error,
        FlagError::NamespaceWithoutGitTracks {
            namespace: "foo".into()
        }
    );
    assert!(
        error
            .to_string()
            .contains("--namespace is for use with --gittrack-mode=Enabled"),
        "{error}"
    );
}

#[test]
fn namespace_flag_is_refused_with_every_clustergittrack_mode_but_disabled() {
    for mode in [
        ClusterGitTrackMode::IncludeNamespaced,
        ClusterGitTrackMode::ExcludeNamespaced,
    ] {
        let error = WatchScope::from_flags(GitTrackMode::Enabled, mode, only("foo")).unwrap_err();
        assert_eq!(
            error,
            FlagError::NamespaceWithClusterGitTracks {
                namespace: "foo".into(),
                mode,
            }
        );
        let message = error.to_string();
        assert!(
            message.contains(&format!("--clustergittrack-mode={mode}"))
                && message.contains("--namespace=foo")
                && message.contains("set --clustergittrack-mode=Disabled"),
            "{message}"
        );
    }
    let allowed = WatchScope::from_flags(
        GitTrackMode::Enabled,
        ClusterGitTrackMode::Disabled,
        only("foo"),
    )
    .unwrap();
    assert!(!allowed.watches().cluster_gittracks);
}

#[test]
fn both_modes_disabled_watch_nothing_and_are_refused() {
    let error = WatchScope::from_flags(
        GitTrackMode::Disabled,
        ClusterGitTrackMode::Disabled,
        NamespaceRestriction::AllNamespaces,
    )
    .unwrap_err();
    assert_eq!(error, FlagError::NothingWatched);
}

/// A binary's command line holding only the mode flags, as gitsync and the webhook flatten them.
#[derive(clap::Parser)]
struct ModesOnly {
    #[command(flatten)]
    modes: ModeFlags,
}

fn parse_modes(argv: &[&str]) -> Result<ModeFlags, clap::Error> {
    use clap::Parser as _;
    ModesOnly::try_parse_from(std::iter::once("binary").chain(argv.iter().copied()))
        .map(|cli| cli.modes)
}

#[test]
fn flags_parse_from_their_strings() {
    let instance = parse_modes(&[
        "--gittrack-mode",
        "enabled",
        "--clustergittrack-mode",
        "DISABLED",
        "--namespace",
        "foo",
    ])
    .unwrap()
    .scope()
    .unwrap();
    assert_eq!(instance.gittrack_mode(), GitTrackMode::Enabled);
    assert_eq!(
        instance.cluster_gittrack_mode(),
        ClusterGitTrackMode::Disabled
    );
    assert_eq!(instance.namespace(), &only("foo"));
    let error = parse_modes(&["--gittrack-mode", "yes"])
        .unwrap_err()
        .to_string();
    assert!(error.contains("--gittrack-mode"), "{error}");
    assert!(error.contains("Disabled, Enabled"), "{error}");
}

#[test]
fn flags_default_to_the_seed_defaults() {
    let instance = parse_modes(&[]).unwrap().scope().unwrap();
    assert_eq!(instance.gittrack_mode(), GitTrackMode::Disabled);
    assert_eq!(
        instance.cluster_gittrack_mode(),
        ClusterGitTrackMode::IncludeNamespaced
    );
    assert_eq!(instance.namespace(), &NamespaceRestriction::AllNamespaces);
}
