//! Reading `helm template` output: a YAML stream, one Kubernetes object per document, each
//! preceded by helm's `# Source: <template>` comment, which errors quote.

use anyhow::{Context, anyhow};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::helm;
use super::value_sets::ValueSet;

/// One rendered object and the template it came from.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub source: String,
    pub object: Value,
}

impl Manifest {
    fn str_at(&self, pointer: &str) -> &str {
        self.object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    pub fn kind(&self) -> &str {
        self.str_at("/kind")
    }

    pub fn api_version(&self) -> &str {
        self.str_at("/apiVersion")
    }

    pub fn name(&self) -> &str {
        self.str_at("/metadata/name")
    }

    pub fn namespace(&self) -> Option<&str> {
        self.object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
    }

    /// "Kind name (from template)", for messages.
    pub fn describe(&self) -> String {
        format!("{} {} (from {})", self.kind(), self.name(), self.source)
    }

    /// The object as its k8s-openapi type; panics naming the object when it does not fit.
    pub fn typed<T: DeserializeOwned>(&self) -> T {
        serde_json::from_value(self.object.clone())
            .unwrap_or_else(|error| panic!("{} does not deserialise: {error}", self.describe()))
    }
}

/// Splits a helm output stream into its objects; documents holding only comments are skipped.
pub fn parse_stream(stream: &str) -> anyhow::Result<Vec<Manifest>> {
    let mut documents: Vec<Vec<&str>> = vec![Vec::new()];
    for line in stream.lines() {
        if line == "---" || line.starts_with("--- ") {
            documents.push(Vec::new());
        } else if let Some(current) = documents.last_mut() {
            current.push(line);
        }
    }
    let mut manifests = Vec::new();
    for lines in documents {
        let source = lines
            .iter()
            .find_map(|line| line.strip_prefix("# Source: "))
            .unwrap_or("<unknown template>")
            .to_owned();
        let has_content = lines.iter().any(|line| {
            let trimmed = line.trim();
            !trimmed.is_empty() && !trimmed.starts_with('#')
        });
        if !has_content {
            continue;
        }
        let text = lines.join("\n");
        let object: Value = serde_saphyr::from_str(&text)
            .with_context(|| format!("{source} renders invalid YAML:\n{text}"))?;
        if !object.is_object() {
            return Err(anyhow!(
                "{source} renders a document that is not an object: {object}"
            ));
        }
        manifests.push(Manifest { source, object });
    }
    Ok(manifests)
}

/// The objects of one render.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub set: String,
    pub manifests: Vec<Manifest>,
}

impl Rendered {
    pub fn of_kind(&self, kind: &str) -> Vec<&Manifest> {
        self.manifests
            .iter()
            .filter(|manifest| manifest.kind() == kind)
            .collect()
    }

    /// The typed objects of a kind.
    pub fn typed_of_kind<T: DeserializeOwned>(&self, kind: &str) -> Vec<T> {
        self.of_kind(kind)
            .into_iter()
            .map(Manifest::typed)
            .collect()
    }

    pub fn find(&self, kind: &str, name: &str) -> Option<&Manifest> {
        self.manifests
            .iter()
            .find(|manifest| manifest.kind() == kind && manifest.name() == name)
    }

    /// The object of a kind and name, typed; panics naming the value set when it is absent.
    pub fn get<T: DeserializeOwned>(&self, kind: &str, name: &str) -> T {
        self.find(kind, name)
            .unwrap_or_else(|| panic!("[{}] renders no {kind} {name}", self.set))
            .typed()
    }
}

/// Renders the chart with a value set; panics with helm's message when that fails.
pub fn render(set: &ValueSet) -> Rendered {
    let stream =
        helm::template(&set.args).unwrap_or_else(|error| panic!("[{}] {error:#}", set.name));
    let manifests =
        parse_stream(&stream).unwrap_or_else(|error| panic!("[{}] {error:#}", set.name));
    Rendered {
        set: set.name.clone(),
        manifests,
    }
}
