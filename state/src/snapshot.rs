//! Snapshots of a backend: what a checkpoint keeps of an operator's keyed
//! state and timers.
//!
//! Taking one has a synchronous part, while the task waits (the memory
//! backend writes its whole state to a file; RocksDB flushes and hard-links
//! its files into a checkpoint directory), and an asynchronous part that the
//! task does not wait for: uploading the files. A [`LocalSnapshot`] is the
//! result of the first, the input of the second.
//!
//! The memory backend's file (`state.bin`) is in the canonical format
//! ([`crate::canonical`]), which every savepoint uses too: every entry
//! carries its key group, so a restore can keep only the key groups its
//! subtask owns (rescaling).

use std::ops::Range;
use std::path::PathBuf;

/// How a snapshot's files are to be read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SnapshotFormat {
    /// One canonical file, `state.bin` ([`crate::canonical`]): the memory
    /// backend's snapshots and every savepoint.
    Full,
    /// A RocksDB checkpoint directory: its SST files (shared between
    /// incremental checkpoints) and its own metadata files.
    #[serde(rename = "rocksdb")]
    RocksDb,
}

/// One file of a local snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotFile {
    /// Its name in the snapshot directory.
    pub name: String,
    /// Where it is.
    pub path: PathBuf,
    /// Bytes.
    pub size: u64,
    /// Immutable and named uniquely within its database's life (an SST
    /// file): an incremental checkpoint uploads it once and refers to it
    /// from later checkpoints.
    pub shared: bool,
}

/// A snapshot taken, its files on local disk.
#[derive(Debug, Clone)]
pub struct LocalSnapshot {
    /// How to read it back.
    pub format: SnapshotFormat,
    /// Its files.
    pub files: Vec<SnapshotFile>,
}

/// A snapshot of `backend` into the empty directory `dir`: its own kind,
/// or, `portable` (a savepoint's), one canonical file.
pub fn take<B: crate::StateBackend + ?Sized>(
    backend: &mut B,
    dir: &std::path::Path,
    portable: bool,
) -> anyhow::Result<LocalSnapshot> {
    if portable {
        backend.savepoint(dir)
    } else {
        backend.snapshot(dir)
    }
}

/// The key groups a restored backend keeps.
pub type KeyGroups = Range<u32>;

/// Encoding helpers for the files beside a RocksDB snapshot.
#[cfg(feature = "rocksdb")]
pub(crate) mod codec {
    pub fn u32(out: &mut Vec<u8>, n: u32) {
        out.extend_from_slice(&n.to_be_bytes());
    }

    pub fn bytes(out: &mut Vec<u8>, b: &[u8]) {
        u32(out, b.len() as u32);
        out.extend_from_slice(b);
    }

    /// A reader that fails on truncated input instead of panicking.
    pub struct Reader<'a>(pub &'a [u8]);

    impl<'a> Reader<'a> {
        pub fn take(&mut self, n: usize) -> anyhow::Result<&'a [u8]> {
            anyhow::ensure!(self.0.len() >= n, "the state file is truncated");
            let (head, rest) = self.0.split_at(n);
            self.0 = rest;
            Ok(head)
        }

        pub fn u8(&mut self) -> anyhow::Result<u8> {
            Ok(self.take(1)?[0])
        }

        pub fn u32(&mut self) -> anyhow::Result<u32> {
            Ok(u32::from_be_bytes(self.take(4)?.try_into().expect("4")))
        }

        pub fn u64(&mut self) -> anyhow::Result<u64> {
            Ok(u64::from_be_bytes(self.take(8)?.try_into().expect("8")))
        }

        pub fn i64(&mut self) -> anyhow::Result<i64> {
            Ok(i64::from_be_bytes(self.take(8)?.try_into().expect("8")))
        }

        pub fn bytes(&mut self) -> anyhow::Result<Vec<u8>> {
            let n = self.u32()? as usize;
            Ok(self.take(n)?.to_vec())
        }

        pub fn is_empty(&self) -> bool {
            self.0.is_empty()
        }
    }
}

/// The files of `dir`, as a local snapshot's.
#[cfg(feature = "rocksdb")]
pub(crate) fn files_of(
    dir: &std::path::Path,
    shared: impl Fn(&str) -> bool,
) -> anyhow::Result<Vec<SnapshotFile>> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if !e.file_type()?.is_file() {
            continue;
        }
        let name = e.file_name().to_string_lossy().into_owned();
        files.push(SnapshotFile {
            shared: shared(&name),
            size: e.metadata()?.len(),
            path: e.path(),
            name,
        });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}
