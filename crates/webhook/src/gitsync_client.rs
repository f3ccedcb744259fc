//! arbor-gitsync's `SyncService.GetDeclared`, with a cache and a timeout.
//!
//! Every admission of a managed object would otherwise be one gRPC call, on the API server's
//! critical path. Answers (including "not declared") are cached for a TTL; a change in git
//! reaches the webhook at most one TTL late, which is what gitsync's own poll interval already
//! allows. Failures are not cached, so the webhook recovers as soon as gitsync does.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use arbor_policy::sync::CompareFields;
use arbor_proto::v1::sync_service_client::SyncServiceClient;
use arbor_proto::v1::{GetDeclaredRequest, GetDeclaredResponse, ObjectRef, SourceKind};
use futures::future::BoxFuture;
use tonic::transport::Channel;

use crate::declared::{Declared, DeclaredState, LookupError, ObjectIdentity};

/// Entries kept before expired ones are swept.
const CACHE_CAPACITY: usize = 10_000;

/// The declared state, asked of arbor-gitsync.
#[derive(Debug)]
pub struct GitsyncDeclared {
    client: SyncServiceClient<Channel>,
    timeout: Duration,
    ttl: Duration,
    cache: Mutex<HashMap<ObjectIdentity, (Instant, Declared)>>,
}

impl GitsyncDeclared {
    pub fn new(channel: Channel, timeout: Duration, ttl: Duration) -> Self {
        Self {
            client: SyncServiceClient::new(channel),
            timeout,
            ttl,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, object: &ObjectIdentity) -> Option<Declared> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .get(object)
            .filter(|(at, _)| at.elapsed() < self.ttl)
            .map(|(_, declared)| declared.clone())
    }

    fn remember(&self, object: &ObjectIdentity, declared: &Declared) {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= CACHE_CAPACITY {
            let ttl = self.ttl;
            cache.retain(|_, (at, _)| at.elapsed() < ttl);
            if cache.len() >= CACHE_CAPACITY {
                cache.clear();
            }
        }
        cache.insert(object.clone(), (Instant::now(), declared.clone()));
    }

    async fn ask(&self, object: &ObjectIdentity) -> Result<Declared, LookupError> {
        let request = GetDeclaredRequest {
            object: Some(ObjectRef {
                group: object.group.clone(),
                version: object.version.clone(),
                kind: object.kind.clone(),
                namespace: object.namespace.clone(),
                name: object.name.clone(),
            }),
        };
        let mut client = self.client.clone();
        let answer = tokio::time::timeout(self.timeout, client.get_declared(request))
            .await
            .map_err(|_| LookupError::Timeout(self.timeout))?
            .map_err(|status| {
                LookupError::Unreachable(format!("{:?}: {}", status.code(), status.message()))
            })?;
        from_response(answer.into_inner())
    }
}

/// Reads gitsync's answer.
pub fn from_response(response: GetDeclaredResponse) -> Result<Declared, LookupError> {
    if !response.declared {
        return Ok(Declared::NotDeclared);
    }
    let object = serde_json::from_str(&response.object_json)
        .map_err(|error| LookupError::BadAnswer(format!("object_json: {error}")))?;
    let fields = CompareFields::parse(&response.compare_fields)
        .map_err(|error| LookupError::BadAnswer(format!("compare_fields: {error}")))?;
    let source = response
        .source
        .map(|source| match source.kind() {
            SourceKind::ClusterGitTrack => format!("ClusterGitTrack/{}", source.name),
            _ => format!("GitTrack/{}/{}", source.namespace, source.name),
        })
        .unwrap_or_else(|| "an unnamed source".to_owned());
    Ok(Declared::Object {
        object,
        fields,
        source,
        file: response.file,
    })
}

impl DeclaredState for GitsyncDeclared {
    fn declared<'a>(
        &'a self,
        object: &'a ObjectIdentity,
    ) -> BoxFuture<'a, Result<Declared, LookupError>> {
        Box::pin(async move {
            if let Some(declared) = self.cached(object) {
                return Ok(declared);
            }
            let declared = self.ask(object).await?;
            self.remember(object, &declared);
            Ok(declared)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_undeclared_answer_reads_as_not_declared() {
        assert_eq!(
            from_response(GetDeclaredResponse::default()).unwrap(),
            Declared::NotDeclared
        );
    }

    #[test]
    fn a_declared_answer_carries_object_fields_and_source() {
        let response = GetDeclaredResponse {
            declared: true,
            object_json: r#"{"spec":{"replicas":2}}"#.into(),
            source: Some(arbor_proto::v1::SourceRef {
                kind: SourceKind::GitTrack as i32,
                namespace: "team-a".into(),
                name: "apps".into(),
            }),
            file: "deploy/web.yaml".into(),
            commit: "abc".into(),
            compare_fields: vec!["spec.replicas".into()],
        };
        let Declared::Object {
            object,
            fields,
            source,
            file,
        } = from_response(response).unwrap()
        else {
            panic!("declared");
        };
        assert_eq!(object["spec"]["replicas"], 2);
        assert!(matches!(fields, CompareFields::Only(paths) if paths.len() == 1));
        assert_eq!(source, "GitTrack/team-a/apps");
        assert_eq!(file, "deploy/web.yaml");
    }

    #[test]
    fn unreadable_json_is_a_bad_answer_naming_the_field() {
        let response = GetDeclaredResponse {
            declared: true,
            object_json: "{".into(),
            ..Default::default()
        };
        let error = from_response(response).unwrap_err();
        assert!(error.to_string().contains("object_json"), "{error}");
    }
}
