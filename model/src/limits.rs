//! The guest limits a job asks for: the manifest's `[limits]`.
//!
//! Every limit has a worker-wide value (the host's configuration), which is
//! both the default and the cap: a job may ask for less (a tighter deadline,
//! less memory, smaller quotas), never for more. A worker refuses to run a
//! job whose limits are above its own, naming the setting.
//!
//! ```toml
//! [limits]
//! call-timeout-ms = 1000        # running or waiting, per call into a guest
//! memory-limit-mib = 64         # linear memory per operator instance
//! max-emit-records = 100000     # records one call may emit
//! max-emit-bytes = 16777216     # bytes one call may emit
//! log-bytes-per-second = 4096   # log lines per instance and second
//! max-state-bytes = 67108864     # keyed state (keys and values) per instance
//! max-state-entries = 1000000    # keyed state entries per instance
//! max-timers = 100000            # timers registered per instance
//! ```

use serde::{Deserialize, Serialize};

/// What a job asks for (`None`: the worker's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct GuestLimits {
    /// Time one call into a guest may take, ms.
    #[serde(default)]
    pub call_timeout_ms: Option<u64>,
    /// Linear memory per operator instance, MiB.
    #[serde(default)]
    pub memory_limit_mib: Option<u64>,
    /// Records one call may emit.
    #[serde(default)]
    pub max_emit_records: Option<u64>,
    /// Bytes of records one call may emit.
    #[serde(default)]
    pub max_emit_bytes: Option<u64>,
    /// Log bytes per instance and second.
    #[serde(default)]
    pub log_bytes_per_second: Option<u64>,
    /// Bytes of keyed state (keys and values) per instance.
    #[serde(default)]
    pub max_state_bytes: Option<u64>,
    /// Keyed state entries (a value, a list, a map, per key) per instance.
    #[serde(default)]
    pub max_state_entries: Option<u64>,
    /// Timers registered per instance.
    #[serde(default)]
    pub max_timers: Option<u64>,
}

impl GuestLimits {
    /// Every limit given is positive.
    pub fn check(&self) -> Result<(), String> {
        for (name, value) in self.named() {
            if value == Some(0) {
                return Err(format!("[limits] {name} must be at least 1"));
            }
        }
        Ok(())
    }

    /// Each limit with its manifest name.
    pub fn named(&self) -> [(&'static str, Option<u64>); 8] {
        [
            ("call-timeout-ms", self.call_timeout_ms),
            ("memory-limit-mib", self.memory_limit_mib),
            ("max-emit-records", self.max_emit_records),
            ("max-emit-bytes", self.max_emit_bytes),
            ("log-bytes-per-second", self.log_bytes_per_second),
            ("max-state-bytes", self.max_state_bytes),
            ("max-state-entries", self.max_state_entries),
            ("max-timers", self.max_timers),
        ]
    }
}
