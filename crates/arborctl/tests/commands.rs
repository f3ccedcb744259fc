//! The remote commands, run as the real binary against fake controllers on loopback.

mod fakes;

use fakes::{COMMIT, FakeServer, Options, all_services_at, arborctl, stderr, stdout};

/// Starts the fakes with `options`, runs arborctl with `command` pointed at them for every
/// service, stops the fakes; returns the output and the fakes' address.
async fn run_with_fakes(options: Options, command: &[&str]) -> (std::process::Output, String) {
    let server = FakeServer::start(options).await;
    let address = server.plain_address();
    let mut args: Vec<String> = command.iter().map(|arg| (*arg).to_owned()).collect();
    args.extend(all_services_at(&address));
    let output = arborctl(&args).await;
    server.stop().await;
    (output, address)
}

#[tokio::test]
async fn status_prints_a_row_per_source_then_conditions_and_coded_errors() {
    let (output, _) = run_with_fakes(Options::default(), &["status"]).await;

    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "SOURCE                    STATE    COMMIT        DISCOVERED  APPLIED  IGNORED  IN-SYNC  ERRORS  LAST SYNC"
    );
    // The stalled source first: an operator reads what needs them at the top.
    assert_eq!(
        lines[1],
        "ClusterGitTrack/platform  Failing  fedcba987654  3           2        0        2        1       2023-11-14T22:13:20Z"
    );
    assert_eq!(
        lines[2],
        "GitTrack/team-a/apps      Ready    0123456789ab  12          10       2        9        0       2023-11-14T22:13:20Z"
    );
    assert!(
        !text.contains('\u{1b}'),
        "no colours when stdout is not a terminal: {text}"
    );
    assert!(
        text.contains("    Ready=True Synced: applied 10 objects\n"),
        "{text}"
    );
    assert!(
        text.contains("    legacy/job.yaml: kind Job is not synced\n"),
        "{text}"
    );
    assert!(
        text.contains("    ARB1001 cluster/role.yaml ClusterRole/admin: declared twice\n"),
        "{text}"
    );
}

#[tokio::test]
async fn status_as_json_carries_every_field_of_the_named_source() {
    let (output, _) = run_with_fakes(
        Options::default(),
        &["status", "GitTrack/team-a/apps", "-o", "json"],
    )
    .await;

    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let sources = json["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 1, "the filter reached the server: {json}");
    let source = &sources[0];
    assert_eq!(source["source"]["ref"], "GitTrack/team-a/apps");
    assert_eq!(source["source"]["kind"], "GIT_TRACK");
    assert_eq!(source["observedCommit"], COMMIT);
    assert_eq!(source["counters"]["discovered"], 12);
    assert_eq!(source["counters"]["inSync"], 9);
    assert_eq!(source["conditions"][0]["reason"], "Synced");
    assert_eq!(
        source["ignoredFiles"]["legacy/job.yaml"],
        "kind Job is not synced"
    );
    assert_eq!(source["lastSyncTime"], "2023-11-14T22:13:20Z");
}

#[tokio::test]
async fn status_as_yaml_is_a_document_with_the_sources() {
    let (output, _) = run_with_fakes(
        Options::default(),
        &["status", "ClusterGitTrack/platform", "-o", "yaml"],
    )
    .await;

    assert!(output.status.success(), "{}", stderr(&output));
    let yaml: serde_json::Value = serde_saphyr::from_str(&stdout(&output)).unwrap();
    assert_eq!(yaml["sources"][0]["errors"][0]["code"], "ARB1001");
}

#[tokio::test]
async fn tree_draws_three_levels_with_markers_and_a_legend() {
    let (output, _) = run_with_fakes(Options::default(), &["tree"]).await;

    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "\
root-a
├── team-a
│   ├── team-a-dev [s]
│   └── team-a-prod
└── team-b [s] [cycle]
web (template)
└── shop [i]

[s] created from a SubNamespace
[i] follows a template
[cycle] halted: its parent chain is a cycle
"
    );
}

#[tokio::test]
async fn tree_from_a_namespace_draws_only_its_subtree() {
    let (output, _) = run_with_fakes(Options::default(), &["tree", "team-a"]).await;

    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "team-a\n├── team-a-dev [s]\n└── team-a-prod\n\n[s] created from a SubNamespace\n"
    );
}

#[tokio::test]
async fn explain_names_the_source_the_row_the_reason_and_the_propagation_rule() {
    let (output, _) = run_with_fakes(
        Options::default(),
        &["explain", "ConfigMap/team-a-dev/settings"],
    )
    .await;

    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("State:       DRIFTED\n"), "{text}");
    assert!(
        text.contains(&format!(
            "  GitTrack/team-a/apps file config/settings.yaml at commit {COMMIT}\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(
            "Inputs:      sync declared=yes resource declared=yes on cluster=yes has label=yes matches=no\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "Decision:    UPDATE (seeds/000 row 2): labelled and differs from the declaration\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("  copy of ConfigMap/team-a/settings (mode UPDATE, in sync)\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "  team-a-dev: NONE (seeds/001 sub-namespace 3): the copy equals its origin\n"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn explain_as_json_has_the_decision_and_the_copy_origin() {
    let (output, _) = run_with_fakes(
        Options::default(),
        &["explain", "ConfigMap/team-a-dev/settings", "-o", "json"],
    )
    .await;

    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["decision"]["rule"], "seeds/000 row 2");
    assert_eq!(json["inputs"]["matches"], false);
    assert_eq!(json["propagation"]["copy"]["from"], "team-a");
    assert_eq!(
        json["propagation"]["targets"][0]["decision"]["rule"],
        "seeds/001 sub-namespace 3"
    );
}

#[tokio::test]
async fn explain_without_arbor_hierarchy_prints_the_git_answer_and_warns() {
    let server = FakeServer::start(Options::default()).await;
    let output = arborctl(&[
        "explain",
        "ConfigMap/team-a-dev/settings",
        "--gitsync-addr",
        &server.plain_address(),
        "--hierarchy-addr",
        "http://127.0.0.1:1",
    ])
    .await;
    server.stop().await;

    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("Decision:    UPDATE (seeds/000 row 2)"));
    assert!(!stdout(&output).contains("Propagation:"));
    assert!(
        stderr(&output).starts_with(
            "warning: propagation not explained: cannot reach HierarchyService (arbor-hierarchy) at http://127.0.0.1:1: connection refused"
        ),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn explain_of_an_unknown_object_reports_the_service_and_the_status() {
    let (output, address) =
        run_with_fakes(Options::default(), &["explain", "Secret/team-a/nope"]).await;

    assert!(!output.status.success());
    assert_eq!(
        stderr(&output),
        format!(
            "error: SyncService (arbor-gitsync) at {address}: Explain failed: NotFound: no such object\n"
        )
    );
}

#[tokio::test]
async fn sync_waits_for_the_round_and_prints_the_commit() {
    let (output, _) = run_with_fakes(Options::default(), &["sync", "GitTrack/team-a/apps"]).await;

    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        format!(
            "GitTrack/team-a/apps synced commit {COMMIT}: 12 discovered, 10 applied, 2 ignored, 9 in sync\n"
        )
    );
}

#[tokio::test]
async fn sync_without_waiting_says_the_round_is_queued() {
    let (output, _) = run_with_fakes(
        Options::default(),
        &["sync", "GitTrack/team-a/apps", "--no-wait"],
    )
    .await;

    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        format!("GitTrack/team-a/apps sync queued; current commit {COMMIT}\n")
    );
}

#[tokio::test]
async fn sync_with_source_errors_prints_them_and_fails() {
    let (output, _) =
        run_with_fakes(Options::default(), &["sync", "ClusterGitTrack/platform"]).await;

    assert!(!output.status.success());
    let text = stdout(&output);
    assert!(
        text.starts_with("ClusterGitTrack/platform synced commit fedcba9876543210:"),
        "{text}"
    );
    assert!(
        text.contains("ARB1001 cluster/role.yaml ClusterRole/admin: declared twice"),
        "{text}"
    );
    assert!(
        stderr(&output).contains("ClusterGitTrack/platform synced with 1 error(s)"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn sync_refuses_a_malformed_source_before_connecting() {
    let output = arborctl(&[
        "sync",
        "GitTrack/only-a-name",
        "--gitsync-addr",
        "http://127.0.0.1:1",
    ])
    .await;

    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("expected GitTrack/<namespace>/<name> or ClusterGitTrack/<name>"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn drift_prints_one_line_per_streamed_event_until_the_stream_ends() {
    let (output, _) = run_with_fakes(Options::default(), &["drift", "--include-managed"]).await;

    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "\
2023-11-14T22:13:20Z MODIFIED Deployment.apps/shop/web fields=spec.replicas,metadata.labels.team reporter=arbor-observer application=Application.arbor.dev/shop/storefront
2023-11-14T22:13:20Z DELETED ConfigMap/team-a/settings reporter=arbor-observer source=GitTrack/team-a/apps
"
    );
}

#[tokio::test]
async fn drift_stops_at_the_timeout_on_an_open_stream_and_prints_json_lines() {
    let (output, _) = run_with_fakes(
        Options {
            keep_drift_open: true,
            ..Options::default()
        },
        &["drift", "--timeout", "1s", "-o", "json"],
    )
    .await;

    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    // Without --include-managed the fake leaves out the git-managed event.
    assert_eq!(events.len(), 1, "{text}");
    assert_eq!(events[0]["kind"], "MODIFIED");
    assert_eq!(events[0]["changedFields"][0], "spec.replicas");
}

#[tokio::test]
async fn an_unreachable_service_is_named_with_its_address_and_fails() {
    // Bind and drop a listener: the port was free a moment ago and nobody listens on it now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address = format!("http://127.0.0.1:{port}");
    let output = arborctl(&["tree", "--hierarchy-addr", &address]).await;

    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output),
        format!(
            "error: cannot reach HierarchyService (arbor-hierarchy) at {address}: connection refused (is it running? set its address with --hierarchy-addr)\n"
        )
    );

    let verbose = arborctl(&["tree", "--hierarchy-addr", &address, "--verbose"]).await;
    assert!(
        stderr(&verbose).contains("  caused by: "),
        "--verbose keeps the chain: {}",
        stderr(&verbose)
    );
}

#[tokio::test]
async fn plaintext_to_a_remote_host_is_refused_with_the_service_named() {
    let output = arborctl(&[
        "status",
        "--gitsync-addr",
        "http://gitsync.arbor-system.svc:9090",
    ])
    .await;

    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(
        message.starts_with(
            "error: cannot connect to SyncService (arbor-gitsync) at http://gitsync.arbor-system.svc:9090:"
        ),
        "{message}"
    );
    assert!(message.contains("only allowed on loopback"), "{message}");
}

#[tokio::test]
async fn the_kubectl_plugin_is_the_same_cli_named_kubectl_arbor() {
    let server = FakeServer::start(Options::default()).await;
    let address = server.plain_address();
    let plugin = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-arbor"))
        .args(["tree", "team-a", "--hierarchy-addr", &address])
        // The machine user's own contexts (the demo writes one) stay out of the test.
        .env("ARBORCONFIG", "/dev/null")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(std::time::Duration::from_secs(60), plugin)
        .await
        .expect("kubectl-arbor finishes")
        .expect("kubectl-arbor runs");
    server.stop().await;

    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).starts_with("team-a\n├── team-a-dev [s]\n"));

    let help = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-arbor"))
        .args(["status", "--help"])
        .output()
        .await
        .expect("kubectl-arbor runs");
    let usage = stdout(&help);
    assert!(usage.contains("Usage: kubectl arbor status"), "{usage}");
}

#[tokio::test]
async fn the_new_subcommands_appear_in_shell_completions() {
    let output = arborctl(&["completions", "bash"]).await;

    assert!(output.status.success(), "{}", stderr(&output));
    let script = stdout(&output);
    for subcommand in ["status", "tree", "explain", "drift", "sync"] {
        assert!(
            script.contains(&format!("arborctl,{subcommand})")),
            "{subcommand}"
        );
    }
    assert!(script.contains("--gitsync-addr"));
}
