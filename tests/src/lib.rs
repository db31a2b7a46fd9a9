//! Helpers for Weir's integration tests: building the guest components the
//! tests run, and finding them; a free port; a Kafka-protocol broker
//! ([`kafka`]).

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

pub mod kafka;

/// A free port on loopback (free when asked).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is in the workspace")
        .to_path_buf()
}

/// Cargo's target directory (`CARGO_TARGET_DIR`, else `<root>/target`).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

static BUILT: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// The component of the guest crate `package`, built for `wasm32-wasip2`
/// (release) on first use in this process.
pub fn guest(package: &str) -> PathBuf {
    let mut built = BUILT.lock().unwrap_or_else(|p| p.into_inner());
    let built = built.get_or_insert_with(HashSet::new);
    let path = target_dir()
        .join("wasm32-wasip2/release")
        .join(format!("{}.wasm", package.replace('-', "_")));
    if built.insert(package.to_owned()) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .current_dir(workspace_root())
            .args([
                "build",
                "--quiet",
                "--release",
                "--target",
                "wasm32-wasip2",
                "-p",
                package,
            ])
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the guest {package} failed");
    }
    assert!(path.is_file(), "no component at {}", path.display());
    path
}
