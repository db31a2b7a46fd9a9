//! The components of one job: most jobs have one, a job written in several
//! languages has one per language, each named as the bundle names it.

use std::sync::Arc;

use crate::error::LoadError;
use crate::runtime::{LoadedComponent, WasmRuntime};

/// One component of a job: its name in the bundle, loaded, and its bytes
/// (which a coordinator sends its workers).
#[derive(Clone)]
pub struct JobComponent {
    /// Its name in the bundle.
    pub name: String,
    /// Compiled, linked and checked.
    pub loaded: Arc<LoadedComponent>,
    /// The component as uploaded.
    pub bytes: Arc<Vec<u8>>,
}

/// A component of a job that cannot be loaded.
#[derive(Debug, thiserror::Error)]
#[error("{}{error}", name.as_ref().map(|n| format!("component `{n}`: ")).unwrap_or_default())]
pub struct JobComponentError {
    /// Which component, in a job of several.
    pub name: Option<String>,
    /// Why.
    pub error: LoadError,
}

/// The components of one job, in name order.
#[derive(Clone)]
pub struct JobComponents(Vec<JobComponent>);

impl JobComponents {
    /// Load (compile, or take from the cache; link; check) every component
    /// of `files`, (name, bytes) pairs.
    pub fn load(
        runtime: &WasmRuntime,
        files: Vec<(String, Vec<u8>)>,
    ) -> Result<JobComponents, JobComponentError> {
        let several = files.len() > 1;
        let mut out = Vec::with_capacity(files.len());
        for (name, bytes) in files {
            let loaded = runtime.load(&bytes).map_err(|error| JobComponentError {
                name: several.then(|| name.clone()),
                error,
            })?;
            out.push(JobComponent {
                name,
                loaded,
                bytes: Arc::new(bytes),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(JobComponents(out))
    }

    /// The one component of a job that runs in this process: its bytes are
    /// not kept (it is not sent to workers).
    pub fn local(loaded: Arc<LoadedComponent>) -> JobComponents {
        JobComponents(vec![JobComponent {
            name: weir_model::bundle::DEFAULT_COMPONENT.to_owned(),
            loaded,
            bytes: Arc::default(),
        }])
    }

    /// The one component of a job of one, from a file.
    pub fn from_file(
        runtime: &WasmRuntime,
        path: &std::path::Path,
    ) -> Result<JobComponents, JobComponentError> {
        let bytes = std::fs::read(path).map_err(|e| JobComponentError {
            name: None,
            error: LoadError::Host(format!("cannot read {}: {e}", path.display())),
        })?;
        let name = weir_model::bundle::DEFAULT_COMPONENT.to_owned();
        JobComponents::load(runtime, vec![(name, bytes)])
    }

    /// The job's components.
    pub fn iter(&self) -> impl Iterator<Item = &JobComponent> {
        self.0.iter()
    }

    /// The component called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<LoadedComponent>> {
        self.0.iter().find(|c| c.name == name).map(|c| &c.loaded)
    }

    /// What every component exports, for the planner.
    pub fn exported(&self) -> Vec<weir_model::ExportedOperator> {
        self.0
            .iter()
            .flat_map(|c| c.loaded.exported_as(&c.name))
            .collect()
    }
}
