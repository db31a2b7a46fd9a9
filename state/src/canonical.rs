//! The canonical format of keyed state: one file per operator instance,
//! the same whatever backend wrote it or reads it. The memory backend's
//! snapshots are in it, and so is every savepoint (a RocksDB backend writes
//! it on a savepoint's barrier), so that a savepoint restores into either
//! backend and at any parallelism: every entry and timer carries its key
//! group, and a restore keeps those of the groups its subtask owns.
//!
//! The file (`state.bin`), every integer big-endian:
//!
//! ```text
//! "WEIRSTATE1" · max parallelism (u32)
//! states (u32) · { name (u32 length · UTF-8) · kind (u8: 0 value, 1 list, 2 map;
//!                   +128: its values carry expiry times, see [`crate::ttl`];
//!                   +64: its values are rows, of the type that follows) ·
//!                   [type (u32 length · UTF-8, the type's text)] }
//! entries (u64) · { key group (u32) · state (u32) · key (u32 length · bytes) ·
//!                   tag (u8: 0 value, 1 list, 2 map entry) · payload }
//!     value: bytes (u32 length · bytes)
//!     list:  count (u32) · { bytes (u32 length · bytes) }
//!     map entry: map key (u32 length · bytes) · value (u32 length · bytes)
//! timers (u64) · { key group (u32) · domain (u8: 0 event, 1 processing) · time (i64) ·
//!                  key (u32 length · bytes) }
//! ```
//!
//! A state is known by its name in the file (ids are the file's own): a
//! restore matches names, so a backend that declared its states in another
//! order, or that merges the files of several instances, reads them alike.
//! Values of a state with a time-to-live that expired before the file was
//! written are not in it.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use weir_model::keygroup::key_group;

use crate::snapshot::{KeyGroups, LocalSnapshot, SnapshotFile, SnapshotFormat};
use crate::ttl::{alive_elements, expired};
use crate::{Declared, StateBackend, StateKey, StateKind, StateOp, TimeDomain, Timer, TimerOp};

/// The kind byte's flag for a state whose values carry expiry times.
const STAMPED: u8 = 0x80;

/// The kind byte's flag for a state whose values are rows of a type (its
/// text follows).
const TYPED: u8 = 0x40;

/// The file's first bytes.
pub const MAGIC: &[u8] = b"WEIRSTATE1";

/// The file's name in a snapshot directory.
pub const FILE: &str = weir_model::savepoint::STATE_FILE;

/// One keyed entry, as a backend hands it to a [`Writer`].
#[derive(Debug, Clone, Copy)]
pub enum EntryRef<'a> {
    /// A value state's value.
    Value(&'a [u8]),
    /// A list state's values, each (u32 length · bytes) as RocksDB keeps
    /// them.
    EncodedList(&'a [u8]),
    /// A list state's values.
    List(&'a [Vec<u8>]),
    /// One entry of a map state.
    MapEntry(&'a [u8], &'a [u8]),
}

/// Writes a canonical file, one entry at a time (no need to hold the
/// state in memory): the entries, then the timers.
pub struct Writer {
    out: BufWriter<File>,
    path: std::path::PathBuf,
    max_parallelism: u32,
    states: u32,
    /// Per state: whether its values carry expiry times.
    stamped: Vec<bool>,
    /// Processing time as the file is written: what expired by then stays
    /// out.
    now: i64,
    /// Where the entries' count goes, and how many were written.
    entries_at: u64,
    entries: u64,
    /// Where the timers' count goes (once they begin), and how many.
    timers_at: Option<u64>,
    timers: u64,
    written: u64,
}

impl Writer {
    /// A new file at `path`, for `max_parallelism` key groups, declaring
    /// `names` (a state's id is its index); values that expired at `now`
    /// are left out.
    pub fn create(
        path: &Path,
        max_parallelism: u32,
        names: &[Declared],
        now: i64,
    ) -> anyhow::Result<Writer> {
        let file = File::create(path)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
        let mut w = Writer {
            out: BufWriter::with_capacity(1 << 20, file),
            path: path.to_owned(),
            max_parallelism: max_parallelism.max(1),
            states: names.len() as u32,
            stamped: names.iter().map(|d| d.stamped).collect(),
            now,
            entries_at: 0,
            entries: 0,
            timers_at: None,
            timers: 0,
            written: 0,
        };
        w.put(MAGIC)?;
        w.u32(w.max_parallelism)?;
        w.u32(w.states)?;
        for d in names {
            w.bytes(d.name.as_bytes())?;
            let stamped = if d.stamped { STAMPED } else { 0 };
            let typed = if d.value_type.is_some() { TYPED } else { 0 };
            w.put(&[d.kind.byte() | stamped | typed])?;
            if let Some(ty) = &d.value_type {
                w.bytes(ty.as_bytes())?;
            }
        }
        w.entries_at = w.written;
        w.put(&0u64.to_be_bytes())?;
        Ok(w)
    }

    fn put(&mut self, b: &[u8]) -> anyhow::Result<()> {
        self.out
            .write_all(b)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", self.path.display()))?;
        self.written += b.len() as u64;
        Ok(())
    }

    fn u32(&mut self, n: u32) -> anyhow::Result<()> {
        self.put(&n.to_be_bytes())
    }

    fn bytes(&mut self, b: &[u8]) -> anyhow::Result<()> {
        self.u32(b.len() as u32)?;
        self.put(b)
    }

    /// Entry `entry` of state `state` (an id among the declared names) for
    /// `key`. Every entry comes before the first timer.
    pub fn entry(&mut self, state: u32, key: &[u8], entry: EntryRef<'_>) -> anyhow::Result<()> {
        anyhow::ensure!(self.timers_at.is_none(), "an entry after the timers");
        anyhow::ensure!(state < self.states, "an entry of undeclared state {state}");
        if self.stamped[state as usize] {
            return self.stamped_entry(state, key, entry);
        }
        self.u32(key_group(key, self.max_parallelism))?;
        self.u32(state)?;
        self.bytes(key)?;
        match entry {
            EntryRef::Value(v) => {
                self.put(&[0])?;
                self.bytes(v)?;
            }
            EntryRef::List(values) => {
                self.put(&[1])?;
                self.u32(values.len() as u32)?;
                for v in values {
                    self.bytes(v)?;
                }
            }
            EntryRef::EncodedList(encoded) => {
                self.put(&[1])?;
                let n = list_len(encoded)?;
                self.u32(n)?;
                self.put(encoded)?;
            }
            EntryRef::MapEntry(k, v) => {
                self.put(&[2])?;
                self.bytes(k)?;
                self.bytes(v)?;
            }
        }
        self.entries += 1;
        Ok(())
    }

    /// An entry of a state with a time-to-live: what expired stays out.
    fn stamped_entry(&mut self, state: u32, key: &[u8], entry: EntryRef<'_>) -> anyhow::Result<()> {
        let now = self.now;
        let list = |values: Vec<&[u8]>| values.into_iter().map(<[u8]>::to_vec).collect::<Vec<_>>();
        match entry {
            EntryRef::Value(v) | EntryRef::MapEntry(_, v) if expired(v, now) => Ok(()),
            EntryRef::Value(_) | EntryRef::MapEntry(..) => {
                self.stamped[state as usize] = false;
                let r = self.entry(state, key, entry);
                self.stamped[state as usize] = true;
                r
            }
            EntryRef::List(values) => {
                let alive = list(alive_elements(values, now));
                self.live_list(state, key, alive)
            }
            EntryRef::EncodedList(encoded) => {
                let values = decode_list(encoded)?;
                let alive = list(alive_elements(&values, now));
                self.live_list(state, key, alive)
            }
        }
    }

    fn live_list(&mut self, state: u32, key: &[u8], alive: Vec<Vec<u8>>) -> anyhow::Result<()> {
        if alive.is_empty() {
            return Ok(());
        }
        self.stamped[state as usize] = false;
        let r = self.entry(state, key, EntryRef::List(&alive));
        self.stamped[state as usize] = true;
        r
    }

    /// A timer.
    pub fn timer(&mut self, domain: TimeDomain, time: i64, key: &[u8]) -> anyhow::Result<()> {
        if self.timers_at.is_none() {
            self.timers_at = Some(self.written);
            self.put(&0u64.to_be_bytes())?;
        }
        self.u32(key_group(key, self.max_parallelism))?;
        self.put(&[match domain {
            TimeDomain::EventTime => 0,
            TimeDomain::ProcessingTime => 1,
        }])?;
        self.put(&time.to_be_bytes())?;
        self.bytes(key)?;
        self.timers += 1;
        Ok(())
    }

    /// Write the counts, sync the file: its size.
    pub fn finish(mut self) -> anyhow::Result<u64> {
        if self.timers_at.is_none() {
            self.timers_at = Some(self.written);
            self.put(&0u64.to_be_bytes())?;
        }
        let path = self.path.clone();
        let fail = |e: std::io::Error| anyhow::anyhow!("writing {}: {e}", path.display());
        self.out.flush().map_err(fail)?;
        let file = self.out.get_mut();
        for (at, n) in [
            (self.entries_at, self.entries),
            (self.timers_at.expect("set above"), self.timers),
        ] {
            file.seek(SeekFrom::Start(at)).map_err(fail)?;
            file.write_all(&n.to_be_bytes()).map_err(fail)?;
        }
        file.sync_all().map_err(fail)?;
        Ok(self.written)
    }
}

/// How many values a list encoded as (u32 length · bytes)* holds.
fn list_len(mut encoded: &[u8]) -> anyhow::Result<u32> {
    let mut n = 0;
    while !encoded.is_empty() {
        anyhow::ensure!(encoded.len() >= 4, "a stored list is truncated");
        let len = u32::from_be_bytes(encoded[..4].try_into().expect("4")) as usize;
        anyhow::ensure!(encoded.len() >= 4 + len, "a stored list is truncated");
        encoded = &encoded[4 + len..];
        n += 1;
    }
    Ok(n)
}

/// A list encoded as (u32 length · bytes)*, as RocksDB keeps it.
pub(crate) fn decode_list(mut bytes: &[u8]) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        anyhow::ensure!(bytes.len() >= 4, "a stored list is truncated");
        let n = u32::from_be_bytes(bytes[..4].try_into().expect("4 bytes")) as usize;
        anyhow::ensure!(bytes.len() >= 4 + n, "a stored list is truncated");
        out.push(bytes[4..4 + n].to_vec());
        bytes = &bytes[4 + n..];
    }
    Ok(out)
}

/// Write `backend`'s whole state into `dir` as one canonical file.
pub fn write_snapshot<B: StateBackend + ?Sized>(
    backend: &mut B,
    dir: &Path,
) -> anyhow::Result<LocalSnapshot> {
    let path = dir.join(FILE);
    let size = backend.export(&path)?;
    Ok(LocalSnapshot {
        format: SnapshotFormat::Full,
        files: vec![SnapshotFile {
            name: FILE.into(),
            path,
            size,
            shared: false,
        }],
    })
}

/// A reader that fails on truncated input instead of panicking.
struct Reader<R: Read> {
    inner: R,
    path: std::path::PathBuf,
}

impl<R: Read> Reader<R> {
    fn take(&mut self, buf: &mut [u8]) -> anyhow::Result<()> {
        self.inner.read_exact(buf).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                anyhow::anyhow!("{} is truncated", self.path.display())
            } else {
                anyhow::anyhow!("reading {}: {e}", self.path.display())
            }
        })
    }

    fn u8(&mut self) -> anyhow::Result<u8> {
        let mut b = [0; 1];
        self.take(&mut b)?;
        Ok(b[0])
    }

    fn u32(&mut self) -> anyhow::Result<u32> {
        let mut b = [0; 4];
        self.take(&mut b)?;
        Ok(u32::from_be_bytes(b))
    }

    fn u64(&mut self) -> anyhow::Result<u64> {
        let mut b = [0; 8];
        self.take(&mut b)?;
        Ok(u64::from_be_bytes(b))
    }

    fn bytes(&mut self) -> anyhow::Result<Vec<u8>> {
        let n = self.u32()? as usize;
        // A corrupt length must not allocate gigabytes up front.
        let mut out = Vec::with_capacity(n.min(1 << 20));
        (&mut self.inner)
            .take(n as u64)
            .read_to_end(&mut out)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", self.path.display()))?;
        anyhow::ensure!(out.len() == n, "{} is truncated", self.path.display());
        Ok(out)
    }

    /// A state of the header: name, kind byte and flags, its type if any.
    fn declared(&mut self) -> anyhow::Result<Declared> {
        let text = |b: Vec<u8>, what: &str| {
            String::from_utf8(b).map_err(|_| anyhow::anyhow!("a state's {what} is not UTF-8"))
        };
        let name = text(self.bytes()?, "name")?;
        let byte = self.u8()?;
        let value_type = match byte & TYPED {
            0 => None,
            _ => Some(text(self.bytes()?, "type")?),
        };
        Ok(Declared {
            value_type,
            ..Declared::new(
                name,
                StateKind::from_byte(byte & !(STAMPED | TYPED))?,
                byte & STAMPED != 0,
            )
        })
    }
}

/// How many changes a restore applies at once.
const RESTORE_BATCH: usize = 4096;

/// Load the entries and timers of the key groups `groups` from the
/// canonical files `files` into `backend` (empty, or holding other key
/// groups): states are matched by name, and declared in it if new. A file
/// written for another number of key groups is refused: its groups are
/// not this backend's.
pub fn restore(
    backend: &mut dyn StateBackend,
    max_parallelism: u32,
    files: &[std::path::PathBuf],
    groups: &KeyGroups,
) -> anyhow::Result<()> {
    for path in files {
        let mut r = Restoring {
            backend: &mut *backend,
            max_parallelism,
            groups,
            ops: Vec::new(),
            timers: Vec::new(),
        };
        read(path, &mut r)
            .and_then(|()| r.flush())
            .map_err(|e| anyhow::anyhow!("{}: {e:#}", path.display()))?;
    }
    Ok(())
}

/// One keyed entry as a canonical file holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A value state's value.
    Value(Vec<u8>),
    /// A list state's values.
    List(Vec<Vec<u8>>),
    /// One entry of a map state: its map key and value.
    MapEntry(Vec<u8>, Vec<u8>),
}

/// What reading a canonical file tells, in the file's order.
pub trait Visitor {
    /// The file's max parallelism (first): an error stops the reading.
    fn max_parallelism(&mut self, max_parallelism: u32) -> anyhow::Result<()> {
        let _ = max_parallelism;
        Ok(())
    }
    /// A state the file declares (whether its values carry expiry times,
    /// the type they are rows of): the id its entries are handed over with.
    fn state(&mut self, declared: &Declared) -> anyhow::Result<u32>;
    /// Whether the entries and timers of key group `group` are wanted.
    fn wants(&self, group: u32) -> bool {
        let _ = group;
        true
    }
    /// An entry of state `state` (an id [`Visitor::state`] gave) for `key`.
    fn entry(&mut self, state: u32, key: Vec<u8>, entry: Entry) -> anyhow::Result<()>;
    /// A timer.
    fn timer(&mut self, timer: Timer) -> anyhow::Result<()>;
}

/// The states the canonical file at `path` declares (its header alone is
/// read).
pub fn declared_states(path: &Path) -> anyhow::Result<Vec<Declared>> {
    let file = File::open(path).map_err(|e| anyhow::anyhow!("cannot open it: {e}"))?;
    let mut r = Reader {
        inner: BufReader::new(file),
        path: path.to_owned(),
    };
    let mut magic = [0; MAGIC.len()];
    r.take(&mut magic)?;
    anyhow::ensure!(magic == MAGIC, "not a Weir state file");
    r.u32()?;
    let mut states = Vec::new();
    for _ in 0..r.u32()? {
        states.push(r.declared()?);
    }
    Ok(states)
}

/// Read the canonical file at `path`, telling `visitor` what it holds.
pub fn read(path: &Path, visitor: &mut dyn Visitor) -> anyhow::Result<()> {
    let file = File::open(path).map_err(|e| anyhow::anyhow!("cannot open it: {e}"))?;
    let mut r = Reader {
        inner: BufReader::with_capacity(1 << 20, file),
        path: path.to_owned(),
    };
    let mut magic = [0; MAGIC.len()];
    r.take(&mut magic)?;
    anyhow::ensure!(magic == MAGIC, "not a Weir state file");
    visitor.max_parallelism(r.u32()?)?;
    let mut ids = Vec::new();
    for _ in 0..r.u32()? {
        ids.push(visitor.state(&r.declared()?)?);
    }
    for _ in 0..r.u64()? {
        let group = r.u32()?;
        let state = r.u32()? as usize;
        let key = r.bytes()?;
        anyhow::ensure!(state < ids.len(), "an entry of an undeclared state");
        let entry = match r.u8()? {
            0 => Entry::Value(r.bytes()?),
            1 => {
                let n = r.u32()?;
                let mut values = Vec::with_capacity((n as usize).min(1 << 16));
                for _ in 0..n {
                    values.push(r.bytes()?);
                }
                Entry::List(values)
            }
            2 => Entry::MapEntry(r.bytes()?, r.bytes()?),
            t => anyhow::bail!("unknown entry tag {t}"),
        };
        if visitor.wants(group) {
            visitor.entry(ids[state], key, entry)?;
        }
    }
    for _ in 0..r.u64()? {
        let group = r.u32()?;
        let domain = match r.u8()? {
            0 => TimeDomain::EventTime,
            1 => TimeDomain::ProcessingTime,
            d => anyhow::bail!("unknown timer domain {d}"),
        };
        let mut t = [0; 8];
        r.take(&mut t)?;
        let key = r.bytes()?;
        if visitor.wants(group) {
            visitor.timer(Timer {
                key,
                time: i64::from_be_bytes(t),
                domain,
            })?;
        }
    }
    let mut rest = [0; 1];
    anyhow::ensure!(
        r.inner.read(&mut rest)? == 0,
        "bytes after the end of the state file"
    );
    Ok(())
}

/// A backend being restored: the entries of its key groups, applied a
/// batch at a time.
struct Restoring<'a> {
    backend: &'a mut dyn StateBackend,
    max_parallelism: u32,
    groups: &'a KeyGroups,
    ops: Vec<StateOp>,
    timers: Vec<TimerOp>,
}

impl Restoring<'_> {
    fn flush(&mut self) -> anyhow::Result<()> {
        let (ops, timers) = (
            std::mem::take(&mut self.ops),
            std::mem::take(&mut self.timers),
        );
        self.backend.apply_all(ops, timers)
    }
}

impl Visitor for Restoring<'_> {
    fn max_parallelism(&mut self, written_for: u32) -> anyhow::Result<()> {
        anyhow::ensure!(
            written_for == self.max_parallelism,
            "it holds state for a max parallelism of {written_for}; the job's is {} (a job's max parallelism stays the same for its whole life: its keys' groups depend on it)",
            self.max_parallelism
        );
        Ok(())
    }

    fn state(&mut self, d: &Declared) -> anyhow::Result<u32> {
        let held = self.backend.states().iter().any(|h| h.name == d.name);
        let id = self
            .backend
            .declare(&d.name, d.kind, d.stamped)
            .map_err(|e| anyhow::anyhow!(e))?;
        // The file's values are of its type (the operator converts them
        // when it declares another); values of two types under one state
        // cannot be told apart.
        let (had, has) = (self.backend.value_type(id), d.value_type.as_deref());
        if had != has {
            let kept = |t: Option<&str>| t.map_or("untyped".to_owned(), |t| format!("rows of {t}"));
            anyhow::ensure!(
                !held,
                "state `{}` is kept as {} here and as {} in what was restored before it",
                d.name,
                kept(has),
                kept(had)
            );
            self.backend.retype(id, has, None)?;
        }
        Ok(id)
    }

    fn wants(&self, group: u32) -> bool {
        self.groups.contains(&group)
    }

    fn entry(&mut self, state: u32, key: Vec<u8>, entry: Entry) -> anyhow::Result<()> {
        let target = StateKey { state, key };
        self.ops.push(match entry {
            Entry::Value(value) => StateOp::PutValue { target, value },
            Entry::List(values) => StateOp::ReplaceList { target, values },
            Entry::MapEntry(map_key, value) => StateOp::PutEntry {
                target,
                map_key,
                value,
            },
        });
        if self.ops.len() >= RESTORE_BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn timer(&mut self, timer: Timer) -> anyhow::Result<()> {
        self.timers.push(TimerOp::Register(timer));
        if self.timers.len() >= RESTORE_BATCH {
            self.flush()?;
        }
        Ok(())
    }
}

/// Whether the file at `path` starts as a canonical state file does.
pub fn is_state_file(path: &Path) -> bool {
    let mut magic = [0; MAGIC.len()];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| magic == MAGIC)
}
