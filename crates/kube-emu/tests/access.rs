//! Who may talk to the server: HTTPS with the generated CA, bearer tokens from a token file,
//! 401 without one.

mod support;

use arbor_kube_emu::{KubeEmu, StaticToken};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use support::api_status;

async fn secured() -> KubeEmu {
    KubeEmu::builder()
        .tls(true)
        .token(StaticToken::new("s3cret", "alice", "1001", &["developers"]))
        .start()
        .await
        .expect("starts")
}

async fn client_with_token(emu: &KubeEmu, token: Option<&str>) -> kube::Client {
    let mut kubeconfig = Kubeconfig::from_yaml(&emu.kubeconfig_yaml()).expect("parses");
    let auth = AuthInfo {
        token: token.map(|token| token.to_owned().into()),
        ..AuthInfo::default()
    };
    kubeconfig.auth_infos[0].auth_info = Some(auth);
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("usable");
    kube::Client::try_from(config).expect("client")
}

#[tokio::test]
async fn the_kubeconfig_reaches_an_https_server_with_its_token() {
    let emu = secured().await;
    assert!(emu.url().starts_with("https://127.0.0.1:"));
    assert!(emu.ca_pem().is_some());
    let client = support::client(&emu).await;
    let namespaces: Api<Namespace> = Api::all(client);
    let listed = namespaces
        .list(&Default::default())
        .await
        .expect("listed over TLS");
    assert!(
        listed
            .items
            .iter()
            .any(|ns| ns.metadata.name.as_deref() == Some("default"))
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn requests_without_a_valid_token_are_unauthorized() {
    let emu = secured().await;
    for token in [None, Some("wrong")] {
        let client = client_with_token(&emu, token).await;
        let namespaces: Api<Namespace> = Api::all(client);
        let status = api_status(namespaces.list(&Default::default()).await.unwrap_err());
        assert_eq!(status.code, 401, "token {token:?}");
        assert_eq!(status.reason, "Unauthorized");
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn the_server_writes_a_kubeconfig_file() {
    let emu = secured().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("kubeconfig");
    emu.write_kubeconfig(&path).expect("written");
    let kubeconfig = Kubeconfig::read_from(&path).expect("readable");
    assert_eq!(
        kubeconfig.current_context.as_deref(),
        Some("arbor-kube-emu")
    );
    emu.shutdown().await;
}
