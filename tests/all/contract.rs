//! The contract through a real component: atomic batches, keyed state of
//! every kind, timers and side outputs.

use weir_host::{BatchContext, ErrorKind};
use weir_model::Record;
use weir_state::TimeDomain;

use crate::{instance, keyed, runtime, values};

fn ctx() -> BatchContext {
    BatchContext::default()
}

#[test]
fn a_failed_batch_leaves_no_outputs_and_no_state_changes() {
    let rt = runtime();
    let mut op = instance(&rt, "fragile");
    let out = op.process(vec![keyed("a"), keyed("a")], ctx()).unwrap();
    assert_eq!(
        values(&out.main),
        [serde_json::json!(["a", 1]), serde_json::json!(["a", 2])]
    );

    // The guest's own error: not a trap, and nothing of the batch applies.
    let err = op
        .process(vec![keyed("a"), keyed("b"), keyed("poison")], ctx())
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Guest);
    assert!(err.message.contains("poisoned record"), "{err}");
    let out = op.process(vec![keyed("a"), keyed("b")], ctx()).unwrap();
    assert_eq!(
        values(&out.main),
        [serde_json::json!(["a", 3]), serde_json::json!(["b", 1])]
    );

    // A trap mid-batch: the same, and the state survives the rebuild.
    let err = op
        .process(vec![keyed("a"), keyed("panic")], ctx())
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Trap);
    assert!(err.to_string().contains("fragile panicked"), "{err}");
    op.reset().unwrap();
    let out = op.process(vec![keyed("a")], ctx()).unwrap();
    assert_eq!(values(&out.main), [serde_json::json!(["a", 4])]);
}

#[test]
fn a_keyed_operator_rejects_records_without_a_key() {
    let rt = runtime();
    let mut op = instance(&rt, "fragile");
    let err = op
        .process(vec![Record::value(b"\"a\"".to_vec())], ctx())
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Guest);
    assert!(err.message.contains("has no key"), "{err}");
}

fn item(key: &str, item: &str, ts: i64) -> Record {
    Record {
        key: Some(serde_json::to_vec(key).unwrap().into()),
        value: serde_json::to_vec(&serde_json::json!({"item": item, "ts": ts}))
            .unwrap()
            .into(),
        timestamp: Some(ts),
    }
}

#[test]
fn list_and_map_state_timers_and_side_outputs() {
    let rt = runtime();
    let mut op = instance(&rt, "basket");
    let out = op
        .process(
            vec![
                item("k1", "apple", 100),
                item("k1", "pear", 102),
                item("k2", "apple", 105),
            ],
            ctx(),
        )
        .unwrap();
    assert!(out.main.is_empty());
    // A second batch reads what the first one wrote.
    let out = op
        .process(
            vec![item("k1", "apple", 103), item("k1", "late", 90)],
            ctx(),
        )
        .unwrap();
    assert_eq!(out.side.len(), 1);
    assert_eq!(out.side[0].0, "late");
    assert_eq!(values(&out.side[0].1), ["late"]);

    // Timers: one per (key, time); k1 has 100, 102, 103, 90 (+10), k2 105 (+10).
    assert_eq!(op.backend().next_timer(TimeDomain::EventTime), Some(100));
    let fired = op
        .fire_timers(
            TimeDomain::EventTime,
            112,
            BatchContext {
                watermark: Some(112),
                processing_time: 0,
            },
        )
        .unwrap();
    let fired = values(&fired.main.into_list());
    // k1's first timer (100) emits and clears everything of k1.
    assert_eq!(
        fired,
        [serde_json::json!({
            "key": "k1", "time": 100,
            "items": ["apple", "pear", "apple", "late"],
            "counts": [["apple", 2], ["late", 1], ["pear", 1]],
        })]
    );
    let fired = op
        .fire_timers(
            TimeDomain::EventTime,
            i64::MAX,
            BatchContext {
                watermark: Some(i64::MAX),
                processing_time: 0,
            },
        )
        .unwrap();
    assert_eq!(
        values(&fired.main.into_list()),
        [
            serde_json::json!({"key": "k2", "time": 115, "items": ["apple"], "counts": [["apple", 1]]})
        ]
    );
    assert_eq!(op.backend().next_timer(TimeDomain::EventTime), None);
}
