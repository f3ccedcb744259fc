//! Hydrating a large hierarchical repository, beside a bare parse of the same files.
//!
//! The generated repository has 10,000 objects in 500 namespaces, four directory levels deep
//! (`namespaces/<region>/<group>/<team>/<namespace>`): abstract namespaces at every level hold
//! RoleBindings, ConfigMaps and a hierarchicalQuota ResourceQuota that every namespace below
//! inherits, one NamespaceSelector limits some of them, and each namespace declares its own
//! objects. "bare parse" reads and parses every file; "hydrate" reads, parses, validates the
//! layout, computes inheritance and renders every output file. The ratio of the two is the cost
//! of the layout rules and rendering over what any reader pays.
//!
//! Emits the shared results table ([`arbor_testkit::bench`]); run with
//! `cargo bench -p arbor-source --bench hydrate`.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use arbor_policy::layout::Layout;
use arbor_source::document::parse_documents;
use arbor_source::files::read_tree;
use arbor_source::hydrate::{OutputFormat, render};
use arbor_source::source::{LoadOptions, load};
use arbor_testkit::bench::{Row, Table};

const REGIONS: usize = 5;
const GROUPS_PER_REGION: usize = 4;
const TEAMS_PER_GROUP: usize = 5;
const NAMESPACES_PER_TEAM: usize = 5;
const OBJECTS_PER_NAMESPACE: usize = 18;
const OBJECTS_PER_ABSTRACT: usize = 8;
const TOTAL_OBJECTS: usize = 10_000;
const ITERATIONS: usize = 5;

fn main() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let declared = generate(dir.path());
    let options = LoadOptions {
        layout: Layout::Hierarchical,
        sub_path: String::new(),
        ..LoadOptions::default()
    };
    let bare = median(|| {
        let tree = read_tree(dir.path()).expect("readable tree");
        let documents: usize = tree
            .files
            .iter()
            .map(|f| {
                parse_documents(&f.path, f.format, &f.bytes)
                    .expect("valid file")
                    .len()
            })
            .sum();
        assert_eq!(documents, declared);
    });
    let mut output_files = 0;
    let hydrate = median(|| {
        let state = load(dir.path(), &options).expect("valid repository");
        output_files = render(&state, OutputFormat::Yaml)
            .expect("renderable")
            .len();
    });
    let namespaces = REGIONS * GROUPS_PER_REGION * TEAMS_PER_GROUP * NAMESPACES_PER_TEAM;
    let mut table = Table::new("arbor-gitsync: hydrating a hierarchical repository");
    table.note(format!(
        "{declared} objects, {namespaces} namespaces, 4 levels; median of {ITERATIONS} runs. \
         Baseline: a bare parse (read and parse every file)."
    ));
    table.row(
        Row::new(
            format!("hydrate ({output_files} objects out)"),
            format!(
                "{} ({:.2} × baseline)",
                millis(hydrate),
                hydrate.as_secs_f64() / bare.as_secs_f64()
            ),
        )
        .baseline(format!("bare parse: {}", millis(bare))),
    );
    table.emit().expect("results written");
}

fn millis(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

fn median(mut run: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..ITERATIONS)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[ITERATIONS / 2]
}

/// Writes the repository; returns how many objects (documents) it declares.
fn generate(root: &Path) -> usize {
    let mut repo = Repo { root, documents: 0 };
    repo.put("system/sync.yaml", SYNC);
    repo.put(
        "namespaces/selector.yaml",
        "kind: NamespaceSelector\napiVersion: nomos.dev/v1alpha1\nmetadata:\n  name: prod\nspec:\n  selector:\n    matchLabels:\n      env: prod\n",
    );
    let mut abstract_dirs = Vec::new();
    for r in 0..REGIONS {
        let region = format!("namespaces/region-{r}");
        abstract_dirs.push(region.clone());
        for g in 0..GROUPS_PER_REGION {
            let group = format!("{region}/group-{g}");
            abstract_dirs.push(group.clone());
            for t in 0..TEAMS_PER_GROUP {
                let team = format!("{group}/team-{t}");
                abstract_dirs.push(team.clone());
                for n in 0..NAMESPACES_PER_TEAM {
                    let name = format!("ns-{r}-{g}-{t}-{n}");
                    repo.put(
                        &format!("{team}/{name}/objects.yaml"),
                        &namespace_objects(&name, n),
                    );
                }
            }
        }
    }
    // The abstract namespaces hold the rest, up to 10,000 objects.
    for (i, dir) in abstract_dirs.iter().enumerate() {
        let here = OBJECTS_PER_ABSTRACT.min(TOTAL_OBJECTS - repo.documents);
        if here == 0 {
            break;
        }
        repo.put(&format!("{dir}/inherited.yaml"), &abstract_objects(i, here));
    }
    repo.documents
}

struct Repo<'a> {
    root: &'a Path,
    documents: usize,
}

impl Repo<'_> {
    fn put(&mut self, path: &str, text: &str) {
        let path = self.root.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        // Every generated document starts with its kind.
        self.documents +=
            text.matches("\nkind: ").count() + usize::from(text.starts_with("kind: "));
        fs::write(path, text).unwrap();
    }
}

fn namespace_objects(name: &str, index: usize) -> String {
    let env = if index.is_multiple_of(2) {
        "prod"
    } else {
        "dev"
    };
    let mut text = format!(
        "kind: Namespace\napiVersion: v1\nmetadata:\n  name: {name}\n  labels:\n    env: {env}\n"
    );
    for i in 1..OBJECTS_PER_NAMESPACE {
        write!(
            text,
            "---\nkind: ConfigMap\napiVersion: v1\nmetadata:\n  name: own-{i}\ndata:\n  index: \"{i}\"\n  owner: {name}\n"
        )
        .unwrap();
    }
    text
}

fn abstract_objects(dir: usize, count: usize) -> String {
    let mut text = String::new();
    for i in 0..count {
        if !text.is_empty() {
            text.push_str("---\n");
        }
        match i {
            0 => write!(text, "kind: ResourceQuota\napiVersion: v1\nmetadata:\n  name: quota\nspec:\n  hard:\n    pods: \"{}\"\n", 100 + dir),
            1 => write!(text, "kind: RoleBinding\napiVersion: rbac.authorization.k8s.io/v1\nmetadata:\n  name: prod-admins-{dir}\n  annotations:\n    nomos.dev/namespace-selector: prod\nsubjects:\n- kind: Group\n  name: admins\n  apiGroup: rbac.authorization.k8s.io\nroleRef:\n  kind: ClusterRole\n  name: admin\n  apiGroup: rbac.authorization.k8s.io\n"),
            _ => write!(text, "kind: RoleBinding\napiVersion: rbac.authorization.k8s.io/v1\nmetadata:\n  name: viewers-{dir}-{i}\nsubjects:\n- kind: Group\n  name: viewers\n  apiGroup: rbac.authorization.k8s.io\nroleRef:\n  kind: ClusterRole\n  name: view\n  apiGroup: rbac.authorization.k8s.io\n"),
        }
        .unwrap();
    }
    text
}

const SYNC: &str = "kind: Sync
apiVersion: nomos.dev/v1alpha1
metadata:
  name: bench
spec:
  groups:
  - group: rbac.authorization.k8s.io
    kinds:
    - kind: RoleBinding
      versions:
      - version: v1
  - kinds:
    - kind: ConfigMap
      versions:
      - version: v1
    - kind: ResourceQuota
      hierarchyMode: hierarchicalQuota
      versions:
      - version: v1
";
