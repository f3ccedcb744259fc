//! Progress lines on stderr, so that stdout carries only the summary.

use std::time::{Duration, Instant};

/// A step is starting.
pub fn step(what: &str) {
    eprintln!("==> {what}");
}

/// A step finished.
pub fn done(what: &str) {
    eprintln!("    {what}");
}

/// Prints a "still waiting" line at most every `every` while a long wait goes on.
#[derive(Debug)]
pub struct Ticker {
    started: Instant,
    last: Instant,
    every: Duration,
}

impl Ticker {
    pub fn new(every: Duration) -> Self {
        let now = Instant::now();
        Self {
            started: now,
            last: now,
            every,
        }
    }

    /// Prints `waiting` with the time spent so far when a line is due.
    pub fn tick(&mut self, waiting: &str) {
        if self.last.elapsed() >= self.every {
            self.last = Instant::now();
            done(&format!(
                "still waiting ({}s): {waiting}",
                self.started.elapsed().as_secs()
            ));
        }
    }
}
