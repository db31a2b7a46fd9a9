//! A checkpoint's keyed state in the canonical format, whatever backend
//! took it: the memory backend's file as it is, a RocksDB snapshot
//! (its own files and the shared ones an incremental checkpoint refers
//! to) fetched into a scratch directory, opened there and written out.
//! What reading a checkpoint's state ([`super::inspect`]) and turning a
//! retained checkpoint into a savepoint ([`crate::savepoint::write`]) share.

use std::path::{Path, PathBuf};

use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use weir_model::checkpoint::OperatorStateHandle;

/// A subtask's state as one canonical file, in a scratch directory that
/// goes with it.
pub struct Canonical {
    /// The canonical file.
    pub file: PathBuf,
    _scratch: tempfile::TempDir,
}

/// Fetch the files of `handle` from `store` (each checked against its
/// size and sha256) and give its state as one canonical file (keys in
/// `max_parallelism` groups).
pub async fn canonical(
    store: &dyn ObjectStore,
    handle: &OperatorStateHandle,
    max_parallelism: u32,
) -> anyhow::Result<Canonical> {
    let scratch = tempfile::tempdir()?;
    let db = scratch.path().join("db");
    std::fs::create_dir_all(&db)?;
    for f in &handle.files {
        anyhow::ensure!(
            !f.name.is_empty() && !f.name.contains(['/', '\\']) && f.name != "..",
            "a state file named {:?} in its metadata",
            f.name
        );
        let got = weir_model::storage::transfer::get_file(
            store,
            &ObjectPath::from(f.path.as_str()),
            &db.join(&f.name),
        )
        .await?;
        // What is written out from it is hashed again: a file that changed
        // must not pass on with a valid hash.
        f.verify(got.size, &got.sha256)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let format = handle.format.clone();
    let file = tokio::task::spawn_blocking(move || canonical_file(&format, &db, max_parallelism))
        .await??;
    Ok(Canonical {
        file,
        _scratch: scratch,
    })
}

/// The canonical file of a snapshot whose files are in `dir`: the memory
/// backend's own, or a RocksDB snapshot's written out.
fn canonical_file(format: &str, dir: &Path, max_parallelism: u32) -> anyhow::Result<PathBuf> {
    match format {
        "full" => Ok(dir.join(weir_state::canonical::FILE)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => {
            use weir_state::StateBackend;
            let out = dir.with_extension("state.bin");
            let mut db = weir_state::RocksDbStateBackend::open(dir, max_parallelism)?;
            db.export(&out)?;
            Ok(out)
        }
        #[cfg(not(feature = "rocksdb"))]
        "rocksdb" => {
            let _ = max_parallelism;
            anyhow::bail!(
                "its state is in RocksDB's format, and this coordinator was built without RocksDB"
            )
        }
        other => anyhow::bail!("unknown state format {other:?}"),
    }
}
