//! Job metrics: what every subtask did (counts, bytes, where its time went,
//! its input watermark, its operator's state and Wasm instance), rates over
//! the last second, and a history of the last minutes for the dashboard's
//! charts. Served as JSON (`GET /v1/jobs/{id}/metrics`) and as Prometheus
//! text (`GET /metrics`).

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use weir_model::metrics::JobCounters;
/// A subtask's raw figures, as workers report them.
use weir_model::metrics::SubtaskMetrics as Snapshot;

/// Samples kept per job: one per second, five minutes.
pub const HISTORY: usize = 300;

/// Jobs whose metrics are kept: running ones are sampled every second, and
/// the least recently sampled (ended) ones make room for new ones.
pub const JOBS_KEPT: usize = 256;

/// One subtask's figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SubtaskMetrics {
    /// Its index.
    pub subtask: u32,
    /// Records received.
    pub records_in: u64,
    /// Records emitted (main and side outputs).
    pub records_out: u64,
    /// Bytes received (keys and values).
    pub bytes_in: u64,
    /// Bytes emitted.
    pub bytes_out: u64,
    /// Records received per second, over the last sample.
    pub records_in_per_s: f64,
    /// Records emitted per second, over the last sample.
    pub records_out_per_s: f64,
    /// Milliseconds per second spent working.
    pub busy_ms_per_s: f64,
    /// Milliseconds per second spent waiting for input.
    pub idle_ms_per_s: f64,
    /// Milliseconds per second spent waiting for room downstream.
    pub backpressured_ms_per_s: f64,
    /// Its input watermark (ms), once it has one.
    pub watermark: Option<i64>,
    /// Keyed state entries of its operator.
    pub state_entries: u64,
    /// Bytes of its operator's keyed state.
    pub state_bytes: u64,
    /// Timers of its operator.
    pub timers: u64,
    /// Linear memory of its Wasm instance, bytes.
    pub memory_bytes: u64,
    /// Time spent in guest calls so far, ms.
    pub guest_call_ms: f64,
    /// Records sent to its dead-letter output.
    #[serde(default)]
    pub dead_letters: u64,
    /// Records skipped (`on-error = "skip"`).
    #[serde(default)]
    pub records_skipped: u64,
}

/// One vertex's figures: its subtasks', summed where that makes sense.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct VertexMetrics {
    /// Its name.
    pub name: String,
    /// Its parallelism.
    pub parallelism: u32,
    /// Records received, all subtasks.
    pub records_in: u64,
    /// Records emitted, all subtasks.
    pub records_out: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// Bytes emitted.
    pub bytes_out: u64,
    /// Records received per second.
    pub records_in_per_s: f64,
    /// Records emitted per second.
    pub records_out_per_s: f64,
    /// The worst subtask's backpressure: the share of its time it waited for
    /// room downstream, 0 to 1.
    pub backpressure: f64,
    /// The smallest input watermark of its subtasks, once all have one.
    pub watermark: Option<i64>,
    /// Keyed state bytes, all subtasks.
    pub state_bytes: u64,
    /// Records sent to its dead-letter output, all subtasks.
    #[serde(default)]
    pub dead_letters: u64,
    /// Records skipped, all subtasks.
    #[serde(default)]
    pub records_skipped: u64,
    /// Its subtasks.
    pub subtasks: Vec<SubtaskMetrics>,
}

/// A point of a vertex's history.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct VertexPoint {
    /// Records received per second.
    pub records_in_per_s: f64,
    /// Records emitted per second.
    pub records_out_per_s: f64,
    /// The worst subtask's backpressure, 0 to 1.
    pub backpressure: f64,
    /// The vertex's watermark.
    pub watermark: Option<i64>,
}

/// One second of a job's history.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Sample {
    /// When, ms since the epoch.
    pub at_ms: i64,
    /// Per vertex, in vertex order.
    pub vertices: Vec<VertexPoint>,
}

/// A job's metrics, as `GET /v1/jobs/{id}/metrics` serves them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct JobMetrics {
    /// The job's id.
    pub job: String,
    /// When these figures were taken, ms since the epoch.
    pub at_ms: i64,
    /// Per vertex, in vertex order.
    pub vertices: Vec<VertexMetrics>,
    /// The last minutes, a sample a second, oldest first.
    pub history: Vec<Sample>,
}

/// Raw figures of every subtask of a job, by vertex.
type Raw = Vec<(String, Vec<Snapshot>)>;

fn raw(counters: &JobCounters) -> Raw {
    counters
        .vertices
        .iter()
        .map(|(name, subtasks)| {
            (
                name.clone(),
                subtasks.iter().map(|c| c.snapshot()).collect(),
            )
        })
        .collect()
}

#[derive(Default)]
struct History {
    last: Option<(Instant, Raw)>,
    /// Rates per vertex and subtask over the last sample.
    rates: Vec<Vec<Rates>>,
    samples: VecDeque<Sample>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Rates {
    records_in: f64,
    records_out: f64,
    busy: f64,
    idle: f64,
    backpressured: f64,
}

fn rates(before: &Snapshot, now: &Snapshot, seconds: f64) -> Rates {
    let ran = now.running_ns.saturating_sub(before.running_ns) as f64;
    // The subtask's own clock, when it ran in between: figures reach the
    // coordinator with heartbeats, whose arrival jitters.
    let seconds = if ran > 0.0 { ran / 1e9 } else { seconds };
    let per_s = |a: u64, b: u64| b.saturating_sub(a) as f64 / seconds;
    let share = |a: u64, b: u64| {
        if ran <= 0.0 {
            0.0
        } else {
            (b.saturating_sub(a) as f64 / ran * 1000.0).min(1000.0)
        }
    };
    let idle = share(before.idle_ns, now.idle_ns);
    let backpressured = share(before.backpressured_ns, now.backpressured_ns);
    Rates {
        records_in: per_s(before.records_in, now.records_in),
        records_out: per_s(before.records_out, now.records_out),
        busy: if ran <= 0.0 {
            0.0
        } else {
            (1000.0 - idle - backpressured).max(0.0)
        },
        idle,
        backpressured,
    }
}

/// The metrics of every job the coordinator watches.
#[derive(Default)]
pub struct Metrics {
    jobs: std::sync::Mutex<HashMap<String, History>>,
}

impl Metrics {
    /// Take a sample of job `id` now (once a second while it runs, and at
    /// its end).
    pub fn sample(&self, id: &str, counters: &JobCounters) {
        let now = Instant::now();
        let current = raw(counters);
        let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        if !jobs.contains_key(id) && jobs.len() >= JOBS_KEPT {
            let oldest = jobs
                .iter()
                .min_by_key(|(_, h)| h.last.as_ref().map(|(at, _)| *at))
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                jobs.remove(&oldest);
            }
        }
        let h = jobs.entry(id.to_owned()).or_default();
        if let Some((_, before)) = &h.last {
            let fresh = before
                .iter()
                .zip(&current)
                .flat_map(|((_, b), (_, c))| b.iter().zip(c))
                .any(|(b, c)| b.running_ns != c.running_ns);
            if !fresh {
                // No new report since the last sample: wait for one.
                return;
            }
        }
        if let Some((then, before)) = &h.last {
            let seconds = now.duration_since(*then).as_secs_f64().max(1e-3);
            h.rates = before
                .iter()
                .zip(&current)
                .map(|((_, b), (_, c))| {
                    b.iter().zip(c).map(|(b, c)| rates(b, c, seconds)).collect()
                })
                .collect();
            let vertices = current
                .iter()
                .zip(&h.rates)
                .map(|((_, subtasks), rates)| VertexPoint {
                    records_in_per_s: rates.iter().map(|r| r.records_in).sum(),
                    records_out_per_s: rates.iter().map(|r| r.records_out).sum(),
                    backpressure: rates
                        .iter()
                        .map(|r| r.backpressured / 1000.0)
                        .fold(0.0, f64::max),
                    watermark: watermark(subtasks),
                })
                .collect();
            h.samples.push_back(Sample {
                at_ms: weir_model::now_ms(),
                vertices,
            });
            while h.samples.len() > HISTORY {
                h.samples.pop_front();
            }
        }
        h.last = Some((now, current));
    }

    /// The metrics of job `id`: live figures from `counters` while it runs,
    /// else the last sample's.
    pub fn job(&self, id: &str, counters: Option<&JobCounters>) -> JobMetrics {
        let jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        let h = jobs.get(id);
        let current = match (counters, h.and_then(|h| h.last.as_ref())) {
            (Some(c), _) => raw(c),
            (None, Some((_, last))) => last.clone(),
            (None, None) => Vec::new(),
        };
        let vertices = current
            .iter()
            .enumerate()
            .map(|(v, (name, subtasks))| {
                let rates = h.and_then(|h| h.rates.get(v));
                let subtasks: Vec<SubtaskMetrics> = subtasks
                    .iter()
                    .enumerate()
                    .map(|(s, m)| {
                        let r = rates.and_then(|r| r.get(s)).copied().unwrap_or_default();
                        SubtaskMetrics {
                            subtask: s as u32,
                            records_in: m.records_in,
                            records_out: m.records_out,
                            bytes_in: m.bytes_in,
                            bytes_out: m.bytes_out,
                            records_in_per_s: r.records_in,
                            records_out_per_s: r.records_out,
                            busy_ms_per_s: r.busy,
                            idle_ms_per_s: r.idle,
                            backpressured_ms_per_s: r.backpressured,
                            watermark: m.watermark,
                            state_entries: m.state_entries,
                            state_bytes: m.state_bytes,
                            timers: m.timers,
                            memory_bytes: m.memory_bytes,
                            guest_call_ms: m.guest_call_ns as f64 / 1e6,
                            dead_letters: m.dead_letters,
                            records_skipped: m.records_skipped,
                        }
                    })
                    .collect();
                VertexMetrics {
                    name: name.clone(),
                    parallelism: subtasks.len() as u32,
                    records_in: subtasks.iter().map(|s| s.records_in).sum(),
                    records_out: subtasks.iter().map(|s| s.records_out).sum(),
                    bytes_in: subtasks.iter().map(|s| s.bytes_in).sum(),
                    bytes_out: subtasks.iter().map(|s| s.bytes_out).sum(),
                    records_in_per_s: subtasks.iter().map(|s| s.records_in_per_s).sum(),
                    records_out_per_s: subtasks.iter().map(|s| s.records_out_per_s).sum(),
                    backpressure: subtasks
                        .iter()
                        .map(|s| s.backpressured_ms_per_s / 1000.0)
                        .fold(0.0, f64::max),
                    watermark: watermark(&current[v].1),
                    state_bytes: subtasks.iter().map(|s| s.state_bytes).sum(),
                    dead_letters: subtasks.iter().map(|s| s.dead_letters).sum(),
                    records_skipped: subtasks.iter().map(|s| s.records_skipped).sum(),
                    subtasks,
                }
            })
            .collect();
        JobMetrics {
            job: id.to_owned(),
            at_ms: weir_model::now_ms(),
            vertices,
            history: h
                .map(|h| h.samples.iter().cloned().collect())
                .unwrap_or_default(),
        }
    }
}

/// A vertex's watermark: the smallest of its subtasks', once all have one.
fn watermark(subtasks: &[Snapshot]) -> Option<i64> {
    subtasks
        .iter()
        .map(|s| s.watermark)
        .collect::<Option<Vec<i64>>>()
        .and_then(|w| w.into_iter().min())
}

/// The Prometheus families of a set of jobs' metrics (each with its job's
/// name), one per figure, labelled by job, vertex and subtask.
///
/// ```
/// use weir_coordinator::metrics::{prometheus_text, job_families, JobMetrics, SubtaskMetrics, VertexMetrics};
/// let m = JobMetrics {
///     job: "j1".into(),
///     vertices: vec![VertexMetrics {
///         name: "count".into(),
///         subtasks: vec![SubtaskMetrics { records_in: 7, watermark: Some(5), dead_letters: 2, ..Default::default() }],
///         ..Default::default()
///     }],
///     ..Default::default()
/// };
/// let text = prometheus_text(job_families(&[("wordcount".into(), m)]).unwrap());
/// assert!(text.contains(r#"weir_records_in_total{job="j1",job_name="wordcount",subtask="0",vertex="count"} 7"#), "{text}");
/// assert!(text.contains("# TYPE weir_records_in_total counter"));
/// assert!(text.contains(r#"weir_watermark_ms{job="j1",job_name="wordcount",subtask="0",vertex="count"} 5"#));
/// assert!(text.contains(r#"weir_dead_letters_total{job="j1",job_name="wordcount",subtask="0",vertex="count"} 2"#));
/// ```
pub fn job_families(
    jobs: &[(String, JobMetrics)],
) -> prometheus::Result<Vec<prometheus::proto::MetricFamily>> {
    use prometheus::{GaugeVec, IntCounterVec, Opts, Registry};
    type Figure = (
        &'static str,
        &'static str,
        fn(&SubtaskMetrics) -> Option<f64>,
    );
    const LABELS: [&str; 4] = ["job", "job_name", "vertex", "subtask"];
    const COUNTERS: &[Figure] = &[
        (
            "weir_records_in_total",
            "Records received by a subtask.",
            |s| Some(s.records_in as f64),
        ),
        (
            "weir_records_out_total",
            "Records emitted by a subtask (main and side outputs).",
            |s| Some(s.records_out as f64),
        ),
        (
            "weir_bytes_in_total",
            "Bytes of the records a subtask received.",
            |s| Some(s.bytes_in as f64),
        ),
        (
            "weir_bytes_out_total",
            "Bytes of the records a subtask emitted.",
            |s| Some(s.bytes_out as f64),
        ),
        (
            "weir_dead_letters_total",
            "Records a subtask could not process and sent to its dead-letter output.",
            |s| Some(s.dead_letters as f64),
        ),
        (
            "weir_records_skipped_total",
            "Records a subtask could not process and skipped.",
            |s| Some(s.records_skipped as f64),
        ),
    ];
    const GAUGES: &[Figure] = &[
        (
            "weir_records_in_per_second",
            "Records a subtask received per second, over the last second.",
            |s| Some(s.records_in_per_s),
        ),
        (
            "weir_records_out_per_second",
            "Records a subtask emitted per second, over the last second.",
            |s| Some(s.records_out_per_s),
        ),
        (
            "weir_busy_ms_per_second",
            "Milliseconds per second a subtask worked.",
            |s| Some(s.busy_ms_per_s),
        ),
        (
            "weir_idle_ms_per_second",
            "Milliseconds per second a subtask waited for input.",
            |s| Some(s.idle_ms_per_s),
        ),
        (
            "weir_backpressured_ms_per_second",
            "Milliseconds per second a subtask waited for room downstream.",
            |s| Some(s.backpressured_ms_per_s),
        ),
        (
            "weir_watermark_ms",
            "The input watermark of a subtask, ms since the epoch.",
            |s| {
                s.watermark
                    .filter(|w| *w > i64::MIN && *w < i64::MAX)
                    .map(|w| w as f64)
            },
        ),
        (
            "weir_state_entries",
            "Keyed state entries of a subtask's operator.",
            |s| Some(s.state_entries as f64),
        ),
        (
            "weir_state_bytes",
            "Bytes of keyed state of a subtask's operator.",
            |s| Some(s.state_bytes as f64),
        ),
        ("weir_timers", "Timers of a subtask's operator.", |s| {
            Some(s.timers as f64)
        }),
        (
            "weir_wasm_memory_bytes",
            "Linear memory of a subtask's Wasm instance.",
            |s| Some(s.memory_bytes as f64),
        ),
        (
            "weir_guest_call_seconds",
            "Time a subtask has spent in guest calls.",
            |s| Some(s.guest_call_ms / 1000.0),
        ),
    ];
    let registry = Registry::new();
    let each = |f: &mut dyn FnMut(&[&str], &SubtaskMetrics)| {
        for (job_name, m) in jobs {
            for v in &m.vertices {
                for s in &v.subtasks {
                    let subtask = s.subtask.to_string();
                    f(&[&m.job, job_name, &v.name, &subtask], s);
                }
            }
        }
    };
    for (name, help, value) in COUNTERS {
        let c = IntCounterVec::new(Opts::new(*name, *help), &LABELS)?;
        each(&mut |labels, s| {
            if let Some(v) = value(s) {
                c.with_label_values(labels).inc_by(v as u64);
            }
        });
        registry.register(Box::new(c))?;
    }
    for (name, help, value) in GAUGES {
        let g = GaugeVec::new(Opts::new(*name, *help), &LABELS)?;
        each(&mut |labels, s| {
            if let Some(v) = value(s) {
                g.with_label_values(labels).set(v);
            }
        });
        registry.register(Box::new(g))?;
    }
    Ok(registry.gather())
}

/// Encode metric families as Prometheus text.
pub fn prometheus_text(families: Vec<prometheus::proto::MetricFamily>) -> String {
    use prometheus::Encoder;
    let mut out = Vec::new();
    // Families without a metric (no job yet) are left out: the encoder
    // refuses them.
    let families: Vec<_> = families
        .into_iter()
        .filter(|f| !f.get_metric().is_empty())
        .collect();
    prometheus::TextEncoder::new()
        .encode(&families, &mut out)
        .expect("text encoding of checked families");
    String::from_utf8(out).expect("the text format is UTF-8")
}

/// A gauge family without labels, for figures of the whole process.
/// Per job that takes checkpoints or has restarted (its id, name, its
/// checkpoints and its restarts): `weir_checkpoints_completed_total`,
/// `weir_checkpoints_failed_total`, `weir_checkpoint_last_duration_ms`,
/// `weir_checkpoint_last_size_bytes`, `weir_checkpoint_last_uploaded_bytes`
/// and `weir_job_restarts_total`.
///
/// ```
/// use weir_coordinator::checkpoint::CheckpointStats;
/// use weir_coordinator::metrics::{checkpoint_families, prometheus_text};
/// let mut c = CheckpointStats::default();
/// c.counts.completed = 3;
/// let text = prometheus_text(checkpoint_families(&[("j1".into(), "wc".into(), c, 2)]).unwrap());
/// assert!(text.contains("weir_checkpoints_completed_total{job=\"j1\",job_name=\"wc\"} 3"), "{text}");
/// assert!(text.contains("weir_job_restarts_total{job=\"j1\",job_name=\"wc\"} 2"), "{text}");
/// ```
pub fn checkpoint_families(
    jobs: &[(String, String, crate::checkpoint::CheckpointStats, u32)],
) -> prometheus::Result<Vec<prometheus::proto::MetricFamily>> {
    use prometheus::{GaugeVec, IntCounterVec, Opts, Registry};
    let labels = ["job", "job_name"];
    let registry = Registry::new();
    let counter = |name: &str, help: &str| IntCounterVec::new(Opts::new(name, help), &labels);
    let gauge = |name: &str, help: &str| GaugeVec::new(Opts::new(name, help), &labels);
    let completed = counter("weir_checkpoints_completed_total", "Checkpoints completed.")?;
    let failed = counter("weir_checkpoints_failed_total", "Checkpoints aborted.")?;
    let restarts = counter("weir_job_restarts_total", "Restarts of a job.")?;
    let duration = gauge(
        "weir_checkpoint_last_duration_ms",
        "From the trigger of the latest completed checkpoint to its last acknowledgement.",
    )?;
    let size = gauge(
        "weir_checkpoint_last_size_bytes",
        "State the latest completed checkpoint refers to.",
    )?;
    let uploaded = gauge(
        "weir_checkpoint_last_uploaded_bytes",
        "Bytes uploaded for the latest completed checkpoint.",
    )?;
    for (id, name, c, r) in jobs {
        let l = [id.as_str(), name.as_str()];
        completed.with_label_values(&l).inc_by(c.counts.completed);
        failed.with_label_values(&l).inc_by(c.counts.failed);
        restarts.with_label_values(&l).inc_by(u64::from(*r));
        if let Some(last) = &c.latest_completed {
            duration
                .with_label_values(&l)
                .set(last.duration_ms.unwrap_or(0) as f64);
            size.with_label_values(&l).set(last.state_bytes as f64);
            uploaded
                .with_label_values(&l)
                .set(last.uploaded_bytes as f64);
        }
    }
    registry.register(Box::new(completed))?;
    registry.register(Box::new(failed))?;
    registry.register(Box::new(restarts))?;
    registry.register(Box::new(duration))?;
    registry.register(Box::new(size))?;
    registry.register(Box::new(uploaded))?;
    Ok(registry.gather())
}

/// One gauge, with no labels.
pub fn gauge(
    name: &str,
    help: &str,
    value: f64,
) -> prometheus::Result<prometheus::proto::MetricFamily> {
    let g = prometheus::Gauge::new(name, help)?;
    g.set(value);
    let registry = prometheus::Registry::new();
    registry.register(Box::new(g))?;
    Ok(registry.gather().remove(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_add_up_to_a_second() {
        let before = Snapshot {
            running_ns: 1_000_000_000,
            idle_ns: 100_000_000,
            backpressured_ns: 0,
            records_in: 10,
            ..Default::default()
        };
        let now = Snapshot {
            running_ns: 2_000_000_000,
            idle_ns: 300_000_000,
            backpressured_ns: 500_000_000,
            records_in: 1010,
            ..Default::default()
        };
        let r = rates(&before, &now, 0.5);
        // Per second of the subtask's own running time (1 s), not of the
        // time between samples.
        assert_eq!(r.records_in, 1000.0);
        assert_eq!((r.idle, r.backpressured, r.busy), (200.0, 500.0, 300.0));
        assert_eq!(r.busy + r.idle + r.backpressured, 1000.0);
    }
}
