//! Looking into the rendered Deployments: a component's container, its flags.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Container, PodSpec};

use super::RELEASE;
use super::manifest::Rendered;

/// "<release>-<component>", the name of a component's Deployment, Service and account.
pub fn component_name(component: &str) -> String {
    format!("{RELEASE}-{component}")
}

/// The component's Deployment; panics when the render has none.
pub fn deployment(rendered: &Rendered, component: &str) -> Deployment {
    rendered.get("Deployment", &component_name(component))
}

pub fn pod_spec(deployment: &Deployment) -> PodSpec {
    deployment
        .spec
        .template
        .spec
        .clone()
        .unwrap_or_else(|| panic!("Deployment {:?} has no pod spec", deployment.metadata.name))
}

/// The one container of a component's pod.
pub fn container(rendered: &Rendered, component: &str) -> Container {
    let pod = pod_spec(&deployment(rendered, component));
    assert_eq!(pod.containers.len(), 1, "{component} runs one container");
    pod.containers.into_iter().next().expect("one container")
}

/// The container's arguments.
pub fn args(rendered: &Rendered, component: &str) -> Vec<String> {
    container(rendered, component).args.unwrap_or_default()
}

/// The value after `flag` in `args` (flags are written `--flag value`), if the flag is there.
pub fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let positions: Vec<usize> = args
        .iter()
        .enumerate()
        .filter(|(_, arg)| *arg == flag)
        .map(|(index, _)| index)
        .collect();
    assert!(
        positions.len() <= 1,
        "{flag} is passed more than once: {args:?}"
    );
    positions.first().map(|index| {
        args.get(index + 1)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("{flag} has no value: {args:?}"))
    })
}

/// Asserts the flags a component passes, by name and value.
pub fn assert_flags(rendered: &Rendered, component: &str, expected: &[(&str, &str)]) {
    let args = args(rendered, component);
    for (flag, value) in expected {
        assert_eq!(
            flag_value(&args, flag),
            Some(*value),
            "[{}] {component} passes {flag} {value}; its args: {args:?}",
            rendered.set
        );
    }
}

/// `config.yaml` of the hierarchy configuration ConfigMap (mounted by hierarchy and webhook).
pub fn hierarchy_config(rendered: &Rendered) -> String {
    let config_map: ConfigMap = rendered.get(
        "ConfigMap",
        &format!("{}-config", component_name("hierarchy")),
    );
    config_map
        .data
        .unwrap_or_default()
        .remove("config.yaml")
        .unwrap_or_else(|| panic!("[{}] the ConfigMap holds no config.yaml", rendered.set))
}
