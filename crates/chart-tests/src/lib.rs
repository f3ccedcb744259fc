//! Tests of Arbor's deployment artefacts; this library is empty on purpose.
//!
//! The checks live in `tests/`:
//! - `lint.rs`: `helm lint` accepts the chart with its defaults and with the non-default value
//!   sets Arbor documents, and `values.schema.json` rejects malformed values;
//! - `render.rs`: every object `helm template` renders is a valid object of its Kubernetes
//!   kind (deserialised into the k8s-openapi type, with unknown fields reported), and the
//!   chart's promises hold: hardened containers, probes, resources, the flags each binary
//!   takes, one CA behind the webhook and gRPC certificates, least-privilege RBAC;
//! - `deploy.rs`: `deploy/arbor.yaml` is what `make chart` renders today;
//! - `dockerfiles.rs`: each image in `docker/` builds a package and binary the workspace has.
//!
//! They run the `helm` binary: `$HELM`, else `.tools/helm` (installed by `make helm`, which
//! `make test` runs first), else `helm` on `PATH`. Without one they fail and say so.
