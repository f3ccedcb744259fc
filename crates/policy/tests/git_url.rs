//! The git URL grammar ([`arbor_policy::git_url`]) as a table: each accepted form with what
//! it connects to, and each refused input with the part of the URL it names.

use arbor_policy::git_url::{GitUrl, Transport, UrlPart, redact};

struct Accepted {
    url: &'static str,
    transport: Transport,
    user: Option<&'static str>,
    host: &'static str,
    port: u16,
    path: &'static str,
    scp_like: bool,
}

#[test]
fn every_accepted_form_says_where_it_connects() {
    let table = [
        Accepted {
            url: "https://example.com/org/repo.git",
            transport: Transport::Https,
            user: None,
            host: "example.com",
            port: 443,
            path: "/org/repo.git",
            scp_like: false,
        },
        Accepted {
            url: "https://bob:hunter2@example.com:8443/r.git",
            transport: Transport::Https,
            user: Some("bob"),
            host: "example.com",
            port: 8443,
            path: "/r.git",
            scp_like: false,
        },
        Accepted {
            url: "http://example.com:8080/org/repo.git?x=1",
            transport: Transport::Http,
            user: None,
            host: "example.com",
            port: 8080,
            path: "/org/repo.git?x=1",
            scp_like: false,
        },
        Accepted {
            url: "http://h/r",
            transport: Transport::Http,
            user: None,
            host: "h",
            port: 80,
            path: "/r",
            scp_like: false,
        },
        Accepted {
            url: "ssh://deploy@[::1]:2222/srv/repo.git",
            transport: Transport::Ssh,
            user: Some("deploy"),
            host: "::1",
            port: 2222,
            path: "/srv/repo.git",
            scp_like: false,
        },
        Accepted {
            url: "ssh://git@h/r",
            transport: Transport::Ssh,
            user: Some("git"),
            host: "h",
            port: 22,
            path: "/r",
            scp_like: false,
        },
        Accepted {
            url: "git@github.com:org/repo.git",
            transport: Transport::Ssh,
            user: Some("git"),
            host: "github.com",
            port: 22,
            path: "org/repo.git",
            scp_like: true,
        },
        Accepted {
            url: "host:/srv/repo",
            transport: Transport::Ssh,
            user: None,
            host: "host",
            port: 22,
            path: "/srv/repo",
            scp_like: true,
        },
        Accepted {
            url: "git@[fe80::1]:repo.git",
            transport: Transport::Ssh,
            user: Some("git"),
            host: "fe80::1",
            port: 22,
            path: "repo.git",
            scp_like: true,
        },
        Accepted {
            url: "file:///srv/repo",
            transport: Transport::File,
            user: None,
            host: "",
            port: 0,
            path: "/srv/repo",
            scp_like: false,
        },
    ];
    for row in table {
        let parsed = GitUrl::parse(row.url).unwrap_or_else(|error| panic!("{}: {error}", row.url));
        let expected = GitUrl {
            transport: row.transport,
            user: row.user.map(str::to_owned),
            host: row.host.to_owned(),
            port: row.port,
            path: row.path.to_owned(),
            scp_like: row.scp_like,
        };
        assert_eq!(parsed, expected, "{}", row.url);
    }
}

#[test]
fn every_refused_input_names_the_part_that_is_wrong() {
    let table = [
        ("ftp://host/repo", UrlPart::Scheme, "\"ftp\""),
        ("git+ssh://host/repo", UrlPart::Scheme, "\"git+ssh\""),
        ("https://", UrlPart::Host, "no host"),
        ("https://:443/x", UrlPart::Host, "no host"),
        ("ssh://git@/r", UrlPart::Host, "no host"),
        ("ssh://[::1/r", UrlPart::Host, "unterminated"),
        ("https://host:99999/x", UrlPart::Port, "\"99999\""),
        ("ssh://host:ssh/x", UrlPart::Port, "\"ssh\""),
        ("file://", UrlPart::Path, "needs a path"),
        ("", UrlPart::Form, "scp-like"),
        ("just-a-name", UrlPart::Form, "scp-like"),
        ("/srv/repo", UrlPart::Form, "scp-like"),
        ("@host:repo", UrlPart::Form, "scp-like"),
        ("git@host", UrlPart::Form, "scp-like"),
        ("host:", UrlPart::Form, "scp-like"),
        ("dir/sub:repo", UrlPart::Form, "scp-like"),
        ("[::1:repo", UrlPart::Form, "scp-like"),
    ];
    for (url, part, says) in table {
        let error = GitUrl::parse(url).expect_err(url);
        assert_eq!(error.part(), part, "{url:?}: {error}");
        assert!(error.to_string().contains(says), "{url:?}: {error}");
        assert!(
            error.to_string().contains(&part.to_string()) || part == UrlPart::Form,
            "{url:?}: the message names no {part}: {error}"
        );
    }
}

#[test]
fn known_hosts_names_carry_the_port_only_when_it_is_not_22() {
    for (url, name) in [
        ("ssh://deploy@[::1]:2222/srv/repo.git", "[::1]:2222"),
        ("git@github.com:org/repo.git", "github.com"),
        ("ssh://h:22/r", "h"),
    ] {
        assert_eq!(
            GitUrl::parse(url).unwrap().known_hosts_name(),
            name,
            "{url}"
        );
    }
}

#[test]
fn redaction_removes_passwords_and_tokens_but_keeps_the_location() {
    for (url, shown) in [
        (
            "https://bob:hunter2@example.com/r.git",
            "https://bob:***@example.com/r.git",
        ),
        (
            "https://ghp_token@example.com/r.git",
            "https://***@example.com/r.git",
        ),
        ("ssh://git@example.com/r.git", "ssh://git@example.com/r.git"),
        ("git@example.com:r.git", "git@example.com:r.git"),
        ("file:///srv/repo", "file:///srv/repo"),
    ] {
        assert_eq!(redact(url), shown, "{url}");
    }
}
