//! Tokens: who may call a cluster's services.
//!
//! A cluster started with tokens (a token file, or `WEIR_TOKEN`) serves
//! only callers that present one: on the REST API as `Authorization:
//! Bearer <token>`, where a **read** token may look and an **admin** token
//! may also change things; between the cluster's own processes (gRPC and
//! data connections) with an admin token. Tokens are kept and compared as
//! their SHA-256 digests, in time that does not depend on where they differ.

use std::sync::Arc;

use sha2::{Digest, Sha256};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Read: every `GET`.
    Read,
    /// Everything: upload, submit, cancel, delete too.
    Admin,
}

/// The tokens a coordinator accepts (none: it is open).
#[derive(Clone, Default)]
pub struct Tokens {
    /// The SHA-256 of each token, with its role: a token is compared by its
    /// digest, in time that does not depend on where it differs.
    digests: Vec<([u8; 32], Role)>,
    /// The token this process presents to the cluster's other processes:
    /// the first admin token it was given.
    own: Option<String>,
}

/// The shortest token accepted: a guessable token is no protection.
pub const MIN_TOKEN_LEN: usize = 16;

impl std::fmt::Debug for Tokens {
    // Never the tokens themselves, in logs or panics.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tokens({} accepted)", self.digests.len())
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

impl Tokens {
    /// No tokens: every request is served.
    pub fn open() -> Tokens {
        Tokens::default()
    }

    /// Whether no token is needed.
    pub fn is_open(&self) -> bool {
        self.digests.is_empty()
    }

    /// Accept `token` with `role`.
    pub fn add(&mut self, token: &str, role: Role) -> Result<(), String> {
        let token = token.trim();
        if token.len() < MIN_TOKEN_LEN {
            return Err(format!(
                "a token must be at least {MIN_TOKEN_LEN} characters long"
            ));
        }
        if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("a token may not hold spaces or control characters".into());
        }
        self.digests.push((digest(token), role));
        if role == Role::Admin && self.own.is_none() {
            self.own = Some(token.to_owned());
        }
        Ok(())
    }

    /// Tokens from a token file's text: one per line, `admin TOKEN`,
    /// `read TOKEN`, or a token alone (admin); blank lines and lines
    /// starting with `#` are skipped.
    pub fn parse(text: &str) -> Result<Tokens, String> {
        let mut tokens = Tokens::open();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (role, token) = match line.split_once(char::is_whitespace) {
                Some(("admin", t)) => (Role::Admin, t),
                Some(("read", t)) => (Role::Read, t),
                Some((other, _)) => {
                    return Err(format!(
                        "line {}: {other:?} is not a role (admin or read)",
                        n + 1
                    ));
                }
                None => (Role::Admin, line),
            };
            tokens
                .add(token, role)
                .map_err(|e| format!("line {}: {e}", n + 1))?;
        }
        if tokens.is_open() {
            return Err("it holds no token".into());
        }
        if tokens.own.is_none() {
            return Err(
                "it holds no admin token: the cluster's own processes need one to reach each other"
                    .into(),
            );
        }
        Ok(tokens)
    }

    /// The token this process presents to the cluster's other processes
    /// (gRPC calls, data connections): its first admin token.
    pub fn own(&self) -> Option<&str> {
        self.own.as_deref()
    }

    /// Whether `presented` may act as one of the cluster's processes: open,
    /// or an admin token.
    pub fn admits_peer(&self, presented: Option<&str>) -> bool {
        self.is_open() || presented.and_then(|t| self.role_of(t)) == Some(Role::Admin)
    }

    /// What `presented` may do, if it is one of the tokens.
    pub fn role_of(&self, presented: &str) -> Option<Role> {
        let d = digest(presented);
        // Every token is compared, so the time says nothing of which.
        self.digests
            .iter()
            .filter(|(t, _)| same(t, &d))
            .map(|&(_, role)| role)
            .max()
    }
}

/// A gRPC server's check: only the cluster's processes (an admin token, or
/// anyone on an open cluster) are served; others get `UNAUTHENTICATED`.
#[derive(Clone)]
pub struct RequireToken(pub Arc<Tokens>);

impl Interceptor for RequireToken {
    fn call(&mut self, request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        let presented = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if self.0.admits_peer(presented) {
            Ok(request)
        } else {
            Err(tonic::Status::unauthenticated(
                "this cluster's services need its admin token (--token-file or WEIR_TOKEN)",
            ))
        }
    }
}

/// A gRPC client's side: every call carries this process's token, if any,
/// and connections to `https://` addresses trust the cluster's TLS
/// certificates.
#[derive(Clone)]
pub struct PresentToken {
    token: Option<MetadataValue<Ascii>>,
    tls: Option<tonic::transport::ClientTlsConfig>,
}

impl PresentToken {
    /// Present `tokens`' own token (nothing on an open cluster).
    pub fn of(tokens: &Tokens) -> PresentToken {
        PresentToken {
            token: tokens
                .own()
                .and_then(|t| format!("Bearer {t}").parse::<MetadataValue<Ascii>>().ok()),
            tls: None,
        }
    }

    /// The same, connecting over TLS as `tls` says.
    pub fn with_tls(self, tls: Option<&crate::tls::Tls>) -> PresentToken {
        PresentToken {
            tls: tls.map(crate::tls::Tls::grpc_client),
            ..self
        }
    }

    /// An endpoint for the process at `url` (`http://` or `https://`).
    pub fn endpoint(&self, url: &str) -> anyhow::Result<tonic::transport::Endpoint> {
        let endpoint = tonic::transport::Endpoint::from_shared(url.to_owned())
            .map_err(|e| anyhow::anyhow!("bad address {url:?}: {e}"))?;
        match &self.tls {
            Some(tls) => Ok(endpoint.tls_config(tls.clone())?),
            None if url.starts_with("https:") => anyhow::bail!(
                "{url} is served over TLS: give this process the cluster's certificates (--tls-cert, --tls-key, --tls-ca)"
            ),
            None => Ok(endpoint),
        }
    }
}

impl Interceptor for PresentToken {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.token {
            request.metadata_mut().insert("authorization", v.clone());
        }
        Ok(request)
    }
}

/// A channel to another process of the cluster that presents the token.
pub type PeerChannel = InterceptedService<Channel, PresentToken>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_files_name_roles() {
        let t = Tokens::parse(
            "# the cluster's tokens\nadmin aaaaaaaaaaaaaaaaaaaa\n\nread rrrrrrrrrrrrrrrrrrrr\nbbbbbbbbbbbbbbbbbbbb\n",
        )
        .unwrap();
        assert_eq!(t.role_of("aaaaaaaaaaaaaaaaaaaa"), Some(Role::Admin));
        assert_eq!(t.role_of("bbbbbbbbbbbbbbbbbbbb"), Some(Role::Admin));
        assert_eq!(t.role_of("rrrrrrrrrrrrrrrrrrrr"), Some(Role::Read));
        assert_eq!(t.role_of("aaaaaaaaaaaaaaaaaaab"), None);
        assert_eq!(t.role_of(""), None);
        for (bad, why) in [
            ("", "no token"),
            ("# nothing\n", "no token"),
            ("admin short", "at least 16"),
            ("owner aaaaaaaaaaaaaaaaaaaa", "not a role"),
            ("read aaaaaaaa aaaaaaaaaaaa", "spaces"),
            ("read rrrrrrrrrrrrrrrrrrrr", "no admin token"),
        ] {
            let e = Tokens::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }
}
