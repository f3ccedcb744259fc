//! A child process owned by a guard: its stdout and stderr go to one log file, it can be waited
//! on for a log line or a port, and it is stopped when the guard is dropped.
//!
//! Stopping sends SIGTERM and gives the process a grace period to drain before SIGKILL, the
//! way a kubelet stops a container. Signals are sent with the `kill` command because the
//! workspace forbids `unsafe`, and `std` only offers SIGKILL.

use std::ffi::OsString;
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::Error;

/// How long a dropped process may take to exit after SIGTERM.
pub const DROP_GRACE: Duration = Duration::from_secs(5);

/// Lines of the log shown when a process fails.
const TAIL_LINES: usize = 30;

/// What to start.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    name: String,
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    log: PathBuf,
}

impl ProcessSpec {
    /// `program`, called `name` in messages, logging to `log` (truncated at start).
    pub fn new(name: &str, program: impl Into<PathBuf>, log: impl Into<PathBuf>) -> Self {
        Self {
            name: name.to_owned(),
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            log: log.into(),
        }
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<I, A>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = A>,
        A: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Starts the process.
    pub fn start(&self) -> Result<Process, Error> {
        if let Some(dir) = self.log.parent() {
            std::fs::create_dir_all(dir).map_err(Error::io(format!(
                "creating the log directory {}",
                dir.display()
            )))?;
        }
        let log = File::create(&self.log).map_err(Error::io(format!(
            "creating the log {}",
            self.log.display()
        )))?;
        let stderr = log
            .try_clone()
            .map_err(Error::io(format!("sharing the log {}", self.log.display())))?;
        let child = Command::new(&self.program)
            .args(&self.args)
            .envs(self.env.iter().map(|(key, value)| (key, value)))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(stderr)
            .spawn()
            .map_err(Error::io(format!(
                "starting {} ({})",
                self.name,
                self.program.display()
            )))?;
        Ok(Process {
            spec: self.clone(),
            child: Some(child),
        })
    }
}

/// A running child process; stopped on drop.
#[derive(Debug)]
pub struct Process {
    spec: ProcessSpec,
    child: Option<Child>,
}

impl Process {
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    pub fn log_path(&self) -> &Path {
        &self.spec.log
    }

    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The whole log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.spec.log).unwrap_or_default()
    }

    /// The last lines of the log, for error messages.
    pub fn log_tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n")
    }

    /// Fails when the process has exited.
    pub fn ensure_running(&mut self, waiting_for: &str) -> Result<(), Error> {
        let exited = match self.child.as_mut() {
            Some(child) => child
                .try_wait()
                .map_err(Error::io(format!("checking on {}", self.spec.name)))?,
            None => return Err(self.not_running(&format!("{waiting_for}: checking on"))),
        };
        match exited {
            Some(status) => {
                self.child = None;
                Err(self.exited(status, waiting_for))
            }
            None => Ok(()),
        }
    }

    fn exited(&self, status: ExitStatus, waiting_for: &str) -> Error {
        Error::Exited {
            process: self.spec.name.clone(),
            status,
            waiting_for: waiting_for.to_owned(),
            log: self.spec.log.clone(),
            tail: self.log_tail(),
        }
    }

    /// Waits until a log line contains `needle`; returns that line.
    pub async fn wait_for_line(
        &mut self,
        needle: &str,
        timeout: Duration,
    ) -> Result<String, Error> {
        let what = format!("{} to log {needle:?}", self.spec.name);
        let start = Instant::now();
        loop {
            if let Some(line) = self.log().lines().find(|line| line.contains(needle)) {
                return Ok(line.to_owned());
            }
            self.ensure_running(&what)?;
            if start.elapsed() > timeout {
                return Err(Error::Timeout {
                    what: format!("{what}; last lines:\n{}", self.log_tail()),
                    after: timeout,
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the process accepts connections on `addr`.
    pub async fn wait_for_port(
        &mut self,
        addr: SocketAddr,
        timeout: Duration,
    ) -> Result<(), Error> {
        let what = format!("{} to listen on {addr}", self.spec.name);
        let start = Instant::now();
        loop {
            self.ensure_running(&what)?;
            if crate::ports::accepts(addr) {
                return Ok(());
            }
            if start.elapsed() > timeout {
                return Err(Error::Timeout {
                    what: format!("{what}; last lines:\n{}", self.log_tail()),
                    after: timeout,
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends `signal` (a name such as `TERM` or `INT`) to the process.
    pub fn signal(&self, signal: &str) -> Result<(), Error> {
        let Some(pid) = self.pid() else {
            return Ok(());
        };
        let status = Command::new("kill")
            .args(["-s", signal, &pid.to_string()])
            .stderr(Stdio::null())
            .status()
            .map_err(Error::io(format!(
                "sending SIG{signal} to {}",
                self.spec.name
            )))?;
        if status.success() {
            Ok(())
        } else {
            Err(Error::Invalid {
                what: format!("sending SIG{signal} to {} (pid {pid})", self.spec.name),
                message: format!("kill exited with {status}"),
            })
        }
    }

    /// Kills the process at once (SIGKILL), as a crash would, and reaps it.
    pub fn kill(&mut self) -> Result<ExitStatus, Error> {
        let Some(mut child) = self.child.take() else {
            return Err(self.not_running("killing"));
        };
        child
            .kill()
            .map_err(Error::io(format!("killing {}", self.spec.name)))?;
        child
            .wait()
            .map_err(Error::io(format!("reaping {}", self.spec.name)))
    }

    /// SIGTERM, then SIGKILL if the process has not exited within `grace`.
    pub fn stop(&mut self, grace: Duration) -> Result<ExitStatus, Error> {
        let Some(mut child) = self.child.take() else {
            return Err(self.not_running("stopping"));
        };
        let pid = child.id();
        // An error here means the process is already gone; `try_wait` below tells.
        let _ = Command::new("kill")
            .args(["-s", "TERM", &pid.to_string()])
            .stderr(Stdio::null())
            .status();
        let start = Instant::now();
        loop {
            if let Some(status) = child
                .try_wait()
                .map_err(Error::io(format!("waiting for {}", self.spec.name)))?
            {
                return Ok(status);
            }
            if start.elapsed() > grace {
                tracing::warn!(process = %self.spec.name, ?grace, "did not stop after SIGTERM; killing");
                let _ = child.kill();
                return child
                    .wait()
                    .map_err(Error::io(format!("reaping {}", self.spec.name)));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the process to exit by itself.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus, Error> {
        let start = Instant::now();
        loop {
            let Some(child) = self.child.as_mut() else {
                return Err(self.not_running("waiting for the exit of"));
            };
            if let Some(status) = child
                .try_wait()
                .map_err(Error::io(format!("waiting for {}", self.spec.name)))?
            {
                self.child = None;
                return Ok(status);
            }
            if start.elapsed() > timeout {
                return Err(Error::Timeout {
                    what: format!("{} to exit", self.spec.name),
                    after: timeout,
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Starts the same command again (after [`Process::kill`] or [`Process::stop`]); the log
    /// starts afresh.
    pub fn restart(&mut self) -> Result<(), Error> {
        if self.child.is_some() {
            return Err(Error::Invalid {
                what: format!("restarting {}", self.spec.name),
                message: "it is still running".to_owned(),
            });
        }
        *self = self.spec.start()?;
        Ok(())
    }

    fn not_running(&self, doing: &str) -> Error {
        Error::Invalid {
            what: format!("{doing} {}", self.spec.name),
            message: "it is not running".to_owned(),
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = self.stop(DROP_GRACE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(dir: &Path, script: &str) -> ProcessSpec {
        ProcessSpec::new("sh", "/bin/sh", dir.join("sh.log")).args(["-c", script])
    }

    #[tokio::test]
    async fn output_reaches_the_log_and_a_line_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let mut process = shell(dir.path(), "echo out; echo ready on stderr >&2; sleep 30")
            .start()
            .unwrap();
        let line = process
            .wait_for_line("ready", Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(line, "ready on stderr");
        assert!(process.log().contains("out"));
    }

    #[tokio::test]
    async fn a_process_that_exits_fails_the_wait_with_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut process = shell(dir.path(), "echo broken flag; exit 3")
            .start()
            .unwrap();
        let error = process
            .wait_for_line("never", Duration::from_secs(10))
            .await
            .unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, Error::Exited { .. }), "{message}");
        assert!(message.contains("broken flag"), "{message}");
    }

    #[tokio::test]
    async fn stop_terminates_and_kill_ignores_the_handler() {
        let dir = tempfile::tempdir().unwrap();
        let mut polite = shell(
            dir.path(),
            "trap 'echo bye; exit 0' TERM; echo up; while :; do sleep 0.1; done",
        )
        .start()
        .unwrap();
        polite
            .wait_for_line("up", Duration::from_secs(10))
            .await
            .unwrap();
        let status = polite.stop(Duration::from_secs(10)).unwrap();
        assert!(status.success(), "{status}");
        assert!(polite.log().contains("bye"));

        let mut stubborn = shell(
            dir.path(),
            "trap '' TERM; echo up; while :; do sleep 0.1; done",
        )
        .start()
        .unwrap();
        stubborn
            .wait_for_line("up", Duration::from_secs(10))
            .await
            .unwrap();
        let status = stubborn.stop(Duration::from_millis(300)).unwrap();
        assert!(!status.success(), "SIGKILL was expected: {status}");
    }

    #[tokio::test]
    async fn a_killed_process_restarts_with_the_same_command() {
        let dir = tempfile::tempdir().unwrap();
        let mut process = shell(dir.path(), "echo started; sleep 30").start().unwrap();
        process
            .wait_for_line("started", Duration::from_secs(10))
            .await
            .unwrap();
        let first = process.pid();
        process.kill().unwrap();
        assert!(process.pid().is_none());
        assert!(process.ensure_running("a restart").is_err());
        process.restart().unwrap();
        process
            .wait_for_line("started", Duration::from_secs(10))
            .await
            .unwrap();
        assert_ne!(process.pid(), first);
    }
}
