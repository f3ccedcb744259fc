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
