//! Fault injection: make the server misbehave on purpose so clients' failure handling can be
//! tested — answer chosen requests with an error status (409, 429 with `Retry-After`, 500, 503,
//! …), delay them, or end open watch streams so clients must re-watch.
//!
//! A [`Fault`] names the requests it applies to (verbs, `group/resource`s, namespaces,
//! usernames and subresources, `""` for the object itself; an empty list matches anything) and
//! an [`FaultEffect`]. Status faults fire at a
//! deterministic rate: with rate `r`, the k-th matching request fails when `⌊k·r⌋ > ⌊(k−1)·r⌋`
//! (so 1.0 is every request, 0.5 every second one, 0.25 every fourth), at most `times` times.
//! Latency faults delay every matching request; Stall faults delay the first `times` of them. A CloseWatches fault acts once, when injected:
//! it ends the matching watches open at that moment and is not kept.
//!
//! Faults are injected from tests through `KubeEmu::faults()` or over HTTP on the emulator's own
//! listener: `POST /__emu/faults` with one [`Fault`] as JSON (for example
//! `{"verbs":["update"],"resources":["configmaps"],"effect":{"status":{"code":409,"rate":0.5}}}`,
//! `{"effect":{"latency":250}}` in milliseconds, `{"effect":{"stall":{"delay":3000,"times":1}}}`,
//! `{"effect":"closeWatches"}`), `GET` to list,
//! `DELETE` to clear. With no fault injected the request path checks one atomic flag.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// A resource by API group and plural: `apps/deployments`, or `configmaps` for the core group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct GroupResource {
    pub group: String,
    /// The plural, or `*` for every resource of the group.
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: &str, resource: &str) -> GroupResource {
        GroupResource {
            group: group.to_owned(),
            resource: resource.to_owned(),
        }
    }

    /// Splits `group/plural` (or `plural`) without checking it; an empty plural matches nothing.
    pub fn named(text: &str) -> GroupResource {
        let (group, resource) = text.rsplit_once('/').unwrap_or(("", text));
        GroupResource::new(group, resource)
    }

    fn matches(&self, group: &str, resource: &str) -> bool {
        self.group == group && (self.resource == "*" || self.resource == resource)
    }
}

impl FromStr for GroupResource {
    type Err = String;

    fn from_str(text: &str) -> Result<GroupResource, String> {
        let named = GroupResource::named(text);
        if named.resource.is_empty() {
            return Err(format!("expected group/resource or resource, got {text:?}"));
        }
        Ok(named)
    }
}

impl TryFrom<String> for GroupResource {
    type Error = String;

    fn try_from(text: String) -> Result<GroupResource, String> {
        text.parse()
    }
}

impl From<GroupResource> for String {
    fn from(value: GroupResource) -> String {
        value.to_string()
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}", self.resource)
        } else {
            write!(f, "{}/{}", self.group, self.resource)
        }
    }
}

/// What a fault does to the requests it matches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FaultEffect {
    /// Answer with this status code instead of serving the request.
    Status {
        code: u16,
        /// The share of matching requests that fail, 0.0 ..= 1.0 (deterministic, see the module).
        #[serde(default = "every_request")]
        rate: f64,
        /// At most this many failures; then the fault stays but no longer fires.
        #[serde(default)]
        times: Option<u32>,
    },
    /// Delay matching requests by this long (JSON: milliseconds).
    Latency(#[serde(with = "millis")] Duration),
    /// Delay only the first `times` matching requests by `delay` (JSON: milliseconds); the
    /// requests after them are served at once, so a later request can be served before an
    /// earlier one, as two requests to kube-apiserver can be.
    Stall {
        #[serde(with = "millis")]
        delay: Duration,
        times: u32,
    },
    /// End the matching watch streams open now.
    CloseWatches,
}

fn every_request() -> f64 {
    1.0
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        u64::deserialize(deserializer).map(Duration::from_millis)
    }
}

/// Which requests a fault applies to, and what it does. Empty lists match anything.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fault {
    #[serde(default)]
    pub verbs: Vec<String>,
    #[serde(default)]
    pub resources: Vec<GroupResource>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Usernames.
    #[serde(default)]
    pub identities: Vec<String>,
    /// Subresources (`status`, `scale`); `""` names the object itself. Empty: any.
    #[serde(default)]
    pub subresources: Vec<String>,
    pub effect: FaultEffect,
}

impl Fault {
    /// A fault on every request; narrow it with the other methods.
    pub fn new(effect: FaultEffect) -> Fault {
        Fault {
            verbs: Vec::new(),
            resources: Vec::new(),
            namespaces: Vec::new(),
            identities: Vec::new(),
            subresources: Vec::new(),
            effect,
        }
    }

    /// Every matching request fails with `code`.
    pub fn status(code: u16) -> Fault {
        Fault::new(FaultEffect::Status {
            code,
            rate: 1.0,
            times: None,
        })
    }

    /// The first matching request is held for `delay` before it is served: a write in flight
    /// while something else happens.
    pub fn held_once(delay: Duration) -> Fault {
        Fault::new(FaultEffect::Stall { delay, times: 1 })
    }

    pub fn verbs(mut self, verbs: &[&str]) -> Fault {
        self.verbs = verbs.iter().map(|v| (*v).to_owned()).collect();
        self
    }

    /// `group/plural` or `plural` (core group); `group/*` for every resource of a group.
    pub fn resources(mut self, resources: &[&str]) -> Fault {
        self.resources = resources.iter().map(|r| GroupResource::named(r)).collect();
        self
    }

    pub fn namespaces(mut self, namespaces: &[&str]) -> Fault {
        self.namespaces = namespaces.iter().map(|n| (*n).to_owned()).collect();
        self
    }

    pub fn identities(mut self, usernames: &[&str]) -> Fault {
        self.identities = usernames.iter().map(|u| (*u).to_owned()).collect();
        self
    }

    /// Only requests to these subresources (`status`); `""` is a request to the object itself.
    pub fn subresources(mut self, subresources: &[&str]) -> Fault {
        self.subresources = subresources.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    pub fn matches(&self, request: &FaultTarget<'_>) -> bool {
        let listed = |list: &[String], value: &str| {
            list.is_empty() || list.iter().any(|entry| entry == "*" || entry == value)
        };
        listed(&self.verbs, request.verb)
            && (self.resources.is_empty()
                || self
                    .resources
                    .iter()
                    .any(|r| r.matches(request.group, request.resource)))
            && listed(&self.namespaces, request.namespace)
            && listed(&self.identities, request.identity)
            && (self.subresources.is_empty()
                || self.subresources.iter().any(|s| s == request.subresource))
    }
}

/// The request a fault is matched against.
#[derive(Debug, Clone, Copy)]
pub struct FaultTarget<'a> {
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    pub namespace: &'a str,
    pub identity: &'a str,
    /// `""` for the object itself.
    pub subresource: &'a str,
}

/// What the faults decided for one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultOutcome {
    pub delay: Duration,
    pub status: Option<u16>,
}

#[derive(Debug)]
struct Armed {
    fault: Fault,
    matched: u64,
    fired: u32,
}

impl Armed {
    /// Counts a matching request; whether a status fault fires on it.
    fn fires(&mut self, rate: f64, times: Option<u32>) -> bool {
        self.matched += 1;
        let rate = rate.clamp(0.0, 1.0);
        // Exact for the rates tests use (1, 1/2, 1/4, …); floating-point is fine at this scale.
        let due =
            ((self.matched as f64) * rate).floor() > (((self.matched - 1) as f64) * rate).floor();
        let allowed = times.is_none_or(|limit| self.fired < limit);
        if due && allowed {
            self.fired += 1;
        }
        due && allowed
    }
}

#[derive(Debug)]
struct Inner {
    armed: Mutex<Vec<Armed>>,
    any: AtomicBool,
    /// The latest CloseWatches fault; open watches listen for changes.
    closer: watch::Sender<Option<Arc<Fault>>>,
}

/// The server's faults; cheap to clone (a handle).
#[derive(Debug, Clone)]
pub struct Faults {
    inner: Arc<Inner>,
}

impl Default for Faults {
    fn default() -> Faults {
        Faults {
            inner: Arc::new(Inner {
                armed: Mutex::new(Vec::new()),
                any: AtomicBool::new(false),
                closer: watch::Sender::new(None),
            }),
        }
    }
}

impl Faults {
    fn armed(&self) -> MutexGuard<'_, Vec<Armed>> {
        self.inner
            .armed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds a fault (a CloseWatches fault acts now and is not kept).
    pub fn inject(&self, fault: Fault) {
        if fault.effect == FaultEffect::CloseWatches {
            self.inner.closer.send_replace(Some(Arc::new(fault)));
            return;
        }
        let mut armed = self.armed();
        armed.push(Armed {
            fault,
            matched: 0,
            fired: 0,
        });
        self.inner.any.store(true, Ordering::Release);
    }

    /// Removes every fault.
    pub fn clear(&self) {
        let mut armed = self.armed();
        armed.clear();
        self.inner.any.store(false, Ordering::Release);
    }

    /// The faults in effect, in injection order.
    pub fn list(&self) -> Vec<Fault> {
        self.armed()
            .iter()
            .map(|armed| armed.fault.clone())
            .collect()
    }

    /// How many times each status or stall fault has fired, in injection order (0 for latency
    /// faults).
    pub fn fired(&self) -> Vec<u32> {
        self.armed().iter().map(|armed| armed.fired).collect()
    }

    /// Decides the delay and status for a request; the first status fault that fires wins.
    pub fn decide(&self, request: &FaultTarget<'_>) -> FaultOutcome {
        let mut outcome = FaultOutcome::default();
        if !self.inner.any.load(Ordering::Acquire) {
            return outcome;
        }
        for armed in self.armed().iter_mut() {
            if !armed.fault.matches(request) {
                continue;
            }
            match armed.fault.effect.clone() {
                FaultEffect::Latency(delay) => outcome.delay += delay,
                FaultEffect::Stall { delay, times } => {
                    if armed.fires(1.0, Some(times)) {
                        outcome.delay += delay;
                    }
                }
                FaultEffect::Status { code, rate, times } => {
                    if armed.fires(rate, times) && outcome.status.is_none() {
                        outcome.status = Some(code);
                    }
                }
                FaultEffect::CloseWatches => {}
            }
        }
        outcome
    }

    /// A receiver that changes whenever watches are told to close.
    pub fn watch_closer(&self) -> watch::Receiver<Option<Arc<Fault>>> {
        self.inner.closer.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target<'a>(verb: &'a str, resource: &'a str) -> FaultTarget<'a> {
        FaultTarget {
            verb,
            group: "",
            resource,
            namespace: "ns",
            identity: "alice",
            subresource: "",
        }
    }

    #[test]
    fn a_fault_on_a_subresource_leaves_the_object_itself_alone() {
        let faults = Faults::default();
        faults.inject(
            Fault::status(500)
                .verbs(&["patch"])
                .subresources(&["status"]),
        );
        let object = target("patch", "gittracks");
        let status = FaultTarget {
            subresource: "status",
            ..object
        };
        assert_eq!(faults.decide(&object).status, None);
        assert_eq!(faults.decide(&status).status, Some(500));
    }

    #[test]
    fn a_half_rate_fires_on_every_second_matching_request() {
        let faults = Faults::default();
        faults.inject(Fault::new(FaultEffect::Status {
            code: 503,
            rate: 0.5,
            times: None,
        }));
        let fired: Vec<Option<u16>> = (0..4)
            .map(|_| faults.decide(&target("get", "configmaps")).status)
            .collect();
        assert_eq!(fired, vec![None, Some(503), None, Some(503)]);
    }

    #[test]
    fn times_bounds_the_failures_and_other_requests_pass() {
        let faults = Faults::default();
        faults.inject(
            Fault::new(FaultEffect::Status {
                code: 409,
                rate: 1.0,
                times: Some(2),
            })
            .verbs(&["update"])
            .resources(&["configmaps"]),
        );
        assert_eq!(faults.decide(&target("get", "configmaps")).status, None);
        assert_eq!(faults.decide(&target("update", "secrets")).status, None);
        let updates: Vec<Option<u16>> = (0..3)
            .map(|_| faults.decide(&target("update", "configmaps")).status)
            .collect();
        assert_eq!(updates, vec![Some(409), Some(409), None]);
        assert_eq!(faults.fired(), vec![2]);
        faults.clear();
        assert!(faults.list().is_empty());
    }

    #[test]
    fn a_stall_delays_only_the_first_matching_requests() {
        let faults = Faults::default();
        let stall: Fault = serde_json::from_value(serde_json::json!({
            "verbs": ["patch"],
            "effect": {"stall": {"delay": 3000, "times": 1}}
        }))
        .expect("parses");
        faults.inject(stall);
        assert_eq!(
            faults.decide(&target("get", "configmaps")).delay,
            Duration::ZERO
        );
        let delays: Vec<Duration> = (0..3)
            .map(|_| faults.decide(&target("patch", "configmaps")).delay)
            .collect();
        assert_eq!(
            delays,
            vec![Duration::from_secs(3), Duration::ZERO, Duration::ZERO]
        );
        assert_eq!(faults.fired(), vec![1]);
    }

    #[test]
    fn faults_round_trip_through_json() {
        let fault: Fault = serde_json::from_value(serde_json::json!({
            "verbs": ["list"],
            "resources": ["apps/deployments", "configmaps"],
            "effect": {"latency": 250}
        }))
        .expect("parses");
        assert_eq!(
            fault.effect,
            FaultEffect::Latency(Duration::from_millis(250))
        );
        assert_eq!(
            fault.resources[0],
            GroupResource::new("apps", "deployments")
        );
        let back = serde_json::to_value(&fault).expect("serializes");
        assert_eq!(back["resources"][1], "configmaps");
        let close: Fault =
            serde_json::from_value(serde_json::json!({"effect": "closeWatches"})).expect("parses");
        assert_eq!(close.effect, FaultEffect::CloseWatches);
    }
}
