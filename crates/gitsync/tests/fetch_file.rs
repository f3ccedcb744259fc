//! Fetching over `file://` (libgit2's local transport) and checking out what was fetched.

mod support;

use std::os::unix::fs::PermissionsExt as _;

use arbor_gitsync::fetch::{
    CheckoutErrorKind, Credentials, FetchErrorKind, FetchSettings, Fetcher, GitReference, SourceId,
};
use support::git_repo::GitRepo;
use support::{assert_kind, branch, fetch_error, source};

fn fetcher(cache: &tempfile::TempDir) -> Fetcher {
    Fetcher::new(cache.path(), allowing_file_urls()).unwrap()
}

fn allowing_file_urls() -> FetchSettings {
    FetchSettings {
        allow_file_repositories: true,
        ..FetchSettings::default()
    }
}

#[test]
fn fetches_a_branch_and_reports_commit_time_and_summary() {
    let repo = GitRepo::new("repo");
    let head = repo.commit("deploy/extra.yaml", "a: 1\n", "Add extra\n\nWith a body.");
    let cache = tempfile::tempdir().unwrap();

    let fetched = fetcher(&cache)
        .fetch(&source(
            "app",
            &repo.file_url(),
            branch("main"),
            Credentials::None,
        ))
        .unwrap();

    assert_eq!(fetched.commit, head);
    assert_eq!(fetched.summary, "Add extra");
    let committed_at: u64 = repo.git(&["log", "-1", "--format=%ct"]).parse().unwrap();
    let reported = fetched.time.duration_since(std::time::UNIX_EPOCH).unwrap();
    assert_eq!(reported.as_secs(), committed_at);
    assert!(fetched.received_objects > 0);
}

#[test]
fn fetches_lightweight_and_annotated_tags_as_their_commit() {
    let repo = GitRepo::new("repo");
    let tagged = repo.head();
    repo.git(&["tag", "light"]);
    repo.git(&["tag", "-a", "annotated", "-m", "release"]);
    repo.commit("deploy/later.yaml", "b: 2\n", "Later");
    let cache = tempfile::tempdir().unwrap();
    let fetcher = fetcher(&cache);

    for tag in ["light", "annotated"] {
        let reference = GitReference::Tag(tag.to_owned());
        let fetched = fetcher
            .fetch(&source(tag, &repo.file_url(), reference, Credentials::None))
            .unwrap();
        assert_eq!(fetched.commit, tagged, "tag {tag}");
    }
}

#[test]
fn a_short_name_resolves_to_a_tag_before_a_branch() {
    let repo = GitRepo::new("repo");
    let tagged = repo.head();
    repo.git(&["tag", "stable"]);
    repo.git(&["branch", "stable"]);
    repo.git(&["checkout", "-q", "stable"]);
    repo.commit("deploy/branch.yaml", "c: 3\n", "On the branch");
    let cache = tempfile::tempdir().unwrap();

    let reference: GitReference = "stable".parse().unwrap();
    let fetched = fetcher(&cache)
        .fetch(&source(
            "app",
            &repo.file_url(),
            reference,
            Credentials::None,
        ))
        .unwrap();

    assert_eq!(fetched.commit, tagged);
}

#[test]
fn fetches_an_older_commit_by_its_id() {
    let repo = GitRepo::new("repo");
    let older = repo.head();
    repo.commit("deploy/newer.yaml", "d: 4\n", "Newer");
    let cache = tempfile::tempdir().unwrap();

    let fetched = fetcher(&cache)
        .fetch(&source(
            "app",
            &repo.file_url(),
            GitReference::Commit(older.clone()),
            Credentials::None,
        ))
        .unwrap();

    assert_eq!(fetched.commit, older);
    assert_eq!(fetched.summary, "First commit");
}

#[test]
fn a_commit_already_in_the_cache_needs_no_repository_at_all() {
    let repo = GitRepo::new("repo");
    let commit = repo.head();
    let cache = tempfile::tempdir().unwrap();
    let fetcher = fetcher(&cache);
    let pinned = source(
        "app",
        &repo.file_url(),
        GitReference::Commit(commit.clone()),
        Credentials::None,
    );
    fetcher.fetch(&pinned).unwrap();

    std::fs::remove_dir_all(repo.path()).unwrap();
    let again = fetcher.fetch(&pinned).unwrap();

    assert_eq!(again.commit, commit);
    assert_eq!(again.received_objects, 0);
}

#[test]
fn a_second_fetch_of_an_unchanged_repository_downloads_nothing() {
    let repo = GitRepo::new("repo");
    let cache = tempfile::tempdir().unwrap();
    let fetcher = fetcher(&cache);
    let app = source("app", &repo.file_url(), branch("main"), Credentials::None);

    let first = fetcher.fetch(&app).unwrap();
    let second = fetcher.fetch(&app).unwrap();

    assert!(first.received_objects > 0);
    assert_eq!(second.commit, first.commit);
    assert_eq!(second.received_objects, 0);
    assert!(fetcher.cache_dir(&app.id).join("repo.git").is_dir());
}

#[test]
fn a_new_commit_is_picked_up_by_the_next_fetch() {
    let repo = GitRepo::new("repo");
    let cache = tempfile::tempdir().unwrap();
    let fetcher = fetcher(&cache);
    let app = source("app", &repo.file_url(), branch("main"), Credentials::None);
    let first = fetcher.fetch(&app).unwrap();

    let newer = repo.commit("deploy/app.yaml", "kind: ConfigMap\n", "Change app");
    let second = fetcher.fetch(&app).unwrap();

    assert_ne!(first.commit, second.commit);
    assert_eq!(second.commit, newer);
    assert_eq!(second.summary, "Change app");
    assert!(second.received_objects > 0);
}

#[test]
fn sources_never_share_a_cache_directory() {
    let repo = GitRepo::new("repo");
    let cache = tempfile::tempdir().unwrap();
    let fetcher = fetcher(&cache);
    let namespaced = source("app", &repo.file_url(), branch("main"), Credentials::None);
    let mut cluster = namespaced.clone();
    cluster.id = SourceId::cluster_git_track("app");

    fetcher.fetch(&namespaced).unwrap();
    fetcher.fetch(&cluster).unwrap();

    let a = fetcher.cache_dir(&namespaced.id);
    let b = fetcher.cache_dir(&cluster.id);
    assert_ne!(a, b);
    assert!(a.join("repo.git").is_dir() && b.join("repo.git").is_dir());
}

#[test]
fn file_urls_are_refused_unless_the_instance_allows_them() {
    let repo = GitRepo::new("repo");
    let cache = tempfile::tempdir().unwrap();
    let fetcher = Fetcher::new(cache.path(), FetchSettings::default()).unwrap();
    let app = source("app", &repo.file_url(), branch("main"), Credentials::None);
    let error = fetcher.fetch(&app).unwrap_err();
    assert_kind!(error, FetchErrorKind::InvalidSource { .. });
    assert!(
        error.to_string().contains("--allow-file-repositories"),
        "{error}"
    );
}

#[test]
fn cache_directories_cannot_be_derived_from_a_sources_name() {
    let repo = GitRepo::new("repo");
    let cache = tempfile::tempdir().unwrap();
    let app = source(
        "flat-app",
        &repo.file_url(),
        branch("main"),
        Credentials::None,
    );
    let dir = fetcher(&cache).cache_dir(&app.id);
    let name = dir.file_name().unwrap().to_str().unwrap().to_owned();
    assert!(!name.contains("flat-app"), "{name}");
    // The key lives in the cache root: the same directory after a restart, another elsewhere.
    assert_eq!(fetcher(&cache).cache_dir(&app.id), dir);
    let other = tempfile::tempdir().unwrap();
    let elsewhere = fetcher(&other).cache_dir(&app.id);
    assert_ne!(elsewhere.file_name(), dir.file_name());
}

#[test]
fn a_source_cannot_fetch_another_sources_cache() {
    let repo = GitRepo::new("repo");
    let cache = tempfile::tempdir().unwrap();
    let fetcher = fetcher(&cache);
    let victim = source(
        "victim",
        &repo.file_url(),
        branch("main"),
        Credentials::None,
    );
    let fetched = fetcher.fetch(&victim).unwrap();
    let stolen = format!(
        "file://{}",
        fetcher.cache_dir(&victim.id).join("repo.git").display()
    );
    let mut thief = source(
        "thief",
        &stolen,
        GitReference::Commit(fetched.commit),
        Credentials::None,
    );
    thief.id = SourceId::git_track("emptyns", "thief");
    let error = fetcher.fetch(&thief).unwrap_err();
    assert_kind!(error, FetchErrorKind::InvalidSource { .. });
    assert!(error.to_string().contains("cache directory"), "{error}");
}

#[test]
fn a_source_whose_url_changes_gets_a_fresh_cache() {
    let first_repo = GitRepo::new("first");
    first_repo.commit(
        "deploy/first.yaml",
        "f: 1\n",
        "Only in the first repository",
    );
    let other_repo = GitRepo::new("other");
    other_repo.commit("deploy/other.yaml", "o: 1\n", "Other history");
    let cache = tempfile::tempdir().unwrap();
    let fetcher = fetcher(&cache);
    let mut app = source(
        "app",
        &first_repo.file_url(),
        branch("main"),
        Credentials::None,
    );
    fetcher.fetch(&app).unwrap();

    app.url = other_repo.file_url();
    let fetched = fetcher.fetch(&app).unwrap();

    assert_eq!(fetched.commit, other_repo.head());
    let cached = git2::Repository::open_bare(fetcher.cache_dir(&app.id).join("repo.git")).unwrap();
    let first_commit = git2::Oid::from_str(&first_repo.head()).unwrap();
    assert!(
        cached.find_commit(first_commit).is_err(),
        "old objects kept"
    );
}

#[test]
fn a_missing_branch_is_reference_not_found() {
    let repo = GitRepo::new("repo");

    let err = fetch_error(&source(
        "app",
        &repo.file_url(),
        branch("nope"),
        Credentials::None,
    ));

    assert_kind!(err, FetchErrorKind::ReferenceNotFound { .. });
    assert!(err.to_string().contains("GitTrack tests/app"), "{err}");
    assert!(err.to_string().contains("branch nope"), "{err}");
}

#[test]
fn a_missing_commit_is_reference_not_found() {
    let repo = GitRepo::new("repo");
    let absent = GitReference::Commit("0123456789abcdef0123456789abcdef01234567".into());

    let err = fetch_error(&source("app", &repo.file_url(), absent, Credentials::None));

    assert_kind!(err, FetchErrorKind::ReferenceNotFound { .. });
}

#[test]
fn a_missing_repository_is_repository_not_found() {
    let cache = tempfile::tempdir().unwrap();
    let url = format!("file://{}/no-such-repo", cache.path().display());

    let err = fetch_error(&source("app", &url, branch("main"), Credentials::None));

    assert_kind!(err, FetchErrorKind::RepositoryNotFound { .. });
    assert!(err.to_string().contains("no-such-repo"), "{err}");
}

#[test]
fn checkout_writes_the_tree_at_the_sub_path() {
    let repo = GitRepo::new("repo");
    repo.commit("deploy/nested/b.yaml", "b: 1\n", "Nested");
    repo.commit("other/c.yaml", "c: 1\n", "Elsewhere");
    std::fs::write(repo.path().join("deploy/run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(
        repo.path().join("deploy/run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let head = repo.commit("deploy/run.sh", "#!/bin/sh\n", "Script");
    let cache = tempfile::tempdir().unwrap();
    let fetcher = fetcher(&cache);
    let app = source("app", &repo.file_url(), branch("main"), Credentials::None);
    fetcher.fetch(&app).unwrap();

    let dir = fetcher.checkout(&app.id, &head, "/deploy/").unwrap();

    assert_eq!(
        std::fs::read_to_string(dir.join("app.yaml")).unwrap(),
        "kind: ConfigMap\nmetadata:\n  name: v1\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("nested/b.yaml")).unwrap(),
        "b: 1\n"
    );
    assert!(!dir.join("other").exists());
    let mode = std::fs::metadata(dir.join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "executable bit lost");
    assert!(dir.starts_with(fetcher.cache_dir(&app.id)));
}

#[test]
fn checkout_of_the_same_tree_returns_the_same_directory() {
    let repo = GitRepo::new("repo");
    let first = repo.head();
    let second = repo.commit("other/x.yaml", "x: 1\n", "Outside deploy/");
    let cache = tempfile::tempdir().unwrap();
    let fetcher = fetcher(&cache);
    let app = source("app", &repo.file_url(), branch("main"), Credentials::None);
    fetcher.fetch(&app).unwrap();

    let a = fetcher.checkout(&app.id, &first, "deploy").unwrap();
    let b = fetcher.checkout(&app.id, &second, "deploy").unwrap();
    let root = fetcher.checkout(&app.id, &second, "").unwrap();

    assert_eq!(a, b);
    assert_ne!(a, root);
    assert!(root.join("other/x.yaml").is_file());
}

#[test]
fn checkout_keeps_only_the_latest_few_trees() {
    let repo = GitRepo::new("repo");
    let cache = tempfile::tempdir().unwrap();
    let settings = FetchSettings {
        keep_checkouts: 2,
        ..allowing_file_urls()
    };
    let fetcher = Fetcher::new(cache.path(), settings).unwrap();
    let app = source("app", &repo.file_url(), branch("main"), Credentials::None);
    let mut dirs = Vec::new();
    for round in 0..4 {
        repo.commit("deploy/app.yaml", &format!("round: {round}\n"), "Round");
        let fetched = fetcher.fetch(&app).unwrap();
        dirs.push(
            fetcher
                .checkout(&app.id, &fetched.commit, "deploy")
                .unwrap(),
        );
    }

    let kept: Vec<bool> = dirs.iter().map(|dir| dir.is_dir()).collect();
    assert_eq!(kept, [false, false, true, true]);
    let entries = std::fs::read_dir(dirs[3].parent().unwrap())
        .unwrap()
        .count();
    assert_eq!(entries, 2, "temporary or stale directories left behind");
}

#[test]
fn checkout_never_materialises_symbolic_links() {
    let repo = GitRepo::new("repo");
    std::os::unix::fs::symlink("/etc/passwd", repo.path().join("deploy/leak.yaml")).unwrap();
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "Link"]);
    let head = repo.head();
    let cache = tempfile::tempdir().unwrap();
    let fetcher = fetcher(&cache);
    let app = source("app", &repo.file_url(), branch("main"), Credentials::None);
    fetcher.fetch(&app).unwrap();

    let dir = fetcher.checkout(&app.id, &head, "deploy").unwrap();

    assert!(dir.join("app.yaml").is_file());
    assert!(std::fs::symlink_metadata(dir.join("leak.yaml")).is_err());
}

#[test]
fn checkout_refuses_missing_escaping_and_file_sub_paths_and_unfetched_commits() {
    let repo = GitRepo::new("repo");
    let head = repo.head();
    let cache = tempfile::tempdir().unwrap();
    let fetcher = fetcher(&cache);
    let app = source("app", &repo.file_url(), branch("main"), Credentials::None);

    let before_fetch = fetcher.checkout(&app.id, &head, "deploy").unwrap_err();
    assert!(
        matches!(before_fetch.kind(), CheckoutErrorKind::NotFetched),
        "{before_fetch}"
    );
    fetcher.fetch(&app).unwrap();

    let cases = [
        ("absent", "SubPathNotFound"),
        ("deploy/../..", "UnsafePath"),
        ("deploy/app.yaml", "SubPathNotADirectory"),
    ];
    for (sub_path, expected) in cases {
        let err = fetcher.checkout(&app.id, &head, sub_path).unwrap_err();
        assert!(
            format!("{:?}", err.kind()).starts_with(expected),
            "{sub_path}: {err}"
        );
    }
    let unknown = "0123456789abcdef0123456789abcdef01234567";
    let err = fetcher.checkout(&app.id, unknown, "").unwrap_err();
    assert_kind!(err, CheckoutErrorKind::NotFetched);
}
