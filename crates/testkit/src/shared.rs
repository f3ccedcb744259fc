//! Sharing an existing cluster between end-to-end tests: taking turns, and leaving it as found.
//!
//! Each test's controllers watch the whole cluster, so two tests running at once on one
//! cluster would act on each other's objects (one gitsync pruning what another's declares,
//! two hierarchy controllers racing over one tree). A [`ClusterLease`] is therefore an
//! exclusive lock on a file named after the kubeconfig, held from before the system starts
//! until its cleanup has finished: tests of any test binary take turns on one cluster, while
//! tests on emulators still run side by side.
//!
//! At the start the lease notes which namespaces and which cluster-scoped objects (of the
//! kinds tests create: RBAC, admission registrations, CRDs, Arbor's cluster-scoped kinds)
//! exist.
//! The cleanup, after the controllers have stopped so that nothing re-creates what goes,
//! deletes the admission registrations made during the test first (the webhook is down, and
//! with `failurePolicy: Fail` it would refuse every deletion after it), then every
//! namespace and cluster-scoped object that is new. Arbor's finalizers (`arbor.dev/...` and
//! the key domain's) are taken off what is deleted, because the controllers that would have
//! finished them are gone. Namespace deletion on kube-apiserver is asynchronous (the
//! namespace is `Terminating` while its content goes), so the cleanup waits until the new
//! namespaces are really gone: the next test may declare the same names. Arbor's CRDs and
//! `arbor-system`, installed before the lease notes what exists, stay: every test shares
//! them, and so may an Arbor a user installed.
//!
//! What it cannot tell apart: a namespace someone else creates on the same cluster while a
//! test runs is new too, and would be deleted. The suite documents that its cluster should be
//! one made for it (`make e2e-cluster`).

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Client, Resource};

use arbor_demo::Error;
use arbor_demo::cluster::{client_for, ensure_namespace, eventually};
use arbor_demo::system::SYSTEM_NAMESPACE;

use crate::crds::install_crd_files;
use crate::source::SharedCluster;

/// How long the cleanup waits for the namespaces it deleted to be gone.
pub const CLEANUP_TIMEOUT: Duration = Duration::from_secs(300);

/// One kind the lease looks after.
#[derive(Debug, Clone)]
struct Kind {
    resource: ApiResource,
    namespaced: bool,
}

impl Kind {
    fn of<K>(namespaced: bool) -> Kind
    where
        K: Resource<DynamicType = ()>,
    {
        Kind {
            resource: ApiResource::erase::<K>(&()),
            namespaced,
        }
    }

    fn api(&self, client: &Client, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(namespace) => Api::namespaced_with(client.clone(), namespace, &self.resource),
            None => Api::all_with(client.clone(), &self.resource),
        }
    }
}

/// The kinds tests create: Arbor's (from its CRDs) and the cluster-scoped built-in kinds
/// the tests or the repositories they sync declare.
fn kinds(crds: &[CustomResourceDefinition]) -> Vec<Kind> {
    let mut kinds = vec![
        Kind::of::<ValidatingWebhookConfiguration>(false),
        Kind::of::<MutatingWebhookConfiguration>(false),
        Kind::of::<ClusterRole>(false),
        Kind::of::<ClusterRoleBinding>(false),
        // CRDs a test adds (Arbor's own are installed before the lease notes what exists).
        Kind::of::<CustomResourceDefinition>(false),
    ];
    for crd in crds {
        let spec = &crd.spec;
        let Some(version) = spec
            .versions
            .iter()
            .find(|version| version.storage)
            .or_else(|| spec.versions.first())
        else {
            continue;
        };
        kinds.push(Kind {
            resource: ApiResource {
                group: spec.group.clone(),
                version: version.name.clone(),
                api_version: format!("{}/{}", spec.group, version.name),
                kind: spec.names.kind.clone(),
                plural: spec.names.plural.clone(),
            },
            namespaced: spec.scope == "Namespaced",
        });
    }
    kinds
}

/// Exclusive use of an existing cluster, and what was on it before (see the module docs).
#[derive(Debug)]
pub struct ClusterLease {
    kubeconfig: PathBuf,
    kinds: Vec<Kind>,
    /// Finalizer prefixes of Arbor's controllers (`arbor.dev/`, the key domain's).
    finalizer_prefixes: Vec<String>,
    namespaces: BTreeSet<String>,
    /// Per entry of `kinds` that is cluster-scoped, the names that existed.
    cluster_objects: Vec<BTreeSet<String>>,
    // Last: released only after everything above was used.
    _turn: Turn,
}

/// The exclusive lock on one cluster; released when dropped.
#[derive(Debug)]
pub struct Turn {
    // Held, not read: the lock lasts as long as the open file.
    _lock: File,
}

impl Turn {
    /// Waits until no other test (of this or another process) uses the cluster of
    /// `kubeconfig`, and takes it.
    pub fn wait_for(kubeconfig: &Path) -> Result<Turn, Error> {
        let path = lock_path(kubeconfig);
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(Error::io(format!("opening the lock {}", path.display())))?;
        // Blocking is what a turn means: the holder is a test of its own thread or process
        // (never of this runtime), and it will end.
        lock.lock()
            .map_err(Error::io(format!("locking {}", path.display())))?;
        Ok(Turn { _lock: lock })
    }
}

impl ClusterLease {
    /// Takes `cluster` for one test: waits for its turn, installs the committed CRDs (and
    /// `domain`'s SubNamespace CRD) and `arbor-system`, both kept afterwards, and notes what
    /// the cluster holds. Returns an administrator's client too.
    pub async fn take(
        cluster: &SharedCluster,
        domain: &str,
        timeout: Duration,
    ) -> Result<(Client, ClusterLease), Error> {
        let kubeconfig = &cluster.cluster.kubeconfig;
        let turn = Turn::wait_for(kubeconfig)?;
        let client = client_for(kubeconfig).await?;
        let crds = install_crd_files(&client, &cluster.crd_dir, domain, timeout).await?;
        ensure_namespace(&client, SYSTEM_NAMESPACE).await?;
        let lease = ClusterLease::note(turn, kubeconfig, &client, &crds, domain).await?;
        Ok((client, lease))
    }

    /// Notes what the cluster of `kubeconfig` holds, during `turn`. `crds` are Arbor's CRDs
    /// as installed, `domain` the key domain of the controllers.
    pub async fn note(
        turn: Turn,
        kubeconfig: &Path,
        client: &Client,
        crds: &[CustomResourceDefinition],
        domain: &str,
    ) -> Result<ClusterLease, Error> {
        let kinds = kinds(crds);
        let namespaces = names(&Kind::of::<Namespace>(false), client).await?;
        let mut cluster_objects = Vec::new();
        for kind in &kinds {
            cluster_objects.push(if kind.namespaced {
                BTreeSet::new()
            } else {
                names(kind, client).await?
            });
        }
        let mut finalizer_prefixes = vec![format!("{}/", arbor_api::keys::DEFAULT_DOMAIN)];
        if domain != arbor_api::keys::DEFAULT_DOMAIN {
            finalizer_prefixes.push(format!("{domain}/"));
        }
        Ok(ClusterLease {
            kubeconfig: kubeconfig.to_owned(),
            kinds,
            finalizer_prefixes,
            namespaces,
            cluster_objects,
            _turn: turn,
        })
    }

    /// Deletes what appeared since [`ClusterLease::note`] and waits until it is gone.
    /// Call it after the controllers have stopped. Works from any thread, inside or outside
    /// a runtime (a `Drop` may call it): it runs on its own thread and runtime.
    pub fn clean_up(&self) -> Result<(), Error> {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(Error::io("starting a runtime for the cleanup"))?;
                    runtime.block_on(self.clean_up_async())
                })
                .join()
                .unwrap_or_else(|_| {
                    Err(Error::Invalid {
                        what: "cleaning up the cluster".to_owned(),
                        message: "the cleanup thread panicked".to_owned(),
                    })
                })
        })
    }

    async fn clean_up_async(&self) -> Result<(), Error> {
        let client = client_for(&self.kubeconfig).await?;
        // Admission registrations first: the webhook they call no longer runs.
        let (admission, others): (Vec<_>, Vec<_>) = self
            .kinds
            .iter()
            .zip(&self.cluster_objects)
            .filter(|(kind, _)| !kind.namespaced)
            .partition(|(kind, _)| kind.resource.group == "admissionregistration.k8s.io");
        for (kind, before) in &admission {
            self.delete_new(&client, kind, before).await?;
        }

        let new_namespaces: Vec<String> = names(&Kind::of::<Namespace>(false), &client)
            .await?
            .difference(&self.namespaces)
            .cloned()
            .collect();
        let namespace_kind = Kind::of::<Namespace>(false);
        for namespace in &new_namespaces {
            for kind in self.kinds.iter().filter(|kind| kind.namespaced) {
                let api = kind.api(&client, Some(namespace));
                for object in list(&api, &kind.resource.kind).await? {
                    self.release(&api, &object).await?;
                }
            }
            let api = namespace_kind.api(&client, None);
            if let Some(object) = api
                .get_opt(namespace)
                .await
                .map_err(Error::kube(format!("reading namespace {namespace}")))?
            {
                self.release(&api, &object).await?;
            }
            delete(&api, namespace).await?;
        }

        for (kind, before) in &others {
            self.delete_new(&client, kind, before).await?;
        }

        let namespaces = Api::<Namespace>::all(client.clone());
        eventually(
            &format!("the namespaces {new_namespaces:?} deleted"),
            CLEANUP_TIMEOUT,
            || {
                let namespaces = namespaces.clone();
                let new_namespaces = &new_namespaces;
                async move {
                    for name in new_namespaces {
                        if namespaces
                            .get_opt(name)
                            .await
                            .map_err(Error::kube(format!("reading namespace {name}")))?
                            .is_some()
                        {
                            return Ok(None);
                        }
                    }
                    Ok(Some(()))
                }
            },
        )
        .await
    }

    /// Deletes the objects of cluster-scoped `kind` not in `before`.
    async fn delete_new(
        &self,
        client: &Client,
        kind: &Kind,
        before: &BTreeSet<String>,
    ) -> Result<(), Error> {
        let api = kind.api(client, None);
        for object in list(&api, &kind.resource.kind).await? {
            let name = object.metadata.name.clone().unwrap_or_default();
            if before.contains(&name) {
                continue;
            }
            self.release(&api, &object).await?;
            delete(&api, &name).await?;
        }
        Ok(())
    }

    /// Takes Arbor's finalizers off `object`, keeping any other.
    async fn release(&self, api: &Api<DynamicObject>, object: &DynamicObject) -> Result<(), Error> {
        let finalizers = object.metadata.finalizers.clone().unwrap_or_default();
        let kept: Vec<&String> = finalizers
            .iter()
            .filter(|finalizer| {
                !self
                    .finalizer_prefixes
                    .iter()
                    .any(|prefix| finalizer.starts_with(prefix.as_str()))
            })
            .collect();
        if kept.len() == finalizers.len() {
            return Ok(());
        }
        let name = object.metadata.name.clone().unwrap_or_default();
        let patch = serde_json::json!({"metadata": {"finalizers": kept}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
            .or_else(not_found_is_done)
            .map_err(Error::kube(format!(
                "removing Arbor's finalizers from {name}"
            )))
    }
}

/// `<temp dir>/arbor-e2e-<kubeconfig path, made a file name>.lock`.
fn lock_path(kubeconfig: &Path) -> PathBuf {
    let absolute = std::fs::canonicalize(kubeconfig).unwrap_or_else(|_| kubeconfig.to_owned());
    let name: String = absolute
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    std::env::temp_dir().join(format!("arbor-e2e-{name}.lock"))
}

async fn list(api: &Api<DynamicObject>, what: &str) -> Result<Vec<DynamicObject>, Error> {
    match api.list(&ListParams::default()).await {
        Ok(list) => Ok(list.items),
        // A kind whose CRD is not installed has nothing to clean.
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
        Err(error) => Err(Error::kube(format!("listing {what}"))(error)),
    }
}

async fn names(kind: &Kind, client: &Client) -> Result<BTreeSet<String>, Error> {
    Ok(list(&kind.api(client, None), &kind.resource.kind)
        .await?
        .into_iter()
        .filter_map(|object| object.metadata.name)
        .collect())
}

async fn delete(api: &Api<DynamicObject>, name: &str) -> Result<(), Error> {
    api.delete(name, &DeleteParams::background())
        .await
        .map(drop)
        .or_else(not_found_is_done)
        .map_err(Error::kube(format!("deleting {name}")))
}

/// Something already gone needs no more work.
fn not_found_is_done(error: kube::Error) -> Result<(), kube::Error> {
    match error {
        kube::Error::Api(status) if status.code == 404 => Ok(()),
        other => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_is_named_after_the_kubeconfig() {
        let a = lock_path(Path::new("/no/such/a.kubeconfig"));
        let b = lock_path(Path::new("/no/such/b.kubeconfig"));
        assert_ne!(a, b);
        assert!(
            a.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("arbor-e2e-")
        );
        assert_eq!(a.parent(), Some(std::env::temp_dir().as_path()));
    }

    #[test]
    fn arbor_kinds_come_from_the_crds_with_their_scope() {
        let kinds = kinds(&arbor_api::crds::all());
        let git_track = kinds
            .iter()
            .find(|kind| kind.resource.kind == "GitTrack")
            .unwrap();
        assert!(git_track.namespaced);
        let cluster = kinds
            .iter()
            .find(|kind| kind.resource.kind == "ClusterGitTrack")
            .unwrap();
        assert!(!cluster.namespaced);
        assert_eq!(cluster.resource.plural, "clustergittracks");
        assert!(
            kinds
                .iter()
                .any(|kind| kind.resource.kind == "ClusterRole" && !kind.namespaced)
        );
    }
}
