//! Which caller may call which gRPC method, by the subject of its client certificate.
//!
//! Mutual TLS says that a caller holds a certificate of the installation's CA; every component
//! holds one, so it does not say *which* caller it is. Each server therefore takes rules
//! (`--grpc-allow`, repeated):
//!
//! | rule | applies to |
//! |---|---|
//! | `SyncService/ReportDrift=arbor-observer` | one method |
//! | `SyncService/*=ops,ci` | every method of a service |
//! | `*=ops` | every method no more specific rule names |
//!
//! A service is named by its short name (`SyncService`) or its full name
//! (`arbor.v1.SyncService`). A caller matches a name when its certificate's subject common
//! name, or one of its DNS / URI subject alternative names, equals it; `*` matches any
//! verified certificate. The most specific rule for a method decides alone (a method rule
//! replaces its service's rule, which replaces `*`), so `ReportDrift` can be the observer's
//! only even where `*` names the operators. A method no rule covers is refused.
//!
//! Without any rule, authorization is off: any caller the transport accepted may call any
//! method (the behaviour before rules existed; servers log it at start). A refusal is
//! `PermissionDenied` naming the method and the caller.

use std::sync::Arc;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::listener::{PeerIdentity, PeerInfo};

/// The `--grpc-allow` flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AuthzArgs {
    /// Who may call which gRPC method: `<Service>/<Method>=<names>`, `<Service>/*=<names>` or
    /// `*=<names>`, names separated by commas, each a client certificate's common name or
    /// subject alternative name, or `*` for any verified certificate. Repeat the flag; the
    /// most specific rule of a method decides. Without any, every client certificate of the CA
    /// may call every method.
    #[arg(long = "grpc-allow", value_name = "METHOD=NAMES")]
    pub grpc_allow: Vec<String>,
}

/// A `--grpc-allow` value that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("--grpc-allow {rule:?}: {reason}")]
pub struct AuthzError {
    rule: String,
    reason: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    Method { service: String, method: String },
    Service(String),
    Any,
}

impl Pattern {
    /// How specific a match is; `None` when it does not match.
    fn specificity(&self, service: &str, method: &str) -> Option<u8> {
        let service_is = |name: &str| {
            name == service
                || service
                    .rsplit_once('.')
                    .is_some_and(|(_, short)| short == name)
        };
        match self {
            Self::Method {
                service: s,
                method: m,
            } => (service_is(s) && m == method).then_some(2),
            Self::Service(s) => service_is(s).then_some(1),
            Self::Any => Some(0),
        }
    }
}

#[derive(Debug, Clone)]
struct Rule {
    text: String,
    pattern: Pattern,
    names: Vec<String>,
}

/// The rules of one gRPC server.
#[derive(Debug, Clone)]
pub struct Authz {
    rules: Vec<Rule>,
}

/// Why a call was refused, for the `PermissionDenied` status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{caller} may not call {method}: {why}")]
pub struct Denied {
    pub method: String,
    pub caller: String,
    why: String,
}

impl Authz {
    /// The rules of the flags; `None` when there are none (authorization off).
    pub fn from_args(args: &AuthzArgs) -> Result<Option<Self>, AuthzError> {
        if args.grpc_allow.is_empty() {
            return Ok(None);
        }
        let rules = args
            .grpc_allow
            .iter()
            .map(|text| parse_rule(text))
            .collect::<Result<_, _>>()?;
        Ok(Some(Self { rules }))
    }

    /// Decides a call of `path` (`/<package>.<Service>/<Method>`) by `caller`.
    pub fn decide(&self, path: &str, caller: Option<&PeerIdentity>) -> Result<(), Denied> {
        let (service, method) = path
            .trim_start_matches('/')
            .split_once('/')
            .unwrap_or((path, ""));
        let display = format!("{service}/{method}");
        let caller_text = caller.map_or_else(
            || "a caller without a client certificate".to_owned(),
            |identity| format!("the client certificate {identity}"),
        );
        let deny = |why: String| Denied {
            method: display.clone(),
            caller: caller_text.clone(),
            why,
        };
        let best = self
            .rules
            .iter()
            .filter_map(|rule| Some((rule.pattern.specificity(service, method)?, rule)))
            .max_by_key(|(specificity, _)| *specificity)
            .map(|(specificity, _)| specificity);
        let Some(best) = best else {
            return Err(deny("no --grpc-allow rule covers this method".to_owned()));
        };
        let deciding: Vec<&Rule> = self
            .rules
            .iter()
            .filter(|rule| rule.pattern.specificity(service, method) == Some(best))
            .collect();
        let allowed = caller.is_some_and(|identity| {
            deciding.iter().any(|rule| {
                rule.names
                    .iter()
                    .any(|name| name == "*" || identity.has_name(name))
            })
        });
        if allowed {
            return Ok(());
        }
        let texts: Vec<&str> = deciding.iter().map(|rule| rule.text.as_str()).collect();
        Err(deny(format!(
            "allowed by --grpc-allow {}",
            texts.join(", ")
        )))
    }

    /// A one-line description for the start-up log.
    pub fn describe(&self) -> String {
        let texts: Vec<&str> = self.rules.iter().map(|rule| rule.text.as_str()).collect();
        texts.join("; ")
    }
}

fn parse_rule(text: &str) -> Result<Rule, AuthzError> {
    let error = |reason| AuthzError {
        rule: text.to_owned(),
        reason,
    };
    let (pattern, names) = text.split_once('=').ok_or_else(|| {
        error("expected <Service>/<Method>=<names>, <Service>/*=<names> or *=<names>")
    })?;
    let pattern = match pattern.trim() {
        "*" => Pattern::Any,
        pattern => {
            let (service, method) = pattern
                .split_once('/')
                .ok_or_else(|| error("a method is <Service>/<Method> or <Service>/*"))?;
            if service.is_empty() || method.is_empty() {
                return Err(error("the service and the method must not be empty"));
            }
            if method == "*" {
                Pattern::Service(service.to_owned())
            } else {
                Pattern::Method {
                    service: service.to_owned(),
                    method: method.to_owned(),
                }
            }
        }
    };
    let names: Vec<String> = names
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect();
    if names.is_empty() {
        return Err(error("no certificate name after '='"));
    }
    Ok(Rule {
        text: text.to_owned(),
        pattern,
        names,
    })
}

/// The middleware a gRPC router runs every call through.
pub async fn enforce(authz: Arc<Authz>, request: Request, next: Next) -> Response {
    let identity = request
        .extensions()
        .get::<PeerInfo>()
        .and_then(|peer| peer.identity.as_ref());
    match authz.decide(request.uri().path(), identity) {
        Ok(()) => next.run(request).await,
        Err(denied) => {
            tracing::warn!(method = %denied.method, caller = %denied.caller, "gRPC call refused");
            tonic::Status::permission_denied(denied.to_string())
                .into_http::<axum::body::Body>()
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authz(rules: &[&str]) -> Authz {
        Authz::from_args(&AuthzArgs {
            grpc_allow: rules.iter().map(|r| (*r).to_owned()).collect(),
        })
        .unwrap()
        .unwrap()
    }

    fn cert(name: &str) -> PeerIdentity {
        PeerIdentity {
            common_name: Some(name.to_owned()),
            alt_names: vec![format!("{name}.arbor-system.svc")],
        }
    }

    const TRIGGER: &str = "/arbor.v1.SyncService/TriggerSync";
    const REPORT: &str = "/arbor.v1.SyncService/ReportDrift";

    #[test]
    fn the_most_specific_rule_decides_alone() {
        let rules = authz(&["SyncService/ReportDrift=observer", "*=arborctl"]);
        assert!(rules.decide(REPORT, Some(&cert("observer"))).is_ok());
        assert!(rules.decide(REPORT, Some(&cert("arborctl"))).is_err());
        assert!(rules.decide(TRIGGER, Some(&cert("arborctl"))).is_ok());
        let denied = rules.decide(TRIGGER, Some(&cert("observer"))).unwrap_err();
        assert_eq!(denied.method, "arbor.v1.SyncService/TriggerSync");
        assert!(denied.to_string().contains("CN=observer"), "{denied}");
        assert!(denied.to_string().contains("*=arborctl"), "{denied}");
    }

    #[test]
    fn names_match_alternative_names_and_full_service_names() {
        let rules = authz(&["arbor.v1.SyncService/*=observer.arbor-system.svc"]);
        assert!(rules.decide(TRIGGER, Some(&cert("observer"))).is_ok());
        assert!(
            rules
                .decide(
                    "/arbor.v1.HierarchyService/GetTree",
                    Some(&cert("observer"))
                )
                .unwrap_err()
                .to_string()
                .contains("no --grpc-allow rule covers")
        );
    }

    #[test]
    fn without_a_certificate_only_nothing_is_allowed() {
        let rules = authz(&["*=*"]);
        assert!(rules.decide(TRIGGER, Some(&cert("anyone"))).is_ok());
        let denied = rules.decide(TRIGGER, None).unwrap_err();
        assert!(denied.caller.contains("without a client certificate"));
    }

    #[test]
    fn malformed_rules_are_refused_with_the_rule() {
        for bad in [
            "SyncService",
            "SyncService=x",
            "/x=a",
            "*=",
            "SyncService/=",
        ] {
            let error = Authz::from_args(&AuthzArgs {
                grpc_allow: vec![bad.to_owned()],
            })
            .unwrap_err();
            assert!(error.to_string().contains(bad), "{error}");
        }
        assert!(Authz::from_args(&AuthzArgs::default()).unwrap().is_none());
    }
}
