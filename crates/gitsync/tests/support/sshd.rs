//! OpenSSH's `sshd`, started for one test as the current user on a free loopback port, with a
//! generated host key and one authorised deploy key.

use std::io::Read as _;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

const SSHD: &str = "/usr/sbin/sshd";

/// An ed25519 key pair written by `ssh-keygen`.
pub struct KeyPair {
    pub private_key: String,
    /// `ssh-ed25519 AAAA…` (type and base64 key, no comment).
    pub public_key: String,
}

impl KeyPair {
    pub fn generate(dir: &Path, name: &str) -> KeyPair {
        let path = dir.join(name);
        let status = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
            .arg(&path)
            .status()
            .expect("ssh-keygen runs (install openssh-client: make deps)");
        assert!(status.success(), "ssh-keygen failed");
        let public = std::fs::read_to_string(path.with_extension("pub")).expect("public key");
        let public_key = public
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");
        KeyPair {
            private_key: std::fs::read_to_string(&path).expect("private key"),
            public_key,
        }
    }
}

pub struct Sshd {
    child: Child,
    port: u16,
    dir: TempDir,
    host_key: KeyPair,
    user: String,
}

impl Sshd {
    /// Starts sshd accepting `authorized` for the current user. Fails the test with a clear
    /// message when sshd is not installed.
    pub fn start(authorized: &KeyPair) -> Sshd {
        assert!(
            Path::new(SSHD).exists(),
            "{SSHD} is missing: the ssh fetch tests need Debian's openssh-server (make deps installs it)"
        );
        // sshd insists on its privilege separation directory, which the Debian service
        // normally creates at start.
        std::fs::create_dir_all("/run/sshd").expect("create /run/sshd");
        let dir = tempfile::tempdir().expect("temporary directory");
        let host_key = KeyPair::generate(dir.path(), "host_ed25519");
        let authorized_keys = dir.path().join("authorized_keys");
        std::fs::write(&authorized_keys, format!("{}\n", authorized.public_key))
            .expect("authorized_keys");
        let port = super::silent_server::closed_port();
        let config = dir.path().join("sshd_config");
        std::fs::write(&config, sshd_config(dir.path(), port)).expect("sshd_config");
        let log = dir.path().join("sshd.log");
        let child = Command::new(SSHD)
            .args(["-D", "-f"])
            .arg(&config)
            .arg("-E")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sshd starts");
        let user = current_user();
        let mut sshd = Sshd {
            child,
            port,
            dir,
            host_key,
            user,
        };
        sshd.wait_until_ready(&log);
        sshd
    }

    /// A `known_hosts` line for this server.
    pub fn known_hosts_line(&self) -> String {
        format!("[127.0.0.1]:{} {}", self.port, self.host_key.public_key)
    }

    pub fn url(&self, repository: &Path) -> String {
        format!(
            "ssh://{}@127.0.0.1:{}{}",
            self.user,
            self.port,
            repository.display()
        )
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_owned()
    }

    fn wait_until_ready(&mut self, log: &Path) {
        let give_up = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "sshd exited ({status}): {}",
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
            if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) {
                stream
                    .set_read_timeout(Some(Duration::from_secs(5)))
                    .unwrap();
                let mut banner = [0u8; 4];
                if stream.read_exact(&mut banner).is_ok() && &banner == b"SSH-" {
                    return;
                }
            }
            assert!(
                Instant::now() < give_up,
                "sshd did not accept connections within 30s: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sshd_config(dir: &Path, port: u16) -> String {
    format!(
        "Port {port}\n\
         ListenAddress 127.0.0.1\n\
         HostKey {dir}/host_ed25519\n\
         PidFile {dir}/sshd.pid\n\
         AuthorizedKeysFile {dir}/authorized_keys\n\
         PubkeyAuthentication yes\n\
         PasswordAuthentication no\n\
         KbdInteractiveAuthentication no\n\
         PermitRootLogin prohibit-password\n\
         StrictModes no\n\
         UsePAM no\n\
         LogLevel VERBOSE\n",
        dir = dir.display()
    )
}

fn current_user() -> String {
    let output = Command::new("id").arg("-un").output().expect("id runs");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}
