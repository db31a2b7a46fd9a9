//! Keyed state and timers in RocksDB, for state larger than memory.
//!
//! One database per operator instance, in a directory of its own (under the
//! worker's data directory; removed when the instance is dropped). Three
//! column families:
//!
//! | family | key | value |
//! | --- | --- | --- |
//! | `meta` | `state/` + the state's name | its id (u32), kind (u8) [· stamped (u8) [· its values' row type, UTF-8]] |
//! | `state` | key group (u32) · state id (u32) · key length (u32) · key [· map key] | the value; a list's values as (u32 length · bytes)* |
//! | `timers` | key group (u32) · domain (u8) · time (i64, sign bit flipped) · key | — |
//!
//! Every integer is big-endian and every keyed entry and timer starts with
//! its key group, so the state of a range of key groups is one contiguous
//! range of keys (what rescaling splits and merges). A map's entries are
//! contiguous too, in map-key byte order; list appends are RocksDB merges
//! (concatenation), so an append never reads the list.
//!
//! Timers fire in time order across key groups: the backend keeps, per
//! domain and key group, the time of that group's first timer (read back
//! from the database when it is opened) and merges the groups' runs with
//! the timers registered since they were last written out ([`timers`]).
//!
//! Writes skip RocksDB's write-ahead log: a backend's contents outlive a
//! failure only through checkpoints. Value states pass through a bounded
//! cache ([`cache`]) that holds their writes until a snapshot or until it
//! is full.

mod cache;
mod expiry;
mod timers;

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rocksdb::compaction_filter::Decision as CompactionDecision;
use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamily, ColumnFamilyDescriptor, DB, DBCompactionStyle,
    DBCompressionType, Direction, IteratorMode, MergeOperands, Options, ReadOptions, WriteBatch,
    WriteOptions,
};
use weir_model::keygroup::key_group;

use self::cache::ValueCache;
use self::timers::{Heads, TimerBuffer};
use crate::snapshot::{LocalSnapshot, SnapshotFormat, files_of};
use crate::ttl::Expiry;
use crate::{
    Declared, StateBackend, StateKey, StateKind, StateOp, StateSize, TimeDomain, Timer, TimerOp,
};

const META: &str = "meta";
const STATE: &str = "state";
const TIMERS: &str = "timers";

/// Memtable size per instance: a worker runs many instances, each with its
/// own database.
const WRITE_BUFFER_BYTES: usize = 16 << 20;

/// Block cache per instance (data, index and filter blocks).
const BLOCK_CACHE_BYTES: usize = 32 << 20;

/// Keyed state and timers in a RocksDB database of their own.
pub struct RocksDbStateBackend {
    db: Option<DB>,
    path: PathBuf,
    max_parallelism: u32,
    names: Vec<Declared>,
    /// Which states carry expiry stamps (shared with the compaction
    /// filter, which drops what expired).
    expiry: Arc<Expiry>,
    /// Where the pass over lists with expired elements goes on from
    /// ([`expiry`]); `None`: at the start.
    purge_from: Option<Vec<u8>>,
    heads: [Heads; 2],
    /// Timers registered since the last drain, not yet in the database.
    buffered: TimerBuffer,
    write: WriteOptions,
    /// Value states in front of the database (read through shared
    /// references, hence the cell; a backend serves one task).
    values: RefCell<ValueCache>,
}

fn domain_byte(d: TimeDomain) -> u8 {
    match d {
        TimeDomain::EventTime => 0,
        TimeDomain::ProcessingTime => 1,
    }
}

fn domain_index(d: TimeDomain) -> usize {
    domain_byte(d) as usize
}

/// A time whose big-endian bytes sort as the numbers do.
fn time_bytes(t: i64) -> [u8; 8] {
    ((t as u64) ^ (1 << 63)).to_be_bytes()
}

fn time_of(bytes: &[u8]) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[..8]);
    (u64::from_be_bytes(b) ^ (1 << 63)) as i64
}

/// The smallest key above every key that starts with `prefix`, if any.
fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut s = prefix.to_vec();
    while let Some(last) = s.pop() {
        if last < 0xff {
            s.push(last + 1);
            return Some(s);
        }
    }
    None
}

/// A list's values, as stored: (u32 length, bytes) each.
fn encode_list(values: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.iter().map(|v| v.len() + 4).sum());
    for v in values {
        out.extend_from_slice(&(v.len() as u32).to_be_bytes());
        out.extend_from_slice(v);
    }
    out
}

/// Appending to a list is concatenating its encodings.
fn concat(_key: &[u8], existing: Option<&[u8]>, operands: &MergeOperands) -> Option<Vec<u8>> {
    let mut out = existing.map(<[u8]>::to_vec).unwrap_or_default();
    for op in operands.iter() {
        out.extend_from_slice(op);
    }
    Some(out)
}

impl RocksDbStateBackend {
    /// Open (creating) the database in `dir`, for keys spread over
    /// `max_parallelism` key groups. State already in `dir` (a restored
    /// checkpoint) is kept: its states, timers and all.
    pub fn open(dir: &Path, max_parallelism: u32) -> anyhow::Result<RocksDbStateBackend> {
        anyhow::ensure!(max_parallelism > 0, "max parallelism must be at least 1");
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_compression_type(DBCompressionType::Lz4);
        opts.set_write_buffer_size(WRITE_BUFFER_BYTES);
        opts.set_max_write_buffer_number(2);
        // Keys are spread over the whole key space (their key group comes
        // first, a hash), so under leveled compaction every compaction
        // overlaps every file of the next level and rewrites it: an
        // incremental checkpoint would upload most of the state again.
        // Universal compaction adds new sorted runs and merges runs of
        // similar size, so what a checkpoint uploads stays near what
        // changed.
        opts.set_compaction_style(DBCompactionStyle::Universal);
        // Bloom filters spare reads of keys a file does not hold (a
        // state's first read of a key, and every run universal compaction
        // keeps); the filters and indexes are cached with the data.
        let mut table = BlockBasedOptions::default();
        table.set_bloom_filter(10.0, false);
        table.set_block_cache(&Cache::new_lru_cache(BLOCK_CACHE_BYTES));
        table.set_cache_index_and_filter_blocks(true);
        table.set_pin_l0_filter_and_index_blocks_in_cache(true);
        opts.set_block_based_table_factory(&table);
        opts.set_memtable_whole_key_filtering(true);
        opts.set_memtable_prefix_bloom_ratio(0.02);
        let mut state = opts.clone();
        state.set_merge_operator_associative("weir-list-append", concat);
        let expiry = Arc::new(Expiry::default());
        let filter = expiry.clone();
        state.set_compaction_filter("weir-ttl", move |_level: u32, key: &[u8], value: &[u8]| {
            if self::expiry::expires(&filter, key, value) {
                CompactionDecision::Remove
            } else {
                CompactionDecision::Keep
            }
        });
        let families = vec![
            ColumnFamilyDescriptor::new(META, opts.clone()),
            ColumnFamilyDescriptor::new(STATE, state),
            ColumnFamilyDescriptor::new(TIMERS, opts.clone()),
        ];
        let db = DB::open_cf_descriptors(&opts, dir, families)
            .map_err(|e| anyhow::anyhow!("cannot open RocksDB in {}: {e}", dir.display()))?;
        let mut write = WriteOptions::default();
        write.disable_wal(true);
        let mut backend = RocksDbStateBackend {
            db: Some(db),
            path: dir.to_owned(),
            max_parallelism,
            names: Vec::new(),
            expiry,
            purge_from: None,
            heads: Default::default(),
            buffered: Default::default(),
            write,
            values: Default::default(),
        };
        backend.load()?;
        // A restored snapshot's buffered timers.
        let timers = dir.join(timers::TIMERS_FILE);
        if timers.exists() {
            backend.buffered.read_from(&timers)?;
            let _ = std::fs::remove_file(&timers);
        }
        Ok(backend)
    }

    /// Where its files are.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write what the cache and the memtables hold out to files (writes
    /// skip the log: until flushed, recent changes live only in memory).
    pub fn flush(&mut self) -> anyhow::Result<()> {
        self.drain()?;
        for cf in [META, STATE, TIMERS] {
            self.db()
                .flush_cf(self.cf(cf))
                .map_err(|e| anyhow::anyhow!("flushing RocksDB in {}: {e}", self.path.display()))?;
        }
        Ok(())
    }

    /// Compact all of its state (what a compaction drops — values whose
    /// time-to-live ran out — goes from the files now).
    pub fn compact(&mut self) -> anyhow::Result<()> {
        self.flush()?;
        self.db()
            .compact_range_cf(self.cf(STATE), None::<&[u8]>, None::<&[u8]>);
        Ok(())
    }

    fn db(&self) -> &DB {
        self.db.as_ref().expect("open until dropped")
    }

    fn cf(&self, name: &str) -> &ColumnFamily {
        self.db().cf_handle(name).expect("created on open")
    }

    /// State `id`'s entry in the registry of states, into `batch`.
    fn register_in(&self, batch: &mut WriteBatch, id: u32, d: &Declared) {
        let mut v = id.to_be_bytes().to_vec();
        v.push(d.kind.byte());
        if d.stamped || d.value_type.is_some() {
            v.push(u8::from(d.stamped));
        }
        if let Some(ty) = &d.value_type {
            v.extend_from_slice(ty.as_bytes());
        }
        let mut key = b"state/".to_vec();
        key.extend_from_slice(d.name.as_bytes());
        batch.put_cf(self.cf(META), key, v);
    }

    /// Rewrite every stored value of `state` with `convert`, a few MiB a
    /// write (a failure leaves some converted: the task that asked fails,
    /// and its state comes again from a checkpoint).
    fn convert_values(
        &mut self,
        state: u32,
        kind: StateKind,
        convert: &mut crate::Convert<'_>,
    ) -> anyhow::Result<()> {
        // What the cache holds would be read in the old type: out with it.
        self.drain()?;
        self.values.borrow_mut().reset();
        let cf = self.cf(STATE);
        let mut batch = WriteBatch::default();
        let mut options = ReadOptions::default();
        options.fill_cache(false);
        for item in self.db().iterator_cf_opt(cf, options, IteratorMode::Start) {
            let (key, value) = item?;
            if self::expiry::state_of(&key) != Some(state) {
                continue;
            }
            let converted = match kind {
                StateKind::List => {
                    let list = crate::canonical::decode_list(&value)?
                        .iter()
                        .map(|v| convert(v))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(anyhow::Error::msg)?;
                    encode_list(&list)
                }
                StateKind::Value | StateKind::Map => convert(&value).map_err(anyhow::Error::msg)?,
            };
            batch.put_cf(cf, &key, converted);
            if batch.size_in_bytes() >= Self::PURGE_STEP_BYTES {
                self.commit(std::mem::take(&mut batch))?;
            }
        }
        self.commit(batch)
    }

    /// Read the registry of states and the timers' heads back.
    fn load(&mut self) -> anyhow::Result<()> {
        let mut names: Vec<(u32, Declared)> = Vec::new();
        for item in self.db().iterator_cf(self.cf(META), IteratorMode::Start) {
            let (k, v) = item?;
            let Some(name) = k.strip_prefix(b"state/") else {
                continue;
            };
            // id (u32) · kind (u8) [· stamped (u8), since time-to-live
            // [· the values' row type, since typed state]]
            anyhow::ensure!(v.len() >= 5, "a corrupt state registry entry");
            let id = u32::from_be_bytes(v[..4].try_into().expect("4 bytes"));
            let kind = StateKind::from_byte(v[4])?;
            let stamped = v.get(5).is_some_and(|&b| b == 1);
            let value_type = match v.get(6..).filter(|t| !t.is_empty()) {
                Some(t) => Some(
                    String::from_utf8(t.to_vec())
                        .map_err(|_| anyhow::anyhow!("a corrupt state registry entry"))?,
                ),
                None => None,
            };
            let name = String::from_utf8_lossy(name).into_owned();
            names.push((
                id,
                Declared {
                    value_type,
                    ..Declared::new(name, kind, stamped)
                },
            ));
        }
        names.sort_by_key(|(id, _)| *id);
        for (i, (id, d)) in names.into_iter().enumerate() {
            anyhow::ensure!(id as usize == i, "the state registry misses id {i}");
            self.expiry.declare(id, d.kind, d.stamped);
            self.names.push(d);
        }
        for domain in [TimeDomain::EventTime, TimeDomain::ProcessingTime] {
            for group in 0..self.max_parallelism {
                let head = self.first_timer(group, domain)?;
                self.heads[domain_index(domain)].set(group, head);
            }
        }
        Ok(())
    }

    fn group(&self, key: &[u8]) -> u32 {
        key_group(key, self.max_parallelism)
    }

    fn kind(&self, state: u32) -> anyhow::Result<StateKind> {
        self.names
            .get(state as usize)
            .map(|d| d.kind)
            .ok_or_else(|| anyhow::anyhow!("state id {state} was never declared"))
    }

    /// The prefix of every entry of `state` for `key`.
    fn entry_key(&self, state: u32, key: &[u8]) -> anyhow::Result<Vec<u8>> {
        self.kind(state)?;
        let mut k = Vec::with_capacity(12 + key.len());
        k.extend_from_slice(&self.group(key).to_be_bytes());
        k.extend_from_slice(&state.to_be_bytes());
        k.extend_from_slice(&(key.len() as u32).to_be_bytes());
        k.extend_from_slice(key);
        Ok(k)
    }

    fn map_key(&self, state: u32, key: &[u8], map_key: &[u8]) -> anyhow::Result<Vec<u8>> {
        let mut k = self.entry_key(state, key)?;
        k.extend_from_slice(map_key);
        Ok(k)
    }

    fn timer_prefix(group: u32, domain: TimeDomain) -> [u8; 5] {
        let g = group.to_be_bytes();
        [g[0], g[1], g[2], g[3], domain_byte(domain)]
    }

    fn timer_key(&self, t: &Timer) -> Vec<u8> {
        let mut k = Vec::with_capacity(13 + t.key.len());
        k.extend_from_slice(&Self::timer_prefix(self.group(&t.key), t.domain));
        k.extend_from_slice(&time_bytes(t.time));
        k.extend_from_slice(&t.key);
        k
    }

    /// Read options that keep an iteration inside `prefix`.
    fn within(prefix: &[u8]) -> ReadOptions {
        let mut r = ReadOptions::default();
        if let Some(end) = successor(prefix) {
            r.set_iterate_upper_bound(end);
        }
        r
    }

    fn first_timer(&self, group: u32, domain: TimeDomain) -> anyhow::Result<Option<i64>> {
        let prefix = Self::timer_prefix(group, domain);
        let mut it = self.db().iterator_cf_opt(
            self.cf(TIMERS),
            Self::within(&prefix),
            IteratorMode::From(&prefix, Direction::Forward),
        );
        match it.next() {
            Some(item) => Ok(Some(time_of(&item?.0[5..]))),
            None => Ok(None),
        }
    }

    /// Everything the cache and the timer buffer hold, into the database.
    fn drain(&mut self) -> anyhow::Result<()> {
        let mut batch = WriteBatch::default();
        self.drain_values(&mut batch);
        self.drain_timers(&mut batch);
        self.commit(batch)
    }

    /// The buffered timers, into `batch`.
    fn drain_timers(&mut self, batch: &mut WriteBatch) {
        let [event, processing] = self.buffered.drain();
        for (domain, set) in [
            (TimeDomain::EventTime, event),
            (TimeDomain::ProcessingTime, processing),
        ] {
            for (time, key) in set {
                let t = Timer { key, time, domain };
                batch.put_cf(self.cf(TIMERS), self.timer_key(&t), []);
                let group = self.group(&t.key);
                self.heads[domain_index(domain)].lower(group, time);
            }
        }
    }

    /// The value states' changes that RocksDB has not seen, into `batch`.
    fn drain_values(&self, batch: &mut WriteBatch) {
        let cf = self.cf(STATE);
        for (k, v) in self.values.borrow_mut().drain() {
            match v {
                Some(v) => batch.put_cf(cf, k, v),
                None => batch.delete_cf(cf, k),
            }
        }
    }

    /// Add one state change to `batch` (a value state's to the cache).
    fn stage(&self, batch: &mut WriteBatch, op: StateOp) -> anyhow::Result<()> {
        let cf = self.cf(STATE);
        match op {
            StateOp::PutValue { target, value } => {
                let k = self.entry_key(target.state, &target.key)?;
                self.values.borrow_mut().put(k, value);
            }
            StateOp::PutValues(puts) => {
                let mut values = self.values.borrow_mut();
                for (key, value) in puts.iter() {
                    values.put(self.entry_key(puts.state, key)?, value.to_vec());
                }
            }
            StateOp::ReplaceList { target, values } => {
                let k = self.entry_key(target.state, &target.key)?;
                if values.is_empty() {
                    batch.delete_cf(cf, k);
                } else {
                    batch.put_cf(cf, k, encode_list(&values));
                }
            }
            StateOp::AppendList { target, values } => {
                if !values.is_empty() {
                    let k = self.entry_key(target.state, &target.key)?;
                    batch.merge_cf(cf, k, encode_list(&values));
                }
            }
            StateOp::PutEntry {
                target,
                map_key,
                value,
            } => batch.put_cf(
                cf,
                self.map_key(target.state, &target.key, &map_key)?,
                value,
            ),
            StateOp::RemoveEntry { target, map_key } => {
                batch.delete_cf(cf, self.map_key(target.state, &target.key, &map_key)?)
            }
            StateOp::Clear(target) => {
                let k = self.entry_key(target.state, &target.key)?;
                match self.kind(target.state)? {
                    StateKind::Value => self.values.borrow_mut().clear(k),
                    StateKind::List => batch.delete_cf(cf, k),
                    StateKind::Map => match successor(&k) {
                        Some(end) => batch.delete_range_cf(cf, k, end),
                        None => batch.delete_cf(cf, k),
                    },
                }
            }
        }
        Ok(())
    }

    fn commit(&self, batch: WriteBatch) -> anyhow::Result<()> {
        self.db()
            .write_opt(batch, &self.write)
            .map_err(|e| anyhow::anyhow!("RocksDB write in {}: {e}", self.path.display()))
    }

    /// Timer changes into `batch`; returns the key groups whose first timer
    /// may have been deleted (to read again after the write).
    fn stage_timers(
        &mut self,
        batch: &mut WriteBatch,
        ops: Vec<TimerOp>,
    ) -> Vec<(u32, TimeDomain)> {
        let mut stale = Vec::new();
        for op in ops {
            match op {
                TimerOp::Register(t) => {
                    self.buffered.insert(domain_index(t.domain), t.time, t.key);
                }
                TimerOp::Delete(t) => {
                    // Buffered, in the database, or both.
                    self.buffered.remove(domain_index(t.domain), t.time, &t.key);
                    batch.delete_cf(self.cf(TIMERS), self.timer_key(&t));
                    let group = self.group(&t.key);
                    if self.heads[domain_index(t.domain)].by_group.get(&group) == Some(&t.time) {
                        stale.push((group, t.domain));
                    }
                }
            }
        }
        stale
    }

    fn refresh_heads(&mut self, stale: Vec<(u32, TimeDomain)>) -> anyhow::Result<()> {
        for (group, domain) in stale {
            let head = self.first_timer(group, domain)?;
            self.heads[domain_index(domain)].set(group, head);
        }
        Ok(())
    }

    fn property(&self, cf: &str, name: &str) -> u64 {
        self.db()
            .property_int_value_cf(self.cf(cf), name)
            .ok()
            .flatten()
            .unwrap_or(0)
    }
}

impl Drop for RocksDbStateBackend {
    fn drop(&mut self) {
        // Closed first, then its files go.
        drop(self.db.take());
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!("cannot remove the state in {}: {e}", self.path.display());
        }
    }
}

impl StateBackend for RocksDbStateBackend {
    fn declare(&mut self, name: &str, kind: StateKind, stamped: bool) -> Result<u32, String> {
        if let Some(known) = crate::declared(&self.names, name, kind, stamped) {
            return known;
        }
        let id = self.names.len() as u32;
        let declared = Declared::new(name, kind, stamped);
        let mut batch = WriteBatch::default();
        self.register_in(&mut batch, id, &declared);
        self.commit(batch).map_err(|e| format!("{e:#}"))?;
        self.expiry.declare(id, kind, stamped);
        self.names.push(declared);
        Ok(id)
    }

    fn states(&self) -> &[Declared] {
        &self.names
    }

    fn value_type(&self, state: u32) -> Option<&str> {
        self.names.get(state as usize)?.value_type.as_deref()
    }

    fn retype(
        &mut self,
        state: u32,
        ty: Option<&str>,
        convert: Option<&mut crate::Convert<'_>>,
    ) -> anyhow::Result<()> {
        let kind = self.kind(state)?;
        if let Some(convert) = convert {
            self.convert_values(state, kind, convert)?;
        }
        let mut declared = self.names[state as usize].clone();
        declared.value_type = ty.map(str::to_owned);
        let mut batch = WriteBatch::default();
        self.register_in(&mut batch, state, &declared);
        self.commit(batch)?;
        self.names[state as usize] = declared;
        Ok(())
    }

    fn expiry(&self) -> Arc<Expiry> {
        self.expiry.clone()
    }

    fn get_value(&self, state: u32, key: &[u8]) -> anyhow::Result<Option<Vec<u8>>> {
        let k = self.entry_key(state, key)?;
        if let Some(v) = self.values.borrow().get(&k) {
            return Ok(v.map(<[u8]>::to_vec));
        }
        let v = self.db().get_cf(self.cf(STATE), &k)?;
        self.values.borrow_mut().loaded(k, v.clone());
        Ok(v)
    }

    fn get_values(&self, keys: &[StateKey]) -> anyhow::Result<Vec<Option<Vec<u8>>>> {
        let mut out = vec![None; keys.len()];
        // The ones the cache does not know, read in one batch.
        let mut misses = Vec::new();
        {
            let cache = self.values.borrow();
            for (i, key) in keys.iter().enumerate() {
                let k = self.entry_key(key.state, &key.key)?;
                match cache.get(&k) {
                    Some(v) => out[i] = v.map(<[u8]>::to_vec),
                    None => misses.push((i, k)),
                }
            }
        }
        if misses.is_empty() {
            return Ok(out);
        }
        let read = self.db().batched_multi_get_cf(
            self.cf(STATE),
            misses.iter().map(|(_, k)| k.as_slice()),
            false,
        );
        let mut cache = self.values.borrow_mut();
        for ((i, k), r) in misses.into_iter().zip(read) {
            let v = r?.map(|v| v.to_vec());
            cache.loaded(k, v.clone());
            out[i] = v;
        }
        Ok(out)
    }

    fn get_list(&self, state: u32, key: &[u8]) -> anyhow::Result<Vec<Vec<u8>>> {
        match self
            .db()
            .get_cf(self.cf(STATE), self.entry_key(state, key)?)?
        {
            Some(bytes) => crate::canonical::decode_list(&bytes),
            None => Ok(Vec::new()),
        }
    }

    fn get_entry(&self, state: u32, key: &[u8], map_key: &[u8]) -> anyhow::Result<Option<Vec<u8>>> {
        Ok(self
            .db()
            .get_cf(self.cf(STATE), self.map_key(state, key, map_key)?)?)
    }

    fn get_entries(&self, state: u32, key: &[u8]) -> anyhow::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let prefix = self.entry_key(state, key)?;
        let it = self.db().iterator_cf_opt(
            self.cf(STATE),
            Self::within(&prefix),
            IteratorMode::From(&prefix, Direction::Forward),
        );
        let mut out = Vec::new();
        for item in it {
            let (k, v) = item?;
            out.push((k[prefix.len()..].to_vec(), v.into_vec()));
        }
        Ok(out)
    }

    fn apply(&mut self, op: StateOp) -> anyhow::Result<()> {
        self.apply_all(vec![op], Vec::new())
    }

    fn register_timer(&mut self, timer: Timer) -> anyhow::Result<()> {
        self.apply_all(Vec::new(), vec![TimerOp::Register(timer)])
    }

    fn delete_timer(&mut self, timer: &Timer) -> anyhow::Result<()> {
        self.apply_all(Vec::new(), vec![TimerOp::Delete(timer.clone())])
    }

    fn purge_expired(&mut self, now: i64) -> bool {
        match self.purge_step(now) {
            Ok(more) => more,
            Err(e) => {
                // Compactions and snapshots still drop what expired; the
                // next pass starts over.
                tracing::warn!(path = %self.path.display(), "removing expired list elements: {e:#}");
                self.purge_from = None;
                false
            }
        }
    }

    fn apply_all(&mut self, ops: Vec<StateOp>, timers: Vec<TimerOp>) -> anyhow::Result<()> {
        let mut batch = WriteBatch::default();
        for op in ops {
            self.stage(&mut batch, op)?;
        }
        if self.values.borrow().is_full() {
            self.drain_values(&mut batch);
            self.values.borrow_mut().reset();
        }
        let stale = self.stage_timers(&mut batch, timers);
        if self.buffered.is_full() {
            self.drain_timers(&mut batch);
        }
        self.commit(batch)?;
        self.refresh_heads(stale)
    }

    fn take_due_timers(
        &mut self,
        domain: TimeDomain,
        upto: i64,
        limit: usize,
    ) -> anyhow::Result<Vec<Timer>> {
        let d = domain_index(domain);
        let mut due = Vec::new();
        // A merge of the key groups' runs: take from the group with the
        // earliest timer everything up to the next group's earliest.
        while due.len() < limit {
            let mut heads = self.heads[d].ordered.iter();
            let Some(&(first, group)) = heads.next() else {
                break;
            };
            if first > upto {
                break;
            }
            let bound = heads.next().map_or(upto, |&(t, _)| t.min(upto));
            let prefix = Self::timer_prefix(group, domain);
            let mut batch = WriteBatch::default();
            let mut next_head = None;
            {
                let it = self.db().iterator_cf_opt(
                    self.cf(TIMERS),
                    Self::within(&prefix),
                    IteratorMode::From(&prefix, Direction::Forward),
                );
                for item in it {
                    let (k, _) = item?;
                    let time = time_of(&k[5..]);
                    if time > bound || due.len() >= limit {
                        next_head = Some(time);
                        break;
                    }
                    due.push(Timer {
                        key: k[13..].to_vec(),
                        time,
                        domain,
                    });
                    batch.delete_cf(self.cf(TIMERS), &k);
                }
            }
            self.commit(batch)?;
            self.heads[d].set(group, next_head);
        }
        let buffered = self.buffered.take(d, upto, limit);
        if buffered.is_empty() {
            return Ok(due);
        }
        // The database's run stopped at the limit: from its last time on,
        // a timer may still be there.
        let stored_from = (due.len() >= limit).then(|| due.last().map(|t| t.time));
        let stored = due.into_iter().map(|t| (t.time, t.key)).collect();
        let mut all = timers::merge(stored, buffered);
        // Beyond the limit: still due, kept for the next call.
        for (time, key) in all.split_off(limit.min(all.len())) {
            self.buffered.insert(d, time, key);
        }
        // A timer registered both before and after the last drain has two
        // copies: the one neither run reached goes too.
        let mut batch = WriteBatch::default();
        let mut stale = Vec::new();
        let all: Vec<Timer> = all
            .into_iter()
            .map(|(time, key)| Timer { key, time, domain })
            .collect();
        for t in &all {
            self.buffered.remove(d, t.time, &t.key);
            if stored_from.flatten().is_some_and(|from| t.time >= from) {
                batch.delete_cf(self.cf(TIMERS), self.timer_key(t));
                let group = self.group(&t.key);
                if self.heads[d].by_group.get(&group) == Some(&t.time) {
                    stale.push((group, domain));
                }
            }
        }
        self.commit(batch)?;
        self.refresh_heads(stale)?;
        Ok(all)
    }

    fn next_timer(&self, domain: TimeDomain) -> Option<i64> {
        let d = domain_index(domain);
        let stored = self.heads[d].ordered.first().map(|(t, _)| *t);
        match (stored, self.buffered.first(d)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn snapshot(&mut self, dir: &Path) -> anyhow::Result<LocalSnapshot> {
        // A RocksDB checkpoint: the cache's writes applied, memtables
        // flushed, live SST files hard linked (no copy), the database's
        // metadata copied; and beside them the buffered timers, which stay
        // buffered.
        let mut batch = WriteBatch::default();
        self.drain_values(&mut batch);
        self.commit(batch)?;
        let target = dir.join("rocksdb");
        rocksdb::checkpoint::Checkpoint::new(self.db())
            .and_then(|c| c.create_checkpoint(&target))
            .map_err(|e| {
                anyhow::anyhow!(
                    "RocksDB checkpoint of {} into {}: {e}",
                    self.path.display(),
                    target.display()
                )
            })?;
        self.buffered.write_to(&target.join(timers::TIMERS_FILE))?;
        Ok(LocalSnapshot {
            format: SnapshotFormat::RocksDb,
            files: files_of(&target, |name| name.ends_with(".sst"))?,
        })
    }

    fn export(&mut self, path: &Path) -> anyhow::Result<u64> {
        // Everything in the database first (the cache's values, the
        // buffered timers), then one pass over each family, in key order.
        self.drain()?;
        let now = self.expiry.now();
        let mut w = crate::canonical::Writer::create(path, self.max_parallelism, &self.names, now)?;
        let corrupt = || anyhow::anyhow!("a corrupt state key in {}", self.path.display());
        for item in self.db().iterator_cf(self.cf(STATE), IteratorMode::Start) {
            let (k, v) = item?;
            if k.len() < 12 {
                return Err(corrupt());
            }
            let state = u32::from_be_bytes(k[4..8].try_into().expect("4 bytes"));
            let len = u32::from_be_bytes(k[8..12].try_into().expect("4 bytes")) as usize;
            let key = k.get(12..12 + len).ok_or_else(corrupt)?;
            let entry = match self.kind(state)? {
                StateKind::Value => crate::canonical::EntryRef::Value(&v),
                StateKind::List => crate::canonical::EntryRef::EncodedList(&v),
                StateKind::Map => crate::canonical::EntryRef::MapEntry(&k[12 + len..], &v),
            };
            w.entry(state, key, entry)?;
        }
        for item in self.db().iterator_cf(self.cf(TIMERS), IteratorMode::Start) {
            let (k, _) = item?;
            if k.len() < 13 {
                return Err(corrupt());
            }
            let domain = match k[4] {
                0 => TimeDomain::EventTime,
                _ => TimeDomain::ProcessingTime,
            };
            w.timer(domain, time_of(&k[5..13]), &k[13..])?;
        }
        w.finish()
    }

    fn size(&self) -> StateSize {
        // RocksDB's estimates (from its files' properties and memtables, not
        // a walk of the data) plus the cache's new values.
        StateSize {
            entries: self.property(STATE, "rocksdb.estimate-num-keys")
                + self.values.borrow().unstored() as u64,
            bytes: self.property(STATE, "rocksdb.estimate-live-data-size")
                + self.property(STATE, "rocksdb.cur-size-all-mem-tables"),
            timers: self.property(TIMERS, "rocksdb.estimate-num-keys") + self.buffered.len() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_sort_as_their_bytes() {
        let times = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        for w in times.windows(2) {
            assert!(time_bytes(w[0]) < time_bytes(w[1]));
            assert_eq!(time_of(&time_bytes(w[0])), w[0]);
        }
    }

    #[test]
    fn lists_encode_and_successors_bound_prefixes() {
        let l = vec![b"a".to_vec(), Vec::new(), b"xyz".to_vec()];
        assert_eq!(crate::canonical::decode_list(&encode_list(&l)).unwrap(), l);
        assert!(crate::canonical::decode_list(b"\0\0\0\x05ab").is_err());
        assert_eq!(successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(successor(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(successor(b"\xff\xff"), None);
    }

    #[test]
    fn a_key_groups_state_is_one_range_and_its_files_go_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let mut b = RocksDbStateBackend::open(&path, 8).unwrap();
        let s = b.register("v", StateKind::Value).unwrap();
        for i in 0..50u32 {
            b.apply(StateOp::PutValue {
                target: StateKey {
                    state: s,
                    key: i.to_be_bytes().to_vec(),
                },
                value: vec![1],
            })
            .unwrap();
        }
        // Out of the cache, into the database.
        b.flush().unwrap();
        let mut groups = Vec::new();
        for item in b.db().iterator_cf(b.cf(STATE), IteratorMode::Start) {
            let (k, _) = item.unwrap();
            let g = u32::from_be_bytes(k[..4].try_into().unwrap());
            let key = &k[12..];
            assert_eq!(g, key_group(key, 8));
            groups.push(g);
        }
        assert_eq!(groups.len(), 50);
        assert!(
            groups.windows(2).all(|w| w[0] <= w[1]),
            "sorted by key group"
        );
        drop(b);
        assert!(!path.exists(), "removed with the backend");
    }
}
