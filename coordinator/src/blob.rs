//! The blob store: immutable content (components, bundle archives) stored
//! under its sha256, in any `object_store` backend.

use std::sync::Arc;

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use sha2::{Digest, Sha256};

/// Content-addressed blobs.
#[derive(Clone)]
pub struct BlobStore {
    store: Arc<dyn ObjectStore>,
}

/// The hex sha256 of `bytes`, the address of a blob.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn path(sha256: &str) -> Path {
    Path::from(format!("blobs/{}/{sha256}", &sha256[..2.min(sha256.len())]))
}

impl BlobStore {
    /// Blobs in `store`.
    pub fn new(store: Arc<dyn ObjectStore>) -> Self {
        BlobStore { store }
    }

    /// Blobs in a local directory (created if missing).
    pub fn local(dir: &std::path::Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let fs = object_store::local::LocalFileSystem::new_with_prefix(dir)?;
        Ok(Self::new(Arc::new(fs)))
    }

    /// Store `bytes`; returns their address. Storing the same bytes twice
    /// stores them once.
    pub async fn put(&self, bytes: Vec<u8>) -> anyhow::Result<String> {
        let sha = sha256_hex(&bytes);
        if !self.exists(&sha).await? {
            self.store.put(&path(&sha), PutPayload::from(bytes)).await?;
        }
        Ok(sha)
    }

    /// The blob at `sha256`.
    pub async fn get(&self, sha256: &str) -> anyhow::Result<Vec<u8>> {
        let bytes = self.store.get(&path(sha256)).await?.bytes().await?;
        Ok(bytes.to_vec())
    }

    /// Whether the blob exists.
    pub async fn exists(&self, sha256: &str) -> anyhow::Result<bool> {
        match self.store.head(&path(sha256)).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Remove the blob (no error if it is gone).
    pub async fn delete(&self, sha256: &str) -> anyhow::Result<()> {
        match self.store.delete(&path(sha256)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
