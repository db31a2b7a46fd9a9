//! # weir-state: keyed state and timers
//!
//! One trait, [`StateBackend`], behind which an operator instance keeps its
//! keyed state (value, list and map states, scoped to the current key) and
//! its timers (event and processing time), so that the host's imports do
//! not care where state lives:
//!
//! - [`memory`]: [`MemoryStateBackend`], hash maps and ordered sets: fast,
//!   bounded by memory (the default for small state).
//! - [`rocksdb`]: [`RocksDbStateBackend`], a RocksDB database per operator
//!   instance, keys prefixed by their key group: for state larger than
//!   memory (the `rocksdb` feature, on by default).
//!
//! State is addressed by (state id, key[, map key]); a state id stands for a
//! declared name, stable for the backend's life. Timers are part of the
//! state: at most one per (key, domain, time), kept in time order. Reads and
//! writes come a batch at a time ([`StateBackend::get_values`],
//! [`StateBackend::apply_all`]), as the host receives them from a guest.
//!
//! [`snapshot`]: what a checkpoint keeps of a backend. [`canonical`]: the
//! format every backend writes on a savepoint (and the memory backend on
//! every checkpoint), read back by key group into either backend (rescaling,
//! a change of backend). The blob store that checkpoints go
//! to is `weir_model::storage` (the coordinator reads it too).

pub mod canonical;
pub mod inspect;
pub mod memory;
#[cfg(feature = "rocksdb")]
pub mod rocksdb;
pub mod snapshot;
pub mod ttl;

#[cfg(feature = "rocksdb")]
pub use self::rocksdb::RocksDbStateBackend;
pub use memory::MemoryStateBackend;

/// The shape of a keyed state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StateKind {
    /// One value per key.
    Value,
    /// A list of values per key.
    List,
    /// A map from user keys to values, per key.
    Map,
}

impl StateKind {
    /// Its byte in stored formats.
    pub fn byte(self) -> u8 {
        match self {
            StateKind::Value => 0,
            StateKind::List => 1,
            StateKind::Map => 2,
        }
    }

    /// The kind a stored byte stands for.
    pub fn from_byte(b: u8) -> anyhow::Result<StateKind> {
        Ok(match b {
            0 => StateKind::Value,
            1 => StateKind::List,
            2 => StateKind::Map,
            k => anyhow::bail!("unknown state kind {k}"),
        })
    }
}

/// A declared state, as a backend keeps it (its id is its index).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    /// Its name.
    pub name: String,
    /// Its shape.
    pub kind: StateKind,
    /// Whether its values carry expiry times ([`ttl`]).
    pub stamped: bool,
    /// The type its values are rows of (the type's text, as the operator
    /// declared it), or `None`: they are in the job's codec.
    pub value_type: Option<String>,
}

impl Declared {
    /// A state of `kind` called `name`, its values in the job's codec.
    pub fn new(name: impl Into<String>, kind: StateKind, stamped: bool) -> Declared {
        Declared {
            name: name.into(),
            kind,
            stamped,
            value_type: None,
        }
    }
}

/// Rewrites one stored value (a value, a list's element, a map's value)
/// from one type to another: [`StateBackend::retype`].
pub type Convert<'a> = dyn FnMut(&[u8]) -> Result<Vec<u8>, String> + 'a;

/// The id of `name` among the declared `names`: `None` when it is new, an
/// error when it was declared with another kind, or with a time-to-live and
/// now without (or the other way round).
pub(crate) fn declared(
    names: &[Declared],
    name: &str,
    kind: StateKind,
    stamped: bool,
) -> Option<Result<u32, String>> {
    let i = names.iter().position(|d| d.name == name)?;
    let d = &names[i];
    Some(if d.kind != kind {
        Err(format!(
            "state `{name}` is already declared as {:?}, not {kind:?}",
            d.kind
        ))
    } else if d.stamped != stamped {
        let (was, now) = if d.stamped {
            ("with", "without")
        } else {
            ("without", "with")
        };
        Err(format!(
            "state `{name}` holds values kept {was} a time-to-live; it cannot be declared {now} one (declare it under a new name)"
        ))
    } else {
        Ok(i as u32)
    })
}

/// One keyed state entry: state `state` of the stream key `key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateKey {
    /// The state's id, as [`StateBackend::register`] returned it.
    pub state: u32,
    /// The stream key the entry belongs to.
    pub key: Vec<u8>,
}

/// A change to keyed state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateOp {
    /// Set a value state.
    PutValue {
        /// Which entry.
        target: StateKey,
        /// The new value.
        value: Vec<u8>,
    },
    /// Replace a list state.
    ReplaceList {
        /// Which entry.
        target: StateKey,
        /// The new values.
        values: Vec<Vec<u8>>,
    },
    /// Add values at the end of a list state.
    AppendList {
        /// Which entry.
        target: StateKey,
        /// The values to add.
        values: Vec<Vec<u8>>,
    },
    /// Set one entry of a map state.
    PutEntry {
        /// Which state and stream key.
        target: StateKey,
        /// The user key inside the map.
        map_key: Vec<u8>,
        /// The new value.
        value: Vec<u8>,
    },
    /// Remove one entry of a map state.
    RemoveEntry {
        /// Which state and stream key.
        target: StateKey,
        /// The user key inside the map.
        map_key: Vec<u8>,
    },
    /// Clear the entry of any kind of state (a whole list or map).
    Clear(StateKey),
    /// Set many entries of one value state at once: a batch's puts as a
    /// guest hands them over, in two buffers (no allocation per key).
    PutValues(PackedPuts),
}

/// Byte strings in one buffer: string `i` is `data[ends[i - 1] .. ends[i]]`
/// (from 0 for the first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Packed {
    data: Vec<u8>,
    ends: Vec<u32>,
}

impl Packed {
    /// The strings of `data` ending at `ends`: an error names an end outside
    /// the data or before the previous one.
    pub fn new(data: Vec<u8>, ends: Vec<u32>) -> Result<Packed, String> {
        let mut from = 0u32;
        for &end in &ends {
            if end < from || end as usize > data.len() {
                return Err(format!(
                    "a packed string ends at {end}, outside its {} bytes (or before the previous)",
                    data.len()
                ));
            }
            from = end;
        }
        Ok(Packed { data, ends })
    }

    /// How many strings it holds.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Bytes it holds: its strings and anything after the last.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// Its strings, in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(start, &end)| &self.data[start as usize..end as usize])
    }
}

/// Puts of one value state: key `i` of `keys` gets value `i` of `values`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedPuts {
    /// The state's id.
    pub state: u32,
    keys: Packed,
    values: Packed,
}

impl PackedPuts {
    /// The puts of `keys` and `values` into `state`: an error when their
    /// numbers differ.
    pub fn new(state: u32, keys: Packed, values: Packed) -> Result<PackedPuts, String> {
        if keys.len() != values.len() {
            return Err(format!(
                "{} keys but {} values to put",
                keys.len(),
                values.len()
            ));
        }
        Ok(PackedPuts {
            state,
            keys,
            values,
        })
    }

    /// Bytes of their keys and values, as held (what a quota counts).
    pub fn bytes(&self) -> u64 {
        (self.keys.bytes() + self.values.bytes()) as u64
    }

    /// `(key, value)`, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.keys.iter().zip(self.values.iter())
    }
}

/// Which clock a timer follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimeDomain {
    /// Fires when the task's watermark reaches the time.
    EventTime,
    /// Fires when the worker's wall clock reaches the time.
    ProcessingTime,
}

/// A timer: at most one exists per (key, domain, time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timer {
    /// The stream key the timer belongs to.
    pub key: Vec<u8>,
    /// When it fires, ms since the Unix epoch.
    pub time: i64,
    /// Which clock it follows.
    pub domain: TimeDomain,
}

/// A change to the timers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimerOp {
    /// Register a timer (no effect if it exists).
    Register(Timer),
    /// Delete a timer (no effect if it does not exist).
    Delete(Timer),
}

/// How much keyed state a backend holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateSize {
    /// Keyed entries: values, lists and maps, one per key each.
    pub entries: u64,
    /// Bytes of keys and values.
    pub bytes: u64,
    /// Timers registered.
    pub timers: u64,
}

/// Where an operator instance's keyed state and timers live.
pub trait StateBackend: Send {
    /// The id of the state `name`, registering it on first use; `stamped`:
    /// its values carry expiry times ([`ttl`]), kept with the state. The
    /// same name with another kind, or with stamps where it had none (or
    /// the other way round), is an error.
    fn declare(&mut self, name: &str, kind: StateKind, stamped: bool) -> Result<u32, String>;
    /// The id of the state `name` (no time-to-live), registering it on
    /// first use.
    fn register(&mut self, name: &str, kind: StateKind) -> Result<u32, String> {
        self.declare(name, kind, false)
    }
    /// The id of the state `name`, whose values live `ttl` if given. Only
    /// [`ttl::TtlBackend`] keeps a time-to-live; a backend alone refuses one.
    fn declare_ttl(
        &mut self,
        name: &str,
        kind: StateKind,
        ttl: Option<ttl::StateTtl>,
    ) -> Result<u32, String> {
        match ttl {
            None => self.declare(name, kind, false),
            Some(_) => Err(format!(
                "state `{name}`: this state backend keeps no time-to-live"
            )),
        }
    }
    /// Which of its states carry stamps, and the clock they expire by.
    fn expiry(&self) -> std::sync::Arc<ttl::Expiry>;
    /// Note that a declaration was refused, and why (the operator may not
    /// say: [`ttl::TtlBackend::refusals`] keeps them); returns `why`.
    fn refuse(&self, why: String) -> String {
        why
    }
    /// The states declared so far, by id (restored ones first).
    fn states(&self) -> &[Declared];
    /// The type `state`'s values are rows of (its text), or `None`: they
    /// are in the job's codec.
    fn value_type(&self, state: u32) -> Option<&str>;
    /// Make `state`'s values rows of `ty` (`None`: the job's codec), kept
    /// with the state (its snapshots and savepoints say it). `convert`
    /// rewrites every stored value first — a value, each element of a
    /// list, each value of a map (map keys stay); `None`: they already are
    /// of `ty`. An error may leave some of them converted and the type as
    /// it was: the task that asked fails, and its state comes again from a
    /// checkpoint.
    fn retype(
        &mut self,
        state: u32,
        ty: Option<&str>,
        convert: Option<&mut Convert<'_>>,
    ) -> anyhow::Result<()>;
    /// Remove what expired at `now` from the states with a time-to-live
    /// that the backend's own cleanup leaves (RocksDB's compactions drop
    /// values, not some elements of a list); called now and then
    /// ([`ttl::TtlBackend`]). A pass may be done a step at a time: `true`,
    /// it goes on at the next call.
    fn purge_expired(&mut self, now: i64) -> bool {
        let _ = now;
        false
    }
    /// A value state's value.
    fn get_value(&self, state: u32, key: &[u8]) -> anyhow::Result<Option<Vec<u8>>>;
    /// Many value states at once, one answer per request, in order (the
    /// bulk fetch of a batch's keys).
    fn get_values(&self, keys: &[StateKey]) -> anyhow::Result<Vec<Option<Vec<u8>>>> {
        keys.iter()
            .map(|k| self.get_value(k.state, &k.key))
            .collect()
    }
    /// Many value states at once, into one buffer: for each key of `keys`,
    /// the value of each state of `states` (key-major), appended to `data`
    /// with its end pushed to `ends` (empty for an unset one) and whether
    /// it is set to `present`. The same answers as
    /// [`StateBackend::get_values`]; a backend that can answers without an
    /// allocation per key.
    fn read_values(
        &self,
        states: &[u32],
        keys: &mut dyn Iterator<Item = &[u8]>,
        data: &mut Vec<u8>,
        ends: &mut Vec<u32>,
        present: &mut Vec<bool>,
    ) -> anyhow::Result<()> {
        let mut requests = Vec::new();
        for key in keys {
            for &state in states {
                requests.push(StateKey {
                    state,
                    key: key.to_vec(),
                });
            }
        }
        for answer in self.get_values(&requests)? {
            present.push(answer.is_some());
            data.extend_from_slice(answer.as_deref().unwrap_or_default());
            ends.push(data.len() as u32);
        }
        Ok(())
    }
    /// A list state's values (empty when unset).
    fn get_list(&self, state: u32, key: &[u8]) -> anyhow::Result<Vec<Vec<u8>>>;
    /// One entry of a map state.
    fn get_entry(&self, state: u32, key: &[u8], map_key: &[u8]) -> anyhow::Result<Option<Vec<u8>>>;
    /// All entries of a map state, in map-key byte order.
    fn get_entries(&self, state: u32, key: &[u8]) -> anyhow::Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// Apply one change.
    fn apply(&mut self, op: StateOp) -> anyhow::Result<()>;
    /// Register a timer (no effect if it exists).
    fn register_timer(&mut self, timer: Timer) -> anyhow::Result<()>;
    /// Delete a timer (no effect if it does not exist).
    fn delete_timer(&mut self, timer: &Timer) -> anyhow::Result<()>;
    /// Apply a batch's state changes, then its timer changes, in order, as
    /// one write where the backend can (RocksDB: one `WriteBatch`). A
    /// failure fails the task, whose state then comes from a checkpoint.
    fn apply_all(&mut self, ops: Vec<StateOp>, timers: Vec<TimerOp>) -> anyhow::Result<()> {
        for op in ops {
            self.apply(op)?;
        }
        for t in timers {
            match t {
                TimerOp::Register(t) => self.register_timer(t)?,
                TimerOp::Delete(t) => self.delete_timer(&t)?,
            }
        }
        Ok(())
    }
    /// Remove and return the timers of `domain` at or before `upto`, in time
    /// order, at most `limit` of them.
    fn take_due_timers(
        &mut self,
        domain: TimeDomain,
        upto: i64,
        limit: usize,
    ) -> anyhow::Result<Vec<Timer>>;
    /// The earliest timer of `domain`.
    fn next_timer(&self, domain: TimeDomain) -> Option<i64>;
    /// How much it holds: cheap enough to ask after every batch (the host
    /// checks it against the instance's quotas). Exact in memory; RocksDB
    /// answers from its own estimates.
    fn size(&self) -> StateSize {
        StateSize::default()
    }
    /// The synchronous part of a snapshot: everything the backend holds,
    /// as files in the empty directory `dir` (see [`snapshot`]).
    fn snapshot(&mut self, dir: &std::path::Path) -> anyhow::Result<snapshot::LocalSnapshot>;
    /// Write everything it holds to `path` as one canonical file
    /// ([`canonical`]): its size.
    fn export(&mut self, path: &std::path::Path) -> anyhow::Result<u64>;
    /// A portable snapshot, for a savepoint: one canonical file in the
    /// empty directory `dir`, whatever the backend.
    fn savepoint(&mut self, dir: &std::path::Path) -> anyhow::Result<snapshot::LocalSnapshot> {
        canonical::write_snapshot(self, dir)
    }
}
