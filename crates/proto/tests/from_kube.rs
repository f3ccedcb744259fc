//! Times and conditions as every service answers them.

use std::time::{Duration, UNIX_EPOCH};

use arbor_proto::from_kube;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

#[test]
fn times_convert_exactly_and_a_time_before_the_epoch_stays_before_it() {
    let cases = [
        (UNIX_EPOCH, 0, 0),
        (
            UNIX_EPOCH + Duration::from_millis(1_700_000_000_250),
            1_700_000_000,
            250_000_000,
        ),
        (UNIX_EPOCH - Duration::from_millis(1_500), -2, 500_000_000),
    ];
    for (time, seconds, nanos) in cases {
        let stamp = from_kube::timestamp(time);
        assert_eq!((stamp.seconds, stamp.nanos), (seconds, nanos), "{time:?}");
    }
    let cases = [
        (Timestamp::UNIX_EPOCH, 0, 0),
        (
            Timestamp::new(1_700_000_000, 250_000_000).unwrap(),
            1_700_000_000,
            250_000_000,
        ),
        (Timestamp::new(-1, -500_000_000).unwrap(), -2, 500_000_000),
    ];
    for (time, seconds, nanos) in cases {
        let stamp = from_kube::time(&Time(time));
        assert_eq!((stamp.seconds, stamp.nanos), (seconds, nanos), "{time}");
    }
}

#[test]
fn a_condition_keeps_every_field() {
    let condition = from_kube::condition(&Condition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: "Synced".into(),
        message: "all applied".into(),
        last_transition_time: Time(Timestamp::new(1_700_000_000, 0).unwrap()),
        observed_generation: Some(7),
    });
    assert_eq!(
        (
            condition.r#type.as_str(),
            condition.status.as_str(),
            condition.reason.as_str(),
            condition.message.as_str(),
            condition.observed_generation,
        ),
        ("Ready", "True", "Synced", "all applied", 7)
    );
    assert_eq!(
        condition
            .last_transition_time
            .map(|at| (at.seconds, at.nanos)),
        Some((1_700_000_000, 0))
    );
}
