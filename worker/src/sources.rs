//! Sources: where records come from. Each subtask reads its own split.
//!
//! A source encodes its records in its stream's codec
//! ([`weir_model::codec::StreamCodecs`]): the generator and the text-file
//! source make MessagePack for components that read it, JSON otherwise; a
//! JSON-lines source passes its lines through as they are.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::time::{Duration, Instant};

use weir_model::codec::Codec;
use weir_model::graph::{GeneratorPattern, SourceConfig};
use weir_model::types::Type;
use weir_model::types::row::{Node, json, msgpack};
use weir_model::{Record, RecordBuffer};

use crate::checkpoint::SplitPosition;

/// A source subtask: hands out batches until its input ends.
///
/// Its progress is kept per split (Flink's `CheckpointedFunction` shape): a
/// checkpoint records [`Source::snapshot`] between two batches, and a
/// restarted subtask resumes from it with [`Source::restore`], so every
/// record is read again exactly from the first one after the checkpoint.
pub trait Source: Send {
    /// The next batch, `None` at the end of a bounded input.
    fn next_batch(&mut self, max: usize) -> anyhow::Result<Option<Vec<Record>>>;

    /// Where each of its splits stands now.
    fn snapshot(&self) -> Vec<SplitPosition>;

    /// Resume from positions a snapshot took. Positions of splits this
    /// subtask does not read are ignored; a split it reads that has no
    /// position starts at its beginning.
    fn restore(&mut self, positions: &[SplitPosition]) -> anyhow::Result<()>;
}

/// A source subtask that had read all its input when the checkpoint it
/// restores from was taken: it reads nothing, and its positions stay.
pub struct Finished(Vec<SplitPosition>);

impl Finished {
    /// Finished at `positions`.
    pub fn at(positions: Vec<SplitPosition>) -> Finished {
        Finished(positions)
    }
}

impl Source for Finished {
    fn next_batch(&mut self, _max: usize) -> anyhow::Result<Option<Vec<Record>>> {
        Ok(None)
    }

    fn snapshot(&self) -> Vec<SplitPosition> {
        self.0.clone()
    }

    fn restore(&mut self, positions: &[SplitPosition]) -> anyhow::Result<()> {
        self.0 = positions.to_vec();
        Ok(())
    }
}

/// Open the split of `subtask` (of `parallelism`) of an untyped source
/// (or one whose records are never rows), writing its records in `codec`;
/// a file's splits are cut from its size now.
pub fn open(
    config: &SourceConfig,
    subtask: u32,
    parallelism: u32,
    codec: Codec,
) -> anyhow::Result<Box<dyn Source>> {
    open_sized(config, subtask, parallelism, codec, None, None)
}

/// [`open`], a file's splits cut from `size` when given: the file's size
/// when the job first started ([`weir_model::JobGraph::file_sizes`]), so
/// that every subtask, on every worker and in every attempt, cuts the same
/// splits however the file grew since. `ty` is the type of its records
/// when it has one (a JSON-lines source's schema: its lines are read into
/// it, whatever `codec`; rows are written in it).
pub fn open_sized(
    config: &SourceConfig,
    subtask: u32,
    parallelism: u32,
    codec: Codec,
    size: Option<u64>,
    ty: Option<&Type>,
) -> anyhow::Result<Box<dyn Source>> {
    let node = ty.map(Node::of);
    if codec == Codec::Row && node.is_none() {
        anyhow::bail!("a source writing rows needs its records' type");
    }
    Ok(match config {
        SourceConfig::TextFile { path } => Box::new(FileSplit::open(
            path,
            (subtask, parallelism),
            LineFormat::Text,
            codec,
            size,
        )?),
        SourceConfig::JsonLinesFile { path, follow } => {
            let format = match node {
                Some(node) => LineFormat::Typed(Box::new(node)),
                None => LineFormat::JsonLines,
            };
            let mut split = FileSplit::open(path, (subtask, parallelism), format, codec, size)?;
            // The last split goes on with whatever is appended.
            split.follow = *follow && subtask + 1 == parallelism;
            if split.follow {
                split.end = u64::MAX;
            }
            Box::new(split)
        }
        SourceConfig::Generator {
            count,
            pattern,
            rate,
            start_at_ms,
        } => {
            let mut g = Generator::new(*count, *pattern, *rate, subtask, parallelism);
            g.codec = codec;
            if codec == Codec::Row {
                g.row = Some(RowLayout::of(&pattern.record_type()));
            }
            if let Some(at) = start_at_ms {
                // The schedule starts at that wall-clock time.
                let ahead = *at as i64 - weir_host::now_ms();
                g.started = if ahead >= 0 {
                    Instant::now() + Duration::from_millis(ahead as u64)
                } else {
                    Instant::now()
                        .checked_sub(Duration::from_millis(ahead.unsigned_abs()))
                        .unwrap_or_else(Instant::now)
                };
            }
            Box::new(g)
        }
    })
}

#[derive(Clone, PartialEq)]
enum LineFormat {
    /// The line as a JSON string.
    Text,
    /// The line as it is (it is JSON); blank lines skipped.
    JsonLines,
    /// The line (JSON) read into a row of this type; blank lines skipped.
    Typed(Box<Node>),
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
    format: LineFormat,
    line: Vec<u8>,
    /// A row being read, before it is written in another codec.
    row: Vec<u8>,
    path: String,
    /// Keep reading past the end of the file, as it grows.
    follow: bool,
    /// What its records are written in.
    codec: Codec,
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
            format,
            line: Vec::new(),
            row: Vec::new(),
            path: path.to_owned(),
            follow: false,
            codec,
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
        let mut batch = RecordBuffer::with_capacity(max, max * 64);
        while batch.len() < max && self.pos < self.end {
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
            match (&self.format, self.codec) {
                (LineFormat::Text, Codec::Json) => {
                    let text = String::from_utf8_lossy(line);
                    batch.push(None, None, |v| json_string(v, &text));
                }
                (LineFormat::Text, Codec::Msgpack) => {
                    let text = String::from_utf8_lossy(line);
                    batch.push(None, None, |v| msgpack_str(v, &text));
                }
                (LineFormat::Text, Codec::Row) => {
                    let text = String::from_utf8_lossy(line);
                    batch.push(None, None, |v| v.extend_from_slice(text.as_bytes()));
                }
                (LineFormat::JsonLines, codec) => {
                    if !line.iter().all(u8::is_ascii_whitespace) {
                        let mut bad = None;
                        batch.push(None, None, |v| match codec {
                            Codec::Json | Codec::Row => v.extend_from_slice(line),
                            Codec::Msgpack => {
                                if let Err(e) = weir_model::msgpack::from_json(line, v) {
                                    bad = Some(e);
                                }
                            }
                        });
                        if let Some(e) = bad {
                            anyhow::bail!("{}: {e}: {}", self.path, Codec::Json.excerpt(line));
                        }
                    }
                }
                (LineFormat::Typed(node), codec) => {
                    if !line.iter().all(u8::is_ascii_whitespace) {
                        let mut bad = None;
                        let row = &mut self.row;
                        batch.push(None, None, |v| {
                            let read = match codec {
                                Codec::Row => json::read_value(node, line, v),
                                _ => {
                                    row.clear();
                                    json::read_value(node, line, row).and_then(|()| {
                                        match codec {
                                            Codec::Msgpack => msgpack::write_value(node, row, v),
                                            _ => json::write_value(node, row, v),
                                        }
                                        .map_err(|e| e.to_string())
                                    })
                                }
                            };
                            if let Err(e) = read {
                                bad = Some(e);
                            }
                        });
                        if let Some(e) = bad {
                            anyhow::bail!(
                                "{} (the line at byte {at}) does not fit the source's schema: {e}: {}",
                                self.path,
                                Codec::Json.excerpt(line)
                            );
                        }
                    }
                }
            }
        }
        Ok(if batch.is_empty() && self.pos >= self.end {
            None
        } else {
            Some(batch.finish())
        })
    }
}

/// Generated records; subtask `i` of `n` makes records `i, i + n, i + 2n, …`.
struct Generator {
    next: u64,
    /// The first number, which with `step` names the split.
    first: u64,
    step: u64,
    count: Option<u64>,
    pattern: GeneratorPattern,
    rate: Option<u64>,
    started: Instant,
    made: u64,
    /// What its records are written in.
    codec: Codec,
    /// Its records' layout, when they are written as rows.
    row: Option<RowLayout>,
}

impl Generator {
    fn new(
        count: Option<u64>,
        pattern: GeneratorPattern,
        rate: Option<u64>,
        subtask: u32,
        parallelism: u32,
    ) -> Self {
        Generator {
            next: u64::from(subtask),
            first: u64::from(subtask),
            step: u64::from(parallelism.max(1)),
            count,
            pattern,
            rate,
            started: Instant::now(),
            made: 0,
            codec: Codec::Json,
            row: None,
        }
    }
}

/// A word of the generator's vocabulary of 1,000: syllables, so that words
/// look like words and have varied lengths.
pub fn vocabulary_word(i: u64) -> String {
    const SYLLABLES: [&str; 10] = [
        "ka", "lo", "mi", "ren", "tu", "sha", "vo", "nel", "di", "pa",
    ];
    let i = i % 1000;
    let mut w = String::new();
    w.push_str(SYLLABLES[(i % 10) as usize]);
    w.push_str(SYLLABLES[((i / 10) % 10) as usize]);
    if i >= 100 {
        w.push_str(SYLLABLES[((i / 100) % 10) as usize]);
    }
    w
}

/// Deterministic pseudo-random numbers (splitmix64).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Source for Generator {
    fn snapshot(&self) -> Vec<SplitPosition> {
        vec![SplitPosition {
            range: None,
            split: format!("{} mod {}", self.first, self.step),
            offset: self.next,
        }]
    }

    fn restore(&mut self, positions: &[SplitPosition]) -> anyhow::Result<()> {
        let id = format!("{} mod {}", self.first, self.step);
        if !positions.is_empty() && !positions.iter().any(|p| p.split == id) {
            let held: Vec<&str> = positions.iter().map(|p| p.split.as_str()).collect();
            anyhow::bail!(
                "it holds no position of the generator's split {id} (it holds: {}); the source cannot resume where it was",
                held.join(", ")
            );
        }
        if let Some(p) = positions.iter().find(|p| p.split == id) {
            if p.offset % self.step != self.first % self.step {
                anyhow::bail!(
                    "the checkpoint's position {} is not in split {id}",
                    p.offset
                );
            }
            // Records made so far count against the rate from here on.
            self.made = (p.offset - self.first) / self.step;
            self.started = Instant::now()
                - self.rate.filter(|r| *r > 0).map_or(Duration::ZERO, |r| {
                    Duration::from_secs_f64(self.made as f64 / r as f64)
                });
            self.next = p.offset;
        }
        Ok(())
    }

    fn next_batch(&mut self, max: usize) -> anyhow::Result<Option<Vec<Record>>> {
        let mut max = max;
        let now = Instant::now();
        if now < self.started {
            // Not due yet (`start-at-ms`).
            std::thread::sleep((self.started - now).min(Duration::from_millis(100)));
            return Ok(Some(Vec::new()));
        }
        if let Some(rate) = self.rate.filter(|r| *r > 0) {
            // Wait until the rate allows another record, then take what it allows.
            let allowed = (self.started.elapsed().as_secs_f64() * rate as f64) as u64;
            if allowed <= self.made {
                let wait =
                    (self.made + 1) as f64 / rate as f64 - self.started.elapsed().as_secs_f64();
                std::thread::sleep(Duration::from_secs_f64(wait.clamp(0.0, 0.1)));
                return Ok(Some(Vec::new()));
            }
            max = max.min((allowed - self.made) as usize);
        }
        let mut batch = RecordBuffer::with_capacity(max, max * 56);
        while batch.len() < max {
            if self.count.is_some_and(|c| self.next >= c) {
                break;
            }
            let n = self.next;
            let (pattern, codec) = (self.pattern, self.codec);
            let row = &self.row;
            batch.push(None, None, |v| match (codec, row) {
                (Codec::Row, Some(layout)) => pattern.write(n, &mut BinaryRow::new(v, layout)),
                (Codec::Msgpack, _) => pattern.write(n, &mut MsgpackRow(v)),
                _ => pattern.write(
                    n,
                    &mut JsonRow {
                        out: v,
                        first: true,
                    },
                ),
            });
            self.next += self.step;
        }
        self.made += batch.len() as u64;
        Ok(if batch.is_empty() && self.count.is_some() {
            None
        } else {
            Some(batch.finish())
        })
    }
}

/// Writes one generated record in a codec: a map of fields, or a string.
trait RecordWriter {
    /// A map of `len` fields begins.
    fn map(&mut self, len: u32);
    /// An integer field.
    fn uint(&mut self, name: &str, x: u64);
    /// A string field: `prefix` followed by the digits of `x`.
    fn tagged(&mut self, name: &str, prefix: char, x: u64);
    /// The map ends.
    fn end(&mut self);
    /// The record is a string.
    fn text(&mut self, text: &str);
}

/// JSON, written directly: formatting machinery was a tenth of a
/// passthrough job's time.
struct JsonRow<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl JsonRow<'_> {
    fn name(&mut self, name: &str) {
        self.out
            .extend_from_slice(if self.first { b"{\"" } else { b",\"" });
        self.first = false;
        self.out.extend_from_slice(name.as_bytes());
        self.out.extend_from_slice(b"\":");
    }
}

impl RecordWriter for JsonRow<'_> {
    fn map(&mut self, _: u32) {
        self.first = true;
    }
    fn uint(&mut self, name: &str, x: u64) {
        self.name(name);
        self.out
            .extend_from_slice(itoa::Buffer::new().format(x).as_bytes());
    }
    fn tagged(&mut self, name: &str, prefix: char, x: u64) {
        self.name(name);
        self.out.push(b'"');
        self.out.push(prefix as u8);
        self.out
            .extend_from_slice(itoa::Buffer::new().format(x).as_bytes());
        self.out.push(b'"');
    }
    fn end(&mut self) {
        self.out.push(b'}');
    }
    fn text(&mut self, text: &str) {
        json_string(self.out, text);
    }
}

/// MessagePack: the same maps, keys in the same order, integers in their
/// shortest form (as a key-by key must be).
struct MsgpackRow<'a>(&'a mut Vec<u8>);

impl RecordWriter for MsgpackRow<'_> {
    // Writing into a Vec cannot fail.
    fn map(&mut self, len: u32) {
        let _ = rmp::encode::write_map_len(self.0, len);
    }
    fn uint(&mut self, name: &str, x: u64) {
        msgpack_str(self.0, name);
        let _ = rmp::encode::write_uint(self.0, x);
    }
    fn tagged(&mut self, name: &str, prefix: char, x: u64) {
        msgpack_str(self.0, name);
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(x);
        let _ = rmp::encode::write_str_len(self.0, 1 + digits.len() as u32);
        self.0.push(prefix as u8);
        self.0.extend_from_slice(digits.as_bytes());
    }
    fn end(&mut self) {}
    fn text(&mut self, text: &str) {
        msgpack_str(self.0, text);
    }
}

/// Rows of the pattern's type ([`GeneratorPattern::record_type`]): the
/// pattern writes the type's fields in their order.
struct BinaryRow<'a> {
    out: &'a mut Vec<u8>,
    layout: &'a RowLayout,
    start: usize,
    field: usize,
}

/// Where a generated row's fields go: computed once per source, read per
/// field.
struct RowLayout {
    /// Bytes of bitmap and slots.
    fixed: usize,
    /// Each field's slot: offset and width.
    slots: Vec<(usize, usize)>,
}

impl RowLayout {
    /// The layout of rows of `ty`, a record type (a string's is empty).
    fn of(ty: &Type) -> RowLayout {
        match Node::of(ty) {
            Node::Record { fields, fixed, .. } => RowLayout {
                fixed,
                slots: fields.iter().map(|f| (f.offset, f.node.width())).collect(),
            },
            _ => RowLayout {
                fixed: 0,
                slots: Vec::new(),
            },
        }
    }
}

impl<'a> BinaryRow<'a> {
    fn new(out: &'a mut Vec<u8>, layout: &'a RowLayout) -> Self {
        BinaryRow {
            out,
            layout,
            start: 0,
            field: 0,
        }
    }

    /// The next field's slot offset (in the buffer) and width.
    fn next_slot(&mut self) -> (usize, usize) {
        let (offset, width) = self.layout.slots[self.field];
        self.field += 1;
        (self.start + offset, width)
    }
}

impl RecordWriter for BinaryRow<'_> {
    fn map(&mut self, _: u32) {
        self.start = self.out.len();
        self.out.resize(self.start + self.layout.fixed, 0);
        self.field = 0;
    }
    fn uint(&mut self, _: &str, x: u64) {
        let (at, width) = self.next_slot();
        // Little-endian: a narrower slot holds the low bytes.
        self.out[at..at + width].copy_from_slice(&x.to_le_bytes()[..width]);
    }
    fn tagged(&mut self, _: &str, prefix: char, x: u64) {
        let (at, _) = self.next_slot();
        let payload = self.out.len();
        self.out.push(prefix as u8);
        self.out
            .extend_from_slice(itoa::Buffer::new().format(x).as_bytes());
        weir_model::types::row::patch_var(self.out, self.start, at - self.start, payload);
    }
    fn end(&mut self) {}
    fn text(&mut self, text: &str) {
        self.out.extend_from_slice(text.as_bytes());
    }
}

/// What each generator pattern makes.
trait Pattern {
    fn write(self, n: u64, w: &mut impl RecordWriter);
}

impl Pattern for GeneratorPattern {
    fn write(self, n: u64, w: &mut impl RecordWriter) {
        match self {
            GeneratorPattern::Sequence => {
                w.map(1);
                w.uint("seq", n);
                w.end();
            }
            GeneratorPattern::Bids => {
                let r = mix(n);
                w.map(3);
                w.tagged("key", 'a', r % 10_000);
                w.uint("price", (r >> 20) % 10_000);
                w.uint("ts", n / 100);
                w.end();
            }
            GeneratorPattern::Numbers => {
                w.map(4);
                w.uint("id", n);
                w.uint("k", n % 10_000);
                w.uint("price", n % 1000);
                w.uint("ts", n / 100);
                w.end();
            }
            GeneratorPattern::Words => {
                let r = mix(n);
                let words: Vec<String> =
                    (0..8).map(|k| vocabulary_word(mix(r + k) % 1000)).collect();
                w.text(&words.join(" "));
            }
        }
    }
}

/// `text` as a MessagePack string at the end of `out`.
fn msgpack_str(out: &mut Vec<u8>, text: &str) {
    // Writing into a Vec cannot fail.
    let _ = rmp::encode::write_str(out, text);
}

/// `text` as a JSON string at the end of `out`.
fn json_string(out: &mut Vec<u8>, text: &str) {
    // Writing a string into a Vec cannot fail.
    let _ = serde_json::to_writer(out, text);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn read_all(config: &SourceConfig, n: u32) -> Vec<Vec<u8>> {
        read_all_in(config, n, Codec::Json)
    }

    fn read_all_in(config: &SourceConfig, n: u32, codec: Codec) -> Vec<Vec<u8>> {
        let mut all = Vec::new();
        for i in 0..n {
            let mut s = open(config, i, n, codec).unwrap();
            while let Some(b) = s.next_batch(7).unwrap() {
                all.extend(b.into_iter().map(|r| r.value.to_vec()));
            }
        }
        all
    }

    #[test]
    fn file_splits_read_every_line_once() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let lines: Vec<String> = (0..200)
            .map(|i| "x".repeat(i % 13) + &i.to_string())
            .collect();
        for l in &lines {
            writeln!(f, "{l}").unwrap();
        }
        let path = f.path().to_str().unwrap().to_owned();
        let expected: Vec<Vec<u8>> = lines
            .iter()
            .map(|l| serde_json::to_vec(l).unwrap())
            .collect();
        for n in [1, 2, 3, 4, 7, 64] {
            let mut got = read_all(&SourceConfig::TextFile { path: path.clone() }, n);
            got.sort();
            let mut want = expected.clone();
            want.sort();
            assert_eq!(got, want, "parallelism {n}");
        }
    }

    #[test]
    fn generator_splits_the_count() {
        let config = SourceConfig::Generator {
            count: Some(100),
            pattern: GeneratorPattern::Sequence,
            rate: None,
            start_at_ms: None,
        };
        let mut got: Vec<u64> = read_all(&config, 3)
            .iter()
            .map(|v| {
                serde_json::from_slice::<serde_json::Value>(v).unwrap()["seq"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        got.sort();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn the_numbers_pattern_has_the_benchmark_columns() {
        let config = SourceConfig::Generator {
            count: Some(123_457),
            pattern: GeneratorPattern::Numbers,
            rate: None,
            start_at_ms: None,
        };
        let all = read_all(&config, 2);
        assert_eq!(all.len(), 123_457);
        let row = all
            .iter()
            .find(|v| v.starts_with(br#"{"id":123456,"#))
            .unwrap();
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(row).unwrap(),
            serde_json::json!({"id": 123_456, "k": 3456, "price": 456, "ts": 1234})
        );
    }

    #[test]
    fn in_msgpack_every_source_makes_the_records_it_makes_in_json() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(
            f,
            "plain line\n\"quoted\" \\ back\tslash, ünïcode\n{{\"a\": [1, 2.5]}}"
        )
        .unwrap();
        let path = f.path().to_str().unwrap().to_owned();
        let mut jf = tempfile::NamedTempFile::new().unwrap();
        writeln!(
            jf,
            "{{\"k\": 1, \"v\": [\"x\", null, 2.5]}}\n\n{{\"k\": -7}}"
        )
        .unwrap();
        let generator = |pattern| SourceConfig::Generator {
            count: Some(2_000),
            pattern,
            rate: None,
            start_at_ms: None,
        };
        for config in [
            generator(GeneratorPattern::Sequence),
            generator(GeneratorPattern::Bids),
            generator(GeneratorPattern::Numbers),
            generator(GeneratorPattern::Words),
            SourceConfig::TextFile { path: path.clone() },
            SourceConfig::JsonLinesFile {
                path: jf.path().to_str().unwrap().to_owned(),
                follow: false,
            },
        ] {
            let json = read_all_in(&config, 2, Codec::Json);
            let packed = read_all_in(&config, 2, Codec::Msgpack);
            assert_eq!(json.len(), packed.len(), "{config:?}");
            assert!(!json.is_empty());
            for (j, m) in json.iter().zip(&packed) {
                let mut back = Vec::new();
                weir_model::msgpack::to_json(m, &mut back).unwrap();
                assert_eq!(
                    serde_json::from_slice::<serde_json::Value>(&back).unwrap(),
                    serde_json::from_slice::<serde_json::Value>(j).unwrap(),
                    "{config:?}"
                );
            }
            if matches!(
                config,
                SourceConfig::Generator {
                    pattern: GeneratorPattern::Numbers,
                    ..
                }
            ) {
                // Keys are in their shortest form: a key-by takes them as
                // they are, without re-encoding.
                let k = weir_model::msgpack::pointer(&packed[1999], "/k")
                    .unwrap()
                    .unwrap();
                assert!(matches!(k, std::borrow::Cow::Borrowed(_)));
            }
        }
    }
}

#[cfg(test)]
mod snapshot_tests {
    use super::*;
    use std::io::Write;

    /// Up to `n` records' values, read three at a time.
    pub(super) fn values(s: &mut dyn Source, n: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while out.len() < n {
            match s.next_batch(3).unwrap() {
                Some(b) => out.extend(b.into_iter().map(|r| r.value.to_vec())),
                None => break,
            }
        }
        out
    }

    #[test]
    fn a_restored_split_goes_on_after_its_snapshot() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        for i in 0..100 {
            writeln!(f, "line {i}").unwrap();
        }
        let path = f.path().to_str().unwrap().to_owned();
        for config in [
            SourceConfig::TextFile { path: path.clone() },
            SourceConfig::Generator {
                count: Some(100),
                pattern: GeneratorPattern::Sequence,
                rate: None,
                start_at_ms: None,
            },
        ] {
            for subtask in 0..2 {
                let mut whole = open(&config, subtask, 2, Codec::Json).unwrap();
                let all = values(&mut *whole, usize::MAX);
                let mut first = open(&config, subtask, 2, Codec::Json).unwrap();
                let head = values(&mut *first, 9);
                let positions = first.snapshot();
                let mut again = open(&config, subtask, 2, Codec::Json).unwrap();
                again.restore(&positions).unwrap();
                let tail = values(&mut *again, usize::MAX);
                assert_eq!([head, tail].concat(), all, "{config:?} subtask {subtask}");
                // Another subtask's positions are not its own: a position
                // that matches no split of it is an error naming the split,
                // never a silent start from the beginning.
                let mut other = open(&config, 1 - subtask, 2, Codec::Json).unwrap();
                let e = other.restore(&positions).unwrap_err().to_string();
                assert!(e.contains("holds no position of"), "{e}");
                assert!(e.contains(&positions[0].split), "{e}");
            }
        }
    }
}

#[cfg(test)]
mod follow_tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_followed_file_is_read_as_it_grows_whole_lines_only() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, "{{\"a\":1}}").unwrap();
        let config = SourceConfig::JsonLinesFile {
            path: f.path().to_str().unwrap().to_owned(),
            follow: true,
        };
        let mut s = open(&config, 0, 1, Codec::Json).unwrap();
        let b = s.next_batch(10).unwrap().unwrap();
        assert_eq!(b.len(), 1);
        assert_eq!(s.next_batch(10).unwrap().unwrap().len(), 0, "no end");
        write!(f, "{{\"a\":").unwrap();
        f.flush().unwrap();
        assert_eq!(s.next_batch(10).unwrap().unwrap().len(), 0, "half a line");
        writeln!(f, "2}}").unwrap();
        f.flush().unwrap();
        let b = s.next_batch(10).unwrap().unwrap();
        assert_eq!(b.len(), 1);
        assert_eq!(&b[0].value[..], b"{\"a\":2}");
    }
}

#[cfg(test)]
mod stable_split_tests {
    use super::*;
    use std::io::Write;

    fn drain(s: &mut dyn Source) -> Vec<String> {
        let mut out = Vec::new();
        // A following split never ends: read until it has nothing for now.
        for _ in 0..50 {
            match s.next_batch(7).unwrap() {
                Some(b) if b.is_empty() => break,
                Some(b) => out.extend(
                    b.into_iter()
                        .map(|r| String::from_utf8(r.value.to_vec()).unwrap()),
                ),
                None => break,
            }
        }
        out
    }

    /// A followed file at parallelism 2, read to its end, checkpointed,
    /// grown, and restored from the checkpoint: the splits keep the ranges
    /// they had when the job started (the first reads nothing more, the
    /// last reads what was appended from its offset), so every line is
    /// read once. Cut from the grown size, the first split would read
    /// lines the second had read already.
    #[test]
    fn a_restore_after_the_file_grew_reads_every_line_once() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        for i in 0..100 {
            writeln!(f, "{{\"n\":{i}}}").unwrap();
        }
        f.flush().unwrap();
        let path = f.path().to_str().unwrap().to_owned();
        let config = SourceConfig::JsonLinesFile {
            path: path.clone(),
            follow: true,
        };
        let size = std::fs::metadata(&path).unwrap().len();
        let mut read = Vec::new();
        let mut positions = Vec::new();
        for subtask in 0..2 {
            let mut s = open_sized(&config, subtask, 2, Codec::Json, Some(size), None).unwrap();
            read.extend(drain(&mut *s));
            positions.push(s.snapshot());
        }
        assert_eq!(read.len(), 100);
        for i in 100..300 {
            writeln!(f, "{{\"n\":{i}}}").unwrap();
        }
        f.flush().unwrap();
        // The attempt after a failure: the file is three times larger now.
        for subtask in 0..2 {
            let grown = std::fs::metadata(&path).unwrap().len();
            let mut s = open_sized(&config, subtask, 2, Codec::Json, Some(grown), None).unwrap();
            s.restore(&positions[subtask as usize]).unwrap();
            read.extend(drain(&mut *s));
        }
        let mut got: Vec<u64> = read
            .iter()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["n"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        got.sort_unstable();
        assert_eq!(got, (0..300).collect::<Vec<_>>());
    }

    /// Every subtask cuts its split from the size given, not from the
    /// file's size when it opens: splits opened while the file grows still
    /// cover each line once.
    #[test]
    fn splits_are_cut_from_the_size_at_the_jobs_start() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        for i in 0..90 {
            writeln!(f, "line {i}").unwrap();
        }
        f.flush().unwrap();
        let path = f.path().to_str().unwrap().to_owned();
        let size = std::fs::metadata(&path).unwrap().len();
        let config = SourceConfig::TextFile { path };
        let mut read = Vec::new();
        for subtask in 0..3 {
            // The file grows between the subtasks' opens.
            writeln!(f, "late {subtask}").unwrap();
            f.flush().unwrap();
            let mut s = open_sized(&config, subtask, 3, Codec::Json, Some(size), None).unwrap();
            read.extend(drain(&mut *s));
        }
        read.sort();
        let mut want: Vec<String> = (0..90).map(|i| format!("\"line {i}\"")).collect();
        want.sort();
        assert_eq!(read, want);
    }
}

#[cfg(test)]
mod typed_tests {
    use std::io::Write;

    use super::*;

    use super::snapshot_tests::values;

    fn read_all(config: &SourceConfig, n: u32) -> Vec<Vec<u8>> {
        (0..n)
            .flat_map(|i| values(&mut *open(config, i, n, Codec::Json).unwrap(), usize::MAX))
            .collect()
    }

    /// Rows from every source: the generator's in its pattern's type,
    /// a text file's lines as strings, a JSON-lines file read into its
    /// schema; the host's JSON of each row is the record's JSON.
    #[test]
    fn sources_write_rows_of_their_type() {
        let as_json = |ty: &Type, rows: Vec<Vec<u8>>| -> Vec<String> {
            let node = Node::of(ty);
            rows.iter()
                .map(|r| {
                    let mut out = Vec::new();
                    json::write_value(&node, r, &mut out).unwrap();
                    String::from_utf8(out).unwrap()
                })
                .collect()
        };
        for pattern in [
            GeneratorPattern::Sequence,
            GeneratorPattern::Words,
            GeneratorPattern::Bids,
            GeneratorPattern::Numbers,
        ] {
            let config = SourceConfig::Generator {
                count: Some(20),
                pattern,
                rate: None,
                start_at_ms: None,
            };
            let ty = pattern.record_type();
            let mut rows = Vec::new();
            for subtask in 0..2 {
                let mut s = open_sized(&config, subtask, 2, Codec::Row, None, Some(&ty)).unwrap();
                rows.extend(values(&mut *s, 100));
            }
            let json = read_all(&config, 2);
            let normal = |t: &[u8]| serde_json::from_slice::<serde_json::Value>(t).unwrap();
            let got: Vec<_> = as_json(&ty, rows)
                .iter()
                .map(|t| normal(t.as_bytes()))
                .collect();
            let want: Vec<_> = json.iter().map(|t| normal(t)).collect();
            assert_eq!(got, want, "{pattern:?}");
        }
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, "héllo\nworld").unwrap();
        f.flush().unwrap();
        let path = f.path().to_str().unwrap().to_owned();
        let text = SourceConfig::TextFile { path: path.clone() };
        let mut s = open_sized(&text, 0, 1, Codec::Row, None, Some(&Type::String)).unwrap();
        assert_eq!(
            values(&mut *s, 10),
            [b"h\xc3\xa9llo".to_vec(), b"world".to_vec()]
        );

        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, r#"{{"id": 1, "name": "a", "extra": true}}"#).unwrap();
        writeln!(f).unwrap();
        writeln!(f, r#"{{"name": null, "id": 2}}"#).unwrap();
        f.flush().unwrap();
        let lines = SourceConfig::JsonLinesFile {
            path: f.path().to_str().unwrap().to_owned(),
            follow: false,
        };
        let ty: Type = "{id: u64, name: string?}".parse().unwrap();
        let mut s = open_sized(&lines, 0, 1, Codec::Row, None, Some(&ty)).unwrap();
        assert_eq!(
            as_json(&ty, values(&mut *s, 10)),
            [r#"{"id":1,"name":"a"}"#, r#"{"id":2,"name":null}"#]
        );
        // Not rows (an untyped reader): the schema still reads every line.
        let mut s = open_sized(&lines, 0, 1, Codec::Json, None, Some(&ty)).unwrap();
        let got: Vec<String> = values(&mut *s, 10)
            .into_iter()
            .map(|v| String::from_utf8(v).unwrap())
            .collect();
        assert_eq!(got, [r#"{"id":1,"name":"a"}"#, r#"{"id":2,"name":null}"#]);
        // A line that does not fit names the file, the line and the field.
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, r#"{{"id": 1}}"#).unwrap();
        writeln!(f, r#"{{"id": "x"}}"#).unwrap();
        f.flush().unwrap();
        let bad = SourceConfig::JsonLinesFile {
            path: f.path().to_str().unwrap().to_owned(),
            follow: false,
        };
        let mut s = open_sized(&bad, 0, 1, Codec::Row, None, Some(&ty)).unwrap();
        let e = s.next_batch(10).unwrap_err().to_string();
        assert!(
            e.contains("the line at byte 10") && e.contains("field `id`"),
            "{e}"
        );
    }
}
