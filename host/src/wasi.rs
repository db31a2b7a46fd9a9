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
const MAX_LINE: usize = 1_000;

impl LastWords {
    pub(crate) fn push(&self, line: &str) {
        self.push_bytes(line.as_bytes());
    }

    /// Keep a line, cut to [`MAX_LINE`] bytes before anything else is done
    /// with it (a guest's lines may be megabytes long).
    pub(crate) fn push_bytes(&self, line: &[u8]) {
        let cut = line.len() > MAX_LINE;
        let kept = &line[..line.len().min(MAX_LINE)];
        let mut line = String::from_utf8_lossy(kept).trim_end().to_owned();
        if cut {
            // A character cut in two shows as the replacement character.
            line.push('…');
        }
        let mut lines = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if lines.len() == KEPT_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    pub(crate) fn take(&self) -> Vec<String> {
        let mut lines = self.0.lock().unwrap_or_else(|p| p.into_inner());
        lines.drain(..).collect()
    }
}

/// How many bytes of log lines an instance may write per second; what is
/// over is dropped, and how much was dropped is logged once the second is
/// over. Shared by the instance's stdout, stderr and `log` import.
#[derive(Clone)]
pub(crate) struct LogBudget(Arc<Mutex<Budget>>);

struct Budget {
    ident: Arc<TaskIdent>,
    per_second: u64,
    started: std::time::Instant,
    used: u64,
    dropped: u64,
}

impl LogBudget {
    pub(crate) fn new(ident: Arc<TaskIdent>, per_second: u64) -> LogBudget {
        LogBudget(Arc::new(Mutex::new(Budget {
            ident,
            per_second,
            started: std::time::Instant::now(),
            used: 0,
            dropped: 0,
        })))
    }

    /// Whether a line of `bytes` may be written now.
    pub(crate) fn take(&self, bytes: usize) -> bool {
        let mut b = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if b.started.elapsed() >= std::time::Duration::from_secs(1) {
            if b.dropped > 0 {
                let i = &*b.ident;
                tracing::warn!(job = %i.job, operator = %i.operator, subtask = i.subtask, "dropped {} bytes of guest log over its limit of {} bytes per second", b.dropped, b.per_second);
            }
            b.started = std::time::Instant::now();
            (b.used, b.dropped) = (0, 0);
        }
        let bytes = bytes as u64;
        if b.used + bytes > b.per_second {
            b.dropped += bytes;
            false
        } else {
            b.used += bytes;
            true
        }
    }
}

/// A guest's stdout or stderr: complete lines go to the log.
#[derive(Clone)]
struct LogStream {
    ident: Arc<TaskIdent>,
    stderr: bool,
    partial: Arc<Mutex<Vec<u8>>>,
    last_words: LastWords,
    budget: LogBudget,
}

impl LogStream {
    fn line(&self, line: &[u8]) {
        if self.stderr {
            // Kept to explain a failure even when the log is over budget.
            self.last_words.push_bytes(line);
        }
        if !self.budget.take(line.len()) {
            return;
        }
        let text = String::from_utf8_lossy(line);
        let ident = &*self.ident;
        if self.stderr {
            tracing::warn!(job = %ident.job, operator = %ident.operator, subtask = ident.subtask, "guest stderr: {}", text.trim_end());
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
        // Each byte is looked at once: only what this write brings is
        // searched for line ends.
        let mut rest = &bytes[..];
        while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
            if partial.is_empty() {
                self.line(&rest[..=nl]);
            } else {
                partial.extend_from_slice(&rest[..=nl]);
                let line = std::mem::take(&mut *partial);
                self.line(&line);
            }
            rest = &rest[nl + 1..];
        }
        partial.extend_from_slice(rest);
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
pub(crate) fn locked_down(
    ident: Arc<TaskIdent>,
    last_words: LastWords,
    budget: LogBudget,
) -> WasiCtx {
    let stream = |stderr| LogStream {
        ident: ident.clone(),
        stderr,
        partial: Arc::default(),
        last_words: last_words.clone(),
        budget: budget.clone(),
    };
    WasiCtxBuilder::new()
        .stdout(stream(false))
        .stderr(stream(true))
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .build()
}

/// A guest waited in WASI (a sleep, a poll on something not ready) past its
/// call's wall-clock deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WaitedPastDeadline;

impl std::fmt::Display for WaitedPastDeadline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the guest waited (a sleep, or a poll on something not ready) past its call's wall-clock deadline")
    }
}

impl std::error::Error for WaitedPastDeadline {}

/// The WIT name of WASI's poll interface in the version linked.
const POLL: &str = "wasi:io/poll@0.2.12";

/// Bound WASI's blocking waits by the call's wall-clock deadline.
///
/// Epoch interruption stops a guest that runs too long, but only while it
/// runs its own code: a guest that sleeps or polls waits inside the host,
/// where no epoch is checked, and would keep its slot (and a cancel
/// waiting) for as long as it asked. So the two ways WASI waits, `poll` and
/// `pollable.block`, are replaced by ones that give up at
/// [`TaskState::call_deadline`](crate::imports::TaskState) and fail the call
/// with [`WaitedPastDeadline`]; a wait that ends in time behaves as WASI's.
pub(crate) fn bound_waits(
    linker: &mut wasmtime::component::Linker<crate::imports::TaskState>,
) -> wasmtime::Result<()> {
    use wasmtime::component::Resource;
    use wasmtime_wasi::p2::DynPollable;
    use wasmtime_wasi_io::bindings::wasi::io::poll::{Host, HostPollable};

    linker.allow_shadowing(true);
    let mut poll = linker.instance(POLL)?;
    poll.func_wrap(
        "poll",
        |mut store: wasmtime::StoreContextMut<'_, crate::imports::TaskState>,
         (pollables,): (Vec<Resource<DynPollable>>,)| {
            let state = store.data_mut();
            let deadline = state.call_deadline;
            let ready = wait_until(deadline, Host::poll(&mut state.table, pollables))??;
            Ok((ready,))
        },
    )?;
    poll.func_wrap(
        "[method]pollable.block",
        |mut store: wasmtime::StoreContextMut<'_, crate::imports::TaskState>,
         (pollable,): (Resource<DynPollable>,)| {
            let state = store.data_mut();
            let deadline = state.call_deadline;
            wait_until(deadline, HostPollable::block(&mut state.table, pollable))??;
            Ok(())
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Run `wait` until it ends or `deadline` passes.
fn wait_until<F: std::future::Future>(
    deadline: std::time::Instant,
    wait: F,
) -> wasmtime::Result<F::Output> {
    let left = deadline.saturating_duration_since(std::time::Instant::now());
    wasmtime_wasi::runtime::in_tokio(async move { tokio::time::timeout(left, wait).await })
        .map_err(|_| wasmtime::Error::new(WaitedPastDeadline))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_budget_lets_so_many_bytes_through_per_second() {
        let ident = Arc::new(TaskIdent {
            job: "j".into(),
            operator: "o".into(),
            subtask: 0,
        });
        let budget = LogBudget::new(ident, 100);
        assert!(budget.take(60));
        assert!(budget.take(40));
        assert!(!budget.take(1), "over the budget");
        assert!(!budget.take(50));
        // A new second, a new budget.
        budget.0.lock().unwrap().started -= std::time::Duration::from_secs(1);
        assert!(budget.take(100));
        assert_eq!(budget.0.lock().unwrap().dropped, 0);
    }
}
