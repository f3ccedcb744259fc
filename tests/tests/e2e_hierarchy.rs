//! seeds/001's propagation through a running arbor-hierarchy: the example tree, a Secret of
//! the template annotated propagate=update copied down, and its copies deleted with it.

use arbor_e2e::eventually;
use arbor_e2e::system::{WAIT, example, start};
use arbor_testkit::cluster::apply_yaml;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

const SECRET: &str = "registry-credentials";
const COPIES: [&str; 3] = ["team-a", "team-a-dev", "team-a-prod"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_propagate_update_secret_reaches_sub_namespaces_follows_changes_and_goes_with_its_source()
{
    let system = start(&["hierarchy"]).await.unwrap();
    let client = system.client.clone();
    let tree = std::fs::read_to_string(example("tree.yaml")).unwrap();
    apply_yaml(&client, "tree.yaml", &tree, None).await.unwrap();

    // The SubNamespaces become namespaces whose parent is team-a.
    let namespaces = Api::<Namespace>::all(client.clone());
    for child in ["team-a-dev", "team-a-prod"] {
        let namespace = eventually(&format!("namespace {child}"), WAIT, || async {
            Ok(namespaces.get_opt(child).await.ok().flatten())
        })
        .await
        .unwrap();
        let labels = namespace.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels.get("arbor.dev/parent").map(String::as_str),
            Some("team-a"),
            "{child}"
        );
    }

    // The template's Secret is copied into the instance and on down the tree.
    for namespace in COPIES {
        let secrets = Api::<Secret>::namespaced(client.clone(), namespace);
        eventually(
            &format!("{SECRET} copied into {namespace}"),
            WAIT,
            || async { Ok(secrets.get_opt(SECRET).await.ok().flatten().map(drop)) },
        )
        .await
        .unwrap();
    }

    // propagate=update: a change of the source reaches the copies.
    let source = Api::<Secret>::namespaced(client.clone(), "team-template");
    // `data` rather than `stringData`: the change must be in the stored object as it is.
    let change = json!({"data": {"username": "dGVhbS1hLXJlbmFtZWQ="}});
    source
        .patch(SECRET, &PatchParams::default(), &Patch::Merge(&change))
        .await
        .unwrap();
    let dev = Api::<Secret>::namespaced(client.clone(), "team-a-dev");
    eventually(
        "the changed Secret copied into team-a-dev",
        WAIT,
        || async {
            let copy = dev.get_opt(SECRET).await.ok().flatten();
            let username = copy
                .and_then(|secret| secret.data)
                .and_then(|data| data.get("username").map(|value| value.0.clone()));
            Ok((username.as_deref() == Some(b"team-a-renamed".as_slice())).then_some(()))
        },
    )
    .await
    .unwrap();

    // Deleting the source deletes every copy.
    source
        .delete(SECRET, &DeleteParams::default())
        .await
        .unwrap();
    for namespace in COPIES {
        let secrets = Api::<Secret>::namespaced(client.clone(), namespace);
        eventually(
            &format!("the copy in {namespace} deleted"),
            WAIT,
            || async {
                Ok(secrets
                    .get_opt(SECRET)
                    .await
                    .ok()
                    .flatten()
                    .is_none()
                    .then_some(()))
            },
        )
        .await
        .unwrap();
    }
}

/// `arborctl tree` over a chain as deep as `depth`: each level is one line, indented one step
/// more than the one above, and `-o json` lists every node with its parent.
fn assert_chain_drawn(system: &arbor_e2e::system::TestSystem, top: usize, depth: usize) {
    let mut args = vec!["tree".to_owned(), format!("chain-{top}")];
    args.extend(system.arborctl_flags());
    let run = arbor_e2e::arborctl(&args).unwrap();
    assert!(run.success, "arborctl tree: {}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), depth, "{}", &run.stderr);
    assert_eq!(lines[0], format!("chain-{top}"));
    for (level, line) in lines.iter().enumerate().skip(1) {
        let expected = format!("{}└── chain-{}", "    ".repeat(level - 1), top + level);
        assert_eq!(*line, expected, "level {level}");
    }

    args.extend(["-o".to_owned(), "json".to_owned()]);
    let run = arbor_e2e::arborctl(&args).unwrap();
    assert!(run.success, "arborctl tree -o json: {}", run.stderr);
    let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let nodes = json["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), depth);
    assert_eq!(
        nodes[depth - 1]["parent"],
        format!("chain-{}", top + depth - 2)
    );
}

/// issue #23 item 13: a chain of 2,000 levels (and the 500 below its level 1,500) crosses
/// HierarchyService's GetTree and is drawn by `arborctl tree`; a nested message per level
/// stopped at protobuf's recursion limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arborctl_tree_draws_chains_of_500_and_2000_levels() {
    const DEPTH: usize = 2_000;
    let system = start(&["hierarchy"]).await.unwrap();
    let namespaces = Api::<Namespace>::all(system.client.clone());
    for level in 0..DEPTH {
        let labels = if level == 0 {
            json!({"arbor.dev/type": "root"})
        } else {
            json!({"arbor.dev/parent": format!("chain-{}", level - 1)})
        };
        let namespace = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": format!("chain-{level}"), "labels": labels},
        }))
        .unwrap();
        namespaces
            .create(&kube::api::PostParams::default(), &namespace)
            .await
            .unwrap();
    }
    // The controller's index has the whole chain once the deepest namespace is in its tree.
    let mut args = vec!["tree".to_owned(), format!("chain-{}", DEPTH - 1)];
    args.extend(system.arborctl_flags());
    eventually(
        "the deepest namespace in the hierarchy's tree",
        WAIT,
        || {
            let args = args.clone();
            async move { Ok(arbor_e2e::arborctl(&args).unwrap().success.then_some(())) }
        },
    )
    .await
    .unwrap();

    assert_chain_drawn(&system, 1_500, 500);
    assert_chain_drawn(&system, 0, DEPTH);
}
