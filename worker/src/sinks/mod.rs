//! Sinks: where records leave the job. Stdout, discard and the plain
//! JSON-lines file sink: every subtask of a sink vertex writes through one shared writer, a
//! batch at a time (at-least-once). With checkpoints, the JSON-lines file
//! sink is [`part_files::PartFileSink`]: a directory of part files
//! committed with the checkpoints (exactly-once).

pub mod part_files;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::{Arc, Mutex};

use weir_model::Record;
use weir_model::codec::Codec;
use weir_model::format::Format;
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

/// Append `batch` to `out` as JSON lines: records of a JSON stream as they
/// are, rows and MessagePack written as JSON.
pub fn json_lines(format: &Format, batch: &[Record], out: &mut Vec<u8>) -> Result<(), String> {
    for r in batch {
        match format.codec {
            Codec::Json => out.extend_from_slice(&r.value),
            _ => format
                .write_json(&r.value, out)
                .map_err(|e| format!("a record cannot be written as JSON: {e}"))?,
        }
        out.push(b'\n');
    }
    Ok(())
}

/// How often a sink writes out its buffer while a job runs: a partly
/// filled buffer waits at most this long, however slow the stream.
pub const FLUSH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(5);

/// The writer shared by the subtasks of one sink vertex.
#[derive(Clone)]
pub struct SharedSink {
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    what: String,
    /// Drops what it is given (the `discard` sink).
    discard: bool,
    /// How its input's records are encoded (JSON is written as it is).
    format: Format,
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
            SinkConfig::Discard => (Box::new(std::io::sink()), "nowhere (discard)".into()),
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
            discard: matches!(config, SinkConfig::Discard),
            format: Format::default(),
            flushed: std::time::Instant::now(),
            unwritten: false,
        })
    }

    /// Its input's records are in `format`: it writes them as JSON.
    pub fn with_format(mut self, format: Format) -> SharedSink {
        self.format = format;
        self
    }

    /// The writer of one subtask.
    pub fn subtask(&self) -> Box<dyn Sink> {
        Box::new(self.clone())
    }
}

impl Sink for SharedSink {
    fn write(&mut self, batch: &[Record]) -> anyhow::Result<()> {
        if self.discard {
            return Ok(());
        }
        // Build the batch's bytes outside the lock.
        let mut buf = Vec::with_capacity(batch.iter().map(|r| r.value.len() + 1).sum());
        json_lines(&self.format, batch, &mut buf)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", self.what))?;
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use weir_model::types::row::{Schema, json};

    use super::*;

    #[test]
    fn sinks_write_rows_as_json_lines_and_refuse_malformed_ones() {
        let schema = Arc::new(Schema::new("{n: u64, s: string?}".parse().unwrap()));
        let format = Format {
            codec: Codec::Row,
            schema: Some(schema.clone()),
        };
        let mut row = Vec::new();
        json::read_value(&schema.node, br#"{"n": 3, "s": "x"}"#, &mut row).unwrap();
        let batch = [Record::value(row.clone()), Record::value(row.clone())];
        let mut out = Vec::new();
        json_lines(&format, &batch, &mut out).unwrap();
        assert_eq!(out, b"{\"n\":3,\"s\":\"x\"}\n{\"n\":3,\"s\":\"x\"}\n");
        let bad = [Record::value(row[..row.len() - 1].to_vec())];
        let e = json_lines(&format, &bad, &mut out).unwrap_err();
        assert!(e.contains("cannot be written as JSON"), "{e}");
        // JSON records go out as they came.
        let mut out = Vec::new();
        json_lines(&Format::default(), &[Record::value(&b"[1]"[..])], &mut out).unwrap();
        assert_eq!(out, b"[1]\n");
    }
}
