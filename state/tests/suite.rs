//! One suite of state-backend tests, run against every backend: what a
//! guest sees of its state and timers must not depend on where they live.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use weir_state::snapshot::{LocalSnapshot, SnapshotFormat};
use weir_state::ttl::{StateTtl, TtlBackend};
use weir_state::{
    MemoryStateBackend, Packed, PackedPuts, RocksDbStateBackend, StateBackend, StateKey, StateKind,
    StateOp, TimeDomain, Timer, TimerOp,
};

/// A backend under test, what keeps it alive (a directory), and how a
/// snapshot of it is read back.
struct Subject {
    backend: Box<dyn StateBackend>,
    _dir: Option<tempfile::TempDir>,
    restore: fn(&LocalSnapshot, &std::path::Path) -> Box<dyn StateBackend>,
}

fn key(state: u32, k: &str) -> StateKey {
    StateKey {
        state,
        key: k.as_bytes().to_vec(),
    }
}

fn timer(k: &str, time: i64, domain: TimeDomain) -> Timer {
    Timer {
        key: k.as_bytes().to_vec(),
        time,
        domain,
    }
}

fn put(state: u32, k: &str, v: &str) -> StateOp {
    StateOp::PutValue {
        target: key(state, k),
        value: v.as_bytes().to_vec(),
    }
}

fn bytes(v: &[&str]) -> Vec<Vec<u8>> {
    v.iter().map(|s| s.as_bytes().to_vec()).collect()
}

fn values_and_kinds(mut s: Subject) {
    let b = &mut s.backend;
    let count = b.register("count", StateKind::Value).unwrap();
    assert_eq!(b.register("count", StateKind::Value).unwrap(), count);
    let e = b.register("count", StateKind::List).unwrap_err();
    assert!(e.contains("already declared"), "{e}");
    let other = b.register("other", StateKind::Value).unwrap();
    assert_ne!(other, count);
    b.apply(put(count, "a", "1")).unwrap();
    b.apply(put(count, "a", "2")).unwrap();
    b.apply(put(other, "a", "x")).unwrap();
    assert_eq!(b.get_value(count, b"a").unwrap(), Some(b"2".to_vec()));
    assert_eq!(b.get_value(other, b"a").unwrap(), Some(b"x".to_vec()));
    assert_eq!(b.get_value(count, b"b").unwrap(), None);
    // The bulk read answers in order, one per request.
    let got = b
        .get_values(&[key(count, "b"), key(count, "a"), key(other, "a")])
        .unwrap();
    assert_eq!(got, vec![None, Some(b"2".to_vec()), Some(b"x".to_vec())]);
    b.apply(StateOp::Clear(key(count, "a"))).unwrap();
    assert_eq!(b.get_value(count, b"a").unwrap(), None);
    assert_eq!(b.get_value(other, b"a").unwrap(), Some(b"x".to_vec()));
    assert!(
        b.get_value(99, b"a").is_err(),
        "an undeclared id is an error"
    );
}

fn packed(strings: &[&str]) -> Packed {
    let mut data = Vec::new();
    let mut ends = Vec::new();
    for s in strings {
        data.extend_from_slice(s.as_bytes());
        ends.push(data.len() as u32);
    }
    Packed::new(data, ends).unwrap()
}

fn packed_puts_and_reads(mut s: Subject) {
    let b = &mut s.backend;
    let count = b.register("count", StateKind::Value).unwrap();
    let other = b.register("other", StateKind::Value).unwrap();
    b.apply(put(count, "a", "old value, longer")).unwrap();
    // Puts in order: a later put of the same key wins; an empty value is set.
    let puts = PackedPuts::new(
        count,
        packed(&["a", "b", "", "b"]),
        packed(&["1", "2", "", "3"]),
    )
    .unwrap();
    b.apply_all(vec![StateOp::PutValues(puts), put(other, "a", "x")], vec![])
        .unwrap();
    assert_eq!(b.get_value(count, b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(b.get_value(count, b"b").unwrap(), Some(b"3".to_vec()));
    assert_eq!(b.get_value(count, b"").unwrap(), Some(Vec::new()));
    // The bulk read into one buffer: key-major, unset ones empty and absent.
    let (mut data, mut ends, mut present) = (Vec::new(), Vec::new(), Vec::new());
    let keys: [&[u8]; 3] = [b"a", b"zz", b""];
    b.read_values(
        &[count, other],
        &mut keys.into_iter(),
        &mut data,
        &mut ends,
        &mut present,
    )
    .unwrap();
    assert_eq!(present, [true, true, false, false, true, false]);
    let strings = Packed::new(data, ends).unwrap();
    let strings: Vec<&[u8]> = strings.iter().collect();
    assert_eq!(strings, [&b"1"[..], b"x", b"", b"", b"", b""]);
    // In one batch, puts and other changes of the same key apply in order.
    let puts =
        |v: &str| StateOp::PutValues(PackedPuts::new(count, packed(&["k"]), packed(&[v])).unwrap());
    b.apply_all(
        vec![
            StateOp::Clear(key(count, "k")),
            puts("1"),
            StateOp::Clear(key(count, "k")),
        ],
        vec![],
    )
    .unwrap();
    assert_eq!(b.get_value(count, b"k").unwrap(), None);
    b.apply_all(
        vec![puts("1"), StateOp::Clear(key(count, "k")), puts("2")],
        vec![],
    )
    .unwrap();
    assert_eq!(b.get_value(count, b"k").unwrap(), Some(b"2".to_vec()));
    // Puts into an undeclared state, or of unequal numbers, are errors.
    let e = PackedPuts::new(count, packed(&["a"]), packed(&[])).unwrap_err();
    assert!(e.contains("1 keys but 0 values"), "{e}");
    let bad = PackedPuts::new(99, packed(&["a"]), packed(&["1"])).unwrap();
    assert!(b.apply(StateOp::PutValues(bad)).is_err());
    assert!(Packed::new(b"ab".to_vec(), vec![1, 3]).is_err());
    // What a quota counts is what is held, bytes after the last string too.
    assert_eq!(
        Packed::new(b"abXYZ".to_vec(), vec![1, 2]).unwrap().bytes(),
        5
    );
    assert!(Packed::new(b"ab".to_vec(), vec![2, 1]).is_err());
}

fn keys_are_bytes_not_strings(mut s: Subject) {
    let b = &mut s.backend;
    let v = b.register("v", StateKind::Value).unwrap();
    let m = b.register("m", StateKind::Map).unwrap();
    // Keys that are prefixes of each other, empty and binary keys stay apart.
    for k in [&b""[..], b"a", b"ab", b"\0", b"\xff\xff"] {
        b.apply(StateOp::PutValue {
            target: StateKey {
                state: v,
                key: k.to_vec(),
            },
            value: k.to_vec(),
        })
        .unwrap();
        b.apply(StateOp::PutEntry {
            target: StateKey {
                state: m,
                key: k.to_vec(),
            },
            map_key: b"k".to_vec(),
            value: k.to_vec(),
        })
        .unwrap();
    }
    for k in [&b""[..], b"a", b"ab", b"\0", b"\xff\xff"] {
        assert_eq!(b.get_value(v, k).unwrap(), Some(k.to_vec()));
        assert_eq!(
            b.get_entries(m, k).unwrap(),
            vec![(b"k".to_vec(), k.to_vec())]
        );
    }
    b.apply(StateOp::Clear(StateKey {
        state: m,
        key: b"a".to_vec(),
    }))
    .unwrap();
    assert!(b.get_entries(m, b"a").unwrap().is_empty());
    assert_eq!(b.get_entries(m, b"ab").unwrap().len(), 1);
}

fn lists(mut s: Subject) {
    let b = &mut s.backend;
    let l = b.register("l", StateKind::List).unwrap();
    assert!(b.get_list(l, b"k").unwrap().is_empty());
    b.apply(StateOp::AppendList {
        target: key(l, "k"),
        values: bytes(&["a", "b"]),
    })
    .unwrap();
    b.apply(StateOp::AppendList {
        target: key(l, "k"),
        values: bytes(&["", "c"]),
    })
    .unwrap();
    assert_eq!(b.get_list(l, b"k").unwrap(), bytes(&["a", "b", "", "c"]));
    b.apply(StateOp::ReplaceList {
        target: key(l, "k"),
        values: bytes(&["z"]),
    })
    .unwrap();
    b.apply(StateOp::AppendList {
        target: key(l, "k"),
        values: bytes(&["y"]),
    })
    .unwrap();
    assert_eq!(b.get_list(l, b"k").unwrap(), bytes(&["z", "y"]));
    b.apply(StateOp::ReplaceList {
        target: key(l, "k"),
        values: Vec::new(),
    })
    .unwrap();
    assert!(b.get_list(l, b"k").unwrap().is_empty());
    b.apply(StateOp::AppendList {
        target: key(l, "j"),
        values: bytes(&["1"]),
    })
    .unwrap();
    b.apply(StateOp::Clear(key(l, "j"))).unwrap();
    assert!(b.get_list(l, b"j").unwrap().is_empty());
}

fn maps(mut s: Subject) {
    let b = &mut s.backend;
    let m = b.register("m", StateKind::Map).unwrap();
    for (mk, v) in [("b", "2"), ("a", "1"), ("c", "3"), ("a", "one")] {
        b.apply(StateOp::PutEntry {
            target: key(m, "k"),
            map_key: mk.as_bytes().to_vec(),
            value: v.as_bytes().to_vec(),
        })
        .unwrap();
    }
    b.apply(StateOp::PutEntry {
        target: key(m, "other"),
        map_key: b"a".to_vec(),
        value: b"x".to_vec(),
    })
    .unwrap();
    assert_eq!(b.get_entry(m, b"k", b"a").unwrap(), Some(b"one".to_vec()));
    assert_eq!(b.get_entry(m, b"k", b"zz").unwrap(), None);
    // In map-key byte order.
    let entries = b.get_entries(m, b"k").unwrap();
    let keys: Vec<&[u8]> = entries.iter().map(|(k, _)| k.as_slice()).collect();
    assert_eq!(keys, [&b"a"[..], b"b", b"c"]);
    b.apply(StateOp::RemoveEntry {
        target: key(m, "k"),
        map_key: b"b".to_vec(),
    })
    .unwrap();
    assert_eq!(b.get_entries(m, b"k").unwrap().len(), 2);
    b.apply(StateOp::Clear(key(m, "k"))).unwrap();
    assert!(b.get_entries(m, b"k").unwrap().is_empty());
    assert_eq!(b.get_entry(m, b"other", b"a").unwrap(), Some(b"x".to_vec()));
}

fn a_batch_applies_in_order(mut s: Subject) {
    let b = &mut s.backend;
    let v = b.register("v", StateKind::Value).unwrap();
    let l = b.register("l", StateKind::List).unwrap();
    b.apply_all(
        vec![
            put(v, "k", "1"),
            put(v, "k", "2"),
            StateOp::Clear(key(v, "gone")),
            StateOp::AppendList {
                target: key(l, "k"),
                values: bytes(&["a"]),
            },
            StateOp::AppendList {
                target: key(l, "k"),
                values: bytes(&["b"]),
            },
        ],
        vec![
            TimerOp::Register(timer("k", 5, TimeDomain::EventTime)),
            TimerOp::Delete(timer("k", 5, TimeDomain::EventTime)),
            TimerOp::Register(timer("k", 7, TimeDomain::EventTime)),
        ],
    )
    .unwrap();
    assert_eq!(b.get_value(v, b"k").unwrap(), Some(b"2".to_vec()));
    assert_eq!(b.get_list(l, b"k").unwrap(), bytes(&["a", "b"]));
    assert_eq!(b.next_timer(TimeDomain::EventTime), Some(7));
}

fn timers_fire_in_time_order_once(mut s: Subject) {
    let b = &mut s.backend;
    let et = TimeDomain::EventTime;
    for (t, k) in [(30, "a"), (10, "b"), (20, "a"), (10, "b"), (-4, "neg")] {
        b.register_timer(timer(k, t, et)).unwrap();
    }
    b.register_timer(timer("a", 15, TimeDomain::ProcessingTime))
        .unwrap();
    b.delete_timer(&timer("a", 30, et)).unwrap();
    b.delete_timer(&timer("nobody", 3, et)).unwrap();
    assert_eq!(b.next_timer(et), Some(-4));
    assert_eq!(b.next_timer(TimeDomain::ProcessingTime), Some(15));
    let due = b.take_due_timers(et, 25, 100).unwrap();
    let fired: Vec<(i64, &[u8])> = due.iter().map(|t| (t.time, t.key.as_slice())).collect();
    assert_eq!(fired, [(-4, &b"neg"[..]), (10, b"b"), (20, b"a")]);
    assert!(due.iter().all(|t| t.domain == et));
    assert_eq!(b.next_timer(et), None);
    assert!(b.take_due_timers(et, i64::MAX, 100).unwrap().is_empty());
    let due = b
        .take_due_timers(TimeDomain::ProcessingTime, 15, 100)
        .unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(b.next_timer(TimeDomain::ProcessingTime), None);
}

fn many_timers_come_in_time_order_within_the_limit(mut s: Subject) {
    let b = &mut s.backend;
    let et = TimeDomain::EventTime;
    // 2,000 keys, each with timers at three times, spread over key groups.
    let mut expected = Vec::new();
    for i in 0..2000 {
        for t in [i % 7, 100 + i % 13, 1000] {
            let k = format!("key-{i}");
            b.register_timer(timer(&k, t, et)).unwrap();
            expected.push((t, k));
        }
    }
    expected.sort();
    let mut fired = Vec::new();
    loop {
        let due = b.take_due_timers(et, 999, 256).unwrap();
        assert!(due.len() <= 256);
        if due.is_empty() {
            break;
        }
        fired.extend(due);
    }
    assert!(
        fired.windows(2).all(|w| w[0].time <= w[1].time),
        "in time order across key groups"
    );
    let mut got: Vec<(i64, String)> = fired
        .iter()
        .map(|t| (t.time, String::from_utf8(t.key.clone()).unwrap()))
        .collect();
    got.sort();
    let before: Vec<(i64, String)> = expected
        .iter()
        .filter(|(t, _)| *t <= 999)
        .cloned()
        .collect();
    assert_eq!(got, before, "each exactly once");
    assert_eq!(b.next_timer(et), Some(1000));
    assert_eq!(b.take_due_timers(et, 1000, usize::MAX).unwrap().len(), 2000);
}

/// Timers registered before a snapshot and again after it (some twice,
/// some deleted, more than any buffer holds), then taken in small
/// batches: each fires once, in time order.
fn timers_registered_across_snapshots_fire_once(mut s: Subject) {
    let b = &mut s.backend;
    let et = TimeDomain::EventTime;
    let n = 250_000i64;
    let register = |b: &mut Box<dyn StateBackend>, range: std::ops::Range<i64>| {
        let ops = range
            .map(|i| TimerOp::Register(timer(&format!("k{}", i % 5000), i / 4, et)))
            .collect();
        b.apply_all(Vec::new(), ops).unwrap();
    };
    register(b, 0..n * 9 / 10);
    let dir = tempfile::tempdir().unwrap();
    b.snapshot(dir.path()).unwrap();
    // Again, overlapping what the snapshot wrote, and the rest.
    register(b, n / 4..n);
    let deleted = timer("k7", 7 / 4, et);
    b.delete_timer(&deleted).unwrap();
    let mut expected: Vec<(i64, String)> = (0..n)
        .map(|i| (i / 4, format!("k{}", i % 5000)))
        .filter(|(t, k)| (*t, k.as_bytes()) != (deleted.time, &deleted.key[..]))
        .collect();
    expected.sort();
    expected.dedup();
    assert_eq!(b.next_timer(et), Some(0));
    let mut fired = Vec::new();
    loop {
        let due = b.take_due_timers(et, n, 700).unwrap();
        assert!(due.len() <= 700);
        if due.is_empty() {
            break;
        }
        fired.extend(
            due.into_iter()
                .map(|t| (t.time, String::from_utf8(t.key).unwrap())),
        );
    }
    assert!(fired.windows(2).all(|w| w[0].0 <= w[1].0), "in time order");
    fired.sort();
    assert_eq!(fired.len(), expected.len(), "each once");
    assert_eq!(fired, expected);
    assert_eq!(b.next_timer(et), None);
}

fn a_snapshot_holds_everything_and_reads_back(mut s: Subject) {
    let b = &mut s.backend;
    let v = b.register("v", StateKind::Value).unwrap();
    let l = b.register("l", StateKind::List).unwrap();
    let m = b.register("m", StateKind::Map).unwrap();
    for i in 0..300 {
        let k = format!("k{i}");
        b.apply_all(
            vec![
                put(v, &k, &i.to_string()),
                StateOp::AppendList {
                    target: key(l, &k),
                    values: bytes(&["a", "b"]),
                },
                StateOp::PutEntry {
                    target: key(m, &k),
                    map_key: b"x".to_vec(),
                    value: k.as_bytes().to_vec(),
                },
            ],
            vec![
                TimerOp::Register(timer(&k, i, TimeDomain::EventTime)),
                TimerOp::Register(timer(&k, 1000 + i, TimeDomain::ProcessingTime)),
            ],
        )
        .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let snap = b.snapshot(dir.path()).unwrap();
    assert!(!snap.files.is_empty());
    assert!(snap.files.iter().all(|f| f.path.is_file()));
    assert!(snap.files.iter().map(|f| f.size).sum::<u64>() > 0);
    // Changes after the snapshot are not in it.
    b.apply(put(v, "k0", "changed")).unwrap();
    let into = tempfile::tempdir().unwrap();
    let mut r = (s.restore)(&snap, into.path());
    assert_eq!(r.register("m", StateKind::Map).unwrap(), m);
    assert_eq!(r.register("v", StateKind::Value).unwrap(), v);
    assert_eq!(r.register("l", StateKind::List).unwrap(), l);
    assert_eq!(r.get_value(v, b"k0").unwrap(), Some(b"0".to_vec()));
    for i in [1, 150, 299] {
        let k = format!("k{i}");
        assert_eq!(
            r.get_value(v, k.as_bytes()).unwrap(),
            Some(i.to_string().into_bytes())
        );
        assert_eq!(r.get_list(l, k.as_bytes()).unwrap(), bytes(&["a", "b"]));
        assert_eq!(
            r.get_entry(m, k.as_bytes(), b"x").unwrap(),
            Some(k.clone().into_bytes())
        );
    }
    assert_eq!(r.next_timer(TimeDomain::EventTime), Some(0));
    assert_eq!(r.next_timer(TimeDomain::ProcessingTime), Some(1000));
    assert_eq!(
        r.take_due_timers(TimeDomain::EventTime, i64::MAX, 1000)
            .unwrap()
            .len(),
        300
    );
}

/// More values than any cache in front of the state holds (24 MiB),
/// written, overwritten, partly cleared, then snapshotted: every read and
/// the restored state see the newest of each.
fn many_values_read_back_their_newest_versions(mut s: Subject) {
    let b = &mut s.backend;
    let v = b.register("v", StateKind::Value).unwrap();
    let big = |i: u32, round: u8| {
        let mut value = vec![round; 1024];
        value[..4].copy_from_slice(&i.to_be_bytes());
        value
    };
    let n = 24 * 1024u32;
    for round in 0..2u8 {
        for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
            let keys: Vec<StateKey> = chunk.iter().map(|i| key(v, &format!("k{i}"))).collect();
            let before = b.get_values(&keys).unwrap();
            for (i, got) in chunk.iter().zip(&before) {
                assert_eq!(got, &(round > 0).then(|| big(*i, round - 1)), "k{i}");
            }
            let ops = chunk
                .iter()
                .map(|&i| StateOp::PutValue {
                    target: key(v, &format!("k{i}")),
                    value: big(i, round),
                })
                .collect();
            b.apply_all(ops, Vec::new()).unwrap();
        }
    }
    for i in (0..n).step_by(3) {
        b.apply(StateOp::Clear(key(v, &format!("k{i}")))).unwrap();
    }
    let expected = |i: u32| (!i.is_multiple_of(3)).then(|| big(i, 1));
    for i in (0..n).step_by(97) {
        assert_eq!(
            b.get_value(v, format!("k{i}").as_bytes()).unwrap(),
            expected(i)
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let snap = b.snapshot(dir.path()).unwrap();
    let into = tempfile::tempdir().unwrap();
    let mut r = (s.restore)(&snap, into.path());
    assert_eq!(r.register("v", StateKind::Value).unwrap(), v);
    for i in 0..n {
        assert_eq!(
            r.get_value(v, format!("k{i}").as_bytes()).unwrap(),
            expected(i),
            "k{i}"
        );
    }
}

fn memory() -> Subject {
    Subject {
        backend: Box::new(MemoryStateBackend::new()),
        _dir: None,
        restore: |snap, _| {
            assert_eq!(snap.format, SnapshotFormat::Full);
            Box::new(
                MemoryStateBackend::restore(&[snap.files[0].path.clone()], 128, 0..128).unwrap(),
            )
        },
    }
}

fn rocksdb() -> Subject {
    let dir = tempfile::tempdir().unwrap();
    let backend = RocksDbStateBackend::open(&dir.path().join("db"), 128).unwrap();
    Subject {
        backend: Box::new(backend),
        _dir: Some(dir),
        restore: |snap, into| {
            assert_eq!(snap.format, SnapshotFormat::RocksDb);
            // As a restore does: the files, downloaded into a directory.
            let db = into.join("db");
            std::fs::create_dir_all(&db).unwrap();
            for f in &snap.files {
                std::fs::copy(&f.path, db.join(&f.name)).unwrap();
            }
            Box::new(RocksDbStateBackend::open(&db, 128).unwrap())
        },
    }
}

/// The suite, once per backend.
macro_rules! suite {
    ($($test:ident),* $(,)?) => {
        mod memory_backend {
            $(#[test] fn $test() { super::$test(super::memory()) })*
        }
        mod rocksdb_backend {
            $(#[test] fn $test() { super::$test(super::rocksdb()) })*
        }
    };
}

suite!(
    values_and_kinds,
    packed_puts_and_reads,
    keys_are_bytes_not_strings,
    lists,
    maps,
    a_batch_applies_in_order,
    timers_fire_in_time_order_once,
    many_timers_come_in_time_order_within_the_limit,
    a_snapshot_holds_everything_and_reads_back,
    many_values_read_back_their_newest_versions,
    timers_registered_across_snapshots_fire_once,
    a_savepoint_restores_into_either_backend_at_any_parallelism,
    values_lists_and_map_entries_expire_by_their_time_to_live,
    expired_values_leave_full_snapshots_and_a_restore_keeps_the_time_to_live,
    a_list_read_and_added_to_keeps_its_elements_expiry,
    a_retyped_state_converts_every_value_and_keeps_its_type,
);

/// Files that keep one state with two types (the subtasks of a savepoint
/// that declared it differently) are refused when merged: their values
/// could not be told apart.
#[test]
fn files_keeping_a_state_with_two_types_are_not_merged() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (i, ty) in [Some("{n: u64}"), Some("{n: u32}"), None]
        .into_iter()
        .enumerate()
    {
        let mut b = MemoryStateBackend::with_key_groups(128);
        let v = b.register("v", StateKind::Value).unwrap();
        b.retype(v, ty, None).unwrap();
        b.apply(put(v, &format!("k{i}"), "x")).unwrap();
        let d = dir.path().join(i.to_string());
        std::fs::create_dir_all(&d).unwrap();
        files.push(b.savepoint(&d).unwrap().files[0].path.clone());
    }
    let mut same = MemoryStateBackend::with_key_groups(128);
    weir_state::canonical::restore(&mut same, 128, &files[..1], &(0..128)).unwrap();
    weir_state::canonical::restore(&mut same, 128, &files[..1], &(0..128)).unwrap();
    assert_eq!(same.value_type(0), Some("{n: u64}"));
    for other in [&files[1], &files[2]] {
        let mut into = MemoryStateBackend::with_key_groups(128);
        let e = weir_state::canonical::restore(
            &mut into,
            128,
            &[files[0].clone(), other.clone()],
            &(0..128),
        )
        .unwrap_err();
        let e = format!("{e:#}");
        assert!(
            e.contains("state `v` is kept as") && e.contains("{n: u64}"),
            "{e}"
        );
    }
}

/// What expired is not converted: it is never read again (and a value
/// that no longer fits the new type must not fail the task for it).
#[test]
fn a_retype_leaves_expired_values_as_they_are() {
    let (now, clock) = manual_clock();
    let mut b = TtlBackend::new(Box::new(MemoryStateBackend::new())).with_clock(clock);
    let v = b
        .declare_ttl("v", StateKind::Value, ttl(10, false))
        .unwrap();
    b.apply(put(v, "old", "unreadable")).unwrap();
    now.store(5, Ordering::Relaxed);
    b.apply(put(v, "new", "1")).unwrap();
    now.store(12, Ordering::Relaxed);
    let mut only_numbers = |v: &[u8]| {
        std::str::from_utf8(v)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .map(|n| (n + 1).to_string().into_bytes())
            .ok_or_else(|| format!("{:?} is not a number", String::from_utf8_lossy(v)))
    };
    b.retype(v, Some("u64"), Some(&mut only_numbers)).unwrap();
    assert_eq!(b.get_value(v, b"new").unwrap(), Some(b"2".to_vec()));
    assert_eq!(b.get_value(v, b"old").unwrap(), None);
}

/// `r:` before the value: a conversion the test can see.
fn retyped(v: &[u8]) -> Result<Vec<u8>, String> {
    Ok([b"r:", v].concat())
}

/// Retyping a state rewrites every value of it — a value (one the value
/// cache holds too), each element of a list (its expiry stamp kept), each
/// value of a map (not its keys) — and nothing of another state; the type
/// is kept through a snapshot, a savepoint and a restore of either; a
/// conversion that fails leaves the type as it was.
fn a_retyped_state_converts_every_value_and_keeps_its_type(s: Subject) {
    let restore = s.restore;
    let _dir = s._dir;
    let (_, clock) = manual_clock();
    let mut b = TtlBackend::new(s.backend).with_clock(clock.clone());
    let v = b.declare_ttl("v", StateKind::Value, None).unwrap();
    let l = b
        .declare_ttl("l", StateKind::List, ttl(60_000, false))
        .unwrap();
    let m = b.declare_ttl("m", StateKind::Map, None).unwrap();
    let other = b.declare_ttl("other", StateKind::Value, None).unwrap();
    for i in 0..300 {
        let k = format!("k{i}");
        b.apply_all(
            vec![
                put(v, &k, &i.to_string()),
                put(other, &k, "o"),
                StateOp::AppendList {
                    target: key(l, &k),
                    values: bytes(&["a", "b"]),
                },
                StateOp::PutEntry {
                    target: key(m, &k),
                    map_key: b"x".to_vec(),
                    value: b"y".to_vec(),
                },
            ],
            vec![],
        )
        .unwrap();
    }
    // Read once: the value cache (RocksDB) holds it as it was.
    assert_eq!(b.get_value(v, b"k7").unwrap(), Some(b"7".to_vec()));
    assert_eq!(b.value_type(v), None);
    let ty = "{n: u64}";
    for state in [v, l, m] {
        b.retype(state, Some(ty), Some(&mut retyped)).unwrap();
        assert_eq!(b.value_type(state), Some(ty));
    }
    let check = |b: &dyn StateBackend, what: &str| {
        for i in 0..300 {
            let k = format!("k{i}");
            let kb = k.as_bytes();
            assert_eq!(
                b.get_value(v, kb).unwrap(),
                Some(format!("r:{i}").into_bytes()),
                "{what}: {k}"
            );
            assert_eq!(b.get_list(l, kb).unwrap(), bytes(&["r:a", "r:b"]), "{what}");
            assert_eq!(
                b.get_entries(m, kb).unwrap(),
                [(b"x".to_vec(), b"r:y".to_vec())],
                "{what}"
            );
            assert_eq!(b.get_value(other, kb).unwrap(), Some(b"o".to_vec()));
        }
        for (state, ty) in [(v, Some(ty)), (l, Some(ty)), (m, Some(ty)), (other, None)] {
            assert_eq!(b.value_type(state), ty, "{what}");
        }
    };
    check(&b, "retyped");

    // A failed conversion leaves the type as it was.
    let mut fails = |_: &[u8]| Err::<Vec<u8>, _>("no".to_owned());
    assert!(b.retype(other, Some(ty), Some(&mut fails)).is_err());
    assert_eq!(b.value_type(other), None);

    let snap_dir = tempfile::tempdir().unwrap();
    let snap = b.snapshot(snap_dir.path()).unwrap();
    let into = tempfile::tempdir().unwrap();
    // As an operator would: its states declared again over what came back.
    let declared_again = |into: Box<dyn StateBackend>| {
        let mut b = TtlBackend::new(into).with_clock(clock.clone());
        let ids = [
            b.declare_ttl("v", StateKind::Value, None).unwrap(),
            b.declare_ttl("l", StateKind::List, ttl(60_000, false))
                .unwrap(),
            b.declare_ttl("m", StateKind::Map, None).unwrap(),
            b.declare_ttl("other", StateKind::Value, None).unwrap(),
        ];
        assert_eq!(ids, [v, l, m, other]);
        b
    };
    let restored = declared_again(restore(&snap, into.path()));
    check(&restored, "restored from a snapshot");
    let sp_dir = tempfile::tempdir().unwrap();
    let sp = b.savepoint(sp_dir.path()).unwrap();
    let declared = weir_state::canonical::declared_states(&sp.files[0].path).unwrap();
    assert_eq!(
        declared
            .iter()
            .map(|d| d.value_type.as_deref())
            .collect::<Vec<_>>(),
        [Some(ty), Some(ty), Some(ty), None]
    );
    for mut into in [
        Box::new(MemoryStateBackend::with_key_groups(128)) as Box<dyn StateBackend>,
        Box::new(RocksDbStateBackend::open(&into.path().join("sp"), 128).unwrap()),
    ] {
        weir_state::canonical::restore(&mut *into, 128, &[sp.files[0].path.clone()], &(0..128))
            .unwrap();
        check(&declared_again(into), "restored from a savepoint");
    }
}

/// A savepoint of either backend is one canonical file that restores into
/// either backend, split by key groups over any number of subtasks: every
/// entry and timer in exactly one of them.
fn a_savepoint_restores_into_either_backend_at_any_parallelism(mut s: Subject) {
    let b = &mut s.backend;
    let v = b.register("v", StateKind::Value).unwrap();
    let l = b.register("l", StateKind::List).unwrap();
    let m = b.register("m", StateKind::Map).unwrap();
    for i in 0..500 {
        let k = format!("k{i}");
        b.apply_all(
            vec![
                put(v, &k, &i.to_string()),
                StateOp::AppendList {
                    target: key(l, &k),
                    values: bytes(&["a", &k]),
                },
                StateOp::PutEntry {
                    target: key(m, &k),
                    map_key: b"x".to_vec(),
                    value: k.as_bytes().to_vec(),
                },
                StateOp::PutEntry {
                    target: key(m, &k),
                    map_key: b"y".to_vec(),
                    value: b"2".to_vec(),
                },
            ],
            vec![
                TimerOp::Register(timer(&k, i, TimeDomain::EventTime)),
                TimerOp::Register(timer(&k, 5000 + i, TimeDomain::ProcessingTime)),
            ],
        )
        .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let snap = b.savepoint(dir.path()).unwrap();
    assert_eq!(snap.format, SnapshotFormat::Full);
    assert!(weir_state::canonical::is_state_file(&snap.files[0].path));
    // Two subtasks' files (taken at parallelism 2) merge into one.
    let halves: Vec<std::path::PathBuf> = (0..2u32)
        .map(|i| {
            let groups = weir_model::keygroup::key_groups_of(i, 128, 2);
            let mut half = MemoryStateBackend::with_key_groups(128);
            weir_state::canonical::restore(&mut half, 128, &[snap.files[0].path.clone()], &groups)
                .unwrap();
            let d = dir.path().join(format!("half-{i}"));
            std::fs::create_dir_all(&d).unwrap();
            half.savepoint(&d).unwrap().files[0].path.clone()
        })
        .collect();
    let mut merged = MemoryStateBackend::with_key_groups(128);
    weir_state::canonical::restore(&mut merged, 128, &halves, &(0..128)).unwrap();
    assert_eq!(merged.len(), 1500, "500 keys' value, list and map, merged");
    let files = vec![snap.files[0].path.clone()];
    let rocks = tempfile::tempdir().unwrap();
    for parallelism in [1u32, 2, 3] {
        let mut parts: Vec<Box<dyn StateBackend>> = Vec::new();
        for i in 0..parallelism {
            let groups = weir_model::keygroup::key_groups_of(i, 128, parallelism);
            // Memory and RocksDB in turn.
            let mut into: Box<dyn StateBackend> = if i % 2 == 0 {
                Box::new(MemoryStateBackend::with_key_groups(128))
            } else {
                let db = rocks.path().join(format!("{parallelism}-{i}"));
                Box::new(RocksDbStateBackend::open(&db, 128).unwrap())
            };
            weir_state::canonical::restore(&mut *into, 128, &files, &groups).unwrap();
            parts.push(into);
        }
        let mut timers = 0;
        for (j, p) in parts.iter_mut().enumerate() {
            // Ids come from the file: the names match, whatever order.
            assert_eq!(p.register("m", StateKind::Map).unwrap(), m);
            for domain in [TimeDomain::EventTime, TimeDomain::ProcessingTime] {
                for t in p.take_due_timers(domain, i64::MAX, 10_000).unwrap() {
                    // Each timer with its key's state, at its time.
                    let k = String::from_utf8(t.key.clone()).unwrap();
                    let i: i64 = k[1..].parse().unwrap();
                    let owner = weir_model::keygroup::subtask_for_key(&t.key, 128, parallelism);
                    assert_eq!(owner, j as u32, "{k}'s timer in subtask {j}");
                    let at = if domain == TimeDomain::EventTime {
                        i
                    } else {
                        5000 + i
                    };
                    assert_eq!(t.time, at);
                    timers += 1;
                }
            }
        }
        assert_eq!(timers, 1000);
        for i in 0..500 {
            let k = format!("k{i}");
            let owner = weir_model::keygroup::subtask_for_key(k.as_bytes(), 128, parallelism);
            for (j, p) in parts.iter().enumerate() {
                let value = p.get_value(v, k.as_bytes()).unwrap();
                if j as u32 == owner {
                    assert_eq!(value, Some(i.to_string().into_bytes()));
                    assert_eq!(p.get_list(l, k.as_bytes()).unwrap(), bytes(&["a", &k]));
                    assert_eq!(p.get_entries(m, k.as_bytes()).unwrap().len(), 2);
                } else {
                    assert_eq!(value, None, "{k} in subtask {j} of {parallelism}");
                }
            }
        }
    }
}

/// A restore keeps only the key groups it is given (rescaling).
#[test]
fn a_memory_restore_keeps_its_key_groups() {
    let mut b = MemoryStateBackend::with_key_groups(16);
    let v = b.register("v", StateKind::Value).unwrap();
    for i in 0..100 {
        b.apply(put(v, &format!("k{i}"), "1")).unwrap();
        b.register_timer(timer(&format!("k{i}"), i, TimeDomain::EventTime))
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let snap = b.snapshot(dir.path()).unwrap();
    let (mut low, mut high) = (
        MemoryStateBackend::restore(&[snap.files[0].path.clone()], 16, 0..8).unwrap(),
        MemoryStateBackend::restore(&[snap.files[0].path.clone()], 16, 8..16).unwrap(),
    );
    for i in 0..100 {
        let k = format!("k{i}");
        let group = weir_model::keygroup::key_group(k.as_bytes(), 16);
        let (mine, other) = if group < 8 {
            (&low, &high)
        } else {
            (&high, &low)
        };
        assert_eq!(
            mine.get_value(v, k.as_bytes()).unwrap(),
            Some(b"1".to_vec())
        );
        assert_eq!(other.get_value(v, k.as_bytes()).unwrap(), None);
    }
    let timers = low
        .take_due_timers(TimeDomain::EventTime, 100, 1000)
        .unwrap()
        .len()
        + high
            .take_due_timers(TimeDomain::EventTime, 100, 1000)
            .unwrap()
            .len();
    assert_eq!(timers, 100);
    // Garbage is an error, not a panic.
    std::fs::write(dir.path().join("bad"), b"WEIRSTATE1\0\0").unwrap();
    assert!(MemoryStateBackend::restore(&[dir.path().join("bad")], 16, 0..16).is_err());
    // A file of another max parallelism is refused, naming both.
    let e = MemoryStateBackend::restore(&[snap.files[0].path.clone()], 32, 0..32)
        .err()
        .unwrap();
    assert!(format!("{e:#}").contains("max parallelism of 16"), "{e:#}");
}

/// What RocksDB keeps survives closing and opening its directory again
/// (a restored checkpoint is such a directory): states, values and timers.
#[test]
fn rocksdb_state_survives_reopening_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let copy = dir.path().join("copy");
    {
        let mut b = RocksDbStateBackend::open(&path, 16).unwrap();
        let v = b.register("v", StateKind::Value).unwrap();
        let l = b.register("l", StateKind::List).unwrap();
        b.apply(put(v, "k", "1")).unwrap();
        b.apply(StateOp::AppendList {
            target: key(l, "k"),
            values: bytes(&["a"]),
        })
        .unwrap();
        b.register_timer(timer("k", 42, TimeDomain::EventTime))
            .unwrap();
        b.register_timer(timer("j", 7, TimeDomain::ProcessingTime))
            .unwrap();
        // The backend removes its own directory when dropped: keep a copy
        // of its files, as a checkpoint would.
        b.flush().unwrap();
        copy_dir(&path, &copy);
    }
    assert!(!path.exists());
    let mut b = RocksDbStateBackend::open(&copy, 16).unwrap();
    let l = b.register("l", StateKind::List).unwrap();
    let v = b.register("v", StateKind::Value).unwrap();
    assert_eq!((v, l), (0, 1), "ids as first declared");
    assert_eq!(b.get_value(v, b"k").unwrap(), Some(b"1".to_vec()));
    assert_eq!(b.get_list(l, b"k").unwrap(), bytes(&["a"]));
    assert_eq!(b.next_timer(TimeDomain::EventTime), Some(42));
    assert_eq!(b.next_timer(TimeDomain::ProcessingTime), Some(7));
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// A manual clock: processing time under the test's control.
fn manual_clock() -> (Arc<AtomicI64>, weir_state::ttl::Clock) {
    let now = Arc::new(AtomicI64::new(0));
    let read = now.clone();
    (now, Arc::new(move || read.load(Ordering::Relaxed)))
}

fn ttl(ms: u64, refresh_on_read: bool) -> Option<StateTtl> {
    Some(StateTtl {
        ttl_ms: ms,
        refresh_on_read,
    })
}

fn values_lists_and_map_entries_expire_by_their_time_to_live(s: Subject) {
    let (now, clock) = manual_clock();
    let mut b = TtlBackend::new(s.backend).with_clock(clock);
    let at = |t: i64| now.store(t, Ordering::Relaxed);
    let v = b
        .declare_ttl("v", StateKind::Value, ttl(100, false))
        .unwrap();
    let r = b
        .declare_ttl("r", StateKind::Value, ttl(100, true))
        .unwrap();
    let l = b
        .declare_ttl("l", StateKind::List, ttl(100, false))
        .unwrap();
    let m = b.declare_ttl("m", StateKind::Map, ttl(100, false)).unwrap();
    let plain = b.register("plain", StateKind::Value).unwrap();
    assert!(
        b.declare_ttl("zero", StateKind::Value, ttl(0, false))
            .is_err()
    );
    b.apply_all(
        vec![
            put(v, "k1", "v1"),
            put(r, "k1", "r1"),
            StateOp::AppendList {
                target: key(l, "k1"),
                values: bytes(&["a"]),
            },
            StateOp::PutEntry {
                target: key(m, "k1"),
                map_key: b"x".to_vec(),
                value: b"1".to_vec(),
            },
            put(plain, "k1", "p"),
        ],
        Vec::new(),
    )
    .unwrap();
    at(50);
    // A write renews; a read renews only the state that says so.
    assert_eq!(b.get_value(r, b"k1").unwrap(), Some(b"r1".to_vec()));
    assert_eq!(b.get_value(v, b"k1").unwrap(), Some(b"v1".to_vec()));
    b.apply_all(
        vec![
            put(v, "k2", "v2"),
            StateOp::AppendList {
                target: key(l, "k1"),
                values: bytes(&["b"]),
            },
            StateOp::PutEntry {
                target: key(m, "k1"),
                map_key: b"y".to_vec(),
                value: b"2".to_vec(),
            },
        ],
        Vec::new(),
    )
    .unwrap();
    at(99);
    assert_eq!(b.get_value(v, b"k1").unwrap(), Some(b"v1".to_vec()));
    assert_eq!(b.get_list(l, b"k1").unwrap(), bytes(&["a", "b"]));
    at(100);
    assert_eq!(b.get_value(v, b"k1").unwrap(), None, "expired at 100");
    assert_eq!(b.get_value(v, b"k2").unwrap(), Some(b"v2".to_vec()));
    assert_eq!(b.get_value(r, b"k1").unwrap(), Some(b"r1".to_vec()));
    assert_eq!(b.get_list(l, b"k1").unwrap(), bytes(&["b"]));
    assert_eq!(b.get_entry(m, b"k1", b"x").unwrap(), None);
    assert_eq!(
        b.get_entries(m, b"k1").unwrap(),
        vec![(b"y".to_vec(), b"2".to_vec())]
    );
    assert_eq!(b.get_value(plain, b"k1").unwrap(), Some(b"p".to_vec()));
    // The bulk read of a batch: expired and never-set alike are absent.
    let (mut data, mut ends, mut present) = (Vec::new(), Vec::new(), Vec::new());
    let keys: [&[u8]; 3] = [b"k1", b"k2", b"k3"];
    b.read_values(
        &[v, plain],
        &mut keys.iter().copied(),
        &mut data,
        &mut ends,
        &mut present,
    )
    .unwrap();
    assert_eq!(present, [false, true, true, false, false, false]);
    assert_eq!(&data[..], b"pv2");
    b.apply_all(Vec::new(), Vec::new()).unwrap();
    at(150);
    assert_eq!(b.get_value(v, b"k2").unwrap(), None);
    // Renewed by the read at 100, until 200.
    assert_eq!(b.get_value(r, b"k1").unwrap(), Some(b"r1".to_vec()));
    assert_eq!(b.get_list(l, b"k1").unwrap(), Vec::<Vec<u8>>::new());
    assert!(b.get_entries(m, b"k1").unwrap().is_empty());
    // Written again, a key starts over.
    b.apply(put(v, "k1", "again")).unwrap();
    assert_eq!(b.get_value(v, b"k1").unwrap(), Some(b"again".to_vec()));
    at(249);
    assert_eq!(b.get_value(v, b"k1").unwrap(), Some(b"again".to_vec()));
    at(250);
    // Renewed by the read at 150, until 250.
    assert_eq!(b.get_value(r, b"k1").unwrap(), None);
    // Packed puts are stamped as well.
    let puts = PackedPuts::new(v, packed(&["p1", "p2"]), packed(&["1", "2"])).unwrap();
    b.apply(StateOp::PutValues(puts)).unwrap();
    assert_eq!(b.get_value(v, b"p2").unwrap(), Some(b"2".to_vec()));
    at(349);
    assert_eq!(b.get_value(v, b"p1").unwrap(), Some(b"1".to_vec()));
    at(350);
    assert_eq!(b.get_value(v, b"p2").unwrap(), None);
}

/// Counts a canonical file's entries per state name.
#[derive(Default)]
struct Count {
    names: Vec<(String, bool)>,
    entries: std::collections::BTreeMap<String, usize>,
}

impl weir_state::canonical::Visitor for Count {
    fn state(&mut self, d: &weir_state::Declared) -> anyhow::Result<u32> {
        self.names.push((d.name.clone(), d.stamped));
        Ok(self.names.len() as u32 - 1)
    }
    fn entry(
        &mut self,
        state: u32,
        _: Vec<u8>,
        _: weir_state::canonical::Entry,
    ) -> anyhow::Result<()> {
        *self
            .entries
            .entry(self.names[state as usize].0.clone())
            .or_default() += 1;
        Ok(())
    }
    fn timer(&mut self, _: Timer) -> anyhow::Result<()> {
        Ok(())
    }
}

fn expired_values_leave_full_snapshots_and_a_restore_keeps_the_time_to_live(s: Subject) {
    let (now, clock) = manual_clock();
    let mut b = TtlBackend::new(s.backend).with_clock(clock);
    let v = b
        .declare_ttl("v", StateKind::Value, ttl(10, false))
        .unwrap();
    let l = b.declare_ttl("l", StateKind::List, ttl(10, false)).unwrap();
    let plain = b.register("plain", StateKind::Value).unwrap();
    for i in 0..200 {
        let k = format!("k{i}");
        b.apply_all(
            vec![
                put(v, &k, "x"),
                put(plain, &k, "y"),
                StateOp::AppendList {
                    target: key(l, &k),
                    values: bytes(&["old"]),
                },
            ],
            Vec::new(),
        )
        .unwrap();
    }
    now.store(5, Ordering::Relaxed);
    b.apply_all(
        (0..50)
            .map(|i| put(v, &format!("k{i}"), "fresh"))
            .chain((0..20).map(|i| StateOp::AppendList {
                target: key(l, &format!("k{i}")),
                values: bytes(&["new"]),
            }))
            .collect(),
        Vec::new(),
    )
    .unwrap();
    now.store(12, Ordering::Relaxed);
    let dir = tempfile::tempdir().unwrap();
    let snap = b.savepoint(dir.path()).unwrap();
    let mut count = Count::default();
    weir_state::canonical::read(&snap.files[0].path, &mut count).unwrap();
    assert_eq!(
        count.names,
        [
            ("v".to_owned(), true),
            ("l".to_owned(), true),
            ("plain".to_owned(), false)
        ]
    );
    let entries = |n: &str| count.entries.get(n).copied().unwrap_or(0);
    assert_eq!(entries("v"), 50, "only the values written at 5 live at 12");
    assert_eq!(
        entries("l"),
        20,
        "only the lists with an element added at 5"
    );
    assert_eq!(entries("plain"), 200);
    // Restored, the states keep their stamps: declared without a
    // time-to-live they are refused, and with one they expire on time.
    let mut r = MemoryStateBackend::restore(&[snap.files[0].path.clone()], 128, 0..128).unwrap();
    let err = r.declare_ttl("v", StateKind::Value, None).unwrap_err();
    assert!(err.contains("time-to-live"), "{err}");
    let (later, clock) = manual_clock();
    later.store(12, Ordering::Relaxed);
    let mut r = TtlBackend::new(Box::new(r)).with_clock(clock);
    let err = r.register("v", StateKind::Value).unwrap_err();
    assert!(err.contains("time-to-live"), "{err}");
    let v = r
        .declare_ttl("v", StateKind::Value, ttl(1000, false))
        .unwrap();
    assert_eq!(r.get_value(v, b"k0").unwrap(), Some(b"fresh".to_vec()));
    let l = r
        .declare_ttl("l", StateKind::List, ttl(1000, false))
        .unwrap();
    assert_eq!(r.get_list(l, b"k0").unwrap(), bytes(&["new"]));
    later.store(15, Ordering::Relaxed);
    assert_eq!(r.get_value(v, b"k0").unwrap(), None, "stamped at 5 + 10");
    let err = r
        .declare_ttl("plain", StateKind::Value, ttl(5, false))
        .unwrap_err();
    assert!(err.contains("time-to-live"), "{err}");
}

/// RocksDB drops expired values when it compacts: state whose keys never
/// come back stops growing.
#[test]
fn rocksdb_compactions_drop_expired_values() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = RocksDbStateBackend::open(&dir.path().join("db"), 128).unwrap();
    let (now, clock) = manual_clock();
    db.expiry().set_clock(clock);
    let v = db.declare("v", StateKind::Value, true).unwrap();
    let plain = db.declare("plain", StateKind::Value, false).unwrap();
    let mut ops = Vec::new();
    for i in 0..2000 {
        let k = format!("k{i}");
        let at = if i < 100 { 1_000 } else { 10 };
        ops.push(StateOp::PutValue {
            target: key(v, &k),
            value: weir_state::ttl::stamp(at, b"x"),
        });
        if i < 10 {
            ops.push(put(plain, &k, "y"));
        }
    }
    db.apply_all(ops, Vec::new()).unwrap();
    db.flush().unwrap();
    assert!(db.size().entries >= 2000, "{:?}", db.size());
    now.store(500, Ordering::Relaxed);
    db.compact().unwrap();
    assert_eq!(db.size().entries, 110, "{:?}", db.size());
    assert!(db.get_value(v, b"k0").unwrap().is_some());
    assert!(db.get_value(plain, b"k5").unwrap().is_some());
}

/// A list at least half of whose elements expired is rewritten without them
/// by a pass over the stored lists, a bounded step at a time (a compaction
/// can only drop a whole entry): an append-only list whose keys stay busy
/// stops growing.
#[test]
fn rocksdb_rewrites_lists_without_their_expired_elements_a_step_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = RocksDbStateBackend::open(&dir.path().join("db"), 128).unwrap();
    let l = db.declare("l", StateKind::List, true).unwrap();
    let plain = db.declare("plain", StateKind::List, false).unwrap();
    let keys = RocksDbStateBackend::PURGE_STEP + 500;
    let stamped = |at: i64, v: &str| weir_state::ttl::stamp(at, v.as_bytes());
    let append = |k: &str, values: Vec<Vec<u8>>| StateOp::AppendList {
        target: key(l, k),
        values,
    };
    let mut ops: Vec<StateOp> = (0..keys)
        .map(|i| {
            append(
                &format!("k{i}"),
                vec![stamped(10, "old"), stamped(1_000, "new")],
            )
        })
        .collect();
    ops.push(append("gone", vec![stamped(10, "old")]));
    // One element of three expired: not yet worth a rewrite.
    ops.push(append(
        "mostly",
        vec![stamped(10, "a"), stamped(1_000, "b"), stamped(1_000, "c")],
    ));
    ops.push(StateOp::AppendList {
        target: key(plain, "p"),
        values: vec![b"kept".to_vec()],
    });
    db.apply_all(ops, Vec::new()).unwrap();
    // A pass of more than one step.
    let mut steps = 1;
    while db.purge_expired(500) {
        steps += 1;
        assert!(steps < 100);
    }
    assert!(steps >= 2, "{steps} steps");
    for i in 0..keys {
        assert_eq!(
            db.get_list(l, format!("k{i}").as_bytes()).unwrap(),
            vec![stamped(1_000, "new")],
            "k{i}: as stored, its expired element gone"
        );
    }
    assert!(db.get_list(l, b"gone").unwrap().is_empty());
    assert_eq!(db.get_list(l, b"mostly").unwrap().len(), 3);
    assert_eq!(db.get_list(plain, b"p").unwrap(), bytes(&["kept"]));
}

/// The time-to-live layer runs that pass once a minute, a step per batch
/// until it is through.
#[test]
fn the_time_to_live_layer_takes_a_rocksdb_pass_to_its_end_a_step_per_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (now, clock) = manual_clock();
    let db = RocksDbStateBackend::open(&dir.path().join("db"), 128).unwrap();
    let mut b = TtlBackend::new(Box::new(db)).with_clock(clock);
    let l = b
        .declare_ttl("l", StateKind::List, ttl(50_000, false))
        .unwrap();
    let keys = RocksDbStateBackend::PURGE_STEP + 500;
    let append_all = |b: &mut TtlBackend, v: &str| {
        let ops = (0..keys)
            .map(|i| StateOp::AppendList {
                target: key(l, &format!("k{i}")),
                values: bytes(&[v]),
            })
            .collect();
        b.apply_all(ops, Vec::new()).unwrap();
    };
    append_all(&mut b, "old"); // expires at 50,000
    now.store(40_000, Ordering::Relaxed);
    append_all(&mut b, "new"); // expires at 90,000
    let stored = |b: &TtlBackend, i: usize| {
        b.inner()
            .get_list(l, format!("k{i}").as_bytes())
            .unwrap()
            .len()
    };
    assert_eq!(stored(&b, keys - 1), 2);
    // Its minute is up: the pass's first step, then the rest with the
    // next batch.
    now.store(weir_state::ttl::PURGE_EVERY_MS, Ordering::Relaxed);
    b.apply_all(Vec::new(), Vec::new()).unwrap();
    b.apply_all(Vec::new(), Vec::new()).unwrap();
    for i in 0..keys {
        assert_eq!(stored(&b, i), 1, "k{i}");
    }
}

/// In memory, what expired goes now and then even without snapshots (a job
/// without checkpoints does not grow either).
#[test]
fn the_memory_backend_drops_expired_values_between_snapshots() {
    let (now, clock) = manual_clock();
    let mut b = TtlBackend::new(Box::new(MemoryStateBackend::new())).with_clock(clock);
    let v = b
        .declare_ttl("v", StateKind::Value, ttl(10, false))
        .unwrap();
    let plain = b.register("plain", StateKind::Value).unwrap();
    let ops = (0..100)
        .map(|i| put(v, &format!("k{i}"), "x"))
        .chain([put(plain, "p", "y")])
        .collect();
    b.apply_all(ops, Vec::new()).unwrap();
    assert_eq!(b.size().entries, 101);
    now.store(weir_state::ttl::PURGE_EVERY_MS - 1, Ordering::Relaxed);
    b.apply_all(Vec::new(), Vec::new()).unwrap();
    assert_eq!(b.size().entries, 101, "not yet its turn");
    now.store(weir_state::ttl::PURGE_EVERY_MS, Ordering::Relaxed);
    b.apply_all(Vec::new(), Vec::new()).unwrap();
    assert_eq!(b.size().entries, 1);
    assert_eq!(b.get_value(plain, b"p").unwrap(), Some(b"y".to_vec()));
}

/// The SDKs hand a list they read and added to over as a replacement: its
/// old elements keep the expiry time they were added with (unless reads
/// renew them).
fn a_list_read_and_added_to_keeps_its_elements_expiry(s: Subject) {
    let (now, clock) = manual_clock();
    let mut b = TtlBackend::new(s.backend).with_clock(clock);
    let at = |t: i64| now.store(t, Ordering::Relaxed);
    let l = b
        .declare_ttl("l", StateKind::List, ttl(100, false))
        .unwrap();
    let r = b.declare_ttl("r", StateKind::List, ttl(100, true)).unwrap();
    let append = |state, v: &[&str]| StateOp::AppendList {
        target: key(state, "k"),
        values: bytes(v),
    };
    b.apply_all(vec![append(l, &["a"]), append(r, &["a"])], Vec::new())
        .unwrap();
    at(50);
    assert_eq!(b.get_list(l, b"k").unwrap(), bytes(&["a"]));
    assert_eq!(b.get_list(r, b"k").unwrap(), bytes(&["a"]));
    let replace = |state, v: &[&str]| StateOp::ReplaceList {
        target: key(state, "k"),
        values: bytes(v),
    };
    b.apply_all(
        vec![replace(l, &["a", "b"]), replace(r, &["a", "b"])],
        Vec::new(),
    )
    .unwrap();
    at(100);
    assert_eq!(
        b.get_list(l, b"k").unwrap(),
        bytes(&["b"]),
        "`a` added at 0"
    );
    assert_eq!(
        b.get_list(r, b"k").unwrap(),
        bytes(&["a", "b"]),
        "read at 50"
    );
    b.apply_all(vec![replace(l, &["c", "b"])], Vec::new())
        .unwrap();
    at(150);
    assert_eq!(
        b.get_list(l, b"k").unwrap(),
        bytes(&["c"]),
        "`b` added at 50"
    );
    at(200);
    assert_eq!(b.get_list(r, b"k").unwrap(), Vec::<Vec<u8>>::new());
    at(199);
    assert_eq!(b.get_list(l, b"k").unwrap(), bytes(&["c"]));
}
