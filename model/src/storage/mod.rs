//! Checkpoint storage: the blob store that checkpoints' files and metadata
//! go to, named by a URL that the coordinator hands every worker. A
//! `file://` URL is a directory (on one machine, or on storage every
//! machine mounts).
//!
//! A write is durable when it returns: the local store syncs each file it
//! writes and the directories its name was made in, so a checkpoint that
//! was declared complete survives a crash of the machine, not only of the
//! process ([`Durable`]).

pub mod transfer;

use std::fmt;
use std::ops::Range;
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;

use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

/// The store a checkpoint storage URL names.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let url = weir_model::storage::file_url(dir.path()).unwrap();
/// assert!(weir_model::storage::open(&url).is_ok());
/// assert!(weir_model::storage::open("ftp://x/y").is_err());
/// ```
pub fn open(url: &str) -> anyhow::Result<Arc<dyn ObjectStore>> {
    let Some(path) = url.strip_prefix("file://") else {
        anyhow::bail!("checkpoint storage {url:?}: only file:// URLs are supported");
    };
    std::fs::create_dir_all(path)
        .map_err(|e| anyhow::anyhow!("checkpoint storage {url:?}: cannot create {path}: {e}"))?;
    let fs = LocalFileSystem::new_with_prefix(path)
        .map_err(|e| anyhow::anyhow!("checkpoint storage {url:?}: {e}"))?;
    // The store's own paths are canonical: so is the root its syncs stop at.
    let root = std::fs::canonicalize(path).unwrap_or_else(|_| PathBuf::from(path));
    Ok(crate::faults::wrap(Arc::new(Durable { inner: fs, root })))
}

/// A local directory whose writes are synced before they return: the file,
/// then every directory from its own up to the root (a write may have
/// made them).
#[derive(Debug)]
pub struct Durable {
    inner: LocalFileSystem,
    root: PathBuf,
}

impl fmt::Display for Durable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Durable({})", self.root.display())
    }
}

/// Sync `file`, then its directories up to `root` (where a file system
/// cannot sync a directory, as some network and FUSE ones, the file's sync
/// is what it offers).
fn sync_up(file: &FsPath, root: &FsPath) -> std::io::Result<()> {
    std::fs::File::open(file)?.sync_all()?;
    let mut dir = file.parent();
    while let Some(d) = dir {
        match std::fs::File::open(d)?.sync_all() {
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => return Ok(()),
            other => other?,
        }
        if d == root || !d.starts_with(root) {
            break;
        }
        dir = d.parent();
    }
    Ok(())
}

/// [`sync_up`] off the async threads, its errors the store's.
async fn synced(file: PathBuf, root: PathBuf) -> Result<()> {
    let generic = |e: Box<dyn std::error::Error + Send + Sync>| object_store::Error::Generic {
        store: "Durable",
        source: e,
    };
    tokio::task::spawn_blocking(move || sync_up(&file, &root))
        .await
        .map_err(|e| generic(Box::new(e)))?
        .map_err(|e| generic(Box::new(e)))
}

impl Durable {
    async fn sync(&self, location: &Path) -> Result<()> {
        synced(self.inner.path_to_filesystem(location)?, self.root.clone()).await
    }
}

#[async_trait::async_trait]
impl ObjectStore for Durable {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let put = self.inner.put_opts(location, payload, opts).await?;
        self.sync(location).await?;
        Ok(put)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        // Synced as a put is, once complete.
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(DurableUpload {
            inner,
            file: self.inner.path_to_filesystem(location)?,
            root: self.root.clone(),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await?;
        self.sync(to).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await?;
        self.sync(to).await
    }
}

/// A multipart upload to a [`Durable`] store: synced when it completes.
#[derive(Debug)]
struct DurableUpload {
    inner: Box<dyn MultipartUpload>,
    file: PathBuf,
    root: PathBuf,
}

#[async_trait::async_trait]
impl MultipartUpload for DurableUpload {
    fn put_part(&mut self, data: PutPayload) -> object_store::UploadPart {
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        let put = self.inner.complete().await?;
        synced(self.file.clone(), self.root.clone()).await?;
        Ok(put)
    }

    async fn abort(&mut self) -> Result<()> {
        self.inner.abort().await
    }
}

/// The `file://` URL of directory `dir` (made absolute; created).
pub fn file_url(dir: &std::path::Path) -> anyhow::Result<String> {
    std::fs::create_dir_all(dir)?;
    let abs = std::fs::canonicalize(dir)?;
    Ok(format!("file://{}", abs.display()))
}
