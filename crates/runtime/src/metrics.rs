//! One prometheus-client registry per process, with a sub-registry per component.
//!
//! Metrics are registered while a binary starts (the registry needs `&mut` for that) and the
//! registry is then frozen behind an `Arc` for the admin server to encode on every scrape.

use std::sync::Arc;

use prometheus_client::registry::Registry;

/// Registration phase of the process-wide registry; every metric is prefixed `arbor_`.
#[derive(Debug)]
pub struct MetricsRegistry {
    root: Registry,
}

impl Default for MetricsRegistry {
    fn default() -> Self {
        Self {
            root: Registry::with_prefix("arbor"),
        }
    }
}

impl MetricsRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// The sub-registry of one component, prefixing its metrics `arbor_<component>_`.
    pub fn component(&mut self, component: &str) -> &mut Registry {
        self.root.sub_registry_with_prefix(component)
    }

    /// Ends registration; the result is what the admin server encodes.
    pub fn freeze(self) -> Arc<Registry> {
        Arc::new(self.root)
    }
}

/// The registry in the OpenMetrics text format.
pub fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry)
        .expect("writing to a String cannot fail");
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;

    #[test]
    fn component_metrics_carry_the_arbor_and_component_prefix() {
        let mut registry = MetricsRegistry::new();
        let reconciles = Counter::<u64>::default();
        registry
            .component("gitsync")
            .register("reconciles", "Reconciles run", reconciles.clone());
        reconciles.inc();
        let text = encode(&registry.freeze());
        assert!(text.contains("arbor_gitsync_reconciles_total 1"), "{text}");
    }
}
