//! Checkpoint storage: the blob store that checkpoints' files and metadata
//! go to, named by a URL that the coordinator hands every worker. A
//! `file://` URL is a directory (on one machine, or on storage every
//! machine mounts).

use std::sync::Arc;

use object_store::ObjectStore;

/// The store a checkpoint storage URL names.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let url = weir_state::storage::file_url(dir.path()).unwrap();
/// assert!(weir_state::storage::open(&url).is_ok());
/// assert!(weir_state::storage::open("ftp://x/y").is_err());
/// ```
pub fn open(url: &str) -> anyhow::Result<Arc<dyn ObjectStore>> {
    let Some(path) = url.strip_prefix("file://") else {
        anyhow::bail!("checkpoint storage {url:?}: only file:// URLs are supported");
    };
    std::fs::create_dir_all(path)
        .map_err(|e| anyhow::anyhow!("checkpoint storage {url:?}: cannot create {path}: {e}"))?;
    let fs = object_store::local::LocalFileSystem::new_with_prefix(path)
        .map_err(|e| anyhow::anyhow!("checkpoint storage {url:?}: {e}"))?;
    Ok(Arc::new(fs))
}

/// The `file://` URL of directory `dir` (made absolute; created).
pub fn file_url(dir: &std::path::Path) -> anyhow::Result<String> {
    std::fs::create_dir_all(dir)?;
    let abs = std::fs::canonicalize(dir)?;
    Ok(format!("file://{}", abs.display()))
}
