//! The socket source: lines of text read from a TCP server, Flink's
//! `socketTextStream`. One subtask reads one connection; when it drops (or
//! cannot be made) the source tries again after a backoff that doubles from
//! 100 ms up to `max-backoff-ms`. It keeps no position in checkpoints: what
//! the server sent while the job was down or failing over is not read again
//! (at-most-once).

use std::io::{BufRead, BufReader, ErrorKind};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use weir_model::codec::Codec;
use weir_model::connectors::socket::{LineFormat as Format, Socket};
use weir_model::types::Type;
use weir_model::{Record, RecordBuffer};

use super::Source;
use super::lines::{LineDecoder, LineError, LineFormat};
use crate::checkpoint::SplitPosition;
use crate::dead_letter::{Rejects, Undecodable};

/// The first wait before a reconnection.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// How long a read waits for data before the task gets its turn again
/// (barriers, watermarks, cancellation).
const READ_WAIT: Duration = Duration::from_millis(50);
/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest a batch is read for: a server that trickles bytes never
/// keeps the task from its barriers longer.
const BATCH_TIME: Duration = Duration::from_millis(100);
/// The longest line: a longer one fails the source rather than its
/// memory.
const MAX_LINE: usize = 16 << 20;

/// The subtask of a socket source (its only one).
pub(super) fn open(
    c: &Socket,
    (subtask, _): (u32, u32),
    codec: Codec,
    ty: Option<&Type>,
    rejects: Rejects,
) -> Box<dyn Source> {
    let format = match c.format {
        Format::Text => LineFormat::Text,
        Format::Json => LineFormat::json(ty),
    };
    Box::new(SocketSource {
        address: c.address.clone(),
        max_retries: c.max_retries,
        max_backoff: Duration::from_millis(c.max_backoff_ms).max(FIRST_BACKOFF),
        conn: None,
        retries: 0,
        backoff: FIRST_BACKOFF,
        next_attempt: Instant::now(),
        lines: LineDecoder::new(format, codec).validating(rejects.rejecting()),
        rejects,
        line: Vec::new(),
        // A second subtask has no connection of its own (the graph gives
        // a socket source one subtask).
        ended: subtask > 0,
        connected_once: false,
    })
}

/// What one read of the connection gave.
enum Step {
    /// Bytes (maybe a line's end).
    Read,
    /// Nothing for now.
    Wait,
    /// The server closed the connection.
    Closed,
    /// The connection failed.
    Failed(String),
}

struct SocketSource {
    address: String,
    max_retries: Option<u64>,
    max_backoff: Duration,
    conn: Option<BufReader<TcpStream>>,
    /// Reconnections since the last connection was made.
    retries: u64,
    backoff: Duration,
    next_attempt: Instant,
    lines: LineDecoder,
    /// Lines it could not decode, when it rejects them.
    rejects: Rejects,
    /// A line read in part (a read that waited out in its middle).
    line: Vec<u8>,
    ended: bool,
    /// A connection was made once: used-up retries end the input then,
    /// rather than fail it.
    connected_once: bool,
}

impl SocketSource {
    /// Connect, or schedule the next attempt (or give up when the retries
    /// are used up: an error, since the source never read its input).
    fn connect(&mut self) -> anyhow::Result<()> {
        let attempt = self
            .address
            .to_socket_addrs()
            .map_err(|e| anyhow::anyhow!("cannot resolve {}: {e}", self.address))
            .and_then(|addrs| {
                // Each address the name has, until one answers.
                let mut last = anyhow::anyhow!("{} resolves to no address", self.address);
                for addr in addrs {
                    match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
                        Ok(stream) => return Ok(stream),
                        Err(e) => last = anyhow::anyhow!("cannot connect to {}: {e}", self.address),
                    }
                }
                Err(last)
            })
            .and_then(|stream| {
                stream.set_read_timeout(Some(READ_WAIT))?;
                Ok(stream)
            });
        match attempt {
            Ok(stream) => {
                tracing::info!("socket source: connected to {}", self.address);
                self.conn = Some(BufReader::with_capacity(64 * 1024, stream));
                self.retries = 0;
                self.backoff = FIRST_BACKOFF;
                self.connected_once = true;
                Ok(())
            }
            Err(e) if self.retry() => {
                tracing::warn!("socket source: {e:#}; trying again in {:?}", self.backoff);
                Ok(())
            }
            Err(_) if self.connected_once => {
                // The server went away for good: the input ends, as a
                // closed connection without retries does.
                tracing::info!(
                    "socket source: {} is gone after {} attempts; the input ends",
                    self.address,
                    self.retries + 1
                );
                self.ended = true;
                Ok(())
            }
            Err(e) => {
                let n = self.retries + 1;
                anyhow::bail!("{e:#} ({n} attempt{})", if n == 1 { "" } else { "s" });
            }
        }
    }

    /// Schedule a reconnection; `false` when the retries are used up.
    fn retry(&mut self) -> bool {
        if self.max_retries.is_some_and(|most| self.retries >= most) {
            return false;
        }
        self.retries += 1;
        self.next_attempt = Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2).min(self.max_backoff);
        true
    }

    /// The connection ended (`why`): reconnect later, or end the input.
    fn dropped(&mut self, why: &str) {
        self.conn = None;
        self.line.clear();
        if self.retry() {
            tracing::warn!(
                "socket source: the connection to {} {why}; reconnecting in {:?}",
                self.address,
                self.next_attempt.saturating_duration_since(Instant::now())
            );
        } else {
            self.ended = true;
        }
    }

    /// The line in `self.line` (whole) into `batch`.
    fn decode(&mut self, batch: &mut RecordBuffer) -> anyhow::Result<()> {
        let mut line: &[u8] = &self.line;
        while let [rest @ .., b'\n' | b'\r'] = line {
            line = rest;
        }
        let error = match self.lines.push(line, batch) {
            Ok(()) => None,
            Err(LineError::Json(e)) => Some(anyhow::anyhow!(
                "a line from {} is not JSON: {e}: {}",
                self.address,
                Codec::Json.excerpt(line)
            )),
            Err(LineError::Schema(e)) => Some(anyhow::anyhow!(
                "a line from {} does not fit the source's schema: {e}: {}",
                self.address,
                Codec::Json.excerpt(line)
            )),
        };
        if let Some(error) = error {
            let rejected = Undecodable {
                raw: bytes::Bytes::copy_from_slice(line),
                split: Some(self.address.clone()),
                ..Undecodable::default()
            };
            self.rejects.reject(error, rejected)?;
        }
        self.line.clear();
        Ok(())
    }
}

impl Source for SocketSource {
    fn take_rejected(&mut self) -> Vec<Undecodable> {
        self.rejects.take()
    }

    fn next_batch(&mut self, max: usize) -> anyhow::Result<Option<Vec<Record>>> {
        if self.ended {
            return Ok(None);
        }
        if self.conn.is_none() {
            let wait = self.next_attempt.saturating_duration_since(Instant::now());
            if !wait.is_zero() {
                std::thread::sleep(wait.min(Duration::from_millis(100)));
                return Ok(Some(Vec::new()));
            }
            self.connect()?;
            if self.conn.is_none() {
                return Ok(Some(Vec::new()));
            }
        }
        let mut batch = RecordBuffer::with_capacity(max, max * 64);
        let started = Instant::now();
        while batch.len() + self.rejects.len() < max && started.elapsed() < BATCH_TIME {
            let conn = self.conn.as_mut().expect("connected above");
            let step = match conn.fill_buf() {
                Ok([]) => Step::Closed,
                Ok(buf) => {
                    let n = match buf.iter().position(|&b| b == b'\n') {
                        Some(end) => end + 1,
                        None => buf.len(),
                    };
                    self.line.extend_from_slice(&buf[..n]);
                    conn.consume(n);
                    Step::Read
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    Step::Wait
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => Step::Read,
                Err(e) => Step::Failed(e.to_string()),
            };
            match step {
                Step::Read if self.line.last() == Some(&b'\n') => self.decode(&mut batch)?,
                Step::Read if self.line.len() > MAX_LINE => anyhow::bail!(
                    "a line from {} is longer than {} MiB",
                    self.address,
                    MAX_LINE >> 20
                ),
                Step::Read => {}
                Step::Wait => break,
                Step::Closed => {
                    // The server closed the connection: its last line,
                    // unended, is a line too.
                    if !self.line.is_empty() {
                        self.decode(&mut batch)?;
                    }
                    self.dropped("was closed");
                    break;
                }
                Step::Failed(e) => {
                    self.dropped(&format!("failed: {e}"));
                    break;
                }
            }
        }
        Ok(if batch.is_empty() && self.ended {
            None
        } else {
            Some(batch.finish())
        })
    }

    fn snapshot(&self) -> Vec<SplitPosition> {
        Vec::new()
    }

    fn restore(&mut self, _positions: &[SplitPosition]) -> anyhow::Result<()> {
        // No position: it reads what the server sends from now on.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::TcpListener;

    use super::*;

    fn source(address: &str, format: Format, max_retries: Option<u64>) -> Box<dyn Source> {
        source_in(address, format, max_retries, Codec::Json)
    }

    fn source_in(
        address: &str,
        format: Format,
        max_retries: Option<u64>,
        codec: Codec,
    ) -> Box<dyn Source> {
        let c = Socket {
            address: address.to_owned(),
            format,
            max_retries,
            max_backoff_ms: 200,
        };
        open(&c, (0, 1), codec, None, Rejects::default())
    }

    /// Every record until the input ends, within 10 s.
    fn drain(s: &mut dyn Source) -> anyhow::Result<Vec<String>> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut out = Vec::new();
        while let Some(batch) = s.next_batch(4)? {
            assert!(Instant::now() < deadline, "the source did not end: {out:?}");
            out.extend(
                batch
                    .iter()
                    .map(|r| String::from_utf8(r.value.to_vec()).unwrap()),
            );
        }
        Ok(out)
    }

    /// Lines written in pieces (a line cut across writes, `\r\n` ends, a
    /// last line without an end) are whole records; with no retries the
    /// input ends when the server closes the connection.
    #[test]
    fn lines_come_whole_and_the_input_ends_with_the_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || {
            let (mut c, _) = listener.accept().unwrap();
            for piece in ["to be or ", "not\r\nto be\n", "", "ü\n{\"a\"", ": 1}"] {
                c.write_all(piece.as_bytes()).unwrap();
                c.flush().unwrap();
                std::thread::sleep(Duration::from_millis(80));
            }
        });
        let mut s = source(&address, Format::Text, Some(0));
        let got = drain(&mut *s).unwrap();
        server.join().unwrap();
        assert_eq!(
            got,
            [
                r#""to be or not""#,
                r#""to be""#,
                r#""ü""#,
                r#""{\"a\": 1}""#
            ]
        );
        assert!(s.snapshot().is_empty(), "no position: at-most-once");
    }

    /// A dropped connection is made again after a backoff, and what the
    /// server sends on the new one is read; a server that is not there yet
    /// is waited for; one gone for good ends the input, one never reached
    /// fails it.
    #[test]
    fn a_dropped_connection_is_made_again() {
        // A free port with nobody listening yet.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let address = format!("127.0.0.1:{port}");
        let mut s = source(&address, Format::Json, Some(5));
        // Refused at first: the source waits and tries again.
        assert_eq!(s.next_batch(4).unwrap().map(|b| b.len()), Some(0));
        let server = std::thread::spawn(move || {
            let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
            for n in 0..2 {
                let (mut c, _) = listener.accept().unwrap();
                writeln!(c, "{{\"connection\": {n}}}").unwrap();
            }
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut got = Vec::new();
        while got.len() < 2 {
            assert!(Instant::now() < deadline, "{got:?}");
            let batch = s.next_batch(4).unwrap().expect("retries left");
            got.extend(
                batch
                    .iter()
                    .map(|r| String::from_utf8(r.value.to_vec()).unwrap()),
            );
        }
        server.join().unwrap();
        assert_eq!(got, [r#"{"connection": 0}"#, r#"{"connection": 1}"#]);
        // The server is gone: when the retries run out the input ends.
        assert_eq!(drain(&mut *s).unwrap(), Vec::<String>::new());
        // A server never reached fails the source, naming it.
        let mut never = source(&address, Format::Text, Some(1));
        let e = drain(&mut *never).unwrap_err().to_string();
        assert!(
            e.contains(&format!("cannot connect to {address}")) && e.contains("(2 attempts)"),
            "{e}"
        );
    }

    /// A line that is not JSON fails the source that parses it (into
    /// MessagePack here; in a JSON stream it is passed on as it is, and its
    /// reader names it), naming the server.
    #[test]
    fn a_bad_json_line_names_the_server() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || {
            let (mut c, _) = listener.accept().unwrap();
            c.write_all(b"{\"ok\": 1}\nnot json\n").unwrap();
        });
        let mut s = source_in(&address, Format::Json, Some(0), Codec::Msgpack);
        let e = drain(&mut *s).unwrap_err().to_string();
        server.join().unwrap();
        assert!(
            e.contains(&format!("a line from {address} is not JSON")),
            "{e}"
        );
        assert!(e.contains("not json"), "{e}");
    }
}
