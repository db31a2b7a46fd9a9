//! A retained checkpoint taken in as a savepoint (Flink's restore from a
//! retained checkpoint, `-s <dir>/chk-<n>`): a job's completed checkpoints
//! stay in the checkpoint storage after it ended, and one of them can start
//! a job as a savepoint does — at any parallelism, on either backend, with
//! a new bundle. It is written out as a savepoint first ([`super::write`]:
//! a RocksDB snapshot in the canonical format), into a scratch directory
//! the restore reads and drops. Its metadata's layout names its vertices
//! (a checkpoint of an older version without one: its job, planned again
//! from its bundle, does).

use std::path::{Path, PathBuf};

use weir_model::checkpoint::{CheckpointLayout, CheckpointMetadata};
use weir_model::savepoint::{FORMAT, METADATA, SavepointMetadata};

use crate::error::CoordinatorError;

/// A job's completed checkpoint, where its storage keeps it
/// (`<root>/<job>/chk-<id>`).
#[derive(Debug)]
pub struct Retained {
    /// The checkpoint storage it is in.
    pub root: PathBuf,
    /// Its metadata.
    pub checkpoint: CheckpointMetadata,
}

fn invalid(dir: &Path, why: String) -> CoordinatorError {
    CoordinatorError::unprocessable(
        "savepoint_invalid",
        format!("{} is not a savepoint: {why}", dir.display()),
    )
}

/// The retained checkpoint in `dir`, if that is what it holds (`None`: a
/// savepoint, or nothing this reads — [`super::read`] says what).
pub fn read(dir: &Path) -> Option<Result<Retained, CoordinatorError>> {
    let bytes = std::fs::read(dir.join(METADATA)).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    if value.get("format").and_then(|f| f.as_str()) == Some(FORMAT) {
        return None;
    }
    let checkpoint: CheckpointMetadata = serde_json::from_value(value).ok()?;
    let (Some(name), Some(job)) = (
        dir.file_name().and_then(|n| n.to_str()),
        dir.parent()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str()),
    ) else {
        return Some(Err(invalid(dir, "no checkpoint's directory".into())));
    };
    if name != format!("chk-{}", checkpoint.id) || job != checkpoint.job {
        return Some(Err(invalid(
            dir,
            format!(
                "its {METADATA} is checkpoint {} of job `{}`, which a checkpoint storage keeps in `{}/chk-{}` (a retained checkpoint is restored from where its job's storage keeps it: the files it refers to are named from there)",
                checkpoint.id, checkpoint.job, checkpoint.job, checkpoint.id
            ),
        )));
    }
    let root = dir.parent()?.parent()?.to_owned();
    Some(Ok(Retained { root, checkpoint }))
}

/// Whether a job starting from `retained` may take its sinks' output
/// over (as from a savepoint that stopped its job): the job that took it
/// has ended (`ended`, not finished: a finished job committed everything
/// after its last checkpoint), and no checkpoint of it completed after it
/// (else output was committed after it) — as the coordinator's own
/// checkpoint storage (`own`) knows it: a copy of a job's checkpoints
/// elsewhere may lack its newer ones, and never hands output over.
pub async fn ends_its_job(
    retained: &Retained,
    ended: bool,
    own: &Path,
) -> Result<bool, CoordinatorError> {
    let same = |p: &Path| std::fs::canonicalize(p).ok();
    if !ended || same(&retained.root).is_none() || same(&retained.root) != same(own) {
        return Ok(false);
    }
    let c = &retained.checkpoint;
    let unreadable = |e: anyhow::Error| {
        CoordinatorError::internal(format!(
            "reading the checkpoints of job `{}` in {}: {e:#}",
            c.job,
            retained.root.display()
        ))
    };
    let store = weir_model::storage::open(
        &weir_model::storage::file_url(&retained.root).map_err(unreadable)?,
    )
    .map_err(unreadable)?;
    let stored = crate::checkpoint::completed::read_back(store.as_ref(), &c.job, usize::MAX)
        .await
        .map_err(unreadable)?;
    let latest = stored.completed.iter().map(|s| s.id).max();
    Ok(latest == Some(c.id) && stored.unreadable.iter().all(|(id, _)| *id < c.id))
}

/// The prefix of the scratch directories ([`as_savepoint`]).
const SCRATCH: &str = ".from-checkpoint-";

/// Remove the scratch directories a stopped coordinator left under
/// `under` (it stopped while a job started from a retained checkpoint).
pub fn sweep(under: &Path) {
    let Ok(entries) = std::fs::read_dir(under) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with(SCRATCH) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Write `retained`, its vertices named by `layout`, as a savepoint into a
/// scratch directory under `under`: the directory (gone when dropped) and
/// the savepoint's metadata. `stopped`: whether it ends its job
/// ([`ends_its_job`]).
pub async fn as_savepoint(
    retained: &Retained,
    layout: &CheckpointLayout,
    under: &Path,
    stopped: bool,
) -> Result<(tempfile::TempDir, SavepointMetadata), CoordinatorError> {
    let c = &retained.checkpoint;
    let failed = |e: anyhow::Error| {
        CoordinatorError::unprocessable(
            "checkpoint_unreadable",
            format!(
                "checkpoint {} of job `{}` cannot be restored: {e:#}",
                c.id, c.job
            ),
        )
    };
    std::fs::create_dir_all(under).map_err(|e| failed(e.into()))?;
    let scratch = tempfile::Builder::new()
        .prefix(SCRATCH)
        .tempdir_in(under)
        .map_err(|e| failed(e.into()))?;
    let store =
        weir_model::storage::open(&weir_model::storage::file_url(&retained.root).map_err(failed)?)
            .map_err(failed)?;
    let metadata = super::write(store.as_ref(), c, layout, scratch.path(), stopped)
        .await
        .map_err(failed)?;
    Ok((scratch, metadata))
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_model::{CheckpointKind, CheckpointMode};

    fn checkpoint(job: &str, id: u64) -> Vec<u8> {
        serde_json::to_vec(&CheckpointMetadata {
            job: job.into(),
            id,
            kind: CheckpointKind::Checkpoint,
            mode: CheckpointMode::ExactlyOnce,
            attempt: 0,
            triggered_at_ms: 0,
            completed_at_ms: 0,
            subtasks: Vec::new(),
            predecessor: None,
            layout: None,
        })
        .unwrap()
    }

    #[tokio::test]
    async fn only_the_latest_checkpoint_of_an_ended_job_in_the_own_storage_ends_it() {
        let tmp = tempfile::tempdir().unwrap();
        let storage = tmp.path().join("checkpoints");
        let copy = tmp.path().join("copy");
        for root in [&storage, &copy] {
            for id in [5, 7] {
                let at = root.join(format!("j1/chk-{id}"));
                std::fs::create_dir_all(&at).unwrap();
                std::fs::write(at.join(METADATA), checkpoint("j1", id)).unwrap();
            }
        }
        // The copy lacks the newest.
        std::fs::remove_dir_all(copy.join("j1/chk-7")).unwrap();
        let at = |root: &Path, id| read(&root.join(format!("j1/chk-{id}"))).unwrap().unwrap();
        assert!(
            ends_its_job(&at(&storage, 7), true, &storage)
                .await
                .unwrap()
        );
        assert!(
            !ends_its_job(&at(&storage, 7), false, &storage)
                .await
                .unwrap()
        );
        assert!(
            !ends_its_job(&at(&storage, 5), true, &storage)
                .await
                .unwrap()
        );
        assert!(!ends_its_job(&at(&copy, 5), true, &storage).await.unwrap());
        // A newer checkpoint whose metadata cannot be read may have
        // committed output.
        let corrupt = storage.join("j1/chk-9");
        std::fs::create_dir_all(&corrupt).unwrap();
        std::fs::write(corrupt.join(METADATA), b"{").unwrap();
        assert!(
            !ends_its_job(&at(&storage, 7), true, &storage)
                .await
                .unwrap()
        );
    }

    #[test]
    fn a_checkpoint_is_read_where_its_storage_keeps_it_only() {
        let tmp = tempfile::tempdir().unwrap();
        let at = tmp.path().join("storage/j1/chk-7");
        std::fs::create_dir_all(&at).unwrap();
        std::fs::write(at.join(METADATA), checkpoint("j1", 7)).unwrap();
        let found = read(&at).unwrap().unwrap();
        assert_eq!(found.root, tmp.path().join("storage"));
        assert_eq!(
            (found.checkpoint.job.as_str(), found.checkpoint.id),
            ("j1", 7)
        );

        let elsewhere = tmp.path().join("copy");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(elsewhere.join(METADATA), checkpoint("j1", 7)).unwrap();
        let e = read(&elsewhere).unwrap().unwrap_err();
        assert_eq!(e.code, "savepoint_invalid");
        assert!(e.message.contains("keeps in `j1/chk-7`"), "{}", e.message);

        // A savepoint, or anything else, is not this module's to read.
        std::fs::write(
            elsewhere.join(METADATA),
            format!(r#"{{"format": "{FORMAT}"}}"#),
        )
        .unwrap();
        assert!(read(&elsewhere).is_none());
        std::fs::write(elsewhere.join(METADATA), b"{}").unwrap();
        assert!(read(&elsewhere).is_none());
        assert!(read(&tmp.path().join("nothing")).is_none());
    }

    fn layout() -> CheckpointLayout {
        CheckpointLayout {
            job_name: "wc".into(),
            max_parallelism: 128,
            codec: Default::default(),
            vertices: vec![weir_model::checkpoint::LayoutVertex {
                name: "count".into(),
                role: "operator".into(),
                parallelism: 1,
                sink_target: None,
                window: None,
                window_contents: None,
                keys: None,
            }],
        }
    }

    /// Checkpoint 7 of job `j1` in `storage`, its operator's subtask 0
    /// holding the memory backend's files at `paths` (size 9 each).
    fn with_files(storage: &Path, paths: &[&str]) -> Retained {
        use weir_model::checkpoint::{
            OperatorStateHandle, StateFile, SubtaskState, TaskStateHandle,
        };
        let mut metadata: CheckpointMetadata =
            serde_json::from_slice(&checkpoint("j1", 7)).unwrap();
        metadata.layout = Some(layout());
        metadata.subtasks = vec![SubtaskState {
            task: 0,
            subtask: 0,
            state: TaskStateHandle {
                operators: paths
                    .iter()
                    .map(|p| OperatorStateHandle {
                        vertex: 0,
                        format: "full".into(),
                        files: vec![StateFile {
                            name: "state.bin".into(),
                            path: (*p).into(),
                            size: 9,
                            shared: false,
                            sha256: String::new(),
                        }],
                    })
                    .collect(),
                ..Default::default()
            },
        }];
        let at = storage.join("j1/chk-7");
        std::fs::create_dir_all(&at).unwrap();
        std::fs::write(at.join(METADATA), serde_json::to_vec(&metadata).unwrap()).unwrap();
        read(&at).unwrap().unwrap()
    }

    fn file(storage: &Path, path: &str, bytes: &[u8]) {
        let at = storage.join(path);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::write(at, bytes).unwrap();
    }

    /// A retained checkpoint's metadata is the user's file: one naming a
    /// file of another job (here, its neighbour's state) is refused before
    /// anything is read.
    #[tokio::test]
    async fn a_checkpoint_naming_files_outside_its_job_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let storage = tmp.path().join("storage");
        file(&storage, "j2/chk-1/0-0-a0/state.bin", b"not yours");
        let retained = with_files(&storage, &["j2/chk-1/0-0-a0/state.bin"]);
        let e = as_savepoint(&retained, &layout(), &tmp.path().join("scratch"), false)
            .await
            .unwrap_err();
        assert_eq!(e.code, "checkpoint_unreadable");
        assert!(
            e.message.contains("outside its job's part"),
            "{}",
            e.message
        );
    }

    /// A job's first checkpoint, imported from a savepoint taken at another
    /// parallelism, holds several files for one subtask: written out as a
    /// savepoint, each keeps its own file.
    #[tokio::test]
    async fn several_files_of_one_subtask_each_keep_their_own() {
        let tmp = tempfile::tempdir().unwrap();
        let storage = tmp.path().join("storage");
        let paths = [
            "j1/chk-7/savepoint/state/a.bin",
            "j1/chk-7/savepoint/state/b.bin",
        ];
        file(&storage, paths[0], b"first 123");
        file(&storage, paths[1], b"second 45");
        let retained = with_files(&storage, &paths);
        let (scratch, metadata) =
            as_savepoint(&retained, &layout(), &tmp.path().join("scratch"), false)
                .await
                .unwrap();
        let refs = &metadata.vertices[0].state;
        assert_eq!(refs.len(), 2);
        assert_ne!(refs[0].file, refs[1].file);
        let mut copied: Vec<Vec<u8>> = refs
            .iter()
            .map(|r| std::fs::read(scratch.path().join(&r.file)).unwrap())
            .collect();
        copied.sort();
        assert_eq!(copied, [b"first 123".to_vec(), b"second 45".to_vec()]);
        // What a restore reads back.
        let bytes = std::fs::read(scratch.path().join(METADATA)).unwrap();
        assert!(SavepointMetadata::parse(&bytes).is_ok());
    }
}
