//! The limits a guest runs under, and where compiled code is cached.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Limits and caches of the Wasm host. Every field has a default that suits
/// one machine; the CLI and the worker's configuration override them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct HostConfig {
    /// Linear memory one operator instance may use, in bytes. A guest that
    /// asks for more fails its task with a "memory limit" error. Default
    /// 256 MiB: large enough for a Python or JavaScript runtime, small
    /// enough that a memory bomb cannot take the worker down.
    pub memory_limit_bytes: u64,
    /// Time one call into a guest (one batch) may take, in milliseconds: an
    /// endless loop is stopped after this (epoch interruption), and so is a
    /// wait in WASI (a sleep, a poll on something not ready), each with a
    /// "deadline" error; a cancel therefore never waits longer for a call.
    /// Default 5,000 ms: a batch normally takes well under 10 ms.
    pub call_timeout_ms: u64,
    /// How often the deadline clock ticks (epoch interruption), in
    /// milliseconds; the deadline is enforced to within one tick.
    pub epoch_tick_ms: u64,
    /// Records one call may emit (main and side outputs together). Default
    /// 1,000,000: a batch of 1,024 records fanning out a thousandfold.
    pub max_emit_records: u64,
    /// Bytes of records one call may emit. Default 256 MiB.
    pub max_emit_bytes: u64,
    /// Bytes of log lines (stdout, stderr, `log`) an instance may write per
    /// second; what is over is dropped and counted, and the count logged.
    /// Default 64 KiB.
    pub log_bytes_per_second: u64,
    /// Bytes of keyed state (keys and values) one operator instance may
    /// hold. Default 1 GiB. With RocksDB the count is RocksDB's estimate
    /// of its live data and memtables, so it may run ahead or behind by a
    /// memtable.
    pub max_state_bytes: u64,
    /// Keyed state entries one operator instance may hold: a value, a list
    /// or a map of one key counts one. Default 10,000,000.
    pub max_state_entries: u64,
    /// Timers one operator instance may have registered. Default
    /// 1,000,000.
    pub max_timers: u64,
    /// Component instances the pooling allocator reserves room for (one per
    /// live operator instance plus one per component being checked).
    pub max_instances: u32,
    /// Directory for compiled components (`<sha256>.cwasm`, per engine
    /// build); `None` keeps them in memory only.
    pub cache_dir: Option<PathBuf>,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            memory_limit_bytes: 256 << 20,
            call_timeout_ms: 5_000,
            epoch_tick_ms: 10,
            max_emit_records: 1_000_000,
            max_emit_bytes: 256 << 20,
            log_bytes_per_second: 64 << 10,
            max_state_bytes: 1 << 30,
            max_state_entries: 10_000_000,
            max_timers: 1_000_000,
            max_instances: 256,
            cache_dir: None,
        }
    }
}

impl HostConfig {
    /// The epoch tick as a duration.
    pub fn tick(&self) -> Duration {
        Duration::from_millis(self.epoch_tick_ms.max(1))
    }

    /// This configuration with a job's `limits` applied: each may lower
    /// the worker's value, none may raise it (the worker's is the cap).
    pub fn limited(&self, limits: &weir_model::limits::GuestLimits) -> Result<HostConfig, String> {
        let lower = |name: &str, asked: Option<u64>, cap: u64| match asked {
            Some(asked) if asked > cap => Err(format!(
                "the job's [limits] {name} = {asked} is above this worker's {cap}"
            )),
            Some(asked) => Ok(asked),
            None => Ok(cap),
        };
        Ok(HostConfig {
            call_timeout_ms: lower(
                "call-timeout-ms",
                limits.call_timeout_ms,
                self.call_timeout_ms,
            )?,
            memory_limit_bytes: match limits.memory_limit_mib {
                None => self.memory_limit_bytes,
                mib => lower("memory-limit-mib", mib, self.memory_limit_bytes >> 20)? << 20,
            },
            max_emit_records: lower(
                "max-emit-records",
                limits.max_emit_records,
                self.max_emit_records,
            )?,
            max_emit_bytes: lower("max-emit-bytes", limits.max_emit_bytes, self.max_emit_bytes)?,
            log_bytes_per_second: lower(
                "log-bytes-per-second",
                limits.log_bytes_per_second,
                self.log_bytes_per_second,
            )?,
            max_state_bytes: lower(
                "max-state-bytes",
                limits.max_state_bytes,
                self.max_state_bytes,
            )?,
            max_state_entries: lower(
                "max-state-entries",
                limits.max_state_entries,
                self.max_state_entries,
            )?,
            max_timers: lower("max-timers", limits.max_timers, self.max_timers)?,
            ..self.clone()
        })
    }

    /// The deadline of one call.
    pub fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.call_timeout_ms.max(1))
    }

    /// The deadline of one call, in ticks.
    pub fn deadline_ticks(&self) -> u64 {
        self.call_timeout_ms
            .div_ceil(self.epoch_tick_ms.max(1))
            .max(1)
    }
}
