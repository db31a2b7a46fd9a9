//! Injected faults, for fault-injection tests. With
//! `WEIR_FAULTS_DIR=<dir>` in a process's environment:
//!
//! - every checkpoint store it opens looks for a file `<dir>/next` before
//!   each write. The first writer to take it (an atomic rename, so one write
//!   in all the processes sharing `<dir>`) fails: `fail` writes nothing,
//!   `tear` writes the first half of the object and then fails, as a store
//!   that is not atomic would leave it;
//! - a [`hold`] point (an exactly-once sink's commit) waits when a hold is
//!   armed for it, until the test releases it: a process stalled at the
//!   worst moment (a zombie whose commit arrives late).
//!
//! Taken faults stay in `<dir>` as `taken-*` files naming what they hit.
//! Without the variable nothing changes; jobs cannot set it.

use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};

/// The environment variable naming the directory of injected faults.
pub const ENV: &str = "WEIR_FAULTS_DIR";

/// An injected failure of the next write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The write fails, and nothing is written.
    Fail,
    /// Half the object is written, and the write fails.
    Tear,
}

impl Fault {
    fn named(name: &str) -> Option<Fault> {
        match name.trim() {
            "fail" => Some(Fault::Fail),
            "tear" => Some(Fault::Tear),
            _ => None,
        }
    }

    /// Its name in a `next` file.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Fail => "fail",
            Fault::Tear => "tear",
        }
    }
}

/// Arm `fault` for the next write of any process whose
/// [`ENV`] names `dir` (replacing one not yet taken).
pub fn arm(dir: &std::path::Path, fault: Fault) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".next-{}", std::process::id()));
    std::fs::write(&tmp, fault.name())?;
    std::fs::rename(tmp, dir.join("next"))
}

/// Arm `fault` for the next write whose path contains `target` (a part
/// of a path, such as `_metadata`), in any process whose [`ENV`] names
/// `dir`; other writes pass.
pub fn arm_for(dir: &std::path::Path, fault: Fault, target: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".next-{}", std::process::id()));
    std::fs::write(&tmp, fault.name())?;
    std::fs::rename(
        tmp,
        dir.join(format!("{TARGETED}{}", target.replace('/', "%2F"))),
    )
}

/// The start of the name of a fault armed for some paths only.
const TARGETED: &str = "next-for-";

/// How many armed storage faults writes have taken in `dir`.
pub fn taken(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("taken-"))
            .count()
    })
}

/// Faults taken by this process, for the names of their `taken-*` files.
static TAKEN: AtomicU64 = AtomicU64::new(0);

/// The directory [`ENV`] names, if it is set.
fn dir() -> Option<PathBuf> {
    std::env::var_os(ENV)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

/// Take the file `armed` in `dir` if it is there: renamed to a file
/// `<as>-<pid>-<n>`, which `what` then describes; its text before.
fn take_file(
    dir: &std::path::Path,
    armed: &str,
    as_: &str,
    what: impl FnOnce(&str) -> String,
) -> Option<String> {
    let n = TAKEN.fetch_add(1, Ordering::Relaxed);
    let to = dir.join(format!("{as_}-{}-{n}", std::process::id()));
    std::fs::rename(dir.join(armed), &to).ok()?;
    let text = std::fs::read_to_string(&to).ok()?;
    let _ = std::fs::write(&to, what(&text));
    Some(text)
}

/// Arm a hold of the next [`hold`] at `point` in any process whose [`ENV`]
/// names `dir` or, with `pid`, in that process only.
pub fn arm_hold(dir: &std::path::Path, point: &str, pid: Option<u32>) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let _ = std::fs::remove_file(dir.join(format!("release-{point}")));
    std::fs::write(dir.join(hold_file(point, pid)), point)
}

fn hold_file(point: &str, pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!("hold-{point}-{pid}"),
        None => format!("hold-{point}"),
    }
}

/// Whether the hold armed at `point` (for `pid`) was taken: a process
/// waits there.
pub fn held(dir: &std::path::Path, point: &str, pid: Option<u32>) -> bool {
    !dir.join(hold_file(point, pid)).exists()
}

/// Let the process held at `point` go on.
pub fn release(dir: &std::path::Path, point: &str) -> std::io::Result<()> {
    std::fs::write(dir.join(format!("release-{point}")), point)
}

/// How long a held point waits for its release at most.
const HOLD_AT_MOST: Duration = Duration::from_secs(300);

/// A hold point: if a hold is armed for `point` (see [`arm_hold`]), take it
/// and block until it is released (at most five minutes: longer than any
/// test waits for a job to go on without the held process). Nothing, and no
/// cost beyond reading an environment variable, without [`ENV`].
pub fn hold(point: &str) {
    let Some(dir) = dir() else {
        return;
    };
    let mine = hold_file(point, Some(std::process::id()));
    let what = |_: &str| format!("hold {point}\n");
    if take_file(&dir, &mine, "held", what).is_none()
        && take_file(&dir, &hold_file(point, None), "held", what).is_none()
    {
        return;
    }
    tracing::warn!("injected fault: held at {point}");
    let started = Instant::now();
    while !dir.join(format!("release-{point}")).exists() && started.elapsed() < HOLD_AT_MOST {
        std::thread::sleep(Duration::from_millis(10));
    }
    tracing::warn!("injected fault: released at {point}");
}

/// `store`, failing writes as armed in the directory [`ENV`] names, if
/// the variable is set.
pub fn wrap(store: Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore> {
    match dir() {
        Some(dir) => Arc::new(Faulty { inner: store, dir }),
        None => store,
    }
}

/// A store whose writes fail when a fault is armed.
#[derive(Debug)]
struct Faulty {
    inner: Arc<dyn ObjectStore>,
    dir: PathBuf,
}

impl fmt::Display for Faulty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Faulty({})", self.inner)
    }
}

impl Faulty {
    /// The armed fault, if this write is the one to take it.
    fn take(&self, location: &Path) -> Option<Fault> {
        // A fault armed for this path first, then one for any write.
        let targeted = std::fs::read_dir(&self.dir)
            .ok()?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().to_str()?.to_owned();
                let target = name.strip_prefix(TARGETED)?.replace("%2F", "/");
                location.as_ref().contains(&target).then_some(name)
            })
            .next();
        let armed = targeted.as_deref().unwrap_or("next");
        let text = take_file(&self.dir, armed, "taken", |t| {
            format!("{} {location}\n", t.trim())
        })?;
        let fault = Fault::named(&text)?;
        tracing::warn!("injected storage fault: {} of {location}", fault.name());
        Some(fault)
    }
}

fn injected(fault: Fault, location: &Path) -> object_store::Error {
    object_store::Error::Generic {
        store: "Faulty",
        source: format!("an injected {} write of {location}", fault.name()).into(),
    }
}

#[async_trait::async_trait]
impl ObjectStore for Faulty {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        match self.take(location) {
            None => self.inner.put_opts(location, payload, opts).await,
            Some(Fault::Fail) => Err(injected(Fault::Fail, location)),
            Some(Fault::Tear) => {
                let bytes = Bytes::from(payload);
                let half = bytes.slice(..bytes.len() / 2);
                let _ = self.inner.put_opts(location, half.into(), opts).await;
                Err(injected(Fault::Tear, location))
            }
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        let fault = self.take(location);
        if fault == Some(Fault::Fail) {
            return Err(injected(Fault::Fail, location));
        }
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(match fault {
            Some(Fault::Tear) => Box::new(TornUpload {
                inner,
                store: self.inner.clone(),
                location: location.clone(),
            }),
            _ => inner,
        })
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
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}

/// A multipart upload torn as a put is: complete, its object cut to half
/// of itself, and an error.
#[derive(Debug)]
struct TornUpload {
    inner: Box<dyn MultipartUpload>,
    store: Arc<dyn ObjectStore>,
    location: Path,
}

#[async_trait::async_trait]
impl MultipartUpload for TornUpload {
    fn put_part(&mut self, data: PutPayload) -> object_store::UploadPart {
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        use object_store::ObjectStoreExt;
        self.inner.complete().await?;
        let whole = self.store.get(&self.location).await?.bytes().await?;
        let half = whole.slice(..whole.len() / 2);
        self.store.put(&self.location, half.into()).await?;
        Err(injected(Fault::Tear, &self.location))
    }

    async fn abort(&mut self) -> Result<()> {
        self.inner.abort().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;

    /// A file store in `dir` with the faults armed in `dir/faults`.
    fn faulty(dir: &std::path::Path) -> (Faulty, PathBuf) {
        let inner =
            crate::storage::open(&crate::storage::file_url(&dir.join("s")).unwrap()).unwrap();
        let faults = dir.join("faults");
        let store = Faulty {
            inner,
            dir: faults.clone(),
        };
        (store, faults)
    }

    #[tokio::test]
    async fn an_armed_fault_fails_one_write_and_a_torn_one_leaves_half() {
        let dir = tempfile::tempdir().unwrap();
        let (store, faults) = faulty(dir.path());
        let (a, b) = (Path::from("a"), Path::from("b"));
        store.put(&a, Bytes::from("1234").into()).await.unwrap();
        arm(&faults, Fault::Fail).unwrap();
        assert!(store.put(&b, Bytes::from("5678").into()).await.is_err());
        assert!(store.get(&b).await.is_err(), "nothing written");
        store.put(&b, Bytes::from("5678").into()).await.unwrap();
        arm(&faults, Fault::Tear).unwrap();
        assert!(store.put(&a, Bytes::from("abcd").into()).await.is_err());
        let torn = store.get(&a).await.unwrap().bytes().await.unwrap();
        assert_eq!(&torn[..], b"ab");
        assert_eq!(taken(&faults), 2);
    }

    #[tokio::test]
    async fn a_large_file_fails_and_tears_as_a_small_one() {
        use crate::storage::transfer::{PART, put_file};
        let dir = tempfile::tempdir().unwrap();
        let (store, faults) = faulty(dir.path());
        let big = dir.path().join("big");
        std::fs::write(&big, vec![7u8; PART + 10]).unwrap();
        let at = Path::from("big");
        arm(&faults, Fault::Fail).unwrap();
        assert!(put_file(&store, &at, &big).await.is_err());
        assert!(store.get(&at).await.is_err(), "nothing written");
        arm(&faults, Fault::Tear).unwrap();
        assert!(put_file(&store, &at, &big).await.is_err());
        let torn = store.get(&at).await.unwrap().bytes().await.unwrap();
        assert_eq!(torn.len(), (PART + 10) / 2);
        assert_eq!(taken(&faults), 2);
        assert_eq!(
            put_file(&store, &at, &big).await.unwrap().size,
            PART as u64 + 10
        );
    }

    #[tokio::test]
    async fn a_fault_armed_for_a_path_lets_other_writes_pass() {
        let dir = tempfile::tempdir().unwrap();
        let (store, faults) = faulty(dir.path());
        arm_for(&faults, Fault::Fail, "chk-1/_metadata").unwrap();
        let state = Path::from("j/chk-1/state");
        store.put(&state, Bytes::from("1").into()).await.unwrap();
        assert_eq!(taken(&faults), 0);
        let metadata = Path::from("j/chk-1/_metadata");
        assert!(
            store
                .put(&metadata, Bytes::from("{}").into())
                .await
                .is_err()
        );
        assert_eq!(taken(&faults), 1);
        store
            .put(&metadata, Bytes::from("{}").into())
            .await
            .unwrap();
    }
}
