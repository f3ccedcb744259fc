//! Talking to the cluster the way `kubectl apply` does: YAML documents applied with
//! server-side apply, the resource of each found by discovery; the Arbor CRDs installed and
//! waited for; and [`eventually`], the bounded poll every wait in the demo and the tests uses.

use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use kube::{Client, Resource as _};
use serde_json::Value;

use crate::Error;

/// The field manager of everything the demo and the test harness apply (what `kubectl get
/// -o yaml --show-managed-fields` shows a demo user).
pub const FIELD_MANAGER: &str = "arbor-demo";

/// How long a wait lasts and how often it asks again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Patience {
    pub timeout: Duration,
    pub poll: Duration,
}

impl Patience {
    /// How often a wait given only its timeout asks again.
    pub const DEFAULT_POLL: Duration = Duration::from_millis(100);

    pub const fn new(timeout: Duration, poll: Duration) -> Self {
        Self { timeout, poll }
    }
}

/// A timeout alone polls every [`Patience::DEFAULT_POLL`].
impl From<Duration> for Patience {
    fn from(timeout: Duration) -> Self {
        Self::new(timeout, Self::DEFAULT_POLL)
    }
}

/// A wait of [`eventually`] ran out of patience.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("timed out after {after:?} waiting for {what}")]
pub struct TimedOut {
    pub what: String,
    pub after: Duration,
}

/// Polls `check` until it returns `Some`, for at most `patience`'s timeout; `what` names the
/// wait in the timeout error. Errors of `check` end the wait at once. Any error type that can
/// say [`TimedOut`] works: the harness's [`Error`], `anyhow::Error` in tests.
pub async fn eventually<T, E, F, Fut>(
    what: &str,
    patience: impl Into<Patience>,
    mut check: F,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, E>>,
    E: From<TimedOut>,
{
    let patience = patience.into();
    let start = Instant::now();
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if start.elapsed() > patience.timeout {
            return Err(TimedOut {
                what: what.to_owned(),
                after: patience.timeout,
            }
            .into());
        }
        tokio::time::sleep(patience.poll).await;
    }
}

/// An object's `apiVersion`, `kind` and name, for messages.
pub fn describe(object: &Value) -> String {
    format!(
        "{}/{} {}",
        object["apiVersion"].as_str().unwrap_or("?"),
        object["kind"].as_str().unwrap_or("?"),
        object["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// Parses the YAML documents of `text` (`source` names it in errors), skipping empty ones.
pub fn parse_documents(source: &str, text: &str) -> Result<Vec<Value>, Error> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|error| Error::Invalid {
            what: format!("parsing {source}"),
            message: error.to_string(),
        })?;
    Ok(documents
        .into_iter()
        .filter(|document| !document.is_null())
        .collect())
}

/// The dynamic API of `object`'s kind, in its namespace (or `default_namespace`) when the
/// kind is namespaced.
pub async fn api_for(
    client: &Client,
    object: &Value,
    default_namespace: Option<&str>,
) -> Result<Api<DynamicObject>, Error> {
    let (group, version) = match object["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .split_once('/')
    {
        Some((group, version)) => (group, version),
        None => ("", object["apiVersion"].as_str().unwrap_or_default()),
    };
    let gvk = GroupVersionKind::gvk(group, version, object["kind"].as_str().unwrap_or_default());
    let (resource, capabilities) =
        kube::discovery::pinned_kind(client, &gvk)
            .await
            .map_err(Error::kube(format!(
                "discovering the resource of {}",
                describe(object)
            )))?;
    Ok(match capabilities.scope {
        Scope::Cluster => Api::all_with(client.clone(), &resource),
        Scope::Namespaced => {
            let namespace = object["metadata"]["namespace"]
                .as_str()
                .or(default_namespace)
                .ok_or_else(|| Error::Invalid {
                    what: describe(object),
                    message: "a namespaced object needs metadata.namespace".to_owned(),
                })?;
            Api::namespaced_with(client.clone(), namespace, &resource)
        }
    })
}

/// Applies one object with server-side apply; returns what the server stored.
pub async fn apply(
    client: &Client,
    object: &Value,
    default_namespace: Option<&str>,
) -> Result<DynamicObject, Error> {
    let api = api_for(client, object, default_namespace).await?;
    let name = object["metadata"]["name"]
        .as_str()
        .ok_or_else(|| Error::Invalid {
            what: describe(object),
            message: "metadata.name is missing".to_owned(),
        })?;
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .map_err(Error::kube(format!("applying {}", describe(object))))
}

/// Applies every document of the YAML `text`; returns them in order.
pub async fn apply_yaml(
    client: &Client,
    source: &str,
    text: &str,
    default_namespace: Option<&str>,
) -> Result<Vec<Value>, Error> {
    let documents = parse_documents(source, text)?;
    for document in &documents {
        apply(client, document, default_namespace).await?;
    }
    Ok(documents)
}

/// A client for the kubeconfig file `kubeconfig`.
pub async fn client_for(kubeconfig: &std::path::Path) -> Result<Client, Error> {
    let yaml = std::fs::read_to_string(kubeconfig)
        .map_err(Error::io(format!("reading {}", kubeconfig.display())))?;
    Ok(arbor_runtime::client::from_kubeconfig_yaml(&yaml).await?)
}

/// Creates (or keeps) the namespace `name`.
pub async fn ensure_namespace(client: &Client, name: &str) -> Result<(), Error> {
    let namespace = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name},
    });
    Api::<Namespace>::all(client.clone())
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Apply(&namespace),
        )
        .await
        .map_err(Error::kube(format!("creating namespace {name}")))?;
    Ok(())
}

/// Installs the CustomResourceDefinitions of every Arbor kind and waits until the API serves
/// each of them.
pub async fn install_crds(client: &Client, timeout: Duration) -> Result<(), Error> {
    install_crds_for_domain(client, arbor_api::keys::DEFAULT_DOMAIN, timeout).await
}

/// Like [`install_crds`], plus the SubNamespace CRD of key domain `domain` when it serves
/// SubNamespaces outside `arbor.dev` (Accurate's and Innu's groups), as the chart does.
pub async fn install_crds_for_domain(
    client: &Client,
    domain: &str,
    timeout: Duration,
) -> Result<(), Error> {
    let mut crds = arbor_api::crds::all();
    crds.extend(domain_crd(domain));
    install_crd_list(client, &crds, timeout).await
}

/// The SubNamespace CRD of key domain `domain`, when its group is not Arbor's own.
pub fn domain_crd(domain: &str) -> Option<CustomResourceDefinition> {
    let sub_namespaces = arbor_api::SubNamespaceApi::for_domain(domain);
    (sub_namespaces.group != arbor_api::crds::GROUP).then(|| sub_namespaces.crd())
}

/// Applies `crds` and waits until the API serves each of them.
pub async fn install_crd_list(
    client: &Client,
    crds: &[CustomResourceDefinition],
    timeout: Duration,
) -> Result<(), Error> {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    for crd in crds {
        let name = crd.meta().name.clone().unwrap_or_default();
        let mut crd = crd.clone();
        // What a server wrote is not part of an apply.
        crd.status = None;
        crd.metadata.creation_timestamp = None;
        api.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .map_err(Error::kube(format!("installing the CRD {name}")))?;
    }
    for crd in crds {
        let spec = &crd.spec;
        let Some(version) = spec.versions.iter().find(|version| version.served) else {
            continue;
        };
        let gvk = GroupVersionKind::gvk(&spec.group, &version.name, &spec.names.kind);
        eventually(
            &format!("the API to serve {}", spec.names.kind),
            timeout,
            || {
                let gvk = gvk.clone();
                async move {
                    Ok::<_, Error>(
                        kube::discovery::pinned_kind(client, &gvk)
                            .await
                            .ok()
                            .map(drop),
                    )
                }
            },
        )
        .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_parsed_and_empty_ones_skipped() {
        let text =
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\nkind: Secret\n";
        let documents = parse_documents("two.yaml", text).unwrap();
        assert_eq!(documents.len(), 2);
        assert_eq!(describe(&documents[0]), "v1/ConfigMap a");
        let error = parse_documents("broken.yaml", "a: [b\n").unwrap_err();
        assert!(error.to_string().contains("broken.yaml"), "{error}");
    }

    #[tokio::test]
    async fn eventually_returns_the_first_answer_and_times_out_naming_the_wait() {
        let mut calls = 0;
        let value: Result<_, Error> = eventually("three calls", Duration::from_secs(10), || {
            calls += 1;
            let ready = calls >= 3;
            async move { Ok(ready.then_some(calls)) }
        })
        .await;
        assert_eq!(value.unwrap(), 3);

        let patience = Patience::new(Duration::from_millis(250), Duration::from_millis(10));
        let mut polls = 0;
        let error: anyhow::Error = eventually("nothing", patience, || {
            polls += 1;
            async { Ok(None::<()>) }
        })
        .await
        .unwrap_err();
        assert!(error.to_string().contains("nothing"), "{error}");
        assert!(
            polls >= 10,
            "polled {polls} times in 250 ms at a 10 ms interval"
        );
    }
}
