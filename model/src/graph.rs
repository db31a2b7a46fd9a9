//! The JobGraph: a manifest with its parameters applied, as vertices and
//! edges, and the tasks that operator chaining makes of them.
//!
//! Chaining (Flink's): a vertex joins the task of its input when it has one
//! input, the edge is `Forward` and both have the same parallelism. A task is
//! then a tree of vertices run in one thread per subtask, records passing
//! between them as function calls, not messages.

use std::collections::BTreeMap;

use crate::keygroup::DEFAULT_MAX_PARALLELISM;
use crate::manifest::{KeyBy, Manifest, ManifestError, SinkKind, SourceKind, substitute};

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
        /// How its input is keyed, for keyed operators.
        key_by: Option<KeyBy>,
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
    },
    /// Generated records.
    Generator {
        /// Records in all; `None` is unbounded.
        count: Option<u64>,
        /// What to generate.
        pattern: GeneratorPattern,
        /// Records per second per subtask, when limited.
        rate: Option<u64>,
    },
}

/// What a generator source emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum GeneratorPattern {
    /// `{"seq": n}` for n = 0, 1, 2, …
    Sequence,
    /// Lines of 8 words from a fixed vocabulary of 1,000, as JSON strings.
    Words,
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
    },
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

fn number(what: &str, raw: &str) -> Result<u64, ManifestError> {
    raw.trim()
        .parse()
        .map_err(|_| ManifestError::BadParam(format!("{what} = {raw:?} is not a whole number")))
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
        if max_parallelism == 0 {
            return Err(invalid("max-parallelism must be at least 1".into()));
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
            });
            Ok(id)
        };

        for s in &manifest.sources {
            let config = match &s.kind {
                SourceKind::TextFile { path } => SourceConfig::TextFile {
                    path: substitute(path, &params)?,
                },
                SourceKind::JsonLinesFile { path } => SourceConfig::JsonLinesFile {
                    path: substitute(path, &params)?,
                },
                SourceKind::Generator {
                    count,
                    pattern,
                    rate,
                } => {
                    let count = count
                        .as_deref()
                        .map(|c| number("count", &substitute(c, &params)?))
                        .transpose()?;
                    let rate = rate
                        .as_deref()
                        .map(|r| number("rate", &substitute(r, &params)?))
                        .transpose()?;
                    let pattern = match pattern
                        .as_deref()
                        .map(|p| substitute(p, &params))
                        .transpose()?
                        .as_deref()
                    {
                        None | Some("sequence") => GeneratorPattern::Sequence,
                        Some("words") => GeneratorPattern::Words,
                        Some(other) => {
                            return Err(invalid(format!(
                                "generator `{}`: pattern {other:?} is not \"sequence\" or \"words\"",
                                s.name
                            )));
                        }
                    };
                    SourceConfig::Generator {
                        count,
                        pattern,
                        rate,
                    }
                }
            };
            let p = check(&s.name, s.parallelism.unwrap_or(default_parallelism))?;
            add(&mut vertices, &s.name, VertexKind::Source(config), p)?;
        }

        let single_source = (manifest.sources.len() == 1).then_some(0);
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
            let (from, side) = match &o.input {
                Some(input) => lookup(&vertices, input, &o.name)?,
                None => (
                    previous.ok_or_else(|| {
                        invalid(format!(
                            "operator `{}` must name its `input`: the job has several sources",
                            o.name
                        ))
                    })?,
                    None,
                ),
            };
            let key_by = o.key_by.as_deref().map(str::parse::<KeyBy>).transpose()?;
            let p = check(&o.name, o.parallelism.unwrap_or(default_parallelism))?;
            let partitioning = match &key_by {
                Some(k) => Partitioning::Hash(k.clone()),
                None if vertices[from].parallelism == p => Partitioning::Forward,
                None => Partitioning::Rebalance,
            };
            let id = add(
                &mut vertices,
                &o.name,
                VertexKind::Operator {
                    function: o.function.clone(),
                    key_by,
                },
                p,
            )?;
            edges.push(Edge {
                from,
                side_output: side,
                to: id,
                partitioning,
            });
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
                SinkKind::JsonLinesFile { path } => SinkConfig::JsonLinesFile {
                    path: substitute(path, &params)?,
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

        Ok(JobGraph {
            name: manifest.job.name.clone(),
            max_parallelism,
            vertices,
            edges,
            params,
        })
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
    /// Its name.
    pub name: String,
    /// Whether it needs a keyed input (a keyed process).
    pub keyed: bool,
}

impl JobGraph {
    /// Check every operator vertex against what the component exports: the
    /// function exists, and keyed operators have a `key-by`.
    pub fn check_operators(&self, exported: &[ExportedOperator]) -> Result<(), ManifestError> {
        for v in &self.vertices {
            let VertexKind::Operator { function, key_by } = &v.kind else {
                continue;
            };
            let Some(op) = exported.iter().find(|o| &o.name == function) else {
                let names: Vec<&str> = exported.iter().map(|o| o.name.as_str()).collect();
                return Err(invalid(format!(
                    "operator `{}` uses function `{function}`, which the component does not export (it exports: {})",
                    v.name,
                    if names.is_empty() {
                        "nothing".to_owned()
                    } else {
                        names.join(", ")
                    }
                )));
            };
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
