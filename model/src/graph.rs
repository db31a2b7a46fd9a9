//! The JobGraph: a manifest with its parameters applied, as vertices and
//! edges, and the tasks that operator chaining makes of them.
//!
//! Chaining (Flink's): a vertex joins the task of its input when it has one
//! input, the edge is `Forward` and both have the same parallelism. A task is
//! then a tree of vertices run in one thread per subtask, records passing
//! between them as function calls, not messages.

use std::collections::BTreeMap;

use crate::builtin::{Builtin, BuiltinTable};
use crate::codec::Codec;
use crate::fault_tolerance::{
    CheckpointConfig, RestartStrategy, StateBackendKind, checkpoint_config, restart_strategy,
    state_backend,
};
use crate::keygroup::{DEFAULT_MAX_PARALLELISM, MAX_MAX_PARALLELISM};
use crate::manifest::{KeyBy, Manifest, ManifestError, Setting, SinkKind, SourceKind, substitute};

/// A job ready to run: every parameter applied.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JobGraph {
    /// The job's name.
    pub name: String,
    /// Number of key groups.
    pub max_parallelism: u32,
    /// Sources, operators and sinks, sources first; an edge always goes from
    /// a lower id to a higher one.
    pub vertices: Vec<Vertex>,
    /// The edges between vertices.
    pub edges: Vec<Edge>,
    /// The parameter values, handed to every operator.
    pub params: BTreeMap<String, String>,
    /// Where keyed state lives (`None`: the worker's default).
    #[serde(default)]
    pub state_backend: Option<StateBackendKind>,
    /// How checkpoints are taken (`None`: they are not).
    #[serde(default)]
    pub checkpoint: Option<CheckpointConfig>,
    /// How the job restarts after a failure.
    #[serde(default)]
    pub restart: RestartStrategy,
    /// What a restart does when only a checkpoint older than the newest
    /// completed one can be restored.
    #[serde(default)]
    pub on_lost_commit: crate::fault_tolerance::OnLostCommit,
    /// The codec between its components and of their state (see
    /// [`crate::codec`]).
    #[serde(default)]
    pub codec: Codec,
    /// Guest limits below the worker's (the manifest's `[limits]`).
    #[serde(default)]
    pub limits: crate::limits::GuestLimits,
    /// Per file source vertex, the file's size when the job was planned:
    /// its subtasks cut their splits from it, so all cut the same ones
    /// however the file grows ([`JobGraph::fix_file_sizes`]).
    #[serde(default)]
    pub file_sizes: BTreeMap<usize, u64>,
}

/// One vertex of the graph, run as `parallelism` subtasks.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Vertex {
    /// Index in [`JobGraph::vertices`].
    pub id: usize,
    /// The name in the manifest.
    pub name: String,
    /// What it does.
    pub kind: VertexKind,
    /// Number of parallel subtasks.
    pub parallelism: u32,
    /// Where watermarks are made: on a source (or its timestamp assigner)
    /// with an event-time strategy.
    #[serde(default)]
    pub event_time: Option<EventTime>,
}

/// A source's event time: where timestamps come from and how watermarks
/// follow them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EventTime {
    /// A JSON pointer to the timestamp field (ms); `None`: the timestamps
    /// the records carry (set by a timestamp assigner).
    pub timestamp: Option<String>,
    /// Bounded out-of-orderness: the watermark is the largest timestamp
    /// seen, minus this, minus 1. Monotonous timestamps: 0.
    pub max_delay_ms: i64,
    /// Processing time between watermarks; 0: after every record that
    /// advances it.
    pub interval_ms: u64,
    /// Without records for this long, a source subtask is idle and no
    /// longer holds back the watermark downstream.
    pub idle_timeout_ms: Option<u64>,
}

/// Default processing time between two watermarks of a source.
pub const DEFAULT_WATERMARK_INTERVAL_MS: u64 = 200;

/// The windows of a window operator.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WindowSpec {
    /// How records are assigned to windows.
    pub assigner: WindowAssigner,
    /// On which time.
    pub time: TimeCharacteristic,
    /// How long after a window's end late records still update it.
    pub allowed_lateness_ms: i64,
}

/// How records are assigned to windows.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum WindowAssigner {
    /// `[k * size, (k + 1) * size)`: one window per record.
    Tumbling {
        /// Window length.
        size_ms: i64,
    },
    /// Windows of `size` starting every `slide`: `size / slide` windows per
    /// record.
    Sliding {
        /// Window length.
        size_ms: i64,
        /// Distance between starts.
        slide_ms: i64,
    },
    /// `[t, t + gap)` per record, merged while they overlap.
    Session {
        /// Inactivity that ends a session.
        gap_ms: i64,
    },
}

/// Which clock windows follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TimeCharacteristic {
    /// Records' timestamps; windows fire on watermarks.
    Event,
    /// The machine's clock.
    Processing,
}

/// What a vertex does.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum VertexKind {
    /// Reads records from outside.
    Source(SourceConfig),
    /// Runs an operator exported by the job's component.
    Operator {
        /// The export's name.
        function: String,
        /// The component that exports it (its name in the bundle; empty
        /// until planning resolves it, and for built-in operators).
        #[serde(default)]
        component: String,
        /// How its input is keyed, for keyed operators.
        key_by: Option<KeyBy>,
        /// Its windows, for a window operator.
        #[serde(default)]
        window: Option<WindowSpec>,
        /// A built-in operator the runtime runs natively (`function` is
        /// then the built-in's name).
        #[serde(default)]
        builtin: Option<Builtin>,
    },
    /// Writes records outside.
    Sink(SinkConfig),
}

/// A source with its parameters applied.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum SourceConfig {
    /// Lines of a text file, as JSON strings.
    TextFile {
        /// The file.
        path: String,
    },
    /// Lines of a JSON-lines file, as they are.
    JsonLinesFile {
        /// The file.
        path: String,
        /// Keep reading what is appended (the last subtask does); never ends.
        #[serde(default)]
        follow: bool,
    },
    /// Generated records.
    Generator {
        /// Records in all; `None` is unbounded.
        count: Option<u64>,
        /// What to generate.
        pattern: GeneratorPattern,
        /// Records per second per subtask, when limited.
        rate: Option<u64>,
        /// When the first record is due, ms since the epoch (0 or absent:
        /// at once).
        #[serde(default)]
        start_at_ms: Option<u64>,
    },
}

/// What a generator source emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum GeneratorPattern {
    /// `{"seq": n}` for n = 0, 1, 2, …
    Sequence,
    /// Lines of 8 words from a fixed vocabulary of 1,000, as JSON strings.
    Words,
    /// Auction bids, Nexmark-shaped: `{"key": "a<k>", "price": p, "ts": t}`
    /// with `k` drawn from 10,000 auctions and `t = n / 100` (100 bids per
    /// ms of event time, in order).
    Bids,
    /// `{"id": n, "k": n % 10000, "price": n % 1000, "ts": n / 100}`: the
    /// columns Flink's side of the side-by-side benchmark derives from a
    /// number sequence (100 events per ms of event time, in order).
    Numbers,
}

/// A sink with its parameters applied.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum SinkConfig {
    /// Standard output.
    Stdout,
    /// A JSON-lines file.
    JsonLinesFile {
        /// The file.
        path: String,
        /// Whether a cluster job may replace what is at `path` already
        /// (the manifest's `mode = "overwrite"`).
        #[serde(default)]
        overwrite: bool,
    },
}

impl SinkConfig {
    /// Whether, in a job with checkpoints, this sink writes a directory of
    /// part files committed with the checkpoints (exactly-once): a
    /// JSON-lines file sink that names no device (`/dev/null` and the like
    /// are written straight through).
    pub fn commits_parts(&self) -> bool {
        matches!(self, SinkConfig::JsonLinesFile { path, .. }
            if !crate::access::SINK_DEVICES.contains(&path.as_str()))
    }
}

/// How records move along an edge.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Partitioning {
    /// Subtask i to subtask i (equal parallelism). Keeps order per channel.
    Forward,
    /// By key group of the key that `KeyBy` extracts: all records of a key
    /// reach the same subtask.
    Hash(KeyBy),
    /// Round-robin over the receivers.
    Rebalance,
}

/// An edge between two vertices.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Edge {
    /// The producing vertex.
    pub from: usize,
    /// `Some(name)` when the edge carries a side output of `from`.
    pub side_output: Option<String>,
    /// The consuming vertex.
    pub to: usize,
    /// How records are distributed over `to`'s subtasks.
    pub partitioning: Partitioning,
}

/// A chain of vertices run together: `vertices[0]` is the head, every other
/// vertex's input is a forward edge from a vertex earlier in the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// Index in [`JobGraph::tasks`].
    pub id: usize,
    /// Vertex ids, head first.
    pub vertices: Vec<usize>,
    /// Parallelism of every vertex of the task.
    pub parallelism: u32,
}

fn invalid(msg: String) -> ManifestError {
    ManifestError::Invalid(msg)
}

/// A generator's whole-number setting (`count = 5` or `count = "${n}"`):
/// `None` when absent or empty; a negative number is refused.
fn whole(
    what: &str,
    setting: &Option<Setting>,
    source: &str,
    params: &BTreeMap<String, String>,
) -> Result<Option<u64>, ManifestError> {
    let Some(setting) = setting else {
        return Ok(None);
    };
    match setting.resolve(&format!("{what} of `{source}`"), params)? {
        None => Ok(None),
        Some(n) => u64::try_from(n).map(Some).map_err(|_| {
            ManifestError::BadParam(format!(
                "{what} of `{source}` is {n}; it cannot be negative"
            ))
        }),
    }
}

/// A source's event-time settings, if it has any.
fn event_time(
    s: &crate::manifest::SourceSpec,
    params: &BTreeMap<String, String>,
) -> Result<Option<EventTime>, ManifestError> {
    let setting = |what: &str, v: &Option<Setting>| -> Result<Option<i64>, ManifestError> {
        let Some(v) = v else { return Ok(None) };
        match v.resolve(&format!("{what} of `{}`", s.name), params)? {
            Some(n) if n < 0 => Err(ManifestError::BadParam(format!(
                "{what} of `{}` is {n}; it cannot be negative",
                s.name
            ))),
            n => Ok(n),
        }
    };
    let max_delay = setting("max-delay-ms", &s.max_delay_ms)?;
    let interval = setting("watermark-interval-ms", &s.watermark_interval_ms)?;
    let idle = setting("idle-timeout-ms", &s.idle_timeout_ms)?;
    let timestamp = s
        .timestamp
        .as_deref()
        .map(|t| substitute(t, params))
        .transpose()?;
    if let Some(t) = &timestamp {
        if !t.starts_with('/') {
            return Err(invalid(format!(
                "source `{}`: timestamp {t:?} is not a JSON pointer such as \"/ts\"",
                s.name
            )));
        }
        if s.timestamp_assigner.is_some() {
            return Err(invalid(format!(
                "source `{}` has both `timestamp` and `timestamp-assigner`",
                s.name
            )));
        }
    }
    let has_timestamps = timestamp.is_some() || s.timestamp_assigner.is_some();
    let max_delay_ms = match (s.watermark.as_deref(), max_delay) {
        (None, None) if !has_timestamps => {
            if interval.is_some() || idle.is_some() {
                return Err(invalid(format!(
                    "source `{}` sets watermark options but has no `timestamp` or `timestamp-assigner`",
                    s.name
                )));
            }
            return Ok(None);
        }
        (Some(_), _) | (None, Some(_)) if !has_timestamps => {
            return Err(invalid(format!(
                "source `{}` has a watermark strategy but no `timestamp` or `timestamp-assigner`",
                s.name
            )));
        }
        (None | Some("monotonous"), None) => 0,
        (Some("monotonous"), Some(_)) => {
            return Err(invalid(format!(
                "source `{}`: a monotonous watermark takes no `max-delay-ms`",
                s.name
            )));
        }
        (None | Some("bounded"), Some(d)) => d,
        (Some("bounded"), None) => {
            return Err(invalid(format!(
                "source `{}`: a bounded watermark needs `max-delay-ms`",
                s.name
            )));
        }
        (Some(other), _) => {
            return Err(invalid(format!(
                "source `{}`: watermark {other:?} is not \"bounded\" or \"monotonous\"",
                s.name
            )));
        }
    };
    Ok(Some(EventTime {
        timestamp,
        max_delay_ms,
        interval_ms: interval.map_or(DEFAULT_WATERMARK_INTERVAL_MS, |i| i as u64),
        idle_timeout_ms: idle.map(|i| i as u64),
    }))
}

/// An operator's windows, if it has any.
fn window_spec(
    o: &crate::manifest::OperatorSpec,
    params: &BTreeMap<String, String>,
) -> Result<Option<WindowSpec>, ManifestError> {
    let Some(w) = &o.window else {
        if o.allowed_lateness_ms.is_some() {
            return Err(invalid(format!(
                "operator `{}` has `allowed-lateness-ms` but no `window`",
                o.name
            )));
        }
        return Ok(None);
    };
    let positive = |what: &str, v: &Option<Setting>| -> Result<Option<i64>, ManifestError> {
        let Some(v) = v else { return Ok(None) };
        match v.resolve(&format!("window {what} of `{}`", o.name), params)? {
            Some(n) if n <= 0 => Err(ManifestError::BadParam(format!(
                "window {what} of `{}` is {n}; it must be positive",
                o.name
            ))),
            n => Ok(n),
        }
    };
    let need = |what: &str, v: Option<i64>| {
        v.ok_or_else(|| {
            invalid(format!(
                "operator `{}`: a {} window needs `{what}`",
                o.name, w.kind
            ))
        })
    };
    let size = positive("size-ms", &w.size_ms)?;
    let slide = positive("slide-ms", &w.slide_ms)?;
    let gap = positive("gap-ms", &w.gap_ms)?;
    let assigner = match w.kind.as_str() {
        "tumbling" => WindowAssigner::Tumbling {
            size_ms: need("size-ms", size)?,
        },
        "sliding" => {
            let size_ms = need("size-ms", size)?;
            match slide {
                None => WindowAssigner::Tumbling { size_ms },
                Some(s) if s == size_ms => WindowAssigner::Tumbling { size_ms },
                // Any slide: a record is in every window [k·slide, k·slide
                // + size) that holds it, as in Flink.
                Some(slide_ms) => WindowAssigner::Sliding { size_ms, slide_ms },
            }
        }
        "session" => WindowAssigner::Session {
            gap_ms: need("gap-ms", gap)?,
        },
        other => {
            return Err(invalid(format!(
                "operator `{}`: window type {other:?} is not \"tumbling\", \"sliding\" or \"session\"",
                o.name
            )));
        }
    };
    let time = match w.time.as_deref() {
        None | Some("event") => TimeCharacteristic::Event,
        Some("processing") => TimeCharacteristic::Processing,
        Some(other) => {
            return Err(invalid(format!(
                "operator `{}`: window time {other:?} is not \"event\" or \"processing\"",
                o.name
            )));
        }
    };
    let allowed_lateness_ms = match &o.allowed_lateness_ms {
        None => 0,
        Some(v) => match v.resolve(&format!("allowed-lateness-ms of `{}`", o.name), params)? {
            None => 0,
            Some(n) if n < 0 => {
                return Err(ManifestError::BadParam(format!(
                    "allowed-lateness-ms of `{}` is {n}; it cannot be negative",
                    o.name
                )));
            }
            Some(n) => n,
        },
    };
    if o.key_by.is_none() {
        return Err(invalid(format!(
            "operator `{}`: windows need a keyed input (`key-by`)",
            o.name
        )));
    }
    Ok(Some(WindowSpec {
        assigner,
        time,
        allowed_lateness_ms,
    }))
}

impl JobGraph {
    /// Build the graph of `manifest` with the given parameter values and an
    /// optional parallelism that overrides the manifest's default.
    ///
    /// ```
    /// use weir_model::{JobGraph, Manifest};
    /// let m = Manifest::parse(r#"
    ///     [job]
    ///     name = "wc"
    ///     [params]
    ///     n = "100"
    ///     [[source]]
    ///     name = "gen"
    ///     type = "generator"
    ///     count = "${n}"
    ///     pattern = "words"
    ///     [[operator]]
    ///     name = "split"
    ///     function = "split-words"
    ///     [[operator]]
    ///     name = "count"
    ///     function = "count"
    ///     key-by = "value"
    ///     [[sink]]
    ///     name = "out"
    ///     type = "stdout"
    /// "#).unwrap();
    /// let params = m.resolve_params(&[]).unwrap();
    /// let g = JobGraph::build(&m, params, Some(4)).unwrap();
    /// let tasks = g.tasks();
    /// // gen+split chain, then a hash edge, then count+out.
    /// assert_eq!(tasks.len(), 2);
    /// assert_eq!(tasks[0].vertices, [0, 1]);
    /// assert_eq!(tasks[1].vertices, [2, 3]);
    /// ```
    pub fn build(
        manifest: &Manifest,
        params: BTreeMap<String, String>,
        parallelism: Option<u32>,
    ) -> Result<JobGraph, ManifestError> {
        let max_parallelism = manifest
            .job
            .max_parallelism
            .unwrap_or(DEFAULT_MAX_PARALLELISM);
        if max_parallelism == 0 || max_parallelism > MAX_MAX_PARALLELISM {
            return Err(invalid(format!(
                "max-parallelism is {max_parallelism}; it must be between 1 and {MAX_MAX_PARALLELISM}"
            )));
        }
        let default_parallelism = parallelism.or(manifest.job.parallelism).unwrap_or(1);
        let check = |name: &str, p: u32| -> Result<u32, ManifestError> {
            if p == 0 || p > max_parallelism {
                Err(ManifestError::BadParam(format!(
                    "parallelism of `{name}` is {p}; it must be between 1 and max-parallelism ({max_parallelism})"
                )))
            } else {
                Ok(p)
            }
        };
        if manifest.sources.is_empty() {
            return Err(invalid("a job needs at least one [[source]]".into()));
        }
        if manifest.sinks.is_empty() {
            return Err(invalid("a job needs at least one [[sink]]".into()));
        }

        let mut vertices = Vec::new();
        let mut edges = Vec::new();
        let mut by_name: BTreeMap<String, usize> = BTreeMap::new();
        let mut add = |vertices: &mut Vec<Vertex>, name: &str, kind, p| {
            if by_name.contains_key(name) {
                return Err(invalid(format!("two elements are named `{name}`")));
            }
            let id = vertices.len();
            by_name.insert(name.to_owned(), id);
            vertices.push(Vertex {
                id,
                name: name.to_owned(),
                kind,
                parallelism: p,
                event_time: None,
            });
            Ok(id)
        };
        // A source with a timestamp assigner is read through it.
        let mut read_as: BTreeMap<String, usize> = BTreeMap::new();

        for s in &manifest.sources {
            let config = match &s.kind {
                SourceKind::TextFile { path } => SourceConfig::TextFile {
                    path: substitute(path, &params)?,
                },
                SourceKind::JsonLinesFile { path, follow } => SourceConfig::JsonLinesFile {
                    path: substitute(path, &params)?,
                    follow: *follow,
                },
                SourceKind::Generator {
                    count,
                    pattern,
                    rate,
                    start_at_ms,
                } => {
                    let start_at_ms =
                        whole("start-at-ms", start_at_ms, &s.name, &params)?.filter(|&t| t > 0);
                    let count = whole("count", count, &s.name, &params)?;
                    let rate = whole("rate", rate, &s.name, &params)?;
                    let pattern = match pattern
                        .as_deref()
                        .map(|p| substitute(p, &params))
                        .transpose()?
                        .as_deref()
                    {
                        None | Some("sequence") => GeneratorPattern::Sequence,
                        Some("words") => GeneratorPattern::Words,
                        Some("bids") => GeneratorPattern::Bids,
                        Some("numbers") => GeneratorPattern::Numbers,
                        Some(other) => {
                            return Err(invalid(format!(
                                "generator `{}`: pattern {other:?} is not \"sequence\", \"words\", \"bids\" or \"numbers\"",
                                s.name
                            )));
                        }
                    };
                    SourceConfig::Generator {
                        count,
                        pattern,
                        rate,
                        start_at_ms,
                    }
                }
            };
            let p = check(&s.name, s.parallelism.unwrap_or(default_parallelism))?;
            let id = add(&mut vertices, &s.name, VertexKind::Source(config), p)?;
            let event_time = event_time(s, &params)?;
            match &s.timestamp_assigner {
                None => vertices[id].event_time = event_time,
                Some(function) => {
                    let name = format!("{}.timestamps", s.name);
                    let a = add(
                        &mut vertices,
                        &name,
                        VertexKind::Operator {
                            function: function.clone(),
                            component: String::new(),
                            key_by: None,
                            window: None,
                            builtin: None,
                        },
                        p,
                    )?;
                    vertices[a].event_time = event_time.or(Some(EventTime {
                        timestamp: None,
                        max_delay_ms: 0,
                        interval_ms: DEFAULT_WATERMARK_INTERVAL_MS,
                        idle_timeout_ms: None,
                    }));
                    edges.push(Edge {
                        from: id,
                        side_output: None,
                        to: a,
                        partitioning: Partitioning::Forward,
                    });
                    read_as.insert(s.name.clone(), a);
                }
            }
        }

        let single_source = (manifest.sources.len() == 1)
            .then(|| read_as.get(&manifest.sources[0].name).copied().unwrap_or(0));
        let mut previous: Option<usize> = single_source;
        let lookup = |vertices: &Vec<Vertex>,
                      input: &str,
                      who: &str|
         -> Result<(usize, Option<String>), ManifestError> {
            let (name, side) = match input.split_once(':') {
                Some((n, s)) => (n, Some(s.to_owned())),
                None => (input, None),
            };
            let v = vertices.iter().find(|v| v.name == name).ok_or_else(|| {
                invalid(format!(
                    "`{who}` reads `{name}`, which is not a source or operator defined before it"
                ))
            })?;
            let v = match (read_as.get(name), &side) {
                (Some(&a), None) => &vertices[a],
                _ => v,
            };
            match (&v.kind, &side) {
                (VertexKind::Sink(_), _) => {
                    Err(invalid(format!("`{who}` reads the sink `{name}`")))
                }
                (VertexKind::Source(_), Some(_)) => Err(invalid(format!(
                    "`{who}` reads a side output of the source `{name}`; only operators have side outputs"
                ))),
                _ => Ok((v.id, side)),
            }
        };

        for o in &manifest.operators {
            let inputs: Vec<(usize, Option<String>)> = match (&o.input, &o.inputs) {
                (Some(_), Some(_)) => {
                    return Err(invalid(format!(
                        "operator `{}` has both `input` and `inputs`",
                        o.name
                    )));
                }
                (None, Some(list)) if list.is_empty() => {
                    return Err(invalid(format!("operator `{}`: `inputs` is empty", o.name)));
                }
                (None, Some(list)) => list
                    .iter()
                    .map(|i| lookup(&vertices, i, &o.name))
                    .collect::<Result<_, _>>()?,
                (Some(input), None) => vec![lookup(&vertices, input, &o.name)?],
                (None, None) => vec![(
                    previous.ok_or_else(|| {
                        invalid(format!(
                            "operator `{}` must name its `input`: the job has several sources",
                            o.name
                        ))
                    })?,
                    None,
                )],
            };
            let key_by = o.key_by.as_deref().map(str::parse::<KeyBy>).transpose()?;
            let p = check(&o.name, o.parallelism.unwrap_or(default_parallelism))?;
            let window = window_spec(o, &params)?;
            let (function, builtin) = match (&o.function, &o.builtin) {
                (Some(f), None) => (f.clone(), None),
                (None, Some(b)) => {
                    let planned = Builtin::plan(&BuiltinTable {
                        name: &o.name,
                        builtin: b,
                        field: o.field.as_deref(),
                        emit: o.emit.as_deref(),
                        filter: o.filter.as_deref(),
                        columns: o.columns.as_deref(),
                        keyed: key_by.is_some(),
                        windowed: window.is_some(),
                    })
                    .map_err(invalid)?;
                    (b.clone(), Some(planned))
                }
                (Some(_), Some(_)) => {
                    return Err(invalid(format!(
                        "operator `{}` has both `function` and `builtin`",
                        o.name
                    )));
                }
                (None, None) => {
                    return Err(invalid(format!(
                        "operator `{}` needs a `function` (exported by the component) or a `builtin`",
                        o.name
                    )));
                }
            };
            if builtin.is_none() {
                for (what, given) in [
                    ("field", o.field.is_some()),
                    ("emit", o.emit.is_some()),
                    ("where", o.filter.is_some()),
                    ("columns", o.columns.is_some()),
                ] {
                    if given {
                        return Err(invalid(format!(
                            "operator `{}`: `{what}` is for built-in operators (`builtin = ...`)",
                            o.name
                        )));
                    }
                }
            }
            let id = add(
                &mut vertices,
                &o.name,
                VertexKind::Operator {
                    function,
                    component: o.component.clone().unwrap_or_default(),
                    key_by: key_by.clone(),
                    window,
                    builtin,
                },
                p,
            )?;
            for (from, side) in inputs {
                let partitioning = match &key_by {
                    Some(k) => Partitioning::Hash(k.clone()),
                    None if vertices[from].parallelism == p => Partitioning::Forward,
                    None => Partitioning::Rebalance,
                };
                edges.push(Edge {
                    from,
                    side_output: side,
                    to: id,
                    partitioning,
                });
            }
            previous = Some(id);
        }

        for s in &manifest.sinks {
            let (from, side) = match &s.input {
                Some(input) => lookup(&vertices, input, &s.name)?,
                None => (
                    previous.ok_or_else(|| {
                        invalid(format!(
                            "sink `{}` must name its `input`: the job has several sources",
                            s.name
                        ))
                    })?,
                    None,
                ),
            };
            let config = match &s.kind {
                SinkKind::Stdout => SinkConfig::Stdout,
                SinkKind::JsonLinesFile { path, mode } => SinkConfig::JsonLinesFile {
                    path: substitute(path, &params)?,
                    overwrite: match mode.as_deref() {
                        None | Some("create") => false,
                        Some("overwrite") => true,
                        Some(other) => {
                            return Err(invalid(format!(
                                "sink `{}`: mode {other:?} is not \"create\" or \"overwrite\"",
                                s.name
                            )));
                        }
                    },
                },
            };
            // A sink runs beside what it reads.
            let p = vertices[from].parallelism;
            let id = add(&mut vertices, &s.name, VertexKind::Sink(config), p)?;
            edges.push(Edge {
                from,
                side_output: side,
                to: id,
                partitioning: Partitioning::Forward,
            });
        }

        let checkpoint = manifest
            .checkpoint
            .as_ref()
            .map(|c| checkpoint_config(c, &params))
            .transpose()?
            .flatten();
        let restart = restart_strategy(manifest.restart.as_ref(), checkpoint.is_some(), &params)?;
        let on_lost_commit = crate::fault_tolerance::on_lost_commit(manifest.restart.as_ref())?;
        let state_backend = manifest
            .state
            .as_ref()
            .map(state_backend)
            .transpose()?
            .flatten();
        let limits = manifest.limits.unwrap_or_default();
        limits.check().map_err(invalid)?;
        Ok(JobGraph {
            name: manifest.job.name.clone(),
            max_parallelism,
            vertices,
            edges,
            params,
            state_backend,
            checkpoint,
            restart,
            on_lost_commit,
            codec: manifest.job.codec.unwrap_or(Codec::Msgpack),
            limits,
            file_sizes: BTreeMap::new(),
        })
    }

    /// Record the size each file source's file has now: the job's splits
    /// are cut from it. A file that cannot be read is left out (its
    /// subtasks name it when they open it).
    pub fn fix_file_sizes(&mut self) {
        for v in &self.vertices {
            if let VertexKind::Source(
                SourceConfig::TextFile { path } | SourceConfig::JsonLinesFile { path, .. },
            ) = &v.kind
                && let Ok(meta) = std::fs::metadata(path)
            {
                self.file_sizes.insert(v.id, meta.len());
            }
        }
    }

    /// The edges into vertex `id`.
    pub fn inputs(&self, id: usize) -> impl Iterator<Item = &Edge> {
        self.edges.iter().filter(move |e| e.to == id)
    }

    /// The edges out of vertex `id`.
    pub fn outputs(&self, id: usize) -> impl Iterator<Item = &Edge> {
        self.edges.iter().filter(move |e| e.from == id)
    }

    /// Chain the vertices into tasks (see the module docs).
    pub fn tasks(&self) -> Vec<Task> {
        let mut task_of = vec![usize::MAX; self.vertices.len()];
        let mut tasks: Vec<Task> = Vec::new();
        for v in &self.vertices {
            let inputs: Vec<&Edge> = self.inputs(v.id).collect();
            let chained = match inputs.as_slice() {
                [e] if e.partitioning == Partitioning::Forward
                    && self.vertices[e.from].parallelism == v.parallelism =>
                {
                    Some(task_of[e.from])
                }
                _ => None,
            };
            let t = match chained {
                Some(t) => t,
                None => {
                    tasks.push(Task {
                        id: tasks.len(),
                        vertices: Vec::new(),
                        parallelism: v.parallelism,
                    });
                    tasks.len() - 1
                }
            };
            tasks[t].vertices.push(v.id);
            task_of[v.id] = t;
        }
        tasks
    }

    /// The task that runs vertex `id`.
    pub fn task_of(&self, tasks: &[Task], id: usize) -> usize {
        tasks
            .iter()
            .position(|t| t.vertices.contains(&id))
            .expect("every vertex is in a task")
    }
}

/// An operator a component exports, as the planner needs to know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedOperator {
    /// The component that exports it (its name in the bundle).
    pub component: String,
    /// Its name.
    pub name: String,
    /// Whether it needs a keyed input (a keyed process, a window function).
    pub keyed: bool,
    /// What it is.
    pub role: OperatorRole,
}

/// What an exported operator is, as far as planning goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperatorRole {
    /// Records in, records out (map, flat map, filter, process).
    Transform,
    /// A keyed process function.
    KeyedProcess,
    /// Assigns event timestamps (a source's `timestamp-assigner`).
    TimestampAssigner,
    /// A window function: needs a `window`.
    Window,
}

impl OperatorRole {
    /// The role of an operator of kind `kind`, as the contract names kinds
    /// (`map`, `keyed-process`, `window-process`, ...).
    pub fn of_kind(kind: &str) -> Option<OperatorRole> {
        Some(match kind {
            "map" | "flat-map" | "filter" => OperatorRole::Transform,
            "keyed-process" => OperatorRole::KeyedProcess,
            "timestamp-assigner" => OperatorRole::TimestampAssigner,
            "window" | "window-process" => OperatorRole::Window,
            _ => return None,
        })
    }

    /// Whether an operator of this role needs a keyed input.
    pub fn keyed(self) -> bool {
        matches!(self, OperatorRole::KeyedProcess | OperatorRole::Window)
    }
}

impl JobGraph {
    /// Check every operator vertex against what the components export and
    /// settle which component runs it: the function exists (in the
    /// component the operator names, or in exactly one), and keyed
    /// operators have a `key-by`.
    pub fn resolve_operators(
        &mut self,
        exported: &[ExportedOperator],
    ) -> Result<(), ManifestError> {
        let several = exported
            .iter()
            .any(|o| o.component != exported[0].component);
        for v in &mut self.vertices {
            let VertexKind::Operator {
                function,
                component,
                key_by,
                window,
                builtin,
            } = &mut v.kind
            else {
                continue;
            };
            if builtin.is_some() {
                // The runtime's own: checked when planned.
                continue;
            }
            let candidates: Vec<&ExportedOperator> = exported
                .iter()
                .filter(|o| {
                    &o.name == function && (component.is_empty() || o.component == *component)
                })
                .collect();
            let op = match candidates.as_slice() {
                [op] => *op,
                [] => {
                    let names: Vec<String> = exported
                        .iter()
                        .filter(|o| component.is_empty() || o.component == *component)
                        .map(|o| {
                            if several {
                                format!("{}:{}", o.component, o.name)
                            } else {
                                o.name.clone()
                            }
                        })
                        .collect();
                    let which = if !component.is_empty() {
                        format!("component `{component}` does not export (it exports:")
                    } else if several {
                        "no component exports (they export:".to_owned()
                    } else {
                        "the component does not export (it exports:".to_owned()
                    };
                    return Err(invalid(format!(
                        "operator `{}` uses function `{function}`, which {which} {})",
                        v.name,
                        if names.is_empty() {
                            "nothing".to_owned()
                        } else {
                            names.join(", ")
                        }
                    )));
                }
                more => {
                    let names: Vec<&str> = more.iter().map(|o| o.component.as_str()).collect();
                    return Err(invalid(format!(
                        "operator `{}`: function `{function}` is exported by several components ({}): say which with `component = \"...\"`",
                        v.name,
                        names.join(", ")
                    )));
                }
            };
            component.clone_from(&op.component);
            let assigner = v.event_time.is_some();
            match (op.role, window.is_some(), assigner) {
                (OperatorRole::Window, false, _) => {
                    return Err(invalid(format!(
                        "operator `{}`: `{function}` is a window function and needs a `window` (tumbling, sliding or session)",
                        v.name
                    )));
                }
                (role, true, _) if role != OperatorRole::Window => {
                    return Err(invalid(format!(
                        "operator `{}` has a `window`, but `{function}` is not a window function (window_aggregate or window_process)",
                        v.name
                    )));
                }
                (role, _, true) if role != OperatorRole::TimestampAssigner => {
                    return Err(invalid(format!(
                        "`{}`: the timestamp assigner `{function}` is not a timestamps function",
                        v.name
                    )));
                }
                _ => {}
            }
            if op.keyed && key_by.is_none() {
                return Err(invalid(format!(
                    "operator `{}`: `{function}` is a keyed process and needs `key-by` (\"value\", \"key\" or a JSON pointer)",
                    v.name
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod time_tests {
    use super::*;

    fn build(extra_source: &str, extra_op: &str) -> Result<JobGraph, ManifestError> {
        let m = Manifest::parse(&format!(
            "[job]\nname='j'\n[[source]]\nname='s'\ntype='json-lines-file'\npath='x'\n{extra_source}\n\
             [[operator]]\nname='w'\nfunction='f'\nkey-by='/k'\n{extra_op}\n[[sink]]\nname='o'\ntype='stdout'\n"
        ))?;
        JobGraph::build(&m, BTreeMap::new(), None)
    }

    fn err(extra_source: &str, extra_op: &str) -> String {
        build(extra_source, extra_op).unwrap_err().to_string()
    }

    #[test]
    fn event_time_settings_become_the_source_strategy() {
        let g = build(
            "timestamp='/ts'\nwatermark='bounded'\nmax-delay-ms=250\nidle-timeout-ms='5000'",
            "",
        )
        .unwrap();
        assert_eq!(
            g.vertices[0].event_time,
            Some(EventTime {
                timestamp: Some("/ts".into()),
                max_delay_ms: 250,
                interval_ms: DEFAULT_WATERMARK_INTERVAL_MS,
                idle_timeout_ms: Some(5000),
            })
        );
        let g = build("timestamp='/ts'", "").unwrap();
        assert_eq!(g.vertices[0].event_time.as_ref().unwrap().max_delay_ms, 0);
        assert_eq!(build("", "").unwrap().vertices[0].event_time, None);
    }

    #[test]
    fn a_timestamp_assigner_is_chained_after_its_source() {
        let g = build("timestamp-assigner='ts'\nwatermark-interval-ms=0", "").unwrap();
        assert_eq!(g.vertices[1].name, "s.timestamps");
        assert_eq!(g.vertices[1].event_time.as_ref().unwrap().interval_ms, 0);
        // The operator reads the assigner, and they chain.
        assert!(g.edges.iter().any(|e| e.from == 1 && e.to == 2));
        assert_eq!(g.tasks()[0].vertices, [0, 1]);
    }

    #[test]
    fn bad_event_time_settings_are_named() {
        assert!(err("watermark='bounded'\nmax-delay-ms=5", "").contains("no `timestamp`"));
        assert!(err("timestamp='/ts'\nwatermark='bounded'", "").contains("needs `max-delay-ms`"));
        assert!(err("timestamp='/ts'\nwatermark='late'", "").contains("\"late\""));
        assert!(err("timestamp='ts'", "").contains("not a JSON pointer"));
        assert!(err("timestamp='/ts'\nmax-delay-ms=-1", "").contains("cannot be negative"));
        assert!(err("timestamp='/ts'\nmax-delay-ms='soon'", "").contains("not a whole number"));
        assert!(err("timestamp='/ts'\ntimestamp-assigner='f'", "").contains("both `timestamp`"));
    }

    #[test]
    fn windows_are_checked() {
        let g = build(
            "timestamp='/ts'",
            "window={type='sliding', size-ms=60000, slide-ms=''}\nallowed-lateness-ms=5",
        )
        .unwrap();
        let VertexKind::Operator { window, .. } = &g.vertices[1].kind else {
            panic!()
        };
        assert_eq!(
            window,
            &Some(WindowSpec {
                assigner: WindowAssigner::Tumbling { size_ms: 60000 },
                time: TimeCharacteristic::Event,
                allowed_lateness_ms: 5,
            })
        );
        let g = build(
            "timestamp='/ts'",
            "window={type='sliding', size-ms=100, slide-ms=30}",
        )
        .unwrap();
        let VertexKind::Operator { window, .. } = &g.vertices[1].kind else {
            panic!()
        };
        assert_eq!(
            window.as_ref().unwrap().assigner,
            WindowAssigner::Sliding {
                size_ms: 100,
                slide_ms: 30
            },
            "a slide that does not divide the size"
        );
        assert!(err("", "window={type='session'}").contains("needs `gap-ms`"));
        assert!(err("", "window={type='hopping', size-ms=1}").contains("\"hopping\""));
        assert!(err("", "window={type='tumbling', size-ms=0}").contains("must be positive"));
        assert!(err("", "allowed-lateness-ms=5").contains("no `window`"));
        assert!(err("", "window={type='tumbling', size-ms=10, time='wall'}").contains("\"wall\""));
    }

    #[test]
    fn operators_find_their_component() {
        let m = |component: &str| {
            Manifest::parse(&format!(
                "[job]\nname='j'\n[components.py]\npath='p.wasm'\n[components.rs]\npath='r.wasm'\n\
                 [[source]]\nname='s'\ntype='text-file'\npath='x'\n\
                 [[operator]]\nname='a'\nfunction='split'\n\
                 [[operator]]\nname='b'\nfunction='count'\nkey-by='value'\n{component}\n\
                 [[sink]]\nname='o'\ntype='stdout'\n"
            ))
            .unwrap()
        };
        let export = |component: &str, name: &str, role| ExportedOperator {
            component: component.into(),
            name: name.into(),
            keyed: role == OperatorRole::KeyedProcess,
            role,
        };
        let exported = [
            export("rs", "split", OperatorRole::Transform),
            export("py", "count", OperatorRole::KeyedProcess),
            export("rs", "count", OperatorRole::KeyedProcess),
        ];
        let resolved = |component: &str| {
            let mut g = JobGraph::build(&m(component), BTreeMap::new(), None).unwrap();
            g.resolve_operators(&exported)?;
            let names: Vec<String> = g
                .vertices
                .iter()
                .filter_map(|v| match &v.kind {
                    VertexKind::Operator { component, .. } => Some(component.clone()),
                    _ => None,
                })
                .collect();
            Ok::<_, ManifestError>(names)
        };
        assert_eq!(resolved("component='py'").unwrap(), ["rs", "py"]);
        let e = resolved("").unwrap_err().to_string();
        assert!(e.contains("exported by several components (py, rs)"), "{e}");
        let e = Manifest::parse(
            "[job]\nname='j'\n[components.py]\npath='p.wasm'\n[[operator]]\nname='a'\nfunction='f'\ncomponent='js'\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("names component `js`"), "{e}");
        let e = Manifest::parse("[job]\nname='j'\n[component]\n[components.py]\npath='p'\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not both"), "{e}");
    }

    #[test]
    fn window_functions_and_windows_go_together() {
        let exported = |role| {
            vec![ExportedOperator {
                component: "main".into(),
                name: "f".into(),
                keyed: true,
                role,
            }]
        };
        let mut windowed = build("", "window={type='tumbling', size-ms=10}").unwrap();
        let mut plain = build("", "").unwrap();
        assert!(
            windowed
                .resolve_operators(&exported(OperatorRole::Window))
                .is_ok()
        );
        let e = plain
            .resolve_operators(&exported(OperatorRole::Window))
            .unwrap_err();
        assert!(e.to_string().contains("needs a `window`"), "{e}");
        let e = windowed
            .resolve_operators(&exported(OperatorRole::KeyedProcess))
            .unwrap_err();
        assert!(e.to_string().contains("not a window function"), "{e}");
    }
}

#[cfg(test)]
mod builtin_tests {
    use super::*;

    fn build(op: &str) -> Result<JobGraph, ManifestError> {
        let m = Manifest::parse(&format!(
            "[job]\nname='j'\n[[source]]\nname='s'\ntype='json-lines-file'\npath='x'\n\
             [[operator]]\nname='b'\n{op}\n[[sink]]\nname='o'\ntype='stdout'\n"
        ))?;
        JobGraph::build(&m, BTreeMap::new(), None)
    }

    fn err(op: &str) -> String {
        build(op).unwrap_err().to_string()
    }

    #[test]
    fn builtins_plan_and_need_no_export() {
        let mut g = build("builtin='sum'\nkey-by='/user'\nfield='/amount'").unwrap();
        let VertexKind::Operator {
            function, builtin, ..
        } = &g.vertices[1].kind
        else {
            panic!()
        };
        assert_eq!(function, "sum");
        assert!(matches!(builtin, Some(Builtin::Aggregate { .. })));
        // Nothing exported: a built-in is not checked against the component.
        g.resolve_operators(&[]).unwrap();
        let g = build("builtin='select'\ncolumns=['a = /a * 2']\nwhere='/a > 1'").unwrap();
        assert_eq!(g.edges[0].partitioning, Partitioning::Forward);
    }

    #[test]
    fn builtin_mistakes_are_named() {
        assert!(
            err("function='f'\nbuiltin='count'\nkey-by='/k'")
                .contains("both `function` and `builtin`")
        );
        assert!(err("key-by='/k'").contains("needs a `function`"));
        assert!(err("function='f'\nfield='/x'").contains("`field` is for built-in operators"));
        assert!(err("builtin='count'").contains("needs `key-by`"));
        assert!(err("builtin='select'\ncolumns=['a = /a +']").contains("column `a`"));
        assert!(
            err("builtin='select'\ncolumns=['a = /a']\nkey-by='/a'\nwindow={type='tumbling', size-ms=10}")
                .contains("takes no `window`")
        );
        assert!(
            err("builtin='count'\nkey-by='/k'\nemit='batch'\nwindow={type='tumbling', size-ms=10}")
                .contains("`emit` is for running aggregates")
        );
    }

    #[test]
    fn windowed_builtins_plan() {
        let g = build("builtin='avg'\nkey-by='/k'\nfield='/x'\nwindow={type='sliding', size-ms=30, slide-ms=7}")
            .unwrap();
        let VertexKind::Operator {
            builtin, window, ..
        } = &g.vertices[1].kind
        else {
            panic!("an operator")
        };
        assert!(matches!(builtin, Some(Builtin::Aggregate { .. })));
        assert!(window.is_some());
    }
}

#[cfg(test)]
mod limit_tests {
    use super::*;

    fn build(job: &str, source: &str, sink: &str) -> Result<JobGraph, ManifestError> {
        let m = Manifest::parse(&format!(
            "[job]\nname='j'\n{job}\n[params]\nn={{default='7'}}\n[[source]]\nname='s'\n{source}\n\
             [[sink]]\nname='o'\n{sink}\n"
        ))?;
        let params = m.resolve_params(&[])?;
        JobGraph::build(&m, params, None)
    }

    #[test]
    fn generator_settings_are_numbers_or_parameters() {
        for source in [
            "type='generator'\ncount=5\nrate=100\nstart-at-ms=0",
            "type='generator'\ncount='5'\nrate='100'",
            "type='generator'\ncount='${n}'",
        ] {
            let g = build("", source, "type='stdout'").unwrap();
            let VertexKind::Source(SourceConfig::Generator { count, .. }) = &g.vertices[0].kind
            else {
                panic!("{g:?}")
            };
            assert!(matches!(count, Some(5 | 7)), "{source}: {count:?}");
        }
        let e = build("", "type='generator'\ncount=-1", "type='stdout'").unwrap_err();
        assert!(e.to_string().contains("count of `s` is -1"), "{e}");
        let e = build("", "type='generator'\ncount='many'", "type='stdout'").unwrap_err();
        assert!(e.to_string().contains("not a whole number"), "{e}");
    }

    #[test]
    fn max_parallelism_is_bounded_before_any_work_per_subtask() {
        let g = build(
            "max-parallelism=32768\nparallelism=4",
            "type='generator'",
            "type='stdout'",
        )
        .unwrap();
        assert_eq!(g.max_parallelism, 32768);
        for max in ["32769", "4000000000", "0"] {
            let e = build(
                &format!("max-parallelism={max}"),
                "type='generator'",
                "type='stdout'",
            )
            .unwrap_err();
            assert!(e.to_string().contains("between 1 and 32768"), "{e}");
        }
    }

    #[test]
    fn a_job_may_set_its_guest_limits() {
        let g = build(
            "",
            "type='generator'",
            "type='stdout'\n[limits]\ncall-timeout-ms=100\nmax-emit-records=10",
        )
        .unwrap();
        assert_eq!(g.limits.call_timeout_ms, Some(100));
        assert_eq!(g.limits.max_emit_records, Some(10));
        assert_eq!(g.limits.memory_limit_mib, None);
        let e = build(
            "",
            "type='generator'",
            "type='stdout'\n[limits]\nmax-emit-bytes=0",
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("max-emit-bytes must be at least 1"),
            "{e}"
        );
        assert!(
            build("", "type='generator'", "type='stdout'\n[limits]\ncpu=1").is_err(),
            "an unknown limit"
        );
    }

    #[test]
    fn a_file_sink_may_say_it_overwrites() {
        let sink = |mode: &str| {
            build(
                "",
                "type='generator'",
                &format!("type='json-lines-file'\npath='out'\n{mode}"),
            )
        };
        let overwrite = |g: JobGraph| match &g.vertices[1].kind {
            VertexKind::Sink(SinkConfig::JsonLinesFile { overwrite, .. }) => *overwrite,
            other => panic!("{other:?}"),
        };
        assert!(!overwrite(sink("").unwrap()));
        assert!(!overwrite(sink("mode='create'").unwrap()));
        assert!(overwrite(sink("mode='overwrite'").unwrap()));
        let e = sink("mode='append'").unwrap_err();
        assert!(e.to_string().contains("\"append\""), "{e}");
    }
}
