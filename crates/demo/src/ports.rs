//! Free loopback ports, and waiting until something listens on one.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::Error;

/// A loopback address whose port was free a moment ago. The port is released before it is
/// returned, so a child process can bind it; another process could take it in between, which
/// is why callers wait for the port afterwards rather than assume it.
pub fn free_addr() -> Result<SocketAddr, Error> {
    free_addr_on(std::net::Ipv4Addr::LOCALHOST.into())
}

/// Like [`free_addr`], on `ip`, an address of this machine.
pub fn free_addr_on(ip: std::net::IpAddr) -> Result<SocketAddr, Error> {
    let listener =
        TcpListener::bind((ip, 0)).map_err(Error::io(format!("binding a free port on {ip}")))?;
    listener
        .local_addr()
        .map_err(Error::io("reading a bound address"))
}

/// A loopback port that was free a moment ago (see [`free_addr`]).
pub fn free_port() -> Result<u16, Error> {
    Ok(free_addr()?.port())
}

/// Whether something accepts TCP connections at `addr` now.
pub fn accepts(addr: SocketAddr) -> bool {
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}

/// Waits until `addr` accepts connections.
pub async fn wait_for_port(addr: SocketAddr, timeout: Duration) -> Result<(), Error> {
    let start = Instant::now();
    while !accepts(addr) {
        if start.elapsed() > timeout {
            return Err(Error::Timeout {
                what: format!("a listener on {addr}"),
                after: timeout,
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_listening_port_is_seen_and_a_free_one_times_out() {
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let listening = listener.local_addr().unwrap();
        wait_for_port(listening, Duration::from_secs(5))
            .await
            .unwrap();

        let free = free_addr().unwrap();
        let error = wait_for_port(free, Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(error.to_string().contains(&free.to_string()), "{error}");
    }
}
