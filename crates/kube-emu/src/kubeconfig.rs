//! The kubeconfig clients use to reach the emulator: one cluster, one user, one context named
//! `arbor-kube-emu`, with the CA inline and the bearer token when the server requires one.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// What a kubeconfig needs to know about a running server.
#[derive(Debug, Clone)]
pub struct Endpoint<'a> {
    pub url: &'a str,
    pub ca_pem: Option<&'a str>,
    pub token: Option<&'a str>,
    pub namespace: &'a str,
}

/// A YAML scalar that is always read back as the same string.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("strings always serialize")
}

pub const CONTEXT_NAME: &str = "arbor-kube-emu";

pub fn render(endpoint: &Endpoint<'_>) -> String {
    let mut cluster = format!("    server: {}\n", quoted(endpoint.url));
    if let Some(ca) = endpoint.ca_pem {
        cluster.push_str(&format!(
            "    certificate-authority-data: {}\n",
            STANDARD.encode(ca)
        ));
    }
    let user = match endpoint.token {
        Some(token) => format!("  user:\n    token: {}\n", quoted(token)),
        None => "  user: {}\n".to_owned(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {CONTEXT_NAME}\n  cluster:\n{cluster}users:\n- name: {CONTEXT_NAME}\n{user}contexts:\n- name: {CONTEXT_NAME}\n  context:\n    cluster: {CONTEXT_NAME}\n    user: {CONTEXT_NAME}\n    namespace: {}\ncurrent-context: {CONTEXT_NAME}\npreferences: {{}}\n",
        quoted(endpoint.namespace)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tls_kubeconfig_carries_the_ca_and_token() {
        let yaml = render(&Endpoint {
            url: "https://127.0.0.1:6443",
            ca_pem: Some("-----BEGIN CERTIFICATE-----\n"),
            token: Some("secret"),
            namespace: "default",
        });
        assert!(yaml.contains("server: \"https://127.0.0.1:6443\""));
        assert!(yaml.contains("certificate-authority-data: "));
        assert!(yaml.contains("token: \"secret\""));
        assert!(yaml.contains("current-context: arbor-kube-emu"));
    }

    #[test]
    fn a_plain_kubeconfig_has_an_empty_user() {
        let yaml = render(&Endpoint {
            url: "http://127.0.0.1:8080",
            ca_pem: None,
            token: None,
            namespace: "default",
        });
        assert!(yaml.contains("  user: {}\n"));
        assert!(!yaml.contains("certificate-authority-data"));
    }
}
