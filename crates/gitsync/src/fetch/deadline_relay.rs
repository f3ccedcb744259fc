//! A loopback TCP relay that gives ssh and plain http fetches a hard deadline.
//!
//! libgit2 blocks in socket reads with no timeout unless process-global options are set, and
//! those can only be set through `unsafe` code, which this workspace forbids. So for ssh and
//! plain http, libgit2 connects to this relay instead of the server, and the relay forwards
//! the bytes. When the deadline passes (or the fetch is stopped), the relay shuts down every
//! socket it holds; libgit2's blocked read then fails at once and the fetch returns, with no
//! thread left hanging on the server. The relay also remembers why it could not reach the
//! server, which is a clearer error than libgit2's view from the far side of the relay.
//!
//! For plain http the `Host` header names the relay, so a server that picks a virtual host by
//! name needs https. https cannot use a relay: rewriting the URL would break certificate
//! verification, and libgit2 1.9's proxy support for https frees the proxy stream before
//! closing the TLS stream on top of it when a certificate is refused. https fetches are bounded
//! by the fetcher's overall deadline instead (see `Fetcher::fetch`).
//!
//! The listener accepts only loopback connections and lives only as long as one fetch.

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use super::{FetchStop, STOP_POLL};

/// The server the relay forwards to.
#[derive(Clone, Debug)]
pub(crate) struct Upstream {
    pub host: String,
    pub port: u16,
}

#[derive(Debug)]
struct RelayState {
    deadline: Instant,
    stopped: AtomicBool,
    timed_out: AtomicBool,
    sockets: Mutex<Vec<TcpStream>>,
    upstream_error: Mutex<Option<String>>,
}

impl RelayState {
    /// Keeps a handle on `stream` so the watchdog can shut it down; refuses (and shuts it
    /// down) once the relay has stopped.
    fn track(&self, stream: &TcpStream) -> bool {
        let mut sockets = self.sockets.lock().unwrap_or_else(PoisonError::into_inner);
        if self.stopped.load(Ordering::SeqCst) {
            let _ = stream.shutdown(Shutdown::Both);
            return false;
        }
        if let Ok(handle) = stream.try_clone() {
            sockets.push(handle);
        }
        true
    }

    fn stop(&self) {
        let sockets = self.sockets.lock().unwrap_or_else(PoisonError::into_inner);
        self.stopped.store(true, Ordering::SeqCst);
        for socket in sockets.iter() {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }

    fn record_upstream_error(&self, error: String) {
        let mut slot = self
            .upstream_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        slot.get_or_insert(error);
    }
}

/// A running relay; dropping it closes every connection and stops its threads.
#[derive(Debug)]
pub(crate) struct DeadlineRelay {
    port: u16,
    state: Arc<RelayState>,
    stop: Option<mpsc::Sender<()>>,
    threads: Vec<JoinHandle<()>>,
}

impl DeadlineRelay {
    /// Relays to `upstream` until `deadline`, or until `fetch_stop` is set: either cuts the
    /// connections.
    pub fn start(
        upstream: Upstream,
        deadline: Instant,
        fetch_stop: FetchStop,
    ) -> io::Result<DeadlineRelay> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let local_addr = listener.local_addr()?;
        let state = Arc::new(RelayState {
            deadline,
            stopped: AtomicBool::new(false),
            timed_out: AtomicBool::new(false),
            sockets: Mutex::new(Vec::new()),
            upstream_error: Mutex::new(None),
        });
        let (stop, stopped) = mpsc::channel::<()>();

        let watchdog_state = Arc::clone(&state);
        let watchdog = thread::Builder::new()
            .name("git-fetch-deadline".into())
            .spawn(move || {
                loop {
                    let remaining = deadline.saturating_duration_since(Instant::now());
                    if remaining.is_zero() {
                        watchdog_state.timed_out.store(true, Ordering::SeqCst);
                        break;
                    }
                    match stopped.recv_timeout(remaining.min(STOP_POLL)) {
                        Err(mpsc::RecvTimeoutError::Timeout) if !fetch_stop.is_stopped() => {}
                        // Stopped, or the relay dropped: the fetch is over.
                        _ => break,
                    }
                }
                watchdog_state.stop();
                // Wake the acceptor, blocked in accept(), so it sees the stop.
                let _ = TcpStream::connect(local_addr);
            })?;

        let acceptor_state = Arc::clone(&state);
        let acceptor = thread::Builder::new()
            .name("git-fetch-relay".into())
            .spawn(move || accept_loop(listener, upstream, acceptor_state))?;

        Ok(DeadlineRelay {
            port: local_addr.port(),
            state,
            stop: Some(stop),
            threads: vec![watchdog, acceptor],
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether the deadline passed and the relay cut the connections.
    pub fn timed_out(&self) -> bool {
        self.state.timed_out.load(Ordering::SeqCst)
    }

    /// The first reason the relay could not reach the server, if any.
    pub fn upstream_error(&self) -> Option<String> {
        self.state
            .upstream_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for DeadlineRelay {
    fn drop(&mut self) {
        drop(self.stop.take());
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

fn accept_loop(listener: TcpListener, upstream: Upstream, state: Arc<RelayState>) {
    for connection in listener.incoming() {
        if state.stopped.load(Ordering::SeqCst) {
            break;
        }
        let Ok(client) = connection else { continue };
        let from_loopback = client.peer_addr().is_ok_and(|peer| peer.ip().is_loopback());
        if !from_loopback || !state.track(&client) {
            continue;
        }
        let upstream = upstream.clone();
        let state = Arc::clone(&state);
        let spawned = thread::Builder::new()
            .name("git-fetch-relay-conn".into())
            .spawn(move || serve(client, &upstream, &state));
        if spawned.is_err() {
            break;
        }
    }
}

fn serve(client: TcpStream, upstream: &Upstream, state: &RelayState) {
    let Upstream { host, port } = upstream;
    let server = match connect(host, *port, state.deadline) {
        Ok(server) => server,
        Err(error) => {
            state.record_upstream_error(format!("connecting to {host}:{port}: {error}"));
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
    };
    if !state.track(&server) {
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    pump_both_ways(client, server);
}

/// Copies bytes in both directions until both sides have finished sending.
fn pump_both_ways(client: TcpStream, server: TcpStream) {
    let (Ok(client_reader), Ok(server_writer)) = (client.try_clone(), server.try_clone()) else {
        let _ = client.shutdown(Shutdown::Both);
        let _ = server.shutdown(Shutdown::Both);
        return;
    };
    let upload = thread::Builder::new()
        .name("git-fetch-relay-up".into())
        .spawn(move || pump(client_reader, server_writer));
    pump(server, client);
    if let Ok(upload) = upload {
        let _ = upload.join();
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream) {
    let _ = io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}

/// Connects to the first address of `host:port` that answers before the deadline.
fn connect(host: &str, port: u16, deadline: Instant) -> io::Result<TcpStream> {
    let addresses: Vec<SocketAddr> = (host, port).to_socket_addrs()?.collect();
    let mut last_error = io::Error::new(io::ErrorKind::NotFound, "the host has no address");
    for address in addresses {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "deadline passed"));
        }
        match TcpStream::connect_timeout(&address, remaining) {
            Ok(stream) => return Ok(stream),
            Err(error) => last_error = error,
        }
    }
    Err(last_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::time::Duration;

    fn relay_to(port: u16, deadline: Instant) -> DeadlineRelay {
        let upstream = Upstream {
            host: "127.0.0.1".into(),
            port,
        };
        DeadlineRelay::start(upstream, deadline, FetchStop::default()).unwrap()
    }

    fn echo_server() -> (u16, JoinHandle<()>) {
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let handle = thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut buffer = [0u8; 64];
            let read = stream.read(&mut buffer).unwrap();
            stream.write_all(&buffer[..read]).unwrap();
        });
        (port, handle)
    }

    #[test]
    fn tcp_mode_forwards_bytes_both_ways() {
        let (port, server) = echo_server();
        let deadline = Instant::now() + Duration::from_secs(30);
        let relay = relay_to(port, deadline);
        let mut client = TcpStream::connect(("127.0.0.1", relay.port())).unwrap();
        client.write_all(b"ping").unwrap();
        let mut answer = [0u8; 4];
        client.read_exact(&mut answer).unwrap();
        assert_eq!(&answer, b"ping");
        server.join().unwrap();
        assert!(!relay.timed_out());
    }

    #[test]
    fn an_unreachable_server_is_remembered_as_the_cause() {
        let closed_port = {
            let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
            listener.local_addr().unwrap().port()
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        let relay = relay_to(closed_port, deadline);
        let mut client = TcpStream::connect(("127.0.0.1", relay.port())).unwrap();
        let mut buffer = Vec::new();
        let _ = client.read_to_end(&mut buffer);
        let error = relay.upstream_error().expect("an upstream error");
        assert!(error.contains(&closed_port.to_string()), "{error}");
    }

    #[test]
    fn the_deadline_cuts_a_connection_that_never_answers() {
        let silent = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = silent.local_addr().unwrap().port();
        let deadline = Instant::now() + Duration::from_millis(200);
        let relay = relay_to(port, deadline);
        let mut client = TcpStream::connect(("127.0.0.1", relay.port())).unwrap();
        // A generous bound so that a relay ignoring its deadline fails instead of hanging.
        client
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut buffer = Vec::new();
        let read = client.read_to_end(&mut buffer);
        let cut_by_relay = match &read {
            Ok(_) => true,
            Err(err) => !matches!(
                err.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
        };
        assert!(cut_by_relay, "the relay left the connection open: {read:?}");
        assert!(buffer.is_empty());
        assert!(relay.timed_out());
        drop(silent);
    }
}
