//! The emulator's own HTTP endpoints, on its API listener only (never part of the Kubernetes
//! API; authenticated like any request, not faulted, not accounted):
//!
//! - `GET /__emu/faults`: the faults in effect, as a JSON array of [`Fault`]s.
//! - `POST /__emu/faults`: inject one [`Fault`] (JSON, for example
//!   `{"verbs":["update"],"resources":["configmaps"],"effect":{"status":{"code":409,"rate":0.5}}}`,
//!   `{"effect":{"latency":250}}` in milliseconds, `{"resources":["apps/deployments"],"effect":"closeWatches"}`).
//! - `DELETE /__emu/faults`: remove every fault.
//! - `GET /__emu/requests`: the request report (`total`, `writes`, `counts`, `records`, see
//!   [`crate::accounting`]).
//! - `DELETE /__emu/requests`: forget the requests recorded so far.

use axum::body::{Body, Bytes};
use http::{Method, Response};
use serde_json::json;

use crate::api::{Shared, json_response};
use crate::faults::Fault;
use crate::status::ApiError;

pub fn serve(
    shared: &Shared,
    method: &Method,
    path: &str,
    body: &Bytes,
) -> Result<Response<Body>, ApiError> {
    let value = |v: serde_json::Value| Ok(json_response(200, &v));
    match (path, method) {
        ("faults", &Method::GET) => value(json!(shared.faults.list())),
        ("faults", &Method::POST) => {
            let fault: Fault = serde_json::from_slice(body)
                .map_err(|error| ApiError::bad_request(format!("decoding the fault: {error}")))?;
            shared.faults.inject(fault.clone());
            Ok(json_response(201, &json!(fault)))
        }
        ("faults", &Method::DELETE) => {
            shared.faults.clear();
            value(json!({}))
        }
        ("requests", &Method::GET) => value(json!(shared.requests.report())),
        ("requests", &Method::DELETE) => {
            shared.requests.reset();
            value(json!({}))
        }
        ("faults" | "requests", _) => Err(ApiError::method_not_allowed()),
        _ => Err(ApiError::no_such_route()),
    }
}
