//! TLS on every listener of a cluster's processes, and on their connections
//! to each other (rustls, with AWS-LC's cryptography).
//!
//! A process given a certificate chain and its private key (`--tls-cert`,
//! `--tls-key`, PEM) serves TLS on each of its listeners: the REST API, the
//! gRPC services, the workers' data connections and their metrics. When it
//! connects to the cluster's other processes it trusts the certificates
//! `--tls-ca` names (PEM), or, without one, its own certificate: a cluster
//! sharing one self-signed certificate needs nothing more. A certificate
//! must name every address the processes reach each other by (host names
//! and IP addresses, as subject alternative names).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// How long a client may take over its TLS handshake before a listener
/// drops the connection.
pub const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A process's TLS settings: how it serves, and whom it trusts.
#[derive(Clone)]
pub struct Tls {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    ca_pem: Vec<u8>,
    server: Arc<rustls::ServerConfig>,
    http_server: Arc<rustls::ServerConfig>,
    client: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls { .. }")
    }
}

/// The cryptography every configuration uses.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn read(path: &Path, what: &str) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path)
        .map_err(|e| anyhow::anyhow!("cannot read the {what} {}: {e}", path.display()))
}

/// The certificates in PEM text `pem` (`what` names it in errors).
pub fn certificates(pem: &[u8], what: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("the {what}: {e}"))?;
    anyhow::ensure!(!certs.is_empty(), "the {what} holds no PEM certificate");
    Ok(certs)
}

/// A client configuration trusting the certificates in PEM text `ca`.
pub fn client_trusting(ca: &[u8], what: &str) -> anyhow::Result<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in certificates(ca, what)? {
        roots
            .add(cert)
            .map_err(|e| anyhow::anyhow!("the {what}: {e}"))?;
    }
    Ok(rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

impl Tls {
    /// Read the certificate chain `cert`, its key `key` and the
    /// certificates to trust `ca` (default: `cert`'s).
    pub fn load(cert: &Path, key: &Path, ca: Option<&Path>) -> anyhow::Result<Tls> {
        let cert_pem = read(cert, "TLS certificate")?;
        let key_pem = read(key, "TLS key")?;
        let ca_pem = match ca {
            Some(ca) => read(ca, "TLS CA certificate")?,
            None => cert_pem.clone(),
        };
        Self::from_pem(cert_pem, key_pem, ca_pem).map_err(|e| {
            anyhow::anyhow!(
                "{e:#} (--tls-cert {}, --tls-key {})",
                cert.display(),
                key.display()
            )
        })
    }

    /// The same from PEM text.
    pub fn from_pem(cert_pem: Vec<u8>, key_pem: Vec<u8>, ca_pem: Vec<u8>) -> anyhow::Result<Tls> {
        let chain = certificates(&cert_pem, "TLS certificate")?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem)
            .map_err(|e| anyhow::anyhow!("the TLS key: {e}"))?;
        let server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| anyhow::anyhow!("the TLS certificate and key: {e}"))?;
        let mut http_server = server.clone();
        http_server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let client = client_trusting(&ca_pem, "TLS CA certificate")?;
        Ok(Tls {
            cert_pem,
            key_pem,
            ca_pem,
            server: Arc::new(server),
            http_server: Arc::new(http_server),
            client: Arc::new(client),
        })
    }

    /// Accepts TLS on a plain byte stream (the data connections).
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.server.clone())
    }

    /// Accepts TLS for HTTP/1.1 and HTTP/2 (the REST API, metrics).
    pub fn http_acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.http_server.clone())
    }

    /// Opens TLS to the cluster's other processes.
    pub fn connector(&self) -> tokio_rustls::TlsConnector {
        tokio_rustls::TlsConnector::from(self.client.clone())
    }

    /// TLS over `stream`, a connection to another process of the cluster at
    /// `ip` (whose certificate must name that address).
    pub async fn connect_ip<S>(
        &self,
        ip: std::net::IpAddr,
        stream: S,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<S>>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        let name = rustls::pki_types::ServerName::IpAddress(ip.into());
        self.connector().connect(name, stream).await
    }

    /// How a client trusts the cluster (for HTTP clients).
    pub fn client_config(&self) -> rustls::ClientConfig {
        (*self.client).clone()
    }

    /// A gRPC server's TLS.
    pub fn grpc_server(&self) -> tonic::transport::ServerTlsConfig {
        tonic::transport::ServerTlsConfig::new().identity(tonic::transport::Identity::from_pem(
            &self.cert_pem,
            &self.key_pem,
        ))
    }

    /// A gRPC client's TLS.
    pub fn grpc_client(&self) -> tonic::transport::ClientTlsConfig {
        tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(&self.ca_pem))
    }
}

/// `http://` or `https://`: the scheme of a process's addresses.
pub fn scheme(tls: Option<&Tls>) -> &'static str {
    if tls.is_some() { "https" } else { "http" }
}
