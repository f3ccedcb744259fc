//! From a source's auth Secret to the fetch side's [`Credentials`].
//!
//! A GitTrack reads the Secret in its own namespace, a ClusterGitTrack the one its
//! `secretRef.namespace` names ([`GitSource::resolved_auth`](arbor_api::GitSource)). The keys are
//! those of the `kubernetes.io/ssh-auth` and `kubernetes.io/basic-auth` Secret types, plus
//! `token`.

use std::collections::BTreeMap;

use arbor_api::source::{AuthType, secret_keys};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use super::error::ControllerError;
use super::source_handle::AuthLocation;
use crate::fetch::Credentials;

/// Reads the credentials at `auth`; no auth means anonymous access.
pub async fn read(
    client: &kube::Client,
    auth: Option<&AuthLocation>,
) -> Result<Credentials, ControllerError> {
    let Some(auth) = auth else {
        return Ok(Credentials::None);
    };
    let secret_name = format!("{}/{}", auth.namespace, auth.name);
    let api: Api<Secret> = Api::namespaced(client.clone(), &auth.namespace);
    let secret = api
        .get_opt(&auth.name)
        .await
        .map_err(|source| ControllerError::kube("read secret", &secret_name, source))?
        .ok_or_else(|| ControllerError::Secret {
            secret: secret_name.clone(),
            problem: "not found".into(),
        })?;
    let data = secret_strings(&secret);
    credentials_from(auth.type_, &data).map_err(|problem| ControllerError::Secret {
        secret: secret_name,
        problem,
    })
}

/// The Secret's `data` and `stringData` as text (`stringData` wins, as on write).
fn secret_strings(secret: &Secret) -> BTreeMap<String, String> {
    let mut strings: BTreeMap<String, String> = secret
        .data
        .iter()
        .flatten()
        .map(|(key, value)| (key.clone(), String::from_utf8_lossy(&value.0).into_owned()))
        .collect();
    strings.extend(secret.string_data.clone().unwrap_or_default());
    strings
}

/// Maps the Secret's keys for `type_` to credentials, or names the missing key.
pub fn credentials_from(
    type_: AuthType,
    data: &BTreeMap<String, String>,
) -> Result<Credentials, String> {
    let key = |name: &str| {
        data.get(name)
            .filter(|value| !value.is_empty())
            .cloned()
            .ok_or_else(|| format!("key {name:?} is missing or empty ({type_:?} credentials)"))
    };
    Ok(match type_ {
        AuthType::Ssh => Credentials::SshKey {
            private_key_pem: key(secret_keys::SSH_PRIVATE_KEY)?,
            passphrase: data.get("passphrase").cloned(),
            known_hosts: key(secret_keys::KNOWN_HOSTS)?,
        },
        AuthType::Basic => Credentials::Basic {
            username: key(secret_keys::USERNAME)?,
            password: key(secret_keys::PASSWORD)?,
        },
        AuthType::Token => Credentials::Token {
            token: key(secret_keys::TOKEN)?,
            username: data.get(secret_keys::USERNAME).cloned(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn basic_secret_maps_to_basic_credentials() {
        let credentials = credentials_from(
            AuthType::Basic,
            &data(&[("username", "u"), ("password", "p")]),
        )
        .unwrap();
        assert!(
            matches!(credentials, Credentials::Basic { username, password } if username == "u" && password == "p")
        );
    }

    #[test]
    fn ssh_secret_without_known_hosts_names_the_key() {
        let error =
            credentials_from(AuthType::Ssh, &data(&[("ssh-privatekey", "KEY")])).unwrap_err();
        assert!(error.contains("known_hosts"), "{error}");
    }

    #[test]
    fn token_secret_takes_an_optional_username() {
        let credentials = credentials_from(
            AuthType::Token,
            &data(&[("token", "t"), ("username", "bot")]),
        )
        .unwrap();
        assert!(
            matches!(credentials, Credentials::Token { token, username: Some(user) } if token == "t" && user == "bot")
        );
    }
}
