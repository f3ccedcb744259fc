//! Coalescing the drift events of one object.
//!
//! A `kubectl apply` or an operator's loop may write an object several times in quick
//! succession; gitsync needs to hear about it once. Each object's event is held until no new
//! event for it came for the window; the events held for it are merged (latest kind and
//! observed object, union of changed fields).

use std::collections::HashMap;
use std::time::Duration;

use arbor_proto::v1::DriftEvent;
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The default quiet time before an object's drift is passed on.
pub const DEFAULT_WINDOW: Duration = Duration::from_millis(100);

type ObjectKey = (String, String, String, String, String);

fn key_of(event: &DriftEvent) -> ObjectKey {
    let object = event.object.clone().unwrap_or_default();
    (
        object.group,
        object.version,
        object.kind,
        object.namespace,
        object.name,
    )
}

/// Folds `newer` into `held`: the newer event wins, with the fields of both.
pub fn merge(held: &mut DriftEvent, newer: DriftEvent) {
    let mut fields = std::mem::take(&mut held.changed_fields);
    fields.extend(newer.changed_fields.iter().cloned());
    fields.sort();
    fields.dedup();
    *held = newer;
    held.changed_fields = fields;
}

/// Passes events from `input` to `output` (and to `watchers`, the WatchDrift streams), one per
/// object per quiet `window`, until `input` closes or `token` is cancelled.
pub async fn debounce(
    mut input: mpsc::Receiver<DriftEvent>,
    output: mpsc::Sender<DriftEvent>,
    watchers: broadcast::Sender<DriftEvent>,
    window: Duration,
    token: CancellationToken,
) {
    let mut held: HashMap<ObjectKey, (DriftEvent, Instant)> = HashMap::new();
    loop {
        let next_due = held.values().map(|(_, due)| *due).min();
        tokio::select! {
            () = token.cancelled() => return,
            event = input.recv() => match event {
                Some(event) => {
                    let due = Instant::now() + window;
                    match held.entry(key_of(&event)) {
                        std::collections::hash_map::Entry::Occupied(mut entry) => {
                            let (held_event, held_due) = entry.get_mut();
                            merge(held_event, event);
                            *held_due = due;
                        }
                        std::collections::hash_map::Entry::Vacant(entry) => {
                            entry.insert((event, due));
                        }
                    }
                }
                None => return,
            },
            () = sleep_until(next_due) => {
                let now = Instant::now();
                let due: Vec<ObjectKey> = held
                    .iter()
                    .filter(|(_, (_, due))| *due <= now)
                    .map(|(key, _)| key.clone())
                    .collect();
                for key in due {
                    let Some((event, _)) = held.remove(&key) else { continue };
                    // Nobody watching is fine.
                    let _ = watchers.send(event.clone());
                    if output.send(event).await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::{drift_event, object_ref};
    use arbor_proto::v1::DriftKind;

    fn edit(name: &str, field: &str) -> DriftEvent {
        drift_event(
            object_ref("v1", "ConfigMap", Some("team"), name),
            DriftKind::Modified,
            vec![field.to_owned()],
            String::new(),
        )
    }

    // Real time, not tokio's paused clock: its `test-util` feature would give the workspace's
    // tokio a second feature set in builds with tests, and every crate above tokio would be
    // compiled twice by make test and make bench. The window is wide against the 50 ms pause.
    const TEST_WINDOW: Duration = Duration::from_secs(1);

    #[tokio::test]
    async fn edits_of_one_object_within_the_window_are_reported_once() {
        let (input, input_rx) = mpsc::channel(16);
        let (output, mut output_rx) = mpsc::channel(16);
        let (watchers, mut watched) = broadcast::channel(16);
        let token = CancellationToken::new();
        tokio::spawn(debounce(
            input_rx,
            output,
            watchers,
            TEST_WINDOW,
            token.clone(),
        ));

        input.send(edit("a", "data.x")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        input.send(edit("a", "data.y")).await.unwrap();
        input.send(edit("b", "data.z")).await.unwrap();

        let first = output_rx.recv().await.unwrap();
        let second = output_rx.recv().await.unwrap();
        let mut names = [first.object.unwrap().name, second.object.unwrap().name];
        names.sort();
        assert_eq!(names, ["a", "b"]);
        assert!(output_rx.try_recv().is_err(), "one report per object");
        assert_eq!(
            watched.recv().await.unwrap().reporter,
            crate::convert::REPORTER
        );
        token.cancel();
    }

    #[test]
    fn merged_event_keeps_the_fields_of_both() {
        let mut held = edit("a", "data.x");
        merge(&mut held, edit("a", "data.y"));
        assert_eq!(held.changed_fields, ["data.x", "data.y"]);
    }

    #[tokio::test]
    async fn edits_far_apart_are_reported_separately() {
        let (input, input_rx) = mpsc::channel(16);
        let (output, mut output_rx) = mpsc::channel(16);
        let (watchers, _watched) = broadcast::channel(16);
        tokio::spawn(debounce(
            input_rx,
            output,
            watchers,
            Duration::from_millis(50),
            CancellationToken::new(),
        ));
        input.send(edit("a", "data.x")).await.unwrap();
        assert_eq!(output_rx.recv().await.unwrap().changed_fields, ["data.x"]);
        input.send(edit("a", "data.y")).await.unwrap();
        assert_eq!(output_rx.recv().await.unwrap().changed_fields, ["data.y"]);
    }
}
