//! Sinks: where records leave the job. Stdout and the plain JSON-lines file
//! sink: every subtask of a sink vertex writes through one shared writer, a
//! batch at a time (at-least-once). With checkpoints, the JSON-lines file
//! sink is [`part_files::PartFileSink`]: a directory of part files
//! committed with the checkpoints (exactly-once).

pub mod part_files;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::{Arc, Mutex};

use weir_model::Record;
use weir_model::graph::SinkConfig;

/// A sink subtask.
///
/// With checkpoints, a sink takes part in a two-phase commit (Flink's
/// `TwoPhaseCommitSinkFunction`): on a checkpoint's barrier it
/// *pre-commits* what it wrote since the previous one (makes it durable but
/// not yet visible) and returns a handle that the checkpoint keeps; when the
/// checkpoint completes it *commits* (makes it visible). After a failure,
/// what was not pre-committed is *aborted*, and a restore commits the
/// handles of the checkpoint it resumes from again, so commit must be
/// idempotent. A sink that writes straight through (stdout, the plain file
/// sink) makes everything durable on pre-commit and is at-least-once.
pub trait Sink: Send {
    /// Write a batch of records.
    fn write(&mut self, batch: &[Record]) -> anyhow::Result<()>;
    /// The input ended: make everything durable (and, for a transactional
    /// sink, visible).
    fn finish(&mut self) -> anyhow::Result<()>;
    /// Make what was written visible, at most every [`FLUSH_INTERVAL`]:
    /// called after every batch, and when no input came for that long.
    fn flush(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
    /// The task's input is drained for now (it is about to wait for more):
    /// make what was written visible at once, so that a record that arrives
    /// while the stream is slow leaves without waiting for the interval.
    fn write_out(&mut self) -> anyhow::Result<()> {
        self.flush()
    }
    /// Checkpoint `checkpoint`'s barrier passed: make everything written so
    /// far durable, and return the handle to commit it by.
    fn pre_commit(&mut self, checkpoint: u64) -> anyhow::Result<Vec<u8>> {
        let _ = checkpoint;
        self.finish()?;
        Ok(Vec::new())
    }
    /// Checkpoint `checkpoint` completed: make what it pre-committed
    /// visible. Called again with the same handle after a restore: doing it
    /// twice must change nothing.
    fn commit(&mut self, checkpoint: u64, handle: &[u8]) -> anyhow::Result<()> {
        let _ = (checkpoint, handle);
        Ok(())
    }
    /// The job failed or was canceled: drop what was not pre-committed.
    fn abort(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
}

/// How often a sink writes out its buffer while a job runs: a partly
/// filled buffer waits at most this long, however slow the stream.
pub const FLUSH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(5);

/// The writer shared by the subtasks of one sink vertex.
#[derive(Clone)]
pub struct SharedSink {
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    what: String,
    flushed: std::time::Instant,
    /// Something was written since this subtask last wrote out.
    unwritten: bool,
}

impl SharedSink {
    /// Open a sink vertex's destination: a file is created or truncated, or,
    /// with `append` (a job split over processes, each writing its share),
    /// created or appended to; every write holds whole lines, so the
    /// processes' lines never interleave.
    pub fn open(config: &SinkConfig, append: bool) -> anyhow::Result<SharedSink> {
        let (writer, what): (Box<dyn Write + Send>, String) = match config {
            SinkConfig::Stdout => (Box::new(std::io::stdout()), "standard output".into()),
            SinkConfig::JsonLinesFile { path, .. } => {
                if let Some(dir) = std::path::Path::new(path)
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                {
                    std::fs::create_dir_all(dir)
                        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
                }
                let file = if append {
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(path)
                } else {
                    File::create(path)
                }
                .map_err(|e| anyhow::anyhow!("cannot create {path}: {e}"))?;
                (
                    Box::new(BufWriter::with_capacity(1 << 20, file)),
                    path.clone(),
                )
            }
        };
        Ok(SharedSink {
            writer: Arc::new(Mutex::new(writer)),
            what,
            flushed: std::time::Instant::now(),
            unwritten: false,
        })
    }

    /// The writer of one subtask.
    pub fn subtask(&self) -> Box<dyn Sink> {
        Box::new(self.clone())
    }
}

impl Sink for SharedSink {
    fn write(&mut self, batch: &[Record]) -> anyhow::Result<()> {
        // Build the batch's bytes outside the lock.
        let mut buf = Vec::with_capacity(batch.iter().map(|r| r.value.len() + 1).sum());
        for r in batch {
            buf.extend_from_slice(&r.value);
            buf.push(b'\n');
        }
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        self.unwritten |= !batch.is_empty();
        w.write_all(&buf)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", self.what))
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        self.unwritten = false;
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        w.flush()
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", self.what))
    }

    fn flush(&mut self) -> anyhow::Result<()> {
        if self.flushed.elapsed() < FLUSH_INTERVAL {
            return Ok(());
        }
        self.flushed = std::time::Instant::now();
        self.finish()
    }

    fn write_out(&mut self) -> anyhow::Result<()> {
        if !self.unwritten {
            return Ok(());
        }
        self.flushed = std::time::Instant::now();
        self.finish()
    }
}
