//! A job's fault-tolerance settings: where its keyed state lives, how often
//! it is checkpointed, and how the job restarts after a failure. Written in
//! the manifest as three optional tables:
//!
//! ```toml
//! [state]
//! backend = "rocksdb"          # memory | rocksdb; default: the worker's
//!
//! [checkpoint]
//! interval-ms = 1000           # checkpoints are off without this table
//! mode = "exactly-once"        # exactly-once (aligned barriers) | at-least-once
//! timeout-ms = 600000          # a checkpoint not complete by then is aborted
//! min-pause-ms = 0             # from one checkpoint's end to the next trigger
//! max-concurrent = 1           # checkpoints in flight at once
//! retained = 1                 # completed checkpoints kept
//! unaligned = false            # exactly-once: barriers overtake records in flight
//! aligned-timeout-ms = 0        # unaligned: align this long first (0: never)
//!
//! [restart]
//! strategy = "exponential-delay"   # fixed-delay | exponential-delay | failure-rate | none
//! attempts = 10                # restarts allowed (default: unlimited)
//! delay-ms = 1000              # before the first restart (and every one, fixed)
//! max-delay-ms = 60000         # exponential: the longest wait
//! multiplier = 1.5             # exponential: growth per restart
//! jitter = 0.1                 # exponential: each wait varies by up to this share
//! reset-after-ms = 3600000     # an attempt that ran this long starts the count afresh
//! max-failures = 3             # failure-rate: failures allowed within interval-ms
//! interval-ms = 60000          # failure-rate: the window
//! on-lost-commit = "fail"      # fail | duplicate: see [`OnLostCommit`]
//! ```
//!
//! As in Flink: without `[checkpoint]` a job does not restart unless its
//! `[restart]` says so; with it, the default is the exponential delay
//! (1 s, growing by 1.5 up to 1 min, without limit on attempts).
//! Every number may also be a string that uses job parameters.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::CheckpointMode;
use crate::manifest::{ManifestError, Setting};

/// Where an operator's keyed state and timers live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StateBackendKind {
    /// In the worker's memory: fastest, bounded by memory.
    Memory,
    /// In a RocksDB database per operator instance, under the worker's data
    /// directory: state larger than memory, incremental checkpoints.
    #[serde(rename = "rocksdb")]
    RocksDb,
}

/// The `[state]` table.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StateSection {
    /// `memory` or `rocksdb`.
    #[serde(default)]
    pub backend: Option<String>,
}

/// The `[checkpoint]` table.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CheckpointSection {
    /// Time between two checkpoints' triggers.
    pub interval_ms: Option<Setting>,
    /// `exactly-once` or `at-least-once`.
    #[serde(default)]
    pub mode: Option<String>,
    /// A checkpoint not complete after this long is aborted.
    #[serde(default)]
    pub timeout_ms: Option<Setting>,
    /// Least time from a checkpoint's end to the next one's trigger.
    #[serde(default)]
    pub min_pause_ms: Option<Setting>,
    /// Checkpoints in flight at once.
    #[serde(default)]
    pub max_concurrent: Option<Setting>,
    /// Completed checkpoints kept.
    #[serde(default)]
    pub retained: Option<Setting>,
    /// RocksDB: upload only the files the last completed checkpoint does
    /// not hold (default), or every file each time.
    #[serde(default)]
    pub incremental: Option<bool>,
    /// Exactly-once: unaligned checkpoints (barriers overtake the records
    /// queued before them, which are stored with the snapshot).
    #[serde(default)]
    pub unaligned: Option<bool>,
    /// Unaligned: how long a checkpoint's barriers are aligned first (ms
    /// after its trigger) before it switches to unaligned; 0 (the default):
    /// unaligned from the start.
    #[serde(default)]
    pub aligned_timeout_ms: Option<Setting>,
}

/// The `[restart]` table.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RestartSection {
    /// `fixed-delay`, `exponential-delay` or `none`.
    pub strategy: String,
    /// Restarts allowed; unlimited when absent.
    #[serde(default)]
    pub attempts: Option<Setting>,
    /// Wait before a restart (the first one, for the exponential delay).
    #[serde(default)]
    pub delay_ms: Option<Setting>,
    /// The exponential delay's longest wait.
    #[serde(default)]
    pub max_delay_ms: Option<Setting>,
    /// The exponential delay's growth per restart.
    #[serde(default)]
    pub multiplier: Option<f64>,
    /// The exponential delay: each wait varies by up to this share of it.
    #[serde(default)]
    pub jitter: Option<f64>,
    /// An attempt that ran this long without failing starts the count of
    /// restarts (and the exponential delay) afresh.
    #[serde(default)]
    pub reset_after_ms: Option<Setting>,
    /// The failure rate: failures allowed within `interval-ms`.
    #[serde(default)]
    pub max_failures: Option<Setting>,
    /// The failure rate's window.
    #[serde(default)]
    pub interval_ms: Option<Setting>,
    /// `fail` or `duplicate` ([`OnLostCommit`]).
    #[serde(default)]
    pub on_lost_commit: Option<String>,
}

/// What a restart does when the newest completed checkpoint — whose output
/// the exactly-once sinks may have committed — cannot be restored and only
/// an older one can: restoring the older one would write the output
/// between the two again, next to the committed copy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnLostCommit {
    /// The job fails, naming both checkpoints: committed output is never
    /// retracted, and never duplicated.
    #[default]
    Fail,
    /// The older checkpoint is restored: the output committed after it is
    /// written again (at-least-once for that stretch).
    Duplicate,
}

/// What the `[restart]` table's `on-lost-commit` says (`fail` when absent).
pub fn on_lost_commit(r: Option<&RestartSection>) -> Result<OnLostCommit, ManifestError> {
    match r.and_then(|r| r.on_lost_commit.as_deref()) {
        None | Some("fail") => Ok(OnLostCommit::Fail),
        Some("duplicate") => Ok(OnLostCommit::Duplicate),
        Some(other) => Err(ManifestError::Invalid(format!(
            "[restart] on-lost-commit = {other:?}: it is \"fail\" or \"duplicate\""
        ))),
    }
}

/// How a job takes checkpoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointConfig {
    /// Time between two triggers.
    pub interval_ms: u64,
    /// Aligned (exactly-once) or not.
    pub mode: CheckpointMode,
    /// A checkpoint not complete by then is aborted.
    pub timeout_ms: u64,
    /// Least time from one's end to the next trigger.
    pub min_pause_ms: u64,
    /// In flight at once.
    pub max_concurrent: u32,
    /// Completed ones kept.
    pub retained: u32,
    /// RocksDB state: only new SST files are uploaded (they are shared
    /// between checkpoints), rather than every file.
    #[serde(default = "incremental_by_default")]
    pub incremental: bool,
    /// Exactly-once: a task snapshots on a barrier's first arrival and
    /// stores the records the barrier overtook (Flink's unaligned
    /// checkpoints); savepoints stay aligned.
    #[serde(default)]
    pub unaligned: bool,
    /// Unaligned: a checkpoint's barriers are aligned for this long after
    /// its trigger, then it switches to unaligned (0: unaligned at once).
    #[serde(default)]
    pub aligned_timeout_ms: u64,
}

impl CheckpointConfig {
    /// What a checkpoint's barrier says of alignment
    /// ([`crate::Barrier::aligned_timeout_ms`]).
    pub fn aligned_timeout(&self) -> Option<u64> {
        self.unaligned.then_some(self.aligned_timeout_ms)
    }
}

fn incremental_by_default() -> bool {
    true
}

/// Defaults, as Flink's.
pub const DEFAULT_CHECKPOINT_TIMEOUT_MS: u64 = 600_000;

/// The exponential delay's jitter by default (Flink's `jitter-factor`).
pub const DEFAULT_JITTER: f64 = 0.1;

/// After how long a running attempt resets the exponential delay by
/// default (Flink's `reset-backoff-threshold`: one hour).
pub const DEFAULT_RESET_AFTER_MS: u64 = 3_600_000;

/// How a job restarts after a failure.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "strategy")]
pub enum RestartStrategy {
    /// A failure fails the job.
    #[default]
    None,
    /// Wait `delay_ms` before every restart.
    FixedDelay {
        /// Restarts allowed (`None`: unlimited).
        attempts: Option<u32>,
        /// The wait.
        delay_ms: u64,
        /// An attempt that ran this long starts the count afresh.
        #[serde(default)]
        reset_after_ms: Option<u64>,
    },
    /// Wait `delay_ms`, then `multiplier` times longer before each further
    /// restart, at most `max_delay_ms`, each wait varied by up to `jitter`
    /// of it (Flink 2's default strategy).
    ExponentialDelay {
        /// Restarts allowed (`None`: unlimited).
        attempts: Option<u32>,
        /// The first wait.
        delay_ms: u64,
        /// The longest wait.
        max_delay_ms: u64,
        /// Growth per restart.
        multiplier: f64,
        /// The share by which each wait varies, 0 to 1.
        #[serde(default)]
        jitter: f64,
        /// An attempt that ran this long starts the delay (and the count)
        /// afresh.
        #[serde(default)]
        reset_after_ms: Option<u64>,
    },
    /// Restart after `delay_ms` while no more than `max_failures` failures
    /// happened within the last `interval_ms`.
    FailureRate {
        /// Failures allowed within the window.
        max_failures: u32,
        /// The window.
        interval_ms: u64,
        /// The wait before a restart.
        delay_ms: u64,
    },
}

impl RestartStrategy {
    /// The wait before restart number `attempt` (1 for the first), or
    /// `None` when no more restarts are allowed, knowing nothing of earlier
    /// failures' times (a job resumed by a restarted coordinator): no
    /// jitter, no reset, and a failure rate's window holds no failure.
    ///
    /// ```
    /// use weir_model::fault_tolerance::RestartStrategy;
    /// let s = RestartStrategy::ExponentialDelay {
    ///     attempts: Some(4), delay_ms: 100, max_delay_ms: 250, multiplier: 2.0,
    ///     jitter: 0.0, reset_after_ms: None,
    /// };
    /// let waits: Vec<_> = (1..=5).map(|n| s.delay_before(n)).collect();
    /// assert_eq!(waits, [Some(100), Some(200), Some(250), Some(250), None]);
    /// ```
    pub fn delay_before(&self, attempt: u32) -> Option<u64> {
        let allowed = |limit: &Option<u32>| limit.is_none_or(|n| attempt <= n);
        match self {
            RestartStrategy::None => None,
            RestartStrategy::FixedDelay {
                attempts, delay_ms, ..
            } => allowed(attempts).then_some(*delay_ms),
            RestartStrategy::ExponentialDelay {
                attempts,
                delay_ms,
                max_delay_ms,
                multiplier,
                ..
            } => allowed(attempts).then(|| {
                let grown = *delay_ms as f64 * multiplier.powi(attempt.saturating_sub(1) as i32);
                (grown.min(*max_delay_ms as f64)) as u64
            }),
            // Without the failures' times, nothing is known to fall within
            // the window.
            RestartStrategy::FailureRate { delay_ms, .. } => Some(*delay_ms),
        }
    }
}

/// A job's restarts as they happen: the strategy, with the failures it
/// has seen (their times, for the failure rate; their count since the
/// last reset, for the limits and the exponential delay).
#[derive(Debug, Clone)]
pub struct RestartBackoff {
    strategy: RestartStrategy,
    /// Restarts since the count was last reset.
    restarts: u32,
    /// When the failures within the failure rate's window happened, ms.
    failures: std::collections::VecDeque<i64>,
}

impl RestartBackoff {
    /// No failure yet.
    pub fn new(strategy: RestartStrategy) -> RestartBackoff {
        RestartBackoff {
            strategy,
            restarts: 0,
            failures: Default::default(),
        }
    }

    /// Go on from a job that restarted `restarts` times before (resumed by
    /// a restarted coordinator).
    pub fn after(strategy: RestartStrategy, restarts: u32) -> RestartBackoff {
        RestartBackoff {
            restarts,
            ..RestartBackoff::new(strategy)
        }
    }

    /// The strategy.
    pub fn strategy(&self) -> &RestartStrategy {
        &self.strategy
    }

    /// An attempt that started at `started_ms` failed at `now_ms`: the wait
    /// before the next one, or `None` when the strategy allows no more.
    ///
    /// ```
    /// use weir_model::fault_tolerance::{RestartBackoff, RestartStrategy};
    /// let mut b = RestartBackoff::new(RestartStrategy::FailureRate {
    ///     max_failures: 2, interval_ms: 1000, delay_ms: 10,
    /// });
    /// assert_eq!(b.on_failure(0, 100), Some(10));
    /// assert_eq!(b.on_failure(110, 200), Some(10));
    /// assert_eq!(b.on_failure(210, 300), None, "three within a second");
    /// let mut b = RestartBackoff::new(RestartStrategy::FailureRate {
    ///     max_failures: 2, interval_ms: 1000, delay_ms: 10,
    /// });
    /// assert_eq!(b.on_failure(0, 100), Some(10));
    /// assert_eq!(b.on_failure(110, 800), Some(10));
    /// assert_eq!(b.on_failure(810, 1500), Some(10), "the first left the window");
    /// ```
    pub fn on_failure(&mut self, started_ms: i64, now_ms: i64) -> Option<u64> {
        let stable = |reset: &Option<u64>| reset.is_some_and(|r| now_ms - started_ms >= r as i64);
        match &self.strategy {
            RestartStrategy::None => None,
            RestartStrategy::FixedDelay { reset_after_ms, .. } => {
                if stable(reset_after_ms) {
                    self.restarts = 0;
                }
                self.restarts += 1;
                self.strategy.delay_before(self.restarts)
            }
            RestartStrategy::ExponentialDelay {
                jitter,
                reset_after_ms,
                ..
            } => {
                if stable(reset_after_ms) {
                    self.restarts = 0;
                }
                self.restarts += 1;
                let jitter = *jitter;
                self.strategy.delay_before(self.restarts).map(|d| {
                    // Varied by up to ±jitter, so that many jobs failing at
                    // once do not restart in step.
                    let unit = (mix(now_ms as u64 ^ u64::from(self.restarts)) >> 11) as f64
                        / (1u64 << 53) as f64;
                    let factor = 1.0 + jitter * (2.0 * unit - 1.0);
                    (d as f64 * factor).max(0.0) as u64
                })
            }
            RestartStrategy::FailureRate {
                max_failures,
                interval_ms,
                delay_ms,
            } => {
                self.failures.push_back(now_ms);
                while self
                    .failures
                    .front()
                    .is_some_and(|&t| now_ms - t >= *interval_ms as i64)
                {
                    self.failures.pop_front();
                }
                (self.failures.len() as u64 <= u64::from(*max_failures)).then_some(*delay_ms)
            }
        }
    }
}

/// Deterministic pseudo-random bits (splitmix64), for the jitter.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn resolve(
    what: &str,
    v: &Option<Setting>,
    params: &BTreeMap<String, String>,
) -> Result<Option<u64>, ManifestError> {
    let Some(v) = v else { return Ok(None) };
    match v.resolve(what, params)? {
        Some(n) if n < 0 => Err(ManifestError::BadParam(format!(
            "{what} is {n}; it cannot be negative"
        ))),
        n => Ok(n.map(|n| n as u64)),
    }
}

fn small(what: &str, n: u64) -> Result<u32, ManifestError> {
    u32::try_from(n).map_err(|_| ManifestError::BadParam(format!("{what} = {n} is too large")))
}

/// The state backend a `[state]` table asks for (`None`: the worker's).
pub fn state_backend(s: &StateSection) -> Result<Option<StateBackendKind>, ManifestError> {
    match s.backend.as_deref() {
        None => Ok(None),
        Some("memory") => Ok(Some(StateBackendKind::Memory)),
        Some("rocksdb") => Ok(Some(StateBackendKind::RocksDb)),
        Some(other) => Err(ManifestError::Invalid(format!(
            "[state] backend = {other:?}: it is \"memory\" or \"rocksdb\""
        ))),
    }
}

/// The checkpoint settings of a `[checkpoint]` table.
pub fn checkpoint_config(
    c: &CheckpointSection,
    params: &BTreeMap<String, String>,
) -> Result<Option<CheckpointConfig>, ManifestError> {
    let Some(interval_ms) = resolve("[checkpoint] interval-ms", &c.interval_ms, params)? else {
        return Err(ManifestError::Invalid(
            "[checkpoint] needs interval-ms (the time between two checkpoints)".into(),
        ));
    };
    if interval_ms < 10 {
        return Err(ManifestError::BadParam(format!(
            "[checkpoint] interval-ms = {interval_ms}: at least 10"
        )));
    }
    let mode = match c.mode.as_deref() {
        None | Some("exactly-once") => CheckpointMode::ExactlyOnce,
        Some("at-least-once") => CheckpointMode::AtLeastOnce,
        Some(other) => {
            return Err(ManifestError::Invalid(format!(
                "[checkpoint] mode = {other:?}: it is \"exactly-once\" or \"at-least-once\""
            )));
        }
    };
    let timeout_ms = resolve("[checkpoint] timeout-ms", &c.timeout_ms, params)?
        .unwrap_or(DEFAULT_CHECKPOINT_TIMEOUT_MS);
    if timeout_ms == 0 {
        return Err(ManifestError::BadParam(
            "[checkpoint] timeout-ms must be above 0".into(),
        ));
    }
    let max_concurrent = resolve("[checkpoint] max-concurrent", &c.max_concurrent, params)?
        .map(|n| small("[checkpoint] max-concurrent", n))
        .transpose()?
        .unwrap_or(1);
    let retained = resolve("[checkpoint] retained", &c.retained, params)?
        .map(|n| small("[checkpoint] retained", n))
        .transpose()?
        .unwrap_or(1);
    if max_concurrent == 0 || retained == 0 {
        return Err(ManifestError::BadParam(
            "[checkpoint] max-concurrent and retained must be at least 1".into(),
        ));
    }
    let unaligned = c.unaligned.unwrap_or(false);
    let aligned_timeout_ms = resolve(
        "[checkpoint] aligned-timeout-ms",
        &c.aligned_timeout_ms,
        params,
    )?;
    if unaligned && mode != CheckpointMode::ExactlyOnce {
        return Err(ManifestError::Invalid(
            "[checkpoint] unaligned = true needs mode = \"exactly-once\" (at least once, barriers are not aligned anyway)".into(),
        ));
    }
    if unaligned && max_concurrent > 1 {
        return Err(ManifestError::Invalid(format!(
            "[checkpoint] unaligned = true takes one checkpoint at a time: max-concurrent = {max_concurrent}"
        )));
    }
    if aligned_timeout_ms.is_some() && !unaligned {
        return Err(ManifestError::Invalid(
            "[checkpoint] aligned-timeout-ms is the time before a checkpoint switches to unaligned: it needs unaligned = true".into(),
        ));
    }
    Ok(Some(CheckpointConfig {
        interval_ms,
        mode,
        timeout_ms,
        min_pause_ms: resolve("[checkpoint] min-pause-ms", &c.min_pause_ms, params)?.unwrap_or(0),
        max_concurrent,
        retained,
        incremental: c.incremental.unwrap_or(true),
        unaligned,
        aligned_timeout_ms: aligned_timeout_ms.unwrap_or(0),
    }))
}

/// The restart strategy of a `[restart]` table, or the default for a job
/// with or without checkpoints.
pub fn restart_strategy(
    r: Option<&RestartSection>,
    checkpointed: bool,
    params: &BTreeMap<String, String>,
) -> Result<RestartStrategy, ManifestError> {
    let Some(r) = r else {
        return Ok(if checkpointed {
            RestartStrategy::ExponentialDelay {
                attempts: None,
                delay_ms: 1000,
                max_delay_ms: 60_000,
                multiplier: 1.5,
                jitter: DEFAULT_JITTER,
                reset_after_ms: Some(DEFAULT_RESET_AFTER_MS),
            }
        } else {
            RestartStrategy::None
        });
    };
    let attempts = resolve("[restart] attempts", &r.attempts, params)?
        .map(|n| small("[restart] attempts", n))
        .transpose()?;
    let delay_ms = resolve("[restart] delay-ms", &r.delay_ms, params)?;
    let reset_after_ms = resolve("[restart] reset-after-ms", &r.reset_after_ms, params)?;
    if reset_after_ms == Some(0) {
        return Err(ManifestError::BadParam(
            "[restart] reset-after-ms must be at least 1".into(),
        ));
    }
    let max_failures = resolve("[restart] max-failures", &r.max_failures, params)?;
    let interval_ms = resolve("[restart] interval-ms", &r.interval_ms, params)?;
    let only = |fields: &[(&str, bool)]| -> Result<(), ManifestError> {
        match fields.iter().find(|(_, set)| *set) {
            Some((name, _)) => Err(ManifestError::Invalid(format!(
                "[restart] strategy = {:?} takes no {name}",
                r.strategy
            ))),
            None => Ok(()),
        }
    };
    let exponential_only = [
        ("max-delay-ms", r.max_delay_ms.is_some()),
        ("multiplier", r.multiplier.is_some()),
        ("jitter", r.jitter.is_some()),
    ];
    let rate_only = [
        ("max-failures", max_failures.is_some()),
        ("interval-ms", interval_ms.is_some()),
    ];
    match r.strategy.as_str() {
        "none" => {
            only(&[
                ("attempts", attempts.is_some()),
                ("delay-ms", delay_ms.is_some()),
                ("reset-after-ms", reset_after_ms.is_some()),
            ])?;
            only(&exponential_only)?;
            only(&rate_only)?;
            Ok(RestartStrategy::None)
        }
        "fixed-delay" => {
            only(&exponential_only)?;
            only(&rate_only)?;
            Ok(RestartStrategy::FixedDelay {
                attempts,
                delay_ms: delay_ms.unwrap_or(1000),
                reset_after_ms,
            })
        }
        "failure-rate" => {
            only(&exponential_only)?;
            only(&[
                ("attempts", attempts.is_some()),
                ("reset-after-ms", reset_after_ms.is_some()),
            ])?;
            let max_failures = small("[restart] max-failures", max_failures.unwrap_or(1))?;
            let interval_ms = interval_ms.unwrap_or(60_000);
            if max_failures == 0 || interval_ms == 0 {
                return Err(ManifestError::BadParam(
                    "[restart] max-failures and interval-ms must be at least 1".into(),
                ));
            }
            Ok(RestartStrategy::FailureRate {
                max_failures,
                interval_ms,
                delay_ms: delay_ms.unwrap_or(1000),
            })
        }
        "exponential-delay" => {
            only(&rate_only)?;
            let delay_ms = delay_ms.unwrap_or(1000);
            let max_delay_ms =
                resolve("[restart] max-delay-ms", &r.max_delay_ms, params)?.unwrap_or(60_000);
            let multiplier = r.multiplier.unwrap_or(1.5);
            if !(multiplier.is_finite() && multiplier >= 1.0) {
                return Err(ManifestError::BadParam(format!(
                    "[restart] multiplier = {multiplier}: a number of at least 1"
                )));
            }
            if max_delay_ms < delay_ms {
                return Err(ManifestError::BadParam(format!(
                    "[restart] max-delay-ms ({max_delay_ms}) is below delay-ms ({delay_ms})"
                )));
            }
            let jitter = r.jitter.unwrap_or(DEFAULT_JITTER);
            if !(0.0..=1.0).contains(&jitter) {
                return Err(ManifestError::BadParam(format!(
                    "[restart] jitter = {jitter}: a share from 0 to 1"
                )));
            }
            Ok(RestartStrategy::ExponentialDelay {
                attempts,
                delay_ms,
                max_delay_ms,
                multiplier,
                jitter,
                reset_after_ms: Some(reset_after_ms.unwrap_or(DEFAULT_RESET_AFTER_MS)),
            })
        }
        other => Err(ManifestError::Invalid(format!(
            "[restart] strategy = {other:?}: it is \"fixed-delay\", \"exponential-delay\", \"failure-rate\" or \"none\""
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{JobGraph, Manifest};

    fn build(tables: &str) -> Result<JobGraph, ManifestError> {
        let m = Manifest::parse(&format!(
            "[job]\nname='j'\n[params]\nevery={{ default = '250' }}\n\
             [[source]]\nname='s'\ntype='generator'\n[[sink]]\nname='o'\ntype='stdout'\n{tables}"
        ))?;
        let params = m.resolve_params(&[])?;
        JobGraph::build(&m, params, None)
    }

    fn err(tables: &str) -> String {
        build(tables).unwrap_err().to_string()
    }

    #[test]
    fn unaligned_checkpoints_are_exactly_once_one_at_a_time() {
        let e = err("[checkpoint]\ninterval-ms=100\nunaligned=true\nmode='at-least-once'");
        assert!(e.contains("unaligned = true needs mode"), "{e}");
        let e = err("[checkpoint]\ninterval-ms=100\nunaligned=true\nmax-concurrent=2");
        assert!(e.contains("one checkpoint at a time"), "{e}");
        let e = err("[checkpoint]\ninterval-ms=100\naligned-timeout-ms=10");
        assert!(e.contains("needs unaligned = true"), "{e}");
    }

    #[test]
    fn without_tables_nothing_is_checkpointed_or_restarted() {
        let g = build("").unwrap();
        assert_eq!(g.checkpoint, None);
        assert_eq!(g.restart, RestartStrategy::None);
        assert_eq!(g.state_backend, None);
    }

    #[test]
    fn checkpoint_settings_and_their_defaults() {
        let g = build("[checkpoint]\ninterval-ms='${every}'\n[state]\nbackend='rocksdb'").unwrap();
        assert_eq!(
            g.checkpoint,
            Some(CheckpointConfig {
                interval_ms: 250,
                mode: CheckpointMode::ExactlyOnce,
                timeout_ms: DEFAULT_CHECKPOINT_TIMEOUT_MS,
                min_pause_ms: 0,
                max_concurrent: 1,
                retained: 1,
                incremental: true,
                unaligned: false,
                aligned_timeout_ms: 0,
            })
        );
        assert_eq!(g.state_backend, Some(StateBackendKind::RocksDb));
        assert!(matches!(
            g.restart,
            RestartStrategy::ExponentialDelay { attempts: None, .. }
        ));
        assert_eq!(g.checkpoint.as_ref().unwrap().aligned_timeout(), None);
        let u = build("[checkpoint]\ninterval-ms=100\nunaligned=true").unwrap();
        assert_eq!(u.checkpoint.unwrap().aligned_timeout(), Some(0));
        let u = build("[checkpoint]\ninterval-ms=100\nunaligned=true\naligned-timeout-ms=3000")
            .unwrap();
        assert_eq!(u.checkpoint.unwrap().aligned_timeout(), Some(3000));
        let g = build(
            "[checkpoint]\ninterval-ms=100\nmode='at-least-once'\ntimeout-ms=5000\n\
             min-pause-ms=50\nmax-concurrent=2\nretained=3",
        )
        .unwrap();
        let c = g.checkpoint.unwrap();
        assert_eq!(
            (
                c.mode,
                c.timeout_ms,
                c.min_pause_ms,
                c.max_concurrent,
                c.retained
            ),
            (CheckpointMode::AtLeastOnce, 5000, 50, 2, 3)
        );
        // The graph crosses to workers as JSON.
        let g =
            build("[checkpoint]\ninterval-ms=100\n[restart]\nstrategy='fixed-delay'\nattempts=2")
                .unwrap();
        let back: JobGraph = serde_json::from_str(&serde_json::to_string(&g).unwrap()).unwrap();
        assert_eq!(back, g);
    }

    #[test]
    fn restart_strategies() {
        let g = build("[restart]\nstrategy='fixed-delay'\nattempts=3\ndelay-ms=20").unwrap();
        assert_eq!(
            g.restart,
            RestartStrategy::FixedDelay {
                attempts: Some(3),
                delay_ms: 20,
                reset_after_ms: None,
            }
        );
        assert_eq!(g.restart.delay_before(3), Some(20));
        assert_eq!(g.restart.delay_before(4), None);
        let g = build("[checkpoint]\ninterval-ms=100\n[restart]\nstrategy='none'").unwrap();
        assert_eq!(g.restart, RestartStrategy::None);
        let g = build(
            "[restart]\nstrategy='exponential-delay'\ndelay-ms=10\nmax-delay-ms=40\nmultiplier=3.0",
        )
        .unwrap();
        let waits: Vec<_> = (1..=4).map(|n| g.restart.delay_before(n)).collect();
        assert_eq!(waits, [Some(10), Some(30), Some(40), Some(40)]);
        // Flink 2's default: a jitter of 0.1 and a reset after an hour.
        let RestartStrategy::ExponentialDelay {
            jitter,
            reset_after_ms,
            ..
        } = g.restart
        else {
            panic!("{:?}", g.restart);
        };
        assert_eq!((jitter, reset_after_ms), (0.1, Some(3_600_000)));
        let g = build(
            "[restart]\nstrategy='failure-rate'\nmax-failures=2\ninterval-ms=500\ndelay-ms=5",
        )
        .unwrap();
        assert_eq!(
            g.restart,
            RestartStrategy::FailureRate {
                max_failures: 2,
                interval_ms: 500,
                delay_ms: 5
            }
        );
    }

    #[test]
    fn the_exponential_delay_varies_by_its_jitter_and_resets_after_a_stable_attempt() {
        let strategy = RestartStrategy::ExponentialDelay {
            attempts: Some(3),
            delay_ms: 1000,
            max_delay_ms: 100_000,
            multiplier: 2.0,
            jitter: 0.1,
            reset_after_ms: Some(10_000),
        };
        let mut b = RestartBackoff::new(strategy.clone());
        // Short attempts: 1 s, 2 s, 4 s (each within ±10 %), then no more.
        for (n, base) in [1000.0, 2000.0, 4000.0].into_iter().enumerate() {
            let at = n as i64 * 100;
            let d = b.on_failure(at, at + 50).unwrap() as f64;
            assert!((base * 0.9..=base * 1.1).contains(&d), "{n}: {d}");
        }
        assert_eq!(b.on_failure(400, 450), None);
        // An attempt that ran past reset-after-ms starts over at 1 s.
        let mut b = RestartBackoff::new(strategy);
        for at in [0, 100, 200] {
            b.on_failure(at, at + 50).unwrap();
        }
        let d = b.on_failure(1_000, 20_000).unwrap();
        assert!((900..=1100).contains(&d), "{d}");
        // The jitter varies: first waits at different times differ.
        let waits: std::collections::BTreeSet<u64> = (0..20)
            .map(|i| {
                RestartBackoff::new(b.strategy().clone())
                    .on_failure(i * 7919, i * 7919 + 1)
                    .unwrap()
            })
            .collect();
        assert!(waits.len() > 10, "{waits:?}");
        assert!(waits.iter().all(|w| (900..=1100).contains(w)), "{waits:?}");
    }

    #[test]
    fn bad_settings_are_named() {
        for (tables, says) in [
            ("[checkpoint]\nmode='exactly-once'", "needs interval-ms"),
            ("[checkpoint]\ninterval-ms=0", "at least 10"),
            ("[checkpoint]\ninterval-ms=-5", "cannot be negative"),
            (
                "[checkpoint]\ninterval-ms=100\nmode='twice'",
                "\"exactly-once\" or",
            ),
            ("[checkpoint]\ninterval-ms=100\nretained=0", "at least 1"),
            (
                "[checkpoint]\ninterval-ms=100\nspeed=1",
                "unknown field `speed`",
            ),
            ("[state]\nbackend='disk'", "\"memory\" or \"rocksdb\""),
            ("[restart]\nstrategy='sometimes'", "\"fixed-delay\""),
            (
                "[restart]\nstrategy='none'\nattempts=2",
                "takes no attempts",
            ),
            (
                "[restart]\nstrategy='fixed-delay'\nmultiplier=2.0",
                "takes no multiplier",
            ),
            (
                "[restart]\nstrategy='exponential-delay'\nmultiplier=0.5",
                "at least 1",
            ),
            (
                "[restart]\nstrategy='exponential-delay'\ndelay-ms=100\nmax-delay-ms=50",
                "below delay-ms",
            ),
            (
                "[restart]\nstrategy='exponential-delay'\njitter=2.0",
                "a share from 0 to 1",
            ),
            (
                "[restart]\nstrategy='failure-rate'\nattempts=3",
                "takes no attempts",
            ),
            (
                "[restart]\nstrategy='fixed-delay'\nmax-failures=3",
                "takes no max-failures",
            ),
            (
                "[restart]\nstrategy='failure-rate'\nmax-failures=0",
                "at least 1",
            ),
            (
                "[restart]\nstrategy='fixed-delay'\nreset-after-ms=0",
                "reset-after-ms must be at least 1",
            ),
        ] {
            let e = err(tables);
            assert!(e.contains(says), "{tables:?}: {e}");
        }
    }
}
