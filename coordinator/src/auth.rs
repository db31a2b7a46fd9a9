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

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
pub use weir_model::auth::{Role, Tokens};

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
        return ApiError::new(
            StatusCode::FORBIDDEN,
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
        Some(_) => ApiError::new(
            StatusCode::FORBIDDEN,
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
                ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
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
