//! The process-wide Wasm runtime: engine, linker, epoch clock and the cache
//! of compiled components.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};

use crate::bindings::{OperatorComponent, OperatorComponentPre};
use crate::config::HostConfig;
use crate::error::{LoadError, TaskIdent};
use crate::imports::{Limiter, Quotas, Staged, TaskState};
use crate::types::OperatorDescriptor;
use crate::wasi::{self, LastWords};
use weir_state::{MemoryStateBackend, StateBackend};

/// A component compiled, linked and checked against the operator world.
pub struct LoadedComponent {
    /// Hex sha256 of the component's bytes.
    pub sha256: String,
    /// The operators it exports.
    pub operators: Vec<OperatorDescriptor>,
    pub(crate) pre: OperatorComponentPre<TaskState>,
}

impl LoadedComponent {
    /// What the planner needs to know of the operators: names, and which
    /// ones need a keyed input; the component is called `component` in its
    /// job.
    pub fn exported_as(&self, component: &str) -> Vec<weir_model::ExportedOperator> {
        self.operators
            .iter()
            .map(|o| {
                use crate::types::OperatorKind as K;
                use weir_model::OperatorRole as R;
                let role = match o.kind {
                    K::Map | K::FlatMap | K::Filter => R::Transform,
                    K::KeyedProcess => R::KeyedProcess,
                    K::TimestampAssigner => R::TimestampAssigner,
                    K::Window => R::Window,
                    K::WindowProcess => R::WindowProcess,
                };
                // Checked when the component was loaded.
                let parse = |t: &Option<String>| t.as_deref().and_then(|t| t.parse().ok());
                weir_model::ExportedOperator {
                    component: component.to_owned(),
                    name: o.name.clone(),
                    keyed: role.keyed(),
                    role,
                    input: parse(&o.input_type),
                    output: parse(&o.output_type),
                    passes_through: matches!(o.kind, K::Filter | K::TimestampAssigner),
                }
            })
            .collect()
    }

    /// The operator called `name`, if the component exports it.
    pub fn operator(&self, name: &str) -> Option<&OperatorDescriptor> {
        self.operators.iter().find(|o| o.name == name)
    }
}

/// The wasmtime engine and everything shared by all operator instances of a
/// process. Create one per process and share it (`Arc`).
pub struct WasmRuntime {
    engine: Engine,
    linker: Linker<TaskState>,
    config: HostConfig,
    loaded: Mutex<HashMap<String, Arc<LoadedComponent>>>,
    stop_ticker: Arc<AtomicBool>,
    engine_dir: String,
}

impl Drop for WasmRuntime {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

/// The first 8 bytes of a core module (magic, version 1).
const CORE_MODULE_HEADER: [u8; 8] = [0, b'a', b's', b'm', 1, 0, 0, 0];

impl WasmRuntime {
    /// Build the engine (pooling allocator sized by `config`, epoch
    /// interruption for call deadlines), link the host imports and the
    /// locked-down WASI, and start the epoch clock.
    pub fn new(config: HostConfig) -> anyhow::Result<Arc<WasmRuntime>> {
        let mut c = Config::new();
        c.wasm_component_model(true);
        c.epoch_interruption(true);
        // Component-model async is not used; without it every call is about
        // twice as cheap.
        c.concurrency_support(false);
        // `WEIR_WASM_PROFILER=perfmap`: guest functions named in
        // /tmp/perf-<pid>.map, for `perf` (see docs/benchmarks.md).
        if std::env::var("WEIR_WASM_PROFILER").as_deref() == Ok("perfmap") {
            c.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let n = config.max_instances.max(1);
        let mut pool = PoolingAllocationConfig::default();
        // A component holds several core instances and tables: a Rust
        // guest 3 core instances and one memory, a Python one
        // (componentize-py) 14 core instances and several memories. Every
        // instance may be of the largest kind (slots are address space and
        // bookkeeping, not memory in use).
        pool.total_component_instances(n)
            .total_core_instances(n * 16)
            .total_memories(n * 4)
            .total_tables(n * 16)
            .max_memory_size(config.memory_limit_bytes as usize);
        c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine =
            Engine::new(&c).map_err(|e| anyhow::anyhow!("cannot create the Wasm engine: {e}"))?;

        let mut linker: Linker<TaskState> = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|e| anyhow::anyhow!("cannot link WASI: {e}"))?;
        wasi::bound_waits(&mut linker)
            .map_err(|e| anyhow::anyhow!("cannot bound WASI's waits: {e}"))?;
        OperatorComponent::add_to_linker::<TaskState, HasSelf<TaskState>>(&mut linker, |s| s)
            .map_err(|e| anyhow::anyhow!("cannot link the host imports: {e}"))?;

        let mut h = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        let engine_dir = format!("{:016x}", h.finish());

        let stop_ticker = Arc::new(AtomicBool::new(false));
        let (stop, ticking, tick) = (stop_ticker.clone(), engine.clone(), config.tick());
        std::thread::Builder::new()
            .name("weir-epoch".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    ticking.increment_epoch();
                }
            })?;

        Ok(Arc::new(WasmRuntime {
            engine,
            linker,
            config,
            loaded: Mutex::new(HashMap::new()),
            stop_ticker,
            engine_dir,
        }))
    }

    /// The limits this runtime enforces.
    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// Load a component from a file (see [`WasmRuntime::load`]).
    pub fn load_file(&self, path: &Path) -> Result<Arc<LoadedComponent>, LoadError> {
        let bytes = std::fs::read(path)
            .map_err(|e| LoadError::Host(format!("cannot read {}: {e}", path.display())))?;
        self.load(&bytes)
    }

    /// Compile (or take from the cache), link and check a component: it must
    /// be a component of the operator world. Returns what it exports.
    pub fn load(&self, bytes: &[u8]) -> Result<Arc<LoadedComponent>, LoadError> {
        if !bytes.starts_with(b"\0asm") {
            return Err(LoadError::NotWasm);
        }
        if bytes.starts_with(&CORE_MODULE_HEADER) {
            return Err(LoadError::CoreModule);
        }
        let sha256 = hex::encode(Sha256::digest(bytes));
        if let Some(c) = self
            .loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&sha256)
        {
            return Ok(c.clone());
        }
        let component = self.compile(bytes, &sha256)?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| LoadError::WrongWorld(format!("{e:#}")))?;
        let pre =
            OperatorComponentPre::new(pre).map_err(|e| LoadError::WrongWorld(format!("{e:#}")))?;

        let mut store = self.store(
            Arc::new(TaskIdent {
                job: "(loading)".into(),
                operator: "(list-operators)".into(),
                subtask: 0,
            }),
            Box::new(MemoryStateBackend::new()),
            &self.config,
        );
        let operators = pre
            .instantiate(&mut store)
            .and_then(|b| b.weir_operator_operators().call_list_operators(&mut store))
            .map_err(|e| LoadError::Invalid(format!("list-operators failed: {e:#}")))?;
        for o in &operators {
            for (what, ty) in [("input", &o.input_type), ("output", &o.output_type)] {
                if let Some(Err(e)) = ty.as_deref().map(str::parse::<weir_model::types::Type>) {
                    return Err(LoadError::Invalid(format!(
                        "operator `{}` declares an {what} type that is not one: {e}",
                        o.name
                    )));
                }
            }
        }
        let loaded = Arc::new(LoadedComponent {
            sha256: sha256.clone(),
            operators,
            pre,
        });
        self.loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(sha256, loaded.clone());
        Ok(loaded)
    }

    fn cache_path(&self, sha256: &str) -> Option<PathBuf> {
        let dir = self.config.cache_dir.as_ref()?;
        Some(dir.join(&self.engine_dir).join(format!("{sha256}.cwasm")))
    }

    fn compile(&self, bytes: &[u8], sha256: &str) -> Result<Component, LoadError> {
        let path = self.cache_path(sha256);
        if let Some(path) = path.as_ref().filter(|p| p.exists()) {
            // SAFETY: the file was written by `Component::serialize` of an
            // engine with the same compatibility hash (the directory is named
            // after it), in a directory that only this host writes; a file
            // that fails to load is compiled again.
            #[expect(
                unsafe_code,
                reason = "deserializing a precompiled component; see SAFETY above"
            )]
            match unsafe { Component::deserialize_file(&self.engine, path) } {
                Ok(c) => return Ok(c),
                Err(e) => tracing::warn!("ignoring cached {}: {e}", path.display()),
            }
        }
        let started = std::time::Instant::now();
        let component = Component::new(&self.engine, bytes)
            .map_err(|e| LoadError::Invalid(format!("{e:#}")))?;
        tracing::info!(
            sha256,
            ms = started.elapsed().as_millis() as u64,
            "compiled component"
        );
        if let Some(path) = path
            && let Err(e) = write_atomically(&path, &component)
        {
            tracing::warn!(
                "cannot cache the compiled component at {}: {e}",
                path.display()
            );
        }
        Ok(component)
    }

    /// A fresh `Store` for one operator instance, with its limits.
    pub(crate) fn store(
        &self,
        ident: Arc<TaskIdent>,
        backend: Box<dyn StateBackend>,
        config: &HostConfig,
    ) -> Store<TaskState> {
        let last_words = LastWords::default();
        let log_budget = wasi::LogBudget::new(ident.clone(), config.log_bytes_per_second);
        let state = TaskState {
            wasi: wasi::locked_down(ident.clone(), last_words.clone(), log_budget.clone()),
            log_budget,
            ident,
            table: ResourceTable::new(),
            limiter: Limiter {
                max_memory: config.memory_limit_bytes as usize,
                exceeded: None,
                current: 0,
            },
            backend,
            state_codec: Default::default(),
            declarations: Default::default(),
            creating: false,
            staged: Staged::default(),
            watermark: None,
            last_words,
            call_deadline: std::time::Instant::now() + config.call_timeout(),
            quotas: Quotas {
                emit_records: config.max_emit_records,
                emit_bytes: config.max_emit_bytes,
                state_bytes: config.max_state_bytes,
                state_entries: config.max_state_entries,
                timers: config.max_timers,
            },
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_trap();
        store.set_epoch_deadline(config.deadline_ticks());
        store
    }
}

fn write_atomically(path: &Path, component: &Component) -> anyhow::Result<()> {
    let bytes = component.serialize().map_err(|e| anyhow::anyhow!("{e}"))?;
    let dir = path.parent().expect("cache paths have a parent");
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("component");
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}
