//! What a job's subtasks did so far, as the process running them counts it
//! and as the coordinator keeps it.
//!
//! One shape crosses the process boundary: [`SubtaskMetrics`] (from the
//! protos). A running subtask counts into its [`Counters`] (atomics, read
//! while it runs); a worker reports [`JobCounters::figures`] with its
//! heartbeats, and the coordinator stores them into its own copy of the
//! job's [`JobCounters`].

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::JobGraph;
pub use crate::proto::SubtaskMetrics;

/// What one subtask of one vertex did so far, readable while it runs (the
/// subtask publishes its times, watermark and operator figures a few times
/// a second; its counts as they change).
#[derive(Debug)]
pub struct Counters {
    /// Records received.
    pub records_in: AtomicU64,
    /// Records emitted (main and side outputs).
    pub records_out: AtomicU64,
    /// Bytes of the records received (keys and values).
    pub bytes_in: AtomicU64,
    /// Bytes of the records emitted.
    pub bytes_out: AtomicU64,
    /// Time the subtask has run, ns.
    pub running_ns: AtomicU64,
    /// Time it waited for input, ns.
    pub idle_ns: AtomicU64,
    /// Time it waited for room downstream, ns.
    pub backpressured_ns: AtomicU64,
    /// Its input watermark; `i64::MIN` before the first.
    pub watermark: AtomicI64,
    /// Keyed state entries of its operator.
    pub state_entries: AtomicU64,
    /// Bytes of its operator's keyed state.
    pub state_bytes: AtomicU64,
    /// Timers of its operator.
    pub timers: AtomicU64,
    /// Linear memory of its operator's Wasm instance, bytes.
    pub memory_bytes: AtomicU64,
    /// Time spent in its operator's guest calls, ns.
    pub guest_call_ns: AtomicU64,
    /// Records it sent to its dead-letter output.
    pub dead_letters: AtomicU64,
    /// Records it skipped (`on-error = "skip"`).
    pub records_skipped: AtomicU64,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            records_in: AtomicU64::new(0),
            records_out: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            running_ns: AtomicU64::new(0),
            idle_ns: AtomicU64::new(0),
            backpressured_ns: AtomicU64::new(0),
            watermark: AtomicI64::new(i64::MIN),
            state_entries: AtomicU64::new(0),
            state_bytes: AtomicU64::new(0),
            timers: AtomicU64::new(0),
            memory_bytes: AtomicU64::new(0),
            guest_call_ns: AtomicU64::new(0),
            dead_letters: AtomicU64::new(0),
            records_skipped: AtomicU64::new(0),
        }
    }
}

impl Counters {
    /// Records in and out so far.
    pub fn get(&self) -> (u64, u64) {
        (
            self.records_in.load(Ordering::Relaxed),
            self.records_out.load(Ordering::Relaxed),
        )
    }

    /// Everything, copied (`vertex` and `subtask` left at 0: see
    /// [`JobCounters::figures`]).
    pub fn snapshot(&self) -> SubtaskMetrics {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let wm = self.watermark.load(Ordering::Relaxed);
        SubtaskMetrics {
            vertex: 0,
            subtask: 0,
            records_in: r(&self.records_in),
            records_out: r(&self.records_out),
            bytes_in: r(&self.bytes_in),
            bytes_out: r(&self.bytes_out),
            running_ns: r(&self.running_ns),
            idle_ns: r(&self.idle_ns),
            backpressured_ns: r(&self.backpressured_ns),
            watermark: (wm != i64::MIN).then_some(wm),
            state_entries: r(&self.state_entries),
            state_bytes: r(&self.state_bytes),
            timers: r(&self.timers),
            memory_bytes: r(&self.memory_bytes),
            guest_call_ns: r(&self.guest_call_ns),
            dead_letters: r(&self.dead_letters),
            records_skipped: r(&self.records_skipped),
        }
    }

    /// Set everything (from a report of the process that runs the subtask).
    pub fn store(&self, s: &SubtaskMetrics) {
        let w = |a: &AtomicU64, v: u64| a.store(v, Ordering::Relaxed);
        w(&self.records_in, s.records_in);
        w(&self.records_out, s.records_out);
        w(&self.bytes_in, s.bytes_in);
        w(&self.bytes_out, s.bytes_out);
        w(&self.running_ns, s.running_ns);
        w(&self.idle_ns, s.idle_ns);
        w(&self.backpressured_ns, s.backpressured_ns);
        self.watermark
            .store(s.watermark.unwrap_or(i64::MIN), Ordering::Relaxed);
        w(&self.state_entries, s.state_entries);
        w(&self.state_bytes, s.state_bytes);
        w(&self.timers, s.timers);
        w(&self.memory_bytes, s.memory_bytes);
        w(&self.guest_call_ns, s.guest_call_ns);
        w(&self.dead_letters, s.dead_letters);
        w(&self.records_skipped, s.records_skipped);
    }
}

/// Records in and out per vertex and subtask, readable while the job runs.
#[derive(Debug, Default)]
pub struct JobCounters {
    /// Per vertex (by id), per subtask.
    pub vertices: Vec<(String, Vec<Arc<Counters>>)>,
}

impl JobCounters {
    /// Counters for every subtask of `graph`.
    pub fn new(graph: &JobGraph) -> Self {
        JobCounters {
            vertices: graph
                .vertices
                .iter()
                .map(|v| {
                    (
                        v.name.clone(),
                        (0..v.parallelism).map(|_| Arc::default()).collect(),
                    )
                })
                .collect(),
        }
    }

    /// Per vertex: name, parallelism, records in and out so far.
    pub fn report(&self) -> Vec<VertexReport> {
        self.vertices
            .iter()
            .map(|(name, subtasks)| VertexReport {
                name: name.clone(),
                parallelism: subtasks.len() as u32,
                records_in: subtasks
                    .iter()
                    .map(|c| c.records_in.load(Ordering::Relaxed))
                    .sum(),
                records_out: subtasks
                    .iter()
                    .map(|c| c.records_out.load(Ordering::Relaxed))
                    .sum(),
            })
            .collect()
    }

    /// The figures of every subtask that has run or counted anything, with
    /// its vertex and index (what a worker reports).
    pub fn figures(&self) -> Vec<SubtaskMetrics> {
        let mut out = Vec::new();
        for (v, (_, subtasks)) in self.vertices.iter().enumerate() {
            for (s, counters) in subtasks.iter().enumerate() {
                let mut m = counters.snapshot();
                if m.running_ns > 0 || m.records_in > 0 || m.records_out > 0 {
                    m.vertex = v as u32;
                    m.subtask = s as u32;
                    out.push(m);
                }
            }
        }
        out
    }

    /// Take in what the process that runs some subtasks reported: each
    /// subtask runs in one place, whose latest report is its figure.
    pub fn store(&self, figures: &[SubtaskMetrics]) {
        for f in figures {
            if let Some(c) = self
                .vertices
                .get(f.vertex as usize)
                .and_then(|(_, subtasks)| subtasks.get(f.subtask as usize))
            {
                c.store(f);
            }
        }
    }
}

/// Records through one vertex, summed over its subtasks.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct VertexReport {
    /// The vertex's name.
    pub name: String,
    /// Its parallelism.
    pub parallelism: u32,
    /// Records received.
    pub records_in: u64,
    /// Records emitted.
    pub records_out: u64,
}
