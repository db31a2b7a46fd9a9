//! Who may call the REST API.
//!
//! A coordinator started with tokens (`--token-file`, or `WEIR_TOKEN`)
//! answers only requests that carry one, as `Authorization: Bearer
//! <token>`: a **read** token may look (every `GET`), an **admin** token may
//! also upload, submit, cancel and delete. The dashboard's page and its
//! script, and the OpenAPI document, are served to anyone (the page asks
//! for a token). A missing or unknown token is a `401 unauthorized`, a read
//! token on a change a `403 forbidden`, both in the API's JSON error shape.
//!
//! Whatever the tokens, a change that a browser sends on behalf of another
//! site (an `Origin` that is not this server's, or `Sec-Fetch-Site:
//! cross-site`) is refused with `403 cross_origin`: a form on a web page
//! cannot cancel a job even on an open coordinator. The API sends no CORS
//! headers, so other sites cannot read it either.
//!
//! And on an open API (no tokens: on loopback, as `weir local`) every
//! request must name a host this server serves ([`AllowedHosts`]: an IP
//! address, `localhost`, or a name given with `--public-name`), or it is
//! refused with `403 host_not_allowed`: a page whose own domain name was
//! made to point at 127.0.0.1 (DNS rebinding) is same-origin to the browser,
//! but its requests still name that domain.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::{CoordinatorError, ErrorKind};
pub use weir_model::auth::{Role, Tokens};

/// The host names the REST API answers to, besides IP addresses and
/// `localhost`: those its operator gives with `--public-name` (a name a
/// proxy in front of it, or a DNS entry, points at it).
#[derive(Debug, Clone, Default)]
pub struct AllowedHosts {
    names: Vec<String>,
    /// Any host: an API that needs a token (a page on a rebound domain
    /// has none to send).
    any: bool,
}

impl AllowedHosts {
    /// IP addresses, `localhost`, and `names` (with or without a port).
    pub fn new(names: impl IntoIterator<Item = String>) -> AllowedHosts {
        AllowedHosts {
            names: names
                .into_iter()
                .map(|n| host_part(&n).trim_end_matches('.').to_ascii_lowercase())
                .collect(),
            any: false,
        }
    }

    /// Every host (for an API that needs a token on every request but its
    /// public pages: DNS rebinding gains a page nothing it could not see).
    pub fn any() -> AllowedHosts {
        AllowedHosts {
            names: Vec::new(),
            any: true,
        }
    }

    /// Whether a request naming `host` (a `Host` header: name or address,
    /// and maybe a port) is for this server.
    pub fn allows(&self, host: &str) -> bool {
        let name = host_part(host).trim_end_matches('.').to_ascii_lowercase();
        self.any
            || name.parse::<std::net::IpAddr>().is_ok()
            || name == "localhost"
            || name.ends_with(".localhost")
            || self.names.contains(&name)
    }
}

/// The host of `host[:port]` (`[v6]:port` too), without the port.
fn host_part(host: &str) -> &str {
    let host = host.trim();
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host,
    }
}

/// The middleware: refuses a request whose `Host` (or, over HTTP/2, its
/// authority) is not one this server serves.
pub async fn check_host(
    State(hosts): State<Arc<AllowedHosts>>,
    request: Request,
    next: Next,
) -> Response {
    let named = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.to_string()));
    match named {
        Some(host) if !hosts.allows(&host) => CoordinatorError::new(
            ErrorKind::Forbidden,
            "host_not_allowed",
            format!(
                "this server does not serve the host `{host}`: it answers requests for its IP addresses, localhost and the names given with --public-name"
            ),
        )
        .into_response(),
        _ => next.run(request).await,
    }
}

/// Paths anyone may read: the dashboard's page and files (it asks for a
/// token itself) and the API's description.
fn is_public(method: &Method, path: &str) -> bool {
    (method == Method::GET || method == Method::HEAD)
        && (path == "/" || path.starts_with("/ui/") || path == "/v1/openapi.json")
}

fn changes(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Whether a browser sent this request on behalf of another site.
fn cross_site(headers: &HeaderMap) -> bool {
    if headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes() == b"cross-site")
    {
        return true;
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return false;
    };
    // `Origin: scheme://host[:port]`; a page of this server has this
    // server's host and port, as the request names it (or as a proxy in
    // front of it received it).
    let Some(origin_host) = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, h)| h)
    else {
        return true;
    };
    let names = |name| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|h| h.to_str().ok())
            .flat_map(|h| h.split(','))
            .map(str::trim)
            .collect::<Vec<_>>()
    };
    let mut hosts = names(header::HOST);
    hosts.extend(names(header::HeaderName::from_static("x-forwarded-host")));
    !hosts.contains(&origin_host)
}

/// The middleware: refuses cross-site changes and, on a coordinator with
/// tokens, requests without a token that may do what they ask.
pub async fn authorize(
    State(tokens): State<Arc<Tokens>>,
    request: Request,
    next: Next,
) -> Response {
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    if changes(&method) && cross_site(request.headers()) {
        return CoordinatorError::new(
            ErrorKind::Forbidden,
            "cross_origin",
            "a change requested by another site's page is refused",
        )
        .into_response();
    }
    if tokens.is_open() || is_public(&method, &path) {
        return next.run(request).await;
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let needed = if changes(&method) {
        Role::Admin
    } else {
        Role::Read
    };
    match presented.and_then(|t| tokens.role_of(t)) {
        Some(role) if role >= needed => next.run(request).await,
        Some(_) => CoordinatorError::new(
            ErrorKind::Forbidden,
            "forbidden",
            "this token may only read: uploading, submitting, canceling and deleting need an admin token",
        )
        .into_response(),
        None => {
            let message = if presented.is_some() {
                "the token is not one this coordinator accepts"
            } else {
                "this coordinator needs a token: send `Authorization: Bearer <token>` (the weir CLI sends WEIR_TOKEN)"
            };
            let mut response =
                CoordinatorError::new(ErrorKind::Unauthenticated, "unauthorized", message).into_response();
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_hosts_it_serves_are_answered() {
        let hosts = AllowedHosts::new(["weir.example.com".to_owned()]);
        for ok in [
            "127.0.0.1:8081",
            "127.0.0.1",
            "[::1]:8081",
            "10.1.2.3:8081",
            "localhost:8081",
            "LOCALHOST",
            "app.localhost",
            "weir.example.com",
            "Weir.Example.com:443",
        ] {
            assert!(hosts.allows(ok), "{ok}");
        }
        for refused in [
            "x.example",
            "x.example:8081",
            "127.0.0.1.nip.io",
            "weir.example.com.evil",
        ] {
            assert!(!hosts.allows(refused), "{refused}");
        }
    }

    #[test]
    fn only_this_servers_pages_may_change_things() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, v.parse().unwrap());
            }
            h
        };
        assert!(!cross_site(&headers(&[("host", "127.0.0.1:8081")])));
        assert!(!cross_site(&headers(&[
            ("host", "127.0.0.1:8081"),
            ("origin", "http://127.0.0.1:8081")
        ])));
        assert!(cross_site(&headers(&[
            ("host", "127.0.0.1:8081"),
            ("origin", "http://evil.example")
        ])));
        assert!(cross_site(&headers(&[
            ("host", "127.0.0.1:8081"),
            ("origin", "null")
        ])));
        assert!(cross_site(&headers(&[
            ("host", "127.0.0.1:8081"),
            ("sec-fetch-site", "cross-site")
        ])));
        // Behind a proxy that rewrites `Host`, the host it received.
        assert!(!cross_site(&headers(&[
            ("host", "127.0.0.1:8081"),
            ("x-forwarded-host", "weir.example.com"),
            ("origin", "https://weir.example.com")
        ])));
    }
}
