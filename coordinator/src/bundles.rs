//! Uploaded bundles. An upload is accepted only whole: a safe archive, a
//! manifest that parses, components of the operator world whose exports
//! the manifest can use. It is stored content-addressed (its id is the
//! archive's sha256) as blobs, the archive and each component, plus a
//! metadata record; a failure at any step leaves nothing stored.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::ErrorKind;
use serde::{Deserialize, Serialize};
use tokio::sync::RwLock;
use weir_host::types::OperatorKind;
use weir_host::{JobComponents, WasmRuntime};
use weir_model::bundle::{BundleError, BundleFiles, DEFAULT_COMPONENT, unpack};
use weir_model::manifest::ParamSpec;
use weir_model::{ExportedOperator, Manifest, ManifestError, OperatorRole};

use crate::blob::{BlobStore, sha256_hex};
use crate::error::CoordinatorError;
use crate::{Submission, plan};

/// What the API tells about a bundle.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct BundleInfo {
    /// The bundle's id: the sha256 of its archive.
    pub id: String,
    /// The job's name, from the manifest.
    pub name: String,
    /// Size of the archive in bytes.
    pub size: u64,
    /// The sha256 of the component (its blob); of the first, by name, of
    /// a bundle of several; empty for a bundle of built-in operators only.
    pub component_sha256: String,
    /// Each component: its name and sha256 (one named `main` for a bundle
    /// of one component).
    #[serde(default)]
    pub components: Vec<ComponentInfo>,
    /// The operators the components export.
    pub operators: Vec<OperatorInfo>,
    /// The job's parameters.
    pub params: BTreeMap<String, ParamInfo>,
    /// When it was uploaded, ms since the epoch.
    pub uploaded_at_ms: i64,
}

/// One component of a bundle.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ComponentInfo {
    /// Its name in the bundle.
    pub name: String,
    /// The sha256 of its bytes (its blob).
    pub sha256: String,
}

/// An operator a bundle's component exports.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct OperatorInfo {
    /// Its name.
    pub name: String,
    /// `map`, `flat-map`, `filter` or `keyed-process`.
    pub kind: String,
    /// The component that exports it.
    #[serde(default)]
    pub component: String,
    /// The type of the records it reads, when it declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_type: Option<weir_model::types::Type>,
    /// The type of the records it writes, when it declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_type: Option<weir_model::types::Type>,
}

impl BundleInfo {
    /// What its components export, as checked at upload: what a
    /// submission is planned against (no component is compiled again).
    pub fn exported(&self) -> Vec<ExportedOperator> {
        self.operators
            .iter()
            .filter_map(|o| {
                let role = OperatorRole::of_kind(&o.kind)?;
                // Bundles stored before bundles had several components.
                let component = match o.component.as_str() {
                    "" => DEFAULT_COMPONENT.to_owned(),
                    c => c.to_owned(),
                };
                Some(ExportedOperator {
                    component,
                    name: o.name.clone(),
                    keyed: role.keyed(),
                    role,
                    input: o.input_type.clone(),
                    output: o.output_type.clone(),
                    passes_through: matches!(o.kind.as_str(), "filter" | "timestamp-assigner"),
                })
            })
            .collect()
    }
}

/// A declared parameter.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ParamInfo {
    /// Its default; required when absent.
    pub default: Option<String>,
    /// What it means.
    pub doc: Option<String>,
}

/// The bundles of a coordinator.
pub struct BundleStore {
    blobs: BlobStore,
    meta_dir: PathBuf,
    runtime: Arc<WasmRuntime>,
    max_unpacked: u64,
    index: RwLock<BTreeMap<String, BundleInfo>>,
    /// Turns to unpack and check an upload: a few at a time.
    unpacking: tokio::sync::Semaphore,
}

/// Uploads unpacked and checked at once; others wait their turn.
const CONCURRENT_UNPACKS: usize = 2;

impl BundleStore {
    /// The runtime components are loaded into.
    pub fn runtime(&self) -> &Arc<WasmRuntime> {
        &self.runtime
    }
}

fn kind_name(kind: OperatorKind) -> &'static str {
    match kind {
        OperatorKind::Map => "map",
        OperatorKind::FlatMap => "flat-map",
        OperatorKind::Filter => "filter",
        OperatorKind::KeyedProcess => "keyed-process",
        OperatorKind::TimestampAssigner => "timestamp-assigner",
        OperatorKind::Window => "window",
        OperatorKind::WindowProcess => "window-process",
    }
}

fn archive_error(e: BundleError) -> CoordinatorError {
    match e {
        BundleError::TooLarge(_) | BundleError::FileTooLarge(..) | BundleError::Bomb(_) => {
            CoordinatorError::new(ErrorKind::TooLarge, "bundle_too_large", e.to_string())
        }
        _ => CoordinatorError::invalid("bundle_invalid_archive", e.to_string()),
    }
}

impl BundleStore {
    /// Open the bundles kept under `data_dir` (metadata in `data_dir/bundles`).
    pub fn open(
        data_dir: &std::path::Path,
        blobs: BlobStore,
        runtime: Arc<WasmRuntime>,
        max_unpacked: u64,
    ) -> anyhow::Result<Self> {
        let meta_dir = data_dir.join("bundles");
        std::fs::create_dir_all(&meta_dir)?;
        let mut index = BTreeMap::new();
        for entry in std::fs::read_dir(&meta_dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "json") {
                let info: BundleInfo = serde_json::from_slice(&std::fs::read(&path)?)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
                index.insert(info.id.clone(), info);
            }
        }
        Ok(BundleStore {
            blobs,
            meta_dir,
            runtime,
            max_unpacked,
            index: RwLock::new(index),
            unpacking: tokio::sync::Semaphore::new(CONCURRENT_UNPACKS),
        })
    }

    /// Check and store an uploaded archive. Uploading the same archive again
    /// returns the stored bundle.
    pub async fn upload(&self, archive: Vec<u8>) -> Result<BundleInfo, CoordinatorError> {
        let id = sha256_hex(&archive);
        if let Some(info) = self.index.read().await.get(&id) {
            return Ok(info.clone());
        }
        // Unpacking is CPU work: off the executor, and a few at a time, so
        // that uploads (compression bombs among them) neither stall other
        // requests nor hold more than a few archives' worth of memory.
        let _turn = self
            .unpacking
            .acquire()
            .await
            .map_err(|e| CoordinatorError::internal(e.to_string()))?;
        let max_unpacked = self.max_unpacked;
        let (files, archive) =
            tokio::task::spawn_blocking(move || (unpack(&archive, max_unpacked), archive))
                .await
                .map_err(|e| CoordinatorError::internal(format!("unpacking the bundle: {e}")))?;
        let files = files.map_err(archive_error)?;
        let manifest = Manifest::parse(&files.manifest)
            .map_err(|e| CoordinatorError::unprocessable("manifest_invalid", e.to_string()))?;
        // Checked here, not only when planned: planning stops at a missing
        // parameter, before it looks at the functions.
        if files.components.is_empty()
            && let Some(why) = manifest.needs_component()
        {
            return Err(CoordinatorError::unprocessable("component_missing", why));
        }
        let runtime = self.runtime.clone();
        let files = files.components;
        let components = tokio::task::spawn_blocking(move || JobComponents::load(&runtime, files))
            .await
            .map_err(|e| CoordinatorError::internal(format!("checking the component: {e}")))?
            .map_err(|e| CoordinatorError::unprocessable("component_invalid", e.to_string()))?;
        // The manifest must be runnable by this component (parameters
        // without defaults are given at submission).
        let check = Submission {
            builtin_params: vec![("bundle_dir".into(), ".".into())],
            ..Submission::default()
        };
        match plan(&manifest, &check, &components.exported()) {
            Ok(_) | Err(ManifestError::MissingParam { .. }) => {}
            Err(e) => return Err(CoordinatorError::of_plan("manifest_invalid", e)),
        }
        let info = BundleInfo {
            id: id.clone(),
            name: manifest.job.name.clone(),
            size: archive.len() as u64,
            component_sha256: components
                .iter()
                .next()
                .map(|c| c.loaded.sha256.clone())
                .unwrap_or_default(),
            components: components
                .iter()
                .map(|c| ComponentInfo {
                    name: c.name.clone(),
                    sha256: c.loaded.sha256.clone(),
                })
                .collect(),
            operators: components
                .iter()
                .flat_map(|c| {
                    c.loaded.operators.iter().map(|o| OperatorInfo {
                        name: o.name.clone(),
                        kind: kind_name(o.kind).into(),
                        component: c.name.clone(),
                        // Checked when the component was loaded.
                        input_type: o.input_type.as_deref().and_then(|t| t.parse().ok()),
                        output_type: o.output_type.as_deref().and_then(|t| t.parse().ok()),
                    })
                })
                .collect(),
            params: manifest
                .params
                .iter()
                .map(|(name, spec)| {
                    let (default, doc) = match spec {
                        ParamSpec::Default(d) => (Some(d.clone()), None),
                        ParamSpec::Table { default, doc } => (default.clone(), doc.clone()),
                    };
                    (name.clone(), ParamInfo { default, doc })
                })
                .collect(),
            uploaded_at_ms: weir_model::now_ms(),
        };

        let mut index = self.index.write().await;
        if let Err(e) = self.store(&info, archive, &components).await {
            // Nothing half-stored: the blobs go unless another bundle uses them.
            self.forget_blobs(&info, &index).await;
            return Err(CoordinatorError::internal(format!(
                "storing the bundle: {e:#}"
            )));
        }
        index.insert(id, info.clone());
        Ok(info)
    }

    async fn store(
        &self,
        info: &BundleInfo,
        archive: Vec<u8>,
        components: &JobComponents,
    ) -> anyhow::Result<()> {
        for c in components.iter() {
            self.blobs.put(c.bytes.to_vec()).await?;
        }
        self.blobs.put(archive).await?;
        let path = self.meta_dir.join(format!("{}.json", info.id));
        let tmp = self.meta_dir.join(format!(".{}.tmp", info.id));
        tokio::fs::write(&tmp, serde_json::to_vec_pretty(info)?).await?;
        tokio::fs::rename(&tmp, &path).await?;
        Ok(())
    }

    async fn forget_blobs(&self, info: &BundleInfo, index: &BTreeMap<String, BundleInfo>) {
        for sha256 in blob_ids(info) {
            let shared = index
                .values()
                .any(|b| b.id != info.id && blob_ids(b).contains(&sha256));
            if !shared && let Err(e) = self.blobs.delete(&sha256).await {
                tracing::warn!("cannot delete blob {sha256}: {e:#}");
            }
        }
        if let Err(e) = self.blobs.delete(&info.id).await {
            tracing::warn!("cannot delete blob {}: {e:#}", info.id);
        }
    }

    /// Every bundle, oldest first.
    pub async fn list(&self) -> Vec<BundleInfo> {
        let mut all: Vec<BundleInfo> = self.index.read().await.values().cloned().collect();
        all.sort_by_key(|b| (b.uploaded_at_ms, b.id.clone()));
        all
    }

    /// One bundle.
    pub async fn get(&self, id: &str) -> Result<BundleInfo, CoordinatorError> {
        self.index
            .read()
            .await
            .get(id)
            .cloned()
            .ok_or_else(|| unknown(id))
    }

    /// The manifest and component of a bundle.
    pub async fn files(&self, id: &str) -> Result<BundleFiles, CoordinatorError> {
        self.get(id).await?;
        let archive = self
            .blobs
            .get(id)
            .await
            .map_err(|e| CoordinatorError::internal(format!("reading bundle {id}: {e:#}")))?;
        unpack(&archive, self.max_unpacked)
            .map_err(|e| CoordinatorError::internal(format!("reading bundle {id}: {e}")))
    }

    /// Remove a bundle, its archive, and its component unless another bundle
    /// uses it.
    pub async fn delete(&self, id: &str) -> Result<(), CoordinatorError> {
        let mut index = self.index.write().await;
        let info = index.get(id).cloned().ok_or_else(|| unknown(id))?;
        let path = self.meta_dir.join(format!("{id}.json"));
        tokio::fs::remove_file(&path)
            .await
            .map_err(|e| CoordinatorError::internal(format!("removing {}: {e}", path.display())))?;
        index.remove(id);
        self.forget_blobs(&info, &index).await;
        Ok(())
    }
}

/// The component blobs of a bundle (bundles stored before bundles had
/// several components list only `component_sha256`; a bundle of built-in
/// operators has none).
fn blob_ids(info: &BundleInfo) -> Vec<String> {
    let mut ids: Vec<String> = info.components.iter().map(|c| c.sha256.clone()).collect();
    if ids.is_empty() && !info.component_sha256.is_empty() {
        ids.push(info.component_sha256.clone());
    }
    ids
}

fn unknown(id: &str) -> CoordinatorError {
    CoordinatorError::not_found("bundle_not_found", format!("no bundle with id `{id}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_names_the_blobs_of_its_components_only() {
        let info = |sha: &str, components: &[&str]| BundleInfo {
            id: "b".into(),
            name: "j".into(),
            size: 1,
            component_sha256: sha.into(),
            components: components
                .iter()
                .map(|s| ComponentInfo {
                    name: "main".into(),
                    sha256: (*s).into(),
                })
                .collect(),
            operators: Vec::new(),
            params: BTreeMap::new(),
            uploaded_at_ms: 0,
        };
        assert_eq!(blob_ids(&info("a", &["a", "c"])), ["a", "c"]);
        // Stored before bundles had several components.
        assert_eq!(blob_ids(&info("a", &[])), ["a"]);
        // Built-in operators only: no blob, not one named "".
        assert!(blob_ids(&info("", &[])).is_empty());
    }
}
