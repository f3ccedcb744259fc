//! The admission endpoint over real TLS on loopback.

mod support;

use arbor_policy::ownership::ClusterGitTrackMode;
use serde_json::{Value, json};
use support::*;

fn cycle_review() -> Vec<u8> {
    serde_json::to_vec(&review_body(cycle_request())).unwrap()
}

async fn server() -> HttpsServer {
    HttpsServer::start(policy(
        settings(ClusterGitTrackMode::IncludeNamespaced),
        cycle_tree(),
        None,
    ))
    .await
}

#[tokio::test]
async fn a_valid_review_is_answered_with_its_uid_and_the_decision() {
    let server = server().await;
    let (status, body, _) = server.post("/validate", cycle_review()).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let review: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review["kind"], "AdmissionReview");
    let response = &review["response"];
    assert_eq!(response["uid"], "5f1c7a0e-0001-4d1e-9a55-000000000001");
    assert_eq!(response["allowed"], false);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(message.contains("seeds/001 tree cycle"), "{message}");
    assert_eq!(
        server
            .metrics
            .decisions("admission", "seeds/001 tree cycle", false),
        1
    );
}

#[tokio::test]
async fn a_malformed_body_gets_400_with_a_reason() {
    let server = server().await;
    let cases: [(&[u8], &str); 3] = [
        (b"{\"apiVersion\": ", "not JSON"),
        (b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}", "no request"),
        (b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"x\"}}", "malformed"),
    ];
    for (body, reason) in cases {
        let (status, answer, _) = server.post("/validate", body.to_vec()).await;
        let answer = String::from_utf8_lossy(&answer);
        assert_eq!(status, 400, "{answer}");
        assert!(answer.contains(reason), "{answer:?} lacks {reason:?}");
    }
}

#[tokio::test]
async fn an_oversized_body_is_refused_without_reading_it_all() {
    let server = server().await;
    let huge = vec![b' '; arbor_webhook::server::MAX_BODY_BYTES + 1];
    let (status, _, _) = server.post("/validate", huge).await;
    assert_eq!(status, 413);
}

#[tokio::test]
async fn a_certificate_rotated_on_disk_is_served_without_restart() {
    let server = server().await;
    let (_, _, served) = server.post("/validate", cycle_review()).await;
    assert_eq!(served, server.first_der);

    let (_, _, rotated) = write_certificate(&server.ca, server.dir.path());
    assert_ne!(rotated, server.first_der);
    let (status, _, served) = server.post("/validate", cycle_review()).await;
    assert_eq!(status, 200);
    assert_eq!(served, rotated, "the rotated certificate is served");
}

#[tokio::test]
async fn an_allowed_review_carries_warnings() {
    let server = server().await;
    let object = json!({
        "apiVersion": ARBOR,
        "kind": "GitTrackObject",
        "metadata": {"name": "orphan", "namespace": "team-a"},
        "spec": {"name": "x", "kind": "ConfigMap", "data": {}},
    });
    let body = review_body(request(
        "CREATE",
        ("arbor.dev", "v1alpha1", "GitTrackObject"),
        Some("team-a"),
        "orphan",
        "alice",
        Some(object),
        None,
    ));
    let (status, answer, _) = server
        .post("/validate", serde_json::to_vec(&body).unwrap())
        .await;
    assert_eq!(status, 200);
    let review: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(review["response"]["allowed"], true);
    let warning = review["response"]["warnings"][0].as_str().unwrap();
    assert!(warning.contains("names no GitTrack"), "{warning}");
}
