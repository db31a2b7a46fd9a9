//! HTTP over TLS: a listener for `axum::serve` whose connections are TLS
//! streams (the REST API and dashboard, a worker's metrics).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use weir_model::tls::HANDSHAKE_TIMEOUT;

/// Handshakes in progress at once; more connections wait to be accepted.
const HANDSHAKES: usize = 128;

/// Accepts TCP connections and hands on those that complete a TLS
/// handshake. Handshakes run side by side, each bounded in time, so a
/// client that connects and says nothing holds up no one.
pub struct TlsListener {
    addr: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
}

impl TlsListener {
    /// TLS with `acceptor` on the connections of `listener`.
    pub fn new(listener: TcpListener, acceptor: TlsAcceptor) -> std::io::Result<TlsListener> {
        let addr = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(HANDSHAKES);
        let handshakes = Arc::new(Semaphore::new(HANDSHAKES));
        tokio::spawn(async move {
            while !tx.is_closed() {
                let Ok(permit) = handshakes.clone().acquire_owned().await else {
                    break;
                };
                let (stream, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors, say: wait, then go on.
                        tracing::warn!("accepting a connection: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    let _permit = permit;
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!("TLS handshake with {peer}: {e}"),
                        Err(_) => tracing::debug!("TLS handshake with {peer}: timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { addr, ready })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(accepted) => accepted,
            // The accepting task ended: nothing more comes.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.addr)
    }
}

/// Serve `app` on `listener`, over TLS when `tls` is given, until
/// `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    tls: Option<&weir_model::tls::Tls>,
    app: axum::Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    match tls {
        Some(tls) => {
            let listener = TlsListener::new(listener, tls.http_acceptor())?;
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
        }
        None => {
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
        }
    }
}
