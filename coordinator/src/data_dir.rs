//! The coordinator's data directory (`--data-dir`): job records
//! (`jobs/`), bundles (`blobs/`), the checkpoint storage (`checkpoints/`).
//! A data directory has one coordinator: [`DataDirLock`] holds an OS file
//! lock on `coordinator.lock` while the coordinator runs, and a second
//! coordinator started on the same directory refuses to start, naming the
//! holder. (Standby coordinators will take over through leader election
//! instead.)

use std::io::{Read, Seek, Write};
use std::path::Path;

/// The lock of a data directory, held until dropped (or the process ends).
#[derive(Debug)]
pub struct DataDirLock {
    _file: std::fs::File,
}

impl DataDirLock {
    /// Take the lock of `data_dir` (creating it), or say who holds it.
    pub fn take(data_dir: &Path) -> anyhow::Result<DataDirLock> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", data_dir.display()))?;
        let path = data_dir.join("coordinator.lock");
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = match holder.trim() {
                    "" => "its process is unknown".to_owned(),
                    h => h.to_owned(),
                };
                anyhow::bail!(
                    "the data directory {} is in use by another coordinator ({holder}); stop it, or give this one another --data-dir",
                    data_dir.display()
                );
            }
            Err(std::fs::TryLockError::Error(e)) => {
                anyhow::bail!("cannot lock {}: {e}", path.display())
            }
        }
        file.set_len(0)?;
        file.rewind()?;
        write!(file, "process {} on {}", std::process::id(), hostname())?;
        file.sync_all()?;
        Ok(DataDirLock { _file: file })
    }
}

/// This machine's name, for the lock's holder.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "this machine".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_directory_has_one_coordinator() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::take(dir.path()).unwrap();
        let e = DataDirLock::take(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("in use by another coordinator")
                && e.contains(&format!("process {}", std::process::id())),
            "{e}"
        );
        drop(first);
        DataDirLock::take(dir.path()).unwrap();
    }
}
