//! The graph of a manifest: its parameters applied, every setting checked.

use std::collections::BTreeMap;

use super::*;
use crate::builtin::BuiltinTable;
use crate::connectors::Resolve;
use crate::dead_letter::{DEAD_LETTER, ErrorPolicy, OnError};
use crate::fault_tolerance::{checkpoint_config, restart_strategy, state_backend};
use crate::keygroup::{DEFAULT_MAX_PARALLELISM, MAX_MAX_PARALLELISM};
use crate::manifest::{Manifest, ManifestError, Setting, substitute};

fn invalid(msg: String) -> ManifestError {
    ManifestError::Invalid(msg)
}

/// A source's event-time settings, if it has any.
fn event_time(
    s: &crate::manifest::SourceSpec,
    params: &BTreeMap<String, String>,
    own_timestamps: bool,
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
    // A connector whose records carry timestamps (Kafka's) gives them to
    // a source that asks for a watermark strategy without a pointer.
    let has_timestamps = timestamp.is_some()
        || s.timestamp_assigner.is_some()
        || own_timestamps && (s.watermark.is_some() || max_delay.is_some());
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

/// The job's `[dead-letter]` sink, reading the dead-letter output of every
/// vertex that has one; and every dead-letter output read by something.
fn dead_letters(
    manifest: &Manifest,
    params: &BTreeMap<String, String>,
    vertices: &mut Vec<Vertex>,
    edges: &mut Vec<Edge>,
    add: &mut impl FnMut(&mut Vec<Vertex>, &str, VertexKind, u32) -> Result<usize, ManifestError>,
) -> Result<(), ManifestError> {
    let senders: Vec<usize> = vertices
        .iter()
        .filter(|v| v.errors.on_error == OnError::DeadLetter)
        .map(|v| v.id)
        .collect();
    if let Some(table) = &manifest.dead_letter {
        if senders.is_empty() {
            return Err(invalid(format!(
                "the job has a [{DEAD_LETTER}] sink but no source or operator with on-error = \"dead-letter\""
            )));
        }
        let config = table.resolve(&Resolve {
            name: DEAD_LETTER,
            params,
        })?;
        // Dead letters are few: one subtask writes them all.
        let sink = add(vertices, DEAD_LETTER, VertexKind::Sink(config), 1)?;
        for &from in &senders {
            edges.push(Edge {
                from,
                side_output: Some(DEAD_LETTER.to_owned()),
                to: sink,
                partitioning: if vertices[from].parallelism == 1 {
                    Partitioning::Forward
                } else {
                    Partitioning::Rebalance
                },
            });
        }
    }
    for &v in &senders {
        let read = edges
            .iter()
            .any(|e| e.from == v && e.side_output.as_deref() == Some(DEAD_LETTER));
        if !read {
            let name = &vertices[v].name;
            return Err(invalid(format!(
                "`{name}` has on-error = \"dead-letter\" but nothing reads its dead letters: add a [{DEAD_LETTER}] sink (a sink's `type` and keys), or a sink with input = \"{name}:{DEAD_LETTER}\""
            )));
        }
    }
    Ok(())
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
        keeps: None,
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
                output_type: None,
                input_type: None,
                passes_through: false,
                errors: ErrorPolicy::default(),
            });
            Ok(id)
        };
        // A source with a timestamp assigner is read through it.
        let mut read_as: BTreeMap<String, usize> = BTreeMap::new();

        for s in &manifest.sources {
            let resolve = Resolve {
                name: &s.name,
                params: &params,
            };
            let config = s.kind.resolve(&resolve)?;
            let connector = config.connector();
            let output_type = connector
                .record_type(s.schema.as_ref().map(|t| &t.0))
                .map_err(|e| invalid(format!("source `{}`: {e}", s.name)))?;
            let p = match (s.parallelism, connector.max_parallelism()) {
                (Some(p), Some(most)) if p > most => {
                    return Err(invalid(format!(
                        "source `{}`: parallelism is {p}; a {} source is read by at most {most} subtask{}",
                        s.name,
                        connector.type_name(),
                        if most == 1 { "" } else { "s" }
                    )));
                }
                (None, Some(most)) => default_parallelism.min(most),
                (p, _) => p.unwrap_or(default_parallelism),
            };
            let p = check(&s.name, p)?;
            let id = add(&mut vertices, &s.name, VertexKind::Source(config), p)?;
            vertices[id].output_type = output_type;
            vertices[id].errors = ErrorPolicy::resolve(
                &s.name,
                s.on_error,
                s.max_errors_per_minute.as_ref(),
                &params,
            )?;
            let own_timestamps = match &vertices[id].kind {
                VertexKind::Source(c) => c.connector().timestamps(),
                _ => false,
            };
            let event_time = event_time(s, &params, own_timestamps)?;
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
                (VertexKind::Source(_), Some(side))
                    if side != DEAD_LETTER || v.errors.on_error != OnError::DeadLetter =>
                {
                    Err(invalid(format!(
                        "`{who}` reads the side output `{side}` of the source `{name}`; a source's only side output is `{DEAD_LETTER}`, with on-error = \"dead-letter\""
                    )))
                }
                (_, Some(side))
                    if side == DEAD_LETTER && v.errors.on_error != OnError::DeadLetter =>
                {
                    Err(invalid(format!(
                        "`{who}` reads the dead letters of `{name}`, which has no on-error = \"dead-letter\""
                    )))
                }
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
                        ttl_ms: o.ttl_ms,
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
                    ("ttl-ms", o.ttl_ms.is_some()),
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
            let errors = ErrorPolicy::resolve(
                &o.name,
                o.on_error,
                o.max_errors_per_minute.as_ref(),
                &params,
            )?;
            if !errors.fails() {
                let kind = &vertices[id].kind;
                if let VertexKind::Operator {
                    window: Some(_), ..
                } = kind
                {
                    return Err(invalid(format!(
                        "operator `{}`: on-error is for operators that process records one batch at a time; a window operator fails on an error",
                        o.name
                    )));
                }
                if let VertexKind::Operator {
                    builtin: Some(_),
                    key_by: Some(_),
                    ..
                } = kind
                {
                    return Err(invalid(format!(
                        "operator `{}`: on-error is not for a keyed built-in (its state changes record by record); it fails on an error",
                        o.name
                    )));
                }
            }
            vertices[id].errors = errors;
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
            let config = s.kind.resolve(&Resolve {
                name: &s.name,
                params: &params,
            })?;
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

        dead_letters(manifest, &params, &mut vertices, &mut edges, &mut add)?;

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
}
