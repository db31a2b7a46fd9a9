//! The guest limits of a process that runs operators (`weir run`,
//! `weir local`, `weir worker`): each is the worker-wide default of a
//! job's `[limits]` setting of the same name, and its cap.

use std::path::PathBuf;

use weir_host::HostConfig;

/// A positive number.
fn positive() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(1..)
}

/// Guest limits, per operator instance (see docs/security.md).
#[derive(clap::Args)]
pub struct LimitArgs {
    /// Linear memory per operator instance, in MiB (at most 4096, all a
    /// 32-bit WebAssembly memory can address).
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=4096),
        default_value_t = HostConfig::default().memory_limit_bytes >> 20)]
    memory_limit_mib: u64,
    /// Wall-clock time one call into an operator may take, running or
    /// waiting, in milliseconds.
    #[arg(long, value_name = "MS", value_parser = positive(),
        default_value_t = HostConfig::default().call_timeout_ms)]
    call_timeout_ms: u64,
    /// Records one call may emit.
    #[arg(long, value_name = "N", value_parser = positive(),
        default_value_t = HostConfig::default().max_emit_records)]
    max_emit_records: u64,
    /// Bytes of records one call may emit.
    #[arg(long, value_name = "BYTES", value_parser = positive(),
        default_value_t = HostConfig::default().max_emit_bytes)]
    max_emit_bytes: u64,
    /// Log bytes an operator instance may write per second (the rest is
    /// dropped and counted).
    #[arg(long, value_name = "BYTES", value_parser = positive(),
        default_value_t = HostConfig::default().log_bytes_per_second)]
    log_bytes_per_second: u64,
    /// Bytes of keyed state (keys and values) per operator instance.
    #[arg(long, value_name = "BYTES", value_parser = positive(),
        default_value_t = HostConfig::default().max_state_bytes)]
    max_state_bytes: u64,
    /// Keyed state entries per operator instance.
    #[arg(long, value_name = "N", value_parser = positive(),
        default_value_t = HostConfig::default().max_state_entries)]
    max_state_entries: u64,
    /// Timers registered per operator instance.
    #[arg(long, value_name = "N", value_parser = positive(),
        default_value_t = HostConfig::default().max_timers)]
    max_timers: u64,
}

impl LimitArgs {
    /// The host's configuration: these limits, compiled code cached in
    /// `cache_dir`.
    pub fn host_config(&self, cache_dir: PathBuf) -> HostConfig {
        HostConfig {
            memory_limit_bytes: self.memory_limit_mib << 20,
            call_timeout_ms: self.call_timeout_ms,
            max_emit_records: self.max_emit_records,
            max_emit_bytes: self.max_emit_bytes,
            log_bytes_per_second: self.log_bytes_per_second,
            max_state_bytes: self.max_state_bytes,
            max_state_entries: self.max_state_entries,
            max_timers: self.max_timers,
            cache_dir: Some(cache_dir),
            ..HostConfig::default()
        }
    }
}
