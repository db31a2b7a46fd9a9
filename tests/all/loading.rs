//! Components that are not operators are refused with an error that says why.

use weir_host::LoadError;

use crate::{fixtures, runtime};

#[test]
fn not_wasm() {
    let rt = runtime();
    let err = rt.load(b"#!/bin/sh\necho hello\n").err().unwrap();
    assert!(matches!(err, LoadError::NotWasm), "{err}");
    assert!(
        err.to_string().contains("not a WebAssembly component"),
        "{err}"
    );
}

#[test]
fn a_core_module_is_not_a_component() {
    let rt = runtime();
    // The smallest valid core module: magic and version 1.
    let err = rt.load(b"\0asm\x01\0\0\0").err().unwrap();
    assert!(matches!(err, LoadError::CoreModule), "{err}");
    assert!(err.to_string().contains("core WebAssembly module"), "{err}");
}

#[test]
fn a_component_of_another_world() {
    let rt = runtime();
    // An empty component: valid, exports nothing.
    let err = rt.load(b"\0asm\x0d\0\x01\0").err().unwrap();
    assert!(matches!(err, LoadError::WrongWorld(_)), "{err}");
    assert!(err.to_string().contains("weir:operator"), "{err}");
}

#[test]
fn a_component_that_imports_what_the_host_does_not_provide() {
    let rt = runtime();
    let bytes = wat::parse_file(
        weir_tests::workspace_root().join("tests/guests/fixtures/unknown-import.wat"),
    )
    .unwrap();
    let err = rt.load(&bytes).err().unwrap();
    assert!(matches!(err, LoadError::WrongWorld(_)), "{err}");
    let shown = err.to_string();
    assert!(shown.contains("evil:net/sockets@1.0.0"), "{shown}");
}

#[test]
fn a_corrupt_component() {
    let rt = runtime();
    let mut bytes = std::fs::read(weir_tests::guest("test-guests")).unwrap();
    bytes.truncate(bytes.len() / 2);
    let err = rt.load(&bytes).err().unwrap();
    assert!(matches!(err, LoadError::Invalid(_)), "{err}");
}

#[test]
fn operators_are_listed_and_the_compiled_artifact_is_cached() {
    let dir = tempfile::tempdir().unwrap();
    let config = weir_host::HostConfig {
        cache_dir: Some(dir.path().to_path_buf()),
        max_instances: 8,
        ..Default::default()
    };
    let rt = weir_host::WasmRuntime::new(config.clone()).unwrap();
    let c = rt.load_file(&weir_tests::guest("test-guests")).unwrap();
    assert!(c.operator("fragile").is_some());
    assert!(c.operator("nope").is_none());
    let cached: Vec<_> = walk(dir.path());
    assert_eq!(cached.len(), 1, "{cached:?}");
    assert!(
        cached[0]
            .to_string_lossy()
            .ends_with(&format!("{}.cwasm", c.sha256))
    );
    // A new runtime (a new process) loads the artifact instead of compiling.
    let again = weir_host::WasmRuntime::new(config).unwrap();
    let c2 = again.load_file(&weir_tests::guest("test-guests")).unwrap();
    assert_eq!(c2.operators.len(), c.operators.len());
    drop(fixtures(&rt));
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
