//! Files moved between a store and local files (or another store) without
//! being held in memory whole: what fits in one part goes up in one put
//! (as before), anything larger as a multipart upload of [`PART`]-sized
//! parts, two in flight at most; reads go a chunk at a time. Each move
//! hashes what it moved, for the checks a restore makes.

use std::path::Path as FsPath;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use sha2::Digest;

/// The size of an upload's parts, and the most a write holds at once
/// (times the two in flight).
pub const PART: usize = 8 << 20;

/// How much is read from a local file at a time.
const READ: usize = 1 << 20;

/// What a write wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Bytes.
    pub size: u64,
    /// Their sha256, hex.
    pub sha256: String,
}

/// Write what `chunks` yields to `location` in `store`.
pub async fn put_stream<S>(
    store: &dyn ObjectStore,
    location: &Path,
    mut chunks: S,
) -> anyhow::Result<Written>
where
    S: Stream<Item = anyhow::Result<Bytes>> + Unpin,
{
    let mut hasher = sha2::Sha256::new();
    let mut size = 0u64;
    // What fits in one part goes up in one put.
    let mut head = Vec::new();
    let mut held = 0usize;
    while held <= PART {
        match chunks.next().await {
            Some(chunk) => {
                let chunk = chunk?;
                hasher.update(&chunk);
                held += chunk.len();
                head.push(chunk);
            }
            None => {
                let payload: PutPayload = head.into_iter().collect();
                size = held as u64;
                store
                    .put(location, payload)
                    .await
                    .map_err(|e| anyhow::anyhow!("writing {location}: {e}"))?;
                return Ok(Written {
                    size,
                    sha256: hex::encode(hasher.finalize()),
                });
            }
        }
    }
    let upload = store
        .put_multipart(location)
        .await
        .map_err(|e| anyhow::anyhow!("writing {location}: {e}"))?;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, PART);
    size += held as u64;
    for chunk in head {
        writer.put(chunk);
    }
    let streamed: anyhow::Result<()> = async {
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk?;
            hasher.update(&chunk);
            size += chunk.len() as u64;
            writer
                .wait_for_capacity(2)
                .await
                .map_err(|e| anyhow::anyhow!("writing {location}: {e}"))?;
            writer.put(chunk);
        }
        // Every part up before the upload completes: a failed one aborts it
        // below (a failed completion aborts it in `finish`).
        writer
            .wait_for_capacity(0)
            .await
            .map_err(|e| anyhow::anyhow!("writing {location}: {e}"))?;
        Ok(())
    }
    .await;
    match streamed {
        Ok(()) => {
            writer
                .finish()
                .await
                .map_err(|e| anyhow::anyhow!("writing {location}: {e}"))?;
        }
        Err(e) => {
            let _ = writer.abort().await;
            return Err(e);
        }
    }
    Ok(Written {
        size,
        sha256: hex::encode(hasher.finalize()),
    })
}

/// Write the local file `file` to `location` in `store`.
pub async fn put_file(
    store: &dyn ObjectStore,
    location: &Path,
    file: &FsPath,
) -> anyhow::Result<Written> {
    let opened = tokio::fs::File::open(file)
        .await
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", file.display()))?;
    let shown = file.display().to_string();
    let chunks = tokio_util::io::ReaderStream::with_capacity(opened, READ)
        .map(move |chunk| chunk.map_err(|e| anyhow::anyhow!("reading {shown}: {e}")));
    put_stream(store, location, Box::pin(chunks)).await
}

/// Copy `from` in `source` to `to` in `target`, a chunk at a time.
pub async fn copy(
    source: &dyn ObjectStore,
    from: &Path,
    target: &dyn ObjectStore,
    to: &Path,
) -> anyhow::Result<Written> {
    let got = source
        .get(from)
        .await
        .map_err(|e| anyhow::anyhow!("reading {from}: {e}"))?;
    let shown = from.to_string();
    let chunks = got
        .into_stream()
        .map(move |c| c.map_err(|e| anyhow::anyhow!("reading {shown}: {e}")));
    put_stream(target, to, Box::pin(chunks)).await
}

/// Read `location` in `store` into the local file `file` (made or
/// replaced), a chunk at a time.
pub async fn get_file(
    store: &dyn ObjectStore,
    location: &Path,
    file: &FsPath,
) -> anyhow::Result<Written> {
    use tokio::io::AsyncWriteExt;
    let got = store
        .get(location)
        .await
        .map_err(|e| anyhow::anyhow!("reading {location}: {e}"))?;
    let mut chunks = got.into_stream();
    let mut out = tokio::fs::File::create(file)
        .await
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", file.display()))?;
    let mut hasher = sha2::Sha256::new();
    let mut size = 0u64;
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| anyhow::anyhow!("reading {location}: {e}"))?;
        hasher.update(&chunk);
        size += chunk.len() as u64;
        out.write_all(&chunk)
            .await
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", file.display()))?;
    }
    out.flush()
        .await
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", file.display()))?;
    Ok(Written {
        size,
        sha256: hex::encode(hasher.finalize()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn small_and_large_files_arrive_whole_with_their_hash() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::storage::open(&crate::storage::file_url(&dir.path().join("s")).unwrap())
            .unwrap();
        for len in [0, 5, PART, PART + 1, 2 * PART + 12_345] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let file = dir.path().join(format!("f{len}"));
            std::fs::write(&file, &bytes).unwrap();
            let at = Path::from(format!("a/f{len}"));
            let written = put_file(store.as_ref(), &at, &file).await.unwrap();
            assert_eq!(written.size, len as u64);
            assert_eq!(written.sha256, hex::encode(sha2::Sha256::digest(&bytes)));
            let copied = Path::from(format!("b/f{len}"));
            let again = copy(store.as_ref(), &at, store.as_ref(), &copied)
                .await
                .unwrap();
            assert_eq!(again, written);
            let read = store.get(&copied).await.unwrap().bytes().await.unwrap();
            assert_eq!(read.as_ref(), bytes.as_slice(), "{len} bytes");
            let back = dir.path().join(format!("back{len}"));
            assert_eq!(
                get_file(store.as_ref(), &copied, &back).await.unwrap(),
                written
            );
            assert_eq!(std::fs::read(&back).unwrap(), bytes);
        }
        // Nothing staged is left behind.
        let mut left = Vec::new();
        for d in ["a", "b"] {
            for e in std::fs::read_dir(dir.path().join("s").join(d)).unwrap() {
                left.push(e.unwrap().file_name().into_string().unwrap());
            }
        }
        assert_eq!(left.len(), 10, "{left:?}");
    }
}
