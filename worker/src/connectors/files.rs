//! Files: the text-file and JSON-lines sources. Parallel subtasks read
//! byte ranges of the file, cut from its size when the job first started.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::time::Duration;

use weir_model::codec::Codec;
use weir_model::connectors::files::{JsonLinesFile, TextFile};
use weir_model::types::Type;
use weir_model::{Record, RecordBuffer, Records};

use super::Source;
use super::lines::{LineDecoder, LineError, LineFormat};
use crate::checkpoint::SplitPosition;
use crate::dead_letter::{Rejects, Undecodable};

/// A text file's split: each line a string.
pub(super) fn open_text(
    c: &TextFile,
    split: (u32, u32),
    codec: Codec,
    size: Option<u64>,
) -> anyhow::Result<Box<dyn Source>> {
    Ok(Box::new(FileSplit::open(
        &c.path,
        split,
        LineFormat::Text,
        codec,
        size,
        Rejects::default(),
    )?))
}

/// A JSON-lines file's split; the last one follows the file as it grows
/// when the source asks for it.
pub(super) fn open_json_lines(
    c: &JsonLinesFile,
    split: (u32, u32),
    codec: Codec,
    size: Option<u64>,
    ty: Option<&Type>,
    rejects: Rejects,
) -> anyhow::Result<Box<dyn Source>> {
    let mut s = FileSplit::open(&c.path, split, LineFormat::json(ty), codec, size, rejects)?;
    // The last split goes on with whatever is appended.
    s.follow = c.follow && split.0 + 1 == split.1;
    if s.follow {
        s.end = u64::MAX;
    }
    Ok(Box::new(s))
}

/// The lines of a byte range of a file. Subtask `i` of `n` owns the lines
/// that *start* in `[i * size / n, (i + 1) * size / n)`, so every line is
/// read by exactly one subtask. `size` is the file's size when the job
/// first started; the range is kept in every checkpoint, so a restore reads
/// the same one.
struct FileSplit {
    reader: BufReader<File>,
    /// The split's first byte.
    start: u64,
    pos: u64,
    end: u64,
    /// Subtask `i` of `n`: the split's identity.
    index: (u32, u32),
    lines: LineDecoder,
    line: Vec<u8>,
    path: String,
    /// Keep reading past the end of the file, as it grows.
    follow: bool,
    /// Lines it could not decode, when it rejects them.
    rejects: Rejects,
}

/// How long a following file source waits for the file to grow.
const FOLLOW_POLL: Duration = Duration::from_millis(20);

impl FileSplit {
    fn open(
        path: &str,
        (subtask, parallelism): (u32, u32),
        format: LineFormat,
        codec: Codec,
        size: Option<u64>,
        rejects: Rejects,
    ) -> anyhow::Result<FileSplit> {
        let file = File::open(path).map_err(|e| anyhow::anyhow!("cannot open {path}: {e}"))?;
        let size = match size {
            Some(size) => size,
            None => file
                .metadata()
                .map_err(|e| anyhow::anyhow!("cannot read the size of {path}: {e}"))?
                .len(),
        };
        let (i, n) = (u64::from(subtask), u64::from(parallelism.max(1)));
        let mut split = FileSplit {
            reader: BufReader::with_capacity(256 * 1024, file),
            start: size * i / n,
            pos: 0,
            end: size * (i + 1) / n,
            index: (subtask, parallelism.max(1)),
            lines: LineDecoder::new(format, codec).validating(rejects.rejecting()),
            line: Vec::new(),
            path: path.to_owned(),
            follow: false,
            rejects,
        };
        split.seek_start()?;
        Ok(split)
    }

    /// Go to the split's first line: the rest of the line that byte
    /// `start - 1` belongs to is the previous split's.
    fn seek_start(&mut self) -> anyhow::Result<()> {
        self.pos = self.start;
        self.reader
            .seek(SeekFrom::Start(self.start.saturating_sub(1)))?;
        if self.start > 0 {
            let mut skipped = Vec::new();
            let n = self
                .reader
                .read_until(b'\n', &mut skipped)
                .map_err(|e| anyhow::anyhow!("reading {}: {e}", self.path))?;
            // (A file shorter than the size the splits were cut from ends
            // before this split: it reads nothing.)
            self.pos = (self.start - 1 + n as u64).max(self.start);
        }
        Ok(())
    }

    fn id(&self) -> String {
        format!("split {} of {}", self.index.0, self.index.1)
    }

    /// A position of an earlier version's checkpoint (`bytes S-E`, `bytes
    /// S-` when following): its range.
    fn legacy_range(split: &str) -> Option<(u64, u64)> {
        let (start, end) = split.strip_prefix("bytes ")?.split_once('-')?;
        let end = if end.is_empty() {
            u64::MAX
        } else {
            end.parse().ok()?
        };
        Some((start.parse().ok()?, end))
    }
}

impl Source for FileSplit {
    fn take_rejected(&mut self) -> Vec<Undecodable> {
        self.rejects.take()
    }

    fn snapshot(&self) -> Vec<SplitPosition> {
        vec![SplitPosition {
            split: self.id(),
            offset: self.pos,
            range: Some((self.start, self.end)),
        }]
    }

    fn restore(&mut self, positions: &[SplitPosition]) -> anyhow::Result<()> {
        if positions.is_empty() {
            return Ok(());
        }
        let id = self.id();
        let found = positions
            .iter()
            .find(|p| p.split == id)
            .or_else(|| match positions {
                [only] => Self::legacy_range(&only.split).map(|_| only),
                _ => None,
            });
        let Some(p) = found else {
            let held: Vec<&str> = positions.iter().map(|p| p.split.as_str()).collect();
            anyhow::bail!(
                "it holds no position of {id} of {} (it holds: {}); the source cannot resume where it was",
                self.path,
                held.join(", ")
            );
        };
        if let Some((start, end)) = p.range.or_else(|| Self::legacy_range(&p.split)) {
            // The range the split had when the job first started.
            self.start = start;
            self.end = if self.follow { u64::MAX } else { end };
        }
        // (A split that read its last line stands past its end: that line
        // started inside it.)
        if p.offset < self.start {
            anyhow::bail!(
                "the checkpoint's position {} of {} is before {id} (bytes {}-{})",
                p.offset,
                self.path,
                self.start,
                self.end
            );
        }
        self.reader.seek(SeekFrom::Start(p.offset))?;
        self.pos = p.offset;
        Ok(())
    }

    fn next_batch(&mut self, max: usize) -> anyhow::Result<Option<Vec<Record>>> {
        Ok(self.next_records(max)?.map(Records::into_list))
    }

    fn next_records(&mut self, max: usize) -> anyhow::Result<Option<Records>> {
        let mut batch = RecordBuffer::with_capacity(max, max * 64);
        while batch.len() + self.rejects.len() < max && self.pos < self.end {
            self.line.clear();
            let n = self
                .reader
                .read_until(b'\n', &mut self.line)
                .map_err(|e| anyhow::anyhow!("reading {}: {e}", self.path))?;
            if self.follow && self.line.last() != Some(&b'\n') {
                // The end of the file for now (maybe in the middle of a line
                // being written): read it again later.
                self.reader.seek(SeekFrom::Start(self.pos))?;
                if batch.is_empty() {
                    std::thread::sleep(FOLLOW_POLL);
                }
                break;
            }
            if n == 0 {
                self.pos = self.end;
                break;
            }
            self.pos += n as u64;
            let mut line: &[u8] = &self.line;
            while let [rest @ .., b'\n' | b'\r'] = line {
                line = rest;
            }
            let at = self.pos - n as u64;
            let error = match self.lines.push(line, &mut batch) {
                Ok(()) => continue,
                Err(LineError::Json(e)) => anyhow::anyhow!(
                    "{} (the line at byte {at}): {e}: {}",
                    self.path,
                    Codec::Json.excerpt(line)
                ),
                Err(LineError::Schema(e)) => anyhow::anyhow!(
                    "{} (the line at byte {at}) does not fit the source's schema: {e}: {}",
                    self.path,
                    Codec::Json.excerpt(line)
                ),
            };
            let rejected = Undecodable {
                raw: bytes::Bytes::copy_from_slice(line),
                split: Some(self.path.clone()),
                offset: Some(at),
                ..Undecodable::default()
            };
            self.rejects.reject(error, rejected)?;
        }
        Ok(if batch.is_empty() && self.pos >= self.end {
            None
        } else {
            Some(batch.finish_records())
        })
    }
}
