//! Data between workers: one TCP connection per channel, with credit-based
//! flow control (see [`weir_model::frame`] for the wire format).
//!
//! Both ends look like the local channels tasks already use: a sender gets an
//! [`InboxSender`] (of a queue of one) whose messages a pump task writes to the
//! socket, one data frame per credit; the receiving worker's [`DataServer`]
//! forwards frames into the receiving subtask's queue ([`crate::inbox`]) and
//! grants a credit back for each data frame it could hand over. A slow task
//! therefore stops granting credit, its senders stop sending, and memory
//! stays bounded at every hop.
//!
//! On a cluster with TLS ([`weir_model::tls`]) every data connection is a
//! TLS stream, the receiver's certificate checked against the cluster's
//! for the receiver's IP address.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore};
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use weir_model::auth::Tokens;
use weir_model::frame::{ChannelKey, Frame, decode, encode};
use weir_model::tls::{HANDSHAKE_TIMEOUT, Tls};
use weir_model::{Signal, StreamMessage};

use crate::inbox::InboxSender;

/// Data frames a receiver lets a sender have in flight.
pub const INITIAL_CREDIT: u32 = 4;

/// The largest frame accepted (a batch of big records).
pub const MAX_FRAME: usize = 64 << 20;

/// How long a connection waits for its receiving subtask to be registered.
const REGISTER_WAIT: Duration = Duration::from_secs(10);

fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME)
        .new_codec()
}

type Registry = Arc<Mutex<HashMap<(String, u32, u32), InboxSender>>>;

/// The receiving side of a worker's data connections.
pub struct DataServer {
    addr: SocketAddr,
    receivers: Registry,
    tokens: Arc<Tokens>,
    tls: Option<Tls>,
}

impl DataServer {
    /// Listen on `addr` and serve connections until the process ends, on
    /// an open cluster.
    pub async fn bind(addr: &str) -> anyhow::Result<DataServer> {
        Self::bind_with(addr, Arc::new(Tokens::open()), None).await
    }

    /// Listen on `addr`, serving only senders that present one of the
    /// cluster's admin `tokens` (anyone, when it has none), over TLS when
    /// `tls` is given.
    pub async fn bind_with(
        addr: &str,
        tokens: Arc<Tokens>,
        tls: Option<Tls>,
    ) -> anyhow::Result<DataServer> {
        let listener = TcpListener::bind(addr).await?;
        let receivers: Registry = Arc::default();
        let server = DataServer {
            addr: listener.local_addr()?,
            receivers: receivers.clone(),
            tokens: tokens.clone(),
            tls: tls.clone(),
        };
        let acceptor = tls.as_ref().map(Tls::acceptor);
        tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, peer)) => {
                        let (receivers, tokens) = (receivers.clone(), tokens.clone());
                        let acceptor = acceptor.clone();
                        tokio::spawn(async move {
                            let served = async {
                                stream.set_nodelay(true)?;
                                match acceptor {
                                    Some(acceptor) => {
                                        let stream = tokio::time::timeout(
                                            HANDSHAKE_TIMEOUT,
                                            acceptor.accept(stream),
                                        )
                                        .await
                                        .map_err(|_| anyhow::anyhow!("no TLS handshake"))??;
                                        serve(stream, receivers, &tokens).await
                                    }
                                    None => serve(stream, receivers, &tokens).await,
                                }
                            };
                            if let Err(e) = served.await {
                                tracing::warn!("data connection from {peer}: {e:#}");
                            }
                        });
                    }
                    Err(e) => tracing::warn!("accepting a data connection: {e}"),
                }
            }
        });
        Ok(server)
    }

    /// Where senders connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The token this worker's senders present to other workers.
    pub fn token(&self) -> Option<&str> {
        self.tokens.own()
    }

    /// The cluster's TLS, if it has it: senders use it too.
    pub fn tls(&self) -> Option<&Tls> {
        self.tls.as_ref()
    }

    /// Route the channels of subtask `subtask` of `vertex` of `job` into `tx`.
    pub fn register(&self, job: &str, vertex: u32, subtask: u32, tx: InboxSender) {
        self.receivers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((job.to_owned(), vertex, subtask), tx);
    }

    /// Forget a subtask's channels (its job ended).
    pub fn unregister(&self, job: &str, vertex: u32, subtask: u32) {
        self.receivers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(job.to_owned(), vertex, subtask));
    }
}

async fn serve(
    stream: impl AsyncRead + AsyncWrite + Unpin,
    receivers: Registry,
    tokens: &Tokens,
) -> anyhow::Result<()> {
    let mut framed = Framed::new(stream, codec());
    let first = framed
        .next()
        .await
        .ok_or_else(|| anyhow::anyhow!("closed before its hello"))??;
    let Frame::Hello(key, token) = decode(first.freeze())? else {
        anyhow::bail!("the first frame is not a hello");
    };
    if !tokens.admits_peer(Some(&token).filter(|t| !t.is_empty()).map(String::as_str)) {
        anyhow::bail!("refused: it does not present the cluster's token");
    }
    let slot = (key.job.clone(), key.vertex, key.subtask);
    let started = tokio::time::Instant::now();
    let tx = loop {
        if let Some(tx) = receivers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&slot)
            .cloned()
        {
            break tx;
        }
        if started.elapsed() > REGISTER_WAIT {
            anyhow::bail!(
                "no subtask {} of vertex {} of job {} here",
                key.subtask,
                key.vertex,
                key.job
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    forward(framed, key.channel, tx).await
}

/// A connection's messages not in the receiving subtask's queue yet.
#[derive(Default)]
struct Forwarding {
    /// Read, waiting for room, in order.
    pending: VecDeque<StreamMessage>,
    /// Put in the queue ahead of their room (an unaligned checkpoint's
    /// barrier took them in with it, so that the subtask finds it behind
    /// them): per message, whether it is data (a credit goes back once
    /// its room is taken).
    owed: VecDeque<bool>,
    /// The sender's stream is over (all of it read).
    ended: bool,
    /// Its end of data is in the queue: the subtask may end without
    /// losing anything.
    data_ended: bool,
}

/// Forward channel `channel`'s frames into the subtask's queue `tx`,
/// granting a credit back for each data frame once it has room there.
///
/// Frames are read as they come (credit bounds them) and wait here for
/// room. A barrier of an unaligned checkpoint does not wait: it goes into
/// the queue at once, with the frames before it, whose room is taken (and
/// credit granted) afterwards — the queue holds at most the sender's
/// credit more than its room for a while.
async fn forward<S>(
    framed: Framed<S, LengthDelimitedCodec>,
    channel: u32,
    tx: InboxSender,
) -> anyhow::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (mut sink, mut stream) = framed.split();
    sink.send(encode(&Frame::Credit(INITIAL_CREDIT))).await?;
    let state = Mutex::new(Forwarding::default());
    let wake = Notify::new();
    let lock = || state.lock().unwrap_or_else(|p| p.into_inner());
    let stopped = || anyhow::anyhow!("the receiving subtask stopped");
    let reader = async {
        while let Some(bytes) = stream.next().await {
            let frame = decode(bytes?.freeze())?;
            let Frame::Message(message) = frame else {
                anyhow::bail!("unexpected frame from a sender: {frame:?}");
            };
            let end = message.is_end();
            {
                let mut f = lock();
                match message {
                    StreamMessage::Signal(Signal::Barrier(b)) if b.aligned_timeout_ms.is_some() => {
                        while let Some(m) = f.pending.pop_front() {
                            if tx.takes_room(&m) {
                                let data = matches!(m, StreamMessage::Data(_));
                                f.owed.push_back(data);
                            }
                            let ends = matches!(m, StreamMessage::Signal(Signal::EndOfData));
                            if tx.force((channel, m)).is_err() {
                                return if f.data_ended { Ok(()) } else { Err(stopped()) };
                            }
                            f.data_ended |= ends;
                        }
                        if tx.force((channel, message)).is_err() && !f.data_ended {
                            return Err(stopped());
                        }
                    }
                    m => f.pending.push_back(m),
                }
                f.ended |= end;
            }
            wake.notify_one();
            if end {
                break;
            }
        }
        lock().ended = true;
        wake.notify_one();
        anyhow::Ok(())
    };
    let writer = async {
        loop {
            let (work, done) = {
                let mut f = lock();
                // What takes no room goes in at once.
                while f.pending.front().is_some_and(|m| !tx.takes_room(m)) {
                    let m = f.pending.pop_front().expect("checked");
                    if tx.force((channel, m)).is_err() {
                        return if f.data_ended { Ok(()) } else { Err(stopped()) };
                    }
                }
                let work = !f.pending.is_empty() || !f.owed.is_empty();
                (work, f.ended && !work)
            };
            if done {
                return anyhow::Ok(());
            }
            if !work {
                wake.notified().await;
                continue;
            }
            let Ok(room) = tx.reserve().await else {
                if lock().data_ended {
                    // It finished after the end of data: nothing is lost.
                    return Ok(());
                }
                return Err(stopped());
            };
            let credit = {
                let mut f = lock();
                if let Some(data) = f.owed.pop_front() {
                    room.keep();
                    data
                } else if let Some(m) = f.pending.pop_front() {
                    let data = matches!(m, StreamMessage::Data(_));
                    f.data_ended |= matches!(m, StreamMessage::Signal(Signal::EndOfData));
                    room.send((channel, m)).map_err(|_| stopped())?;
                    data
                } else {
                    false
                }
            };
            if credit {
                sink.send(encode(&Frame::Credit(1))).await?;
            }
        }
    };
    tokio::try_join!(reader, writer)?;
    Ok(())
}

/// Open channel `key` to the worker at `addr`, presenting `token`, over
/// TLS when `tls` is given. Messages given to the returned sender go out in
/// order, data frames only with credit.
pub async fn connect(
    addr: SocketAddr,
    key: ChannelKey,
    token: Option<&str>,
    tls: Option<&Tls>,
) -> anyhow::Result<InboxSender> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    match tls {
        Some(tls) => {
            let stream = tls
                .connect_ip(addr.ip(), stream)
                .await
                .map_err(|e| anyhow::anyhow!("TLS to the worker at {addr}: {e}"))?;
            open(stream, addr, key, token).await
        }
        None => open(stream, addr, key, token).await,
    }
}

/// Open channel `key` on a connected `stream`.
async fn open(
    stream: impl AsyncRead + AsyncWrite + Unpin + Send + 'static,
    addr: SocketAddr,
    key: ChannelKey,
    token: Option<&str>,
) -> anyhow::Result<InboxSender> {
    let mut framed = Framed::new(stream, codec());
    let hello = Frame::Hello(key.clone(), token.unwrap_or_default().to_owned());
    framed.send(encode(&hello)).await?;
    let (mut sink, mut stream) = framed.split();
    let credit = Arc::new(Semaphore::new(0));
    let granted = credit.clone();
    tokio::spawn(async move {
        while let Some(Ok(bytes)) = stream.next().await {
            match decode(bytes.freeze()) {
                Ok(Frame::Credit(n)) => granted.add_permits(n as usize),
                other => {
                    tracing::warn!("unexpected frame from a receiver: {other:?}");
                    break;
                }
            }
        }
        // The receiver is gone: wake a sender waiting for credit.
        granted.close();
    });
    // A data message waits for credit at its sender (the pump sends what
    // it is given at once): a barrier behind a batch waiting for credit is
    // not held up behind it.
    let (tx, mut rx) = crate::inbox::credited(credit);
    tokio::spawn(async move {
        while let Some((_, message)) = rx.recv().await {
            let end = message.is_end();
            if let Err(e) = sink.send(encode(&Frame::Message(message))).await {
                tracing::warn!("sending to {addr} ({key:?}): {e}");
                break;
            }
            if end {
                break;
            }
        }
        // Dropping `rx` makes the sender's next send fail: the job stops.
    });
    Ok(tx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use weir_model::Record;

    fn key(channel: u32) -> ChannelKey {
        ChannelKey {
            job: "j".into(),
            vertex: 1,
            subtask: 0,
            channel,
        }
    }

    fn barrier(id: u64) -> StreamMessage {
        StreamMessage::Signal(weir_model::Signal::Barrier(weir_model::Barrier {
            id,
            timestamp_ms: 1,
            kind: weir_model::CheckpointKind::Checkpoint,
            mode: weir_model::CheckpointMode::ExactlyOnce,
            aligned_timeout_ms: None,
        }))
    }

    fn batch(i: usize) -> StreamMessage {
        StreamMessage::Data(vec![Record::value(i.to_string().into_bytes())].into())
    }

    #[tokio::test]
    async fn messages_arrive_in_order_with_signals() {
        let server = DataServer::bind("127.0.0.1:0").await.unwrap();
        let (tx, mut rx) = crate::inbox::channel(2);
        server.register("j", 1, 0, tx);
        let out = connect(server.addr(), key(3), None, None).await.unwrap();
        tokio::spawn(async move {
            for i in 0..300 {
                out.send((3, batch(i))).await.unwrap();
            }
            out.send((3, StreamMessage::watermark(99))).await.unwrap();
            out.send((3, barrier(7))).await.unwrap();
            out.send((3, batch(300))).await.unwrap();
            out.send((3, StreamMessage::END)).await.unwrap();
        });
        for i in 0..300 {
            assert_eq!(rx.recv().await.unwrap(), (3, batch(i)));
        }
        assert_eq!(rx.recv().await.unwrap(), (3, StreamMessage::watermark(99)));
        assert_eq!(rx.recv().await.unwrap(), (3, barrier(7)));
        assert_eq!(rx.recv().await.unwrap(), (3, batch(300)));
        assert_eq!(rx.recv().await.unwrap(), (3, StreamMessage::END));
    }

    #[tokio::test]
    async fn a_slow_receiver_stops_the_sender_within_its_credit() {
        let server = DataServer::bind("127.0.0.1:0").await.unwrap();
        let (tx, mut rx) = crate::inbox::channel(2);
        server.register("j", 1, 0, tx);
        let out = connect(server.addr(), key(0), None, None).await.unwrap();
        let sent = Arc::new(AtomicUsize::new(0));
        let counter = sent.clone();
        let sender = tokio::spawn(async move {
            for i in 0..1000 {
                out.send((0, batch(i))).await.unwrap();
                counter.fetch_add(1, Ordering::SeqCst);
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Nobody reads: at most the receiver's channel (2), one message in
        // the forwarder's hands, the credit (4) and the sender's queue and
        // pump (2) are taken.
        let stuck = sent.load(Ordering::SeqCst);
        assert!(
            stuck <= 2 + 1 + INITIAL_CREDIT as usize + 2,
            "sent {stuck} without reads"
        );
        for i in 0..1000 {
            assert_eq!(rx.recv().await.unwrap(), (0, batch(i)));
        }
        sender.await.unwrap();
    }

    #[tokio::test]
    async fn a_sender_to_an_unknown_subtask_fails() {
        let server = DataServer::bind("127.0.0.1:0").await.unwrap();
        let out = connect(
            server.addr(),
            ChannelKey {
                job: "none".into(),
                vertex: 0,
                subtask: 0,
                channel: 0,
            },
            None,
            None,
        )
        .await
        .unwrap();
        // The server waits for a registration, then closes: sends then fail
        // (instead of hanging).
        let mut failed = false;
        for i in 0..100 {
            if out.send((0, batch(i))).await.is_err() {
                failed = true;
                break;
            }
        }
        assert!(failed, "sends to a channel nobody receives must fail");
    }
}

#[cfg(test)]
mod auth_tests {
    use super::*;

    fn key() -> ChannelKey {
        ChannelKey {
            job: "j".into(),
            vertex: 0,
            subtask: 0,
            channel: 0,
        }
    }

    #[tokio::test]
    async fn only_senders_with_the_clusters_token_are_served() {
        let mut tokens = Tokens::open();
        tokens
            .add("cluster-token-0123456789", weir_model::auth::Role::Admin)
            .unwrap();
        tokens
            .add("viewer-token-0123456789", weir_model::auth::Role::Read)
            .unwrap();
        let server = DataServer::bind_with("127.0.0.1:0", Arc::new(tokens), None)
            .await
            .unwrap();
        assert_eq!(server.token(), Some("cluster-token-0123456789"));
        let (tx, mut rx) = crate::inbox::channel(4);
        server.register("j", 0, 0, tx);
        // Without the token, or with a read token: the connection is closed
        // before anything reaches the subtask.
        for token in [
            None,
            Some("viewer-token-0123456789"),
            Some("wrong-token-0123456789"),
        ] {
            let out = connect(server.addr(), key(), token, None).await.unwrap();
            let mut failed = false;
            for _ in 0..100 {
                if out
                    .send((0, StreamMessage::Data(Default::default())))
                    .await
                    .is_err()
                {
                    failed = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert!(failed, "{token:?} was served");
            assert!(rx.try_recv().is_err());
        }
        let out = connect(server.addr(), key(), server.token(), None)
            .await
            .unwrap();
        out.send((0, StreamMessage::Data(Default::default())))
            .await
            .unwrap();
        let got = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
        assert_eq!(
            got.unwrap(),
            Some((0, StreamMessage::Data(Default::default())))
        );
    }
}
