//! git's own `git http-backend` behind basic authentication: arbor-testkit's server, with the
//! panicking constructor the fetch tests want.

/// A smart-HTTP git server for every repository below a project root.
pub struct GitHttpServer(arbor_testkit::GitHttpServer);

impl GitHttpServer {
    /// Serves every repository below `project_root` to `username` / `password`.
    pub fn start(project_root: &std::path::Path, username: &str, password: &str) -> GitHttpServer {
        let auth = arbor_testkit::BasicAuth::new(username, password);
        GitHttpServer(
            arbor_testkit::GitHttpServer::start(project_root, Some(auth))
                .unwrap_or_else(|err| panic!("git http server: {err}")),
        )
    }

    /// The URL of `repository` (a path below the project root).
    pub fn url(&self, repository: &str) -> String {
        self.0.url(repository)
    }

    /// How many pack downloads (`POST …/git-upload-pack`) the server has answered.
    pub fn upload_pack_posts(&self) -> usize {
        self.0.upload_pack_posts()
    }
}
