//! How an Arbor client meets a throttling API server (issue 23 item 12): the request is retried
//! by Arbor's policy alone ([`arbor_runtime::throttle`]: `Retry-After`, jitter, a bounded number
//! of attempts), never also by kube-rs's own retry layer underneath, whose backoff grows to
//! minutes and multiplies the attempts.

use std::time::Duration;

use arbor_kube_emu::KubeEmu;
use arbor_kube_emu::faults::Fault;
use arbor_runtime::throttle::RetryThrottledLayer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

/// Far longer than Arbor's policy takes (ten attempts about a second apart); kube-rs's retry
/// layer under it would take minutes for the first attempt alone.
const PATIENCE: Duration = Duration::from_secs(90);

#[tokio::test]
async fn a_refused_request_is_sent_exactly_as_often_as_arbors_policy_says() {
    let emu = KubeEmu::start().await.expect("emulator starts");
    let client = arbor_runtime::client::from_kubeconfig_yaml(&emu.kubeconfig_yaml())
        .await
        .expect("client from the emulator's kubeconfig");
    emu.faults().inject(
        Fault::status(429)
            .verbs(&["get"])
            .resources(&["configmaps"]),
    );
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let answer = tokio::time::timeout(PATIENCE, api.get("anything"))
        .await
        .expect("a throttled request is given up within the policy's attempts");
    let code = match answer {
        Err(kube::Error::Api(status)) => status.code,
        other => panic!("expected the server's 429 after the last attempt, got {other:?}"),
    };
    assert_eq!(code, 429);
    assert_eq!(
        emu.faults().fired(),
        vec![RetryThrottledLayer::default().attempts],
        "each attempt of Arbor's policy is one request: nothing retries underneath it"
    );
}

/// A component's client sends a refused write no more once the component begins to stop (as a
/// lost Lease also makes it): the caller gets the server's 429 at once instead of resends that
/// could land after another replica took over.
#[tokio::test]
async fn a_components_client_resends_nothing_once_the_component_stops() {
    use arbor_runtime::{CommonArgs, Component};
    use clap::Parser as _;
    use kube::api::PostParams;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        common: CommonArgs,
    }

    let emu = KubeEmu::start().await.expect("emulator starts");
    let config = arbor_runtime::client::config_from_kubeconfig_yaml(&emu.kubeconfig_yaml())
        .await
        .expect("configuration from the emulator's kubeconfig");
    let cli = Cli::try_parse_from(["arbor-test", "--leader-election=false"]).unwrap();
    let component = Component::with_config("throttled", cli.common, config).unwrap();
    emu.faults().inject(
        Fault::status(429)
            .verbs(&["create"])
            .resources(&["configmaps"]),
    );
    let api: Api<ConfigMap> = Api::namespaced(component.client(), "default");
    let config_map: ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "refused"}})).unwrap();
    let write = tokio::spawn(async move { api.create(&PostParams::default(), &config_map).await });
    // The first refusal says `Retry-After: 1`: the stop begins while the client waits it out.
    tokio::time::timeout(PATIENCE, async {
        while emu.faults().fired() != vec![1] {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the write is refused once");
    component.shutdown().trigger();

    let answer = tokio::time::timeout(Duration::from_secs(5), write)
        .await
        .expect("the write is answered once stopping, not after the policy's ten attempts")
        .unwrap();
    match answer {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 429),
        other => panic!("expected the server's 429, got {other:?}"),
    }
    assert_eq!(emu.faults().fired(), vec![1], "nothing was resent");
}
