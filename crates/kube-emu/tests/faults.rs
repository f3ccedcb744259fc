//! Fault injection seen by kube-rs clients: injected statuses, latency, closed watches; and the
//! admin endpoint that injects them over HTTP.

mod support;

use std::time::Duration;

use arbor_kube_emu::faults::{Fault, FaultEffect};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use serde_json::json;
use support::{PATIENCE, api_status, config_map};

/// A client that surfaces 429 and 503 instead of retrying them, as kube-rs does by default.
async fn client_without_retries(emu: &arbor_kube_emu::KubeEmu) -> kube::Client {
    let mut config = support::config_from(&emu.kubeconfig_yaml()).await;
    config.default_retry = false;
    kube::Client::try_from(config).expect("client")
}

#[tokio::test]
async fn each_injected_status_reaches_the_client() {
    let (emu, client) = support::start().await;
    let api: Api<ConfigMap> = Api::namespaced(client_without_retries(&emu).await, "default");
    support::create(
        &Api::namespaced(client, "default"),
        &config_map("target", &[]),
    )
    .await;
    for (code, reason) in [
        (409, "Conflict"),
        (429, "TooManyRequests"),
        (500, "InternalError"),
        (503, "ServiceUnavailable"),
    ] {
        emu.faults().inject(
            Fault::status(code)
                .verbs(&["get"])
                .resources(&["configmaps"]),
        );
        let status = api_status(api.get("target").await.unwrap_err());
        assert_eq!((status.code, status.reason.as_str()), (code, reason));
        emu.faults().clear();
    }
    api.get("target").await.expect("no fault once cleared");
    emu.shutdown().await;
}

#[tokio::test]
async fn a_retrying_client_gets_through_a_bounded_fault() {
    let (emu, client) = support::start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    support::create(&api, &config_map("target", &[])).await;
    emu.faults().inject(
        Fault::new(FaultEffect::Status {
            code: 503,
            rate: 1.0,
            times: Some(2),
        })
        .verbs(&["get"]),
    );
    emu.requests().reset();
    api.get("target").await.expect("kube-rs retries 503");
    let codes: Vec<u16> = emu.requests().snapshot().iter().map(|r| r.code).collect();
    assert_eq!(codes, vec![503, 503, 200]);
    emu.shutdown().await;
}

#[tokio::test]
async fn faults_match_only_their_resources_identities_and_rate() {
    let (emu, client) = support::start().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    support::create(&api, &config_map("target", &[])).await;
    emu.faults().inject(
        Fault::new(FaultEffect::Status {
            code: 409,
            rate: 0.5,
            times: None,
        })
        .resources(&["configmaps"])
        .identities(&["system:admin"]),
    );
    emu.faults()
        .inject(Fault::status(500).identities(&["somebody-else"]));
    let mut outcomes = Vec::new();
    for _ in 0..4 {
        outcomes.push(
            api.get("target")
                .await
                .map_err(|e| api_status(e).code)
                .err(),
        );
    }
    assert_eq!(outcomes, vec![None, Some(409), None, Some(409)]);
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client, "default");
    secrets
        .list(&Default::default())
        .await
        .expect("other resources are untouched");
    assert_eq!(emu.faults().fired(), vec![2, 0]);
    emu.shutdown().await;
}

#[tokio::test]
async fn injected_latency_delays_the_answer() {
    let (emu, client) = support::start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    emu.faults()
        .inject(Fault::new(FaultEffect::Latency(Duration::from_millis(300))).verbs(&["list"]));
    let started = tokio::time::Instant::now();
    api.list(&Default::default()).await.expect("listed, late");
    // A lower bound only: the server slept at least this long before answering.
    assert!(started.elapsed() >= Duration::from_millis(300));
    emu.shutdown().await;
}

type Events = tokio::sync::mpsc::UnboundedReceiver<watcher::Event<ConfigMap>>;

async fn next(events: &mut Events) -> watcher::Event<ConfigMap> {
    tokio::time::timeout(PATIENCE, events.recv())
        .await
        .expect("an event in time")
        .expect("the watcher goes on")
}

#[tokio::test]
async fn closed_watches_make_a_watcher_reconnect() {
    let (emu, client) = support::start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    // The watcher runs on its own task: it only issues requests while polled.
    let (sender, mut events): (_, Events) = tokio::sync::mpsc::unbounded_channel();
    let stream = watcher(api.clone(), watcher::Config::default());
    let driver = tokio::spawn(async move {
        let mut stream = stream.boxed();
        while let Some(event) = stream.try_next().await.expect("no watch error") {
            if sender.send(event).is_err() {
                break;
            }
        }
    });
    while !matches!(next(&mut events).await, watcher::Event::InitDone) {}
    // The watch request is made once the initial list is done; wait until the server has it.
    let watching = |emu: &arbor_kube_emu::KubeEmu| emu.requests().count("watch", "configmaps");
    tokio::time::timeout(PATIENCE, async {
        while watching(&emu) == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the watcher watches");
    emu.faults()
        .inject(Fault::new(FaultEffect::CloseWatches).resources(&["configmaps"]));
    tokio::time::timeout(PATIENCE, async {
        while watching(&emu) < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the watcher re-watches");
    api.create(&PostParams::default(), &config_map("after", &[]))
        .await
        .expect("created");
    loop {
        if let watcher::Event::Apply(object) = next(&mut events).await {
            assert_eq!(object.metadata.name.as_deref(), Some("after"));
            break;
        }
    }
    driver.abort();
    emu.shutdown().await;
}

#[tokio::test]
async fn the_admin_endpoint_injects_lists_and_clears_faults() {
    let (emu, _) = support::start().await;
    let client = client_without_retries(&emu).await;
    let fault = json!({"verbs": ["list"], "resources": ["configmaps"], "effect": {"status": {"code": 503, "times": 1}}});
    let (code, body) = support::post(&client, "/__emu/faults", fault).await;
    assert_eq!(code, 201, "{body}");
    let (_, listed) = support::get(&client, "/__emu/faults").await;
    assert_eq!(listed[0]["effect"]["status"]["code"], 503);
    assert_eq!(listed[0]["resources"][0], "configmaps");
    let (code, _) = support::get(&client, "/api/v1/namespaces/default/configmaps").await;
    assert_eq!(code, 503);
    let (code, _) =
        support::raw(&client, "DELETE", "/__emu/faults", "application/json", None).await;
    assert_eq!(code, 200);
    assert!(emu.faults().list().is_empty());
    let (code, body) =
        support::post(&client, "/__emu/faults", json!({"effect": {"explode": {}}})).await;
    assert_eq!(code, 400, "{body}");
    emu.shutdown().await;
}

/// A write the server has taken is carried out even when its client stops waiting for the
/// answer (as kube-apiserver may): here the client gives up on a create the server holds 1 s.
#[tokio::test]
async fn a_write_whose_client_stopped_waiting_is_still_carried_out() {
    let (emu, client) = support::start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    emu.faults().inject(
        Fault::new(FaultEffect::Stall {
            delay: Duration::from_secs(1),
            times: 1,
        })
        .verbs(&["create"])
        .resources(&["configmaps"]),
    );
    let gave_up = tokio::time::timeout(
        Duration::from_millis(200),
        api.create(&PostParams::default(), &config_map("abandoned", &[])),
    )
    .await;
    assert!(gave_up.is_err(), "the held create answered within 200 ms");
    assert!(api.get_opt("abandoned").await.unwrap().is_none());
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while api.get_opt("abandoned").await.unwrap().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the abandoned create was never carried out"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    emu.shutdown().await;
}
