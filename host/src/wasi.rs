//! A locked-down WASI for guests: components built by standard toolchains
//! import WASI (Rust's std for panics, stdio and hash seeds; Python and
//! JavaScript runtimes for much more), so it is linked, but grants nothing:
//! no preopened directories (opening a file fails), no sockets (TCP and UDP
//! denied, no name lookup), no environment variables, no arguments, stdin
//! closed. Guest stdout and stderr are captured into the task's log, and the
//! last lines of stderr are kept to explain a failure.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder};

use crate::error::TaskIdent;

/// Lines a guest wrote recently (stderr, and its error-level log lines).
/// Bounded: the oldest lines are dropped.
#[derive(Clone, Default)]
pub(crate) struct LastWords(Arc<Mutex<VecDeque<String>>>);

const KEPT_LINES: usize = 20;
const MAX_LINE: usize = 2_000;

impl LastWords {
    pub(crate) fn push(&self, line: &str) {
        let mut lines = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if lines.len() == KEPT_LINES {
            lines.pop_front();
        }
        let mut line = line.trim_end().to_owned();
        if line.len() > MAX_LINE {
            let mut cut = MAX_LINE;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
            line.push('…');
        }
        lines.push_back(line);
    }

    pub(crate) fn take(&self) -> Vec<String> {
        let mut lines = self.0.lock().unwrap_or_else(|p| p.into_inner());
        lines.drain(..).collect()
    }
}

/// A guest's stdout or stderr: complete lines go to the log.
#[derive(Clone)]
struct LogStream {
    ident: Arc<TaskIdent>,
    stderr: bool,
    partial: Arc<Mutex<Vec<u8>>>,
    last_words: LastWords,
}

impl LogStream {
    fn line(&self, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let ident = &*self.ident;
        if self.stderr {
            tracing::warn!(job = %ident.job, operator = %ident.operator, subtask = ident.subtask, "guest stderr: {}", text.trim_end());
            self.last_words.push(&text);
        } else {
            tracing::info!(job = %ident.job, operator = %ident.operator, subtask = ident.subtask, "guest stdout: {}", text.trim_end());
        }
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for LogStream {
    async fn ready(&mut self) {}
}

/// Bytes a guest may write per call; a line longer than this is cut.
const MAX_PENDING: usize = 64 * 1024;

impl OutputStream for LogStream {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        let mut partial = self.partial.lock().unwrap_or_else(|p| p.into_inner());
        partial.extend_from_slice(&bytes);
        while let Some(nl) = partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = partial.drain(..=nl).collect();
            self.line(&line);
        }
        if partial.len() > MAX_PENDING {
            let line = std::mem::take(&mut *partial);
            self.line(&line);
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(MAX_PENDING)
    }
}

impl IsTerminal for LogStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogStream {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        // Only WASI 0.3 guests use this; they are not linked.
        Box::new(tokio::io::sink())
    }
}

/// The WASI context of one operator instance.
pub(crate) fn locked_down(ident: Arc<TaskIdent>, last_words: LastWords) -> WasiCtx {
    let stream = |stderr| LogStream {
        ident: ident.clone(),
        stderr,
        partial: Arc::default(),
        last_words: last_words.clone(),
    };
    WasiCtxBuilder::new()
        .stdout(stream(false))
        .stderr(stream(true))
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .build()
}
