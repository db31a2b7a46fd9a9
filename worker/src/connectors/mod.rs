//! Connectors: where a job's records come from and go to, the worker's
//! half (the model's half, [`weir_model::connectors`], reads the manifest
//! and tells the rest of the job about them).
//!
//! A connector is one file here: it opens its sources' subtasks
//! ([`Source`]) and its sinks' ([`Sink`]). [`open_source`],
//! [`open_vertex_sink`] and [`open_subtask_sink`] are the registry: one arm
//! per connector.
//!
//! - [`files`]: the text-file and JSON-lines sources, byte ranges of a file.
//! - [`generator`]: made-up records for examples, tests and benchmarks.
//! - [`socket`]: lines from a TCP server.
//! - `kafka`: Kafka topics in and out (the `kafka` feature, on by default).
//! - [`shared`]: standard output, `discard` and a plain JSON-lines file,
//!   written straight through by every subtask of a sink vertex.
//! - [`part_files`]: a directory of part files committed with the
//!   checkpoints (exactly-once).
//! - [`lines`]: lines of text decoded into records, for the sources that
//!   read lines.
//!
//! A source encodes its records in its stream's codec
//! ([`weir_model::codec::StreamCodecs`]): the generator and the text
//! sources make MessagePack for components that read it and rows for typed
//! streams, JSON otherwise; a JSON-lines source passes its lines through as
//! they are unless it has a schema.

pub mod files;
pub mod generator;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod lines;
pub mod part_files;
pub mod shared;
pub mod socket;

#[cfg(test)]
mod tests;

use weir_model::codec::Codec;
use weir_model::connectors::{SinkConfig, SourceConfig};
use weir_model::format::Format;
use weir_model::types::Type;
use weir_model::{Record, Records};

use crate::checkpoint::SplitPosition;
use crate::dead_letter::{Rejects, Undecodable};
pub use shared::SharedSink;
use weir_model::dead_letter::ErrorPolicy;

/// A source subtask: hands out batches until its input ends.
///
/// Its progress is kept per split (Flink's `CheckpointedFunction` shape): a
/// checkpoint records [`Source::snapshot`] between two batches, and a
/// restarted subtask resumes from it with [`Source::restore`], so every
/// record is read again exactly from the first one after the checkpoint.
pub trait Source: Send {
    /// The next batch, `None` at the end of a bounded input.
    fn next_batch(&mut self, max: usize) -> anyhow::Result<Option<Vec<Record>>>;

    /// [`Source::next_batch`] as the source makes it: records of their own,
    /// or packed in one buffer (what the task reads).
    fn next_records(&mut self, max: usize) -> anyhow::Result<Option<Records>> {
        Ok(self.next_batch(max)?.map(Records::List))
    }

    /// Where each of its splits stands now.
    fn snapshot(&self) -> Vec<SplitPosition>;

    /// Resume from positions a snapshot took. Positions of splits this
    /// subtask does not read are ignored; a split it reads that has no
    /// position starts at its beginning.
    fn restore(&mut self, positions: &[SplitPosition]) -> anyhow::Result<()>;

    /// For a source whose splits interleave (Kafka's partitions), where
    /// event time stands across them when its records' own timestamps are
    /// the event time: the watermark then follows the slowest split that
    /// is not idle (no record for `idle_after`), not the fastest. The
    /// default, [`SplitTime::Untracked`], leaves it to the largest
    /// timestamp the source made.
    fn split_time(&self, idle_after: Option<std::time::Duration>) -> SplitTime {
        let _ = idle_after;
        SplitTime::Untracked
    }

    /// Checkpoint `id` completed, with `positions` (what
    /// [`Source::snapshot`] gave for it): a source may tell the system it
    /// reads where the job stands (Kafka commits the offsets to the
    /// consumer group, for monitoring). A restore reads the checkpoint's
    /// positions, never these.
    fn checkpoint_completed(&mut self, id: u64, positions: &[SplitPosition]) {
        let _ = (id, positions);
    }

    /// The records it could not decode since the last call, when it rejects
    /// them (`on-error` is `skip` or `dead-letter`) rather than failing:
    /// the task takes them after every batch, before the next barrier, so
    /// that a checkpoint's positions cover them.
    fn take_rejected(&mut self) -> Vec<Undecodable> {
        Vec::new()
    }
}

/// Where event time stands across a source's splits
/// ([`Source::split_time`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitTime {
    /// The source does not track its splits' times.
    Untracked,
    /// A split that is not idle has no timestamp yet: no watermark.
    Hold,
    /// The smallest of the largest timestamps of the splits that are not
    /// idle.
    Bound(i64),
    /// No split is being read (none is assigned, or all are idle).
    Idle,
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
    open_source(config, SourceContext::new(subtask, parallelism, codec))
}

/// Which subtask of a source to open, and how it writes its records.
#[derive(Debug, Clone, Copy)]
pub struct SourceContext<'a> {
    /// The subtask.
    pub subtask: u32,
    /// Of how many.
    pub parallelism: u32,
    /// The codec its records are written in.
    pub codec: Codec,
    /// The input's size when the job first started, when the connector
    /// cuts its splits from it ([`weir_model::JobGraph::file_sizes`]), so
    /// that every subtask, on every worker and in every attempt, cuts the
    /// same splits however the file grew since; `None`: its size now.
    pub size: Option<u64>,
    /// The type of its records when it has one (a JSON-lines source's
    /// schema: its lines are read into it, whatever `codec`; rows are
    /// written in it).
    pub ty: Option<&'a Type>,
    /// What a line or message it cannot decode does (`on-error`).
    pub errors: ErrorPolicy,
}

impl SourceContext<'_> {
    /// Subtask `subtask` of `parallelism`, untyped, writing `codec`, failing
    /// on a record it cannot decode.
    pub fn new(subtask: u32, parallelism: u32, codec: Codec) -> SourceContext<'static> {
        SourceContext {
            subtask,
            parallelism,
            codec,
            size: None,
            ty: None,
            errors: ErrorPolicy::default(),
        }
    }
}

/// Open a source's subtask as `cx` says.
pub fn open_source(
    config: &SourceConfig,
    cx: SourceContext<'_>,
) -> anyhow::Result<Box<dyn Source>> {
    let SourceContext {
        subtask,
        parallelism,
        codec,
        size,
        ty,
        errors,
    } = cx;
    if codec == Codec::Row && ty.is_none() {
        anyhow::bail!("a source writing rows needs its records' type");
    }
    let split = (subtask, parallelism.max(1));
    let rejects = Rejects::new(&errors);
    Ok(match config {
        SourceConfig::TextFile(c) => files::open_text(c, split, codec, size)?,
        SourceConfig::JsonLinesFile(c) => {
            files::open_json_lines(c, split, codec, size, ty, rejects)?
        }
        SourceConfig::Generator(c) => generator::open(c, split, codec),
        SourceConfig::Socket(c) => socket::open(c, split, codec, ty, rejects),
        #[cfg(feature = "kafka")]
        SourceConfig::Kafka(c) => kafka::open_source(c, split, codec, ty, rejects)?,
        #[cfg(not(feature = "kafka"))]
        SourceConfig::Kafka(_) => return Err(without_kafka()),
    })
}

/// Open a source's subtask as `cx` says, resuming from `positions` (every
/// position its vertex had in the checkpoint restored, all subtasks'). A file's or a
/// generator's splits are units of their own, `split j of n`: when the
/// checkpoint was taken at another parallelism (a savepoint restored with a
/// new one), the subtask reads the old splits `j` with `j % parallelism ==
/// subtask`, each from its position. Kafka's subtasks pick their
/// partitions' positions themselves.
pub fn open_restored(
    config: &SourceConfig,
    cx: SourceContext<'_>,
    positions: &[SplitPosition],
) -> anyhow::Result<Box<dyn Source>> {
    let splits: Option<Vec<(u32, u32)>> = positions
        .iter()
        .map(|p| split_of(config, &p.split))
        .collect();
    let rescaled = match &splits {
        Some(s) => !s.is_empty() && s.iter().any(|&(_, n)| n != cx.parallelism.max(1)),
        None => false,
    };
    if !rescaled {
        let mut source = open_source(config, cx)?;
        source.restore(positions)?;
        return Ok(source);
    }
    let mut mine: Vec<(u32, u32)> = splits
        .unwrap_or_default()
        .into_iter()
        .filter(|&(j, _)| j % cx.parallelism.max(1) == cx.subtask)
        .collect();
    mine.sort_unstable();
    mine.dedup();
    let mut parts = Vec::new();
    for (j, n) in mine {
        let mut part = open_source(
            config,
            SourceContext {
                subtask: j,
                parallelism: n,
                ..cx
            },
        )?;
        part.restore(positions)?;
        parts.push(part);
    }
    Ok(Box::new(Splits {
        parts,
        ended: Vec::new(),
        next: 0,
    }))
}

/// The positions a source subtask restores from: every position of its
/// vertex (`all`), so that each connector picks its splits — unless they
/// are file positions of an earlier version (`bytes S-E`, which name no
/// numbered split): then its own (`own`), as that version restored them.
pub fn restore_positions(
    config: &SourceConfig,
    all: Vec<SplitPosition>,
    own: Vec<SplitPosition>,
) -> Vec<SplitPosition> {
    let files = matches!(
        config,
        SourceConfig::TextFile(_) | SourceConfig::JsonLinesFile(_)
    );
    if files && !all.is_empty() && all.iter().all(|p| split_of(config, &p.split).is_none()) {
        own
    } else {
        all
    }
}

/// The split a position names, as `(j, n)`, for connectors whose splits
/// are numbered (files: `split j of n`; the generator: `j mod n`).
fn split_of(config: &SourceConfig, split: &str) -> Option<(u32, u32)> {
    let (j, n) = match config {
        SourceConfig::TextFile(_) | SourceConfig::JsonLinesFile(_) => {
            split.strip_prefix("split ")?.split_once(" of ")?
        }
        SourceConfig::Generator(_) => split.split_once(" mod ")?,
        _ => return None,
    };
    let (j, n) = (j.parse().ok()?, n.parse().ok()?);
    (j < n).then_some((j, n))
}

/// The old splits a subtask reads after a restore at another parallelism,
/// in split order, each until it ends — or has nothing for now: then the
/// next. (One after the other, not batch by batch: a split's records come
/// in its own event-time order, and interleaving two would make the later
/// one's timestamps hold the watermark over the earlier one's records.)
struct Splits {
    parts: Vec<Box<dyn Source>>,
    /// Splits read to their end.
    ended: Vec<Box<dyn Source>>,
    next: usize,
}

impl Source for Splits {
    fn next_batch(&mut self, max: usize) -> anyhow::Result<Option<Vec<Record>>> {
        Ok(self.next_records(max)?.map(Records::into_list))
    }

    fn next_records(&mut self, max: usize) -> anyhow::Result<Option<Records>> {
        while !self.parts.is_empty() {
            let i = self.next % self.parts.len();
            match self.parts[i].next_records(max)? {
                Some(batch) if batch.is_empty() => {
                    // Nothing for now (a followed file at its end): the next
                    // split's turn.
                    self.next = i + 1;
                    return Ok(Some(batch));
                }
                Some(batch) => return Ok(Some(batch)),
                None => {
                    // Its positions stay in the snapshots: keep it, ended.
                    let ended = self.parts.remove(i);
                    self.ended.push(ended);
                }
            }
        }
        Ok(None)
    }

    fn snapshot(&self) -> Vec<SplitPosition> {
        self.parts
            .iter()
            .chain(&self.ended)
            .flat_map(|p| p.snapshot())
            .collect()
    }

    fn restore(&mut self, positions: &[SplitPosition]) -> anyhow::Result<()> {
        for p in &mut self.parts {
            p.restore(positions)?;
        }
        Ok(())
    }

    fn take_rejected(&mut self) -> Vec<Undecodable> {
        self.parts
            .iter_mut()
            .chain(&mut self.ended)
            .flat_map(|p| p.take_rejected())
            .collect()
    }
}

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
    /// Write a batch of records, as they reached the sink (records of their
    /// own, or packed in one buffer).
    fn write(&mut self, batch: &Records) -> anyhow::Result<()>;
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

/// Append records' `values` to `out` as JSON lines: records of a JSON
/// stream as they are, rows and MessagePack written as JSON.
pub fn json_lines<'a>(
    format: &Format,
    values: impl IntoIterator<Item = &'a [u8]>,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    for value in values {
        match format.codec {
            Codec::Json => out.extend_from_slice(value),
            _ => format
                .write_json(value, out)
                .map_err(|e| format!("a record cannot be written as JSON: {e}"))?,
        }
        out.push(b'\n');
    }
    Ok(())
}

/// How often a sink writes out its buffer while a job runs: a partly
/// filled buffer waits at most this long, however slow the stream.
pub const FLUSH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(5);

/// What a subtask's own sink needs ([`open_subtask_sink`]).
pub struct SinkContext<'a> {
    /// The job's id.
    pub job_id: &'a str,
    /// The subtask.
    pub subtask: u32,
    /// The job's attempt (a newer one fences an older one's writes).
    pub attempt: u32,
    /// The checkpoint the attempt starts from, if any.
    pub restored: Option<u64>,
    /// The job whose savepoint the job started from, when its checkpoint
    /// is that savepoint: its output passes to this job.
    pub predecessor: Option<&'a str>,
    /// How its input's records are encoded.
    pub format: Format,
}

/// The writer every subtask of a sink vertex shares, for a sink written
/// straight through; `None` when each subtask opens its own
/// ([`open_subtask_sink`]): a sink that commits with the checkpoints of
/// a job that takes them. `append`: the job is split over processes, each
/// writing its share of a file.
pub fn open_vertex_sink(
    config: &SinkConfig,
    checkpoints: bool,
    append: bool,
) -> anyhow::Result<Option<SharedSink>> {
    if config.connector().per_subtask() || checkpoints && config.commits_parts() {
        return Ok(None);
    }
    Ok(Some(match config {
        SinkConfig::Stdout(_) => SharedSink::stdout(),
        SinkConfig::Discard(_) => SharedSink::discard(),
        SinkConfig::JsonLinesFile(c) => SharedSink::file(&c.path, append)?,
        SinkConfig::Kafka(_) => unreachable!("a Kafka sink has a producer per subtask"),
    }))
}

/// The error of a Kafka connector in a build without them.
#[cfg(not(feature = "kafka"))]
fn without_kafka() -> anyhow::Error {
    anyhow::anyhow!(
        "this weir was built without the Kafka connector (`--no-default-features`, as the demo's): build it with `cargo build --release`"
    )
}

/// A sink subtask's own sink, for a sink [`open_vertex_sink`] gave no
/// shared writer.
pub fn open_subtask_sink(config: &SinkConfig, cx: SinkContext) -> anyhow::Result<Box<dyn Sink>> {
    match config {
        SinkConfig::JsonLinesFile(c) => Ok(Box::new(
            part_files::PartFileSink::open(
                std::path::Path::new(&c.path),
                cx.job_id,
                cx.subtask,
                cx.attempt,
                cx.restored,
                cx.predecessor,
            )?
            .with_format(cx.format),
        )),
        #[cfg(feature = "kafka")]
        SinkConfig::Kafka(c) => kafka::open_sink(c, cx.format),
        #[cfg(not(feature = "kafka"))]
        SinkConfig::Kafka(_) => Err(without_kafka()),
        SinkConfig::Stdout(_) | SinkConfig::Discard(_) => {
            anyhow::bail!(
                "a {} sink is shared by its subtasks",
                config.connector().type_name()
            )
        }
    }
}
