//! The exactly-once JSON-lines file sink: a directory of part files,
//! written with a two-phase commit (Flink's `FileSink` shape).
//!
//! Each subtask writes its records to a hidden in-progress file
//! (`.part-<subtask>-a<attempt>-<k>.inprogress`). On a checkpoint's barrier
//! it closes the file as the checkpoint's pending part
//! (`.part-<subtask>-<checkpoint>-a<attempt>.pending`, still hidden) and pre-commits
//! every part not committed yet; when a checkpoint completes its parts are
//! renamed into view (`part-<subtask>-<checkpoint>.jsonl`). Renaming is the
//! commit, and doing it again finds the part in view already: commits are
//! idempotent, so a restored checkpoint's parts are committed again safely.
//! On a restore, what the failed attempt wrote after the checkpoint and did
//! not commit (its in-progress files, pending parts of later checkpoints) is
//! removed; a part in view is never removed or rewritten. At the end of a
//! bounded input nothing is committed at once: the subtask's final
//! checkpoint pre-commits the last part, and its completion commits it.
//!
//! Commits are **fenced**: the directory's `.fence` file names the job and
//! the newest attempt that opened a sink there, and every commit checks it
//! under a lock on that file. An attempt that a newer one replaced — a
//! worker cut off from the coordinator, still running — cannot make
//! anything visible: its commit fails and its files stay hidden.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};

use weir_model::Records;

use super::Sink;

/// One subtask's part files.
pub struct PartFileSink {
    dir: PathBuf,
    job: String,
    subtask: u32,
    attempt: u32,
    /// The open in-progress file, if records came since the last
    /// pre-commit.
    current: Option<(BufWriter<File>, PathBuf)>,
    files: u64,
    /// Parts pre-committed and not committed yet: by checkpoint, the
    /// attempt that wrote each.
    uncommitted: std::collections::BTreeMap<u64, u32>,
    /// The newest checkpoint pre-committed (the final part's number follows
    /// it).
    last: u64,
    /// How its input's records are encoded.
    format: weir_model::format::Format,
    /// A batch's lines, built before they are written.
    lines: Vec<u8>,
}

/// What a subtask pre-committed: its parts not committed yet, as
/// (checkpoint, attempt), and the subtask that wrote them.
#[derive(serde::Serialize, serde::Deserialize)]
struct Handle {
    /// The directory the parts are in (`None` in handles of earlier
    /// versions: the sink's own).
    #[serde(default)]
    dir: Option<PathBuf>,
    /// `None` in handles of earlier versions (a bare list of parts): the
    /// subtask that restores it.
    #[serde(default)]
    subtask: Option<u32>,
    parts: Vec<(u64, u32)>,
}

impl Handle {
    fn parse(bytes: &[u8]) -> anyhow::Result<Handle> {
        let bad = |e: serde_json::Error| anyhow::anyhow!("a part file sink's commit handle: {e}");
        if bytes.first() == Some(&b'[') {
            let parts = serde_json::from_slice(bytes).map_err(bad)?;
            return Ok(Handle {
                dir: None,
                subtask: None,
                parts,
            });
        }
        serde_json::from_slice(bytes).map_err(bad)
    }
}

fn name_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl PartFileSink {
    /// The sink of `subtask` in `dir` for attempt `attempt` of job `job`,
    /// which starts from checkpoint `restored` (`None`: from the
    /// beginning), of its own or of the savepoint of job `predecessor`
    /// (whose committed output stays: this job goes on from it). Fails if a
    /// newer attempt of the job writes there.
    pub fn open(
        dir: &Path,
        job: &str,
        subtask: u32,
        attempt: u32,
        restored: Option<u64>,
        predecessor: Option<&str>,
    ) -> anyhow::Result<PartFileSink> {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        let after = restored.unwrap_or(0);
        let sink = PartFileSink {
            dir: dir.to_owned(),
            job: job.to_owned(),
            subtask,
            attempt,
            current: None,
            files: 0,
            uncommitted: Default::default(),
            last: after,
            format: Default::default(),
            lines: Vec::new(),
        };
        sink.fenced(true, |before| {
            if before == sink.job || Some(before) == predecessor {
                // This job, or the one it goes on from: what is committed
                // stays, what was left uncommitted after the checkpoint
                // goes.
                sink.remove_stale(after)
            } else {
                // Another job wrote here before: its parts of this subtask
                // make way for this job's.
                sink.remove_subtask_files()
            }
        })?;
        Ok(sink)
    }

    /// Its input's records are in `format`: it writes them as JSON.
    pub fn with_format(mut self, format: weir_model::format::Format) -> PartFileSink {
        self.format = format;
        self
    }

    /// Run `f` holding the directory's fence, if this attempt is still the
    /// newest of its job to write here; with `take`, record it as the
    /// newest (a new job takes the directory over). `f` is told which job
    /// held the directory before (empty: none).
    fn fenced<T>(
        &self,
        take: bool,
        f: impl FnOnce(&str) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let path = self.dir.join(".fence");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
        file.lock()
            .map_err(|e| anyhow::anyhow!("cannot lock {}: {e}", path.display()))?;
        let mut text = String::new();
        file.read_to_string(&mut text)?;
        let (job, newest) = text
            .trim()
            .split_once(' ')
            .and_then(|(j, a)| Some((j, a.parse::<u32>().ok()?)))
            .unwrap_or(("", 0));
        let mine = job == self.job;
        if (mine && newest > self.attempt) || (!mine && !take) {
            let by = if mine {
                format!("attempt {newest}")
            } else {
                format!("job {job}")
            };
            anyhow::bail!(
                "attempt {} of job {} is fenced off: {by} writes to {} now; nothing is committed",
                self.attempt,
                self.job,
                self.dir.display()
            );
        }
        if take && !(mine && newest == self.attempt) {
            file.set_len(0)?;
            file.rewind()?;
            write!(file, "{} {}", self.job, self.attempt)?;
            file.sync_all()?;
            self.sync_dir()?;
        }
        f(job)
    }

    /// Sync the directory: the names made or renamed in it are on disk.
    fn sync_dir(&self) -> anyhow::Result<()> {
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| anyhow::anyhow!("syncing {}: {e}", self.dir.display()))
    }

    /// Remove what a failed attempt left uncommitted of this subtask after
    /// checkpoint `after`, the one the job goes on from. Parts in view stay:
    /// committed output is never retracted.
    fn remove_stale(&self, after: u64) -> anyhow::Result<()> {
        let (dir, subtask) = (&self.dir, self.subtask);
        for e in std::fs::read_dir(dir)? {
            let name = name_of(&e?.path());
            let stale = if let Some(rest) = name.strip_prefix(&format!(".part-{subtask}-a")) {
                rest.ends_with(".inprogress")
            } else if let Some(id) = name
                .strip_prefix(&format!(".part-{subtask}-"))
                .and_then(|r| r.strip_suffix(".pending"))
                .and_then(|r| r.split_once("-a"))
            {
                id.0.parse::<u64>().is_ok_and(|id| id > after)
            } else {
                false
            };
            if stale {
                std::fs::remove_file(dir.join(&name)).map_err(|e| {
                    anyhow::anyhow!("cannot remove {}: {e}", dir.join(&name).display())
                })?;
            }
        }
        Ok(())
    }

    /// Remove every file of this subtask: another job wrote them, and this
    /// one takes the directory over.
    fn remove_subtask_files(&self) -> anyhow::Result<()> {
        let subtask = self.subtask;
        for e in std::fs::read_dir(&self.dir)? {
            let path = e?.path();
            let name = name_of(&path);
            if name.starts_with(&format!(".part-{subtask}-"))
                || name.starts_with(&format!("part-{subtask}-"))
            {
                std::fs::remove_file(&path)
                    .map_err(|e| anyhow::anyhow!("cannot remove {}: {e}", path.display()))?;
            }
        }
        Ok(())
    }

    /// Where attempt `attempt` of subtask `subtask` keeps its part of
    /// `checkpoint` until the commit (an older attempt still running cannot
    /// write over it).
    fn pending(&self, subtask: u32, checkpoint: u64, attempt: u32) -> PathBuf {
        self.dir
            .join(format!(".part-{subtask}-{checkpoint}-a{attempt}.pending"))
    }

    fn visible(&self, subtask: u32, checkpoint: u64) -> PathBuf {
        self.dir.join(format!("part-{subtask}-{checkpoint}.jsonl"))
    }

    /// Close the in-progress file as the pending part of `checkpoint`;
    /// false when nothing was written since the last one.
    fn close_as(&mut self, checkpoint: u64) -> anyhow::Result<bool> {
        let Some((mut w, path)) = self.current.take() else {
            return Ok(false);
        };
        w.flush()?;
        let file = w
            .into_inner()
            .map_err(|e| anyhow::anyhow!("{}", e.error()))?;
        file.sync_all()?;
        std::fs::rename(&path, self.pending(self.subtask, checkpoint, self.attempt))?;
        // Durable before the pre-commit is acknowledged.
        self.sync_dir()?;
        Ok(true)
    }

    /// Commit subtask `subtask`'s part of `checkpoint` (a restore from a
    /// savepoint taken at another parallelism commits other subtasks').
    fn commit_part(&self, subtask: u32, checkpoint: u64, attempt: u32) -> anyhow::Result<()> {
        let (pending, visible) = (
            self.pending(subtask, checkpoint, attempt),
            self.visible(subtask, checkpoint),
        );
        self.fenced(false, |_| {
            if visible.exists() {
                // Committed already (a commit after a restore): a part in
                // view is never written over.
                return Ok(());
            }
            match std::fs::rename(&pending, &visible) {
                // Durable before the commit is reported.
                Ok(()) => self.sync_dir(),
                Err(_) if visible.exists() => Ok(()),
                Err(e) => Err(anyhow::anyhow!(
                    "committing {}: {e} (the part is lost)",
                    pending.display()
                )),
            }
        })
    }
}

impl PartFileSink {
    /// Write records' values into the part file in progress (opened on the
    /// first).
    fn write_values<'a>(
        &mut self,
        values: impl ExactSizeIterator<Item = &'a [u8]>,
    ) -> anyhow::Result<()> {
        if values.len() == 0 {
            return Ok(());
        }
        if self.current.is_none() {
            self.files += 1;
            let path = self.dir.join(format!(
                ".part-{}-a{}-{}.inprogress",
                self.subtask, self.attempt, self.files
            ));
            let file = File::create(&path)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
            self.current = Some((BufWriter::with_capacity(1 << 20, file), path));
        }
        let (w, path) = self.current.as_mut().expect("opened above");
        self.lines.clear();
        super::json_lines(&self.format, values, &mut self.lines)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
        w.write_all(&self.lines)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))
    }
}

impl Sink for PartFileSink {
    fn write(&mut self, batch: &Records) -> anyhow::Result<()> {
        self.write_values(batch.iter().map(|r| r.value))
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        // The subtask's final checkpoint pre-committed its last part and
        // committed it: nothing is left. What is left (nothing completed a
        // checkpoint after it) stays hidden: only a completed checkpoint
        // commits.
        if self.current.is_some() || !self.uncommitted.is_empty() {
            tracing::warn!(
                "part file sink in {} (subtask {}): the input ended with parts no completed checkpoint covers; they stay hidden",
                self.dir.display(),
                self.subtask
            );
        }
        Ok(())
    }

    fn pre_commit(&mut self, checkpoint: u64) -> anyhow::Result<Vec<u8>> {
        if self.close_as(checkpoint)? {
            self.uncommitted.insert(checkpoint, self.attempt);
        }
        self.last = self.last.max(checkpoint);
        // The handle: every part not committed yet (checkpoint, attempt),
        // so that a restore commits the ones whose commit a failure cut
        // short too; and whose they are (a restore at another parallelism
        // gives it to another subtask).
        let handle = Handle {
            dir: Some(self.dir.clone()),
            subtask: Some(self.subtask),
            parts: self.uncommitted.iter().map(|(&c, &a)| (c, a)).collect(),
        };
        Ok(serde_json::to_vec(&handle)?)
    }

    fn commit(&mut self, _checkpoint: u64, handle: &[u8]) -> anyhow::Result<()> {
        // Fault injection (tests only): a commit that comes late.
        weir_model::faults::hold("commit");
        let handle = Handle::parse(handle)?;
        if let Some(dir) = handle.dir.as_ref().filter(|d| **d != self.dir) {
            // A savepoint's sink that wrote elsewhere (the new job's sink
            // of that name has another path): its parts stay where they
            // are; the job that wrote them committed them when it stopped.
            tracing::warn!(
                "part file sink in {}: the savepoint's parts of this sink are in {}, which this job does not write; they are not committed here",
                self.dir.display(),
                dir.display()
            );
            return Ok(());
        }
        let subtask = handle.subtask.unwrap_or(self.subtask);
        for (id, attempt) in handle.parts {
            self.commit_part(subtask, id, attempt)?;
            if subtask == self.subtask {
                self.uncommitted.remove(&id);
            }
        }
        Ok(())
    }

    fn abort(&mut self) -> anyhow::Result<()> {
        if let Some((_, path)) = self.current.take() {
            let _ = std::fs::remove_file(path);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_model::Record;

    fn visible(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| name_of(&e.unwrap().path()))
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        names
    }

    fn lines(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for n in visible(dir) {
            out.extend(
                std::fs::read_to_string(dir.join(n))
                    .unwrap()
                    .lines()
                    .map(str::to_owned),
            );
        }
        out
    }

    fn batch(values: &[&str]) -> Records {
        Records::List(
            values
                .iter()
                .map(|v| Record::value(v.as_bytes().to_vec()))
                .collect(),
        )
    }

    #[test]
    fn parts_become_visible_when_their_checkpoint_completes_and_commits_repeat_safely() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = PartFileSink::open(dir.path(), "j", 0, 0, None, None).unwrap();
        s.write(&batch(&["1", "2"])).unwrap();
        let h1 = s.pre_commit(1).unwrap();
        s.write(&batch(&["3"])).unwrap();
        assert!(visible(dir.path()).is_empty(), "nothing before a commit");
        s.commit(1, &h1).unwrap();
        s.commit(1, &h1).unwrap();
        assert_eq!(lines(dir.path()), ["1", "2"]);
        // Checkpoint 2 aborted: its part waits for 3, which commits both.
        let _h2 = s.pre_commit(2).unwrap();
        s.write(&batch(&["4"])).unwrap();
        let h3 = s.pre_commit(3).unwrap();
        s.commit(3, &h3).unwrap();
        assert_eq!(lines(dir.path()), ["1", "2", "3", "4"]);
        s.write(&batch(&["5"])).unwrap();
        // The end of the input commits nothing by itself: the final
        // checkpoint does.
        s.finish().unwrap();
        assert_eq!(lines(dir.path()), ["1", "2", "3", "4"]);
        let h4 = s.pre_commit(4).unwrap();
        s.commit(4, &h4).unwrap();
        s.finish().unwrap();
        assert_eq!(lines(dir.path()), ["1", "2", "3", "4", "5"]);
        assert_eq!(
            visible(dir.path()),
            [
                "part-0-1.jsonl",
                "part-0-2.jsonl",
                "part-0-3.jsonl",
                "part-0-4.jsonl"
            ]
        );
    }

    #[test]
    fn a_restore_commits_the_checkpoints_parts_and_drops_what_came_after() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = PartFileSink::open(dir.path(), "j", 3, 0, None, None).unwrap();
        s.write(&batch(&["a"])).unwrap();
        let h1 = s.pre_commit(1).unwrap();
        // Checkpoint 1 completes, but the failure comes before the commit.
        s.write(&batch(&["b"])).unwrap();
        let _h2 = s.pre_commit(2).unwrap();
        s.write(&batch(&["c"])).unwrap();
        drop(s);
        // Attempt 1 from checkpoint 1: its part is committed, the rest goes.
        let mut r = PartFileSink::open(dir.path(), "j", 3, 1, Some(1), None).unwrap();
        r.commit(1, &h1).unwrap();
        assert_eq!(lines(dir.path()), ["a"]);
        let hidden: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| name_of(&e.unwrap().path()))
            .filter(|n| n.starts_with('.') && n != ".fence")
            .collect();
        assert!(hidden.is_empty(), "{hidden:?}");
        r.write(&batch(&["b"])).unwrap();
        let h2 = r.pre_commit(2).unwrap();
        r.commit(2, &h2).unwrap();
        assert_eq!(lines(dir.path()), ["a", "b"]);
        // Committed output is never retracted, not even by a restore from
        // an earlier checkpoint.
        let again = PartFileSink::open(dir.path(), "j", 3, 2, Some(1), None).unwrap();
        drop(again);
        assert_eq!(lines(dir.path()), ["a", "b"]);
        // Other subtasks' files are not touched.
        std::fs::write(dir.path().join("part-4-9.jsonl"), "x\n").unwrap();
        PartFileSink::open(dir.path(), "j", 3, 3, Some(0), None).unwrap();
        assert_eq!(lines(dir.path()), ["a", "b", "x"]);
    }

    #[test]
    fn a_job_from_a_savepoint_keeps_its_predecessors_output_and_commits_its_parts() {
        let dir = tempfile::tempdir().unwrap();
        // Job `old`, two subtasks: checkpoint 4 (its stop's savepoint)
        // pre-committed, subtask 1's commit cut short by the stop.
        let mut a = PartFileSink::open(dir.path(), "old", 0, 0, None, None).unwrap();
        let mut b = PartFileSink::open(dir.path(), "old", 1, 0, None, None).unwrap();
        a.write(&batch(&["a1"])).unwrap();
        b.write(&batch(&["b1"])).unwrap();
        let (ha, hb) = (a.pre_commit(3).unwrap(), b.pre_commit(3).unwrap());
        a.commit(3, &ha).unwrap();
        b.commit(3, &hb).unwrap();
        a.write(&batch(&["a2"])).unwrap();
        b.write(&batch(&["b2"])).unwrap();
        let (ha, hb) = (a.pre_commit(4).unwrap(), b.pre_commit(4).unwrap());
        a.commit(4, &ha).unwrap();
        b.write(&batch(&["after the savepoint"])).unwrap();
        drop(a);
        // Job `new`, one subtask, from the savepoint: the old job's parts
        // stay, and it commits both subtasks' pre-commits (idempotently).
        let mut n = PartFileSink::open(dir.path(), "new", 0, 0, Some(4), Some("old")).unwrap();
        // (Lines in the parts' name order: subtask, then checkpoint.)
        assert_eq!(lines(dir.path()), ["a1", "a2", "b1"]);
        n.commit(4, &ha).unwrap();
        n.commit(4, &hb).unwrap();
        assert_eq!(lines(dir.path()), ["a1", "a2", "b1", "b2"]);
        n.write(&batch(&["n"])).unwrap();
        let h = n.pre_commit(5).unwrap();
        n.commit(5, &h).unwrap();
        assert_eq!(lines(dir.path()), ["a1", "a2", "n", "b1", "b2"]);
        // The old job (a zombie still running) is fenced off now.
        let late = b.pre_commit(6).unwrap();
        let e = b.commit(6, &late).unwrap_err();
        assert!(e.to_string().contains("job new"), "{e}");
        assert_eq!(lines(dir.path()), ["a1", "a2", "n", "b1", "b2"]);
        // A handle of parts in another directory commits nothing here.
        let elsewhere = tempfile::tempdir().unwrap();
        let mut o =
            PartFileSink::open(elsewhere.path(), "new", 0, 0, Some(4), Some("old")).unwrap();
        o.commit(4, &hb).unwrap();
        assert!(visible(elsewhere.path()).is_empty());
    }

    #[test]
    fn an_attempt_replaced_by_a_newer_one_commits_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut old = PartFileSink::open(dir.path(), "j", 0, 0, None, None).unwrap();
        old.write(&batch(&["a"])).unwrap();
        let h1 = old.pre_commit(1).unwrap();
        old.commit(1, &h1).unwrap();
        // Attempt 1 takes over from checkpoint 1 while attempt 0 (cut off)
        // goes on: its pre-commit of checkpoint 2 does not touch attempt
        // 1's, and neither its commits nor its final part become visible.
        let mut new = PartFileSink::open(dir.path(), "j", 0, 1, Some(1), None).unwrap();
        new.write(&batch(&["b"])).unwrap();
        let h2 = new.pre_commit(2).unwrap();
        old.write(&batch(&["zombie"])).unwrap_or_default();
        let old_h2 = old.pre_commit(2);
        if let Ok(h) = &old_h2 {
            let e = old.commit(2, h).unwrap_err();
            assert!(e.to_string().contains("fenced off"), "{e}");
        }
        new.commit(2, &h2).unwrap();
        assert_eq!(lines(dir.path()), ["a", "b"]);
        // An old attempt cannot start again either.
        let e = PartFileSink::open(dir.path(), "j", 0, 0, Some(1), None)
            .err()
            .unwrap();
        assert!(e.to_string().contains("attempt 1 writes to"), "{e}");
        // Another job takes the directory over (starting afresh, its
        // subtask's parts replace those there).
        let mut other = PartFileSink::open(dir.path(), "k", 0, 0, None, None).unwrap();
        other.write(&batch(&["c"])).unwrap();
        let hc = other.pre_commit(1).unwrap();
        other.commit(1, &hc).unwrap();
        new.write(&batch(&["d"])).unwrap();
        let h3 = new.pre_commit(3).unwrap();
        assert!(new.commit(3, &h3).is_err(), "the first job is fenced off");
        assert_eq!(lines(dir.path()), ["c"]);
    }
}
