//! The `arbor-kube-emu` binary driven by kubectl: HTTPS, a token file, the kubeconfig it writes,
//! and the commands people type.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const PATIENCE: Duration = Duration::from_secs(60);
const KUBECTL: &str = "kubectl";

/// The running binary; killed on drop so a failing test leaves nothing behind.
struct Server {
    child: Child,
    url: String,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads one line from `reader` on a helper thread, bounded by `PATIENCE`.
fn read_line_bounded<R: Read + Send + 'static>(reader: R) -> (String, BufReader<R>) {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(reader);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        let _ = sender.send((line, reader));
    });
    receiver.recv_timeout(PATIENCE).expect("a line in time")
}

fn start_server() -> Server {
    start_server_with(|_| Vec::new())
}

/// Starts the binary with extra arguments, which may name files written into its directory.
fn start_server_with(extra_args: impl FnOnce(&Path) -> Vec<String>) -> Server {
    let dir = tempfile::tempdir().expect("temp dir");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        "s3cret,admin,1,\"system:masters\"\nother,bob,2\nrobot,system:serviceaccount:arbor-system:arbor-hierarchy,3\n",
    )
    .expect("token file");
    let kubeconfig = dir.path().join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_arbor-kube-emu"))
        .args(["--listen", "127.0.0.1:0", "--tls", "--kubeconfig-out"])
        .arg(&kubeconfig)
        .arg("--token-file")
        .arg(&tokens)
        .args(extra_args(dir.path()))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the binary starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let (line, _) = read_line_bounded(stdout);
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    Server {
        child,
        url,
        kubeconfig,
        _dir: dir,
    }
}

fn kubectl_command(kubeconfig: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(KUBECTL);
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env("KUBECACHEDIR", kubeconfig.with_file_name("kube-cache"));
    command
}

/// Runs kubectl; panics with its output when it fails.
fn kubectl(server: &Server, args: &[&str]) -> String {
    kubectl_with_input(server, args, None)
}

fn kubectl_with_input(server: &Server, args: &[&str], input: Option<&str>) -> String {
    let output = run_kubectl(server, args, input);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "kubectl {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Runs kubectl with `input` on its standard input, whatever the outcome.
fn run_kubectl(server: &Server, args: &[&str], input: Option<&str>) -> std::process::Output {
    let mut command = kubectl_command(&server.kubeconfig, args);
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap_or_else(|error| {
        panic!("running {KUBECTL} (install Debian's kubernetes-client): {error}")
    });
    if let Some(input) = input {
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("written");
    } else {
        drop(child.stdin.take());
    }
    child.wait_with_output().expect("kubectl finishes")
}

const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
"#;

#[test]
fn kubectl_drives_the_binary() {
    let server = start_server();
    assert!(
        server.url.starts_with("https://127.0.0.1:"),
        "{}",
        server.url
    );

    let allowed = kubectl(&server, &["auth", "can-i", "create", "configmaps"]);
    assert_eq!(allowed.trim(), "yes");

    let namespaces = kubectl(&server, &["get", "namespaces"]);
    assert!(
        namespaces.contains("default") && namespaces.contains("Active"),
        "{namespaces}"
    );

    kubectl(
        &server,
        &["create", "configmap", "demo", "--from-literal=a=1"],
    );
    kubectl(
        &server,
        &["create", "secret", "generic", "token", "--from-literal=t=x"],
    );
    kubectl(&server, &["create", "namespace", "team"]);
    let created = kubectl(
        &server,
        &["get", "configmap", "demo", "-o", "jsonpath={.data.a}"],
    );
    assert_eq!(created, "1");

    let manifest = |value: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  key: {value}\n"
        )
    };
    let first = kubectl_with_input(&server, &["apply", "-f", "-"], Some(&manifest("one")));
    assert!(first.contains("configmap/applied created"), "{first}");
    let second = kubectl_with_input(&server, &["apply", "-f", "-"], Some(&manifest("two")));
    assert!(second.contains("configmap/applied configured"), "{second}");
    let value = kubectl(
        &server,
        &["get", "configmap", "applied", "-o", "jsonpath={.data.key}"],
    );
    assert_eq!(value, "two");

    let server_side = kubectl_with_input(
        &server,
        &[
            "apply",
            "--server-side",
            "--field-manager=arbor-test",
            "-f",
            "-",
        ],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  key: v\n"),
    );
    assert!(
        server_side.contains("configmap/ssa serverside-applied"),
        "{server_side}"
    );

    kubectl(&server, &["label", "configmap", "demo", "team=a"]);
    kubectl(&server, &["annotate", "configmap", "demo", "note=hello"]);
    let labelled = kubectl(
        &server,
        &["get", "configmaps", "-l", "team=a", "-o", "name"],
    );
    assert_eq!(labelled.trim(), "configmap/demo");
    let note = kubectl(
        &server,
        &[
            "get",
            "configmap",
            "demo",
            "-o",
            "jsonpath={.metadata.annotations.note}",
        ],
    );
    assert_eq!(note, "hello");

    kubectl_with_input(&server, &["apply", "-f", "-"], Some(WIDGET_CRD));
    let resources = kubectl(&server, &["api-resources"]);
    assert!(
        resources
            .lines()
            .any(|line| line.starts_with("widgets") && line.contains("example.com/v1")),
        "{resources}"
    );
    kubectl_with_input(
        &server,
        &["apply", "-f", "-"],
        Some("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 3\n"),
    );
    let widgets = kubectl(&server, &["get", "wd"]);
    assert!(
        widgets.contains("SIZE") && widgets.contains("w1") && widgets.contains('3'),
        "{widgets}"
    );

    let deleted = kubectl(&server, &["delete", "configmap", "demo"]);
    assert!(deleted.contains("configmap \"demo\" deleted"), "{deleted}");
    let remaining = kubectl(&server, &["get", "configmaps", "-o", "name"]);
    assert!(!remaining.contains("configmap/demo"), "{remaining}");
}

#[test]
fn kubectl_get_watch_streams_changes() {
    let server = start_server();
    let mut watch = kubectl_command(
        &server.kubeconfig,
        &["get", "configmaps", "-w", "--output-watch-events"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit())
    .spawn()
    .expect("kubectl starts");
    let stdout = watch.stdout.take().expect("piped stdout");
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    // The watch is running once kubectl has printed its (possibly empty) initial listing; a
    // create repeated until it is seen covers the window before that.
    let mut seen = false;
    for attempt in 0..20 {
        let name = format!("watched-{attempt}");
        kubectl(&server, &["create", "configmap", &name]);
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        while let Ok(line) =
            receiver.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
        {
            if line.contains("ADDED") && line.contains("watched-") {
                seen = true;
                break;
            }
        }
        if seen {
            break;
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(seen, "kubectl get -w never printed the new ConfigMap");
}

#[test]
fn the_binary_stops_on_sigterm() {
    let mut server = start_server();
    let pid = server.child.id().to_string();
    let status = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let deadline = std::time::Instant::now() + PATIENCE;
    let exit = loop {
        if let Some(exit) = server.child.try_wait().expect("waitable") {
            break exit;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the binary did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "{exit:?}");
}

#[test]
fn deny_rules_from_a_file_forbid_a_service_account_and_can_i_says_no() {
    let server = start_server_with(|dir| {
        let rules = dir.join("deny.yaml");
        std::fs::write(
            &rules,
            "rules:\n  - users: [\"system:serviceaccount:arbor-system:arbor-hierarchy\"]\n    verbs: [delete]\n    resources: [secrets]\n    namespaces: [\"*\"]\n",
        )
        .expect("rules file");
        vec![
            "--deny-rules".into(),
            rules.display().to_string(),
            "--service-address".into(),
            "arbor-system/arbor-webhook:8443=127.0.0.1:9443".into(),
        ]
    });
    let as_robot = |args: &[&str]| {
        let mut all = vec!["--token", "robot"];
        all.extend_from_slice(args);
        kubectl_command(&server.kubeconfig, &all)
            .output()
            .expect("kubectl runs")
    };
    let can_i = as_robot(&["auth", "can-i", "delete", "secrets", "-n", "default"]);
    let answer = String::from_utf8_lossy(&can_i.stdout);
    assert!(
        answer.starts_with("no - denied by the arbor-kube-emu rule"),
        "{answer}"
    );
    let can_get = as_robot(&["auth", "can-i", "get", "secrets", "-n", "default"]);
    assert_eq!(String::from_utf8_lossy(&can_get.stdout).trim(), "yes");
    kubectl(
        &server,
        &["create", "secret", "generic", "key", "--from-literal=a=b"],
    );
    let delete = as_robot(&["delete", "secret", "key", "-n", "default"]);
    assert!(!delete.status.success());
    let stderr = String::from_utf8_lossy(&delete.stderr);
    assert!(
        stderr.contains(
            "Error from server (Forbidden): secrets \"key\" is forbidden: User \"system:serviceaccount:arbor-system:arbor-hierarchy\" cannot delete resource \"secrets\" in API group \"\" in the namespace \"default\""
        ),
        "{stderr}"
    );
}

#[test]
fn rbac_enforced_kubectl_can_i_and_a_forbidden_get_read_as_against_kube_apiserver() {
    let server = start_server_with(|_| vec!["--authorization".into(), "rbac".into()]);
    let as_bob = |args: &[&str]| {
        let mut all = vec!["--token", "other"];
        all.extend_from_slice(args);
        kubectl_command(&server.kubeconfig, &all)
            .output()
            .expect("kubectl runs")
    };
    let stdout =
        |output: &std::process::Output| String::from_utf8_lossy(&output.stdout).trim().to_owned();
    kubectl(
        &server,
        &["create", "configmap", "settings", "--from-literal=a=b"],
    );
    assert_eq!(
        stdout(&as_bob(&["auth", "can-i", "get", "configmaps"])),
        "no"
    );
    let get = as_bob(&["get", "configmap", "settings"]);
    assert!(!get.status.success());
    let stderr = String::from_utf8_lossy(&get.stderr);
    assert!(
        stderr.contains(
            "Error from server (Forbidden): configmaps \"settings\" is forbidden: User \"bob\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"default\""
        ),
        "{stderr}"
    );
    let list = as_bob(&["get", "configmaps", "-A"]);
    let stderr = String::from_utf8_lossy(&list.stderr);
    assert!(
        stderr.contains(
            "configmaps is forbidden: User \"bob\" cannot list resource \"configmaps\" in API group \"\" at the cluster scope"
        ),
        "{stderr}"
    );
    // The admin grants with kubectl's own generators; the binding works at once.
    kubectl(
        &server,
        &[
            "create",
            "role",
            "reader",
            "--verb=get",
            "--resource=configmaps",
        ],
    );
    kubectl(
        &server,
        &[
            "create",
            "rolebinding",
            "reader",
            "--role=reader",
            "--user=bob",
        ],
    );
    assert_eq!(
        stdout(&as_bob(&["auth", "can-i", "get", "configmaps"])),
        "yes"
    );
    assert_eq!(
        stdout(&as_bob(&["auth", "can-i", "list", "configmaps"])),
        "no"
    );
    assert_eq!(
        stdout(&as_bob(&[
            "auth",
            "can-i",
            "get",
            "configmaps",
            "-n",
            "kube-system"
        ])),
        "no"
    );
    assert!(as_bob(&["get", "configmap", "settings"]).status.success());
    let listing = as_bob(&["auth", "can-i", "--list"]);
    let listed = stdout(&listing);
    assert!(
        listed
            .lines()
            .any(|line| line.starts_with("configmaps ") && line.ends_with("[get]")),
        "{listed}{}",
        String::from_utf8_lossy(&listing.stderr)
    );
    // The admin asks on bob's behalf by impersonation; bob may not impersonate.
    assert_eq!(
        kubectl(
            &server,
            &["auth", "can-i", "get", "configmaps", "--as", "bob"]
        )
        .trim(),
        "yes"
    );
    let impersonating = as_bob(&["get", "configmap", "settings", "--as", "admin"]);
    let stderr = String::from_utf8_lossy(&impersonating.stderr);
    assert!(
        stderr.contains(
            "users \"admin\" is forbidden: User \"bob\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        ),
        "{stderr}"
    );
    // Aggregated bootstrap roles: binding `view` lets the robot list pods in default.
    let robot = |args: &[&str]| {
        let mut all = vec!["--token", "robot"];
        all.extend_from_slice(args);
        stdout(
            &kubectl_command(&server.kubeconfig, &all)
                .output()
                .expect("kubectl runs"),
        )
    };
    assert_eq!(robot(&["auth", "can-i", "list", "pods"]), "no");
    kubectl(
        &server,
        &[
            "create",
            "rolebinding",
            "robot-view",
            "--clusterrole=view",
            "--serviceaccount=arbor-system:arbor-hierarchy",
        ],
    );
    assert_eq!(robot(&["auth", "can-i", "list", "pods"]), "yes");
    assert_eq!(robot(&["auth", "can-i", "delete", "pods"]), "no");
}

/// Runs kubectl expecting a refusal; its stderr.
fn kubectl_refused(server: &Server, args: &[&str], input: &str) -> String {
    let output = run_kubectl(server, args, Some(input));
    assert!(
        !output.status.success(),
        "kubectl {args:?} succeeded: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn cluster_git_track(spec: &str) -> String {
    format!(
        "apiVersion: arbor.dev/v1alpha1\nkind: ClusterGitTrack\nmetadata:\n  name: demo\n{spec}"
    )
}

#[test]
fn kubectl_apply_meets_the_schema_refusals_of_arbors_crd() {
    let server = start_server();
    kubectl_with_input(
        &server,
        &["apply", "-f", "-"],
        Some(include_str!(
            "../../../charts/arbor/crds/clustergittracks.arbor.dev.yaml"
        )),
    );
    let apply = ["apply", "-f", "-"];
    let string_reference = kubectl_refused(
        &server,
        &apply,
        &cluster_git_track("spec:\n  repository: file:///r\n  reference: main\n"),
    );
    assert!(
        string_reference.contains(
            "spec.reference: Invalid value: \"string\": spec.reference in body must be of type object: \"string\""
        ),
        "{string_reference}"
    );
    let no_spec = kubectl_refused(&server, &apply, &cluster_git_track(""));
    assert!(
        no_spec.contains("The ClusterGitTrack \"demo\" is invalid: spec: Required value"),
        "{no_spec}"
    );
    let outside_enum = kubectl_refused(
        &server,
        &apply,
        &cluster_git_track(
            "spec:\n  repository: file:///r\n  reference: {branch: main}\n  deletionPolicy: Keep\n",
        ),
    );
    assert!(
        outside_enum.contains(
            "spec.deletionPolicy: Unsupported value: \"Keep\": supported values: \"Delete\", \"Orphan\""
        ),
        "{outside_enum}"
    );
    // kubectl asks for strict field validation by default; --validate=warn gets a warning.
    let misplaced = cluster_git_track(
        "spec:\n  repository: file:///r\n  reference: {branch: main}\n  branch: main\n",
    );
    let strict = kubectl_refused(&server, &apply, &misplaced);
    assert!(
        strict.contains("strict decoding error: unknown field \"spec.branch\""),
        "{strict}"
    );
    let output = run_kubectl(
        &server,
        &["apply", "--validate=warn", "-f", "-"],
        Some(&misplaced),
    );
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("Warning: unknown field \"spec.branch\""),
        "{stderr}"
    );
    let stored = kubectl(
        &server,
        &[
            "get",
            "clustergittrack",
            "demo",
            "-o",
            "jsonpath={.spec.deletionPolicy}",
        ],
    );
    assert_eq!(
        stored, "Orphan",
        "the default (Orphan: deleting a source never empties a cluster by surprise) was filled in"
    );
}

#[test]
fn kubectl_scale_rollout_status_ready_columns_and_explain() {
    let server = start_server();
    kubectl(&server, &["create", "namespace", "shop"]);
    // `kubectl create deployment` sends protobuf, which this server reads for a few kinds only.
    kubectl_with_input(
        &server,
        &["apply", "-n", "shop", "-f", "-"],
        Some(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: nginx}\nspec:\n  selector: {matchLabels: {app: nginx}}\n  template:\n    metadata: {labels: {app: nginx}}\n    spec: {containers: [{name: nginx, image: nginx}]}\n",
        ),
    );
    let scaled = kubectl(
        &server,
        &[
            "scale",
            "deployment",
            "nginx",
            "-n",
            "shop",
            "--replicas",
            "5",
        ],
    );
    assert!(scaled.contains("deployment.apps/nginx scaled"), "{scaled}");
    let replicas = kubectl(
        &server,
        &[
            "get",
            "deployment",
            "nginx",
            "-n",
            "shop",
            "-o",
            "jsonpath={.spec.replicas} {.metadata.generation}",
        ],
    );
    assert_eq!(replicas, "5 2");
    // The deployment controller's report, as it would write it once the pods are up.
    kubectl(
        &server,
        &[
            "patch",
            "deployment",
            "nginx",
            "-n",
            "shop",
            "--subresource",
            "status",
            "--type",
            "merge",
            "-p",
            r#"{"status":{"observedGeneration":2,"replicas":5,"updatedReplicas":5,"readyReplicas":5,"availableReplicas":5,"conditions":[{"type":"Available","status":"True","reason":"MinimumReplicasAvailable"},{"type":"Progressing","status":"True","reason":"NewReplicaSetAvailable"}]}}"#,
        ],
    );
    let rollout = kubectl(
        &server,
        &[
            "rollout",
            "status",
            "deployment/nginx",
            "-n",
            "shop",
            "--timeout",
            "10s",
        ],
    );
    assert!(rollout.contains("successfully rolled out"), "{rollout}");
    kubectl_with_input(
        &server,
        &["apply", "-f", "-"],
        Some(include_str!(
            "../../../charts/arbor/crds/clustergittracks.arbor.dev.yaml"
        )),
    );
    kubectl_with_input(
        &server,
        &["apply", "-f", "-"],
        Some(&cluster_git_track(
            "spec:\n  repository: file:///r\n  reference: {branch: main}\n",
        )),
    );
    kubectl(
        &server,
        &[
            "patch",
            "clustergittrack",
            "demo",
            "--subresource",
            "status",
            "--type",
            "merge",
            "-p",
            r#"{"status":{"conditions":[{"type":"Reconciling","status":"False","reason":"Done","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"},{"type":"Ready","status":"True","reason":"Synced","message":"","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}"#,
        ],
    );
    let table = kubectl(&server, &["get", "clustergittracks"]);
    // Columns are aligned: the READY cell sits under its header (COMMIT is empty here).
    let header = table.lines().next().unwrap_or_default();
    let row = table.lines().nth(1).unwrap_or_default();
    let ready = header.find("READY").expect("a READY column");
    assert_eq!(row.get(ready..ready + 4), Some("True"), "{table}");
    let explained = kubectl(&server, &["explain", "clustergittrack.spec"]);
    assert!(explained.contains("reference"), "{explained}");
    assert!(
        explained.contains("exactly one of branch, tag or commit"),
        "{explained}"
    );
}

#[test]
fn kubectl_create_role_and_bindings_send_protobuf_the_server_reads() {
    let server = start_server();
    kubectl(
        &server,
        &[
            "create",
            "role",
            "reader",
            "--verb=get,list",
            "--resource=configmaps",
        ],
    );
    kubectl(
        &server,
        &[
            "create",
            "rolebinding",
            "reader",
            "--role=reader",
            "--user=alice",
        ],
    );
    kubectl(
        &server,
        &[
            "create",
            "clusterrole",
            "watcher",
            "--verb=watch",
            "--resource=pods",
        ],
    );
    kubectl(
        &server,
        &[
            "create",
            "clusterrolebinding",
            "watcher",
            "--clusterrole=watcher",
            "--group=team",
        ],
    );
    let rules = kubectl(
        &server,
        &[
            "get",
            "role",
            "reader",
            "-o",
            "jsonpath={.rules[0].verbs} {.rules[0].resources}",
        ],
    );
    assert_eq!(rules, r#"["get","list"] ["configmaps"]"#);
    let subject = kubectl(
        &server,
        &[
            "get",
            "clusterrolebinding",
            "watcher",
            "-o",
            "jsonpath={.subjects[0].kind}/{.subjects[0].name} {.roleRef.name}",
        ],
    );
    assert_eq!(subject, "Group/team watcher");
}

#[test]
fn kubectl_sees_the_kubernetes_service_api_services_and_events_of_either_api() {
    let server = start_server();
    let service = kubectl(
        &server,
        &[
            "get",
            "service",
            "kubernetes",
            "-n",
            "default",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ],
    );
    assert_eq!(service, "10.96.0.1");
    let api_services = kubectl(&server, &["get", "apiservices", "-o", "name"]);
    assert!(
        api_services.contains("apiservice.apiregistration.k8s.io/v1.apps\n"),
        "{api_services}"
    );

    // An Event written through events.k8s.io/v1 is what `kubectl get events` lists.
    kubectl_with_input(
        &server,
        &["create", "-f", "-"],
        Some(
            r#"
apiVersion: events.k8s.io/v1
kind: Event
metadata: {name: web.1, namespace: default}
eventTime: "2026-01-01T00:00:00.000000Z"
regarding: {apiVersion: v1, kind: Pod, name: web, namespace: default}
note: pulled the image of web
reason: Pulled
type: Normal
action: Pull
reportingController: example.com/puller
reportingInstance: puller-1
"#,
        ),
    );
    let listed = kubectl(&server, &["get", "events", "-n", "default", "-o", "name"]);
    assert_eq!(listed, "event/web.1\n");
    let core = kubectl(
        &server,
        &[
            "get",
            "events.v1.",
            "web.1",
            "-n",
            "default",
            "-o",
            "jsonpath={.apiVersion} {.message} {.involvedObject.name}",
        ],
    );
    assert_eq!(core, "v1 pulled the image of web web");
    let table = kubectl(&server, &["get", "events", "-n", "default"]);
    assert!(table.contains("Pulled"), "{table}");
    assert!(table.contains("pod/web"), "{table}");
    assert!(table.contains("pulled the image of web"), "{table}");
}

#[test]
fn kubectl_explain_describes_built_in_kinds() {
    let server = start_server();
    let spec = kubectl(&server, &["explain", "deployment.spec"]);
    assert!(spec.contains("KIND:       Deployment"), "{spec}");
    assert!(spec.contains("FIELD: spec <DeploymentSpec>"), "{spec}");
    assert!(spec.contains("replicas\t<integer>"), "{spec}");
    let image = kubectl(&server, &["explain", "pod.spec.containers.image"]);
    assert!(image.contains("Container image name."), "{image}");
    let note = kubectl(
        &server,
        &["explain", "events.note", "--api-version=events.k8s.io/v1"],
    );
    assert!(note.contains("GROUP:      events.k8s.io"), "{note}");
    // The custom kinds' schemas are still there beside them.
    kubectl_with_input(&server, &["apply", "-f", "-"], Some(WIDGET_CRD));
    let widget = kubectl(&server, &["explain", "widgets"]);
    assert!(widget.contains("KIND:       Widget"), "{widget}");
}

#[test]
fn kubectl_create_deployment_service_job_and_cronjob_send_protobuf_the_server_reads() {
    let server = start_server();
    kubectl(
        &server,
        &[
            "create",
            "deployment",
            "nginx",
            "--image=nginx:1.27",
            "--port=80",
            "--replicas=2",
        ],
    );
    kubectl(
        &server,
        &[
            "create",
            "deployment",
            "idle",
            "--image=busybox",
            "--replicas=0",
            "--",
            "sleep",
            "10",
        ],
    );
    kubectl(
        &server,
        &["create", "service", "clusterip", "web", "--tcp=80:8080"],
    );
    kubectl(
        &server,
        &[
            "create",
            "job",
            "once",
            "--image=busybox",
            "--",
            "echo",
            "hi",
        ],
    );
    kubectl(
        &server,
        &[
            "create",
            "cronjob",
            "tick",
            "--image=busybox",
            "--schedule=*/5 * * * *",
        ],
    );
    let deployment = kubectl(
        &server,
        &[
            "get",
            "deployment",
            "nginx",
            "-o",
            "jsonpath={.spec.replicas} {.spec.selector.matchLabels.app} {.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].ports[0].containerPort} {.spec.strategy.type}",
        ],
    );
    assert_eq!(deployment, "2 nginx nginx:1.27 80 RollingUpdate");
    // An explicit zero of a pointer field is the client's value, not a default.
    let idle = kubectl(
        &server,
        &[
            "get",
            "deployment",
            "idle",
            "-o",
            "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].command}",
        ],
    );
    assert_eq!(idle, r#"0 ["sleep","10"]"#);
    let service = kubectl(
        &server,
        &[
            "get",
            "service",
            "web",
            "-o",
            "jsonpath={.spec.ports[0].port}:{.spec.ports[0].targetPort}",
        ],
    );
    assert_eq!(service, "80:8080");
    let job = kubectl(
        &server,
        &[
            "get",
            "job",
            "once",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].command}",
        ],
    );
    assert_eq!(job, r#"["echo","hi"]"#);
    let cron = kubectl(
        &server,
        &["get", "cronjob", "tick", "-o", "jsonpath={.spec.schedule}"],
    );
    assert_eq!(cron, "*/5 * * * *");
    kubectl(&server, &["scale", "deployment", "nginx", "--replicas=3"]);
}

#[test]
fn kubectl_create_token_issues_a_token_the_server_accepts() {
    let server = start_server();
    kubectl(&server, &["create", "serviceaccount", "robot"]);
    let token = kubectl(&server, &["create", "token", "robot", "--duration=1h"]);
    let token = token.trim();
    assert!(!token.is_empty());
    // The server requires known tokens (a token file): the issued one is known.
    let output = run_kubectl(&server, &["--token", token, "get", "configmaps"], None);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let refused = run_kubectl(&server, &["--token", "forged", "get", "configmaps"], None);
    assert!(!refused.status.success());
}

/// A kube-rs client of `server` (from the kubeconfig the binary wrote), with a runtime to drive it.
fn kube_client(server: &Server) -> (tokio::runtime::Runtime, kube::Client) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let client = runtime.block_on(async {
        let kubeconfig =
            kube::config::Kubeconfig::read_from(&server.kubeconfig).expect("kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("config");
        kube::Client::try_from(config).expect("client")
    });
    (runtime, client)
}

fn read_back<K>(runtime: &tokio::runtime::Runtime, api: &kube::Api<K>, name: &str) -> K
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    runtime
        .block_on(api.get(name))
        .unwrap_or_else(|error| panic!("reading {name} back: {error}"))
}

#[test]
fn every_kubectl_create_subcommand_succeeds_and_reads_back_as_kube_apiserver_stores_it() {
    use k8s_openapi::api::{
        batch::v1::{CronJob, Job},
        core::v1::{ConfigMap, Namespace, ResourceQuota, Secret, Service, ServiceAccount},
        networking::v1::Ingress,
        policy::v1::PodDisruptionBudget,
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
        scheduling::v1::PriorityClass,
    };
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use kube::Api;

    let server = start_server();
    let dir = tempfile::tempdir().expect("temp dir");
    let certified =
        rcgen::generate_simple_self_signed(vec!["shop.example.com".into()]).expect("a certificate");
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, certified.cert.pem()).expect("cert");
    std::fs::write(&key, certified.signing_key.serialize_pem()).expect("key");
    let (cert, key) = (cert.display(), key.display());
    let commands = [
        "create namespace shop".to_owned(),
        "create configmap settings -n shop --from-literal=mode=fast".into(),
        "create secret generic password -n shop --from-literal=value=s3cret".into(),
        format!("create secret tls site -n shop --cert={cert} --key={key}"),
        "create secret docker-registry pull -n shop --docker-server=registry.example.com --docker-username=u --docker-password=p".into(),
        "create serviceaccount robot -n shop".into(),
        "create token robot -n shop".into(),
        "create role reader -n shop --verb=get --resource=configmaps --resource-name=settings".into(),
        "create rolebinding reader -n shop --role=reader --serviceaccount=shop:robot".into(),
        "create clusterrole health --verb=get --non-resource-url=/healthz".into(),
        "create clusterrole monitoring --aggregation-rule=rbac.example.com/aggregate-to-monitoring=true".into(),
        "create clusterrolebinding health --clusterrole=health --group=ops".into(),
        "create deployment web -n shop --image=nginx:1.27 --port=80".into(),
        "create job once -n shop --image=busybox -- echo hi".into(),
        "create cronjob tick -n shop --image=busybox --schedule=@hourly".into(),
        "create job manual -n shop --from=cronjob/tick".into(),
        "create service clusterip web -n shop --tcp=80:8080".into(),
        "create service nodeport edge -n shop --tcp=443:8443".into(),
        "create service loadbalancer public -n shop --tcp=80:8080".into(),
        "create service externalname upstream -n shop --external-name=db.example.com".into(),
        "create priorityclass high --value=1000 --description=shop".into(),
        "create priorityclass floor --value=0 --preemption-policy=Never".into(),
        "create poddisruptionbudget web -n shop --selector=app=web --min-available=50%".into(),
        "create quota compute -n shop --hard=cpu=2,pods=10 --scopes=NotBestEffort".into(),
        "create ingress shop -n shop --class=nginx --rule=shop.example.com/api*=web:80,tls=site --default-backend=web:80".into(),
    ];
    for command in &commands {
        kubectl(&server, &command.split_whitespace().collect::<Vec<_>>());
    }

    let (runtime, client) = kube_client(&server);
    let shop = "shop";
    let namespace = read_back(&runtime, &Api::<Namespace>::all(client.clone()), "shop");
    assert_eq!(
        namespace.spec.and_then(|spec| spec.finalizers),
        Some(vec!["kubernetes".to_owned()])
    );
    assert_eq!(
        namespace.status.and_then(|status| status.phase).as_deref(),
        Some("Active")
    );
    let settings = read_back(
        &runtime,
        &Api::<ConfigMap>::namespaced(client.clone(), shop),
        "settings",
    );
    assert_eq!(settings.data.expect("data")["mode"], "fast");
    let secrets = Api::<Secret>::namespaced(client.clone(), shop);
    let password = read_back(&runtime, &secrets, "password");
    assert_eq!(password.type_.as_deref(), Some("Opaque"));
    assert_eq!(password.data.expect("data")["value"].0, b"s3cret");
    let site = read_back(&runtime, &secrets, "site");
    assert_eq!(site.type_.as_deref(), Some("kubernetes.io/tls"));
    let site_data = site.data.expect("data");
    assert!(String::from_utf8_lossy(&site_data["tls.crt"].0).contains("BEGIN CERTIFICATE"));
    assert!(site_data.contains_key("tls.key"));
    let pull = read_back(&runtime, &secrets, "pull");
    assert_eq!(
        pull.type_.as_deref(),
        Some("kubernetes.io/dockerconfigjson")
    );
    assert!(
        String::from_utf8_lossy(&pull.data.expect("data")[".dockerconfigjson"].0)
            .contains("registry.example.com")
    );
    read_back(
        &runtime,
        &Api::<ServiceAccount>::namespaced(client.clone(), shop),
        "robot",
    );

    let reader = read_back(
        &runtime,
        &Api::<Role>::namespaced(client.clone(), shop),
        "reader",
    );
    let rule = &reader.rules.expect("rules")[0];
    assert_eq!(rule.resource_names, Some(vec!["settings".to_owned()]));
    let binding = read_back(
        &runtime,
        &Api::<RoleBinding>::namespaced(client.clone(), shop),
        "reader",
    );
    let subject = &binding.subjects.expect("subjects")[0];
    assert_eq!(
        (subject.kind.as_str(), subject.namespace.as_deref()),
        ("ServiceAccount", Some("shop"))
    );
    let cluster_roles = Api::<ClusterRole>::all(client.clone());
    let health = read_back(&runtime, &cluster_roles, "health");
    assert_eq!(
        health.rules.expect("rules")[0].non_resource_urls,
        Some(vec!["/healthz".to_owned()])
    );
    let monitoring = read_back(&runtime, &cluster_roles, "monitoring");
    let selectors = monitoring
        .aggregation_rule
        .and_then(|rule| rule.cluster_role_selectors);
    assert_eq!(
        selectors.expect("selectors")[0]
            .match_labels
            .as_ref()
            .expect("labels")["rbac.example.com/aggregate-to-monitoring"],
        "true"
    );
    let health_binding = read_back(
        &runtime,
        &Api::<ClusterRoleBinding>::all(client.clone()),
        "health",
    );
    assert_eq!(health_binding.subjects.expect("subjects")[0].kind, "Group");

    let deployment = read_back(
        &runtime,
        &Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), shop),
        "web",
    );
    let spec = deployment.spec;
    assert_eq!(
        (
            spec.replicas,
            spec.revision_history_limit,
            spec.progress_deadline_seconds
        ),
        (Some(1), Some(10), Some(600))
    );

    // A Job: kube-apiserver's defaults and the selector it generates from the Job's uid.
    let jobs = Api::<Job>::namespaced(client.clone(), shop);
    let once = read_back(&runtime, &jobs, "once");
    let uid = once.metadata.uid.clone().expect("uid");
    let spec = once.spec.expect("spec");
    assert_eq!(
        (
            spec.parallelism,
            spec.completions,
            spec.backoff_limit,
            spec.suspend
        ),
        (Some(1), Some(1), Some(6), Some(false))
    );
    assert_eq!(spec.completion_mode.as_deref(), Some("NonIndexed"));
    assert_eq!(
        spec.pod_replacement_policy.as_deref(),
        Some("TerminatingOrFailed")
    );
    let selector = spec
        .selector
        .and_then(|selector| selector.match_labels)
        .expect("a selector");
    assert_eq!(selector["batch.kubernetes.io/controller-uid"], uid);
    let template_labels = spec
        .template
        .metadata
        .and_then(|meta| meta.labels)
        .expect("labels");
    for (key, value) in [
        ("batch.kubernetes.io/controller-uid", uid.as_str()),
        ("batch.kubernetes.io/job-name", "once"),
        ("controller-uid", uid.as_str()),
        ("job-name", "once"),
    ] {
        assert_eq!(template_labels[key], value, "{key}");
    }
    let pod = spec.template.spec.expect("pod spec");
    assert_eq!(
        (pod.restart_policy.as_deref(), pod.dns_policy.as_deref()),
        (Some("Never"), Some("ClusterFirst"))
    );
    let tick = read_back(
        &runtime,
        &Api::<CronJob>::namespaced(client.clone(), shop),
        "tick",
    );
    let cron = tick.spec;
    assert_eq!(cron.concurrency_policy.as_deref(), Some("Allow"));
    assert_eq!(
        (
            cron.suspend,
            cron.successful_jobs_history_limit,
            cron.failed_jobs_history_limit
        ),
        (Some(false), Some(3), Some(1))
    );
    // `--from=cronjob/...` sends the CronJob's template as the server stored it, and an owner.
    let manual = read_back(&runtime, &jobs, "manual");
    let owner = &manual.metadata.owner_references.expect("an owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("CronJob", Some(true))
    );
    assert_eq!(
        manual.metadata.annotations.expect("annotations")["cronjob.kubernetes.io/instantiate"],
        "manual"
    );

    let services = Api::<Service>::namespaced(client.clone(), shop);
    let web = read_back(&runtime, &services, "web").spec.expect("spec");
    assert_eq!(web.type_.as_deref(), Some("ClusterIP"));
    assert!(web.cluster_ip.is_some_and(|ip| ip.starts_with("10.")));
    let edge = read_back(&runtime, &services, "edge").spec.expect("spec");
    assert_eq!(edge.external_traffic_policy.as_deref(), Some("Cluster"));
    let node_port = edge.ports.expect("ports")[0]
        .node_port
        .expect("a node port");
    assert!((30000..=32767).contains(&node_port), "{node_port}");
    let public = read_back(&runtime, &services, "public");
    let spec = public.spec.expect("spec");
    assert_eq!(spec.allocate_load_balancer_node_ports, Some(true));
    assert!(spec.ports.expect("ports")[0].node_port.is_some());
    assert!(
        public
            .status
            .and_then(|status| status.load_balancer)
            .is_some()
    );
    let upstream = read_back(&runtime, &services, "upstream")
        .spec
        .expect("spec");
    assert_eq!(
        (
            upstream.type_.as_deref(),
            upstream.external_name.as_deref(),
            upstream.cluster_ip
        ),
        (Some("ExternalName"), Some("db.example.com"), None)
    );

    let priorities = Api::<PriorityClass>::all(client.clone());
    let high = read_back(&runtime, &priorities, "high");
    assert_eq!(
        (
            high.value,
            high.description.as_deref(),
            high.preemption_policy.as_deref()
        ),
        (Some(1000), Some("shop"), Some("PreemptLowerPriority"))
    );
    let floor = read_back(&runtime, &priorities, "floor");
    assert_eq!(
        (floor.value, floor.preemption_policy.as_deref()),
        (Some(0), Some("Never"))
    );

    let budget = read_back(
        &runtime,
        &Api::<PodDisruptionBudget>::namespaced(client.clone(), shop),
        "web",
    );
    let spec = budget.spec.expect("spec");
    assert_eq!(spec.min_available, Some(IntOrString::String("50%".into())));
    assert_eq!(
        spec.selector
            .and_then(|selector| selector.match_labels)
            .expect("labels")["app"],
        "web"
    );
    let status = budget.status.expect("a status, all zeros");
    assert_eq!(
        (status.disruptions_allowed, status.expected_pods),
        (Some(0), Some(0))
    );

    let quota = read_back(
        &runtime,
        &Api::<ResourceQuota>::namespaced(client.clone(), shop),
        "compute",
    );
    let spec = quota.spec.expect("spec");
    assert_eq!(spec.hard.expect("hard")["pods"].0, "10");
    assert_eq!(spec.scopes, Some(vec!["NotBestEffort".to_owned()]));

    let ingress = read_back(
        &runtime,
        &Api::<Ingress>::namespaced(client.clone(), shop),
        "shop",
    );
    let spec = ingress.spec.expect("spec");
    assert_eq!(spec.ingress_class_name.as_deref(), Some("nginx"));
    let rule = &spec.rules.expect("rules")[0];
    assert_eq!(rule.host.as_deref(), Some("shop.example.com"));
    let path = &rule.http.as_ref().expect("http").paths[0];
    assert_eq!(
        (path.path.as_deref(), path.path_type.as_str()),
        (Some("/api"), "Prefix")
    );
    let backend = path.backend.service.as_ref().expect("a service backend");
    assert_eq!(
        (
            backend.name.as_str(),
            backend.port.as_ref().and_then(|port| port.number)
        ),
        ("web", Some(80))
    );
    assert_eq!(
        spec.tls.expect("tls")[0].secret_name.as_deref(),
        Some("site")
    );
    assert!(spec.default_backend.is_some());
    assert!(
        ingress
            .status
            .and_then(|status| status.load_balancer)
            .is_some()
    );
}

#[test]
fn rbac_escalation_is_refused_to_kubectl_in_kube_apiservers_words() {
    let server = start_server_with(|_| vec!["--authorization".into(), "rbac".into()]);
    let as_bob = |command: &str| {
        let mut args = vec!["--token", "other"];
        args.extend(command.split_whitespace());
        kubectl_command(&server.kubeconfig, &args)
            .output()
            .expect("kubectl runs")
    };
    for command in [
        "create role role-writer --verb=create,get --resource=roles,rolebindings,configmaps",
        "create rolebinding role-writer --role=role-writer --user=bob",
    ] {
        kubectl(&server, &command.split_whitespace().collect::<Vec<_>>());
    }
    let within = as_bob("create role maker --verb=create --resource=configmaps");
    assert!(
        within.status.success(),
        "{}",
        String::from_utf8_lossy(&within.stderr)
    );
    let sneaky = as_bob("create role sneaky --verb=get,list --resource=secrets");
    assert!(!sneaky.status.success());
    assert_eq!(
        String::from_utf8_lossy(&sneaky.stderr),
        "Error from server (Forbidden): roles.rbac.authorization.k8s.io \"sneaky\" is forbidden: user \"bob\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\"]}\n"
    );
    let admin = as_bob("create rolebinding mine --clusterrole=cluster-admin --user=bob");
    let stderr = String::from_utf8_lossy(&admin.stderr);
    assert!(
        stderr.contains(
            "rolebindings.rbac.authorization.k8s.io \"mine\" is forbidden: user \"bob\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}\n{NonResourceURLs:[\"*\"], Verbs:[\"*\"]}"
        ),
        "{stderr}"
    );
    assert!(
        as_bob("create rolebinding makers --role=maker --user=carol")
            .status
            .success()
    );
}

#[test]
fn kubectl_auth_whoami_shows_the_impersonated_uid() {
    let server = start_server_with(|_| vec!["--authorization".into(), "rbac".into()]);
    let me = kubectl(
        &server,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
    );
    assert_eq!(me, "admin");
    let alice = kubectl(
        &server,
        &[
            "auth",
            "whoami",
            "--as",
            "alice",
            "--as-uid",
            "1234",
            "-o",
            "jsonpath={.status.userInfo.username} {.status.userInfo.uid} {.status.userInfo.groups}",
        ],
    );
    assert_eq!(alice, r#"alice 1234 ["system:authenticated"]"#);
    let refused = run_kubectl(
        &server,
        &[
            "--token", "other", "auth", "whoami", "--as", "alice", "--as-uid", "1234",
        ],
        None,
    );
    // kubectl words any refusal of whoami itself; the server's message is checked in rbac.rs.
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("you do not have permission"), "{stderr}");
}
