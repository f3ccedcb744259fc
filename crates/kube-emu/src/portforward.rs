//! `pods/portforward`: the emulator's stand-in for kube-apiserver plus a kubelet forwarding
//! a pod's ports.
//!
//! There are no containers behind the emulator's pods, so a test says where each of a pod's
//! ports really listens with the annotation [`ADDRESS_ANNOTATION`] on the Pod:
//!
//! ```yaml
//! metadata:
//!   annotations:
//!     kube-emu.arbor.dev/port-forward: "9090=127.0.0.1:41234,8080=127.0.0.1:41235"
//! ```
//!
//! Only loopback addresses are used: the emulator never becomes a proxy to other hosts.
//!
//! ## Protocol
//!
//! What kube-apiserver proxies to the kubelet for a WebSocket port-forward
//! (`pkg/kubelet/cri/streaming/portforward/websocket.go`), and what kube-rs's
//! `Api::<Pod>::portforward` speaks:
//!
//! - `GET /api/v1/namespaces/<ns>/pods/<name>/portforward?ports=9090[,8080]` with a WebSocket
//!   upgrade; the `ports` parameter may repeat and holds comma-separated ports.
//! - Subprotocol `v4.channel.k8s.io` (or none, which is the same binary framing); kube-rs offers
//!   `v5.channel.k8s.io` first, which kube-apiserver does not serve for port-forward either.
//!   `SPDY/3.1+portforward.k8s.io` (kubectl's SPDY-over-WebSocket tunnel) and SPDY itself are
//!   not served: the answer is 400 naming what is.
//! - Every binary message starts with its channel byte. Port `i` (in request order) has data
//!   channel `2i` (both ways) and error channel `2i+1` (server to client). The first message on
//!   each of the two channels is the port number, two bytes little-endian.
//! - A port whose pod side cannot be reached gets one text message on its error channel
//!   (`error forwarding port 9090 to pod ns/name, uid ...: why`), as the kubelet writes it.
//! - When the pod side of every port has closed, the server closes the WebSocket; when the
//!   client closes it, the pod connections are closed.
//!
//! Authorization is kube-apiserver 1.35's: the WebSocket `GET` needs `get` on `pods/portforward`
//! and, since `AuthorizePodWebsocketUpgradeCreatePermission`, `create` on it too.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use futures::{SinkExt, StreamExt};
use http::{HeaderMap, Request, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;

use crate::api::{RequestContext, Shared};
use crate::auth::Identity;
use crate::authz::Attributes;
use crate::route::{Query, ResourceTarget};
use crate::status::ApiError;
use crate::store::ObjectKey;

/// The Pod annotation mapping its ports to the loopback addresses that stand in for them.
pub const ADDRESS_ANNOTATION: &str = "kube-emu.arbor.dev/port-forward";

/// The subprotocols served, in the server's order of preference; the empty one (no
/// `Sec-WebSocket-Protocol` header) is the same binary framing.
const PROTOCOLS: [&str; 1] = ["v4.channel.k8s.io"];

/// Whether `target` is a pod's `portforward` subresource.
pub(crate) fn is_portforward(target: &ResourceTarget) -> bool {
    target.group.is_empty()
        && target.plural == "pods"
        && target.name.is_some()
        && target.namespace.is_some()
        && target.subresource.as_deref() == Some("portforward")
}

/// One port of the request and where the pod side of it is.
#[derive(Debug, Clone)]
struct Forward {
    port: u16,
    /// The loopback address standing in for the port, or why there is none.
    address: Result<SocketAddr, String>,
}

/// Serves a port-forward request: authorize, find the pod, answer the WebSocket handshake and
/// bridge the frames to the pod's addresses in the background.
pub(crate) async fn serve<B>(
    shared: Arc<Shared>,
    identity: Identity,
    target: ResourceTarget,
    query: Query,
    mut request: Request<B>,
) -> Result<Response<Body>, ApiError> {
    let kind = shared
        .state()
        .registry
        .lookup("", &target.version, "pods")
        .cloned()
        .ok_or_else(ApiError::no_such_route)?;
    let context = RequestContext {
        identity,
        method: request.method().clone(),
        target: target.clone(),
        query: query.clone(),
        headers: request.headers().clone(),
        body: Default::default(),
        warnings: Mutex::new(Vec::new()),
    };
    let namespace = target.namespace.clone().unwrap_or_default();
    let name = target.name.clone().unwrap_or_default();
    for verb in ["get", "create"] {
        let attributes = Attributes {
            verb: verb.to_owned(),
            group: String::new(),
            resource: "pods".to_owned(),
            subresource: "portforward".to_owned(),
            namespace: namespace.clone(),
            name: name.clone(),
            path: None,
        };
        crate::authz::check(shared.authorizer.as_ref(), &context.identity, &attributes)?;
    }
    let ports = requested_ports(&query)?;
    let pod = shared
        .state()
        .store
        .get(&kind.id, &ObjectKey::new(&namespace, &name))
        .cloned()
        .ok_or_else(|| ApiError::not_found(&kind.id, &name))?;
    let key = handshake_key(request.headers())?;
    let protocol = choose_protocol(request.headers())?;
    let forwards = forwards(&pod, &ports);
    let description = format!(
        "pod {namespace}/{name}, uid {}",
        pod["metadata"]["uid"].as_str().unwrap_or_default()
    );
    let upgrade = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        match upgrade.await {
            Ok(upgraded) => {
                let socket =
                    WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None)
                        .await;
                bridge(socket, forwards, &description).await;
            }
            Err(error) => tracing::debug!(%error, "port-forward upgrade failed"),
        }
    });
    let mut response = Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::UPGRADE, "websocket")
        .header(header::CONNECTION, "Upgrade")
        .header(
            header::SEC_WEBSOCKET_ACCEPT,
            derive_accept_key(key.as_bytes()),
        );
    if let Some(protocol) = protocol {
        response = response.header(header::SEC_WEBSOCKET_PROTOCOL, protocol);
    }
    response
        .body(Body::empty())
        .map_err(|_| ApiError::internal("building the port-forward handshake"))
}

/// The ports of `?ports=`, which may repeat and holds comma-separated ports, as the kubelet
/// reads it.
fn requested_ports(query: &Query) -> Result<Vec<u16>, ApiError> {
    let raw = query
        .get("ports")
        .ok_or_else(|| ApiError::bad_request("query parameter \"ports\" is required"))?;
    raw.split(',')
        .map(|port| match port.trim().parse::<u16>() {
            Ok(0) => Err(ApiError::bad_request(format!("port {port:?} must be > 0"))),
            Ok(port) => Ok(port),
            Err(error) => Err(ApiError::bad_request(format!(
                "unable to parse {raw:?} as a port: {error}"
            ))),
        })
        .collect()
}

fn header_text(headers: &HeaderMap, name: header::HeaderName) -> &str {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
}

/// The client's `Sec-WebSocket-Key`, after checking that this is a WebSocket upgrade at all.
fn handshake_key(headers: &HeaderMap) -> Result<String, ApiError> {
    let upgrade = header_text(headers, header::UPGRADE);
    if !upgrade.eq_ignore_ascii_case("websocket") {
        return Err(ApiError::bad_request(format!(
            "arbor-kube-emu serves pods/portforward over WebSocket only (subprotocol {}), not {:?}",
            PROTOCOLS.join(", "),
            if upgrade.is_empty() {
                "a plain request"
            } else {
                upgrade
            }
        )));
    }
    if header_text(headers, header::SEC_WEBSOCKET_VERSION) != "13" {
        return Err(ApiError::bad_request(
            "a WebSocket upgrade needs Sec-WebSocket-Version: 13",
        ));
    }
    let key = header_text(headers, header::SEC_WEBSOCKET_KEY);
    if key.is_empty() {
        return Err(ApiError::bad_request(
            "a WebSocket upgrade needs a Sec-WebSocket-Key",
        ));
    }
    Ok(key.to_owned())
}

/// The first subprotocol the client offers that is served; none offered is the binary
/// framing without a name.
fn choose_protocol(headers: &HeaderMap) -> Result<Option<&'static str>, ApiError> {
    let offered: Vec<&str> = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .filter(|protocol| !protocol.is_empty())
        .collect();
    if offered.is_empty() {
        return Ok(None);
    }
    offered
        .iter()
        .find_map(|protocol| PROTOCOLS.iter().find(|served| *served == protocol))
        .map(|served| Some(*served))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "none of the WebSocket subprotocols {offered:?} is served for pods/portforward by arbor-kube-emu; it serves {}",
                PROTOCOLS.join(", ")
            ))
        })
}

/// Where each requested port of `pod` goes, from the pod's phase and its
/// [`ADDRESS_ANNOTATION`].
fn forwards(pod: &Value, ports: &[u16]) -> Vec<Forward> {
    let phase = pod["status"]["phase"].as_str().unwrap_or("Pending");
    let annotation = pod["metadata"]["annotations"][ADDRESS_ANNOTATION].as_str();
    ports
        .iter()
        .map(|&port| Forward {
            port,
            address: if phase != "Running" {
                Err(format!("the pod is not running (phase {phase})"))
            } else {
                address_of(annotation, port)
            },
        })
        .collect()
}

/// The loopback address `annotation` gives `port`.
fn address_of(annotation: Option<&str>, port: u16) -> Result<SocketAddr, String> {
    let annotation = annotation.ok_or_else(|| {
        format!("nothing listens on port {port}: the pod has no {ADDRESS_ANNOTATION} annotation")
    })?;
    for entry in annotation.split(',').map(str::trim) {
        let Some((entry_port, address)) = entry.split_once('=') else {
            return Err(format!(
                "annotation {ADDRESS_ANNOTATION}: {entry:?} is not PORT=HOST:PORT"
            ));
        };
        if entry_port.trim().parse::<u16>() != Ok(port) {
            continue;
        }
        let address: SocketAddr = address.trim().parse().map_err(|error| {
            format!("annotation {ADDRESS_ANNOTATION}: {address:?} is not an address: {error}")
        })?;
        if !address.ip().is_loopback() {
            return Err(format!(
                "annotation {ADDRESS_ANNOTATION}: {address} is not a loopback address; the emulator forwards to loopback only"
            ));
        }
        return Ok(address);
    }
    Err(format!(
        "nothing listens on port {port}: annotation {ADDRESS_ANNOTATION} does not name it"
    ))
}

/// A message on `channel`.
fn frame(channel: u8, payload: &[u8]) -> Message {
    let mut bytes = Vec::with_capacity(payload.len() + 1);
    bytes.push(channel);
    bytes.extend_from_slice(payload);
    Message::binary(bytes)
}

/// Moves frames between the WebSocket and one TCP connection per port until either side is
/// done.
async fn bridge<S>(socket: WebSocketStream<S>, forwards: Vec<Forward>, pod: &str)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut sink, mut incoming) = socket.split();
    let (outgoing, mut to_client) = mpsc::channel::<Message>(16);
    let mut writers: Vec<Option<OwnedWriteHalf>> = Vec::with_capacity(forwards.len());
    let mut pumps = tokio::task::JoinSet::new();
    for (index, forward) in forwards.iter().enumerate() {
        let data = (2 * index) as u8;
        let error = data + 1;
        let port = forward.port.to_le_bytes();
        for channel in [data, error] {
            if sink.send(frame(channel, &port)).await.is_err() {
                return;
            }
        }
        let connected = match &forward.address {
            Ok(address) => TcpStream::connect(address)
                .await
                .map_err(|error| format!("cannot connect to {address}: {error}")),
            Err(why) => Err(why.clone()),
        };
        match connected {
            Ok(stream) => {
                let (reader, writer) = stream.into_split();
                writers.push(Some(writer));
                pumps.spawn(pump(reader, data, outgoing.clone()));
            }
            Err(why) => {
                writers.push(None);
                let message = format!("error forwarding port {} to {pod}: {why}", forward.port);
                tracing::debug!(%message, "port-forward");
                if sink.send(frame(error, message.as_bytes())).await.is_err() {
                    return;
                }
            }
        }
    }
    // Only the pumps send from here on: when the last one ends, every pod side has closed.
    drop(outgoing);
    loop {
        tokio::select! {
            message = incoming.next() => match message {
                Some(Ok(Message::Binary(bytes))) if bytes.len() > 1 => {
                    let channel = usize::from(bytes[0]);
                    // Data goes to even channels; the error channels are the server's.
                    if channel % 2 != 0 {
                        continue;
                    }
                    if let Some(slot) = writers.get_mut(channel / 2)
                        && let Some(writer) = slot
                        && writer.write_all(&bytes[1..]).await.is_err()
                    {
                        *slot = None;
                    }
                }
                Some(Ok(Message::Close(_)) | Err(_)) | None => break,
                Some(Ok(_)) => {}
            },
            message = to_client.recv() => match message {
                Some(message) => {
                    if sink.send(message).await.is_err() {
                        break;
                    }
                }
                None => {
                    let _ = sink.send(Message::Close(None)).await;
                    break;
                }
            },
        }
    }
    pumps.abort_all();
    for writer in writers.iter_mut().flatten() {
        let _ = writer.shutdown().await;
    }
}

/// Copies what the pod side sends to `channel` until it closes.
async fn pump(
    mut reader: tokio::net::tcp::OwnedReadHalf,
    channel: u8,
    outgoing: mpsc::Sender<Message>,
) {
    let mut buffer = vec![0u8; 32 * 1024];
    loop {
        match reader.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => {
                if outgoing
                    .send(frame(channel, &buffer[..read]))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ports_repeat_and_hold_lists() {
        let query = Query::parse(Some("ports=9090%2C8080"));
        assert_eq!(requested_ports(&query).unwrap(), vec![9090, 8080]);
        let missing = requested_ports(&Query::parse(None)).unwrap_err();
        assert!(
            missing.message.contains("\"ports\" is required"),
            "{missing}"
        );
        let zero = requested_ports(&Query::parse(Some("ports=0"))).unwrap_err();
        assert_eq!(zero.code, 400);
    }

    #[test]
    fn the_first_served_protocol_the_client_offers_is_chosen() {
        let mut headers = HeaderMap::new();
        assert_eq!(choose_protocol(&headers).unwrap(), None);
        headers.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            "v5.channel.k8s.io, v4.channel.k8s.io".parse().unwrap(),
        );
        assert_eq!(
            choose_protocol(&headers).unwrap(),
            Some("v4.channel.k8s.io")
        );
        headers.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            "SPDY/3.1+portforward.k8s.io".parse().unwrap(),
        );
        let refused = choose_protocol(&headers).unwrap_err();
        assert!(refused.message.contains("v4.channel.k8s.io"), "{refused}");
    }

    #[test]
    fn only_loopback_addresses_of_running_pods_are_forwarded() {
        let pod = |phase: &str, annotation: &str| {
            json!({
                "metadata": {"annotations": {ADDRESS_ANNOTATION: annotation}},
                "status": {"phase": phase},
            })
        };
        let running = pod("Running", "9090=127.0.0.1:4000, 8080=10.0.0.1:80");
        let found = forwards(&running, &[9090, 8080, 7070]);
        assert_eq!(found[0].address, Ok("127.0.0.1:4000".parse().unwrap()));
        assert!(found[1].address.as_ref().unwrap_err().contains("loopback"));
        assert!(
            found[2]
                .address
                .as_ref()
                .unwrap_err()
                .contains("does not name it")
        );
        let pending = forwards(&pod("Pending", "9090=127.0.0.1:4000"), &[9090]);
        assert!(
            pending[0]
                .address
                .as_ref()
                .unwrap_err()
                .contains("not running")
        );
    }
}
