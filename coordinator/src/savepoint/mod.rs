//! Savepoints, the coordinator's half: a completed savepoint written out
//! as a self-contained directory ([`write`]), and a savepoint taken back
//! in to start a job ([`plan_restore`], [`import`]) — with the same or
//! another parallelism, backend or bundle.
//!
//! A savepoint is taken as a checkpoint whose barrier says `savepoint`:
//! every operator snapshots its keyed state in the canonical format, so
//! the files the workers upload are already portable; [`write`] copies them
//! out of the checkpoint storage into the savepoint's directory, with a
//! `_metadata` that names every vertex ([`weir_model::savepoint`]).
//!
//! Starting a job from one, the savepoint's files are copied into the new
//! job's checkpoint storage (the job then owns them, as any checkpoint of
//! its own, and the savepoint stays the user's) and the savepoint becomes
//! the new job's first checkpoint, shaped for the new job's graph: each
//! subtask of a keyed operator gets the files of the savepoint's subtasks
//! whose key groups overlap its own (it keeps only its groups), each source
//! subtask every split's position (its connector picks its splits), and
//! each sink subtask the pre-commits of the savepoint's subtasks `j` with
//! `j % parallelism == subtask`.
//!
//! A retained checkpoint starts a job the same way, once written out as a
//! savepoint ([`retained`]).

pub mod declared;
pub mod retained;
pub mod triggers;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use weir_model::JobGraph;
use weir_model::checkpoint::{
    CheckpointLayout, CheckpointMetadata, LayoutVertex, OperatorStateHandle, StateFile,
    SubtaskState, TaskStateHandle,
};
use weir_model::graph::VertexKind;
use weir_model::keygroup::key_groups_of;
use weir_model::savepoint::{
    FORMAT, METADATA, SavepointMetadata, SavepointVertex, SinkPreCommit, StateFileRef, VERSION,
    state_file_name,
};
use weir_model::storage::transfer::{Written, copy, put_file};
use weir_model::{CheckpointKind, CheckpointMode};

use crate::error::CoordinatorError;

/// A window operator's windows as text: what a job restored from its
/// state must keep.
fn window_text(kind: &VertexKind) -> Option<String> {
    use weir_model::graph::{TimeCharacteristic, WindowAssigner};
    let VertexKind::Operator {
        window: Some(w), ..
    } = kind
    else {
        return None;
    };
    let assigner = match w.assigner {
        WindowAssigner::Tumbling { size_ms } => format!("tumbling, size-ms = {size_ms}"),
        WindowAssigner::Sliding { size_ms, slide_ms } => {
            format!("sliding, size-ms = {size_ms}, slide-ms = {slide_ms}")
        }
        WindowAssigner::Session { gap_ms } => format!("session, gap-ms = {gap_ms}"),
    };
    let time = match w.time {
        TimeCharacteristic::Event => "event time",
        TimeCharacteristic::Processing => "processing time",
    };
    Some(format!(
        "{assigner}, {time}, allowed-lateness-ms = {}",
        w.allowed_lateness_ms
    ))
}

/// What a window operator's windows keep, as text, when it is known: a
/// job restored from its state must keep the same (an aggregate's
/// accumulators are not a built-in's, nor the records a process-window
/// function is given).
fn window_contents(kind: &VertexKind) -> Option<String> {
    use weir_model::builtin::Builtin;
    use weir_model::graph::WindowContents;
    let VertexKind::Operator {
        window: Some(w),
        builtin,
        ..
    } = kind
    else {
        return None;
    };
    match (builtin, w.keeps) {
        (Some(Builtin::Aggregate { function, .. }), _) => Some(format!(
            "the accumulators of the built-in `{}`",
            function.name()
        )),
        (Some(_), _) | (None, None) => None,
        (None, Some(WindowContents::Accumulator)) => {
            Some("an aggregate function's accumulators".to_owned())
        }
        (None, Some(WindowContents::Records)) => {
            Some("the records of a process-window function".to_owned())
        }
    }
}

/// How each vertex's keys are encoded, as text, for the keyed ones whose
/// keys the runtime extracts (`key-by` a pointer or the value): the
/// codec of what they read (a key is MessagePack on a stream of rows or
/// MessagePack, JSON text on a JSON one). A restored job whose keys are
/// encoded otherwise would find none of its state.
fn key_encodings(graph: &JobGraph) -> Vec<Option<String>> {
    use weir_model::KeyBy;
    use weir_model::builtin::Builtin;
    use weir_model::codec::{Codec, StreamCodecs};
    let codecs = StreamCodecs::of_job(graph);
    graph
        .vertices
        .iter()
        .map(|v| match &v.kind {
            // A `select` keeps no keyed state.
            VertexKind::Operator {
                builtin: Some(Builtin::Select { .. }),
                ..
            } => None,
            VertexKind::Operator {
                key_by: Some(KeyBy::Pointer(_) | KeyBy::Value),
                ..
            } => Some(
                match codecs.input_format(graph, v.id).codec {
                    Codec::Json => "JSON text",
                    Codec::Msgpack | Codec::Row => "MessagePack",
                }
                .to_owned(),
            ),
            _ => None,
        })
        .collect()
}

/// What a sink writes to: its connector, and its files.
fn sink_target(kind: &VertexKind) -> Option<String> {
    let VertexKind::Sink(config) = kind else {
        return None;
    };
    let c = config.connector();
    Some(
        format!("{} {}", c.type_name(), c.files().join(" "))
            .trim()
            .to_owned(),
    )
}

fn role(kind: &VertexKind) -> &'static str {
    match kind {
        VertexKind::Source(_) => "source",
        VertexKind::Sink(_) => "sink",
        _ => "operator",
    }
}

/// What `graph`'s vertex ids stand for, as its checkpoints keep it.
pub fn layout(graph: &JobGraph) -> CheckpointLayout {
    let keys = key_encodings(graph);
    CheckpointLayout {
        job_name: graph.name.clone(),
        max_parallelism: graph.max_parallelism,
        codec: graph.codec,
        vertices: graph
            .vertices
            .iter()
            .map(|v| LayoutVertex {
                name: v.name.clone(),
                role: role(&v.kind).into(),
                parallelism: v.parallelism,
                sink_target: sink_target(&v.kind),
                window: window_text(&v.kind),
                window_contents: window_contents(&v.kind),
                keys: keys[v.id].clone(),
            })
            .collect(),
    }
}

/// Write the completed savepoint (or retained checkpoint) `checkpoint`,
/// whose vertices `layout` names and whose files are in `storage`, into
/// the directory `dir` (made if needed; `_metadata` last, so a directory
/// without it is no savepoint): its metadata.
pub async fn write(
    storage: &dyn ObjectStore,
    checkpoint: &CheckpointMetadata,
    layout: &CheckpointLayout,
    dir: &Path,
    stopped: bool,
) -> anyhow::Result<SavepointMetadata> {
    checkpoint
        .check_against(layout)
        .map_err(|e| anyhow::anyhow!("checkpoint {}: {e}", checkpoint.id))?;
    if let Some(s) = checkpoint
        .subtasks
        .iter()
        .find(|s| s.state.inflight.is_some())
    {
        anyhow::bail!(
            "checkpoint {} was taken unaligned: task {} [{}] stored what its barriers overtook ({} bytes of records, and watermarks), which only a restore of the same job at the same parallelism replays (take a savepoint, or pick an aligned checkpoint)",
            checkpoint.id,
            s.task,
            s.subtask,
            s.state.inflight_bytes
        );
    }
    let target = weir_model::storage::open(&weir_model::storage::file_url(dir)?)?;
    let mut vertices = Vec::new();
    for (id, v) in layout.vertices.iter().enumerate() {
        let mut out = SavepointVertex {
            name: v.name.clone(),
            role: v.role.clone(),
            parallelism: v.parallelism,
            positions: Vec::new(),
            sinks: Vec::new(),
            state: Vec::new(),
            sink_target: v.sink_target.clone(),
            window: v.window.clone(),
            window_contents: v.window_contents.clone(),
            keys: v.keys.clone(),
        };
        let mut splits = std::collections::BTreeSet::new();
        // A job's first checkpoint, imported from a savepoint at another
        // parallelism, holds several files for a subtask (one per old
        // subtask its key groups came from): each keeps a name of its own.
        let mut files_of = BTreeMap::<u32, usize>::new();
        for s in &checkpoint.subtasks {
            for (_, positions) in s.state.sources.iter().filter(|(vertex, _)| *vertex == id) {
                for p in positions {
                    if splits.insert(p.split.clone()) {
                        out.positions.push(p.clone());
                    }
                }
            }
            for (_, handle) in s.state.sinks.iter().filter(|(vertex, _)| *vertex == id) {
                out.sinks.push(SinkPreCommit {
                    subtask: s.subtask,
                    handle: handle.clone(),
                });
            }
            for o in s.state.operators.iter().filter(|o| o.vertex == id) {
                let nth = files_of.entry(s.subtask).or_default();
                let file = match *nth {
                    0 => state_file_name(&v.name, s.subtask),
                    n => {
                        let name = state_file_name(&v.name, s.subtask);
                        format!("{}.{n}.bin", name.trim_end_matches(".bin"))
                    }
                };
                *nth += 1;
                let written = copy_canonical(
                    storage,
                    o,
                    layout.max_parallelism,
                    target.as_ref(),
                    &ObjectPath::from(file.as_str()),
                )
                .await
                .map_err(|e| anyhow::anyhow!("operator `{}` [{}]: {e:#}", v.name, s.subtask))?;
                let (size, sha256) = (written.size, written.sha256);
                out.state.push(StateFileRef {
                    subtask: s.subtask,
                    file,
                    size,
                    sha256,
                });
            }
        }
        out.sinks.sort_by_key(|s| s.subtask);
        out.state.sort_by_key(|s| s.subtask);
        vertices.push(out);
    }
    let metadata = SavepointMetadata {
        format: FORMAT.into(),
        version: VERSION,
        job: checkpoint.job.clone(),
        job_name: layout.job_name.clone(),
        checkpoint: checkpoint.id,
        taken_at_ms: checkpoint.triggered_at_ms,
        max_parallelism: layout.max_parallelism,
        stopped,
        state_codec: Some(layout.codec),
        vertices,
    };
    target
        .put(
            &ObjectPath::from(METADATA),
            PutPayload::from(serde_json::to_vec_pretty(&metadata)?),
        )
        .await
        .map_err(|e| anyhow::anyhow!("writing {METADATA} in {}: {e}", dir.display()))?;
    Ok(metadata)
}

/// Copy the state of one operator subtask (`handle`) in the canonical
/// format to `to` in `target`: a savepoint's file as it is (checked
/// against its sha256), any other snapshot (a retained RocksDB
/// checkpoint's) written out first. A chunk at a time.
async fn copy_canonical(
    storage: &dyn ObjectStore,
    handle: &OperatorStateHandle,
    max_parallelism: u32,
    target: &dyn ObjectStore,
    to: &ObjectPath,
) -> anyhow::Result<Written> {
    if let ("full", [f]) = (handle.format.as_str(), &handle.files[..]) {
        let written = copy(storage, &ObjectPath::from(f.path.as_str()), target, to).await?;
        f.verify(written.size, &written.sha256)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        return Ok(written);
    }
    let exported = crate::checkpoint::export::canonical(storage, handle, max_parallelism).await?;
    put_file(target, to, &exported.file).await
}

/// What a savepoint of `graph` would hold, its files and positions aside
/// (a placeholder for each): what [`plan_restore`] checks a rescale or an
/// upgrade against before the job is stopped for it.
pub fn expected(graph: &JobGraph) -> SavepointMetadata {
    let keys = key_encodings(graph);
    let vertices = graph
        .vertices
        .iter()
        .map(|v| {
            let keyed = matches!(
                &v.kind,
                VertexKind::Operator {
                    key_by: Some(_),
                    ..
                }
            );
            SavepointVertex {
                name: v.name.clone(),
                role: role(&v.kind).into(),
                parallelism: v.parallelism,
                positions: match &v.kind {
                    VertexKind::Source(_) => vec![weir_model::checkpoint::SplitPosition {
                        split: String::new(),
                        offset: 0,
                        range: None,
                    }],
                    _ => Vec::new(),
                },
                sinks: match &v.kind {
                    VertexKind::Sink(_) => vec![SinkPreCommit {
                        subtask: 0,
                        handle: Vec::new(),
                    }],
                    _ => Vec::new(),
                },
                state: if keyed {
                    vec![StateFileRef {
                        subtask: 0,
                        file: state_file_name(&v.name, 0),
                        size: 0,
                        sha256: String::new(),
                    }]
                } else {
                    Vec::new()
                },
                sink_target: sink_target(&v.kind),
                window: window_text(&v.kind),
                window_contents: window_contents(&v.kind),
                keys: keys[v.id].clone(),
            }
        })
        .collect();
    SavepointMetadata {
        format: FORMAT.into(),
        version: VERSION,
        job: String::new(),
        job_name: graph.name.clone(),
        checkpoint: 0,
        taken_at_ms: 0,
        max_parallelism: graph.max_parallelism,
        stopped: true,
        state_codec: Some(graph.codec),
        vertices,
    }
}

/// Read the savepoint in `dir`: a 4xx naming the path when it is none.
pub fn read(dir: &Path) -> Result<SavepointMetadata, CoordinatorError> {
    let not = |why: String| {
        CoordinatorError::unprocessable(
            "savepoint_invalid",
            format!("{} is not a savepoint: {why}", dir.display()),
        )
    };
    if !dir.is_dir() {
        return Err(not("no such directory".into()));
    }
    let bytes = std::fs::read(dir.join(METADATA))
        .map_err(|e| not(format!("cannot read its {METADATA}: {e}")))?;
    let metadata = SavepointMetadata::parse(&bytes).map_err(not)?;
    for f in metadata.files() {
        let size = std::fs::metadata(dir.join(&f.file)).map(|m| m.len());
        if size.as_ref().ok() != Some(&f.size) {
            return Err(not(format!(
                "its state file {} is missing or has another size than its {METADATA} says",
                f.file
            )));
        }
    }
    Ok(metadata)
}

/// How a job starts from a savepoint: the savepoint shaped as its first
/// checkpoint, and the files to copy (savepoint-relative, storage path).
#[derive(Debug)]
pub struct RestorePlan {
    /// The checkpoint the job starts from.
    pub checkpoint: CheckpointMetadata,
    /// Each state file: where it is in the savepoint, where it goes in the
    /// checkpoint storage, and its sha256.
    pub copies: Vec<(String, String, String)>,
}

fn incompatible(message: String) -> CoordinatorError {
    CoordinatorError::unprocessable("savepoint_incompatible", message)
}

/// Shape `savepoint` as checkpoint `id` of job `job` (`graph`), its first:
/// see the module's documentation. A 4xx names what does not fit: another
/// max parallelism or state codec, state no vertex claims (unless
/// `allow_non_restored`: then it is dropped), a vertex whose role changed,
/// a window operator whose windows changed.
pub fn plan_restore(
    savepoint: &SavepointMetadata,
    graph: &JobGraph,
    job: &str,
    id: u64,
    allow_non_restored: bool,
) -> Result<RestorePlan, CoordinatorError> {
    if savepoint.max_parallelism != graph.max_parallelism {
        return Err(incompatible(format!(
            "the savepoint was taken with a max parallelism of {}; this job's is {}. A job's max parallelism stays the same for its whole life (its keys' groups depend on it): set `max-parallelism = {}` in the manifest",
            savepoint.max_parallelism, graph.max_parallelism, savepoint.max_parallelism
        )));
    }
    if let Some(codec) = savepoint.state_codec
        && codec != graph.codec
        && savepoint.files().next().is_some()
    {
        return Err(incompatible(format!(
            "the savepoint's state values are in {codec:?}; this job keeps state in {:?} (`[job] codec`): keep the savepoint's codec",
            graph.codec
        )));
    }
    let mut by_name: BTreeMap<&str, SavepointVertex> = savepoint
        .vertices
        .iter()
        .map(|v| (v.name.as_str(), v.clone()))
        .collect();
    let keys = key_encodings(graph);
    let mut unclaimed = Vec::new();
    for v in savepoint.vertices.iter().filter(|v| v.holds_state()) {
        match graph.vertices.iter().find(|g| g.name == v.name) {
            None => unclaimed.push(format!("`{}` ({})", v.name, v.role)),
            Some(g)
                if !v.sinks.is_empty()
                    && v.sink_target.is_some()
                    && sink_target(&g.kind).is_some()
                    && sink_target(&g.kind) != v.sink_target =>
            {
                // Its pending output is where the old sink wrote: the new
                // one, writing elsewhere, cannot commit it.
                unclaimed.push(format!(
                    "`{}` (a sink that wrote to {}, now to {})",
                    v.name,
                    v.sink_target.as_deref().unwrap_or_default(),
                    sink_target(&g.kind).unwrap_or_default()
                ));
                if let Some(old) = by_name.get_mut(v.name.as_str()) {
                    old.sinks.clear();
                }
            }
            Some(g) if role(&g.kind) != v.role => {
                return Err(incompatible(format!(
                    "`{}` was a {} in the savepoint and is a {} in this job: its state cannot be restored into it (give one of them another name)",
                    v.name,
                    v.role,
                    role(&g.kind)
                )));
            }
            Some(g) if v.window.is_some() && window_text(&g.kind) != v.window => {
                // Its stored windows and their timers are for the old ones.
                return Err(incompatible(format!(
                    "`{}` kept windows ({}) in the savepoint and has {} in this job: its open windows and their timers cannot be carried over (keep its windows, or give it another name to start it empty)",
                    v.name,
                    v.window.as_deref().unwrap_or_default(),
                    window_text(&g.kind)
                        .map_or_else(|| "none".to_owned(), |w| format!("other windows ({w})"))
                )));
            }
            Some(g)
                if v.window_contents.is_some()
                    && window_contents(&g.kind)
                        .is_some_and(|c| Some(&c) != v.window_contents.as_ref()) =>
            {
                // Its stored windows hold what the old function kept.
                return Err(incompatible(format!(
                    "`{}` kept {} in its windows in the savepoint and keeps {} in this job: its open windows cannot be carried over (keep its window function's kind, or give it another name to start it empty)",
                    v.name,
                    v.window_contents.as_deref().unwrap_or_default(),
                    window_contents(&g.kind).unwrap_or_default()
                )));
            }
            Some(g)
                if v.keys.is_some()
                    && !v.state.is_empty()
                    && keys[g.id]
                        .as_ref()
                        .is_some_and(|k| Some(k) != v.keys.as_ref()) =>
            {
                // Its state is stored under keys encoded the old way.
                return Err(incompatible(format!(
                    "`{}` kept its keyed state under keys encoded as {} in the savepoint, and this job encodes its keys as {} (what it reads changed codec: a typed upstream, the job's `codec`): none of its state would be found (keep what it reads as it was, or give it another name to start it empty)",
                    v.name,
                    v.keys.as_deref().unwrap_or_default(),
                    keys[g.id].as_deref().unwrap_or_default()
                )));
            }
            Some(_) => {}
        }
    }
    if !unclaimed.is_empty() && !allow_non_restored {
        return Err(incompatible(format!(
            "the savepoint holds state of {} that no vertex of this job claims (state is matched by name): rename the vertex back, or allow non-restored state (`--allow-non-restored-state`) to drop it",
            unclaimed.join(", ")
        )));
    }
    let base = format!("{job}/chk-{id}/savepoint");
    let mut copies = Vec::new();
    let mut subtasks = Vec::new();
    for t in &graph.tasks() {
        for s in 0..t.parallelism {
            let mut state = TaskStateHandle::default();
            for &vid in &t.vertices {
                let v = &graph.vertices[vid];
                let Some(old) = by_name.get(v.name.as_str()) else {
                    continue;
                };
                if !old.positions.is_empty() {
                    state.sources.push((vid, old.positions.clone()));
                }
                for pc in old
                    .sinks
                    .iter()
                    .filter(|pc| pc.subtask % v.parallelism.max(1) == s)
                {
                    state.sinks.push((vid, pc.handle.clone()));
                }
                let mine = key_groups_of(s, graph.max_parallelism, v.parallelism);
                for f in &old.state {
                    let theirs = key_groups_of(f.subtask, graph.max_parallelism, old.parallelism);
                    if theirs.start >= mine.end || mine.start >= theirs.end {
                        continue;
                    }
                    let path = format!("{base}/{}", f.file);
                    if !copies.iter().any(|(_, p, _)| p == &path) {
                        copies.push((f.file.clone(), path.clone(), f.sha256.clone()));
                    }
                    state.operators.push(OperatorStateHandle {
                        vertex: vid,
                        format: "full".into(),
                        files: vec![StateFile {
                            name: weir_model::savepoint::STATE_FILE.into(),
                            path,
                            size: f.size,
                            shared: false,
                            sha256: f.sha256.clone(),
                        }],
                    });
                    state.state_bytes += f.size;
                }
            }
            subtasks.push(SubtaskState {
                task: t.id,
                subtask: s,
                state,
            });
        }
    }
    let now = weir_model::now_ms();
    Ok(RestorePlan {
        checkpoint: CheckpointMetadata {
            job: job.to_owned(),
            id,
            kind: CheckpointKind::Savepoint,
            mode: CheckpointMode::ExactlyOnce,
            attempt: 0,
            triggered_at_ms: savepoint.taken_at_ms,
            completed_at_ms: now,
            subtasks,
            predecessor: Some(savepoint.job.clone()),
            layout: Some(layout(graph)),
        },
        copies,
    })
}

/// Copy the savepoint's files (in `dir`) that `plan` names into
/// `storage`, checking each against its sha256, then write the plan's
/// checkpoint's metadata where the job's checkpoints are (a restarted
/// coordinator finds it as the job's first checkpoint).
pub async fn import(
    storage: Arc<dyn ObjectStore>,
    dir: &Path,
    plan: &RestorePlan,
) -> Result<(), CoordinatorError> {
    let unreadable = |why: String| {
        CoordinatorError::unprocessable(
            "savepoint_invalid",
            format!("savepoint {}: {why}", dir.display()),
        )
    };
    for (file, path, sha256) in &plan.copies {
        let at = ObjectPath::from(path.as_str());
        let written = put_file(storage.as_ref(), &at, &dir.join(file))
            .await
            .map_err(|e| unreadable(format!("copying {file}: {e:#}")))?;
        if written.sha256 != *sha256 {
            let _ = storage.delete(&at).await;
            return Err(unreadable(format!(
                "{file} is corrupt (its sha256 is not the one its _metadata recorded)"
            )));
        }
    }
    let c = &plan.checkpoint;
    let bytes =
        serde_json::to_vec_pretty(c).map_err(|e| CoordinatorError::internal(e.to_string()))?;
    storage
        .put(
            &ObjectPath::from(CheckpointMetadata::path(&c.job, c.id).as_str()),
            PutPayload::from(bytes),
        )
        .await
        .map_err(|e| {
            CoordinatorError::internal(format!("writing the checkpoint's metadata: {e}"))
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use weir_model::manifest::Manifest;

    use super::*;

    /// A keyed count of a JSON-lines file, its records typed or not.
    fn counting(schema: &str) -> JobGraph {
        let m = Manifest::parse(&format!(
            "[job]\nname='j'\n[[source]]\nname='s'\ntype='json-lines-file'\npath='x'\n{schema}\n\
             [[operator]]\nname='count'\nbuiltin='count'\nkey-by='/k'\n\
             [[sink]]\nname='o'\ntype='stdout'\n"
        ))
        .unwrap();
        JobGraph::build(&m, BTreeMap::new(), None).unwrap()
    }

    /// A keyed operator's state is stored under its keys' bytes: a job
    /// whose keys are encoded otherwise (its input became typed: rows,
    /// whose keys are MessagePack, where they were JSON text) would find
    /// none of it, and is refused, naming both encodings.
    #[test]
    fn a_restore_whose_keys_are_encoded_otherwise_is_refused() {
        let untyped = counting("");
        let typed = counting("schema='{k: u32}'");
        let count = |g: &JobGraph| g.vertices.iter().position(|v| v.name == "count").unwrap();
        assert_eq!(
            key_encodings(&untyped)[count(&untyped)].as_deref(),
            Some("JSON text")
        );
        assert_eq!(
            key_encodings(&typed)[count(&typed)].as_deref(),
            Some("MessagePack")
        );
        let savepoint = expected(&untyped);
        assert!(plan_restore(&savepoint, &untyped, "j", 1, false).is_ok());
        let e = plan_restore(&savepoint, &typed, "j", 1, false).unwrap_err();
        assert!(
            e.to_string()
                .contains("`count` kept its keyed state under keys encoded as JSON text")
                && e.to_string().contains("encodes its keys as MessagePack"),
            "{e}"
        );
        // A savepoint that says nothing of its keys (taken before they
        // were recorded) is restored as before.
        let mut older = savepoint;
        for v in &mut older.vertices {
            v.keys = None;
        }
        assert!(plan_restore(&older, &typed, "j", 1, false).is_ok());
    }
}
