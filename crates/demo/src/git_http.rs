//! git's own `git http-backend` behind a small HTTP server on loopback: smart HTTP for every
//! repository below a project root, with optional basic authentication.
//!
//! Each request runs the backend as a CGI program (RFC 3875): the request becomes environment
//! variables and standard input, the program's output a `Status:` line, headers and a body.
//! The server runs on its own runtime thread, so it serves blocking callers (git2 fetches in
//! a test) and async ones (the demo) alike.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::AsyncWriteExt as _;
use tokio::runtime::Runtime;

use crate::Error;

/// Where Debian's git package installs the backend.
pub const HTTP_BACKEND: &str = "/usr/lib/git-core/git-http-backend";

/// The user name and password a server demands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasicAuth {
    pub username: String,
    pub password: String,
}

impl BasicAuth {
    pub fn new(username: &str, password: &str) -> Self {
        Self {
            username: username.to_owned(),
            password: password.to_owned(),
        }
    }
}

#[derive(Debug)]
struct Config {
    project_root: PathBuf,
    auth: Option<BasicAuth>,
    upload_pack_posts: AtomicUsize,
}

/// A running server; stopped when dropped.
#[derive(Debug)]
pub struct GitHttpServer {
    addr: SocketAddr,
    config: Arc<Config>,
    runtime: Option<Runtime>,
}

impl GitHttpServer {
    /// Serves every repository below `project_root` on a free loopback port, to anyone when
    /// `auth` is `None`.
    pub fn start(project_root: &Path, auth: Option<BasicAuth>) -> Result<GitHttpServer, Error> {
        if !Path::new(HTTP_BACKEND).exists() {
            return Err(Error::Invalid {
                what: format!("serving {} over http", project_root.display()),
                message: format!("{HTTP_BACKEND} is missing: install git (make deps)"),
            });
        }
        let config = Arc::new(Config {
            project_root: project_root.to_owned(),
            auth,
            upload_pack_posts: AtomicUsize::new(0),
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("git-http")
            .enable_all()
            .build()
            .map_err(Error::io("starting the git http server's runtime"))?;
        // Bound here, not in the runtime, so that starting works inside another runtime too.
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
            .map_err(Error::io("binding the git http server"))?;
        listener
            .set_nonblocking(true)
            .map_err(Error::io("configuring the git http listener"))?;
        let addr = listener
            .local_addr()
            .map_err(Error::io("reading the git http server's address"))?;
        let serving = Arc::clone(&config);
        runtime.spawn(async move {
            let listener = match tokio::net::TcpListener::from_std(listener) {
                Ok(listener) => listener,
                Err(error) => {
                    tracing::error!(%error, "git http server cannot listen");
                    return;
                }
            };
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let config = Arc::clone(&serving);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        handle(request, Arc::clone(&config))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(GitHttpServer {
            addr,
            config,
            runtime: Some(runtime),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL of `repository` (a path below the project root).
    pub fn url(&self, repository: &str) -> String {
        format!("http://{}/{repository}", self.addr)
    }

    /// How many pack downloads (`POST …/git-upload-pack`) the server has answered.
    pub fn upload_pack_posts(&self) -> usize {
        self.config.upload_pack_posts.load(Ordering::SeqCst)
    }
}

impl Drop for GitHttpServer {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

fn simple(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_owned())));
    *response.status_mut() = status;
    response
}

/// The authenticated user: `Some("anonymous")` when no authentication is configured, `None`
/// when the request's credentials are missing or wrong.
fn authorized_user(request: &Request<Incoming>, config: &Config) -> Option<String> {
    let Some(auth) = &config.auth else {
        return Some("anonymous".to_owned());
    };
    let header = request.headers().get(hyper::header::AUTHORIZATION)?;
    let encoded = header.to_str().ok()?.strip_prefix("Basic ")?;
    let decoded = String::from_utf8(BASE64.decode(encoded).ok()?).ok()?;
    let (username, password) = decoded.split_once(':')?;
    (username == auth.username && password == auth.password).then(|| username.to_owned())
}

async fn handle(
    request: Request<Incoming>,
    config: Arc<Config>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let Some(user) = authorized_user(&request, &config) else {
        let mut response = simple(StatusCode::UNAUTHORIZED, "authentication required\n");
        response.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static("Basic realm=\"git\""),
        );
        return Ok(response);
    };
    Ok(run_backend(request, &config, &user)
        .await
        .unwrap_or_else(|err| simple(StatusCode::INTERNAL_SERVER_ERROR, &format!("{err}\n"))))
}

async fn run_backend(
    request: Request<Incoming>,
    config: &Config,
    user: &str,
) -> Result<Response<Full<Bytes>>, String> {
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map_err(|err| err.to_string())?
        .to_bytes();
    let path = parts.uri.path().to_owned();
    if parts.method == hyper::Method::POST && path.ends_with("/git-upload-pack") {
        config.upload_pack_posts.fetch_add(1, Ordering::SeqCst);
    }
    let content_type = parts
        .headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut child = tokio::process::Command::new(HTTP_BACKEND)
        .env_clear()
        .env("GIT_PROJECT_ROOT", &config.project_root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("REQUEST_METHOD", parts.method.as_str())
        .env("PATH_INFO", &path)
        .env("QUERY_STRING", parts.uri.query().unwrap_or_default())
        .env("CONTENT_TYPE", content_type)
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("REMOTE_USER", user)
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|err| format!("starting {HTTP_BACKEND}: {err}"))?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or("the backend's stdin is not piped")?;
    let writing = async move {
        let written = stdin.write_all(&body).await;
        drop(stdin);
        written
    };
    let (written, output) = tokio::join!(writing, child.wait_with_output());
    written.map_err(|err| format!("writing the request body: {err}"))?;
    let output = output.map_err(|err| format!("running {HTTP_BACKEND}: {err}"))?;
    cgi_response(&output.stdout)
}

/// Turns CGI output (headers, a blank line, the body) into an HTTP response.
fn cgi_response(output: &[u8]) -> Result<Response<Full<Bytes>>, String> {
    let (head_end, separator) = [&b"\r\n\r\n"[..], &b"\n\n"[..]]
        .iter()
        .filter_map(|separator| {
            output
                .windows(separator.len())
                .position(|window| window == *separator)
                .map(|position| (position, separator.len()))
        })
        .min()
        .ok_or("the backend wrote no CGI header")?;
    let head = std::str::from_utf8(&output[..head_end]).map_err(|err| err.to_string())?;
    let mut response = Response::new(Full::new(Bytes::copy_from_slice(
        &output[head_end + separator..],
    )));
    for line in head.lines() {
        let (name, value) = line.split_once(':').ok_or("malformed CGI header")?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("Status") {
            let code = value.split(' ').next().unwrap_or_default();
            *response.status_mut() = code
                .parse::<u16>()
                .ok()
                .and_then(|code| StatusCode::from_u16(code).ok())
                .ok_or("malformed CGI status")?;
        } else {
            response.headers_mut().append(
                hyper::header::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|err| err.to_string())?,
                value.parse().map_err(|_| "malformed CGI header value")?,
            );
        }
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GitRepo;

    fn clone(url: &str, into: &Path) -> Result<String, Error> {
        let parent = into.parent().unwrap();
        let target = into.display().to_string();
        GitRepo::open(parent).git(&["clone", "-q", url, &target])?;
        GitRepo::open(into).head()
    }

    #[test]
    fn serves_a_bare_repository_to_git_clone_without_auth() {
        let dir = tempfile::tempdir().unwrap();
        let repo = GitRepo::init(dir.path().join("work/app")).unwrap();
        let head = repo
            .commit_file("app.yaml", "kind: ConfigMap\n", "First")
            .unwrap();
        repo.bare_copy(&dir.path().join("served/app.git")).unwrap();
        let server = GitHttpServer::start(&dir.path().join("served"), None).unwrap();

        let cloned = clone(&server.url("app.git"), &dir.path().join("clone")).unwrap();

        assert_eq!(cloned, head);
        assert!(server.upload_pack_posts() >= 1);
    }

    #[test]
    fn refuses_a_clone_without_the_password() {
        let dir = tempfile::tempdir().unwrap();
        let repo = GitRepo::init(dir.path().join("served/app")).unwrap();
        repo.commit_file("app.yaml", "kind: ConfigMap\n", "First")
            .unwrap();
        let server =
            GitHttpServer::start(&dir.path().join("served"), Some(BasicAuth::new("u", "p")))
                .unwrap();

        let error = clone(&server.url("app"), &dir.path().join("clone")).unwrap_err();

        assert!(matches!(error, Error::Git { .. }), "{error}");
        assert_eq!(server.upload_pack_posts(), 0);
    }

    #[test]
    fn cgi_output_becomes_status_headers_and_body() {
        let response =
            cgi_response(b"Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\nnope").unwrap();
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert_eq!(response.headers()["content-type"], "text/plain");
        assert!(cgi_response(b"no header at all").is_err());
    }
}
