//! Tests of Arbor's deployment artefacts; this library is empty on purpose.
//!
//! The checks live in `tests/`:
//! - `lint.rs`: `helm lint` accepts the chart with its defaults and with the non-default value
//!   sets Arbor documents, and `values.schema.json` rejects malformed values;
//! - `render.rs`: every object `helm template` renders is a valid object of its Kubernetes
//!   kind (deserialised into the k8s-openapi type, with unknown fields reported), and the
//!   chart's promises hold: hardened containers, probes, resources, the flags each binary
//!   takes, one CA behind the webhook and gRPC certificates, least-privilege RBAC;
//! - `webhook_flags.rs`: the webhook's rendered flags are ones `arbor-webhook` parses into
//!   valid settings, with the hierarchy configuration the chart mounts;
//! - `emulator.rs`: the rendered objects apply to `arbor-kube-emu` with server-side apply,
//!   and the CRDs' kinds and the webhook configuration (with its CA bundle) are served;
//! - `deploy.rs`: `deploy/arbor.yaml` is what `make chart` renders today;
//! - `dockerfiles.rs`: each image in `docker/` builds a package and binary the workspace has.
//!
//! They run the `helm` binary: `$HELM`, else `.tools/helm` (installed by `make helm`, which
//! `make test` runs first), else `helm` on `PATH`. Without one they fail and say so.
