//! Sinks written straight through by every subtask of a sink vertex, one
//! shared writer, a batch at a time (at-least-once): standard output,
//! `discard`, and the JSON-lines file sink of a job without checkpoints
//! (with them, it is [`super::part_files::PartFileSink`]).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::{Arc, Mutex};

use weir_model::Records;
use weir_model::format::Format;

use super::{FLUSH_INTERVAL, Sink, json_lines};

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
    /// Standard output.
    pub fn stdout() -> SharedSink {
        SharedSink::new(Box::new(std::io::stdout()), "standard output".into(), false)
    }

    /// Nowhere: what it is given is dropped.
    pub fn discard() -> SharedSink {
        SharedSink::new(Box::new(std::io::sink()), "nowhere (discard)".into(), true)
    }

    /// A file, created or truncated, or, with `append` (a job split over
    /// processes, each writing its share), created or appended to; every
    /// write holds whole lines, so the processes' lines never interleave.
    pub fn file(path: &str, append: bool) -> anyhow::Result<SharedSink> {
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
        Ok(SharedSink::new(
            Box::new(BufWriter::with_capacity(1 << 20, file)),
            path.to_owned(),
            false,
        ))
    }

    fn new(writer: Box<dyn Write + Send>, what: String, discard: bool) -> SharedSink {
        SharedSink {
            writer: Arc::new(Mutex::new(writer)),
            what,
            discard,
            format: Format::default(),
            flushed: std::time::Instant::now(),
            unwritten: false,
        }
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

impl SharedSink {
    /// Write records' values, `bytes` of them in all.
    fn write_values<'a>(
        &mut self,
        values: impl ExactSizeIterator<Item = &'a [u8]>,
        bytes: u64,
    ) -> anyhow::Result<()> {
        if self.discard || values.len() == 0 {
            return Ok(());
        }
        // Build the batch's bytes outside the lock.
        let mut buf = Vec::with_capacity(bytes as usize + values.len());
        json_lines(&self.format, values, &mut buf)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", self.what))?;
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        self.unwritten = true;
        w.write_all(&buf)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", self.what))
    }
}

impl Sink for SharedSink {
    fn write(&mut self, batch: &Records) -> anyhow::Result<()> {
        self.write_values(batch.iter().map(|r| r.value), batch.bytes())
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

    use weir_model::codec::Codec;
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
        let batch = [
            weir_model::Record::value(row.clone()),
            weir_model::Record::value(row.clone()),
        ];
        let mut out = Vec::new();
        json_lines(&format, batch.iter().map(|r| &r.value[..]), &mut out).unwrap();
        assert_eq!(out, b"{\"n\":3,\"s\":\"x\"}\n{\"n\":3,\"s\":\"x\"}\n");
        let bad = [weir_model::Record::value(row[..row.len() - 1].to_vec())];
        let e = json_lines(&format, bad.iter().map(|r| &r.value[..]), &mut out).unwrap_err();
        assert!(e.contains("cannot be written as JSON"), "{e}");
        // JSON records go out as they came.
        let mut out = Vec::new();
        json_lines(&Format::default(), [&b"[1]"[..]], &mut out).unwrap();
        assert_eq!(out, b"[1]\n");
    }
}
