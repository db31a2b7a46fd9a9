//! The SDK's view of the host: reads and logging go through [`HostApi`], so
//! the same operator code runs inside Wasm (where the WIT imports answer) and
//! natively under [`crate::testing`] (where an in-memory host answers).

use std::cell::RefCell;

use crate::__private::bindings::weir::operator::types::{Packed, StateKey, StateKind, StateTtl};
use crate::LogLevel;

/// Reads and log lines; effects (outputs, state and timer changes) are not
/// here: the driver collects them per batch and hands them over at its end.
pub(crate) trait HostApi {
    fn declare_state(&mut self, name: &str, kind: StateKind) -> Result<u32, String>;
    fn declare_state_ttl(
        &mut self,
        name: &str,
        kind: StateKind,
        ttl: StateTtl,
    ) -> Result<u32, String>;
    /// A state whose values are rows of `value_type` (the type's text).
    fn declare_typed_state(
        &mut self,
        name: &str,
        kind: StateKind,
        ttl: Option<StateTtl>,
        value_type: &str,
    ) -> Result<u32, String> {
        let _ = (name, kind, ttl, value_type);
        Err("this host keeps no typed state".into())
    }
    /// For each key, the value of each state (key-major), as the contract's
    /// `get-values` answers: the values packed (empty when unset), and
    /// which are set.
    fn get_values(&mut self, states: &[u32], keys: &[&[u8]]) -> (Packed, Vec<bool>);
    fn get_list(&mut self, key: &StateKey) -> Vec<Vec<u8>>;
    fn get_entry(&mut self, key: &StateKey, map_key: &[u8]) -> Option<Vec<u8>>;
    fn get_entries(&mut self, key: &StateKey) -> Vec<(Vec<u8>, Vec<u8>)>;
    fn log(&mut self, level: LogLevel, message: &str);
}

/// The real host, through the component's imports.
pub(crate) struct WasmHost;

#[cfg(target_family = "wasm")]
mod wasm {
    use super::*;
    use crate::__private::bindings::weir::operator::host as imports;
    use crate::__private::bindings::weir::operator::types::LogLevel as WitLevel;

    impl HostApi for WasmHost {
        fn declare_state(&mut self, name: &str, kind: StateKind) -> Result<u32, String> {
            imports::declare_state(name, kind)
        }
        fn declare_state_ttl(
            &mut self,
            name: &str,
            kind: StateKind,
            ttl: StateTtl,
        ) -> Result<u32, String> {
            imports::declare_state_ttl(name, kind, ttl)
        }
        fn declare_typed_state(
            &mut self,
            name: &str,
            kind: StateKind,
            ttl: Option<StateTtl>,
            value_type: &str,
        ) -> Result<u32, String> {
            imports::declare_typed_state(name, kind, ttl, value_type)
        }
        fn get_values(&mut self, states: &[u32], keys: &[&[u8]]) -> (Packed, Vec<bool>) {
            imports::get_values(states, &crate::host::pack(keys))
        }
        fn get_list(&mut self, key: &StateKey) -> Vec<Vec<u8>> {
            imports::get_list(key)
        }
        fn get_entry(&mut self, key: &StateKey, map_key: &[u8]) -> Option<Vec<u8>> {
            imports::get_entry(key, map_key)
        }
        fn get_entries(&mut self, key: &StateKey) -> Vec<(Vec<u8>, Vec<u8>)> {
            imports::get_entries(key)
        }
        fn log(&mut self, level: LogLevel, message: &str) {
            let level = match level {
                LogLevel::Debug => WitLevel::Debug,
                LogLevel::Info => WitLevel::Info,
                LogLevel::Warn => WitLevel::Warn,
                LogLevel::Error => WitLevel::Error,
            };
            imports::log(level, message);
        }
    }
}

#[cfg(not(target_family = "wasm"))]
impl HostApi for WasmHost {
    fn declare_state(&mut self, _: &str, _: StateKind) -> Result<u32, String> {
        Err(NATIVE.into())
    }
    fn declare_state_ttl(&mut self, _: &str, _: StateKind, _: StateTtl) -> Result<u32, String> {
        Err(NATIVE.into())
    }
    fn get_values(&mut self, _: &[u32], _: &[&[u8]]) -> (Packed, Vec<bool>) {
        panic!("{NATIVE}")
    }
    fn get_list(&mut self, _: &StateKey) -> Vec<Vec<u8>> {
        panic!("{NATIVE}")
    }
    fn get_entry(&mut self, _: &StateKey, _: &[u8]) -> Option<Vec<u8>> {
        panic!("{NATIVE}")
    }
    fn get_entries(&mut self, _: &StateKey) -> Vec<(Vec<u8>, Vec<u8>)> {
        panic!("{NATIVE}")
    }
    fn log(&mut self, level: LogLevel, message: &str) {
        eprintln!("[{level:?}] {message}");
    }
}

#[cfg(not(target_family = "wasm"))]
const NATIVE: &str =
    "no Weir host outside WebAssembly: run operators natively with weir::testing::Harness";

thread_local! {
    static HOST: RefCell<Box<dyn HostApi>> = RefCell::new(Box::new(WasmHost));
}

/// Byte strings as the contract's `packed`.
pub(crate) fn pack<T: AsRef<[u8]>>(strings: impl IntoIterator<Item = T>) -> Packed {
    let mut data = Vec::new();
    let mut ends = Vec::new();
    for s in strings {
        data.extend_from_slice(s.as_ref());
        ends.push(data.len() as u32);
    }
    Packed { data, ends }
}

/// The strings of a `packed`, borrowed; checked against its data.
pub(crate) fn unpacked(p: &Packed) -> Result<Vec<&[u8]>, String> {
    let mut out = Vec::with_capacity(p.ends.len());
    let mut from = 0usize;
    for &end in &p.ends {
        let bytes = p.data.get(from..end as usize).ok_or_else(|| {
            format!(
                "a packed string ends at {end}, outside its {} bytes",
                p.data.len()
            )
        })?;
        out.push(bytes);
        from = end as usize;
    }
    Ok(out)
}

/// Run `f` with the current host.
pub(crate) fn with<R>(f: impl FnOnce(&mut dyn HostApi) -> R) -> R {
    HOST.with(|h| f(&mut **h.borrow_mut()))
}

/// Replace the host (the testing harness installs an in-memory one).
pub(crate) fn install(host: Box<dyn HostApi>) {
    HOST.with(|h| *h.borrow_mut() = host);
}

pub(crate) fn log(level: LogLevel, message: &str) {
    with(|h| h.log(level, message));
}
